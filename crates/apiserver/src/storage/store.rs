//! [`Store`]: the in-memory state, the revision clock and the write path to the backend.
//!
//! One `std::sync::Mutex` guards the live objects and the clock. It is held only to check a
//! precondition, stamp a revision into the already encoded object ([`Encoded`]) and queue it
//! for the backend; parsing, patching, validation and encoding happen outside it, and a write
//! whose object changed underneath is re-run (optimistic concurrency, as `GuaranteedUpdate`
//! does in Kubernetes). The lock is never held across an `.await`: a writer waits for
//! durability after releasing it.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use futures::FutureExt;
use futures::future::BoxFuture;
use serde_json::Value;
use tokio::sync::oneshot;

use super::backend::{Backend, BackendError, Record};
use super::encoded::Encoded;
use super::history::{EventType, History, WatchEvent, Watcher};
use super::keymap::{Key, KeyMap};
use super::{
    ListAt, ListOptions, ListPage, Outcome, Preconditions, Storage, StorageError, Stored, Update,
    Written,
};
use crate::api::limits::{MAX_DEPTH, encoded_depth};

/// Settings of a [`Store`].
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct StoreConfig {
    /// How many recent changes the watch history keeps at most.
    pub history_capacity: usize,
    /// What the watch history may weigh, in bytes (counted as [`WatchEvent::weight`]s).
    pub history_bytes: usize,
    /// How old a change in the watch history may grow (Kubernetes' API server compacts etcd
    /// every 5 minutes by default).
    pub history_age: std::time::Duration,
}

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig {
            history_capacity: 20_000,
            history_bytes: 256 << 20,
            history_age: std::time::Duration::from_secs(300),
        }
    }
}

impl StoreConfig {
    /// Sets how many recent changes the watch history keeps.
    #[must_use]
    pub fn history_capacity(mut self, n: usize) -> Self {
        self.history_capacity = n;
        self
    }

    /// Sets how many bytes of changes the watch history keeps.
    #[must_use]
    pub fn history_bytes(mut self, n: usize) -> Self {
        self.history_bytes = n;
        self
    }

    /// Sets how old a change in the watch history may grow.
    #[must_use]
    pub fn history_age(mut self, age: std::time::Duration) -> Self {
        self.history_age = age;
        self
    }
}

#[derive(Debug, Default)]
struct State {
    objects: KeyMap<Stored>,
    /// Keys of stored objects that cannot be read back, and why (only ever loaded from data an
    /// older server wrote: every write is checked).
    unreadable: BTreeMap<Arc<str>, String>,
    /// Every key flagged at load, kept after the object goes: only these can have an
    /// unreadable earlier state in the history (empty on any store not loaded from such data).
    loaded_unreadable: Arc<BTreeSet<Arc<str>>>,
    rv: u64,
}

/// The storage of the API server. See the [module docs](super).
pub struct Store {
    state: Mutex<State>,
    history: History,
    backend: Arc<dyn Backend>,
    compacting: Arc<AtomicBool>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("rv", &self.lock().rv)
            .finish_non_exhaustive()
    }
}

type Ack = oneshot::Receiver<Result<(), BackendError>>;

