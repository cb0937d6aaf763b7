//! [`Store`]: the indexed cache one informer fills and any number of readers query.
//!
//! # Guarantees
//! - Readers never see a half-applied relist: a relist builds a new map off to the side and
//!   swaps it in under one write lock ([`Store::is_synced`] turns true only after the first swap).
//! - Per key, the cache never goes back in time: an update whose resourceVersion is older than
//!   the cached one is ignored, so a write the [`crate::client::CachedClient`] recorded is not
//!   undone by the watch event that precedes it, and a deletion it recorded stays deleted
//!   until the watch passes it.
//! - Each object is held once, packed (see `packed/`), smaller than its JSON.
//! - Objects are shared, not copied per reader: a bounded cache of decoded objects (see
//!   `decoded.rs`) gives every reader of the same version of a hot object the same `Arc<K>`.
//!   A cold read decodes once and caches; the `Arc` decoded for a watch event or returned by
//!   a `CachedClient` write is cached as the entry is applied, so the read that follows gets
//!   that very allocation.
//! - The decoded cache never serves a stale object: a slot is used only for the entry it was
//!   decoded from (or one with the same non-zero resourceVersion); writes replace or drop the
//!   key's slot under the store's write lock, and a relist keeps only unchanged versions.
//! - The decoded cache never holds more than its capacity
//!   ([`InformerConfig::decoded_cache`](crate::informer::InformerConfig::decoded_cache),
//!   default 1024; 0 turns it off and every read decodes its own copy).
//!
//! # Caveats
//! - A read of an object not in the decoded cache decodes it (about a microsecond for a small
//!   object). `list` shares what is cached and caches the rest only into free slots, so a
//!   full listing does not push out hot objects; two concurrent cold listings each decode.

use super::{Map, Set};
use std::marker::PhantomData;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, MutexGuard, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio::sync::watch;

use super::ObjectKey;
use super::decoded::{Decoded, Insert};
use super::packed::{DecodeError, Dictionary};

/// An index function: the values an object is listed under.
pub(crate) type IndexFn<K> = Arc<dyn Fn(&K) -> Vec<String> + Send + Sync>;

/// A cheap-to-clone reader of an informer's cache.
pub struct Store<K> {
    shared: Arc<Shared<K>>,
}

impl<K> Clone for Store<K> {
    fn clone(&self) -> Self {
        Store {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<K> std::fmt::Debug for Store<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("len", &self.read().entries.len())
            .field("decoded", &self.shared.decoded.len())
            .field("synced", &*self.shared.synced.borrow())
            .finish()
    }
}

struct Shared<K> {
    state: RwLock<State<K>>,
    /// Decoded objects of recently read or changed entries. Lock order: `state`, then a
    /// shard of `decoded`; never the other way round.
    decoded: Decoded<K>,
    dict: Dictionary,
    /// Where objects are packed before their entry is allocated at its final size.
    scratch: std::sync::Mutex<Vec<u8>>,
    synced: watch::Sender<bool>,
    /// The highest resourceVersion a `CachedClient` recorded from a write's answer: while
    /// the watch is behind it, watch events may be the echoes of those writes
    /// ([`Store::echo`]).
    recorded: AtomicU64,
    _kind: PhantomData<fn() -> K>,
}

/// One cached object in a single allocation: its key, resourceVersion and packed form.
///
/// Layout: varint key length, the key (`ns/name`), varint resourceVersion, packed object.
/// Hashing and equality use the key only, and `Borrow<[u8]>` exposes its bytes, so a
/// `Set<Entry>` is the whole map with no separate key allocation. Lookups go by the key's
/// bytes (`key.as_bytes()`): comparing a probed entry then costs no UTF-8 check.
#[derive(Clone)]
pub(crate) struct Entry(Arc<[u8]>);

fn read_varint(b: &[u8]) -> (u64, usize) {
    let mut n = 0u64;
    for (i, byte) in b.iter().enumerate().take(10) {
        n |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return (n, i + 1);
        }
    }
    (n, b.len().min(10))
}

fn write_varint(out: &mut Vec<u8>, mut n: u64) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

