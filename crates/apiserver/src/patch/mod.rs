//! Patches: JSON patch (RFC 6902), JSON merge patch (RFC 7386) and, for built-in kinds,
//! strategic merge patch.
//!
//! [`Patch::apply`] turns the current object and a patch document into the patched object; the
//! registry then treats the result like the body of an update. Server-side apply and the
//! `managedFields` bookkeeping of every write are in `apply`, over the field sets of
//! `fields`.

pub(crate) mod apply;
pub(crate) mod fields;
pub(crate) mod strategic;

use serde_json::Value;

use crate::http::error::ApiError;
use crate::http::negotiate::BodyType;

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

/// The most operations a JSON patch may carry.
const MAX_JSON_PATCH_OPS: usize = 10_000;

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
                if ops.len() > MAX_JSON_PATCH_OPS {
                    return Err(ApiError::TooLarge(format!(
                        "The allowed maximum operations in a JSON patch is {MAX_JSON_PATCH_OPS}, got {}",
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

    /// Applies the patch to `current` (in served form) of kind `kind`.
    pub fn apply(&self, kind: &str, current: &Value) -> Result<Value, ApiError> {
        match self {
            Patch::Json(ops) => {
                let mut doc = current.clone();
                apply_json_patch(&mut doc, ops).map_err(|e| ApiError::Invalid {
                    kind: kind.to_string(),
                    group: String::new(),
                    name: current
                        .pointer("/metadata/name")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string(),
                    causes: vec![crate::registry::validation::FieldError::invalid(
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

/// Applies `ops` in order to `doc` (a copy the caller drops on error). As in Kubernetes, a
/// `test` that a member is `null` passes when the member is absent and its parent exists:
/// clients rely on it to add a first finalizer only if there is none yet
/// (`{"op":"test","path":"/metadata/finalizers","value":null}` from kube-runtime's
/// `finalizer`). RFC 6902 alone would reject the pointer.
fn apply_json_patch(
    doc: &mut Value,
    ops: &[json_patch::PatchOperation],
) -> Result<(), json_patch::PatchError> {
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
        json_patch::patch_unsafe(doc, std::slice::from_ref(op)).map_err(|mut e| {
            e.operation = i;
            e
        })?;
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
}
