//! Pruning: removing the fields a structural schema does not describe.
//!
//! At every object node, keys that are neither in `properties` nor covered by
//! `additionalProperties` are removed, recursively, except below
//! `x-kubernetes-preserve-unknown-fields: true` (which keeps unknown keys at that node but
//! still prunes inside the properties it specifies). At the root and in embedded resources,
//! `apiVersion` and `kind` are kept and `metadata` is pruned to the ObjectMeta fields.
//!
//! On writes (not for `default` values), a `null` on a property that is not `nullable` is
//! removed too, so that defaulting can fill it and validation does not see it.
//!
//! Removed paths are reported sorted, as Kubernetes sorts them for its
//! `unknown field "spec.foo"` warnings.

use serde_json::Value;

use super::validate::Path;
use super::{Additional, Structural};

/// The fields of ObjectMeta a client may send.
const OBJECT_META_FIELDS: [&str; 15] = [
    "annotations",
    "creationTimestamp",
    "deletionGracePeriodSeconds",
    "deletionTimestamp",
    "finalizers",
    "generateName",
    "generation",
    "labels",
    "managedFields",
    "name",
    "namespace",
    "ownerReferences",
    "resourceVersion",
    "selfLink",
    "uid",
];

fn is_type_or_object_meta(k: &str) -> bool {
    matches!(k, "apiVersion" | "kind" | "metadata")
}

/// Prunes a whole custom object; returns the removed paths, sorted.
pub(crate) fn prune_root(s: &Structural, object: &mut Value) -> Vec<String> {
    let mut p = Pruner {
        removed: Vec::new(),
        on_write: true,
    };
    p.value(Some(s), object, &Path::Root, true);
    p.removed.sort();
    p.removed
}

/// Prunes a `default` value with its own node (an embedded resource is pruned as a
/// resource), keeping `null`s.
pub(crate) fn prune_default(s: &Structural, value: &mut Value) {
    let mut p = Pruner {
        removed: Vec::new(),
        on_write: false,
    };
    p.value(Some(s), value, &Path::Root, s.embedded);
}

struct Pruner {
    removed: Vec<String>,
    /// Whether `null`s on non-nullable properties go too.
    on_write: bool,
}

impl Pruner {
    fn drops_null(&self, s: &Structural, v: &Value) -> bool {
        self.on_write && v.is_null() && !s.nullable
    }

    fn value(&mut self, s: Option<&Structural>, v: &mut Value, path: &Path, resource: bool) {
        match v {
            Value::Object(map) => {
                let Some(s) = s else {
                    for k in map.keys() {
                        self.removed.push(Path::Field(path, k).render());
                    }
                    map.clear();
                    return;
                };
                let resource = resource || s.embedded;
                let keep_unknown = s.preserve_unknown;
                map.retain(|k, child| {
                    if resource && is_type_or_object_meta(k) {
                        if k == "metadata" {
                            self.object_meta(child, path);
                        }
                        return true;
                    }
                    let at = Path::Field(path, k);
                    match (s.declared_property(k), &s.additional) {
                        (Some(ps), _) => {
                            if self.drops_null(ps, child) {
                                return false;
                            }
                            self.value(Some(ps), child, &at, false);
                        }
                        (None, Additional::Schema(a)) => {
                            if self.drops_null(a, child) {
                                return false;
                            }
                            self.value(Some(a), child, &at, false);
                        }
                        // Kubernetes keeps the key and prunes the value with no schema.
                        (None, Additional::Bool(_)) => self.value(None, child, &at, false),
                        (None, Additional::Unset) if keep_unknown => {}
                        (None, Additional::Unset) => {
                            self.removed.push(at.render());
                            return false;
                        }
                    }
                    true
                });
            }
            Value::Array(items) => {
                let item_schema = s.and_then(Structural::items);
                if s.is_some_and(|s| s.preserve_unknown) && item_schema.is_none() {
                    return;
                }
                for (i, item) in items.iter_mut().enumerate() {
                    self.value(item_schema, item, &Path::Index(path, i), false);
                }
            }
            _ => {}
        }
    }

