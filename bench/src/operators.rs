//! The operators suite (issue 5): kore's configmap-sync against the same operator on
//! kube-runtime and against the tutorial's naive reconcile (`operators_peers`), and kore's
//! sample-controller, each on the same scenario.
//!
//! Method (details in `docs/design/benchmarks.md`):
//!
//! - Every implementation gets a fresh in-process kore-apiserver (plain HTTP on loopback) in
//!   this process, with the CRD installed and the whole scenario created *before* the
//!   operator starts: 10,000 ConfigMapSyncs (100 sources × 100 destination namespaces, one
//!   destination each) created at once by 32 clients, or 1,000 Foos.
//! - The operator then starts in a child process (`operators_child`), so its resident memory
//!   and CPU time are its own, and counts every request it sends. The clock runs from the
//!   child's spawn to the moment this process's watches see the last copy exist and the last
//!   ConfigMapSync Ready (or the last Deployment exist and the last Foo status written): the
//!   operator's whole job, start-up and initial lists included, and not the server's create
//!   rate, which is the same for every implementation.
//! - Then an idle period (a minute; 5 s with `--quick`) in which nothing changes: the writes
//!   the operator sends in it are its idle writes.
//! - For Foos this process plays kube-controller-manager: when a Deployment's
//!   `status.availableReplicas` differs from its `spec.replicas`, it patches the status to
//!   match, so a Foo's status is written when its Deployment is available.

use std::collections::{BTreeMap, HashSet};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use futures::{StreamExt as _, TryStreamExt as _};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kore_configmap_sync::{ConfigMapSync, ConfigMapSyncSpec};
use kore_sample_controller::{Foo, FooSpec};
use kore_testenv::TestEnv;
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt as _, watcher};
use kube::{Resource as _, ResourceExt as _};
use serde_json::json;

use crate::operators_child::{Child, ChildSpec, Implementation, Stats};
use crate::suite::{Row, Target};

/// The namespace of the sources and the ConfigMapSyncs.
const SOURCE_NS: &str = "src";
/// The namespace of the Foos.
const FOO_NS: &str = "foo";
/// Reconciles at once in the second configmap-sync round.
const WIDE: usize = 16;
/// Clients creating the scenario's objects at once.
const CREATORS: usize = 32;

/// The sizes of a run.
#[derive(Clone, Copy, Debug)]
struct Sizes {
    sources: usize,
    destinations: usize,
    foos: usize,
    idle: Duration,
    timeout: Duration,
}

impl Sizes {
    fn syncs(&self) -> usize {
        self.sources * self.destinations
    }
}

/// One implementation's run.
struct Outcome {
    implementation: Implementation,
    /// The objects the scenario asked for (ConfigMapSyncs or Foos).
    objects: usize,
    /// From the operator's start to convergence; `None` when it timed out.
    converged: Option<Duration>,
    /// The child's stats at convergence and after the idle period.
    at_converge: Stats,
    at_end: Stats,
    /// How long creating the scenario's objects took.
    created_in: Duration,
    /// CPU time of this process (the server, the watches that time the run) from the
    /// operator's start to convergence.
    server_seconds: f64,
}

impl Outcome {
    fn per_object(&self, n: u64) -> f64 {
        n as f64 / self.objects as f64
    }

    fn seconds(&self, sizes: &Sizes) -> f64 {
        self.converged.unwrap_or(sizes.timeout).as_secs_f64()
    }

    /// Writes to the custom resource itself (its finalizer), per object.
    fn own_writes(&self, resource: &str) -> f64 {
        self.per_object(self.at_end.count(|k| {
            crate::operators_child::is_write(k)
                && k.split_once(' ').map(|(_, r)| r) == Some(resource)
        }))
    }

    fn idle_writes(&self) -> u64 {
        self.at_end.since(&self.at_converge).writes()
    }

