//! Resource requests: parse, route to a verb, call the registry, render the answer.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method, StatusCode};
use http_body_util::{BodyExt, LengthLimitError, Limited};
use serde_json::{Value, json};

use super::error::ApiError;
use super::negotiate::{self, BodyType, Shape};
use super::render::{self, IncludeObject};
use super::request::{self, ResourcePath, Target};
use super::{App, MAX_BODY_BYTES, discovery, encoded, json_response, protobuf, watch};
use crate::api::options::{DeleteQuery, Options, PatchOptions};
use crate::patch::Patch;
use crate::registry::Resource;
use crate::registry::list::ListParams;
use crate::registry::rest::{
    DeleteOptions, Deleted, Part, Reply, Target as WriteTarget, WriteOptions,
};
use crate::storage::Preconditions;

/// Query parameters, last value wins (parsed once, in [`request::RequestInfo`]).
pub(crate) use crate::api::request_info::Query;

/// The entry point for every path that is not a fixed meta endpoint.
pub(crate) async fn dispatch(State(app): State<Arc<App>>, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    let info = match parts.extensions.get::<Arc<request::RequestInfo>>() {
        Some(info) => info.clone(),
        None => Arc::new(request::RequestInfo::from_parts(
            &parts.method,
            &parts.uri,
            &parts.headers,
        )),
    };
    let result = match info.target.clone() {
        target @ (Target::CoreGroups
        | Target::Groups
        | Target::Group(_)
        | Target::GroupVersion { .. })
            if parts.method == Method::GET =>
        {
            return discovery::serve(&app, &target, &parts.headers);
        }
        Target::Resource(path) if super::reviews::handles(&path) => {
            return super::reviews::serve(&app, &parts, path, body).await;
        }
        Target::Resource(path) => {
            let user = parts.extensions.get::<Arc<super::User>>().cloned();
            resource(&app, parts.method, &parts.headers, path, &info, body, user).await
        }
        Target::Unknown
        | Target::CoreGroups
        | Target::Groups
        | Target::Group(_)
        | Target::GroupVersion { .. } => Err(ApiError::NoSuchPath),
    };
    result.unwrap_or_else(IntoResponse::into_response)
}

/// Reads a request body, at most [`MAX_BODY_BYTES`] (413 beyond).
pub(crate) async fn read_body(body: Body) -> Result<Bytes, ApiError> {
    match Limited::new(body, MAX_BODY_BYTES).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e) if e.downcast_ref::<LengthLimitError>().is_some() => {
            Err(ApiError::TooLarge(format!("limit is {MAX_BODY_BYTES}")))
        }
        Err(e) => Err(ApiError::BadRequest(format!(
            "reading the request body failed: {e}"
        ))),
    }
}

/// Decodes an object body (create, update) by its content type.
pub(crate) fn decode_object(headers: &HeaderMap, body: &[u8]) -> Result<Value, ApiError> {
    let ty = negotiate::body_type(headers).map_err(|_| ApiError::UnsupportedMediaType {
        accepted: vec![
            "application/json",
            "application/yaml",
            "application/vnd.kubernetes.protobuf",
        ],
    })?;
    let value = match ty {
        BodyType::Json => serde_json::from_slice::<Value>(body).map_err(|e| {
            ApiError::BadRequest(format!("couldn't get version/kind; json parse error: {e}"))
        })?,
        BodyType::Yaml => serde_saphyr::from_slice::<Value>(body)
            .map_err(|e| ApiError::BadRequest(format!("error converting YAML to JSON: {e}")))?,
        BodyType::Protobuf => protobuf::decode(body).map_err(|e| match e {
            protobuf::ProtobufError::UnsupportedType { .. }
            | protobuf::ProtobufError::ContentEncodingNotSupported(_)
            | protobuf::ProtobufError::ContentTypeNotSupported(_) => {
                ApiError::UnsupportedMediaType {
                    accepted: vec!["application/json", "application/yaml"],
                }
            }
            other => {
                ApiError::BadRequest(format!("the protobuf body could not be decoded: {other}"))
            }
        })?,
        _ => {
            return Err(ApiError::UnsupportedMediaType {
                accepted: vec![
                    "application/json",
                    "application/yaml",
                    "application/vnd.kubernetes.protobuf",
                ],
            });
        }
    };
    if !value.is_object() {
        return Err(ApiError::BadRequest(
            "the object provided is unrecognized in the request body: expected a JSON object"
                .into(),
        ));
    }
    Ok(value)
}

