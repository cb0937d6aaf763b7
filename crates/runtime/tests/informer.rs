//! Informers, the cache, shared informers and the cached client against a real kore-apiserver.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use anyhow::Context as _;
use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::ConfigMap;
use kore_runtime::informer::BackoffConfig;
use kore_runtime::{
    CachedClient, Change, InformerConfig, Informers, ObjectKey, SharedInformer, Store,
};
use kore_testenv::{TestEnv, wait_for};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::core::PartialObjectMeta;
use tokio_util::sync::CancellationToken;

const WAIT: Duration = Duration::from_secs(20);

fn cm(ns: &str, name: &str, labels: &[(&str, &str)]) -> ConfigMap {
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some(name.into());
    cm.metadata.namespace = Some(ns.into());
    if !labels.is_empty() {
        cm.metadata.labels = Some(
            labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        );
    }
    cm.data = Some(BTreeMap::from([("k".to_string(), name.to_string())]));
    cm
}

async fn create_ns(client: &kube::Client, name: &str) -> anyhow::Result<()> {
    let nss: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    let mut ns = k8s_openapi::api::core::v1::Namespace::default();
    ns.metadata.name = Some(name.into());
    nss.create(&PostParams::default(), &ns).await?;
    Ok(())
}

async fn create(client: &kube::Client, obj: &ConfigMap) -> anyhow::Result<ConfigMap> {
    let ns = obj.metadata.namespace.as_deref().context("namespace")?;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    Ok(api.create(&PostParams::default(), obj).await?)
}

fn names<K>(store: &Store<K>) -> BTreeSet<String> {
    store.keys().iter().map(ToString::to_string).collect()
}

async fn wait_names<K>(store: &Store<K>, want: &BTreeSet<String>) -> anyhow::Result<()> {
    wait_for(WAIT, || async { (names(store) == *want).then_some(()) })
        .await
        .with_context(|| format!("store holds {:?}, want {want:?}", names(store)))
}

fn quick_backoff() -> BackoffConfig {
    BackoffConfig {
        initial: Duration::from_millis(20),
        max: Duration::from_millis(200),
        reset_after: Duration::from_secs(120),
    }
}

#[tokio::test]
async fn informer_lists_in_pages_then_follows_every_change() -> anyhow::Result<()> {
    let env = TestEnv::builder().without_root_ca().start().await?;
    let client = env.client();
    for i in 0..7 {
        create(&client, &cm("default", &format!("pre-{i}"), &[])).await?;
    }
    let informer: SharedInformer<ConfigMap> =
        SharedInformer::new(client.clone(), InformerConfig::default().page_size(2));
    let shutdown = CancellationToken::new();
    informer.start(shutdown.clone());
    let store = informer.store();
    tokio::time::timeout(WAIT, store.wait_until_synced()).await?;
    assert_eq!(store.len(), 7);

    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    create(&client, &cm("default", "new", &[])).await?;
    api.patch(
        "pre-0",
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({"data": {"k": "changed"}})),
    )
    .await?;
    api.delete("pre-1", &DeleteParams::default()).await?;
    let mut want: BTreeSet<String> = (0..7).map(|i| format!("default/pre-{i}")).collect();
    want.remove("default/pre-1");
    want.insert("default/new".into());
    wait_names(&store, &want).await?;
    let changed = wait_for(WAIT, || async {
        store
            .get(&ObjectKey::namespaced("default", "pre-0"))
            .filter(|c| {
                c.data.as_ref().and_then(|d| d.get("k")).map(String::as_str) == Some("changed")
            })
    })
    .await?;
    assert!(changed.metadata.managed_fields.is_none());
    shutdown.cancel();
    Ok(())
}

/// A client whose requests fail while the gate is closed, as during a network partition.
#[derive(Clone)]
struct Gate {
    router: axum::Router,
    open: Arc<AtomicBool>,
}

