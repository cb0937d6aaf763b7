//! A scheduler on kore-runtime: it binds every pod that has no node yet and asks for one of
//! the schedulers it serves (`default-scheduler`, the pod default, and `kore-scheduler`)
//! through `pods/binding`, as kube-scheduler does.
//!
//! One task owns the state: the nodes (from a Node informer), the room the pods bound to each
//! node take (from a Pod informer, plus the bindings in flight, so two pods are never placed
//! in the same room), a FIFO of pods to place and the set of pods that fit nowhere. A pod
//! that fits nowhere gets `PodScheduled=False`/`Unschedulable` with Kubernetes' FitError
//! message and a `FailedScheduling` event; it is tried again when a node changes, when a pod
//! frees room, when its own spec changes, and every [`SchedulerConfig::retry_interval`].
//!
//! Filters: [`filter`]; scoring prefers the least allocated node (cpu and memory, as the
//! default `NodeResourcesFit` scoring does), then the node with the fewest pods.

pub mod filter;

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::{Node, Pod};
use kore_runtime::events::{Event, EventType, Reporter};
use kore_runtime::manager::{RunError, Runnable};
use kore_runtime::{Change, Informers, ObjectKey, Recorder, SharedInformer, Subscription};
use kube::Resource;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use self::filter::{NodeInfo, fit_error, fits};
use crate::resources::{Resources, pod_requests};

/// The scheduler name pods get by default.
pub const DEFAULT_SCHEDULER: &str = "default-scheduler";
/// kore's own scheduler name, served too.
pub const KORE_SCHEDULER: &str = "kore-scheduler";
/// The event reason of a pod that fits nowhere.
pub const REASON_FAILED_SCHEDULING: &str = "FailedScheduling";
/// The event reason of a pod bound to a node.
pub const REASON_SCHEDULED: &str = "Scheduled";

/// How the scheduler behaves.
#[derive(Clone, Debug)]
pub struct SchedulerConfig {
    /// The `spec.schedulerName`s served; other pods are left alone.
    pub scheduler_names: Vec<String>,
    /// Whether a bound pod gets a `Scheduled` event (kube-scheduler records one; turning it
    /// off halves the writes per pod in benchmarks).
    pub record_scheduled: bool,
    /// How many bindings and status writes are in flight at once.
    pub max_in_flight: usize,
    /// How often pods that fit nowhere are tried again even if nothing changed.
    pub retry_interval: Duration,
    /// Of how many nodes, in percent, a pod is scored once they fit: kube-scheduler's
    /// `percentageOfNodesToScore`. 0 (the default) is its adaptive rule: every node below
    /// 100 nodes, else 50 % less one point per 125 nodes, at least 5 % and 100 nodes.
    pub percentage_of_nodes_to_score: u32,
}

impl Default for SchedulerConfig {
    fn default() -> Self {
        SchedulerConfig {
            scheduler_names: vec![DEFAULT_SCHEDULER.into(), KORE_SCHEDULER.into()],
            record_scheduled: true,
            max_in_flight: 64,
            retry_interval: Duration::from_secs(30),
            percentage_of_nodes_to_score: 0,
        }
    }
}

/// How many nodes that fit are enough to pick from among `all` (kube-scheduler's
/// `numFeasibleNodesToFind`): the search for a pod stops there, so its cost does not grow with
/// the whole cluster.
fn feasible_nodes_to_find(percentage: u32, all: usize) -> usize {
    const MIN_NODES: usize = 100;
    const MIN_PERCENTAGE: usize = 5;
    if all < MIN_NODES {
        return all;
    }
    let percentage = match usize::try_from(percentage).unwrap_or(100) {
        0 => 50usize.saturating_sub(all / 125).max(MIN_PERCENTAGE),
        p => p.min(100),
    };
    (all * percentage / 100).max(MIN_NODES)
}

