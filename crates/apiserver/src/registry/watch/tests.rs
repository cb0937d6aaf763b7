//! The typed watch stream, driven through the registry with no HTTP in between.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::*;
use crate::storage::{MemoryBackend, Preconditions, Store, StoreConfig, Update};

fn registry(config: StoreConfig) -> Registry {
    Registry::new(Store::open(Arc::new(MemoryBackend), config).expect("store"))
}

fn configmaps(registry: &Registry) -> Arc<Resource> {
    registry
        .catalog()
        .find("", "v1", "configmaps")
        .expect("configmaps are built in")
}

fn config() -> WatchConfig {
    WatchConfig {
        bookmark_interval: Duration::from_secs(60),
        shutdown: CancellationToken::new(),
    }
}

fn cm(name: &str, app: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "ns", "labels": {"app": app}},
    })
}

async fn put(registry: &Registry, res: &Resource, name: &str, app: &str) -> u64 {
    let key = res.key(Some("ns"), name);
    let obj = cm(name, app);
    let written = if registry.store().get(&key).is_ok() {
        let mut update = move |mut current: Value| {
            current["metadata"]["labels"] = obj["metadata"]["labels"].clone();
            Update::Put(current)
        };
        registry
            .store()
            .guaranteed_update(&key, &Preconditions::default(), &mut update)
            .await
            .expect("update")
            .stored
    } else {
        registry.store().create(&key, obj).await.expect("create")
    };
    written.rv
}

/// The type, name, `app` label and resourceVersion of an event's object.
fn seen(event: Event) -> (EventKind, String, String, String) {
    let kind = event.kind;
    let obj = event.object.into_value().expect("a JSON object");
    let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
    (
        kind,
        text(&obj["metadata"]["name"]),
        text(&obj["metadata"]["labels"]["app"]),
        text(&obj["metadata"]["resourceVersion"]),
    )
}

#[tokio::test]
async fn selector_transitions_become_added_and_deleted() {
    let registry = registry(StoreConfig::default());
    let res = configmaps(&registry);
    let params = ListParams {
        label_selector: Some("app=a".into()),
        resource_version: Some(registry.store().current_rv().to_string()),
        ..Default::default()
    };
    let mut stream = registry
        .watch(&res, Some("ns"), &params, config())
        .await
        .expect("watch");
    put(&registry, &res, "x", "b").await; // not selected: no event
    let entered = put(&registry, &res, "x", "a").await; // starts to match: ADDED
    let changed = put(&registry, &res, "x", "a").await; // unchanged: no write, no event
    assert_eq!(changed, entered, "an identical write stores nothing");
    let left = put(&registry, &res, "x", "c").await; // stops matching: DELETED
    put(&registry, &res, "x", "d").await; // still not selected: no event
    let marker = put(&registry, &res, "z", "a").await;

    assert_eq!(
        seen(stream.next().await.expect("an event")),
        (
            EventKind::Added,
            "x".into(),
            "a".into(),
            entered.to_string()
        )
    );
    // The object of a DELETED transition is its last selected state, at the leaving revision.
    assert_eq!(
        seen(stream.next().await.expect("an event")),
        (EventKind::Deleted, "x".into(), "a".into(), left.to_string())
    );
    assert_eq!(
        seen(stream.next().await.expect("an event")),
        (EventKind::Added, "z".into(), "a".into(), marker.to_string())
    );
}

#[tokio::test]
async fn a_watch_of_one_name_sees_that_object_only() {
    let registry = registry(StoreConfig::default());
    let res = configmaps(&registry);
    let params = ListParams {
        field_selector: Some("metadata.name=x".into()),
        resource_version: Some(registry.store().current_rv().to_string()),
        ..Default::default()
    };
    let mut stream = registry
        .watch(&res, None, &params, config())
        .await
        .expect("watch");
    // Other names (one of them starting with the name) are not the stream's.
    put(&registry, &res, "xx", "a").await;
    put(&registry, &res, "y", "a").await;
    // Nothing for it yet: a wait that gives up leaves the stream as it was.
    assert!(
        tokio::time::timeout(std::time::Duration::from_millis(50), stream.next())
            .await
            .is_err()
    );
    let added = put(&registry, &res, "x", "a").await;
    let changed = put(&registry, &res, "x", "b").await;
    assert_eq!(
        seen(stream.next().await.expect("an event")),
        (EventKind::Added, "x".into(), "a".into(), added.to_string())
    );
    assert_eq!(
        seen(stream.next().await.expect("an event")),
        (
            EventKind::Modified,
            "x".into(),
            "b".into(),
            changed.to_string()
        )
    );
}