    /// The writes per object by kind, e.g. `POST configmaps 1.00`.
    fn write_breakdown(&self) -> String {
        let parts: Vec<String> = self
            .at_end
            .requests
            .iter()
            .filter(|(k, _)| crate::operators_child::is_write(k))
            .map(|(k, n)| format!("{k} {:.2}", self.per_object(*n)))
            .collect();
        if parts.is_empty() {
            "none".to_owned()
        } else {
            parts.join(", ")
        }
    }

    /// The writes in the idle period by kind, e.g. `PATCH events 2`.
    fn idle_breakdown(&self) -> String {
        let idle = self.at_end.since(&self.at_converge);
        let parts: Vec<String> = idle
            .requests
            .iter()
            .filter(|(r, _)| crate::operators_child::is_write(r))
            .map(|(r, n)| format!("{r} {n}"))
            .collect();
        if parts.is_empty() {
            "none".to_owned()
        } else {
            parts.join(", ")
        }
    }

    fn status_note(&self, sizes: &Sizes) -> String {
        match self.converged {
            Some(_) => String::new(),
            None => format!(" DID NOT CONVERGE within {} s.", sizes.timeout.as_secs()),
        }
    }
}

/// Runs the suite; `quick` shrinks it to 500 ConfigMapSyncs, 100 Foos and 5 idle seconds.
pub(crate) async fn run(quick: bool) -> anyhow::Result<Vec<Row>> {
    let sizes = if quick {
        Sizes {
            sources: 10,
            destinations: 50,
            foos: 100,
            idle: Duration::from_secs(5),
            timeout: Duration::from_secs(90),
        }
    } else {
        Sizes {
            sources: 100,
            destinations: 100,
            foos: 1_000,
            idle: Duration::from_secs(60),
            timeout: Duration::from_secs(600),
        }
    };
    // Every implementation gets what kore's operator gets by default.
    let concurrency = kore_configmap_sync::Options::default().max_concurrent_reconciles;
    // KORE_BENCH_OPERATORS=kore,naive runs only those (to study one; no rows without kore
    // and a peer).
    let only = std::env::var("KORE_BENCH_OPERATORS").ok();
    let implementations: Vec<Implementation> = [
        Implementation::Kore,
        Implementation::KubeRuntime,
        Implementation::Naive,
    ]
    .into_iter()
    .filter(|i| {
        only.as_deref()
            .is_none_or(|o| o.split(',').any(|name| name == i.label()))
    })
    .collect();
    let mut cms = Vec::new();
    for &implementation in &implementations {
        eprintln!(
            "kore-bench: operators: {} ConfigMapSyncs, {}",
            sizes.syncs(),
            implementation.label()
        );
        cms.push(configmap_sync(implementation, &sizes, concurrency).await?);
    }
    // The same with more reconciles at once, so that round trips to the server weigh less
    // and the runtimes' own costs more (no idle period: only the time is reported).
    let busy = Sizes {
        idle: Duration::ZERO,
        ..sizes
    };
    let mut wide = Vec::new();
    for &implementation in &implementations {
        eprintln!(
            "kore-bench: operators: {} ConfigMapSyncs, {}, {WIDE} reconciles at once",
            sizes.syncs(),
            implementation.label()
        );
        wide.push(configmap_sync(implementation, &busy, WIDE).await?);
    }
    eprintln!("kore-bench: operators: {} Foos, kore", sizes.foos);
    let foo_run = foos(&sizes, concurrency).await?;
    let mut rows = rows(&sizes, concurrency, &cms, &foo_run);
    rows.extend(wide_rows(&sizes, &wide));
    Ok(rows)
}

