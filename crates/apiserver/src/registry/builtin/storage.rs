//! storage.k8s.io/v1: StorageClass, CSIDriver, CSINode, VolumeAttachment, CSIStorageCapacity.

use k8s_openapi::api::storage::v1 as storage;
use serde_json::{Value, json};

use super::typed::{Typed, immutable};
use crate::api::field::FieldError;
use crate::api::validation::{is_subdomain, qualified_name_errors};
use crate::registry::strategy::default_at;

const BINDING_MODES: [&str; 2] = ["Immediate", "WaitForFirstConsumer"];

/// StorageClasses: Kubernetes' `SetDefaults_StorageClass` (reclaim `Delete`, binding
/// `Immediate`); provisioner required; provisioner, parameters, reclaim policy and binding mode
/// immutable.
pub(super) fn storage_class() -> Typed<storage::StorageClass> {
    Typed::new()
        .returns_object_on_delete()
        .defaults(|obj| {
            default_at(obj, &["reclaimPolicy"], json!("Delete"));
            default_at(obj, &["volumeBindingMode"], json!("Immediate"));
        })
        .validate(|obj| {
            let mut errs = Vec::new();
            validate_driver_name(
                obj["provisioner"].as_str().unwrap_or_default(),
                "provisioner",
                &mut errs,
            );
            if let Some(policy) = obj["reclaimPolicy"].as_str()
                && !["Delete", "Retain"].contains(&policy)
            {
                errs.push(FieldError::not_supported(
                    "reclaimPolicy",
                    json!(policy),
                    &["Delete", "Retain"],
                ));
            }
            if let Some(mode) = obj["volumeBindingMode"].as_str()
                && !BINDING_MODES.contains(&mode)
            {
                errs.push(FieldError::not_supported(
                    "volumeBindingMode",
                    json!(mode),
                    &BINDING_MODES,
                ));
            }
            errs
        })
        .validate_update(|new, old| {
            let mut errs = Vec::new();
            for field in [
                "provisioner",
                "parameters",
                "reclaimPolicy",
                "volumeBindingMode",
            ] {
                if new.get(field) != old.get(field) {
                    errs.push(FieldError::forbidden(
                        field,
                        "updates to ".to_owned() + field + " are forbidden.",
                    ));
                }
            }
            errs
        })
}

/// Checks a CSI driver name (a StorageClass's provisioner, a VolumeAttachment's attacher, a
/// CSINode driver): required and a qualified name, compared in lower case as Kubernetes does.
fn validate_driver_name(name: &str, path: &str, errs: &mut Vec<FieldError>) {
    if name.is_empty() {
        errs.push(FieldError::required(path, ""));
        return;
    }
    for why in qualified_name_errors(&name.to_ascii_lowercase()) {
        errs.push(FieldError::invalid(path, json!(name), why));
    }
}

const FS_GROUP_POLICIES: [&str; 3] = ["File", "None", "ReadWriteOnceWithFSType"];
const LIFECYCLE_MODES: [&str; 2] = ["Ephemeral", "Persistent"];

fn validate_csi_driver(obj: &Value) -> Vec<FieldError> {
    let spec = &obj["spec"];
    let mut errs = Vec::new();
    if let Some(p) = spec["fsGroupPolicy"].as_str()
        && !FS_GROUP_POLICIES.contains(&p)
    {
        errs.push(FieldError::not_supported(
            "spec.fsGroupPolicy",
            json!(p),
            &FS_GROUP_POLICIES,
        ));
    }
    let modes = spec["volumeLifecycleModes"]
        .as_array()
        .into_iter()
        .flatten();
    for (i, mode) in modes.enumerate() {
        let mode = mode.as_str().unwrap_or_default();
        if !LIFECYCLE_MODES.contains(&mode) {
            errs.push(FieldError::not_supported(
                format!("spec.volumeLifecycleModes[{i}]"),
                json!(mode),
                &LIFECYCLE_MODES,
            ));
        }
    }
    errs
}