/// The scheduler; run it with [`Scheduler::run`] or as a leader-elected [`Runnable`].
#[derive(Clone)]
pub struct Scheduler {
    client: kube::Client,
    pods: SharedInformer<Pod>,
    nodes: SharedInformer<Node>,
    recorder: Recorder,
    config: SchedulerConfig,
}

impl std::fmt::Debug for Scheduler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scheduler")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// What a finished binding or status write tells the loop.
enum Done {
    /// The pod is bound (the informer will show it).
    Bound,
    /// The binding failed; `retry` when it may work later.
    NotBound { key: ObjectKey, retry: bool },
    /// A status write or event (nothing to do).
    Reported,
}

/// The loop's state.
#[derive(Default)]
struct State {
    nodes: BTreeMap<String, NodeInfo>,
    /// Pods taking room on a node: bound and not finished, or being bound.
    counted: HashMap<ObjectKey, (String, Resources)>,
    used: HashMap<String, Resources>,
    active: VecDeque<ObjectKey>,
    queued: HashSet<ObjectKey>,
    unschedulable: HashSet<ObjectKey>,
    binding: HashSet<ObjectKey>,
    /// Where the next pod's search through the nodes starts: after the nodes the last one
    /// looked at, as kube-scheduler's `nextStartNodeIndex`, so every node gets its turn.
    next_start: usize,
}

impl State {
    fn enqueue(&mut self, key: ObjectKey) {
        self.unschedulable.remove(&key);
        if self.queued.insert(key.clone()) {
            self.active.push_back(key);
        }
    }

    fn retry_unschedulable(&mut self) {
        for key in std::mem::take(&mut self.unschedulable) {
            self.enqueue(key);
        }
    }

    fn count(&mut self, key: ObjectKey, node: String, req: Resources) {
        self.uncount(&key);
        self.used.entry(node.clone()).or_default().add(&req);
        self.counted.insert(key, (node, req));
    }

    /// Frees the room `key` took; true when it took some.
    fn uncount(&mut self, key: &ObjectKey) -> bool {
        match self.counted.remove(key) {
            Some((node, req)) => {
                if let Some(u) = self.used.get_mut(&node) {
                    u.sub(&req);
                }
                true
            }
            None => false,
        }
    }
}

fn node_name(pod: &Pod) -> Option<&str> {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .filter(|n| !n.is_empty())
}

