//! Tests of `patch/strategic.rs`.

use serde_json::json;

use super::*;

/// Applies `patch` and fails the test on an error.
fn merged(kind: &str, original: Value, patch: Value) -> Value {
    match strategic_merge(kind, &original, &patch) {
        Ok(value) => value,
        Err(error) => panic!("patch failed: {error}"),
    }
}

/// Applies `patch` and fails the test if it succeeds.
fn rejected(kind: &str, original: Value, patch: Value) -> StrategicMergeError {
    match strategic_merge(kind, &original, &patch) {
        Ok(value) => panic!("patch unexpectedly applied: {value}"),
        Err(error) => error,
    }
}

fn deployment() -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default", "labels": {"app": "web"},
                     "finalizers": ["example.com/hold", "example.com/other"]},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "web"}},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {
                    "containers": [
                        {"name": "app", "image": "nginx:1.26",
                         "env": [{"name": "DEBUG", "value": "1"}, {"name": "MODE", "value": "prod"}],
                         "ports": [{"containerPort": 80, "protocol": "TCP"}]},
                        {"name": "sidecar", "image": "envoy:1"}
                    ],
                    "volumes": [{"name": "data", "emptyDir": {}}]
                }
            }
        },
        "status": {"conditions": [
            {"type": "Available", "status": "False"},
            {"type": "Progressing", "status": "True"}
        ]}
    })
}

#[test]
fn kubectl_second_apply_of_a_configmap_drops_b_and_adds_c() {
    let live = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "demo", "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{old}\n"}},
        "data": {"a": "1", "b": "2"}});
    let patch = json!({"data": {"b": null, "c": "3"},
        "metadata": {"annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{new}\n"}}});
    let out = merged("ConfigMap", live, patch);
    assert_eq!(out["data"], json!({"a": "1", "c": "3"}));
    assert_eq!(
        out["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"],
        "{new}\n"
    );
    assert_eq!(out["metadata"]["name"], "demo");
}

#[test]
fn event_recorder_patch_updates_count_timestamp_and_message() {
    let live = json!({"kind": "Event", "metadata": {"name": "web.17a"}, "count": 1,
        "firstTimestamp": "2024-05-01T12:00:00Z", "lastTimestamp": "2024-05-01T12:00:00Z",
        "message": "old", "involvedObject": {"kind": "Pod", "name": "web"}});
    let patch = json!({"count": 2, "lastTimestamp": "2024-05-01T12:05:00Z", "message": "Back-off restarting"});
    let out = merged("Event", live, patch);
    assert_eq!(out["count"], 2);
    assert_eq!(out["lastTimestamp"], "2024-05-01T12:05:00Z");
    assert_eq!(out["firstTimestamp"], "2024-05-01T12:00:00Z");
    assert_eq!(out["message"], "Back-off restarting");
    assert_eq!(out["involvedObject"], json!({"kind": "Pod", "name": "web"}));
}

#[test]
fn nested_objects_merge_recursively_and_null_deletes_keys() {
    let live = json!({"metadata": {"labels": {"a": "1", "b": "2"}, "annotations": {"x": "y"}}});
    let patch = json!({"metadata": {"labels": {"a": null, "c": "3"}, "annotations": null}});
    let out = merged("ConfigMap", live, patch);
    assert_eq!(out, json!({"metadata": {"labels": {"b": "2", "c": "3"}}}));
}

#[test]
fn nulls_in_values_for_absent_keys_never_reach_the_result() {
    let out = merged(
        "ConfigMap",
        json!({}),
        json!({"data": {"a": "1", "gone": null}, "missing": null}),
    );
    assert_eq!(out, json!({"data": {"a": "1"}}));
}

#[test]
fn scalars_replace_even_across_json_types() {
    let out = merged(
        "Deployment",
        deployment(),
        json!({"spec": {"strategy": {"rollingUpdate": {"maxSurge": 1}}}}),
    );
    assert_eq!(
        out["spec"]["strategy"]["rollingUpdate"],
        json!({"maxUnavailable": "25%", "maxSurge": 1})
    );
}

#[test]
fn lists_without_a_strategy_are_replaced_wholesale() {
    let live = json!({"spec": {"containers": [{"name": "app", "args": ["a", "b"]}],
        "tolerations": [{"key": "x"}]}});
    let patch = json!({"spec": {"containers": [{"name": "app", "args": ["c"]}], "tolerations": [{"key": "y"}]}});
    let out = merged("Pod", live, patch);
    assert_eq!(out["spec"]["containers"][0]["args"], json!(["c"]));
    assert_eq!(out["spec"]["tolerations"], json!([{"key": "y"}]));
}

