//! Strategies of the apps/v1 kinds.

use k8s_openapi::api::apps::v1 as apps;
use serde_json::{Value, json};

use super::core::validate_pod_spec;
use super::template::{default_template, null_creation_timestamp};
use crate::api::field::FieldError;
use crate::registry::strategy::{Decoded, Strategy, decode_typed, default_at};

/// Checks `spec.selector` against the template labels, and that it is set at all.
pub(super) fn validate_selector(obj: &Value, errs: &mut Vec<FieldError>) {
    let selector = &obj["spec"]["selector"];
    let match_labels = selector["matchLabels"].as_object();
    let has_expressions = selector["matchExpressions"]
        .as_array()
        .is_some_and(|e| !e.is_empty());
    if match_labels.is_none_or(|m| m.is_empty()) && !has_expressions {
        errs.push(FieldError::required("spec.selector", ""));
        return;
    }
    let labels = obj["spec"]["template"]["metadata"]["labels"].as_object();
    let mut matches = match_labels
        .into_iter()
        .flatten()
        .all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v));
    for expr in selector["matchExpressions"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let key = expr["key"].as_str().unwrap_or_default();
        let value = labels.and_then(|l| l.get(key)).and_then(Value::as_str);
        let values: Vec<&str> = expr["values"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        matches &= match expr["operator"].as_str().unwrap_or_default() {
            "In" => value.is_some_and(|v| values.contains(&v)),
            "NotIn" => value.is_none_or(|v| !values.contains(&v)),
            "Exists" => value.is_some(),
            "DoesNotExist" => value.is_none(),
            _ => false,
        };
    }
    if !matches {
        let rendered = labels
            .map(|l| {
                l.iter()
                    .map(|(k, v)| format!("{k}:{}", v.as_str().unwrap_or_default()))
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .unwrap_or_default();
        errs.push(FieldError::invalid(
            "spec.template.metadata.labels",
            Value::String(format!("map[{rendered}]")),
            "`selector` does not match template `labels`",
        ));
    }
}

fn validate_workload(obj: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    validate_selector(obj, &mut errs);
    if let Some(r) = obj["spec"]["replicas"].as_i64()
        && r < 0
    {
        errs.push(FieldError::invalid(
            "spec.replicas",
            json!(r),
            "must be greater than or equal to 0",
        ));
    }
    validate_pod_spec(
        &obj["spec"]["template"]["spec"],
        "spec.template.spec",
        &mut errs,
    );
    errs
}

fn validate_selector_unchanged(new: &Value, old: &Value, errs: &mut Vec<FieldError>) {
    if new["spec"]["selector"] != old["spec"]["selector"] {
        errs.push(FieldError::invalid(
            "spec.selector",
            new["spec"]["selector"].clone(),
            "field is immutable",
        ));
    }
}

/// Deployments: defaults, selector rules, generation on spec and annotation changes.
pub(super) struct DeploymentStrategy;

fn default_deployment(obj: &mut Value) {
    default_at(obj, &["spec", "replicas"], json!(1));
    // An empty type means RollingUpdate, also when the strategy is sent as `{}` (kubectl
    // `create deployment` does).
    default_at(obj, &["spec", "strategy", "type"], json!("RollingUpdate"));
    if obj["spec"]["strategy"]["type"] == "RollingUpdate" {
        default_at(
            obj,
            &["spec", "strategy", "rollingUpdate", "maxUnavailable"],
            json!("25%"),
        );
        default_at(
            obj,
            &["spec", "strategy", "rollingUpdate", "maxSurge"],
            json!("25%"),
        );
    }
    default_at(obj, &["spec", "revisionHistoryLimit"], json!(10));
    default_at(obj, &["spec", "progressDeadlineSeconds"], json!(600));
    default_template(&mut obj["spec"]["template"]);
}

impl Strategy for DeploymentStrategy {
    fn status_keeps_metadata(&self) -> Option<&'static [&'static str]> {
        Some(&["labels"])
    }

    fn decode(&self, obj: Value) -> Result<Decoded, String> {
        decode_typed::<apps::Deployment>(obj)
    }

    fn tracks_generation(&self) -> bool {
        true
    }

    fn generation_changed(&self, new: &Value, old: &Value) -> bool {
        new.get("spec") != old.get("spec")
            || new["metadata"].get("annotations") != old["metadata"].get("annotations")
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        default_deployment(obj);
        obj["status"] = json!({});
    }

    fn prepare_for_update(&self, new: &mut Value, _old: &Value) {
        default_deployment(new);
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        validate_workload(obj)
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = validate_workload(new);
        validate_selector_unchanged(new, old, &mut errs);
        errs
    }
}

/// ReplicaSets.
pub(super) struct ReplicaSetStrategy;

impl Strategy for ReplicaSetStrategy {
    fn status_keeps_metadata(&self) -> Option<&'static [&'static str]> {
        Some(&[])
    }

    fn decode(&self, obj: Value) -> Result<Decoded, String> {
        decode_typed::<apps::ReplicaSet>(obj)
    }

    fn tracks_generation(&self) -> bool {
        true
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        default_at(obj, &["spec", "replicas"], json!(1));
        default_template(&mut obj["spec"]["template"]);
        obj["status"] = json!({"replicas": 0});
    }

    fn prepare_for_update(&self, new: &mut Value, _old: &Value) {
        default_at(new, &["spec", "replicas"], json!(1));
        default_template(&mut new["spec"]["template"]);
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        validate_workload(obj)
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = validate_workload(new);
        validate_selector_unchanged(new, old, &mut errs);
        errs
    }

    fn field_labels(&self) -> &'static [&'static str] {
        &["status.replicas"]
    }
}

