//! [`Guard`]: a key handed to a worker; dropping it marks the key done, and `retry`,
//! `retry_after` or `forget` settle its backoff instead.

use std::fmt;
use std::hash::Hash;
use std::time::Duration;

use tokio::time::Instant;

use crate::Retry;
use crate::queue::Queue;
use crate::state::{Settle, SlotId};

/// A key handed out by [`Queue::next`]. While it lives, no other worker gets the key.
///
/// Dropping it settles the key as a success: its backoff resets, and if it was added again
/// meanwhile it is queued once more. [`retry`](Self::retry) and
/// [`retry_after`](Self::retry_after) settle it otherwise.
#[must_use = "dropping the guard at once settles the key as done"]
pub struct Guard<K>
where
    K: Clone + Eq + Hash + Send + 'static,
{
    pub(super) queue: Queue<K>,
    /// The guard's copy of the key; `None` once settled.
    pub(super) key: Option<K>,
    /// Where the key's state lives in the queue; held (so not reused) until the guard settles.
    pub(super) slot: SlotId,
    pub(super) started: Option<Instant>,
}

impl<K> fmt::Debug for Guard<K>
where
    K: Clone + Eq + Hash + Send + fmt::Debug + 'static,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Guard").field("key", &self.key).finish()
    }
}

impl<K> Guard<K>
where
    K: Clone + Eq + Hash + Send + 'static,
{
    /// The key this guard holds.
    pub fn key(&self) -> &K {
        self.key
            .as_ref()
            .expect("the key is taken only when the guard settles")
    }

    /// Settles the key as a success (the same as dropping the guard).
    pub fn done(mut self) {
        self.settle(Settle::Done);
    }

    /// Settles the key as a success and takes the next one, with one lock acquisition instead
    /// of two (a worker loop's hot path). Waits like [`Queue::next`] when nothing is ready.
    pub async fn done_and_next(mut self) -> Option<Guard<K>> {
        let queue = self.queue.clone();
        if self.key.take().is_none() {
            return queue.next().await;
        }
        let (slot, started) = (self.slot, self.started);
        drop(self);
        match queue.settle_done_and_pop(slot, started) {
            Some(next) => next,
            None => queue.next().await,
        }
    }

    /// Settles the key as a failure: it is added again after the larger of its backoff and the
    /// global token bucket's delay, or quarantined if it is out of retries.
    pub fn retry(mut self) -> Retry {
        self.settle(Settle::Retry)
    }

    /// Settles the key as a success and adds it again after `delay` (a periodic re-check).
    pub fn retry_after(mut self, delay: Duration) {
        self.settle(Settle::After(delay));
    }

    pub(super) fn settle(&mut self, how: Settle) -> Retry {
        match self.key.take() {
            Some(_) => self.queue.settle(self.slot, how, self.started),
            None => Retry::ShutDown,
        }
    }
}

impl<K> Drop for Guard<K>
where
    K: Clone + Eq + Hash + Send + 'static,
{
    fn drop(&mut self) {
        self.settle(Settle::Done);
    }
}
