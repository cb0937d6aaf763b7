//! `/openapi/v3` and `/openapi/v2`: the built-in kinds' full schemas with the merge extensions
//! kubectl computes strategic merge patches from, custom resources' schemas, and Kubernetes'
//! caching (ETag, 304, the v3 `?hash=` redirect).

use std::time::Duration;

use http::{Method, Request, Response};
use http_body_util::BodyExt;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kore_testenv::TestEnv;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(10);

/// The protobuf encoding client-go's discovery client asks `/openapi/v2` for.
const V2_PROTOBUF: &str = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf";

/// Sends a GET with extra headers; returns the response head and the body parsed as JSON.
async fn get(env: &TestEnv, path: &str, headers: &[(&str, &str)]) -> (Response<()>, Value) {
    let (resp, bytes) = get_bytes(env, path, headers).await;
    (resp, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

/// Sends a GET with extra headers; returns the response head and the body.
async fn get_bytes(env: &TestEnv, path: &str, headers: &[(&str, &str)]) -> (Response<()>, Vec<u8>) {
    let mut req = Request::builder().method(Method::GET).uri(path);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let req = req.body(kube::client::Body::empty()).expect("request");
    let resp = env.client().send(req).await.expect("response");
    let (parts, body) = resp.into_parts();
    let bytes = body.collect().await.expect("body").to_bytes();
    (Response::from_parts(parts, ()), bytes.to_vec())
}

fn header<'a>(resp: &'a Response<()>, name: &str) -> &'a str {
    resp.headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
}

/// The `serverRelativeURL` of one group version in the v3 index.
async fn v3_url(env: &TestEnv, gv: &str) -> String {
    let (resp, index) = get(env, "/openapi/v3", &[]).await;
    assert_eq!(resp.status(), 200, "{index}");
    index["paths"][gv]["serverRelativeURL"]
        .as_str()
        .unwrap_or_else(|| panic!("{gv} is in the index: {index}"))
        .to_string()
}

