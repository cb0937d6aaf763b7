//! Answers shaped as Kubernetes shapes them, each found by a real client's test suite
//! (issue 12): the status codes and events a client sees for the same request.

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kore_testenv::TestEnv;
use kube::api::{Api, PostParams, WatchEvent, WatchParams};
use serde_json::json;

fn cm(value: serde_json::Value) -> ConfigMap {
    serde_json::from_value(value).expect("a ConfigMap")
}

fn api_status(e: kube::Error) -> kube::core::Status {
    match e {
        kube::Error::Api(s) => *s,
        other => panic!("expected an API error, got {other:?}"),
    }
}

#[tokio::test]
async fn a_resource_version_on_create_is_refused_after_validation_and_not_in_a_dry_run() {
    let env = TestEnv::start().await.expect("start");
    let cms: Api<ConfigMap> = Api::default_namespaced(env.client());

    // Dry run: Kubernetes' dry-run storage only checks that the name is free.
    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let answered = cms
        .create(
            &dry,
            &cm(json!({"metadata": {"name": "a", "resourceVersion": "7"}})),
        )
        .await
        .expect("a dry-run create with a resourceVersion is answered 201");
    assert_eq!(answered.metadata.name.as_deref(), Some("a"));
    assert!(
        cms.get_opt("a").await.expect("get").is_none(),
        "nothing stored"
    );

    // An invalid object is a 422 whether or not it carries a resourceVersion.
    let invalid = cms
        .create(
            &PostParams::default(),
            &cm(json!({"metadata": {"name": "Not_Valid", "resourceVersion": "7"}})),
        )
        .await
        .expect_err("invalid name");
    let status = api_status(invalid);
    assert_eq!((status.code, status.reason.as_str()), (422, "Invalid"));

    // A valid object with a resourceVersion is refused by storage, as in Kubernetes.
    let refused = cms
        .create(
            &PostParams::default(),
            &cm(json!({"metadata": {"name": "b", "resourceVersion": "7"}})),
        )
        .await
        .expect_err("resourceVersion set");
    let status = api_status(refused);
    assert_eq!(status.code, 500);
    assert!(
        status.message.contains("resourceVersion should not be set"),
        "{}",
        status.message
    );
    assert!(cms.get_opt("b").await.expect("get").is_none());
}

#[tokio::test]
async fn a_watch_from_before_the_server_started_is_told_it_expired() {
    let env = TestEnv::start().await.expect("start");
    let cms: Api<ConfigMap> = Api::default_namespaced(env.client());
    let created = cms
        .create(
            &PostParams::default(),
            &cm(json!({"metadata": {"name": "c"}})),
        )
        .await
        .expect("create");
    let rv: u64 = created
        .metadata
        .resource_version
        .as_deref()
        .and_then(|v| v.parse().ok())
        .expect("a numeric resourceVersion");

    // From "1": the server's own start-up writes came before its history starts.
    let mut stream = cms
        .watch(&WatchParams::default(), "1")
        .await
        .expect("watch")
        .boxed();
    match stream.try_next().await.expect("an event") {
        Some(WatchEvent::Error(e)) => {
            assert_eq!((e.code, e.reason.as_str()), (410, "Expired"));
            assert!(
                e.message.starts_with("too old resource version: 1 ("),
                "{}",
                e.message
            );
        }
        other => panic!("expected a 410 ERROR event, got {other:?}"),
    }

    // From a revision written after the start, the change is replayed.
    let mut stream = cms
        .watch(&WatchParams::default(), &(rv - 1).to_string())
        .await
        .expect("watch")
        .boxed();
    match stream.try_next().await.expect("an event") {
        Some(WatchEvent::Added(got)) => assert_eq!(got.metadata.name.as_deref(), Some("c")),
        other => panic!("expected the ADDED event of c, got {other:?}"),
    }
}

