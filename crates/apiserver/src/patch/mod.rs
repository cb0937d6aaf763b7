//! Patches: JSON patch (RFC 6902), JSON merge patch (RFC 7386) and, for built-in kinds,
//! strategic merge patch.
//!
//! [`Patch::apply`] turns the current object and a patch document into the patched object; the
//! registry then treats the result like the body of an update. Server-side apply and the
//! `managedFields` bookkeeping of every write are in `apply`, over the field sets of
//! `fields`.
//!
//! A JSON patch is checked operation by operation before each is applied, so no patch can
//! build a document nested deeper than [`MAX_DEPTH`] or copy more than
//! [`MAX_JSON_PATCH_COPY_BYTES`] on the way to its result (a 9,000-step chain of `copy`
//! operations would otherwise overflow the stack, and 22 doubling copies exhaust memory).

pub(crate) mod apply;
pub(crate) mod fields;
pub(crate) mod strategic;

use serde_json::Value;

use crate::api::body::BodyType;
use crate::api::error::ApiError;
use crate::api::limits::{
    MAX_DEPTH, MAX_JSON_PATCH_COPY_BYTES, MAX_JSON_PATCH_OPERATIONS, deeper_than,
    encoded_len_within,
};

/// The patch types every resource accepts.
pub const COMMON_PATCH_TYPES: [&str; 3] = [
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/apply-patch+yaml",
];

/// The patch types built-in resources accept.
pub const BUILTIN_PATCH_TYPES: [&str; 4] = [
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
    "application/apply-patch+yaml",
];

/// A parsed patch document.
#[derive(Debug, Clone)]
pub enum Patch {
    /// RFC 6902 operations.
    Json(json_patch::Patch),
    /// RFC 7386 merge patch.
    Merge(Value),
    /// Strategic merge patch.
    Strategic(Value),
}

impl Patch {
    /// Parses a patch body of `body_type`; `builtin` says whether strategic merge is allowed.
    pub fn parse(body_type: BodyType, body: &[u8], builtin: bool) -> Result<Patch, ApiError> {
        let unsupported = || ApiError::UnsupportedMediaType {
            accepted: if builtin {
                BUILTIN_PATCH_TYPES.to_vec()
            } else {
                COMMON_PATCH_TYPES.to_vec()
            },
        };
        let bad = |e: serde_json::Error| ApiError::BadRequest(format!("error decoding patch: {e}"));
        match body_type {
            BodyType::JsonPatch => {
                let ops: Vec<Value> = serde_json::from_slice(body).map_err(bad)?;
                if ops.len() > MAX_JSON_PATCH_OPERATIONS {
                    return Err(ApiError::TooLarge(format!(
                        "The allowed maximum operations in a JSON patch is {MAX_JSON_PATCH_OPERATIONS}, got {}",
                        ops.len()
                    )));
                }
                let patch: json_patch::Patch =
                    serde_json::from_value(Value::Array(ops)).map_err(bad)?;
                Ok(Patch::Json(patch))
            }
            BodyType::MergePatch => Ok(Patch::Merge(serde_json::from_slice(body).map_err(bad)?)),
            BodyType::StrategicMergePatch if builtin => {
                Ok(Patch::Strategic(serde_json::from_slice(body).map_err(bad)?))
            }
            _ => Err(unsupported()),
        }
    }

    /// Applies the patch to `current` (in served form) of kind `kind`. The result is always
    /// a JSON object: a patch that makes the document anything else (a JSON patch that
    /// replaces the root with a string) is a 400, as the patched bytes cannot decode into
    /// an object.
    pub fn apply(&self, kind: &str, current: &Value) -> Result<Value, ApiError> {
        let patched = self.apply_any(kind, current)?;
        if !patched.is_object() {
            return Err(ApiError::BadRequest(format!(
                "the patched {kind} is not a JSON object"
            )));
        }
        Ok(patched)
    }

