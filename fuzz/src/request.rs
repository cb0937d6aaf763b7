//! Targets that send a request to the real router in-process.
//!
//! One server per process, started on first use. It holds one object named `fuzz` of each
//! resource in [`RESOURCES`]; writes carry `dryRun=All`, so every input meets the same state
//! (AFL++ needs that to tell new behaviour from noise).
//!
//! What counts as a crash: a panic or abort anywhere in the server, a 5xx answer (bad input
//! must get a 4xx Status; `EXPECTED_5XX` lists the exceptions Kubernetes makes too), or an
//! answer whose body is not JSON. Set `KORE_FUZZ_VERBOSE=1` to see every answer (to check
//! that the seeds get past decoding).

use std::sync::OnceLock;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use http::{Method, Request, StatusCode, header};
use http_body_util::BodyExt;
use kore_apiserver::server::{ApiServer, Config};
use serde_json::{Value, json};
use tower::ServiceExt;

/// The resources a body or patch goes to: the first input byte picks one (modulo the count).
/// Their collection paths, in the `default` namespace.
pub const RESOURCES: [&str; 4] = [
    "/api/v1/namespaces/default/configmaps",
    "/api/v1/namespaces/default/pods",
    "/apis/apps/v1/namespaces/default/deployments",
    "/apis/fuzz.kore.dev/v1/namespaces/default/widgets",
];

struct Server {
    rt: tokio::runtime::Runtime,
    router: Router,
    // Kept so that its tasks live as long as the process.
    _server: ApiServer,
}

fn server() -> &'static Server {
    static SERVER: OnceLock<Server> = OnceLock::new();
    SERVER.get_or_init(|| {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a tokio runtime can be built");
        let server = rt
            .block_on(ApiServer::start(Config::default()))
            .expect("the in-memory server starts");
        let router = server.router();
        rt.block_on(seed(&router));
        Server {
            rt,
            router,
            _server: server,
        }
    })
}

/// Creates the CRD of `widgets` and one object named `fuzz` per resource.
async fn seed(router: &Router) {
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.fuzz.kore.dev"},
        "spec": {
            "group": "fuzz.kore.dev",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"}},
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "properties": {
                        "spec": {
                            "type": "object",
                            "properties": {
                                "replicas": {"type": "integer", "minimum": 0, "default": 1},
                                "size": {"type": "string", "enum": ["small", "large"]},
                                "port": {"x-kubernetes-int-or-string": true},
                                "tags": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set", "maxItems": 16},
                                "ports": {
                                    "type": "array",
                                    "x-kubernetes-list-type": "map",
                                    "x-kubernetes-list-map-keys": ["name"],
                                    "items": {"type": "object", "required": ["name"], "properties": {
                                        "name": {"type": "string", "maxLength": 15},
                                        "port": {"type": "integer", "format": "int32"}
                                    }}
                                },
                                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                                "template": {"type": "object", "x-kubernetes-embedded-resource": true, "x-kubernetes-preserve-unknown-fields": true},
                                "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                                "when": {"type": "string", "format": "date-time", "nullable": true}
                            }
                        },
                        "status": {"type": "object", "properties": {"replicas": {"type": "integer"}}}
                    }
                }}
            }]
        }
    });
    send_json(
        router,
        Method::POST,
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        &crd,
    )
    .await;
    // The CRD controller serves the new resource shortly after; wait for it.
    let mut served = false;
    for _ in 0..1000 {
        let req = Request::get(RESOURCES[3])
            .body(Body::empty())
            .expect("a valid request");
        let resp = router.clone().oneshot(req).await.expect("infallible");
        if resp.status() == StatusCode::OK {
            served = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(served, "the widgets CRD was never served");

    let objects = [
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "fuzz", "labels": {"app": "fuzz"}},
               "data": {"a": "1", "b": "2"}}),
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "fuzz", "labels": {"app": "fuzz"}},
        "spec": {"containers": [
            {"name": "main", "image": "busybox", "ports": [{"containerPort": 80, "protocol": "TCP"}],
             "env": [{"name": "A", "value": "1"}]},
            {"name": "side", "image": "busybox"}
        ]}}),
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "fuzz", "labels": {"app": "fuzz"}},
               "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "fuzz"}},
                        "template": {"metadata": {"labels": {"app": "fuzz"}},
                                     "spec": {"containers": [{"name": "main", "image": "busybox"}]}}}}),
        json!({"apiVersion": "fuzz.kore.dev/v1", "kind": "Widget", "metadata": {"name": "fuzz", "labels": {"app": "fuzz"}},
               "spec": {"replicas": 2, "size": "small", "tags": ["a"], "ports": [{"name": "http", "port": 80}]}}),
    ];
    for (path, object) in RESOURCES.iter().zip(objects) {
        send_json(router, Method::POST, path, &object).await;
    }
}

