//! Printers of core/v1 Node, PersistentVolume and PersistentVolumeClaim.

use serde_json::Value;

use super::*;

/// Node columns.
pub(super) const NODE: [Column; 10] = [
    NAME,
    shown(
        "Status",
        "Readiness of the node, and whether it takes new pods.",
    ),
    shown("Roles", "Roles from the node-role.kubernetes.io/ labels."),
    AGE,
    shown("Version", "Kubelet version."),
    wide("Internal-IP", "First internal address."),
    wide("External-IP", "First external address."),
    wide("OS-Image", "Operating system image."),
    wide("Kernel-Version", "Kernel version."),
    wide("Container-Runtime", "Container runtime and version."),
];

/// The label prefix that names a node role, and the older single-role label.
const ROLE_PREFIX: &str = "node-role.kubernetes.io/";
const ROLE_LABEL: &str = "kubernetes.io/role";

/// `Ready`, `NotReady` or `Unknown` from the Ready condition, with `SchedulingDisabled` added
/// for cordoned nodes.
fn node_status(obj: &Value) -> String {
    let ready = list(obj, &["status", "conditions"])
        .iter()
        .find(|c| text(c, &["type"]) == "Ready");
    let mut status = match ready.map(|c| text(c, &["status"])) {
        Some("True") => "Ready".to_owned(),
        Some(_) => "NotReady".to_owned(),
        None => "Unknown".to_owned(),
    };
    if flag(obj, &["spec", "unschedulable"]) {
        status.push_str(",SchedulingDisabled");
    }
    status
}

/// Roles from the labels, sorted and comma-joined, or `<none>`.
fn node_roles(obj: &Value) -> String {
    let mut roles: Vec<&str> = at(obj, &["metadata", "labels"])
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter_map(|(key, value)| {
            if let Some(role) = key.strip_prefix(ROLE_PREFIX) {
                Some(role).filter(|r| !r.is_empty())
            } else if key == ROLE_LABEL {
                value.as_str().filter(|v| !v.is_empty())
            } else {
                None
            }
        })
        .collect();
    roles.sort_unstable();
    roles.dedup();
    if roles.is_empty() {
        "<none>".to_owned()
    } else {
        roles.join(",")
    }
}

/// The first address of `kind`, or `<none>`.
fn address(obj: &Value, kind: &str) -> String {
    list(obj, &["status", "addresses"])
        .iter()
        .find(|a| text(a, &["type"]) == kind)
        .map_or_else(|| "<none>".to_owned(), |a| text(a, &["address"]).to_owned())
}

/// A node-info field, or `<unknown>` when empty.
fn info(obj: &Value, field: &str) -> Value {
    Value::from(non_empty(obj, &["status", "nodeInfo", field]).unwrap_or("<unknown>"))
}

/// `Name`, `Status`, `Roles`, `Age`, `Version`, and the wide node-info columns.
pub(super) fn node_cells(obj: &Value, now: i64) -> [Value; NODE.len()] {
    [
        name(obj),
        Value::from(node_status(obj)),
        Value::from(node_roles(obj)),
        age_cell(obj, now),
        Value::from(text(obj, &["status", "nodeInfo", "kubeletVersion"])),
        Value::from(address(obj, "InternalIP")),
        Value::from(address(obj, "ExternalIP")),
        info(obj, "osImage"),
        info(obj, "kernelVersion"),
        info(obj, "containerRuntimeVersion"),
    ]
}

/// PersistentVolume columns.
pub(super) const PERSISTENT_VOLUME: [Column; 11] = [
    NAME,
    shown("Capacity", "Size of the volume."),
    shown("Access Modes", "How the volume can be mounted."),
    shown("Reclaim Policy", "What happens when its claim is released."),
    shown("Status", "Phase of the volume."),
    shown("Claim", "The claim bound to it, as namespace/name."),
    shown("StorageClass", "Storage class of the volume."),
    shown(
        "VolumeAttributesClass",
        "Volume attributes class of the volume.",
    ),
    shown("Reason", "Why the volume is in its phase."),
    AGE,
    wide("VolumeMode", "Filesystem or Block."),
];

/// PersistentVolumeClaim columns.
pub(super) const PERSISTENT_VOLUME_CLAIM: [Column; 9] = [
    NAME,
    shown("Status", "Phase of the claim."),
    shown("Volume", "The volume bound to it."),
    shown("Capacity", "Size of the bound volume."),
    shown("Access Modes", "How the volume can be mounted."),
    shown("StorageClass", "Storage class of the claim."),
    shown(
        "VolumeAttributesClass",
        "Volume attributes class of the claim.",
    ),
    AGE,
    wide("VolumeMode", "Filesystem or Block."),
];

/// Access modes in kubectl's short form (`RWO,ROX`).
fn access_modes(modes: &[Value]) -> String {
    modes
        .iter()
        .filter_map(Value::as_str)
        .filter_map(|m| match m {
            "ReadWriteOnce" => Some("RWO"),
            "ReadOnlyMany" => Some("ROX"),
            "ReadWriteMany" => Some("RWX"),
            "ReadWriteOncePod" => Some("RWOP"),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// The phase, or `Terminating` once deletion started.
fn phase(obj: &Value) -> Value {
    if at(obj, &["metadata", "deletionTimestamp"]).is_some() {
        Value::from("Terminating")
    } else {
        Value::from(text(obj, &["status", "phase"]))
    }
}

/// `<unset>` for an empty class name, as Kubernetes prints it.
fn class_or_unset(obj: &Value, path: &[&str]) -> Value {
    Value::from(non_empty(obj, path).unwrap_or("<unset>"))
}

/// The cells of a PersistentVolume row.
pub(super) fn persistent_volume_cells(obj: &Value, now: i64) -> [Value; PERSISTENT_VOLUME.len()] {
    let claim = match non_empty(obj, &["spec", "claimRef", "name"]) {
        Some(claim) => format!("{}/{claim}", text(obj, &["spec", "claimRef", "namespace"])),
        None => String::new(),
    };
    [
        name(obj),
        Value::from(text(obj, &["spec", "capacity", "storage"])),
        Value::from(access_modes(list(obj, &["spec", "accessModes"]))),
        Value::from(text(obj, &["spec", "persistentVolumeReclaimPolicy"])),
        phase(obj),
        Value::from(claim),
        Value::from(text(obj, &["spec", "storageClassName"])),
        class_or_unset(obj, &["spec", "volumeAttributesClassName"]),
        Value::from(text(obj, &["status", "reason"])),
        age_cell(obj, now),
        Value::from(non_empty(obj, &["spec", "volumeMode"]).unwrap_or("<unset>")),
    ]
}

/// The cells of a PersistentVolumeClaim row; capacity and access modes are those of the bound
/// volume (status), empty until bound.
pub(super) fn persistent_volume_claim_cells(
    obj: &Value,
    now: i64,
) -> [Value; PERSISTENT_VOLUME_CLAIM.len()] {
    [
        name(obj),
        phase(obj),
        Value::from(text(obj, &["spec", "volumeName"])),
        Value::from(text(obj, &["status", "capacity", "storage"])),
        Value::from(access_modes(list(obj, &["status", "accessModes"]))),
        Value::from(text(obj, &["spec", "storageClassName"])),
        class_or_unset(obj, &["spec", "volumeAttributesClassName"]),
        age_cell(obj, now),
        Value::from(non_empty(obj, &["spec", "volumeMode"]).unwrap_or("<unset>")),
    ]
}
