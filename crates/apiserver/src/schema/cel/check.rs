//! A light static check of a parsed rule against the node's schema, standing in for the
//! type checker the `cel` crate does not have.
//!
//! Types are inferred bottom-up where the schema or a literal tells them, and `Dyn`
//! elsewhere (int-or-string and untyped nodes, unknown functions, optionals). What it
//! reports, in cel-go's words: `undefined field 'x'`, `type 'string' does not support field
//! selection`, `undeclared reference to 'x' (in container '')`, and `found no matching
//! overload for '_+_' applied to '(string, int)'` for operators and well-known functions
//! whose operand types are both known and wrong. Anything it cannot tell is accepted and
//! left to evaluation, so it never rejects a rule Kubernetes accepts for a typing reason it
//! does not model.

use cel::Program;
use cel::common::ast::{EntryExpr, Expr, IdedExpr, LiteralValue};

use super::{caret, escape, line_col};
use crate::schema::{Additional, JsonType, Structural};

/// A CEL value kind the checker can be sure of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    Bool,
    Int,
    Uint,
    Double,
    String,
    Bytes,
    List,
    Map,
    Null,
}

impl Kind {
    fn numeric(self) -> bool {
        matches!(self, Kind::Int | Kind::Uint | Kind::Double)
    }
}

/// What the checker knows of an expression.
#[derive(Clone, Copy)]
pub(super) enum Ty<'s> {
    /// A value described by this schema node (`true` at the schema root).
    Node(&'s Structural, bool),
    /// The `metadata` of the root or an embedded resource: only `name` and `generateName`.
    Meta,
    /// A value of a known kind with no schema.
    Known(Kind),
    /// Anything.
    Dyn,
}

impl Ty<'_> {
    pub(super) fn kind(self) -> Option<Kind> {
        match self {
            Ty::Node(s, root) => {
                if root || s.embedded {
                    return Some(Kind::Map);
                }
                if s.int_or_string {
                    return None;
                }
                match s.ty? {
                    JsonType::Object => Some(Kind::Map),
                    JsonType::Array => Some(Kind::List),
                    JsonType::String => Some(Kind::String),
                    JsonType::Integer => Some(Kind::Int),
                    JsonType::Number => Some(Kind::Double),
                    JsonType::Boolean => Some(Kind::Bool),
                }
            }
            Ty::Meta => Some(Kind::Map),
            Ty::Known(k) => Some(k),
            Ty::Dyn => None,
        }
    }

    /// The type's name as cel-go prints it (`list(string)`, `map(string, int)`).
    pub(super) fn name(self) -> String {
        let simple = |k: Kind| match k {
            Kind::Bool => "bool",
            Kind::Int => "int",
            Kind::Uint => "uint",
            Kind::Double => "double",
            Kind::String => "string",
            Kind::Bytes => "bytes",
            Kind::List => "list(dyn)",
            Kind::Map => "map(dyn, dyn)",
            Kind::Null => "null_type",
        };
        match self {
            Ty::Node(s, false) if !s.embedded => match s.ty {
                Some(JsonType::Array) => format!("list({})", element(s).name()),
                Some(JsonType::Object) => match &s.additional {
                    Additional::Schema(a) => format!("map(string, {})", Ty::Node(a, false).name()),
                    _ => "object".to_string(),
                },
                _ => self.kind().map_or("dyn", simple).to_string(),
            },
            Ty::Node(..) | Ty::Meta => "object".to_string(),
            _ => self.kind().map_or("dyn", simple).to_string(),
        }
    }
}

/// The schema of a list's items or a map's values.
fn element(s: &Structural) -> Ty<'_> {
    if let Some(items) = s.items.as_deref() {
        return Ty::Node(items, false);
    }
    if let Additional::Schema(a) = &s.additional {
        return Ty::Node(a, false);
    }
    Ty::Dyn
}

/// Idents that are not variables: type names and function namespaces.
const KNOWN_IDENTS: [&str; 19] = [
    "int",
    "uint",
    "double",
    "bool",
    "string",
    "bytes",
    "list",
    "map",
    "null_type",
    "type",
    "dyn",
    "optional",
    "strings",
    "lists",
    "math",
    "base64",
    "cel",
    "sets",
    "google",
];

