//! What the controllers ask of a pod: is it active, ready, available, whose is it, and which
//! pods to delete first when scaling down (Kubernetes' `ActivePodsWithRanks` ordering).

use std::cmp::Ordering;
use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use k8s_openapi::jiff::{SignedDuration, Timestamp};

/// The annotation that lowers (or raises) a pod's cost of being deleted on scale-down.
pub const POD_DELETION_COST: &str = "controller.kubernetes.io/pod-deletion-cost";

/// The ownerReference with `controller: true`, if any.
pub fn controller_ref(meta: &ObjectMeta) -> Option<&OwnerReference> {
    meta.owner_references
        .iter()
        .flatten()
        .find(|r| r.controller == Some(true))
}

/// The phase, `""` when unset.
pub fn phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or_default()
}

/// Whether the pod counts toward a controller's replicas: not finished and not being deleted.
pub fn is_active(pod: &Pod) -> bool {
    !matches!(phase(pod), "Succeeded" | "Failed") && pod.metadata.deletion_timestamp.is_none()
}

/// The time the pod's Ready condition last turned True, if it is True.
fn ready_since(pod: &Pod) -> Option<Option<Timestamp>> {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
        .filter(|c| c.status == "True")
        .map(|c| c.last_transition_time.as_ref().map(|t| t.0))
}

/// Whether the pod's Ready condition is True.
pub fn is_ready(pod: &Pod) -> bool {
    ready_since(pod).is_some()
}

/// Whether the pod is available: ready for at least `min_ready_seconds` at `now`.
pub fn is_available(pod: &Pod, min_ready_seconds: i32, now: Timestamp) -> bool {
    match ready_since(pod) {
        None => false,
        Some(_) if min_ready_seconds <= 0 => true,
        Some(None) => false,
        Some(Some(since)) => since
            .checked_add(SignedDuration::from_secs(i64::from(min_ready_seconds)))
            .is_ok_and(|at| at < now),
    }
}

/// When a ready pod becomes available, if it is ready but not yet available.
pub fn available_at(pod: &Pod, min_ready_seconds: i32, now: Timestamp) -> Option<Timestamp> {
    let since = ready_since(pod)??;
    if is_available(pod, min_ready_seconds, now) {
        return None;
    }
    since
        .checked_add(SignedDuration::from_secs(i64::from(min_ready_seconds)))
        .ok()
}

/// Builds the pod a controller creates from `template`: its labels, annotations, finalizers
/// and spec, named by `generate_name`, controlled by `owner`.
pub fn from_template(
    template: &PodTemplateSpec,
    namespace: &str,
    generate_name: String,
    owner: OwnerReference,
) -> Pod {
    let meta = template.metadata.clone().unwrap_or_default();
    Pod {
        metadata: ObjectMeta {
            generate_name: Some(generate_name),
            namespace: Some(namespace.to_owned()),
            labels: meta.labels,
            annotations: meta.annotations,
            finalizers: meta.finalizers,
            owner_references: Some(vec![owner]),
            ..ObjectMeta::default()
        },
        spec: template.spec.clone(),
        status: None,
    }
}

/// The `generateName` of a controller's pods: `<name>-`.
pub fn name_prefix(controller: &str) -> String {
    format!("{controller}-")
}

fn phase_ordinal(pod: &Pod) -> u8 {
    match phase(pod) {
        "Pending" => 0,
        "Unknown" => 1,
        "Running" => 2,
        _ => 3,
    }
}

fn deletion_cost(pod: &Pod) -> i32 {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(POD_DELETION_COST))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn max_restarts(pod: &Pod) -> i32 {
    pod.status
        .as_ref()
        .map(|s| {
            s.container_statuses
                .iter()
                .flatten()
                .chain(s.init_container_statuses.iter().flatten())
                .map(|c| c.restart_count)
                .max()
                .unwrap_or(0)
        })
        .unwrap_or(0)
}

/// The power-of-two bucket of the time since `t`: pods whose ages fall in the same bucket
/// count as the same age (Kubernetes' logarithmic scale-down).
fn age_bucket(t: Option<&Time>, now: Timestamp) -> Option<i64> {
    let t = t?;
    let age = now.as_second().saturating_sub(t.0.as_second()).max(0);
    // floor(log2(age)) + 1, with 0 for an age under one second.
    Some(if age == 0 {
        0
    } else {
        i64::from(64 - age.leading_zeros())
    })
}