fn is_terminal(pod: &Pod) -> bool {
    matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

impl Scheduler {
    /// A scheduler reading pods and nodes through `informers` (start them, or run it in a
    /// manager that does).
    pub fn new(informers: &Informers, config: SchedulerConfig) -> Self {
        Scheduler {
            client: informers.client(),
            pods: informers.get::<Pod>(Default::default()),
            nodes: informers.get::<Node>(Default::default()),
            recorder: Recorder::new(informers.client(), Reporter::new(DEFAULT_SCHEDULER)),
            config,
        }
    }

    fn serves(&self, pod: &Pod) -> bool {
        let name = pod
            .spec
            .as_ref()
            .and_then(|s| s.scheduler_name.as_deref())
            .unwrap_or(DEFAULT_SCHEDULER);
        self.config.scheduler_names.iter().any(|n| n == name)
    }

    /// Whether `pod` waits for this scheduler.
    fn wants(&self, pod: &Pod) -> bool {
        node_name(pod).is_none()
            && pod.metadata.deletion_timestamp.is_none()
            && !is_terminal(pod)
            && self.serves(pod)
    }

    /// Schedules until `shutdown` is cancelled.
    pub async fn run(self, shutdown: CancellationToken) {
        let mut pod_changes = self.pods.subscribe();
        let mut node_changes = self.nodes.subscribe();
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = async {
                self.pods.store().wait_until_synced().await;
                self.nodes.store().wait_until_synced().await;
            } => {}
        }
        let mut state = State::default();
        // Both caches first, so no pod is judged against a partial view of the nodes.
        self.on_node(&mut state, Change::Resync, &mut node_changes);
        self.on_pod(&mut state, Change::Resync);
        let mut done: JoinSet<Done> = JoinSet::new();
        let permits = Arc::new(Semaphore::new(self.config.max_in_flight.max(1)));
        let mut retry = tokio::time::interval(self.config.retry_interval);
        retry.tick().await;
        loop {
            let idle = state.active.is_empty();
            tokio::select! {
                biased;
                () = shutdown.cancelled() => break,
                Some(finished) = done.join_next(), if !done.is_empty() => {
                    if let Ok(finished) = finished {
                        self.settle(&mut state, finished);
                    }
                }
                () = std::future::ready(()), if !idle => {
                    // A batch at a time, so that events are read in between.
                    for _ in 0..64 {
                        let Some(key) = state.active.pop_front() else { break };
                        state.queued.remove(&key);
                        self.schedule(&mut state, key, &mut done, &permits);
                    }
                }
                change = pod_changes.next() => match change {
                    Some(change) => self.on_pod(&mut state, change),
                    None => break,
                },
                change = node_changes.next() => match change {
                    Some(change) => self.on_node(&mut state, change, &mut node_changes),
                    None => break,
                },
                _ = retry.tick() => state.retry_unschedulable(),
            }
        }
        done.shutdown().await;
        drop(pod_changes);
    }

    fn on_node(&self, state: &mut State, change: Change<Node>, _sub: &mut Subscription<Node>) {
        match change {
            Change::Applied { new, .. } => {
                let info = NodeInfo::new(&new);
                state.nodes.insert(info.name.clone(), info);
            }
            Change::Deleted(old) => {
                state
                    .nodes
                    .remove(old.metadata.name.as_deref().unwrap_or_default());
            }
            Change::Resync => {
                state.nodes = self
                    .nodes
                    .store()
                    .list()
                    .iter()
                    .map(|n| {
                        let info = NodeInfo::new(n);
                        (info.name.clone(), info)
                    })
                    .collect();
            }
        }
        state.retry_unschedulable();
    }

    fn on_pod(&self, state: &mut State, change: Change<Pod>) {
        match change {
            Change::Applied { old, new } => self.observe(state, &new, old.as_deref()),
            Change::Deleted(pod) => {
                let key = ObjectKey::of(pod.as_ref());
                state.unschedulable.remove(&key);
                if !state.binding.contains(&key) && state.uncount(&key) {
                    state.retry_unschedulable();
                }
            }
            Change::Resync => {
                let store = self.pods.store();
                let live: HashSet<ObjectKey> = store.keys().into_iter().collect();
                let gone: Vec<ObjectKey> = state
                    .counted
                    .keys()
                    .filter(|k| !live.contains(*k) && !state.binding.contains(*k))
                    .cloned()
                    .collect();
                for k in gone {
                    state.uncount(&k);
                }
                for pod in store.list() {
                    self.observe(state, &pod, None);
                }
                state.retry_unschedulable();
            }
        }
    }

    /// Accounts for a pod as it is now.
    fn observe(&self, state: &mut State, pod: &Pod, old: Option<&Pod>) {
        let key = ObjectKey::of(pod);
        if let Some(node) = node_name(pod) {
            state.binding.remove(&key);
            state.unschedulable.remove(&key);
            if is_terminal(pod) {
                if state.uncount(&key) {
                    state.retry_unschedulable();
                }
            } else if state.counted.get(&key).is_none_or(|(n, _)| n != node) {
                state.count(key, node.to_string(), pod_requests(pod));
            }
            return;
        }
        if state.binding.contains(&key) {
            return;
        }
        if !self.wants(pod) {
            state.unschedulable.remove(&key);
            return;
        }
        if state.unschedulable.contains(&key) {
            // Its own status write comes back here: only a spec change makes it worth a retry.
            let changed =
                old.is_none_or(|o| o.spec != pod.spec || o.metadata.labels != pod.metadata.labels);
            if !changed {
                return;
            }
        }
        state.enqueue(key);
    }

    fn settle(&self, state: &mut State, finished: Done) {
        match finished {
            Done::Bound | Done::Reported => {}
            Done::NotBound { key, retry } => {
                state.binding.remove(&key);
                if state.uncount(&key) {
                    state.retry_unschedulable();
                }
                if retry {
                    state.unschedulable.insert(key);
                }
            }
        }
    }

    /// Places one pod, or reports why it fits nowhere.
    fn schedule(
        &self,
        state: &mut State,
        key: ObjectKey,
        done: &mut JoinSet<Done>,
        permits: &Arc<Semaphore>,
    ) {
        let Some(pod) = self.pods.store().get(&key) else {
            return;
        };
        if !self.wants(&pod) || state.binding.contains(&key) {
            return;
        }
        let req = pod_requests(&pod);
        let none = Resources::default();
        let mut unfit = Vec::new();
        let mut best: Option<(f64, i128, &str)> = None;
        let all = state.nodes.len();
        let enough = feasible_nodes_to_find(self.config.percentage_of_nodes_to_score, all);
        let start = if all == 0 { 0 } else { state.next_start % all };
        let (mut looked, mut feasible) = (0, 0);
        let order = state
            .nodes
            .values()
            .skip(start)
            .chain(state.nodes.values().take(start));
        for node in order {
            if feasible >= enough {
                break;
            }
            looked += 1;
            let used = state.used.get(&node.name).unwrap_or(&none);
            match fits(&pod, &req, node, used) {
                Ok(()) => {
                    feasible += 1;
                    let score = least_allocated(&req, node, used);
                    let pods = used.get(crate::resources::PODS);
                    let better = match best {
                        None => true,
                        Some((s, p, _)) => score > s || (score == s && pods < p),
                    };
                    if better {
                        best = Some((score, pods, &node.name));
                    }
                }
                Err(u) => unfit.push(u),
            }
        }
        let chosen = best.map(|(_, _, n)| n.to_string());
        state.next_start = if all == 0 { 0 } else { (start + looked) % all };
        match chosen {
            Some(node) => {
                state.binding.insert(key.clone());
                state.count(key.clone(), node.clone(), req);
                done.spawn(bind(
                    self.client.clone(),
                    self.recorder.clone(),
                    self.config.record_scheduled,
                    pod,
                    key,
                    node,
                    permits.clone(),
                ));
            }
            None => {
                state.unschedulable.insert(key);
                let message = fit_error(state.nodes.len(), &unfit);
                done.spawn(report_unschedulable(
                    self.client.clone(),
                    self.recorder.clone(),
                    pod,
                    message,
                    permits.clone(),
                ));
            }
        }
    }
}