/// Checks one expression; `errors` gets one caret-annotated issue per problem.
pub(super) struct Checker<'s, 'p> {
    pub(super) source: &'s str,
    pub(super) program: &'p Program,
    pub(super) self_ty: Ty<'s>,
    pub(super) old_self_optional: bool,
    /// Comprehension variables in scope, with what is known of them.
    pub(super) scope: Vec<(String, Ty<'s>)>,
    pub(super) errors: Vec<String>,
}

impl<'s> Checker<'s, '_> {
    fn error_at(&mut self, e: &IdedExpr, msg: &str) {
        let (line, col) = self
            .program
            .source_info()
            .offset_for(e.id)
            .map(|(start, _)| line_col(self.source, start as usize))
            .unwrap_or((1, 1));
        self.errors.push(caret(self.source, line, col, msg));
    }

    fn no_overload(&mut self, e: &IdedExpr, func: &str, args: &[Ty<'s>], member: bool) {
        let names: Vec<String> = args.iter().map(|t| t.name()).collect();
        let applied = match names.split_first() {
            Some((target, rest)) if member => format!("{target}.({})", rest.join(", ")),
            _ => format!("({})", names.join(", ")),
        };
        self.error_at(
            e,
            &format!("found no matching overload for '{func}' applied to '{applied}'"),
        );
    }

    /// Checks `e` and returns what is known of its type.
    pub(super) fn expr(&mut self, e: &IdedExpr) -> Ty<'s> {
        match &e.expr {
            Expr::Ident(name) => self.ident(e, name),
            Expr::Select(sel) => {
                let operand = self.expr(&sel.operand);
                let t = self.select(e, operand, &sel.field);
                if sel.test { Ty::Known(Kind::Bool) } else { t }
            }
            Expr::Call(call) => {
                let target = call.target.as_deref().map(|t| self.expr(t));
                let args: Vec<Ty<'s>> = call.args.iter().map(|a| self.expr(a)).collect();
                self.call(e, &call.func_name, target, &args)
            }
            Expr::Comprehension(c) => {
                let range = self.expr(&c.iter_range);
                let accu = self.expr(&c.accu_init);
                let mark = self.scope.len();
                match (&c.iter_var2, range) {
                    // Two variables: index or key, then value.
                    (Some(v2), Ty::Node(s, _)) => {
                        self.scope.push((c.iter_var.clone(), Ty::Dyn));
                        self.scope.push((v2.clone(), element(s)));
                    }
                    (Some(v2), _) => {
                        self.scope.push((c.iter_var.clone(), Ty::Dyn));
                        self.scope.push((v2.clone(), Ty::Dyn));
                    }
                    (None, Ty::Node(s, _)) if s.ty == Some(JsonType::Array) => {
                        self.scope.push((c.iter_var.clone(), element(s)));
                    }
                    (None, Ty::Node(s, _)) if s.ty == Some(JsonType::Object) || s.embedded => {
                        self.scope
                            .push((c.iter_var.clone(), Ty::Known(Kind::String)));
                    }
                    (None, _) => self.scope.push((c.iter_var.clone(), Ty::Dyn)),
                }
                // The accumulator keeps the kind of its initial value (a bool for
                // all/exists, a list for map/filter).
                let accu_ty = match accu {
                    Ty::Known(k) => Ty::Known(k),
                    _ => Ty::Dyn,
                };
                self.scope.push((c.accu_var.clone(), accu_ty));
                self.expr(&c.loop_cond);
                self.expr(&c.loop_step);
                let result = self.expr(&c.result);
                self.scope.truncate(mark);
                match result {
                    Ty::Known(k) => Ty::Known(k),
                    _ => Ty::Dyn,
                }
            }
            Expr::List(l) => {
                for x in &l.elements {
                    self.expr(x);
                }
                Ty::Known(Kind::List)
            }
            Expr::Map(m) => {
                for entry in &m.entries {
                    if let EntryExpr::MapEntry(me) = &entry.expr {
                        self.expr(&me.key);
                        self.expr(&me.value);
                    }
                }
                Ty::Known(Kind::Map)
            }
            Expr::Struct(s) => {
                for entry in &s.entries {
                    match &entry.expr {
                        EntryExpr::StructField(f) => {
                            self.expr(&f.value);
                        }
                        EntryExpr::MapEntry(me) => {
                            self.expr(&me.key);
                            self.expr(&me.value);
                        }
                    }
                }
                Ty::Dyn
            }
            Expr::Literal(l) => Ty::Known(match l {
                LiteralValue::Boolean(_) => Kind::Bool,
                LiteralValue::Bytes(_) => Kind::Bytes,
                LiteralValue::Double(_) => Kind::Double,
                LiteralValue::Int(_) => Kind::Int,
                LiteralValue::Null => Kind::Null,
                LiteralValue::String(_) => Kind::String,
                LiteralValue::UInt(_) => Kind::Uint,
            }),
            Expr::Unspecified => Ty::Dyn,
        }
    }

