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

/// Opens a watch from `rv` and boxes its stream.
async fn open<K>(
    api: &Api<K>,
    params: &WatchParams,
    rv: &str,
) -> futures::stream::BoxStream<'static, Result<WatchEvent<K>, kube::Error>>
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + 'static,
{
    api.watch(params, rv)
        .await
        .expect("the watch opens")
        .boxed()
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
    let mut events = open(&cms, &WatchParams::default(), &start).await;
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
    let mut events = open(&cms, &WatchParams::default(), &start).await;
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
    let mut events = open(&cms, &WatchParams::default().labels("team=a"), &start).await;
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
    let mut events = open(&cms, &WatchParams::default().fields(NOT_ROOT_CA), "0").await;
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
    let mut events = open(&cms, &WatchParams::default().timeout(1), &start).await;
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
    let params = WatchParams::default().initial_events().fields(NOT_ROOT_CA);
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
        watcher::Config::default().page_size(7).fields(NOT_ROOT_CA),
        watcher::Config::default()
            .streaming_lists()
            .fields(NOT_ROOT_CA),
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
    let mut events = open(&cms, &WatchParams::default().timeout(1), &start).await;
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

// ---------------------------------------------------------------------------------------------
// Writes to other resources never hold back a watcher's events. A watcher is woken only by its
// own resource, and the history it reads is shared by all: thousands of writes elsewhere
// between two events of the watched resource must not strand the second one.

/// How many writes to another resource each of these tests puts between two watched events:
/// several times what one watcher examines per hold of the history's lock.
/// Leaves out the `kube-root-ca.crt` ConfigMap every namespace has.
const NOT_ROOT_CA: &str = "metadata.name!=kube-root-ca.crt";

const CHURN: usize = 2_500;

/// Writes `n` changes to a Lease in `default` (created if needed); returns the revision of the
/// last one.
async fn churn_leases(client: &kube::Client, n: usize) -> u64 {
    use k8s_openapi::api::coordination::v1::Lease;
    let leases: Api<Lease> = Api::default_namespaced(client.clone());
    let mut lease = Lease::default();
    lease.metadata.name = Some("churn".into());
    match leases.create(&PostParams::default(), &lease).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 409 => {}
        Err(e) => panic!("creating the churn Lease: {e}"),
    }
    let last = futures::stream::iter(0..n)
        .map(|i| {
            let leases = leases.clone();
            async move {
                let patch = json!({"spec": {"holderIdentity": format!("h{i}")}});
                leases
                    .patch("churn", &PatchParams::default(), &Patch::Merge(patch))
                    .await
                    .expect("patch the churn Lease")
            }
        })
        .buffer_unordered(8)
        .fold(0u64, |max, l| async move {
            let rv = l
                .metadata
                .resource_version
                .as_deref()
                .and_then(|v| v.parse().ok())
                .expect("a numeric resourceVersion");
            max.max(rv)
        })
        .await;
    assert!(last > 0, "the churn wrote something");
    last
}

#[tokio::test]
async fn writes_to_other_resources_never_hold_back_a_watch_event() {
    let env = TestEnv::start().await.expect("start");
    let cms: Api<ConfigMap> = Api::default_namespaced(env.client());
    let start = current_rv(&cms).await;
    let mut events = open(&cms, &WatchParams::default(), &start).await;
    churn_leases(&env.client(), CHURN).await;
    cms.create(&PostParams::default(), &cm("after-churn", &[]))
        .await
        .expect("create");
    assert_eq!(
        name_of(&next(&mut events).await),
        ("ADDED", "after-churn".into()),
        "delivered without a second ConfigMap write to wake the watcher"
    );
    // A new watch from before the churn finds it too, at once.
    let mut replay = open(&cms, &WatchParams::default(), &start).await;
    assert_eq!(
        name_of(&next(&mut replay).await),
        ("ADDED", "after-churn".into())
    );
}

