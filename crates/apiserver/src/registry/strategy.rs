//! [`Strategy`]: what differs between kinds on the write path — decoding, defaults,
//! validation, generation tracking and field selectors.
//!
//! The registry calls, for a create: [`Strategy::decode`] → [`Strategy::prepare_for_create`]
//! (defaults, status reset) → [`Strategy::validate`]; for an update: `decode` →
//! [`Strategy::prepare_for_update`] → [`Strategy::validate_update`]. Validation never
//! mutates. Everything common to all kinds (metadata rules, names, namespaces, status
//! subresource handling) lives in the registry, not here.

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::validation::{FieldError, NameRule};

/// A decoded request body: the object normalised to the kind's schema, and the unknown fields
/// that were dropped from it (sorted by path).
#[derive(Debug, Clone, PartialEq)]
pub struct Decoded {
    /// The object, unknown fields removed.
    pub object: Value,
    /// Paths of the fields the schema does not know (`spec.foo`), sorted.
    pub unknown_fields: Vec<String>,
}

/// Kind-specific behaviour. Every method has the behaviour of a plain kind as its default.
pub trait Strategy: Send + Sync + 'static {
    /// Decodes a request body: checks field types, removes unknown fields and reports them.
    ///
    /// # Errors
    /// A message saying which field has the wrong type; the request fails with 400.
    fn decode(&self, obj: Value) -> Result<Decoded, String>;

    /// Converts the served form of an object to its stored form.
    fn to_stored(&self, obj: Value) -> Value {
        obj
    }

    /// Converts a stored object to the served form.
    fn to_served(&self, obj: Value) -> Value {
        obj
    }

    /// Whether served and stored forms differ (so stored bytes cannot be sent as they are).
    fn converts(&self) -> bool {
        false
    }

    /// How object names are checked.
    fn name_rule(&self) -> NameRule {
        NameRule::Subdomain
    }

    /// Whether `metadata.generation` is maintained.
    fn tracks_generation(&self) -> bool {
        false
    }

    /// Whether an update changes what `generation` counts (the spec, by default).
    fn generation_changed(&self, new: &Value, old: &Value) -> bool {
        new.get("spec") != old.get("spec")
    }

    /// Fills defaults and server-owned fields of a new object.
    fn prepare_for_create(&self, obj: &mut Value) {
        let _ = obj;
    }

    /// Fills defaults of an updated object and keeps what clients may not change.
    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        let _ = (new, old);
    }

    /// Validates a new object (metadata rules are checked by the registry).
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let _ = obj;
        Vec::new()
    }

    /// Validates an update.
    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let _ = old;
        self.validate(new)
    }

    /// Whether a PUT of a missing object creates it.
    fn allow_create_on_update(&self) -> bool {
        false
    }

    /// Whether a PUT must carry `metadata.resourceVersion`.
    fn requires_resource_version_on_update(&self) -> bool {
        false
    }

    /// Field selector keys beyond `metadata.name` and `metadata.namespace`.
    fn field_labels(&self) -> &'static [&'static str] {
        &[]
    }

    /// The value of a field label on `obj` (missing counts as "").
    fn field_value(&self, obj: &Value, label: &str) -> String {
        dotted(obj, label)
    }

    /// The `Warning` every request to this resource gets (deprecated custom resource versions).
    fn deprecation_warning(&self) -> Option<String> {
        None
    }

    /// Whether a completed delete answers with the object rather than a Status.
    fn returns_object_on_delete(&self) -> bool {
        false
    }

    /// Why the object named `name` may not be deleted (403), if it may not: the namespaces
    /// the server itself needs.
    fn refuse_delete(&self, name: &str) -> Option<String> {
        let _ = name;
        None
    }

    /// Whether something besides `metadata.finalizers` holds `obj` once it is marked for
    /// deletion, so it is kept: a namespace's `spec.finalizers`, which the namespace
    /// controller removes through `finalize`.
    fn held_by_spec(&self, obj: &Value) -> bool {
        let _ = obj;
        false
    }

    /// What a `status` write keeps of the new object's metadata. `None` (the default) keeps the
    /// stored metadata: custom resources, and the built-in kinds whose status strategy resets
    /// the object meta (`ResetObjectMetaForStatus`). `Some(reset)` keeps the new metadata
    /// except the keys in `reset`, which come from the stored object: the older built-in kinds,
    /// whose status strategy resets only the spec (a Deployment's also its labels, a Pod's its
    /// owner references and deletion timestamp), so a status write may change annotations.
    fn status_keeps_metadata(&self) -> Option<&'static [&'static str]> {
        None
    }

    /// Finalizers the first delete of an object adds before deciding whether it is held: a
    /// CRD gets `customresourcecleanup.apiextensions.k8s.io`, so it stays until the CRD
    /// controller has removed its objects (Kubernetes adds it in the CRD's delete, not at
    /// creation).
    fn finalizers_on_delete(&self) -> &'static [&'static str] {
        &[]
    }

    /// Prepares an object that a delete marks for deletion (something holds it) before it is
    /// written; `now` is the deletion timestamp. A namespace turns `Terminating`; a CRD gets
    /// its `Terminating` condition.
    fn prepare_for_delete(&self, obj: &mut Value, now: &str) {
        let _ = (obj, now);
    }

    /// The structural schema of the served version, for custom resources (apply uses its list types).
    fn structural_schema(&self) -> Option<std::sync::Arc<crate::schema::Structural>> {
        None
    }

    /// The grace period a delete gives `obj` before it is removed (Kubernetes'
    /// `CheckGracefulDelete`), given the request's `gracePeriodSeconds` (never negative here);
    /// `None` for kinds that are never deleted gracefully. A positive period marks the object
    /// with `deletionTimestamp` = now + period instead of removing it; 0 removes it at once.
    fn graceful_delete_period(&self, obj: &Value, requested: Option<i64>) -> Option<i64> {
        let _ = (obj, requested);
        None
    }
}

