//! Server-side apply and `managedFields`, through the `kube` crate against an in-process
//! kore-apiserver: creation by apply, no-op re-applies, removal of fields left out of an intent,
//! shared ownership, conflicts and `force`, Update ownership of other writes, keyed lists of
//! built-in kinds, apply through `/status`, and the requests Kubernetes refuses.

use http::{Method, Request};
use http_body_util::BodyExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kore_testenv::TestEnv;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

const CMS: &str = "/api/v1/namespaces/default/configmaps";

/// A raw answer: status code and JSON body.
struct Answer {
    code: u16,
    body: Value,
}

async fn send(env: &TestEnv, method: Method, path: &str, content_type: &str, body: &str) -> Answer {
    let req = Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", content_type)
        .header("accept", "application/json")
        .body(kube::client::Body::from(body.as_bytes().to_vec()))
        .expect("request");
    let resp = env.client().send(req).await.expect("response");
    let code = resp.status().as_u16();
    let bytes = resp.into_body().collect().await.expect("body").to_bytes();
    Answer {
        code,
        body: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    }
}

/// ConfigMap `c` with `data` (left out when `null`).
fn cm(data: Value) -> Value {
    let mut v = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}});
    if !data.is_null() {
        v["data"] = data;
    }
    v
}

async fn apply_cm(
    api: &Api<ConfigMap>,
    manager: &str,
    force: bool,
    data: Value,
) -> kube::Result<Value> {
    let mut pp = PatchParams::apply(manager);
    pp.force = force;
    let out = api.patch("c", &pp, &Patch::Apply(cm(data))).await?;
    Ok(serde_json::to_value(out).expect("serializable"))
}

/// The managedFields entry of `manager` (any operation), if any.
fn entry(obj: &Value, manager: &str) -> Option<Value> {
    obj["metadata"]["managedFields"]
        .as_array()?
        .iter()
        .find(|e| e["manager"] == manager)
        .cloned()
}

fn rv(obj: &Value) -> String {
    obj["metadata"]["resourceVersion"]
        .as_str()
        .expect("a resourceVersion")
        .to_string()
}

#[tokio::test]
async fn apply_creates_a_missing_object_owned_by_the_applier() {
    let env = TestEnv::start().await.expect("start");
    let body = cm(json!({"a": "1"})).to_string();
    let created = send(
        &env,
        Method::PATCH,
        &format!("{CMS}/c?fieldManager=m1"),
        "application/apply-patch+yaml",
        &body,
    )
    .await;
    assert_eq!(created.code, 201, "{}", created.body);
    assert_eq!(created.body["data"], json!({"a": "1"}));
    let e = entry(&created.body, "m1").expect("an entry for m1");
    assert_eq!(e["operation"], "Apply");
    assert_eq!(e["apiVersion"], "v1");
    assert_eq!(e["fieldsType"], "FieldsV1");
    assert_eq!(e["fieldsV1"], json!({"f:data": {"f:a": {}}}));
    assert!(e["time"].as_str().is_some_and(|t| t.ends_with('Z')), "{e}");
    assert!(e.get("subresource").is_none());

    // A YAML body works the same way.
    let yaml = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: y\ndata:\n  k: v\n";
    let a = send(
        &env,
        Method::PATCH,
        &format!("{CMS}/y?fieldManager=m1"),
        "application/apply-patch+yaml",
        yaml,
    )
    .await;
    assert_eq!(a.code, 201, "{}", a.body);
    assert_eq!(a.body["data"], json!({"k": "v"}));
}

#[tokio::test]
async fn reapplying_the_same_intent_changes_nothing() {
    let env = TestEnv::start().await.expect("start");
    let api: Api<ConfigMap> = Api::default_namespaced(env.client());
    let first = apply_cm(&api, "m1", false, json!({"a": "1"}))
        .await
        .expect("apply");
    let second = apply_cm(&api, "m1", false, json!({"a": "1"}))
        .await
        .expect("apply again");
    assert_eq!(rv(&first), rv(&second), "a no-op keeps its resourceVersion");
    assert_eq!(
        first["metadata"]["managedFields"],
        second["metadata"]["managedFields"]
    );
}

