//! Tests of `schema/cel.rs`.

use serde_json::json;

use super::*;

/// A root schema whose `spec` has these properties and rules.
fn spec_schema(props: Value, rules: Value) -> Structural {
    let schema = json!({"type": "object", "properties": {"spec": {
        "type": "object", "properties": props, "x-kubernetes-validations": rules}}});
    match Structural::from_json(&schema, "s") {
        Ok(s) => s,
        Err(errs) => panic!("{schema}: {errs:?}"),
    }
}

fn run(s: &Structural, new: Value, old: Option<Value>) -> Vec<String> {
    let new = json!({"apiVersion": "x.io/v1", "kind": "X", "metadata": {"name": "n"}, "spec": new});
    let old = old.map(
        |o| json!({"apiVersion": "x.io/v1", "kind": "X", "metadata": {"name": "n"}, "spec": o}),
    );
    validate(s, &new, old.as_ref())
        .iter()
        .map(ToString::to_string)
        .collect()
}

fn compile_errors(schema: Value) -> Vec<String> {
    match Structural::from_json(&schema, "s") {
        Ok(_) => Vec::new(),
        Err(errs) => errs.iter().map(ToString::to_string).collect(),
    }
}

fn props() -> Value {
    json!({
        "sourceNamespace": {"type": "string"},
        "destinationNamespace": {"type": "string"},
        "destinationNamespaces": {"type": "array", "items": {"type": "string"}},
        "name": {"type": "string"},
        "replicas": {"type": "integer"},
        "ratio": {"type": "number"},
        "enabled": {"type": "boolean"},
        "port": {"x-kubernetes-int-or-string": true},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "x-y": {"type": "string"},
        "in": {"type": "string"},
        // Bounded, as Kubernetes' cost estimate wants for rules that map a list twice.
        "ports": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
            "maxItems": 100,
            "items": {"type": "object", "properties": {"name": {"type": "string"}, "port": {"type": "integer"}}}},
    })
}

