//! Parsing an `openAPIV3Schema` into a [`Structural`] tree, and the structural rules.
//!
//! A schema is structural when (Kubernetes' rules, with their messages):
//! - every node has a `type`, except with `x-kubernetes-int-or-string: true`,
//!   `x-kubernetes-embedded-resource: true`, or (below the root)
//!   `x-kubernetes-preserve-unknown-fields: true`; the root is `type: object`;
//! - arrays have `items`; `properties` and `additionalProperties` are not combined;
//! - inside `allOf`/`anyOf`/`oneOf`/`not` there is no `type`, `default`,
//!   `additionalProperties`, `nullable`, `description`, `title` or `x-kubernetes-*`, and
//!   every property or `items` they name is also specified outside them;
//! - the root `metadata` may only constrain `name` and `generateName`; `kind` and
//!   `apiVersion` at the root or in an embedded resource are strings;
//! - `x-kubernetes-embedded-resource` needs `type: object` and `properties` or
//!   `x-kubernetes-preserve-unknown-fields`; `x-kubernetes-int-or-string` excludes `type`,
//!   `x-kubernetes-preserve-unknown-fields` and `x-kubernetes-embedded-resource`;
//! - list types are `atomic`, `set` or `map` (with key properties that are scalars);
//! - a `default` is already pruned and validates against its node.
//!
//! Parsing compiles everything the per-object algorithms need: sorted property tables,
//! regexes (ECMA-262 classes `\d`, `\w`, `\s` narrowed to ASCII as in Go), enum lists.

use regex::Regex;
use serde_json::{Map, Value};

use super::cel;
use super::format::Format;
use super::validate::{Checks, Pattern, validate_with_base};
use super::{Additional, JsonType, ListType, Structural, prune};
use crate::api::field::FieldError;

/// Where a node sits, for the rules that depend on it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Level {
    Root,
    Field,
    Item,
}

/// Parses and checks `schema`; errors are under `base`.
pub(crate) fn parse(schema: &Value, base: &str) -> Result<Structural, Vec<FieldError>> {
    let mut p = Parser {
        errs: Vec::new(),
        atomic_lists: Vec::new(),
    };
    let s = p.node(schema, base, Level::Root, false, false);
    if p.errs.is_empty() {
        Ok(s)
    } else {
        Err(p.errs)
    }
}

struct Parser {
    errs: Vec<FieldError>,
    /// Schema paths of the atomic lists the current node sits in (innermost last): the old
    /// value of an item there cannot be found, so transition rules are refused.
    atomic_lists: Vec<String>,
}

/// Keywords that may not appear inside `allOf`/`anyOf`/`oneOf`/`not`, with the message.
const NESTED_FORBIDDEN: [(&str, &str); 11] = [
    ("type", "must be empty to be structural"),
    ("additionalProperties", "must be undefined to be structural"),
    ("default", "must be undefined to be structural"),
    ("title", "must be empty to be structural"),
    ("description", "must be empty to be structural"),
    ("nullable", "must be false to be structural"),
    (
        "x-kubernetes-preserve-unknown-fields",
        "must be undefined to be structural",
    ),
    (
        "x-kubernetes-embedded-resource",
        "must be false to be structural",
    ),
    (
        "x-kubernetes-int-or-string",
        "must be false to be structural",
    ),
    (
        "x-kubernetes-list-map-keys",
        "must be empty to be structural",
    ),
    (
        "x-kubernetes-list-type",
        "must be undefined to be structural",
    ),
];

const UNSUPPORTED: [&str; 5] = [
    "$ref",
    "definitions",
    "dependencies",
    "patternProperties",
    "additionalItems",
];

/// `anyOf: [{type: integer}, {type: string}]`, the one place a nested `type` is allowed.
fn is_int_or_string_any_of(v: Option<&Value>) -> bool {
    v.and_then(Value::as_array).is_some_and(|a| {
        a.len() == 2
            && a[0] == serde_json::json!({"type": "integer"})
            && a[1] == serde_json::json!({"type": "string"})
    })
}

