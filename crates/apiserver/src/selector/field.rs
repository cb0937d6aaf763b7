//! Field selectors: the `fieldSelector=` query string (`metadata.name=demo,status.phase!=Failed`).
//!
//! Where to start: [`FieldSelector::parse`], then [`FieldSelector::matches`] with a function
//! that reads a field of the object at hand.
//!
//! What it does not do: decide which fields a kind supports, or read them from objects. The
//! caller checks each of [`FieldSelector::requirements`] against the kind's table (spec §8.2)
//! and answers `field label not supported: <key>` (built-ins) or
//! `"<key>" is not a known field selector: …` (custom resources) itself.
//!
//! Syntax, as Kubernetes' `fields.ParseSelector` reads it: terms separated by commas (a comma
//! preceded by a backslash does not separate), each `field=value`, `field==value` or
//! `field!=value`, split at the first operator. Empty terms are skipped. In values, `\,` `\=`
//! and `\\` stand for `,` `=` and `\`; any other backslash, and a bare `=`, are errors. Nothing
//! is trimmed: `a = b` is the field `"a "` and the value `" b"`, as in Kubernetes.

use std::fmt;

use super::SelectorError;

/// A parsed field selector: a conjunction of requirements. The default selects everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct FieldSelector {
    /// The requirements, in input order.
    requirements: Vec<FieldRequirement>,
}

/// One term of a field selector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FieldRequirement {
    /// The field, e.g. `metadata.name`; not validated here.
    pub(crate) field: String,
    /// How the field's value compares with [`FieldRequirement::value`].
    pub(crate) op: FieldOp,
    /// The value, unescaped.
    pub(crate) value: String,
}

/// A field selector operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FieldOp {
    /// `=` or `==`: the field equals the value.
    Eq,
    /// `!=`: the field differs from the value.
    NotEq,
}

impl FieldSelector {
    /// Parses the `fieldSelector=` query string form. The empty string selects everything.
    ///
    /// # Errors
    ///
    /// [`SelectorError::FieldTermNotUnderstood`] for a term without an operator,
    /// [`SelectorError::InvalidEscapeSequence`] and [`SelectorError::UnescapedCharacter`] for
    /// badly escaped values.
    pub(crate) fn parse(selector: &str) -> Result<Self, SelectorError> {
        let mut requirements = Vec::new();
        for term in split_terms(selector)
            .into_iter()
            .filter(|term| !term.is_empty())
        {
            let Some((field, op, raw_value)) = split_term(term) else {
                return Err(SelectorError::FieldTermNotUnderstood {
                    selector: selector.to_owned(),
                    term: term.to_owned(),
                });
            };
            requirements.push(FieldRequirement {
                field: field.to_owned(),
                op,
                value: unescape(raw_value)?,
            });
        }
        Ok(Self { requirements })
    }

    /// The requirements, in input order, for the caller to check the fields against the kind.
    pub(crate) fn requirements(&self) -> &[FieldRequirement] {
        &self.requirements
    }

    /// Whether an object is selected; `get` returns the value of a field of that object. A
    /// field `get` does not know counts as the empty string, as in Kubernetes.
    pub(crate) fn matches(&self, get: impl Fn(&str) -> Option<String>) -> bool {
        self.requirements.iter().all(|requirement| {
            let actual = get(&requirement.field).unwrap_or_default();
            match requirement.op {
                FieldOp::Eq => actual == requirement.value,
                FieldOp::NotEq => actual != requirement.value,
            }
        })
    }

    /// Whether the selector has no requirements, i.e. selects everything.
    pub(crate) fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }
}

impl fmt::Display for FieldSelector {
    /// Writes the string form, values escaped, `==` written as `=`: `metadata.name=a\,b`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (index, requirement) in self.requirements.iter().enumerate() {
            if index > 0 {
                f.write_str(",")?;
            }
            let op = match requirement.op {
                FieldOp::Eq => "=",
                FieldOp::NotEq => "!=",
            };
            write!(f, "{}{op}{}", requirement.field, escape(&requirement.value))?;
        }
        Ok(())
    }
}