#[test]
fn rbac_rules_and_subjects_are_replaced() {
    let live = json!({"rules": [{"verbs": ["get"], "resources": ["pods"]}],
        "subjects": [{"kind": "User", "name": "a"}]});
    let patch = json!({"rules": [{"verbs": ["list"], "resources": ["pods"]}]});
    let out = merged("ClusterRole", live, patch);
    assert_eq!(
        out["rules"],
        json!([{"verbs": ["list"], "resources": ["pods"]}])
    );
    assert_eq!(out["subjects"], json!([{"kind": "User", "name": "a"}]));
}

#[test]
fn finalizers_merge_as_a_set_without_duplicates() {
    let live = json!({"metadata": {"finalizers": ["a", "b"]}});
    let out = merged(
        "ConfigMap",
        live,
        json!({"metadata": {"finalizers": ["b", "c", "c"]}}),
    );
    assert_eq!(out["metadata"]["finalizers"], json!(["a", "b", "c"]));
}

#[test]
fn delete_from_primitive_list_removes_finalizers() {
    let live = json!({"metadata": {"finalizers": ["a", "b", "c"]}});
    let patch = json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["a", "c", "absent"]}});
    let out = merged("Secret", live, patch);
    assert_eq!(out["metadata"]["finalizers"], json!(["b"]));
}

#[test]
fn a_finalizer_deleted_and_added_in_one_patch_stays() {
    let live = json!({"metadata": {"finalizers": ["a", "b"]}});
    let patch =
        json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"], "finalizers": ["a"]}});
    let out = merged("ConfigMap", live, patch);
    assert_eq!(out["metadata"]["finalizers"], json!(["b", "a"]));
}

#[test]
fn patch_replace_element_replaces_a_primitive_set() {
    let live = json!({"metadata": {"finalizers": ["a", "b"]}});
    let out = merged(
        "ConfigMap",
        live,
        json!({"metadata": {"finalizers": [{"$patch": "replace"}, "z"]}}),
    );
    assert_eq!(out["metadata"]["finalizers"], json!(["z"]));
}

#[test]
fn owner_references_merge_by_uid() {
    let live = json!({"metadata": {"ownerReferences": [
        {"uid": "u1", "kind": "ReplicaSet", "name": "a", "controller": true},
        {"uid": "u2", "kind": "ReplicaSet", "name": "b"}]}});
    let patch = json!({"metadata": {"ownerReferences": [
        {"uid": "u1", "controller": false},
        {"uid": "u2", "$patch": "delete"},
        {"uid": "u3", "kind": "Deployment", "name": "c"}]}});
    let out = merged("Pod", live, patch);
    assert_eq!(
        out["metadata"]["ownerReferences"],
        json!([
        {"uid": "u1", "kind": "ReplicaSet", "name": "a", "controller": false},
        {"uid": "u3", "kind": "Deployment", "name": "c"}])
    );
}

#[test]
fn containers_merge_by_name_and_keep_unmentioned_ones() {
    let patch = json!({"spec": {"template": {"spec": {"containers": [{"name": "app", "image": "nginx:1.27"}]}}}});
    let out = merged("Deployment", deployment(), patch);
    let containers = &out["spec"]["template"]["spec"]["containers"];
    assert_eq!(containers.as_array().map(Vec::len), Some(2));
    assert_eq!(containers[0]["image"], "nginx:1.27");
    assert_eq!(containers[0]["env"][1]["value"], "prod");
    assert_eq!(
        containers[1],
        json!({"name": "sidecar", "image": "envoy:1"})
    );
}

#[test]
fn a_container_with_a_new_name_is_appended_without_its_directives() {
    let patch = json!({"spec": {"template": {"spec": {"containers": [
        {"name": "log", "image": "busybox", "command": null,
         "env": [{"name": "A", "value": "1"}, {"name": "B", "$patch": "delete"}],
         "resources": {"$patch": "replace", "limits": {"cpu": "1"}}}]}}}});
    let out = merged("Deployment", deployment(), patch);
    let containers = &out["spec"]["template"]["spec"]["containers"];
    assert_eq!(
        containers[2],
        json!({"name": "log", "image": "busybox",
        "env": [{"name": "A", "value": "1"}], "resources": {"limits": {"cpu": "1"}}})
    );
}

