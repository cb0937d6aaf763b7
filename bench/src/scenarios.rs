//! The measurements, one function each. Every function that needs a server starts its own, so
//! each number comes from a fresh process and the order of the runs does not matter.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context as _, ensure};
use bytes::Bytes;
use serde::Serialize;

use crate::clients::{EtcdConn, KoreConn};
use crate::load::{self, Creator, Kind, Putter, Throughput, configmap, median_ms};
use crate::procs::{self, EtcdServer, KoreServer, Storage};
use crate::watch::{self, FanOut};

/// What to run and where.
#[derive(Clone, Debug)]
pub(crate) struct Settings {
    /// The `kore` binary.
    pub(crate) kore: PathBuf,
    /// Where servers keep their data (must be a real disk for durable numbers to mean much).
    pub(crate) scratch: PathBuf,
    /// Warm-up before each throughput window.
    pub(crate) warmup: Duration,
    /// Length of each throughput window.
    pub(crate) measure: Duration,
    /// Concurrent clients of the throughput runs.
    pub(crate) clients: Vec<usize>,
    /// Clients used to fill servers (memory and list tests).
    pub(crate) fill_clients: usize,
    /// ConfigMaps stored for the memory measurement.
    pub(crate) memory_objects: u64,
    /// Objects of each kind stored for the per-kind rows (ConfigMap, Pod, StatefulSet).
    pub(crate) kind_objects: u64,
    /// Timed discovery requests (after one untimed).
    pub(crate) discovery_repeats: usize,
    /// ConfigMaps in the listed namespace.
    pub(crate) list_objects: u64,
    /// Timed full lists (after one untimed list).
    pub(crate) list_repeats: usize,
    /// Watchers of the fan-out test.
    pub(crate) watchers: usize,
    /// Events written in the fan-out test.
    pub(crate) watch_events: usize,
    /// Pause between two writes of the fan-out test.
    pub(crate) watch_interval: Duration,
    /// Process starts timed per storage mode.
    pub(crate) process_starts: usize,
    /// Warm `TestEnv::start()` calls timed (after one cold call).
    pub(crate) testenv_starts: usize,
}

/// Runs a blocking function (process start/stop) off the async workers.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> anyhow::Result<T> + Send + 'static,
) -> anyhow::Result<T> {
    tokio::task::spawn_blocking(f)
        .await
        .context("a blocking task panicked")?
}

async fn start_kore(settings: &Settings, storage: Storage) -> anyhow::Result<KoreServer> {
    let (kore, scratch) = (settings.kore.clone(), settings.scratch.clone());
    blocking(move || KoreServer::start(&kore, &scratch, storage)).await
}

async fn stop_kore(server: KoreServer) -> anyhow::Result<()> {
    blocking(move || server.stop()).await
}

