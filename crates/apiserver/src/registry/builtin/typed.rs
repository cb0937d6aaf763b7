//! One strategy for the built-in kinds whose rules are a few defaults and checks: decoding through
//! the k8s-openapi type, optional generation tracking, the status a new object starts with, and
//! per-kind `defaults` and `validate` functions. Kinds with richer rules have their own strategy.

use std::marker::PhantomData;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::api::field::FieldError;
use crate::registry::strategy::{Decoded, Strategy, decode_typed};

/// Fills defaults into an object.
pub(super) type Defaults = fn(&mut Value);
/// Checks an object.
pub(super) type Checks = fn(&Value) -> Vec<FieldError>;
/// Checks an update against the stored object.
pub(super) type UpdateChecks = fn(&Value, &Value) -> Vec<FieldError>;

/// The strategy of a kind decoded as `T`.
pub(super) struct Typed<T> {
    generation: bool,
    initial_status: Option<fn() -> Value>,
    defaults: Defaults,
    validate: Checks,
    validate_update: Option<UpdateChecks>,
    field_labels: &'static [&'static str],
    refuse_delete: fn(&str) -> Option<String>,
    returns_object: bool,
    status_metadata: Option<&'static [&'static str]>,
    kind: PhantomData<fn() -> T>,
}

fn no_defaults(_: &mut Value) {}

fn no_checks(_: &Value) -> Vec<FieldError> {
    Vec::new()
}

impl<T> Typed<T> {
    /// A kind stored as decoded, without defaults or checks.
    pub(super) fn new() -> Self {
        Typed {
            generation: false,
            initial_status: None,
            defaults: no_defaults,
            validate: no_checks,
            validate_update: None,
            field_labels: &[],
            refuse_delete: |_| None,
            returns_object: false,
            status_metadata: None,
            kind: PhantomData,
        }
    }

    /// Maintains `metadata.generation`.
    pub(super) fn generation(mut self) -> Self {
        self.generation = true;
        self
    }

    /// A created object's status is replaced by `status()` (what Kubernetes' PrepareForCreate
    /// leaves).
    pub(super) fn initial_status(mut self, status: fn() -> Value) -> Self {
        self.initial_status = Some(status);
        self
    }

    /// Defaults applied on create and update.
    pub(super) fn defaults(mut self, defaults: Defaults) -> Self {
        self.defaults = defaults;
        self
    }

    /// Checks of every write.
    pub(super) fn validate(mut self, validate: Checks) -> Self {
        self.validate = validate;
        self
    }

    /// Extra checks of updates (immutable fields), after those of every write.
    pub(super) fn validate_update(mut self, validate: UpdateChecks) -> Self {
        self.validate_update = Some(validate);
        self
    }

    /// Refuses deleting the objects for which `refuse` gives a reason (403).
    pub(super) fn refuse_delete(mut self, refuse: fn(&str) -> Option<String>) -> Self {
        self.refuse_delete = refuse;
        self
    }

    /// Field selector keys beyond the metadata ones.
    pub(super) fn field_labels(mut self, labels: &'static [&'static str]) -> Self {
        self.field_labels = labels;
        self
    }

    /// A status write keeps the new metadata but for `reset` (a kind whose Kubernetes status
    /// strategy resets only its spec); see [`Strategy::status_keeps_metadata`].
    pub(super) fn status_keeps_metadata(mut self, reset: &'static [&'static str]) -> Self {
        self.status_metadata = Some(reset);
        self
    }

    /// A completed delete answers with the deleted object, not a `Status` (Kubernetes'
    /// `ReturnDeletedObject` of the kind's storage).
    pub(super) fn returns_object_on_delete(mut self) -> Self {
        self.returns_object = true;
        self
    }
}

impl<T: Serialize + DeserializeOwned + 'static> Strategy for Typed<T> {
    fn decode(&self, obj: Value) -> Result<Decoded, String> {
        decode_typed::<T>(obj)
    }

    fn tracks_generation(&self) -> bool {
        self.generation
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        (self.defaults)(obj);
        if let Some(status) = self.initial_status {
            obj["status"] = status();
        }
    }

    fn prepare_for_update(&self, new: &mut Value, _old: &Value) {
        (self.defaults)(new);
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        (self.validate)(obj)
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = (self.validate)(new);
        if let Some(check) = self.validate_update {
            errs.extend(check(new, old));
        }
        errs
    }

    fn field_labels(&self) -> &'static [&'static str] {
        self.field_labels
    }

    fn refuse_delete(&self, name: &str) -> Option<String> {
        (self.refuse_delete)(name)
    }

    fn returns_object_on_delete(&self) -> bool {
        self.returns_object
    }

    fn status_keeps_metadata(&self) -> Option<&'static [&'static str]> {
        self.status_metadata
    }
}

/// `field` (a top-level path such as `["spec", "value"]`) may not change.
pub(super) fn immutable(new: &Value, old: &Value, path: &[&str], errs: &mut Vec<FieldError>) {
    let get = |v: &Value| path.iter().try_fold(v, |v, k| v.get(k)).cloned();
    let now = get(new);
    if now != get(old) {
        errs.push(FieldError::invalid(
            path.join("."),
            now.unwrap_or(Value::Null),
            "field is immutable",
        ));
    }
}
