//! The queue's shared state behind one mutex: the FIFO of ready keys, each key's slot
//! (queued, held by a worker, dirty, waiting for a deadline, quarantined, its failures), the
//! workers parked for a key, the transitions between them, and the timer task that moves
//! delayed keys into the queue.
//!
//! # Layout
//!
//! Each key with anything to remember lives in one *slot* of a slab (`slots`, reused through
//! `free`), and everything else refers to it by its slot number: the FIFO of ready keys, the
//! delay queue and the [`Guard`](crate::Guard) of a handed-out key. A key is hashed once, when
//! it is added: the index from keys to slots (`index`, a hash table of slot numbers, each
//! beside 32 bits of its key's hash) is searched only by `add` and by the queries that take
//! a key.
//! Handing out and settling go straight to the slot, and the FIFO holds 4-byte numbers, not
//! keys. The key itself is an `Arc<K>` that the slot and the guard share, so handing it out
//! copies a pointer.
//!
//! Adds do not take the state's lock: they push the hashed, shared key into the *inbox*
//! (`Inner::inbox`, its own small lock), which whoever takes the state's lock next moves in,
//! in order ([`Inner::drain`]). The adding thread moves it in itself only when a worker is
//! parked or the inbox is full; on a queue with metrics, whose adds are counted when they
//! move in, the timer task moves it within [`FLUSH_AFTER`] if nobody else does.
//! `docs/design/queue.md` gives the invariants and why.
//!
//! A freed slot stays in the index (a *stale* entry: its slot has no key, or another key, so
//! no search matches it) until stale entries outnumber live ones, when the index is rebuilt
//! from the slots' stored hashes (once they are also half of all slots, so the rebuild's walk
//! over the slots costs a few sequential reads per free). Settling a key thus writes only its
//! slot: removing it from the index at once cost a cache miss per key on a deep queue (the
//! index position is random), the largest single cost of a worker.

use std::collections::VecDeque;
use std::future::poll_fn;
use std::hash::{BuildHasher, Hash};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use hashbrown::HashTable;
use hashbrown::hash_table;
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::{CancellationToken, DropGuard};
use tokio_util::time::{DelayQueue, delay_queue};

use crate::{ExponentialBackoff, Hook, MAX_DELAY, Metrics, Retry, TokenBucket};

/// A slot number: where a key's state lives in [`State::slots`].
pub(super) type SlotId = u32;

/// Stale index entries tolerated regardless of the live keys, so a small queue does not
/// rebuild its index every few settles.
pub(super) const STALE_MIN: usize = 1024;

/// Keys added since the last drain, beyond which the adding thread drains them itself: it
/// bounds the inbox (and so the memory a burst of adds can hold) while workers are busy, and
/// amortises one acquisition of the state's lock over this many adds.
pub(super) const INBOX_MAX: usize = 256;

/// How long a key may wait in the inbox, uncounted, on a queue with metrics while no worker
/// takes the state's lock (every worker busy in a long reconcile): the timer task moves the
/// inbox in this long after an add asks it to (see [`Inner::ask_flush`]).
pub(super) const FLUSH_AFTER: Duration = Duration::from_millis(1);

/// A key's hash as the queue keeps it: 32 bits of foldhash's output, stored beside the slot
/// number in each index entry so the index grows and is rebuilt without reading a slot.
pub(super) type KeyHash = u32;

/// An index entry: a slot number and its key's hash.
#[derive(Clone, Copy, Debug)]
pub(super) struct Entry {
    slot: SlotId,
    hash: KeyHash,
}

