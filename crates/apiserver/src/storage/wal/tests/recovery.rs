//! Recovery: what a crash may leave and is repaired, and what is refused.

use std::collections::BTreeSet;
use std::sync::Mutex;

use super::*;

#[test]
fn a_damaged_byte_before_an_intact_commit_is_corruption() {
    let (_dir, bytes) = three_commits();
    let starts = frames(&bytes);
    for at in starts[1]..starts[2] {
        let mut damaged = bytes.clone();
        damaged[at] ^= 0x40;
        let dir = log_dir(&damaged);
        match reopen(dir.path()) {
            Err(BackendError::Corrupt(message)) => {
                assert!(message.contains("intact frame follows"), "{message}");
            }
            other => panic!("flipping byte {at} gave {other:?}"),
        }
        // Nothing was truncated: the damage is left for a human to look at.
        assert_eq!(fs::read(dir.path().join(LOG_FILE)).expect("read"), damaged);
    }
}

/// A tail of preallocated zeros as large as a preallocation step can get, and then some.
const BIG_TAIL: usize = 4 * PREALLOC_MAX as usize;

/// The frames of `three_commits`, with `zeros` zero bytes after them.
fn with_zero_tail(bytes: &[u8], zeros: usize) -> Vec<u8> {
    let mut out = bytes.to_vec();
    out.resize(bytes.len() + zeros, 0);
    out
}

fn after_three_commits() -> State {
    let mut model = after_two_commits();
    apply(&mut model, &[put("a", 5, "five")]);
    model
}

#[test]
fn a_preallocated_log_with_a_large_zero_tail_reopens_and_keeps_its_tail() {
    let (_dir, bytes) = three_commits();
    let image = with_zero_tail(&bytes, BIG_TAIL);
    let dir = log_dir(&image);
    let wal = WalBackend::open(dir.path()).expect("open");
    let loaded = wal.load().expect("load");
    assert_eq!(state(&loaded), after_three_commits());
    assert_eq!(loaded.max_rv, 5);
    assert_eq!(
        wal.shared.log_bytes.load(Ordering::SeqCst),
        bytes.len() as u64
    );
    // The next commit goes over the zeros, right after the last frame: no growth.
    submit(&wal, vec![put("d", 6, "after")]).expect("submit");
    drop(wal);
    let file = fs::read(dir.path().join(LOG_FILE)).expect("read");
    assert_eq!(file.len(), image.len(), "the preallocated tail is kept");
    assert_eq!(frames(&file).len(), frames(&bytes).len() + 1);
    let loaded = reopen(dir.path()).expect("reopen");
    assert_eq!(loaded.max_rv, 6);
    assert_eq!(state(&loaded).len(), 3);
}

#[test]
fn a_torn_frame_followed_by_zeros_is_a_torn_tail() {
    // A crash while the last commit was written over preallocated zeros: a prefix of the
    // frame, or the frame with some of its bytes still zero, then the zeros.
    let (_dir, bytes) = three_commits();
    let last = *frames(&bytes).last().expect("frames");
    let mut images = Vec::new();
    for cut in [last + 1, last + 4, last + 8, last + 12, bytes.len() - 1] {
        images.push((
            format!("cut at {cut}"),
            with_zero_tail(&bytes[..cut], BIG_TAIL),
        ));
    }
    for zeros in [last..last + 4, last..last + 8, last + 8..last + 12] {
        let mut image = with_zero_tail(&bytes, BIG_TAIL);
        image[zeros.clone()].fill(0);
        images.push((format!("zeros at {zeros:?}"), image));
    }
    for (what, image) in images {
        let dir = marked_log_dir(&image, 4);
        let wal = WalBackend::open(dir.path()).unwrap_or_else(|e| panic!("{what}: {e}"));
        let loaded = wal.load().expect("load");
        assert_eq!(state(&loaded), after_two_commits(), "{what}");
        assert_eq!(loaded.max_rv, 4, "{what}");
        assert_eq!(
            wal.shared.log_bytes.load(Ordering::SeqCst),
            last as u64,
            "{what}"
        );
        // Wiped in place: the file keeps its size and ends on zeros after the last frame.
        let file = fs::read(dir.path().join(LOG_FILE)).expect("read");
        assert_eq!(file.len(), image.len(), "{what}");
        assert!(
            is_zero(&file[last..]),
            "{what}: the torn bytes are zeros now"
        );
        submit(&wal, vec![put("d", 5, "after")]).expect("submit after recovery");
        drop(wal);
        let file = fs::read(dir.path().join(LOG_FILE)).expect("read");
        assert_eq!(
            file.len(),
            image.len(),
            "{what}: the commit went over the zeros"
        );
        let loaded = reopen(dir.path()).expect("reopen");
        assert_eq!(loaded.max_rv, 5, "{what}");
        assert_eq!(state(&loaded).len(), 3, "{what}");
    }
}

