//! The kubeconfig the server hands out (spec §15.3): one cluster, one user and one context, all
//! named `kore`, with `default` as the context's namespace.
//!
//! The YAML is written by hand: the structure is fixed and every value is emitted as a
//! double-quoted scalar with escapes, so no input can change the structure.
//!
//! Over `http://` the kubeconfig carries neither CA nor token: kubectl and client-go never send
//! credentials to a plain-HTTP server (spec §1 trap #7), so the server must grant access there
//! without them, and a token in the file would only suggest otherwise.

use std::fmt::Write as _;
use std::io;
use std::path::Path;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

use super::{PRIVATE_MODE, write_file_atomically};

/// The name of the cluster, the user and the context in the handed-out kubeconfig.
pub const KUBECONFIG_NAME: &str = "kore";

/// How the kubeconfig's user authenticates.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub enum Credential<'a> {
    /// No credential (`user: {}`).
    None,
    /// A bearer token.
    Token(&'a str),
    /// A client certificate and its key, both PEM (`client-certificate-data`,
    /// `client-key-data`).
    ClientCertificate {
        /// The certificate.
        cert_pem: &'a str,
        /// Its private key.
        key_pem: &'a str,
    },
}

/// The kubeconfig for a server at `server_url`.
///
/// For `https://` URLs, `ca_pem` becomes `certificate-authority-data` and `token` the user's
/// bearer token (each only if given: without a CA, clients fall back to the system roots and will
/// not trust a generated certificate). For `http://` URLs both are left out.
pub fn kubeconfig_yaml(server_url: &str, ca_pem: Option<&str>, token: Option<&str>) -> String {
    kubeconfig_yaml_for(
        server_url,
        ca_pem,
        token.map_or(Credential::None, Credential::Token),
    )
}

/// [`kubeconfig_yaml`] with any [`Credential`]; over `http://` the CA and the credential are
/// left out.
pub fn kubeconfig_yaml_for(
    server_url: &str,
    ca_pem: Option<&str>,
    credential: Credential<'_>,
) -> String {
    let plain_http = server_url
        .get(..7)
        .is_some_and(|scheme| scheme.eq_ignore_ascii_case("http://"));
    let (ca_pem, credential) = if plain_http {
        (None, Credential::None)
    } else {
        (ca_pem, credential)
    };
    let name = quote(KUBECONFIG_NAME);

    let mut yaml = String::new();
    yaml.push_str("apiVersion: v1\nkind: Config\n");
    yaml.push_str("clusters:\n");
    let _ = writeln!(yaml, "- name: {name}");
    yaml.push_str("  cluster:\n");
    let _ = writeln!(yaml, "    server: {}", quote(server_url));
    if let Some(ca_pem) = ca_pem {
        let data = STANDARD.encode(ca_pem.as_bytes());
        let _ = writeln!(yaml, "    certificate-authority-data: {}", quote(&data));
    }
    yaml.push_str("users:\n");
    let _ = writeln!(yaml, "- name: {name}");
    match credential {
        Credential::Token(token) => {
            yaml.push_str("  user:\n");
            let _ = writeln!(yaml, "    token: {}", quote(token));
        }
        Credential::ClientCertificate { cert_pem, key_pem } => {
            yaml.push_str("  user:\n");
            let cert = STANDARD.encode(cert_pem.as_bytes());
            let key = STANDARD.encode(key_pem.as_bytes());
            let _ = writeln!(yaml, "    client-certificate-data: {}", quote(&cert));
            let _ = writeln!(yaml, "    client-key-data: {}", quote(&key));
        }
        Credential::None => yaml.push_str("  user: {}\n"),
    }
    yaml.push_str("contexts:\n");
    let _ = writeln!(yaml, "- name: {name}");
    yaml.push_str("  context:\n");
    let _ = writeln!(yaml, "    cluster: {name}");
    let _ = writeln!(yaml, "    user: {name}");
    yaml.push_str("    namespace: \"default\"\n");
    let _ = writeln!(yaml, "current-context: {name}");
    yaml
}

/// Writes `yaml` to `path` with mode 0600, creating missing parent directories. The file is
/// replaced atomically (temporary file, then rename), so readers never see half a kubeconfig.
///
/// # Errors
/// Creating the directories, writing, or renaming failed.
pub fn write_kubeconfig(path: &Path, yaml: &str) -> io::Result<()> {
    write_file_atomically(path, yaml.as_bytes(), PRIVATE_MODE)
}

