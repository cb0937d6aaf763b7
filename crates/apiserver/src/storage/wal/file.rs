//! The files of the data directory: the lock, snapshots written by rename, preallocation,
//! the high-water mark, and copies of damaged logs kept by a repair.
//!
//! Everything here makes a file durable before anything depends on it: a new file is written
//! under a temporary name, synced, renamed into place, and the directory is synced.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::super::backend::{BackendError, Record};
use super::frame::{
    Frame, MAGIC, MAX_PAYLOAD, TAG_SNAPSHOT, crc32, encode_entry, encode_record, record_size,
};

/// The log file in the data directory.
pub(super) const LOG_FILE: &str = "kore.wal";
/// A compaction (or a repair) in progress; becomes [`LOG_FILE`] by rename.
pub(super) const TMP_FILE: &str = "kore.wal.tmp";
/// Held with `flock` while a process has the directory open.
pub(super) const LOCK_FILE: &str = "kore.lock";

/// The smallest preallocation step: a new or small log grows 1 MiB at a time.
pub(super) const PREALLOC_MIN: u64 = 1 << 20;
/// The largest preallocation step. Writing and syncing it stalls commits for 2–3 ms on the
/// bench disk (16 MiB took 9–10 ms, which showed in the p99 latency at 64 clients, for no
/// more throughput): the cost per byte is the same, only the stalls are longer.
pub(super) const PREALLOC_MAX: u64 = 4 << 20;
/// The committer preallocates ahead, after a commit's callbacks, once less than
/// `1 / PREALLOC_LOW` of a step is left, so that commits rarely wait for it.
pub(super) const PREALLOC_LOW: u64 = 4;
/// Preallocation ends on a page boundary.
pub(super) const PREALLOC_ALIGN: u64 = 4096;
/// The zeros preallocation writes, this many bytes per `write`.
pub(super) static ZEROS: [u8; 256 << 10] = [0; 256 << 10];

/// Takes the directory's lock file, or explains who holds it.
pub(super) fn lock_dir(dir: &Path) -> Result<File, BackendError> {
    let path = dir.join(LOCK_FILE);
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)?;
    match file.try_lock() {
        Ok(()) => {
            file.set_len(0)?;
            file.write_all(format!("{}\n", std::process::id()).as_bytes())?;
            Ok(file)
        }
        Err(fs::TryLockError::WouldBlock) => {
            let mut holder = String::new();
            let _ = file.read_to_string(&mut holder);
            let holder = match holder.trim() {
                "" => String::new(),
                pid => format!(" (pid {pid})"),
            };
            Err(BackendError::Io(Arc::new(io::Error::new(
                io::ErrorKind::WouldBlock,
                format!(
                    "data directory {} is already in use by another process{holder}; \
                     it is locked through {}",
                    dir.display(),
                    path.display()
                ),
            ))))
        }
        Err(fs::TryLockError::Error(e)) => Err(e.into()),
    }
}

pub(super) fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Writes a complete log holding `live` at `rv` as `kore.wal.tmp`, preallocated, syncs it,
/// renames it over `kore.wal` and syncs the directory, closing frames at `round_bytes` of
/// payload. Returns the new log, positioned at its logical end, that end and the file's size.
pub(super) fn write_snapshot(
    dir: &Path,
    live: &[Record],
    rv: u64,
    buf: &mut Vec<u8>,
    round_bytes: usize,
) -> io::Result<(File, u64, u64)> {
    let tmp = dir.join(TMP_FILE);
    let mut file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&tmp)?;
    buf.clear();
    buf.extend_from_slice(&MAGIC);
    let mut frame = Frame::begin(buf);
    encode_entry(buf, rv, "", TAG_SNAPSHOT, None);
    let mut len = 0;
    for record in live {
        let size = record_size(record);
        if size > MAX_PAYLOAD {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "record {} of {size} bytes does not fit in one log frame",
                    record.key
                ),
            ));
        }
        if (frame.payload_len(buf) as u64) + size > round_bytes as u64 {
            frame.finish(buf);
            file.write_all(buf)?;
            len += buf.len() as u64;
            buf.clear();
            frame = Frame::begin(buf);
        }
        encode_record(buf, record);
    }
    frame.finish(buf);
    file.write_all(buf)?;
    len += buf.len() as u64;
    buf.clear();
    // The zeros are synced with the snapshot: no separate preallocation step.
    let allocated = prealloc_target(len, len);
    write_zeros(&mut file, allocated - len)?;
    file.sync_all()?;
    fs::rename(&tmp, dir.join(LOG_FILE))?;
    sync_dir(dir)?;
    file.seek(SeekFrom::Start(len))?;
    Ok((file, len, allocated))
}

