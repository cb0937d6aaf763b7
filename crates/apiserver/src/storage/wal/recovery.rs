//! Recovery: reading the log back at open, and deciding what may be dropped.
//!
//! The rules (the design note has the reasoning):
//! - Only a torn final frame may be dropped: damage at the end of the log that lies over the
//!   preallocated zeros inside the file, with no intact frame after it. That is the one thing
//!   a crash can leave, because a frame is only ever written over zeros synced before, with
//!   at least a zero frame header of them after it. The damaged bytes are overwritten with
//!   zeros in place, so the log keeps ending on synced zeros.
//! - Anything else is refused with [`BackendError::Corrupt`], naming the file, the byte
//!   offset and what to do: a damaged frame followed by an intact one, a frame that runs past
//!   the end of the file or a log that ends without its zeros (truncation), a frame that
//!   passes its CRC but does not decode, a wrong magic, a log whose revisions end below the
//!   high-water mark ([`Mark`]), and a missing log in a directory that was used before.
//! - With `repair`, the server starts anyway with what can be read (every frame before the
//!   damage), keeps a copy of the old log, rewrites the log as a snapshot, and continues the
//!   revision clock above both the log and the mark, so that no revision is handed out twice.
//! - A directory without a mark was last used by a build that wrote none: its log may end
//!   without zeros, or with a frame cut short at the end of the file (a torn write then), and
//!   both are accepted once, as those builds did. The mark is written at that open, and the
//!   strict rules apply from then on.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;

use super::super::backend::{BackendError, Record};
use super::file::{
    LOG_FILE, MARK_FILE, Mark, MarkState, credential_files, keep_damaged, prealloc_target,
    write_snapshot, zero_range,
};
use super::frame::{
    ENTRY_FIXED, Entry, FRAME_HEADER, MAGIC, ROUND_BYTES, crc32, decode_payload, first_nonzero,
    is_zero, parse_header, payload_decodes, zero_tail,
};

/// The state replayed from a log.
#[derive(Default)]
struct Replay {
    live: HashMap<Arc<str>, (u64, Bytes)>,
    max_rv: u64,
}

impl Replay {
    fn apply(&mut self, entry: Entry<'_>) {
        self.max_rv = self.max_rv.max(entry.rv);
        match entry.value {
            Some(value) => {
                let value = Bytes::copy_from_slice(value);
                match self.live.get_mut(entry.key) {
                    Some(slot) => *slot = (entry.rv, value),
                    None => {
                        self.live.insert(Arc::from(entry.key), (entry.rv, value));
                    }
                }
            }
            None => {
                self.live.remove(entry.key);
            }
        }
    }

    fn into_records(self) -> Vec<Record> {
        self.live
            .into_iter()
            .map(|(key, (rv, value))| Record {
                key,
                rv,
                value: Some(value),
            })
            .collect()
    }
}

/// How a scan of the log ended, after the last intact frame.
#[derive(Debug, PartialEq, Eq)]
enum Ending {
    /// Zeros up to the end of the file, at least a frame header of them: the preallocated
    /// space. A clean log.
    Clean,
    /// The file ends right after the last frame, or fewer than a frame header of zero bytes
    /// follow it. A log from a build without preallocation, or a truncated one.
    Unterminated,
    /// A damaged final frame over the preallocated zeros: a write cut short by a crash. The
    /// bytes up to `wipe_to` are not zero.
    Torn { wipe_to: u64 },
    /// Damage at the end that is not over zeros: a truncated file (or, in a log from a build
    /// without preallocation, a torn write).
    Truncated(String),
    /// Damage that neither a crash nor a truncation leaves.
    Corrupt(String),
}

/// What a scan read: the state up to the last intact frame, where that frame ends, and how
/// the file goes on after it.
struct Scan {
    replay: Replay,
    /// The end of the last intact frame (the magic's end if there is none).
    end: u64,
    /// The size of the file.
    len: u64,
    ending: Ending,
}

/// The log, recovered and ready for the committer.
pub(super) struct Recovered {
    /// The log, positioned at its logical end.
    pub(super) file: File,
    /// The live records.
    pub(super) records: Vec<Record>,
    /// Where the clock continues: above the log's highest revision and the mark.
    pub(super) max_rv: u64,
    /// The logical end: the end of the last frame.
    pub(super) end: u64,
    /// The size of the file; the bytes from `end` to here are synced zeros, at least a frame
    /// header of them.
    pub(super) allocated: u64,
    /// The high-water mark, at `max_rv`.
    pub(super) mark: Mark,
}