/// Sorts `pods` so the ones to delete first come first, as Kubernetes ranks them:
/// unassigned before assigned; Pending, then Unknown, then Running; not ready before ready;
/// lower `pod-deletion-cost` first; more related pods on the same node first; ready for
/// less time first; more container restarts first; newer first (ages compared on a
/// logarithmic scale); and by UID last, so the order is stable.
///
/// `related` are the pods whose colocation counts (those of every ReplicaSet of the same
/// owner, this one's included).
pub fn sort_for_deletion(pods: &mut [Arc<Pod>], related: &[Arc<Pod>], now: Timestamp) {
    let mut per_node: HashMap<&str, usize> = HashMap::new();
    for p in related {
        if let Some(node) = p.spec.as_ref().and_then(|s| s.node_name.as_deref())
            && is_active(p)
        {
            *per_node.entry(node).or_default() += 1;
        }
    }
    let rank = |p: &Pod| -> usize {
        p.spec
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .and_then(|n| per_node.get(n).copied())
            .unwrap_or(0)
    };
    let ranks: HashMap<String, usize> = pods
        .iter()
        .map(|p| (p.metadata.uid.clone().unwrap_or_default(), rank(p)))
        .collect();
    let rank_of = |p: &Pod| {
        ranks
            .get(p.metadata.uid.as_deref().unwrap_or_default())
            .copied()
            .unwrap_or(0)
    };
    pods.sort_by(|a, b| deletion_order(a, b, rank_of(a), rank_of(b), now));
}

fn deletion_order(a: &Pod, b: &Pod, rank_a: usize, rank_b: usize, now: Timestamp) -> Ordering {
    let node = |p: &Pod| {
        p.spec
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .is_some_and(|n| !n.is_empty())
    };
    node(a)
        .cmp(&node(b))
        .then_with(|| phase_ordinal(a).cmp(&phase_ordinal(b)))
        .then_with(|| is_ready(a).cmp(&is_ready(b)))
        .then_with(|| deletion_cost(a).cmp(&deletion_cost(b)))
        .then_with(|| rank_b.cmp(&rank_a))
        .then_with(|| {
            if is_ready(a) && is_ready(b) {
                let since = |p: &Pod| {
                    let t = ready_since(p).flatten().map(Time);
                    age_bucket(t.as_ref(), now)
                };
                // A younger readiness (smaller bucket) goes first; an unknown time first of all.
                since(a).cmp(&since(b))
            } else {
                Ordering::Equal
            }
        })
        .then_with(|| max_restarts(b).cmp(&max_restarts(a)))
        .then_with(|| {
            let age = |p: &Pod| age_bucket(p.metadata.creation_timestamp.as_ref(), now);
            age(a).cmp(&age(b))
        })
        .then_with(|| a.metadata.uid.cmp(&b.metadata.uid))
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{PodCondition, PodSpec, PodStatus};

    use super::*;

    fn pod(uid: &str, node: Option<&str>, phase: &str, ready: bool) -> Arc<Pod> {
        Arc::new(Pod {
            metadata: ObjectMeta {
                uid: Some(uid.into()),
                name: Some(uid.into()),
                ..ObjectMeta::default()
            },
            spec: Some(PodSpec {
                node_name: node.map(Into::into),
                ..PodSpec::default()
            }),
            status: Some(PodStatus {
                phase: Some(phase.into()),
                conditions: Some(vec![PodCondition {
                    type_: "Ready".into(),
                    status: if ready { "True" } else { "False" }.into(),
                    ..PodCondition::default()
                }]),
                ..PodStatus::default()
            }),
        })
    }

    #[test]
    fn unassigned_pending_and_unready_pods_go_first() {
        let now = Timestamp::now();
        let mut pods = vec![
            pod("ready", Some("n1"), "Running", true),
            pod("unready", Some("n1"), "Running", false),
            pod("unknown", Some("n1"), "Unknown", false),
            pod("pending", Some("n1"), "Pending", false),
            pod("unassigned", None, "Pending", false),
        ];
        let related = pods.clone();
        sort_for_deletion(&mut pods, &related, now);
        let order: Vec<_> = pods
            .iter()
            .map(|p| p.metadata.uid.clone().unwrap_or_default())
            .collect();
        assert_eq!(
            order,
            ["unassigned", "pending", "unknown", "unready", "ready"]
        );
    }

    #[test]
    fn availability_waits_for_min_ready_seconds() {
        let now = Timestamp::now();
        let mut p = (*pod("a", None, "Running", true)).clone();
        assert!(is_available(&p, 0, now));
        if let Some(c) = p
            .status
            .as_mut()
            .and_then(|s| s.conditions.as_mut())
            .and_then(|c| c.first_mut())
        {
            c.last_transition_time = Some(Time(now));
        }
        assert!(!is_available(&p, 10, now));
        assert!(available_at(&p, 10, now).is_some());
        let later = now
            .checked_add(k8s_openapi::jiff::SignedDuration::from_secs(11))
            .expect("in range");
        assert!(is_available(&p, 10, later));
    }
}
