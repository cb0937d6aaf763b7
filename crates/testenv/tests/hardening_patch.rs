//! Issue 11 (hardening), defects 1, 2 and 4, and the limits of `docs/design/apiserver.md`:
//! no patch can crash the server or make it store an object it cannot read back, every limit
//! is answered with a Kubernetes `Status` naming it, and an unreadable object left by an older
//! server can still be deleted and does not break lists.

use std::path::Path;
use std::time::Duration;

use http::{Method, Request};
use http_body_util::BodyExt;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kore_apiserver::storage::{Backend, Record, WalBackend};
use kore_testenv::TestEnv;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, PostParams,
};
use serde_json::{Value, json};

/// How long any one of these tests may take before it counts as hung.
const LIMIT: Duration = Duration::from_secs(120);
const WAIT: Duration = Duration::from_secs(20);

/// The server's nesting limit (`kore_apiserver::api::limits::MAX_DEPTH`).
const MAX_DEPTH: usize = kore_apiserver::api::limits::MAX_DEPTH;

const CMS: &str = "/api/v1/namespaces/default/configmaps";
const THINGS: &str = "/apis/example.com/v1/namespaces/default/things";

struct Answer {
    code: u16,
    body: Value,
    warnings: Vec<String>,
}

async fn send(
    client: &kube::Client,
    method: Method,
    path: &str,
    content_type: &str,
    body: Vec<u8>,
) -> Answer {
    let req = Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", content_type)
        .header("accept", "application/json")
        .body(kube::client::Body::from(body))
        .expect("request");
    let resp = client.send(req).await.expect("response");
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

async fn get(client: &kube::Client, path: &str) -> Answer {
    send(client, Method::GET, path, "application/json", Vec::new()).await
}

async fn post(client: &kube::Client, path: &str, body: &Value) -> Answer {
    let bytes = serde_json::to_vec(body).expect("encodes");
    send(client, Method::POST, path, "application/json", bytes).await
}

async fn json_patch(client: &kube::Client, path: &str, ops: &Value) -> Answer {
    let bytes = serde_json::to_vec(ops).expect("encodes");
    send(
        client,
        Method::PATCH,
        path,
        "application/json-patch+json",
        bytes,
    )
    .await
}

fn assert_status(a: &Answer, code: u16, reason: &str) {
    assert_eq!(a.code, code, "{}", a.body);
    assert_eq!(a.body["kind"], "Status", "{}", a.body);
    assert_eq!(a.body["code"], code, "{}", a.body);
    assert_eq!(a.body["reason"], reason, "{}", a.body);
}

fn message(a: &Answer) -> &str {
    a.body["message"].as_str().unwrap_or_default()
}

/// `levels` arrays around `1`: a value `levels` deep.
fn nested(levels: usize) -> Value {
    let mut v = json!(1);
    for _ in 0..levels {
        v = json!([v]);
    }
    v
}

/// `levels` objects `{"a": …}` around `1`.
fn nested_objects(levels: usize) -> Value {
    let mut v = json!(1);
    for _ in 0..levels {
        v = json!({ "a": v });
    }
    v
}

/// The same value as JSON text, built without recursion (for depths serde_json refuses).
fn nested_text(levels: usize) -> String {
    format!("{}1{}", "[".repeat(levels), "]".repeat(levels))
}

async fn configmap(env: &TestEnv, name: &str) -> Value {
    let a = post(
        &env.client(),
        CMS,
        &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"a": "1"}}),
    )
    .await;
    assert_eq!(a.code, 201, "{}", a.body);
    a.body
}

/// A namespaced `Thing` CRD whose spec keeps unknown fields.
async fn establish_things(env: &TestEnv) {
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "things.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "things", "singular": "thing", "kind": "Thing"},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
                }}}
            }]
        }
    }))
    .expect("a valid CRD");
    let crds: Api<CustomResourceDefinition> = Api::all(env.client());
    crds.create(&PostParams::default(), &crd)
        .await
        .expect("create CRD");
    let client = env.client();
    kore_testenv::wait_for(WAIT, || async {
        (get(&client, THINGS).await.code == 200).then_some(())
    })
    .await
    .expect("things are served");
}