/// The 64-bit hash the index's table places `hash` by: an odd multiplier spreads the 32 bits
/// over the high bits that hashbrown's control bytes use, and keeps the low bits that pick
/// the bucket as foldhash made them.
fn spread(hash: KeyHash) -> u64 {
    u64::from(hash).wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

/// [`spread`] of an entry, for the table to move it when it grows.
fn entry_hash(e: &Entry) -> u64 {
    spread(e.hash)
}

impl Entry {
    /// Whether this entry is `key`'s, whose hash is `hash`: the hashes are compared first,
    /// so a non-matching entry reads no slot; a stale entry's slot holds no key or another.
    fn is<K: Eq>(&self, slots: &[Slot<K>], key: &K, hash: KeyHash) -> bool {
        self.hash == hash && slots[self.slot as usize].key.as_deref() == Some(key)
    }
}

pub(super) struct Inner<K> {
    pub(super) state: CacheLine<Mutex<State<K>>>,
    /// Keys added and not yet moved into `state` (see [`Inner::drain`]), each hashed by the
    /// thread that added it.
    pub(super) inbox: CacheLine<Mutex<Vec<Incoming<K>>>>,
    /// The hasher of `state`'s index, so keys are hashed outside both locks ([`Inner::hash`]).
    pub(super) hasher: foldhash::fast::RandomState,
    /// How many workers are parked in `state.waiters`, readable without the state's lock.
    pub(super) parked: Parked,
    /// Whether the timer task was asked to move the inbox in (with metrics only).
    pub(super) flush_asked: CacheLine<AtomicBool>,
    /// Wakes the timer task to move the inbox in (see [`Inner::ask_flush`]).
    pub(super) flush: Arc<Notify>,
    /// Wakes `shutdown_with_drain` when the last guard settles.
    pub(super) idle: Notify,
    pub(super) metrics: Option<Hook>,
    /// Stops the timer task when the last handle goes.
    pub(super) _timer: DropGuard,
}

/// A value on cache lines of its own. The adding thread takes the inbox's lock for every key
/// while the workers take the state's: sharing a line, each would pull the other's lock word
/// (and the state's fields) away from the cores that use it. 128 bytes, because x86 cores
/// fetch lines in adjacent pairs.
#[derive(Debug, Default)]
#[repr(align(128))]
pub(super) struct CacheLine<T>(pub(super) T);

/// How many workers are parked, shared by the state (which writes it under its lock) and
/// the adding thread (which reads it for every key), on lines of its own.
pub(super) type Parked = Arc<CacheLine<AtomicUsize>>;

impl<T> std::ops::Deref for CacheLine<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T> std::ops::DerefMut for CacheLine<T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.0
    }
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
/// - a slot is in `ready` exactly when it is `queued && !processing`, and at most once;
/// - `processing` counts the slots with `processing` set (the live guards);
/// - a slot with nothing to remember (see [`Slot::is_idle`]) is freed: its key is dropped,
///   it leaves `index`, and its number goes to `free`;
/// - every slot with a key has one entry in `index`; other entries are stale (counted in
///   `stale`) and match no key, because a key has at most one slot.
///
/// The index hashes with foldhash (hashbrown's default hasher, randomly seeded per queue)
/// rather than SipHash: keys are object names, which the cluster's users choose but cannot
/// make collide without knowing the seed, and the hash is computed once per add, outside the
/// lock, by [`Inner::hash`]; the state keeps each slot's hash and never hashes a key itself.
pub(super) struct State<K> {
    pub(super) ready: VecDeque<SlotId>,
    pub(super) slots: Vec<Slot<K>>,
    pub(super) free: Vec<SlotId>,
    pub(super) index: HashTable<Entry>,
    /// Index entries whose slot was freed since the index was last rebuilt.
    pub(super) stale: usize,
    pub(super) delayed: DelayQueue<SlotId>,
    pub(super) waiters: Waiters,
    /// The inbox's previous buffer, swapped with it at each drain so neither reallocates.
    pub(super) spare: Vec<Incoming<K>>,
    pub(super) processing: usize,
    pub(super) shut_down: bool,
    pub(super) backoff: ExponentialBackoff,
    pub(super) bucket: TokenBucket,
    pub(super) max_retries: Option<u32>,
}

/// One key's state. A free slot has no key.
#[derive(Debug)]
pub(super) struct Slot<K> {
    pub(super) key: Option<Arc<K>>,
    /// The key's hash, so the index can be rebuilt without hashing the key again.
    pub(super) hash: KeyHash,
    /// Added and not yet handed out (client-go's "dirty").
    pub(super) queued: bool,
    /// Held by a guard.
    pub(super) processing: bool,
    /// Out of retries; adds are ignored until released.
    pub(super) quarantined: bool,
    /// Consecutive retries since the last success.
    pub(super) failures: u32,
    /// Where the key waits in the delay queue, if it does.
    pub(super) delay: Option<delay_queue::Key>,
    /// When the key was queued (kept only with metrics).
    pub(super) queued_at: Option<Instant>,
}

