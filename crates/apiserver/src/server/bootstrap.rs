//! What a server creates before it reports ready, as kube-apiserver's post-start hooks and
//! bootstrap controller do (spec §18.11): the initial namespaces, the default RBAC policy, the
//! system PriorityClasses, the default StorageClass, the `default/kubernetes` Service with its
//! endpoints, and `kube-root-ca.crt` in every namespace.
//!
//! Every step creates what is missing and leaves what exists as it is (a restart on a durable
//! data directory, or an object a user edited), so starting is idempotent. The objects that
//! must stay in step afterwards have controllers (`controllers/kubernetes_service.rs`,
//! `controllers/root_ca.rs`); the others are only created here.

use std::net::SocketAddr;
use std::sync::Arc;

use serde_json::{Value, json};

use super::ServerError;
use crate::api::error::ApiError;
use crate::registry::Registry;
use crate::registry::builtin::{INITIAL_NAMESPACES, SYSTEM_PRIORITY_CLASSES};
use crate::registry::rest::WriteOptions;

/// The default StorageClass's name (as kind and minikube call theirs).
pub const DEFAULT_STORAGE_CLASS: &str = "standard";
/// Its provisioner: nothing in kore provisions volumes, and the name says so, so that nobody
/// mistakes a bound claim for real storage. The StorageClass exists so that claims without a
/// class get one, as on every common development cluster.
pub const SIMULATED_PROVISIONER: &str = "kore.dev/simulated";

/// Runs every step, in order. `ca_pem` is the CA published in `kube-root-ca.crt`; `addr` is
/// the address the `kubernetes` endpoints point at until the server listens elsewhere.
pub(super) async fn bootstrap(
    registry: &Arc<Registry>,
    ca_pem: Option<&Arc<str>>,
    addr: SocketAddr,
) -> Result<(), ServerError> {
    seed_namespaces(registry).await?;
    seed_policy(registry).await?;
    seed_cluster_objects(registry).await?;
    crate::controllers::kubernetes_service::ensure(registry, addr).await;
    if let Some(ca_pem) = ca_pem {
        crate::controllers::root_ca::ensure_everywhere(registry, ca_pem).await;
    }
    Ok(())
}

/// Creates `obj` (cluster-scoped, of `group`/v1 `kind`) unless it exists.
async fn create_missing(
    registry: &Registry,
    group: &str,
    kind: &str,
    obj: Value,
) -> Result<(), ServerError> {
    let Some(res) = registry.catalog().find_kind(group, "v1", kind) else {
        return Err(ServerError::Seed(format!("{kind} is not served")));
    };
    let name = obj["metadata"]["name"].as_str().unwrap_or_default();
    if registry.get_value(&res, None, name).is_ok() {
        return Ok(());
    }
    match registry
        .create(&res, None, obj, &WriteOptions::default())
        .await
    {
        Ok(_) | Err(ApiError::AlreadyExists { .. }) => Ok(()),
        Err(e) => Err(ServerError::Seed(e.to_string())),
    }
}

async fn seed_namespaces(registry: &Registry) -> Result<(), ServerError> {
    for name in INITIAL_NAMESPACES {
        let body = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
        create_missing(registry, "", "Namespace", body).await?;
    }
    Ok(())
}

/// Creates the default cluster policy (spec §18.5) where it is missing; objects that exist
/// (a restart, or edited by a user) are left as they are.
async fn seed_policy(registry: &Registry) -> Result<(), ServerError> {
    for obj in crate::auth::policy::default_objects() {
        let kind = obj["kind"].as_str().unwrap_or_default().to_string();
        create_missing(registry, "rbac.authorization.k8s.io", &kind, obj).await?;
    }
    Ok(())
}

async fn seed_cluster_objects(registry: &Registry) -> Result<(), ServerError> {
    for (name, value, description) in SYSTEM_PRIORITY_CLASSES {
        let body = json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                          "metadata": {"name": name}, "value": value,
                          "description": description});
        create_missing(registry, "scheduling.k8s.io", "PriorityClass", body).await?;
    }
    let class = json!({
        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
        "metadata": {"name": DEFAULT_STORAGE_CLASS,
                     "annotations": {crate::registry::admission::storage_class::IS_DEFAULT: "true"}},
        "provisioner": SIMULATED_PROVISIONER,
    });
    create_missing(registry, "storage.k8s.io", "StorageClass", class).await
}
