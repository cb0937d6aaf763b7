//! sample-controller: for each `Foo`, a Deployment with the Foo's replicas, and the
//! Deployment's available replicas in the Foo's status. Wire-compatible with the Go
//! sample-controller.

pub mod types;

use kube::CustomResourceExt as _;

pub use types::{Foo, FooSpec, FooStatus};

/// The operator's name.
pub const NAME: &str = "sample-controller";

/// What deployment and tests need to know about the operator.
pub fn operator() -> kore_operator::Operator {
    kore_operator::Operator {
        name: NAME,
        crds: vec![Foo::crd()],
        rules: vec![kore_operator::events_rule()],
        samples: Vec::new(),
    }
}

/// How the operator runs.
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

/// Adds the operator's controllers to `manager`, reporting to `metrics` (which the caller
/// registers once in the manager's registry). They run when the manager runs, on the leader.
pub fn register(
    manager: &mut kore_runtime::Manager,
    metrics: &kore_runtime::metrics::Metrics,
    options: &Options,
) {
    // TODO(operator helper): the controllers.
    let _ = (manager, metrics, options);
}
