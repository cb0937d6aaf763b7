//! The conversion between the stored (autoscaling/v2) form of a HorizontalPodAutoscaler and
//! its autoscaling/v1 view, as `pkg/apis/autoscaling/v1/conversion.go` does it (see the parent
//! module's doc for what travels in which annotation).

use serde_json::{Map, Value, json};

use super::{cpu_metric, default_v2};

pub(super) const METRICS_ANNOTATION: &str = "autoscaling.alpha.kubernetes.io/metrics";
pub(super) const CURRENT_METRICS_ANNOTATION: &str =
    "autoscaling.alpha.kubernetes.io/current-metrics";
pub(super) const CONDITIONS_ANNOTATION: &str = "autoscaling.alpha.kubernetes.io/conditions";
pub(super) const BEHAVIOR_ANNOTATION: &str = "autoscaling.alpha.kubernetes.io/behavior";

fn take_annotation(obj: &mut Value, key: &str) -> Option<Value> {
    let annotations = obj["metadata"]
        .get_mut("annotations")
        .and_then(Value::as_object_mut)?;
    let parsed: Value = serde_json::from_str(annotations.get(key)?.as_str()?).ok()?;
    annotations.remove(key);
    if annotations.is_empty()
        && let Some(m) = obj["metadata"].as_object_mut()
    {
        m.remove("annotations");
    }
    Some(parsed)
}

fn set_annotation(obj: &mut Value, key: &str, value: &Value) {
    if !obj["metadata"]["annotations"].is_object() {
        obj["metadata"]["annotations"] = json!({});
    }
    obj["metadata"]["annotations"][key] = json!(value.to_string());
}

/// Copies the fields named in `keys` (pairs of from and to names) that are set.
fn copy(from: &Value, keys: &[(&str, &str)]) -> Map<String, Value> {
    let mut out = Map::new();
    for (f, t) in keys {
        if let Some(v) = from.get(*f).filter(|v| !v.is_null()) {
            out.insert((*t).to_string(), v.clone());
        }
    }
    out
}

/// Whether a v2 metric is the CPU utilization target v1 has a field for.
fn is_cpu_utilization(m: &Value) -> bool {
    m["type"] == "Resource"
        && m["resource"]["name"] == "cpu"
        && !m["resource"]["target"]["averageUtilization"].is_null()
}

/// One v2 `MetricSpec` in the v1 (annotation) spelling.
fn metric_spec_to_v1(m: &Value) -> Value {
    let mut out = Map::new();
    out.insert("type".into(), m["type"].clone());
    let target = |src: &Value| src["target"].clone();
    if let Some(r) = m.get("resource").filter(|v| v.is_object()) {
        let mut v = copy(r, &[("name", "name")]);
        v.extend(copy(
            &target(r),
            &[
                ("averageUtilization", "targetAverageUtilization"),
                ("averageValue", "targetAverageValue"),
            ],
        ));
        out.insert("resource".into(), Value::Object(v));
    }
    if let Some(r) = m.get("containerResource").filter(|v| v.is_object()) {
        let mut v = copy(r, &[("name", "name"), ("container", "container")]);
        v.extend(copy(
            &target(r),
            &[
                ("averageUtilization", "targetAverageUtilization"),
                ("averageValue", "targetAverageValue"),
            ],
        ));
        out.insert("containerResource".into(), Value::Object(v));
    }
    if let Some(p) = m.get("pods").filter(|v| v.is_object()) {
        let mut v = copy(
            &p["metric"],
            &[("name", "metricName"), ("selector", "selector")],
        );
        v.extend(copy(&target(p), &[("averageValue", "targetAverageValue")]));
        out.insert("pods".into(), Value::Object(v));
    }
    if let Some(o) = m.get("object").filter(|v| v.is_object()) {
        let mut v = Map::new();
        v.insert("target".into(), o["describedObject"].clone());
        v.extend(copy(
            &o["metric"],
            &[("name", "metricName"), ("selector", "selector")],
        ));
        v.extend(copy(
            &target(o),
            &[("value", "targetValue"), ("averageValue", "averageValue")],
        ));
        out.insert("object".into(), Value::Object(v));
    }
    if let Some(e) = m.get("external").filter(|v| v.is_object()) {
        let mut v = copy(
            &e["metric"],
            &[("name", "metricName"), ("selector", "metricSelector")],
        );
        v.extend(copy(
            &target(e),
            &[
                ("value", "targetValue"),
                ("averageValue", "targetAverageValue"),
            ],
        ));
        out.insert("external".into(), Value::Object(v));
    }
    Value::Object(out)
}

