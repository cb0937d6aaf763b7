//! Stage selectors: labels, annotations and expressions on the object's fields.
//!
//! kwok evaluates an expression's `key` with gojq (a full jq). kore reads the subset that
//! kwok's Stage files use, without a jq engine:
//!
//! - paths: `.`, `.field`, `.["field"]`, `["field"]`, `.[]` (every element or value), `.[N]`,
//!   chained (`.metadata.labels["app"]`, `.status.containerStatuses.[].state.running`);
//! - pipes `a | b`, and `select( PATH == LITERAL )` / `!=` with a string, number, boolean or
//!   `null` literal.
//!
//! The outputs that are `null` are dropped, as kwok does; an error (a field of a string, the
//! elements of a number) yields no output, also as kwok. Then `In` holds when an output (a
//! string, boolean or integer, compared as text) is one of the values, `NotIn` when none is,
//! `Exists` when there is an output, `DoesNotExist` when there is none.

use std::collections::BTreeMap;

use serde_json::Value;

/// Why a selector or path cannot be used; the Stage is ignored (and logged).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The path is not in the subset kore reads.
    #[error("unsupported expression {expr:?} at {at}: {why}")]
    Unsupported {
        /// The expression.
        expr: String,
        /// The byte offset.
        at: usize,
        /// What was expected.
        why: &'static str,
    },
    /// An operator other than In, NotIn, Exists, DoesNotExist.
    #[error("operator {0:?} is not supported (In, NotIn, Exists, DoesNotExist)")]
    Operator(String),
    /// In/NotIn without values, or Exists/DoesNotExist with values.
    #[error("operator {0} {1}")]
    Values(String, &'static str),
    /// A CEL expression (kore does not evaluate CEL).
    #[error("CEL expressions are not supported")]
    Cel,
}

#[derive(Debug, Clone, PartialEq)]
enum Step {
    Field(String),
    Index(i64),
    Each,
}

#[derive(Debug, Clone, PartialEq)]
enum Stage {
    Path(Vec<Step>),
    Select {
        path: Vec<Step>,
        equal: bool,
        literal: Value,
    },
}

/// A compiled query: stages separated by pipes.
#[derive(Debug, Clone, PartialEq)]
pub struct Query {
    stages: Vec<Stage>,
}

struct Parser<'a> {
    src: &'a str,
    pos: usize,
}

impl<'a> Parser<'a> {
    fn err(&self, why: &'static str) -> Error {
        Error::Unsupported {
            expr: self.src.to_string(),
            at: self.pos,
            why,
        }
    }

