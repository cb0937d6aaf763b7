//! CustomResourceDefinitions and custom resources against an in-process kore-apiserver,
//! through the `kube` crate (typed CRDs, `DynamicObject` custom resources) and raw requests
//! where headers matter (warnings, tables, content types).

use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use http::{Method, Request};
use http_body_util::BodyExt;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kore_testenv::TestEnv;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch,
    PatchParams, PostParams, WatchEvent, WatchParams,
};
use kube::core::Status;
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(5);

/// A Widget CRD: namespaced, v1 served and stored, status and scale subresources, printer
/// columns, `schema` as the v1 schema.
fn widget_crd(schema: Value) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "kind": "Widget", "shortNames": ["wd"], "categories": ["toys"]},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": schema},
                "subresources": {
                    "status": {},
                    "scale": {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas",
                              "labelSelectorPath": ".status.selector"}
                },
                "additionalPrinterColumns": [
                    {"name": "Size", "type": "integer", "jsonPath": ".spec.size"},
                    {"name": "Ready", "type": "string", "jsonPath": ".status.conditions[?(@.type==\"Ready\")].status"},
                    {"name": "Color", "type": "string", "jsonPath": ".spec.color", "priority": 1},
                    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}
                ]
            }]
        }
    })
}

fn widget_schema() -> Value {
    json!({"type": "object", "properties": {
        "spec": {"type": "object", "properties": {
            "size": {"type": "integer", "minimum": 1, "maximum": 10, "default": 1},
            "color": {"type": "string", "enum": ["red", "blue"]},
            "replicas": {"type": "integer"},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
        }},
        "status": {"type": "object", "properties": {
            "replicas": {"type": "integer"},
            "selector": {"type": "string"},
            "phase": {"type": "string"},
            "conditions": {"type": "array", "items": {"type": "object", "properties": {
                "type": {"type": "string"}, "status": {"type": "string"}}}}
        }}
    }})
}

fn crds(env: &TestEnv) -> Api<CustomResourceDefinition> {
    Api::all(env.client())
}

fn widget_resource(version: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("example.com", version, "Widget"),
        "widgets",
    )
}

fn widgets(env: &TestEnv) -> Api<DynamicObject> {
    Api::namespaced_with(env.client(), "default", &widget_resource("v1"))
}

fn widget(name: &str, spec: Value) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"name": name}, "spec": spec
    }))
    .expect("a valid object")
}

fn api_error(e: kube::Error) -> Status {
    match e {
        kube::Error::Api(s) => *s,
        other => panic!("expected an API error, got {other:?}"),
    }
}

fn condition(crd: &CustomResourceDefinition, kind: &str) -> Option<(String, String)> {
    crd.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == kind)
        .map(|c| (c.status.clone(), c.reason.clone().unwrap_or_default()))
}

/// Creates a CRD and waits until it is Established.
async fn establish(env: &TestEnv, crd: Value) -> CustomResourceDefinition {
    let crd: CustomResourceDefinition = serde_json::from_value(crd).expect("a valid CRD");
    let name = crd.metadata.name.clone().expect("named");
    crds(env)
        .create(&PostParams::default(), &crd)
        .await
        .expect("create CRD");
    wait_established(env, &name).await
}

async fn wait_established(env: &TestEnv, name: &str) -> CustomResourceDefinition {
    let api = crds(env);
    kore_testenv::wait_for(WAIT, || async {
        let c = api.get(name).await.ok()?;
        (condition(&c, "Established").map(|c| c.0).as_deref() == Some("True")).then_some(c)
    })
    .await
    .expect("the CRD becomes Established")
}

/// A raw request's answer.
struct Answer {
    code: u16,
    warnings: Vec<String>,
    body: Value,
}

async fn send(
    env: &TestEnv,
    method: Method,
    path: &str,
    content_type: &str,
    accept: &str,
    body: Value,
) -> Answer {
    let bytes = if body.is_null() {
        Vec::new()
    } else {
        serde_json::to_vec(&body).expect("json")
    };
    let req = Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", content_type)
        .header("accept", accept)
        .body(kube::client::Body::from(bytes))
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
        warnings,
        body,
    }
}

const TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json";
const JSON: &str = "application/json";
const WIDGETS: &str = "/apis/example.com/v1/namespaces/default/widgets";

fn causes(status: &Status) -> Vec<String> {
    status
        .details
        .as_ref()
        .map(|d| d.causes.iter().map(|c| c.field.clone()).collect())
        .unwrap_or_default()
}

#[tokio::test]
async fn a_created_crd_is_established_and_serves_crud_list_and_watch() {
    let env = TestEnv::start().await.expect("start");
    let created: CustomResourceDefinition =
        serde_json::from_value(widget_crd(widget_schema())).expect("crd");
    let created = crds(&env)
        .create(&PostParams::default(), &created)
        .await
        .expect("create");
    // The 201 carries defaults and an empty status, as Kubernetes answers.
    assert_eq!(created.spec.names.list_kind.as_deref(), Some("WidgetList"));
    assert_eq!(created.spec.names.singular.as_deref(), Some("widget"));
    let status = created.status.clone().expect("status");
    assert_eq!(status.stored_versions, Some(vec!["v1".to_string()]));
    assert_eq!(created.metadata.generation, Some(1));

    let crd = wait_established(&env, "widgets.example.com").await;
    assert_eq!(
        condition(&crd, "NamesAccepted"),
        Some(("True".into(), "NoConflicts".into()))
    );
    assert_eq!(
        condition(&crd, "Established"),
        Some(("True".into(), "InitialNamesAccepted".into()))
    );
    let accepted = crd
        .status
        .and_then(|s| s.accepted_names)
        .expect("accepted names");
    assert_eq!(
        (accepted.plural.as_str(), accepted.kind.as_str()),
        ("widgets", "Widget")
    );
    assert_eq!(accepted.short_names, Some(vec!["wd".to_string()]));

    let api = widgets(&env);
    let lp = ListParams::default();
    let rv = api
        .list(&lp)
        .await
        .expect("empty list")
        .metadata
        .resource_version
        .expect("rv");
    let mut events = api
        .watch(&WatchParams::default(), &rv)
        .await
        .expect("watch")
        .boxed();
    let w = api
        .create(
            &PostParams::default(),
            &widget("w1", json!({"size": 3, "color": "red"})),
        )
        .await
        .expect("create");
    assert_eq!(w.metadata.generation, Some(1));
    assert_eq!(w.data["spec"]["size"], 3);
    let got = api.get("w1").await.expect("get");
    assert_eq!(got.metadata.uid, w.metadata.uid);
    let patched = api
        .patch(
            "w1",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"size": 4}})),
        )
        .await
        .expect("merge patch");
    assert_eq!(patched.data["spec"]["size"], 4);
    assert_eq!(patched.metadata.generation, Some(2));
    let list = api.list(&lp).await.expect("list");
    assert_eq!(list.items.len(), 1);
    api.delete("w1", &DeleteParams::default())
        .await
        .expect("delete");
    let mut seen = Vec::new();
    while seen.len() < 3 {
        match tokio::time::timeout(WAIT, events.try_next())
            .await
            .expect("an event in time")
            .expect("ok")
        {
            Some(WatchEvent::Added(o)) => seen.push(("ADDED", o.data["spec"]["size"].clone())),
            Some(WatchEvent::Modified(o)) => {
                seen.push(("MODIFIED", o.data["spec"]["size"].clone()))
            }
            Some(WatchEvent::Deleted(o)) => seen.push(("DELETED", o.data["spec"]["size"].clone())),
            Some(_) => {}
            None => panic!("watch ended"),
        }
    }
    assert_eq!(
        seen,
        [
            ("ADDED", json!(3)),
            ("MODIFIED", json!(4)),
            ("DELETED", json!(4))
        ]
    );
    assert_eq!(api_error(api.get("w1").await.expect_err("gone")).code, 404);
}

