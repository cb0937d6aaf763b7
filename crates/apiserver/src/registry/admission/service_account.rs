//! ServiceAccount admission: a pod created without a ServiceAccount runs as `default`; its
//! ServiceAccount must exist; a pod without `imagePullSecrets` gets its ServiceAccount's; and,
//! unless the pod or its ServiceAccount opts out (`automountServiceAccountToken: false`), the
//! pod gets a projected `kube-api-access-<5 random>` volume (a bound token valid 3607 s, the
//! `kube-root-ca.crt` CA and the namespace), mounted read-only at
//! `/var/run/secrets/kubernetes.io/serviceaccount` in every container and init container.
//!
//! Differences from Kubernetes: a missing `default` ServiceAccount is not an error (the
//! ServiceAccount controller creates it a moment after the namespace, and tests create pods
//! at once); any other missing ServiceAccount is, as in Kubernetes.

use rand::Rng as _;
use serde_json::{Value, json};

use super::pods::{Reader, forbidden, is_pod_create};
use super::{Attributes, Mutating};
use crate::api::error::ApiError;

/// Where the token volume is mounted.
pub const TOKEN_MOUNT_PATH: &str = "/var/run/secrets/kubernetes.io/serviceaccount";
/// The prefix of the token volume's name.
pub const TOKEN_VOLUME_PREFIX: &str = "kube-api-access-";
/// The lifetime of the projected token Kubernetes asks for (an hour and seven seconds, which
/// marks tokens that only warn on expiry).
const TOKEN_EXPIRATION_SECONDS: i64 = 3607;
/// The annotation of static (mirror) pods, which admission leaves alone.
const MIRROR: &str = "kubernetes.io/config.mirror";
/// The alphabet of the random suffix (Kubernetes' `rand.String`).
const SUFFIX_CHARS: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// The mutating stage: see the [module docs](self).
#[derive(Debug)]
pub struct ServiceAccount {
    accounts: Reader,
}

impl ServiceAccount {
    /// Reads ServiceAccounts from `store` under the collection prefix `accounts`.
    pub fn new(store: std::sync::Arc<crate::storage::Store>, accounts: String) -> Self {
        ServiceAccount {
            accounts: Reader::new(store, accounts),
        }
    }
}

impl Mutating for ServiceAccount {
    fn name(&self) -> &'static str {
        "ServiceAccount"
    }

    fn admit(&self, attrs: &Attributes<'_>, pod: &mut Value) -> Result<(), ApiError> {
        if !is_pod_create(attrs)
            || !pod["spec"].is_object()
            || !pod["metadata"]["annotations"][MIRROR].is_null()
        {
            return Ok(());
        }
        let name = match pod["spec"]["serviceAccountName"].as_str() {
            Some(n) if !n.is_empty() => n.to_string(),
            // The deprecated field names it for old clients.
            _ => match pod["spec"]["serviceAccount"].as_str() {
                Some(n) if !n.is_empty() => n.to_string(),
                _ => "default".to_string(),
            },
        };
        pod["spec"]["serviceAccountName"] = json!(name);
        let namespace = attrs
            .namespace
            .or_else(|| pod["metadata"]["namespace"].as_str())
            .unwrap_or("default")
            .to_string();
        let account = self.accounts.get(Some(&namespace), &name);
        if account.is_none() && name != "default" {
            return Err(forbidden(
                attrs,
                pod,
                format!(
                    "error looking up service account {namespace}/{name}: serviceaccount {name:?} not found"
                ),
            ));
        }
        let account = account.unwrap_or(Value::Null);
        if pod["spec"]["imagePullSecrets"]
            .as_array()
            .is_none_or(Vec::is_empty)
            && let Some(secrets) = account["imagePullSecrets"].as_array()
            && !secrets.is_empty()
        {
            pod["spec"]["imagePullSecrets"] = json!(secrets);
        }
        let automount = pod["spec"]["automountServiceAccountToken"]
            .as_bool()
            .or_else(|| account["automountServiceAccountToken"].as_bool())
            .unwrap_or(true);
        if automount {
            mount_token(&mut pod["spec"]);
        }
        Ok(())
    }
}

/// Adds the token volume (unless the pod has one) and mounts it in every container that has
/// nothing mounted at [`TOKEN_MOUNT_PATH`].
fn mount_token(spec: &mut Value) {
    let names: Vec<String> = spec["volumes"]
        .as_array()
        .map(|vs| {
            vs.iter()
                .filter_map(|v| v["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    let existing = names
        .iter()
        .find(|n| n.starts_with(TOKEN_VOLUME_PREFIX))
        .cloned();
    let volume = existing.clone().unwrap_or_else(|| {
        loop {
            let candidate = format!("{TOKEN_VOLUME_PREFIX}{}", random_suffix());
            if !names.contains(&candidate) {
                break candidate;
            }
        }
    });
    let mut mounted = false;
    for list in ["initContainers", "containers"] {
        let Some(containers) = spec.get_mut(list).and_then(Value::as_array_mut) else {
            continue;
        };
        for c in containers {
            let has = c["volumeMounts"].as_array().is_some_and(|ms| {
                ms.iter()
                    .any(|m| m["mountPath"].as_str() == Some(TOKEN_MOUNT_PATH))
            });
            if has || !c.is_object() {
                continue;
            }
            let mount = json!({"name": volume, "readOnly": true, "mountPath": TOKEN_MOUNT_PATH});
            match c.get_mut("volumeMounts").and_then(Value::as_array_mut) {
                Some(ms) => ms.push(mount),
                None => c["volumeMounts"] = json!([mount]),
            }
            mounted = true;
        }
    }
    if mounted && existing.is_none() {
        let source = json!({
            "name": volume,
            "projected": {
                "sources": [
                    {"serviceAccountToken": {"expirationSeconds": TOKEN_EXPIRATION_SECONDS, "path": "token"}},
                    {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                    {"downwardAPI": {"items": [{"path": "namespace",
                        "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
                ],
                "defaultMode": 420,
            },
        });
        match spec.get_mut("volumes").and_then(Value::as_array_mut) {
            Some(vs) => vs.push(source),
            None => spec["volumes"] = json!([source]),
        }
    }
}

fn random_suffix() -> String {
    let mut rng = rand::rng();
    (0..5)
        .map(|_| SUFFIX_CHARS[rng.random_range(0..SUFFIX_CHARS.len())] as char)
        .collect()
}
