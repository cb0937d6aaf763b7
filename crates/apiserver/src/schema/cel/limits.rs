//! The limits a rule's text must meet before the `cel` crate sees it, so that no rule can
//! make kore's stack overflow: not when the CRD is written, not when a stored CRD is loaded at
//! start-up, and not when a custom object is validated.
//!
//! The crate's parser, the static check (`check`) and the interpreter all recurse once per
//! level of the expression tree, so a rule like `1 + 1 + … + 1 > 0` with 1,500 terms (a tree
//! 1,500 deep) overflowed a 2 MiB thread stack. The crate only limits the nesting of
//! parentheses and brackets (96); operator chains (`a + b + …`, `a == b == …`), member chains
//! (`a.b.c…`) and index chains (`a[0][0]…`) are built as deep trees by left recursion and were
//! not limited at all.
//!
//! Kubernetes (cel-go) refuses such rules when the CRD is written, with two parser limits that
//! kore copies:
//!
//! - [`MAX_CODE_POINTS`]: at most 100,000 characters (cel-go's `expressionSizeCodePointLimit`):
//!   `expression code point size exceeds limit: size: 100001, limit 100000`;
//! - [`MAX_DEPTH`]: a nesting depth of at most 250 (cel-go's `maxRecursionDepth`):
//!   `expression recursion limit exceeded: 250`.
//!
//! cel-go counts the depth of each grammar rule while it parses; kore cannot hook into the
//! crate's parser, so [`check_source`] measures the depth with a single pass over the tokens
//! **before** parsing, with an explicit stack (it never recurses). The measure is an upper
//! bound of the depth of the tree the crate builds: a chain of `n` operators counts `n`,
//! `&&`/`||` chains count their balanced depth (the crate, like cel-go, builds them as
//! balanced trees), a run of `!` or `-` counts at most two (pairs cancel), and each bracket
//! counts what the crate puts around its contents (a call up to six levels, as a
//! macro expands to comprehensions). Then [`check_tree`] checks the parsed tree against
//! the same limit, as a second line should the bound ever be wrong.
//!
//! With the tree at most 250 deep, compiling and evaluating a rule needs well under 1 MiB of
//! stack even in a debug build (the tests measure compile plus evaluation of 350-deep trees on
//! a 1 MiB thread); tokio's worker threads have 2 MiB.

use cel::common::ast::{EntryExpr, Expr, IdedExpr};

/// The longest rule (and `messageExpression`), in characters: cel-go's default
/// `expressionSizeCodePointLimit`, which Kubernetes keeps.
pub(crate) const MAX_CODE_POINTS: usize = 100_000;

/// The deepest expression tree: cel-go's default `maxRecursionDepth`, which Kubernetes keeps.
pub(crate) const MAX_DEPTH: usize = 250;

/// The message of a rule deeper than [`MAX_DEPTH`].
fn too_deep() -> String {
    format!("expression recursion limit exceeded: {MAX_DEPTH}")
}

/// Checks the size and nesting depth of `source` before it is parsed. The error is the
/// message cel-go gives (without its `ERROR: <input>:-1:0: ` prefix).
pub(crate) fn check_source(source: &str) -> Result<(), String> {
    let size = source.chars().count();
    if size > MAX_CODE_POINTS {
        return Err(format!(
            "expression code point size exceeds limit: size: {size}, limit {MAX_CODE_POINTS}"
        ));
    }
    if depth_bound(source) > MAX_DEPTH {
        return Err(too_deep());
    }
    Ok(())
}

/// Checks that the parsed tree is at most [`MAX_DEPTH`] deep. Its recursion stops at the
/// limit, so it is safe on any tree.
pub(crate) fn check_tree(e: &IdedExpr) -> Result<(), String> {
    if deeper_than(e, MAX_DEPTH) {
        Err(too_deep())
    } else {
        Ok(())
    }
}

