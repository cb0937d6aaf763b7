//! `/openapi/v3` (an index of group versions and one document per group version) and
//! `/openapi/v2` (one Swagger 2.0 document for the whole API).
//!
//! kubectl reads the v3 documents before `apply`, `create -f` and `replace` to learn that the
//! server validates fields itself (a `patch` operation that declares `fieldValidation`), for
//! `kubectl explain`, and — when a kind's `patch` operation accepts
//! `application/strategic-merge-patch+json` — to compute client-side apply's strategic merge
//! patches from the kind's schema. So built-in kinds' schemas are complete: fields,
//! descriptions, `required`, and the list and map merge extensions, generated from k8s-openapi's
//! types (module `schemas`). A custom resource's schema is its CRD's `openAPIV3Schema` for that
//! version, so the document (and its hash) changes with the CRD; its `patch` operation offers
//! no strategic merge patch, as in Kubernetes.
//!
//! Documents are built lazily and cached by their inputs (the group version's resources and
//! the custom resources' schemas): a document is rebuilt only when one of them changes, and its
//! hash (the `?hash=` of the index, the `ETag`) is the SHA-512 of its bytes, so it changes
//! exactly when the document does. `If-None-Match` with the current `ETag` answers 304.
//!
//! `/openapi/v2` is served as JSON and in the protobuf encoding client-go's discovery client
//! asks for (`application/com.github.proto-openapi.spec.v2@v1.0+protobuf`, module `v2proto`),
//! which `kubectl explain --output=plaintext-openapiv2` reads. The v3 documents are JSON only
//! (kubectl reads them as JSON).

mod schemas;
mod v2proto;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use axum::extract::{Path, RawQuery, State};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http::{HeaderMap, HeaderValue, StatusCode, header};
use serde_json::{Map, Value, json};
use sha2::Digest;

use super::error::ApiError;
use super::{App, json_response};
use crate::registry::{Registry, Resource};
use crate::storage::Storage;
use schemas::Dialect;

/// The title and version every document carries, as Kubernetes v1.33 writes them.
const INFO_TITLE: &str = "Kubernetes";
const INFO_VERSION: &str = "v1.33.0";

fn doc_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// A custom resource's definition name (kept from before built-in schemas were generated).
fn custom_schema_name(r: &Resource) -> String {
    let group = if r.group.is_empty() {
        "core"
    } else {
        r.group.as_str()
    };
    let short = group.split('.').next().unwrap_or(group);
    format!("io.k8s.api.{short}.{}.{}", r.version, r.kind)
}

/// What one group version's kinds are: their built-in definitions, and the custom
/// resources' schemas read from their CRDs.
struct Inputs {
    resources: Vec<Arc<Resource>>,
    /// Custom resource schemas, by index into `resources`.
    custom: Vec<Option<Value>>,
}

impl Inputs {
    fn read(registry: &Registry, resources: Vec<Arc<Resource>>) -> Self {
        let custom = resources
            .iter()
            .map(|r| custom_schema(registry, r))
            .collect();
        Inputs { resources, custom }
    }

    /// The built-in kinds, sorted, that have no custom schema.
    fn builtin_kinds(&self) -> Vec<schemas::Gvk> {
        let mut kinds: Vec<schemas::Gvk> = self
            .resources
            .iter()
            .zip(&self.custom)
            .filter(|(r, custom)| custom.is_none() && r.strategy.structural_schema().is_none())
            .map(|(r, _)| (r.group.clone(), r.version.clone(), r.kind.clone()))
            .collect();
        kinds.sort();
        kinds.dedup();
        kinds
    }

    /// A digest of everything the document depends on.
    fn fingerprint(&self, dialect: Dialect) -> Vec<u8> {
        let mut hasher = sha2::Sha256::new();
        hasher.update(format!("{dialect:?}"));
        for (r, custom) in self.resources.iter().zip(&self.custom) {
            hasher.update(format!(
                "\n{}/{}/{}/{}/{}/{}\n",
                r.group, r.version, r.kind, r.plural, r.namespaced, r.subresources.status
            ));
            if let Some(schema) = custom {
                hasher.update(schema.to_string());
            }
        }
        hasher.finalize().to_vec()
    }

    /// The definition name and schema of each resource's kind.
    fn schema_name(&self, defs: &schemas::Definitions, i: usize) -> String {
        let r = &self.resources[i];
        defs.names
            .get(&(r.group.clone(), r.version.clone(), r.kind.clone()))
            .cloned()
            .unwrap_or_else(|| custom_schema_name(r))
    }
}

