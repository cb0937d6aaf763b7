//! `/openapi/v3`: the index of group versions and one document per group version.
//!
//! kubectl reads these before `apply`, `create -f` and `replace` to learn that the server
//! validates fields itself (a `patch` operation that declares `fieldValidation`); without them
//! it falls back to client-side validation, which needs `/openapi/v2` in protobuf. The
//! documents declare each resource's operations and a component schema per kind carrying its
//! group-version-kind. Built-in kinds' schemas carry no fields, so they do not advertise
//! strategic merge patch either (kubectl would then try to compute one from the schema); a
//! custom resource's schema is its CRD's `openAPIV3Schema` for that version, so the document
//! (and its hash) changes with the CRD.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http::StatusCode;
use serde_json::{Map, Value, json};
use sha2::Digest;

use super::error::ApiError;
use super::{App, json_response};
use crate::registry::{Registry, Resource};
use crate::storage::Storage;

fn doc_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

fn schema_name(r: &Resource) -> String {
    let group = if r.group.is_empty() {
        "core"
    } else {
        r.group.as_str()
    };
    let short = group.split('.').next().unwrap_or(group);
    format!("io.k8s.api.{short}.{}.{}", r.version, r.kind)
}

fn parameters() -> Value {
    json!([
        {"name": "dryRun", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
        {"name": "fieldManager", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
        {"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
        {"name": "force", "in": "query", "schema": {"type": "boolean", "uniqueItems": true}}
    ])
}

fn operation(r: &Resource, action: &str, body: Option<Value>) -> Value {
    let mut op = Map::new();
    op.insert("x-kubernetes-action".into(), json!(action));
    op.insert(
        "x-kubernetes-group-version-kind".into(),
        json!({"group": r.group, "version": r.version, "kind": r.kind}),
    );
    op.insert(
        "operationId".into(),
        json!(format!("{action}{}{}", r.kind, r.version)),
    );
    let schema_ref = json!({"$ref": format!("#/components/schemas/{}", schema_name(r))});
    op.insert(
        "responses".into(),
        json!({"200": {"description": "OK", "content": {"application/json": {"schema": schema_ref}}}}),
    );
    if let Some(b) = body {
        op.insert("parameters".into(), parameters());
        op.insert("requestBody".into(), b);
    }
    Value::Object(op)
}

/// The document for one group version.
fn document(registry: &Registry, resources: &[Arc<Resource>]) -> Value {
    let mut paths = Map::new();
    let mut schemas = Map::new();
    let patch_ref =
        json!({"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.Patch"});
    for r in resources {
        let base = r.gv_path();
        let (collection, item) = if r.namespaced {
            (
                format!("{base}/namespaces/{{namespace}}/{}", r.plural),
                format!("{base}/namespaces/{{namespace}}/{}/{{name}}", r.plural),
            )
        } else {
            (
                format!("{base}/{}", r.plural),
                format!("{base}/{}/{{name}}", r.plural),
            )
        };
        let object_body = json!({"required": true, "content": {"application/json": {"schema":
            {"$ref": format!("#/components/schemas/{}", schema_name(r))}}}});
        let patch_body = json!({"required": true, "content": {
            "application/json-patch+json": {"schema": patch_ref},
            "application/merge-patch+json": {"schema": patch_ref},
            "application/apply-patch+yaml": {"schema": patch_ref}
        }});
        paths.insert(
            collection,
            json!({
                "get": operation(r, "list", None),
                "post": operation(r, "post", Some(object_body.clone())),
            }),
        );
        paths.insert(
            item,
            json!({
                "get": operation(r, "get", None),
                "put": operation(r, "put", Some(object_body)),
                "patch": operation(r, "patch", Some(patch_body)),
                "delete": operation(r, "delete", None),
            }),
        );
        let mut schema = custom_schema(registry, r).unwrap_or_else(|| json!({"type": "object"}));
        schema["x-kubernetes-group-version-kind"] =
            json!([{"group": r.group, "version": r.version, "kind": r.kind}]);
        schemas.insert(schema_name(r), schema);
    }
    schemas.insert(
        "io.k8s.apimachinery.pkg.apis.meta.v1.Patch".into(),
        json!({"type": "object", "description": "A patch document."}),
    );
    json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.32.0"},
        "paths": paths,
        "components": {"schemas": schemas},
    })
}

/// A custom resource's `openAPIV3Schema` for its served version, read from its CRD.
fn custom_schema(registry: &Registry, r: &Resource) -> Option<Value> {
    r.strategy.structural_schema()?;
    let key = format!(
        "{}/{}.{}",
        crate::registry::crd::STORAGE_PREFIX,
        r.plural,
        r.group
    );
    let crd = registry.store().get(&key).ok()?.value().ok()?;
    crd.pointer("/spec/versions")?
        .as_array()?
        .iter()
        .find(|v| v["name"] == r.version.as_str())?
        .pointer("/schema/openAPIV3Schema")
        .filter(|s| s.is_object())
        .cloned()
}

fn hash(doc: &Value) -> String {
    let digest = sha2::Sha512::digest(doc.to_string().as_bytes());
    digest[..16].iter().map(|b| format!("{b:02X}")).collect()
}

/// `GET /openapi/v3`.
pub(crate) async fn index(State(app): State<Arc<App>>) -> Response {
    let mut paths = Map::new();
    for (group, version, resources) in app.registry.catalog().group_versions() {
        let path = doc_path(&group, &version);
        let url = format!(
            "/openapi/v3/{path}?hash={}",
            hash(&document(&app.registry, &resources))
        );
        paths.insert(path, json!({"serverRelativeURL": url}));
    }
    json_response(
        StatusCode::OK,
        Bytes::from(json!({"paths": paths}).to_string()),
    )
}

/// `GET /openapi/v3/{api/v1 | apis/{g}/{v}}`.
pub(crate) async fn document_handler(
    State(app): State<Arc<App>>,
    Path(path): Path<String>,
) -> Response {
    let wanted = path.trim_matches('/');
    for (group, version, resources) in app.registry.catalog().group_versions() {
        if doc_path(&group, &version) == wanted {
            let doc = document(&app.registry, &resources);
            return json_response(StatusCode::OK, Bytes::from(doc.to_string()));
        }
    }
    ApiError::NoSuchPath.into_response()
}