async fn create_namespace(conn: &mut KoreConn, name: &str) -> anyhow::Result<()> {
    let body =
        format!(r#"{{"apiVersion":"v1","kind":"Namespace","metadata":{{"name":"{name}"}}}}"#);
    conn.create("/api/v1/namespaces", Bytes::from(body))
        .await
        .with_context(|| format!("creating namespace {name}"))?;
    Ok(())
}

/// Opens `n` connections and wraps each in a ConfigMap [`Creator`] for namespace `ns`.
async fn creators(
    server: &KoreServer,
    n: usize,
    ns: &str,
    tag: &str,
) -> anyhow::Result<Vec<Creator>> {
    creators_of(Kind::ConfigMap, server, n, ns, tag).await
}

/// [`creators`] of `kind`.
async fn creators_of(
    kind: Kind,
    server: &KoreServer,
    n: usize,
    ns: &str,
    tag: &str,
) -> anyhow::Result<Vec<Creator>> {
    let mut workers = Vec::with_capacity(n);
    for w in 0..n {
        let conn = server.target.connect().await?;
        workers.push(Creator::of(kind, conn, ns, format!("bench-{tag}-{w:02}")));
    }
    Ok(workers)
}

/// A fresh in-memory server whose namespace `ns` was filled with `objects` of `kind` over
/// `fill_clients` connections, with its RSS before and after the fill (each read once the
/// connections are idle for [`SETTLE`]). The caller stops the server.
struct Fill {
    server: KoreServer,
    filled: load::Filled,
    rss_empty: u64,
    rss_full: u64,
    /// `RssAnon` (the heap, without the binary's code pages) before and after.
    anon: (u64, u64),
}

async fn fill(
    settings: &Settings,
    kind: Kind,
    ns: &str,
    tag: &str,
    objects: u64,
) -> anyhow::Result<Fill> {
    let server = start_kore(settings, Storage::Memory).await?;
    let mut admin = server.target.connect().await?;
    create_namespace(&mut admin, ns).await?;
    // A pod needs its namespace's `default` ServiceAccount (admission refuses it before).
    let account = format!("/api/v1/namespaces/{ns}/serviceaccounts/default");
    let deadline = Instant::now() + Duration::from_secs(10);
    while admin.get(&account).await.is_err() {
        ensure!(
            Instant::now() < deadline,
            "no default ServiceAccount after 10 s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    drop(admin);
    tokio::time::sleep(SETTLE).await;
    let rss_empty = server.process().rss_bytes()?;
    let anon_empty = procs::status_bytes(server.process().pid(), "RssAnon")?;
    let workers = creators_of(kind, &server, settings.fill_clients, ns, tag).await?;
    let filled = load::for_count(workers, objects).await?;
    tokio::time::sleep(SETTLE).await;
    let rss_full = server.process().rss_bytes()?;
    let anon_full = procs::status_bytes(server.process().pid(), "RssAnon")?;
    Ok(Fill {
        server,
        filled,
        rss_empty,
        rss_full,
        anon: (anon_empty, anon_full),
    })
}

/// Timing of repeated starts.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct Starts {
    /// What was started.
    pub(crate) what: String,
    /// Median, in milliseconds.
    pub(crate) median_ms: f64,
    /// Fastest, in milliseconds.
    pub(crate) min_ms: f64,
    /// Slowest, in milliseconds.
    pub(crate) max_ms: f64,
    /// The first start, in milliseconds (cold caches, first use of lazy statics).
    pub(crate) first_ms: f64,
    /// Number of starts.
    pub(crate) runs: usize,
}

impl Starts {
    fn from(what: &str, first: Duration, rest: &[Duration]) -> Starts {
        let ms = |d: &Duration| d.as_secs_f64() * 1000.0;
        let all: Vec<Duration> = std::iter::once(first).chain(rest.iter().copied()).collect();
        Starts {
            what: what.to_owned(),
            median_ms: median_ms(rest),
            min_ms: all.iter().map(ms).fold(f64::INFINITY, f64::min),
            max_ms: all.iter().map(ms).fold(0.0, f64::max),
            first_ms: ms(&first),
            runs: all.len(),
        }
    }
}

/// `TestEnv::start()` in this process: one cold start, then `testenv_starts` warm ones (each
/// environment is stopped before the next starts, outside the timing).
pub(crate) async fn testenv_start(settings: &Settings) -> anyhow::Result<Starts> {
    let mut samples = Vec::with_capacity(settings.testenv_starts + 1);
    for _ in 0..=settings.testenv_starts {
        let began = Instant::now();
        let env = kore_testenv::TestEnv::start().await?;
        samples.push(began.elapsed());
        env.stop().await;
    }
    let (first, rest) = samples.split_first().context("no TestEnv start")?;
    Ok(Starts::from("TestEnv::start()", *first, rest))
}

/// `kore apiserver` from `spawn` to the first `200` from `/readyz` over HTTPS. The median
/// leaves the first start out (it pays for loading the binary from disk).
pub(crate) async fn process_start(settings: &Settings, storage: Storage) -> anyhow::Result<Starts> {
    let mut samples = Vec::with_capacity(settings.process_starts + 1);
    for _ in 0..=settings.process_starts {
        let server = start_kore(settings, storage).await?;
        samples.push(server.ready_after);
        stop_kore(server).await?;
    }
    let what = match storage {
        Storage::Memory => "kore apiserver (in memory)",
        Storage::Durable => "kore apiserver --data-dir (empty)",
    };
    let (first, rest) = samples.split_first().context("no process start")?;
    Ok(Starts::from(what, *first, rest))
}

/// Creates/s against a fresh kore at each concurrency level; also returns a ConfigMap as the
/// server returned it (the size etcd's values are given).
pub(crate) async fn kore_creates(
    settings: &Settings,
    storage: Storage,
) -> anyhow::Result<(Vec<Throughput>, Bytes)> {
    let server = start_kore(settings, storage).await?;
    let mut admin = server.target.connect().await?;
    create_namespace(&mut admin, "bench").await?;
    let sample = admin
        .create(
            "/api/v1/namespaces/bench/configmaps",
            configmap("bench-s000-00-00000000"),
        )
        .await?;
    let tag = match storage {
        Storage::Memory => 'm',
        Storage::Durable => 'd',
    };
    let mut results = Vec::new();
    for &clients in &settings.clients {
        let workers = creators(&server, clients, "bench", &format!("{tag}{clients:03}")).await?;
        let result = load::for_duration(workers, settings.warmup, settings.measure, || {
            server.process().cpu_time()
        })
        .await?;
        eprintln!(
            "  kore {storage:?}, {clients} clients: {:.0} creates/s (p99 {:.2} ms; cores: server {:.2}, load generator {:.2}, other {:.2})",
            result.ops_per_sec,
            result.p99_ms,
            result.server_cores,
            result.client_cores,
            result.other_cores
        );
        results.push(result);
    }
    stop_kore(server).await?;
    Ok((results, sample))
}

/// Puts/s against a fresh single-member etcd at each concurrency level, with `value` as every
/// value, in two connection layouts: one connection per client (as kore's clients) and, with
/// more than one client, all clients multiplexed over one connection (as kube-apiserver talks
/// to etcd, and faster for etcd). Returns every run.
pub(crate) async fn etcd_puts(
    settings: &Settings,
    etcd: PathBuf,
    value: Bytes,
) -> anyhow::Result<Vec<Throughput>> {
    let scratch = settings.scratch.clone();
    let server = blocking(move || EtcdServer::start(&etcd, &scratch)).await?;
    let mut results = Vec::new();
    for &clients in &settings.clients {
        let layouts: &[bool] = if clients > 1 {
            &[false, true]
        } else {
            &[false]
        };
        for &shared in layouts {
            let mut workers = Vec::with_capacity(clients);
            let first = EtcdConn::connect(server.addr).await?;
            for w in 0..clients {
                let conn = if shared || w == 0 {
                    first.clone()
                } else {
                    EtcdConn::connect(server.addr).await?
                };
                let tag = if shared { 's' } else { 'p' };
                workers.push(Putter::new(
                    conn,
                    format!("{tag}{clients:03}-{w:02}"),
                    value.clone(),
                ));
            }
            drop(first);
            let mut result = load::for_duration(workers, settings.warmup, settings.measure, || {
                server.process().cpu_time()
            })
            .await?;
            result.connections = if shared { 1 } else { clients };
            eprintln!(
                "  etcd, {clients} clients over {} connection(s): {:.0} puts/s (p99 {:.2} ms; cores: server {:.2}, load generator {:.2}, other {:.2})",
                result.connections,
                result.ops_per_sec,
                result.p99_ms,
                result.server_cores,
                result.client_cores,
                result.other_cores
            );
            results.push(result);
        }
    }
    blocking(move || server.stop()).await?;
    Ok(results)
}

/// For each concurrency level, the run with the most operations per second.
pub(crate) fn best_per_level(runs: &[Throughput]) -> Vec<Throughput> {
    let mut best: Vec<Throughput> = Vec::new();
    for run in runs {
        match best.iter_mut().find(|b| b.clients == run.clients) {
            Some(b) if b.ops_per_sec >= run.ops_per_sec => {}
            Some(b) => *b = run.clone(),
            None => best.push(run.clone()),
        }
    }
    best
}

/// One full list of a namespace holding `objects` ConfigMaps.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct ListResult {
    /// ConfigMaps in the list.
    pub(crate) objects: u64,
    /// Size of the list's JSON, in bytes.
    pub(crate) bytes: u64,
    /// Median time from sending the GET to having read the whole body, in milliseconds.
    pub(crate) median_ms: f64,
    /// Fastest list, in milliseconds.
    pub(crate) min_ms: f64,
    /// Slowest list, in milliseconds.
    pub(crate) max_ms: f64,
    /// Timed lists.
    pub(crate) runs: usize,
}

#[derive(serde::Deserialize)]
struct List {
    items: Vec<serde::de::IgnoredAny>,
}

/// The list measurement and then the watch fan-out, on one fresh in-memory server.
pub(crate) async fn list_and_watch(settings: &Settings) -> anyhow::Result<(ListResult, FanOut)> {
    let server = start_kore(settings, Storage::Memory).await?;
    let mut admin = server.target.connect().await?;
    create_namespace(&mut admin, "bench-list").await?;
    create_namespace(&mut admin, "bench-watch").await?;
    let workers = creators(&server, settings.fill_clients, "bench-list", "l000").await?;
    load::for_count(workers, settings.list_objects).await?;

    let path = "/api/v1/namespaces/bench-list/configmaps";
    let body = admin.get(path).await?;
    let list: List = serde_json::from_slice(&body).context("parsing the list")?;
    // Every namespace also holds the `kube-root-ca.crt` ConfigMap the server keeps there
    // (once it has been written, a moment after the namespace).
    let listed = list.items.len() as u64;
    ensure!(
        listed == settings.list_objects || listed == settings.list_objects + 1,
        "the list has {listed} items, expected {} and kube-root-ca.crt",
        settings.list_objects
    );
    let mut samples = Vec::with_capacity(settings.list_repeats);
    for _ in 0..settings.list_repeats {
        let began = Instant::now();
        let body = admin.get(path).await?;
        samples.push(began.elapsed());
        ensure!(!body.is_empty(), "empty list");
    }
    let ms = |d: &Duration| d.as_secs_f64() * 1000.0;
    let list = ListResult {
        objects: settings.list_objects,
        bytes: body.len() as u64,
        median_ms: median_ms(&samples),
        min_ms: samples.iter().map(ms).fold(f64::INFINITY, f64::min),
        max_ms: samples.iter().map(ms).fold(0.0, f64::max),
        runs: samples.len(),
    };
    eprintln!(
        "  list of {} ConfigMaps ({} bytes): median {:.1} ms",
        list.objects, list.bytes, list.median_ms
    );

    let fan_out = watch::fan_out(
        &server.target,
        "bench-watch",
        settings.watchers,
        settings.watch_events,
        settings.watch_interval,
    )
    .await?;
    eprintln!(
        "  watch fan-out to {} watchers: p50 {:.2} ms, p99 {:.2} ms, {} missing",
        fan_out.watchers, fan_out.p50_ms, fan_out.p99_ms, fan_out.missing
    );
    drop(admin);
    stop_kore(server).await?;
    Ok((list, fan_out))
}

/// Resident memory of a server holding many ConfigMaps.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct Memory {
    /// ConfigMaps stored.
    pub(crate) objects: u64,
    /// Sum of the sizes of the ConfigMaps' JSON as the server returned them, in bytes.
    pub(crate) json_bytes: u64,
    /// VmRSS of the ready server before the load, in bytes.
    pub(crate) rss_empty: u64,
    /// VmRSS after the load, in bytes.
    pub(crate) rss_full: u64,
    /// `rss_full - rss_empty`, in bytes.
    pub(crate) rss_growth: u64,
    /// `rss_growth / json_bytes`.
    pub(crate) ratio: f64,
    /// Growth of `RssAnon` alone (the heap; VmRSS also counts the binary's code pages first
    /// touched during the fill), in bytes: informative.
    pub(crate) anon_growth: u64,
    /// Creates/s while loading (informative: the fill uses `fill_clients` connections).
    pub(crate) fill_per_sec: f64,
}