/// The rows: each configmap-sync measure once against each peer, then the Foo rows.
fn rows(sizes: &Sizes, concurrency: usize, cms: &[Outcome], foo_run: &Outcome) -> Vec<Row> {
    let mut rows = Vec::new();
    let Some((kore, peers)) = cms.split_first() else {
        return rows;
    };
    let n = sizes.syncs();
    let scenario = format!("{} ConfigMapSyncs", crate::svg::thousands(n as f64));
    let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
    type Measure<'a> = (
        String,
        &'a str,
        Box<dyn Fn(&Outcome) -> f64 + 'a>,
        Box<dyn Fn(Implementation) -> Option<Target> + 'a>,
        Box<dyn Fn(&Outcome, &Outcome) -> String + 'a>,
    );
    let measures: Vec<Measure<'_>> = vec![
        (
            format!("{scenario}: start → all copies exist, all Ready"),
            "s",
            Box::new(|o: &Outcome| o.seconds(sizes)),
            Box::new(|peer| {
                Some(Target::QuickerThanPeer(match peer {
                    Implementation::KubeRuntime => 2.0,
                    _ => 1.0,
                }))
            }),
            Box::new(move |k: &Outcome, p: &Outcome| {
                format!(
                    "{} sources × {} destination namespaces, one destination each; all {n} \
                     created at once by {CREATORS} clients ({:.1} s) before the operator starts; \
                     {concurrency} reconciles at once in every implementation.{}{}",
                    sizes.sources,
                    sizes.destinations,
                    k.created_in.as_secs_f64(),
                    k.status_note(sizes),
                    p.status_note(sizes)
                )
            }),
        ),
        (
            format!("{scenario}: writes per sync besides the finalizer"),
            "writes",
            Box::new(|o: &Outcome| {
                o.per_object(o.at_end.writes()) - o.own_writes("configmapsyncs")
            }),
            Box::new(|_| Some(Target::AtMost(2.0))),
            Box::new(|k: &Outcome, p: &Outcome| {
                format!(
                    "minimum: one create per copy + one status write. Per sync, kore: {}; {}: {}",
                    k.write_breakdown(),
                    p.implementation.label(),
                    p.write_breakdown()
                )
            }),
        ),
        (
            format!("{scenario}: finalizer writes per sync"),
            "writes",
            Box::new(|o: &Outcome| o.own_writes("configmapsyncs")),
            Box::new(|_| None),
            Box::new(|_, _| "writes to the ConfigMapSync itself (not its status)".to_owned()),
        ),
        (
            format!("{scenario}: reads (get, list) per sync"),
            "reads",
            Box::new(|o: &Outcome| o.per_object(o.at_end.reads())),
            Box::new(|_| None),
            Box::new(|k: &Outcome, p: &Outcome| {
                let watches = |o: &Outcome| o.at_end.count(|r| r.starts_with("WATCH "));
                format!(
                    "initial lists included; watch requests: kore {}, {} {}",
                    watches(k),
                    p.implementation.label(),
                    watches(p)
                )
            }),
        ),
        (
            format!(
                "{scenario}: writes in the idle {} s after",
                sizes.idle.as_secs()
            ),
            "writes",
            Box::new(|o: &Outcome| o.idle_writes() as f64),
            Box::new(|_| Some(Target::AtMost(0.0))),
            Box::new(|k: &Outcome, p: &Outcome| {
                format!(
                    "nothing changes after convergence; writes by kore: {}; by {}: {}",
                    k.idle_breakdown(),
                    p.implementation.label(),
                    p.idle_breakdown()
                )
            }),
        ),
        (
            format!("{scenario}: operator peak RSS (VmHWM)"),
            "MiB",
            Box::new(move |o: &Outcome| mib(o.at_end.hwm_bytes)),
            Box::new(|_| None),
            Box::new(move |k: &Outcome, p: &Outcome| {
                format!(
                    "the operator's own process; VmRSS at convergence: kore {:.1} MiB, {} {:.1} MiB",
                    mib(k.at_converge.rss_bytes),
                    p.implementation.label(),
                    mib(p.at_converge.rss_bytes)
                )
            }),
        ),
        (
            format!("{scenario}: operator CPU to convergence"),
            "s",
            Box::new(|o: &Outcome| o.at_converge.cpu_seconds),
            Box::new(|_| None),
            Box::new(|k: &Outcome, p: &Outcome| {
                format!(
                    "user + system of the operator's process; the server's process meanwhile: \
                     kore {:.2} s, {} {:.2} s; error answers: kore {}, {} {}",
                    k.server_seconds,
                    p.implementation.label(),
                    p.server_seconds,
                    k.at_end.errors,
                    p.implementation.label(),
                    p.at_end.errors
                )
            }),
        ),
    ];
    for (i, (measure, unit, value, target, note)) in measures.iter().enumerate() {
        // Only the time (the first measure) means something for a run that did not converge.
        let value = |o: &Outcome| {
            if i > 0 && o.converged.is_none() {
                f64::NAN
            } else {
                value(o)
            }
        };
        for peer in peers {
            rows.push(Row {
                measure: format!("{measure} (vs {})", peer.implementation.label()),
                kore: value(kore),
                unit: (*unit).to_owned(),
                peer: Some((peer.implementation.label().to_owned(), value(peer))),
                target: target(peer.implementation),
                note: note(kore, peer),
            });
        }
    }
    let foos = format!("{} Foos", crate::svg::thousands(sizes.foos as f64));
    let row = |measure: String, kore: f64, unit: &str, note: String| Row {
        measure,
        kore: if foo_run.converged.is_some() || unit == "s" {
            kore
        } else {
            f64::NAN
        },
        unit: unit.to_owned(),
        peer: None,
        target: None,
        note,
    };
    rows.push(row(
        format!("{foos}: start → all Deployments, all statuses"),
        foo_run.seconds(sizes),
        "s",
        format!(
            "the bench plays kube-controller-manager: it sets each Deployment's \
             status.availableReplicas to its spec.replicas; done when every Foo's \
             status.availableReplicas equals its spec.replicas.{}",
            foo_run.status_note(sizes)
        ),
    ));
    rows.push(row(
        format!("{foos}: API writes per Foo"),
        foo_run.per_object(foo_run.at_end.writes()),
        "writes",
        format!("per Foo: {}", foo_run.write_breakdown()),
    ));
    rows.push(row(
        format!(
            "{foos}: writes in the idle {} s after",
            sizes.idle.as_secs()
        ),
        foo_run.idle_writes() as f64,
        "writes",
        format!(
            "nothing changes after convergence; writes: {}",
            foo_run.idle_breakdown()
        ),
    ));
    rows.push(row(
        format!("{foos}: operator peak RSS (VmHWM)"),
        mib(foo_run.at_end.hwm_bytes),
        "MiB",
        format!(
            "VmRSS at convergence {:.1} MiB; CPU to convergence {:.2} s",
            mib(foo_run.at_converge.rss_bytes),
            foo_run.at_converge.cpu_seconds
        ),
    ));
    rows
}

