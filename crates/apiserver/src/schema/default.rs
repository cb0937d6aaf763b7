//! Defaulting: filling absent fields from the schema's `default` values.
//!
//! Top-down: at an object node, every property with a `default` that is absent (or `null`
//! without `nullable`) gets a copy of the default; then each present property (including
//! the ones just defaulted) is defaulted in turn. So a default inside a missing parent
//! applies only when the parent itself is created by a default, as in Kubernetes. Array
//! items and map values (`additionalProperties`) are defaulted with their schema; an item
//! or map value that is a non-nullable `null` takes its schema's default.
//!
//! Subtrees without any default below them are skipped, so the common case costs one flag
//! test per node.

use serde_json::Value;

use super::{Additional, Structural};

/// Applies the defaults of `s` to `v`.
pub(crate) fn apply(s: &Structural, v: &mut Value) {
    if !s.subtree_defaults {
        return;
    }
    match v {
        Value::Object(map) => {
            for (k, ps) in &s.properties {
                match map.get_mut(k) {
                    Some(child) => {
                        if child.is_null()
                            && !ps.nullable
                            && let Some(d) = &ps.default
                        {
                            *child = d.clone();
                        }
                        apply(ps, child);
                    }
                    None => {
                        if let Some(d) = &ps.default {
                            let child = map.entry(k.clone()).or_insert_with(|| d.clone());
                            apply(ps, child);
                        }
                    }
                }
            }
            if let Additional::Schema(a) = &s.additional {
                for (k, child) in map.iter_mut() {
                    if s.declared_property(k).is_none() {
                        fill_null(a, child);
                        apply(a, child);
                    }
                }
            }
        }
        Value::Array(items) => {
            if let Some(is) = s.items.as_deref() {
                for item in items {
                    fill_null(is, item);
                    apply(is, item);
                }
            }
        }
        _ => {}
    }
}

fn fill_null(s: &Structural, v: &mut Value) {
    if v.is_null()
        && !s.nullable
        && let Some(d) = &s.default
    {
        *v = d.clone();
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::{apply_defaults, prune};
    use super::*;

    fn schema(v: Value) -> Structural {
        Structural::from_json(&v, "s").expect("structural")
    }

    #[test]
    fn absent_fields_get_their_defaults_and_present_ones_are_kept() {
        let s = schema(
            json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
                "replicas": {"type": "integer", "default": 1},
                "mode": {"type": "string", "default": "fast"},
            }}}}),
        );
        let mut obj = json!({"spec": {"mode": "slow"}});
        apply_defaults(&s, &mut obj);
        assert_eq!(obj, json!({"spec": {"mode": "slow", "replicas": 1}}));
    }

    #[test]
    fn defaults_inside_a_missing_parent_apply_only_when_the_parent_is_defaulted() {
        let inner =
            json!({"type": "object", "properties": {"x": {"type": "integer", "default": 7}}});
        let mut with_default = inner.clone();
        with_default["default"] = json!({});
        let s = schema(
            json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
                "plain": inner, "defaulted": with_default,
            }}}}),
        );
        let mut obj = json!({"spec": {}});
        apply_defaults(&s, &mut obj);
        assert_eq!(obj, json!({"spec": {"defaulted": {"x": 7}}}));
        let mut obj = json!({});
        apply_defaults(&s, &mut obj);
        assert_eq!(obj, json!({}), "spec itself has no default");
    }

    #[test]
    fn null_on_a_non_nullable_field_is_dropped_then_defaulted() {
        let s = schema(
            json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
                "a": {"type": "string", "default": "A"},
                "b": {"type": "string", "nullable": true, "default": "B"},
                "c": {"type": "string"},
            }}}}),
        );
        let mut obj = json!({"spec": {"a": null, "b": null, "c": null}});
        prune(&s, &mut obj);
        apply_defaults(&s, &mut obj);
        assert_eq!(obj, json!({"spec": {"a": "A", "b": null}}));
        // Read path (no prune): a stored null is defaulted too.
        let mut stored = json!({"spec": {"a": null, "b": null}});
        apply_defaults(&s, &mut stored);
        assert_eq!(stored, json!({"spec": {"a": "A", "b": null}}));
    }

    #[test]
    fn items_and_map_values_are_defaulted_with_their_schema() {
        let s = schema(
            json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
                "ports": {"type": "array", "items": {"type": "object", "properties": {
                    "protocol": {"type": "string", "default": "TCP"}, "port": {"type": "integer"}}}},
                "limits": {"type": "object", "additionalProperties": {"type": "object", "properties": {
                    "max": {"type": "integer", "default": 10}}}},
            }}}}),
        );
        let mut obj = json!({"spec": {"ports": [{"port": 80}, {"port": 53, "protocol": "UDP"}], "limits": {"cpu": {}}}});
        apply_defaults(&s, &mut obj);
        assert_eq!(
            obj,
            json!({"spec": {
                "ports": [{"port": 80, "protocol": "TCP"}, {"port": 53, "protocol": "UDP"}],
                "limits": {"cpu": {"max": 10}},
            }})
        );
    }

    #[test]
    fn embedded_resources_are_defaulted_like_any_object() {
        let s = schema(json!({"type": "object", "properties": {"template": {
        "type": "object", "x-kubernetes-embedded-resource": true, "properties": {
            "spec": {"type": "object", "properties": {"restartPolicy": {"type": "string", "default": "Always"}}, "default": {}},
        }}}}));
        let mut obj = json!({"template": {"apiVersion": "v1", "kind": "Pod"}});
        apply_defaults(&s, &mut obj);
        assert_eq!(
            obj,
            json!({"template": {"apiVersion": "v1", "kind": "Pod", "spec": {"restartPolicy": "Always"}}})
        );
    }

    #[test]
    fn defaulting_twice_changes_nothing() {
        let s = schema(
            json!({"type": "object", "properties": {"spec": {"type": "object", "default": {}, "properties": {
            "n": {"type": "integer", "default": 3}}}}}),
        );
        let mut once = json!({});
        apply_defaults(&s, &mut once);
        let mut twice = once.clone();
        apply_defaults(&s, &mut twice);
        assert_eq!(once, json!({"spec": {"n": 3}}));
        assert_eq!(once, twice);
    }
}
