//! `get`: one object, as bytes in served form or as a value.

use bytes::Bytes;
use serde_json::Value;

use crate::api::error::ApiError;
use crate::registry::Registry;
use crate::registry::resource::Resource;

impl Registry {
    /// `GET` one object.
    pub fn get(&self, res: &Resource, ns: Option<&str>, name: &str) -> Result<Bytes, ApiError> {
        let stored = self
            .storage()
            .get(&res.key(ns, name))
            .map_err(|e| ApiError::from_storage(e, &res.group_resource(), name))?;
        self.served(res, &stored)
    }

    /// `GET` one object as a value in served form.
    pub fn get_value(
        &self,
        res: &Resource,
        ns: Option<&str>,
        name: &str,
    ) -> Result<Value, ApiError> {
        let bytes = self.get(res, ns, name)?;
        serde_json::from_slice(&bytes).map_err(|e| ApiError::Internal(e.to_string()))
    }
}
