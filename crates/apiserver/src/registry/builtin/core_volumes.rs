//! PersistentVolume and PersistentVolumeClaim (core/v1): Kubernetes' `SetDefaults_PersistentVolume`,
//! `SetDefaults_PersistentVolumeClaim` and the most common checks of `ValidatePersistentVolume(Claim)`.

use k8s_openapi::api::core::v1 as core;
use serde_json::{Value, json};

use super::typed::{Typed, immutable};
use crate::api::field::FieldError;
use crate::registry::strategy::default_at;

const ACCESS_MODES: [&str; 4] = [
    "ReadOnlyMany",
    "ReadWriteMany",
    "ReadWriteOnce",
    "ReadWriteOncePod",
];

const RECLAIM_POLICIES: [&str; 3] = ["Delete", "Recycle", "Retain"];

const VOLUME_MODES: [&str; 2] = ["Block", "Filesystem"];

fn check_access_modes(spec: &Value, path: &str, required: bool, errs: &mut Vec<FieldError>) {
    let modes = spec["accessModes"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    if modes.is_empty() && required {
        errs.push(FieldError::required(
            format!("{path}.accessModes"),
            "at least 1 access mode is required",
        ));
    }
    for mode in modes {
        let m = mode.as_str().unwrap_or_default();
        if !ACCESS_MODES.contains(&m) {
            errs.push(FieldError::not_supported(
                format!("{path}.accessModes"),
                json!(m),
                &ACCESS_MODES,
            ));
        }
    }
}

fn check_volume_mode(spec: &Value, path: &str, errs: &mut Vec<FieldError>) {
    if let Some(mode) = spec["volumeMode"].as_str()
        && !VOLUME_MODES.contains(&mode)
    {
        errs.push(FieldError::not_supported(
            format!("{path}.volumeMode"),
            json!(mode),
            &VOLUME_MODES,
        ));
    }
}

fn default_pv(obj: &mut Value) {
    default_at(
        obj,
        &["spec", "persistentVolumeReclaimPolicy"],
        json!("Retain"),
    );
    default_at(obj, &["spec", "volumeMode"], json!("Filesystem"));
}

fn validate_pv(obj: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let spec = &obj["spec"];
    check_access_modes(spec, "spec", true, &mut errs);
    check_volume_mode(spec, "spec", &mut errs);
    if spec["capacity"]["storage"].is_null() {
        errs.push(FieldError::required("spec.capacity", ""));
    }
    if let Some(policy) = spec["persistentVolumeReclaimPolicy"].as_str()
        && !RECLAIM_POLICIES.contains(&policy)
    {
        errs.push(FieldError::not_supported(
            "spec.persistentVolumeReclaimPolicy",
            json!(policy),
            &RECLAIM_POLICIES,
        ));
    }
    errs
}

fn validate_pv_update(new: &Value, old: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    immutable(new, old, &["spec", "volumeMode"], &mut errs);
    errs
}

/// PersistentVolumes start `Pending`, as Kubernetes' `PrepareForCreate` leaves them.
pub(super) fn persistent_volume() -> Typed<core::PersistentVolume> {
    Typed::new()
        .status_keeps_metadata(&[])
        .returns_object_on_delete()
        .defaults(default_pv)
        .initial_status(|| json!({"phase": "Pending"}))
        .validate(validate_pv)
        .validate_update(validate_pv_update)
}

fn default_pvc(obj: &mut Value) {
    default_at(obj, &["spec", "volumeMode"], json!("Filesystem"));
}

fn validate_pvc(obj: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let spec = &obj["spec"];
    check_access_modes(spec, "spec", true, &mut errs);
    check_volume_mode(spec, "spec", &mut errs);
    if spec["resources"]["requests"]["storage"].is_null() {
        errs.push(FieldError::required("spec.resources[storage]", ""));
    }
    errs
}

fn validate_pvc_update(new: &Value, old: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    // Only the requested size (and a few fields of bound claims) may change after creation.
    let strip = |obj: &Value| {
        let mut spec = obj["spec"].clone();
        if let Some(requests) = spec
            .get_mut("resources")
            .and_then(|r| r.get_mut("requests"))
            .and_then(Value::as_object_mut)
        {
            requests.remove("storage");
        }
        if let Some(map) = spec.as_object_mut() {
            map.remove("volumeAttributesClassName");
            if old["spec"]["volumeName"].as_str().is_none_or(str::is_empty) {
                map.remove("volumeName");
            }
        }
        spec
    };
    if strip(new) != strip(old) {
        errs.push(FieldError::forbidden(
            "spec",
            "spec is immutable after creation except resources.requests and \
             volumeAttributesClassName for bound claims",
        ));
    }
    errs
}

/// PersistentVolumeClaims start `Pending`.
pub(super) fn persistent_volume_claim() -> Typed<core::PersistentVolumeClaim> {
    Typed::new()
        .status_keeps_metadata(&[])
        .returns_object_on_delete()
        .defaults(default_pvc)
        .initial_status(|| json!({"phase": "Pending"}))
        .validate(validate_pvc)
        .validate_update(validate_pvc_update)
}
