//! Tests of `selector/label.rs`.

use serde_json::json;

use super::*;
use crate::api::validation::{LABEL_VALUE_FORMAT, NAME_PART_FORMAT, SUBDOMAIN_FORMAT};

fn parsed(selector: &str) -> LabelSelector {
    match LabelSelector::parse(selector) {
        Ok(parsed) => parsed,
        Err(error) => panic!("{selector:?} did not parse: {error}"),
    }
}

fn parse_error(selector: &str) -> String {
    match LabelSelector::parse(selector) {
        Ok(parsed) => panic!("{selector:?} unexpectedly parsed as {parsed:?}"),
        Err(error) => error.to_string(),
    }
}

fn from_json(selector: Value) -> Result<LabelSelector, SelectorError> {
    LabelSelector::from_label_selector_json(&selector)
}

fn labels(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        other => panic!("labels must be an object, got {other}"),
    }
}

/// Whether `selector` selects an object with `labels`.
fn selects(selector: &str, object_labels: Value) -> bool {
    parsed(selector).matches(Some(&labels(object_labels)))
}

#[test]
fn the_empty_selector_matches_everything() {
    let selector = parsed("");
    assert!(selector.is_empty());
    assert!(selector.matches(None));
    assert!(selector.matches(Some(&labels(json!({"a": "b"})))));
    assert!(parsed("  \t ").is_empty());
    assert_eq!(selector.to_string(), "");
}

#[test]
fn equality_requires_the_label_with_that_value() {
    for selector in ["app=web", "app==web", " app = web "] {
        assert!(
            selects(selector, json!({"app": "web", "x": "y"})),
            "{selector}"
        );
        assert!(!selects(selector, json!({"app": "db"})), "{selector}");
        assert!(!selects(selector, json!({})), "{selector}");
    }
    assert!(!parsed("app=web").matches(None));
}

#[test]
fn inequality_accepts_an_absent_label() {
    assert!(selects("app!=web", json!({})));
    assert!(selects("app!=web", json!({"app": "db"})));
    assert!(!selects("app!=web", json!({"app": "web"})));
    assert!(parsed("app!=web").matches(None));
}

#[test]
fn set_membership_follows_kubernetes() {
    assert!(selects("env in (prod, staging)", json!({"env": "staging"})));
    assert!(!selects("env in (prod,staging)", json!({"env": "dev"})));
    assert!(!selects("env in (prod,staging)", json!({})));
    assert!(selects("env notin (prod,staging)", json!({})));
    assert!(selects("env notin (prod,staging)", json!({"env": "dev"})));
    assert!(!selects("env notin (prod,staging)", json!({"env": "prod"})));
}

#[test]
fn existence_and_absence() {
    assert!(selects("app", json!({"app": ""})));
    assert!(!selects("app", json!({})));
    assert!(selects("!app", json!({"other": "x"})));
    assert!(!selects("! app", json!({"app": "x"})));
    assert!(
        selects("app", json!({"app": "x", "legacy": "y"}))
            && !selects("app,!legacy", json!({"app": "x", "legacy": "y"}))
    );
}

#[test]
fn greater_and_less_than_compare_integers() {
    assert!(selects("replicas>5", json!({"replicas": "6"})));
    assert!(!selects("replicas>5", json!({"replicas": "5"})));
    assert!(!selects("replicas>5", json!({"replicas": "many"})));
    assert!(!selects("replicas>5", json!({})));
    assert!(selects("replicas<5", json!({"replicas": "4"})));
    assert!(!selects("replicas<5", json!({"replicas": "10"})));
}

#[test]
fn commas_combine_requirements_with_and() {
    let selector = "env in (a,b),!legacy,tier=web";
    assert!(selects(selector, json!({"env": "a", "tier": "web"})));
    assert!(!selects(
        selector,
        json!({"env": "a", "tier": "web", "legacy": "1"})
    ));
    assert!(!selects(selector, json!({"env": "c", "tier": "web"})));
}

#[test]
fn keywords_can_be_keys_and_values() {
    assert!(selects("in=notin", json!({"in": "notin"})));
    assert!(selects("notin in (in)", json!({"notin": "in"})));
}

#[test]
fn missing_values_are_the_empty_string() {
    assert!(selects("app=", json!({"app": ""})));
    assert!(!selects("app=", json!({"app": "x"})));
    assert!(selects("app in ()", json!({"app": ""})));
    assert!(selects("app in (,x)", json!({"app": ""})));
    assert_eq!(parsed("app in (x,)").to_string(), "app in (,x)");
}

#[test]
fn null_and_non_string_label_values() {
    assert!(selects("!app", json!({"app": null})));
    assert!(selects("app", json!({"app": 1})));
    assert!(!selects("app=1", json!({"app": 1})));
}

