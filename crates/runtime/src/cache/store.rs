//! [`Store`]: the indexed cache one informer fills and any number of readers query.
//!
//! # Guarantees
//! - Readers never see a half-applied relist: a relist builds a new map off to the side and
//!   swaps it in under one write lock ([`Store::is_synced`] turns true only after the first swap).
//! - Per key, the cache never goes back in time: an update whose resourceVersion is older than
//!   the cached one is ignored, so a write the [`crate::client::CachedClient`] recorded is not
//!   undone by the watch event that precedes it, and a deletion it recorded stays deleted
//!   until the watch passes it.
//! - Each object is held once, packed (see `packed.rs`); readers decode their own `Arc<K>`.
//!
//! # Caveats
//! - `get`, `list` and `by_index` decode on every call (about a microsecond for a small
//!   object). Callers that read the same object many times should keep the `Arc<K>`.

use std::collections::{HashMap, HashSet};
use std::marker::PhantomData;
use std::sync::{Arc, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio::sync::watch;

use super::ObjectKey;
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
            .field("synced", &*self.shared.synced.borrow())
            .finish()
    }
}

struct Shared<K> {
    state: RwLock<State<K>>,
    dict: Dictionary,
    /// Where objects are packed before their entry is allocated at its final size.
    scratch: std::sync::Mutex<Vec<u8>>,
    synced: watch::Sender<bool>,
    _kind: PhantomData<fn() -> K>,
}

/// One cached object in a single allocation: its key, resourceVersion and packed form.
///
/// Layout: varint key length, the key (`ns/name`), varint resourceVersion, packed object.
/// Hashing and equality use the key only, and `Borrow<str>` exposes it, so a `HashSet<Entry>`
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
    fn new(key: &str, rv: u64, packed: &[u8]) -> Entry {
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
    entries: HashSet<Entry>,
    indexes: HashMap<String, Index<K>>,
    /// Deletions recorded by a writer ahead of the watch: key → resourceVersion of the delete.
    tombstones: HashMap<Box<str>, u64>,
}