/// A pod template's `restartPolicy` must be `Always` in StatefulSets and DaemonSets.
fn validate_restart_always(obj: &Value, errs: &mut Vec<FieldError>) {
    let policy = obj["spec"]["template"]["spec"]["restartPolicy"]
        .as_str()
        .unwrap_or_default();
    if policy != "Always" {
        errs.push(FieldError::not_supported(
            "spec.template.spec.restartPolicy",
            json!(policy),
            &["Always"],
        ));
    }
}

/// `value` at `field` must be one of `allowed` when set.
fn one_of(obj: &Value, path: &[&str], allowed: &[&str], errs: &mut Vec<FieldError>) {
    let value = path.iter().try_fold(obj, |v, k| v.get(k));
    if let Some(text) = value.and_then(Value::as_str)
        && !allowed.contains(&text)
    {
        errs.push(FieldError::not_supported(
            path.join("."),
            json!(text),
            allowed,
        ));
    }
}

/// StatefulSets: Kubernetes' `SetDefaults_StatefulSet` and `ValidateStatefulSet(Update)`.
pub(super) struct StatefulSetStrategy;

fn default_statefulset(obj: &mut Value) {
    let spec = &mut obj["spec"];
    default_at(spec, &["replicas"], json!(1));
    default_at(spec, &["podManagementPolicy"], json!("OrderedReady"));
    default_at(spec, &["updateStrategy", "type"], json!("RollingUpdate"));
    if spec["updateStrategy"]["type"] == "RollingUpdate" {
        default_at(
            spec,
            &["updateStrategy", "rollingUpdate", "partition"],
            json!(0),
        );
    }
    default_at(spec, &["revisionHistoryLimit"], json!(10));
    default_at(
        spec,
        &["persistentVolumeClaimRetentionPolicy", "whenDeleted"],
        json!("Retain"),
    );
    default_at(
        spec,
        &["persistentVolumeClaimRetentionPolicy", "whenScaled"],
        json!("Retain"),
    );
    if let Some(claims) = spec
        .get_mut("volumeClaimTemplates")
        .and_then(Value::as_array_mut)
    {
        for claim in claims {
            default_at(claim, &["apiVersion"], json!("v1"));
            default_at(claim, &["kind"], json!("PersistentVolumeClaim"));
            default_at(claim, &["spec", "volumeMode"], json!("Filesystem"));
            default_at(claim, &["status", "phase"], json!("Pending"));
            null_creation_timestamp(claim);
        }
    }
    default_template(&mut spec["template"]);
}

