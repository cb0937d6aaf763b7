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
//!
//! The dictionary only grows. To keep unique user keys out of it, keys of maps under `data`,
//! `binaryData`, `stringData` and `annotations` stay inline, and the dictionary stops taking
//! new symbols at [`MAX_SYMBOLS`]. String values that repeat across objects (`apiVersion`,
//! `kind`, `namespace`, label values) are symbols too.

use super::Map;
use std::sync::RwLock;

use serde::de::{self, DeserializeSeed, IntoDeserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

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
        encode_value(value, out, &mut symbols, false, false, false);
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
        };
        T::deserialize(&mut decoder)
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

pub(super) fn put_varint(out: &mut Vec<u8>, mut n: u64) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

pub(super) fn put_int(out: &mut Vec<u8>, n: i64) {
    if n >= 0 {
        out.push(UINT);
        put_varint(out, n as u64);
    } else {
        out.push(NEGINT);
        put_varint(out, (-(n + 1)) as u64);
    }
}

pub(super) fn put_str(out: &mut Vec<u8>, s: &str, symbols: &mut Symbols, symbol: bool) {
    if symbol && let Some(id) = symbols.intern(s) {
        out.push(SYM);
        put_varint(out, u64::from(id));
        return;
    }
    if let Some(uuid) = parse_uuid(s) {
        out.push(UUID);
        out.extend_from_slice(&uuid);
        return;
    }
    if let Some(n) = parse_digits(s) {
        out.push(DIGITS);
        put_varint(out, n);
        return;
    }
    if let Some(secs) = parse_time(s) {
        out.push(TIME);
        put_int(out, secs);
        return;
    }
    out.push(STR);
    put_varint(out, s.len() as u64);
    out.extend_from_slice(s.as_bytes());
}

fn encode_value(
    value: &Value,
    out: &mut Vec<u8>,
    symbols: &mut Symbols,
    inline_keys: bool,
    symbol_value: bool,
    symbol_children: bool,
) {
    match value {
        Value::Null => out.push(NULL),
        Value::Bool(false) => out.push(FALSE),
        Value::Bool(true) => out.push(TRUE),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                put_int(out, i);
            } else if let Some(u) = n.as_u64() {
                out.push(UINT);
                put_varint(out, u);
            } else {
                out.push(FLOAT);
                out.extend_from_slice(&n.as_f64().unwrap_or(0.0).to_le_bytes());
            }
        }
        Value::String(s) => put_str(out, s, symbols, symbol_value),
        Value::Array(items) => {
            out.push(ARRAY);
            for item in items {
                encode_value(item, out, symbols, false, false, false);
            }
            out.push(END);
        }
        Value::Object(map) => {
            out.push(OBJECT);
            for (k, v) in map {
                if inline_keys {
                    out.push(STR);
                    put_varint(out, k.len() as u64);
                    out.extend_from_slice(k.as_bytes());
                } else {
                    put_str(out, k, symbols, true);
                }
                let child_inline = INLINE_KEYS_UNDER.contains(&k.as_str());
                let child_symbol = symbol_children || SYMBOL_VALUES_OF.contains(&k.as_str());
                let grandchildren = k == "labels";
                encode_value(v, out, symbols, child_inline, child_symbol, grandchildren);
            }
            out.push(END);
        }
    }
}

/// The value of a decimal string that formats back identically (no sign, no leading zero).
fn parse_digits(s: &str) -> Option<u64> {
    let b = s.as_bytes();
    if b.is_empty() || b.len() > 19 || (b[0] == b'0' && b.len() > 1) {
        return None;
    }
    if !b.iter().all(u8::is_ascii_digit) {
        return None;
    }
    s.parse().ok()
}

/// The 16 bytes of a lowercase, hyphenated UUID, if `s` is one.
fn parse_uuid(s: &str) -> Option<[u8; 16]> {
    let b = s.as_bytes();
    if b.len() != 36 || b[8] != b'-' || b[13] != b'-' || b[18] != b'-' || b[23] != b'-' {
        return None;
    }
    let mut out = [0u8; 16];
    let mut nibbles = b
        .iter()
        .enumerate()
        .filter(|(i, _)| !matches!(i, 8 | 13 | 18 | 23))
        .map(|(_, c)| match c {
            b'0'..=b'9' => Some(c - b'0'),
            b'a'..=b'f' => Some(c - b'a' + 10),
            _ => None,
        });
    for byte in &mut out {
        let hi = nibbles.next()??;
        let lo = nibbles.next()??;
        *byte = (hi << 4) | lo;
    }
    Some(out)
}

fn format_uuid(b: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(36);
    for (i, byte) in b.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            s.push('-');
        }
        s.push(HEX[usize::from(byte >> 4)] as char);
        s.push(HEX[usize::from(byte & 15)] as char);
    }
    s
}

