//! The read-modify-write every change to an existing object goes through (update, patch,
//! apply, scale, the controllers' status writes): read, produce the next version, apply the
//! shared rules, write, and do it again when another write raced.

use serde_json::{Value, json};

use super::validate::{check_depth, record_ownership};
use super::{Part, Reply, Target, WriteMode, WriteOptions, meta_mut, meta_str, to_bytes};
use crate::api::error::ApiError;
use crate::patch::fields::decode_managed;
use crate::registry::Registry;
use crate::registry::admission;
use crate::registry::resource::Resource;
use crate::registry::validation::FieldError;
use crate::storage::{Preconditions, StorageError, Update, resource_version_of};

/// What an object without metadata reads as.
static EMPTY_OBJECT: std::sync::LazyLock<Value> = std::sync::LazyLock::new(|| json!({}));

impl Registry {
    /// The shared update path of PUT and PATCH: reads the object, asks `produce` for the new
    /// served object (given the current one), applies every rule, and writes it, re-running
    /// `produce` when another write raced.
    pub async fn write_existing(
        &self,
        target: Target<'_>,
        wanted_rv: Option<u64>,
        produce: &mut (dyn FnMut(&Value) -> Result<Value, ApiError> + Send),
        opts: &WriteOptions,
    ) -> Result<Reply, ApiError> {
        self.write_existing_with(target, wanted_rv, produce, opts, WriteMode::Update)
            .await
    }

    pub(super) async fn write_existing_with(
        &self,
        target: Target<'_>,
        wanted_rv: Option<u64>,
        produce: &mut (dyn FnMut(&Value) -> Result<Value, ApiError> + Send),
        opts: &WriteOptions,
        mode: WriteMode,
    ) -> Result<Reply, ApiError> {
        let Target {
            res,
            ns,
            name,
            part,
        } = target;
        let key = res.key(ns, name);
        let mut failure: Option<ApiError> = None;
        let mut dry_result: Option<Value> = None;
        let mut warnings: Vec<String> = Vec::new();
        let gr = res.group_resource();
        let mut step = |old_stored: Value| -> Update {
            let old = res.strategy.to_served(old_stored);
            let next = self.next_version(
                res,
                name,
                part,
                wanted_rv,
                &old,
                produce,
                &mut warnings,
                (opts, mode),
            );
            match next {
                Err(e) => {
                    failure = Some(e);
                    Update::Abort
                }
                Ok(new) if opts.dry_run => {
                    dry_result = Some(new);
                    Update::Abort
                }
                Ok(new) => {
                    // A pod in its grace period waits for its kubelet's delete.
                    let deleting = new.pointer("/metadata/deletionTimestamp").is_some()
                        && new
                            .pointer("/metadata/deletionGracePeriodSeconds")
                            .and_then(Value::as_i64)
                            .is_none_or(|g| g <= 0);
                    let no_finalizers = new
                        .pointer("/metadata/finalizers")
                        .and_then(Value::as_array)
                        .is_none_or(Vec::is_empty);
                    // A namespace also waits for its spec finalizers (the namespace controller's).
                    let spec_finalizers_left = res.strategy.held_by_spec(&new);
                    let stored = res.strategy.to_stored(new);
                    if deleting && no_finalizers && !spec_finalizers_left {
                        Update::Delete(stored)
                    } else {
                        Update::Put(stored)
                    }
                }
            }
        };
        let result = self
            .storage()
            .guaranteed_update(&key, &Preconditions::default(), &mut step)
            .await;
        match result {
            Ok(written) => Ok(Reply {
                created: false,
                body: self.served(res, &written.stored)?,
                warnings,
            }),
            Err(StorageError::Aborted) => match (failure, dry_result) {
                (Some(e), _) => Err(e),
                (None, Some(v)) => Ok(Reply {
                    created: false,
                    body: to_bytes(&v)?,
                    warnings,
                }),
                (None, None) => Err(ApiError::Internal("update aborted without a reason".into())),
            },
            Err(e) => Err(ApiError::from_storage(e, &gr, name)),
        }
    }