/// (rule, spec, expected errors): each rule alone on `spec`, on create.
#[test]
fn each_feature_evaluates_as_kubernetes_does() {
    let failed = |rule: &str| {
        vec![format!(
            "spec: Invalid value: \"object\": failed rule: {rule}"
        )]
    };
    let none: Vec<String> = Vec::new();
    let cases: Vec<(&str, Value, Vec<String>)> = vec![
        // has()
        (
            "!has(self.destinationNamespace) || self.destinationNamespace != self.sourceNamespace",
            json!({"sourceNamespace": "a"}),
            none.clone(),
        ),
        (
            "!has(self.destinationNamespace) || self.destinationNamespace != self.sourceNamespace",
            json!({"sourceNamespace": "a", "destinationNamespace": "b"}),
            none.clone(),
        ),
        (
            "!has(self.destinationNamespace) || self.destinationNamespace != self.sourceNamespace",
            json!({"sourceNamespace": "a", "destinationNamespace": "a"}),
            failed(
                "!has(self.destinationNamespace) || self.destinationNamespace != self.sourceNamespace",
            ),
        ),
        // in
        (
            "!has(self.destinationNamespaces) || !(self.sourceNamespace in self.destinationNamespaces)",
            json!({"sourceNamespace": "a", "destinationNamespaces": ["b", "c"]}),
            none.clone(),
        ),
        (
            "!has(self.destinationNamespaces) || !(self.sourceNamespace in self.destinationNamespaces)",
            json!({"sourceNamespace": "a", "destinationNamespaces": ["b", "a"]}),
            failed(
                "!has(self.destinationNamespaces) || !(self.sourceNamespace in self.destinationNamespaces)",
            ),
        ),
        (
            "'team' in self.labels",
            json!({"labels": {"team": "x"}}),
            none.clone(),
        ),
        (
            "'team' in self.labels",
            json!({"labels": {}}),
            failed("'team' in self.labels"),
        ),
        // size()
        (
            "size(self.name) <= 5",
            json!({"name": "short"}),
            none.clone(),
        ),
        (
            "size(self.name) <= 5",
            json!({"name": "longer"}),
            failed("size(self.name) <= 5"),
        ),
        (
            "self.destinationNamespaces.size() > 0",
            json!({"destinationNamespaces": []}),
            failed("self.destinationNamespaces.size() > 0"),
        ),
        (
            "size(self.labels) == 1",
            json!({"labels": {"a": "b"}}),
            none.clone(),
        ),
        // macros
        (
            "self.destinationNamespaces.all(n, n.startsWith('team-'))",
            json!({"destinationNamespaces": ["team-a", "team-b"]}),
            none.clone(),
        ),
        (
            "self.destinationNamespaces.all(n, n.startsWith('team-'))",
            json!({"destinationNamespaces": ["team-a", "other"]}),
            failed("self.destinationNamespaces.all(n, n.startsWith('team-'))"),
        ),
        (
            "self.destinationNamespaces.exists(n, n == 'prod')",
            json!({"destinationNamespaces": ["dev", "prod"]}),
            none.clone(),
        ),
        (
            "self.destinationNamespaces.exists_one(n, n == 'prod')",
            json!({"destinationNamespaces": ["prod", "prod"]}),
            failed("self.destinationNamespaces.exists_one(n, n == 'prod')"),
        ),
        (
            "self.ports.map(p, p.port).all(x, x > 0)",
            json!({"ports": [{"name": "a", "port": 1}]}),
            none.clone(),
        ),
        (
            "self.ports.filter(p, p.port > 100).size() == 0",
            json!({"ports": [{"name": "a", "port": 443}]}),
            failed("self.ports.filter(p, p.port > 100).size() == 0"),
        ),
        (
            "self.labels.all(k, self.labels[k].size() < 4)",
            json!({"labels": {"a": "abc", "b": "abcd"}}),
            failed("self.labels.all(k, self.labels[k].size() < 4)"),
        ),
        // comparisons: int, double, bool, string order
        (
            "self.replicas >= 1 && self.replicas <= 10",
            json!({"replicas": 3}),
            none.clone(),
        ),
        (
            "self.replicas >= 1 && self.replicas <= 10",
            json!({"replicas": 11}),
            failed("self.replicas >= 1 && self.replicas <= 10"),
        ),
        ("self.ratio < 0.5", json!({"ratio": 0}), none.clone()),
        (
            "self.enabled == true",
            json!({"enabled": false}),
            failed("self.enabled == true"),
        ),
        ("self.name < 'm'", json!({"name": "abc"}), none.clone()),
        // string functions
        (
            "self.name.endsWith('-x') && self.name.contains('a')",
            json!({"name": "a-x"}),
            none.clone(),
        ),
        (
            "self.name.matches('^[a-z]+$')",
            json!({"name": "Abc"}),
            failed("self.name.matches('^[a-z]+$')"),
        ),
        (
            "self.name.lowerAscii() == 'abc'",
            json!({"name": "ABC"}),
            none.clone(),
        ),
        (
            "self.name.upperAscii() == 'ABC' && self.name.indexOf('b') == 1",
            json!({"name": "abc"}),
            none.clone(),
        ),
        (
            "self.name.split('.').size() == 2",
            json!({"name": "a.b"}),
            none.clone(),
        ),
        (
            "self.name.trim() == 'a' && self.name.replace(' ', '') == 'a'",
            json!({"name": " a "}),
            none.clone(),
        ),
        (
            "self.name.substring(1) == 'bc'",
            json!({"name": "abc"}),
            none.clone(),
        ),
        // optionals and the lists extension
        (
            "self.labels.?team.orValue('none') == 'none'",
            json!({"labels": {}}),
            none.clone(),
        ),
        (
            "self.destinationNamespaces.distinct().size() == self.destinationNamespaces.size()",
            json!({"destinationNamespaces": ["a", "b", "a"]}),
            failed(
                "self.destinationNamespaces.distinct().size() == self.destinationNamespaces.size()",
            ),
        ),
        (
            "self.destinationNamespaces.join(',') == 'a,b'",
            json!({"destinationNamespaces": ["a", "b"]}),
            none.clone(),
        ),
        // Kubernetes' list and regex functions
        (
            "self.ports.map(p, p.port).isSorted()",
            json!({"ports": [{"name": "a", "port": 1}, {"name": "b", "port": 2}]}),
            none.clone(),
        ),
        (
            "self.destinationNamespaces.isSorted()",
            json!({"destinationNamespaces": ["b", "a"]}),
            failed("self.destinationNamespaces.isSorted()"),
        ),
        (
            "self.ports.map(p, p.port).sum() <= 10",
            json!({"ports": [{"name": "a", "port": 4}, {"name": "b", "port": 7}]}),
            failed("self.ports.map(p, p.port).sum() <= 10"),
        ),
        (
            "[1.5, 2.5].sum() == 4.0 && [].sum() == 0",
            json!({}),
            none.clone(),
        ),
        (
            "self.ports.map(p, p.port).min() == 2 && self.ports.map(p, p.port).max() == 9",
            json!({"ports": [{"name": "a", "port": 9}, {"name": "b", "port": 2}]}),
            none.clone(),
        ),
        (
            "self.destinationNamespaces.indexOf('b') == 1 && self.destinationNamespaces.lastIndexOf('a') == 2 && self.destinationNamespaces.indexOf('z') == -1",
            json!({"destinationNamespaces": ["a", "b", "a"]}),
            none.clone(),
        ),
        (
            "self.name.find('[0-9]+') == '42' && self.name.findAll('[a-z]') == ['a', 'b'] && self.name.findAll('[a-z]', 1) == ['a']",
            json!({"name": "a42b"}),
            none.clone(),
        ),
        // int-or-string, escaped names
        (
            "type(self.port) == int ? self.port > 0 : self.port.endsWith('%')",
            json!({"port": 80}),
            none.clone(),
        ),
        (
            "type(self.port) == int ? self.port > 0 : self.port.endsWith('%')",
            json!({"port": "50"}),
            failed("type(self.port) == int ? self.port > 0 : self.port.endsWith('%')"),
        ),
        (
            "self.x__dash__y == 'v' && self.__in__ == 'w'",
            json!({"x-y": "v", "in": "w"}),
            none.clone(),
        ),
    ];
    for (rule, spec, want) in cases {
        let s = spec_schema(props(), json!([{"rule": rule}]));
        assert_eq!(run(&s, spec.clone(), None), want, "{rule} on {spec}");
    }
}

