//! Watches against an in-process kore-apiserver, through the `kube` crate.

use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kore_testenv::TestEnv;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use kube::runtime::watcher;
use serde_json::json;

fn cm(name: &str, labels: &[(&str, &str)]) -> ConfigMap {
    let mut c = ConfigMap::default();
    c.metadata.name = Some(name.into());
    c.metadata.labels = Some(
        labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    );
    c
}

async fn next<S, T>(s: &mut S) -> T
where
    S: futures::Stream<Item = Result<T, kube::Error>> + Unpin,
{
    tokio::time::timeout(Duration::from_secs(5), s.try_next())
        .await
        .expect("an event in time")
        .expect("no error")
        .expect("stream open")
}

/// The revision a list shows now: where a watch of "everything after this" starts.
async fn current_rv(cms: &Api<ConfigMap>) -> String {
    cms.list(&ListParams::default())
        .await
        .expect("list")
        .metadata
        .resource_version
        .expect("lists carry a resourceVersion")
}

fn name_of(e: &WatchEvent<ConfigMap>) -> (&'static str, String) {
    match e {
        WatchEvent::Added(o) => ("ADDED", o.metadata.name.clone().unwrap_or_default()),
        WatchEvent::Modified(o) => ("MODIFIED", o.metadata.name.clone().unwrap_or_default()),
        WatchEvent::Deleted(o) => ("DELETED", o.metadata.name.clone().unwrap_or_default()),
        WatchEvent::Bookmark(_) => ("BOOKMARK", String::new()),
        WatchEvent::Error(e) => ("ERROR", e.message.clone()),
    }
}

#[tokio::test]
async fn a_watch_from_a_resource_version_replays_every_later_change_in_order() {
    let env = TestEnv::start().await.expect("start");
    let cms: Api<ConfigMap> = Api::default_namespaced(env.client());
    let start = current_rv(&cms).await;
    cms.create(&PostParams::default(), &cm("a", &[]))
        .await
        .expect("create");
    cms.patch(
        "a",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"k": "v"}})),
    )
    .await
    .expect("patch");
    cms.create(&PostParams::default(), &cm("b", &[]))
        .await
        .expect("create");
    cms.delete("a", &Default::default()).await.expect("delete");
    let mut events = cms
        .watch(&WatchParams::default(), &start)
        .await
        .expect("watch")
        .boxed();
    let mut got = Vec::new();
    let mut last_rv = 0u64;
    for _ in 0..4 {
        let e = next(&mut events).await;
        if let WatchEvent::Added(o) | WatchEvent::Modified(o) | WatchEvent::Deleted(o) = &e {
            let rv: u64 = o
                .metadata
                .resource_version
                .as_deref()
                .expect("rv")
                .parse()
                .expect("numeric");
            assert!(rv > last_rv, "revisions increase");
            last_rv = rv;
        }
        got.push(name_of(&e));
    }
    let got: Vec<(&str, &str)> = got.iter().map(|(t, n)| (*t, n.as_str())).collect();
    assert_eq!(
        got,
        [
            ("ADDED", "a"),
            ("MODIFIED", "a"),
            ("ADDED", "b"),
            ("DELETED", "a")
        ]
    );
}

#[tokio::test]
async fn a_watch_older_than_the_history_gets_410_expired() {
    let env = TestEnv::builder()
        .history_capacity(5)
        .start()
        .await
        .expect("start");
    let cms: Api<ConfigMap> = Api::default_namespaced(env.client());
    let start = current_rv(&cms).await;
    for i in 0..20 {
        cms.create(&PostParams::default(), &cm(&format!("c{i}"), &[]))
            .await
            .expect("create");
    }
    let mut events = cms
        .watch(&WatchParams::default(), &start)
        .await
        .expect("watch opens with 200")
        .boxed();
    match next(&mut events).await {
        WatchEvent::Error(status) => {
            assert_eq!((status.code, status.reason.as_str()), (410, "Expired"));
            assert!(
                status.message.starts_with("too old resource version"),
                "{}",
                status.message
            );
        }
        other => panic!("expected a 410 ERROR event, got {other:?}"),
    }
    assert!(
        tokio::time::timeout(Duration::from_secs(5), events.try_next())
            .await
            .expect("ends")
            .expect("ok")
            .is_none(),
        "the stream ends after the error"
    );
    // A continue token from before the compaction is also too old.
    let err = cms
        .list(
            &ListParams::default()
                .limit(2)
                .continue_token(&continue_token_at(&start)),
        )
        .await
        .expect_err("expired continue");
    match err {
        kube::Error::Api(s) => assert_eq!(s.code, 410),
        other => panic!("{other:?}"),
    }
}

/// A continue token for revision `rv` starting at the beginning, as the server encodes them.
fn continue_token_at(rv: &str) -> String {
    use base64::Engine;
    let raw = format!(r#"{{"v":"meta.k8s.io/v1","rv":{rv},"start":"default/"}}"#);
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(raw)
}

#[tokio::test]
async fn label_selector_transitions_become_added_and_deleted() {
    let env = TestEnv::start().await.expect("start");
    let cms: Api<ConfigMap> = Api::default_namespaced(env.client());
    let start = current_rv(&cms).await;
    let mut events = cms
        .watch(&WatchParams::default().labels("team=a"), &start)
        .await
        .expect("watch")
        .boxed();
    cms.create(&PostParams::default(), &cm("x", &[("team", "b")]))
        .await
        .expect("create");
    cms.patch(
        "x",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"team": "a"}}})),
    )
    .await
    .expect("into");
    cms.patch(
        "x",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"k": "1"}})),
    )
    .await
    .expect("inside");
    cms.patch(
        "x",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"team": "c"}}})),
    )
    .await
    .expect("out");
    let got: Vec<(&str, String)> = vec![
        name_of(&next(&mut events).await),
        name_of(&next(&mut events).await),
        name_of(&next(&mut events).await),
    ];
    assert_eq!(
        got,
        [
            ("ADDED", "x".into()),
            ("MODIFIED", "x".into()),
            ("DELETED", "x".into())
        ]
    );
}

