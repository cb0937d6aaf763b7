//! Packing a typed object straight from its `Serialize` impl, so that an object parsed from
//! the server's JSON into `K` is packed without a `serde_json::Value` in between and without
//! decoding the packed bytes back (the informer keeps the `K` it parsed).
//!
//! The bytes follow the layout in [`super::packed`], with the same choices of what becomes a
//! symbol and what stays inline, so they decode exactly as packing the object's JSON would.
//! Two differences in the bytes, neither visible after decoding: struct fields come in
//! declaration order rather than sorted, and fields the type does not know are absent (the
//! object was parsed into `K` first).

use serde::Serialize;
use serde::ser::{self, Impossible};

use super::packed::{
    ARRAY, END, FALSE, FLOAT, INLINE_KEYS_UNDER, NULL, OBJECT, SYMBOL_VALUES_OF, Symbols, TRUE,
    UINT, put_int, put_key, put_str, put_varint,
};

/// A typed object did not serialize (a map key that is not a string, or a `Serialize` impl
/// that failed).
#[derive(Debug, thiserror::Error)]
#[error("packing an object: {0}")]
pub(crate) struct EncodeError(String);

impl ser::Error for EncodeError {
    fn custom<T: std::fmt::Display>(msg: T) -> Self {
        EncodeError(msg.to_string())
    }
}

/// How the value being written is packed, decided by the keys above it.
#[derive(Clone, Copy, Default)]
struct Place {
    /// The value is an object whose keys stay inline (under `data`, `annotations`…).
    inline_keys: bool,
    /// The value, if a string, becomes a symbol (`kind`, `namespace`, a label value).
    symbol_value: bool,
    /// The value is an object whose string values become symbols (`labels`).
    symbol_children: bool,
    /// Where a long string value sits, for its compression (see `packed::compress`).
    context: u64,
}

impl Place {
    /// Where the value under `key` of an object in this place goes.
    /// `context` is what writing the key returned.
    fn child(self, key: &str, context: u64) -> Place {
        Place {
            inline_keys: INLINE_KEYS_UNDER.contains(&key),
            symbol_value: self.symbol_children || SYMBOL_VALUES_OF.contains(&key),
            symbol_children: key == "labels",
            context,
        }
    }

    /// Where the elements of an array in this place go.
    fn element(self) -> Place {
        Place {
            context: self.context,
            ..Place::default()
        }
    }
}

/// Packs `value` into `out`.
pub(crate) fn encode<T: Serialize + ?Sized>(
    value: &T,
    out: &mut Vec<u8>,
    symbols: &mut Symbols,
) -> Result<(), EncodeError> {
    value.serialize(Packer {
        out,
        symbols,
        place: Place::default(),
    })
}

struct Packer<'a> {
    out: &'a mut Vec<u8>,
    symbols: &'a mut Symbols,
    place: Place,
}

impl<'a> Packer<'a> {
    fn reborrow(&mut self, place: Place) -> Packer<'_> {
        Packer {
            out: self.out,
            symbols: self.symbols,
            place,
        }
    }

    /// Writes an object key; returns the context of the value under it.
    fn key(&mut self, key: &str) -> u64 {
        put_key(self.out, key, self.symbols, self.place.inline_keys)
    }

    /// `{variant: …}`, as serde_json writes an enum variant that carries data; returns the
    /// packer for the value.
    fn open_variant(mut self, variant: &str) -> Compound<'a> {
        self.out.push(OBJECT);
        let context = self.key(variant);
        let place = self.place.child(variant, context);
        Compound {
            packer: self,
            place,
            closes: 2,
        }
    }
}

/// A sequence, map or struct being written; `closes` END tags are written when it ends.
struct Compound<'a> {
    packer: Packer<'a>,
    /// The place of the values inside (for a struct or map: the map's own place).
    place: Place,
    closes: usize,
}

impl Compound<'_> {
    fn end(self) {
        for _ in 0..self.closes {
            self.packer.out.push(END);
        }
    }
}

impl<'a> ser::Serializer for Packer<'a> {
    type Ok = ();
    type Error = EncodeError;
    type SerializeSeq = Compound<'a>;
    type SerializeTuple = Compound<'a>;
    type SerializeTupleStruct = Compound<'a>;
    type SerializeTupleVariant = Compound<'a>;
    type SerializeMap = MapPacker<'a>;
    type SerializeStruct = Compound<'a>;
    type SerializeStructVariant = Compound<'a>;