#[tokio::test]
async fn v3_documents_carry_the_builtin_kinds_full_schemas() {
    let env = TestEnv::start().await.expect("start");
    let url = v3_url(&env, "apis/apps/v1").await;
    let (resp, doc) = get(&env, &url, &[]).await;
    assert_eq!(resp.status(), 200);
    let schemas = &doc["components"]["schemas"];

    let deploy = &schemas["io.k8s.api.apps.v1.Deployment"];
    assert_eq!(
        deploy["x-kubernetes-group-version-kind"],
        json!([{"group": "apps", "kind": "Deployment", "version": "v1"}])
    );
    assert_eq!(
        deploy["properties"]["spec"]["allOf"][0]["$ref"],
        "#/components/schemas/io.k8s.api.apps.v1.DeploymentSpec"
    );
    let spec = &schemas["io.k8s.api.apps.v1.DeploymentSpec"];
    assert_eq!(spec["required"], json!(["selector", "template"]));
    assert!(
        spec["properties"]["replicas"]["description"]
            .as_str()
            .is_some_and(|d| d.contains("Number of desired pods")),
        "{spec}"
    );
    assert_eq!(spec["properties"]["replicas"]["format"], "int32");
    assert_eq!(
        spec["properties"]["strategy"]["x-kubernetes-patch-strategy"],
        "retainKeys"
    );

    // What kubectl's strategic merge patch needs: containers merge by name, tolerations are
    // atomic, finalizers merge as a set, owner references by uid.
    let pod_spec = &schemas["io.k8s.api.core.v1.PodSpec"]["properties"];
    assert_eq!(
        pod_spec["containers"]["x-kubernetes-patch-strategy"],
        "merge"
    );
    assert_eq!(
        pod_spec["containers"]["x-kubernetes-patch-merge-key"],
        "name"
    );
    assert_eq!(pod_spec["containers"]["x-kubernetes-list-type"], "map");
    assert_eq!(
        pod_spec["containers"]["x-kubernetes-list-map-keys"],
        json!(["name"])
    );
    assert_eq!(
        pod_spec["volumes"]["x-kubernetes-patch-strategy"],
        "merge,retainKeys"
    );
    assert_eq!(pod_spec["tolerations"]["x-kubernetes-list-type"], "atomic");
    let meta = &schemas["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"]["properties"];
    assert_eq!(meta["finalizers"]["x-kubernetes-list-type"], "set");
    assert_eq!(
        meta["ownerReferences"]["x-kubernetes-patch-merge-key"],
        "uid"
    );
    assert_eq!(
        schemas["io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelector"]["x-kubernetes-map-type"],
        "atomic"
    );

    // Every $ref points at a schema in the same document.
    let text = doc.to_string();
    for part in text.split("\"$ref\":\"#/components/schemas/").skip(1) {
        let name = part.split('"').next().expect("name");
        assert!(
            schemas.get(name).is_some(),
            "{name} is referenced but missing"
        );
    }

    // Built-in kinds offer strategic merge patch, so kubectl computes it from these schemas.
    let patch = &doc["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]["patch"];
    assert!(
        patch["requestBody"]["content"]
            .get("application/strategic-merge-patch+json")
            .is_some(),
        "{patch}"
    );

    let core = v3_url(&env, "api/v1").await;
    let (_, doc) = get(&env, &core, &[]).await;
    let container = &doc["components"]["schemas"]["io.k8s.api.core.v1.Container"];
    assert_eq!(container["required"], json!(["name"]));
    assert_eq!(
        doc["components"]["schemas"]["io.k8s.api.core.v1.Pod"]["x-kubernetes-group-version-kind"]
            [0]["kind"],
        "Pod"
    );
}

#[tokio::test]
async fn v3_documents_are_cached_as_kubernetes_caches_them() {
    let env = TestEnv::start().await.expect("start");
    let url = v3_url(&env, "apis/apps/v1").await;
    let hash = url.split("?hash=").nth(1).expect("a hash").to_string();
    assert_eq!(hash.len(), 128, "a SHA-512 in hex: {hash}");

    let (resp, _) = get(&env, &url, &[]).await;
    assert_eq!(resp.status(), 200);
    assert_eq!(header(&resp, "etag"), format!("\"{hash}\""));
    assert_eq!(header(&resp, "cache-control"), "public, immutable");
    assert!(!header(&resp, "expires").is_empty());

    let etag = format!("\"{hash}\"");
    let (resp, _) = get(&env, &url, &[("if-none-match", &etag)]).await;
    assert_eq!(resp.status(), 304);

    let (resp, _) = get(&env, "/openapi/v3/apis/apps/v1?hash=0123", &[]).await;
    assert_eq!(resp.status(), 301);
    assert_eq!(header(&resp, "location"), url);

    let (resp, _) = get(&env, "/openapi/v3/apis/apps/v1", &[("accept", V2_PROTOBUF)]).await;
    assert_eq!(resp.status(), 406);
    let (resp, body) = get(&env, "/openapi/v3/apis/nothing.example.com/v1", &[]).await;
    assert_eq!(resp.status(), 404, "{body}");

    // A new group version changes the index, not the other documents' hashes.
    let crds: Api<CustomResourceDefinition> = Api::all(env.client());
    crds.create(&PostParams::default(), &gadget_crd())
        .await
        .expect("create crd");
    let gadgets = kore_testenv::wait_for(WAIT, || async {
        let (_, index) = get(&env, "/openapi/v3", &[]).await;
        index["paths"]["apis/example.com/v1alpha1"]["serverRelativeURL"]
            .as_str()
            .map(str::to_string)
    })
    .await
    .expect("the CRD's group version appears");
    assert_eq!(v3_url(&env, "apis/apps/v1").await, url);
    let (_, doc) = get(&env, &gadgets, &[]).await;
    let patch =
        &doc["paths"]["/apis/example.com/v1alpha1/namespaces/{namespace}/gadgets/{name}"]["patch"];
    assert!(
        patch["requestBody"]["content"]
            .get("application/strategic-merge-patch+json")
            .is_none(),
        "custom resources take no strategic merge patch: {patch}"
    );
}

fn gadget_crd() -> CustomResourceDefinition {
    serde_json::from_value(json!({
        "metadata": {"name": "gadgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "gadgets", "kind": "Gadget"},
            "versions": [{"name": "v1alpha1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {"size": {"type": "integer"}}}}}}}]}
    }))
    .expect("crd")
}

#[tokio::test]
async fn v2_is_one_swagger_document_with_every_kind() {
    let env = TestEnv::start().await.expect("start");
    let (resp, doc) = get(&env, "/openapi/v2", &[("accept", "application/json")]).await;
    assert_eq!(resp.status(), 200, "{doc}");
    assert_eq!(header(&resp, "content-type"), "application/json");
    assert_eq!(doc["swagger"], "2.0");
    let defs = &doc["definitions"];
    for (name, kind) in [
        ("io.k8s.api.core.v1.Pod", "Pod"),
        ("io.k8s.api.apps.v1.Deployment", "Deployment"),
        ("io.k8s.api.batch.v1.Job", "Job"),
        ("io.k8s.api.rbac.v1.ClusterRole", "ClusterRole"),
    ] {
        assert_eq!(
            defs[name]["x-kubernetes-group-version-kind"][0]["kind"], kind,
            "{name}"
        );
    }
    assert_eq!(
        defs["io.k8s.api.apps.v1.Deployment"]["properties"]["spec"]["$ref"],
        "#/definitions/io.k8s.api.apps.v1.DeploymentSpec"
    );
    assert_eq!(
        defs["io.k8s.api.core.v1.PodSpec"]["properties"]["containers"]["x-kubernetes-patch-merge-key"],
        "name"
    );
    assert!(
        doc["paths"]
            .get("/apis/apps/v1/namespaces/{namespace}/deployments/{name}")
            .is_some()
    );

    let etag = header(&resp, "etag").to_string();
    assert_eq!(etag.len(), 130, "a quoted SHA-512 in hex: {etag}");
    let (resp, _) = get(&env, "/openapi/v2", &[("if-none-match", &etag)]).await;
    assert_eq!(resp.status(), 304);
    // client-go asks for protobuf: the same document, the same ETag, Swagger "2.0" first.
    let (resp, body) = get_bytes(&env, "/openapi/v2", &[("accept", V2_PROTOBUF)]).await;
    assert_eq!(resp.status(), 200);
    assert_eq!(
        header(&resp, "content-type"),
        "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
    );
    assert_eq!(header(&resp, "etag"), etag);
    assert!(body.starts_with(b"\x0a\x032.0"), "{:?}", &body[..16]);
    let (resp, _) = get(&env, "/openapi/v2", &[("accept", "application/yaml")]).await;
    assert_eq!(resp.status(), 406);

    // A CRD's schema joins the document, which then has a new ETag.
    let crds: Api<CustomResourceDefinition> = Api::all(env.client());
    crds.create(&PostParams::default(), &gadget_crd())
        .await
        .expect("create crd");
    let doc = kore_testenv::wait_for(WAIT, || async {
        let (_, doc) = get(&env, "/openapi/v2", &[]).await;
        doc["paths"]
            .get("/apis/example.com/v1alpha1/namespaces/{namespace}/gadgets/{name}")
            .is_some()
            .then_some(doc)
    })
    .await
    .expect("the CRD's paths appear");
    let gadget = doc["definitions"]
        .as_object()
        .and_then(|d| {
            d.values()
                .find(|s| s["x-kubernetes-group-version-kind"][0]["kind"] == "Gadget")
        })
        .expect("the Gadget schema");
    assert_eq!(
        gadget["properties"]["spec"]["properties"]["size"]["type"],
        "integer"
    );
    let (resp, _) = get(&env, "/openapi/v2", &[("if-none-match", &etag)]).await;
    assert_eq!(resp.status(), 200);
}
