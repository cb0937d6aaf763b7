//! The objects that deploy an operator: a ServiceAccount, a ClusterRole with the operator's
//! rules and its binding, a Role and binding for leader election in the operator's own
//! namespace, and (TODO) a Deployment.

use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject,
};
use kube::api::ObjectMeta;

use crate::Operator;

/// The rules leader election needs in the operator's namespace: its Lease.
pub fn leader_election_rules() -> Vec<PolicyRule> {
    vec![crate::rule(
        "coordination.k8s.io",
        &["leases"],
        &["get", "create", "update"],
    )]
}

/// The RBAC objects an operator runs under.
#[derive(Clone, Debug)]
pub struct Rbac {
    /// The operator's identity.
    pub service_account: ServiceAccount,
    /// [`Operator::rules`], cluster-wide.
    pub cluster_role: ClusterRole,
    /// Grants the ClusterRole to the ServiceAccount.
    pub cluster_role_binding: ClusterRoleBinding,
    /// [`leader_election_rules`] in the operator's namespace.
    pub role: Role,
    /// Grants the Role to the ServiceAccount.
    pub role_binding: RoleBinding,
}

/// The name of the cluster-scoped objects of `operator` (prefixed, since cluster-wide names
/// are shared with everything else in the cluster).
pub fn cluster_role_name(operator: &Operator) -> String {
    format!("kore:{}", operator.name)
}

/// The labels every object of `operator` carries.
pub fn labels(operator: &Operator) -> std::collections::BTreeMap<String, String> {
    [
        ("app.kubernetes.io/name", operator.name),
        ("app.kubernetes.io/part-of", "kore"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect()
}

/// The RBAC objects of `operator` running in `namespace`.
pub fn rbac(operator: &Operator, namespace: &str) -> Rbac {
    let meta = |name: String, ns: Option<&str>| ObjectMeta {
        name: Some(name),
        namespace: ns.map(str::to_owned),
        labels: Some(labels(operator)),
        ..ObjectMeta::default()
    };
    let subject = Subject {
        kind: "ServiceAccount".to_owned(),
        name: operator.name.to_owned(),
        namespace: Some(namespace.to_owned()),
        ..Subject::default()
    };
    let role_ref = |kind: &str, name: String| RoleRef {
        api_group: "rbac.authorization.k8s.io".to_owned(),
        kind: kind.to_owned(),
        name,
    };
    let cluster_name = cluster_role_name(operator);
    let ns_name = format!("{}-leader-election", operator.name);
    Rbac {
        service_account: ServiceAccount {
            metadata: meta(operator.name.to_owned(), Some(namespace)),
            ..ServiceAccount::default()
        },
        cluster_role: ClusterRole {
            metadata: meta(cluster_name.clone(), None),
            rules: Some(operator.rules.clone()),
            ..ClusterRole::default()
        },
        cluster_role_binding: ClusterRoleBinding {
            metadata: meta(cluster_name.clone(), None),
            role_ref: role_ref("ClusterRole", cluster_name),
            subjects: Some(vec![subject.clone()]),
        },
        role: Role {
            metadata: meta(ns_name.clone(), Some(namespace)),
            rules: Some(leader_election_rules()),
        },
        role_binding: RoleBinding {
            metadata: meta(ns_name.clone(), Some(namespace)),
            role_ref: role_ref("Role", ns_name),
            subjects: Some(vec![subject]),
        },
    }
}