/// A v1 (annotation) `MetricSpec` back in the v2 spelling.
fn metric_spec_to_v2(m: &Value) -> Value {
    let mut out = Map::new();
    out.insert("type".into(), m["type"].clone());
    let resource_target = |r: &Value| {
        let mut t = Map::new();
        let utilization = r.get("targetAverageUtilization").filter(|v| !v.is_null());
        t.insert(
            "type".into(),
            json!(if utilization.is_some() {
                "Utilization"
            } else {
                "AverageValue"
            }),
        );
        t.extend(copy(
            r,
            &[
                ("targetAverageUtilization", "averageUtilization"),
                ("targetAverageValue", "averageValue"),
            ],
        ));
        Value::Object(t)
    };
    if let Some(r) = m.get("resource").filter(|v| v.is_object()) {
        let mut v = copy(r, &[("name", "name")]);
        v.insert("target".into(), resource_target(r));
        out.insert("resource".into(), Value::Object(v));
    }
    if let Some(r) = m.get("containerResource").filter(|v| v.is_object()) {
        let mut v = copy(r, &[("name", "name"), ("container", "container")]);
        v.insert("target".into(), resource_target(r));
        out.insert("containerResource".into(), Value::Object(v));
    }
    if let Some(p) = m.get("pods").filter(|v| v.is_object()) {
        let metric = copy(p, &[("metricName", "name"), ("selector", "selector")]);
        let mut target = copy(p, &[("targetAverageValue", "averageValue")]);
        target.insert("type".into(), json!("AverageValue"));
        out.insert("pods".into(), json!({"metric": metric, "target": target}));
    }
    if let Some(o) = m.get("object").filter(|v| v.is_object()) {
        let metric = copy(o, &[("metricName", "name"), ("selector", "selector")]);
        let mut target = copy(
            o,
            &[("targetValue", "value"), ("averageValue", "averageValue")],
        );
        let ty = if o.get("averageValue").is_none_or(Value::is_null) {
            "Value"
        } else {
            "AverageValue"
        };
        target.insert("type".into(), json!(ty));
        out.insert(
            "object".into(),
            json!({"describedObject": o["target"], "metric": metric, "target": target}),
        );
    }
    if let Some(e) = m.get("external").filter(|v| v.is_object()) {
        let metric = copy(e, &[("metricName", "name"), ("metricSelector", "selector")]);
        let mut target = copy(
            e,
            &[
                ("targetValue", "value"),
                ("targetAverageValue", "averageValue"),
            ],
        );
        let ty = if e.get("targetValue").is_none_or(Value::is_null) {
            "AverageValue"
        } else {
            "Value"
        };
        target.insert("type".into(), json!(ty));
        out.insert(
            "external".into(),
            json!({"metric": metric, "target": target}),
        );
    }
    Value::Object(out)
}

/// One v2 `MetricStatus` in the v1 (annotation) spelling.
fn metric_status_to_v1(m: &Value) -> Value {
    let mut out = Map::new();
    out.insert("type".into(), m["type"].clone());
    for (key, has_container) in [("resource", false), ("containerResource", true)] {
        if let Some(r) = m.get(key).filter(|v| v.is_object()) {
            let mut v = copy(r, &[("name", "name"), ("container", "container")]);
            if !has_container {
                v.remove("container");
            }
            v.extend(copy(
                &r["current"],
                &[
                    ("averageUtilization", "currentAverageUtilization"),
                    ("averageValue", "currentAverageValue"),
                ],
            ));
            out.insert(key.into(), Value::Object(v));
        }
    }
    if let Some(p) = m.get("pods").filter(|v| v.is_object()) {
        let mut v = copy(
            &p["metric"],
            &[("name", "metricName"), ("selector", "selector")],
        );
        v.extend(copy(
            &p["current"],
            &[("averageValue", "currentAverageValue")],
        ));
        out.insert("pods".into(), Value::Object(v));
    }
    if let Some(o) = m.get("object").filter(|v| v.is_object()) {
        let mut v = Map::new();
        v.insert("target".into(), o["describedObject"].clone());
        v.extend(copy(
            &o["metric"],
            &[("name", "metricName"), ("selector", "selector")],
        ));
        v.extend(copy(
            &o["current"],
            &[("value", "currentValue"), ("averageValue", "averageValue")],
        ));
        out.insert("object".into(), Value::Object(v));
    }
    if let Some(e) = m.get("external").filter(|v| v.is_object()) {
        let mut v = copy(
            &e["metric"],
            &[("name", "metricName"), ("selector", "metricSelector")],
        );
        v.extend(copy(
            &e["current"],
            &[
                ("value", "currentValue"),
                ("averageValue", "currentAverageValue"),
            ],
        ));
        out.insert("external".into(), Value::Object(v));
    }
    Value::Object(out)
}

