//! The CRD controller: decides which names each CustomResourceDefinition gets, serves the
//! accepted ones, reports it in the CRD's status, and empties and releases deleted CRDs.
//!
//! Each pass ([`sync`]) reads every stored CRD and, in this order:
//! 1. accepts names: CRDs that already hold their names first, then oldest first; a CRD whose
//!    plural, singular, short names, kind or list kind is taken in its group (by a built-in
//!    resource or an earlier CRD) gets `NamesAccepted=False` with the conflict's reason;
//! 2. replaces the registry's custom resources with the served versions of every CRD whose
//!    names are accepted (or that is already `Established`), so discovery, OpenAPI and the
//!    endpoints change together;
//! 3. writes each CRD's status (`NamesAccepted`, `Established`, `Terminating`,
//!    `acceptedNames`) when it differs, one write (one `MODIFIED` event) per change. A CRD is
//!    established only after step 2, so a client that sees `Established=True` finds it served;
//! 4. for a deleted CRD, deletes every object of it through the ordinary delete path (each
//!    object's own finalizers hold it as usual) and, once none is left, removes the
//!    `customresourcecleanup.apiextensions.k8s.io` finalizer, which deletes the CRD; the next
//!    pass stops serving it.
//!
//! The task runs a pass on every CRD change and, while a deleted CRD still has objects, a few
//! times a second.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::level::{self, Next, Scope};
use crate::api::error::ApiError;
use crate::registry::crd::custom::Build;
use crate::registry::crd::{self, CLEANUP_FINALIZER, STORAGE_PREFIX, has_condition};
use crate::registry::rest::{DeleteOptions, Deleted, Part, Target, WriteOptions, now_rfc3339};
use crate::registry::{Registry, Resource};
use crate::storage::{ListOptions, Storage, StorageError};

/// How often deleted CRDs are re-checked while objects remain.
const RECHECK: Duration = Duration::from_millis(200);

/// Runs the controller until `stop` is cancelled.
pub async fn run(registry: Arc<Registry>, stop: CancellationToken) {
    let registry = &*registry;
    let prefix = format!("{STORAGE_PREFIX}/");
    level::run(
        registry,
        &stop,
        "crd",
        &[Scope::all(&prefix)],
        |_| async move {
            match sync(registry).await {
                Ok(false) => Next::Wait,
                Ok(true) => Next::RecheckAfter(RECHECK),
                Err(e) => {
                    tracing::warn!(error = %e, "CRD controller pass failed");
                    Next::RecheckAfter(RECHECK)
                }
            }
        },
    )
    .await;
}

/// Why a CRD's names were not accepted.
#[derive(Clone, Debug, PartialEq)]
struct Conflict {
    reason: &'static str,
    message: String,
}

/// The names taken in one group.
#[derive(Default)]
struct Taken {
    plural: BTreeSet<String>,
    singular: BTreeSet<String>,
    short: BTreeSet<String>,
    kind: BTreeSet<String>,
    list_kind: BTreeSet<String>,
}

fn text<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_default()
}

fn strings(v: &Value, pointer: &str) -> Vec<String> {
    v.pointer(pointer)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|x| x.as_str().map(str::to_string))
        .collect()
}

/// The names a CRD asks for, defaults filled.
struct Names {
    plural: String,
    singular: String,
    short: Vec<String>,
    kind: String,
    list_kind: String,
    categories: Vec<String>,
}

impl Names {
    fn of(crd: &Value) -> Names {
        let kind = text(crd, "/spec/names/kind").to_string();
        Names {
            plural: text(crd, "/spec/names/plural").to_string(),
            singular: match text(crd, "/spec/names/singular") {
                "" => kind.to_ascii_lowercase(),
                x => x.to_string(),
            },
            short: strings(crd, "/spec/names/shortNames"),
            list_kind: match text(crd, "/spec/names/listKind") {
                "" => format!("{kind}List"),
                x => x.to_string(),
            },
            categories: strings(crd, "/spec/names/categories"),
            kind,
        }
    }

