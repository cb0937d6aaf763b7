//! [`KeyMap`]: the store's live objects in key order, in chunks that fill to the brim when keys
//! arrive in runs.
//!
//! Keys mostly arrive in ascending runs: a StatefulSet's `web-0`, `web-1`, …, a generator's
//! numbered names, several such runs at once from several writers. `std`'s `BTreeMap` splits a
//! full node in the middle, and a run then leaves every node it passes a little over half
//! full: with the store's 56-byte entries that measured 107 bytes an entry, where packed
//! entries need 56 (`docs/design/benchmarks.md`, 2026-11-27).
//!
//! The layout is two levels of sorted vectors: a list of chunks, each holding up to [`CHUNK`]
//! entries in key order, every key of a chunk below every key of the next.
//!
//! - A key that falls between two chunks goes to the end of the left one while it has room,
//!   then to the front of the right one, and else starts a chunk of its own between them. A
//!   run therefore fills one chunk after another, each to [`CHUNK`].
//! - A key inside a full chunk splits it. In the second half of the chunk the split is where
//!   the key goes: the left part, at least half full, takes the key and the keys after it in
//!   the run. In the first half it is in the middle, so that no part starts nearly empty.
//! - A chunk that falls below a quarter full after a removal joins a neighbour when the two fit
//!   in one; an empty chunk goes.
//!
//! A lookup is two binary searches (the chunk by its last key, then the entry). An insert or a
//! removal moves at most one chunk's entries, plus the chunk list when a chunk comes or goes
//! (24 bytes a chunk, one chunk per up to [`CHUNK`] entries).

use std::fmt;
use std::ops::Bound;
use std::sync::Arc;

/// The most entries a chunk holds: 64 of the store's 56-byte entries are 3.5 KiB, so an
/// insert moves at most that much.
pub(crate) const CHUNK: usize = 64;

type Entry<V> = (Arc<str>, V);

/// An ordered map from keys to `V`. See the [module docs](self).
pub(crate) struct KeyMap<V> {
    /// Never empty chunks, in key order.
    chunks: Vec<Vec<Entry<V>>>,
    len: usize,
}

/// Where a key is, or where it would go.
enum Slot {
    /// At this entry of this chunk.
    Found(usize, usize),
    /// Inside this chunk, before this entry (never the first or past the last).
    Inside(usize, usize),
    /// After chunk `i - 1` (if any) and before chunk `i` (if any).
    Gap(usize),
}

/// Makes room for `more` entries without the chunk's capacity passing [`CHUNK`] (`Vec`'s own
/// growth doubles: a part split off with 40 entries would grow room for 80, and in the
/// benchmark's fill that was a fifth of the map's memory).
fn make_room<V>(chunk: &mut Vec<Entry<V>>, more: usize) {
    let need = chunk.len() + more;
    if need > chunk.capacity() {
        let want = (chunk.len() * 2).clamp(need, CHUNK.max(need));
        chunk.reserve_exact(want - chunk.len());
    }
}

fn last_key<V>(chunk: &[Entry<V>]) -> &str {
    chunk.last().map_or("", |(k, _)| k)
}

impl<V> Default for KeyMap<V> {
    fn default() -> Self {
        KeyMap {
            chunks: Vec::new(),
            len: 0,
        }
    }
}

impl<V: fmt::Debug> fmt::Debug for KeyMap<V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl<V> KeyMap<V> {
    /// The number of entries.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Where `key` is or would go. The indices it returns are in range until the map
    /// changes, so the `?`s on them below never return.
    fn locate(&self, key: &str) -> Slot {
        let i = self.chunks.partition_point(|c| last_key(c) < key);
        let Some(chunk) = self.chunks.get(i) else {
            return Slot::Gap(i);
        };
        match chunk.binary_search_by(|(k, _)| (**k).cmp(key)) {
            Ok(j) => Slot::Found(i, j),
            Err(0) => Slot::Gap(i),
            Err(j) => Slot::Inside(i, j),
        }
    }