/// How much to preallocate at a time for a log of `logical` bytes: as much as it holds
/// (so the file at most doubles), at least [`PREALLOC_MIN`], at most [`PREALLOC_MAX`].
pub(super) fn prealloc_step(logical: u64) -> u64 {
    logical.clamp(PREALLOC_MIN, PREALLOC_MAX)
}

/// The file size to preallocate to when `need` bytes must fit in a log of `logical` bytes:
/// one step past `need`, on a page boundary.
pub(super) fn prealloc_target(need: u64, logical: u64) -> u64 {
    (need + prealloc_step(logical)).next_multiple_of(PREALLOC_ALIGN)
}

/// Writes `len` zero bytes at the file's position.
pub(super) fn write_zeros(file: &mut File, mut len: u64) -> io::Result<()> {
    while len > 0 {
        let n = len.min(ZEROS.len() as u64) as usize;
        file.write_all(&ZEROS[..n])?;
        len -= n as u64;
    }
    Ok(())
}

/// Writes `len` zero bytes at `from` and syncs them: the file then ends at `from + len` (or
/// later, if it was longer). Used to extend the preallocated space, and to wipe a torn frame
/// in place so that the log keeps ending on synced zeros.
pub(super) fn zero_range(file: &mut File, from: u64, len: u64) -> io::Result<()> {
    file.seek(SeekFrom::Start(from))?;
    write_zeros(file, len)?;
    file.sync_data()
}

/// The high-water mark, kept outside the log: the highest revision the log is known to hold
/// (`written`), and a revision no written one exceeds (`ceiling`).
///
/// Recovery compares `written` with what the log actually holds: a log whose revisions end
/// below it, or a missing log while the mark exists, lost acknowledged writes (a truncated
/// copy, a restored old backup, a deleted file), and the server refuses to start. A repair
/// continues the clock above `ceiling`, so that no acknowledged revision is handed out again
/// even though `written` lags behind the log.
pub(super) const MARK_FILE: &str = "kore.wal.mark";
/// A new mark file being written; renamed to [`MARK_FILE`].
const MARK_TMP_FILE: &str = "kore.wal.mark.tmp";
/// The first bytes of each slot; the last byte is the format version.
const MARK_MAGIC: [u8; 8] = *b"KOREMRK\x01";
/// `magic seq:u64 written:u64 ceiling:u64 crc:u32` and four bytes of padding.
const MARK_SLOT: usize = 40;
/// The two slots sit on different pages: a write torn by a crash damages at most the slot
/// it was writing, and the other one still holds the previous mark.
const MARK_STRIDE: u64 = 4096;

/// What a mark file records.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct MarkState {
    /// The log holds at least this revision on stable storage.
    pub(super) written: u64,
    /// No revision in the log exceeds this: a frame is written only once the ceiling is
    /// at or above its revisions.
    pub(super) ceiling: u64,
}

/// The mark file, open for updates.
///
/// The file holds two slots, each `magic seq written ceiling crc`. An update writes the slot
/// the previous update did not (`seq % 2`) with the next sequence number, then
/// `fdatasync`s: the file's size never changes after it was created, so no metadata needs to
/// be synced. Reading takes the valid slot with the higher sequence number.
#[derive(Debug)]
pub(super) struct Mark {
    file: File,
    seq: u64,
    state: MarkState,
}

fn encode_slot(seq: u64, state: MarkState) -> [u8; MARK_SLOT] {
    let mut slot = [0; MARK_SLOT];
    slot[..8].copy_from_slice(&MARK_MAGIC);
    slot[8..16].copy_from_slice(&seq.to_le_bytes());
    slot[16..24].copy_from_slice(&state.written.to_le_bytes());
    slot[24..32].copy_from_slice(&state.ceiling.to_le_bytes());
    let crc = crc32(&slot[..32]);
    slot[32..36].copy_from_slice(&crc.to_le_bytes());
    slot
}

/// `(seq, state)` of a slot, or `None` if it is not a valid slot.
fn decode_slot(slot: &[u8]) -> Option<(u64, MarkState)> {
    let slot = slot.get(..MARK_SLOT)?;
    let word = |at: usize| u64::from_le_bytes(slot[at..at + 8].try_into().expect("8 bytes"));
    let crc = u32::from_le_bytes(slot[32..36].try_into().expect("4 bytes"));
    (slot[..8] == MARK_MAGIC && crc32(&slot[..32]) == crc).then(|| {
        (
            word(8),
            MarkState {
                written: word(16),
                ceiling: word(24),
            },
        )
    })
}

/// `(seq, state)` of the newer valid slot of a mark file's bytes.
fn decode_mark(bytes: &[u8]) -> Option<(u64, MarkState)> {
    let first = decode_slot(bytes);
    let second = bytes.get(MARK_STRIDE as usize..).and_then(decode_slot);
    match (first, second) {
        (Some(a), Some(b)) => Some(if b.0 > a.0 { b } else { a }),
        (a, b) => a.or(b),
    }
}

