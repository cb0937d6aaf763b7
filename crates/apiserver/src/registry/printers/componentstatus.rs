//! Printer of core/v1 ComponentStatus (`kubectl get cs`).

use serde_json::Value;

use super::*;

/// ComponentStatus columns.
pub(super) const COMPONENT_STATUS: [Column; 4] = [
    NAME,
    shown("Status", "Whether the component is healthy."),
    shown("Message", "What the health check said."),
    shown("Error", "The health check's error, if any."),
];

/// The ComponentStatus row: the `Healthy` condition, as kubectl shows it.
pub(super) fn component_status_cells(obj: &Value, _now: i64) -> [Value; COMPONENT_STATUS.len()] {
    let healthy = list(obj, &["conditions"])
        .iter()
        .find(|c| c["type"] == "Healthy");
    let (status, message, error) = match healthy {
        Some(c) => (
            if c["status"] == "True" {
                "Healthy"
            } else {
                "Unhealthy"
            },
            text(c, &["message"]).to_owned(),
            text(c, &["error"]).to_owned(),
        ),
        None => ("Unknown", String::new(), String::new()),
    };
    [
        name(obj),
        Value::from(status),
        Value::from(message),
        Value::from(error),
    ]
}
