//! Parsing an object without its `metadata.managedFields`: [`WithoutManagedFields`] wraps a
//! serde `Deserializer` and skips that one field unparsed, so the informer never builds the
//! field sets it would drop anyway.
//!
//! Why: the API server records a managedFields entry per manager and subresource, and each
//! entry's `fieldsV1` is a JSON tree (a `serde_json::Value`, one map and one string per
//! field). Parsing it into `K` and then setting it to `None` cost about as many allocations as
//! the rest of a small object. The field is skipped at the byte level instead (serde's
//! `IgnoredAny`), which allocates nothing.
//!
//! Only the top-level object's `metadata` is filtered: a `managedFields` key anywhere else
//! (inside a ConfigMap's `data`, say) is data and goes through untouched.

use serde::de::{
    self, DeserializeSeed, Deserializer, IgnoredAny, IntoDeserializer as _, MapAccess, SeqAccess,
    Visitor,
};

/// Where a wrapped deserializer stands in the object.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Level {
    /// The object itself: its `metadata` value is filtered.
    Object,
    /// The object's `metadata`: its `managedFields` key is skipped.
    Metadata,
}

/// A deserializer of a Kubernetes object that leaves out `metadata.managedFields`.
pub(crate) struct WithoutManagedFields<D>(pub(crate) D);

impl<'de, D: Deserializer<'de>> Deserializer<'de> for WithoutManagedFields<D> {
    type Error = D::Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
        Filter {
            inner: self.0,
            level: Level::Object,
        }
        .deserialize_any(visitor)
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        Filter {
            inner: self.0,
            level: Level::Object,
        }
        .deserialize_struct(name, fields, visitor)
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
        Filter {
            inner: self.0,
            level: Level::Object,
        }
        .deserialize_map(visitor)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct enum identifier
        ignored_any
    }
}

/// The wrapped deserializer at one level: objects (maps and structs) are visited through
/// [`FilterMap`]; every other shape goes straight to the inner deserializer.
struct Filter<D> {
    inner: D,
    level: Level,
}

