//! The checks for arrays and objects: items, sizes, uniqueness and list types (`set`,
//! `map` by keys); properties, `additionalProperties`, `required`, and the rules of an
//! embedded resource (`apiVersion`, `kind`, ObjectMeta).

use std::collections::HashMap;
use std::collections::hash_map::Entry;

use serde_json::{Map, Value};

use super::{Path, SMALL_LIST, Validator, join_path};
use crate::api::field::FieldError;
use crate::api::validation::{NameRule, check_name, validate_object_meta};
use crate::schema::{Additional, ListType, Structural};

/// The value of key `k` of a list-map item, or the key's default.
fn map_key<'a>(item: &'a Value, k: &str, item_schema: Option<&'a Structural>) -> Option<&'a Value> {
    item.get(k).or_else(|| {
        item_schema
            .and_then(|is| is.declared_property(k))
            .and_then(|p| p.default.as_ref())
    })
}

impl Validator<'_> {
    pub(super) fn array(&mut self, s: &Structural, items: &[Value], path: &Path) {
        if let Some(item_schema) = s.items.as_deref() {
            for (i, item) in items.iter().enumerate() {
                self.node(item_schema, item, &Path::Index(path, i));
            }
        }
        let unique = s.checks.as_deref().is_some_and(|c| c.unique_items);
        if let Some(c) = s.checks.as_deref() {
            let len = items.len() as u64;
            if let Some(min) = c.min_items.filter(|m| len < *m) {
                let name = path.render();
                self.errs.push(FieldError::invalid(
                    self.field(&name),
                    Value::from(len),
                    format!("{name} in body should have at least {min} items"),
                ));
            }
            if let Some(max) = c.max_items.filter(|m| len > *m) {
                let name = path.render();
                self.errs.push(FieldError::too_many(
                    self.field(&name),
                    items.len(),
                    max as usize,
                ));
            }
        }
        match &s.list_type {
            ListType::Set => self.duplicates(items, path),
            ListType::Map(keys) => self.list_map(s, keys, items, path),
            ListType::Atomic if unique => self.duplicates(items, path),
            ListType::Atomic => {}
        }
        if unique && matches!(s.list_type, ListType::Map(_)) {
            self.duplicates(items, path);
        }
    }

    /// One `Duplicate value` per value that appears more than once.
    pub(super) fn duplicates(&mut self, items: &[Value], path: &Path) {
        let mut dups: Vec<&Value> = Vec::new();
        if items.len() <= SMALL_LIST {
            for (i, x) in items.iter().enumerate() {
                if items[..i].contains(x) && !dups.contains(&x) {
                    dups.push(x);
                }
            }
        } else {
            let mut seen: HashMap<String, bool> = HashMap::with_capacity(items.len());
            for x in items {
                match seen.entry(x.to_string()) {
                    Entry::Vacant(e) => {
                        e.insert(false);
                    }
                    Entry::Occupied(mut e) => {
                        if !*e.get() {
                            e.insert(true);
                            dups.push(x);
                        }
                    }
                }
            }
        }
        if dups.is_empty() {
            return;
        }
        let field = self.field(&path.render());
        for d in dups {
            self.errs
                .push(FieldError::duplicate(field.clone(), d.clone()));
        }
    }

    pub(super) fn list_map(
        &mut self,
        s: &Structural,
        keys: &[String],
        items: &[Value],
        path: &Path,
    ) {
        let item_schema = s.items.as_deref();
        for (i, item) in items.iter().enumerate() {
            let at = Path::Index(path, i);
            if !item.is_object() {
                let f = self.field(&at.render());
                self.errs.push(FieldError::invalid(
                    f,
                    item.clone(),
                    "must be an object for an array of list-type map",
                ));
                continue;
            }
            for k in keys {
                if map_key(item, k, item_schema).is_none() {
                    let f = self.field(&Path::Field(&at, k).render());
                    self.errs.push(FieldError::required(f, ""));
                }
            }
        }
        let keyed = |item: &Value| {
            item.is_object() && keys.iter().all(|k| map_key(item, k, item_schema).is_some())
        };
        let same = |a: &Value, b: &Value| {
            keys.iter()
                .all(|k| map_key(a, k, item_schema) == map_key(b, k, item_schema))
        };
        let report = |v: &mut Self, i: usize, item: &Value| {
            let shown: Map<String, Value> = keys
                .iter()
                .map(|k| {
                    (
                        k.clone(),
                        map_key(item, k, item_schema)
                            .cloned()
                            .unwrap_or(Value::Null),
                    )
                })
                .collect();
            let f = v.field(&Path::Index(path, i).render());
            v.errs.push(FieldError::duplicate(f, Value::Object(shown)));
        };
        if items.len() <= SMALL_LIST {
            for (i, item) in items.iter().enumerate() {
                if keyed(item) && items[..i].iter().any(|o| keyed(o) && same(o, item)) {
                    report(self, i, item);
                }
            }
        } else {
            let mut seen: HashMap<String, ()> = HashMap::with_capacity(items.len());
            for (i, item) in items.iter().enumerate() {
                if !keyed(item) {
                    continue;
                }
                let mut id = String::new();
                for k in keys {
                    id.push_str(
                        &map_key(item, k, item_schema)
                            .map(Value::to_string)
                            .unwrap_or_default(),
                    );
                    id.push('\0');
                }
                if seen.insert(id, ()).is_some() {
                    report(self, i, item);
                }
            }
        }
    }

    pub(super) fn object(&mut self, s: &Structural, map: &Map<String, Value>, path: &Path) {
        if let Some(c) = s.checks.as_deref() {
            let n = map.len() as u64;
            if let Some(min) = c.min_properties.filter(|m| n < *m) {
                let name = path.render();
                self.errs.push(FieldError::invalid(
                    self.field(&name),
                    Value::from(n),
                    format!("{name} in body should have at least {min} properties"),
                ));
                return;
            }
            if let Some(max) = c.max_properties.filter(|m| n > *m) {
                let name = path.render();
                self.errs.push(FieldError::too_many(
                    self.field(&name),
                    map.len(),
                    max as usize,
                ));
                return;
            }
        }
        for (k, ps) in &s.properties {
            if let Some(val) = map.get(k) {
                self.node(ps, val, &Path::Field(path, k));
            }
        }
        match &s.additional {
            Additional::Schema(a) => {
                for (k, val) in map {
                    if s.declared_property(k).is_none() {
                        self.node(a, val, &Path::Field(path, k));
                    }
                }
            }
            Additional::Bool(false) => {
                for k in map.keys() {
                    if s.declared_property(k).is_none() {
                        let name = path.render();
                        self.errs.push(FieldError::invalid(
                            self.field(&name),
                            Value::String(k.clone()),
                            format!("{name}.{k} in body is a forbidden property"),
                        ));
                    }
                }
            }
            Additional::Bool(true) | Additional::Unset => {}
        }
        if let Some(c) = s.checks.as_deref() {
            for k in &c.required {
                if !map.contains_key(k) {
                    let f = self.field(&Path::Field(path, k).render());
                    self.errs.push(FieldError::required(f, ""));
                }
            }
        }
        if s.embedded {
            self.embedded_resource(map, path);
        }
    }

    /// `apiVersion` and `kind` are required; `metadata` follows the ObjectMeta rules.
    pub(super) fn embedded_resource(&mut self, map: &Map<String, Value>, path: &Path) {
        // Paths are built only when there is something to report.
        let at = |v: &Self, f: &str| {
            let base = v.field(&path.render());
            let base = if base == "<nil>" { "" } else { base.as_str() };
            join_path(base, f)
        };
        for key in ["apiVersion", "kind"] {
            match map.get(key) {
                None => {
                    let f = at(self, key);
                    self.errs.push(FieldError::required(f, "must not be empty"));
                }
                Some(Value::String(s)) if s.is_empty() => {
                    let f = at(self, key);
                    self.errs.push(FieldError::invalid(
                        f,
                        Value::String(String::new()),
                        "must not be empty",
                    ));
                }
                Some(Value::String(s)) if key == "apiVersion" && s.matches('/').count() > 1 => {
                    let f = at(self, key);
                    self.errs.push(FieldError::invalid(
                        f,
                        Value::String(s.clone()),
                        format!("unexpected GroupVersion string: {s}"),
                    ));
                }
                Some(Value::String(_)) => {}
                Some(other) => {
                    let f = at(self, key);
                    self.errs
                        .push(FieldError::invalid(f, other.clone(), "must be a string"));
                }
            }
        }
        let Some(meta) = map.get("metadata") else {
            return;
        };
        let Some(meta_map) = meta.as_object() else {
            let f = at(self, "metadata");
            self.errs
                .push(FieldError::invalid(f, meta.clone(), "must be an object"));
            return;
        };
        if let Some(name) = meta_map.get("name").and_then(Value::as_str) {
            for why in check_name(NameRule::Subdomain, name) {
                let f = at(self, "metadata.name");
                self.errs
                    .push(FieldError::invalid(f, Value::String(name.to_string()), why));
            }
        }
        let shared = ["labels", "annotations", "finalizers", "ownerReferences"];
        if !shared.iter().any(|k| meta_map.contains_key(*k)) {
            return;
        }
        let wrapped =
            Value::Object(std::iter::once(("metadata".to_string(), meta.clone())).collect());
        let (errs, _warnings) = validate_object_meta(&wrapped);
        for mut e in errs {
            e.field = at(self, &e.field);
            self.errs.push(e);
        }
    }
}
