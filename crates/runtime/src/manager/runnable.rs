//! The unit of work a [`Manager`](super::Manager) starts and stops.

use std::error::Error as StdError;
use std::future::Future;
use std::sync::Arc;

use futures::FutureExt;
use futures::future::BoxFuture;
use tokio_util::sync::CancellationToken;

/// The error a [`Runnable`] ends with.
pub type RunError = Box<dyn StdError + Send + Sync>;

/// A long-running component the manager starts and stops: a controller, a webhook server, a
/// periodic job.
///
/// # Contract
/// - `run` is called once, after the caches have synced and (when
///   [`needs_leader_election`](Runnable::needs_leader_election) is true) after this process
///   became the leader.
/// - When `shutdown` is cancelled the runnable stops taking new work, lets the work in flight
///   finish, and returns. The manager waits for it within its grace period.
/// - Returning `Ok(())` before shutdown is allowed (a one-shot job); the others keep running.
///   Returning `Err` makes the manager stop everything and report that error.
/// - A leader-only runnable is aborted at once when the Lease is lost (another process may
///   already lead). A manager that campaigns again
///   ([`OnLostLeadership::Recampaign`](super::OnLostLeadership::Recampaign)) then runs a
///   [`fresh`](Runnable::fresh) copy in the next term, so leader-only runnables must provide one.
pub trait Runnable: Send + 'static {
    /// A short name for logs and errors.
    fn name(&self) -> &str;

    /// Whether this runs only on the leader. Controllers that write do; caches, servers and
    /// read-only components do not.
    fn needs_leader_election(&self) -> bool {
        true
    }

    /// Runs until `shutdown` is cancelled (or the work is done).
    fn run(
        self: Box<Self>,
        shutdown: CancellationToken,
    ) -> BoxFuture<'static, Result<(), RunError>>;

    /// A copy of this runnable in its initial state, to run in a later term of leadership
    /// after the Lease was lost and won again; `None` (the default) when it cannot run twice.
    ///
    /// The copy must not share the state of a term with the original (queues, in-flight
    /// work); it may share caches, clients and metrics. A [`Controller`](crate::Controller)
    /// returns a copy with a new queue, which the new term fills from the caches.
    fn fresh(&self) -> Option<Box<dyn Runnable>> {
        None
    }
}

/// A [`Runnable`] made from a name and an async function; see [`runnable_fn`].
pub struct FnRunnable<F> {
    name: String,
    leader: bool,
    f: F,
}

impl<F> std::fmt::Debug for FnRunnable<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FnRunnable")
            .field("name", &self.name)
            .field("leader", &self.leader)
            .finish_non_exhaustive()
    }
}

/// Wraps an async function as a leader-only [`Runnable`]; call
/// [`FnRunnable::without_leader_election`] to run it on every replica. It runs once: a
/// manager that campaigns again after a lost Lease needs [`restartable_fn`] instead.
///
/// ```
/// use kore_runtime::manager::runnable_fn;
///
/// let job = runnable_fn("ticker", |shutdown| async move {
///     shutdown.cancelled().await;
///     Ok(())
/// });
/// # let _ = job;
/// ```
pub fn runnable_fn<F, Fut>(name: impl Into<String>, f: F) -> FnRunnable<F>
where
    F: FnOnce(CancellationToken) -> Fut + Send + 'static,
    Fut: Future<Output = Result<(), RunError>> + Send + 'static,
{
    FnRunnable {
        name: name.into(),
        leader: true,
        f,
    }
}

impl<F> FnRunnable<F> {
    /// Runs on every replica, whether or not it leads.
    #[must_use]
    pub fn without_leader_election(mut self) -> Self {
        self.leader = false;
        self
    }
}

impl<F, Fut> Runnable for FnRunnable<F>
where
    F: FnOnce(CancellationToken) -> Fut + Send + 'static,
    Fut: Future<Output = Result<(), RunError>> + Send + 'static,
{
    fn name(&self) -> &str {
        &self.name
    }

    fn needs_leader_election(&self) -> bool {
        self.leader
    }

    fn run(
        self: Box<Self>,
        shutdown: CancellationToken,
    ) -> BoxFuture<'static, Result<(), RunError>> {
        (self.f)(shutdown).boxed()
    }
}

/// A [`Runnable`] made from a name and an async function it can call again for every term of
/// leadership; see [`restartable_fn`].
pub struct RestartableFn<F> {
    name: String,
    leader: bool,
    f: Arc<F>,
}

impl<F> std::fmt::Debug for RestartableFn<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RestartableFn")
            .field("name", &self.name)
            .field("leader", &self.leader)
            .finish_non_exhaustive()
    }
}

/// Wraps an async function as a leader-only [`Runnable`] that can run again after the Lease
/// was lost and won back: each term calls `f` anew ([`Runnable::fresh`]).
///
/// ```
/// use kore_runtime::manager::restartable_fn;
///
/// let job = restartable_fn("ticker", |shutdown| async move {
///     shutdown.cancelled().await;
///     Ok(())
/// });
/// # let _ = job;
/// ```
pub fn restartable_fn<F, Fut>(name: impl Into<String>, f: F) -> RestartableFn<F>
where
    F: Fn(CancellationToken) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), RunError>> + Send + 'static,
{
    RestartableFn {
        name: name.into(),
        leader: true,
        f: Arc::new(f),
    }
}

impl<F> RestartableFn<F> {
    /// Runs on every replica, whether or not it leads.
    #[must_use]
    pub fn without_leader_election(mut self) -> Self {
        self.leader = false;
        self
    }
}

impl<F, Fut> Runnable for RestartableFn<F>
where
    F: Fn(CancellationToken) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), RunError>> + Send + 'static,
{
    fn name(&self) -> &str {
        &self.name
    }

    fn needs_leader_election(&self) -> bool {
        self.leader
    }

    fn run(
        self: Box<Self>,
        shutdown: CancellationToken,
    ) -> BoxFuture<'static, Result<(), RunError>> {
        (self.f)(shutdown).boxed()
    }

    fn fresh(&self) -> Option<Box<dyn Runnable>> {
        Some(Box::new(RestartableFn {
            name: self.name.clone(),
            leader: self.leader,
            f: Arc::clone(&self.f),
        }))
    }
}