#[tokio::test]
async fn discovery_and_openapi_show_the_custom_resource() {
    let env = TestEnv::start().await.expect("start");
    establish(&env, widget_crd(widget_schema())).await;
    let discovery = kube::Discovery::new(env.client())
        .run_aggregated()
        .await
        .expect("aggregated discovery");
    let (ar, caps) = discovery
        .groups()
        .find(|g| g.name() == "example.com")
        .and_then(|g| g.recommended_kind("Widget"))
        .expect("Widget discovered");
    assert_eq!(ar.plural, "widgets");
    assert!(
        caps.subresources
            .iter()
            .any(|(s, _)| s.plural == "widgets/status" || s.plural == "status")
    );

    let legacy = send(
        &env,
        Method::GET,
        "/apis/example.com/v1",
        "",
        JSON,
        Value::Null,
    )
    .await;
    let entry = legacy.body["resources"]
        .as_array()
        .and_then(|r| r.iter().find(|e| e["name"] == "widgets"))
        .cloned()
        .expect("legacy entry");
    assert_eq!(entry["shortNames"], json!(["wd"]));
    assert_eq!(entry["categories"], json!(["toys"]));
    assert_eq!(entry["singularName"], "widget");
    let names: Vec<&str> = legacy.body["resources"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| e["name"].as_str())
        .collect();
    assert_eq!(names, ["widgets", "widgets/scale", "widgets/status"]);

    let index = send(&env, Method::GET, "/openapi/v3", "", JSON, Value::Null).await;
    let url = index.body["paths"]["apis/example.com/v1"]["serverRelativeURL"]
        .as_str()
        .expect("the group version is in the OpenAPI index")
        .to_string();
    let doc = send(&env, Method::GET, &url, "", JSON, Value::Null).await;
    let patch =
        &doc.body["paths"]["/apis/example.com/v1/namespaces/{namespace}/widgets/{name}"]["patch"];
    assert_eq!(patch["x-kubernetes-group-version-kind"]["kind"], "Widget");
    let schema = &doc.body["components"]["schemas"]["io.k8s.api.example.v1.Widget"];
    assert_eq!(
        schema["properties"]["spec"]["properties"]["size"]["type"], "integer",
        "{}",
        doc.body
    );
    assert_eq!(
        schema["x-kubernetes-group-version-kind"][0]["kind"],
        "Widget"
    );
}

#[tokio::test]
async fn invalid_crds_are_rejected_with_one_cause_per_field() {
    let env = TestEnv::start().await.expect("start");
    let post = |body: Value| {
        let env = &env;
        async move {
            send(
                env,
                Method::POST,
                "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                JSON,
                JSON,
                body,
            )
            .await
        }
    };
    // Bad names and group.
    let mut bad = widget_crd(widget_schema());
    bad["metadata"]["name"] = json!("gadgets.example.com");
    bad["spec"]["group"] = json!("example");
    bad["spec"]["names"]["plural"] = json!("Widgets");
    let a = post(bad).await;
    assert_eq!(a.code, 422, "{}", a.body);
    let fields: Vec<&str> = a.body["details"]["causes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["field"].as_str())
        .collect();
    assert_eq!(fields, ["metadata.name", "spec.group", "spec.names.plural"]);
    let message = a.body["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with(
            "CustomResourceDefinition.apiextensions.k8s.io \"gadgets.example.com\" is invalid: ["
        ),
        "{message}"
    );
    assert!(
        message.contains(
            "spec.group: Invalid value: \"example\": should be a domain with at least one dot"
        ),
        "{message}"
    );

    // Two storage versions, one without a schema.
    let mut two = widget_crd(widget_schema());
    two["spec"]["versions"] = json!([
        {"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {"type": "object"}}},
        {"name": "v2", "served": true, "storage": true}
    ]);
    let a = post(two).await;
    assert_eq!(a.code, 422);
    let message = a.body["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("must have exactly one version marked as storage version"),
        "{message}"
    );
    assert!(
        message.contains(
            "spec.versions[1].schema.openAPIV3Schema: Required value: schemas are required"
        ),
        "{message}"
    );

    // Bad printer column type and scale path.
    let mut columns = widget_crd(widget_schema());
    columns["spec"]["versions"][0]["additionalPrinterColumns"][0]["type"] = json!("color");
    columns["spec"]["versions"][0]["subresources"]["scale"]["specReplicasPath"] =
        json!(".status.replicas");
    let a = post(columns).await;
    assert_eq!(a.code, 422);
    let message = a.body["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(
            "spec.versions[0].additionalPrinterColumns[0].type: Unsupported value: \"color\""
        ),
        "{message}"
    );
    assert!(
        message.contains("should be a json path under .spec"),
        "{message}"
    );
    assert!(
        crds(&env)
            .list(&ListParams::default())
            .await
            .expect("list")
            .items
            .is_empty()
    );
}

