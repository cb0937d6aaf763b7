//! What a controller calls: the [`Reconciler`] trait, the [`Request`] it is given, and the
//! outcomes it returns ([`Action`], [`ReconcileError`]).

use std::future::Future;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use crate::cache::{ObjectKey, Store};
use crate::informer::Informable;

/// Brings one object's world in line with its spec.
///
/// A controller calls `reconcile` with the key of an object that may have changed (or whose
/// owned or watched objects changed). It is never called for the same key by two workers at
/// once, and a change that arrives during a call leads to one more call afterwards. Make it
/// idempotent: it may run for changes it has already handled, and it does not learn which
/// event caused it.
///
/// # Outcomes
/// - `Ok(Action::done())`: nothing more to do; the key's backoff resets.
/// - `Ok(Action::requeue_after(d))`: run again after `d` (a periodic re-check); the backoff
///   resets.
/// - `Err(ReconcileError::Retry(e))` (what `?` produces): run again after the key's backoff.
/// - `Err(ReconcileError::Terminal(e))`: logged and counted, not retried until the next
///   change.
pub trait Reconciler<K>: Send + Sync + 'static {
    /// The reconciler's error.
    type Error: std::error::Error + Send + Sync + 'static;

    /// Reconciles the object `request` names.
    fn reconcile(
        &self,
        request: Request<K>,
    ) -> impl Future<Output = Result<Action, ReconcileError<Self::Error>>> + Send;
}

/// What a reconcile is asked to do: the key, and whether the object still exists.
///
/// Reading the object ([`object`](Self::object)) decodes it from the cache, so a reconciler
/// that needs only the key pays nothing for it.
pub struct Request<K> {
    key: ObjectKey,
    store: Store<K>,
    gone: Option<Gone<K>>,
}

/// Why a request names an object the cache no longer holds.
struct Gone<K> {
    /// Its final state, if this controller saw the deletion.
    last: Option<Arc<K>>,
}

impl<K> std::fmt::Debug for Request<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Request")
            .field("key", &self.key)
            .field("gone", &self.gone.is_some())
            .finish()
    }
}

impl<K: Informable> Request<K> {
    /// A request for an object the cache holds.
    pub(crate) fn present(key: ObjectKey, store: Store<K>) -> Self {
        Self {
            key,
            store,
            gone: None,
        }
    }

    /// A request for an object that is gone, with its final state when known.
    pub(crate) fn gone(key: ObjectKey, store: Store<K>, last: Option<Arc<K>>) -> Self {
        Self {
            key,
            store,
            gone: Some(Gone { last }),
        }
    }

    /// The namespace and name of the object.
    pub fn key(&self) -> &ObjectKey {
        &self.key
    }

    /// The object as the cache holds it now, or `None` if it is gone (deleted).
    pub fn object(&self) -> Option<Arc<K>> {
        if self.gone.is_some() {
            return None;
        }
        self.store.get(&self.key)
    }

    /// Whether the object is gone: deleted from the API server, so the reconciler should
    /// clean up whatever it made for it outside of Kubernetes' garbage collection.
    pub fn is_gone(&self) -> bool {
        self.gone.is_some()
    }

    /// The object's final state, when it is gone and this controller saw it deleted (a
    /// deletion that happened while the controller was not watching leaves no final state).
    pub fn last_state(&self) -> Option<&Arc<K>> {
        self.gone.as_ref().and_then(|g| g.last.as_ref())
    }
}

/// A successful reconcile's request for the future.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Action {
    requeue_after: Option<Duration>,
}

impl Action {
    /// Nothing more to do until something changes.
    pub fn done() -> Self {
        Self {
            requeue_after: None,
        }
    }

    /// Reconcile again after `delay`, even if nothing changes (an earlier change still
    /// reconciles at once).
    pub fn requeue_after(delay: Duration) -> Self {
        Self {
            requeue_after: Some(delay),
        }
    }

    /// The delay of [`Action::requeue_after`], if one was asked for.
    pub fn requeue_delay(&self) -> Option<Duration> {
        self.requeue_after
    }
}

/// A failed reconcile. `?` on the reconciler's own error makes a [`Retry`](Self::Retry).
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError<E> {
    /// A failure that may pass (a conflict, a timeout, a dependency not ready): retried after
    /// the key's exponential backoff.
    #[error(transparent)]
    Retry(E),
    /// A failure that retrying cannot fix (an invalid spec): logged and counted, and not
    /// retried until the object or something it maps from changes.
    #[error(transparent)]
    Terminal(E),
}

impl<E> ReconcileError<E> {
    /// Whether the error is terminal.
    pub fn is_terminal(&self) -> bool {
        matches!(self, Self::Terminal(_))
    }

    /// The underlying error.
    pub fn into_inner(self) -> E {
        match self {
            Self::Retry(e) | Self::Terminal(e) => e,
        }
    }
}

impl<E> From<E> for ReconcileError<E> {
    fn from(e: E) -> Self {
        Self::Retry(e)
    }
}

/// A [`Reconciler`] made from an async function; see [`reconciler_fn`].
pub struct FnReconciler<F, K, E> {
    f: F,
    _types: PhantomData<fn(K) -> E>,
}

impl<F, K, E> std::fmt::Debug for FnReconciler<F, K, E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FnReconciler").finish_non_exhaustive()
    }
}

/// Wraps an async function as a [`Reconciler`].
///
/// ```
/// use std::convert::Infallible;
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kore_runtime::controller::{Action, ReconcileError, Request, reconciler_fn};
///
/// let reconciler = reconciler_fn(|request: Request<ConfigMap>| async move {
///     tracing::info!(key = %request.key(), gone = request.is_gone(), "reconciling");
///     Ok::<_, ReconcileError<Infallible>>(Action::done())
/// });
/// # let _ = reconciler;
/// ```
pub fn reconciler_fn<F, Fut, K, E>(f: F) -> FnReconciler<F, K, E>
where
    F: Fn(Request<K>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Action, ReconcileError<E>>> + Send,
    K: 'static,
    E: std::error::Error + Send + Sync + 'static,
{
    FnReconciler {
        f,
        _types: PhantomData,
    }
}

impl<F, Fut, K, E> Reconciler<K> for FnReconciler<F, K, E>
where
    F: Fn(Request<K>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Action, ReconcileError<E>>> + Send,
    K: 'static,
    E: std::error::Error + Send + Sync + 'static,
{
    type Error = E;

    fn reconcile(
        &self,
        request: Request<K>,
    ) -> impl Future<Output = Result<Action, ReconcileError<E>>> + Send {
        (self.f)(request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("boom")]
    struct Boom;

    fn fails() -> Result<(), Boom> {
        Err(Boom)
    }

    fn reconcile() -> Result<Action, ReconcileError<Boom>> {
        fails()?;
        Ok(Action::done())
    }

    #[test]
    fn question_mark_makes_a_retryable_error() {
        let err = reconcile().expect_err("fails");
        assert!(!err.is_terminal());
        assert_eq!(err.to_string(), "boom");
        assert!(ReconcileError::Terminal(Boom).is_terminal());
    }

    #[test]
    fn actions_say_whether_to_requeue() {
        assert_eq!(Action::done().requeue_delay(), None);
        let d = Duration::from_secs(3);
        assert_eq!(Action::requeue_after(d).requeue_delay(), Some(d));
    }
}
