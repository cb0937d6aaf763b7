//! [`Guard`]: a key handed to a worker; dropping it marks the key done, and `retry`,
//! `retry_after` or `forget` settle its backoff instead.

use std::fmt;
use std::hash::Hash;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::Retry;
use crate::queue::{Next, Queue};
use crate::state::{Settle, SlotId};

/// A key handed out by [`Queue::next`]. While it lives, no other worker gets the key.
///
/// Dropping it settles the key as a success: its backoff resets, and if it was added again
/// meanwhile it is queued once more. [`retry`](Self::retry) and
/// [`retry_after`](Self::retry_after) settle it otherwise.
#[must_use = "dropping the guard at once settles the key as done"]
pub struct Guard<K>
where
    K: Clone + Eq + Hash + Send + Sync + 'static,
{
    pub(super) queue: Queue<K>,
    /// The key, shared with its slot; `None` once settled.
    pub(super) key: Option<Arc<K>>,
    /// Where the key's state lives in the queue; held (so not reused) until the guard settles.
    pub(super) slot: SlotId,
    pub(super) started: Option<Instant>,
}

impl<K> fmt::Debug for Guard<K>
where
    K: Clone + Eq + Hash + Send + Sync + fmt::Debug + 'static,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Guard").field("key", &self.key).finish()
    }
}

impl<K> Guard<K>
where
    K: Clone + Eq + Hash + Send + Sync + 'static,
{
    /// The key this guard holds.
    pub fn key(&self) -> &K {
        self.key
            .as_deref()
            .expect("the key is taken only when the guard settles")
    }

    /// Settles the key as a success (the same as dropping the guard).
    pub fn done(mut self) {
        self.settle(Settle::Done);
    }

    /// Settles the key as a success and takes the next one, with one lock acquisition instead
    /// of two (a worker loop's hot path). Waits like [`Queue::next`] when nothing is ready.
    pub async fn done_and_next(mut self) -> Option<Guard<K>> {
        // Held until the lock is released, so the key is freed (if its slot is) outside it.
        // With the key taken, dropping `self` settles nothing.
        let Some(key) = self.key.take() else {
            return self.queue.next().await;
        };
        let next = self.queue.settle_done_and_pop(self.slot, self.started);
        drop(key);
        match next {
            // This guard takes the next key: no handle of the queue is cloned or dropped.
            Next::Popped(popped, started) => {
                self.key = Some(popped.key);
                self.slot = popped.slot;
                self.started = started;
                Some(self)
            }
            Next::Empty => self.queue.next().await,
            Next::ShutDown => None,
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
        // The key is dropped after the lock is released, as in `done_and_next`.
        match self.key.take() {
            Some(_key) => self.queue.settle(self.slot, how, self.started),
            None => Retry::ShutDown,
        }
    }
}

impl<K> Drop for Guard<K>
where
    K: Clone + Eq + Hash + Send + Sync + 'static,
{
    fn drop(&mut self) {
        self.settle(Settle::Done);
    }
}