#[tokio::test]
async fn a_non_structural_schema_is_rejected_with_the_reasons() {
    let env = TestEnv::start().await.expect("start");
    let schema = json!({"type": "object", "properties": {
        "spec": {"properties": {"size": {"type": "integer"}}}
    }});
    let a = send(
        &env,
        Method::POST,
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        JSON,
        JSON,
        widget_crd(schema),
    )
    .await;
    assert_eq!(a.code, 422, "{}", a.body);
    let fields: Vec<&str> = a.body["details"]["causes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["field"].as_str())
        .collect();
    assert!(
        fields.contains(&"spec.validation.openAPIV3Schema.properties[spec].type"),
        "{}",
        a.body
    );
}

#[tokio::test]
async fn conflicting_names_are_not_accepted() {
    let env = TestEnv::start().await.expect("start");
    establish(&env, widget_crd(widget_schema())).await;
    // Another CRD in the same group whose kind is Widget.
    let mut other = widget_crd(widget_schema());
    other["metadata"]["name"] = json!("gizmos.example.com");
    other["spec"]["names"] = json!({"plural": "gizmos", "singular": "gizmo", "kind": "Widget"});
    let other: CustomResourceDefinition = serde_json::from_value(other).expect("crd");
    crds(&env)
        .create(&PostParams::default(), &other)
        .await
        .expect("create");
    let api = crds(&env);
    let c = kore_testenv::wait_for(WAIT, || async {
        let c = api.get("gizmos.example.com").await.ok()?;
        condition(&c, "NamesAccepted").is_some().then_some(c)
    })
    .await
    .expect("names decided");
    assert_eq!(
        condition(&c, "NamesAccepted"),
        Some(("False".into(), "KindConflict".into()))
    );
    assert_eq!(
        condition(&c, "Established"),
        Some(("False".into(), "NotAccepted".into()))
    );
    let message = c.status.and_then(|s| s.conditions).unwrap_or_default()[0]
        .message
        .clone();
    assert_eq!(message.as_deref(), Some("\"Widget\" is already in use"));
    let a = send(
        &env,
        Method::GET,
        "/apis/example.com/v1/namespaces/default/gizmos",
        "",
        JSON,
        Value::Null,
    )
    .await;
    assert_eq!(a.code, 404);

    // A built-in's plural in its own group conflicts too.
    let mut builtin = widget_crd(widget_schema());
    builtin["metadata"]["name"] = json!("roles.rbac.authorization.k8s.io");
    builtin["spec"]["group"] = json!("rbac.authorization.k8s.io");
    builtin["spec"]["names"] = json!({"plural": "roles", "singular": "myrole", "kind": "MyRole"});
    let builtin: CustomResourceDefinition = serde_json::from_value(builtin).expect("crd");
    crds(&env)
        .create(&PostParams::default(), &builtin)
        .await
        .expect("create");
    let c = kore_testenv::wait_for(WAIT, || async {
        let c = api.get("roles.rbac.authorization.k8s.io").await.ok()?;
        condition(&c, "NamesAccepted").is_some().then_some(c)
    })
    .await
    .expect("names decided");
    assert_eq!(
        condition(&c, "NamesAccepted"),
        Some(("False".into(), "PluralConflict".into()))
    );
}

#[tokio::test]
async fn two_served_versions_share_one_stored_object() {
    let env = TestEnv::start().await.expect("start");
    let mut crd = widget_crd(widget_schema());
    crd["spec"]["versions"] = json!([
        {"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": widget_schema()}},
        {"name": "v1beta1", "served": true, "storage": false, "deprecated": true,
         "schema": {"openAPIV3Schema": widget_schema()}},
        {"name": "v1alpha1", "served": false, "storage": false,
         "schema": {"openAPIV3Schema": widget_schema()}}
    ]);
    establish(&env, crd).await;
    let beta: Api<DynamicObject> =
        Api::namespaced_with(env.client(), "default", &widget_resource("v1beta1"));
    let mut w = widget("w1", json!({"size": 2}));
    w.types = Some(kube::api::TypeMeta {
        api_version: "example.com/v1beta1".into(),
        kind: "Widget".into(),
    });
    let created = beta
        .create(&PostParams::default(), &w)
        .await
        .expect("create through v1beta1");
    assert_eq!(
        created.types.as_ref().map(|t| t.api_version.as_str()),
        Some("example.com/v1beta1")
    );
    let through_v1 = widgets(&env).get("w1").await.expect("get through v1");
    assert_eq!(
        through_v1.types.as_ref().map(|t| t.api_version.as_str()),
        Some("example.com/v1")
    );
    assert_eq!(through_v1.data["spec"]["size"], 2);
    assert_eq!(through_v1.metadata.uid, created.metadata.uid);
    // Stored once, under the storage version.
    let stored = env
        .server()
        .registry()
        .store()
        .keys("/example.com/widgets/");
    let stored: Vec<String> = stored.iter().map(|k| k.to_string()).collect();
    assert_eq!(stored, ["/example.com/widgets/default/w1"]);
    // The deprecated version warns; the unserved one is not there.
    let a = send(
        &env,
        Method::GET,
        "/apis/example.com/v1beta1/namespaces/default/widgets/w1",
        "",
        JSON,
        Value::Null,
    )
    .await;
    assert_eq!(a.code, 200);
    assert_eq!(
        a.warnings,
        ["299 - \"example.com/v1beta1 Widget is deprecated\""]
    );
    let a = send(
        &env,
        Method::GET,
        "/apis/example.com/v1alpha1/namespaces/default/widgets",
        "",
        JSON,
        Value::Null,
    )
    .await;
    assert_eq!(a.code, 404);
    let a = send(
        &env,
        Method::GET,
        "/apis/example.com",
        "",
        JSON,
        Value::Null,
    )
    .await;
    assert_eq!(a.body["preferredVersion"]["version"], "v1");
    assert_eq!(a.body["versions"].as_array().map(Vec::len), Some(2));
}

