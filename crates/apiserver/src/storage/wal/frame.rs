//! The log's on-disk format: the magic, frames, entries, and the CRC that guards a frame.
//!
//! Pure functions over byte buffers; no I/O. The grammar is in the [module docs](super) and
//! in `docs/design/storage-wal.md`. The CRC is CRC-32/IEEE (the zlib and Ethernet CRC),
//! computed by `crc32fast`, which uses the CPU's carry-less multiply where it can.

use std::fmt;

use bytes::Bytes;

use super::super::backend::Record;

/// The first bytes of every log file; the last byte is the format version.
pub(super) const MAGIC: [u8; 8] = *b"KOREWAL\x01";

/// `len:u32 crc:u32` before every payload.
pub(super) const FRAME_HEADER: usize = 8;
/// `rv:u64 key_len:u32 tag:u8`: the smallest entry, so also the smallest payload.
pub(super) const ENTRY_FIXED: usize = 13;
/// The largest payload the `u32` length can describe.
pub(super) const MAX_PAYLOAD: u64 = u32::MAX as u64;
/// A commit stops taking submissions once its payload reaches this size (a single larger
/// submission still goes in one frame). Bounds the buffer and the time between fsyncs.
pub(super) const ROUND_BYTES: usize = 32 << 20;

pub(super) const TAG_PUT: u8 = 0;
pub(super) const TAG_DELETE: u8 = 1;
pub(super) const TAG_SNAPSHOT: u8 = 2;

/// A frame being encoded at the end of a buffer.
pub(super) struct Frame {
    start: usize,
}

impl Frame {
    pub(super) fn begin(buf: &mut Vec<u8>) -> Frame {
        let start = buf.len();
        buf.extend_from_slice(&[0; FRAME_HEADER]);
        Frame { start }
    }

    pub(super) fn payload_len(&self, buf: &[u8]) -> usize {
        buf.len() - self.start - FRAME_HEADER
    }

    /// Fills in the header. Callers keep the payload within [`MAX_PAYLOAD`]; an empty frame
    /// is removed, since a frame holds at least one entry.
    pub(super) fn finish(self, buf: &mut Vec<u8>) {
        let len = self.payload_len(buf);
        if len == 0 {
            buf.truncate(self.start);
            return;
        }
        // A zero length word marks the end of the log, so no frame may have one.
        debug_assert!(len >= ENTRY_FIXED, "a frame holds at least one entry");
        let crc = crc32(&buf[self.start + FRAME_HEADER..]);
        buf[self.start..self.start + 4].copy_from_slice(&(len as u32).to_le_bytes());
        buf[self.start + 4..self.start + 8].copy_from_slice(&crc.to_le_bytes());
    }
}

/// The encoded size of a record's entry.
pub(super) fn record_size(record: &Record) -> u64 {
    let key = record.key.len() as u64;
    match &record.value {
        Some(value) => ENTRY_FIXED as u64 + key + 4 + value.len() as u64,
        None => ENTRY_FIXED as u64 + key,
    }
}

pub(super) fn put_size(key: &str, value: &Bytes) -> u64 {
    (ENTRY_FIXED + key.len() + 4 + value.len()) as u64
}

/// What a snapshot takes besides its records: magic, frame header, snapshot header.
pub(super) fn snapshot_overhead() -> u64 {
    (MAGIC.len() + FRAME_HEADER + ENTRY_FIXED) as u64
}

pub(super) fn encode_record(buf: &mut Vec<u8>, record: &Record) {
    match &record.value {
        Some(value) => encode_entry(buf, record.rv, &record.key, TAG_PUT, Some(value)),
        None => encode_entry(buf, record.rv, &record.key, TAG_DELETE, None),
    }
}

/// Appends one entry. Lengths were checked against [`MAX_PAYLOAD`] by the caller.
pub(super) fn encode_entry(buf: &mut Vec<u8>, rv: u64, key: &str, tag: u8, value: Option<&[u8]>) {
    buf.extend_from_slice(&rv.to_le_bytes());
    buf.extend_from_slice(&(key.len() as u32).to_le_bytes());
    buf.extend_from_slice(key.as_bytes());
    buf.push(tag);
    if let Some(value) = value {
        buf.extend_from_slice(&(value.len() as u32).to_le_bytes());
        buf.extend_from_slice(value);
    }
}

/// One decoded entry, borrowing from its frame.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Entry<'a> {
    pub(super) rv: u64,
    pub(super) key: &'a str,
    /// The new value; `None` for a delete or a snapshot header.
    pub(super) value: Option<&'a [u8]>,
}

/// Why a payload does not decode.
#[derive(Debug)]
pub(super) enum Malformed {
    /// An entry needs this many more bytes than the payload has.
    Short(usize),
    Empty,
    KeyNotUtf8 {
        rv: u64,
    },
    SnapshotWithKey {
        rv: u64,
    },
    UnknownTag {
        tag: u8,
        rv: u64,
    },
}

