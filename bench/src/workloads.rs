//! Workloads on simulated nodes (issues 13 and 14): kore-apiserver, `kore_nodes::Simulation`
//! (nodes, scheduler, kubelets) and the controller manager run together, and the suite times
//! what a cluster user waits for — bare pods from created to Running, Deployments to Available,
//! a rolling update, Jobs to Complete — and counts what it costs: API writes per pod, CPU per
//! pod, memory per node and per pod, the controller manager's CPU and peak memory.
//!
//! The server and the simulation share this process (as in `kore up`), so CPU and memory are the
//! process's own (`/proc/self`), and the process runs with `kore`'s allocator: the suite runs in
//! `kore-bench-mimalloc` (`kore-bench` hands it over). With `--kore`, the controller manager
//! runs as a child process, `kore controller-manager --kubeconfig F`, against the server on a
//! loopback socket, so its CPU and peak memory (`VmHWM`) are its own; without it, it runs in
//! this process too.
//!
//! API writes are counted from the server's resourceVersion, which grows by one per write of
//! any object: the delta over a phase is every write in it. Node heartbeats are turned off
//! (Lease interval of an hour) so that they do not blur the count; Events are counted apart.
//!
//! kwok's published figures are the reference (not measured here): its documentation says it
//! "can create 20 nodes or pods per second", and its CI benchmark
//! (`test/kwokctl/kwokctl_benchmark_test.sh`) requires 10,000 pods, already bound to one node,
//! to be Running within 120 s (about 83 pods/s).

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use futures::StreamExt as _;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Event, Node, Pod};
use kore_apiserver::server::{ApiServer, Config};
use kore_controller_manager::{ControllerManager, Options};
use kore_nodes::{KubeletConfig, NodeConfig, SchedulerConfig, Simulation, SimulationConfig};
use kore_runtime::Manager;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use serde_json::json;

use crate::procs;
use crate::suite::{Row, Target};

/// kwok's documented rate: "can create 20 nodes or pods per second".
const KWOK_PODS_PER_S: f64 = 20.0;
/// kwok's CI bound: 10,000 pre-bound pods Running within 120 s, as pods/s.
const KWOK_CI_PODS_PER_S: f64 = 10_000.0 / 120.0;
/// Concurrent clients creating or patching objects.
const CLIENTS: usize = 32;
/// How often the waits look at the objects.
const POLL: Duration = Duration::from_millis(200);
/// The longest any phase may take before the suite gives up.
const PHASE_LIMIT: Duration = Duration::from_secs(900);
/// The quiet window in which writes at steady state are counted.
const STEADY: Duration = Duration::from_secs(2);

/// The global allocator of this process, for the notes (set once by `main`).
static ALLOCATOR: std::sync::OnceLock<&'static str> = std::sync::OnceLock::new();

/// Records the global allocator of this process, named in the notes of the process's rows.
pub(crate) fn set_allocator(name: &'static str) {
    let _ = ALLOCATOR.set(name);
}

fn allocator() -> &'static str {
    ALLOCATOR.get().copied().unwrap_or("unknown")
}

fn row(measure: String, kore: f64, unit: &str, note: &str) -> Row {
    Row {
        measure,
        kore,
        unit: unit.into(),
        peer: None,
        target: None,
        note: note.into(),
    }
}

fn with_target(mut row: Row, target: Target) -> Row {
    row.target = Some(target);
    row
}

fn with_peer(mut row: Row, name: &str, value: f64) -> Row {
    row.peer = Some((name.into(), value));
    row
}

/// Runs the workload measurements; `quick` uses a tenth of the sizes. `kore` is the `kore`
/// binary for a separate controller-manager process.
pub(crate) async fn run(quick: bool, kore: Option<&Path>) -> anyhow::Result<Vec<Row>> {
    // `KORE_BENCH_SCALE=N` divides every size by N instead (a smaller smoke test than --quick).
    let scale = std::env::var("KORE_BENCH_SCALE")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .filter(|&n| (1..=100).contains(&n))
        .unwrap_or(if quick { 10 } else { 1 });
    // `KORE_BENCH_WORKLOADS=pods` or `=controllers` runs one scenario (to profile it);
    // `pods-100` or `pods-1000` one size of the bare pods: a size that runs after another in
    // the same process reuses the pages the first freed, so only the first size's memory rows
    // measure anything.
    let only = std::env::var("KORE_BENCH_WORKLOADS").unwrap_or_default();
    let runs = |name: &str| only.is_empty() || only.split(',').any(|s| s.trim() == name);
    let mut rows = Vec::new();
    if runs("pods") || runs("pods-100") {
        rows.extend(bare_pods(10_000 / scale, 100 / scale).await?);
    }
    if runs("pods") || runs("pods-1000") {
        rows.extend(bare_pods(10_000 / scale, 1_000 / scale).await?);
    }
    if runs("controllers") {
        rows.extend(controllers(1_000 / scale, 10, 100 / scale, 1_000 / scale, 5, kore).await?);
    }
    Ok(rows)
}