/// The options the edge parsed for this request, or the error they are.
fn options(info: &request::RequestInfo) -> Result<&Options, ApiError> {
    info.options.as_ref().map_err(Clone::clone)
}

/// The verb's options are parsed once, at the edge, from the same method and path that route
/// the request here; a handler asking for another verb's options is a bug, not a request to
/// parse the query again.
fn other_verb(info: &request::RequestInfo) -> ApiError {
    ApiError::Internal(format!("no such options for a {} request", info.verb))
}

/// The list options of a `list`, `watch` or `deletecollection`.
fn list_params(info: &request::RequestInfo) -> Result<ListParams, ApiError> {
    match options(info)? {
        Options::List(params) | Options::DeleteCollection(params, _) => Ok(params.clone()),
        _ => Err(other_verb(info)),
    }
}

/// The write options of a `create` or `update`, with the user who writes.
fn write_options_of(
    info: &request::RequestInfo,
    user: Option<&Arc<super::User>>,
) -> Result<WriteOptions, ApiError> {
    let mut opts = match options(info)? {
        Options::Write(opts) => opts.clone(),
        Options::Patch(p) => p.write.clone(),
        _ => return Err(other_verb(info)),
    };
    opts.user = user.cloned();
    Ok(opts)
}

/// The query part of a `delete` or `deletecollection`.
fn delete_query(info: &request::RequestInfo) -> Result<DeleteQuery, ApiError> {
    match options(info)? {
        Options::Delete(q) | Options::DeleteCollection(_, q) => Ok(q.clone()),
        _ => Err(other_verb(info)),
    }
}

fn with_warnings(mut resp: Response, warnings: &[String]) -> Response {
    for w in warnings {
        let text = format!("299 - {}", json!(w));
        if let Ok(v) = HeaderValue::from_str(&text) {
            resp.headers_mut().append(http::header::WARNING, v);
        }
    }
    resp
}

fn reply_response(
    reply: Reply,
    res: &Resource,
    shape: Shape,
    q: &Query,
) -> Result<Response, ApiError> {
    let code = if reply.created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    let resp = object_response(code, reply.body, res, shape, q)?;
    Ok(with_warnings(resp, &reply.warnings))
}

/// Renders one object in the negotiated shape.
fn object_response(
    code: StatusCode,
    body: Bytes,
    res: &Resource,
    shape: Shape,
    q: &Query,
) -> Result<Response, ApiError> {
    let body = match shape {
        Shape::Object => body,
        Shape::Table(version) => {
            let v: Value =
                serde_json::from_slice(&body).map_err(|e| ApiError::Internal(e.to_string()))?;
            let include = IncludeObject::parse(q.get("includeObject").map(String::as_str));
            Bytes::from(render::table(res, version, &[v], None, include, true).to_string())
        }
        Shape::Metadata => {
            let v: Value =
                serde_json::from_slice(&body).map_err(|e| ApiError::Internal(e.to_string()))?;
            encoded(&render::partial_metadata(&v))
        }
    };
    Ok(json_response(code, body))
}