    fn apply_any(&self, kind: &str, current: &Value) -> Result<Value, ApiError> {
        match self {
            Patch::Json(ops) => {
                let mut doc = current.clone();
                // On failure `doc`, and everything the patch built in it, is dropped here.
                apply_json_patch(&mut doc, ops).map_err(|e| ApiError::Invalid {
                    kind: kind.to_string(),
                    group: String::new(),
                    name: current
                        .pointer("/metadata/name")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string(),
                    causes: vec![crate::api::field::FieldError::invalid(
                        "",
                        Value::Null,
                        format!(
                            "the server rejected our request due to an error in our request: {e}"
                        ),
                    )],
                })?;
                Ok(doc)
            }
            Patch::Merge(p) => {
                if !p.is_object() {
                    return Err(ApiError::BadRequest(
                        "error decoding patch: a merge patch must be a JSON object".into(),
                    ));
                }
                let mut doc = current.clone();
                json_patch::merge(&mut doc, p);
                Ok(doc)
            }
            // The strategic merge table knows kinds by their bare name (`Deployment`), not
            // qualified by group (`Deployment.apps`).
            Patch::Strategic(p) => {
                strategic::strategic_merge(kind.split('.').next().unwrap_or(kind), current, p)
                    .map_err(|e| {
                        ApiError::BadRequest(format!("error applying strategic merge patch: {e}"))
                    })
            }
        }
    }
}

/// Why a JSON patch could not be applied.
#[derive(Debug)]
enum JsonPatchFailure {
    /// An operation failed as RFC 6902 says it must.
    Operation(json_patch::PatchError),
    /// Operation `index` would pass one of the server's limits; `message` names it.
    Limit { index: usize, message: String },
}

impl std::fmt::Display for JsonPatchFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            JsonPatchFailure::Operation(e) => e.fmt(f),
            JsonPatchFailure::Limit { index, message } => {
                write!(f, "operation '/{index}': {message}")
            }
        }
    }
}

/// Applies `ops` in order to `doc` (a copy the caller drops on error). As in Kubernetes, a
/// `test` that a member is `null` passes when the member is absent and its parent exists:
/// clients rely on it to add a first finalizer only if there is none yet
/// (`{"op":"test","path":"/metadata/finalizers","value":null}` from kube-runtime's
/// `finalizer`). RFC 6902 alone would reject the pointer.
///
/// Each operation is checked against the limits before it runs (see [`check_operation`]).
fn apply_json_patch(
    doc: &mut Value,
    ops: &[json_patch::PatchOperation],
) -> Result<(), JsonPatchFailure> {
    let mut copied = 0usize;
    for (i, op) in ops.iter().enumerate() {
        if let json_patch::PatchOperation::Test(t) = op {
            let path = t.path.as_str();
            let absent = doc.pointer(path).is_none();
            let parent = path
                .rsplit_once('/')
                .and_then(|(parent, _)| doc.pointer(parent))
                .is_some_and(Value::is_object);
            if t.value.is_null() && absent && parent {
                continue;
            }
        }
        check_operation(doc, op, &mut copied)
            .map_err(|message| JsonPatchFailure::Limit { index: i, message })?;
        json_patch::patch_unsafe(doc, std::slice::from_ref(op)).map_err(|mut e| {
            e.operation = i;
            JsonPatchFailure::Operation(e)
        })?;
    }
    Ok(())
}

/// How many levels below the root a JSON pointer points (`""` is 0, `/a/0` is 2).
fn levels(pointer: &str) -> usize {
    pointer.bytes().filter(|b| *b == b'/').count()
}

/// Whether `value` placed at `pointer` stays within [`MAX_DEPTH`].
fn fits(pointer: &str, value: &Value) -> bool {
    let above = levels(pointer);
    above <= MAX_DEPTH && !deeper_than(value, MAX_DEPTH - above)
}

