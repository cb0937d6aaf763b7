//! Objects encoded as JSON the way kube-apiserver writes them.
//!
//! kube-apiserver encodes a built-in object from its Go struct, so the keys come in the
//! struct's declaration order: `kind` and `apiVersion` (from `TypeMeta`) first, then
//! `metadata`, `spec`, `status`, and inside every nested struct its own field order, with the
//! fields of an embedded `json:",inline"` struct at the embedding position (a `Volume`'s
//! `name`, then its volume source). Map keys (`labels`, `data`, a ResourceList) come sorted,
//! as Go's encoder sorts them. A custom resource is a map all the way down in Kubernetes
//! (`Unstructured`), so its keys come sorted too.
//!
//! [`to_vec`] does the same with a [`serde_json::Value`], whose maps are sorted: it finds the
//! object's Go type from its `apiVersion` and `kind`, and writes each struct's keys in that
//! type's order. The orders are generated (`fields.rs`, by `tools/gen-json-order.py`) from the
//! k8s-pb messages, which declare their fields in Go order, for every top-level kind of
//! k8s-openapi's served version, including `Status` and `Scale`. Anything else — custom
//! resources, keys a type does not know, embedded raw JSON (`RawExtension`, `fieldsV1`, a
//! schema's `default`) — is written sorted.
//!
//! The server stores objects in this form (storage encodes with [`to_vec`]), so reads, lists
//! and watch events send the stored bytes as they are, and stored bytes stay canonical: the
//! same object always encodes to the same bytes.

mod fields;

use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};
use serde_json::Value;

