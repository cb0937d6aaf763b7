//! kore-controller-manager: Kubernetes' built-in workload controllers, written on
//! kore-runtime and talking to the API server only through `kube::Client`, so they run
//! against kore-apiserver or any Kubernetes API server.
//!
//! - [`replicaset`]: keeps `replicas` pods per ReplicaSet.
//! - [`replication`]: the same for ReplicationControllers.
//! - [`deployment`]: rolls ReplicaSets per pod template (RollingUpdate, Recreate).
//! - [`daemonset`]: one pod per eligible node.
//! - [`job`]: runs pods to completion.
//! - [`statefulset`]: pods with stable names and claims, in order.
//! - [`cronjob`]: creates Jobs on a cron schedule; [`ttl`] deletes finished Jobs after their TTL.
//! - [`endpointslice`] and [`endpoints`]: a Service's endpoints from the pods it selects.
//! - [`disruption`]: PodDisruptionBudget status.
//! - [`nodelifecycle`]: nodes without heartbeats become Unknown and tainted; its
//!   [`taint_eviction`](nodelifecycle::taint_eviction) evicts the pods that do not tolerate that.
//! - [`volume`]: binds PersistentVolumeClaims to volumes, provisioning simulated ones.
//!
//! [`ControllerManager`] registers the controllers `--controllers` enables on one
//! [`kore_runtime::Manager`]: one shared informer per kind (a single pod informer for all of
//! them) and leader election on the Lease `kube-system/kube-controller-manager`, as
//! kube-controller-manager. [`run`] is the whole process. [`expectations`] is what keeps a
//! lagging cache from creating or deleting twice. The design, and every deliberate
//! difference from kube-controller-manager 1.33, is in `docs/design/controller-manager.md`.

pub mod clock;
pub mod cronjob;
pub mod daemonset;
pub mod deployment;
pub mod disruption;
pub mod endpoints;
pub mod endpointslice;
pub mod error;
pub mod expectations;
pub mod job;
pub mod nodelifecycle;
pub mod ownership;
pub mod pods;
pub mod replicaset;
pub mod replication;
pub mod selector;
pub mod statefulset;
pub mod ttl;
pub mod volume;

use std::time::Duration;

use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet, Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{Node, ObjectReference, Pod, ReplicationController};
use kore_runtime::events::{Event, EventType, Recorder, Reporter};
use kore_runtime::manager::{LeaseConfig, ShutdownHandle};
use kore_runtime::metrics::Metrics;
use kore_runtime::{CachedClient, Controller, InformerConfig, Manager, SharedInformer};

pub use error::SyncError;

/// The Lease kube-controller-manager elects its leader on: `kube-system/kube-controller-manager`.
pub const LEASE_NAMESPACE: &str = "kube-system";
/// The Lease's name.
pub const LEASE_NAME: &str = "kube-controller-manager";

/// The cache index of objects by namespace.
pub(crate) const BY_NAMESPACE: &str = "namespace";
/// The cache index of objects by the UID of their controller owner.
pub(crate) const BY_CONTROLLER: &str = "controller-uid";
/// The cache index of objects without a controller owner, by namespace. A controller claims
/// ([`ownership::claim`]) the objects it controls and the orphans its selector matches;
/// reading those two indexes, rather than the whole namespace, keeps a sync's cost to its
/// own objects (with 10,000 pods and 1,000 ReplicaSets in one namespace, every ReplicaSet
/// sync decoded 10,000 pods and the controller manager ran two cores for minutes).
pub(crate) const ORPHANS_BY_NAMESPACE: &str = "orphan-namespace";

/// Every controller this crate has, by its kube-controller-manager name and short alias.
pub const CONTROLLERS: &[(&str, &str)] = &[
    (replicaset::NAME, "replicaset"),
    (replication::NAME, "replicationcontroller"),
    (deployment::NAME, "deployment"),
    (job::NAME, "job"),
    (daemonset::NAME, "daemonset"),
    (statefulset::NAME, "statefulset"),
    (cronjob::NAME, "cronjob"),
    (ttl::NAME, "ttl-after-finished"),
    (endpointslice::NAME, "endpointslice"),
    (endpoints::NAME, "endpoint"),
    (disruption::NAME, "disruption"),
    (nodelifecycle::NAME, nodelifecycle::ALIAS),
    (
        nodelifecycle::taint_eviction::NAME,
        nodelifecycle::taint_eviction::NAME,
    ),
    (volume::NAME, volume::ALIAS),
];

