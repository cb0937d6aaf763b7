//! Field sets and `metadata.managedFields`: which fields of an object each manager owns.
//!
//! A [`FieldSet`] is a tree of path elements written as Kubernetes writes them in `fieldsV1`:
//! `f:<field>` for an object field or map key, `k:{"name":"c"}` for an element of a list keyed
//! by its fields, `v:"x"` for an element of a set, `i:0` for an element by index. A node is a
//! *member* when the path ending there is in the set; `fieldsV1` marks a member that also has
//! members below it with `".": {}` and a member leaf as `{}`. A node that is no member and has
//! nothing below it is never kept, so an empty tree is an empty set.
//!
//! [`ManagedEntry`] is one element of `metadata.managedFields`: a manager, an operation
//! (`Apply` or `Update`), an apiVersion, a time, an optional subresource and the fields it owns.
//! [`decode_managed`] and [`encode_managed`] convert between the object's JSON and entries;
//! entries are kept sorted as Kubernetes sorts them (Apply before Update, then by time, manager,
//! apiVersion, subresource), so an unchanged set of entries encodes to the same bytes.
//!
//! What it does not do: decide which fields a write touches (that is [`super::apply`]).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde_json::{Map, Value, json};

/// A set of field paths, as a tree of `fieldsV1` path elements.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct FieldSet {
    member: bool,
    children: BTreeMap<String, FieldSet>,
}

/// The path element of an object field or map key: `f:<name>`.
pub(crate) fn field_element(name: &str) -> String {
    let mut s = String::with_capacity(name.len() + 2);
    s.push_str("f:");
    s.push_str(name);
    s
}

/// The path element of a list element identified by key fields: `k:{"name":"c"}`, key fields
/// sorted by name.
pub(crate) fn key_element(keys: &[(&str, &Value)]) -> String {
    let map: Map<String, Value> = keys
        .iter()
        .map(|(k, v)| ((*k).to_string(), (*v).clone()))
        .collect();
    format!("k:{}", Value::Object(map))
}

/// The path element of a set member: `v:<json>`.
pub(crate) fn value_element(v: &Value) -> String {
    format!("v:{v}")
}

impl FieldSet {
    /// The empty set.
    pub(crate) fn new() -> FieldSet {
        FieldSet::default()
    }

    /// Whether the set has no member.
    pub(crate) fn is_empty(&self) -> bool {
        !self.member && self.children.is_empty()
    }

    /// Whether the path ending at this node is in the set.
    pub(crate) fn is_member(&self) -> bool {
        self.member
    }

    /// Makes the path ending at this node a member.
    pub(crate) fn mark(&mut self) {
        self.member = true;
    }

    /// The node below this one at `element`.
    pub(crate) fn child(&self, element: &str) -> Option<&FieldSet> {
        self.children.get(element)
    }

    /// The node below this one at `element`, created if absent. Callers must not leave it
    /// empty (use [`FieldSet::put_child`] when it may stay empty).
    pub(crate) fn child_mut(&mut self, element: &str) -> &mut FieldSet {
        if !self.children.contains_key(element) {
            self.children.insert(element.to_string(), FieldSet::new());
        }
        self.children
            .get_mut(element)
            .expect("the child was just inserted")
    }

    /// Adds `child` below this node at `element` unless it is empty (merging with what is
    /// there).
    pub(crate) fn put_child(&mut self, element: String, child: FieldSet) {
        if child.is_empty() {
            return;
        }
        match self.children.get_mut(&element) {
            Some(existing) => existing.union(&child),
            None => {
                self.children.insert(element, child);
            }
        }
    }

    /// Adds the path `elements` (from this node) to the set.
    pub(crate) fn insert(&mut self, elements: &[String]) {
        let mut node = self;
        for e in elements {
            node = node.child_mut(e);
        }
        node.member = true;
    }

    /// The children of this node, by element.
    pub(crate) fn children(&self) -> impl Iterator<Item = (&String, &FieldSet)> {
        self.children.iter()
    }

    /// Adds every member of `other`.
    pub(crate) fn union(&mut self, other: &FieldSet) {
        self.member |= other.member;
        for (k, c) in &other.children {
            match self.children.get_mut(k) {
                Some(mine) => mine.union(c),
                None => {
                    self.children.insert(k.clone(), c.clone());
                }
            }
        }
    }

    /// The members of `self` that are not members of `other`.
    pub(crate) fn difference(&self, other: &FieldSet) -> FieldSet {
        let mut out = FieldSet {
            member: self.member && !other.member,
            children: BTreeMap::new(),
        };
        for (k, c) in &self.children {
            let d = match other.children.get(k) {
                Some(o) => c.difference(o),
                None => c.clone(),
            };
            if !d.is_empty() {
                out.children.insert(k.clone(), d);
            }
        }
        out
    }

    /// The members of both sets.
    pub(crate) fn intersection(&self, other: &FieldSet) -> FieldSet {
        let mut out = FieldSet {
            member: self.member && other.member,
            children: BTreeMap::new(),
        };
        for (k, c) in &self.children {
            if let Some(o) = other.children.get(k) {
                let i = c.intersection(o);
                if !i.is_empty() {
                    out.children.insert(k.clone(), i);
                }
            }
        }
        out
    }

