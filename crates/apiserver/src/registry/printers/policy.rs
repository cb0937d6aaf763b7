//! Printers of policy/v1 PodDisruptionBudget, scheduling.k8s.io/v1 PriorityClass,
//! storage.k8s.io/v1 StorageClass and networking.k8s.io/v1 Ingress.

use serde_json::Value;

use super::*;

/// PodDisruptionBudget columns.
pub(super) const POD_DISRUPTION_BUDGET: [Column; 5] = [
    NAME,
    shown("Min Available", "Pods that must stay available."),
    shown("Max Unavailable", "Pods that may be unavailable."),
    counted("Allowed Disruptions", "Disruptions allowed now."),
    AGE,
];

/// PriorityClass columns.
pub(super) const PRIORITY_CLASS: [Column; 5] = [
    NAME,
    counted("Value", "The priority."),
    Column {
        kind: "boolean",
        ..shown(
            "Global-Default",
            "Whether pods without a class get this one.",
        )
    },
    AGE,
    shown(
        "PreemptionPolicy",
        "Whether pods of this class preempt others.",
    ),
];

/// StorageClass columns.
pub(super) const STORAGE_CLASS: [Column; 6] = [
    NAME,
    shown("Provisioner", "The volume plugin that provisions volumes."),
    shown("ReclaimPolicy", "What happens to released volumes."),
    shown("VolumeBindingMode", "When volumes are bound."),
    Column {
        kind: "boolean",
        ..shown("AllowVolumeExpansion", "Whether claims may grow.")
    },
    AGE,
];

/// Ingress columns.
pub(super) const INGRESS: [Column; 6] = [
    NAME,
    shown("Class", "The ingress class."),
    shown("Hosts", "Hosts the rules match."),
    shown("Address", "Addresses of the load balancer."),
    shown("Ports", "Ports served."),
    AGE,
];

/// An int-or-string field as text, or `N/A`.
fn int_or_string(obj: &Value, path: &[&str]) -> Value {
    match at(obj, path) {
        Some(Value::Number(n)) => Value::from(n.to_string()),
        Some(Value::String(s)) => Value::from(s.as_str()),
        _ => Value::from("N/A"),
    }
}

/// The PodDisruptionBudget row.
pub(super) fn pod_disruption_budget_cells(
    obj: &Value,
    now: i64,
) -> [Value; POD_DISRUPTION_BUDGET.len()] {
    [
        name(obj),
        int_or_string(obj, &["spec", "minAvailable"]),
        int_or_string(obj, &["spec", "maxUnavailable"]),
        Value::from(int(obj, &["status", "disruptionsAllowed"])),
        age_cell(obj, now),
    ]
}

/// The PriorityClass row.
pub(super) fn priority_class_cells(obj: &Value, now: i64) -> [Value; PRIORITY_CLASS.len()] {
    [
        name(obj),
        Value::from(int(obj, &["value"])),
        Value::from(flag(obj, &["globalDefault"])),
        age_cell(obj, now),
        Value::from(non_empty(obj, &["preemptionPolicy"]).unwrap_or("<unset>")),
    ]
}

/// The annotations that mark the default StorageClass.
const DEFAULT_CLASS_ANNOTATIONS: [&str; 2] = [
    "storageclass.kubernetes.io/is-default-class",
    "storageclass.beta.kubernetes.io/is-default-class",
];

/// The StorageClass row; the default class's name reads `name (default)`.
pub(super) fn storage_class_cells(obj: &Value, now: i64) -> [Value; STORAGE_CLASS.len()] {
    let is_default = DEFAULT_CLASS_ANNOTATIONS
        .iter()
        .any(|a| text(obj, &["metadata", "annotations", a]) == "true");
    let mut shown_name = text(obj, &["metadata", "name"]).to_owned();
    if is_default {
        shown_name.push_str(" (default)");
    }
    [
        Value::from(shown_name),
        Value::from(text(obj, &["provisioner"])),
        Value::from(non_empty(obj, &["reclaimPolicy"]).unwrap_or("Delete")),
        Value::from(non_empty(obj, &["volumeBindingMode"]).unwrap_or("Immediate")),
        Value::from(flag(obj, &["allowVolumeExpansion"])),
        age_cell(obj, now),
    ]
}

/// The Ingress row: hosts (`*` when no rule names one), load balancer addresses, and ports
/// (`80`, or `80, 443` with TLS).
pub(super) fn ingress_cells(obj: &Value, now: i64) -> [Value; INGRESS.len()] {
    let hosts: Vec<&str> = list(obj, &["spec", "rules"])
        .iter()
        .filter_map(|r| non_empty(r, &["host"]))
        .collect();
    let hosts = if hosts.is_empty() {
        "*".to_owned()
    } else {
        hosts.join(",")
    };
    let addresses: Vec<&str> = list(obj, &["status", "loadBalancer", "ingress"])
        .iter()
        .filter_map(|i| non_empty(i, &["ip"]).or_else(|| non_empty(i, &["hostname"])))
        .collect();
    let ports = if list(obj, &["spec", "tls"]).is_empty() {
        "80"
    } else {
        "80, 443"
    };
    [
        name(obj),
        Value::from(non_empty(obj, &["spec", "ingressClassName"]).unwrap_or("<none>")),
        Value::from(hosts),
        Value::from(addresses.join(",")),
        Value::from(ports),
        age_cell(obj, now),
    ]
}