#[tokio::test]
async fn selector_transitions_are_delivered_across_other_resources_writes() {
    let env = TestEnv::start().await.expect("start");
    let cms: Api<ConfigMap> = Api::default_namespaced(env.client());
    cms.create(&PostParams::default(), &cm("x", &[("team", "b")]))
        .await
        .expect("create");
    let start = current_rv(&cms).await;
    let mut events = open(&cms, &WatchParams::default().labels("team=a"), &start).await;
    churn_leases(&env.client(), CHURN).await;
    let relabel = |team: &str| Patch::Merge(json!({"metadata": {"labels": {"team": team}}}));
    cms.patch("x", &PatchParams::default(), &relabel("a"))
        .await
        .expect("into the selection");
    assert_eq!(name_of(&next(&mut events).await), ("ADDED", "x".into()));
    churn_leases(&env.client(), CHURN).await;
    cms.patch("x", &PatchParams::default(), &relabel("c"))
        .await
        .expect("out of the selection");
    assert_eq!(name_of(&next(&mut events).await), ("DELETED", "x".into()));
}

#[tokio::test]
async fn bookmarks_move_past_other_resources_writes_and_events_follow() {
    let env = TestEnv::builder()
        .bookmark_interval(Duration::from_millis(50))
        .start()
        .await
        .expect("start");
    let cms: Api<ConfigMap> = Api::default_namespaced(env.client());
    let start = current_rv(&cms).await;
    let mut events = open(&cms, &WatchParams::default(), &start).await;
    let last = churn_leases(&env.client(), CHURN).await;
    // A quiet watch's bookmarks report the newest revision, not the last one of its resource.
    loop {
        match next(&mut events).await {
            WatchEvent::Bookmark(b) => {
                let rv: u64 = b.metadata.resource_version.parse().expect("numeric");
                if rv >= last {
                    break;
                }
            }
            other => panic!("only bookmarks while ConfigMaps are quiet, got {other:?}"),
        }
    }
    cms.create(&PostParams::default(), &cm("after-churn", &[]))
        .await
        .expect("create");
    loop {
        match next(&mut events).await {
            WatchEvent::Bookmark(_) => continue,
            e => {
                assert_eq!(name_of(&e), ("ADDED", "after-churn".into()));
                break;
            }
        }
    }
}

#[tokio::test]
async fn streaming_lists_deliver_events_across_other_resources_writes() {
    let env = TestEnv::start().await.expect("start");
    let cms: Api<ConfigMap> = Api::default_namespaced(env.client());
    cms.create(&PostParams::default(), &cm("before", &[]))
        .await
        .expect("create");
    let mut events = open(
        &cms,
        &WatchParams::default().initial_events().fields(NOT_ROOT_CA),
        "0",
    )
    .await;
    assert_eq!(
        name_of(&next(&mut events).await),
        ("ADDED", "before".into())
    );
    assert!(matches!(next(&mut events).await, WatchEvent::Bookmark(_)));
    churn_leases(&env.client(), CHURN).await;
    cms.create(&PostParams::default(), &cm("after", &[]))
        .await
        .expect("create");
    assert_eq!(name_of(&next(&mut events).await), ("ADDED", "after".into()));
}

#[tokio::test]
async fn a_quiet_resource_outlives_the_history_trimmed_by_other_resources() {
    let env = TestEnv::builder()
        .history_capacity(100)
        .start()
        .await
        .expect("start");
    let cms: Api<ConfigMap> = Api::default_namespaced(env.client());
    let start = current_rv(&cms).await;
    let mut events = open(&cms, &WatchParams::default(), &start).await;
    churn_leases(&env.client(), 500).await;
    cms.create(&PostParams::default(), &cm("later", &[]))
        .await
        .expect("create");
    assert_eq!(
        name_of(&next(&mut events).await),
        ("ADDED", "later".into()),
        "no ConfigMap event was dropped, so the watch goes on"
    );
    // A watch from before the churn has lost nothing of ConfigMaps either ...
    let mut replay = open(&cms, &WatchParams::default(), &start).await;
    assert_eq!(name_of(&next(&mut replay).await), ("ADDED", "later".into()));
    // ... but one of Leases from there has: it is told to re-list.
    use k8s_openapi::api::coordination::v1::Lease;
    let leases: Api<Lease> = Api::default_namespaced(env.client());
    let mut lease_events = open(&leases, &WatchParams::default(), &start).await;
    match next(&mut lease_events).await {
        WatchEvent::Error(status) => assert_eq!(status.code, 410),
        other => panic!("expected 410 for a Lease watch from a trimmed revision: {other:?}"),
    }
}

