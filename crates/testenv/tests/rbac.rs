//! RBAC, ServiceAccount tokens and impersonation through the `kube` crate: a ServiceAccount's
//! client is authorized exactly as it would be on a v1.32 cluster (spec §18).

use base64::Engine as _;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
    SelfSubjectRulesReview, SelfSubjectRulesReviewSpec,
};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, ServiceAccount};
use kore_testenv::TestEnv;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::core::Status;
use serde_json::{Value, json};

fn api_error(e: kube::Error) -> Status {
    match e {
        kube::Error::Api(s) => *s,
        other => panic!("expected an API error, got {other:?}"),
    }
}

fn from<T: serde::de::DeserializeOwned>(v: Value) -> T {
    serde_json::from_value(v).expect("valid object")
}

/// Creates namespace `ns` and ServiceAccount `ns`/`name`, as the administrator.
async fn account(env: &TestEnv, ns: &str, name: &str) {
    let namespaces: Api<Namespace> = Api::all(env.client());
    let _ = namespaces
        .create(
            &PostParams::default(),
            &from(json!({"metadata": {"name": ns}})),
        )
        .await;
    let accounts: Api<ServiceAccount> = Api::namespaced(env.client(), ns);
    accounts
        .create(
            &PostParams::default(),
            &from(json!({"metadata": {"name": name}})),
        )
        .await
        .expect("create serviceaccount");
}

/// Creates an RBAC object from JSON, as the administrator.
async fn rbac(env: &TestEnv, obj: Value) {
    let kind = obj["kind"].as_str().expect("kind").to_string();
    let ns = obj["metadata"]["namespace"].as_str().map(String::from);
    let (plural, namespaced) = match kind.as_str() {
        "Role" => ("roles", true),
        "RoleBinding" => ("rolebindings", true),
        "ClusterRole" => ("clusterroles", false),
        _ => ("clusterrolebindings", false),
    };
    let ar = kube::api::ApiResource {
        group: "rbac.authorization.k8s.io".into(),
        version: "v1".into(),
        api_version: "rbac.authorization.k8s.io/v1".into(),
        kind: kind.clone(),
        plural: plural.into(),
    };
    let api: Api<kube::api::DynamicObject> = match (namespaced, ns) {
        (true, Some(ns)) => Api::namespaced_with(env.client(), &ns, &ar),
        _ => Api::all_with(env.client(), &ar),
    };
    api.create(&PostParams::default(), &from(obj))
        .await
        .expect("create RBAC object");
}

fn role(ns: &str, name: &str, rules: Value) -> Value {
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
           "metadata": {"name": name, "namespace": ns}, "rules": rules})
}

fn role_binding(ns: &str, name: &str, role_kind: &str, role: &str, sa: &str) -> Value {
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
           "metadata": {"name": name, "namespace": ns},
           "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role},
           "subjects": [{"kind": "ServiceAccount", "name": sa}]})
}

fn cm(name: &str) -> ConfigMap {
    from(json!({"metadata": {"name": name}, "data": {"k": "v"}}))
}

#[tokio::test]
async fn a_service_account_without_a_binding_is_forbidden_and_with_one_is_allowed() {
    let env = TestEnv::start().await.expect("start");
    account(&env, "demo", "op").await;
    let op = env
        .service_account_client("demo", "op")
        .await
        .expect("client");
    let cms: Api<ConfigMap> = Api::namespaced(op, "demo");

    let err = api_error(
        cms.list(&ListParams::default())
            .await
            .expect_err("forbidden"),
    );
    assert_eq!(err.code, 403);
    assert_eq!(err.reason, "Forbidden");
    assert_eq!(
        err.message,
        r#"configmaps is forbidden: User "system:serviceaccount:demo:op" cannot list resource "configmaps" in API group "" in the namespace "demo""#
    );
    let details = err.details.expect("details");
    assert_eq!(
        (details.kind.as_str(), details.name.as_str()),
        ("configmaps", "")
    );

    rbac(
        &env,
        role(
            "demo",
            "cm-rw",
            json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list", "create", "get"]}]),
        ),
    )
    .await;
    rbac(&env, role_binding("demo", "op-cm", "Role", "cm-rw", "op")).await;
    assert!(
        cms.list(&ListParams::default().fields("metadata.name!=kube-root-ca.crt"))
            .await
            .expect("list")
            .items
            .is_empty()
    );
    cms.create(&PostParams::default(), &cm("made-by-op"))
        .await
        .expect("create");
    let admin: Api<ConfigMap> = Api::namespaced(env.client(), "demo");
    assert_eq!(
        admin.get("made-by-op").await.expect("stored").data,
        cm("made-by-op").data
    );
    // Delete was not granted.
    let err = api_error(
        cms.delete("made-by-op", &DeleteParams::default())
            .await
            .expect_err("forbidden"),
    );
    assert_eq!(
        err.message,
        r#"configmaps "made-by-op" is forbidden: User "system:serviceaccount:demo:op" cannot delete resource "configmaps" in API group "" in the namespace "demo""#
    );
}

#[tokio::test]
async fn a_role_binding_grants_only_in_its_namespace_and_a_cluster_role_binding_everywhere() {
    let env = TestEnv::start().await.expect("start");
    account(&env, "demo", "op").await;
    account(&env, "other", "x").await;
    rbac(
        &env,
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
               "metadata": {"name": "cm-reader"},
               "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list"]}]}),
    )
    .await;
    rbac(
        &env,
        role_binding("demo", "read", "ClusterRole", "cm-reader", "op"),
    )
    .await;
    let op = env
        .service_account_client("demo", "op")
        .await
        .expect("client");
    let in_demo: Api<ConfigMap> = Api::namespaced(op.clone(), "demo");
    let in_other: Api<ConfigMap> = Api::namespaced(op.clone(), "other");
    let everywhere: Api<ConfigMap> = Api::all(op.clone());
    in_demo
        .list(&ListParams::default())
        .await
        .expect("granted in demo");
    assert_eq!(
        api_error(
            in_other
                .list(&ListParams::default())
                .await
                .expect_err("other ns")
        )
        .code,
        403
    );
    let err = api_error(
        everywhere
            .list(&ListParams::default())
            .await
            .expect_err("all ns"),
    );
    assert_eq!(
        err.message,
        r#"configmaps is forbidden: User "system:serviceaccount:demo:op" cannot list resource "configmaps" in API group "" at the cluster scope"#
    );

    rbac(
        &env,
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
               "metadata": {"name": "read-all"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cm-reader"},
               "subjects": [{"kind": "ServiceAccount", "name": "op", "namespace": "demo"}]}),
    )
    .await;
    in_other
        .list(&ListParams::default())
        .await
        .expect("granted in other");
    everywhere
        .list(&ListParams::default())
        .await
        .expect("granted everywhere");
}

