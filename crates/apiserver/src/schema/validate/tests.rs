//! Tests of `schema/validate`.

use serde_json::json;

use super::*;

fn errors(schema: Value, object: Value) -> Vec<String> {
    let s = Structural::from_json(&schema, "schema").expect("a structural schema");
    validate_with_base(&s, &object, "")
        .iter()
        .map(ToString::to_string)
        .collect()
}

fn spec(props: Value) -> Value {
    json!({"type": "object", "properties": {"spec": {"type": "object", "properties": props}}})
}

#[test]
fn each_keyword_accepts_a_valid_value_and_reports_an_invalid_one() {
    // (schema of spec.f, valid value, invalid value, expected message)
    let cases: Vec<(Value, Value, Value, &str)> = vec![
        (
            json!({"type": "integer"}),
            json!(3),
            json!("big"),
            r#"spec.f: Invalid value: "string": spec.f in body must be of type integer: "string""#,
        ),
        (
            json!({"type": "integer"}),
            json!(3.0),
            json!(3.5),
            r#"spec.f: Invalid value: "number": spec.f in body must be of type integer: "number""#,
        ),
        (
            json!({"type": "number"}),
            json!(3),
            json!(true),
            r#"spec.f: Invalid value: "boolean": spec.f in body must be of type number: "boolean""#,
        ),
        (
            json!({"type": "string"}),
            json!("x"),
            json!(null),
            r#"spec.f: Invalid value: "null": spec.f in body must be of type string: "null""#,
        ),
        (
            json!({"type": "string", "nullable": true}),
            json!(null),
            json!(1),
            r#"spec.f: Invalid value: "integer": spec.f in body must be of type string: "integer""#,
        ),
        (
            json!({"type": "boolean"}),
            json!(false),
            json!([]),
            r#"spec.f: Invalid value: "array": spec.f in body must be of type boolean: "array""#,
        ),
        (
            json!({"type": "array", "items": {"type": "string"}}),
            json!(["a"]),
            json!({}),
            r#"spec.f: Invalid value: "object": spec.f in body must be of type array: "object""#,
        ),
        (
            json!({"type": "string", "enum": ["red", "blue"]}),
            json!("red"),
            json!("pink"),
            r#"spec.f: Unsupported value: "pink": supported values: "red", "blue""#,
        ),
        (
            json!({"type": "integer", "enum": [1, 2]}),
            json!(2),
            json!(3),
            r#"spec.f: Unsupported value: 3: supported values: "1", "2""#,
        ),
        (
            json!({"type": "integer", "minimum": 1}),
            json!(1),
            json!(0),
            "spec.f: Invalid value: 0: spec.f in body should be greater than or equal to 1",
        ),
        (
            json!({"type": "integer", "minimum": 1, "exclusiveMinimum": true}),
            json!(2),
            json!(1),
            "spec.f: Invalid value: 1: spec.f in body should be greater than 1",
        ),
        (
            json!({"type": "integer", "maximum": 10}),
            json!(10),
            json!(11),
            "spec.f: Invalid value: 11: spec.f in body should be less than or equal to 10",
        ),
        (
            json!({"type": "number", "maximum": 10, "exclusiveMaximum": true}),
            json!(9.5),
            json!(10.0),
            "spec.f: Invalid value: 10: spec.f in body should be less than 10",
        ),
        (
            json!({"type": "number", "minimum": 1000000}),
            json!(1000000.5),
            json!(0.5),
            "spec.f: Invalid value: 0.5: spec.f in body should be greater than or equal to 1e+06",
        ),
        (
            json!({"type": "string", "minLength": 2}),
            json!("ab"),
            json!("a"),
            r#"spec.f: Invalid value: "a": spec.f in body should be at least 2 chars long"#,
        ),
        (
            json!({"type": "string", "maxLength": 5}),
            json!("ééééé"),
            json!("abcdef"),
            "spec.f: Too long: may not be more than 5 bytes",
        ),
        (
            json!({"type": "string", "maxLength": 1}),
            json!("é"),
            json!("ab"),
            "spec.f: Too long: may not be more than 1 byte",
        ),
        (
            json!({"type": "string", "pattern": "^[a-z]+$"}),
            json!("abc"),
            json!("X"),
            r#"spec.f: Invalid value: "X": spec.f in body should match '^[a-z]+$'"#,
        ),
        (
            json!({"type": "array", "items": {"type": "string"}, "minItems": 1}),
            json!(["a"]),
            json!([]),
            "spec.f: Invalid value: 0: spec.f in body should have at least 1 items",
        ),
        (
            json!({"type": "array", "items": {"type": "string"}, "maxItems": 3}),
            json!(["a"]),
            json!(["a", "b", "c", "d"]),
            "spec.f: Too many: 4: must have at most 3 items",
        ),
        (
            json!({"type": "array", "items": {"type": "string"}, "uniqueItems": true}),
            json!(["a", "b"]),
            json!(["a", "b", "a"]),
            r#"spec.f: Duplicate value: "a""#,
        ),
        (
            json!({"type": "object", "additionalProperties": {"type": "string"}, "minProperties": 1}),
            json!({"a": "b"}),
            json!({}),
            "spec.f: Invalid value: 0: spec.f in body should have at least 1 properties",
        ),
        (
            json!({"type": "object", "additionalProperties": {"type": "string"}, "maxProperties": 1}),
            json!({"a": "b"}),
            json!({"a": "b", "c": "d"}),
            "spec.f: Too many: 2: must have at most 1 item",
        ),
        (
            json!({"type": "integer", "multipleOf": 5}),
            json!(10),
            json!(7),
            "spec.f: Invalid value: 7: spec.f in body should be a multiple of 5",
        ),
        (
            json!({"type": "number", "multipleOf": 0.5}),
            json!(1.5),
            json!(1.2),
            "spec.f: Invalid value: 1.2: spec.f in body should be a multiple of 0.5",
        ),
        (
            json!({"type": "string", "format": "date-time"}),
            json!("2024-05-01T12:00:00Z"),
            json!("abc"),
            r#"spec.f: Invalid value: "abc": spec.f in body must be of type date-time: "abc""#,
        ),
        (
            json!({"type": "object", "additionalProperties": {"type": "integer"}}),
            json!({"a": 1}),
            json!({"a": "x"}),
            r#"spec.f.a: Invalid value: "string": spec.f.a in body must be of type integer: "string""#,
        ),
        (
            json!({"x-kubernetes-int-or-string": true}),
            json!("50%"),
            json!(true),
            r#"spec.f: Invalid value: "boolean": spec.f in body must be of type integer,string: "boolean""#,
        ),
        (
            json!({"type": "object", "properties": {"c": {"type": "string"}}, "required": ["c"]}),
            json!({"c": "x"}),
            json!({}),
            "spec.f.c: Required value",
        ),
    ];
    for (schema, good, bad, want) in cases {
        let full = spec(json!({"f": schema}));
        let ok = errors(full.clone(), json!({"spec": {"f": good}}));
        assert!(ok.is_empty(), "{schema} should accept {good}: {ok:?}");
        let got = errors(full, json!({"spec": {"f": bad}}));
        assert_eq!(got, vec![want.to_string()], "{schema} with {bad}");
    }
}