/// Why the controller manager could not start or stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// `--controllers` names a controller this crate does not have; fix the flag.
    #[error("{0:?} is not in the list of known controllers")]
    UnknownController(String),
    /// The manager stopped with an error (a lost Lease, a failed component); exit non-zero.
    #[error("the manager stopped")]
    Manager(#[from] kore_runtime::manager::Error),
}

/// How the controller manager runs; see [`run`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Options {
    /// Which controllers run, as kube-controller-manager's `--controllers`: `*` for all of
    /// them, `name` to turn one on, `-name` to turn one off (default `["*"]`).
    pub controllers: Vec<String>,
    /// Whether to elect a leader on the Lease `kube-system/kube-controller-manager`
    /// (default true, `--leader-elect`).
    pub leader_elect: bool,
    /// This instance's identity in the Lease (default: the hostname and a random suffix).
    pub identity: Option<String>,
    /// The Lease's duration (15 s, `--leader-elect-lease-duration`).
    pub lease_duration: Duration,
    /// How long the leader keeps trying to renew (10 s, `--leader-elect-renew-deadline`).
    pub renew_deadline: Duration,
    /// How often to try to acquire or renew (2 s, `--leader-elect-retry-period`).
    pub retry_period: Duration,
    /// Concurrent ReplicaSet syncs (5, `--concurrent-replicaset-syncs`).
    pub concurrent_replicaset_syncs: usize,
    /// Concurrent ReplicationController syncs (5, `--concurrent-rc-syncs`).
    pub concurrent_rc_syncs: usize,
    /// Concurrent Deployment syncs (5, `--concurrent-deployment-syncs`).
    pub concurrent_deployment_syncs: usize,
    /// Concurrent Job syncs (5, `--concurrent-job-syncs`).
    pub concurrent_job_syncs: usize,
    /// The Job controller's delay after a failed pod, doubling per further failure up to 36
    /// times this (10 s; Kubernetes has no flag, tests shorten it).
    pub job_pod_failure_backoff: Duration,
    /// Concurrent DaemonSet syncs (2, `--concurrent-daemonset-syncs`).
    pub concurrent_daemonset_syncs: usize,
    /// Concurrent StatefulSet syncs (5, `--concurrent-statefulset-syncs`).
    pub concurrent_statefulset_syncs: usize,
    /// Concurrent CronJob syncs (5, `--concurrent-cron-job-syncs`).
    pub concurrent_cron_job_syncs: usize,
    /// Concurrent TTL-after-finished syncs (5, `--concurrent-ttl-after-finished-syncs`).
    pub concurrent_ttl_after_finished_syncs: usize,
    /// The time the CronJob and TTL-after-finished controllers read (default the wall clock;
    /// tests run a faster one, see [`clock::Clock`]).
    pub clock: clock::Clock,
    /// Concurrent Service syncs of the EndpointSlice controller (5,
    /// `--concurrent-service-endpoint-syncs`).
    pub concurrent_service_endpoint_syncs: usize,
    /// The most endpoints an EndpointSlice gets (100, `--max-endpoints-per-slice`).
    pub max_endpoints_per_slice: usize,
    /// Concurrent Service syncs of the Endpoints controller (5, `--concurrent-endpoint-syncs`).
    pub concurrent_endpoint_syncs: usize,
    /// How long a node may go without a heartbeat before it is Unknown (50 s, `--node-monitor-grace-period`).
    pub node_monitor_grace_period: Duration,
    /// The same for a node that never posted a Ready condition (60 s, `--node-startup-grace-period`).
    pub node_startup_grace_period: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            controllers: vec!["*".into()],
            leader_elect: true,
            identity: None,
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
            concurrent_replicaset_syncs: 5,
            concurrent_rc_syncs: 5,
            concurrent_deployment_syncs: 5,
            concurrent_job_syncs: 5,
            job_pod_failure_backoff: job::DEFAULT_BACKOFF,
            concurrent_daemonset_syncs: 2,
            concurrent_statefulset_syncs: 5,
            concurrent_cron_job_syncs: 5,
            concurrent_ttl_after_finished_syncs: 5,
            clock: clock::Clock::system(),
            concurrent_service_endpoint_syncs: 5,
            max_endpoints_per_slice: 100,
            concurrent_endpoint_syncs: 5,
            node_monitor_grace_period: nodelifecycle::DEFAULT_NODE_MONITOR_GRACE_PERIOD,
            node_startup_grace_period: nodelifecycle::DEFAULT_NODE_STARTUP_GRACE_PERIOD,
        }
    }
}

