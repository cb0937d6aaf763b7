//! autoscaling HorizontalPodAutoscaler: one storage (the `autoscaling/v2` form), served as
//! `autoscaling/v2` and `autoscaling/v1`.
//!
//! v1 knows only a CPU utilization target (`spec.targetCPUUtilizationPercentage`) and its
//! current value. Everything else a v2 object holds travels, in a v1 answer, in four
//! annotations, and comes back from them when a v1 object is written, so a v1 client that reads
//! and writes back an object loses nothing:
//!
//! - `autoscaling.alpha.kubernetes.io/metrics`: the metrics other than CPU utilization, as v1
//!   `MetricSpec`s (the `targetAverageValue`/`targetValue` spelling);
//! - `autoscaling.alpha.kubernetes.io/current-metrics`: `status.currentMetrics` as v1
//!   `MetricStatus`es;
//! - `autoscaling.alpha.kubernetes.io/conditions`: `status.conditions`;
//! - `autoscaling.alpha.kubernetes.io/behavior`: `spec.behavior`, with Go field names
//!   (`ScaleUp`, `StabilizationWindowSeconds`, ...) as Kubernetes writes it.
//!
//! Defaults are those of Kubernetes' autoscaling/v2: `minReplicas` 1, a CPU utilization target
//! of 80% when no metric is given, and a given `behavior` completed with the default scale-up and
//! scale-down rules. A new object's status is empty; the status subresource writes it.

use k8s_openapi::api::autoscaling::{v1, v2};
use serde_json::{Value, json};

use super::Def;

mod convert;

use super::typed::Typed;
use crate::api::field::FieldError;
use crate::registry::resource::Resource;
use crate::registry::strategy::{Decoded, Strategy, decode_typed, default_at};
#[cfg(test)]
use convert::{BEHAVIOR_ANNOTATION, CONDITIONS_ANNOTATION, METRICS_ANNOTATION};
use convert::{v1_to_v2, v2_to_v1};

const GROUP: &str = "autoscaling";
/// The CPU utilization target of an autoscaler that names no metric.
const DEFAULT_CPU_UTILIZATION: i64 = 80;
/// The longest stabilization window (one hour).
const MAX_STABILIZATION_SECONDS: i64 = 3600;
/// The longest period of a scaling policy (30 minutes).
const MAX_PERIOD_SECONDS: i64 = 1800;
const METRIC_TYPES: [&str; 5] = [
    "ContainerResource",
    "External",
    "Object",
    "Pods",
    "Resource",
];

/// The two served versions, v2 (the stored form) first.
pub(super) fn resources() -> Vec<Resource> {
    let def = |version: &str| {
        let strategy: std::sync::Arc<dyn Strategy> = if version == "v2" {
            std::sync::Arc::new(hpa_v2())
        } else {
            std::sync::Arc::new(HpaV1)
        };
        let mut r = Def::new(
            GROUP,
            "HorizontalPodAutoscaler",
            "horizontalpodautoscalers",
            strategy,
        )
        .short(&["hpa"])
        .in_all()
        .with_status()
        .build();
        r.version = version.to_string();
        r
    };
    vec![def("v2"), def("v1")]
}

/// Serializes v2 defaults onto a v2 object.
fn default_v2(obj: &mut Value) {
    default_at(obj, &["spec", "minReplicas"], json!(1));
    if obj["spec"]["metrics"]
        .as_array()
        .is_none_or(|m| m.is_empty())
        && obj["spec"].is_object()
    {
        obj["spec"]["metrics"] = json!([cpu_metric(DEFAULT_CPU_UTILIZATION)]);
    }
    if let Some(behavior) = obj["spec"].get_mut("behavior").filter(|b| b.is_object()) {
        complete_rules(&mut behavior["scaleUp"], true);
        complete_rules(&mut behavior["scaleDown"], false);
    }
}

/// Fills the unset parts of one direction's scaling rules with Kubernetes' defaults.
fn complete_rules(rules: &mut Value, up: bool) {
    if !rules.is_object() {
        *rules = json!({});
    }
    if up {
        default_at(rules, &["stabilizationWindowSeconds"], json!(0));
    }
    default_at(rules, &["selectPolicy"], json!("Max"));
    if rules.get("policies").is_none_or(Value::is_null) {
        rules["policies"] = if up {
            json!([{"type": "Pods", "value": 4, "periodSeconds": 15},
                   {"type": "Percent", "value": 100, "periodSeconds": 15}])
        } else {
            json!([{"type": "Percent", "value": 100, "periodSeconds": 15}])
        };
    }
}