#[test]
fn patch_delete_element_removes_a_container() {
    let patch = json!({"spec": {"template": {"spec": {"containers": [{"name": "sidecar", "$patch": "delete"}]}}}});
    let out = merged("Deployment", deployment(), patch);
    let containers = &out["spec"]["template"]["spec"]["containers"];
    assert_eq!(containers.as_array().map(Vec::len), Some(1));
    assert_eq!(containers[0]["name"], "app");
}

#[test]
fn patch_delete_element_without_the_merge_key_is_an_error() {
    let patch = json!({"spec": {"template": {"spec": {"containers": [{"$patch": "delete"}]}}}});
    let error = rejected("Deployment", deployment(), patch);
    assert_eq!(
        error,
        StrategicMergeError::MissingMergeKey {
            path: ".spec.template.spec.containers[0]".into(),
            key: "name",
        }
    );
    assert_eq!(
        error.to_string(),
        "list element at .spec.template.spec.containers[0] has no merge key \"name\""
    );
}

#[test]
fn an_element_without_the_merge_key_is_an_error() {
    let patch = json!({"spec": {"ports": [{"targetPort": 8080}]}});
    let error = rejected("Service", json!({"spec": {"ports": [{"port": 80}]}}), patch);
    assert!(
        matches!(error, StrategicMergeError::MissingMergeKey { ref path, key: "port" } if path == ".spec.ports[0]")
    );
}

#[test]
fn patch_replace_element_replaces_the_whole_list() {
    let patch = json!({"spec": {"template": {"spec": {"containers": [
        {"$patch": "replace"}, {"name": "only", "image": "x"}]}}}});
    let out = merged("Deployment", deployment(), patch);
    assert_eq!(
        out["spec"]["template"]["spec"]["containers"],
        json!([{"name": "only", "image": "x"}])
    );
}

#[test]
fn patch_replace_on_an_object_drops_live_fields() {
    let patch = json!({"spec": {"strategy": {"$patch": "replace", "type": "Recreate"}}});
    let out = merged("Deployment", deployment(), patch);
    assert_eq!(out["spec"]["strategy"], json!({"type": "Recreate"}));
}

#[test]
fn patch_delete_on_an_object_removes_the_field() {
    let out = merged(
        "Deployment",
        deployment(),
        json!({"spec": {"strategy": {"$patch": "delete"}}}),
    );
    assert!(out["spec"].get("strategy").is_none());
    assert_eq!(out["spec"]["replicas"], 1);
}

#[test]
fn patch_delete_at_the_top_level_yields_an_empty_object() {
    assert_eq!(
        merged(
            "ConfigMap",
            json!({"data": {"a": "1"}}),
            json!({"$patch": "delete"})
        ),
        json!({})
    );
}

#[test]
fn patch_merge_directive_is_the_explicit_default() {
    let patch = json!({"$patch": "merge", "data": {"$patch": "merge", "b": "2"},
        "metadata": {"finalizers": [{"$patch": "merge"}, "y"]}});
    let out = merged(
        "ConfigMap",
        json!({"data": {"a": "1"}, "metadata": {"finalizers": ["x"]}}),
        patch,
    );
    assert_eq!(
        out,
        json!({"data": {"a": "1", "b": "2"}, "metadata": {"finalizers": ["x", "y"]}})
    );
    let patch = json!({"spec": {"template": {"spec": {"containers": [{"name": "app", "$patch": "merge", "image": "i"}]}}}});
    let out = merged("Deployment", deployment(), patch);
    assert_eq!(
        out["spec"]["template"]["spec"]["containers"][0]["image"],
        "i"
    );
    assert!(
        out["spec"]["template"]["spec"]["containers"][0]
            .get("$patch")
            .is_none()
    );
}

#[test]
fn unknown_patch_directive_values_are_errors() {
    let error = rejected("ConfigMap", json!({}), json!({"data": {"$patch": "shred"}}));
    assert_eq!(
        error.to_string(),
        "unknown $patch directive \"shred\" at .data: expected \"replace\", \"delete\" or \"merge\""
    );
    let patch =
        json!({"spec": {"template": {"spec": {"containers": [{"name": "app", "$patch": 1}]}}}});
    let error = rejected("Deployment", deployment(), patch);
    assert!(
        matches!(error, StrategicMergeError::UnknownPatchDirective { ref path, .. } if path == ".spec.template.spec.containers[0]")
    );
}

