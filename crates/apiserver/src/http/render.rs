//! Rendering of lists, `Table`s and `PartialObjectMetadata`.
//!
//! Plain lists are assembled from the stored JSON bytes of their items without re-encoding
//! them; tables and metadata views parse what they need.

use bytes::{BufMut, Bytes, BytesMut};
use serde_json::{Map, Value, json};

use crate::api::encoding;
use crate::registry::Resource;
use crate::registry::list::ListOutput;

/// `includeObject` of a Table request.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum IncludeObject {
    /// No object in the rows.
    None,
    /// `PartialObjectMetadata` in each row (the default).
    #[default]
    Metadata,
    /// The whole object in each row.
    Object,
}

impl IncludeObject {
    /// Parses the query value.
    pub fn parse(s: Option<&str>) -> Self {
        match s {
            Some("None") => IncludeObject::None,
            Some("Object") => IncludeObject::Object,
            _ => IncludeObject::Metadata,
        }
    }
}

fn list_metadata(out: &ListOutput, with_remaining: bool) -> Value {
    let mut meta = Map::new();
    meta.insert("resourceVersion".into(), json!(out.rv.to_string()));
    if let Some(c) = &out.continue_token {
        meta.insert("continue".into(), json!(c));
        if with_remaining && let Some(r) = out.remaining {
            meta.insert("remainingItemCount".into(), json!(r));
        }
    }
    Value::Object(meta)
}

/// A list's `metadata` in `ListMeta`'s field order.
fn put_list_metadata(buf: &mut BytesMut, out: &ListOutput) {
    buf.put_slice(b"{\"resourceVersion\":");
    buf.put_slice(json!(out.rv.to_string()).to_string().as_bytes());
    if let Some(c) = &out.continue_token {
        buf.put_slice(b",\"continue\":");
        buf.put_slice(json!(c).to_string().as_bytes());
        if let Some(r) = out.remaining {
            buf.put_slice(b",\"remainingItemCount\":");
            buf.put_slice(r.to_string().as_bytes());
        }
    }
    buf.put_u8(b'}');
}

/// A list, as Kubernetes writes it. Items are copied from their stored bytes.
///
/// A list of a built-in kind is a Go struct: `{"kind":"<Kind>List","apiVersion":…,
/// "metadata":{…},"items":[…]}`, and its items carry no `kind` and `apiVersion` (they lead
/// the stored bytes, see [`encoding`], so they are skipped, not
/// re-encoded). A list of custom resources is a map in Kubernetes (`UnstructuredList`),
/// written with sorted keys, `metadata` included, and its items keep their type.
pub fn list_body(res: &Resource, out: &ListOutput) -> Bytes {
    let api_version = res.api_version();
    let size: usize = out.items.iter().map(Bytes::len).sum::<usize>() + out.items.len() + 257;
    let mut buf = BytesMut::with_capacity(size);
    if !encoding::is_ordered_kind(&api_version, &res.kind) {
        buf.put_slice(b"{\"apiVersion\":");
        buf.put_slice(json!(api_version).to_string().as_bytes());
        buf.put_slice(b",\"items\":[");
        for (i, item) in out.items.iter().enumerate() {
            if i > 0 {
                buf.put_u8(b',');
            }
            buf.put_slice(item);
        }
        buf.put_slice(b"],\"kind\":");
        buf.put_slice(json!(res.list_kind).to_string().as_bytes());
        buf.put_slice(b",\"metadata\":");
        buf.put_slice(list_metadata(out, true).to_string().as_bytes());
        buf.put_slice(b"}\n");
        return buf.freeze();
    }
    let prefix = encoding::type_meta_prefix(&api_version, &res.kind);
    buf.put_slice(b"{\"kind\":");
    buf.put_slice(json!(res.list_kind).to_string().as_bytes());
    buf.put_slice(b",\"apiVersion\":");
    buf.put_slice(json!(api_version).to_string().as_bytes());
    buf.put_slice(b",\"metadata\":");
    put_list_metadata(&mut buf, out);
    buf.put_slice(b",\"items\":[");
    for (i, item) in out.items.iter().enumerate() {
        if i > 0 {
            buf.put_u8(b',');
        }
        put_item_without_type_meta(&mut buf, item, &prefix);
    }
    buf.put_slice(b"]}\n");
    buf.freeze()
}