#[tokio::test]
async fn resource_names_allow_only_the_named_objects_and_field_selected_watches() {
    let env = TestEnv::start().await.expect("start");
    account(&env, "demo", "op").await;
    let admin: Api<ConfigMap> = Api::namespaced(env.client(), "demo");
    for name in ["x", "y"] {
        admin
            .create(&PostParams::default(), &cm(name))
            .await
            .expect("create");
    }
    rbac(
        &env,
        role(
            "demo",
            "only-x",
            json!([{"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["x"],
                    "verbs": ["get", "list", "watch", "create"]}]),
        ),
    )
    .await;
    rbac(&env, role_binding("demo", "only-x", "Role", "only-x", "op")).await;
    let cms: Api<ConfigMap> = Api::namespaced(
        env.service_account_client("demo", "op")
            .await
            .expect("client"),
        "demo",
    );
    cms.get("x").await.expect("x is named");
    let err = api_error(cms.get("y").await.expect_err("y is not"));
    assert_eq!(err.details.expect("details").name, "y");
    assert_eq!(
        api_error(cms.list(&ListParams::default()).await.expect_err("list")).code,
        403
    );
    // A list pinned to the name by a field selector is a request for that name.
    let listed = cms
        .list(&ListParams::default().fields("metadata.name=x"))
        .await
        .expect("field-selected list");
    assert_eq!(listed.items.len(), 1);
    // A create carries no name, so resourceNames never allow it.
    let err = api_error(
        cms.create(&PostParams::default(), &cm("x2"))
            .await
            .expect_err("create"),
    );
    assert_eq!(err.code, 403);
}

#[tokio::test]
async fn subresources_need_their_own_rule() {
    let env = TestEnv::start().await.expect("start");
    account(&env, "demo", "op").await;
    let deployment: Deployment = from(json!({
        "metadata": {"name": "web"},
        "spec": {"selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}
    }));
    Api::<Deployment>::namespaced(env.client(), "demo")
        .create(&PostParams::default(), &deployment)
        .await
        .expect("create");
    rbac(
        &env,
        role(
            "demo",
            "deploy",
            json!([{"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get", "update", "patch"]}]),
        ),
    )
    .await;
    rbac(&env, role_binding("demo", "deploy", "Role", "deploy", "op")).await;
    let deployments: Api<Deployment> = Api::namespaced(
        env.service_account_client("demo", "op")
            .await
            .expect("client"),
        "demo",
    );
    let current = deployments.get("web").await.expect("get");
    let mut status = current.clone();
    status.status = Some(from(json!({"replicas": 1})));
    let err = api_error(
        deployments
            .replace_status("web", &PostParams::default(), &status)
            .await
            .expect_err("forbidden"),
    );
    assert_eq!(
        err.message,
        r#"deployments.apps "web" is forbidden: User "system:serviceaccount:demo:op" cannot update resource "deployments/status" in API group "apps" in the namespace "demo""#
    );
    let details = err.details.expect("details");
    assert_eq!(
        (
            details.name.as_str(),
            details.group.as_str(),
            details.kind.as_str()
        ),
        ("web", "apps", "deployments")
    );
    rbac(
        &env,
        role(
            "demo",
            "deploy-status",
            json!([{"apiGroups": ["apps"], "resources": ["deployments/status"], "verbs": ["update"]}]),
        ),
    )
    .await;
    rbac(
        &env,
        role_binding("demo", "deploy-status", "Role", "deploy-status", "op"),
    )
    .await;
    let updated = deployments
        .replace_status("web", &PostParams::default(), &status)
        .await
        .expect("allowed now");
    assert_eq!(updated.status.and_then(|s| s.replicas), Some(1));
}

