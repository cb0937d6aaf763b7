//! The queue's shared state behind one mutex: the FIFO of ready keys, each key's entry
//! (queued, held by a worker, dirty, waiting for a deadline, quarantined, its failures), the
//! transitions between them, and the timer task that moves delayed keys into the queue.

use std::collections::VecDeque;
use std::collections::hash_map::{self, HashMap};
use std::future::poll_fn;
use std::hash::Hash;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, Weak};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::{CancellationToken, DropGuard};
use tokio_util::time::{DelayQueue, delay_queue};

use crate::{ExponentialBackoff, Hook, MAX_DELAY, Metrics, Retry, TokenBucket};

pub(super) struct Inner<K> {
    pub(super) state: Mutex<State<K>>,
    /// Wakes workers parked in `next()`.
    pub(super) ready: Notify,
    /// How many workers are parked (or about to park) in `next()`; adds skip the wake-up when
    /// it is zero, which keeps the producer's path free of `Notify`'s own lock.
    pub(super) parked: AtomicUsize,
    /// Wakes `shutdown_with_drain` when the last guard settles.
    pub(super) idle: Notify,
    pub(super) metrics: Option<Hook>,
    /// Stops the timer task when the last handle goes.
    pub(super) _timer: DropGuard,
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
pub(super) struct State<K> {
    pub(super) ready: VecDeque<K>,
    pub(super) entries: HashMap<K, Entry, foldhash::fast::RandomState>,
    pub(super) delayed: DelayQueue<K>,
    pub(super) processing: usize,
    pub(super) shut_down: bool,
    pub(super) backoff: ExponentialBackoff,
    pub(super) bucket: TokenBucket,
    pub(super) max_retries: Option<u32>,
}

#[derive(Debug, Default)]
pub(super) struct Entry {
    /// Added and not yet handed out (client-go's "dirty").
    pub(super) queued: bool,
    /// Held by a guard.
    pub(super) processing: bool,
    /// Consecutive retries since the last success.
    pub(super) failures: u32,
    /// Out of retries; adds are ignored until released.
    pub(super) quarantined: bool,
    /// Where the key waits in the delay queue, if it does.
    pub(super) delay: Option<delay_queue::Key>,
    /// When the key was queued (kept only with metrics).
    pub(super) queued_at: Option<Instant>,
}

impl Entry {
    pub(super) fn is_idle(&self) -> bool {
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
    pub(super) fn add(
        &mut self,
        key: K,
        now: Option<Instant>,
        metrics: Option<&dyn Metrics>,
    ) -> bool {
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
    pub(super) fn add_at(&mut self, key: K, when: Instant) {
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
    pub(super) fn pop(&mut self, metrics: Option<&dyn Metrics>) -> Option<(K, Option<Instant>)> {
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
    pub(super) fn settle(
        &mut self,
        key: K,
        how: Settle,
        metrics: Option<&dyn Metrics>,
    ) -> (Retry, bool) {
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
    pub(super) fn settle_done(&mut self, key: K) -> bool {
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

    pub(super) fn remove_if_idle(&mut self, key: &K) {
        if self.entries.get(key).is_some_and(Entry::is_idle) {
            self.entries.remove(key);
        }
    }
}

/// How a guard settles its key.
#[derive(Clone, Copy, Debug)]
pub(super) enum Settle {
    /// Success: reset the backoff.
    Done,
    /// Reset the backoff and add the key again after this delay.
    After(Duration),
    /// Failure: add the key again after its backoff, or quarantine it.
    Retry,
}

pub(super) fn count_add(metrics: Option<&dyn Metrics>) {
    if let Some(m) = metrics {
        m.added();
    }
}

impl<K> Inner<K> {
    pub(super) fn lock(&self) -> MutexGuard<'_, State<K>> {
        // A panic under the lock leaves every field consistent (each method checks before it
        // writes), so a poisoned lock is still safe to use.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Wakes parked workers for `n` newly ready keys.
    pub(super) fn wake(&self, n: usize) {
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
    pub(super) fn poll_delayed(&self, cx: &mut Context<'_>) -> Poll<()> {
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
pub(super) async fn run_timer<K>(inner: Weak<Inner<K>>, stop: CancellationToken)
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
