//! The verbs of the registry, with the semantics every kind shares, one file per verb.
//!
//! Objects move through these functions in their *served* form (the resource's schema); the
//! strategy converts to the stored form just before storage and back just after.
//!
//! - [`options`]: what a write addresses and how ([`Target`], [`WriteOptions`],
//!   [`DeleteOptions`]) and what it answers ([`Reply`], [`Deleted`]).
//! - `decode`: a request body into served form ([`Registry::decode_body`]), a stored object
//!   back ([`Registry::served`]).
//! - `get`, `create`, `update`, `patch`, `apply`, `delete`, `delete_collection`: the verbs of
//!   those names.
//! - `write`: the read-modify-write every change to an existing object shares
//!   ([`Registry::write_existing`]).
//! - `scale`: the `scale` subresource, an `autoscaling/v1` `Scale` view of the replicas.
//! - `finalize`: the namespace `finalize` subresource.
//! - `binding`: the `pods/binding` subresource and the `bindings` resource.
//! - `eviction`: the `pods/eviction` subresource, which honours PodDisruptionBudgets.
//! - `approval`: the CertificateSigningRequest `approval` subresource (a [`Part`]).
//! - `ephemeral`, `resize`: the pod subresources that change only `spec.ephemeralContainers`,
//!   or only the containers' resources (a [`Part`] each).
//! - `validate`: the checks every write shares.
//!
//! This file holds the small helpers the verbs share.

mod apply;
mod approval;
mod binding;
mod create;
mod decode;
mod delete;
mod delete_collection;
mod ephemeral;
mod eviction;
mod finalize;
mod get;
pub mod kubelet;
pub mod options;
mod patch;
mod resize;
mod scale;
mod update;
mod validate;
mod write;

use bytes::Bytes;

use super::Registry;
use crate::api::error::ApiError;
use crate::storage::Storage;
use serde_json::{Map, Value, json};

pub use delete_collection::DeletedCollection;
pub use options::{
    DeleteOptions, Deleted, FOREGROUND_DELETION, FieldValidation, ORPHAN, Part, Reply, Target,
    WriteOptions,
};

/// How a write records ownership in `metadata.managedFields`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum WriteMode {
    /// Create, update, non-apply patch: the fields the write changes become the manager's.
    Update,
    /// Server-side apply: the object arrives with its managedFields already worked out.
    Apply,
}

/// The current time as Kubernetes writes timestamps: RFC 3339, seconds, UTC.
///
/// Every write stamps at least one time, and many writes fall in the same second: each
/// thread formats a second once and copies it after that.
pub fn now_rfc3339() -> String {
    thread_local! {
        static LAST: std::cell::RefCell<(i64, String)> =
            const { std::cell::RefCell::new((i64::MIN, String::new())) };
    }
    let now = jiff::Timestamp::now();
    let second = now.as_second();
    LAST.with_borrow_mut(|(at, text)| {
        if *at != second {
            *text = now.strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
            *at = second;
        }
        text.clone()
    })
}

/// A new uid: a random (version 4) UUID, drawn from the thread's generator (a CSPRNG seeded
/// by the system) rather than with a system call per uid.
pub fn new_uid() -> String {
    uuid::Builder::from_random_bytes(rand::random())
        .into_uuid()
        .to_string()
}

fn meta_mut(obj: &mut Value) -> &mut Map<String, Value> {
    if !obj["metadata"].is_object() {
        obj["metadata"] = json!({});
    }
    match obj.get_mut("metadata").and_then(Value::as_object_mut) {
        Some(m) => m,
        None => unreachable!("metadata was just made an object"),
    }
}

/// Sets `metadata.finalizers`, leaving the field out when the list is empty.
fn set_finalizers(obj: &mut Value, finalizers: Vec<Value>) {
    let meta = meta_mut(obj);
    if finalizers.is_empty() {
        meta.remove("finalizers");
    } else {
        meta.insert("finalizers".into(), Value::Array(finalizers));
    }
}

fn meta_str<'a>(obj: &'a Value, field: &str) -> Option<&'a str> {
    obj.get("metadata")?.get(field)?.as_str()
}

fn name_of(obj: &Value) -> &str {
    meta_str(obj, "name").unwrap_or_default()
}

fn to_bytes(v: &Value) -> Result<Bytes, ApiError> {
    crate::api::encoding::to_vec(v)
        .map(Bytes::from)
        .map_err(|e| ApiError::Internal(e.to_string()))
}

impl Registry {
    pub(super) fn storage(&self) -> &dyn Storage {
        &**self.store()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uids_are_random_version_4_uuids() {
        let a = new_uid();
        let b = new_uid();
        assert_ne!(a, b);
        let parsed = uuid::Uuid::parse_str(&a).expect("a uuid");
        assert_eq!(parsed.get_version_num(), 4);
        assert_eq!(parsed.get_variant(), uuid::Variant::RFC4122);
        assert_eq!(
            a,
            parsed.hyphenated().to_string(),
            "the usual lower-case form"
        );
    }

    #[test]
    fn the_time_is_rfc_3339_seconds_in_utc_and_current() {
        let before = jiff::Timestamp::now().as_second();
        let text = now_rfc3339();
        let after = jiff::Timestamp::now().as_second();
        assert_eq!(text.len(), "2026-01-01T00:00:00Z".len(), "{text}");
        assert!(text.ends_with('Z'));
        let at: jiff::Timestamp = text.parse().expect("parses");
        assert!((before..=after).contains(&at.as_second()), "{text}");
        // A second call (a copy of the thread's second, or the next one) reads the same way.
        let again = now_rfc3339();
        assert_eq!(
            again.len(),
            text.len(),
            "the copy of a second reads the same"
        );
        let later: jiff::Timestamp = again.parse().expect("parses");
        assert!(later >= at && later.as_second() <= jiff::Timestamp::now().as_second());
    }
}
