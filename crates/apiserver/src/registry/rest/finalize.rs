//! The namespace `finalize` subresource: `spec.finalizers` rewritten, the namespace removed
//! once nothing holds it.

use serde_json::Value;

use crate::api::error::ApiError;
use crate::registry::Registry;
use crate::storage::{Preconditions, Update};

impl Registry {
    /// `PUT …/namespaces/{name}/finalize`: `body` is the namespace as the client sent it; its
    /// `spec.finalizers` replace the stored ones (none sent: none kept).
    pub async fn finalize(&self, name: &str, body: &Value) -> Result<Value, ApiError> {
        let finalizers = body
            .pointer("/spec/finalizers")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        self.finalize_namespace(name, Some(finalizers)).await
    }

    /// Removes `kubernetes` from a terminating namespace's `spec.finalizers` (what the
    /// namespace controller does once the namespace is empty) or, through `PUT …/finalize`,
    /// sets `spec.finalizers` to what the client sent; removes the namespace once no finalizer
    /// is left.
    pub async fn finalize_namespace(
        &self,
        name: &str,
        spec_finalizers: Option<Vec<Value>>,
    ) -> Result<Value, ApiError> {
        let catalog = self.catalog();
        let Some(res) = catalog.find("", "v1", "namespaces") else {
            return Err(ApiError::NoSuchPath);
        };
        let key = res.key(None, name);
        let mut step = |mut ns: Value| -> Update {
            let finalizers = match &spec_finalizers {
                Some(f) => Value::Array(f.clone()),
                None => Value::Array(
                    ns.pointer("/spec/finalizers")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                        .filter(|f| f.as_str() != Some("kubernetes"))
                        .cloned()
                        .collect(),
                ),
            };
            ns["spec"]["finalizers"] = finalizers;
            let done = ns["spec"]["finalizers"]
                .as_array()
                .is_some_and(Vec::is_empty)
                && ns
                    .pointer("/metadata/finalizers")
                    .and_then(Value::as_array)
                    .is_none_or(Vec::is_empty)
                && ns.pointer("/metadata/deletionTimestamp").is_some();
            if done {
                Update::Delete(ns)
            } else {
                Update::Put(ns)
            }
        };
        let written = self
            .storage()
            .guaranteed_update(&key, &Preconditions::default(), &mut step)
            .await
            .map_err(|e| ApiError::from_storage(e, &res.group_resource(), name))?;
        written
            .stored
            .value()
            .map_err(|e| ApiError::Internal(e.to_string()))
    }
}