impl Store {
    /// Opens a store over `backend`, loading what it holds.
    pub fn open(
        backend: Arc<dyn Backend>,
        config: StoreConfig,
    ) -> Result<Arc<Store>, BackendError> {
        let loaded = backend.load()?;
        let mut objects = KeyMap::default();
        let mut unreadable = BTreeMap::new();
        let mut rv = loaded.max_rv;
        for record in loaded.records {
            if let Some(bytes) = record.value {
                rv = rv.max(record.rv);
                if let Err(why) = readable(&bytes) {
                    tracing::warn!(key = %record.key, error = %why, "a stored object cannot be read; it is left out of lists and can only be deleted");
                    unreadable.insert(record.key.clone(), why);
                }
                objects.insert(
                    &record.key,
                    Stored {
                        rv: record.rv,
                        bytes,
                    },
                );
            }
        }
        Ok(Arc::new(Store {
            state: Mutex::new(State {
                objects,
                loaded_unreadable: Arc::new(unreadable.keys().cloned().collect()),
                unreadable,
                rv,
            }),
            history: History::new(
                rv,
                config.history_capacity,
                config.history_bytes,
                config.history_age,
            ),
            backend,
            compacting: Arc::new(AtomicBool::new(false)),
        }))
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The number of stored objects.
    pub fn len(&self) -> usize {
        self.lock().objects.len()
    }

    /// Whether nothing is stored.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The keys under `prefix`, in order (for controllers that sweep a namespace).
    pub fn keys(&self, prefix: &str) -> Vec<Arc<str>> {
        let state = self.lock();
        state
            .objects
            .range_from(Bound::Included(prefix))
            .take_while(|(k, _)| k.starts_with(prefix))
            .map(|(k, _)| k.to_arc())
            .collect()
    }

    /// Stamps `obj` with the next revision, stores it and queues it; called with the lock held.
    fn commit_put(
        &self,
        state: &mut State,
        key: Arc<str>,
        obj: Encoded,
        prev: Option<Stored>,
    ) -> Result<(Stored, Ack), StorageError> {
        let rv = state.rv + 1;
        let bytes = obj.with_rv(rv)?;
        state.rv = rv;
        let stored = Stored {
            rv,
            bytes: bytes.clone(),
        };
        state.objects.insert(&key, stored.clone());
        state.unreadable.remove(&key);
        let kind = if prev.is_some() {
            EventType::Modified
        } else {
            EventType::Added
        };
        let record = Record {
            key: key.clone(),
            rv,
            value: Some(bytes.clone()),
        };
        self.history
            .append(Arc::new(WatchEvent::new(rv, kind, key, bytes, prev)));
        let ack = self.submit(state, record);
        Ok((stored, ack))
    }

    /// Removes `key`, stamping its final state `last` with the next revision; lock held.
    fn commit_delete(
        &self,
        state: &mut State,
        key: Arc<str>,
        last: Encoded,
        prev: Stored,
    ) -> Result<(Stored, Ack), StorageError> {
        let rv = state.rv + 1;
        let bytes = last.with_rv(rv)?;
        state.rv = rv;
        state.objects.remove(&key);
        state.unreadable.remove(&key);
        let record = Record {
            key: key.clone(),
            rv,
            value: None,
        };
        self.history.append(Arc::new(WatchEvent::new(
            rv,
            EventType::Deleted,
            key,
            bytes.clone(),
            Some(prev),
        )));
        let ack = self.submit(state, record);
        Ok((Stored { rv, bytes }, ack))
    }

    fn submit(&self, state: &State, record: Record) -> Ack {
        let rv = record.rv;
        let key = record.key.clone();
        let (tx, rx) = oneshot::channel();
        let history = self.history.clone();
        self.backend.submit(
            vec![record],
            Box::new(move |result| {
                if result.is_ok() {
                    history.publish(rv, &key);
                }
                let _ = tx.send(result);
            }),
        );
        if self.backend.needs_compaction() && !self.compacting.swap(true, Ordering::SeqCst) {
            let live = state
                .objects
                .iter()
                .map(|(k, v)| Record {
                    key: k.to_arc(),
                    rv: v.rv,
                    value: Some(v.bytes.clone()),
                })
                .collect();
            let flag = self.compacting.clone();
            self.backend.compact(
                live,
                state.rv,
                Box::new(move |result| {
                    if let Err(e) = result {
                        tracing::error!(error = %e, "storage compaction failed");
                    }
                    flag.store(false, Ordering::SeqCst);
                }),
            );
        }
        rx
    }

    async fn durable(ack: Ack) -> Result<(), StorageError> {
        match ack.await {
            Ok(result) => result.map_err(StorageError::from),
            Err(_) => Err(StorageError::Backend(BackendError::Poisoned)),
        }
    }

    async fn create_impl(&self, key: &str, obj: Value) -> Result<Stored, StorageError> {
        let obj = Encoded::new(obj)?;
        // The key the watch event carries, made before the lock is taken (the map keeps its
        // own copy of the key's tail).
        let event_key = Arc::from(key);
        let (stored, ack) = {
            let mut state = self.lock();
            if state.objects.contains_key(key) {
                return Err(StorageError::AlreadyExists { key: key.into() });
            }
            self.commit_put(&mut state, event_key, obj, None)?
        };
        Self::durable(ack).await?;
        Ok(stored)
    }

    async fn update_impl(
        &self,
        key: &str,
        pre: &Preconditions,
        update: &mut (dyn FnMut(Value) -> Update + Send),
    ) -> Result<Written, StorageError> {
        loop {
            let current = self.get_impl(key)?;
            let value = current.value()?;
            check_preconditions(pre, &current, &value)?;
            match update(value) {
                Update::Abort => return Err(StorageError::Aborted),
                Update::Put(new) => {
                    let new = Encoded::new(new)?;
                    // Canonical encoding makes "nothing changed" a byte comparison.
                    if new.same_as(current.rv, &current.bytes) {
                        return Ok(Written {
                            stored: current,
                            outcome: Outcome::Unchanged,
                        });
                    }
                    let event_key = Arc::from(key);
                    let (stored, ack) = {
                        let mut state = self.lock();
                        let Some(now) = state.objects.get(key) else {
                            return Err(StorageError::NotFound { key: key.into() });
                        };
                        if now.rv != current.rv {
                            continue;
                        }
                        self.commit_put(&mut state, event_key, new, Some(current))?
                    };
                    Self::durable(ack).await?;
                    return Ok(Written {
                        stored,
                        outcome: Outcome::Written,
                    });
                }
                Update::Delete(last) => {
                    let last = Encoded::new(last)?;
                    let event_key = Arc::from(key);
                    let (stored, ack) = {
                        let mut state = self.lock();
                        let Some(now) = state.objects.get(key) else {
                            return Err(StorageError::NotFound { key: key.into() });
                        };
                        if now.rv != current.rv {
                            continue;
                        }
                        self.commit_delete(&mut state, event_key, last, current)?
                    };
                    Self::durable(ack).await?;
                    return Ok(Written {
                        stored,
                        outcome: Outcome::Deleted,
                    });
                }
            }
        }
    }

    async fn delete_impl(&self, key: &str, pre: &Preconditions) -> Result<Stored, StorageError> {
        let event_key = Arc::from(key);
        let (stored, ack) = {
            let mut state = self.lock();
            let Some(current) = state.objects.get(key).cloned() else {
                return Err(StorageError::NotFound { key: key.into() });
            };
            if let Some(why) = state.unreadable.get(key) {
                return Err(StorageError::Unreadable {
                    key: key.into(),
                    message: why.clone(),
                });
            }
            let value = current.value()?;
            check_preconditions(pre, &current, &value)?;
            self.commit_delete(&mut state, event_key, Encoded::new(value)?, current)?
        };
        Self::durable(ack).await?;
        Ok(stored)
    }

    fn get_impl(&self, key: &str) -> Result<Stored, StorageError> {
        let state = self.lock();
        if let Some(why) = state.unreadable.get(key) {
            return Err(StorageError::Unreadable {
                key: key.into(),
                message: why.clone(),
            });
        }
        state
            .objects
            .get(key)
            .cloned()
            .ok_or_else(|| StorageError::NotFound { key: key.into() })
    }

    async fn delete_unreadable_impl(
        &self,
        key: &str,
        pre: &Preconditions,
        last: Value,
    ) -> Result<Stored, StorageError> {
        let last = Encoded::new(last)?;
        let event_key = Arc::from(key);
        let (stored, ack) = {
            let mut state = self.lock();
            let Some(current) = state.objects.get(key).cloned() else {
                return Err(StorageError::NotFound { key: key.into() });
            };
            if !state.unreadable.contains_key(key) {
                return Err(StorageError::Conflict {
                    message: format!("the object at {key} is readable; delete it normally"),
                });
            }
            if pre.uid.is_some() {
                return Err(StorageError::Conflict {
                    message: "Precondition failed: the UID of an object that cannot be read cannot be checked".into(),
                });
            }
            check_preconditions(pre, &current, &Value::Null)?;
            self.commit_delete(&mut state, event_key, last, current)?
        };
        Self::durable(ack).await?;
        Ok(stored)
    }

    fn list_impl(
        &self,
        prefix: &str,
        opts: &ListOptions,
        filter: &dyn Fn(&Stored) -> bool,
    ) -> Result<ListPage, StorageError> {
        let start = match &opts.start_after {
            Some(k) => Bound::Excluded(k.as_str()),
            None => Bound::Included(prefix),
        };
        // Copy the candidates under the lock (objects reference-counted, keys into one buffer);
        // filter outside it.
        let (mut candidates, mut unreadable, rv, overlay, loaded_unreadable) = {
            let state = self.lock();
            let mut candidates = Candidates::default();
            for (k, v) in state
                .objects
                .range_from(start)
                .take_while(|(k, _)| k.starts_with(prefix))
            {
                candidates.push(k, v.clone());
            }
            let unreadable: BTreeMap<Arc<str>, String> = state
                .unreadable
                .range::<str, _>((start, Bound::Unbounded))
                .take_while(|(k, _)| k.starts_with(prefix))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            match opts.at {
                ListAt::Latest => (candidates, unreadable, state.rv, None, None),
                ListAt::Exact(rv) if rv > state.rv => {
                    return Err(StorageError::TooLarge {
                        requested: rv,
                        current: state.rv,
                    });
                }
                ListAt::Exact(rv) => {
                    let changes = self.history.changes_after(rv)?;
                    let loaded = state.loaded_unreadable.clone();
                    (candidates, unreadable, rv, Some(changes), Some(loaded))
                }
            }
        };
        if let Some(changes) = overlay {
            // Undo every change made after `rv`: the oldest change to a key knows its state then.
            let mut then: BTreeMap<Arc<str>, Option<Stored>> = BTreeMap::new();
            for change in changes.iter().rev() {
                let after_start = match &opts.start_after {
                    Some(s) => &*change.key > s.as_str(),
                    None => true,
                };
                if change.key.starts_with(prefix) && after_start {
                    then.insert(change.key.clone(), change.prev.as_deref().cloned());
                }
            }
            if !then.is_empty() {
                let mut merged: BTreeMap<String, Stored> = candidates
                    .iter()
                    .map(|(k, s)| (k.to_string(), s.clone()))
                    .collect();
                for (k, v) in then {
                    // An earlier state may be one an older server wrote (an unreadable
                    // object changed or deleted since): check it as it comes back.
                    unreadable.remove(&k);
                    match v {
                        Some(s) => {
                            if loaded_unreadable.as_ref().is_some_and(|l| l.contains(&k))
                                && let Err(why) = readable(&s.bytes)
                            {
                                unreadable.insert(k.clone(), why);
                            }
                            merged.insert(k.to_string(), s)
                        }
                        None => merged.remove(&*k),
                    };
                }
                candidates = Candidates::default();
                for (k, s) in merged {
                    candidates.push(Key::from(k.as_str()), s);
                }
            }
        }
        let limit = if opts.limit == 0 {
            usize::MAX
        } else {
            opts.limit
        };
        let mut items = Vec::new();
        let mut continue_after = None;
        let mut remaining = None;
        let mut skipped = Vec::new();
        for (i, (key, stored)) in candidates.iter().enumerate() {
            if let Some(why) = unreadable.get(key) {
                skipped.push((key.to_string(), why.clone()));
                continue;
            }
            if !filter(stored) {
                continue;
            }
            if items.len() == limit {
                continue_after = items_last_key(&candidates, i);
                remaining = Some((candidates.len() - i) as u64);
                break;
            }
            items.push(stored.clone());
        }
        // Report only what lies within this page.
        if let Some(last) = &continue_after {
            skipped.retain(|(k, _)| k.as_str() <= last.as_str());
        }
        Ok(ListPage {
            items,
            rv,
            continue_after,
            remaining,
            unreadable: skipped,
        })
    }
}

/// Whether stored bytes can be read back: nested no deeper than [`MAX_DEPTH`].
pub(super) fn readable(bytes: &[u8]) -> Result<(), String> {
    let depth = encoded_depth(bytes);
    if depth > MAX_DEPTH {
        return Err(format!(
            "it is nested {depth} levels deep, more than the limit of {MAX_DEPTH}"
        ));
    }
    Ok(())
}

/// The key of the last item before index `i` (the last one returned).
fn items_last_key(candidates: &Candidates, i: usize) -> Option<String> {
    i.checked_sub(1)
        .and_then(|j| candidates.key(j))
        .map(str::to_string)
}

/// What a list looks at, copied out of the map under the lock: each object (reference-counted)
/// and its key, the keys one after another in one buffer rather than an allocation each.
#[derive(Default)]
struct Candidates {
    keys: String,
    /// Each object, with where its key ends in `keys`.
    items: Vec<(usize, Stored)>,
}

impl Candidates {
    fn push(&mut self, key: Key<'_>, stored: Stored) {
        key.push_to(&mut self.keys);
        self.items.push((self.keys.len(), stored));
    }

