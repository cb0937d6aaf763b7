//! The accept loop: TCP (optionally TLS), HTTP/1.1 and HTTP/2, graceful shutdown.
//!
//! [`serve`] runs one task per connection, tracked by a [`TaskTracker`]. Each connection is
//! served by hyper-util's auto builder, which detects HTTP/2 by its preface, so `h2` negotiated
//! through ALPN, HTTP/2 with prior knowledge and HTTP/1.1 all work. Upgrades (used later by
//! exec, attach and port-forward) are supported. Every request carries two extensions for the
//! authentication layer: [`ConnectInfo<SocketAddr>`] (the peer) and [`Transport`].
//!
//! # Shutdown
//! When the token is cancelled the listener is closed at once, idle connections are closed,
//! HTTP/2 clients get a GOAWAY, and requests in flight may finish. Requests still running after
//! the grace period (typically watches) are dropped with their connections, and then [`serve`]
//! returns. Handlers of long requests that should end cleanly must watch a token themselves.
//!
//! # Caveats
//! - Connections that upgraded (WebSocket, SPDY) leave hyper's hands and are not tracked here.
//! - A client that opens a connection and never speaks holds its task until shutdown; the TLS
//!   handshake is bounded by [`HANDSHAKE_TIMEOUT`] and an HTTP/1 request head by
//!   [`HEADER_READ_TIMEOUT`] (which also closes HTTP/1 connections idle that long, as
//!   kube-apiserver does).

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::ConnectInfo;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower::ServiceExt as _;

/// How long a client may take to complete the TLS handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// How long an HTTP/1 client may take to send a request head, counted from when the connection
/// is ready for the next request (kube-apiserver uses 32 s too).
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(32);

/// Pause after an accept error that is not about one connection (for example the process ran out
/// of file descriptors), so the loop does not spin.
const ACCEPT_ERROR_PAUSE: Duration = Duration::from_millis(100);

/// How the request reached the server; a request extension set by [`serve`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transport {
    /// Whether the connection is TLS. kubectl and client-go send no credentials otherwise
    /// (spec §1 trap #7).
    pub tls: bool,
}

/// Serves `app` on `listener` until `shutdown` is cancelled, over TLS when `tls` is given,
/// HTTP/1.1 and HTTP/2 (ALPN/auto-detect), with graceful shutdown: stop accepting, let in-flight
/// requests finish (watches are long-lived: in-flight long requests get at most `grace` before
/// being dropped).
///
/// Each request gets the extensions [`ConnectInfo<SocketAddr>`] and [`Transport`]. Failed TLS
/// handshakes and broken connections are logged at debug level and do not affect other
/// connections; TCP_NODELAY is set on every connection.
///
/// # Errors
/// None today: accept errors are logged and retried, so this only returns after `shutdown`.
/// The `io::Result` leaves room for startup checks.
pub async fn serve(
    listener: TcpListener,
    app: axum::Router,
    tls: Option<Arc<rustls::ServerConfig>>,
    shutdown: CancellationToken,
    grace: Duration,
) -> io::Result<()> {
    let acceptor = tls.map(TlsAcceptor::from);
    let mut builder = Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT);
    builder.http2().timer(TokioTimer::new());
    let builder = Arc::new(builder);
    let connections = TaskTracker::new();
    // Cancelled once the grace period is over: connections still open are dropped.
    let abort = CancellationToken::new();

    loop {
        let accepted = tokio::select! {
            biased;
            () = shutdown.cancelled() => break,
            accepted = listener.accept() => accepted,
        };
        let (stream, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(err) if is_connection_error(&err) => {
                tracing::debug!(error = %err, "accepting a connection failed");
                continue;
            }
            Err(err) => {
                tracing::warn!(error = %err, "accepting connections failed; retrying");
                tokio::select! {
                    () = shutdown.cancelled() => break,
                    () = tokio::time::sleep(ACCEPT_ERROR_PAUSE) => continue,
                }
            }
        };
        if let Err(err) = stream.set_nodelay(true) {
            tracing::debug!(%peer, error = %err, "setting TCP_NODELAY failed");
        }
        let connection = Connection {
            peer,
            app: app.clone(),
            builder: builder.clone(),
            shutdown: shutdown.clone(),
            abort: abort.clone(),
        };
        connections.spawn(connection.run(stream, acceptor.clone()));
    }

    drop(listener);
    connections.close();
    if tokio::time::timeout(grace, connections.wait())
        .await
        .is_err()
    {
        tracing::debug!(
            open = connections.len(),
            "grace period over; dropping open connections"
        );
        abort.cancel();
        connections.wait().await;
    }
    Ok(())
}

