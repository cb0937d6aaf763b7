//! core/v1 ComponentStatus (deprecated since Kubernetes 1.19, still served by 1.33): a
//! read-only list of the control-plane components and their health.
//!
//! kore has no separate scheduler, controller manager or etcd, so the list is the one a
//! healthy Kubernetes server answers: `scheduler`, `controller-manager` and `etcd-0`, each
//! `Healthy` with message `ok`, written once at start (`controllers::componentstatuses`).
//! Every request gets Kubernetes' deprecation warning.

use k8s_openapi::api::core::v1::ComponentStatus;
use serde_json::{Value, json};

use crate::registry::strategy::{Decoded, Strategy, decode_typed};

/// The components listed, in Kubernetes' order.
pub(crate) const COMPONENTS: [&str; 3] = ["scheduler", "controller-manager", "etcd-0"];

/// A component's healthy status.
pub(crate) fn healthy(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ComponentStatus", "metadata": {"name": name},
           "conditions": [{"type": "Healthy", "status": "True", "message": "ok"}]})
}

/// ComponentStatuses: typed, with the deprecation warning.
pub(super) struct ComponentStatusStrategy;

impl Strategy for ComponentStatusStrategy {
    fn decode(&self, obj: Value) -> Result<Decoded, String> {
        decode_typed::<ComponentStatus>(obj)
    }

    fn deprecation_warning(&self) -> Option<String> {
        Some("v1 ComponentStatus is deprecated in v1.19+".into())
    }
}