#[test]
fn errors_carry_kubernetes_cause_types() {
    let schema = spec(json!({
        "size": {"type": "integer"},
        "color": {"type": "string", "enum": ["red"]},
        "name": {"type": "string", "maxLength": 1},
        "list": {"type": "array", "items": {"type": "string"}, "maxItems": 1},
        "ts": {"type": "string", "format": "date"},
    }));
    let s = Structural::from_json(&schema, "s").expect("structural");
    let obj = json!({"spec": {"size": "x", "color": "blue", "name": "ab", "list": ["a", "b"], "ts": "x"}});
    let causes: Vec<(String, &str)> = validate_with_base(&s, &obj, "")
        .iter()
        .map(|e| (e.field.clone(), e.kind.cause_type()))
        .collect();
    assert_eq!(
        causes,
        [
            ("spec.color".to_string(), "FieldValueNotSupported"),
            ("spec.list".to_string(), "FieldValueTooMany"),
            ("spec.name".to_string(), "FieldValueTooLong"),
            ("spec.size".to_string(), "FieldValueTypeInvalid"),
            ("spec.ts".to_string(), "FieldValueTypeInvalid"),
        ]
    );
}

#[test]
fn nested_paths_use_indexes_for_items_and_dots_for_map_keys() {
    let schema = spec(json!({
        "list": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
    }));
    let got = errors(
        schema,
        json!({"spec": {"list": [{"name": "a"}, {"name": "b"}, {}], "labels": {"app": 1}}}),
    );
    assert_eq!(
        got,
        [
            r#"spec.labels.app: Invalid value: "integer": spec.labels.app in body must be of type string: "integer""#,
            "spec.list[2].name: Required value",
        ]
    );
}

#[test]
fn a_type_error_does_not_hide_an_enum_error() {
    let schema = spec(json!({"n": {"type": "integer", "enum": [1, 2]}}));
    let got = errors(schema, json!({"spec": {"n": "x"}}));
    assert_eq!(
        got,
        [
            r#"spec.n: Invalid value: "string": spec.n in body must be of type integer: "string""#,
            r#"spec.n: Unsupported value: "x": supported values: "1", "2""#,
        ]
    );
}

