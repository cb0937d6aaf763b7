//! Strategic merge patch (`application/strategic-merge-patch+json`) for the built-in kinds.
//!
//! A strategic merge patch is a JSON merge patch (RFC 7386: objects merge key by key, `null`
//! deletes a key, scalars replace) in which some lists merge element by element instead of being
//! replaced, and which may carry `$`-directives. Which lists merge, and by which key, comes from
//! the `patchStrategy`/`patchMergeKey` tags of the Kubernetes Go types; here that knowledge is the
//! table [`LIST_RULES`] (spec Appendix B).
//!
//! Where to start: [`strategic_merge`] applies a patch to a live object; [`Merger`] walks the two
//! documents side by side; [`list_strategy`] answers "how does the list at this path merge?".
//!
//! What it does not do: custom resources (the caller answers 415 for those); computing patches
//! (kubectl's job); validating, defaulting or decoding the result (the caller runs the update path
//! on it). Because nothing decodes the result into typed structs here, an empty list or map left
//! behind by a merge (say `finalizers: []` after the last one was deleted) stays in the output,
//! where Kubernetes would drop it through `omitempty`.
//!
//! # Semantics
//!
//! - Objects merge recursively; `null` deletes a key; a value for an absent key is taken as is
//!   (with its directives applied and its `null`s dropped).
//! - Lists merge by the strategy of their path: [`ListStrategy::Set`] (primitive values, union
//!   without duplicates), [`ListStrategy::MergeByKey`] (objects paired by a key field: a patch
//!   element merges into the live element with the same key value, new keys are appended in patch
//!   order, unmentioned live elements stay). Any other list is replaced by the patch's list.
//! - Scalars replace, even across JSON types (an `IntOrString` may go from `"25%"` to `1`). An
//!   object, a list and a scalar never replace one another: that is a
//!   [`StrategicMergeError::TypeMismatch`].
//!
//! # Directives
//!
//! | directive | where | effect |
//! |---|---|---|
//! | `"$patch": "merge"` | object, list element | the default; removed |
//! | `"$patch": "replace"` | object | the object replaces the live one instead of merging |
//! | `"$patch": "replace"` | list element | the whole list is replaced by the other patch elements; the marker element is dropped |
//! | `"$patch": "delete"` | object | the key is removed |
//! | `"$patch": "delete"` | element of a keyed list | the live element(s) with that key are removed (the key is required) |
//! | `"$retainKeys": [..]` | object | live keys not listed are dropped; every non-null patch key must be listed |
//! | `"$deleteFromPrimitiveList/<f>": [..]` | object | these values are removed from the live list `<f>` before the patch's `<f>` is merged |
//! | `"$setElementOrder/<f>": [..]` | object | after merging, `<f>` holds the listed elements first, in that order, then the rest in merged order; ignored for lists that are replaced |
//!
//! Any other key starting with `$` in a merged object is an error, and no directive survives into
//! the result. `$retainKeys` is honoured on any object, as the Kubernetes applier does, so the two
//! `retainKeys` fields of Appendix B (PodSpec `volumes` elements and Deployment `spec.strategy`)
//! need no table entry: kubectl sends the directive when it switches a union member.
//!
//! # Differences from Kubernetes, on purpose
//!
//! - `$patch: delete` on a nested object removes the key; Kubernetes leaves `{}` behind.
//! - `$patch: merge` on a list element is accepted as the explicit default; Kubernetes rejects it.
//! - Object type mismatches are rejected here; Kubernetes replaces the value and then fails to
//!   decode the result into the Go type, so the client sees an error either way.
//! - Kubernetes interleaves live-only elements by their original position when it orders a merged
//!   list; here live elements keep their order and new ones are appended, and
//!   `$setElementOrder` puts its elements first. Patches from kubectl give the same result both
//!   ways, since they list every element in `$setElementOrder`.
//! - Patch list elements that are not in `$setElementOrder` are accepted (Kubernetes rejects
//!   such patches).
//! - A replaced list is copied from the patch as is, except that elements carrying `$patch` are
//!   dropped (`replace`, `delete`) or stripped of it (`merge`). Nested `$` keys inside its elements
//!   are data (a CRD schema's `$ref`), not directives.

use std::borrow::Cow;
use std::fmt::Write as _;

use serde_json::{Map, Value};

