//! [`KeyMap`]: the store's live objects in key order, in chunks that fill to the brim when keys
//! arrive in runs, each holding its keys' shared beginning once.
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
//! Neighbouring keys share most of their bytes (`/core/configmaps/<namespace>/web-` before the
//! ordinal), so a chunk keeps the beginning its keys share once, as its `prefix`, and of each
//! key only the rest (its tail), all tails in one buffer. A key that does not begin with the
//! prefix shortens it (every tail gets the cut-off bytes in front); a split or a join lengthens
//! it again to what the part's first and last keys share, which in a sorted chunk is what all
//! its keys share. A key is therefore never one allocation of its own, and the map hands keys
//! out as [`Key`]s, the two pieces borrowed.
//!
//! A lookup is two binary searches (the chunk by its last key, then the tail). An insert or a
//! removal moves at most one chunk's entries and tails, plus the chunk list when a chunk comes
//! or goes (one chunk per up to [`CHUNK`] entries).

use std::cmp::Ordering;
use std::fmt;
use std::ops::Bound;
use std::sync::Arc;

/// The most entries a chunk holds: 64 of the store's 40-byte values are 2.5 KiB, so an
/// insert moves at most that much.
pub(crate) const CHUNK: usize = 64;

/// A key in the map: its chunk's prefix and its own tail.
#[derive(Clone, Copy)]
pub(crate) struct Key<'a> {
    prefix: &'a str,
    tail: &'a str,
}

impl Key<'_> {
    /// How this key orders against `other`, as `str`s order (by their bytes).
    pub(crate) fn cmp_str(&self, other: &str) -> Ordering {
        let (prefix, other) = (self.prefix.as_bytes(), other.as_bytes());
        let n = prefix.len().min(other.len());
        match prefix.get(..n).cmp(&other.get(..n)) {
            Ordering::Equal => {}
            unequal => return unequal,
        }
        match other.get(prefix.len()..) {
            Some(rest) => self.tail.as_bytes().cmp(rest),
            // `other` is a proper beginning of the prefix.
            None => Ordering::Greater,
        }
    }

    /// Whether the key begins with `start`.
    pub(crate) fn starts_with(&self, start: &str) -> bool {
        match start.strip_prefix(self.prefix) {
            Some(rest) => self.tail.starts_with(rest),
            None => self.prefix.starts_with(start),
        }
    }

    /// Appends the key to `out`.
    pub(crate) fn push_to(&self, out: &mut String) {
        out.push_str(self.prefix);
        out.push_str(self.tail);
    }

    /// The key, in an allocation of its own.
    pub(crate) fn to_arc(self) -> Arc<str> {
        let mut key = String::with_capacity(self.prefix.len() + self.tail.len());
        self.push_to(&mut key);
        Arc::from(key)
    }
}

impl<'a> From<&'a str> for Key<'a> {
    /// A key held whole (as a prefix with an empty tail).
    fn from(key: &'a str) -> Self {
        Key {
            prefix: key,
            tail: "",
        }
    }
}

impl fmt::Display for Key<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.prefix)?;
        f.write_str(self.tail)
    }
}

impl fmt::Debug for Key<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.to_string(), f)
    }
}

/// The length of what `a` and `b` begin with alike, ending on a character boundary of both.
fn shared_len(a: &str, b: &str) -> usize {
    let mut n = a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count();
    // The bytes agree up to `n`, so a boundary of `a` there is one of `b`.
    while !a.is_char_boundary(n) {
        n -= 1;
    }
    n
}

/// Up to [`CHUNK`] entries in key order, with the beginning their keys share kept once.
struct Chunk<V> {
    /// What every key of the chunk begins with.
    prefix: Box<str>,
    /// The rest of each key, one after another.
    tails: String,
    /// Where each key's tail ends in `tails`, by entry.
    ends: Vec<u32>,
    values: Vec<V>,
}

/// Makes room for `more` entries without the capacity passing [`CHUNK`] (`Vec`'s own growth
/// doubles: a part split off with 40 entries would grow room for 80, and in the benchmark's
/// fill that was a fifth of the map's memory).
fn make_room<T>(v: &mut Vec<T>, more: usize) {
    let need = v.len() + more;
    if need > v.capacity() {
        let want = (v.len() * 2).clamp(need, CHUNK.max(need));
        v.reserve_exact(want - v.len());
    }
}

