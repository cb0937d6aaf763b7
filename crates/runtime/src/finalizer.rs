//! Finalizers: make sure cleanup runs before an object goes away.
//!
//! [`finalize`] is the whole protocol for one reconcile: while the object lives it adds the
//! finalizer (if missing) and then calls the function with [`Event::Apply`]; once the object
//! is being deleted it calls the function with [`Event::Cleanup`] and, when that succeeded,
//! removes the finalizer so the API server can delete the object. [`add_finalizer`] and
//! [`remove_finalizer`] are the two writes on their own. [`try_add_finalizer`] and
//! [`try_remove_finalizer`] make one conditional write and hand a conflict back instead of
//! reading the object again: for a reconciler that reads from a cache, whose retry reads a
//! fresher cache, and whose RBAC then needs no `get`.
//!
//! # Guarantees
//! - Safe under conflicts: each write carries the resourceVersion it was computed from and
//!   changes only this finalizer's entry. On 409 Conflict the object is read again and the
//!   write recomputed, so finalizers other writers added or removed meanwhile are kept.
//! - Cleanup runs before the finalizer is removed; if it fails, the finalizer stays and the
//!   error is returned (retry with backoff).
//! - Nothing runs for an object that is being deleted and no longer carries this finalizer.
//!
//! # Assumptions
//! - Cleanup is idempotent: it may run again after a crash between cleanup and removal.

use std::fmt::Debug;
use std::future::Future;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use kube::api::{Api, Patch, PatchParams};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::json;

use crate::informer::BackoffConfig;
use crate::informer::backoff::Backoff;

/// How many times a write is recomputed after conflicts before giving up.
const ATTEMPTS: usize = 8;

/// The pauses before re-reading after a second or later conflict: jittered, doubling from
/// 5 ms to at most 40 ms (client-go's `retry.DefaultRetry` waits 10 ms between its attempts,
/// with jitter). Without a pause, a writer that rewrites the object in a loop wins every
/// round, as each attempt's read and write are one round trip behind it.
fn conflict_backoff() -> Backoff {
    Backoff::new(BackoffConfig {
        initial: std::time::Duration::from_millis(5),
        max: std::time::Duration::from_millis(40),
        // Never reached: the helper never reports itself healthy, so the delays only grow.
        reset_after: std::time::Duration::MAX,
    })
}

