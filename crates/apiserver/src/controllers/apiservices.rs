//! The APIService controller: one apiregistration.k8s.io/v1 APIService per group/version the
//! server serves, as kube-aggregator's autoregister and CRD-registration controllers keep them.
//!
//! Each is named `<version>.<group>` (`v1.` for the core group), has `spec.service: null` (kore
//! serves it itself) and the `Available=True` condition with reason `Local`. Built-in group
//! versions get Kubernetes' priorities and the label
//! `kube-aggregator.kubernetes.io/automanaged: onstart`; those of CustomResourceDefinitions get
//! priorities 1000 and 100 and the label value `true`, and go when their CRD no longer serves
//! them. APIServices a user created (without that label) are left alone.

use std::sync::Arc;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::level::{self, Next, Scope};
use crate::registry::Registry;
use crate::registry::rest::{DeleteOptions, Part, WriteOptions, now_rfc3339};

const CRDS: &str = "/apiextensions.k8s.io/customresourcedefinitions/";
const APISERVICES: &str = "/apiregistration.k8s.io/apiservices/";
const GROUP: &str = "apiregistration.k8s.io";
/// The label marking the APIServices this controller keeps.
const AUTOMANAGED: &str = "kube-aggregator.kubernetes.io/automanaged";

/// Kubernetes' group and version priorities of the built-in group versions.
const PRIORITIES: [(&str, &str, i64, i64); 21] = [
    ("", "v1", 18000, 1),
    ("apiregistration.k8s.io", "v1", 18000, 15),
    ("apps", "v1", 17800, 15),
    ("events.k8s.io", "v1", 17750, 15),
    ("authentication.k8s.io", "v1", 17700, 15),
    ("authorization.k8s.io", "v1", 17600, 15),
    ("autoscaling", "v1", 17500, 15),
    ("autoscaling", "v2", 17500, 30),
    ("batch", "v1", 17400, 15),
    ("certificates.k8s.io", "v1", 17300, 15),
    ("networking.k8s.io", "v1", 17200, 15),
    ("policy", "v1", 17100, 15),
    ("rbac.authorization.k8s.io", "v1", 17000, 15),
    ("storage.k8s.io", "v1", 16800, 15),
    ("apiextensions.k8s.io", "v1", 16700, 15),
    ("admissionregistration.k8s.io", "v1", 16700, 15),
    ("scheduling.k8s.io", "v1", 16600, 15),
    ("coordination.k8s.io", "v1", 16500, 15),
    ("node.k8s.io", "v1", 16300, 15),
    ("discovery.k8s.io", "v1", 16200, 15),
    ("flowcontrol.apiserver.k8s.io", "v1", 16100, 21),
];

/// Runs the controller until `stop` is cancelled: every pass makes the APIServices match the
/// served group versions.
pub async fn run(registry: Arc<Registry>, stop: CancellationToken) {
    let registry = &*registry;
    level::run(
        registry,
        &stop,
        "apiservices",
        &[Scope::all(CRDS), Scope::all(APISERVICES)],
        |_| async move {
            sync(registry).await;
            Next::Wait
        },
    )
    .await;
}

/// The APIService that stands for `group`/`version` served here.
fn desired(group: &str, version: &str) -> Value {
    let builtin = PRIORITIES
        .iter()
        .find(|(g, v, _, _)| *g == group && *v == version);
    let (group_priority, version_priority, label) = match builtin {
        Some((_, _, g, v)) => (*g, *v, "onstart"),
        None => (1000, 100, "true"),
    };
    json!({
        "apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
        "metadata": {"name": format!("{version}.{group}"), "labels": {AUTOMANAGED: label}},
        "spec": {"service": null, "group": group, "version": version,
                 "groupPriorityMinimum": group_priority, "versionPriority": version_priority}
    })
}

/// Makes the automanaged APIServices match the catalog (see the module docs).
pub async fn sync(registry: &Registry) {
    let catalog = registry.catalog();
    let Some(res) = catalog.find(GROUP, "v1", "apiservices") else {
        return;
    };
    let served: Vec<(String, String)> = catalog
        .group_versions()
        .into_iter()
        .map(|(g, v, _)| (g, v))
        .collect();
    let opts = WriteOptions::default();
    for (group, version) in &served {
        let want = desired(group, version);
        let name = format!("{version}.{group}");
        match registry.get_value(&res, None, &name) {
            Ok(have) => {
                if have["spec"] != want["spec"]
                    || have["metadata"]["labels"][AUTOMANAGED]
                        != want["metadata"]["labels"][AUTOMANAGED]
                {
                    let mut next = have.clone();
                    next["spec"] = want["spec"].clone();
                    next["metadata"]["labels"][AUTOMANAGED] =
                        want["metadata"]["labels"][AUTOMANAGED].clone();
                    if let Err(e) = registry
                        .update(&res, None, &name, Part::Main, next, &opts)
                        .await
                    {
                        tracing::warn!(error = %e, apiservice = name, "updating failed");
                    }
                }
            }
            Err(_) => {
                if let Err(e) = registry.create(&res, None, want, &opts).await {
                    tracing::warn!(error = %e, apiservice = name, "creating failed");
                    continue;
                }
            }
        }
        set_available(registry, &res, &name).await;
    }
    // CRD group versions no longer served go.
    let Ok(list) = registry
        .list(&res, None, &crate::api::options::ListParams::default())
        .await
    else {
        return;
    };
    for item in list.items {
        let Ok(svc) = serde_json::from_slice::<Value>(&item) else {
            continue;
        };
        if svc["metadata"]["labels"][AUTOMANAGED] != "true" {
            continue;
        }
        let group = svc["spec"]["group"].as_str().unwrap_or_default();
        let version = svc["spec"]["version"].as_str().unwrap_or_default();
        if served.iter().any(|(g, v)| g == group && v == version) {
            continue;
        }
        let name = svc["metadata"]["name"].as_str().unwrap_or_default();
        if let Err(e) = registry
            .delete(&res, None, name, &DeleteOptions::default())
            .await
        {
            tracing::warn!(error = %e, apiservice = name, "deleting failed");
        }
    }
}

/// Sets `Available=True` (reason `Local`) unless it is already so.
async fn set_available(registry: &Registry, res: &Arc<crate::registry::Resource>, name: &str) {
    let Ok(mut svc) = registry.get_value(res, None, name) else {
        return;
    };
    let available = svc["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Available" && c["status"] == "True" && c["reason"] == "Local");
    if available {
        return;
    }
    svc["status"] = json!({"conditions": [{"type": "Available", "status": "True",
        "lastTransitionTime": now_rfc3339(), "reason": "Local",
        "message": "Local APIServices are always available"}]});
    if let Err(e) = registry
        .update(res, None, name, Part::Status, svc, &WriteOptions::default())
        .await
    {
        tracing::warn!(error = %e, apiservice = name, "setting its status failed");
    }
}