impl Entry {
    pub(super) fn new(key: &str, rv: u64, packed: &[u8]) -> Entry {
        let mut header = Vec::with_capacity(key.len() + 12);
        write_varint(&mut header, key.len() as u64);
        header.extend_from_slice(key.as_bytes());
        write_varint(&mut header, rv);
        // Both halves have exact lengths, so the Arc is allocated once at its final size.
        Entry(header.iter().chain(packed).copied().collect())
    }

    fn key_range(&self) -> (usize, usize) {
        let (len, n) = read_varint(&self.0);
        let end = (n + usize::try_from(len).unwrap_or(0)).min(self.0.len());
        (n, end)
    }

    /// The key, `ns/name` or `name`.
    pub(crate) fn key(&self) -> &str {
        // Written from a `&str` in `Entry::new`, so always UTF-8.
        std::str::from_utf8(self.key_bytes()).unwrap_or_default()
    }

    /// The key's bytes: what the entry hashes, compares and is looked up by.
    pub(crate) fn key_bytes(&self) -> &[u8] {
        let (start, end) = self.key_range();
        &self.0[start..end]
    }

    /// The resourceVersion (0 when not numeric).
    pub(crate) fn rv(&self) -> u64 {
        let (_, end) = self.key_range();
        read_varint(&self.0[end..]).0
    }

    /// Whether `self` and `other` are the same allocation (the same stored version).
    pub(crate) fn ptr_eq(&self, other: &Entry) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// The entry's size: its key, resourceVersion and packed object.
    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }

    /// The packed object.
    fn packed(&self) -> &[u8] {
        let (_, end) = self.key_range();
        let (_, n) = read_varint(&self.0[end..]);
        &self.0[end + n..]
    }
}

impl std::hash::Hash for Entry {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.key_bytes().hash(state);
    }
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        self.key_bytes() == other.key_bytes()
    }
}

impl Eq for Entry {}

impl std::borrow::Borrow<[u8]> for Entry {
    fn borrow(&self) -> &[u8] {
        self.key_bytes()
    }
}

struct State<K> {
    entries: Set<Entry>,
    /// The sum of the entries' sizes ([`Entry::len`]).
    bytes: usize,
    indexes: Map<String, Index<K>>,
    /// Deletions recorded by a writer ahead of the watch: key → resourceVersion of the delete.
    tombstones: Map<Box<str>, u64>,
}

struct Index<K> {
    f: IndexFn<K>,
    by_value: Map<String, Set<Box<str>>>,
    by_key: Map<Box<str>, Vec<String>>,
}

impl<K> Index<K> {
    fn insert(&mut self, key: &str, values: Vec<String>) {
        // Most updates (a status, a finalizer) leave the indexed values as they were.
        if self.by_key.get(key).is_some_and(|old| *old == values) {
            return;
        }
        self.remove(key);
        if values.is_empty() {
            return;
        }
        for v in &values {
            self.by_value
                .entry(v.clone())
                .or_default()
                .insert(key.into());
        }
        self.by_key.insert(key.into(), values);
    }

    fn remove(&mut self, key: &str) {
        if let Some(old) = self.by_key.remove(key) {
            for v in old {
                if let Some(set) = self.by_value.get_mut(&v) {
                    set.remove(key);
                    if set.is_empty() {
                        self.by_value.remove(&v);
                    }
                }
            }
        }
    }
}

/// An object ready for the cache: packed, and decoded once to check it fits `K`. Applying it
/// puts `obj` in the decoded cache, so the readers that follow share this allocation.
pub(crate) struct Packed<K> {
    pub(crate) entry: Entry,
    pub(crate) obj: Arc<K>,
    /// The entry has the key and resourceVersion but no packed bytes: when the object was
    /// parsed the cache held this version or a newer one ([`Store::pack_event`]). `apply`
    /// packs it after all should that no longer hold, so hollow bytes are never stored.
    pub(crate) hollow: bool,
}

impl<K> Packed<K> {
    /// Version `rv` of `key`, whose object is `obj`, left unpacked (see `hollow`).
    fn hollow(key: &str, rv: u64, obj: Arc<K>) -> Self {
        Packed {
            entry: Entry::new(key, rv, &[]),
            obj,
            hollow: true,
        }
    }
}