impl<K> Slot<K> {
    fn new(key: Arc<K>, hash: KeyHash) -> Self {
        Slot {
            key: Some(key),
            hash,
            queued: false,
            processing: false,
            quarantined: false,
            failures: 0,
            delay: None,
            queued_at: None,
        }
    }

    pub(super) fn is_idle(&self) -> bool {
        !self.queued
            && !self.processing
            && self.failures == 0
            && !self.quarantined
            && self.delay.is_none()
    }
}

/// The workers parked in `next()`, each with a ticket so a cancelled wait can take itself off
/// the list. A newly ready key takes one waiter off and wakes it, so a burst of adds wakes
/// each parked worker once rather than once per key, and adds find the list under the lock
/// they already hold. The last to park is woken first: its thread is the likeliest to still
/// be running.
#[derive(Debug, Default)]
pub(super) struct Waiters {
    list: Vec<(u64, Waker)>,
    next_ticket: u64,
    /// The list's length, published for adds that do not take the state's lock
    /// ([`Inner::parked`]).
    parked: Parked,
}

impl Waiters {
    fn new(parked: Parked) -> Self {
        Waiters {
            list: Vec::new(),
            next_ticket: 0,
            parked,
        }
    }

    fn publish(&self) {
        self.parked.store(self.list.len(), Ordering::SeqCst);
    }

    /// Parks the caller under `ticket`, or refreshes its waker if it is still parked.
    pub(super) fn park(&mut self, ticket: &mut Option<u64>, waker: &Waker) {
        if let Some(t) = *ticket
            && let Some((_, w)) = self.list.iter_mut().find(|(id, _)| *id == t)
        {
            if !w.will_wake(waker) {
                w.clone_from(waker);
            }
            return;
        }
        let t = self.next_ticket;
        self.next_ticket += 1;
        self.list.push((t, waker.clone()));
        self.publish();
        *ticket = Some(t);
    }

    /// Takes `ticket` off the list; false if it was already taken off to be woken.
    pub(super) fn unpark(&mut self, ticket: u64) -> bool {
        match self.list.iter().position(|(id, _)| *id == ticket) {
            Some(i) => {
                self.list.swap_remove(i);
                self.publish();
                true
            }
            None => false,
        }
    }

    /// Takes one parked worker off the list, to be woken once the lock is released.
    pub(super) fn pop(&mut self) -> Option<Waker> {
        let waker = self.list.pop().map(|(_, w)| w);
        if waker.is_some() {
            self.publish();
        }
        waker
    }

    /// How many workers are parked.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.list.len()
    }

    /// Takes every parked worker off the list.
    pub(super) fn take_all(&mut self) -> Vec<Waker> {
        let all = self.list.drain(..).map(|(_, w)| w).collect();
        self.publish();
        all
    }
}

/// Wakers to call once the lock is released, so a woken worker never finds the lock held by
/// its waker. One key wakes at most one worker, so one slot covers the common case.
#[derive(Default)]
pub(super) struct Wake(Vec<Waker>);

impl Wake {
    pub(super) fn push(&mut self, waker: Option<Waker>) {
        if let Some(w) = waker {
            self.0.push(w);
        }
    }

    pub(super) fn run(self) {
        for w in self.0 {
            w.wake();
        }
    }
}

/// What an add did, for the caller to report and wake outside the lock.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Added {
    /// The key was queued (the depth grew): count it.
    pub(super) counted: bool,
    /// The key went into `ready`: a parked worker should wake.
    pub(super) ready: bool,
}

/// A key in the inbox: added, hashed, not yet in the state. It carries no time: with metrics,
/// its wait is counted from when the inbox moves in ([`Inner::drain`]), so an add does not
/// read the clock.
pub(super) struct Incoming<K> {
    pub(super) key: Arc<K>,
    pub(super) hash: KeyHash,
}