#[test]
fn display_is_the_canonical_kubernetes_form() {
    assert_eq!(
        parsed(" tier in (b, a, a) , app==web,!legacy, n>3").to_string(),
        "app=web,!legacy,n>3,tier in (a,b)"
    );
    assert_eq!(parsed("x notin (z,y)").to_string(), "x notin (y,z)");
    assert_eq!(parsed("a!=b,c<7").to_string(), "a!=b,c<7");
}

#[test]
fn invalid_keys_are_reported_like_kubernetes() {
    assert_eq!(
        parse_error("-app=web"),
        format!(
            "unable to parse requirement: <nil>: Invalid value: \"-app\": name part {NAME_PART_FORMAT}"
        )
    );
    assert_eq!(
        parse_error("Example.com/app"),
        format!(
            "unable to parse requirement: <nil>: Invalid value: \"Example.com/app\": prefix part {SUBDOMAIN_FORMAT}"
        )
    );
    assert!(parse_error("/app").contains("prefix part must be non-empty"));
    assert!(parse_error("a/b/c").contains("a qualified name must consist of"));
    let long = "k".repeat(64);
    assert!(parse_error(&long).ends_with("name part must be no more than 63 characters"));
    let long_prefix = format!("{}/app", "p".repeat(254));
    assert!(parse_error(&long_prefix).contains("prefix part must be no more than 253 characters"));
    assert!(
        parse_error("app$=x")
            .starts_with("unable to parse requirement: <nil>: Invalid value: \"app$\"")
    );
}

#[test]
fn valid_keys_include_prefixes_and_the_full_charset() {
    assert!(selects(
        "app.kubernetes.io/name=web",
        json!({"app.kubernetes.io/name": "web"})
    ));
    assert!(selects("A_b-c.9", json!({"A_b-c.9": "x"})));
    let longest = "k".repeat(63);
    assert!(LabelSelector::parse(&longest).is_ok());
}

#[test]
fn invalid_values_are_reported_like_kubernetes() {
    assert_eq!(
        parse_error("app=-web"),
        format!(
            "unable to parse requirement: values[0][app]: Invalid value: \"-web\": {LABEL_VALUE_FORMAT}"
        )
    );
    assert!(
        parse_error("app in (bad_,a1)")
            .starts_with("unable to parse requirement: values[1][app]: Invalid value: \"bad_\"")
    );
    let long = "v".repeat(64);
    assert!(parse_error(&format!("app={long}")).ends_with("must be no more than 63 characters"));
    assert_eq!(
        parse_error("n>five"),
        "unable to parse requirement: values[0]: Invalid value: \"five\": for 'Gt', 'Lt' operators, the value must be an integer"
    );
    assert!(parse_error("n<-1").contains("values[0][n]: Invalid value: \"-1\""));
}

#[test]
fn syntax_errors_name_the_token() {
    assert_eq!(
        parse_error("app in a"),
        "unable to parse requirement: found 'a', expected: '('"
    );
    assert_eq!(
        parse_error("app web"),
        "unable to parse requirement: found 'web', expected: in, notin, =, ==, !=, gt, lt"
    );
    assert_eq!(
        parse_error("app=web x"),
        "found 'x', expected: ',' or 'end of string'"
    );
    assert_eq!(
        parse_error("app=web,"),
        "found '', expected: identifier after ','"
    );
    assert_eq!(
        parse_error(",app"),
        "found ',', expected: !, identifier, or 'end of string'"
    );
    assert_eq!(
        parse_error("app in (a b)"),
        "unable to parse requirement: found 'b', expected: ',' or ')'"
    );
    assert_eq!(
        parse_error("app in (a"),
        "unable to parse requirement: found '', expected: ',' or ')'"
    );
    assert_eq!(
        parse_error("app=(a)"),
        "unable to parse requirement: found '(', expected: identifier"
    );
    assert_eq!(
        parse_error("!=a"),
        "found '!=', expected: !, identifier, or 'end of string'"
    );
    assert_eq!(
        parse_error("!app=x"),
        "found '=', expected: ',' or 'end of string'"
    );
    assert_eq!(
        parse_error("a>=1"),
        "unable to parse requirement: found '=', expected: identifier"
    );
}

