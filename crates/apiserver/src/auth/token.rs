//! The admin bearer token (spec §15.2) and the parser for `Authorization: Bearer …`.
//!
//! The token is 32 random bytes in URL-safe base64 without padding (43 characters), kept in
//! `admin.token` (mode 0600) in the data directory so kubeconfigs stay valid across restarts.
//! Whoever presents it acts as the admin (`system:masters`); mapping it to that identity is the
//! authentication layer's job, not this module's.
//!
//! # Guarantees
//! - [`AdminToken::verify`] takes the same time whatever the presented token shares with the real
//!   one: both are hashed with SHA-256 and the digests compared without early exit.
//! - Neither [`Debug`] nor any error message shows the token.

use std::fmt;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use sha2::{Digest as _, Sha256};

use super::{PRIVATE_MODE, read_if_exists, write_file_atomically};

/// File name of the admin token in the data directory.
pub use crate::api::data_dir::TOKEN_FILE;

/// Why the admin token could not be loaded or kept.
///
/// These happen at startup and do not go away by retrying: fix or remove the file named.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TokenError {
    /// The token file could not be read.
    #[error("reading {} failed", .path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The token file could not be written.
    #[error("writing {} failed", .path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The token file is empty or holds characters a bearer token cannot carry (anything but
    /// printable ASCII without spaces).
    #[error("{} holds no usable token", .path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
    },
}

/// The secret that authenticates the admin.
#[derive(Clone)]
pub struct AdminToken {
    token: String,
    digest: [u8; 32],
}

impl fmt::Debug for AdminToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AdminToken").finish_non_exhaustive()
    }
}

impl AdminToken {
    /// A fresh random token, kept nowhere.
    pub fn generate() -> AdminToken {
        let bytes: [u8; 32] = rand::random();
        AdminToken::new(URL_SAFE_NO_PAD.encode(bytes))
    }

    /// Reads the token from `dir/admin.token`, or generates one and writes it there (mode 0600).
    /// Without a directory the token lives in memory only.
    ///
    /// A token file written by someone else is accepted as long as it holds one printable ASCII
    /// word (surrounding whitespace is ignored).
    ///
    /// # Errors
    /// The file cannot be read or written, or holds no usable token.
    pub fn load_or_generate(dir: Option<&Path>) -> Result<AdminToken, TokenError> {
        let Some(dir) = dir else {
            return Ok(AdminToken::generate());
        };
        let path = dir.join(TOKEN_FILE);
        let existing = read_if_exists(&path).map_err(|source| TokenError::Read {
            path: path.clone(),
            source,
        })?;
        if let Some(bytes) = existing {
            let token = bytes.trim_ascii();
            if token.is_empty() || !token.iter().all(u8::is_ascii_graphic) {
                return Err(TokenError::Invalid { path });
            }
            // Only ASCII passed the check above, so this is lossless.
            return Ok(AdminToken::new(String::from_utf8_lossy(token).into_owned()));
        }
        let token = AdminToken::generate();
        let contents = format!("{}\n", token.token);
        write_file_atomically(&path, contents.as_bytes(), PRIVATE_MODE)
            .map_err(|source| TokenError::Write { path, source })?;
        Ok(token)
    }

    fn new(token: String) -> AdminToken {
        let digest = Sha256::digest(token.as_bytes()).into();
        AdminToken { token, digest }
    }

    /// The token itself, to write into a kubeconfig.
    pub fn as_str(&self) -> &str {
        &self.token
    }

    /// Whether `presented` is this token, in time independent of how much of it is right.
    pub fn verify(&self, presented: &str) -> bool {
        let digest: [u8; 32] = Sha256::digest(presented.as_bytes()).into();
        let difference = digest
            .iter()
            .zip(self.digest.iter())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b));
        std::hint::black_box(difference) == 0
    }
}

/// The token of an `Authorization: Bearer <token>` header (scheme matched case-insensitively),
/// or `None` if there is no such header, another scheme, or no token.
///
/// Like kube-apiserver, only the first `Authorization` header counts. Surrounding spaces are
/// ignored; a token with spaces inside is malformed and yields `None`.
pub fn bearer_token(headers: &http::HeaderMap) -> Option<&str> {
    let value = headers.get(http::header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, rest) = value.trim_start().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    let token = rest.trim_matches(|c| c == ' ' || c == '\t');
    if token.is_empty() || token.contains([' ', '\t']) {
        return None;
    }
    Some(token)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(authorization: &str) -> http::HeaderMap {
        let mut headers = http::HeaderMap::new();
        headers.insert(
            http::header::AUTHORIZATION,
            http::HeaderValue::from_str(authorization).expect("valid header value"),
        );
        headers
    }

    #[test]
    fn the_token_verifies_and_nothing_else_does() {
        let token = AdminToken::generate();
        assert_eq!(token.as_str().len(), 43);
        assert!(token.verify(token.as_str()));
        assert!(!token.verify(""));
        assert!(!token.verify(&token.as_str()[..42]));
        assert!(!token.verify(&format!("{}x", token.as_str())));
        assert!(!token.verify(AdminToken::generate().as_str()));
    }

    #[test]
    fn the_token_is_kept_in_the_directory_and_reloaded() {
        let dir = tempfile::tempdir().expect("tempdir");
        let first = AdminToken::load_or_generate(Some(dir.path())).expect("generates");
        let second = AdminToken::load_or_generate(Some(dir.path())).expect("loads");
        assert_eq!(first.as_str(), second.as_str());
        assert!(second.verify(first.as_str()));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(dir.path().join(TOKEN_FILE))
                .expect("exists")
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
    }

    #[test]
    fn a_token_file_written_by_hand_is_used_and_an_empty_one_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join(TOKEN_FILE), "  my-token\n").expect("write");
        let token = AdminToken::load_or_generate(Some(dir.path())).expect("loads");
        assert_eq!(token.as_str(), "my-token");

        std::fs::write(dir.path().join(TOKEN_FILE), "\n").expect("write");
        let err = AdminToken::load_or_generate(Some(dir.path())).expect_err("refused");
        assert!(matches!(err, TokenError::Invalid { .. }));
    }

    #[test]
    fn bearer_scheme_is_matched_case_insensitively() {
        assert_eq!(bearer_token(&headers("Bearer abc")), Some("abc"));
        assert_eq!(bearer_token(&headers("bearer abc")), Some("abc"));
        assert_eq!(bearer_token(&headers("BEARER  abc ")), Some("abc"));
    }

    #[test]
    fn other_schemes_and_missing_tokens_yield_none() {
        assert_eq!(bearer_token(&http::HeaderMap::new()), None);
        assert_eq!(bearer_token(&headers("Basic YWRtaW46YWRtaW4=")), None);
        assert_eq!(bearer_token(&headers("Bearer")), None);
        assert_eq!(bearer_token(&headers("Bearer ")), None);
        assert_eq!(bearer_token(&headers("Bearer a b")), None);
        assert_eq!(bearer_token(&headers("Bearerabc")), None);
    }

    #[test]
    fn debug_output_hides_the_token() {
        let token = AdminToken::generate();
        let shown = format!("{token:?}");
        assert!(!shown.contains(token.as_str()));
    }
}