/// Opens the log in `dir` (which the caller has locked) and recovers it by the rules in the
/// [module docs](self). Creates a new log if the directory was never used.
pub(super) fn recover(dir: &Path, repair: bool) -> Result<Recovered, BackendError> {
    let path = dir.join(LOG_FILE);
    let (marked, strict) = match Mark::read(dir) {
        Ok(Some(state)) => (state, true),
        Ok(None) => (MarkState::default(), false),
        Err(e) if repair => {
            tracing::warn!(error = %e, "repair: ignoring the unreadable high-water mark");
            (MarkState::default(), true)
        }
        Err(e) => return Err(e),
    };
    let mark = marked.written;
    // A repair continues the clock above every revision that may have been acknowledged.
    let ceiling = marked.ceiling.max(mark);

    if !path.try_exists()? {
        let problem = if strict {
            Some(format!(
                "the log is missing, but {MARK_FILE} records that it held revision {mark}"
            ))
        } else {
            let found = credential_files(dir);
            (!found.is_empty()).then(|| {
                format!(
                    "the log is missing, but the data directory was used before (it holds {})",
                    found.join(", ")
                )
            })
        };
        if let Some(problem) = problem {
            if !repair {
                return Err(refusal(&path, &problem, ceiling));
            }
            return repair_log(dir, Replay::default(), 0, ceiling, &problem);
        }
        // A new data directory.
        return open_snapshot(dir, Vec::new(), 0);
    }

    let mut file = OpenOptions::new().read(true).write(true).open(&path)?;
    let scan = scan(&file)?;
    let mut problem = match &scan.ending {
        Ending::Clean | Ending::Torn { .. } => None,
        Ending::Unterminated if !strict => None,
        Ending::Unterminated => Some(format!(
            "the log ends at byte {} without the preallocated zeros that always follow its \
             last frame: the file was truncated, and writes after that byte may be missing",
            scan.len
        )),
        Ending::Truncated(_) if !strict => None,
        Ending::Truncated(detail) | Ending::Corrupt(detail) => Some(detail.clone()),
    };
    if problem.is_none() && scan.replay.max_rv < mark {
        problem = Some(format!(
            "the log holds revisions up to {} (it ends at byte {}), but {MARK_FILE} records \
             that revision {mark} was written: acknowledged writes are missing (is this a \
             truncated or older copy of the log?)",
            scan.replay.max_rv, scan.end
        ));
    }
    if let Some(problem) = problem {
        if !repair {
            return Err(refusal(&path, &problem, ceiling));
        }
        drop(file);
        return repair_log(dir, scan.replay, scan.end, ceiling, &problem);
    }
    if repair {
        tracing::info!(path = %path.display(), "--repair: the log is intact, nothing to repair");
    }

    let Scan {
        replay, end, len, ..
    } = scan;
    let mut allocated = len;
    match scan.ending {
        Ending::Torn { wipe_to } => {
            tracing::warn!(
                path = %path.display(),
                offset = end,
                bytes = wipe_to - end,
                "dropping the torn final frame of the write-ahead log: a commit cut short by a \
                 crash, over preallocated zeros; it was never acknowledged"
            );
            zero_range(&mut file, end, wipe_to - end)?;
        }
        Ending::Truncated(detail) => {
            // Only without a mark: a build without preallocation left a torn write here.
            tracing::warn!(
                path = %path.display(),
                offset = end,
                dropped_bytes = len - end,
                "{detail}; the directory has no {MARK_FILE} (an older kore wrote it), so this \
                 is taken for a torn write and cut off"
            );
            file.set_len(end)?;
            file.sync_all()?;
            allocated = end;
        }
        Ending::Clean if len > end => {
            // The zeros are synced before frames go over them, but after a kill they may
            // still be only in the page cache: sync them before relying on them.
            file.sync_data()?;
        }
        Ending::Clean | Ending::Unterminated | Ending::Corrupt(_) => {}
    }
    if allocated < end + FRAME_HEADER as u64 {
        // A log without its zeros (an older build): preallocate now, so that the log ends on
        // synced zeros from the first commit on.
        let target = prealloc_target(end + FRAME_HEADER as u64, end);
        zero_range(&mut file, allocated, target - allocated)?;
        allocated = target;
    }
    file.seek(SeekFrom::Start(end))?;
    let max_rv = replay.max_rv.max(mark);
    Ok(Recovered {
        file,
        records: replay.into_records(),
        max_rv,
        end,
        allocated,
        mark: Mark::open_or_create(dir, max_rv)?,
    })
}