impl tower::Service<http::Request<kube::client::Body>> for Gate {
    type Response = http::Response<axum::body::Body>;
    type Error = Box<dyn std::error::Error + Send + Sync>;
    type Future = BoxFuture<'static, Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<kube::client::Body>) -> Self::Future {
        let open = self.open.load(Ordering::SeqCst);
        let router = self.router.clone();
        Box::pin(async move {
            if !open {
                return Err("connection refused (gate closed)".into());
            }
            Ok(tower::ServiceExt::oneshot(router, req).await?)
        })
    }
}

#[tokio::test]
async fn informer_relists_after_the_server_compacted_its_history() -> anyhow::Result<()> {
    let env = TestEnv::builder()
        .without_root_ca()
        .history_capacity(8)
        .start()
        .await?;
    let client = env.client();
    let open = Arc::new(AtomicBool::new(true));
    let gated = kube::Client::new(
        Gate {
            router: env.server().router(),
            open: Arc::clone(&open),
        },
        "default",
    );
    for i in 0..5 {
        create(&client, &cm("default", &format!("old-{i}"), &[])).await?;
    }
    let informer: SharedInformer<ConfigMap> = SharedInformer::new(
        gated,
        InformerConfig::default()
            .watch_timeout(Duration::from_secs(1))
            .backoff(quick_backoff()),
    );
    let mut sub = informer.subscribe();
    let shutdown = CancellationToken::new();
    informer.start(shutdown.clone());
    let store = informer.store();
    tokio::time::timeout(WAIT, store.wait_until_synced()).await?;
    assert!(matches!(sub.next().await, Some(Change::Resync)));
    assert!(matches!(sub.next().await, Some(Change::Resync)));

    // Partition the informer, then change far more than the history keeps.
    open.store(false, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(1500)).await; // the open watch times out
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    for i in 0..30 {
        create(&client, &cm("default", &format!("new-{i}"), &[])).await?;
    }
    api.delete("old-0", &DeleteParams::default()).await?;
    api.delete("old-1", &DeleteParams::default()).await?;
    open.store(true, Ordering::SeqCst);

    let mut want: BTreeSet<String> = (2..5).map(|i| format!("default/old-{i}")).collect();
    want.extend((0..30).map(|i| format!("default/new-{i}")));
    wait_names(&store, &want).await?;
    // The relist told the subscriber to re-read the store.
    let resynced = tokio::time::timeout(WAIT, async {
        while let Some(change) = sub.next().await {
            if matches!(change, Change::Resync) {
                return true;
            }
        }
        false
    })
    .await?;
    assert!(resynced, "a relist sends Resync");
    shutdown.cancel();
    Ok(())
}

#[tokio::test]
async fn informer_recovers_every_key_after_the_server_restarts_on_its_data_dir()
-> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0")?;
        l.local_addr()?.port()
    };
    let env = TestEnv::builder()
        .without_root_ca()
        .tcp()
        .port(port)
        .data_dir(dir.path())
        .start()
        .await?;
    let client = env.client();
    for i in 0..20 {
        create(&client, &cm("default", &format!("a-{i}"), &[])).await?;
    }
    let socket = env.socket_client().await?;
    let informer: SharedInformer<ConfigMap> =
        SharedInformer::new(socket, InformerConfig::default().backoff(quick_backoff()));
    let shutdown = CancellationToken::new();
    informer.start(shutdown.clone());
    let store = informer.store();
    tokio::time::timeout(WAIT, store.wait_until_synced()).await?;
    assert_eq!(store.len(), 20);

    drop(client); // an in-process client keeps the storage (and its lock) alive
    env.stop().await;
    tokio::time::sleep(Duration::from_millis(300)).await; // the informer is now retrying
    let env = TestEnv::builder()
        .without_root_ca()
        .tcp()
        .port(port)
        .data_dir(dir.path())
        .start()
        .await
        .map_err(|e| anyhow::anyhow!("{e:?}"))?;
    let client = env.client();
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    for i in 0..5 {
        api.delete(&format!("a-{i}"), &DeleteParams::default())
            .await?;
    }
    for i in 0..10 {
        create(&client, &cm("default", &format!("b-{i}"), &[])).await?;
    }
    let mut want: BTreeSet<String> = (5..20).map(|i| format!("default/a-{i}")).collect();
    want.extend((0..10).map(|i| format!("default/b-{i}")));
    wait_names(&store, &want).await?;
    shutdown.cancel();
    Ok(())
}