/// A v1 (annotation) `MetricStatus` back in the v2 spelling.
fn metric_status_to_v2(m: &Value) -> Value {
    let mut out = Map::new();
    out.insert("type".into(), m["type"].clone());
    for key in ["resource", "containerResource"] {
        if let Some(r) = m.get(key).filter(|v| v.is_object()) {
            let mut v = copy(r, &[("name", "name"), ("container", "container")]);
            v.insert(
                "current".into(),
                Value::Object(copy(
                    r,
                    &[
                        ("currentAverageUtilization", "averageUtilization"),
                        ("currentAverageValue", "averageValue"),
                    ],
                )),
            );
            out.insert(key.into(), Value::Object(v));
        }
    }
    if let Some(p) = m.get("pods").filter(|v| v.is_object()) {
        let metric = copy(p, &[("metricName", "name"), ("selector", "selector")]);
        let current = copy(p, &[("currentAverageValue", "averageValue")]);
        out.insert("pods".into(), json!({"metric": metric, "current": current}));
    }
    if let Some(o) = m.get("object").filter(|v| v.is_object()) {
        let metric = copy(o, &[("metricName", "name"), ("selector", "selector")]);
        let current = copy(
            o,
            &[("currentValue", "value"), ("averageValue", "averageValue")],
        );
        out.insert(
            "object".into(),
            json!({"describedObject": o["target"], "metric": metric, "current": current}),
        );
    }
    if let Some(e) = m.get("external").filter(|v| v.is_object()) {
        let metric = copy(e, &[("metricName", "name"), ("metricSelector", "selector")]);
        let current = copy(
            e,
            &[
                ("currentValue", "value"),
                ("currentAverageValue", "averageValue"),
            ],
        );
        out.insert(
            "external".into(),
            json!({"metric": metric, "current": current}),
        );
    }
    Value::Object(out)
}

/// Renames the keys of a behavior between the JSON spelling and the Go field names the
/// annotation uses.
fn rename_behavior(v: &Value, to_go: bool) -> Value {
    const NAMES: [(&str, &str); 8] = [
        ("scaleUp", "ScaleUp"),
        ("scaleDown", "ScaleDown"),
        ("stabilizationWindowSeconds", "StabilizationWindowSeconds"),
        ("selectPolicy", "SelectPolicy"),
        ("policies", "Policies"),
        ("tolerance", "Tolerance"),
        ("type", "Type"),
        ("value", "Value"),
    ];
    let rename = |k: &str| -> String {
        if k == "periodSeconds" && to_go {
            return "PeriodSeconds".into();
        }
        if k == "PeriodSeconds" && !to_go {
            return "periodSeconds".into();
        }
        NAMES
            .iter()
            .find(|(json, go)| if to_go { *json == k } else { *go == k })
            .map(|(json, go)| if to_go { *go } else { *json })
            .unwrap_or(k)
            .to_string()
    };
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (rename(k), rename_behavior(v, to_go)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(|v| rename_behavior(v, to_go)).collect()),
        other => other.clone(),
    }
}