/// The process's resident memory, bytes.
fn self_rss() -> anyhow::Result<u64> {
    procs::rss_bytes(std::process::id())
}

/// The process's CPU time so far (all threads).
fn self_cpu() -> anyhow::Result<Duration> {
    procs::cpu_time("/proc/self/stat")
}

/// A server in this process and an administrator's client for it.
async fn server() -> anyhow::Result<(ApiServer, kube::Client)> {
    let server = ApiServer::start(Config::default())
        .await
        .context("starting kore-apiserver")?;
    let client = kube::Client::new(server.router(), "default");
    Ok((server, client))
}

/// The server's resourceVersion now: it grows by one with every write.
async fn revision(client: &kube::Client) -> anyhow::Result<u64> {
    let pods: Api<Pod> = Api::all(client.clone());
    let list = pods.list(&ListParams::default().limit(1)).await?;
    list.metadata
        .resource_version
        .and_then(|v| v.parse().ok())
        .context("a numeric resourceVersion")
}

/// Events stored in `namespace` (the Scheduled events of bare pods, the controllers' events).
async fn events(client: &kube::Client, namespace: &str) -> anyhow::Result<u64> {
    let api: Api<Event> = Api::namespaced(client.clone(), namespace);
    Ok(api.list(&ListParams::default()).await?.items.len() as u64)
}

/// Which kinds of objects were written after resourceVersion `since` (objects whose
/// resourceVersion is newer, by kind; deleted objects are not seen), e.g. `pods 12, events 3`.
async fn written_since(client: &kube::Client, since: u64) -> anyhow::Result<String> {
    async fn newer<K>(client: &kube::Client, since: u64) -> anyhow::Result<usize>
    where
        K: kube::Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
    {
        let api: Api<K> = Api::all(client.clone());
        let list = api.list(&ListParams::default()).await?;
        Ok(list
            .items
            .iter()
            .filter(|o| {
                o.meta()
                    .resource_version
                    .as_deref()
                    .and_then(|v| v.parse::<u64>().ok())
                    .is_some_and(|v| v > since)
            })
            .count())
    }
    use k8s_openapi::api::apps::v1::ReplicaSet;
    use k8s_openapi::api::coordination::v1::Lease;
    use k8s_openapi::api::core::v1::Node;
    let counts = [
        ("pods", newer::<Pod>(client, since).await?),
        ("replicasets", newer::<ReplicaSet>(client, since).await?),
        ("deployments", newer::<Deployment>(client, since).await?),
        ("jobs", newer::<Job>(client, since).await?),
        ("events", newer::<Event>(client, since).await?),
        ("leases", newer::<Lease>(client, since).await?),
        ("nodes", newer::<Node>(client, since).await?),
    ];
    let mut written: Vec<String> = counts
        .iter()
        .filter(|(_, n)| *n > 0)
        .map(|(kind, n)| format!("{kind} {n}"))
        .collect();
    // Which Events: the commonest (reporter, reason) among those written.
    let events: Api<Event> = Api::all(client.clone());
    let mut reasons: std::collections::BTreeMap<String, usize> = Default::default();
    for e in events.list(&ListParams::default()).await?.items {
        let newer = e
            .metadata
            .resource_version
            .as_deref()
            .and_then(|v| v.parse::<u64>().ok())
            .is_some_and(|v| v > since);
        if newer {
            let by = e
                .reporting_component
                .clone()
                .or_else(|| e.source.as_ref().and_then(|s| s.component.clone()))
                .unwrap_or_default();
            let on = e.involved_object.kind.clone().unwrap_or_default();
            let key = format!("{by} {} on {on}", e.reason.unwrap_or_default());
            *reasons.entry(key).or_default() += 1;
        }
    }
    let mut reasons: Vec<(String, usize)> = reasons.into_iter().collect();
    reasons.sort_by_key(|(_, n)| std::cmp::Reverse(*n));
    for (what, n) in reasons.into_iter().take(3) {
        written.push(format!("event {what}: {n}"));
    }
    Ok(if written.is_empty() {
        "nothing".into()
    } else {
        written.join(", ")
    })
}