/// Errors that concern only the connection being accepted.
fn is_connection_error(err: &io::Error) -> bool {
    matches!(
        err.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::Interrupted
    )
}

/// One accepted connection and what serving it needs.
struct Connection {
    peer: SocketAddr,
    app: axum::Router,
    builder: Arc<Builder<TokioExecutor>>,
    shutdown: CancellationToken,
    abort: CancellationToken,
}

impl Connection {
    async fn run(self, stream: TcpStream, acceptor: Option<TlsAcceptor>) {
        let Some(acceptor) = acceptor else {
            self.serve_http(TokioIo::new(stream), false).await;
            return;
        };
        let handshake = tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream));
        let stream = tokio::select! {
            () = self.shutdown.cancelled() => return,
            handshake = handshake => match handshake {
                Ok(Ok(stream)) => stream,
                Ok(Err(err)) => {
                    tracing::debug!(peer = %self.peer, error = %err, "TLS handshake failed");
                    return;
                }
                Err(_elapsed) => {
                    tracing::debug!(peer = %self.peer, "TLS handshake timed out");
                    return;
                }
            },
        };
        self.serve_http(TokioIo::new(stream), true).await;
    }

    async fn serve_http<I>(self, io: I, tls: bool)
    where
        I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
    {
        let Connection {
            peer,
            app,
            builder,
            shutdown,
            abort,
        } = self;
        let service = hyper::service::service_fn(move |mut request: http::Request<Incoming>| {
            request.extensions_mut().insert(ConnectInfo(peer));
            request.extensions_mut().insert(Transport { tls });
            app.clone().oneshot(request)
        });
        let connection = builder.serve_connection_with_upgrades(io, service);
        let mut connection = std::pin::pin!(connection);
        let result = tokio::select! {
            result = connection.as_mut() => result,
            () = shutdown.cancelled() => {
                connection.as_mut().graceful_shutdown();
                tokio::select! {
                    result = connection.as_mut() => result,
                    () = abort.cancelled() => {
                        tracing::debug!(%peer, "dropping a connection still busy after the grace period");
                        return;
                    }
                }
            }
        };
        if let Err(err) = result {
            tracing::debug!(%peer, error = %err, "connection failed");
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use axum::extract::{Extension, State};
    use axum::response::{IntoResponse, Response};
    use axum::routing::get;
    use http::{HeaderMap, StatusCode, header};
    use http_body_util::BodyExt as _;
    use kube::config::{KubeConfigOptions, Kubeconfig};
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    use tokio::sync::{Notify, mpsc};
    use tokio::task::JoinHandle;

    use super::*;
    use crate::auth::kubeconfig::{kubeconfig_yaml, write_kubeconfig};
    use crate::auth::tls::TlsMaterial;
    use crate::auth::token::{AdminToken, bearer_token};

    const VERSION: &str = r#"{"major":"1","minor":"32","gitVersion":"v1.32.0","gitCommit":"0000000000000000000000000000000000000000","gitTreeState":"clean","buildDate":"2024-12-11T00:00:00Z","goVersion":"go1.23.3","compiler":"gc","platform":"linux/amd64"}"#;
    const UNAUTHORIZED: &str = r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401}"#;

    /// Bounds every test that talks over sockets, so a hang becomes a failure.
    const TEST_TIMEOUT: Duration = Duration::from_secs(30);

    fn json(status: StatusCode, body: &'static str) -> Response {
        (status, [(header::CONTENT_TYPE, "application/json")], body).into_response()
    }

    async fn version(State(token): State<Arc<AdminToken>>, headers: HeaderMap) -> Response {
        match bearer_token(&headers) {
            Some(presented) if token.verify(presented) => json(StatusCode::OK, VERSION),
            _ => json(StatusCode::UNAUTHORIZED, UNAUTHORIZED),
        }
    }

    async fn whoami(
        Extension(transport): Extension<Transport>,
        ConnectInfo(peer): ConnectInfo<SocketAddr>,
    ) -> String {
        format!("tls={} peer={}", transport.tls, peer.ip())
    }

    fn version_app(token: Arc<AdminToken>) -> axum::Router {
        axum::Router::new()
            .route("/version", get(version))
            .route("/whoami", get(whoami))
            .with_state(token)
    }

    /// A router whose `/slow` reports that it started, then waits for `release`, and whose
    /// `/hang` reports and never answers.
    fn slow_app(started: mpsc::Sender<()>, release: Arc<Notify>) -> axum::Router {
        let hang_started = started.clone();
        axum::Router::new()
            .route(
                "/slow",
                get(move || async move {
                    let _ = started.send(()).await;
                    release.notified().await;
                    "done"
                }),
            )
            .route(
                "/hang",
                get(move || async move {
                    let _ = hang_started.send(()).await;
                    std::future::pending::<()>().await;
                    "never"
                }),
            )
            .route("/whoami", get(whoami))
    }

    struct Running {
        addr: SocketAddr,
        shutdown: CancellationToken,
        server: JoinHandle<io::Result<()>>,
    }

    async fn start(
        app: axum::Router,
        tls: Option<Arc<rustls::ServerConfig>>,
        grace: Duration,
    ) -> Running {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("binds");
        let addr = listener.local_addr().expect("has an address");
        let shutdown = CancellationToken::new();
        let server = tokio::spawn(serve(listener, app, tls, shutdown.clone(), grace));
        Running {
            addr,
            shutdown,
            server,
        }
    }

    /// Sends one HTTP/1.1 request on a fresh connection and returns everything the server sent
    /// until it closed the connection.
    async fn raw_get(addr: SocketAddr, path: &str) -> String {
        let mut stream = TcpStream::connect(addr).await.expect("connects");
        let request =
            format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await.expect("sends");
        let mut response = Vec::new();
        // A connection dropped by the server may end in a reset; what arrived before counts.
        let _ = stream.read_to_end(&mut response).await;
        String::from_utf8_lossy(&response).into_owned()
    }

    async fn client_from(path: &Path) -> kube::Client {
        let kubeconfig = Kubeconfig::read_from(path).expect("kubeconfig reads");
        let config =
            kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
                .await
                .expect("kube accepts the kubeconfig");
        kube::Client::try_from(config).expect("client builds")
    }

    /// A TLS server answering `/version` for `token`, and a kubeconfig for it holding
    /// `presented`.
    async fn tls_server_and_kubeconfig(
        dir: &Path,
        token: &Arc<AdminToken>,
        presented: &str,
    ) -> (Running, std::path::PathBuf, TlsMaterial) {
        let material = TlsMaterial::load_or_generate(None, &[]).expect("TLS material");
        let tls = material.server_config().expect("server config");
        let running = start(
            version_app(token.clone()),
            Some(tls),
            Duration::from_secs(1),
        )
        .await;
        let url = format!("https://127.0.0.1:{}", running.addr.port());
        let yaml = kubeconfig_yaml(&url, Some(material.ca_pem()), Some(presented));
        let path = dir.join("kubeconfig");
        write_kubeconfig(&path, &yaml).expect("kubeconfig written");
        (running, path, material)
    }

    async fn stop(running: Running) {
        running.shutdown.cancel();
        let result = tokio::time::timeout(TEST_TIMEOUT, running.server)
            .await
            .expect("serve returns after shutdown")
            .expect("serve does not panic");
        result.expect("serve succeeds");
    }

    #[tokio::test]
    async fn kube_reads_the_version_over_tls_with_the_handed_out_kubeconfig() {
        tokio::time::timeout(TEST_TIMEOUT, async {
            let dir = tempfile::tempdir().expect("tempdir");
            let token = Arc::new(AdminToken::generate());
            let (running, path, _material) =
                tls_server_and_kubeconfig(dir.path(), &token, token.as_str()).await;
            let client = client_from(&path).await;

            let info = client.apiserver_version().await.expect("version");
            assert_eq!((info.major.as_str(), info.minor.as_str()), ("1", "32"));
            assert_eq!(info.git_version, "v1.32.0");

            let request = http::Request::get("/whoami")
                .body(Vec::new())
                .expect("request");
            let seen = client.request_text(request).await.expect("whoami");
            assert_eq!(seen, "tls=true peer=127.0.0.1");
            stop(running).await;
        })
        .await
        .expect("test finishes in time");
    }

    #[tokio::test]
    async fn kube_with_a_wrong_token_gets_401() {
        tokio::time::timeout(TEST_TIMEOUT, async {
            let dir = tempfile::tempdir().expect("tempdir");
            let token = Arc::new(AdminToken::generate());
            let (running, path, _material) =
                tls_server_and_kubeconfig(dir.path(), &token, "not-the-token").await;
            let client = client_from(&path).await;

            match client.apiserver_version().await {
                Err(kube::Error::Api(status)) => {
                    assert_eq!(status.code, 401);
                    assert_eq!(status.reason, "Unauthorized");
                }
                other => panic!("expected 401, got {other:?}"),
            }
            stop(running).await;
        })
        .await
        .expect("test finishes in time");
    }

    #[tokio::test]
    async fn kubectl_reads_the_version_with_the_handed_out_kubeconfig() {
        let Some(kubectl) = find_on_path("kubectl") else {
            println!("skipping: kubectl not found");
            return;
        };
        tokio::time::timeout(TEST_TIMEOUT * 2, async {
            let dir = tempfile::tempdir().expect("tempdir");
            let token = Arc::new(AdminToken::generate());
            let (running, path, _material) =
                tls_server_and_kubeconfig(dir.path(), &token, token.as_str()).await;

            let output = tokio::process::Command::new(kubectl)
                .arg("--kubeconfig")
                .arg(&path)
                .args(["get", "--raw", "/version"])
                // Keep kubectl's caches out of the user's home directory.
                .env("HOME", dir.path())
                .env_remove("KUBECONFIG")
                .output()
                .await
                .expect("kubectl runs");
            let stdout = String::from_utf8_lossy(&output.stdout);
            let stderr = String::from_utf8_lossy(&output.stderr);
            assert!(output.status.success(), "kubectl failed: {stderr}");
            let got: serde_json::Value =
                serde_json::from_str(&stdout).expect("kubectl prints JSON");
            let want: serde_json::Value = serde_json::from_str(VERSION).expect("valid JSON");
            assert_eq!(got, want);
            stop(running).await;
        })
        .await
        .expect("test finishes in time");
    }

    fn find_on_path(program: &str) -> Option<std::path::PathBuf> {
        let path = std::env::var_os("PATH")?;
        std::env::split_paths(&path)
            .map(|dir| dir.join(program))
            .find(|candidate| candidate.is_file())
    }

    #[tokio::test]
    async fn http2_is_negotiated_over_tls_through_alpn() {
        tokio::time::timeout(TEST_TIMEOUT, async {
            let material = TlsMaterial::load_or_generate(None, &[]).expect("TLS material");
            let token = Arc::new(AdminToken::generate());
            let tls = material.server_config().expect("server config");
            let running = start(version_app(token), Some(tls), Duration::from_secs(1)).await;

            let mut roots = rustls::RootCertStore::empty();
            roots.add(material.ca_der().clone()).expect("CA added");
            let provider = Arc::new(rustls::crypto::ring::default_provider());
            let mut config = rustls::ClientConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .expect("protocol versions")
                .with_root_certificates(roots)
                .with_no_client_auth();
            config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
            let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
            let tcp = TcpStream::connect(running.addr).await.expect("connects");
            let name = rustls::pki_types::ServerName::try_from("localhost").expect("name");
            let stream = connector.connect(name, tcp).await.expect("handshake");
            assert_eq!(stream.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));

            let (mut sender, connection) =
                hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(stream))
                    .await
                    .expect("HTTP/2 handshake");
            tokio::spawn(connection);
            let request = http::Request::get("https://localhost/whoami")
                .body(http_body_util::Empty::<bytes::Bytes>::new())
                .expect("request");
            let response = sender.send_request(request).await.expect("response");
            assert_eq!(response.version(), http::Version::HTTP_2);
            let body = response
                .into_body()
                .collect()
                .await
                .expect("body")
                .to_bytes();
            assert_eq!(&body[..], b"tls=true peer=127.0.0.1");
            drop(sender);
            stop(running).await;
        })
        .await
        .expect("test finishes in time");
    }

    #[tokio::test]
    async fn a_failed_tls_handshake_does_not_stop_the_server() {
        tokio::time::timeout(TEST_TIMEOUT, async {
            let dir = tempfile::tempdir().expect("tempdir");
            let token = Arc::new(AdminToken::generate());
            let (running, path, _material) =
                tls_server_and_kubeconfig(dir.path(), &token, token.as_str()).await;

            let plain = raw_get(running.addr, "/version").await;
            assert!(
                !plain.contains("\"minor\""),
                "no plain HTTP on the TLS port: {plain}"
            );

            let client = client_from(&path).await;
            client
                .apiserver_version()
                .await
                .expect("later clients are served");
            stop(running).await;
        })
        .await
        .expect("test finishes in time");
    }

    #[tokio::test]
    async fn plain_http_serves_requests_and_marks_them_as_not_tls() {
        tokio::time::timeout(TEST_TIMEOUT, async {
            let token = Arc::new(AdminToken::generate());
            let running = start(version_app(token.clone()), None, Duration::from_secs(1)).await;

            let response = raw_get(running.addr, "/whoami").await;
            assert!(response.starts_with("HTTP/1.1 200 OK\r\n"), "{response}");
            assert!(response.ends_with("tls=false peer=127.0.0.1"), "{response}");

            // kube-rs sends the token over plain HTTP too (kubectl would not).
            let url = format!("http://127.0.0.1:{}", running.addr.port());
            let mut config = kube::Config::new(url.parse().expect("URL"));
            config.auth_info.token = Some(token.as_str().to_owned().into());
            let client = kube::Client::try_from(config).expect("client");
            let info = client.apiserver_version().await.expect("version");
            assert_eq!(info.minor, "32");
            stop(running).await;
        })
        .await
        .expect("test finishes in time");
    }

    #[tokio::test]
    async fn shutdown_lets_an_in_flight_request_finish_and_then_serve_returns() {
        tokio::time::timeout(TEST_TIMEOUT, async {
            let (started, mut started_rx) = mpsc::channel(1);
            let release = Arc::new(Notify::new());
            let mut running = start(
                slow_app(started, release.clone()),
                None,
                Duration::from_secs(20),
            )
            .await;
            let addr = running.addr;
            let client = tokio::spawn(async move { raw_get(addr, "/slow").await });
            started_rx
                .recv()
                .await
                .expect("the request reached the handler");

            running.shutdown.cancel();
            let early = tokio::time::timeout(Duration::from_millis(200), &mut running.server).await;
            assert!(early.is_err(), "serve waits for the request in flight");
            assert!(
                TcpStream::connect(addr).await.is_err(),
                "no new connections"
            );

            release.notify_one();
            let response = client.await.expect("client task");
            assert!(response.starts_with("HTTP/1.1 200 OK\r\n"), "{response}");
            assert!(response.ends_with("done"), "{response}");
            let result = tokio::time::timeout(Duration::from_secs(5), running.server)
                .await
                .expect("serve returns once the request finished")
                .expect("no panic");
            result.expect("serve succeeds");
        })
        .await
        .expect("test finishes in time");
    }

    #[tokio::test]
    async fn requests_outliving_the_grace_period_are_dropped() {
        tokio::time::timeout(TEST_TIMEOUT, async {
            let (started, mut started_rx) = mpsc::channel(1);
            let grace = Duration::from_millis(300);
            let running = start(slow_app(started, Arc::new(Notify::new())), None, grace).await;
            let addr = running.addr;
            let client = tokio::spawn(async move { raw_get(addr, "/hang").await });
            started_rx
                .recv()
                .await
                .expect("the request reached the handler");

            let cancelled_at = tokio::time::Instant::now();
            running.shutdown.cancel();
            let result = tokio::time::timeout(Duration::from_secs(5), running.server)
                .await
                .expect("serve returns after the grace period")
                .expect("no panic");
            result.expect("serve succeeds");
            assert!(
                cancelled_at.elapsed() >= grace,
                "serve waited for the grace period"
            );
            let response = client.await.expect("client task");
            assert!(
                response.is_empty(),
                "the hanging request got no answer: {response}"
            );
        })
        .await
        .expect("test finishes in time");
    }

    #[tokio::test]
    async fn idle_keep_alive_connections_do_not_delay_shutdown() {
        tokio::time::timeout(TEST_TIMEOUT, async {
            let (started, _started_rx) = mpsc::channel(1);
            let running = start(
                slow_app(started, Arc::new(Notify::new())),
                None,
                Duration::from_secs(20),
            )
            .await;
            let mut stream = TcpStream::connect(running.addr).await.expect("connects");
            stream
                .write_all(b"GET /whoami HTTP/1.1\r\nHost: localhost\r\n\r\n")
                .await
                .expect("sends");
            let mut response = Vec::new();
            while !response.ends_with(b"peer=127.0.0.1") {
                let mut chunk = [0u8; 1024];
                let read = stream.read(&mut chunk).await.expect("reads");
                assert!(read > 0, "the connection stays open after the response");
                response.extend_from_slice(&chunk[..read]);
            }

            running.shutdown.cancel();
            let result = tokio::time::timeout(Duration::from_secs(5), running.server)
                .await
                .expect("serve returns without waiting for the grace period")
                .expect("no panic");
            result.expect("serve succeeds");
            let mut rest = Vec::new();
            let _ = stream.read_to_end(&mut rest).await;
            assert!(rest.is_empty(), "the idle connection was closed");
        })
        .await
        .expect("test finishes in time");
    }
}