fn things(client: kube::Client) -> Api<DynamicObject> {
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("example.com", "v1", "Thing"),
        "things",
    );
    Api::namespaced_with(client, "default", &ar)
}

fn thing(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "example.com/v1", "kind": "Thing", "metadata": {"name": name}, "spec": spec})
}

/// Issue 11, defect 1: one `add` and 9,000 `copy` operations (a 384 KB patch, within the
/// body and operation limits) nested the object one level deeper per copy and aborted the
/// process with a stack overflow. The patch is now refused at the depth limit.
#[tokio::test]
async fn a_chain_of_copies_is_refused_at_the_depth_limit_and_the_server_lives() {
    tokio::time::timeout(LIMIT, async {
        let env = TestEnv::start().await.expect("start");
        let before = configmap(&env, "chain").await;
        let mut ops = vec![json!({"op": "add", "path": "/zz", "value": {}})];
        ops.extend((0..9_000).map(|_| json!({"op": "copy", "from": "/zz", "path": "/zz/a"})));
        let a = json_patch(&env.client(), &format!("{CMS}/chain"), &Value::Array(ops)).await;
        assert_status(&a, 422, "Invalid");
        assert!(
            message(&a).contains(&format!("more than {MAX_DEPTH} levels deep")),
            "{}",
            a.body
        );
        // Nothing was written and the server still answers.
        let cms: Api<ConfigMap> = Api::default_namespaced(env.client());
        let after = cms.get("chain").await.expect("still readable");
        assert_eq!(
            after.metadata.resource_version.as_deref(),
            before["metadata"]["resourceVersion"].as_str()
        );
    })
    .await
    .expect("no hang");
}

/// Issue 11, defect 2: 22 `copy` operations each doubling an array of one 1,000-character
/// string (a 1.2 KB patch) took the server to an allocation failure. The copies a patch may
/// make are bounded in bytes, as Kubernetes bounds them (`JSONPatchMaxCopyBytes`, 3 MiB).
#[tokio::test]
async fn doubling_copies_are_refused_at_the_copy_limit() {
    tokio::time::timeout(LIMIT, async {
        let env = TestEnv::start().await.expect("start");
        configmap(&env, "doubling").await;
        let mut ops = vec![
            json!({"op": "add", "path": "/data/x", "value": "x".repeat(1000)}),
            json!({"op": "add", "path": "/zz", "value": ["x".repeat(1000)]}),
        ];
        for _ in 0..22 {
            ops.push(json!({"op": "copy", "from": "/zz", "path": "/zz/-"}));
            ops.push(json!({"op": "copy", "from": "/zz", "path": "/zz/0"}));
        }
        let body = serde_json::to_vec(&ops).expect("encodes");
        let a = json_patch(
            &env.client(),
            &format!("{CMS}/doubling"),
            &Value::Array(ops),
        )
        .await;
        assert!(body.len() < 10_000);
        assert_status(&a, 422, "Invalid");
        assert!(message(&a).contains("3145728 bytes"), "{}", a.body);
        let cms: Api<ConfigMap> = Api::default_namespaced(env.client());
        let cm = cms.get("doubling").await.expect("readable");
        assert!(
            !cm.data.unwrap_or_default().contains_key("x"),
            "not written"
        );
    })
    .await
    .expect("no hang");
}

