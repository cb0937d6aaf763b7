//! The server's certificates: a private CA and the serving certificate it signs.
//!
//! Clients trust the CA through the kubeconfig (`certificate-authority-data`, spec §15.3), so the
//! serving certificate can be reissued (new names, near expiry) without handing out a new
//! kubeconfig, as long as the CA stays. Start with [`TlsMaterial::load_or_generate`], then pass
//! [`TlsMaterial::server_config`] to the socket serve loop and
//! [`TlsMaterial::ca_pem`] to [`super::kubeconfig::kubeconfig_yaml`].
//!
//! # Guarantees
//! - The CA is self-signed, `CN=kore-ca`, `CA:TRUE` with path length 0, key usage `keyCertSign`.
//! - The serving certificate is a leaf (`CA:FALSE`), `extendedKeyUsage=serverAuth`, with SANs
//!   `IP:127.0.0.1`, `IP:::1`, `DNS:localhost` and every extra name the caller asked for. rustls
//!   (kube-rs) ignores the CN and needs exactly this: a v3 leaf whose SAN matches the host.
//! - Keys are ECDSA P-256, written as PKCS#8 PEM with mode 0600; certificates with mode 0644.
//! - The certificates are checked the way clients check them (webpki, ring provider) before they
//!   are used: a kept serving certificate is reused only if it chains to the kept CA, matches its
//!   key, covers every requested name and stays valid for 30 more days; otherwise a new one is
//!   signed by the kept CA.
//!
//! # Caveats
//! - A kept CA is never replaced: clients hold it. If it was not made by this module (another
//!   subject name) or has expired, a new serving certificate cannot chain to it and
//!   [`TlsError::CaUnusable`] says so; delete `ca.crt` and `ca.key` to start over.
//! - Two processes generating into the same empty directory at the same moment each write their
//!   own CA and the last rename wins. Give each server its own directory.
//! - The CA also signs client certificates ([`CertificateAuthority::issue_client`], for the
//!   kubeconfig `kore apiserver --kubeconfig-client-cert` writes) and approved
//!   CertificateSigningRequests (`auth/csr.rs`). rcgen holds one value per subject attribute
//!   type, so a signed certificate carries at most one organization (group).

use std::error::Error as StdError;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use jiff::ToSpan as _;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SanType, SerialNumber,
};
use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::ServerCertVerifier as _;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName, UnixTime};
use rustls::sign::CertifiedKey;
use rustls::{RootCertStore, ServerConfig};

use super::{PRIVATE_MODE, PUBLIC_MODE, read_if_exists, write_file_atomically};

pub use crate::api::data_dir::{CA_CERT_FILE, CA_KEY_FILE, SERVER_CERT_FILE, SERVER_KEY_FILE};

/// Common name of the generated CA.
const CA_COMMON_NAME: &str = "kore-ca";
/// Common name of the serving certificate (informational: clients match SANs only).
const SERVER_COMMON_NAME: &str = "kore-apiserver";
/// How long a new CA is valid.
const CA_VALIDITY_DAYS: i64 = 3650;
/// How long a new serving certificate is valid.
const SERVER_VALIDITY_DAYS: i64 = 365;
/// A kept serving certificate must stay valid at least this long to be reused.
const MIN_REMAINING_VALIDITY: Duration = Duration::from_secs(30 * 24 * 60 * 60);