/// Copies an encoded object without its leading `"kind"` and `"apiVersion"`; re-encodes one
/// that does not start with them (stored by an older server, with sorted keys).
fn put_item_without_type_meta(buf: &mut BytesMut, item: &[u8], prefix: &[u8]) {
    match item.strip_prefix(prefix) {
        Some([b',', rest @ ..]) => {
            buf.put_u8(b'{');
            buf.put_slice(rest);
        }
        Some(rest @ [b'}', ..]) => {
            buf.put_u8(b'{');
            buf.put_slice(rest);
        }
        _ => match serde_json::from_slice::<Value>(item)
            .ok()
            .and_then(|v| encoding::list_item_to_vec(&v).ok())
        {
            Some(bytes) => buf.put_slice(&bytes),
            None => buf.put_slice(item),
        },
    }
}

/// The `PartialObjectMetadata` view of an object.
pub fn partial_metadata(obj: &Value) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": obj.get("metadata").cloned().unwrap_or_else(|| json!({})),
    })
}

/// A `PartialObjectMetadataList`.
pub fn metadata_list(out: &ListOutput) -> Value {
    let items: Vec<Value> = out
        .items
        .iter()
        .filter_map(|b| serde_json::from_slice::<Value>(b).ok())
        .map(|v| partial_metadata(&v))
        .collect();
    json!({
        "kind": "PartialObjectMetadataList",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": list_metadata(out, true),
        "items": items,
    })
}

/// The current time in seconds since the epoch, for Age cells.
pub fn now_seconds() -> i64 {
    jiff::Timestamp::now().as_second()
}

/// A `Table` of `objects`.
pub fn table(
    res: &Resource,
    version: &str,
    objects: &[Value],
    list: Option<&ListOutput>,
    include: IncludeObject,
    with_columns: bool,
) -> Value {
    let now = now_seconds();
    let rows: Vec<Value> = objects
        .iter()
        .map(|obj| {
            let mut row = Map::new();
            row.insert("cells".into(), Value::Array(res.printer.cells(obj, now)));
            match include {
                IncludeObject::None => {}
                IncludeObject::Metadata => {
                    row.insert("object".into(), partial_metadata(obj));
                }
                IncludeObject::Object => {
                    row.insert("object".into(), obj.clone());
                }
            }
            Value::Object(row)
        })
        .collect();
    let metadata = match list {
        Some(out) => {
            let mut m = list_metadata(out, false);
            if let Some(map) = m.as_object_mut() {
                map.entry("continue").or_insert_with(|| json!(""));
            }
            m
        }
        None => json!({}),
    };
    let columns = if with_columns {
        res.printer.columns()
    } else {
        Value::Null
    };
    json!({
        "kind": "Table",
        "apiVersion": format!("meta.k8s.io/{version}"),
        "metadata": metadata,
        "columnDefinitions": columns,
        "rows": rows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(bytes: &[u8]) -> String {
        let mut buf = BytesMut::new();
        put_item_without_type_meta(
            &mut buf,
            bytes,
            &encoding::type_meta_prefix("v1", "ConfigMap"),
        );
        String::from_utf8(buf.to_vec()).expect("utf-8")
    }

    #[test]
    fn list_items_lose_their_type_whether_stored_in_go_order_or_sorted() {
        assert_eq!(
            item(br#"{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"a"},"data":{"k":"v"}}"#),
            r#"{"metadata":{"name":"a"},"data":{"k":"v"}}"#
        );
        assert_eq!(item(br#"{"kind":"ConfigMap","apiVersion":"v1"}"#), "{}");
        // Stored by an older server, with sorted keys: re-encoded in Go order.
        assert_eq!(
            item(br#"{"apiVersion":"v1","data":{"k":"v"},"kind":"ConfigMap","metadata":{"uid":"u","name":"a"}}"#),
            r#"{"metadata":{"name":"a","uid":"u"},"data":{"k":"v"}}"#
        );
    }
}
