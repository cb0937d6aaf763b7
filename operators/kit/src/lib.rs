//! What a kore operator declares about itself, and the manifests that deploy it.
//!
//! Each operator crate returns an [`Operator`]: its name, the CustomResourceDefinitions it
//! serves (generated from its Rust types), the cluster-wide RBAC rules its code uses (and no
//! others), and sample objects. From that one description come the files under `deploy/`
//! (`kore manifests`), the RBAC the tests run each operator under, and what `kore up` installs,
//! so the three cannot drift apart.

pub mod install;
pub mod manifests;

use k8s_openapi::api::rbac::v1::PolicyRule;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

/// One operator, as deployment and tests need to know it.
#[derive(Clone, Debug)]
pub struct Operator {
    /// The operator's name (`configmap-sync`): its ServiceAccount, roles, Deployment and
    /// leader-election Lease are named after it.
    pub name: &'static str,
    /// The CRDs it serves.
    pub crds: Vec<CustomResourceDefinition>,
    /// What its code does to the API, cluster-wide, beyond leader election (which
    /// [`manifests::leader_election_rules`] grants in its own namespace).
    pub rules: Vec<PolicyRule>,
    /// Sample objects for `deploy/` and `kore up --demo`, applied in order.
    pub samples: Vec<serde_json::Value>,
}

/// A policy rule over `resources` of `group` with `verbs`.
pub fn rule(group: &str, resources: &[&str], verbs: &[&str]) -> PolicyRule {
    PolicyRule {
        api_groups: Some(vec![group.to_owned()]),
        resources: Some(resources.iter().map(|r| (*r).to_owned()).collect()),
        verbs: verbs.iter().map(|v| (*v).to_owned()).collect(),
        ..PolicyRule::default()
    }
}

/// The rule every operator needs to record events (events.k8s.io/v1, with series updates).
pub fn events_rule() -> PolicyRule {
    rule("events.k8s.io", &["events"], &["create", "patch"])
}

/// How an operator runs: what every operator's `register` takes.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Options {
    /// Watch only this namespace (default: all).
    pub namespace: Option<String>,
    /// Reconciles at once.
    pub max_concurrent_reconciles: usize,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            namespace: None,
            max_concurrent_reconciles: 4,
        }
    }
}

impl Options {
    /// Watch only `namespace`.
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = Some(namespace.into());
        self
    }

    /// Run `n` reconciles at once.
    pub fn max_concurrent_reconciles(mut self, n: usize) -> Self {
        self.max_concurrent_reconciles = n;
        self
    }
}
