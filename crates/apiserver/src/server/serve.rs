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
//! # Limits at the edge
//! - The request line and headers may take [`MAX_HEADER_BYTES`] (1 MiB, kube-apiserver's
//!   `MaxHeaderBytes`, plus the 4 KiB of slack Go's server allows). Larger heads get a 431
//!   `Status`. hyper is told to read heads up to twice that, so a head just over the limit is
//!   read whole and answered instead of cut off mid-stream (a connection closed with unread
//!   bytes is reset, and the client never sees the answer); past twice the limit hyper answers
//!   431 itself.
//! - A request answered before its body was read (a 404, a 413, a refused authorization) has
//!   the rest of its body read and discarded in the background, up to [`DRAIN_LIMIT`] bytes
//!   and [`DRAIN_TIMEOUT`]: over HTTP/2 the stream then ends cleanly instead of being
//!   cancelled (which clients report as a stream error and may lose the answer with), and an
//!   HTTP/1.1 connection stays usable.
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
use bytes::Bytes;
use http_body::{Body as HttpBody, Frame, SizeHint};
use http_body_util::BodyExt as _;
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

/// The most a request line and its headers may take, as in kube-apiserver (1 MiB
/// `MaxHeaderBytes` plus Go's 4 KiB of slack).
pub const MAX_HEADER_BYTES: usize = (1 << 20) + 4096;

/// How much of a request body that was answered early is still read and discarded.
pub const DRAIN_LIMIT: usize = 16 << 20;

/// How long the rest of a request body that was answered early may take to arrive.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

/// Pause after an accept error that is not about one connection (for example the process ran out
/// of file descriptors), so the loop does not spin.
const ACCEPT_ERROR_PAUSE: Duration = Duration::from_millis(100);

/// How the request reached the server; a request extension set by [`serve`]. It lives on the
/// ground floor (`api/transport.rs`) because authentication, below this layer, reads it.
pub use crate::api::transport::Transport;

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
        .header_read_timeout(HEADER_READ_TIMEOUT)
        .max_buf_size(2 * MAX_HEADER_BYTES);
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_header_list_size(u32::try_from(2 * MAX_HEADER_BYTES).unwrap_or(u32::MAX));
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
            self.serve_http(TokioIo::new(stream), false, None).await;
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
        let peer_certificates = stream.get_ref().1.peer_certificates().map(|chain| {
            crate::api::transport::PeerCertificates(
                chain.iter().map(|c| c.clone().into_owned()).collect(),
            )
        });
        self.serve_http(TokioIo::new(stream), true, peer_certificates)
            .await;
    }

    async fn serve_http<I>(
        self,
        io: I,
        tls: bool,
        peer_certificates: Option<crate::api::transport::PeerCertificates>,
    ) where
        I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
    {
        let Connection {
            peer,
            app,
            builder,
            shutdown,
            abort,
        } = self;
        let service = hyper::service::service_fn(move |request: http::Request<Incoming>| {
            let app = app.clone();
            let peer_certificates = peer_certificates.clone();
            async move {
                if head_bytes(&request) > MAX_HEADER_BYTES {
                    return Ok(head_too_large());
                }
                let (mut parts, body) = request.into_parts();
                parts.extensions.insert(ConnectInfo(peer));
                parts.extensions.insert(Transport { tls });
                if let Some(chain) = peer_certificates {
                    parts.extensions.insert(chain);
                }
                let request = http::Request::from_parts(parts, DrainOnDrop::new(body));
                app.oneshot(request).await
            }
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

/// The size of a request's head as it was sent: the request line and every header line.
fn head_bytes<B>(request: &http::Request<B>) -> usize {
    let line = request.method().as_str().len()
        + request
            .uri()
            .path_and_query()
            .map_or(1, |p| p.as_str().len())
        + 12;
    request.headers().iter().fold(line, |n, (name, value)| {
        n + name.as_str().len() + value.len() + 4
    })
}

/// The answer to a request whose head is over [`MAX_HEADER_BYTES`].
fn head_too_large() -> axum::response::Response {
    let status = serde_json::json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": format!("request headers are larger than the limit of {MAX_HEADER_BYTES} bytes"),
        "reason": "RequestHeaderFieldsTooLarge",
        "code": 431,
    });
    let mut response = axum::response::Response::new(axum::body::Body::from(status.to_string()));
    *response.status_mut() = http::StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE;
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    response
}

/// A request body that, when dropped before its end (the request was answered without
/// reading it all), is read to the end and discarded in the background, within
/// [`DRAIN_LIMIT`] and [`DRAIN_TIMEOUT`]. See the module docs for why.
struct DrainOnDrop {
    body: Option<Incoming>,
    read: usize,
}

impl DrainOnDrop {
    fn new(body: Incoming) -> Self {
        DrainOnDrop {
            body: Some(body),
            read: 0,
        }
    }
}

impl HttpBody for DrainOnDrop {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let Some(body) = self.body.as_mut() else {
            return std::task::Poll::Ready(None);
        };
        let polled = std::pin::Pin::new(body).poll_frame(cx);
        match &polled {
            std::task::Poll::Ready(Some(Ok(frame))) => {
                let n = frame.data_ref().map_or(0, Bytes::len);
                self.read = self.read.saturating_add(n);
            }
            std::task::Poll::Ready(None | Some(Err(_))) => self.body = None,
            std::task::Poll::Pending => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.body.as_ref().is_none_or(HttpBody::is_end_stream)
    }

    fn size_hint(&self) -> SizeHint {
        self.body
            .as_ref()
            .map_or_else(|| SizeHint::with_exact(0), HttpBody::size_hint)
    }
}

impl Drop for DrainOnDrop {
    fn drop(&mut self) {
        let Some(mut body) = self.body.take() else {
            return;
        };
        if body.is_end_stream() {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let mut budget = DRAIN_LIMIT.saturating_sub(self.read);
        runtime.spawn(async move {
            let drain = async {
                while let Some(Ok(frame)) = body.frame().await {
                    let n = frame.data_ref().map_or(0, Bytes::len);
                    if n > budget {
                        break;
                    }
                    budget -= n;
                }
            };
            // Past the budget or the time, dropping the body resets the stream.
            let _ = tokio::time::timeout(DRAIN_TIMEOUT, drain).await;
        });
    }
}

#[cfg(test)]
mod tests;