#[tokio::test]
async fn readers_never_see_a_half_swapped_list() -> anyhow::Result<()> {
    let env = TestEnv::builder().without_root_ca().start().await?;
    let client = env.client();
    for i in 0..60 {
        create(&client, &cm("default", &format!("cm-{i}"), &[])).await?;
    }
    let informer: SharedInformer<ConfigMap> =
        SharedInformer::new(client.clone(), InformerConfig::default().page_size(1));
    let store = informer.store();
    let seen = Arc::new(std::sync::Mutex::new(BTreeSet::new()));
    let reader = {
        let store = store.clone();
        let seen = Arc::clone(&seen);
        tokio::spawn(async move {
            loop {
                let synced = store.is_synced();
                let len = store.len();
                seen.lock().expect("not poisoned").insert((synced, len));
                if synced && len == 60 {
                    break;
                }
                tokio::task::yield_now().await;
            }
        })
    };
    let shutdown = CancellationToken::new();
    informer.start(shutdown.clone());
    tokio::time::timeout(WAIT, reader).await??;
    let seen = seen.lock().expect("not poisoned").clone();
    assert!(
        seen.iter()
            .all(|&(synced, len)| (!synced && len == 0) || (synced && len == 60)),
        "readers saw {seen:?}"
    );
    shutdown.cancel();
    Ok(())
}

#[tokio::test]
async fn selectors_and_namespace_scope_limit_what_is_cached() -> anyhow::Result<()> {
    let env = TestEnv::builder().without_root_ca().start().await?;
    let client = env.client();
    create_ns(&client, "one").await?;
    create_ns(&client, "two").await?;
    create(&client, &cm("one", "match", &[("app", "web")])).await?;
    create(&client, &cm("one", "other-label", &[("app", "db")])).await?;
    create(&client, &cm("two", "other-ns", &[("app", "web")])).await?;

    let informers = Informers::new(client.clone());
    let by_label = informers.get::<ConfigMap>(
        InformerConfig::default()
            .namespace("one")
            .label_selector("app=web"),
    );
    let by_field = informers
        .get::<ConfigMap>(InformerConfig::default().field_selector("metadata.name=other-ns"));
    let all_in_two = informers.get::<ConfigMap>(InformerConfig::default().namespace("two"));
    let shutdown = CancellationToken::new();
    informers.start(shutdown.clone());
    tokio::time::timeout(WAIT, informers.wait_until_synced()).await?;
    assert_eq!(
        names(&by_label.store()),
        BTreeSet::from(["one/match".to_string()])
    );
    assert_eq!(
        names(&by_field.store()),
        BTreeSet::from(["two/other-ns".to_string()])
    );
    assert_eq!(
        names(&all_in_two.store()),
        BTreeSet::from(["two/other-ns".to_string()])
    );

    // A new match arrives; an object relabelled out of the selector leaves.
    create(&client, &cm("one", "late-match", &[("app", "web")])).await?;
    create(&client, &cm("two", "late-other-ns", &[("app", "web")])).await?;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "one");
    api.patch(
        "match",
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({"metadata": {"labels": {"app": "gone"}}})),
    )
    .await?;
    wait_names(
        &by_label.store(),
        &BTreeSet::from(["one/late-match".to_string()]),
    )
    .await?;
    wait_names(
        &all_in_two.store(),
        &BTreeSet::from(["two/other-ns".to_string(), "two/late-other-ns".to_string()]),
    )
    .await?;
    shutdown.cancel();
    Ok(())
}

