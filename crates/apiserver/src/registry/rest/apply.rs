//! Server-side `apply`: a manager's whole intent for an object merged into it (or creating
//! it), with field ownership tracked and conflicts reported.

use serde_json::{Value, json};

use super::validate::check_uid_unchanged;
use super::{Part, Reply, Target, WriteMode, WriteOptions, meta_mut};
use crate::api::error::ApiError;
use crate::patch::apply::{ApplyParams, Lists};
use crate::registry::Registry;
use crate::registry::resource::Resource;
use crate::registry::validation::FieldError;
use crate::storage::StorageError;

impl Registry {
    /// Server-side apply (`PATCH` with `application/apply-patch+yaml`): `config` is the
    /// manager's whole intent for the addressed part of the object; a missing object is created
    /// from it (201). `opts.field_manager` names the manager and is required; `force` takes
    /// fields other managers own instead of failing with 409.
    pub async fn apply(
        &self,
        target: Target<'_>,
        config: Value,
        force: bool,
        opts: &WriteOptions,
    ) -> Result<Reply, ApiError> {
        let Target {
            res,
            ns,
            name,
            part,
        } = target;
        let Some(manager) = opts.field_manager.as_deref() else {
            return Err(ApiError::invalid_options(
                "PatchOptions",
                vec![FieldError::required(
                    "fieldManager",
                    "is required for apply patch",
                )],
            ));
        };
        let config = apply_config(res, ns, name, part, config)?;
        let schema = res.strategy.structural_schema();
        let api_version = res.api_version();
        let params = ApplyParams {
            manager,
            force,
            api_version: &api_version,
            subresource: part.subresource(),
            lists: schema
                .as_deref()
                .map_or(Lists::Builtin(&res.kind), Lists::Custom),
        };
        let key = res.key(ns, name);
        // The object may be created or deleted between the look and the write: look again.
        for _ in 0..3 {
            let mut warnings = Vec::new();
            let exists = !matches!(self.storage().get(&key), Err(StorageError::NotFound { .. }));
            let result = if exists {
                let mut produce = |current: &Value| -> Result<Value, ApiError> {
                    check_uid_unchanged(res, name, &config, current)?;
                    crate::patch::apply::apply(Some(current), &config, &params, &mut |merged| {
                        self.decode_body(res, merged, opts.field_validation, &mut warnings)
                    })
                };
                self.write_existing_with(target, None, &mut produce, opts, WriteMode::Apply)
                    .await
            } else if part != Part::Main {
                return Err(ApiError::NotFound {
                    resource: res.group_resource(),
                    name: name.to_string(),
                });
            } else {
                let body = crate::patch::apply::apply(None, &config, &params, &mut |merged| {
                    self.decode_body(res, merged, opts.field_validation, &mut warnings)
                })?;
                self.create_with(res, ns, body, opts, WriteMode::Apply)
                    .await
            };
            match result {
                Err(ApiError::NotFound { .. }) if exists => continue,
                Err(ApiError::AlreadyExists { .. }) if !exists => continue,
                Ok(mut reply) => {
                    for w in reply.warnings.drain(..) {
                        if !warnings.contains(&w) {
                            warnings.push(w);
                        }
                    }
                    reply.warnings = warnings;
                    return Ok(reply);
                }
                Err(e) => return Err(e),
            }
        }
        Err(ApiError::Conflict {
            resource: res.group_resource(),
            name: name.to_string(),
            detail: "the object has been modified; please apply your changes to the latest version and try again".into(),
        })
    }
}

/// Checks an apply body against the endpoint and keeps the part it addresses: `apiVersion`
/// and `kind` must be the endpoint's, `metadata.managedFields` must be absent, the name and
/// namespace must match the URL (the name is filled in when absent). Through `/status` only
/// `status` is applied; through the main resource of a kind with a status subresource,
/// everything but `status`.
fn apply_config(
    res: &Resource,
    ns: Option<&str>,
    name: &str,
    part: Part,
    mut config: Value,
) -> Result<Value, ApiError> {
    let Some(map) = config.as_object_mut() else {
        return Err(ApiError::BadRequest(
            "error decoding YAML: the apply patch must be an object".into(),
        ));
    };
    let text = |k: &str| map.get(k).and_then(Value::as_str).unwrap_or_default();
    let (api_version, kind) = (text("apiVersion"), text("kind"));
    if api_version != res.api_version() || kind != res.kind {
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        return Err(ApiError::BadRequest(format!(
            "invalid object type: {group}/{version}, Kind={kind}"
        )));
    }
    let meta = meta_mut(&mut config);
    if meta.get("managedFields").is_some_and(|m| !m.is_null()) {
        return Err(ApiError::BadRequest(
            "metadata.managedFields must be nil".into(),
        ));
    }
    match meta.get("name").and_then(Value::as_str) {
        None | Some("") => {
            meta.insert("name".into(), json!(name));
        }
        Some(n) if n == name => {}
        Some(n) => {
            return Err(ApiError::BadRequest(format!(
                "the name of the object ({n}) does not match the name on the URL ({name})"
            )));
        }
    }
    match (meta.get("namespace").and_then(Value::as_str), ns) {
        (None | Some(""), _) => {}
        (Some(body_ns), Some(url_ns)) if res.namespaced && body_ns == url_ns => {}
        (Some(_), _) if !res.namespaced => {
            meta.remove("namespace");
        }
        (Some(_), _) => {
            return Err(ApiError::BadRequest(
                "the namespace of the provided object does not match the namespace sent on the request".into(),
            ));
        }
    }
    if let Some(map) = config.as_object_mut() {
        match part {
            Part::Status => map
                .retain(|k, _| matches!(k.as_str(), "apiVersion" | "kind" | "metadata" | "status")),
            Part::Main if res.subresources.status => {
                map.remove("status");
            }
            Part::Main | Part::EphemeralContainers | Part::Resize => {}
        }
        if part == Part::Status
            && let Some(meta) = map.get_mut("metadata").and_then(Value::as_object_mut)
        {
            meta.retain(|k, _| {
                matches!(k.as_str(), "name" | "namespace" | "uid" | "resourceVersion")
            });
        }
    }
    Ok(config)
}
