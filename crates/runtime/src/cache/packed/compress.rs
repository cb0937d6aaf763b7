//! Long strings, compressed against a reference: the first long value the store saw in the
//! same place.
//!
//! Long strings in Kubernetes objects are mostly configuration (a ConfigMap's files, a
//! `last-applied-configuration` annotation), and the objects of one cache hold many values
//! of the same shape: one chart rendered into many namespaces, one CA bundle copied into
//! every namespace, one operator's copies of a source. Compressed on its own, 1 KB of such
//! text shrinks by a third at best; compressed with an earlier value of the same key as LZ4's
//! external dictionary, it shrinks to what differs from that value.
//!
//! **Contexts.** A value's context is where it sits: the key of a `data`, `binaryData`,
//! `stringData` or `annotations` entry (hashed, since those keys are not symbols), or the
//! symbol of the field that holds it. The first long value of each context becomes that
//! context's reference, kept for the life of the store, as symbols are: an entry that names
//! a reference can be decoded as long as the store exists, however long a reader holds it.
//! References are bounded in number and bytes; past the bound, values of new contexts are
//! compressed on their own.
//!
//! **Only when it pays.** A value is stored compressed when that saves at least an eighth of
//! it; otherwise it stays as it is (tag 6), so content that does not compress (random
//! tokens, already compressed data) costs nothing but the attempt.

use lz4_flex::block;

use super::encode::put_varint;
use super::{DecodeError, ZSTR};
use crate::cache::Map;

/// Strings at least this long are tried compressed.
pub(crate) const COMPRESS_FROM: usize = 128;

/// Strings longer than this stay as they are (and a packed length above it is refused).
const COMPRESS_UP_TO: usize = 16 << 20;

/// How much of a context's first value becomes its reference (LZ4 reaches 64 KiB back).
const REFERENCE_LEN: usize = 16 * 1024;

/// The most references a store keeps.
const MAX_REFERENCES: usize = 1024;

/// The most bytes of references a store keeps.
const MAX_REFERENCE_BYTES: usize = 1 << 20;

/// The most a compression buffer keeps between values; a longer value's buffer is freed.
const SCRATCH_KEPT: usize = 64 * 1024;

/// The references of one store and a buffer to compress into.
#[derive(Default)]
pub(crate) struct References {
    pub(super) by_id: Vec<Box<[u8]>>,
    by_context: Map<u64, u32>,
    bytes: usize,
    scratch: Vec<u8>,
}

impl References {
    /// Writes `s` compressed (tag, reference id + 1 or 0, length, compressed length, bytes)
    /// if that saves at least an eighth of it; returns whether it wrote anything.
    pub(super) fn put(&mut self, out: &mut Vec<u8>, s: &str, context: u64) -> bool {
        let raw = s.as_bytes();
        if !(COMPRESS_FROM..=COMPRESS_UP_TO).contains(&raw.len()) {
            return false;
        }
        let id = self.reference_for(context, raw);
        let References { by_id, scratch, .. } = self;
        let dict = id.and_then(|id| by_id.get(id as usize)).map(|r| &r[..]);
        scratch.clear();
        scratch.resize(block::get_maximum_output_size(raw.len()), 0);
        let written = match dict {
            Some(dict) => block::compress_into_with_dict(raw, scratch, dict),
            None => block::compress_into(raw, scratch),
        };
        let reference = id.map_or(0, |id| u64::from(id) + 1);
        let plain = 1 + varint_len(raw.len() as u64) + raw.len();
        let pays = |n: usize| {
            let packed =
                1 + varint_len(reference) + varint_len(raw.len() as u64) + varint_len(n as u64) + n;
            packed + raw.len() / 8 <= plain
        };
        let wrote = match written {
            Ok(n) if pays(n) => {
                out.push(ZSTR);
                put_varint(out, reference);
                put_varint(out, raw.len() as u64);
                put_varint(out, n as u64);
                out.extend_from_slice(&scratch[..n]);
                true
            }
            _ => false,
        };
        if scratch.capacity() > SCRATCH_KEPT {
            *scratch = Vec::new();
        }
        wrote
    }

    /// The reference of `context`, made from `raw` if the context has none and the bounds
    /// allow one more.
    fn reference_for(&mut self, context: u64, raw: &[u8]) -> Option<u32> {
        if let Some(&id) = self.by_context.get(&context) {
            return Some(id);
        }
        let len = raw.len().min(REFERENCE_LEN);
        if self.by_id.len() >= MAX_REFERENCES || self.bytes + len > MAX_REFERENCE_BYTES {
            return None;
        }
        let id = u32::try_from(self.by_id.len()).ok()?;
        self.by_id.push(raw[..len].into());
        self.by_context.insert(context, id);
        self.bytes += len;
        Some(id)
    }

    /// How many references the store keeps, and their bytes.
    #[cfg(test)]
    pub(crate) fn size(&self) -> (usize, usize) {
        (self.by_id.len(), self.bytes)
    }
}

impl std::fmt::Debug for References {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("References")
            .field("count", &self.by_id.len())
            .field("bytes", &self.bytes)
            .finish()
    }
}

fn varint_len(n: u64) -> usize {
    (64 - n.max(1).leading_zeros() as usize).div_ceil(7)
}

/// The string of a compressed value whose reference id, length and compressed bytes were
/// read: `reference` is 0 for none, else the id + 1.
pub(super) fn expand(
    references: &[Box<[u8]>],
    reference: u64,
    len: u64,
    compressed: &[u8],
) -> Result<String, DecodeError> {
    let len = usize::try_from(len)
        .ok()
        .filter(|&len| len <= COMPRESS_UP_TO)
        .ok_or_else(|| DecodeError(format!("a compressed string of {len} bytes")))?;
    let mut out = vec![0u8; len];
    let n = if reference == 0 {
        block::decompress_into(compressed, &mut out)
    } else {
        let dict = usize::try_from(reference - 1)
            .ok()
            .and_then(|id| references.get(id))
            .ok_or_else(|| DecodeError(format!("unknown reference {}", reference - 1)))?;
        block::decompress_into_with_dict(compressed, &mut out, dict)
    }
    .map_err(|e| DecodeError(format!("a compressed string: {e}")))?;
    if n != len {
        return Err(DecodeError(format!(
            "a compressed string of {len} bytes expanded to {n}"
        )));
    }
    String::from_utf8(out).map_err(|e| DecodeError(e.to_string()))
}

/// The context of a value under a key that is not a symbol.
pub(super) fn context_of_key(key: &str) -> u64 {
    use std::hash::BuildHasher;
    foldhash::fast::FixedState::with_seed(0x6b6f_7265).hash_one(key)
}

/// The context of a value under a key that is symbol `id`. A key's hash equals one for about
/// one key in 2³³; like any collision of contexts, that costs a poorer reference, never a
/// wrong value (the entry names the reference it was compressed against).
pub(super) fn context_of_symbol(id: u32) -> u64 {
    (1 << 63) | u64::from(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A long value compresses through a buffer of its size, which is not kept afterwards;
    /// a short one's is.
    #[test]
    fn a_long_values_buffer_is_not_kept() {
        let mut refs = References::default();
        let mut out = Vec::new();
        let long = "key: value\n".repeat(20_000);
        assert!(refs.put(&mut out, &long, 1));
        assert!(out.len() < long.len() / 8, "{} bytes", out.len());
        assert!(refs.scratch.capacity() <= SCRATCH_KEPT);
        assert!(refs.put(&mut out, &"line\n".repeat(100), 2));
        assert!(refs.scratch.capacity() > 0);
    }
}
