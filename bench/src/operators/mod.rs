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
//!
//! This file holds the sizes, the outcome of one run and the suite's driver (`run`); `setup`
//! prepares a server, `syncs` and `foos` run the two scenarios, `tracking` watches a run to
//! its end, and `rows` turns the outcomes into result rows.

mod foos;
mod rows;
mod setup;
mod syncs;
mod tracking;

use std::time::Duration;

use crate::operators_child::{Implementation, Stats};
use crate::suite::Row;
use foos::foos;
use rows::{rows, wide_rows};
use syncs::configmap_sync;

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
/// Only the `first` round has the idle period and the Foos (rows without a peer); the later
/// rounds repeat the configmap-sync runs, each implementation in turn, for the median ratios.
pub(crate) async fn run(quick: bool, first: bool) -> anyhow::Result<Vec<Row>> {
    let mut sizes = if quick {
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
    // KORE_BENCH_OPERATORS_IDLE=SECONDS shortens the idle period (to study CPU or time; the
    // idle-writes rows then cover only that long).
    if let Some(idle) = std::env::var("KORE_BENCH_OPERATORS_IDLE")
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
    {
        sizes.idle = Duration::from_secs(idle);
    }
    if !first {
        sizes.idle = Duration::ZERO;
    }
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
    let foo_run = if first {
        eprintln!("kore-bench: operators: {} Foos, kore", sizes.foos);
        Some(foos(&sizes, concurrency).await?)
    } else {
        None
    };
    let mut rows = rows(&sizes, concurrency, &cms, foo_run.as_ref());
    rows.extend(wide_rows(&sizes, &wide));
    Ok(rows)
}
