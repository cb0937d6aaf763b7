//! Tests of `controllers/gc`.

use std::sync::Arc;

use bytes::Bytes;
use serde_json::{Value, json};

use std::time::Duration;

use std::collections::HashMap;
use std::ops::{Deref, DerefMut};

use super::graph::{OwnerRef, Work};
use super::queue::{Job, Pending};
use super::{Action, Graph, RETRY_MAX, RETRY_MIN, WorkQueue};
use crate::api::propagation::Propagation as Policy;
use crate::storage::{EventType, Stored, WatchEvent};

/// Kinds the tests know: ConfigMaps are namespaced, ClusterRoles are not.
fn namespaced_kind(_group: &str, kind: &str) -> Option<bool> {
    match kind {
        "ConfigMap" => Some(true),
        "ClusterRole" => Some(false),
        _ => None,
    }
}

fn cm(uid: &str, ns: &str, owners: Value, finalizers: Value, deleting: bool) -> Value {
    let mut obj = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
        "name": uid, "namespace": ns, "uid": uid,
        "ownerReferences": owners, "finalizers": finalizers}});
    if deleting {
        obj["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
    }
    obj
}

fn owner(uid: &str, block: bool) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "name": uid, "uid": uid,
           "blockOwnerDeletion": block})
}

/// A graph and the storage its events come from: every event is applied to `objects` (keyed
/// by kind, namespace and name) before the graph sees it, so the graph's lookups read a
/// storage that is in step with its watch.
#[derive(Default)]
struct World {
    graph: Graph,
    objects: HashMap<(String, Option<String>, String), Stored>,
}

impl Deref for World {
    type Target = Graph;
    fn deref(&self) -> &Graph {
        &self.graph
    }
}

impl DerefMut for World {
    fn deref_mut(&mut self) -> &mut Graph {
        &mut self.graph
    }
}

fn event(world: &mut World, rv: u64, kind: EventType, obj: &Value) {
    let bytes = Bytes::from(serde_json::to_vec(obj).expect("json"));
    let id = (
        obj["kind"].as_str().expect("a kind").to_owned(),
        obj["metadata"]["namespace"].as_str().map(str::to_owned),
        obj["metadata"]["name"].as_str().expect("a name").to_owned(),
    );
    match kind {
        EventType::Deleted => world.objects.remove(&id),
        _ => world.objects.insert(
            id,
            Stored {
                rv,
                bytes: bytes.clone(),
            },
        ),
    };
    let World { graph, objects } = world;
    let lookup = |r: &OwnerRef, ns: Option<&str>| {
        let ns = (namespaced_kind(&r.group, &r.kind) == Some(true))
            .then_some(ns)
            .flatten();
        objects
            .get(&(r.kind.clone(), ns.map(str::to_owned), r.name.clone()))
            .cloned()
    };
    graph.apply(
        &WatchEvent::new(rv, kind, Arc::from("/k"), bytes, None),
        &lookup,
    );
}

