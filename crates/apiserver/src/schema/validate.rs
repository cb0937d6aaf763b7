//! Validation of a custom object against its structural schema.
//!
//! Follows the order and wording of Kubernetes' OpenAPI validator: at each node the type,
//! then `allOf`/`anyOf`/`oneOf`/`not`, then the checks for the value's JSON kind (string
//! length, pattern and format; number bounds and `multipleOf`; array items, sizes,
//! uniqueness and list types), then `enum`, then object properties (`minProperties` and
//! `maxProperties` failures stop there, as in Kubernetes), `additionalProperties`,
//! `required`, and the embedded-resource rules (`apiVersion`, `kind`, ObjectMeta).
//!
//! Messages name the field as `<path> in body ...` and the cause field is the same path
//! (array items `spec.list[2]`, map values `spec.labels.key`). A type error reports the
//! JSON type that was found (`Invalid value: "string": spec.size in body must be of type
//! integer: "string"`), as Kubernetes does.
//!
//! The walk allocates nothing unless it reports an error: paths are a linked list on the
//! stack, rendered only for a message.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::fmt::Write as _;

use regex::Regex;
use serde_json::{Map, Number, Value};

use super::format::Format;
use super::{Additional, JsonType, ListType, Structural};
use crate::api::field::FieldError;
use crate::api::validation::{NameRule, check_name, validate_object_meta};

/// Lists up to this long are checked for duplicates pairwise (no allocation); longer ones
/// through a hash table.
const SMALL_LIST: usize = 64;

/// A node's value validations, compiled at parse time.
#[derive(Clone, Debug, Default)]
pub(crate) struct Checks {
    pub(crate) enum_values: Option<Vec<Value>>,
    /// The enum values as the `supported values` list shows them (strings bare, others JSON).
    pub(crate) enum_display: Vec<String>,
    pub(crate) minimum: Option<f64>,
    pub(crate) exclusive_minimum: bool,
    pub(crate) maximum: Option<f64>,
    pub(crate) exclusive_maximum: bool,
    pub(crate) multiple_of: Option<f64>,
    pub(crate) min_length: Option<u64>,
    pub(crate) max_length: Option<u64>,
    pub(crate) pattern: Option<Pattern>,
    pub(crate) format: Option<Format>,
    pub(crate) min_items: Option<u64>,
    pub(crate) max_items: Option<u64>,
    pub(crate) unique_items: bool,
    pub(crate) min_properties: Option<u64>,
    pub(crate) max_properties: Option<u64>,
    pub(crate) required: Vec<String>,
    pub(crate) all_of: Vec<Structural>,
    pub(crate) any_of: Vec<Structural>,
    pub(crate) one_of: Vec<Structural>,
    pub(crate) not: Option<Box<Structural>>,
}

/// A compiled `pattern`, with the text shown in messages.
#[derive(Clone, Debug)]
pub(crate) struct Pattern {
    pub(crate) source: String,
    pub(crate) regex: Regex,
}

/// Where a value sits in the object, as a list on the stack.
#[derive(Clone, Copy)]
pub(crate) enum Path<'a> {
    Root,
    Field(&'a Path<'a>, &'a str),
    Index(&'a Path<'a>, usize),
}

impl Path<'_> {
    /// `spec.list[2].name`; empty at the root.
    pub(crate) fn render(&self) -> String {
        let mut out = String::new();
        self.write(&mut out);
        out
    }

    fn write(&self, out: &mut String) {
        match self {
            Path::Root => {}
            Path::Field(parent, name) => {
                parent.write(out);
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(name);
            }
            Path::Index(parent, i) => {
                parent.write(out);
                let _ = write!(out, "[{i}]");
            }
        }
    }
}

/// Joins an error path prefix and a path relative to it.
pub(crate) fn join_path(base: &str, rel: &str) -> String {
    match (base.is_empty(), rel.is_empty()) {
        (true, _) => rel.to_string(),
        (false, true) => base.to_string(),
        (false, false) if rel.starts_with('[') => format!("{base}{rel}"),
        (false, false) => format!("{base}.{rel}"),
    }
}

/// Checks `value` against `schema`, with error paths under `base` (empty for an object;
/// e.g. `spec.versions[0].schema.openAPIV3Schema.properties[spec].default` for a default).
/// Messages name fields relative to `value`, as Kubernetes does.
pub fn validate_with_base(schema: &Structural, value: &Value, base: &str) -> Vec<FieldError> {
    let mut v = Validator {
        base,
        errs: Vec::new(),
    };
    v.node(schema, value, &Path::Root);
    v.errs
}

