//! Bad input gets a clear Kubernetes `Status` with the right code and reason, and nothing is
//! stored.

use http::{Method, Request};
use http_body_util::BodyExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kore_testenv::TestEnv;
use kube::api::{Api, ListParams};
use serde_json::{Value, json};

struct Answer {
    code: u16,
    body: Value,
    warnings: Vec<String>,
}

async fn send(
    env: &TestEnv,
    method: Method,
    path: &str,
    content_type: &str,
    accept: &str,
    body: Vec<u8>,
) -> Answer {
    let req = Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", content_type)
        .header("accept", accept)
        .body(kube::client::Body::from(body))
        .expect("request");
    let resp = env.client().send(req).await.expect("response");
    let code = resp.status().as_u16();
    let warnings = resp
        .headers()
        .get_all("warning")
        .iter()
        .filter_map(|v| v.to_str().ok().map(String::from))
        .collect();
    let bytes = resp.into_body().collect().await.expect("body").to_bytes();
    let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    Answer {
        code,
        body,
        warnings,
    }
}

async fn post_json(env: &TestEnv, path: &str, body: Vec<u8>) -> Answer {
    send(
        env,
        Method::POST,
        path,
        "application/json",
        "application/json",
        body,
    )
    .await
}

const CMS: &str = "/api/v1/namespaces/default/configmaps";

fn assert_status(a: &Answer, code: u16, reason: &str) {
    assert_eq!(a.code, code, "{}", a.body);
    assert_eq!(a.body["kind"], "Status", "{}", a.body);
    assert_eq!(a.body["code"], code, "{}", a.body);
    assert_eq!(a.body["reason"], reason, "{}", a.body);
    assert!(
        a.body["message"].as_str().is_some_and(|m| !m.is_empty()),
        "{}",
        a.body
    );
}

/// The ConfigMaps stored in `default`, besides the `kube-root-ca.crt` every namespace has.
async fn stored(env: &TestEnv) -> Vec<String> {
    let cms: Api<ConfigMap> = Api::default_namespaced(env.client());
    cms.list(&ListParams::default())
        .await
        .expect("list")
        .items
        .into_iter()
        .filter_map(|c| c.metadata.name)
        .filter(|name| name != "kube-root-ca.crt")
        .collect()
}

#[tokio::test]
async fn malformed_json_is_a_bad_request() {
    let env = TestEnv::start().await.expect("start");
    let a = post_json(
        &env,
        CMS,
        br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"#.to_vec(),
    )
    .await;
    assert_status(&a, 400, "BadRequest");
    let a = post_json(&env, CMS, b"[1,2,3]".to_vec()).await;
    assert_status(&a, 400, "BadRequest");
    assert!(stored(&env).await.is_empty());
}

#[tokio::test]
async fn a_body_of_another_kind_or_version_is_rejected() {
    let env = TestEnv::start().await.expect("start");
    let a = post_json(
        &env,
        CMS,
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "x"}})
            .to_string()
            .into_bytes(),
    )
    .await;
    assert_status(&a, 400, "BadRequest");
    assert!(
        a.body["message"]
            .as_str()
            .unwrap_or_default()
            .contains("kind"),
        "{}",
        a.body
    );
    let a = post_json(
        &env,
        CMS,
        json!({"apiVersion": "apps/v1", "kind": "ConfigMap", "metadata": {"name": "x"}})
            .to_string()
            .into_bytes(),
    )
    .await;
    assert_status(&a, 400, "BadRequest");
    assert_eq!(
        a.body["message"],
        "the API version in the data (apps/v1) does not match the expected API version (v1)"
    );
    assert!(stored(&env).await.is_empty());
}

#[tokio::test]
async fn names_that_are_not_dns_1123_are_invalid_with_a_cause() {
    let env = TestEnv::start().await.expect("start");
    for name in ["Upper", "under_score", "-lead", &"a".repeat(254)] {
        let a = post_json(
            &env,
            CMS,
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}})
                .to_string()
                .into_bytes(),
        )
        .await;
        assert_status(&a, 422, "Invalid");
        assert_eq!(a.body["details"]["kind"], "ConfigMap");
        assert_eq!(
            a.body["details"]["causes"][0]["field"], "metadata.name",
            "{}",
            a.body
        );
        assert_eq!(
            a.body["details"]["causes"][0]["reason"],
            "FieldValueInvalid"
        );
    }
    let a = post_json(
        &env,
        CMS,
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}})
            .to_string()
            .into_bytes(),
    )
    .await;
    assert_status(&a, 422, "Invalid");
    assert_eq!(
        a.body["details"]["causes"][0]["reason"],
        "FieldValueRequired"
    );
    assert!(stored(&env).await.is_empty());
}

#[tokio::test]
async fn invalid_labels_and_data_keys_list_every_failing_field() {
    let env = TestEnv::start().await.expect("start");
    let body = json!({"apiVersion": "v1", "kind": "ConfigMap",
                      "metadata": {"name": "x", "labels": {"ok": "not ok!"}},
                      "data": {"bad key": "v"}});
    let a = post_json(&env, CMS, body.to_string().into_bytes()).await;
    assert_status(&a, 422, "Invalid");
    let fields: Vec<&str> = a.body["details"]["causes"]
        .as_array()
        .expect("causes")
        .iter()
        .filter_map(|c| c["field"].as_str())
        .collect();
    assert_eq!(fields, ["metadata.labels", "data[bad key]"], "{}", a.body);
    assert!(stored(&env).await.is_empty());
}