/// Seconds since the epoch of a `YYYY-MM-DDTHH:MM:SSZ` string that formats back identically
/// (a real date and time of day, no leap second).
fn parse_time(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    if b.len() != 20
        || b[4] != b'-'
        || b[7] != b'-'
        || b[10] != b'T'
        || b[13] != b':'
        || b[16] != b':'
        || b[19] != b'Z'
    {
        return None;
    }
    let num = |from: usize, to: usize| -> Option<i64> {
        b[from..to].iter().try_fold(0i64, |n, c| {
            c.is_ascii_digit().then(|| n * 10 + i64::from(c - b'0'))
        })
    };
    let (year, month, day) = (num(0, 4)?, num(5, 7)?, num(8, 10)?);
    let (hour, minute, second) = (num(11, 13)?, num(14, 16)?, num(17, 19)?);
    if !(1..=12).contains(&month)
        || day < 1
        || day > days_in_month(year, month)
        || hour > 23
        || minute > 59
        || second > 59
    {
        return None;
    }
    Some(days_from_civil(year, month, day) * 86_400 + hour * 3_600 + minute * 60 + second)
}

/// `secs` since the epoch as `YYYY-MM-DDTHH:MM:SSZ`; `None` outside the years 0 to 9999.
fn format_time(secs: i64) -> Option<String> {
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (year, month, day) = civil_from_days(days);
    if !(0..=9999).contains(&year) {
        return None;
    }
    let mut out = String::with_capacity(20);
    push_digits(&mut out, year, 4);
    let rest = [
        ('-', month),
        ('-', day),
        ('T', rem / 3_600),
        (':', rem / 60 % 60),
        (':', rem % 60),
    ];
    for (separator, value) in rest {
        out.push(separator);
        push_digits(&mut out, value, 2);
    }
    out.push('Z');
    Some(out)
}

/// Appends the last `width` decimal digits of `n` (not negative), zero-padded.
fn push_digits(out: &mut String, n: i64, width: u32) {
    for place in (0..width).rev() {
        let digit = u32::try_from(n / 10_i64.pow(place) % 10).unwrap_or(0);
        out.push(char::from_digit(digit, 10).unwrap_or('0'));
    }
}

fn is_leap(year: i64) -> bool {
    year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (counting in 400-year eras of
/// 146,097 days, with years starting in March so that the leap day comes last).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let year_of_era = y - era * 400;
    let day_of_year = (153 * (month + if month > 2 { -3 } else { 9 }) + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// The date of `days` since 1970-01-01: the inverse of [`days_from_civil`].
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z - era * 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1_460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let mp = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// A serde deserializer over packed bytes.
struct Decoder<'de> {
    input: &'de [u8],
    symbols: &'de [Box<str>],
}

impl<'de> Decoder<'de> {
    fn byte(&mut self) -> Result<u8, DecodeError> {
        let (&b, rest) = self
            .input
            .split_first()
            .ok_or_else(|| DecodeError("unexpected end of packed data".into()))?;
        self.input = rest;
        Ok(b)
    }

    fn peek(&self) -> Result<u8, DecodeError> {
        self.input
            .first()
            .copied()
            .ok_or_else(|| DecodeError("unexpected end of packed data".into()))
    }

    fn varint(&mut self) -> Result<u64, DecodeError> {
        let mut n = 0u64;
        let mut shift = 0;
        loop {
            let b = self.byte()?;
            if shift >= 64 {
                return Err(DecodeError("varint overflows 64 bits".into()));
            }
            n |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(n);
            }
            shift += 7;
        }
    }

    fn take(&mut self, n: usize) -> Result<&'de [u8], DecodeError> {
        if self.input.len() < n {
            return Err(DecodeError("unexpected end of packed data".into()));
        }
        let (head, rest) = self.input.split_at(n);
        self.input = rest;
        Ok(head)
    }

    fn str_body(&mut self) -> Result<&'de str, DecodeError> {
        let len = usize::try_from(self.varint()?)
            .map_err(|_| DecodeError("string length overflows".into()))?;
        std::str::from_utf8(self.take(len)?).map_err(|e| DecodeError(e.to_string()))
    }

    fn symbol(&mut self) -> Result<&'de str, DecodeError> {
        let id = usize::try_from(self.varint()?)
            .map_err(|_| DecodeError("symbol id overflows".into()))?;
        self.symbols
            .get(id)
            .map(|s| &**s)
            .ok_or_else(|| DecodeError(format!("unknown symbol {id}")))
    }

    fn signed(&mut self) -> Result<i64, DecodeError> {
        match self.byte()? {
            UINT => i64::try_from(self.varint()?).map_err(|e| DecodeError(e.to_string())),
            NEGINT => {
                let n = i64::try_from(self.varint()?).map_err(|e| DecodeError(e.to_string()))?;
                Ok(-n - 1)
            }
            t => Err(DecodeError(format!("expected an integer, found tag {t}"))),
        }
    }
}