#[tokio::test]
async fn metadata_only_informer_caches_metadata_without_the_data() -> anyhow::Result<()> {
    let env = TestEnv::builder().without_root_ca().start().await?;
    let client = env.client();
    create(&client, &cm("default", "big", &[("app", "web")])).await?;
    let informers = Informers::new(client.clone());
    let meta = informers.get::<PartialObjectMeta<ConfigMap>>(InformerConfig::default());
    let shutdown = CancellationToken::new();
    informers.start(shutdown.clone());
    tokio::time::timeout(WAIT, informers.wait_until_synced()).await?;
    let obj = meta
        .store()
        .get(&ObjectKey::namespaced("default", "big"))
        .context("cached")?;
    assert_eq!(
        obj.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("app"))
            .map(String::as_str),
        Some("web")
    );
    assert_eq!(
        obj.types.as_ref().map(|t| t.kind.as_str()),
        Some("PartialObjectMetadata"),
        "the server answered with metadata only"
    );
    create(&client, &cm("default", "later", &[])).await?;
    wait_names(
        &meta.store(),
        &BTreeSet::from(["default/big".to_string(), "default/later".to_string()]),
    )
    .await?;
    shutdown.cancel();
    Ok(())
}

#[tokio::test]
async fn index_lookups_find_objects_by_source_and_follow_changes() -> anyhow::Result<()> {
    let env = TestEnv::builder().without_root_ca().start().await?;
    let client = env.client();
    let with_source = |name: &str, source: &str| {
        let mut c = cm("default", name, &[]);
        c.metadata.annotations = Some(BTreeMap::from([("source".to_string(), source.to_string())]));
        c
    };
    create(&client, &with_source("a", "ns1/src")).await?;
    create(&client, &with_source("b", "ns1/src")).await?;
    create(&client, &with_source("c", "ns2/other")).await?;
    let informers = Informers::new(client.clone());
    let informer = informers.get::<ConfigMap>(InformerConfig::default());
    informer.add_index("by source", |cm: &ConfigMap| {
        cm.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get("source").cloned())
            .into_iter()
            .collect()
    });
    let shutdown = CancellationToken::new();
    informers.start(shutdown.clone());
    tokio::time::timeout(WAIT, informers.wait_until_synced()).await?;
    let store = informer.store();
    let found: BTreeSet<String> = store
        .by_index("by source", "ns1/src")
        .iter()
        .filter_map(|c| c.metadata.name.clone())
        .collect();
    assert_eq!(found, BTreeSet::from(["a".to_string(), "b".to_string()]));
    assert!(store.by_index("by source", "nothing").is_empty());
    assert!(store.by_index("no such index", "ns1/src").is_empty());

    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    api.patch(
        "b",
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({"metadata": {"annotations": {"source": "ns2/other"}}})),
    )
    .await?;
    wait_for(WAIT, || async {
        (store.by_index("by source", "ns2/other").len() == 2).then_some(())
    })
    .await?;
    assert_eq!(
        store.keys_by_index("by source", "ns1/src"),
        vec![ObjectKey::namespaced("default", "a")]
    );
    shutdown.cancel();
    Ok(())
}

