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

/// StatefulSet columns.
pub(super) const STATEFUL_SET: [Column; 5] = [
    NAME,
    shown("Ready", "Ready replicas out of desired replicas."),
    AGE,
    CONTAINERS,
    IMAGES,
];

/// DaemonSet columns.
pub(super) const DAEMON_SET: [Column; 11] = [
    NAME,
    counted("Desired", "Nodes that should run the daemon pod."),
    counted("Current", "Nodes that run it."),
    counted("Ready", "Nodes where it is ready."),
    counted("Up-to-date", "Nodes running the latest template."),
    counted("Available", "Nodes where it is available."),
    shown("Node Selector", "Labels a node needs to run the pod."),
    AGE,
    CONTAINERS,
    IMAGES,
    WORKLOAD_SELECTOR,
];

/// ControllerRevision columns.
pub(super) const CONTROLLER_REVISION: [Column; 4] = [
    NAME,
    shown("Controller", "The owning controller, as kind.group/name."),
    counted("Revision", "Revision number."),
    AGE,
];

/// ReplicationController columns (core/v1, printed as the workloads here are).
pub(super) const REPLICATION_CONTROLLER: [Column; 8] = [
    NAME,
    counted("Desired", "Replicas asked for."),
    counted("Current", "Replicas that exist."),
    counted("Ready", "Replicas that are ready."),
    AGE,
    CONTAINERS,
    IMAGES,
    WORKLOAD_SELECTOR,
];

/// `Name`, `Ready`, `Age`, `Containers`, `Images`.
pub(super) fn stateful_set_cells(obj: &Value, now: i64) -> [Value; STATEFUL_SET.len()] {
    let (containers, images) = template_containers(obj);
    [
        name(obj),
        Value::from(format!(
            "{}/{}",
            int(obj, &["status", "readyReplicas"]),
            int(obj, &["spec", "replicas"])
        )),
        age_cell(obj, now),
        Value::from(containers),
        Value::from(images),
    ]
}

/// A string map as `k=v` pairs sorted by key, or `<none>`.
fn format_labels(map: Option<&Value>) -> String {
    let mut pairs: Vec<String> = map
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
        .collect();
    pairs.sort_unstable();
    if pairs.is_empty() {
        "<none>".to_owned()
    } else {
        pairs.join(",")
    }
}

/// The selector cell of workloads printed with `<none>` for an empty selector.
fn selector_or_none(obj: &Value) -> String {
    match label_selector(at(obj, &["spec", "selector"])) {
        None => "<invalid>".to_owned(),
        Some(s) if s.is_empty() => "<none>".to_owned(),
        Some(s) => s,
    }
}

/// The DaemonSet row.
pub(super) fn daemon_set_cells(obj: &Value, now: i64) -> [Value; DAEMON_SET.len()] {
    let (containers, images) = template_containers(obj);
    [
        name(obj),
        Value::from(int(obj, &["status", "desiredNumberScheduled"])),
        Value::from(int(obj, &["status", "currentNumberScheduled"])),
        Value::from(int(obj, &["status", "numberReady"])),
        Value::from(int(obj, &["status", "updatedNumberScheduled"])),
        Value::from(int(obj, &["status", "numberAvailable"])),
        Value::from(format_labels(at(
            obj,
            &["spec", "template", "spec", "nodeSelector"],
        ))),
        age_cell(obj, now),
        Value::from(containers),
        Value::from(images),
        Value::from(selector_or_none(obj)),
    ]
}

/// `Name`, `Controller` (`statefulset.apps/web`, or `<none>`), `Revision`, `Age`.
pub(super) fn controller_revision_cells(
    obj: &Value,
    now: i64,
) -> [Value; CONTROLLER_REVISION.len()] {
    let controller = list(obj, &["metadata", "ownerReferences"])
        .iter()
        .find(|r| flag(r, &["controller"]))
        .map_or_else(
            || "<none>".to_owned(),
            |r| {
                let group = text(r, &["apiVersion"])
                    .rsplit_once('/')
                    .map_or("", |(g, _)| g);
                let kind = text(r, &["kind"]).to_ascii_lowercase();
                let kind = if group.is_empty() {
                    kind
                } else {
                    format!("{kind}.{group}")
                };
                format!("{kind}/{}", text(r, &["name"]))
            },
        );
    [
        name(obj),
        Value::from(controller),
        Value::from(int(obj, &["revision"])),
        age_cell(obj, now),
    ]
}

/// The ReplicationController row; its selector is a plain label map.
pub(super) fn replication_controller_cells(
    obj: &Value,
    now: i64,
) -> [Value; REPLICATION_CONTROLLER.len()] {
    let (containers, images) = template_containers(obj);
    [
        name(obj),
        Value::from(int(obj, &["spec", "replicas"])),
        Value::from(int(obj, &["status", "replicas"])),
        Value::from(int(obj, &["status", "readyReplicas"])),
        age_cell(obj, now),
        Value::from(containers),
        Value::from(images),
        Value::from(format_labels(at(obj, &["spec", "selector"]))),
    ]
}