    /// The entry under `key`.
    pub(crate) fn get_key_value(&self, key: &str) -> Option<(&Arc<str>, &V)> {
        match self.locate(key) {
            Slot::Found(i, j) => self.chunks.get(i)?.get(j).map(|(k, v)| (k, v)),
            Slot::Inside(..) | Slot::Gap(_) => None,
        }
    }

    /// The value under `key`.
    pub(crate) fn get(&self, key: &str) -> Option<&V> {
        self.get_key_value(key).map(|(_, v)| v)
    }

    /// Whether `key` has an entry.
    pub(crate) fn contains_key(&self, key: &str) -> bool {
        self.get_key_value(key).is_some()
    }

    /// Sets the value under `key`, returning the one it replaces (the stored key is kept, as
    /// `BTreeMap::insert` keeps it).
    pub(crate) fn insert(&mut self, key: Arc<str>, value: V) -> Option<V> {
        let entry = (key, value);
        match self.locate(&entry.0) {
            Slot::Found(i, j) => {
                let old = self.chunks.get_mut(i)?.get_mut(j)?;
                return Some(std::mem::replace(&mut old.1, entry.1));
            }
            Slot::Inside(i, j) => {
                let chunk = self.chunks.get_mut(i)?;
                if chunk.len() < CHUNK {
                    make_room(chunk, 1);
                    chunk.insert(j, entry);
                } else if j >= CHUNK / 2 {
                    // Split where the key goes: the left part, at least half full, takes
                    // the key and whatever follows it in a run.
                    let right = chunk.split_off(j);
                    chunk.push(entry);
                    self.chunks.insert(i + 1, right);
                } else {
                    // In the first half: split in the middle, so no part starts nearly empty.
                    let right = chunk.split_off(CHUNK / 2);
                    chunk.insert(j, entry);
                    self.chunks.insert(i + 1, right);
                }
            }
            Slot::Gap(i) => {
                let room = |c: Option<&Vec<Entry<V>>>| c.is_some_and(|c| c.len() < CHUNK);
                if i > 0 && room(self.chunks.get(i - 1)) {
                    if let Some(left) = self.chunks.get_mut(i - 1) {
                        make_room(left, 1);
                        left.push(entry);
                    }
                } else if room(self.chunks.get(i)) {
                    if let Some(right) = self.chunks.get_mut(i) {
                        make_room(right, 1);
                        right.insert(0, entry);
                    }
                } else {
                    // Most likely a run's next chunk: made whole at once, not grown.
                    let mut chunk = Vec::with_capacity(CHUNK);
                    chunk.push(entry);
                    self.chunks.insert(i, chunk);
                }
            }
        }
        self.len += 1;
        None
    }

    /// Removes the entry under `key`, returning its value.
    pub(crate) fn remove(&mut self, key: &str) -> Option<V> {
        let Slot::Found(i, j) = self.locate(key) else {
            return None;
        };
        let chunk = self.chunks.get_mut(i)?;
        let (_, value) = chunk.remove(j);
        self.len -= 1;
        self.settle(i);
        Some(value)
    }

    /// After a removal from chunk `i`: drops it when empty, joins it to a neighbour when it is
    /// below a quarter full and the two fit in one, and otherwise gives back room it no longer
    /// needs.
    fn settle(&mut self, i: usize) {
        let len = self.chunks.get(i).map_or(0, Vec::len);
        if len == 0 {
            if i < self.chunks.len() {
                self.chunks.remove(i);
            }
            return;
        }
        if len >= CHUNK / 4 {
            return;
        }
        let left = i
            .checked_sub(1)
            .and_then(|l| self.chunks.get(l))
            .map(Vec::len);
        let right = self.chunks.get(i + 1).map(Vec::len);
        let fits = |n: Option<usize>| n.filter(|n| n + len <= CHUNK);
        let join = match (fits(left), fits(right)) {
            (Some(l), Some(r)) if r < l => Some(i),
            (Some(_), _) => Some(i - 1),
            (None, Some(_)) => Some(i),
            (None, None) => None,
        };
        if let Some(at) = join {
            if at + 1 < self.chunks.len() {
                let next = self.chunks.remove(at + 1);
                if let Some(chunk) = self.chunks.get_mut(at) {
                    make_room(chunk, next.len());
                    chunk.extend(next);
                }
            }
        } else if let Some(chunk) = self.chunks.get_mut(i)
            && chunk.capacity() >= 4 * len
        {
            chunk.shrink_to(2 * len);
        }
    }

