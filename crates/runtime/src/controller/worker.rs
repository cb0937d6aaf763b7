//! A worker: takes keys from the queue one at a time, reconciles them, and settles each key
//! by the outcome.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures::FutureExt;
use tokio::time::Instant;
use tracing::Instrument;

use super::reconciler::{Action, ReconcileError, Reconciler, Request};
use super::source::Tombstones;
use crate::cache::{ObjectKey, Store};
use crate::events::{Event, EventType, Recorder};
use crate::informer::Informable;
use crate::metrics::{ControllerMetrics, ReconcileResult};
use crate::queue::{Guard, Queue, Retry};

/// The reason of the Warning event recorded when a key is quarantined.
pub const REASON_QUARANTINED: &str = "ReconcileQuarantined";

/// The action of the Warning event recorded when a key is quarantined.
pub const ACTION_RECONCILE: &str = "Reconcile";

/// What every worker of one controller shares.
pub(crate) struct Shared<K, R> {
    pub(crate) name: String,
    pub(crate) queue: Queue<ObjectKey>,
    pub(crate) store: Store<K>,
    pub(crate) tombstones: Arc<Tombstones<K>>,
    pub(crate) reconciler: Arc<R>,
    pub(crate) metrics: ControllerMetrics,
    /// Records the controller's own events (quarantines), as the controller's name.
    pub(crate) recorder: Recorder,
}

/// Runs until the queue shuts down. The reconcile in flight always finishes.
pub(crate) async fn run<K, R>(shared: Arc<Shared<K, R>>)
where
    K: Informable,
    R: Reconciler<K>,
{
    let mut next = shared.queue.next().await;
    while let Some(guard) = next {
        let key = guard.key().clone();
        // Whether the cache holds the key, without decoding the object.
        let request = if shared.store.entry(key.as_str()).is_some() {
            Request::present(key, shared.store.clone())
        } else {
            let last = shared.tombstones.take(&key);
            Request::gone(key, shared.store.clone(), last)
        };
        let span = tracing::info_span!(
            "reconcile",
            controller = %shared.name,
            object = %request.key(),
        );
        shared.metrics.active_workers.inc();
        let started = Instant::now();
        let outcome = AssertUnwindSafe(shared.reconciler.reconcile(request))
            .catch_unwind()
            .instrument(span.clone())
            .await;
        shared.metrics.time.observe(started.elapsed().as_secs_f64());
        shared.metrics.active_workers.dec();
        // A success settles together with taking the next key (one lock, not two); every
        // other outcome settles here.
        let succeeded = {
            let _entered = span.enter();
            settle(&shared, guard, outcome)
        };
        next = match succeeded {
            Some(guard) => guard.done_and_next().await,
            None => shared.queue.next().await,
        };
    }
}

/// Records a reconcile's outcome and settles its key, except after a plain success: then the
/// guard is returned for the caller to settle.
fn settle<K, R>(
    shared: &Shared<K, R>,
    guard: Guard<ObjectKey>,
    outcome: std::thread::Result<Result<Action, ReconcileError<R::Error>>>,
) -> Option<Guard<ObjectKey>>
where
    K: Informable,
    R: Reconciler<K>,
{
    match outcome {
        Ok(Ok(action)) => match action.requeue_delay() {
            Some(delay) => {
                shared.metrics.record(ReconcileResult::RequeueAfter, false);
                guard.retry_after(delay);
                None
            }
            None => {
                shared.metrics.record(ReconcileResult::Success, false);
                Some(guard)
            }
        },
        Ok(Err(ReconcileError::Terminal(error))) => {
            shared.metrics.record(ReconcileResult::Error, true);
            tracing::error!(error = %error, "reconcile failed terminally; not retrying");
            guard.done();
            None
        }
        Ok(Err(ReconcileError::Retry(error))) => {
            shared.metrics.record(ReconcileResult::Error, false);
            let key = guard.key().clone();
            let retry = guard.retry();
            tracing::warn!(error = %error, ?retry, "reconcile failed");
            if retry == Retry::Quarantined {
                quarantined(shared, key, &error.to_string());
            }
            None
        }
        Err(_panic) => {
            shared.metrics.record(ReconcileResult::Error, false);
            let key = guard.key().clone();
            let retry = guard.retry();
            tracing::error!(?retry, "reconcile panicked");
            if retry == Retry::Quarantined {
                quarantined(shared, key, "the reconciler panicked");
            }
            None
        }
    }
}

/// Records that `key` ran out of retries: a metric, a log line and a Warning event on the
/// object through the controller's [`Recorder`], so a key quarantined again soon after counts
/// on the same Event's series. The event is sent from a task on the controller's tracker, so
/// the worker does not wait for the API server and the controller's shutdown waits for it.
fn quarantined<K, R>(shared: &Shared<K, R>, key: ObjectKey, error: &str)
where
    K: Informable,
{
    shared.metrics.quarantined.inc();
    tracing::error!("reconcile keeps failing; not retrying until the object changes");
    let Some(obj) = shared.store.get(&key) else {
        return;
    };
    let regarding = obj.object_ref(&());
    let event = Event {
        type_: EventType::Warning,
        reason: REASON_QUARANTINED.to_owned(),
        action: ACTION_RECONCILE.to_owned(),
        note: Some(format!(
            "reconcile failed too many times ({error}); not retried until the object changes"
        )),
        related: None,
    };
    shared.recorder.record(event, regarding);
}