#[tokio::test]
async fn wildcards_cover_every_group_resource_and_verb() {
    let env = TestEnv::start().await.expect("start");
    account(&env, "demo", "op").await;
    rbac(
        &env,
        role(
            "demo",
            "all",
            json!([{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]),
        ),
    )
    .await;
    rbac(&env, role_binding("demo", "all", "Role", "all", "op")).await;
    let op = env
        .service_account_client("demo", "op")
        .await
        .expect("client");
    let cms: Api<ConfigMap> = Api::namespaced(op.clone(), "demo");
    cms.create(&PostParams::default(), &cm("a"))
        .await
        .expect("create");
    cms.delete("a", &DeleteParams::default())
        .await
        .expect("delete");
    Api::<Deployment>::namespaced(op.clone(), "demo")
        .list(&ListParams::default())
        .await
        .expect("apps too");
    // A Role never reaches cluster-scoped resources.
    let err = api_error(
        Api::<Namespace>::all(op)
            .list(&ListParams::default())
            .await
            .expect_err("cluster scope"),
    );
    assert_eq!(err.code, 403);
}

/// POSTs a JSON body and decodes the JSON answer (reviews, which have no typed client here).
async fn post_json(client: &kube::Client, path: &str, body: &Value) -> Result<Value, kube::Error> {
    client
        .request(
            http::Request::post(path)
                .header("content-type", "application/json")
                .body(serde_json::to_vec(body).expect("json"))
                .expect("request"),
        )
        .await
}

/// `kubectl auth whoami`: the caller's identity as the server sees it.
async fn whoami(client: &kube::Client) -> Result<Value, kube::Error> {
    let review = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"});
    post_json(
        client,
        "/apis/authentication.k8s.io/v1/selfsubjectreviews",
        &review,
    )
    .await
}

async fn raw_get(client: &kube::Client, path: &str) -> Result<String, kube::Error> {
    let req = http::Request::get(path).body(Vec::new()).expect("request");
    client.request_text(req).await
}

#[tokio::test]
async fn non_resource_urls_are_authorized_by_path() {
    let env = TestEnv::start().await.expect("start");
    account(&env, "demo", "op").await;
    let op = env
        .service_account_client("demo", "op")
        .await
        .expect("client");
    // system:discovery and system:public-info-viewer hold for every authenticated user.
    raw_get(&op, "/version").await.expect("version");
    raw_get(&op, "/apis").await.expect("discovery");
    let err = api_error(raw_get(&op, "/metrics").await.expect_err("forbidden"));
    assert_eq!(
        err.message,
        r#"forbidden: User "system:serviceaccount:demo:op" cannot get path "/metrics""#
    );
    rbac(
        &env,
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
               "metadata": {"name": "metrics"},
               "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]}),
    )
    .await;
    rbac(
        &env,
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
               "metadata": {"name": "metrics"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "metrics"},
               "subjects": [{"kind": "ServiceAccount", "name": "op", "namespace": "demo"}]}),
    )
    .await;
    // Allowed now: the server's metrics, in Prometheus' text format.
    let metrics = raw_get(&op, "/metrics").await.expect("allowed");
    assert!(metrics.contains("apiserver_request_total"), "{metrics}");
}

/// A client that talks in-process and adds `headers` to every request (as the admin, or with
/// `token`).
fn client_with_headers(
    env: &TestEnv,
    token: Option<&str>,
    headers: &[(&str, &str)],
) -> kube::Client {
    let mut map = http::HeaderMap::new();
    for (k, v) in headers {
        map.append(
            http::HeaderName::from_bytes(k.as_bytes()).expect("name"),
            http::HeaderValue::from_str(v).expect("value"),
        );
    }
    if let Some(t) = token {
        map.insert(
            http::header::AUTHORIZATION,
            http::HeaderValue::from_str(&format!("Bearer {t}")).expect("value"),
        );
    }
    let service = tower::ServiceExt::map_request(
        env.server().router(),
        move |mut req: http::Request<kube::client::Body>| {
            for (k, v) in &map {
                req.headers_mut().append(k, v.clone());
            }
            req
        },
    );
    kube::Client::new(service, "default")
}

#[tokio::test]
async fn the_admin_may_impersonate_and_a_service_account_may_not() {
    let env = TestEnv::start().await.expect("start");
    account(&env, "demo", "op").await;
    let as_op = client_with_headers(
        &env,
        None,
        &[("Impersonate-User", "system:serviceaccount:demo:op")],
    );
    let err = api_error(
        Api::<ConfigMap>::namespaced(as_op.clone(), "demo")
            .list(&ListParams::default())
            .await
            .expect_err("the impersonated SA has no binding"),
    );
    assert_eq!(
        err.message,
        r#"configmaps is forbidden: User "system:serviceaccount:demo:op" cannot list resource "configmaps" in API group "" in the namespace "demo""#
    );
    // The impersonated identity gets the SA groups, as `kubectl auth whoami --as` shows.
    let review: Value = whoami(&as_op).await.expect("whoami");
    assert_eq!(
        review["status"]["userInfo"],
        json!({"username": "system:serviceaccount:demo:op",
               "groups": ["system:serviceaccounts", "system:serviceaccounts:demo", "system:authenticated"]})
    );

    let token = env
        .service_account_token("demo", "op")
        .await
        .expect("token");
    let op_as_alice = client_with_headers(&env, Some(&token), &[("Impersonate-User", "alice")]);
    let err = api_error(
        Api::<ConfigMap>::namespaced(op_as_alice, "demo")
            .list(&ListParams::default())
            .await
            .expect_err("may not impersonate"),
    );
    assert_eq!(
        err.message,
        r#"users "alice" is forbidden: User "system:serviceaccount:demo:op" cannot impersonate resource "users" in API group "" at the cluster scope"#
    );
    // The `edit` ClusterRole lets a namespace's SAs be impersonated within it.
    rbac(
        &env,
        role_binding("demo", "op-edit", "ClusterRole", "edit", "op"),
    )
    .await;
    let op_as_op = client_with_headers(
        &env,
        Some(&token),
        &[("Impersonate-User", "system:serviceaccount:demo:op")],
    );
    Api::<ConfigMap>::namespaced(op_as_op, "demo")
        .list(&ListParams::default())
        .await
        .expect("allowed through edit");
}

#[tokio::test]
async fn a_token_of_a_deleted_or_recreated_service_account_is_rejected() {
    let env = TestEnv::start().await.expect("start");
    account(&env, "demo", "op").await;
    let token = env
        .service_account_token("demo", "op")
        .await
        .expect("token");
    let op = env.client_with_token(&token, "demo").expect("client");
    raw_get(&op, "/version").await.expect("valid token");
    let accounts: Api<ServiceAccount> = Api::namespaced(env.client(), "demo");
    accounts
        .delete("op", &DeleteParams::default())
        .await
        .expect("delete");
    assert_eq!(
        api_error(raw_get(&op, "/version").await.expect_err("deleted")).code,
        401
    );
    accounts
        .create(
            &PostParams::default(),
            &from(json!({"metadata": {"name": "op"}})),
        )
        .await
        .expect("recreate");
    let err = api_error(raw_get(&op, "/version").await.expect_err("recreated"));
    assert_eq!(
        (err.code, err.reason.as_str(), err.message.as_str()),
        (401, "Unauthorized", "Unauthorized")
    );
    // Garbage is rejected too, even in-process.
    let junk = env
        .client_with_token("not-a-token", "demo")
        .expect("client");
    assert_eq!(
        api_error(raw_get(&junk, "/version").await.expect_err("junk")).code,
        401
    );
}

