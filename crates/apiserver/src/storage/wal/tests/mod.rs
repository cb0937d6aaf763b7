use std::collections::BTreeMap;
use std::sync::mpsc;
use std::sync::{Barrier, Mutex};
use std::time::Duration;

use std::fs;
use std::panic::{self, AssertUnwindSafe};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::Instant;

use bytes::Bytes;

use super::file::{
    LOG_FILE, MARK_FILE, Mark, PREALLOC_ALIGN, PREALLOC_LOW, PREALLOC_MAX, PREALLOC_MIN, TMP_FILE,
    prealloc_step, prealloc_target,
};
use super::frame::crc32;
use super::frame::{
    FRAME_HEADER, MAGIC, ZERO_ENTRY, decode_payload, encode_record, first_nonzero, is_zero,
    parse_header, payload_decodes, zero_tail,
};
use super::{Backend, BackendError, Durable, Loaded, Record, WalBackend, WalConfig, lock};

mod compaction;
mod recovery;

/// How long any single wait may take before the test fails instead of hanging.
const TIMEOUT: Duration = Duration::from_secs(30);

type State = BTreeMap<String, (u64, Vec<u8>)>;

fn put(key: &str, rv: u64, value: &str) -> Record {
    Record {
        key: Arc::from(key),
        rv,
        value: Some(Bytes::copy_from_slice(value.as_bytes())),
    }
}

fn del(key: &str, rv: u64) -> Record {
    Record {
        key: Arc::from(key),
        rv,
        value: None,
    }
}

/// A callback that reports its result on a channel.
fn durable() -> (Durable, mpsc::Receiver<Result<(), BackendError>>) {
    let (tx, rx) = mpsc::channel();
    let done: Durable = Box::new(move |result| {
        let _ = tx.send(result);
    });
    (done, rx)
}

fn wait(rx: &mpsc::Receiver<Result<(), BackendError>>) -> Result<(), BackendError> {
    rx.recv_timeout(TIMEOUT).expect("the callback ran in time")
}

fn submit(wal: &WalBackend, records: Vec<Record>) -> Result<(), BackendError> {
    let (done, rx) = durable();
    wal.submit(records, done);
    wait(&rx)
}

fn compact(wal: &WalBackend, live: Vec<Record>, rv: u64) -> Result<(), BackendError> {
    let (done, rx) = durable();
    wal.compact(live, rv, done);
    wait(&rx)
}

fn state(loaded: &Loaded) -> State {
    let mut state = State::new();
    for record in &loaded.records {
        let value = record.value.clone().expect("loaded records are live");
        let previous = state.insert(record.key.to_string(), (record.rv, value.to_vec()));
        assert!(previous.is_none(), "{} loaded twice", record.key);
    }
    state
}

fn reopen(dir: &Path) -> Result<Loaded, BackendError> {
    WalBackend::open(dir)?.load()
}

/// Applies records to a model of the live state.
fn apply(model: &mut State, records: &[Record]) {
    for record in records {
        match &record.value {
            Some(value) => {
                model.insert(record.key.to_string(), (record.rv, value.to_vec()));
            }
            None => {
                model.remove(&*record.key);
            }
        }
    }
}

fn live(model: &State) -> Vec<Record> {
    model
        .iter()
        .map(|(key, (rv, value))| Record {
            key: Arc::from(key.as_str()),
            rv: *rv,
            value: Some(Bytes::copy_from_slice(value)),
        })
        .collect()
}

/// The byte offsets at which the frames of a log start.
fn frames(bytes: &[u8]) -> Vec<usize> {
    let mut at = MAGIC.len();
    let mut starts = Vec::new();
    while at < bytes.len() {
        let (len, _) = parse_header(&bytes[at..at + FRAME_HEADER]);
        if len == 0 {
            assert!(is_zero(&bytes[at..]), "only zeros follow the last frame");
            break;
        }
        starts.push(at);
        at += FRAME_HEADER + len as usize;
    }
    assert!(at <= bytes.len(), "the log ends at a frame boundary");
    starts
}

/// The logical part of a log file: up to the end of its last frame, without the
/// preallocated zeros.
fn logical(bytes: &[u8]) -> &[u8] {
    let end = match frames(bytes).last() {
        Some(&last) => last + FRAME_HEADER + parse_header(&bytes[last..]).0 as usize,
        None => MAGIC.len(),
    };
    &bytes[..end]
}