fn validate_statefulset(obj: &Value) -> Vec<FieldError> {
    let mut errs = validate_workload(obj);
    validate_restart_always(obj, &mut errs);
    one_of(
        obj,
        &["spec", "podManagementPolicy"],
        &["OrderedReady", "Parallel"],
        &mut errs,
    );
    one_of(
        obj,
        &["spec", "updateStrategy", "type"],
        &["RollingUpdate", "OnDelete"],
        &mut errs,
    );
    for field in ["whenDeleted", "whenScaled"] {
        one_of(
            obj,
            &["spec", "persistentVolumeClaimRetentionPolicy", field],
            &["Retain", "Delete"],
            &mut errs,
        );
    }
    if let Some(p) = obj["spec"]["updateStrategy"]["rollingUpdate"]["partition"].as_i64()
        && p < 0
    {
        errs.push(FieldError::invalid(
            "spec.updateStrategy.rollingUpdate.partition",
            json!(p),
            "must be greater than or equal to 0",
        ));
    }
    errs
}

/// The spec fields a StatefulSet update may change, as Kubernetes lists them.
const STATEFULSET_MUTABLE: [&str; 6] = [
    "replicas",
    "ordinals",
    "template",
    "updateStrategy",
    "persistentVolumeClaimRetentionPolicy",
    "minReadySeconds",
];

impl Strategy for StatefulSetStrategy {
    fn status_keeps_metadata(&self) -> Option<&'static [&'static str]> {
        Some(&[])
    }

    fn decode(&self, obj: Value) -> Result<Decoded, String> {
        decode_typed::<apps::StatefulSet>(obj)
    }

    fn tracks_generation(&self) -> bool {
        true
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        default_statefulset(obj);
        obj["status"] = json!({"replicas": 0, "availableReplicas": 0});
    }

    fn prepare_for_update(&self, new: &mut Value, _old: &Value) {
        default_statefulset(new);
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        validate_statefulset(obj)
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = validate_statefulset(new);
        let strip = |obj: &Value| {
            let mut spec = obj["spec"].clone();
            if let Some(map) = spec.as_object_mut() {
                for field in STATEFULSET_MUTABLE {
                    map.remove(field);
                }
            }
            spec
        };
        if strip(new) != strip(old) {
            errs.push(FieldError::forbidden(
                "spec",
                "updates to statefulset spec for fields other than 'replicas', 'ordinals', \
                 'template', 'updateStrategy', 'persistentVolumeClaimRetentionPolicy' and \
                 'minReadySeconds' are forbidden",
            ));
        }
        errs
    }
}

/// DaemonSets: Kubernetes' `SetDefaults_DaemonSet` and `ValidateDaemonSet(Update)`.
pub(super) struct DaemonSetStrategy;

fn default_daemonset(obj: &mut Value) {
    let spec = &mut obj["spec"];
    default_at(spec, &["updateStrategy", "type"], json!("RollingUpdate"));
    if spec["updateStrategy"]["type"] == "RollingUpdate" {
        default_at(
            spec,
            &["updateStrategy", "rollingUpdate", "maxUnavailable"],
            json!(1),
        );
        default_at(
            spec,
            &["updateStrategy", "rollingUpdate", "maxSurge"],
            json!(0),
        );
    }
    default_at(spec, &["revisionHistoryLimit"], json!(10));
    default_template(&mut spec["template"]);
}

fn validate_daemonset(obj: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    validate_selector(obj, &mut errs);
    validate_pod_spec(
        &obj["spec"]["template"]["spec"],
        "spec.template.spec",
        &mut errs,
    );
    validate_restart_always(obj, &mut errs);
    one_of(
        obj,
        &["spec", "updateStrategy", "type"],
        &["OnDelete", "RollingUpdate"],
        &mut errs,
    );
    errs
}

