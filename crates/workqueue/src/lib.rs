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
mod tests {
    use std::collections::HashSet;

    use super::*;

    fn queue() -> Queue<&'static str> {
        Queue::new(QueueConfig::default())
    }

    /// The keys handed out without waiting, settled as successes.
    fn drain_now(q: &Queue<&'static str>) -> Vec<&'static str> {
        let mut got = Vec::new();
        while let Some(Some(guard)) = q.try_next() {
            got.push(*guard.key());
        }
        got
    }

    #[tokio::test]
    async fn duplicates_collapse_into_one_hand_out() {
        let q = queue();
        for _ in 0..1000 {
            q.add("a");
            q.add("b");
        }
        assert_eq!(q.len(), 2);
        assert_eq!(drain_now(&q), vec!["a", "b"]);
        assert!(q.is_empty());
    }

    #[tokio::test]
    async fn add_all_collapses_duplicates_like_single_adds() {
        let q = queue();
        q.add("b");
        q.add_all(["a", "b", "a", "c"]);
        assert_eq!(drain_now(&q), vec!["b", "a", "c"]);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn add_all_wakes_parked_workers() {
        let q: Queue<u32> = Queue::new(QueueConfig::default());
        let workers: Vec<_> = (0..2)
            .map(|_| {
                let q = q.clone();
                tokio::spawn(async move { q.next().await.map(|g| *g.key()) })
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(20)).await;
        q.add_all([1, 2]);
        let mut got = Vec::new();
        for w in workers {
            let key = tokio::time::timeout(Duration::from_secs(5), w).await;
            got.push(key.expect("woken").expect("no panic").expect("a key"));
        }
        got.sort_unstable();
        assert_eq!(got, vec![1, 2]);
    }

    #[tokio::test]
    async fn a_held_key_is_not_handed_out_again_until_it_settles() {
        let q = queue();
        q.add("a");
        let guard = q.next().await.expect("a key");
        q.add("a");
        assert!(
            q.try_next().is_none(),
            "the held key must not be handed out twice"
        );
        drop(guard);
        let again = q.next().await.expect("the re-added key");
        assert_eq!(*again.key(), "a");
    }

    #[tokio::test]
    async fn done_and_next_settles_and_hands_out_in_order() {
        let q = queue();
        q.add("a");
        q.add("b");
        let a = q.next().await.expect("a");
        q.add("a");
        let b = a.done_and_next().await.expect("b");
        assert_eq!(*b.key(), "b");
        let a_again = b.done_and_next().await.expect("a, re-added while held");
        assert_eq!(*a_again.key(), "a");
        q.shutdown();
        assert!(a_again.done_and_next().await.is_none());
        assert_eq!(q.processing(), 0);
        assert_eq!(q.inner.lock().entries.len(), 0);
    }

    #[tokio::test]
    async fn done_and_next_waits_when_nothing_is_ready() {
        let q = queue();
        q.add("a");
        let a = q.next().await.expect("a");
        let waiting = tokio::spawn(a.done_and_next());
        tokio::task::yield_now().await;
        q.add("b");
        let b = tokio::time::timeout(Duration::from_secs(5), waiting).await;
        let b = b.expect("woken").expect("no panic").expect("b");
        assert_eq!(*b.key(), "b");
    }

    #[tokio::test]
    async fn a_key_added_while_processing_runs_exactly_once_more() {
        let q = queue();
        q.add("a");
        let guard = q.next().await.expect("a key");
        for _ in 0..10 {
            q.add("a");
        }
        guard.done();
        assert_eq!(drain_now(&q), vec!["a"]);
        assert!(q.is_empty());
        assert_eq!(
            q.inner.lock().entries.len(),
            0,
            "settled keys leave no entry behind"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn a_key_is_never_held_by_two_workers() {
        let q: Queue<u32> = Queue::new(QueueConfig::default());
        let held = Arc::new(Mutex::new(HashSet::new()));
        let handled = Arc::new(AtomicUsize::new(0));
        let mut workers = Vec::new();
        for worker in 0..8 {
            let (q, held, handled) = (q.clone(), held.clone(), handled.clone());
            workers.push(tokio::spawn(async move {
                let mut next = q.next().await;
                while let Some(guard) = next {
                    let key = *guard.key();
                    assert!(held.lock().expect("lock").insert(key), "{key} held twice");
                    tokio::task::yield_now().await;
                    assert!(held.lock().expect("lock").remove(&key));
                    handled.fetch_add(1, Ordering::SeqCst);
                    // Half the workers settle and take the next key in one step.
                    next = if worker % 2 == 0 {
                        guard.done_and_next().await
                    } else {
                        drop(guard);
                        q.next().await
                    };
                }
            }));
        }
        for round in 0..20_000u32 {
            q.add(round % 16);
            if round % 64 == 0 {
                tokio::task::yield_now().await;
            }
        }
        tokio::time::timeout(Duration::from_secs(30), async {
            while !(q.is_empty() && q.processing() == 0) {
                tokio::task::yield_now().await;
            }
        })
        .await
        .expect("the queue drains");
        q.shutdown();
        for w in workers {
            w.await.expect("worker did not panic");
        }
        let handled = handled.load(Ordering::SeqCst);
        assert!(handled >= 16, "every key ran at least once ({handled})");
        assert!(handled <= 20_000, "no key ran more often than it was added");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_producer_thread_and_two_workers_settle_every_key() {
        let n = 200_000u64;
        let q: Queue<u64> = Queue::new(QueueConfig::default());
        let settled = Arc::new(AtomicUsize::new(0));
        let mut workers = Vec::new();
        for _ in 0..2 {
            let (q, settled) = (q.clone(), settled.clone());
            workers.push(tokio::spawn(async move {
                while let Some(guard) = q.next().await {
                    drop(guard);
                    settled.fetch_add(1, Ordering::SeqCst);
                }
            }));
        }
        let producer = {
            let q = q.clone();
            std::thread::spawn(move || (0..n).for_each(|k| q.add(k)))
        };
        producer.join().expect("the producer did not panic");
        let all = tokio::time::timeout(Duration::from_secs(60), async {
            while settled.load(Ordering::SeqCst) < n as usize {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        })
        .await;
        assert!(
            all.is_ok(),
            "settled {} of {n}; {:?}; parked {}",
            settled.load(Ordering::SeqCst),
            q,
            q.inner.parked.load(Ordering::SeqCst)
        );
        q.shutdown();
        for w in workers {
            w.await.expect("worker did not panic");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn add_after_keeps_the_earliest_deadline() {
        let q = queue();
        let start = Instant::now();
        q.add_after("a", Duration::from_secs(10));
        q.add_after("a", Duration::from_secs(3));
        q.add_after("a", Duration::from_secs(7));
        let guard = q.next().await.expect("the delayed key");
        assert_eq!(start.elapsed(), Duration::from_secs(3));
        guard.done();
        let more = tokio::time::timeout(Duration::from_secs(60), q.next()).await;
        assert!(more.is_err(), "one delayed add yields one hand-out");
    }

    #[tokio::test(start_paused = true)]
    async fn add_after_of_a_queued_key_does_not_delay_it() {
        let q = queue();
        q.add("a");
        q.add_after("a", Duration::from_secs(5));
        let start = Instant::now();
        q.next().await.expect("a").done();
        assert_eq!(start.elapsed(), Duration::ZERO);
        // The delayed add still fires: whoever asked for it wants a run at that time.
        q.next().await.expect("a, again").done();
        assert_eq!(start.elapsed(), Duration::from_secs(5));
    }

    #[tokio::test(start_paused = true)]
    async fn retries_back_off_exponentially_and_success_resets_the_backoff() {
        let q = queue();
        q.add("a");
        let mut waits = Vec::new();
        let mut guard = q.next().await.expect("a");
        for _ in 0..4 {
            let retried = Instant::now();
            assert!(matches!(guard.retry(), Retry::After(_)));
            guard = q.next().await.expect("a retry");
            waits.push(retried.elapsed());
        }
        let ms = Duration::from_millis;
        assert_eq!(waits, vec![ms(5), ms(10), ms(20), ms(40)]);
        assert_eq!(q.failures(&"a"), 4);
        guard.done();
        assert_eq!(q.failures(&"a"), 0);
        q.add("a");
        let retried = Instant::now();
        assert_eq!(q.next().await.expect("a").retry(), Retry::After(ms(5)));
        q.next().await.expect("a retry").done();
        assert_eq!(retried.elapsed(), ms(5));
    }

    #[tokio::test(start_paused = true)]
    async fn the_token_bucket_spaces_retries_of_many_keys() {
        let q: Queue<u32> = Queue::new(QueueConfig::default());
        for k in 0..120 {
            q.add(k);
        }
        let mut delays = Vec::new();
        for _ in 0..120 {
            match q.next().await.expect("a key").retry() {
                Retry::After(d) => delays.push(d),
                other => panic!("unexpected {other:?}"),
            }
        }
        // The first 100 retries fit in the burst and wait only their own 5 ms backoff; the
        // next ones wait for tokens at 10/s.
        assert!(delays[..100].iter().all(|d| *d == Duration::from_millis(5)));
        assert_eq!(delays[100], Duration::from_millis(100));
        assert_eq!(delays[119], Duration::from_secs(2));
        let start = Instant::now();
        for _ in 0..120 {
            q.next().await.expect("a retried key").done();
        }
        assert_eq!(start.elapsed(), Duration::from_secs(2));
    }

    #[tokio::test(start_paused = true)]
    async fn a_key_out_of_retries_is_quarantined_until_released() {
        let q = Queue::new(QueueConfig::default().max_retries(2));
        q.add("a");
        assert!(matches!(
            q.next().await.expect("a").retry(),
            Retry::After(_)
        ));
        assert!(matches!(
            q.next().await.expect("a").retry(),
            Retry::After(_)
        ));
        assert_eq!(q.next().await.expect("a").retry(), Retry::Quarantined);
        assert!(q.is_quarantined(&"a"));
        q.add("a");
        q.add_after("a", Duration::from_millis(1));
        let more = tokio::time::timeout(Duration::from_secs(3600), q.next()).await;
        assert!(
            more.is_err(),
            "a quarantined key is neither retried nor re-added"
        );
        assert!(q.release(&"a"));
        assert!(!q.release(&"a"), "releasing twice changes nothing");
        let guard = q.next().await.expect("the released key");
        assert_eq!(q.failures(&"a"), 0, "a release starts the retries afresh");
        assert!(matches!(guard.retry(), Retry::After(d) if d == Duration::from_millis(5)));
    }

    #[tokio::test(start_paused = true)]
    async fn a_key_changed_while_failing_its_last_retry_runs_again_instead_of_quarantine() {
        let q = Queue::new(QueueConfig::default().max_retries(0));
        q.add("a");
        let guard = q.next().await.expect("a");
        q.add("a");
        assert_eq!(guard.retry(), Retry::Pending);
        assert!(!q.is_quarantined(&"a"));
        assert_eq!(q.next().await.expect("a again").retry(), Retry::Quarantined);
    }

    #[tokio::test(start_paused = true)]
    async fn retry_after_resets_the_backoff_and_waits_the_given_delay() {
        let q = queue();
        q.add("a");
        let _ = q.next().await.expect("a").retry();
        let guard = q.next().await.expect("a");
        let start = Instant::now();
        guard.retry_after(Duration::from_secs(30));
        assert_eq!(q.failures(&"a"), 0);
        q.next().await.expect("a after 30 s").done();
        assert_eq!(start.elapsed(), Duration::from_secs(30));
    }

    #[tokio::test(start_paused = true)]
    async fn shutdown_with_drain_waits_for_held_keys_and_stops_hand_outs() {
        let q = queue();
        q.add("a");
        q.add("b");
        q.add_after("c", Duration::from_secs(1));
        let guard = q.next().await.expect("a");
        let drained = tokio::spawn({
            let q = q.clone();
            async move { q.shutdown_with_drain().await }
        });
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert!(!drained.is_finished(), "drain waits for the held key");
        assert!(q.next().await.is_none(), "no hand-outs after shutdown");
        q.add("d");
        assert!(q.is_empty() || q.next().await.is_none());
        assert!(matches!(guard.retry(), Retry::ShutDown));
        tokio::time::timeout(Duration::from_secs(1), drained)
            .await
            .expect("drain ends once the guard settles")
            .expect("drain did not panic");
    }

    #[tokio::test]
    async fn shutdown_wakes_parked_workers() {
        let q = queue();
        let worker = tokio::spawn({
            let q = q.clone();
            async move { q.next().await.is_none() }
        });
        tokio::task::yield_now().await;
        q.shutdown();
        let ended = tokio::time::timeout(Duration::from_secs(5), worker).await;
        assert!(ended.expect("woken").expect("no panic"));
    }

    #[tokio::test]
    async fn a_cancelled_next_takes_no_key() {
        let q = queue();
        let waited = tokio::time::timeout(Duration::from_millis(10), q.next()).await;
        assert!(waited.is_err());
        assert_eq!(q.inner.parked.load(Ordering::SeqCst), 0);
        q.add("a");
        assert_eq!(drain_now(&q), vec!["a"]);
    }
}