/// Issue 11, defect 4: a JSON patch adding 125 nested arrays under a nested object of a
/// custom resource answered 500 "recursion limit exceeded" but stored the object, which no
/// read, list or delete could handle afterwards. The limit is checked before the write: a 422
/// naming the limit, and the object stays as it was.
#[tokio::test]
async fn a_too_deep_custom_resource_is_refused_before_it_is_stored() {
    tokio::time::timeout(LIMIT, async {
        let env = TestEnv::start().await.expect("start");
        establish_things(&env).await;
        let client = env.client();
        let a = post(
            &client,
            THINGS,
            &thing("t", json!({"outer": {"inner": {}}})),
        )
        .await;
        assert_eq!(a.code, 201, "{}", a.body);
        let path = format!("{THINGS}/t");
        let ops = json!([{"op": "add", "path": "/spec/outer/inner/deep", "value": nested(125)}]);
        let a = json_patch(&client, &path, &ops).await;
        assert_status(&a, 422, "Invalid");
        assert!(message(&a).contains("levels deep"), "{}", a.body);
        // A merge patch that nests too deep (but that serde_json can still parse) is refused
        // by the check every write makes before storing.
        let merge =
            serde_json::to_vec(&json!({"spec": {"outer": {"inner": {"deep": nested(110)}}}}))
                .expect("encodes");
        let a = send(
            &client,
            Method::PATCH,
            &path,
            "application/merge-patch+json",
            merge,
        )
        .await;
        assert_status(&a, 422, "Invalid");
        assert_eq!(
            a.body["details"]["causes"][0]["field"], "spec",
            "{}",
            a.body
        );
        // The object reads, lists and deletes as before.
        let api = things(client.clone());
        let t = api.get("t").await.expect("readable");
        assert_eq!(t.data["spec"], json!({"outer": {"inner": {}}}));
        assert_eq!(
            api.list(&ListParams::default())
                .await
                .expect("list")
                .items
                .len(),
            1
        );
        let all = get(&client, "/apis/example.com/v1/things").await;
        assert_eq!(all.code, 200, "{}", all.body);
        api.delete("t", &DeleteParams::default())
            .await
            .expect("delete");
    })
    .await
    .expect("no hang");
}

/// A body right at the nesting limit is stored and can be read back, listed (two levels
/// deeper) and watched; one level more is a 422 that names the field and the limit.
async fn nesting_right_at_and_just_above_the_limit(client: kube::Client) {
    // The object is {spec: {x: ...}}: two levels above `x`.
    let at = thing("at", json!({"x": nested(MAX_DEPTH - 2)}));
    let a = post(&client, THINGS, &at).await;
    assert_eq!(a.code, 201, "{}", a.body);
    let api = things(client.clone());
    let read = api.get("at").await.expect("read back");
    assert_eq!(read.data["spec"]["x"], nested(MAX_DEPTH - 2));
    let listed = api.list(&ListParams::default()).await.expect("listed");
    assert_eq!(listed.items.len(), 1);
    let above = thing("above", json!({"x": nested(MAX_DEPTH - 1)}));
    let a = post(&client, THINGS, &above).await;
    assert_status(&a, 422, "Invalid");
    assert_eq!(
        a.body["details"]["causes"][0]["field"], "spec",
        "{}",
        a.body
    );
    assert!(
        message(&a).contains(&format!("{MAX_DEPTH} levels")),
        "{}",
        a.body
    );
    // Past serde_json's own limit the body cannot even be decoded: a 400.
    let text = format!(
        r#"{{"apiVersion":"example.com/v1","kind":"Thing","metadata":{{"name":"way"}},"spec":{{"x":{}}}}}"#,
        nested_text(10_000)
    );
    let a = send(
        &client,
        Method::POST,
        THINGS,
        "application/json",
        text.into_bytes(),
    )
    .await;
    assert_status(&a, 400, "BadRequest");
    assert!(api.get_opt("above").await.expect("get").is_none());
    assert!(api.get_opt("way").await.expect("get").is_none());
    // With a field manager, managedFields records the object's fields deeper than they are
    // (metadata, managedFields, an entry, fieldsV1, and `{}` for a leaf): five more levels,
    // which count too.
    // Objects, not arrays: managedFields records an atomic list as one field.
    let managed = thing("managed", json!({"x": nested_objects(MAX_DEPTH - 6)}));
    let bytes = serde_json::to_vec(&managed).expect("encodes");
    let a = send(
        &client,
        Method::POST,
        &format!("{THINGS}?fieldManager=hardening"),
        "application/json",
        bytes,
    )
    .await;
    assert_status(&a, 422, "Invalid");
    assert_eq!(
        a.body["details"]["causes"][0]["field"], "metadata.managedFields",
        "{}",
        a.body
    );
    let managed = thing("managed", json!({"x": nested_objects(MAX_DEPTH - 7)}));
    let bytes = serde_json::to_vec(&managed).expect("encodes");
    let a = send(
        &client,
        Method::POST,
        &format!("{THINGS}?fieldManager=hardening"),
        "application/json",
        bytes,
    )
    .await;
    assert_eq!(a.code, 201, "{}", a.body);
    // An update of the readable object to one level more is refused the same way.
    let mut more = serde_json::to_value(&read).expect("encodes");
    more["spec"]["x"] = nested(MAX_DEPTH - 1);
    let bytes = serde_json::to_vec(&more).expect("encodes");
    let a = send(
        &client,
        Method::PUT,
        &format!("{THINGS}/at"),
        "application/json",
        bytes,
    )
    .await;
    assert_status(&a, 422, "Invalid");
}