/// Checks one operation against the limits before it runs: what it puts into the document
/// must not nest it deeper than [`MAX_DEPTH`], and the values `copy` operations duplicate
/// may add up to [`MAX_JSON_PATCH_COPY_BYTES`] (`copied` counts them across the patch).
/// Operations the document cannot satisfy (a missing `from`) pass here and fail in
/// `json_patch` with its own error.
fn check_operation(
    doc: &Value,
    op: &json_patch::PatchOperation,
    copied: &mut usize,
) -> Result<(), String> {
    use json_patch::PatchOperation as Op;
    let too_deep = |path: &str| {
        format!("the result would be nested more than {MAX_DEPTH} levels deep at {path:?}")
    };
    match op {
        Op::Add(json_patch::AddOperation { path, value })
        | Op::Replace(json_patch::ReplaceOperation { path, value }) => {
            if !fits(path.as_str(), value) {
                return Err(too_deep(path.as_str()));
            }
        }
        Op::Copy(json_patch::CopyOperation { from, path }) => {
            let Some(source) = doc.pointer(from.as_str()) else {
                return Ok(());
            };
            let budget = MAX_JSON_PATCH_COPY_BYTES - *copied;
            let Some(size) = encoded_len_within(source, budget) else {
                return Err(format!(
                    "the values copied by this patch add up to more than {MAX_JSON_PATCH_COPY_BYTES} bytes, the limit of a JSON patch's copy operations"
                ));
            };
            *copied += size;
            // A value moved no deeper than it was cannot pass the limit the document keeps.
            if levels(path.as_str()) > levels(from.as_str()) && !fits(path.as_str(), source) {
                return Err(too_deep(path.as_str()));
            }
        }
        Op::Move(json_patch::MoveOperation { from, path }) => {
            if levels(path.as_str()) > levels(from.as_str())
                && let Some(source) = doc.pointer(from.as_str())
                && !fits(path.as_str(), source)
            {
                return Err(too_deep(path.as_str()));
            }
        }
        Op::Remove(_) | Op::Test(_) => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn merge_patch_null_deletes_and_lists_replace() {
        let p = Patch::parse(
            BodyType::MergePatch,
            br#"{"data":{"b":null,"c":"3"},"metadata":{"finalizers":null}}"#,
            true,
        )
        .expect("parses");
        let cur =
            json!({"metadata": {"name": "a", "finalizers": ["x"]}, "data": {"a": "1", "b": "2"}});
        let out = p.apply("ConfigMap", &cur).expect("applies");
        assert_eq!(
            out,
            json!({"metadata": {"name": "a"}, "data": {"a": "1", "c": "3"}})
        );
    }

    /// Found by fuzzing (`fuzz/regressions/patch_json/root-replaced-by-a-string.bin`): the
    /// registry's write path took the patched document for an object and panicked.
    #[test]
    fn a_patch_that_makes_the_document_a_non_object_is_bad_request() {
        let p = Patch::parse(
            BodyType::JsonPatch,
            br#"[{"op":"add","path":"","value":"a string"}]"#,
            true,
        )
        .expect("parses");
        let err = p
            .apply("ConfigMap", &json!({"metadata": {"name": "a"}}))
            .expect_err("refused");
        assert!(
            matches!(&err, ApiError::BadRequest(m) if m.contains("not a JSON object")),
            "{err:?}"
        );
    }

    #[test]
    fn json_patch_failures_are_invalid_and_garbage_is_bad_request() {
        let p = Patch::parse(
            BodyType::JsonPatch,
            br#"[{"op":"test","path":"/data/a","value":"9"}]"#,
            true,
        )
        .expect("parses");
        let err = p
            .apply("ConfigMap", &json!({"data": {"a": "1"}}))
            .expect_err("test fails");
        assert_eq!(err.code(), 422);
        let err = Patch::parse(BodyType::JsonPatch, b"{", true).expect_err("garbage");
        assert_eq!(err.code(), 400);
    }

    #[test]
    fn a_json_patch_test_of_null_passes_for_an_absent_member_as_in_kubernetes() {
        let add_first_finalizer = br#"[{"op":"test","path":"/metadata/finalizers","value":null},
            {"op":"add","path":"/metadata/finalizers","value":["f"]}]"#;
        let p = Patch::parse(BodyType::JsonPatch, add_first_finalizer, false).expect("parses");
        let out = p
            .apply("Foo", &json!({"metadata": {"name": "a"}}))
            .expect("absent is null");
        assert_eq!(out, json!({"metadata": {"name": "a", "finalizers": ["f"]}}));
        let err = p
            .apply(
                "Foo",
                &json!({"metadata": {"name": "a", "finalizers": ["g"]}}),
            )
            .expect_err("present and not null");
        assert_eq!(err.code(), 422);
        // A missing parent is still an error, and failures name the operation's index.
        let p = Patch::parse(
            BodyType::JsonPatch,
            br#"[{"op":"add","path":"/data/a","value":"1"},{"op":"test","path":"/x/y","value":null}]"#,
            false,
        )
        .expect("parses");
        let err = p.apply("Foo", &json!({"data": {}})).expect_err("no parent");
        assert!(err.to_string().contains("operation '/1'"), "{err}");
    }

    #[test]
    fn strategic_merge_is_refused_for_custom_kinds() {
        let err =
            Patch::parse(BodyType::StrategicMergePatch, b"{}", false).expect_err("not builtin");
        assert_eq!(err.code(), 415);
        assert!(err.to_string().contains("application/merge-patch+json"));
    }

    fn json_patch(ops: &Value) -> Patch {
        Patch::parse(
            BodyType::JsonPatch,
            &serde_json::to_vec(ops).expect("encodes"),
            false,
        )
        .expect("parses")
    }

    /// `{"op":"add","path":"/zz","value":{}}` then `n` copies of `/zz` into `/zz/a`: each
    /// nests the object one level deeper (issue 11, defect 1).
    fn copy_chain(n: usize) -> Value {
        let mut ops = vec![json!({"op": "add", "path": "/zz", "value": {}})];
        ops.extend((0..n).map(|_| json!({"op": "copy", "from": "/zz", "path": "/zz/a"})));
        Value::Array(ops)
    }

    #[test]
    fn a_chain_of_copies_stops_at_the_depth_limit_instead_of_overflowing_the_stack() {
        // The root and `/zz` make 2 levels and each copy one more: 98 copies reach the limit.
        let out = json_patch(&copy_chain(MAX_DEPTH - 2))
            .apply("ConfigMap", &json!({}))
            .expect("at the limit");
        assert_eq!(crate::api::limits::depth(&out), MAX_DEPTH);
        let err = json_patch(&copy_chain(9_000))
            .apply("ConfigMap", &json!({}))
            .expect_err("past the limit");
        assert_eq!(err.code(), 422);
        let msg = err.to_string();
        assert!(
            msg.contains(&format!("operation '/{}'", MAX_DEPTH - 1)),
            "{msg}"
        );
        assert!(msg.contains("more than 100 levels deep"), "{msg}");
    }

    #[test]
    fn doubling_copies_stop_at_the_copy_size_limit() {
        // Issue 11, defect 2: each copy doubles an array of one 1,000-character string.
        let mut ops = vec![json!({"op": "add", "path": "/a", "value": ["x".repeat(1000)]})];
        ops.extend((0..22).map(|_| json!({"op": "copy", "from": "/a", "path": "/a/-"})));
        ops.extend((0..22).map(|_| json!({"op": "copy", "from": "/a", "path": "/a/0"})));
        let err = json_patch(&Value::Array(ops))
            .apply("ConfigMap", &json!({}))
            .expect_err("too much copied");
        assert_eq!(err.code(), 422);
        assert!(err.to_string().contains("3145728 bytes"), "{err}");
        // Copies within the budget work, and the budget counts the whole patch.
        let small = json!([
            {"op": "add", "path": "/a", "value": "x".repeat(1000)},
            {"op": "copy", "from": "/a", "path": "/b"},
            {"op": "copy", "from": "/b", "path": "/c"}
        ]);
        let out = json_patch(&small)
            .apply("ConfigMap", &json!({}))
            .expect("small");
        assert_eq!(out["c"], out["a"]);
    }

    #[test]
    fn added_moved_and_replaced_values_are_held_to_the_depth_limit() {
        let mut deep = json!(1);
        for _ in 0..MAX_DEPTH - 1 {
            deep = json!([deep]);
        }
        // `/v` is one level down: a value MAX_DEPTH - 1 deep fits exactly.
        for op in ["add", "replace"] {
            let p = json_patch(&json!([{"op": op, "path": "/v", "value": deep}]));
            assert!(
                p.apply("Foo", &json!({"v": 0})).is_ok(),
                "{op} at the limit"
            );
            let p = json_patch(&json!([{"op": op, "path": "/v", "value": [deep]}]));
            let err = p
                .apply("Foo", &json!({"v": 0}))
                .expect_err("past the limit");
            assert!(err.to_string().contains("levels deep"), "{err}");
        }
        let p = json_patch(&json!([
            {"op": "add", "path": "/w", "value": {}},
            {"op": "move", "from": "/v", "path": "/w/x"}
        ]));
        let err = p
            .apply("Foo", &json!({"v": deep}))
            .expect_err("moved one level deeper");
        assert!(err.to_string().contains("operation '/1'"), "{err}");
    }
}