/// Why a strategic merge patch could not be applied.
///
/// Every variant is the client's fault: answer 400 BadRequest (or 422 Invalid) with the
/// message, and do not retry. Paths are rendered like `.spec.template.spec.containers[0].env`;
/// list indices count elements of the *patch* list, since that is what the client wrote.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum StrategicMergeError {
    /// The patch document is not a JSON object.
    #[error("the strategic merge patch must be a json object")]
    PatchNotAnObject,
    /// A `$patch` directive has a value other than `replace`, `delete` or `merge`.
    #[error(
        "unknown $patch directive {value} at {path}: expected \"replace\", \"delete\" or \"merge\""
    )]
    UnknownPatchDirective {
        /// Where the directive appeared.
        path: String,
        /// The offending value, as JSON.
        value: String,
    },
    /// A key starting with `$` is not a known directive.
    #[error("unknown directive {directive:?} at {path}")]
    UnknownDirective {
        /// The object holding the key.
        path: String,
        /// The key.
        directive: String,
    },
    /// A known directive has a malformed value (e.g. `$retainKeys` is not a list of strings).
    #[error("invalid {directive} at {path}: {reason}")]
    InvalidDirective {
        /// The field the directive applies to.
        path: String,
        /// The directive's name (`$retainKeys`, `$setElementOrder`, `$deleteFromPrimitiveList`).
        directive: &'static str,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The patch and the live object disagree on the shape of a value (object, list or scalar).
    #[error("type mismatch at {path}: expected {expected}, found {found}")]
    TypeMismatch {
        /// Where the values meet.
        path: String,
        /// The shape the merge needs there.
        expected: &'static str,
        /// The shape the patch has there.
        found: &'static str,
    },
    /// An element of a list merged by key lacks the key (or has it set to `null`).
    #[error("list element at {path} has no merge key {key:?}")]
    MissingMergeKey {
        /// The patch element.
        path: String,
        /// The merge key of the list.
        key: &'static str,
    },
    /// The patch sets a field that its own `$retainKeys` directive does not list.
    #[error("field {field:?} at {path} is not listed in $retainKeys")]
    NotInRetainKeys {
        /// The object holding the directive.
        path: String,
        /// The field missing from the list.
        field: String,
    },
}

/// Applies a strategic merge patch to `original` for the built-in kind `kind` (e.g. "ConfigMap",
/// "Deployment", "Pod", "Service", "Namespace", "Secret", "ServiceAccount", "Event", "Lease",
/// "ReplicaSet", "Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding",
/// "CustomResourceDefinition").
///
/// `kind` only selects list strategies from [`LIST_RULES`]; an unknown kind merges like a JSON
/// merge patch with directives. The result is a new document; `original` is not touched. A patch
/// that is `{"$patch": "delete"}` at the top level yields `{}`.
///
/// # Errors
///
/// [`StrategicMergeError`]: the patch is not an object, uses an unknown or malformed directive,
/// disagrees with the live object on a value's shape, or lacks a merge key.
pub(crate) fn strategic_merge(
    kind: &str,
    original: &Value,
    patch: &Value,
) -> Result<Value, StrategicMergeError> {
    let Value::Object(patch) = patch else {
        return Err(StrategicMergeError::PatchNotAnObject);
    };
    let mut merger = Merger {
        kind,
        path: Vec::new(),
    };
    let original = match original {
        Value::Object(original) => Some(original),
        Value::Null => None,
        other => return Err(merger.mismatch("an object", other)),
    };
    let merged = merger.merge_object(original, patch)?;
    Ok(Value::Object(merged.unwrap_or_default()))
}

/// How the elements of a list field combine with the patch's elements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ListStrategy {
    /// A list of scalars merged as a set: patch values are added unless present already.
    Set,
    /// A list of objects merged element-wise, pairing elements by the value of this field.
    MergeByKey(&'static str),
}

/// Where the path of a [`ListRule`] starts.
#[derive(Debug, Clone, Copy)]
enum Anchor {
    /// The object root, for these kinds only.
    Kinds(&'static [&'static str]),
    /// Every `ObjectMeta`: `metadata` of any kind, and the metadata of a pod template.
    ObjectMeta,
    /// Every `PodSpec`: see [`POD_SPEC_ROOTS`].
    PodSpec,
    /// Every element of a PodSpec's container lists: see [`CONTAINER_LISTS`].
    Container,
}