/// A tail's end as stored (a chunk's tails stay far below 4 GiB: 64 keys of bounded length).
fn end(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

impl<V> Chunk<V> {
    /// A chunk of one entry, with room for a run's worth.
    fn one(key: &str, value: V) -> Self {
        let mut ends = Vec::with_capacity(CHUNK);
        ends.push(0);
        let mut values = Vec::with_capacity(CHUNK);
        values.push(value);
        Chunk {
            prefix: key.into(),
            tails: String::new(),
            ends,
            values,
        }
    }

    fn len(&self) -> usize {
        self.values.len()
    }

    /// Where entry `j`'s tail starts in `tails`.
    fn start(&self, j: usize) -> usize {
        j.checked_sub(1)
            .and_then(|i| self.ends.get(i))
            .map_or(0, |&e| e as usize)
    }

    fn tail(&self, j: usize) -> &str {
        self.ends
            .get(j)
            .and_then(|&e| self.tails.get(self.start(j)..e as usize))
            .unwrap_or("")
    }

    fn key(&self, j: usize) -> Key<'_> {
        Key {
            prefix: &self.prefix,
            tail: self.tail(j),
        }
    }

    fn last_key(&self) -> Key<'_> {
        self.key(self.len().saturating_sub(1))
    }

    /// Where `key` is (`Ok`) or would go (`Err`) among the entries.
    fn search(&self, key: &str) -> Result<usize, usize> {
        let Some(rest) = key.strip_prefix(&*self.prefix) else {
            // Below every key of the chunk or above every one, as the prefix is.
            return match (*self.prefix).cmp(key) {
                Ordering::Greater => Err(0),
                _ => Err(self.len()),
            };
        };
        let (mut lo, mut hi) = (0, self.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            match self.tail(mid).cmp(rest) {
                Ordering::Less => lo = mid + 1,
                Ordering::Greater => hi = mid,
                Ordering::Equal => return Ok(mid),
            }
        }
        Err(lo)
    }

    /// Appends every key's tail to `tails` as `front` followed by the tail less its first
    /// `drop` bytes, with its end to `ends`: the tails under a prefix that is `front` longer,
    /// or `drop` bytes shorter, than this chunk's (`drop` never splits a character: it is
    /// what all tails share).
    fn write_tails(&self, front: &str, drop: usize, tails: &mut String, ends: &mut Vec<u32>) {
        for j in 0..self.len() {
            tails.push_str(front);
            tails.push_str(self.tail(j).get(drop..).unwrap_or(""));
            ends.push(end(tails.len()));
        }
    }

    /// Keeps only the first `keep` bytes (a character boundary) of the prefix: the rest goes to
    /// the front of every tail.
    fn shorten_prefix(&mut self, keep: usize) {
        let (Some(kept), Some(cut)) = (self.prefix.get(..keep), self.prefix.get(keep..)) else {
            return;
        };
        if cut.is_empty() {
            return;
        }
        let mut tails = String::with_capacity(self.tails.len() + cut.len() * self.len());
        let mut ends = Vec::with_capacity(self.ends.capacity());
        self.write_tails(cut, 0, &mut tails, &mut ends);
        self.prefix = kept.into();
        self.tails = tails;
        self.ends = ends;
    }

    /// Lengthens the prefix to what the first and last keys share (in a sorted chunk, what all
    /// its keys share), taking it off every tail.
    fn lengthen_prefix(&mut self) {
        let more = shared_len(self.tail(0), self.last_key().tail);
        if more == 0 {
            return;
        }
        let mut prefix = String::with_capacity(self.prefix.len() + more);
        prefix.push_str(&self.prefix);
        prefix.push_str(self.tail(0).get(..more).unwrap_or(""));
        let mut tails = String::with_capacity(self.tails.len() - more * self.len());
        let mut ends = Vec::with_capacity(self.ends.capacity());
        self.write_tails("", more, &mut tails, &mut ends);
        self.prefix = prefix.into();
        self.tails = tails;
        self.ends = ends;
    }

    /// Puts `key` before entry `j` (`j` is where [`Chunk::search`] said it goes).
    fn insert(&mut self, j: usize, key: &str, value: V) {
        if !key.starts_with(&*self.prefix) {
            self.shorten_prefix(shared_len(&self.prefix, key));
        }
        let tail = key.get(self.prefix.len()..).unwrap_or("");
        let at = self.start(j);
        self.tails.insert_str(at, tail);
        let grown = end(tail.len());
        for e in self.ends.iter_mut().skip(j) {
            *e += grown;
        }
        make_room(&mut self.ends, 1);
        self.ends.insert(j, end(at + tail.len()));
        make_room(&mut self.values, 1);
        self.values.insert(j, value);
    }

    /// Removes entry `j`, returning its value.
    fn remove(&mut self, j: usize) -> Option<V> {
        if j >= self.len() {
            return None;
        }
        let (from, to) = (self.start(j), self.ends.get(j).map_or(0, |&e| e as usize));
        self.tails.replace_range(from..to, "");
        self.ends.remove(j);
        let shrunk = end(to - from);
        for e in self.ends.iter_mut().skip(j) {
            *e -= shrunk;
        }
        Some(self.values.remove(j))
    }

    /// Splits off the entries from `j` on (`0 < j < len`) into a chunk of their own; both parts
    /// then keep what their own keys share as prefix.
    fn split_off(&mut self, j: usize) -> Chunk<V> {
        let at = self.start(j);
        let tails = self.tails.split_off(at);
        let mut ends = Vec::with_capacity(CHUNK);
        ends.extend(self.ends.drain(j..).map(|e| e - end(at)));
        let mut values = Vec::with_capacity(CHUNK);
        values.extend(self.values.drain(j..));
        let mut right = Chunk {
            prefix: self.prefix.clone(),
            tails,
            ends,
            values,
        };
        self.lengthen_prefix();
        right.lengthen_prefix();
        right
    }

    /// Appends `next`, whose keys all follow this chunk's (the two fit in one).
    fn append(&mut self, next: Chunk<V>) {
        self.shorten_prefix(shared_len(&self.prefix, &next.prefix));
        let cut = next.prefix.get(self.prefix.len()..).unwrap_or("");
        make_room(&mut self.ends, next.len());
        next.write_tails(cut, 0, &mut self.tails, &mut self.ends);
        make_room(&mut self.values, next.len());
        self.values.extend(next.values);
        self.lengthen_prefix();
    }

    /// Gives back room the chunk no longer needs, once it holds a quarter of it or less.
    fn shrink(&mut self) {
        let len = self.len();
        if self.values.capacity() >= 4 * len {
            self.values.shrink_to(2 * len);
            self.ends.shrink_to(2 * len);
        }
        if self.tails.capacity() >= 4 * self.tails.len() {
            self.tails.shrink_to(2 * self.tails.len());
        }
    }
}

