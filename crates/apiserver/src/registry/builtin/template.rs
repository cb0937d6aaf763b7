//! Pod templates inside workloads (Deployment, ReplicaSet, StatefulSet, DaemonSet, Job,
//! CronJob, ReplicationController, PodTemplate): what Kubernetes applies to each.

use serde_json::Value;

use super::core::default_pod_spec;

/// The pod spec defaults, and the template's `metadata.creationTimestamp: null` that a
/// Kubernetes 1.32/1.33 server writes (its `ObjectMeta` is encoded whole, so an unset time is
/// a `null`; clients comparing bytes with a real server's see it).
pub(super) fn default_template(template: &mut Value) {
    default_pod_spec(&mut template["spec"]);
    null_creation_timestamp(template);
}

/// Gives an embedded object (a template, a StatefulSet's claim template) the
/// `metadata.creationTimestamp: null` that Kubernetes 1.33 writes for its unset `ObjectMeta`
/// time; 1.34 tags the field `omitzero` and drops it (apimachinery commit 503b9897).
pub(super) fn null_creation_timestamp(template: &mut Value) {
    if let Some(meta) = template
        .as_object_mut()
        .map(|t| {
            t.entry("metadata")
                .or_insert_with(|| Value::Object(Default::default()))
        })
        .and_then(Value::as_object_mut)
    {
        meta.entry("creationTimestamp").or_insert(Value::Null);
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_template_gets_a_null_creation_timestamp_and_keeps_a_set_one() {
        let mut t = json!({"spec": {"containers": [{"name": "c", "image": "i"}]}});
        default_template(&mut t);
        assert_eq!(t["metadata"], json!({"creationTimestamp": null}));
        assert_eq!(t["spec"]["restartPolicy"], "Always");
        let mut t = json!({"metadata": {"labels": {"a": "b"}, "creationTimestamp": "2026-01-01T00:00:00Z"}, "spec": {}});
        default_template(&mut t);
        assert_eq!(t["metadata"]["creationTimestamp"], "2026-01-01T00:00:00Z");
    }
}
