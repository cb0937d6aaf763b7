//! Signing CertificateSigningRequests with kore's CA, under the rules of Kubernetes' built-in
//! signers (kube-controller-manager's `csrsigning` controllers, `pkg/controller/certificates/
//! signer`, with the checks of `pkg/apis/certificates/helpers.go`).
//!
//! [`sign`] takes one approved request and answers a PEM certificate, a [`CsrError::Rejected`]
//! (the request breaks its signer's rules: the caller records a `Failed` condition with reason
//! `SignerValidationFailure` and this message, as Kubernetes does) or another error. The
//! controller that applies it to stored requests is `controllers/csr_signing.rs`.
//!
//! # The signers
//! - `kubernetes.io/kube-apiserver-client`: any subject; usages from `digital signature`,
//!   `key encipherment` and `client auth`, which is required.
//! - `kubernetes.io/kube-apiserver-client-kubelet`: subject `O=system:nodes` exactly and
//!   `CN=system:node:…`, no subject alternative names, usages exactly
//!   `{digital signature, key encipherment, client auth}` or `{digital signature, client auth}`.
//! - `kubernetes.io/kubelet-serving`: the same subject, at least one DNS or IP name (no email or
//!   URI names), usages `{digital signature, key encipherment, server auth}` or
//!   `{digital signature, server auth}`.
//! - `kubernetes.io/legacy-unknown` is never signed (certificates/v1 has not accepted it since
//!   1.22), nor is any other signer name: those are left for other signers.
//!
//! # The certificate
//! The request's subject, subject alternative names and public key; key usages and extended key
//! usages from `spec.usages`; `CA:FALSE`. Valid from five minutes ago for the requested
//! `spec.expirationSeconds`, raised to ten minutes and capped at [`MAX_DURATION`] (kube's
//! `--cluster-signing-duration` default, one year); a certificate of eight hours or more ends
//! five minutes early, so its whole life stays the requested length; none outlives the CA.
//!
//! # Caveats
//! - The request is parsed with rcgen, which refuses requested extensions other than subject
//!   alternative names, key usage, extended key usage and basic constraints, and holds one value
//!   per subject attribute type: such requests are rejected with a message that says so
//!   (Kubernetes signs them).

use std::collections::BTreeSet;
use std::time::Duration;

use rcgen::{
    CertificateSigningRequestParams, CustomExtension, ExtendedKeyUsagePurpose, IsCa,
    KeyUsagePurpose,
};
use rustls::pki_types::CertificateSigningRequestDer;
use rustls::pki_types::pem::PemObject as _;
use x509_parser::certification_request::X509CertificationRequest;
use x509_parser::extensions::{GeneralName, ParsedExtension};
use x509_parser::prelude::FromDer as _;

use super::tls::{CertificateAuthority, TlsError};

/// The signer of client certificates for the API server.
pub const KUBE_APISERVER_CLIENT: &str = "kubernetes.io/kube-apiserver-client";
/// The signer of kubelets' client certificates.
pub const KUBE_APISERVER_CLIENT_KUBELET: &str = "kubernetes.io/kube-apiserver-client-kubelet";
/// The signer of kubelets' serving certificates.
pub const KUBELET_SERVING: &str = "kubernetes.io/kubelet-serving";

/// The longest certificate signed (kube-controller-manager's `--cluster-signing-duration`
/// default, 8760 h).
pub const MAX_DURATION: Duration = Duration::from_secs(365 * 24 * 60 * 60);
/// The shortest certificate signed: twice the backdating.
pub const MIN_DURATION: Duration = Duration::from_secs(10 * 60);
/// How far before now a certificate starts, against clock skew.
const BACKDATE: Duration = Duration::from_secs(5 * 60);
/// Certificates shorter than this do not end early by [`BACKDATE`].
const SHORT: Duration = Duration::from_secs(8 * 60 * 60);

/// Why a request was not signed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CsrError {
    /// The request is not a PEM certificate request with a valid signature, or uses what kore
    /// cannot sign; retrying will not help: record it as `Failed`.
    #[error("unable to parse csr: {0}")]
    Parse(String),
    /// The request breaks its signer's rules; record it as `Failed`.
    #[error("{0}")]
    Rejected(String),
    /// Signing itself failed; retry later.
    #[error("signing the certificate failed")]
    Sign(#[source] TlsError),
}