/// The time rows of the round with [`WIDE`] reconciles at once.
fn wide_rows(sizes: &Sizes, wide: &[Outcome]) -> Vec<Row> {
    let Some((kore, peers)) = wide.split_first() else {
        return Vec::new();
    };
    peers
        .iter()
        .map(|peer| Row {
            measure: format!(
                "{} ConfigMapSyncs, {WIDE} at once: start → all Ready (vs {})",
                crate::svg::thousands(sizes.syncs() as f64),
                peer.implementation.label()
            ),
            kore: kore.seconds(sizes),
            unit: "s".to_owned(),
            peer: Some((peer.implementation.label().to_owned(), peer.seconds(sizes))),
            target: Some(Target::QuickerThanPeer(
                if peer.implementation == Implementation::KubeRuntime {
                    2.0
                } else {
                    1.0
                },
            )),
            note: format!(
                "a second round, fresh servers, every implementation at {WIDE}; operator CPU: \
                 kore {:.2} s, {} {:.2} s; server process CPU: kore {:.2} s, {} {:.2} s.{}{}",
                kore.at_converge.cpu_seconds,
                peer.implementation.label(),
                peer.at_converge.cpu_seconds,
                kore.server_seconds,
                peer.implementation.label(),
                peer.server_seconds,
                kore.status_note(sizes),
                peer.status_note(sizes)
            ),
        })
        .collect()
}

