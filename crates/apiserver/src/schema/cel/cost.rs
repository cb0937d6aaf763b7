//! A static estimate of what a rule can cost when it runs, so that a rule that could run for
//! hours or fill the memory (and abort the server) is refused when its CRD is written.
//!
//! Kubernetes estimates every rule with cel-go's cost estimator and refuses a rule whose
//! worst case exceeds [`RULE_COST_LIMIT`] (cel-go `StaticEstimatedCostLimit`, 10,000,000) and
//! a schema whose rules together exceed [`SCHEMA_COST_LIMIT`] (`StaticEstimatedCRDCostLimit`,
//! 100,000,000); it also stops a running rule at 1,000,000 (`PerCallLimit`). The `cel` crate
//! has neither an estimator nor a cost tracker, so kore estimates with its own, smaller
//! model, in the same units (about one unit per node evaluated, a tenth per character or
//! element a function traverses or copies):
//!
//! - sizes come from the schema: `maxLength`, `maxItems`, `maxProperties`, or else what fits in
//!   a 3 MiB request (Kubernetes' `MaxRequestSizeBytes`) given the smallest JSON an item can be;
//! - a comprehension (`all`, `exists`, `map`, `filter`, ...) costs its body once per element
//!   of its range, so nested comprehensions over unbounded lists multiply;
//! - every value also has an estimated volume (characters plus elements), so growth is
//!   priced: `+` and `replace` add to or multiply the volume of their result, `split`,
//!   `join`, `lists.range` and `map` build lists, and copying or scanning a value costs a
//!   tenth of its volume;
//! - a rule runs once per value of its node: under the items of a list or the values of a
//!   map, its cost is multiplied by their maximum number ([`schema_errors`]).
//!
//! The estimate only needs to be an upper bound of what kore's interpreter does; it is not
//! cel-go's number, so a rule near a limit may be accepted by one and refused by the other.

use cel::common::ast::{EntryExpr, Expr, IdedExpr, LiteralValue};

use super::super::{Additional, JsonType, Structural};
use crate::api::field::FieldError;

/// The largest request body Kubernetes assumes when a schema leaves a size open.
const MAX_REQUEST_BYTES: f64 = 3.0 * 1024.0 * 1024.0;

/// The most one rule (or `messageExpression`) may cost, times the number of values it runs on.
pub(crate) const RULE_COST_LIMIT: f64 = 10_000_000.0;

/// The most all the rules of a schema may cost together.
pub(crate) const SCHEMA_COST_LIMIT: f64 = 100_000_000.0;

/// The cost of traversing or copying one character or element.
const PER_ITEM: f64 = 0.1;

/// The most elements `lists.range` builds (the `cel` crate's own limit).
const MAX_RANGE: f64 = 1_000_000.0;

/// Kubernetes' words for a cost over `limit`; `what` names the estimate.
pub(crate) fn exceeds(what: &str, cost: f64, limit: f64) -> String {
    let factor = cost / limit;
    let factor = if factor > 100.0 || !factor.is_finite() {
        "more than 100x".to_string()
    } else if factor < 1.5 {
        format!("{factor:.6}x")
    } else {
        format!("{factor:.1}x")
    };
    format!(
        "{what} exceeds budget by factor of {factor} (try simplifying the rule, or adding \
         maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)"
    )
}

/// What an element of a collection is.
#[derive(Clone, Copy)]
enum Elem<'s> {
    /// A value the schema describes.
    Node(&'s Structural),
    /// A computed value of at most this volume.
    Volume(f64),
}

/// The estimate of one expression.
#[derive(Clone, Copy)]
struct Est<'s> {
    /// The most evaluating it costs.
    cost: f64,
    /// The most characters (string) or elements (list, map) its value has.
    len: f64,
    /// The most characters plus elements in its value, all levels included.
    volume: f64,
    /// What its elements are (or what iterating it yields).
    elem: Elem<'s>,
    /// The schema node of the value, when it is one (for field selection and indexing).
    node: Option<&'s Structural>,
}