/// Why the certificates could not be loaded, generated or turned into a TLS configuration.
///
/// All of these happen at startup and none goes away by retrying: fix the files or their
/// permissions (the message names them), or remove the directory to start with a new CA.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TlsError {
    /// A file of the data directory could not be read.
    #[error("reading {} failed", .path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A file of the data directory could not be written.
    #[error("writing {} failed", .path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A CA file exists but does not hold a usable certificate or key, or the two do not match.
    #[error("{} holds no usable certificate or key", .path.display())]
    Unusable {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        #[source]
        source: Box<dyn StdError + Send + Sync>,
    },
    /// The CA certificate exists without its key (or the other way round), so nothing can be
    /// signed and the CA cannot be replaced without breaking clients that trust it.
    #[error("{} exists but {} does not", .found.display(), .missing.display())]
    Incomplete {
        /// The file that exists.
        found: PathBuf,
        /// The file that is missing.
        missing: PathBuf,
    },
    /// An extra subject alternative name is neither an IP address nor a valid DNS name.
    #[error("{0:?} is neither an IP address nor a DNS name")]
    InvalidName(String),
    /// Generating or signing a certificate failed.
    #[error("generating a certificate failed")]
    Generate(#[source] rcgen::Error),
    /// A freshly signed serving certificate does not verify against the kept CA (it expired, or
    /// was not made by this module).
    #[error("the CA in {} cannot sign a serving certificate that clients accept", .dir.display())]
    CaUnusable {
        /// The data directory.
        dir: PathBuf,
        /// Why verification failed.
        #[source]
        source: rustls::Error,
    },
    /// rustls refused the certificate or key.
    #[error("building the TLS server configuration failed")]
    Config(#[source] rustls::Error),
}

/// kore's CA as a signer of client certificates and certificate signing requests: cheap to
/// clone, and its [`Debug`] output shows no key material.
#[derive(Clone)]
pub struct CertificateAuthority {
    ca: Arc<Ca>,
}

impl fmt::Debug for CertificateAuthority {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CertificateAuthority")
            .finish_non_exhaustive()
    }
}

/// A certificate and its private key, both PEM (the key PKCS#8).
#[derive(Clone)]
pub struct KeyedCertificate {
    /// The certificate.
    pub cert_pem: String,
    /// Its private key.
    pub key_pem: String,
}

impl fmt::Debug for KeyedCertificate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyedCertificate")
            .field("cert_pem", &self.cert_pem)
            .finish_non_exhaustive()
    }
}

impl CertificateAuthority {
    /// The CA certificate in PEM.
    pub fn pem(&self) -> &str {
        &self.ca.pem
    }

    /// The CA certificate in DER.
    pub fn der(&self) -> &CertificateDer<'static> {
        &self.ca.der
    }

    /// When the CA expires: nothing it signs may outlive it.
    pub fn not_after(&self) -> time::OffsetDateTime {
        self.ca.not_after
    }

    /// A new key and a client certificate for it (`extendedKeyUsage=clientAuth`) with subject
    /// `CN=<common_name>` and, if given, `O=<organization>`: kube-apiserver's x509
    /// authentication reads the CN as the user and each O as a group. Valid from five minutes
    /// ago (clock skew) for `validity`, and never past the CA.
    ///
    /// # Errors
    /// Generating or signing failed.
    pub fn issue_client(
        &self,
        common_name: &str,
        organization: Option<&str>,
        validity: Duration,
    ) -> Result<KeyedCertificate, TlsError> {
        let key = KeyPair::generate().map_err(TlsError::Generate)?;
        let mut params = CertificateParams::default();
        let mut name = DistinguishedName::new();
        if let Some(org) = organization {
            name.push(DnType::OrganizationName, org);
        }
        name.push(DnType::CommonName, common_name);
        params.distinguished_name = name;
        params.is_ca = IsCa::ExplicitNoCa;
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let now = time::OffsetDateTime::now_utc();
        params.not_before = now - time::Duration::minutes(5);
        params.not_after = time::Duration::try_from(validity)
            .ok()
            .and_then(|d| now.checked_add(d))
            .map_or(self.ca.not_after, |end| end.min(self.ca.not_after));
        let der = self.sign(params, &key)?;
        Ok(KeyedCertificate {
            cert_pem: pem_encode("CERTIFICATE", &der),
            key_pem: key.serialize_pem(),
        })
    }

    /// Signs `params` for `public_key` with a fresh serial number and the authority key
    /// identifier; validity, names and usages are the caller's.
    pub(crate) fn sign(
        &self,
        mut params: CertificateParams,
        public_key: &impl rcgen::PublicKeyData,
    ) -> Result<CertificateDer<'static>, TlsError> {
        params.use_authority_key_identifier_extension = true;
        params.serial_number = Some(random_serial());
        let issuer = Issuer::new(Ca::params(), &self.ca.key);
        let cert = params
            .signed_by(public_key, &issuer)
            .map_err(TlsError::Generate)?;
        Ok(cert.der().clone())
    }
}

