//! Evaluating compiled rules on a custom object: binding `self` (and `oldSelf`) to the
//! node's value, walking the object along the schema, and turning results into causes.
//!
//! Only nodes on a path to a rule are visited (`subtree_rules`). `self` is built from the
//! JSON as the crate's `Val` objects with strings borrowed, once per node, and one context
//! per node is shared by its rules.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::LazyLock;

use cel::common::types::{
    CelBool, CelDouble, CelInt, CelList, CelMap, CelMapKey, CelNull, CelOptional, CelString,
    CelUInt,
};
use cel::common::value::Val;
use cel::{Context, ExecutionError, Value as Cel};
use serde_json::{Map, Value};

use super::{ENV, Reason, Rule, escape};
use crate::api::field::FieldError;
use crate::schema::validate::{Path, join_path};
use crate::schema::{Additional, JsonType, ListType, Structural};

/// Converts a node's value to CEL, as its schema types it, borrowing its strings. `root`
/// marks the schema root (whose `metadata` shows only `name` and `generateName`).
pub(crate) fn to_val<'v>(s: &Structural, v: &'v Value, root: bool) -> Box<dyn Val + 'v> {
    match v {
        Value::Null => Box::new(CelNull),
        Value::Bool(b) => Box::new(CelBool::from(*b)),
        Value::Number(n) => {
            let float = s.ty == Some(JsonType::Number);
            match (n.as_i64(), n.as_u64()) {
                (Some(i), _) if !float => Box::new(CelInt::from(i)),
                (None, Some(u)) if !float => Box::new(CelUInt::from(u)),
                _ => Box::new(CelDouble::from(n.as_f64().unwrap_or(f64::NAN))),
            }
        }
        Value::String(st) => Box::new(CelString::from(st.as_str())),
        Value::Array(items) => {
            let is = s.items.as_deref().unwrap_or(&UNTYPED);
            let list: Vec<Box<dyn Val + 'v>> = items.iter().map(|x| to_val(is, x, false)).collect();
            Box::new(CelList::from(list))
        }
        Value::Object(map) => object_to_val(s, map, root),
    }
}

/// The schema of values nothing describes.
static UNTYPED: LazyLock<Structural> = LazyLock::new(|| Structural {
    preserve_unknown: true,
    ..Structural::default()
});

fn object_to_val<'v>(s: &Structural, map: &'v Map<String, Value>, root: bool) -> Box<dyn Val + 'v> {
    let mut out: HashMap<CelMapKey<'v>, Box<dyn Val + 'v>> = HashMap::with_capacity(map.len());
    let resource = root || s.embedded;
    let key = |k: &'v str| CelMapKey::String(CelString::from(k));
    for (k, v) in map {
        if v.is_null() {
            continue;
        }
        if resource {
            match k.as_str() {
                "apiVersion" | "kind" => {
                    out.insert(key(k), to_val(&UNTYPED, v, false));
                    continue;
                }
                "metadata" => {
                    let mut meta: HashMap<CelMapKey<'v>, Box<dyn Val + 'v>> = HashMap::new();
                    for f in ["name", "generateName"] {
                        if let Some(Value::String(x)) = v.get(f) {
                            meta.insert(key(f), Box::new(CelString::from(x.as_str())));
                        }
                    }
                    out.insert(key("metadata"), Box::new(CelMap::from(meta)));
                    continue;
                }
                _ => {}
            }
        }
        if let Some(ps) = s.declared_property(k) {
            match escape(k) {
                Some(Cow::Borrowed(_)) => {
                    out.insert(key(k), to_val(ps, v, false));
                }
                Some(Cow::Owned(name)) => {
                    out.insert(CelMapKey::from(name), to_val(ps, v, false));
                }
                None => {}
            }
        } else if let Additional::Schema(a) = &s.additional {
            out.insert(key(k), to_val(a, v, false));
        } else {
            out.insert(key(k), to_val(&UNTYPED, v, false));
        }
    }
    Box::new(CelMap::from(out))
}

