//! LimitRanger admission (the defaulting half): a container created without a request or limit
//! for a resource gets the `defaultRequest` / `default` of its namespace's `Container`
//! LimitRanges, and the pod is annotated `kubernetes.io/limit-ranger` with what was set, as
//! Kubernetes words it (`LimitRanger plugin set: cpu, memory request for container c; …`).
//!
//! Not done: refusing pods outside a LimitRange's `min`/`max`/`maxLimitRequestRatio`, and the
//! `Pod` and `PersistentVolumeClaim` limit types.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::pods::{Reader, is_pod_create};
use super::{Attributes, Mutating};
use crate::api::error::ApiError;
use crate::storage::Store;

/// The annotation that records what the plugin set.
pub const ANNOTATION: &str = "kubernetes.io/limit-ranger";

/// The mutating stage: see the [module docs](self).
#[derive(Debug)]
pub struct LimitRanger {
    ranges: Reader,
}

impl LimitRanger {
    /// Reads LimitRanges from `store` under the collection prefix `ranges`.
    pub fn new(store: Arc<Store>, ranges: String) -> Self {
        LimitRanger {
            ranges: Reader::new(store, ranges),
        }
    }
}

/// The default requests and limits of the `Container` items of `ranges` (a later range wins a
/// resource both name, as the last write wins in Kubernetes' loop).
fn container_defaults(ranges: &[Value]) -> (Map<String, Value>, Map<String, Value>) {
    let mut requests = Map::new();
    let mut limits = Map::new();
    for range in ranges {
        for item in range["spec"]["limits"].as_array().into_iter().flatten() {
            if item["type"].as_str() != Some("Container") {
                continue;
            }
            if let Some(r) = item["defaultRequest"].as_object() {
                requests.extend(r.clone());
            }
            if let Some(l) = item["default"].as_object() {
                limits.extend(l.clone());
            }
        }
    }
    (requests, limits)
}

/// Fills what `c` lacks; returns the names of the requests and the limits it set.
fn merge(
    c: &mut Value,
    requests: &Map<String, Value>,
    limits: &Map<String, Value>,
) -> (Vec<String>, Vec<String>) {
    // A limit the user gave becomes the request of the same resource (SetDefaults_Pod, which
    // Kubernetes applies before admission); it is not a missing request.
    let given_limits: Vec<String> = c["resources"]["limits"]
        .as_object()
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default();
    if !c["resources"].is_object() {
        c["resources"] = json!({});
    }
    let mut set = (Vec::new(), Vec::new());
    for (name, quantity) in limits {
        if c["resources"]["limits"].get(name).is_none() {
            if !c["resources"]["limits"].is_object() {
                c["resources"]["limits"] = json!({});
            }
            c["resources"]["limits"][name] = quantity.clone();
            set.1.push(name.clone());
        }
    }
    for (name, quantity) in requests {
        if c["resources"]["requests"].get(name).is_none() && !given_limits.contains(name) {
            if !c["resources"]["requests"].is_object() {
                c["resources"]["requests"] = json!({});
            }
            c["resources"]["requests"][name] = quantity.clone();
            set.0.push(name.clone());
        }
    }
    set.0.sort();
    set.1.sort();
    set
}

impl Mutating for LimitRanger {
    fn name(&self) -> &'static str {
        "LimitRanger"
    }

    fn admit(&self, attrs: &Attributes<'_>, pod: &mut Value) -> Result<(), ApiError> {
        if !is_pod_create(attrs) || !pod["spec"].is_object() {
            return Ok(());
        }
        let Some(namespace) = attrs
            .namespace
            .or_else(|| pod["metadata"]["namespace"].as_str())
            .map(str::to_owned)
        else {
            return Ok(());
        };
        let ranges = self.ranges.list(Some(&namespace));
        let (requests, limits) = container_defaults(&ranges);
        if requests.is_empty() && limits.is_empty() {
            return Ok(());
        }
        let mut notes = Vec::new();
        for (list, what) in [
            ("containers", "container"),
            ("initContainers", "init container"),
        ] {
            let Some(containers) = pod["spec"].get_mut(list).and_then(Value::as_array_mut) else {
                continue;
            };
            for c in containers.iter_mut().filter(|c| c.is_object()) {
                let name = c["name"].as_str().unwrap_or_default().to_string();
                let (req, lim) = merge(c, &requests, &limits);
                if !req.is_empty() {
                    notes.push(format!("{} request for {what} {name}", req.join(", ")));
                }
                if !lim.is_empty() {
                    notes.push(format!("{} limit for {what} {name}", lim.join(", ")));
                }
            }
        }
        if !notes.is_empty() {
            if !pod["metadata"]["annotations"].is_object() {
                pod["metadata"]["annotations"] = json!({});
            }
            pod["metadata"]["annotations"][ANNOTATION] =
                json!(format!("LimitRanger plugin set: {}", notes.join("; ")));
        }
        Ok(())
    }
}
