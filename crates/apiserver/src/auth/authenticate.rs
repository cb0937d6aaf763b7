//! Bearer token authentication: who a presented token speaks for.
//!
//! A token is either the admin token or a ServiceAccount JWT signed by this server's
//! [`TokenSigner`]. A JWT authenticates only while the ServiceAccount it names (and the Pod or
//! Secret it is bound to) still exists with the uid the token recorded, so deleting and
//! recreating an account revokes every token minted for the old one. Looking those objects
//! up is the registry's business, which sits above `auth`; it answers through the
//! [`BoundObjects`] trait, so this module never imports it.
//!
//! Two callers share this code: the HTTP layer's authenticate middleware (every request with a
//! bearer token) and the TokenReview resource in the registry.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::sa_token::{Claims, ISSUER, TokenSigner};
use super::token::AdminToken;
use crate::api::user::User;

/// The audiences this server accepts in ServiceAccount tokens: its own issuer, as
/// kube-apiserver accepts its `--api-audiences` (which default to the issuer).
pub const API_AUDIENCES: [&str; 1] = [ISSUER];

/// The `extra` key holding a token's id (`JTI=<jti>`), as kube-apiserver records it.
pub const CREDENTIAL_ID: &str = "authentication.kubernetes.io/credential-id";

/// The uids of stored core objects, as authentication needs them: whether the ServiceAccount,
/// Pod or Secret a token names still exists as the same object.
pub trait BoundObjects {
    /// The `metadata.uid` of the core (`v1`) object `plural`/`namespace`/`name`, or `None`
    /// when it does not exist (or `plural` is not served).
    fn uid(&self, plural: &str, namespace: &str, name: &str) -> Option<String>;
}

/// The credentials this server accepts: the admin token (absent when authentication is not
/// enforced) and the key that signs ServiceAccount tokens. Cheap to build from borrowed handles
/// for each use.
#[derive(Clone, Copy, Debug)]
pub struct TokenAuthenticator<'a> {
    /// The administrator's token, if one is configured.
    pub admin_token: Option<&'a AdminToken>,
    /// The ServiceAccount token signer.
    pub signer: &'a TokenSigner,
}

impl TokenAuthenticator<'_> {
    /// The user `token` authenticates as, for a token meant for one of `audiences`: the
    /// administrator for the admin token, the ServiceAccount for a valid JWT whose account and
    /// bound object still exist in `objects` with the recorded uids. `None` means the token is
    /// not valid (a 401 for a request, `authenticated: false` for a TokenReview).
    pub fn authenticate(
        &self,
        token: &str,
        audiences: &[&str],
        objects: &dyn BoundObjects,
    ) -> Option<Arc<User>> {
        if self.admin_token.is_some_and(|t| t.verify(token)) {
            return Some(User::admin());
        }
        let now = jiff::Timestamp::now().as_second();
        let claims = self.signer.verify(token, now, audiences).ok()?;
        service_account_user(&claims, objects).map(Arc::new)
    }
}

/// Whether `plural`/`ns`/`name` exists in `objects` with `uid`.
fn exists_with_uid(
    objects: &dyn BoundObjects,
    plural: &str,
    ns: &str,
    name: &str,
    uid: &str,
) -> bool {
    objects.uid(plural, ns, name).as_deref() == Some(uid)
}

