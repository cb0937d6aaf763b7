//! Compaction: the snapshot that replaces the log, and when it is due.

use std::sync::Mutex;
use std::sync::mpsc;

use super::*;

#[test]
fn a_compacted_log_is_preallocated_and_reopens() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join(LOG_FILE);
    let wal = WalBackend::open(dir.path()).expect("open");
    let mut model = State::new();
    let value = "c".repeat(1000);
    for rv in 1..=3000 {
        let records = vec![put(&format!("k{}", rv % 1500), rv, &value)];
        apply(&mut model, &records);
        submit(&wal, records).expect("submit");
    }
    compact(&wal, live(&model), 3000).expect("compact");
    let file = fs::read(&path).expect("read");
    let end = logical(&file).len() as u64;
    assert!(end > PREALLOC_MIN, "a snapshot of {end} bytes");
    assert_eq!(wal.shared.log_bytes.load(Ordering::SeqCst), end);
    assert_eq!(file.len() as u64, prealloc_target(end, end));
    assert!(file.len() as u64 >= end + prealloc_step(end));
    // Commits after it go over its zeros, right after the snapshot.
    apply(&mut model, &[put("after", 3001, "x")]);
    submit(&wal, vec![put("after", 3001, "x")]).expect("submit");
    drop(wal);
    let file = fs::read(&path).expect("read");
    assert_eq!(file.len() as u64, prealloc_target(end, end));
    let loaded = reopen(dir.path()).expect("reopen");
    assert_eq!(state(&loaded), model);
    assert_eq!(loaded.max_rv, 3001);
}

#[test]
fn compaction_keeps_the_state_and_shrinks_the_log() {
    let dir = tempfile::tempdir().expect("tempdir");
    let wal = WalBackend::open(dir.path()).expect("open");
    let mut model = State::new();
    let mut rv = 0;
    for round in 0..50 {
        let mut records = Vec::new();
        for key in 0..10 {
            rv += 1;
            let value = format!(
                "{{\"key\":{key},\"round\":{round},\"pad\":\"{}\"}}",
                "x".repeat(100)
            );
            records.push(put(&format!("/k/{key}"), rv, &value));
        }
        rv += 1;
        records.push(del(&format!("/k/{}", round % 10), rv));
        apply(&mut model, &records);
        submit(&wal, records).expect("submit");
    }
    let path = dir.path().join(LOG_FILE);
    // Logical sizes: the preallocated zeros after the last frame do not count.
    let before = logical(&fs::read(&path).expect("read")).len() as u64;
    assert_eq!(wal.shared.log_bytes.load(Ordering::SeqCst), before);
    compact(&wal, live(&model), rv).expect("compact");
    let file = fs::read(&path).expect("read");
    let after = logical(&file).len() as u64;
    assert!(after * 10 < before, "{after} vs {before}");
    assert_eq!(wal.shared.log_bytes.load(Ordering::SeqCst), after);
    // The new log comes preallocated (`logical` checked that the rest is zeros).
    assert_eq!(file.len() as u64, prealloc_target(after, after));
    drop(wal);

    let loaded = reopen(dir.path()).expect("reopen");
    assert_eq!(state(&loaded), model);
    assert_eq!(loaded.max_rv, rv);
}