#[tokio::test]
async fn a_field_left_out_of_the_intent_is_removed() {
    let env = TestEnv::start().await.expect("start");
    let api: Api<ConfigMap> = Api::default_namespaced(env.client());
    apply_cm(&api, "m1", false, json!({"a": "1", "b": "2"}))
        .await
        .expect("apply");
    let out = apply_cm(&api, "m1", false, json!({"a": "1"}))
        .await
        .expect("apply without b");
    assert_eq!(out["data"], json!({"a": "1"}));
    assert_eq!(
        entry(&out, "m1").expect("m1")["fieldsV1"],
        json!({"f:data": {"f:a": {}}})
    );
    let stored = api.get("c").await.expect("get");
    assert_eq!(stored.data.expect("data").keys().collect::<Vec<_>>(), ["a"]);
}

#[tokio::test]
async fn two_managers_applying_the_same_value_share_the_field() {
    let env = TestEnv::start().await.expect("start");
    let api: Api<ConfigMap> = Api::default_namespaced(env.client());
    apply_cm(&api, "m1", false, json!({"a": "1", "b": "2"}))
        .await
        .expect("apply m1");
    let shared = apply_cm(&api, "m2", false, json!({"a": "1"}))
        .await
        .expect("same value: no conflict");
    assert_eq!(
        entry(&shared, "m2").expect("m2")["fieldsV1"],
        json!({"f:data": {"f:a": {}}})
    );
    assert_eq!(
        entry(&shared, "m1").expect("m1")["fieldsV1"],
        json!({"f:data": {"f:a": {}, "f:b": {}}})
    );
    // m1 gives up a and b: b goes, a stays because m2 still owns it.
    let out = apply_cm(&api, "m1", false, Value::Null)
        .await
        .expect("apply");
    assert_eq!(out["data"], json!({"a": "1"}));
    assert!(entry(&out, "m1").is_none(), "m1 owns nothing: {out}");
}

#[tokio::test]
async fn changing_another_managers_fields_is_a_conflict_with_one_cause_per_field() {
    let env = TestEnv::start().await.expect("start");
    let api: Api<ConfigMap> = Api::default_namespaced(env.client());
    let before = apply_cm(&api, "m1", false, json!({"a": "1", "b": "2"}))
        .await
        .expect("apply m1");
    let body = cm(json!({"a": "9", "b": "8"})).to_string();
    let a = send(
        &env,
        Method::PATCH,
        &format!("{CMS}/c?fieldManager=m2&force=false"),
        "application/apply-patch+yaml",
        &body,
    )
    .await;
    assert_eq!(a.code, 409, "{}", a.body);
    assert_eq!(a.body["reason"], "Conflict");
    assert_eq!(
        a.body["message"],
        "Apply failed with 2 conflicts: conflicts with \"m1\":\n- .data.a\n- .data.b"
    );
    assert_eq!(
        a.body["details"]["causes"],
        json!([
            {"reason": "FieldManagerConflict", "message": "conflict with \"m1\"", "field": ".data.a"},
            {"reason": "FieldManagerConflict", "message": "conflict with \"m1\"", "field": ".data.b"}
        ])
    );
    let stored = serde_json::to_value(api.get("c").await.expect("get")).expect("json");
    assert_eq!(rv(&stored), rv(&before), "nothing was written");

    // One conflict: the singular message of Kubernetes.
    let err = apply_cm(&api, "m2", false, json!({"a": "9"}))
        .await
        .expect_err("conflict");
    match err {
        kube::Error::Api(s) => {
            assert_eq!(s.code, 409);
            assert_eq!(
                s.message,
                "Apply failed with 1 conflict: conflict with \"m1\": .data.a"
            );
        }
        other => panic!("unexpected {other}"),
    }
}

