//! [`Queue`]: the handle controllers add keys to and take them from, and its shutdown.

use std::fmt;
use std::future::poll_fn;
use std::hash::Hash;
use std::pin::pin;
use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::guard::Guard;
use crate::state::{CacheLine, Inner, Popped, Settle, SlotId, State, Wake, run_timer};
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
        // State before inbox, the order `Inner::drain` takes them in.
        let inbox = match self.inner.inbox.lock() {
            Ok(inbox) => inbox.len(),
            Err(poisoned) => poisoned.into_inner().len(),
        };
        f.debug_struct("Queue")
            .field("queued", &state.ready.len())
            .field("inbox", &inbox)
            .field("keys", &state.live_keys())
            .field("processing", &state.processing)
            .field("delayed", &state.delayed.len())
            .field("shut_down", &state.shut_down)
            .finish()
    }
}

impl<K> Queue<K>
where
    K: Clone + Eq + Hash + Send + Sync + 'static,
{
    /// An empty queue.
    ///
    /// # Panics
    ///
    /// Outside a Tokio runtime (it spawns the task that releases delayed keys).
    pub fn new(config: QueueConfig) -> Self {
        let stop = CancellationToken::new();
        let parked = Arc::new(CacheLine(AtomicUsize::new(0)));
        let inner = Arc::new(Inner {
            state: CacheLine(Mutex::new(State::new(
                config.backoff,
                config.bucket,
                config.max_retries,
                parked.clone(),
            ))),
            inbox: CacheLine(Mutex::new(Vec::new())),
            hasher: foldhash::fast::RandomState::default(),
            parked,
            flush_asked: CacheLine(AtomicBool::new(false)),
            flush: Arc::new(Notify::new()),
            idle: Notify::new(),
            metrics: config.metrics,
            _timer: stop.clone().drop_guard(),
        });
        tokio::spawn(run_timer(Arc::downgrade(&inner), stop));
        Self { inner }
    }

    /// Adds `key` now. Does nothing if the key is already queued, is quarantined, or the queue
    /// is shut down; if a worker holds the key, it is handed out again once the guard settles.
    ///
    /// The key goes into an inbox that the next worker to take a key moves into the queue, so
    /// adding does not wait for the queue's lock while workers hold it; the adding thread
    /// moves the inbox itself when a worker is parked or the inbox is full. With metrics the
    /// add is counted when the inbox moves, and the timer task moves it within about a
    /// millisecond if no worker does, so the depth gauge is never behind for longer.
    pub fn add(&self, key: K) {
        if self.inner.push(key) {
            self.with_state(|_, _| ());
        } else {
            self.inner.ask_flush();
        }
    }

    /// [`Inner::with_state`]: `f` on the state, with the inbox moved in first.
    fn with_state<R>(&self, f: impl FnOnce(&mut State<K>, &mut Wake) -> R) -> R {
        self.inner.with_state(f)
    }

    /// Adds every key of `keys` at once (a resync enqueueing a whole cache): one acquisition of
    /// the inbox's lock. Each key behaves as with
    /// [`add`](Self::add). The keys are hashed before any lock is taken.
    pub fn add_all(&self, keys: impl IntoIterator<Item = K>) {
        let mut incoming: Vec<_> = keys
            .into_iter()
            .map(|key| self.inner.incoming(key))
            .collect();
        if self.inner.push_all(&mut incoming) {
            self.with_state(|_, _| ());
        } else {
            self.inner.ask_flush();
        }
    }

    /// Adds `key` after `delay`. If the key already waits for a delay, the earlier deadline
    /// wins. A zero delay adds at once. Quarantined keys are ignored.
    pub fn add_after(&self, key: K, delay: Duration) {
        if delay.is_zero() {
            return self.add(key);
        }
        let when = Instant::now() + delay.min(MAX_DELAY);
        let hash = self.inner.hash(&key);
        let key = Arc::new(key);
        self.with_state(|state, _| state.add_at(key, hash, when));
    }

    /// Lifts the quarantine of `key`, resets its failures and adds it. Returns whether it was
    /// quarantined; if not, nothing changes (the key is not added).
    pub fn release(&self, key: &K) -> bool {
        let now = self.inner.metrics.as_deref().map(|_| Instant::now());
        let hash = self.inner.hash(key);
        let added = self.with_state(|state, wake| {
            let id = state.find(key, hash)?;
            let slot = &mut state.slots[id as usize];
            if !slot.quarantined {
                return None;
            }
            slot.quarantined = false;
            slot.failures = 0;
            Some(state.enqueue(id, now, wake))
        });
        let Some(added) = added else {
            return false;
        };
        self.inner.count_adds(usize::from(added.counted));
        true
    }

    /// Waits for the next key and hands it out under a [`Guard`]. Returns `None` once the
    /// queue is shut down. Cancel-safe: a dropped call takes no key.
    pub async fn next(&self) -> Option<Guard<K>> {
        let mut wait = Wait {
            queue: self,
            ticket: None,
        };
        poll_fn(|cx| wait.poll(cx)).await
    }

    /// `Some(guard)` or `Some(None)` when shut down; `None` when nothing is ready.
    #[cfg(test)]
    pub(super) fn try_next(&self) -> Option<Option<Guard<K>>> {
        let popped = self.with_state(|state, _| {
            if state.shut_down {
                return Some(None);
            }
            state.pop().map(Some)
        })?;
        Some(popped.map(|p| self.guard(p, None)))
    }

    /// The state under its lock, with the inbox moved in, for tests that look inside.
    #[cfg(test)]
    pub(super) fn state(&self) -> std::sync::MutexGuard<'_, State<K>> {
        self.with_state(|_, _| ());
        self.inner.lock()
    }

    /// The guard of a key just handed out; reports the hand-out (outside the lock). `now` is
    /// the time when the caller read the clock already (with metrics only).
    fn guard(&self, popped: Popped<K>, now: Option<Instant>) -> Guard<K> {
        let started = self.handed_out(popped.queued_at, now);
        Guard {
            queue: self.clone(),
            key: Some(popped.key),
            slot: popped.slot,
            started,
        }
    }

    /// Reports a hand-out of a key queued at `queued_at`; returns when its work starts (with
    /// metrics only). `now` is the time when the caller read the clock already.
    fn handed_out(&self, queued_at: Option<Instant>, now: Option<Instant>) -> Option<Instant> {
        self.inner.metrics.as_deref().map(|m| {
            let now = now.unwrap_or_else(Instant::now);
            m.handed_out(queued_at.map(|at| now.saturating_duration_since(at)));
            now
        })
    }

    /// Stops the queue: adds are ignored, delayed keys are dropped, and `next()` returns
    /// `None` (waking every parked worker). Guards already handed out still settle.
    pub fn shutdown(&self) {
        let waiters = self.with_state(|state, _| {
            state.shut_down = true;
            state.delayed.clear();
            // The dropped delays leave their slots; free those with nothing else to remember.
            for id in 0..state.slots.len() {
                let slot = &mut state.slots[id];
                if slot.key.is_some() && slot.delay.take().is_some() {
                    state.free_if_idle(id as SlotId);
                }
            }
            state.waiters.take_all()
        });
        // Keys added from now on are dropped when the inbox is next moved.
        for w in waiters {
            w.wake();
        }
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
        self.with_state(|state, _| state.ready.len())
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
        let hash = self.inner.hash(key);
        self.with_state(|state, _| {
            state
                .find(key, hash)
                .map_or(0, |id| state.slots[id as usize].failures)
        })
    }

    /// Whether `key` is quarantined.
    pub fn is_quarantined(&self, key: &K) -> bool {
        let hash = self.inner.hash(key);
        self.with_state(|state, _| {
            state
                .find(key, hash)
                .is_some_and(|id| state.slots[id as usize].quarantined)
        })
    }

    /// Settles slot `slot` as done and pops the next key under the same lock, reporting the
    /// hand-out: the caller's guard takes the key, so a worker loop makes no new guard.
    pub(super) fn settle_done_and_pop(&self, slot: SlotId, started: Option<Instant>) -> Next<K> {
        // With metrics, one clock reading ends this key's work, stamps the keys the inbox
        // brings in, and starts the next key's work.
        let now = self.inner.metrics.as_deref().map(|m| {
            let now = Instant::now();
            if let Some(started) = started {
                m.settled(now.saturating_duration_since(started));
            }
            now
        });
        let (popped, shut_down, idle) = self.inner.with_state_at(now, |state, wake| {
            // If the key goes back into an empty `ready`, this worker takes it at once, so
            // the push wakes nobody; behind other keys, it wakes a parked worker as any push.
            let requeued_behind = !state.ready.is_empty();
            state.settle_done(slot, requeued_behind.then_some(wake));
            let popped = state.pop();
            (
                popped,
                state.shut_down,
                state.shut_down && state.processing == 0,
            )
        });
        if idle {
            self.inner.idle.notify_waiters();
        }
        if shut_down {
            return Next::ShutDown;
        }
        match popped {
            Some(popped) => {
                let started = self.handed_out(popped.queued_at, now);
                Next::Popped(popped, started)
            }
            None => Next::Empty,
        }
    }

    pub(super) fn settle(&self, slot: SlotId, how: Settle, started: Option<Instant>) -> Retry {
        let metrics = self.inner.metrics.as_deref();
        let (outcome, idle) = self.with_state(|state, wake| {
            let outcome = state.settle(slot, how, metrics, wake);
            (outcome, state.shut_down && state.processing == 0)
        });
        if idle {
            self.inner.idle.notify_waiters();
        }
        if let (Some(m), Some(started)) = (metrics, started) {
            m.settled(started.elapsed());
        }
        outcome
    }
}