    fn ident(&mut self, e: &IdedExpr, name: &str) -> Ty<'s> {
        if let Some((_, t)) = self.scope.iter().rev().find(|(n, _)| n == name) {
            return *t;
        }
        match name {
            "self" => self.self_ty,
            "oldSelf" if self.old_self_optional => Ty::Dyn,
            "oldSelf" => self.self_ty,
            n if n.starts_with('@') || KNOWN_IDENTS.contains(&n) => Ty::Dyn,
            n => {
                self.error_at(
                    e,
                    &format!("undeclared reference to '{n}' (in container '')"),
                );
                Ty::Dyn
            }
        }
    }

    fn select(&mut self, e: &IdedExpr, operand: Ty<'s>, field: &str) -> Ty<'s> {
        let (s, root) = match operand {
            Ty::Dyn => return Ty::Dyn,
            Ty::Known(Kind::Map) => return Ty::Dyn,
            Ty::Known(_) => {
                let name = operand.name();
                self.error_at(
                    e,
                    &format!("type '{name}' does not support field selection"),
                );
                return Ty::Dyn;
            }
            Ty::Meta => {
                if field == "name" || field == "generateName" {
                    return Ty::Known(Kind::String);
                }
                self.error_at(e, &format!("undefined field '{field}'"));
                return Ty::Dyn;
            }
            Ty::Node(s, root) => (s, root),
        };
        if (root || s.embedded) && matches!(field, "apiVersion" | "kind") {
            return Ty::Known(Kind::String);
        }
        if (root || s.embedded) && field == "metadata" {
            return Ty::Meta;
        }
        if let Some((_, p)) = s
            .properties
            .iter()
            .find(|(name, _)| escape(name).as_deref() == Some(field))
        {
            return Ty::Node(p, false);
        }
        if let Additional::Schema(a) = &s.additional {
            return Ty::Node(a, false);
        }
        if s.preserve_unknown
            || s.int_or_string
            || matches!(s.additional, Additional::Bool(true))
            || s.ty.is_none()
        {
            return Ty::Dyn;
        }
        if s.ty == Some(JsonType::Object) {
            self.error_at(e, &format!("undefined field '{field}'"));
        } else {
            let name = operand.name();
            self.error_at(
                e,
                &format!("type '{name}' does not support field selection"),
            );
        }
        Ty::Dyn
    }

    /// The result of a call, reporting operands of the wrong kind where both are known.
    fn call(
        &mut self,
        e: &IdedExpr,
        func: &str,
        target: Option<Ty<'s>>,
        args: &[Ty<'s>],
    ) -> Ty<'s> {
        let kinds: Vec<Option<Kind>> = args.iter().map(|t| t.kind()).collect();
        let bool_ty = Ty::Known(Kind::Bool);
        match (func, target, kinds.as_slice()) {
            ("_&&_" | "_||_", None, [a, b]) => {
                if a.is_some_and(|k| k != Kind::Bool) || b.is_some_and(|k| k != Kind::Bool) {
                    self.no_overload(e, func, args, false);
                }
                bool_ty
            }
            ("!_", None, [a]) => {
                if a.is_some_and(|k| k != Kind::Bool) {
                    self.no_overload(e, func, args, false);
                }
                bool_ty
            }
            ("_==_" | "_!=_", None, [Some(a), Some(b)]) => {
                let ok =
                    a == b || (a.numeric() && b.numeric()) || *a == Kind::Null || *b == Kind::Null;
                if !ok {
                    self.no_overload(e, func, args, false);
                }
                bool_ty
            }
            ("_<_" | "_<=_" | "_>_" | "_>=_", None, [Some(a), Some(b)]) => {
                let ordered = |k: &Kind| !matches!(k, Kind::List | Kind::Map | Kind::Null);
                let ok = (a == b && ordered(a)) || (a.numeric() && b.numeric());
                if !ok {
                    self.no_overload(e, func, args, false);
                }
                bool_ty
            }
            ("_==_" | "_!=_" | "_<_" | "_<=_" | "_>_" | "_>=_" | "@not_strictly_false", ..) => {
                bool_ty
            }
            ("@in", None, [_, b]) => {
                if b.is_some_and(|k| !matches!(k, Kind::List | Kind::Map)) {
                    self.no_overload(e, func, args, false);
                }
                bool_ty
            }
            ("_+_", None, [Some(a), Some(b)]) => {
                let addable = matches!(
                    a,
                    Kind::Int | Kind::Uint | Kind::Double | Kind::String | Kind::Bytes | Kind::List
                );
                if a != b || !addable {
                    self.no_overload(e, func, args, false);
                    return Ty::Dyn;
                }
                Ty::Known(*a)
            }
            ("_-_" | "_*_" | "_/_" | "_%_", None, [Some(a), Some(b)]) => {
                let ok = a == b && a.numeric() && !(func == "_%_" && *a == Kind::Double);
                if !ok {
                    self.no_overload(e, func, args, false);
                    return Ty::Dyn;
                }
                Ty::Known(*a)
            }
            ("-_", None, [Some(a)]) => {
                if !matches!(a, Kind::Int | Kind::Double) {
                    self.no_overload(e, func, args, false);
                    return Ty::Dyn;
                }
                Ty::Known(*a)
            }
            ("_?_:_", None, [c, _, _]) => {
                if c.is_some_and(|k| k != Kind::Bool) {
                    self.no_overload(e, func, args, false);
                }
                match (kinds[1], kinds[2]) {
                    (Some(a), Some(b)) if a == b => Ty::Known(a),
                    _ => Ty::Dyn,
                }
            }
            ("size", None, [a]) => {
                self.sized(e, func, None, args, *a);
                Ty::Known(Kind::Int)
            }
            ("size", Some(t), []) => {
                self.sized(e, func, Some(t), args, t.kind());
                Ty::Known(Kind::Int)
            }
            ("startsWith" | "endsWith" | "contains" | "matches", Some(t), [arg]) => {
                self.string_member(e, func, t, args, &[*arg]);
                bool_ty
            }
            ("lowerAscii" | "upperAscii" | "trim", Some(t), []) => {
                self.string_member(e, func, t, args, &[]);
                Ty::Known(Kind::String)
            }
            ("int", None, [_]) => Ty::Known(Kind::Int),
            ("uint", None, [_]) => Ty::Known(Kind::Uint),
            ("double", None, [_]) => Ty::Known(Kind::Double),
            ("string", None, [_]) => Ty::Known(Kind::String),
            ("bool", None, [_]) => Ty::Known(Kind::Bool),
            ("bytes", None, [_]) => Ty::Known(Kind::Bytes),
            ("hasValue" | "isSorted", Some(_), _) => bool_ty,
            ("indexOf" | "lastIndexOf", Some(_), _) => Ty::Known(Kind::Int),
            ("find" | "join", Some(_), _) => Ty::Known(Kind::String),
            ("findAll" | "split", Some(_), _) => Ty::Known(Kind::List),
            // The list's items keep their schema.
            ("min" | "max" | "sum", Some(Ty::Node(s, _)), []) if s.ty == Some(JsonType::Array) => {
                element(s)
            }
            ("_[_]", None, [_, _]) => match args[0] {
                Ty::Node(s, _) => element(s),
                _ => Ty::Dyn,
            },
            _ => Ty::Dyn,
        }
    }

    fn sized(
        &mut self,
        e: &IdedExpr,
        func: &str,
        target: Option<Ty<'s>>,
        args: &[Ty<'s>],
        kind: Option<Kind>,
    ) {
        let ok = |k: Kind| matches!(k, Kind::String | Kind::Bytes | Kind::List | Kind::Map);
        if kind.is_some_and(|k| !ok(k)) {
            let all: Vec<Ty<'s>> = target.into_iter().chain(args.iter().copied()).collect();
            self.no_overload(e, func, &all, target.is_some());
        }
    }

    fn string_member(
        &mut self,
        e: &IdedExpr,
        func: &str,
        target: Ty<'s>,
        args: &[Ty<'s>],
        arg_kinds: &[Option<Kind>],
    ) {
        let bad_target = target.kind().is_some_and(|k| k != Kind::String);
        let bad_arg = arg_kinds
            .iter()
            .any(|k| k.is_some_and(|k| k != Kind::String));
        if bad_target || bad_arg {
            let all: Vec<Ty<'s>> = std::iter::once(target)
                .chain(args.iter().copied())
                .collect();
            self.no_overload(e, func, &all, true);
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::schema::Structural;

    /// The compile errors of `rule` on a `spec` with a few typed fields.
    fn issues(rule: &str) -> Vec<String> {
        let schema = json!({"type": "object", "properties": {"spec": {
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "replicas": {"type": "integer"},
                "ratio": {"type": "number"},
                "on": {"type": "boolean"},
                "tags": {"type": "array", "items": {"type": "string"}},
                "labels": {"type": "object", "additionalProperties": {"type": "integer"}},
                "port": {"x-kubernetes-int-or-string": true},
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
            },
            "x-kubernetes-validations": [{"rule": rule}]}}});
        match Structural::from_json(&schema, "s") {
            Ok(_) => Vec::new(),
            Err(errs) => errs.iter().map(|e| e.detail.clone()).collect(),
        }
    }

    #[test]
    fn well_typed_rules_pass() {
        let rules = [
            "self.name == 'a' && self.replicas > 1 && self.ratio < 0.5 && self.on",
            "self.replicas > 1.5 && self.ratio != 1",
            "self.tags.all(t, t.startsWith('x')) || size(self.tags) == 0",
            "self.labels.all(k, self.labels[k] > 0 && k.size() > 0)",
            "self.port == 80 || self.port == '80%'",
            "self.free.anything.goes == 1",
            "(self.replicas > 1 ? 'a' : 'b') == 'a'",
            "self.name + 'x' != 'y' && self.replicas + 1 > 2 && self.tags + ['a'] != []",
            "self.name.matches('^a') && !self.on",
            "self.tags.map(t, t.size()).exists(n, n > 2)",
            "type(self.port) == int",
            "self.name in self.tags && 'a' in self.labels",
            "self.replicas == null || has(self.name)",
        ];
        for rule in rules {
            assert_eq!(issues(rule), Vec::<String>::new(), "{rule}");
        }
    }

    #[test]
    fn ill_typed_rules_are_compile_errors() {
        let cases = [
            ("self.name", "cel expression must evaluate to a bool"),
            (
                "self.replicas + 1",
                "cel expression must evaluate to a bool",
            ),
            (
                "self.tags.map(t, t)",
                "cel expression must evaluate to a bool",
            ),
            (
                "self.name == 1",
                "found no matching overload for '_==_' applied to '(string, int)'",
            ),
            (
                "self.name + self.replicas == 'a'",
                "found no matching overload for '_+_' applied to '(string, int)'",
            ),
            (
                "self.ratio + 1 > 0.0",
                "found no matching overload for '_+_' applied to '(double, int)'",
            ),
            (
                "self.on && self.name",
                "found no matching overload for '_&&_' applied to '(bool, string)'",
            ),
            (
                "self.replicas.startsWith('a')",
                "found no matching overload for 'startsWith' applied to 'int.(string)'",
            ),
            (
                "size(self.replicas) > 0",
                "found no matching overload for 'size' applied to '(int)'",
            ),
            (
                "'a' in self.name",
                "found no matching overload for '@in' applied to '(string, string)'",
            ),
            (
                "self.tags.all(t, t > 1)",
                "found no matching overload for '_>_' applied to '(string, int)'",
            ),
            (
                "self.labels.all(k, self.labels[k] == 'x')",
                "found no matching overload for '_==_' applied to '(int, string)'",
            ),
            (
                "self.tags.name == 'a'",
                "type 'list(string)' does not support field selection",
            ),
            ("self.nope", "undefined field 'nope'"),
            ("x > 1", "undeclared reference to 'x' (in container '')"),
        ];
        for (rule, want) in cases {
            let got = issues(rule);
            assert!(
                got.iter().any(|g| g.contains(want)),
                "{rule}\nwant: {want}\ngot:  {got:#?}"
            );
        }
    }
}