/// What a field holds, for ordering the keys inside it.
#[derive(Clone, Copy, Debug)]
enum Child {
    /// A scalar, a map of scalars or raw JSON: written as it is (maps sorted).
    Leaf,
    /// A message (or a list of them): the generated type with this id.
    Of(usize),
    /// A map whose values are messages of the generated type with this id.
    MapOf(usize),
    /// A message (or a list of them) of a type written here by hand.
    Is(&'static Type),
    /// An embedded object, ordered by its own `apiVersion` and `kind`.
    Embedded,
}

/// One field of a message: JSON name, position in Go order, what it holds.
#[derive(Debug)]
struct Field(&'static str, u16, Child);

/// A message's fields, sorted by JSON name (the order of a `serde_json::Map`).
#[derive(Debug)]
struct Type(&'static [Field]);

use Child::{Is, Leaf, Of};
use fields::{LIST_META, OBJECT_META};

/// meta.k8s.io `PartialObjectMetadata`: `TypeMeta` and `ObjectMeta`.
static PARTIAL_OBJECT_METADATA: Type = Type(&[
    Field("apiVersion", 1, Leaf),
    Field("kind", 0, Leaf),
    Field("metadata", 2, Of(OBJECT_META)),
]);

/// meta.k8s.io `PartialObjectMetadataList`.
static PARTIAL_OBJECT_METADATA_LIST: Type = Type(&[
    Field("apiVersion", 1, Leaf),
    Field("items", 3, Is(&PARTIAL_OBJECT_METADATA)),
    Field("kind", 0, Leaf),
    Field("metadata", 2, Of(LIST_META)),
]);

/// meta.k8s.io `TableColumnDefinition`.
static TABLE_COLUMN: Type = Type(&[
    Field("description", 3, Leaf),
    Field("format", 2, Leaf),
    Field("name", 0, Leaf),
    Field("priority", 4, Leaf),
    Field("type", 1, Leaf),
]);

/// meta.k8s.io `TableRow` (its `object` is embedded raw JSON, written as encoded on its own).
static TABLE_ROW: Type = Type(&[
    Field("cells", 0, Leaf),
    Field("conditions", 1, Leaf),
    Field("object", 2, Child::Embedded),
]);

/// meta.k8s.io `Table`.
static TABLE: Type = Type(&[
    Field("apiVersion", 1, Leaf),
    Field("columnDefinitions", 3, Is(&TABLE_COLUMN)),
    Field("kind", 0, Leaf),
    Field("metadata", 2, Of(LIST_META)),
    Field("rows", 4, Is(&TABLE_ROW)),
]);

/// The key order to write a value with.
#[derive(Clone, Copy)]
enum Shape {
    /// Keys sorted, all the way down.
    Sorted,
    /// A message of this type.
    Struct(&'static Type),
    /// A map of messages of this type.
    MapOf(&'static Type),
    /// A list of a built-in kind: `kind`, `apiVersion`, `metadata`, then `items` of this type
    /// without their own `kind` and `apiVersion`, as Kubernetes writes list items.
    List(&'static Type),
    /// An item of a [`Shape::List`].
    Item(&'static Type),
}

impl Shape {
    fn of(child: Child) -> Shape {
        match child {
            Child::Leaf => Shape::Sorted,
            Child::Of(id) => fields::TYPES.get(id).map_or(Shape::Sorted, Shape::Struct),
            Child::MapOf(id) => fields::TYPES.get(id).map_or(Shape::Sorted, Shape::MapOf),
            Child::Is(ty) => Shape::Struct(ty),
            Child::Embedded => Shape::Sorted,
        }
    }
}

/// The Go type of a top-level object, from its `apiVersion` and `kind`.
fn shape_of(v: &Value) -> Shape {
    let (Some(api_version), Some(kind)) = (
        v.get("apiVersion").and_then(Value::as_str),
        v.get("kind").and_then(Value::as_str),
    ) else {
        return Shape::Sorted;
    };
    if let Some(id) = fields::kind_type(api_version, kind) {
        return Shape::of(Child::Of(id));
    }
    match (api_version, kind) {
        ("meta.k8s.io/v1", "PartialObjectMetadata") => Shape::Struct(&PARTIAL_OBJECT_METADATA),
        ("meta.k8s.io/v1", "PartialObjectMetadataList") => {
            Shape::Struct(&PARTIAL_OBJECT_METADATA_LIST)
        }
        ("meta.k8s.io/v1" | "meta.k8s.io/v1beta1", "Table") => Shape::Struct(&TABLE),
        _ => match kind
            .strip_suffix("List")
            .and_then(|item| fields::kind_type(api_version, item))
            .and_then(|id| fields::TYPES.get(id))
        {
            Some(ty) => Shape::List(ty),
            None => Shape::Sorted,
        },
    }
}

/// Whether `api_version`/`kind` name a built-in kind whose keys [`to_vec`] orders.
pub fn is_ordered_kind(api_version: &str, kind: &str) -> bool {
    fields::kind_type(api_version, kind).is_some()
}

/// Encodes `v` compactly, with the keys of a built-in kind in Kubernetes' order.
///
/// # Errors
///
/// What `serde_json::to_vec` reports (a map with a non-string key cannot occur in a `Value`).
pub fn to_vec(v: &Value) -> serde_json::Result<Vec<u8>> {
    let mut out = Vec::with_capacity(256);
    to_writer(&mut out, v)?;
    Ok(out)
}

/// [`to_vec`] into a writer.
///
/// # Errors
///
/// What the writer reports.
pub fn to_writer<W: std::io::Write>(w: W, v: &Value) -> serde_json::Result<()> {
    Ordered(v, shape_of(v)).serialize(&mut serde_json::Serializer::new(w))
}

/// `v` as an item of a list: like [`to_vec`], without `kind` and `apiVersion` when it is of a
/// built-in kind (Kubernetes sets them on the list only; custom resources keep theirs).
///
/// # Errors
///
/// What `serde_json::to_vec` reports.
pub fn list_item_to_vec(v: &Value) -> serde_json::Result<Vec<u8>> {
    let shape = match shape_of(v) {
        Shape::Struct(ty) => Shape::Item(ty),
        other => other,
    };
    let mut out = Vec::with_capacity(256);
    Ordered(v, shape).serialize(&mut serde_json::Serializer::new(&mut out))?;
    Ok(out)
}

/// The bytes an encoded object of a built-in kind starts with: `{"kind":…,"apiVersion":…`.
pub fn type_meta_prefix(api_version: &str, kind: &str) -> Vec<u8> {
    let mut out = b"{\"kind\":".to_vec();
    let _ = serde_json::to_writer(&mut out, kind);
    out.extend_from_slice(b",\"apiVersion\":");
    let _ = serde_json::to_writer(&mut out, api_version);
    out
}

/// [`to_vec`] as a `String`.
pub fn to_string(v: &Value) -> String {
    let bytes = to_vec(v).unwrap_or_default();
    String::from_utf8(bytes).unwrap_or_default()
}

/// A value to write with the key order of `Shape`.
struct Ordered<'a>(&'a Value, Shape);

impl Serialize for Ordered<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match (self.0, self.1) {
            (_, Shape::Sorted) => self.0.serialize(s),
            (Value::Array(items), Shape::List(_)) => items.serialize(s),
            (Value::Array(items), shape) => {
                let mut seq = s.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(&Ordered(item, shape))?;
                }
                seq.end()
            }
            (Value::Object(map), Shape::MapOf(ty)) => {
                let mut out = s.serialize_map(Some(map.len()))?;
                for (k, v) in map {
                    out.serialize_entry(k, &Ordered(v, Shape::Struct(ty)))?;
                }
                out.end()
            }
            (Value::Object(map), Shape::List(item)) => {
                let mut entries: Vec<(usize, &String, &Value, Shape)> = map
                    .iter()
                    .enumerate()
                    .map(|(i, (k, v))| match k.as_str() {
                        "kind" => (0, k, v, Shape::Sorted),
                        "apiVersion" => (1, k, v, Shape::Sorted),
                        "metadata" => (2, k, v, Shape::of(Child::Of(LIST_META))),
                        "items" => (3, k, v, Shape::Item(item)),
                        _ => (4 + i, k, v, Shape::Sorted),
                    })
                    .collect();
                entries.sort_unstable_by_key(|e| e.0);
                let mut out = s.serialize_map(Some(entries.len()))?;
                for (_, k, v, shape) in entries {
                    out.serialize_entry(k, &Ordered(v, shape))?;
                }
                out.end()
            }
            (Value::Object(map), Shape::Struct(ty)) => write_struct(s, map, ty, false),
            (Value::Object(map), Shape::Item(ty)) => write_struct(s, map, ty, true),
            (scalar, _) => scalar.serialize(s),
        }
    }
}

/// Writes a message's keys in its type's order; `item` leaves out `kind` and `apiVersion`.
fn write_struct<S: Serializer>(
    s: S,
    map: &serde_json::Map<String, Value>,
    ty: &'static Type,
    item: bool,
) -> Result<S::Ok, S::Error> {
    // Both the map's keys and the type's fields are sorted by name: one merge finds each
    // key's rank; keys the type does not know go last, sorted.
    let fields = ty.0;
    let mut entries: Vec<(usize, &String, &Value, Child)> = Vec::with_capacity(map.len());
    let mut at = 0;
    for (i, (k, v)) in map.iter().enumerate() {
        if item && (k == "kind" || k == "apiVersion") {
            continue;
        }
        while at < fields.len() && fields[at].0 < k.as_str() {
            at += 1;
        }
        match fields.get(at) {
            Some(f) if f.0 == k.as_str() => entries.push((usize::from(f.1), k, v, f.2)),
            _ => entries.push((usize::from(u16::MAX) + i, k, v, Child::Leaf)),
        }
    }
    entries.sort_unstable_by_key(|e| e.0);
    let mut out = s.serialize_map(Some(entries.len()))?;
    for (_, k, v, child) in entries {
        let shape = match child {
            Child::Embedded => shape_of(v),
            child => Shape::of(child),
        };
        out.serialize_entry(k, &Ordered(v, shape))?;
    }
    out.end()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn encoded(v: &Value) -> String {
        to_string(v)
    }

    #[test]
    fn a_pod_is_written_in_go_struct_order() {
        let pod = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"uid": "u", "name": "p", "namespace": "ns", "labels": {"b": "1", "a": "2"},
                         "creationTimestamp": "2024-01-01T00:00:00Z", "resourceVersion": "3"},
            "spec": {"restartPolicy": "Always", "containers": [{"name": "c", "image": "i",
                      "resources": {}, "imagePullPolicy": "Always", "ports": [{"protocol": "TCP", "containerPort": 80}]}],
                     "volumes": [{"emptyDir": {}, "name": "v"}], "initContainers": [{"name": "i", "image": "x"}],
                     "dnsPolicy": "ClusterFirst"},
            "status": {"phase": "Pending", "qosClass": "BestEffort"}
        });
        assert_eq!(
            encoded(&pod),
            concat!(
                r#"{"kind":"Pod","apiVersion":"v1","metadata":{"name":"p","namespace":"ns","uid":"u","#,
                r#""resourceVersion":"3","creationTimestamp":"2024-01-01T00:00:00Z","labels":{"a":"2","b":"1"}},"#,
                r#""spec":{"volumes":[{"name":"v","emptyDir":{}}],"initContainers":[{"name":"i","image":"x"}],"#,
                r#""containers":[{"name":"c","image":"i","ports":[{"containerPort":80,"protocol":"TCP"}],"#,
                r#""resources":{},"imagePullPolicy":"Always"}],"restartPolicy":"Always","dnsPolicy":"ClusterFirst"},"#,
                r#""status":{"phase":"Pending","qosClass":"BestEffort"}}"#
            )
        );
    }