fn claims_of(token: &str) -> Value {
    let payload = token.split('.').nth(1).expect("three parts");
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload)
        .expect("base64url");
    serde_json::from_slice(&bytes).expect("json claims")
}

#[tokio::test]
async fn token_requests_honour_audience_and_expiration() {
    let env = TestEnv::start().await.expect("start");
    account(&env, "demo", "op").await;
    let accounts: Api<ServiceAccount> = Api::namespaced(env.client(), "demo");
    let request = |audiences: Option<Vec<String>>, seconds: i64| TokenRequest {
        spec: TokenRequestSpec {
            audiences: audiences.unwrap_or_default(),
            expiration_seconds: Some(seconds),
            ..Default::default()
        },
        ..Default::default()
    };
    let answer = accounts
        .create_token_request("op", &PostParams::default(), &request(None, 600))
        .await
        .expect("token");
    assert_eq!(
        answer.spec.audiences,
        vec!["https://kubernetes.default.svc.cluster.local".to_string()]
    );
    let status = answer.status.expect("status");
    let claims = claims_of(&status.token);
    assert_eq!(
        claims["exp"].as_i64().expect("exp") - claims["iat"].as_i64().expect("iat"),
        600
    );
    assert_eq!(claims["sub"], "system:serviceaccount:demo:op");
    let uid = accounts
        .get("op")
        .await
        .expect("sa")
        .metadata
        .uid
        .expect("uid");
    assert_eq!(
        claims["kubernetes.io"]["serviceaccount"],
        json!({"name": "op", "uid": uid})
    );
    assert_eq!(
        status.expiration_timestamp.0.as_second(),
        claims["exp"].as_i64().expect("exp")
    );

    let vault = accounts
        .create_token_request(
            "op",
            &PostParams::default(),
            &request(Some(vec!["vault".into()]), 3600),
        )
        .await
        .expect("token for vault");
    let client = env
        .client_with_token(&vault.status.expect("status").token, "demo")
        .expect("client");
    assert_eq!(
        api_error(raw_get(&client, "/version").await.expect_err("audience")).code,
        401
    );

    let err = api_error(
        accounts
            .create_token_request("op", &PostParams::default(), &request(None, 90))
            .await
            .expect_err("too short"),
    );
    assert_eq!(
        err.message,
        r#"TokenRequest.authentication.k8s.io "" is invalid: spec.expirationSeconds: Invalid value: 90: may not specify a duration less than 10 minutes"#
    );
    let err = api_error(
        accounts
            .create_token_request("nobody", &PostParams::default(), &request(None, 3600))
            .await
            .expect_err("no such account"),
    );
    assert_eq!(
        (err.code, err.message.as_str()),
        (404, r#"serviceaccounts "nobody" not found"#)
    );
}

fn ssar(ns: &str, verb: &str, resource: &str) -> SelfSubjectAccessReview {
    SelfSubjectAccessReview {
        spec: SelfSubjectAccessReviewSpec {
            resource_attributes: Some(ResourceAttributes {
                namespace: Some(ns.into()),
                verb: Some(verb.into()),
                resource: Some(resource.into()),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    }
}

#[tokio::test]
async fn self_subject_access_reviews_answer_with_the_allowing_binding() {
    let env = TestEnv::start().await.expect("start");
    account(&env, "demo", "op").await;
    rbac(
        &env,
        role(
            "demo",
            "r",
            json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create"]}]),
        ),
    )
    .await;
    rbac(&env, role_binding("demo", "b", "Role", "r", "op")).await;
    rbac(
        &env,
        role_binding("demo", "dangling", "ClusterRole", "missing", "op"),
    )
    .await;
    let op = env
        .service_account_client("demo", "op")
        .await
        .expect("client");
    let reviews: Api<SelfSubjectAccessReview> = Api::all(op.clone());
    let allowed = reviews
        .create(
            &PostParams::default(),
            &ssar("demo", "create", "configmaps"),
        )
        .await
        .expect("review")
        .status
        .expect("status");
    assert!(allowed.allowed);
    assert_eq!(
        allowed.reason.as_deref(),
        Some(r#"RBAC: allowed by RoleBinding "b/demo" of Role "r" to ServiceAccount "op/demo""#)
    );
    let denied = reviews
        .create(
            &PostParams::default(),
            &ssar("demo", "delete", "configmaps"),
        )
        .await
        .expect("review")
        .status
        .expect("status");
    assert!(!denied.allowed);
    assert_eq!(
        denied.reason.as_deref(),
        Some(r#"RBAC: clusterrole.rbac.authorization.k8s.io "missing" not found"#)
    );
    // The missing role also shows in a real denial.
    let err = api_error(
        Api::<ConfigMap>::namespaced(op.clone(), "demo")
            .list(&ListParams::default())
            .await
            .expect_err("forbidden"),
    );
    assert!(
        err.message
            .ends_with(r#": RBAC: clusterrole.rbac.authorization.k8s.io "missing" not found"#),
        "{}",
        err.message
    );

    let admin = Api::<SelfSubjectAccessReview>::all(env.client())
        .create(
            &PostParams::default(),
            &ssar("demo", "delete", "configmaps"),
        )
        .await
        .expect("review")
        .status
        .expect("status");
    assert!(admin.allowed);
    assert_eq!(
        admin.reason, None,
        "system:masters answers without a reason"
    );

    let rules = Api::<SelfSubjectRulesReview>::all(op)
        .create(
            &PostParams::default(),
            &SelfSubjectRulesReview {
                spec: SelfSubjectRulesReviewSpec {
                    namespace: Some("demo".into()),
                },
                ..Default::default()
            },
        )
        .await
        .expect("rules review")
        .status
        .expect("status");
    assert!(rules.resource_rules.iter().any(|r| r.resources.as_deref()
        == Some(&["configmaps".to_string()][..])
        && r.verbs == vec!["create".to_string()]));
    assert!(rules.non_resource_rules.iter().any(|r| {
        r.non_resource_urls
            .as_deref()
            .is_some_and(|u| u.contains(&"/version".to_string()))
    }));
    assert_eq!(
        rules.evaluation_error.as_deref(),
        Some(r#"clusterrole.rbac.authorization.k8s.io "missing" not found"#)
    );
}

#[tokio::test]
async fn a_role_binding_can_grant_reading_its_own_namespace_object() {
    let env = TestEnv::start().await.expect("start");
    account(&env, "demo", "op").await;
    account(&env, "other", "x").await;
    rbac(
        &env,
        role(
            "demo",
            "ns",
            json!([{"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get"]}]),
        ),
    )
    .await;
    rbac(&env, role_binding("demo", "ns", "Role", "ns", "op")).await;
    let namespaces: Api<Namespace> = Api::all(
        env.service_account_client("demo", "op")
            .await
            .expect("client"),
    );
    namespaces.get("demo").await.expect("its own namespace");
    let err = api_error(namespaces.get("other").await.expect_err("another"));
    assert_eq!(
        err.message,
        r#"namespaces "other" is forbidden: User "system:serviceaccount:demo:op" cannot get resource "namespaces" in API group "" in the namespace "other""#
    );
}

#[tokio::test]
async fn a_service_account_client_works_over_https_too() {
    let env = TestEnv::builder().tcp().start().await.expect("start");
    account(&env, "demo", "op").await;
    rbac(
        &env,
        role(
            "demo",
            "r",
            json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list"]}]),
        ),
    )
    .await;
    let client = env
        .service_account_socket_client("demo", "op")
        .await
        .expect("client");
    let cms: Api<ConfigMap> = Api::default_namespaced(client);
    assert_eq!(
        api_error(
            cms.list(&ListParams::default())
                .await
                .expect_err("no binding")
        )
        .code,
        403
    );
    rbac(&env, role_binding("demo", "b", "Role", "r", "op")).await;
    cms.list(&ListParams::default()).await.expect("bound");
    // A wrong token over TLS is a 401.
    let junk = env
        .socket_client_with_token("junk", "demo")
        .await
        .expect("client");
    let junk: Api<ConfigMap> = Api::default_namespaced(junk);
    assert_eq!(
        api_error(junk.list(&ListParams::default()).await.expect_err("401")).code,
        401
    );
}

#[tokio::test]
async fn writing_roles_and_bindings_cannot_grant_more_than_the_writer_holds() {
    let env = TestEnv::start().await.expect("start");
    account(&env, "demo", "op").await;
    rbac(
        &env,
        role(
            "demo",
            "rbac-writer",
            json!([
                {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles", "rolebindings"], "verbs": ["create", "update"]},
                {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}
            ]),
        ),
    )
    .await;
    rbac(
        &env,
        role_binding("demo", "rbac-writer", "Role", "rbac-writer", "op"),
    )
    .await;
    let op = env
        .service_account_client("demo", "op")
        .await
        .expect("client");
    let ar = |kind: &str, plural: &str| kube::api::ApiResource {
        group: "rbac.authorization.k8s.io".into(),
        version: "v1".into(),
        api_version: "rbac.authorization.k8s.io/v1".into(),
        kind: kind.into(),
        plural: plural.into(),
    };
    let roles: Api<kube::api::DynamicObject> =
        Api::namespaced_with(op.clone(), "demo", &ar("Role", "roles"));
    let bindings: Api<kube::api::DynamicObject> =
        Api::namespaced_with(op.clone(), "demo", &ar("RoleBinding", "rolebindings"));

    // Held permissions may be passed on.
    roles
        .create(
            &PostParams::default(),
            &from(role(
                "demo",
                "cm-read",
                json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list"]}]),
            )),
        )
        .await
        .expect("a role within the writer's permissions");
    // Others may not.
    let err = api_error(
        roles
            .create(
                &PostParams::default(),
                &from(role(
                    "demo",
                    "pod-killer",
                    json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["delete", "get"]}]),
                )),
            )
            .await
            .expect_err("escalation"),
    );
    assert_eq!(err.code, 403);
    assert_eq!(
        err.message,
        "roles.rbac.authorization.k8s.io \"pod-killer\" is forbidden: user \"system:serviceaccount:demo:op\" (groups=[\"system:serviceaccounts\" \"system:serviceaccounts:demo\" \"system:authenticated\"]) is attempting to grant RBAC permissions not currently held:\n{APIGroups:[\"\"], Resources:[\"pods\"], Verbs:[\"delete\" \"get\"]}"
    );
    // Binding a role whose permissions the writer holds is fine; cluster-admin is not.
    bindings
        .create(
            &PostParams::default(),
            &from(role_binding("demo", "ok", "Role", "cm-read", "op")),
        )
        .await
        .expect("bind a held role");
    let err = api_error(
        bindings
            .create(
                &PostParams::default(),
                &from(role_binding(
                    "demo",
                    "root",
                    "ClusterRole",
                    "cluster-admin",
                    "op",
                )),
            )
            .await
            .expect_err("escalation through a binding"),
    );
    assert_eq!(err.code, 403);
    assert!(err.message.starts_with(r#"rolebindings.rbac.authorization.k8s.io "root" is forbidden: user "system:serviceaccount:demo:op""#), "{}", err.message);
    // With `bind` on that ClusterRole, the binding is allowed.
    rbac(
        &env,
        role(
            "demo",
            "may-bind",
            json!([{"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterroles"], "verbs": ["bind"], "resourceNames": ["view"]}]),
        ),
    )
    .await;
    rbac(
        &env,
        role_binding("demo", "may-bind", "Role", "may-bind", "op"),
    )
    .await;
    bindings
        .create(
            &PostParams::default(),
            &from(role_binding("demo", "viewer", "ClusterRole", "view", "op")),
        )
        .await
        .expect("bind is granted");
}

#[tokio::test]
async fn invalid_rules_and_bindings_are_rejected() {
    let env = TestEnv::start().await.expect("start");
    account(&env, "demo", "op").await;
    let ar = |kind: &str, plural: &str| kube::api::ApiResource {
        group: "rbac.authorization.k8s.io".into(),
        version: "v1".into(),
        api_version: "rbac.authorization.k8s.io/v1".into(),
        kind: kind.into(),
        plural: plural.into(),
    };
    let roles: Api<kube::api::DynamicObject> =
        Api::namespaced_with(env.client(), "demo", &ar("Role", "roles"));
    let err = api_error(
        roles
            .create(
                &PostParams::default(),
                &from(role(
                    "demo",
                    "r",
                    json!([{"apiGroups": [""], "resources": ["pods"]}]),
                )),
            )
            .await
            .expect_err("no verbs"),
    );
    assert_eq!(
        (err.code, err.message.as_str()),
        (
            422,
            r#"Role.rbac.authorization.k8s.io "r" is invalid: rules[0].verbs: Required value: verbs must contain at least one value"#
        )
    );
    let err = api_error(
        roles
            .create(
                &PostParams::default(),
                &from(role(
                    "demo",
                    "r",
                    json!([{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]),
                )),
            )
            .await
            .expect_err("URLs in a Role"),
    );
    assert_eq!(err.code, 422);
    assert!(
        err.message
            .ends_with("namespaced rules cannot apply to non-resource URLs"),
        "{}",
        err.message
    );
    let crbs: Api<kube::api::DynamicObject> = Api::all_with(
        env.client(),
        &ar("ClusterRoleBinding", "clusterrolebindings"),
    );
    let err = api_error(
        crbs.create(
            &PostParams::default(),
            &from(json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                   "metadata": {"name": "b"},
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
                   "subjects": [{"kind": "ServiceAccount", "name": "op"}]})),
        )
        .await
        .expect_err("SA without namespace"),
    );
    assert_eq!(
        (err.code, err.message.as_str()),
        (
            422,
            r#"ClusterRoleBinding.rbac.authorization.k8s.io "b" is invalid: subjects[0].namespace: Required value"#
        )
    );
}

#[tokio::test]
async fn an_update_that_creates_needs_the_create_verb_too() {
    let env = TestEnv::start().await.expect("start");
    account(&env, "demo", "op").await;
    rbac(
        &env,
        role("demo", "lease", json!([{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "update"]}])),
    )
    .await;
    rbac(&env, role_binding("demo", "lease", "Role", "lease", "op")).await;
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> = Api::namespaced(
        env.service_account_client("demo", "op")
            .await
            .expect("client"),
        "demo",
    );
    let err = api_error(
        leases
            .replace(
                "l",
                &PostParams::default(),
                &from(json!({"metadata": {"name": "l"}})),
            )
            .await
            .expect_err("creating through PUT"),
    );
    assert_eq!(
        err.message,
        r#"leases.coordination.k8s.io "l" is forbidden: User "system:serviceaccount:demo:op" cannot create resource "leases" in API group "coordination.k8s.io" in the namespace "demo""#
    );
}

#[tokio::test]
async fn every_namespace_gets_a_default_service_account_that_comes_back_when_deleted() {
    let env = TestEnv::start().await.expect("start");
    let namespaces: Api<Namespace> = Api::all(env.client());
    namespaces
        .create(
            &PostParams::default(),
            &from(json!({"metadata": {"name": "fresh"}})),
        )
        .await
        .expect("create namespace");
    let accounts: Api<ServiceAccount> = Api::namespaced(env.client(), "fresh");
    let first = kore_testenv::wait_for(std::time::Duration::from_secs(5), || async {
        accounts.get("default").await.ok()
    })
    .await
    .expect("created for the new namespace");
    Api::<ServiceAccount>::namespaced(env.client(), "default")
        .get("default")
        .await
        .expect("startup namespaces have one too");
    accounts
        .delete("default", &DeleteParams::default())
        .await
        .expect("delete");
    let second = kore_testenv::wait_for(std::time::Duration::from_secs(5), || async {
        accounts
            .get("default")
            .await
            .ok()
            .filter(|sa| sa.metadata.uid != first.metadata.uid)
    })
    .await
    .expect("recreated");
    assert_ne!(second.metadata.uid, first.metadata.uid);
    // `kubectl create token default` works right away.
    env.service_account_token("fresh", "default")
        .await
        .expect("token");
}

#[tokio::test]
async fn impersonating_groups_without_a_user_is_a_server_error() {
    let env = TestEnv::start().await.expect("start");
    let client = client_with_headers(&env, None, &[("Impersonate-Group", "devs")]);
    let req = http::Request::get("/api/v1/namespaces/default/configmaps")
        .body(Vec::new())
        .expect("request");
    let err = client.request_text(req).await.expect_err("500");
    let text = format!("{err:?}");
    assert!(text.contains("500") || text.contains("Internal"), "{text}");
}

#[tokio::test]
async fn impersonating_a_user_and_groups_yields_exactly_that_identity() {
    let env = TestEnv::start().await.expect("start");
    let client = client_with_headers(
        &env,
        None,
        &[
            ("Impersonate-User", "alice"),
            ("Impersonate-Group", "devs"),
            ("Impersonate-Group", "qa"),
            ("Impersonate-Uid", "u-123"),
            ("Impersonate-Extra-Scopes.example.com%2fx", "a"),
        ],
    );
    let review: Value = whoami(&client).await.expect("whoami");
    assert_eq!(
        review["status"]["userInfo"],
        json!({"username": "alice", "uid": "u-123",
               "groups": ["devs", "qa", "system:authenticated"],
               "extra": {"scopes.example.com/x": ["a"]}})
    );
}

#[tokio::test]
async fn discovery_lists_the_token_subresource_and_the_review_kinds() {
    let env = TestEnv::start().await.expect("start");
    let core: Value = serde_json::from_str(&raw_get(&env.client(), "/api/v1").await.expect("core"))
        .expect("json");
    let token = core["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .find(|r| r["name"] == "serviceaccounts/token")
        .expect("serviceaccounts/token listed");
    assert_eq!(
        token,
        &json!({"name": "serviceaccounts/token", "singularName": "", "namespaced": true,
                "group": "authentication.k8s.io", "version": "v1", "kind": "TokenRequest",
                "verbs": ["create"]})
    );
    let authz: Value = serde_json::from_str(
        &raw_get(&env.client(), "/apis/authorization.k8s.io/v1")
            .await
            .expect("authorization group"),
    )
    .expect("json");
    let names: Vec<&str> = authz["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .filter_map(|r| r["name"].as_str())
        .collect();
    for wanted in [
        "selfsubjectaccessreviews",
        "selfsubjectrulesreviews",
        "subjectaccessreviews",
    ] {
        assert!(names.contains(&wanted), "{wanted} in {names:?}");
    }
    let authn: Value = serde_json::from_str(
        &raw_get(&env.client(), "/apis/authentication.k8s.io/v1")
            .await
            .expect("authentication group"),
    )
    .expect("json");
    let ssr = authn["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .find(|r| r["name"] == "selfsubjectreviews")
        .expect("selfsubjectreviews listed");
    assert_eq!(ssr["verbs"], json!(["create"]));
    assert_eq!(ssr["namespaced"], json!(false));
}

#[tokio::test]
async fn a_cluster_role_labelled_aggregate_to_edit_extends_edit() {
    let env = TestEnv::start().await.expect("start");
    account(&env, "demo", "op").await;
    rbac(
        &env,
        role_binding("demo", "op-edit", "ClusterRole", "edit", "op"),
    )
    .await;
    let op = env
        .service_account_client("demo", "op")
        .await
        .expect("client");
    let reviews: Api<SelfSubjectAccessReview> = Api::all(op);
    let can = |verb: &'static str, resource: &'static str, group: &'static str| {
        let reviews = reviews.clone();
        async move {
            let mut review = ssar("demo", verb, resource);
            if let Some(attrs) = review.spec.resource_attributes.as_mut() {
                attrs.group = Some(group.into());
            }
            reviews
                .create(&PostParams::default(), &review)
                .await
                .expect("review")
                .status
                .expect("status")
                .allowed
        }
    };
    assert!(can("create", "configmaps", "").await, "edit as shipped");
    assert!(!can("create", "widgets", "example.com").await);
    rbac(
        &env,
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
               "metadata": {"name": "widgets-edit",
                            "labels": {"rbac.authorization.k8s.io/aggregate-to-edit": "true"}},
               "rules": [{"apiGroups": ["example.com"], "resources": ["widgets"], "verbs": ["create", "get"]}]}),
    )
    .await;
    kore_testenv::wait_for(std::time::Duration::from_secs(5), || async {
        can("create", "widgets", "example.com").await.then_some(())
    })
    .await
    .expect("edit aggregates the new role");
    assert!(
        can("create", "configmaps", "").await,
        "edit keeps its own rules"
    );
}

#[tokio::test]
async fn a_token_bound_to_a_pod_dies_with_the_pod() {
    let env = TestEnv::start().await.expect("start");
    account(&env, "demo", "op").await;
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(env.client(), "demo");
    let pod = pods
        .create(
            &PostParams::default(),
            &from(json!({"metadata": {"name": "p1"},
                         "spec": {"serviceAccountName": "op", "containers": [{"name": "c", "image": "nginx"}]}})),
        )
        .await
        .expect("pod");
    let accounts: Api<ServiceAccount> = Api::namespaced(env.client(), "demo");
    let bound = |uid: &str| TokenRequest {
        spec: TokenRequestSpec {
            bound_object_ref: Some(from(
                json!({"kind": "Pod", "apiVersion": "v1", "name": "p1", "uid": uid}),
            )),
            ..Default::default()
        },
        ..Default::default()
    };
    let err = api_error(
        accounts
            .create_token_request("op", &PostParams::default(), &bound("not-the-uid"))
            .await
            .expect_err("uid mismatch"),
    );
    assert_eq!(err.code, 409);
    let uid = pod.metadata.uid.expect("uid");
    let answer = accounts
        .create_token_request("op", &PostParams::default(), &bound(&uid))
        .await
        .expect("bound token");
    let token = answer.status.expect("status").token;
    assert_eq!(
        claims_of(&token)["kubernetes.io"]["pod"],
        json!({"name": "p1", "uid": uid})
    );
    let client = env.client_with_token(&token, "demo").expect("client");
    raw_get(&client, "/version")
        .await
        .expect("valid while the pod lives");
    pods.delete("p1", &DeleteParams::default())
        .await
        .expect("delete pod");
    assert_eq!(
        api_error(raw_get(&client, "/version").await.expect_err("pod gone")).code,
        401
    );

    let err = api_error(
        accounts
            .create_token_request(
                "op",
                &PostParams::default(),
                &TokenRequest {
                    spec: TokenRequestSpec {
                        bound_object_ref: Some(from(
                            json!({"kind": "ConfigMap", "apiVersion": "v1", "name": "x"}),
                        )),
                        ..Default::default()
                    },
                    ..Default::default()
                },
            )
            .await
            .expect_err("not bindable"),
    );
    assert_eq!(
        (err.code, err.message.as_str()),
        (
            400,
            "cannot bind token to object of type /v1, Kind=ConfigMap"
        )
    );
}

#[tokio::test]
async fn token_reviews_and_subject_access_reviews_answer_for_others() {
    let env = TestEnv::start().await.expect("start");
    account(&env, "demo", "op").await;
    let token = env
        .service_account_token("demo", "op")
        .await
        .expect("token");
    let client = env.client();
    let post = |path: &'static str, body: Value| {
        let client = client.clone();
        async move { post_json(&client, path, &body).await.expect("review") }
    };
    let review = post(
        "/apis/authentication.k8s.io/v1/tokenreviews",
        json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}}),
    )
    .await;
    assert_eq!(review["status"]["authenticated"], true);
    assert_eq!(
        review["status"]["user"]["username"],
        "system:serviceaccount:demo:op"
    );
    let review = post(
        "/apis/authentication.k8s.io/v1/tokenreviews",
        json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": "junk"}}),
    )
    .await;
    assert_eq!(review["status"]["authenticated"], Value::Null);
    assert_eq!(review["status"]["user"], json!({}));

    rbac(
        &env,
        role_binding("demo", "view", "ClusterRole", "view", "op"),
    )
    .await;
    let sar = |verb: &str| {
        json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
               "spec": {"user": "system:serviceaccount:demo:op",
                        "groups": ["system:serviceaccounts", "system:serviceaccounts:demo", "system:authenticated"],
                        "resourceAttributes": {"namespace": "demo", "verb": verb, "resource": "pods"}}})
    };
    let allowed = post(
        "/apis/authorization.k8s.io/v1/subjectaccessreviews",
        sar("list"),
    )
    .await;
    assert_eq!(allowed["status"]["allowed"], true);
    assert_eq!(
        allowed["status"]["reason"],
        r#"RBAC: allowed by RoleBinding "view/demo" of ClusterRole "view" to ServiceAccount "op/demo""#
    );
    let denied = post(
        "/apis/authorization.k8s.io/v1/subjectaccessreviews",
        sar("delete"),
    )
    .await;
    assert_eq!(denied["status"]["allowed"], false);
    // Non-resource attributes: discovery is open to every authenticated user.
    let open = post(
        "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
        json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
               "spec": {"nonResourceAttributes": {"path": "/apis", "verb": "get"}}}),
    )
    .await;
    assert_eq!(open["status"], json!({"allowed": true}));
}

