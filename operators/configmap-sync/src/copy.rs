//! What a copy is: a ConfigMap holding the source's `data` and `binaryData`, marked with
//! labels and annotations that name its ConfigMapSync (ownerReferences cannot point across
//! namespaces) and the source version it holds.
//!
//! The annotation [`ANNOTATION_OWNER`] (`namespace/name` of the ConfigMapSync) is what makes a
//! ConfigMap a copy; the labels are for people and selectors (`kubectl get cm -l
//! sync.kore.dev/owner-name=...`). A label value holds at most 63 characters, so a longer
//! ConfigMapSync name is shortened in the label, never in the annotation.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::ConfigMap;
use kore_runtime::ObjectKey;
use kube::api::ObjectMeta;

/// Label: the namespace of the ConfigMapSync that made the copy.
pub const LABEL_OWNER_NAMESPACE: &str = "sync.kore.dev/owner-namespace";
/// Label: the name of the ConfigMapSync that made the copy (shortened past 63 characters).
pub const LABEL_OWNER_NAME: &str = "sync.kore.dev/owner-name";
/// Label: `configmap-sync` on every copy.
pub const LABEL_MANAGED_BY: &str = "app.kubernetes.io/managed-by";
/// Annotation: `namespace/name` of the ConfigMapSync that manages the copy.
pub const ANNOTATION_OWNER: &str = "sync.kore.dev/owner";
/// Annotation: `namespace/name` of the source ConfigMap.
pub const ANNOTATION_SOURCE: &str = "sync.kore.dev/source";
/// Annotation: the source's resourceVersion the copy holds.
pub const ANNOTATION_SOURCE_VERSION: &str = "sync.kore.dev/source-resource-version";

/// The ConfigMapSync a ConfigMap is a copy for, if it is one.
pub fn owner_of(cm: &ConfigMap) -> Option<ObjectKey> {
    let owner = cm.metadata.annotations.as_ref()?.get(ANNOTATION_OWNER)?;
    let (ns, name) = owner.split_once('/')?;
    Some(ObjectKey::namespaced(ns, name))
}

/// `name` as a label value: as is up to 63 characters, else its first 52 characters, `-`
/// and a hash of the whole name.
pub(crate) fn label_value(name: &str) -> String {
    if name.len() <= 63 {
        return name.to_owned();
    }
    // FNV-1a: stable across builds and platforms.
    let hash = name.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    // Names are ASCII (DNS-1123), so byte 52 is a character boundary.
    format!("{}-{:010x}", &name[..52], hash & 0xff_ffff_ffff)
}

fn set(map: &mut Option<BTreeMap<String, String>>, key: &str, value: &str) {
    map.get_or_insert_with(BTreeMap::new)
        .insert(key.to_owned(), value.to_owned());
}

fn has(map: Option<&BTreeMap<String, String>>, key: &str, value: &str) -> bool {
    map.and_then(|m| m.get(key)).map(String::as_str) == Some(value)
}

/// `None` and empty compare equal (the server may drop an empty map).
fn same<V: PartialEq>(a: Option<&BTreeMap<String, V>>, b: Option<&BTreeMap<String, V>>) -> bool {
    match (a.filter(|m| !m.is_empty()), b.filter(|m| !m.is_empty())) {
        (None, None) => true,
        (Some(a), Some(b)) => a == b,
        _ => false,
    }
}

fn data(source: &ConfigMap) -> Option<BTreeMap<String, String>> {
    source.data.clone().filter(|m| !m.is_empty())
}

fn binary_data(source: &ConfigMap) -> Option<BTreeMap<String, ByteString>> {
    source.binary_data.clone().filter(|m| !m.is_empty())
}

/// What a copy of `source` for `owner` must look like, built on `existing` (an earlier copy,
/// or a ConfigMap being adopted) so that metadata others added to it is kept, or from nothing
/// in namespace `namespace` under `name`.
pub(crate) fn desired(
    owner: &ObjectKey,
    source: &ConfigMap,
    existing: Option<&ConfigMap>,
    namespace: &str,
    name: &str,
) -> ConfigMap {
    let mut metadata = match existing {
        Some(cm) => cm.metadata.clone(),
        None => ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(namespace.to_owned()),
            ..ObjectMeta::default()
        },
    };
    metadata.managed_fields = None;
    let owner_ns = owner.namespace().unwrap_or_default();
    set(&mut metadata.labels, LABEL_MANAGED_BY, crate::NAME);
    set(&mut metadata.labels, LABEL_OWNER_NAMESPACE, owner_ns);
    set(
        &mut metadata.labels,
        LABEL_OWNER_NAME,
        &label_value(owner.name()),
    );
    set(
        &mut metadata.annotations,
        ANNOTATION_OWNER,
        &owner.to_string(),
    );
    set(
        &mut metadata.annotations,
        ANNOTATION_SOURCE,
        &ObjectKey::of(source).to_string(),
    );
    set(
        &mut metadata.annotations,
        ANNOTATION_SOURCE_VERSION,
        source
            .metadata
            .resource_version
            .as_deref()
            .unwrap_or_default(),
    );
    ConfigMap {
        metadata,
        data: data(source),
        binary_data: binary_data(source),
        immutable: existing.and_then(|cm| cm.immutable),
    }
}