#[tokio::test]
async fn status_changes_never_bump_generation_and_the_main_resource_ignores_status() {
    let env = TestEnv::start().await.expect("start");
    establish(&env, widget_crd(widget_schema())).await;
    let api = widgets(&env);
    let mut w = widget("w1", json!({"size": 3}));
    w.data["status"] = json!({"phase": "Set by the client"});
    let created = api
        .create(&PostParams::default(), &w)
        .await
        .expect("create");
    assert!(
        created.data.get("status").is_none(),
        "status is dropped on create"
    );
    assert_eq!(created.metadata.generation, Some(1));

    let st = api
        .patch_status(
            "w1",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Ready"}, "spec": {"size": 9}})),
        )
        .await
        .expect("status patch");
    assert_eq!(st.data["status"]["phase"], "Ready");
    assert_eq!(
        st.data["spec"]["size"], 3,
        "the status endpoint ignores spec"
    );
    assert_eq!(st.metadata.generation, Some(1));

    let main = api
        .patch(
            "w1",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"status": {"phase": "Hacked"}, "metadata": {"labels": {"a": "b"}}}),
            ),
        )
        .await
        .expect("main patch");
    assert_eq!(
        main.data["status"]["phase"], "Ready",
        "the main endpoint ignores status"
    );
    assert_eq!(
        main.metadata.generation,
        Some(1),
        "metadata changes do not bump generation"
    );

    let main = api
        .patch(
            "w1",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"size": 5}})),
        )
        .await
        .expect("spec patch");
    assert_eq!(main.metadata.generation, Some(2));
    // Strategic merge patch is not for custom resources.
    let a = send(
        &env,
        Method::PATCH,
        &format!("{WIDGETS}/w1"),
        "application/strategic-merge-patch+json",
        JSON,
        json!({"spec": {"size": 6}}),
    )
    .await;
    assert_eq!(a.code, 415, "{}", a.body);
}

#[tokio::test]
async fn the_scale_subresource_reads_and_writes_the_declared_paths() {
    let env = TestEnv::start().await.expect("start");
    establish(&env, widget_crd(widget_schema())).await;
    let api = widgets(&env);
    api.create(
        &PostParams::default(),
        &widget("w1", json!({"replicas": 2})),
    )
    .await
    .expect("create");
    api.patch_status(
        "w1",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"replicas": 1, "selector": "app=w1"}})),
    )
    .await
    .expect("status");
    let scale = api.get_scale("w1").await.expect("scale");
    assert_eq!(scale.spec.and_then(|s| s.replicas), Some(2));
    let status = scale.status.expect("scale status");
    assert_eq!(
        (status.replicas, status.selector.as_deref()),
        (1, Some("app=w1"))
    );
    let scaled = api
        .patch_scale(
            "w1",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 5}})),
        )
        .await
        .expect("scale patch");
    assert_eq!(scaled.spec.and_then(|s| s.replicas), Some(5));
    let w = api.get("w1").await.expect("get");
    assert_eq!(w.data["spec"]["replicas"], 5);
    assert_eq!(w.metadata.generation, Some(2));
}

#[tokio::test]
async fn printer_columns_fill_the_table() {
    let env = TestEnv::start().await.expect("start");
    establish(&env, widget_crd(widget_schema())).await;
    let api = widgets(&env);
    api.create(
        &PostParams::default(),
        &widget("w1", json!({"size": 3, "color": "red"})),
    )
    .await
    .expect("create");
    api.patch_status(
        "w1",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"conditions": [{"type": "Synced", "status": "False"}, {"type": "Ready", "status": "True"}]}})),
    )
    .await
    .expect("status");
    let t = send(&env, Method::GET, WIDGETS, "", TABLE, Value::Null).await;
    assert_eq!(t.body["kind"], "Table", "{}", t.body);
    let columns: Vec<(&str, &str, i64)> = t.body["columnDefinitions"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            (
                c["name"].as_str().unwrap_or_default(),
                c["type"].as_str().unwrap_or_default(),
                c["priority"].as_i64().unwrap_or(-1),
            )
        })
        .collect();
    assert_eq!(
        columns,
        [
            ("Name", "string", 0),
            ("Size", "integer", 0),
            ("Ready", "string", 0),
            ("Color", "string", 1),
            ("Age", "date", 0)
        ]
    );
    let cells = &t.body["rows"][0]["cells"];
    assert_eq!(cells[0], "w1");
    assert_eq!(cells[1], 3);
    assert_eq!(cells[2], "True");
    assert_eq!(cells[3], "red");
    assert!(
        cells[4].as_str().is_some_and(|age| age.ends_with('s')),
        "age rendered: {cells}"
    );
    assert_eq!(t.body["rows"][0]["object"]["kind"], "PartialObjectMetadata");
    // A single object too.
    let one = send(
        &env,
        Method::GET,
        &format!("{WIDGETS}/w1"),
        "",
        TABLE,
        Value::Null,
    )
    .await;
    assert_eq!(one.body["rows"][0]["cells"][1], 3);
}

