//! `delete`: an object goes at once, or is marked for deletion while finalizers hold it; the
//! propagation policy becomes the garbage collector's finalizer.

use std::sync::Arc;

use serde_json::{Value, json};

use super::{DeleteOptions, Deleted, meta_mut, set_finalizers};
use crate::api::error::ApiError;
use crate::registry::Registry;
use crate::registry::resource::Resource;
use crate::storage::{Outcome, StorageError, Update};

impl Registry {
    /// `DELETE` one object.
    pub async fn delete(
        &self,
        res: &Arc<Resource>,
        ns: Option<&str>,
        name: &str,
        opts: &DeleteOptions,
    ) -> Result<Deleted, ApiError> {
        opts.validate()?;
        if let Some(why) = res.strategy.refuse_delete(name) {
            return Err(ApiError::Forbidden {
                resource: res.group_resource(),
                name: Some(name.to_string()),
                message: format!("{} {name:?} is forbidden: {why}", res.group_resource()),
                causes: Vec::new(),
            });
        }
        let key = res.key(ns, name);
        // A negative grace period counts as 1 s on the delete path, as in Kubernetes.
        let requested = opts.grace_period_seconds.map(|g| if g < 0 { 1 } else { g });
        let mut already: Option<Value> = None;
        let mut dry: Option<Deleted> = None;
        let mut step = |old_stored: Value| -> Update {
            let mut old = res.strategy.to_served(old_stored.clone());
            // The propagation policy becomes (or swaps) the garbage collector's finalizer.
            let gc_finalizers = opts.gc_finalizers(&old);
            if old.pointer("/metadata/deletionTimestamp").is_some() {
                let graceful = res
                    .strategy
                    .graceful_delete_period(&old, requested)
                    .is_some();
                let current = old
                    .pointer("/metadata/deletionGracePeriodSeconds")
                    .and_then(Value::as_i64)
                    .unwrap_or(0);
                // A graceful deletion under way may only be shortened.
                let shorter = requested.filter(|p| graceful && current > 0 && *p < current);
                if gc_finalizers.is_none() && shorter.is_none() {
                    let stranded = graceful && current == 0 && !has_finalizers(&old);
                    if !stranded {
                        already = Some(old);
                        return Update::Abort;
                    }
                }
                if let Some(period) = shorter {
                    let at = shorten(&old, current, period);
                    let meta = meta_mut(&mut old);
                    meta.insert("deletionTimestamp".into(), json!(at));
                    meta.insert("deletionGracePeriodSeconds".into(), json!(period));
                }
                if let Some(finalizers) = gc_finalizers {
                    set_finalizers(&mut old, finalizers);
                }
                let grace_left = old
                    .pointer("/metadata/deletionGracePeriodSeconds")
                    .and_then(Value::as_i64)
                    .is_some_and(|g| g > 0);
                let none_left =
                    !has_finalizers(&old) && !res.strategy.held_by_spec(&old) && !grace_left;
                if opts.dry_run {
                    dry = Some(if none_left {
                        Deleted::Gone(old)
                    } else {
                        Deleted::Pending(old)
                    });
                    return Update::Abort;
                }
                let stored = res.strategy.to_stored(old);
                return if none_left {
                    Update::Delete(stored)
                } else {
                    Update::Put(stored)
                };
            }
            if let Some(finalizers) = gc_finalizers {
                set_finalizers(&mut old, finalizers);
            }
            add_finalizers(&mut old, res.strategy.finalizers_on_delete());
            let grace = res
                .strategy
                .graceful_delete_period(&old, requested)
                .unwrap_or(0);
            if has_finalizers(&old) || res.strategy.held_by_spec(&old) || grace > 0 {
                let mut marked = old;
                let at = after_seconds(jiff::Timestamp::now(), grace);
                {
                    let meta = meta_mut(&mut marked);
                    meta.insert("deletionTimestamp".into(), json!(at));
                    meta.insert("deletionGracePeriodSeconds".into(), json!(grace));
                    if let Some(g) = meta.get("generation").and_then(Value::as_i64)
                        && g > 0
                    {
                        meta.insert("generation".into(), json!(g + 1));
                    }
                }
                res.strategy.prepare_for_delete(&mut marked, &at);
                if opts.dry_run {
                    dry = Some(Deleted::Pending(marked));
                    return Update::Abort;
                }
                Update::Put(res.strategy.to_stored(marked))
            } else {
                if opts.dry_run {
                    dry = Some(Deleted::Gone(old));
                    return Update::Abort;
                }
                Update::Delete(old_stored)
            }
        };
        let result = self
            .storage()
            .guaranteed_update(&key, &opts.preconditions, &mut step)
            .await;
        match result {
            Ok(written) => {
                let v = written
                    .stored
                    .value()
                    .map(|v| res.strategy.to_served(v))
                    .map_err(|e| ApiError::Internal(e.to_string()))?;
                Ok(match written.outcome {
                    Outcome::Deleted => Deleted::Gone(v),
                    Outcome::Written | Outcome::Unchanged => Deleted::Pending(v),
                })
            }
            Err(StorageError::Aborted) => match (already, dry) {
                (Some(v), _) => Ok(Deleted::Pending(v)),
                (None, Some(d)) => Ok(d),
                (None, None) => Err(ApiError::Internal("delete aborted without a reason".into())),
            },
            Err(StorageError::Unreadable { message, .. }) => {
                self.delete_unreadable(res, ns, name, opts, &message).await
            }
            Err(e) => Err(ApiError::from_storage(e, &res.group_resource(), name)),
        }
    }

