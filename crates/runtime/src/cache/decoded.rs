//! [`Decoded`]: the bounded cache of decoded objects beside a [`Store`](super::Store)'s
//! packed entries, so readers of a hot object share one `Arc<K>`.
//!
//! # Guarantees
//! - Never more than `capacity` objects in total (0 holds nothing). The capacity is split
//!   between up to 8 shards by key hash; a shard full of its share evicts even while another
//!   has room.
//! - A cached object is only returned for the very entry it was decoded from, or for an
//!   entry with the same non-zero resourceVersion (the same object), so a reader never gets
//!   an object older than the store's entry.
//! - Locks are per shard and held for a map lookup or insert only, never while decoding.
//!
//! Eviction is CLOCK (second chance): a hit sets the slot's reference bit; the hand clears
//! set bits and evicts the first slot it finds clear. Inserts start with the bit clear, so
//! objects read only once leave before objects read again.

use super::Map;
use std::hash::BuildHasher;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use super::store::Entry;

/// Shards of a cache with at least this many slots per shard.
const MIN_PER_SHARD: usize = 64;
/// The most shards a cache is split into.
const MAX_SHARDS: usize = 8;

/// Whether a slot decoded from `cached` holds the object of `current`.
fn same_version(cached: &Entry, current: &Entry) -> bool {
    cached.ptr_eq(current) || (current.rv() != 0 && cached.rv() == current.rv())
}

/// How an insert treats a slot that already exists for the key.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Insert {
    /// From the writer, under the store's write lock: the entry is the store's newest.
    Writer,
    /// From a reader after decoding outside any lock: never replaces a newer slot, and
    /// evicts nothing when `room_only` (used by `list`, so a scan does not flush hot objects).
    Reader {
        /// Insert only into a free slot.
        room_only: bool,
    },
}

pub(crate) struct Decoded<K> {
    shards: Box<[Mutex<Shard<K>>]>,
    hasher: foldhash::fast::RandomState,
    capacity: usize,
}

struct Slot<K> {
    entry: Entry,
    obj: Arc<K>,
    referenced: bool,
}

struct Shard<K> {
    capacity: usize,
    slots: Vec<Slot<K>>,
    /// Key → index in `slots`. The map's key is the slot's entry (hashed by its key), so no
    /// key string is allocated; it is replaced together with the slot's entry.
    index: Map<Entry, usize>,
    hand: usize,
}

impl<K> Decoded<K> {
    /// A cache of at most `capacity` objects.
    pub(crate) fn new(capacity: usize) -> Decoded<K> {
        let n = (capacity / MIN_PER_SHARD).clamp(1, MAX_SHARDS);
        let shards = (0..n)
            .map(|i| {
                // Spread the remainder over the first shards: the sum is exactly `capacity`.
                let cap = capacity / n + usize::from(i < capacity % n);
                Mutex::new(Shard {
                    capacity: cap,
                    slots: Vec::new(),
                    index: Map::default(),
                    hand: 0,
                })
            })
            .collect();
        Decoded {
            shards,
            hasher: foldhash::fast::RandomState::default(),
            capacity,
        }
    }

    /// The most objects this cache holds.
    pub(crate) fn capacity(&self) -> usize {
        self.capacity
    }

    fn shard(&self, key: &[u8]) -> MutexGuard<'_, Shard<K>> {
        let i = if self.shards.len() == 1 {
            0
        } else {
            // The modulo keeps the value below `shards.len()`, a usize.
            (self.hasher.hash_one(key) % self.shards.len() as u64) as usize
        };
        self.shards[i]
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The cached object for `entry`, if one is cached for this version.
    pub(crate) fn get(&self, entry: &Entry) -> Option<Arc<K>> {
        if self.capacity == 0 {
            return None;
        }
        let mut shard = self.shard(entry.key_bytes());
        let i = *shard.index.get(entry.key_bytes())?;
        let slot = &mut shard.slots[i];
        if !same_version(&slot.entry, entry) {
            return None;
        }
        slot.referenced = true;
        Some(Arc::clone(&slot.obj))
    }

    /// Caches `obj`, decoded from `entry`, and returns the object readers of `entry` share:
    /// `obj`, or the one a concurrent reader cached first for the same version.
    pub(crate) fn insert(&self, entry: &Entry, obj: Arc<K>, how: Insert) -> Arc<K> {
        if self.capacity == 0 {
            return obj;
        }
        let mut shard = self.shard(entry.key_bytes());
        if let Some(&i) = shard.index.get(entry.key_bytes()) {
            let slot = &mut shard.slots[i];
            if let Insert::Reader { .. } = how {
                if same_version(&slot.entry, entry) {
                    slot.referenced = true;
                    return Arc::clone(&slot.obj);
                }
                if slot.entry.rv() > entry.rv() {
                    // A writer cached a newer version meanwhile; leave it.
                    return obj;
                }
            }
            let moved = !slot.entry.ptr_eq(entry);
            slot.entry = entry.clone();
            slot.obj = Arc::clone(&obj);
            if moved {
                // Drop the old entry from the map's key too, so its allocation is freed.
                shard.index.remove(entry.key_bytes());
                shard.index.insert(entry.clone(), i);
            }
            return obj;
        }
        let slot = Slot {
            entry: entry.clone(),
            obj: Arc::clone(&obj),
            referenced: false,
        };
        if shard.slots.len() < shard.capacity {
            let i = shard.slots.len();
            shard.slots.push(slot);
            shard.index.insert(entry.clone(), i);
        } else if how != (Insert::Reader { room_only: true }) && shard.capacity > 0 {
            let i = shard.victim();
            let old = std::mem::replace(&mut shard.slots[i], slot);
            shard.index.remove(old.entry.key_bytes());
            shard.index.insert(entry.clone(), i);
        }
        obj
    }