#[test]
fn unknown_dollar_directives_are_errors() {
    let error = rejected(
        "ConfigMap",
        json!({}),
        json!({"metadata": {"$frobnicate/labels": ["a"]}}),
    );
    assert_eq!(
        error,
        StrategicMergeError::UnknownDirective {
            path: ".metadata".into(),
            directive: "$frobnicate/labels".into(),
        }
    );
    assert_eq!(
        error.to_string(),
        "unknown directive \"$frobnicate/labels\" at .metadata"
    );
}

#[test]
fn container_ports_merge_by_container_port() {
    let patch = json!({"spec": {"containers": [{"name": "app", "ports": [
        {"containerPort": 80, "name": "http"}, {"containerPort": 443}]}]}});
    let live = json!({"spec": {"containers": [{"name": "app", "ports": [
        {"containerPort": 80, "protocol": "TCP"}, {"containerPort": 9090}]}]}});
    let out = merged("Pod", live, patch);
    assert_eq!(
        out["spec"]["containers"][0]["ports"],
        json!([
        {"containerPort": 80, "protocol": "TCP", "name": "http"},
        {"containerPort": 9090},
        {"containerPort": 443}])
    );
}

#[test]
fn env_volume_mounts_and_volume_devices_merge_by_their_keys() {
    let live = json!({"spec": {"initContainers": [{"name": "init",
        "env": [{"name": "A", "value": "1"}],
        "volumeMounts": [{"mountPath": "/data", "name": "data"}],
        "volumeDevices": [{"devicePath": "/dev/xvda", "name": "blk"}]}]}});
    let patch = json!({"spec": {"initContainers": [{"name": "init",
        "env": [{"name": "B", "value": "2"}],
        "volumeMounts": [{"mountPath": "/data", "readOnly": true}],
        "volumeDevices": [{"devicePath": "/dev/xvdb", "name": "blk2"}]}]}});
    let out = merged("Pod", live, patch);
    let init = &out["spec"]["initContainers"][0];
    assert_eq!(
        init["env"],
        json!([{"name": "A", "value": "1"}, {"name": "B", "value": "2"}])
    );
    assert_eq!(
        init["volumeMounts"],
        json!([{"mountPath": "/data", "name": "data", "readOnly": true}])
    );
    assert_eq!(
        init["volumeDevices"],
        json!([
        {"devicePath": "/dev/xvda", "name": "blk"}, {"devicePath": "/dev/xvdb", "name": "blk2"}])
    );
}

#[test]
fn ephemeral_containers_image_pull_secrets_and_host_aliases_merge() {
    let live = json!({"spec": {
        "ephemeralContainers": [{"name": "debug", "image": "busybox"}],
        "imagePullSecrets": [{"name": "reg1"}],
        "hostAliases": [{"ip": "10.0.0.1", "hostnames": ["a"]}]}});
    let patch = json!({"spec": {
        "ephemeralContainers": [{"name": "debug2", "image": "alpine"}],
        "imagePullSecrets": [{"name": "reg2"}],
        "hostAliases": [{"ip": "10.0.0.1", "hostnames": ["b"]}, {"ip": "10.0.0.2", "hostnames": ["c"]}]}});
    let out = merged("Pod", live, patch);
    assert_eq!(
        out["spec"]["ephemeralContainers"].as_array().map(Vec::len),
        Some(2)
    );
    assert_eq!(
        out["spec"]["imagePullSecrets"],
        json!([{"name": "reg1"}, {"name": "reg2"}])
    );
    assert_eq!(
        out["spec"]["hostAliases"],
        json!([
        {"ip": "10.0.0.1", "hostnames": ["b"]}, {"ip": "10.0.0.2", "hostnames": ["c"]}])
    );
}

#[test]
fn volumes_merge_by_name_and_honour_retain_keys() {
    let live = json!({"spec": {"volumes": [
        {"name": "data", "emptyDir": {}}, {"name": "cfg", "configMap": {"name": "c"}}]}});
    let patch = json!({"spec": {"volumes": [
        {"name": "data", "$retainKeys": ["name", "hostPath"], "hostPath": {"path": "/srv"}}]}});
    let out = merged("Pod", live, patch);
    assert_eq!(
        out["spec"]["volumes"],
        json!([
        {"name": "data", "hostPath": {"path": "/srv"}}, {"name": "cfg", "configMap": {"name": "c"}}])
    );
}