/// Decides every marked object; returns `(uid, action)` sorted by uid.
fn decisions(graph: &mut World) -> Vec<(String, Action)> {
    let mut out: Vec<(String, Action)> = graph
        .drain_dirty(&namespaced_kind)
        .into_iter()
        .map(|w| (w.uid.to_string(), w.action))
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

fn strip(uids: &[&str]) -> Action {
    Action::Strip(uids.iter().map(|u| Arc::from(*u)).collect())
}

#[test]
fn a_dependent_of_an_owner_that_never_existed_is_deleted() {
    let mut g = World::default();
    event(
        &mut g,
        1,
        EventType::Added,
        &cm("d", "ns", json!([owner("ghost", false)]), json!([]), false),
    );
    assert_eq!(
        decisions(&mut g),
        vec![("d".into(), Action::Delete(Policy::Background))]
    );
}

#[test]
fn an_object_in_no_ownership_has_no_node_and_an_owner_only_while_it_has_dependents() {
    let mut g = World::default();
    event(
        &mut g,
        1,
        EventType::Added,
        &cm("o", "ns", json!([]), json!([]), false),
    );
    assert!(g.nodes.is_empty(), "an isolated object is not kept");
    assert!(g.dirty.is_empty(), "nor is it anything to decide");
    event(
        &mut g,
        2,
        EventType::Added,
        &cm("d", "ns", json!([owner("o", false)]), json!([]), false),
    );
    let mut held: Vec<&str> = g.nodes.keys().map(|k| &**k).collect();
    held.sort_unstable();
    assert_eq!(
        held,
        ["d", "o"],
        "the owner is read from storage when first named"
    );
    assert_eq!(g.nodes["o"].rv, 1);
    assert_eq!(decisions(&mut g), vec![]);
    // The dependent lets go of its owner: both are isolated again.
    event(
        &mut g,
        3,
        EventType::Modified,
        &cm("d", "ns", json!([]), json!([]), false),
    );
    assert!(
        g.nodes.is_empty(),
        "{:?}",
        g.nodes.keys().collect::<Vec<_>>()
    );
    assert!(g.dependents.is_empty());
    assert_eq!(decisions(&mut g), vec![]);
}

#[test]
fn an_owner_recreated_under_the_same_name_is_not_taken_for_the_one_referred_to() {
    let mut g = World::default();
    let mut recreated = cm("o", "ns", json!([]), json!([]), false);
    recreated["metadata"]["uid"] = json!("o-2");
    event(&mut g, 1, EventType::Added, &recreated);
    event(
        &mut g,
        2,
        EventType::Added,
        &cm("d", "ns", json!([owner("o", false)]), json!([]), false),
    );
    assert!(!g.nodes.contains_key("o-2"));
    assert_eq!(
        decisions(&mut g),
        vec![("d".into(), Action::Delete(Policy::Background))]
    );
}

#[test]
fn a_solid_owner_keeps_its_dependent_until_it_is_deleted() {
    let mut g = World::default();
    event(
        &mut g,
        1,
        EventType::Added,
        &cm("o", "ns", json!([]), json!([]), false),
    );
    event(
        &mut g,
        2,
        EventType::Added,
        &cm("d", "ns", json!([owner("o", true)]), json!([]), false),
    );
    assert_eq!(decisions(&mut g), vec![]);
    event(
        &mut g,
        3,
        EventType::Deleted,
        &cm("o", "ns", json!([]), json!([]), false),
    );
    assert_eq!(
        decisions(&mut g),
        vec![("d".into(), Action::Delete(Policy::Background))]
    );
}

#[test]
fn only_dangling_references_are_stripped_when_a_solid_owner_remains() {
    let mut g = World::default();
    event(
        &mut g,
        1,
        EventType::Added,
        &cm("o", "ns", json!([]), json!([]), false),
    );
    let owners = json!([owner("o", false), owner("ghost", false)]);
    event(
        &mut g,
        2,
        EventType::Added,
        &cm("d", "ns", owners, json!([]), false),
    );
    assert_eq!(decisions(&mut g), vec![("d".into(), strip(&["ghost"]))]);
}

#[test]
fn an_owner_in_another_namespace_counts_as_absent() {
    let mut g = World::default();
    event(
        &mut g,
        1,
        EventType::Added,
        &cm("o", "a", json!([]), json!([]), false),
    );
    event(
        &mut g,
        2,
        EventType::Added,
        &cm("d", "b", json!([owner("o", false)]), json!([]), false),
    );
    assert_eq!(
        decisions(&mut g),
        vec![("d".into(), Action::Delete(Policy::Background))]
    );
}

#[test]
fn a_cluster_scoped_object_naming_a_namespaced_owner_is_never_touched() {
    let mut g = World::default();
    let role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                      "metadata": {"name": "r", "uid": "r", "ownerReferences": [owner("ghost", false)]}});
    event(&mut g, 1, EventType::Added, &role);
    assert_eq!(decisions(&mut g), vec![]);
}

#[test]
fn a_reference_whose_name_or_kind_does_not_match_the_uid_is_dangling() {
    let mut g = World::default();
    event(
        &mut g,
        1,
        EventType::Added,
        &cm("o", "ns", json!([]), json!([]), false),
    );
    let wrong = json!([{"apiVersion": "v1", "kind": "Secret", "name": "o", "uid": "o"}]);
    event(
        &mut g,
        2,
        EventType::Added,
        &cm("d", "ns", wrong, json!([]), false),
    );
    assert_eq!(
        decisions(&mut g),
        vec![("d".into(), Action::Delete(Policy::Background))]
    );
}