#[tokio::test]
async fn the_history_is_bounded_by_bytes() {
    let env = TestEnv::builder()
        .history_bytes(4 << 20)
        .start()
        .await
        .expect("start");
    let cms: Api<ConfigMap> = Api::default_namespaced(env.client());
    let start = current_rv(&cms).await;
    let big = "x".repeat(300 << 10);
    let mut c = cm("big", &[]);
    c.data = Some([("v".to_string(), big.clone())].into());
    cms.create(&PostParams::default(), &c)
        .await
        .expect("create");
    for i in 0..30 {
        cms.patch(
            "big",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"i": i.to_string()}})),
        )
        .await
        .expect("update");
    }
    // 31 events of ~300 KB each weigh far more than 4 MiB: the oldest are gone.
    let mut events = open(&cms, &WatchParams::default(), &start).await;
    match next(&mut events).await {
        WatchEvent::Error(status) => {
            assert_eq!((status.code, status.reason.as_str()), (410, "Expired"))
        }
        other => panic!("expected 410, got {}", name_of(&other).0),
    }
    // The newest changes are still there to watch from.
    let now = current_rv(&cms).await;
    let mut events = open(&cms, &WatchParams::default(), &now).await;
    cms.patch(
        "big",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"i": "last"}})),
    )
    .await
    .expect("update");
    assert_eq!(
        name_of(&next(&mut events).await),
        ("MODIFIED", "big".into())
    );
}

