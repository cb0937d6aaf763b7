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

mod rate_limit;

use std::collections::VecDeque;
use std::collections::hash_map::{self, HashMap};
use std::fmt;
use std::future::poll_fn;
use std::hash::Hash;
use std::pin::pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::{CancellationToken, DropGuard};
use tokio_util::time::{DelayQueue, delay_queue};

pub use self::rate_limit::{ExponentialBackoff, TokenBucket};

/// The series a queue reports to, shared by its clones.
type Hook = Arc<dyn Metrics>;

/// The longest delay the queue schedules; longer ones are clamped to it, because the timer
/// wheel under [`DelayQueue`] cannot hold deadlines much more than two years ahead.
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
    /// A key was handed out (the depth shrank by one) after waiting `waited`, when known.
    fn handed_out(&self, waited: Option<Duration>);
    /// A handed-out key settled after `worked`.
    fn settled(&self, worked: Duration);
    /// A failed key was scheduled for a retry after its backoff.
    fn retried(&self);
    /// The last handle of the queue went away with `waiting` keys not handed out.
    fn dropped(&self, waiting: usize);
}

/// A workqueue of keys. Cheap to clone; clones share the queue.
pub struct Queue<K> {
    inner: Arc<Inner<K>>,
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

struct Inner<K> {
    state: Mutex<State<K>>,
    /// Wakes workers parked in `next()`.
    ready: Notify,
    /// How many workers are parked (or about to park) in `next()`; adds skip the wake-up when
    /// it is zero, which keeps the producer's path free of `Notify`'s own lock.
    parked: AtomicUsize,
    /// Wakes `shutdown_with_drain` when the last guard settles.
    idle: Notify,
    metrics: Option<Hook>,
    /// Stops the timer task when the last handle goes.
    _timer: DropGuard,
}

impl<K> Drop for Inner<K> {
    /// Keys still waiting leave the depth gauge with the queue, so a queue dropped unfinished
    /// (a controller aborted when its manager lost the Lease) does not leave the series high
    /// for the queue that replaces it.
    fn drop(&mut self) {
        if let Some(m) = &self.metrics {
            let waiting = self.state.get_mut().map_or_else(
                |poisoned| poisoned.into_inner().ready.len(),
                |s| s.ready.len(),
            );
            m.dropped(waiting);
        }
    }
}

/// Everything behind the lock. Invariants:
/// - a key is in `ready` exactly when its entry is `queued && !processing`;
/// - `processing` counts the entries with `processing` set;
/// - an entry with nothing to remember (see [`Entry::is_idle`]) is removed.
///
/// The entry map uses foldhash (hashbrown's default hasher, randomly seeded) rather
/// than SipHash: every add, hand-out and settle hashes the key once, and keys are object names,
/// which the cluster's users choose but cannot make collide without knowing the seed.
struct State<K> {
    ready: VecDeque<K>,
    entries: HashMap<K, Entry, foldhash::fast::RandomState>,
    delayed: DelayQueue<K>,
    processing: usize,
    shut_down: bool,
    backoff: ExponentialBackoff,
    bucket: TokenBucket,
    max_retries: Option<u32>,
}

#[derive(Debug, Default)]
struct Entry {
    /// Added and not yet handed out (client-go's "dirty").
    queued: bool,
    /// Held by a guard.
    processing: bool,
    /// Consecutive retries since the last success.
    failures: u32,
    /// Out of retries; adds are ignored until released.
    quarantined: bool,
    /// Where the key waits in the delay queue, if it does.
    delay: Option<delay_queue::Key>,
    /// When the key was queued (kept only with metrics).
    queued_at: Option<Instant>,
}

impl Entry {
    fn is_idle(&self) -> bool {
        !self.queued
            && !self.processing
            && self.failures == 0
            && !self.quarantined
            && self.delay.is_none()
    }
}

impl<K: Clone + Eq + Hash> State<K> {
    /// Queues `key` unless it is already queued, quarantined or the queue is shut down.
    /// Returns whether the key went into `ready` (so a parked worker should wake).
    fn add(&mut self, key: K, now: Option<Instant>, metrics: Option<&dyn Metrics>) -> bool {
        if self.shut_down {
            return false;
        }
        match self.entries.entry(key) {
            hash_map::Entry::Occupied(o) => {
                let entry = o.get();
                if entry.queued || entry.quarantined {
                    return false;
                }
                count_add(metrics);
                let processing = entry.processing;
                let (key, entry) = (o.key().clone(), o.into_mut());
                entry.queued = true;
                entry.queued_at = now;
                if processing {
                    // Settling the guard puts the key back into `ready`.
                    return false;
                }
                self.ready.push_back(key);
                true
            }
            hash_map::Entry::Vacant(v) => {
                count_add(metrics);
                self.ready.push_back(v.key().clone());
                v.insert(Entry {
                    queued: true,
                    queued_at: now,
                    ..Entry::default()
                });
                true
            }
        }
    }