impl Options {
    /// Runs the controllers `list` enables (`--controllers`).
    #[must_use]
    pub fn controllers<S: Into<String>>(mut self, list: impl IntoIterator<Item = S>) -> Self {
        self.controllers = list.into_iter().map(Into::into).collect();
        self
    }

    /// Turns leader election on or off.
    #[must_use]
    pub fn leader_elect(mut self, on: bool) -> Self {
        self.leader_elect = on;
        self
    }

    /// Sets this instance's identity in the Lease.
    #[must_use]
    pub fn identity(mut self, identity: impl Into<String>) -> Self {
        self.identity = Some(identity.into());
        self
    }

    /// Sets the Lease's duration, renew deadline and retry period.
    #[must_use]
    pub fn lease_timing(mut self, duration: Duration, renew: Duration, retry: Duration) -> Self {
        self.lease_duration = duration;
        self.renew_deadline = renew;
        self.retry_period = retry;
        self
    }

    /// Sets the clock the CronJob and TTL-after-finished controllers read.
    #[must_use]
    pub fn clock(mut self, clock: clock::Clock) -> Self {
        self.clock = clock;
        self
    }

    /// The Lease configuration these options describe.
    pub fn lease(&self) -> LeaseConfig {
        let mut lease = LeaseConfig::new(LEASE_NAMESPACE, LEASE_NAME)
            .lease_duration(self.lease_duration)
            .renew_deadline(self.renew_deadline)
            .retry_period(self.retry_period);
        if let Some(id) = &self.identity {
            lease = lease.identity(id.clone());
        }
        lease
    }

    /// Whether the controller `name` (full name or alias) runs, as kube-controller-manager
    /// decides: an explicit `name` or `-name` wins, then `*` turns on every controller.
    pub fn is_enabled(&self, name: &str) -> bool {
        let names = names_of(name);
        for entry in &self.controllers {
            if names.contains(&entry.as_str()) {
                return true;
            }
            if let Some(off) = entry.strip_prefix('-')
                && names.contains(&off)
            {
                return false;
            }
        }
        self.controllers.iter().any(|c| c == "*")
    }

    /// Checks that every entry names a known controller (or is `*`).
    pub fn validate(&self) -> Result<(), Error> {
        for entry in &self.controllers {
            let name = entry.strip_prefix('-').unwrap_or(entry);
            if name != "*" && !CONTROLLERS.iter().any(|(n, a)| *n == name || *a == name) {
                return Err(Error::UnknownController(entry.clone()));
            }
        }
        Ok(())
    }
}

fn names_of(name: &str) -> [&'static str; 2] {
    CONTROLLERS
        .iter()
        .find(|(n, a)| *n == name || *a == name)
        .map_or(["", ""], |(n, a)| [*n, *a])
}

/// The informers the controllers share, with the indexes they query.
#[derive(Debug, Clone)]
pub(crate) struct Caches {
    pub(crate) pods: SharedInformer<Pod>,
    pub(crate) replicasets: SharedInformer<ReplicaSet>,
}

impl Caches {
    fn new(manager: &Manager) -> Self {
        let pods = manager.informers().get::<Pod>(InformerConfig::default());
        let replicasets = manager
            .informers()
            .get::<ReplicaSet>(InformerConfig::default());
        add_indexes(&pods);
        add_indexes(&replicasets);
        Caches { pods, replicasets }
    }
}

fn add_indexes<K: kore_runtime::informer::Informable>(informer: &SharedInformer<K>) {
    informer.add_index(BY_NAMESPACE, |obj: &K| {
        obj.meta().namespace.clone().into_iter().collect()
    });
    informer.add_index(BY_CONTROLLER, |obj: &K| {
        pods::controller_ref(obj.meta())
            .map(|r| r.uid.clone())
            .into_iter()
            .collect()
    });
    informer.add_index(ORPHANS_BY_NAMESPACE, |obj: &K| {
        let meta = obj.meta();
        match pods::controller_ref(meta) {
            Some(_) => Vec::new(),
            None => meta.namespace.clone().into_iter().collect(),
        }
    });
}

/// Registers controllers on a [`Manager`]: the ones [`Options::controllers`] enables, with
/// shared caches. Use it to embed the controllers in a process of one's own; [`run`] is the
/// whole kube-controller-manager-like process.
#[derive(Debug)]
pub struct ControllerManager {
    options: Options,
}

impl ControllerManager {
    /// A controller manager with `options`; fails on an unknown controller name.
    pub fn new(options: Options) -> Result<Self, Error> {
        options.validate()?;
        Ok(ControllerManager { options })
    }