/// A fresh server on a loopback port, and its URL for the child.
async fn server() -> anyhow::Result<(TestEnv, String)> {
    let env = TestEnv::builder().tcp().insecure_http().start().await?;
    let url = env.endpoint().context("a socket endpoint")?.url.clone();
    Ok((env, url))
}

/// Installs `operator`'s CRDs, as its manifests would.
async fn install_crds(
    client: &kube::Client,
    operator: &kore_operator::Operator,
) -> anyhow::Result<()> {
    kore_operator::install::crds(client, operator)
        .await
        .with_context(|| format!("installing the CRDs of {}", operator.name))
}

async fn create_namespaces(
    client: &kube::Client,
    names: impl IntoIterator<Item = String>,
) -> anyhow::Result<()> {
    let api: Api<Namespace> = Api::all(client.clone());
    for name in names {
        let ns = Namespace {
            metadata: ObjectMeta {
                name: Some(name),
                ..ObjectMeta::default()
            },
            ..Namespace::default()
        };
        api.create(&PostParams::default(), &ns).await?;
    }
    Ok(())
}

/// Creates `objects` in `namespace` with [`CREATORS`] requests in flight; returns how long
/// it took.
async fn create_at_once<K>(
    client: &kube::Client,
    namespace: &str,
    objects: Vec<K>,
) -> anyhow::Result<Duration>
where
    K: kube::Resource<Scope = kube::core::NamespaceResourceScope>
        + Clone
        + serde::Serialize
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
    K::DynamicType: Default,
{
    let api: Api<K> = Api::namespaced(client.clone(), namespace);
    let began = Instant::now();
    futures::stream::iter(objects)
        .map(|obj| {
            let api = api.clone();
            async move { api.create(&PostParams::default(), &obj).await.map(drop) }
        })
        .buffer_unordered(CREATORS)
        .try_collect::<Vec<()>>()
        .await?;
    Ok(began.elapsed())
}

fn source_name(s: usize) -> String {
    format!("cfg-{s:03}")
}

fn destination_ns(d: usize) -> String {
    format!("dst-{d:03}")
}

fn source(s: usize) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(source_name(s)),
            labels: Some(BTreeMap::from([("app".to_owned(), "bench".to_owned())])),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([
            ("LOG_LEVEL".to_owned(), "info".to_owned()),
            ("FEATURE_FLAGS".to_owned(), format!("alpha,beta,source-{s}")),
            (
                "app.yaml".to_owned(),
                format!("server:\n  port: 8080\n  workers: 4\nsource: {s}\n"),
            ),
        ])),
        ..ConfigMap::default()
    }
}

/// One run of the configmap-sync scenario with `implementation` on a fresh server.
async fn configmap_sync(
    implementation: Implementation,
    sizes: &Sizes,
    concurrency: usize,
) -> anyhow::Result<Outcome> {
    let (env, url) = server().await?;
    let client = env.client();
    install_crds(&client, &kore_configmap_sync::operator()).await?;
    create_namespaces(
        &client,
        std::iter::once(SOURCE_NS.to_owned()).chain((0..sizes.destinations).map(destination_ns)),
    )
    .await?;
    create_at_once(&client, SOURCE_NS, (0..sizes.sources).map(source).collect()).await?;
    let syncs: Vec<ConfigMapSync> = (0..sizes.sources)
        .flat_map(|s| (0..sizes.destinations).map(move |d| (s, d)))
        .map(|(s, d)| {
            ConfigMapSync::new(
                &format!("sync-{s:03}-{d:03}"),
                ConfigMapSyncSpec {
                    source_namespace: SOURCE_NS.to_owned(),
                    config_map_name: source_name(s),
                    destination_namespace: Some(destination_ns(d)),
                    destination_namespaces: Vec::new(),
                    namespace_selector: None,
                    destination_name: None,
                    conflict_policy: None,
                },
            )
        })
        .collect();
    let created_in = create_at_once(&client, SOURCE_NS, syncs).await?;

    let (listed, is_listed) = tokio::sync::oneshot::channel();
    let tracker = tokio::spawn(track_syncs(client.clone(), sizes.syncs(), listed));
    is_listed.await.context("the tracker stopped")?;
    let outcome = observe(
        implementation,
        &url,
        concurrency,
        tracker,
        sizes,
        sizes.syncs(),
        created_in,
    )
    .await?;
    if outcome.converged.is_some() {
        verify_copies(&client, sizes).await?;
    }
    env.stop().await;
    Ok(outcome)
}

