//! [`Store`]: the indexed cache one informer fills and any number of readers query.
//!
//! # Guarantees
//! - Readers never see a half-applied relist: a relist builds a new map off to the side and
//!   swaps it in under one write lock ([`Store::is_synced`] turns true only after the first swap).
//! - Per key, the cache never goes back in time: an update whose resourceVersion is older than
//!   the cached one is ignored, so a write the [`crate::client::CachedClient`] recorded is not
//!   undone by the watch event that precedes it, and a deletion it recorded stays deleted
//!   until the watch passes it.
//! - Each object is held once, packed (see `packed.rs`), smaller than its JSON.
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
    _kind: PhantomData<fn() -> K>,
}

/// One cached object in a single allocation: its key, resourceVersion and packed form.
///
/// Layout: varint key length, the key (`ns/name`), varint resourceVersion, packed object.
/// Hashing and equality use the key only, and `Borrow<str>` exposes it, so a `Set<Entry>`
/// is the whole map with no separate key allocation.
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
        let (start, end) = self.key_range();
        // Written from a `&str` in `Entry::new`, so always UTF-8.
        std::str::from_utf8(&self.0[start..end]).unwrap_or_default()
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

    /// The packed object.
    fn packed(&self) -> &[u8] {
        let (_, end) = self.key_range();
        let (_, n) = read_varint(&self.0[end..]);
        &self.0[end + n..]
    }
}

impl std::hash::Hash for Entry {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.key().hash(state);
    }
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}

impl Eq for Entry {}

impl std::borrow::Borrow<str> for Entry {
    fn borrow(&self) -> &str {
        self.key()
    }
}

