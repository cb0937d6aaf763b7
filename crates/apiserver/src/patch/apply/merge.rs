//! The value side of apply: merging an intent into the live object, pruning the fields a
//! manager gave up, and comparing two versions field by field (what changed, added, removed).

use serde_json::{Map, Value};

use super::field_sets::{Cursor, Lists, all_fields, for_each_root_field, graft, item_elements};
use crate::patch::fields::{FieldSet, field_element};

/// Merges an apply body into the live value: objects per key, granular lists per item,
/// everything else replaced. A `null` in the body removes the field.
pub(super) fn merge(live: Option<&Value>, config: &Value, cur: &Cursor<'_, '_>) -> Value {
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
pub(super) fn without_nulls(v: &Value) -> Value {
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
pub(super) fn retain_known(config: &mut Value, decoded: &Value, cur: &Cursor<'_, '_>) {
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
pub(super) fn find_item(list: &[Value], element: &str) -> Option<usize> {
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
pub(super) fn prune(obj: &mut Value, remove: &FieldSet, owned: Option<&FieldSet>) {
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
pub(super) fn prune_child(
    child: &mut Value,
    r: &FieldSet,
    o: Option<&FieldSet>,
    keep_empty: bool,
) -> bool {
    let was_empty = is_empty_container(child);
    prune(child, r, o);
    !keep_empty && !was_empty && is_empty_container(child)
}

pub(super) fn is_empty_container(v: &Value) -> bool {
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

pub(super) fn diff(
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
