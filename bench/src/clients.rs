//! The wire clients of the load generator.
//!
//! - [`KoreTarget`] / [`KoreConn`]: one keep-alive HTTP/1.1 connection over TLS to a kore
//!   server, authenticated with the CA and bearer token of the kubeconfig the server wrote — what
//!   a client such as kubectl or client-go does, minus its caches and retries.
//! - [`EtcdConn`]: one HTTP/2 connection to etcd speaking its native gRPC `KV/Put`, the way
//!   kube-apiserver talks to etcd. The two-field `PutRequest` is encoded by hand (see
//!   [`put_request`]), which avoids a protobuf toolchain and a gRPC stack for one call.
//! - [`probe_readyz`] and [`probe_etcd_health`]: blocking one-shot probes used while a process
//!   starts, precise to a fraction of a millisecond.
//!
//! Each benchmark client owns one connection and sends one request at a time (a closed loop), so
//! "N clients" means N connections with at most N requests in flight.

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpStream as StdTcpStream};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, bail, ensure};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use bytes::{BufMut as _, Bytes, BytesMut};
use http::{HeaderValue, Method, Request, Response, StatusCode, Uri, header};
use http_body_util::{BodyExt as _, Full};
use hyper::body::Incoming;
use hyper::client::conn::{http1, http2};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use serde::Deserialize;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

/// How long one probe may take before it counts as a failure.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

