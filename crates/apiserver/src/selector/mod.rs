//! Label and field selectors: the `labelSelector=` and `fieldSelector=` query parameters of
//! list, watch and deletecollection (spec §8.2), and `metav1.LabelSelector` objects.
//!
//! Where to start: [`LabelSelector::parse`] and [`FieldSelector::parse`] turn the query strings
//! into values; `matches` tests one object. [`LabelSelector::from_label_selector_json`] reads the
//! `spec.selector` of a Deployment or ReplicaSet, and its `Display` renders the string form that
//! the Scale subresource reports in `status.selector`.
//!
//! What this module does not do: decide which field selector keys a kind supports (the caller
//! checks [`FieldSelector::requirements`] against its own table and answers
//! `field label not supported: <key>`), or read field values out of objects (the caller passes a
//! lookup function to [`FieldSelector::matches`]).
//!
//! Errors are [`SelectorError`]s whose `Display` is the message for the 400 BadRequest Status.

mod field;
pub(crate) mod label;

pub(crate) use field::{FieldOp, FieldSelector};
pub(crate) use label::LabelSelector;

/// Why a selector could not be parsed or converted.
///
/// Every variant is the client's fault: answer 400 BadRequest with the `Display` text as the
/// Status message, and do not retry. The texts follow Kubernetes' own wording, so clients and
/// people who grep for them find what they expect.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum SelectorError {
    /// A label selector requirement has an unexpected token, e.g. `app in a` (no parenthesis).
    #[error("unable to parse requirement: found '{found}', expected: {expected}")]
    RequirementSyntax {
        /// The token found (empty at the end of the input).
        found: String,
        /// What the parser wanted there.
        expected: &'static str,
    },
    /// A label selector requirement names an invalid key or value, e.g. `a b=c`.
    #[error("unable to parse requirement: {path}: Invalid value: {value}: {detail}")]
    InvalidRequirement {
        /// The Kubernetes field path: `<nil>` for a key, `values[i][key]` for a value.
        path: String,
        /// The offending value as Kubernetes prints it (strings quoted).
        value: String,
        /// Why it is invalid.
        detail: String,
    },
    /// A label selector has an unexpected token between requirements, e.g. `a=b c`.
    #[error("found '{found}', expected: {expected}")]
    SelectorSyntax {
        /// The token found (empty at the end of the input).
        found: String,
        /// What the parser wanted there.
        expected: &'static str,
    },
    /// A `metav1.LabelSelector` object has an invalid key or value, or a value count that does
    /// not fit its operator.
    #[error("{path}: Invalid value: {value}: {detail}")]
    InvalidLabelSelector {
        /// The Kubernetes field path: `key`, `values` or `values[i][key]`.
        path: String,
        /// The offending value as Kubernetes prints it (strings quoted, lists as `[]string{…}`).
        value: String,
        /// Why it is invalid.
        detail: String,
    },
    /// A `matchExpressions` operator is not `In`, `NotIn`, `Exists` or `DoesNotExist`.
    #[error("{operator:?} is not a valid label selector operator")]
    UnsupportedOperator {
        /// The operator given.
        operator: String,
    },
    /// A `metav1.LabelSelector` object does not have the expected JSON shape.
    #[error("invalid label selector: {detail}")]
    MalformedLabelSelector {
        /// What is wrong with the shape.
        detail: &'static str,
    },
    /// A field selector term has no `=`, `==` or `!=`.
    #[error("invalid selector: '{selector}'; can't understand '{term}'")]
    FieldTermNotUnderstood {
        /// The whole selector.
        selector: String,
        /// The term without an operator.
        term: String,
    },
    /// A field selector value has a backslash not followed by `\`, `,` or `=`.
    #[error("invalid field selector: invalid escape sequence: {sequence}")]
    InvalidEscapeSequence {
        /// The backslash and the character after it (just `\` at the end of a value).
        sequence: String,
    },
    /// A field selector value has an unescaped `=` (or `,`).
    #[error("invalid field selector: unescaped character in value: {character:?}")]
    UnescapedCharacter {
        /// The character that needs a backslash.
        character: char,
    },
}
