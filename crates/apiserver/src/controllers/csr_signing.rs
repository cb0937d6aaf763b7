//! The CSR signer: an approved CertificateSigningRequest for one of Kubernetes' built-in
//! signers gets `status.certificate`, signed by kore's CA (the rules are `auth/csr.rs`), as
//! kube-controller-manager's `csrsigning` controllers sign them.
//!
//! It runs here, in the API server, rather than in kore-controller-manager: the CA's key lives
//! in the server (in memory, or `ca.key` of its data directory) and nowhere else, and a signer
//! outside would need the key handed to it, where kube-controller-manager reads
//! `--cluster-signing-cert-file`/`--cluster-signing-key-file`.
//!
//! A request is signed once: when it is approved, has no `Failed` condition and no certificate
//! yet. A request that breaks its signer's rules, or cannot be parsed, gets a `Failed` condition
//! with reason `SignerValidationFailure` and is left alone from then on. Requests for other
//! signers are not touched, so another signer (an operator under test) can answer them.

use std::sync::Arc;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::level::{self, Next, Scope, Trigger};
use crate::api::error::ApiError;
use crate::auth::csr::{self, CsrError};
use crate::auth::tls::CertificateAuthority;
use crate::registry::Registry;
use crate::registry::rest::{Part, WriteOptions};
use crate::storage::{EventType, ListOptions, Storage as _};

const GROUP: &str = "certificates.k8s.io";
const PLURAL: &str = "certificatesigningrequests";

/// Runs the signer until `stop` is cancelled: every request at start (and after a watch
/// restarted), then each changed request.
pub async fn run(registry: Arc<Registry>, ca: CertificateAuthority, stop: CancellationToken) {
    let Some(res) = registry.catalog().find(GROUP, "v1", PLURAL) else {
        return;
    };
    let prefix = res.collection_prefix(None);
    let registry = &*registry;
    let ca = &ca;
    let prefix_ref = prefix.as_str();
    level::run(
        registry,
        &stop,
        "csr-signer",
        &[Scope::all(prefix_ref)],
        |trigger| async move {
            match trigger {
                Trigger::Changed(events) => {
                    for event in &events {
                        if event.kind == EventType::Deleted {
                            continue;
                        }
                        if let Some(name) = event.key.strip_prefix(prefix_ref) {
                            handle(registry, ca, name).await;
                        }
                    }
                }
                Trigger::Resync | Trigger::Recheck => {
                    let page = match registry.store().list(
                        prefix_ref,
                        &ListOptions::default(),
                        &|_| true,
                    ) {
                        Ok(page) => page,
                        Err(e) => {
                            tracing::warn!(error = %e, "listing certificate signing requests failed");
                            return Next::Wait;
                        }
                    };
                    for item in page.items {
                        if let Ok(csr) = item.value()
                            && let Some(name) = csr["metadata"]["name"].as_str()
                        {
                            handle(registry, ca, name).await;
                        }
                    }
                }
            }
            Next::Wait
        },
    )
    .await;
}

fn has_condition(csr: &Value, ty: &str) -> bool {
    csr.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|list| {
            list.iter()
                .any(|c| c["type"] == ty && c["status"] == "True")
        })
}

/// Whether `csr` waits for this signer.
fn pending(csr: &Value) -> bool {
    let signer = csr["spec"]["signerName"].as_str().unwrap_or_default();
    csr::is_signed_here(signer)
        && has_condition(csr, "Approved")
        && !has_condition(csr, "Denied")
        && !has_condition(csr, "Failed")
        && csr
            .pointer("/status/certificate")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
}

/// Signs request `name` if it waits for this signer, or marks it failed.
async fn handle(registry: &Registry, ca: &CertificateAuthority, name: &str) {
    let Some(res) = registry.catalog().find(GROUP, "v1", PLURAL) else {
        return;
    };
    let Ok(mut csr) = registry.get_value(&res, None, name) else {
        return;
    };
    if !pending(&csr) {
        return;
    }
    let signer = csr["spec"]["signerName"].as_str().unwrap_or_default();
    let request = csr["spec"]["request"]
        .as_str()
        .and_then(|b64| STANDARD.decode(b64).ok())
        .unwrap_or_default();
    let usages: Vec<String> = csr["spec"]["usages"]
        .as_array()
        .map(|list| {
            list.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    let expiration = csr["spec"]["expirationSeconds"].as_i64();
    match csr::sign(ca, signer, &request, &usages, expiration) {
        Ok(pem) => {
            csr["status"]["certificate"] = json!(STANDARD.encode(pem.as_bytes()));
        }
        Err(e @ (CsrError::Rejected(_) | CsrError::Parse(_))) => {
            let now = jiff::Timestamp::now()
                .round(jiff::Unit::Second)
                .unwrap_or_else(|_| jiff::Timestamp::now())
                .to_string();
            let failed = json!({"type": "Failed", "status": "True",
                "reason": "SignerValidationFailure", "message": e.to_string(),
                "lastUpdateTime": now, "lastTransitionTime": now});
            match csr["status"]["conditions"].as_array_mut() {
                Some(list) => list.push(failed),
                None => csr["status"]["conditions"] = json!([failed]),
            }
        }
        Err(e) => {
            tracing::warn!(error = %e, csr = name, "signing a certificate signing request failed");
            return;
        }
    }
    match registry
        .update(
            &res,
            None,
            name,
            Part::Status,
            csr,
            &WriteOptions::default(),
        )
        .await
    {
        // A racing write wakes another pass through its event.
        Ok(_) | Err(ApiError::Conflict { .. } | ApiError::NotFound { .. }) => {}
        Err(e) => tracing::warn!(error = %e, csr = name, "recording a signed certificate failed"),
    }
}