#[tokio::test]
async fn nesting_at_the_limit_is_stored_and_read_back_in_process() {
    tokio::time::timeout(LIMIT, async {
        let env = TestEnv::start().await.expect("start");
        establish_things(&env).await;
        nesting_right_at_and_just_above_the_limit(env.client()).await;
    })
    .await
    .expect("no hang");
}

#[tokio::test]
async fn nesting_at_the_limit_is_stored_and_read_back_over_tcp() {
    tokio::time::timeout(LIMIT, async {
        let env = TestEnv::builder().tcp().start().await.expect("start");
        establish_things(&env).await;
        let client = env.socket_client().await.expect("socket client");
        nesting_right_at_and_just_above_the_limit(client.clone()).await;
        // The copy chain of defect 1 over the socket too.
        configmap(&env, "chain").await;
        let mut ops = vec![json!({"op": "add", "path": "/zz", "value": {}})];
        ops.extend((0..9_000).map(|_| json!({"op": "copy", "from": "/zz", "path": "/zz/a"})));
        let a = json_patch(&client, &format!("{CMS}/chain"), &Value::Array(ops)).await;
        assert_status(&a, 422, "Invalid");
    })
    .await
    .expect("no hang");
}

#[tokio::test]
async fn the_documented_limits_answer_with_a_status_naming_them() {
    tokio::time::timeout(LIMIT, async {
        let env = TestEnv::start().await.expect("start");
        let client = env.client();
        configmap(&env, "limits").await;
        let path = format!("{CMS}/limits");
        // JSON patch operations: 10,000 at most (413, as Kubernetes).
        let ops: Vec<Value> = (0..10_001)
            .map(|_| json!({"op": "test", "path": "/data/a", "value": "1"}))
            .collect();
        let a = json_patch(&client, &path, &Value::Array(ops)).await;
        assert_status(&a, 413, "RequestEntityTooLarge");
        assert!(message(&a).contains("10000"), "{}", a.body);
        let ops: Vec<Value> = (0..10_000)
            .map(|_| json!({"op": "test", "path": "/data/a", "value": "1"}))
            .collect();
        assert_eq!(
            json_patch(&client, &path, &Value::Array(ops)).await.code,
            200
        );
        // Copies: 3 MiB in all, whatever the number of operations.
        let ops = json!([
            {"op": "add", "path": "/data/big", "value": "x".repeat(1024 * 1024)},
            {"op": "copy", "from": "/data/big", "path": "/data/b1"},
            {"op": "copy", "from": "/data/big", "path": "/data/b2"},
            {"op": "copy", "from": "/data/big", "path": "/data/b3"}
        ]);
        let a = json_patch(&client, &path, &ops).await;
        assert_status(&a, 422, "Invalid");
        assert!(message(&a).contains("3145728 bytes"), "{}", a.body);
        // Nesting of a body past what the decoders parse (JSON 127, YAML 64) is a 400 (the
        // 422 for objects deeper than the limit is tested with custom resources above: a
        // ConfigMap has no field that could hold the value).
        let cm = |x: Value| {
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "deep"}, "data": x})
        };
        let text = serde_json::to_string(&cm(json!("DEEP")))
            .expect("encodes")
            .replace("\"DEEP\"", &nested_text(200));
        let a = send(&client, Method::POST, CMS, "application/json", text.into_bytes()).await;
        assert_status(&a, 400, "BadRequest");
        assert!(message(&a).contains("recursion limit"), "{}", a.body);
        let yaml = format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: deep\nx: {}\n",
            nested_text(70)
        );
        let a = send(&client, Method::POST, CMS, "application/yaml", yaml.into_bytes()).await;
        assert_status(&a, 400, "BadRequest");
        assert!(message(&a).contains("depth"), "{}", a.body);
        // Label values: 63 characters; annotations: 256 KiB in all.
        let a = post(
            &client,
            CMS,
            &json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": "label", "labels": {"k": "v".repeat(64)}}}),
        )
        .await;
        assert_status(&a, 422, "Invalid");
        assert_eq!(
            a.body["details"]["causes"][0]["field"], "metadata.labels",
            "{}",
            a.body
        );
        let a = post(
            &client,
            CMS,
            &json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": "notes", "annotations": {"k": "v".repeat(256 * 1024)}}}),
        )
        .await;
        assert_status(&a, 422, "Invalid");
        assert!(message(&a).contains("262144"), "{}", a.body);
        let cms: Api<ConfigMap> = Api::default_namespaced(env.client());
        let names: Vec<String> = cms
            .list(&ListParams::default())
            .await
            .expect("list")
            .items
            .into_iter()
            .filter_map(|c| c.metadata.name)
            .filter(|n| n != "kube-root-ca.crt")
            .collect();
        assert_eq!(names, ["limits"]);
    })
    .await
    .expect("no hang");
}