/// The CA and the serving certificate of one server.
///
/// Cheap to keep for the life of the server; [`Debug`] output shows no key material.
pub struct TlsMaterial {
    ca: Arc<Ca>,
    ca_pem: String,
    ca_der: CertificateDer<'static>,
    server_der: CertificateDer<'static>,
    server_key: PrivateKeyDer<'static>,
}

impl fmt::Debug for TlsMaterial {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsMaterial").finish_non_exhaustive()
    }
}

impl TlsMaterial {
    /// Loads the CA and serving certificate from `dir`, or generates what is missing.
    ///
    /// With a directory: `ca.crt`/`ca.key` are reused if present and generated (and written)
    /// otherwise; `server.crt`/`server.key` are reused if they still suit (see the module
    /// Guarantees), and otherwise signed anew by the CA and written. Without a directory,
    /// everything is generated in memory.
    ///
    /// `extra_sans` are host names or IP addresses (IPv6 may be bracketed; a socket address such as
    /// `10.0.0.5:6443` stands for its IP) to add to the built-in `127.0.0.1`, `::1` and
    /// `localhost`, for example the address the server listens on.
    ///
    /// # Errors
    /// Files that cannot be read, written or parsed; a CA certificate without its key; an extra
    /// name that is not a host name or IP; a kept CA that cannot issue a valid certificate.
    pub fn load_or_generate(
        dir: Option<&Path>,
        extra_sans: &[String],
    ) -> Result<TlsMaterial, TlsError> {
        let hosts = requested_hosts(extra_sans)?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let Some(dir) = dir else {
            let ca = Ca::generate()?;
            let leaf = ca.issue(&hosts)?;
            verify_leaf(&provider, &ca.der, &leaf.der, &hosts, &[UnixTime::now()])
                .map_err(TlsError::Config)?;
            return Ok(TlsMaterial::new(Arc::new(ca), leaf));
        };

        let ca = match Ca::load(dir, &provider)? {
            Some(ca) => ca,
            None => {
                let ca = Ca::generate()?;
                // Key first: a certificate on disk implies its key is there too.
                write(
                    &dir.join(CA_KEY_FILE),
                    ca.key.serialize_pem().as_bytes(),
                    PRIVATE_MODE,
                )?;
                write(&dir.join(CA_CERT_FILE), ca.pem.as_bytes(), PUBLIC_MODE)?;
                ca
            }
        };

        if let Some(leaf) = Leaf::load(dir)? {
            let now = UnixTime::now();
            let later = UnixTime::since_unix_epoch(
                Duration::from_secs(now.as_secs()) + MIN_REMAINING_VALIDITY,
            );
            let usable =
                CertifiedKey::from_der(vec![leaf.der.clone()], leaf.key.clone_key(), &provider)
                    .and_then(|_| {
                        verify_leaf(&provider, &ca.der, &leaf.der, &hosts, &[now, later])
                    });
            match usable {
                Ok(()) => return Ok(TlsMaterial::new(Arc::new(ca), leaf)),
                Err(reason) => tracing::info!(
                    dir = %dir.display(),
                    %reason,
                    "issuing a new serving certificate"
                ),
            }
        }

        let leaf = ca.issue(&hosts)?;
        verify_leaf(&provider, &ca.der, &leaf.der, &hosts, &[UnixTime::now()]).map_err(
            |source| TlsError::CaUnusable {
                dir: dir.to_path_buf(),
                source,
            },
        )?;
        write(&dir.join(SERVER_KEY_FILE), &leaf.key_pem, PRIVATE_MODE)?;
        write(&dir.join(SERVER_CERT_FILE), &leaf.cert_pem, PUBLIC_MODE)?;
        Ok(TlsMaterial::new(Arc::new(ca), leaf))
    }

