//! [`Transport`]: how a request reached the server, set by the serve loop as a request
//! extension and read when the request is authenticated.

use std::sync::Arc;

use rustls::pki_types::CertificateDer;

/// The certificate chain a TLS client presented (leaf first), not yet verified: a request
/// extension the serve loop sets on every request of a connection whose client sent one.
/// Authentication checks it (`auth/x509.rs`).
#[derive(Clone, Debug)]
pub struct PeerCertificates(pub Arc<[CertificateDer<'static>]>);

/// How the request reached the server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transport {
    /// Whether the connection is TLS. kubectl and client-go send no credentials otherwise
    /// (spec §1 trap #7).
    pub tls: bool,
}