#[test]
fn message_message_expression_field_path_and_reason_shape_the_error() {
    let cases: Vec<(Value, &str)> = vec![
        (
            json!({"rule": "self.replicas < 3", "message": "  too many  "}),
            "spec: Invalid value: \"object\": too many",
        ),
        (
            json!({"rule": "self.replicas < 3", "messageExpression": "'replicas is ' + string(self.replicas)"}),
            "spec: Invalid value: \"object\": replicas is 5",
        ),
        // A messageExpression that fails falls back to the message.
        (
            json!({"rule": "self.replicas < 3", "message": "m", "messageExpression": "self.nope2"}),
            "",
        ),
        (
            json!({"rule": "self.replicas < 3", "message": "m", "messageExpression": "'' "}),
            "spec: Invalid value: \"object\": m",
        ),
        (
            json!({"rule": "self.replicas < 3", "fieldPath": ".replicas", "message": "m"}),
            "spec.replicas: Invalid value: \"object\": m",
        ),
        (
            json!({"rule": "self.replicas < 3", "fieldPath": ".labels['a.b']", "message": "m"}),
            "spec.labels.a.b: Invalid value: \"object\": m",
        ),
        (
            json!({"rule": "self.replicas < 3", "reason": "FieldValueForbidden", "message": "m"}),
            "spec: Forbidden: m",
        ),
        (
            json!({"rule": "self.replicas < 3", "reason": "FieldValueRequired", "message": "m"}),
            "spec: Required value: m",
        ),
        (
            json!({"rule": "self.replicas < 3", "reason": "FieldValueDuplicate", "message": "m"}),
            "spec: Duplicate value: \"object\"",
        ),
    ];
    for (rule, want) in cases {
        let schema = json!({"type": "object", "properties": {"spec": {
            "type": "object", "properties": props(), "x-kubernetes-validations": [rule.clone()]}}});
        let s = match Structural::from_json(&schema, "s") {
            Ok(s) => s,
            Err(errs) if want.is_empty() => {
                // An undefined field in a messageExpression is a compile error.
                assert!(
                    errs[0]
                        .to_string()
                        .contains("messageExpression compilation failed"),
                    "{errs:?}"
                );
                continue;
            }
            Err(errs) => panic!("{rule}: {errs:?}"),
        };
        let got = run(&s, json!({"replicas": 5}), None);
        assert_eq!(got, vec![want.to_string()], "{rule}");
    }
}