#[test]
fn a_foreground_owner_waits_for_blocking_dependents_only() {
    let mut g = World::default();
    event(
        &mut g,
        1,
        EventType::Added,
        &cm("o", "ns", json!([]), json!([]), false),
    );
    event(
        &mut g,
        2,
        EventType::Added,
        &cm(
            "blocking",
            "ns",
            json!([owner("o", true)]),
            json!([]),
            false,
        ),
    );
    event(
        &mut g,
        3,
        EventType::Added,
        &cm("loose", "ns", json!([owner("o", false)]), json!([]), false),
    );
    assert_eq!(decisions(&mut g), vec![]);
    event(
        &mut g,
        4,
        EventType::Modified,
        &cm("o", "ns", json!([]), json!(["foregroundDeletion"]), true),
    );
    assert_eq!(
        decisions(&mut g),
        vec![
            ("blocking".into(), Action::Delete(Policy::Background)),
            ("loose".into(), Action::Delete(Policy::Background)),
        ]
    );
    event(
        &mut g,
        5,
        EventType::Deleted,
        &cm("loose", "ns", json!([owner("o", false)]), json!([]), false),
    );
    assert_eq!(decisions(&mut g), vec![], "a blocking dependent is left");
    event(
        &mut g,
        6,
        EventType::Deleted,
        &cm(
            "blocking",
            "ns",
            json!([owner("o", true)]),
            json!([]),
            false,
        ),
    );
    assert_eq!(
        decisions(&mut g),
        vec![("o".into(), Action::RemoveFinalizer("foregroundDeletion"))]
    );
}

#[test]
fn a_dependent_with_its_own_dependents_is_deleted_in_the_foreground_too() {
    let mut g = World::default();
    event(
        &mut g,
        1,
        EventType::Added,
        &cm("o", "ns", json!([]), json!([]), false),
    );
    event(
        &mut g,
        2,
        EventType::Added,
        &cm("mid", "ns", json!([owner("o", true)]), json!([]), false),
    );
    event(
        &mut g,
        3,
        EventType::Added,
        &cm("leaf", "ns", json!([owner("mid", true)]), json!([]), false),
    );
    decisions(&mut g);
    event(
        &mut g,
        4,
        EventType::Modified,
        &cm("o", "ns", json!([]), json!(["foregroundDeletion"]), true),
    );
    assert_eq!(
        decisions(&mut g),
        vec![("mid".into(), Action::Delete(Policy::Foreground))]
    );
}

#[test]
fn an_orphaning_owner_has_its_references_stripped_then_its_finalizer_removed() {
    let mut g = World::default();
    event(
        &mut g,
        1,
        EventType::Added,
        &cm("o", "ns", json!([]), json!([]), false),
    );
    event(
        &mut g,
        2,
        EventType::Added,
        &cm("d", "ns", json!([owner("o", true)]), json!([]), false),
    );
    decisions(&mut g);
    event(
        &mut g,
        3,
        EventType::Modified,
        &cm("o", "ns", json!([]), json!(["orphan"]), true),
    );
    assert_eq!(decisions(&mut g), vec![("d".into(), strip(&["o"]))]);
    event(
        &mut g,
        4,
        EventType::Modified,
        &cm("d", "ns", json!([]), json!([]), false),
    );
    assert_eq!(
        decisions(&mut g),
        vec![("o".into(), Action::RemoveFinalizer("orphan"))]
    );
}

#[test]
fn an_orphaning_owner_does_not_wait_for_a_dependent_held_by_its_own_finalizer() {
    let mut g = World::default();
    event(
        &mut g,
        1,
        EventType::Added,
        &cm("o", "ns", json!([]), json!(["orphan"]), true),
    );
    let held = cm(
        "d",
        "ns",
        json!([owner("o", true)]),
        json!(["example.com/x"]),
        true,
    );
    event(&mut g, 2, EventType::Added, &held);
    assert_eq!(decisions(&mut g), vec![("d".into(), strip(&["o"]))]);
}

#[test]
fn the_same_action_is_not_handed_out_twice_for_an_unchanged_object() {
    let mut g = World::default();
    let d = cm("d", "ns", json!([owner("ghost", false)]), json!([]), false);
    event(&mut g, 1, EventType::Added, &d);
    assert_eq!(decisions(&mut g).len(), 1);
    g.dirty.insert(Arc::from("d"));
    assert_eq!(decisions(&mut g), vec![]);
    // A failed action is decided again when its object is rechecked.
    let again = g.recheck(Arc::from("d"), &namespaced_kind);
    assert_eq!(
        again.map(|w| w.action),
        Some(Action::Delete(Policy::Background))
    );
    assert_eq!(decisions(&mut g), vec![], "and not handed out twice");
    assert!(g.recheck(Arc::from("gone"), &namespaced_kind).is_none());
    // An older event never replaces a newer state.
    event(
        &mut g,
        0,
        EventType::Modified,
        &cm("d", "ns", json!([]), json!([]), false),
    );
    assert_eq!(g.nodes.get("d").map(|n| n.rv), Some(1));
}

