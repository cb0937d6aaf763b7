//! The options and results of the write verbs: what a write addresses ([`Target`], [`Part`]),
//! how it is done ([`WriteOptions`], [`DeleteOptions`]) and what it answers ([`Reply`],
//! [`Deleted`]). Plain values, parsed at the edge and handed to the verbs.

use std::sync::Arc;

use bytes::Bytes;

use crate::api::error::ApiError;
use crate::api::propagation::Propagation;
use crate::registry::resource::Resource;
use crate::registry::validation::FieldError;
use crate::storage::Preconditions;

use serde_json::{Value, json};

pub use crate::api::options::{FieldValidation, WriteOptions};

/// Which part of an object a write addresses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Part {
    /// The main resource: everything but status (when a status subresource exists).
    Main,
    /// The `/status` subresource: only status.
    Status,
    /// A pod's `/ephemeralcontainers` subresource: only `spec.ephemeralContainers`.
    EphemeralContainers,
    /// A pod's `/resize` subresource: only its containers' resources and resize policies.
    Resize,
}

impl Part {
    /// The subresource's name (`""` for the main resource), as managedFields record it.
    pub fn subresource(self) -> &'static str {
        match self {
            Part::Main => "",
            Part::Status => "status",
            Part::EphemeralContainers => "ephemeralcontainers",
            Part::Resize => "resize",
        }
    }
}

/// The object a write addresses.
#[derive(Clone, Copy, Debug)]
pub struct Target<'a> {
    /// Its resource.
    pub res: &'a Arc<Resource>,
    /// Its namespace (for namespaced resources).
    pub ns: Option<&'a str>,
    /// Its name.
    pub name: &'a str,
    /// Which part of it is written.
    pub part: Part,
}

/// A successful write: whether it created the object, the object in served form, warnings for
/// the client.
#[derive(Clone, Debug)]
pub struct Reply {
    /// The write created the object (HTTP answers 201 Created, else 200 OK).
    pub created: bool,
    /// The object's JSON.
    pub body: Bytes,
    /// `Warning` headers to send.
    pub warnings: Vec<String>,
}

/// `DeleteOptions`, from the body or the query.
#[derive(Clone, Debug, Default)]
pub struct DeleteOptions {
    /// `preconditions`.
    pub preconditions: Preconditions,
    /// `dryRun=All`.
    pub dry_run: bool,
    /// `propagationPolicy`, read by [`DeleteOptions::parse_propagation`].
    pub propagation: Option<Propagation>,
    /// `gracePeriodSeconds`.
    pub grace_period_seconds: Option<i64>,
    /// `orphanDependents` (deprecated).
    pub orphan_dependents: Option<bool>,
}

/// The finalizer that makes the garbage collector delete an object's dependents first.
pub const FOREGROUND_DELETION: &str = "foregroundDeletion";
/// The finalizer that makes the garbage collector orphan an object's dependents first.
pub const ORPHAN: &str = "orphan";

impl DeleteOptions {
    /// Reads a `propagationPolicy` as Kubernetes validates it, together with the deprecated
    /// `orphanDependents` it may not be combined with: one 422 with every cause.
    pub fn parse_propagation(
        raw: Option<&str>,
        orphan_dependents: Option<bool>,
    ) -> Result<Option<Propagation>, ApiError> {
        let Some(raw) = raw else { return Ok(None) };
        let parsed = Propagation::parse(raw);
        let mut causes = Vec::new();
        if parsed.is_none() {
            causes.push(FieldError::not_supported(
                "propagationPolicy",
                json!(raw),
                &["Foreground", "Background", "Orphan", "nil"],
            ));
        }
        if orphan_dependents.is_some() {
            causes.push(FieldError::invalid(
                "propagationPolicy",
                json!(raw),
                "orphanDependents and deletionPropagation cannot be both set",
            ));
        }
        if causes.is_empty() {
            Ok(parsed)
        } else {
            Err(ApiError::Invalid {
                kind: "DeleteOptions.meta.k8s.io".into(),
                group: "meta.k8s.io".into(),
                name: String::new(),
                causes,
            })
        }
    }

    /// Checks the options as Kubernetes does (for options built in code rather than parsed).
    pub fn validate(&self) -> Result<(), ApiError> {
        match self.propagation {
            Some(p) => {
                Self::parse_propagation(Some(p.as_str()), self.orphan_dependents).map(|_| ())
            }
            None => Ok(()),
        }
    }

    /// What happens to the dependents, decided once: the deprecated `orphanDependents`
    /// (true orphans, false deletes in the background), then the policy, then a garbage
    /// collector finalizer already on the object (the first one), then Background.
    fn effective_propagation(&self, finalizers: &[Value]) -> Propagation {
        match (self.orphan_dependents, self.propagation) {
            (Some(true), _) => Propagation::Orphan,
            (Some(false), _) => Propagation::Background,
            (None, Some(p)) => p,
            (None, None) => finalizers
                .iter()
                .find_map(|f| match f.as_str() {
                    Some(ORPHAN) => Some(Propagation::Orphan),
                    Some(FOREGROUND_DELETION) => Some(Propagation::Foreground),
                    _ => None,
                })
                .unwrap_or(Propagation::Background),
        }
    }

    /// The finalizers an object gets when deleted with these options: its own, with the
    /// garbage collector's replaced by the ones the policy asks for. `None` when unchanged.
    pub fn gc_finalizers(&self, obj: &Value) -> Option<Vec<Value>> {
        let current: Vec<Value> = obj
            .pointer("/metadata/finalizers")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let mut next: Vec<Value> = current
            .iter()
            .filter(|f| !matches!(f.as_str(), Some(ORPHAN | FOREGROUND_DELETION)))
            .cloned()
            .collect();
        match self.effective_propagation(&current) {
            Propagation::Orphan => next.push(json!(ORPHAN)),
            Propagation::Foreground => next.push(json!(FOREGROUND_DELETION)),
            Propagation::Background => {}
        }
        let set = |v: &[Value]| -> std::collections::BTreeSet<String> {
            v.iter()
                .filter_map(Value::as_str)
                .map(String::from)
                .collect()
        };
        (set(&current) != set(&next)).then_some(next)
    }
}

/// What a delete did.
#[derive(Clone, Debug)]
pub enum Deleted {
    /// The object is gone; its last state.
    Gone(Value),
    /// The object stays until its finalizers are removed; its current state.
    Pending(Value),
}

impl Deleted {
    /// Whether the delete is only accepted, not done: the object stays and the client asked
    /// explicitly to delete its dependents (`orphanDependents: false`). HTTP answers 202
    /// Accepted then; Kubernetes keeps this for that one case only, so that older clients
    /// do not see 202 for a namespace or a pod that simply takes time.
    pub fn accepted(&self, opts: &DeleteOptions) -> bool {
        matches!(self, Deleted::Pending(_)) && opts.orphan_dependents == Some(false)
    }
}
