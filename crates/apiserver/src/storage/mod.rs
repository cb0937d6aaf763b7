//! Storage with Kubernetes semantics: keys, revisions, optimistic concurrency and watches.
//!
//! The [`Storage`] trait is what the registry sees: `create`, `get`, `list` (with limit and
//! continue), `guaranteed_update` (with preconditions, re-run on conflict, no write when
//! nothing changed), `delete` (with preconditions) and `watch` from a revision. Objects are
//! JSON documents; storage only reads and writes `metadata.resourceVersion` in them.
//!
//! [`Store`] is the one implementation. It keeps the live state in memory as canonical JSON
//! bytes (so a list or a watch event is written to the network without re-encoding), stamps
//! every change with the next value of one cluster-wide revision clock, keeps a bounded
//! history of recent changes for watches and consistent paging, and hands each change to a
//! [`Backend`] for durability: [`MemoryBackend`] or the write-ahead log in [`wal`].
//!
//! Start with [`Store::open`], then [`Storage`].
//!
//! # Guarantees
//! - Revisions are strictly increasing across all keys; every persisted change gets a new one,
//!   and a write that changes nothing gets none.
//! - A write is acknowledged only after its backend made it durable; watch events are
//!   published in revision order and only once durable.
//! - A watcher sees every change after its starting revision, in order, or a
//!   [`StorageError::Expired`] when it fell further behind than the history holds. Events are
//!   never dropped silently.
//! - Every object written can be read back: one nested deeper than
//!   [`crate::api::limits::MAX_DEPTH`] is refused. Objects an older server stored deeper are flagged
//!   when the store loads: reads and updates of them fail with [`StorageError::Unreadable`],
//!   lists leave them out and name them in [`ListPage::unreadable`], and
//!   [`Storage::delete_unreadable`] removes them.
//!
//! # Caveats
//! - Reads see a write as soon as it is applied in memory, which may be up to one group commit
//!   before it is durable (etcd shows it only after commit). A crash in that window loses a
//!   write that no client was told had succeeded but that a concurrent reader may have seen.

mod api_error;
pub mod backend;
mod encoded;
mod history;
mod keymap;
mod store;
pub mod wal;

use bytes::Bytes;
use futures::future::BoxFuture;
use serde_json::Value;

pub use backend::{Backend, BackendError, FaultyBackend, Loaded, MemoryBackend, Record};
pub use history::{EventType, WatchEvent, Watcher, render_line};
pub use store::{Store, StoreConfig};
pub use wal::{WalBackend, WalConfig};

/// An object as stored: its JSON (with `metadata.resourceVersion` set) and its revision.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stored {
    /// The revision of the last change to this object.
    pub rv: u64,
    /// The object's canonical JSON.
    pub bytes: Bytes,
}

impl Stored {
    /// Parses the stored JSON.
    pub fn value(&self) -> Result<Value, StorageError> {
        serde_json::from_slice(&self.bytes).map_err(|e| StorageError::Internal(e.to_string()))
    }
}

/// Conditions a write checks against the stored object before it applies.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Preconditions {
    /// The object's `metadata.uid` must equal this.
    pub uid: Option<String>,
    /// The object's revision must equal this.
    pub resource_version: Option<u64>,
}

/// Which state a list reads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ListAt {
    /// The latest state.
    #[default]
    Latest,
    /// The state at exactly this revision, rebuilt from the history; fails with
    /// [`StorageError::Expired`] if the history no longer reaches back that far.
    Exact(u64),
}

/// Options of a list request.
#[derive(Clone, Debug, Default)]
pub struct ListOptions {
    /// Return at most this many objects (0 = no limit).
    pub limit: usize,
    /// Start after this key (from a continue token); implies `at` is the first page's revision.
    pub start_after: Option<String>,
    /// Which state to read.
    pub at: ListAt,
}

/// One page of a list.
#[derive(Clone, Debug, Default)]
pub struct ListPage {
    /// The matching objects, in key order.
    pub items: Vec<Stored>,
    /// The revision of the state this page shows.
    pub rv: u64,
    /// The last key returned, when more matching objects remain.
    pub continue_after: Option<String>,
    /// How many objects after this page are under the prefix (before filtering), when known.
    pub remaining: Option<u64>,
    /// Objects in the range of this page that were left out because they cannot be read
    /// (see [`StorageError::Unreadable`]): their keys and why.
    pub unreadable: Vec<(String, String)>,
}

/// What a `guaranteed_update` function decided.
#[derive(Debug)]
pub enum Update {
    /// Store this object (nothing is written if it equals the current one).
    Put(Value),
    /// Remove the object; the value is its final state (used when the last finalizer of a
    /// deleting object goes).
    Delete(Value),
    /// Stop without writing; the function keeps its own reason (for example a validation
    /// error) and `guaranteed_update` returns [`StorageError::Aborted`].
    Abort,
}

/// What a write did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Nothing changed; no revision was used.
    Unchanged,
    /// The object was created or replaced.
    Written,
    /// The object was removed.
    Deleted,
}

