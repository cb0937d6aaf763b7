//! The informer cache suite: resident memory per cached ConfigMap in kore-runtime's store and
//! in kube-runtime's `reflector` store holding the same objects, and the time from an
//! informer's start to synced.
//!
//! Method: the parent serves ConfigMaps from an in-process kore-apiserver over plain HTTP on
//! loopback. Each measurement runs in a fresh child process (this binary, re-executed with
//! `KORE_BENCH_CACHE_CHILD` set) on a single-threaded runtime: it connects, warms the client
//! with a one-object list, reads its own `RssAnon` (and `RssFile`, `VmRSS`), syncs a cache of
//! the benchmark's objects in one namespace, reads them again while holding the cache, and
//! prints the differences. Both caches are measured the same way, with the same allocator, in
//! the same run. The JSON size of an object is the length of the server's answer to a GET of
//! it.
//!
//! The objects' data: one `application.yaml` each, as one chart renders it for many releases
//! (the same file with each release's own name, port, database and credentials hash, fixed
//! widths so every object's JSON has the same length), cut to the object's size; kore's
//! cache compresses such values against the first of their kind. A third case, at the
//! smaller count only, holds random base64 text instead, where there is nothing to share:
//! its bytes row reports, with no target, what content that does not compress costs.
//!
//! The rows count `RssAnon`, the process's heap and stacks. `VmRSS` also counts the pages of
//! the program's own code and data that syncing runs for the first time (`RssFile`): about
//! 2.3 MB for kore's informer and 0.9 MB for kube-runtime's, whatever the number of objects,
//! shared with every other process running the binary and dropped first under memory
//! pressure. At 10,000 objects of 352 bytes they were a third of kore's `VmRSS` growth; the
//! notes give both.
//!
//! The decoded-object cache: kore's store also keeps up to 1,024 decoded objects (the
//! default `InformerConfig::decoded_cache`) that readers share. A list fills none of it, so
//! the headline rows measure the packed store right after sync with the decoded cache empty.
//! The `decoded cache full` rows count it: the child first reads every object with `get`,
//! so the cache is at its bound, then measures. Being bounded, its cost per object falls as
//! the store grows. The read rows time `Store::get` of 500 hot objects from one and two
//! threads with the decoded cache on and off (every read decoding).

use std::time::{Duration, Instant};

use anyhow::Context as _;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, ListParams, PostParams};
use serde::{Deserialize, Serialize};

use crate::suite::{Row, Target};

const CHILD_ENV: &str = "KORE_BENCH_CACHE_CHILD";

/// The label every benchmark ConfigMap carries, and both caches select on: a namespace also
/// holds the `kube-root-ca.crt` ConfigMap the server publishes into it.
const BENCH_LABEL: &str = "app=bench";

/// The same glibc malloc settings for every child.
const GLIBC_TUNABLES: &str =
    "glibc.malloc.mmap_threshold=65536:glibc.malloc.trim_threshold=131072:glibc.malloc.arena_max=1";

/// Which cache a child fills.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
enum Cache {
    Kore,
    /// kore with its decoded cache filled to its bound before measuring.
    KoreHot,
    KubeRuntime,
}

#[derive(Debug, Serialize, Deserialize)]
struct ChildSpec {
    cache: Cache,
    url: String,
    namespace: String,
    objects: usize,
}

#[derive(Debug, Serialize, Deserialize)]
struct ChildResult {
    rss_delta: u64,
    /// The growth of `RssAnon` and `RssFile`, the two parts of `rss_delta` (the heap, and
    /// the program's own pages first touched while syncing).
    anon_delta: u64,
    file_delta: u64,
    sync_ms: f64,
    cached: usize,
    /// Objects in kore's decoded cache when measured.
    decoded: usize,
}

/// Runs a child measurement if this process is one, or the whole suite when
/// `KORE_BENCH_RUNTIME_CACHE=quick|full` is set (until `--suite` is wired); `main` calls this
/// first.
pub(crate) fn main_from_env() -> Option<anyhow::Result<()>> {
    if let Ok(spec) = std::env::var(CHILD_ENV) {
        return Some(run_child(&spec));
    }
    if let Ok(mode) = std::env::var("KORE_BENCH_RUNTIME_CACHE") {
        return Some((|| {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()?;
            let rows = runtime.block_on(run(mode == "quick"))?;
            for row in rows {
                println!(
                    "{} | kore {:.3} {} | peer {:?} | target {:?} | pass {:?}",
                    row.measure,
                    row.kore,
                    row.unit,
                    row.peer,
                    row.target,
                    row.pass()
                );
            }
            Ok(())
        })());
    }
    None
}

