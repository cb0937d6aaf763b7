//! core/v1 componentstatuses and bindings, and authorization.k8s.io/v1
//! localsubjectaccessreviews, against an in-process kore-apiserver.

use crate::common::{api_error, cell, raw, table};
use http::Method;
use k8s_openapi::api::authorization::v1::LocalSubjectAccessReview;
use k8s_openapi::api::core::v1::ComponentStatus;
use kore_testenv::TestEnv;
use kube::api::{Api, PostParams};
use serde_json::json;

#[tokio::test]
async fn componentstatuses_list_healthy_components_read_only() {
    let env = TestEnv::start().await.expect("start");
    let api: Api<ComponentStatus> = Api::all(env.client());
    let list = api.list(&Default::default()).await.expect("list");
    let names: Vec<String> = list
        .items
        .iter()
        .filter_map(|c| c.metadata.name.clone())
        .collect();
    for want in ["controller-manager", "etcd-0", "scheduler"] {
        assert!(names.iter().any(|n| n == want), "{names:?}");
    }
    let sched = api.get("scheduler").await.expect("get");
    let cond = &sched.conditions.expect("conditions")[0];
    assert_eq!(
        (cond.type_.as_str(), cond.status.as_str()),
        ("Healthy", "True")
    );
    let (columns, rows) = table(
        &env,
        "/api/v1/componentstatuses?fieldSelector=metadata.name=etcd-0",
    )
    .await;
    assert_eq!(columns, ["Name", "Status", "Message", "Error"]);
    assert_eq!(cell(&columns, &rows, "Status"), "Healthy");
    let (code, body) = raw(
        &env,
        Method::POST,
        "/api/v1/componentstatuses",
        "application/json",
        Some(json!({"apiVersion": "v1", "kind": "ComponentStatus", "metadata": {"name": "x"}})),
    )
    .await;
    assert_eq!(code, 405, "{body}");
    let (code, _) = raw(
        &env,
        Method::DELETE,
        "/api/v1/componentstatuses/scheduler",
        "application/json",
        None,
    )
    .await;
    assert_eq!(code, 405);
}

#[tokio::test]
async fn local_subject_access_reviews_answer_in_their_namespace() {
    let env = TestEnv::start().await.expect("start");
    let api: Api<LocalSubjectAccessReview> = Api::namespaced(env.client(), "default");
    let review = |ns: &str| -> LocalSubjectAccessReview {
        serde_json::from_value(json!({
            "metadata": {"namespace": "default"},
            "spec": {"user": "alice", "resourceAttributes":
                {"namespace": ns, "verb": "get", "resource": "pods"}}
        }))
        .expect("review")
    };
    let answer = api
        .create(&PostParams::default(), &review("default"))
        .await
        .expect("review");
    let status = answer.status.expect("status");
    assert!(!status.allowed);
    assert_eq!(answer.metadata.namespace.as_deref(), Some("default"));
    let err = api
        .create(&PostParams::default(), &review("other"))
        .await
        .expect_err("namespace mismatch");
    let status = api_error(err);
    assert_eq!(status.code, 422, "{status:?}");
    assert!(
        status.message.contains("must match metadata.namespace"),
        "{status:?}"
    );
    // Cluster-wide path: not served for this kind.
    let (code, _) = raw(
        &env,
        Method::POST,
        "/apis/authorization.k8s.io/v1/localsubjectaccessreviews",
        "application/json",
        Some(json!({"spec": {"user": "a"}})),
    )
    .await;
    assert_eq!(code, 404);
}

#[tokio::test]
async fn bindings_accept_only_create() {
    let env = TestEnv::start().await.expect("start");
    let (code, body) = raw(
        &env,
        Method::GET,
        "/api/v1/namespaces/default/bindings",
        "application/json",
        None,
    )
    .await;
    assert_eq!(code, 405, "{body}");
}
