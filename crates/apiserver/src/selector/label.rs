//! Label selectors: the `labelSelector=` string syntax and `metav1.LabelSelector` objects.
//!
//! Where to start: [`LabelSelector::parse`] reads `env in (a,b),!legacy,tier=web`;
//! [`LabelSelector::matches`] tests an object's `metadata.labels`; `Display` writes the canonical
//! string form (requirements sorted by key, set values sorted, `==` written as `=`), which is
//! what Kubernetes prints for a Scale's `status.selector`.
//!
//! What it does not do: field selectors (see `field.rs`), or any lookup beyond one label map.
//!
//! Grammar, as Kubernetes' `labels.Parse` reads it (whitespace between tokens is ignored; an
//! identifier is any run of characters other than whitespace and `=!(),<>`):
//!
//! ```text
//! selector    := "" | requirement ("," requirement)*
//! requirement := "!" key | key | key ("=" | "==" | "!=" | ">" | "<") value?
//!              | key ("in" | "notin") "(" value? ("," value?)* ")"
//! ```
//!
//! Keys must be qualified names (`[prefix/]name`), values valid label values (empty allowed);
//! `>`/`<` need an integer. As in Kubernetes, `k in ()` means `k in ("")` and a missing value after
//! `=` is the empty string. Only the first invalid key or value is reported (Kubernetes lists all).

use std::fmt;

use serde_json::{Map, Value};

use super::SelectorError;
use crate::api::validation::{
    label_value_errors as value_errors, qualified_name_errors as key_errors,
};

/// A parsed label selector: a conjunction of requirements. The default selects everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct LabelSelector {
    /// The requirements, sorted by key (stable, so equal keys keep their input order).
    requirements: Vec<Requirement>,
}

/// One requirement on one label.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Requirement {
    /// The label key.
    key: String,
    /// What the label's value must satisfy.
    operator: Operator,
}

/// A requirement's operator with its values. Set values are sorted and free of duplicates.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Operator {
    /// `k=v` or `k==v`: present with this value.
    Equals(String),
    /// `k!=v`: absent, or present with another value.
    NotEquals(String),
    /// `k in (a,b)`: present with one of the values.
    In(Vec<String>),
    /// `k notin (a,b)`: absent, or present with none of the values.
    NotIn(Vec<String>),
    /// `k`: present.
    Exists,
    /// `!k`: absent.
    DoesNotExist,
    /// `k>5`: present with an integer value greater than this.
    GreaterThan(i64),
    /// `k<5`: present with an integer value less than this.
    LessThan(i64),
}

impl LabelSelector {
    /// Parses the `labelSelector=` query string form. The empty string selects everything.
    ///
    /// # Errors
    ///
    /// [`SelectorError::RequirementSyntax`] or [`SelectorError::InvalidRequirement`] for a bad
    /// requirement, [`SelectorError::SelectorSyntax`] for a bad token between requirements.
    pub(crate) fn parse(selector: &str) -> Result<Self, SelectorError> {
        let mut parser = Parser {
            tokens: lex(selector),
            position: 0,
        };
        let mut requirements = Vec::new();
        loop {
            match parser.peek() {
                Token::Identifier(_) | Token::Not => {
                    requirements.push(parser.requirement()?);
                    match parser.next() {
                        Token::End => break,
                        Token::Comma => match parser.peek() {
                            Token::Identifier(_) | Token::Not => {}
                            other => return Err(selector_syntax(other, "identifier after ','")),
                        },
                        other => return Err(selector_syntax(other, "',' or 'end of string'")),
                    }
                }
                Token::End => break,
                other => return Err(selector_syntax(other, "!, identifier, or 'end of string'")),
            }
        }
        Ok(Self::from_requirements(requirements))
    }

