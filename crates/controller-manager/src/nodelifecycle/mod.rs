//! The node lifecycle controller (`node-lifecycle-controller`, Kubernetes'
//! `pkg/controller/nodelifecycle`) and the taint eviction controller
//! (`taint-eviction-controller`, `pkg/controller/tainteviction`, in [`taint_eviction`]).
//!
//! A kubelet proves it is alive two ways: it renews its Lease `kube-node-lease/<node>` (every
//! 10 s) and it posts the node's status, whose Ready condition carries a `lastHeartbeatTime`.
//! A sync of a node notes, in this process's memory, *when it last saw either change* (the
//! probe time; Kubernetes measures with its own clock, never the kubelet's, so clock skew
//! does not matter). A node whose probe time is older than the grace period
//! ([`Options::node_monitor_grace_period`], 50 s; [`Options::node_startup_grace_period`], 60 s,
//! for a node that never posted a Ready condition) gets its Ready, MemoryPressure,
//! DiskPressure and PIDPressure conditions set to Unknown, reason `NodeStatusUnknown`,
//! "Kubelet stopped posting node status." (or added as `NodeStatusNeverUpdated`). Then:
//!
//! - **NoExecute taints**: Ready Unknown → `node.kubernetes.io/unreachable:NoExecute`,
//!   Ready False → `node.kubernetes.io/not-ready:NoExecute` (each replacing the other, with
//!   `timeAdded`); Ready True → both removed. When no node of the cluster is Ready (the
//!   "full disruption" of every zone, more likely the control plane's network than every
//!   kubelet) none is added and those present are removed, as Kubernetes stops evicting.
//! - **NoSchedule taints** (`TaintNodesByCondition`): Ready False/Unknown → not-ready /
//!   unreachable, MemoryPressure/DiskPressure/PIDPressure/NetworkUnavailable True → the
//!   matching taint, `spec.unschedulable` → `node.kubernetes.io/unschedulable`.
//! - **Pods**: when Ready stops being True, the node gets a `NodeNotReady` event ("Node x
//!   status is now: NodeNotReady") and every pod bound to it whose Ready condition is True
//!   gets it set to False, with a `NodeNotReady` warning "Node is not ready" on the pod
//!   (`MarkPodsNotReady`); pods bound to the node later get the same.
//!
//! New nodes get a `RegisteredNode` event, deleted ones `RemovingNode`, the first time this
//! process sees them come and go. Every node is looked at again every
//! [`NODE_MONITOR_PERIOD`] (Kubernetes' `--node-monitor-period`, 5 s) and at the moment its
//! grace period runs out, so nothing depends on a watch event arriving.
//!
//! [`Options::node_monitor_grace_period`]: crate::Options::node_monitor_grace_period
//! [`Options::node_startup_grace_period`]: crate::Options::node_startup_grace_period

pub mod taint_eviction;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, NodeCondition, Pod, Taint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kore_runtime::controller::{Action, ReconcileError, Reconciler, Request};
use kore_runtime::events::{EventType, Recorder};
use kore_runtime::metrics::Metrics;
use kore_runtime::{CachedClient, Controller, InformerConfig, Manager, ObjectKey, Store};
use kube::Resource;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::error::{SyncError, status_code};
use crate::{Caches, Options, publish, recorder};

/// The controller's name (`--controllers`), as kube-controller-manager 1.33 names it.
pub const NAME: &str = "node-lifecycle-controller";
/// Its short alias.
pub const ALIAS: &str = "nodelifecycle";

/// The namespace of the kubelets' heartbeat Leases.
pub const LEASE_NAMESPACE: &str = "kube-node-lease";

/// `--node-monitor-grace-period`'s default: 50 s since Kubernetes 1.32 (40 s before).
pub const DEFAULT_NODE_MONITOR_GRACE_PERIOD: Duration = Duration::from_secs(50);
/// `--node-startup-grace-period`'s default.
pub const DEFAULT_NODE_STARTUP_GRACE_PERIOD: Duration = Duration::from_secs(60);
/// How often every node is looked at (`--node-monitor-period`'s default).
pub const NODE_MONITOR_PERIOD: Duration = Duration::from_secs(5);