/// Reads a dotted path (`spec.nodeName`) as a string; numbers and booleans as their text.
pub fn dotted(obj: &Value, path: &str) -> String {
    let mut v = obj;
    for part in path.split('.') {
        match v.get(part) {
            Some(next) => v = next,
            None => return String::new(),
        }
    }
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// Decodes through a typed Kubernetes struct: fields of the wrong type fail, unknown fields
/// are dropped and reported, and the result is the struct's canonical JSON.
pub fn decode_typed<T: Serialize + DeserializeOwned>(obj: Value) -> Result<Decoded, String> {
    let typed = T::deserialize(&obj).map_err(|e| e.to_string())?;
    let mut normalized = serde_json::to_value(&typed).map_err(|e| e.to_string())?;
    let mut unknown_fields = Vec::new();
    find_unknown(&obj, &normalized, &mut String::new(), &mut unknown_fields);
    drop_omitted_empties(&mut normalized);
    Ok(Decoded {
        object: normalized,
        unknown_fields,
    })
}

/// The `ObjectMeta` fields Kubernetes' Go types mark `omitempty` that can be written empty:
/// an empty one is never written by Kubernetes, so it is not stored here either.
const OMITTED_EMPTY_METADATA: [&str; 5] = [
    "labels",
    "annotations",
    "finalizers",
    "ownerReferences",
    "managedFields",
];

/// The map and list fields of the kinds whose Go type marks them `omitempty`, by kind and
/// the object they sit in (`""` is the top level).
const OMITTED_EMPTY_TOP: [(&str, &str, &[&str]); 4] = [
    ("ConfigMap", "", &["data", "binaryData"]),
    ("Secret", "", &["data", "stringData"]),
    (
        "Service",
        "spec",
        &[
            "selector",
            "ports",
            "externalIPs",
            "loadBalancerSourceRanges",
            "clusterIPs",
            "ipFamilies",
        ],
    ),
    ("ReplicationController", "spec", &["selector"]),
];

/// `PodSpec`'s `omitempty` maps and lists (`containers` has no `omitempty` and stays), in a
/// Pod's `spec` and in every pod template's.
const OMITTED_EMPTY_POD_SPEC: [&str; 12] = [
    "volumes",
    "initContainers",
    "ephemeralContainers",
    "nodeSelector",
    "imagePullSecrets",
    "tolerations",
    "hostAliases",
    "topologySpreadConstraints",
    "readinessGates",
    "overhead",
    "schedulingGates",
    "resourceClaims",
];

/// `Container`'s (and `EphemeralContainer`'s) `omitempty` lists, and the maps of its
/// `resources`.
const OMITTED_EMPTY_CONTAINER: [&str; 8] = [
    "command",
    "args",
    "ports",
    "envFrom",
    "env",
    "volumeMounts",
    "volumeDevices",
    "resizePolicy",
];

/// `ResourceRequirements`' `omitempty` maps and list.
const OMITTED_EMPTY_RESOURCES: [&str; 3] = ["limits", "requests", "claims"];

/// Drops empty maps and lists that Kubernetes' JSON encoder leaves out (`omitempty`), so an
/// object written with `labels: {}` reads back as Kubernetes would answer it and `kubectl
/// diff` shows no spurious lines: the `ObjectMeta` fields above, in the object's metadata
/// and in every nested `metadata` (pod templates), the fields of `OMITTED_EMPTY_TOP`
/// (ConfigMap and Secret data, a Service's `selector`, …), and the `PodSpec`, `Container`
/// and `ResourceRequirements` lists and maps above in every pod spec (Pods and templates). Only
/// these: Go's `omitempty` leaves empty structs in place (`status: {}`, a PDB's `selector:
/// {}`), and some lists have no `omitempty` (ClusterRole `rules`, PodSpec `containers`), so a
/// blanket rule would drop fields Kubernetes writes. Custom resources are not decoded here
/// and keep what they were given, as in Kubernetes.
pub fn drop_omitted_empties(obj: &mut Value) {
    let Value::Object(map) = obj else {
        return;
    };
    if let Some(kind) = map.get("kind").and_then(Value::as_str)
        && let Some((_, at, fields)) = OMITTED_EMPTY_TOP.iter().find(|(k, _, _)| *k == kind)
    {
        let target = if at.is_empty() {
            Some(&mut *map)
        } else {
            map.get_mut(*at).and_then(Value::as_object_mut)
        };
        if let Some(target) = target {
            drop_empty_fields(target, fields);
        }
    }
    drop_in_metadata(obj);
}

fn drop_empty_fields(map: &mut serde_json::Map<String, Value>, fields: &[&str]) {
    for f in fields {
        if map.get(*f).is_some_and(is_empty_collection) {
            map.remove(*f);
        }
    }
}

/// Drops a pod spec's empty `omitempty` fields and its containers'.
fn drop_in_pod_spec(spec: &mut serde_json::Map<String, Value>) {
    drop_empty_fields(spec, &OMITTED_EMPTY_POD_SPEC);
    for list in ["containers", "initContainers", "ephemeralContainers"] {
        let Some(Value::Array(containers)) = spec.get_mut(list) else {
            continue;
        };
        for c in containers.iter_mut().filter_map(Value::as_object_mut) {
            drop_empty_fields(c, &OMITTED_EMPTY_CONTAINER);
            if let Some(Value::Object(r)) = c.get_mut("resources") {
                drop_empty_fields(r, &OMITTED_EMPTY_RESOURCES);
            }
        }
    }
}

fn is_empty_collection(v: &Value) -> bool {
    match v {
        Value::Object(m) => m.is_empty(),
        Value::Array(a) => a.is_empty(),
        _ => false,
    }
}

fn drop_in_metadata(v: &mut Value) {
    match v {
        Value::Object(map) => {
            for (key, child) in map.iter_mut() {
                if key == "metadata"
                    && let Value::Object(meta) = child
                {
                    drop_empty_fields(meta, &OMITTED_EMPTY_METADATA);
                } else {
                    // A pod spec: a Pod's `spec` or a template's (the only `spec` objects
                    // with a `containers` list among the built-in kinds).
                    if key == "spec"
                        && let Value::Object(spec) = child
                        && spec.get("containers").is_some_and(Value::is_array)
                    {
                        drop_in_pod_spec(spec);
                    }
                    drop_in_metadata(child);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(drop_in_metadata),
        _ => {}
    }
}

/// Collects paths present (and not null) in `input` but absent from `known`. `path` is the
/// path so far; it is restored before returning, so no path is built for known fields.
pub fn find_unknown(input: &Value, known: &Value, path: &mut String, out: &mut Vec<String>) {
    let base = path.len();
    match (input, known) {
        (Value::Object(i), Value::Object(k)) => {
            for (key, v) in i {
                if v.is_null() {
                    continue;
                }
                if base > 0 {
                    path.push('.');
                }
                path.push_str(key);
                match k.get(key) {
                    Some(kv) => find_unknown(v, kv, path, out),
                    None => out.push(path.clone()),
                }
                path.truncate(base);
            }
        }
        (Value::Array(i), Value::Array(k)) => {
            for (n, (iv, kv)) in i.iter().zip(k).enumerate() {
                if iv.is_object() || iv.is_array() {
                    use std::fmt::Write;
                    let _ = write!(path, "[{n}]");
                    find_unknown(iv, kv, path, out);
                    path.truncate(base);
                }
            }
        }
        _ => {}
    }
}

/// Sets `obj[a][b]...` to `value` unless already present, creating objects on the way.
pub fn default_at(obj: &mut Value, path: &[&str], value: Value) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut cur = obj;
    for p in parents {
        if !cur.is_object() {
            return;
        }
        cur = cur
            .as_object_mut()
            .map(|m| {
                m.entry(p.to_string())
                    .or_insert_with(|| Value::Object(Default::default()))
            })
            .expect("checked to be an object");
        if cur.is_null() {
            // An explicit `null` parent is unset, as in Go.
            *cur = Value::Object(Default::default());
        }
    }
    if let Some(m) = cur.as_object_mut()
        && m.get(*last).is_none_or(Value::is_null)
    {
        m.insert(last.to_string(), value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use serde_json::json;

    #[test]
    fn typed_decoding_reports_unknown_fields_with_their_paths() {
        let d = decode_typed::<ConfigMap>(json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "a", "bogus": 1},
            "data": {"k": "v"}, "extra": {"x": 1}, "nothing": null
        }))
        .expect("decodes");
        assert_eq!(d.unknown_fields, ["extra", "metadata.bogus"]);
        assert!(d.object.get("extra").is_none());
        assert_eq!(d.object["data"]["k"], "v");
    }

    #[test]
    fn typed_decoding_rejects_wrong_types() {
        let err = decode_typed::<ConfigMap>(json!({
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "data": {"k": 1}
        }))
        .expect_err("data values are strings");
        assert!(err.contains("string"), "{err}");
    }

    #[test]
    fn defaults_fill_only_missing_fields() {
        let mut v = json!({"spec": {"replicas": 3}});
        default_at(&mut v, &["spec", "replicas"], json!(1));
        default_at(
            &mut v,
            &["spec", "strategy", "type"],
            json!("RollingUpdate"),
        );
        assert_eq!(
            v,
            json!({"spec": {"replicas": 3, "strategy": {"type": "RollingUpdate"}}})
        );
    }

    #[test]
    fn dotted_paths_read_nested_strings() {
        let v = json!({"spec": {"nodeName": "n1", "hostNetwork": true}});
        assert_eq!(dotted(&v, "spec.nodeName"), "n1");
        assert_eq!(dotted(&v, "spec.hostNetwork"), "true");
        assert_eq!(dotted(&v, "status.phase"), "");
    }
}

#[cfg(test)]
mod time_format_tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn timestamps_keep_kubernetes_precision_through_decoding() {
        let d = decode_typed::<k8s_openapi::api::coordination::v1::Lease>(json!({
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": "l", "creationTimestamp": "2024-05-01T12:00:00Z"},
            "spec": {"renewTime": "2024-05-01T12:00:00.123456Z", "acquireTime": "2024-05-01T12:00:00.000000Z"}
        }))
        .expect("decodes");
        assert_eq!(d.object["spec"]["renewTime"], "2024-05-01T12:00:00.123456Z");
        assert_eq!(
            d.object["spec"]["acquireTime"],
            "2024-05-01T12:00:00.000000Z"
        );
        assert_eq!(
            d.object["metadata"]["creationTimestamp"],
            "2024-05-01T12:00:00Z"
        );
    }
}