    fn len(&self) -> usize {
        self.items.len()
    }

    fn key(&self, i: usize) -> Option<&str> {
        let start = i
            .checked_sub(1)
            .and_then(|p| self.items.get(p))
            .map_or(0, |(end, _)| *end);
        self.keys.get(start..self.items.get(i)?.0)
    }

    fn iter(&self) -> impl Iterator<Item = (&str, &Stored)> {
        self.items
            .iter()
            .enumerate()
            .map(|(i, (_, stored))| (self.key(i).unwrap_or(""), stored))
    }
}

fn check_preconditions(
    pre: &Preconditions,
    current: &Stored,
    value: &Value,
) -> Result<(), StorageError> {
    if let Some(uid) = &pre.uid {
        let actual = value
            .pointer("/metadata/uid")
            .and_then(Value::as_str)
            .unwrap_or("");
        if actual != uid {
            return Err(StorageError::Conflict {
                message: format!(
                    "Precondition failed: UID in precondition: {uid}, UID in object meta: {actual}"
                ),
            });
        }
    }
    if let Some(rv) = pre.resource_version
        && rv != current.rv
    {
        return Err(StorageError::Conflict {
            message: format!(
                "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}",
                current.rv
            ),
        });
    }
    Ok(())
}

impl Storage for Store {
    fn create(&self, key: &str, obj: Value) -> BoxFuture<'_, Result<Stored, StorageError>> {
        let key = key.to_string();
        async move { self.create_impl(&key, obj).await }.boxed()
    }

