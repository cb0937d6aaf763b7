//! Tests of the accept loop over real sockets: TLS, HTTP/1.1 and HTTP/2, shutdown, limits.

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
    let request = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.expect("sends");
    let mut response = Vec::new();
    // A connection dropped by the server may end in a reset; what arrived before counts.
    let _ = stream.read_to_end(&mut response).await;
    String::from_utf8_lossy(&response).into_owned()
}

async fn client_from(path: &Path) -> kube::Client {
    let kubeconfig = Kubeconfig::read_from(path).expect("kubeconfig reads");
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
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
        let got: serde_json::Value = serde_json::from_str(&stdout).expect("kubectl prints JSON");
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

/// A router whose `/early` answers 404 without reading the request body.
fn early_app() -> axum::Router {
    axum::Router::new().route(
        "/early",
        axum::routing::post(|| async { json(StatusCode::NOT_FOUND, UNAUTHORIZED) }),
    )
}

#[tokio::test]
async fn an_http2_request_answered_before_its_body_ends_cleanly() {
    tokio::time::timeout(TEST_TIMEOUT, async {
        let running = start(early_app(), None, Duration::from_secs(1)).await;
        let tcp = TcpStream::connect(running.addr).await.expect("connects");
        let (mut sender, connection) =
            hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tcp))
                .await
                .expect("HTTP/2 handshake (prior knowledge)");
        tokio::spawn(connection);
        // The body keeps coming after the answer: 4 MiB in 64 KiB chunks.
        let (tx, rx) = mpsc::channel::<Result<http_body::Frame<bytes::Bytes>, io::Error>>(4);
        let body = http_body_util::StreamBody::new(tokio_stream_from(rx));
        let request = http::Request::post("http://localhost/early")
            .body(body)
            .expect("request");
        let sending = tokio::spawn(async move {
            for _ in 0..64 {
                let chunk = bytes::Bytes::from(vec![b'x'; 64 << 10]);
                if tx.send(Ok(http_body::Frame::data(chunk))).await.is_err() {
                    return false;
                }
            }
            true
        });
        let response = sender.send_request(request).await.expect("a response");
        assert_eq!(response.status(), StatusCode::NOT_FOUND);
        let body = response
            .into_body()
            .collect()
            .await
            .expect("the whole answer, no reset");
        assert_eq!(&body.to_bytes()[..], UNAUTHORIZED.as_bytes());
        assert!(
            sending.await.expect("sender"),
            "the rest of the body was taken"
        );
        // The connection still serves the next request.
        let again = http::Request::post("http://localhost/early")
            .body(http_body_util::StreamBody::new(tokio_stream_from(
                mpsc::channel::<Result<http_body::Frame<bytes::Bytes>, io::Error>>(1).1,
            )))
            .expect("request");
        let response = sender.send_request(again).await.expect("a second response");
        assert_eq!(response.status(), StatusCode::NOT_FOUND);
        stop(running).await;
    })
    .await
    .expect("test finishes in time");
}

/// A stream over a channel's receiver (tokio-stream is not a dependency).
fn tokio_stream_from<T: Send + 'static>(
    rx: mpsc::Receiver<T>,
) -> std::pin::Pin<Box<dyn futures::Stream<Item = T> + Send + 'static>> {
    Box::pin(futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|v| (v, rx))
    }))
}

#[tokio::test]
async fn a_head_over_the_limit_gets_431_and_one_under_it_is_served() {
    tokio::time::timeout(TEST_TIMEOUT, async {
        let token = Arc::new(AdminToken::generate());
        let running = start(version_app(token), None, Duration::from_secs(1)).await;
        let send = |size: usize| async move {
            let mut stream = TcpStream::connect(running.addr).await.expect("connects");
            let request = format!(
                "GET /whoami HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nX-Big: {}\r\n\r\n",
                "x".repeat(size)
            );
            stream.write_all(request.as_bytes()).await.expect("sends");
            let mut response = Vec::new();
            let _ = stream.read_to_end(&mut response).await;
            String::from_utf8_lossy(&response).into_owned()
        };
        let under = send(1 << 20).await;
        assert!(under.starts_with("HTTP/1.1 200 OK\r\n"), "{under}");
        let over = send((1 << 20) + 8192).await;
        assert!(over.starts_with("HTTP/1.1 431 "), "{over}");
        assert!(
            over.contains("\"reason\":\"RequestHeaderFieldsTooLarge\""),
            "{over}"
        );
        stop(running).await;
    })
    .await
    .expect("test finishes in time");
}