/// The result of a write: the object as stored (or as last stored, for a deletion) and what
/// happened.
#[derive(Clone, Debug)]
pub struct Written {
    /// The stored object.
    pub stored: Stored,
    /// What the write did.
    pub outcome: Outcome,
}

/// Why a storage operation failed. Each variant says what the caller should do.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum StorageError {
    /// No object at the key: report NotFound.
    #[error("key not found: {key}")]
    NotFound {
        /// The key.
        key: String,
    },
    /// An object exists at the key: report AlreadyExists.
    #[error("key exists: {key}")]
    AlreadyExists {
        /// The key.
        key: String,
    },
    /// A precondition did not hold: report Conflict; the client re-reads and retries.
    #[error("precondition failed: {message}")]
    Conflict {
        /// What did not match, in Kubernetes' words.
        message: String,
    },
    /// The requested revision is older than the history: the client must re-list.
    #[error("too old resource version: {requested} ({oldest})")]
    Expired {
        /// The revision asked for.
        requested: u64,
        /// The oldest revision still available.
        oldest: u64,
    },
    /// The requested revision is newer than the clock, even after waiting.
    #[error("too large resource version: {requested}, current: {current}")]
    TooLarge {
        /// The revision asked for.
        requested: u64,
        /// The clock's value.
        current: u64,
    },
    /// The update function chose [`Update::Abort`]; it holds the reason.
    #[error("update aborted")]
    Aborted,
    /// The backend could not make the write durable; the server must be restarted.
    #[error(transparent)]
    Backend(#[from] BackendError),
    /// The object at `key` is stored but cannot be read back (data written by an older
    /// server, nested deeper than [`crate::api::limits::MAX_DEPTH`]): report StorageReadError.
    /// Such an object can only be deleted, with [`Storage::delete_unreadable`].
    #[error("the object at {key} cannot be read from storage: {message}")]
    Unreadable {
        /// The key.
        key: String,
        /// Why it cannot be read.
        message: String,
    },
    /// A stored document could not be read or written; a bug.
    #[error("internal storage error: {0}")]
    Internal(String),
}

/// Storage with Kubernetes semantics over JSON objects. See the module docs.
pub trait Storage: Send + Sync + 'static {
    /// Stores a new object at `key`, setting its `metadata.resourceVersion`.
    fn create(&self, key: &str, obj: Value) -> BoxFuture<'_, Result<Stored, StorageError>>;

    /// Reads the object at `key`.
    fn get(&self, key: &str) -> Result<Stored, StorageError>;

    /// Lists objects whose key starts with `prefix` and that pass `filter`.
    fn list(
        &self,
        prefix: &str,
        opts: &ListOptions,
        filter: &dyn Fn(&Stored) -> bool,
    ) -> Result<ListPage, StorageError>;

    /// Reads the object at `key`, checks `pre`, calls `update` with its value, and stores the
    /// result if it differs from what is stored; re-runs `update` if another write raced in
    /// between.
    fn guaranteed_update<'a>(
        &'a self,
        key: &'a str,
        pre: &'a Preconditions,
        update: &'a mut (dyn FnMut(Value) -> Update + Send),
    ) -> BoxFuture<'a, Result<Written, StorageError>>;

    /// Removes the object at `key` after checking `pre`; returns its last state, stamped with
    /// the revision of the deletion.
    fn delete<'a>(
        &'a self,
        key: &'a str,
        pre: &'a Preconditions,
    ) -> BoxFuture<'a, Result<Stored, StorageError>>;

    /// Removes the object at `key` that cannot be read (see [`StorageError::Unreadable`]),
    /// recording `last` as its final state for watchers; checks the revision of `pre` (its uid
    /// cannot be read, so a uid precondition fails with a conflict). Fails with NotFound when
    /// there is no object and with a conflict when the object is readable.
    fn delete_unreadable<'a>(
        &'a self,
        key: &'a str,
        pre: &'a Preconditions,
        last: Value,
    ) -> BoxFuture<'a, Result<Stored, StorageError>>;

    /// Watches changes of keys under `prefix` after revision `from`.
    fn watch(&self, prefix: &str, from: u64) -> Result<Watcher, StorageError>;

    /// Watches changes of the keys under `prefix` whose last segment is `name` (the objects
    /// of that name) after revision `from`. Writes to other names do not wake the watcher.
    fn watch_name(&self, prefix: &str, name: &str, from: u64) -> Result<Watcher, StorageError>;

    /// The revision of the latest applied change.
    fn current_rv(&self) -> u64;
}

/// Reads `metadata.resourceVersion` as a number, if present and numeric.
pub fn resource_version_of(obj: &Value) -> Option<u64> {
    obj.pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .and_then(|s| s.parse().ok())
}

/// Sets `metadata.resourceVersion`, creating `metadata` if needed.
pub fn set_resource_version(obj: &mut Value, rv: u64) {
    if let Some(map) = obj.as_object_mut() {
        let meta = map
            .entry("metadata")
            .or_insert_with(|| Value::Object(Default::default()));
        if let Some(meta) = meta.as_object_mut() {
            meta.insert("resourceVersion".into(), Value::String(rv.to_string()));
        }
    }
}

#[cfg(test)]
mod conformance;