/// The share of cpu and memory left on `node` once `req` is placed (0 to 1, higher is
/// better); a pod without requests counts as 100m cpu and 200Mi memory, as Kubernetes'
/// scoring assumes.
fn least_allocated(req: &Resources, node: &NodeInfo, used: &Resources) -> f64 {
    let left = |name: &str, default: i128| {
        let alloc = node.allocatable.get(name);
        if alloc <= 0 {
            return 0.0;
        }
        let want = match req.get(name) {
            0 => default,
            n => n,
        };
        ((alloc - used.get(name) - want).max(0) as f64) / alloc as f64
    };
    (left("cpu", 100) + left("memory", 200 * 1024 * 1024 * 1000)) / 2.0
}

async fn bind(
    client: kube::Client,
    recorder: Recorder,
    record: bool,
    pod: Arc<Pod>,
    key: ObjectKey,
    node: String,
    permits: Arc<Semaphore>,
) -> Done {
    let _permit = permits.acquire_owned().await;
    let ns = key.namespace().unwrap_or_default().to_owned();
    let pods: Api<Pod> = Api::namespaced(client, &ns);
    let binding = json!({
        "apiVersion": "v1", "kind": "Binding",
        "metadata": {"name": key.name(), "namespace": ns, "uid": pod.metadata.uid},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    });
    match pods
        .create_subresource::<Value, Value>("binding", key.name(), &PostParams::default(), &binding)
        .await
    {
        Ok(_) => {
            if record {
                let event = Event {
                    type_: EventType::Normal,
                    reason: REASON_SCHEDULED.into(),
                    action: "Binding".into(),
                    note: Some(format!(
                        "Successfully assigned {ns}/{} to {node}",
                        key.name()
                    )),
                    related: None,
                };
                recorder.record(event, pod.object_ref(&()));
            }
            Done::Bound
        }
        Err(kube::Error::Api(s)) if matches!(s.code, 404 | 409) => {
            Done::NotBound { key, retry: false }
        }
        Err(e) => {
            tracing::warn!(pod = %key.name(), error = %e, "binding failed; will retry");
            Done::NotBound { key, retry: true }
        }
    }
}