#[tokio::test]
async fn deleting_a_kind_whose_storage_returns_the_object_answers_with_it() {
    use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Service};
    use kube::api::DeleteParams;
    let env = TestEnv::start().await.expect("start");
    let services: Api<Service> = Api::default_namespaced(env.client());
    services
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": "web"},
                "spec": {"ports": [{"port": 80}]}
            }))
            .expect("a Service"),
        )
        .await
        .expect("create");
    let answer = services
        .delete("web", &DeleteParams::default())
        .await
        .expect("delete");
    let deleted = answer.left().expect("the deleted Service, not a Status");
    assert_eq!(deleted.metadata.name.as_deref(), Some("web"));

    let claims: Api<PersistentVolumeClaim> = Api::default_namespaced(env.client());
    claims
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": "data"},
                "spec": {"accessModes": ["ReadWriteOnce"],
                         "resources": {"requests": {"storage": "1Gi"}}}
            }))
            .expect("a PVC"),
        )
        .await
        .expect("create");
    let answer = claims
        .delete("data", &DeleteParams::default())
        .await
        .expect("delete");
    assert!(answer.is_left(), "the deleted claim, not a Status");

    // A ConfigMap's storage answers with a Status.
    let cms: Api<ConfigMap> = Api::default_namespaced(env.client());
    cms.create(
        &PostParams::default(),
        &cm(json!({"metadata": {"name": "c"}})),
    )
    .await
    .expect("create");
    let answer = cms
        .delete("c", &DeleteParams::default())
        .await
        .expect("delete");
    assert!(answer.is_right(), "a Success Status");
}

#[tokio::test]
async fn a_json_patch_may_not_move_an_object_to_another_namespace() {
    let env = TestEnv::start().await.expect("start");
    let client = env.client();
    let cms: Api<ConfigMap> = Api::default_namespaced(client.clone());
    cms.create(
        &PostParams::default(),
        &cm(json!({"metadata": {"name": "c"}})),
    )
    .await
    .expect("create");
    let patch = json!([
        {"op": "replace", "path": "/metadata/namespace", "value": "kube-system"}
    ]);
    let request = http::Request::patch("/api/v1/namespaces/default/configmaps/c")
        .header("content-type", "application/json-patch+json")
        .body(patch.to_string().into_bytes())
        .expect("a request");
    let refused = client
        .request::<ConfigMap>(request)
        .await
        .expect_err("the namespace may not change");
    let status = api_status(refused);
    assert_eq!((status.code, status.reason.as_str()), (400, "BadRequest"));
    assert!(
        status.message.contains("does not match the namespace"),
        "{}",
        status.message
    );
    let kept = cms.get("c").await.expect("still in default");
    assert_eq!(kept.metadata.namespace.as_deref(), Some("default"));
}

#[tokio::test]
async fn every_json_answer_ends_with_a_newline() {
    let env = TestEnv::start().await.expect("start");
    let client = env.client();
    let cms: Api<ConfigMap> = Api::default_namespaced(client.clone());
    cms.create(
        &PostParams::default(),
        &cm(json!({"metadata": {"name": "c"}})),
    )
    .await
    .expect("create");
    for path in [
        "/api/v1/namespaces/default/configmaps/c",
        "/api/v1/namespaces/default/configmaps",
        "/api/v1/namespaces/default/configmaps/missing",
        "/api",
        "/apis",
    ] {
        let request = http::Request::get(path)
            .body(Vec::new())
            .expect("a request");
        let response = client
            .send(request.map(kube::client::Body::from))
            .await
            .expect("an answer");
        let body = http_body_util::BodyExt::collect(response.into_body())
            .await
            .expect("the body")
            .to_bytes();
        assert_eq!(body.last(), Some(&b'\n'), "{path}");
        assert_ne!(
            body.get(body.len().saturating_sub(2)),
            Some(&b'\n'),
            "{path}"
        );
    }
}