    /// Deletes an object whose stored bytes cannot be read back (written by an older server
    /// that let it be nested too deep). Its finalizers and owners cannot be read either, so it
    /// goes at once, as Kubernetes' `ignoreStoreReadErrorWithClusterBreakingPotential` delete
    /// does; watchers see a DELETED event that carries only its identity.
    async fn delete_unreadable(
        &self,
        res: &Arc<Resource>,
        ns: Option<&str>,
        name: &str,
        opts: &DeleteOptions,
        why: &str,
    ) -> Result<Deleted, ApiError> {
        let mut last = json!({
            "apiVersion": res.api_version(),
            "kind": res.kind,
            "metadata": {"name": name},
        });
        if res.namespaced
            && let Some(ns) = ns
        {
            last["metadata"]["namespace"] = json!(ns);
        }
        if opts.dry_run {
            return Ok(Deleted::Gone(last));
        }
        let key = res.key(ns, name);
        let stored = self
            .storage()
            .delete_unreadable(&key, &opts.preconditions, res.strategy.to_stored(last))
            .await
            .map_err(|e| ApiError::from_storage(e, &res.group_resource(), name))?;
        tracing::warn!(%key, reason = %why, "deleted an object that could not be read");
        let v = stored
            .value()
            .map(|v| res.strategy.to_served(v))
            .map_err(|e| ApiError::Internal(e.to_string()))?;
        Ok(Deleted::Gone(v))
    }
}

/// Appends the `names` that `obj` does not carry yet to its finalizers.
fn add_finalizers(obj: &mut Value, names: &[&str]) {
    if names.is_empty() {
        return;
    }
    let mut list: Vec<Value> = obj
        .pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for name in names {
        if !list.iter().any(|f| f == name) {
            list.push(Value::from(*name));
        }
    }
    set_finalizers(obj, list);
}

fn has_finalizers(obj: &Value) -> bool {
    obj.pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .is_some_and(|f| !f.is_empty())
}

/// `at` plus `seconds`, in the API's second precision (saturating far in the future).
fn after_seconds(at: jiff::Timestamp, seconds: i64) -> String {
    at.checked_add(jiff::SignedDuration::from_secs(seconds))
        .unwrap_or(jiff::Timestamp::MAX)
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

/// The deletionTimestamp of an object whose grace period shrinks from `current` to `period`
/// seconds: the deletion was asked at `deletionTimestamp - current`.
fn shorten(obj: &Value, current: i64, period: i64) -> String {
    let asked = obj
        .pointer("/metadata/deletionTimestamp")
        .and_then(Value::as_str)
        .and_then(|t| t.parse::<jiff::Timestamp>().ok())
        .and_then(|t| t.checked_sub(jiff::SignedDuration::from_secs(current)).ok())
        .unwrap_or_else(jiff::Timestamp::now);
    after_seconds(asked, period)
}