fn run_child(spec: &str) -> anyhow::Result<()> {
    let spec: ChildSpec = serde_json::from_str(spec).context("parsing the child spec")?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let result = runtime.block_on(child(spec))?;
    println!("{}", serde_json::to_string(&result)?);
    Ok(())
}

/// `VmRSS`, `RssAnon` and `RssFile` of this process.
fn rss() -> anyhow::Result<[u64; 3]> {
    let pid = std::process::id();
    let mut sizes = [0; 3];
    for (size, field) in sizes.iter_mut().zip(["VmRSS", "RssAnon", "RssFile"]) {
        *size = crate::procs::status_bytes(pid, field)?;
    }
    Ok(sizes)
}

async fn child(spec: ChildSpec) -> anyhow::Result<ChildResult> {
    let config = kube::Config::new(spec.url.parse().context("parsing the server URL")?);
    let client = kube::Client::try_from(config)?;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), &spec.namespace);
    // Warm the connection and the client's allocations before the baseline.
    api.list(&ListParams::default().limit(1)).await?;
    tokio::time::sleep(Duration::from_millis(50)).await;
    let before = rss()?;
    let started = Instant::now();
    let (cached, sync_ms, after, decoded) = match spec.cache {
        Cache::Kore | Cache::KoreHot => {
            use kore_runtime::{InformerConfig, Informers};
            let informers = Informers::new(client);
            let informer = informers.get::<ConfigMap>(
                InformerConfig::default()
                    .namespace(&spec.namespace)
                    .label_selector(BENCH_LABEL),
            );
            let shutdown = tokio_util::sync::CancellationToken::new();
            informers.start(shutdown.clone());
            informers.wait_until_synced().await;
            let sync_ms = started.elapsed().as_secs_f64() * 1e3;
            let store = informer.store();
            anyhow::ensure!(store.decoded_len() == 0, "a list fills no decoded cache");
            if spec.cache == Cache::KoreHot {
                // Every key once: each shard of the decoded cache fills to its bound.
                for key in store.keys() {
                    store.get(&key).context("a listed key is cached")?;
                }
                anyhow::ensure!(store.decoded_len() <= store.decoded_capacity());
            }
            let decoded = store.decoded_len();
            tokio::time::sleep(Duration::from_millis(200)).await;
            let after = rss()?;
            let cached = store.len();
            shutdown.cancel();
            (cached, sync_ms, after, decoded)
        }
        Cache::KubeRuntime => {
            use futures::StreamExt;
            use kube::runtime::{WatchStreamExt, reflector, watcher};
            let (reader, writer) = reflector::store::<ConfigMap>();
            let stream = reflector(
                writer,
                watcher(api, watcher::Config::default().labels(BENCH_LABEL)),
            )
            .applied_objects()
            .boxed();
            let task = tokio::spawn(async move {
                let mut stream = stream;
                while stream.next().await.is_some() {}
            });
            reader.wait_until_ready().await?;
            let sync_ms = started.elapsed().as_secs_f64() * 1e3;
            tokio::time::sleep(Duration::from_millis(200)).await;
            let after = rss()?;
            let cached = reader.state().len();
            task.abort();
            (cached, sync_ms, after, 0)
        }
    };
    anyhow::ensure!(
        cached == spec.objects,
        "{:?} cached {cached} of {} objects",
        spec.cache,
        spec.objects
    );
    Ok(ChildResult {
        rss_delta: after[0].saturating_sub(before[0]),
        anon_delta: after[1].saturating_sub(before[1]),
        file_delta: after[2].saturating_sub(before[2]),
        sync_ms,
        cached,
        decoded,
    })
}

async fn measure(spec: &ChildSpec) -> anyhow::Result<ChildResult> {
    let exe = std::env::current_exe()?;
    // The server runs on this runtime: wait for the child without blocking a worker.
    let child = tokio::process::Command::new(exe)
        .env(CHILD_ENV, serde_json::to_string(spec)?)
        .env_remove("KORE_BENCH_RUNTIME_CACHE")
        // Buffers of 64 KiB and more (list pages) are mapped on their own and unmapped when
        // freed, so the RSS after sync is what the cache holds, not the list's high-water mark.
        .env("GLIBC_TUNABLES", GLIBC_TUNABLES)
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(300), child)
        .await
        .context("the cache child timed out")?
        .context("running a cache child")?;
    anyhow::ensure!(
        out.status.success(),
        "cache child failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout)?;
    let line = stdout
        .lines()
        .last()
        .context("no output from the cache child")?;
    Ok(serde_json::from_str(line)?)
}

