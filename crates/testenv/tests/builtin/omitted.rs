//! Empty maps and lists that Kubernetes' Go types mark `omitempty` are not stored, so what a
//! client wrote as `nodeSelector: {}` or `env: []` reads back as Kubernetes answers it and
//! `kubectl diff` shows no spurious lines; lists without `omitempty` (`containers`) stay.

use crate::common::raw;
use http::Method;
use kore_testenv::TestEnv;
use serde_json::{Value, json};

const JSON: &str = "application/json";

/// An empty-everything container and pod spec, as a generator might write them.
fn pod_spec() -> Value {
    json!({
        "nodeSelector": {}, "volumes": [], "imagePullSecrets": [], "initContainers": [],
        "hostAliases": [], "readinessGates": [], "topologySpreadConstraints": [],
        "containers": [{"name": "app", "image": "nginx", "env": [], "envFrom": [],
            "args": [], "command": [], "ports": [], "volumeMounts": [],
            "resources": {"limits": {}, "requests": {}}}]
    })
}

/// A Pod (not a template) gets the service account volume and mount by admission, so those two
/// are checked in templates only.
fn assert_pod_spec_empties_gone(spec: &Value, what: &str) {
    let template = !what.starts_with("pod ");
    let spec = spec.as_object().expect("pod spec");
    for f in [
        "nodeSelector",
        "volumes",
        "imagePullSecrets",
        "initContainers",
        "hostAliases",
        "readinessGates",
        "topologySpreadConstraints",
    ] {
        if f == "volumes" && !template {
            continue;
        }
        assert!(!spec.contains_key(f), "{what}: {f} kept: {spec:?}");
    }
    let c = spec["containers"][0].as_object().expect("container kept");
    for f in ["env", "envFrom", "args", "command", "ports", "volumeMounts"] {
        if f == "volumeMounts" && !template {
            continue;
        }
        assert!(!c.contains_key(f), "{what}: container {f} kept: {c:?}");
    }
    let r = &c["resources"];
    assert!(
        r.get("limits").is_none() && r.get("requests").is_none(),
        "{what}: {r}"
    );
}

#[tokio::test]
async fn empty_omitempty_fields_of_pods_templates_and_services_are_not_stored() {
    let env = TestEnv::start().await.expect("start");
    let ns = "/api/v1/namespaces/default";

    let pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "empty"}, "spec": pod_spec()});
    let (code, created) = raw(&env, Method::POST, &format!("{ns}/pods"), JSON, Some(pod)).await;
    assert_eq!(code, 201, "{created}");
    assert_pod_spec_empties_gone(&created["spec"], "pod create");
    let (_, got) = raw(&env, Method::GET, &format!("{ns}/pods/empty"), JSON, None).await;
    assert_pod_spec_empties_gone(&got["spec"], "pod get");
    // A patch that writes them back empty leaves nothing either.
    let (code, patched) = {
        let req = http::Request::patch(format!("{ns}/pods/empty"))
            .header("content-type", "application/merge-patch+json")
            .body(serde_json::to_vec(&json!({"metadata": {"labels": {}}})).expect("json"))
            .expect("request");
        match env.client().request::<Value>(req).await {
            Ok(v) => (200, v),
            Err(e) => panic!("patch: {e}"),
        }
    };
    assert_eq!(code, 200);
    assert!(patched["metadata"].get("labels").is_none(), "{patched}");

    let deploy = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "empty"},
        "spec": {"selector": {"matchLabels": {"app": "e"}},
            "template": {"metadata": {"labels": {"app": "e"}}, "spec": pod_spec()}}});
    let (code, created) = raw(
        &env,
        Method::POST,
        "/apis/apps/v1/namespaces/default/deployments",
        JSON,
        Some(deploy),
    )
    .await;
    assert_eq!(code, 201, "{created}");
    assert_pod_spec_empties_gone(&created["spec"]["template"]["spec"], "deployment template");

    let cron = json!({"apiVersion": "batch/v1", "kind": "CronJob",
        "metadata": {"name": "empty"},
        "spec": {"schedule": "*/5 * * * *", "jobTemplate": {"spec": {"template": {
            "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox",
                "env": []}], "nodeSelector": {}}}}}}});
    let (code, created) = raw(
        &env,
        Method::POST,
        "/apis/batch/v1/namespaces/default/cronjobs",
        JSON,
        Some(cron),
    )
    .await;
    assert_eq!(code, 201, "{created}");
    let spec = &created["spec"]["jobTemplate"]["spec"]["template"]["spec"];
    assert!(spec.get("nodeSelector").is_none(), "{spec}");
    assert!(spec["containers"][0].get("env").is_none(), "{spec}");

    let svc = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "empty"},
        "spec": {"selector": {}, "externalIPs": [], "ports": [{"port": 80}]}});
    let (code, created) = raw(
        &env,
        Method::POST,
        &format!("{ns}/services"),
        JSON,
        Some(svc),
    )
    .await;
    assert_eq!(code, 201, "{created}");
    assert!(created["spec"].get("selector").is_none(), "{created}");
    assert!(created["spec"].get("externalIPs").is_none(), "{created}");
    assert_eq!(created["spec"]["ports"][0]["port"], 80, "{created}");

    // What has no `omitempty` stays, even empty: a pod needs its containers, so an empty
    // list is refused rather than dropped.
    let bare = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "bare"},
        "spec": {"containers": []}});
    let (code, body) = raw(&env, Method::POST, &format!("{ns}/pods"), JSON, Some(bare)).await;
    assert_eq!(code, 422, "{body}");
}
