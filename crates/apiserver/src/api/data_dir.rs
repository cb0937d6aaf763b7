//! The files kore-apiserver keeps in its data directory beside the write-ahead log: the
//! credentials `auth/` writes, named here because storage reads the list too (a directory
//! that holds them but no log was used before, and its log is gone).

/// The CA certificate.
pub const CA_CERT_FILE: &str = "ca.crt";
/// The CA private key.
pub const CA_KEY_FILE: &str = "ca.key";
/// The serving certificate.
pub const SERVER_CERT_FILE: &str = "server.crt";
/// The serving private key.
pub const SERVER_KEY_FILE: &str = "server.key";
/// The administrator's bearer token.
pub const TOKEN_FILE: &str = "admin.token";
/// The ServiceAccount token signing key.
pub const SA_KEY_FILE: &str = "service-account.key";

/// Every credential file, in the order they are written.
pub const CREDENTIAL_FILES: [&str; 6] = [
    CA_CERT_FILE,
    CA_KEY_FILE,
    SERVER_CERT_FILE,
    SERVER_KEY_FILE,
    TOKEN_FILE,
    SA_KEY_FILE,
];
