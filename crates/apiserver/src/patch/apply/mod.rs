//! Server-side apply and the ownership bookkeeping of every other write.
//!
//! An apply body is the manager's whole *intent*: [`apply`] merges it into the live object
//! (objects key by key, lists whole unless their list type says otherwise), removes the fields
//! the manager applied last time and left out now (unless another manager owns them), refuses
//! to change a field another manager owns (409, unless forced, which moves the field to the
//! applier) and records the applied fields as the manager's `Apply` entry of
//! `metadata.managedFields`. [`track_update`] does the bookkeeping of the other writes: the
//! fields a write adds or changes become its manager's (`Update` entry) and leave every other
//! manager; removed fields leave everyone.
//!
//! List types: a list is *atomic* (one value, owned and replaced whole) unless
//! - a built-in kind merges it by key or as a set in strategic merge patches (the table of
//!   [`super::strategic`]: containers by `name`, ports by `containerPort`, conditions by
//!   `type`, finalizers as a set, …), or
//! - a custom kind's structural schema says `x-kubernetes-list-type: map` (keyed by
//!   `x-kubernetes-list-map-keys`) or `set`.
//!
//! A granular list whose items lack their keys, or repeat one, is treated as atomic.
//!
//! Server-owned metadata (`name`, `namespace`, `uid`, `resourceVersion`, `creationTimestamp`,
//! `generation`, `managedFields`, deletion fields), `apiVersion` and `kind` are never owned.
//!
//! Where to start: [`apply`], [`track_update`], then [`settle_times`], which gives the writer's
//! entry its time once the registry knows whether the object changed.
//!
//! This file holds the verbs and the `managedFields` bookkeeping; `field_sets` the walk
//! that turns a value into the fields it sets (with the list types), and `merge` the value
//! side (merge an intent, prune what a manager gave up, compare two versions).

mod field_sets;
mod merge;

use serde_json::{Map, Value, json};

use super::fields::{FieldSet, ManagedEntry, Operation, decode_managed, encode_managed};
use crate::api::error::ApiError;
use field_sets::Cursor;
use merge::{merge, prune, retain_known};

pub(crate) use field_sets::{Lists, field_set};
pub(crate) use merge::compare;

/// What an apply needs besides the bodies.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ApplyParams<'a> {
    /// The field manager (required for apply).
    pub(crate) manager: &'a str,
    /// `force=true`: take fields from their owners instead of failing.
    pub(crate) force: bool,
    /// The apiVersion of the endpoint.
    pub(crate) api_version: &'a str,
    /// `status` for applies through `/status`; empty otherwise.
    pub(crate) subresource: &'a str,
    /// The kind's list types.
    pub(crate) lists: Lists<'a>,
}