#[test]
fn rules_at_the_root_report_nil_and_see_apiversion_kind_and_name() {
    let schema = json!({"type": "object",
        "x-kubernetes-validations": [
            {"rule": "self.metadata.name.startsWith('n')"},
            {"rule": "self.kind == 'X' && self.apiVersion == 'x.io/v1'"},
            {"rule": "has(self.spec)", "message": "spec is required"}],
        "properties": {"spec": {"type": "object", "properties": {}}}});
    let s = Structural::from_json(&schema, "s").expect("structural");
    let obj = json!({"apiVersion": "x.io/v1", "kind": "X", "metadata": {"name": "m"}});
    let got: Vec<String> = validate(&s, &obj, None)
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        got,
        [
            "<nil>: Invalid value: \"object\": failed rule: self.metadata.name.startsWith('n')",
            "<nil>: Invalid value: \"object\": spec is required",
        ]
    );
}

#[test]
fn transition_rules_run_only_on_update_with_the_old_value() {
    let s = spec_schema(
        props(),
        json!([{"rule": "self.name == oldSelf.name", "message": "name is immutable"}]),
    );
    assert_eq!(run(&s, json!({"name": "a"}), None), Vec::<String>::new());
    assert_eq!(
        run(&s, json!({"name": "a"}), Some(json!({"name": "a"}))),
        Vec::<String>::new()
    );
    assert_eq!(
        run(&s, json!({"name": "b"}), Some(json!({"name": "a"}))),
        ["spec: Invalid value: \"object\": name is immutable"]
    );
    // A field rule whose old value is absent is skipped.
    let field = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "name": {"type": "string", "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "immutable"}]}}}}});
    let s = Structural::from_json(&field, "s").expect("structural");
    assert_eq!(
        run(&s, json!({"name": "b"}), Some(json!({}))),
        Vec::<String>::new()
    );
    assert_eq!(
        run(&s, json!({"name": "b"}), Some(json!({"name": "a"}))),
        ["spec.name: Invalid value: \"string\": immutable"]
    );
}

#[test]
fn rules_do_not_recheck_values_an_update_leaves_unchanged() {
    let s = spec_schema(
        props(),
        json!([{"rule": "self.replicas < 3", "message": "too many"},
               {"rule": "self.replicas <= oldSelf.replicas", "message": "no growth"}]),
    );
    // Created before the rule, say: unchanged on update, so only the transition rule runs.
    assert_eq!(
        run(&s, json!({"replicas": 5}), Some(json!({"replicas": 5}))),
        Vec::<String>::new()
    );
    assert_eq!(
        run(&s, json!({"replicas": 6}), Some(json!({"replicas": 5}))),
        [
            "spec: Invalid value: \"object\": too many",
            "spec: Invalid value: \"object\": no growth"
        ]
    );
    // Items of an unchanged atomic list are unchanged too.
    let items = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "tags": {"type": "array", "items": {"type": "string",
            "x-kubernetes-validations": [{"rule": "self.size() < 3"}]}}}}}});
    let s = Structural::from_json(&items, "s").expect("structural");
    let tags = json!({"tags": ["long"]});
    assert_eq!(
        run(&s, tags.clone(), Some(tags.clone())),
        Vec::<String>::new()
    );
    assert_eq!(
        run(&s, json!({"tags": ["long", "x"]}), Some(tags)).len(),
        1,
        "a changed list is checked again"
    );
}