/// The server's own controllers (namespace lifecycle, ServiceAccounts, CRD status, ClusterRole
/// aggregation, RBAC, garbage collection) watch the same history: after thousands of writes to
/// another resource, each still acts on the next change it cares about.
#[tokio::test]
async fn the_servers_controllers_keep_up_after_thousands_of_other_writes() {
    use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
    use k8s_openapi::api::rbac::v1::{ClusterRole, Role, RoleBinding};
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    use kore_testenv::wait_for;
    const SETTLE: Duration = Duration::from_secs(10);

    let env = TestEnv::start().await.expect("start");
    let client = env.client();
    churn_leases(&client, CHURN).await;

    // Namespace lifecycle and ServiceAccounts: a new namespace gets `default`, and an empty
    // namespace that is deleted goes away.
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": "fresh"}})).expect("ns");
    namespaces
        .create(&PostParams::default(), &ns)
        .await
        .expect("create namespace");
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), "fresh");
    wait_for(SETTLE, || async {
        accounts.get_opt("default").await.ok().flatten()
    })
    .await
    .expect("the new namespace gets its default ServiceAccount");

    // RBAC: a Role and binding written now take effect for the next request.
    let roles: Api<Role> = Api::namespaced(client.clone(), "fresh");
    let role: Role = serde_json::from_value(json!({
        "metadata": {"name": "read-cms"},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list"]}]
    }))
    .expect("role");
    roles
        .create(&PostParams::default(), &role)
        .await
        .expect("role");
    let bindings: Api<RoleBinding> = Api::namespaced(client.clone(), "fresh");
    let binding: RoleBinding = serde_json::from_value(json!({
        "metadata": {"name": "read-cms"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "read-cms"},
        "subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": "fresh"}]
    }))
    .expect("binding");
    bindings
        .create(&PostParams::default(), &binding)
        .await
        .expect("binding");
    let as_sa = env
        .service_account_client("fresh", "default")
        .await
        .expect("a ServiceAccount client");
    Api::<ConfigMap>::namespaced(as_sa, "fresh")
        .list(&ListParams::default())
        .await
        .expect("the new binding allows the list");

    churn_leases(&client, CHURN).await;

    // ClusterRole aggregation.
    let cluster_roles: Api<ClusterRole> = Api::all(client.clone());
    let aggregate: ClusterRole = serde_json::from_value(json!({
        "metadata": {"name": "churn-aggregate"},
        "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"churn": "yes"}}]}
    }))
    .expect("cluster role");
    cluster_roles
        .create(&PostParams::default(), &aggregate)
        .await
        .expect("aggregate");
    let part: ClusterRole = serde_json::from_value(json!({
        "metadata": {"name": "churn-part", "labels": {"churn": "yes"}},
        "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]
    }))
    .expect("cluster role");
    cluster_roles
        .create(&PostParams::default(), &part)
        .await
        .expect("part");
    wait_for(SETTLE, || async {
        let r = cluster_roles.get("churn-aggregate").await.ok()?;
        (r.rules.unwrap_or_default().len() == 1).then_some(())
    })
    .await
    .expect("the aggregated role picks up the new rules");

    // CRD status: a new CRD becomes Established.
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "metadata": {"name": "churns.example.com"},
        "spec": {
            "group": "example.com",
            "names": {"plural": "churns", "singular": "churn", "kind": "Churn"},
            "scope": "Namespaced",
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object",
                    "x-kubernetes-preserve-unknown-fields": true}}}]
        }
    }))
    .expect("crd");
    crds.create(&PostParams::default(), &crd)
        .await
        .expect("crd");
    wait_for(SETTLE, || async {
        let c = crds.get("churns.example.com").await.ok()?;
        c.status?
            .conditions?
            .iter()
            .any(|c| c.type_ == "Established" && c.status == "True")
            .then_some(())
    })
    .await
    .expect("the CRD becomes Established");

    churn_leases(&client, CHURN).await;

    // Garbage collection: deleting an owner removes its dependent.
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "fresh");
    let owner = cms
        .create(&PostParams::default(), &cm("owner", &[]))
        .await
        .expect("owner");
    let dependent: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "dependent", "ownerReferences": [{
            "apiVersion": "v1", "kind": "ConfigMap", "name": "owner",
            "uid": owner.metadata.uid.clone().expect("uid")
        }]}
    }))
    .expect("dependent");
    cms.create(&PostParams::default(), &dependent)
        .await
        .expect("dependent");
    cms.delete("owner", &Default::default())
        .await
        .expect("delete owner");
    wait_for(SETTLE, || async {
        cms.get_opt("dependent").await.ok()?.is_none().then_some(())
    })
    .await
    .expect("the garbage collector removes the dependent");

    // Namespace deletion empties the namespace and removes it.
    namespaces
        .delete("fresh", &Default::default())
        .await
        .expect("delete namespace");
    wait_for(SETTLE, || async {
        namespaces
            .get_opt("fresh")
            .await
            .ok()?
            .is_none()
            .then_some(())
    })
    .await
    .expect("the deleted namespace goes away");
}

/// Opens a raw watch request and returns its status and body stream.
async fn raw_watch(env: &TestEnv, query: &str) -> (u16, kube::client::Body) {
    let req = http::Request::builder()
        .uri(format!("/api/v1/namespaces/default/configmaps?{query}"))
        .body(kube::client::Body::empty())
        .expect("request");
    let resp = env.client().send(req).await.expect("response");
    (resp.status().as_u16(), resp.into_body())
}