fn cpu_metric(utilization: i64) -> Value {
    json!({"type": "Resource", "resource": {"name": "cpu",
           "target": {"type": "Utilization", "averageUtilization": utilization}}})
}

/// The v2 strategy.
fn hpa_v2() -> Typed<v2::HorizontalPodAutoscaler> {
    Typed::new()
        .defaults(default_v2)
        .initial_status(|| json!({"desiredReplicas": 0}))
        .validate(validate)
}

/// The v1 view: decoded as v1, checked and stored as v2.
struct HpaV1;

impl Strategy for HpaV1 {
    fn status_keeps_metadata(&self) -> Option<&'static [&'static str]> {
        Some(&[])
    }

    fn decode(&self, obj: Value) -> Result<Decoded, String> {
        decode_typed::<v1::HorizontalPodAutoscaler>(obj)
    }

    fn to_stored(&self, obj: Value) -> Value {
        v1_to_v2(obj)
    }

    fn to_served(&self, obj: Value) -> Value {
        v2_to_v1(obj)
    }

    fn converts(&self) -> bool {
        true
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        default_at(obj, &["spec", "minReplicas"], json!(1));
        obj["status"] = json!({"currentReplicas": 0, "desiredReplicas": 0});
    }

    fn prepare_for_update(&self, new: &mut Value, _old: &Value) {
        default_at(new, &["spec", "minReplicas"], json!(1));
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        validate(&v1_to_v2(obj.clone()))
    }
}

/// A served object in its v2 form, whichever version it is served as (for printing).
pub(crate) fn v2_form(obj: &Value) -> Value {
    if obj["apiVersion"] == "autoscaling/v1" {
        v1_to_v2(obj.clone())
    } else {
        obj.clone()
    }
}

/// Checks of a v2 object (paths as Kubernetes reports them).
fn validate(obj: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let spec = &obj["spec"];
    let min = spec["minReplicas"].as_i64();
    let max = spec["maxReplicas"].as_i64().unwrap_or(0);
    if let Some(min) = min
        && min < 1
    {
        errs.push(FieldError::invalid(
            "spec.minReplicas",
            json!(min),
            "must be greater than or equal to 1",
        ));
    }
    if max < 1 {
        errs.push(FieldError::invalid(
            "spec.maxReplicas",
            json!(max),
            "must be greater than 0",
        ));
    }
    if let Some(min) = min
        && max < min
    {
        errs.push(FieldError::invalid(
            "spec.maxReplicas",
            json!(max),
            "must be greater than or equal to `minReplicas`",
        ));
    }
    let target = &spec["scaleTargetRef"];
    for field in ["kind", "name"] {
        match target[field].as_str().unwrap_or_default() {
            "" => errs.push(FieldError::required(
                format!("spec.scaleTargetRef.{field}"),
                "",
            )),
            s if s.contains('/') || s.contains('%') || s == "." || s == ".." => {
                errs.push(FieldError::invalid(
                    format!("spec.scaleTargetRef.{field}"),
                    json!(s),
                    "may not contain '/' or '%', and may not be '.' or '..'",
                ));
            }
            _ => {}
        }
    }
    for (i, m) in spec["metrics"].as_array().into_iter().flatten().enumerate() {
        validate_metric(m, &format!("spec.metrics[{i}]"), &mut errs);
    }
    let behavior = &spec["behavior"];
    for dir in ["scaleUp", "scaleDown"] {
        if behavior[dir].is_object() {
            validate_rules(&behavior[dir], &format!("spec.behavior.{dir}"), &mut errs);
        }
    }
    errs
}

/// The JSON key of each metric type's source.
fn source_key(ty: &str) -> &'static str {
    match ty {
        "ContainerResource" => "containerResource",
        "External" => "external",
        "Object" => "object",
        "Pods" => "pods",
        _ => "resource",
    }
}