    /// Forgets `key`.
    pub(crate) fn remove(&self, key: &str) {
        if self.capacity == 0 {
            return;
        }
        let key = key.as_bytes();
        self.shard(key).remove(key);
    }

    /// Keeps the slots `current` says are still valid, pointing them at the entry it returns
    /// (so a replaced entry's allocation is not kept alive), and drops the others.
    /// `current` is asked by the key's bytes, as the store's set is probed.
    pub(crate) fn retain(&self, mut current: impl FnMut(&[u8]) -> Option<Entry>) {
        for shard in &*self.shards {
            let mut shard = shard.lock().unwrap_or_else(PoisonError::into_inner);
            let slots = std::mem::take(&mut shard.slots);
            shard.index.clear();
            shard.hand = 0;
            for mut slot in slots {
                if let Some(now) = current(slot.entry.key_bytes())
                    && same_version(&slot.entry, &now)
                {
                    slot.entry = now;
                    let i = shard.slots.len();
                    shard.index.insert(slot.entry.clone(), i);
                    shard.slots.push(slot);
                }
            }
        }
    }

    /// How many objects are cached.
    pub(crate) fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.lock().unwrap_or_else(PoisonError::into_inner).slots.len())
            .sum()
    }
}

impl<K> Shard<K> {
    /// The slot to evict: the first the hand finds with its reference bit clear, clearing
    /// set bits on the way (at most one full turn plus one step).
    fn victim(&mut self) -> usize {
        loop {
            if self.hand >= self.slots.len() {
                self.hand = 0;
            }
            let i = self.hand;
            self.hand += 1;
            let slot = &mut self.slots[i];
            if slot.referenced {
                slot.referenced = false;
            } else {
                return i;
            }
        }
    }

    fn remove(&mut self, key: &[u8]) {
        let Some(i) = self.index.remove(key) else {
            return;
        };
        self.slots.swap_remove(i);
        if let Some(moved) = self.slots.get(i)
            && let Some(at) = self.index.get_mut(moved.entry.key_bytes())
        {
            *at = i;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(key: &str, rv: u64) -> Entry {
        Entry::new(key, rv, key.as_bytes())
    }

    #[test]
    fn shards_add_up_to_exactly_the_capacity() {
        for cap in [0, 1, 63, 64, 100, 1000, 1024, 1031, 10_000] {
            let d = Decoded::<u32>::new(cap);
            let sum: usize = d
                .shards
                .iter()
                .map(|s| s.lock().expect("not poisoned").capacity)
                .sum();
            assert_eq!(sum, cap);
        }
    }

    #[test]
    fn the_cache_never_holds_more_than_its_capacity_and_keeps_what_is_read_again() {
        let d = Decoded::<u32>::new(100);
        let hot: Vec<Entry> = (0..10).map(|i| entry(&format!("hot{i}"), 1)).collect();
        for (i, e) in hot.iter().enumerate() {
            d.insert(e, Arc::new(i as u32), Insert::Writer);
        }
        for round in 0..20u32 {
            for e in &hot {
                assert!(d.get(e).is_some(), "hot object evicted in round {round}");
            }
            for i in 0..50 {
                let e = entry(&format!("cold{round}-{i}"), 1);
                d.insert(&e, Arc::new(i), Insert::Reader { room_only: false });
                assert!(d.len() <= 100);
            }
        }
        assert_eq!(d.len(), 100);
    }

    #[test]
    fn a_slot_serves_only_its_own_version_and_a_reader_never_replaces_a_newer_one() {
        let d = Decoded::<u32>::new(4);
        let (v1, v2) = (entry("a", 1), entry("a", 2));
        d.insert(&v2, Arc::new(2), Insert::Writer);
        assert!(d.get(&v1).is_none());
        let late = d.insert(&v1, Arc::new(1), Insert::Reader { room_only: false });
        assert_eq!(*late, 1, "the late reader keeps what it decoded");
        assert_eq!(d.get(&v2).as_deref(), Some(&2));
        // An opaque version (0) is only served for the very entry it was decoded from.
        let (o1, o2) = (entry("b", 0), entry("b", 0));
        d.insert(&o1, Arc::new(10), Insert::Writer);
        assert!(d.get(&o2).is_none() && d.get(&o1).is_some());
        d.remove("a");
        assert!(d.get(&v2).is_none());
        assert_eq!(d.len(), 1);
    }

    #[test]
    fn a_scan_inserts_only_into_free_slots() {
        let d = Decoded::<u32>::new(2);
        let (a, b, c) = (entry("a", 1), entry("b", 1), entry("c", 1));
        d.insert(&a, Arc::new(1), Insert::Writer);
        d.insert(&b, Arc::new(2), Insert::Reader { room_only: true });
        d.insert(&c, Arc::new(3), Insert::Reader { room_only: true });
        assert!(d.get(&a).is_some() && d.get(&b).is_some() && d.get(&c).is_none());
    }

    #[test]
    fn capacity_zero_caches_nothing() {
        let d = Decoded::<u32>::new(0);
        let a = entry("a", 1);
        let got = d.insert(&a, Arc::new(1), Insert::Writer);
        assert_eq!(*got, 1);
        assert!(d.get(&a).is_none());
        assert_eq!(d.len(), 0);
    }
}