/// Pause before reading RSS, so connection teardown and deferred frees have happened.
const SETTLE: Duration = Duration::from_secs(1);

/// Stores `memory_objects` ConfigMaps in a fresh in-memory server and compares its RSS growth
/// with the JSON size of what it stores.
pub(crate) async fn memory(settings: &Settings) -> anyhow::Result<Memory> {
    let Fill {
        server,
        filled,
        rss_empty,
        rss_full,
        anon,
    } = fill(
        settings,
        Kind::ConfigMap,
        "bench-mem",
        "r000",
        settings.memory_objects,
    )
    .await?;
    let rss_growth = rss_full.saturating_sub(rss_empty);
    let memory = Memory {
        objects: filled.ops,
        json_bytes: filled.bytes,
        rss_empty,
        rss_full,
        rss_growth,
        ratio: rss_growth as f64 / filled.bytes as f64,
        anon_growth: anon.1.saturating_sub(anon.0),
        fill_per_sec: filled.ops as f64 / filled.elapsed.as_secs_f64(),
    };
    eprintln!(
        "  {} ConfigMaps: RSS {} → {} bytes, JSON {} bytes, growth/JSON {:.2} (RssAnon alone {:.2})",
        memory.objects,
        rss_empty,
        rss_full,
        memory.json_bytes,
        memory.ratio,
        memory.anon_growth as f64 / memory.json_bytes as f64
    );
    stop_kore(server).await?;
    Ok(memory)
}

