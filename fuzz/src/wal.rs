//! The write-ahead log's recovery from arbitrary bytes.

use kore_apiserver::storage::{Backend, Record, WalBackend};

/// Writes the input as the log file of a fresh data directory and opens it. Opening must
/// return the state or an error, never panic or abort; and a log that opened once must open
/// again to the same state (recovery truncates a torn tail, and what it keeps must read back).
pub fn recovery(data: &[u8]) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    std::fs::write(dir.path().join("kore.wal"), data).expect("the log file is written");
    let Some(first) = open(dir.path()) else {
        return;
    };
    let second = open(dir.path()).expect("a log that opened once opens again");
    assert_eq!(first, second, "a reopened log holds the same state");
}

/// The sorted records and the highest revision, or `None` if the log was refused.
fn open(dir: &std::path::Path) -> Option<(Vec<Record>, u64)> {
    let backend = WalBackend::open(dir).ok()?;
    let loaded = backend.load().ok()?;
    let mut records = loaded.records;
    records.sort_by(|a, b| a.key.cmp(&b.key));
    Some((records, loaded.max_rv))
}