impl<'de> de::Deserializer<'de> for &mut Decoder<'de> {
    type Error = DecodeError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        match self.byte()? {
            NULL => visitor.visit_unit(),
            FALSE => visitor.visit_bool(false),
            TRUE => visitor.visit_bool(true),
            UINT => visitor.visit_u64(self.varint()?),
            NEGINT => {
                let n = i64::try_from(self.varint()?).map_err(|e| DecodeError(e.to_string()))?;
                visitor.visit_i64(-n - 1)
            }
            FLOAT => {
                let b = self.take(8)?;
                let mut arr = [0u8; 8];
                arr.copy_from_slice(b);
                visitor.visit_f64(f64::from_le_bytes(arr))
            }
            STR => visitor.visit_borrowed_str(self.str_body()?),
            SYM => visitor.visit_borrowed_str(self.symbol()?),
            UUID => visitor.visit_string(format_uuid(self.take(16)?)),
            DIGITS => visitor.visit_string(self.varint()?.to_string()),
            TIME => {
                let secs = self.signed()?;
                let s = format_time(secs).ok_or_else(|| DecodeError("bad timestamp".into()))?;
                visitor.visit_string(s)
            }
            ARRAY => {
                let v = visitor.visit_seq(Items { de: &mut *self })?;
                self.finish()?;
                Ok(v)
            }
            OBJECT => {
                let v = visitor.visit_map(Items { de: &mut *self })?;
                self.finish()?;
                Ok(v)
            }
            t => Err(DecodeError(format!("unexpected tag {t}"))),
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        if self.peek()? == NULL {
            self.byte()?;
            visitor.visit_none()
        } else {
            visitor.visit_some(self)
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, DecodeError> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, DecodeError> {
        match self.peek()? {
            OBJECT => {
                self.byte()?;
                let v = visitor.visit_enum(Variant { de: &mut *self })?;
                self.finish()?;
                Ok(v)
            }
            _ => {
                let name: String = de::Deserialize::deserialize(&mut *self)?;
                visitor.visit_enum(name.into_deserializer())
            }
        }
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf unit unit_struct seq tuple tuple_struct map struct identifier ignored_any
    }
}

impl Decoder<'_> {
    /// Consumes the END of an array or object, skipping anything a visitor left unread.
    fn finish(&mut self) -> Result<(), DecodeError> {
        while self.peek()? != END {
            de::Deserialize::deserialize(&mut *self).map(|de::IgnoredAny| ())?;
        }
        self.byte()?;
        Ok(())
    }
}

/// The elements of an array, or the entries of an object.
struct Items<'a, 'de> {
    de: &'a mut Decoder<'de>,
}

impl<'de> SeqAccess<'de> for Items<'_, 'de> {
    type Error = DecodeError;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, DecodeError> {
        if self.de.peek()? == END {
            return Ok(None);
        }
        seed.deserialize(&mut *self.de).map(Some)
    }
}

impl<'de> MapAccess<'de> for Items<'_, 'de> {
    type Error = DecodeError;

    fn next_key_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, DecodeError> {
        if self.de.peek()? == END {
            return Ok(None);
        }
        seed.deserialize(&mut *self.de).map(Some)
    }

    fn next_value_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<T::Value, DecodeError> {
        seed.deserialize(&mut *self.de)
    }
}

/// An externally tagged enum variant: `{"Variant": value}`.
struct Variant<'a, 'de> {
    de: &'a mut Decoder<'de>,
}

impl<'de> de::EnumAccess<'de> for Variant<'_, 'de> {
    type Error = DecodeError;
    type Variant = Self;

    fn variant_seed<T: DeserializeSeed<'de>>(
        self,
        seed: T,
    ) -> Result<(T::Value, Self), DecodeError> {
        let v = seed.deserialize(&mut *self.de)?;
        Ok((v, self))
    }
}

impl<'de> de::VariantAccess<'de> for Variant<'_, 'de> {
    type Error = DecodeError;

    fn unit_variant(self) -> Result<(), DecodeError> {
        de::Deserialize::deserialize(&mut *self.de).map(|de::IgnoredAny| ())
    }

