//! x509 client certificate authentication, beside bearer tokens.
//!
//! Over TLS the server asks every client for a certificate but requires none. What a client
//! presents is checked per request, not during the handshake, because that is how
//! kube-apiserver behaves (Go's `tls.RequestClientCert`, then its x509 authenticator): a
//! certificate that does not verify (another CA, expired, not for client auth) makes the
//! request fail with 401 unless a bearer token on the same request authenticates it; it never
//! breaks the connection and is never downgraded to anonymous.
//!
//! A certificate verifies when it chains to kore's CA or to a CA of the configured client CA
//! bundle (`Config::client_ca_file`, kube-apiserver's `--client-ca-file`) and allows client
//! auth, checked by rustls' `WebPkiClientVerifier`. The user is then its subject's common name,
//! its groups the subject's organizations plus `system:authenticated`, and its `extra` holds the
//! credential id `X509SHA256=<hex SHA-256 of the certificate>`, as kube-apiserver 1.33 records.
//! A verified certificate without a common name authenticates nobody (the request goes on as
//! if none was presented), as in Kubernetes.
//!
//! The handshake side ([`ClientCertAuthenticator::handshake_verifier`]) lists the trusted CAs
//! as hints and checks the client's proof of possession of the key (the TLS signature) with the
//! same webpki verifier; only the chain's verdict waits for the request.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::client::danger::HandshakeSignatureValid;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, UnixTime};
use rustls::server::WebPkiClientVerifier;
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{DigitallySignedStruct, DistinguishedName, RootCertStore, SignatureScheme};
use sha2::Digest as _;

use super::authenticate::CREDENTIAL_ID;
use crate::api::user::User;