/// The error that stops the server: what is wrong, and what to do.
fn refusal(path: &Path, problem: &str, ceiling: u64) -> BackendError {
    BackendError::Corrupt(format!(
        "{}: {problem}. Refusing to start, so that no acknowledged write is lost in silence. \
         Restore the data directory from a backup, or start with --repair to accept the \
         loss: the server then keeps what can still be read (every frame before the damage), \
         keeps a copy of the old log, and continues the revision clock above revision \
         {ceiling} and everything the log holds",
        path.display()
    ))
}

/// Starts over from what could be read: keeps the old log under another name, writes a
/// snapshot of `replay` as the new log, and continues the clock above `ceiling` too.
fn repair_log(
    dir: &Path,
    replay: Replay,
    kept_up_to: u64,
    ceiling: u64,
    problem: &str,
) -> Result<Recovered, BackendError> {
    let path = dir.join(LOG_FILE);
    let copy = if path.try_exists()? {
        Some(keep_damaged(dir)?)
    } else {
        None
    };
    let log_rv = replay.max_rv;
    let rv = log_rv.max(ceiling);
    let records = replay.into_records();
    tracing::error!(
        path = %path.display(),
        problem,
        kept_up_to_byte = kept_up_to,
        kept_objects = records.len(),
        kept_up_to_revision = log_rv,
        clock_continues_above = rv,
        damaged_copy = copy.as_ref().map(|p| p.display().to_string()).unwrap_or_default(),
        "--repair: ACCEPTING DATA LOSS in the write-ahead log; every write after the kept part \
         is gone, including acknowledged ones"
    );
    open_snapshot(dir, records, rv)
}

/// Writes `records` at `rv` as a new log and opens it.
fn open_snapshot(dir: &Path, records: Vec<Record>, rv: u64) -> Result<Recovered, BackendError> {
    let (file, end, allocated) = write_snapshot(dir, &records, rv, &mut Vec::new(), ROUND_BYTES)?;
    Ok(Recovered {
        file,
        records,
        max_rv: rv,
        end,
        allocated,
        mark: Mark::open_or_create(dir, rv)?,
    })
}

/// Reads and replays the log, and says how it ends. Changes nothing.
fn scan(file: &File) -> io::Result<Scan> {
    let len = file.metadata()?.len();
    let mut replay = Replay::default();
    let mut reader = BufReader::with_capacity(1 << 20, file);
    let mut magic = [0; MAGIC.len()];
    if len < MAGIC.len() as u64 || reader.read_exact(&mut magic).is_err() || magic != MAGIC {
        return Ok(Scan {
            replay,
            end: 0,
            len,
            ending: Ending::Corrupt(
                "byte 0 does not start a kore write-ahead log (missing or unknown header)".into(),
            ),
        });
    }
    let mut pos = MAGIC.len() as u64;
    let mut payload = Vec::new();
    // Where the scan stopped: `Ok(clean)` at the zeros or the end of the file, `Err(None)` at
    // damage, `Err(Some(why))` at a frame that passes its CRC but does not decode.
    let stop: Result<bool, Option<String>> = loop {
        let remaining = len - pos;
        if remaining == 0 {
            break Ok(false);
        }
        // A zero length word ends the log (frames are never empty), and everything after it
        // must be zero: the preallocated part of the file. Anything else there is damage.
        if remaining < FRAME_HEADER as u64 {
            break if rest_is_zero(&mut reader)? {
                Ok(false)
            } else {
                Err(None)
            };
        }
        let mut header = [0; FRAME_HEADER];
        reader.read_exact(&mut header)?;
        if header == [0; FRAME_HEADER] {
            break if rest_is_zero(&mut reader)? {
                Ok(true)
            } else {
                Err(None)
            };
        }
        let (plen, crc) = parse_header(&header);
        if plen < ENTRY_FIXED as u64 || plen > remaining - FRAME_HEADER as u64 {
            break Err(None);
        }
        payload.resize(plen as usize, 0);
        reader.read_exact(&mut payload)?;
        if crc32(&payload) != crc {
            break Err(None);
        }
        // Check the whole frame before applying any of it: a repair keeps whole frames only.
        if let Err(e) = decode_payload(&payload, |_| {}) {
            break Err(Some(e.to_string()));
        }
        decode_payload(&payload, |entry| replay.apply(entry)).expect("decoded above");
        pos += FRAME_HEADER as u64 + plen;
    };
    drop(reader);
    let ending = match stop {
        Ok(true) => Ending::Clean,
        Ok(false) => Ending::Unterminated,
        Err(Some(why)) => Ending::Corrupt(format!(
            "the frame at byte {pos} passes its checksum but does not decode ({why}): a bug, \
             or a log of another format"
        )),
        Err(None) => damage_at(file, pos, len)?,
    };
    Ok(Scan {
        replay,
        end: pos,
        len,
        ending,
    })
}

