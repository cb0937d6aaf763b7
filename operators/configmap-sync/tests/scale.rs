//! Many ConfigMapSyncs created at once on an in-process kore-apiserver: how long until every
//! copy exists and every status is Ready, how many writes each ConfigMapSync cost, and how
//! many writes follow while nothing changes. Ignored by default; run in release:
//!
//! ```text
//! KORE_CMS_SCALE=10000 KORE_CMS_IDLE_SECS=60 KORE_CMS_WORKERS=4 cargo test --release -p kore-configmap-sync \
//!     --test scale -- --ignored --nocapture
//! ```

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kore_configmap_sync::{ConfigMapSync, ConfigMapSyncSpec, NAME, Options};
use kore_runtime::Manager;
use kore_runtime::manager::LeaseConfig;
use kore_runtime::metrics::Metrics;
use kore_testenv::TestEnv;
use kube::api::{Api, ObjectMeta, PostParams, WatchEvent, WatchParams};

const OPERATOR_NS: &str = "kore-system";
const DESTINATIONS: usize = 10;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Counts the watch events (writes) of one kind everywhere from `rv` on.
fn count_writes<K>(api: Api<K>, rv: String, counter: Arc<AtomicUsize>)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    tokio::spawn(async move {
        let Ok(stream) = api.watch(&WatchParams::default().timeout(290), &rv).await else {
            return;
        };
        let mut stream = std::pin::pin!(stream);
        while let Some(Ok(event)) = stream.next().await {
            if matches!(
                event,
                WatchEvent::Added(_) | WatchEvent::Modified(_) | WatchEvent::Deleted(_)
            ) {
                counter.fetch_add(1, Ordering::Relaxed);
            }
        }
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a benchmark; run in release with --ignored"]
async fn many_configmapsyncs_converge_with_the_minimum_of_writes() -> anyhow::Result<()> {
    let n = env_usize("KORE_CMS_SCALE", 10_000);
    let idle = Duration::from_secs(env_usize("KORE_CMS_IDLE_SECS", 60) as u64);
    let env = TestEnv::start().await?;
    let admin = env.client();
    let operator =
        kore_testenv::operator::install(&env, &kore_configmap_sync::operator(), OPERATOR_NS)
            .await?;
    let pp = PostParams::default();
    let namespaces: Api<Namespace> = Api::all(admin.clone());
    for ns in std::iter::once("src".to_owned()).chain((0..DESTINATIONS).map(|d| format!("d{d}"))) {
        let mut obj = Namespace::default();
        obj.metadata.name = Some(ns);
        namespaces.create(&pp, &obj).await?;
    }
    let sources: Api<ConfigMap> = Api::namespaced(admin.clone(), "src");
    futures::stream::iter(0..n)
        .map(|i| {
            let sources = sources.clone();
            async move {
                let cm = ConfigMap {
                    metadata: ObjectMeta {
                        name: Some(format!("s{i}")),
                        ..ObjectMeta::default()
                    },
                    data: Some([("key".to_owned(), format!("value-{i}"))].into()),
                    ..ConfigMap::default()
                };
                sources.create(&PostParams::default(), &cm).await
            }
        })
        .buffer_unordered(32)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect::<Result<Vec<_>, _>>()?;

    let mut manager = Manager::builder(operator)
        .leader_election(LeaseConfig::new(OPERATOR_NS, NAME).identity("scale"))
        .handle_signals(false)
        .build();
    let metrics = Metrics::new();
    metrics.register(manager.registry_mut());
    let workers = env_usize(
        "KORE_CMS_WORKERS",
        Options::default().max_concurrent_reconciles,
    );
    let options = Options::default().max_concurrent_reconciles(workers);
    kore_configmap_sync::register(&mut manager, &metrics, &options);
    let stop = manager.shutdown_handle();
    let running = tokio::spawn(manager.run());

    let syncs: Api<ConfigMapSync> = Api::all(admin.clone());
    let configmaps: Api<ConfigMap> = Api::all(admin.clone());
    let rv = syncs
        .list(&Default::default())
        .await?
        .metadata
        .resource_version
        .unwrap_or_default();
    let sync_writes = Arc::new(AtomicUsize::new(0));
    let cm_writes = Arc::new(AtomicUsize::new(0));
    count_writes(syncs.clone(), rv.clone(), sync_writes.clone());
    count_writes(configmaps.clone(), rv, cm_writes.clone());

    let started = Instant::now();
    let in_src: Api<ConfigMapSync> = Api::namespaced(admin.clone(), "src");
    futures::stream::iter(0..n)
        .map(|i| {
            let api = in_src.clone();
            async move {
                let spec = ConfigMapSyncSpec::new(
                    "src",
                    format!("s{i}"),
                    format!("d{}", i % DESTINATIONS),
                );
                api.create(
                    &PostParams::default(),
                    &ConfigMapSync::new(&format!("c{i}"), spec),
                )
                .await
            }
        })
        .buffer_unordered(32)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect::<Result<Vec<_>, _>>()?;
    let created = started.elapsed();

    loop {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let ready = syncs
            .list(&Default::default())
            .await?
            .items
            .iter()
            .filter(|s| {
                s.status.as_ref().is_some_and(|st| {
                    st.conditions
                        .iter()
                        .any(|c| c.type_ == "Ready" && c.status == "True")
                })
            })
            .count();
        if ready == n {
            break;
        }
        anyhow::ensure!(
            started.elapsed() < Duration::from_secs(600),
            "only {ready} of {n} Ready"
        );
    }
    let copies = configmaps
        .list(&Default::default())
        .await?
        .items
        .iter()
        .filter(|cm| kore_configmap_sync::owner_of(cm).is_some())
        .count();
    let converged = started.elapsed();
    anyhow::ensure!(copies == n, "{copies} copies of {n}");
    // Let the last watch events arrive.
    tokio::time::sleep(Duration::from_secs(1)).await;
    // The user's n creates of ConfigMapSyncs are not the operator's writes.
    let operator_writes =
        sync_writes.load(Ordering::Relaxed) - n + cm_writes.load(Ordering::Relaxed);
    let before_idle = sync_writes.load(Ordering::Relaxed) + cm_writes.load(Ordering::Relaxed);
    tokio::time::sleep(idle).await;
    let idle_writes =
        sync_writes.load(Ordering::Relaxed) + cm_writes.load(Ordering::Relaxed) - before_idle;

    println!("configmap-sync scale: {n} ConfigMapSyncs, one destination each, {workers} workers");
    println!(
        "  created in {:.2} s; all copies and Ready after {:.2} s",
        created.as_secs_f64(),
        converged.as_secs_f64()
    );
    println!(
        "  operator writes: {operator_writes} ({:.2} per ConfigMapSync: finalizer patch, copy create, status patch)",
        operator_writes as f64 / n as f64
    );
    println!("  writes during {} s idle: {idle_writes}", idle.as_secs());
    stop.shutdown();
    tokio::time::timeout(Duration::from_secs(60), running).await???;
    anyhow::ensure!(idle_writes == 0, "{idle_writes} writes while idle");
    Ok(())
}
