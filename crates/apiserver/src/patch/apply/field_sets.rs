//! Which fields a value sets, as a [`FieldSet`]: the walk that knows where it stands (the
//! kind, the list types of the built-in table or of the structural schema) and the fields
//! that are never owned (server metadata, `apiVersion`, `kind`).

use std::collections::HashSet;

use serde_json::Value;

use crate::patch::fields::{FieldSet, field_element, key_element, value_element};
use crate::patch::strategic::{ListStrategy, list_strategy};
use crate::schema::{ListType, Structural};

/// Metadata fields the server owns; they are never in a field set.
pub(super) const SERVER_METADATA: &[&str] = &[
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "generation",
    "managedFields",
    "selfLink",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
];

/// Objects of built-in kinds that are owned whole (Kubernetes' `structType`/`mapType=atomic`):
/// (kind, dotted path).
pub(super) const ATOMIC_OBJECTS: &[(&str, &str)] = &[
    ("Deployment", "spec.selector"),
    ("ReplicaSet", "spec.selector"),
    ("StatefulSet", "spec.selector"),
    ("DaemonSet", "spec.selector"),
    ("Job", "spec.selector"),
    ("Service", "spec.selector"),
];

/// Where the list types of a kind come from.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Lists<'a> {
    /// A kind without a structural schema (the built-ins): the strategic merge table, by
    /// bare kind name (`Deployment`).
    Builtin(&'a str),
    /// A custom kind's structural schema.
    Custom(&'a Structural),
}

/// A position in the schema while walking an object. A built-in position is the chain of
/// field names from the root, borrowed from the walk, so moving to a field allocates nothing;
/// the dotted path is built only when a list asks for its type.
#[derive(Clone, Copy, Debug)]
pub(super) enum Cursor<'a, 'p> {
    /// In a built-in kind (or anywhere in `metadata`): the field `name` below `parent`.
    Builtin {
        kind: &'a str,
        parent: Option<&'p Cursor<'a, 'p>>,
        name: &'p str,
    },
    /// In a custom kind: the schema node, if the schema describes the position.
    Custom {
        node: Option<&'a Structural>,
        root: bool,
    },
}

impl<'a, 'p> Cursor<'a, 'p> {
    pub(super) fn root(lists: Lists<'a>) -> Cursor<'a, 'p> {
        match lists {
            Lists::Builtin(kind) => Cursor::Builtin {
                kind,
                parent: None,
                name: "",
            },
            Lists::Custom(s) => Cursor::Custom {
                node: Some(s),
                root: true,
            },
        }
    }

    pub(super) fn field<'q>(&'q self, name: &'q str) -> Cursor<'a, 'q>
    where
        'p: 'q,
    {
        match *self {
            Cursor::Builtin { kind, .. } => Cursor::Builtin {
                kind,
                parent: Some(self),
                name,
            },
            // Every kind's metadata is an ObjectMeta, whatever the schema says.
            Cursor::Custom { root: true, .. } if name == "metadata" => Cursor::Builtin {
                kind: "",
                parent: None,
                name: "metadata",
            },
            Cursor::Custom { node, .. } => Cursor::Custom {
                node: node.and_then(|n| n.property(name)),
                root: false,
            },
        }
    }

    pub(super) fn item(&self) -> Cursor<'a, 'p> {
        match *self {
            Cursor::Builtin { .. } => *self,
            Cursor::Custom { node, .. } => Cursor::Custom {
                node: node.and_then(Structural::items),
                root: false,
            },
        }
    }

    /// The dotted path of a built-in position (`spec.template.spec.containers`).
    pub(super) fn dotted(&self) -> String {
        let mut names = Vec::new();
        let mut at = Some(self);
        while let Some(Cursor::Builtin { parent, name, .. }) = at {
            if !name.is_empty() {
                names.push(*name);
            }
            at = *parent;
        }
        names.reverse();
        names.join(".")
    }

    /// Whether a built-in position is exactly `dotted`, without building its path.
    pub(super) fn is_at(&self, dotted: &str) -> bool {
        let mut at = Some(self);
        for want in dotted.rsplit('.') {
            match at {
                Some(Cursor::Builtin { parent, name, .. }) if *name == want => at = *parent,
                _ => return false,
            }
        }
        matches!(
            at,
            None | Some(Cursor::Builtin {
                name: "",
                parent: None,
                ..
            })
        )
    }

    pub(super) fn list_type(&self) -> ListType {
        match self {
            Cursor::Builtin { kind, .. } => match list_strategy(kind, &self.dotted()) {
                Some(ListStrategy::Set) => ListType::Set,
                Some(ListStrategy::MergeByKey(key)) => ListType::Map(vec![key.to_string()]),
                None => ListType::Atomic,
            },
            Cursor::Custom { node, .. } => node.map_or(ListType::Atomic, Structural::list_type),
        }
    }

    pub(super) fn atomic_object(&self) -> bool {
        match self {
            Cursor::Builtin { kind, .. } => ATOMIC_OBJECTS
                .iter()
                .any(|(k, p)| k == kind && self.is_at(p)),
            Cursor::Custom { .. } => false,
        }
    }
}

/// The path elements of a granular list's items, or `None` when the list is atomic (by type,
/// or because an item lacks its key or repeats one).
pub(super) fn item_elements(items: &[Value], lt: &ListType) -> Option<Vec<String>> {
    let elements: Vec<String> = match lt {
        ListType::Atomic => return None,
        ListType::Set => items
            .iter()
            .map(|v| (!v.is_object() && !v.is_array()).then(|| value_element(v)))
            .collect::<Option<_>>()?,
        ListType::Map(keys) => items
            .iter()
            .map(|v| {
                let m = v.as_object()?;
                let pairs: Vec<(&str, &Value)> = keys
                    .iter()
                    .map(|k| m.get(k).filter(|v| !v.is_null()).map(|v| (k.as_str(), v)))
                    .collect::<Option<_>>()?;
                Some(key_element(&pairs))
            })
            .collect::<Option<_>>()?,
    };
    let mut seen = HashSet::with_capacity(elements.len());
    elements
        .iter()
        .all(|e| seen.insert(e.as_str()))
        .then_some(elements)
}

/// Calls `f` for each top-level field that can be owned (`apiVersion`, `kind` and server-owned
/// metadata skipped), with its path elements and schema position. `keys` lists the union of
/// the objects' keys.
pub(super) fn for_each_root_field<'a>(
    objects: &[Option<&'a Value>],
    lists: Lists<'a>,
    mut f: impl FnMut(&[String], &Cursor<'a, '_>, &dyn Fn(&'a Value) -> Option<&'a Value>),
) {
    let root = Cursor::root(lists);
    let mut keys: Vec<&str> = Vec::new();
    for o in objects.iter().flatten() {
        if let Some(m) = o.as_object() {
            for k in m.keys() {
                if !keys.contains(&k.as_str()) {
                    keys.push(k);
                }
            }
        }
    }
    for k in keys {
        match k {
            "apiVersion" | "kind" => {}
            "metadata" => {
                let meta = root.field("metadata");
                let mut meta_keys: Vec<&str> = Vec::new();
                for o in objects.iter().flatten() {
                    if let Some(m) = o.get("metadata").and_then(Value::as_object) {
                        for mk in m.keys() {
                            if !SERVER_METADATA.contains(&mk.as_str())
                                && !meta_keys.contains(&mk.as_str())
                            {
                                meta_keys.push(mk);
                            }
                        }
                    }
                }
                for mk in meta_keys {
                    let path = [field_element("metadata"), field_element(mk)];
                    let get = |o: &'a Value| o.get("metadata").and_then(|m| m.get(mk));
                    f(&path, &meta.field(mk), &get);
                }
            }
            _ => {
                let path = [field_element(k)];
                let get = |o: &'a Value| o.get(k);
                f(&path, &root.field(k), &get);
            }
        }
    }
}

/// The fields an apply body sets: every scalar, atomic list or object, empty object, and item
/// of a granular list.
pub(crate) fn field_set(config: &Value, lists: Lists<'_>) -> FieldSet {
    let mut set = FieldSet::new();
    for_each_root_field(&[Some(config)], lists, |path, cur, get| {
        if let Some(v) = get(config) {
            let node = owned_fields(v, cur);
            if !node.is_empty() {
                graft(&mut set, path, node);
            }
        }
    });
    set
}

pub(super) fn owned_fields(v: &Value, cur: &Cursor<'_, '_>) -> FieldSet {
    let mut node = FieldSet::new();
    match v {
        Value::Object(m) if !m.is_empty() && !cur.atomic_object() => {
            for (k, cv) in m {
                node.put_child(field_element(k), owned_fields(cv, &cur.field(k)));
            }
            if node.is_empty() {
                node.mark();
            }
        }
        Value::Array(items) if !items.is_empty() => match item_elements(items, &cur.list_type()) {
            Some(elements) => {
                let item_cur = cur.item();
                for (item, e) in items.iter().zip(elements) {
                    let mut child = FieldSet::new();
                    if let Value::Object(m) = item {
                        for (k, cv) in m {
                            child.put_child(field_element(k), owned_fields(cv, &item_cur.field(k)));
                        }
                    }
                    child.mark();
                    node.put_child(e, child);
                }
            }
            None => node.mark(),
        },
        _ => node.mark(),
    }
    node
}

/// Every path in `v` (each node a member), as the comparison of an added or removed value
/// reports it.
pub(super) fn all_fields(v: &Value, cur: &Cursor<'_, '_>) -> FieldSet {
    let mut node = FieldSet::new();
    match v {
        Value::Object(m) if !cur.atomic_object() => {
            for (k, cv) in m {
                node.put_child(field_element(k), all_fields(cv, &cur.field(k)));
            }
        }
        Value::Array(items) => {
            if let Some(elements) = item_elements(items, &cur.list_type()) {
                let item_cur = cur.item();
                for (item, e) in items.iter().zip(elements) {
                    node.put_child(e, all_fields(item, &item_cur));
                }
            }
        }
        _ => {}
    }
    node.mark();
    node
}

/// Puts `node` at `path` below `set`.
pub(super) fn graft(set: &mut FieldSet, path: &[String], node: FieldSet) {
    match path.split_last() {
        None => set.union(&node),
        Some((last, parents)) => {
            let mut at = set;
            for p in parents {
                at = at.child_mut(p);
            }
            at.put_child(last.clone(), node);
        }
    }
}