async fn resource(
    app: &Arc<App>,
    method: Method,
    headers: &HeaderMap,
    path: ResourcePath,
    info: &request::RequestInfo,
    body: Body,
    user: Option<Arc<super::User>>,
) -> Result<Response, ApiError> {
    let q = &info.query;
    let watching = info.verb == "watch";
    if path.group.is_empty()
        && path.resource == "bindings"
        && path.name.is_none()
        && path.subresource.is_none()
    {
        return binding(
            app,
            &method,
            headers,
            path.namespace.as_deref(),
            None,
            body,
            info,
        )
        .await;
    }
    let catalog = app.registry.catalog();
    let res = catalog
        .find(&path.group, &path.version, &path.resource)
        .ok_or(ApiError::NoSuchPath)?;
    // Scope checks: a cluster-scoped resource never sits under /namespaces/{ns}/; a namespaced
    // one is addressed by name only inside a namespace.
    if path.namespace.is_some() && !res.namespaced {
        return Err(ApiError::NoSuchPath);
    }
    if path.name.is_some() && res.namespaced && path.namespace.is_none() {
        return Err(ApiError::NoSuchPath);
    }
    let ns = path.namespace.as_deref();
    let not_allowed = |verb: &str| ApiError::MethodNotAllowed {
        verb: verb.to_string(),
        resource: res.group_resource().to_string(),
    };
    // Built-in resources that serve fewer verbs (componentstatuses: get and list) refuse the
    // others; a terminating CRD's resources answer their own message (rest/create).
    if path.subresource.is_none()
        && res.strategy.structural_schema().is_none()
        && !res.allows(&info.verb)
    {
        return Err(not_allowed(method.as_str()));
    }
    let deprecation: Vec<String> = res.strategy.deprecation_warning().into_iter().collect();
    let response = match (&path.name, &path.subresource) {
        (None, None) => match method {
            Method::GET if watching => {
                let shape = negotiate::object_shape(headers)?;
                let params = list_params(info)?;
                let slot = app.watches.acquire(user.as_deref())?;
                watch::serve(app, &res, ns, &params, shape, q, slot).await
            }
            Method::GET => {
                let shape = negotiate::object_shape(headers)?;
                let params = list_params(info)?;
                let out = app.registry.list(&res, ns, &params).await?;
                let body = match shape {
                    Shape::Object => render::list_body(&res, &out),
                    Shape::Metadata => Bytes::from(render::metadata_list(&out).to_string()),
                    Shape::Table(version) => {
                        let objects: Vec<Value> = out
                            .items
                            .iter()
                            .filter_map(|b| serde_json::from_slice(b).ok())
                            .collect();
                        let include =
                            IncludeObject::parse(q.get("includeObject").map(String::as_str));
                        Bytes::from(
                            render::table(&res, version, &objects, Some(&out), include, true)
                                .to_string(),
                        )
                    }
                };
                Ok(with_warnings(
                    json_response(StatusCode::OK, body),
                    &out.warnings,
                ))
            }
            Method::POST => {
                if ns.is_none() && res.namespaced {
                    return Err(ApiError::NoSuchPath);
                }
                let shape = negotiate::object_shape(headers)?;
                let opts = write_options_of(info, user.as_ref())?;
                let bytes = read_body(body).await?;
                let obj = decode_object(headers, &bytes)?;
                let reply = app.registry.create(&res, ns, obj, &opts).await?;
                reply_response(reply, &res, shape, q)
            }
            Method::DELETE if res.allows("deletecollection") => {
                let bytes = read_body(body).await?;
                let opts = delete_options(headers, &bytes, &delete_query(info)?)?;
                let params = list_params(info)?;
                let deleted = app
                    .registry
                    .delete_collection(&res, ns, &params, &opts)
                    .await?;
                let body = json!({
                    "kind": res.list_kind,
                    "apiVersion": res.api_version(),
                    "metadata": {"resourceVersion": deleted.resource_version.to_string()},
                    "items": deleted.items,
                });
                Ok(json_response(StatusCode::OK, encoded(&body)))
            }
            _ => Err(not_allowed(method.as_str())),
        },
        (Some(name), sub) => {
            let sub = sub.as_deref();
            if watching {
                return Err(ApiError::BadRequest(
                    "watch of a single object: use a fieldSelector on metadata.name".into(),
                ));
            }
            // The object itself, or its status: the same verbs on another part of it.
            let part = match sub {
                None => Some(Part::Main),
                Some("status") if res.subresources.status => Some(Part::Status),
                Some("ephemeralcontainers")
                    if res.subresources.other.contains(&"ephemeralcontainers") =>
                {
                    Some(Part::EphemeralContainers)
                }
                Some("resize") if res.subresources.other.contains(&"resize") => Some(Part::Resize),
                Some("approval") if res.subresources.other.contains(&"approval") => {
                    Some(Part::Approval)
                }
                _ => None,
            };
            match (part, sub) {
                (Some(part), _) => {
                    object(
                        app,
                        method,
                        headers,
                        &res,
                        (ns, name, part),
                        body,
                        (info, user),
                    )
                    .await
                }
                (None, Some("scale")) if res.subresources.scale.is_some() => {
                    scale(app, method, headers, &res, (ns, name), body, (info, user)).await
                }
                (None, Some("finalize"))
                    if res.subresources.other.contains(&"finalize") && method == Method::PUT =>
                {
                    let bytes = read_body(body).await?;
                    let obj = decode_object(headers, &bytes)?;
                    let v = app.registry.finalize(name, &obj).await?;
                    Ok(json_response(StatusCode::OK, encoded(&v)))
                }
                (None, Some("binding")) if res.subresources.other.contains(&"binding") => {
                    binding(app, &method, headers, ns, Some(name), body, info).await
                }
                (None, Some(sub @ ("log" | "exec" | "attach" | "portforward" | "proxy")))
                    if res.subresources.other.contains(&sub) =>
                {
                    super::kubelet::serve(app, &method, &res, (ns, name, sub), &info.query).await
                }
                (None, Some("eviction")) if res.subresources.other.contains(&"eviction") => {
                    eviction(app, &method, headers, (ns, name), body, info).await
                }
                _ => Err(ApiError::NoSuchPath),
            }
        }
        (None, Some(_)) => Err(ApiError::NoSuchPath),
    };
    response.map(|r| with_warnings(r, &deprecation))
}