    fn serialize_bool(self, v: bool) -> Result<(), EncodeError> {
        self.out.push(if v { TRUE } else { FALSE });
        Ok(())
    }

    fn serialize_i8(self, v: i8) -> Result<(), EncodeError> {
        self.serialize_i64(i64::from(v))
    }

    fn serialize_i16(self, v: i16) -> Result<(), EncodeError> {
        self.serialize_i64(i64::from(v))
    }

    fn serialize_i32(self, v: i32) -> Result<(), EncodeError> {
        self.serialize_i64(i64::from(v))
    }

    fn serialize_i64(self, v: i64) -> Result<(), EncodeError> {
        put_int(self.out, v);
        Ok(())
    }

    fn serialize_u8(self, v: u8) -> Result<(), EncodeError> {
        self.serialize_u64(u64::from(v))
    }

    fn serialize_u16(self, v: u16) -> Result<(), EncodeError> {
        self.serialize_u64(u64::from(v))
    }

    fn serialize_u32(self, v: u32) -> Result<(), EncodeError> {
        self.serialize_u64(u64::from(v))
    }

    fn serialize_u64(self, v: u64) -> Result<(), EncodeError> {
        self.out.push(UINT);
        put_varint(self.out, v);
        Ok(())
    }

    fn serialize_f32(self, v: f32) -> Result<(), EncodeError> {
        self.serialize_f64(f64::from(v))
    }

    fn serialize_f64(self, v: f64) -> Result<(), EncodeError> {
        if v.is_finite() {
            self.out.push(FLOAT);
            self.out.extend_from_slice(&v.to_le_bytes());
        } else {
            // JSON has no NaN or infinity; serde_json writes null.
            self.out.push(NULL);
        }
        Ok(())
    }

    fn serialize_char(self, v: char) -> Result<(), EncodeError> {
        self.serialize_str(v.encode_utf8(&mut [0; 4]))
    }

    fn serialize_str(self, v: &str) -> Result<(), EncodeError> {
        put_str(
            self.out,
            v,
            self.symbols,
            self.place.symbol_value,
            self.place.context,
        );
        Ok(())
    }

    fn serialize_bytes(self, v: &[u8]) -> Result<(), EncodeError> {
        // As serde_json: an array of numbers.
        self.out.push(ARRAY);
        for b in v {
            self.out.push(UINT);
            put_varint(self.out, u64::from(*b));
        }
        self.out.push(END);
        Ok(())
    }

    fn serialize_none(self) -> Result<(), EncodeError> {
        self.out.push(NULL);
        Ok(())
    }

    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<(), EncodeError> {
        value.serialize(self)
    }

    fn serialize_unit(self) -> Result<(), EncodeError> {
        self.out.push(NULL);
        Ok(())
    }

    fn serialize_unit_struct(self, _name: &'static str) -> Result<(), EncodeError> {
        self.serialize_unit()
    }

    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result<(), EncodeError> {
        self.serialize_str(variant)
    }

    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        value: &T,
    ) -> Result<(), EncodeError> {
        value.serialize(self)
    }

    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<(), EncodeError> {
        let mut c = self.open_variant(variant);
        let place = c.place;
        value.serialize(c.packer.reborrow(place))?;
        c.closes = 1;
        c.end();
        Ok(())
    }

    fn serialize_seq(self, _len: Option<usize>) -> Result<Compound<'a>, EncodeError> {
        self.out.push(ARRAY);
        let place = self.place.element();
        Ok(Compound {
            packer: self,
            place,
            closes: 1,
        })
    }

    fn serialize_tuple(self, len: usize) -> Result<Compound<'a>, EncodeError> {
        self.serialize_seq(Some(len))
    }

    fn serialize_tuple_struct(
        self,
        _name: &'static str,
        len: usize,
    ) -> Result<Compound<'a>, EncodeError> {
        self.serialize_seq(Some(len))
    }

    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Compound<'a>, EncodeError> {
        let mut c = self.open_variant(variant);
        c.packer.out.push(ARRAY);
        c.place = c.place.element();
        Ok(c)
    }

    fn serialize_map(self, _len: Option<usize>) -> Result<MapPacker<'a>, EncodeError> {
        self.out.push(OBJECT);
        let place = self.place;
        Ok(MapPacker {
            packer: self,
            place,
            key: String::new(),
            context: 0,
        })
    }

    fn serialize_struct(
        self,
        _name: &'static str,
        _len: usize,
    ) -> Result<Compound<'a>, EncodeError> {
        self.out.push(OBJECT);
        let place = self.place;
        Ok(Compound {
            packer: self,
            place,
            closes: 1,
        })
    }

    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Compound<'a>, EncodeError> {
        let c = self.open_variant(variant);
        c.packer.out.push(OBJECT);
        Ok(c)
    }
}

