//! The taint eviction controller (`taint-eviction-controller`, Kubernetes'
//! `pkg/controller/tainteviction`): deletes the pods bound to a node with a NoExecute taint
//! they do not tolerate.
//!
//! A sync of a node looks at its NoExecute taints and every pod bound to it:
//!
//! - a taint the pod has no toleration for: the pod is deleted at once;
//! - every taint tolerated, each by its first matching toleration: the smallest
//!   `tolerationSeconds` of those is how long the pod may stay (none: forever). The wait is
//!   counted from when this process first saw the pod so tainted, as Kubernetes counts from
//!   when it scheduled the eviction; the node is requeued for that moment. The API server's
//!   DefaultTolerationSeconds admission gives every pod 300 s for `not-ready` and
//!   `unreachable`.
//! - the taints gone before the time is up: the eviction is cancelled ("Cancelling deletion
//!   of Pod x").
//!
//! An eviction writes a `TaintManagerEviction` event "Marking for deletion Pod ns/name",
//! adds the pod condition `DisruptionTarget` True, reason `DeletionByTaintManager`, "Taint
//! manager: deleting due to NoExecute taint", and deletes the pod with its UID as
//! precondition (a new pod of the same name is not touched).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod, PodCondition, Taint, Toleration};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kore_runtime::controller::{Action, ReconcileError, Reconciler, Request};
use kore_runtime::events::{EventType, Recorder};
use kore_runtime::metrics::Metrics;
use kore_runtime::{Controller, InformerConfig, Manager, ObjectKey, Store};
use kube::Resource;
use kube::api::{Api, DeleteParams, Patch, PatchParams, Preconditions};
use serde_json::json;

use super::{BY_NODE, index_pods_by_node};
use crate::daemonset::tolerates;
use crate::error::{SyncError, status_code};
use crate::{Caches, Options, publish, recorder};

/// The controller's name (`--controllers`), as kube-controller-manager 1.33 names it.
pub const NAME: &str = "taint-eviction-controller";

/// Event reason of an eviction and of its cancellation.
pub const REASON_TAINT_MANAGER_EVICTION: &str = "TaintManagerEviction";
/// The reason of the `DisruptionTarget` condition an evicted pod gets.
pub const REASON_DELETION_BY_TAINT_MANAGER: &str = "DeletionByTaintManager";

/// What the NoExecute taints of a node mean for one pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// No NoExecute taint, or all tolerated forever: the pod stays.
    Stay,
    /// A taint is not tolerated: the pod goes now.
    EvictNow,
    /// Every taint is tolerated, the shortest toleration being this long.
    EvictAfter(Duration),
}

/// What `taints` (the node's) mean for a pod tolerating `tolerations` (Kubernetes'
/// `GetMatchingTolerations` and `getMinTolerationTime`).
pub fn verdict(taints: &[Taint], tolerations: &[Toleration]) -> Verdict {
    let mut shortest: Option<Duration> = None;
    let mut any = false;
    for taint in taints.iter().filter(|t| t.effect == "NoExecute") {
        any = true;
        let Some(used) = tolerations.iter().find(|t| tolerates(t, taint)) else {
            return Verdict::EvictNow;
        };
        if let Some(seconds) = used.toleration_seconds {
            let d = Duration::from_secs(u64::try_from(seconds).unwrap_or(0));
            shortest = Some(shortest.map_or(d, |s| s.min(d)));
        }
    }
    match shortest {
        Some(d) if any => Verdict::EvictAfter(d),
        _ => Verdict::Stay,
    }
}

/// Syncs the pods of one node; see the [module docs](self).
pub struct TaintEvictionReconciler {
    client: kube::Client,
    pods: Store<Pod>,
    /// Per node, per pod UID: when the pod's eviction was scheduled.
    scheduled: Mutex<HashMap<String, HashMap<String, Timestamp>>>,
    recorder: Recorder,
}

impl std::fmt::Debug for TaintEvictionReconciler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TaintEvictionReconciler")
            .finish_non_exhaustive()
    }
}

fn pod_name(pod: &Pod) -> String {
    format!(
        "{}/{}",
        pod.metadata.namespace.as_deref().unwrap_or_default(),
        pod.metadata.name.as_deref().unwrap_or_default()
    )
}