/// What storing one kind costs: creates/s while filling and resident memory per object.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct KindCost {
    /// The kind.
    pub(crate) kind: Kind,
    /// Objects stored.
    pub(crate) objects: u64,
    /// Creates/s of the fill, over `clients` connections.
    pub(crate) creates_per_sec: f64,
    /// Connections of the fill.
    pub(crate) clients: usize,
    /// JSON bytes the server returned for them (the stored object, defaults included).
    pub(crate) json_bytes: u64,
    /// RSS growth, in bytes.
    pub(crate) rss_growth: u64,
    /// RSS growth per object, in bytes.
    pub(crate) bytes_per_object: f64,
    /// RSS growth over JSON bytes.
    pub(crate) ratio: f64,
}

/// For each kind, a fresh in-memory server filled with `kind_objects` of it: the creates/s of
/// the fill and the RSS it grew by, per object and against the JSON the server answered.
pub(crate) async fn kinds(settings: &Settings) -> anyhow::Result<Vec<KindCost>> {
    let mut costs = Vec::new();
    for kind in [Kind::ConfigMap, Kind::Pod, Kind::StatefulSet] {
        let Fill {
            server,
            filled,
            rss_empty,
            rss_full,
            ..
        } = fill(settings, kind, "bench-kinds", "k000", settings.kind_objects).await?;
        let rss_growth = rss_full.saturating_sub(rss_empty);
        let cost = KindCost {
            kind,
            objects: filled.ops,
            creates_per_sec: filled.ops as f64 / filled.elapsed.as_secs_f64(),
            clients: settings.fill_clients,
            json_bytes: filled.bytes,
            rss_growth,
            bytes_per_object: rss_growth as f64 / filled.ops.max(1) as f64,
            ratio: rss_growth as f64 / filled.bytes.max(1) as f64,
        };
        eprintln!(
            "  {} × {}: {:.0} creates/s, {:.0} bytes of RSS each, {:.2}× their JSON ({:.0} bytes each)",
            cost.objects,
            kind.name(),
            cost.creates_per_sec,
            cost.bytes_per_object,
            cost.ratio,
            cost.json_bytes as f64 / cost.objects.max(1) as f64
        );
        stop_kore(server).await?;
        costs.push(cost);
    }
    Ok(costs)
}