/// One row of the table: the list at `path` (dotted field names, no list indices), measured from
/// `anchor`, merges with `strategy`.
#[derive(Debug, Clone, Copy)]
struct ListRule {
    /// Where `path` starts.
    anchor: Anchor,
    /// Field names from the anchor, joined by `.`.
    path: &'static str,
    /// How the list merges.
    strategy: ListStrategy,
}

/// Kinds whose `status.conditions` merge by `type`.
const CONDITION_KINDS: &[&str] = &[
    "Pod",
    "Namespace",
    "Deployment",
    "ReplicaSet",
    "Service",
    "Node",
];

/// Which list fields of the built-in kinds merge, and how; every other list is replaced.
///
/// The rows follow the `patchStrategy`/`patchMergeKey` tags of the Go types: Appendix B of the
/// spec, plus a few tagged fields it does not list (PodSpec `topologySpreadConstraints`,
/// `schedulingGates` and `resourceClaims`, Pod `status.podIPs`/`status.hostIPs`, Service
/// `status.conditions`, ServiceAccount `secrets`).
#[rustfmt::skip]
const LIST_RULES: &[ListRule] = &[
    set(Anchor::ObjectMeta,                   "finalizers"),
    keyed(Anchor::ObjectMeta,                 "ownerReferences",           "uid"),
    keyed(Anchor::PodSpec,                    "containers",                "name"),
    keyed(Anchor::PodSpec,                    "initContainers",            "name"),
    keyed(Anchor::PodSpec,                    "ephemeralContainers",       "name"),
    keyed(Anchor::PodSpec,                    "imagePullSecrets",          "name"),
    keyed(Anchor::PodSpec,                    "volumes",                   "name"),
    keyed(Anchor::PodSpec,                    "hostAliases",               "ip"),
    keyed(Anchor::PodSpec,                    "topologySpreadConstraints", "topologyKey"),
    keyed(Anchor::PodSpec,                    "schedulingGates",           "name"),
    keyed(Anchor::PodSpec,                    "resourceClaims",            "name"),
    keyed(Anchor::Container,                  "ports",                     "containerPort"),
    keyed(Anchor::Container,                  "env",                       "name"),
    keyed(Anchor::Container,                  "volumeMounts",              "mountPath"),
    keyed(Anchor::Container,                  "volumeDevices",             "devicePath"),
    keyed(Anchor::Kinds(&["Service"]),        "spec.ports",                "port"),
    keyed(Anchor::Kinds(CONDITION_KINDS),     "status.conditions",         "type"),
    keyed(Anchor::Kinds(&["Pod"]),            "status.podIPs",             "ip"),
    keyed(Anchor::Kinds(&["Pod"]),            "status.hostIPs",            "ip"),
    keyed(Anchor::Kinds(&["ServiceAccount"]), "secrets",                   "name"),
];

/// Where each kind keeps a `PodSpec`. The served kinds are Pod, Deployment and ReplicaSet; the
/// other workload kinds are listed so the table stays right if they are served later.
const POD_SPEC_ROOTS: &[(&str, &str)] = &[
    ("Pod", "spec"),
    ("Deployment", "spec.template.spec"),
    ("ReplicaSet", "spec.template.spec"),
    ("StatefulSet", "spec.template.spec"),
    ("DaemonSet", "spec.template.spec"),
    ("Job", "spec.template.spec"),
    ("PodTemplate", "template.spec"),
    ("ReplicationController", "spec.template.spec"),
    ("CronJob", "spec.jobTemplate.spec.template.spec"),
];

/// The PodSpec lists whose elements are containers.
const CONTAINER_LISTS: &[&str] = &["containers", "initContainers", "ephemeralContainers"];

/// A [`ListRule`] row for a list merged as a set.
const fn set(anchor: Anchor, path: &'static str) -> ListRule {
    ListRule {
        anchor,
        path,
        strategy: ListStrategy::Set,
    }
}

/// A [`ListRule`] row for a list merged by `key`.
const fn keyed(anchor: Anchor, path: &'static str, key: &'static str) -> ListRule {
    ListRule {
        anchor,
        path,
        strategy: ListStrategy::MergeByKey(key),
    }
}