    /// Every entry, in key order.
    pub(crate) fn iter(&self) -> Iter<'_, V> {
        self.range_from(Bound::Unbounded)
    }

    /// The entries from `start` on, in key order.
    pub(crate) fn range_from(&self, start: Bound<&str>) -> Iter<'_, V> {
        // The first entry not `before` the start: the chunk by its last key, then the entry.
        let first = |before: &dyn Fn(&str) -> bool| {
            let i = self.chunks.partition_point(|c| before(last_key(c)));
            let j = self
                .chunks
                .get(i)
                .map_or(0, |c| c.partition_point(|(k, _)| before(k)));
            (i, j)
        };
        let (i, j) = match start {
            Bound::Unbounded => (0, 0),
            Bound::Included(key) => first(&|k| k < key),
            Bound::Excluded(key) => first(&|k| k <= key),
        };
        Iter {
            chunks: &self.chunks,
            i,
            j,
        }
    }
}

/// The entries of a [`KeyMap`] from a starting key on, in key order.
pub(crate) struct Iter<'a, V> {
    chunks: &'a [Vec<Entry<V>>],
    i: usize,
    j: usize,
}

impl<'a, V> Iterator for Iter<'a, V> {
    type Item = (&'a Arc<str>, &'a V);

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let chunk = self.chunks.get(self.i)?;
            if let Some((k, v)) = chunk.get(self.j) {
                self.j += 1;
                return Some((k, v));
            }
            self.i += 1;
            self.j = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    /// A small xorshift generator: the same sequence on every run.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self, below: u64) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0 % below
        }
    }

    fn key(s: &str) -> Arc<str> {
        Arc::from(s)
    }

    /// Chunks are never empty nor over [`CHUNK`], keys ascend across them, `len` counts them.
    fn check<V>(map: &KeyMap<V>) {
        assert!(map.chunks.iter().all(|c| !c.is_empty() && c.len() <= CHUNK));
        assert!(
            map.chunks.iter().all(|c| c.capacity() <= CHUNK),
            "no room past CHUNK"
        );
        let keys: Vec<&str> = map.iter().map(|(k, _)| &**k).collect();
        assert!(keys.windows(2).all(|w| w[0] < w[1]), "keys ascend");
        assert_eq!(keys.len(), map.len());
    }

    fn pairs<'a>(it: impl Iterator<Item = (&'a Arc<str>, &'a u64)>) -> Vec<(String, u64)> {
        it.map(|(k, v)| (k.to_string(), *v)).collect()
    }

    #[test]
    fn behaves_as_a_btreemap_under_random_inserts_removals_and_ranges() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let mut map = KeyMap::default();
        let mut model: BTreeMap<Arc<str>, u64> = BTreeMap::new();
        for step in 0..60_000u64 {
            // A small key space, so that chunks fill, split, empty and join.
            let k = key(&format!("/core/configmaps/ns/{:04}", rng.next(1500)));
            match rng.next(10) {
                0..=4 => assert_eq!(map.insert(k.clone(), step), model.insert(k, step)),
                5..=7 => assert_eq!(map.remove(&k), model.remove(&k)),
                8 => {
                    assert_eq!(map.get(&k), model.get(&k));
                    assert_eq!(map.contains_key(&k), model.contains_key(&k));
                    assert_eq!(map.get_key_value(&k), model.get_key_value(&k));
                }
                _ => {
                    let (ours, theirs) = if rng.next(2) == 0 {
                        (
                            map.range_from(Bound::Included(&k)),
                            model.range::<str, _>((Bound::Included(&*k), Bound::Unbounded)),
                        )
                    } else {
                        (
                            map.range_from(Bound::Excluded(&k)),
                            model.range::<str, _>((Bound::Excluded(&*k), Bound::Unbounded)),
                        )
                    };
                    assert_eq!(pairs(ours.take(100)), pairs(theirs.take(100)));
                }
            }
            if step % 997 == 0 {
                check(&map);
                assert_eq!(pairs(map.iter()), pairs(model.iter()));
            }
        }
        check(&map);
        assert_eq!(pairs(map.iter()), pairs(model.iter()));
    }

    #[test]
    fn interleaved_ascending_runs_fill_their_chunks() {
        // 64 writers, each creating its own numbered names in order, taking turns: the
        // benchmark's pattern and a StatefulSet's.
        let (writers, each) = (64, 200);
        let mut map = KeyMap::default();
        for i in 0..each {
            for w in 0..writers {
                map.insert(key(&format!("/core/configmaps/ns/cm-{w:03}-{i:06}")), ());
            }
        }
        check(&map);
        assert_eq!(map.len(), writers * each);
        // About one chunk a run more than packing would need (256 here, for 200); halving
        // every full node, as `BTreeMap` does, would need about 360.
        assert!(
            map.chunks.len() <= map.len() / CHUNK + writers,
            "{} chunks for {} entries",
            map.chunks.len(),
            map.len()
        );
    }

    #[test]
    fn a_single_run_packs_every_chunk_and_so_does_a_descending_one() {
        for descending in [false, true] {
            let mut map = KeyMap::default();
            let n = 10 * CHUNK;
            for i in 0..n {
                let i = if descending { n - 1 - i } else { i };
                map.insert(key(&format!("web-{i:05}")), i);
            }
            check(&map);
            assert_eq!(map.chunks.len(), 10, "descending: {descending}");
        }
    }

    #[test]
    fn removals_join_sparse_chunks_and_drop_empty_ones() {
        let mut map = KeyMap::default();
        let n = 50 * CHUNK;
        for i in 0..n {
            map.insert(key(&format!("k{i:06}")), i);
        }
        // Remove nine in ten: the chunks left hold more than a quarter of CHUNK on average.
        for i in (0..n).filter(|i| i % 10 != 0) {
            assert_eq!(map.remove(&format!("k{i:06}")), Some(i));
        }
        check(&map);
        assert_eq!(map.len(), n / 10);
        assert!(
            map.chunks.len() <= map.len() / (CHUNK / 4) + 1,
            "{} chunks for {} entries",
            map.chunks.len(),
            map.len()
        );
        for i in (0..n).filter(|i| i % 10 == 0) {
            assert_eq!(map.remove(&format!("k{i:06}")), Some(i));
        }
        assert_eq!(map.len(), 0);
        assert!(map.chunks.is_empty());
        assert_eq!(map.iter().next(), None);
        assert_eq!(map.remove("k000000"), None);
    }

    #[test]
    fn ranges_start_at_chunk_edges_and_past_the_end() {
        let mut map = KeyMap::default();
        for i in 0..3 * CHUNK {
            map.insert(key(&format!("k{:04}", 2 * i)), i);
        }
        assert_eq!(map.chunks.len(), 3);
        let first_of_second = map.chunks[1][0].0.clone();
        let last_of_first = map.chunks[0][CHUNK - 1].0.clone();
        let from = |b| map.range_from(b).next().map(|(k, _)| k.to_string());
        assert_eq!(
            from(Bound::Included(&first_of_second)),
            Some(first_of_second.to_string())
        );
        assert_eq!(
            from(Bound::Excluded(&last_of_first)),
            Some(first_of_second.to_string())
        );
        // A key between two chunks, an odd number: the next even one.
        assert_eq!(from(Bound::Included("k0127")), Some("k0128".into()));
        assert_eq!(from(Bound::Excluded("k9999")), None);
        assert_eq!(from(Bound::Included("")), Some("k0000".into()));
        assert_eq!(map.range_from(Bound::Unbounded).count(), 3 * CHUNK);
    }
}