/// An object of a list being built: packed, with its index values computed at once so the
/// decoded object need not be kept until the list is complete.
pub(crate) struct Listed {
    entry: Entry,
    index: Vec<(String, Vec<String>)>,
}

/// A full list being built, swapped into the store when complete.
#[derive(Default)]
pub(crate) struct ListBuffer {
    entries: Set<Entry>,
    index: Map<Box<str>, Vec<(String, Vec<String>)>>,
}

impl ListBuffer {
    /// Adds a listed object.
    pub(crate) fn push(&mut self, item: Listed) {
        if !item.index.is_empty() {
            self.index.insert(item.entry.key().into(), item.index);
        }
        self.entries.replace(item.entry);
    }
}

/// What applying a change did.
pub(crate) enum Outcome<K> {
    /// The cache changed: the entry it replaced or removed, and that entry's decoded object
    /// when the decoded cache held it (the `Arc` its readers were given).
    Changed(Option<Entry>, Option<Arc<K>>),
    /// The cache already held this version or a newer one; when it held this very version
    /// and had it decoded, the `Arc` its readers share.
    Stale(Option<Arc<K>>),
}

/// Parses a resourceVersion for ordering; opaque versions order as 0 (always applied).
pub(crate) fn parse_rv(rv: Option<&str>) -> u64 {
    rv.and_then(|s| s.parse().ok()).unwrap_or(0)
}

impl<K> Store<K> {
    /// An empty store that keeps up to `decoded_capacity` decoded objects for its readers
    /// to share (0: every read decodes).
    pub(crate) fn new(decoded_capacity: usize) -> Store<K> {
        Store {
            shared: Arc::new(Shared {
                state: RwLock::new(State {
                    entries: Set::default(),
                    bytes: 0,
                    indexes: Map::default(),
                    tombstones: Map::default(),
                }),
                decoded: Decoded::new(decoded_capacity),
                dict: Dictionary::default(),
                scratch: std::sync::Mutex::new(Vec::new()),
                synced: watch::Sender::new(false),
                recorded: AtomicU64::new(0),
                _kind: PhantomData,
            }),
        }
    }

    fn read(&self) -> RwLockReadGuard<'_, State<K>> {
        self.shared
            .state
            .read()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> RwLockWriteGuard<'_, State<K>> {
        self.shared
            .state
            .write()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The keys of every cached object.
    pub fn keys(&self) -> Vec<ObjectKey> {
        self.read()
            .entries
            .iter()
            .map(|e| ObjectKey::parse(e.key()))
            .collect()
    }

    /// The bytes of the packed entries (each one's key, resourceVersion and packed object),
    /// not counting the decoded objects, the indexes or the table that holds the entries.
    pub fn packed_bytes(&self) -> usize {
        self.read().bytes
    }

    /// How many objects are cached.
    pub fn len(&self) -> usize {
        self.read().entries.len()
    }

    /// Whether the cache is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How many decoded objects are held for readers to share (at most
    /// [`Store::decoded_capacity`]).
    pub fn decoded_len(&self) -> usize {
        self.shared.decoded.len()
    }

    /// The most decoded objects held for readers to share
    /// ([`InformerConfig::decoded_cache`](crate::informer::InformerConfig::decoded_cache)).
    pub fn decoded_capacity(&self) -> usize {
        self.shared.decoded.capacity()
    }

    /// Whether the first full list has been swapped in.
    pub fn is_synced(&self) -> bool {
        *self.shared.synced.borrow()
    }

    /// Waits until the first full list has been swapped in.
    pub async fn wait_until_synced(&self) {
        let mut rx = self.shared.synced.subscribe();
        // The sender lives in `self`, so the channel cannot close while we wait.
        let _ = rx.wait_for(|synced| *synced).await;
    }

    /// The entry under `key`.
    pub(crate) fn entry(&self, key: &str) -> Option<Entry> {
        self.read().entries.get(key.as_bytes()).cloned()
    }

    /// Marks the store synced (after the first swap).
    fn mark_synced(&self) {
        self.shared.synced.send_if_modified(|synced| {
            let changed = !*synced;
            *synced = true;
            changed
        });
    }
}