#[tokio::test]
async fn force_wins_and_moves_ownership() {
    let env = TestEnv::start().await.expect("start");
    let api: Api<ConfigMap> = Api::default_namespaced(env.client());
    apply_cm(&api, "m1", false, json!({"a": "1", "b": "2"}))
        .await
        .expect("apply m1");
    let out = apply_cm(&api, "m2", true, json!({"a": "9"}))
        .await
        .expect("forced");
    assert_eq!(out["data"], json!({"a": "9", "b": "2"}));
    assert_eq!(
        entry(&out, "m1").expect("m1")["fieldsV1"],
        json!({"f:data": {"f:b": {}}})
    );
    assert_eq!(
        entry(&out, "m2").expect("m2")["fieldsV1"],
        json!({"f:data": {"f:a": {}}})
    );
    // m1 leaving a out now does not remove it: m2 owns it.
    let out = apply_cm(&api, "m1", false, json!({"b": "2"}))
        .await
        .expect("apply m1");
    assert_eq!(out["data"], json!({"a": "9", "b": "2"}));
}

#[tokio::test]
async fn other_writes_record_update_ownership_that_appliers_must_force() {
    let env = TestEnv::start().await.expect("start");
    let api: Api<ConfigMap> = Api::default_namespaced(env.client());
    let obj: ConfigMap = serde_json::from_value(cm(json!({"a": "1", "b": "2"}))).expect("cm");
    let pp = PostParams {
        field_manager: Some("creator".into()),
        ..PostParams::default()
    };
    let created = serde_json::to_value(api.create(&pp, &obj).await.expect("create")).expect("json");
    let e = entry(&created, "creator").expect("creator");
    assert_eq!(e["operation"], "Update");
    assert_eq!(
        e["fieldsV1"],
        json!({"f:data": {".": {}, "f:a": {}, "f:b": {}}})
    );

    // A PUT of the same object is a no-op: same resourceVersion, same entries.
    let mut same: ConfigMap = serde_json::from_value(created.clone()).expect("cm");
    same.metadata.managed_fields = None;
    let put = serde_json::to_value(api.replace("c", &pp, &same).await.expect("put")).expect("json");
    assert_eq!(rv(&put), rv(&created));
    assert_eq!(
        put["metadata"]["managedFields"],
        created["metadata"]["managedFields"]
    );

    // A merge patch by another manager takes the field it changes.
    let mp = PatchParams {
        field_manager: Some("editor".into()),
        ..PatchParams::default()
    };
    let patched = api
        .patch("c", &mp, &Patch::Merge(json!({"data": {"a": "5"}})))
        .await
        .expect("merge patch");
    let patched = serde_json::to_value(patched).expect("json");
    assert_eq!(
        entry(&patched, "editor").expect("editor")["fieldsV1"],
        json!({"f:data": {"f:a": {}}})
    );
    assert_eq!(
        entry(&patched, "creator").expect("creator")["fieldsV1"],
        json!({"f:data": {".": {}, "f:b": {}}})
    );

    // An applier changing b conflicts with the Update manager, named with its apiVersion.
    let err = apply_cm(&api, "applier", false, json!({"b": "7"}))
        .await
        .expect_err("conflict");
    match err {
        kube::Error::Api(s) => assert_eq!(
            s.message,
            "Apply failed with 1 conflict: conflict with \"creator\" using v1: .data.b"
        ),
        other => panic!("unexpected {other}"),
    }
    let out = apply_cm(&api, "applier", true, json!({"b": "7"}))
        .await
        .expect("forced");
    assert_eq!(out["data"], json!({"a": "5", "b": "7"}));
    assert_eq!(
        entry(&out, "creator").expect("creator keeps the data map itself")["fieldsV1"],
        json!({"f:data": {}})
    );
}

#[tokio::test]
async fn the_user_agent_names_the_manager_when_no_field_manager_is_given() {
    let env = TestEnv::start().await.expect("start");
    let req = Request::builder()
        .method(Method::POST)
        .uri(CMS)
        .header("content-type", "application/json")
        .header("user-agent", "kubectl/v1.32.4 (linux/amd64) kubernetes/abc")
        .body(kube::client::Body::from(
            cm(json!({"a": "1"})).to_string().into_bytes(),
        ))
        .expect("request");
    let resp = env.client().send(req).await.expect("response");
    assert_eq!(resp.status().as_u16(), 201);
    let bytes = resp.into_body().collect().await.expect("body").to_bytes();
    let created: Value = serde_json::from_slice(&bytes).expect("json");
    assert_eq!(
        entry(&created, "kubectl").expect("kubectl")["operation"],
        "Update"
    );
}