async fn object(
    app: &Arc<App>,
    method: Method,
    headers: &HeaderMap,
    res: &Arc<Resource>,
    (ns, name, part): (Option<&str>, &str, Part),
    body: Body,
    (info, user): (&request::RequestInfo, Option<Arc<super::User>>),
) -> Result<Response, ApiError> {
    let q = &info.query;
    let shape = negotiate::object_shape(headers)?;
    match method {
        Method::GET => {
            let bytes = app.registry.get(res, ns, name)?;
            object_response(StatusCode::OK, bytes, res, shape, q)
        }
        Method::PUT => {
            let opts = write_options_of(info, user.as_ref())?;
            let bytes = read_body(body).await?;
            let obj = decode_object(headers, &bytes)?;
            let reply = app.registry.update(res, ns, name, part, obj, &opts).await?;
            reply_response(reply, res, shape, q)
        }
        Method::PATCH => {
            let PatchOptions {
                write: mut opts,
                patch_type,
                force,
            } = match options(info)? {
                Options::Patch(p) => p.clone(),
                _ => return Err(other_verb(info)),
            };
            opts.user = user;
            // The content type first: `force` is allowed only with an apply patch (kubectl
            // `apply --server-side` always sends it).
            let ty = patch_type.map_err(|_| ApiError::UnsupportedMediaType {
                accepted: crate::patch::BUILTIN_PATCH_TYPES.to_vec(),
            })?;
            if force.is_some() && ty != negotiate::BodyType::ApplyPatch {
                return Err(ApiError::invalid_options(
                    "PatchOptions",
                    vec![crate::registry::validation::FieldError::forbidden(
                        "force",
                        "may not be specified for non-apply patch",
                    )],
                ));
            }
            if ty == negotiate::BodyType::ApplyPatch {
                let force = force.unwrap_or(false);
                return apply_object(app, res, (ns, name, part), body, q, (&opts, force), shape)
                    .await;
            }
            let bytes = read_body(body).await?;
            // Custom resources (they have a structural schema) take no strategic merge patch.
            let patch = Patch::parse(ty, &bytes, res.strategy.structural_schema().is_none())?;
            let target = WriteTarget {
                res,
                ns,
                name,
                part,
            };
            let reply = app.registry.patch(target, &patch, &opts).await?;
            reply_response(reply, res, shape, q)
        }
        Method::DELETE if part == Part::Main => {
            let bytes = read_body(body).await?;
            let opts = delete_options(headers, &bytes, &delete_query(info)?)?;
            let deleted = app.registry.delete(res, ns, name, &opts).await?;
            let accepted = deleted.accepted(&opts);
            let mut response = delete_response(res, deleted);
            if accepted {
                *response.status_mut() = StatusCode::ACCEPTED;
            }
            Ok(response)
        }
        other => Err(ApiError::MethodNotAllowed {
            verb: other.to_string(),
            resource: res.group_resource().to_string(),
        }),
    }
}

