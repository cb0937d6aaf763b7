//! Targets over the structural schema of custom resources and its CEL rules.
//!
//! A crash is a panic or abort; errors (`Vec<FieldError>`) are the expected answer to bad
//! schemas and objects.

use kore_apiserver::schema::{self, Structural};
use serde_json::{Value, json};

/// The schema path errors are reported under, as for a CRD's first version.
const BASE: &str = "spec.versions[0].schema.openAPIV3Schema";

/// Up to three JSON values, one after the other: an `openAPIV3Schema`, an object, and an old
/// object. The schema is parsed as a CRD's would be; if it is accepted the object is pruned,
/// defaulted and validated against it, and its CEL rules run (as an update when an old object
/// is given).
pub fn crd_schema(data: &[u8]) {
    let values: Vec<Value> = serde_json::Deserializer::from_slice(data)
        .into_iter::<Value>()
        .take(3)
        .map_while(Result::ok)
        .collect();
    let Some(raw) = values.first() else {
        return;
    };
    let Ok(structural) = Structural::from_json(raw, BASE) else {
        return;
    };
    let object = values.get(1).cloned().unwrap_or_else(|| json!({}));
    let old = values.get(2).cloned();
    check(&structural, object, old);
}

/// The text of one `x-kubernetes-validations` rule on `spec` of a fixed schema, compiled as a
/// CRD's would be and, if accepted, evaluated on a fixed object (as a create and as an update).
pub fn cel_rule(data: &[u8]) {
    let Ok(rule) = std::str::from_utf8(data) else {
        return;
    };
    let raw = json!({
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "x-kubernetes-validations": [{"rule": rule}],
                "properties": {
                    "replicas": {"type": "integer", "minimum": 0, "maximum": 1000},
                    "ratio": {"type": "number"},
                    "name": {"type": "string", "maxLength": 63},
                    "enabled": {"type": "boolean"},
                    "port": {"x-kubernetes-int-or-string": true},
                    "tags": {"type": "array", "maxItems": 10, "items": {"type": "string", "maxLength": 20}},
                    "ports": {
                        "type": "array",
                        "maxItems": 10,
                        "x-kubernetes-list-type": "map",
                        "x-kubernetes-list-map-keys": ["name"],
                        "items": {"type": "object", "required": ["name"], "properties": {
                            "name": {"type": "string", "maxLength": 15},
                            "port": {"type": "integer", "format": "int32"}
                        }}
                    },
                    "labels": {"type": "object", "maxProperties": 10, "additionalProperties": {"type": "string", "maxLength": 20}},
                    "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
                }
            }
        }
    });
    let Ok(structural) = Structural::from_json(&raw, BASE) else {
        return;
    };
    let object = json!({
        "apiVersion": "fuzz.kore.dev/v1",
        "kind": "Widget",
        "metadata": {"name": "fuzz", "namespace": "default"},
        "spec": {
            "replicas": 3, "ratio": 0.5, "name": "fuzz", "enabled": true, "port": "http",
            "tags": ["a", "b"], "ports": [{"name": "http", "port": 80}],
            "labels": {"app": "fuzz"}, "extra": {"nested": {"list": [1, "two", null]}}
        }
    });
    let mut old = object.clone();
    old["spec"]["replicas"] = json!(2);
    old["spec"]["tags"] = json!(["a"]);
    check(&structural, object.clone(), None);
    check(&structural, object, Some(old));
}

/// What the registry does to a custom resource on a write, in its order.
fn check(structural: &Structural, mut object: Value, old: Option<Value>) {
    schema::prune(structural, &mut object);
    schema::apply_defaults(structural, &mut object);
    let errs = schema::validate(structural, &object);
    if schema::blocks_rules(&errs).is_none() {
        schema::validate_rules(structural, &object, old.as_ref());
    }
}
