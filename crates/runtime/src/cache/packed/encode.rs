//! Encoding a JSON value into the packed form: varints, strings (inline, as symbols or
//! compressed), and the compact forms of UUIDs, timestamps and decimal strings.

use serde_json::Value;

use super::compress::{context_of_key, context_of_symbol};
use super::strings::{parse_digits, parse_time, parse_uuid};
use super::{
    ARRAY, DIGITS, END, FALSE, FLOAT, INLINE_KEYS_UNDER, NEGINT, NULL, OBJECT, STR, SYM,
    SYMBOL_VALUES_OF, Symbols, TIME, TRUE, UINT, UUID,
};

pub(in crate::cache) fn put_varint(out: &mut Vec<u8>, mut n: u64) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

pub(in crate::cache) fn put_int(out: &mut Vec<u8>, n: i64) {
    if n >= 0 {
        out.push(UINT);
        put_varint(out, n as u64);
    } else {
        out.push(NEGINT);
        put_varint(out, (-(n + 1)) as u64);
    }
}

/// Writes the string value `s`: a symbol if `symbol` and the dictionary takes it, a compact
/// UUID, decimal or timestamp, compressed if it is long and that pays (`context` is where it
/// sits, see [`super::compress`]), else as it is.
pub(in crate::cache) fn put_str(
    out: &mut Vec<u8>,
    s: &str,
    symbols: &mut Symbols,
    symbol: bool,
    context: u64,
) {
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
    if symbols.references.put(out, s, context) {
        return;
    }
    out.push(STR);
    put_varint(out, s.len() as u64);
    out.extend_from_slice(s.as_bytes());
}

/// Writes an object key: inline in maps of user keys (`inline`), else a symbol while the
/// dictionary takes new ones. Returns the context of the value under it.
pub(in crate::cache) fn put_key(
    out: &mut Vec<u8>,
    key: &str,
    symbols: &mut Symbols,
    inline: bool,
) -> u64 {
    if !inline && let Some(id) = symbols.intern(key) {
        out.push(SYM);
        put_varint(out, u64::from(id));
        return context_of_symbol(id);
    }
    if inline {
        out.push(STR);
        put_varint(out, key.len() as u64);
        out.extend_from_slice(key.as_bytes());
    } else {
        put_str(out, key, symbols, false, 0);
    }
    context_of_key(key)
}

pub(super) fn encode_value(
    value: &Value,
    out: &mut Vec<u8>,
    symbols: &mut Symbols,
    inline_keys: bool,
    symbol_value: bool,
    symbol_children: bool,
    context: u64,
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
        Value::String(s) => put_str(out, s, symbols, symbol_value, context),
        Value::Array(items) => {
            out.push(ARRAY);
            for item in items {
                encode_value(item, out, symbols, false, false, false, context);
            }
            out.push(END);
        }
        Value::Object(map) => {
            out.push(OBJECT);
            for (k, v) in map {
                let context = put_key(out, k, symbols, inline_keys);
                let child_inline = INLINE_KEYS_UNDER.contains(&k.as_str());
                let child_symbol = symbol_children || SYMBOL_VALUES_OF.contains(&k.as_str());
                let grandchildren = k == "labels";
                encode_value(
                    v,
                    out,
                    symbols,
                    child_inline,
                    child_symbol,
                    grandchildren,
                    context,
                );
            }
            out.push(END);
        }
    }
}