/// The usages a request may name (Kubernetes' `allValidUsages`).
pub const VALID_USAGES: [&str; 23] = [
    "signing",
    "digital signature",
    "content commitment",
    "key encipherment",
    "key agreement",
    "data encipherment",
    "cert sign",
    "crl sign",
    "encipher only",
    "decipher only",
    "any",
    "server auth",
    "client auth",
    "code signing",
    "email protection",
    "s/mime",
    "ipsec end system",
    "ipsec tunnel",
    "ipsec user",
    "timestamping",
    "ocsp signing",
    "microsoft sgc",
    "netscape sgc",
];

/// Checks `spec.request` (its PEM) as Kubernetes does before accepting a request: one
/// `CERTIFICATE REQUEST` block holding a PKCS#10 request whose signature verifies with its own
/// public key. Answers the reason otherwise.
pub fn check_request(pem: &[u8]) -> Result<(), String> {
    const NOT_A_REQUEST: &str = "PEM block type must be CERTIFICATE REQUEST";
    let (_, block) = x509_parser::pem::parse_x509_pem(pem).map_err(|_| NOT_A_REQUEST)?;
    if block.label != "CERTIFICATE REQUEST" {
        return Err(NOT_A_REQUEST.into());
    }
    let (_, request) = X509CertificationRequest::from_der(&block.contents)
        .map_err(|e| format!("x509: malformed certificate request: {e}"))?;
    request
        .verify_signature()
        .map_err(|e| format!("x509: the request's signature does not verify: {e}"))
}

/// Whether kore signs requests for `signer_name`.
pub fn is_signed_here(signer_name: &str) -> bool {
    [
        KUBE_APISERVER_CLIENT,
        KUBE_APISERVER_CLIENT_KUBELET,
        KUBELET_SERVING,
    ]
    .contains(&signer_name)
}

/// What the signer rules look at in a request.
#[derive(Debug, Default)]
struct Subject {
    common_name: String,
    organizations: Vec<String>,
    dns: usize,
    ip: usize,
    email: usize,
    uri: usize,
    /// Whether an attribute type appears more than once in the subject.
    repeated_attribute: bool,
}

/// Signs `request_pem` (the PEM of `spec.request`) for `signer_name` with `usages` and the
/// requested `expiration_seconds`; answers the certificate in PEM.
///
/// # Errors
/// See [`CsrError`]. A signer name kore does not sign is [`CsrError::Rejected`]; callers check
/// [`is_signed_here`] first.
pub fn sign(
    ca: &CertificateAuthority,
    signer_name: &str,
    request_pem: &[u8],
    usages: &[String],
    expiration_seconds: Option<i64>,
) -> Result<String, CsrError> {
    let der = CertificateSigningRequestDer::from_pem_slice(request_pem)
        .map_err(|_| CsrError::Parse("PEM block type must be CERTIFICATE REQUEST".into()))?;
    let subject = subject_of(&der)?;
    check_signer(signer_name, &subject, usages).map_err(CsrError::Rejected)?;
    if subject.repeated_attribute {
        return Err(CsrError::Rejected(
            "kore signs subjects with one value per attribute type (one organization)".into(),
        ));
    }
    let request = CertificateSigningRequestParams::from_der(&der)
        .map_err(|e| CsrError::Parse(e.to_string()))?;
    let mut params = request.params;
    params.is_ca = IsCa::ExplicitNoCa;
    params.custom_extensions = Vec::<CustomExtension>::new();
    params.key_usages = Vec::new();
    params.extended_key_usages = Vec::new();
    for usage in usages {
        match usage_of(usage) {
            Some(Usage::Key(k)) => params.key_usages.push(k),
            Some(Usage::Extended(e)) => params.extended_key_usages.push(e),
            None => {
                return Err(CsrError::Rejected(format!("unknown usage: {usage}")));
            }
        }
    }
    let ttl = duration(expiration_seconds);
    let now = time::OffsetDateTime::now_utc();
    let to_time = |d: Duration| time::Duration::try_from(d).unwrap_or(time::Duration::ZERO);
    params.not_before = now - to_time(BACKDATE);
    let end = if ttl < SHORT {
        now + to_time(ttl)
    } else {
        now + to_time(ttl) - to_time(BACKDATE)
    };
    params.not_after = end.min(ca.not_after());
    let der = ca
        .sign(params, &request.public_key)
        .map_err(CsrError::Sign)?;
    Ok(super::tls::pem_encode("CERTIFICATE", &der))
}