/// Sends a seed request and insists that it succeeds.
async fn send_json(router: &Router, method: Method, path: &str, body: &Value) {
    let req = Request::builder()
        .method(method)
        .uri(path)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(body.to_string()))
        .expect("a valid request");
    let resp = router.clone().oneshot(req).await.expect("infallible");
    let status = resp.status();
    let bytes = resp
        .into_body()
        .collect()
        .await
        .expect("the body is readable")
        .to_bytes();
    assert!(
        status.is_success(),
        "seeding {path} failed: {status} {}",
        String::from_utf8_lossy(&bytes)
    );
}

/// Sends one request and checks the answer: never 5xx, always a JSON body.
fn send(method: Method, uri: &str, content_type: Option<&str>, body: Vec<u8>) {
    let server = server();
    let mut req = Request::builder().method(method).uri(uri);
    if let Some(ct) = content_type {
        req = req.header(header::CONTENT_TYPE, ct);
    }
    let req = req.body(Body::from(body)).expect("a valid request");
    server.rt.block_on(async {
        let resp = server
            .router
            .clone()
            .oneshot(req)
            .await
            .expect("infallible");
        let status = resp.status();
        let bytes = resp
            .into_body()
            .collect()
            .await
            .expect("the body is readable")
            .to_bytes();
        if std::env::var_os("KORE_FUZZ_VERBOSE").is_some() {
            eprintln!("{uri}: {status} {}", String::from_utf8_lossy(&bytes));
        }
        assert!(
            !status.is_server_error() || expected_5xx(&bytes),
            "{uri}: {status} {}",
            String::from_utf8_lossy(&bytes)
        );
        assert!(
            serde_json::from_slice::<Value>(&bytes).is_ok(),
            "{uri}: {status} with a body that is not JSON: {}",
            String::from_utf8_lossy(&bytes)
        );
    });
}

/// The 5xx answers Kubernetes gives to bad input too, which kore gives on purpose.
///
/// - A create whose object carries a `resourceVersion`: Kubernetes' storage refuses it with
///   `storage.ErrResourceVersionSetOnCreate`, which reaches the client as a 500 InternalError.
const EXPECTED_5XX: [&str; 1] = ["resourceVersion should not be set on objects to be created"];

fn expected_5xx(body: &[u8]) -> bool {
    serde_json::from_slice::<Value>(body).is_ok_and(|status| {
        status["reason"] == "InternalError"
            && status["message"]
                .as_str()
                .is_some_and(|m| EXPECTED_5XX.iter().any(|e| m.ends_with(e)))
    })
}

/// Splits the input into the resource it picks and the rest.
fn pick(data: &[u8]) -> Option<(&'static str, &[u8])> {
    let (first, rest) = data.split_first()?;
    Some((RESOURCES[usize::from(*first) % RESOURCES.len()], rest))
}

fn create(data: &[u8], content_type: &str) {
    if let Some((path, body)) = pick(data) {
        let uri = format!("{path}?dryRun=All");
        send(Method::POST, &uri, Some(content_type), body.to_vec());
    }
}

fn patch(data: &[u8], content_type: &str, query: &str) {
    if let Some((path, body)) = pick(data) {
        let uri = format!("{path}/fuzz?dryRun=All{query}");
        send(Method::PATCH, &uri, Some(content_type), body.to_vec());
    }
}

/// A create body as JSON.
pub fn body_json(data: &[u8]) {
    create(data, "application/json");
}

/// A create body as YAML.
pub fn body_yaml(data: &[u8]) {
    create(data, "application/yaml");
}

/// A create body as Kubernetes protobuf.
pub fn body_protobuf(data: &[u8]) {
    create(data, "application/vnd.kubernetes.protobuf");
}

/// A JSON patch.
pub fn patch_json(data: &[u8]) {
    patch(data, "application/json-patch+json", "");
}

/// A JSON merge patch.
pub fn patch_merge(data: &[u8]) {
    patch(data, "application/merge-patch+json", "");
}

/// A strategic merge patch (custom resources answer 415).
pub fn patch_strategic(data: &[u8]) {
    patch(data, "application/strategic-merge-patch+json", "");
}

/// A server-side apply body.
pub fn patch_apply(data: &[u8]) {
    patch(
        data,
        "application/apply-patch+yaml",
        "&fieldManager=fuzz&force=true",
    );
}

/// Percent-encodes every byte but the unreserved ones, for a query parameter value.
fn query_value(data: &[u8]) -> String {
    let mut out = String::with_capacity(data.len() * 3);
    for &b in data {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The labelSelector of a list of pods.
pub fn label_selector(data: &[u8]) {
    let uri = format!("{}?labelSelector={}", RESOURCES[1], query_value(data));
    send(Method::GET, &uri, None, Vec::new());
}

/// The fieldSelector of a list of pods (which support the most field selector keys).
pub fn field_selector(data: &[u8]) {
    let uri = format!("{}?fieldSelector={}", RESOURCES[1], query_value(data));
    send(Method::GET, &uri, None, Vec::new());
}
