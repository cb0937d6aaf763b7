//! The JSONPath subset that `additionalPrinterColumns` use: dotted fields (`.spec.size`),
//! indexes (`.spec.items[0]`), wildcards (`[*]`) and equality filters
//! (`.status.conditions[?(@.type=="Ready")].status`), optionally wrapped in `{…}`.
//!
//! Evaluation yields every matching value; a path that matches nothing yields none.

use serde_json::Value;

/// One step of a path.
#[derive(Clone, Debug, PartialEq)]
enum Step {
    /// `.name` or `['name']`.
    Field(String),
    /// `[3]`.
    Index(usize),
    /// `[*]` or `.*`.
    All,
    /// `[?(@.a.b=="x")]`: the items whose field equals a literal.
    Filter(Vec<String>, Value),
}

/// A parsed path.
#[derive(Clone, Debug, PartialEq)]
pub struct JsonPath {
    steps: Vec<Step>,
}

impl JsonPath {
    /// Parses `text`; the error says what is wrong.
    pub fn parse(text: &str) -> Result<JsonPath, String> {
        let mut s = text.trim();
        if let Some(inner) = s.strip_prefix('{').and_then(|r| r.strip_suffix('}')) {
            s = inner.trim();
        }
        if !s.starts_with('.') && !s.starts_with('[') {
            return Err(format!("{text:?} must start with '.' or '['"));
        }
        let bytes = s.as_bytes();
        let mut i = 0;
        let mut steps = Vec::new();
        while i < bytes.len() {
            match bytes[i] {
                b'.' => {
                    i += 1;
                    let start = i;
                    while i < bytes.len() && bytes[i] != b'.' && bytes[i] != b'[' {
                        i += 1;
                    }
                    let name = &s[start..i];
                    if name.is_empty() {
                        // `.` alone (the whole object) or `..`: only the former is allowed.
                        if i < bytes.len() && bytes[i] == b'.' {
                            return Err(format!("recursive descent is not supported in {text:?}"));
                        }
                        continue;
                    }
                    if name == "*" {
                        steps.push(Step::All);
                    } else if name
                        .bytes()
                        .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-' | b'/'))
                    {
                        steps.push(Step::Field(name.to_string()));
                    } else {
                        return Err(format!("invalid field name {name:?} in {text:?}"));
                    }
                }
                b'[' => {
                    let close =
                        find_close(s, i).ok_or_else(|| format!("unterminated '[' in {text:?}"))?;
                    let inner = s[i + 1..close].trim();
                    steps.push(parse_bracket(inner).map_err(|e| format!("{e} in {text:?}"))?);
                    i = close + 1;
                }
                _ => return Err(format!("unexpected character at {i} in {text:?}")),
            }
        }
        Ok(JsonPath { steps })
    }

    /// Every value the path selects in `root`.
    pub fn eval<'a>(&self, root: &'a Value) -> Vec<&'a Value> {
        let mut cur = vec![root];
        for step in &self.steps {
            let mut next = Vec::new();
            for v in cur {
                match step {
                    Step::Field(name) => {
                        if let Some(x) = v.get(name.as_str()) {
                            next.push(x);
                        }
                    }
                    Step::Index(n) => {
                        if let Some(x) = v.as_array().and_then(|a| a.get(*n)) {
                            next.push(x);
                        }
                    }
                    Step::All => match v {
                        Value::Array(a) => next.extend(a.iter()),
                        Value::Object(m) => next.extend(m.values()),
                        _ => {}
                    },
                    Step::Filter(path, want) => {
                        for item in v.as_array().into_iter().flatten() {
                            let mut field = Some(item);
                            for p in path {
                                field = field.and_then(|f| f.get(p.as_str()));
                            }
                            if field.is_some_and(|f| literal_eq(f, want)) {
                                next.push(item);
                            }
                        }
                    }
                }
            }
            cur = next;
        }
        cur
    }
}

/// Compares a field with a filter literal (numbers by value, else exactly).
fn literal_eq(field: &Value, want: &Value) -> bool {
    match (field, want) {
        (Value::Number(a), Value::Number(b)) => a.as_f64() == b.as_f64(),
        _ => field == want,
    }
}

/// The index of the `]` closing the `[` at `open`, skipping quoted text.
fn find_close(s: &str, open: usize) -> Option<usize> {
    let mut quote: Option<char> = None;
    for (i, c) in s[open + 1..].char_indices() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '"' | '\'') => quote = Some(c),
            (None, ']') => return Some(open + 1 + i),
            _ => {}
        }
    }
    None
}

fn unquote(s: &str) -> Option<&str> {
    let s = s.trim();
    s.strip_prefix('"')
        .and_then(|r| r.strip_suffix('"'))
        .or_else(|| s.strip_prefix('\'').and_then(|r| r.strip_suffix('\'')))
}

fn parse_bracket(inner: &str) -> Result<Step, String> {
    if inner == "*" {
        return Ok(Step::All);
    }
    if let Ok(n) = inner.parse::<usize>() {
        return Ok(Step::Index(n));
    }
    if let Some(name) = unquote(inner) {
        return Ok(Step::Field(name.to_string()));
    }
    let Some(filter) = inner
        .strip_prefix("?(")
        .and_then(|r| r.strip_suffix(')'))
        .map(str::trim)
    else {
        return Err(format!("unsupported selector [{inner}]"));
    };
    let Some((lhs, rhs)) = filter.split_once("==") else {
        return Err(format!("only == filters are supported, not {filter:?}"));
    };
    let Some(field) = lhs.trim().strip_prefix("@.") else {
        return Err(format!("a filter compares a field of @, not {lhs:?}"));
    };
    let path: Vec<String> = field.split('.').map(str::to_string).collect();
    if path.iter().any(String::is_empty) {
        return Err(format!("invalid filter field {field:?}"));
    }
    let rhs = rhs.trim();
    let want = match unquote(rhs) {
        Some(text) => Value::String(text.to_string()),
        None => serde_json::from_str::<Value>(rhs)
            .map_err(|_| format!("invalid filter literal {rhs:?}"))?,
    };
    Ok(Step::Filter(path, want))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn eval(path: &str, v: &Value) -> Vec<Value> {
        JsonPath::parse(path)
            .expect("parses")
            .eval(v)
            .into_iter()
            .cloned()
            .collect()
    }

    #[test]
    fn dotted_fields_select_nested_values() {
        let v = json!({"spec": {"size": 3, "color": "red"}});
        assert_eq!(eval(".spec.size", &v), [json!(3)]);
        assert_eq!(eval("{.spec.color}", &v), [json!("red")]);
        assert!(eval(".spec.missing", &v).is_empty());
    }

    #[test]
    fn filters_pick_the_matching_condition() {
        let v = json!({"status": {"conditions": [
            {"type": "Synced", "status": "False"},
            {"type": "Ready", "status": "True"}
        ]}});
        assert_eq!(
            eval(r#".status.conditions[?(@.type=="Ready")].status"#, &v),
            [json!("True")]
        );
        assert_eq!(eval(".status.conditions[0].type", &v), [json!("Synced")]);
        assert_eq!(eval(".status.conditions[*].type", &v).len(), 2);
    }

    #[test]
    fn malformed_paths_are_rejected() {
        for bad in [
            "spec.size",
            ".spec[",
            ".spec..x",
            ".spec[?(@.a>1)]",
            ".sp ec",
        ] {
            assert!(JsonPath::parse(bad).is_err(), "{bad}");
        }
    }
}
