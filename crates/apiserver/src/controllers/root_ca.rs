//! The root CA publisher (spec §18.12): every active namespace has a ConfigMap
//! `kube-root-ca.crt` whose key `ca.crt` is the CA that signed the server's certificate, so a
//! pod (through the projected `kube-api-access-*` volume) can verify the server it talks to.
//!
//! As kube-controller-manager's publisher does, it creates the ConfigMap for every namespace,
//! puts it back when it is deleted, and sets `data` back (keeping labels and annotations a user
//! added) when it was changed. Terminating namespaces are left alone.

use std::sync::Arc;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::level::{self, Next, Scope, Trigger};
use crate::api::error::ApiError;
use crate::registry::Registry;
use crate::registry::rest::{Part, WriteOptions};
use crate::storage::{EventType, ListOptions, Storage as _, WatchEvent};

/// The ConfigMap's name.
pub const NAME: &str = "kube-root-ca.crt";
/// Its key holding the CA certificate (PEM).
pub const KEY: &str = "ca.crt";
const DESCRIPTION: &str = "Contains a CA bundle that can be used to verify the kube-apiserver \
     when using internal endpoints such as the internal service IP or kubernetes.default.svc. \
     No other usage is guaranteed across distributions of Kubernetes clusters.";

const NAMESPACES: &str = "/core/namespaces/";
const CONFIGMAPS: &str = "/core/configmaps/";

/// Runs the publisher until `stop` is cancelled: every namespace at start (and after a watch
/// restarted), then each namespace change and each change of a `kube-root-ca.crt`.
pub async fn run(registry: Arc<Registry>, ca_pem: Arc<str>, stop: CancellationToken) {
    let registry = &*registry;
    let ca = &*ca_pem;
    level::run(
        registry,
        &stop,
        "root-ca-publisher",
        &[Scope::all(NAMESPACES), Scope::named(CONFIGMAPS, NAME)],
        |trigger| async move {
            match trigger {
                Trigger::Changed(events) => {
                    for event in &events {
                        handle(registry, ca, event).await;
                    }
                }
                Trigger::Resync | Trigger::Recheck => ensure_everywhere(registry, ca).await,
            }
            Next::Wait
        },
    )
    .await;
}

async fn handle(registry: &Registry, ca: &str, event: &WatchEvent) {
    if let Some(name) = event.key.strip_prefix(NAMESPACES) {
        if event.kind != EventType::Deleted {
            ensure(registry, ca, name).await;
        }
    } else if let Some(rest) = event.key.strip_prefix(CONFIGMAPS)
        && let Some((ns, NAME)) = rest.split_once('/')
    {
        ensure(registry, ca, ns).await;
    }
}

/// Publishes the CA into every active namespace.
pub async fn ensure_everywhere(registry: &Registry, ca: &str) {
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
            ensure(registry, ca, name).await;
        }
    }
}

fn is_active(namespace: &Value) -> bool {
    namespace["metadata"]["deletionTimestamp"].is_null()
        && namespace["status"]["phase"].as_str() != Some("Terminating")
}

/// Creates or repairs `kube-root-ca.crt` in namespace `ns` if the namespace is active.
async fn ensure(registry: &Registry, ca: &str, ns: &str) {
    let catalog = registry.catalog();
    let (Some(namespaces), Some(configmaps)) = (
        catalog.find("", "v1", "namespaces"),
        catalog.find("", "v1", "configmaps"),
    ) else {
        return;
    };
    match registry.get_value(&namespaces, None, ns) {
        Ok(namespace) if is_active(&namespace) => {}
        _ => return,
    }
    let data = json!({KEY: ca});
    let outcome = match registry.get_value(&configmaps, Some(ns), NAME) {
        Err(ApiError::NotFound { .. }) => {
            let body = json!({"apiVersion": "v1", "kind": "ConfigMap",
                              "metadata": {"name": NAME, "namespace": ns,
                                           "annotations": {"kubernetes.io/description": DESCRIPTION}},
                              "data": data});
            registry
                .create(&configmaps, Some(ns), body, &WriteOptions::default())
                .await
                .map(drop)
        }
        Err(e) => Err(e),
        Ok(have) if have["data"] == data && have.get("binaryData").is_none() => return,
        Ok(mut have) => {
            have["data"] = data;
            if let Some(m) = have.as_object_mut() {
                m.remove("binaryData");
            }
            registry
                .update(
                    &configmaps,
                    Some(ns),
                    NAME,
                    Part::Main,
                    have,
                    &WriteOptions::default(),
                )
                .await
                .map(drop)
        }
    };
    match outcome {
        // A racing write triggers another pass through its event; a namespace that started
        // terminating refuses creates.
        Ok(())
        | Err(
            ApiError::AlreadyExists { .. } | ApiError::Conflict { .. } | ApiError::Forbidden { .. },
        ) => {}
        Err(e) => {
            tracing::warn!(error = %e, namespace = ns, "publishing kube-root-ca.crt failed")
        }
    }
}
