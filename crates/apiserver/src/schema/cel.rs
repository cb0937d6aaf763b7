//! CEL validation rules (`x-kubernetes-validations`): compiling them with a CRD's schema, and
//! evaluating them on custom objects.
//!
//! The language is the `cel` crate's interpreter (the standard library, the `strings` and
//! `lists` extensions, `matches`). kore adds what Kubernetes layers on top of it:
//!
//! - **Compiling** ([`compile`]), once per CRD version when the schema is parsed: each rule
//!   and `messageExpression` is parsed and checked against the schema by `check`
//!   (`undefined field 'foo'`, `undeclared reference to 'x'`, `found no matching overload
//!   for '_+_' applied to '(string, int)'`, `cel expression must evaluate to a bool`). Errors name
//!   `<node>.x-kubernetes-validations[i].rule` and read `compilation failed: ERROR:
//!   <input>:1:6: ...`, with the source line and a caret, as Kubernetes prints them. The
//!   compiled programs live in the [`Structural`] tree, so requests never parse a rule.
//! - **Binding** `self`: objects with properties become maps keyed by property name
//!   (escaped as Kubernetes escapes them: `x-y` is `x__dash__y`, a keyword `in` is
//!   `__in__`; `null` fields are absent), maps stay maps, arrays lists; `integer` is `int`,
//!   `number` is `double`, int-or-string either. At the root and in embedded resources
//!   `apiVersion`, `kind` and `metadata.name`/`generateName` are visible.
//! - **Evaluating** ([`validate`]) after defaulting and schema validation, at every node whose
//!   value is present. A rule that mentions `oldSelf` is a transition rule: it runs only on
//!   update, at nodes that correlate with the old object (object fields, map values, items of
//!   `map` and `set` lists), unless `optionalOldSelf` makes `oldSelf` an optional.
//! - **Reporting**: a rule that is not `true` gives one [`FieldError`] at the node's path
//!   (plus `fieldPath`), typed by `reason`; the message is `message`, the evaluated
//!   `messageExpression`, or `failed rule: <rule>`. An evaluation error (`no such key`, a
//!   type mismatch) is a cause too, never a panic.
//!
//! - **Limits** (`limits`): before parsing, a rule is at most 100,000 characters and 250
//!   levels deep (cel-go's limits, which Kubernetes keeps), so no rule text can make the
//!   parser, the check or the interpreter overflow the stack.
//! - **Cost** (`cost`): each rule's worst-case cost is estimated from the schema's bounds and
//!   refused over Kubernetes' budgets (10,000,000 per rule times the values it runs on,
//!   100,000,000 per schema), so no accepted rule can run for hours or fill the memory.
//!
//! This file compiles; `eval` evaluates, `check` is the static check, `library` adds
//! Kubernetes' list and regex functions, `limits` bounds the size and depth of rules, `cost`
//! estimates what they cost.
//!
//! Not done (see `docs/design/crd-schema.md`): a full static type check (what `check` cannot
//! type fails when it runs, not when the CRD is created), a runtime cost tracker (the crate
//! has none; the static estimate stands in), `timestamp`/`duration`/`quantity`/`url`/`ip`
//! values, and ratcheting.

mod check;
mod cost;
mod eval;
mod library;
mod limits;

pub(crate) use self::eval::{validate, validate_with_base};

use std::borrow::Cow;
use std::fmt::Write as _;
use std::sync::{Arc, LazyLock};

use cel::common::ast::{EntryExpr, Expr, IdedExpr};

use self::check::{Checker, Kind, Ty};
use cel::{Env, Program};
use serde_json::Value;

use super::Structural;
use crate::api::field::FieldError;

/// The environment every rule is compiled and run in, built once.
static ENV: LazyLock<Arc<Env>> = LazyLock::new(|| {
    let mut env = Env::stdlib();
    // Both extensions declare distinct names; failing here would be a bug in the crate.
    if let Err(e) = env.add_extension(cel::extensions::strings) {
        tracing::error!(error = %e, "the CEL strings extension did not register");
    }
    if let Err(e) = env.add_extension(cel::extensions::lists) {
        tracing::error!(error = %e, "the CEL lists extension did not register");
    }
    if let Err(e) = env.add_extension(library::kubernetes) {
        tracing::error!(error = %e, "kore's Kubernetes CEL functions did not register");
    }
    Arc::new(env)
});

/// The cause type a failed rule reports (`reason`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reason {
    /// `FieldValueInvalid` (the default): `Invalid value: "object": <message>`.
    Invalid,
    /// `FieldValueForbidden`: `Forbidden: <message>`.
    Forbidden,
    /// `FieldValueRequired`: `Required value: <message>`.
    Required,
    /// `FieldValueDuplicate`: `Duplicate value: "object"` (Kubernetes drops the message).
    Duplicate,
}

const REASONS: [&str; 4] = [
    "FieldValueInvalid",
    "FieldValueForbidden",
    "FieldValueRequired",
    "FieldValueDuplicate",
];

/// One compiled `x-kubernetes-validations` entry.
#[derive(Debug)]
pub(crate) struct Rule {
    /// The rule as written.
    pub(crate) source: String,
    program: Program,
    /// `message`, trimmed; `None` when not set.
    message: Option<String>,
    message_expression: Option<Program>,
    reason: Reason,
    /// `fieldPath`, normalised to `a.b` (appended to the node's path); `None` when not set.
    field_path: Option<String>,
    /// Whether the rule mentions `oldSelf`.
    transition: bool,
    optional_old_self: bool,
    /// The schema path of the entry (`<node>.x-kubernetes-validations[i]`), for cost errors.
    at: String,
    /// The estimated cost of one evaluation of the rule, and of its `messageExpression`.
    cost: f64,
    message_cost: f64,
}

impl Rule {
    /// The message of a failed rule when no expression gives one.
    fn static_message(&self) -> String {
        match &self.message {
            Some(m) => m.clone(),
            None => format!("failed rule: {}", self.source.trim()),
        }
    }

