//! [`Transport`]: how a request reached the server, set by the serve loop as a request
//! extension and read when the request is authenticated.

/// How the request reached the server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transport {
    /// Whether the connection is TLS. kubectl and client-go send no credentials otherwise
    /// (spec §1 trap #7).
    pub tls: bool,
}