/// An ordered map from keys to `V`. See the [module docs](self).
pub(crate) struct KeyMap<V> {
    /// Never empty chunks, in key order.
    chunks: Vec<Chunk<V>>,
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
        let i = self
            .chunks
            .partition_point(|c| c.last_key().cmp_str(key) == Ordering::Less);
        let Some(chunk) = self.chunks.get(i) else {
            return Slot::Gap(i);
        };
        match chunk.search(key) {
            Ok(j) => Slot::Found(i, j),
            Err(0) => Slot::Gap(i),
            Err(j) => Slot::Inside(i, j),
        }
    }

    /// The value under `key`.
    pub(crate) fn get(&self, key: &str) -> Option<&V> {
        match self.locate(key) {
            Slot::Found(i, j) => self.chunks.get(i)?.values.get(j),
            Slot::Inside(..) | Slot::Gap(_) => None,
        }
    }

    /// Whether `key` has an entry.
    pub(crate) fn contains_key(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    /// Sets the value under `key`, returning the one it replaces.
    pub(crate) fn insert(&mut self, key: &str, value: V) -> Option<V> {
        match self.locate(key) {
            Slot::Found(i, j) => {
                let old = self.chunks.get_mut(i)?.values.get_mut(j)?;
                return Some(std::mem::replace(old, value));
            }
            Slot::Inside(i, j) => {
                let chunk = self.chunks.get_mut(i)?;
                if chunk.len() < CHUNK {
                    chunk.insert(j, key, value);
                } else if j >= CHUNK / 2 {
                    // Split where the key goes: the left part, at least half full, takes
                    // the key and whatever follows it in a run.
                    let right = chunk.split_off(j);
                    chunk.insert(j, key, value);
                    self.chunks.insert(i + 1, right);
                } else {
                    // In the first half: split in the middle, so no part starts nearly empty.
                    let right = chunk.split_off(CHUNK / 2);
                    chunk.insert(j, key, value);
                    self.chunks.insert(i + 1, right);
                }
            }
            Slot::Gap(i) => {
                let room = |c: Option<&Chunk<V>>| c.is_some_and(|c| c.len() < CHUNK);
                if i > 0 && room(self.chunks.get(i - 1)) {
                    if let Some(left) = self.chunks.get_mut(i - 1) {
                        left.insert(left.len(), key, value);
                    }
                } else if room(self.chunks.get(i)) {
                    if let Some(right) = self.chunks.get_mut(i) {
                        right.insert(0, key, value);
                    }
                } else {
                    // Most likely a run's next chunk: made whole at once, not grown.
                    self.chunks.insert(i, Chunk::one(key, value));
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
        let value = self.chunks.get_mut(i)?.remove(j)?;
        self.len -= 1;
        self.settle(i);
        Some(value)
    }

    /// After a removal from chunk `i`: drops it when empty, joins it to a neighbour when it is
    /// below a quarter full and the two fit in one, and otherwise gives back room it no longer
    /// needs.
    fn settle(&mut self, i: usize) {
        let len = self.chunks.get(i).map_or(0, Chunk::len);
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
            .map(Chunk::len);
        let right = self.chunks.get(i + 1).map(Chunk::len);
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
                    chunk.append(next);
                }
            }
        } else if let Some(chunk) = self.chunks.get_mut(i) {
            chunk.shrink();
        }
    }

    /// Every entry, in key order.
    pub(crate) fn iter(&self) -> Iter<'_, V> {
        self.range_from(Bound::Unbounded)
    }

    /// The entries from `start` on, in key order.
    pub(crate) fn range_from(&self, start: Bound<&str>) -> Iter<'_, V> {
        let (i, j) = match start {
            Bound::Unbounded => (0, 0),
            Bound::Included(key) | Bound::Excluded(key) => {
                // The chunk by its last key, then the entry.
                let past = matches!(start, Bound::Excluded(_));
                let i = self
                    .chunks
                    .partition_point(|c| match c.last_key().cmp_str(key) {
                        Ordering::Less => true,
                        Ordering::Equal => past,
                        Ordering::Greater => false,
                    });
                let j = self.chunks.get(i).map_or(0, |c| match c.search(key) {
                    Ok(j) if past => j + 1,
                    Ok(j) | Err(j) => j,
                });
                (i, j)
            }
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
    chunks: &'a [Chunk<V>],
    i: usize,
    j: usize,
}

