//! [`Queue`]: the handle controllers add keys to and take them from, and its shutdown.

use std::collections::VecDeque;
use std::collections::hash_map::HashMap;
use std::fmt;
use std::hash::Hash;
use std::pin::pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::time::DelayQueue;

use crate::guard::Guard;
use crate::state::{Inner, Settle, State, run_timer};
use crate::{MAX_DELAY, QueueConfig, Retry};

/// A workqueue of keys. Cheap to clone; clones share the queue.
pub struct Queue<K> {
    pub(super) inner: Arc<Inner<K>>,
}

impl<K> Clone for Queue<K> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
        }
    }
}

impl<K> fmt::Debug for Queue<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.inner.lock();
        f.debug_struct("Queue")
            .field("queued", &state.ready.len())
            .field("keys", &state.entries.len())
            .field("processing", &state.processing)
            .field("delayed", &state.delayed.len())
            .field("shut_down", &state.shut_down)
            .finish()
    }
}

impl<K> Queue<K>
where
    K: Clone + Eq + Hash + Send + 'static,
{
    /// An empty queue.
    ///
    /// # Panics
    ///
    /// Outside a Tokio runtime (it spawns the task that releases delayed keys).
    pub fn new(config: QueueConfig) -> Self {
        let stop = CancellationToken::new();
        let inner = Arc::new(Inner {
            state: Mutex::new(State {
                ready: VecDeque::new(),
                entries: HashMap::default(),
                delayed: DelayQueue::new(),
                processing: 0,
                shut_down: false,
                backoff: config.backoff,
                bucket: config.bucket,
                max_retries: config.max_retries,
            }),
            ready: Notify::new(),
            parked: AtomicUsize::new(0),
            idle: Notify::new(),
            metrics: config.metrics,
            _timer: stop.clone().drop_guard(),
        });
        tokio::spawn(run_timer(Arc::downgrade(&inner), stop));
        Self { inner }
    }

    /// Adds `key` now. Does nothing if the key is already queued, is quarantined, or the queue
    /// is shut down; if a worker holds the key, it is handed out again once the guard settles.
    pub fn add(&self, key: K) {
        let now = self.inner.metrics.as_deref().map(|_| Instant::now());
        let woke = self
            .inner
            .lock()
            .add(key, now, self.inner.metrics.as_deref());
        if woke {
            self.inner.wake(1);
        }
    }

    /// Adds every key of `keys` under one lock acquisition (a resync enqueueing a whole cache).
    /// Each key behaves as with [`add`](Self::add). The lock is held while `keys` is iterated,
    /// so pass keys that are already at hand, not an iterator that waits or computes much.
    pub fn add_all(&self, keys: impl IntoIterator<Item = K>) {
        let now = self.inner.metrics.as_deref().map(|_| Instant::now());
        let mut woke = 0;
        {
            let mut state = self.inner.lock();
            for key in keys {
                if state.add(key, now, self.inner.metrics.as_deref()) {
                    woke += 1;
                }
            }
        }
        self.inner.wake(woke);
    }

    /// Adds `key` after `delay`. If the key already waits for a delay, the earlier deadline
    /// wins. A zero delay adds at once. Quarantined keys are ignored.
    pub fn add_after(&self, key: K, delay: Duration) {
        if delay.is_zero() {
            return self.add(key);
        }
        let when = Instant::now() + delay.min(MAX_DELAY);
        self.inner.lock().add_at(key, when);
    }

    /// Lifts the quarantine of `key`, resets its failures and adds it. Returns whether it was
    /// quarantined; if not, nothing changes (the key is not added).
    pub fn release(&self, key: &K) -> bool {
        let now = self.inner.metrics.as_deref().map(|_| Instant::now());
        let woke = {
            let mut state = self.inner.lock();
            match state.entries.get_mut(key) {
                Some(entry) if entry.quarantined => {
                    entry.quarantined = false;
                    entry.failures = 0;
                    state.add(key.clone(), now, self.inner.metrics.as_deref())
                }
                _ => return false,
            }
        };
        if woke {
            self.inner.wake(1);
        }
        true
    }

    /// Waits for the next key and hands it out under a [`Guard`]. Returns `None` once the
    /// queue is shut down. Cancel-safe: a dropped call takes no key.
    pub async fn next(&self) -> Option<Guard<K>> {
        loop {
            if let Some(next) = self.try_next() {
                return next;
            }
            let mut notified = pin!(self.inner.ready.notified());
            notified.as_mut().enable();
            let _parked = Parked::new(&self.inner.parked);
            // Checked again after registering: an add between the first check and the
            // registration above is seen here, a later one wakes us.
            if let Some(next) = self.try_next() {
                return next;
            }
            notified.await;
        }
    }

    /// `Some(guard)` or `Some(None)` when shut down; `None` when nothing is ready.
    pub(super) fn try_next(&self) -> Option<Option<Guard<K>>> {
        let mut state = self.inner.lock();
        if state.shut_down {
            return Some(None);
        }
        let (key, started) = state.pop(self.inner.metrics.as_deref())?;
        drop(state);
        Some(Some(Guard {
            queue: self.clone(),
            key: Some(key),
            started,
        }))
    }

    /// Stops the queue: adds are ignored, delayed keys are dropped, and `next()` returns
    /// `None` (waking every parked worker). Guards already handed out still settle.
    pub fn shutdown(&self) {
        {
            let mut state = self.inner.lock();
            state.shut_down = true;
            state.delayed.clear();
        }
        self.inner.ready.notify_waiters();
    }

    /// [`shutdown`](Self::shutdown), then waits until every handed-out guard has settled.
    pub async fn shutdown_with_drain(&self) {
        self.shutdown();
        loop {
            let mut idle = pin!(self.inner.idle.notified());
            idle.as_mut().enable();
            if self.inner.lock().processing == 0 {
                return;
            }
            idle.await;
        }
    }

    /// Whether [`shutdown`](Self::shutdown) was called.
    pub fn is_shut_down(&self) -> bool {
        self.inner.lock().shut_down
    }

    /// How many keys wait to be handed out (not counting delayed or held keys).
    pub fn len(&self) -> usize {
        self.inner.lock().ready.len()
    }

    /// Whether no key waits to be handed out.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How many keys are held by guards now.
    pub fn processing(&self) -> usize {
        self.inner.lock().processing
    }

    /// How many consecutive times `key` was retried since its last success.
    pub fn failures(&self, key: &K) -> u32 {
        self.inner.lock().entries.get(key).map_or(0, |e| e.failures)
    }

    /// Whether `key` is quarantined.
    pub fn is_quarantined(&self, key: &K) -> bool {
        self.inner
            .lock()
            .entries
            .get(key)
            .is_some_and(|e| e.quarantined)
    }

    /// Settles `key` as done and pops the next key under the same lock. Returns
    /// `Some(Some(guard))`, `Some(None)` when shut down, or `None` when nothing is ready.
    pub(super) fn settle_done_and_pop(
        &self,
        key: K,
        started: Option<Instant>,
    ) -> Option<Option<Guard<K>>> {
        let metrics = self.inner.metrics.as_deref();
        let (popped, shut_down, idle) = {
            let mut state = self.inner.lock();
            // If the key went back into `ready`, this worker takes a key at once, so the
            // push needs no wake-up: every key still queued had one when it was added.
            state.settle_done(key);
            let popped = state.pop(metrics);
            (
                popped,
                state.shut_down,
                state.shut_down && state.processing == 0,
            )
        };
        if idle {
            self.inner.idle.notify_waiters();
        }
        if let (Some(m), Some(started)) = (metrics, started) {
            m.settled(started.elapsed());
        }
        if shut_down {
            return Some(None);
        }
        let (key, started) = popped?;
        Some(Some(Guard {
            queue: self.clone(),
            key: Some(key),
            started,
        }))
    }

    pub(super) fn settle(&self, key: K, how: Settle, started: Option<Instant>) -> Retry {
        let metrics = self.inner.metrics.as_deref();
        let (outcome, woke, idle) = {
            let mut state = self.inner.lock();
            let (outcome, woke) = state.settle(key, how, metrics);
            (outcome, woke, state.shut_down && state.processing == 0)
        };
        if woke {
            self.inner.wake(1);
        }
        if idle {
            self.inner.idle.notify_waiters();
        }
        if let (Some(m), Some(started)) = (metrics, started) {
            m.settled(started.elapsed());
        }
        outcome
    }
}

/// Counts a worker as parked for as long as it waits in `next()`, including when the wait is
/// cancelled.
pub(super) struct Parked<'a>(&'a AtomicUsize);

impl<'a> Parked<'a> {
    pub(super) fn new(count: &'a AtomicUsize) -> Self {
        count.fetch_add(1, Ordering::SeqCst);
        Self(count)
    }
}

impl Drop for Parked<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}