/// The simulation's shape: `nodes` nodes with room for `pods_per_node` pods, no heartbeats
/// during the run, Job pods that run for 100 ms.
fn simulation(nodes: usize, pods_per_node: usize) -> anyhow::Result<SimulationConfig> {
    Ok(SimulationConfig {
        nodes,
        node: NodeConfig {
            pods: u32::try_from(pods_per_node).context("pods per node")?,
            cpu: "1000".into(),
            memory: "4Ti".into(),
            lease_interval: Duration::from_secs(3600),
            ..NodeConfig::default()
        },
        scheduler: SchedulerConfig::default(),
        kubelet: KubeletConfig {
            job_run_time: Duration::from_millis(100),
            ..KubeletConfig::default()
        },
    })
}

/// Counts pods that reached Running (by name) from a watch started now; `target` is reached
/// when the returned counter does.
fn count_running(client: &kube::Client) -> (Arc<AtomicUsize>, tokio::task::JoinHandle<()>) {
    let running = Arc::new(AtomicUsize::new(0));
    let counter = running.clone();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let task = tokio::spawn(async move {
        let mut seen = HashSet::new();
        let mut stream = watcher(pods, watcher::Config::default()).boxed();
        while let Some(event) = stream.next().await {
            let pod = match event {
                Ok(watcher::Event::Apply(pod) | watcher::Event::InitApply(pod)) => pod,
                _ => continue,
            };
            let is_running =
                pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running");
            if is_running
                && let Some(name) = pod.metadata.name
                && seen.insert(name)
            {
                counter.store(seen.len(), Ordering::Relaxed);
            }
        }
    });
    (running, task)
}

/// Waits until `done` answers true, polling; errors after [`PHASE_LIMIT`].
async fn wait_until<F, Fut>(what: &str, mut done: F) -> anyhow::Result<()>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<bool>>,
{
    let began = Instant::now();
    loop {
        if done().await? {
            return Ok(());
        }
        anyhow::ensure!(
            began.elapsed() < PHASE_LIMIT,
            "{what}: not done within {PHASE_LIMIT:?}"
        );
        tokio::time::sleep(POLL).await;
    }
}

/// Runs `count` jobs `make(i)` with [`CLIENTS`] at once.
async fn in_parallel<F, Fut>(count: usize, make: F) -> anyhow::Result<()>
where
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = anyhow::Result<()>> + Send,
{
    let make = Arc::new(make);
    let mut tasks = tokio::task::JoinSet::new();
    for worker in 0..CLIENTS {
        let make = make.clone();
        tasks.spawn(async move {
            let mut i = worker;
            while i < count {
                make(i).await?;
                i += CLIENTS;
            }
            anyhow::Ok(())
        });
    }
    while let Some(done) = tasks.join_next().await {
        done??;
    }
    Ok(())
}

fn thousands(n: usize) -> String {
    crate::svg::thousands(n as f64)
}