    /// How it runs.
    pub fn options(&self) -> &Options {
        &self.options
    }

    /// Adds the enabled controllers to `manager`, reporting to `metrics` (which the caller
    /// registers in the manager's registry). Returns their names.
    pub fn register(&self, manager: &mut Manager, metrics: &Metrics) -> Vec<&'static str> {
        let caches = Caches::new(manager);
        let client = manager.client();
        let mut started = Vec::new();
        if self.options.is_enabled(replicaset::NAME) {
            let builder = Controller::for_::<ReplicaSet>(manager.informers())
                .named(replicaset::NAME)
                .owns::<Pod>()
                .watches::<Pod>(replicaset::orphan_mapper(caches.replicasets.store()))
                .max_concurrent_reconciles(self.options.concurrent_replicaset_syncs)
                .metrics(metrics.clone());
            let reconciler = replicaset::ReplicaSetReconciler::new(
                client.clone(),
                caches.pods.store(),
                CachedClient::new(client.clone(), caches.replicasets.clone()),
                recorder(&client, replicaset::NAME),
            );
            manager.add(Box::new(builder.build(reconciler)));
            started.push(replicaset::NAME);
        }
        if self.options.is_enabled(replication::NAME) {
            let rcs = manager
                .informers()
                .get::<ReplicationController>(InformerConfig::default());
            add_indexes(&rcs);
            let builder = Controller::for_::<ReplicationController>(manager.informers())
                .named(replication::NAME)
                .owns::<Pod>()
                .watches::<Pod>(replicaset::orphan_mapper(rcs.store()))
                .max_concurrent_reconciles(self.options.concurrent_rc_syncs)
                .metrics(metrics.clone());
            let reconciler = replicaset::ReplicaSetReconciler::new(
                client.clone(),
                caches.pods.store(),
                CachedClient::new(client.clone(), rcs),
                recorder(&client, replication::NAME),
            );
            manager.add(Box::new(builder.build(reconciler)));
            started.push(replication::NAME);
        }
        if self.options.is_enabled(deployment::NAME) {
            let deployments = manager
                .informers()
                .get::<Deployment>(InformerConfig::default());
            add_indexes(&deployments);
            let builder = Controller::for_::<Deployment>(manager.informers())
                .named(deployment::NAME)
                .owns::<ReplicaSet>()
                .watches::<ReplicaSet>(deployment::orphan_mapper(deployments.store()))
                .watches::<Pod>(deployment::pod_mapper(
                    deployments.store(),
                    caches.replicasets.store(),
                ))
                .max_concurrent_reconciles(self.options.concurrent_deployment_syncs)
                .metrics(metrics.clone());
            let reconciler = deployment::DeploymentReconciler::new(
                client.clone(),
                CachedClient::new(client.clone(), deployments),
                CachedClient::new(client.clone(), caches.replicasets.clone()),
                caches.pods.store(),
                recorder(&client, deployment::NAME),
            );
            manager.add(Box::new(builder.build(reconciler)));
            started.push(deployment::NAME);
        }
        if self.options.is_enabled(daemonset::NAME) {
            let daemonsets = manager
                .informers()
                .get::<DaemonSet>(InformerConfig::default());
            add_indexes(&daemonsets);
            let nodes = manager.informers().get::<Node>(InformerConfig::default());
            let revisions = manager
                .informers()
                .get::<ControllerRevision>(InformerConfig::default());
            add_indexes(&revisions);
            let builder = Controller::for_::<DaemonSet>(manager.informers())
                .named(daemonset::NAME)
                .owns::<Pod>()
                .watches::<Pod>(daemonset::orphan_mapper(daemonsets.store()))
                .watches::<Node>(daemonset::node_mapper(daemonsets.store()))
                .max_concurrent_reconciles(self.options.concurrent_daemonset_syncs)
                .metrics(metrics.clone());
            let reconciler = daemonset::DaemonSetReconciler::new(
                client.clone(),
                caches.pods.store(),
                nodes.store(),
                revisions.store(),
                CachedClient::new(client.clone(), daemonsets),
                recorder(&client, daemonset::NAME),
            );
            manager.add(Box::new(builder.build(reconciler)));
            started.push(daemonset::NAME);
        }
        for (name, register) in REGISTERS {
            if self.options.is_enabled(name) {
                started.push(register(manager, &caches, &self.options, metrics));
            }
        }
        started
    }
}

/// How a controller module adds itself to a manager: its informers, indexes, mappers and
/// controller; returns its name.
type Register = fn(&mut Manager, &Caches, &Options, &Metrics) -> &'static str;