/// Tells a torn final frame from truncation and corruption, given damage at `at`.
fn damage_at(mut file: &File, at: u64, len: u64) -> io::Result<Ending> {
    file.seek(SeekFrom::Start(at))?;
    let mut rest = Vec::new();
    file.read_to_end(&mut rest)?;
    if let Some(next) = find_intact_frame(&rest[1..]) {
        return Ok(Ending::Corrupt(format!(
            "the frame at byte {at} is damaged but an intact frame follows at byte {}: the log \
             was damaged after it was written",
            at + 1 + next as u64
        )));
    }
    // A torn frame was written over zeros, with at least a zero frame header after it: its
    // length word (true, or with bytes still zero, so no larger) fits inside the file with
    // that header, and the file ends with that many zeros.
    let claimed = match rest.get(..4) {
        Some(word) => u64::from(u32::from_le_bytes(word.try_into().expect("4 bytes"))),
        None => 0,
    };
    let fits = claimed == 0 || 2 * FRAME_HEADER as u64 + claimed <= rest.len() as u64;
    let tail = zero_tail(&rest);
    if fits && rest.len() - tail >= FRAME_HEADER {
        return Ok(Ending::Torn {
            wipe_to: at + tail as u64,
        });
    }
    Ok(Ending::Truncated(if fits {
        format!(
            "the log ends in {} bytes at byte {at} that are no frame and are not followed by \
             the preallocated zeros a frame is always written over: the file was truncated",
            len - at
        )
    } else {
        format!(
            "the frame at byte {at} is {} bytes long but the file ends {} bytes after its \
             start: the file was truncated, and writes after byte {at} are missing",
            FRAME_HEADER as u64 + claimed,
            len - at
        )
    }))
}

/// Whether everything `reader` has left is zero bytes. Consumes it.
fn rest_is_zero(reader: &mut impl BufRead) -> io::Result<bool> {
    loop {
        let chunk = reader.fill_buf()?;
        if chunk.is_empty() {
            return Ok(true);
        }
        if !is_zero(chunk) {
            return Ok(false);
        }
        let n = chunk.len();
        reader.consume(n);
    }
}

/// The offset of the first intact frame (right length, decodable, matching CRC) in `data`.
///
/// Tries every offset, except inside runs of zeros: a frame's length word is never zero, so
/// the first offset worth trying after a zero length word is three bytes before the next
/// non-zero byte. Megabytes of preallocated zeros take one scan, not a check per offset, and
/// candidates that reach into the zeros at the end are decoded without walking them.
fn find_intact_frame(data: &[u8]) -> Option<usize> {
    let last = data.len().checked_sub(FRAME_HEADER + ENTRY_FIXED)?;
    let zeros_from = zero_tail(data);
    let mut at = 0;
    while at <= last {
        if data[at..at + 4] == [0; 4] {
            let nonzero = first_nonzero(&data[at + 4..])?;
            at += 4 + nonzero - 3;
            continue;
        }
        if is_intact_frame(&data[at..], zeros_from.saturating_sub(at + FRAME_HEADER)) {
            return Some(at);
        }
        at += 1;
    }
    None
}

/// Whether `data` starts with an intact frame, given that its payload is all zeros from
/// `zeros_from` on. The checks run cheapest first: the length, decoding (garbage usually
/// fails at its first field), then the CRC.
fn is_intact_frame(data: &[u8], zeros_from: usize) -> bool {
    let (plen, crc) = parse_header(&data[..FRAME_HEADER]);
    let body = &data[FRAME_HEADER..];
    if plen < ENTRY_FIXED as u64 || plen > body.len() as u64 {
        return false;
    }
    let payload = &body[..plen as usize];
    payload_decodes(payload, zeros_from) && crc32(payload) == crc
}
