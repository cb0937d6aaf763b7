//! The namespace controller: empties a terminating namespace, then lets it go.
//!
//! When a namespace has a `deletionTimestamp`, every namespaced object in it — of every
//! resource in the registry's catalog at that moment, so custom resources are included — is
//! deleted through the ordinary delete path (so each object's finalizers hold it as usual).
//! After each pass the namespace's `status.conditions` say what is left, as Kubernetes'
//! namespace controller reports it: `NamespaceContentRemaining` (how many objects of which
//! resources), `NamespaceFinalizersRemaining` (which finalizers hold them), and the three
//! failure conditions (`NamespaceDeletionDiscoveryFailure`,
//! `NamespaceDeletionGroupVersionParsingFailure`, `NamespaceDeletionContentFailure`), `False`
//! when all went well. Once nothing is left in the namespace, `kubernetes` is removed from
//! `spec.finalizers`, and the namespace itself is removed when no finalizer remains.
//!
//! The controller wakes on every namespace change and, while some namespace is terminating,
//! re-checks a few times a second for content whose finalizers have since been removed.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::level::{self, Next, Scope};
use crate::api::error::ApiError;
use crate::registry::Registry;
use crate::registry::rest::{DeleteOptions, Deleted, Part, Target, WriteOptions, now_rfc3339};
use crate::storage::{ListOptions, Storage, StorageError};

/// How often terminating namespaces are re-checked while content remains.
const RECHECK: Duration = Duration::from_millis(200);

/// Runs the controller until `stop` is cancelled.
pub async fn run(registry: Arc<Registry>, stop: CancellationToken) {
    let registry = &*registry;
    level::run(
        registry,
        &stop,
        "namespace",
        &[Scope::all("/core/namespaces/")],
        |_| async move {
            match sweep(registry).await {
                Ok(false) => Next::Wait,
                Ok(true) => Next::RecheckAfter(RECHECK),
                Err(e) => {
                    tracing::warn!(error = %e, "namespace controller sweep failed");
                    Next::RecheckAfter(RECHECK)
                }
            }
        },
    )
    .await;
}

