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