/// Starts the operator, waits for `tracker` to see convergence, then for the idle period.
async fn observe(
    implementation: Implementation,
    url: &str,
    concurrency: usize,
    mut tracker: tokio::task::JoinHandle<anyhow::Result<Instant>>,
    sizes: &Sizes,
    objects: usize,
    created_in: Duration,
) -> anyhow::Result<Outcome> {
    let server_cpu = || crate::procs::cpu_time("/proc/self/stat").map(|d| d.as_secs_f64());
    let cpu_before = server_cpu()?;
    let started = Instant::now();
    let mut child = Child::spawn(&ChildSpec {
        implementation,
        url: url.to_owned(),
        concurrency,
    })?;
    let converged = match tokio::time::timeout(sizes.timeout, &mut tracker).await {
        Ok(done) => Some(
            done.context("the tracker panicked")??
                .duration_since(started),
        ),
        Err(_) => {
            tracker.abort();
            eprintln!(
                "kore-bench: operators: {} did not converge within {:?}",
                implementation.label(),
                sizes.timeout
            );
            None
        }
    };
    let server_seconds = server_cpu()? - cpu_before;
    let at_converge = child.stats().await?;
    eprintln!(
        "kore-bench: operators: {}: {:?} to converge, operator CPU {:.2} s, this process \
         (server, watches) CPU {server_seconds:.2} s, {} error answers, requests {:?}",
        implementation.label(),
        converged,
        at_converge.cpu_seconds,
        at_converge.errors,
        at_converge.requests
    );
    tokio::time::sleep(sizes.idle).await;
    let at_end = child.stats().await?;
    child.stop().await?;
    Ok(Outcome {
        implementation,
        objects,
        converged,
        at_converge,
        at_end,
        created_in,
        server_seconds,
    })
}

fn is_ready(cms: &ConfigMapSync) -> bool {
    cms.status.as_ref().is_some_and(|s| {
        s.conditions
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True")
    })
}

/// What a tracker's two watches say.
enum Seen<A, B> {
    A(watcher::Event<A>),
    B(watcher::Event<B>),
}

/// Follows two watches; `done(a, b)` is asked after every event. Reports on `listed` once
/// both initial lists are in, returns the instant `done` first holds.
async fn track<A, B>(
    a: Api<A>,
    b: Api<B>,
    listed: tokio::sync::oneshot::Sender<()>,
    mut on_a: impl FnMut(watcher::Event<A>),
    mut on_b: impl FnMut(watcher::Event<B>),
    mut done: impl FnMut() -> bool,
) -> anyhow::Result<Instant>
where
    A: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
    B: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
    A::DynamicType: Default,
    B::DynamicType: Default,
{
    let a = watcher(a, watcher::Config::default())
        .default_backoff()
        .map_ok(Seen::A)
        .boxed();
    let b = watcher(b, watcher::Config::default())
        .default_backoff()
        .map_ok(Seen::B)
        .boxed();
    let mut events = futures::stream::select(a, b);
    let mut listed = Some(listed);
    let mut lists_done = 0;
    while let Some(event) = events.try_next().await? {
        let init_done = match event {
            Seen::A(e) => {
                let init = matches!(e, watcher::Event::InitDone);
                on_a(e);
                init
            }
            Seen::B(e) => {
                let init = matches!(e, watcher::Event::InitDone);
                on_b(e);
                init
            }
        };
        if init_done {
            lists_done += 1;
            if lists_done == 2
                && let Some(tx) = listed.take()
            {
                let _ = tx.send(());
            }
        }
        if listed.is_none() && done() {
            return Ok(Instant::now());
        }
    }
    anyhow::bail!("the tracker's watches ended")
}

