//! The strategy of core/v1 Node: cluster-scoped, status kept apart from spec, no generation.
//!
//! Follows Kubernetes' `pkg/registry/core/node/strategy.go` and `ValidateNode`: a main-resource
//! update keeps the stored status (the registry does that for every kind with `/status`),
//! `allocatable` defaults to `capacity`, and taints are checked.

use k8s_openapi::api::core::v1 as core;
use serde_json::{Value, json};

use crate::api::field::FieldError;
use crate::registry::strategy::{Decoded, Strategy, decode_typed};

/// Effects a taint may have.
const TAINT_EFFECTS: [&str; 3] = ["NoSchedule", "PreferNoSchedule", "NoExecute"];

/// Nodes.
pub(super) struct NodeStrategy;

/// `status.allocatable` defaults to `status.capacity`, as Kubernetes' `SetDefaults_NodeStatus`.
fn default_node(obj: &mut Value) {
    let capacity = obj["status"]["capacity"].clone();
    if capacity.is_object() && obj["status"]["allocatable"].is_null() {
        obj["status"]["allocatable"] = capacity;
    }
}

fn validate_node(obj: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let taints = obj["spec"]["taints"].as_array().into_iter().flatten();
    let mut seen = std::collections::BTreeSet::new();
    for (i, taint) in taints.enumerate() {
        let key = taint["key"].as_str().unwrap_or_default();
        if key.is_empty() {
            errs.push(FieldError::required(format!("spec.taints[{i}].key"), ""));
        }
        let effect = taint["effect"].as_str().unwrap_or_default();
        if effect.is_empty() {
            errs.push(FieldError::required(format!("spec.taints[{i}].effect"), ""));
        } else if !TAINT_EFFECTS.contains(&effect) {
            errs.push(FieldError::not_supported(
                format!("spec.taints[{i}].effect"),
                json!(effect),
                &TAINT_EFFECTS,
            ));
        }
        if !seen.insert((key, effect)) {
            errs.push(FieldError::duplicate(
                format!("spec.taints[{i}]"),
                json!(format!("{key}:{effect}")),
            ));
        }
    }
    errs
}

impl Strategy for NodeStrategy {
    fn status_keeps_metadata(&self) -> Option<&'static [&'static str]> {
        Some(&[])
    }

    fn decode(&self, obj: Value) -> Result<Decoded, String> {
        decode_typed::<core::Node>(obj)
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        default_node(obj);
    }

    fn prepare_for_update(&self, new: &mut Value, _old: &Value) {
        default_node(new);
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        validate_node(obj)
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = validate_node(new);
        // podCIDR may be set once, never changed.
        let old_cidr = old["spec"]["podCIDR"].as_str().unwrap_or_default();
        if !old_cidr.is_empty() && new["spec"]["podCIDR"] != old["spec"]["podCIDR"] {
            errs.push(FieldError::forbidden(
                "spec.podCIDR",
                "node updates may not change podCIDR except from \"\" to valid",
            ));
        }
        errs
    }

    fn field_labels(&self) -> &'static [&'static str] {
        &["spec.unschedulable"]
    }
}