impl Strategy for DaemonSetStrategy {
    fn status_keeps_metadata(&self) -> Option<&'static [&'static str]> {
        Some(&[])
    }

    fn decode(&self, obj: Value) -> Result<Decoded, String> {
        decode_typed::<apps::DaemonSet>(obj)
    }

    fn tracks_generation(&self) -> bool {
        true
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        default_daemonset(obj);
        obj["status"] = json!({
            "currentNumberScheduled": 0,
            "numberMisscheduled": 0,
            "desiredNumberScheduled": 0,
            "numberReady": 0,
        });
    }

    fn prepare_for_update(&self, new: &mut Value, _old: &Value) {
        default_daemonset(new);
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        validate_daemonset(obj)
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = validate_daemonset(new);
        validate_selector_unchanged(new, old, &mut errs);
        errs
    }
}

/// ControllerRevisions: a snapshot of a workload's template; `data` never changes.
pub(super) struct ControllerRevisionStrategy;

fn validate_revision(obj: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if let Some(r) = obj["revision"].as_i64()
        && r < 0
    {
        errs.push(FieldError::invalid(
            "revision",
            json!(r),
            "must be greater than or equal to 0",
        ));
    }
    errs
}

impl Strategy for ControllerRevisionStrategy {
    fn decode(&self, obj: Value) -> Result<Decoded, String> {
        decode_typed::<apps::ControllerRevision>(obj)
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        validate_revision(obj)
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = validate_revision(new);
        if new.get("data") != old.get("data") {
            errs.push(FieldError::invalid(
                "data",
                new.get("data").cloned().unwrap_or(Value::Null),
                "field is immutable",
            ));
        }
        errs
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deployment(selector: Value, labels: Value) -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
               "spec": {"selector": selector, "template": {"metadata": {"labels": labels},
                        "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}})
    }

    #[test]
    fn a_selector_that_misses_the_template_labels_is_invalid() {
        let errs = DeploymentStrategy.validate(&deployment(
            json!({"matchLabels": {"app": "a"}}),
            json!({"app": "b"}),
        ));
        assert_eq!(errs.len(), 1);
        assert_eq!(errs[0].field, "spec.template.metadata.labels");
        assert!(
            errs[0]
                .message()
                .contains("`selector` does not match template `labels`")
        );
    }

    #[test]
    fn match_expressions_are_honoured() {
        let d = deployment(
            json!({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["web", "api"]}]}),
            json!({"tier": "api"}),
        );
        assert!(DeploymentStrategy.validate(&d).is_empty());
    }

    #[test]
    fn deployment_defaults_match_kubernetes() {
        let mut d = deployment(json!({"matchLabels": {"app": "a"}}), json!({"app": "a"}));
        DeploymentStrategy.prepare_for_create(&mut d);
        assert_eq!(d["spec"]["replicas"], 1);
        assert_eq!(d["spec"]["strategy"]["rollingUpdate"]["maxSurge"], "25%");
        assert_eq!(
            d["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"],
            "Always"
        );
        assert_eq!(d["spec"]["template"]["spec"]["dnsPolicy"], "ClusterFirst");
        assert_eq!(d["status"], json!({}));
    }

    #[test]
    fn an_empty_strategy_is_defaulted_to_a_rolling_update() {
        let mut d = deployment(json!({"matchLabels": {"app": "a"}}), json!({"app": "a"}));
        d["spec"]["strategy"] = json!({});
        DeploymentStrategy.prepare_for_create(&mut d);
        assert_eq!(
            d["spec"]["strategy"],
            json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}})
        );
        let mut recreate = deployment(json!({"matchLabels": {"app": "a"}}), json!({"app": "a"}));
        recreate["spec"]["strategy"] = json!({"type": "Recreate"});
        DeploymentStrategy.prepare_for_create(&mut recreate);
        assert_eq!(recreate["spec"]["strategy"], json!({"type": "Recreate"}));
    }

    #[test]
    fn defaulting_a_pod_template_adds_no_null_fields() {
        let mut d = deployment(json!({"matchLabels": {"app": "a"}}), json!({"app": "a"}));
        DeploymentStrategy.prepare_for_create(&mut d);
        let spec = &d["spec"]["template"]["spec"];
        assert!(spec.get("initContainers").is_none(), "{spec}");
        assert!(spec["containers"][0].get("ports").is_none(), "{spec}");
    }
}