/// Writes `bytes` as the log of a fresh directory, without a high-water mark (as a build
/// before the mark left it).
fn log_dir(bytes: &[u8]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    fs::write(dir.path().join(LOG_FILE), bytes).expect("write log");
    dir
}

/// Writes `bytes` as the log of a fresh directory whose high-water mark is `rv`.
fn marked_log_dir(bytes: &[u8], rv: u64) -> tempfile::TempDir {
    let dir = log_dir(bytes);
    Mark::open_or_create(dir.path(), rv).expect("mark");
    dir
}

/// A log of three commits: `a`,`b` put; `b` deleted, `c` put; `a` overwritten.
fn three_commits() -> (tempfile::TempDir, Vec<u8>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let wal = WalBackend::open(dir.path()).expect("open");
    submit(&wal, vec![put("a", 1, "one"), put("b", 2, "two")]).expect("commit 1");
    submit(&wal, vec![del("b", 3), put("c", 4, "four")]).expect("commit 2");
    submit(&wal, vec![put("a", 5, "five")]).expect("commit 3");
    drop(wal);
    let bytes = fs::read(dir.path().join(LOG_FILE)).expect("read log");
    // Without the preallocated zeros: the tests below cut and damage the frames.
    let bytes = logical(&bytes).to_vec();
    (dir, bytes)
}

fn after_two_commits() -> State {
    let mut model = State::new();
    apply(
        &mut model,
        &[
            put("a", 1, "one"),
            put("b", 2, "two"),
            del("b", 3),
            put("c", 4, "four"),
        ],
    );
    model
}

#[test]
fn crc32_matches_the_standard_check_value() {
    // CRC-32/IEEE, as logs written with the hand-rolled table before still carry.
    assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
    assert_eq!(crc32(b""), 0);
    assert_eq!(
        crc32(b"The quick brown fox jumps over the lazy dog"),
        0x414F_A339
    );
}

#[test]
fn a_frame_written_by_the_previous_crc_code_still_reads() {
    // A commit of `put("k", 7, "value")` with the CRC the earlier hand-rolled code (and zlib)
    // computes for it.
    let mut log = MAGIC.to_vec();
    let mut payload = Vec::new();
    encode_record(&mut payload, &put("k", 7, "value"));
    log.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    log.extend_from_slice(&0x5FD5_9C18u32.to_le_bytes());
    log.extend_from_slice(&payload);
    log.resize(log.len() + 4096, 0);
    let dir = log_dir(&log);
    let loaded = reopen(dir.path()).expect("reads");
    assert_eq!(
        state(&loaded),
        State::from([("k".into(), (7, b"value".to_vec()))])
    );
}

#[test]
fn puts_and_deletes_survive_a_reopen() {
    let dir = tempfile::tempdir().expect("tempdir");
    let wal = WalBackend::open(dir.path()).expect("open");
    let loaded = wal.load().expect("load");
    assert!(loaded.records.is_empty());
    assert_eq!(loaded.max_rv, 0);
    submit(&wal, vec![put("/a", 1, "{\"a\":1}"), put("/b", 2, "{}")]).expect("submit");
    submit(&wal, vec![put("/a", 3, "{\"a\":3}")]).expect("submit");
    submit(&wal, vec![del("/b", 4), put("/c", 5, "")]).expect("submit");
    drop(wal);

    let loaded = reopen(dir.path()).expect("reopen");
    let expected = State::from([
        ("/a".to_string(), (3, b"{\"a\":3}".to_vec())),
        ("/c".to_string(), (5, Vec::new())),
    ]);
    assert_eq!(state(&loaded), expected);
    assert_eq!(loaded.max_rv, 5);
}

#[test]
fn the_clock_continues_after_trailing_deletes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let wal = WalBackend::open(dir.path()).expect("open");
    submit(&wal, vec![put("a", 1, "x"), put("b", 2, "y")]).expect("submit");
    submit(&wal, vec![del("b", 3)]).expect("submit");
    submit(&wal, vec![del("a", 4)]).expect("submit");
    drop(wal);
    let loaded = reopen(dir.path()).expect("reopen");
    assert!(loaded.records.is_empty());
    assert_eq!(loaded.max_rv, 4);

    // A snapshot header keeps the clock even when no record carries its revision.
    let wal = WalBackend::open(dir.path()).expect("open");
    compact(&wal, Vec::new(), 9).expect("compact");
    drop(wal);
    assert_eq!(reopen(dir.path()).expect("reopen").max_rv, 9);
}