/// The taint of a node whose Ready condition is Unknown.
pub const TAINT_UNREACHABLE: &str = "node.kubernetes.io/unreachable";
/// The taint of a node whose Ready condition is False.
pub const TAINT_NOT_READY: &str = "node.kubernetes.io/not-ready";
/// The taint of a cordoned node (`spec.unschedulable`).
pub const TAINT_UNSCHEDULABLE: &str = "node.kubernetes.io/unschedulable";
/// A node with this label is left out of the disruption check.
pub const LABEL_EXCLUDE_DISRUPTION: &str = "node.kubernetes.io/exclude-disruption";

/// Condition reason: the kubelet stopped posting status.
pub const REASON_STATUS_UNKNOWN: &str = "NodeStatusUnknown";
/// Condition reason: the kubelet never posted this condition.
pub const REASON_STATUS_NEVER_UPDATED: &str = "NodeStatusNeverUpdated";
/// Event reason (node and pods): the node's Ready condition stopped being True.
pub const REASON_NODE_NOT_READY: &str = "NodeNotReady";
/// Event reason: the controller saw a node for the first time.
pub const REASON_REGISTERED_NODE: &str = "RegisteredNode";
/// Event reason: the controller saw a node go.
pub const REASON_REMOVING_NODE: &str = "RemovingNode";

/// The event source Kubernetes' node lifecycle controller reports as.
const EVENT_SOURCE: &str = "node-controller";

/// The pod cache index of pods by `spec.nodeName`.
pub(crate) const BY_NODE: &str = "spec.nodeName";

/// The conditions set to Unknown when the kubelet goes silent (NetworkUnavailable is the
/// network plugin's, not the kubelet's, so it stays).
const KUBELET_CONDITIONS: [&str; 4] = ["Ready", "MemoryPressure", "DiskPressure", "PIDPressure"];

/// Which NoSchedule taint a condition in a status calls for.
fn condition_taint(type_: &str, status: &str) -> Option<&'static str> {
    match (type_, status) {
        ("Ready", "False") => Some(TAINT_NOT_READY),
        ("Ready", "Unknown") => Some(TAINT_UNREACHABLE),
        ("MemoryPressure", "True") => Some("node.kubernetes.io/memory-pressure"),
        ("DiskPressure", "True") => Some("node.kubernetes.io/disk-pressure"),
        ("NetworkUnavailable", "True") => Some("node.kubernetes.io/network-unavailable"),
        ("PIDPressure", "True") => Some("node.kubernetes.io/pid-pressure"),
        _ => None,
    }
}

/// Whether `key` is one of the taints this controller derives from conditions.
fn is_condition_taint(key: &str) -> bool {
    matches!(
        key,
        TAINT_NOT_READY
            | TAINT_UNREACHABLE
            | "node.kubernetes.io/memory-pressure"
            | "node.kubernetes.io/disk-pressure"
            | "node.kubernetes.io/network-unavailable"
            | "node.kubernetes.io/pid-pressure"
    )
}

/// The node's condition of `type_`.
pub fn condition<'a>(node: &'a Node, type_: &str) -> Option<&'a NodeCondition> {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == type_))
}

/// The status of the node's Ready condition (`Unknown` when it has none).
pub fn ready_status(node: &Node) -> &str {
    condition(node, "Ready").map_or("Unknown", |c| c.status.as_str())
}

/// What this process last saw of a node's heartbeats, and when (its own clock).
#[derive(Debug, Clone)]
struct Health {
    /// The Ready condition's `lastHeartbeatTime` last seen.
    heartbeat: Option<Timestamp>,
    /// The Lease's `renewTime` last seen.
    renew: Option<Timestamp>,
    /// When either last changed, by this process's clock.
    probe: Timestamp,
}

/// Given what was last seen of a node (`saved`), the node's Ready heartbeat and Lease renewal
/// now, and the time: what is seen now. The probe time moves to `now` when either changed;
/// a node seen for the first time is taken as heard from now (or, without any Ready
/// condition, at its creation), as Kubernetes does.
fn observe(
    saved: Option<&Health>,
    heartbeat: Option<Timestamp>,
    renew: Option<Timestamp>,
    created: Option<Timestamp>,
    now: Timestamp,
) -> Health {
    let Some(saved) = saved else {
        let probe = if heartbeat.is_none() {
            created.unwrap_or(now)
        } else {
            now
        };
        return Health {
            heartbeat,
            renew,
            probe,
        };
    };
    let mut health = saved.clone();
    if heartbeat != saved.heartbeat {
        health.heartbeat = heartbeat;
        health.probe = now;
    }
    if renew.is_some() && renew > saved.renew {
        health.renew = renew;
        health.probe = now;
    }
    health
}