#[tokio::test]
async fn deleting_a_crd_deletes_its_objects_then_stops_serving_it() {
    let env = TestEnv::start().await.expect("start");
    establish(&env, widget_crd(widget_schema())).await;
    let created = crds(&env)
        .get("widgets.example.com")
        .await
        .expect("get the CRD");
    assert_eq!(
        created.metadata.finalizers, None,
        "the cleanup finalizer is added by the delete, not at creation"
    );
    let api = widgets(&env);
    api.create(&PostParams::default(), &widget("free", json!({})))
        .await
        .expect("create");
    let mut held = widget("held", json!({}));
    held.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    api.create(&PostParams::default(), &held)
        .await
        .expect("create held");

    let deleted = send(
        &env,
        Method::DELETE,
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.example.com",
        JSON,
        JSON,
        Value::Null,
    )
    .await;
    assert_eq!(deleted.code, 200);
    assert!(
        deleted.body["metadata"]["deletionTimestamp"].is_string(),
        "{}",
        deleted.body
    );
    assert_eq!(
        deleted.body["metadata"]["finalizers"],
        json!(["customresourcecleanup.apiextensions.k8s.io"])
    );
    let terminating = deleted.body["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == "Terminating"))
        .cloned()
        .expect("a Terminating condition in the response");
    assert_eq!(terminating["reason"], "InstanceDeletionPending");
    assert_eq!(
        terminating["message"],
        "CustomResourceDefinition marked for deletion; CustomResource deletion will begin soon"
    );

    // The held object keeps the CRD terminating; creates are refused meanwhile.
    let crd_api = crds(&env);
    let c = kore_testenv::wait_for(WAIT, || async {
        let c = crd_api.get("widgets.example.com").await.ok()?;
        (condition(&c, "Terminating").map(|c| c.1).as_deref() == Some("InstanceDeletionInProgress"))
            .then_some(c)
    })
    .await
    .expect("terminating");
    assert!(c.metadata.deletion_timestamp.is_some());
    kore_testenv::wait_for(WAIT, || async {
        api.get("free").await.is_err().then_some(())
    })
    .await
    .expect("the free object is deleted");
    let refused = api
        .create(&PostParams::default(), &widget("late", json!({})))
        .await
        .expect_err("no create");
    let refused = api_error(refused);
    assert_eq!(refused.code, 405);
    assert_eq!(refused.reason, "MethodNotAllowed");
    assert_eq!(
        refused.message,
        "create not allowed while custom resource definition is terminating"
    );
    let h = api.get("held").await.expect("held stays");
    assert!(h.metadata.deletion_timestamp.is_some());

    api.patch(
        "held",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .expect("release the object");
    kore_testenv::wait_for(WAIT, || async {
        crd_api
            .get("widgets.example.com")
            .await
            .is_err()
            .then_some(())
    })
    .await
    .expect("the CRD is removed");
    kore_testenv::wait_for(WAIT, || async {
        let a = send(&env, Method::GET, WIDGETS, "", JSON, Value::Null).await;
        (a.code == 404).then_some(())
    })
    .await
    .expect("the endpoint is gone");
    let groups = send(&env, Method::GET, "/apis", "", JSON, Value::Null).await;
    assert!(
        !groups.body.to_string().contains("example.com"),
        "removed from discovery"
    );
    let index = send(&env, Method::GET, "/openapi/v3", "", JSON, Value::Null).await;
    assert!(
        index.body["paths"].get("apis/example.com/v1").is_none(),
        "removed from OpenAPI"
    );
    assert!(
        env.server()
            .registry()
            .store()
            .keys("/example.com/widgets/")
            .is_empty()
    );
}

#[tokio::test]
async fn crd_status_is_written_only_through_the_status_endpoint() {
    let env = TestEnv::start().await.expect("start");
    let crd = establish(&env, widget_crd(widget_schema())).await;
    let mut changed = crd.clone();
    if let Some(s) = changed.status.as_mut() {
        s.stored_versions = Some(vec!["v9".into()]);
    }
    changed.spec.names.short_names = Some(vec!["wd".into(), "wdg".into()]);
    let replaced = crds(&env)
        .replace("widgets.example.com", &PostParams::default(), &changed)
        .await
        .expect("replace");
    assert_eq!(
        replaced.status.and_then(|s| s.stored_versions),
        Some(vec!["v1".to_string()])
    );
    assert_eq!(replaced.metadata.generation, Some(2));
    let c = kore_testenv::wait_for(WAIT, || async {
        let c = crds(&env).get("widgets.example.com").await.ok()?;
        let short = c
            .status
            .as_ref()?
            .accepted_names
            .as_ref()?
            .short_names
            .clone()?;
        (short.len() == 2).then_some(c)
    })
    .await
    .expect("new short names accepted");
    assert!(condition(&c, "Established").is_some());
    // Immutable group.
    let mut moved = c.clone();
    moved.spec.group = "other.com".into();
    let e = crds(&env)
        .replace("widgets.example.com", &PostParams::default(), &moved)
        .await
        .expect_err("immutable");
    let status = api_error(e);
    assert_eq!(status.code, 422);
    assert!(
        causes(&status).contains(&"spec.group".to_string()),
        "{status:?}"
    );
}

#[tokio::test]
async fn a_crd_is_served_again_after_a_restart() {
    let dir = tempfile::tempdir().expect("dir");
    {
        let env = TestEnv::builder()
            .data_dir(dir.path())
            .start()
            .await
            .expect("start");
        establish(&env, widget_crd(widget_schema())).await;
        widgets(&env)
            .create(&PostParams::default(), &widget("w1", json!({"size": 2})))
            .await
            .expect("create");
        env.stop().await;
    }
    // The old server's storage lock goes when its last client handle does.
    let env = kore_testenv::wait_for(WAIT, || async {
        TestEnv::builder().data_dir(dir.path()).start().await.ok()
    })
    .await
    .expect("restart");
    let w = widgets(&env)
        .get("w1")
        .await
        .expect("served right after start");
    assert_eq!(w.data["spec"]["size"], 2);
}

// ---------------------------------------------------------------------------------------------
// Schema-driven behaviour (pruning, defaulting, validation): these need the schema algorithms.
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn unknown_fields_are_pruned_and_reported_per_field_validation() {
    let env = TestEnv::start().await.expect("start");
    establish(&env, widget_crd(widget_schema())).await;
    let body = |name: &str| {
        json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": name},
               "spec": {"size": 2, "foo": 1, "free": {"anything": {"goes": true}}}})
    };
    let warn = send(&env, Method::POST, WIDGETS, JSON, JSON, body("warn")).await;
    assert_eq!(warn.code, 201, "{}", warn.body);
    assert_eq!(warn.warnings, ["299 - \"unknown field \\\"spec.foo\\\"\""]);
    assert!(warn.body["spec"].get("foo").is_none());
    assert_eq!(
        warn.body["spec"]["free"]["anything"]["goes"], true,
        "preserved"
    );

    let ignore = send(
        &env,
        Method::POST,
        &format!("{WIDGETS}?fieldValidation=Ignore"),
        JSON,
        JSON,
        body("ignore"),
    )
    .await;
    assert_eq!(ignore.code, 201);
    assert!(ignore.warnings.is_empty());

    let strict = send(
        &env,
        Method::POST,
        &format!("{WIDGETS}?fieldValidation=Strict"),
        JSON,
        JSON,
        body("strict"),
    )
    .await;
    assert_eq!(strict.code, 400, "{}", strict.body);
    let message = strict.body["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("strict decoding error: unknown field \"spec.foo\""),
        "{message}"
    );

    let read = widgets(&env).get("warn").await.expect("read back");
    assert!(read.data["spec"].get("foo").is_none());
}

#[tokio::test]
async fn defaults_show_on_read_back() {
    let env = TestEnv::start().await.expect("start");
    establish(&env, widget_crd(widget_schema())).await;
    let w = widgets(&env)
        .create(&PostParams::default(), &widget("w1", json!({})))
        .await
        .expect("create");
    assert_eq!(w.data["spec"]["size"], 1);
    assert_eq!(
        widgets(&env).get("w1").await.expect("get").data["spec"]["size"],
        1
    );
}