#[test]
fn load_hands_over_the_state_only_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let wal = WalBackend::open(dir.path()).expect("open");
    wal.load().expect("first load");
    assert!(matches!(wal.load(), Err(BackendError::Io(_))));
}

#[test]
fn frames_are_written_only_over_synced_preallocated_zeros() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join(LOG_FILE);
    let wal = WalBackend::open(dir.path()).expect("open");
    // A new log comes preallocated.
    let file = fs::read(&path).expect("read");
    let start = logical(&file).len() as u64;
    assert_eq!(file.len() as u64, prealloc_target(start, start));
    let mut rv = 0;
    let mut model = State::new();
    // Small commits cross the low-water mark; some commits are larger than a whole step,
    // so they have to preallocate before they are written.
    let sizes = [
        100,
        2000,
        30_000,
        200_000,
        700_000,
        2 << 20,
        100,
        9 << 20,
        100,
    ];
    for size in sizes.into_iter().chain([20_000; 300]) {
        rv += 1;
        let records = vec![put(&format!("k{rv}"), rv, &"v".repeat(size))];
        apply(&mut model, &records);
        // In debug builds, `write_and_sync` asserts that the frame fits in the synced
        // preallocation: a frame written past it would poison the backend here.
        submit(&wal, records).expect("submit");
        let logical_end = wal.shared.log_bytes.load(Ordering::SeqCst);
        let len = fs::metadata(&path).expect("stat").len();
        // The frames end on synced zeros, at least a zero frame header of them.
        assert!(
            len >= logical_end + FRAME_HEADER as u64,
            "{len} < {logical_end} + header"
        );
        assert_eq!(len % PREALLOC_ALIGN, 0);
    }
    let extensions = wal.shared.extensions.load(Ordering::SeqCst);
    assert!(extensions >= 4, "{extensions} preallocations");
    let logical_end = wal.shared.log_bytes.load(Ordering::SeqCst);
    drop(wal);
    // After the last commit the committer preallocated ahead.
    let file = fs::read(&path).expect("read");
    assert_eq!(logical(&file).len() as u64, logical_end);
    let ahead = file.len() as u64 - logical_end;
    assert!(
        ahead >= prealloc_step(logical_end) / PREALLOC_LOW,
        "{ahead} bytes preallocated ahead"
    );
    let loaded = reopen(dir.path()).expect("reopen");
    assert_eq!(state(&loaded), model);
}

