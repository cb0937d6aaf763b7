//! Running an operator in a test the way a cluster would: its CRDs installed, its generated
//! RBAC in place, and its requests made as its own ServiceAccount — then checking that the
//! RBAC it ships is exactly what its code needs.
//!
//! ```no_run
//! # async fn demo(op: kore_operator::Operator) -> anyhow::Result<()> {
//! let env = kore_testenv::TestEnv::start().await?;
//! let client = kore_testenv::operator::install(&env, &op, "kore-system").await?;
//! // ... run the operator with `client` and exercise everything it does ...
//! kore_testenv::operator::assert_least_privilege(&env, &op, "kore-system")?;
//! # Ok(()) }
//! ```

use std::collections::BTreeSet;
use std::fmt::Write as _;

use anyhow::Context;
use k8s_openapi::api::rbac::v1::PolicyRule;
use kore_operator::Operator;
use kore_operator::manifests::leader_election_rules;

use crate::TestEnv;

/// Installs `operator` into `namespace` as its manifests would
/// ([`kore_operator::install::operator`]: the namespace, its CRDs, waiting until each is
/// Established, and the RBAC of [`kore_operator::manifests::rbac`]). Returns a client that
/// acts as the operator's ServiceAccount, so every request it makes is authorized by that
/// RBAC.
pub async fn install(
    env: &TestEnv,
    operator: &Operator,
    namespace: &str,
) -> anyhow::Result<kube::Client> {
    kore_operator::install::operator(&env.client(), operator, namespace)
        .await
        .with_context(|| format!("installing {}", operator.name))?;
    env.service_account_client(namespace, operator.name).await
}

/// One permission: verb on group/resource[/subresource].
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Permission {
    /// The verb.
    pub verb: String,
    /// The API group (`""` for core).
    pub group: String,
    /// The plural resource, with `/subresource` when there is one.
    pub resource: String,
}

impl std::fmt::Display for Permission {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let group = if self.group.is_empty() {
            "core"
        } else {
            &self.group
        };
        write!(f, "{} {}/{}", self.verb, group, self.resource)
    }
}

/// What an operator's ServiceAccount was granted, did, and was refused.
#[derive(Clone, Debug, Default)]
pub struct PrivilegeReport {
    /// The account's user name.
    pub user: String,
    /// Granted by the operator's ClusterRole and leader-election Role.
    pub granted: BTreeSet<Permission>,
    /// Used and allowed at least once.
    pub used: BTreeSet<Permission>,
    /// Refused at least once.
    pub denied: BTreeSet<Permission>,
}

impl PrivilegeReport {
    /// Granted but never used.
    pub fn unused(&self) -> BTreeSet<Permission> {
        self.granted.difference(&self.used).cloned().collect()
    }
}

/// What `operator`'s ServiceAccount in `namespace` was granted, used and refused so far.
///
/// # Errors
/// When a rule uses a wildcard, or names resource names or non-resource URLs (operators'
/// rules must list exactly what they use).
pub fn privileges(
    env: &TestEnv,
    operator: &Operator,
    namespace: &str,
) -> anyhow::Result<PrivilegeReport> {
    let user = format!("system:serviceaccount:{namespace}:{}", operator.name);
    let mut report = PrivilegeReport {
        user: user.clone(),
        ..PrivilegeReport::default()
    };
    for rule in operator.rules.iter().chain(&leader_election_rules()) {
        expand(rule, &mut report.granted)?;
    }
    for s in env.server().authorizations() {
        if s.user != user {
            continue;
        }
        let permission = Permission {
            verb: s.verb,
            group: s.group,
            resource: if s.subresource.is_empty() {
                s.resource
            } else {
                format!("{}/{}", s.resource, s.subresource)
            },
        };
        if s.denied > 0 {
            report.denied.insert(permission.clone());
        }
        if s.allowed > 0 {
            report.used.insert(permission);
        }
    }
    Ok(report)
}

/// Adds every verb × group × resource of `rule` to `out`.
fn expand(rule: &PolicyRule, out: &mut BTreeSet<Permission>) -> anyhow::Result<()> {
    anyhow::ensure!(
        rule.resource_names.as_ref().is_none_or(Vec::is_empty)
            && rule.non_resource_urls.as_ref().is_none_or(Vec::is_empty),
        "operator rules name resources only, not resourceNames or nonResourceURLs: {rule:?}"
    );
    let groups = rule.api_groups.clone().unwrap_or_default();
    let resources = rule.resources.clone().unwrap_or_default();
    for verb in &rule.verbs {
        for group in &groups {
            for resource in &resources {
                anyhow::ensure!(
                    verb != "*" && group != "*" && resource != "*",
                    "operator rules must not use wildcards: {rule:?}"
                );
                out.insert(Permission {
                    verb: verb.clone(),
                    group: group.clone(),
                    resource: resource.clone(),
                });
            }
        }
    }
    Ok(())
}

/// Fails if `operator`'s ServiceAccount was ever refused a request.
pub fn assert_no_denials(
    env: &TestEnv,
    operator: &Operator,
    namespace: &str,
) -> anyhow::Result<()> {
    let report = privileges(env, operator, namespace)?;
    anyhow::ensure!(
        report.denied.is_empty(),
        "{} was refused: {}",
        report.user,
        list(&report.denied)
    );
    Ok(())
}

/// Fails if `operator`'s ServiceAccount was ever refused a request, or if its RBAC grants a
/// permission its code never used: the RBAC it ships is then exactly what it needs. Call it
/// after a test that exercised everything the operator does.
pub fn assert_least_privilege(
    env: &TestEnv,
    operator: &Operator,
    namespace: &str,
) -> anyhow::Result<()> {
    assert_no_denials(env, operator, namespace)?;
    let report = privileges(env, operator, namespace)?;
    let unused = report.unused();
    anyhow::ensure!(
        unused.is_empty(),
        "{} is granted what it never used: {} (used: {})",
        report.user,
        list(&unused),
        list(&report.used)
    );
    Ok(())
}

fn list(permissions: &BTreeSet<Permission>) -> String {
    let mut out = String::new();
    for (i, p) in permissions.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        let _ = write!(out, "{p}");
    }
    out
}