/// Applies `config` (the manager's intent, already restricted to the addressed part) to
/// `live` (`None`: the object does not exist). `decode` checks and normalises the merged
/// object as the kind's decoder does (it drops unknown fields). Returns the new object with
/// its `metadata.managedFields` (the applier's entry without a time; see [`settle_times`]).
///
/// # Errors
/// 409 Conflict (one cause per field) when the apply changes fields other managers own and
/// `force` is not set; whatever `decode` fails with.
pub(crate) fn apply(
    live: Option<&Value>,
    config: &Value,
    p: &ApplyParams<'_>,
    decode: &mut dyn FnMut(Value) -> Result<Value, ApiError>,
) -> Result<Value, ApiError> {
    let root = Cursor::root(p.lists);
    let mut managers = live.map(decode_managed).unwrap_or_default();
    let live = live.map(without_managed_fields);
    let merged = merge(live.as_ref(), config, &root);
    let mut new = decode(merged)?;
    let mut known = config.clone();
    retain_known(&mut known, &new, &root);
    let set = field_set(&known, p.lists);

    let mine = managers
        .iter()
        .position(|e| e.is(p.manager, Operation::Apply, p.subresource));
    let mut others = FieldSet::new();
    for (i, e) in managers.iter().enumerate() {
        if Some(i) != mine {
            others.union(&e.fields);
        }
    }
    if let Some(i) = mine {
        let stale = managers[i].fields.difference(&set).difference(&others);
        if !stale.is_empty() {
            let mut owned = set.clone();
            owned.union(&others);
            prune(&mut new, &stale, Some(&owned));
        }
    }

    let cmp = compare(live.as_ref(), &new, p.lists);
    let mut touched = cmp.modified;
    touched.union(&cmp.added);
    let taken: Vec<(usize, FieldSet)> = managers
        .iter()
        .enumerate()
        .filter(|(i, _)| Some(*i) != mine)
        .map(|(i, e)| (i, e.fields.intersection(&touched)))
        .filter(|(_, t)| !t.is_empty())
        .collect();
    if !p.force && !taken.is_empty() {
        // kubectl moving an object from client-side to server-side apply may take the fields
        // its last-applied annotation names without forcing, as Kubernetes allows.
        let allowed = (p.manager == KUBECTL)
            .then(|| last_applied_fields(live.as_ref(), p.lists))
            .flatten();
        let mut conflicts = Vec::new();
        for (i, t) in &taken {
            let blocked = match &allowed {
                Some(a) => t.difference(a),
                None => t.clone(),
            };
            let who = managers[*i].describe();
            conflicts.extend(blocked.paths().into_iter().map(|path| (who.clone(), path)));
        }
        if !conflicts.is_empty() {
            return Err(conflict_error(conflicts));
        }
    }
    for (i, t) in &taken {
        managers[*i].fields = managers[*i].fields.difference(t);
    }
    if !cmp.removed.is_empty() {
        for (i, e) in managers.iter_mut().enumerate() {
            if Some(i) != mine {
                e.fields = e.fields.difference(&cmp.removed);
            }
        }
    }
    let entry = ManagedEntry {
        manager: p.manager.to_string(),
        operation: Operation::Apply,
        api_version: p.api_version.to_string(),
        time: None,
        subresource: p.subresource.to_string(),
        fields: set,
    };
    match mine {
        Some(i) => managers[i] = entry,
        None => managers.push(entry),
    }
    put_managed(&mut new, &mut managers);
    Ok(new)
}

/// The bookkeeping of a non-apply write by `manager` from `old` to `new`, starting from the
/// entries `base` (the stored ones, or what the client sent): returns `new`'s managedFields
/// entries (the writer's without a time).
pub(crate) fn track_update(
    mut managers: Vec<ManagedEntry>,
    old: Option<&Value>,
    new: &Value,
    (manager, api_version, subresource): (&str, &str, &str),
    lists: Lists<'_>,
) -> Vec<ManagedEntry> {
    let cmp = compare(old, new, lists);
    let mut touched = cmp.modified;
    touched.union(&cmp.added);
    let mine = managers
        .iter()
        .position(|e| e.is(manager, Operation::Update, subresource));
    for (i, e) in managers.iter_mut().enumerate() {
        if Some(i) != mine && !(touched.is_empty() && cmp.removed.is_empty()) {
            e.fields = e.fields.difference(&touched).difference(&cmp.removed);
        }
    }
    if touched.is_empty() && cmp.removed.is_empty() {
        return managers;
    }
    let mut fields = match mine {
        Some(i) => managers[i].fields.difference(&cmp.removed),
        None => FieldSet::new(),
    };
    fields.union(&touched);
    let entry = ManagedEntry {
        manager: manager.to_string(),
        operation: Operation::Update,
        api_version: api_version.to_string(),
        time: None,
        subresource: subresource.to_string(),
        fields,
    };
    match mine {
        Some(i) => managers[i] = entry,
        None => managers.push(entry),
    }
    managers
}

