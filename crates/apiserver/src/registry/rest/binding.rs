//! The `pods/binding` subresource and the legacy `bindings` resource: a scheduler assigns a
//! pod to a node by POSTing a `Binding`. The pod gets `spec.nodeName` and a
//! `PodScheduled=True` condition; the answer is a `Status` of `Success` with code 201.

use serde_json::{Value, json};

use super::now_rfc3339;
use crate::api::error::{ApiError, GroupResource};
use crate::api::field::FieldError;
use crate::registry::Registry;
use crate::storage::{Preconditions, Update};

/// The resource named in a binding's errors.
fn binding_resource() -> GroupResource {
    GroupResource {
        group: String::new(),
        resource: "pods/binding".into(),
    }
}

/// Checks a `Binding` body: `target.kind` is `Node` or empty, `target.name` is set.
fn validate(binding: &Value, name: &str) -> Result<(), ApiError> {
    let mut causes = Vec::new();
    let kind = binding
        .pointer("/target/kind")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if !kind.is_empty() && kind != "Node" {
        causes.push(FieldError::not_supported(
            "target.kind",
            json!(kind),
            &["Node", "<empty>"],
        ));
    }
    let target = binding
        .pointer("/target/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if target.is_empty() {
        causes.push(FieldError::required("target.name", ""));
    }
    if causes.is_empty() {
        Ok(())
    } else {
        Err(ApiError::Invalid {
            kind: "Binding".into(),
            group: String::new(),
            name: name.into(),
            causes,
        })
    }
}

/// Sets `status.conditions[type=PodScheduled]` to `True`, keeping its transition time when it
/// already was `True`.
fn set_scheduled(pod: &mut Value) {
    if !pod["status"].is_object() {
        pod["status"] = json!({});
    }
    if !pod["status"]["conditions"].is_array() {
        pod["status"]["conditions"] = json!([]);
    }
    let Some(conditions) = pod["status"]["conditions"].as_array_mut() else {
        return;
    };
    let fresh = json!({
        "type": "PodScheduled",
        "status": "True",
        "lastProbeTime": null,
        "lastTransitionTime": now_rfc3339(),
    });
    match conditions
        .iter_mut()
        .find(|c| c["type"].as_str() == Some("PodScheduled"))
    {
        Some(c) if c["status"].as_str() == Some("True") => {}
        Some(c) => *c = fresh,
        None => conditions.push(fresh),
    }
}

impl Registry {
    /// `POST …/namespaces/{ns}/pods/{name}/binding` (`url_name` is `Some(name)`) and
    /// `POST …/namespaces/{ns}/bindings` (`None`: the name comes from the body). Binds the pod
    /// to `target.name`; `metadata.uid` and `metadata.resourceVersion` of the binding are
    /// preconditions on the pod, its `metadata.annotations` are copied onto the pod. Answers
    /// the `Status` Kubernetes answers.
    pub async fn bind_pod(
        &self,
        ns: &str,
        url_name: Option<&str>,
        binding: &Value,
        dry_run: bool,
    ) -> Result<Value, ApiError> {
        let body_name = binding
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let name = match url_name {
            Some(n) if n != body_name => {
                return Err(ApiError::BadRequest(
                    "name in URL does not match name in Binding object".into(),
                ));
            }
            Some(n) => n,
            None if body_name.is_empty() => {
                return Err(ApiError::Invalid {
                    kind: "Binding".into(),
                    group: String::new(),
                    name: String::new(),
                    causes: vec![FieldError::required(
                        "metadata.name",
                        "name or generateName is required",
                    )],
                });
            }
            None => body_name,
        };
        if let Some(body_ns) = binding
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty() && *s != ns)
        {
            return Err(ApiError::BadRequest(format!(
                "the namespace of the provided object ({body_ns}) does not match the namespace sent on the request ({ns})"
            )));
        }
        validate(binding, name)?;
        let node = binding
            .pointer("/target/name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let pre = Preconditions {
            uid: binding
                .pointer("/metadata/uid")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(str::to_string),
            resource_version: binding
                .pointer("/metadata/resourceVersion")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(|s| {
                    s.parse::<u64>().map_err(|_| {
                        ApiError::BadRequest(format!("invalid resource version: {s:?}"))
                    })
                })
                .transpose()?,
        };
        let annotations = binding
            .pointer("/metadata/annotations")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        let catalog = self.catalog();
        let res = catalog.find("", "v1", "pods").ok_or(ApiError::NoSuchPath)?;
        if dry_run {
            // Everything but the write: the pod must exist and be bindable.
            let pod = self.get_value(&res, Some(ns), name)?;
            check_bindable(&pod, name)?;
            return Ok(success());
        }
        let key = res.key(Some(ns), name);
        let mut refusal: Option<ApiError> = None;
        let mut step = |mut pod: Value| -> Update {
            if let Err(e) = check_bindable(&pod, name) {
                refusal = Some(e);
                return Update::Abort;
            }
            pod["spec"]["nodeName"] = json!(node);
            if !annotations.is_empty() {
                if !pod["metadata"]["annotations"].is_object() {
                    pod["metadata"]["annotations"] = json!({});
                }
                if let Some(a) = pod["metadata"]["annotations"].as_object_mut() {
                    for (k, v) in &annotations {
                        a.insert(k.clone(), v.clone());
                    }
                }
            }
            set_scheduled(&mut pod);
            Update::Put(pod)
        };
        let result = self
            .storage()
            .guaranteed_update(&key, &pre, &mut step)
            .await;
        if let Some(e) = refusal {
            return Err(e);
        }
        result.map_err(|e| ApiError::from_storage(e, &res.group_resource(), name))?;
        Ok(success())
    }
}

/// A pod can be bound when it is not being deleted and not bound yet.
fn check_bindable(pod: &Value, name: &str) -> Result<(), ApiError> {
    if pod.pointer("/metadata/deletionTimestamp").is_some() {
        return Err(ApiError::Conflict {
            resource: binding_resource(),
            name: name.into(),
            detail: format!("pod {name} is being deleted, cannot be assigned to a host"),
        });
    }
    if let Some(bound) = pod
        .pointer("/spec/nodeName")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
    {
        return Err(ApiError::Conflict {
            resource: binding_resource(),
            name: name.into(),
            detail: format!("pod {name} is already assigned to node {bound:?}"),
        });
    }
    Ok(())
}

/// What a successful binding answers.
fn success() -> Value {
    json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "code": 201,
    })
}
