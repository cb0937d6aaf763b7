//! The `scale` subresource: an `autoscaling/v1` `Scale` view of a workload's replicas. Reading
//! builds the view from the object; writing (`update_scale`, `patch_scale`) changes the
//! object's replicas through the shared read-modify-write and answers the new view.

use std::sync::Arc;

use serde_json::{Value, json};

use super::{Part, Target, WriteOptions};
use crate::api::error::ApiError;
use crate::patch::Patch;
use crate::registry::Registry;
use crate::registry::resource::{Resource, ScalePaths};
use crate::registry::validation::FieldError;
use crate::selector::LabelSelector;

/// How a scale write changes the `Scale`.
enum Change<'a> {
    /// `PUT`: the whole new `Scale`.
    Replace(Value),
    /// `PATCH`: a patch of the current `Scale`.
    Patch(&'a Patch),
}

/// The scale paths of `res`, or 404 when it has no scale subresource.
fn paths(res: &Resource) -> Result<&ScalePaths, ApiError> {
    res.subresources.scale.as_ref().ok_or(ApiError::NoSuchPath)
}

/// Builds the `Scale` of `parent`.
fn scale_of(paths: &ScalePaths, parent: &Value) -> Value {
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
            // A LabelSelector, or a plain label map (a ReplicationController's selector).
            Value::Object(map)
                if !map
                    .keys()
                    .all(|k| k == "matchLabels" || k == "matchExpressions") =>
            {
                LabelSelector::from_label_selector_json(&json!({ "matchLabels": map }))
                    .map(|s| s.to_string())
                    .unwrap_or_default()
            }
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

impl Registry {
    /// `GET …/scale`: the object's `Scale`.
    pub fn get_scale(
        &self,
        res: &Arc<Resource>,
        ns: Option<&str>,
        name: &str,
    ) -> Result<Value, ApiError> {
        let paths = paths(res)?;
        let parent = self.get_value(res, ns, name)?;
        Ok(scale_of(paths, &parent))
    }

    /// `PUT …/scale`: sets the object's replicas to `scale`'s `spec.replicas`; a
    /// `metadata.resourceVersion` in `scale` is a precondition. Answers the new `Scale`.
    pub async fn update_scale(
        &self,
        res: &Arc<Resource>,
        ns: Option<&str>,
        name: &str,
        scale: Value,
        opts: &WriteOptions,
    ) -> Result<Value, ApiError> {
        self.write_scale(res, ns, name, Change::Replace(scale), opts)
            .await
    }

    /// `PATCH …/scale`: patches the object's `Scale` and sets its replicas from the result.
    /// Answers the new `Scale`.
    pub async fn patch_scale(
        &self,
        res: &Arc<Resource>,
        ns: Option<&str>,
        name: &str,
        patch: &Patch,
        opts: &WriteOptions,
    ) -> Result<Value, ApiError> {
        self.write_scale(res, ns, name, Change::Patch(patch), opts)
            .await
    }

    async fn write_scale(
        &self,
        res: &Arc<Resource>,
        ns: Option<&str>,
        name: &str,
        change: Change<'_>,
        opts: &WriteOptions,
    ) -> Result<Value, ApiError> {
        let paths = paths(res)?;
        let wanted_rv = match &change {
            Change::Replace(v) => v
                .pointer("/metadata/resourceVersion")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(|s| {
                    s.parse::<u64>().map_err(|_| {
                        ApiError::BadRequest(format!("invalid resource version: {s:?}"))
                    })
                })
                .transpose()?,
            Change::Patch(_) => None,
        };
        let mut produce = |current: &Value| -> Result<Value, ApiError> {
            let scale = scale_of(paths, current);
            let new_scale = match &change {
                Change::Replace(v) => v.clone(),
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
                    causes: vec![FieldError::invalid(
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
        let target = Target {
            res,
            ns,
            name,
            part: Part::Main,
        };
        let reply = self
            .write_existing(target, wanted_rv, &mut produce, opts)
            .await?;
        let parent: Value =
            serde_json::from_slice(&reply.body).map_err(|e| ApiError::Internal(e.to_string()))?;
        Ok(scale_of(paths, &parent))
    }
}