#[tokio::test]
async fn a_schema_update_applies_to_later_writes() {
    let env = TestEnv::start().await.expect("start");
    establish(&env, widget_crd(widget_schema())).await;
    let api = widgets(&env);
    api.create(&PostParams::default(), &widget("big", json!({"size": 7})))
        .await
        .expect("7 allowed");
    let mut schema = widget_schema();
    schema["properties"]["spec"]["properties"]["size"]["maximum"] = json!(5);
    let mut crd = crds(&env).get("widgets.example.com").await.expect("get");
    crd.spec.versions[0].schema =
        Some(serde_json::from_value(json!({"openAPIV3Schema": schema})).expect("schema"));
    crds(&env)
        .replace("widgets.example.com", &PostParams::default(), &crd)
        .await
        .expect("update");
    let status = kore_testenv::wait_for(WAIT, || async {
        match api
            .create(
                &PostParams::default(),
                &widget("bigger", json!({"size": 7})),
            )
            .await
        {
            Err(kube::Error::Api(s)) => Some(*s),
            Ok(_) => {
                let _ = api.delete("bigger", &DeleteParams::default()).await;
                None
            }
            Err(_) => None,
        }
    })
    .await
    .expect("the new maximum applies");
    assert_eq!(status.code, 422);
    assert_eq!(causes(&status), ["spec.size"]);
    assert_eq!(
        api.get("big").await.expect("old object kept").data["spec"]["size"],
        7
    );
}

/// One schema keyword: a schema for `spec.v`, a valid value and an invalid one.
struct Keyword {
    name: &'static str,
    schema: Value,
    valid: Value,
    invalid: Value,
    /// The cause's field path.
    field: &'static str,
}

fn keywords() -> Vec<Keyword> {
    let k = |name, schema, valid, invalid| Keyword {
        name,
        schema,
        valid,
        invalid,
        field: "spec.v",
    };
    let mut cases = vec![
        k("type", json!({"type": "integer"}), json!(3), json!("three")),
        k(
            "enum",
            json!({"type": "string", "enum": ["a", "b"]}),
            json!("a"),
            json!("c"),
        ),
        k(
            "minimum",
            json!({"type": "integer", "minimum": 2}),
            json!(2),
            json!(1),
        ),
        k(
            "maximum",
            json!({"type": "integer", "maximum": 2}),
            json!(2),
            json!(3),
        ),
        k(
            "exclusiveMinimum",
            json!({"type": "integer", "minimum": 2, "exclusiveMinimum": true}),
            json!(3),
            json!(2),
        ),
        k(
            "exclusiveMaximum",
            json!({"type": "integer", "maximum": 2, "exclusiveMaximum": true}),
            json!(1),
            json!(2),
        ),
        k(
            "minLength",
            json!({"type": "string", "minLength": 2}),
            json!("ab"),
            json!("a"),
        ),
        k(
            "maxLength",
            json!({"type": "string", "maxLength": 2}),
            json!("ab"),
            json!("abc"),
        ),
        k(
            "pattern",
            json!({"type": "string", "pattern": "^[a-z]+$"}),
            json!("abc"),
            json!("ABC"),
        ),
        k(
            "minItems",
            json!({"type": "array", "items": {"type": "string"}, "minItems": 1}),
            json!(["a"]),
            json!([]),
        ),
        k(
            "maxItems",
            json!({"type": "array", "items": {"type": "string"}, "maxItems": 1}),
            json!(["a"]),
            json!(["a", "b"]),
        ),
        k(
            "uniqueItems",
            json!({"type": "array", "items": {"type": "string"}, "uniqueItems": true}),
            json!(["a", "b"]),
            json!(["a", "a"]),
        ),
        k(
            "format",
            json!({"type": "string", "format": "date-time"}),
            json!("2024-05-01T12:00:00Z"),
            json!("yesterday"),
        ),
        k(
            "nullable",
            json!({"type": "object", "nullable": false, "properties": {"a": {"type": "integer", "nullable": true}}, "required": ["a"]}),
            json!({"a": null}),
            json!({}),
        ),
        k(
            "additionalProperties",
            json!({"type": "object", "additionalProperties": {"type": "integer"}}),
            json!({"x": 1}),
            json!({"x": "one"}),
        ),
        k(
            "int-or-string",
            json!({"x-kubernetes-int-or-string": true}),
            json!("50%"),
            json!(true),
        ),
        k(
            "list-type set",
            json!({"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"}),
            json!(["a", "b"]),
            json!(["a", "a"]),
        ),
        k(
            "list-type map",
            json!({"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                   "items": {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}}}),
            json!([{"name": "a"}, {"name": "b"}]),
            json!([{"name": "a"}, {"name": "a"}]),
        ),
        k(
            "embedded-resource",
            json!({"type": "object", "x-kubernetes-embedded-resource": true, "x-kubernetes-preserve-unknown-fields": true}),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}),
            json!({"metadata": {"name": "x"}}),
        ),
        Keyword {
            name: "required",
            schema: json!({"type": "object", "required": ["a"], "properties": {"a": {"type": "string"}}}),
            valid: json!({"a": "x"}),
            invalid: json!({}),
            field: "spec.v.a",
        },
        k(
            "preserve-unknown-fields",
            json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true, "properties": {"n": {"type": "integer"}}}),
            json!({"anything": 1, "n": 2}),
            json!({"n": "two"}),
        ),
    ];
    // Where the cause lands when it is not the value itself.
    for case in &mut cases {
        case.field = match case.name {
            "nullable" | "required" => "spec.v.a",
            "additionalProperties" => "spec.v.x",
            "list-type map" => "spec.v[1]",
            "embedded-resource" => "spec.v.apiVersion",
            "preserve-unknown-fields" => "spec.v.n",
            _ => case.field,
        };
    }
    cases
}

