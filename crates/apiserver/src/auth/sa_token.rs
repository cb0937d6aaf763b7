//! ServiceAccount tokens (spec §18.7): JWTs signed with an ECDSA P-256 key (ES256) the server
//! generates once and keeps in its data directory.
//!
//! [`TokenSigner::mint`] writes a token for a ServiceAccount with the claims Kubernetes puts in
//! one (`iss`, `sub`, `aud`, `exp`, `iat`, `nbf`, `jti`, `kubernetes.io`), so tests that decode
//! it find what they would on a cluster. [`TokenSigner::verify`] checks what can be checked
//! without storage: the signature, the time window and the audience. Whether the ServiceAccount
//! (and a bound object) still exists with the token's uid is the authentication layer's check.
//!
//! # Guarantees
//! - The key file (`service-account.key`, PKCS#8 DER, mode 0600) is written atomically; tokens
//!   stay valid across restarts with the same data directory.
//! - Only `ES256` tokens signed by this key verify; the header's `alg` is checked, never trusted.

use std::path::{Path, PathBuf};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::rand::SystemRandom;
use ring::signature::{
    ECDSA_P256_SHA256_FIXED, ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair as _,
    UnparsedPublicKey,
};
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use super::{PRIVATE_MODE, read_if_exists, write_file_atomically};

/// File name of the signing key in the data directory.
pub use crate::api::data_dir::SA_KEY_FILE as KEY_FILE;

/// The issuer, and the audience tokens get when the request names none (real clusters use the
/// same URL for both).
pub const ISSUER: &str = "https://kubernetes.default.svc.cluster.local";

/// Why the signing key could not be loaded or kept.
///
/// These happen at startup and do not go away by retrying: fix or remove the file named.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KeyError {
    /// The key file could not be read.
    #[error("reading {} failed", .path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The key file could not be written.
    #[error("writing {} failed", .path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The key file holds no P-256 PKCS#8 key, or the system random source failed.
    #[error("the service account signing key is unusable: {0}")]
    Invalid(String),
}

/// Why a presented token is not a valid ServiceAccount token. Every variant means 401.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TokenInvalid {
    /// Not three base64url parts of JSON, or not our algorithm.
    #[error("token is malformed")]
    Malformed,
    /// The signature does not verify with the server's key.
    #[error("invalid signature")]
    BadSignature,
    /// `nbf` is in the future or `exp` has passed.
    #[error("token has expired or is not yet valid")]
    Expired,
    /// None of the token's audiences is one of the server's.
    #[error("token audiences {0:?} are invalid for the target audiences")]
    WrongAudience(Vec<String>),
    /// The token names no ServiceAccount.
    #[error("token is not a service account token")]
    NotServiceAccount,
}

/// A name and uid, as the `kubernetes.io` claim records objects.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectClaim {
    /// The object's name.
    pub name: String,
    /// The object's uid.
    pub uid: String,
}

/// The private `kubernetes.io` claim.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KubernetesClaim {
    /// The ServiceAccount's namespace.
    pub namespace: String,
    /// The ServiceAccount.
    pub serviceaccount: ObjectClaim,
    /// The Pod the token is bound to, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod: Option<ObjectClaim>,
    /// The Secret the token is bound to, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<ObjectClaim>,
    /// The Node the token is bound to, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<ObjectClaim>,
}

/// The claims of a ServiceAccount token.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claims {
    /// Audiences.
    pub aud: Vec<String>,
    /// Expiry, seconds since the epoch.
    pub exp: i64,
    /// Issued at.
    pub iat: i64,
    /// Not before.
    pub nbf: i64,
    /// Issuer.
    pub iss: String,
    /// Token id.
    pub jti: String,
    /// Subject: `system:serviceaccount:<ns>:<name>`.
    pub sub: String,
    /// What the token is for.
    #[serde(rename = "kubernetes.io")]
    pub kubernetes: KubernetesClaim,
}

#[derive(Serialize, Deserialize)]
struct Header {
    alg: String,
    #[serde(default)]
    kid: String,
}

/// How many verified tokens [`TokenSigner`] remembers before it forgets them all.
const VERIFIED_CAPACITY: usize = 4096;

