//! The JSON merge patch of a status write, serialized straight from the two statuses.
//!
//! A merge patch sets what it names and removes what it names as `null` (RFC 7386). The
//! patch from `previous` to `new` therefore carries every field `new` sets and a `null` for
//! every field `previous` set that `new` leaves out (the status's empty fields are not
//! serialized). It is written field by field, without building a `serde_json::Value` of
//! either status: one status write per sync made those two trees about 2 % of the operator's
//! CPU (`docs/design/benchmarks.md`, "Whose code spends the operator's CPU").

use serde::ser::{Serialize, SerializeMap, Serializer};

use crate::types::ConfigMapSyncStatus;

/// `{"status": {…}}`, the merge patch that turns `previous` into `new`.
#[derive(Debug)]
pub(crate) struct StatusPatch<'a> {
    pub(crate) previous: &'a ConfigMapSyncStatus,
    pub(crate) new: &'a ConfigMapSyncStatus,
}

impl Serialize for StatusPatch<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut patch = serializer.serialize_map(Some(1))?;
        patch.serialize_entry("status", &Fields(self))?;
        patch.end()
    }
}

struct Fields<'a>(&'a StatusPatch<'a>);

impl Serialize for Fields<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        // Destructured so that a field added to the status cannot be left out of the patch.
        let ConfigMapSyncStatus {
            conditions,
            synced_namespaces,
            last_sync_time,
            source_resource_version,
        } = self.0.new;
        let old = self.0.previous;
        let mut map = serializer.serialize_map(None)?;
        field(
            &mut map,
            "conditions",
            (!conditions.is_empty()).then_some(conditions),
            !old.conditions.is_empty(),
        )?;
        field(
            &mut map,
            "syncedNamespaces",
            (!synced_namespaces.is_empty()).then_some(synced_namespaces),
            !old.synced_namespaces.is_empty(),
        )?;
        field(
            &mut map,
            "lastSyncTime",
            last_sync_time.as_ref(),
            old.last_sync_time.is_some(),
        )?;
        field(
            &mut map,
            "sourceResourceVersion",
            source_resource_version.as_ref(),
            old.source_resource_version.is_some(),
        )?;
        map.end()
    }
}

/// Writes `key: value` when the new status sets it, `key: null` when only the old one did.
fn field<M: SerializeMap, T: Serialize>(
    map: &mut M,
    key: &str,
    value: Option<&T>,
    was_set: bool,
) -> Result<(), M::Error> {
    match value {
        Some(value) => map.serialize_entry(key, value),
        None if was_set => map.serialize_entry(key, &()),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
    use serde_json::{Value, json};

    use super::*;

    /// A status with every field set; a field added to the status breaks this literal.
    fn full() -> ConfigMapSyncStatus {
        ConfigMapSyncStatus {
            conditions: vec![Condition {
                type_: "Ready".into(),
                status: "True".into(),
                reason: "Synced".into(),
                message: "copied to 1 namespace".into(),
                observed_generation: Some(3),
                last_transition_time: Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH),
            }],
            synced_namespaces: vec!["a".into(), "b".into()],
            last_sync_time: Some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH)),
            source_resource_version: Some("42".into()),
        }
    }

    /// The status with the fields whose bits are set in `mask` (bit i: field i of `full`).
    fn subset(mask: u8) -> ConfigMapSyncStatus {
        let all = full();
        ConfigMapSyncStatus {
            conditions: if mask & 1 != 0 {
                all.conditions
            } else {
                vec![]
            },
            synced_namespaces: if mask & 2 != 0 {
                all.synced_namespaces
            } else {
                vec![]
            },
            last_sync_time: all.last_sync_time.filter(|_| mask & 4 != 0),
            source_resource_version: all.source_resource_version.filter(|_| mask & 8 != 0),
        }
    }

    /// The patch as the operator built it before: both statuses as `Value`s, a `null` for
    /// each key of the old one missing from the new one.
    fn through_values(previous: &ConfigMapSyncStatus, new: &ConfigMapSyncStatus) -> Value {
        let mut body = serde_json::to_value(new).expect("a status serializes");
        let old = serde_json::to_value(previous).expect("a status serializes");
        if let (Value::Object(body), Value::Object(old)) = (&mut body, old) {
            for key in old.keys() {
                body.entry(key.clone()).or_insert(Value::Null);
            }
        }
        json!({ "status": body })
    }

    #[test]
    fn the_patch_matches_the_value_built_one_for_every_pair_of_field_sets() {
        for old_mask in 0..16 {
            for new_mask in 0..16 {
                let (previous, new) = (subset(old_mask), subset(new_mask));
                let patch = serde_json::to_value(StatusPatch {
                    previous: &previous,
                    new: &new,
                })
                .expect("the patch serializes");
                assert_eq!(
                    patch,
                    through_values(&previous, &new),
                    "fields set before {old_mask:04b}, after {new_mask:04b}"
                );
            }
        }
    }

    #[test]
    fn the_patch_names_every_field_the_status_serializes() {
        let status = serde_json::to_value(full()).expect("a status serializes");
        let patch = serde_json::to_value(StatusPatch {
            previous: &ConfigMapSyncStatus::default(),
            new: &full(),
        })
        .expect("the patch serializes");
        assert_eq!(patch["status"], status);
        let cleared = serde_json::to_value(StatusPatch {
            previous: &full(),
            new: &ConfigMapSyncStatus::default(),
        })
        .expect("the patch serializes");
        let keys = status.as_object().map(|m| m.len()).unwrap_or_default();
        assert_eq!(keys, 4);
        assert!(
            cleared["status"]
                .as_object()
                .is_some_and(|m| m.len() == keys && m.values().all(Value::is_null)),
            "{cleared}"
        );
    }
}
