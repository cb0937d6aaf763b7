//! The write verbs and `get`, with the semantics every kind shares.
//!
//! Objects move through these functions in their *served* form (the resource's schema); the
//! strategy converts to the stored form just before storage and back just after.

use std::sync::Arc;

use bytes::Bytes;
use rand::Rng;
use serde_json::{Map, Value, json};

use super::Registry;
use super::admission;
use super::resource::Resource;
use super::validation::{FieldError, check_name, validate_object_meta};
use crate::api::error::{ApiError, GroupResource};
use crate::api::limits::{MAX_DEPTH, deeper_than};
use crate::api::propagation::Propagation;
use crate::patch::apply::{
    ApplyParams, Lists, put_managed, same_ignoring_managed_fields, settle_times, track_update,
};
use crate::patch::fields::{ManagedEntry, Operation, decode_managed};
use crate::storage::{
    Outcome, Preconditions, Storage, StorageError, Stored, Update, resource_version_of,
};

pub use crate::api::options::{FieldValidation, WriteOptions};

/// Which part of an object a write addresses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Part {
    /// The main resource: everything but status (when a status subresource exists).
    Main,
    /// The `/status` subresource: only status.
    Status,
}

/// The object a write addresses.
#[derive(Clone, Copy, Debug)]
pub struct Target<'a> {
    /// Its resource.
    pub res: &'a Arc<Resource>,
    /// Its namespace (for namespaced resources).
    pub ns: Option<&'a str>,
    /// Its name.
    pub name: &'a str,
    /// Which part of it is written.
    pub part: Part,
}

/// A successful write: HTTP status, the object in served form, warnings for the client.
#[derive(Clone, Debug)]
pub struct Reply {
    /// 200 or 201.
    pub code: u16,
    /// The object's JSON.
    pub body: Bytes,
    /// `Warning` headers to send.
    pub warnings: Vec<String>,
}

/// `DeleteOptions`, from the body or the query.
#[derive(Clone, Debug, Default)]
pub struct DeleteOptions {
    /// `preconditions`.
    pub preconditions: Preconditions,
    /// `dryRun=All`.
    pub dry_run: bool,
    /// `propagationPolicy`, read by [`DeleteOptions::parse_propagation`].
    pub propagation: Option<Propagation>,
    /// `gracePeriodSeconds`.
    pub grace_period_seconds: Option<i64>,
    /// `orphanDependents` (deprecated).
    pub orphan_dependents: Option<bool>,
}

/// The finalizer that makes the garbage collector delete an object's dependents first.
pub const FOREGROUND_DELETION: &str = "foregroundDeletion";
/// The finalizer that makes the garbage collector orphan an object's dependents first.
pub const ORPHAN: &str = "orphan";

impl DeleteOptions {
    /// Reads a `propagationPolicy` as Kubernetes validates it, together with the deprecated
    /// `orphanDependents` it may not be combined with: one 422 with every cause.
    pub fn parse_propagation(
        raw: Option<&str>,
        orphan_dependents: Option<bool>,
    ) -> Result<Option<Propagation>, ApiError> {
        let Some(raw) = raw else { return Ok(None) };
        let parsed = Propagation::parse(raw);
        let mut causes = Vec::new();
        if parsed.is_none() {
            causes.push(FieldError::not_supported(
                "propagationPolicy",
                json!(raw),
                &["Foreground", "Background", "Orphan", "nil"],
            ));
        }
        if orphan_dependents.is_some() {
            causes.push(FieldError::invalid(
                "propagationPolicy",
                json!(raw),
                "orphanDependents and deletionPropagation cannot be both set",
            ));
        }
        if causes.is_empty() {
            Ok(parsed)
        } else {
            Err(ApiError::Invalid {
                kind: "DeleteOptions.meta.k8s.io".into(),
                group: "meta.k8s.io".into(),
                name: String::new(),
                causes,
            })
        }
    }

