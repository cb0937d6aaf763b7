//! The defaults Kubernetes' `SetDefaults_*` functions give the parts of a pod spec beyond its
//! top-level fields (`core.rs` `default_pod_spec` does those): volumes, probes, environment
//! field references, the deprecated `serviceAccount` field; and for pods alone (not templates)
//! requests defaulted from limits and the QoS class of the status.

use serde_json::{Map, Value, json};

use crate::registry::strategy::default_at;

/// The mode of files in secret, configMap, downwardAPI and projected volumes (0644).
const DEFAULT_MODE: i64 = 420;
/// How long a projected service account token lives unless the pod asks otherwise.
const TOKEN_EXPIRATION_SECONDS: i64 = 3600;

/// The defaults of volumes, probes and field references in `spec` (a pod spec, also inside a
/// template), and `serviceAccount` mirroring `serviceAccountName` as the v1 API serves them.
pub(super) fn default_pod_spec_parts(spec: &mut Value) {
    let Some(map) = spec.as_object_mut() else {
        return;
    };
    mirror_service_account(map);
    if let Some(volumes) = map.get_mut("volumes").and_then(Value::as_array_mut) {
        volumes.iter_mut().for_each(default_volume);
    }
    for list in ["containers", "initContainers", "ephemeralContainers"] {
        let Some(containers) = map.get_mut(list).and_then(Value::as_array_mut) else {
            continue;
        };
        for c in containers {
            for probe in ["livenessProbe", "readinessProbe", "startupProbe"] {
                if let Some(p) = c.get_mut(probe).filter(|p| p.is_object()) {
                    default_probe(p);
                }
            }
            if let Some(env) = c.get_mut("env").and_then(Value::as_array_mut) {
                for var in env {
                    if let Some(field) = var
                        .pointer_mut("/valueFrom/fieldRef")
                        .filter(|f| f.is_object())
                    {
                        default_at(field, &["apiVersion"], json!("v1"));
                    }
                }
            }
        }
    }
}

/// `serviceAccount` is the deprecated name of `serviceAccountName`: a spec that sets only the
/// old one gets the new one, and the v1 API serves the old one equal to the new one.
fn mirror_service_account(spec: &mut Map<String, Value>) {
    let name = match spec.get("serviceAccountName").and_then(Value::as_str) {
        Some(n) if !n.is_empty() => n.to_string(),
        _ => match spec.get("serviceAccount").and_then(Value::as_str) {
            Some(n) if !n.is_empty() => n.to_string(),
            _ => return,
        },
    };
    spec.insert("serviceAccountName".into(), json!(name));
    spec.insert("serviceAccount".into(), json!(name));
}

/// The source kinds a volume may have besides its name.
fn has_source(volume: &Value) -> bool {
    volume
        .as_object()
        .is_some_and(|m| m.iter().any(|(k, v)| k != "name" && !v.is_null()))
}

fn default_volume(volume: &mut Value) {
    if !volume.is_object() {
        return;
    }
    if !has_source(volume) {
        volume["emptyDir"] = json!({});
        return;
    }
    for source in ["secret", "configMap", "downwardAPI", "projected"] {
        if let Some(s) = volume.get_mut(source).filter(|s| s.is_object()) {
            default_at(s, &["defaultMode"], json!(DEFAULT_MODE));
        }
    }
    if let Some(items) = volume
        .pointer_mut("/downwardAPI/items")
        .and_then(Value::as_array_mut)
    {
        items.iter_mut().for_each(default_field_ref);
    }
    if let Some(sources) = volume
        .pointer_mut("/projected/sources")
        .and_then(Value::as_array_mut)
    {
        for s in sources {
            if let Some(token) = s.get_mut("serviceAccountToken").filter(|t| t.is_object()) {
                default_at(
                    token,
                    &["expirationSeconds"],
                    json!(TOKEN_EXPIRATION_SECONDS),
                );
            }
            if let Some(items) = s
                .pointer_mut("/downwardAPI/items")
                .and_then(Value::as_array_mut)
            {
                items.iter_mut().for_each(default_field_ref);
            }
        }
    }
}

fn default_field_ref(item: &mut Value) {
    if let Some(field) = item.get_mut("fieldRef").filter(|f| f.is_object()) {
        default_at(field, &["apiVersion"], json!("v1"));
    }
}

fn default_probe(probe: &mut Value) {
    default_at(probe, &["timeoutSeconds"], json!(1));
    default_at(probe, &["periodSeconds"], json!(10));
    default_at(probe, &["successThreshold"], json!(1));
    default_at(probe, &["failureThreshold"], json!(3));
    if let Some(get) = probe.get_mut("httpGet").filter(|g| g.is_object()) {
        default_at(get, &["path"], json!("/"));
        default_at(get, &["scheme"], json!("HTTP"));
    }
    if let Some(grpc) = probe.get_mut("grpc").filter(|g| g.is_object()) {
        default_at(grpc, &["service"], json!(""));
    }
}

/// Pods only (`SetDefaults_Pod`): a container that sets a limit but no request for a resource
/// requests its limit.
pub(super) fn default_requests_from_limits(spec: &mut Value) {
    for list in ["containers", "initContainers"] {
        let Some(containers) = spec.get_mut(list).and_then(Value::as_array_mut) else {
            continue;
        };
        for c in containers {
            let Some(limits) = c.pointer("/resources/limits").and_then(Value::as_object) else {
                continue;
            };
            let limits = limits.clone();
            if limits.is_empty() {
                continue;
            }
            let resources = &mut c["resources"];
            if !resources["requests"].is_object() {
                resources["requests"] = json!({});
            }
            for (name, quantity) in limits {
                default_at(&mut resources["requests"], &[name.as_str()], quantity);
            }
        }
    }
}

/// The QoS class of a pod spec as Kubernetes computes it: `Guaranteed` when every container
/// limits CPU and memory and requests what it limits, `BestEffort` when no container requests
/// or limits CPU or memory, `Burstable` otherwise.
pub(super) fn qos_class(spec: &Value) -> &'static str {
    let containers: Vec<&Value> = ["containers", "initContainers"]
        .iter()
        .filter_map(|l| spec[*l].as_array())
        .flatten()
        .collect();
    let compute = |m: &Value| -> Vec<(String, String)> {
        m.as_object()
            .map(|m| {
                m.iter()
                    .filter(|(k, _)| *k == "cpu" || *k == "memory")
                    .map(|(k, v)| (k.clone(), quantity_text(v)))
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut any = false;
    let mut guaranteed = true;
    for c in &containers {
        let requests = compute(&c["resources"]["requests"]);
        let limits = compute(&c["resources"]["limits"]);
        if !requests.is_empty() || !limits.is_empty() {
            any = true;
        }
        if limits.len() < 2 {
            guaranteed = false;
        }
        for (name, quantity) in &requests {
            if limits.iter().find(|(n, _)| n == name).map(|(_, q)| q) != Some(quantity) {
                guaranteed = false;
            }
        }
    }
    if !any {
        "BestEffort"
    } else if guaranteed {
        "Guaranteed"
    } else {
        "Burstable"
    }
}

fn quantity_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}
