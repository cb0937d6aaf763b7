//! DefaultTolerationSeconds admission: a pod created without a toleration of the
//! `node.kubernetes.io/not-ready` (or `unreachable`) `NoExecute` taint gets one for 300
//! seconds, so that it is evicted five minutes after its node fails, not at once.

use serde_json::{Value, json};

use super::pods::is_pod_create;
use super::{Attributes, Mutating};
use crate::api::error::ApiError;

/// The taints tolerated by default.
pub const DEFAULT_TOLERATED: [&str; 2] = [
    "node.kubernetes.io/not-ready",
    "node.kubernetes.io/unreachable",
];
/// For how long (`--default-not-ready-toleration-seconds`, `--default-unreachable-toleration-seconds`).
pub const DEFAULT_TOLERATION_SECONDS: i64 = 300;

/// The mutating stage: see the [module docs](self).
#[derive(Debug, Default)]
pub struct DefaultTolerationSeconds;

/// Whether `t` already tolerates the `NoExecute` taint `key` (an empty key with `Exists`
/// tolerates every taint; an empty effect every effect).
fn tolerates(t: &Value, key: &str) -> bool {
    let k = t["key"].as_str().unwrap_or_default();
    let effect = t["effect"].as_str().unwrap_or_default();
    (k == key || k.is_empty()) && (effect == "NoExecute" || effect.is_empty())
}

impl Mutating for DefaultTolerationSeconds {
    fn name(&self) -> &'static str {
        "DefaultTolerationSeconds"
    }

    fn admit(&self, attrs: &Attributes<'_>, pod: &mut Value) -> Result<(), ApiError> {
        if !is_pod_create(attrs) || !pod["spec"].is_object() {
            return Ok(());
        }
        let current = pod["spec"]["tolerations"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let mut added = current.clone();
        for key in DEFAULT_TOLERATED {
            if !current.iter().any(|t| tolerates(t, key)) {
                added.push(
                    json!({"key": key, "operator": "Exists", "effect": "NoExecute",
                                  "tolerationSeconds": DEFAULT_TOLERATION_SECONDS}),
                );
            }
        }
        if added.len() != current.len() {
            pod["spec"]["tolerations"] = Value::Array(added);
        }
        Ok(())
    }
}