fn crypto_provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The parts of a kubeconfig the benchmark needs (the one kore writes has exactly one cluster
/// and one user).
#[derive(Deserialize)]
struct Kubeconfig {
    clusters: Vec<NamedCluster>,
    users: Vec<NamedUser>,
}

#[derive(Deserialize)]
struct NamedCluster {
    cluster: Cluster,
}

#[derive(Deserialize)]
struct Cluster {
    server: String,
    #[serde(rename = "certificate-authority-data")]
    certificate_authority_data: Option<String>,
}

#[derive(Deserialize)]
struct NamedUser {
    #[serde(default)]
    user: User,
}

#[derive(Deserialize, Default)]
struct User {
    token: Option<String>,
}

/// Where and how to reach a kore server over HTTPS.
#[derive(Clone)]
pub(crate) struct KoreTarget {
    addr: SocketAddr,
    connector: TlsConnector,
    server_name: ServerName<'static>,
    host: HeaderValue,
    authorization: HeaderValue,
}

impl KoreTarget {
    /// Reads the server URL, CA and token from a kubeconfig written by `kore apiserver`.
    pub(crate) fn from_kubeconfig(path: &Path) -> anyhow::Result<KoreTarget> {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let config: Kubeconfig =
            serde_saphyr::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
        let cluster = &config
            .clusters
            .first()
            .context("the kubeconfig has no cluster")?
            .cluster;
        let token = config
            .users
            .first()
            .and_then(|u| u.user.token.clone())
            .context("the kubeconfig has no token")?;
        let authority = cluster
            .server
            .strip_prefix("https://")
            .with_context(|| format!("expected an https:// server, got {}", cluster.server))?;
        let addr: SocketAddr = authority
            .trim_end_matches('/')
            .parse()
            .with_context(|| format!("parsing the server address {authority}"))?;
        let ca_pem = STANDARD
            .decode(
                cluster
                    .certificate_authority_data
                    .as_deref()
                    .context("the kubeconfig has no certificate-authority-data")?,
            )
            .context("decoding certificate-authority-data")?;
        let mut roots = RootCertStore::empty();
        for cert in rustls_pemfile::certs(&mut ca_pem.as_slice()) {
            roots
                .add(cert.context("reading the CA certificate")?)
                .context("adding the CA certificate")?;
        }
        let tls = ClientConfig::builder_with_provider(crypto_provider())
            .with_safe_default_protocol_versions()
            .context("TLS protocol versions")?
            .with_root_certificates(roots)
            .with_no_client_auth();
        Ok(KoreTarget {
            addr,
            connector: TlsConnector::from(Arc::new(tls)),
            server_name: ServerName::from(addr.ip()),
            host: HeaderValue::from_str(authority).context("host header")?,
            authorization: HeaderValue::from_str(&format!("Bearer {token}"))
                .context("authorization header")?,
        })
    }

    /// Opens a new TLS connection and completes the HTTP/1.1 handshake.
    pub(crate) async fn connect(&self) -> anyhow::Result<KoreConn> {
        let tcp = TcpStream::connect(self.addr)
            .await
            .with_context(|| format!("connecting to {}", self.addr))?;
        tcp.set_nodelay(true).context("setting TCP_NODELAY")?;
        let tls = self
            .connector
            .connect(self.server_name.clone(), tcp)
            .await
            .context("TLS handshake with kore")?;
        let (sender, connection) = http1::handshake(TokioIo::new(tls))
            .await
            .context("HTTP/1.1 handshake with kore")?;
        tokio::spawn(async move {
            // A broken connection surfaces as an error of the next request.
            let _ = connection.await;
        });
        Ok(KoreConn {
            sender,
            host: self.host.clone(),
            authorization: self.authorization.clone(),
        })
    }
}

/// One keep-alive HTTPS connection to kore.
pub(crate) struct KoreConn {
    sender: http1::SendRequest<Full<Bytes>>,
    host: HeaderValue,
    authorization: HeaderValue,
}

impl KoreConn {
    /// Sends a request and returns the response with its body still streaming (watches).
    pub(crate) async fn send(
        &mut self,
        method: Method,
        path: &str,
        body: Option<Bytes>,
    ) -> anyhow::Result<Response<Incoming>> {
        self.send_as(method, path, body, "application/json").await
    }

    /// [`KoreConn::send`] with another `Accept` header.
    async fn send_as(
        &mut self,
        method: Method,
        path: &str,
        body: Option<Bytes>,
        accept: &str,
    ) -> anyhow::Result<Response<Incoming>> {
        let mut request = Request::builder()
            .method(method)
            .uri(path)
            .header(header::HOST, self.host.clone())
            .header(header::AUTHORIZATION, self.authorization.clone())
            .header(header::ACCEPT, accept);
        if body.is_some() {
            request = request.header(header::CONTENT_TYPE, "application/json");
        }
        let request = request
            .body(Full::new(body.unwrap_or_default()))
            .context("building a request")?;
        self.sender
            .ready()
            .await
            .context("the connection to kore closed")?;
        self.sender
            .send_request(request)
            .await
            .with_context(|| format!("sending {path}"))
    }

    /// Sends a request and reads the whole response.
    pub(crate) async fn call(
        &mut self,
        method: Method,
        path: &str,
        body: Option<Bytes>,
    ) -> anyhow::Result<(StatusCode, Bytes)> {
        self.call_as(method, path, body, "application/json").await
    }

    /// [`KoreConn::call`] with another `Accept` header.
    async fn call_as(
        &mut self,
        method: Method,
        path: &str,
        body: Option<Bytes>,
        accept: &str,
    ) -> anyhow::Result<(StatusCode, Bytes)> {
        let response = self.send_as(method, path, body, accept).await?;
        let status = response.status();
        let body = response
            .into_body()
            .collect()
            .await
            .with_context(|| format!("reading the response to {path}"))?
            .to_bytes();
        Ok((status, body))
    }

    /// POSTs `body` to `path` and fails unless the answer is `201 Created`; returns the body.
    pub(crate) async fn create(&mut self, path: &str, body: Bytes) -> anyhow::Result<Bytes> {
        let (status, response) = self.call(Method::POST, path, Some(body)).await?;
        ensure!(
            status == StatusCode::CREATED,
            "POST {path}: {status}: {}",
            excerpt(&response)
        );
        Ok(response)
    }

    /// GETs `path` and fails unless the answer is `200 OK`; returns the body.
    pub(crate) async fn get(&mut self, path: &str) -> anyhow::Result<Bytes> {
        self.get_as(path, "application/json").await
    }

    /// [`KoreConn::get`], accepting `accept`.
    pub(crate) async fn get_as(&mut self, path: &str, accept: &str) -> anyhow::Result<Bytes> {
        let (status, response) = self.call_as(Method::GET, path, None, accept).await?;
        ensure!(
            status == StatusCode::OK,
            "GET {path}: {status}: {}",
            excerpt(&response)
        );
        Ok(response)
    }
}

/// The start of a response body, for error messages.
pub(crate) fn excerpt(body: &[u8]) -> String {
    let end = body.len().min(300);
    String::from_utf8_lossy(&body[..end]).into_owned()
}

/// A handle on an HTTP/2 (cleartext) connection to etcd's gRPC port. Clones share the
/// connection, each sending its own requests (streams) over it, as a gRPC client does.
#[derive(Clone)]
pub(crate) struct EtcdConn {
    sender: http2::SendRequest<Full<Bytes>>,
    put_uri: Uri,
}

impl EtcdConn {
    /// Connects to etcd's client URL at `addr`.
    pub(crate) async fn connect(addr: SocketAddr) -> anyhow::Result<EtcdConn> {
        let tcp = TcpStream::connect(addr)
            .await
            .with_context(|| format!("connecting to etcd at {addr}"))?;
        tcp.set_nodelay(true).context("setting TCP_NODELAY")?;
        let (sender, connection) = http2::handshake(TokioExecutor::new(), TokioIo::new(tcp))
            .await
            .context("HTTP/2 handshake with etcd")?;
        tokio::spawn(async move {
            let _ = connection.await;
        });
        let put_uri = format!("http://{addr}/etcdserverpb.KV/Put")
            .parse()
            .context("building the Put URI")?;
        Ok(EtcdConn { sender, put_uri })
    }

    /// `etcdctl put key value`: one gRPC `KV/Put` call, waiting for its response.
    pub(crate) async fn put(&mut self, key: &[u8], value: &[u8]) -> anyhow::Result<()> {
        let request = Request::builder()
            .method(Method::POST)
            .uri(self.put_uri.clone())
            .header(header::CONTENT_TYPE, "application/grpc")
            .header(header::TE, "trailers")
            .body(Full::new(grpc_frame(&put_request(key, value))))
            .context("building a Put request")?;
        self.sender
            .ready()
            .await
            .context("the connection to etcd closed")?;
        let response = self
            .sender
            .send_request(request)
            .await
            .context("sending Put to etcd")?;
        ensure!(
            response.status() == StatusCode::OK,
            "etcd answered Put with HTTP {}",
            response.status()
        );
        // A gRPC error without a body comes as headers only ("trailers-only").
        let early = grpc_status(response.headers());
        let collected = response
            .into_body()
            .collect()
            .await
            .context("reading etcd's Put response")?;
        let status = early.or_else(|| collected.trailers().and_then(grpc_status));
        match status {
            Some((0, _)) => Ok(()),
            Some((code, message)) => bail!("etcd Put failed: grpc-status {code}: {message}"),
            None => bail!("etcd's Put response carried no grpc-status"),
        }
    }
}

/// The `grpc-status` and `grpc-message` of a header or trailer block, if present.
fn grpc_status(headers: &http::HeaderMap) -> Option<(u32, String)> {
    let code = headers.get("grpc-status")?.to_str().ok()?.parse().ok()?;
    let message = headers
        .get("grpc-message")
        .and_then(|m| m.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    Some((code, message))
}

/// A gRPC length-prefixed message: flag 0 (uncompressed), big-endian length, payload.
fn grpc_frame(message: &[u8]) -> Bytes {
    let mut frame = BytesMut::with_capacity(5 + message.len());
    frame.put_u8(0);
    // Messages here are a few hundred bytes; gRPC limits them far below 4 GiB anyway.
    frame.put_u32(u32::try_from(message.len()).unwrap_or(u32::MAX));
    frame.put_slice(message);
    frame.freeze()
}

/// etcd's `PutRequest { key = 1; value = 2; }` in protobuf wire format: each field is a tag
/// byte (field number << 3 | wire type 2, "length-delimited"), a varint length and the bytes.
fn put_request(key: &[u8], value: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(key.len() + value.len() + 12);
    for (tag, bytes) in [(0x0a_u8, key), (0x12_u8, value)] {
        out.push(tag);
        let mut len = bytes.len();
        while len >= 0x80 {
            // Low seven bits, with the continuation bit set; the cast keeps exactly those bits.
            out.push((len & 0x7f) as u8 | 0x80);
            len >>= 7;
        }
        out.push(len as u8);
        out.extend_from_slice(bytes);
    }
    out
}

/// Accepts any server certificate, for the readiness probe only.
///
/// The probe reads the public `/readyz` endpoint and sends no credentials, and it has to start
/// before the server has written the kubeconfig that holds its CA (kubelet's HTTPS probes do not
/// verify certificates either). Signatures are still checked, so the handshake does the same
/// work as a verified one.
#[derive(Debug)]
struct AcceptAnyCertificate(Arc<CryptoProvider>);

impl ServerCertVerifier for AcceptAnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// The TLS configuration of [`probe_readyz`].
pub(crate) fn probe_tls_config() -> anyhow::Result<Arc<ClientConfig>> {
    let provider = crypto_provider();
    let config = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .context("TLS protocol versions")?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AcceptAnyCertificate(provider)))
        .with_no_client_auth();
    Ok(Arc::new(config))
}