#[test]
fn an_object_being_deleted_is_left_to_its_own_finalizers() {
    let mut g = World::default();
    let d = cm(
        "d",
        "ns",
        json!([owner("ghost", false)]),
        json!(["example.com/x"]),
        true,
    );
    event(&mut g, 1, EventType::Added, &d);
    assert_eq!(decisions(&mut g), vec![]);
}

fn work(uid: &str, action: Action) -> Work {
    Work {
        uid: Arc::from(uid),
        rv: 1,
        group: String::new(),
        kind: "ConfigMap".into(),
        namespace: Some("ns".into()),
        name: uid.into(),
        action,
    }
}

/// The action a job carries, if any.
fn action_of(job: &Job) -> Option<(&str, &Action)> {
    match &job.pending {
        Some(Pending::Work(w)) => Some((&*w.uid, &w.action)),
        _ => None,
    }
}

#[tokio::test]
async fn the_queue_never_hands_one_object_to_two_workers_and_keeps_the_newest_action() {
    let q = WorkQueue::new();
    q.push(work("a", Action::Delete(Policy::Background)));
    q.push(work("a", Action::Delete(Policy::Foreground)));
    q.push(work("b", Action::RemoveFinalizer("orphan")));
    let first = q.next().await.expect("work");
    assert_eq!(
        action_of(&first),
        Some(("a", &Action::Delete(Policy::Foreground))),
        "the newer action replaced the queued one"
    );
    // Pushed while `a` is in progress: held back until it is done.
    q.push(work("a", Action::Delete(Policy::Orphan)));
    let second = q.next().await.expect("work");
    assert_eq!(action_of(&second).map(|(uid, _)| uid), Some("b"));
    assert!(q.uids.is_empty(), "a is not handed out while it is held");
    drop(first);
    let third = q.next().await.expect("work");
    assert_eq!(
        action_of(&third),
        Some(("a", &Action::Delete(Policy::Orphan)))
    );
    q.close();
    assert!(q.next().await.is_none());
}

