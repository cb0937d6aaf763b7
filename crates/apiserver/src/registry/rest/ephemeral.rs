//! A pod's `ephemeralcontainers` subresource (`kubectl debug`): get, update and patch the pod,
//! of which only `spec.ephemeralContainers` changes.
//!
//! As in Kubernetes (`podEphemeralContainersStrategy`), the written pod is the stored one with
//! the new list of ephemeral containers: metadata, the rest of the spec and the status stay.
//! Ephemeral containers can be added, never changed or removed; each needs a name unique in
//! the pod and an image, may name an existing `targetContainerName`, and may not have ports,
//! probes, lifecycle hooks, resources, resize policies or a restart policy.

use serde_json::{Value, json};

use crate::api::field::{FieldError, FieldErrorKind};

/// The stored pod `old` with the ephemeral containers of `new`.
pub(super) fn narrow(new: &Value, old: &Value) -> Value {
    let mut pod = old.clone();
    if let Some(rv) = new.pointer("/metadata/resourceVersion") {
        pod["metadata"]["resourceVersion"] = rv.clone();
    }
    match new.pointer("/spec/ephemeralContainers") {
        Some(list) if !list.is_null() => pod["spec"]["ephemeralContainers"] = list.clone(),
        _ => {
            if let Some(spec) = pod.get_mut("spec").and_then(Value::as_object_mut) {
                spec.remove("ephemeralContainers");
            }
        }
    }
    pod
}

/// The fields an ephemeral container may not set.
const FORBIDDEN: [&str; 8] = [
    "ports",
    "livenessProbe",
    "readinessProbe",
    "startupProbe",
    "lifecycle",
    "resources",
    "resizePolicy",
    "restartPolicy",
];

fn list<'a>(pod: &'a Value, key: &str) -> &'a [Value] {
    pod["spec"][key].as_array().map_or(&[], Vec::as_slice)
}

fn name(c: &Value) -> &str {
    c["name"].as_str().unwrap_or_default()
}

/// The checks of an update through the subresource.
pub(super) fn validate(new: &Value, old: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let base = "spec.ephemeralContainers";
    let current = list(new, "ephemeralContainers");
    let mut names: Vec<&str> = list(new, "containers")
        .iter()
        .chain(list(new, "initContainers"))
        .map(name)
        .collect();
    let targets = names.clone();
    for (i, c) in current.iter().enumerate() {
        let path = format!("{base}[{i}]");
        match name(c) {
            "" => errs.push(FieldError::required(format!("{path}.name"), "")),
            n if names.contains(&n) => {
                errs.push(FieldError::duplicate(format!("{path}.name"), json!(n)));
            }
            n => names.push(n),
        }
        if c["image"].as_str().is_none_or(str::is_empty) {
            errs.push(FieldError::required(format!("{path}.image"), ""));
        }
        if let Some(target) = c["targetContainerName"].as_str()
            && !target.is_empty()
            && !targets.contains(&target)
        {
            errs.push(FieldError {
                kind: FieldErrorKind::NotFound,
                field: format!("{path}.targetContainerName"),
                value: Some(json!(target)),
                detail: String::new(),
            });
        }
        for field in FORBIDDEN {
            let set = match &c[field] {
                Value::Null => false,
                Value::Array(a) => !a.is_empty(),
                Value::Object(m) => !m.is_empty(),
                _ => true,
            };
            if set {
                errs.push(FieldError::forbidden(
                    format!("{path}.{field}"),
                    "cannot be set for an Ephemeral Container",
                ));
            }
        }
    }
    for (i, was) in list(old, "ephemeralContainers").iter().enumerate() {
        match current.iter().find(|c| name(c) == name(was)) {
            None => errs.push(FieldError::forbidden(
                format!("{base}[{i}]"),
                format!(
                    "existing ephemeral containers {:?} may not be removed",
                    name(was)
                ),
            )),
            Some(now) if now != was => errs.push(FieldError::forbidden(
                format!("{base}[{i}]"),
                format!(
                    "existing ephemeral containers {:?} may not be changed",
                    name(was)
                ),
            )),
            Some(_) => {}
        }
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_ephemeral_containers_change() {
        let old = json!({"metadata": {"name": "p", "labels": {"a": "1"}, "resourceVersion": "5"},
            "spec": {"containers": [{"name": "c", "image": "i"}]}, "status": {"phase": "Running"}});
        let new = json!({"metadata": {"name": "p", "labels": {"a": "2"}, "resourceVersion": "5"},
            "spec": {"containers": [{"name": "c", "image": "other"}],
                     "ephemeralContainers": [{"name": "debug", "image": "busybox"}]}});
        let out = narrow(&new, &old);
        assert_eq!(out["metadata"]["labels"]["a"], "1");
        assert_eq!(out["spec"]["containers"][0]["image"], "i");
        assert_eq!(out["spec"]["ephemeralContainers"][0]["name"], "debug");
        assert_eq!(out["status"]["phase"], "Running");
        assert!(validate(&out, &old).is_empty());
    }

    #[test]
    fn changes_removals_and_forbidden_fields_are_refused() {
        let old = json!({"spec": {"containers": [{"name": "c", "image": "i"}],
            "ephemeralContainers": [{"name": "d", "image": "busybox"}]}});
        let new = json!({"spec": {"containers": [{"name": "c", "image": "i"}],
            "ephemeralContainers": [{"name": "c", "image": "x", "ports": [{"containerPort": 80}],
                                     "targetContainerName": "nope"}]}});
        let fields: Vec<String> = validate(&new, &old).into_iter().map(|e| e.field).collect();
        assert_eq!(
            fields,
            [
                "spec.ephemeralContainers[0].name",
                "spec.ephemeralContainers[0].targetContainerName",
                "spec.ephemeralContainers[0].ports",
                "spec.ephemeralContainers[0]"
            ]
        );
    }
}