    /// The same CA with a new serving certificate, kept in memory only, that also names
    /// `extra_sans` (as in [`Self::load_or_generate`]): how a server without a data directory
    /// serves a socket under the CA it published at start (in `kube-root-ca.crt`).
    ///
    /// # Errors
    /// An extra name that is not a host name or IP; signing failed.
    pub fn reissue(&self, extra_sans: &[String]) -> Result<TlsMaterial, TlsError> {
        let hosts = requested_hosts(extra_sans)?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let leaf = self.ca.issue(&hosts)?;
        verify_leaf(
            &provider,
            &self.ca.der,
            &leaf.der,
            &hosts,
            &[UnixTime::now()],
        )
        .map_err(TlsError::Config)?;
        Ok(TlsMaterial::new(self.ca.clone(), leaf))
    }

    fn new(ca: Arc<Ca>, leaf: Leaf) -> TlsMaterial {
        TlsMaterial {
            ca_pem: ca.pem.clone(),
            ca_der: ca.der.clone(),
            ca,
            server_der: leaf.der,
            server_key: leaf.key,
        }
    }

    /// The CA certificate in PEM, for kubeconfigs and `kube-root-ca.crt` ConfigMaps.
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// The CA certificate in DER.
    pub fn ca_der(&self) -> &CertificateDer<'static> {
        &self.ca_der
    }

    /// The CA, to sign client certificates and certificate signing requests.
    pub fn authority(&self) -> CertificateAuthority {
        CertificateAuthority {
            ca: self.ca.clone(),
        }
    }

    /// A rustls server configuration presenting the serving certificate, offering ALPN `h2` and
    /// `http/1.1`, with the ring provider (independent of any process-wide default provider).
    ///
    /// # Errors
    /// rustls rejects the key (cannot happen for material from [`Self::load_or_generate`],
    /// which checks it).
    pub fn server_config(&self) -> Result<Arc<ServerConfig>, TlsError> {
        self.server_config_with(None)
    }

    /// Like [`Self::server_config`], asking clients for a certificate that `client_auth`
    /// handles (see `auth/x509.rs`: it is requested, never required, and checked per request).
    ///
    /// # Errors
    /// rustls rejects the key.
    pub fn server_config_with(
        &self,
        client_auth: Option<Arc<dyn rustls::server::danger::ClientCertVerifier>>,
    ) -> Result<Arc<ServerConfig>, TlsError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(TlsError::Config)?;
        let builder = match client_auth {
            Some(verifier) => builder.with_client_cert_verifier(verifier),
            None => builder.with_no_client_auth(),
        };
        let mut config = builder
            .with_single_cert(vec![self.server_der.clone()], self.server_key.clone_key())
            .map_err(TlsError::Config)?;
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(Arc::new(config))
    }
}

/// A name the serving certificate must be valid for.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Host {
    Ip(IpAddr),
    Dns(String),
}

impl Host {
    fn parse(name: &str) -> Result<Host, TlsError> {
        let trimmed = name.trim();
        // A listen address such as `0.0.0.0:6443` or `[::1]:6443` names its IP.
        if let Ok(addr) = trimmed.parse::<std::net::SocketAddr>() {
            return Ok(Host::Ip(addr.ip()));
        }
        let unbracketed = trimmed
            .strip_prefix('[')
            .and_then(|inner| inner.strip_suffix(']'))
            .unwrap_or(trimmed);
        if let Ok(ip) = unbracketed.parse::<IpAddr>() {
            return Ok(Host::Ip(ip));
        }
        let lower = trimmed.to_ascii_lowercase();
        match ServerName::try_from(lower.as_str()) {
            Ok(ServerName::DnsName(_)) => Ok(Host::Dns(lower)),
            _ => Err(TlsError::InvalidName(name.to_owned())),
        }
    }

    fn san(&self) -> Result<SanType, TlsError> {
        match self {
            Host::Ip(ip) => Ok(SanType::IpAddress(*ip)),
            Host::Dns(name) => name
                .as_str()
                .try_into()
                .map(SanType::DnsName)
                .map_err(|_| TlsError::InvalidName(name.clone())),
        }
    }

