//! Namespace label selectors: validated once, then matched against namespaces' labels.
//!
//! The CRD schema cannot check a `LabelSelector` beyond its shape (an operator is any string),
//! so a spec can name an operator that does not exist, or `In` without values. [`Selector::parse`]
//! rejects those with a message for the `InvalidSpec` condition; the API server's own rules
//! for label keys and values apply.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

/// A validated label selector. The empty selector matches everything.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Selector {
    requirements: Vec<Requirement>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Requirement {
    key: String,
    op: Op,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Op {
    In(Vec<String>),
    NotIn(Vec<String>),
    Exists,
    DoesNotExist,
}

impl Selector {
    /// Validates `selector`; the error says what is wrong, for a human.
    pub(crate) fn parse(selector: &LabelSelector) -> Result<Selector, String> {
        let mut requirements = Vec::new();
        for (key, value) in selector.match_labels.iter().flatten() {
            check_key(key)?;
            check_value(key, value)?;
            requirements.push(Requirement {
                key: key.clone(),
                op: Op::In(vec![value.clone()]),
            });
        }
        for expr in selector.match_expressions.iter().flatten() {
            check_key(&expr.key)?;
            let values = expr.values.clone().unwrap_or_default();
            let op = match expr.operator.as_str() {
                "In" | "NotIn" => {
                    if values.is_empty() {
                        return Err(format!(
                            "namespaceSelector: operator {} on key {:?} needs at least one value",
                            expr.operator, expr.key
                        ));
                    }
                    for v in &values {
                        check_value(&expr.key, v)?;
                    }
                    if expr.operator == "In" {
                        Op::In(values)
                    } else {
                        Op::NotIn(values)
                    }
                }
                "Exists" | "DoesNotExist" => {
                    if !values.is_empty() {
                        return Err(format!(
                            "namespaceSelector: operator {} on key {:?} takes no values",
                            expr.operator, expr.key
                        ));
                    }
                    if expr.operator == "Exists" {
                        Op::Exists
                    } else {
                        Op::DoesNotExist
                    }
                }
                other => {
                    return Err(format!(
                        "namespaceSelector: unknown operator {other:?} on key {:?} (In, NotIn, Exists or DoesNotExist)",
                        expr.key
                    ));
                }
            };
            requirements.push(Requirement {
                key: expr.key.clone(),
                op,
            });
        }
        Ok(Selector { requirements })
    }

    /// Whether an object with `labels` matches.
    pub(crate) fn matches(&self, labels: Option<&BTreeMap<String, String>>) -> bool {
        self.requirements.iter().all(|r| {
            let value = labels.and_then(|l| l.get(&r.key));
            match &r.op {
                Op::In(values) => value.is_some_and(|v| values.contains(v)),
                Op::NotIn(values) => value.is_none_or(|v| !values.contains(v)),
                Op::Exists => value.is_some(),
                Op::DoesNotExist => value.is_none(),
            }
        })
    }
}

/// A label name: 1–63 alphanumerics, `-`, `_` or `.`, starting and ending alphanumeric.
fn is_label_name(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

/// A DNS-1123 subdomain (a label key's prefix).
fn is_dns_subdomain(s: &str) -> bool {
    s.len() <= 253
        && s.split('.').all(|part| {
            let b = part.as_bytes();
            !b.is_empty()
                && b[0].is_ascii_alphanumeric()
                && b[b.len() - 1].is_ascii_alphanumeric()
                && b.iter()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        })
}

fn check_key(key: &str) -> Result<(), String> {
    let valid = match key.split_once('/') {
        Some((prefix, name)) => is_dns_subdomain(prefix) && is_label_name(name),
        None => is_label_name(key),
    };
    if valid {
        Ok(())
    } else {
        Err(format!(
            "namespaceSelector: {key:?} is not a valid label key"
        ))
    }
}

fn check_value(key: &str, value: &str) -> Result<(), String> {
    if value.is_empty() || is_label_name(value) {
        Ok(())
    } else {
        Err(format!(
            "namespaceSelector: {value:?} is not a valid value for label {key:?}"
        ))
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn expr(key: &str, op: &str, values: &[&str]) -> LabelSelectorRequirement {
        LabelSelectorRequirement {
            key: key.to_owned(),
            operator: op.to_owned(),
            values: (!values.is_empty()).then(|| values.iter().map(|v| (*v).to_owned()).collect()),
        }
    }

    #[test]
    fn match_labels_and_expressions_must_all_hold() {
        let selector = Selector::parse(&LabelSelector {
            match_labels: Some(labels(&[("team", "a")])),
            match_expressions: Some(vec![
                expr("env", "In", &["dev", "test"]),
                expr("frozen", "DoesNotExist", &[]),
                expr("tier", "NotIn", &["db"]),
                expr("kore.dev/sync", "Exists", &[]),
            ]),
        })
        .expect("valid");
        let ok = labels(&[("team", "a"), ("env", "dev"), ("kore.dev/sync", "")]);
        assert!(selector.matches(Some(&ok)));
        let mut frozen = ok.clone();
        frozen.insert("frozen".into(), "yes".into());
        assert!(!selector.matches(Some(&frozen)));
        let mut db = ok.clone();
        db.insert("tier".into(), "db".into());
        assert!(!selector.matches(Some(&db)));
        assert!(!selector.matches(Some(&labels(&[("team", "a"), ("env", "dev")]))));
        assert!(!selector.matches(None));
    }

    #[test]
    fn the_empty_selector_matches_everything() {
        let selector = Selector::parse(&LabelSelector::default()).expect("valid");
        assert!(selector.matches(None));
        assert!(selector.matches(Some(&labels(&[("a", "b")]))));
    }

    #[test]
    fn selectors_that_can_never_work_are_rejected_with_a_reason() {
        for (bad, why) in [
            (expr("env", "Equals", &["dev"]), "unknown operator"),
            (expr("env", "In", &[]), "at least one value"),
            (expr("env", "Exists", &["x"]), "takes no values"),
            (expr("-env", "Exists", &[]), "not a valid label key"),
            (
                expr("Bad_Prefix/env", "Exists", &[]),
                "not a valid label key",
            ),
            (expr("env", "In", &["no spaces"]), "not a valid value"),
        ] {
            let err = Selector::parse(&LabelSelector {
                match_expressions: Some(vec![bad.clone()]),
                ..LabelSelector::default()
            })
            .expect_err("invalid");
            assert!(err.contains(why), "{bad:?}: {err}");
        }
    }
}