    #[test]
    fn custom_resources_and_unknown_keys_stay_sorted() {
        let cr = json!({"apiVersion": "example.com/v1", "kind": "Foo", "spec": {"b": 1, "a": 2}, "metadata": {"name": "x"}});
        assert_eq!(
            encoded(&cr),
            r#"{"apiVersion":"example.com/v1","kind":"Foo","metadata":{"name":"x"},"spec":{"a":2,"b":1}}"#
        );
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "zz": 1, "aa": 2, "data": {"b": "1", "a": "2"}, "metadata": {}});
        assert_eq!(
            encoded(&cm),
            r#"{"kind":"ConfigMap","apiVersion":"v1","metadata":{},"data":{"a":"2","b":"1"},"aa":2,"zz":1}"#
        );
    }

    #[test]
    fn schemas_in_a_crd_are_ordered_through_maps_and_lists() {
        let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "spec": {"versions": [{"served": true, "name": "v1", "storage": true, "schema": {"openAPIV3Schema": {
                "type": "object", "properties": {"spec": {"type": "string", "description": "d"}}}}}],
                "group": "g", "scope": "Namespaced"}});
        assert_eq!(
            encoded(&crd),
            concat!(
                r#"{"kind":"CustomResourceDefinition","apiVersion":"apiextensions.k8s.io/v1","spec":{"group":"g","#,
                r#""scope":"Namespaced","versions":[{"name":"v1","served":true,"storage":true,"schema":{"openAPIV3Schema":"#,
                r#"{"type":"object","properties":{"spec":{"description":"d","type":"string"}}}}}]}}"#
            )
        );
    }
}