/// Whether the tree below `e` (counting `e`) has more than `limit` levels.
fn deeper_than(e: &IdedExpr, limit: usize) -> bool {
    let Some(below) = limit.checked_sub(1) else {
        return true;
    };
    let deeper = |c: &IdedExpr| deeper_than(c, below);
    match &e.expr {
        Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => false,
        Expr::Select(s) => deeper(&s.operand),
        Expr::Call(c) => c.target.as_deref().is_some_and(deeper) || c.args.iter().any(deeper),
        Expr::Comprehension(c) => [
            &c.iter_range,
            &c.accu_init,
            &c.loop_cond,
            &c.loop_step,
            &c.result,
        ]
        .into_iter()
        .any(deeper),
        Expr::List(l) => l.elements.iter().any(deeper),
        Expr::Map(m) => m.entries.iter().any(|x| entry_deeper(x, below)),
        Expr::Struct(s) => s.entries.iter().any(|x| entry_deeper(x, below)),
    }
}

/// A map or message entry is a level of its own, above its key and value.
fn entry_deeper(entry: &cel::common::ast::IdedEntryExpr, limit: usize) -> bool {
    let Some(below) = limit.checked_sub(1) else {
        return true;
    };
    match &entry.expr {
        EntryExpr::MapEntry(me) => deeper_than(&me.key, below) || deeper_than(&me.value, below),
        EntryExpr::StructField(f) => deeper_than(&f.value, below),
    }
}

/// `⌈log2 n⌉`: the depth a balanced tree of `n` leaves adds.
fn ceil_log2(n: usize) -> usize {
    if n <= 1 {
        0
    } else {
        (usize::BITS - (n - 1).leading_zeros()) as usize
    }
}

/// The operands joined by one operator of the tightest kinds (arithmetic, comparison,
/// member access, indexing), with the brackets inside them.
#[derive(Default)]
struct Term {
    /// Operators seen: each may add a level.
    ops: usize,
    /// The deepest bracket inside the term, with what its node adds.
    child: usize,
    /// The unary operator of the current run (`!` or `-`) and how long the run is.
    run: Option<(char, usize)>,
}

impl Term {
    fn depth(&self) -> usize {
        self.ops + self.child + 1
    }
}

/// One element of a bracket (a list item, an argument, a map key or value): a ternary whose
/// parts are `||` chains of `&&` chains of terms.
#[derive(Default)]
struct Element {
    /// `?` seen: each conditional is a level.
    ternaries: usize,
    /// `?` still waiting for their `:`.
    pending: usize,
    /// The deepest finished ternary part.
    parts: usize,
    /// Finished `||` operands of the current part, and the deepest of them.
    ors: usize,
    or_max: usize,
    /// Finished `&&` operands of the current `||` operand, and the deepest of them.
    ands: usize,
    and_max: usize,
    term: Term,
}

impl Element {
    fn and_depth(&self) -> usize {
        ceil_log2(self.ands + 1) + self.and_max.max(self.term.depth())
    }

    fn or_depth(&self) -> usize {
        ceil_log2(self.ors + 1) + self.or_max.max(self.and_depth())
    }

    fn depth(&self) -> usize {
        self.ternaries + self.parts.max(self.or_depth())
    }

    /// `&&`: the current term is finished.
    fn next_and(&mut self) {
        self.and_max = self.and_max.max(self.term.depth());
        self.ands += 1;
        self.term = Term::default();
    }

    /// `||`: the current `&&` chain is finished.
    fn next_or(&mut self) {
        self.or_max = self.or_max.max(self.and_depth());
        self.ors += 1;
        self.ands = 0;
        self.and_max = 0;
        self.term = Term::default();
    }

    /// `?` or `:` of a conditional: the current part is finished.
    fn next_part(&mut self) {
        self.parts = self.parts.max(self.or_depth());
        self.ors = 0;
        self.or_max = 0;
        self.ands = 0;
        self.and_max = 0;
        self.term = Term::default();
    }
}

/// An open bracket (or the whole rule).
struct Group {
    /// The closing character, `None` for the whole rule.
    close: Option<char>,
    /// The levels the bracket's node adds above its contents.
    weight: usize,
    /// Whether the bracket indexes what precedes it (`a[0]`), which chains like an operator.
    index: bool,
    /// The deepest finished element.
    done: usize,
    element: Element,
}

