//! `create`: a new object, with server-owned metadata filled in and, for `generateName`, a
//! generated name (tried again on a clash).

use std::sync::Arc;

use rand::Rng;
use serde_json::{Value, json};

use super::validate::{check_depth, record_ownership};
use super::{
    Part, Reply, WriteMode, WriteOptions, meta_mut, meta_str, name_of, now_rfc3339, to_bytes,
};
use crate::api::error::ApiError;
use crate::patch::fields::decode_managed;
use crate::registry::Registry;
use crate::registry::admission;
use crate::registry::resource::Resource;
use crate::storage::StorageError;

/// The random suffix alphabet Kubernetes uses for generated names (no vowels, no confusables).
const NAME_CHARS: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

fn generate_name(prefix: &str) -> String {
    let prefix: String = prefix.chars().take(58).collect();
    let mut rng = rand::rng();
    let suffix: String = (0..5)
        .map(|_| NAME_CHARS[rng.random_range(0..NAME_CHARS.len())] as char)
        .collect();
    format!("{prefix}{suffix}")
}

impl Registry {
    /// `POST` a new object. `body` is the decoded request body.
    pub async fn create(
        &self,
        res: &Arc<Resource>,
        ns: Option<&str>,
        body: Value,
        opts: &WriteOptions,
    ) -> Result<Reply, ApiError> {
        // The resources of a terminating CRD serve no `create` (their objects are going).
        if !res.allows("create") && res.strategy.structural_schema().is_some() {
            return Err(ApiError::NotAllowed(
                "create not allowed while custom resource definition is terminating".into(),
            ));
        }
        self.create_with(res, ns, body, opts, WriteMode::Update)
            .await
    }

    pub(super) async fn create_with(
        &self,
        res: &Arc<Resource>,
        ns: Option<&str>,
        body: Value,
        opts: &WriteOptions,
        mode: WriteMode,
    ) -> Result<Reply, ApiError> {
        let mut warnings = Vec::new();
        let applied = (mode == WriteMode::Apply).then(|| decode_managed(&body));
        let mut obj = self.decode_body(res, body, opts.field_validation, &mut warnings)?;
        self.settle_namespace(res, &mut obj, ns)?;
        let admission = self.admission();
        let attrs = admission::Attributes {
            user: opts.user.as_deref(),
            res,
            operation: admission::Operation::Create,
            namespace: ns,
            name: "",
            old: None,
        };
        admission.mutate(&attrs, &mut obj)?;
        let meta = meta_mut(&mut obj);
        // Kubernetes refuses a resourceVersion in its storage layer, after validation (so an
        // invalid object is a 422 either way) and not in a dry run (whose storage only checks
        // that the name is free): the same order here.
        let version_set = meta
            .get("resourceVersion")
            .and_then(Value::as_str)
            .is_some_and(|rv| !rv.is_empty());
        for field in [
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "generation",
            "managedFields",
            "selfLink",
        ] {
            meta.remove(field);
        }
        // The system fields and a generated name come before the kind's own preparation, as in
        // Kubernetes (a Job's generated selector is keyed on its uid and names the Job).
        meta.insert("uid".into(), json!(super::new_uid()));
        meta.insert("creationTimestamp".into(), json!(now_rfc3339()));
        let generate = meta_str(&obj, "name")
            .is_none_or(str::is_empty)
            .then(|| {
                meta_str(&obj, "generateName")
                    .unwrap_or_default()
                    .to_string()
            })
            .filter(|p| !p.is_empty());
        if let Some(prefix) = &generate {
            meta_mut(&mut obj).insert("name".into(), json!(generate_name(prefix)));
        }
        res.strategy.prepare_for_create(&mut obj);
        self.validate_object(res, &obj, None, &mut warnings)?;
        admission.validate(&attrs, &obj)?;
        let name = name_of(&obj).to_string();
        if res.namespaced {
            self.check_namespace_for_create(res, ns.unwrap_or_default(), &name)?;
        }
        if res.strategy.tracks_generation() {
            meta_mut(&mut obj).insert("generation".into(), json!(1));
        }
        record_ownership(res, Part::Main, None, &mut obj, applied, None, opts);
        check_depth(res, &name, &obj)?;
        if version_set && !opts.dry_run {
            return Err(ApiError::Internal(
                "resourceVersion should not be set on objects to be created".into(),
            ));
        }
        if opts.dry_run {
            if self.storage().get(&res.key(ns, &name)).is_ok() {
                return Err(ApiError::AlreadyExists {
                    resource: res.group_resource(),
                    name,
                    message: None,
                });
            }
            return Ok(Reply {
                created: true,
                body: to_bytes(&obj)?,
                warnings,
            });
        }
        let mut attempts = 0;
        loop {
            let name = name_of(&obj).to_string();
            // Only a generated name may need another try, and so the object again.
            let stored_form = if generate.is_some() {
                res.strategy.to_stored(obj.clone())
            } else {
                res.strategy.to_stored(std::mem::take(&mut obj))
            };
            match self
                .storage()
                .create(&res.key(ns, &name), stored_form)
                .await
            {
                Ok(stored) => {
                    return Ok(Reply {
                        created: true,
                        body: self.served(res, &stored)?,
                        warnings,
                    });
                }
                Err(StorageError::AlreadyExists { .. }) if generate.is_some() && attempts < 8 => {
                    attempts += 1;
                    let prefix = generate.as_deref().unwrap_or_default();
                    meta_mut(&mut obj).insert("name".into(), json!(generate_name(prefix)));
                }
                Err(StorageError::AlreadyExists { .. }) if generate.is_some() => {
                    return Err(ApiError::AlreadyExists {
                        resource: res.group_resource(),
                        name: name.clone(),
                        message: Some(format!(
                            "{} {name:?} already exists, the server was not able to generate a unique name for the object",
                            res.group_resource()
                        )),
                    });
                }
                Err(e) => return Err(ApiError::from_storage(e, &res.group_resource(), &name)),
            }
        }
    }
}