/// What [`Queue::settle_done_and_pop`] found after settling.
pub(super) enum Next<K> {
    /// The next key, and when its work started (with metrics).
    Popped(Popped<K>, Option<Instant>),
    /// Nothing is ready: wait as [`Queue::next`] does.
    Empty,
    /// The queue is shut down.
    ShutDown,
}

/// One call of [`Queue::next`]: parked under a ticket while nothing is ready. If it is dropped
/// after being woken but before taking a key, it passes the wake-up on, so a ready key never
/// waits while another worker sleeps.
struct Wait<'a, K>
where
    K: Clone + Eq + Hash + Send + Sync + 'static,
{
    queue: &'a Queue<K>,
    ticket: Option<u64>,
}

impl<K> Wait<'_, K>
where
    K: Clone + Eq + Hash + Send + Sync + 'static,
{
    fn poll(&mut self, cx: &mut Context<'_>) -> Poll<Option<Guard<K>>> {
        let inner = &self.queue.inner;
        let ticket = &mut self.ticket;
        let (popped, counted) = self.queue.with_state(|state, wake| {
            let mut counted = 0;
            loop {
                let popped = if state.shut_down { None } else { state.pop() };
                if popped.is_some() || state.shut_down {
                    if let Some(t) = ticket.take() {
                        state.waiters.unpark(t);
                    }
                    return (Poll::Ready(popped), counted);
                }
                state.waiters.park(ticket, cx.waker());
                // An add that pushed before the park was published may not have seen it.
                if inner.inbox_is_empty() {
                    return (Poll::Pending, counted);
                }
                counted += inner.drain(state, wake, None);
            }
        });
        self.queue.inner.count_adds(counted);
        popped.map(|p| p.map(|p| self.queue.guard(p, None)))
    }
}

impl<K> Drop for Wait<'_, K>
where
    K: Clone + Eq + Hash + Send + Sync + 'static,
{
    fn drop(&mut self) {
        let Some(ticket) = self.ticket else {
            return;
        };
        self.queue.with_state(|state, wake| {
            if !state.waiters.unpark(ticket) && !state.ready.is_empty() {
                wake.push(state.waiters.pop());
            }
        });
    }
}