/// The strategy of the list at `path` (dotted field names without indices) in a `kind` object,
/// or `None` when the list is replaced wholesale.
pub(crate) fn list_strategy(kind: &str, path: &str) -> Option<ListStrategy> {
    let pod_spec_root = POD_SPEC_ROOTS
        .iter()
        .find(|(k, _)| *k == kind)
        .map(|(_, root)| *root);
    let in_pod_spec = pod_spec_root.and_then(|root| strip_root(path, root));
    let in_container = in_pod_spec.and_then(|rest| {
        CONTAINER_LISTS
            .iter()
            .find_map(|list| strip_root(rest, list))
    });
    // A pod template's metadata sits beside its spec: `spec.template.metadata`.
    let template_metadata = pod_spec_root
        .and_then(|root| root.strip_suffix(".spec"))
        .map(|template| format!("{template}.metadata"));
    let in_object_meta =
        strip_root(path, "metadata").or_else(|| strip_root(path, template_metadata.as_deref()?));
    LIST_RULES
        .iter()
        .find(|rule| {
            let relative = match rule.anchor {
                Anchor::Kinds(kinds) => kinds.contains(&kind).then_some(path),
                Anchor::ObjectMeta => in_object_meta,
                Anchor::PodSpec => in_pod_spec,
                Anchor::Container => in_container,
            };
            relative == Some(rule.path)
        })
        .map(|rule| rule.strategy)
}

/// `path` with the leading `root.` removed, if it starts so.
fn strip_root<'p>(path: &'p str, root: &str) -> Option<&'p str> {
    path.strip_prefix(root)?.strip_prefix('.')
}

/// The `$patch` directive key.
const PATCH: &str = "$patch";
/// The `$retainKeys` directive key.
const RETAIN_KEYS: &str = "$retainKeys";
/// Prefix of the `$deleteFromPrimitiveList/<field>` directive keys.
const DELETE_FROM_PRIMITIVE_LIST: &str = "$deleteFromPrimitiveList/";
/// Prefix of the `$setElementOrder/<field>` directive keys.
const SET_ELEMENT_ORDER: &str = "$setElementOrder/";

/// The value of a `$patch` directive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PatchDirective {
    /// Replace instead of merging.
    Replace,
    /// Delete the object or list element.
    Delete,
    /// Merge (the default).
    Merge,
}

/// One step of the path from the document root, for error messages and table lookups.
#[derive(Debug, Clone)]
enum Segment {
    /// A field of an object.
    Field(String),
    /// An element of a patch list.
    Index(usize),
}

/// Walks a live document and a patch side by side.
///
/// `path` is the position of the values being merged. Functions push a segment before
/// descending and pop it after; when they return an error early the path is left as it was
/// at the failure, which is fine because an error ends the whole merge.
struct Merger<'k> {
    /// The kind of the patched object, for [`list_strategy`].
    kind: &'k str,
    /// Where the merge currently is.
    path: Vec<Segment>,
}