impl TaintEvictionReconciler {
    /// A reconciler reading pods from their cache (indexed by node).
    pub fn new(client: kube::Client, pods: Store<Pod>, recorder: Recorder) -> Self {
        TaintEvictionReconciler {
            client,
            pods,
            scheduled: Mutex::new(HashMap::new()),
            recorder,
        }
    }

    async fn sync(&self, name: &str, node: Option<&Node>) -> Result<Action, SyncError> {
        let now = Timestamp::now();
        let taints = node
            .and_then(|n| n.spec.as_ref())
            .and_then(|s| s.taints.clone())
            .unwrap_or_default();
        let pods: Vec<_> = self
            .pods
            .by_index(BY_NODE, name)
            .into_iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .collect();
        let mut evict = Vec::new();
        let mut next: Option<Duration> = None;
        {
            let mut all = self.scheduled.lock().expect("never poisoned");
            let before = all.remove(name).unwrap_or_default();
            let mut after = HashMap::new();
            for pod in &pods {
                let uid = pod.metadata.uid.clone().unwrap_or_default();
                let tolerations = pod
                    .spec
                    .as_ref()
                    .and_then(|s| s.tolerations.clone())
                    .unwrap_or_default();
                match verdict(&taints, &tolerations) {
                    Verdict::Stay => {}
                    Verdict::EvictNow => evict.push(pod.clone()),
                    Verdict::EvictAfter(wait) => {
                        let start = before.get(&uid).copied().unwrap_or(now);
                        let at = start
                            .checked_add(
                                SignedDuration::try_from(wait).unwrap_or(SignedDuration::MAX),
                            )
                            .unwrap_or(Timestamp::MAX);
                        if at <= now {
                            evict.push(pod.clone());
                        } else {
                            let left: Duration =
                                at.duration_since(now).try_into().unwrap_or(Duration::ZERO);
                            next = Some(next.map_or(left, |n| n.min(left)));
                            after.insert(uid, start);
                        }
                    }
                }
            }
            for pod in &pods {
                let uid = pod.metadata.uid.as_deref().unwrap_or_default();
                let evicting = evict.iter().any(|e| e.metadata.uid == pod.metadata.uid);
                if before.contains_key(uid) && !after.contains_key(uid) && !evicting {
                    publish(
                        &self.recorder,
                        pod.object_ref(&()),
                        EventType::Normal,
                        REASON_TAINT_MANAGER_EVICTION,
                        "Cancel",
                        format!("Cancelling deletion of Pod {}", pod_name(pod)),
                    );
                }
            }
            if !after.is_empty() {
                all.insert(name.to_string(), after);
            }
        }
        for pod in evict {
            self.evict(&pod).await?;
        }
        Ok(next.map_or_else(Action::done, |d| {
            Action::requeue_after(d + Duration::from_millis(10))
        }))
    }

    /// Marks `pod` as a disruption target and deletes it (`addConditionAndDeletePod`).
    async fn evict(&self, pod: &Pod) -> Result<(), SyncError> {
        let namespace = pod.metadata.namespace.clone().unwrap_or_default();
        let name = pod.metadata.name.clone().unwrap_or_default();
        let what = format!("pod {namespace}/{name}");
        tracing::info!(pod = %what, "evicting a pod from a node with a NoExecute taint");
        publish(
            &self.recorder,
            pod.object_ref(&()),
            EventType::Normal,
            REASON_TAINT_MANAGER_EVICTION,
            "Delete",
            format!("Marking for deletion Pod {namespace}/{name}"),
        );
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &namespace);
        let mut conditions = pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.clone())
            .unwrap_or_default();
        if !conditions.iter().any(|c| {
            c.type_ == "DisruptionTarget"
                && c.status == "True"
                && c.reason.as_deref() == Some(REASON_DELETION_BY_TAINT_MANAGER)
        }) {
            conditions.retain(|c| c.type_ != "DisruptionTarget");
            conditions.push(PodCondition {
                type_: "DisruptionTarget".into(),
                status: "True".into(),
                reason: Some(REASON_DELETION_BY_TAINT_MANAGER.into()),
                message: Some("Taint manager: deleting due to NoExecute taint".into()),
                last_transition_time: Some(Time(Timestamp::now())),
                ..PodCondition::default()
            });
            let patch = json!({
                "metadata": {"resourceVersion": pod.metadata.resource_version},
                "status": {"conditions": conditions},
            });
            match api
                .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(_) => {}
                Err(e) if status_code(&e) == Some(404) => return Ok(()),
                Err(e) => return Err(SyncError::api("update status", what, e)),
            }
        }
        let dp = DeleteParams {
            preconditions: Some(Preconditions {
                uid: pod.metadata.uid.clone(),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        match api.delete(&name, &dp).await {
            Ok(_) => Ok(()),
            // Gone, or another pod of the same name: nothing to evict.
            Err(e) if matches!(status_code(&e), Some(404 | 409)) => Ok(()),
            Err(e) => Err(SyncError::api("delete", what, e)),
        }
    }
}

impl Reconciler<Node> for TaintEvictionReconciler {
    type Error = SyncError;

    async fn reconcile(&self, request: Request<Node>) -> Result<Action, ReconcileError<SyncError>> {
        let name = request.key().name().to_owned();
        let node = request.object();
        Ok(self.sync(&name, node.as_deref()).await?)
    }
}

/// Whether `node` has a NoExecute taint.
fn has_no_execute(node: &Node) -> bool {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|t| t.iter().any(|t| t.effect == "NoExecute"))
}