impl Group {
    fn new(close: Option<char>, weight: usize, index: bool) -> Group {
        Group {
            close,
            weight,
            index,
            done: 0,
            element: Element::default(),
        }
    }

    fn depth(&self) -> usize {
        self.done.max(self.element.depth())
    }

    /// `,` (or `:` between a map key and its value): the current element is finished.
    fn next_element(&mut self) {
        self.done = self.done.max(self.element.depth());
        self.element = Element::default();
    }
}

/// Folds the innermost open group into its parent, as its closing bracket does.
fn close_group(stack: &mut Vec<Group>) {
    if stack.len() < 2 {
        return;
    }
    let Some(g) = stack.pop() else {
        return;
    };
    let d = g.depth() + g.weight;
    if let Some(parent) = stack.last_mut() {
        let term = &mut parent.element.term;
        term.child = term.child.max(d);
        if g.index {
            term.ops += 1;
        }
        term.run = None;
    }
}

/// The kinds of token the scan tells apart.
#[derive(Clone, Copy, PartialEq)]
enum Prev {
    /// Start of the rule, an operator or an opening bracket: an operand comes next.
    Operator,
    /// An identifier: a `(` after it is a call.
    Ident,
    /// A literal or a closing bracket: it ends an operand.
    Operand,
}

/// An upper bound of the depth of the tree the `cel` crate builds from `source`, computed in
/// one pass without recursion. Text that does not lex (an unterminated string, a stray
/// character) only makes the bound larger or leaves it as is; the parser reports the error.
fn depth_bound(source: &str) -> usize {
    let chars: Vec<char> = source.chars().collect();
    let mut stack = vec![Group::new(None, 0, false)];
    let mut prev = Prev::Operator;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        // Whitespace and comments.
        if c.is_whitespace() {
            i += 1;
            continue;
        }
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
            continue;
        }
        let Some(group) = stack.last_mut() else {
            break;
        };
        // Literals and identifiers end the current unary run.
        if c.is_ascii_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            let quote = chars.get(i).copied().filter(|q| *q == '\'' || *q == '"');
            let prefix = word.len() <= 2 && word.chars().all(|w| "rRbB".contains(w));
            if let (Some(q), true) = (quote, prefix) {
                let raw = word.contains(['r', 'R']);
                i = skip_string(&chars, i, q, raw);
                group.element.term.run = None;
                prev = Prev::Operand;
            } else if word == "in" {
                binary(group);
                prev = Prev::Operator;
            } else {
                group.element.term.run = None;
                prev = Prev::Ident;
            }
            continue;
        }
        if c.is_ascii_digit() || (c == '.' && next.is_some_and(|n| n.is_ascii_digit())) {
            i += 1;
            while i < chars.len() {
                let d = chars[i];
                let exponent_sign = matches!(d, '+' | '-') && matches!(chars[i - 1], 'e' | 'E');
                let fraction = d == '.' && chars.get(i + 1).is_some_and(char::is_ascii_digit);
                if d.is_ascii_alphanumeric() || exponent_sign || fraction {
                    i += 1;
                } else {
                    break;
                }
            }
            group.element.term.run = None;
            prev = Prev::Operand;
            continue;
        }
        if c == '\'' || c == '"' {
            i = skip_string(&chars, i, c, false);
            group.element.term.run = None;
            prev = Prev::Operand;
            continue;
        }
        if c == '`' {
            // A quoted identifier.
            i += 1;
            while i < chars.len() && chars[i] != '`' {
                i += 1;
            }
            i += 1;
            group.element.term.run = None;
            prev = Prev::Ident;
            continue;
        }
        let two = next.map(|n| [c, n]);
        match (c, two) {
            (_, Some(['&', '&'])) => {
                group.element.next_and();
                i += 2;
                prev = Prev::Operator;
                continue;
            }
            (_, Some(['|', '|'])) => {
                group.element.next_or();
                i += 2;
                prev = Prev::Operator;
                continue;
            }
            (_, Some(['=', '=' | '~'] | ['!' | '<' | '>', '='])) => {
                binary(group);
                i += 2;
                prev = Prev::Operator;
                continue;
            }
            _ => {}
        }
        match c {
            '+' | '*' | '/' | '%' | '<' | '>' | '.' => {
                binary(group);
                prev = Prev::Operator;
            }
            '!' | '-' if prev != Prev::Ident && prev != Prev::Operand => {
                // A unary run: `!!x` and `--x` cancel, so a run adds at most two levels.
                let term = &mut group.element.term;
                match &mut term.run {
                    Some((k, n)) if *k == c => {
                        *n += 1;
                        if *n <= 2 {
                            term.ops += 1;
                        }
                    }
                    _ => {
                        term.run = Some((c, 1));
                        term.ops += 1;
                    }
                }
                prev = Prev::Operator;
            }
            '!' | '-' => {
                binary(group);
                prev = Prev::Operator;
            }
            '?' => {
                // After an operand it is a conditional; after `.`, `[`, `{` or `,` it marks
                // an optional field, index or entry, which adds no level of its own.
                if prev != Prev::Operator {
                    let element = &mut group.element;
                    element.ternaries += 1;
                    element.pending += 1;
                    element.next_part();
                }
                prev = Prev::Operator;
            }
            ':' => {
                let element = &mut group.element;
                if element.pending > 0 {
                    element.pending -= 1;
                    element.next_part();
                } else {
                    group.next_element();
                }
                prev = Prev::Operator;
            }
            ',' => {
                group.next_element();
                prev = Prev::Operator;
            }
            '(' => {
                // A call may be a macro, which expands to levels around its arguments:
                // `map(x, f, t)` puts `t` four levels down (a comprehension, a conditional,
                // `+`, a list), `sortBy` six (it binds its input with another comprehension).
                let weight = if prev == Prev::Ident { 6 } else { 1 };
                stack.push(Group::new(Some(')'), weight, false));
                prev = Prev::Operator;
            }
            '[' => {
                let index = prev != Prev::Operator;
                stack.push(Group::new(Some(']'), 2, index));
                prev = Prev::Operator;
            }
            '{' => {
                stack.push(Group::new(Some('}'), 3, false));
                prev = Prev::Operator;
            }
            ')' | ']' | '}' => {
                // A closing bracket closes the innermost group it matches (and the unclosed
                // ones inside it); a stray one is left to the parser.
                if let Some(at) = stack.iter().rposition(|g| g.close == Some(c)) {
                    while stack.len() > at {
                        close_group(&mut stack);
                    }
                }
                prev = Prev::Operand;
            }
            _ => {
                // Anything else does not lex: the parser refuses the rule, and skipping the
                // character cannot hide an operator.
            }
        }
        i += 1;
    }
    while stack.len() > 1 {
        close_group(&mut stack);
    }
    stack.first().map_or(0, Group::depth)
}