#[test]
fn a_damaged_frame_then_zeros_then_an_intact_frame_is_corruption() {
    let (_dir, bytes) = three_commits();
    let starts = frames(&bytes);
    let (second, third) = (starts[1], starts[2]);
    // Zeros between the damaged frame and the intact one, of every alignment, and many.
    for gap in (0..=17).chain([BIG_TAIL + 5]) {
        for damage in ["flipped", "zeroed"] {
            let mut image = bytes[..third].to_vec();
            if damage == "flipped" {
                image[second + FRAME_HEADER + 3] ^= 0x40;
            } else {
                // All zeros looks like the end of the log, but data follows it.
                image[second..].fill(0);
            }
            image.resize(third + gap, 0);
            image.extend_from_slice(&bytes[third..]);
            let image = with_zero_tail(&image, BIG_TAIL);
            let dir = log_dir(&image);
            match reopen(dir.path()) {
                Err(BackendError::Corrupt(message)) => {
                    assert!(message.contains("intact frame follows"), "{message}");
                    let at = format!("at byte {}", third + gap);
                    assert!(message.contains(&at), "{message}");
                }
                other => panic!("{damage}, {gap} zeros: {other:?}"),
            }
            assert_eq!(fs::read(dir.path().join(LOG_FILE)).expect("read"), image);
        }
    }
}

#[test]
fn the_intact_frame_search_skips_zeros_exactly_as_decoding_would_walk_them() {
    let mut entry = Vec::new();
    encode_record(&mut entry, &put("k", 7, "value"));
    let mut deletion = Vec::new();
    encode_record(&mut deletion, &del("key", 8));
    for zeros in 0..3 * ZERO_ENTRY + 2 {
        let run = vec![0; zeros];
        let payloads = [
            [&entry[..], &run, &deletion].concat(),
            [&entry[..], &run].concat(),
            [&run[..], &deletion].concat(),
            [&run[..], &entry, &run, &deletion].concat(),
        ];
        for payload in payloads {
            let decodes = decode_payload(&payload, |_| {}).is_ok();
            for zeros_from in [zero_tail(&payload), payload.len()] {
                assert_eq!(
                    payload_decodes(&payload, zeros_from),
                    decodes,
                    "{payload:?} with zeros from {zeros_from}"
                );
            }
        }
    }
    assert_eq!(zero_tail(&[0; 20]), 0);
    assert_eq!(zero_tail(&[1, 0, 0, 0, 0, 0, 0, 0, 0, 0]), 1);
    assert_eq!(zero_tail(&[0, 0, 0, 0, 0, 0, 0, 0, 0, 2]), 10);
    assert_eq!(first_nonzero(&[0; 20]), None);
    assert_eq!(first_nonzero(&[0, 0, 0, 0, 0, 0, 0, 0, 0, 3, 0]), Some(9));
}

#[test]
fn a_file_that_is_not_a_log_is_corruption() {
    let (_dir, bytes) = three_commits();
    let mut wrong_magic = bytes.clone();
    wrong_magic[7] = 2;
    for content in [&wrong_magic[..], &[][..], &bytes[..5]] {
        let dir = log_dir(content);
        assert!(
            matches!(reopen(dir.path()), Err(BackendError::Corrupt(_))),
            "{content:?}"
        );
    }
}