/// `value` as a YAML double-quoted scalar.
fn quote(value: &str) -> String {
    let mut quoted = String::with_capacity(value.len() + 2);
    quoted.push('"');
    for c in value.chars() {
        match c {
            '"' => quoted.push_str("\\\""),
            '\\' => quoted.push_str("\\\\"),
            '\n' => quoted.push_str("\\n"),
            '\t' => quoted.push_str("\\t"),
            '\r' => quoted.push_str("\\r"),
            // Control characters, and the Unicode line breaks YAML would fold.
            c if c.is_control() || c == '\u{2028}' || c == '\u{2029}' => {
                let _ = write!(quoted, "\\u{:04X}", u32::from(c));
            }
            c => quoted.push(c),
        }
    }
    quoted.push('"');
    quoted
}

#[cfg(test)]
mod tests {
    use kube::config::{AuthInfo, KubeConfigOptions, Kubeconfig};

    use super::*;

    /// The token kube read, through its serializer (the only way out of its `SecretString`).
    fn token_of(user: &AuthInfo) -> Option<String> {
        let value = serde_json::to_value(user).expect("AuthInfo serializes");
        value.get("token")?.as_str().map(str::to_owned)
    }

    const CA: &str = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";

    #[tokio::test]
    async fn an_https_kubeconfig_is_read_by_kube_with_ca_token_and_namespace() {
        let yaml = kubeconfig_yaml("https://127.0.0.1:6443", Some(CA), Some("s3cret"));
        let kubeconfig = Kubeconfig::from_yaml(&yaml).expect("kube parses it");
        assert_eq!(kubeconfig.current_context.as_deref(), Some("kore"));
        let cluster = kubeconfig.clusters[0].cluster.as_ref().expect("cluster");
        assert_eq!(cluster.server.as_deref(), Some("https://127.0.0.1:6443"));
        let ca = cluster
            .certificate_authority_data
            .as_deref()
            .expect("CA data");
        assert_eq!(STANDARD.decode(ca).expect("base64"), CA.as_bytes());

        let config =
            kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
                .await
                .expect("kube builds a config");
        assert_eq!(config.cluster_url.to_string(), "https://127.0.0.1:6443/");
        assert_eq!(config.default_namespace, "default");
        assert!(config.root_cert.is_some_and(|certs| !certs.is_empty()));
        assert_eq!(token_of(&config.auth_info).as_deref(), Some("s3cret"));
    }

    #[tokio::test]
    async fn an_http_kubeconfig_carries_neither_ca_nor_token() {
        let yaml = kubeconfig_yaml("http://127.0.0.1:8080", Some(CA), Some("s3cret"));
        assert!(!yaml.contains("certificate-authority-data"));
        assert!(!yaml.contains("s3cret"));
        let kubeconfig = Kubeconfig::from_yaml(&yaml).expect("kube parses it");
        let config =
            kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
                .await
                .expect("kube builds a config");
        assert_eq!(config.cluster_url.to_string(), "http://127.0.0.1:8080/");
        assert!(config.auth_info.token.is_none());
        assert!(config.root_cert.is_none());
    }

    #[test]
    fn values_that_look_like_yaml_stay_strings() {
        let token = "a\"b\\c: d\n- e # f\u{2028}\u{1}";
        let yaml = kubeconfig_yaml("https://[::1]:6443", None, Some(token));
        let kubeconfig = Kubeconfig::from_yaml(&yaml).expect("kube parses it");
        let user = kubeconfig.auth_infos[0].auth_info.as_ref().expect("user");
        assert_eq!(token_of(user).as_deref(), Some(token));
        assert_eq!(kubeconfig.contexts.len(), 1);
    }

    #[cfg(unix)]
    #[test]
    fn write_kubeconfig_creates_directories_and_a_private_file() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("nested/deeper/config");
        write_kubeconfig(&path, "first").expect("writes");
        write_kubeconfig(&path, "second").expect("replaces");
        assert_eq!(std::fs::read_to_string(&path).expect("reads"), "second");
        let mode = std::fs::metadata(&path)
            .expect("exists")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        let leftovers = std::fs::read_dir(path.parent().expect("parent"))
            .expect("lists")
            .count();
        assert_eq!(leftovers, 1, "no temporary files remain");
    }
}