#[test]
fn defaults_must_pass_the_rules_of_their_node() {
    let schema = |default: Value| {
        json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "mode": {"type": "string", "default": default,
                "x-kubernetes-validations": [{"rule": "self.startsWith('m-')", "message": "mode starts with m-"}]},
            "window": {"type": "object", "default": {"from": 5, "to": 1},
                "properties": {"from": {"type": "integer"}, "to": {"type": "integer"}},
                "x-kubernetes-validations": [{"rule": "self.from <= self.to", "message": "from before to"}]}}}}})
    };
    assert_eq!(
        compile_errors(schema(json!("fast"))),
        [
            "s.properties[spec].properties[mode].default: Invalid value: \"string\": mode starts with m-",
            "s.properties[spec].properties[window].default: Invalid value: \"object\": from before to",
        ]
    );
}

#[test]
fn optional_old_self_runs_on_create_with_an_optional() {
    let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "replicas": {"type": "integer", "x-kubernetes-validations": [
            {"rule": "!oldSelf.hasValue() || self >= oldSelf.value()", "optionalOldSelf": true,
             "message": "may not shrink"},
            {"rule": "oldSelf.hasValue() || self < 100", "optionalOldSelf": true, "message": "start small"}]}}}}});
    let s = Structural::from_json(&schema, "s").expect("structural");
    assert_eq!(
        run(&s, json!({"replicas": 200}), None),
        ["spec.replicas: Invalid value: \"integer\": start small"]
    );
    assert_eq!(run(&s, json!({"replicas": 5}), None), Vec::<String>::new());
    assert_eq!(
        run(&s, json!({"replicas": 5}), Some(json!({"replicas": 3}))),
        Vec::<String>::new()
    );
    assert_eq!(
        run(&s, json!({"replicas": 2}), Some(json!({"replicas": 3}))),
        ["spec.replicas: Invalid value: \"integer\": may not shrink"]
    );
}

#[test]
fn list_map_items_correlate_with_the_old_item_of_the_same_key() {
    let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "ports": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
            "items": {"type": "object", "properties": {"name": {"type": "string"}, "port": {"type": "integer"}},
                "x-kubernetes-validations": [{"rule": "self.port == oldSelf.port", "message": "port is immutable"}]}}}}}});
    let s = Structural::from_json(&schema, "s").expect("structural");
    let old = json!({"ports": [{"name": "a", "port": 1}, {"name": "b", "port": 2}]});
    let new = json!({"ports": [{"name": "b", "port": 3}, {"name": "c", "port": 9}, {"name": "a", "port": 1}]});
    assert_eq!(
        run(&s, new, Some(old)),
        ["spec.ports[0]: Invalid value: \"object\": port is immutable"]
    );
}

