//! Printers of policy/v1 PodDisruptionBudget, scheduling.k8s.io/v1 PriorityClass,
//! storage.k8s.io/v1 StorageClass, networking.k8s.io/v1 Ingress, IngressClass and NetworkPolicy,
//! and node.k8s.io/v1 RuntimeClass.

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

/// IngressClass columns.
pub(super) const INGRESS_CLASS: [Column; 4] = [
    NAME,
    shown("Controller", "The controller that implements the class."),
    shown("Parameters", "The class's parameters object."),
    AGE,
];

/// NetworkPolicy columns.
pub(super) const NETWORK_POLICY: [Column; 3] = [
    NAME,
    shown("Pod-Selector", "Pods the policy applies to."),
    AGE,
];

/// RuntimeClass columns.
pub(super) const RUNTIME_CLASS: [Column; 3] = [
    NAME,
    shown("Handler", "The container runtime handler."),
    AGE,
];

/// The IngressClass row; parameters as `Kind.group/name`, or `<none>`.
pub(super) fn ingress_class_cells(obj: &Value, now: i64) -> [Value; INGRESS_CLASS.len()] {
    let parameters = match at(obj, &["spec", "parameters"]) {
        Some(p) => {
            let kind = text(p, &["kind"]);
            let kind = match non_empty(p, &["apiGroup"]) {
                Some(group) => format!("{kind}.{group}"),
                None => kind.to_owned(),
            };
            format!("{kind}/{}", text(p, &["name"]))
        }
        None => "<none>".to_owned(),
    };
    [
        name(obj),
        Value::from(text(obj, &["spec", "controller"])),
        Value::from(parameters),
        age_cell(obj, now),
    ]
}

/// The NetworkPolicy row; an empty pod selector reads `<none>`.
pub(super) fn network_policy_cells(obj: &Value, now: i64) -> [Value; NETWORK_POLICY.len()] {
    let selector = super::apps::label_selector(at(obj, &["spec", "podSelector"]))
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "<none>".to_owned());
    [name(obj), Value::from(selector), age_cell(obj, now)]
}

/// The RuntimeClass row.
pub(super) fn runtime_class_cells(obj: &Value, now: i64) -> [Value; RUNTIME_CLASS.len()] {
    [
        name(obj),
        Value::from(text(obj, &["handler"])),
        age_cell(obj, now),
    ]
}
