//! Printer of autoscaling HorizontalPodAutoscaler (both served versions print alike: a v1 object
//! is read in its v2 form first).

use serde_json::Value;

use super::*;

/// HorizontalPodAutoscaler columns.
pub(super) const HORIZONTAL_POD_AUTOSCALER: [Column; 7] = [
    NAME,
    shown("Reference", "The scale target, kind/name."),
    shown("Targets", "Current and target values of the metrics."),
    shown("MinPods", "The lower replica limit."),
    counted("MaxPods", "The upper replica limit."),
    counted("Replicas", "Current replicas."),
    AGE,
];

/// How many metrics the Targets cell shows before `+ N more...`.
const SHOWN_METRICS: usize = 2;

/// A quantity as text (`<unknown>` when absent).
fn quantity(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        _ => "<unknown>".to_owned(),
    }
}

/// One metric's `current/target`, as kubectl shows it.
fn metric_cell(spec: &Value, status: Option<&Value>) -> String {
    let ty = spec["type"].as_str().unwrap_or_default();
    let key = match ty {
        "External" => "external",
        "Pods" => "pods",
        "Object" => "object",
        "Resource" => "resource",
        "ContainerResource" => "containerResource",
        _ => return "<unknown type>".to_owned(),
    };
    let src = &spec[key];
    let target = &src["target"];
    let current = status.map(|s| &s[key]["current"]).filter(|c| c.is_object());
    let cur = |field: &str| {
        current
            .map(|c| quantity(&c[field]))
            .unwrap_or_else(|| "<unknown>".to_owned())
    };
    match ty {
        "Pods" => format!(
            "{}/{}",
            cur("averageValue"),
            quantity(&target["averageValue"])
        ),
        "External" | "Object" if !target["averageValue"].is_null() => format!(
            "{}/{} (avg)",
            cur("averageValue"),
            quantity(&target["averageValue"])
        ),
        "External" | "Object" => format!("{}/{}", cur("value"), quantity(&target["value"])),
        _ => {
            let name = src["name"].as_str().unwrap_or_default();
            if !target["averageValue"].is_null() {
                format!(
                    "{name}: {}/{}",
                    cur("averageValue"),
                    quantity(&target["averageValue"])
                )
            } else {
                let current = current
                    .and_then(|c| c["averageUtilization"].as_i64())
                    .map(|u| format!("{u}%"))
                    .unwrap_or_else(|| "<unknown>".to_owned());
                let goal = target["averageUtilization"]
                    .as_i64()
                    .map(|u| format!("{u}%"))
                    .unwrap_or_else(|| "<auto>".to_owned());
                format!("{name}: {current}/{goal}")
            }
        }
    }
}

/// The Targets cell: the first two metrics, then how many more.
fn targets(obj: &Value) -> String {
    let specs = list(obj, &["spec", "metrics"]);
    if specs.is_empty() {
        return "<none>".to_owned();
    }
    let statuses = list(obj, &["status", "currentMetrics"]);
    let cells: Vec<String> = specs
        .iter()
        .enumerate()
        .map(|(i, s)| metric_cell(s, statuses.get(i)))
        .collect();
    if cells.len() > SHOWN_METRICS {
        format!(
            "{} + {} more...",
            cells[..SHOWN_METRICS].join(", "),
            cells.len() - SHOWN_METRICS
        )
    } else {
        cells.join(", ")
    }
}

/// The HorizontalPodAutoscaler row.
pub(super) fn horizontal_pod_autoscaler_cells(
    obj: &Value,
    now: i64,
) -> [Value; HORIZONTAL_POD_AUTOSCALER.len()] {
    let obj = &crate::registry::builtin::hpa_v2_form(obj);
    let reference = format!(
        "{}/{}",
        text(obj, &["spec", "scaleTargetRef", "kind"]),
        text(obj, &["spec", "scaleTargetRef", "name"])
    );
    let min = at(obj, &["spec", "minReplicas"])
        .and_then(Value::as_i64)
        .map(|n| n.to_string())
        .unwrap_or_else(|| "<unset>".to_owned());
    [
        name(obj),
        Value::from(reference),
        Value::from(targets(obj)),
        Value::from(min),
        Value::from(int(obj, &["spec", "maxReplicas"])),
        Value::from(int(obj, &["status", "currentReplicas"])),
        age_cell(obj, now),
    ]
}