/// A binary (or member) operator in the current term.
fn binary(group: &mut Group) {
    let term = &mut group.element.term;
    term.ops += 1;
    term.run = None;
}

/// The index just past the string literal that starts at `chars[at]` with quote `q`
/// (tripled or not); backslashes escape the next character unless the string is raw.
fn skip_string(chars: &[char], at: usize, q: char, raw: bool) -> usize {
    let triple = chars.get(at + 1) == Some(&q) && chars.get(at + 2) == Some(&q);
    let mut i = if triple { at + 3 } else { at + 1 };
    while i < chars.len() {
        let c = chars[i];
        if c == '\\' && !raw {
            i += 2;
            continue;
        }
        if c == q {
            if !triple {
                return i + 1;
            }
            if chars.get(i + 1) == Some(&q) && chars.get(i + 2) == Some(&q) {
                return i + 3;
            }
        }
        if c == '\n' && !triple {
            return i;
        }
        i += 1;
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::cel::ENV;

    /// The depth of the tree (test rules are small, so recursing is fine).
    fn depth(e: &IdedExpr) -> usize {
        let entry = |x: &cel::common::ast::IdedEntryExpr| match &x.expr {
            EntryExpr::MapEntry(me) => 1 + depth(&me.key).max(depth(&me.value)),
            EntryExpr::StructField(f) => 1 + depth(&f.value),
        };
        1 + match &e.expr {
            Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => 0,
            Expr::Select(s) => depth(&s.operand),
            Expr::Call(c) => c
                .target
                .iter()
                .map(|t| depth(t))
                .chain(c.args.iter().map(depth))
                .max()
                .unwrap_or(0),
            Expr::Comprehension(c) => [
                &c.iter_range,
                &c.accu_init,
                &c.loop_cond,
                &c.loop_step,
                &c.result,
            ]
            .into_iter()
            .map(depth)
            .max()
            .unwrap_or(0),
            Expr::List(l) => l.elements.iter().map(depth).max().unwrap_or(0),
            Expr::Map(m) => m.entries.iter().map(entry).max().unwrap_or(0),
            Expr::Struct(s) => s.entries.iter().map(entry).max().unwrap_or(0),
        }
    }

    /// Rules of every shape, from CRDs in the wild and from the grammar's corners.
    const RULES: &[&str] = &[
        "self.minReplicas <= self.replicas && self.replicas <= self.maxReplicas",
        "!has(self.destinationNamespace) || self.destinationNamespace != self.sourceNamespace",
        "self.ports.all(p, p.name != '' && p.port > 0 && p.port < 65536)",
        "self.labels.all(k, k.startsWith('a') && self.labels[k] != '')",
        "self.labels.?team.orValue('') != 'x'",
        "[1, 2].exists(x, x == 2) && {'a': 1}.a == 1",
        "self.items.map(i, i.name).filter(n, n.startsWith('x')).size() < 3",
        "self.items.map(i, i.size() > 0, i.name).all(n, n != '')",
        "self.items.exists_one(i, i.primary)",
        "self.a ? (self.b ? 1 : 2) : self.c ? 3 : 4",
        "a ? b : c ? d : e ? f : g",
        "-(-(-1)) < 0 && !!!true == false",
        "1 - -1 == 2 && 1 - - - 1 == 0",
        "x[0][1][2].y[3] == {'k': [1, [2, [3]]]}['k']",
        "{'a': {'b': {'c': [{'d': 1}]}}}.a.b.c[0].d == 1",
        "[?self.?x, 1].size() > 0 && {?'k': self.?v}.size() >= 0",
        "size(size('a') > 0 ? 'b' : 'cc') == 1",
        "'a(b[c{' + \"d)e]f}\" + r'\\(' + b'x' + '''\n)''' != ''",
        "1.5 + 2e3 + .5 + 0x1F + 7u > 0.0 // a comment ((((\n",
        "self.list.sortBy(e, e.name).size() >= 0",
        "a + b * c - d / e % f < g && h in i || j >= k",
        "(((((1 + 2) * 3) - 4) / 5) % 6) == 0",
        "self.all(k, self[k].all(x, x.all(y, y > 0)))",
        "a || b || c || d || e || f || g || h || i",
        "a && b && c && d && e && f && g && h && i || j && k",
    ];

    #[test]
    fn the_bound_is_never_below_the_depth_of_the_tree() {
        let mut rules: Vec<String> = RULES.iter().map(ToString::to_string).collect();
        // Chains just under the limit of each kind.
        rules.push(vec!["1"; 200].join(" + "));
        rules.push(format!("self{}", ".a".repeat(200)));
        rules.push(format!("x{}", "[0]".repeat(100)));
        rules.push(format!("{}1{}", "size(".repeat(30), ")".repeat(30)));
        rules.push("true ? 1 : ".repeat(80) + "2");
        rules.push(format!("{}x{}", "[x, ".repeat(60), "]".repeat(60)));
        for rule in &rules {
            let program = ENV
                .compile(rule)
                .unwrap_or_else(|e| panic!("{rule}: {e:?}"));
            let actual = depth(program.expression());
            let bound = depth_bound(rule);
            assert!(bound >= actual, "{rule}: bound {bound} < depth {actual}");
        }
    }

    #[test]
    fn balanced_chains_and_cancelling_runs_stay_shallow() {
        // Kubernetes accepts these; their trees are shallow however long they are.
        let ands = vec!["self.a == 1"; 2_000].join(" && ");
        assert!(depth_bound(&ands) < 20, "{}", depth_bound(&ands));
        let nots = format!("{}true", "!".repeat(10_000));
        assert!(depth_bound(&nots) <= 3);
        let negs = format!("{}1 < 0", "-".repeat(10_000));
        assert!(depth_bound(&negs) <= 4);
        let list = format!("[{}]", vec!["1 + 1"; 5_000].join(", "));
        assert!(depth_bound(&list) <= 5);
        assert_eq!(check_source(&ands), Ok(()));
        assert_eq!(check_source(&nots), Ok(()));
    }

    /// Rule texts that used to overflow the stack (or would with more terms), at the sizes
    /// given, up to past a 3 MiB request body.
    fn pathological(n: usize) -> Vec<(&'static str, String)> {
        vec![
            ("plus", format!("{} > 0", vec!["1"; n].join(" + "))),
            ("minus", format!("{} > 0", vec!["1"; n].join(" - "))),
            ("times", format!("{} > 0", vec!["1"; n].join(" * "))),
            ("equals", vec!["true"; n].join(" == ")),
            ("less", vec!["1"; n].join(" < ")),
            ("in", vec!["[1]"; n].join(" in ")),
            ("members", format!("self{} == 1", ".a".repeat(n))),
            (
                "optional members",
                format!("self{}.hasValue()", ".?a".repeat(n)),
            ),
            ("index", format!("[1]{} == 1", "[0]".repeat(n))),
            ("calls", format!("self{}", ".f()".repeat(n))),
            ("parens", format!("{}1{} > 0", "(".repeat(n), ")".repeat(n))),
            ("lists", format!("{}{} != []", "[".repeat(n), "]".repeat(n))),
            (
                "maps",
                format!("{}1{} != {{}}", "{1: ".repeat(n), "}".repeat(n)),
            ),
            (
                "nested calls",
                format!("{}'a'{} > 0", "size(".repeat(n), ")".repeat(n)),
            ),
            (
                "macros",
                format!("{}true{}", "[1].all(x, ".repeat(n), ")".repeat(n)),
            ),
            ("ternaries", "true ? true : ".repeat(n) + "true"),
            (
                "ternary conditions",
                "true".to_string() + &" ? true : true".repeat(n),
            ),
            ("unclosed", "(1 + ".repeat(n)),
            (
                "paren chains",
                "(1 + ".repeat(n) + "1" + &")".repeat(n) + " > 0",
            ),
            ("alternating", format!("{} > 0", vec!["-1"; n].join(" - "))),
            (
                "ands of plus",
                vec![format!("{} > 0", vec!["1"; n].join(" + ")); 4].join(" && "),
            ),
        ]
    }

    #[test]
    fn no_rule_text_overflows_the_stack_when_compiled() {
        // Each is refused with cel-go's messages, or compiles, on this 2 MiB test thread.
        for n in [300, 1_500, 40_000, 1_000_000] {
            for (shape, rule) in pathological(n) {
                let got = check_source(&rule);
                let size = rule.chars().count();
                let want = if size > MAX_CODE_POINTS {
                    format!("expression code point size exceeds limit: size: {size}, limit 100000")
                } else {
                    "expression recursion limit exceeded: 250".to_string()
                };
                assert_eq!(got, Err(want), "{shape} x {n}");
            }
        }
        // Under the limit, the same shapes compile or fail to parse, without overflowing.
        for (shape, rule) in pathological(25) {
            assert_eq!(check_source(&rule), Ok(()), "{shape}");
            if let Ok(program) = ENV.compile(&rule) {
                assert_eq!(check_tree(program.expression()), Ok(()), "{shape}");
            }
        }
    }

    #[test]
    fn the_tree_check_stops_at_the_limit() {
        let rule = vec!["1"; 300].join(" + ");
        let program = ENV
            .compile(&rule)
            .expect("300 terms parse on a 2 MiB stack");
        assert_eq!(
            check_tree(program.expression()),
            Err("expression recursion limit exceeded: 250".to_string())
        );
        let rule = vec!["1"; 249].join(" + ");
        let program = ENV.compile(&rule).expect("parses");
        assert_eq!(check_tree(program.expression()), Ok(()));
    }
}
