//! Strategies of Lease (coordination.k8s.io/v1) and the RBAC kinds.

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::rbac::v1 as rbac;
use serde_json::{Value, json};

use crate::registry::strategy::{Decoded, Strategy, decode_typed};
use crate::registry::validation::{FieldError, NameRule};

/// Leases: leader election's lock object.
pub(super) struct LeaseStrategy;

impl Strategy for LeaseStrategy {
    fn decode(&self, obj: Value) -> Result<Decoded, String> {
        decode_typed::<Lease>(obj)
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        if let Some(d) = obj["spec"]["leaseDurationSeconds"].as_i64()
            && d <= 0
        {
            errs.push(FieldError::invalid(
                "spec.leaseDurationSeconds",
                json!(d),
                "must be greater than 0",
            ));
        }
        errs
    }

    fn allow_create_on_update(&self) -> bool {
        true
    }
}

/// The four RBAC kinds: stored as given; names are path segments; `roleRef` is immutable.
pub(super) enum RbacStrategy {
    /// Role.
    Role,
    /// ClusterRole.
    ClusterRole,
    /// RoleBinding.
    RoleBinding,
    /// ClusterRoleBinding.
    ClusterRoleBinding,
}

const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

fn validate_binding(obj: &Value, cluster: bool) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let role_ref = &obj["roleRef"];
    for f in ["kind", "name"] {
        if role_ref[f].as_str().is_none_or(str::is_empty) {
            errs.push(FieldError::required(format!("roleRef.{f}"), ""));
        }
    }
    let group = role_ref["apiGroup"].as_str().unwrap_or_default();
    if group != RBAC_GROUP {
        errs.push(FieldError::not_supported(
            "roleRef.apiGroup",
            json!(group),
            &[RBAC_GROUP],
        ));
    }
    let kinds: &[&str] = if cluster {
        &["ClusterRole"]
    } else {
        &["Role", "ClusterRole"]
    };
    match role_ref["kind"].as_str() {
        Some(kind) if !kind.is_empty() && !kinds.contains(&kind) => {
            errs.push(FieldError::not_supported(
                "roleRef.kind",
                json!(kind),
                kinds,
            ));
        }
        _ => {}
    }
    for (i, s) in obj["subjects"].as_array().into_iter().flatten().enumerate() {
        let kind = s["kind"].as_str().unwrap_or_default();
        if !["User", "Group", "ServiceAccount"].contains(&kind) {
            errs.push(FieldError::not_supported(
                format!("subjects[{i}].kind"),
                json!(kind),
                &["ServiceAccount", "User", "Group"],
            ));
        }
        if s["name"].as_str().is_none_or(str::is_empty) {
            errs.push(FieldError::required(format!("subjects[{i}].name"), ""));
        }
        if cluster && kind == "ServiceAccount" && s["namespace"].as_str().is_none_or(str::is_empty)
        {
            errs.push(FieldError::required(format!("subjects[{i}].namespace"), ""));
        }
    }
    errs
}

/// Rule validation of Roles and ClusterRoles (spec §18.3).
fn validate_rules(obj: &Value, namespaced: bool) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let present = |rule: &Value, key: &str| rule[key].as_array().is_some_and(|a| !a.is_empty());
    for (i, rule) in obj["rules"].as_array().into_iter().flatten().enumerate() {
        if !present(rule, "verbs") {
            errs.push(FieldError::required(
                format!("rules[{i}].verbs"),
                "verbs must contain at least one value",
            ));
        }
        if present(rule, "nonResourceURLs") {
            let urls = rule["nonResourceURLs"].clone();
            if namespaced {
                errs.push(FieldError::invalid(
                    format!("rules[{i}].nonResourceURLs"),
                    urls,
                    "namespaced rules cannot apply to non-resource URLs",
                ));
            } else if ["apiGroups", "resources", "resourceNames"]
                .iter()
                .any(|k| present(rule, k))
            {
                errs.push(FieldError::invalid(
                    format!("rules[{i}].nonResourceURLs"),
                    urls,
                    "rules cannot apply to both regular resources and non-resource URLs",
                ));
            }
            continue;
        }
        if !present(rule, "apiGroups") {
            errs.push(FieldError::required(
                format!("rules[{i}].apiGroups"),
                "resource rules must supply at least one api group",
            ));
        }
        if !present(rule, "resources") {
            errs.push(FieldError::required(
                format!("rules[{i}].resources"),
                "resource rules must supply at least one resource",
            ));
        }
    }
    errs
}

/// Defaults `roleRef.apiGroup` and the `apiGroup` of User and Group subjects.
fn default_binding(obj: &mut Value) {
    if let Some(role_ref) = obj.get_mut("roleRef").and_then(Value::as_object_mut)
        && role_ref
            .get("apiGroup")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
    {
        role_ref.insert("apiGroup".into(), json!(RBAC_GROUP));
    }
    for s in obj
        .get_mut("subjects")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
    {
        let Some(s) = s.as_object_mut() else { continue };
        let kind = s.get("kind").and_then(Value::as_str).unwrap_or_default();
        if (kind == "User" || kind == "Group")
            && s.get("apiGroup")
                .and_then(Value::as_str)
                .is_none_or(str::is_empty)
        {
            s.insert("apiGroup".into(), json!(RBAC_GROUP));
        }
    }
}

impl Strategy for RbacStrategy {
    fn decode(&self, obj: Value) -> Result<Decoded, String> {
        match self {
            RbacStrategy::Role => decode_typed::<rbac::Role>(obj),
            RbacStrategy::ClusterRole => decode_typed::<rbac::ClusterRole>(obj),
            RbacStrategy::RoleBinding => decode_typed::<rbac::RoleBinding>(obj),
            RbacStrategy::ClusterRoleBinding => decode_typed::<rbac::ClusterRoleBinding>(obj),
        }
    }

    fn name_rule(&self) -> NameRule {
        NameRule::PathSegment
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        if matches!(
            self,
            RbacStrategy::RoleBinding | RbacStrategy::ClusterRoleBinding
        ) {
            default_binding(obj);
        }
    }

    fn prepare_for_update(&self, new: &mut Value, _old: &Value) {
        self.prepare_for_create(new);
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        match self {
            RbacStrategy::RoleBinding => validate_binding(obj, false),
            RbacStrategy::ClusterRoleBinding => validate_binding(obj, true),
            RbacStrategy::Role => validate_rules(obj, true),
            RbacStrategy::ClusterRole => validate_rules(obj, false),
        }
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = self.validate(new);
        if matches!(
            self,
            RbacStrategy::RoleBinding | RbacStrategy::ClusterRoleBinding
        ) && new["roleRef"] != old["roleRef"]
        {
            errs.push(FieldError::invalid(
                "roleRef",
                new["roleRef"].clone(),
                "cannot change roleRef",
            ));
        }
        errs
    }

    fn allow_create_on_update(&self) -> bool {
        true
    }
}

/// The review kinds (SelfSubjectAccessReview, TokenReview, ...): never stored, so nothing
/// beyond a JSON object is required of them here; `http/reviews.rs` answers them.
pub(super) struct ReviewStrategy;

impl Strategy for ReviewStrategy {
    fn decode(&self, obj: Value) -> Result<Decoded, String> {
        Ok(Decoded {
            object: obj,
            unknown_fields: Vec::new(),
        })
    }
}