impl<K: DeserializeOwned> Store<K> {
    fn decode(&self, entry: &Entry) -> Option<Arc<K>> {
        match self.shared.dict.decode::<K>(entry.packed()) {
            Ok(obj) => Some(Arc::new(obj)),
            Err(e) => {
                tracing::error!(error = %e, key = entry.key(), "a cached object no longer decodes");
                None
            }
        }
    }

    /// Decodes a cached entry, or returns the decoded object readers of it share.
    pub(crate) fn decode_entry(&self, entry: &Entry) -> Option<Arc<K>> {
        match self.shared.decoded.get(entry) {
            Some(obj) => Some(obj),
            None => self.decode(entry),
        }
    }

    /// The shared decoded object of `entry`: from the decoded cache, or decoded now (outside
    /// every lock) and cached.
    fn shared_obj(&self, entry: &Entry, hit: Option<Arc<K>>, room_only: bool) -> Option<Arc<K>> {
        if hit.is_some() {
            return hit;
        }
        let obj = self.decode(entry)?;
        Some(
            self.shared
                .decoded
                .insert(entry, obj, Insert::Reader { room_only }),
        )
    }

    /// The object under `key`. Readers of the same version share one `Arc` while it stays
    /// in the decoded cache.
    pub fn get(&self, key: &ObjectKey) -> Option<Arc<K>> {
        let (entry, hit) = {
            let state = self.read();
            let entry = state.entries.get(key.as_str().as_bytes())?.clone();
            let hit = self.shared.decoded.get(&entry);
            (entry, hit)
        };
        self.shared_obj(&entry, hit, false)
    }

    /// Every cached object, in no particular order. Objects in the decoded cache are shared;
    /// the others are decoded, and cached only while the decoded cache has free room, so
    /// listing everything does not push out the objects controllers read again and again.
    pub fn list(&self) -> Vec<Arc<K>> {
        let all: Vec<(Entry, Option<Arc<K>>)> = {
            let state = self.read();
            state
                .entries
                .iter()
                .map(|e| (e.clone(), self.shared.decoded.get(e)))
                .collect()
        };
        all.into_iter()
            .filter_map(|(e, hit)| self.shared_obj(&e, hit, true))
            .collect()
    }

    /// The objects the index `index` lists under `value` (none if there is no such index).
    pub fn by_index(&self, index: &str, value: &str) -> Vec<Arc<K>> {
        let all: Vec<(Entry, Option<Arc<K>>)> = {
            let state = self.read();
            let Some(set) = state.indexes.get(index).and_then(|i| i.by_value.get(value)) else {
                return Vec::new();
            };
            set.iter()
                .filter_map(|k| state.entries.get(k.as_bytes()))
                .map(|e| (e.clone(), self.shared.decoded.get(e)))
                .collect()
        };
        all.into_iter()
            .filter_map(|(e, hit)| self.shared_obj(&e, hit, false))
            .collect()
    }

    /// The keys the index `index` lists under `value`.
    pub fn keys_by_index(&self, index: &str, value: &str) -> Vec<ObjectKey> {
        let state = self.read();
        state
            .indexes
            .get(index)
            .and_then(|i| i.by_value.get(value))
            .map(|set| set.iter().map(|k| ObjectKey::parse(k)).collect())
            .unwrap_or_default()
    }

    /// Packs a JSON object for this store. Fails if it does not decode into `K`.
    pub(crate) fn pack(&self, value: &Value) -> Result<Packed<K>, DecodeError>
    where
        K: kube::Resource,
    {
        let mut scratch = self.scratch();
        self.shared.dict.encode_into(value, &mut scratch);
        let obj: K = self.shared.dict.decode(&scratch)?;
        Ok(Self::packed(obj, &scratch))
    }

    /// Packs an object already parsed into `K`, keeping it as the decoded object: no JSON
    /// value in between and no decode of the packed bytes.
    pub(crate) fn pack_typed(&self, obj: K) -> Result<Packed<K>, super::typed::EncodeError>
    where
        K: kube::Resource + serde::Serialize,
    {
        let mut scratch = self.scratch();
        self.shared.dict.encode_typed(&obj, &mut scratch)?;
        Ok(Self::packed(obj, &scratch))
    }