    fn rest(&self) -> &'a str {
        &self.src[self.pos..]
    }

    fn skip_ws(&mut self) {
        let trimmed = self.rest().trim_start();
        self.pos = self.src.len() - trimmed.len();
    }

    fn eat(&mut self, s: &str) -> bool {
        self.skip_ws();
        if self.rest().starts_with(s) {
            self.pos += s.len();
            true
        } else {
            false
        }
    }

    fn string(&mut self) -> Result<String, Error> {
        // A JSON string literal.
        let rest = self.rest();
        let mut escaped = false;
        for (i, c) in rest.char_indices().skip(1) {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                let lit = &rest[..=i];
                self.pos += i + 1;
                return serde_json::from_str(lit).map_err(|_| self.err("a valid string"));
            }
        }
        Err(self.err("a closing quote"))
    }

    fn ident(&mut self) -> Option<String> {
        let rest = self.rest();
        let end = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        if end == 0 {
            return None;
        }
        self.pos += end;
        Some(rest[..end].to_string())
    }

    fn bracket(&mut self, steps: &mut Vec<Step>) -> Result<(), Error> {
        // After '['.
        self.skip_ws();
        if self.eat("]") {
            steps.push(Step::Each);
            return Ok(());
        }
        if self.rest().starts_with('"') {
            let s = self.string()?;
            steps.push(Step::Field(s));
        } else {
            let rest = self.rest();
            let end = rest
                .find(|c: char| !(c.is_ascii_digit() || c == '-'))
                .unwrap_or(rest.len());
            let n: i64 = rest[..end]
                .parse()
                .map_err(|_| self.err("a string, an index or ]"))?;
            self.pos += end;
            steps.push(Step::Index(n));
        }
        if !self.eat("]") {
            return Err(self.err("]"));
        }
        Ok(())
    }

    fn path(&mut self) -> Result<Vec<Step>, Error> {
        self.skip_ws();
        let mut steps = Vec::new();
        if !self.rest().starts_with(['.', '[']) {
            return Err(self.err("a path starting with ."));
        }
        loop {
            if self.rest().starts_with('.') {
                self.pos += 1;
                if self.rest().starts_with('[') {
                    self.pos += 1;
                    self.bracket(&mut steps)?;
                } else if self.rest().starts_with('"') {
                    let s = self.string()?;
                    steps.push(Step::Field(s));
                } else if let Some(id) = self.ident() {
                    steps.push(Step::Field(id));
                }
                // A lone '.' is the identity.
            } else if self.rest().starts_with('[') {
                self.pos += 1;
                self.bracket(&mut steps)?;
            } else {
                return Ok(steps);
            }
        }
    }

    fn literal(&mut self) -> Result<Value, Error> {
        self.skip_ws();
        if self.rest().starts_with('"') {
            return self.string().map(Value::String);
        }
        let rest = self.rest();
        let end = rest
            .find(|c: char| c.is_whitespace() || c == ')')
            .unwrap_or(rest.len());
        let v: Value = serde_json::from_str(&rest[..end]).map_err(|_| self.err("a literal"))?;
        self.pos += end;
        Ok(v)
    }

    fn stage(&mut self) -> Result<Stage, Error> {
        self.skip_ws();
        if self.eat("select") {
            if !self.eat("(") {
                return Err(self.err("("));
            }
            let path = self.path()?;
            let equal = if self.eat("==") {
                true
            } else if self.eat("!=") {
                false
            } else {
                return Err(self.err("== or !="));
            };
            let literal = self.literal()?;
            if !self.eat(")") {
                return Err(self.err(")"));
            }
            return Ok(Stage::Select {
                path,
                equal,
                literal,
            });
        }
        self.path().map(Stage::Path)
    }
}

impl Query {
    /// Compiles `src`.
    pub fn parse(src: &str) -> Result<Query, Error> {
        let mut p = Parser { src, pos: 0 };
        let mut stages = vec![p.stage()?];
        loop {
            p.skip_ws();
            if p.rest().is_empty() {
                return Ok(Query { stages });
            }
            if !p.eat("|") {
                return Err(p.err("| or the end"));
            }
            stages.push(p.stage()?);
        }
    }

    /// The outputs on `input`, without the nulls.
    pub fn run<'v>(&self, input: &'v Value) -> Vec<&'v Value> {
        let mut values = vec![input];
        for stage in &self.stages {
            let mut next = Vec::new();
            for v in values {
                match stage {
                    Stage::Path(steps) => {
                        if walk(v, steps, &mut next).is_err() {
                            return Vec::new();
                        }
                    }
                    Stage::Select {
                        path,
                        equal,
                        literal,
                    } => {
                        let mut out = Vec::new();
                        if walk(v, path, &mut out).is_err() {
                            return Vec::new();
                        }
                        // jq's select emits the input once per true output.
                        for o in out {
                            if (o == literal) == *equal {
                                next.push(v);
                            }
                        }
                    }
                }
            }
            values = next;
        }
        values.retain(|v| !v.is_null());
        values
    }

    /// For `.metadata.labels["k"]` or `.metadata.annotations["k"]` (or `.metadata.labels.k`):
    /// which map and key, so a selector can be checked on typed metadata first.
    pub fn metadata_key(&self) -> Option<(MetaMap, &str)> {
        let [Stage::Path(steps)] = self.stages.as_slice() else {
            return None;
        };
        match steps.as_slice() {
            [Step::Field(m), Step::Field(map), Step::Field(key)] if m == "metadata" => {
                match map.as_str() {
                    "labels" => Some((MetaMap::Labels, key.as_str())),
                    "annotations" => Some((MetaMap::Annotations, key.as_str())),
                    _ => None,
                }
            }
            _ => None,
        }
    }
}

/// `null` for a missing field or index, as jq.
static NULL: Value = Value::Null;

