//! End to end: a controller built on the runtime, run by the manager, converging real objects
//! on kore-apiserver, surviving a server restart, and reporting through `/metrics`.
//!
//! The reconciler copies every ConfigMap named `src-*` to `copy-*` in the same namespace (a
//! small operator), and records how many reconciles of one key ever overlapped.

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kore_runtime::controller::{Action, Controller, ReconcileError, Request, reconciler_fn};
use kore_runtime::manager::LeaseConfig;
use kore_runtime::metrics::Metrics;
use kore_runtime::{Informers, Manager, ObjectKey};
use kore_testenv::{TestEnv, wait_for};
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio_util::sync::CancellationToken;

const WAIT: Duration = Duration::from_secs(20);

/// Keys being reconciled right now, and how often a second reconcile of one key began.
#[derive(Default)]
struct Overlap {
    running: Mutex<HashSet<ObjectKey>>,
    overlaps: AtomicUsize,
    reconciles: AtomicUsize,
}

impl Overlap {
    fn enter(&self, key: &ObjectKey) {
        self.reconciles.fetch_add(1, Ordering::SeqCst);
        let mut running = self.running.lock().expect("not poisoned");
        if !running.insert(key.clone()) {
            self.overlaps.fetch_add(1, Ordering::SeqCst);
        }
    }
    fn leave(&self, key: &ObjectKey) {
        self.running.lock().expect("not poisoned").remove(key);
    }
}

fn config_map(ns: &str, name: &str, value: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(ns.to_owned()),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([("value".to_owned(), value.to_owned())])),
        ..ConfigMap::default()
    }
}

/// The copier: `src-x` → `copy-x`, written by server-side apply (idempotent).
fn copier(
    informers: &Informers,
    client: kube::Client,
    overlap: Arc<Overlap>,
    metrics: Option<Metrics>,
) -> Controller<ConfigMap, impl kore_runtime::Reconciler<ConfigMap>> {
    let mut builder = Controller::for_::<ConfigMap>(informers).named("copier");
    if let Some(metrics) = metrics {
        builder = builder.metrics(metrics);
    }
    builder.build(reconciler_fn(move |request: Request<ConfigMap>| {
        let client = client.clone();
        let overlap = overlap.clone();
        async move {
            let key = request.key().clone();
            overlap.enter(&key);
            // Long enough for a second event of the same key to arrive while this one runs.
            tokio::time::sleep(Duration::from_millis(2)).await;
            let result = async {
                let Some(source) = request.object() else {
                    // The source is gone (the reconciler is told even when the deletion
                    // happened while the informer was not watching): so goes its copy.
                    let key = request.key();
                    if let (Some(ns), Some(suffix)) =
                        (key.namespace(), key.name().strip_prefix("src-"))
                    {
                        let api: Api<ConfigMap> = Api::namespaced(client, ns);
                        match api
                            .delete(&format!("copy-{suffix}"), &Default::default())
                            .await
                        {
                            Ok(_) => {}
                            Err(kube::Error::Api(e)) if e.code == 404 => {}
                            Err(e) => return Err(ReconcileError::Retry(e)),
                        }
                    }
                    return Ok(Action::done());
                };
                let name = source.metadata.name.clone().unwrap_or_default();
                let Some(suffix) = name.strip_prefix("src-") else {
                    return Ok(Action::done());
                };
                let ns = source.metadata.namespace.clone().unwrap_or_default();
                let copy = ConfigMap {
                    data: source.data.clone(),
                    ..config_map(&ns, &format!("copy-{suffix}"), "")
                };
                let api: Api<ConfigMap> = Api::namespaced(client, &ns);
                api.patch(
                    &format!("copy-{suffix}"),
                    &PatchParams::apply("copier").force(),
                    &Patch::Apply(&copy),
                )
                .await
                .map_err(ReconcileError::Retry)?;
                Ok::<_, ReconcileError<kube::Error>>(Action::done())
            }
            .await;
            overlap.leave(&key);
            result
        }
    }))
}

async fn copies(api: &Api<ConfigMap>) -> anyhow::Result<BTreeMap<String, String>> {
    Ok(api
        .list(&Default::default())
        .await?
        .items
        .into_iter()
        .filter_map(|cm| {
            let name = cm.metadata.name?;
            let suffix = name.strip_prefix("copy-")?.to_owned();
            let value = cm.data?.get("value")?.clone();
            Some((suffix, value))
        })
        .collect())
}

async fn http_get(addr: std::net::SocketAddr, path: &str) -> anyhow::Result<String> {
    let mut stream = tokio::net::TcpStream::connect(addr).await?;
    stream
        .write_all(
            format!("GET {path} HTTP/1.1\r\nHost: kore\r\nConnection: close\r\n\r\n").as_bytes(),
        )
        .await?;
    let mut text = String::new();
    stream.read_to_string(&mut text).await?;
    Ok(text)
}

