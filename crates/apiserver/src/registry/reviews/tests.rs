//! The review resources and TokenRequest called on the registry directly, without HTTP.

use std::sync::Arc;

use serde_json::{Value, json};

use super::{Authorities, Review};
use crate::api::error::ApiError;
use crate::api::user::User;
use crate::auth::authenticate::TokenAuthenticator;
use crate::auth::rbac::RbacIndex;
use crate::auth::sa_token::TokenSigner;
use crate::registry::Registry;
use crate::storage::{MemoryBackend, Storage, Store, StoreConfig};

/// A registry over memory, with its RBAC index and a fresh token key.
struct Env {
    registry: Arc<Registry>,
    rbac: RbacIndex,
    signer: TokenSigner,
}

impl Env {
    fn new() -> Env {
        let store = Store::open(Arc::new(MemoryBackend), StoreConfig::default()).expect("store");
        let registry = Arc::new(Registry::new(store));
        let rbac = RbacIndex::new(registry.store().clone());
        let signer = TokenSigner::load_or_generate(None).expect("an in-memory key");
        Env {
            registry,
            rbac,
            signer,
        }
    }

    fn authorities(&self) -> Authorities<'_> {
        Authorities {
            rbac: &self.rbac,
            tokens: TokenAuthenticator {
                admin_token: None,
                signer: &self.signer,
            },
        }
    }

    /// Stores `obj` as resource `group`/`version`/`plural`, straight into storage.
    async fn put(&self, group: &str, version: &str, plural: &str, obj: Value) {
        let res = self
            .registry
            .catalog()
            .find(group, version, plural)
            .expect("a served resource");
        let ns = obj["metadata"]["namespace"].as_str().map(String::from);
        let name = obj["metadata"]["name"]
            .as_str()
            .expect("a name")
            .to_string();
        self.registry
            .store()
            .create(&res.key(ns.as_deref(), &name), obj)
            .await
            .expect("stored");
    }
}

fn user(name: &str) -> User {
    User {
        name: name.into(),
        groups: vec!["system:authenticated".into()],
        ..User::default()
    }
}

fn access_review(user: &str, verb: &str) -> Value {
    json!({
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {
            "user": user,
            "resourceAttributes": {"verb": verb, "resource": "pods", "namespace": "team"},
        },
    })
}

#[tokio::test]
async fn a_subject_access_review_answers_from_the_rbac_objects() {
    let env = Env::new();
    env.put(
        "rbac.authorization.k8s.io",
        "v1",
        "roles",
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": "reader", "namespace": "team", "uid": "r1"},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}],
        }),
    )
    .await;
    env.put(
        "rbac.authorization.k8s.io",
        "v1",
        "rolebindings",
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": "alice-reads", "namespace": "team", "uid": "b1"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "reader"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "alice"}],
        }),
    )
    .await;
    // The caller is not the subject: an administrator asks about alice.
    let caller = User::admin();

    let allowed = env
        .registry
        .review(
            &env.authorities(),
            Review::SubjectAccess,
            &caller,
            access_review("alice", "get"),
        )
        .expect("a valid review");
    assert_eq!(allowed["kind"], "SubjectAccessReview");
    assert_eq!(allowed["apiVersion"], "authorization.k8s.io/v1");
    assert_eq!(allowed["spec"]["user"], "alice", "the request is echoed");
    assert_eq!(allowed["status"]["allowed"], true);

    let denied = env
        .registry
        .review(
            &env.authorities(),
            Review::SubjectAccess,
            &caller,
            access_review("alice", "delete"),
        )
        .expect("a valid review");
    assert_eq!(denied["status"]["allowed"], false);

    // The same question about the caller herself.
    let mut own = access_review("", "list");
    own["kind"] = json!("SelfSubjectAccessReview");
    let own = env
        .registry
        .review(
            &env.authorities(),
            Review::SelfSubjectAccess,
            &user("alice"),
            own,
        )
        .expect("a valid review");
    assert_eq!(own["kind"], "SelfSubjectAccessReview");
    assert_eq!(own["status"]["allowed"], true);
}

#[tokio::test]
async fn a_subject_access_review_without_a_subject_is_invalid() {
    let env = Env::new();
    let err = env
        .registry
        .review(
            &env.authorities(),
            Review::SubjectAccess,
            &User::admin(),
            access_review("", "get"),
        )
        .expect_err("no user and no groups");
    let ApiError::Invalid { kind, causes, .. } = err else {
        panic!("want 422 Invalid, got {err:?}");
    };
    assert_eq!(kind, "SubjectAccessReview.authorization.k8s.io");
    assert_eq!(causes.len(), 1);
    assert_eq!(causes[0].field, "spec.user");
    assert!(
        causes[0]
            .message()
            .contains("at least one of user or group must be specified"),
        "{:?}",
        causes[0]
    );
}