/// One blocking `GET /readyz` over HTTPS on a fresh connection: true on `200`. Any failure
/// (connection refused because the process is not listening yet, TLS, HTTP) is `false`.
pub(crate) fn probe_readyz(addr: SocketAddr, tls: &Arc<ClientConfig>) -> bool {
    let attempt = || -> anyhow::Result<bool> {
        let mut tcp = StdTcpStream::connect_timeout(&addr, PROBE_TIMEOUT)?;
        tcp.set_read_timeout(Some(PROBE_TIMEOUT))?;
        tcp.set_write_timeout(Some(PROBE_TIMEOUT))?;
        tcp.set_nodelay(true)?;
        let name = ServerName::from(addr.ip());
        let mut conn = rustls::ClientConnection::new(tls.clone(), name)?;
        let mut stream = rustls::Stream::new(&mut conn, &mut tcp);
        let request = format!("GET /readyz HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes())?;
        Ok(status_line_is_ok(&mut stream)?)
    };
    attempt().unwrap_or(false)
}

/// One blocking `GET /health` on etcd's client URL: true when etcd reports itself healthy.
pub(crate) fn probe_etcd_health(addr: SocketAddr) -> bool {
    let attempt = || -> anyhow::Result<bool> {
        let mut tcp = StdTcpStream::connect_timeout(&addr, PROBE_TIMEOUT)?;
        tcp.set_read_timeout(Some(PROBE_TIMEOUT))?;
        let request = format!("GET /health HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
        tcp.write_all(request.as_bytes())?;
        let mut response = Vec::new();
        tcp.read_to_end(&mut response)?;
        let text = String::from_utf8_lossy(&response);
        Ok(text.starts_with("HTTP/1.1 200") && text.contains("\"health\":\"true\""))
    };
    attempt().unwrap_or(false)
}

/// Reads until the end of the status line and checks for status 200.
fn status_line_is_ok(stream: &mut impl std::io::Read) -> std::io::Result<bool> {
    let mut head = Vec::with_capacity(64);
    let mut chunk = [0u8; 256];
    while !head.contains(&b'\n') && head.len() < 4096 {
        let n = stream.read(&mut chunk)?;
        if n == 0 {
            break;
        }
        head.extend_from_slice(&chunk[..n]);
    }
    Ok(head.starts_with(b"HTTP/1.1 200 "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn put_request_encodes_two_length_delimited_fields() {
        assert_eq!(
            put_request(b"k", b"vv"),
            vec![0x0a, 1, b'k', 0x12, 2, b'v', b'v']
        );
        let long = vec![b'x'; 300];
        let encoded = put_request(b"", &long);
        // 300 = 0b1_0010_1100: varint bytes 0xac 0x02.
        assert_eq!(&encoded[..5], &[0x0a, 0, 0x12, 0xac, 0x02]);
        assert_eq!(encoded.len(), 5 + 300);
    }

    #[test]
    fn grpc_frame_prefixes_flag_and_big_endian_length() {
        assert_eq!(&grpc_frame(b"abc")[..], &[0, 0, 0, 0, 3, b'a', b'b', b'c']);
    }
}