impl<'de, D: Deserializer<'de>> Deserializer<'de> for Filter<D> {
    type Error = D::Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
        self.inner.deserialize_any(FilterVisitor {
            inner: visitor,
            level: self.level,
        })
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.inner.deserialize_struct(
            name,
            fields,
            FilterVisitor {
                inner: visitor,
                level: self.level,
            },
        )
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
        self.inner.deserialize_map(FilterVisitor {
            inner: visitor,
            level: self.level,
        })
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
        // `metadata` is an `Option<ObjectMeta>` in some types: its `Some` is filtered too.
        self.inner.deserialize_option(FilterVisitor {
            inner: visitor,
            level: self.level,
        })
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.inner.deserialize_newtype_struct(
            name,
            FilterVisitor {
                inner: visitor,
                level: self.level,
            },
        )
    }

    fn deserialize_bool<V: Visitor<'de>>(self, v: V) -> Result<V::Value, D::Error> {
        self.inner.deserialize_bool(v)
    }
    fn deserialize_i8<V: Visitor<'de>>(self, v: V) -> Result<V::Value, D::Error> {
        self.inner.deserialize_i8(v)
    }
    fn deserialize_i16<V: Visitor<'de>>(self, v: V) -> Result<V::Value, D::Error> {
        self.inner.deserialize_i16(v)
    }
    fn deserialize_i32<V: Visitor<'de>>(self, v: V) -> Result<V::Value, D::Error> {
        self.inner.deserialize_i32(v)
    }
    fn deserialize_i64<V: Visitor<'de>>(self, v: V) -> Result<V::Value, D::Error> {
        self.inner.deserialize_i64(v)
    }
    fn deserialize_u8<V: Visitor<'de>>(self, v: V) -> Result<V::Value, D::Error> {
        self.inner.deserialize_u8(v)
    }
    fn deserialize_u16<V: Visitor<'de>>(self, v: V) -> Result<V::Value, D::Error> {
        self.inner.deserialize_u16(v)
    }
    fn deserialize_u32<V: Visitor<'de>>(self, v: V) -> Result<V::Value, D::Error> {
        self.inner.deserialize_u32(v)
    }
    fn deserialize_u64<V: Visitor<'de>>(self, v: V) -> Result<V::Value, D::Error> {
        self.inner.deserialize_u64(v)
    }
    fn deserialize_f32<V: Visitor<'de>>(self, v: V) -> Result<V::Value, D::Error> {
        self.inner.deserialize_f32(v)
    }
    fn deserialize_f64<V: Visitor<'de>>(self, v: V) -> Result<V::Value, D::Error> {
        self.inner.deserialize_f64(v)
    }
    fn deserialize_char<V: Visitor<'de>>(self, v: V) -> Result<V::Value, D::Error> {
        self.inner.deserialize_char(v)
    }
    fn deserialize_str<V: Visitor<'de>>(self, v: V) -> Result<V::Value, D::Error> {
        self.inner.deserialize_str(v)
    }
    fn deserialize_string<V: Visitor<'de>>(self, v: V) -> Result<V::Value, D::Error> {
        self.inner.deserialize_string(v)
    }
    fn deserialize_bytes<V: Visitor<'de>>(self, v: V) -> Result<V::Value, D::Error> {
        self.inner.deserialize_bytes(v)
    }
    fn deserialize_byte_buf<V: Visitor<'de>>(self, v: V) -> Result<V::Value, D::Error> {
        self.inner.deserialize_byte_buf(v)
    }
    fn deserialize_unit<V: Visitor<'de>>(self, v: V) -> Result<V::Value, D::Error> {
        self.inner.deserialize_unit(v)
    }
    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        v: V,
    ) -> Result<V::Value, D::Error> {
        self.inner.deserialize_unit_struct(name, v)
    }
    fn deserialize_seq<V: Visitor<'de>>(self, v: V) -> Result<V::Value, D::Error> {
        self.inner.deserialize_seq(v)
    }
    fn deserialize_tuple<V: Visitor<'de>>(self, len: usize, v: V) -> Result<V::Value, D::Error> {
        self.inner.deserialize_tuple(len, v)
    }
    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        len: usize,
        v: V,
    ) -> Result<V::Value, D::Error> {
        self.inner.deserialize_tuple_struct(name, len, v)
    }
    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        v: V,
    ) -> Result<V::Value, D::Error> {
        self.inner.deserialize_enum(name, variants, v)
    }
    fn deserialize_identifier<V: Visitor<'de>>(self, v: V) -> Result<V::Value, D::Error> {
        self.inner.deserialize_identifier(v)
    }
    fn deserialize_ignored_any<V: Visitor<'de>>(self, v: V) -> Result<V::Value, D::Error> {
        self.inner.deserialize_ignored_any(v)
    }
    fn is_human_readable(&self) -> bool {
        self.inner.is_human_readable()
    }
}

/// Passes every shape to the inner visitor; a map is visited through [`FilterMap`], and the
/// content of a `Some` or a newtype stays at the same level.
struct FilterVisitor<V> {
    inner: V,
    level: Level,
}