#[tokio::test]
async fn informers_are_shared_and_a_late_subscriber_gets_everything() -> anyhow::Result<()> {
    let env = TestEnv::builder().without_root_ca().start().await?;
    let client = env.client();
    let informers = Informers::new(client.clone());
    let first = informers.get::<ConfigMap>(InformerConfig::default());
    let shutdown = CancellationToken::new();
    informers.start(shutdown.clone());
    for i in 0..10 {
        create(&client, &cm("default", &format!("cm-{i}"), &[])).await?;
    }
    tokio::time::timeout(WAIT, informers.wait_until_synced()).await?;
    let want: BTreeSet<String> = (0..10).map(|i| format!("default/cm-{i}")).collect();
    wait_names(&first.store(), &want).await?;

    // The same kind and selectors: the same informer, already synced.
    let second = informers.get::<ConfigMap>(InformerConfig::default());
    assert_eq!(names(&second.store()), want);
    second.add_index("name", |cm: &ConfigMap| {
        cm.metadata.name.clone().into_iter().collect()
    });
    assert_eq!(
        first.store().by_index("name", "cm-3").len(),
        1,
        "one shared cache"
    );

    // A late subscriber starts with Resync and finds every object in the store.
    let mut late = second.subscribe();
    assert!(matches!(late.next().await, Some(Change::Resync)));
    assert_eq!(names(&late_store(&second)), want);
    create(&client, &cm("default", "after", &[])).await?;
    let change = tokio::time::timeout(WAIT, late.next()).await?;
    match change {
        Some(Change::Applied { new, .. }) => {
            assert_eq!(new.metadata.name.as_deref(), Some("after"));
        }
        other => anyhow::bail!("expected the new object, got {other:?}"),
    }

    // An informer created after start starts at once.
    let scoped = informers.get::<ConfigMap>(InformerConfig::default().label_selector("x=y"));
    tokio::time::timeout(WAIT, scoped.store().wait_until_synced()).await?;

    // Subscriptions end when the informers stop.
    shutdown.cancel();
    let ended = tokio::time::timeout(WAIT, async { while late.next().await.is_some() {} }).await;
    assert!(ended.is_ok(), "the subscription ends after shutdown");
    Ok(())
}

fn late_store(informer: &SharedInformer<ConfigMap>) -> Store<ConfigMap> {
    informer.store()
}

#[tokio::test]
async fn a_slow_subscriber_resyncs_without_blocking_the_others() -> anyhow::Result<()> {
    let env = TestEnv::builder().without_root_ca().start().await?;
    let client = env.client();
    let informer: SharedInformer<ConfigMap> = SharedInformer::new(
        client.clone(),
        InformerConfig::default().subscriber_buffer(4),
    );
    let mut slow = informer.subscribe();
    let mut fast = informer.subscribe();
    let shutdown = CancellationToken::new();
    informer.start(shutdown.clone());
    tokio::time::timeout(WAIT, informer.store().wait_until_synced()).await?;

    let fast_task = tokio::spawn(async move {
        let mut seen = BTreeSet::new();
        while seen.len() < 40 {
            match fast.next().await {
                Some(Change::Applied { new, .. }) => {
                    seen.insert(new.metadata.name.clone().unwrap_or_default());
                }
                Some(_) => {}
                None => break,
            }
        }
        seen
    });
    for i in 0..40 {
        create(&client, &cm("default", &format!("cm-{i:02}"), &[])).await?;
    }
    // The fast subscriber saw every change although the slow one read nothing.
    let seen = tokio::time::timeout(WAIT, fast_task).await??;
    assert_eq!(seen.len(), 40);

    // The slow one gets what fitted in its buffer, then Resync, and the store has it all.
    let mut got = Vec::new();
    loop {
        let change = tokio::time::timeout(WAIT, slow.next())
            .await?
            .context("open")?;
        let resync = matches!(change, Change::Resync);
        got.push(change);
        if resync && got.len() > 1 {
            break;
        }
    }
    assert!(
        got.len() <= 5,
        "at most the buffer, then Resync: {}",
        got.len()
    );
    assert_eq!(informer.store().len(), 40);
    shutdown.cancel();
    Ok(())
}

/// A `CachedClient` of ConfigMaps over a started, synced informer; cancel the token to stop it.
async fn synced_cached_client(
    client: &kube::Client,
) -> anyhow::Result<(CachedClient<ConfigMap>, CancellationToken)> {
    let informers = Informers::new(client.clone());
    let informer = informers.get::<ConfigMap>(InformerConfig::default());
    let shutdown = CancellationToken::new();
    informers.start(shutdown.clone());
    tokio::time::timeout(WAIT, informers.wait_until_synced()).await?;
    Ok((CachedClient::new(client.clone(), informer), shutdown))
}