    fn accepted_json(&self) -> Value {
        let mut v = json!({"plural": self.plural, "singular": self.singular,
                           "kind": self.kind, "listKind": self.list_kind});
        if !self.short.is_empty() {
            v["shortNames"] = json!(self.short);
        }
        if !self.categories.is_empty() {
            v["categories"] = json!(self.categories);
        }
        v
    }
}

impl Taken {
    fn conflict(&self, n: &Names) -> Option<Conflict> {
        let used = |reason: &'static str, name: &str| {
            Some(Conflict {
                reason,
                message: format!("{name:?} is already in use"),
            })
        };
        if self.plural.contains(&n.plural) {
            return used("PluralConflict", &n.plural);
        }
        if self.singular.contains(&n.singular) {
            return used("SingularConflict", &n.singular);
        }
        if let Some(x) = n.short.iter().find(|x| self.short.contains(*x)) {
            return used("ShortNamesConflict", x);
        }
        if self.kind.contains(&n.kind) {
            return used("KindConflict", &n.kind);
        }
        if self.list_kind.contains(&n.list_kind) {
            return used("ListKindConflict", &n.list_kind);
        }
        None
    }

    fn take(&mut self, n: &Names) {
        self.plural.insert(n.plural.clone());
        self.singular.insert(n.singular.clone());
        self.short.extend(n.short.iter().cloned());
        self.kind.insert(n.kind.clone());
        self.list_kind.insert(n.list_kind.clone());
    }
}

fn taken_by_builtins(registry: &Registry) -> HashMap<String, Taken> {
    let mut out: HashMap<String, Taken> = HashMap::new();
    for r in registry.builtin_resources() {
        let t = out.entry(r.group.clone()).or_default();
        t.plural.insert(r.plural.clone());
        t.singular.insert(r.singular.clone());
        t.short.extend(r.short_names.iter().cloned());
        t.kind.insert(r.kind.clone());
        t.list_kind.insert(r.list_kind.clone());
    }
    out
}

/// Sets condition `kind` in `conditions`, keeping its transition time when the status is
/// unchanged.
fn set_condition(
    conditions: &mut Vec<Value>,
    kind: &str,
    status: bool,
    reason: &str,
    message: &str,
) {
    let status = if status { "True" } else { "False" };
    let existing = conditions.iter_mut().find(|c| c["type"] == kind);
    let time = match &existing {
        Some(c) if c["status"] == status => c["lastTransitionTime"].clone(),
        _ => json!(now_rfc3339()),
    };
    let cond = json!({"type": kind, "status": status, "lastTransitionTime": time,
                      "reason": reason, "message": message});
    match existing {
        Some(c) => *c = cond,
        None => conditions.push(cond),
    }
}