/// CSIDrivers: Kubernetes' `SetDefaults_CSIDriver`; `attachRequired`, `podInfoOnMount`,
/// `volumeLifecycleModes`, `fsGroupPolicy` are immutable.
pub(super) fn csi_driver() -> Typed<storage::CSIDriver> {
    Typed::new()
        .defaults(|obj| {
            let spec = &mut obj["spec"];
            default_at(spec, &["attachRequired"], json!(true));
            default_at(spec, &["podInfoOnMount"], json!(false));
            default_at(spec, &["storageCapacity"], json!(false));
            default_at(spec, &["fsGroupPolicy"], json!("ReadWriteOnceWithFSType"));
            default_at(spec, &["requiresRepublish"], json!(false));
            default_at(spec, &["seLinuxMount"], json!(false));
            default_at(spec, &["volumeLifecycleModes"], json!(["Persistent"]));
        })
        .validate(validate_csi_driver)
        .validate_update(|new, old| {
            let mut errs = Vec::new();
            for field in [
                "attachRequired",
                "podInfoOnMount",
                "volumeLifecycleModes",
                "fsGroupPolicy",
            ] {
                immutable(new, old, &["spec", field], &mut errs);
            }
            errs
        })
}

/// CSINodes: each driver named once.
pub(super) fn csi_node() -> Typed<storage::CSINode> {
    Typed::new().validate(|obj| {
        let mut errs = Vec::new();
        let mut seen = std::collections::BTreeSet::new();
        let drivers = obj["spec"]["drivers"].as_array().into_iter().flatten();
        for (i, driver) in drivers.enumerate() {
            let name = driver["name"].as_str().unwrap_or_default();
            validate_driver_name(name, &format!("spec.drivers[{i}].name"), &mut errs);
            if !name.is_empty() && !seen.insert(name) {
                errs.push(FieldError::duplicate(
                    format!("spec.drivers[{i}].name"),
                    json!(name),
                ));
            }
            let node_id = driver["nodeID"].as_str().unwrap_or_default();
            if node_id.is_empty() {
                errs.push(FieldError::required(
                    format!("spec.drivers[{i}].nodeID"),
                    "",
                ));
            } else if node_id.len() > 192 {
                errs.push(FieldError::too_long(
                    format!("spec.drivers[{i}].nodeID"),
                    192,
                ));
            }
        }
        errs
    })
}

fn validate_attachment(obj: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    validate_driver_name(
        obj["spec"]["attacher"].as_str().unwrap_or_default(),
        "spec.attacher",
        &mut errs,
    );
    if obj["spec"]["nodeName"].as_str().is_none_or(str::is_empty) {
        errs.push(FieldError::required("spec.nodeName", ""));
    }
    let source = &obj["spec"]["source"];
    let given = ["persistentVolumeName", "inlineVolumeSpec"]
        .iter()
        .filter(|f| !source[**f].is_null())
        .count();
    if given != 1 {
        errs.push(FieldError::required(
            "spec.source",
            "must specify exactly one of inlineVolumeSpec and persistentVolumeName",
        ));
    }
    errs
}

/// VolumeAttachments: the spec is immutable.
pub(super) fn volume_attachment() -> Typed<storage::VolumeAttachment> {
    Typed::new()
        .initial_status(|| json!({"attached": false}))
        .validate(validate_attachment)
        .validate_update(|new, old| {
            let mut errs = Vec::new();
            immutable(new, old, &["spec"], &mut errs);
            errs
        })
}

/// CSIStorageCapacities: `storageClassName` is required and immutable.
pub(super) fn csi_storage_capacity() -> Typed<storage::CSIStorageCapacity> {
    Typed::new()
        .validate(|obj| {
            let mut errs = Vec::new();
            let class = obj["storageClassName"].as_str().unwrap_or_default();
            if class.is_empty() {
                errs.push(FieldError::required("storageClassName", ""));
            } else if !is_subdomain(class) {
                errs.push(FieldError::invalid(
                    "storageClassName",
                    json!(class),
                    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character",
                ));
            }
            for field in ["capacity", "maximumVolumeSize"] {
                if let Some(q) = obj[field].as_str()
                    && q.starts_with('-')
                {
                    errs.push(FieldError::invalid(
                        field,
                        json!(q),
                        "must be greater than or equal to 0",
                    ));
                }
            }
            errs
        })
        .validate_update(|new, old| {
            let mut errs = Vec::new();
            immutable(new, old, &["storageClassName"], &mut errs);
            errs
        })
}