#[test]
fn evaluation_errors_are_causes_not_panics() {
    let s = spec_schema(props(), json!([{"rule": "self.name == 'a'"}]));
    assert_eq!(
        run(&s, json!({}), None),
        ["spec: Invalid value: \"object\": no such key: name evaluating rule: self.name == 'a'"]
    );
    let s = spec_schema(
        props(),
        json!([{"rule": "self.port > 1", "message": "port"}]),
    );
    assert_eq!(
        run(&s, json!({"port": "x"}), None),
        [
            "spec: Invalid value: \"object\": 'no such overload': call arguments did not match a supported operator, function or macro signature for rule: port"
        ]
    );
    let arithmetic = [
        (
            "self.replicas / 0 == 1",
            json!({"replicas": 1}),
            "division by zero",
        ),
        (
            "self.replicas % 0 == 1",
            json!({"replicas": 1}),
            "modulus by zero",
        ),
        (
            "self.replicas - 1 < 0",
            json!({"replicas": i64::MIN}),
            "integer overflow",
        ),
        (
            "self.destinationNamespaces[3] == ''",
            json!({"destinationNamespaces": []}),
            "index out of bounds: 3",
        ),
        (
            "self.name.substring(9) == ''",
            json!({"name": "a"}),
            "error executing function 'substring': index out of range: 9",
        ),
    ];
    for (rule, spec, why) in arithmetic {
        let s = spec_schema(props(), json!([{"rule": rule}]));
        assert_eq!(
            run(&s, spec, None),
            [format!(
                "spec: Invalid value: \"object\": {why} evaluating rule: {rule}"
            )]
        );
    }
    // A result that is not a bool (possible with int-or-string) fails the rule.
    let s = spec_schema(props(), json!([{"rule": "self.port"}]));
    assert_eq!(
        run(&s, json!({"port": "x"}), None),
        ["spec: Invalid value: \"object\": failed rule: self.port"]
    );
}

#[test]
fn rules_that_do_not_compile_are_schema_errors() {
    let on_spec = |rule: Value| {
        json!({"type": "object", "properties": {"spec": {"type": "object", "properties": props(),
            "x-kubernetes-validations": [rule]}}})
    };
    let at = "s.properties[spec].x-kubernetes-validations[0]";
    let cases: Vec<(Value, String)> = vec![
        (on_spec(json!({"rule": "self.name ==="})),
         format!("{at}.rule: Invalid value: \"self.name ===\": compilation failed: ERROR: <input>:1:")),
        (on_spec(json!({"rule": "self.nmae == 'a'"})),
         format!("{at}.rule: Invalid value: \"self.nmae == 'a'\": compilation failed: ERROR: <input>:1:5: undefined field 'nmae'\n | self.nmae == 'a'\n | ....^")),
        (on_spec(json!({"rule": "has(self.nope)"})),
         format!("{at}.rule: Invalid value: \"has(self.nope)\": compilation failed: ERROR: <input>:1:")),
        (on_spec(json!({"rule": "self.name.first == 'a'"})),
         format!("{at}.rule: Invalid value: \"self.name.first == 'a'\": compilation failed: ERROR: <input>:1:10: type 'string' does not support field selection")),
        (on_spec(json!({"rule": "self.ports.all(p, p.nmae != '')"})),
         format!("{at}.rule: Invalid value: \"self.ports.all(p, p.nmae != '')\": compilation failed: ERROR: <input>:1:20: undefined field 'nmae'")),
        (on_spec(json!({"rule": "other == 1"})),
         format!("{at}.rule: Invalid value: \"other == 1\": compilation failed: ERROR: <input>:1:1: undeclared reference to 'other' (in container '')")),
        (on_spec(json!({"rule": ""})), format!("{at}.rule: Required value: rule is not specified")),
        (on_spec(json!({"rule": "true", "reason": "Bad"})),
         format!("{at}.reason: Unsupported value: \"Bad\": supported values: \"FieldValueInvalid\", \"FieldValueForbidden\", \"FieldValueRequired\", \"FieldValueDuplicate\"")),
        (on_spec(json!({"rule": "true", "optionalOldSelf": true})),
         format!("{at}.optionalOldSelf: Invalid value: true: may not be set if rule does not use oldSelf")),
        (on_spec(json!({"rule": "true", "fieldPath": ".nope"})),
         format!("{at}.fieldPath: Invalid value: \".nope\": fieldPath must be a valid path")),
        (on_spec(json!({"rule": "true", "message": "a\nb"})),
         format!("{at}.message: Invalid value: \"a\\nb\": message must not contain line breaks")),
        (on_spec(json!({"rule": "true", "messageExpression": "'a' +"})),
         format!("{at}.messageExpression: Invalid value: \"'a' +\": messageExpression compilation failed: ERROR")),
        (json!({"type": "object", "properties": {"l": {"type": "array",
            "items": {"type": "string", "x-kubernetes-validations": [{"rule": "self == oldSelf"}]}}}}),
         "s.properties[l].items.x-kubernetes-validations[0].rule: Invalid value: \"self == oldSelf\": oldSelf cannot be used on the uncorrelatable portion of the schema within s.properties[l]".to_string()),
        (json!({"type": "object", "properties": {"n": {"type": "integer",
            "allOf": [{"x-kubernetes-validations": [{"rule": "true"}]}]}}}),
         "s.properties[n].allOf[0].x-kubernetes-validations: Forbidden: must be empty to be structural".to_string()),
    ];
    for (schema, want) in cases {
        let got = compile_errors(schema.clone());
        assert!(
            got.iter().any(|g| g.starts_with(&want)),
            "{schema}\nwant: {want}\ngot:  {got:#?}"
        );
    }
}