impl<'s> Est<'s> {
    fn scalar(cost: f64) -> Est<'s> {
        Est {
            cost,
            len: 1.0,
            volume: 1.0,
            elem: Elem::Volume(1.0),
            node: None,
        }
    }

    /// A computed value of this volume, whose elements are as large as itself.
    fn sized(cost: f64, volume: f64) -> Est<'s> {
        Est {
            cost,
            len: volume,
            volume,
            elem: Elem::Volume(volume),
            node: None,
        }
    }

    fn elem_volume(&self) -> f64 {
        match self.elem {
            Elem::Node(s) => max_volume(s),
            Elem::Volume(v) => v,
        }
    }
}

/// The most values a node can hold directly: characters of a string, items of a list,
/// entries of a map; 1 for scalars.
fn max_len(s: &Structural) -> f64 {
    let checks = s.checks.as_deref();
    let bounded = |max: Option<u64>, min_item: f64| {
        max.map_or(
            ((MAX_REQUEST_BYTES - 2.0) / (min_item + 1.0)).floor(),
            |m| m as f64,
        )
    };
    if s.int_or_string || s.ty == Some(JsonType::String) {
        return checks
            .and_then(|c| c.max_length)
            .map_or(MAX_REQUEST_BYTES - 2.0, |m| m as f64);
    }
    match s.ty {
        Some(JsonType::Array) => bounded(
            checks.and_then(|c| c.max_items),
            s.items.as_deref().map_or(1.0, min_size),
        ),
        Some(JsonType::Object) | None if is_map(s) => {
            // An entry is at least `"":` and its value.
            let value = match &s.additional {
                Additional::Schema(a) => min_size(a),
                _ => 1.0,
            };
            bounded(checks.and_then(|c| c.max_properties), value + 3.0)
        }
        Some(JsonType::Object) => s.properties.len() as f64,
        _ => 1.0,
    }
}

/// Whether the node's keys are open (a map, or a node that keeps unknown fields).
fn is_map(s: &Structural) -> bool {
    matches!(s.additional, Additional::Schema(_) | Additional::Bool(true)) || s.preserve_unknown
}

/// The smallest JSON a value of the node can be.
fn min_size(s: &Structural) -> f64 {
    match s.ty {
        Some(JsonType::String) | Some(JsonType::Object) | Some(JsonType::Array) => 2.0,
        _ => 1.0,
    }
}

/// The most characters plus elements a value of the node holds, all levels included.
fn max_volume(s: &Structural) -> f64 {
    // Looking at a few hundred nodes at most keeps the estimate cheap on huge schemas; past
    // them the request size is the bound.
    let mut budget = 256;
    volume_within(s, &mut budget)
}

fn volume_within(s: &Structural, budget: &mut usize) -> f64 {
    let Some(left) = budget.checked_sub(1) else {
        return MAX_REQUEST_BYTES;
    };
    *budget = left;
    let len = max_len(s);
    let inner = match (s.ty, &s.additional) {
        (Some(JsonType::Array), _) => s.items.as_deref().map_or(1.0, |i| volume_within(i, budget)),
        (_, Additional::Schema(a)) => volume_within(a, budget),
        _ if s.preserve_unknown => MAX_REQUEST_BYTES,
        (Some(JsonType::Object), _) => s
            .properties
            .iter()
            .map(|(_, p)| volume_within(p, budget))
            .fold(1.0, f64::max),
        _ => 0.0,
    };
    (len * (inner + 1.0)).min(MAX_REQUEST_BYTES)
}

/// A value the node describes.
fn of_node(s: &Structural) -> Est<'_> {
    let elem = match (s.ty, &s.additional) {
        (Some(JsonType::Array), _) => s.items.as_deref().map_or(Elem::Volume(1.0), Elem::Node),
        // Iterating a map or an object yields its keys.
        (Some(JsonType::Object) | None, _) if is_map(s) => Elem::Volume(MAX_REQUEST_BYTES),
        (Some(JsonType::Object), _) => Elem::Volume(
            s.properties
                .iter()
                .map(|(k, _)| k.len() as f64)
                .fold(1.0, f64::max),
        ),
        _ => Elem::Volume(1.0),
    };
    Est {
        cost: 1.0,
        len: max_len(s),
        volume: max_volume(s),
        elem,
        node: Some(s),
    }
}