#[tokio::test]
async fn tokens_stay_valid_across_a_restart_with_the_same_data_directory() {
    let dir = tempfile::tempdir().expect("tempdir");
    let env = TestEnv::builder()
        .data_dir(dir.path())
        .start()
        .await
        .expect("start");
    account(&env, "demo", "op").await;
    let token = env
        .service_account_token("demo", "op")
        .await
        .expect("token");
    env.stop().await;

    // The old server's last handles (the client's buffer task) go away asynchronously, and
    // with them the data directory's lock.
    let env = kore_testenv::wait_for(std::time::Duration::from_secs(5), || async {
        TestEnv::builder().data_dir(dir.path()).start().await.ok()
    })
    .await
    .expect("restart");
    let client = env.client_with_token(&token, "demo").expect("client");
    let who: Value = whoami(&client)
        .await
        .expect("the token still authenticates");
    assert_eq!(
        who["status"]["userInfo"]["username"],
        "system:serviceaccount:demo:op"
    );
}

#[tokio::test]
async fn a_patch_cannot_add_permissions_the_writer_lacks() {
    let env = TestEnv::start().await.expect("start");
    account(&env, "demo", "op").await;
    rbac(
        &env,
        role(
            "demo",
            "rbac-patcher",
            json!([
                {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles"], "verbs": ["get", "patch"]},
                {"apiGroups": [""], "resources": ["configmaps", "secrets"], "verbs": ["get"]}
            ]),
        ),
    )
    .await;
    rbac(
        &env,
        role_binding("demo", "rbac-patcher", "Role", "rbac-patcher", "op"),
    )
    .await;
    rbac(
        &env,
        role(
            "demo",
            "target",
            json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]),
        ),
    )
    .await;
    let ar = kube::api::ApiResource {
        group: "rbac.authorization.k8s.io".into(),
        version: "v1".into(),
        api_version: "rbac.authorization.k8s.io/v1".into(),
        kind: "Role".into(),
        plural: "roles".into(),
    };
    let roles: Api<kube::api::DynamicObject> = Api::namespaced_with(
        env.service_account_client("demo", "op")
            .await
            .expect("client"),
        "demo",
        &ar,
    );
    let patch = |rules: Value| kube::api::Patch::Merge(json!({"rules": rules}));
    roles
        .patch(
            "target",
            &kube::api::PatchParams::default(),
            &patch(json!([{"apiGroups": [""], "resources": ["configmaps", "secrets"], "verbs": ["get"]}])),
        )
        .await
        .expect("held permissions");
    let err = api_error(
        roles
            .patch(
                "target",
                &kube::api::PatchParams::default(),
                &patch(json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["delete"]}])),
            )
            .await
            .expect_err("escalation"),
    );
    assert_eq!(err.code, 403);
    assert!(
        err.message
            .ends_with(r#"{APIGroups:[""], Resources:["pods"], Verbs:["delete"]}"#),
        "{}",
        err.message
    );
}

#[tokio::test]
async fn malformed_reviews_are_refused_with_kubernetes_messages() {
    let env = TestEnv::start().await.expect("start");
    let client = env.client();
    let err = api_error(
        post_json(
            &client,
            "/apis/authentication.k8s.io/v1/tokenreviews",
            &json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {}}),
        )
        .await
        .expect_err("no token"),
    );
    assert_eq!(
        (err.code, err.message.as_str()),
        (400, "token is required for TokenReview in authentication")
    );

    let err = api_error(
        post_json(
            &client,
            "/apis/authorization.k8s.io/v1/subjectaccessreviews",
            &json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": {}}),
        )
        .await
        .expect_err("no attributes, no subject"),
    );
    assert_eq!(err.code, 422, "{}", err.message);
    let causes: Vec<String> = err
        .details
        .expect("details")
        .causes
        .into_iter()
        .map(|c| c.field)
        .collect();
    assert_eq!(causes, ["spec.resourceAttributes", "spec.user"]);
}