/// Why a client CA bundle could not be used, or a presented certificate authenticates nobody.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum X509Error {
    /// The client CA bundle could not be read; fix the path or its permissions.
    #[error("reading the client CA bundle {} failed", .path.display())]
    ReadBundle {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The client CA bundle holds no usable CA certificate.
    #[error("the client CA bundle {} holds no usable certificate: {reason}", .path.display())]
    BadBundle {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// The presented certificate does not verify against the trusted CAs (a 401).
    #[error("verifying the client certificate failed")]
    Verify(#[source] rustls::Error),
    /// The presented certificate verifies but cannot be parsed for its subject (a 401).
    #[error("reading the client certificate's subject failed: {0}")]
    Parse(String),
}

/// Checks client certificates against kore's CA and the configured client CAs.
#[derive(Debug)]
pub struct ClientCertAuthenticator {
    verifier: Arc<dyn ClientCertVerifier>,
}

impl ClientCertAuthenticator {
    /// An authenticator trusting each of `roots` (DER CA certificates).
    ///
    /// # Errors
    /// [`X509Error::BadBundle`] (with an empty path) when no root is usable.
    pub fn new(roots: &[CertificateDer<'static>]) -> Result<ClientCertAuthenticator, X509Error> {
        let bad = |reason: String| X509Error::BadBundle {
            path: PathBuf::new(),
            reason,
        };
        let mut store = RootCertStore::empty();
        for root in roots {
            store.add(root.clone()).map_err(|e| bad(e.to_string()))?;
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(store), provider)
            .allow_unauthenticated()
            .build()
            .map_err(|e| bad(e.to_string()))?;
        Ok(ClientCertAuthenticator { verifier })
    }

    /// The verifier for the TLS handshake: asks for a certificate, requires none, checks the
    /// client's signature, and leaves the chain to [`Self::authenticate`].
    pub fn handshake_verifier(&self) -> Arc<dyn ClientCertVerifier> {
        Arc::new(RequestClientCert {
            inner: self.verifier.clone(),
        })
    }

    /// The user a presented chain (leaf first) authenticates, now. `Ok(None)`: no certificate,
    /// or one without a common name. `Err`: the certificate is not acceptable (a 401 unless a
    /// bearer token authenticates the request).
    ///
    /// # Errors
    /// See above.
    pub fn authenticate(
        &self,
        chain: &[CertificateDer<'static>],
    ) -> Result<Option<User>, X509Error> {
        self.authenticate_at(chain, UnixTime::now())
    }

    /// [`Self::authenticate`] at time `now`.
    ///
    /// # Errors
    /// See [`Self::authenticate`].
    pub fn authenticate_at(
        &self,
        chain: &[CertificateDer<'static>],
        now: UnixTime,
    ) -> Result<Option<User>, X509Error> {
        let Some((leaf, intermediates)) = chain.split_first() else {
            return Ok(None);
        };
        self.verifier
            .verify_client_cert(leaf, intermediates, now)
            .map_err(X509Error::Verify)?;
        user_of(leaf)
    }
}

/// The user a verified leaf names, as kube-apiserver's `CommonNameUserConversion`.
fn user_of(leaf: &CertificateDer<'_>) -> Result<Option<User>, X509Error> {
    let (_, cert) =
        x509_parser::parse_x509_certificate(leaf).map_err(|e| X509Error::Parse(e.to_string()))?;
    let subject = cert.subject();
    // Go keeps the last common name of a subject that has several.
    let Some(name) = subject
        .iter_common_name()
        .filter_map(|cn| cn.as_str().ok())
        .last()
        .filter(|cn| !cn.is_empty())
    else {
        return Ok(None);
    };
    let mut groups: Vec<String> = subject
        .iter_organization()
        .filter_map(|o| o.as_str().ok())
        .map(str::to_owned)
        .collect();
    if !groups.iter().any(|g| g == "system:authenticated") {
        groups.push("system:authenticated".into());
    }
    let digest = sha2::Sha256::digest(leaf.as_ref());
    let mut id = String::from("X509SHA256=");
    for byte in digest {
        let _ = write!(id, "{byte:02x}");
    }
    Ok(Some(User {
        name: name.to_owned(),
        groups,
        uid: String::new(),
        extra: BTreeMap::from([(CREDENTIAL_ID.to_owned(), vec![id])]),
    }))
}

/// The CA certificates in the PEM file `path` (kube-apiserver's `--client-ca-file`).
///
/// # Errors
/// The file cannot be read, or holds no certificate.
pub fn read_ca_bundle(path: &Path) -> Result<Vec<CertificateDer<'static>>, X509Error> {
    let bytes = std::fs::read(path).map_err(|source| X509Error::ReadBundle {
        path: path.to_path_buf(),
        source,
    })?;
    let certs = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| X509Error::BadBundle {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?;
    if certs.is_empty() {
        return Err(X509Error::BadBundle {
            path: path.to_path_buf(),
            reason: "no CERTIFICATE block".into(),
        });
    }
    Ok(certs)
}

/// Asks for a client certificate, requires none, and accepts any chain at the handshake (the
/// request checks it); the client's signature is still verified.
#[derive(Debug)]
struct RequestClientCert {
    inner: Arc<dyn ClientCertVerifier>,
}

impl ClientCertVerifier for RequestClientCert {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        false
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        self.inner.root_hint_subjects()
    }

    fn verify_client_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        Ok(ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::auth::tls::TlsMaterial;

    fn der_of(pem: &str) -> CertificateDer<'static> {
        CertificateDer::from_pem_slice(pem.as_bytes()).expect("a PEM certificate")
    }

    #[test]
    fn a_certificate_of_the_ca_names_its_user_and_groups() {
        let ca = TlsMaterial::load_or_generate(None, &[])
            .expect("generates")
            .authority();
        let auth = ClientCertAuthenticator::new(&[ca.der().clone()]).expect("builds");
        let issued = ca
            .issue_client("alice", Some("devs"), Duration::from_secs(3600))
            .expect("issues");
        let user = auth
            .authenticate(&[der_of(&issued.cert_pem)])
            .expect("verifies")
            .expect("has a CN");
        assert_eq!(user.name, "alice");
        assert_eq!(user.groups, ["devs", "system:authenticated"]);
        let id = &user.extra[CREDENTIAL_ID][0];
        assert!(id.starts_with("X509SHA256=") && id.len() == 11 + 64, "{id}");
        assert_eq!(auth.authenticate(&[]).expect("nothing presented"), None);
    }

    #[test]
    fn another_ca_or_an_expired_certificate_is_refused() {
        let ca = TlsMaterial::load_or_generate(None, &[])
            .expect("generates")
            .authority();
        let other = TlsMaterial::load_or_generate(None, &[])
            .expect("generates")
            .authority();
        let auth = ClientCertAuthenticator::new(&[ca.der().clone()]).expect("builds");
        let foreign = other
            .issue_client("mallory", None, Duration::from_secs(3600))
            .expect("issues");
        assert!(matches!(
            auth.authenticate(&[der_of(&foreign.cert_pem)]),
            Err(X509Error::Verify(_))
        ));
        let short = ca
            .issue_client("bob", None, Duration::from_secs(60))
            .expect("issues");
        let later = UnixTime::since_unix_epoch(
            Duration::from_secs(UnixTime::now().as_secs()) + Duration::from_secs(3600),
        );
        assert!(matches!(
            auth.authenticate_at(&[der_of(&short.cert_pem)], later),
            Err(X509Error::Verify(_))
        ));
        // Trusting the other CA too (a client CA bundle) accepts its certificates.
        let both =
            ClientCertAuthenticator::new(&[ca.der().clone(), other.der().clone()]).expect("builds");
        let user = both
            .authenticate(&[der_of(&foreign.cert_pem)])
            .expect("verifies")
            .expect("has a CN");
        assert_eq!(user.name, "mallory");
        assert_eq!(user.groups, ["system:authenticated"]);
    }

    #[test]
    fn a_bundle_without_certificates_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("ca.pem");
        std::fs::write(&path, "not a certificate").expect("writes");
        assert!(matches!(
            read_ca_bundle(&path),
            Err(X509Error::BadBundle { .. })
        ));
        assert!(matches!(
            read_ca_bundle(&dir.path().join("missing.pem")),
            Err(X509Error::ReadBundle { .. })
        ));
    }
}