    /// Computes the next version of an object from its current one.
    #[allow(clippy::too_many_arguments)]
    fn next_version(
        &self,
        res: &Resource,
        name: &str,
        part: Part,
        wanted_rv: Option<u64>,
        old: &Value,
        produce: &mut (dyn FnMut(&Value) -> Result<Value, ApiError> + Send),
        warnings: &mut Vec<String>,
        (opts, mode): (&WriteOptions, WriteMode),
    ) -> Result<Value, ApiError> {
        let mut new = produce(old)?;
        let admission = self.admission();
        let attrs = admission::Attributes {
            user: opts.user.as_deref(),
            res,
            operation: admission::Operation::Update,
            namespace: meta_str(old, "namespace"),
            name,
            old: Some(old),
        };
        admission.mutate(&attrs, &mut new)?;
        // An apply worked out the managedFields. Another write to the main resource may send
        // its own: `[]` clears the record, readable entries replace it (kubectl rewrites them
        // when it moves an object from client-side to server-side apply); otherwise the
        // stored ones stay.
        let applied = (mode == WriteMode::Apply).then(|| decode_managed(&new));
        let sent = match new
            .pointer("/metadata/managedFields")
            .and_then(Value::as_array)
        {
            _ if mode == WriteMode::Apply || part == Part::Status => None,
            Some(entries) if entries.is_empty() => Some(Vec::new()),
            Some(_) => Some(decode_managed(&new)).filter(|e| !e.is_empty()),
            None => None,
        };
        let old_rv = resource_version_of(old);
        let new_rv =
            match meta_str(&new, "resourceVersion") {
                None | Some("") => wanted_rv,
                Some(rv) => Some(rv.parse::<u64>().map_err(|_| {
                    ApiError::BadRequest(format!("invalid resource version: {rv:?}"))
                })?),
            };
        if let Some(rv) = new_rv
            && Some(rv) != old_rv
        {
            return Err(ApiError::Conflict {
                resource: res.group_resource(),
                name: name.to_string(),
                detail: "the object has been modified; please apply your changes to the latest version and try again".into(),
            });
        }
        match meta_str(&new, "name") {
            Some(n) if n != name => {
                return Err(ApiError::BadRequest(format!(
                    "the name of the object ({n}) does not match the name on the URL ({name})"
                )));
            }
            _ => {}
        }
        let old_meta = old.get("metadata").unwrap_or(&EMPTY_OBJECT);
        if part == Part::Status {
            // The stored object with the request's status (and, for the older kinds, its
            // metadata): only the parts kept from the stored object are copied.
            let status = new.get_mut("status").map(Value::take);
            let kept_meta = res
                .strategy
                .status_keeps_metadata()
                .map(|reset| status_metadata(&new, old_meta, reset));
            let mut next = serde_json::Map::new();
            if let Value::Object(fields) = old {
                for (k, v) in fields {
                    let replaced = k == "status" || (k == "metadata" && kept_meta.is_some());
                    if !replaced {
                        next.insert(k.clone(), v.clone());
                    }
                }
            }
            if let Some(meta) = kept_meta {
                next.insert("metadata".into(), meta);
            }
            if let Some(s) = status {
                next.insert("status".into(), s);
            }
            new = Value::Object(next);
        } else if res.subresources.status && part != Part::Approval {
            match old.get("status") {
                Some(s) => new["status"] = s.clone(),
                None => {
                    if let Some(m) = new.as_object_mut() {
                        m.remove("status");
                    }
                }
            }
        }
        // The pod's ephemeralcontainers and resize, and a CSR's approval, change one part each.
        match part {
            Part::EphemeralContainers => new = super::ephemeral::narrow(&new, old),
            Part::Resize => new = super::resize::narrow(&new, old),
            Part::Approval => new = super::approval::narrow(&new, old),
            Part::Main | Part::Status => {}
        }
        {
            let meta = meta_mut(&mut new);
            let old_uid = old_meta
                .get("uid")
                .and_then(Value::as_str)
                .unwrap_or_default();
            match meta.get("uid").and_then(Value::as_str) {
                None | Some("") => {
                    meta.insert("uid".into(), json!(old_uid));
                }
                Some(uid) if uid == old_uid => {}
                Some(uid) => {
                    return Err(ApiError::Conflict {
                        resource: res.group_resource(),
                        name: name.to_string(),
                        detail: format!(
                            "Precondition failed: UID in precondition: {uid}, UID in object meta: {old_uid}"
                        ),
                    });
                }
            }
            for field in [
                "creationTimestamp",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
                "generation",
                "managedFields",
                "namespace",
            ] {
                match old_meta.get(field) {
                    Some(v) => {
                        meta.insert(field.into(), v.clone());
                    }
                    None => {
                        meta.remove(field);
                    }
                }
            }
            meta.remove("selfLink");
            meta.insert("name".into(), json!(name));
        }
        if old_meta.get("deletionTimestamp").is_some() {
            let old_f: Vec<&Value> = old_meta
                .get("finalizers")
                .and_then(Value::as_array)
                .map(|a| a.iter().collect())
                .unwrap_or_default();
            let added: Vec<String> = new
                .pointer("/metadata/finalizers")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter(|f| !old_f.contains(f))
                .map(|f| format!("{f}"))
                .collect();
            if !added.is_empty() {
                return Err(Self::invalid(
                    res,
                    name,
                    vec![FieldError::forbidden(
                        "metadata.finalizers",
                        format!(
                            "no new finalizers can be added if the object is being deleted, found new finalizers []string{{{}}}",
                            added.join(", ")
                        ),
                    )],
                ));
            }
        }
        if part == Part::Main {
            res.strategy.prepare_for_update(&mut new, old);
        }
        match part {
            Part::EphemeralContainers => {
                let causes = super::ephemeral::validate(&new, old);
                if !causes.is_empty() {
                    return Err(Self::invalid(res, name, causes));
                }
            }
            Part::Resize => {
                let causes = super::resize::validate(&new, old);
                if !causes.is_empty() {
                    return Err(Self::invalid(res, name, causes));
                }
            }
            Part::Approval => {
                let causes = super::approval::validate(&new, old);
                if !causes.is_empty() {
                    return Err(Self::invalid(res, name, causes));
                }
            }
            Part::Status if res.kind == "CertificateSigningRequest" => {
                let causes = super::approval::validate_status(&new, old);
                if !causes.is_empty() {
                    return Err(Self::invalid(res, name, causes));
                }
                self.validate_object(res, &new, Some(old), warnings)?;
            }
            Part::Main | Part::Status => self.validate_object(res, &new, Some(old), warnings)?,
        }
        admission.validate(&attrs, &new)?;
        if res.strategy.tracks_generation()
            && part == Part::Main
            && res.strategy.generation_changed(&new, old)
        {
            let g = old_meta
                .get("generation")
                .and_then(Value::as_i64)
                .unwrap_or(0);
            meta_mut(&mut new).insert("generation".into(), json!(g + 1));
        }
        record_ownership(res, part, Some(old), &mut new, applied, sent, opts);
        check_depth(res, name, &new)?;
        Ok(new)
    }
}

/// The metadata a status write keeps for a kind whose status strategy resets only `reset` of
/// it: the new object's metadata, with the keys in `reset` as stored (absent if absent there).
fn status_metadata(new: &Value, old_meta: &Value, reset: &[&str]) -> Value {
    let mut meta = match new.get("metadata") {
        Some(Value::Object(m)) => m.clone(),
        _ => return old_meta.clone(),
    };
    for key in reset {
        match old_meta.get(*key) {
            Some(v) => {
                meta.insert((*key).to_string(), v.clone());
            }
            None => {
                meta.remove(*key);
            }
        }
    }
    Value::Object(meta)
}