impl Compound<'_> {
    fn element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), EncodeError> {
        value.serialize(self.packer.reborrow(self.place))
    }

    fn field<T: Serialize + ?Sized>(&mut self, key: &str, value: &T) -> Result<(), EncodeError> {
        let outer = self.place;
        let mut packer = self.packer.reborrow(outer);
        let context = packer.key(key);
        value.serialize(packer.reborrow(outer.child(key, context)))
    }
}

/// The compound serializers whose parts are unnamed values (sequences, tuples).
macro_rules! elements {
    ($($trait:ident :: $method:ident),*) => {$(
        impl ser::$trait for Compound<'_> {
            type Ok = ();
            type Error = EncodeError;

            fn $method<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), EncodeError> {
                self.element(value)
            }

            fn end(self) -> Result<(), EncodeError> {
                Compound::end(self);
                Ok(())
            }
        }
    )*};
}

elements!(
    SerializeSeq::serialize_element,
    SerializeTuple::serialize_element,
    SerializeTupleStruct::serialize_field,
    SerializeTupleVariant::serialize_field
);

/// The compound serializers whose parts are named fields (structs, struct variants).
macro_rules! fields {
    ($($trait:ident),*) => {$(
        impl ser::$trait for Compound<'_> {
            type Ok = ();
            type Error = EncodeError;

            fn serialize_field<T: Serialize + ?Sized>(
                &mut self,
                key: &'static str,
                value: &T,
            ) -> Result<(), EncodeError> {
                self.field(key, value)
            }

            fn end(self) -> Result<(), EncodeError> {
                Compound::end(self);
                Ok(())
            }
        }
    )*};
}

fields!(SerializeStruct, SerializeStructVariant);

/// A map being written: keys must serialize as strings (or numbers, written as their
/// decimal text, as serde_json does).
struct MapPacker<'a> {
    packer: Packer<'a>,
    place: Place,
    /// The last key, which decides how its value is packed.
    key: String,
    /// The context of the last key's value.
    context: u64,
}

impl ser::SerializeMap for MapPacker<'_> {
    type Ok = ();
    type Error = EncodeError;

    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), EncodeError> {
        self.key.clear();
        key.serialize(KeyText(&mut self.key))?;
        let place = self.place;
        self.context = self.packer.reborrow(place).key(&self.key);
        Ok(())
    }

    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), EncodeError> {
        let place = self.place.child(&self.key, self.context);
        value.serialize(self.packer.reborrow(place))
    }

    fn end(self) -> Result<(), EncodeError> {
        self.packer.out.push(END);
        Ok(())
    }
}

/// Writes a map key's text into a buffer.
struct KeyText<'a>(&'a mut String);

fn not_a_key() -> EncodeError {
    EncodeError("a map key must be a string".to_owned())
}