#[tokio::test]
async fn events_v1_lists_select_by_their_own_field_names() {
    use kube::api::{DynamicObject, ListParams};
    let env = TestEnv::start().await.expect("start");
    let v1 = kube::discovery::ApiResource {
        group: "events.k8s.io".into(),
        version: "v1".into(),
        api_version: "events.k8s.io/v1".into(),
        kind: "Event".into(),
        plural: "events".into(),
    };
    let events: Api<DynamicObject> = Api::namespaced_with(env.client(), "default", &v1);
    for (name, pod, reason, controller) in [
        ("e1", "p1", "Started", "kubelet"),
        ("e2", "p2", "Killing", "kubelet"),
        ("e3", "p1", "Scheduled", "default-scheduler"),
    ] {
        let ev: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": name},
            "eventTime": "2026-01-01T00:00:00.000000Z", "reason": reason, "action": "Act",
            "reportingController": controller, "reportingInstance": "i", "type": "Normal",
            "regarding": {"kind": "Pod", "name": pod, "namespace": "default"}
        }))
        .expect("an event");
        events
            .create(&PostParams::default(), &ev)
            .await
            .expect("create");
    }
    let names = |list: kube::core::ObjectList<DynamicObject>| {
        let mut n: Vec<String> = list
            .items
            .into_iter()
            .filter_map(|e| e.metadata.name)
            .collect();
        n.sort();
        n
    };
    for (selector, expected) in [
        ("regarding.name=p1", vec!["e1", "e3"]),
        ("regarding.kind=Pod,reason=Killing", vec!["e2"]),
        ("reportingController=default-scheduler", vec!["e3"]),
        ("type=Normal,regarding.name!=p1", vec!["e2"]),
    ] {
        let got = events
            .list(&ListParams::default().fields(selector))
            .await
            .expect(selector);
        assert_eq!(names(got), expected, "{selector}");
    }
    let refused = events
        .list(&ListParams::default().fields("involvedObject.name=p1"))
        .await
        .expect_err("core names are not events.k8s.io/v1's");
    assert_eq!(api_status(refused).code, 400);
}

#[tokio::test]
async fn workload_templates_carry_a_null_creation_timestamp_as_kubernetes_writes_them() {
    let env = TestEnv::start().await.expect("start");
    let client = env.client();
    let deployment = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": "nginx"}]}
            }
        }
    });
    let request = http::Request::post("/apis/apps/v1/namespaces/default/deployments")
        .header("content-type", "application/json")
        .body(deployment.to_string().into_bytes())
        .expect("a request");
    let created: serde_json::Value = client.request(request).await.expect("create");
    let meta = &created["spec"]["template"]["metadata"];
    assert!(
        meta.as_object()
            .is_some_and(|m| m.get("creationTimestamp") == Some(&serde_json::Value::Null)),
        "{meta}"
    );
}

#[tokio::test]
async fn a_status_write_keeps_metadata_changes_where_the_kinds_status_strategy_does() {
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::core::v1::Namespace;
    use kube::api::{Patch, PatchParams};

    let env = TestEnv::start().await.expect("start");
    let client = env.client();
    let deployments: Api<Deployment> = Api::default_namespaced(client.clone());
    let d: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "web", "labels": {"tier": "front"}},
        "spec": {
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": "nginx"}]}
            }
        }
    }))
    .expect("a Deployment");
    deployments
        .create(&PostParams::default(), &d)
        .await
        .expect("create");
    // A Deployment's status strategy resets its spec and labels, and keeps the rest.
    let patched = deployments
        .patch_status(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({
                "metadata": {"annotations": {"seen": "yes"}, "labels": {"tier": "back"}},
                "spec": {"replicas": 7},
                "status": {"observedGeneration": 1}
            })),
        )
        .await
        .expect("patch status");
    let meta = &patched.metadata;
    assert_eq!(
        meta.annotations
            .as_ref()
            .and_then(|a| a.get("seen"))
            .map(String::as_str),
        Some("yes"),
        "the annotation added by the status write is kept"
    );
    assert_eq!(
        meta.labels
            .as_ref()
            .and_then(|l| l.get("tier"))
            .map(String::as_str),
        Some("front"),
        "labels are reset"
    );
    assert_eq!(
        patched.spec.and_then(|s| s.replicas),
        Some(1),
        "spec is reset"
    );
    assert_eq!(patched.status.and_then(|s| s.observed_generation), Some(1));

    // A Namespace's status strategy keeps the new metadata (no labels reset).
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let ns = namespaces
        .patch_status(
            "default",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"seen": "yes"}}})),
        )
        .await
        .expect("patch namespace status");
    assert_eq!(
        ns.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("seen"))
            .map(String::as_str),
        Some("yes")
    );
}

