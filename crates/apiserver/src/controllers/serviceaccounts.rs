//! The ServiceAccount controller (spec §18.10): every active namespace has a `default`
//! ServiceAccount, created shortly after the namespace appears and again whenever it is deleted.
//!
//! Like kube-controller-manager's, it leaves terminating namespaces alone (creating into them is
//! forbidden anyway), so it never fights the namespace controller.
//!
//! Not done here: the `kube-root-ca.crt` ConfigMap, and defaulting `spec.serviceAccountName`
//! of Pods.

use std::sync::Arc;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::level::{self, Next, Scope, Trigger};
use crate::api::error::ApiError;
use crate::registry::Registry;
use crate::registry::rest::WriteOptions;
use crate::storage::{EventType, ListOptions, Storage as _, WatchEvent};

const NAMESPACES: &str = "/core/namespaces/";
const ACCOUNTS: &str = "/core/serviceaccounts/";

/// The name of the ServiceAccount every namespace gets.
pub const DEFAULT_ACCOUNT: &str = "default";

/// Runs the controller until `stop` is cancelled: every namespace is checked at start (and
/// after a watch had to restart), then each namespace change and each deleted `default`
/// ServiceAccount is handled as it arrives.
pub async fn run(registry: Arc<Registry>, stop: CancellationToken) {
    let registry = &*registry;
    level::run(
        registry,
        &stop,
        "serviceaccounts",
        &[Scope::all(NAMESPACES), Scope::all(ACCOUNTS)],
        |trigger| async move {
            match trigger {
                Trigger::Changed(events) => {
                    for event in &events {
                        handle(registry, event).await;
                    }
                }
                Trigger::Resync | Trigger::Recheck => ensure_everywhere(registry).await,
            }
            Next::Wait
        },
    )
    .await;
}

async fn handle(registry: &Registry, event: &WatchEvent) {
    if let Some(name) = event.key.strip_prefix(NAMESPACES) {
        if event.kind != EventType::Deleted {
            ensure(registry, name).await;
        }
    } else if let Some(rest) = event.key.strip_prefix(ACCOUNTS)
        && event.kind == EventType::Deleted
        && let Some((ns, DEFAULT_ACCOUNT)) = rest.split_once('/')
    {
        ensure(registry, ns).await;
    }
}

fn is_active(namespace: &Value) -> bool {
    namespace["metadata"]["deletionTimestamp"].is_null()
        && namespace["status"]["phase"].as_str() != Some("Terminating")
}

async fn ensure_everywhere(registry: &Registry) {
    let page = match registry
        .store()
        .list(NAMESPACES, &ListOptions::default(), &|_| true)
    {
        Ok(page) => page,
        Err(e) => {
            tracing::warn!(error = %e, "listing namespaces failed");
            return;
        }
    };
    for item in page.items {
        if let Ok(ns) = item.value()
            && let Some(name) = ns["metadata"]["name"].as_str()
        {
            ensure(registry, name).await;
        }
    }
}

/// Creates `default` in namespace `ns` if the namespace is active and the account missing.
async fn ensure(registry: &Registry, ns: &str) {
    let catalog = registry.catalog();
    let (Some(namespaces), Some(accounts)) = (
        catalog.find("", "v1", "namespaces"),
        catalog.find("", "v1", "serviceaccounts"),
    ) else {
        return;
    };
    match registry.get_value(&namespaces, None, ns) {
        Ok(namespace) if is_active(&namespace) => {}
        _ => return,
    }
    if registry
        .get_value(&accounts, Some(ns), DEFAULT_ACCOUNT)
        .is_ok()
    {
        return;
    }
    let body = json!({"apiVersion": "v1", "kind": "ServiceAccount",
                      "metadata": {"name": DEFAULT_ACCOUNT, "namespace": ns}});
    match registry
        .create(&accounts, Some(ns), body, &WriteOptions::default())
        .await
    {
        Ok(_) | Err(ApiError::AlreadyExists { .. } | ApiError::Forbidden { .. }) => {}
        Err(e) => {
            tracing::warn!(error = %e, namespace = ns, "creating the default serviceaccount failed")
        }
    }
}