    /// Every member as a path in Kubernetes' notation (`.spec.containers[name="c"].image`):
    /// at each level the members first, then what lies below, each in element order.
    pub(crate) fn paths(&self) -> Vec<String> {
        let mut out = Vec::new();
        self.collect_paths(&mut String::new(), &mut out);
        out
    }

    fn collect_paths(&self, prefix: &mut String, out: &mut Vec<String>) {
        let base = prefix.len();
        for (k, c) in &self.children {
            if c.member {
                push_display(prefix, k);
                out.push(prefix.clone());
                prefix.truncate(base);
            }
        }
        for (k, c) in &self.children {
            if !c.children.is_empty() {
                push_display(prefix, k);
                c.collect_paths(prefix, out);
                prefix.truncate(base);
            }
        }
    }

    /// The set in `fieldsV1` form.
    pub(crate) fn to_fields_v1(&self) -> Value {
        let mut map = Map::new();
        if self.member && !self.children.is_empty() {
            map.insert(".".into(), json!({}));
        }
        for (k, c) in &self.children {
            map.insert(k.clone(), c.to_fields_v1());
        }
        Value::Object(map)
    }

    /// Reads a `fieldsV1` value; anything that is not an object reads as the empty set.
    pub(crate) fn from_fields_v1(v: &Value) -> FieldSet {
        let mut out = FieldSet::new();
        if let Value::Object(map) = v {
            for (k, c) in map {
                if k == "." {
                    continue;
                }
                let mut child = FieldSet::from_fields_v1(c);
                let leaf = c.as_object().is_some_and(Map::is_empty);
                if leaf || c.get(".").is_some() {
                    child.member = true;
                }
                if !child.is_empty() {
                    out.children.insert(k.clone(), child);
                }
            }
        }
        out
    }
}

/// Appends one path element in Kubernetes' path notation: `.name`, `[k=v,…]`, `[=v]`, `[0]`.
fn push_display(out: &mut String, element: &str) {
    if let Some(name) = element.strip_prefix("f:") {
        out.push('.');
        out.push_str(name);
    } else if let Some(keys) = element.strip_prefix("k:") {
        out.push('[');
        match serde_json::from_str::<Map<String, Value>>(keys) {
            Ok(map) => {
                for (n, (k, v)) in map.iter().enumerate() {
                    if n > 0 {
                        out.push(',');
                    }
                    let _ = write!(out, "{k}={v}");
                }
            }
            Err(_) => out.push_str(keys),
        }
        out.push(']');
    } else if let Some(v) = element.strip_prefix("v:") {
        let _ = write!(out, "[={v}]");
    } else if let Some(i) = element.strip_prefix("i:") {
        let _ = write!(out, "[{i}]");
    } else {
        out.push_str(element);
    }
}

/// The operation a managedFields entry records.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Operation {
    /// A server-side apply.
    Apply,
    /// Any other write (create, update, non-apply patch).
    Update,
}

impl Operation {
    fn as_str(self) -> &'static str {
        match self {
            Operation::Apply => "Apply",
            Operation::Update => "Update",
        }
    }
}

/// One element of `metadata.managedFields`.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ManagedEntry {
    /// The field manager.
    pub(crate) manager: String,
    /// How it wrote.
    pub(crate) operation: Operation,
    /// The apiVersion it wrote with.
    pub(crate) api_version: String,
    /// When its fields last changed (RFC 3339, seconds); `None` until the write settles it.
    pub(crate) time: Option<String>,
    /// `status` (or another subresource) for writes through a subresource; empty otherwise.
    pub(crate) subresource: String,
    /// The fields it owns.
    pub(crate) fields: FieldSet,
}

impl ManagedEntry {
    /// Whether this entry belongs to `manager` writing with `operation` through `subresource`
    /// (Kubernetes keeps one entry per such triple).
    pub(crate) fn is(&self, manager: &str, operation: Operation, subresource: &str) -> bool {
        self.manager == manager && self.operation == operation && self.subresource == subresource
    }

    /// The manager as conflict messages name it: `"m"`, `"m" with subresource "status"`,
    /// `"m" using apps/v1` for Update managers.
    pub(crate) fn describe(&self) -> String {
        let mut s = json!(self.manager).to_string();
        if !self.subresource.is_empty() {
            let _ = write!(s, " with subresource {}", json!(self.subresource));
        }
        if self.operation == Operation::Update {
            let _ = write!(s, " using {}", self.api_version);
        }
        s
    }

    fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("manager".into(), json!(self.manager));
        m.insert("operation".into(), json!(self.operation.as_str()));
        m.insert("apiVersion".into(), json!(self.api_version));
        if let Some(t) = &self.time {
            m.insert("time".into(), json!(t));
        }
        m.insert("fieldsType".into(), json!("FieldsV1"));
        m.insert("fieldsV1".into(), self.fields.to_fields_v1());
        if !self.subresource.is_empty() {
            m.insert("subresource".into(), json!(self.subresource));
        }
        Value::Object(m)
    }

    fn from_json(v: &Value) -> Option<ManagedEntry> {
        let operation = match v.get("operation")?.as_str()? {
            "Apply" => Operation::Apply,
            "Update" => Operation::Update,
            _ => return None,
        };
        let text = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
        Some(ManagedEntry {
            manager: text("manager").unwrap_or_default(),
            operation,
            api_version: text("apiVersion").unwrap_or_default(),
            time: text("time"),
            subresource: text("subresource").unwrap_or_default(),
            fields: v
                .get("fieldsV1")
                .map(FieldSet::from_fields_v1)
                .unwrap_or_default(),
        })
    }
}

/// The managedFields entries of `obj` (entries that cannot be read are skipped).
pub(crate) fn decode_managed(obj: &Value) -> Vec<ManagedEntry> {
    obj.pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(ManagedEntry::from_json).collect())
        .unwrap_or_default()
}

/// Drops entries that own nothing, sorts the rest as Kubernetes does and encodes them; `None`
/// when no entry is left (the field is then omitted).
pub(crate) fn encode_managed(entries: &mut Vec<ManagedEntry>) -> Option<Value> {
    entries.retain(|e| !e.fields.is_empty());
    if entries.is_empty() {
        return None;
    }
    entries.sort_by(|a, b| {
        a.operation
            .cmp(&b.operation)
            .then_with(|| a.time.cmp(&b.time))
            .then_with(|| a.manager.cmp(&b.manager))
            .then_with(|| a.api_version.cmp(&b.api_version))
            .then_with(|| a.subresource.cmp(&b.subresource))
    });
    Some(Value::Array(
        entries.iter().map(ManagedEntry::to_json).collect(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(v: Value) -> FieldSet {
        FieldSet::from_fields_v1(&v)
    }

    #[test]
    fn fields_v1_round_trips_with_dot_markers_only_on_members_with_children() {
        let v = json!({"f:data": {".": {}, "f:a": {}, "f:b": {}},
                       "f:metadata": {"f:labels": {"f:app": {}}},
                       "f:spec": {"f:containers": {"k:{\"name\":\"c\"}": {".": {}, "f:image": {}}}}});
        let s = set(v.clone());
        assert_eq!(s.to_fields_v1(), v);
        assert!(s.child("f:data").is_some_and(FieldSet::is_member));
        assert!(!s.child("f:metadata").is_some_and(FieldSet::is_member));
    }

    #[test]
    fn set_operations_keep_only_nonempty_nodes() {
        let a = set(json!({"f:data": {"f:a": {}, "f:b": {}}, "f:x": {}}));
        let b = set(json!({"f:data": {"f:a": {}}}));
        assert_eq!(
            a.difference(&b).to_fields_v1(),
            json!({"f:data": {"f:b": {}}, "f:x": {}})
        );
        assert_eq!(
            a.intersection(&b).to_fields_v1(),
            json!({"f:data": {"f:a": {}}})
        );
        assert!(b.difference(&a).is_empty());
        let mut u = b.clone();
        u.union(&set(json!({"f:y": {}})));
        assert_eq!(u.to_fields_v1(), json!({"f:data": {"f:a": {}}, "f:y": {}}));
    }

    #[test]
    fn paths_print_as_kubernetes_prints_them() {
        let s = set(json!({"f:spec": {"f:replicas": {},
            "f:containers": {"k:{\"name\":\"c\",\"port\":80}": {".": {}, "f:image": {}}},
            "f:finalizers": {"v:\"x\"": {}}}}));
        assert_eq!(
            s.paths(),
            [
                ".spec.replicas",
                ".spec.containers[name=\"c\",port=80]",
                ".spec.containers[name=\"c\",port=80].image",
                ".spec.finalizers[=\"x\"]"
            ]
        );
    }

    #[test]
    fn entries_sort_apply_first_and_drop_empty_ones() {
        let entry = |m: &str, op, f: Value| ManagedEntry {
            manager: m.into(),
            operation: op,
            api_version: "v1".into(),
            time: Some("2024-05-01T12:00:00Z".into()),
            subresource: String::new(),
            fields: set(f),
        };
        let mut entries = vec![
            entry("b", Operation::Update, json!({"f:a": {}})),
            entry("a", Operation::Apply, json!({"f:b": {}})),
            entry("c", Operation::Update, json!({})),
        ];
        let v = encode_managed(&mut entries).expect("two entries left");
        assert_eq!(v[0]["manager"], "a");
        assert_eq!(v[1]["manager"], "b");
        assert_eq!(v.as_array().map(Vec::len), Some(2));
        assert_eq!(v[0]["fieldsType"], "FieldsV1");
        let back = decode_managed(&json!({"metadata": {"managedFields": v}}));
        assert_eq!(back, entries);
        assert_eq!(
            back[1].describe(),
            "\"b\" using v1",
            "Update managers name their apiVersion"
        );
    }
}
