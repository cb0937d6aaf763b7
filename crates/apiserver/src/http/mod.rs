//! The HTTP face of the server: routing, authentication, negotiation, and rendering of
//! objects, lists, tables, watch streams and errors.
//!
//! [`router`] builds the axum `Router`. It is a tower `Service`, so it can be served on a
//! socket (by the server's serve loop) or handed to `kube::Client::new` directly, which is
//! how tests and the embedded control plane run the whole stack in one process.
//!
//! Handlers stay thin: they parse a request into a [`crate::registry::Registry`] call and
//! render its result.
//!
//! # The pipeline
//!
//! Every request passes these stages, in this order; each has one job and one home:
//!
//! | # | stage | where |
//! |---|---|---|
//! | 1 | parse: path, verb, query and typed options, once ([`request::RequestInfo`]) | `parse_request` here, [`crate::api::request_info`], [`crate::api::options`] |
//! | 2 | authenticate: bearer token or transport → [`User`] (401) | `authenticate` here, [`crate::auth::token`], [`crate::auth::sa_token`] |
//! | 3 | authorize: impersonation, then RBAC on the request's attributes (403) | `authz::authorize`, [`crate::auth::rbac`] |
//! | 4 | route and decode: discovery, or a resource verb; the body read once, bounded, decoded by its content type | `resources::dispatch`, [`negotiate`], `protobuf` |
//! | 5 | mutating admission (no stages yet) | [`crate::registry::admission`] |
//! | 6 | defaults, pruning, validation | the resource's [`crate::registry::Strategy`], [`crate::schema`] |
//! | 7 | validating admission (RBAC escalation prevention) | [`crate::registry::admission`] |
//! | 8 | the registry's verb, then storage | [`crate::registry`], [`crate::storage`] |
//! | 9 | encode: object, list, Table, metadata, watch lines; errors as `Status` | [`render`], [`watch`], [`error`] |
//!
//! Stages 1–3 are tower layers, composed in [`router`] in the order above; 4 and 9 are the
//! handlers; 5–8 run inside the registry's verbs.

pub(crate) mod authz;
pub mod discovery;
pub mod error;
mod kubelet;
pub mod metrics;
pub mod negotiate;
pub mod openapi;
pub(crate) mod protobuf;
pub mod render;
pub use crate::api::request_info as request;
pub mod resources;
pub(crate) mod reviews;
pub mod watch;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::Router;
use axum::extract::{Request, State};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use http::{HeaderValue, StatusCode, header};
use tokio_util::sync::CancellationToken;

use crate::api::transport::Transport;
use crate::auth::token::{AdminToken, bearer_token};
use crate::registry::Registry;
use error::ApiError;

pub use crate::api::limits::MAX_BODY_BYTES;

pub use crate::api::user::User;

/// Shared state of the HTTP layer.
pub struct App {
    /// Resources and storage.
    pub registry: Arc<Registry>,
    /// The token that authenticates the administrator over HTTPS, if auth is enforced.
    pub admin_token: Option<AdminToken>,
    /// Cancelled when the server stops; ends watch streams.
    pub shutdown: CancellationToken,
    /// Set once the server is ready to serve.
    pub ready: Arc<AtomicBool>,
    /// How often a quiet watch with bookmarks allowed gets one.
    pub bookmark_interval: Duration,
    /// Signs and verifies ServiceAccount tokens.
    pub signer: Arc<crate::auth::sa_token::TokenSigner>,
    /// The RBAC authorizer.
    pub rbac: Arc<crate::auth::rbac::RbacIndex>,
    /// The tally of RBAC decisions, when recording is on.
    pub authorizations: Option<Arc<crate::auth::audit::AuthorizationLog>>,
    /// The watches each user has open, and how many one may.
    pub watches: Arc<watch::WatchSlots>,
    /// What `/metrics` reports.
    pub metrics: Arc<metrics::Metrics>,
    /// Checks the client certificates presented over TLS.
    pub client_certificates: Option<Arc<crate::auth::x509::ClientCertAuthenticator>>,
}

impl std::fmt::Debug for App {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("App").finish_non_exhaustive()
    }
}

/// Builds the router for `app`.
pub fn router(app: Arc<App>) -> Router {
    Router::new()
        .route("/version", get(version))
        .route("/version/", get(version))
        .route("/healthz", get(health))
        .route("/livez", get(health))
        .route("/readyz", get(ready))
        .route("/openapi/v3", get(openapi::index))
        .route("/openapi/v3/{*path}", get(openapi::document_handler))
        .route("/openapi/v2", get(openapi::v2_handler))
        .route("/metrics", get(metrics::serve))
        .fallback(resources::dispatch)
        // Stages 1–3 of the pipeline, outermost first: a request meets them in this order.
        .layer(
            tower::ServiceBuilder::new()
                .layer(middleware::from_fn(parse_request))
                .layer(middleware::from_fn_with_state(
                    app.clone(),
                    metrics::measure,
                ))
                .layer(middleware::from_fn_with_state(app.clone(), authenticate))
                .layer(middleware::from_fn_with_state(
                    app.clone(),
                    authz::authorize,
                )),
        )
        .with_state(app)
}

/// The edge of the pipeline: parses the request once into a [`RequestInfo`] that every later
/// stage (authentication, authorization, the handlers) reads from the extensions.
async fn parse_request(mut req: Request, next: Next) -> Response {
    let info = Arc::new(request::RequestInfo::from_parts(
        req.method(),
        req.uri(),
        req.headers(),
    ));
    req.extensions_mut().insert(info);
    next.run(req).await
}

