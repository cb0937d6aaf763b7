//! The `scale` subresource: an `autoscaling/v1` `Scale` view of a workload's replicas.

use std::sync::Arc;

use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use http::{HeaderMap, Method, StatusCode};
use serde_json::{Value, json};

use super::App;
use super::error::ApiError;
use super::json_response;
use super::resources::{Query, body_patch, body_value, write_options};
use crate::registry::Resource;
use crate::registry::rest::{Part, Target};
use crate::selector::LabelSelector;

/// Builds the `Scale` of `parent`.
fn scale_of(res: &Resource, parent: &Value) -> Value {
    let Some(paths) = &res.subresources.scale else {
        return Value::Null;
    };
    let spec = parent
        .pointer(&paths.spec_replicas)
        .cloned()
        .unwrap_or(json!(0));
    let status = parent
        .pointer(&paths.status_replicas)
        .cloned()
        .unwrap_or(json!(0));
    let selector = paths
        .label_selector
        .as_deref()
        .and_then(|p| parent.pointer(p))
        .map(|s| match s {
            Value::String(s) => s.clone(),
            obj => LabelSelector::from_label_selector_json(obj)
                .map(|s| s.to_string())
                .unwrap_or_default(),
        });
    let meta = &parent["metadata"];
    let mut status_obj = json!({"replicas": status});
    if let Some(sel) = selector {
        status_obj["selector"] = json!(sel);
    }
    json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            "name": meta["name"], "namespace": meta["namespace"], "uid": meta["uid"],
            "resourceVersion": meta["resourceVersion"], "creationTimestamp": meta["creationTimestamp"],
        },
        "spec": {"replicas": spec},
        "status": status_obj,
    })
}

/// Serves `GET`, `PUT` and `PATCH` on `…/{name}/scale`.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn serve(
    app: &Arc<App>,
    method: Method,
    headers: &HeaderMap,
    res: &Arc<Resource>,
    ns: Option<&str>,
    name: &str,
    body: Body,
    q: &Query,
) -> Result<Response, ApiError> {
    let Some(paths) = res.subresources.scale.clone() else {
        return Err(ApiError::NoSuchPath);
    };
    enum Change {
        Put(Value),
        Patch(crate::patch::Patch),
    }
    let change = match method {
        Method::GET => {
            let parent = app.registry.get_value(res, ns, name)?;
            return Ok(json_response(
                StatusCode::OK,
                Bytes::from(scale_of(res, &parent).to_string()),
            ));
        }
        Method::PUT => Change::Put(body_value(headers, body).await?),
        Method::PATCH => Change::Patch(body_patch(headers, body).await?),
        other => {
            return Err(ApiError::MethodNotAllowed {
                verb: other.to_string(),
                resource: format!("{}/scale", res.group_resource()),
            });
        }
    };
    let opts = write_options(q)?;
    let wanted_rv = match &change {
        Change::Put(v) => v
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(|s| {
                s.parse::<u64>()
                    .map_err(|_| ApiError::BadRequest(format!("invalid resource version: {s:?}")))
            })
            .transpose()?,
        Change::Patch(_) => None,
    };
    let res_for_scale = res.clone();
    let mut produce = |current: &Value| -> Result<Value, ApiError> {
        let scale = scale_of(&res_for_scale, current);
        let new_scale = match &change {
            Change::Put(v) => v.clone(),
            Change::Patch(p) => p.apply("Scale", &scale)?,
        };
        let replicas = new_scale
            .pointer("/spec/replicas")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        if replicas < 0 {
            return Err(ApiError::Invalid {
                kind: "Scale.autoscaling".into(),
                group: "autoscaling".into(),
                name: current["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .into(),
                causes: vec![crate::registry::validation::FieldError::invalid(
                    "spec.replicas",
                    json!(replicas),
                    "must be greater than or equal to 0",
                )],
            });
        }
        let mut parent = current.clone();
        if let Some(slot) = parent.pointer_mut(&paths.spec_replicas) {
            *slot = json!(replicas);
        } else if let Some(spec) = parent.get_mut("spec").and_then(Value::as_object_mut) {
            spec.insert("replicas".into(), json!(replicas));
        }
        Ok(parent)
    };
    let reply = app
        .registry
        .write_existing(
            Target {
                res,
                ns,
                name,
                part: Part::Main,
            },
            wanted_rv,
            &mut produce,
            &opts,
        )
        .await?;
    let parent: Value =
        serde_json::from_slice(&reply.body).map_err(|e| ApiError::Internal(e.to_string()))?;
    Ok(json_response(
        StatusCode::OK,
        Bytes::from(scale_of(res, &parent).to_string()),
    ))
}