#[tokio::test]
async fn plain_watchers_share_the_line_the_history_rendered_once() {
    let registry = registry(StoreConfig::default());
    let res = configmaps(&registry);
    let params = ListParams {
        resource_version: Some(registry.store().current_rv().to_string()),
        ..Default::default()
    };
    let mut first = registry
        .watch(&res, Some("ns"), &params, config())
        .await
        .expect("watch");
    let mut second = registry
        .watch(&res, Some("ns"), &params, config())
        .await
        .expect("watch");
    put(&registry, &res, "x", "a").await;
    let line = |event: Option<Event>| match event.expect("an event") {
        Event {
            kind: EventKind::Added,
            object: EventObject::Stored(e),
        } => e.json_line(),
        other => panic!("expected the stored ADDED event, got {other:?}"),
    };
    let (a, b) = (line(first.next().await), line(second.next().await));
    assert_eq!(a.as_ptr(), b.as_ptr(), "one buffer for both watchers");
    assert!(a.starts_with(br#"{"type":"ADDED","object":{"#));
}

#[tokio::test]
async fn initial_events_end_with_an_annotated_bookmark_and_timeout_with_a_last_one() {
    let registry = registry(StoreConfig::default());
    let res = configmaps(&registry);
    put(&registry, &res, "x", "a").await;
    let rv = put(&registry, &res, "y", "b").await;
    let params = ListParams {
        send_initial_events: Some(true),
        resource_version_match: Some("NotOlderThan".into()),
        allow_watch_bookmarks: true,
        timeout_seconds: Some(0),
        ..Default::default()
    };
    let mut stream = registry
        .watch(&res, Some("ns"), &params, config())
        .await
        .expect("watch");
    for name in ["x", "y"] {
        let (kind, got, _, _) = seen(stream.next().await.expect("an initial event"));
        assert_eq!((kind, got.as_str()), (EventKind::Added, name));
    }
    let bookmark = |event: Option<Event>| {
        let event = event.expect("a bookmark");
        assert_eq!(event.kind, EventKind::Bookmark);
        event.object.into_value().expect("an object")
    };
    let end = bookmark(stream.next().await);
    assert_eq!(end["kind"], "ConfigMap");
    assert_eq!(end["apiVersion"], "v1");
    assert_eq!(end["metadata"]["resourceVersion"], rv.to_string());
    assert_eq!(
        end["metadata"]["annotations"]["k8s.io/initial-events-end"],
        "true"
    );
    // timeoutSeconds=0 has passed already: one last bookmark, then the end.
    let last = bookmark(stream.next().await);
    assert_eq!(last["metadata"]["resourceVersion"], rv.to_string());
    assert!(last["metadata"].get("annotations").is_none());
    assert!(stream.next().await.is_none());
}

#[tokio::test(start_paused = true)]
async fn a_quiet_watch_gets_bookmarks_and_shutdown_ends_it() {
    let registry = registry(StoreConfig::default());
    let res = configmaps(&registry);
    let rv = put(&registry, &res, "x", "a").await;
    let params = ListParams {
        resource_version: Some(rv.to_string()),
        allow_watch_bookmarks: true,
        ..Default::default()
    };
    let config = config();
    let shutdown = config.shutdown.clone();
    let mut stream = registry
        .watch(&res, Some("ns"), &params, config)
        .await
        .expect("watch");
    // Paused time jumps to the bookmark interval once nothing else can run.
    let event = stream.next().await.expect("a bookmark");
    assert_eq!(event.kind, EventKind::Bookmark);
    let obj = event.object.into_value().expect("an object");
    assert_eq!(obj["metadata"]["resourceVersion"], rv.to_string());
    shutdown.cancel();
    assert!(stream.next().await.is_none());
}

#[tokio::test]
async fn a_watch_from_a_revision_the_history_dropped_gets_one_410_error() {
    let registry = registry(StoreConfig::default().history_capacity(2));
    let res = configmaps(&registry);
    let first = put(&registry, &res, "a", "a").await;
    for name in ["b", "c", "d", "e"] {
        put(&registry, &res, name, "a").await;
    }
    let params = ListParams {
        resource_version: Some(first.to_string()),
        ..Default::default()
    };
    let mut stream = registry
        .watch(&res, Some("ns"), &params, config())
        .await
        .expect("a watch that reports its expiry in the stream");
    let event = stream.next().await.expect("an error event");
    assert_eq!(event.kind, EventKind::Error);
    let status = event.object.into_value().expect("a Status");
    assert_eq!(status["kind"], "Status");
    assert_eq!(status["code"], 410);
    assert_eq!(status["reason"], "Expired");
    assert!(stream.next().await.is_none());
}

#[tokio::test]
async fn send_initial_events_needs_not_older_than() {
    let registry = registry(StoreConfig::default());
    let res = configmaps(&registry);
    let params = ListParams {
        send_initial_events: Some(true),
        ..Default::default()
    };
    let err = registry
        .watch(&res, Some("ns"), &params, config())
        .await
        .expect_err("sendInitialEvents alone is invalid");
    assert_eq!(err.code(), http::StatusCode::UNPROCESSABLE_ENTITY);
    assert!(
        err.status()
            .to_string()
            .contains("resourceVersionMatch to NotOlderThan"),
        "{}",
        err.status()
    );
}