#[test]
fn label_selector_objects_convert_to_requirements() {
    let selector = from_json(json!({
    "matchLabels": {"tier": "web", "app": "shop"},
    "matchExpressions": [
        {"key": "env", "operator": "In", "values": ["prod", "dev"]},
        {"key": "legacy", "operator": "DoesNotExist"},
        {"key": "zone", "operator": "NotIn", "values": ["b"]},
        {"key": "owner", "operator": "Exists", "values": null}
    ]}));
    let selector = match selector {
        Ok(selector) => selector,
        Err(error) => panic!("conversion failed: {error}"),
    };
    assert_eq!(
        selector.to_string(),
        "app=shop,env in (dev,prod),!legacy,owner,tier=web,zone notin (b)"
    );
    assert!(selector.matches(Some(&labels(
        json!({"app": "shop", "tier": "web", "env": "prod", "owner": "me"})
    ))));
    assert!(!selector.matches(Some(&labels(
        json!({"app": "shop", "tier": "web", "env": "prod"})
    ))));
}

#[test]
fn an_empty_label_selector_object_selects_everything() {
    for selector in [
        json!({}),
        json!({"matchLabels": {}, "matchExpressions": []}),
        json!({"matchLabels": null}),
    ] {
        assert_eq!(from_json(selector).map(|s| s.is_empty()), Ok(true));
    }
}

#[test]
fn deployment_selector_renders_the_scale_status_selector() {
    let deployment = json!({"spec": {"selector": {"matchLabels": {"app": "web"}}}});
    let selector = from_json(deployment["spec"]["selector"].clone()).map(|s| s.to_string());
    assert_eq!(selector, Ok("app=web".to_owned()));
}

#[test]
fn invalid_label_selector_objects_are_rejected() {
    let error = |selector: Value| {
        from_json(selector)
            .map(|s| s.to_string())
            .map_err(|e| e.to_string())
    };
    assert_eq!(
        error(json!({"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]})),
        Err("\"Gt\" is not a valid label selector operator".to_owned())
    );
    assert_eq!(
        error(json!({"matchExpressions": [{"key": "a", "operator": "In", "values": []}]})),
        Err("values: Invalid value: []string{}: for 'in', 'notin' operators, values set can't be empty".to_owned())
    );
    assert_eq!(
        error(json!({"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x", "y"]}]})),
        Err("values: Invalid value: []string{\"x\", \"y\"}: values set must be empty for exists and does not exist".to_owned())
    );
    assert_eq!(
        error(json!({"matchLabels": {"a b": "x"}})),
        Err(format!(
            "key: Invalid value: \"a b\": name part {NAME_PART_FORMAT}"
        ))
    );
    assert_eq!(
        error(json!({"matchLabels": {"app": "x y"}})),
        Err(format!(
            "values[0][app]: Invalid value: \"x y\": {LABEL_VALUE_FORMAT}"
        ))
    );
    assert_eq!(
        error(json!(null)),
        Err("invalid label selector: a label selector must be an object".to_owned())
    );
    assert_eq!(
        error(json!({"matchLabels": {"a": 1}})),
        Err("invalid label selector: matchLabels values must be strings".to_owned())
    );
    assert_eq!(
        error(json!({"matchExpressions": {}})),
        Err("invalid label selector: matchExpressions must be a list".to_owned())
    );
}

/// A small deterministic generator (64-bit LCG), so the round-trip test needs no crates.
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, bound: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        // The high bits of an LCG are the well-mixed ones; the result is < bound.
        usize::try_from((self.0 >> 33) % bound as u64).unwrap_or_default()
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }
}

#[test]
fn display_then_parse_round_trips_generated_selectors() {
    const KEYS: &[&str] = &[
        "app",
        "tier",
        "in",
        "notin",
        "app.kubernetes.io/name",
        "example.com/a_b-c.9",
        "X",
    ];
    const VALUES: &[&str] = &["", "web", "in", "notin", "1.0", "x_y-z", "A9", "prod"];
    let mut random = Lcg(42);
    for _ in 0..500 {
        let mut requirements = Vec::new();
        for _ in 0..random.below(5) {
            let key = random.pick(KEYS).to_owned();
            let value = random.pick(VALUES).to_owned();
            let set = |random: &mut Lcg| {
                let values: Vec<&str> =
                    (0..=random.below(3)).map(|_| random.pick(VALUES)).collect();
                canonical_set(&values)
            };
            let bound = i64::try_from(random.below(1000)).unwrap_or_default();
            let operator = match random.below(8) {
                0 => Operator::Equals(value),
                1 => Operator::NotEquals(value),
                2 => Operator::In(set(&mut random)),
                3 => Operator::NotIn(set(&mut random)),
                4 => Operator::Exists,
                5 => Operator::DoesNotExist,
                6 => Operator::GreaterThan(bound),
                _ => Operator::LessThan(bound),
            };
            requirements.push(Requirement { key, operator });
        }
        let selector = LabelSelector::from_requirements(requirements);
        let text = selector.to_string();
        assert_eq!(LabelSelector::parse(&text), Ok(selector), "{text}");
    }
}
