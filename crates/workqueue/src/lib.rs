//! kore-workqueue: a deduplicating, rate-limited workqueue with client-go's semantics, and a
//! guard that makes its bookkeeping impossible to forget.
//!
//! Start with [`Queue::new`], [`Queue::add`] and [`Queue::next`]. The design and its
//! invariants are written up in `docs/design/queue.md`.
//!
//! The crate depends on Tokio alone (and `tokio-util`'s timer wheel), so both the operator
//! runtime (`kore_runtime::queue` re-exports it and reports to Prometheus through [`Metrics`])
//! and the API server's garbage collector run their background work on the same queue.
//!
//! # Guarantees
//!
//! - **Duplicates collapse.** A key added many times before a worker takes it is handed out
//!   once.
//! - **A key is never held by two workers.** While a [`Guard`] for a key is alive, `next()`
//!   does not hand the key out again.
//! - **No change is lost.** A key added while a worker holds it is handed out once more after
//!   the guard settles.
//! - **Settling cannot be forgotten.** Dropping the [`Guard`] marks the key done and resets its
//!   backoff (success); [`Guard::retry`] schedules it after its backoff instead, and
//!   [`Guard::retry_after`] after a fixed delay.
//! - **Retries are rate-limited twice.** A retried key waits for the larger of its own
//!   exponential backoff (5 ms × 2^n up to 1000 s by default) and a token bucket shared by
//!   every key (10/s, burst 100 by default). Plain [`Queue::add`] is never delayed.
//! - **Retries can end.** With [`QueueConfig::max_retries`] a key that fails again after that
//!   many retries is *quarantined*: it is not retried, and plain adds of it are ignored, until
//!   [`Queue::release`] lifts the quarantine (a controller does so when the object changes).
//! - **Delays keep the earliest deadline.** [`Queue::add_after`] of a key already waiting keeps
//!   whichever deadline comes first.
//!
//! # Caveats
//!
//! - After [`Queue::shutdown`] adds are ignored and `next()` returns `None`, even if keys are
//!   still queued: a stopping controller should not start on its backlog. Guards already handed
//!   out still settle; [`Queue::shutdown_with_drain`] waits for them.
//! - The queue is unbounded in the number of distinct keys, as client-go's: its size is the
//!   number of objects with pending work, not the number of events.
//! - [`Queue::new`] spawns the task that moves delayed keys into the queue, so it must be
//!   called within a Tokio runtime.
//!
//! # Layout
//!
//! This file holds the configuration, the retry policy and the metrics hooks; `queue` the
//! [`Queue`] handle, `guard` the [`Guard`], `state` the shared state and the timer task, and
//! `rate_limit` the per-key backoff and the token bucket.

mod guard;
mod queue;
mod rate_limit;
mod state;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

pub use guard::Guard;
pub use queue::Queue;
pub use rate_limit::{ExponentialBackoff, TokenBucket};

/// The series a queue reports to, shared by its clones.
type Hook = Arc<dyn Metrics>;

/// The longest delay the queue schedules; longer ones are clamped to it, because the timer
/// wheel under [`DelayQueue`](tokio_util::time::DelayQueue) cannot hold deadlines much more than two years ahead.
const MAX_DELAY: Duration = Duration::from_secs(365 * 24 * 3600);

/// How a queue retries keys, and where it reports. `Default` is client-go's default
/// controller rate limiter without a retry limit and without metrics.
#[derive(Clone, Debug, Default)]
pub struct QueueConfig {
    backoff: ExponentialBackoff,
    bucket: TokenBucket,
    max_retries: Option<u32>,
    metrics: Option<Hook>,
}

impl QueueConfig {
    /// The per-key exponential backoff of retried keys (default 5 ms doubling up to 1000 s).
    #[must_use]
    pub fn backoff(mut self, backoff: ExponentialBackoff) -> Self {
        self.backoff = backoff;
        self
    }

    /// The token bucket shared by every retried key (default 10/s, burst 100);
    /// [`TokenBucket::unlimited`] turns it off.
    #[must_use]
    pub fn token_bucket(mut self, bucket: TokenBucket) -> Self {
        self.bucket = bucket;
        self
    }

    /// How many times a key is retried before it is quarantined (default: retried forever).
    #[must_use]
    pub fn max_retries(mut self, retries: u32) -> Self {
        self.max_retries = Some(retries);
        self
    }

    /// Reports adds, hand-outs, settles and retries to `metrics` (default: no metrics). With
    /// no metrics the queue does not read the clock on its hot paths.
    #[must_use]
    pub fn metrics(mut self, metrics: impl Metrics) -> Self {
        self.metrics = Some(Arc::new(metrics));
        self
    }
}

/// What [`Guard::retry`] did with the key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Retry {
    /// The key will be handed out again after this delay.
    After(Duration),
    /// The key was added again while it was held, so it runs again at once; its failure still
    /// counts towards the retry limit.
    Pending,
    /// The key exhausted its retries: it is not retried until [`Queue::release`].
    Quarantined,
    /// The queue is shutting down and schedules nothing.
    ShutDown,
}

/// Where a queue reports what it does, for a metrics library to count (kore-runtime implements
/// it with Prometheus series). Every method is called outside the queue's lock, or under it
/// only for counting, so an implementation should be a few atomic operations.
pub trait Metrics: fmt::Debug + Send + Sync + 'static {
    /// A key was added and now waits to be handed out (the depth grew by one).
    fn added(&self);
    /// A key was handed out (the depth shrank by one) after waiting `waited`, when known. The
    /// wait counts from when the key moved from the inbox into the queue, at most about a
    /// millisecond after its add (an add reads no clock).
    fn handed_out(&self, waited: Option<Duration>);
    /// A handed-out key settled after `worked`.
    fn settled(&self, worked: Duration);
    /// A failed key was scheduled for a retry after its backoff.
    fn retried(&self);
    /// The last handle of the queue went away with `waiting` keys not handed out.
    fn dropped(&self, waiting: usize);
}

#[cfg(test)]
mod tests;
