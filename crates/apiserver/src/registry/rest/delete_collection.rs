//! `deletecollection`: every object a list selects, deleted one by one with the same options
//! (the whole selection, ignoring `limit` and `continue`). An object that is already gone is
//! skipped; any other failure stops the collection delete.

use std::sync::Arc;

use serde_json::Value;

use super::{DeleteOptions, Deleted};
use crate::api::error::ApiError;
use crate::registry::Registry;
use crate::registry::list::ListParams;
use crate::registry::resource::Resource;

/// What a `deletecollection` did.
#[derive(Clone, Debug)]
pub struct DeletedCollection {
    /// Each object deleted, as its delete left it (gone or marked for deletion), in list order.
    pub items: Vec<Value>,
    /// The storage's resource version once the deletes are done.
    pub resource_version: u64,
}

impl Registry {
    /// `DELETE` the collection: the objects of `res` in `ns` (every namespace when `None`)
    /// that `params`' selectors select.
    pub async fn delete_collection(
        &self,
        res: &Arc<Resource>,
        ns: Option<&str>,
        params: &ListParams,
        opts: &DeleteOptions,
    ) -> Result<DeletedCollection, ApiError> {
        let mut all = params.clone();
        all.limit = None;
        all.continue_token = None;
        let out = self.list(res, ns, &all).await?;
        let mut items = Vec::with_capacity(out.items.len());
        for item in &out.items {
            let v: Value =
                serde_json::from_slice(item).map_err(|e| ApiError::Internal(e.to_string()))?;
            let name = v["metadata"]["name"].as_str().unwrap_or_default();
            let item_ns = v["metadata"]["namespace"].as_str();
            match self.delete(res, item_ns.or(ns), name, opts).await {
                Ok(Deleted::Gone(v) | Deleted::Pending(v)) => items.push(v),
                Err(ApiError::NotFound { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(DeletedCollection {
            items,
            resource_version: self.storage().current_rv(),
        })
    }
}