/// Server-side apply: `fieldManager` is required (the User-Agent does not stand in for it);
/// the body is YAML or JSON.
async fn apply_object(
    app: &Arc<App>,
    res: &Arc<Resource>,
    (ns, name, part): (Option<&str>, &str, Part),
    body: Body,
    q: &Query,
    (opts, force): (&WriteOptions, bool),
    shape: Shape,
) -> Result<Response, ApiError> {
    if opts.field_manager.as_deref().is_none_or(str::is_empty) {
        return Err(ApiError::invalid_options(
            "PatchOptions",
            vec![crate::registry::validation::FieldError::required(
                "fieldManager",
                "is required for apply patch",
            )],
        ));
    }
    let bytes = read_body(body).await?;
    let config: Value = match serde_json::from_slice(&bytes) {
        Ok(v) => v,
        Err(_) => serde_saphyr::from_slice::<Value>(&bytes)
            .map_err(|e| ApiError::BadRequest(format!("error decoding YAML: {e}")))?,
    };
    let target = WriteTarget {
        res,
        ns,
        name,
        part,
    };
    let reply = app.registry.apply(target, config, force, opts).await?;
    reply_response(reply, res, shape, q)
}

/// `DeleteOptions` from the body and the query (the query wins), judged together.
fn delete_options(
    headers: &HeaderMap,
    body: &[u8],
    q: &DeleteQuery,
) -> Result<DeleteOptions, ApiError> {
    let mut opts = DeleteOptions::default();
    let mut raw_propagation: Option<String> = None;
    let parsed = if body.iter().all(u8::is_ascii_whitespace) {
        None
    } else {
        Some(decode_object(headers, body)?)
    };
    if let Some(v) = parsed {
        raw_propagation = v
            .get("propagationPolicy")
            .and_then(Value::as_str)
            .map(String::from);
        opts.grace_period_seconds = v.get("gracePeriodSeconds").and_then(Value::as_i64);
        opts.orphan_dependents = v.get("orphanDependents").and_then(Value::as_bool);
        opts.dry_run = v
            .get("dryRun")
            .and_then(Value::as_array)
            .is_some_and(|a| a.iter().any(|d| d == "All"));
        let pre = &v["preconditions"];
        opts.preconditions = Preconditions {
            uid: pre
                .get("uid")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(String::from),
            resource_version: match pre.get("resourceVersion").and_then(Value::as_str) {
                Some(rv) if !rv.is_empty() => Some(rv.parse().map_err(|_| {
                    ApiError::BadRequest(format!("invalid resource version: {rv:?}"))
                })?),
                _ => None,
            },
        };
    }
    if let Some(p) = &q.propagation_policy {
        raw_propagation = Some(p.clone());
    }
    if q.grace_period_seconds.is_some() {
        opts.grace_period_seconds = q.grace_period_seconds;
    }
    if let Some(o) = q.orphan_dependents {
        opts.orphan_dependents = Some(o);
    }
    if q.dry_run {
        opts.dry_run = true;
    }
    opts.propagation =
        DeleteOptions::parse_propagation(raw_propagation.as_deref(), opts.orphan_dependents)?;
    Ok(opts)
}

fn delete_response(res: &Resource, deleted: Deleted) -> Response {
    match deleted {
        Deleted::Pending(v) => json_response(StatusCode::OK, encoded(&v)),
        Deleted::Gone(v) if res.strategy.returns_object_on_delete() => {
            json_response(StatusCode::OK, encoded(&v))
        }
        Deleted::Gone(v) => {
            let mut details = serde_json::Map::new();
            details.insert("name".into(), v["metadata"]["name"].clone());
            if !res.group.is_empty() {
                details.insert("group".into(), json!(res.group));
            }
            details.insert("kind".into(), json!(res.plural));
            // An object deleted without being read (it could not be) has no uid to report.
            if let Some(uid) = v["metadata"]["uid"].as_str() {
                details.insert("uid".into(), json!(uid));
            }
            let status = json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
                                "status": "Success", "details": details});
            json_response(StatusCode::OK, encoded(&status))
        }
    }
}