    /// Schedules `key` to be added at `when`, keeping an earlier deadline if it has one.
    fn add_at(&mut self, key: K, when: Instant) {
        if self.shut_down {
            return;
        }
        match self.entries.entry(key) {
            hash_map::Entry::Occupied(o) => {
                if o.get().quarantined {
                    return;
                }
                match o.get().delay {
                    Some(ref dk) => {
                        if when < self.delayed.deadline(dk) {
                            self.delayed.reset_at(dk, when);
                        }
                    }
                    None => {
                        let dk = self.delayed.insert_at(o.key().clone(), when);
                        o.into_mut().delay = Some(dk);
                    }
                }
            }
            hash_map::Entry::Vacant(v) => {
                let dk = self.delayed.insert_at(v.key().clone(), when);
                v.insert(Entry {
                    delay: Some(dk),
                    ..Entry::default()
                });
            }
        }
    }

    /// Hands out the next ready key.
    fn pop(&mut self, metrics: Option<&dyn Metrics>) -> Option<(K, Option<Instant>)> {
        if self.shut_down {
            return None;
        }
        let key = self.ready.pop_front()?;
        let entry = self
            .entries
            .get_mut(&key)
            .expect("a ready key has an entry");
        entry.queued = false;
        entry.processing = true;
        self.processing += 1;
        let queued_at = entry.queued_at.take();
        let started = match metrics {
            Some(m) => {
                let now = Instant::now();
                m.handed_out(queued_at.map(|at| now.saturating_duration_since(at)));
                Some(now)
            }
            None => None,
        };
        Some((key, started))
    }

    /// Settles a handed-out key. Returns what a retry did and whether the key went back into
    /// `ready`.
    fn settle(&mut self, key: K, how: Settle, metrics: Option<&dyn Metrics>) -> (Retry, bool) {
        if let Settle::Done = how {
            return (Retry::After(Duration::ZERO), self.settle_done(key));
        }
        let now = Instant::now();
        let max_retries = self.max_retries;
        let shut_down = self.shut_down;
        let entry = self
            .entries
            .get_mut(&key)
            .expect("a handed-out key has an entry");
        debug_assert!(entry.processing, "a handed-out key is processing");
        entry.processing = false;
        self.processing -= 1;
        let mut schedule = None;
        let outcome = match how {
            Settle::Done => {
                entry.failures = 0;
                Retry::After(Duration::ZERO)
            }
            Settle::After(delay) => {
                entry.failures = 0;
                schedule = Some(delay);
                Retry::After(delay)
            }
            Settle::Retry if shut_down => Retry::ShutDown,
            Settle::Retry if max_retries.is_some_and(|max| entry.failures >= max) => {
                entry.failures = entry.failures.saturating_add(1);
                if entry.queued {
                    Retry::Pending
                } else {
                    entry.quarantined = true;
                    Retry::Quarantined
                }
            }
            Settle::Retry => {
                let delay = self
                    .backoff
                    .delay(entry.failures)
                    .max(self.bucket.reserve(now));
                entry.failures = entry.failures.saturating_add(1);
                if let Some(m) = metrics {
                    m.retried();
                }
                schedule = Some(delay);
                Retry::After(delay)
            }
        };
        let requeue = entry.queued && !shut_down;
        if requeue {
            self.ready.push_back(key.clone());
        }
        match schedule {
            Some(delay) if !delay.is_zero() => self.add_at(key, now + delay.min(MAX_DELAY)),
            Some(_) => {
                let woke = self.add(key, metrics.map(|_| now), metrics);
                return (outcome, requeue || woke);
            }
            None => self.remove_if_idle(&key),
        }
        (outcome, requeue)
    }