    /// Like [`Store::pack_typed`] for a watch event or a write's answer, except that an
    /// object the cache already holds at this resourceVersion or a newer one (or deleted
    /// after it) is left unpacked: applying it changes nothing, so packing it would be waste.
    /// The watch event of each write a `CachedClient` recorded is such an object.
    pub(crate) fn pack_event(&self, obj: K) -> Result<Packed<K>, super::typed::EncodeError>
    where
        K: kube::Resource + serde::Serialize,
    {
        let rv = parse_rv(obj.meta().resource_version.as_deref());
        let key = ObjectKey::of(&obj);
        if rv != 0 && self.holds_at_least(key.as_str(), rv) {
            return Ok(Packed::hollow(key.as_str(), rv, Arc::new(obj)));
        }
        self.pack_typed(obj)
    }

    /// Notes that a `CachedClient` applied version `rv` of an object from a write's answer.
    pub(crate) fn recorded(&self, rv: u64) {
        self.shared.recorded.fetch_max(rv, Ordering::Relaxed);
    }

    /// Whether a watch that has seen up to resourceVersion `watched` may still bring back the
    /// echo of a recorded write (see [`Store::echo`]).
    pub(crate) fn expects_echoes(&self, watched: u64) -> bool {
        self.shared.recorded.load(Ordering::Relaxed) > watched
    }

    /// A watch event's object as the cache already holds it: when version `rv` of `key` is
    /// the cached one and its decoded object is at hand, the event (typically the echo of a
    /// write a `CachedClient` recorded) needs no parsing. Returns that object, hollow:
    /// applying it changes nothing, and should the cache move back before it is applied, it
    /// is packed from the shared object, which is this very version.
    pub(crate) fn echo(&self, key: &str, rv: u64) -> Option<Packed<K>> {
        if rv == 0 {
            return None;
        }
        let obj = {
            let state = self.read();
            let cur = state.entries.get(key.as_bytes())?;
            if cur.rv() != rv {
                return None;
            }
            self.shared.decoded.get(cur)?
        };
        Some(Packed::hollow(key, rv, obj))
    }

    /// Whether applying version `rv` of `key` would be stale (see [`Store::apply`]).
    fn holds_at_least(&self, key: &str, rv: u64) -> bool {
        let state = self.read();
        Self::is_stale(&state, key, rv)
    }

    fn is_stale(state: &State<K>, key: &str, rv: u64) -> bool {
        rv != 0
            && (state.tombstones.get(key).is_some_and(|&dead| rv <= dead)
                || state
                    .entries
                    .get(key.as_bytes())
                    .is_some_and(|cur| cur.rv() != 0 && rv <= cur.rv()))
    }

    /// `packed` with its bytes, when it was left hollow.
    fn filled(&self, packed: &Packed<K>) -> Result<Packed<K>, super::typed::EncodeError>
    where
        K: serde::Serialize,
    {
        let mut scratch = self.scratch();
        self.shared.dict.encode_typed(&*packed.obj, &mut scratch)?;
        Ok(Packed {
            entry: Entry::new(packed.entry.key(), packed.entry.rv(), &scratch),
            obj: Arc::clone(&packed.obj),
            hollow: false,
        })
    }