    fn server_name(&self) -> Result<ServerName<'static>, rustls::Error> {
        match self {
            Host::Ip(ip) => Ok(ServerName::IpAddress((*ip).into())),
            Host::Dns(name) => ServerName::try_from(name.clone())
                .map_err(|_| rustls::Error::General(format!("{name:?} is not a DNS name"))),
        }
    }
}

/// The built-in names followed by the caller's, without duplicates.
fn requested_hosts(extra: &[String]) -> Result<Vec<Host>, TlsError> {
    let mut hosts = vec![
        Host::Ip(IpAddr::V4(Ipv4Addr::LOCALHOST)),
        Host::Ip(IpAddr::V6(Ipv6Addr::LOCALHOST)),
        Host::Dns("localhost".to_owned()),
    ];
    for name in extra {
        if name.trim().is_empty() {
            continue;
        }
        let host = Host::parse(name)?;
        if !hosts.contains(&host) {
            hosts.push(host);
        }
    }
    Ok(hosts)
}

/// Checks `leaf` the way a client would: chains to `ca`, is a server leaf, and is valid for every
/// host at every given time.
fn verify_leaf(
    provider: &Arc<CryptoProvider>,
    ca: &CertificateDer<'static>,
    leaf: &CertificateDer<'static>,
    hosts: &[Host],
    times: &[UnixTime],
) -> Result<(), rustls::Error> {
    let mut roots = RootCertStore::empty();
    roots.add(ca.clone())?;
    let verifier = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .map_err(|err| rustls::Error::General(err.to_string()))?;
    for host in hosts {
        let name = host.server_name()?;
        for &time in times {
            verifier.verify_server_cert(leaf, &[], &name, &[], time)?;
        }
    }
    Ok(())
}

/// The CA: its key signs serving certificates.
struct Ca {
    key: KeyPair,
    der: CertificateDer<'static>,
    pem: String,
    not_after: time::OffsetDateTime,
}

impl Ca {
    /// The parts of the CA's parameters an issuer needs; identical for every CA this module
    /// makes, so a kept CA can sign without parsing its certificate.
    fn params() -> CertificateParams {
        let mut params = CertificateParams::default();
        let mut name = DistinguishedName::new();
        name.push(DnType::CommonName, CA_COMMON_NAME);
        params.distinguished_name = name;
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        params
    }

    fn generate() -> Result<Ca, TlsError> {
        let key = KeyPair::generate().map_err(TlsError::Generate)?;
        let mut params = Ca::params();
        set_validity(&mut params, CA_VALIDITY_DAYS);
        params.serial_number = Some(random_serial());
        let cert = params.self_signed(&key).map_err(TlsError::Generate)?;
        let der = cert.der().clone();
        Ok(Ca {
            key,
            pem: pem_encode("CERTIFICATE", &der),
            not_after: params.not_after,
            der,
        })
    }

    /// Loads `ca.crt` and `ca.key`; `None` if there is no `ca.crt`.
    fn load(dir: &Path, provider: &CryptoProvider) -> Result<Option<Ca>, TlsError> {
        let cert_path = dir.join(CA_CERT_FILE);
        let key_path = dir.join(CA_KEY_FILE);
        let Some(cert_pem) = read(&cert_path)? else {
            return Ok(None);
        };
        let Some(key_pem) = read(&key_path)? else {
            return Err(TlsError::Incomplete {
                found: cert_path,
                missing: key_path,
            });
        };
        let der =
            CertificateDer::from_pem_slice(&cert_pem).map_err(|err| unusable(&cert_path, err))?;
        let key = std::str::from_utf8(&key_pem)
            .map_err(|err| unusable(&key_path, err))
            .and_then(|pem| KeyPair::from_pem(pem).map_err(|err| unusable(&key_path, err)))?;
        let key_der = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        CertifiedKey::from_der(vec![der.clone()], key_der, provider)
            .map_err(|err| unusable(&key_path, err))?;
        let not_after = <x509_parser::certificate::X509Certificate as x509_parser::prelude::FromDer<_>>::from_der(&der)
            .map_err(|err| unusable(&cert_path, err.to_string()))?
            .1
            .validity()
            .not_after
            .to_datetime();
        Ok(Some(Ca {
            key,
            pem: pem_encode("CERTIFICATE", &der),
            not_after,
            der,
        }))
    }