/// Estimates expressions of one rule; `self_node` is the rule's node.
struct Estimator<'s> {
    self_node: &'s Structural,
    scope: Vec<(String, Est<'s>)>,
}

/// The per-call cost of `e`, a rule or message expression on `node`.
pub(crate) fn estimate(e: &IdedExpr, node: &Structural) -> f64 {
    let mut estimator = Estimator {
        self_node: node,
        scope: Vec::new(),
    };
    estimator.expr(e).cost
}

impl<'s> Estimator<'s> {
    fn expr(&mut self, e: &IdedExpr) -> Est<'s> {
        match &e.expr {
            Expr::Ident(name) => self.ident(name),
            // Literals are free, as in cel-go.
            Expr::Literal(LiteralValue::String(s)) => Est::sized(0.0, s.inner().len() as f64),
            Expr::Literal(LiteralValue::Bytes(b)) => Est::sized(0.0, b.inner().len() as f64),
            Expr::Literal(_) | Expr::Unspecified => Est::scalar(0.0),
            Expr::Select(sel) => {
                let operand = self.expr(&sel.operand);
                let mut field = self.field(&operand, &sel.field);
                field.cost += operand.cost;
                if sel.test {
                    Est::scalar(field.cost)
                } else {
                    field
                }
            }
            Expr::Call(call) => {
                let mut parts: Vec<Est<'s>> = Vec::with_capacity(call.args.len() + 1);
                if let Some(t) = call.target.as_deref() {
                    parts.push(self.expr(t));
                }
                for a in &call.args {
                    parts.push(self.expr(a));
                }
                self.call(&call.func_name, call.target.is_some(), &parts, &call.args)
            }
            Expr::Comprehension(c) => {
                let range = self.expr(&c.iter_range);
                let n = range.len;
                let item = match range.elem {
                    Elem::Node(s) => of_node(s),
                    Elem::Volume(v) => Est::sized(1.0, v),
                };
                let init = self.expr(&c.accu_init);
                let mark = self.scope.len();
                self.scope.push((c.iter_var.clone(), item));
                if let Some(v2) = &c.iter_var2 {
                    self.scope.push((v2.clone(), item));
                }
                self.scope.push((c.accu_var.clone(), init));
                let cond = self.expr(&c.loop_cond);
                let step = self.expr(&c.loop_step);
                self.scope.truncate(mark);
                // The step grows the accumulator at most this much per element.
                let accu = Est {
                    cost: 1.0,
                    len: init.len + n * (step.len - init.len).max(0.0),
                    volume: init.volume + n * (step.volume - init.volume).max(0.0),
                    elem: step.elem,
                    node: None,
                };
                self.scope.push((c.accu_var.clone(), accu));
                let result = self.expr(&c.result);
                self.scope.truncate(mark);
                Est {
                    cost: 1.0 + range.cost + init.cost + n * (cond.cost + step.cost) + result.cost,
                    ..result
                }
            }
            Expr::List(l) => {
                let items: Vec<Est<'s>> = l.elements.iter().map(|x| self.expr(x)).collect();
                let volume = items.iter().map(|x| x.volume + 1.0).sum::<f64>();
                Est {
                    cost: 1.0 + items.iter().map(|x| x.cost).sum::<f64>(),
                    len: items.len() as f64,
                    volume,
                    elem: Elem::Volume(items.iter().map(|x| x.volume).fold(1.0, f64::max)),
                    node: None,
                }
            }
            Expr::Map(m) => self.entries(m.entries.iter().map(|x| &x.expr)),
            Expr::Struct(s) => self.entries(s.entries.iter().map(|x| &x.expr)),
        }
    }

    fn entries<'e>(&mut self, entries: impl Iterator<Item = &'e EntryExpr>) -> Est<'s> {
        let mut est = Est {
            cost: 1.0,
            len: 0.0,
            volume: 0.0,
            elem: Elem::Volume(1.0),
            node: None,
        };
        let mut key_max: f64 = 1.0;
        for entry in entries {
            let (key, value) = match entry {
                EntryExpr::MapEntry(me) => (self.expr(&me.key), self.expr(&me.value)),
                EntryExpr::StructField(f) => (Est::scalar(0.0), self.expr(&f.value)),
            };
            est.cost += key.cost + value.cost;
            est.len += 1.0;
            est.volume += key.volume + value.volume + 1.0;
            key_max = key_max.max(key.volume);
        }
        est.elem = Elem::Volume(key_max);
        est
    }

    fn ident(&self, name: &str) -> Est<'s> {
        if let Some((_, est)) = self.scope.iter().rev().find(|(n, _)| n == name) {
            return Est { cost: 1.0, ..*est };
        }
        match name {
            "self" | "oldSelf" => of_node(self.self_node),
            _ => Est::scalar(1.0),
        }
    }

    /// Selecting `field` on a value: a property of its node, else a part of its volume.
    fn field(&self, operand: &Est<'s>, field: &str) -> Est<'s> {
        match operand.node.and_then(|s| s.property(field)) {
            Some(p) => of_node(p),
            None => Est::sized(1.0, operand.volume),
        }
    }

    /// An element of a collection (indexing).
    fn element(collection: &Est<'s>) -> Est<'s> {
        if let Some(s) = collection.node {
            let inner = match (s.ty, &s.additional) {
                (Some(JsonType::Array), _) => s.items.as_deref(),
                (_, Additional::Schema(a)) => Some(&**a),
                _ => None,
            };
            if let Some(inner) = inner {
                return of_node(inner);
            }
        }
        match collection.elem {
            Elem::Node(s) => of_node(s),
            Elem::Volume(v) => Est::sized(1.0, v),
        }
    }

    /// A call of `func` on `parts` (the target first, for a member call).
    fn call(&self, func: &str, member: bool, parts: &[Est<'s>], args: &[IdedExpr]) -> Est<'s> {
        let cost = 1.0 + parts.iter().map(|p| p.cost).sum::<f64>();
        let volume = parts.iter().map(|p| p.volume).sum::<f64>();
        let scan = PER_ITEM * volume;
        let first = parts.first().copied().unwrap_or_else(|| Est::scalar(1.0));
        let arg = |i: usize| parts.get(i).copied().unwrap_or_else(|| Est::scalar(1.0));
        match func {
            "_+_" => {
                // Concatenation copies characters, or (shallowly) elements.
                let len: f64 = parts.iter().map(|p| p.len).sum();
                let elem = parts.iter().map(Est::elem_volume).fold(1.0, f64::max);
                Est {
                    cost: cost + PER_ITEM * len,
                    len: parts.iter().map(|p| p.len).sum(),
                    volume,
                    elem: Elem::Volume(elem),
                    node: None,
                }
            }
            "_==_" | "_!=_" | "_<_" | "_<=_" | "_>_" | "_>=_" => {
                let shorter = parts.iter().map(|p| p.volume).fold(f64::INFINITY, f64::min);
                Est::scalar(cost + PER_ITEM * shorter.min(volume))
            }
            "@in" => {
                let (needle, haystack) = (first.volume, arg(1).len);
                Est::scalar(cost + PER_ITEM * haystack * needle.min(32.0))
            }
            "_[_]" | "_[?_]" => Est {
                cost,
                ..Self::element(&first)
            },
            "_?_:_" => {
                let branches = &parts[1.min(parts.len())..];
                let pick = |f: fn(&Est<'s>) -> f64| branches.iter().map(f).fold(1.0, f64::max);
                Est {
                    cost: cost - 1.0,
                    len: pick(|p| p.len),
                    volume: pick(|p| p.volume),
                    elem: Elem::Volume(pick(Est::elem_volume)),
                    node: None,
                }
            }
            "replace" if member => {
                // Each match of `from` becomes `to`; an empty `from` matches between every
                // two characters.
                let to = arg(2).volume;
                let from = match args.first().map(|a| &a.expr) {
                    Some(Expr::Literal(LiteralValue::String(s))) => s.inner().chars().count(),
                    _ => 0,
                };
                let grown = if from == 0 {
                    first.volume * (to + 1.0) + to
                } else {
                    first.volume * (to / from as f64).max(1.0)
                };
                Est::sized(cost + scan + PER_ITEM * grown, grown)
            }
            "split" if member => Est {
                cost: cost + scan,
                len: first.volume + 1.0,
                volume: 2.0 * first.volume + 1.0,
                elem: Elem::Volume(first.volume),
                node: None,
            },
            "join" if member => {
                let grown = first.volume + first.len * arg(1).volume;
                Est::sized(cost + scan + PER_ITEM * grown, grown)
            }
            "quote" | "strings.quote" => {
                let grown = 2.0 * volume + 2.0;
                Est::sized(cost + scan, grown)
            }
            "format" if member => {
                let grown = first.volume + arg(1).volume * 32.0;
                Est::sized(cost + scan + PER_ITEM * grown, grown)
            }
            "flatten" if member => Est::sized(cost + scan, first.volume),
            "findAll" if member => Est {
                cost: cost + scan * (1.0 + arg(1).volume),
                len: first.volume,
                volume: 2.0 * first.volume,
                elem: Elem::Volume(first.volume),
                node: None,
            },
            "matches" | "find" => Est::scalar(cost + scan * (1.0 + arg(1).volume)),
            // `lists.range(n)`, a call on the `lists` namespace.
            "lists.range" | "range" => {
                let n = match args.first().map(|a| &a.expr) {
                    Some(Expr::Literal(LiteralValue::Int(i))) => {
                        (*i.inner() as f64).clamp(0.0, MAX_RANGE)
                    }
                    _ => MAX_RANGE,
                };
                Est {
                    cost: cost + n,
                    len: n,
                    volume: 2.0 * n,
                    elem: Elem::Volume(1.0),
                    node: None,
                }
            }
            "string" | "bytes" => Est::sized(cost + scan, volume.max(32.0)),
            // The logical operators only combine their operands, as in cel-go.
            "_&&_" | "_||_" | "!_" | "@not_strictly_false" => Est::scalar(cost - 1.0),
            // Constant time on any value.
            "size" | "-_" | "type" | "hasValue" | "_*_" | "_/_" | "_%_" | "_-_" | "int"
            | "uint" | "double" | "bool" | "has" => Est::scalar(cost),
            // A prefix test reads at most the shorter string.
            "startsWith" | "endsWith" => {
                let shorter = parts.iter().map(|p| p.volume).fold(f64::INFINITY, f64::min);
                Est::scalar(cost + PER_ITEM * shorter.min(volume))
            }
            // These read all their inputs once.
            "contains" | "isSorted" | "sum" | "min" | "max" | "indexOf" | "lastIndexOf" => {
                Est::scalar(cost + scan)
            }
            // Everything else (conversions, `size`, `has`, the logical operators, string
            // tests, `orValue`, `sort`, `distinct`, ...) scans its inputs at most once and
            // gives a value no larger than the largest of them.
            _ => {
                let largest = parts
                    .iter()
                    .copied()
                    .max_by(|a, b| a.volume.total_cmp(&b.volume))
                    .unwrap_or_else(|| Est::scalar(1.0));
                Est {
                    cost: cost + scan,
                    ..largest
                }
            }
        }
    }
}

/// The errors of the rule costs of a whole schema, `root` at `base`: each rule's per-call
/// cost times the number of values it runs on against [`RULE_COST_LIMIT`], and their sum
/// against [`SCHEMA_COST_LIMIT`].
pub(crate) fn schema_errors(root: &Structural, base: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut total = 0.0;
    visit(root, 1.0, &mut total, &mut errs);
    if total > SCHEMA_COST_LIMIT {
        errs.push(FieldError::forbidden(
            base,
            exceeds(
                "x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema",
                total,
                SCHEMA_COST_LIMIT,
            ),
        ));
    }
    errs
}

/// Adds the costs of the rules at and below `s`, whose values occur `times` times in an
/// object. Recurses as deep as the schema, which the JSON parser bounds.
fn visit(s: &Structural, times: f64, total: &mut f64, errs: &mut Vec<FieldError>) {
    for rule in s.rules.as_deref().unwrap_or_default() {
        for (what, field, per_call) in [
            ("estimated rule cost", "rule", rule.cost),
            (
                "estimated messageExpression cost",
                "messageExpression",
                rule.message_cost,
            ),
        ] {
            let cost = per_call * times;
            if cost > RULE_COST_LIMIT {
                errs.push(FieldError::forbidden(
                    format!("{}.{field}", rule.at),
                    exceeds(what, cost, RULE_COST_LIMIT),
                ));
            }
            *total += cost;
        }
    }
    for (_, p) in &s.properties {
        visit(p, times, total, errs);
    }
    let many = times * max_len(s);
    if let Some(items) = s.items.as_deref() {
        visit(items, many, total, errs);
    }
    if let Additional::Schema(a) = &s.additional {
        visit(a, many, total, errs);
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    /// `spec` properties of the test schemas: nothing bounded.
    fn props() -> Value {
        json!({
            "name": {"type": "string"},
            "tags": {"type": "array", "items": {"type": "string"}},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            "ports": {"type": "array", "items": {"type": "object", "properties": {
                "name": {"type": "string"}, "port": {"type": "integer"}}}},
            "small": {"type": "array", "maxItems": 100, "items": {"type": "string", "maxLength": 64}},
        })
    }

    /// The errors of a schema whose `spec` has `rules`.
    fn errors(rules: &[&str]) -> Vec<String> {
        let rules: Vec<Value> = rules.iter().map(|r| json!({"rule": r})).collect();
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object",
            "properties": props(), "x-kubernetes-validations": rules}}});
        match Structural::from_json(&schema, "s") {
            Ok(_) => Vec::new(),
            Err(errs) => errs.iter().map(ToString::to_string).collect(),
        }
    }

    const AT: &str = "s.properties[spec].x-kubernetes-validations[0].rule";
    const HINT: &str = "(try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)";

    #[test]
    fn common_rules_fit_the_budget_even_on_unbounded_values() {
        for rule in [
            "self.name == 'a' && self.name.startsWith('x') && !self.name.endsWith('y')",
            "self.name.matches('^[a-z]+$')",
            "self.tags.all(t, t.startsWith('team-'))",
            "self.tags.exists(t, t == 'a') && self.tags.size() < 10",
            "self.ports.all(p, p.port > 0 && p.name != '')",
            "self.ports.filter(p, p.port > 100).size() == 0",
            "self.labels.all(k, k.startsWith('a') && self.labels[k] != '')",
            "!has(self.name) || self.name in self.tags",
            "self.small.all(a, self.small.all(b, a == b || a != b))",
        ] {
            assert_eq!(errors(&[rule]), Vec::<String>::new(), "{rule}");
        }
    }

    /// The per-call estimate of `rule` on `spec`.
    fn per_call(rule: &str) -> f64 {
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object",
            "properties": props(), "x-kubernetes-validations": [{"rule": rule}]}}});
        let s = Structural::from_json(&schema, "s").expect("within budget");
        s.property("spec")
            .and_then(|spec| spec.rules.as_deref())
            .map_or(0.0, |r| r[0].cost)
    }

    #[test]
    fn estimates_of_common_rules_are_what_the_design_doc_says() {
        let prefix = per_call("self.tags.all(t, t.startsWith('team-'))");
        assert!((4_000_000.0..5_500_000.0).contains(&prefix), "{prefix}");
        let ports = per_call("self.ports.all(p, p.port > 0 && p.name != '')");
        assert!(
            (6_000_000.0..10_000_000.0).contains(&ports),
            "ports {ports}"
        );
        let small = per_call("self.small.all(a, self.small.all(b, a == b))");
        assert!((100_000.0..150_000.0).contains(&small), "{small}");
    }

    #[test]
    fn rules_that_could_run_too_long_or_grow_too_large_are_refused() {
        let replace = format!("'a'{} != ''", ".replace('', 'aaaaaaaaaa')".repeat(10));
        let doubling = format!("[self.name]{} != []", ".map(x, x + x)".repeat(30));
        for rule in [
            // Quadratic over unbounded lists.
            "self.tags.all(a, self.tags.all(b, a == b))",
            "self.ports.exists(p, self.ports.exists(q, p.port == q.port && p.name != q.name))",
            // Memory: a million lists of a million elements, or strings that multiply.
            "lists.range(1000000).map(x, lists.range(1000000)).size() > 0",
            replace.as_str(),
            doubling.as_str(),
        ] {
            let got = errors(&[rule]);
            assert_eq!(
                got,
                [format!(
                    "{AT}: Forbidden: estimated rule cost exceeds budget by factor of more than 100x {HINT}"
                )],
                "{rule}"
            );
        }
    }

    #[test]
    fn a_rule_is_priced_once_per_value_of_its_node() {
        // Cheap per call, but it runs once per item of an unbounded list of lists.
        let schema = |max_items: Option<u64>| {
            let mut list = json!({"type": "array", "items": {"type": "array",
                "items": {"type": "string", "maxLength": 10},
                "x-kubernetes-validations": [{"rule": "self.all(s, s != 'x')"}]}});
            if let Some(m) = max_items {
                list["maxItems"] = json!(m);
                list["items"]["maxItems"] = json!(m);
            }
            json!({"type": "object", "properties": {"lists": list}})
        };
        let errs = Structural::from_json(&schema(None), "s").expect_err("too costly");
        let errs: Vec<String> = errs.iter().map(ToString::to_string).collect();
        assert_eq!(
            errs,
            [
                format!(
                    "s.properties[lists].items.x-kubernetes-validations[0].rule: Forbidden: estimated rule cost exceeds budget by factor of more than 100x {HINT}"
                ),
                format!(
                    "s: Forbidden: x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema exceeds budget by factor of more than 100x {HINT}"
                ),
            ]
        );
        assert!(Structural::from_json(&schema(Some(100)), "s").is_ok());
    }

    #[test]
    fn the_rules_of_a_schema_share_one_budget() {
        // Each rule is about 5,000,000 (a million items, a few nodes each); 25 of them pass
        // one by one but not together.
        let rule = "self.ports.all(p, p.port > 0)";
        let per_call = {
            let s = Structural::from_json(
                &json!({"type": "object", "properties": props(), "x-kubernetes-validations": [{"rule": rule}]}),
                "s",
            )
            .expect("within budget");
            s.rules.as_deref().map_or(0.0, |r| r[0].cost)
        };
        assert!(
            per_call > 1_000_000.0 && per_call < RULE_COST_LIMIT,
            "{per_call}"
        );
        let n = (SCHEMA_COST_LIMIT / per_call).ceil() as usize + 1;
        let got = errors(&vec![rule; n]);
        assert_eq!(got.len(), 1, "{got:?}");
        assert!(
            got[0].starts_with("s: Forbidden: x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema exceeds budget by factor of 1."),
            "{}",
            got[0]
        );
        assert_eq!(errors(&vec![rule; n - 2]), Vec::<String>::new());
    }

    #[test]
    fn the_factor_is_printed_as_kubernetes_prints_it() {
        let hint = HINT;
        assert_eq!(
            exceeds("estimated rule cost", 12_000_000.0, RULE_COST_LIMIT),
            format!("estimated rule cost exceeds budget by factor of 1.200000x {hint}")
        );
        assert_eq!(
            exceeds("estimated rule cost", 25_000_000.0, RULE_COST_LIMIT),
            format!("estimated rule cost exceeds budget by factor of 2.5x {hint}")
        );
        assert_eq!(
            exceeds("estimated rule cost", f64::INFINITY, RULE_COST_LIMIT),
            format!("estimated rule cost exceeds budget by factor of more than 100x {hint}")
        );
    }
}