    /// Converts a `metav1.LabelSelector` object (`matchLabels`, `matchExpressions` with the
    /// operators `In`, `NotIn`, `Exists`, `DoesNotExist`). `{}` selects everything.
    ///
    /// # Errors
    ///
    /// [`SelectorError::MalformedLabelSelector`] if the JSON is not shaped like a
    /// `LabelSelector` (including `null`, which Kubernetes reads as "select nothing" and which
    /// this type cannot express); [`SelectorError::UnsupportedOperator`];
    /// [`SelectorError::InvalidLabelSelector`] for an invalid key, value or value count.
    pub(crate) fn from_label_selector_json(selector: &Value) -> Result<Self, SelectorError> {
        let Value::Object(selector) = selector else {
            return Err(malformed("a label selector must be an object"));
        };
        let mut requirements = Vec::new();
        match selector.get("matchLabels") {
            None | Some(Value::Null) => {}
            Some(Value::Object(labels)) => {
                for (key, value) in labels {
                    let Some(value) = value.as_str() else {
                        return Err(malformed("matchLabels values must be strings"));
                    };
                    requirements.push(Requirement::checked(
                        key,
                        OperatorKind::Equals,
                        &[value],
                        Source::Object,
                    )?);
                }
            }
            Some(_) => return Err(malformed("matchLabels must be an object")),
        }
        match selector.get("matchExpressions") {
            None | Some(Value::Null) => {}
            Some(Value::Array(expressions)) => {
                for expression in expressions {
                    requirements.push(Requirement::from_expression(expression)?);
                }
            }
            Some(_) => return Err(malformed("matchExpressions must be a list")),
        }
        Ok(Self::from_requirements(requirements))
    }

    /// Whether an object with these labels (`metadata.labels`; `None` when it has none) is
    /// selected. A label whose value is `null` counts as absent.
    pub(crate) fn matches(&self, labels: Option<&Map<String, Value>>) -> bool {
        self.requirements.iter().all(|requirement| {
            let value = labels
                .and_then(|labels| labels.get(&requirement.key))
                .filter(|value| !value.is_null());
            requirement.matches(value)
        })
    }

    /// Whether the selector has no requirements, i.e. selects everything.
    pub(crate) fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// Builds a selector in canonical order.
    fn from_requirements(mut requirements: Vec<Requirement>) -> Self {
        requirements.sort_by(|a, b| a.key.cmp(&b.key));
        Self { requirements }
    }
}

impl fmt::Display for LabelSelector {
    /// Writes the Kubernetes string form, e.g. `app=web,tier in (a,b)`; empty when the selector
    /// selects everything.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (index, requirement) in self.requirements.iter().enumerate() {
            if index > 0 {
                f.write_str(",")?;
            }
            write!(f, "{requirement}")?;
        }
        Ok(())
    }
}

impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let key = &self.key;
        match &self.operator {
            Operator::Equals(value) => write!(f, "{key}={value}"),
            Operator::NotEquals(value) => write!(f, "{key}!={value}"),
            Operator::In(values) => write!(f, "{key} in ({})", values.join(",")),
            Operator::NotIn(values) => write!(f, "{key} notin ({})", values.join(",")),
            Operator::Exists => write!(f, "{key}"),
            Operator::DoesNotExist => write!(f, "!{key}"),
            Operator::GreaterThan(value) => write!(f, "{key}>{value}"),
            Operator::LessThan(value) => write!(f, "{key}<{value}"),
        }
    }
}

/// Where a requirement comes from; Kubernetes words the error paths differently for each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source {
    /// The query string (`labels.Parse`).
    Query,
    /// A `metav1.LabelSelector` object (`LabelSelectorAsSelector`).
    Object,
}

/// An operator before its values are checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OperatorKind {
    /// `=`, `==`, or a `matchLabels` entry.
    Equals,
    /// `!=`
    NotEquals,
    /// `in`, or `In`.
    In,
    /// `notin`, or `NotIn`.
    NotIn,
    /// A bare key, or `Exists`.
    Exists,
    /// `!key`, or `DoesNotExist`.
    DoesNotExist,
    /// `>`
    GreaterThan,
    /// `<`
    LessThan,
}