#[test]
fn acknowledged_writes_survive_a_crash_at_any_moment() {
    // What a crash leaves on disk: everything synced, then any part of the commit in flight,
    // with zeros where its pages did not make it (it was written over synced zeros). Writers run; at
    // random moments we take what was acknowledged, the synced length, and the file, and
    // build such crash images from them. Every acknowledged write must survive, and what
    // survives must be a prefix of the submissions.
    let dir = tempfile::tempdir().expect("tempdir");
    let wal = Arc::new(WalBackend::open(dir.path()).expect("open"));
    let next_rv = Arc::new(Mutex::new(0u64));
    let acked = Arc::new(Mutex::new(BTreeSet::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..4)
        .map(|_| {
            let (wal, next_rv, acked, stop) =
                (wal.clone(), next_rv.clone(), acked.clone(), stop.clone());
            thread::spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    let (done, rx) = durable();
                    let mut rv = lock(&next_rv);
                    *rv += 1;
                    let this = *rv;
                    let value = format!("{{\"rv\":{this},\"pad\":\"{}\"}}", "p".repeat(300));
                    wal.submit(vec![put(&format!("k{this}"), this, &value)], done);
                    drop(rv);
                    wait(&rx).expect("durable");
                    lock(&acked).insert(this);
                }
            })
        })
        .collect();
    let mut seed = 0x9E37_79B9_7F4A_7C15u64;
    let mut random = move |n: usize| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed % n as u64) as usize
    };
    for _ in 0..10 {
        thread::sleep(Duration::from_millis(10));
        // A copy is a crash image only if no commit completed while it was taken: otherwise
        // it could hold a later frame but miss part of an earlier one, which no crash leaves.
        let copy = (0..1000).find_map(|_| {
            let syncs = wal.syncs();
            let acked_before = lock(&acked).clone();
            // The mark first: it is recorded only after the log holds its revision.
            let mark = fs::read(dir.path().join(MARK_FILE)).expect("mark");
            // Published after the fsync and before the callbacks: it covers `acked_before`.
            let synced = wal.shared.log_bytes.load(Ordering::SeqCst) as usize;
            let file = fs::read(dir.path().join(LOG_FILE)).expect("copy");
            (wal.syncs() == syncs).then_some((acked_before, mark, synced, file))
        });
        let (acked_before, mark, synced, file) = copy.expect("a consistent copy");
        assert!(file.len() >= synced);
        // The commit in flight, written over zeros: only a prefix of it reached the disk
        // (SIGKILL), or some of its pages did not (power loss).
        let cut = synced + random(file.len() - synced + 1);
        let mut prefix = file.clone();
        prefix[cut..].fill(0);
        let mut holes = file.clone();
        let hole = cut.min(file.len() - 1)..(cut + random(9000)).min(file.len());
        holes[hole].fill(0);
        for image in [file.clone(), prefix, holes] {
            let crashed = log_dir(&image);
            fs::write(crashed.path().join(MARK_FILE), &mark).expect("copy the mark");
            let loaded = reopen(crashed.path()).expect("recovered");
            let present: BTreeSet<u64> = loaded.records.iter().map(|r| r.rv).collect();
            assert!(
                present.is_superset(&acked_before),
                "an acknowledged write was lost"
            );
            let prefix: BTreeSet<u64> = (1..=loaded.max_rv).collect();
            assert_eq!(
                present, prefix,
                "what survived is a prefix of the submissions"
            );
        }
    }
    stop.store(true, Ordering::SeqCst);
    for writer in writers {
        writer.join().expect("writer");
    }
}

#[test]
fn an_unfinished_compaction_is_discarded_at_open() {
    let (dir, _) = three_commits();
    let tmp = dir.path().join(TMP_FILE);
    fs::write(&tmp, b"KOREWAL\x01half a snapshot").expect("write tmp");
    let loaded = reopen(dir.path()).expect("reopen");
    assert_eq!(state(&loaded).len(), 2);
    assert_eq!(loaded.max_rv, 5);
    assert!(!tmp.exists());
}

/// The first two of `three_commits`, then the third cut at `cut`, in a log followed by
/// preallocated zeros, with the mark at the second commit: what a crash during the third
/// commit leaves.
fn torn_image(bytes: &[u8], cut: usize) -> Vec<u8> {
    with_zero_tail(&bytes[..cut], bytes.len() - cut + 4096)
}

#[test]
fn a_torn_final_commit_over_zeros_is_dropped_at_every_byte() {
    let (_dir, bytes) = three_commits();
    let last = *frames(&bytes).last().expect("frames");
    for cut in last..bytes.len() {
        let image = torn_image(&bytes, cut);
        let dir = marked_log_dir(&image, 4);
        let wal = WalBackend::open(dir.path())
            .unwrap_or_else(|e| panic!("cut at {cut} of {}: {e}", bytes.len()));
        let loaded = wal.load().expect("load");
        assert_eq!(state(&loaded), after_two_commits(), "cut at {cut}");
        assert_eq!(loaded.max_rv, 4);
        assert_eq!(wal.shared.log_bytes.load(Ordering::SeqCst), last as u64);
        // The torn bytes are zeros now, so the log continues cleanly after them.
        let file = fs::read(dir.path().join(LOG_FILE)).expect("read");
        assert_eq!(file.len(), image.len(), "cut at {cut}");
        assert!(is_zero(&file[last..]), "cut at {cut}");
        submit(&wal, vec![put("d", 5, "after")]).expect("submit after recovery");
        drop(wal);
        let loaded = reopen(dir.path()).expect("reopen");
        assert_eq!(loaded.max_rv, 5, "cut at {cut}");
        assert_eq!(state(&loaded).len(), 3, "cut at {cut}");
    }
}

