//! The workers: they carry out an action through the registry's ordinary delete and update
//! paths, after checking that the object is still the one the decision saw.

use std::sync::Arc;

use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::graph::{Action, Work};
use super::queue::{Pending, Recheck, WorkQueue};
use super::resource_for;
use crate::api::error::ApiError;
use crate::registry::Registry;
use crate::registry::rest::{DeleteOptions, Part, Target};
use crate::storage::Preconditions;

/// A worker: carries out queued work until the queue closes.
pub(super) async fn work(
    registry: Arc<Registry>,
    queue: Arc<WorkQueue>,
    recheck: mpsc::Sender<Recheck>,
    stop: CancellationToken,
) {
    while let Some(mut job) = queue.next().await {
        let item = match job.pending.take() {
            Some(Pending::Work(item)) => item,
            // A newer hand-out already took the action: nothing left to do.
            None => continue,
            // Its backoff is over: the graph decides the object again on its current view.
            Some(Pending::Recheck) => {
                let (tx, rx) = oneshot::channel();
                let uid = job.guard.key().clone();
                let decided = tokio::select! {
                    () = stop.cancelled() => return,
                    sent = recheck.send((uid, tx)) => match sent {
                        Ok(()) => rx.await.ok().flatten(),
                        Err(_) => return,
                    },
                };
                match decided {
                    Some(item) => item,
                    // Gone, or nothing to do any more: settled as a success.
                    None => continue,
                }
            }
        };
        match carry_out(&registry, &item).await {
            // The object changed or went away: its watch event brings it back to the graph.
            Ok(()) | Err(ApiError::NotFound { .. } | ApiError::Conflict { .. }) => drop(job),
            Err(e) => {
                let retry = queue.retry(job);
                tracing::warn!(kind = %item.kind, name = %item.name, action = ?item.action, error = %e, ?retry, "garbage collector action failed; retrying");
            }
        }
    }
}

/// Carries out one action through the registry's ordinary paths.
pub(super) async fn carry_out(registry: &Registry, item: &Work) -> Result<(), ApiError> {
    let Some(res) = resource_for(registry, &item.group, &item.kind) else {
        // No longer served (a removed custom resource): nothing to act through.
        return Ok(());
    };
    let ns = item.namespace.as_deref();
    let target = Target {
        res: &res,
        ns,
        name: &item.name,
        part: Part::Main,
    };
    let opts = crate::registry::rest::WriteOptions::default();
    match &item.action {
        Action::Delete(policy) => {
            let opts = DeleteOptions {
                preconditions: Preconditions {
                    uid: Some(item.uid.to_string()),
                    resource_version: Some(item.rv),
                },
                propagation: Some(*policy),
                ..DeleteOptions::default()
            };
            registry.delete(&res, ns, &item.name, &opts).await?;
        }
        Action::Strip(owners) => {
            let mut produce = |cur: &Value| {
                same_object(cur, item)?;
                let mut next = cur.clone();
                if let Some(meta) = next.get_mut("metadata").and_then(Value::as_object_mut) {
                    let refs: Vec<Value> = meta
                        .get("ownerReferences")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                        .filter(|r| {
                            !r.get("uid")
                                .and_then(Value::as_str)
                                .is_some_and(|u| owners.iter().any(|o| &**o == u))
                        })
                        .cloned()
                        .collect();
                    if refs.is_empty() {
                        meta.remove("ownerReferences");
                    } else {
                        meta.insert("ownerReferences".into(), Value::Array(refs));
                    }
                }
                Ok(next)
            };
            registry
                .write_existing(target, None, &mut produce, &opts)
                .await?;
        }
        Action::RemoveFinalizer(finalizer) => {
            let mut produce = |cur: &Value| {
                same_object(cur, item)?;
                let mut next = cur.clone();
                if let Some(meta) = next.get_mut("metadata").and_then(Value::as_object_mut) {
                    let left: Vec<Value> = meta
                        .get("finalizers")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                        .filter(|f| f.as_str() != Some(finalizer))
                        .cloned()
                        .collect();
                    if left.is_empty() {
                        meta.remove("finalizers");
                    } else {
                        meta.insert("finalizers".into(), Value::Array(left));
                    }
                }
                Ok(next)
            };
            registry
                .write_existing(target, None, &mut produce, &opts)
                .await?;
        }
    }
    Ok(())
}

/// Fails with a conflict unless `cur` is the object the work was decided for.
pub(super) fn same_object(cur: &Value, item: &Work) -> Result<(), ApiError> {
    let uid = cur.pointer("/metadata/uid").and_then(Value::as_str);
    if uid == Some(&*item.uid) {
        return Ok(());
    }
    Err(ApiError::Conflict {
        resource: crate::api::error::GroupResource {
            group: item.group.clone(),
            resource: String::new(),
        },
        name: item.name.clone(),
        detail: "the object was replaced".into(),
    })
}
