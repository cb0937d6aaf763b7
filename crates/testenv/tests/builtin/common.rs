//! Helpers shared by the built-in API tests: typed CRUD through `kube::Api`, Tables and errors.

#![allow(dead_code)]

use std::fmt::Debug;
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use http::{Method, Request};
use http_body_util::BodyExt;
use kore_testenv::TestEnv;
use kube::Resource;
use kube::api::{
    Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use kube::core::Status;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

/// The `Accept` header kubectl sends for `kubectl get`.
pub(crate) const TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io";

/// The Status of a failed request.
pub(crate) fn api_error(e: kube::Error) -> Status {
    match e {
        kube::Error::Api(s) => *s,
        other => panic!("expected an API error, got {other:?}"),
    }
}

/// Sends a raw request; returns the status code and the JSON body.
pub(crate) async fn raw(
    env: &TestEnv,
    method: Method,
    path: &str,
    accept: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let bytes = body
        .map(|b| serde_json::to_vec(&b).expect("json"))
        .unwrap_or_default();
    let req = Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", "application/json")
        .header("accept", accept)
        .body(kube::client::Body::from(bytes))
        .expect("request");
    let resp = env.client().send(req).await.expect("response");
    let code = resp.status().as_u16();
    let bytes = resp.into_body().collect().await.expect("body").to_bytes();
    (code, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

/// `kubectl get` of a collection: the column names and the rows' cells.
pub(crate) async fn table(env: &TestEnv, path: &str) -> (Vec<String>, Vec<Vec<Value>>) {
    let (code, body) = raw(env, Method::GET, path, TABLE, None).await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["kind"], "Table", "{body}");
    let columns = body["columnDefinitions"]
        .as_array()
        .expect("columns")
        .iter()
        .map(|c| c["name"].as_str().expect("name").to_owned())
        .collect();
    let rows = body["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .map(|r| r["cells"].as_array().expect("cells").clone())
        .collect();
    (columns, rows)
}

/// The cell of `column` in the only row of a Table.
pub(crate) fn cell<'a>(columns: &[String], rows: &'a [Vec<Value>], column: &str) -> &'a Value {
    assert_eq!(rows.len(), 1, "{rows:?}");
    let i = columns
        .iter()
        .position(|c| c == column)
        .unwrap_or_else(|| panic!("no column {column} in {columns:?}"));
    &rows[0][i]
}

/// Asserts a 422 Invalid whose causes include `field` and whose message contains `text`.
pub(crate) fn assert_invalid(e: kube::Error, field: &str, text: &str) {
    let status = api_error(e);
    assert_eq!(status.code, 422, "{status:?}");
    assert_eq!(status.reason, "Invalid", "{status:?}");
    let causes = status
        .details
        .as_ref()
        .map(|d| d.causes.clone())
        .unwrap_or_default();
    assert!(
        causes
            .iter()
            .any(|c| c.field == field && c.message.contains(text)),
        "no cause at {field} containing {text:?}: {status:?}"
    );
}

/// Runs the verbs every kind serves on `obj` through `api`: create, get, list, watch, replace,
/// merge patch (of `patch`), JSON patch of a label, and delete. Returns the created object.
pub(crate) async fn crud<K>(api: &Api<K>, obj: &K, patch: Value) -> K
where
    K: Resource + Clone + Debug + Serialize + DeserializeOwned + Send + Sync + 'static,
{
    let name = obj.meta().name.clone().expect("name");
    let created = api
        .create(&PostParams::default(), obj)
        .await
        .expect("create");
    let rv = created.meta().resource_version.clone().expect("rv");
    let got = api.get(&name).await.expect("get");
    assert_eq!(got.meta().uid, created.meta().uid);
    let listed = api.list(&ListParams::default()).await.expect("list");
    assert!(
        listed
            .items
            .iter()
            .any(|o| o.meta().name.as_deref() == Some(&name))
    );

    let mut events = api
        .watch(&WatchParams::default(), &rv)
        .await
        .expect("watch")
        .boxed();
    let replaced = api
        .replace(&name, &PostParams::default(), &got)
        .await
        .expect("replace");
    let patched = api
        .patch(&name, &PatchParams::default(), &Patch::Merge(patch))
        .await
        .expect("merge patch");
    assert_ne!(
        patched.meta().resource_version,
        replaced.meta().resource_version,
        "the merge patch changes something"
    );
    let labelled = api
        .patch(
            &name,
            &PatchParams::default(),
            &Patch::Json::<()>(
                serde_json::from_value(json!([
                    {"op": "add", "path": "/metadata/labels", "value": {"tested": "yes"}}
                ]))
                .expect("json patch"),
            ),
        )
        .await
        .expect("json patch");
    assert_eq!(
        labelled
            .meta()
            .labels
            .as_ref()
            .and_then(|l| l.get("tested"))
            .map(String::as_str),
        Some("yes")
    );
    let event = tokio::time::timeout(Duration::from_secs(10), events.try_next())
        .await
        .expect("a watch event")
        .expect("ok");
    assert!(matches!(event, Some(WatchEvent::Modified(_))), "{event:?}");
    api.delete(&name, &DeleteParams::default())
        .await
        .expect("delete");
    assert_eq!(api_error(api.get(&name).await.expect_err("gone")).code, 404);
    created
}

/// A real certificate request for `cn` (a fresh key, its signature valid), base64-encoded as
/// `spec.request` carries it.
pub(crate) fn request_b64(cn: &str) -> String {
    use base64::Engine as _;
    let key = rcgen::KeyPair::generate().expect("a key");
    let mut params = rcgen::CertificateParams::default();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, cn);
    let pem = params
        .serialize_request(&key)
        .expect("a request")
        .pem()
        .expect("PEM");
    base64::engine::general_purpose::STANDARD.encode(pem)
}