    /// Signs a new serving certificate for `hosts`.
    fn issue(&self, hosts: &[Host]) -> Result<Leaf, TlsError> {
        let key = KeyPair::generate().map_err(TlsError::Generate)?;
        let mut params = CertificateParams::default();
        let mut name = DistinguishedName::new();
        name.push(DnType::CommonName, SERVER_COMMON_NAME);
        params.distinguished_name = name;
        params.is_ca = IsCa::ExplicitNoCa;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.subject_alt_names = hosts.iter().map(Host::san).collect::<Result<_, _>>()?;
        params.use_authority_key_identifier_extension = true;
        params.serial_number = Some(random_serial());
        set_validity(&mut params, SERVER_VALIDITY_DAYS);
        let issuer = Issuer::new(Ca::params(), &self.key);
        let cert = params
            .signed_by(&key, &issuer)
            .map_err(TlsError::Generate)?;
        let der = cert.der().clone();
        Ok(Leaf {
            cert_pem: pem_encode("CERTIFICATE", &der).into_bytes(),
            key_pem: key.serialize_pem().into_bytes(),
            key: PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
            der,
        })
    }
}

/// A serving certificate with its key.
struct Leaf {
    der: CertificateDer<'static>,
    key: PrivateKeyDer<'static>,
    cert_pem: Vec<u8>,
    key_pem: Vec<u8>,
}

impl Leaf {
    /// Loads `server.crt` and `server.key`; `None` if either is missing or unparsable (a new one
    /// is issued then, so a damaged serving certificate heals itself).
    fn load(dir: &Path) -> Result<Option<Leaf>, TlsError> {
        let (Some(cert_pem), Some(key_pem)) = (
            read(&dir.join(SERVER_CERT_FILE))?,
            read(&dir.join(SERVER_KEY_FILE))?,
        ) else {
            return Ok(None);
        };
        let (Ok(der), Ok(key)) = (
            CertificateDer::from_pem_slice(&cert_pem),
            PrivateKeyDer::from_pem_slice(&key_pem),
        ) else {
            tracing::info!(dir = %dir.display(), "the kept serving certificate or key does not parse");
            return Ok(None);
        };
        Ok(Some(Leaf {
            der,
            key,
            cert_pem,
            key_pem,
        }))
    }
}

/// Validity from the start of yesterday (UTC, to absorb clock skew) for `days` days.
fn set_validity(params: &mut CertificateParams, days: i64) {
    let today = jiff::Timestamp::now()
        .to_zoned(jiff::tz::TimeZone::UTC)
        .date();
    let first = today.saturating_sub(1.day());
    let last = today.saturating_add(days.days());
    params.not_before = rcgen::date_time_ymd(
        i32::from(first.year()),
        first.month().unsigned_abs(),
        first.day().unsigned_abs(),
    );
    params.not_after = rcgen::date_time_ymd(
        i32::from(last.year()),
        last.month().unsigned_abs(),
        last.day().unsigned_abs(),
    );
}

/// A random positive 127-bit serial number, so no two certificates of a CA share one.
fn random_serial() -> SerialNumber {
    let mut bytes: [u8; 16] = rand::random();
    bytes[0] = (bytes[0] & 0x7f) | 0x40;
    SerialNumber::from_slice(&bytes)
}

/// PEM text of one DER object, 64 characters per line.
pub(crate) fn pem_encode(label: &str, der: &[u8]) -> String {
    let body = STANDARD.encode(der);
    let mut pem = format!("-----BEGIN {label}-----\n");
    for line in body.as_bytes().chunks(64) {
        pem.push_str(&String::from_utf8_lossy(line));
        pem.push('\n');
    }
    pem.push_str(&format!("-----END {label}-----\n"));
    pem
}

fn read(path: &Path) -> Result<Option<Vec<u8>>, TlsError> {
    read_if_exists(path).map_err(|source| TlsError::Read {
        path: path.to_path_buf(),
        source,
    })
}

