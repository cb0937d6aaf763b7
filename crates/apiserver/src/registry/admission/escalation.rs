//! RBAC escalation prevention: a user may write a Role or ClusterRole only with rules they
//! hold themselves (or with the `escalate` verb on it), and a RoleBinding or
//! ClusterRoleBinding only to a role whose rules they hold (or with the `bind` verb on it).
//! Only cluster administrators may write an `aggregationRule`.
//!
//! Kubernetes checks this in the RBAC kinds' storage; kore runs it as the first validating
//! admission stage, where the object is known as it will be stored — for a patch, the
//! patched object — and the request's user is at hand.

use std::sync::Arc;

use serde_json::Value;

use super::{Attributes, Validating};
use crate::api::error::{ApiError, GroupResource};
use crate::api::user::User;
use crate::auth::escalation::{escalation_message, missing_rules};
use crate::auth::rbac::{
    Attributes as RbacAttributes, PolicyRule, RbacIndex, ResourceAttributes, RoleRef, Target,
    is_master,
};

/// The RBAC API group.
const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

/// The validating stage: see the [module docs](self).
#[derive(Debug)]
pub struct EscalationPrevention {
    rbac: Arc<RbacIndex>,
}

impl EscalationPrevention {
    /// Checks writes against the grants in `rbac`.
    pub fn new(rbac: Arc<RbacIndex>) -> Self {
        EscalationPrevention { rbac }
    }
}

impl Validating for EscalationPrevention {
    fn name(&self) -> &'static str {
        "RBACEscalationPrevention"
    }

    fn validate(&self, attrs: &Attributes<'_>, object: &Value) -> Result<(), ApiError> {
        let Some(user) = attrs.user else {
            return Ok(());
        };
        if attrs.res.group != RBAC_GROUP || is_master(user) {
            return Ok(());
        }
        let kind = attrs.res.kind.as_str();
        if !matches!(
            kind,
            "Role" | "ClusterRole" | "RoleBinding" | "ClusterRoleBinding"
        ) {
            return Ok(());
        }
        check(&self.rbac, user, attrs, kind, object)
    }
}

fn check(
    rbac: &RbacIndex,
    user: &User,
    attrs: &Attributes<'_>,
    kind: &str,
    obj: &Value,
) -> Result<(), ApiError> {
    let snapshot = rbac.snapshot();
    let namespace = if kind == "Role" || kind == "RoleBinding" {
        attrs.namespace.unwrap_or_default()
    } else {
        ""
    };
    let name = obj["metadata"]["name"]
        .as_str()
        .filter(|n| !n.is_empty())
        .unwrap_or(attrs.name)
        .to_string();
    let may = |verb: &str, resource: &str, target: &str| {
        let check = RbacAttributes {
            verb: verb.into(),
            target: Target::Resource(ResourceAttributes {
                group: RBAC_GROUP.into(),
                version: "v1".into(),
                resource: resource.into(),
                subresource: String::new(),
                namespace: namespace.into(),
                name: target.into(),
            }),
        };
        snapshot.authorize(user, &check).allowed
    };
    let refused = |why: String| forbidden_write(&attrs.res.plural, &name, why);
    let requested: Vec<PolicyRule> = match kind {
        "Role" | "ClusterRole" => {
            if may("escalate", &attrs.res.plural, attrs.name) {
                return Ok(());
            }
            let rules: Vec<PolicyRule> =
                serde_json::from_value(obj["rules"].clone()).unwrap_or_default();
            if obj.get("aggregationRule").is_some_and(|a| !a.is_null()) {
                let everything = serde_json::from_value::<Vec<PolicyRule>>(serde_json::json!([
                    {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
                    {"nonResourceURLs": ["*"], "verbs": ["*"]}
                ]))
                .unwrap_or_default();
                let (held, _) = snapshot.rules_for(user, namespace);
                if !missing_rules(&held, &everything).is_empty() {
                    return Err(refused(
                        "must have cluster-admin privileges to use the aggregationRule".into(),
                    ));
                }
            }
            rules
        }
        _ => {
            let role_ref: RoleRef =
                serde_json::from_value(obj["roleRef"].clone()).unwrap_or_default();
            let plural = if role_ref.kind == "Role" {
                "roles"
            } else {
                "clusterroles"
            };
            if may("bind", plural, &role_ref.name) {
                return Ok(());
            }
            match snapshot.role_ref_rules(&role_ref, namespace) {
                Ok(rules) => rules.to_vec(),
                Err(_) => {
                    return Err(ApiError::NotFound {
                        resource: GroupResource {
                            group: RBAC_GROUP.into(),
                            resource: role_ref.kind.to_ascii_lowercase(),
                        },
                        name: role_ref.name,
                    });
                }
            }
        }
    };
    let (held, errors) = snapshot.rules_for(user, namespace);
    let missing = missing_rules(&held, &requested);
    if missing.is_empty() {
        return Ok(());
    }
    Err(refused(escalation_message(
        &user.name,
        &user.groups,
        &missing,
        &errors,
    )))
}

/// `<res> "<name>" is forbidden: <why>` for a write of an RBAC object.
fn forbidden_write(plural: &str, name: &str, why: String) -> ApiError {
    let resource = GroupResource {
        group: RBAC_GROUP.into(),
        resource: plural.to_string(),
    };
    ApiError::Forbidden {
        message: format!(
            "{resource} {} is forbidden: {why}",
            crate::auth::rbac::quote(name)
        ),
        resource,
        name: Some(name.to_string()),
        causes: Vec::new(),
    }
}