/// A handed-out key: its copy for the guard, its slot, and when it was queued (with metrics).
pub(super) struct Popped<K> {
    pub(super) key: Arc<K>,
    pub(super) slot: SlotId,
    pub(super) queued_at: Option<Instant>,
}

impl<K> State<K> {
    /// How many keys have a slot (anything to remember).
    pub(super) fn live_keys(&self) -> usize {
        self.slots.len() - self.free.len()
    }
}

impl<K: Clone + Eq + Hash> State<K> {
    pub(super) fn new(
        backoff: ExponentialBackoff,
        bucket: TokenBucket,
        max_retries: Option<u32>,
        parked: Parked,
    ) -> Self {
        State {
            ready: VecDeque::new(),
            slots: Vec::new(),
            free: Vec::new(),
            index: HashTable::new(),
            stale: 0,
            delayed: DelayQueue::new(),
            waiters: Waiters::new(parked),
            spare: Vec::new(),
            processing: 0,
            shut_down: false,
            backoff,
            bucket,
            max_retries,
        }
    }

    /// The slot of `key`, whose hash ([`Inner::hash`]) is `hash`, if it has one.
    pub(super) fn find(&self, key: &K, hash: KeyHash) -> Option<SlotId> {
        let slots = &self.slots;
        self.index
            .find(spread(hash), |e| e.is(slots, key, hash))
            .map(|e| e.slot)
    }

    /// The slot of `key`, whose hash is `hash`, made if it has none.
    fn slot_of(&mut self, key: Arc<K>, hash: KeyHash) -> SlotId {
        let slots = &self.slots;
        match self
            .index
            .entry(spread(hash), |e| e.is(slots, &key, hash), entry_hash)
        {
            hash_table::Entry::Occupied(o) => o.get().slot,
            hash_table::Entry::Vacant(v) => {
                let id = match self.free.pop() {
                    Some(id) => {
                        self.slots[id as usize] = Slot::new(key, hash);
                        id
                    }
                    None => {
                        let id = SlotId::try_from(self.slots.len())
                            .expect("fewer than 2^32 keys with pending work");
                        self.slots.push(Slot::new(key, hash));
                        id
                    }
                };
                v.insert(Entry { slot: id, hash });
                id
            }
        }
    }

    /// Queues `key` unless it is already queued, quarantined or the queue is shut down.
    /// Queues `key`, already hashed with [`Inner::hash`], unless it is already queued,
    /// quarantined or the queue is shut down.
    pub(super) fn add_hashed(
        &mut self,
        key: Arc<K>,
        hash: KeyHash,
        now: Option<Instant>,
        wake: &mut Wake,
    ) -> Added {
        if self.shut_down {
            return Added::default();
        }
        let id = self.slot_of(key, hash);
        self.enqueue(id, now, wake)
    }

    /// Queues the key of slot `id` (see [`add_hashed`](Self::add_hashed)); frees the slot if it stays idle.
    pub(super) fn enqueue(&mut self, id: SlotId, now: Option<Instant>, wake: &mut Wake) -> Added {
        let slot = &mut self.slots[id as usize];
        if self.shut_down || slot.queued || slot.quarantined {
            self.free_if_idle(id);
            return Added::default();
        }
        slot.queued = true;
        slot.queued_at = now;
        if slot.processing {
            // Settling the guard puts the key back into `ready`.
            return Added {
                counted: true,
                ready: false,
            };
        }
        self.ready.push_back(id);
        wake.push(self.waiters.pop());
        Added {
            counted: true,
            ready: true,
        }
    }

    /// Schedules `key`, whose hash is `hash`, to be added at `when`, keeping an earlier
    /// deadline if it has one.
    pub(super) fn add_at(&mut self, key: Arc<K>, hash: KeyHash, when: Instant) {
        if self.shut_down {
            return;
        }
        let id = self.slot_of(key, hash);
        self.enqueue_at(id, when);
    }

