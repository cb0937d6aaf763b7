//! `delete`: an object goes at once, or is marked for deletion while finalizers hold it; the
//! propagation policy becomes the garbage collector's finalizer.

use std::sync::Arc;

use serde_json::{Value, json};

use super::{DeleteOptions, Deleted, meta_mut, now_rfc3339, set_finalizers};
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
        let mut already: Option<Value> = None;
        let mut dry: Option<Deleted> = None;
        let mut step = |old_stored: Value| -> Update {
            let mut old = res.strategy.to_served(old_stored.clone());
            // The propagation policy becomes (or swaps) the garbage collector's finalizer.
            let gc_finalizers = opts.gc_finalizers(&old);
            if old.pointer("/metadata/deletionTimestamp").is_some() {
                let Some(finalizers) = gc_finalizers else {
                    already = Some(old);
                    return Update::Abort;
                };
                let none_left = finalizers.is_empty() && !res.strategy.held_by_spec(&old);
                set_finalizers(&mut old, finalizers);
                if opts.dry_run {
                    dry = Some(Deleted::Pending(old));
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
            let has_finalizers = old
                .pointer("/metadata/finalizers")
                .and_then(Value::as_array)
                .is_some_and(|f| !f.is_empty());
            if has_finalizers || res.strategy.held_by_spec(&old) {
                let mut marked = old;
                let now = now_rfc3339();
                {
                    let meta = meta_mut(&mut marked);
                    meta.insert("deletionTimestamp".into(), json!(now));
                    meta.insert("deletionGracePeriodSeconds".into(), json!(0));
                    if let Some(g) = meta.get("generation").and_then(Value::as_i64)
                        && g > 0
                    {
                        meta.insert("generation".into(), json!(g + 1));
                    }
                }
                res.strategy.prepare_for_delete(&mut marked, &now);
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