/// Gives the writer's entry (`manager`, `operation`, `subresource`) its time: the time it had
/// if neither the object nor the writer's fields changed (so a no-op stays a no-op), `now`
/// otherwise. Entries of other managers keep theirs.
pub(crate) fn settle_times(
    entries: &mut [ManagedEntry],
    old: &[ManagedEntry],
    writer: (&str, Operation, &str),
    object_changed: bool,
    now: &str,
) {
    let (manager, operation, subresource) = writer;
    for e in entries.iter_mut() {
        if e.is(manager, operation, subresource) {
            let before = old.iter().find(|o| o.is(manager, operation, subresource));
            e.time = match before {
                Some(b) if !object_changed && b.fields == e.fields => b.time.clone(),
                _ => Some(now.to_string()),
            };
        } else if e.time.is_none() {
            e.time = Some(now.to_string());
        }
    }
}

/// kubectl's manager name for `apply --server-side`.
const KUBECTL: &str = "kubectl";

/// The fields of the object in `live`'s `kubectl.kubernetes.io/last-applied-configuration`
/// annotation (what client-side `kubectl apply` last sent), if there is one.
fn last_applied_fields(live: Option<&Value>, lists: Lists<'_>) -> Option<FieldSet> {
    let text = live?
        .pointer("/metadata/annotations")?
        .get("kubectl.kubernetes.io/last-applied-configuration")?
        .as_str()?;
    let obj: Value = serde_json::from_str(text).ok()?;
    Some(field_set(&obj, lists))
}

/// Stores `entries` as `obj`'s managedFields (removing the field when none owns anything).
pub(crate) fn put_managed(obj: &mut Value, entries: &mut Vec<ManagedEntry>) {
    let encoded = encode_managed(entries);
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        match encoded {
            Some(v) => {
                meta.insert("managedFields".into(), v);
            }
            None => {
                meta.remove("managedFields");
            }
        }
    }
}

/// Whether two objects are equal once their managedFields are left aside.
pub(crate) fn same_ignoring_managed_fields(a: &Value, b: &Value) -> bool {
    fn same_meta(a: Option<&Value>, b: Option<&Value>) -> bool {
        match (a, b) {
            (Some(Value::Object(am)), Some(Value::Object(bm))) => {
                let counted =
                    |m: &Map<String, Value>| m.len() - usize::from(m.contains_key("managedFields"));
                counted(am) == counted(bm)
                    && am
                        .iter()
                        .filter(|(k, _)| *k != "managedFields")
                        .all(|(k, v)| bm.get(k) == Some(v))
            }
            (a, b) => a == b,
        }
    }
    match (a, b) {
        (Value::Object(am), Value::Object(bm)) => {
            am.len() == bm.len()
                && am
                    .iter()
                    .all(|(k, v)| k == "metadata" || bm.get(k) == Some(v))
                && same_meta(am.get("metadata"), bm.get("metadata"))
        }
        _ => a == b,
    }
}

fn without_managed_fields(v: &Value) -> Value {
    let mut v = v.clone();
    if let Some(meta) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("managedFields");
    }
    v
}

/// The 409 of an apply that would change fields other managers own, worded as Kubernetes
/// words it. `conflicts` holds (manager as described, field path) pairs.
fn conflict_error(mut conflicts: Vec<(String, String)>) -> ApiError {
    conflicts.sort_by(|a, b| a.0.cmp(&b.0));
    let causes = conflicts
        .iter()
        .map(|(m, p)| {
            json!({"reason": "FieldManagerConflict", "message": format!("conflict with {m}"), "field": p})
        })
        .collect();
    let message = match conflicts.as_slice() {
        [(m, p)] => format!("Apply failed with 1 conflict: conflict with {m}: {p}"),
        many => {
            let mut lines = Vec::new();
            let mut last: Option<&str> = None;
            for (m, p) in many {
                if last != Some(m.as_str()) {
                    lines.push(format!("conflicts with {m}:"));
                    last = Some(m);
                }
                lines.push(format!("- {p}"));
            }
            format!(
                "Apply failed with {} conflicts: {}",
                many.len(),
                lines.join("\n")
            )
        }
    };
    ApiError::ApplyConflict { message, causes }
}

#[cfg(test)]
mod tests;