    /// How the rule is named in evaluation errors: its message, else its text.
    fn shown(&self) -> &str {
        self.message
            .as_deref()
            .unwrap_or_else(|| self.source.trim())
    }
}

/// Where in the schema a node's rules are compiled, for the checks that depend on it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Place<'a> {
    /// The node is the schema's root (so `self` shows `apiVersion`, `kind`, `metadata`).
    pub(crate) root: bool,
    /// The path of the closest enclosing atomic list, when the node sits in its items: the old
    /// value cannot be told there, so `oldSelf` is refused.
    pub(crate) uncorrelatable: Option<&'a str>,
}

/// Compiles the `x-kubernetes-validations` of `node` (already parsed, without its rules).
/// `path` is the node's schema path; errors go to `errs`.
pub(crate) fn compile(
    raw: &Value,
    node: &Structural,
    path: &str,
    place: Place<'_>,
    errs: &mut Vec<FieldError>,
) -> Vec<Rule> {
    let at = format!("{path}.x-kubernetes-validations");
    let Some(list) = raw.as_array() else {
        errs.push(FieldError::invalid(at, raw.clone(), "must be a list"));
        return Vec::new();
    };
    let mut rules = Vec::with_capacity(list.len());
    for (i, entry) in list.iter().enumerate() {
        let at = format!("{at}[{i}]");
        if let Some(rule) = compile_one(entry, node, &at, place, errs) {
            rules.push(rule);
        }
    }
    rules
}

fn string_field<'v>(
    entry: &'v Value,
    key: &str,
    at: &str,
    errs: &mut Vec<FieldError>,
) -> Option<&'v str> {
    match entry.get(key) {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s),
        Some(other) => {
            errs.push(FieldError::invalid(
                format!("{at}.{key}"),
                other.clone(),
                "must be a string",
            ));
            None
        }
    }
}

fn compile_one(
    entry: &Value,
    node: &Structural,
    at: &str,
    place: Place<'_>,
    errs: &mut Vec<FieldError>,
) -> Option<Rule> {
    if !entry.is_object() {
        errs.push(FieldError::invalid(at, entry.clone(), "must be an object"));
        return None;
    }
    let before = errs.len();
    let source = string_field(entry, "rule", at, errs).unwrap_or_default();
    let message = string_field(entry, "message", at, errs);
    let message_expression = string_field(entry, "messageExpression", at, errs);
    let reason = match string_field(entry, "reason", at, errs) {
        None | Some("FieldValueInvalid") => Reason::Invalid,
        Some("FieldValueForbidden") => Reason::Forbidden,
        Some("FieldValueRequired") => Reason::Required,
        Some("FieldValueDuplicate") => Reason::Duplicate,
        Some(other) => {
            errs.push(FieldError::not_supported(
                format!("{at}.reason"),
                Value::String(other.to_string()),
                &REASONS,
            ));
            Reason::Invalid
        }
    };
    let optional_old_self = match entry.get("optionalOldSelf") {
        None | Some(Value::Null) => None,
        Some(Value::Bool(b)) => Some(*b),
        Some(other) => {
            errs.push(FieldError::invalid(
                format!("{at}.optionalOldSelf"),
                other.clone(),
                "must be a boolean",
            ));
            None
        }
    };
    if let Some(m) = message {
        if m.trim().is_empty() {
            errs.push(FieldError::invalid(
                format!("{at}.message"),
                Value::String(m.to_string()),
                "message must be non-empty if specified",
            ));
        } else if m.contains('\n') {
            errs.push(FieldError::invalid(
                format!("{at}.message"),
                Value::String(m.to_string()),
                "message must not contain line breaks",
            ));
        }
    }
    let field_path = match string_field(entry, "fieldPath", at, errs) {
        None => None,
        Some(fp) => match normalize_field_path(node, fp) {
            Ok(p) => Some(p),
            Err(why) => {
                errs.push(FieldError::invalid(
                    format!("{at}.fieldPath"),
                    Value::String(fp.to_string()),
                    format!("fieldPath must be a valid path: {why}"),
                ));
                None
            }
        },
    };
    let rule_at = format!("{at}.rule");
    if source.trim().is_empty() {
        errs.push(FieldError::required(rule_at, "rule is not specified"));
        return None;
    }
    let program = match compile_expression(source, node, place.root, optional_old_self, Kind::Bool)
    {
        Ok(p) => p,
        Err(e) => {
            let why = match e {
                CompileError::Issues(issues) => format!("compilation failed: {issues}"),
                CompileError::WrongKind => "cel expression must evaluate to a bool".to_string(),
            };
            errs.push(FieldError::invalid(
                rule_at,
                Value::String(source.to_string()),
                why,
            ));
            return None;
        }
    };
    let cost = cost::estimate(program.expression(), node);
    if cost > cost::RULE_COST_LIMIT {
        errs.push(FieldError::forbidden(
            rule_at.clone(),
            cost::exceeds("estimated rule cost", cost, cost::RULE_COST_LIMIT),
        ));
    }
    let transition = mentions_old_self(program.expression());
    if transition && let Some(list) = place.uncorrelatable {
        errs.push(FieldError::invalid(
            rule_at.clone(),
            Value::String(source.to_string()),
            format!(
                "oldSelf cannot be used on the uncorrelatable portion of the schema within {list}"
            ),
        ));
    }
    if optional_old_self == Some(true) && !transition {
        errs.push(FieldError::invalid(
            format!("{at}.optionalOldSelf"),
            Value::Bool(true),
            "may not be set if rule does not use oldSelf",
        ));
    }
    let message_expression = match message_expression {
        None => None,
        Some(m) if m.trim().is_empty() => {
            errs.push(FieldError::required(
                format!("{at}.messageExpression"),
                "messageExpression must be non-empty if specified",
            ));
            None
        }
        Some(m) => match compile_expression(m, node, place.root, optional_old_self, Kind::String) {
            Ok(p) => {
                let cost = cost::estimate(p.expression(), node);
                if cost > cost::RULE_COST_LIMIT {
                    errs.push(FieldError::forbidden(
                        format!("{at}.messageExpression"),
                        cost::exceeds(
                            "estimated messageExpression cost",
                            cost,
                            cost::RULE_COST_LIMIT,
                        ),
                    ));
                }
                Some(p)
            }
            Err(e) => {
                let why = match e {
                    CompileError::Issues(issues) => {
                        format!("messageExpression compilation failed: {issues}")
                    }
                    CompileError::WrongKind => "must evaluate to a string".to_string(),
                };
                errs.push(FieldError::invalid(
                    format!("{at}.messageExpression"),
                    Value::String(m.to_string()),
                    why,
                ));
                None
            }
        },
    };
    if errs.len() != before {
        return None;
    }
    let message_cost = message_expression
        .as_ref()
        .map_or(0.0, |m| cost::estimate(m.expression(), node));
    Some(Rule {
        source: source.to_string(),
        program,
        message: message.map(|m| m.trim().to_string()),
        message_expression,
        reason,
        field_path,
        transition,
        optional_old_self: optional_old_self == Some(true),
        at: at.to_string(),
        cost,
        message_cost,
    })
}