/// Bare pods over simulated nodes, created to Running.
async fn bare_pods(pods_n: usize, nodes_n: usize) -> anyhow::Result<Vec<Row>> {
    eprintln!("kore-bench: {pods_n} bare pods over {nodes_n} nodes");
    let label = format!(
        "{} bare pods / {} nodes",
        thousands(pods_n),
        thousands(nodes_n)
    );
    let (server, client) = server().await?;
    let rss_empty = self_rss()?;
    let sim = Simulation::start(
        client.clone(),
        simulation(nodes_n, pods_n.div_ceil(nodes_n) * 2 + 10)?,
    )
    .await?;
    // Let the scheduler's and kubelets' caches fill before the clock starts.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let rss_nodes = self_rss()?;
    let (running, watch) = count_running(&client);
    let rv_before = revision(&client).await?;
    let cpu_before = self_cpu()?;
    let began = Instant::now();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    in_parallel(pods_n, move |i| {
        let pods = pods.clone();
        async move {
            let pod: Pod = serde_json::from_value(json!({
                "metadata": {"name": format!("p{i}")},
                "spec": {"containers": [{"name": "c", "image": "busybox"}]},
            }))?;
            pods.create(&PostParams::default(), &pod).await?;
            Ok(())
        }
    })
    .await?;
    let created = began.elapsed();
    wait_until("bare pods Running", || {
        let n = running.load(Ordering::Relaxed);
        async move { Ok(n >= pods_n) }
    })
    .await?;
    let all_running = began.elapsed();
    let cpu = self_cpu()? - cpu_before;
    let rss_pods = self_rss()?;
    let rv_after = revision(&client).await?;
    watch.abort();
    let events_n = events(&client, "default").await?;
    tokio::time::sleep(STEADY).await;
    let steady = revision(&client).await? - rv_after;
    let steady_note = format!(
        "all pods Running, node heartbeats off; written: {}",
        written_since(&client, rv_after).await?
    );
    let writes = rv_after - rv_before;
    let pod_writes = writes.saturating_sub(pods_n as u64 + events_n) as f64 / pods_n as f64;
    let per_pod = |v: f64| v / pods_n as f64;
    let mut rows = vec![
        row(
            format!("{label}: created → all Running"),
            all_running.as_secs_f64(),
            "s",
            &format!(
                "{CLIENTS} clients create; the last pod Running as a watch sees it; created in {:.2} s",
                created.as_secs_f64()
            ),
        ),
        with_peer(
            row(
                format!("{label}: pods Running per second"),
                pods_n as f64 / all_running.as_secs_f64(),
                "pods/s",
                "peer: kwok's documented rate (\"20 nodes or pods per second\"), not measured here",
            ),
            "kwok, published",
            KWOK_PODS_PER_S,
        ),
        with_peer(
            row(
                format!("{label}: pods Running per second, against kwok's CI bound"),
                pods_n as f64 / all_running.as_secs_f64(),
                "pods/s",
                "peer: kwok's CI requires 10,000 pods, bound to one node in advance, Running within 120 s (not measured here)",
            ),
            "kwok CI bound",
            KWOK_CI_PODS_PER_S,
        ),
        row(
            format!("{label}: pods created per second"),
            pods_n as f64 / created.as_secs_f64(),
            "pods/s",
            "POSTs while the scheduler and kubelets already work on the first pods",
        ),
        with_target(
            row(
                format!("{label}: API writes per pod, Pending → Running"),
                pod_writes,
                "writes",
                "binding + status writes: every write in the run less the creates and the Events",
            ),
            Target::AtMost(3.0),
        ),
        row(
            format!("{label}: Events per pod"),
            events_n as f64 / pods_n as f64,
            "writes",
            "the scheduler's Scheduled event, as kube-scheduler records it",
        ),
        row(
            format!("{label}: CPU per pod"),
            per_pod(cpu.as_secs_f64() * 1e3),
            "ms",
            &format!(
                "this process: server + scheduler + kubelets + the creating clients; allocator: {}",
                allocator()
            ),
        ),
        row(
            format!("{label}: memory per node"),
            (rss_nodes.saturating_sub(rss_empty)) as f64 / nodes_n as f64 / 1024.0,
            "KiB",
            "process RSS delta: the Node and Lease in the server and in the simulation's caches",
        ),
        row(
            format!("{label}: memory per pod"),
            per_pod(rss_pods.saturating_sub(rss_nodes) as f64) / 1024.0,
            "KiB",
            "process RSS delta: the pod in the server (with its history) and in the caches",
        ),
    ];
    if pods_n == 10_000 && nodes_n == 100 {
        rows[0].target = Some(Target::Below(5.0));
    }
    rows.push(with_target(
        row(
            format!("{label}: writes in {} s at steady state", STEADY.as_secs()),
            steady as f64,
            "writes",
            &steady_note,
        ),
        Target::AtMost(0.0),
    ));
    sim.stop().await;
    server.shutdown().await;
    Ok(rows)
}

/// The controller manager under test: a child process or a manager in this process.
enum Controllers {
    Child {
        child: std::process::Child,
        metrics: u16,
        _dir: tempfile::TempDir,
    },
    InProcess {
        /// The manager's informers, whose cache sizes `metrics_text` reads.
        informers: kore_runtime::informer::Informers,
        stop: kore_runtime::manager::ShutdownHandle,
        task: tokio::task::JoinHandle<Result<(), kore_runtime::manager::Error>>,
    },
}

