//! policy/v1 PodDisruptionBudget and scheduling.k8s.io/v1 PriorityClass: the two kinds that
//! decide which pods may be disrupted or preempted.

use k8s_openapi::api::policy::v1 as policy;
use k8s_openapi::api::scheduling::v1 as scheduling;
use serde_json::{Value, json};

use super::typed::{Typed, immutable};
use crate::api::field::FieldError;
use crate::registry::strategy::default_at;

fn validate_pdb(obj: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let spec = &obj["spec"];
    if !spec["minAvailable"].is_null() && !spec["maxUnavailable"].is_null() {
        errs.push(FieldError::invalid(
            "spec",
            spec.clone(),
            "minAvailable and maxUnavailable cannot be both set",
        ));
    }
    for field in ["minAvailable", "maxUnavailable"] {
        match &spec[field] {
            Value::Number(n) if n.as_i64().is_some_and(|n| n < 0) => {
                errs.push(FieldError::invalid(
                    format!("spec.{field}"),
                    spec[field].clone(),
                    "must be greater than or equal to 0",
                ));
            }
            Value::String(s) if !is_percent(s) => errs.push(FieldError::invalid(
                format!("spec.{field}"),
                json!(s),
                "a valid percent string must be a numeric string followed by an ending '%' \
                 (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')",
            )),
            Value::String(s)
                if s.trim_end_matches('%')
                    .parse::<u64>()
                    .map_or(true, |p| p > 100) =>
            {
                errs.push(FieldError::invalid(
                    format!("spec.{field}"),
                    json!(s),
                    "must not be greater than 100%",
                ));
            }
            _ => {}
        }
    }
    if let Some(policy) = spec["unhealthyPodEvictionPolicy"].as_str()
        && !["IfHealthyBudget", "AlwaysAllow"].contains(&policy)
    {
        errs.push(FieldError::not_supported(
            "spec.unhealthyPodEvictionPolicy",
            json!(policy),
            &["AlwaysAllow", "IfHealthyBudget"],
        ));
    }
    errs
}

fn is_percent(s: &str) -> bool {
    s.strip_suffix('%')
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// PodDisruptionBudgets: a new budget's status counts nothing yet.
pub(super) fn pod_disruption_budget() -> Typed<policy::PodDisruptionBudget> {
    Typed::new()
        .status_keeps_metadata(&[])
        .generation()
        .initial_status(|| {
            json!({"disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0,
                   "expectedPods": 0})
        })
        .validate(validate_pdb)
}

/// The highest priority a user-defined PriorityClass may have (`HighestUserDefinablePriority`).
const HIGHEST_USER_PRIORITY: i64 = 1_000_000_000;

const PREEMPTION_POLICIES: [&str; 2] = ["PreemptLowerPriority", "Never"];

/// The system PriorityClasses every server has, as `(name, value, description)`: the only
/// names with the `system-` prefix that validation accepts (with exactly this value and not
/// as the global default), and they cannot be deleted.
pub const SYSTEM_PRIORITY_CLASSES: [(&str, i64, &str); 2] = [
    (
        "system-node-critical",
        2_000_001_000,
        "Used for system critical pods that must not be moved from their current node.",
    ),
    (
        "system-cluster-critical",
        2_000_000_000,
        "Used for system critical pods that must run in the cluster, but can be moved to another node if necessary.",
    ),
];

/// Why `name`/`value`/`global_default` is not one of the system classes, as Kubernetes words it.
fn not_system_class(name: &str, value: Option<i64>, global_default: bool) -> Option<String> {
    match SYSTEM_PRIORITY_CLASSES.iter().find(|(n, _, _)| *n == name) {
        None => Some(format!("{name} is not a known system priority class")),
        Some((_, v, _)) if value != Some(*v) => {
            Some(format!("value of {name} PriorityClass must be {v}"))
        }
        Some(_) if global_default => Some(format!(
            "globalDefault of {name} PriorityClass must be false"
        )),
        Some(_) => None,
    }
}

fn validate_priority_class(obj: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let name = obj["metadata"]["name"].as_str().unwrap_or_default();
    if name.starts_with("system-") {
        let global = obj["globalDefault"].as_bool().unwrap_or(false);
        if let Some(why) = not_system_class(name, obj["value"].as_i64(), global) {
            errs.push(FieldError::forbidden(
                "metadata.name",
                format!(
                    "priority class names with 'system-' prefix are reserved for system use only. error: {why}"
                ),
            ));
        }
    } else if let Some(value) = obj["value"].as_i64()
        && value > HIGHEST_USER_PRIORITY
    {
        errs.push(FieldError::forbidden(
            "value",
            format!("maximum allowed value of a user defined priority is {HIGHEST_USER_PRIORITY}"),
        ));
    }
    if let Some(policy) = obj["preemptionPolicy"].as_str()
        && !PREEMPTION_POLICIES.contains(&policy)
    {
        errs.push(FieldError::not_supported(
            "preemptionPolicy",
            json!(policy),
            &PREEMPTION_POLICIES,
        ));
    }
    errs
}

/// PriorityClasses: `preemptionPolicy` defaults to `PreemptLowerPriority`; value and policy are
/// immutable.
pub(super) fn priority_class() -> Typed<scheduling::PriorityClass> {
    Typed::new()
        .defaults(|obj| default_at(obj, &["preemptionPolicy"], json!("PreemptLowerPriority")))
        .validate(validate_priority_class)
        .refuse_delete(|name| {
            SYSTEM_PRIORITY_CLASSES
                .iter()
                .any(|(n, _, _)| *n == name)
                .then(|| "this is a system priority class and cannot be deleted".to_string())
        })
        .validate_update(|new, old| {
            let mut errs = Vec::new();
            // Kubernetes words this one as Forbidden, on the Go field name.
            if new["value"] != old["value"] {
                errs.push(FieldError::forbidden(
                    "Value",
                    "may not be changed in an update.",
                ));
            }
            immutable(new, old, &["preemptionPolicy"], &mut errs);
            errs
        })
}