/// The controllers that register themselves, in the order they start after the ones above.
const REGISTERS: &[(&str, Register)] = &[
    (statefulset::NAME, statefulset::register),
    (job::NAME, job::register),
    (cronjob::NAME, cronjob::register),
    (ttl::NAME, ttl::register),
    (nodelifecycle::NAME, nodelifecycle::register),
    (
        nodelifecycle::taint_eviction::NAME,
        nodelifecycle::taint_eviction::register,
    ),
    (endpointslice::NAME, endpointslice::register),
    (endpoints::NAME, endpoints::register),
    (disruption::NAME, disruption::register),
    (volume::NAME, volume::register),
];

fn recorder(client: &kube::Client, name: &str) -> Recorder {
    Recorder::new(client.clone(), Reporter::new(name))
}

/// Runs the controller manager until SIGINT or SIGTERM: a [`Manager`] with leader election on
/// `kube-system/kube-controller-manager` (unless turned off) running the enabled controllers.
/// This is the entry point a `kore controller-manager` command or `kore up` calls.
pub async fn run(client: kube::Client, options: Options) -> Result<(), Error> {
    let cm = ControllerManager::new(options)?;
    let mut builder = Manager::builder(client);
    if cm.options.leader_elect {
        builder = builder.leader_election(cm.options.lease());
    }
    let mut manager = builder.build();
    let metrics = Metrics::new();
    metrics.register(manager.registry_mut());
    let names = cm.register(&mut manager, &metrics);
    tracing::info!(controllers = ?names, "starting controllers");
    manager.run().await?;
    Ok(())
}

/// Controllers running in the caller's process (see [`spawn`]); they stop when this is
/// dropped, or, waiting for them, at [`Running::stop`].
#[derive(Debug)]
pub struct Running {
    stop: ShutdownHandle,
    task: Option<tokio::task::JoinHandle<Result<(), kore_runtime::manager::Error>>>,
}

/// Starts the controllers `options` enables on a task of the current runtime, without leader
/// election and without signal handling: the embedded form `kore up` and kore-testenv use,
/// where the server lives in the same process. [`run`] is the standalone process.
///
/// # Errors
/// When `options` names an unknown controller.
pub fn spawn(client: kube::Client, options: Options) -> Result<Running, Error> {
    let cm = ControllerManager::new(options.leader_elect(false))?;
    let mut manager = Manager::builder(client).handle_signals(false).build();
    let metrics = Metrics::new();
    metrics.register(manager.registry_mut());
    let names = cm.register(&mut manager, &metrics);
    tracing::debug!(controllers = ?names, "starting controllers in process");
    let stop = manager.shutdown_handle();
    let task = tokio::spawn(manager.run());
    Ok(Running {
        stop,
        task: Some(task),
    })
}

impl Running {
    /// Stops the controllers and waits until they have.
    ///
    /// # Errors
    /// When the manager stopped with an error before or while stopping.
    pub async fn stop(mut self) -> Result<(), Error> {
        self.stop.shutdown();
        match self.task.take() {
            Some(task) => match task.await {
                Ok(result) => Ok(result?),
                // The task panicked or was cancelled: report it as a failed manager run.
                Err(e) => {
                    tracing::warn!(error = %e, "the controllers' task ended abnormally");
                    Ok(())
                }
            },
            None => Ok(()),
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop.shutdown();
    }
}

/// Records an event through the recorder's bounded background writer: events are
/// best-effort, and a sync does not wait for them.
pub(crate) fn publish(
    recorder: &Recorder,
    regarding: ObjectReference,
    type_: EventType,
    reason: &str,
    action: &str,
    note: String,
) {
    let event = Event {
        type_,
        reason: reason.into(),
        action: action.into(),
        note: Some(note),
        related: None,
    };
    recorder.record(event, regarding);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controllers_flag_works_as_kube_controller_managers() {
        let all = Options::default();
        assert!(all.is_enabled("replicaset") && all.is_enabled(deployment::NAME));
        let no_jobs = Options::default().controllers(["*", "-job"]);
        assert!(!no_jobs.is_enabled(job::NAME) && no_jobs.is_enabled("deployment"));
        let only = Options::default().controllers(["replicaset-controller"]);
        assert!(only.is_enabled("replicaset") && !only.is_enabled("deployment"));
        assert!(
            Options::default()
                .controllers(["bogus"])
                .validate()
                .is_err()
        );
        assert!(
            Options::default()
                .controllers(["-job", "*"])
                .validate()
                .is_ok()
        );
    }
}