#[tokio::test]
async fn every_schema_keyword_accepts_a_valid_and_rejects_an_invalid_object() {
    let env = TestEnv::start().await.expect("start");
    let cases = keywords();
    let mut props = serde_json::Map::new();
    for (i, case) in cases.iter().enumerate() {
        props.insert(
            format!("k{i}"),
            json!({"type": "object", "properties": {"v": case.schema}}),
        );
    }
    let mut crd = widget_crd(json!({"type": "object", "properties": {
        "spec": {"type": "object", "properties": props}
    }}));
    crd["spec"]["versions"][0]["subresources"] = json!({});
    crd["spec"]["versions"][0]["additionalPrinterColumns"] = json!([]);
    establish(&env, crd).await;
    let api = widgets(&env);
    let mut failures = Vec::new();
    for (i, case) in cases.iter().enumerate() {
        let key = format!("k{i}");
        let ok = widget(&format!("ok-{i}"), json!({}));
        let mut ok = ok;
        ok.data["spec"] = json!({ key.clone(): {"v": case.valid} });
        if let Err(e) = api.create(&PostParams::default(), &ok).await {
            failures.push(format!("{}: valid value rejected: {e}", case.name));
        }
        let mut bad = widget(&format!("bad-{i}"), json!({}));
        bad.data["spec"] = json!({ key.clone(): {"v": case.invalid} });
        let want = case.field.replacen("spec", &format!("spec.{key}"), 1);
        match api.create(&PostParams::default(), &bad).await {
            Ok(_) => failures.push(format!("{}: invalid value accepted", case.name)),
            Err(kube::Error::Api(s)) if s.code == 422 && causes(&s).iter().any(|f| f == &want) => {}
            Err(e) => failures.push(format!(
                "{}: wrong rejection (want a cause at {want}): {e}",
                case.name
            )),
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

#[tokio::test]
async fn invalid_custom_objects_get_422_naming_the_kind_and_each_field() {
    let env = TestEnv::start().await.expect("start");
    establish(&env, widget_crd(widget_schema())).await;
    let e = widgets(&env)
        .create(
            &PostParams::default(),
            &widget("w1", json!({"size": 11, "color": "pink"})),
        )
        .await
        .expect_err("invalid");
    let status = api_error(e);
    assert_eq!(status.code, 422);
    assert!(
        status
            .message
            .starts_with("Widget.example.com \"w1\" is invalid: ["),
        "{}",
        status.message
    );
    let mut fields = causes(&status);
    fields.sort();
    assert_eq!(fields, ["spec.color", "spec.size"]);
}

#[tokio::test]
async fn a_cluster_scoped_crd_serves_objects_without_namespaces() {
    let env = TestEnv::start().await.expect("start");
    let mut crd = widget_crd(widget_schema());
    crd["spec"]["scope"] = json!("Cluster");
    establish(&env, crd).await;
    let api: Api<DynamicObject> = Api::all_with(env.client(), &widget_resource("v1"));
    let w = api
        .create(&PostParams::default(), &widget("w1", json!({"size": 2})))
        .await
        .expect("create");
    assert!(w.metadata.namespace.is_none());
    let a = send(&env, Method::GET, WIDGETS, "", JSON, Value::Null).await;
    assert_eq!(
        a.code, 404,
        "no namespaced path for a cluster-scoped resource"
    );
    let listed: Vec<DynamicObject> = api.list(&ListParams::default()).await.expect("list").items;
    assert_eq!(listed.len(), 1);
    let stream = api
        .watch(&WatchParams::default(), "0")
        .await
        .expect("watch");
    drop(stream);
}

#[tokio::test]
async fn custom_object_names_follow_the_subdomain_rule() {
    let env = TestEnv::start().await.expect("start");
    establish(&env, widget_crd(widget_schema())).await;
    let e = widgets(&env)
        .create(&PostParams::default(), &widget("Bad_Name", json!({})))
        .await
        .expect_err("invalid name");
    let status = api_error(e);
    assert_eq!(status.code, 422);
    assert_eq!(causes(&status), ["metadata.name"]);
}

#[tokio::test]
async fn deleting_a_namespace_deletes_the_custom_objects_in_it() {
    let env = TestEnv::start().await.expect("start");
    establish(&env, widget_crd(widget_schema())).await;
    let nss: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(env.client());
    let ns: k8s_openapi::api::core::v1::Namespace =
        serde_json::from_value(json!({"metadata": {"name": "team"}})).expect("namespace");
    nss.create(&PostParams::default(), &ns)
        .await
        .expect("create namespace");
    let api: Api<DynamicObject> =
        Api::namespaced_with(env.client(), "team", &widget_resource("v1"));
    api.create(&PostParams::default(), &widget("w1", json!({"size": 2})))
        .await
        .expect("create");
    nss.delete("team", &DeleteParams::default())
        .await
        .expect("delete namespace");
    kore_testenv::wait_for(WAIT, || async {
        nss.get("team").await.is_err().then_some(())
    })
    .await
    .expect("the namespace is removed once its custom objects are gone");
    assert!(
        env.server()
            .registry()
            .store()
            .keys("/example.com/widgets/team/")
            .is_empty()
    );
}

#[tokio::test]
async fn a_table_watch_prints_custom_columns() {
    let env = TestEnv::start().await.expect("start");
    establish(&env, widget_crd(widget_schema())).await;
    let list = send(&env, Method::GET, WIDGETS, "", TABLE, Value::Null).await;
    let rv = list.body["metadata"]["resourceVersion"]
        .as_str()
        .expect("rv")
        .to_string();
    widgets(&env)
        .create(&PostParams::default(), &widget("w1", json!({"size": 4})))
        .await
        .expect("create");
    let req = Request::builder()
        .uri(format!(
            "{WIDGETS}?watch=true&resourceVersion={rv}&timeoutSeconds=1"
        ))
        .header("accept", TABLE)
        .body(kube::client::Body::empty())
        .expect("request");
    let resp = env.client().send(req).await.expect("response");
    let bytes = resp.into_body().collect().await.expect("body").to_bytes();
    let first = String::from_utf8_lossy(&bytes)
        .lines()
        .next()
        .unwrap_or_default()
        .to_string();
    let event: Value = serde_json::from_str(&first).expect("a JSON event line");
    assert_eq!(event["type"], "ADDED");
    assert_eq!(event["object"]["kind"], "Table");
    assert_eq!(event["object"]["columnDefinitions"][1]["name"], "Size");
    assert_eq!(event["object"]["rows"][0]["cells"][1], 4);
}

/// The shape of schema kube-derive generates for an operator's `#[derive(CustomResource)]`.
fn derived_schema() -> Value {
    json!({
        "description": "Auto-generated derived type for FooSpec via `CustomResource`",
        "title": "Foo",
        "type": "object",
        "required": ["spec"],
        "properties": {
            "spec": {"type": "object", "required": ["name", "replicas", "mode"], "properties": {
                "name": {"type": "string"},
                "info": {"type": "string", "nullable": true},
                "replicas": {"type": "integer", "format": "int32", "minimum": 0.0},
                "mode": {"type": "string", "enum": ["A", "B"]},
                "ports": {"type": "array", "items": {"type": "integer", "format": "uint16", "minimum": 0.0}},
                "env": {"type": "object", "nullable": true, "additionalProperties": {"type": "string"}},
                "target": {"x-kubernetes-int-or-string": true},
                "choice": {"type": "object", "nullable": true,
                    "oneOf": [{"required": ["a"]}, {"required": ["b"]}],
                    "properties": {"a": {"type": "string"}, "b": {"type": "string"}}}
            }},
            "status": {"type": "object", "nullable": true, "properties": {"ready": {"type": "boolean"}}}
        }
    })
}

#[tokio::test]
async fn a_kube_derive_style_schema_is_accepted_and_enforced() {
    let env = TestEnv::start().await.expect("start");
    let mut crd = widget_crd(derived_schema());
    crd["spec"]["versions"][0]["additionalPrinterColumns"] = json!([]);
    crd["spec"]["versions"][0]["subresources"] = json!({"status": {}});
    establish(&env, crd).await;
    let api = widgets(&env);
    let ok = widget(
        "ok",
        json!({"name": "a", "info": null, "replicas": 2, "mode": "A", "ports": [80, 443],
               "env": {"X": "1"}, "target": "50%", "choice": {"a": "x"}}),
    );
    let created = api
        .create(&PostParams::default(), &ok)
        .await
        .expect("a valid object");
    assert_eq!(created.data["spec"]["ports"], json!([80, 443]));
    let bad = widget(
        "bad",
        json!({"name": "a", "replicas": -1, "mode": "C", "choice": {"a": "x", "b": "y"}}),
    );
    let status = api_error(
        api.create(&PostParams::default(), &bad)
            .await
            .expect_err("invalid"),
    );
    assert_eq!(status.code, 422);
    let mut fields = causes(&status);
    fields.sort();
    fields.dedup();
    // Kubernetes reports a failed oneOf without a field path, naming the field in the message.
    assert_eq!(
        fields,
        ["<nil>", "spec.mode", "spec.replicas"],
        "{status:?}"
    );
    assert!(
        status
            .message
            .contains("\"spec.choice\" must validate one and only one schema (oneOf)"),
        "{}",
        status.message
    );
}

#[tokio::test]
async fn a_new_storage_version_is_recorded_and_old_objects_are_served_through_it() {
    let env = TestEnv::start().await.expect("start");
    establish(&env, widget_crd(widget_schema())).await;
    widgets(&env)
        .create(&PostParams::default(), &widget("old", json!({"size": 2})))
        .await
        .expect("create through v1");
    let mut crd = crds(&env).get("widgets.example.com").await.expect("get");
    let mut v2 = crd.spec.versions[0].clone();
    v2.name = "v2".into();
    crd.spec.versions[0].storage = false;
    crd.spec.versions.push(v2);
    let updated = crds(&env)
        .replace("widgets.example.com", &PostParams::default(), &crd)
        .await
        .expect("add v2 as the storage version");
    assert_eq!(
        updated.status.and_then(|s| s.stored_versions),
        Some(vec!["v1".to_string(), "v2".to_string()])
    );
    let v2_api: Api<DynamicObject> =
        Api::namespaced_with(env.client(), "default", &widget_resource("v2"));
    let old = kore_testenv::wait_for(WAIT, || async { v2_api.get("old").await.ok() })
        .await
        .expect("v2 is served");
    assert_eq!(
        old.types.map(|t| t.api_version),
        Some("example.com/v2".to_string())
    );
    // v1 may not go while objects may still be stored under it.
    let mut without_v1 = crds(&env).get("widgets.example.com").await.expect("get");
    without_v1.spec.versions.remove(0);
    let status = api_error(
        crds(&env)
            .replace("widgets.example.com", &PostParams::default(), &without_v1)
            .await
            .expect_err("v1 is still stored"),
    );
    assert_eq!(status.code, 422);
    assert_eq!(causes(&status), ["status.storedVersions[0]"]);
}

/// The `Terminating` condition of a CRD as JSON (the answer of a delete), if any.
fn terminating_condition(crd: &Value) -> Option<Value> {
    crd["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "Terminating")
        .cloned()
}

#[tokio::test]
async fn a_dry_run_delete_of_a_crd_answers_terminating_but_changes_nothing() {
    let env = TestEnv::start().await.expect("start");
    establish(&env, widget_crd(widget_schema())).await;
    let deleted = send(
        &env,
        Method::DELETE,
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.example.com?dryRun=All",
        JSON,
        JSON,
        Value::Null,
    )
    .await;
    assert_eq!(deleted.code, 200, "{}", deleted.body);
    assert!(
        deleted.body["metadata"]["deletionTimestamp"].is_string(),
        "{}",
        deleted.body
    );
    let terminating = terminating_condition(&deleted.body).expect("Terminating in the answer");
    assert_eq!(terminating["reason"], "InstanceDeletionPending");

    let stored = crds(&env)
        .get("widgets.example.com")
        .await
        .expect("the CRD is still there");
    assert!(stored.metadata.deletion_timestamp.is_none());
    assert_eq!(condition(&stored, "Terminating"), None);
    assert_eq!(
        condition(&stored, "Established").map(|c| c.0).as_deref(),
        Some("True")
    );
}

#[tokio::test]
async fn deletecollection_marks_each_crd_terminating_as_a_single_delete_does() {
    let env = TestEnv::start().await.expect("start");
    establish(&env, widget_crd(widget_schema())).await;
    let deleted = send(
        &env,
        Method::DELETE,
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        JSON,
        JSON,
        Value::Null,
    )
    .await;
    assert_eq!(deleted.code, 200, "{}", deleted.body);
    assert_eq!(deleted.body["kind"], "CustomResourceDefinitionList");
    let items = deleted.body["items"].as_array().expect("items");
    assert_eq!(items.len(), 1, "{}", deleted.body);
    let terminating = terminating_condition(&items[0]).expect("Terminating in the answer");
    assert_eq!(terminating["status"], "True");
    assert_eq!(terminating["reason"], "InstanceDeletionPending");
}
