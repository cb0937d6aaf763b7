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
//!
//! This file holds the entry point, the compiled checks, the walk and the type and
//! `allOf`/`anyOf`/`oneOf`/`not` checks; `scalars` checks strings and numbers, `collections`
//! arrays, objects and embedded resources.

mod collections;
mod scalars;

use std::fmt::Write as _;

use regex::Regex;
use serde_json::{Number, Value};

use super::format::Format;
use super::{JsonType, Structural};
use crate::api::field::FieldError;

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
}

#[cfg(test)]
mod tests;