impl Requirement {
    /// Validates `key` and `values` the way Kubernetes' `NewRequirement` does, and builds the
    /// requirement. Error paths index `values` in the order given.
    fn checked(
        key: &str,
        kind: OperatorKind,
        values: &[&str],
        source: Source,
    ) -> Result<Self, SelectorError> {
        let invalid = |path: String, value: String, detail: &str| {
            invalid_value(source, path, value, detail.to_owned())
        };
        check_key(key, source)?;
        let count_problem = match kind {
            OperatorKind::In | OperatorKind::NotIn if values.is_empty() => {
                Some("for 'in', 'notin' operators, values set can't be empty")
            }
            OperatorKind::Exists | OperatorKind::DoesNotExist if !values.is_empty() => {
                Some("values set must be empty for exists and does not exist")
            }
            OperatorKind::Equals | OperatorKind::NotEquals if values.len() != 1 => {
                Some("exact-match compatibility requires one single value")
            }
            OperatorKind::GreaterThan | OperatorKind::LessThan if values.len() != 1 => {
                Some("for 'Gt', 'Lt' operators, exactly one value is required")
            }
            _ => None,
        };
        if let Some(detail) = count_problem {
            return Err(invalid(
                "values".to_owned(),
                go_string_slice(values),
                detail,
            ));
        }
        let single = values.first().copied().unwrap_or_default();
        let operator = match kind {
            OperatorKind::Equals => Operator::Equals(single.to_owned()),
            OperatorKind::NotEquals => Operator::NotEquals(single.to_owned()),
            OperatorKind::In => Operator::In(canonical_set(values)),
            OperatorKind::NotIn => Operator::NotIn(canonical_set(values)),
            OperatorKind::Exists => Operator::Exists,
            OperatorKind::DoesNotExist => Operator::DoesNotExist,
            OperatorKind::GreaterThan | OperatorKind::LessThan => {
                let Ok(bound) = single.parse::<i64>() else {
                    let detail = "for 'Gt', 'Lt' operators, the value must be an integer";
                    return Err(invalid(
                        "values[0]".to_owned(),
                        format!("{single:?}"),
                        detail,
                    ));
                };
                if kind == OperatorKind::GreaterThan {
                    Operator::GreaterThan(bound)
                } else {
                    Operator::LessThan(bound)
                }
            }
        };
        for (index, value) in values.iter().enumerate() {
            let value_errors = value_errors(value);
            if !value_errors.is_empty() {
                let path = format!("values[{index}][{key}]");
                return Err(invalid(
                    path,
                    format!("{value:?}"),
                    &value_errors.join("; "),
                ));
            }
        }
        Ok(Self {
            key: key.to_owned(),
            operator,
        })
    }

    /// Converts one `matchExpressions` element.
    fn from_expression(expression: &Value) -> Result<Self, SelectorError> {
        let Value::Object(expression) = expression else {
            return Err(malformed("matchExpressions elements must be objects"));
        };
        let text = |field: &str| match expression.get(field) {
            None | Some(Value::Null) => Ok(""),
            Some(Value::String(text)) => Ok(text.as_str()),
            Some(_) => Err(malformed(
                "matchExpressions key and operator must be strings",
            )),
        };
        let key = text("key")?;
        let kind = match text("operator")? {
            "In" => OperatorKind::In,
            "NotIn" => OperatorKind::NotIn,
            "Exists" => OperatorKind::Exists,
            "DoesNotExist" => OperatorKind::DoesNotExist,
            other => {
                return Err(SelectorError::UnsupportedOperator {
                    operator: other.to_owned(),
                });
            }
        };
        let values: Vec<&str> =
            match expression.get("values") {
                None | Some(Value::Null) => Vec::new(),
                Some(Value::Array(values)) => values
                    .iter()
                    .map(Value::as_str)
                    .collect::<Option<_>>()
                    .ok_or_else(|| malformed("matchExpressions values must be strings"))?,
                Some(_) => return Err(malformed("matchExpressions values must be a list")),
            };
        Self::checked(key, kind, &values, Source::Object)
    }

    /// Whether a label value (`None`: the label is absent) satisfies the requirement. A
    /// non-string value counts as present but equal to no string.
    fn matches(&self, value: Option<&Value>) -> bool {
        let text = value.and_then(Value::as_str);
        match &self.operator {
            Operator::Equals(wanted) => text == Some(wanted.as_str()),
            Operator::NotEquals(unwanted) => text != Some(unwanted.as_str()),
            Operator::In(wanted) => text.is_some_and(|text| wanted.iter().any(|w| w == text)),
            Operator::NotIn(unwanted) => {
                !text.is_some_and(|text| unwanted.iter().any(|u| u == text))
            }
            Operator::Exists => value.is_some(),
            Operator::DoesNotExist => value.is_none(),
            Operator::GreaterThan(bound) => integer(text).is_some_and(|number| number > *bound),
            Operator::LessThan(bound) => integer(text).is_some_and(|number| number < *bound),
        }
    }
}