/// The node's conditions after its kubelet went silent at `now`: the kubelet's conditions
/// Unknown (those it never posted added). Returns `None` when nothing changes.
fn conditions_unknown(node: &Node, now: Timestamp) -> Option<Vec<NodeCondition>> {
    let mut conditions = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    let mut changed = false;
    for type_ in KUBELET_CONDITIONS {
        match conditions.iter_mut().find(|c| c.type_ == type_) {
            Some(c) if c.status != "Unknown" => {
                c.status = "Unknown".into();
                c.reason = Some(REASON_STATUS_UNKNOWN.into());
                c.message = Some("Kubelet stopped posting node status.".into());
                c.last_transition_time = Some(Time(now));
                changed = true;
            }
            Some(_) => {}
            None => {
                conditions.push(NodeCondition {
                    type_: type_.into(),
                    status: "Unknown".into(),
                    reason: Some(REASON_STATUS_NEVER_UPDATED.into()),
                    message: Some("Kubelet never posted node status.".into()),
                    last_heartbeat_time: node.metadata.creation_timestamp.clone(),
                    last_transition_time: Some(Time(now)),
                });
                changed = true;
            }
        }
    }
    changed.then_some(conditions)
}

/// The taints `node` should have, given its conditions and whether NoExecute taints may be
/// added (`evict`: false when every node is down): the others kept as they are, the
/// condition taints (NoSchedule) and the Ready taint (NoExecute) computed, those already
/// present keeping their `timeAdded`. Returns `None` when nothing changes.
pub fn desired_taints(node: &Node, evict: bool, now: Timestamp) -> Option<Vec<Taint>> {
    let current = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default();
    let mut wanted: Vec<(&str, &str)> = Vec::new();
    for c in node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or_default()
    {
        if let Some(key) = condition_taint(&c.type_, &c.status) {
            wanted.push((key, "NoSchedule"));
        }
    }
    if node.spec.as_ref().and_then(|s| s.unschedulable) == Some(true) {
        wanted.push((TAINT_UNSCHEDULABLE, "NoSchedule"));
    }
    if evict {
        match ready_status(node) {
            "False" => wanted.push((TAINT_NOT_READY, "NoExecute")),
            "Unknown" => wanted.push((TAINT_UNREACHABLE, "NoExecute")),
            _ => {}
        }
    }
    let managed = |t: &Taint| match t.effect.as_str() {
        "NoSchedule" => is_condition_taint(&t.key) || t.key == TAINT_UNSCHEDULABLE,
        "NoExecute" => t.key == TAINT_NOT_READY || t.key == TAINT_UNREACHABLE,
        _ => false,
    };
    let mut taints: Vec<Taint> = current
        .iter()
        .filter(|t| !managed(t) || wanted.contains(&(t.key.as_str(), t.effect.as_str())))
        .cloned()
        .collect();
    for (key, effect) in wanted {
        if !taints.iter().any(|t| t.key == key && t.effect == effect) {
            taints.push(Taint {
                key: key.into(),
                effect: effect.into(),
                value: None,
                time_added: Some(Time(now)),
            });
        }
    }
    (taints != current).then_some(taints)
}

/// Syncs one node; see the [module docs](self).
pub struct NodeLifecycleReconciler {
    client: kube::Client,
    nodes: CachedClient<Node>,
    leases: Store<Lease>,
    pods: Store<Pod>,
    health: Mutex<HashMap<String, Health>>,
    monitor_grace: Duration,
    startup_grace: Duration,
    recorder: Recorder,
}

impl std::fmt::Debug for NodeLifecycleReconciler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeLifecycleReconciler")
            .field("monitor_grace", &self.monitor_grace)
            .finish_non_exhaustive()
    }
}

fn plus(t: Timestamp, d: Duration) -> Timestamp {
    t.checked_add(SignedDuration::try_from(d).unwrap_or(SignedDuration::MAX))
        .unwrap_or(Timestamp::MAX)
}

impl NodeLifecycleReconciler {
    /// A reconciler reading Leases and pods from their caches, writing nodes through `nodes`.
    pub fn new(
        client: kube::Client,
        nodes: CachedClient<Node>,
        leases: Store<Lease>,
        pods: Store<Pod>,
        options: &Options,
        recorder: Recorder,
    ) -> Self {
        NodeLifecycleReconciler {
            client,
            nodes,
            leases,
            pods,
            health: Mutex::new(HashMap::new()),
            monitor_grace: options.node_monitor_grace_period,
            startup_grace: options.node_startup_grace_period,
            recorder,
        }
    }