#[tokio::test]
async fn watching_from_zero_starts_with_the_current_objects() {
    let env = TestEnv::start().await.expect("start");
    let cms: Api<ConfigMap> = Api::default_namespaced(env.client());
    cms.create(&PostParams::default(), &cm("existing", &[]))
        .await
        .expect("create");
    let mut events = cms
        .watch(&WatchParams::default(), "0")
        .await
        .expect("watch")
        .boxed();
    assert_eq!(
        name_of(&next(&mut events).await),
        ("ADDED", "existing".into())
    );
    cms.create(&PostParams::default(), &cm("later", &[]))
        .await
        .expect("create");
    assert_eq!(name_of(&next(&mut events).await), ("ADDED", "later".into()));
}

#[tokio::test]
async fn quiet_watches_get_bookmarks_and_timeouts_end_the_stream() {
    let env = TestEnv::builder()
        .bookmark_interval(Duration::from_millis(100))
        .start()
        .await
        .expect("start");
    let cms: Api<ConfigMap> = Api::default_namespaced(env.client());
    let start = current_rv(&cms).await;
    let mut events = cms
        .watch(&WatchParams::default().timeout(1), &start)
        .await
        .expect("watch")
        .boxed();
    match next(&mut events).await {
        WatchEvent::Bookmark(b) => assert_eq!(b.metadata.resource_version, start),
        other => panic!("expected a bookmark, got {other:?}"),
    }
    let ended = tokio::time::timeout(Duration::from_secs(5), async {
        while let Some(e) = events.try_next().await.expect("ok") {
            assert!(matches!(e, WatchEvent::Bookmark(_)));
        }
    })
    .await;
    assert!(ended.is_ok(), "timeoutSeconds ends the stream");
}

#[tokio::test]
async fn streaming_lists_end_the_initial_events_with_a_bookmark() {
    let env = TestEnv::start().await.expect("start");
    let cms: Api<ConfigMap> = Api::default_namespaced(env.client());
    for name in ["a", "b"] {
        cms.create(&PostParams::default(), &cm(name, &[]))
            .await
            .expect("create");
    }
    let params = WatchParams::default().initial_events();
    let mut events = cms.watch(&params, "0").await.expect("watch").boxed();
    assert_eq!(name_of(&next(&mut events).await), ("ADDED", "a".into()));
    assert_eq!(name_of(&next(&mut events).await), ("ADDED", "b".into()));
    match next(&mut events).await {
        WatchEvent::Bookmark(b) => assert_eq!(
            b.metadata
                .annotations
                .get("k8s.io/initial-events-end")
                .map(String::as_str),
            Some("true")
        ),
        other => panic!("expected the initial-events-end bookmark, got {other:?}"),
    }
}

#[tokio::test]
async fn kube_runtime_watchers_converge_in_both_list_modes() {
    let env = TestEnv::start().await.expect("start");
    let cms: Api<ConfigMap> = Api::default_namespaced(env.client());
    for i in 0..30 {
        cms.create(&PostParams::default(), &cm(&format!("w{i:02}"), &[]))
            .await
            .expect("create");
    }
    for config in [
        watcher::Config::default().page_size(7),
        watcher::Config::default().streaming_lists(),
    ] {
        let mut stream = watcher(cms.clone(), config).boxed();
        let mut seen = 0;
        loop {
            let event = tokio::time::timeout(Duration::from_secs(5), stream.try_next())
                .await
                .expect("in time")
                .expect("no error")
                .expect("open");
            match event {
                watcher::Event::InitApply(_) => seen += 1,
                watcher::Event::InitDone => break,
                _ => {}
            }
        }
        assert_eq!(seen, 30);
    }
}

#[tokio::test]
async fn a_timed_out_watch_ends_with_a_bookmark_at_the_newest_revision() {
    let env = TestEnv::start().await.expect("start");
    let cms: Api<ConfigMap> = Api::default_namespaced(env.client());
    let start = current_rv(&cms).await;
    let mut events = cms
        .watch(&WatchParams::default().timeout(1), &start)
        .await
        .expect("watch")
        .boxed();
    let created = cms
        .create(&PostParams::default(), &cm("one", &[]))
        .await
        .expect("create");
    assert_eq!(name_of(&next(&mut events).await), ("ADDED", "one".into()));
    match next(&mut events).await {
        WatchEvent::Bookmark(b) => assert_eq!(
            Some(b.metadata.resource_version),
            created.metadata.resource_version
        ),
        other => panic!("expected a closing bookmark, got {other:?}"),
    }
    assert!(
        tokio::time::timeout(Duration::from_secs(5), events.try_next())
            .await
            .expect("ends")
            .expect("ok")
            .is_none()
    );
}