impl ser::Serializer for KeyText<'_> {
    type Ok = ();
    type Error = EncodeError;
    type SerializeSeq = Impossible<(), EncodeError>;
    type SerializeTuple = Impossible<(), EncodeError>;
    type SerializeTupleStruct = Impossible<(), EncodeError>;
    type SerializeTupleVariant = Impossible<(), EncodeError>;
    type SerializeMap = Impossible<(), EncodeError>;
    type SerializeStruct = Impossible<(), EncodeError>;
    type SerializeStructVariant = Impossible<(), EncodeError>;

    fn serialize_str(self, v: &str) -> Result<(), EncodeError> {
        self.0.push_str(v);
        Ok(())
    }

    fn serialize_char(self, v: char) -> Result<(), EncodeError> {
        self.0.push(v);
        Ok(())
    }

    fn serialize_bool(self, v: bool) -> Result<(), EncodeError> {
        self.0.push_str(if v { "true" } else { "false" });
        Ok(())
    }

    fn serialize_i8(self, v: i8) -> Result<(), EncodeError> {
        self.serialize_i64(i64::from(v))
    }

    fn serialize_i16(self, v: i16) -> Result<(), EncodeError> {
        self.serialize_i64(i64::from(v))
    }

    fn serialize_i32(self, v: i32) -> Result<(), EncodeError> {
        self.serialize_i64(i64::from(v))
    }

    fn serialize_i64(self, v: i64) -> Result<(), EncodeError> {
        self.0.push_str(&v.to_string());
        Ok(())
    }

    fn serialize_u8(self, v: u8) -> Result<(), EncodeError> {
        self.serialize_u64(u64::from(v))
    }

    fn serialize_u16(self, v: u16) -> Result<(), EncodeError> {
        self.serialize_u64(u64::from(v))
    }

    fn serialize_u32(self, v: u32) -> Result<(), EncodeError> {
        self.serialize_u64(u64::from(v))
    }

    fn serialize_u64(self, v: u64) -> Result<(), EncodeError> {
        self.0.push_str(&v.to_string());
        Ok(())
    }

    fn serialize_f32(self, _v: f32) -> Result<(), EncodeError> {
        Err(not_a_key())
    }

    fn serialize_f64(self, _v: f64) -> Result<(), EncodeError> {
        Err(not_a_key())
    }

    fn serialize_bytes(self, _v: &[u8]) -> Result<(), EncodeError> {
        Err(not_a_key())
    }

    fn serialize_none(self) -> Result<(), EncodeError> {
        Err(not_a_key())
    }

    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<(), EncodeError> {
        value.serialize(self)
    }

    fn serialize_unit(self) -> Result<(), EncodeError> {
        Err(not_a_key())
    }

    fn serialize_unit_struct(self, _name: &'static str) -> Result<(), EncodeError> {
        Err(not_a_key())
    }

    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result<(), EncodeError> {
        self.serialize_str(variant)
    }

    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        value: &T,
    ) -> Result<(), EncodeError> {
        value.serialize(self)
    }

    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _value: &T,
    ) -> Result<(), EncodeError> {
        Err(not_a_key())
    }

    fn serialize_seq(self, _len: Option<usize>) -> Result<Self::SerializeSeq, EncodeError> {
        Err(not_a_key())
    }

    fn serialize_tuple(self, _len: usize) -> Result<Self::SerializeTuple, EncodeError> {
        Err(not_a_key())
    }

    fn serialize_tuple_struct(
        self,
        _name: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeTupleStruct, EncodeError> {
        Err(not_a_key())
    }

    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeTupleVariant, EncodeError> {
        Err(not_a_key())
    }

    fn serialize_map(self, _len: Option<usize>) -> Result<Self::SerializeMap, EncodeError> {
        Err(not_a_key())
    }

    fn serialize_struct(
        self,
        _name: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeStruct, EncodeError> {
        Err(not_a_key())
    }

    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeStructVariant, EncodeError> {
        Err(not_a_key())
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::core::v1::ConfigMap;
    use serde::Deserialize;
    use serde::de::DeserializeOwned;
    use serde_json::{Value, json};

    use super::super::packed::Dictionary;

    /// Packs `json` both ways (as JSON, and parsed into `T` then from `T`), each in a fresh
    /// dictionary, and returns the two decodings and the two dictionaries' sizes. Both ways
    /// take the same number of bytes.
    fn both_ways<T: DeserializeOwned + serde::Serialize>(json: &Value) -> (T, T, usize, usize) {
        let by_json = Dictionary::default();
        let bytes = by_json.encode(json);
        let typed = Dictionary::default();
        let obj: T = serde_json::from_value(json.clone()).expect("parses");
        let mut out = Vec::new();
        typed.encode_typed(&obj, &mut out).expect("packs");
        assert_eq!(out.len(), bytes.len());
        (
            by_json.decode(&bytes).expect("decodes"),
            typed.decode(&out).expect("decodes"),
            by_json.len(),
            typed.len(),
        )
    }

    #[test]
    fn a_typed_configmap_packs_as_its_json_does() {
        // Long enough to be compressed, each against its own place's reference.
        let applied = format!(
            r#"{{"apiVersion":"v1","kind":"ConfigMap","data":{{"k":"{}"}}}}"#,
            "v".repeat(200)
        );
        let file = "listen 8080;\nserver_name example.com;\n".repeat(8);
        let json = json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": "cm-1",
                "namespace": "default",
                "uid": "0f8fad5b-d9cb-469f-a165-70867728950e",
                "resourceVersion": "12345",
                "creationTimestamp": "2026-11-21T07:54:32Z",
                "labels": {"app": "demo", "tier": "web"},
                "annotations": {"note": "x", "kubectl.kubernetes.io/last-applied-configuration": applied},
                "ownerReferences": [{
                    "apiVersion": "v1", "kind": "Secret", "name": "s", "controller": true,
                    "uid": "1f8fad5b-d9cb-469f-a165-70867728950e",
                }],
                "finalizers": ["example.com/f"],
            },
            "data": {"key-1": "value", "key-2": "", "0": "digits are keys too", "nginx.conf": file},
            "binaryData": {"blob": "AAEC/w=="},
            "immutable": false,
        });
        let (by_json, typed, dict_json, dict_typed) = both_ways::<ConfigMap>(&json);
        assert_eq!(typed, by_json);
        assert_eq!(serde_json::to_value(&typed).expect("serializes"), json);
        // The same symbols: data and annotation keys stay inline either way.
        assert_eq!(dict_typed, dict_json);
    }

    #[test]
    fn a_typed_deployment_with_quantities_enums_and_numbers_packs_as_its_json_does() {
        let json = json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "prod", "generation": 3},
            "spec": {
                "replicas": 3,
                "selector": {"matchLabels": {"app": "web"}},
                "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 1}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{
                        "name": "web",
                        "image": "nginx:1.27",
                        "ports": [{"containerPort": 80, "protocol": "TCP"}],
                        "resources": {"limits": {"cpu": "500m", "memory": "128Mi"}},
                        "env": [{"name": "A", "value": "-1"}],
                    }],
                    "terminationGracePeriodSeconds": 30},
                },
            },
            "status": {"availableReplicas": 3, "conditions": [{
                "type": "Available", "status": "True",
                "lastTransitionTime": "2026-11-21T07:54:32Z",
            }]},
        });
        let (by_json, typed, dict_json, dict_typed) = both_ways::<Deployment>(&json);
        assert_eq!(typed, by_json);
        assert_eq!(serde_json::to_value(&typed).expect("serializes"), json);
        assert_eq!(dict_typed, dict_json);
    }

    #[derive(Debug, PartialEq, serde::Serialize, Deserialize)]
    #[serde(rename_all = "camelCase")]
    enum Shape {
        Empty,
        Circle(f64),
        Pair(i64, String),
        Rect { width: u32, height: u32 },
    }

    #[derive(Debug, PartialEq, serde::Serialize, Deserialize)]
    struct Shapes {
        shapes: Vec<Shape>,
        by_id: std::collections::BTreeMap<String, Option<bool>>,
        unit: (),
        bytes: serde_bytes_like::Bytes,
        letter: char,
        big: u64,
        small: i8,
    }

    /// A byte buffer that serializes with `serialize_bytes` (as `serde_bytes` would).
    mod serde_bytes_like {
        #[derive(Debug, PartialEq)]
        pub(super) struct Bytes(pub(super) Vec<u8>);

        impl serde::Serialize for Bytes {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_bytes(&self.0)
            }
        }

        impl<'de> serde::Deserialize<'de> for Bytes {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                Vec::<u8>::deserialize(d).map(Bytes)
            }
        }
    }

    #[test]
    fn every_serde_shape_round_trips_as_serde_json_writes_it() {
        let shapes = Shapes {
            shapes: vec![
                Shape::Empty,
                Shape::Circle(1.5),
                Shape::Pair(-7, "x".into()),
                Shape::Rect {
                    width: 2,
                    height: 3,
                },
            ],
            by_id: [("1".to_owned(), Some(true)), ("2".to_owned(), None)]
                .into_iter()
                .collect(),
            unit: (),
            bytes: serde_bytes_like::Bytes(vec![0, 1, 255]),
            letter: 'é',
            big: u64::MAX,
            small: -128,
        };
        let json = serde_json::to_value(&shapes).expect("serializes");
        let (by_json, typed, _, _) = both_ways::<Shapes>(&json);
        assert_eq!(typed, shapes);
        assert_eq!(by_json, shapes);
    }

    #[test]
    fn a_map_key_that_is_not_text_is_an_error_not_a_panic() {
        let dict = Dictionary::default();
        let map: std::collections::BTreeMap<Vec<u8>, u8> = [(vec![1], 1)].into_iter().collect();
        let mut out = Vec::new();
        let e = dict.encode_typed(&map, &mut out).expect_err("not a key");
        assert!(e.to_string().contains("map key"), "{e}");
    }
}
