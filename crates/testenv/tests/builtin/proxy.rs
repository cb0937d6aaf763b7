//! `services/proxy`, `pods/proxy` and `nodes/proxy` with and without a proxied path: kore runs
//! no process behind them, so each answers a `Status` that says so (503 for a service, as
//! Kubernetes answers one without endpoints; 400 for a pod), 404 for an absent object, never
//! a bare 404 for the path.

use crate::common::raw;
use http::Method;
use kore_testenv::TestEnv;
use serde_json::json;

const JSON: &str = "application/json";

#[tokio::test]
async fn proxy_subresources_answer_a_status_that_names_the_reason() {
    let env = TestEnv::start().await.expect("start");
    let ns = "/api/v1/namespaces/default";
    let svc = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
        "spec": {"selector": {"app": "web"}, "ports": [{"name": "http", "port": 80}]}});
    let (code, body) = raw(
        &env,
        Method::POST,
        &format!("{ns}/services"),
        JSON,
        Some(svc),
    )
    .await;
    assert_eq!(code, 201, "{body}");

    for path in [
        "services/web/proxy",
        "services/web/proxy/healthz",
        "services/web:80/proxy/a/b",
        "services/https:web:http/proxy/",
    ] {
        for method in [Method::GET, Method::POST, Method::DELETE] {
            let (code, s) = raw(&env, method.clone(), &format!("{ns}/{path}"), JSON, None).await;
            assert_eq!(code, 503, "{method} {path}: {s}");
            assert_eq!(s["kind"], "Status", "{s}");
            assert_eq!(s["reason"], "ServiceUnavailable", "{s}");
            let msg = s["message"].as_str().expect("message");
            assert!(
                msg.contains("no endpoints available for service \"web\"")
                    && msg.contains("kore simulates pods"),
                "{msg}"
            );
        }
    }
    let (code, s) = raw(
        &env,
        Method::GET,
        &format!("{ns}/services/nope/proxy/x"),
        JSON,
        None,
    )
    .await;
    assert_eq!(code, 404, "{s}");
    assert_eq!(s["reason"], "NotFound", "{s}");
    assert_eq!(s["details"]["name"], "nope", "{s}");

    // A pod's proxy with a path is the pod's refusal, not an unknown path.
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "app", "image": "nginx"}]}});
    let (code, body) = raw(&env, Method::POST, &format!("{ns}/pods"), JSON, Some(pod)).await;
    assert_eq!(code, 201, "{body}");
    let (code, s) = raw(
        &env,
        Method::GET,
        &format!("{ns}/pods/p:8080/proxy/metrics"),
        JSON,
        None,
    )
    .await;
    assert_eq!(code, 400, "{s}");
    assert!(
        s["message"]
            .as_str()
            .is_some_and(|m| m.contains("kore simulates this pod's containers")),
        "{s}"
    );
}