    /// Schedules slot `id` to be queued at `when` (see [`add_at`](Self::add_at)).
    pub(super) fn enqueue_at(&mut self, id: SlotId, when: Instant) {
        let slot = &mut self.slots[id as usize];
        if self.shut_down || slot.quarantined {
            self.free_if_idle(id);
            return;
        }
        match slot.delay {
            Some(ref dk) => {
                if when < self.delayed.deadline(dk) {
                    self.delayed.reset_at(dk, when);
                }
            }
            None => slot.delay = Some(self.delayed.insert_at(id, when)),
        }
    }

    /// Hands out the next ready key.
    pub(super) fn pop(&mut self) -> Option<Popped<K>> {
        if self.shut_down {
            return None;
        }
        let id = self.ready.pop_front()?;
        let slot = &mut self.slots[id as usize];
        slot.queued = false;
        slot.processing = true;
        self.processing += 1;
        Some(Popped {
            key: slot.key.clone().expect("a ready slot has a key"),
            slot: id,
            queued_at: slot.queued_at.take(),
        })
    }

    /// Settles a handed-out key. Returns what a retry did.
    pub(super) fn settle(
        &mut self,
        id: SlotId,
        how: Settle,
        metrics: Option<&dyn Metrics>,
        wake: &mut Wake,
    ) -> Retry {
        if let Settle::Done = how {
            self.settle_done(id, Some(wake));
            return Retry::After(Duration::ZERO);
        }
        let now = Instant::now();
        let max_retries = self.max_retries;
        let shut_down = self.shut_down;
        let slot = &mut self.slots[id as usize];
        debug_assert!(slot.processing, "a handed-out key is processing");
        slot.processing = false;
        self.processing -= 1;
        let mut schedule = None;
        let outcome = match how {
            Settle::Done => {
                slot.failures = 0;
                Retry::After(Duration::ZERO)
            }
            Settle::After(delay) => {
                slot.failures = 0;
                schedule = Some(delay);
                Retry::After(delay)
            }
            Settle::Retry if shut_down => Retry::ShutDown,
            Settle::Retry if max_retries.is_some_and(|max| slot.failures >= max) => {
                slot.failures = slot.failures.saturating_add(1);
                if slot.queued {
                    Retry::Pending
                } else {
                    slot.quarantined = true;
                    Retry::Quarantined
                }
            }
            Settle::Retry => {
                let delay = self
                    .backoff
                    .delay(slot.failures)
                    .max(self.bucket.reserve(now));
                slot.failures = slot.failures.saturating_add(1);
                if let Some(m) = metrics {
                    m.retried();
                }
                schedule = Some(delay);
                Retry::After(delay)
            }
        };
        if slot.queued && !shut_down {
            self.ready.push_back(id);
            wake.push(self.waiters.pop());
        }
        match schedule {
            Some(delay) if !delay.is_zero() => self.enqueue_at(id, now + delay.min(MAX_DELAY)),
            Some(_) => {
                if self.enqueue(id, metrics.map(|_| now), wake).counted {
                    count_add(metrics);
                }
            }
            None => self.free_if_idle(id),
        }
        outcome
    }

    /// The common case of [`settle`](Self::settle): a success.
    /// Without `wake`, a key that goes back into `ready` wakes nobody (the caller takes it).
    pub(super) fn settle_done(&mut self, id: SlotId, wake: Option<&mut Wake>) {
        let slot = &mut self.slots[id as usize];
        debug_assert!(slot.processing, "a handed-out key is processing");
        slot.processing = false;
        slot.failures = 0;
        self.processing -= 1;
        if slot.queued && !self.shut_down {
            self.ready.push_back(id);
            if let Some(wake) = wake {
                wake.push(self.waiters.pop());
            }
            return;
        }
        self.free_if_idle(id);
    }

    /// Frees slot `id` if it has nothing to remember: its key is dropped and it leaves the
    /// index.
    pub(super) fn free_if_idle(&mut self, id: SlotId) {
        let slot = &mut self.slots[id as usize];
        if !slot.is_idle() {
            return;
        }
        slot.key = None;
        self.free.push(id);
        self.stale += 1;
        // The rebuild walks every slot, so it waits until the stale entries are at least
        // half of the slots as well as more than the live keys: a few reads per free.
        if self.stale > STALE_MIN
            && self.stale > self.live_keys()
            && 2 * self.stale > self.slots.len()
        {
            self.rebuild_index();
        }
    }

