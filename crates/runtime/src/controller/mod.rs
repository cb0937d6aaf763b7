//! Controllers: watch a primary kind (and what it owns or depends on), queue the keys of
//! primary objects that may need work, and call a [`Reconciler`] for each.
//!
//! Start with [`Controller::for_`]. The design and its invariants are written up in
//! `docs/design/controller.md`.
//!
//! ```no_run
//! use std::convert::Infallible;
//! use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
//! use kore_runtime::Informers;
//! use kore_runtime::controller::{predicate, Action, Controller, ReconcileError, Request, reconciler_fn};
//! use tokio_util::sync::CancellationToken;
//!
//! # async fn run(client: kube::Client) -> Result<(), Box<dyn std::error::Error>> {
//! let informers = Informers::new(client);
//! let controller = Controller::for_::<Deployment>(&informers)
//!     .owns::<ReplicaSet>()
//!     .with_predicate(predicate::generation_changed())
//!     .max_concurrent_reconciles(4)
//!     .build(reconciler_fn(|request: Request<Deployment>| async move {
//!         if request.is_gone() {
//!             return Ok(Action::done());
//!         }
//!         Ok::<_, ReconcileError<Infallible>>(Action::done())
//!     }));
//! let shutdown = CancellationToken::new();
//! informers.start(shutdown.clone());
//! controller.run(shutdown).await?;
//! # Ok(())
//! # }
//! ```
//!
//! # Guarantees
//! - A key is reconciled by one worker at a time, and a change during a reconcile leads to one
//!   more reconcile afterwards (the [`queue`](crate::queue) guarantees both).
//! - At most [`max_concurrent_reconciles`](Builder::max_concurrent_reconciles) reconciles run
//!   at once (default [`DEFAULT_MAX_CONCURRENT_RECONCILES`]).
//! - Workers start once the primary cache has synced, so a key whose object is not cached is
//!   really gone: the reconciler is then told so ([`Request::is_gone`]).
//! - On shutdown, sources stop, no new reconcile starts, and the ones in flight finish before
//!   [`Controller::run`] returns.
//!
//! # Caveats
//! - Predicates filter watch events of the primary kind. A resync (the initial list, a
//!   relist) passes every cached object through the predicate as a create.
//! - A quarantined key (see [`Builder::max_retries`]) is released by a change of the primary
//!   object that passes the predicates; with [`predicate::generation_changed`] that is a spec
//!   change, so the controller's own status writes do not release it.

pub mod predicate;
mod reconciler;
mod source;
mod worker;

use std::sync::Arc;

use futures::future::BoxFuture;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub use self::predicate::Predicate;
pub use self::reconciler::{
    Action, FnReconciler, ReconcileError, Reconciler, Request, reconciler_fn,
};
use self::source::{MapFn, SourceFn, Tombstones};
pub use self::worker::{ACTION_RECONCILE, REASON_QUARANTINED};
use crate::cache::{ObjectKey, Store};
use crate::events::{Recorder, Reporter};
use crate::informer::{Informable, InformerConfig, Informers, SharedInformer};
use crate::manager::{RunError, Runnable};
use crate::metrics::{ControllerMetrics, Metrics};
use crate::queue::{ExponentialBackoff, Queue, QueueConfig, TokenBucket};

/// How many reconciles a controller runs at once unless told otherwise.
pub const DEFAULT_MAX_CONCURRENT_RECONCILES: usize = 2;

/// Why a controller stopped with an error.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A worker task ended abnormally (reconciler panics are caught and retried, so this is a
    /// bug in the controller itself); the controller should be restarted.
    #[error("a worker of controller {controller} failed")]
    WorkerFailed {
        /// The controller's name.
        controller: String,
        /// What ended the task.
        #[source]
        source: tokio::task::JoinError,
    },
}

/// A controller ready to run; made by [`Builder::build`].
pub struct Controller<K, R> {
    name: String,
    primary: SharedInformer<K>,
    predicate: Option<Predicate<K>>,
    sources: Vec<SourceFn>,
    queue: Queue<ObjectKey>,
    /// Makes the queue of a [fresh](Runnable::fresh) copy.
    queue_config: QueueConfig,
    reconciler: Arc<R>,
    workers: usize,
    metrics: ControllerMetrics,
    client: kube::Client,
    leader_election: bool,
}

impl<K, R> std::fmt::Debug for Controller<K, R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Controller")
            .field("name", &self.name)
            .field("sources", &(self.sources.len() + 1))
            .field("workers", &self.workers)
            .finish_non_exhaustive()
    }
}

impl Controller<(), ()> {
    /// Starts building a controller of `K` objects (controller-runtime's `For`), watched with
    /// the default informer config.
    pub fn for_<K: Informable>(informers: &Informers) -> Builder<K> {
        Self::for_with(informers, InformerConfig::default())
    }

