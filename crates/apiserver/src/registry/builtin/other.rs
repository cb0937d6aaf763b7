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

fn validate_binding(obj: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let role_ref = &obj["roleRef"];
    for f in ["kind", "name"] {
        if role_ref[f].as_str().is_none_or(str::is_empty) {
            errs.push(FieldError::required(format!("roleRef.{f}"), ""));
        }
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
    }
    errs
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

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        match self {
            RbacStrategy::RoleBinding | RbacStrategy::ClusterRoleBinding => validate_binding(obj),
            RbacStrategy::Role | RbacStrategy::ClusterRole => Vec::new(),
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