/// The first line of a body (a watch's first event, or a whole list), waiting for it.
async fn first_line(body: &mut kube::client::Body) -> String {
    use http_body_util::BodyExt;
    let mut buf = Vec::new();
    loop {
        let Some(frame) = tokio::time::timeout(Duration::from_secs(5), body.frame())
            .await
            .expect("a line in time")
        else {
            return String::from_utf8_lossy(&buf).into_owned();
        };
        let frame = frame.expect("no error");
        if let Ok(data) = frame.into_data() {
            buf.extend_from_slice(&data);
            if let Some(end) = buf.iter().position(|b| *b == b'\n') {
                return String::from_utf8_lossy(&buf[..end]).into_owned();
            }
        }
    }
}

#[tokio::test]
async fn a_watch_timeout_beyond_the_clock_means_no_timeout() {
    let env = TestEnv::start().await.expect("start");
    let cms: Api<ConfigMap> = Api::default_namespaced(env.client());
    let rv = current_rv(&cms).await;
    let (code, mut body) = raw_watch(
        &env,
        &format!("watch=1&resourceVersion={rv}&timeoutSeconds=9223372036854775807"),
    )
    .await;
    assert_eq!(code, 200);
    cms.create(&PostParams::default(), &cm("still-served", &[]))
        .await
        .expect("create");
    let line = first_line(&mut body).await;
    assert!(
        line.contains("\"ADDED\"") && line.contains("still-served"),
        "{line}"
    );
}

#[tokio::test]
async fn boolean_parameters_read_as_kubernetes_reads_them() {
    let env = TestEnv::start().await.expect("start");
    let cms: Api<ConfigMap> = Api::default_namespaced(env.client());
    let rv = current_rv(&cms).await;
    // Anything but absent, `0` and `false` is true: `watch=garbage` is a watch ...
    let (code, mut body) = raw_watch(&env, &format!("watch=garbage&resourceVersion={rv}")).await;
    assert_eq!(code, 200);
    cms.create(&PostParams::default(), &cm("seen", &[]))
        .await
        .expect("create");
    let line = first_line(&mut body).await;
    assert!(line.starts_with("{\"type\":\"ADDED\""), "{line}");
    // ... and `watch=FALSE` a list.
    for off in ["FALSE", "0", "false"] {
        let (code, mut body) = raw_watch(&env, &format!("watch={off}")).await;
        assert_eq!(code, 200);
        let line = first_line(&mut body).await;
        assert!(
            line.contains("\"kind\":\"ConfigMapList\""),
            "watch={off}: {line}"
        );
    }
}

#[tokio::test]
async fn a_user_may_hold_only_so_many_watches_and_gets_them_back_when_they_end() {
    let env = TestEnv::builder()
        .max_watches_per_user(3)
        .start()
        .await
        .expect("start");
    let cms: Api<ConfigMap> = Api::default_namespaced(env.client());
    let rv = current_rv(&cms).await;
    let mut open = Vec::new();
    for _ in 0..3 {
        open.push(
            cms.watch(&WatchParams::default(), &rv)
                .await
                .expect("within the limit")
                .boxed(),
        );
    }
    match cms.watch(&WatchParams::default(), &rv).await {
        Err(kube::Error::Api(s)) => {
            assert_eq!((s.code, s.reason.as_str()), (429, "TooManyRequests"));
            assert!(s.message.contains("limit is 3 per user"), "{}", s.message);
        }
        Ok(_) => panic!("a fourth watch is refused"),
        Err(e) => panic!("expected 429, got {e}"),
    }
    // Lists and writes are not limited.
    cms.create(&PostParams::default(), &cm("still-writable", &[]))
        .await
        .expect("create");
    for events in &mut open {
        assert_eq!(
            name_of(&next(events).await),
            ("ADDED", "still-writable".into())
        );
    }
    // Closing one gives its place back.
    drop(open.pop());
    kore_testenv::wait_for(Duration::from_secs(5), || async {
        cms.watch(&WatchParams::default(), &rv)
            .await
            .ok()
            .map(|_| ())
    })
    .await
    .expect("a closed watch frees its place");
}