/// The instant every one of `n` ConfigMapSyncs is Ready and every copy exists.
async fn track_syncs(
    client: kube::Client,
    n: usize,
    listed: tokio::sync::oneshot::Sender<()>,
) -> anyhow::Result<Instant> {
    let ready = std::sync::Mutex::new(HashSet::new());
    let copies = std::sync::Mutex::new(HashSet::new());
    track(
        Api::<ConfigMapSync>::namespaced(client.clone(), SOURCE_NS),
        Api::<ConfigMap>::all(client),
        listed,
        |e| match e {
            watcher::Event::Apply(s) | watcher::Event::InitApply(s) => {
                if is_ready(&s) {
                    ready
                        .lock()
                        .expect("no panic while tracking")
                        .insert(s.name_any());
                } else {
                    ready
                        .lock()
                        .expect("no panic while tracking")
                        .remove(&s.name_any());
                }
            }
            watcher::Event::Delete(s) => {
                ready
                    .lock()
                    .expect("no panic while tracking")
                    .remove(&s.name_any());
            }
            watcher::Event::Init | watcher::Event::InitDone => {}
        },
        |e| {
            let is_copy = |cm: &ConfigMap| {
                cm.namespace().is_some_and(|ns| ns.starts_with("dst-"))
                    && cm.name_any().starts_with("cfg-")
            };
            match e {
                watcher::Event::Apply(cm) | watcher::Event::InitApply(cm) if is_copy(&cm) => {
                    copies
                        .lock()
                        .expect("no panic while tracking")
                        .insert((cm.namespace(), cm.name_any()));
                }
                watcher::Event::Delete(cm) if is_copy(&cm) => {
                    copies
                        .lock()
                        .expect("no panic while tracking")
                        .remove(&(cm.namespace(), cm.name_any()));
                }
                _ => {}
            }
        },
        || {
            ready.lock().expect("no panic while tracking").len() == n
                && copies.lock().expect("no panic while tracking").len() == n
        },
    )
    .await
}

/// Every copy holds its source's data.
async fn verify_copies(client: &kube::Client, sizes: &Sizes) -> anyhow::Result<()> {
    let all = Api::<ConfigMap>::all(client.clone())
        .list(&Default::default())
        .await?;
    let mut copies = 0;
    for cm in &all.items {
        let ns = cm.namespace().unwrap_or_default();
        if !ns.starts_with("dst-") || !cm.name_any().starts_with("cfg-") {
            continue;
        }
        let s: usize = cm.name_any()["cfg-".len()..].parse()?;
        anyhow::ensure!(
            cm.data == source(s).data,
            "the copy {ns}/{} differs from its source",
            cm.name_any()
        );
        copies += 1;
    }
    anyhow::ensure!(
        copies == sizes.syncs(),
        "{copies} copies of {}",
        sizes.syncs()
    );
    Ok(())
}