impl Controllers {
    async fn start(
        server: &ApiServer,
        client: &kube::Client,
        kore: Option<&Path>,
    ) -> anyhow::Result<Controllers> {
        match kore {
            Some(kore) => {
                let endpoint = server
                    .listen(([127, 0, 0, 1], 0).into(), true)
                    .await
                    .context("listening on loopback")?;
                let dir = tempfile::tempdir()?;
                let kubeconfig: PathBuf = dir.path().join("kubeconfig");
                ApiServer::write_kubeconfig(&endpoint, &kubeconfig)?;
                let log = std::fs::File::create(dir.path().join("controller-manager.log"))?;
                // A free port for its /metrics (reconcile errors and retries explain slow phases).
                let metrics = std::net::TcpListener::bind("127.0.0.1:0")?
                    .local_addr()?
                    .port();
                let child = std::process::Command::new(kore)
                    .arg("controller-manager")
                    .arg("--kubeconfig")
                    .arg(&kubeconfig)
                    .args([
                        "--no-leader-elect",
                        // Heartbeats are off (see the module's doc): without this the node
                        // lifecycle controller would find every node Unknown after 50 s and
                        // evict the pods in the middle of the run.
                        "--node-monitor-grace-period",
                        "1h",
                        "--metrics-bind-address",
                        &format!("127.0.0.1:{metrics}"),
                        "--health-probe-bind-address",
                        "0",
                    ])
                    .env("RUST_LOG", "warn")
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(log)
                    .spawn()
                    .with_context(|| format!("starting {} controller-manager", kore.display()))?;
                Ok(Controllers::Child {
                    child,
                    metrics,
                    _dir: dir,
                })
            }
            None => {
                let mut options = Options::default().leader_elect(false);
                // Heartbeats are off: no node may become Unknown during the run.
                options.node_monitor_grace_period = Duration::from_secs(3600);
                let cm = ControllerManager::new(options)?;
                let mut manager = Manager::builder(client.clone())
                    .handle_signals(false)
                    .build();
                let metrics = kore_runtime::metrics::Metrics::new();
                metrics.register(manager.registry_mut());
                cm.register(&mut manager, &metrics);
                let stop = manager.shutdown_handle();
                let informers = manager.informers().clone();
                let task = tokio::spawn(manager.run());
                Ok(Controllers::InProcess {
                    informers,
                    stop,
                    task,
                })
            }
        }
    }

    /// Whose CPU and memory the controller rows report.
    fn who(&self) -> &'static str {
        match self {
            Controllers::Child { .. } => "the `kore controller-manager` process",
            Controllers::InProcess { .. } => {
                "this whole process (server, simulation and controllers; no --kore given)"
            }
        }
    }

    /// The controller manager's metrics in Prometheus' text format: the child's `/metrics`;
    /// in process, only its informers' cache sizes. `None` when unreadable.
    fn metrics_text(&self) -> Option<String> {
        use std::io::{Read as _, Write as _};
        match self {
            Controllers::Child { metrics, .. } => {
                let scrape = || -> std::io::Result<String> {
                    let mut conn = std::net::TcpStream::connect(("127.0.0.1", *metrics))?;
                    conn.set_read_timeout(Some(Duration::from_secs(5)))?;
                    conn.write_all(b"GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n")?;
                    let mut body = String::new();
                    conn.read_to_string(&mut body)?;
                    Ok(body)
                };
                scrape().ok()
            }
            Controllers::InProcess { informers, .. } => {
                let mut registry = prometheus_client::registry::Registry::default();
                informers.register_metrics(&mut registry);
                let mut text = String::new();
                prometheus_client::encoding::text::encode(&mut text, &registry).ok()?;
                Some(text)
            }
        }
    }

    /// The bytes of the controller manager's packed cache entries, every informer's
    /// (`kore_cache_packed_bytes`).
    fn packed_bytes(&self) -> anyhow::Result<u64> {
        let text = self
            .metrics_text()
            .context("reading the controller manager's metrics")?;
        let mut total = 0.0;
        let mut seen = false;
        for line in text
            .lines()
            .filter(|l| l.starts_with("kore_cache_packed_bytes"))
        {
            if let Some(v) = line
                .rsplit_once(' ')
                .and_then(|(_, v)| v.parse::<f64>().ok())
            {
                total += v;
                seen = true;
            }
        }
        anyhow::ensure!(
            seen,
            "no kore_cache_packed_bytes in the controller manager's metrics"
        );
        Ok(total as u64)
    }

    /// The child's reconcile, error and retry counters from its /metrics, in short: e.g.
    /// `deployment: 2,000 ok, 35 errors, 35 retries`; empty in process or when unreadable.
    fn reconcile_counts(&self) -> String {
        let Some(body) = self.metrics_text() else {
            return String::new();
        };
        let mut by_controller: std::collections::BTreeMap<String, [f64; 3]> = Default::default();
        for line in body.lines().filter(|l| !l.starts_with('#')) {
            let Some((series, value)) = line.rsplit_once(' ') else {
                continue;
            };
            let Ok(value) = value.parse::<f64>() else {
                continue;
            };
            let label = |key: &str| {
                series
                    .split_once(&format!("{key}=\""))
                    .and_then(|(_, rest)| rest.split_once('"'))
                    .map(|(v, _)| v.to_owned())
            };
            let slot = if series.starts_with("controller_runtime_reconcile_total") {
                0
            } else if series.starts_with("controller_runtime_reconcile_errors_total") {
                1
            } else if series.starts_with("workqueue_retries_total") {
                2
            } else {
                continue;
            };
            let Some(name) = label("controller").or_else(|| label("name")) else {
                continue;
            };
            by_controller.entry(name).or_default()[slot] += value;
        }
        by_controller
            .iter()
            .filter(|(_, [n, _, _])| *n > 0.0)
            .map(|(name, [n, errors, retries])| {
                format!("{name}: {n:.0} reconciles, {errors:.0} errors, {retries:.0} retries")
            })
            .collect::<Vec<_>>()
            .join("; ")
    }

    fn stat_path(&self) -> String {
        match self {
            Controllers::Child { child, .. } => format!("/proc/{}/stat", child.id()),
            Controllers::InProcess { .. } => "/proc/self/stat".into(),
        }
    }

    fn cpu(&self) -> anyhow::Result<Duration> {
        procs::cpu_time(&self.stat_path())
    }

    /// (current RSS, peak RSS) in bytes.
    fn memory(&self) -> anyhow::Result<(u64, u64)> {
        let path = self.stat_path().replace("/stat", "/status");
        let status = std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.trim().strip_suffix("kB"))
                .and_then(|v| v.trim().parse::<u64>().ok())
                .map(|kib| kib * 1024)
                .with_context(|| format!("no {name} in {path}"))
        };
        Ok((field("VmRSS:")?, field("VmHWM:")?))
    }

    async fn stop(self) {
        match self {
            Controllers::Child { mut child, .. } => {
                let _ = child.kill();
                let _ = child.wait();
            }
            Controllers::InProcess { stop, task, .. } => {
                stop.shutdown();
                let _ = task.await;
            }
        }
    }
}

