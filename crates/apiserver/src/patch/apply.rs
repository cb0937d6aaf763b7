//! Server-side apply and the ownership bookkeeping of every other write.
//!
//! An apply body is the manager's whole *intent*: [`apply`] merges it into the live object
//! (objects key by key, lists whole unless their list type says otherwise), removes the fields
//! the manager applied last time and left out now (unless another manager owns them), refuses
//! to change a field another manager owns (409, unless forced, which moves the field to the
//! applier) and records the applied fields as the manager's `Apply` entry of
//! `metadata.managedFields`. [`track_update`] does the bookkeeping of the other writes: the
//! fields a write adds or changes become its manager's (`Update` entry) and leave every other
//! manager; removed fields leave everyone.
//!
//! List types: a list is *atomic* (one value, owned and replaced whole) unless
//! - a built-in kind merges it by key or as a set in strategic merge patches (the table of
//!   [`super::strategic`]: containers by `name`, ports by `containerPort`, conditions by
//!   `type`, finalizers as a set, …), or
//! - a custom kind's structural schema says `x-kubernetes-list-type: map` (keyed by
//!   `x-kubernetes-list-map-keys`) or `set`.
//!
//! A granular list whose items lack their keys, or repeat one, is treated as atomic.
//!
//! Server-owned metadata (`name`, `namespace`, `uid`, `resourceVersion`, `creationTimestamp`,
//! `generation`, `managedFields`, deletion fields), `apiVersion` and `kind` are never owned.
//!
//! Where to start: [`apply`], [`track_update`], then [`settle_times`], which gives the writer's
//! entry its time once the registry knows whether the object changed.

use std::collections::HashSet;

use serde_json::{Map, Value, json};

use super::fields::{
    FieldSet, ManagedEntry, Operation, decode_managed, encode_managed, field_element, key_element,
    value_element,
};
use super::strategic::{ListStrategy, list_strategy};
use crate::api::error::ApiError;
use crate::schema::{ListType, Structural};