/// The v1 form of a stored (v2) object.
pub(super) fn v2_to_v1(obj: Value) -> Value {
    let Value::Object(mut top) = obj else {
        return obj;
    };
    let spec = top.remove("spec").unwrap_or(Value::Null);
    let status = top.remove("status").unwrap_or(Value::Null);
    top.insert("apiVersion".into(), json!("autoscaling/v1"));
    let mut obj = Value::Object(top);
    let metrics: Vec<Value> = spec["metrics"].as_array().cloned().unwrap_or_default();
    let mut v1_spec = copy(
        &spec,
        &[
            ("scaleTargetRef", "scaleTargetRef"),
            ("minReplicas", "minReplicas"),
            ("maxReplicas", "maxReplicas"),
        ],
    );
    if let Some(cpu) = metrics
        .iter()
        .find(|m| m["type"] == "Resource" && m["resource"]["name"] == "cpu")
        && let Some(u) = cpu["resource"]["target"]
            .get("averageUtilization")
            .filter(|v| !v.is_null())
    {
        v1_spec.insert("targetCPUUtilizationPercentage".into(), u.clone());
    }
    let others: Vec<Value> = metrics
        .iter()
        .filter(|m| !is_cpu_utilization(m))
        .map(metric_spec_to_v1)
        .collect();
    if !others.is_empty() {
        set_annotation(&mut obj, METRICS_ANNOTATION, &Value::Array(others));
    }
    let current: Vec<Value> = status["currentMetrics"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if !current.is_empty() {
        let v1: Vec<Value> = current.iter().map(metric_status_to_v1).collect();
        set_annotation(&mut obj, CURRENT_METRICS_ANNOTATION, &Value::Array(v1));
    }
    if let Some(conditions) = status["conditions"].as_array().filter(|c| !c.is_empty()) {
        set_annotation(
            &mut obj,
            CONDITIONS_ANNOTATION,
            &Value::Array(conditions.clone()),
        );
    }
    if let Some(behavior) = spec.get("behavior").filter(|b| b.is_object()) {
        set_annotation(
            &mut obj,
            BEHAVIOR_ANNOTATION,
            &rename_behavior(behavior, true),
        );
    }
    obj["spec"] = Value::Object(v1_spec);
    let mut v1_status = copy(
        &status,
        &[
            ("observedGeneration", "observedGeneration"),
            ("lastScaleTime", "lastScaleTime"),
        ],
    );
    v1_status.insert(
        "currentReplicas".into(),
        json!(status["currentReplicas"].as_i64().unwrap_or(0)),
    );
    v1_status.insert(
        "desiredReplicas".into(),
        json!(status["desiredReplicas"].as_i64().unwrap_or(0)),
    );
    if let Some(u) = current
        .iter()
        .filter(|m| m["type"] == "Resource" && m["resource"]["name"] == "cpu")
        .filter_map(|m| m["resource"]["current"].get("averageUtilization"))
        .rfind(|v| !v.is_null())
    {
        v1_status.insert("currentCPUUtilizationPercentage".into(), u.clone());
    }
    obj["status"] = Value::Object(v1_status);
    obj
}

/// The stored (v2) form of a v1 object, with v2's defaults.
pub(super) fn v1_to_v2(obj: Value) -> Value {
    let Value::Object(mut top) = obj else {
        return obj;
    };
    let spec = top.remove("spec").unwrap_or(Value::Null);
    let status = top.remove("status");
    top.insert("apiVersion".into(), json!("autoscaling/v2"));
    let mut obj = Value::Object(top);
    let mut v2_spec = copy(
        &spec,
        &[
            ("scaleTargetRef", "scaleTargetRef"),
            ("minReplicas", "minReplicas"),
            ("maxReplicas", "maxReplicas"),
        ],
    );
    let mut metrics: Vec<Value> = take_annotation(&mut obj, METRICS_ANNOTATION)
        .and_then(|v| v.as_array().cloned())
        .unwrap_or_default()
        .iter()
        .map(metric_spec_to_v2)
        .collect();
    if let Some(cpu) = spec["targetCPUUtilizationPercentage"].as_i64() {
        metrics.push(cpu_metric(cpu));
    }
    v2_spec.insert("metrics".into(), Value::Array(metrics));
    if let Some(behavior) = take_annotation(&mut obj, BEHAVIOR_ANNOTATION) {
        v2_spec.insert("behavior".into(), rename_behavior(&behavior, false));
    }
    obj["spec"] = Value::Object(v2_spec);
    let current = take_annotation(&mut obj, CURRENT_METRICS_ANNOTATION);
    let conditions = take_annotation(&mut obj, CONDITIONS_ANNOTATION);
    if let Some(status) = status.filter(Value::is_object) {
        let mut v2_status = copy(
            &status,
            &[
                ("observedGeneration", "observedGeneration"),
                ("lastScaleTime", "lastScaleTime"),
            ],
        );
        if let Some(n) = status["currentReplicas"].as_i64().filter(|n| *n != 0) {
            v2_status.insert("currentReplicas".into(), json!(n));
        }
        v2_status.insert(
            "desiredReplicas".into(),
            json!(status["desiredReplicas"].as_i64().unwrap_or(0)),
        );
        match (current, status["currentCPUUtilizationPercentage"].as_i64()) {
            (Some(Value::Array(c)), _) => {
                let c: Vec<Value> = c.iter().map(metric_status_to_v2).collect();
                v2_status.insert("currentMetrics".into(), Value::Array(c));
            }
            (_, Some(u)) => {
                v2_status.insert(
                    "currentMetrics".into(),
                    json!([{"type": "Resource", "resource": {"name": "cpu",
                            "current": {"averageUtilization": u}}}]),
                );
            }
            _ => {}
        }
        if let Some(Value::Array(c)) = conditions {
            v2_status.insert("conditions".into(), Value::Array(c));
        }
        obj["status"] = Value::Object(v2_status);
    }
    default_v2(&mut obj);
    obj
}