/// What one controller phase cost.
struct Phase {
    took: Duration,
    writes: u64,
    cm_cpu: Duration,
    process_cpu: Duration,
}

async fn phase<F, Fut>(client: &kube::Client, cm: &Controllers, run: F) -> anyhow::Result<Phase>
where
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<()>>,
{
    let rv = revision(client).await?;
    let cm_cpu = cm.cpu()?;
    let cpu = self_cpu()?;
    let began = Instant::now();
    run().await?;
    Ok(Phase {
        took: began.elapsed(),
        writes: revision(client).await? - rv,
        cm_cpu: cm.cpu()? - cm_cpu,
        process_cpu: self_cpu()? - cpu,
    })
}

fn deployment(i: usize, replicas: usize) -> anyhow::Result<Deployment> {
    let name = format!("d{i}");
    Ok(serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "c", "image": "nginx"}]},
            },
        },
    }))?)
}

fn job(i: usize, completions: usize) -> anyhow::Result<Job> {
    Ok(serde_json::from_value(json!({
        "metadata": {"name": format!("j{i}")},
        "spec": {
            "completions": completions,
            "parallelism": completions,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "c", "image": "busybox"}],
                },
            },
        },
    }))?)
}

/// Waits until `count` Deployments of `api` have rolled out their generation to `replicas`
/// updated and available replicas.
async fn all_available(
    what: &str,
    api: &Api<Deployment>,
    count: usize,
    replicas: usize,
) -> anyhow::Result<()> {
    let want = i32::try_from(replicas)?;
    watch_until(what, api.clone(), count, move |d: &Deployment| {
        d.status.as_ref().is_some_and(|s| {
            s.observed_generation == d.metadata.generation
                && s.replicas == Some(want)
                && s.updated_replicas == Some(want)
                && s.available_replicas == Some(want)
        })
    })
    .await
}

/// Waits until `count` Jobs of `api` are `Complete`.
async fn all_complete(api: &Api<Job>, count: usize) -> anyhow::Result<()> {
    watch_until(
        "Jobs Complete",
        api.clone(),
        count,
        kore_controller_manager::job::is_complete,
    )
    .await
}

/// Waits until `count` objects of `api` meet `done`, as a watch started now sees them (its
/// first list, then every change); errors after [`PHASE_LIMIT`]. A watch costs the server
/// one event per change, where polling listed every object five times a second: for 1,000
/// Deployments that was about a second of this process's CPU per phase, counted in the CPU
/// rows and taken from the server it measures.
async fn watch_until<K>(
    what: &str,
    api: Api<K>,
    count: usize,
    done: impl Fn(&K) -> bool,
) -> anyhow::Result<()>
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + 'static,
{
    let deadline = tokio::time::Instant::now() + PHASE_LIMIT;
    let mut stream = watcher(api, watcher::Config::default()).boxed();
    let mut met: HashSet<String> = HashSet::new();
    loop {
        let next = tokio::time::timeout_at(deadline, stream.next())
            .await
            .map_err(|_| anyhow::anyhow!("{what}: not done within {PHASE_LIMIT:?}"))?;
        let event = match next {
            None => anyhow::bail!("{what}: the watch ended"),
            // The watcher lists and watches again by itself after an error.
            Some(Err(_)) => continue,
            Some(Ok(event)) => event,
        };
        match event {
            // A (re)list starts: what it lists replaces what was seen.
            watcher::Event::Init => met.clear(),
            watcher::Event::InitDone => {}
            watcher::Event::Apply(obj) | watcher::Event::InitApply(obj) => {
                let name = kube::ResourceExt::name_any(&obj);
                if done(&obj) {
                    met.insert(name);
                } else {
                    met.remove(&name);
                }
            }
            watcher::Event::Delete(obj) => {
                met.remove(&kube::ResourceExt::name_any(&obj));
            }
        }
        if met.len() >= count {
            return Ok(());
        }
    }
}