    /// Whether some node (not excluded from the disruption check) is Ready: if none is, the
    /// control plane is more likely cut off than every kubelet dead, and nothing is evicted.
    fn any_node_ready(&self) -> bool {
        let nodes = self.nodes.list();
        let considered: Vec<_> = nodes
            .iter()
            .filter(|n| {
                !n.metadata
                    .labels
                    .as_ref()
                    .is_some_and(|l| l.contains_key(LABEL_EXCLUDE_DISRUPTION))
            })
            .collect();
        considered.is_empty() || considered.iter().any(|n| ready_status(n) == "True")
    }

    async fn sync(&self, name: &str, node: &Node) -> Result<Action, SyncError> {
        let now = Timestamp::now();
        let ready = condition(node, "Ready");
        let grace = if ready.is_some() {
            self.monitor_grace
        } else {
            self.startup_grace
        };
        let heartbeat = ready.and_then(|c| c.last_heartbeat_time.as_ref().map(|t| t.0));
        let renew = self
            .leases
            .get(&ObjectKey::namespaced(LEASE_NAMESPACE, name))
            .and_then(|l| l.spec.as_ref()?.renew_time.as_ref().map(|t| t.0));
        let created = node.metadata.creation_timestamp.as_ref().map(|t| t.0);
        let (health, first) = {
            let mut map = self
                .health
                .lock()
                .expect("the health map is never poisoned");
            let first = !map.contains_key(name);
            let health = observe(map.get(name), heartbeat, renew, created, now);
            map.insert(name.to_string(), health.clone());
            (health, first)
        };
        if first {
            self.node_event(
                node,
                REASON_REGISTERED_NODE,
                format!("Registered Node {name} in Controller"),
            );
        }

        let observed_ready = ready_status(node).to_string();
        let deadline = plus(health.probe, grace);
        let mut node = Arc::new(node.clone());
        if now > deadline
            && let Some(conditions) = conditions_unknown(&node, now)
        {
            let mut updated = (*node).clone();
            updated
                .status
                .get_or_insert_with(Default::default)
                .conditions = Some(conditions);
            tracing::info!(
                node = name,
                "node stopped posting status; its conditions are Unknown"
            );
            node = self
                .nodes
                .replace_status(&updated, &PostParams::default())
                .await
                .map_err(|e| SyncError::cached(format!("status of node {name}"), e))?;
        }

        let current_ready = ready_status(&node).to_string();
        if current_ready != "True" {
            if observed_ready == "True" {
                self.node_event(
                    &node,
                    REASON_NODE_NOT_READY,
                    format!("Node {name} status is now: {REASON_NODE_NOT_READY}"),
                );
            }
            self.mark_pods_not_ready(name).await?;
        }

        let evict = current_ready == "True" || self.any_node_ready();
        if let Some(taints) = desired_taints(&node, evict, now) {
            let patch = json!({
                "metadata": {"resourceVersion": node.metadata.resource_version},
                "spec": {"taints": taints},
            });
            self.nodes
                .patch(
                    &ObjectKey::cluster(name),
                    &PatchParams::default(),
                    &Patch::Merge(&patch),
                )
                .await
                .map_err(|e| SyncError::cached(format!("taints of node {name}"), e))?;
        }

        let until_deadline = deadline
            .duration_since(now)
            .try_into()
            .unwrap_or(Duration::ZERO);
        let next = if until_deadline > Duration::ZERO {
            until_deadline.min(NODE_MONITOR_PERIOD) + Duration::from_millis(10)
        } else {
            NODE_MONITOR_PERIOD
        };
        Ok(Action::requeue_after(next))
    }

