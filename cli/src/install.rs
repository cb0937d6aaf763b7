//! Installs operators into the embedded server for `kore up`: the namespace, their CRDs
//! (until Established), their RBAC from [`kore_operator::manifests::rbac`], and a client that
//! acts as each operator's ServiceAccount, so the operators run with exactly the permissions
//! their deployment grants them on a cluster.

use std::time::Duration;

use anyhow::Context as _;
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kore_operator::Operator;
use kore_operator::manifests;
use kube::api::{Api, PostParams};

use crate::apply::apply;

/// How long a CRD may take to become Established.
const ESTABLISH_TIMEOUT: Duration = Duration::from_secs(30);

/// How long the operators' tokens live: a year, since `kore up` is a long-running local
/// process and a token cannot be renewed in place (the server accepts up to 2^32 seconds).
const TOKEN_SECONDS: i64 = 365 * 24 * 3600;

/// Applies the namespace `namespace`.
pub(crate) async fn namespace(admin: &kube::Client, namespace: &str) -> anyhow::Result<()> {
    apply(
        admin,
        &serde_json::to_value(manifests::namespace(namespace))?,
    )
    .await?;
    Ok(())
}

/// Applies `operator`'s CRDs and waits until each is Established.
pub(crate) async fn crds(admin: &kube::Client, operator: &Operator) -> anyhow::Result<()> {
    for crd in &operator.crds {
        apply(admin, &serde_json::to_value(crd)?).await?;
    }
    let api: Api<CustomResourceDefinition> = Api::all(admin.clone());
    let deadline = tokio::time::Instant::now() + ESTABLISH_TIMEOUT;
    for crd in &operator.crds {
        let name = crd.metadata.name.as_deref().unwrap_or_default();
        loop {
            let current = api
                .get(name)
                .await
                .with_context(|| format!("reading CRD {name}"))?;
            let established = current
                .status
                .and_then(|s| s.conditions)
                .unwrap_or_default()
                .iter()
                .any(|c| c.type_ == "Established" && c.status == "True");
            if established {
                break;
            }
            if tokio::time::Instant::now() >= deadline {
                anyhow::bail!("CRD {name} was not Established within {ESTABLISH_TIMEOUT:?}");
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    Ok(())
}

/// Applies `operator`'s ServiceAccount, ClusterRole, Role and bindings in `namespace`.
pub(crate) async fn rbac(
    admin: &kube::Client,
    operator: &Operator,
    namespace: &str,
) -> anyhow::Result<()> {
    for object in manifests::rbac(operator, namespace).objects()? {
        apply(admin, &object).await?;
    }
    Ok(())
}

/// A token for `operator`'s ServiceAccount in `namespace`, from the TokenRequest API.
pub(crate) async fn token(
    admin: &kube::Client,
    operator: &Operator,
    namespace: &str,
) -> anyhow::Result<String> {
    let accounts: Api<ServiceAccount> = Api::namespaced(admin.clone(), namespace);
    let request = TokenRequest {
        spec: TokenRequestSpec {
            expiration_seconds: Some(TOKEN_SECONDS),
            ..TokenRequestSpec::default()
        },
        ..TokenRequest::default()
    };
    let answer = accounts
        .create_token_request(operator.name, &PostParams::default(), &request)
        .await
        .with_context(|| {
            format!(
                "requesting a token for serviceaccount {namespace}/{}",
                operator.name
            )
        })?;
    answer
        .status
        .map(|s| s.token)
        .filter(|t| !t.is_empty())
        .context("the TokenRequest answer holds no token")
}

/// A client talking to the server in-process through `router`, presenting `token`.
pub(crate) fn client_with_token(
    router: axum::Router,
    token: &str,
    namespace: &str,
) -> anyhow::Result<kube::Client> {
    let value = http::HeaderValue::from_str(&format!("Bearer {token}"))
        .context("the token is not a valid header value")?;
    let service = tower::ServiceExt::map_request(
        router,
        move |mut req: http::Request<kube::client::Body>| {
            req.headers_mut()
                .insert(http::header::AUTHORIZATION, value.clone());
            req
        },
    );
    Ok(kube::Client::new(service, namespace))
}

/// Installs `operator` (CRDs, RBAC) and returns a client acting as its ServiceAccount.
pub(crate) async fn operator(
    admin: &kube::Client,
    router: axum::Router,
    operator: &Operator,
    namespace: &str,
) -> anyhow::Result<kube::Client> {
    crds(admin, operator).await?;
    rbac(admin, operator, namespace).await?;
    let token = token(admin, operator, namespace).await?;
    client_with_token(router, &token, namespace)
}