struct State<K> {
    entries: Set<Entry>,
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
                    indexes: Map::default(),
                    tombstones: Map::default(),
                }),
                decoded: Decoded::new(decoded_capacity),
                dict: Dictionary::default(),
                scratch: std::sync::Mutex::new(Vec::new()),
                synced: watch::Sender::new(false),
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
        self.read().entries.get(key).cloned()
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
            let entry = state.entries.get(&*key.to_boxed())?.clone();
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
                .filter_map(|k| state.entries.get(&**k))
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
        let key = ObjectKey::of(&obj).to_string();
        let rv = parse_rv(obj.meta().resource_version.as_deref());
        Packed {
            entry: Entry::new(&key, rv, bytes),
            obj: Arc::new(obj),
        }
    }

    /// Keeps what a list being built needs of `packed`, dropping the decoded object.
    pub(crate) fn listed(&self, packed: Packed<K>) -> Listed {
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
            if !state.entries.contains(entry.key()) {
                index.remove(entry.key());
            }
        }
        state.indexes.insert(name.to_string(), index);
    }

    /// Applies a created or updated object unless the cache holds a newer version. When
    /// applied, `packed.obj` becomes the decoded object readers of this version share.
    pub(crate) fn apply(&self, packed: &Packed<K>) -> Outcome<K> {
        let values = self.index_values(&packed.obj);
        let key = packed.entry.key();
        let rv = packed.entry.rv();
        let mut state = self.write();
        if let Some(&dead) = state.tombstones.get(key) {
            if rv != 0 && rv <= dead {
                return Outcome::Stale(None);
            }
            state.tombstones.remove(key);
        }
        if let Some(cur) = state.entries.get(key)
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
        let old = state.entries.replace(packed.entry.clone());
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
        if let Some(cur) = state.entries.get(key)
            && rv != 0
            && cur.rv() != 0
            && rv < cur.rv()
        {
            return Outcome::Stale(None);
        }
        let Some(old) = state.entries.take(key) else {
            return Outcome::Stale(None);
        };
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
                    .get(e.key())
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
                if entries.get(&**k).is_some_and(|e| e.rv() <= *dead) {
                    entries.remove(&**k);
                    for index in indexes.values_mut() {
                        index.remove(k);
                    }
                }
            }
            let vanished: Vec<Entry> = state
                .entries
                .iter()
                .filter(|e| !entries.contains(e.key()))
                .cloned()
                .collect();
            state.entries = entries;
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
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use serde_json::json;
    use std::collections::{HashMap, HashSet};

    fn cm(name: &str, rv: u64, src: &str) -> Value {
        json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "ns", "resourceVersion": rv.to_string(),
                         "labels": {"src": src}},
            "data": {"k": "v"},
        })
    }

    fn by_src(cm: &ConfigMap) -> Vec<String> {
        cm.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("src").cloned())
            .into_iter()
            .collect()
    }

    #[test]
    fn an_entry_is_found_by_its_key_and_keeps_its_version() {
        let e = Entry::new("ns/a", 300, b"xyz");
        assert_eq!((e.key(), e.rv(), e.packed()), ("ns/a", 300, &b"xyz"[..]));
        let set: HashSet<Entry> = [e, Entry::new("b", 0, b"")].into_iter().collect();
        assert!(set.contains("ns/a") && set.contains("b") && !set.contains("ns/b"));
    }

    #[test]
    fn an_older_version_never_replaces_a_newer_one() {
        let store = Store::<ConfigMap>::new(16);
        let p = store.pack(&cm("a", 5, "x")).expect("packs");
        assert!(matches!(store.apply(&p), Outcome::Changed(..)));
        let old = store.pack(&cm("a", 4, "y")).expect("packs");
        assert!(matches!(store.apply(&old), Outcome::Stale(_)));
        let got = store
            .get(&ObjectKey::namespaced("ns", "a"))
            .expect("cached");
        assert_eq!(got.metadata.resource_version.as_deref(), Some("5"));
    }

    #[test]
    fn a_recorded_deletion_keeps_older_updates_out_until_the_watch_passes_it() {
        let store = Store::<ConfigMap>::new(16);
        store.apply(&store.pack(&cm("a", 5, "x")).expect("packs"));
        assert!(matches!(
            store.delete("ns/a", 7, true),
            Outcome::Changed(..)
        ));
        assert!(matches!(
            store.apply(&store.pack(&cm("a", 6, "x")).expect("packs")),
            Outcome::Stale(_)
        ));
        store.observed(7);
        assert!(matches!(
            store.apply(&store.pack(&cm("a", 8, "x")).expect("packs")),
            Outcome::Changed(..)
        ));
    }

    #[test]
    fn indexes_follow_updates_deletes_and_swaps() {
        let store = Store::<ConfigMap>::new(16);
        store.add_index("src", Arc::new(by_src));
        store.apply(&store.pack(&cm("a", 1, "x")).expect("packs"));
        store.apply(&store.pack(&cm("b", 2, "x")).expect("packs"));
        assert_eq!(store.by_index("src", "x").len(), 2);
        store.apply(&store.pack(&cm("a", 3, "y")).expect("packs"));
        assert_eq!(store.by_index("src", "x").len(), 1);
        assert_eq!(store.by_index("src", "y").len(), 1);
        store.delete("ns/b", 4, false);
        assert!(store.by_index("src", "x").is_empty());
        let mut list = ListBuffer::default();
        list.push(store.listed(store.pack(&cm("c", 9, "z")).expect("packs")));
        store.replace(list, 9);
        assert!(store.by_index("src", "y").is_empty());
        assert_eq!(
            store.keys_by_index("src", "z"),
            vec![ObjectKey::namespaced("ns", "c")]
        );
        assert!(store.is_synced());
    }

    #[test]
    fn a_swap_reports_the_objects_that_vanished_while_not_watching() {
        let store = Store::<ConfigMap>::new(16);
        let mut list = ListBuffer::default();
        list.push(store.listed(store.pack(&cm("a", 1, "x")).expect("packs")));
        list.push(store.listed(store.pack(&cm("b", 2, "x")).expect("packs")));
        assert!(store.replace(list, 2).is_empty());
        let mut list = ListBuffer::default();
        list.push(store.listed(store.pack(&cm("a", 1, "x")).expect("packs")));
        let vanished = store.replace(list, 5);
        let keys: Vec<&str> = vanished.iter().map(Entry::key).collect();
        assert_eq!(keys, vec!["ns/b"]);
        assert!(store.get(&ObjectKey::namespaced("ns", "b")).is_none());
    }

    #[test]
    fn a_swap_keeps_writes_newer_than_the_list() {
        let store = Store::<ConfigMap>::new(16);
        store.apply(&store.pack(&cm("a", 12, "new")).expect("packs"));
        store.delete("ns/gone", 13, true);
        let mut list = ListBuffer::default();
        list.push(store.listed(store.pack(&cm("a", 10, "old")).expect("packs")));
        list.push(store.listed(store.pack(&cm("gone", 9, "old")).expect("packs")));
        let vanished = store.replace(list, 11);
        assert!(vanished.is_empty(), "nothing cached went missing");
        let a = store.get(&ObjectKey::namespaced("ns", "a")).expect("kept");
        assert_eq!(a.metadata.resource_version.as_deref(), Some("12"));
        assert!(store.get(&ObjectKey::namespaced("ns", "gone")).is_none());
    }

    #[test]
    fn random_applies_and_deletes_leave_exactly_the_newest_state_per_key() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let store = Store::<ConfigMap>::new(16);
        store.add_index("src", Arc::new(by_src));
        let mut truth: HashMap<String, (u64, String)> = HashMap::new();
        for rv in 1..3000u64 {
            let name = format!("k{}", rng.random_range(0..40));
            if rng.random_bool(0.3) {
                store.delete(&format!("ns/{name}"), rv, false);
                truth.remove(&name);
            } else {
                let src = format!("s{}", rng.random_range(0..5));
                store.apply(&store.pack(&cm(&name, rv, &src)).expect("packs"));
                truth.insert(name, (rv, src));
            }
        }
        assert_eq!(store.len(), truth.len());
        let mut keys: Vec<String> = store.keys().iter().map(ToString::to_string).collect();
        keys.sort();
        keys.dedup();
        assert_eq!(keys.len(), truth.len(), "no duplicates");
        for (name, (rv, src)) in &truth {
            let got = store
                .get(&ObjectKey::namespaced("ns", name))
                .expect("cached");
            assert_eq!(got.metadata.resource_version, Some(rv.to_string()));
            assert!(
                store
                    .keys_by_index("src", src)
                    .contains(&ObjectKey::namespaced("ns", name))
            );
        }
        let indexed: usize = (0..5)
            .map(|i| store.keys_by_index("src", &format!("s{i}")).len())
            .sum();
        assert_eq!(indexed, truth.len(), "each key is indexed once");
    }

    fn key(name: &str) -> ObjectKey {
        ObjectKey::namespaced("ns", name)
    }

    fn rv_of(cm: &ConfigMap) -> Option<&str> {
        cm.metadata.resource_version.as_deref()
    }

    fn synced_with(store: &Store<ConfigMap>, objs: &[Value], list_rv: u64) {
        let mut list = ListBuffer::default();
        for o in objs {
            list.push(store.listed(store.pack(o).expect("packs")));
        }
        store.replace(list, list_rv);
    }

    #[test]
    fn readers_of_the_same_version_share_one_allocation() {
        let store = Store::<ConfigMap>::new(16);
        store.add_index("src", Arc::new(by_src));
        synced_with(&store, &[cm("a", 1, "x"), cm("b", 2, "x")], 2);
        assert_eq!(store.decoded_len(), 0, "a list decodes nothing for keeps");
        let first = store.get(&key("a")).expect("cached");
        let second = store.get(&key("a")).expect("cached");
        assert!(Arc::ptr_eq(&first, &second));
        let indexed = store.by_index("src", "x");
        assert_eq!(indexed.len(), 2);
        assert!(indexed.iter().any(|o| Arc::ptr_eq(o, &first)));
        let listed = store.list();
        assert!(listed.iter().any(|o| Arc::ptr_eq(o, &first)));
        let b = store.get(&key("b")).expect("cached");
        assert!(
            indexed.iter().any(|o| Arc::ptr_eq(o, &b)),
            "by_index cached what it decoded"
        );
    }

    #[test]
    fn a_read_after_a_write_sees_the_write_not_the_cached_object() {
        let store = Store::<ConfigMap>::new(16);
        store.apply(&store.pack(&cm("a", 1, "x")).expect("packs"));
        let v1 = store.get(&key("a")).expect("cached");
        store.apply(&store.pack(&cm("a", 2, "y")).expect("packs"));
        let v2 = store.get(&key("a")).expect("cached");
        assert_eq!((rv_of(&v1), rv_of(&v2)), (Some("1"), Some("2")));
        assert_eq!(by_src(&v2), vec!["y".to_string()]);

        // A relist with a newer version replaces what readers share.
        synced_with(&store, &[cm("a", 5, "z"), cm("b", 5, "z")], 5);
        let v5 = store.get(&key("a")).expect("cached");
        assert_eq!(rv_of(&v5), Some("5"));
        assert_eq!(by_src(&v5), vec!["z".to_string()]);
        // A relist that finds the same version keeps sharing the decoded object.
        synced_with(&store, &[cm("a", 5, "z"), cm("b", 5, "z")], 6);
        let again = store.get(&key("a")).expect("cached");
        assert!(Arc::ptr_eq(&v5, &again));
        // A relist without the object drops it from every read path.
        synced_with(&store, &[cm("b", 5, "z")], 7);
        assert!(store.get(&key("a")).is_none());
        assert_eq!(store.list().len(), 1);

        store.delete("ns/b", 8, false);
        assert!(store.get(&key("b")).is_none());
        assert_eq!(store.decoded_len(), 0);
    }

    #[test]
    fn opaque_versions_are_never_served_from_an_older_decode() {
        let store = Store::<ConfigMap>::new(16);
        let opaque = |src: &str| {
            let mut o = cm("a", 0, src);
            o["metadata"]["resourceVersion"] = json!("opaque");
            o
        };
        store.apply(&store.pack(&opaque("x")).expect("packs"));
        assert_eq!(by_src(&store.get(&key("a")).expect("cached")), ["x"]);
        store.apply(&store.pack(&opaque("y")).expect("packs"));
        assert_eq!(by_src(&store.get(&key("a")).expect("cached")), ["y"]);
        synced_with(&store, &[opaque("z")], 0);
        assert_eq!(by_src(&store.get(&key("a")).expect("cached")), ["z"]);
    }

    #[test]
    fn the_decoded_cache_never_exceeds_its_capacity() {
        let store = Store::<ConfigMap>::new(10);
        store.add_index("src", Arc::new(by_src));
        for i in 0..100 {
            store.apply(
                &store
                    .pack(&cm(&format!("k{i}"), i + 1, "x"))
                    .expect("packs"),
            );
            assert!(store.decoded_len() <= 10);
        }
        for i in 0..100 {
            store.get(&key(&format!("k{i}"))).expect("cached");
            assert!(store.decoded_len() <= 10);
        }
        assert_eq!(store.list().len(), 100);
        assert_eq!(store.by_index("src", "x").len(), 100);
        assert_eq!(store.decoded_len(), 10);
        assert_eq!(store.decoded_capacity(), 10);
    }

    #[test]
    fn capacity_zero_decodes_on_every_read() {
        let store = Store::<ConfigMap>::new(0);
        let p = store.pack(&cm("a", 1, "x")).expect("packs");
        store.apply(&p);
        let first = store.get(&key("a")).expect("cached");
        let second = store.get(&key("a")).expect("cached");
        assert!(!Arc::ptr_eq(&first, &second) && !Arc::ptr_eq(&first, &p.obj));
        assert_eq!(first, second);
        assert_eq!(store.list().len(), 1);
        assert_eq!(store.decoded_len(), 0);
    }

    #[test]
    fn the_applied_object_is_the_one_the_next_read_returns() {
        let store = Store::<ConfigMap>::new(16);
        let p = store.pack(&cm("a", 3, "x")).expect("packs");
        assert!(matches!(store.apply(&p), Outcome::Changed(None, None)));
        let got = store.get(&key("a")).expect("cached");
        assert!(Arc::ptr_eq(&got, &p.obj));
        // The same version again (the watch event after a recorded write): the store hands
        // back the Arc its readers already share.
        let again = store.pack(&cm("a", 3, "x")).expect("packs");
        match store.apply(&again) {
            Outcome::Stale(Some(shared)) => assert!(Arc::ptr_eq(&shared, &p.obj)),
            _ => panic!("the same version is stale and shared"),
        }
        // The replaced version's shared object is handed back as the old one.
        let next = store.pack(&cm("a", 4, "x")).expect("packs");
        match store.apply(&next) {
            Outcome::Changed(Some(old), Some(old_obj)) => {
                assert_eq!(old.rv(), 3);
                assert!(Arc::ptr_eq(&old_obj, &p.obj));
            }
            _ => panic!("the update changes the store"),
        }
    }

    #[test]
    fn concurrent_readers_never_see_an_older_version_than_the_last_applied() {
        use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
        let store = Store::<ConfigMap>::new(4);
        let applied = AtomicU64::new(0);
        let done = AtomicBool::new(false);
        std::thread::scope(|s| {
            for _ in 0..3 {
                s.spawn(|| {
                    while !done.load(Ordering::Acquire) {
                        let floor = applied.load(Ordering::Acquire);
                        let Some(got) = store.get(&key("a")) else {
                            assert_eq!(floor, 0);
                            continue;
                        };
                        let rv: u64 = rv_of(&got).and_then(|r| r.parse().ok()).expect("rv");
                        assert!(rv >= floor, "read {rv} after {floor} was applied");
                    }
                });
            }
            for rv in 1..=2000 {
                store.apply(&store.pack(&cm("a", rv, "x")).expect("packs"));
                applied.store(rv, Ordering::Release);
            }
            done.store(true, Ordering::Release);
        });
        let last = store.get(&key("a")).expect("cached");
        assert_eq!(rv_of(&last), Some("2000"));
    }
}