#[test]
fn deployment_strategy_retain_keys_drops_the_rolling_update_block() {
    let patch = json!({"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate", "rollingUpdate": null}}});
    let out = merged("Deployment", deployment(), patch);
    assert_eq!(out["spec"]["strategy"], json!({"type": "Recreate"}));
}

#[test]
fn retain_keys_must_list_every_field_the_patch_sets() {
    let patch =
        json!({"spec": {"strategy": {"$retainKeys": ["type"], "rollingUpdate": {"maxSurge": 1}}}});
    let error = rejected("Deployment", deployment(), patch);
    assert_eq!(
        error.to_string(),
        "field \"rollingUpdate\" at .spec.strategy is not listed in $retainKeys"
    );
    let error = rejected(
        "Deployment",
        deployment(),
        json!({"spec": {"strategy": {"$retainKeys": "type"}}}),
    );
    assert_eq!(
        error.to_string(),
        "invalid $retainKeys at .spec.strategy: must be a list of strings"
    );
}

#[test]
fn service_ports_merge_by_port() {
    let live = json!({"spec": {"type": "ClusterIP", "ports": [
        {"port": 80, "targetPort": 8080, "protocol": "TCP"}, {"port": 443, "protocol": "TCP"}]}});
    let patch = json!({"spec": {"ports": [{"port": 80, "targetPort": 9090}, {"port": 53, "protocol": "UDP"}]}});
    let out = merged("Service", live, patch);
    assert_eq!(
        out["spec"]["ports"],
        json!([
        {"port": 80, "targetPort": 9090, "protocol": "TCP"},
        {"port": 443, "protocol": "TCP"},
        {"port": 53, "protocol": "UDP"}])
    );
}

#[test]
fn status_conditions_merge_by_type_for_pods_namespaces_deployments_and_replicasets() {
    let live = json!({"status": {"conditions": [
        {"type": "Ready", "status": "False"}, {"type": "Scheduled", "status": "True"}]}});
    let patch = json!({"status": {"conditions": [{"type": "Ready", "status": "True"}]}});
    for kind in ["Pod", "Namespace", "Deployment", "ReplicaSet"] {
        let out = merged(kind, live.clone(), patch.clone());
        assert_eq!(
            out["status"]["conditions"],
            json!([
            {"type": "Ready", "status": "True"}, {"type": "Scheduled", "status": "True"}]),
            "{kind}"
        );
    }
    let out = merged("CustomResourceDefinition", live, patch);
    assert_eq!(
        out["status"]["conditions"],
        json!([{"type": "Ready", "status": "True"}])
    );
}

#[test]
fn pod_spec_rules_apply_where_each_kind_keeps_its_pod_spec() {
    let by_name = Some(ListStrategy::MergeByKey("name"));
    assert_eq!(list_strategy("Pod", "spec.containers"), by_name);
    assert_eq!(list_strategy("Pod", "spec.template.spec.containers"), None);
    assert_eq!(
        list_strategy("Deployment", "spec.template.spec.containers"),
        by_name
    );
    assert_eq!(list_strategy("Deployment", "spec.containers"), None);
    assert_eq!(
        list_strategy("ReplicaSet", "spec.template.spec.initContainers.env"),
        by_name
    );
    assert_eq!(list_strategy("Pod", "spec.volumes.env"), None);
    assert_eq!(
        list_strategy("Deployment", "spec.template.metadata.finalizers"),
        Some(ListStrategy::Set)
    );
    assert_eq!(
        list_strategy("ConfigMap", "metadata.finalizers"),
        Some(ListStrategy::Set)
    );
    assert_eq!(list_strategy("ConfigMap", "spec.ports"), None);
    assert_eq!(
        list_strategy("Pod", "spec.topologySpreadConstraints"),
        Some(ListStrategy::MergeByKey("topologyKey"))
    );
    assert_eq!(list_strategy("ServiceAccount", "secrets"), by_name);
    assert_eq!(list_strategy("Secret", "secrets"), None);
    assert_eq!(
        list_strategy("Service", "spec.ports"),
        Some(ListStrategy::MergeByKey("port"))
    );
}