    /// The common case of [`settle`](Self::settle), with one hash lookup.
    fn settle_done(&mut self, key: K) -> bool {
        let hash_map::Entry::Occupied(mut o) = self.entries.entry(key) else {
            unreachable!("a handed-out key has an entry");
        };
        let entry = o.get_mut();
        debug_assert!(entry.processing, "a handed-out key is processing");
        entry.processing = false;
        entry.failures = 0;
        self.processing -= 1;
        if entry.queued && !self.shut_down {
            self.ready.push_back(o.key().clone());
            return true;
        }
        if entry.is_idle() {
            o.remove();
        }
        false
    }

    fn remove_if_idle(&mut self, key: &K) {
        if self.entries.get(key).is_some_and(Entry::is_idle) {
            self.entries.remove(key);
        }
    }
}

/// How a guard settles its key.
#[derive(Clone, Copy, Debug)]
enum Settle {
    /// Success: reset the backoff.
    Done,
    /// Reset the backoff and add the key again after this delay.
    After(Duration),
    /// Failure: add the key again after its backoff, or quarantine it.
    Retry,
}

fn count_add(metrics: Option<&dyn Metrics>) {
    if let Some(m) = metrics {
        m.added();
    }
}

impl<K> Inner<K> {
    fn lock(&self) -> MutexGuard<'_, State<K>> {
        // A panic under the lock leaves every field consistent (each method checks before it
        // writes), so a poisoned lock is still safe to use.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Wakes parked workers for `n` newly ready keys.
    fn wake(&self, n: usize) {
        let parked = self.parked.load(Ordering::SeqCst);
        for _ in 0..n.min(parked) {
            self.ready.notify_one();
        }
    }
}

impl<K> Inner<K>
where
    K: Clone + Eq + Hash + Send + 'static,
{
    /// Moves expired delays into `ready`. Registers `cx` to be woken by the next deadline or
    /// by an earlier insertion.
    fn poll_delayed(&self, cx: &mut Context<'_>) -> Poll<()> {
        let mut woke = 0;
        let shut_down = {
            let mut state = self.lock();
            let now = self.metrics.as_deref().map(|_| Instant::now());
            while let Poll::Ready(Some(expired)) = state.delayed.poll_expired(cx) {
                let key = expired.into_inner();
                if let Some(entry) = state.entries.get_mut(&key) {
                    entry.delay = None;
                }
                if state.add(key.clone(), now, self.metrics.as_deref()) {
                    woke += 1;
                } else {
                    state.remove_if_idle(&key);
                }
            }
            state.shut_down
        };
        self.wake(woke);
        if shut_down {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}

/// The timer task: moves delayed keys into the queue until the queue shuts down or goes away.
async fn run_timer<K>(inner: Weak<Inner<K>>, stop: CancellationToken)
where
    K: Clone + Eq + Hash + Send + 'static,
{
    let expire = poll_fn(|cx| match inner.upgrade() {
        Some(inner) => inner.poll_delayed(cx),
        None => Poll::Ready(()),
    });
    tokio::select! {
        () = stop.cancelled() => {}
        () = expire => {}
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
    fn try_next(&self) -> Option<Option<Guard<K>>> {
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
    fn settle_done_and_pop(&self, key: K, started: Option<Instant>) -> Option<Option<Guard<K>>> {
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

    fn settle(&self, key: K, how: Settle, started: Option<Instant>) -> Retry {
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
struct Parked<'a>(&'a AtomicUsize);

impl<'a> Parked<'a> {
    fn new(count: &'a AtomicUsize) -> Self {
        count.fetch_add(1, Ordering::SeqCst);
        Self(count)
    }
}

impl Drop for Parked<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

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
    queue: Queue<K>,
    key: Option<K>,
    started: Option<Instant>,
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
        let Some(key) = self.key.take() else {
            return queue.next().await;
        };
        let started = self.started;
        drop(self);
        match queue.settle_done_and_pop(key, started) {
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

    fn settle(&mut self, how: Settle) -> Retry {
        match self.key.take() {
            Some(key) => self.queue.settle(key, how, self.started),
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

#[cfg(test)]
mod tests;
