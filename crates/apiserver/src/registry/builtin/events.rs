//! events.k8s.io/v1 Events: served from the same stored objects as core/v1 Events, so that
//! `kubectl get events` shows what a kube-rs or client-go recorder wrote through either API.
//!
//! Storage holds the core/v1 form; this strategy converts both ways. The field mapping:
//! `note`↔`message`, `regarding`↔`involvedObject`, `deprecatedSource`↔`source`,
//! `deprecatedFirstTimestamp`/`deprecatedLastTimestamp`/`deprecatedCount`↔
//! `firstTimestamp`/`lastTimestamp`/`count`, `reportingController`↔`reportingComponent`;
//! `eventTime`, `series`, `action`, `reason`, `related`, `type` and `reportingInstance` keep
//! their names.

use k8s_openapi::api::events::v1::Event;
use serde_json::{Map, Value, json};

use crate::api::field::FieldError;
use crate::registry::strategy::{Decoded, Strategy, decode_typed};

/// (events.k8s.io name, core name) pairs of renamed fields.
const RENAMED: [(&str, &str); 7] = [
    ("note", "message"),
    ("regarding", "involvedObject"),
    ("deprecatedSource", "source"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedCount", "count"),
    ("reportingController", "reportingComponent"),
];

/// Fields with the same name in both versions.
const SHARED: [&str; 8] = [
    "metadata",
    "eventTime",
    "series",
    "action",
    "reason",
    "related",
    "type",
    "reportingInstance",
];

fn convert(obj: Value, api_version: &str, to_core: bool) -> Value {
    let Value::Object(mut src) = obj else {
        return obj;
    };
    let mut out = Map::new();
    out.insert("apiVersion".into(), json!(api_version));
    out.insert("kind".into(), json!("Event"));
    for name in SHARED {
        if let Some(v) = src.remove(name) {
            out.insert(name.into(), v);
        }
    }
    for (v1, core) in RENAMED {
        let (from, to) = if to_core { (v1, core) } else { (core, v1) };
        if let Some(v) = src.remove(from) {
            out.insert(to.into(), v);
        }
    }
    if let Some(series) = out.get_mut("series").and_then(Value::as_object_mut) {
        // core/v1 series carries lastObservedTime as well; both versions spell it the same.
        series.remove("state");
    }
    Value::Object(out)
}

/// events.k8s.io/v1 Events.
pub(super) struct EventsV1Strategy;

impl Strategy for EventsV1Strategy {
    fn decode(&self, obj: Value) -> Result<Decoded, String> {
        decode_typed::<Event>(obj)
    }

    fn to_stored(&self, obj: Value) -> Value {
        convert(obj, "v1", true)
    }

    fn to_served(&self, obj: Value) -> Value {
        convert(obj, "events.k8s.io/v1", false)
    }

    fn converts(&self) -> bool {
        true
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        if obj.get("eventTime").is_none_or(Value::is_null) {
            errs.push(FieldError::required("eventTime", ""));
        }
        for field in [
            "reportingController",
            "reportingInstance",
            "action",
            "reason",
        ] {
            if obj
                .get(field)
                .and_then(Value::as_str)
                .is_none_or(str::is_empty)
            {
                errs.push(FieldError::required(field, ""));
            }
        }
        errs
    }

    fn validate_update(&self, _new: &Value, _old: &Value) -> Vec<FieldError> {
        Vec::new()
    }

    fn allow_create_on_update(&self) -> bool {
        true
    }

    /// Kubernetes' field label conversion for events.k8s.io/v1: the v1 names, read from the
    /// stored (core) form a selector is matched against.
    fn field_labels(&self) -> &'static [&'static str] {
        &[
            "regarding.kind",
            "regarding.namespace",
            "regarding.name",
            "regarding.uid",
            "regarding.apiVersion",
            "regarding.resourceVersion",
            "regarding.fieldPath",
            "reason",
            "reportingController",
            "type",
        ]
    }

    fn field_value(&self, obj: &Value, label: &str) -> String {
        let core = match label.strip_prefix("regarding.") {
            Some(rest) => format!("involvedObject.{rest}"),
            None if label == "reportingController" => "reportingComponent".to_string(),
            None => label.to_string(),
        };
        crate::registry::strategy::dotted(obj, &core)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversion_round_trips_through_the_core_form() {
        let v1 = json!({
            "apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": "e1", "namespace": "default"},
            "eventTime": "2024-05-01T12:00:00.000000Z", "note": "hello", "reason": "Synced",
            "regarding": {"kind": "Foo", "name": "f"}, "reportingController": "ctl",
            "reportingInstance": "ctl-1", "action": "Sync", "type": "Normal",
            "series": {"count": 2, "lastObservedTime": "2024-05-01T12:00:01.000000Z"}
        });
        let core = convert(v1.clone(), "v1", true);
        assert_eq!(core["message"], "hello");
        assert_eq!(core["involvedObject"]["name"], "f");
        assert_eq!(core["reportingComponent"], "ctl");
        assert_eq!(core["apiVersion"], "v1");
        assert_eq!(convert(core, "events.k8s.io/v1", false), v1);
    }
}