/// The Foo scenario with kore's sample-controller on a fresh server.
async fn foos(sizes: &Sizes, concurrency: usize) -> anyhow::Result<Outcome> {
    let (env, url) = server().await?;
    let client = env.client();
    install_crds(&client, &kore_sample_controller::operator()).await?;
    create_namespaces(&client, [FOO_NS.to_owned()]).await?;
    let replicas = |i: usize| i32::try_from(1 + i % 3).expect("1..=3 fits");
    let objects: Vec<Foo> = (0..sizes.foos)
        .map(|i| {
            Foo::new(
                &format!("foo-{i:04}"),
                FooSpec {
                    deployment_name: format!("dep-{i:04}"),
                    replicas: Some(replicas(i)),
                },
            )
        })
        .collect();
    let created_in = create_at_once(&client, FOO_NS, objects).await?;
    let kcm = tokio::spawn(play_controller_manager(client.clone()));

    let (listed, is_listed) = tokio::sync::oneshot::channel();
    let tracker = tokio::spawn(track_foos(client.clone(), sizes.foos, listed));
    is_listed.await.context("the tracker stopped")?;
    let outcome = observe(
        Implementation::KoreFoo,
        &url,
        concurrency,
        tracker,
        sizes,
        sizes.foos,
        created_in,
    )
    .await?;
    kcm.abort();
    if outcome.converged.is_some() {
        let deployments = Api::<Deployment>::namespaced(client.clone(), FOO_NS)
            .list(&Default::default())
            .await?;
        for d in &deployments.items {
            let i: usize = d.name_any()["dep-".len()..].parse()?;
            anyhow::ensure!(
                d.spec.as_ref().and_then(|s| s.replicas) == Some(replicas(i)),
                "{} has the wrong replicas",
                d.name_any()
            );
            let owner = d
                .owner_references()
                .iter()
                .find(|o| o.controller == Some(true));
            anyhow::ensure!(
                owner.is_some_and(|o| o.name == format!("foo-{i:04}")),
                "{} is not controlled by its Foo",
                d.name_any()
            );
        }
    }
    env.stop().await;
    Ok(outcome)
}

/// Sets every Deployment's available replicas to its spec's, as the Deployment controller
/// would once the pods run.
async fn play_controller_manager(client: kube::Client) -> anyhow::Result<()> {
    let api: Api<Deployment> = Api::namespaced(client, FOO_NS);
    watcher(api.clone(), watcher::Config::default())
        .default_backoff()
        .applied_objects()
        .try_for_each_concurrent(16, |d| {
            let api = api.clone();
            async move {
                let want = d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
                let have = d.status.as_ref().and_then(|s| s.available_replicas);
                if have == Some(want) {
                    return Ok(());
                }
                let status = json!({"status": {
                    "observedGeneration": d.meta().generation,
                    "replicas": want, "updatedReplicas": want,
                    "readyReplicas": want, "availableReplicas": want,
                }});
                if let Err(e) = api
                    .patch_status(
                        &d.name_any(),
                        &PatchParams::default(),
                        &Patch::Merge(status),
                    )
                    .await
                {
                    eprintln!("kore-bench: operators: deployment status: {e}");
                }
                Ok(())
            }
        })
        .await?;
    Ok(())
}

/// The instant every Deployment exists and every Foo's status shows its replicas available.
async fn track_foos(
    client: kube::Client,
    n: usize,
    listed: tokio::sync::oneshot::Sender<()>,
) -> anyhow::Result<Instant> {
    let done = std::sync::Mutex::new(HashSet::new());
    let deployments = std::sync::Mutex::new(HashSet::new());
    track(
        Api::<Foo>::namespaced(client.clone(), FOO_NS),
        Api::<Deployment>::namespaced(client, FOO_NS),
        listed,
        |e| match e {
            watcher::Event::Apply(f) | watcher::Event::InitApply(f) => {
                let want = f.spec.replicas.unwrap_or(1);
                if f.status.as_ref().map(|s| s.available_replicas) == Some(want) {
                    done.lock()
                        .expect("no panic while tracking")
                        .insert(f.name_any());
                } else {
                    done.lock()
                        .expect("no panic while tracking")
                        .remove(&f.name_any());
                }
            }
            watcher::Event::Delete(f) => {
                done.lock()
                    .expect("no panic while tracking")
                    .remove(&f.name_any());
            }
            watcher::Event::Init | watcher::Event::InitDone => {}
        },
        |e| match e {
            watcher::Event::Apply(d) | watcher::Event::InitApply(d) => {
                deployments
                    .lock()
                    .expect("no panic while tracking")
                    .insert(d.name_any());
            }
            watcher::Event::Delete(d) => {
                deployments
                    .lock()
                    .expect("no panic while tracking")
                    .remove(&d.name_any());
            }
            watcher::Event::Init | watcher::Event::InitDone => {}
        },
        || {
            done.lock().expect("no panic while tracking").len() == n
                && deployments.lock().expect("no panic while tracking").len() == n
        },
    )
    .await
}
