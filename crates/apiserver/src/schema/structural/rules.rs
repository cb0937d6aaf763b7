//! The structural rules Kubernetes checks on a parsed node: what may appear inside
//! `allOf`/`anyOf`/`oneOf`/`not`, the rules of the root and of embedded resources, list types
//! and their keys, that every value the junctors name is specified outside them, and that
//! defaults are pruned and valid.

use serde_json::{Map, Value};

use super::{Level, Parser};
use crate::api::field::FieldError;
use crate::schema::cel;
use crate::schema::validate::validate_with_base;
use crate::schema::{Additional, JsonType, ListType, Structural, prune};

/// Keywords that may not appear inside `allOf`/`anyOf`/`oneOf`/`not`, with the message.
pub(super) const NESTED_FORBIDDEN: [(&str, &str); 11] = [
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

impl Parser {
    pub(super) fn nested_rules(
        &mut self,
        obj: &Map<String, Value>,
        path: &str,
        lvl: Level,
        allow_type: bool,
    ) {
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

    pub(super) fn structural_rules(
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

    pub(super) fn list_type_rules(
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
    pub(super) fn completeness(&mut self, s: &Structural, path: &str) {
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

    pub(super) fn complete(&mut self, v: &Structural, s: &Structural, spath: &str, vpath: &str) {
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
    pub(super) fn default_rules(&mut self, s: &Structural, path: &str) {
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