impl Mark {
    /// What the mark in `dir` records, or `None` if the directory has no mark file.
    ///
    /// # Errors
    /// [`BackendError::Corrupt`] if the file exists but neither slot is valid.
    pub(super) fn read(dir: &Path) -> Result<Option<MarkState>, BackendError> {
        let path = dir.join(MARK_FILE);
        let bytes = match fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        match decode_mark(&bytes) {
            Some((_, state)) => Ok(Some(state)),
            None => Err(BackendError::Corrupt(format!(
                "{}: the high-water mark is unreadable (both copies fail their checksum), so \
                 kore cannot tell whether acknowledged writes are missing from {LOG_FILE}; \
                 restore the data directory from a backup, or start with --repair to rewrite \
                 the mark from what the log holds",
                path.display()
            ))),
        }
    }

    /// Opens the mark in `dir` for updates, raising both values to `rv` where they are lower;
    /// creates it at `rv` if there is none (or if it is unreadable, which only a repair gets
    /// to see: [`Mark::read`] refuses it otherwise).
    pub(super) fn open_or_create(dir: &Path, rv: u64) -> io::Result<Mark> {
        let path = dir.join(MARK_FILE);
        match OpenOptions::new().read(true).write(true).open(&path) {
            Ok(mut file) => {
                let mut bytes = Vec::new();
                file.read_to_end(&mut bytes)?;
                if let Some((seq, state)) = decode_mark(&bytes)
                    && bytes.len() as u64 == MARK_STRIDE + MARK_SLOT as u64
                {
                    let mut mark = Mark { file, seq, state };
                    if rv > state.written || rv > state.ceiling {
                        mark.record(MarkState {
                            written: state.written.max(rv),
                            ceiling: state.ceiling.max(rv),
                        })?;
                    }
                    return Ok(mark);
                }
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        let state = MarkState {
            written: rv,
            ceiling: rv,
        };
        let tmp = dir.join(MARK_TMP_FILE);
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp)?;
        // Both slots valid from the start, the first one newer.
        file.write_all(&encode_slot(1, state))?;
        write_zeros(&mut file, MARK_STRIDE - MARK_SLOT as u64)?;
        file.write_all(&encode_slot(0, state))?;
        file.sync_all()?;
        fs::rename(&tmp, &path)?;
        sync_dir(dir)?;
        Ok(Mark {
            file,
            seq: 1,
            state,
        })
    }

    /// What was recorded last.
    pub(super) fn state(&self) -> MarkState {
        self.state
    }

    /// Records `rv` as written. Call it only once the log holds `rv` on stable storage.
    pub(super) fn record_written(&mut self, rv: u64) -> io::Result<()> {
        let state = self.state;
        self.record(MarkState {
            written: rv,
            ceiling: state.ceiling.max(rv),
        })
    }

    /// Raises the ceiling to `rv`. Call it before a frame with revisions above the current
    /// ceiling is written.
    pub(super) fn raise_ceiling(&mut self, rv: u64) -> io::Result<()> {
        let state = self.state;
        self.record(MarkState {
            written: state.written,
            ceiling: rv,
        })
    }

    /// Writes `state` into the older slot and syncs it.
    pub(super) fn record(&mut self, state: MarkState) -> io::Result<()> {
        let seq = self.seq + 1;
        let at = if seq % 2 == 1 { 0 } else { MARK_STRIDE };
        self.file.seek(SeekFrom::Start(at))?;
        self.file.write_all(&encode_slot(seq, state))?;
        self.file.sync_data()?;
        self.seq = seq;
        self.state = state;
        Ok(())
    }
}

/// Files the API server writes into its data directory next to the log (TLS material and
/// tokens). If they are there but the log is not, the directory was used before and its log
/// is gone: that is refused, not taken for a new directory.
pub(super) fn credential_files(dir: &Path) -> Vec<&'static str> {
    crate::api::data_dir::CREDENTIAL_FILES
        .into_iter()
        .filter(|name| dir.join(name).exists())
        .collect()
}

/// Keeps the current log under a new name before a repair replaces it, so that a human can
/// still look at (and recover from) what the repair gave up. Returns the copy's path.
pub(super) fn keep_damaged(dir: &Path) -> io::Result<PathBuf> {
    let from = dir.join(LOG_FILE);
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let mut n = 0;
    let to = loop {
        let name = match n {
            0 => format!("{LOG_FILE}.damaged-{secs}"),
            n => format!("{LOG_FILE}.damaged-{secs}-{n}"),
        };
        let to = dir.join(name);
        if !to.try_exists()? {
            break to;
        }
        n += 1;
    };
    // A second name for the same file; the repair then renames a new log over `kore.wal`.
    if fs::hard_link(&from, &to).is_err() {
        fs::copy(&from, &to)?;
        File::open(&to)?.sync_all()?;
    }
    sync_dir(dir)?;
    Ok(to)
}