#[tokio::test]
async fn objects_stored_before_the_collector_starts_are_judged_from_its_first_list() {
    use crate::registry::Registry;
    use crate::storage::{MemoryBackend, Storage, Store, StoreConfig};
    let store = Store::open(Arc::new(MemoryBackend), StoreConfig::default()).expect("store");
    let registry = Arc::new(Registry::new(store));
    let put = |key: &'static str, obj: Value| {
        let registry = registry.clone();
        async move { registry.store().create(key, obj).await.expect("create") }
    };
    put(
        "/core/configmaps/ns/o",
        cm("o", "ns", json!([]), json!([]), false),
    )
    .await;
    put(
        "/core/configmaps/ns/kept",
        cm("kept", "ns", json!([owner("o", true)]), json!([]), false),
    )
    .await;
    put(
        "/core/configmaps/ns/lost",
        cm(
            "lost",
            "ns",
            json!([owner("ghost", true)]),
            json!([]),
            false,
        ),
    )
    .await;
    let stop = tokio_util::sync::CancellationToken::new();
    let task = tokio::spawn(super::run(registry.clone(), stop.clone()));
    let gone = tokio::time::timeout(Duration::from_secs(10), async {
        while registry.store().get("/core/configmaps/ns/lost").is_ok() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    assert!(
        gone.is_ok(),
        "the dependent of a missing owner was collected"
    );
    assert!(registry.store().get("/core/configmaps/ns/kept").is_ok());
    stop.cancel();
    task.await.expect("the collector stops");
}

#[tokio::test]
async fn a_collector_behind_a_tiny_history_rebuilds_its_graph_and_still_collects() {
    use crate::registry::Registry;
    use crate::storage::{MemoryBackend, Storage, Store, StoreConfig};
    let store = Store::open(
        Arc::new(MemoryBackend),
        StoreConfig::default().history_capacity(4),
    )
    .expect("store");
    let registry = Arc::new(Registry::new(store));
    let stop = tokio_util::sync::CancellationToken::new();
    let task = tokio::spawn(super::run(registry.clone(), stop.clone()));
    // Let the collector list and start watching.
    tokio::time::sleep(Duration::from_millis(20)).await;
    let store = registry.store();
    store
        .create(
            "/core/configmaps/ns/lost",
            cm(
                "lost",
                "ns",
                json!([owner("ghost", true)]),
                json!([]),
                false,
            ),
        )
        .await
        .expect("create");
    // Far more writes than the history holds, without giving the collector a turn between
    // (the test runtime has one thread), so its watch expires and it lists again.
    for i in 0..64 {
        let uid = format!("filler-{i}");
        store
            .create(
                &format!("/core/configmaps/ns/{uid}"),
                cm(&uid, "ns", json!([]), json!([]), false),
            )
            .await
            .expect("create");
    }
    let gone = tokio::time::timeout(Duration::from_secs(10), async {
        while store.get("/core/configmaps/ns/lost").is_ok() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    assert!(
        gone.is_ok(),
        "the dependent of a missing owner was collected"
    );
    stop.cancel();
    task.await.expect("the collector stops");
}

/// Issue 10, item 5: a failed action is retried through the queue's own delayed re-add,
/// after a per-object backoff that doubles and is reset by a success.
#[tokio::test(start_paused = true)]
async fn failed_objects_come_back_for_a_recheck_after_a_doubling_backoff() {
    let q = WorkQueue::new();
    q.push(work("a", Action::Delete(Policy::Background)));
    let mut job = q.next().await.expect("work");
    let mut waits = Vec::new();
    for _ in 0..3 {
        let failed = tokio::time::Instant::now();
        assert!(matches!(q.retry(job), kore_workqueue::Retry::After(_)));
        job = q.next().await.expect("the retry");
        waits.push(failed.elapsed());
        assert!(
            matches!(job.pending, Some(Pending::Recheck)),
            "a retry asks the graph to decide again"
        );
    }
    assert_eq!(waits, [RETRY_MIN, RETRY_MIN * 2, RETRY_MIN * 4]);
    // A success (the guard dropped) resets the backoff.
    drop(job);
    q.push(work("a", Action::Delete(Policy::Background)));
    let job = q.next().await.expect("work");
    assert_eq!(
        q.retry(job),
        kore_workqueue::Retry::After(RETRY_MIN),
        "the backoff starts afresh"
    );
    assert!(RETRY_MIN * 2u32.pow(20) > RETRY_MAX, "the cap is reached");
}

/// Issue 10, item 5: a failing collector keeps no task per failed object (it slept in a
/// detached task per retry), and stops with everything it spawned.
#[tokio::test(start_paused = true)]
async fn failing_actions_spawn_no_task_per_object() {
    use crate::registry::Registry;
    use crate::storage::{FaultyBackend, MemoryBackend, Storage, Store, StoreConfig};
    let (backend, failing) = FaultyBackend::new(MemoryBackend);
    let store = Store::open(Arc::new(backend), StoreConfig::default()).expect("store");
    let registry = Arc::new(Registry::new(store));
    for i in 0..100 {
        let name = format!("lost-{i}");
        registry
            .store()
            .create(
                &format!("/core/configmaps/ns/{name}"),
                cm(&name, "ns", json!([owner("ghost", true)]), json!([]), false),
            )
            .await
            .expect("create");
    }
    // Every write reports a failure from now on: each deletion the collector tries is retried.
    failing.store(true, std::sync::atomic::Ordering::SeqCst);
    let metrics = tokio::runtime::Handle::current().metrics();
    let before = metrics.num_alive_tasks();
    let stop = tokio_util::sync::CancellationToken::new();
    let task = tokio::spawn(super::run(registry.clone(), stop.clone()));
    // Paused time advances only when every task is idle: each object has failed once and
    // waits for its first retry.
    tokio::time::sleep(RETRY_MIN / 2).await;
    let alive = metrics.num_alive_tasks() - before;
    assert!(
        alive <= super::WORKERS + 4,
        "{alive} tasks alive for 100 failing objects"
    );
    for _ in 0..3 {
        tokio::time::sleep(RETRY_MIN * 8).await;
        assert!(metrics.num_alive_tasks() - before <= super::WORKERS + 4);
    }
    stop.cancel();
    tokio::time::timeout(Duration::from_secs(10), task)
        .await
        .expect("the collector stops")
        .expect("without a panic");
    tokio::task::yield_now().await;
    assert_eq!(metrics.num_alive_tasks(), before, "every task ended");
}
