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
mod tests;