#[test]
fn large_commits_and_snapshots_are_split_into_frames() {
    let dir = tempfile::tempdir().expect("tempdir");
    let wal = WalBackend::open(dir.path()).expect("open");
    wal.set_round_bytes(1000);
    let mut model = State::new();
    let mut acks = Vec::new();
    for rv in 1..=60 {
        let records = vec![put(&format!("k{}", rv % 20), rv, &"v".repeat(100))];
        apply(&mut model, &records);
        let (done, rx) = durable();
        wal.submit(records, done);
        acks.push(rx);
    }
    // One submission larger than a round still goes in one frame: submissions are atomic.
    let big: Vec<Record> = (61..=80)
        .map(|rv| put(&format!("big{rv}"), rv, &"b".repeat(200)))
        .collect();
    apply(&mut model, &big);
    let (done, rx) = durable();
    wal.submit(big, done);
    acks.push(rx);
    for rx in &acks {
        wait(rx).expect("durable");
    }
    let path = dir.path().join(LOG_FILE);
    let log = fs::read(&path).expect("read");
    let log = logical(&log);
    let starts = frames(log);
    assert!(
        starts.len() > 8,
        "60 small submissions of 1000-byte rounds: many frames"
    );
    let last = *starts.last().expect("frames");
    assert!(
        log.len() - last > 20 * 200,
        "the large submission is the last frame, whole"
    );

    compact(&wal, live(&model), 80).expect("compact");
    let snapshot = fs::read(&path).expect("read");
    assert!(
        frames(&snapshot).len() >= 4,
        "the snapshot spans several frames"
    );
    drop(wal);
    let loaded = reopen(dir.path()).expect("reopen");
    assert_eq!(state(&loaded), model);
    assert_eq!(loaded.max_rv, 80);
}

#[test]
fn writes_submitted_around_a_compaction_survive_in_order() {
    let dir = tempfile::tempdir().expect("tempdir");
    let wal = WalBackend::open(dir.path()).expect("open");
    let order = Arc::new(Mutex::new(Vec::new()));
    let (tx, rx) = mpsc::channel();
    let callback = |label: u64| -> Durable {
        let order = order.clone();
        let tx = tx.clone();
        Box::new(move |result| {
            lock(&order).push(label);
            let _ = tx.send(result);
        })
    };
    let mut model = State::new();
    let mut rv = 0;
    let mut jobs = 0;
    for _ in 0..3 {
        for _ in 0..100 {
            rv += 1;
            let records = vec![put(&format!("k{}", rv % 37), rv, &format!("v{rv}"))];
            apply(&mut model, &records);
            wal.submit(records, callback(rv));
            jobs += 1;
        }
        // Nothing waits: the compaction queues behind the writes above, and the next
        // writes queue behind it.
        wal.compact(live(&model), rv, callback(rv));
        jobs += 1;
    }
    for _ in 0..jobs {
        rx.recv_timeout(TIMEOUT)
            .expect("callback")
            .expect("durable");
    }
    let order = lock(&order).clone();
    let expected: Vec<u64> = (1..=rv)
        .flat_map(|rv| {
            if rv % 100 == 0 {
                vec![rv, rv]
            } else {
                vec![rv]
            }
        })
        .collect();
    assert_eq!(order, expected);
    drop(wal);
    let loaded = reopen(dir.path()).expect("reopen");
    assert_eq!(state(&loaded), model);
    assert_eq!(loaded.max_rv, rv);
}

#[test]
fn needs_compaction_follows_the_live_data() {
    let dir = tempfile::tempdir().expect("tempdir");
    let wal = WalBackend::open(dir.path()).expect("open");
    wal.set_compaction_floor(4096);
    let value = "v".repeat(200);
    let mut rv = 0;
    for key in 0..40 {
        rv += 1;
        submit(&wal, vec![put(&format!("k{key}"), rv, &value)]).expect("submit");
    }
    assert!(
        !wal.needs_compaction(),
        "new keys only: the log is all live data"
    );
    for _ in 0..150 {
        rv += 1;
        submit(&wal, vec![put("k0", rv, &value)]).expect("submit");
    }
    assert!(
        wal.needs_compaction(),
        "overwrites make the log mostly garbage"
    );

    // While a compaction is queued, it is not asked for again.
    let mut model = State::new();
    for key in 0..40 {
        model.insert(format!("k{key}"), (key + 1, value.clone().into_bytes()));
    }
    model.insert("k0".into(), (rv, value.clone().into_bytes()));
    let (done, rx) = durable();
    wal.compact(live(&model), rv, done);
    assert!(!wal.needs_compaction());
    wait(&rx).expect("compact");
    assert!(!wal.needs_compaction());

    // Deleting most keys leaves a log mostly of dead records.
    for key in 1..40 {
        rv += 1;
        submit(&wal, vec![del(&format!("k{key}"), rv)]).expect("submit");
    }
    assert!(wal.needs_compaction());
}