impl Merger<'_> {
    /// Merges the patch object `patch` into `live` (`None`: no live value). Returns `None` when
    /// the patch deletes the object.
    fn merge_object(
        &mut self,
        live: Option<&Map<String, Value>>,
        patch: &Map<String, Value>,
    ) -> Result<Option<Map<String, Value>>, StrategicMergeError> {
        let mut live = live;
        if let Some(directive) = patch.get(PATCH) {
            match self.patch_directive(directive)? {
                PatchDirective::Delete => return Ok(None),
                PatchDirective::Replace => live = None,
                PatchDirective::Merge => {}
            }
        }
        let mut result = live.cloned().unwrap_or_default();

        // Directives first: they act on the live value the fields then merge into.
        let mut element_orders = Vec::new();
        for (key, value) in patch.iter().filter(|(key, _)| key.starts_with('$')) {
            if key == PATCH {
                continue;
            } else if key == RETAIN_KEYS {
                self.retain_keys(&mut result, patch, value)?;
            } else if let Some(field) = key
                .strip_prefix(DELETE_FROM_PRIMITIVE_LIST)
                .filter(|f| !f.is_empty())
            {
                self.delete_from_primitive_list(&mut result, field, value)?;
            } else if let Some(field) = key
                .strip_prefix(SET_ELEMENT_ORDER)
                .filter(|f| !f.is_empty())
            {
                element_orders.push((field, value));
            } else {
                return Err(StrategicMergeError::UnknownDirective {
                    path: self.render_path(),
                    directive: key.clone(),
                });
            }
        }

        for (key, value) in patch.iter().filter(|(key, _)| !key.starts_with('$')) {
            if value.is_null() {
                result.remove(key);
                continue;
            }
            self.path.push(Segment::Field(key.clone()));
            let live_value = result.get(key).filter(|v| !v.is_null());
            let merged = self.merge_value(live_value, value)?;
            self.path.pop();
            match merged {
                Some(merged) => {
                    result.insert(key.clone(), merged);
                }
                None => {
                    result.remove(key);
                }
            }
        }

        for (field, order) in element_orders {
            self.set_element_order(&mut result, field, order)?;
        }
        Ok(Some(result))
    }

    /// Merges a non-null patch value into `live` (`None`: absent or `null`). Returns `None`
    /// when the patch deletes the value.
    fn merge_value(
        &mut self,
        live: Option<&Value>,
        patch: &Value,
    ) -> Result<Option<Value>, StrategicMergeError> {
        match (live, patch) {
            (None, Value::Object(patch)) => Ok(self.merge_object(None, patch)?.map(Value::Object)),
            (Some(Value::Object(live)), Value::Object(patch)) => {
                Ok(self.merge_object(Some(live), patch)?.map(Value::Object))
            }
            (None, Value::Array(patch)) => Ok(Some(Value::Array(self.merge_list(None, patch)?))),
            (Some(Value::Array(live)), Value::Array(patch)) => {
                Ok(Some(Value::Array(self.merge_list(Some(live), patch)?)))
            }
            (Some(live @ (Value::Object(_) | Value::Array(_))), patch)
            | (Some(live), patch @ (Value::Object(_) | Value::Array(_))) => {
                Err(self.mismatch(shape(live), patch))
            }
            (_, scalar) => Ok(Some(scalar.clone())),
        }
    }

    /// Merges a patch list into the live list at the current path, by that path's strategy.
    fn merge_list(
        &mut self,
        live: Option<&Vec<Value>>,
        patch: &[Value],
    ) -> Result<Vec<Value>, StrategicMergeError> {
        match list_strategy(self.kind, &self.schema_path()) {
            None => self.replace_list(patch),
            Some(ListStrategy::Set) => self.merge_set(live, patch),
            Some(ListStrategy::MergeByKey(key)) => self.merge_by_key(live, patch, key),
        }
    }

    /// A list without a strategy: the patch's list, minus `$patch` markers.
    fn replace_list(&mut self, patch: &[Value]) -> Result<Vec<Value>, StrategicMergeError> {
        let mut result = Vec::with_capacity(patch.len());
        for (index, element) in patch.iter().enumerate() {
            let directive = match element {
                Value::Object(object) => object.get(PATCH).map(|d| (object, d)),
                _ => None,
            };
            let Some((object, directive)) = directive else {
                result.push(element.clone());
                continue;
            };
            self.path.push(Segment::Index(index));
            let directive = self.patch_directive(directive)?;
            self.path.pop();
            if directive == PatchDirective::Merge && object.len() > 1 {
                let mut object = object.clone();
                object.remove(PATCH);
                result.push(Value::Object(object));
            }
        }
        Ok(result)
    }

    /// A list of scalars merged as a set.
    fn merge_set(
        &mut self,
        live: Option<&Vec<Value>>,
        patch: &[Value],
    ) -> Result<Vec<Value>, StrategicMergeError> {
        let mut replace = false;
        let mut additions = Vec::with_capacity(patch.len());
        for (index, element) in patch.iter().enumerate() {
            self.path.push(Segment::Index(index));
            match element {
                Value::Object(object) if object.len() == 1 && object.contains_key(PATCH) => {
                    match self.patch_directive(&object[PATCH])? {
                        PatchDirective::Replace => replace = true,
                        PatchDirective::Merge => {}
                        PatchDirective::Delete => return Err(self.mismatch("a scalar", element)),
                    }
                }
                Value::Object(_) | Value::Array(_) | Value::Null => {
                    return Err(self.mismatch("a scalar", element));
                }
                scalar => additions.push(scalar),
            }
            self.path.pop();
        }
        let live = if replace { None } else { live };
        let mut result: Vec<Value> = Vec::with_capacity(live.map_or(0, Vec::len) + additions.len());
        for value in live.into_iter().flatten().chain(additions) {
            if !result.contains(value) {
                result.push(value.clone());
            }
        }
        Ok(result)
    }

    /// A list of objects merged element-wise by `key`.
    fn merge_by_key(
        &mut self,
        live: Option<&Vec<Value>>,
        patch: &[Value],
        key: &'static str,
    ) -> Result<Vec<Value>, StrategicMergeError> {
        let mut replace = false;
        let mut deletions = Vec::new();
        let mut merges: Vec<(usize, Cow<'_, Map<String, Value>>)> = Vec::with_capacity(patch.len());
        for (index, element) in patch.iter().enumerate() {
            self.path.push(Segment::Index(index));
            let Value::Object(object) = element else {
                return Err(self.mismatch("an object", element));
            };
            match object
                .get(PATCH)
                .map(|d| self.patch_directive(d))
                .transpose()?
            {
                None => merges.push((index, Cow::Borrowed(object))),
                Some(PatchDirective::Replace) => replace = true,
                Some(PatchDirective::Delete) => deletions.push(self.merge_key_value(object, key)?),
                Some(PatchDirective::Merge) if object.len() == 1 => {}
                Some(PatchDirective::Merge) => {
                    let mut object = object.clone();
                    object.remove(PATCH);
                    merges.push((index, Cow::Owned(object)));
                }
            }
            self.path.pop();
        }

        let mut result = match live {
            Some(live) if !replace => live.clone(),
            _ => Vec::new(),
        };
        result.retain(|element| element_key(element, key).is_none_or(|k| !deletions.contains(&k)));
        for (index, object) in merges {
            self.path.push(Segment::Index(index));
            let wanted = self.merge_key_value(&object, key)?;
            let position = result
                .iter()
                .position(|element| element_key(element, key) == Some(wanted));
            match position {
                Some(position) => {
                    let merged = self.merge_object(result[position].as_object(), &object)?;
                    match merged {
                        Some(merged) => result[position] = Value::Object(merged),
                        None => {
                            result.remove(position);
                        }
                    }
                }
                None => {
                    if let Some(merged) = self.merge_object(None, &object)? {
                        result.push(Value::Object(merged));
                    }
                }
            }
            self.path.pop();
        }
        Ok(result)
    }

    /// Applies `$retainKeys`: drops the live keys it does not list.
    fn retain_keys(
        &self,
        result: &mut Map<String, Value>,
        patch: &Map<String, Value>,
        keys: &Value,
    ) -> Result<(), StrategicMergeError> {
        let keys: Option<Vec<&str>> = keys
            .as_array()
            .and_then(|keys| keys.iter().map(Value::as_str).collect());
        let Some(keys) = keys else {
            return Err(self.invalid_directive(RETAIN_KEYS, "must be a list of strings"));
        };
        if let Some((field, _)) = patch.iter().find(|(field, value)| {
            !field.starts_with('$') && !value.is_null() && !keys.contains(&field.as_str())
        }) {
            return Err(StrategicMergeError::NotInRetainKeys {
                path: self.render_path(),
                field: field.clone(),
            });
        }
        result.retain(|field, _| keys.contains(&field.as_str()));
        Ok(())
    }

    /// Applies `$deleteFromPrimitiveList/<field>`: removes `values` from the live list `field`.
    fn delete_from_primitive_list(
        &mut self,
        result: &mut Map<String, Value>,
        field: &str,
        values: &Value,
    ) -> Result<(), StrategicMergeError> {
        self.path.push(Segment::Field(field.to_owned()));
        let Value::Array(values) = values else {
            return Err(self.invalid_directive("$deleteFromPrimitiveList", "must be a list"));
        };
        match result.get_mut(field) {
            None | Some(Value::Null) => {}
            Some(Value::Array(items)) => items.retain(|item| !values.contains(item)),
            Some(other) => return Err(self.mismatch("a list", other)),
        }
        self.path.pop();
        Ok(())
    }

    /// Applies `$setElementOrder/<field>`: the listed elements first, in that order, then the
    /// others in their merged order.
    fn set_element_order(
        &mut self,
        result: &mut Map<String, Value>,
        field: &str,
        order: &Value,
    ) -> Result<(), StrategicMergeError> {
        self.path.push(Segment::Field(field.to_owned()));
        let Value::Array(order) = order else {
            return Err(self.invalid_directive("$setElementOrder", "must be a list"));
        };
        let strategy = list_strategy(self.kind, &self.schema_path());
        let items = match result.get_mut(field) {
            None | Some(Value::Null) => None,
            Some(Value::Array(items)) => Some(items),
            Some(other) => return Err(self.mismatch("a list", other)),
        };
        match (strategy, items) {
            (Some(ListStrategy::Set), Some(items)) => {
                items.sort_by_key(|item| {
                    order
                        .iter()
                        .position(|wanted| wanted == item)
                        .unwrap_or(usize::MAX)
                });
            }
            (Some(ListStrategy::MergeByKey(key)), Some(items)) => {
                let wanted: Option<Vec<&Value>> = order
                    .iter()
                    .map(|element| element_key(element, key))
                    .collect();
                let Some(wanted) = wanted else {
                    return Err(self.invalid_directive(
                        "$setElementOrder",
                        "every element must be an object with the merge key",
                    ));
                };
                items.sort_by_key(|item| {
                    element_key(item, key)
                        .and_then(|k| wanted.iter().position(|w| *w == k))
                        .unwrap_or(usize::MAX)
                });
            }
            // A replaced list already has the patch's order; a missing list has none.
            (None, _) | (_, None) => {}
        }
        self.path.pop();
        Ok(())
    }

    /// Parses the value of a `$patch` directive.
    fn patch_directive(&self, value: &Value) -> Result<PatchDirective, StrategicMergeError> {
        match value.as_str() {
            Some("replace") => Ok(PatchDirective::Replace),
            Some("delete") => Ok(PatchDirective::Delete),
            Some("merge") => Ok(PatchDirective::Merge),
            _ => Err(StrategicMergeError::UnknownPatchDirective {
                path: self.render_path(),
                value: value.to_string(),
            }),
        }
    }

    /// The merge key's value in a patch element; it must be present and not `null`.
    fn merge_key_value<'v>(
        &self,
        object: &'v Map<String, Value>,
        key: &'static str,
    ) -> Result<&'v Value, StrategicMergeError> {
        object
            .get(key)
            .filter(|value| !value.is_null())
            .ok_or_else(|| StrategicMergeError::MissingMergeKey {
                path: self.render_path(),
                key,
            })
    }

    /// A [`StrategicMergeError::TypeMismatch`] at the current path.
    fn mismatch(&self, expected: &'static str, found: &Value) -> StrategicMergeError {
        StrategicMergeError::TypeMismatch {
            path: self.render_path(),
            expected,
            found: shape(found),
        }
    }

    /// A [`StrategicMergeError::InvalidDirective`] at the current path.
    fn invalid_directive(
        &self,
        directive: &'static str,
        reason: &'static str,
    ) -> StrategicMergeError {
        StrategicMergeError::InvalidDirective {
            path: self.render_path(),
            directive,
            reason,
        }
    }

    /// The current path for messages: `.spec.containers[0].name`, or `.` at the root. Field
    /// names that are not plain identifiers are quoted: `.metadata.annotations["a.b/c"]`.
    fn render_path(&self) -> String {
        if self.path.is_empty() {
            return ".".to_owned();
        }
        let mut out = String::new();
        for segment in &self.path {
            // Writing into a String cannot fail.
            let _ = match segment {
                Segment::Field(name) if is_plain_field(name) => write!(out, ".{name}"),
                Segment::Field(name) => write!(out, "[{name:?}]"),
                Segment::Index(index) => write!(out, "[{index}]"),
            };
        }
        out
    }

    /// The current path as [`LIST_RULES`] spells it: field names joined by `.`, no indices.
    fn schema_path(&self) -> String {
        let mut out = String::new();
        for segment in &self.path {
            if let Segment::Field(name) = segment {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(name);
            }
        }
        out
    }
}

/// The merge key's value of a list element, if it is an object that has one.
fn element_key<'v>(element: &'v Value, key: &str) -> Option<&'v Value> {
    element
        .as_object()?
        .get(key)
        .filter(|value| !value.is_null())
}

/// Whether a field name can be printed after a `.` in a path without confusion.
fn is_plain_field(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// A JSON value's shape, for messages.
fn shape(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests;