/// Splits at commas that are not escaped with a backslash; escapes stay in place.
fn split_terms(selector: &str) -> Vec<&str> {
    let mut terms = Vec::new();
    let mut start = 0;
    let mut escaped = false;
    for (index, c) in selector.char_indices() {
        if escaped {
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if c == ',' {
            terms.push(&selector[start..index]);
            start = index + 1;
        }
    }
    terms.push(&selector[start..]);
    terms
}

/// Splits a term at its first operator; `!=` and `==` win over `=` at the same position.
fn split_term(term: &str) -> Option<(&str, FieldOp, &str)> {
    term.char_indices().find_map(|(index, _)| {
        let rest = &term[index..];
        let (op, length) = if rest.starts_with("!=") {
            (FieldOp::NotEq, 2)
        } else if rest.starts_with("==") {
            (FieldOp::Eq, 2)
        } else if rest.starts_with('=') {
            (FieldOp::Eq, 1)
        } else {
            return None;
        };
        Some((&term[..index], op, &rest[length..]))
    })
}

/// Undoes [`escape`]: `\\`, `\,` and `\=` become `\`, `,` and `=`.
fn unescape(raw: &str) -> Result<String, SelectorError> {
    let mut value = String::with_capacity(raw.len());
    let mut escaped = false;
    for c in raw.chars() {
        if escaped {
            if !matches!(c, '\\' | ',' | '=') {
                return Err(SelectorError::InvalidEscapeSequence {
                    sequence: format!("\\{c}"),
                });
            }
            value.push(c);
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if matches!(c, ',' | '=') {
            return Err(SelectorError::UnescapedCharacter { character: c });
        } else {
            value.push(c);
        }
    }
    if escaped {
        return Err(SelectorError::InvalidEscapeSequence {
            sequence: "\\".to_owned(),
        });
    }
    Ok(value)
}

/// Escapes `\`, `,` and `=` in a value with a backslash.
fn escape(value: &str) -> String {
    let mut escaped = String::with_capacity(value.len());
    for c in value.chars() {
        if matches!(c, '\\' | ',' | '=') {
            escaped.push('\\');
        }
        escaped.push(c);
    }
    escaped
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn parsed(selector: &str) -> FieldSelector {
        match FieldSelector::parse(selector) {
            Ok(parsed) => parsed,
            Err(error) => panic!("{selector:?} did not parse: {error}"),
        }
    }

    fn parse_error(selector: &str) -> String {
        match FieldSelector::parse(selector) {
            Ok(parsed) => panic!("{selector:?} unexpectedly parsed as {parsed:?}"),
            Err(error) => error.to_string(),
        }
    }

    fn requirement(field: &str, op: FieldOp, value: &str) -> FieldRequirement {
        FieldRequirement {
            field: field.to_owned(),
            op,
            value: value.to_owned(),
        }
    }

    /// Whether `selector` selects an object with these fields.
    fn selects(selector: &str, fields: &[(&str, &str)]) -> bool {
        let fields: BTreeMap<&str, &str> = fields.iter().copied().collect();
        parsed(selector).matches(|field| fields.get(field).map(|value| (*value).to_owned()))
    }

    #[test]
    fn the_empty_selector_matches_everything() {
        let selector = parsed("");
        assert!(selector.is_empty());
        assert!(selector.requirements().is_empty());
        assert!(selector.matches(|_| None));
        assert!(parsed(",,").is_empty());
        assert_eq!(selector.to_string(), "");
    }

    #[test]
    fn the_three_operators_parse_into_requirements() {
        let selector = parsed("metadata.name=demo,status.phase==Running,spec.nodeName!=n1");
        assert_eq!(
            selector.requirements(),
            &[
                requirement("metadata.name", FieldOp::Eq, "demo"),
                requirement("status.phase", FieldOp::Eq, "Running"),
                requirement("spec.nodeName", FieldOp::NotEq, "n1"),
            ]
        );
        assert!(!selector.is_empty());
    }

    #[test]
    fn kubectl_wait_selects_one_object_by_name() {
        assert!(selects(
            "metadata.name=demo",
            &[("metadata.name", "demo"), ("metadata.namespace", "default")]
        ));
        assert!(!selects(
            "metadata.name=demo",
            &[("metadata.name", "other")]
        ));
    }

    #[test]
    fn a_missing_field_counts_as_the_empty_string() {
        assert!(selects("spec.nodeName=", &[]));
        assert!(!selects("spec.nodeName!=", &[]));
        assert!(selects("spec.nodeName!=n1", &[]));
        assert!(!selects("spec.nodeName=n1", &[]));
    }

    #[test]
    fn commas_combine_terms_with_and() {
        let fields = [("metadata.name", "a"), ("status.phase", "Running")];
        assert!(selects("metadata.name=a,status.phase=Running", &fields));
        assert!(!selects("metadata.name=a,status.phase!=Running", &fields));
    }

    #[test]
    fn escaped_characters_belong_to_the_value() {
        let selector = parsed(r"metadata.name=a\,b\=c\\d,type=x");
        assert_eq!(
            selector.requirements(),
            &[
                requirement("metadata.name", FieldOp::Eq, r"a,b=c\d"),
                requirement("type", FieldOp::Eq, "x"),
            ]
        );
        assert_eq!(selector.to_string(), r"metadata.name=a\,b\=c\\d,type=x");
    }

    #[test]
    fn terms_split_at_the_first_operator_and_nothing_is_trimmed() {
        assert_eq!(
            parsed(r"a!=\=b").requirements(),
            &[requirement("a", FieldOp::NotEq, "=b")]
        );
        assert_eq!(
            parsed("a = b").requirements(),
            &[requirement("a ", FieldOp::Eq, " b")]
        );
        assert_eq!(
            parsed("=x").requirements(),
            &[requirement("", FieldOp::Eq, "x")]
        );
    }

    #[test]
    fn a_term_without_an_operator_is_not_understood() {
        assert_eq!(
            parse_error("metadata.name"),
            "invalid selector: 'metadata.name'; can't understand 'metadata.name'"
        );
        assert_eq!(
            parse_error("a=b,c"),
            "invalid selector: 'a=b,c'; can't understand 'c'"
        );
    }

    #[test]
    fn bad_escapes_and_bare_equals_are_errors() {
        assert_eq!(
            parse_error(r"a=b\x"),
            r"invalid field selector: invalid escape sequence: \x"
        );
        assert_eq!(
            parse_error(r"a=b\"),
            r"invalid field selector: invalid escape sequence: \"
        );
        assert_eq!(
            parse_error("a=b=c"),
            "invalid field selector: unescaped character in value: '='"
        );
        assert_eq!(
            FieldSelector::parse("a=b=c"),
            Err(SelectorError::UnescapedCharacter { character: '=' })
        );
    }

    #[test]
    fn display_writes_double_equals_as_equals() {
        assert_eq!(parsed("a==b,c!=d").to_string(), "a=b,c!=d");
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
    }

    #[test]
    fn display_then_parse_round_trips_generated_selectors() {
        const FIELDS: &[&str] = &[
            "metadata.name",
            "metadata.namespace",
            "status.phase",
            "spec.nodeName",
            "type",
            "x",
        ];
        const CHARACTERS: &[char] = &[
            'a', 'Z', '0', '-', '.', ' ', ',', '=', '\\', '!', '(', 'é', '/',
        ];
        let mut random = Lcg(7);
        for _ in 0..500 {
            let mut requirements = Vec::new();
            for _ in 0..random.below(5) {
                let field = FIELDS[random.below(FIELDS.len())].to_owned();
                let op = if random.below(2) == 0 {
                    FieldOp::Eq
                } else {
                    FieldOp::NotEq
                };
                let value: String = (0..random.below(8))
                    .map(|_| CHARACTERS[random.below(CHARACTERS.len())])
                    .collect();
                requirements.push(FieldRequirement { field, op, value });
            }
            let selector = FieldSelector { requirements };
            let text = selector.to_string();
            assert_eq!(FieldSelector::parse(&text), Ok(selector), "{text}");
        }
    }
}
