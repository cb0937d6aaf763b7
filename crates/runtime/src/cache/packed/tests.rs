//! Tests of the packed codec: round trips, sizes, the dictionary's limits.

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