fn walk<'v>(v: &'v Value, steps: &[Step], out: &mut Vec<&'v Value>) -> Result<(), ()> {
    let Some((first, rest)) = steps.split_first() else {
        out.push(v);
        return Ok(());
    };
    match first {
        Step::Field(f) => match v {
            Value::Object(o) => walk(o.get(f).unwrap_or(&NULL), rest, out),
            Value::Null => walk(&NULL, rest, out),
            _ => Err(()),
        },
        Step::Index(i) => match v {
            Value::Array(a) => {
                let idx = if *i < 0 {
                    i64::try_from(a.len()).unwrap_or(0) + i
                } else {
                    *i
                };
                let item = usize::try_from(idx).ok().and_then(|i| a.get(i));
                walk(item.unwrap_or(&NULL), rest, out)
            }
            Value::Null => walk(&NULL, rest, out),
            _ => Err(()),
        },
        Step::Each => match v {
            Value::Array(a) => {
                for item in a {
                    walk(item, rest, out)?;
                }
                Ok(())
            }
            Value::Object(o) => {
                for item in o.values() {
                    walk(item, rest, out)?;
                }
                Ok(())
            }
            _ => Err(()),
        },
    }
}

/// Which metadata map a key is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetaMap {
    /// `metadata.labels`.
    Labels,
    /// `metadata.annotations`.
    Annotations,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    In,
    NotIn,
    Exists,
    DoesNotExist,
}

/// One compiled requirement.
#[derive(Debug, Clone)]
struct Requirement {
    query: Query,
    op: Op,
    values: Vec<String>,
}

impl Requirement {
    fn matches(&self, outputs: &[&Value]) -> bool {
        let has = || {
            outputs.iter().any(|v| {
                let text = match v {
                    Value::String(s) => s.clone(),
                    Value::Bool(b) => b.to_string(),
                    Value::Number(n) if n.is_i64() || n.is_u64() => n.to_string(),
                    _ => return false,
                };
                self.values.contains(&text)
            })
        };
        match self.op {
            Op::In => has(),
            Op::NotIn => !has(),
            Op::Exists => !outputs.is_empty(),
            Op::DoesNotExist => outputs.is_empty(),
        }
    }

    /// The answer from the metadata alone, when the key is a label or annotation.
    fn on_metadata(&self, labels: &Labels<'_>) -> Option<bool> {
        let (map, key) = self.query.metadata_key()?;
        let map = match map {
            MetaMap::Labels => labels.labels,
            MetaMap::Annotations => labels.annotations,
        };
        let v = map
            .and_then(|m| m.get(key))
            .map(|v| Value::String(v.clone()));
        let outputs: Vec<&Value> = v.iter().collect();
        Some(self.matches(&outputs))
    }
}

/// An object's labels and annotations.
#[derive(Debug, Clone, Copy, Default)]
pub struct Labels<'a> {
    /// `metadata.labels`.
    pub labels: Option<&'a BTreeMap<String, String>>,
    /// `metadata.annotations`.
    pub annotations: Option<&'a BTreeMap<String, String>>,
}

/// A compiled [`StageSelector`](super::StageSelector).
#[derive(Debug, Clone, Default)]
pub struct Selector {
    labels: BTreeMap<String, String>,
    annotations: BTreeMap<String, String>,
    requirements: Vec<Requirement>,
}

fn op(s: &str) -> Result<Op, Error> {
    Ok(match s {
        "In" => Op::In,
        "NotIn" => Op::NotIn,
        "Exists" => Op::Exists,
        "DoesNotExist" => Op::DoesNotExist,
        other => return Err(Error::Operator(other.to_string())),
    })
}

impl Selector {
    /// Compiles `selector`.
    pub fn compile(selector: &super::StageSelector) -> Result<Selector, Error> {
        let mut requirements = Vec::new();
        for e in selector.match_expressions.iter().flatten() {
            if e.cel.is_some() {
                return Err(Error::Cel);
            }
            let (key, operator, values) = match &e.jq {
                Some(jq) => (&jq.key, &jq.operator, &jq.values),
                None => (&e.key, &e.operator, &e.values),
            };
            let op = op(operator)?;
            let values = values.clone().unwrap_or_default();
            match op {
                Op::In | Op::NotIn if values.is_empty() => {
                    return Err(Error::Values(operator.clone(), "needs values"));
                }
                Op::Exists | Op::DoesNotExist if !values.is_empty() => {
                    return Err(Error::Values(operator.clone(), "takes no values"));
                }
                _ => {}
            }
            requirements.push(Requirement {
                query: Query::parse(key)?,
                op,
                values,
            });
        }
        Ok(Selector {
            labels: selector.match_labels.clone().unwrap_or_default(),
            annotations: selector.match_annotations.clone().unwrap_or_default(),
            requirements,
        })
    }

