//! The checks every write shares: the namespace (from the URL, existing, not terminating),
//! metadata and strategy validation, the immutable uid of a patch, the nesting limit, and the
//! ownership record (`metadata.managedFields`) a write leaves behind.

use std::sync::LazyLock;

use memchr::memmem::Finder;
use serde_json::{Value, json};

use super::{Part, WriteOptions, meta_mut, meta_str, name_of, now_rfc3339};
use crate::api::error::{ApiError, GroupResource};
use crate::api::limits::{MAX_DEPTH, deeper_than};
use crate::patch::apply::{
    Lists, put_managed, same_ignoring_managed_fields, settle_times, track_update,
};
use crate::patch::fields::{ManagedEntry, Operation, decode_managed};
use crate::registry::Registry;
use crate::registry::resource::Resource;
use crate::registry::validation::{FieldError, check_name, validate_object_meta};

impl Registry {
    /// Fails unless namespace `ns` exists and is not terminating.
    pub(super) fn check_namespace_for_create(
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
        // A namespace that is not being deleted has neither word anywhere: nothing to read.
        static DELETION: LazyLock<Finder<'static>> =
            LazyLock::new(|| Finder::new("deletionTimestamp"));
        static TERMINATING: LazyLock<Finder<'static>> =
            LazyLock::new(|| Finder::new("Terminating"));
        if DELETION.find(&stored.bytes).is_none() && TERMINATING.find(&stored.bytes).is_none() {
            return Ok(());
        }
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
    pub(super) fn settle_namespace(
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

    pub(super) fn invalid(res: &Resource, name: &str, causes: Vec<FieldError>) -> ApiError {
        ApiError::Invalid {
            kind: res.qualified_kind(),
            group: res.group.clone(),
            name: name.to_string(),
            causes,
        }
    }

    /// Metadata and strategy validation of a whole object.
    pub(super) fn validate_object(
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
}

/// Fails with 422 when a patched or applied object carries a uid other than the stored one
/// (`metadata.uid` is immutable; a PUT's uid is a precondition instead, 409).
pub(super) fn check_uid_unchanged(
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
pub(super) fn record_ownership(
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
    let subresource = part.subresource();
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
pub(super) fn check_depth(res: &Resource, name: &str, obj: &Value) -> Result<(), ApiError> {
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