    /// Rebuilds the index from the slots with a key, dropping its stale entries. Amortised
    /// over the frees that made them, it costs a few sequential reads per free instead of
    /// the random one an immediate removal costs.
    fn rebuild_index(&mut self) {
        let live = self.live_keys();
        self.index.clear();
        // The table keeps its buckets, so the keys that come next do not grow it again from
        // a small size, unless it is far larger than the keys it holds.
        if self.index.capacity() > 4 * (live + STALE_MIN) {
            self.index.shrink_to(2 * live, entry_hash);
        }
        for (id, slot) in self.slots.iter().enumerate() {
            if slot.key.is_some() {
                let id = SlotId::try_from(id).expect("slot numbers fit in a SlotId");
                let entry = Entry {
                    slot: id,
                    hash: slot.hash,
                };
                self.index
                    .insert_unique(spread(slot.hash), entry, entry_hash);
            }
        }
        self.stale = 0;
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
}

impl<K> Inner<K>
where
    K: Clone + Eq + Hash + Send + Sync + 'static,
{
    /// Puts `key` in the inbox. Returns whether the caller should drain it now: the inbox is
    /// full, or a worker is parked and would otherwise not see the key.
    ///
    /// A worker parks under the state's lock and then looks at the inbox once more
    /// ([`inbox_is_empty`](Self::inbox_is_empty)); an add pushes under the inbox's lock and
    /// then reads [`parked`](Self::parked). The inbox's lock orders the two, so either the
    /// worker finds the key or the add finds the worker.
    pub(super) fn push(&self, key: K) -> bool {
        let incoming = self.incoming(key);
        let full = {
            let mut inbox = self.lock_inbox();
            inbox.push(incoming);
            inbox.len() >= INBOX_MAX
        };
        full || self.parked.load(Ordering::SeqCst) > 0
    }

    /// [`push`](Self::push) of a batch, emptying `batch`. The inbox counts as full only if it
    /// was before the batch came: a batch as large as the inbox is left to the workers, as
    /// single adds are, unless the one before it is still there.
    pub(super) fn push_all(&self, batch: &mut Vec<Incoming<K>>) -> bool {
        let full = {
            let mut inbox = self.lock_inbox();
            let full = inbox.len() >= INBOX_MAX;
            if inbox.is_empty() {
                std::mem::swap(&mut *inbox, batch);
            } else {
                inbox.append(batch);
            }
            full
        };
        full || self.parked.load(Ordering::SeqCst) > 0
    }

    /// The hash of `key` in `state`'s index: the low 32 bits of foldhash's.
    pub(super) fn hash(&self, key: &K) -> KeyHash {
        self.hasher.hash_one(key) as KeyHash
    }

    /// `key` ready for the state: hashed, and shared so handing it out copies a pointer.
    pub(super) fn incoming(&self, key: K) -> Incoming<K> {
        Incoming {
            hash: self.hash(&key),
            key: Arc::new(key),
        }
    }

    /// Moves the inbox's keys into `state`, in the order they were added, as
    /// [`State::add_hashed`] would have. Returns how many were queued (for the adds metric).
    ///
    /// With metrics, the keys' wait starts at `now`, the clock reading of the caller that
    /// moves them, taken just before it took the state's lock; without one (`None`), the
    /// clock is read here, once for the whole inbox.
    pub(super) fn drain(
        &self,
        state: &mut State<K>,
        wake: &mut Wake,
        now: Option<Instant>,
    ) -> usize {
        {
            let mut inbox = self.lock_inbox();
            if inbox.is_empty() {
                return 0;
            }
            std::mem::swap(&mut *inbox, &mut state.spare);
        }
        let now = self
            .metrics
            .as_deref()
            .map(|_| now.unwrap_or_else(Instant::now));
        let mut batch = std::mem::take(&mut state.spare);
        let mut counted = 0;
        for incoming in batch.drain(..) {
            if state
                .add_hashed(incoming.key, incoming.hash, now, wake)
                .counted
            {
                counted += 1;
            }
        }
        state.spare = batch;
        counted
    }

    /// Whether no add waits in the inbox.
    pub(super) fn inbox_is_empty(&self) -> bool {
        self.lock_inbox().is_empty()
    }

    /// After an add left its key in the inbox: on a queue with metrics, asks the timer task
    /// to move the inbox in (and so count the add) within [`FLUSH_AFTER`], unless it was
    /// asked already. A key must not stay out of the depth gauge while every worker is busy.
    pub(super) fn ask_flush(&self) {
        if self.metrics.is_some()
            && !self.flush_asked.load(Ordering::Relaxed)
            && !self.flush_asked.swap(true, Ordering::AcqRel)
        {
            self.flush.notify_one();
        }
    }

    /// Moves the inbox in and counts its adds: the timer task's answer to [`ask_flush`].
    ///
    /// [`ask_flush`]: Self::ask_flush
    fn flush_inbox(&self) {
        // Cleared before the inbox is taken: an add that finds it set pushed its key before
        // this drain (the inbox's lock orders the two), and one that finds it clear asks again.
        self.flush_asked.store(false, Ordering::SeqCst);
        self.with_state(|_, _| ());
    }

    /// Runs `f` on the state under its lock, after moving the inbox into it; wakes the workers
    /// `f` and the move readied and counts the adds once the lock is released.
    pub(super) fn with_state<R>(&self, f: impl FnOnce(&mut State<K>, &mut Wake) -> R) -> R {
        self.with_state_at(None, f)
    }

    /// [`with_state`](Self::with_state), with the clock already read at `now` (with metrics
    /// only): the keys the inbox brings in are stamped with it.
    pub(super) fn with_state_at<R>(
        &self,
        now: Option<Instant>,
        f: impl FnOnce(&mut State<K>, &mut Wake) -> R,
    ) -> R {
        let mut wake = Wake::default();
        let (result, counted) = {
            let mut state = self.lock();
            let counted = self.drain(&mut state, &mut wake, now);
            (f(&mut state, &mut wake), counted)
        };
        wake.run();
        self.count_adds(counted);
        result
    }

    /// Reports `counted` adds (each one a key that joined the queue) to the metrics.
    pub(super) fn count_adds(&self, counted: usize) {
        for _ in 0..counted {
            count_add(self.metrics.as_deref());
        }
    }

    fn lock_inbox(&self) -> MutexGuard<'_, Vec<Incoming<K>>> {
        // Pushing and swapping cannot leave the buffer half-written.
        self.inbox
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Moves expired delays into `ready`. Registers `cx` to be woken by the next deadline or
    /// by an earlier insertion.
    pub(super) fn poll_delayed(&self, cx: &mut Context<'_>) -> Poll<()> {
        let mut wake = Wake::default();
        let mut added = 0;
        let shut_down = {
            let mut state = self.lock();
            let now = self.metrics.as_deref().map(|_| Instant::now());
            while let Poll::Ready(Some(expired)) = state.delayed.poll_expired(cx) {
                let id = expired.into_inner();
                state.slots[id as usize].delay = None;
                if state.enqueue(id, now, &mut wake).counted {
                    added += 1;
                }
            }
            state.shut_down
        };
        wake.run();
        self.count_adds(added);
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
    K: Clone + Eq + Hash + Send + Sync + 'static,
{
    // Only the `Notify` is held across the waits: a strong handle would keep the queue alive.
    let flush = match inner.upgrade() {
        Some(inner) => inner.flush.clone(),
        None => return,
    };
    let expire = poll_fn(|cx| match inner.upgrade() {
        Some(inner) => inner.poll_delayed(cx),
        None => Poll::Ready(()),
    });
    let flushes = async {
        loop {
            flush.notified().await;
            // Adds that come meanwhile join this flush instead of asking for their own.
            tokio::time::sleep(FLUSH_AFTER).await;
            match inner.upgrade() {
                Some(inner) => inner.flush_inbox(),
                None => return,
            }
        }
    };
    tokio::select! {
        () = stop.cancelled() => {}
        () = expire => {}
        () = flushes => {}
    }
}