/// Nanoseconds per `Store::get` of 500 hot keys from `threads` threads, with a decoded
/// cache of `capacity` objects (0: every read decodes).
async fn read_ns(
    client: &kube::Client,
    ns: &str,
    capacity: usize,
    threads: usize,
) -> anyhow::Result<f64> {
    use kore_runtime::{InformerConfig, Informers};
    let informers = Informers::new(client.clone());
    let informer = informers.get::<ConfigMap>(
        InformerConfig::default()
            .namespace(ns)
            .decoded_cache(capacity),
    );
    let shutdown = tokio_util::sync::CancellationToken::new();
    informers.start(shutdown.clone());
    informers.wait_until_synced().await;
    let store = informer.store();
    let keys: Vec<kore_runtime::ObjectKey> = store.keys().into_iter().take(500).collect();
    let rounds = 400usize;
    let elapsed = tokio::task::spawn_blocking(move || {
        for key in &keys {
            std::hint::black_box(store.get(key));
        }
        let started = Instant::now();
        std::thread::scope(|s| {
            for _ in 0..threads {
                s.spawn(|| {
                    for _ in 0..rounds {
                        for key in &keys {
                            std::hint::black_box(store.get(key));
                        }
                    }
                });
            }
        });
        (started.elapsed(), keys.len())
    })
    .await?;
    shutdown.cancel();
    let (elapsed, n) = elapsed;
    Ok(elapsed.as_secs_f64() * 1e9 / (threads * rounds * n) as f64)
}

/// What a benchmark ConfigMap's data holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Payload {
    /// An `application.yaml` as one chart renders it for each release: the same file with
    /// the release's own name, port, database and credentials hash.
    Config,
    /// Random base64 text, like key material: nothing in it repeats, within an object or
    /// across objects.
    Random,
}

/// splitmix64: the benchmark's payloads are the same in every run.
fn mix(i: u64) -> u64 {
    let mut z = i.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Object `i`'s data text, exactly `len` bytes. Its values have fixed widths, so every
/// object of a run has the same JSON length.
fn payload(kind: Payload, i: usize, len: usize) -> String {
    let i = i as u64;
    let mut text = match kind {
        Payload::Config => format!(
            "# Rendered by the orders chart for release orders-{i:06}.\n\
             server:\n  port: {port:04}\n  shutdown: graceful\n  compression:\n    \
             enabled: true\n    min-response-size: 2048\n\
             spring:\n  application:\n    name: orders-{i:06}\n  datasource:\n    \
             url: jdbc:postgresql://orders-{i:06}-db.orders.svc.cluster.local:5432/orders\n    \
             username: orders_{i:06}\n    password-sha256: {h1:016x}{h2:016x}\n    hikari:\n      \
             maximum-pool-size: {pool:02}\n      connection-timeout: 30000\n      \
             idle-timeout: 600000\n  kafka:\n    \
             bootstrap-servers: kafka-0.kafka:9092,kafka-1.kafka:9092,kafka-2.kafka:9092\n    \
             consumer:\n      group-id: orders-{i:06}\n      auto-offset-reset: earliest\n    \
             producer:\n      acks: all\n      retries: 10\n\
             management:\n  endpoints:\n    web:\n      exposure:\n        \
             include: health,info,prometheus\n  metrics:\n    tags:\n      \
             application: orders-{i:06}\n      region: {region}\n\
             logging:\n  level:\n    root: INFO\n    com.example.orders: DEBUG\n    \
             org.hibernate.SQL: WARN\n\
             features:\n  new-checkout: {flag}\n  async-invoices: true\n  \
             rollout-percent: {pct:03}\n",
            port = 8000 + i % 1000,
            h1 = mix(i),
            h2 = mix(i ^ 0xfeed),
            pool = 10 + i % 40,
            region = ["eu-west-1", "us-east-1", "ap-south-1"][(i % 3) as usize],
            flag = if i.is_multiple_of(2) {
                "true "
            } else {
                "false"
            },
            pct = i % 101,
        ),
        Payload::Random => String::new(),
    };
    const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut n = 0u64;
    while text.len() < len {
        // Past the rendered file (or for random text): base64 of random bytes.
        let word = mix(i << 32 | n);
        n += 1;
        for k in 0..10 {
            text.push(char::from(B64[((word >> (6 * k)) & 63) as usize]));
        }
    }
    text.truncate(len);
    text
}

fn configmap(ns: &str, name: &str, kind: Payload, i: usize, pad: usize) -> ConfigMap {
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some(name.into());
    cm.metadata.namespace = Some(ns.into());
    cm.metadata.labels = Some([("app".to_string(), "bench".to_string())].into());
    let key = match kind {
        Payload::Config => "application.yaml",
        Payload::Random => "key.b64",
    };
    cm.data = Some([(key.to_string(), payload(kind, i, pad))].into());
    cm
}

/// The padding that makes a stored ConfigMap's JSON `target` bytes long (its data escaped as
/// JSON escapes it), and that length.
async fn calibrate(
    client: &kube::Client,
    ns: &str,
    target: usize,
    kind: Payload,
) -> anyhow::Result<(usize, usize)> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    let probe = "probe-000000";
    let json_len = |pad: usize| {
        let api = api.clone();
        async move {
            let _ = api.delete(probe, &Default::default()).await;
            api.create(&PostParams::default(), &configmap(ns, probe, kind, 0, pad))
                .await?;
            let req = kube::core::Request::new(format!("/api/v1/namespaces/{ns}/configmaps"))
                .get(probe, &Default::default())?;
            let text = client.request_text(req).await?;
            api.delete(probe, &Default::default()).await?;
            anyhow::Ok(text.len())
        }
    };
    let base = json_len(0).await?;
    anyhow::ensure!(base <= target, "an empty ConfigMap is already {base} bytes");
    let mut pad = target - base;
    // Newlines take two bytes in JSON: take as many bytes off as the escapes add.
    let first = json_len(pad).await?;
    pad -= first.saturating_sub(target).min(pad);
    Ok((pad, json_len(pad).await?))
}