    /// [`for_`](Self::for_) with an informer config (a namespace, selectors).
    pub fn for_with<K: Informable>(informers: &Informers, config: InformerConfig) -> Builder<K> {
        Builder {
            name: K::kind(&()).to_lowercase(),
            informers: informers.clone(),
            primary: informers.get::<K>(config),
            predicate: None,
            sources: Vec::new(),
            workers: DEFAULT_MAX_CONCURRENT_RECONCILES,
            queue: QueueConfig::default(),
            metrics: None,
            leader_election: true,
        }
    }
}

/// Builds a [`Controller`]; see [`Controller::for_`].
#[must_use]
pub struct Builder<K> {
    name: String,
    informers: Informers,
    primary: SharedInformer<K>,
    predicate: Option<Predicate<K>>,
    sources: Vec<SourceFn>,
    workers: usize,
    queue: QueueConfig,
    metrics: Option<Metrics>,
    leader_election: bool,
}

impl<K> std::fmt::Debug for Builder<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Builder")
            .field("name", &self.name)
            .field("workers", &self.workers)
            .finish_non_exhaustive()
    }
}

impl<K: Informable> Builder<K> {
    /// The controller's name, used in metrics, logs and events (default: the kind in lower
    /// case, as controller-runtime names it).
    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Reconciles the controller owner of every `C` that changes: the object its
    /// ownerReference with `controller: true` names, when that is a `K`.
    pub fn owns<C: Informable>(self) -> Self {
        self.owns_with::<C>(InformerConfig::default())
    }

    /// [`owns`](Self::owns) with an informer config for `C`.
    pub fn owns_with<C: Informable>(mut self, config: InformerConfig) -> Self {
        let informer = self.informers.get::<C>(config);
        self.sources
            .push(source::mapped(informer, source::controller_owner::<K, C>()));
        self
    }

    /// Reconciles the keys `map` returns for every `X` that changes (both versions of an
    /// update). `map` may read any cache, for example the primary store by an index
    /// ([`Builder::store`], [`Store::by_index`]).
    pub fn watches<X: Informable>(
        self,
        map: impl Fn(&X) -> Vec<ObjectKey> + Send + Sync + 'static,
    ) -> Self {
        self.watches_with::<X>(InformerConfig::default(), map)
    }

    /// [`watches`](Self::watches) with an informer config for `X`.
    pub fn watches_with<X: Informable>(
        mut self,
        config: InformerConfig,
        map: impl Fn(&X) -> Vec<ObjectKey> + Send + Sync + 'static,
    ) -> Self {
        let informer = self.informers.get::<X>(config);
        let map: MapFn<X> = Arc::new(map);
        self.sources.push(source::mapped(informer, map));
        self
    }

    /// Filters the primary kind's watch events; called again, the predicates must all pass.
    pub fn with_predicate(mut self, predicate: Predicate<K>) -> Self {
        self.predicate = Some(match self.predicate.take() {
            Some(earlier) => earlier.and(predicate),
            None => predicate,
        });
        self
    }

    /// How many reconciles may run at once (at least one).
    pub fn max_concurrent_reconciles(mut self, n: usize) -> Self {
        self.workers = n.max(1);
        self
    }

    /// The per-key backoff of failed reconciles (default 5 ms doubling up to 1000 s).
    pub fn backoff(mut self, backoff: ExponentialBackoff) -> Self {
        self.queue = self.queue.backoff(backoff);
        self
    }

    /// The token bucket every retry takes from (default 10/s, burst 100).
    pub fn token_bucket(mut self, bucket: TokenBucket) -> Self {
        self.queue = self.queue.token_bucket(bucket);
        self
    }

    /// Quarantines a key after this many failed retries: it is not retried until its object
    /// changes, and a Warning event ([`REASON_QUARANTINED`]) and the
    /// `kore_controller_quarantined_total` metric record it. Default: retried forever.
    pub fn max_retries(mut self, retries: u32) -> Self {
        self.queue = self.queue.max_retries(retries);
        self
    }

    /// Reports to these metric families (default: families of its own, registered nowhere).
    pub fn metrics(mut self, metrics: Metrics) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// Runs on every replica, not only the leader (for controllers that do not write).
    pub fn without_leader_election(mut self) -> Self {
        self.leader_election = false;
        self
    }

    /// The primary kind's cache, for mappers and reconcilers.
    pub fn store(&self) -> Store<K> {
        self.primary.store()
    }

    /// The primary kind's informer, to add indexes to.
    pub fn informer(&self) -> &SharedInformer<K> {
        &self.primary
    }

    /// The controller, calling `reconciler`.
    ///
    /// # Panics
    ///
    /// Outside a Tokio runtime (the workqueue starts its timer task).
    pub fn build<R: Reconciler<K>>(self, reconciler: R) -> Controller<K, R> {
        let metrics = self.metrics.unwrap_or_default();
        let queue_config = self.queue.metrics(metrics.queue(&self.name));
        let queue = Queue::new(queue_config.clone());
        Controller {
            metrics: metrics.controller(&self.name),
            client: self.informers.client(),
            name: self.name,
            primary: self.primary,
            predicate: self.predicate,
            sources: self.sources,
            queue,
            queue_config,
            reconciler: Arc::new(reconciler),
            workers: self.workers,
            leader_election: self.leader_election,
        }
    }
}