/// The certificate's lifetime for a requested `expiration_seconds`.
pub fn duration(expiration_seconds: Option<i64>) -> Duration {
    let Some(seconds) = expiration_seconds else {
        return MAX_DURATION;
    };
    Duration::from_secs(seconds.max(0).unsigned_abs()).clamp(MIN_DURATION, MAX_DURATION)
}

fn subject_of(der: &CertificateSigningRequestDer<'_>) -> Result<Subject, CsrError> {
    let (_, csr) = X509CertificationRequest::from_der(der.as_ref())
        .map_err(|e| CsrError::Parse(e.to_string()))?;
    let name = &csr.certification_request_info.subject;
    let mut subject = Subject {
        common_name: name
            .iter_common_name()
            .filter_map(|cn| cn.as_str().ok())
            .last()
            .unwrap_or_default()
            .to_owned(),
        organizations: name
            .iter_organization()
            .filter_map(|o| o.as_str().ok())
            .map(str::to_owned)
            .collect(),
        ..Subject::default()
    };
    let mut seen = BTreeSet::new();
    for attribute in name.iter_attributes() {
        if !seen.insert(attribute.attr_type().to_id_string()) {
            subject.repeated_attribute = true;
        }
    }
    if let Some(extensions) = csr.requested_extensions() {
        for extension in extensions {
            if let ParsedExtension::SubjectAlternativeName(san) = extension {
                for name in &san.general_names {
                    match name {
                        GeneralName::DNSName(_) => subject.dns += 1,
                        GeneralName::IPAddress(_) => subject.ip += 1,
                        GeneralName::RFC822Name(_) => subject.email += 1,
                        GeneralName::URI(_) => subject.uri += 1,
                        _ => {}
                    }
                }
            }
        }
    }
    Ok(subject)
}

/// The rules of `signer_name` (Kubernetes' messages).
fn check_signer(signer_name: &str, subject: &Subject, usages: &[String]) -> Result<(), String> {
    let set: BTreeSet<&str> = usages.iter().map(String::as_str).collect();
    match signer_name {
        KUBE_APISERVER_CLIENT => {
            for usage in usages {
                if !["digital signature", "key encipherment", "client auth"]
                    .contains(&usage.as_str())
                {
                    return Err(format!("invalid usage for client certificate: {usage}"));
                }
            }
            if !set.contains("client auth") {
                return Err("missing required usage for client certificate: client auth".into());
            }
            Ok(())
        }
        KUBE_APISERVER_CLIENT_KUBELET => {
            system_nodes(subject)?;
            if subject.dns > 0 {
                return Err("DNS subjectAltNames are not allowed".into());
            }
            if subject.email > 0 {
                return Err("Email subjectAltNames are not allowed".into());
            }
            if subject.ip > 0 {
                return Err("IP subjectAltNames are not allowed".into());
            }
            if subject.uri > 0 {
                return Err("URI subjectAltNames are not allowed".into());
            }
            node_name(subject)?;
            exact_usages(&set, "client auth")
        }
        KUBELET_SERVING => {
            system_nodes(subject)?;
            if subject.dns == 0 && subject.ip == 0 {
                return Err("DNS or IP subjectAltName is required".into());
            }
            if subject.email > 0 {
                return Err("Email subjectAltNames are not allowed".into());
            }
            if subject.uri > 0 {
                return Err("URI subjectAltNames are not allowed".into());
            }
            exact_usages(&set, "server auth")?;
            node_name(subject)
        }
        other => Err(format!("unrecognized signerName: {other:?}")),
    }
}

fn system_nodes(subject: &Subject) -> Result<(), String> {
    if subject.organizations != ["system:nodes"] {
        return Err("subject organization is not system:nodes".into());
    }
    Ok(())
}

fn node_name(subject: &Subject) -> Result<(), String> {
    if !subject.common_name.starts_with("system:node:") {
        return Err("subject common name does not begin with system:node:".into());
    }
    Ok(())
}