/// The errors of the estimated costs of all the rules of a parsed schema (`root`, at
/// `base`); see `cost`.
pub(crate) fn cost_errors(root: &Structural, base: &str) -> Vec<FieldError> {
    cost::schema_errors(root, base)
}

/// Why an expression was refused.
enum CompileError {
    /// Parse or check issues, already printed with positions.
    Issues(String),
    /// The expression is known to give another kind than the one needed.
    WrongKind,
}

/// Parses `source` and checks it against the node's schema; `want` is the kind its value
/// must have (a bool for rules, a string for message expressions).
fn compile_expression(
    source: &str,
    node: &Structural,
    root: bool,
    optional_old_self: Option<bool>,
    want: Kind,
) -> Result<Program, CompileError> {
    // Refuse what would make the parser, the check or the interpreter recurse too deep,
    // before parsing (see `limits`).
    let unlocated = |msg: String| CompileError::Issues(format!("ERROR: <input>:-1:0: {msg}"));
    limits::check_source(source).map_err(unlocated)?;
    let program = ENV.compile(source).map_err(|errs| {
        CompileError::Issues(
            errs.errors
                .iter()
                .map(|e| caret(source, e.pos.0, e.pos.1, &e.msg))
                .collect::<Vec<_>>()
                .join("\n"),
        )
    })?;
    limits::check_tree(program.expression()).map_err(unlocated)?;
    let mut checker = Checker {
        source,
        program: &program,
        self_ty: Ty::Node(node, root),
        old_self_optional: optional_old_self == Some(true),
        scope: Vec::new(),
        errors: Vec::new(),
    };
    let ty = checker.expr(program.expression());
    if !checker.errors.is_empty() {
        return Err(CompileError::Issues(checker.errors.join("\n")));
    }
    if ty.kind().is_some_and(|k| k != want) {
        return Err(CompileError::WrongKind);
    }
    Ok(program)
}

/// An error at 1-based `line`/`col` of `source`, printed as Kubernetes prints CEL issues.
fn caret(source: &str, line: isize, col: isize, msg: &str) -> String {
    let mut out = format!("ERROR: <input>:{line}:{col}: {msg}");
    let text = usize::try_from(line - 1)
        .ok()
        .and_then(|l| source.lines().nth(l));
    if let Some(text) = text {
        let dots = usize::try_from(col - 1).unwrap_or(0);
        let _ = write!(out, "\n | {text}\n | {}^", ".".repeat(dots));
    }
    out
}

/// 1-based line and column (in characters) of byte `offset` in `source`.
fn line_col(source: &str, offset: usize) -> (isize, isize) {
    let offset = offset.min(source.len());
    let before = source.get(..offset).unwrap_or(source);
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let col = before[line_start..].chars().count() + 1;
    (line as isize, col as isize)
}

/// Whether the expression refers to `oldSelf` (outside a comprehension variable of that name).
fn mentions_old_self(e: &IdedExpr) -> bool {
    match &e.expr {
        Expr::Ident(name) => name == "oldSelf",
        Expr::Select(s) => mentions_old_self(&s.operand),
        Expr::Call(c) => {
            c.target.as_deref().is_some_and(mentions_old_self)
                || c.args.iter().any(mentions_old_self)
        }
        Expr::Comprehension(c) => [
            &c.iter_range,
            &c.accu_init,
            &c.loop_cond,
            &c.loop_step,
            &c.result,
        ]
        .into_iter()
        .any(mentions_old_self),
        Expr::List(l) => l.elements.iter().any(mentions_old_self),
        Expr::Map(m) => m.entries.iter().any(|entry| match &entry.expr {
            EntryExpr::MapEntry(me) => mentions_old_self(&me.key) || mentions_old_self(&me.value),
            EntryExpr::StructField(f) => mentions_old_self(&f.value),
        }),
        Expr::Struct(s) => s.entries.iter().any(|entry| match &entry.expr {
            EntryExpr::MapEntry(me) => mentions_old_self(&me.key) || mentions_old_self(&me.value),
            EntryExpr::StructField(f) => mentions_old_self(&f.value),
        }),
        Expr::Literal(_) | Expr::Unspecified => false,
    }
}

/// CEL's reserved words: a property named so is reached as `__word__`.
const RESERVED: [&str; 21] = [
    "true",
    "false",
    "null",
    "in",
    "as",
    "break",
    "const",
    "continue",
    "else",
    "for",
    "function",
    "if",
    "import",
    "let",
    "loop",
    "package",
    "namespace",
    "return",
    "var",
    "void",
    "while",
];