    fn newtype_variant_seed<T: DeserializeSeed<'de>>(
        self,
        seed: T,
    ) -> Result<T::Value, DecodeError> {
        seed.deserialize(&mut *self.de)
    }

    fn tuple_variant<V: Visitor<'de>>(
        self,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, DecodeError> {
        de::Deserializer::deserialize_any(&mut *self.de, visitor)
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, DecodeError> {
        de::Deserializer::deserialize_any(&mut *self.de, visitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use serde_json::json;

    fn sample() -> Value {
        json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": "cm-1",
                "namespace": "default",
                "uid": "0f8fad5b-d9cb-469f-a165-70867728950e",
                "resourceVersion": "12345",
                "creationTimestamp": "2026-11-21T07:54:32Z",
                "labels": {"app": "demo"},
                "annotations": {"note": "x"},
            },
            "data": {"key-1": "value", "key-2": ""},
            "immutable": false,
        })
    }

    #[test]
    fn packed_json_decodes_back_to_the_same_value() {
        let dict = Dictionary::default();
        let value = json!({
            "a": [1, -1, -9_223_372_036_854_775_808i64, 18_446_744_073_709_551_615u64, 1.5, null, true, false],
            "s": "text", "d": ["0", "12345", "007", "-1", "", "99999999999999999999"],
            "u": "0F8FAD5B-D9CB-469F-A165-70867728950E",
            "t": "2026-11-21T07:54:32.5Z", "nested": {"data": {"k": {"deep": "v"}}},
            "empty": {}, "none": [],
        });
        let bytes = dict.encode(&value);
        let back: Value = dict.decode(&bytes).expect("decodes");
        assert_eq!(back, value);
        let sample = sample();
        let back: Value = dict.decode(&dict.encode(&sample)).expect("decodes");
        assert_eq!(back, sample);
    }

    #[test]
    fn packed_configmap_is_smaller_than_its_json_and_decodes_typed() {
        let dict = Dictionary::default();
        let value = sample();
        let bytes = dict.encode(&value);
        let json_len = serde_json::to_vec(&value).expect("serializes").len();
        assert!(
            bytes.len() * 10 < json_len * 7,
            "{} vs {json_len}",
            bytes.len()
        );
        let cm: ConfigMap = dict.decode(&bytes).expect("decodes");
        let direct: ConfigMap = serde_json::from_value(value).expect("parses");
        assert_eq!(cm, direct);
    }

    #[test]
    fn data_keys_stay_out_of_the_dictionary() {
        let dict = Dictionary::default();
        for i in 0..100 {
            let mut v = sample();
            v["data"] = json!({ format!("unique-{i}"): "x" });
            dict.encode(&v);
        }
        assert!(dict.len() < 30, "{} symbols", dict.len());
    }

    /// The hand-written calendar agrees with jiff's on whole seconds across the years 0–9999,
    /// both ways, and refuses what would not format back identically.
    #[test]
    fn timestamps_pack_exactly_as_jiff_formats_them() {
        let jiff_format = |secs: i64| {
            jiff::Timestamp::from_second(secs)
                .map(|t| t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string())
                .ok()
        };
        let first = -62_167_219_200; // 0000-01-01T00:00:00Z
        let last = 253_402_300_799; // 9999-12-31T23:59:59Z
        let mut secs = first;
        let mut step = 1;
        while secs <= last {
            let text = format_time(secs).expect("in range");
            assert_eq!(Some(&text), jiff_format(secs).as_ref(), "{secs}");
            assert_eq!(parse_time(&text), Some(secs), "{text}");
            secs += step;
            step = (step * 7 + 3) % 9_999_991; // a few thousand irregular strides
        }
        for day in 0..=1_500 {
            // Every day of four years around a leap day, at its last second.
            let secs = 1_704_067_199 + day * 86_400;
            assert_eq!(format_time(secs), jiff_format(secs));
        }
        assert_eq!(format_time(first - 1), None);
        assert_eq!(format_time(last + 1), None);
        for bad in [
            "2024-02-30T00:00:00Z",
            "2023-02-29T00:00:00Z",
            "1900-02-29T00:00:00Z",
            "2024-13-01T00:00:00Z",
            "2024-00-01T00:00:00Z",
            "2024-01-00T00:00:00Z",
            "2024-01-01T24:00:00Z",
            "2024-01-01T00:60:00Z",
            "2024-01-01T00:00:60Z",
            "2024-01-01t00:00:00Z",
            "2024-01-01T00:00:00z",
            "2024-01-01 00:00:00Z",
            "2024-01-01T00:00:00+00:00",
            "+024-01-01T00:00:00Z",
            "2024-1-01T00:00:00ZZ",
        ] {
            assert_eq!(parse_time(bad), None, "{bad}");
        }
        assert_eq!(parse_time("2000-02-29T12:34:56Z"), Some(951_827_696));
    }

    #[test]
    fn truncated_input_is_an_error_not_a_panic() {
        let dict = Dictionary::default();
        let bytes = dict.encode(&sample());
        for cut in 0..bytes.len() {
            assert!(dict.decode::<Value>(&bytes[..cut]).is_err());
        }
    }
}