/// The status `crd` should have given the names decision; `terminating` is the Terminating
/// condition's (reason, message), if deleted.
fn desired_status(
    crd: &Value,
    conflict: Option<&Conflict>,
    terminating: Option<(&str, &str)>,
) -> Value {
    let mut status = crd.get("status").cloned().unwrap_or_else(|| json!({}));
    if !status.is_object() {
        status = json!({});
    }
    let mut conditions: Vec<Value> = status
        .get("conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let was_established = has_condition(crd, "Established");
    match conflict {
        None => {
            set_condition(
                &mut conditions,
                "NamesAccepted",
                true,
                "NoConflicts",
                "no conflicts found",
            );
            status["acceptedNames"] = Names::of(crd).accepted_json();
            set_condition(
                &mut conditions,
                "Established",
                true,
                "InitialNamesAccepted",
                "the initial names have been accepted",
            );
        }
        Some(c) => {
            set_condition(
                &mut conditions,
                "NamesAccepted",
                false,
                c.reason,
                &c.message,
            );
            if !was_established {
                set_condition(
                    &mut conditions,
                    "Established",
                    false,
                    "NotAccepted",
                    "not all names are accepted",
                );
            }
        }
    }
    if let Some((reason, message)) = terminating {
        set_condition(&mut conditions, "Terminating", true, reason, message);
    }
    status["conditions"] = Value::Array(conditions);
    status
}

/// One pass over every CRD; returns whether a deleted CRD still waits for its objects.
pub async fn sync(registry: &Registry) -> Result<bool, StorageError> {
    let page = registry.store().list(
        &format!("{STORAGE_PREFIX}/"),
        &ListOptions::default(),
        &|_| true,
    )?;
    let mut crds = Vec::with_capacity(page.items.len());
    for stored in page.items {
        crds.push(stored.value()?);
    }
    // Holders of accepted names first, then oldest first.
    crds.sort_by_cached_key(|c| {
        (
            !has_condition(c, "NamesAccepted"),
            text(c, "/metadata/creationTimestamp").to_string(),
            text(c, "/metadata/name").to_string(),
        )
    });
    let mut taken = taken_by_builtins(registry);
    let mut decisions = Vec::with_capacity(crds.len());
    let mut custom: Vec<Resource> = Vec::new();
    for c in &crds {
        let names = Names::of(c);
        let group = taken.entry(text(c, "/spec/group").to_string()).or_default();
        let conflict = group.conflict(&names);
        if conflict.is_none() {
            group.take(&names);
        }
        let terminating = c.pointer("/metadata/deletionTimestamp").is_some();
        if conflict.is_none() || has_condition(c, "Established") {
            custom.extend(crd::custom::resources_of(
                c,
                Build {
                    all_versions: false,
                    terminating,
                },
            ));
        }
        decisions.push(conflict);
    }
    registry.set_custom_resources(custom);

    let catalog = registry.catalog();
    let Some(crd_res) = catalog.find(crd::GROUP, "v1", "customresourcedefinitions") else {
        return Ok(false);
    };
    let mut pending = false;
    for (c, conflict) in crds.iter().zip(&decisions) {
        let name = text(c, "/metadata/name").to_string();
        let deleting = c.pointer("/metadata/deletionTimestamp").is_some();
        if !deleting {
            write_status(registry, &crd_res, &name, conflict.as_ref(), None).await;
            continue;
        }
        write_status(
            registry,
            &crd_res,
            &name,
            conflict.as_ref(),
            Some((
                "InstanceDeletionInProgress",
                "CustomResource deletion is in progress",
            )),
        )
        .await;
        let remaining = delete_instances(registry, c).await;
        if remaining > 0 {
            pending = true;
            continue;
        }
        write_status(
            registry,
            &crd_res,
            &name,
            conflict.as_ref(),
            Some(("InstanceDeletionCompleted", "removed all instances")),
        )
        .await;
        if let Err(e) = release(registry, &crd_res, &name).await {
            tracing::warn!(crd = %name, error = %e, "removing the cleanup finalizer failed");
            pending = true;
        }
    }
    Ok(pending)
}

/// Writes the CRD's status if it differs from the desired one.
async fn write_status(
    registry: &Registry,
    crd_res: &Arc<Resource>,
    name: &str,
    conflict: Option<&Conflict>,
    terminating: Option<(&str, &str)>,
) {
    let mut produce = |current: &Value| -> Result<Value, ApiError> {
        let mut next = current.clone();
        next["status"] = desired_status(current, conflict, terminating);
        Ok(next)
    };
    let target = Target {
        res: crd_res,
        ns: None,
        name,
        part: Part::Status,
    };
    match registry
        .write_existing(target, None, &mut produce, &WriteOptions::default())
        .await
    {
        Ok(_) | Err(ApiError::NotFound { .. }) => {}
        Err(e) => tracing::warn!(crd = %name, error = %e, "writing CRD status failed"),
    }
}

/// Removes the cleanup finalizer (deleting the CRD when it was the last one).
async fn release(registry: &Registry, crd_res: &Arc<Resource>, name: &str) -> Result<(), ApiError> {
    let mut produce = |current: &Value| -> Result<Value, ApiError> {
        let mut next = current.clone();
        if let Some(list) = next
            .pointer_mut("/metadata/finalizers")
            .and_then(Value::as_array_mut)
        {
            list.retain(|f| f != CLEANUP_FINALIZER);
        }
        Ok(next)
    };
    let target = Target {
        res: crd_res,
        ns: None,
        name,
        part: Part::Main,
    };
    match registry
        .write_existing(target, None, &mut produce, &WriteOptions::default())
        .await
    {
        Ok(_) | Err(ApiError::NotFound { .. }) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Deletes every object of a CRD; returns how many are still there.
async fn delete_instances(registry: &Registry, crd: &Value) -> usize {
    let resources = crd::custom::resources_of(
        crd,
        Build {
            all_versions: true,
            terminating: true,
        },
    );
    let storage = crd::storage_version(crd);
    let Some(res) = resources
        .into_iter()
        .find(|r| Some(r.version.as_str()) == storage)
        .map(Arc::new)
    else {
        return 0;
    };
    let mut remaining = 0;
    let prefix = res.collection_prefix(None);
    for key in registry.store().keys(&prefix) {
        let rest = key.strip_prefix(&prefix).unwrap_or_default();
        let (ns, name) = match rest.split_once('/') {
            Some((ns, name)) if res.namespaced => (Some(ns.to_string()), name.to_string()),
            _ => (None, rest.to_string()),
        };
        match registry
            .delete(&res, ns.as_deref(), &name, &DeleteOptions::default())
            .await
        {
            Ok(Deleted::Gone(_)) | Err(ApiError::NotFound { .. }) => {}
            Ok(Deleted::Pending(_)) => remaining += 1,
            Err(e) => {
                tracing::debug!(name = %name, error = %e, "deleting a custom object");
                remaining += 1;
            }
        }
    }
    remaining
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crd(plural: &str, kind: &str, short: &[&str]) -> Value {
        json!({"metadata": {"name": format!("{plural}.example.com")},
               "spec": {"group": "example.com", "names": {"plural": plural, "kind": kind, "shortNames": short}}})
    }

    #[test]
    fn names_conflict_by_category_with_the_first_taken_name() {
        let mut taken = Taken::default();
        taken.take(&Names::of(&crd("widgets", "Widget", &["wd"])));
        let c = taken.conflict(&Names::of(&crd("widgets", "Gadget", &[])));
        assert_eq!(
            c.map(|c| (c.reason, c.message)),
            Some((
                "PluralConflict",
                "\"widgets\" is already in use".to_string()
            ))
        );
        let c = taken.conflict(&Names::of(&crd("gadgets", "Gadget", &["wd"])));
        assert_eq!(c.map(|c| c.reason), Some("ShortNamesConflict"));
        let c = taken.conflict(&Names::of(&crd("gadgets", "Widget", &[])));
        assert_eq!(c.map(|c| c.reason), Some("SingularConflict"));
        assert!(
            taken
                .conflict(&Names::of(&crd("gadgets", "Gadget", &["gd"])))
                .is_none()
        );
    }

    #[test]
    fn accepted_names_establish_and_keep_their_transition_time() {
        let c = crd("widgets", "Widget", &["wd"]);
        let status = desired_status(&c, None, None);
        assert_eq!(status["acceptedNames"]["listKind"], "WidgetList");
        assert_eq!(status["acceptedNames"]["shortNames"], json!(["wd"]));
        let mut again = c.clone();
        again["status"] = status.clone();
        assert_eq!(desired_status(&again, None, None), status);
        assert!(has_condition(&again, "Established"));
    }

    #[test]
    fn a_conflict_is_reported_and_blocks_establishment() {
        let c = crd("widgets", "Widget", &[]);
        let conflict = Conflict {
            reason: "KindConflict",
            message: "\"Widget\" is already in use".into(),
        };
        let status = desired_status(&c, Some(&conflict), None);
        let conds = status["conditions"].as_array().expect("conditions");
        assert_eq!(conds[0]["status"], "False");
        assert_eq!(conds[0]["reason"], "KindConflict");
        assert_eq!(conds[1]["reason"], "NotAccepted");
    }
}