/// Discovery as clients fetch it, every built-in group registered.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct Discovery {
    /// `GET /apis`, aggregated (`apidiscovery.k8s.io/v2`): median, in milliseconds.
    pub(crate) aggregated_ms: f64,
    /// Its size, in bytes.
    pub(crate) aggregated_bytes: usize,
    /// `GET /api`, aggregated: median, in milliseconds.
    pub(crate) legacy_ms: f64,
    /// `GET /apis` unaggregated (the group list kubectl's older path reads): median.
    pub(crate) groups_ms: f64,
    /// Groups and resources the aggregated document lists.
    pub(crate) groups: usize,
    /// Resources (subresources not counted) over all versions.
    pub(crate) resources: usize,
    /// Timed requests of each.
    pub(crate) runs: usize,
}

/// The aggregated discovery media type kubectl and client-go ask for.
const AGGREGATED: &str =
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json";

/// Times discovery on one keep-alive connection of a fresh in-memory server.
pub(crate) async fn discovery(settings: &Settings) -> anyhow::Result<Discovery> {
    let server = start_kore(settings, Storage::Memory).await?;
    let mut conn = server.target.connect().await?;
    let mut time = async |path: &str, accept: &str| -> anyhow::Result<(f64, Bytes)> {
        let mut samples = Vec::with_capacity(settings.discovery_repeats);
        let mut last = conn.get_as(path, accept).await?;
        for _ in 0..settings.discovery_repeats {
            let began = Instant::now();
            last = conn.get_as(path, accept).await?;
            samples.push(began.elapsed());
        }
        Ok((median_ms(&samples), last))
    };
    let (aggregated_ms, document) = time("/apis", AGGREGATED).await?;
    let (legacy_ms, _) = time("/api", AGGREGATED).await?;
    let (groups_ms, _) = time("/apis", "application/json").await?;
    let list: serde_json::Value =
        serde_json::from_slice(&document).context("the aggregated discovery document")?;
    let items = list["items"].as_array().cloned().unwrap_or_default();
    let resources = items
        .iter()
        .flat_map(|g| g["versions"].as_array().cloned().unwrap_or_default())
        .map(|v| v["resources"].as_array().map_or(0, Vec::len))
        .sum();
    let discovery = Discovery {
        aggregated_ms,
        aggregated_bytes: document.len(),
        legacy_ms,
        groups_ms,
        groups: items.len(),
        resources,
        runs: settings.discovery_repeats,
    };
    eprintln!(
        "  discovery: /apis aggregated {:.3} ms ({} bytes, {} groups, {} resources), /api {:.3} ms, /apis groups {:.3} ms",
        discovery.aggregated_ms,
        discovery.aggregated_bytes,
        discovery.groups,
        discovery.resources,
        discovery.legacy_ms,
        discovery.groups_ms
    );
    drop(conn);
    stop_kore(server).await?;
    Ok(discovery)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(clients: usize, connections: usize, ops_per_sec: f64) -> Throughput {
        Throughput {
            clients,
            connections,
            ops: 0,
            seconds: 1.0,
            ops_per_sec,
            p50_ms: 0.0,
            p99_ms: 0.0,
            errors: 0,
            first_error: None,
            server_cores: 0.0,
            client_cores: 0.0,
            other_cores: 0.0,
        }
    }

    #[test]
    fn the_best_run_of_each_level_is_kept_in_order() {
        let runs = [
            run(1, 1, 10.0),
            run(16, 16, 5.0),
            run(16, 1, 7.0),
            run(64, 64, 9.0),
            run(64, 1, 8.0),
        ];
        let best: Vec<(usize, usize)> = best_per_level(&runs)
            .iter()
            .map(|t| (t.clients, t.connections))
            .collect();
        assert_eq!(best, vec![(1, 1), (16, 1), (64, 64)]);
    }
}