#[test]
fn rules_deeper_or_longer_than_kubernetes_allows_are_schema_errors() {
    // Issue 11, defect 3: such rules used to overflow the stack when compiled or run.
    let at = "s.properties[spec].x-kubernetes-validations[0]";
    let too_deep = "ERROR: <input>:-1:0: expression recursion limit exceeded: 250";
    let cases = [
        (
            json!({"rule": format!("self.name{} == 'a'", ".x".repeat(1_000))}),
            format!("{at}.rule"),
            format!("compilation failed: {too_deep}"),
        ),
        (
            json!({"rule": "true", "messageExpression": format!("'a'{}", " + 'a'".repeat(300))}),
            format!("{at}.messageExpression"),
            format!("messageExpression compilation failed: {too_deep}"),
        ),
        (
            json!({"rule": "x".repeat(100_001)}),
            format!("{at}.rule"),
            "compilation failed: ERROR: <input>:-1:0: expression code point size exceeds limit: size: 100001, limit 100000".to_string(),
        ),
    ];
    for (rule, field, message) in cases {
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object",
            "properties": props(), "x-kubernetes-validations": [rule]}}});
        let errs = Structural::from_json(&schema, "s").expect_err("refused");
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert_eq!(errs[0].field, field);
        assert!(errs[0].to_string().ends_with(&message), "{}", errs[0]);
    }
}

#[test]
fn rules_that_compile_are_accepted_with_their_schema() {
    let rules = [
        "self.ports.all(p, p.name != '' && p.port > 0)",
        "self.labels.all(k, k.startsWith('a') && self.labels[k] != '')",
        "self.labels.?team.orValue('') != 'x'",
        "[1, 2].exists(x, x == 2) && {'a': 1}.a == 1",
        "self.destinationNamespaces.map(n, n.size()).all(s, s > 0)",
        "optional.of(1).hasValue()",
        "type(self.port) == string || int(self.port) > 0",
        "self.ports.exists(p, has(p.port))",
    ];
    for rule in rules {
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": props(),
            "x-kubernetes-validations": [{"rule": rule}]}}});
        assert_eq!(compile_errors(schema), Vec::<String>::new(), "{rule}");
    }
}

#[test]
fn property_names_are_escaped_as_kubernetes_escapes_them() {
    let cases = [
        ("name", Some("name")),
        ("x-y", Some("x__dash__y")),
        ("a.b/c", Some("a__dot__b__slash__c")),
        ("a__b", Some("a__underscores__b")),
        ("namespace", Some("__namespace__")),
        ("1abc", None),
        ("a b", None),
    ];
    for (name, want) in cases {
        assert_eq!(escape(name).as_deref(), want, "{name}");
    }
}

#[test]
fn schemas_without_rules_have_nothing_to_evaluate() {
    let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": props()}}});
    let s = Structural::from_json(&schema, "s").expect("structural");
    assert!(!s.has_rules());
    let s = spec_schema(props(), json!([{"rule": "true"}]));
    assert!(s.has_rules() && s.rules.is_none());
}
