//! configmap-sync: keeps a ConfigMap copied from a source namespace into destination
//! namespaces, as the `ConfigMapSync` custom resource asks.

pub mod types;

use kube::CustomResourceExt as _;

pub use types::{ConfigMapSync, ConfigMapSyncSpec, ConfigMapSyncStatus, ConflictPolicy};

/// The operator's name.
pub const NAME: &str = "configmap-sync";

/// What deployment and tests need to know about the operator.
pub fn operator() -> kore_operator::Operator {
    kore_operator::Operator {
        name: NAME,
        crds: vec![ConfigMapSync::crd()],
        rules: vec![kore_operator::events_rule()],
        samples: Vec::new(),
    }
}