    /// Sets Ready False on every pod bound to `node` whose Ready is True (`MarkPodsNotReady`).
    async fn mark_pods_not_ready(&self, node: &str) -> Result<(), SyncError> {
        for pod in self.pods.by_index(BY_NODE, node) {
            let Some(conditions) = pod.status.as_ref().and_then(|s| s.conditions.clone()) else {
                continue;
            };
            if !conditions
                .iter()
                .any(|c| c.type_ == "Ready" && c.status == "True")
            {
                continue;
            }
            let now = Time(Timestamp::now());
            let conditions: Vec<_> = conditions
                .into_iter()
                .map(|mut c| {
                    if c.type_ == "Ready" {
                        c.status = "False".into();
                        c.last_transition_time = Some(now.clone());
                    }
                    c
                })
                .collect();
            let namespace = pod.metadata.namespace.clone().unwrap_or_default();
            let pod_name = pod.metadata.name.clone().unwrap_or_default();
            let patch = json!({
                "metadata": {"resourceVersion": pod.metadata.resource_version},
                "status": {"conditions": conditions},
            });
            let api: Api<Pod> = Api::namespaced(self.client.clone(), &namespace);
            match api
                .patch_status(&pod_name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(_) => publish(
                    &self.recorder,
                    pod.object_ref(&()),
                    EventType::Warning,
                    REASON_NODE_NOT_READY,
                    "MarkNotReady",
                    "Node is not ready".into(),
                ),
                Err(e) if status_code(&e) == Some(404) => {}
                Err(e) => {
                    return Err(SyncError::api(
                        "update status",
                        format!("pod {namespace}/{pod_name}"),
                        e,
                    ));
                }
            }
        }
        Ok(())
    }

    fn node_event(&self, node: &Node, reason: &str, note: String) {
        publish(
            &self.recorder,
            node.object_ref(&()),
            EventType::Normal,
            reason,
            reason,
            note,
        );
    }
}

impl Reconciler<Node> for NodeLifecycleReconciler {
    type Error = SyncError;

    async fn reconcile(&self, request: Request<Node>) -> Result<Action, ReconcileError<SyncError>> {
        let name = request.key().name().to_owned();
        let Some(node) = request.object() else {
            let known = self
                .health
                .lock()
                .expect("the health map is never poisoned")
                .remove(&name)
                .is_some();
            if known && let Some(last) = request.last_state() {
                self.node_event(
                    last,
                    REASON_REMOVING_NODE,
                    format!("Removing Node {name} from Controller"),
                );
            }
            return Ok(Action::done());
        };
        Ok(self.sync(&name, &node).await?)
    }
}

/// Adds the pod index by node name (shared by both controllers here).
pub(crate) fn index_pods_by_node(caches: &Caches) {
    caches.pods.add_index(BY_NODE, |pod: &Pod| {
        pod.spec
            .as_ref()
            .and_then(|s| s.node_name.clone())
            .into_iter()
            .collect()
    });
}

/// Maps a pod to the node it is bound to, when that node is not Ready (its pods are to be
/// marked not ready; a Ready node's pods are none of this controller's business).
fn pod_to_node(nodes: Store<Node>) -> impl Fn(&Pod) -> Vec<ObjectKey> + Send + Sync + 'static {
    move |pod: &Pod| {
        let Some(node) = pod.spec.as_ref().and_then(|s| s.node_name.as_deref()) else {
            return Vec::new();
        };
        let key = ObjectKey::cluster(node);
        if nodes.get(&key).is_some_and(|n| ready_status(&n) != "True") {
            vec![key]
        } else {
            Vec::new()
        }
    }
}