    /// The store's packing buffer, emptied.
    fn scratch(&self) -> MutexGuard<'_, Vec<u8>> {
        let mut scratch = self
            .shared
            .scratch
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        scratch.clear();
        scratch
    }

    /// `obj` with its entry: its key and resourceVersion, and the packed `bytes`.
    fn packed(obj: K, bytes: &[u8]) -> Packed<K>
    where
        K: kube::Resource,
    {
        let key = ObjectKey::of(&obj);
        let rv = parse_rv(obj.meta().resource_version.as_deref());
        Packed {
            entry: Entry::new(key.as_str(), rv, bytes),
            obj: Arc::new(obj),
            hollow: false,
        }
    }

    /// Keeps what a list being built needs of `packed`, dropping the decoded object.
    pub(crate) fn listed(&self, packed: Packed<K>) -> Listed
    where
        K: serde::Serialize,
    {
        // Listed objects are packed by `pack_typed`, never hollow; should one be, fill it.
        let packed = if packed.hollow {
            match self.filled(&packed) {
                Ok(full) => full,
                Err(e) => {
                    tracing::warn!(error = %e, key = packed.entry.key(), "packing a listed object failed");
                    packed
                }
            }
        } else {
            packed
        };
        let index = {
            let state = self.read();
            state
                .indexes
                .iter()
                .map(|(n, i)| (n.clone(), (i.f)(&packed.obj)))
                .collect()
        };
        Listed {
            entry: packed.entry,
            index,
        }
    }

    /// Registers (or replaces) the index `name`, indexing every cached object now.
    pub(crate) fn add_index(&self, name: &str, f: IndexFn<K>) {
        let entries: Vec<Entry> = self.read().entries.iter().cloned().collect();
        let mut index = Index {
            f: Arc::clone(&f),
            by_value: Map::default(),
            by_key: Map::default(),
        };
        for entry in &entries {
            if let Some(obj) = self.decode_entry(entry) {
                index.insert(entry.key(), f(&obj));
            }
        }
        let mut state = self.write();
        // Objects changed between the snapshot and now are re-indexed by their writer,
        // which indexes with every registered function under the same lock.
        for entry in &entries {
            if !state.entries.contains(entry.key_bytes()) {
                index.remove(entry.key());
            }
        }
        state.indexes.insert(name.to_string(), index);
    }

    /// Applies a created or updated object unless the cache holds a newer version. When
    /// applied, `packed.obj` becomes the decoded object readers of this version share.
    pub(crate) fn apply(&self, packed: &Packed<K>) -> Outcome<K>
    where
        K: serde::Serialize,
    {
        let key = packed.entry.key();
        let rv = packed.entry.rv();
        let values = if packed.hollow {
            Vec::new()
        } else {
            self.index_values(&packed.obj)
        };
        let mut state = self.write();
        if let Some(&dead) = state.tombstones.get(key) {
            if rv != 0 && rv <= dead {
                return Outcome::Stale(None);
            }
            state.tombstones.remove(key);
        }
        if let Some(cur) = state.entries.get(key.as_bytes())
            && rv != 0
            && cur.rv() != 0
            && rv <= cur.rv()
        {
            let shared = if rv == cur.rv() {
                self.shared.decoded.get(cur)
            } else {
                None
            };
            return Outcome::Stale(shared);
        }
        if packed.hollow {
            // The cache moved back since the object was parsed (a relist swapped in an older
            // list): pack it now, so that hollow bytes are never stored.
            drop(state);
            return match self.filled(packed) {
                Ok(full) => self.apply(&full),
                Err(e) => {
                    tracing::warn!(error = %e, key, "packing an object failed");
                    Outcome::Stale(None)
                }
            };
        }
        let old = state.entries.replace(packed.entry.clone());
        state.bytes = state.bytes + packed.entry.len() - old.as_ref().map_or(0, Entry::len);
        let old_obj = old.as_ref().and_then(|e| self.shared.decoded.get(e));
        // Under the write lock, so no reader can see the entry before its decoded object.
        self.shared
            .decoded
            .insert(&packed.entry, Arc::clone(&packed.obj), Insert::Writer);
        for (name, v) in values {
            if let Some(index) = state.indexes.get_mut(&name) {
                index.insert(key, v);
            }
        }
        Outcome::Changed(old, old_obj)
    }

    /// Removes `key`, as of resourceVersion `rv`; with `tombstone`, remembers the deletion so
    /// older updates arriving later do not bring the object back.
    pub(crate) fn delete(&self, key: &str, rv: u64, tombstone: bool) -> Outcome<K> {
        let mut state = self.write();
        if tombstone && rv != 0 {
            state.tombstones.insert(key.into(), rv);
        }
        if let Some(cur) = state.entries.get(key.as_bytes())
            && rv != 0
            && cur.rv() != 0
            && rv < cur.rv()
        {
            return Outcome::Stale(None);
        }
        let Some(old) = state.entries.take(key.as_bytes()) else {
            return Outcome::Stale(None);
        };
        state.bytes -= old.len();
        let old_obj = self.shared.decoded.get(&old);
        self.shared.decoded.remove(key);
        for index in state.indexes.values_mut() {
            index.remove(key);
        }
        Outcome::Changed(Some(old), old_obj)
    }

    /// Forgets tombstones the watch has passed.
    pub(crate) fn observed(&self, rv: u64) {
        if rv == 0 {
            return;
        }
        let has = !self.read().tombstones.is_empty();
        if has {
            self.write().tombstones.retain(|_, dead| *dead > rv);
        }
    }

    /// Swaps in a full list taken at resourceVersion `list_rv`, keeping writes recorded
    /// after it, then marks the store synced.
    ///
    /// Returns the entries that were cached and are absent from the new contents: objects
    /// deleted while the informer was not watching, which its subscribers must hear of.
    pub(crate) fn replace(&self, list: ListBuffer, list_rv: u64) -> Vec<Entry> {
        let ListBuffer {
            mut entries,
            index: listed_values,
        } = list;
        let fns: Vec<(String, IndexFn<K>)> = self
            .read()
            .indexes
            .iter()
            .map(|(n, i)| (n.clone(), Arc::clone(&i.f)))
            .collect();
        let mut indexes: Map<String, Index<K>> = fns
            .into_iter()
            .map(|(n, f)| {
                (
                    n,
                    Index {
                        f,
                        by_value: Map::default(),
                        by_key: Map::default(),
                    },
                )
            })
            .collect();
        if !indexes.is_empty() {
            for entry in &entries {
                let listed = listed_values.get(entry.key());
                let mut decoded: Option<Arc<K>> = None;
                for (name, index) in &mut indexes {
                    match listed.and_then(|l| l.iter().find(|(n, _)| n == name)) {
                        Some((_, v)) => index.insert(entry.key(), v.clone()),
                        None => {
                            // Registered while the list was being built: index it now.
                            if decoded.is_none() {
                                decoded = self.decode_entry(entry);
                            }
                            if let Some(obj) = &decoded {
                                index.insert(entry.key(), (index.f)(obj));
                            }
                        }
                    }
                }
            }
        }
        drop(listed_values);
        let (registered, vanished) = {
            let mut state = self.write();
            // Writes recorded ahead of the watch that the list has not caught up with.
            let newer: Vec<Entry> = state
                .entries
                .iter()
                .filter(|e| list_rv != 0 && e.rv() > list_rv)
                .cloned()
                .collect();
            for e in newer {
                let keep = entries
                    .get(e.key_bytes())
                    .is_none_or(|listed| listed.rv() < e.rv());
                if keep {
                    if !indexes.is_empty()
                        && let Some(obj) = self.decode_entry(&e)
                    {
                        for index in indexes.values_mut() {
                            index.insert(e.key(), (index.f)(&obj));
                        }
                    }
                    entries.replace(e);
                }
            }
            state
                .tombstones
                .retain(|_, dead| list_rv == 0 || *dead > list_rv);
            for (k, dead) in &state.tombstones {
                if entries.get(k.as_bytes()).is_some_and(|e| e.rv() <= *dead) {
                    entries.remove(k.as_bytes());
                    for index in indexes.values_mut() {
                        index.remove(k);
                    }
                }
            }
            let vanished: Vec<Entry> = state
                .entries
                .iter()
                .filter(|e| !entries.contains(e.key_bytes()))
                .cloned()
                .collect();
            state.entries = entries;
            state.bytes = state.entries.iter().map(Entry::len).sum();
            // Decoded objects stay shared only where the new entry is the same version.
            self.shared
                .decoded
                .retain(|key| state.entries.get(key).cloned());
            // Indexes registered while the list was being built are rebuilt below.
            let registered: Vec<(String, IndexFn<K>)> = state
                .indexes
                .iter()
                .filter(|(n, _)| !indexes.contains_key(*n))
                .map(|(n, i)| (n.clone(), Arc::clone(&i.f)))
                .collect();
            state.indexes = indexes;
            (registered, vanished)
        };
        for (name, f) in registered {
            self.add_index(&name, f);
        }
        self.mark_synced();
        vanished
    }

    fn index_values(&self, obj: &K) -> Vec<(String, Vec<String>)> {
        self.read()
            .indexes
            .iter()
            .map(|(n, i)| (n.clone(), (i.f)(obj)))
            .collect()
    }
}

#[cfg(test)]
mod tests;