/// The ServiceAccount user verified `claims` speak for, if everything they name still exists.
fn service_account_user(claims: &Claims, objects: &dyn BoundObjects) -> Option<User> {
    let k = &claims.kubernetes;
    let sa = &k.serviceaccount;
    if !exists_with_uid(objects, "serviceaccounts", &k.namespace, &sa.name, &sa.uid) {
        return None;
    }
    let mut extra = BTreeMap::new();
    extra.insert(
        CREDENTIAL_ID.to_string(),
        vec![format!("JTI={}", claims.jti)],
    );
    for (plural, kind, bound) in [("pods", "pod", &k.pod), ("secrets", "secret", &k.secret)] {
        if let Some(obj) = bound {
            if !exists_with_uid(objects, plural, &k.namespace, &obj.name, &obj.uid) {
                return None;
            }
            if kind == "pod" {
                extra.insert(
                    format!("authentication.kubernetes.io/{kind}-name"),
                    vec![obj.name.clone()],
                );
                extra.insert(
                    format!("authentication.kubernetes.io/{kind}-uid"),
                    vec![obj.uid.clone()],
                );
            }
        }
    }
    if k.node.is_some() {
        // Nodes are not served, so a token bound to one can never be honoured.
        return None;
    }
    Some(User {
        name: format!("system:serviceaccount:{}:{}", k.namespace, sa.name),
        groups: vec![
            "system:serviceaccounts".into(),
            format!("system:serviceaccounts:{}", k.namespace),
            "system:authenticated".into(),
        ],
        uid: sa.uid.clone(),
        extra,
    })
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;
    use crate::auth::sa_token::{KubernetesClaim, ObjectClaim};

    /// Objects by (plural, namespace, name).
    #[derive(Default)]
    struct Objects(HashMap<(String, String, String), String>);

    impl Objects {
        fn with(mut self, plural: &str, name: &str, uid: &str) -> Self {
            self.0
                .insert((plural.into(), "ns".into(), name.into()), uid.into());
            self
        }
    }

    impl BoundObjects for Objects {
        fn uid(&self, plural: &str, namespace: &str, name: &str) -> Option<String> {
            self.0
                .get(&(plural.into(), namespace.into(), name.into()))
                .cloned()
        }
    }

    fn signer() -> TokenSigner {
        TokenSigner::load_or_generate(None).expect("an in-memory key")
    }

    fn token(signer: &TokenSigner, pod: Option<ObjectClaim>) -> String {
        let now = jiff::Timestamp::now().as_second();
        let claims = Claims {
            aud: vec![ISSUER.into()],
            exp: now + 3600,
            iat: now,
            nbf: now,
            iss: ISSUER.into(),
            jti: "the-jti".into(),
            sub: "system:serviceaccount:ns:robot".into(),
            kubernetes: KubernetesClaim {
                namespace: "ns".into(),
                serviceaccount: ObjectClaim {
                    name: "robot".into(),
                    uid: "sa-uid".into(),
                },
                pod,
                ..KubernetesClaim::default()
            },
        };
        signer.mint(&claims).expect("minting works")
    }

    #[test]
    fn a_service_account_token_authenticates_while_its_account_exists() {
        let signer = signer();
        let tokens = TokenAuthenticator {
            admin_token: None,
            signer: &signer,
        };
        let t = token(&signer, None);
        let objects = Objects::default().with("serviceaccounts", "robot", "sa-uid");
        let user = tokens
            .authenticate(&t, &API_AUDIENCES, &objects)
            .expect("the account exists");
        assert_eq!(user.name, "system:serviceaccount:ns:robot");
        assert_eq!(user.uid, "sa-uid");
        assert_eq!(
            user.groups,
            [
                "system:serviceaccounts",
                "system:serviceaccounts:ns",
                "system:authenticated"
            ]
        );
        assert_eq!(user.extra[CREDENTIAL_ID], ["JTI=the-jti"]);

        // Recreated under the same name, the account is another object: the token is dead.
        let recreated = Objects::default().with("serviceaccounts", "robot", "other-uid");
        assert!(
            tokens
                .authenticate(&t, &API_AUDIENCES, &recreated)
                .is_none()
        );
        // Meant for someone else: not accepted here.
        assert!(tokens.authenticate(&t, &["vault"], &objects).is_none());
    }

    #[test]
    fn a_pod_bound_token_dies_with_its_pod_and_names_it() {
        let signer = signer();
        let tokens = TokenAuthenticator {
            admin_token: None,
            signer: &signer,
        };
        let pod = ObjectClaim {
            name: "p".into(),
            uid: "pod-uid".into(),
        };
        let t = token(&signer, Some(pod));
        let account = Objects::default().with("serviceaccounts", "robot", "sa-uid");
        assert!(tokens.authenticate(&t, &API_AUDIENCES, &account).is_none());
        let both = account.with("pods", "p", "pod-uid");
        let user = tokens
            .authenticate(&t, &API_AUDIENCES, &both)
            .expect("account and pod exist");
        assert_eq!(user.extra["authentication.kubernetes.io/pod-name"], ["p"]);
        assert_eq!(
            user.extra["authentication.kubernetes.io/pod-uid"],
            ["pod-uid"]
        );
    }

    #[test]
    fn the_admin_token_is_the_administrator_and_garbage_is_nobody() {
        let signer = signer();
        let admin = AdminToken::generate();
        let tokens = TokenAuthenticator {
            admin_token: Some(&admin),
            signer: &signer,
        };
        let objects = Objects::default();
        let user = tokens
            .authenticate(admin.as_str(), &API_AUDIENCES, &objects)
            .expect("the admin token");
        assert_eq!(user, User::admin());
        assert!(
            tokens
                .authenticate("garbage", &API_AUDIENCES, &objects)
                .is_none()
        );
    }
}