/// The type name Kubernetes shows as the value of a failed rule (`"object"`, `"string"`,
/// `""` for int-or-string and untyped nodes).
fn type_shown(s: &Structural) -> Value {
    Value::String(s.ty.map_or("", JsonType::name).to_string())
}

/// Evaluates every rule of `schema` on `new` (with `old`, on update). One error per failed
/// rule, in schema order: a node's rules before its children's.
pub(crate) fn validate(schema: &Structural, new: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if schema.rules.is_some() || schema.subtree_rules {
        walk(schema, new, old, (&Path::Root, true), false, &mut errs);
    }
    errs
}

/// Visits the nodes with rules below `s`. `unchanged` says an ancestor's value equals its old
/// value: then only transition rules run (Kubernetes ratchets the others: a value an
/// update leaves as it was is not checked again).
/// [`validate`] of a value that is not an object (a `default`), with error fields under
/// `base` (`<nil>` becomes `base` itself). Transition rules do not run.
pub(crate) fn validate_with_base(
    schema: &Structural,
    value: &Value,
    base: &str,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    walk(schema, value, None, (&Path::Root, false), false, &mut errs);
    for e in &mut errs {
        e.field = if e.field == "<nil>" {
            base.to_string()
        } else {
            join_path(base, &e.field)
        };
    }
    errs
}

fn walk(
    s: &Structural,
    v: &Value,
    old: Option<&Value>,
    at: (&Path, bool),
    unchanged: bool,
    errs: &mut Vec<FieldError>,
) {
    let path = at.0;
    if v.is_null() {
        return;
    }
    let unchanged = unchanged || old.is_some_and(|o| o == v);
    if let Some(rules) = s.rules.as_deref() {
        evaluate(s, rules, v, old, at, unchanged, errs);
    }
    if !s.subtree_rules {
        return;
    }
    match v {
        Value::Object(map) => {
            for (k, ps) in &s.properties {
                if let Some(cv) = map.get(k) {
                    let oc = old.and_then(|o| o.get(k));
                    walk(ps, cv, oc, (&Path::Field(path, k), false), unchanged, errs);
                }
            }
            if let Additional::Schema(a) = &s.additional {
                for (k, cv) in map {
                    if s.declared_property(k).is_none() {
                        let oc = old.and_then(|o| o.get(k));
                        walk(a, cv, oc, (&Path::Field(path, k), false), unchanged, errs);
                    }
                }
            }
        }
        Value::Array(items) => {
            let Some(is) = s.items.as_deref() else {
                return;
            };
            let old_items = old.and_then(Value::as_array).map(Vec::as_slice);
            for (i, item) in items.iter().enumerate() {
                let oi = old_items.and_then(|o| correlate(&s.list_type, item, o));
                // Items of atomic lists have no old value, but an unchanged list has
                // unchanged items.
                walk(
                    is,
                    item,
                    oi,
                    (&Path::Index(path, i), false),
                    unchanged,
                    errs,
                );
            }
        }
        _ => {}
    }
}

/// The old item an item of a list corresponds to: by key for `map` lists, by value for
/// `set` lists; none for atomic lists.
fn correlate<'o>(lt: &ListType, item: &Value, old: &'o [Value]) -> Option<&'o Value> {
    match lt {
        ListType::Atomic => None,
        ListType::Set => old.iter().find(|o| *o == item),
        ListType::Map(keys) => old
            .iter()
            .find(|o| keys.iter().all(|k| o.get(k) == item.get(k))),
    }
}