fn deployment(containers: Value) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
           "spec": {"selector": {"matchLabels": {"app": "d"}},
                    "template": {"metadata": {"labels": {"app": "d"}},
                                 "spec": {"containers": containers}}}})
}

#[tokio::test]
async fn containers_of_two_managers_merge_by_name() {
    let env = TestEnv::start().await.expect("start");
    let api: Api<Deployment> = Api::default_namespaced(env.client());
    api.patch(
        "d",
        &PatchParams::apply("m1"),
        &Patch::Apply(deployment(json!([{"name": "a", "image": "a:1"}]))),
    )
    .await
    .expect("apply m1");
    let m2 = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
        "spec": {"template": {"spec": {"containers": [{"name": "b", "image": "b:1"}]}}}});
    let out = api
        .patch("d", &PatchParams::apply("m2"), &Patch::Apply(m2))
        .await
        .expect("apply m2: another container, no conflict");
    let names: Vec<String> = out
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .map(|p| p.containers.iter().map(|c| c.name.clone()).collect())
        .unwrap_or_default();
    assert_eq!(names, ["a", "b"]);
    let out = serde_json::to_value(out).expect("json");
    assert_eq!(
        entry(&out, "m2").expect("m2")["fieldsV1"],
        json!({"f:spec": {"f:template": {"f:spec": {"f:containers": {
            "k:{\"name\":\"b\"}": {".": {}, "f:image": {}, "f:name": {}}}}}}})
    );
    // m1 changes its own container's image; b stays.
    let out = api
        .patch(
            "d",
            &PatchParams::apply("m1"),
            &Patch::Apply(deployment(json!([{"name": "a", "image": "a:2"}]))),
        )
        .await
        .expect("apply m1 again");
    let images: Vec<Option<String>> = out
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .map(|p| p.containers.iter().map(|c| c.image.clone()).collect())
        .unwrap_or_default();
    assert_eq!(images, [Some("a:2".into()), Some("b:1".into())]);
    assert_eq!(out.metadata.generation, Some(3), "each spec change counts");
}