impl<K: Informable, R: Reconciler<K>> Controller<K, R> {
    /// The controller's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The controller's workqueue: adding a key here reconciles it (a trigger of one's own,
    /// such as a timer or an external event). A [fresh](Runnable::fresh) copy, which a manager
    /// runs after winning back a lost Lease, has a queue of its own.
    pub fn queue(&self) -> Queue<ObjectKey> {
        self.queue.clone()
    }

    /// The primary kind's cache.
    pub fn store(&self) -> Store<K> {
        self.primary.store()
    }

    /// Runs until `shutdown` is cancelled, then lets the reconciles in flight finish.
    ///
    /// The informers must be started ([`Informers::start`], which the manager does): workers
    /// wait for the primary cache to sync.
    pub async fn run(self, shutdown: CancellationToken) -> Result<(), Error> {
        let Controller {
            name,
            primary,
            predicate,
            sources,
            queue,
            queue_config: _,
            reconciler,
            workers,
            metrics,
            client,
            leader_election: _,
        } = self;
        let store = primary.store();
        let tombstones = Arc::new(Tombstones::new());
        let stop_sources = shutdown.child_token();
        let tracker = TaskTracker::new();
        tracker.spawn(source::primary(
            primary,
            predicate,
            queue.clone(),
            tombstones.clone(),
            stop_sources.clone(),
        ));
        for start in sources {
            tracker.spawn(start(queue.clone(), stop_sources.clone()));
        }
        tracker.close();

        tokio::select! {
            () = shutdown.cancelled() => {}
            () = store.wait_until_synced() => {}
        }
        let mut pool = JoinSet::new();
        let recorder = Recorder::new(client, Reporter::new(name.clone()));
        if !shutdown.is_cancelled() {
            tracing::info!(controller = %name, workers, "starting workers");
            metrics
                .max_concurrent
                .set(i64::try_from(workers).unwrap_or(i64::MAX));
            let shared = Arc::new(worker::Shared {
                name: name.clone(),
                queue: queue.clone(),
                store,
                tombstones,
                reconciler,
                metrics,
                recorder: recorder.clone(),
            });
            for _ in 0..workers {
                pool.spawn(worker::run(shared.clone()));
            }
        }

        let mut failure = None;
        tokio::select! {
            () = shutdown.cancelled() => {}
            Some(Err(e)) = pool.join_next() => failure = Some(e),
        }
        stop_sources.cancel();
        queue.shutdown();
        tracing::info!(controller = %name, "stopping: waiting for reconciles in flight");
        while let Some(joined) = pool.join_next().await {
            if let Err(e) = joined {
                failure.get_or_insert(e);
            }
        }
        tracker.wait().await;
        // The quarantine events the workers recorded are written before the controller ends.
        recorder.flush().await;
        match failure {
            Some(source) => Err(Error::WorkerFailed {
                controller: name,
                source,
            }),
            None => Ok(()),
        }
    }
}

impl<K: Informable, R: Reconciler<K>> Runnable for Controller<K, R> {
    fn name(&self) -> &str {
        &self.name
    }

    fn needs_leader_election(&self) -> bool {
        self.leader_election
    }

    fn run(
        self: Box<Self>,
        shutdown: CancellationToken,
    ) -> BoxFuture<'static, Result<(), RunError>> {
        Box::pin(async move { (*self).run(shutdown).await.map_err(RunError::from) })
    }

    /// The same controller with a new, empty queue and no tombstones: started, it subscribes
    /// afresh, so its first changes are resyncs that enqueue every cached object. The
    /// reconciler, caches, client and metrics are shared with the original.
    fn fresh(&self) -> Option<Box<dyn Runnable>> {
        Some(Box::new(Controller {
            name: self.name.clone(),
            primary: self.primary.clone(),
            predicate: self.predicate.clone(),
            sources: self.sources.clone(),
            queue: Queue::new(self.queue_config.clone()),
            queue_config: self.queue_config.clone(),
            reconciler: Arc::clone(&self.reconciler),
            workers: self.workers,
            metrics: self.metrics.clone(),
            client: self.client.clone(),
            leader_election: self.leader_election,
        }))
    }
}

#[cfg(test)]
mod tests {
    use std::future::Ready;

    use k8s_openapi::api::core::v1::ConfigMap;

    use super::*;

    type Outcome = Result<Action, ReconcileError<std::io::Error>>;
    type Plain = FnReconciler<fn(Request<ConfigMap>) -> Ready<Outcome>, ConfigMap, std::io::Error>;

    fn assert_send<T: Send>(_: &T) {}

    #[allow(dead_code)] // compiled, never run: keeps the public futures `Send`
    fn run_futures_are_send(c: Controller<ConfigMap, Plain>) {
        let fut = c.run(CancellationToken::new());
        assert_send(&fut);
    }
}
