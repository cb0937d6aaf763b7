//! [`Encoded`]: an object encoded before the store's lock is taken, with a hole where its
//! `resourceVersion` goes, filled under the lock.
//!
//! A write's revision is known only under the store's lock, and encoding the object (Go key
//! order, then the depth check) is the costliest step of a write: done under the lock, it
//! serialized every writer on it. So the object is encoded first with a placeholder revision,
//! and under the lock the bytes are copied around the placeholder with the real revision in
//! its place. The result is byte for byte what encoding with the real revision gives.
//!
//! The placeholder is a string drawn at random once per process, so no client can put it into
//! an object. Should it still occur other than exactly once (or the object have no metadata),
//! the object is kept whole and encoded under the lock, as before.

use std::ops::Range;
use std::sync::LazyLock;

use bytes::Bytes;
use serde_json::Value;

use super::store::readable;
use super::{StorageError, set_resource_version};

/// The process's placeholder revision: letters and digits only, so the encoder writes it as it
/// is, and random, so no stored object can contain it by chance or on purpose.
static PLACEHOLDER: LazyLock<String> =
    LazyLock::new(|| format!("kore-rv-{:032x}", rand::random::<u128>()));

/// The placeholder's searcher, built once (building it was a visible share of a create).
static FINDER: LazyLock<memchr::memmem::Finder<'static>> =
    LazyLock::new(|| memchr::memmem::Finder::new(PLACEHOLDER.as_bytes()).into_owned());

/// An object ready to be stored once its revision is known.
#[derive(Debug)]
pub(super) enum Encoded {
    /// Encoded bytes with the placeholder at `hole`.
    Holed { bytes: Vec<u8>, hole: Range<usize> },
    /// The placeholder could not be located; encode with the revision.
    Whole(Value),
}

impl Encoded {
    /// Encodes `obj` (outside any lock). Fails for an object that could not be read back.
    pub(super) fn new(mut obj: Value) -> Result<Encoded, StorageError> {
        set_placeholder(&mut obj);
        let bytes = to_vec(&obj)?;
        let Some(start) = FINDER.find(&bytes) else {
            return Ok(Encoded::Whole(obj));
        };
        let end = start + PLACEHOLDER.len();
        if FINDER.find(&bytes[end..]).is_some() {
            return Ok(Encoded::Whole(obj));
        }
        Ok(Encoded::Holed {
            bytes,
            hole: start..end,
        })
    }

    /// The stored bytes with revision `rv`, compact (no spare capacity: stored bytes live as
    /// long as the object). Cheap for a holed object: one copy.
    pub(super) fn with_rv(self, rv: u64) -> Result<Bytes, StorageError> {
        match self {
            Encoded::Holed { bytes, hole } => {
                let digits = rv.to_string();
                let mut out = Vec::with_capacity(bytes.len() - hole.len() + digits.len());
                out.extend_from_slice(&bytes[..hole.start]);
                out.extend_from_slice(digits.as_bytes());
                out.extend_from_slice(&bytes[hole.end..]);
                Ok(Bytes::from(out))
            }
            Encoded::Whole(mut obj) => {
                set_resource_version(&mut obj, rv);
                let mut bytes = to_vec(&obj)?;
                bytes.shrink_to_fit();
                Ok(Bytes::from(bytes))
            }
        }
    }

    /// Whether these bytes with revision `rv` are exactly `stored` (an update that changes
    /// nothing), without building them.
    pub(super) fn same_as(&self, rv: u64, stored: &[u8]) -> bool {
        match self {
            Encoded::Holed { bytes, hole } => {
                let digits = rv.to_string();
                let (before, after) = (&bytes[..hole.start], &bytes[hole.end..]);
                stored.len() == before.len() + digits.len() + after.len()
                    && stored.starts_with(before)
                    && stored.ends_with(after)
                    && &stored[before.len()..before.len() + digits.len()] == digits.as_bytes()
            }
            Encoded::Whole(obj) => {
                let mut obj = obj.clone();
                set_resource_version(&mut obj, rv);
                to_vec(&obj).is_ok_and(|b| b[..] == stored[..])
            }
        }
    }
}

fn set_placeholder(obj: &mut Value) {
    if let Some(meta) = obj
        .as_object_mut()
        .and_then(|o| o.get_mut("metadata"))
        .and_then(Value::as_object_mut)
    {
        meta.insert("resourceVersion".into(), Value::String(PLACEHOLDER.clone()));
    }
}

/// Encodes in kore's canonical form and refuses an object that could not be read back (the
/// registry rejects those before they get here; this is the last line of defence).
fn to_vec(obj: &Value) -> Result<Vec<u8>, StorageError> {
    let bytes =
        crate::api::encoding::to_vec(obj).map_err(|e| StorageError::Internal(e.to_string()))?;
    readable(&bytes)
        .map_err(|why| StorageError::Internal(format!("refusing to store an object: {why}")))?;
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::api::limits::MAX_DEPTH;

    fn direct(obj: &Value, rv: u64) -> Vec<u8> {
        let mut obj = obj.clone();
        set_resource_version(&mut obj, rv);
        crate::api::encoding::to_vec(&obj).expect("encodes")
    }

    #[test]
    fn filling_the_hole_gives_the_bytes_encoding_with_the_revision_gives() {
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "a", "namespace": "default", "labels": {"x": "y"}},
            "data": {"k": "v"}});
        for rv in [1, 9, 10, 12_345, u64::MAX] {
            let enc = Encoded::new(cm.clone()).expect("encodes");
            assert!(matches!(enc, Encoded::Holed { .. }));
            assert!(enc.same_as(rv, &direct(&cm, rv)));
            assert!(!enc.same_as(rv ^ 1, &direct(&cm, rv)));
            assert_eq!(&enc.with_rv(rv).expect("fills")[..], &direct(&cm, rv)[..]);
        }
    }

    #[test]
    fn an_object_holding_the_placeholder_is_encoded_whole_with_its_revision() {
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "a", "annotations": {"copy": PLACEHOLDER.as_str()}}});
        let enc = Encoded::new(cm.clone()).expect("encodes");
        assert!(matches!(enc, Encoded::Whole(_)));
        assert!(enc.same_as(7, &direct(&cm, 7)));
        assert_eq!(&enc.with_rv(7).expect("encodes")[..], &direct(&cm, 7)[..]);
    }

    #[test]
    fn an_object_without_metadata_is_encoded_whole_as_before() {
        let odd = json!({"apiVersion": "v1", "kind": "Odd"});
        let enc = Encoded::new(odd.clone()).expect("encodes");
        assert_eq!(&enc.with_rv(3).expect("encodes")[..], &direct(&odd, 3)[..]);
    }

    #[test]
    fn too_deep_an_object_is_refused_before_the_lock() {
        let mut deep = json!("leaf");
        for _ in 0..=MAX_DEPTH {
            deep = json!({ "d": deep });
        }
        let obj =
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "x": deep});
        assert!(matches!(
            Encoded::new(obj),
            Err(StorageError::Internal(m)) if m.contains("nested")
        ));
    }
}