#[tokio::test]
async fn apply_through_status_manages_only_status() {
    let env = TestEnv::start().await.expect("start");
    let api: Api<Deployment> = Api::default_namespaced(env.client());
    let created = api
        .patch(
            "d",
            &PatchParams::apply("m1"),
            &Patch::Apply(deployment(json!([{"name": "a", "image": "a:1"}]))),
        )
        .await
        .expect("apply");
    let status = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
        "spec": {"replicas": 7}, "status": {"replicas": 3, "readyReplicas": 2}});
    let out = api
        .patch_status("d", &PatchParams::apply("ctrl"), &Patch::Apply(status))
        .await
        .expect("apply status");
    assert_eq!(out.status.as_ref().and_then(|s| s.replicas), Some(3));
    assert_eq!(
        out.spec.as_ref().and_then(|s| s.replicas),
        created.spec.as_ref().and_then(|s| s.replicas),
        "spec is not written through /status"
    );
    assert_eq!(out.metadata.generation, created.metadata.generation);
    let out = serde_json::to_value(out).expect("json");
    let e = entry(&out, "ctrl").expect("ctrl");
    assert_eq!(e["subresource"], "status");
    assert_eq!(e["operation"], "Apply");
    assert_eq!(
        e["fieldsV1"],
        json!({"f:status": {"f:readyReplicas": {}, "f:replicas": {}}})
    );
    // A status apply on a missing object is a 404.
    let err = api
        .patch_status(
            "nothere",
            &PatchParams::apply("ctrl"),
            &Patch::Apply(json!({"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "nothere"}, "status": {"replicas": 1}})),
        )
        .await
        .expect_err("missing");
    assert!(matches!(err, kube::Error::Api(s) if s.code == 404));
}

#[tokio::test]
async fn an_apply_body_that_is_not_yaml_is_a_bad_request() {
    let env = TestEnv::start().await.expect("start");
    let a = send(
        &env,
        Method::PATCH,
        &format!("{CMS}/c?fieldManager=m1"),
        "application/apply-patch+yaml",
        "kind: [unclosed\n  : : :",
    )
    .await;
    assert_eq!(a.code, 400, "{}", a.body);
    assert_eq!(a.body["reason"], "BadRequest");
    assert!(
        a.body["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("error decoding YAML")),
        "{}",
        a.body
    );
}

#[tokio::test]
async fn apply_without_a_field_manager_is_invalid() {
    let env = TestEnv::start().await.expect("start");
    let a = send(
        &env,
        Method::PATCH,
        &format!("{CMS}/c"),
        "application/apply-patch+yaml",
        &cm(json!({"a": "1"})).to_string(),
    )
    .await;
    assert_eq!(a.code, 422, "{}", a.body);
    assert_eq!(
        a.body["message"],
        "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch"
    );
}

#[tokio::test]
async fn force_on_a_merge_patch_is_invalid() {
    let env = TestEnv::start().await.expect("start");
    let api: Api<ConfigMap> = Api::default_namespaced(env.client());
    apply_cm(&api, "m1", false, json!({"a": "1"}))
        .await
        .expect("apply");
    let a = send(
        &env,
        Method::PATCH,
        &format!("{CMS}/c?force=true"),
        "application/merge-patch+json",
        r#"{"data":{"a":"2"}}"#,
    )
    .await;
    assert_eq!(a.code, 422, "{}", a.body);
    assert_eq!(
        a.body["message"],
        "PatchOptions.meta.k8s.io \"\" is invalid: force: Forbidden: may not be specified for non-apply patch"
    );
}

#[tokio::test]
async fn merge_patches_may_not_change_name_or_uid() {
    let env = TestEnv::start().await.expect("start");
    let api: Api<ConfigMap> = Api::default_namespaced(env.client());
    let before = apply_cm(&api, "m1", false, json!({"a": "1"}))
        .await
        .expect("apply");
    let a = send(
        &env,
        Method::PATCH,
        &format!("{CMS}/c"),
        "application/merge-patch+json",
        r#"{"metadata":{"name":"other"}}"#,
    )
    .await;
    assert_eq!(a.code, 400, "{}", a.body);
    assert_eq!(
        a.body["message"],
        "the name of the object (other) does not match the name on the URL (c)"
    );
    let a = send(
        &env,
        Method::PATCH,
        &format!("{CMS}/c"),
        "application/merge-patch+json",
        r#"{"metadata":{"uid":"00000000-0000-4000-8000-000000000000"}}"#,
    )
    .await;
    assert_eq!(a.code, 422, "{}", a.body);
    assert_eq!(a.body["reason"], "Invalid");
    assert_eq!(
        a.body["message"],
        "ConfigMap \"c\" is invalid: metadata.uid: Invalid value: \"00000000-0000-4000-8000-000000000000\": field is immutable"
    );
    let after = serde_json::to_value(api.get("c").await.expect("get")).expect("json");
    assert_eq!(rv(&after), rv(&before));
    assert!(api.get_opt("other").await.expect("get").is_none());
}

#[tokio::test]
async fn custom_resource_lists_of_type_map_merge_per_key() {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    use kube::api::DynamicObject;
    use kube::discovery::ApiResource;

    let env = TestEnv::start().await.expect("start");
    let crds: Api<CustomResourceDefinition> = Api::all(env.client());
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {
                        "ports": {"type": "array", "x-kubernetes-list-type": "map",
                            "x-kubernetes-list-map-keys": ["name"],
                            "items": {"type": "object", "required": ["name"], "properties": {
                                "name": {"type": "string"}, "port": {"type": "integer"}}}}}}}}}}]}
    }))
    .expect("crd");
    crds.create(&PostParams::default(), &crd)
        .await
        .expect("create crd");
    let ar = ApiResource {
        group: "example.com".into(),
        version: "v1".into(),
        api_version: "example.com/v1".into(),
        kind: "Widget".into(),
        plural: "widgets".into(),
    };
    let widgets: Api<DynamicObject> = Api::namespaced_with(env.client(), "default", &ar);
    let body = |name: &str, port: i64| {
        json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"},
               "spec": {"ports": [{"name": name, "port": port}]}})
    };
    kore_testenv::wait_for(std::time::Duration::from_secs(10), || {
        let widgets = widgets.clone();
        let b = body("http", 80);
        async move {
            widgets
                .patch("w", &PatchParams::apply("m1"), &Patch::Apply(b))
                .await
                .ok()
        }
    })
    .await
    .expect("the custom resource is served");
    let out = widgets
        .patch(
            "w",
            &PatchParams::apply("m2"),
            &Patch::Apply(body("https", 443)),
        )
        .await
        .expect("apply m2");
    let out = serde_json::to_value(out).expect("json");
    assert_eq!(
        out["spec"]["ports"],
        json!([{"name": "http", "port": 80}, {"name": "https", "port": 443}])
    );
    assert_eq!(
        entry(&out, "m2").expect("m2")["fieldsV1"],
        json!({"f:spec": {"f:ports": {"k:{\"name\":\"https\"}": {".": {}, "f:name": {}, "f:port": {}}}}})
    );
}