/// Whether `copy` holds `source`'s data and version and is marked as `owner`'s.
pub(crate) fn in_step(copy: &ConfigMap, owner: &ObjectKey, source: &ConfigMap) -> bool {
    let labels = copy.metadata.labels.as_ref();
    let annotations = copy.metadata.annotations.as_ref();
    same(copy.data.as_ref(), source.data.as_ref())
        && same(copy.binary_data.as_ref(), source.binary_data.as_ref())
        && has(labels, LABEL_MANAGED_BY, crate::NAME)
        && has(
            labels,
            LABEL_OWNER_NAMESPACE,
            owner.namespace().unwrap_or_default(),
        )
        && has(labels, LABEL_OWNER_NAME, &label_value(owner.name()))
        && has(annotations, ANNOTATION_OWNER, &owner.to_string())
        && has(
            annotations,
            ANNOTATION_SOURCE,
            &ObjectKey::of(source).to_string(),
        )
        && has(
            annotations,
            ANNOTATION_SOURCE_VERSION,
            source
                .metadata
                .resource_version
                .as_deref()
                .unwrap_or_default(),
        )
}

/// The source resourceVersion a copy holds.
pub(crate) fn source_version(copy: &ConfigMap) -> Option<&str> {
    copy.metadata
        .annotations
        .as_ref()?
        .get(ANNOTATION_SOURCE_VERSION)
        .map(String::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source() -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                name: Some("app".into()),
                namespace: Some("src".into()),
                resource_version: Some("7".into()),
                ..ObjectMeta::default()
            },
            data: Some(BTreeMap::from([("k".into(), "v".into())])),
            binary_data: Some(BTreeMap::from([("b".into(), ByteString(vec![0, 1]))])),
            ..ConfigMap::default()
        }
    }

    #[test]
    fn a_fresh_copy_is_in_step_and_names_its_owner() {
        let owner = ObjectKey::namespaced("team", "sync");
        let copy = desired(&owner, &source(), None, "dst", "app");
        assert!(in_step(&copy, &owner, &source()));
        assert_eq!(owner_of(&copy), Some(owner.clone()));
        assert_eq!(source_version(&copy), Some("7"));
        assert_eq!(copy.metadata.namespace.as_deref(), Some("dst"));
        let other = ObjectKey::namespaced("team", "other");
        assert!(!in_step(&copy, &other, &source()));
    }

    #[test]
    fn edited_data_or_a_new_source_version_is_out_of_step() {
        let owner = ObjectKey::namespaced("team", "sync");
        let mut copy = desired(&owner, &source(), None, "dst", "app");
        copy.data = Some(BTreeMap::from([("k".into(), "edited".into())]));
        assert!(!in_step(&copy, &owner, &source()));
        let copy = desired(&owner, &source(), None, "dst", "app");
        let mut newer = source();
        newer.metadata.resource_version = Some("8".into());
        assert!(!in_step(&copy, &owner, &newer));
    }

    #[test]
    fn adopting_keeps_the_existing_metadata() {
        let owner = ObjectKey::namespaced("team", "sync");
        let mut theirs = ConfigMap::default();
        theirs.metadata.name = Some("app".into());
        theirs.metadata.namespace = Some("dst".into());
        theirs.metadata.resource_version = Some("3".into());
        set(&mut theirs.metadata.labels, "keep", "me");
        let copy = desired(&owner, &source(), Some(&theirs), "dst", "app");
        assert!(has(copy.metadata.labels.as_ref(), "keep", "me"));
        assert_eq!(copy.metadata.resource_version.as_deref(), Some("3"));
        assert!(in_step(&copy, &owner, &source()));
    }

    #[test]
    fn long_names_are_shortened_into_valid_distinct_label_values() {
        let a = "a".repeat(200);
        let b = format!("{}b", "a".repeat(199));
        let (la, lb) = (label_value(&a), label_value(&b));
        assert_eq!(la.len(), 63);
        assert_ne!(la, lb);
        assert_eq!(label_value("short"), "short");
    }
}