    fn object_meta(&mut self, meta: &mut Value, path: &Path) {
        let Value::Object(map) = meta else {
            return;
        };
        let at = Path::Field(path, "metadata");
        map.retain(|k, _| {
            let known = OBJECT_META_FIELDS.contains(&k.as_str());
            if !known {
                self.removed.push(Path::Field(&at, k).render());
            }
            known
        });
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::prune;
    use super::*;

    fn schema(v: Value) -> Structural {
        Structural::from_json(&v, "s").expect("structural")
    }

    #[test]
    fn unknown_fields_are_removed_and_reported_sorted() {
        let s = schema(json!({"type": "object", "properties": {
            "spec": {"type": "object", "properties": {
                "a": {"type": "string"},
                "list": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"}}}},
                "labels": {"type": "object", "additionalProperties": {"type": "object", "properties": {"v": {"type": "string"}}}},
            }},
        }}));
        let mut obj = json!({
            "apiVersion": "example.com/v1", "kind": "Widget",
            "metadata": {"name": "w", "labels": {"a": "b"}, "bogus": 1},
            "spec": {"a": "x", "zzz": 1, "list": [{"name": "n", "extra": true}], "labels": {"k": {"v": "1", "w": "2"}}},
            "status": {"x": 1},
        });
        let removed = prune(&s, &mut obj);
        assert_eq!(
            removed,
            [
                "metadata.bogus",
                "spec.labels.k.w",
                "spec.list[0].extra",
                "spec.zzz",
                "status"
            ]
        );
        assert_eq!(
            obj,
            json!({
                "apiVersion": "example.com/v1", "kind": "Widget",
                "metadata": {"name": "w", "labels": {"a": "b"}},
                "spec": {"a": "x", "list": [{"name": "n"}], "labels": {"k": {"v": "1"}}},
            })
        );
    }

    #[test]
    fn preserve_unknown_fields_keeps_unknown_keys_but_prunes_specified_ones() {
        let s = schema(json!({"type": "object", "properties": {
            "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true, "properties": {
                "known": {"type": "object", "properties": {"a": {"type": "string"}}},
            }},
            "free": {"x-kubernetes-preserve-unknown-fields": true},
        }}));
        let mut obj = json!({
            "spec": {"anything": {"deep": [1, {"x": 2}]}, "known": {"a": "1", "b": "2"}},
            "free": {"x": {"y": 1}},
        });
        let removed = prune(&s, &mut obj);
        assert_eq!(removed, ["spec.known.b"]);
        assert_eq!(
            obj,
            json!({"spec": {"anything": {"deep": [1, {"x": 2}]}, "known": {"a": "1"}}, "free": {"x": {"y": 1}}})
        );
    }

    #[test]
    fn embedded_resources_keep_type_meta_and_prune_metadata() {
        let s = schema(json!({"type": "object", "properties": {
            "template": {"type": "object", "x-kubernetes-embedded-resource": true, "properties": {
                "spec": {"type": "object", "properties": {"image": {"type": "string"}}},
            }},
        }}));
        let mut obj = json!({"template": {
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "junk": 1},
            "spec": {"image": "nginx", "junk": 2}, "junk": 3,
        }});
        let removed = prune(&s, &mut obj);
        assert_eq!(
            removed,
            [
                "template.junk",
                "template.metadata.junk",
                "template.spec.junk"
            ]
        );
        assert_eq!(
            obj,
            json!({"template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"image": "nginx"}}})
        );
    }

    #[test]
    fn nulls_on_non_nullable_fields_are_dropped_silently() {
        let s = schema(json!({"type": "object", "properties": {
            "spec": {"type": "object", "properties": {
                "a": {"type": "string"},
                "b": {"type": "string", "nullable": true},
                "m": {"type": "object", "additionalProperties": {"type": "string"}},
            }},
        }}));
        let mut obj = json!({"spec": {"a": null, "b": null, "m": {"k": null, "j": "v"}}});
        let removed = prune(&s, &mut obj);
        assert!(removed.is_empty(), "{removed:?}");
        assert_eq!(obj, json!({"spec": {"b": null, "m": {"j": "v"}}}));
    }

    #[test]
    fn pruning_twice_removes_nothing_more() {
        let s = schema(
            json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
                "a": {"type": "array", "items": {"type": "object", "properties": {"b": {"type": "string"}}}},
                "m": {"type": "object", "additionalProperties": {"type": "object", "properties": {"c": {"type": "integer"}}}},
            }}}}),
        );
        let mut obj = json!({"spec": {"a": [{"b": "x", "y": 1}, {"z": null}], "m": {"k": {"c": 1, "d": 2}}, "e": 3}, "f": 4});
        assert_eq!(
            prune(&s, &mut obj),
            ["f", "spec.a[0].y", "spec.a[1].z", "spec.e", "spec.m.k.d"]
        );
        let once = obj.clone();
        assert_eq!(prune(&s, &mut obj), Vec::<String>::new());
        assert_eq!(obj, once);
    }

    #[test]
    fn a_value_of_the_wrong_shape_loses_its_unknown_keys() {
        let s = schema(json!({"type": "object", "properties": {"n": {"type": "integer"}}}));
        let mut obj = json!({"n": {"a": 1}});
        assert_eq!(prune(&s, &mut obj), ["n.a"]);
        assert_eq!(obj, json!({"n": {}}));
    }
}
