//! Tests of `schema/structural`.

use serde_json::json;

use super::node::translate_pattern;
use super::*;
use crate::schema::{JsonType, ListType};

fn problems(schema: Value) -> Vec<String> {
    match Structural::from_json(&schema, "s") {
        Ok(_) => Vec::new(),
        Err(errs) => errs.iter().map(ToString::to_string).collect(),
    }
}

fn root(props: Value) -> Value {
    json!({"type": "object", "properties": props})
}

#[test]
fn structural_schemas_parse() {
    let schemas = [
        root(
            json!({"spec": {"type": "object", "properties": {"replicas": {"type": "integer", "default": 1}}}}),
        ),
        root(json!({"spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}})),
        root(json!({"any": {"x-kubernetes-preserve-unknown-fields": true}})),
        root(json!({"port": {"x-kubernetes-int-or-string": true}})),
        root(
            json!({"port": {"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}]}}),
        ),
        root(
            json!({"metadata": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 10}}}}),
        ),
        root(
            json!({"pod": {"type": "object", "x-kubernetes-embedded-resource": true, "x-kubernetes-preserve-unknown-fields": true}}),
        ),
        root(json!({"labels": {"type": "object", "additionalProperties": {"type": "string"}}})),
        root(json!({"n": {"type": "integer", "anyOf": [{"minimum": 1}, {"maximum": -1}]}})),
        root(
            json!({"o": {"type": "object", "properties": {"a": {"type": "string"}}, "oneOf": [{"required": ["a"]}, {"properties": {"a": {"minLength": 2}}}]}}),
        ),
        root(
            json!({"l": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                          "items": {"type": "object", "properties": {"name": {"type": "string"}}}}}),
        ),
        root(
            json!({"s": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}}}),
        ),
    ];
    for schema in schemas {
        assert_eq!(problems(schema.clone()), Vec::<String>::new(), "{schema}");
    }
}

