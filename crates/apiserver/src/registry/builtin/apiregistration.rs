//! apiregistration.k8s.io/v1 APIService: which server answers a group/version.
//!
//! kore serves every group/version itself, so the APIServices it keeps (one per served
//! group/version, written by `controllers::apiservices`) are *local*: `spec.service` is null
//! and `Available` is `True` with reason `Local`. A user may create other APIServices; they are
//! stored and validated, but kore proxies nothing to the services they name.

use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1 as apireg;
use serde_json::{Value, json};

use super::typed::Typed;
use crate::api::field::FieldError;
use crate::registry::strategy::{Decoded, Strategy};
use crate::registry::validation::NameRule;

/// The largest `groupPriorityMinimum` Kubernetes accepts.
const MAX_GROUP_PRIORITY: i64 = 20000;
/// The largest `versionPriority` Kubernetes accepts.
const MAX_VERSION_PRIORITY: i64 = 1000;

fn validate(obj: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let spec = &obj["spec"];
    let group = spec["group"].as_str().unwrap_or_default();
    let version = spec["version"].as_str().unwrap_or_default();
    let name = obj["metadata"]["name"].as_str().unwrap_or_default();
    if version.is_empty() {
        errs.push(FieldError::required("spec.version", ""));
    }
    let expected = format!("{version}.{group}");
    if !name.is_empty() && name != expected {
        errs.push(FieldError::invalid(
            "metadata.name",
            json!(name),
            format!("must be `spec.version+\".\"+spec.group`: {expected:?}"),
        ));
    }
    let group_priority = spec["groupPriorityMinimum"].as_i64().unwrap_or(0);
    if !(1..=MAX_GROUP_PRIORITY).contains(&group_priority) {
        errs.push(FieldError::invalid(
            "spec.groupPriorityMinimum",
            json!(group_priority),
            format!("must be positive and less than {MAX_GROUP_PRIORITY}"),
        ));
    }
    let version_priority = spec["versionPriority"].as_i64().unwrap_or(0);
    if !(1..=MAX_VERSION_PRIORITY).contains(&version_priority) {
        errs.push(FieldError::invalid(
            "spec.versionPriority",
            json!(version_priority),
            format!("must be positive and less than {MAX_VERSION_PRIORITY}"),
        ));
    }
    if spec["service"].is_null() {
        if spec["caBundle"].as_str().is_some_and(|s| !s.is_empty()) {
            errs.push(FieldError::invalid(
                "spec.caBundle",
                spec["caBundle"].clone(),
                "local APIServices may not have a caBundle",
            ));
        }
        if spec["insecureSkipTLSVerify"] == json!(true) {
            errs.push(FieldError::invalid(
                "spec.insecureSkipTLSVerify",
                json!(true),
                "local APIServices may not have insecureSkipTLSVerify",
            ));
        }
    } else if spec["insecureSkipTLSVerify"] == json!(true)
        && spec["caBundle"].as_str().is_some_and(|s| !s.is_empty())
    {
        errs.push(FieldError::invalid(
            "spec.insecureSkipTLSVerify",
            json!(true),
            "may not be true if caBundle is present",
        ));
    }
    errs
}

/// APIServices: a new one's status is empty until the server judges it; names are path
/// segments (the core group's is `v1.`).
pub(super) struct ApiServiceStrategy(Typed<apireg::APIService>);

/// The APIService strategy.
pub(super) fn api_service() -> ApiServiceStrategy {
    ApiServiceStrategy(Typed::new().initial_status(|| json!({})).validate(validate))
}

impl Strategy for ApiServiceStrategy {
    fn decode(&self, obj: Value) -> Result<Decoded, String> {
        self.0.decode(obj)
    }

    fn name_rule(&self) -> NameRule {
        NameRule::PathSegment
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        self.0.prepare_for_create(obj);
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        Strategy::validate(&self.0, obj)
    }
}
