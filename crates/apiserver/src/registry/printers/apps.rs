//! Printers of apps/v1 kinds (Deployment, ReplicaSet) and the pod-template columns workloads
//! share.

use serde_json::Value;

use super::*;

/// Container names of a pod template (wide).
pub(super) const CONTAINERS: Column = wide("Containers", "Names of the template's containers.");

/// Container images of a pod template (wide).
pub(super) const IMAGES: Column = wide("Images", "Images of the template's containers.");

/// Label selector of the pods a workload manages (wide).
pub(super) const WORKLOAD_SELECTOR: Column =
    wide("Selector", "Label selector of the managed pods.");

/// Deployment columns.
pub(super) const DEPLOYMENT: [Column; 8] = [
    NAME,
    shown("Ready", "Ready replicas out of desired replicas."),
    counted("Up-to-date", "Replicas running the latest template."),
    counted("Available", "Replicas available to serve."),
    AGE,
    CONTAINERS,
    IMAGES,
    WORKLOAD_SELECTOR,
];

/// ReplicaSet columns.
pub(super) const REPLICA_SET: [Column; 8] = [
    NAME,
    counted("Desired", "Replicas asked for."),
    counted("Current", "Replicas that exist."),
    counted("Ready", "Replicas that are ready."),
    AGE,
    CONTAINERS,
    IMAGES,
    WORKLOAD_SELECTOR,
];

// ---------------------------------------------------------------------------------------------
// Workloads
// ---------------------------------------------------------------------------------------------

/// `Name`, `Ready`, `Up-to-date`, `Available`, `Age`, `Containers`, `Images`, `Selector`.
///
/// An absent or empty selector renders as `""` and a malformed one as `<invalid>`, as Kubernetes'
/// Deployment printer does.
pub(super) fn deployment_cells(obj: &Value, now: i64) -> [Value; DEPLOYMENT.len()] {
    let ready = int(obj, &["status", "readyReplicas"]);
    let desired = int(obj, &["spec", "replicas"]);
    let (containers, images) = template_containers(obj);
    let selector =
        label_selector(at(obj, &["spec", "selector"])).unwrap_or_else(|| "<invalid>".to_owned());
    [
        name(obj),
        Value::from(format!("{ready}/{desired}")),
        Value::from(int(obj, &["status", "updatedReplicas"])),
        Value::from(int(obj, &["status", "availableReplicas"])),
        age_cell(obj, now),
        Value::from(containers),
        Value::from(images),
        Value::from(selector),
    ]
}

/// `Name`, `Desired`, `Current`, `Ready`, `Age`, `Containers`, `Images`, `Selector`.
///
/// An absent or empty selector renders as `<none>` and a malformed one as `<error>`, as
/// Kubernetes' ReplicaSet printer does.
pub(super) fn replica_set_cells(obj: &Value, now: i64) -> [Value; REPLICA_SET.len()] {
    let (containers, images) = template_containers(obj);
    let selector = match label_selector(at(obj, &["spec", "selector"])) {
        None => "<error>".to_owned(),
        Some(selector) if selector.is_empty() => "<none>".to_owned(),
        Some(selector) => selector,
    };
    [
        name(obj),
        Value::from(int(obj, &["spec", "replicas"])),
        Value::from(int(obj, &["status", "replicas"])),
        Value::from(int(obj, &["status", "readyReplicas"])),
        age_cell(obj, now),
        Value::from(containers),
        Value::from(images),
        Value::from(selector),
    ]
}

/// Comma-joined names and images of `spec.template.spec.containers`.
pub(super) fn template_containers(obj: &Value) -> (String, String) {
    let containers = list(obj, &["spec", "template", "spec", "containers"]);
    let joined = |field: &str| {
        containers
            .iter()
            .map(|container| text(container, &[field]))
            .collect::<Vec<_>>()
            .join(",")
    };
    (joined("name"), joined("image"))
}

/// A `LabelSelector` in Kubernetes' selector syntax: requirements sorted by key and joined with
/// commas, `key=value` for `matchLabels`, and `key in (a,b)`, `key notin (a,b)` (values sorted),
/// `key`, `!key` for `matchExpressions`.
///
/// `Some("")` for an absent or empty selector; `None` for one Kubernetes would reject (unknown
/// operator, `In`/`NotIn` without values, `Exists`/`DoesNotExist` with values, empty key, or a
/// non-string label value).
pub(super) fn label_selector(selector: Option<&Value>) -> Option<String> {
    let Some(selector) = selector else {
        return Some(String::new());
    };
    let mut requirements: Vec<(&str, String)> = Vec::new();
    if let Some(labels) = at(selector, &["matchLabels"]) {
        for (key, value) in labels.as_object()? {
            requirements.push((key, format!("{key}={}", value.as_str()?)));
        }
    }
    for expression in list(selector, &["matchExpressions"]) {
        let key = non_empty(expression, &["key"])?;
        let mut values = list(expression, &["values"])
            .iter()
            .map(Value::as_str)
            .collect::<Option<Vec<_>>>()?;
        values.sort_unstable();
        let requirement = match (text(expression, &["operator"]), values.is_empty()) {
            ("In", false) => format!("{key} in ({})", values.join(",")),
            ("NotIn", false) => format!("{key} notin ({})", values.join(",")),
            ("Exists", true) => key.to_owned(),
            ("DoesNotExist", true) => format!("!{key}"),
            _ => return None,
        };
        requirements.push((key, requirement));
    }
    requirements.sort_by(|a, b| a.0.cmp(b.0));
    Some(
        requirements
            .into_iter()
            .map(|(_, requirement)| requirement)
            .collect::<Vec<_>>()
            .join(","),
    )
}