fn write(path: &Path, contents: &[u8], mode: u32) -> Result<(), TlsError> {
    write_file_atomically(path, contents, mode).map_err(|source| TlsError::Write {
        path: path.to_path_buf(),
        source,
    })
}

fn unusable(path: &Path, err: impl Into<Box<dyn StdError + Send + Sync>>) -> TlsError {
    TlsError::Unusable {
        path: path.to_path_buf(),
        source: err.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verifier_for(ca_pem: &str) -> Arc<WebPkiServerVerifier> {
        let ca = CertificateDer::from_pem_slice(ca_pem.as_bytes()).expect("the CA PEM parses");
        let mut roots = RootCertStore::empty();
        roots.add(ca).expect("the CA is a valid trust anchor");
        WebPkiServerVerifier::builder_with_provider(
            Arc::new(roots),
            Arc::new(rustls::crypto::ring::default_provider()),
        )
        .build()
        .expect("the verifier builds")
    }

    fn verify(material: &TlsMaterial, name: &str) -> Result<(), rustls::Error> {
        let name = ServerName::try_from(name.to_owned()).expect("a valid server name");
        verifier_for(material.ca_pem())
            .verify_server_cert(&material.server_der, &[], &name, &[], UnixTime::now())
            .map(|_| ())
    }

    #[cfg(unix)]
    fn mode_of(path: &Path) -> u32 {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::metadata(path)
            .expect("the file exists")
            .permissions()
            .mode()
            & 0o777
    }

    #[test]
    fn generated_leaf_chains_to_the_ca_for_loopback_names_only() {
        let material = TlsMaterial::load_or_generate(None, &[]).expect("generates");
        for name in ["127.0.0.1", "::1", "localhost"] {
            verify(&material, name).unwrap_or_else(|err| panic!("{name}: {err}"));
        }
        assert!(verify(&material, "example.com").is_err());
        assert!(verify(&material, "10.0.0.1").is_err());
    }

    #[test]
    fn ca_pem_is_the_ca_the_leaf_was_signed_by() {
        let material = TlsMaterial::load_or_generate(None, &[]).expect("generates");
        assert!(
            material
                .ca_pem()
                .starts_with("-----BEGIN CERTIFICATE-----\n")
        );
        let parsed =
            CertificateDer::from_pem_slice(material.ca_pem().as_bytes()).expect("PEM parses");
        assert_eq!(&parsed, material.ca_der());
        // webpki refuses a CA certificate as a server's end entity, so the CA cannot pose as
        // the server, and the leaf verifying (above) shows it is no CA.
        let ca_as_leaf = verifier_for(material.ca_pem()).verify_server_cert(
            material.ca_der(),
            &[],
            &ServerName::try_from("localhost").expect("valid"),
            &[],
            UnixTime::now(),
        );
        assert!(ca_as_leaf.is_err());
    }

    #[test]
    fn extra_names_and_addresses_are_added_to_the_leaf() {
        let extra = [
            "Kore.Example".to_owned(),
            "10.1.2.3".to_owned(),
            "[fd00::7]".to_owned(),
            "192.168.1.5:6443".to_owned(),
        ];
        let material = TlsMaterial::load_or_generate(None, &extra).expect("generates");
        for name in [
            "kore.example",
            "10.1.2.3",
            "fd00::7",
            "192.168.1.5",
            "localhost",
        ] {
            verify(&material, name).unwrap_or_else(|err| panic!("{name}: {err}"));
        }
    }

    #[test]
    fn an_extra_name_that_is_no_host_is_rejected() {
        let err =
            TlsMaterial::load_or_generate(None, &["not a host!".to_owned()]).expect_err("rejected");
        assert!(matches!(err, TlsError::InvalidName(name) if name == "not a host!"));
    }

    #[test]
    fn a_directory_keeps_the_same_ca_and_leaf_across_restarts() {
        let dir = tempfile::tempdir().expect("tempdir");
        let first = TlsMaterial::load_or_generate(Some(dir.path()), &[]).expect("generates");
        let second = TlsMaterial::load_or_generate(Some(dir.path()), &[]).expect("loads");
        assert_eq!(first.ca_pem(), second.ca_pem());
        assert_eq!(first.server_der, second.server_der);
        for file in [CA_CERT_FILE, CA_KEY_FILE, SERVER_CERT_FILE, SERVER_KEY_FILE] {
            assert!(dir.path().join(file).is_file(), "{file} written");
        }
    }

    #[test]
    fn a_new_name_reissues_the_leaf_under_the_kept_ca() {
        let dir = tempfile::tempdir().expect("tempdir");
        let first = TlsMaterial::load_or_generate(Some(dir.path()), &[]).expect("generates");
        let extra = ["kore.internal".to_owned()];
        let second = TlsMaterial::load_or_generate(Some(dir.path()), &extra).expect("reissues");
        assert_eq!(first.ca_pem(), second.ca_pem());
        assert_ne!(first.server_der, second.server_der);
        verify(&second, "kore.internal").expect("the new name is covered");
        verify(&second, "127.0.0.1").expect("the built-in names stay");
        // The reissued leaf was written: a third start with the same names reuses it.
        let third = TlsMaterial::load_or_generate(Some(dir.path()), &extra).expect("loads");
        assert_eq!(second.server_der, third.server_der);
    }

    #[test]
    fn a_server_key_that_does_not_match_its_certificate_is_replaced() {
        let dir = tempfile::tempdir().expect("tempdir");
        let first = TlsMaterial::load_or_generate(Some(dir.path()), &[]).expect("generates");
        let stranger = KeyPair::generate().expect("key");
        std::fs::write(dir.path().join(SERVER_KEY_FILE), stranger.serialize_pem()).expect("write");
        let second = TlsMaterial::load_or_generate(Some(dir.path()), &[]).expect("reissues");
        assert_eq!(first.ca_pem(), second.ca_pem());
        assert_ne!(first.server_der, second.server_der);
        second.server_config().expect("the new pair is consistent");
    }

    #[cfg(unix)]
    #[test]
    fn keys_are_written_readable_by_the_owner_only() {
        let dir = tempfile::tempdir().expect("tempdir");
        TlsMaterial::load_or_generate(Some(dir.path()), &[]).expect("generates");
        assert_eq!(mode_of(&dir.path().join(CA_KEY_FILE)), 0o600);
        assert_eq!(mode_of(&dir.path().join(SERVER_KEY_FILE)), 0o600);
        assert_eq!(
            mode_of(&dir.path().join(CA_CERT_FILE)) & 0o022,
            0,
            "nobody else may write"
        );
    }

    #[test]
    fn a_ca_certificate_without_its_key_is_an_error() {
        let dir = tempfile::tempdir().expect("tempdir");
        TlsMaterial::load_or_generate(Some(dir.path()), &[]).expect("generates");
        std::fs::remove_file(dir.path().join(CA_KEY_FILE)).expect("remove");
        let err = TlsMaterial::load_or_generate(Some(dir.path()), &[]).expect_err("refused");
        assert!(matches!(err, TlsError::Incomplete { .. }), "{err:?}");
    }

    #[test]
    fn a_ca_key_of_another_ca_is_an_error() {
        let dir = tempfile::tempdir().expect("tempdir");
        TlsMaterial::load_or_generate(Some(dir.path()), &[]).expect("generates");
        let stranger = KeyPair::generate().expect("key");
        std::fs::write(dir.path().join(CA_KEY_FILE), stranger.serialize_pem()).expect("write");
        let err = TlsMaterial::load_or_generate(Some(dir.path()), &[]).expect_err("refused");
        assert!(matches!(err, TlsError::Unusable { .. }), "{err:?}");
    }

    #[test]
    fn server_config_offers_h2_then_http11() {
        let material = TlsMaterial::load_or_generate(None, &[]).expect("generates");
        let config = material.server_config().expect("config");
        assert_eq!(
            config.alpn_protocols,
            vec![b"h2".to_vec(), b"http/1.1".to_vec()]
        );
    }

    #[test]
    fn debug_output_shows_no_key_material() {
        let material = TlsMaterial::load_or_generate(None, &[]).expect("generates");
        assert_eq!(format!("{material:?}"), "TlsMaterial { .. }");
    }
}