#[test]
fn non_structural_schemas_are_rejected_with_each_reason() {
    let cases: Vec<(Value, &str)> = vec![
        (
            json!({"properties": {}}),
            "s.type: Required value: must not be empty at the root",
        ),
        (
            json!({"type": "array", "items": {"type": "string"}}),
            r#"s.type: Invalid value: "array": must be object at the root"#,
        ),
        (
            root(json!({"spec": {"properties": {}}})),
            "s.properties[spec].type: Required value: must not be empty for specified object fields",
        ),
        (
            root(json!({"l": {"type": "array", "items": {}}})),
            "s.properties[l].items.type: Required value: must not be empty for specified array items",
        ),
        (
            root(json!({"l": {"type": "array"}})),
            "s.properties[l].items: Required value: must be specified",
        ),
        (
            root(json!({"t": {"type": "typo"}})),
            r#"s.properties[t].type: Unsupported value: "typo": supported values: "array", "boolean", "integer", "number", "object", "string""#,
        ),
        (
            root(
                json!({"o": {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": {"type": "string"}}}),
            ),
            "s.properties[o].additionalProperties: Forbidden: additionalProperties and properties are mutual exclusive",
        ),
        (
            root(json!({"n": {"type": "integer", "anyOf": [{"type": "integer"}]}})),
            "s.properties[n].anyOf[0].type: Forbidden: must be empty to be structural",
        ),
        (
            root(json!({"n": {"type": "integer", "allOf": [{"default": 1}]}})),
            "s.properties[n].allOf[0].default: Forbidden: must be undefined to be structural",
        ),
        (
            root(json!({"n": {"type": "integer", "not": {"description": "x"}}})),
            "s.properties[n].not.description: Forbidden: must be empty to be structural",
        ),
        (
            root(json!({"n": {"type": "integer", "oneOf": [{"x-kubernetes-list-type": "set"}]}})),
            "s.properties[n].oneOf[0].x-kubernetes-list-type: Forbidden: must be undefined to be structural",
        ),
        (
            root(
                json!({"o": {"type": "object", "anyOf": [{"properties": {"a": {"minLength": 1}}}]}}),
            ),
            "s.properties[o].properties[a]: Required value: because it is defined in s.properties[o].anyOf[0].properties[a]",
        ),
        (
            root(
                json!({"metadata": {"type": "object", "properties": {"labels": {"type": "object"}}}}),
            ),
            "s.properties[metadata]: Forbidden: must not specify anything other than name and generateName, but metadata is implicitly specified",
        ),
        (
            root(json!({"kind": {"type": "integer"}})),
            r#"s.properties[kind].type: Invalid value: "integer": must be string"#,
        ),
        (
            root(json!({"r": {"type": "string", "x-kubernetes-embedded-resource": true}})),
            r#"s.properties[r].type: Invalid value: "string": must be object if x-kubernetes-embedded-resource is true"#,
        ),
        (
            root(json!({"r": {"type": "object", "x-kubernetes-embedded-resource": true}})),
            "s.properties[r].properties: Required value: must not be empty if x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields",
        ),
        (
            root(json!({"p": {"x-kubernetes-int-or-string": true, "type": "string"}})),
            r#"s.properties[p].type: Invalid value: "string": must be empty if x-kubernetes-int-or-string is true"#,
        ),
        (
            root(
                json!({"p": {"x-kubernetes-int-or-string": true, "x-kubernetes-preserve-unknown-fields": true}}),
            ),
            "s.properties[p].x-kubernetes-preserve-unknown-fields: Invalid value: true: must be false if x-kubernetes-int-or-string is true",
        ),
        (
            root(json!({"p": {"type": "object", "x-kubernetes-preserve-unknown-fields": false}})),
            "s.properties[p].x-kubernetes-preserve-unknown-fields: Invalid value: false: must be true or undefined",
        ),
        (
            root(
                json!({"l": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "bag"}}),
            ),
            r#"s.properties[l].x-kubernetes-list-type: Unsupported value: "bag": supported values: "atomic", "set", "map""#,
        ),
        (
            root(
                json!({"l": {"type": "array", "items": {"type": "object", "properties": {"a": {"type": "string"}}}, "x-kubernetes-list-type": "map"}}),
            ),
            "s.properties[l].x-kubernetes-list-map-keys: Required value: must not be empty if x-kubernetes-list-type is map",
        ),
        (
            root(
                json!({"l": {"type": "array", "items": {"type": "object", "properties": {"a": {"type": "string"}}},
                           "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["b"]}}),
            ),
            r#"s.properties[l].x-kubernetes-list-map-keys: Invalid value: ["b"]: entries must all be names of item properties"#,
        ),
        (
            root(
                json!({"l": {"type": "array", "items": {"type": "object", "properties": {"a": {"type": "string"}}}, "x-kubernetes-list-type": "set"}}),
            ),
            "s.properties[l].items.x-kubernetes-map-type: Invalid value: null: must be atomic as item of a list with x-kubernetes-list-type=set",
        ),
        (
            root(json!({"s": {"type": "string", "pattern": "(unclosed"}})),
            "s.properties[s].pattern: Invalid value: \"(unclosed\": must be a valid regular expression",
        ),
        (
            root(json!({"s": {"type": "string", "default": 5}})),
            r#"s.properties[s].default: Invalid value: "integer":  in body must be of type string: "integer""#,
        ),
        (
            root(
                json!({"o": {"type": "object", "properties": {"a": {"type": "string"}}, "default": {"a": "x", "b": 1}}}),
            ),
            r#"s.properties[o].default: Invalid value: {"a":"x","b":1}: must not have unknown fields"#,
        ),
        (
            root(
                json!({"o": {"type": "object", "properties": {"n": {"type": "integer", "maximum": 3}}, "default": {"n": 5}}}),
            ),
            "s.properties[o].default.n: Invalid value: 5: n in body should be less than or equal to 3",
        ),
        (
            root(json!({"r": {"$ref": "#/definitions/x"}})),
            "s.properties[r].$ref: Forbidden: $ref is not supported",
        ),
    ];
    for (schema, want) in cases {
        let got = problems(schema.clone());
        assert!(
            got.iter().any(|g| g.starts_with(want)),
            "{schema}\nwant: {want}\ngot:  {got:#?}"
        );
    }
}

#[test]
fn patterns_use_ascii_classes_as_go_does() {
    assert_eq!(translate_pattern(r"^\d+\.\w$"), r"^[0-9]+\.[0-9A-Za-z_]$");
    let s = Structural::from_json(
        &root(json!({"n": {"type": "string", "pattern": r"^\d+$"}})),
        "s",
    )
    .expect("structural");
    let n = s.property("n").expect("n");
    let re = &n
        .checks
        .as_ref()
        .expect("checks")
        .pattern
        .as_ref()
        .expect("pattern")
        .regex;
    assert!(re.is_match("123"));
    assert!(!re.is_match("١٢٣"), "Arabic-Indic digits are not \\d in Go");
}

#[test]
fn malformed_schemas_are_errors_not_panics() {
    let schemas = [
        json!(null),
        json!([]),
        json!("object"),
        json!({"type": 5}),
        json!({"type": "object", "properties": []}),
        json!({"type": "object", "properties": {"a": "string"}}),
        json!({"type": "object", "properties": {"a": {"type": "array", "items": [{"type": "string"}]}}}),
        json!({"type": "object", "required": "a"}),
        json!({"type": "object", "properties": {"n": {"type": "integer", "minimum": "1", "maxLength": -1}}}),
        json!({"type": "object", "properties": {"n": {"type": "integer", "allOf": {}, "not": 3}}}),
        json!({"type": "object", "properties": {"l": {"type": "array", "items": {"type": "string"},
               "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": "name"}}}),
        json!({"type": "object", "properties": {"n": {"type": "integer", "multipleOf": 0}}}),
        json!({"type": "object", "properties": {"o": {"type": "object", "additionalProperties": 3}}}),
    ];
    for schema in schemas {
        assert!(Structural::from_json(&schema, "s").is_err(), "{schema}");
    }
}

#[test]
fn patterns_generated_by_kubebuilder_compile() {
    let patterns = [
        r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$",
        r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$",
        r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$",
        r"^[a-zA-Z0-9\-_\/\.]+$",
        r"^[^\d\s]+$",
        r"^(\d+(\.\d+)?(ms|s|m|h))+$",
    ];
    for p in patterns {
        let schema = root(json!({"s": {"type": "string", "pattern": p}}));
        assert_eq!(problems(schema), Vec::<String>::new(), "{p}");
    }
}

#[test]
fn accessors_describe_the_tree() {
    let s = Structural::from_json(
        &root(json!({
            "spec": {"type": "object", "properties": {
                "ports": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name", "proto"],
                          "items": {"type": "object", "properties": {"name": {"type": "string"}, "proto": {"type": "string", "default": "TCP"}}}},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "raw": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
            }}
        })),
        "s",
    )
    .expect("structural");
    let spec = s.property("spec").expect("spec");
    assert_eq!(spec.json_type(), Some(JsonType::Object));
    let ports = spec.property("ports").expect("ports");
    assert_eq!(
        ports.list_type(),
        ListType::Map(vec!["name".into(), "proto".into()])
    );
    assert_eq!(
        ports
            .items()
            .and_then(|i| i.property("proto"))
            .and_then(Structural::default_value),
        Some(&json!("TCP"))
    );
    let labels = spec.property("labels").expect("labels");
    assert_eq!(
        labels.property("anything").and_then(Structural::json_type),
        Some(JsonType::String)
    );
    assert!(
        spec.property("raw")
            .expect("raw")
            .preserves_unknown_fields()
    );
    assert!(!spec.preserves_unknown_fields());
    assert!(spec.property("missing").is_none());
}