impl fmt::Display for Malformed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Malformed::Short(n) => write!(f, "an entry ends {n} bytes early"),
            Malformed::Empty => write!(f, "the frame holds no entry"),
            Malformed::KeyNotUtf8 { rv } => {
                write!(f, "the key of the entry at revision {rv} is not UTF-8")
            }
            Malformed::SnapshotWithKey { rv } => {
                write!(f, "the snapshot header at revision {rv} has a key")
            }
            Malformed::UnknownTag { tag, rv } => {
                write!(f, "unknown entry tag {tag} at revision {rv}")
            }
        }
    }
}

/// Decodes every entry of a frame's payload (whose CRC already matched).
pub(super) fn decode_payload<'a>(
    mut payload: &'a [u8],
    mut each: impl FnMut(Entry<'a>),
) -> Result<(), Malformed> {
    if payload.is_empty() {
        return Err(Malformed::Empty);
    }
    while !payload.is_empty() {
        each(next_entry(&mut payload)?);
    }
    Ok(())
}

/// An entry of zeros: revision 0, empty key, a put of an empty value.
pub(super) const ZERO_ENTRY: usize = ENTRY_FIXED + 4;

/// Whether `payload` decodes, knowing that its bytes from `zeros_from` on are all zero:
/// [`decode_payload`] without visiting the entries, and without walking zeros one entry at
/// a time. Zeros decode as entries of [`ZERO_ENTRY`] bytes, so a run of zeros that starts an
/// entry is skipped by as many whole zero entries as it holds, and once an entry starts in
/// the zeros at the end, the rest decodes exactly when its length is a multiple of that. This
/// keeps the search for an intact frame fast when candidate frames reach into megabytes of
/// preallocated zeros.
pub(super) fn payload_decodes(mut payload: &[u8], zeros_from: usize) -> bool {
    let total = payload.len();
    if total == 0 {
        return false;
    }
    while !payload.is_empty() {
        if total - payload.len() >= zeros_from {
            return payload.len().is_multiple_of(ZERO_ENTRY);
        }
        if payload.len() >= ZERO_ENTRY && payload[..ZERO_ENTRY] == [0; ZERO_ENTRY] {
            let run = first_nonzero(payload).unwrap_or(payload.len());
            payload = &payload[run - run % ZERO_ENTRY..];
            continue;
        }
        if next_entry(&mut payload).is_err() {
            return false;
        }
    }
    true
}

/// Decodes the entry at the start of `payload` and moves past it.
pub(super) fn next_entry<'a>(payload: &mut &'a [u8]) -> Result<Entry<'a>, Malformed> {
    fn take<'a>(data: &mut &'a [u8], n: usize) -> Result<&'a [u8], Malformed> {
        if data.len() < n {
            return Err(Malformed::Short(n - data.len()));
        }
        let (head, tail) = data.split_at(n);
        *data = tail;
        Ok(head)
    }
    fn u32_at(data: &mut &[u8]) -> Result<usize, Malformed> {
        let b = take(data, 4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
    }

    let b = take(payload, 8)?;
    let rv = u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]);
    let key_len = u32_at(payload)?;
    let key =
        std::str::from_utf8(take(payload, key_len)?).map_err(|_| Malformed::KeyNotUtf8 { rv })?;
    let tag = take(payload, 1)?[0];
    let value = match tag {
        TAG_PUT => {
            let len = u32_at(payload)?;
            Some(take(payload, len)?)
        }
        TAG_DELETE => None,
        TAG_SNAPSHOT if key.is_empty() => None,
        TAG_SNAPSHOT => return Err(Malformed::SnapshotWithKey { rv }),
        tag => return Err(Malformed::UnknownTag { tag, rv }),
    };
    Ok(Entry { rv, key, value })
}

/// Whether every byte of `data` is zero, eight at a time.
pub(super) fn is_zero(data: &[u8]) -> bool {
    let mut words = data.chunks_exact(8);
    words.all(|w| u64::from_le_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]) == 0)
        && words.remainder().iter().all(|&b| b == 0)
}

pub(super) fn parse_header(header: &[u8]) -> (u64, u32) {
    let len = u32::from_le_bytes([header[0], header[1], header[2], header[3]]);
    let crc = u32::from_le_bytes([header[4], header[5], header[6], header[7]]);
    (u64::from(len), crc)
}

/// Where the zeros at the end of `data` start (`data.len()` if it ends with another byte),
/// eight bytes per step.
pub(super) fn zero_tail(data: &[u8]) -> usize {
    let mut end = data.len();
    for w in data.rchunks_exact(8) {
        if u64::from_le_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]) != 0 {
            break;
        }
        end -= 8;
    }
    while end > 0 && data[end - 1] == 0 {
        end -= 1;
    }
    end
}

/// The index of the first non-zero byte of `data`, eight bytes per step over zeros.
pub(super) fn first_nonzero(data: &[u8]) -> Option<usize> {
    let mut words = data.chunks_exact(8);
    let skipped = words
        .position(|w| u64::from_le_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]) != 0)
        .unwrap_or(data.len() / 8);
    let from = skipped * 8;
    data[from..].iter().position(|&b| b != 0).map(|i| from + i)
}

/// CRC-32/IEEE of `data`, the checksum in every frame header.
pub(super) fn crc32(data: &[u8]) -> u32 {
    crc32fast::hash(data)
}
