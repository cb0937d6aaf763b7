//! Writes an object's status only when it changed.
//!
//! [`StatusWriter::write`] compares the status a reconcile computed with the status of the
//! object it read (usually from the cache). When they are equal it sends nothing, so an
//! idle controller causes no writes, no new resourceVersions and no watch events. Otherwise
//! it sends a JSON merge patch of just the difference to the `status` subresource.
//!
//! # Guarantees
//! - Equal means equal as JSON after dropping `null` members, so `None` fields and absent
//!   fields compare equal.
//! - The patch sets changed fields and removes (with `null`) fields the new status dropped;
//!   arrays are replaced whole, as JSON merge patch does.
//!
//! # Caveats
//! - The comparison is against the object passed in. If it is stale, a change another
//!   writer made may be missed or overwritten on the fields this patch touches; call
//!   [`StatusWriter::with_precondition`] to make a stale write fail with a conflict instead.

use std::fmt::Debug;

use kube::Resource;
use kube::api::{Api, Patch, PatchParams};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};

/// Errors of [`StatusWriter::write`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The object or the status could not be serialized. A bug in the types; do not retry.
    #[error("serializing the status")]
    Serialize(#[source] serde_json::Error),
    /// The object has no name.
    #[error("the object has no name")]
    NoName,
    /// The patch failed. A 409 Conflict (with a precondition) or a server error: retry with
    /// backoff after re-reading the object.
    #[error("patching the status")]
    Patch(#[source] kube::Error),
}

/// What [`StatusWriter::write`] did.
#[derive(Debug, Clone, PartialEq)]
pub enum StatusWrite<K> {
    /// The status was already as wanted; nothing was sent.
    Unchanged,
    /// The status was patched; the object as the server returned it.
    Written(Box<K>),
}

/// Writes the `status` subresource of objects of one kind; see the [module docs](self).
#[derive(Clone)]
pub struct StatusWriter<K> {
    api: Api<K>,
    params: PatchParams,
    precondition: bool,
}

impl<K> Debug for StatusWriter<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StatusWriter")
            .field("precondition", &self.precondition)
            .finish_non_exhaustive()
    }
}

impl<K> StatusWriter<K>
where
    K: Resource + Serialize + DeserializeOwned + Clone + Debug,
{
    /// A writer patching through `api` (namespaced to the objects' namespace).
    pub fn new(api: Api<K>) -> Self {
        StatusWriter {
            api,
            params: PatchParams::default(),
            precondition: false,
        }
    }

    /// Sends the object's resourceVersion with each patch, so a write based on a stale
    /// object fails with 409 Conflict.
    #[must_use]
    pub fn with_precondition(mut self) -> Self {
        self.precondition = true;
        self
    }

    /// Sets the field manager recorded for the writes.
    #[must_use]
    pub fn field_manager(mut self, manager: impl Into<String>) -> Self {
        self.params.field_manager = Some(manager.into());
        self
    }

    /// Makes `current`'s status equal to `status`, writing only if they differ.
    pub async fn write<S: Serialize>(
        &self,
        current: &K,
        status: &S,
    ) -> Result<StatusWrite<K>, Error> {
        let name = current.meta().name.clone().ok_or(Error::NoName)?;
        let old = serde_json::to_value(current)
            .map_err(Error::Serialize)?
            .get_mut("status")
            .map(Value::take)
            .unwrap_or(Value::Null);
        let new = serde_json::to_value(status).map_err(Error::Serialize)?;
        let (old, new) = (without_nulls(old), without_nulls(new));
        if old == new {
            return Ok(StatusWrite::Unchanged);
        }
        let mut patch = json!({ "status": merge_diff(&old, &new) });
        if self.precondition
            && let Some(rv) = &current.meta().resource_version
        {
            patch["metadata"] = json!({ "resourceVersion": rv });
        }
        let written = self
            .api
            .patch_status(&name, &self.params, &Patch::Merge(&patch))
            .await
            .map_err(Error::Patch)?;
        Ok(StatusWrite::Written(Box::new(written)))
    }
}

/// Drops `null` members of objects, recursively (`None` and absent compare equal).
fn without_nulls(v: Value) -> Value {
    match v {
        Value::Object(map) => Value::Object(
            map.into_iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k, without_nulls(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.into_iter().map(without_nulls).collect()),
        other => other,
    }
}

/// The JSON merge patch (RFC 7386) that turns `old` into `new`.
fn merge_diff(old: &Value, new: &Value) -> Value {
    match (old, new) {
        (Value::Object(old), Value::Object(new)) => {
            let mut out = Map::new();
            for key in old.keys() {
                if !new.contains_key(key) {
                    out.insert(key.clone(), Value::Null);
                }
            }
            for (key, value) in new {
                match old.get(key) {
                    Some(prev) if prev == value => {}
                    Some(prev) => {
                        out.insert(key.clone(), merge_diff(prev, value));
                    }
                    None => {
                        out.insert(key.clone(), value.clone());
                    }
                }
            }
            Value::Object(out)
        }
        _ => new.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_diff_sets_changed_fields_and_nulls_dropped_ones() {
        let old = json!({"a": 1, "b": {"c": 2, "d": 3}, "gone": true, "list": [1, 2]});
        let new = json!({"a": 1, "b": {"c": 5, "d": 3}, "list": [1], "added": "x"});
        assert_eq!(
            merge_diff(&old, &new),
            json!({"b": {"c": 5}, "gone": null, "list": [1], "added": "x"})
        );
    }

    #[test]
    fn null_members_compare_equal_to_absent_ones() {
        assert_eq!(
            without_nulls(json!({"a": null, "b": [{"c": null, "d": 1}]})),
            json!({"b": [{"d": 1}]})
        );
    }
}