#[test]
fn list_type_set_and_map_report_duplicates_and_missing_keys() {
    let schema = spec(json!({
        "tags": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"},
        "ports": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                  "items": {"type": "object", "properties": {"name": {"type": "string"}, "port": {"type": "integer"}}}},
    }));
    let ok = errors(
        schema.clone(),
        json!({"spec": {"tags": ["a", "b"], "ports": [{"name": "a", "port": 1}, {"name": "b", "port": 1}]}}),
    );
    assert!(ok.is_empty(), "{ok:?}");
    let got = errors(
        schema,
        json!({"spec": {"tags": ["a", "b", "a", "a"], "ports": [{"name": "a"}, {"port": 2}, {"name": "a", "port": 3}]}}),
    );
    assert_eq!(
        got,
        [
            r#"spec.ports[1].name: Required value"#,
            r#"spec.ports[2]: Duplicate value: {"name":"a"}"#,
            r#"spec.tags: Duplicate value: "a""#,
        ]
    );
}

#[test]
fn long_lists_find_duplicates_too() {
    let schema = spec(json!({
        "tags": {"type": "array", "items": {"type": "integer"}, "x-kubernetes-list-type": "set"},
        "ports": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                  "items": {"type": "object", "properties": {"name": {"type": "string"}}}},
    }));
    let mut tags: Vec<Value> = (0..200).map(Value::from).collect();
    let mut ports: Vec<Value> = (0..200).map(|i| json!({"name": format!("p{i}")})).collect();
    assert!(
        errors(
            schema.clone(),
            json!({"spec": {"tags": tags, "ports": ports}})
        )
        .is_empty()
    );
    tags.push(json!(5));
    tags.push(json!(5));
    ports.push(json!({"name": "p7"}));
    assert_eq!(
        errors(schema, json!({"spec": {"tags": tags, "ports": ports}})),
        [
            r#"spec.ports[200]: Duplicate value: {"name":"p7"}"#,
            "spec.tags: Duplicate value: 5"
        ]
    );
}