/// Rewrites the ECMA-262 classes `\d`, `\w`, `\s` (and negations) to their ASCII sets,
/// which is what Go's (and so Kubernetes') regexes mean by them.
fn translate_pattern(p: &str) -> String {
    let mut out = String::with_capacity(p.len());
    let mut chars = p.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('d') => out.push_str("[0-9]"),
            Some('D') => out.push_str("[^0-9]"),
            Some('w') => out.push_str("[0-9A-Za-z_]"),
            Some('W') => out.push_str("[^0-9A-Za-z_]"),
            Some('s') => out.push_str("[\\t\\n\\f\\r ]"),
            Some('S') => out.push_str("[^\\t\\n\\f\\r ]"),
            Some(other) => {
                out.push('\\');
                out.push(other);
            }
            None => out.push('\\'),
        }
    }
    out
}

impl Parser {
    fn node(
        &mut self,
        v: &Value,
        path: &str,
        lvl: Level,
        nested: bool,
        allow_type: bool,
    ) -> Structural {
        let mut s = Structural::default();
        let Some(obj) = v.as_object() else {
            self.errs
                .push(FieldError::invalid(path, v.clone(), "must be an object"));
            return s;
        };
        let mut c = Checks::default();
        let mut list_type: Option<&str> = None;
        let mut map_keys: Vec<String> = Vec::new();
        let mut rules: Option<&Value> = None;
        let atomic_list = !nested
            && matches!(
                obj.get("x-kubernetes-list-type").and_then(Value::as_str),
                None | Some("atomic")
            );
        let int_or_string_any_of = obj
            .get("x-kubernetes-int-or-string")
            .and_then(Value::as_bool)
            .unwrap_or(false)
            && is_int_or_string_any_of(obj.get("anyOf"));
        for (k, val) in obj {
            let at = format!("{path}.{k}");
            match k.as_str() {
                "type" => match val.as_str().map(|t| (t, JsonType::parse(t))) {
                    Some((_, Some(t))) => s.ty = Some(t),
                    Some(("", None)) => {}
                    _ => self.errs.push(FieldError::not_supported(
                        at,
                        val.clone(),
                        &["array", "boolean", "integer", "number", "object", "string"],
                    )),
                },
                "format" => match val.as_str() {
                    Some(f) => {
                        s.format = Some(f.to_string()).filter(|f| !f.is_empty());
                        c.format = Format::parse(f);
                    }
                    None => {
                        self.errs
                            .push(FieldError::invalid(at, val.clone(), "must be a string"))
                    }
                },
                "nullable" => s.nullable = self.bool(val, &at),
                "default" => s.default = Some(val.clone()),
                "properties" => {
                    let Some(props) = val.as_object() else {
                        self.errs
                            .push(FieldError::invalid(at, val.clone(), "must be an object"));
                        continue;
                    };
                    for (name, ps) in props {
                        let child = self.node(
                            ps,
                            &format!("{path}.properties[{name}]"),
                            Level::Field,
                            nested,
                            false,
                        );
                        s.properties.push((name.clone(), child));
                    }
                }
                "additionalProperties" => match val {
                    Value::Bool(b) => s.additional = Additional::Bool(*b),
                    Value::Object(_) => {
                        let child = self.node(val, &at, Level::Field, nested, false);
                        s.additional = Additional::Schema(Box::new(child));
                    }
                    _ => self.errs.push(FieldError::invalid(
                        at,
                        val.clone(),
                        "must be a schema or a boolean",
                    )),
                },
                "items" => match val {
                    Value::Object(_) => {
                        if atomic_list {
                            self.atomic_lists.push(path.to_string());
                        }
                        s.items = Some(Box::new(self.node(val, &at, Level::Item, nested, false)));
                        if atomic_list {
                            self.atomic_lists.pop();
                        }
                    }
                    _ => self.errs.push(FieldError::forbidden(
                        at,
                        "items must be a schema object and not an array",
                    )),
                },
                "required" => match val.as_array() {
                    Some(names) if names.iter().all(Value::is_string) => {
                        c.required = names
                            .iter()
                            .filter_map(Value::as_str)
                            .map(String::from)
                            .collect();
                    }
                    _ => self.errs.push(FieldError::invalid(
                        at,
                        val.clone(),
                        "must be a list of strings",
                    )),
                },
                "enum" => match val.as_array() {
                    Some(values) => {
                        c.enum_display = values
                            .iter()
                            .map(|e| match e {
                                Value::String(s) => s.clone(),
                                other => other.to_string(),
                            })
                            .collect();
                        c.enum_values = Some(values.clone());
                    }
                    None => self
                        .errs
                        .push(FieldError::invalid(at, val.clone(), "must be a list")),
                },
                "minimum" => c.minimum = self.number(val, &at),
                "maximum" => c.maximum = self.number(val, &at),
                "multipleOf" => {
                    c.multiple_of = self.number(val, &at);
                    if c.multiple_of.is_some_and(|m| m <= 0.0) {
                        self.errs.push(FieldError::invalid(
                            at,
                            val.clone(),
                            "must be greater than zero",
                        ));
                    }
                }
                "exclusiveMinimum" => c.exclusive_minimum = self.bool(val, &at),
                "exclusiveMaximum" => c.exclusive_maximum = self.bool(val, &at),
                "minLength" => c.min_length = self.count(val, &at),
                "maxLength" => c.max_length = self.count(val, &at),
                "minItems" => c.min_items = self.count(val, &at),
                "maxItems" => c.max_items = self.count(val, &at),
                "minProperties" => c.min_properties = self.count(val, &at),
                "maxProperties" => c.max_properties = self.count(val, &at),
                "uniqueItems" => c.unique_items = self.bool(val, &at),
                "pattern" => match val.as_str() {
                    Some(p) => match Regex::new(&translate_pattern(p)) {
                        Ok(regex) => {
                            c.pattern = Some(Pattern {
                                source: p.to_string(),
                                regex,
                            })
                        }
                        Err(e) => self.errs.push(FieldError::invalid(
                            at,
                            val.clone(),
                            format!("must be a valid regular expression, but isn't: {e}"),
                        )),
                    },
                    None => {
                        self.errs
                            .push(FieldError::invalid(at, val.clone(), "must be a string"))
                    }
                },
                "allOf" | "anyOf" | "oneOf" => {
                    let Some(list) = val.as_array() else {
                        self.errs
                            .push(FieldError::invalid(at, val.clone(), "must be a list"));
                        continue;
                    };
                    let allow = k == "anyOf" && int_or_string_any_of;
                    let parsed: Vec<Structural> = list
                        .iter()
                        .enumerate()
                        .map(|(i, n)| {
                            let allow_here = allow
                                || (k == "allOf"
                                    && i == 0
                                    && obj.get("x-kubernetes-int-or-string")
                                        == Some(&Value::Bool(true))
                                    && n.as_object().is_some_and(|o| o.len() == 1)
                                    && is_int_or_string_any_of(n.get("anyOf")));
                            self.nested(n, &format!("{at}[{i}]"), lvl, allow_here)
                        })
                        .collect();
                    match k.as_str() {
                        "allOf" => c.all_of = parsed,
                        "anyOf" => c.any_of = parsed,
                        _ => c.one_of = parsed,
                    }
                }
                "not" => c.not = Some(Box::new(self.nested(val, &at, lvl, false))),
                "x-kubernetes-preserve-unknown-fields" => {
                    s.preserve_unknown = self.bool(val, &at);
                    if val == &Value::Bool(false) && !nested {
                        self.errs.push(FieldError::invalid(
                            at,
                            val.clone(),
                            "must be true or undefined",
                        ));
                    }
                }
                "x-kubernetes-embedded-resource" => s.embedded = self.bool(val, &at),
                "x-kubernetes-int-or-string" => s.int_or_string = self.bool(val, &at),
                "x-kubernetes-list-type" => match val.as_str() {
                    Some(t) => list_type = Some(t),
                    None => {
                        self.errs
                            .push(FieldError::invalid(at, val.clone(), "must be a string"))
                    }
                },
                "x-kubernetes-list-map-keys" => match val.as_array() {
                    Some(keys) if keys.iter().all(Value::is_string) => {
                        map_keys = keys
                            .iter()
                            .filter_map(Value::as_str)
                            .map(String::from)
                            .collect();
                    }
                    _ => self.errs.push(FieldError::invalid(
                        at,
                        val.clone(),
                        "must be a list of strings",
                    )),
                },
                "x-kubernetes-map-type" => match val.as_str() {
                    Some("atomic") => s.map_atomic = true,
                    Some("granular") => {}
                    _ => self.errs.push(FieldError::not_supported(
                        at,
                        val.clone(),
                        &["granular", "atomic"],
                    )),
                },
                key if UNSUPPORTED.contains(&key) => {
                    self.errs
                        .push(FieldError::forbidden(at, format!("{key} is not supported")));
                }
                "x-kubernetes-validations" => rules = Some(val),
                // Documentation and examples need no parsing.
                _ => {}
            }
        }
        s.properties.sort_by(|a, b| a.0.cmp(&b.0));
        let defaulted = |n: &Structural| n.default.is_some() || n.subtree_defaults;
        s.subtree_defaults = s.properties.iter().any(|(_, p)| defaulted(p))
            || s.items.as_deref().is_some_and(defaulted)
            || matches!(&s.additional, Additional::Schema(a) if defaulted(a));
        s.list_type = match list_type {
            Some("set") => ListType::Set,
            Some("map") => ListType::Map(map_keys.clone()),
            _ => ListType::Atomic,
        };
        let has_checks = c.enum_values.is_some()
            || c.minimum.is_some()
            || c.maximum.is_some()
            || c.multiple_of.is_some()
            || c.min_length.is_some()
            || c.max_length.is_some()
            || c.pattern.is_some()
            || c.format.is_some()
            || c.min_items.is_some()
            || c.max_items.is_some()
            || c.unique_items
            || c.min_properties.is_some()
            || c.max_properties.is_some()
            || !c.required.is_empty()
            || !c.all_of.is_empty()
            || !c.any_of.is_empty()
            || !c.one_of.is_empty()
            || c.not.is_some();
        if has_checks {
            s.checks = Some(Box::new(c));
        }
        let ruled = |n: &Structural| n.rules.is_some() || n.subtree_rules;
        s.subtree_rules = s.properties.iter().any(|(_, p)| ruled(p))
            || s.items.as_deref().is_some_and(ruled)
            || matches!(&s.additional, Additional::Schema(a) if ruled(a));
        if let Some(raw) = rules.filter(|_| !nested) {
            let place = cel::Place {
                root: lvl == Level::Root,
                uncorrelatable: self.atomic_lists.last().map(String::as_str),
            };
            let compiled = cel::compile(raw, &s, path, place, &mut self.errs);
            if !compiled.is_empty() {
                s.rules = Some(compiled.into());
            }
        }

        if nested {
            self.nested_rules(obj, path, lvl, allow_type);
        } else {
            self.structural_rules(&s, obj, path, lvl);
            self.list_type_rules(&s, list_type, &map_keys, path);
            self.completeness(&s, path);
            self.default_rules(&s, path);
        }
        s
    }

