//! The objects that deploy an operator: ServiceAccount, ClusterRole and binding, a Role and
//! binding for leader election in its own namespace, and a Deployment.
//!
//! TODO(cli helper): ServiceAccount, ClusterRole, ClusterRoleBinding, Role, RoleBinding,
//! Deployment builders and the file layout under deploy/.

use k8s_openapi::api::rbac::v1::PolicyRule;

/// The rules leader election needs in the operator's namespace: its Lease.
pub fn leader_election_rules() -> Vec<PolicyRule> {
    vec![super::rule(
        "coordination.k8s.io",
        &["leases"],
        &["get", "create", "update"],
    )]
}
