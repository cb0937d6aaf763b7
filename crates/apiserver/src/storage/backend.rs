//! The narrow layer under [`Store`](super::Store): bytes and revisions, nothing else.
//!
//! A backend keeps records durable; it knows nothing of kinds, selectors or watches. The store
//! holds the live state in memory and hands each write to the backend in revision order. Three
//! implementations exist: [`MemoryBackend`] (nothing survives the process), the write-ahead log
//! in [`super::wal`] (every acknowledged write survives a crash), and
//! [`FaultyBackend`] (fails on command, for tests of the failure paths).
//!
//! # Contract
//! - `submit` and `compact` never block: they queue work and return.
//! - `done` callbacks run in submission order, each exactly once, on whatever thread made the
//!   records durable. A store publishes watch events from them, so order matters.
//! - After a failure the backend is poisoned: every later `done` gets an error.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bytes::Bytes;

/// One durable change: the new value of a key at a revision, or its removal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// The storage key, for example `/configmaps/default/demo`.
    pub key: Arc<str>,
    /// The revision this change was written at.
    pub rv: u64,
    /// The object's JSON, or `None` when the key was deleted.
    pub value: Option<Bytes>,
}

/// What a backend holds when it is opened.
#[derive(Debug, Default)]
pub struct Loaded {
    /// The live records (no deletions), in any order.
    pub records: Vec<Record>,
    /// The highest revision ever made durable, deletions included; the clock continues above it.
    pub max_rv: u64,
}

/// Called once records are durable, or with the error that stopped them.
pub type Durable = Box<dyn FnOnce(Result<(), BackendError>) + Send + 'static>;

/// Why a backend could not make records durable.
///
/// A backend that returned an error is poisoned: restart the process (the log on disk is
/// intact up to the last acknowledged write).
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum BackendError {
    /// Reading or writing the data directory failed.
    #[error("storage i/o failed: {0}")]
    Io(Arc<std::io::Error>),
    /// The data on disk is not in the expected format.
    #[error("storage data is corrupt: {0}")]
    Corrupt(String),
    /// An earlier write failed, so this backend accepts no more.
    #[error("storage is poisoned by an earlier failed write")]
    Poisoned,
    /// A test asked for this failure.
    #[error("injected storage fault")]
    Injected,
}

impl From<std::io::Error> for BackendError {
    fn from(e: std::io::Error) -> Self {
        BackendError::Io(Arc::new(e))
    }
}

/// Durable storage of records. See the module docs for the contract.
pub trait Backend: Send + Sync + 'static {
    /// Reads everything stored so far. Called once, before any `submit`.
    fn load(&self) -> Result<Loaded, BackendError>;
    /// Queues records (in revision order) for durability and calls `done` when they are durable.
    fn submit(&self, records: Vec<Record>, done: Durable);
    /// Whether the history kept by the backend has grown enough that the store should call
    /// [`Backend::compact`].
    fn needs_compaction(&self) -> bool {
        false
    }
    /// Replaces the backend's history by `live`, the complete live state at revision `rv`,
    /// covering everything submitted before this call. Queued behind earlier submissions.
    fn compact(&self, live: Vec<Record>, rv: u64, done: Durable) {
        let _ = (live, rv);
        done(Ok(()));
    }
}

/// Keeps nothing: every record is "durable" at once. The default for tests and `kore up`
/// without a data directory.
#[derive(Debug, Default)]
pub struct MemoryBackend;

impl Backend for MemoryBackend {
    fn load(&self) -> Result<Loaded, BackendError> {
        Ok(Loaded::default())
    }

    fn submit(&self, _records: Vec<Record>, done: Durable) {
        done(Ok(()));
    }
}

/// Wraps a backend and fails writes while a switch is on, to test how the server reports and
/// survives storage failures.
#[derive(Debug)]
pub struct FaultyBackend<B> {
    inner: B,
    failing: Arc<AtomicBool>,
}

impl<B: Backend> FaultyBackend<B> {
    /// Wraps `inner`; returns the backend and the switch that makes its writes fail.
    pub fn new(inner: B) -> (Self, Arc<AtomicBool>) {
        let failing = Arc::new(AtomicBool::new(false));
        (
            FaultyBackend {
                inner,
                failing: failing.clone(),
            },
            failing,
        )
    }
}

impl<B: Backend> Backend for FaultyBackend<B> {
    fn load(&self) -> Result<Loaded, BackendError> {
        self.inner.load()
    }

    fn submit(&self, records: Vec<Record>, done: Durable) {
        if self.failing.load(Ordering::SeqCst) {
            done(Err(BackendError::Injected));
        } else {
            self.inner.submit(records, done);
        }
    }
}