/// The kubelet signers' usages: `{digital signature, key encipherment, <auth>}` or
/// `{digital signature, <auth>}`.
fn exact_usages(set: &BTreeSet<&str>, auth: &str) -> Result<(), String> {
    let full: BTreeSet<&str> = ["digital signature", "key encipherment", auth].into();
    let no_rsa: BTreeSet<&str> = ["digital signature", auth].into();
    if *set == full || *set == no_rsa {
        return Ok(());
    }
    // Go prints the sorted set as `[a b c]`.
    let listed: Vec<&str> = full.into_iter().collect();
    Err(format!("usages did not match [{}]", listed.join(" ")))
}

enum Usage {
    Key(KeyUsagePurpose),
    Extended(ExtendedKeyUsagePurpose),
}

/// A `spec.usages` value as a certificate usage (Kubernetes' `keyUsagesFromStrings`).
fn usage_of(usage: &str) -> Option<Usage> {
    use ExtendedKeyUsagePurpose as E;
    use KeyUsagePurpose as K;
    Some(match usage {
        "signing" | "digital signature" => Usage::Key(K::DigitalSignature),
        "content commitment" => Usage::Key(K::ContentCommitment),
        "key encipherment" => Usage::Key(K::KeyEncipherment),
        "key agreement" => Usage::Key(K::KeyAgreement),
        "data encipherment" => Usage::Key(K::DataEncipherment),
        "cert sign" => Usage::Key(K::KeyCertSign),
        "crl sign" => Usage::Key(K::CrlSign),
        "encipher only" => Usage::Key(K::EncipherOnly),
        "decipher only" => Usage::Key(K::DecipherOnly),
        "any" => Usage::Extended(E::Any),
        "server auth" => Usage::Extended(E::ServerAuth),
        "client auth" => Usage::Extended(E::ClientAuth),
        "code signing" => Usage::Extended(E::CodeSigning),
        "email protection" | "s/mime" => Usage::Extended(E::EmailProtection),
        "timestamping" => Usage::Extended(E::TimeStamping),
        "ocsp signing" => Usage::Extended(E::OcspSigning),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use rcgen::{CertificateParams, DistinguishedName, DnType, KeyPair, SanType};
    use x509_parser::prelude::X509Certificate;

    use super::*;
    use crate::auth::tls::TlsMaterial;

    fn request(cn: &str, orgs: &[&str], sans: Vec<SanType>) -> String {
        let key = KeyPair::generate().expect("key");
        let mut params = CertificateParams::default();
        let mut name = DistinguishedName::new();
        for org in orgs {
            name.push(DnType::OrganizationName, *org);
        }
        name.push(DnType::CommonName, cn);
        params.distinguished_name = name;
        params.subject_alt_names = sans;
        params
            .serialize_request(&key)
            .expect("request")
            .pem()
            .expect("pem")
    }

    fn usages(list: &[&str]) -> Vec<String> {
        list.iter().map(|u| (*u).to_owned()).collect()
    }

    fn pem_of(label: &str, der: &[u8]) -> String {
        use base64::Engine as _;
        let body = base64::engine::general_purpose::STANDARD.encode(der);
        let mut text = format!("-----BEGIN {label}-----\n");
        for chunk in body.as_bytes().chunks(64) {
            text.push_str(std::str::from_utf8(chunk).expect("ascii"));
            text.push('\n');
        }
        text.push_str(&format!("-----END {label}-----\n"));
        text
    }

    #[test]
    fn a_signed_request_passes_and_anything_else_is_refused_with_its_reason() {
        let pem = request("jane", &[], vec![]);
        assert_eq!(check_request(pem.as_bytes()), Ok(()));
        let not_a_request = Err("PEM block type must be CERTIFICATE REQUEST".to_owned());
        assert_eq!(check_request(b"not pem"), not_a_request);
        let relabelled = pem.replace("CERTIFICATE REQUEST", "CERTIFICATE");
        assert_eq!(check_request(relabelled.as_bytes()), not_a_request);
        let garbage = pem_of("CERTIFICATE REQUEST", &[0x30, 0x03, 0x02, 0x01, 0x01]);
        let why = check_request(garbage.as_bytes());
        assert!(
            why.as_ref().is_err_and(|e| e.contains("malformed")),
            "{why:?}"
        );
    }

    #[test]
    fn a_request_whose_signature_does_not_verify_is_refused() {
        let pem = request("jane", &[], vec![]);
        let (_, block) = x509_parser::pem::parse_x509_pem(pem.as_bytes()).expect("pem");
        let mut der = block.contents.clone();
        // The signature ends the request: change its last byte.
        let last = der.len() - 1;
        der[last] ^= 0x01;
        let why = check_request(pem_of("CERTIFICATE REQUEST", &der).as_bytes());
        assert!(
            why.as_ref().is_err_and(|e| e.contains("signature")),
            "{why:?}"
        );
    }

    #[test]
    fn a_client_request_is_signed_for_its_subject_and_duration() {
        let ca = TlsMaterial::load_or_generate(None, &[])
            .expect("ca")
            .authority();
        let pem = request("alice", &["devs"], vec![]);
        let cert = sign(
            &ca,
            KUBE_APISERVER_CLIENT,
            pem.as_bytes(),
            &usages(&["client auth", "digital signature"]),
            Some(3600),
        )
        .expect("signed");
        let der = rustls::pki_types::CertificateDer::from_pem_slice(cert.as_bytes()).expect("pem");
        let (_, x509) = X509Certificate::from_der(der.as_ref()).expect("parses");
        let cn = x509.subject().iter_common_name().next().expect("cn");
        assert_eq!(cn.as_str().expect("utf8"), "alice");
        let validity = x509.validity();
        let lifetime = validity.not_after.timestamp() - validity.not_before.timestamp();
        assert_eq!(
            lifetime,
            3600 + 300,
            "backdated five minutes, not shortened"
        );
        let eku = x509.extended_key_usage().expect("parses").expect("present");
        assert!(eku.value.client_auth && !eku.value.server_auth);
    }

    #[test]
    fn durations_are_clamped() {
        assert_eq!(duration(None), MAX_DURATION);
        assert_eq!(duration(Some(1)), MIN_DURATION);
        assert_eq!(duration(Some(i64::MAX)), MAX_DURATION);
        assert_eq!(duration(Some(7200)), Duration::from_secs(7200));
    }

    #[test]
    fn each_signer_has_its_rules() {
        let ca = TlsMaterial::load_or_generate(None, &[])
            .expect("ca")
            .authority();
        let reject = |signer: &str, pem: &str, list: &[&str]| match sign(
            &ca,
            signer,
            pem.as_bytes(),
            &usages(list),
            None,
        ) {
            Err(CsrError::Rejected(message)) => message,
            other => panic!("expected a rejection, got {other:?}"),
        };
        let alice = request("alice", &[], vec![]);
        assert_eq!(
            reject(KUBE_APISERVER_CLIENT, &alice, &["server auth"]),
            "invalid usage for client certificate: server auth"
        );
        assert_eq!(
            reject(KUBE_APISERVER_CLIENT, &alice, &["digital signature"]),
            "missing required usage for client certificate: client auth"
        );
        let node_usages = ["digital signature", "client auth"];
        assert_eq!(
            reject(KUBE_APISERVER_CLIENT_KUBELET, &alice, &node_usages),
            "subject organization is not system:nodes"
        );
        let not_node = request("n1", &["system:nodes"], vec![]);
        assert_eq!(
            reject(KUBE_APISERVER_CLIENT_KUBELET, &not_node, &node_usages),
            "subject common name does not begin with system:node:"
        );
        let node = request("system:node:n1", &["system:nodes"], vec![]);
        assert_eq!(
            reject(KUBE_APISERVER_CLIENT_KUBELET, &node, &["client auth"]),
            "usages did not match [client auth digital signature key encipherment]"
        );
        sign(
            &ca,
            KUBE_APISERVER_CLIENT_KUBELET,
            node.as_bytes(),
            &usages(&node_usages),
            None,
        )
        .expect("a kubelet client certificate");
        assert_eq!(
            reject(
                KUBELET_SERVING,
                &node,
                &["digital signature", "server auth"]
            ),
            "DNS or IP subjectAltName is required"
        );
        let serving = request(
            "system:node:n1",
            &["system:nodes"],
            vec![SanType::DnsName("n1".try_into().expect("dns"))],
        );
        sign(
            &ca,
            KUBELET_SERVING,
            serving.as_bytes(),
            &usages(&["digital signature", "key encipherment", "server auth"]),
            Some(600),
        )
        .expect("a kubelet serving certificate");
        assert!(matches!(
            sign(
                &ca,
                KUBE_APISERVER_CLIENT,
                b"garbage",
                &usages(&["client auth"]),
                None
            ),
            Err(CsrError::Parse(_))
        ));
    }
}