/// Metadata fields the server owns; they are never in a field set.
const SERVER_METADATA: &[&str] = &[
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
const ATOMIC_OBJECTS: &[(&str, &str)] = &[
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
enum Cursor<'a, 'p> {
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
    fn root(lists: Lists<'a>) -> Cursor<'a, 'p> {
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

    fn field<'q>(&'q self, name: &'q str) -> Cursor<'a, 'q>
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

    fn item(&self) -> Cursor<'a, 'p> {
        match *self {
            Cursor::Builtin { .. } => *self,
            Cursor::Custom { node, .. } => Cursor::Custom {
                node: node.and_then(Structural::items),
                root: false,
            },
        }
    }

    /// The dotted path of a built-in position (`spec.template.spec.containers`).
    fn dotted(&self) -> String {
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
    fn is_at(&self, dotted: &str) -> bool {
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

    fn list_type(&self) -> ListType {
        match self {
            Cursor::Builtin { kind, .. } => match list_strategy(kind, &self.dotted()) {
                Some(ListStrategy::Set) => ListType::Set,
                Some(ListStrategy::MergeByKey(key)) => ListType::Map(vec![key.to_string()]),
                None => ListType::Atomic,
            },
            Cursor::Custom { node, .. } => node.map_or(ListType::Atomic, Structural::list_type),
        }
    }

    fn atomic_object(&self) -> bool {
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
fn item_elements(items: &[Value], lt: &ListType) -> Option<Vec<String>> {
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
fn for_each_root_field<'a>(
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

fn owned_fields(v: &Value, cur: &Cursor<'_, '_>) -> FieldSet {
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
fn all_fields(v: &Value, cur: &Cursor<'_, '_>) -> FieldSet {
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
fn graft(set: &mut FieldSet, path: &[String], node: FieldSet) {
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

/// Merges an apply body into the live value: objects per key, granular lists per item,
/// everything else replaced. A `null` in the body removes the field.
fn merge(live: Option<&Value>, config: &Value, cur: &Cursor<'_, '_>) -> Value {
    match (live, config) {
        (Some(Value::Object(l)), Value::Object(c)) if !cur.atomic_object() => {
            let mut out = l.clone();
            for (k, cv) in c {
                if cv.is_null() {
                    out.remove(k);
                } else {
                    let merged = merge(l.get(k), cv, &cur.field(k));
                    out.insert(k.clone(), merged);
                }
            }
            Value::Object(out)
        }
        (Some(Value::Array(l)), Value::Array(c)) => {
            let lt = cur.list_type();
            match (item_elements(l, &lt), item_elements(c, &lt)) {
                (Some(live_elements), Some(config_elements)) => {
                    let mut out = l.clone();
                    let item_cur = cur.item();
                    for (ci, e) in c.iter().zip(&config_elements) {
                        match live_elements.iter().position(|x| x == e) {
                            Some(i) => out[i] = merge(Some(&l[i]), ci, &item_cur),
                            None => out.push(without_nulls(ci)),
                        }
                    }
                    Value::Array(out)
                }
                _ => without_nulls(config),
            }
        }
        (_, c) => without_nulls(c),
    }
}

/// `v` with every `null` object field removed.
fn without_nulls(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k.clone(), without_nulls(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(without_nulls).collect()),
        other => other.clone(),
    }
}

/// Drops from `config` the fields that decoding dropped from the merged object (fields the
/// kind does not know), so that the applier owns only real fields.
fn retain_known(config: &mut Value, decoded: &Value, cur: &Cursor<'_, '_>) {
    match (config, decoded) {
        (Value::Object(c), Value::Object(d)) => {
            c.retain(|k, v| {
                if v.is_null() {
                    return true;
                }
                match d.get(k) {
                    Some(dv) => {
                        retain_known(v, dv, &cur.field(k));
                        true
                    }
                    None => false,
                }
            });
        }
        (Value::Array(c), Value::Array(d)) => {
            let lt = cur.list_type();
            let item_cur = cur.item();
            match (item_elements(c, &lt), item_elements(d, &lt)) {
                (Some(ce), Some(de)) => {
                    for (ci, e) in c.iter_mut().zip(&ce) {
                        if let Some(j) = de.iter().position(|x| x == e) {
                            retain_known(ci, &d[j], &item_cur);
                        }
                    }
                }
                _ if c.len() == d.len() => {
                    for (ci, di) in c.iter_mut().zip(d) {
                        retain_known(ci, di, &item_cur);
                    }
                }
                _ => {}
            }
        }
        _ => {}
    }
}

/// The index of the item of `list` that path element `element` (`k:…`, `v:…`, `i:…`) names.
fn find_item(list: &[Value], element: &str) -> Option<usize> {
    if let Some(keys) = element.strip_prefix("k:") {
        let keys: Map<String, Value> = serde_json::from_str(keys).ok()?;
        list.iter().position(|item| {
            keys.iter()
                .all(|(k, v)| item.get(k).is_some_and(|iv| iv == v))
        })
    } else if let Some(v) = element.strip_prefix("v:") {
        let v: Value = serde_json::from_str(v).ok()?;
        list.iter().position(|item| *item == v)
    } else {
        element
            .strip_prefix("i:")?
            .parse::<usize>()
            .ok()
            .filter(|i| *i < list.len())
    }
}

/// Removes from `obj` the members of `remove`, except where `owned` has members at or below
/// the same path (then only the unowned members below are removed). Objects and lists left
/// empty by the removal, and owned by nobody, go too.
fn prune(obj: &mut Value, remove: &FieldSet, owned: Option<&FieldSet>) {
    for (element, r) in remove.children() {
        let o = owned.and_then(|o| o.child(element));
        let drop_whole = r.is_member() && o.is_none_or(FieldSet::is_empty);
        let keep_empty = o.is_some_and(FieldSet::is_member);
        match obj {
            Value::Object(m) => {
                let Some(name) = element.strip_prefix("f:") else {
                    continue;
                };
                if drop_whole {
                    m.remove(name);
                } else if let Some(child) = m.get_mut(name)
                    && prune_child(child, r, o, keep_empty)
                {
                    m.remove(name);
                }
            }
            Value::Array(a) => {
                let Some(i) = find_item(a, element) else {
                    continue;
                };
                if drop_whole || prune_child(&mut a[i], r, o, keep_empty) {
                    a.remove(i);
                }
            }
            _ => {}
        }
    }
}

/// Prunes below `child`; says whether `child` was emptied by it and may go.
fn prune_child(child: &mut Value, r: &FieldSet, o: Option<&FieldSet>, keep_empty: bool) -> bool {
    let was_empty = is_empty_container(child);
    prune(child, r, o);
    !keep_empty && !was_empty && is_empty_container(child)
}

fn is_empty_container(v: &Value) -> bool {
    match v {
        Value::Object(m) => m.is_empty(),
        Value::Array(a) => a.is_empty(),
        _ => false,
    }
}

/// What changed between two versions of an object, as Kubernetes' structured comparison
/// reports it: every node of an added or removed value, every changed scalar or atomic value.
#[derive(Debug, Default)]
pub(crate) struct Comparison {
    /// Paths present only in the new object.
    pub(crate) added: FieldSet,
    /// Scalars and atomic values present in both with different values.
    pub(crate) modified: FieldSet,
    /// Paths present only in the old object.
    pub(crate) removed: FieldSet,
}

/// Compares two versions of an object (`None`: there was none), ignoring what nobody owns.
pub(crate) fn compare(old: Option<&Value>, new: &Value, lists: Lists<'_>) -> Comparison {
    let mut out = Comparison::default();
    let mut path = Vec::new();
    for_each_root_field(&[old, Some(new)], lists, |root_path, cur, get| {
        path.clear();
        path.extend_from_slice(root_path);
        diff(old.and_then(get), get(new), cur, &mut path, &mut out);
    });
    out
}

fn diff(
    old: Option<&Value>,
    new: Option<&Value>,
    cur: &Cursor<'_, '_>,
    path: &mut Vec<String>,
    out: &mut Comparison,
) {
    match (old, new) {
        (None, None) => {}
        (Some(o), Some(n)) if o == n => {}
        (Some(o), Some(n)) => {
            match (o, n) {
                (Value::Object(om), Value::Object(nm)) if !cur.atomic_object() => {
                    for (k, ov) in om {
                        // Equal values hold no change: skip them without building paths.
                        if nm.get(k) == Some(ov) {
                            continue;
                        }
                        path.push(field_element(k));
                        diff(Some(ov), nm.get(k), &cur.field(k), path, out);
                        path.pop();
                    }
                    for (k, nv) in nm {
                        if !om.contains_key(k) {
                            path.push(field_element(k));
                            diff(None, Some(nv), &cur.field(k), path, out);
                            path.pop();
                        }
                    }
                    return;
                }
                (Value::Array(oa), Value::Array(na)) => {
                    let lt = cur.list_type();
                    if let (Some(oe), Some(ne)) = (item_elements(oa, &lt), item_elements(na, &lt)) {
                        let item_cur = cur.item();
                        for (oi, e) in oa.iter().zip(&oe) {
                            let ni = ne.iter().position(|x| x == e).map(|j| &na[j]);
                            path.push(e.clone());
                            diff(Some(oi), ni, &item_cur, path, out);
                            path.pop();
                        }
                        for (ni, e) in na.iter().zip(&ne) {
                            if !oe.contains(e) {
                                path.push(e.clone());
                                diff(None, Some(ni), &item_cur, path, out);
                                path.pop();
                            }
                        }
                        return;
                    }
                }
                _ => {}
            }
            if o != n {
                out.modified.insert(path);
            }
        }
        (None, Some(n)) => graft(&mut out.added, path, all_fields(n, cur)),
        (Some(o), None) => graft(&mut out.removed, path, all_fields(o, cur)),
    }
}

/// What an apply needs besides the bodies.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ApplyParams<'a> {
    /// The field manager (required for apply).
    pub(crate) manager: &'a str,
    /// `force=true`: take fields from their owners instead of failing.
    pub(crate) force: bool,
    /// The apiVersion of the endpoint.
    pub(crate) api_version: &'a str,
    /// `status` for applies through `/status`; empty otherwise.
    pub(crate) subresource: &'a str,
    /// The kind's list types.
    pub(crate) lists: Lists<'a>,
}

/// Applies `config` (the manager's intent, already restricted to the addressed part) to
/// `live` (`None`: the object does not exist). `decode` checks and normalises the merged
/// object as the kind's decoder does (it drops unknown fields). Returns the new object with
/// its `metadata.managedFields` (the applier's entry without a time; see [`settle_times`]).
///
/// # Errors
/// 409 Conflict (one cause per field) when the apply changes fields other managers own and
/// `force` is not set; whatever `decode` fails with.
pub(crate) fn apply(
    live: Option<&Value>,
    config: &Value,
    p: &ApplyParams<'_>,
    decode: &mut dyn FnMut(Value) -> Result<Value, ApiError>,
) -> Result<Value, ApiError> {
    let root = Cursor::root(p.lists);
    let mut managers = live.map(decode_managed).unwrap_or_default();
    let live = live.map(without_managed_fields);
    let merged = merge(live.as_ref(), config, &root);
    let mut new = decode(merged)?;
    let mut known = config.clone();
    retain_known(&mut known, &new, &root);
    let set = field_set(&known, p.lists);

    let mine = managers
        .iter()
        .position(|e| e.is(p.manager, Operation::Apply, p.subresource));
    let mut others = FieldSet::new();
    for (i, e) in managers.iter().enumerate() {
        if Some(i) != mine {
            others.union(&e.fields);
        }
    }
    if let Some(i) = mine {
        let stale = managers[i].fields.difference(&set).difference(&others);
        if !stale.is_empty() {
            let mut owned = set.clone();
            owned.union(&others);
            prune(&mut new, &stale, Some(&owned));
        }
    }

    let cmp = compare(live.as_ref(), &new, p.lists);
    let mut touched = cmp.modified;
    touched.union(&cmp.added);
    let taken: Vec<(usize, FieldSet)> = managers
        .iter()
        .enumerate()
        .filter(|(i, _)| Some(*i) != mine)
        .map(|(i, e)| (i, e.fields.intersection(&touched)))
        .filter(|(_, t)| !t.is_empty())
        .collect();
    if !p.force && !taken.is_empty() {
        // kubectl moving an object from client-side to server-side apply may take the fields
        // its last-applied annotation names without forcing, as Kubernetes allows.
        let allowed = (p.manager == KUBECTL)
            .then(|| last_applied_fields(live.as_ref(), p.lists))
            .flatten();
        let mut conflicts = Vec::new();
        for (i, t) in &taken {
            let blocked = match &allowed {
                Some(a) => t.difference(a),
                None => t.clone(),
            };
            let who = managers[*i].describe();
            conflicts.extend(blocked.paths().into_iter().map(|path| (who.clone(), path)));
        }
        if !conflicts.is_empty() {
            return Err(conflict_error(conflicts));
        }
    }
    for (i, t) in &taken {
        managers[*i].fields = managers[*i].fields.difference(t);
    }
    if !cmp.removed.is_empty() {
        for (i, e) in managers.iter_mut().enumerate() {
            if Some(i) != mine {
                e.fields = e.fields.difference(&cmp.removed);
            }
        }
    }
    let entry = ManagedEntry {
        manager: p.manager.to_string(),
        operation: Operation::Apply,
        api_version: p.api_version.to_string(),
        time: None,
        subresource: p.subresource.to_string(),
        fields: set,
    };
    match mine {
        Some(i) => managers[i] = entry,
        None => managers.push(entry),
    }
    put_managed(&mut new, &mut managers);
    Ok(new)
}

/// The bookkeeping of a non-apply write by `manager` from `old` to `new`, starting from the
/// entries `base` (the stored ones, or what the client sent): returns `new`'s managedFields
/// entries (the writer's without a time).
pub(crate) fn track_update(
    mut managers: Vec<ManagedEntry>,
    old: Option<&Value>,
    new: &Value,
    (manager, api_version, subresource): (&str, &str, &str),
    lists: Lists<'_>,
) -> Vec<ManagedEntry> {
    let cmp = compare(old, new, lists);
    let mut touched = cmp.modified;
    touched.union(&cmp.added);
    let mine = managers
        .iter()
        .position(|e| e.is(manager, Operation::Update, subresource));
    for (i, e) in managers.iter_mut().enumerate() {
        if Some(i) != mine && !(touched.is_empty() && cmp.removed.is_empty()) {
            e.fields = e.fields.difference(&touched).difference(&cmp.removed);
        }
    }
    if touched.is_empty() && cmp.removed.is_empty() {
        return managers;
    }
    let mut fields = match mine {
        Some(i) => managers[i].fields.difference(&cmp.removed),
        None => FieldSet::new(),
    };
    fields.union(&touched);
    let entry = ManagedEntry {
        manager: manager.to_string(),
        operation: Operation::Update,
        api_version: api_version.to_string(),
        time: None,
        subresource: subresource.to_string(),
        fields,
    };
    match mine {
        Some(i) => managers[i] = entry,
        None => managers.push(entry),
    }
    managers
}

/// Gives the writer's entry (`manager`, `operation`, `subresource`) its time: the time it had
/// if neither the object nor the writer's fields changed (so a no-op stays a no-op), `now`
/// otherwise. Entries of other managers keep theirs.
pub(crate) fn settle_times(
    entries: &mut [ManagedEntry],
    old: &[ManagedEntry],
    writer: (&str, Operation, &str),
    object_changed: bool,
    now: &str,
) {
    let (manager, operation, subresource) = writer;
    for e in entries.iter_mut() {
        if e.is(manager, operation, subresource) {
            let before = old.iter().find(|o| o.is(manager, operation, subresource));
            e.time = match before {
                Some(b) if !object_changed && b.fields == e.fields => b.time.clone(),
                _ => Some(now.to_string()),
            };
        } else if e.time.is_none() {
            e.time = Some(now.to_string());
        }
    }
}

/// kubectl's manager name for `apply --server-side`.
const KUBECTL: &str = "kubectl";

/// The fields of the object in `live`'s `kubectl.kubernetes.io/last-applied-configuration`
/// annotation (what client-side `kubectl apply` last sent), if there is one.
fn last_applied_fields(live: Option<&Value>, lists: Lists<'_>) -> Option<FieldSet> {
    let text = live?
        .pointer("/metadata/annotations")?
        .get("kubectl.kubernetes.io/last-applied-configuration")?
        .as_str()?;
    let obj: Value = serde_json::from_str(text).ok()?;
    Some(field_set(&obj, lists))
}

/// Stores `entries` as `obj`'s managedFields (removing the field when none owns anything).
pub(crate) fn put_managed(obj: &mut Value, entries: &mut Vec<ManagedEntry>) {
    let encoded = encode_managed(entries);
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        match encoded {
            Some(v) => {
                meta.insert("managedFields".into(), v);
            }
            None => {
                meta.remove("managedFields");
            }
        }
    }
}

/// Whether two objects are equal once their managedFields are left aside.
pub(crate) fn same_ignoring_managed_fields(a: &Value, b: &Value) -> bool {
    fn same_meta(a: Option<&Value>, b: Option<&Value>) -> bool {
        match (a, b) {
            (Some(Value::Object(am)), Some(Value::Object(bm))) => {
                let counted =
                    |m: &Map<String, Value>| m.len() - usize::from(m.contains_key("managedFields"));
                counted(am) == counted(bm)
                    && am
                        .iter()
                        .filter(|(k, _)| *k != "managedFields")
                        .all(|(k, v)| bm.get(k) == Some(v))
            }
            (a, b) => a == b,
        }
    }
    match (a, b) {
        (Value::Object(am), Value::Object(bm)) => {
            am.len() == bm.len()
                && am
                    .iter()
                    .all(|(k, v)| k == "metadata" || bm.get(k) == Some(v))
                && same_meta(am.get("metadata"), bm.get("metadata"))
        }
        _ => a == b,
    }
}

fn without_managed_fields(v: &Value) -> Value {
    let mut v = v.clone();
    if let Some(meta) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("managedFields");
    }
    v
}

/// The 409 of an apply that would change fields other managers own, worded as Kubernetes
/// words it. `conflicts` holds (manager as described, field path) pairs.
fn conflict_error(mut conflicts: Vec<(String, String)>) -> ApiError {
    conflicts.sort_by(|a, b| a.0.cmp(&b.0));
    let causes = conflicts
        .iter()
        .map(|(m, p)| {
            json!({"reason": "FieldManagerConflict", "message": format!("conflict with {m}"), "field": p})
        })
        .collect();
    let message = match conflicts.as_slice() {
        [(m, p)] => format!("Apply failed with 1 conflict: conflict with {m}: {p}"),
        many => {
            let mut lines = Vec::new();
            let mut last: Option<&str> = None;
            for (m, p) in many {
                if last != Some(m.as_str()) {
                    lines.push(format!("conflicts with {m}:"));
                    last = Some(m);
                }
                lines.push(format!("- {p}"));
            }
            format!(
                "Apply failed with {} conflicts: {}",
                many.len(),
                lines.join("\n")
            )
        }
    };
    ApiError::ApplyConflict { message, causes }
}

#[cfg(test)]
mod tests;
