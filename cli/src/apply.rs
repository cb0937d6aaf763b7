//! Server-side apply of objects given as JSON, whatever their kind (found by discovery).

use anyhow::Context as _;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::core::GroupVersionKind;
use kube::discovery::Scope;
use serde_json::Value;

/// The field manager of everything `kore` applies.
pub(crate) const FIELD_MANAGER: &str = "kore";

/// `apiVersion`, `kind`, namespace and name of `object`, for messages.
pub(crate) fn describe(object: &Value) -> String {
    let kind = object["kind"].as_str().unwrap_or("?");
    let name = object["metadata"]["name"].as_str().unwrap_or("?");
    match object["metadata"]["namespace"].as_str() {
        Some(ns) => format!("{kind} {ns}/{name}"),
        None => format!("{kind} {name}"),
    }
}

/// The dynamic API of `object`'s kind (in its namespace, `default` if it names none).
pub(crate) async fn api_for(
    client: &kube::Client,
    object: &Value,
) -> anyhow::Result<Api<DynamicObject>> {
    let api_version = object["apiVersion"]
        .as_str()
        .context("the object has no apiVersion")?;
    let kind = object["kind"].as_str().context("the object has no kind")?;
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let gvk = GroupVersionKind::gvk(group, version, kind);
    let (resource, caps) = kube::discovery::pinned_kind(client, &gvk)
        .await
        .with_context(|| format!("finding the resource of {api_version} {kind}"))?;
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
pub(crate) async fn apply(client: &kube::Client, object: &Value) -> anyhow::Result<DynamicObject> {
    let api = api_for(client, object).await?;
    let name = object["metadata"]["name"]
        .as_str()
        .context("the object has no name")?;
    api.patch(
        name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(object),
    )
    .await
    .with_context(|| format!("applying {}", describe(object)))
}