/// A rendered document and its hash.
struct Served {
    body: Bytes,
    /// The protobuf encoding (`/openapi/v2` only).
    proto: Option<Bytes>,
    /// Uppercase hex SHA-512 of `body`, as Kubernetes computes its OpenAPI ETags.
    hash: String,
}

type DocCache = Mutex<HashMap<String, (Vec<u8>, Arc<Served>)>>;

/// The document at `key` for `inputs`, from the cache when its inputs have not changed.
fn served(
    key: String,
    inputs: &Inputs,
    dialect: Dialect,
    render: impl FnOnce(&Inputs) -> Value,
) -> Arc<Served> {
    static CACHE: OnceLock<DocCache> = OnceLock::new();
    let cache = CACHE.get_or_init(DocCache::default);
    let fingerprint = inputs.fingerprint(dialect);
    if let Some((seen, doc)) = cache.lock().expect("openapi cache lock").get(&key)
        && *seen == fingerprint
    {
        return doc.clone();
    }
    let rendered = render(inputs);
    let proto = (dialect == Dialect::V2).then(|| Bytes::from(v2proto::encode(&rendered)));
    let body = Bytes::from(rendered.to_string());
    let doc = Arc::new(Served {
        hash: hash(&body),
        body,
        proto,
    });
    cache
        .lock()
        .expect("openapi cache lock")
        .insert(key, (fingerprint, doc.clone()));
    doc
}

fn hash(body: &[u8]) -> String {
    sha2::Sha512::digest(body)
        .iter()
        .map(|b| format!("{b:02X}"))
        .collect()
}

