//! Tests of the packed codec: round trips, sizes, the dictionary's limits.

use super::compress::COMPRESS_FROM;
use super::strings::{format_time, parse_time};
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

/// A configuration file as a chart renders it for one release: the same text, a few values
/// of its own.
fn config_file(i: usize) -> String {
    format!(
        "server:\n  port: {}\n  shutdown: graceful\nspring:\n  application:\n    name: orders-{i}\n  \
         datasource:\n    url: jdbc:postgresql://db-{i}.prod.svc.cluster.local:5432/orders\n    \
         username: orders_{i}\n    hikari:\n      maximum-pool-size: 20\n      \
         connection-timeout: 30000\nmanagement:\n  endpoints:\n    web:\n      exposure:\n        \
         include: health,info,prometheus\nlogging:\n  level:\n    root: INFO\n    \
         com.example.orders: DEBUG\n  token: {:016x}\n",
        8000 + i % 1000,
        (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)
    )
}

/// Text that does not compress: a hex rendering of a pseudo-random (splitmix64) stream.
fn noise(seed: u64, len: usize) -> String {
    let mut x = seed;
    (0..len)
        .map(|_| {
            x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = x;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^= z >> 31;
            char::from(b"0123456789abcdef"[(z & 15) as usize])
        })
        .collect()
}

fn with_file(i: usize, key: &str, text: String) -> Value {
    let mut v = sample();
    v["metadata"]["name"] = json!(format!("cm-{i}"));
    v["data"] = json!({ key: text });
    v
}

#[test]
fn long_values_compress_against_the_first_in_their_place_and_decode_back() {
    let dict = Dictionary::default();
    let first = dict.encode(&with_file(0, "application.yaml", config_file(0)));
    let mut sizes = Vec::new();
    for i in 1..50 {
        let value = with_file(i, "application.yaml", config_file(i));
        let bytes = dict.encode(&value);
        let back: Value = dict.decode(&bytes).expect("decodes");
        assert_eq!(back, value);
        let typed: ConfigMap = dict.decode(&bytes).expect("decodes typed");
        assert_eq!(
            typed.data.as_ref().and_then(|d| d.get("application.yaml")),
            Some(&config_file(i))
        );
        sizes.push(bytes.len());
    }
    let text = config_file(7).len();
    let bare = dict
        .encode(&with_file(0, "application.yaml", String::new()))
        .len();
    // The first file is the reference itself; each later one keeps only what differs from
    // it: a few dozen bytes of ~500.
    let largest = sizes.iter().copied().max().unwrap_or_default();
    assert!(
        first.len() < bare + 40,
        "first {}, bare {bare}",
        first.len()
    );
    assert!(
        largest < bare + text / 6,
        "{sizes:?}, bare {bare}, text {text}"
    );
    assert_eq!(dict.references().0, 1, "one place, one reference");
}

#[test]
fn a_value_that_does_not_compress_stays_as_it_is() {
    let dict = Dictionary::default();
    // Under the threshold a value is not even tried: its text is in the bytes as it is.
    let short_text = noise(1, COMPRESS_FROM - 1);
    let short = dict.encode(&with_file(0, "k", short_text.clone()));
    assert!(
        short
            .windows(short_text.len())
            .any(|w| w == short_text.as_bytes())
    );
    let plain_len = short.len();
    // The first long value of the place becomes its reference (and so packs small).
    dict.encode(&with_file(1, "token", noise(2, 1_000)));
    for seed in 3..10 {
        let text = noise(seed, 1_000);
        let value = with_file(1, "token", text.clone());
        let bytes = dict.encode(&value);
        // Stored as text: the packed object holds the value's bytes in full, plus no more
        // than the tag and length of any other string.
        assert!(
            bytes.windows(text.len()).any(|w| w == text.as_bytes()),
            "seed {seed}: compressed though it did not pay"
        );
        let back: Value = dict.decode(&bytes).expect("decodes");
        assert_eq!(back, value);
    }
    assert!(plain_len < 2 * COMPRESS_FROM);
}

#[test]
fn references_are_bounded_in_number_and_bytes() {
    let dict = Dictionary::default();
    for i in 0..3_000 {
        let value = with_file(i, &format!("file-{i}.yaml"), config_file(i));
        let bytes = dict.encode(&value);
        if i % 500 == 0 {
            let back: Value = dict.decode(&bytes).expect("decodes");
            assert_eq!(back, value);
        }
    }
    let (count, bytes) = dict.references();
    assert!(
        count <= 1024 && bytes <= 1 << 20,
        "{count} references, {bytes} bytes"
    );
    assert!(
        count > 100,
        "{count}: every new place took one while the bounds allowed"
    );
    // Past the bounds, a value of a new place compresses on its own and still decodes.
    let value = with_file(9_999, "late.yaml", config_file(9_999).repeat(3));
    let back: Value = dict.decode(&dict.encode(&value)).expect("decodes");
    assert_eq!(back, value);
}

/// Every single-byte change and every cut of a packed object holding compressed strings
/// decodes to an error or to some value, never to a panic or an unbounded allocation.
#[test]
fn damaged_compressed_values_are_errors_not_panics() {
    let dict = Dictionary::default();
    dict.encode(&with_file(0, "application.yaml", config_file(0)));
    let mut value = with_file(1, "application.yaml", config_file(1));
    value["data"]["alone.yaml"] = json!(config_file(2).repeat(2));
    let bytes = dict.encode(&value);
    assert!(bytes.contains(&ZSTR));
    for cut in 0..bytes.len() {
        assert!(dict.decode::<Value>(&bytes[..cut]).is_err());
    }
    for at in 0..bytes.len() {
        for change in [0x01, 0x80, 0xff] {
            let mut damaged = bytes.clone();
            damaged[at] ^= change;
            let _ = dict.decode::<Value>(&damaged);
        }
    }
    // A length beyond the bound is refused before anything is allocated for it.
    let mut huge = vec![ZSTR, 0];
    put_varint(&mut huge, 1 << 40);
    put_varint(&mut huge, 1);
    huge.push(0);
    assert!(dict.decode::<Value>(&huge).is_err());
}