    fn nested(&mut self, v: &Value, path: &str, lvl: Level, allow_type: bool) -> Structural {
        self.node(v, path, lvl, true, allow_type)
    }

    fn bool(&mut self, v: &Value, at: &str) -> bool {
        v.as_bool().unwrap_or_else(|| {
            self.errs
                .push(FieldError::invalid(at, v.clone(), "must be a boolean"));
            false
        })
    }

    fn number(&mut self, v: &Value, at: &str) -> Option<f64> {
        let n = v.as_f64();
        if n.is_none() {
            self.errs
                .push(FieldError::invalid(at, v.clone(), "must be a number"));
        }
        n
    }

    fn count(&mut self, v: &Value, at: &str) -> Option<u64> {
        let n = v.as_u64();
        if n.is_none() {
            self.errs.push(FieldError::invalid(
                at,
                v.clone(),
                "must be a non-negative integer",
            ));
        }
        n
    }

    fn nested_rules(&mut self, obj: &Map<String, Value>, path: &str, lvl: Level, allow_type: bool) {
        for (key, why) in NESTED_FORBIDDEN {
            let Some(v) = obj.get(key) else { continue };
            let set = match key {
                "nullable" | "x-kubernetes-embedded-resource" | "x-kubernetes-int-or-string" => {
                    v == &Value::Bool(true)
                }
                "type" => !allow_type && v != &Value::String(String::new()),
                _ => true,
            };
            if set {
                self.errs
                    .push(FieldError::forbidden(format!("{path}.{key}"), why));
            }
        }
        if obj.get("x-kubernetes-validations").is_some() {
            self.errs.push(FieldError::forbidden(
                format!("{path}.x-kubernetes-validations"),
                "must be empty to be structural",
            ));
        }
        if obj.get("x-kubernetes-map-type").is_some() {
            self.errs.push(FieldError::forbidden(
                format!("{path}.x-kubernetes-map-type"),
                "must be undefined to be structural",
            ));
        }
        if lvl == Level::Root
            && obj
                .get("properties")
                .and_then(|p| p.get("metadata"))
                .is_some()
        {
            self.errs.push(FieldError::forbidden(
                format!("{path}.properties[metadata]"),
                "must not be specified in a nested context",
            ));
        }
    }