fn validate_metric(m: &Value, path: &str, errs: &mut Vec<FieldError>) {
    let ty = m["type"].as_str().unwrap_or_default();
    if ty.is_empty() {
        errs.push(FieldError::required(
            format!("{path}.type"),
            "must specify a metric source type",
        ));
        return;
    }
    if !METRIC_TYPES.contains(&ty) {
        errs.push(FieldError::not_supported(
            format!("{path}.type"),
            json!(ty),
            &METRIC_TYPES,
        ));
        return;
    }
    let key = source_key(ty);
    for other in METRIC_TYPES.map(source_key) {
        if other != key && m[other].is_object() {
            errs.push(FieldError::forbidden(
                format!("{path}.{other}"),
                "must populate the given metric source only",
            ));
        }
    }
    let source = &m[key];
    if !source.is_object() {
        errs.push(FieldError::required(
            format!("{path}.{key}"),
            "must populate information for the given metric source",
        ));
        return;
    }
    if matches!(ty, "Resource" | "ContainerResource")
        && source["name"].as_str().is_none_or(str::is_empty)
    {
        errs.push(FieldError::required(
            format!("{path}.{key}.name"),
            "must specify a resource name",
        ));
    }
    if matches!(ty, "Pods" | "Object" | "External")
        && source["metric"]["name"].as_str().is_none_or(str::is_empty)
    {
        errs.push(FieldError::required(
            format!("{path}.{key}.metric.name"),
            "must specify a metric name",
        ));
    }
    let target = &source["target"];
    let tpath = format!("{path}.{key}.target");
    match target["type"].as_str().unwrap_or_default() {
        "" => errs.push(FieldError::required(
            format!("{tpath}.type"),
            "must specify a metric target type",
        )),
        "Utilization" | "Value" | "AverageValue" => {}
        other => errs.push(FieldError::not_supported(
            format!("{tpath}.type"),
            json!(other),
            &["AverageValue", "Utilization", "Value"],
        )),
    }
    if let Some(u) = target["averageUtilization"].as_i64()
        && u <= 0
    {
        errs.push(FieldError::invalid(
            format!("{tpath}.averageUtilization"),
            json!(u),
            "must be greater than 0",
        ));
    }
}