/// Reads a request body for the scale subresource.
pub(crate) async fn body_value(headers: &HeaderMap, body: Body) -> Result<Value, ApiError> {
    let bytes = read_body(body).await?;
    decode_object(headers, &bytes)
}

/// Serves `GET`, `PUT` and `PATCH` on `…/{name}/scale`.
async fn scale(
    app: &Arc<App>,
    method: Method,
    headers: &HeaderMap,
    res: &Arc<Resource>,
    (ns, name): (Option<&str>, &str),
    body: Body,
    (info, user): (&request::RequestInfo, Option<Arc<super::User>>),
) -> Result<Response, ApiError> {
    let scale = match method {
        Method::GET => app.registry.get_scale(res, ns, name)?,
        Method::PUT => {
            let opts = write_options_of(info, user.as_ref())?;
            let new_scale = body_value(headers, body).await?;
            app.registry
                .update_scale(res, ns, name, new_scale, &opts)
                .await?
        }
        Method::PATCH => {
            let opts = write_options_of(info, user.as_ref())?;
            let ty = negotiate::body_type(headers).map_err(|_| ApiError::UnsupportedMediaType {
                accepted: crate::patch::BUILTIN_PATCH_TYPES.to_vec(),
            })?;
            let bytes = read_body(body).await?;
            let patch = Patch::parse(ty, &bytes, true)?;
            app.registry
                .patch_scale(res, ns, name, &patch, &opts)
                .await?
        }
        other => {
            return Err(ApiError::MethodNotAllowed {
                verb: other.to_string(),
                resource: format!("{}/scale", res.group_resource()),
            });
        }
    };
    Ok(json_response(StatusCode::OK, encoded(&scale)))
}

/// Serves `POST …/pods/{name}/binding` and `POST …/bindings`: 201 with a `Status` of `Success`.
async fn binding(
    app: &Arc<App>,
    method: &Method,
    headers: &HeaderMap,
    ns: Option<&str>,
    name: Option<&str>,
    body: Body,
    info: &request::RequestInfo,
) -> Result<Response, ApiError> {
    let ns = ns.ok_or(ApiError::NoSuchPath)?;
    if method != Method::POST {
        return Err(ApiError::MethodNotAllowed {
            verb: method.to_string(),
            resource: "pods/binding".into(),
        });
    }
    let opts = write_options_of(info, None)?;
    let bytes = read_body(body).await?;
    let obj = decode_object(headers, &bytes)?;
    let status = app.registry.bind_pod(ns, name, &obj, opts.dry_run).await?;
    Ok(json_response(StatusCode::CREATED, encoded(&status)))
}

/// Serves `POST …/pods/{name}/eviction`: the `Status` the registry answers, with its `code` as
/// the HTTP status (201 on success).
async fn eviction(
    app: &Arc<App>,
    method: &Method,
    headers: &HeaderMap,
    (ns, name): (Option<&str>, &str),
    body: Body,
    info: &request::RequestInfo,
) -> Result<Response, ApiError> {
    let ns = ns.ok_or(ApiError::NoSuchPath)?;
    if method != Method::POST {
        return Err(ApiError::MethodNotAllowed {
            verb: method.to_string(),
            resource: "pods/eviction".into(),
        });
    }
    let opts = write_options_of(info, None)?;
    let obj = body_value(headers, body).await?;
    let status = app.registry.evict_pod(ns, name, &obj, opts.dry_run).await?;
    let code = status["code"]
        .as_u64()
        .and_then(|c| StatusCode::from_u16(u16::try_from(c).ok()?).ok())
        .unwrap_or(StatusCode::CREATED);
    Ok(json_response(code, encoded(&status)))
}