#[test]
fn set_element_order_reorders_containers_and_keeps_the_rest_after() {
    let live = json!({"spec": {"containers": [
        {"name": "a", "image": "1"}, {"name": "b", "image": "2"}, {"name": "c", "image": "3"}]}});
    let patch = json!({"spec": {"$setElementOrder/containers": [{"name": "c"}, {"name": "a"}],
        "containers": [{"name": "a", "image": "9"}]}});
    let out = merged("Pod", live, patch);
    assert_eq!(
        out["spec"]["containers"],
        json!([
        {"name": "c", "image": "3"}, {"name": "a", "image": "9"}, {"name": "b", "image": "2"}])
    );
}

#[test]
fn set_element_order_orders_finalizers_and_is_ignored_for_replaced_lists() {
    let live = json!({"metadata": {"finalizers": ["a", "b", "c"]}, "spec": {"tolerations": [{"key": "x"}]}});
    let patch = json!({"metadata": {"$setElementOrder/finalizers": ["c", "b", "a"]},
        "spec": {"$setElementOrder/tolerations": [{"key": "y"}]}});
    let out = merged("Pod", live, patch);
    assert_eq!(out["metadata"]["finalizers"], json!(["c", "b", "a"]));
    assert_eq!(out["spec"]["tolerations"], json!([{"key": "x"}]));
}

#[test]
fn set_element_order_entries_need_the_merge_key() {
    let patch = json!({"spec": {"$setElementOrder/containers": [{"image": "x"}]}});
    let error = rejected(
        "Pod",
        json!({"spec": {"containers": [{"name": "a"}]}}),
        patch,
    );
    assert_eq!(
        error,
        StrategicMergeError::InvalidDirective {
            path: ".spec.containers".into(),
            directive: "$setElementOrder",
            reason: "every element must be an object with the merge key",
        }
    );
}

#[test]
fn appendix_b_example_removes_a_finalizer_and_an_env_var() {
    let patch = json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["example.com/hold"]},
        "spec": {"template": {"spec": {"containers": [{"name": "app", "env": [{"name": "DEBUG", "$patch": "delete"}]}],
          "$setElementOrder/containers": [{"name": "app"}]}}}});
    let out = merged("Deployment", deployment(), patch);
    assert_eq!(out["metadata"]["finalizers"], json!(["example.com/other"]));
    let containers = &out["spec"]["template"]["spec"]["containers"];
    assert_eq!(containers[0]["name"], "app");
    assert_eq!(
        containers[0]["env"],
        json!([{"name": "MODE", "value": "prod"}])
    );
    assert_eq!(containers[1]["name"], "sidecar");
    assert!(!out.to_string().contains('$'));
}

#[test]
fn kubectl_client_side_apply_changes_a_deployment_image() {
    let patch = json!({
        "metadata": {"annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{\"kind\":\"Deployment\"}\n"}},
        "spec": {"template": {"spec": {
            "$setElementOrder/containers": [{"name": "app"}, {"name": "sidecar"}],
            "containers": [{"image": "nginx:1.27", "name": "app"}]}}}});
    let mut expected = deployment();
    expected["metadata"]["annotations"] =
        json!({"kubectl.kubernetes.io/last-applied-configuration": "{\"kind\":\"Deployment\"}\n"});
    expected["spec"]["template"]["spec"]["containers"][0]["image"] = json!("nginx:1.27");
    assert_eq!(merged("Deployment", deployment(), patch), expected);
}

#[test]
fn a_deleted_and_readded_element_starts_fresh() {
    let patch = json!({"spec": {"template": {"spec": {"containers": [
        {"name": "sidecar", "$patch": "delete"}, {"name": "sidecar", "image": "envoy:2"}]}}}});
    let out = merged("Deployment", deployment(), patch);
    assert_eq!(
        out["spec"]["template"]["spec"]["containers"][1],
        json!({"name": "sidecar", "image": "envoy:2"})
    );
}

#[test]
fn template_metadata_finalizers_merge_as_a_set() {
    let mut live = deployment();
    live["spec"]["template"]["metadata"]["finalizers"] = json!(["a"]);
    let out = merged(
        "Deployment",
        live,
        json!({"spec": {"template": {"metadata": {"finalizers": ["b"]}}}}),
    );
    assert_eq!(
        out["spec"]["template"]["metadata"]["finalizers"],
        json!(["a", "b"])
    );
}

