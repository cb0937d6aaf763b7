//! A worker: takes keys from the queue one at a time, reconciles them, and settles each key
//! by the outcome.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures::FutureExt;
use k8s_openapi::api::core::v1::{Event as CoreEvent, EventSource};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{ObjectMeta, PostParams};
use tokio::time::Instant;
use tracing::Instrument;

use super::reconciler::{Action, ReconcileError, Reconciler, Request};
use super::source::Tombstones;
use crate::cache::{ObjectKey, Store};
use crate::informer::Informable;
use crate::metrics::{ControllerMetrics, ReconcileResult};
use crate::queue::{Guard, Queue, Retry};

/// The reason of the Warning event recorded when a key is quarantined.
pub const REASON_QUARANTINED: &str = "ReconcileQuarantined";

/// What every worker of one controller shares.
pub(crate) struct Shared<K, R> {
    pub(crate) name: String,
    pub(crate) queue: Queue<ObjectKey>,
    pub(crate) store: Store<K>,
    pub(crate) tombstones: Arc<Tombstones<K>>,
    pub(crate) reconciler: Arc<R>,
    pub(crate) metrics: ControllerMetrics,
    pub(crate) client: kube::Client,
}

/// Runs until the queue shuts down. The reconcile in flight always finishes.
pub(crate) async fn run<K, R>(shared: Arc<Shared<K, R>>)
where
    K: Informable,
    R: Reconciler<K>,
{
    let mut scratch = String::new();
    let mut next = shared.queue.next().await;
    while let Some(guard) = next {
        let key = guard.key().clone();
        let request = if is_cached(&shared.store, &key, &mut scratch) {
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

/// Whether the cache holds `key`, without decoding the object.
fn is_cached<K>(store: &Store<K>, key: &ObjectKey, scratch: &mut String) -> bool {
    scratch.clear();
    if let Some(ns) = &key.namespace {
        scratch.push_str(ns);
        scratch.push('/');
    }
    scratch.push_str(&key.name);
    store.entry(scratch).is_some()
}

/// Records that `key` ran out of retries: a metric, a log line and a Warning event on the
/// object (sent from its own task, so the worker does not wait for the API server).
fn quarantined<K, R>(shared: &Shared<K, R>, key: ObjectKey, error: &str)
where
    K: Informable,
{
    shared.metrics.quarantined.inc();
    tracing::error!("reconcile keeps failing; not retrying until the object changes");
    let Some(obj) = shared.store.get(&key) else {
        return;
    };
    let involved = obj.object_ref(&());
    let namespace = key
        .namespace
        .clone()
        .unwrap_or_else(|| "default".to_owned());
    let now = Time(jiff::Timestamp::now());
    let event = CoreEvent {
        metadata: ObjectMeta {
            name: Some(format!("{}.{:016x}", key.name, rand::random::<u64>())),
            namespace: Some(namespace.clone()),
            ..ObjectMeta::default()
        },
        involved_object: involved,
        reason: Some(REASON_QUARANTINED.to_owned()),
        message: Some(format!(
            "reconcile failed too many times ({error}); not retried until the object changes"
        )),
        type_: Some("Warning".to_owned()),
        source: Some(EventSource {
            component: Some(shared.name.clone()),
            host: None,
        }),
        reporting_component: Some(shared.name.clone()),
        first_timestamp: Some(now.clone()),
        last_timestamp: Some(now),
        count: Some(1),
        ..CoreEvent::default()
    };
    let api = kube::Api::<CoreEvent>::namespaced(shared.client.clone(), &namespace);
    tokio::spawn(async move {
        if let Err(error) = api.create(&PostParams::default(), &event).await {
            tracing::warn!(%error, "recording the quarantine event failed");
        }
    });
}