    fn structural_rules(
        &mut self,
        s: &Structural,
        obj: &Map<String, Value>,
        path: &str,
        lvl: Level,
    ) {
        let type_at = format!("{path}.type");
        let type_value = || obj.get("type").cloned().unwrap_or(Value::Null);
        if s.embedded && s.ty != Some(JsonType::Object) {
            if s.ty.is_none() {
                self.errs.push(FieldError::required(
                    type_at.clone(),
                    "must be object if x-kubernetes-embedded-resource is true",
                ));
            } else {
                self.errs.push(FieldError::invalid(
                    type_at.clone(),
                    type_value(),
                    "must be object if x-kubernetes-embedded-resource is true",
                ));
            }
        } else if s.ty.is_none() && !s.embedded && !s.int_or_string {
            let why = match lvl {
                Level::Root => Some("must not be empty at the root"),
                Level::Item if !s.preserve_unknown => {
                    Some("must not be empty for specified array items")
                }
                Level::Field if !s.preserve_unknown => {
                    Some("must not be empty for specified object fields")
                }
                _ => None,
            };
            if let Some(why) = why {
                self.errs.push(FieldError::required(type_at.clone(), why));
            }
        }
        if lvl == Level::Root && s.ty.is_some_and(|t| t != JsonType::Object) {
            self.errs.push(FieldError::invalid(
                type_at.clone(),
                type_value(),
                "must be object at the root",
            ));
        }
        if s.int_or_string {
            if s.ty.is_some() {
                self.errs.push(FieldError::invalid(
                    type_at.clone(),
                    type_value(),
                    "must be empty if x-kubernetes-int-or-string is true",
                ));
            }
            if s.preserve_unknown {
                self.errs.push(FieldError::invalid(
                    format!("{path}.x-kubernetes-preserve-unknown-fields"),
                    Value::Bool(true),
                    "must be false if x-kubernetes-int-or-string is true",
                ));
            }
            if s.embedded {
                self.errs.push(FieldError::invalid(
                    format!("{path}.x-kubernetes-embedded-resource"),
                    Value::Bool(true),
                    "must be false if x-kubernetes-int-or-string is true",
                ));
            }
        }
        if s.ty == Some(JsonType::Array) && s.items.is_none() {
            self.errs.push(FieldError::required(
                format!("{path}.items"),
                "must be specified",
            ));
        }
        let additional_at = format!("{path}.additionalProperties");
        let restricts_additional = matches!(
            s.additional,
            Additional::Schema(_) | Additional::Bool(false)
        );
        if !s.properties.is_empty() && restricts_additional {
            self.errs.push(FieldError::forbidden(
                additional_at.clone(),
                "additionalProperties and properties are mutual exclusive",
            ));
        }
        if s.embedded {
            if !matches!(s.additional, Additional::Unset) {
                self.errs.push(FieldError::forbidden(
                    additional_at,
                    "must not be used if x-kubernetes-embedded-resource is set",
                ));
            }
            if !s.preserve_unknown && s.properties.is_empty() {
                self.errs.push(FieldError::required(
                    format!("{path}.properties"),
                    "must not be empty if x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields",
                ));
            }
        }
        if lvl == Level::Root || s.embedded {
            for key in ["kind", "apiVersion"] {
                if let Some(p) = s.declared_property(key)
                    && p.ty != Some(JsonType::String)
                {
                    let shown = p.ty.map_or(Value::String(String::new()), |t| {
                        Value::String(t.name().to_string())
                    });
                    self.errs.push(FieldError::invalid(
                        format!("{path}.properties[{key}].type"),
                        shown,
                        "must be string",
                    ));
                }
            }
        }
        if lvl == Level::Root
            && let Some(meta) = obj.get("properties").and_then(|p| p.get("metadata"))
        {
            let only_names = meta.as_object().is_some_and(|m| {
                m.iter().all(|(k, v)| match k.as_str() {
                    "type" => v == "object",
                    "description" => true,
                    "properties" => v
                        .as_object()
                        .is_some_and(|p| p.keys().all(|n| n == "name" || n == "generateName")),
                    _ => false,
                })
            });
            if !only_names {
                self.errs.push(FieldError::forbidden(
                        format!("{path}.properties[metadata]"),
                        "must not specify anything other than name and generateName, but metadata is implicitly specified",
                    ));
            }
        }
    }

