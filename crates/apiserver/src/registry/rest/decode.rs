//! Decoding a request body into the served form of a resource (`apiVersion`/`kind` checks,
//! typed decoding, `fieldValidation`), and the way back: a stored object in served form.

use bytes::Bytes;
use serde_json::{Value, json};

use super::FieldValidation;
use crate::api::error::ApiError;
use crate::registry::Registry;
use crate::registry::resource::Resource;
use crate::storage::Stored;

impl Registry {
    /// Checks the body's `apiVersion` and `kind` against the endpoint (filling them if absent)
    /// and decodes it, applying `fieldValidation`.
    pub fn decode_body(
        &self,
        res: &Resource,
        mut body: Value,
        validation: FieldValidation,
        warnings: &mut Vec<String>,
    ) -> Result<Value, ApiError> {
        let Some(map) = body.as_object_mut() else {
            return Err(ApiError::BadRequest(format!(
                "{} in version {:?} cannot be handled as a {}: the body is not a JSON object",
                res.kind, res.version, res.kind
            )));
        };
        let api_version = res.api_version();
        match map.get("apiVersion").and_then(Value::as_str) {
            None | Some("") => {
                map.insert("apiVersion".into(), json!(api_version));
            }
            Some(v) if v == api_version => {}
            Some(v) => {
                return Err(ApiError::BadRequest(format!(
                    "the API version in the data ({v}) does not match the expected API version ({api_version})"
                )));
            }
        }
        match map.get("kind").and_then(Value::as_str) {
            None | Some("") => {
                map.insert("kind".into(), json!(res.kind));
            }
            Some(k) if k == res.kind => {}
            Some(k) => {
                return Err(ApiError::BadRequest(format!(
                    "the kind in the data ({k}) does not match the expected kind ({})",
                    res.kind
                )));
            }
        }
        if map
            .get("metadata")
            .is_some_and(|m| !m.is_object() && !m.is_null())
        {
            return Err(ApiError::BadRequest(format!(
                "{} in version {:?} cannot be handled as a {}: metadata must be an object",
                res.kind, res.version, res.kind
            )));
        }
        let decoded = res.strategy.decode(body).map_err(|e| {
            ApiError::BadRequest(format!(
                "{} in version {:?} cannot be handled as a {}: {e}",
                res.kind, res.version, res.kind
            ))
        })?;
        if !decoded.unknown_fields.is_empty() {
            match validation {
                FieldValidation::Ignore => {}
                FieldValidation::Warn => warnings.extend(
                    decoded
                        .unknown_fields
                        .iter()
                        .map(|f| format!("unknown field {f:?}")),
                ),
                FieldValidation::Strict => {
                    let list = decoded
                        .unknown_fields
                        .iter()
                        .map(|f| format!("unknown field {f:?}"))
                        .collect::<Vec<_>>()
                        .join(", ");
                    return Err(ApiError::BadRequest(format!(
                        "{} in version {:?} cannot be handled as a {}: strict decoding error: {list}",
                        res.kind, res.version, res.kind
                    )));
                }
            }
        }
        Ok(decoded.object)
    }

    /// A stored object in served form (the stored bytes themselves unless the kind converts).
    pub fn served(&self, res: &Resource, stored: &Stored) -> Result<Bytes, ApiError> {
        if !res.strategy.converts() {
            return Ok(stored.bytes.clone());
        }
        let v = stored
            .value()
            .map_err(|e| ApiError::Internal(e.to_string()))?;
        let served = res.strategy.to_served(v);
        crate::api::encoding::to_vec(&served)
            .map(Bytes::from)
            .map_err(|e| ApiError::Internal(e.to_string()))
    }
}