/// Fails if `key` is not a qualified name; the error path is `<nil>` for the query string and
/// `key` for an object, as in Kubernetes.
fn check_key(key: &str, source: Source) -> Result<(), SelectorError> {
    let errors = key_errors(key);
    if errors.is_empty() {
        return Ok(());
    }
    let path = match source {
        Source::Query => "<nil>",
        Source::Object => "key",
    };
    Err(invalid_value(
        source,
        path.to_owned(),
        format!("{key:?}"),
        errors.join("; "),
    ))
}

/// An `Invalid value` error in the variant that fits `source`.
fn invalid_value(source: Source, path: String, value: String, detail: String) -> SelectorError {
    match source {
        Source::Query => SelectorError::InvalidRequirement {
            path,
            value,
            detail,
        },
        Source::Object => SelectorError::InvalidLabelSelector {
            path,
            value,
            detail,
        },
    }
}

/// A label value read as an integer, if it is one.
fn integer(text: Option<&str>) -> Option<i64> {
    text?.parse().ok()
}

/// Sorted, duplicate-free copies of set values.
fn canonical_set(values: &[&str]) -> Vec<String> {
    let mut set: Vec<String> = values.iter().map(|value| (*value).to_owned()).collect();
    set.sort();
    set.dedup();
    set
}

/// A list of strings as Go's `%#v` prints a `[]string`, which is how Kubernetes shows one in
/// an `Invalid value` message: `[]string{"a", "b"}`.
fn go_string_slice(values: &[&str]) -> String {
    let quoted: Vec<String> = values.iter().map(|value| format!("{value:?}")).collect();
    format!("[]string{{{}}}", quoted.join(", "))
}

/// A [`SelectorError::MalformedLabelSelector`].
fn malformed(detail: &'static str) -> SelectorError {
    SelectorError::MalformedLabelSelector { detail }
}

/// A [`SelectorError::SelectorSyntax`] for an unexpected token.
fn selector_syntax(found: Token<'_>, expected: &'static str) -> SelectorError {
    SelectorError::SelectorSyntax {
        found: found.literal().to_owned(),
        expected,
    }
}

/// A [`SelectorError::RequirementSyntax`] for an unexpected token.
fn requirement_syntax(found: Token<'_>, expected: &'static str) -> SelectorError {
    SelectorError::RequirementSyntax {
        found: found.literal().to_owned(),
        expected,
    }
}

/// A lexical token. Keywords (`in`, `notin`) are identifiers; the parser tells them apart by
/// position, so that `in` can also be a key or a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Token<'s> {
    /// A key, value or keyword.
    Identifier(&'s str),
    /// `=`
    Equals,
    /// `==`
    DoubleEquals,
    /// `!=`
    NotEquals,
    /// `!`
    Not,
    /// `>`
    GreaterThan,
    /// `<`
    LessThan,
    /// `(`
    OpenParen,
    /// `)`
    CloseParen,
    /// `,`
    Comma,
    /// The end of the input.
    End,
}

impl<'s> Token<'s> {
    /// The token as written, for error messages (empty for the end of the input).
    fn literal(self) -> &'s str {
        match self {
            Token::Identifier(text) => text,
            Token::Equals => "=",
            Token::DoubleEquals => "==",
            Token::NotEquals => "!=",
            Token::Not => "!",
            Token::GreaterThan => ">",
            Token::LessThan => "<",
            Token::OpenParen => "(",
            Token::CloseParen => ")",
            Token::Comma => ",",
            Token::End => "",
        }
    }
}

/// Whitespace between tokens, as Kubernetes defines it.
fn is_whitespace(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\r' | '\n')
}

/// Characters that end an identifier.
fn is_special(c: char) -> bool {
    matches!(c, '=' | '!' | '(' | ')' | ',' | '>' | '<')
}