#[test]
fn a_list_where_the_live_value_is_a_map_is_a_type_mismatch() {
    let error = rejected(
        "ConfigMap",
        json!({"data": {"a": "1"}}),
        json!({"data": ["a"]}),
    );
    assert_eq!(
        error,
        StrategicMergeError::TypeMismatch {
            path: ".data".into(),
            expected: "an object",
            found: "a list",
        }
    );
    assert_eq!(
        error.to_string(),
        "type mismatch at .data: expected an object, found a list"
    );
}

#[test]
fn scalars_and_objects_do_not_replace_each_other() {
    let error = rejected(
        "Deployment",
        deployment(),
        json!({"spec": {"replicas": {"count": 3}}}),
    );
    assert!(
        matches!(error, StrategicMergeError::TypeMismatch { ref path, expected: "a number", found: "an object" } if path == ".spec.replicas")
    );
    let error = rejected(
        "Deployment",
        deployment(),
        json!({"spec": {"template": "nginx"}}),
    );
    assert!(matches!(
        error,
        StrategicMergeError::TypeMismatch {
            expected: "an object",
            found: "a string",
            ..
        }
    ));
    let patch = json!({"spec": {"template": {"spec": {"containers": ["app"]}}}});
    let error = rejected("Deployment", deployment(), patch);
    assert_eq!(
        error.to_string(),
        "type mismatch at .spec.template.spec.containers[0]: expected an object, found a string"
    );
    let error = rejected(
        "ConfigMap",
        json!({}),
        json!({"metadata": {"finalizers": [["a"]]}}),
    );
    assert_eq!(
        error.to_string(),
        "type mismatch at .metadata.finalizers[0]: expected a scalar, found a list"
    );
}

#[test]
fn error_paths_quote_field_names_with_dots() {
    let live = json!({"metadata": {"annotations": {"example.com/x": {"nested": true}}}});
    let error = rejected(
        "ConfigMap",
        live,
        json!({"metadata": {"annotations": {"example.com/x": "v"}}}),
    );
    assert_eq!(
        error.to_string(),
        "type mismatch at .metadata.annotations[\"example.com/x\"]: expected an object, found a string"
    );
}

#[test]
fn a_patch_that_is_not_an_object_is_an_error() {
    assert_eq!(
        rejected("ConfigMap", json!({}), json!([1])),
        StrategicMergeError::PatchNotAnObject
    );
    assert_eq!(
        rejected("ConfigMap", json!({}), json!(null)).to_string(),
        "the strategic merge patch must be a json object"
    );
}

#[test]
fn replaced_lists_keep_dollar_keys_inside_elements_as_data() {
    let patch = json!({"spec": {"versions": [{"name": "v1", "schema": {"openAPIV3Schema": {"$ref": "#/x"}}},
        {"$patch": "replace"}]}});
    let out = merged(
        "CustomResourceDefinition",
        json!({"spec": {"versions": []}}),
        patch,
    );
    assert_eq!(
        out["spec"]["versions"],
        json!([{"name": "v1", "schema": {"openAPIV3Schema": {"$ref": "#/x"}}}])
    );
}

#[test]
fn null_live_values_count_as_absent() {
    let live = json!({"data": null, "metadata": {"name": "x"}});
    let out = merged("ConfigMap", live, json!({"data": {"a": "1"}}));
    assert_eq!(out, json!({"data": {"a": "1"}, "metadata": {"name": "x"}}));
}

#[test]
fn malformed_directive_values_are_errors() {
    let patch = json!({"metadata": {"$deleteFromPrimitiveList/finalizers": "a"}});
    let error = rejected(
        "ConfigMap",
        json!({"metadata": {"finalizers": ["a"]}}),
        patch,
    );
    assert_eq!(
        error.to_string(),
        "invalid $deleteFromPrimitiveList at .metadata.finalizers: must be a list"
    );
    let patch = json!({"spec": {"$setElementOrder/containers": {"name": "a"}}});
    let error = rejected("Pod", json!({"spec": {}}), patch);
    assert_eq!(
        error.to_string(),
        "invalid $setElementOrder at .spec.containers: must be a list"
    );
    let error = rejected(
        "Pod",
        json!({}),
        json!({"metadata": {"$setElementOrder/": []}}),
    );
    assert!(matches!(
        error,
        StrategicMergeError::UnknownDirective { .. }
    ));
}
