//! The assembled pipeline seen from outside: authentication over TLS, and the order in which
//! a patch's options are judged. These tests build a whole server, so they live here, above
//! `http/`.

use axum::Router;
use http::{StatusCode, header};
use tower::ServiceExt as _;

use crate::api::transport::Transport;
use crate::server::{ApiServer, Config};

async fn status_of(router: &Router, path: &str, authorization: Option<&str>) -> StatusCode {
    let mut req = http::Request::get(path);
    if let Some(value) = authorization {
        req = req.header(header::AUTHORIZATION, value);
    }
    let mut req = req.body(axum::body::Body::empty()).expect("valid request");
    req.extensions_mut().insert(Transport { tls: true });
    router
        .clone()
        .oneshot(req)
        .await
        .expect("infallible")
        .status()
}

#[tokio::test]
async fn over_tls_a_wrong_token_is_rejected_even_on_public_paths() {
    let server = ApiServer::start(Config::default()).await.expect("start");
    let router = server.router();
    let good = format!("Bearer {}", server.admin_token().expect("token"));
    assert_eq!(
        status_of(&router, "/version", Some(&good)).await,
        StatusCode::OK
    );
    assert_eq!(
        status_of(&router, "/api/v1/namespaces", Some(&good)).await,
        StatusCode::OK
    );
    // Without credentials only the public paths answer.
    assert_eq!(status_of(&router, "/version", None).await, StatusCode::OK);
    assert_eq!(
        status_of(&router, "/api/v1/namespaces", None).await,
        StatusCode::UNAUTHORIZED
    );
    // A presented but wrong token is never downgraded to anonymous.
    for path in ["/version", "/healthz", "/api/v1/namespaces"] {
        assert_eq!(
            status_of(&router, path, Some("Bearer wrong-token")).await,
            StatusCode::UNAUTHORIZED,
            "{path}"
        );
    }
    server.shutdown().await;
}

async fn patch_status(router: &Router, content_type: &str, query: &str) -> StatusCode {
    let req = http::Request::patch(format!("/api/v1/namespaces/default/configmaps/c?{query}"))
        .header(header::CONTENT_TYPE, content_type)
        .body(axum::body::Body::from(r#"{"data":{"a":"1"}}"#))
        .expect("valid request");
    router
        .clone()
        .oneshot(req)
        .await
        .expect("infallible")
        .status()
}

#[tokio::test]
async fn force_is_judged_after_the_patch_type() {
    let server = ApiServer::start(Config::default()).await.expect("start");
    let router = server.router();
    // kubectl `apply --server-side` always sends `force`; its patch type decides the answer
    // (here the apply body lacks apiVersion and kind: 400, not the 422 about `force`).
    assert_eq!(
        patch_status(
            &router,
            "application/apply-patch+yaml",
            "fieldManager=kubectl&force=false"
        )
        .await,
        StatusCode::BAD_REQUEST
    );
    assert_eq!(
        patch_status(&router, "application/merge-patch+json", "force=true").await,
        StatusCode::UNPROCESSABLE_ENTITY
    );
    server.shutdown().await;
}