#[tokio::test]
async fn cached_client_reads_its_own_writes_at_once() -> anyhow::Result<()> {
    let env = TestEnv::builder().without_root_ca().start().await?;
    let client = env.client();
    let (cached, shutdown) = synced_cached_client(&client).await?;

    let key = ObjectKey::namespaced("default", "mine");
    for round in 0..20 {
        let created = cached
            .create(&cm("default", "mine", &[]), &PostParams::default())
            .await?;
        let read = cached
            .get(&key)
            .context("created object readable at once")?;
        assert_eq!(
            read.metadata.resource_version,
            created.metadata.resource_version
        );

        let patched = cached
            .patch(
                &key,
                &PatchParams::default(),
                &Patch::Merge(serde_json::json!({"data": {"round": round.to_string()}})),
            )
            .await?;
        let read = cached.get(&key).context("patched object readable")?;
        assert_eq!(
            read.metadata.resource_version,
            patched.metadata.resource_version
        );
        assert_eq!(
            read.data.as_ref().and_then(|d| d.get("round")).cloned(),
            Some(round.to_string())
        );

        let gone = cached.delete(&key, &DeleteParams::default()).await?;
        assert!(gone.is_none());
        assert!(
            cached.get(&key).is_none(),
            "a deleted object is gone at once"
        );
    }
    // Once the watch has caught up, the late events did not bring it back.
    create(&client, &cm("default", "marker", &[])).await?;
    wait_for(WAIT, || async {
        cached.get(&ObjectKey::namespaced("default", "marker"))
    })
    .await?;
    assert!(cached.get(&key).is_none());
    shutdown.cancel();
    Ok(())
}

#[tokio::test]
async fn cached_client_finalizer_writes_are_conditional_and_read_at_once() -> anyhow::Result<()> {
    const MINE: &str = "kore.dev/test";
    let env = TestEnv::builder().without_root_ca().start().await?;
    let client = env.client();
    let (cached, shutdown) = synced_cached_client(&client).await?;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let key = ObjectKey::namespaced("default", "held");

    let stale = cached
        .create(&cm("default", "held", &[]), &PostParams::default())
        .await?;
    // Another writer adds its finalizer: a write computed from the stale copy conflicts
    // and leaves the other finalizer in place; nothing is recorded.
    api.patch(
        "held",
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({"metadata": {"finalizers": ["other.dev/x"]}})),
    )
    .await?;
    let err = cached
        .try_add_finalizer(&stale, MINE)
        .await
        .expect_err("a write from a stale object conflicts");
    assert!(
        matches!(err, kore_runtime::client::Error::Api(kube::Error::Api(ref s)) if s.code == 409),
        "{err}"
    );
    assert_eq!(
        api.get("held").await?.metadata.finalizers,
        Some(vec!["other.dev/x".to_owned()])
    );

    // From a fresh copy it is written, and readable from the cache at once.
    let fresh = Arc::new(api.get("held").await?);
    let written = cached.try_add_finalizer(&fresh, MINE).await?;
    let want = Some(vec!["other.dev/x".to_owned(), MINE.to_owned()]);
    assert_eq!(written.metadata.finalizers, want);
    let read = cached.get(&key).context("cached")?;
    assert_eq!(
        read.metadata.resource_version,
        written.metadata.resource_version
    );
    assert_eq!(read.metadata.finalizers, want);
    // Present already: no write, the same object back.
    let again = cached.try_add_finalizer(&written, MINE).await?;
    assert!(Arc::ptr_eq(&again, &written));
    assert_eq!(
        api.get("held").await?.metadata.resource_version,
        written.metadata.resource_version
    );

    // Removal keeps the other finalizer; absent, it writes nothing.
    let removed = cached
        .try_remove_finalizer(&written, MINE)
        .await?
        .context("still there")?;
    assert_eq!(
        removed.metadata.finalizers,
        Some(vec!["other.dev/x".to_owned()])
    );
    assert_eq!(
        cached
            .get(&key)
            .context("cached")?
            .metadata
            .resource_version,
        removed.metadata.resource_version
    );
    let same = cached
        .try_remove_finalizer(&removed, MINE)
        .await?
        .context("still there")?;
    assert!(Arc::ptr_eq(&same, &removed));

    // Gone from the server: removal says so instead of failing.
    let mut gone = (*removed).clone();
    gone.metadata.name = Some("never-existed".into());
    gone.metadata.finalizers = Some(vec![MINE.to_owned()]);
    assert!(
        cached
            .try_remove_finalizer(&Arc::new(gone), MINE)
            .await?
            .is_none()
    );
    shutdown.cancel();
    Ok(())
}