    fn list_type_rules(
        &mut self,
        s: &Structural,
        list_type: Option<&str>,
        keys: &[String],
        path: &str,
    ) {
        let lt_at = format!("{path}.x-kubernetes-list-type");
        let keys_at = format!("{path}.x-kubernetes-list-map-keys");
        let keys_value = || Value::from(keys.to_vec());
        if let Some(lt) = list_type {
            if !matches!(lt, "atomic" | "set" | "map") {
                self.errs.push(FieldError::not_supported(
                    lt_at.clone(),
                    Value::String(lt.to_string()),
                    &["atomic", "set", "map"],
                ));
            }
            if s.ty != Some(JsonType::Array) {
                self.errs.push(FieldError::invalid(
                    lt_at.clone(),
                    Value::String(lt.to_string()),
                    "must only be used if type is array",
                ));
            }
        }
        if !keys.is_empty() && list_type != Some("map") {
            match list_type {
                None => self.errs.push(FieldError::required(
                    lt_at,
                    "must be map if x-kubernetes-list-map-keys is non-empty",
                )),
                Some(lt) => self.errs.push(FieldError::invalid(
                    lt_at,
                    Value::String(lt.to_string()),
                    "must be map if x-kubernetes-list-map-keys is non-empty",
                )),
            }
        }
        match list_type {
            Some("map") => {
                if keys.is_empty() {
                    self.errs.push(FieldError::required(
                        keys_at.clone(),
                        "must not be empty if x-kubernetes-list-type is map",
                    ));
                }
                let Some(items) = s.items.as_deref() else {
                    self.errs.push(FieldError::required(
                        format!("{path}.items"),
                        "must have a schema if x-kubernetes-list-type is map",
                    ));
                    return;
                };
                if items.ty != Some(JsonType::Object) {
                    self.errs.push(FieldError::invalid(
                        format!("{path}.items.type"),
                        items.ty.map_or(Value::Null, |t| Value::from(t.name())),
                        "must be object if parent array's x-kubernetes-list-type is map",
                    ));
                }
                for (i, k) in keys.iter().enumerate() {
                    match items.declared_property(k) {
                        Some(p) if matches!(p.ty, Some(JsonType::Array | JsonType::Object)) => {
                            self.errs.push(FieldError::invalid(
                                format!("{path}.items.properties[{k}].type"),
                                p.ty.map_or(Value::Null, |t| Value::from(t.name())),
                                "must be a scalar type if parent array's x-kubernetes-list-type is map",
                            ));
                        }
                        Some(_) => {}
                        None => self.errs.push(FieldError::invalid(
                            keys_at.clone(),
                            keys_value(),
                            "entries must all be names of item properties",
                        )),
                    }
                    if keys[..i].contains(k) {
                        self.errs.push(FieldError::invalid(
                            keys_at.clone(),
                            keys_value(),
                            "must not contain duplicate entries",
                        ));
                    }
                }
            }
            Some("set") => {
                let Some(items) = s.items.as_deref() else {
                    return;
                };
                let why = "must be atomic as item of a list with x-kubernetes-list-type=set";
                match items.ty {
                    Some(JsonType::Array) if items.list_type != ListType::Atomic => {
                        self.errs.push(FieldError::invalid(
                            format!("{path}.items.x-kubernetes-list-type"),
                            Value::Null,
                            why,
                        ))
                    }
                    Some(JsonType::Object) if !items.map_atomic => {
                        self.errs.push(FieldError::invalid(
                            format!("{path}.items.x-kubernetes-map-type"),
                            Value::Null,
                            why,
                        ))
                    }
                    _ => {}
                }
            }
            _ => {}
        }
    }

