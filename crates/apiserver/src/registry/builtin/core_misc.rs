//! The other core/v1 kinds without controllers here: ReplicationController, PodTemplate,
//! Endpoints, LimitRange and ResourceQuota.

use k8s_openapi::api::core::v1 as core;
use serde_json::{Value, json};

use super::core::validate_pod_spec;
use super::template::default_template;
use super::typed::Typed;
use crate::api::field::FieldError;
use crate::registry::strategy::default_at;

/// Kubernetes' `SetDefaults_ReplicationController`: the selector and the labels default to the
/// template's labels, replicas to 1.
fn default_rc(obj: &mut Value) {
    let template_labels = obj["spec"]["template"]["metadata"]["labels"].clone();
    if template_labels.as_object().is_some_and(|l| !l.is_empty()) {
        if obj["spec"]["selector"]
            .as_object()
            .is_none_or(serde_json::Map::is_empty)
        {
            obj["spec"]["selector"] = template_labels.clone();
        }
        if obj["metadata"]["labels"]
            .as_object()
            .is_none_or(serde_json::Map::is_empty)
        {
            obj["metadata"]["labels"] = template_labels;
        }
    }
    default_at(obj, &["spec", "replicas"], json!(1));
    default_template(&mut obj["spec"]["template"]);
}

fn validate_rc(obj: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let selector = obj["spec"]["selector"].as_object();
    match selector {
        Some(sel) if !sel.is_empty() => {
            let labels = obj["spec"]["template"]["metadata"]["labels"].as_object();
            let matches = sel
                .iter()
                .all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v));
            if !matches {
                errs.push(FieldError::invalid(
                    "spec.template.metadata.labels",
                    obj["spec"]["template"]["metadata"]["labels"].clone(),
                    "`selector` does not match template `labels`",
                ));
            }
        }
        _ => errs.push(FieldError::required("spec.selector", "")),
    }
    if let Some(r) = obj["spec"]["replicas"].as_i64()
        && r < 0
    {
        errs.push(FieldError::invalid(
            "spec.replicas",
            json!(r),
            "must be greater than or equal to 0",
        ));
    }
    if obj["spec"]["template"].is_null() {
        errs.push(FieldError::required("spec.template", ""));
    } else {
        validate_pod_spec(
            &obj["spec"]["template"]["spec"],
            "spec.template.spec",
            &mut errs,
        );
    }
    errs
}

/// ReplicationControllers.
pub(super) fn replication_controller() -> Typed<core::ReplicationController> {
    Typed::new()
        .status_keeps_metadata(&[])
        .generation()
        .defaults(default_rc)
        .initial_status(|| json!({"replicas": 0}))
        .validate(validate_rc)
        .field_labels(&["status.replicas"])
}

/// PodTemplates: the template gets the pod defaults.
pub(super) fn pod_template() -> Typed<core::PodTemplate> {
    Typed::new()
        .returns_object_on_delete()
        .defaults(|obj| default_template(&mut obj["template"]))
        .validate(|obj| {
            let mut errs = Vec::new();
            validate_pod_spec(&obj["template"]["spec"], "template.spec", &mut errs);
            errs
        })
}

/// Endpoints: ports default to TCP.
pub(super) fn endpoints() -> Typed<core::Endpoints> {
    Typed::new().defaults(|obj| {
        if let Some(subsets) = obj.get_mut("subsets").and_then(Value::as_array_mut) {
            for subset in subsets {
                if let Some(ports) = subset.get_mut("ports").and_then(Value::as_array_mut) {
                    for port in ports {
                        default_at(port, &["protocol"], json!("TCP"));
                    }
                }
            }
        }
    })
}

const LIMIT_TYPES: [&str; 3] = ["Container", "Pod", "PersistentVolumeClaim"];

/// Kubernetes' `SetDefaults_LimitRangeItem`, for `Container` limits: the default limit comes
/// from `max`, the default request from the default limit, then from `min`.
fn default_limit_range(obj: &mut Value) {
    let Some(limits) = obj
        .pointer_mut("/spec/limits")
        .and_then(Value::as_array_mut)
    else {
        return;
    };
    for limit in limits {
        if limit["type"].as_str() != Some("Container") {
            continue;
        }
        let fill = |limit: &mut Value, into: &str, from: &str| {
            let Some(source) = limit[from].as_object().cloned() else {
                return;
            };
            for (name, quantity) in source {
                if limit[into].get(&name).is_none() {
                    if !limit[into].is_object() {
                        limit[into] = json!({});
                    }
                    limit[into][name] = quantity;
                }
            }
        };
        fill(limit, "default", "max");
        fill(limit, "defaultRequest", "default");
        fill(limit, "defaultRequest", "min");
    }
}

/// LimitRanges: each limit has a known type; container defaults as Kubernetes fills them.
pub(super) fn limit_range() -> Typed<core::LimitRange> {
    Typed::new().defaults(default_limit_range).validate(|obj| {
        let mut errs = Vec::new();
        let limits = obj["spec"]["limits"].as_array().into_iter().flatten();
        for (i, limit) in limits.enumerate() {
            let kind = limit["type"].as_str().unwrap_or_default();
            if kind.is_empty() {
                errs.push(FieldError::required(format!("spec.limits[{i}].type"), ""));
            } else if !LIMIT_TYPES.contains(&kind) && !kind.contains('/') {
                errs.push(FieldError::not_supported(
                    format!("spec.limits[{i}].type"),
                    json!(kind),
                    &LIMIT_TYPES,
                ));
            }
        }
        errs
    })
}

/// ResourceQuotas: a new quota has an empty status until something computes usage.
pub(super) fn resource_quota() -> Typed<core::ResourceQuota> {
    Typed::new()
        .status_keeps_metadata(&[])
        .initial_status(|| json!({}))
}
