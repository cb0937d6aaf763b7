//! Installs operators into the embedded server for `kore up` ([`kore_operator::install`]:
//! their CRDs until Established, their RBAC from [`kore_operator::manifests::rbac`]), and
//! gives each a client that acts as its ServiceAccount, so the operators run with exactly the permissions
//! their deployment grants them on a cluster.

use anyhow::Context as _;
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use kore_operator::{Operator, install};
use kube::api::{Api, PostParams};

/// How long the operators' tokens live: a year, since `kore up` is a long-running local
/// process and a token cannot be renewed in place (the server accepts up to 2^32 seconds).
const TOKEN_SECONDS: i64 = 365 * 24 * 3600;

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
    let service = kore_apiserver::server::ApiServer::router_with_token(router, token)
        .context("the token is not a valid header value")?;
    Ok(kube::Client::new(service, namespace))
}

/// Installs `operator` (CRDs, RBAC) and returns a client acting as its ServiceAccount.
pub(crate) async fn operator(
    admin: &kube::Client,
    router: axum::Router,
    operator: &Operator,
    namespace: &str,
) -> anyhow::Result<kube::Client> {
    install::crds(admin, operator).await?;
    install::rbac(admin, operator, namespace).await?;
    let token = token(admin, operator, namespace).await?;
    client_with_token(router, &token, namespace)
}