#[test]
fn a_final_commit_whose_pages_never_reached_the_disk_is_dropped() {
    // Power loss: some of the last write reads back as the zeros it was written over.
    let (_dir, bytes) = three_commits();
    let last = *frames(&bytes).last().expect("frames");
    for zeros in [last..bytes.len(), last..last + 4, last + 8..bytes.len()] {
        let mut image = torn_image(&bytes, bytes.len());
        image[zeros.clone()].fill(0);
        let dir = marked_log_dir(&image, 4);
        let wal = WalBackend::open(dir.path()).expect("recovered");
        let loaded = wal.load().expect("load");
        assert_eq!(state(&loaded), after_two_commits(), "zeros at {zeros:?}");
        // The log continues where the last intact frame ends, over zeros.
        assert_eq!(wal.shared.log_bytes.load(Ordering::SeqCst), last as u64);
        drop(wal);
        let file = fs::read(dir.path().join(LOG_FILE)).expect("read");
        assert_eq!(file.len(), image.len(), "zeros at {zeros:?}");
        assert!(is_zero(&file[last..]), "zeros at {zeros:?}");
    }
}

#[test]
fn garbage_after_the_preallocated_zeros_is_wiped() {
    // The logical end, zeros, then bytes that are no frame, then zeros: within the file
    // and over zeros, like the pages of a commit whose first page never reached the disk.
    let (_dir, bytes) = three_commits();
    let mut image = with_zero_tail(&bytes, 5000);
    image.extend_from_slice(b"not a frame at all");
    image.resize(image.len() + 3000, 0);
    let dir = marked_log_dir(&image, 5);
    let loaded = reopen(dir.path()).expect("recovered");
    assert_eq!(state(&loaded), after_three_commits());
    let file = fs::read(dir.path().join(LOG_FILE)).expect("read");
    assert_eq!(file.len(), image.len());
    assert_eq!(logical(&file), &bytes[..]);
}

/// Opens `image` with the mark at `mark` and expects a refusal that names the log file and
/// says what to do; the log must be left as it was.
fn refused(image: &[u8], mark: u64, what: &str) -> String {
    let dir = marked_log_dir(image, mark);
    let message = match reopen(dir.path()) {
        Err(BackendError::Corrupt(message)) => message,
        other => panic!("{what}: {other:?}"),
    };
    let path = dir.path().join(LOG_FILE);
    assert!(message.contains(&path.display().to_string()), "{message}");
    assert!(message.contains("--repair"), "{message}");
    assert_eq!(fs::read(&path).expect("read"), image, "{what}: left alone");
    message
}

#[test]
fn a_truncated_log_is_refused_with_the_offset() {
    // Issue 11, defect 6: a log cut short by a copy or a full disk lost acknowledged writes;
    // it must not be taken for a torn write.
    let (_dir, bytes) = three_commits();
    let starts = frames(&bytes);
    // Inside the second frame: it claims more bytes than the file has.
    let message = refused(&bytes[..starts[1] + 20], 5, "cut inside a frame");
    assert!(
        message.contains(&format!("frame at byte {}", starts[1])),
        "{message}"
    );
    assert!(message.contains("truncated"), "{message}");
    // At a frame boundary, or inside a header: no preallocated zeros follow.
    let message = refused(&bytes[..starts[2]], 5, "cut at a frame boundary");
    assert!(
        message.contains(&format!("byte {}", starts[2])),
        "{message}"
    );
    assert!(
        message.contains("without the preallocated zeros"),
        "{message}"
    );
    refused(&bytes[..starts[2] + 3], 5, "cut inside a header");
    // Down to the magic, or to the snapshot header.
    refused(&bytes[..MAGIC.len()], 5, "cut to the magic");
    refused(&bytes[..starts[1]], 5, "cut to the snapshot header");
}

