//! The ReplicationController controller: the [ReplicaSet controller](crate::replicaset) run
//! on ReplicationControllers, as kube-controller-manager's `pkg/controller/replication` does
//! it (there through conversion adapters around its ReplicaSet controller).
//!
//! A ReplicationController is read as a ReplicaSet ([`Replicated`]): the same metadata (so
//! the same UID, expectations and owner references, with kind `ReplicationController`), the
//! map selector as `matchLabels`, and the same status fields. Creating and deleting pods,
//! slow start, the deletion ranking, adoption and release, the status (replicas,
//! fullyLabeledReplicas, readyReplicas, availableReplicas, observedGeneration,
//! ReplicaFailure) and the events are the ReplicaSet controller's.

use std::borrow::Cow;
use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{
    ReplicaSet, ReplicaSetCondition, ReplicaSetSpec, ReplicaSetStatus,
};
use k8s_openapi::api::core::v1::{
    ReplicationController, ReplicationControllerCondition, ReplicationControllerStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use crate::replicaset::Replicated;
use crate::selector;

/// The controller's name (`--controllers`), as kube-controller-manager 1.33 names it.
pub const NAME: &str = "replicationcontroller-controller";

/// The selector a ReplicationController uses: `spec.selector`, or when it is empty the
/// template's labels (the API server's defaulting, applied again in case a server did not).
fn selector_of(rc: &ReplicationController) -> Option<&BTreeMap<String, String>> {
    let spec = rc.spec.as_ref()?;
    spec.selector
        .as_ref()
        .filter(|s| !s.is_empty())
        .or_else(|| {
            spec.template
                .as_ref()
                .and_then(|t| t.metadata.as_ref())
                .and_then(|m| m.labels.as_ref())
        })
}

impl Replicated for ReplicationController {
    fn as_replica_set(&self) -> Cow<'_, ReplicaSet> {
        let spec = self.spec.clone().unwrap_or_default();
        Cow::Owned(ReplicaSet {
            metadata: self.metadata.clone(),
            spec: Some(ReplicaSetSpec {
                replicas: spec.replicas,
                min_ready_seconds: spec.min_ready_seconds,
                selector: LabelSelector {
                    match_labels: selector_of(self).cloned(),
                    match_expressions: None,
                },
                template: spec.template,
            }),
            status: self.status.clone().map(|s| ReplicaSetStatus {
                replicas: s.replicas,
                fully_labeled_replicas: s.fully_labeled_replicas,
                ready_replicas: s.ready_replicas,
                available_replicas: s.available_replicas,
                observed_generation: s.observed_generation,
                conditions: s.conditions.map(|cs| {
                    cs.into_iter()
                        .map(|c| ReplicaSetCondition {
                            type_: c.type_,
                            status: c.status,
                            reason: c.reason,
                            message: c.message,
                            last_transition_time: c.last_transition_time,
                        })
                        .collect()
                }),
                terminating_replicas: None,
            }),
        })
    }

    /// A map selector; an empty one (and no template labels) selects nothing.
    fn selects(&self, labels: Option<&BTreeMap<String, String>>) -> bool {
        selector::map_matches(selector_of(self), labels)
    }

    fn with_status(&self, s: ReplicaSetStatus) -> Self {
        ReplicationController {
            status: Some(ReplicationControllerStatus {
                replicas: s.replicas,
                fully_labeled_replicas: s.fully_labeled_replicas,
                ready_replicas: s.ready_replicas,
                available_replicas: s.available_replicas,
                observed_generation: s.observed_generation,
                conditions: s.conditions.map(|cs| {
                    cs.into_iter()
                        .map(|c| ReplicationControllerCondition {
                            type_: c.type_,
                            status: c.status,
                            reason: c.reason,
                            message: c.message,
                            last_transition_time: c.last_transition_time,
                        })
                        .collect()
                }),
            }),
            ..self.clone()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_replication_controller_reads_as_a_replicaset_and_back() -> Result<(), serde_json::Error> {
        let rc: ReplicationController = serde_json::from_value(json!({
            "metadata": {"name": "web", "uid": "u1", "generation": 2},
            "spec": {
                "replicas": 3,
                "minReadySeconds": 4,
                "template": {"metadata": {"labels": {"app": "web", "tier": "front"}}},
            },
            "status": {"replicas": 1, "conditions": [{"type": "ReplicaFailure", "status": "True"}]},
        }))?;
        let rs = rc.as_replica_set();
        let spec = rs.spec.clone().unwrap_or_default();
        assert_eq!(rs.metadata.uid.as_deref(), Some("u1"));
        assert_eq!((spec.replicas, spec.min_ready_seconds), (Some(3), Some(4)));
        // No selector: the template's labels select.
        let labels = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| ((*k).into(), (*v).into()))
                .collect()
        };
        assert!(rc.selects(Some(&labels(&[("app", "web"), ("tier", "front")]))));
        assert!(!rc.selects(Some(&labels(&[("app", "web")]))));
        assert_eq!(rs.status.as_ref().map(|s| s.replicas), Some(1));

        let back = rc.with_status(ReplicaSetStatus {
            replicas: 3,
            ready_replicas: Some(2),
            observed_generation: Some(2),
            ..ReplicaSetStatus::default()
        });
        let status = back.status.unwrap_or_default();
        assert_eq!(
            (
                status.replicas,
                status.ready_replicas,
                status.observed_generation
            ),
            (3, Some(2), Some(2))
        );
        assert_eq!(back.metadata.name.as_deref(), Some("web"));

        let empty: ReplicationController =
            serde_json::from_value(json!({"metadata": {"name": "x"}, "spec": {}}))?;
        assert!(!empty.selects(Some(&labels(&[("app", "web")]))));
        Ok(())
    }
}
