//! A pod's `resize` subresource (Kubernetes 1.33, in-place resize): update and patch the pod,
//! of which only the containers' `resources` and `resizePolicy` change.
//!
//! As in Kubernetes (`podResizeStrategy`), the written pod is the stored one with, for each
//! container (and init container) of the same name, the new resources and resize policy;
//! everything else stays. Only `cpu` and `memory` may change, limits may not be removed, and
//! the pod's QoS class (BestEffort, Burstable, Guaranteed) may not change. No kubelet acts on
//! the new values here.

use serde_json::{Map, Value, json};

use crate::api::field::FieldError;

const LISTS: [&str; 2] = ["containers", "initContainers"];

/// The stored pod `old` with the containers' resources of `new`.
pub(super) fn narrow(new: &Value, old: &Value) -> Value {
    let mut pod = old.clone();
    if let Some(rv) = new.pointer("/metadata/resourceVersion") {
        pod["metadata"]["resourceVersion"] = rv.clone();
    }
    for key in LISTS {
        let wanted = new["spec"][key].as_array().cloned().unwrap_or_default();
        let Some(containers) = pod["spec"].get_mut(key).and_then(Value::as_array_mut) else {
            continue;
        };
        for c in containers.iter_mut() {
            let Some(w) = wanted.iter().find(|w| w["name"] == c["name"]) else {
                continue;
            };
            let Some(m) = c.as_object_mut() else { continue };
            for field in ["resources", "resizePolicy"] {
                match w.get(field).filter(|v| !v.is_null()) {
                    Some(v) => {
                        m.insert(field.into(), v.clone());
                    }
                    None => {
                        m.remove(field);
                    }
                }
            }
        }
    }
    pod
}

fn amounts(c: &Value, kind: &str) -> Map<String, Value> {
    c["resources"][kind]
        .as_object()
        .cloned()
        .unwrap_or_default()
}

/// The QoS class Kubernetes derives from the pod's requests and limits (`ComputePodQOS`),
/// comparing quantities by their text.
fn qos_class(pod: &Value) -> &'static str {
    let containers: Vec<&Value> = LISTS
        .iter()
        .flat_map(|k| pod["spec"][k].as_array().into_iter().flatten())
        .collect();
    let mut any = false;
    let mut guaranteed = true;
    for c in &containers {
        let requests = amounts(c, "requests");
        let limits = amounts(c, "limits");
        let tracked = |m: &Map<String, Value>, r: &str| m.get(r).is_some_and(|v| !v.is_null());
        for r in ["cpu", "memory"] {
            if tracked(&requests, r) || tracked(&limits, r) {
                any = true;
            }
            if !tracked(&limits, r) {
                guaranteed = false;
            }
            if tracked(&requests, r) && requests.get(r) != limits.get(r) {
                guaranteed = false;
            }
        }
    }
    match (any, guaranteed) {
        (false, _) => "BestEffort",
        (true, true) => "Guaranteed",
        (true, false) => "Burstable",
    }
}

/// The checks of an update through the subresource.
pub(super) fn validate(new: &Value, old: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for key in LISTS {
        let before = old["spec"][key].as_array().cloned().unwrap_or_default();
        for (i, c) in new["spec"][key]
            .as_array()
            .into_iter()
            .flatten()
            .enumerate()
        {
            let Some(was) = before.iter().find(|b| b["name"] == c["name"]) else {
                continue;
            };
            let path = format!("spec.{key}[{i}].resources");
            for kind in ["requests", "limits"] {
                let (now, then) = (amounts(c, kind), amounts(was, kind));
                let names: std::collections::BTreeSet<&String> =
                    now.keys().chain(then.keys()).collect();
                for r in names {
                    if now.get(r) != then.get(r) && r != "cpu" && r != "memory" {
                        errs.push(FieldError::forbidden(
                            format!("{path}.{kind}[{r}]"),
                            "only cpu and memory resources are mutable",
                        ));
                    }
                }
                if kind == "limits" {
                    for r in ["cpu", "memory"] {
                        if then.contains_key(r) && !now.contains_key(r) {
                            errs.push(FieldError::forbidden(
                                format!("{path}.limits[{r}]"),
                                "resource limits cannot be removed",
                            ));
                        }
                    }
                }
            }
        }
    }
    let (was, now) = (qos_class(old), qos_class(new));
    if was != now {
        errs.push(FieldError::invalid(
            "spec",
            json!(now),
            "Pod QOS Class may not change as a result of resizing",
        ));
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(requests: Value, limits: Value) -> Value {
        json!({"metadata": {"name": "p", "labels": {"a": "1"}},
            "spec": {"containers": [{"name": "c", "image": "i",
                "resources": {"requests": requests, "limits": limits}}]}})
    }

    #[test]
    fn only_resources_change_and_qos_holds() {
        let old = pod(json!({"cpu": "100m"}), json!({"cpu": "200m"}));
        let mut new = pod(json!({"cpu": "150m"}), json!({"cpu": "300m"}));
        new["metadata"]["labels"]["a"] = json!("2");
        new["spec"]["containers"][0]["image"] = json!("other");
        let out = narrow(&new, &old);
        assert_eq!(out["metadata"]["labels"]["a"], "1");
        assert_eq!(out["spec"]["containers"][0]["image"], "i");
        assert_eq!(
            out["spec"]["containers"][0]["resources"]["limits"]["cpu"],
            "300m"
        );
        assert!(validate(&out, &old).is_empty());
    }

    #[test]
    fn a_qos_change_or_a_removed_limit_is_refused() {
        let old = pod(json!({}), json!({}));
        let new = pod(json!({"memory": "40Mi"}), json!({}));
        let errs = validate(&narrow(&new, &old), &old);
        assert_eq!(
            errs[0].detail,
            "Pod QOS Class may not change as a result of resizing"
        );
        let old = pod(json!({"cpu": "1"}), json!({"cpu": "2", "memory": "1Gi"}));
        let new = pod(json!({"cpu": "1"}), json!({"cpu": "2"}));
        let errs = validate(&narrow(&new, &old), &old);
        assert_eq!(errs[0].field, "spec.containers[0].resources.limits[memory]");
    }
}