#[test]
fn concurrent_writers_share_fsyncs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let wal = Arc::new(WalBackend::open(dir.path()).expect("open"));
    let writers = 16;
    let per_writer = 63;
    let next_rv = Arc::new(Mutex::new(0u64));
    let start = Arc::new(Barrier::new(writers));
    let threads: Vec<_> = (0..writers)
        .map(|writer| {
            let (wal, next_rv, start) = (wal.clone(), next_rv.clone(), start.clone());
            thread::spawn(move || {
                start.wait();
                let mut acks = Vec::new();
                for i in 0..per_writer {
                    let (done, rx) = durable();
                    // Like the store: revisions are taken and submitted under one lock.
                    let mut rv = lock(&next_rv);
                    *rv += 1;
                    wal.submit(vec![put(&format!("w{writer}/{i}"), *rv, "{}")], done);
                    drop(rv);
                    acks.push(rx);
                }
                for rx in acks {
                    wait(&rx).expect("durable");
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().expect("writer");
    }
    let total = (writers * per_writer) as u64;
    let syncs = wal.syncs();
    assert!(syncs * 4 < total, "{syncs} fsyncs for {total} submissions");
    drop(wal);
    assert_eq!(
        reopen(dir.path()).expect("reopen").records.len(),
        total as usize
    );
}

#[test]
fn callbacks_run_in_submission_order_across_threads() {
    let dir = tempfile::tempdir().expect("tempdir");
    let wal = Arc::new(WalBackend::open(dir.path()).expect("open"));
    let next_rv = Arc::new(Mutex::new(0u64));
    let order = Arc::new(Mutex::new(Vec::new()));
    let threads: Vec<_> = (0..8)
        .map(|writer| {
            let (wal, next_rv, order) = (wal.clone(), next_rv.clone(), order.clone());
            thread::spawn(move || {
                let mut acks = Vec::new();
                for i in 0..50 {
                    let (tx, rx) = mpsc::channel();
                    let order = order.clone();
                    let mut rv = lock(&next_rv);
                    *rv += 1;
                    let this = *rv;
                    wal.submit(
                        vec![put(&format!("w{writer}/{i}"), this, "{}")],
                        Box::new(move |result| {
                            lock(&order).push(this);
                            let _ = tx.send(result);
                        }),
                    );
                    drop(rv);
                    // Every few writes, wait, so commits of many sizes happen.
                    if i % 7 == 0 {
                        wait(&rx).expect("durable");
                    } else {
                        acks.push(rx);
                    }
                }
                for rx in acks {
                    wait(&rx).expect("durable");
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().expect("writer");
    }
    let order = lock(&order).clone();
    assert_eq!(order, (1..=400).collect::<Vec<u64>>());
}

#[test]
fn a_failed_write_poisons_the_backend() {
    let dir = tempfile::tempdir().expect("tempdir");
    let wal = WalBackend::open(dir.path()).expect("open");
    wal.set_compaction_floor(0);
    submit(&wal, vec![put("a", 1, "kept")]).expect("first write");
    wal.fail_next_commit();
    assert!(matches!(
        submit(&wal, vec![put("b", 2, "lost")]),
        Err(BackendError::Io(_))
    ));
    assert!(matches!(
        submit(&wal, vec![put("c", 3, "refused")]),
        Err(BackendError::Poisoned)
    ));
    assert!(matches!(
        compact(&wal, Vec::new(), 3),
        Err(BackendError::Poisoned)
    ));
    assert!(!wal.needs_compaction());
    drop(wal);
    let loaded = reopen(dir.path()).expect("reopen");
    assert_eq!(
        state(&loaded),
        State::from([("a".into(), (1, b"kept".to_vec()))])
    );
}

#[test]
fn a_second_open_of_the_same_directory_fails_clearly() {
    let dir = tempfile::tempdir().expect("tempdir");
    let first = WalBackend::open(dir.path()).expect("open");
    match WalBackend::open(dir.path()) {
        Err(BackendError::Io(e)) => {
            let message = e.to_string();
            assert!(message.contains("already in use"), "{message}");
            assert!(
                message.contains(&std::process::id().to_string()),
                "{message}"
            );
        }
        other => panic!("second open gave {other:?}"),
    }
    drop(first);
    WalBackend::open(dir.path()).expect("open after the first closed");
}

#[test]
fn dropping_the_backend_finishes_queued_writes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let wal = WalBackend::open(dir.path()).expect("open");
    let (tx, rx) = mpsc::channel();
    for rv in 1..=300 {
        let tx = tx.clone();
        wal.submit(
            vec![put(&format!("k{rv}"), rv, "v")],
            Box::new(move |result| {
                let _ = tx.send(result);
            }),
        );
    }
    drop(wal);
    drop(tx);
    let results: Vec<_> = rx.iter().collect();
    assert_eq!(results.len(), 300);
    assert!(results.iter().all(Result::is_ok));
    assert_eq!(reopen(dir.path()).expect("reopen").records.len(), 300);
}

#[test]
fn an_empty_submission_is_acknowledged() {
    let dir = tempfile::tempdir().expect("tempdir");
    let wal = WalBackend::open(dir.path()).expect("open");
    submit(&wal, Vec::new()).expect("empty submit");
    submit(&wal, vec![put("a", 1, "x")]).expect("submit");
    drop(wal);
    assert_eq!(reopen(dir.path()).expect("reopen").records.len(), 1);
}

#[test]
fn a_panicking_callback_does_not_stop_later_commits() {
    let dir = tempfile::tempdir().expect("tempdir");
    let wal = WalBackend::open(dir.path()).expect("open");
    wal.submit(vec![put("a", 1, "x")], Box::new(|_| panic!("callback bug")));
    submit(&wal, vec![put("b", 2, "y")]).expect("later submit");
    drop(wal);
    assert_eq!(reopen(dir.path()).expect("reopen").records.len(), 2);
}

#[test]
fn dropping_the_last_handle_inside_a_callback_does_not_join_itself() {
    let dir = tempfile::tempdir().expect("tempdir");
    let wal = Arc::new(WalBackend::open(dir.path()).expect("open"));
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let (done_tx, done_rx) = mpsc::channel();
    let handle = wal.clone();
    wal.submit(
        vec![put("a", 1, "x")],
        Box::new(move |result| {
            let _ = release_rx.recv_timeout(TIMEOUT);
            // The last reference, dropped on the committer thread: it cannot join itself.
            let clean = panic::catch_unwind(AssertUnwindSafe(move || drop(handle))).is_ok();
            let _ = done_tx.send((result, clean));
        }),
    );
    drop(wal);
    release_tx.send(()).expect("release");
    let (result, clean) = done_rx.recv_timeout(TIMEOUT).expect("callback");
    result.expect("durable");
    assert!(
        clean,
        "dropping the backend on its committer thread panicked"
    );
    // The committer exits by itself and releases the directory.
    let deadline = Instant::now() + TIMEOUT;
    let reopened = loop {
        match WalBackend::open(dir.path()) {
            Ok(wal) => break wal,
            Err(e) if Instant::now() > deadline => panic!("still locked: {e}"),
            Err(_) => thread::sleep(Duration::from_millis(5)),
        }
    };
    assert_eq!(reopened.load().expect("load").records.len(), 1);
}

#[test]
fn random_writes_compactions_and_reopens_match_a_model() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut seed = 0x2545_F491_4F6C_DD1Du64;
    let mut random = move |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    let mut model = State::new();
    let mut rv = 0;
    for session in 0..6 {
        let wal = WalBackend::open(dir.path()).expect("open");
        let loaded = wal.load().expect("load");
        assert_eq!(state(&loaded), model, "session {session}");
        assert_eq!(loaded.max_rv, rv, "session {session}");
        let mut acks = Vec::new();
        for _ in 0..40 {
            let mut records = Vec::new();
            for _ in 0..=random(4) {
                rv += 1;
                let key = format!("/k/{}", random(25));
                if random(3) == 0 {
                    records.push(del(&key, rv));
                } else {
                    let value = "z".repeat(random(500) as usize);
                    records.push(put(&key, rv, &value));
                }
            }
            apply(&mut model, &records);
            let (done, rx) = durable();
            wal.submit(records, done);
            acks.push(rx);
            if random(15) == 0 {
                let (done, rx) = durable();
                wal.compact(live(&model), rv, done);
                acks.push(rx);
            }
        }
        for rx in &acks {
            wait(rx).expect("durable");
        }
    }
}

/// Not a test: measures commit throughput on this disk. Run with
/// `cargo test --release -- --ignored --nocapture throughput`.
#[test]
#[ignore = "a benchmark"]
fn throughput_with_concurrent_writers_is_reported() {
    for writers in [1usize, 16, 64] {
        let dir = tempfile::tempdir().expect("tempdir");
        let wal = Arc::new(WalBackend::open(dir.path()).expect("open"));
        let next_rv = Arc::new(Mutex::new(0u64));
        let stop = Arc::new(AtomicBool::new(false));
        let value = Bytes::from(vec![b'x'; 1024]);
        let started = Instant::now();
        let threads: Vec<_> = (0..writers)
            .map(|writer| {
                let (wal, next_rv, stop, value) =
                    (wal.clone(), next_rv.clone(), stop.clone(), value.clone());
                thread::spawn(move || {
                    let mut n = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        let (done, rx) = durable();
                        let mut rv = lock(&next_rv);
                        *rv += 1;
                        let record = Record {
                            key: Arc::from(format!("/bench/{writer}/{}", n % 1000)),
                            rv: *rv,
                            value: Some(value.clone()),
                        };
                        wal.submit(vec![record], done);
                        drop(rv);
                        wait(&rx).expect("durable");
                        n += 1;
                    }
                    n
                })
            })
            .collect();
        thread::sleep(Duration::from_secs(3));
        stop.store(true, Ordering::Relaxed);
        let total: u64 = threads.into_iter().map(|t| t.join().expect("writer")).sum();
        let secs = started.elapsed().as_secs_f64();
        let syncs = wal.syncs();
        let shared = &wal.shared;
        let extensions = shared.extensions.load(Ordering::SeqCst);
        let extension_ms = shared.extension_nanos.load(Ordering::SeqCst) as f64 / 1e6;
        let max_ms = shared.extension_max_nanos.load(Ordering::SeqCst) as f64 / 1e6;
        println!(
            "{writers:>2} writers: {:>8.0} records/s, {:>6.0} fsyncs/s, {:>5.1} records/fsync, \
             {extensions} preallocations ({extension_ms:.1} ms in all, longest {max_ms:.1} ms)",
            total as f64 / secs,
            syncs as f64 / secs,
            total as f64 / syncs as f64
        );
    }
}