/// Deployments to Available, a rolling update of all of them, then Jobs to Complete, with the
/// controller manager.
async fn controllers(
    deployments_n: usize,
    replicas: usize,
    nodes_n: usize,
    jobs_n: usize,
    completions: usize,
    kore: Option<&Path>,
) -> anyhow::Result<Vec<Row>> {
    let pods_n = deployments_n * replicas;
    let job_pods = jobs_n * completions;
    eprintln!(
        "kore-bench: {deployments_n} Deployments × {replicas} on {nodes_n} nodes, a rolling update, {jobs_n} Jobs × {completions}"
    );
    let (server, client) = server().await?;
    // Room for the surge of a rolling update and the Jobs beside the Deployments' pods.
    let per_node = (pods_n * 2 + job_pods).div_ceil(nodes_n) + 10;
    let sim = Simulation::start(client.clone(), simulation(nodes_n, per_node)?).await?;
    let cm = Controllers::start(&server, &client, kore).await?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let (cm_rss_idle, _) = cm.memory()?;
    let cm_packed_idle = cm.packed_bytes()?;
    let who = cm.who();
    let deploys: Api<Deployment> = Api::namespaced(client.clone(), "default");

    let label = format!(
        "{} Deployments × {replicas} / {} nodes",
        thousands(deployments_n),
        thousands(nodes_n)
    );
    let api = deploys.clone();
    let available = phase(&client, &cm, || async move {
        let create = api.clone();
        in_parallel(deployments_n, move |i| {
            let api = create.clone();
            async move {
                api.create(&PostParams::default(), &deployment(i, replicas)?)
                    .await?;
                Ok(())
            }
        })
        .await?;
        all_available("Deployments Available", &api, deployments_n, replicas).await
    })
    .await?;
    let (cm_rss_cached, _) = cm.memory()?;
    let cm_packed_cached = cm.packed_bytes()?;
    // What the controller manager's caches hold then, as JSON, for comparison with the packed
    // bytes (which skip managedFields).
    let cached_json = json_bytes(&Api::<Pod>::all(client.clone())).await?
        + json_bytes(&Api::<ReplicaSet>::all(client.clone())).await?
        + json_bytes(&Api::<Deployment>::all(client.clone())).await?
        + json_bytes(&Api::<Node>::all(client.clone())).await?;

    eprintln!("kore-bench: rolling update");
    let api = deploys.clone();
    let rollout = phase(&client, &cm, || async move {
        let patch = api.clone();
        in_parallel(deployments_n, move |i| {
            let api = patch.clone();
            async move {
                let body = json!({"spec": {"template": {"metadata": {"annotations": {"bench/rev": "2"}}}}});
                api.patch(&format!("d{i}"), &PatchParams::default(), &Patch::Merge(&body))
                    .await?;
                Ok(())
            }
        })
        .await?;
        all_available("the rolling update", &api, deployments_n, replicas).await
    })
    .await?;

    eprintln!("kore-bench: Jobs");
    let jobs: Api<Job> = Api::namespaced(client.clone(), "default");
    let api = jobs.clone();
    let completed = phase(&client, &cm, || async move {
        let create = api.clone();
        in_parallel(jobs_n, move |i| {
            let api = create.clone();
            async move {
                api.create(&PostParams::default(), &job(i, completions)?)
                    .await?;
                Ok(())
            }
        })
        .await?;
        all_complete(&api, jobs_n).await
    })
    .await?;
    let (cm_rss_end, cm_peak) = cm.memory()?;
    let reconciles = cm.reconcile_counts();
    eprintln!("kore-bench: controller manager: {reconciles}");
    let rv = revision(&client).await?;
    tokio::time::sleep(STEADY).await;
    let steady = revision(&client).await? - rv;
    let steady_note = format!(
        "everything Available or Complete, node heartbeats off; written: {}",
        written_since(&client, rv).await?
    );

    let jlabel = format!("{} Jobs × {completions}", thousands(jobs_n));
    let mut rows = vec![
        row(
            format!("{label}: created → all Available"),
            available.took.as_secs_f64(),
            "s",
            &format!(
                "{} pods; {CLIENTS} clients create the Deployments",
                thousands(pods_n)
            ),
        ),
        with_peer(
            row(
                format!("{label}: pods Available per second"),
                pods_n as f64 / available.took.as_secs_f64(),
                "pods/s",
                "peer: kwok's documented rate, 20 pods/s (not measured here)",
            ),
            "kwok, published",
            KWOK_PODS_PER_S,
        ),
        row(
            format!("{label}: API writes per pod"),
            available.writes as f64 / pods_n as f64,
            "writes",
            "every write: Deployments, ReplicaSets, pods (create, binding, status), Events",
        ),
        row(
            format!("{label}: controller-manager CPU per pod"),
            available.cm_cpu.as_secs_f64() * 1e3 / pods_n as f64,
            "ms",
            who,
        ),
        row(
            format!("{label}: whole process CPU per pod"),
            available.process_cpu.as_secs_f64() * 1e3 / pods_n as f64,
            "ms",
            &format!(
                "server + simulation (+ controllers when in process) + the creating clients; allocator: {}",
                allocator()
            ),
        ),
        row(
            format!("{label}: rolling update of all → Available"),
            rollout.took.as_secs_f64(),
            "s",
            "a template annotation patched on each; default strategy (25% surge, 25% unavailable)",
        ),
        row(
            format!("{label}: rolling update, API writes per pod"),
            rollout.writes as f64 / pods_n as f64,
            "writes",
            "per pod replaced; every write, as above",
        ),
        row(
            format!("{label}: rolling update, controller-manager CPU per pod"),
            rollout.cm_cpu.as_secs_f64() * 1e3 / pods_n as f64,
            "ms",
            who,
        ),
        row(
            format!("{jlabel}: created → all Complete"),
            completed.took.as_secs_f64(),
            "s",
            &format!(
                "parallelism {completions}; each pod runs 100 ms on its simulated node; {} Deployment pods stay running",
                thousands(pods_n)
            ),
        ),
        row(
            format!("{jlabel}: API writes per pod"),
            completed.writes as f64 / job_pods as f64,
            "writes",
            "every write: Jobs, pods, Events",
        ),
        row(
            format!("{jlabel}: controller-manager CPU per pod"),
            completed.cm_cpu.as_secs_f64() * 1e3 / job_pods as f64,
            "ms",
            who,
        ),
        row(
            "controller manager: peak memory".into(),
            cm_peak as f64 / (1024.0 * 1024.0),
            "MiB",
            &format!("VmHWM of {who}; over the whole run: {reconciles}"),
        ),
        row(
            "controller manager: memory per cached pod".into(),
            cm_rss_cached.saturating_sub(cm_rss_idle) as f64 / pods_n as f64,
            "bytes",
            &format!(
                "RSS with every Deployment's pods cached less RSS before ({who}); {:.0} MiB at the end",
                cm_rss_end as f64 / (1024.0 * 1024.0)
            ),
        ),
        with_target(
            row(
                "controller manager: memory per cached pod beyond the cache's packed bytes".into(),
                (cm_rss_cached as f64
                    - cm_rss_idle as f64
                    - (cm_packed_cached as f64 - cm_packed_idle as f64))
                    / pods_n as f64,
                "bytes",
                &format!(
                    "the row above less the growth of every informer's packed entries (kore_cache_packed_bytes on its /metrics): {:.0} bytes per pod, where the JSON of the cached pods, ReplicaSets, Deployments and Nodes is {:.0} bytes per pod",
                    (cm_packed_cached as f64 - cm_packed_idle as f64) / pods_n as f64,
                    cached_json as f64 / pods_n as f64
                ),
            ),
            Target::AtMost(512.0),
        ),
    ];
    if deployments_n == 1_000 && replicas == 10 {
        rows[0].target = Some(Target::Below(10.0));
    }
    rows.push(with_target(
        row(
            format!(
                "after the Jobs: writes in {} s at steady state",
                STEADY.as_secs()
            ),
            steady as f64,
            "writes",
            &steady_note,
        ),
        Target::AtMost(0.0),
    ));
    cm.stop().await;
    sim.stop().await;
    server.shutdown().await;
    Ok(rows)
}

/// The JSON bytes of every object of `api`'s kind, as a client reads them.
async fn json_bytes<K>(api: &Api<K>) -> anyhow::Result<u64>
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + serde::Serialize,
{
    let list = api.list(&ListParams::default()).await?;
    let mut total = 0;
    for item in &list.items {
        total += serde_json::to_vec(item)?.len() as u64;
    }
    Ok(total)
}