/// Replaces the stored bytes of the object whose storage key ends with `suffix` by an object
/// whose `spec` holds `depth` nested arrays (so the object is `depth + 2` deep), as a server without
/// the nesting check would have stored it.
/// The server using `dir` must be stopped.
async fn plant_unreadable(dir: &Path, suffix: &str, depth: usize) {
    // The stopped server lets go of the directory once its last task ends.
    let mut tries = 0;
    let wal = loop {
        match WalBackend::open(dir) {
            Ok(wal) => break wal,
            Err(_) if tries < 500 => {
                tries += 1;
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            Err(e) => panic!("open the log: {e}"),
        }
    };
    let loaded = wal.load().expect("load");
    let (key, current) = loaded
        .records
        .iter()
        .find_map(|r| {
            let v: Value = serde_json::from_slice(r.value.as_deref()?).ok()?;
            r.key.ends_with(suffix).then(|| (r.key.clone(), v))
        })
        .expect("the object to replace");
    let rv = loaded.max_rv + 1;
    let mut head = current;
    head["metadata"]["resourceVersion"] = json!(rv.to_string());
    head["spec"] = json!({"deep": "DEEP"});
    let text = serde_json::to_string(&head)
        .expect("encodes")
        .replace("\"DEEP\"", &nested_text(depth));
    let (tx, rx) = std::sync::mpsc::channel();
    wal.submit(
        vec![Record {
            key,
            rv,
            value: Some(text.into_bytes().into()),
        }],
        Box::new(move |result| {
            let _ = tx.send(result);
        }),
    );
    rx.recv().expect("answered").expect("durable");
}

/// Issue 11, defect 4, the data an older server left behind: an object nested deeper than it
/// can read. GET answers 500 StorageReadError naming its key (as Kubernetes does for objects
/// it cannot decode); lists leave it out with a warning naming the key instead of failing;
/// it can be deleted, and so can its namespace and its CRD, across restarts.
#[tokio::test]
async fn an_unreadable_stored_object_is_reported_and_can_be_deleted() {
    tokio::time::timeout(LIMIT, async {
        let dir = tempfile::tempdir().expect("tempdir");
        // A restarted server gets the directory once the old one's last client handle is gone.
        let start = || {
            kore_testenv::wait_for(WAIT, || async {
                TestEnv::builder().data_dir(dir.path()).start().await.ok()
            })
        };
        {
            let env = start().await.expect("start");
            establish_things(&env).await;
            let client = env.client();
            let ns: Api<Namespace> = Api::all(client.clone());
            let stale: Namespace =
                serde_json::from_value(json!({"metadata": {"name": "stale"}})).expect("namespace");
            ns.create(&PostParams::default(), &stale)
                .await
                .expect("namespace");
            for (path, name) in [
                (THINGS, "bad"),
                (THINGS, "good"),
                (THINGS, "gone"),
                ("/apis/example.com/v1/namespaces/stale/things", "bad"),
            ] {
                let a = post(&client, path, &thing(name, json!({"a": 1}))).await;
                assert_eq!(a.code, 201, "{}", a.body);
            }
            env.stop().await;
        }
        plant_unreadable(dir.path(), "/default/bad", 130).await;
        plant_unreadable(dir.path(), "/default/gone", 130).await;
        plant_unreadable(dir.path(), "/stale/bad", 130).await;

        for restart in 0..2 {
            let env = start().await.expect("restart");
            let client = env.client();
            let ns: Api<Namespace> = Api::all(client.clone());
            let api = things(client.clone());
            if restart == 0 {
                let a = get(&client, &format!("{THINGS}/bad")).await;
                assert_status(&a, 500, "StorageReadError");
                assert!(
                    a.body["details"]["causes"][0]["field"]
                        .as_str()
                        .is_some_and(|k| k.ends_with("/default/bad")),
                    "{}",
                    a.body
                );
                assert!(message(&a).contains("132 levels deep"), "{}", a.body);
                // Writes to it fail the same way; nothing is written.
                let a = json_patch(&client, &format!("{THINGS}/bad"), &json!([])).await;
                assert_status(&a, 500, "StorageReadError");
            }
            // The lists leave it out, say so, and still return every readable object.
            let a = get(&client, THINGS).await;
            assert_eq!(a.code, 200, "{}", a.body);
            let names: Vec<&str> = a.body["items"]
                .as_array()
                .expect("items")
                .iter()
                .filter_map(|i| i["metadata"]["name"].as_str())
                .collect();
            let expected: &[&str] = if restart == 0 { &["good"] } else { &[] };
            assert_eq!(names, expected, "{}", a.body);
            if restart == 0 {
                assert!(
                    a.warnings.iter().any(|w| w.contains("/default/bad")),
                    "{:?}",
                    a.warnings
                );
                let all = get(&client, "/apis/example.com/v1/things").await;
                assert_eq!(all.code, 200, "{}", all.body);
                assert_eq!(all.warnings.len(), 3, "{:?}", all.warnings);
                assert_eq!(
                    api.list(&ListParams::default())
                        .await
                        .expect("typed")
                        .items
                        .len(),
                    1
                );
                // A plain DELETE removes it; a dry run does not.
                let dry = DeleteParams {
                    dry_run: true,
                    ..DeleteParams::default()
                };
                api.delete("bad", &dry).await.expect("dry run");
                assert_eq!(get(&client, &format!("{THINGS}/bad")).await.code, 500);
                api.delete("bad", &DeleteParams::default())
                    .await
                    .expect("deleted");
                assert_eq!(get(&client, &format!("{THINGS}/bad")).await.code, 404);
                api.delete("good", &DeleteParams::default())
                    .await
                    .expect("deleted");
                // Its namespace goes too.
                ns.delete("stale", &DeleteParams::default())
                    .await
                    .expect("delete ns");
                kore_testenv::wait_for(WAIT, || async {
                    ns.get_opt("stale").await.ok()?.is_none().then_some(())
                })
                .await
                .expect("the namespace is removed");
            } else {
                // After a restart: what was deleted stays deleted, and the CRD that still
                // has an unreadable object ("gone") can be deleted.
                let a = get(&client, &format!("{THINGS}/gone")).await;
                assert_status(&a, 500, "StorageReadError");
                let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
                crds.delete("things.example.com", &DeleteParams::default())
                    .await
                    .expect("delete CRD");
                kore_testenv::wait_for(WAIT, || async {
                    crds.get_opt("things.example.com")
                        .await
                        .ok()?
                        .is_none()
                        .then_some(())
                })
                .await
                .expect("the CRD is removed");
            }
            env.stop().await;
        }
    })
    .await
    .expect("no hang");
}
