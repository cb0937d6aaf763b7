//! `update` (PUT): the whole object (or its status) replaced, with the resource version as
//! the optimistic-concurrency precondition; some kinds create on update.

use std::sync::Arc;

use serde_json::{Value, json};

use super::{Part, Reply, Target, WriteOptions, meta_mut, meta_str};
use crate::api::error::ApiError;
use crate::registry::Registry;
use crate::registry::resource::Resource;
use crate::registry::validation::FieldError;
use crate::storage::StorageError;

impl Registry {
    /// `PUT` an object (or its status). `body` is the raw request body.
    pub async fn update(
        &self,
        res: &Arc<Resource>,
        ns: Option<&str>,
        name: &str,
        part: Part,
        body: Value,
        opts: &WriteOptions,
    ) -> Result<Reply, ApiError> {
        let mut warnings = Vec::new();
        let mut obj = self.decode_body(res, body, opts.field_validation, &mut warnings)?;
        match meta_str(&obj, "name") {
            None | Some("") => {
                meta_mut(&mut obj).insert("name".into(), json!(name));
            }
            Some(n) if n == name => {}
            Some(n) => {
                return Err(ApiError::BadRequest(format!(
                    "the name of the object ({n}) does not match the name on the URL ({name})"
                )));
            }
        }
        self.settle_namespace(res, &mut obj, ns)?;
        let wanted_rv =
            match meta_str(&obj, "resourceVersion") {
                None | Some("") => None,
                Some(rv) => Some(rv.parse::<u64>().map_err(|_| {
                    ApiError::BadRequest(format!("invalid resource version: {rv:?}"))
                })?),
            };
        if wanted_rv.is_none() && res.strategy.requires_resource_version_on_update() {
            return Err(ApiError::Invalid {
                kind: res.group_resource().to_string(),
                group: res.group.clone(),
                name: name.to_string(),
                causes: vec![FieldError::invalid(
                    "metadata.resourceVersion",
                    json!("0x0"),
                    "must be specified for an update",
                )],
            });
        }
        let key = res.key(ns, name);
        if part == Part::Main
            && res.strategy.allow_create_on_update()
            && matches!(self.storage().get(&key), Err(StorageError::NotFound { .. }))
        {
            let mut create_body = obj.clone();
            meta_mut(&mut create_body).remove("resourceVersion");
            match self.create(res, ns, create_body, opts).await {
                Err(ApiError::AlreadyExists { .. }) => {}
                other => return other,
            }
        }
        let mut produce = |_: &Value| Ok(obj.clone());
        let mut reply = self
            .write_existing(
                Target {
                    res,
                    ns,
                    name,
                    part,
                },
                wanted_rv,
                &mut produce,
                opts,
            )
            .await?;
        warnings.append(&mut reply.warnings);
        reply.warnings = warnings;
        Ok(reply)
    }
}