    /// Every property and `items` named inside a combinator is also specified outside.
    fn completeness(&mut self, s: &Structural, path: &str) {
        let Some(c) = s.checks.as_deref() else {
            return;
        };
        let groups = [
            ("allOf", &c.all_of),
            ("anyOf", &c.any_of),
            ("oneOf", &c.one_of),
        ];
        for (name, list) in groups {
            for (i, n) in list.iter().enumerate() {
                self.complete(n, s, path, &format!("{path}.{name}[{i}]"));
            }
        }
        if let Some(not) = &c.not {
            self.complete(not, s, path, &format!("{path}.not"));
        }
    }

    fn complete(&mut self, v: &Structural, s: &Structural, spath: &str, vpath: &str) {
        for (k, vp) in &v.properties {
            let vat = format!("{vpath}.properties[{k}]");
            match (s.declared_property(k), &s.additional) {
                (Some(sp), _) => self.complete(vp, sp, &format!("{spath}.properties[{k}]"), &vat),
                (None, Additional::Schema(a)) => {
                    self.complete(vp, a, &format!("{spath}.additionalProperties"), &vat)
                }
                (None, _) => self.errs.push(FieldError::required(
                    format!("{spath}.properties[{k}]"),
                    format!("because it is defined in {vat}"),
                )),
            }
        }
        if let Some(vi) = v.items.as_deref() {
            let vat = format!("{vpath}.items");
            match s.items.as_deref() {
                Some(si) => self.complete(vi, si, &format!("{spath}.items"), &vat),
                None => self.errs.push(FieldError::required(
                    format!("{spath}.items"),
                    format!("because it is defined in {vat}"),
                )),
            }
        }
        if let Some(c) = v.checks.as_deref() {
            let groups = [
                ("allOf", &c.all_of),
                ("anyOf", &c.any_of),
                ("oneOf", &c.one_of),
            ];
            for (name, list) in groups {
                for (i, n) in list.iter().enumerate() {
                    self.complete(n, s, spath, &format!("{vpath}.{name}[{i}]"));
                }
            }
            if let Some(not) = &c.not {
                self.complete(not, s, spath, &format!("{vpath}.not"));
            }
        }
    }

    /// A default must already be pruned and must validate against its own node.
    fn default_rules(&mut self, s: &Structural, path: &str) {
        let Some(d) = &s.default else {
            return;
        };
        let at = format!("{path}.default");
        let mut pruned = d.clone();
        prune::prune_default(s, &mut pruned);
        if &pruned != d {
            self.errs.push(FieldError::invalid(
                at,
                d.clone(),
                "must not have unknown fields",
            ));
            return;
        }
        let schema_errs = validate_with_base(s, d, &at);
        let checked = schema_errs.is_empty();
        self.errs.extend(schema_errs);
        // A default that passes the schema must pass the node's rules too.
        if checked && s.has_rules() {
            self.errs.extend(cel::validate_with_base(s, d, &at));
        }
    }
}

#[cfg(test)]
mod tests;