#[tokio::test]
async fn bodies_over_three_mebibytes_are_refused() {
    let env = TestEnv::start().await.expect("start");
    let big = "x".repeat(3 * 1024 * 1024 + 1);
    let a = post_json(&env, CMS, json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "big"}, "data": {"k": big}}).to_string().into_bytes()).await;
    assert_status(&a, 413, "RequestEntityTooLarge");
    assert!(stored(&env).await.is_empty());
}

#[tokio::test]
async fn unknown_fields_warn_by_default_and_fail_under_strict_validation() {
    let env = TestEnv::start().await.expect("start");
    let body = |name: &str| {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "spec": {"foo": 1}}).to_string().into_bytes()
    };
    let a = post_json(
        &env,
        &format!("{CMS}?fieldValidation=Strict"),
        body("strict"),
    )
    .await;
    assert_status(&a, 400, "BadRequest");
    assert_eq!(
        a.body["message"],
        "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: strict decoding error: unknown field \"spec\""
    );
    let a = post_json(&env, CMS, body("warned")).await;
    assert_eq!(a.code, 201);
    assert_eq!(a.warnings, ["299 - \"unknown field \\\"spec\\\"\""]);
    assert!(a.body.get("spec").is_none(), "the unknown field is dropped");
    assert_eq!(stored(&env).await, ["warned"]);
}

#[tokio::test]
async fn media_types_routes_and_verbs_are_checked() {
    let env = TestEnv::start().await.expect("start");
    let ok_body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}})
        .to_string()
        .into_bytes();
    let a = send(
        &env,
        Method::POST,
        CMS,
        "text/plain",
        "application/json",
        ok_body.clone(),
    )
    .await;
    assert_status(&a, 415, "UnsupportedMediaType");
    let a = send(
        &env,
        Method::POST,
        CMS,
        "application/json",
        "application/vnd.kubernetes.protobuf",
        ok_body.clone(),
    )
    .await;
    assert_status(&a, 406, "NotAcceptable");
    let a = send(
        &env,
        Method::GET,
        "/api/v1/namespaces/default/widgets",
        "application/json",
        "application/json",
        Vec::new(),
    )
    .await;
    assert_status(&a, 404, "NotFound");
    assert_eq!(
        a.body["message"],
        "the server could not find the requested resource"
    );
    let a = send(
        &env,
        Method::PUT,
        CMS,
        "application/json",
        "application/json",
        ok_body.clone(),
    )
    .await;
    assert_status(&a, 405, "MethodNotAllowed");
    let a = send(
        &env,
        Method::PATCH,
        &format!("{CMS}/x"),
        "application/apply-patch+cbor",
        "application/json",
        b"{}".to_vec(),
    )
    .await;
    assert_status(&a, 415, "UnsupportedMediaType");
    assert!(stored(&env).await.is_empty());
}

#[tokio::test]
async fn duplicates_name_mismatches_and_immutable_fields_are_refused() {
    let env = TestEnv::start().await.expect("start");
    let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "data": {"a": "1"}, "immutable": true});
    assert_eq!(
        post_json(&env, CMS, body.to_string().into_bytes())
            .await
            .code,
        201
    );
    let a = post_json(&env, CMS, body.to_string().into_bytes()).await;
    assert_status(&a, 409, "AlreadyExists");
    assert_eq!(a.body["message"], "configmaps \"x\" already exists");
    let renamed = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "y"}});
    let a = send(
        &env,
        Method::PUT,
        &format!("{CMS}/x"),
        "application/json",
        "application/json",
        renamed.to_string().into_bytes(),
    )
    .await;
    assert_status(&a, 400, "BadRequest");
    assert_eq!(
        a.body["message"],
        "the name of the object (y) does not match the name on the URL (x)"
    );
    let a = send(
        &env,
        Method::PATCH,
        &format!("{CMS}/x"),
        "application/merge-patch+json",
        "application/json",
        br#"{"data":{"a":"2"}}"#.to_vec(),
    )
    .await;
    assert_status(&a, 422, "Invalid");
    let a = send(
        &env,
        Method::PATCH,
        &format!("{CMS}/x"),
        "application/merge-patch+json",
        "application/json",
        br#"{"metadata":{"uid":"other"}}"#.to_vec(),
    )
    .await;
    // A patch carries no uid precondition (a PUT does): the changed uid fails validation.
    assert_status(&a, 422, "Invalid");
    let a = send(
        &env,
        Method::PATCH,
        &format!("{CMS}/x"),
        "application/merge-patch+json",
        "application/json",
        br#"{"metadata":{"name":"z"}}"#.to_vec(),
    )
    .await;
    assert_status(&a, 400, "BadRequest");
    let cms: Api<ConfigMap> = Api::default_namespaced(env.client());
    assert_eq!(
        cms.get("x").await.expect("get").data.expect("data")["a"],
        "1",
        "nothing changed"
    );
}

#[tokio::test]
async fn invalid_list_options_are_reported_as_list_options_errors() {
    let env = TestEnv::start().await.expect("start");
    let get = |q: &'static str| {
        let env = &env;
        async move {
            send(
                env,
                Method::GET,
                &format!("{CMS}?{q}"),
                "application/json",
                "application/json",
                Vec::new(),
            )
            .await
        }
    };
    let a = get("resourceVersionMatch=NotOlderThan").await;
    assert_status(&a, 422, "Invalid");
    assert_eq!(a.body["details"]["group"], "meta.k8s.io");
    let a = get("resourceVersion=abc").await;
    assert_status(&a, 400, "BadRequest");
    let a = get("continue=garbage!").await;
    assert_status(&a, 400, "BadRequest");
    let a = get("watch=true&sendInitialEvents=true").await;
    assert_status(&a, 422, "Invalid");
}