#[tokio::test]
async fn an_applied_object_gets_defaults_that_nobody_owns() {
    let env = TestEnv::start().await.expect("start");
    let api: Api<Deployment> = Api::default_namespaced(env.client());
    let out = api
        .patch(
            "d",
            &PatchParams::apply("m1"),
            &Patch::Apply(deployment(json!([{"name": "a", "image": "a:1"}]))),
        )
        .await
        .expect("apply");
    let spec = out.spec.clone().expect("a spec");
    assert_eq!(spec.replicas, Some(1));
    assert_eq!(spec.revision_history_limit, Some(10));
    assert_eq!(
        spec.strategy.and_then(|s| s.type_).as_deref(),
        Some("RollingUpdate")
    );
    let out = serde_json::to_value(out).expect("json");
    let owned = &entry(&out, "m1").expect("m1")["fieldsV1"]["f:spec"];
    assert!(owned.get("f:replicas").is_none(), "{owned}");
    assert!(owned.get("f:strategy").is_none(), "{owned}");
    // Re-applying the same intent leaves the defaults alone and writes nothing.
    let again = api
        .patch(
            "d",
            &PatchParams::apply("m1"),
            &Patch::Apply(deployment(json!([{"name": "a", "image": "a:1"}]))),
        )
        .await
        .expect("apply again");
    assert_eq!(
        again.metadata.resource_version.as_deref(),
        out["metadata"]["resourceVersion"].as_str()
    );
}

#[tokio::test]
async fn strict_field_validation_refuses_unknown_fields_in_an_apply_and_dry_run_writes_nothing() {
    let env = TestEnv::start().await.expect("start");
    let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
                      "data": {"a": "1"}, "bogus": true})
    .to_string();
    let a = send(
        &env,
        Method::PATCH,
        &format!("{CMS}/c?fieldManager=m1&fieldValidation=Strict"),
        "application/apply-patch+yaml",
        &body,
    )
    .await;
    assert_eq!(a.code, 400, "{}", a.body);
    assert!(
        a.body["message"]
            .as_str()
            .is_some_and(|m| m.contains("unknown field \"bogus\"")),
        "{}",
        a.body
    );
    let a = send(
        &env,
        Method::PATCH,
        &format!("{CMS}/c?fieldManager=m1&dryRun=All"),
        "application/apply-patch+yaml",
        &cm(json!({"a": "1"})).to_string(),
    )
    .await;
    assert_eq!(a.code, 201, "{}", a.body);
    assert_eq!(a.body["data"], json!({"a": "1"}));
    let api: Api<ConfigMap> = Api::default_namespaced(env.client());
    assert!(api.get_opt("c").await.expect("get").is_none());
}