/// The body of a GET of `path`, as text.
async fn get_text(client: &kube::Client, path: &str) -> String {
    let request = http::Request::get(path)
        .body(Vec::new())
        .expect("a request");
    let response = client
        .send(request.map(kube::client::Body::from))
        .await
        .expect("an answer");
    let body = http_body_util::BodyExt::collect(response.into_body())
        .await
        .expect("the body")
        .to_bytes();
    String::from_utf8(body.to_vec()).expect("text")
}

/// The value of the sample whose name and labels start with `series`.
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find(|l| l.starts_with(series))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

#[tokio::test]
async fn metrics_carry_kube_apiservers_names_and_labels() {
    let env = TestEnv::start().await.expect("start");
    let client = env.client();
    let cms: Api<ConfigMap> = Api::default_namespaced(client.clone());
    for name in ["m1", "m2"] {
        cms.create(
            &PostParams::default(),
            &cm(json!({"metadata": {"name": name}})),
        )
        .await
        .expect("create");
    }
    cms.get("m1").await.expect("get");
    cms.get_opt("missing").await.expect("get");
    cms.list(&Default::default()).await.expect("list");

    // A watch is long-running: counted while open, and its events are counted.
    let mut watch = cms
        .watch(&WatchParams::default(), "0")
        .await
        .expect("watch")
        .boxed();
    let first = watch.try_next().await.expect("an event");
    assert!(matches!(first, Some(WatchEvent::Added(_))));
    let text = get_text(&client, "/metrics").await;
    assert_eq!(
        sample(
            &text,
            r#"apiserver_longrunning_requests{verb="WATCH",group="",version="v1",resource="configmaps",subresource="",scope="namespace",component="apiserver"}"#
        ),
        Some(1.0),
        "{text}"
    );
    assert!(
        sample(
            &text,
            r#"apiserver_watch_events_total{group="",version="v1",kind="ConfigMap"}"#
        )
        .is_some_and(|n| n >= 1.0),
        "{text}"
    );
    drop(watch);

    let text = get_text(&client, "/metrics").await;
    let total = |labels: &str| sample(&text, &format!("apiserver_request_total{{{labels}}}"));
    assert_eq!(
        total(
            r#"verb="POST",dry_run="",group="",version="v1",resource="configmaps",subresource="",scope="resource",component="apiserver",code="201""#
        ),
        Some(2.0),
        "{text}"
    );
    assert_eq!(
        total(
            r#"verb="GET",dry_run="",group="",version="v1",resource="configmaps",subresource="",scope="resource",component="apiserver",code="404""#
        ),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        total(
            r#"verb="LIST",dry_run="",group="",version="v1",resource="configmaps",subresource="",scope="namespace",component="apiserver",code="200""#
        ),
        Some(1.0),
        "{text}"
    );
    // Non-resource requests carry their path as the subresource.
    assert!(
        total(
            r#"verb="GET",dry_run="",group="",version="",resource="",subresource="/metrics",scope="",component="apiserver",code="200""#
        )
        .is_some(),
        "{text}"
    );
    assert_eq!(
        sample(
            &text,
            r#"apiserver_request_duration_seconds_count{verb="POST",dry_run="",group="",version="v1",resource="configmaps",subresource="",scope="resource",component="apiserver"}"#
        ),
        Some(2.0),
        "{text}"
    );
    assert!(text.contains(r#"apiserver_request_duration_seconds_bucket{verb="POST",dry_run="",group="",version="v1",resource="configmaps",subresource="",scope="resource",component="apiserver",le="60"} 2"#), "{text}");
    assert!(
        sample(&text, r#"apiserver_storage_objects{resource="configmaps"}"#)
            .is_some_and(|n| n >= 2.0),
        "{text}"
    );
    assert!(
        sample(
            &text,
            r#"apiserver_storage_objects{resource="deployments.apps"}"#
        )
        .is_some(),
        "{text}"
    );
    assert!(
        sample(
            &text,
            r#"apiserver_current_inflight_requests{request_kind="readOnly"}"#
        )
        .is_some_and(|n| n >= 1.0),
        "the scrape itself is in flight: {text}"
    );
    // Once the watch is gone the gauge is back to zero (its body is dropped by now).
    assert_eq!(
        sample(
            &text,
            r#"apiserver_longrunning_requests{verb="WATCH",group="",version="v1",resource="configmaps""#
        ),
        Some(0.0),
        "{text}"
    );
    assert!(
        sample(
            &text,
            r#"apiserver_request_total{verb="WATCH",dry_run="",group="",version="v1",resource="configmaps""#
        )
        .is_some(),
        "{text}"
    );
}

#[tokio::test]
async fn empty_maps_and_lists_kubernetes_omits_are_not_stored() {
    let env = TestEnv::start().await.expect("start");
    let client = env.client();
    let cms: Api<ConfigMap> = Api::default_namespaced(client.clone());
    cms.create(
        &PostParams::default(),
        &cm(json!({
            "metadata": {"name": "empty", "labels": {}, "annotations": {}, "finalizers": []},
            "data": {},
            "binaryData": {}
        })),
    )
    .await
    .expect("create");
    let raw = get_text(&client, "/api/v1/namespaces/default/configmaps/empty").await;
    let v: serde_json::Value = serde_json::from_str(&raw).expect("json");
    for gone in ["labels", "annotations", "finalizers"] {
        assert!(v["metadata"].get(gone).is_none(), "{gone}: {raw}");
    }
    assert!(v.get("data").is_none(), "{raw}");
    assert!(v.get("binaryData").is_none(), "{raw}");

    // A list without `omitempty` in Kubernetes' types stays, even empty.
    let roles: Api<k8s_openapi::api::rbac::v1::ClusterRole> = Api::all(client.clone());
    roles
        .create(
            &PostParams::default(),
            &serde_json::from_value(
                json!({"metadata": {"name": "none", "labels": {}}, "rules": []}),
            )
            .expect("a ClusterRole"),
        )
        .await
        .expect("create");
    let raw = get_text(
        &client,
        "/apis/rbac.authorization.k8s.io/v1/clusterroles/none",
    )
    .await;
    let v: serde_json::Value = serde_json::from_str(&raw).expect("json");
    assert_eq!(v["rules"], json!([]), "{raw}");
    assert!(v["metadata"].get("labels").is_none(), "{raw}");
}

/// The raw bytes of a GET, with the server-chosen `uid`, `resourceVersion` and timestamps
/// replaced by `UID`, `RV` and `TS`, and `managedFields` (its layout is `apply.md`'s) left out.
async fn raw(
    client: &kube::Client,
    method: &str,
    path: &str,
    body: Option<&serde_json::Value>,
) -> String {
    let request = http::Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", "application/json")
        .body(body.map(|b| b.to_string().into_bytes()).unwrap_or_default())
        .expect("a request");
    let response = client
        .send(request.map(kube::client::Body::from))
        .await
        .expect("an answer");
    let bytes = http_body_util::BodyExt::collect(response.into_body())
        .await
        .expect("the body")
        .to_bytes();
    let mut text = String::from_utf8(bytes.to_vec()).expect("utf-8");
    let re = regex::Regex::new(
        r#""(uid|resourceVersion|creationTimestamp)":"[^"]*"|,"managedFields":\[[^\]]*\]"#,
    )
    .expect("a regex");
    text = re
        .replace_all(&text, |c: &regex::Captures<'_>| match c.get(1) {
            Some(f) if f.as_str() == "uid" => r#""uid":"UID""#.to_string(),
            Some(f) if f.as_str() == "resourceVersion" => r#""resourceVersion":"RV""#.to_string(),
            Some(_) => r#""creationTimestamp":"TS""#.to_string(),
            None => String::new(),
        })
        .into_owned();
    text
}

/// Issue 12: kube-apiserver writes built-in objects from their Go structs — `kind`,
/// `apiVersion`, then every struct's fields in declaration order (`types.go` of k8s.io/api and
/// apimachinery), map keys sorted — and list items without `kind`/`apiVersion`. The expected
/// bytes are what a 1.33 server answers for the same requests.
#[tokio::test]
async fn answers_have_kubernetes_key_order_byte_for_byte() {
    let env = TestEnv::start().await.expect("start");
    let client = env.client();

    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "c", "labels": {"z": "1", "a": "2"}}, "data": {"k": "v"}});
    let created = raw(
        &client,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        Some(&cm),
    )
    .await;
    let expected_cm = concat!(
        r#"{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"c","namespace":"default","#,
        r#""uid":"UID","resourceVersion":"RV","creationTimestamp":"TS","labels":{"a":"2","z":"1"}},"#,
        r#""data":{"k":"v"}}"#,
        "\n"
    );
    assert_eq!(created, expected_cm);
    let got = raw(
        &client,
        "GET",
        "/api/v1/namespaces/default/configmaps/c",
        None,
    )
    .await;
    assert_eq!(got, expected_cm);

    // A list: ListMeta, then items without their type.
    let list = raw(
        &client,
        "GET",
        "/api/v1/namespaces/default/configmaps?fieldSelector=metadata.name%3Dc",
        None,
    )
    .await;
    assert_eq!(
        list,
        concat!(
            r#"{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"RV"},"items":["#,
            r#"{"metadata":{"name":"c","namespace":"default","uid":"UID","resourceVersion":"RV","#,
            r#""creationTimestamp":"TS","labels":{"a":"2","z":"1"}},"data":{"k":"v"}}]}"#,
            "\n"
        )
    );

    // A Deployment with its defaults, as `kubectl create deployment web --image=nginx` gets it.
    let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "labels": {"app": "web"}},
        "spec": {"selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [{"name": "nginx", "image": "nginx"}]}}}});
    let created = raw(
        &client,
        "POST",
        "/apis/apps/v1/namespaces/default/deployments",
        Some(&deployment),
    )
    .await;
    assert_eq!(
        created,
        concat!(
            r#"{"kind":"Deployment","apiVersion":"apps/v1","metadata":{"name":"web","namespace":"default","#,
            r#""uid":"UID","resourceVersion":"RV","generation":1,"creationTimestamp":"TS","labels":{"app":"web"}},"#,
            r#""spec":{"replicas":1,"selector":{"matchLabels":{"app":"web"}},"template":{"metadata":"#,
            r#"{"creationTimestamp":null,"labels":{"app":"web"}},"spec":{"containers":[{"name":"nginx","#,
            r#""image":"nginx","resources":{},"terminationMessagePath":"/dev/termination-log","#,
            r#""terminationMessagePolicy":"File","imagePullPolicy":"Always"}],"restartPolicy":"Always","#,
            r#""terminationGracePeriodSeconds":30,"dnsPolicy":"ClusterFirst","securityContext":{},"#,
            r#""schedulerName":"default-scheduler"}},"strategy":{"type":"RollingUpdate","rollingUpdate":"#,
            r#"{"maxUnavailable":"25%","maxSurge":"25%"}},"revisionHistoryLimit":10,"#,
            r#""progressDeadlineSeconds":600},"status":{}}"#,
            "\n"
        )
    );

    // An error is a Status in its struct order.
    let missing = raw(
        &client,
        "GET",
        "/api/v1/namespaces/default/configmaps/missing",
        None,
    )
    .await;
    assert_eq!(
        missing,
        concat!(
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","#,
            r#""message":"configmaps \"missing\" not found","reason":"NotFound","#,
            r#""details":{"name":"missing","kind":"configmaps"},"code":404}"#,
            "\n"
        )
    );
}