/// Errors of the finalizer helper.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error<E: std::error::Error + 'static> {
    /// The apply or cleanup function failed; for cleanup the finalizer stays. Retry with
    /// backoff.
    #[error("{0}")]
    Reconcile(#[source] E),
    /// Adding the finalizer failed. Retry with backoff.
    #[error("adding the finalizer")]
    Add(#[source] kube::Error),
    /// Removing the finalizer failed. Retry with backoff (cleanup will run again).
    #[error("removing the finalizer")]
    Remove(#[source] kube::Error),
    /// The object has no name, or the finalizer name is empty. A bug; do not retry.
    #[error("invalid input: {0}")]
    Invalid(&'static str),
}

/// What the reconcile function is asked to do.
#[derive(Debug)]
pub enum Event<K> {
    /// The object lives and carries the finalizer: make the world match it.
    Apply(Arc<K>),
    /// The object is being deleted: release what it holds. The finalizer is removed once
    /// this returns `Ok`.
    Cleanup(Arc<K>),
}

/// What [`finalize`] did.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome<T> {
    /// The finalizer was just added. The write produces a watch event, so the object comes
    /// back for a reconcile that applies it; nothing else ran.
    Added,
    /// The function ran for [`Event::Apply`].
    Applied(T),
    /// The function ran for [`Event::Cleanup`] and the finalizer was removed.
    CleanedUp(T),
    /// The object is being deleted without this finalizer: nothing to do.
    Skipped,
}

/// Runs one reconcile of `obj` under the finalizer `name`; see the [module docs](self).
pub async fn finalize<K, T, E, F, Fut>(
    api: &Api<K>,
    name: &str,
    obj: Arc<K>,
    reconcile: F,
) -> Result<Outcome<T>, Error<E>>
where
    K: Resource + Clone + Serialize + DeserializeOwned + Debug,
    E: std::error::Error + 'static,
    F: FnOnce(Event<K>) -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    if name.is_empty() {
        return Err(Error::Invalid("empty finalizer name"));
    }
    let meta = obj.meta();
    let has = meta.finalizers.iter().flatten().any(|f| f == name);
    let deleting = meta.deletion_timestamp.is_some();
    match (deleting, has) {
        (false, false) => {
            add_finalizer(api, &obj, name).await.map_err(Error::Add)?;
            Ok(Outcome::Added)
        }
        (false, true) => {
            let out = reconcile(Event::Apply(obj))
                .await
                .map_err(Error::Reconcile)?;
            Ok(Outcome::Applied(out))
        }
        (true, true) => {
            let out = reconcile(Event::Cleanup(Arc::clone(&obj)))
                .await
                .map_err(Error::Reconcile)?;
            remove_finalizer(api, &obj, name)
                .await
                .map_err(Error::Remove)?;
            Ok(Outcome::CleanedUp(out))
        }
        (true, false) => Ok(Outcome::Skipped),
    }
}

/// Adds the finalizer `name` to `obj` unless present; returns the object as written (or as
/// read, if nothing had to change). Conflicts are retried on a fresh read.
pub async fn add_finalizer<K>(api: &Api<K>, obj: &K, name: &str) -> Result<K, kube::Error>
where
    K: Resource + Clone + Serialize + DeserializeOwned + Debug,
{
    update_finalizers(api, obj, ATTEMPTS, |list| adding(list, name))
        .await
        .map(|o| o.unwrap_or_else(|| obj.clone()))
}

/// Like [`add_finalizer`], in one write: a 409 Conflict is returned (retry the reconcile),
/// and the object is never read from the API server.
pub async fn try_add_finalizer<K>(api: &Api<K>, obj: &K, name: &str) -> Result<K, kube::Error>
where
    K: Resource + Clone + Serialize + DeserializeOwned + Debug,
{
    update_finalizers(api, obj, 1, |list| adding(list, name))
        .await
        .map(|o| o.unwrap_or_else(|| obj.clone()))
}

pub(crate) fn adding(list: &mut Vec<String>, name: &str) -> bool {
    if list.iter().any(|f| f == name) {
        false
    } else {
        list.push(name.to_string());
        true
    }
}

pub(crate) fn removing(list: &mut Vec<String>, name: &str) -> bool {
    let before = list.len();
    list.retain(|f| f != name);
    list.len() != before
}

/// Removes the finalizer `name` from `obj` if present; returns the object as written, or
/// `None` when it is gone (removing the last finalizer of a deleted object deletes it).
/// Conflicts are retried on a fresh read.
pub async fn remove_finalizer<K>(
    api: &Api<K>,
    obj: &K,
    name: &str,
) -> Result<Option<K>, kube::Error>
where
    K: Resource + Clone + Serialize + DeserializeOwned + Debug,
{
    update_finalizers(api, obj, ATTEMPTS, |list| removing(list, name)).await
}

/// Like [`remove_finalizer`], in one write: a 409 Conflict is returned (retry the
/// reconcile), and the object is never read from the API server.
pub async fn try_remove_finalizer<K>(
    api: &Api<K>,
    obj: &K,
    name: &str,
) -> Result<Option<K>, kube::Error>
where
    K: Resource + Clone + Serialize + DeserializeOwned + Debug,
{
    update_finalizers(api, obj, 1, |list| removing(list, name)).await
}

/// Applies `change` to the finalizer list and writes it with a resourceVersion
/// precondition, re-reading and recomputing after each conflict. `Ok(None)` when the object
/// is gone; the object as read when `change` made no change. At most `attempts` writes.
async fn update_finalizers<K>(
    api: &Api<K>,
    obj: &K,
    attempts: usize,
    change: impl Fn(&mut Vec<String>) -> bool,
) -> Result<Option<K>, kube::Error>
where
    K: Resource + Clone + Serialize + DeserializeOwned + Debug,
{
    let Some(name) = obj.meta().name.clone() else {
        return Ok(None);
    };
    let mut current = obj.clone();
    let mut attempt = 0;
    let mut backoff = conflict_backoff();
    loop {
        attempt += 1;
        let Some(patch) = patch(current.meta(), &change) else {
            return Ok(Some(current));
        };
        match api
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(written) => return Ok(Some(written)),
            Err(kube::Error::Api(s)) if s.code == 404 => return Ok(None),
            Err(kube::Error::Api(s)) if s.code == 409 && attempt < attempts => {
                tracing::debug!(%name, attempt, "finalizer write conflicted; re-reading");
                // The first conflict is re-read at once (another writer came between our
                // read and write); later ones wait a little longer each time, with jitter,
                // so that two writers stop meeting in step.
                if attempt > 1 {
                    let delay = backoff.failed(tokio::time::Instant::now());
                    tokio::time::sleep(delay).await;
                }
                match api.get_opt(&name).await? {
                    Some(fresh) => current = fresh,
                    None => return Ok(None),
                }
            }
            Err(e) => return Err(e),
        }
    }
}

/// The merge patch that applies `change` to the finalizers of the object `meta` describes,
/// with its resourceVersion as the precondition (so a write computed from a stale object
/// conflicts instead of dropping another writer's finalizer); `None` if `change` changes
/// nothing.
pub(crate) fn patch(
    meta: &ObjectMeta,
    change: impl Fn(&mut Vec<String>) -> bool,
) -> Option<serde_json::Value> {
    let mut list = meta.finalizers.clone().unwrap_or_default();
    if !change(&mut list) {
        return None;
    }
    Some(json!({
        "metadata": {
            "resourceVersion": meta.resource_version,
            "finalizers": list,
        }
    }))
}