/// Splits a selector into tokens, ending with [`Token::End`].
fn lex(input: &str) -> Vec<Token<'_>> {
    let mut tokens = Vec::new();
    let mut rest = input;
    loop {
        rest = rest.trim_start_matches(is_whitespace);
        let followed_by_equals = rest.get(1..).is_some_and(|after| after.starts_with('='));
        let (token, length) = match rest.chars().next() {
            None => {
                tokens.push(Token::End);
                return tokens;
            }
            Some('!') if followed_by_equals => (Token::NotEquals, 2),
            Some('!') => (Token::Not, 1),
            Some('=') if followed_by_equals => (Token::DoubleEquals, 2),
            Some('=') => (Token::Equals, 1),
            Some('>') => (Token::GreaterThan, 1),
            Some('<') => (Token::LessThan, 1),
            Some('(') => (Token::OpenParen, 1),
            Some(')') => (Token::CloseParen, 1),
            Some(',') => (Token::Comma, 1),
            Some(_) => {
                let end = rest
                    .find(|c| is_special(c) || is_whitespace(c))
                    .unwrap_or(rest.len());
                (Token::Identifier(&rest[..end]), end)
            }
        };
        tokens.push(token);
        rest = &rest[length..];
    }
}

/// A cursor over the tokens of one selector.
struct Parser<'s> {
    /// The tokens; the last one is [`Token::End`].
    tokens: Vec<Token<'s>>,
    /// The next token to read.
    position: usize,
}

impl<'s> Parser<'s> {
    /// The next token, without consuming it.
    fn peek(&self) -> Token<'s> {
        self.tokens
            .get(self.position)
            .copied()
            .unwrap_or(Token::End)
    }

    /// The next token, consumed. Stays on [`Token::End`] at the end.
    fn next(&mut self) -> Token<'s> {
        let token = self.peek();
        if self.position < self.tokens.len() {
            self.position += 1;
        }
        token
    }

    /// Parses one requirement.
    fn requirement(&mut self) -> Result<Requirement, SelectorError> {
        let negated = self.peek() == Token::Not;
        if negated {
            self.next();
        }
        let key = match self.next() {
            Token::Identifier(key) => key,
            other => return Err(requirement_syntax(other, "identifier")),
        };
        // Kubernetes checks the key before it looks at the operator.
        check_key(key, Source::Query)?;
        if negated {
            return Requirement::checked(key, OperatorKind::DoesNotExist, &[], Source::Query);
        }
        if matches!(self.peek(), Token::End | Token::Comma) {
            return Requirement::checked(key, OperatorKind::Exists, &[], Source::Query);
        }
        let kind = match self.next() {
            Token::Equals | Token::DoubleEquals => OperatorKind::Equals,
            Token::NotEquals => OperatorKind::NotEquals,
            Token::GreaterThan => OperatorKind::GreaterThan,
            Token::LessThan => OperatorKind::LessThan,
            Token::Identifier("in") => OperatorKind::In,
            Token::Identifier("notin") => OperatorKind::NotIn,
            other => return Err(requirement_syntax(other, "in, notin, =, ==, !=, gt, lt")),
        };
        let values = match kind {
            OperatorKind::In | OperatorKind::NotIn => {
                let mut values = self.value_set()?;
                values.sort_unstable();
                values.dedup();
                values
            }
            _ => vec![self.exact_value()?],
        };
        Requirement::checked(key, kind, &values, Source::Query)
    }

    /// Reads the value after `=`, `==`, `!=`, `>` or `<`; nothing there means the empty string.
    fn exact_value(&mut self) -> Result<&'s str, SelectorError> {
        match self.peek() {
            Token::End | Token::Comma => Ok(""),
            Token::Identifier(value) => {
                self.next();
                Ok(value)
            }
            other => Err(requirement_syntax(other, "identifier")),
        }
    }

    /// Reads `(a,b,…)` after `in` or `notin`. An empty item is the empty string.
    fn value_set(&mut self) -> Result<Vec<&'s str>, SelectorError> {
        match self.next() {
            Token::OpenParen => {}
            other => return Err(requirement_syntax(other, "'('")),
        }
        let mut values = Vec::new();
        loop {
            match self.peek() {
                Token::Identifier(value) => {
                    self.next();
                    values.push(value);
                }
                Token::Comma | Token::CloseParen => values.push(""),
                other => return Err(requirement_syntax(other, "',', ')' or identifier")),
            }
            match self.next() {
                Token::Comma => {}
                Token::CloseParen => return Ok(values),
                other => return Err(requirement_syntax(other, "',' or ')'")),
            }
        }
    }
}

#[cfg(test)]
mod tests;