/// Processes every terminating namespace once; returns whether any is still waiting.
async fn sweep(registry: &Registry) -> Result<bool, StorageError> {
    let page = registry
        .store()
        .list("/core/namespaces/", &ListOptions::default(), &|_| true)?;
    let mut pending = false;
    for stored in page.items {
        let ns = stored.value()?;
        if ns.pointer("/metadata/deletionTimestamp").is_none() {
            continue;
        }
        let name = ns["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let has_kubernetes_finalizer = ns
            .pointer("/spec/finalizers")
            .and_then(Value::as_array)
            .is_some_and(|f| f.iter().any(|x| x == "kubernetes"));
        if has_kubernetes_finalizer {
            let content = empty_namespace(registry, &name).await;
            if let Err(e) = write_conditions(registry, &name, &content).await {
                tracing::debug!(namespace = %name, error = %e, "updating namespace conditions");
            }
            if content.objects > 0 || !content.failures.is_empty() {
                pending = true;
                continue;
            }
        }
        if let Err(e) = registry.finalize_namespace(&name, None).await {
            tracing::warn!(namespace = %name, error = %e, "finalizing namespace failed");
            pending = true;
        }
    }
    Ok(pending)
}

/// What a deletion pass left in a namespace.
#[derive(Debug, Default)]
struct Content {
    /// Objects still present.
    objects: usize,
    /// `resource.group` → objects of it still present.
    by_resource: BTreeMap<String, usize>,
    /// Finalizer → objects it still holds.
    by_finalizer: BTreeMap<String, usize>,
    /// Deletions that failed, as messages.
    failures: Vec<String>,
}

/// Deletes what is in namespace `ns`; reports what is still there.
async fn empty_namespace(registry: &Registry, ns: &str) -> Content {
    let catalog = registry.catalog();
    let mut seen_prefixes = BTreeSet::new();
    let mut content = Content::default();
    for res in catalog.resources().iter().filter(|r| r.namespaced) {
        // Two resources may share storage (core and events.k8s.io Events): visit it once.
        if !seen_prefixes.insert(res.storage_prefix.clone()) {
            continue;
        }
        let group_resource = format!("{}.{}", res.plural, res.group);
        for key in registry.store().keys(&res.collection_prefix(Some(ns))) {
            let name = key.rsplit('/').next().unwrap_or_default().to_string();
            let left = match registry
                .delete(res, Some(ns), &name, &DeleteOptions::default())
                .await
            {
                Ok(Deleted::Gone(_)) | Err(ApiError::NotFound { .. }) => continue,
                Ok(Deleted::Pending(obj)) => obj,
                Err(e) => {
                    tracing::debug!(namespace = %ns, name = %name, error = %e, "deleting namespace content");
                    content
                        .failures
                        .push(format!("{group_resource} {name:?}: {e}"));
                    Value::Null
                }
            };
            content.objects += 1;
            *content
                .by_resource
                .entry(group_resource.clone())
                .or_default() += 1;
            for f in left
                .pointer("/metadata/finalizers")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
            {
                *content.by_finalizer.entry(f.to_string()).or_default() += 1;
            }
        }
    }
    content
}

/// The namespace's conditions for what a pass left, in Kubernetes' order and words.
fn conditions(content: &Content) -> Vec<(&'static str, bool, &'static str, String)> {
    let content_failure = if content.failures.is_empty() {
        (
            false,
            "ContentDeleted",
            "All content successfully deleted, may be waiting on finalization".to_string(),
        )
    } else {
        (
            true,
            "ContentDeletionFailed",
            format!(
                "Failed to delete all resource types, {} remaining: {}",
                content.failures.len(),
                content.failures.join(", ")
            ),
        )
    };
    let remaining = if content.objects == 0 {
        (
            false,
            "ContentRemoved",
            "All content successfully removed".to_string(),
        )
    } else {
        let list: Vec<String> = content
            .by_resource
            .iter()
            .map(|(r, n)| format!("{r} has {n} resource instances"))
            .collect();
        (
            true,
            "SomeResourcesRemain",
            format!("Some resources are remaining: {}", list.join(", ")),
        )
    };
    let finalizers = if content.by_finalizer.is_empty() {
        (
            false,
            "ContentHasNoFinalizers",
            "All content-preserving finalizers have been removed".to_string(),
        )
    } else {
        let list: Vec<String> = content
            .by_finalizer
            .iter()
            .map(|(f, n)| format!("{f} in {n} resource instances"))
            .collect();
        (
            true,
            "SomeFinalizersRemain",
            format!(
                "Some content in the namespace has finalizers remaining: {}",
                list.join(", ")
            ),
        )
    };
    vec![
        (
            "NamespaceDeletionDiscoveryFailure",
            false,
            "ResourcesDiscovered",
            "All resources successfully discovered".to_string(),
        ),
        (
            "NamespaceDeletionGroupVersionParsingFailure",
            false,
            "ParsedGroupVersions",
            "All legacy kube types successfully parsed".to_string(),
        ),
        (
            "NamespaceDeletionContentFailure",
            content_failure.0,
            content_failure.1,
            content_failure.2,
        ),
        (
            "NamespaceContentRemaining",
            remaining.0,
            remaining.1,
            remaining.2,
        ),
        (
            "NamespaceFinalizersRemaining",
            finalizers.0,
            finalizers.1,
            finalizers.2,
        ),
    ]
}

/// Writes the conditions for `content` into the namespace's status; a condition keeps its
/// `lastTransitionTime` while its status stays the same, and nothing is written when nothing
/// changed.
async fn write_conditions(
    registry: &Registry,
    name: &str,
    content: &Content,
) -> Result<(), ApiError> {
    let catalog = registry.catalog();
    let Some(res) = catalog.find("", "v1", "namespaces") else {
        return Ok(());
    };
    let wanted = conditions(content);
    let mut produce = |cur: &Value| -> Result<Value, ApiError> {
        let old = cur
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let now = now_rfc3339();
        let list: Vec<Value> = wanted
            .iter()
            .map(|(ty, status, reason, message)| {
                let status = if *status { "True" } else { "False" };
                let since = old
                    .iter()
                    .find(|c| c["type"] == *ty && c["status"] == status)
                    .and_then(|c| c.get("lastTransitionTime").cloned())
                    .unwrap_or_else(|| json!(now));
                json!({"type": ty, "status": status, "lastTransitionTime": since,
                       "reason": reason, "message": message})
            })
            .collect();
        let mut next = cur.clone();
        next["status"]["conditions"] = Value::Array(list);
        Ok(next)
    };
    registry
        .write_existing(
            Target {
                res: &res,
                ns: None,
                name,
                part: Part::Status,
            },
            None,
            &mut produce,
            &WriteOptions::default(),
        )
        .await
        .map(drop)
}

#[cfg(test)]
mod tests {
    use super::{Content, conditions};

    #[test]
    fn conditions_are_all_false_when_the_namespace_is_empty() {
        let list = conditions(&Content::default());
        let types: Vec<&str> = list.iter().map(|c| c.0).collect();
        assert_eq!(
            types,
            [
                "NamespaceDeletionDiscoveryFailure",
                "NamespaceDeletionGroupVersionParsingFailure",
                "NamespaceDeletionContentFailure",
                "NamespaceContentRemaining",
                "NamespaceFinalizersRemaining",
            ]
        );
        assert!(list.iter().all(|c| !c.1));
    }

    #[test]
    fn remaining_content_is_listed_per_resource_and_finalizer_in_order() {
        let mut content = Content {
            objects: 3,
            ..Content::default()
        };
        content.by_resource.insert("widgets.example.com".into(), 1);
        content.by_resource.insert("configmaps.".into(), 2);
        content.by_finalizer.insert("example.com/hold".into(), 2);
        content.by_finalizer.insert("a.io/x".into(), 1);
        let list = conditions(&content);
        assert_eq!(
            (list[3].1, list[3].2, list[3].3.as_str()),
            (
                true,
                "SomeResourcesRemain",
                "Some resources are remaining: configmaps. has 2 resource instances, widgets.example.com has 1 resource instances"
            )
        );
        assert_eq!(
            (list[4].1, list[4].2, list[4].3.as_str()),
            (
                true,
                "SomeFinalizersRemain",
                "Some content in the namespace has finalizers remaining: a.io/x in 1 resource instances, example.com/hold in 2 resource instances"
            )
        );
        assert!(!list[2].1, "no deletion failed");
    }
}