/// Registers the node lifecycle controller on `manager`: Nodes, their Leases in
/// `kube-node-lease` (mapped to the node of the same name) and pods (mapped to their node).
pub(crate) fn register(
    manager: &mut Manager,
    caches: &Caches,
    options: &Options,
    metrics: &Metrics,
) -> &'static str {
    let client = manager.client();
    index_pods_by_node(caches);
    let nodes = manager.informers().get::<Node>(InformerConfig::default());
    let lease_config = InformerConfig::default().namespace(LEASE_NAMESPACE);
    let leases = manager.informers().get::<Lease>(lease_config.clone());
    let builder = Controller::for_::<Node>(manager.informers())
        .named(NAME)
        .watches_with::<Lease>(lease_config, |lease: &Lease| {
            lease
                .metadata
                .name
                .as_deref()
                .map(|n| vec![ObjectKey::cluster(n)])
                .unwrap_or_default()
        })
        .watches::<Pod>(pod_to_node(nodes.store()))
        .metrics(metrics.clone());
    let reconciler = NodeLifecycleReconciler::new(
        client.clone(),
        CachedClient::new(client.clone(), nodes),
        leases.store(),
        caches.pods.store(),
        options,
        recorder(&client, EVENT_SOURCE),
    );
    manager.add(Box::new(builder.build(reconciler)));
    NAME
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(ready: &str, taints: serde_json::Value) -> Node {
        serde_json::from_value(json!({
            "metadata": {"name": "n"},
            "spec": {"taints": taints},
            "status": {"conditions": [
                {"type": "Ready", "status": ready},
                {"type": "MemoryPressure", "status": "False"},
            ]},
        }))
        .expect("a valid node")
    }

    fn keys(taints: &[Taint]) -> Vec<(String, String)> {
        let mut k: Vec<_> = taints
            .iter()
            .map(|t| (t.key.clone(), t.effect.clone()))
            .collect();
        k.sort();
        k
    }

    #[test]
    fn taints_follow_the_ready_condition() {
        let now = Timestamp::now();
        let unknown = node("Unknown", json!([{"key": "mine", "effect": "NoExecute"}]));
        let taints = desired_taints(&unknown, true, now).expect("taints change");
        assert_eq!(
            keys(&taints),
            vec![
                ("mine".into(), "NoExecute".into()),
                (TAINT_UNREACHABLE.into(), "NoExecute".into()),
                (TAINT_UNREACHABLE.into(), "NoSchedule".into()),
            ]
        );
        assert!(
            taints
                .iter()
                .all(|t| t.key == "mine" || t.time_added.is_some())
        );
        // Unknown → False swaps unreachable for not-ready.
        let tainted = node("False", serde_json::to_value(&taints).expect("json"));
        let swapped = desired_taints(&tainted, true, now).expect("taints change");
        assert_eq!(
            keys(&swapped),
            vec![
                ("mine".into(), "NoExecute".into()),
                (TAINT_NOT_READY.into(), "NoExecute".into()),
                (TAINT_NOT_READY.into(), "NoSchedule".into()),
            ]
        );
        // Ready again: only the foreign taint stays; nothing to do once there.
        let back = node("True", serde_json::to_value(&swapped).expect("json"));
        let cleared = desired_taints(&back, true, now).expect("taints change");
        assert_eq!(keys(&cleared), vec![("mine".into(), "NoExecute".into())]);
        let settled = node("True", serde_json::to_value(&cleared).expect("json"));
        assert!(desired_taints(&settled, true, now).is_none());
        // No node ready anywhere: no NoExecute taint, NoSchedule still.
        let quiet = desired_taints(&node("Unknown", json!([])), false, now).expect("changes");
        assert_eq!(
            keys(&quiet),
            vec![(TAINT_UNREACHABLE.into(), "NoSchedule".into())]
        );
    }

    #[test]
    fn silence_makes_kubelet_conditions_unknown_once() {
        let now = Timestamp::now();
        let n = node("True", json!([]));
        let conditions = conditions_unknown(&n, now).expect("changes");
        let by_type: HashMap<_, _> = conditions
            .iter()
            .map(|c| (c.type_.as_str(), (c.status.as_str(), c.reason.as_deref())))
            .collect();
        assert_eq!(by_type["Ready"], ("Unknown", Some(REASON_STATUS_UNKNOWN)));
        assert_eq!(
            by_type["MemoryPressure"],
            ("Unknown", Some(REASON_STATUS_UNKNOWN))
        );
        assert_eq!(
            by_type["PIDPressure"],
            ("Unknown", Some(REASON_STATUS_NEVER_UPDATED))
        );
        let mut again = n.clone();
        again.status.get_or_insert_with(Default::default).conditions = Some(conditions);
        assert!(conditions_unknown(&again, now).is_none());
    }

    #[test]
    fn the_probe_time_moves_only_when_a_heartbeat_changes() {
        let t0 = Timestamp::from_second(1_000).expect("valid");
        let t1 = Timestamp::from_second(1_010).expect("valid");
        let t2 = Timestamp::from_second(1_020).expect("valid");
        let first = observe(None, Some(t0), Some(t0), None, t0);
        assert_eq!(first.probe, t0);
        // Nothing new: the probe stays.
        let same = observe(Some(&first), Some(t0), Some(t0), None, t1);
        assert_eq!(same.probe, t0);
        // A renewed Lease moves it to now (this process's clock, not the kubelet's).
        let renewed = observe(Some(&same), Some(t0), Some(t1), None, t2);
        assert_eq!(renewed.probe, t2);
        // A node that never posted Ready counts from its creation.
        let fresh = observe(None, None, None, Some(t0), t2);
        assert_eq!(fresh.probe, t0);
    }
}