/// The CEL name of property `name`, as Kubernetes escapes it; `None` when it cannot be
/// reached from CEL.
pub(crate) fn escape(name: &str) -> Option<Cow<'_, str>> {
    if RESERVED.contains(&name) {
        return Some(Cow::Owned(format!("__{name}__")));
    }
    let mut chars = name.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || matches!(c, '_' | '.' | '-' | '/'));
    let rest_ok = chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-' | '/'));
    if !first_ok || !rest_ok {
        return None;
    }
    if !name.contains(['.', '-', '/']) && !name.contains("__") {
        return Some(Cow::Borrowed(name));
    }
    let mut out = String::with_capacity(name.len() + 8);
    let mut rest = name;
    while let Some(c) = rest.chars().next() {
        if let Some(r) = rest.strip_prefix("__") {
            out.push_str("__underscores__");
            rest = r;
            continue;
        }
        match c {
            '.' => out.push_str("__dot__"),
            '-' => out.push_str("__dash__"),
            '/' => out.push_str("__slash__"),
            c => out.push(c),
        }
        rest = &rest[c.len_utf8()..];
    }
    Some(Cow::Owned(out))
}

/// `fieldPath` (`.a.b`, `.a['x.y']`) checked against the node's schema and normalised to
/// the dotted form appended to error paths.
fn normalize_field_path(node: &Structural, fp: &str) -> Result<String, String> {
    let mut segments: Vec<String> = Vec::new();
    let mut rest = fp;
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix("['") {
            let end = r
                .find("']")
                .ok_or_else(|| format!("unterminated key in {fp:?}"))?;
            segments.push(r[..end].to_string());
            rest = &r[end + 2..];
        } else if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[']).unwrap_or(r.len());
            if end == 0 {
                return Err(format!("empty field name in {fp:?}"));
            }
            segments.push(r[..end].to_string());
            rest = &r[end..];
        } else {
            return Err(format!("expected '.' or \"['\" in {fp:?}"));
        }
    }
    if segments.is_empty() {
        return Err("must not be empty".to_string());
    }
    let mut s = node;
    for seg in &segments {
        s = match s.property(seg) {
            Some(p) => p,
            None if s.preserve_unknown => break,
            None => {
                return Err(format!(
                    "does not refer to a valid field: {seg:?} is not defined"
                ));
            }
        };
    }
    Ok(segments.join("."))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// A root schema whose `spec` has these properties and rules.
    fn spec_schema(props: Value, rules: Value) -> Structural {
        let schema = json!({"type": "object", "properties": {"spec": {
            "type": "object", "properties": props, "x-kubernetes-validations": rules}}});
        match Structural::from_json(&schema, "s") {
            Ok(s) => s,
            Err(errs) => panic!("{schema}: {errs:?}"),
        }
    }

    fn run(s: &Structural, new: Value, old: Option<Value>) -> Vec<String> {
        let new =
            json!({"apiVersion": "x.io/v1", "kind": "X", "metadata": {"name": "n"}, "spec": new});
        let old = old.map(
            |o| json!({"apiVersion": "x.io/v1", "kind": "X", "metadata": {"name": "n"}, "spec": o}),
        );
        validate(s, &new, old.as_ref())
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    fn compile_errors(schema: Value) -> Vec<String> {
        match Structural::from_json(&schema, "s") {
            Ok(_) => Vec::new(),
            Err(errs) => errs.iter().map(ToString::to_string).collect(),
        }
    }

    fn props() -> Value {
        json!({
            "sourceNamespace": {"type": "string"},
            "destinationNamespace": {"type": "string"},
            "destinationNamespaces": {"type": "array", "items": {"type": "string"}},
            "name": {"type": "string"},
            "replicas": {"type": "integer"},
            "ratio": {"type": "number"},
            "enabled": {"type": "boolean"},
            "port": {"x-kubernetes-int-or-string": true},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            "x-y": {"type": "string"},
            "in": {"type": "string"},
            // Bounded, as Kubernetes' cost estimate wants for rules that map a list twice.
            "ports": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                "maxItems": 100,
                "items": {"type": "object", "properties": {"name": {"type": "string"}, "port": {"type": "integer"}}}},
        })
    }

    /// (rule, spec, expected errors): each rule alone on `spec`, on create.
    #[test]
    fn each_feature_evaluates_as_kubernetes_does() {
        let failed = |rule: &str| {
            vec![format!(
                "spec: Invalid value: \"object\": failed rule: {rule}"
            )]
        };
        let none: Vec<String> = Vec::new();
        let cases: Vec<(&str, Value, Vec<String>)> = vec![
            // has()
            (
                "!has(self.destinationNamespace) || self.destinationNamespace != self.sourceNamespace",
                json!({"sourceNamespace": "a"}),
                none.clone(),
            ),
            (
                "!has(self.destinationNamespace) || self.destinationNamespace != self.sourceNamespace",
                json!({"sourceNamespace": "a", "destinationNamespace": "b"}),
                none.clone(),
            ),
            (
                "!has(self.destinationNamespace) || self.destinationNamespace != self.sourceNamespace",
                json!({"sourceNamespace": "a", "destinationNamespace": "a"}),
                failed(
                    "!has(self.destinationNamespace) || self.destinationNamespace != self.sourceNamespace",
                ),
            ),
            // in
            (
                "!has(self.destinationNamespaces) || !(self.sourceNamespace in self.destinationNamespaces)",
                json!({"sourceNamespace": "a", "destinationNamespaces": ["b", "c"]}),
                none.clone(),
            ),
            (
                "!has(self.destinationNamespaces) || !(self.sourceNamespace in self.destinationNamespaces)",
                json!({"sourceNamespace": "a", "destinationNamespaces": ["b", "a"]}),
                failed(
                    "!has(self.destinationNamespaces) || !(self.sourceNamespace in self.destinationNamespaces)",
                ),
            ),
            (
                "'team' in self.labels",
                json!({"labels": {"team": "x"}}),
                none.clone(),
            ),
            (
                "'team' in self.labels",
                json!({"labels": {}}),
                failed("'team' in self.labels"),
            ),
            // size()
            (
                "size(self.name) <= 5",
                json!({"name": "short"}),
                none.clone(),
            ),
            (
                "size(self.name) <= 5",
                json!({"name": "longer"}),
                failed("size(self.name) <= 5"),
            ),
            (
                "self.destinationNamespaces.size() > 0",
                json!({"destinationNamespaces": []}),
                failed("self.destinationNamespaces.size() > 0"),
            ),
            (
                "size(self.labels) == 1",
                json!({"labels": {"a": "b"}}),
                none.clone(),
            ),
            // macros
            (
                "self.destinationNamespaces.all(n, n.startsWith('team-'))",
                json!({"destinationNamespaces": ["team-a", "team-b"]}),
                none.clone(),
            ),
            (
                "self.destinationNamespaces.all(n, n.startsWith('team-'))",
                json!({"destinationNamespaces": ["team-a", "other"]}),
                failed("self.destinationNamespaces.all(n, n.startsWith('team-'))"),
            ),
            (
                "self.destinationNamespaces.exists(n, n == 'prod')",
                json!({"destinationNamespaces": ["dev", "prod"]}),
                none.clone(),
            ),
            (
                "self.destinationNamespaces.exists_one(n, n == 'prod')",
                json!({"destinationNamespaces": ["prod", "prod"]}),
                failed("self.destinationNamespaces.exists_one(n, n == 'prod')"),
            ),
            (
                "self.ports.map(p, p.port).all(x, x > 0)",
                json!({"ports": [{"name": "a", "port": 1}]}),
                none.clone(),
            ),
            (
                "self.ports.filter(p, p.port > 100).size() == 0",
                json!({"ports": [{"name": "a", "port": 443}]}),
                failed("self.ports.filter(p, p.port > 100).size() == 0"),
            ),
            (
                "self.labels.all(k, self.labels[k].size() < 4)",
                json!({"labels": {"a": "abc", "b": "abcd"}}),
                failed("self.labels.all(k, self.labels[k].size() < 4)"),
            ),
            // comparisons: int, double, bool, string order
            (
                "self.replicas >= 1 && self.replicas <= 10",
                json!({"replicas": 3}),
                none.clone(),
            ),
            (
                "self.replicas >= 1 && self.replicas <= 10",
                json!({"replicas": 11}),
                failed("self.replicas >= 1 && self.replicas <= 10"),
            ),
            ("self.ratio < 0.5", json!({"ratio": 0}), none.clone()),
            (
                "self.enabled == true",
                json!({"enabled": false}),
                failed("self.enabled == true"),
            ),
            ("self.name < 'm'", json!({"name": "abc"}), none.clone()),
            // string functions
            (
                "self.name.endsWith('-x') && self.name.contains('a')",
                json!({"name": "a-x"}),
                none.clone(),
            ),
            (
                "self.name.matches('^[a-z]+$')",
                json!({"name": "Abc"}),
                failed("self.name.matches('^[a-z]+$')"),
            ),
            (
                "self.name.lowerAscii() == 'abc'",
                json!({"name": "ABC"}),
                none.clone(),
            ),
            (
                "self.name.upperAscii() == 'ABC' && self.name.indexOf('b') == 1",
                json!({"name": "abc"}),
                none.clone(),
            ),
            (
                "self.name.split('.').size() == 2",
                json!({"name": "a.b"}),
                none.clone(),
            ),
            (
                "self.name.trim() == 'a' && self.name.replace(' ', '') == 'a'",
                json!({"name": " a "}),
                none.clone(),
            ),
            (
                "self.name.substring(1) == 'bc'",
                json!({"name": "abc"}),
                none.clone(),
            ),
            // optionals and the lists extension
            (
                "self.labels.?team.orValue('none') == 'none'",
                json!({"labels": {}}),
                none.clone(),
            ),
            (
                "self.destinationNamespaces.distinct().size() == self.destinationNamespaces.size()",
                json!({"destinationNamespaces": ["a", "b", "a"]}),
                failed(
                    "self.destinationNamespaces.distinct().size() == self.destinationNamespaces.size()",
                ),
            ),
            (
                "self.destinationNamespaces.join(',') == 'a,b'",
                json!({"destinationNamespaces": ["a", "b"]}),
                none.clone(),
            ),
            // Kubernetes' list and regex functions
            (
                "self.ports.map(p, p.port).isSorted()",
                json!({"ports": [{"name": "a", "port": 1}, {"name": "b", "port": 2}]}),
                none.clone(),
            ),
            (
                "self.destinationNamespaces.isSorted()",
                json!({"destinationNamespaces": ["b", "a"]}),
                failed("self.destinationNamespaces.isSorted()"),
            ),
            (
                "self.ports.map(p, p.port).sum() <= 10",
                json!({"ports": [{"name": "a", "port": 4}, {"name": "b", "port": 7}]}),
                failed("self.ports.map(p, p.port).sum() <= 10"),
            ),
            (
                "[1.5, 2.5].sum() == 4.0 && [].sum() == 0",
                json!({}),
                none.clone(),
            ),
            (
                "self.ports.map(p, p.port).min() == 2 && self.ports.map(p, p.port).max() == 9",
                json!({"ports": [{"name": "a", "port": 9}, {"name": "b", "port": 2}]}),
                none.clone(),
            ),
            (
                "self.destinationNamespaces.indexOf('b') == 1 && self.destinationNamespaces.lastIndexOf('a') == 2 && self.destinationNamespaces.indexOf('z') == -1",
                json!({"destinationNamespaces": ["a", "b", "a"]}),
                none.clone(),
            ),
            (
                "self.name.find('[0-9]+') == '42' && self.name.findAll('[a-z]') == ['a', 'b'] && self.name.findAll('[a-z]', 1) == ['a']",
                json!({"name": "a42b"}),
                none.clone(),
            ),
            // int-or-string, escaped names
            (
                "type(self.port) == int ? self.port > 0 : self.port.endsWith('%')",
                json!({"port": 80}),
                none.clone(),
            ),
            (
                "type(self.port) == int ? self.port > 0 : self.port.endsWith('%')",
                json!({"port": "50"}),
                failed("type(self.port) == int ? self.port > 0 : self.port.endsWith('%')"),
            ),
            (
                "self.x__dash__y == 'v' && self.__in__ == 'w'",
                json!({"x-y": "v", "in": "w"}),
                none.clone(),
            ),
        ];
        for (rule, spec, want) in cases {
            let s = spec_schema(props(), json!([{"rule": rule}]));
            assert_eq!(run(&s, spec.clone(), None), want, "{rule} on {spec}");
        }
    }

    #[test]
    fn message_message_expression_field_path_and_reason_shape_the_error() {
        let cases: Vec<(Value, &str)> = vec![
            (
                json!({"rule": "self.replicas < 3", "message": "  too many  "}),
                "spec: Invalid value: \"object\": too many",
            ),
            (
                json!({"rule": "self.replicas < 3", "messageExpression": "'replicas is ' + string(self.replicas)"}),
                "spec: Invalid value: \"object\": replicas is 5",
            ),
            // A messageExpression that fails falls back to the message.
            (
                json!({"rule": "self.replicas < 3", "message": "m", "messageExpression": "self.nope2"}),
                "",
            ),
            (
                json!({"rule": "self.replicas < 3", "message": "m", "messageExpression": "'' "}),
                "spec: Invalid value: \"object\": m",
            ),
            (
                json!({"rule": "self.replicas < 3", "fieldPath": ".replicas", "message": "m"}),
                "spec.replicas: Invalid value: \"object\": m",
            ),
            (
                json!({"rule": "self.replicas < 3", "fieldPath": ".labels['a.b']", "message": "m"}),
                "spec.labels.a.b: Invalid value: \"object\": m",
            ),
            (
                json!({"rule": "self.replicas < 3", "reason": "FieldValueForbidden", "message": "m"}),
                "spec: Forbidden: m",
            ),
            (
                json!({"rule": "self.replicas < 3", "reason": "FieldValueRequired", "message": "m"}),
                "spec: Required value: m",
            ),
            (
                json!({"rule": "self.replicas < 3", "reason": "FieldValueDuplicate", "message": "m"}),
                "spec: Duplicate value: \"object\"",
            ),
        ];
        for (rule, want) in cases {
            let schema = json!({"type": "object", "properties": {"spec": {
                "type": "object", "properties": props(), "x-kubernetes-validations": [rule.clone()]}}});
            let s = match Structural::from_json(&schema, "s") {
                Ok(s) => s,
                Err(errs) if want.is_empty() => {
                    // An undefined field in a messageExpression is a compile error.
                    assert!(
                        errs[0]
                            .to_string()
                            .contains("messageExpression compilation failed"),
                        "{errs:?}"
                    );
                    continue;
                }
                Err(errs) => panic!("{rule}: {errs:?}"),
            };
            let got = run(&s, json!({"replicas": 5}), None);
            assert_eq!(got, vec![want.to_string()], "{rule}");
        }
    }

    #[test]
    fn rules_at_the_root_report_nil_and_see_apiversion_kind_and_name() {
        let schema = json!({"type": "object",
            "x-kubernetes-validations": [
                {"rule": "self.metadata.name.startsWith('n')"},
                {"rule": "self.kind == 'X' && self.apiVersion == 'x.io/v1'"},
                {"rule": "has(self.spec)", "message": "spec is required"}],
            "properties": {"spec": {"type": "object", "properties": {}}}});
        let s = Structural::from_json(&schema, "s").expect("structural");
        let obj = json!({"apiVersion": "x.io/v1", "kind": "X", "metadata": {"name": "m"}});
        let got: Vec<String> = validate(&s, &obj, None)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            got,
            [
                "<nil>: Invalid value: \"object\": failed rule: self.metadata.name.startsWith('n')",
                "<nil>: Invalid value: \"object\": spec is required",
            ]
        );
    }

    #[test]
    fn transition_rules_run_only_on_update_with_the_old_value() {
        let s = spec_schema(
            props(),
            json!([{"rule": "self.name == oldSelf.name", "message": "name is immutable"}]),
        );
        assert_eq!(run(&s, json!({"name": "a"}), None), Vec::<String>::new());
        assert_eq!(
            run(&s, json!({"name": "a"}), Some(json!({"name": "a"}))),
            Vec::<String>::new()
        );
        assert_eq!(
            run(&s, json!({"name": "b"}), Some(json!({"name": "a"}))),
            ["spec: Invalid value: \"object\": name is immutable"]
        );
        // A field rule whose old value is absent is skipped.
        let field = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "name": {"type": "string", "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "immutable"}]}}}}});
        let s = Structural::from_json(&field, "s").expect("structural");
        assert_eq!(
            run(&s, json!({"name": "b"}), Some(json!({}))),
            Vec::<String>::new()
        );
        assert_eq!(
            run(&s, json!({"name": "b"}), Some(json!({"name": "a"}))),
            ["spec.name: Invalid value: \"string\": immutable"]
        );
    }

    #[test]
    fn rules_do_not_recheck_values_an_update_leaves_unchanged() {
        let s = spec_schema(
            props(),
            json!([{"rule": "self.replicas < 3", "message": "too many"},
                   {"rule": "self.replicas <= oldSelf.replicas", "message": "no growth"}]),
        );
        // Created before the rule, say: unchanged on update, so only the transition rule runs.
        assert_eq!(
            run(&s, json!({"replicas": 5}), Some(json!({"replicas": 5}))),
            Vec::<String>::new()
        );
        assert_eq!(
            run(&s, json!({"replicas": 6}), Some(json!({"replicas": 5}))),
            [
                "spec: Invalid value: \"object\": too many",
                "spec: Invalid value: \"object\": no growth"
            ]
        );
        // Items of an unchanged atomic list are unchanged too.
        let items = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "tags": {"type": "array", "items": {"type": "string",
                "x-kubernetes-validations": [{"rule": "self.size() < 3"}]}}}}}});
        let s = Structural::from_json(&items, "s").expect("structural");
        let tags = json!({"tags": ["long"]});
        assert_eq!(
            run(&s, tags.clone(), Some(tags.clone())),
            Vec::<String>::new()
        );
        assert_eq!(
            run(&s, json!({"tags": ["long", "x"]}), Some(tags)).len(),
            1,
            "a changed list is checked again"
        );
    }

    #[test]
    fn defaults_must_pass_the_rules_of_their_node() {
        let schema = |default: Value| {
            json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
                "mode": {"type": "string", "default": default,
                    "x-kubernetes-validations": [{"rule": "self.startsWith('m-')", "message": "mode starts with m-"}]},
                "window": {"type": "object", "default": {"from": 5, "to": 1},
                    "properties": {"from": {"type": "integer"}, "to": {"type": "integer"}},
                    "x-kubernetes-validations": [{"rule": "self.from <= self.to", "message": "from before to"}]}}}}})
        };
        assert_eq!(
            compile_errors(schema(json!("fast"))),
            [
                "s.properties[spec].properties[mode].default: Invalid value: \"string\": mode starts with m-",
                "s.properties[spec].properties[window].default: Invalid value: \"object\": from before to",
            ]
        );
    }

    #[test]
    fn optional_old_self_runs_on_create_with_an_optional() {
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "replicas": {"type": "integer", "x-kubernetes-validations": [
                {"rule": "!oldSelf.hasValue() || self >= oldSelf.value()", "optionalOldSelf": true,
                 "message": "may not shrink"},
                {"rule": "oldSelf.hasValue() || self < 100", "optionalOldSelf": true, "message": "start small"}]}}}}});
        let s = Structural::from_json(&schema, "s").expect("structural");
        assert_eq!(
            run(&s, json!({"replicas": 200}), None),
            ["spec.replicas: Invalid value: \"integer\": start small"]
        );
        assert_eq!(run(&s, json!({"replicas": 5}), None), Vec::<String>::new());
        assert_eq!(
            run(&s, json!({"replicas": 5}), Some(json!({"replicas": 3}))),
            Vec::<String>::new()
        );
        assert_eq!(
            run(&s, json!({"replicas": 2}), Some(json!({"replicas": 3}))),
            ["spec.replicas: Invalid value: \"integer\": may not shrink"]
        );
    }

    #[test]
    fn list_map_items_correlate_with_the_old_item_of_the_same_key() {
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "ports": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                "items": {"type": "object", "properties": {"name": {"type": "string"}, "port": {"type": "integer"}},
                    "x-kubernetes-validations": [{"rule": "self.port == oldSelf.port", "message": "port is immutable"}]}}}}}});
        let s = Structural::from_json(&schema, "s").expect("structural");
        let old = json!({"ports": [{"name": "a", "port": 1}, {"name": "b", "port": 2}]});
        let new = json!({"ports": [{"name": "b", "port": 3}, {"name": "c", "port": 9}, {"name": "a", "port": 1}]});
        assert_eq!(
            run(&s, new, Some(old)),
            ["spec.ports[0]: Invalid value: \"object\": port is immutable"]
        );
    }

    #[test]
    fn evaluation_errors_are_causes_not_panics() {
        let s = spec_schema(props(), json!([{"rule": "self.name == 'a'"}]));
        assert_eq!(
            run(&s, json!({}), None),
            [
                "spec: Invalid value: \"object\": no such key: name evaluating rule: self.name == 'a'"
            ]
        );
        let s = spec_schema(
            props(),
            json!([{"rule": "self.port > 1", "message": "port"}]),
        );
        assert_eq!(
            run(&s, json!({"port": "x"}), None),
            [
                "spec: Invalid value: \"object\": 'no such overload': call arguments did not match a supported operator, function or macro signature for rule: port"
            ]
        );
        let arithmetic = [
            (
                "self.replicas / 0 == 1",
                json!({"replicas": 1}),
                "division by zero",
            ),
            (
                "self.replicas % 0 == 1",
                json!({"replicas": 1}),
                "modulus by zero",
            ),
            (
                "self.replicas - 1 < 0",
                json!({"replicas": i64::MIN}),
                "integer overflow",
            ),
            (
                "self.destinationNamespaces[3] == ''",
                json!({"destinationNamespaces": []}),
                "index out of bounds: 3",
            ),
            (
                "self.name.substring(9) == ''",
                json!({"name": "a"}),
                "error executing function 'substring': index out of range: 9",
            ),
        ];
        for (rule, spec, why) in arithmetic {
            let s = spec_schema(props(), json!([{"rule": rule}]));
            assert_eq!(
                run(&s, spec, None),
                [format!(
                    "spec: Invalid value: \"object\": {why} evaluating rule: {rule}"
                )]
            );
        }
        // A result that is not a bool (possible with int-or-string) fails the rule.
        let s = spec_schema(props(), json!([{"rule": "self.port"}]));
        assert_eq!(
            run(&s, json!({"port": "x"}), None),
            ["spec: Invalid value: \"object\": failed rule: self.port"]
        );
    }

    #[test]
    fn rules_that_do_not_compile_are_schema_errors() {
        let on_spec = |rule: Value| {
            json!({"type": "object", "properties": {"spec": {"type": "object", "properties": props(),
                "x-kubernetes-validations": [rule]}}})
        };
        let at = "s.properties[spec].x-kubernetes-validations[0]";
        let cases: Vec<(Value, String)> = vec![
            (on_spec(json!({"rule": "self.name ==="})),
             format!("{at}.rule: Invalid value: \"self.name ===\": compilation failed: ERROR: <input>:1:")),
            (on_spec(json!({"rule": "self.nmae == 'a'"})),
             format!("{at}.rule: Invalid value: \"self.nmae == 'a'\": compilation failed: ERROR: <input>:1:5: undefined field 'nmae'\n | self.nmae == 'a'\n | ....^")),
            (on_spec(json!({"rule": "has(self.nope)"})),
             format!("{at}.rule: Invalid value: \"has(self.nope)\": compilation failed: ERROR: <input>:1:")),
            (on_spec(json!({"rule": "self.name.first == 'a'"})),
             format!("{at}.rule: Invalid value: \"self.name.first == 'a'\": compilation failed: ERROR: <input>:1:10: type 'string' does not support field selection")),
            (on_spec(json!({"rule": "self.ports.all(p, p.nmae != '')"})),
             format!("{at}.rule: Invalid value: \"self.ports.all(p, p.nmae != '')\": compilation failed: ERROR: <input>:1:20: undefined field 'nmae'")),
            (on_spec(json!({"rule": "other == 1"})),
             format!("{at}.rule: Invalid value: \"other == 1\": compilation failed: ERROR: <input>:1:1: undeclared reference to 'other' (in container '')")),
            (on_spec(json!({"rule": ""})), format!("{at}.rule: Required value: rule is not specified")),
            (on_spec(json!({"rule": "true", "reason": "Bad"})),
             format!("{at}.reason: Unsupported value: \"Bad\": supported values: \"FieldValueInvalid\", \"FieldValueForbidden\", \"FieldValueRequired\", \"FieldValueDuplicate\"")),
            (on_spec(json!({"rule": "true", "optionalOldSelf": true})),
             format!("{at}.optionalOldSelf: Invalid value: true: may not be set if rule does not use oldSelf")),
            (on_spec(json!({"rule": "true", "fieldPath": ".nope"})),
             format!("{at}.fieldPath: Invalid value: \".nope\": fieldPath must be a valid path")),
            (on_spec(json!({"rule": "true", "message": "a\nb"})),
             format!("{at}.message: Invalid value: \"a\\nb\": message must not contain line breaks")),
            (on_spec(json!({"rule": "true", "messageExpression": "'a' +"})),
             format!("{at}.messageExpression: Invalid value: \"'a' +\": messageExpression compilation failed: ERROR")),
            (json!({"type": "object", "properties": {"l": {"type": "array",
                "items": {"type": "string", "x-kubernetes-validations": [{"rule": "self == oldSelf"}]}}}}),
             "s.properties[l].items.x-kubernetes-validations[0].rule: Invalid value: \"self == oldSelf\": oldSelf cannot be used on the uncorrelatable portion of the schema within s.properties[l]".to_string()),
            (json!({"type": "object", "properties": {"n": {"type": "integer",
                "allOf": [{"x-kubernetes-validations": [{"rule": "true"}]}]}}}),
             "s.properties[n].allOf[0].x-kubernetes-validations: Forbidden: must be empty to be structural".to_string()),
        ];
        for (schema, want) in cases {
            let got = compile_errors(schema.clone());
            assert!(
                got.iter().any(|g| g.starts_with(&want)),
                "{schema}\nwant: {want}\ngot:  {got:#?}"
            );
        }
    }

    #[test]
    fn rules_deeper_or_longer_than_kubernetes_allows_are_schema_errors() {
        // Issue 11, defect 3: such rules used to overflow the stack when compiled or run.
        let at = "s.properties[spec].x-kubernetes-validations[0]";
        let too_deep = "ERROR: <input>:-1:0: expression recursion limit exceeded: 250";
        let cases = [
            (
                json!({"rule": format!("self.name{} == 'a'", ".x".repeat(1_000))}),
                format!("{at}.rule"),
                format!("compilation failed: {too_deep}"),
            ),
            (
                json!({"rule": "true", "messageExpression": format!("'a'{}", " + 'a'".repeat(300))}),
                format!("{at}.messageExpression"),
                format!("messageExpression compilation failed: {too_deep}"),
            ),
            (
                json!({"rule": "x".repeat(100_001)}),
                format!("{at}.rule"),
                "compilation failed: ERROR: <input>:-1:0: expression code point size exceeds limit: size: 100001, limit 100000".to_string(),
            ),
        ];
        for (rule, field, message) in cases {
            let schema = json!({"type": "object", "properties": {"spec": {"type": "object",
                "properties": props(), "x-kubernetes-validations": [rule]}}});
            let errs = Structural::from_json(&schema, "s").expect_err("refused");
            assert_eq!(errs.len(), 1, "{errs:?}");
            assert_eq!(errs[0].field, field);
            assert!(errs[0].to_string().ends_with(&message), "{}", errs[0]);
        }
    }

    #[test]
    fn rules_that_compile_are_accepted_with_their_schema() {
        let rules = [
            "self.ports.all(p, p.name != '' && p.port > 0)",
            "self.labels.all(k, k.startsWith('a') && self.labels[k] != '')",
            "self.labels.?team.orValue('') != 'x'",
            "[1, 2].exists(x, x == 2) && {'a': 1}.a == 1",
            "self.destinationNamespaces.map(n, n.size()).all(s, s > 0)",
            "optional.of(1).hasValue()",
            "type(self.port) == string || int(self.port) > 0",
            "self.ports.exists(p, has(p.port))",
        ];
        for rule in rules {
            let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": props(),
                "x-kubernetes-validations": [{"rule": rule}]}}});
            assert_eq!(compile_errors(schema), Vec::<String>::new(), "{rule}");
        }
    }

    #[test]
    fn property_names_are_escaped_as_kubernetes_escapes_them() {
        let cases = [
            ("name", Some("name")),
            ("x-y", Some("x__dash__y")),
            ("a.b/c", Some("a__dot__b__slash__c")),
            ("a__b", Some("a__underscores__b")),
            ("namespace", Some("__namespace__")),
            ("1abc", None),
            ("a b", None),
        ];
        for (name, want) in cases {
            assert_eq!(escape(name).as_deref(), want, "{name}");
        }
    }

    #[test]
    fn schemas_without_rules_have_nothing_to_evaluate() {
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": props()}}});
        let s = Structural::from_json(&schema, "s").expect("structural");
        assert!(!s.has_rules());
        let s = spec_schema(props(), json!([{"rule": "true"}]));
        assert!(s.has_rules() && s.rules.is_none());
    }
}
