//! Reading one schema node into a [`Structural`]: its type, properties, items, formats,
//! patterns (translated to Rust regexes), enums, bounds and extensions, with an error for
//! every keyword Kubernetes does not support.

use regex::Regex;
use serde_json::Value;

use super::{Level, Parser};
use crate::api::field::FieldError;
use crate::schema::cel;
use crate::schema::format::Format;
use crate::schema::validate::{Checks, Pattern};
use crate::schema::{Additional, JsonType, ListType, Structural};

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
pub(super) fn translate_pattern(p: &str) -> String {
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
    pub(super) fn node(
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

    pub(super) fn nested(
        &mut self,
        v: &Value,
        path: &str,
        lvl: Level,
        allow_type: bool,
    ) -> Structural {
        self.node(v, path, lvl, true, allow_type)
    }

    pub(super) fn bool(&mut self, v: &Value, at: &str) -> bool {
        v.as_bool().unwrap_or_else(|| {
            self.errs
                .push(FieldError::invalid(at, v.clone(), "must be a boolean"));
            false
        })
    }

    pub(super) fn number(&mut self, v: &Value, at: &str) -> Option<f64> {
        let n = v.as_f64();
        if n.is_none() {
            self.errs
                .push(FieldError::invalid(at, v.clone(), "must be a number"));
        }
        n
    }

    pub(super) fn count(&mut self, v: &Value, at: &str) -> Option<u64> {
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
}