fn validate_rules(rules: &Value, path: &str, errs: &mut Vec<FieldError>) {
    if let Some(w) = rules["stabilizationWindowSeconds"].as_i64() {
        if w < 0 {
            errs.push(FieldError::invalid(
                format!("{path}.stabilizationWindowSeconds"),
                json!(w),
                "must be greater than or equal to zero",
            ));
        } else if w > MAX_STABILIZATION_SECONDS {
            errs.push(FieldError::invalid(
                format!("{path}.stabilizationWindowSeconds"),
                json!(w),
                format!("must be less than or equal to {MAX_STABILIZATION_SECONDS}"),
            ));
        }
    }
    if let Some(p) = rules["selectPolicy"].as_str()
        && !["Disabled", "Max", "Min"].contains(&p)
    {
        errs.push(FieldError::not_supported(
            format!("{path}.selectPolicy"),
            json!(p),
            &["Disabled", "Max", "Min"],
        ));
    }
    let policies = rules["policies"].as_array().cloned().unwrap_or_default();
    if policies.is_empty() {
        errs.push(FieldError::required(
            format!("{path}.policies"),
            "must specify at least one Policy",
        ));
    }
    for (i, p) in policies.iter().enumerate() {
        let ppath = format!("{path}.policies[{i}]");
        let ty = p["type"].as_str().unwrap_or_default();
        if !["Pods", "Percent"].contains(&ty) {
            errs.push(FieldError::not_supported(
                format!("{ppath}.type"),
                json!(ty),
                &["Percent", "Pods"],
            ));
        }
        let value = p["value"].as_i64().unwrap_or(0);
        if value <= 0 {
            errs.push(FieldError::invalid(
                format!("{ppath}.value"),
                json!(value),
                "must be greater than zero",
            ));
        }
        let period = p["periodSeconds"].as_i64().unwrap_or(0);
        if period <= 0 {
            errs.push(FieldError::invalid(
                format!("{ppath}.periodSeconds"),
                json!(period),
                "must be greater than zero",
            ));
        } else if period > MAX_PERIOD_SECONDS {
            errs.push(FieldError::invalid(
                format!("{ppath}.periodSeconds"),
                json!(period),
                format!("must be less than or equal to {MAX_PERIOD_SECONDS}"),
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v2_object() -> Value {
        let mut obj = json!({
            "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {
                "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                "maxReplicas": 5,
                "metrics": [
                    {"type": "Pods", "pods": {"metric": {"name": "qps"},
                        "target": {"type": "AverageValue", "averageValue": "10"}}},
                    {"type": "Resource", "resource": {"name": "cpu",
                        "target": {"type": "Utilization", "averageUtilization": 60}}}
                ],
                "behavior": {"scaleDown": {"stabilizationWindowSeconds": 30}}
            },
            "status": {"desiredReplicas": 2, "currentReplicas": 2,
                "currentMetrics": [{"type": "Resource", "resource": {"name": "cpu",
                    "current": {"averageUtilization": 40, "averageValue": "100m"}}}],
                "conditions": [{"type": "AbleToScale", "status": "True",
                    "lastTransitionTime": "2024-05-01T12:00:00Z", "reason": "R", "message": "m"}]}
        });
        default_v2(&mut obj);
        obj
    }

    #[test]
    fn defaults_fill_min_replicas_cpu_target_and_behavior() {
        let mut obj = json!({"spec": {"maxReplicas": 3, "behavior": {}}});
        default_v2(&mut obj);
        assert_eq!(obj["spec"]["minReplicas"], 1);
        assert_eq!(obj["spec"]["metrics"][0], cpu_metric(80));
        assert_eq!(
            obj["spec"]["behavior"]["scaleUp"]["policies"][0]["type"],
            "Pods"
        );
        assert_eq!(
            obj["spec"]["behavior"]["scaleUp"]["stabilizationWindowSeconds"],
            0
        );
        assert_eq!(obj["spec"]["behavior"]["scaleDown"]["selectPolicy"], "Max");
        assert!(
            obj["spec"]["behavior"]["scaleDown"]
                .get("stabilizationWindowSeconds")
                .is_none()
        );
    }

    #[test]
    fn v1_view_keeps_what_it_cannot_say_in_annotations_and_round_trips() {
        let v2 = v2_object();
        let v1 = v2_to_v1(v2.clone());
        assert_eq!(v1["apiVersion"], "autoscaling/v1");
        assert_eq!(v1["spec"]["targetCPUUtilizationPercentage"], 60);
        assert_eq!(v1["status"]["currentCPUUtilizationPercentage"], 40);
        let ann = &v1["metadata"]["annotations"];
        let metrics: Value =
            serde_json::from_str(ann[METRICS_ANNOTATION].as_str().expect("metrics")).expect("json");
        assert_eq!(
            metrics,
            json!([{"type": "Pods", "pods": {"metricName": "qps", "targetAverageValue": "10"}}])
        );
        let behavior: Value =
            serde_json::from_str(ann[BEHAVIOR_ANNOTATION].as_str().expect("behavior"))
                .expect("json");
        assert_eq!(behavior["ScaleDown"]["StabilizationWindowSeconds"], 30);
        assert!(ann.get(CONDITIONS_ANNOTATION).is_some());
        let back = v1_to_v2(v1);
        assert_eq!(back, v2);
    }

    #[test]
    fn a_plain_v1_object_gets_the_cpu_metric() {
        let v1 = json!({"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "a"},
            "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "a"}, "maxReplicas": 2,
                     "minReplicas": 1}});
        let v2 = v1_to_v2(v1);
        assert_eq!(v2["spec"]["metrics"], json!([cpu_metric(80)]));
        assert!(v2["metadata"].get("annotations").is_none());
    }

    #[test]
    fn validation_reports_replica_bounds_and_missing_target() {
        let obj = json!({"spec": {"minReplicas": 3, "maxReplicas": 2, "scaleTargetRef": {}}});
        let errs: Vec<String> = validate(&obj).iter().map(|e| e.field.clone()).collect();
        assert_eq!(
            errs,
            [
                "spec.maxReplicas",
                "spec.scaleTargetRef.kind",
                "spec.scaleTargetRef.name"
            ]
        );
    }
}