    /// Checks the options as Kubernetes does (for options built in code rather than parsed).
    pub fn validate(&self) -> Result<(), ApiError> {
        match self.propagation {
            Some(p) => {
                Self::parse_propagation(Some(p.as_str()), self.orphan_dependents).map(|_| ())
            }
            None => Ok(()),
        }
    }

    /// What happens to the dependents, decided once: the deprecated `orphanDependents`
    /// (true orphans, false deletes in the background), then the policy, then a garbage
    /// collector finalizer already on the object (the first one), then Background.
    fn effective_propagation(&self, finalizers: &[Value]) -> Propagation {
        match (self.orphan_dependents, self.propagation) {
            (Some(true), _) => Propagation::Orphan,
            (Some(false), _) => Propagation::Background,
            (None, Some(p)) => p,
            (None, None) => finalizers
                .iter()
                .find_map(|f| match f.as_str() {
                    Some(ORPHAN) => Some(Propagation::Orphan),
                    Some(FOREGROUND_DELETION) => Some(Propagation::Foreground),
                    _ => None,
                })
                .unwrap_or(Propagation::Background),
        }
    }

    /// The finalizers an object gets when deleted with these options: its own, with the
    /// garbage collector's replaced by the ones the policy asks for. `None` when unchanged.
    pub fn gc_finalizers(&self, obj: &Value) -> Option<Vec<Value>> {
        let current: Vec<Value> = obj
            .pointer("/metadata/finalizers")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let mut next: Vec<Value> = current
            .iter()
            .filter(|f| !matches!(f.as_str(), Some(ORPHAN | FOREGROUND_DELETION)))
            .cloned()
            .collect();
        match self.effective_propagation(&current) {
            Propagation::Orphan => next.push(json!(ORPHAN)),
            Propagation::Foreground => next.push(json!(FOREGROUND_DELETION)),
            Propagation::Background => {}
        }
        let set = |v: &[Value]| -> std::collections::BTreeSet<String> {
            v.iter()
                .filter_map(Value::as_str)
                .map(String::from)
                .collect()
        };
        (set(&current) != set(&next)).then_some(next)
    }
}

/// How a write records ownership in `metadata.managedFields`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum WriteMode {
    /// Create, update, non-apply patch: the fields the write changes become the manager's.
    Update,
    /// Server-side apply: the object arrives with its managedFields already worked out.
    Apply,
}

/// What a delete did.
#[derive(Clone, Debug)]
pub enum Deleted {
    /// The object is gone; its last state.
    Gone(Value),
    /// The object stays until its finalizers are removed; its current state.
    Pending(Value),
}

/// The current time as Kubernetes writes timestamps: RFC 3339, seconds, UTC.
pub fn now_rfc3339() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

fn meta_mut(obj: &mut Value) -> &mut Map<String, Value> {
    if !obj["metadata"].is_object() {
        obj["metadata"] = json!({});
    }
    match obj.get_mut("metadata").and_then(Value::as_object_mut) {
        Some(m) => m,
        None => unreachable!("metadata was just made an object"),
    }
}

/// Sets `metadata.finalizers`, leaving the field out when the list is empty.
fn set_finalizers(obj: &mut Value, finalizers: Vec<Value>) {
    let meta = meta_mut(obj);
    if finalizers.is_empty() {
        meta.remove("finalizers");
    } else {
        meta.insert("finalizers".into(), Value::Array(finalizers));
    }
}

fn meta_str<'a>(obj: &'a Value, field: &str) -> Option<&'a str> {
    obj.get("metadata")?.get(field)?.as_str()
}