struct Validator<'b> {
    base: &'b str,
    errs: Vec<FieldError>,
}

/// A JSON number as Kubernetes decodes it: integers stay integers.
#[derive(Clone, Copy)]
enum Num {
    Int(i64),
    Float(f64),
}

fn num(n: &Number) -> Num {
    match n.as_i64() {
        Some(i) => Num::Int(i),
        None => Num::Float(n.as_f64().unwrap_or(f64::NAN)),
    }
}

/// Whether a float holds an integer JSON can carry exactly.
fn is_json_integer(f: f64) -> bool {
    const MAX: f64 = 9_007_199_254_740_992.0; // 2^53
    f.is_finite() && f.abs() <= MAX && (f - f.round()).abs() < 1e-9
}

/// The JSON type name of a value, as Kubernetes' type messages name it.
fn type_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_f64() => "number",
        Value::Number(_) => "integer",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn type_matches(t: JsonType, v: &Value) -> bool {
    match (t, v) {
        (JsonType::Integer, Value::Number(n)) => match num(n) {
            Num::Int(_) => true,
            Num::Float(f) => n.is_u64() || is_json_integer(f),
        },
        (JsonType::Number, Value::Number(_)) => true,
        (JsonType::String, Value::String(_)) => true,
        (JsonType::Boolean, Value::Bool(_)) => true,
        (JsonType::Array, Value::Array(_)) => true,
        (JsonType::Object, Value::Object(_)) => true,
        _ => false,
    }
}

/// A value as Kubernetes shows it in a message: a float with an integral value prints
/// without a fraction (`10`, not `10.0`), as Go prints a float64.
fn shown(v: &Value) -> Value {
    match v {
        Value::Number(n) if n.is_f64() => match n.as_f64() {
            Some(f) if f.fract() == 0.0 && f.abs() < 9.0e15 => Value::from(f as i64),
            _ => v.clone(),
        },
        _ => v.clone(),
    }
}

/// A bound as Go's `%v` prints a float64: shortest digits, exponent form outside
/// [1e-4, 1e6) (`1e+06`).
pub(crate) fn go_float(f: f64) -> String {
    if f == 0.0 || !f.is_finite() {
        return format!("{f}");
    }
    let exp = f.abs().log10().floor() as i32;
    if (-4..6).contains(&exp) {
        return format!("{f}");
    }
    let s = format!("{f:e}"); // e.g. 1.5e6, 1e-5
    let (mantissa, e) = s.split_once('e').unwrap_or((&s, "0"));
    let e: i32 = e.parse().unwrap_or(0);
    let sign = if e < 0 { '-' } else { '+' };
    format!("{mantissa}e{sign}{:02}", e.abs())
}

