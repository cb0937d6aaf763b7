//! The packed form the cache keeps objects in: a compact, self-describing binary encoding of
//! the object's JSON, decoded straight into `K` with serde on read.
//!
//! Why not keep `Arc<K>`: a k8s-openapi struct costs several times its JSON (every `String`,
//! `BTreeMap` node and `Option` field is its own allocation or padding), so 100,000 cached
//! ConfigMaps would cost hundreds of megabytes. The packed form is smaller than the JSON the
//! server sent: object keys become symbols of a dictionary shared by the whole store, numbers
//! are varints, UIDs are 16 bytes and whole-second RFC 3339 timestamps are varints.
//!
//! Layout: one tag byte per value, then its payload.
//!
//! | tag | value | payload |
//! |-----|-------|---------|
//! | 0 | null | — |
//! | 1, 2 | false, true | — |
//! | 3 | non-negative integer | LEB128 varint |
//! | 4 | negative integer `n` | varint of `-(n + 1)` |
//! | 5 | float | 8 bytes little-endian |
//! | 6 | string | varint length, UTF-8 bytes |
//! | 7 | symbol (string from the dictionary) | varint id |
//! | 8 | array | values, then tag 10 |
//! | 9 | object | (key, value) pairs, then tag 10; a key is a tag 6 or 7 string |
//! | 10 | end of array or object | — |
//! | 11 | lowercase UUID string | 16 bytes |
//! | 12 | `YYYY-MM-DDTHH:MM:SSZ` timestamp string | varint seconds since 1970 (signed as tag 3/4) |
//! | 13 | canonical decimal string (a resourceVersion) | varint |
//! | 14 | long string, LZ4-compressed | varint reference id + 1 (0: none), varint length, varint compressed length, the LZ4 block |
//!
//! The dictionary only grows. To keep unique user keys out of it, keys of maps under `data`,
//! `binaryData`, `stringData` and `annotations` stay inline, and the dictionary stops taking
//! new symbols at [`MAX_SYMBOLS`]. String values that repeat across objects (`apiVersion`,
//! `kind`, `namespace`, label values) are symbols too. Strings of 128 bytes or more are
//! compressed when that pays, against the first long value the store saw in the same place
//! (`compress`).
//!
//! This file holds the tags and the dictionary; `encode` writes the packed form, `decode`
//! reads it into any `Deserialize` type, `strings` converts the strings stored compactly
//! (UUIDs, timestamps, decimal strings) and `compress` the long ones.

mod compress;
mod decode;
mod encode;
mod strings;

use std::sync::RwLock;

use serde::de;
use serde_json::Value;

use super::Map;
use decode::Decoder;
use encode::encode_value;

pub(super) use encode::{put_int, put_key, put_str, put_varint};

pub(super) const NULL: u8 = 0;

pub(super) const FALSE: u8 = 1;

pub(super) const TRUE: u8 = 2;

pub(super) const UINT: u8 = 3;

const NEGINT: u8 = 4;

pub(super) const FLOAT: u8 = 5;

pub(super) const STR: u8 = 6;

const SYM: u8 = 7;

pub(super) const ARRAY: u8 = 8;

pub(super) const OBJECT: u8 = 9;

pub(super) const END: u8 = 10;

const UUID: u8 = 11;

const TIME: u8 = 12;

const DIGITS: u8 = 13;

const ZSTR: u8 = 14;

/// The most symbols a dictionary takes; later new keys stay inline.
pub(crate) const MAX_SYMBOLS: usize = 16 * 1024;

/// Object keys whose maps hold user-chosen keys that rarely repeat across objects.
pub(super) const INLINE_KEYS_UNDER: [&str; 4] = ["data", "binaryData", "stringData", "annotations"];

/// Keys whose string values repeat across objects and are worth a symbol.
pub(super) const SYMBOL_VALUES_OF: [&str; 3] = ["apiVersion", "kind", "namespace"];

/// The symbol table shared by every object of one store.
#[derive(Debug, Default)]
pub(crate) struct Dictionary {
    inner: RwLock<Symbols>,
}

#[derive(Debug, Default)]
pub(super) struct Symbols {
    by_id: Vec<Box<str>>,
    by_name: Map<Box<str>, u32>,
    references: compress::References,
}

impl Symbols {
    fn intern(&mut self, s: &str) -> Option<u32> {
        if let Some(id) = self.by_name.get(s) {
            return Some(*id);
        }
        if self.by_id.len() >= MAX_SYMBOLS {
            return None;
        }
        let id = u32::try_from(self.by_id.len()).ok()?;
        self.by_id.push(s.into());
        self.by_name.insert(s.into(), id);
        Some(id)
    }
}

/// A packed value failed to decode into the requested type.
#[derive(Debug, thiserror::Error)]
#[error("decoding a cached object: {0}")]
pub(crate) struct DecodeError(String);

impl de::Error for DecodeError {
    fn custom<T: std::fmt::Display>(msg: T) -> Self {
        DecodeError(msg.to_string())
    }
}

impl Dictionary {
    /// Packs `value`.
    #[cfg(test)]
    pub(crate) fn encode(&self, value: &Value) -> Vec<u8> {
        let mut out = Vec::new();
        self.encode_into(value, &mut out);
        out
    }

    /// Packs `value`, appending to `out` (a scratch buffer, so packing allocates nothing).
    pub(crate) fn encode_into(&self, value: &Value, out: &mut Vec<u8>) {
        let mut symbols = self
            .inner
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        encode_value(value, out, &mut symbols, false, false, false, 0);
    }

    /// Packs a typed object from its `Serialize` impl, appending to `out`; decodes as
    /// packing its JSON would (see [`super::typed`]).
    pub(crate) fn encode_typed<T: serde::Serialize + ?Sized>(
        &self,
        value: &T,
        out: &mut Vec<u8>,
    ) -> Result<(), super::typed::EncodeError> {
        let mut symbols = self
            .inner
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        super::typed::encode(value, out, &mut symbols)
    }

    /// Decodes packed `bytes` into a `T`.
    pub(crate) fn decode<T: de::DeserializeOwned>(&self, bytes: &[u8]) -> Result<T, DecodeError> {
        let symbols = self
            .inner
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut decoder = Decoder {
            input: bytes,
            symbols: &symbols.by_id,
            references: &symbols.references.by_id,
        };
        T::deserialize(&mut decoder)
    }

    /// How many compression references the dictionary holds, and their bytes.
    #[cfg(test)]
    pub(crate) fn references(&self) -> (usize, usize) {
        self.inner
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .references
            .size()
    }

    /// How many symbols the dictionary holds.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.inner
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .by_id
            .len()
    }
}

#[cfg(test)]
mod tests;
