//! Storage conformance: one `run_*` function per behaviour, each taking a store, run against
//! every backend.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use serde_json::{Value, json};

use super::*;

fn obj(name: &str, data: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": data}})
}

fn put(v: Value) -> impl FnMut(Value) -> Update + Send {
    move |_| Update::Put(v.clone())
}

pub(super) async fn run_create_assigns_increasing_revisions(s: &dyn Storage) {
    let start = s.current_rv();
    let a = s.create("/cm/ns/a", obj("a", "1")).await.expect("create a");
    let b = s.create("/cm/ns/b", obj("b", "1")).await.expect("create b");
    assert_eq!(a.rv, start + 1);
    assert_eq!(b.rv, start + 2);
    let v = a.value().expect("json");
    assert_eq!(v["metadata"]["resourceVersion"], (start + 1).to_string());
    assert!(matches!(
        s.create("/cm/ns/a", obj("a", "2")).await,
        Err(StorageError::AlreadyExists { .. })
    ));
    assert_eq!(
        s.current_rv(),
        start + 2,
        "a failed create uses no revision"
    );
}

pub(super) async fn run_update_without_change_keeps_revision(s: &dyn Storage) {
    let a = s.create("/cm/ns/a", obj("a", "1")).await.expect("create");
    let mut same = put(a.value().expect("json"));
    let w = s
        .guaranteed_update("/cm/ns/a", &Preconditions::default(), &mut same)
        .await
        .expect("update");
    assert_eq!(w.outcome, Outcome::Unchanged);
    assert_eq!(w.stored.rv, a.rv);
    assert_eq!(s.current_rv(), a.rv);
    let mut changed = put(obj("a", "2"));
    let w = s
        .guaranteed_update("/cm/ns/a", &Preconditions::default(), &mut changed)
        .await
        .expect("update");
    assert_eq!(w.outcome, Outcome::Written);
    assert_eq!(w.stored.rv, a.rv + 1);
}

pub(super) async fn run_preconditions_are_checked(s: &dyn Storage) {
    let mut v = obj("a", "1");
    v["metadata"]["uid"] = json!("u1");
    let a = s.create("/cm/ns/a", v).await.expect("create");
    let stale = Preconditions {
        resource_version: Some(a.rv - 1),
        ..Default::default()
    };
    let mut f = put(obj("a", "2"));
    let err = s
        .guaranteed_update("/cm/ns/a", &stale, &mut f)
        .await
        .expect_err("stale rv");
    assert!(matches!(err, StorageError::Conflict { .. }), "{err:?}");
    let wrong_uid = Preconditions {
        uid: Some("u2".into()),
        ..Default::default()
    };
    let err = s
        .delete("/cm/ns/a", &wrong_uid)
        .await
        .expect_err("uid mismatch");
    match err {
        StorageError::Conflict { message } => assert_eq!(
            message,
            "Precondition failed: UID in precondition: u2, UID in object meta: u1"
        ),
        other => panic!("{other:?}"),
    }
    let right = Preconditions {
        uid: Some("u1".into()),
        resource_version: Some(a.rv),
    };
    s.delete("/cm/ns/a", &right).await.expect("delete");
    assert!(matches!(
        s.get("/cm/ns/a"),
        Err(StorageError::NotFound { .. })
    ));
}

pub(super) async fn run_list_pages_in_key_order(s: &dyn Storage) {
    for name in ["c", "a", "e", "b", "d"] {
        s.create(&format!("/cm/ns/{name}"), obj(name, "1"))
            .await
            .expect("create");
    }
    s.create("/cm/other/z", obj("z", "1"))
        .await
        .expect("create");
    let mut opts = ListOptions {
        limit: 2,
        ..Default::default()
    };
    let mut names = Vec::new();
    let mut pages = 0;
    loop {
        let page = s.list("/cm/ns/", &opts, &|_| true).expect("list");
        pages += 1;
        names.extend(
            page.items
                .iter()
                .map(|i| i.value().expect("json")["metadata"]["name"].clone()),
        );
        match page.continue_after {
            Some(k) => {
                opts.start_after = Some(k);
                opts.at = ListAt::Exact(page.rv);
            }
            None => break,
        }
    }
    assert_eq!(names, ["a", "b", "c", "d", "e"]);
    assert_eq!(pages, 3);
}