async fn next_applied(
    sub: &mut kore_runtime::Subscription<ConfigMap>,
) -> anyhow::Result<Arc<ConfigMap>> {
    loop {
        match tokio::time::timeout(WAIT, sub.next())
            .await?
            .context("open")?
        {
            Change::Applied { new, .. } => return Ok(new),
            Change::Resync => {}
            other => anyhow::bail!("expected an applied object, got {other:?}"),
        }
    }
}

#[tokio::test]
async fn readers_share_the_object_a_change_event_carried() -> anyhow::Result<()> {
    let env = TestEnv::builder().without_root_ca().start().await?;
    let client = env.client();
    let informer: SharedInformer<ConfigMap> = SharedInformer::new(
        client.clone(),
        InformerConfig::default().namespace("default"),
    );
    let cold: SharedInformer<ConfigMap> = SharedInformer::new(
        client.clone(),
        InformerConfig::default()
            .namespace("default")
            .decoded_cache(0),
    );
    let mut sub = informer.subscribe();
    let shutdown = CancellationToken::new();
    informer.start(shutdown.clone());
    cold.start(shutdown.clone());
    tokio::time::timeout(WAIT, informer.store().wait_until_synced()).await?;
    let store = informer.store();

    // A controller reconciling the key after its event reads the event's allocation, and so
    // does every other reader of that version.
    for i in 0..5 {
        create(&client, &cm("default", &format!("cm-{i}"), &[])).await?;
        let new = next_applied(&mut sub).await?;
        let key = ObjectKey::of(&*new);
        let read = store.get(&key).context("cached")?;
        assert!(Arc::ptr_eq(&new, &read), "get returns the event's Arc");
        assert!(Arc::ptr_eq(&read, &store.get(&key).context("cached")?));
        assert!(store.list().iter().any(|o| Arc::ptr_eq(o, &new)));
    }

    // A write through the cached client: what it returns, what readers get and what the
    // watch event of that write carries are one allocation, in whichever order the watch
    // event and the write's response arrive.
    let cached = CachedClient::new(client.clone(), informer.clone());
    let written = cached
        .create(&cm("default", "mine", &[]), &PostParams::default())
        .await?;
    let key = ObjectKey::namespaced("default", "mine");
    assert!(Arc::ptr_eq(&written, &cached.get(&key).context("cached")?));
    let event = next_applied(&mut sub).await?;
    assert!(
        Arc::ptr_eq(&written, &event),
        "the event carries the shared Arc"
    );

    // An update is read at once as the new version, never the old shared object.
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    api.patch(
        "mine",
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({"data": {"k": "changed"}})),
    )
    .await?;
    let updated = next_applied(&mut sub).await?;
    let read = store.get(&key).context("cached")?;
    assert!(Arc::ptr_eq(&updated, &read));
    assert_eq!(
        read.data
            .as_ref()
            .and_then(|d| d.get("k"))
            .map(String::as_str),
        Some("changed")
    );
    assert!(store.decoded_len() <= store.decoded_capacity());

    // With the decoded cache off, every read decodes its own copy of the same object.
    let cold_store = cold.store();
    wait_for(WAIT, || async {
        cold_store
            .get(&key)
            .filter(|o| o.metadata.resource_version == read.metadata.resource_version)
    })
    .await?;
    let (a, b) = (
        cold_store.get(&key).context("cached")?,
        cold_store.get(&key).context("cached")?,
    );
    assert!(!Arc::ptr_eq(&a, &b));
    assert_eq!(a, b);
    assert_eq!(cold_store.decoded_len(), 0);
    shutdown.cancel();
    Ok(())
}

