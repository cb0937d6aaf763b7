//! `patch` (JSON patch, merge patch, strategic merge patch): the patch is applied to the
//! current object inside the shared read-modify-write, so it is applied again to the newer
//! object when another write races. Server-side apply has its own file, `apply`.

use serde_json::Value;

use super::validate::check_uid_unchanged;
use super::{Reply, Target, WriteOptions};
use crate::api::error::ApiError;
use crate::patch::Patch;
use crate::registry::Registry;

impl Registry {
    /// `PATCH` an object (or its status) with a non-apply patch. The patched object must keep
    /// its uid (422 otherwise) and decodes as a request body would, `fieldValidation`
    /// included.
    pub async fn patch(
        &self,
        target: Target<'_>,
        patch: &Patch,
        opts: &WriteOptions,
    ) -> Result<Reply, ApiError> {
        let Target { res, name, .. } = target;
        let mut warnings = Vec::new();
        let mut produce = |current: &Value| -> Result<Value, ApiError> {
            let mut patched = patch.apply(&res.qualified_kind(), current)?;
            check_uid_unchanged(res, name, &patched, current)?;
            // A patch may not move the object: a changed namespace is a 400, as for a PUT.
            let ns = current
                .pointer("/metadata/namespace")
                .and_then(Value::as_str);
            self.settle_namespace(res, &mut patched, ns)?;
            self.decode_body(res, patched, opts.field_validation, &mut warnings)
        };
        let mut reply = self
            .write_existing(target, None, &mut produce, opts)
            .await?;
        warnings.append(&mut reply.warnings);
        warnings.dedup();
        reply.warnings = warnings;
        Ok(reply)
    }
}