/// The key that signs and verifies ServiceAccount tokens.
///
/// Checking an ECDSA signature costs far more than serving a GET, so the claims of tokens whose
/// signature verified are remembered (up to 4096 tokens); the time window and the
/// audience are still checked on every use.
pub struct TokenSigner {
    key: EcdsaKeyPair,
    kid: String,
    rng: SystemRandom,
    verified: std::sync::Mutex<std::collections::HashMap<String, Claims>>,
}

impl std::fmt::Debug for TokenSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenSigner")
            .field("kid", &self.kid)
            .finish_non_exhaustive()
    }
}

impl TokenSigner {
    /// Reads the key from `dir/service-account.key`, or generates one and writes it there (mode
    /// 0600). Without a directory the key lives in memory only.
    ///
    /// # Errors
    /// The file cannot be read or written, or holds no usable key.
    pub fn load_or_generate(dir: Option<&Path>) -> Result<TokenSigner, KeyError> {
        let rng = SystemRandom::new();
        let generate = |rng: &SystemRandom| {
            EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, rng)
                .map(|doc| doc.as_ref().to_vec())
                .map_err(|e| KeyError::Invalid(e.to_string()))
        };
        let pkcs8 = match dir {
            None => generate(&rng)?,
            Some(dir) => {
                let path = dir.join(KEY_FILE);
                let existing = read_if_exists(&path).map_err(|source| KeyError::Read {
                    path: path.clone(),
                    source,
                })?;
                match existing {
                    Some(bytes) => bytes,
                    None => {
                        let bytes = generate(&rng)?;
                        write_file_atomically(&path, &bytes, PRIVATE_MODE)
                            .map_err(|source| KeyError::Write { path, source })?;
                        bytes
                    }
                }
            }
        };
        let key = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &pkcs8, &rng)
            .map_err(|e| KeyError::Invalid(e.to_string()))?;
        let kid = URL_SAFE_NO_PAD.encode(Sha256::digest(key.public_key().as_ref()));
        Ok(TokenSigner {
            key,
            kid,
            rng,
            verified: std::sync::Mutex::new(std::collections::HashMap::new()),
        })
    }

    /// Signs `claims` into a compact JWS.
    ///
    /// # Errors
    /// Only if the system random source fails.
    pub fn mint(&self, claims: &Claims) -> Result<String, KeyError> {
        let header = Header {
            alg: "ES256".into(),
            kid: self.kid.clone(),
        };
        let encode = |v: &[u8]| URL_SAFE_NO_PAD.encode(v);
        let header = serde_json::to_vec(&header).map_err(|e| KeyError::Invalid(e.to_string()))?;
        let payload = serde_json::to_vec(claims).map_err(|e| KeyError::Invalid(e.to_string()))?;
        let signing_input = format!("{}.{}", encode(&header), encode(&payload));
        let signature = self
            .key
            .sign(&self.rng, signing_input.as_bytes())
            .map_err(|e| KeyError::Invalid(e.to_string()))?;
        Ok(format!("{signing_input}.{}", encode(signature.as_ref())))
    }

    /// Checks the signature, the time window (at `now`, seconds since the epoch) and that one
    /// of the token's audiences is in `audiences`; returns the claims.
    ///
    /// # Errors
    /// [`TokenInvalid`] says which check failed; each means 401.
    pub fn verify(
        &self,
        token: &str,
        now: i64,
        audiences: &[&str],
    ) -> Result<Claims, TokenInvalid> {
        let remembered = self
            .verified
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(token)
            .cloned();
        let claims = match remembered {
            Some(claims) => claims,
            None => {
                let claims = self.verify_signature(token)?;
                let mut verified = self
                    .verified
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                if verified.len() >= VERIFIED_CAPACITY {
                    verified.clear();
                }
                verified.insert(token.to_string(), claims.clone());
                claims
            }
        };
        if now < claims.nbf || now >= claims.exp {
            return Err(TokenInvalid::Expired);
        }
        if !claims.aud.iter().any(|a| audiences.contains(&a.as_str())) {
            return Err(TokenInvalid::WrongAudience(claims.aud));
        }
        if claims.kubernetes.serviceaccount.name.is_empty() {
            return Err(TokenInvalid::NotServiceAccount);
        }
        Ok(claims)
    }

    /// Checks the token's form and signature and returns its claims.
    fn verify_signature(&self, token: &str) -> Result<Claims, TokenInvalid> {
        let mut parts = token.split('.');
        let (Some(header), Some(payload), Some(signature), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(TokenInvalid::Malformed);
        };
        let decode = |s: &str| {
            URL_SAFE_NO_PAD
                .decode(s)
                .map_err(|_| TokenInvalid::Malformed)
        };
        let parsed: Header =
            serde_json::from_slice(&decode(header)?).map_err(|_| TokenInvalid::Malformed)?;
        if parsed.alg != "ES256" {
            return Err(TokenInvalid::Malformed);
        }
        let signing_input = &token[..header.len() + 1 + payload.len()];
        UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, self.key.public_key().as_ref())
            .verify(signing_input.as_bytes(), &decode(signature)?)
            .map_err(|_| TokenInvalid::BadSignature)?;
        serde_json::from_slice(&decode(payload)?).map_err(|_| TokenInvalid::Malformed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claims(now: i64, aud: &str) -> Claims {
        Claims {
            aud: vec![aud.into()],
            exp: now + 600,
            iat: now,
            nbf: now,
            iss: ISSUER.into(),
            jti: "j-1".into(),
            sub: "system:serviceaccount:demo:op".into(),
            kubernetes: KubernetesClaim {
                namespace: "demo".into(),
                serviceaccount: ObjectClaim {
                    name: "op".into(),
                    uid: "u-1".into(),
                },
                ..Default::default()
            },
        }
    }

    #[test]
    fn a_minted_token_verifies_within_its_window_and_audience() {
        let signer = TokenSigner::load_or_generate(None).expect("key");
        let token = signer.mint(&claims(1000, ISSUER)).expect("mint");
        let got = signer.verify(&token, 1000, &[ISSUER]).expect("valid");
        assert_eq!(got, claims(1000, ISSUER));
        assert_eq!(
            signer.verify(&token, 1600, &[ISSUER]),
            Err(TokenInvalid::Expired)
        );
        assert_eq!(
            signer.verify(&token, 999, &[ISSUER]),
            Err(TokenInvalid::Expired)
        );
        let vault = signer.mint(&claims(1000, "vault")).expect("mint");
        assert!(matches!(
            signer.verify(&vault, 1000, &[ISSUER]),
            Err(TokenInvalid::WrongAudience(_))
        ));
    }

    #[test]
    fn another_key_or_a_changed_payload_does_not_verify() {
        let signer = TokenSigner::load_or_generate(None).expect("key");
        let other = TokenSigner::load_or_generate(None).expect("key");
        let token = other.mint(&claims(1000, ISSUER)).expect("mint");
        assert_eq!(
            signer.verify(&token, 1000, &[ISSUER]),
            Err(TokenInvalid::BadSignature)
        );
        let mine = signer.mint(&claims(1000, ISSUER)).expect("mint");
        let mut parts: Vec<&str> = mine.split('.').collect();
        let forged =
            URL_SAFE_NO_PAD.encode(serde_json::to_vec(&claims(5000, ISSUER)).expect("json"));
        parts[1] = &forged;
        assert_eq!(
            signer.verify(&parts.join("."), 5000, &[ISSUER]),
            Err(TokenInvalid::BadSignature)
        );
        assert_eq!(
            signer.verify("not-a-jwt", 1000, &[ISSUER]),
            Err(TokenInvalid::Malformed)
        );
    }

    #[test]
    fn the_key_is_kept_in_the_directory_so_tokens_survive_restarts() {
        let dir = tempfile::tempdir().expect("tempdir");
        let first = TokenSigner::load_or_generate(Some(dir.path())).expect("generates");
        let token = first.mint(&claims(1000, ISSUER)).expect("mint");
        let second = TokenSigner::load_or_generate(Some(dir.path())).expect("loads");
        assert!(second.verify(&token, 1000, &[ISSUER]).is_ok());
    }
}