/// Records when each request arrived, and fails them all (the server is down).
#[derive(Clone, Default)]
struct Down {
    attempts: Arc<std::sync::Mutex<Vec<tokio::time::Instant>>>,
}

impl tower::Service<http::Request<kube::client::Body>> for Down {
    type Response = http::Response<axum::body::Body>;
    type Error = Box<dyn std::error::Error + Send + Sync>;
    type Future = BoxFuture<'static, Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _req: http::Request<kube::client::Body>) -> Self::Future {
        self.attempts
            .lock()
            .expect("not poisoned")
            .push(tokio::time::Instant::now());
        Box::pin(async { Err("connection refused".into()) })
    }
}

#[tokio::test(start_paused = true)]
async fn informer_backs_off_from_800ms_to_30s_while_the_server_is_down() -> anyhow::Result<()> {
    let down = Down::default();
    let client = kube::Client::new(down.clone(), "default");
    let informer: SharedInformer<ConfigMap> =
        SharedInformer::new(client, InformerConfig::default());
    let shutdown = CancellationToken::new();
    informer.start(shutdown.clone());
    // Paused time jumps over each backoff sleep; ten minutes is enough for about 25 tries.
    tokio::time::sleep(Duration::from_secs(600)).await;
    shutdown.cancel();
    let attempts = down.attempts.lock().expect("not poisoned").clone();
    assert!(attempts.len() >= 12, "{} attempts", attempts.len());
    let gaps: Vec<Duration> = attempts.windows(2).map(|w| w[1] - w[0]).collect();
    let mut base = Duration::from_millis(800);
    for gap in &gaps {
        let max = (base * 2).min(Duration::from_secs(30));
        assert!(
            *gap >= base.min(Duration::from_secs(30)) && *gap <= max + Duration::from_millis(5),
            "gap {gap:?} outside [{base:?}, {max:?}] in {gaps:?}"
        );
        base = (base * 2).min(Duration::from_secs(30));
    }
    assert!(
        gaps.iter()
            .rev()
            .take(3)
            .all(|g| *g <= Duration::from_millis(30_005))
    );
    assert!(!informer.store().is_synced());
    Ok(())
}

/// Never run: fails to compile if a public future stops being `Send`.
#[allow(dead_code)]
async fn public_futures_are_send(
    informers: Informers,
    mut sub: kore_runtime::Subscription<ConfigMap>,
    store: Store<ConfigMap>,
    client: CachedClient<ConfigMap>,
) {
    fn send<T: Send>(_: T) {}
    send(informers.wait_until_synced());
    send(sub.next());
    send(store.wait_until_synced());
    send(client.create(&ConfigMap::default(), &PostParams::default()));
    send(client.delete(&ObjectKey::cluster("x"), &DeleteParams::default()));
}

/// Issue 10, item 5: informers started with a tracker run on it — those created before the
/// start and after it — so a manager's shutdown phase for them waits until they have ended
/// (they used to be spawned untracked, and the phase waited on nothing).
#[tokio::test]
async fn informers_started_with_a_tracker_run_on_it_and_end_on_shutdown() -> anyhow::Result<()> {
    let env = TestEnv::builder().without_root_ca().start().await?;
    let client = env.client();
    let informers = Informers::new(client.clone());
    let early = informers.get::<ConfigMap>(InformerConfig::default());
    let tracker = tokio_util::task::TaskTracker::new();
    let shutdown = CancellationToken::new();
    informers.start_with(shutdown.clone(), tracker.clone());
    let late = informers.get::<ConfigMap>(InformerConfig::default().namespace("default"));
    tokio::time::timeout(WAIT, informers.wait_until_synced()).await?;
    assert!(early.is_started() && late.is_started());
    assert_eq!(tracker.len(), 2, "both informers' loops are tracked");
    shutdown.cancel();
    tracker.close();
    tokio::time::timeout(WAIT, tracker.wait())
        .await
        .context("the informers' loops end on shutdown")?;
    assert!(tracker.is_empty());
    Ok(())
}