#[tokio::test]
async fn a_requested_token_authenticates_as_its_service_account_in_a_token_review() {
    let env = Env::new();
    env.put(
        "",
        "v1",
        "serviceaccounts",
        json!({
            "apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": "robot", "namespace": "team", "uid": "sa-uid"},
        }),
    )
    .await;
    let request = json!({
        "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
        "spec": {"expirationSeconds": 600},
    });
    let minted = env
        .registry
        .token_request(&env.signer, "team", "robot", request)
        .expect("the account exists");
    assert_eq!(minted["kind"], "TokenRequest");
    assert_eq!(minted["metadata"]["name"], "robot");
    assert_eq!(minted["metadata"]["namespace"], "team");
    assert_eq!(minted["spec"]["expirationSeconds"], 600);
    assert_eq!(
        minted["spec"]["audiences"],
        json!([crate::auth::sa_token::ISSUER])
    );
    let token = minted["status"]["token"].as_str().expect("a token");

    let review = json!({
        "apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
        "spec": {"token": token},
    });
    let reviewed = env
        .registry
        .review(&env.authorities(), Review::Token, &User::admin(), review)
        .expect("a TokenReview always answers");
    assert_eq!(reviewed["status"]["authenticated"], true);
    assert_eq!(
        reviewed["status"]["user"]["username"],
        "system:serviceaccount:team:robot"
    );
    assert_eq!(reviewed["status"]["user"]["uid"], "sa-uid");

    let forged = json!({"spec": {"token": format!("{token}x")}});
    let reviewed = env
        .registry
        .review(&env.authorities(), Review::Token, &User::admin(), forged)
        .expect("a TokenReview always answers");
    assert_eq!(reviewed["status"].get("authenticated"), None);
    assert_eq!(reviewed["status"]["error"], "invalid bearer token");
}

#[tokio::test]
async fn a_token_request_checks_its_lifetime_and_its_account() {
    let env = Env::new();
    let short = json!({"spec": {"expirationSeconds": 599}});
    let err = env
        .registry
        .token_request(&env.signer, "team", "robot", short)
        .expect_err("shorter than 10 minutes");
    let ApiError::Invalid { kind, causes, .. } = err else {
        panic!("want 422 Invalid, got {err:?}");
    };
    assert_eq!(kind, "TokenRequest.authentication.k8s.io");
    assert_eq!(causes[0].field, "spec.expirationSeconds");

    let err = env
        .registry
        .token_request(&env.signer, "team", "ghost", json!({"spec": {}}))
        .expect_err("no such account");
    assert!(
        matches!(err, ApiError::NotFound { ref name, .. } if name == "ghost"),
        "{err:?}"
    );
}

#[test]
fn reviews_are_found_by_group_version_and_plural() {
    assert_eq!(
        Review::find("authorization.k8s.io", "v1", "subjectaccessreviews"),
        Some(Review::SubjectAccess)
    );
    assert_eq!(
        Review::find("authentication.k8s.io", "v1", "tokenreviews"),
        Some(Review::Token)
    );
    assert_eq!(
        Review::find("authentication.k8s.io", "v1beta1", "tokenreviews"),
        None
    );
    assert_eq!(Review::find("", "v1", "pods"), None);
    for review in [
        Review::SelfSubjectAccess,
        Review::SubjectAccess,
        Review::SelfSubjectRules,
        Review::SelfSubject,
        Review::Token,
    ] {
        assert_eq!(
            Review::find(review.group(), "v1", review.plural()),
            Some(review)
        );
    }
}

#[tokio::test]
async fn an_empty_subject_access_review_names_every_missing_field() {
    let env = Env::new();
    let err = env
        .registry
        .review(
            &env.authorities(),
            Review::SubjectAccess,
            &User::admin(),
            json!({"spec": {}}),
        )
        .expect_err("nothing asked, nobody to ask about");
    let ApiError::Invalid { causes, .. } = err else {
        panic!("want 422 Invalid, got {err:?}");
    };
    let fields: Vec<&str> = causes.iter().map(|c| c.field.as_str()).collect();
    assert_eq!(fields, ["spec.resourceAttributes", "spec.user"]);
    assert!(
        causes[0]
            .message()
            .contains("exactly one of nonResourceAttributes or resourceAttributes"),
        "{:?}",
        causes[0]
    );
}

#[tokio::test]
async fn both_kinds_of_attributes_are_refused_together() {
    let env = Env::new();
    let both = json!({"spec": {
        "resourceAttributes": {"verb": "get", "resource": "pods"},
        "nonResourceAttributes": {"verb": "get", "path": "/healthz"},
    }});
    let err = env
        .registry
        .review(
            &env.authorities(),
            Review::SelfSubjectAccess,
            &user("alice"),
            both,
        )
        .expect_err("two questions at once");
    let ApiError::Invalid { kind, causes, .. } = err else {
        panic!("want 422 Invalid, got {err:?}");
    };
    assert_eq!(kind, "SelfSubjectAccessReview.authorization.k8s.io");
    assert_eq!(causes.len(), 1);
    assert_eq!(causes[0].field, "spec.nonResourceAttributes");
    assert!(
        causes[0]
            .message()
            .contains("cannot be specified in combination with resourceAttributes"),
        "{:?}",
        causes[0]
    );
}

#[tokio::test]
async fn a_token_review_without_a_token_is_a_bad_request() {
    let env = Env::new();
    for spec in [json!({}), json!({"token": ""})] {
        let err = env
            .registry
            .review(
                &env.authorities(),
                Review::Token,
                &User::admin(),
                json!({"spec": spec}),
            )
            .expect_err("nothing to review");
        assert!(
            matches!(err, ApiError::BadRequest(ref m) if m == "token is required for TokenReview in authentication"),
            "{err:?}"
        );
    }
}