impl<'a, V> Iterator for Iter<'a, V> {
    type Item = (Key<'a>, &'a V);

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let chunk = self.chunks.get(self.i)?;
            if let Some(v) = chunk.values.get(self.j) {
                let key = chunk.key(self.j);
                self.j += 1;
                return Some((key, v));
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

    /// Chunks are never empty nor over [`CHUNK`], their tails and values agree, keys ascend
    /// across them, `len` counts them.
    fn check<V>(map: &KeyMap<V>) {
        for c in &map.chunks {
            assert!(c.len() > 0 && c.len() <= CHUNK);
            assert_eq!(c.ends.len(), c.len());
            assert!(c.ends.windows(2).all(|w| w[0] <= w[1]), "tails in order");
            assert_eq!(c.ends.last().map(|&e| e as usize), Some(c.tails.len()));
            // (A `Vec` of zero-sized values has room for any number.)
            let values = std::mem::size_of::<V>() == 0 || c.values.capacity() <= CHUNK;
            assert!(values && c.ends.capacity() <= CHUNK, "no room past CHUNK");
        }
        let keys: Vec<String> = map.iter().map(|(k, _)| k.to_string()).collect();
        assert!(keys.windows(2).all(|w| w[0] < w[1]), "keys ascend");
        assert_eq!(keys.len(), map.len());
    }

    fn pairs<K: ToString, V: Copy>(it: impl Iterator<Item = (K, V)>) -> Vec<(String, V)> {
        it.map(|(k, v)| (k.to_string(), v)).collect()
    }

    /// Every tail byte of the map: what its keys cost beyond the chunks' prefixes.
    fn tail_bytes<V>(map: &KeyMap<V>) -> usize {
        map.chunks.iter().map(|c| c.tails.len()).sum()
    }

    #[test]
    fn behaves_as_a_btreemap_under_random_inserts_removals_and_ranges() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let mut map = KeyMap::default();
        let mut model: BTreeMap<String, u64> = BTreeMap::new();
        // Namespaces and names that share beginnings of different lengths, some of them
        // multi-byte characters that share their first byte (é and ê), so that prefixes
        // shorten and lengthen on character boundaries.
        let spaces = ["ns", "ns2", "né", "nê", "n"];
        for step in 0..60_000u64 {
            // A small key space, so that chunks fill, split, empty and join.
            let space = spaces[rng.next(spaces.len() as u64) as usize];
            let k = format!("/core/configmaps/{space}/{:03}", rng.next(300));
            match rng.next(10) {
                0..=4 => assert_eq!(map.insert(&k, step), model.insert(k, step)),
                5..=7 => assert_eq!(map.remove(&k), model.remove(&k)),
                8 => {
                    assert_eq!(map.get(&k), model.get(&k));
                    assert_eq!(map.contains_key(&k), model.contains_key(&k));
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
                map.insert(&format!("/core/configmaps/ns/cm-{w:03}-{i:06}"), ());
            }
        }
        check(&map);
        assert_eq!(map.len(), writers * each);
        // Each chunk holds one writer's `/core/configmaps/ns/cm-WWW-0000` once: the 31-byte
        // keys keep a few bytes each.
        assert!(
            tail_bytes(&map) <= 4 * map.len(),
            "{} tail bytes for {} keys",
            tail_bytes(&map),
            map.len()
        );
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
                map.insert(&format!("web-{i:05}"), i);
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
            map.insert(&format!("k{i:06}"), i);
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
        assert!(map.iter().next().is_none());
        assert_eq!(map.remove("k000000"), None);
    }

    #[test]
    fn ranges_start_at_chunk_edges_and_past_the_end() {
        let mut map = KeyMap::default();
        for i in 0..3 * CHUNK {
            map.insert(&format!("k{:04}", 2 * i), i);
        }
        assert_eq!(map.chunks.len(), 3);
        let first_of_second = map.chunks[1].key(0).to_string();
        let last_of_first = map.chunks[0].key(CHUNK - 1).to_string();
        let from = |b| map.range_from(b).next().map(|(k, _)| k.to_string());
        assert_eq!(
            from(Bound::Included(&first_of_second)),
            Some(first_of_second.clone())
        );
        assert_eq!(
            from(Bound::Excluded(&last_of_first)),
            Some(first_of_second.clone())
        );
        // A key between two chunks, an odd number: the next even one.
        assert_eq!(from(Bound::Included("k0127")), Some("k0128".into()));
        assert_eq!(from(Bound::Excluded("k9999")), None);
        assert_eq!(from(Bound::Included("")), Some("k0000".into()));
        assert_eq!(map.range_from(Bound::Unbounded).count(), 3 * CHUNK);
    }

    #[test]
    fn keys_compare_and_match_beginnings_as_whole_strings() {
        let pieces = [("", ""), ("ab", ""), ("ab", "c"), ("", "abc"), ("né", "x")];
        let others = [
            "", "a", "ab", "abc", "abd", "abcd", "b", "n", "né", "nê", "néx", "néxy",
        ];
        for (prefix, tail) in pieces {
            let key = Key { prefix, tail };
            let whole = format!("{prefix}{tail}");
            assert_eq!(key.to_string(), whole);
            assert_eq!(&*key.to_arc(), whole.as_str());
            for other in others {
                assert_eq!(
                    key.cmp_str(other),
                    whole.as_str().cmp(other),
                    "{whole} vs {other}"
                );
                assert_eq!(
                    key.starts_with(other),
                    whole.starts_with(other),
                    "{whole} {other}"
                );
            }
        }
        let whole = Key::from("néx");
        assert_eq!(whole.to_string(), "néx");
        assert_eq!(whole.cmp_str("néx"), Ordering::Equal);
        assert!(whole.starts_with("né") && !whole.starts_with("nê"));
        assert_eq!(
            shared_len("né", "nê"),
            1,
            "stops before the split character"
        );
        assert_eq!(shared_len("abc", "abd"), 2);
        assert_eq!(shared_len("", "abd"), 0);
    }
}
