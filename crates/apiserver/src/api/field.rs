//! Field errors: one invalid field each (where, what kind of problem, the value, why), as
//! Kubernetes' `field.Error`. Validation returns a list of them; the API turns the list into
//! a 422 `Invalid` Status with one cause each.

use serde_json::Value;

/// What is wrong with a field; each maps to a Kubernetes cause type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum FieldErrorKind {
    /// A required field is missing.
    Required,
    /// The value is malformed or out of range.
    Invalid,
    /// The value has the wrong JSON type.
    TypeInvalid,
    /// The value is not one of the allowed ones.
    NotSupported,
    /// The field may not be set or changed.
    Forbidden,
    /// The value appears twice where it must be unique.
    Duplicate,
    /// The value is longer than allowed.
    TooLong,
    /// The list has more items than allowed.
    TooMany,
    /// A referenced thing does not exist.
    NotFound,
}

impl FieldErrorKind {
    /// The cause type on the wire (`details.causes[].reason`).
    pub fn cause_type(self) -> &'static str {
        match self {
            FieldErrorKind::Required => "FieldValueRequired",
            FieldErrorKind::Invalid => "FieldValueInvalid",
            FieldErrorKind::TypeInvalid => "FieldValueTypeInvalid",
            FieldErrorKind::NotSupported => "FieldValueNotSupported",
            FieldErrorKind::Forbidden => "FieldValueForbidden",
            FieldErrorKind::Duplicate => "FieldValueDuplicate",
            FieldErrorKind::TooLong => "FieldValueTooLong",
            FieldErrorKind::TooMany => "FieldValueTooMany",
            FieldErrorKind::NotFound => "FieldValueNotFound",
        }
    }
}

/// One invalid field: where, what kind of problem, the offending value and why.
#[derive(Clone, Debug, PartialEq)]
pub struct FieldError {
    /// What is wrong.
    pub kind: FieldErrorKind,
    /// The field path, e.g. `metadata.name` or `spec.ports[0].port`.
    pub field: String,
    /// The offending value, when there is one.
    pub value: Option<Value>,
    /// The explanation (for `NotSupported`: the allowed values, already quoted).
    pub detail: String,
}

impl FieldError {
    fn new(
        kind: FieldErrorKind,
        field: impl Into<String>,
        value: Option<Value>,
        detail: impl Into<String>,
    ) -> Self {
        FieldError {
            kind,
            field: field.into(),
            value,
            detail: detail.into(),
        }
    }

    /// A required field is missing.
    pub fn required(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self::new(FieldErrorKind::Required, field, None, detail)
    }

    /// A value is invalid.
    pub fn invalid(field: impl Into<String>, value: Value, detail: impl Into<String>) -> Self {
        Self::new(FieldErrorKind::Invalid, field, Some(value), detail)
    }

    /// A value is not among `allowed`.
    pub fn not_supported(field: impl Into<String>, value: Value, allowed: &[&str]) -> Self {
        let list = allowed
            .iter()
            .map(|a| format!("\"{a}\""))
            .collect::<Vec<_>>()
            .join(", ");
        Self::new(
            FieldErrorKind::NotSupported,
            field,
            Some(value),
            format!("supported values: {list}"),
        )
    }

    /// A field may not be set or changed.
    pub fn forbidden(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self::new(FieldErrorKind::Forbidden, field, None, detail)
    }

    /// A value is duplicated.
    pub fn duplicate(field: impl Into<String>, value: Value) -> Self {
        Self::new(FieldErrorKind::Duplicate, field, Some(value), "")
    }

    /// A value is longer than `max` bytes.
    pub fn too_long(field: impl Into<String>, max: usize) -> Self {
        Self::new(
            FieldErrorKind::TooLong,
            field,
            None,
            format!("may not be more than {max} bytes"),
        )
    }

    /// A value has the wrong JSON type (cause `FieldValueTypeInvalid`, rendered as `Invalid value`).
    pub fn type_invalid(field: impl Into<String>, value: Value, detail: impl Into<String>) -> Self {
        Self::new(FieldErrorKind::TypeInvalid, field, Some(value), detail)
    }

    /// A list (or map) has `actual` entries where at most `max` are allowed:
    /// `Too many: 4: must have at most 3 items`.
    pub fn too_many(field: impl Into<String>, actual: usize, max: usize) -> Self {
        let noun = if max == 1 { "item" } else { "items" };
        Self::new(
            FieldErrorKind::TooMany,
            field,
            Some(Value::from(actual)),
            format!("must have at most {max} {noun}"),
        )
    }

    /// The message of this error without its field path, as Kubernetes words it.
    pub fn message(&self) -> String {
        let value = self.value.as_ref().map(render_value);
        let with_detail = |head: String| {
            if self.detail.is_empty() {
                head
            } else {
                format!("{head}: {}", self.detail)
            }
        };
        match self.kind {
            FieldErrorKind::Required => with_detail("Required value".into()),
            FieldErrorKind::Invalid | FieldErrorKind::TypeInvalid => with_detail(format!(
                "Invalid value: {}",
                value.unwrap_or_else(|| "null".into())
            )),
            FieldErrorKind::NotSupported => with_detail(format!(
                "Unsupported value: {}",
                value.unwrap_or_else(|| "null".into())
            )),
            FieldErrorKind::Forbidden => with_detail("Forbidden".into()),
            FieldErrorKind::Duplicate => format!("Duplicate value: {}", value.unwrap_or_default()),
            FieldErrorKind::TooLong => with_detail("Too long".into()),
            FieldErrorKind::TooMany => match value {
                Some(count) => with_detail(format!("Too many: {count}")),
                None => with_detail("Too many".into()),
            },
            FieldErrorKind::NotFound => format!("Not found: {}", value.unwrap_or_default()),
        }
    }
}

impl std::fmt::Display for FieldError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.message())
    }
}

/// Renders a value as Kubernetes does in messages: strings quoted, numbers bare.
fn render_value(v: &Value) -> String {
    match v {
        Value::String(s) => format!("{s:?}"),
        other => other.to_string(),
    }
}