impl Validator<'_> {
    /// The cause field for a node path.
    fn field(&self, rel: &str) -> String {
        let f = join_path(self.base, rel);
        if f.is_empty() { "<nil>".to_string() } else { f }
    }

    fn node(&mut self, s: &Structural, v: &Value, path: &Path) {
        if v.is_null() {
            if !s.nullable && (s.ty.is_some() || s.int_or_string) {
                self.type_error(s, path, "null");
            }
            if let Some(c) = s.checks.as_deref() {
                self.check_enum(c, v, path);
            }
            return;
        }
        self.check_type(s, v, path);
        if let Some(c) = s.checks.as_deref() {
            self.combinators(c, v, path);
            match v {
                Value::String(st) => self.string_checks(s, c, st, v, path),
                Value::Number(n) => self.number_checks(c, n, v, path),
                _ => {}
            }
        }
        if let Value::Array(items) = v {
            self.array(s, items, path);
        }
        if let Some(c) = s.checks.as_deref() {
            self.check_enum(c, v, path);
        }
        if let Value::Object(map) = v {
            self.object(s, map, path);
        }
    }

    fn type_error(&mut self, s: &Structural, path: &Path, found: &str) {
        let expected = if s.int_or_string {
            "integer,string"
        } else {
            s.ty.map_or("", JsonType::name)
        };
        self.type_error_named(path, expected, found);
    }

    fn type_error_named(&mut self, path: &Path, expected: &str, found: &str) {
        let name = path.render();
        self.errs.push(FieldError::type_invalid(
            self.field(&name),
            Value::String(found.to_string()),
            format!("{name} in body must be of type {expected}: {found:?}"),
        ));
    }

    fn check_type(&mut self, s: &Structural, v: &Value, path: &Path) {
        let ok = if s.int_or_string {
            type_matches(JsonType::Integer, v) || type_matches(JsonType::String, v)
        } else if let Some(t) = s.ty {
            type_matches(t, v)
        } else {
            return;
        };
        let numeric = s.int_or_string || matches!(s.ty, Some(JsonType::Integer | JsonType::Number));
        if let Some(format) = s.format.as_deref().filter(|f| !f.is_empty()) {
            let string_or_array = matches!(v, Value::String(_) | Value::Array(_));
            if !string_or_array {
                let data_format = match v {
                    Value::Number(n) if n.is_f64() => "float64",
                    Value::Number(_) => "int64",
                    _ => "",
                };
                if !ok && data_format != format {
                    self.type_error_named(path, format, data_format);
                    return;
                }
            } else if !numeric {
                // Kubernetes skips the type check of a formatted string-or-array value.
                return;
            }
        }
        if !ok {
            self.type_error(s, path, type_of(v));
        }
    }

    fn combinators(&mut self, c: &Checks, v: &Value, path: &Path) {
        if c.all_of.is_empty() && c.any_of.is_empty() && c.one_of.is_empty() && c.not.is_none() {
            return;
        }
        let name = path.render();
        let run = |s: &Structural| {
            let mut sub = Validator {
                base: self.base,
                errs: Vec::new(),
            };
            sub.node(s, v, path);
            sub.errs
        };
        if !c.all_of.is_empty() {
            let results: Vec<Vec<FieldError>> = c.all_of.iter().map(run).collect();
            let valid = results.iter().filter(|r| r.is_empty()).count();
            if valid != results.len() {
                let more = if valid == 0 { ". None validated" } else { "" };
                self.combinator_error(format!(
                    "{name:?} must validate all the schemas (allOf){more}"
                ));
            }
            self.errs.extend(results.into_iter().flatten());
        }
        if !c.any_of.is_empty() {
            let mut best: Option<Vec<FieldError>> = None;
            let mut valid = false;
            for s in &c.any_of {
                let r = run(s);
                if r.is_empty() {
                    valid = true;
                    break;
                }
                if best.as_ref().is_none_or(|b| r.len() < b.len()) {
                    best = Some(r);
                }
            }
            if !valid {
                self.combinator_error(format!(
                    "{name:?} must validate at least one schema (anyOf)"
                ));
                self.errs.extend(best.unwrap_or_default());
            }
        }
        if !c.one_of.is_empty() {
            let mut best: Option<Vec<FieldError>> = None;
            let mut valid = 0;
            for s in &c.one_of {
                let r = run(s);
                if r.is_empty() {
                    valid += 1;
                } else if valid == 0 && best.as_ref().is_none_or(|b| r.len() < b.len()) {
                    best = Some(r);
                }
            }
            if valid != 1 {
                let more = if valid == 0 {
                    "Found none valid".to_string()
                } else {
                    format!("Found {valid} valid alternatives")
                };
                self.combinator_error(format!(
                    "{name:?} must validate one and only one schema (oneOf). {more}"
                ));
                if valid == 0 {
                    self.errs.extend(best.unwrap_or_default());
                }
            }
        }
        if let Some(not) = &c.not
            && run(not).is_empty()
        {
            self.combinator_error(format!("{name:?} must not validate the schema (not)"));
        }
    }

    /// Combinator failures are reported on the object, not the field, with an empty value.
    fn combinator_error(&mut self, message: String) {
        let field = self.field("");
        self.errs.push(FieldError::invalid(
            field,
            Value::String(String::new()),
            message,
        ));
    }

    fn string_checks(&mut self, s: &Structural, c: &Checks, st: &str, v: &Value, path: &Path) {
        if c.min_length.is_some() || c.max_length.is_some() {
            // Lengths are in characters; a string no longer in bytes needs no count.
            let len = st.len() as u64;
            let chars = || st.chars().count() as u64;
            if let Some(min) = c.min_length
                && (len < min || chars() < min)
            {
                let name = path.render();
                self.errs.push(FieldError::invalid(
                    self.field(&name),
                    v.clone(),
                    format!("{name} in body should be at least {min} chars long"),
                ));
            }
            if let Some(max) = c.max_length
                && len > max
                && chars() > max
            {
                let name = path.render();
                let mut e = FieldError::too_long(self.field(&name), max as usize);
                if max == 1 {
                    "may not be more than 1 byte".clone_into(&mut e.detail);
                }
                self.errs.push(e);
            }
        }
        if let Some(p) = &c.pattern
            && !p.regex.is_match(st)
        {
            let name = path.render();
            self.errs.push(FieldError::invalid(
                self.field(&name),
                v.clone(),
                format!("{name} in body should match '{}'", p.source),
            ));
        }
        if let Some(f) = c.format
            && !f.is_valid(st)
        {
            let name = path.render();
            let fmt_name = s.format.as_deref().unwrap_or_default();
            self.errs.push(FieldError::type_invalid(
                self.field(&name),
                v.clone(),
                format!("{name} in body must be of type {fmt_name}: {st:?}"),
            ));
        }
    }

    fn number_checks(&mut self, c: &Checks, n: &Number, v: &Value, path: &Path) {
        let value = num(n);
        if let Some(m) = c.multiple_of {
            let bad = match value {
                Num::Int(i) if m.fract() == 0.0 && m >= 1.0 => {
                    let factor = m as i64;
                    (i % factor != 0).then(|| factor.to_string())
                }
                Num::Int(i) => not_multiple(i as f64, m),
                Num::Float(f) => not_multiple(f, m),
            };
            if let Some(factor) = bad {
                let name = path.render();
                self.errs.push(FieldError::invalid(
                    self.field(&name),
                    shown(v),
                    format!("{name} in body should be a multiple of {factor}"),
                ));
            }
        }
        if let Some(max) = c.maximum
            && let Some(bound) = out_of_bound(value, max, c.exclusive_maximum, false)
        {
            let op = if c.exclusive_maximum {
                "less than"
            } else {
                "less than or equal to"
            };
            let name = path.render();
            self.errs.push(FieldError::invalid(
                self.field(&name),
                shown(v),
                format!("{name} in body should be {op} {bound}"),
            ));
        }
        if let Some(min) = c.minimum
            && let Some(bound) = out_of_bound(value, min, c.exclusive_minimum, true)
        {
            let op = if c.exclusive_minimum {
                "greater than"
            } else {
                "greater than or equal to"
            };
            let name = path.render();
            self.errs.push(FieldError::invalid(
                self.field(&name),
                shown(v),
                format!("{name} in body should be {op} {bound}"),
            ));
        }
    }

    fn array(&mut self, s: &Structural, items: &[Value], path: &Path) {
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
    fn duplicates(&mut self, items: &[Value], path: &Path) {
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

    fn list_map(&mut self, s: &Structural, keys: &[String], items: &[Value], path: &Path) {
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

    fn check_enum(&mut self, c: &Checks, v: &Value, path: &Path) {
        let Some(values) = &c.enum_values else {
            return;
        };
        let found = values.iter().any(|e| match (e, v) {
            (Value::Number(a), Value::Number(b)) => a.as_f64() == b.as_f64(),
            _ => e == v,
        });
        if !found {
            let allowed: Vec<&str> = c.enum_display.iter().map(String::as_str).collect();
            let name = path.render();
            self.errs.push(FieldError::not_supported(
                self.field(&name),
                shown(v),
                &allowed,
            ));
        }
    }

    fn object(&mut self, s: &Structural, map: &Map<String, Value>, path: &Path) {
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
    fn embedded_resource(&mut self, map: &Map<String, Value>, path: &Path) {
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

/// The value of key `k` of a list-map item, or the key's default.
fn map_key<'a>(item: &'a Value, k: &str, item_schema: Option<&'a Structural>) -> Option<&'a Value> {
    item.get(k).or_else(|| {
        item_schema
            .and_then(|is| is.declared_property(k))
            .and_then(|p| p.default.as_ref())
    })
}

/// The bound, as the message prints it, when `value` is outside it.
fn out_of_bound(value: Num, bound: f64, exclusive: bool, lower: bool) -> Option<String> {
    match value {
        Num::Int(i) => {
            // Kubernetes compares integers with the bound truncated to an integer.
            let b = bound as i64;
            let bad = match (lower, exclusive) {
                (true, false) => i < b,
                (true, true) => i <= b,
                (false, false) => i > b,
                (false, true) => i >= b,
            };
            bad.then(|| b.to_string())
        }
        Num::Float(f) => {
            let bad = match (lower, exclusive) {
                (true, false) => f < bound,
                (true, true) => f <= bound,
                (false, false) => f > bound,
                (false, true) => f >= bound,
            };
            bad.then(|| go_float(bound))
        }
    }
}

fn not_multiple(f: f64, m: f64) -> Option<String> {
    let mult = if m < 1.0 { 1.0 / m * f } else { f / m };
    (!is_json_integer(mult)).then(|| go_float(m))
}

#[cfg(test)]
mod tests;
