//! Installing an operator into a cluster from its description: its namespace, its CRDs
//! (waiting until each is Established) and its RBAC, by server-side apply, as `kore up` and
//! the tests do. On a real cluster `kubectl apply -f deploy/` does the same.

use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::core::GroupVersionKind;
use kube::discovery::Scope;
use serde_json::Value;

use crate::Operator;
use crate::manifests;

/// The field manager of everything installed here.
pub const FIELD_MANAGER: &str = "kore";

/// How long a CRD may take to become Established.
pub const ESTABLISH_TIMEOUT: Duration = Duration::from_secs(30);

/// How often a CRD's conditions are read while waiting.
const POLL: Duration = Duration::from_millis(20);

/// Why an installation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The API server refused or failed a request.
    #[error("{what} failed")]
    Api {
        /// What was being done.
        what: String,
        /// The client's error.
        #[source]
        source: kube::Error,
    },
    /// An object lacks what applying it needs (apiVersion, kind, name).
    #[error("the object has no {0}")]
    Incomplete(&'static str),
    /// A CRD did not become Established in time.
    #[error("CRD {name} was not Established within {timeout:?}")]
    NotEstablished {
        /// The CRD.
        name: String,
        /// How long was waited.
        timeout: Duration,
    },
    /// Building the objects failed.
    #[error(transparent)]
    Manifests(#[from] manifests::Error),
}

/// `kind namespace/name` of `object`, for messages.
pub fn describe(object: &Value) -> String {
    let kind = object["kind"].as_str().unwrap_or("?");
    let name = object["metadata"]["name"].as_str().unwrap_or("?");
    match object["metadata"]["namespace"].as_str() {
        Some(ns) => format!("{kind} {ns}/{name}"),
        None => format!("{kind} {name}"),
    }
}

/// The dynamic API of `object`'s kind, found by discovery (in the object's namespace,
/// `default` if it names none).
pub async fn api_for(client: &kube::Client, object: &Value) -> Result<Api<DynamicObject>, Error> {
    let api_version = object["apiVersion"]
        .as_str()
        .ok_or(Error::Incomplete("apiVersion"))?;
    let kind = object["kind"].as_str().ok_or(Error::Incomplete("kind"))?;
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let gvk = GroupVersionKind::gvk(group, version, kind);
    let (resource, caps) = kube::discovery::pinned_kind(client, &gvk)
        .await
        .map_err(|source| Error::Api {
            what: format!("finding the resource of {api_version} {kind}"),
            source,
        })?;
    Ok(match caps.scope {
        Scope::Namespaced => {
            let ns = object["metadata"]["namespace"]
                .as_str()
                .unwrap_or("default");
            Api::namespaced_with(client.clone(), ns, &resource)
        }
        Scope::Cluster => Api::all_with(client.clone(), &resource),
    })
}

/// Applies `object` (server-side, forcing conflicts) and returns what the server holds.
pub async fn apply(client: &kube::Client, object: &Value) -> Result<DynamicObject, Error> {
    let api = api_for(client, object).await?;
    let name = object["metadata"]["name"]
        .as_str()
        .ok_or(Error::Incomplete("metadata.name"))?;
    api.patch(
        name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(object),
    )
    .await
    .map_err(|source| Error::Api {
        what: format!("applying {}", describe(object)),
        source,
    })
}

/// Applies the namespace `name`.
pub async fn namespace(client: &kube::Client, name: &str) -> Result<(), Error> {
    let object = manifests::json("the namespace", &manifests::namespace(name))?;
    apply(client, &object).await?;
    Ok(())
}

/// Applies `crd` and waits until it is Established.
pub async fn crd(client: &kube::Client, crd: &CustomResourceDefinition) -> Result<(), Error> {
    let name = crd
        .metadata
        .name
        .clone()
        .ok_or(Error::Incomplete("metadata.name"))?;
    let mut object = manifests::json("the CRD", crd)?;
    object["apiVersion"] = "apiextensions.k8s.io/v1".into();
    object["kind"] = "CustomResourceDefinition".into();
    apply(client, &object).await?;
    wait_established(client, &name).await
}

/// Waits until the CRD `name` is Established (at most [`ESTABLISH_TIMEOUT`]).
pub async fn wait_established(client: &kube::Client, name: &str) -> Result<(), Error> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let deadline = tokio::time::Instant::now() + ESTABLISH_TIMEOUT;
    loop {
        let current = api.get(name).await.map_err(|source| Error::Api {
            what: format!("reading CRD {name}"),
            source,
        })?;
        let established = current
            .status
            .and_then(|s| s.conditions)
            .unwrap_or_default()
            .iter()
            .any(|c| c.type_ == "Established" && c.status == "True");
        if established {
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(Error::NotEstablished {
                name: name.to_owned(),
                timeout: ESTABLISH_TIMEOUT,
            });
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Applies `operator`'s CRDs and waits until each is Established.
pub async fn crds(client: &kube::Client, operator: &Operator) -> Result<(), Error> {
    for c in &operator.crds {
        crd(client, c).await?;
    }
    Ok(())
}

/// Applies `operator`'s ServiceAccount, ClusterRole, Role and bindings in `namespace`.
pub async fn rbac(
    client: &kube::Client,
    operator: &Operator,
    namespace: &str,
) -> Result<(), Error> {
    for object in manifests::rbac(operator, namespace).objects()? {
        apply(client, &object).await?;
    }
    Ok(())
}

/// Installs `operator` into `namespace`: the namespace, its CRDs (Established) and its RBAC.
/// The ServiceAccount it then runs as is `namespace`/`operator.name`.
pub async fn operator(
    client: &kube::Client,
    operator: &Operator,
    namespace: &str,
) -> Result<(), Error> {
    self::namespace(client, namespace).await?;
    crds(client, operator).await?;
    rbac(client, operator, namespace).await
}