pub(super) async fn run_continued_list_shows_the_first_pages_snapshot(s: &dyn Storage) {
    for name in ["a", "b", "c", "d"] {
        s.create(&format!("/cm/ns/{name}"), obj(name, "1"))
            .await
            .expect("create");
    }
    let first = s
        .list(
            "/cm/ns/",
            &ListOptions {
                limit: 2,
                ..Default::default()
            },
            &|_| true,
        )
        .expect("list");
    // Changes after the first page must not show in the second.
    s.delete("/cm/ns/c", &Preconditions::default())
        .await
        .expect("delete");
    s.create("/cm/ns/bb", obj("bb", "1")).await.expect("create");
    let mut f = put(obj("d", "2"));
    s.guaranteed_update("/cm/ns/d", &Preconditions::default(), &mut f)
        .await
        .expect("update");
    let second = s
        .list(
            "/cm/ns/",
            &ListOptions {
                limit: 10,
                start_after: first.continue_after.clone(),
                at: ListAt::Exact(first.rv),
            },
            &|_| true,
        )
        .expect("list");
    let got: Vec<Value> = second
        .items
        .iter()
        .map(|i| i.value().expect("json"))
        .collect();
    let names: Vec<&str> = got
        .iter()
        .map(|v| v["metadata"]["name"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(names, ["c", "d"]);
    assert_eq!(got[1]["data"]["k"], "1", "d as it was at the first page");
}

pub(super) async fn run_watch_replays_from_a_revision(s: &dyn Storage) {
    let a = s.create("/cm/ns/a", obj("a", "1")).await.expect("create");
    let mut f = put(obj("a", "2"));
    s.guaranteed_update("/cm/ns/a", &Preconditions::default(), &mut f)
        .await
        .expect("update");
    s.create("/cm/zz/b", obj("b", "1")).await.expect("create");
    s.delete("/cm/ns/a", &Preconditions::default())
        .await
        .expect("delete");
    let mut w = s.watch("/cm/ns/", a.rv - 1).expect("watch");
    let mut got = Vec::new();
    for _ in 0..3 {
        let e = w.next().await.expect("event");
        got.push((e.kind, e.rv));
    }
    assert_eq!(
        got,
        [
            (EventType::Added, a.rv),
            (EventType::Modified, a.rv + 1),
            (EventType::Deleted, a.rv + 3)
        ]
    );
    assert!(w.try_next().expect("no error").is_none());
}

pub(super) async fn run_deleted_event_carries_the_deletion_revision(s: &dyn Storage) {
    s.create("/cm/ns/a", obj("a", "1")).await.expect("create");
    let from = s.current_rv();
    let d = s
        .delete("/cm/ns/a", &Preconditions::default())
        .await
        .expect("delete");
    let mut w = s.watch("/cm/", from).expect("watch");
    let e = w.next().await.expect("event");
    assert_eq!(e.kind, EventType::Deleted);
    assert_eq!(e.rv, d.rv);
    let v: Value = serde_json::from_slice(&e.object).expect("json");
    assert_eq!(v["metadata"]["resourceVersion"], d.rv.to_string());
    assert_eq!(v["data"]["k"], "1");
}

pub(super) async fn run_live_watch_sees_new_writes(s: Arc<dyn Storage>) {
    let mut w = s.watch("/cm/", s.current_rv()).expect("watch");
    let writer = {
        let s = s.clone();
        tokio::spawn(async move {
            for i in 0..50 {
                s.create(&format!("/cm/ns/{i:03}"), obj("x", "1"))
                    .await
                    .expect("create");
            }
        })
    };
    let mut last = 0;
    for _ in 0..50 {
        let e = tokio::time::timeout(std::time::Duration::from_secs(5), w.next())
            .await
            .expect("in time")
            .expect("event");
        assert!(e.rv > last, "events in revision order");
        last = e.rv;
    }
    writer.await.expect("writer");
}

pub(super) async fn run_concurrent_updates_never_lose_a_write(s: Arc<dyn Storage>) {
    s.create(
        "/cm/ns/counter",
        json!({"metadata": {"name": "counter"}, "n": 0}),
    )
    .await
    .expect("create");
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let s = s.clone();
            tokio::spawn(async move {
                for _ in 0..25 {
                    let mut inc = |mut v: Value| {
                        let n = v["n"].as_u64().unwrap_or(0);
                        v["n"] = json!(n + 1);
                        Update::Put(v)
                    };
                    s.guaranteed_update("/cm/ns/counter", &Preconditions::default(), &mut inc)
                        .await
                        .expect("update");
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.expect("task");
    }
    let v = s.get("/cm/ns/counter").expect("get").value().expect("json");
    assert_eq!(v["n"], 200);
}

pub(super) async fn run_watch_of_one_name_sees_that_name_only(s: &dyn Storage) {
    let from = s.current_rv();
    let a = s.create("/cm/ns/a", obj("a", "1")).await.expect("create");
    s.create("/cm/ns/ab", obj("ab", "1")).await.expect("create");
    s.create("/cm/ns/b", obj("b", "1")).await.expect("create");
    let other = s.create("/cm/zz/a", obj("a", "1")).await.expect("create");
    let mut w = s.watch_name("/cm/", "a", from).expect("watch");
    assert_eq!(w.next().await.expect("event").rv, a.rv);
    assert_eq!(w.next().await.expect("event").rv, other.rv);
    assert!(w.try_next().expect("no error").is_none(), "not ab, not b");
    // Live: a write to another name does not wake it, a write to its name does.
    let mut live = s.watch_name("/cm/ns/", "a", s.current_rv()).expect("watch");
    s.create("/cm/ns/c", obj("c", "1")).await.expect("create");
    assert!(
        tokio::time::timeout(std::time::Duration::from_millis(50), live.next())
            .await
            .is_err(),
        "asleep through another name's write"
    );
    let d = s
        .delete("/cm/ns/a", &Preconditions::default())
        .await
        .expect("delete");
    let e = live.next().await.expect("event");
    assert_eq!((e.kind, e.rv), (EventType::Deleted, d.rv));
}

async fn run_all(make: impl Fn() -> Arc<dyn Storage>) {
    run_create_assigns_increasing_revisions(&*make()).await;
    run_update_without_change_keeps_revision(&*make()).await;
    run_preconditions_are_checked(&*make()).await;
    run_list_pages_in_key_order(&*make()).await;
    run_continued_list_shows_the_first_pages_snapshot(&*make()).await;
    run_watch_replays_from_a_revision(&*make()).await;
    run_deleted_event_carries_the_deletion_revision(&*make()).await;
    run_live_watch_sees_new_writes(make()).await;
    run_watch_of_one_name_sees_that_name_only(&*make()).await;
    run_concurrent_updates_never_lose_a_write(make()).await;
}

fn memory_store() -> Arc<dyn Storage> {
    Store::open(Arc::new(MemoryBackend), StoreConfig::default()).expect("open")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_backend_conforms() {
    run_all(memory_store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wal_backend_conforms() {
    let dirs = std::sync::Mutex::new(Vec::new());
    run_all(|| {
        let dir = tempfile::tempdir().expect("tempdir");
        let backend = WalBackend::open(dir.path()).expect("open");
        dirs.lock().expect("lock").push(dir);
        Store::open(Arc::new(backend), StoreConfig::default()).expect("store") as Arc<dyn Storage>
    })
    .await;
}

#[tokio::test]
async fn a_wal_store_reopens_with_its_objects_and_clock() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (rv, deleted_rv) = {
        let s = Store::open(
            Arc::new(WalBackend::open(dir.path()).expect("open")),
            StoreConfig::default(),
        )
        .expect("store");
        let a = s.create("/cm/ns/a", obj("a", "1")).await.expect("create");
        s.create("/cm/ns/b", obj("b", "1")).await.expect("create");
        let d = s
            .delete("/cm/ns/b", &Preconditions::default())
            .await
            .expect("delete");
        (a.rv, d.rv)
    };
    let s = Store::open(
        Arc::new(WalBackend::open(dir.path()).expect("reopen")),
        StoreConfig::default(),
    )
    .expect("store");
    assert_eq!(s.get("/cm/ns/a").expect("a survives").rv, rv);
    assert!(matches!(
        s.get("/cm/ns/b"),
        Err(StorageError::NotFound { .. })
    ));
    assert_eq!(
        s.current_rv(),
        deleted_rv,
        "the clock resumes after the deletion"
    );
    let c = s.create("/cm/ns/c", obj("c", "1")).await.expect("create");
    assert_eq!(c.rv, deleted_rv + 1);
}

#[tokio::test]
async fn a_failed_backend_write_is_reported_and_not_published() {
    let (backend, failing) = FaultyBackend::new(MemoryBackend);
    let s = Store::open(Arc::new(backend), StoreConfig::default()).expect("open");
    s.create("/cm/ns/a", obj("a", "1")).await.expect("create");
    let mut w = s.watch("/cm/", s.current_rv()).expect("watch");
    failing.store(true, Ordering::SeqCst);
    let err = s
        .create("/cm/ns/b", obj("b", "1"))
        .await
        .expect_err("injected");
    assert!(matches!(err, StorageError::Backend(BackendError::Injected)));
    assert!(
        w.try_next().expect("no error").is_none(),
        "nothing published"
    );
}

#[tokio::test]
async fn compacted_history_expires_old_watches_and_lists() {
    let s = Store::open(
        Arc::new(MemoryBackend),
        StoreConfig::default().history_capacity(3),
    )
    .expect("open");
    for i in 0..10 {
        s.create(&format!("/cm/ns/{i}"), obj("x", "1"))
            .await
            .expect("create");
    }
    assert!(matches!(
        s.watch("/cm/", 2),
        Err(StorageError::Expired { requested: 2, .. })
    ));
    let opts = ListOptions {
        at: ListAt::Exact(2),
        ..Default::default()
    };
    assert!(matches!(
        s.list("/cm/", &opts, &|_| true),
        Err(StorageError::Expired { .. })
    ));
    assert!(s.watch("/cm/", 8).is_ok());
}

/// A backend that hands the store records an older server wrote, then keeps nothing.
struct Preloaded(std::sync::Mutex<Option<Loaded>>);

impl Backend for Preloaded {
    fn load(&self) -> Result<Loaded, BackendError> {
        Ok(self.0.lock().expect("lock").take().unwrap_or_default())
    }
    fn submit(&self, _records: Vec<Record>, done: backend::Durable) {
        done(Ok(()));
    }
}

/// A ConfigMap nested `depth` levels deep, as JSON text (built without recursion).
fn deep_bytes(name: &str, rv: u64, depth: usize) -> bytes::Bytes {
    let deep = format!("{}1{}", "[".repeat(depth - 1), "]".repeat(depth - 1));
    bytes::Bytes::from(format!(
        r#"{{"metadata":{{"name":"{name}","resourceVersion":"{rv}"}},"x":{deep}}}"#
    ))
}

#[tokio::test]
async fn an_unreadable_object_from_older_data_is_reported_skipped_and_deletable() {
    let record = |key: &str, rv: u64, bytes: bytes::Bytes| Record {
        key: Arc::from(key),
        rv,
        value: Some(bytes),
    };
    let readable = |name: &str, rv: u64| {
        let mut v = obj(name, "1");
        v["metadata"]["resourceVersion"] = json!(rv.to_string());
        bytes::Bytes::from(serde_json::to_vec(&v).expect("encodes"))
    };
    let backend = Preloaded(std::sync::Mutex::new(Some(Loaded {
        records: vec![
            record("/cm/ns/a", 1, readable("a", 1)),
            record("/cm/ns/b", 2, deep_bytes("b", 2, 130)),
            record("/cm/ns/c", 3, readable("c", 3)),
            record(
                "/cm/ns/d",
                4,
                deep_bytes("d", 4, crate::api::limits::MAX_DEPTH),
            ),
        ],
        max_rv: 4,
    })));
    let s = Store::open(Arc::new(backend), StoreConfig::default()).expect("open");
    // Reads and writes of it say why; the readable ones (at the limit too) are untouched.
    let unreadable = |r: Result<Written, StorageError>| matches!(r, Err(StorageError::Unreadable { key, message }) if key == "/cm/ns/b" && message.contains("130 levels"));
    assert!(matches!(
        s.get("/cm/ns/b"),
        Err(StorageError::Unreadable { .. })
    ));
    s.get("/cm/ns/d").expect("at the limit");
    let mut noop = |v: Value| Update::Put(v);
    assert!(unreadable(
        s.guaranteed_update("/cm/ns/b", &Preconditions::default(), &mut noop)
            .await
    ));
    assert!(matches!(
        s.delete("/cm/ns/b", &Preconditions::default()).await,
        Err(StorageError::Unreadable { .. })
    ));
    // Lists leave it out and name it on the page whose range holds it.
    let all = s
        .list("/cm/", &ListOptions::default(), &|_| true)
        .expect("list");
    let keys: Vec<Value> = all
        .items
        .iter()
        .map(|i| i.value().expect("json")["metadata"]["name"].clone())
        .collect();
    assert_eq!(keys, [json!("a"), json!("c"), json!("d")]);
    assert_eq!(all.unreadable.len(), 1);
    assert_eq!(all.unreadable[0].0, "/cm/ns/b");
    let first = s
        .list(
            "/cm/",
            &ListOptions {
                limit: 1,
                ..Default::default()
            },
            &|_| true,
        )
        .expect("page");
    assert_eq!(first.items.len(), 1);
    assert_eq!(
        first.unreadable.len(),
        1,
        "b lies before the next readable item"
    );
    let second = s
        .list(
            "/cm/",
            &ListOptions {
                limit: 1,
                start_after: first.continue_after.clone(),
                at: ListAt::Exact(first.rv),
            },
            &|_| true,
        )
        .expect("page");
    assert!(second.unreadable.is_empty());
    // Only an unreadable object goes through `delete_unreadable`, with no uid precondition.
    let stand_in = json!({"metadata": {"name": "b"}});
    assert!(matches!(
        s.delete_unreadable("/cm/ns/a", &Preconditions::default(), stand_in.clone())
            .await,
        Err(StorageError::Conflict { .. })
    ));
    let by_uid = Preconditions {
        uid: Some("u".into()),
        ..Default::default()
    };
    assert!(matches!(
        s.delete_unreadable("/cm/ns/b", &by_uid, stand_in.clone())
            .await,
        Err(StorageError::Conflict { .. })
    ));
    let from = s.current_rv();
    let gone = s
        .delete_unreadable("/cm/ns/b", &Preconditions::default(), stand_in)
        .await
        .expect("deleted");
    assert!(matches!(
        s.get("/cm/ns/b"),
        Err(StorageError::NotFound { .. })
    ));
    let mut w = s.watch("/cm/", from).expect("watch");
    let e = w.next().await.expect("event");
    assert_eq!(e.kind, EventType::Deleted);
    let v: Value = serde_json::from_slice(&e.object).expect("a readable final state");
    assert_eq!(v["metadata"]["name"], "b");
    assert_eq!(v["metadata"]["resourceVersion"], gone.rv.to_string());
    // A list at a revision before the deletion still leaves the old bytes out.
    let before = s
        .list(
            "/cm/",
            &ListOptions {
                at: ListAt::Exact(from),
                ..Default::default()
            },
            &|_| true,
        )
        .expect("list then");
    assert_eq!(before.items.len(), 3);
    assert_eq!(before.unreadable.len(), 1);
}

#[tokio::test]
async fn storage_refuses_to_write_what_it_could_not_read_back() {
    let s = memory_store();
    let mut deep = json!(1);
    for _ in 0..crate::api::limits::MAX_DEPTH {
        deep = json!([deep]);
    }
    let rv = s.current_rv();
    let err = s
        .create("/cm/ns/deep", json!({"x": deep}))
        .await
        .expect_err("too deep");
    assert!(err.to_string().contains("levels deep"), "{err}");
    assert_eq!(s.current_rv(), rv, "no revision used");
    assert!(matches!(
        s.get("/cm/ns/deep"),
        Err(StorageError::NotFound { .. })
    ));
}