impl<'de, V: Visitor<'de>> Visitor<'de> for FilterVisitor<V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.inner.expecting(f)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<V::Value, A::Error> {
        self.inner.visit_map(FilterMap {
            inner: map,
            level: self.level,
            metadata_next: false,
        })
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<V::Value, D::Error> {
        self.inner.visit_some(Filter {
            inner: d,
            level: self.level,
        })
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(self, d: D) -> Result<V::Value, D::Error> {
        self.inner.visit_newtype_struct(Filter {
            inner: d,
            level: self.level,
        })
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<V::Value, A::Error> {
        self.inner.visit_seq(seq)
    }
    fn visit_none<E: de::Error>(self) -> Result<V::Value, E> {
        self.inner.visit_none()
    }
    fn visit_unit<E: de::Error>(self) -> Result<V::Value, E> {
        self.inner.visit_unit()
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<V::Value, E> {
        self.inner.visit_bool(v)
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<V::Value, E> {
        self.inner.visit_i64(v)
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<V::Value, E> {
        self.inner.visit_u64(v)
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<V::Value, E> {
        self.inner.visit_f64(v)
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<V::Value, E> {
        self.inner.visit_str(v)
    }
    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<V::Value, E> {
        self.inner.visit_borrowed_str(v)
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<V::Value, E> {
        self.inner.visit_string(v)
    }
}

/// A map key, borrowed from the input when it has no escapes.
enum Key<'de> {
    Borrowed(&'de str),
    Owned(String),
}

impl Key<'_> {
    fn as_str(&self) -> &str {
        match self {
            Key::Borrowed(s) => s,
            Key::Owned(s) => s,
        }
    }
}

impl<'de> de::Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a string key")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Key<'de>, E> {
                Ok(Key::Borrowed(v))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Key<'de>, E> {
                Ok(Key::Owned(v.to_owned()))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Key<'de>, E> {
                Ok(Key::Owned(v))
            }
        }
        d.deserialize_str(KeyVisitor)
    }
}

/// The map of the object (whose `metadata` value is filtered) or of its metadata (whose
/// `managedFields` entry is skipped).
struct FilterMap<A> {
    inner: A,
    level: Level,
    /// The key just read was `metadata` (at the object level).
    metadata_next: bool,
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for FilterMap<A> {
    type Error = A::Error;

    fn next_key_seed<S: DeserializeSeed<'de>>(
        &mut self,
        seed: S,
    ) -> Result<Option<S::Value>, A::Error> {
        loop {
            let Some(key) = self.inner.next_key::<Key<'de>>()? else {
                return Ok(None);
            };
            match self.level {
                Level::Metadata if key.as_str() == "managedFields" => {
                    self.inner.next_value::<IgnoredAny>()?;
                    continue;
                }
                Level::Object => self.metadata_next = key.as_str() == "metadata",
                Level::Metadata => {}
            }
            return match key {
                Key::Borrowed(s) => seed
                    .deserialize(de::value::BorrowedStrDeserializer::<A::Error>::new(s))
                    .map(Some),
                Key::Owned(s) => seed.deserialize(s.into_deserializer()).map(Some),
            };
        }
    }

    fn next_value_seed<S: DeserializeSeed<'de>>(&mut self, seed: S) -> Result<S::Value, A::Error> {
        if std::mem::take(&mut self.metadata_next) {
            self.inner.next_value_seed(MetadataSeed(seed))
        } else {
            self.inner.next_value_seed(seed)
        }
    }

    fn size_hint(&self) -> Option<usize> {
        self.inner.size_hint()
    }
}

/// Deserializes the value of `metadata` through a filter that skips `managedFields`.
struct MetadataSeed<S>(S);

impl<'de, S: DeserializeSeed<'de>> DeserializeSeed<'de> for MetadataSeed<S> {
    type Value = S::Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<S::Value, D::Error> {
        self.0.deserialize(Filter {
            inner: d,
            level: Level::Metadata,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::core::{DynamicObject, PartialObjectMeta};
    use serde::Deserialize as _;

    const CM: &str = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"n",
        "resourceVersion":"7","labels":{"k":"v"},"managedFields":[{"manager":"m","operation":"Update",
        "apiVersion":"v1","time":"2026-01-01T00:00:00Z","fieldsType":"FieldsV1",
        "fieldsV1":{"f:data":{".":{},"f:managedFields":{}}}}],"annotations":{"x\"y":"z"}},
        "data":{"managedFields":"kept","metadata":"kept too"}}"#;

    fn parse<T: serde::de::DeserializeOwned>(json: &str) -> T {
        let mut de = serde_json::Deserializer::from_str(json);
        let obj = T::deserialize(WithoutManagedFields(&mut de)).expect("parses");
        de.end().expect("nothing after the object");
        obj
    }

    #[test]
    fn managed_fields_are_skipped_and_everything_else_is_kept() {
        let cm: ConfigMap = parse(CM);
        let mut want: ConfigMap = serde_json::from_str(CM).expect("plain parse");
        want.metadata.managed_fields = None;
        assert_eq!(cm, want);
        let data = cm.data.expect("data");
        assert_eq!(data["managedFields"], "kept");
        assert_eq!(data["metadata"], "kept too");
        assert_eq!(
            cm.metadata.annotations.expect("annotations")["x\"y"],
            "z",
            "escaped keys go through"
        );
    }

    #[test]
    fn dynamic_and_metadata_only_objects_lose_only_their_managed_fields() {
        let dynamic: DynamicObject = parse(CM);
        assert!(dynamic.metadata.managed_fields.is_none());
        assert_eq!(dynamic.metadata.resource_version.as_deref(), Some("7"));
        assert_eq!(dynamic.data["data"]["managedFields"], "kept");
        let meta: PartialObjectMeta<ConfigMap> = parse(CM);
        assert!(meta.metadata.managed_fields.is_none());
        assert_eq!(meta.metadata.name.as_deref(), Some("a"));
    }

    /// A copy as configmap-sync creates it, as the server returns it: labels, the owner
    /// annotation, three data keys and the create's managedFields entry.
    const COPY: &str = r#"{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"cfg",
        "namespace":"dst-042","uid":"6f1c2f0e-7a3b-4f59-9d0e-3c1f6b2a9e11",
        "resourceVersion":"123456","creationTimestamp":"2026-11-26T08:00:00Z",
        "labels":{"app.kubernetes.io/managed-by":"kore-configmap-sync","sync.kore.dev/owner":"sync-0042"},
        "annotations":{"sync.kore.dev/owner":"src/sync-0042","sync.kore.dev/source-version":"977"},
        "managedFields":[{"manager":"kore-configmap-sync","operation":"Update","apiVersion":"v1",
        "time":"2026-11-26T08:00:00Z","fieldsType":"FieldsV1","fieldsV1":{"f:data":{".":{},
        "f:alpha":{},"f:beta":{},"f:gamma":{}},"f:metadata":{"f:annotations":{".":{},
        "f:sync.kore.dev/owner":{},"f:sync.kore.dev/source-version":{}},"f:labels":{".":{},
        "f:app.kubernetes.io/managed-by":{},"f:sync.kore.dev/owner":{}}}}}]},
        "data":{"alpha":"a fairly ordinary configuration value of some length",
        "beta":"another value, of about the same length as the first","gamma":"x=1\ny=2\nz=3"}}"#;

    /// For callgrind, not a test: `KORE_PROBE=plain|skip KORE_PROBE_N=2000 valgrind
    /// --tool=callgrind <test binary> --ignored --exact
    /// informer::skip_managed::tests::parse_cost_probe` counts the instructions of parsing
    /// a copy N times the old way (parse managedFields, then drop them) or skipping them.
    #[test]
    #[ignore = "a probe to run under callgrind"]
    fn parse_cost_probe() {
        let n: usize = std::env::var("KORE_PROBE_N")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        let skip = std::env::var("KORE_PROBE").as_deref() == Ok("skip");
        for _ in 0..n {
            let cm: ConfigMap = if skip {
                parse(COPY)
            } else {
                let mut cm: ConfigMap = serde_json::from_str(COPY).expect("parses");
                cm.metadata.managed_fields = None;
                cm
            };
            std::hint::black_box(cm);
        }
    }

    #[test]
    fn malformed_input_is_still_an_error() {
        let mut de =
            serde_json::Deserializer::from_str(r#"{"metadata":{"managedFields":[{"manager":}]}}"#);
        assert!(ConfigMap::deserialize(WithoutManagedFields(&mut de)).is_err());
        let mut de = serde_json::Deserializer::from_str(r#"{"metadata":"not an object"}"#);
        assert!(ConfigMap::deserialize(WithoutManagedFields(&mut de)).is_err());
    }
}
