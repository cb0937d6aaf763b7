//! Pods assigned to nodes: the `pods/binding` subresource and the `bindings` resource a
//! scheduler POSTs to, over the real API.

use k8s_openapi::api::core::v1::Pod;
use kore_testenv::TestEnv;
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::{Value, json};

fn pod(name: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]}
    }))
    .expect("valid pod")
}

fn binding(name: &str, node: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Binding",
        "metadata": {"name": name, "annotations": {"scheduled-by": "test"}},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node}
    })
}

async fn bind(pods: &Api<Pod>, name: &str, body: Value) -> Result<Value, kube::Error> {
    pods.create_subresource::<Value, Value>("binding", name, &PostParams::default(), &body)
        .await
}

fn scheduled(p: &Pod) -> Option<String> {
    p.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "PodScheduled")
        .map(|c| c.status.clone())
}

fn api_error(e: kube::Error) -> kube::core::Status {
    match e {
        kube::Error::Api(s) => *s,
        other => panic!("expected an API error, got {other:?}"),
    }
}

#[tokio::test]
async fn binding_assigns_the_pod_once() {
    let env = TestEnv::start().await.expect("start");
    let pods: Api<Pod> = Api::namespaced(env.client(), "default");
    pods.create(&PostParams::default(), &pod("p1"))
        .await
        .expect("create");

    let status: Value = bind(&pods, "p1", binding("p1", "n1")).await.expect("bind");
    assert_eq!(status["kind"], "Status");
    assert_eq!(status["status"], "Success");
    assert_eq!(status["code"], 201);

    let bound = pods.get("p1").await.expect("get");
    let spec = bound.spec.as_ref().expect("spec");
    assert_eq!(spec.node_name.as_deref(), Some("n1"));
    assert_eq!(scheduled(&bound).as_deref(), Some("True"));
    assert_eq!(
        bound
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get("scheduled-by"))
            .map(String::as_str),
        Some("test"),
        "the binding's annotations are copied onto the pod"
    );

    // Bound already: 409 with Kubernetes' message, the pod unchanged.
    let err = api_error(
        bind(&pods, "p1", binding("p1", "n2"))
            .await
            .expect_err("second binding"),
    );
    assert_eq!(err.code, 409);
    assert_eq!(
        err.message,
        r#"Operation cannot be fulfilled on pods/binding "p1": pod p1 is already assigned to node "n1""#
    );
    let still = pods.get("p1").await.expect("get");
    assert_eq!(still.spec.and_then(|s| s.node_name).as_deref(), Some("n1"));
}

#[tokio::test]
async fn bindings_resource_binds_by_body_name() {
    let env = TestEnv::start().await.expect("start");
    let client = env.client();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    pods.create(&PostParams::default(), &pod("p2"))
        .await
        .expect("create");
    let req = http::Request::post("/api/v1/namespaces/default/bindings")
        .header("content-type", "application/json")
        .body(serde_json::to_vec(&binding("p2", "n9")).expect("json"))
        .expect("request");
    let status: Value = client.request(req).await.expect("bind");
    assert_eq!(status["status"], "Success");
    let bound = pods.get("p2").await.expect("get");
    assert_eq!(bound.spec.and_then(|s| s.node_name).as_deref(), Some("n9"));
}

#[tokio::test]
async fn bad_bindings_are_refused_with_4xx() {
    let env = TestEnv::start().await.expect("start");
    let pods: Api<Pod> = Api::namespaced(env.client(), "default");
    pods.create(&PostParams::default(), &pod("p3"))
        .await
        .expect("create");

    // No target node: 422 naming the field.
    let body = json!({
        "apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p3"}, "target": {}
    });
    let err = api_error(bind(&pods, "p3", body).await.expect_err("no target"));
    assert_eq!(err.code, 422);
    assert!(
        err.message.contains("target.name: Required value"),
        "{}",
        err.message
    );

    // A target that is not a Node.
    let body = json!({
        "apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p3"},
        "target": {"kind": "Pod", "name": "x"}
    });
    let err = api_error(bind(&pods, "p3", body).await.expect_err("not a node"));
    assert_eq!(err.code, 422);
    assert!(
        err.message.contains("target.kind: Unsupported value"),
        "{}",
        err.message
    );

    // The name in the URL and in the body differ: 400.
    let err = api_error(
        bind(&pods, "p3", binding("other", "n1"))
            .await
            .expect_err("name mismatch"),
    );
    assert_eq!(err.code, 400);
    assert_eq!(
        err.message,
        "name in URL does not match name in Binding object"
    );

    // No such pod: 404.
    let err = api_error(
        bind(&pods, "ghost", binding("ghost", "n1"))
            .await
            .expect_err("no pod"),
    );
    assert_eq!(err.code, 404);

    // None of it touched the pod.
    let p = pods.get("p3").await.expect("get");
    assert_eq!(p.spec.and_then(|s| s.node_name), None);
}

#[tokio::test]
async fn testenv_starts_nodes() {
    let env = TestEnv::start().await.expect("start");
    let set = env.start_nodes(3).await.expect("nodes");
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(env.client());
    let names: Vec<String> = nodes
        .list(&Default::default())
        .await
        .expect("list")
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect();
    assert_eq!(names, set.names());
}

#[tokio::test]
async fn a_pod_being_deleted_cannot_be_bound() {
    let env = TestEnv::start().await.expect("start");
    let pods: Api<Pod> = Api::namespaced(env.client(), "default");
    let mut p = pod("p4");
    p.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    pods.create(&PostParams::default(), &p)
        .await
        .expect("create");
    pods.delete("p4", &DeleteParams::default())
        .await
        .expect("delete");
    let err = api_error(
        bind(&pods, "p4", binding("p4", "n1"))
            .await
            .expect_err("deleting"),
    );
    assert_eq!(err.code, 409);
    assert_eq!(
        err.message,
        r#"Operation cannot be fulfilled on pods/binding "p4": pod p4 is being deleted, cannot be assigned to a host"#
    );
}