async fn fill(
    client: &kube::Client,
    ns: &str,
    n: usize,
    kind: Payload,
    pad: usize,
) -> anyhow::Result<()> {
    let nss: Api<Namespace> = Api::all(client.clone());
    let mut namespace = Namespace::default();
    namespace.metadata.name = Some(ns.into());
    nss.create(&PostParams::default(), &namespace).await?;
    let workers = 16;
    let mut tasks = Vec::new();
    for w in 0..workers {
        let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
        let ns = ns.to_string();
        tasks.push(tokio::spawn(async move {
            for i in (w..n).step_by(workers) {
                api.create(
                    &PostParams::default(),
                    &configmap(&ns, &format!("cm-{i:06}"), kind, i, pad),
                )
                .await?;
            }
            anyhow::Ok(())
        }));
    }
    for t in tasks {
        t.await??;
    }
    Ok(())
}

/// Runs the suite; `quick` uses 1,000 and 5,000 objects instead of 10,000 and 100,000.
pub(crate) async fn run(quick: bool) -> anyhow::Result<Vec<Row>> {
    let env = kore_testenv::TestEnv::builder()
        .tcp()
        .insecure_http()
        .start()
        .await?;
    let url = env.endpoint().context("a socket endpoint")?.url.clone();
    let client = env.client();
    let sizes: &[usize] = if quick {
        &[1_000, 5_000]
    } else {
        &[10_000, 100_000]
    };
    let mut rows = Vec::new();
    let cases = [
        ("352 B", 352usize, Payload::Config, sizes),
        ("1.2 KB", 1_229, Payload::Config, sizes),
        ("1.2 KB of random text", 1_229, Payload::Random, &sizes[..1]),
    ];
    for (label, target, kind, counts) in cases {
        let random = kind == Payload::Random;
        let calib_ns = format!("calib-{target}{}", if random { "-random" } else { "" });
        {
            let nss: Api<Namespace> = Api::all(client.clone());
            let mut namespace = Namespace::default();
            namespace.metadata.name = Some(calib_ns.clone());
            nss.create(&PostParams::default(), &namespace).await?;
        }
        let (pad, json) = calibrate(&client, &calib_ns, target, kind).await?;
        for &n in counts {
            let ns = format!("cache-{target}-{n}{}", if random { "-random" } else { "" });
            eprintln!("kore-bench: runtime_cache: storing {n} ConfigMaps of {json} JSON bytes");
            fill(&client, &ns, n, kind, pad).await?;
            eprintln!("kore-bench: runtime_cache: measuring kore-runtime's cache");
            let spec = |cache| ChildSpec {
                cache,
                url: url.clone(),
                namespace: ns.clone(),
                objects: n,
            };
            let kore = measure(&spec(Cache::Kore)).await?;
            let hot = measure(&spec(Cache::KoreHot)).await?;
            eprintln!("kore-bench: runtime_cache: measuring kube-runtime's reflector");
            let peer = measure(&spec(Cache::KubeRuntime)).await?;
            let per = |r: &ChildResult| r.anon_delta as f64 / n as f64;
            let vm = |r: &ChildResult| r.rss_delta as f64 / n as f64;
            let note = format!(
                "RssAnon growth of a fresh child process per cache, {n} objects of {json} JSON \
                 bytes each; kore's decoded cache empty (a list fills none of it); the program's \
                 own pages first run while syncing (RssFile growth: kore {:.0} KiB, \
                 kube-runtime {:.0} KiB) are not counted; VmRSS growth per object: kore {:.0}, \
                 kube-runtime {:.0}; start to synced: kore {:.0} ms, kube-runtime {:.0} ms",
                kore.file_delta as f64 / 1024.0,
                peer.file_delta as f64 / 1024.0,
                vm(&kore),
                vm(&peer),
                kore.sync_ms,
                peer.sync_ms,
            );
            rows.push(Row {
                measure: format!("cache bytes per ConfigMap ({label} JSON, {n} objects)"),
                kore: per(&kore),
                unit: "bytes/object".into(),
                peer: Some(("kube-runtime reflector".into(), per(&peer))),
                // Content with nothing to share can only be held in about its own size.
                target: (!random).then_some(Target::LeanerThanPeer(5.0)),
                note: note.clone(),
            });
            rows.push(Row {
                measure: format!("cache memory / JSON bytes ({label}, {n} objects)"),
                kore: per(&kore) / json as f64,
                unit: "x JSON".into(),
                peer: Some(("kube-runtime reflector".into(), per(&peer) / json as f64)),
                target: Some(Target::AtMost(1.0)),
                note,
            });
            rows.push(Row {
                measure: format!(
                    "cache memory / JSON bytes, decoded cache full ({label}, {n} objects)"
                ),
                kore: per(&hot) / json as f64,
                unit: "x JSON".into(),
                peer: Some(("kube-runtime reflector".into(), per(&peer) / json as f64)),
                target: None,
                note: format!(
                    "as above after a get of every object, leaving {} decoded objects cached \
                     (default bound 1,024); {:.0} bytes/object",
                    hot.decoded,
                    per(&hot)
                ),
            });
            if n == sizes[0] && !random {
                let threads_list: &[usize] = if target == 352 { &[1, 2] } else { &[1] };
                for &threads in threads_list {
                    let on = read_ns(&client, &ns, 1_024, threads).await?;
                    let off = read_ns(&client, &ns, 0, threads).await?;
                    rows.push(Row {
                        measure: format!(
                            "Store::get of a hot object ({label}, {n} cached, {threads} thread(s))"
                        ),
                        kore: on,
                        unit: "ns/get".into(),
                        peer: Some(("kore, decoded_cache(0): decode per read".into(), off)),
                        target: None,
                        note: format!("500 hot keys read 400 times each from {threads} thread(s)"),
                    });
                }
            }
            if n == *sizes.last().unwrap_or(&n) && target == 352 {
                rows.push(Row {
                    measure: format!("informer start to synced ({n} ConfigMaps)"),
                    kore: kore.sync_ms,
                    unit: "ms".into(),
                    peer: Some(("kube-runtime reflector".into(), peer.sync_ms)),
                    target: Some(Target::Below(5_000.0)),
                    note: "list in pages of 500 over HTTP on loopback from kore-apiserver".into(),
                });
            }
        }
    }
    env.stop().await;
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::{Payload, payload};

    /// Every object's data has the asked length and the same JSON length (the rows divide by
    /// one object's), and no two objects hold the same text once it reaches the release's
    /// name (the 352-byte objects' few bytes of data are the file's first line, alike in all).
    #[test]
    fn payloads_have_one_length_and_differ_per_object() {
        for kind in [Payload::Config, Payload::Random] {
            for len in [40, 880, 3_000] {
                let json = |i| {
                    serde_json::to_string(&payload(kind, i, len))
                        .map(|s| s.len())
                        .ok()
                };
                let first = json(0);
                let mut seen = std::collections::HashSet::new();
                for i in 0..2_000 {
                    let text = payload(kind, i, len);
                    assert_eq!(text.len(), len);
                    assert_eq!(json(i), first, "{kind:?} {len} {i}");
                    let unique = len >= 80 || kind == Payload::Random;
                    assert!(
                        seen.insert(text) || !unique,
                        "{kind:?} {len}: object {i} repeats one before"
                    );
                }
            }
        }
        let file = payload(Payload::Config, 7, 880);
        assert!(file.starts_with("# Rendered by the orders chart for release orders-000007."));
    }
}