    /// Whether the labels, annotations and the expressions on them hold: false means the
    /// selector cannot match, true that the other expressions decide ([`Selector::matches`]).
    pub fn may_match(&self, meta: Labels<'_>) -> bool {
        let contains = |want: &BTreeMap<String, String>,
                        have: Option<&BTreeMap<String, String>>| {
            want.iter()
                .all(|(k, v)| have.and_then(|h| h.get(k)) == Some(v))
        };
        contains(&self.labels, meta.labels)
            && contains(&self.annotations, meta.annotations)
            && self
                .requirements
                .iter()
                .all(|r| r.on_metadata(&meta).unwrap_or(true))
    }

    /// Whether the expressions that need the whole object hold on `object` (call
    /// [`Selector::may_match`] first).
    pub fn matches(&self, object: &Value) -> bool {
        self.requirements
            .iter()
            .filter(|r| r.query.metadata_key().is_none())
            .all(|r| r.matches(&r.query.run(object)))
    }

    /// Whether any expression needs the whole object.
    pub fn needs_object(&self) -> bool {
        self.requirements
            .iter()
            .any(|r| r.query.metadata_key().is_none())
    }
}

/// Reads `path` on `object`: its first output.
pub fn read<'v>(path: &Query, object: &'v Value) -> Option<&'v Value> {
    path.run(object).into_iter().next()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(q: &str, v: &Value) -> Vec<Value> {
        Query::parse(q)
            .expect("parses")
            .run(v)
            .into_iter()
            .cloned()
            .collect()
    }

    #[test]
    fn kwoks_keys_read_as_jq_reads_them() {
        let pod = json!({
            "metadata": {"labels": {"a/b": "x"}, "ownerReferences": [{"kind": "Job"}]},
            "status": {
                "phase": "Running",
                "conditions": [{"type": "Ready", "status": "True"}, {"type": "Initialized", "status": "False"}],
                "containerStatuses": [{"state": {"running": {"startedAt": "t"}}}, {"state": {"waiting": {}}}],
            },
        });
        assert_eq!(run(".status.phase", &pod), [json!("Running")]);
        assert_eq!(
            run(".metadata.deletionTimestamp", &pod),
            Vec::<Value>::new()
        );
        assert_eq!(run(r#".metadata.labels["a/b"]"#, &pod), [json!("x")]);
        assert_eq!(
            run(".metadata.ownerReferences.[].kind", &pod),
            [json!("Job")]
        );
        assert_eq!(
            run(
                r#".status.conditions.[] | select( .type == "Ready" ) | .status"#,
                &pod
            ),
            [json!("True")]
        );
        assert_eq!(
            run(".status.containerStatuses.[].state.running.startedAt", &pod),
            [json!("t")]
        );
        assert_eq!(
            run(".status.containerStatuses[1].state", &pod),
            [json!({"waiting": {}})]
        );
        // A field of a string is an error: no output.
        assert_eq!(run(".status.phase.x", &pod), Vec::<Value>::new());
        assert!(Query::parse(".a | length").is_err());
    }

    #[test]
    fn selectors_check_labels_first_then_the_object() {
        let s: super::super::StageSelector = serde_json::from_value(json!({
            "matchLabels": {"app": "web"},
            "matchExpressions": [
                {"key": ".metadata.annotations[\"crash\"]", "operator": "Exists"},
                {"key": ".status.phase", "operator": "In", "values": ["Running"]},
                {"key": ".metadata.deletionTimestamp", "operator": "DoesNotExist"},
            ],
        }))
        .expect("selector");
        let s = Selector::compile(&s).expect("compiles");
        let labels: BTreeMap<String, String> = [("app".into(), "web".into())].into();
        let annotations: BTreeMap<String, String> = [("crash".into(), "3".into())].into();
        assert!(!s.may_match(Labels {
            labels: Some(&labels),
            annotations: None
        }));
        let meta = Labels {
            labels: Some(&labels),
            annotations: Some(&annotations),
        };
        assert!(s.may_match(meta));
        assert!(s.matches(&json!({"status": {"phase": "Running"}})));
        assert!(!s.matches(&json!({"status": {"phase": "Pending"}})));
        let bad: super::super::StageSelector = serde_json::from_value(json!({
            "matchExpressions": [{"key": ".a", "operator": "In"}],
        }))
        .expect("selector");
        assert!(Selector::compile(&bad).is_err());
    }
}
