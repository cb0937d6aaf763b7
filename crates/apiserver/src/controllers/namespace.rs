//! The namespace controller: empties a terminating namespace, then lets it go.
//!
//! When a namespace has a `deletionTimestamp`, every namespaced object in it is deleted through
//! the ordinary delete path (so each object's finalizers hold it as usual). Once nothing is left
//! in the namespace, `kubernetes` is removed from `spec.finalizers`, and the namespace itself
//! is removed when no finalizer remains.
//!
//! The controller wakes on every namespace change and, while some namespace is terminating,
//! re-checks a few times a second for content whose finalizers have since been removed.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::registry::Registry;
use crate::registry::rest::DeleteOptions;
use crate::storage::{ListOptions, Storage, StorageError};

/// How often terminating namespaces are re-checked while content remains.
const RECHECK: Duration = Duration::from_millis(200);

/// Runs the controller until `stop` is cancelled.
pub async fn run(registry: Arc<Registry>, stop: CancellationToken) {
    let prefix = "/core/namespaces/";
    let mut from = registry.store().current_rv();
    loop {
        let pending = match sweep(&registry).await {
            Ok(pending) => pending,
            Err(e) => {
                tracing::warn!(error = %e, "namespace controller sweep failed");
                true
            }
        };
        let mut watcher = match registry.store().watch(prefix, from) {
            Ok(w) => w,
            Err(_) => {
                from = registry.store().current_rv();
                continue;
            }
        };
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(RECHECK), if pending => {}
            event = watcher.next() => match event {
                Ok(e) => from = e.rv,
                Err(StorageError::Expired { .. }) => from = registry.store().current_rv(),
                Err(_) => {}
            },
        }
    }
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
            let remaining = empty_namespace(registry, &name).await;
            if remaining > 0 {
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

/// Deletes what is in namespace `ns`; returns how many objects are still there.
async fn empty_namespace(registry: &Registry, ns: &str) -> usize {
    let catalog = registry.catalog();
    let mut seen_prefixes = BTreeSet::new();
    let mut remaining = 0;
    for res in catalog.resources().iter().filter(|r| r.namespaced) {
        // Two resources may share storage (core and events.k8s.io Events): visit it once.
        if !seen_prefixes.insert(res.storage_prefix.clone()) {
            continue;
        }
        for key in registry.store().keys(&res.collection_prefix(Some(ns))) {
            let name = key.rsplit('/').next().unwrap_or_default().to_string();
            match registry
                .delete(res, Some(ns), &name, &DeleteOptions::default())
                .await
            {
                Ok(crate::registry::rest::Deleted::Gone(_)) => {}
                Ok(crate::registry::rest::Deleted::Pending(_)) => remaining += 1,
                Err(e) => {
                    tracing::debug!(namespace = %ns, name = %name, error = %e, "deleting namespace content");
                    remaining += 1;
                }
            }
        }
    }
    remaining
}