struct Index<K> {
    f: IndexFn<K>,
    by_value: HashMap<String, HashSet<Box<str>>>,
    by_key: HashMap<Box<str>, Vec<String>>,
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

/// An object ready for the cache: packed, and decoded once to check it fits `K`.
pub(crate) struct Packed<K> {
    pub(crate) entry: Entry,
    pub(crate) obj: K,
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
    entries: HashSet<Entry>,
    index: HashMap<Box<str>, Vec<(String, Vec<String>)>>,
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
pub(crate) enum Outcome {
    /// The cache changed; this is the entry it replaced or removed.
    Changed(Option<Entry>),
    /// The cache already held this version or a newer one.
    Stale,
}

/// Parses a resourceVersion for ordering; opaque versions order as 0 (always applied).
pub(crate) fn parse_rv(rv: Option<&str>) -> u64 {
    rv.and_then(|s| s.parse().ok()).unwrap_or(0)
}

impl<K> Store<K> {
    pub(crate) fn new() -> Store<K> {
        Store {
            shared: Arc::new(Shared {
                state: RwLock::new(State {
                    entries: HashSet::new(),
                    indexes: HashMap::new(),
                    tombstones: HashMap::new(),
                }),
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

    /// Decodes a cached entry.
    pub(crate) fn decode_entry(&self, entry: &Entry) -> Option<Arc<K>> {
        self.decode(entry)
    }

    /// The object under `key`.
    pub fn get(&self, key: &ObjectKey) -> Option<Arc<K>> {
        let entry = self.read().entries.get(&*key.to_boxed())?.clone();
        self.decode(&entry)
    }

    /// Every cached object, in no particular order.
    pub fn list(&self) -> Vec<Arc<K>> {
        let all: Vec<Entry> = self.read().entries.iter().cloned().collect();
        all.iter().filter_map(|e| self.decode(e)).collect()
    }

    /// The objects the index `index` lists under `value` (none if there is no such index).
    pub fn by_index(&self, index: &str, value: &str) -> Vec<Arc<K>> {
        let all: Vec<Entry> = {
            let state = self.read();
            let Some(set) = state.indexes.get(index).and_then(|i| i.by_value.get(value)) else {
                return Vec::new();
            };
            set.iter()
                .filter_map(|k| state.entries.get(&**k).cloned())
                .collect()
        };
        all.iter().filter_map(|e| self.decode(e)).collect()
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
        let mut scratch = self
            .shared
            .scratch
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        scratch.clear();
        self.shared.dict.encode_into(value, &mut scratch);
        let obj: K = self.shared.dict.decode(&scratch)?;
        let key = ObjectKey::of(&obj).to_string();
        let rv = parse_rv(obj.meta().resource_version.as_deref());
        Ok(Packed {
            entry: Entry::new(&key, rv, &scratch),
            obj,
        })
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
            by_value: HashMap::new(),
            by_key: HashMap::new(),
        };
        for entry in &entries {
            if let Some(obj) = self.decode(entry) {
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

    /// Applies a created or updated object unless the cache holds a newer version.
    pub(crate) fn apply(&self, packed: &Packed<K>) -> Outcome {
        let values = self.index_values(&packed.obj);
        let key = packed.entry.key();
        let rv = packed.entry.rv();
        let mut state = self.write();
        if let Some(&dead) = state.tombstones.get(key) {
            if rv != 0 && rv <= dead {
                return Outcome::Stale;
            }
            state.tombstones.remove(key);
        }
        if let Some(cur) = state.entries.get(key)
            && rv != 0
            && cur.rv() != 0
            && rv <= cur.rv()
        {
            return Outcome::Stale;
        }
        let old = state.entries.replace(packed.entry.clone());
        for (name, v) in values {
            if let Some(index) = state.indexes.get_mut(&name) {
                index.insert(key, v);
            }
        }
        Outcome::Changed(old)
    }

    /// Removes `key`, as of resourceVersion `rv`; with `tombstone`, remembers the deletion so
    /// older updates arriving later do not bring the object back.
    pub(crate) fn delete(&self, key: &str, rv: u64, tombstone: bool) -> Outcome {
        let mut state = self.write();
        if tombstone && rv != 0 {
            state.tombstones.insert(key.into(), rv);
        }
        if let Some(cur) = state.entries.get(key)
            && rv != 0
            && cur.rv() != 0
            && rv < cur.rv()
        {
            return Outcome::Stale;
        }
        let Some(old) = state.entries.take(key) else {
            return Outcome::Stale;
        };
        for index in state.indexes.values_mut() {
            index.remove(key);
        }
        Outcome::Changed(Some(old))
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
    pub(crate) fn replace(&self, list: ListBuffer, list_rv: u64) {
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
        let mut indexes: HashMap<String, Index<K>> = fns
            .into_iter()
            .map(|(n, f)| {
                (
                    n,
                    Index {
                        f,
                        by_value: HashMap::new(),
                        by_key: HashMap::new(),
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
                                decoded = self.decode(entry);
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
        let registered = {
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
                        && let Some(obj) = self.decode(&e)
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
            state.entries = entries;
            // Indexes registered while the list was being built are rebuilt below.
            let registered: Vec<(String, IndexFn<K>)> = state
                .indexes
                .iter()
                .filter(|(n, _)| !indexes.contains_key(*n))
                .map(|(n, i)| (n.clone(), Arc::clone(&i.f)))
                .collect();
            state.indexes = indexes;
            registered
        };
        for (name, f) in registered {
            self.add_index(&name, f);
        }
        self.mark_synced();
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
        let store = Store::<ConfigMap>::new();
        let p = store.pack(&cm("a", 5, "x")).expect("packs");
        assert!(matches!(store.apply(&p), Outcome::Changed(_)));
        let old = store.pack(&cm("a", 4, "y")).expect("packs");
        assert!(matches!(store.apply(&old), Outcome::Stale));
        let got = store
            .get(&ObjectKey::namespaced("ns", "a"))
            .expect("cached");
        assert_eq!(got.metadata.resource_version.as_deref(), Some("5"));
    }

    #[test]
    fn a_recorded_deletion_keeps_older_updates_out_until_the_watch_passes_it() {
        let store = Store::<ConfigMap>::new();
        store.apply(&store.pack(&cm("a", 5, "x")).expect("packs"));
        assert!(matches!(store.delete("ns/a", 7, true), Outcome::Changed(_)));
        assert!(matches!(
            store.apply(&store.pack(&cm("a", 6, "x")).expect("packs")),
            Outcome::Stale
        ));
        store.observed(7);
        assert!(matches!(
            store.apply(&store.pack(&cm("a", 8, "x")).expect("packs")),
            Outcome::Changed(_)
        ));
    }

    #[test]
    fn indexes_follow_updates_deletes_and_swaps() {
        let store = Store::<ConfigMap>::new();
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
    fn a_swap_keeps_writes_newer_than_the_list() {
        let store = Store::<ConfigMap>::new();
        store.apply(&store.pack(&cm("a", 12, "new")).expect("packs"));
        store.delete("ns/gone", 13, true);
        let mut list = ListBuffer::default();
        list.push(store.listed(store.pack(&cm("a", 10, "old")).expect("packs")));
        list.push(store.listed(store.pack(&cm("gone", 9, "old")).expect("packs")));
        store.replace(list, 11);
        let a = store.get(&ObjectKey::namespaced("ns", "a")).expect("kept");
        assert_eq!(a.metadata.resource_version.as_deref(), Some("12"));
        assert!(store.get(&ObjectKey::namespaced("ns", "gone")).is_none());
    }

    #[test]
    fn random_applies_and_deletes_leave_exactly_the_newest_state_per_key() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let store = Store::<ConfigMap>::new();
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
}