fn evaluate(
    s: &Structural,
    rules: &[Rule],
    v: &Value,
    old: Option<&Value>,
    (path, root): (&Path, bool),
    unchanged: bool,
    errs: &mut Vec<FieldError>,
) {
    // One context per way `oldSelf` is bound (plain, or optional), built on first use and
    // shared by the node's rules.
    let mut plain: Option<Context<'_, '_>> = None;
    let mut optional: Option<Context<'_, '_>> = None;
    for rule in rules {
        if rule.transition && old.is_none() && !rule.optional_old_self {
            continue;
        }
        if unchanged && !rule.transition {
            continue;
        }
        let ctx = if rule.optional_old_self {
            optional.get_or_insert_with(|| {
                let mut ctx = Context::with_env(ENV.clone());
                ctx.add_variable_as_val("self", to_val(s, v, root));
                let prev = match old {
                    Some(o) => CelOptional::of(to_val(s, o, root)),
                    None => CelOptional::none(),
                };
                ctx.add_variable_as_val("oldSelf", Box::new(prev));
                ctx
            })
        } else {
            plain.get_or_insert_with(|| {
                let mut ctx = Context::with_env(ENV.clone());
                ctx.add_variable_as_val("self", to_val(s, v, root));
                if let Some(o) = old {
                    ctx.add_variable_as_val("oldSelf", to_val(s, o, root));
                }
                ctx
            })
        };
        let field = || {
            let base = path.render();
            let with_fp = match &rule.field_path {
                Some(fp) => join_path(&base, fp),
                None => base,
            };
            if with_fp.is_empty() {
                "<nil>".to_string()
            } else {
                with_fp
            }
        };
        match rule.program.execute(ctx) {
            Ok(Cel::Bool(true)) => {}
            Ok(_) => {
                let message = rule
                    .message_expression
                    .as_ref()
                    .and_then(|m| match m.execute(ctx) {
                        Ok(Cel::String(text)) => {
                            let t = text.trim();
                            (!t.is_empty() && !t.contains('\n')).then(|| t.to_string())
                        }
                        Ok(_) | Err(_) => None,
                    })
                    .unwrap_or_else(|| rule.static_message());
                errs.push(match rule.reason {
                    Reason::Invalid => FieldError::invalid(field(), type_shown(s), message),
                    Reason::Forbidden => FieldError::forbidden(field(), message),
                    Reason::Required => FieldError::required(field(), message),
                    Reason::Duplicate => FieldError::duplicate(field(), type_shown(s)),
                });
            }
            Err(e) => {
                // Evaluation errors are reported at the node itself, as Kubernetes does.
                let at = match path.render() {
                    p if p.is_empty() => "<nil>".to_string(),
                    p => p,
                };
                errs.push(FieldError::invalid(
                    at,
                    type_shown(s),
                    evaluation_error(&e, rule),
                ));
            }
        }
    }
}

/// An evaluation error in Kubernetes' words.
fn evaluation_error(e: &ExecutionError, rule: &Rule) -> String {
    match e {
        ExecutionError::NoSuchOverload(_)
        | ExecutionError::UnsupportedBinaryOperator(..)
        | ExecutionError::ValuesNotComparable(..) => format!(
            "'no such overload': call arguments did not match a supported operator, function or macro signature for rule: {}",
            rule.shown()
        ),
        ExecutionError::NoSuchKey(k) => {
            format!("no such key: {k} evaluating rule: {}", rule.shown())
        }
        // cel-go's words for the arithmetic and indexing errors.
        ExecutionError::Overflow(..) => {
            format!("integer overflow evaluating rule: {}", rule.shown())
        }
        ExecutionError::DivisionByZero(_) => {
            format!("division by zero evaluating rule: {}", rule.shown())
        }
        ExecutionError::RemainderByZero(_) => {
            format!("modulus by zero evaluating rule: {}", rule.shown())
        }
        ExecutionError::IndexOutOfBounds(i) => {
            let shown = match i {
                Cel::Int(n) => n.to_string(),
                Cel::UInt(n) => n.to_string(),
                other => format!("{other:?}"),
            };
            format!(
                "index out of bounds: {shown} evaluating rule: {}",
                rule.shown()
            )
        }
        other => {
            let text = other.to_string();
            let mut chars = text.chars();
            let lowered = match chars.next() {
                Some(c) => c.to_lowercase().chain(chars).collect(),
                None => text,
            };
            format!("{lowered} evaluating rule: {}", rule.shown())
        }
    }
}