/// Paths anyone may read, as real servers allow `system:public-info-viewer`.
const PUBLIC_PATHS: [&str; 5] = ["/healthz", "/livez", "/readyz", "/version", "/version/"];

/// The outcome of authenticating one request.
enum Authn {
    /// Valid credentials, or a transport where none are needed.
    User(Arc<User>),
    /// No credentials at all: only the public paths may be read.
    Anonymous,
    /// Credentials were presented and are not valid: 401 everywhere, as kube-apiserver does
    /// (a bad token is never downgraded to anonymous, not even for `/version`).
    Rejected,
}

/// Identifies the caller, in kube-apiserver's order. A client certificate that verifies
/// names the user (`auth/x509.rs`). Otherwise a presented bearer token must be the admin token
/// or a valid ServiceAccount token (401 otherwise), whatever the transport. A certificate that
/// does not verify is a 401 unless such a token authenticates the request. With neither, TLS
/// requests are anonymous; plain HTTP is only ever served on loopback, where clients send no
/// credentials, so such requests act as the administrator there, and so do in-process
/// requests.
async fn authenticate(State(app): State<Arc<App>>, mut req: Request, next: Next) -> Response {
    let tls = req.extensions().get::<Transport>().is_some_and(|t| t.tls);
    let certificate = match (
        &app.client_certificates,
        req.extensions()
            .get::<crate::api::transport::PeerCertificates>(),
    ) {
        (Some(checker), Some(chain)) => checker.authenticate(&chain.0).map_err(|e| {
            tracing::debug!(error = %e, "a client certificate was refused");
        }),
        _ => Ok(None),
    };
    let authn = match (certificate, bearer_token(req.headers())) {
        (Ok(Some(user)), _) => Authn::User(Arc::new(user)),
        (_, Some(t)) => match authz::token_authenticator(&app).authenticate(
            t,
            &crate::auth::authenticate::API_AUDIENCES,
            app.registry.as_ref(),
        ) {
            Some(user) => Authn::User(user),
            None => Authn::Rejected,
        },
        (Err(()), None) => Authn::Rejected,
        (Ok(None), None) if tls && app.admin_token.is_some() => Authn::Anonymous,
        (Ok(None), None) => Authn::User(User::admin()),
    };
    match authn {
        Authn::User(user) => {
            req.extensions_mut().insert(user);
            next.run(req).await
        }
        Authn::Anonymous if PUBLIC_PATHS.contains(&req.uri().path()) => next.run(req).await,
        Authn::Anonymous | Authn::Rejected => ApiError::Unauthorized.into_response(),
    }
}

/// The build information kubectl and clients read; `minor` selects kubectl 1.32.
pub const VERSION_JSON: &str = r#"{"major":"1","minor":"32","gitVersion":"v1.32.0","gitCommit":"0000000000000000000000000000000000000000","gitTreeState":"clean","buildDate":"2024-12-11T00:00:00Z","goVersion":"go1.23.3","compiler":"gc","platform":"linux/amd64"}"#;

async fn version() -> Response {
    json_response(
        StatusCode::OK,
        bytes::Bytes::from_static(VERSION_JSON.as_bytes()),
    )
}

async fn health(req: Request) -> Response {
    text_health(req.uri().query(), true, &["ping", "log", "etcd"])
}

async fn ready(State(app): State<Arc<App>>, req: Request) -> Response {
    let ok = app.ready.load(Ordering::SeqCst) && !app.shutdown.is_cancelled();
    text_health(
        req.uri().query(),
        ok,
        &["ping", "log", "etcd", "informer-sync", "shutdown"],
    )
}

fn text_health(query: Option<&str>, ok: bool, checks: &[&str]) -> Response {
    let verbose = query.is_some_and(|q| {
        q.split('&')
            .any(|p| p == "verbose" || p.starts_with("verbose="))
    });
    let body = if verbose {
        let mut s: String = checks
            .iter()
            .map(|c| {
                format!(
                    "[{}]{c} {}\n",
                    if ok { "+" } else { "-" },
                    if ok { "ok" } else { "failed" }
                )
            })
            .collect();
        s.push_str(if ok {
            "healthz check passed\n"
        } else {
            "healthz check failed\n"
        });
        s
    } else if ok {
        "ok".into()
    } else {
        "[-]readiness failed: not ready\n".into()
    };
    let code = if ok {
        StatusCode::OK
    } else {
        StatusCode::INTERNAL_SERVER_ERROR
    };
    let mut resp = (code, body).into_response();
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    resp
}

/// `v` encoded as a response body, with the keys of a built-in kind in Kubernetes' order.
pub(crate) fn encoded(v: &serde_json::Value) -> bytes::Bytes {
    bytes::Bytes::from(crate::api::encoding::to_vec(v).unwrap_or_default())
}

/// A JSON response.
pub fn json_response(code: StatusCode, body: bytes::Bytes) -> Response {
    let mut resp = (code, with_newline(body)).into_response();
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp
}

/// A JSON body as Kubernetes sends it: ending with a newline (its encoder writes one after
/// every document). Bodies rendered here end with one already; a stored object is copied once.
fn with_newline(body: bytes::Bytes) -> bytes::Bytes {
    if body.last() == Some(&b'\n') {
        return body;
    }
    let mut buf = bytes::BytesMut::with_capacity(body.len() + 1);
    buf.extend_from_slice(&body);
    buf.extend_from_slice(b"\n");
    buf.freeze()
}
