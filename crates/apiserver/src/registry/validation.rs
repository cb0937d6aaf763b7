//! Field errors and the validators shared by every kind: names, labels, annotations,
//! finalizers, owner references.
//!
//! The rules themselves live on the ground floor, in [`crate::api::validation`], so that
//! layers below the registry (schema validation, the selector parser) can use them; this
//! module keeps the registry's path to them.
//!
//! Validation never mutates and never stops at the first problem: it returns one
//! [`FieldError`] per failing field path, which the API turns into a 422 `Invalid` Status with
//! one cause each.

pub use crate::api::field::{FieldError, FieldErrorKind};
pub use crate::api::validation::{
    NameRule, check_name, is_label, is_subdomain, label_value_errors, qualified_name_errors,
    validate_object_meta,
};