fn name_of(obj: &Value) -> &str {
    meta_str(obj, "name").unwrap_or_default()
}

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
    fn storage(&self) -> &dyn Storage {
        &**self.store()
    }

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
        serde_json::to_vec(&served)
            .map(Bytes::from)
            .map_err(|e| ApiError::Internal(e.to_string()))
    }

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

    /// Fails unless namespace `ns` exists and is not terminating.
    fn check_namespace_for_create(
        &self,
        res: &Resource,
        ns: &str,
        name: &str,
    ) -> Result<(), ApiError> {
        let namespaces = GroupResource {
            group: String::new(),
            resource: "namespaces".into(),
        };
        let stored = self
            .storage()
            .get(&format!("/core/namespaces/{ns}"))
            .map_err(|e| ApiError::from_storage(e, &namespaces, ns))?;
        // Read only the two fields that matter, not the whole namespace.
        #[derive(serde::Deserialize)]
        struct Meta<'a> {
            #[serde(rename = "deletionTimestamp", borrow)]
            deletion_timestamp: Option<&'a str>,
        }
        #[derive(serde::Deserialize)]
        struct Status<'a> {
            #[serde(borrow)]
            phase: Option<&'a str>,
        }
        #[derive(serde::Deserialize)]
        struct Namespace<'a> {
            #[serde(borrow)]
            metadata: Meta<'a>,
            #[serde(borrow)]
            status: Option<Status<'a>>,
        }
        let v: Namespace<'_> =
            serde_json::from_slice(&stored.bytes).map_err(|e| ApiError::Internal(e.to_string()))?;
        if v.metadata.deletion_timestamp.is_some()
            || v.status.and_then(|s| s.phase) == Some("Terminating")
        {
            return Err(ApiError::Forbidden {
                resource: res.group_resource(),
                name: Some(name.to_string()),
                message: format!(
                    "{} {name:?} is forbidden: unable to create new content in namespace {ns} because it is being terminated",
                    res.group_resource()
                ),
                causes: vec![
                    json!({"reason": "NamespaceTerminating", "message": format!("namespace {ns} is being terminated"), "field": "metadata.namespace"}),
                ],
            });
        }
        Ok(())
    }

    /// Puts the namespace from the URL into the object, or fails if the body says another.
    fn settle_namespace(
        &self,
        res: &Resource,
        obj: &mut Value,
        ns: Option<&str>,
    ) -> Result<(), ApiError> {
        let meta = meta_mut(obj);
        if !res.namespaced {
            meta.remove("namespace");
            return Ok(());
        }
        let url_ns = ns.unwrap_or_default();
        match meta.get("namespace").and_then(Value::as_str) {
            None | Some("") => {
                meta.insert("namespace".into(), json!(url_ns));
                Ok(())
            }
            Some(body_ns) if body_ns == url_ns => Ok(()),
            Some(_) => Err(ApiError::BadRequest(
                "the namespace of the provided object does not match the namespace sent on the request".into(),
            )),
        }
    }

    fn invalid(res: &Resource, name: &str, causes: Vec<FieldError>) -> ApiError {
        ApiError::Invalid {
            kind: res.qualified_kind(),
            group: res.group.clone(),
            name: name.to_string(),
            causes,
        }
    }

    /// Metadata and strategy validation of a whole object.
    fn validate_object(
        &self,
        res: &Resource,
        obj: &Value,
        old: Option<&Value>,
        warnings: &mut Vec<String>,
    ) -> Result<(), ApiError> {
        let name = name_of(obj);
        let mut causes = Vec::new();
        if name.is_empty() {
            causes.push(FieldError::required(
                "metadata.name",
                "name or generateName is required",
            ));
        } else {
            for why in check_name(res.strategy.name_rule(), name) {
                causes.push(FieldError::invalid("metadata.name", json!(name), why));
            }
        }
        let (meta_errs, meta_warnings) = validate_object_meta(obj);
        causes.extend(meta_errs);
        warnings.extend(meta_warnings);
        causes.extend(match old {
            None => res.strategy.validate(obj),
            Some(old) => res.strategy.validate_update(obj, old),
        });
        if causes.is_empty() {
            Ok(())
        } else {
            Err(Self::invalid(res, name, causes))
        }
    }

    /// `POST` a new object. `body` is the decoded request body.
    pub async fn create(
        &self,
        res: &Arc<Resource>,
        ns: Option<&str>,
        body: Value,
        opts: &WriteOptions,
    ) -> Result<Reply, ApiError> {
        self.create_with(res, ns, body, opts, WriteMode::Update)
            .await
    }

    async fn create_with(
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
        if meta
            .get("resourceVersion")
            .and_then(Value::as_str)
            .is_some_and(|rv| !rv.is_empty())
        {
            return Err(ApiError::Internal(
                "resourceVersion should not be set on objects to be created".into(),
            ));
        }
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
        res.strategy.prepare_for_create(&mut obj);
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
        self.validate_object(res, &obj, None, &mut warnings)?;
        admission.validate(&attrs, &obj)?;
        let name = name_of(&obj).to_string();
        if res.namespaced {
            self.check_namespace_for_create(res, ns.unwrap_or_default(), &name)?;
        }
        {
            let meta = meta_mut(&mut obj);
            meta.insert("uid".into(), json!(uuid::Uuid::new_v4().to_string()));
            meta.insert("creationTimestamp".into(), json!(now_rfc3339()));
            if res.strategy.tracks_generation() {
                meta.insert("generation".into(), json!(1));
            }
        }
        record_ownership(res, Part::Main, None, &mut obj, applied, None, opts);
        check_depth(res, &name, &obj)?;
        if opts.dry_run {
            if self.storage().get(&res.key(ns, &name)).is_ok() {
                return Err(ApiError::AlreadyExists {
                    resource: res.group_resource(),
                    name,
                    message: None,
                });
            }
            return Ok(Reply {
                code: 201,
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
                        code: 201,
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
            subresource: match part {
                Part::Main => "",
                Part::Status => "status",
            },
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
            } else if part == Part::Status {
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

    async fn write_existing_with(
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
                    let deleting = new.pointer("/metadata/deletionTimestamp").is_some();
                    let no_finalizers = new
                        .pointer("/metadata/finalizers")
                        .and_then(Value::as_array)
                        .is_none_or(Vec::is_empty);
                    // A namespace also waits for its spec finalizers (the namespace controller's).
                    let spec_finalizers_left = res.kind == "Namespace"
                        && new
                            .pointer("/spec/finalizers")
                            .and_then(Value::as_array)
                            .is_some_and(|f| !f.is_empty());
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
                code: 200,
                body: self.served(res, &written.stored)?,
                warnings,
            }),
            Err(StorageError::Aborted) => match (failure, dry_result) {
                (Some(e), _) => Err(e),
                (None, Some(v)) => Ok(Reply {
                    code: 200,
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
        let old_meta = old.get("metadata").cloned().unwrap_or_else(|| json!({}));
        if part == Part::Status {
            let status = new.get("status").cloned();
            new = old.clone();
            match status {
                Some(s) => new["status"] = s,
                None => {
                    if let Some(m) = new.as_object_mut() {
                        m.remove("status");
                    }
                }
            }
        } else if res.subresources.status {
            match old.get("status") {
                Some(s) => new["status"] = s.clone(),
                None => {
                    if let Some(m) = new.as_object_mut() {
                        m.remove("status");
                    }
                }
            }
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
        self.validate_object(res, &new, Some(old), warnings)?;
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

    /// `DELETE` one object.
    pub async fn delete(
        &self,
        res: &Arc<Resource>,
        ns: Option<&str>,
        name: &str,
        opts: &DeleteOptions,
    ) -> Result<Deleted, ApiError> {
        opts.validate()?;
        if res.kind == "Namespace" && super::builtin::IMMORTAL_NAMESPACES.contains(&name) {
            return Err(ApiError::Forbidden {
                resource: res.group_resource(),
                name: Some(name.to_string()),
                message: format!(
                    "namespaces {name:?} is forbidden: this namespace may not be deleted"
                ),
                causes: Vec::new(),
            });
        }
        let key = res.key(ns, name);
        let mut already: Option<Value> = None;
        let mut dry: Option<Deleted> = None;
        let mut step = |old_stored: Value| -> Update {
            let mut old = res.strategy.to_served(old_stored.clone());
            // The propagation policy becomes (or swaps) the garbage collector's finalizer.
            let gc_finalizers = opts.gc_finalizers(&old);
            if old.pointer("/metadata/deletionTimestamp").is_some() {
                let Some(finalizers) = gc_finalizers else {
                    already = Some(old);
                    return Update::Abort;
                };
                let none_left = finalizers.is_empty();
                set_finalizers(&mut old, finalizers);
                if opts.dry_run {
                    dry = Some(Deleted::Pending(old));
                    return Update::Abort;
                }
                let stored = res.strategy.to_stored(old);
                return if none_left && res.kind != "Namespace" {
                    Update::Delete(stored)
                } else {
                    Update::Put(stored)
                };
            }
            if let Some(finalizers) = gc_finalizers {
                set_finalizers(&mut old, finalizers);
            }
            let has_finalizers = old
                .pointer("/metadata/finalizers")
                .and_then(Value::as_array)
                .is_some_and(|f| !f.is_empty());
            let spec_finalizers = res.kind == "Namespace"
                && old
                    .pointer("/spec/finalizers")
                    .and_then(Value::as_array)
                    .is_some_and(|f| !f.is_empty());
            if has_finalizers || spec_finalizers {
                let mut marked = old;
                {
                    let meta = meta_mut(&mut marked);
                    meta.insert("deletionTimestamp".into(), json!(now_rfc3339()));
                    meta.insert("deletionGracePeriodSeconds".into(), json!(0));
                    if let Some(g) = meta.get("generation").and_then(Value::as_i64)
                        && g > 0
                    {
                        meta.insert("generation".into(), json!(g + 1));
                    }
                }
                if res.kind == "Namespace" {
                    marked["status"]["phase"] = json!("Terminating");
                }
                if opts.dry_run {
                    dry = Some(Deleted::Pending(marked));
                    return Update::Abort;
                }
                Update::Put(res.strategy.to_stored(marked))
            } else {
                if opts.dry_run {
                    dry = Some(Deleted::Gone(old));
                    return Update::Abort;
                }
                Update::Delete(old_stored)
            }
        };
        let result = self
            .storage()
            .guaranteed_update(&key, &opts.preconditions, &mut step)
            .await;
        match result {
            Ok(written) => {
                let v = written
                    .stored
                    .value()
                    .map(|v| res.strategy.to_served(v))
                    .map_err(|e| ApiError::Internal(e.to_string()))?;
                Ok(match written.outcome {
                    Outcome::Deleted => Deleted::Gone(v),
                    Outcome::Written | Outcome::Unchanged => Deleted::Pending(v),
                })
            }
            Err(StorageError::Aborted) => match (already, dry) {
                (Some(v), _) => Ok(Deleted::Pending(v)),
                (None, Some(d)) => Ok(d),
                (None, None) => Err(ApiError::Internal("delete aborted without a reason".into())),
            },
            Err(StorageError::Unreadable { message, .. }) => {
                self.delete_unreadable(res, ns, name, opts, &message).await
            }
            Err(e) => Err(ApiError::from_storage(e, &res.group_resource(), name)),
        }
    }

    /// Deletes an object whose stored bytes cannot be read back (written by an older server
    /// that let it be nested too deep). Its finalizers and owners cannot be read either, so it
    /// goes at once, as Kubernetes' `ignoreStoreReadErrorWithClusterBreakingPotential` delete
    /// does; watchers see a DELETED event that carries only its identity.
    async fn delete_unreadable(
        &self,
        res: &Arc<Resource>,
        ns: Option<&str>,
        name: &str,
        opts: &DeleteOptions,
        why: &str,
    ) -> Result<Deleted, ApiError> {
        let mut last = json!({
            "apiVersion": res.api_version(),
            "kind": res.kind,
            "metadata": {"name": name},
        });
        if res.namespaced
            && let Some(ns) = ns
        {
            last["metadata"]["namespace"] = json!(ns);
        }
        if opts.dry_run {
            return Ok(Deleted::Gone(last));
        }
        let key = res.key(ns, name);
        let stored = self
            .storage()
            .delete_unreadable(&key, &opts.preconditions, res.strategy.to_stored(last))
            .await
            .map_err(|e| ApiError::from_storage(e, &res.group_resource(), name))?;
        tracing::warn!(%key, reason = %why, "deleted an object that could not be read");
        let v = stored
            .value()
            .map(|v| res.strategy.to_served(v))
            .map_err(|e| ApiError::Internal(e.to_string()))?;
        Ok(Deleted::Gone(v))
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
            Part::Main => {}
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

/// Fails with 422 when a patched or applied object carries a uid other than the stored one
/// (`metadata.uid` is immutable; a PUT's uid is a precondition instead, 409).
pub(crate) fn check_uid_unchanged(
    res: &Resource,
    name: &str,
    new: &Value,
    current: &Value,
) -> Result<(), ApiError> {
    let uid = meta_str(new, "uid").unwrap_or_default();
    if uid.is_empty() || Some(uid) == meta_str(current, "uid") {
        return Ok(());
    }
    Err(Registry::invalid(
        res,
        name,
        vec![FieldError::invalid(
            "metadata.uid",
            json!(uid),
            "field is immutable",
        )],
    ))
}

/// Sets `new`'s managedFields: `applied` (an apply's entries) or the bookkeeping of an update
/// by the write's field manager over `sent` (entries the client sent) or the stored entries,
/// the writer's entry timed `now` unless nothing changed. A write without a field manager
/// (the server's own) leaves them as they are.
fn record_ownership(
    res: &Resource,
    part: Part,
    old: Option<&Value>,
    new: &mut Value,
    applied: Option<Vec<ManagedEntry>>,
    sent: Option<Vec<ManagedEntry>>,
    opts: &WriteOptions,
) {
    let Some(manager) = opts.field_manager.as_deref() else {
        return;
    };
    let subresource = match part {
        Part::Main => "",
        Part::Status => "status",
    };
    let schema = res.strategy.structural_schema();
    let lists = schema
        .as_deref()
        .map_or(Lists::Builtin(&res.kind), Lists::Custom);
    let (mut entries, operation) = match applied {
        Some(entries) => (entries, Operation::Apply),
        None => {
            let base = sent.unwrap_or_else(|| old.map(decode_managed).unwrap_or_default());
            let api_version = res.api_version();
            let writer = (manager, api_version.as_str(), subresource);
            (
                track_update(base, old, new, writer, lists),
                Operation::Update,
            )
        }
    };
    let old_entries = old.map(decode_managed).unwrap_or_default();
    let changed = old.is_none_or(|o| !same_ignoring_managed_fields(o, new));
    settle_times(
        &mut entries,
        &old_entries,
        (manager, operation, subresource),
        changed,
        &now_rfc3339(),
    );
    put_managed(new, &mut entries);
}

/// Fails with 422 when `obj`, as it would be stored, is nested deeper than [`MAX_DEPTH`], so
/// nothing is stored that the server or its clients cannot read back. The cause names the
/// field that holds the deepest value.
fn check_depth(res: &Resource, name: &str, obj: &Value) -> Result<(), ApiError> {
    if !deeper_than(obj, MAX_DEPTH) {
        return Ok(());
    }
    // The member of `v` (itself `above` levels down) that passes the limit.
    let deep_member = |v: &Value, above: usize| -> Option<String> {
        v.as_object()?
            .iter()
            .find(|(_, v)| deeper_than(v, MAX_DEPTH - above - 1))
            .map(|(k, _)| k.clone())
    };
    let mut field = deep_member(obj, 0).unwrap_or_default();
    let mut detail = format!("must not be nested more than {MAX_DEPTH} levels deep");
    if field == "metadata" {
        field = match deep_member(&obj["metadata"], 1) {
            Some(m) => format!("metadata.{m}"),
            None => field,
        };
        if field == "metadata.managedFields" {
            detail.push_str(
                ": managedFields records each field of the object 5 levels deeper than the field itself",
            );
        }
    }
    Err(Registry::invalid(
        res,
        name,
        vec![FieldError::forbidden(field, detail)],
    ))
}

fn to_bytes(v: &Value) -> Result<Bytes, ApiError> {
    serde_json::to_vec(v)
        .map(Bytes::from)
        .map_err(|e| ApiError::Internal(e.to_string()))
}
