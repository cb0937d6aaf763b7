//! The Job's policies over its pods' outcomes: `podFailurePolicy` decides what a failed pod
//! means (fail the Job, fail its index, not count it, or count it), `successPolicy` when
//! some succeeded indexes are enough (Kubernetes' `pod_failure_policy.go` and
//! `success_policy.go`).

use std::collections::BTreeSet;

use k8s_openapi::api::batch::v1::{
    PodFailurePolicy, PodFailurePolicyOnExitCodesRequirement, SuccessPolicy,
};
use k8s_openapi::api::core::v1::{ContainerStatus, Pod};

use super::indexes::parse_indexes;

/// What a matching `podFailurePolicy` rule does with a failed pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FailureAction {
    /// Fail the whole Job, with this message.
    FailJob(String),
    /// Fail the pod's index (with `backoffLimitPerIndex`); the failure counts.
    FailIndex,
    /// Do not count the failure; the pod is replaced.
    Ignore,
    /// Count the failure, as without a rule.
    Count,
}

impl FailureAction {
    /// Whether the failure counts toward `backoffLimit` / `backoffLimitPerIndex`.
    pub fn counts(&self) -> bool {
        !matches!(self, FailureAction::Ignore)
    }
}

/// The action of the first rule of `policy` that `pod`'s failure matches; `None` when no
/// rule matches (the failure counts). Rules with an action this controller does not know
/// are skipped, as Kubernetes asks of clients.
pub fn match_failure(policy: Option<&PodFailurePolicy>, pod: &Pod) -> Option<FailureAction> {
    let status = pod.status.as_ref()?;
    let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    for (index, rule) in policy?.rules.iter().enumerate() {
        let described = if let Some(req) = &rule.on_exit_codes {
            let containers = status
                .container_statuses
                .iter()
                .flatten()
                .chain(status.init_container_statuses.iter().flatten());
            containers.filter_map(|c| exit_code_match(c, req)).next()
        } else if let Some(patterns) = &rule.on_pod_conditions {
            status
                .conditions
                .iter()
                .flatten()
                .find(|c| {
                    patterns
                        .iter()
                        .any(|p| p.type_ == c.type_ && p.status == c.status)
                })
                .map(|c| format!("Pod {namespace}/{name} has condition {}", c.type_))
        } else {
            None
        };
        let Some(described) = described else {
            continue;
        };
        match rule.action.as_str() {
            "Ignore" => return Some(FailureAction::Ignore),
            "Count" => return Some(FailureAction::Count),
            "FailIndex" => return Some(FailureAction::FailIndex),
            "FailJob" => {
                let described = described.replace("{pod}", &format!("{namespace}/{name}"));
                return Some(FailureAction::FailJob(format!(
                    "{described} matching FailJob rule at index {index}"
                )));
            }
            _ => {}
        }
    }
    None
}

/// `Container <name> for pod {pod} failed with exit code <n>` when the container ended with
/// a non-zero code the requirement matches.
fn exit_code_match(
    container: &ContainerStatus,
    req: &PodFailurePolicyOnExitCodesRequirement,
) -> Option<String> {
    let code = container.state.as_ref()?.terminated.as_ref()?.exit_code;
    if code == 0
        || req
            .container_name
            .as_ref()
            .is_some_and(|n| *n != container.name)
    {
        return None;
    }
    let listed = req.values.contains(&code);
    let hit = match req.operator.as_str() {
        "In" => listed,
        "NotIn" => !listed,
        _ => false,
    };
    hit.then(|| {
        format!(
            "Container {} for pod {{pod}} failed with exit code {code}",
            container.name
        )
    })
}

/// The message of the `SuccessCriteriaMet` condition when a rule of `policy` holds for the
/// `completed` indexes of a Job with `completions`: `Matched rules at index <n>`.
pub fn match_success(
    policy: Option<&SuccessPolicy>,
    completions: i32,
    completed: &BTreeSet<i32>,
) -> Option<String> {
    if completed.is_empty() {
        return None;
    }
    for (index, rule) in policy?.rules.iter().enumerate() {
        let count = rule
            .succeeded_count
            .map(|c| usize::try_from(c).unwrap_or(0));
        let hit = if let Some(listed) = &rule.succeeded_indexes {
            let required: BTreeSet<i32> = parse_indexes(Some(listed))
                .into_iter()
                .filter(|i| (0..completions).contains(i))
                .collect();
            if required.is_empty() {
                continue;
            }
            let contained = required.intersection(completed).count();
            contained == required.len() || count.is_some_and(|c| contained >= c)
        } else {
            count.is_some_and(|c| completed.len() >= c)
        };
        if hit {
            return Some(format!("Matched rules at index {index}"));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(status: serde_json::Value) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "ns"},
            "status": status,
        }))
        .expect("a valid pod")
    }

    fn policy(rules: serde_json::Value) -> PodFailurePolicy {
        serde_json::from_value(json!({"rules": rules})).expect("a valid policy")
    }

    #[test]
    fn the_first_matching_rule_decides() {
        let failed = pod(json!({"phase": "Failed", "containerStatuses": [{
            "name": "c", "image": "i", "imageID": "", "ready": false, "restartCount": 0,
            "state": {"terminated": {"exitCode": 42}},
        }], "conditions": [{"type": "DisruptionTarget", "status": "True"}]}));
        let p = policy(json!([
            {"action": "Ignore", "onExitCodes": {"operator": "In", "values": [1]}},
            {"action": "FailJob", "onExitCodes": {"operator": "In", "values": [42]}},
        ]));
        assert_eq!(
            match_failure(Some(&p), &failed),
            Some(FailureAction::FailJob(
                "Container c for pod ns/p failed with exit code 42 matching FailJob rule at index 1"
                    .into()
            ))
        );
        let p = policy(json!([
            {"action": "Unknown", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
            {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
        ]));
        assert_eq!(
            match_failure(Some(&p), &failed),
            Some(FailureAction::Ignore)
        );
        let p = policy(
            json!([{"action": "Count", "onExitCodes": {"operator": "NotIn", "values": [42]}}]),
        );
        assert_eq!(match_failure(Some(&p), &failed), None);
    }

    #[test]
    fn success_rules_match_indexes_or_counts() {
        let done: BTreeSet<i32> = [0, 2].into_iter().collect();
        let p: SuccessPolicy = serde_json::from_value(json!({"rules": [
            {"succeededIndexes": "0-1"},
            {"succeededIndexes": "0-3", "succeededCount": 2},
        ]}))
        .expect("a valid policy");
        assert_eq!(
            match_success(Some(&p), 4, &done).as_deref(),
            Some("Matched rules at index 1")
        );
        let p: SuccessPolicy =
            serde_json::from_value(json!({"rules": [{"succeededCount": 3}]})).expect("valid");
        assert_eq!(match_success(Some(&p), 4, &done), None);
    }
}