    fn get(&self, key: &str) -> Result<Stored, StorageError> {
        self.get_impl(key)
    }

    fn list(
        &self,
        prefix: &str,
        opts: &ListOptions,
        filter: &dyn Fn(&Stored) -> bool,
    ) -> Result<ListPage, StorageError> {
        self.list_impl(prefix, opts, filter)
    }

    fn guaranteed_update<'a>(
        &'a self,
        key: &'a str,
        pre: &'a Preconditions,
        update: &'a mut (dyn FnMut(Value) -> Update + Send),
    ) -> BoxFuture<'a, Result<Written, StorageError>> {
        self.update_impl(key, pre, update).boxed()
    }

    fn delete<'a>(
        &'a self,
        key: &'a str,
        pre: &'a Preconditions,
    ) -> BoxFuture<'a, Result<Stored, StorageError>> {
        self.delete_impl(key, pre).boxed()
    }

    fn delete_unreadable<'a>(
        &'a self,
        key: &'a str,
        pre: &'a Preconditions,
        last: Value,
    ) -> BoxFuture<'a, Result<Stored, StorageError>> {
        self.delete_unreadable_impl(key, pre, last).boxed()
    }

    fn watch(&self, prefix: &str, from: u64) -> Result<Watcher, StorageError> {
        self.history.watcher_of(prefix, None, from)
    }

    fn watch_name(&self, prefix: &str, name: &str, from: u64) -> Result<Watcher, StorageError> {
        self.history.watcher_of(prefix, Some(name), from)
    }

    fn current_rv(&self) -> u64 {
        self.lock().rv
    }
}

impl Store {
    /// Forgets the changes made so far: a watch or list from an earlier revision is told it
    /// expired (410), as a Kubernetes API server answers for revisions before its watch
    /// cache was filled. The server calls it once its bootstrap objects are written.
    pub fn start_history_here(&self) {
        self.history.start_here();
    }

    /// The revision up to which changes are durable and visible to watchers.
    pub fn published_rv(&self) -> u64 {
        self.history.published()
    }

    /// Waits until changes up to `rv` are durable and visible, at most `timeout`; returns
    /// whether they are.
    pub async fn wait_for_rv(&self, rv: u64, timeout: std::time::Duration) -> bool {
        self.history.wait_published(rv, timeout).await
    }
}