/// Sets `PodScheduled=False`/`Unschedulable` (when it says something new) and records a
/// `FailedScheduling` event.
async fn report_unschedulable(
    client: kube::Client,
    recorder: Recorder,
    pod: Arc<Pod>,
    message: String,
    permits: Arc<Semaphore>,
) -> Done {
    let _permit = permits.acquire_owned().await;
    let name = pod.metadata.name.clone().unwrap_or_default();
    let ns = pod.metadata.namespace.clone().unwrap_or_default();
    let current = pod
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "PodScheduled"));
    let same = current.is_some_and(|c| {
        c.status == "False"
            && c.reason.as_deref() == Some("Unschedulable")
            && c.message.as_deref() == Some(message.as_str())
    });
    if !same {
        let patch = json!({"status": {"conditions": [{
            "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
            "message": message, "lastProbeTime": null,
            "lastTransitionTime": crate::now_seconds(),
        }]}});
        let pods: Api<Pod> = Api::namespaced(client, &ns);
        if let Err(e) = pods
            .patch_status(&name, &PatchParams::default(), &Patch::Strategic(patch))
            .await
        {
            tracing::debug!(pod = %name, error = %e, "could not report the pod unschedulable");
        }
    }
    let event = Event {
        type_: EventType::Warning,
        reason: REASON_FAILED_SCHEDULING.into(),
        action: "Scheduling".into(),
        note: Some(message),
        related: None,
    };
    recorder.record(event, pod.object_ref(&()));
    Done::Reported
}

impl Runnable for Scheduler {
    fn name(&self) -> &str {
        KORE_SCHEDULER
    }

    fn run(
        self: Box<Self>,
        shutdown: CancellationToken,
    ) -> BoxFuture<'static, Result<(), RunError>> {
        Box::pin(async move {
            (*self).run(shutdown).await;
            Ok(())
        })
    }

    fn fresh(&self) -> Option<Box<dyn Runnable>> {
        Some(Box::new(self.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::feasible_nodes_to_find;

    #[test]
    fn the_nodes_searched_shrink_with_the_cluster_as_kube_schedulers_do() {
        assert_eq!(feasible_nodes_to_find(0, 3), 3);
        assert_eq!(feasible_nodes_to_find(0, 99), 99);
        assert_eq!(feasible_nodes_to_find(0, 100), 100);
        assert_eq!(feasible_nodes_to_find(0, 1_000), 420);
        assert_eq!(feasible_nodes_to_find(0, 5_000), 500);
        assert_eq!(feasible_nodes_to_find(0, 10_000), 500);
        assert_eq!(feasible_nodes_to_find(100, 1_000), 1_000);
        assert_eq!(feasible_nodes_to_find(1, 1_000), 100);
    }
}