fn v3_parameters() -> Value {
    json!([
        {"name": "dryRun", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
        {"name": "fieldManager", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
        {"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
        {"name": "force", "in": "query", "schema": {"type": "boolean", "uniqueItems": true}}
    ])
}

fn v2_parameters() -> Vec<Value> {
    vec![
        json!({"name": "dryRun", "in": "query", "type": "string", "uniqueItems": true}),
        json!({"name": "fieldManager", "in": "query", "type": "string", "uniqueItems": true}),
        json!({"name": "fieldValidation", "in": "query", "type": "string", "uniqueItems": true}),
    ]
}

/// One operation; `body` is the request body (v3) or body parameter's schema (v2).
fn operation(
    dialect: Dialect,
    r: &Resource,
    action: &str,
    schema_ref: &Value,
    body: Option<Value>,
) -> Value {
    let mut op = Map::new();
    op.insert("x-kubernetes-action".into(), json!(action));
    op.insert(
        "x-kubernetes-group-version-kind".into(),
        json!({"group": r.group, "kind": r.kind, "version": r.version}),
    );
    op.insert(
        "operationId".into(),
        json!(format!("{action}{}{}", r.kind, r.version)),
    );
    match dialect {
        Dialect::V3 => {
            op.insert(
                "responses".into(),
                json!({"200": {"description": "OK", "content": {"application/json": {"schema": schema_ref}}}}),
            );
            if let Some(b) = body {
                op.insert("parameters".into(), v3_parameters());
                op.insert("requestBody".into(), b);
            }
        }
        Dialect::V2 => {
            op.insert(
                "responses".into(),
                json!({"200": {"description": "OK", "schema": schema_ref}}),
            );
            if let Some(schema) = body {
                let mut params = v2_parameters();
                params.push(
                    json!({"name": "body", "in": "body", "required": true, "schema": schema}),
                );
                op.insert("parameters".into(), Value::Array(params));
            }
        }
    }
    Value::Object(op)
}

/// The paths of `resources` and their component schemas, in `dialect`.
fn paths_and_schemas(
    dialect: Dialect,
    inputs: &Inputs,
) -> (Map<String, Value>, Map<String, Value>) {
    let defs = schemas::definitions(dialect, &inputs.builtin_kinds());
    let mut paths = Map::new();
    let mut schemas = defs.schemas.clone();
    let prefix = match dialect {
        Dialect::V2 => "#/definitions/",
        Dialect::V3 => "#/components/schemas/",
    };
    let patch_ref = json!({"$ref": format!("{prefix}io.k8s.apimachinery.pkg.apis.meta.v1.Patch")});
    for (i, r) in inputs.resources.iter().enumerate() {
        let name = inputs.schema_name(&defs, i);
        let builtin = inputs.custom[i].is_none() && defs.names.values().any(|n| *n == name);
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
        let schema_ref = json!({"$ref": format!("{prefix}{name}")});
        let mut patch_types = vec![
            "application/json-patch+json",
            "application/merge-patch+json",
        ];
        if builtin {
            patch_types.push("application/strategic-merge-patch+json");
        }
        patch_types.push("application/apply-patch+yaml");
        let (object_body, patch_body) = match dialect {
            Dialect::V3 => {
                let content: Map<String, Value> = patch_types
                    .iter()
                    .map(|t| ((*t).to_string(), json!({"schema": patch_ref})))
                    .collect();
                (
                    json!({"required": true, "content": {"application/json": {"schema": schema_ref}}}),
                    json!({"required": true, "content": content}),
                )
            }
            Dialect::V2 => (schema_ref.clone(), patch_ref.clone()),
        };
        let mut patch = operation(dialect, r, "patch", &schema_ref, Some(patch_body));
        if dialect == Dialect::V2 {
            patch["consumes"] = json!(patch_types);
        }
        paths.insert(
            collection,
            json!({
                "get": operation(dialect, r, "list", &schema_ref, None),
                "post": operation(dialect, r, "post", &schema_ref, Some(object_body.clone())),
            }),
        );
        paths.insert(
            item,
            json!({
                "get": operation(dialect, r, "get", &schema_ref, None),
                "put": operation(dialect, r, "put", &schema_ref, Some(object_body)),
                "patch": patch,
                "delete": operation(dialect, r, "delete", &schema_ref, None),
            }),
        );
        if !builtin {
            let mut schema = inputs.custom[i]
                .clone()
                .unwrap_or_else(|| json!({"type": "object"}));
            schema["x-kubernetes-group-version-kind"] =
                json!([{"group": r.group, "kind": r.kind, "version": r.version}]);
            schemas.insert(name, schema);
        }
    }
    schemas.insert(
        "io.k8s.apimachinery.pkg.apis.meta.v1.Patch".into(),
        json!({"type": "object", "description": "Patch is provided to give a concrete name and type to the Kubernetes PATCH request body."}),
    );
    (paths, schemas)
}

/// The v3 document for one group version.
fn v3_document(inputs: &Inputs) -> Value {
    let (paths, schemas) = paths_and_schemas(Dialect::V3, inputs);
    json!({
        "openapi": "3.0.0",
        "info": {"title": INFO_TITLE, "version": INFO_VERSION},
        "paths": paths,
        "components": {"schemas": schemas},
    })
}

/// The v2 document for the whole API.
fn v2_document(inputs: &Inputs) -> Value {
    let (paths, definitions) = paths_and_schemas(Dialect::V2, inputs);
    json!({
        "swagger": "2.0",
        "info": {"title": INFO_TITLE, "version": INFO_VERSION},
        "paths": paths,
        "definitions": definitions,
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

fn v3_served(registry: &Registry, path: &str, resources: Vec<Arc<Resource>>) -> Arc<Served> {
    let inputs = Inputs::read(registry, resources);
    served(format!("v3/{path}"), &inputs, Dialect::V3, v3_document)
}

/// The content type of the v2 protobuf encoding (kube-openapi answers the deprecated
/// `...spec.v2@v1.0+protobuf` that client-go asks for with this one too).
const V2_PROTOBUF: &str = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";

/// The encoding an `Accept` header picks, clause by clause.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Encoding {
    Json,
    Protobuf,
}

fn negotiate(headers: &HeaderMap, protobuf: bool) -> Option<Encoding> {
    let Some(accept) = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()) else {
        return Some(Encoding::Json);
    };
    accept.split(',').find_map(|clause| {
        let mut parts = clause.split(';');
        let media = parts.next().unwrap_or("").trim();
        let refused = parts.any(|p| {
            p.trim()
                .strip_prefix("q=")
                .and_then(|q| q.trim().parse::<f32>().ok())
                == Some(0.0)
        });
        match media {
            _ if refused => None,
            "" | "*/*" | "application/*" | "application/json" => Some(Encoding::Json),
            "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
            | "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
                if protobuf =>
            {
                Some(Encoding::Protobuf)
            }
            _ => None,
        }
    })
}

/// 200 with the document, or 304 when `If-None-Match` names its current ETag.
fn conditional(headers: &HeaderMap, doc: &Served, encoding: Encoding) -> Response {
    let etag = format!("\"{}\"", doc.hash);
    let matches = headers
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|t| t.trim().trim_start_matches("W/"))
        .any(|t| t == etag || t == "*");
    let mut resp = match (matches, encoding, &doc.proto) {
        (true, _, _) => StatusCode::NOT_MODIFIED.into_response(),
        (false, Encoding::Protobuf, Some(proto)) => {
            let mut resp = (StatusCode::OK, proto.clone()).into_response();
            resp.headers_mut()
                .insert(header::CONTENT_TYPE, HeaderValue::from_static(V2_PROTOBUF));
            resp
        }
        _ => json_response(StatusCode::OK, doc.body.clone()),
    };
    let h = resp.headers_mut();
    if let Ok(v) = HeaderValue::from_str(&etag) {
        h.insert(header::ETAG, v);
    }
    h.insert(header::VARY, HeaderValue::from_static("Accept"));
    resp
}

/// `GET /openapi/v3`.
pub(crate) async fn index(State(app): State<Arc<App>>, headers: HeaderMap) -> Response {
    let mut paths = Map::new();
    for (group, version, resources) in app.registry.catalog().group_versions() {
        let path = doc_path(&group, &version);
        let doc = v3_served(&app.registry, &path, resources);
        let url = format!("/openapi/v3/{path}?hash={}", doc.hash);
        paths.insert(path, json!({"serverRelativeURL": url}));
    }
    let body = Bytes::from(json!({"paths": paths}).to_string());
    let doc = Served {
        hash: hash(&body),
        body,
        proto: None,
    };
    conditional(&headers, &doc, Encoding::Json)
}

/// `GET /openapi/v3/{api/v1 | apis/{g}/{v}}`: the document, 301 to the current `?hash=` when
/// the one asked for is stale, and cacheable for a year when it is current (Kubernetes'
/// `public, immutable`).
pub(crate) async fn document_handler(
    State(app): State<Arc<App>>,
    Path(path): Path<String>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> Response {
    let wanted = path.trim_matches('/');
    let Some(resources) = app
        .registry
        .catalog()
        .group_versions()
        .into_iter()
        .find(|(group, version, _)| doc_path(group, version) == wanted)
        .map(|(_, _, resources)| resources)
    else {
        return ApiError::NoSuchPath.into_response();
    };
    if negotiate(&headers, false).is_none() {
        return StatusCode::NOT_ACCEPTABLE.into_response();
    }
    let doc = v3_served(&app.registry, wanted, resources);
    let asked = query.as_deref().and_then(|q| {
        serde_urlencoded::from_str::<HashMap<String, String>>(q)
            .ok()?
            .remove("hash")
    });
    let mut resp = match asked.as_deref() {
        Some(h) if !h.is_empty() && h != doc.hash => {
            let mut resp = StatusCode::MOVED_PERMANENTLY.into_response();
            if let Ok(v) = HeaderValue::from_str(&format!("/openapi/v3/{wanted}?hash={}", doc.hash))
            {
                resp.headers_mut().insert(header::LOCATION, v);
            }
            return resp;
        }
        _ => conditional(&headers, &doc, Encoding::Json),
    };
    if asked.is_some_and(|h| !h.is_empty()) {
        let h = resp.headers_mut();
        h.insert(
            header::CACHE_CONTROL,
            HeaderValue::from_static("public, immutable"),
        );
        let next_year = jiff::Timestamp::now()
            .checked_add(jiff::SignedDuration::from_hours(365 * 24))
            .unwrap_or_else(|_| jiff::Timestamp::now());
        let expires = next_year.strftime("%a, %d %b %Y %H:%M:%S GMT").to_string();
        if let Ok(v) = HeaderValue::from_str(&expires) {
            h.insert(header::EXPIRES, v);
        }
    }
    resp
}

/// `GET /openapi/v2`: every group version's kinds in one Swagger 2.0 document.
pub(crate) async fn v2_handler(State(app): State<Arc<App>>, headers: HeaderMap) -> Response {
    let Some(encoding) = negotiate(&headers, true) else {
        return StatusCode::NOT_ACCEPTABLE.into_response();
    };
    let resources: Vec<Arc<Resource>> = app
        .registry
        .catalog()
        .group_versions()
        .into_iter()
        .flat_map(|(_, _, resources)| resources)
        .collect();
    let inputs = Inputs::read(&app.registry, resources);
    let doc = served("v2".into(), &inputs, Dialect::V2, v2_document);
    conditional(&headers, &doc, encoding)
}