/// Registers the taint eviction controller on `manager`: Nodes, and pods mapped to their
/// node when it has a NoExecute taint.
pub(crate) fn register(
    manager: &mut Manager,
    caches: &Caches,
    _options: &Options,
    metrics: &Metrics,
) -> &'static str {
    let client = manager.client();
    index_pods_by_node(caches);
    let nodes = manager
        .informers()
        .get::<Node>(InformerConfig::default())
        .store();
    let builder = Controller::for_::<Node>(manager.informers())
        .named(NAME)
        .watches::<Pod>(move |pod: &Pod| {
            let Some(node) = pod.spec.as_ref().and_then(|s| s.node_name.as_deref()) else {
                return Vec::new();
            };
            let key = ObjectKey::cluster(node);
            if nodes.get(&key).is_some_and(|n| has_no_execute(&n)) {
                vec![key]
            } else {
                Vec::new()
            }
        })
        .metrics(metrics.clone());
    let reconciler =
        TaintEvictionReconciler::new(client.clone(), caches.pods.store(), recorder(&client, NAME));
    manager.add(Box::new(builder.build(reconciler)));
    NAME
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn taints(v: serde_json::Value) -> Vec<Taint> {
        serde_json::from_value(v).expect("valid taints")
    }

    fn tolerations(v: serde_json::Value) -> Vec<Toleration> {
        serde_json::from_value(v).expect("valid tolerations")
    }

    #[test]
    fn verdicts_follow_tolerations() {
        let unreachable = taints(json!([
            {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"},
            {"key": "node.kubernetes.io/unreachable", "effect": "NoSchedule"},
        ]));
        assert_eq!(verdict(&unreachable, &[]), Verdict::EvictNow);
        let default = tolerations(json!([
            {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
            {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
        ]));
        assert_eq!(
            verdict(&unreachable, &default),
            Verdict::EvictAfter(Duration::from_secs(300))
        );
        let forever = tolerations(json!([{"operator": "Exists"}]));
        assert_eq!(verdict(&unreachable, &forever), Verdict::Stay);
        assert_eq!(verdict(&[], &[]), Verdict::Stay);
        // The first matching toleration counts; the shortest of the taints wins.
        let two = taints(json!([
            {"key": "a", "effect": "NoExecute"},
            {"key": "b", "value": "x", "effect": "NoExecute"},
        ]));
        let some = tolerations(json!([
            {"key": "a", "operator": "Exists", "tolerationSeconds": 60},
            {"key": "b", "value": "x", "tolerationSeconds": 5},
        ]));
        assert_eq!(
            verdict(&two, &some),
            Verdict::EvictAfter(Duration::from_secs(5))
        );
        let wrong_value = tolerations(json!([
            {"key": "a", "operator": "Exists"},
            {"key": "b", "value": "y"},
        ]));
        assert_eq!(verdict(&two, &wrong_value), Verdict::EvictNow);
    }
}