#[test]
fn embedded_resources_need_api_version_and_kind_and_valid_metadata() {
    let schema = spec(
        json!({"template": {"type": "object", "x-kubernetes-embedded-resource": true,
                                           "x-kubernetes-preserve-unknown-fields": true}}),
    );
    let ok = errors(
        schema.clone(),
        json!({"spec": {"template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}}}),
    );
    assert!(ok.is_empty(), "{ok:?}");
    let got = errors(
        schema,
        json!({"spec": {"template": {"metadata": {"name": "Bad_Name", "labels": {"bad key": "x"}}}}}),
    );
    assert_eq!(got.len(), 4, "{got:?}");
    assert_eq!(
        got[0],
        "spec.template.apiVersion: Required value: must not be empty"
    );
    assert_eq!(
        got[1],
        "spec.template.kind: Required value: must not be empty"
    );
    assert!(
        got[2].starts_with("spec.template.metadata.name: Invalid value: \"Bad_Name\""),
        "{got:?}"
    );
    assert!(
        got[3].starts_with("spec.template.metadata.labels: Invalid value: \"bad key\""),
        "{got:?}"
    );
}

#[test]
fn combinators_validate_values_only() {
    let schema = spec(json!({"n": {"type": "integer",
        "anyOf": [{"minimum": 10}, {"maximum": 0}],
        "not": {"enum": [99]},
        "allOf": [{"multipleOf": 3}]}}));
    assert!(errors(schema.clone(), json!({"spec": {"n": 12}})).is_empty());
    assert!(errors(schema.clone(), json!({"spec": {"n": -3}})).is_empty());
    let got = errors(schema.clone(), json!({"spec": {"n": 5}}));
    assert_eq!(
        got,
        [
            r#"<nil>: Invalid value: "": "spec.n" must validate all the schemas (allOf). None validated"#,
            "spec.n: Invalid value: 5: spec.n in body should be a multiple of 3",
            r#"<nil>: Invalid value: "": "spec.n" must validate at least one schema (anyOf)"#,
            "spec.n: Invalid value: 5: spec.n in body should be greater than or equal to 10",
        ]
    );
    let got = errors(schema, json!({"spec": {"n": 99}}));
    assert_eq!(
        got,
        [r#"<nil>: Invalid value: "": "spec.n" must not validate the schema (not)"#]
    );
}

#[test]
fn additional_properties_false_forbids_other_keys() {
    let schema = spec(json!({"o": {"type": "object", "additionalProperties": false}}));
    assert!(errors(schema.clone(), json!({"spec": {"o": {}}})).is_empty());
    assert_eq!(
        errors(schema, json!({"spec": {"o": {"x": 1}}})),
        [r#"spec.o: Invalid value: "x": spec.o.x in body is a forbidden property"#]
    );
}

#[test]
fn nullable_fields_still_check_their_enum_like_kubernetes() {
    let schema = spec(json!({
        "a": {"type": "string", "nullable": true, "enum": ["x", null]},
        "b": {"type": "string", "nullable": true, "enum": ["x"]},
    }));
    assert!(errors(schema.clone(), json!({"spec": {"a": null}})).is_empty());
    assert_eq!(
        errors(schema, json!({"spec": {"b": null}})),
        [r#"spec.b: Unsupported value: null: supported values: "x""#]
    );
}

#[test]
fn untyped_preserving_fields_take_any_value() {
    let schema = spec(json!({"any": {"x-kubernetes-preserve-unknown-fields": true}}));
    for v in [
        json!(1),
        json!("s"),
        json!([1, {"a": 2}]),
        json!({"deep": {"er": null}}),
        json!(null),
    ] {
        assert!(
            errors(schema.clone(), json!({"spec": {"any": v}})).is_empty(),
            "{v}"
        );
    }
}

#[test]
fn the_root_metadata_is_checked_only_against_name_constraints() {
    let schema = json!({"type": "object", "properties": {
        "metadata": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 5}}},
    }});
    assert!(
        errors(
            schema.clone(),
            json!({"metadata": {"name": "short", "labels": {"x": "y"}}})
        )
        .is_empty()
    );
    assert_eq!(
        errors(schema, json!({"metadata": {"name": "toolong"}})),
        ["metadata.name: Too long: may not be more than 5 bytes"]
    );
}

#[test]
fn one_of_needs_exactly_one_match() {
    let schema =
        spec(json!({"n": {"type": "integer", "oneOf": [{"minimum": 0}, {"maximum": 10}]}}));
    assert!(errors(schema.clone(), json!({"spec": {"n": 20}})).is_empty());
    let got = errors(schema, json!({"spec": {"n": 5}}));
    assert_eq!(
        got,
        [
            r#"<nil>: Invalid value: "": "spec.n" must validate one and only one schema (oneOf). Found 2 valid alternatives"#
        ]
    );
}

#[test]
fn formats_shape_type_messages_as_in_kubernetes() {
    let schema = spec(json!({
        "i": {"type": "integer", "format": "int32"},
        "t": {"type": "string", "format": "date-time"},
        "p": {"x-kubernetes-int-or-string": true, "format": "int-or-string"},
    }));
    assert!(errors(schema.clone(), json!({"spec": {"i": 5, "p": "50%"}})).is_empty());
    assert!(errors(schema.clone(), json!({"spec": {"p": 3}})).is_empty());
    assert_eq!(
        errors(schema.clone(), json!({"spec": {"i": 1.5, "t": 5}})),
        [
            r#"spec.i: Invalid value: "float64": spec.i in body must be of type int32: "float64""#,
            r#"spec.t: Invalid value: "int64": spec.t in body must be of type date-time: "int64""#,
        ]
    );
    // A formatted string field takes an array without complaint, as in Kubernetes.
    assert!(errors(schema, json!({"spec": {"t": []}})).is_empty());
}

#[test]
fn integer_bounds_are_truncated_like_kubernetes() {
    let schema = spec(json!({"n": {"type": "integer", "minimum": 1.5}}));
    assert!(errors(schema.clone(), json!({"spec": {"n": 1}})).is_empty());
    assert_eq!(
        errors(schema, json!({"spec": {"n": 0}})),
        ["spec.n: Invalid value: 0: spec.n in body should be greater than or equal to 1"]
    );
}

#[test]
fn go_float_prints_like_go() {
    assert_eq!(go_float(1.0), "1");
    assert_eq!(go_float(0.5), "0.5");
    assert_eq!(go_float(123456.0), "123456");
    assert_eq!(go_float(1e6), "1e+06");
    assert_eq!(go_float(1.5e-5), "1.5e-05");
}

#[test]
fn errors_under_a_base_path_keep_relative_names_in_messages() {
    let s = Structural::from_json(
        &json!({"type": "object", "properties": {"n": {"type": "integer"}}}),
        "s",
    )
    .expect("structural");
    let got = validate_with_base(&s, &json!("x"), "spec.default");
    assert_eq!(
        got[0].to_string(),
        r#"spec.default: Invalid value: "string":  in body must be of type object: "string""#
    );
}
