//! The limits the server enforces on what it accepts and what it stores, and the checks
//! behind them.
//!
//! Every limit is listed, with the error it produces, in the "Limits" section of
//! `docs/design/apiserver.md`. The request body limit is [`MAX_BODY_BYTES`]; label and
//! annotation sizes are checked with the rest of the object metadata in
//! `api::validation`.
//!
//! # Nesting depth
//!
//! One nesting limit, [`MAX_DEPTH`], holds for every object the server stores: the registry
//! checks it before every write (a 4xx), and storage refuses to encode anything deeper as a
//! last line of defence, so nothing is stored that the server and its clients cannot read back.
//! The depth of a JSON value is the number of arrays and objects on its deepest path: `1` is 0
//! deep, `{}` is 1, `{"a":[1]}` is 2.
//!
//! The checks here never recurse, so they are safe on values of any depth; the rest of the
//! server (serialization, cloning, dropping a [`Value`]) recurses and relies on the limit.

use serde_json::Value;

/// The largest request body accepted (3 MiB, as Kubernetes' `MaxRequestBodyBytes`).
pub const MAX_BODY_BYTES: usize = 3 * 1024 * 1024;

/// The deepest an object may be nested (arrays and objects on its deepest path).
///
/// serde_json, on the server and in Rust clients, refuses documents nested 128 levels or more,
/// and a response wraps an object in up to four more levels (a watch event of a Table row's
/// object); 100 leaves that room and a margin for clients that embed objects in their own
/// documents.
pub const MAX_DEPTH: usize = 100;

/// The most operations a JSON patch may carry (Kubernetes' `maxJSONPatchOperations`).
pub const MAX_JSON_PATCH_OPERATIONS: usize = 10_000;

/// The most bytes the `copy` operations of one JSON patch may add, counted as the JSON
/// encoding of each copied value (Kubernetes' `JSONPatchMaxCopyBytes`, 3 MiB).
pub const MAX_JSON_PATCH_COPY_BYTES: usize = 3 * 1024 * 1024;

/// The depth of `v` (see the module docs), without recursion.
pub fn depth(v: &Value) -> usize {
    let mut deepest = 0;
    let mut stack = vec![(v, 0usize)];
    while let Some((v, above)) = stack.pop() {
        match v {
            Value::Array(items) => {
                deepest = deepest.max(above + 1);
                stack.extend(items.iter().map(|i| (i, above + 1)));
            }
            Value::Object(map) => {
                deepest = deepest.max(above + 1);
                stack.extend(map.values().map(|i| (i, above + 1)));
            }
            _ => {}
        }
    }
    deepest
}

/// Whether `v` is nested deeper than `limit`; stops at the first node past it.
pub fn deeper_than(v: &Value, limit: usize) -> bool {
    let mut stack = vec![(v, 0usize)];
    while let Some((v, above)) = stack.pop() {
        match v {
            Value::Array(_) | Value::Object(_) if above + 1 > limit => return true,
            Value::Array(items) => stack.extend(items.iter().map(|c| (c, above + 1))),
            Value::Object(map) => stack.extend(map.values().map(|c| (c, above + 1))),
            _ => {}
        }
    }
    false
}

/// The depth of a JSON document given as bytes, by a scan that skips strings (no parsing, no
/// recursion). Malformed input gets a best-effort answer.
pub fn encoded_depth(json: &[u8]) -> usize {
    let mut deepest = 0usize;
    let mut level = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for &b in json {
        if in_string {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                level += 1;
                deepest = deepest.max(level);
            }
            b']' | b'}' => level = level.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

/// The length of `v`'s JSON encoding, or `None` once it passes `budget` (the encoder stops
/// there, so nothing larger than the budget is ever produced).
pub fn encoded_len_within(v: &Value, budget: usize) -> Option<usize> {
    struct Counter {
        n: usize,
        budget: usize,
    }
    impl std::io::Write for Counter {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.n += buf.len();
            if self.n > self.budget {
                return Err(std::io::Error::other("over budget"));
            }
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut c = Counter { n: 0, budget };
    serde_json::to_writer(&mut c, v).ok().map(|()| c.n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn nested(levels: usize) -> Value {
        let mut v = json!(1);
        for _ in 0..levels {
            v = json!([v]);
        }
        v
    }

    #[test]
    fn depth_counts_arrays_and_objects_on_the_deepest_path() {
        assert_eq!(depth(&json!(1)), 0);
        assert_eq!(depth(&json!({})), 1);
        assert_eq!(depth(&json!({"a": [1], "b": {"c": {"d": []}}})), 4);
        assert_eq!(depth(&nested(100)), 100);
        assert!(!deeper_than(&nested(100), 100));
        assert!(deeper_than(&nested(101), 100));
        assert!(!deeper_than(&json!("x"), 0));
    }

    #[test]
    fn encoded_depth_matches_the_value_and_ignores_brackets_in_strings() {
        for v in [
            json!({"a": "[[[{{{", "b": ["\"]", {"c": "\\"}]}),
            nested(130),
            json!([]),
        ] {
            let bytes = serde_json::to_vec(&v).expect("encodes");
            assert_eq!(encoded_depth(&bytes), depth(&v), "{v}");
        }
    }

    #[test]
    fn serde_json_reads_what_the_limit_allows_and_more() {
        // The limit must stay below what serde_json can parse, wrappers included.
        let bytes = serde_json::to_vec(&json!({"a": {"b": {"c": {"d": nested(MAX_DEPTH)}}}}))
            .expect("encodes");
        serde_json::from_slice::<Value>(&bytes).expect("readable with four wrapping levels");
    }

    #[test]
    fn encoded_len_stops_at_the_budget() {
        let v = json!({"a": "x".repeat(100)});
        let n = serde_json::to_vec(&v).expect("encodes").len();
        assert_eq!(encoded_len_within(&v, n), Some(n));
        assert_eq!(encoded_len_within(&v, n - 1), None);
    }
}