#[test]
fn a_log_that_ends_below_the_mark_is_refused() {
    // Truncated at a frame boundary and padded with zeros (or an older copy restored): it
    // looks clean, but the mark says revision 5 was written.
    let (_dir, bytes) = three_commits();
    let starts = frames(&bytes);
    // `starts[0]` is the snapshot header, then come the three commits.
    let image = with_zero_tail(&bytes[..starts[3]], 4096);
    let message = refused(&image, 5, "older than the mark");
    assert!(message.contains("revisions up to 4"), "{message}");
    assert!(message.contains("revision 5"), "{message}");
    // Even when only the snapshot header is left.
    refused(&with_zero_tail(&bytes[..starts[1]], 4096), 5, "header only");
}

#[test]
fn a_missing_log_is_refused_when_the_directory_was_used() {
    // The mark says the log held revision 5.
    let (dir, _) = three_commits();
    fs::remove_file(dir.path().join(LOG_FILE)).expect("delete the log");
    match reopen(dir.path()) {
        Err(BackendError::Corrupt(message)) => {
            assert!(message.contains("missing"), "{message}");
            assert!(message.contains("revision 5"), "{message}");
            assert!(message.contains("--repair"), "{message}");
        }
        other => panic!("missing log: {other:?}"),
    }
    assert!(
        !dir.path().join(LOG_FILE).exists(),
        "no new log was created"
    );

    // No mark (an older build), but the server's credentials are there.
    let used = tempfile::tempdir().expect("tempdir");
    fs::write(used.path().join("admin.token"), "token\n").expect("token");
    match reopen(used.path()) {
        Err(BackendError::Corrupt(message)) => {
            assert!(message.contains("admin.token"), "{message}");
        }
        other => panic!("missing log with credentials: {other:?}"),
    }

    // A directory with nothing of ours in it is new.
    let new = tempfile::tempdir().expect("tempdir");
    fs::write(new.path().join("kore.lock"), "1\n").expect("lock file");
    fs::write(new.path().join("kubeconfig"), "apiVersion: v1\n").expect("other file");
    assert_eq!(reopen(new.path()).expect("new directory").max_rv, 0);
}

#[test]
fn repair_keeps_the_frames_before_the_damage_and_the_clock_above_the_mark() {
    let (_dir, bytes) = three_commits();
    let starts = frames(&bytes);
    // Inside the second commit (`starts[0]` is the snapshot header).
    let image = bytes[..starts[2] + 20].to_vec();
    let dir = marked_log_dir(&image, 5);
    let wal = WalBackend::open_with(dir.path(), &WalConfig::default().repair(true))
        .expect("repair starts");
    let loaded = wal.load().expect("load");
    // The first commit survives; the clock continues above the mark, not above revision 2.
    let mut model = State::new();
    apply(&mut model, &[put("a", 1, "one"), put("b", 2, "two")]);
    assert_eq!(state(&loaded), model);
    assert_eq!(loaded.max_rv, 5);
    // The damaged log is kept, as it was.
    let copies: Vec<_> = fs::read_dir(dir.path())
        .expect("list")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with("kore.wal.damaged-"))
        .collect();
    assert_eq!(copies.len(), 1, "{copies:?}");
    assert_eq!(fs::read(dir.path().join(&copies[0])).expect("copy"), image);
    submit(&wal, vec![put("d", 6, "after")]).expect("write after repair");
    drop(wal);
    // Repaired for good: a plain open reads it.
    let loaded = reopen(dir.path()).expect("reopen");
    apply(&mut model, &[put("d", 6, "after")]);
    assert_eq!(state(&loaded), model);
    assert_eq!(loaded.max_rv, 6);
}

#[test]
fn repair_of_a_missing_log_starts_empty_above_the_mark() {
    let (dir, _) = three_commits();
    let marked = Mark::read(dir.path()).expect("mark").expect("a mark");
    assert_eq!(marked.written, 5);
    fs::remove_file(dir.path().join(LOG_FILE)).expect("delete the log");
    let wal = WalBackend::open_with(dir.path(), &WalConfig::default().repair(true))
        .expect("repair starts");
    let loaded = wal.load().expect("load");
    assert!(loaded.records.is_empty());
    assert_eq!(loaded.max_rv, marked.ceiling);
    assert!(marked.ceiling >= 5);
    drop(wal);
    assert_eq!(reopen(dir.path()).expect("reopen").max_rv, marked.ceiling);
}