#[tokio::test]
async fn a_managed_controller_converges_real_objects_and_reports_its_metrics() -> anyhow::Result<()>
{
    let env = TestEnv::start().await?;
    let client = env.client();
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    for i in 0..50 {
        api.create(
            &PostParams::default(),
            &config_map("default", &format!("src-{i}"), "v1"),
        )
        .await?;
    }

    let metrics_listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    let probe_listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    let metrics_addr = metrics_listener.local_addr()?;
    let probe_addr = probe_listener.local_addr()?;
    metrics_listener.set_nonblocking(true)?;
    probe_listener.set_nonblocking(true)?;
    let mut manager = Manager::builder(client.clone())
        .leader_election(LeaseConfig::new("default", "copier-leader").identity("a"))
        .metrics_listener(metrics_listener)
        .health_probe_listener(probe_listener)
        .handle_signals(false)
        .build();
    let metrics = Metrics::new();
    metrics.register(manager.registry_mut());
    let overlap = Arc::new(Overlap::default());
    let controller = copier(
        manager.informers(),
        client.clone(),
        overlap.clone(),
        Some(metrics),
    );
    manager.add(Box::new(controller));
    let stop = manager.shutdown_handle();
    let running = tokio::spawn(manager.run());

    // Every source gets its copy; then a change of a source reaches its copy.
    wait_for(WAIT, || async {
        let c = copies(&api).await.ok()?;
        (c.len() == 50 && c.values().all(|v| v == "v1")).then_some(())
    })
    .await?;
    for i in 0..10 {
        api.patch(
            &format!("src-{i}"),
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"data": {"value": "v2"}})),
        )
        .await?;
    }
    wait_for(WAIT, || async {
        let c = copies(&api).await.ok()?;
        (0..10)
            .all(|i| c.get(&i.to_string()).map(String::as_str) == Some("v2"))
            .then_some(())
    })
    .await?;

    let ready = http_get(probe_addr, "/readyz").await?;
    assert!(ready.starts_with("HTTP/1.1 200"), "{ready}");
    let text = http_get(metrics_addr, "/metrics").await?;
    for family in [
        "controller_runtime_reconcile_total",
        "controller_runtime_reconcile_time_seconds",
        "controller_runtime_max_concurrent_reconciles",
        "controller_runtime_active_workers",
        "workqueue_adds_total",
        "workqueue_depth",
        "leader_election_master_status",
    ] {
        assert!(text.contains(family), "/metrics lacks {family}:\n{text}");
    }
    let successes: f64 = text
        .lines()
        .find(|l| {
            l.starts_with("controller_runtime_reconcile_total{")
                && l.contains("controller=\"copier\"")
                && l.contains("result=\"success\"")
        })
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0);
    // 50 sources and 50 copies are reconciled at least once, 10 sources once more.
    assert!(
        successes >= 110.0,
        "reconcile successes: {successes}\n{text}"
    );
    assert_eq!(
        overlap.overlaps.load(Ordering::SeqCst),
        0,
        "a key was reconciled twice at once"
    );

    stop.shutdown();
    tokio::time::timeout(WAIT, running).await???;
    Ok(())
}

#[tokio::test]
async fn a_controller_loses_no_key_across_a_server_restart() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let env = TestEnv::builder()
        .tcp()
        .port(port)
        .data_dir(dir.path())
        .start()
        .await?;
    {
        let api: Api<ConfigMap> = Api::namespaced(env.client(), "default");
        for i in 0..60 {
            api.create(
                &PostParams::default(),
                &config_map("default", &format!("src-{i}"), "v1"),
            )
            .await?;
        }
    }
    let socket = env.socket_client().await?;
    let informers = Informers::new(socket.clone());
    let overlap = Arc::new(Overlap::default());
    let controller = copier(&informers, socket.clone(), overlap.clone(), None);
    let shutdown = CancellationToken::new();
    informers.start(shutdown.clone());
    let running = tokio::spawn(controller.run(shutdown.clone()));
    {
        let api: Api<ConfigMap> = Api::namespaced(socket.clone(), "default");
        wait_for(WAIT, || async {
            (copies(&api).await.ok()?.len() == 60).then_some(())
        })
        .await?;
    }

    // The server goes away and comes back on the same data dir and port, with an empty watch
    // history: the informers' watches expire (410) and they relist.
    env.stop().await;
    // Connections still closing may hold the old server's data dir for a moment.
    let env = wait_for(WAIT, || async {
        TestEnv::builder()
            .tcp()
            .port(port)
            .data_dir(dir.path())
            .start()
            .await
            .ok()
    })
    .await?;
    let api: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    // Deleted before the informers are back: they learn of it only from their relist.
    for i in 50..60 {
        api.delete(&format!("src-{i}"), &Default::default()).await?;
    }
    for i in 60..80 {
        api.create(
            &PostParams::default(),
            &config_map("default", &format!("src-{i}"), "v1"),
        )
        .await?;
    }
    for i in 0..20 {
        api.patch(
            &format!("src-{i}"),
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"data": {"value": "v2"}})),
        )
        .await?;
    }
    wait_for(WAIT, || async {
        let c = copies(&api).await.ok()?;
        let done = c.len() == 70
            && !(50..60).any(|i| c.contains_key(&i.to_string()))
            && (0..50).chain(60..80).all(|i| {
                let want = if i < 20 { "v2" } else { "v1" };
                c.get(&i.to_string()).map(String::as_str) == Some(want)
            });
        done.then_some(())
    })
    .await?;
    assert_eq!(
        overlap.overlaps.load(Ordering::SeqCst),
        0,
        "a key was reconciled twice at once"
    );
    shutdown.cancel();
    tokio::time::timeout(WAIT, running)
        .await??
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(())
}
