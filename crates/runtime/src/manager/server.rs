//! The HTTP server for `/metrics`, `/healthz` and `/readyz`.
//!
//! One axum router serves all three; the manager runs it on the metrics address, the health
//! probe address, or both (when they differ, each listener gets the same router, which is
//! harmless and keeps one code path).

use std::sync::Arc;

use axum::Router;
use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use http::{StatusCode, header};
use prometheus_client::registry::Registry;
use serde::Deserialize;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use super::health::{Health, Report};

/// The content type of the OpenMetrics text format that prometheus-client writes.
const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[derive(Clone)]
struct AppState {
    health: Health,
    registry: Arc<Registry>,
}

#[derive(Deserialize)]
struct Verbose {
    verbose: Option<String>,
}

impl Verbose {
    fn on(&self) -> bool {
        self.verbose.as_deref().is_some_and(|v| v != "false")
    }
}

/// The router serving the registry and the checks.
pub(crate) fn router(health: Health, registry: Arc<Registry>) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(healthz))
        .route("/healthz/{name}", get(healthz_one))
        .route("/readyz", get(readyz))
        .route("/readyz/{name}", get(readyz_one))
        .with_state(AppState { health, registry })
}

/// Serves `router` on `listener` until `shutdown` is cancelled.
pub(crate) async fn serve(
    listener: TcpListener,
    router: Router,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    axum::serve(listener, router)
        .with_graceful_shutdown(async move { shutdown.cancelled().await })
        .await
}

async fn metrics(State(state): State<AppState>) -> Response {
    let mut body = String::new();
    match prometheus_client::encoding::text::encode(&mut body, &state.registry) {
        Ok(()) => ([(header::CONTENT_TYPE, OPENMETRICS)], body).into_response(),
        Err(e) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("encoding metrics: {e}"),
        )
            .into_response(),
    }
}

fn answer(report: &Report, endpoint: &str, verbose: bool) -> Response {
    let code = if report.is_ok() {
        StatusCode::OK
    } else {
        StatusCode::INTERNAL_SERVER_ERROR
    };
    (
        code,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        report.render(endpoint, verbose),
    )
        .into_response()
}

fn answer_one(report: Report, name: &str) -> Response {
    match report.checks.into_iter().find(|(n, _)| n == name) {
        None => (StatusCode::NOT_FOUND, format!("no check named {name:?}\n")).into_response(),
        Some((_, Ok(()))) => (StatusCode::OK, "ok").into_response(),
        Some((_, Err(reason))) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("[-]{name} failed: {reason}\n"),
        )
            .into_response(),
    }
}

async fn healthz(State(state): State<AppState>, Query(q): Query<Verbose>) -> Response {
    answer(&state.health.healthz(), "healthz", q.on())
}

async fn readyz(State(state): State<AppState>, Query(q): Query<Verbose>) -> Response {
    answer(&state.health.readyz(), "readyz", q.on())
}

async fn healthz_one(State(state): State<AppState>, Path(name): Path<String>) -> Response {
    answer_one(state.health.healthz(), &name)
}

async fn readyz_one(State(state): State<AppState>, Path(name): Path<String>) -> Response {
    answer_one(state.health.readyz(), &name)
}