#[test]
fn a_repair_continues_above_every_acknowledged_revision_while_the_mark_lags() {
    // The mark's `written` is recorded at most every second, but its ceiling is raised before
    // any frame passes it: a crash right after these writes, then a lost log, still restarts
    // the clock above them.
    let dir = tempfile::tempdir().expect("tempdir");
    let wal = WalBackend::open(dir.path()).expect("open");
    for rv in 1..=30 {
        submit(&wal, vec![put(&format!("k{rv}"), rv, "v")]).expect("submit");
    }
    let crashed = tempfile::tempdir().expect("tempdir");
    fs::copy(dir.path().join(MARK_FILE), crashed.path().join(MARK_FILE)).expect("copy mark");
    drop(wal);
    let marked = Mark::read(crashed.path()).expect("mark").expect("a mark");
    assert!(marked.ceiling >= 30, "{marked:?}");
    let loaded = WalBackend::open_with(crashed.path(), &WalConfig::default().repair(true))
        .expect("repair starts")
        .load()
        .expect("load");
    assert!(
        loaded.max_rv >= 30,
        "the clock restarts at {}",
        loaded.max_rv
    );
}

#[test]
fn a_log_without_a_mark_is_read_as_the_builds_before_the_mark_wrote_it() {
    // Those builds left a torn write cut short at the end of the file, and a log without
    // zeros after a clean stop. Both are accepted once; then the mark and the zeros are there.
    let (_dir, bytes) = three_commits();
    let last = *frames(&bytes).last().expect("frames");
    for cut in [last, last + 3, last + 11, bytes.len() - 1, bytes.len()] {
        let dir = log_dir(&bytes[..cut]);
        let loaded = reopen(dir.path()).unwrap_or_else(|e| panic!("cut at {cut}: {e}"));
        let expected = if cut == bytes.len() { 5 } else { 4 };
        assert_eq!(loaded.max_rv, expected, "cut at {cut}");
        assert_eq!(
            Mark::read(dir.path()).expect("mark").map(|m| m.written),
            Some(expected)
        );
        let file = fs::read(dir.path().join(LOG_FILE)).expect("read");
        assert!(
            file.len() >= logical(&file).len() + FRAME_HEADER,
            "cut at {cut}: preallocated"
        );
        // From now on the strict rules apply: cutting it again is refused.
        let logical_end = logical(&file).len();
        fs::write(dir.path().join(LOG_FILE), &file[..logical_end]).expect("truncate");
        assert!(
            matches!(reopen(dir.path()), Err(BackendError::Corrupt(_))),
            "cut at {cut}"
        );
    }
}

#[test]
fn the_mark_follows_the_log_and_survives_a_torn_update() {
    let dir = tempfile::tempdir().expect("tempdir");
    let wal = WalBackend::open(dir.path()).expect("open");
    submit(&wal, vec![put("a", 1, "x")]).expect("submit");
    submit(&wal, vec![put("b", 2, "y"), del("a", 3)]).expect("submit");
    // A compaction records its revision at once.
    compact(&wal, vec![put("b", 2, "y")], 7).expect("compact");
    assert_eq!(
        Mark::read(dir.path()).expect("mark").map(|m| m.written),
        Some(7)
    );
    submit(&wal, vec![put("c", 8, "z")]).expect("submit");
    drop(wal);
    // A clean stop leaves the exact mark.
    assert_eq!(
        Mark::read(dir.path()).expect("mark").map(|m| m.written),
        Some(8)
    );

    // Two slots: damaging the one written last falls back to the one before.
    let path = dir.path().join(MARK_FILE);
    let mut mark = Mark::open_or_create(dir.path(), 8).expect("open");
    mark.record_written(9).expect("record");
    drop(mark);
    let mut bytes = fs::read(&path).expect("read");
    let newest = if Mark::read(dir.path()).expect("mark").map(|m| m.written) == Some(9) {
        // Slot of sequence number 3 or 4: find it by damaging each in turn.
        let mut first = bytes.clone();
        first[16] ^= 0xFF;
        fs::write(&path, &first).expect("write");
        if Mark::read(dir.path()).expect("mark").map(|m| m.written) == Some(9) {
            4096
        } else {
            0
        }
    } else {
        panic!("the mark was not recorded");
    };
    bytes[newest + 16] ^= 0xFF;
    fs::write(&path, &bytes).expect("write");
    assert_eq!(
        Mark::read(dir.path()).expect("mark").map(|m| m.written),
        Some(8)
    );
    // Both damaged: refused, since nothing can be checked any more.
    bytes[(4096 - newest) + 16] ^= 0xFF;
    fs::write(&path, &bytes).expect("write");
    assert!(matches!(
        Mark::read(dir.path()),
        Err(BackendError::Corrupt(_))
    ));
    assert!(matches!(reopen(dir.path()), Err(BackendError::Corrupt(_))));
}
