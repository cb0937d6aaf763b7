//! Tests of `http/protobuf/mod.rs`.

use std::collections::BTreeMap;

use k8s_openapi::serde::Serialize;
use k8s_openapi::serde::de::DeserializeOwned;
use k8s_pb::api::apps::v1 as apps;
use k8s_pb::api::authentication::v1 as authn;
use k8s_pb::api::authorization::v1 as authz;
use k8s_pb::api::autoscaling::v1 as autoscaling;
use k8s_pb::api::coordination::v1 as coordination;
use k8s_pb::api::core::v1 as core;
use k8s_pb::api::events::v1 as events;
use k8s_pb::api::rbac::v1 as rbac;
use k8s_pb::apiextensions_apiserver::pkg::apis::apiextensions::v1 as apiext;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
use k8s_pb::apimachinery::pkg::runtime::TypeMeta;
use serde_json::json;

use super::*;

mod every_kind;

fn s(value: &str) -> Option<String> {
    Some(value.to_owned())
}

fn strings(values: &[&str]) -> Vec<String> {
    values.iter().map(|value| (*value).to_owned()).collect()
}

fn string_map(entries: &[(&str, &str)]) -> BTreeMap<String, String> {
    entries
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn object_meta(name: &str) -> Option<meta::ObjectMeta> {
    Some(meta::ObjectMeta {
        name: s(name),
        ..Default::default()
    })
}

fn int(value: i32) -> Option<IntOrString> {
    Some(IntOrString {
        r#type: Some(0),
        int_val: Some(value),
        str_val: s(""),
    })
}

fn string_int(value: &str) -> Option<IntOrString> {
    Some(IntOrString {
        r#type: Some(1),
        int_val: Some(0),
        str_val: s(value),
    })
}

fn quantity(value: &str) -> Quantity {
    Quantity { string: s(value) }
}

fn envelope_with(
    api_version: &str,
    kind: &str,
    raw: Vec<u8>,
    content_encoding: &str,
    content_type: &str,
) -> Vec<u8> {
    let unknown = Unknown {
        type_meta: Some(TypeMeta {
            api_version: s(api_version),
            kind: s(kind),
        }),
        raw: Some(raw),
        content_encoding: s(content_encoding),
        content_type: s(content_type),
    };
    [MAGIC, &unknown.encode_to_vec()].concat()
}

fn envelope(api_version: &str, kind: &str, message: &impl prost::Message) -> Vec<u8> {
    envelope_with(api_version, kind, message.encode_to_vec(), "", "")
}

fn decoded(api_version: &str, kind: &str, message: &impl prost::Message) -> Value {
    decode(&envelope(api_version, kind, message)).expect("the body decodes")
}

fn hex(text: &str) -> Vec<u8> {
    let digits: Vec<u8> = text.bytes().filter(u8::is_ascii_hexdigit).collect();
    digits
        .chunks(2)
        .map(|pair| {
            let pair = std::str::from_utf8(pair).expect("hex digits are ASCII");
            u8::from_str_radix(pair, 16).expect("two hex digits")
        })
        .collect()
}

/// Asserts that everything in `ours` is also in `theirs`: the k8s-openapi round trip of our
/// JSON may add defaults for required fields, but must not lose or change anything.
fn assert_contained(ours: &Value, theirs: &Value, path: &str) {
    match (ours, theirs) {
        (Value::Object(ours), Value::Object(theirs)) => {
            for (key, value) in ours {
                let Some(their_value) = theirs.get(key) else {
                    panic!("{path}.{key} is lost in the k8s-openapi round trip");
                };
                assert_contained(value, their_value, &format!("{path}.{key}"));
            }
        }
        (Value::Array(ours), Value::Array(theirs)) => {
            assert_eq!(ours.len(), theirs.len(), "length of {path}");
            for (index, (value, their_value)) in ours.iter().zip(theirs).enumerate() {
                assert_contained(value, their_value, &format!("{path}[{index}]"));
            }
        }
        _ => assert_eq!(ours, theirs, "value at {path}"),
    }
}

/// Decodes `message` and checks that the JSON deserializes into the k8s-openapi type `K`
/// and serializes back without losing anything; returns the JSON.
fn round_trip<K: DeserializeOwned + Serialize>(
    api_version: &str,
    kind: &str,
    message: &impl prost::Message,
) -> Value {
    let json = decoded(api_version, kind, message);
    let typed: K = serde_json::from_value(json.clone())
        .unwrap_or_else(|error| panic!("{kind} JSON does not fit k8s-openapi: {error}"));
    let again = serde_json::to_value(&typed).expect("k8s-openapi types serialize");
    assert_contained(&json, &again, kind);
    json
}

fn pod_spec() -> core::PodSpec {
    let container = core::Container {
        name: s("web"),
        image: s("nginx:1.27"),
        command: strings(&["nginx"]),
        args: strings(&["-g", "daemon off;"]),
        ports: vec![core::ContainerPort {
            name: s("http"),
            host_port: Some(0),
            container_port: Some(80),
            protocol: s("TCP"),
            host_ip: s(""),
        }],
        env: vec![
            core::EnvVar {
                name: s("MODE"),
                value: s("prod"),
                value_from: None,
            },
            core::EnvVar {
                name: s("NODE"),
                value: s(""),
                value_from: Some(core::EnvVarSource {
                    field_ref: Some(core::ObjectFieldSelector {
                        api_version: s("v1"),
                        field_path: s("spec.nodeName"),
                    }),
                    ..Default::default()
                }),
            },
            core::EnvVar {
                name: s("PASSWORD"),
                value: None,
                value_from: Some(core::EnvVarSource {
                    secret_key_ref: Some(core::SecretKeySelector {
                        local_object_reference: Some(core::LocalObjectReference { name: s("db") }),
                        key: s("password"),
                        optional: Some(false),
                    }),
                    ..Default::default()
                }),
            },
        ],
        resources: Some(core::ResourceRequirements {
            limits: [("memory".to_owned(), quantity("128Mi"))].into(),
            requests: [("cpu".to_owned(), quantity("250m"))].into(),
            claims: vec![],
        }),
        volume_mounts: vec![core::VolumeMount {
            name: s("cache"),
            read_only: Some(false),
            mount_path: s("/cache"),
            ..Default::default()
        }],
        readiness_probe: Some(core::Probe {
            handler: Some(core::ProbeHandler {
                http_get: Some(core::HttpGetAction {
                    path: s("/healthz"),
                    port: string_int("http"),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            initial_delay_seconds: Some(0),
            period_seconds: Some(5),
            ..Default::default()
        }),
        image_pull_policy: s("IfNotPresent"),
        stdin: Some(false),
        tty: Some(false),
        ..Default::default()
    };
    core::PodSpec {
        volumes: vec![
            core::Volume {
                name: s("cache"),
                volume_source: Some(core::VolumeSource {
                    empty_dir: Some(core::EmptyDirVolumeSource::default()),
                    ..Default::default()
                }),
            },
            core::Volume {
                name: s("config"),
                volume_source: Some(core::VolumeSource {
                    config_map: Some(core::ConfigMapVolumeSource {
                        local_object_reference: Some(core::LocalObjectReference {
                            name: s("web-config"),
                        }),
                        default_mode: Some(0o644),
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
            },
        ],
        containers: vec![container],
        restart_policy: s("Always"),
        termination_grace_period_seconds: Some(30),
        node_selector: string_map(&[("kubernetes.io/os", "linux")]),
        automount_service_account_token: Some(false),
        host_network: Some(false),
        tolerations: vec![core::Toleration {
            key: s("dedicated"),
            operator: s("Exists"),
            effect: s("NoSchedule"),
            toleration_seconds: Some(0),
            ..Default::default()
        }],
        ..Default::default()
    }
}

fn pod_spec_json() -> Value {
    json!({
        "volumes": [
            {"name": "cache", "emptyDir": {}},
            {"name": "config", "configMap": {"name": "web-config", "defaultMode": 420}},
        ],
        "containers": [{
            "name": "web",
            "image": "nginx:1.27",
            "command": ["nginx"],
            "args": ["-g", "daemon off;"],
            "ports": [{"name": "http", "containerPort": 80, "protocol": "TCP"}],
            "env": [
                {"name": "MODE", "value": "prod"},
                {"name": "NODE", "valueFrom": {
                    "fieldRef": {"apiVersion": "v1", "fieldPath": "spec.nodeName"}}},
                {"name": "PASSWORD", "valueFrom": {
                    "secretKeyRef": {"name": "db", "key": "password", "optional": false}}},
            ],
            "resources": {"limits": {"memory": "128Mi"}, "requests": {"cpu": "250m"}},
            "volumeMounts": [{"name": "cache", "mountPath": "/cache"}],
            "readinessProbe": {
                "httpGet": {"path": "/healthz", "port": "http"},
                "periodSeconds": 5,
            },
            "imagePullPolicy": "IfNotPresent",
        }],
        "restartPolicy": "Always",
        "terminationGracePeriodSeconds": 30,
        "nodeSelector": {"kubernetes.io/os": "linux"},
        "automountServiceAccountToken": false,
        "tolerations": [{
            "key": "dedicated",
            "operator": "Exists",
            "effect": "NoSchedule",
            "tolerationSeconds": 0,
        }],
    })
}

fn deployment() -> apps::Deployment {
    apps::Deployment {
        metadata: Some(meta::ObjectMeta {
            name: s("web"),
            namespace: s("default"),
            labels: string_map(&[("app", "web")]),
            ..Default::default()
        }),
        spec: Some(apps::DeploymentSpec {
            replicas: Some(3),
            selector: Some(meta::LabelSelector {
                match_labels: string_map(&[("app", "web")]),
                match_expressions: vec![],
            }),
            template: Some(core::PodTemplateSpec {
                metadata: Some(meta::ObjectMeta {
                    labels: string_map(&[("app", "web")]),
                    creation_timestamp: Some(meta::Time::default()),
                    ..Default::default()
                }),
                spec: Some(pod_spec()),
            }),
            strategy: Some(apps::DeploymentStrategy {
                r#type: s("RollingUpdate"),
                rolling_update: Some(apps::RollingUpdateDeployment {
                    max_unavailable: int(0),
                    max_surge: string_int("25%"),
                }),
            }),
            min_ready_seconds: Some(0),
            revision_history_limit: Some(10),
            paused: Some(false),
            progress_deadline_seconds: Some(600),
        }),
        status: Some(apps::DeploymentStatus {
            observed_generation: Some(0),
            replicas: Some(0),
            ..Default::default()
        }),
    }
}

#[test]
fn kubectl_create_namespace_body_from_appendix_a_decodes_to_namespace_json() {
    let body = hex(
        "6b387300 0a0f 0a027631 1209 4e616d657370616365 121b 0a13 0a03666f6f 1200 1a00 \
         2200 2a00 3200 3800 4200 1200 1a02 0a00 1a00 2200",
    );
    let json = decode(&body).expect("the captured body decodes");
    assert_eq!(
        json,
        json!({
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": "foo"},
            "spec": {},
            "status": {},
        })
    );
}

#[test]
fn config_map_data_is_an_object_and_binary_data_is_base64() {
    let config_map = core::ConfigMap {
        metadata: object_meta("settings"),
        immutable: Some(false),
        data: string_map(&[("mode", "fast"), ("empty", "")]),
        binary_data: [("blob".to_owned(), vec![0, 1, 2, 255])].into(),
    };
    let json = round_trip::<k8s_openapi::api::core::v1::ConfigMap>("v1", "ConfigMap", &config_map);
    assert_eq!(
        json,
        json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "settings"},
            "immutable": false,
            "data": {"mode": "fast", "empty": ""},
            "binaryData": {"blob": "AAEC/w=="},
        })
    );
}

#[test]
fn secret_data_is_base64_and_string_data_and_type_are_kept() {
    let secret = core::Secret {
        metadata: Some(meta::ObjectMeta {
            name: s("db"),
            namespace: s("prod"),
            annotations: string_map(&[("owner", "team-a")]),
            ..Default::default()
        }),
        immutable: None,
        data: [("password".to_owned(), b"hunter2".to_vec())].into(),
        string_data: string_map(&[("user", "admin")]),
        r#type: s("Opaque"),
    };
    let json = round_trip::<k8s_openapi::api::core::v1::Secret>("v1", "Secret", &secret);
    assert_eq!(
        json,
        json!({
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "db", "namespace": "prod", "annotations": {"owner": "team-a"}},
            "data": {"password": "aHVudGVyMg=="},
            "stringData": {"user": "admin"},
            "type": "Opaque",
        })
    );
}

#[test]
fn deployment_with_a_pod_template_decodes_to_the_json_kubernetes_uses() {
    let json = round_trip::<k8s_openapi::api::apps::v1::Deployment>(
        "apps/v1",
        "Deployment",
        &deployment(),
    );
    assert_eq!(
        json,
        json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "default", "labels": {"app": "web"}},
            "spec": {
                "replicas": 3,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": {"labels": {"app": "web"}}, "spec": pod_spec_json()},
                "strategy": {
                    "type": "RollingUpdate",
                    "rollingUpdate": {"maxUnavailable": 0, "maxSurge": "25%"},
                },
                "revisionHistoryLimit": 10,
                "progressDeadlineSeconds": 600,
            },
            "status": {},
        })
    );
}

#[test]
fn go_zero_values_of_kubectl_create_deployment_are_dropped_like_go_json_drops_them() {
    // What kubectl 1.32 sends for `kubectl create deployment web --image=nginx`: every
    // non-pointer field written, zero or not.
    let container = core::Container {
        name: s("nginx"),
        image: s("nginx"),
        working_dir: s(""),
        resources: Some(core::ResourceRequirements::default()),
        termination_message_path: s(""),
        termination_message_policy: s(""),
        image_pull_policy: s(""),
        stdin: Some(false),
        stdin_once: Some(false),
        tty: Some(false),
        ..Default::default()
    };
    let labels = string_map(&[("app", "web")]);
    let deployment = apps::Deployment {
        metadata: Some(meta::ObjectMeta {
            name: s("web"),
            generate_name: s(""),
            namespace: s(""),
            self_link: s(""),
            uid: s(""),
            resource_version: s(""),
            generation: Some(0),
            creation_timestamp: Some(meta::Time::default()),
            labels: labels.clone(),
            ..Default::default()
        }),
        spec: Some(apps::DeploymentSpec {
            replicas: Some(1),
            selector: Some(meta::LabelSelector {
                match_labels: labels.clone(),
                match_expressions: vec![],
            }),
            template: Some(core::PodTemplateSpec {
                metadata: Some(meta::ObjectMeta {
                    generation: Some(0),
                    creation_timestamp: Some(meta::Time {
                        seconds: Some(0),
                        nanos: Some(0),
                    }),
                    labels,
                    ..Default::default()
                }),
                spec: Some(core::PodSpec {
                    containers: vec![container],
                    restart_policy: s(""),
                    dns_policy: s(""),
                    service_account_name: s(""),
                    service_account: s(""),
                    node_name: s(""),
                    host_network: Some(false),
                    host_pid: Some(false),
                    host_ipc: Some(false),
                    hostname: s(""),
                    subdomain: s(""),
                    scheduler_name: s(""),
                    priority_class_name: s(""),
                    ..Default::default()
                }),
            }),
            strategy: Some(apps::DeploymentStrategy {
                r#type: s(""),
                rolling_update: None,
            }),
            min_ready_seconds: Some(0),
            paused: Some(false),
            ..Default::default()
        }),
        status: Some(apps::DeploymentStatus {
            observed_generation: Some(0),
            replicas: Some(0),
            updated_replicas: Some(0),
            ready_replicas: Some(0),
            available_replicas: Some(0),
            unavailable_replicas: Some(0),
            ..Default::default()
        }),
    };
    // `kubectl create deployment web --image=nginx --dry-run=client -o json`, without
    // `creationTimestamp: null`.
    let expected = json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "labels": {"app": "web"}},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "nginx", "image": "nginx", "resources": {}}]},
            },
            "strategy": {},
        },
        "status": {},
    });
    assert_eq!(decoded("apps/v1", "Deployment", &deployment), expected);
}

#[test]
fn zero_replicas_and_false_pointer_booleans_are_kept() {
    let mut deployment = deployment();
    if let Some(spec) = deployment.spec.as_mut() {
        spec.replicas = Some(0);
    }
    let json = decoded("apps/v1", "Deployment", &deployment);
    assert_eq!(json["spec"]["replicas"], json!(0));
    let template = &json["spec"]["template"]["spec"];
    assert_eq!(template["automountServiceAccountToken"], json!(false));
    assert_eq!(template["tolerations"][0]["tolerationSeconds"], json!(0));

    let account = core::ServiceAccount {
        metadata: object_meta("robot"),
        automount_service_account_token: Some(false),
        ..Default::default()
    };
    let json =
        round_trip::<k8s_openapi::api::core::v1::ServiceAccount>("v1", "ServiceAccount", &account);
    assert_eq!(
        json,
        json!({
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": "robot"},
            "automountServiceAccountToken": false,
        })
    );
}

#[test]
fn service_target_ports_keep_their_int_or_string_type() {
    let service = core::Service {
        metadata: object_meta("web"),
        spec: Some(core::ServiceSpec {
            ports: vec![
                core::ServicePort {
                    name: s("http"),
                    protocol: s("TCP"),
                    port: Some(80),
                    target_port: int(8080),
                    node_port: Some(0),
                    ..Default::default()
                },
                core::ServicePort {
                    name: s("metrics"),
                    port: Some(9090),
                    target_port: string_int("metrics"),
                    ..Default::default()
                },
            ],
            selector: string_map(&[("app", "web")]),
            r#type: s("ClusterIP"),
            cluster_ips: vec![],
            publish_not_ready_addresses: Some(false),
            ..Default::default()
        }),
        status: Some(core::ServiceStatus::default()),
    };
    let json = round_trip::<k8s_openapi::api::core::v1::Service>("v1", "Service", &service);
    assert_eq!(
        json,
        json!({
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "web"},
            "spec": {
                "ports": [
                    {"name": "http", "protocol": "TCP", "port": 80, "targetPort": 8080},
                    {"name": "metrics", "port": 9090, "targetPort": "metrics"},
                ],
                "selector": {"app": "web"},
                "type": "ClusterIP",
            },
            "status": {},
        })
    );
}

#[test]
fn lease_times_are_micro_times_with_six_fractional_digits() {
    let lease = coordination::Lease {
        metadata: Some(meta::ObjectMeta {
            name: s("controller"),
            namespace: s("kube-system"),
            ..Default::default()
        }),
        spec: Some(coordination::LeaseSpec {
            holder_identity: s("pod-1"),
            lease_duration_seconds: Some(15),
            acquire_time: Some(meta::MicroTime {
                seconds: Some(1_714_564_800),
                nanos: Some(0),
            }),
            renew_time: Some(meta::MicroTime {
                seconds: Some(1_714_564_815),
                nanos: Some(123_456_789),
            }),
            lease_transitions: Some(0),
            strategy: None,
            preferred_holder: None,
        }),
    };
    let json = round_trip::<k8s_openapi::api::coordination::v1::Lease>(
        "coordination.k8s.io/v1",
        "Lease",
        &lease,
    );
    assert_eq!(
        json,
        json!({
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": "controller", "namespace": "kube-system"},
            "spec": {
                "holderIdentity": "pod-1",
                "leaseDurationSeconds": 15,
                "acquireTime": "2024-05-01T12:00:00.000000Z",
                "renewTime": "2024-05-01T12:00:15.123456Z",
                "leaseTransitions": 0,
            },
        })
    );
}

#[test]
fn core_event_times_are_whole_seconds_and_zero_times_are_omitted() {
    let event = core::Event {
        metadata: Some(meta::ObjectMeta {
            name: s("web.17b"),
            namespace: s("default"),
            creation_timestamp: Some(meta::Time::default()),
            ..Default::default()
        }),
        involved_object: Some(core::ObjectReference {
            kind: s("Pod"),
            namespace: s("default"),
            name: s("web"),
            uid: s("6b1f"),
            api_version: s("v1"),
            ..Default::default()
        }),
        reason: s("Started"),
        message: s("Started container web"),
        source: Some(core::EventSource {
            component: s("kubelet"),
            host: s("node-1"),
        }),
        first_timestamp: Some(meta::Time {
            seconds: Some(1_714_564_800),
            nanos: Some(999),
        }),
        last_timestamp: Some(meta::Time {
            seconds: Some(1_714_564_801),
            nanos: Some(0),
        }),
        count: Some(2),
        r#type: s("Normal"),
        event_time: Some(meta::MicroTime::default()),
        reporting_component: s(""),
        reporting_instance: s(""),
        ..Default::default()
    };
    let json = round_trip::<k8s_openapi::api::core::v1::Event>("v1", "Event", &event);
    assert_eq!(
        json,
        json!({
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": "web.17b", "namespace": "default"},
            "involvedObject": {
                "kind": "Pod", "namespace": "default", "name": "web", "uid": "6b1f",
                "apiVersion": "v1",
            },
            "reason": "Started",
            "message": "Started container web",
            "source": {"component": "kubelet", "host": "node-1"},
            "firstTimestamp": "2024-05-01T12:00:00Z",
            "lastTimestamp": "2024-05-01T12:00:01Z",
            "count": 2,
            "type": "Normal",
        })
    );
}

#[test]
fn events_v1_event_decodes_with_its_series() {
    let event = events::Event {
        metadata: object_meta("web.17c"),
        event_time: Some(meta::MicroTime {
            seconds: Some(1_714_564_800),
            nanos: Some(5_000),
        }),
        series: Some(events::EventSeries {
            count: Some(3),
            last_observed_time: Some(meta::MicroTime {
                seconds: Some(1_714_564_860),
                nanos: Some(0),
            }),
        }),
        reporting_controller: s("example.com/operator"),
        reporting_instance: s("operator-0"),
        action: s("Reconcile"),
        reason: s("Synced"),
        regarding: Some(core::ObjectReference {
            kind: s("ConfigMap"),
            name: s("settings"),
            ..Default::default()
        }),
        note: s("synced"),
        r#type: s("Normal"),
        deprecated_count: Some(0),
        ..Default::default()
    };
    let json =
        round_trip::<k8s_openapi::api::events::v1::Event>("events.k8s.io/v1", "Event", &event);
    assert_eq!(
        json,
        json!({
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "metadata": {"name": "web.17c"},
            "eventTime": "2024-05-01T12:00:00.000005Z",
            "series": {"count": 3, "lastObservedTime": "2024-05-01T12:01:00.000000Z"},
            "reportingController": "example.com/operator",
            "reportingInstance": "operator-0",
            "action": "Reconcile",
            "reason": "Synced",
            "regarding": {"kind": "ConfigMap", "name": "settings"},
            "note": "synced",
            "type": "Normal",
        })
    );
}

#[test]
fn kubectl_auth_can_i_self_subject_access_review_decodes() {
    let review = authz::SelfSubjectAccessReview {
        metadata: Some(meta::ObjectMeta {
            creation_timestamp: Some(meta::Time::default()),
            ..Default::default()
        }),
        spec: Some(authz::SelfSubjectAccessReviewSpec {
            resource_attributes: Some(authz::ResourceAttributes {
                namespace: s("default"),
                verb: s("create"),
                group: s(""),
                version: s(""),
                resource: s("configmaps"),
                subresource: s(""),
                name: s(""),
                field_selector: None,
                label_selector: None,
            }),
            non_resource_attributes: None,
        }),
        status: Some(authz::SubjectAccessReviewStatus {
            allowed: Some(false),
            denied: Some(false),
            reason: s(""),
            evaluation_error: s(""),
        }),
    };
    let json = round_trip::<k8s_openapi::api::authorization::v1::SelfSubjectAccessReview>(
        "authorization.k8s.io/v1",
        "SelfSubjectAccessReview",
        &review,
    );
    assert_eq!(
        json,
        json!({
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "metadata": {},
            "spec": {"resourceAttributes": {
                "namespace": "default", "verb": "create", "resource": "configmaps",
            }},
            "status": {"allowed": false},
        })
    );
}

#[test]
fn subject_access_review_extra_values_are_arrays() {
    let review = authz::SubjectAccessReview {
        metadata: object_meta(""),
        spec: Some(authz::SubjectAccessReviewSpec {
            non_resource_attributes: Some(authz::NonResourceAttributes {
                path: s("/healthz"),
                verb: s("get"),
            }),
            user: s("alice"),
            groups: strings(&["dev", "system:authenticated"]),
            extra: [(
                "scopes".to_owned(),
                authz::ExtraValue {
                    items: strings(&["read", "write"]),
                },
            )]
            .into(),
            uid: s("42"),
            ..Default::default()
        }),
        status: None,
    };
    let json = round_trip::<k8s_openapi::api::authorization::v1::SubjectAccessReview>(
        "authorization.k8s.io/v1",
        "SubjectAccessReview",
        &review,
    );
    assert_eq!(
        json["spec"],
        json!({
            "nonResourceAttributes": {"path": "/healthz", "verb": "get"},
            "user": "alice",
            "groups": ["dev", "system:authenticated"],
            "extra": {"scopes": ["read", "write"]},
            "uid": "42",
        })
    );
}

#[test]
fn delete_options_decode_under_every_api_version_client_go_uses() {
    let options = meta::DeleteOptions {
        grace_period_seconds: Some(0),
        preconditions: Some(meta::Preconditions {
            uid: s("6b1f"),
            resource_version: s("42"),
        }),
        orphan_dependents: None,
        propagation_policy: s("Foreground"),
        dry_run: strings(&["All"]),
        ignore_store_read_error_with_cluster_breaking_potential: None,
    };
    for api_version in ["v1", "meta.k8s.io/v1", "apps/v1"] {
        let json = round_trip::<k8s_openapi::apimachinery::pkg::apis::meta::v1::DeleteOptions>(
            api_version,
            "DeleteOptions",
            &options,
        );
        assert_eq!(
            json,
            json!({
                "apiVersion": api_version,
                "kind": "DeleteOptions",
                "gracePeriodSeconds": 0,
                "preconditions": {"uid": "6b1f", "resourceVersion": "42"},
                "propagationPolicy": "Foreground",
                "dryRun": ["All"],
            })
        );
    }
}

#[test]
fn custom_resource_definition_schema_decodes_with_its_json_schema_quirks() {
    let json_value = |text: &str| apiext::Json {
        raw: Some(text.as_bytes().to_vec()),
    };
    let string_schema = || apiext::JsonSchemaProps {
        r#type: s("string"),
        nullable: Some(false),
        ..Default::default()
    };
    let spec_schema = apiext::JsonSchemaProps {
        r#type: s("object"),
        properties: [
            (
                "replicas".to_owned(),
                apiext::JsonSchemaProps {
                    r#type: s("integer"),
                    minimum: Some(0.0),
                    maximum: Some(10.5),
                    exclusive_maximum: Some(false),
                    default: Some(json_value("1")),
                    ..Default::default()
                },
            ),
            (
                "mode".to_owned(),
                apiext::JsonSchemaProps {
                    r#enum: vec![json_value("\"fast\""), json_value("\"slow\"")],
                    ..string_schema()
                },
            ),
            (
                "tags".to_owned(),
                apiext::JsonSchemaProps {
                    r#type: s("array"),
                    items: Some(Box::new(apiext::JsonSchemaPropsOrArray {
                        schema: Some(Box::new(string_schema())),
                        j_son_schemas: vec![],
                    })),
                    x_kubernetes_list_type: s("set"),
                    ..Default::default()
                },
            ),
            (
                "labels".to_owned(),
                apiext::JsonSchemaProps {
                    r#type: s("object"),
                    additional_properties: Some(Box::new(apiext::JsonSchemaPropsOrBool {
                        allows: Some(true),
                        schema: Some(Box::new(string_schema())),
                    })),
                    ..Default::default()
                },
            ),
            (
                "raw".to_owned(),
                apiext::JsonSchemaProps {
                    x_kubernetes_preserve_unknown_fields: Some(true),
                    x_kubernetes_int_or_string: Some(false),
                    ..Default::default()
                },
            ),
        ]
        .into(),
        required: strings(&["replicas"]),
        x_kubernetes_validations: vec![apiext::ValidationRule {
            rule: s("self.replicas <= 10"),
            message: s("too many"),
            ..Default::default()
        }],
        ..Default::default()
    };
    let crd = apiext::CustomResourceDefinition {
        metadata: object_meta("widgets.example.com"),
        spec: Some(apiext::CustomResourceDefinitionSpec {
            group: s("example.com"),
            names: Some(apiext::CustomResourceDefinitionNames {
                plural: s("widgets"),
                singular: s("widget"),
                short_names: strings(&["wd"]),
                kind: s("Widget"),
                list_kind: s("WidgetList"),
                categories: vec![],
            }),
            scope: s("Namespaced"),
            versions: vec![apiext::CustomResourceDefinitionVersion {
                name: s("v1"),
                served: Some(true),
                storage: Some(true),
                deprecated: Some(false),
                schema: Some(apiext::CustomResourceValidation {
                    open_apiv3_schema: Some(apiext::JsonSchemaProps {
                        r#type: s("object"),
                        properties: [("spec".to_owned(), spec_schema)].into(),
                        ..Default::default()
                    }),
                }),
                subresources: Some(apiext::CustomResourceSubresources {
                    status: Some(apiext::CustomResourceSubresourceStatus {}),
                    scale: Some(apiext::CustomResourceSubresourceScale {
                        spec_replicas_path: s(".spec.replicas"),
                        status_replicas_path: s(".status.replicas"),
                        label_selector_path: None,
                    }),
                }),
                additional_printer_columns: vec![apiext::CustomResourceColumnDefinition {
                    name: s("Replicas"),
                    r#type: s("integer"),
                    json_path: s(".spec.replicas"),
                    priority: Some(0),
                    ..Default::default()
                }],
                ..Default::default()
            }],
            conversion: Some(apiext::CustomResourceConversion {
                strategy: s("None"),
                webhook: None,
            }),
            preserve_unknown_fields: Some(false),
        }),
        status: None,
    };
    let json = round_trip::<
        k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
    >("apiextensions.k8s.io/v1", "CustomResourceDefinition", &crd);
    let string_json = json!({"type": "string"});
    assert_eq!(
        json,
        json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {
                "group": "example.com",
                "names": {
                    "plural": "widgets", "singular": "widget", "shortNames": ["wd"],
                    "kind": "Widget", "listKind": "WidgetList",
                },
                "scope": "Namespaced",
                "versions": [{
                    "name": "v1",
                    "served": true,
                    "storage": true,
                    "schema": {"openAPIV3Schema": {
                        "type": "object",
                        "properties": {"spec": {
                            "type": "object",
                            "properties": {
                                "replicas": {
                                    "type": "integer", "minimum": 0.0, "maximum": 10.5,
                                    "default": 1,
                                },
                                "mode": {"type": "string", "enum": ["fast", "slow"]},
                                "tags": {
                                    "type": "array", "items": string_json,
                                    "x-kubernetes-list-type": "set",
                                },
                                "labels": {
                                    "type": "object", "additionalProperties": string_json,
                                },
                                "raw": {"x-kubernetes-preserve-unknown-fields": true},
                            },
                            "required": ["replicas"],
                            "x-kubernetes-validations": [
                                {"rule": "self.replicas <= 10", "message": "too many"},
                            ],
                        }},
                    }},
                    "subresources": {
                        "status": {},
                        "scale": {
                            "specReplicasPath": ".spec.replicas",
                            "statusReplicasPath": ".status.replicas",
                        },
                    },
                    "additionalPrinterColumns": [
                        {"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"},
                    ],
                }],
                "conversion": {"strategy": "None"},
            },
        })
    );
}

#[test]
fn json_schema_props_or_bool_and_or_array_fall_back_to_their_other_form() {
    let props_or_bool = apiext::JsonSchemaPropsOrBool {
        allows: Some(false),
        schema: None,
    };
    assert_eq!(props_or_bool.to_json(), json!(false));
    let props_or_array = apiext::JsonSchemaPropsOrArray {
        schema: None,
        j_son_schemas: vec![
            apiext::JsonSchemaProps {
                r#type: s("string"),
                ..Default::default()
            },
            apiext::JsonSchemaProps {
                r#type: s("integer"),
                ..Default::default()
            },
        ],
    };
    assert_eq!(
        props_or_array.to_json(),
        json!([{"type": "string"}, {"type": "integer"}])
    );
    let dependencies = apiext::JsonSchemaPropsOrStringArray {
        schema: None,
        property: strings(&["a", "b"]),
    };
    assert_eq!(dependencies.to_json(), json!(["a", "b"]));
}

#[test]
fn every_top_level_kind_fits_its_k8s_openapi_type() {
    use k8s_openapi::api as typed;

    let labels = string_map(&[("app", "web")]);
    let selector = Some(meta::LabelSelector {
        match_labels: labels.clone(),
        match_expressions: vec![meta::LabelSelectorRequirement {
            key: s("tier"),
            operator: s("In"),
            values: strings(&["frontend"]),
        }],
    });
    let rich_meta = Some(meta::ObjectMeta {
        name: s("web"),
        namespace: s("default"),
        uid: s("6b1f"),
        resource_version: s("7"),
        generation: Some(2),
        creation_timestamp: Some(meta::Time {
            seconds: Some(1_714_564_800),
            nanos: None,
        }),
        deletion_grace_period_seconds: Some(0),
        labels: labels.clone(),
        owner_references: vec![meta::OwnerReference {
            kind: s("ReplicaSet"),
            name: s("web-1"),
            uid: s("77aa"),
            api_version: s("apps/v1"),
            controller: Some(true),
            block_owner_deletion: Some(false),
        }],
        finalizers: strings(&["example.com/cleanup"]),
        managed_fields: vec![meta::ManagedFieldsEntry {
            manager: s("kubectl"),
            operation: s("Update"),
            api_version: s("v1"),
            time: Some(meta::Time {
                seconds: Some(1_714_564_800),
                nanos: None,
            }),
            fields_type: s("FieldsV1"),
            fields_v1: Some(meta::FieldsV1 {
                raw: Some(br#"{"f:metadata":{"f:labels":{}}}"#.to_vec()),
            }),
            subresource: s(""),
        }],
        ..Default::default()
    });
    let json = round_trip::<typed::core::v1::Namespace>(
        "v1",
        "Namespace",
        &core::Namespace {
            metadata: rich_meta.clone(),
            spec: Some(core::NamespaceSpec {
                finalizers: strings(&["kubernetes"]),
            }),
            status: Some(core::NamespaceStatus {
                phase: s("Active"),
                conditions: vec![],
            }),
        },
    );
    assert_eq!(
        json["metadata"]["managedFields"][0]["fieldsV1"],
        json!({"f:metadata": {"f:labels": {}}})
    );
    assert_eq!(
        json["metadata"]["creationTimestamp"],
        json!("2024-05-01T12:00:00Z")
    );
    assert_eq!(json["metadata"]["generation"], json!(2));

    round_trip::<typed::core::v1::Pod>(
        "v1",
        "Pod",
        &core::Pod {
            metadata: rich_meta.clone(),
            spec: Some(pod_spec()),
            status: Some(core::PodStatus {
                phase: s("Running"),
                conditions: vec![core::PodCondition {
                    r#type: s("Ready"),
                    status: s("True"),
                    last_transition_time: Some(meta::Time {
                        seconds: Some(1_714_564_800),
                        nanos: None,
                    }),
                    ..Default::default()
                }],
                pod_ip: s("10.0.0.7"),
                pod_ips: vec![core::PodIp { ip: s("10.0.0.7") }],
                ..Default::default()
            }),
        },
    );
    let template = Some(core::PodTemplateSpec {
        metadata: rich_meta.clone(),
        spec: Some(pod_spec()),
    });
    round_trip::<typed::apps::v1::ReplicaSet>(
        "apps/v1",
        "ReplicaSet",
        &apps::ReplicaSet {
            metadata: rich_meta.clone(),
            spec: Some(apps::ReplicaSetSpec {
                replicas: Some(2),
                min_ready_seconds: Some(5),
                selector: selector.clone(),
                template,
            }),
            status: Some(apps::ReplicaSetStatus {
                replicas: Some(2),
                ready_replicas: Some(1),
                ..Default::default()
            }),
        },
    );
    let json = round_trip::<typed::autoscaling::v1::Scale>(
        "autoscaling/v1",
        "Scale",
        &autoscaling::Scale {
            metadata: rich_meta.clone(),
            spec: Some(autoscaling::ScaleSpec { replicas: Some(0) }),
            status: Some(autoscaling::ScaleStatus {
                replicas: Some(3),
                selector: s("app=web"),
            }),
        },
    );
    assert_eq!(json["spec"], json!({"replicas": 0}));
    let rule = rbac::PolicyRule {
        verbs: strings(&["get", "list"]),
        api_groups: strings(&[""]),
        resources: strings(&["configmaps"]),
        resource_names: strings(&["settings"]),
        non_resource_ur_ls: vec![],
    };
    round_trip::<typed::rbac::v1::Role>(
        "rbac.authorization.k8s.io/v1",
        "Role",
        &rbac::Role {
            metadata: rich_meta.clone(),
            rules: vec![rule.clone()],
        },
    );
    let json = round_trip::<typed::rbac::v1::ClusterRole>(
        "rbac.authorization.k8s.io/v1",
        "ClusterRole",
        &rbac::ClusterRole {
            metadata: rich_meta.clone(),
            rules: vec![rbac::PolicyRule {
                verbs: strings(&["get"]),
                non_resource_ur_ls: strings(&["/healthz"]),
                ..Default::default()
            }],
            aggregation_rule: Some(rbac::AggregationRule {
                cluster_role_selectors: vec![selector.clone().unwrap_or_default()],
            }),
        },
    );
    assert_eq!(
        json["rules"],
        json!([{"verbs": ["get"], "nonResourceURLs": ["/healthz"]}])
    );
    let subjects = vec![rbac::Subject {
        kind: s("ServiceAccount"),
        api_group: s(""),
        name: s("robot"),
        namespace: s("default"),
    }];
    let role_ref = |kind: &str| {
        Some(rbac::RoleRef {
            api_group: s("rbac.authorization.k8s.io"),
            kind: s(kind),
            name: s("reader"),
        })
    };
    round_trip::<typed::rbac::v1::RoleBinding>(
        "rbac.authorization.k8s.io/v1",
        "RoleBinding",
        &rbac::RoleBinding {
            metadata: rich_meta.clone(),
            subjects: subjects.clone(),
            role_ref: role_ref("Role"),
        },
    );
    round_trip::<typed::rbac::v1::ClusterRoleBinding>(
        "rbac.authorization.k8s.io/v1",
        "ClusterRoleBinding",
        &rbac::ClusterRoleBinding {
            metadata: rich_meta.clone(),
            subjects,
            role_ref: role_ref("ClusterRole"),
        },
    );
    let json = round_trip::<typed::authentication::v1::SelfSubjectReview>(
        "authentication.k8s.io/v1",
        "SelfSubjectReview",
        &authn::SelfSubjectReview {
            metadata: rich_meta.clone(),
            status: Some(authn::SelfSubjectReviewStatus {
                user_info: Some(authn::UserInfo {
                    username: s("alice"),
                    uid: s("1"),
                    groups: strings(&["dev"]),
                    extra: [(
                        "scopes".to_owned(),
                        authn::ExtraValue {
                            items: strings(&["a"]),
                        },
                    )]
                    .into(),
                }),
            }),
        },
    );
    assert_eq!(
        json["status"]["userInfo"]["extra"],
        json!({"scopes": ["a"]})
    );
    let json = round_trip::<typed::authentication::v1::TokenRequest>(
        "authentication.k8s.io/v1",
        "TokenRequest",
        &authn::TokenRequest {
            metadata: Some(meta::ObjectMeta::default()),
            spec: Some(authn::TokenRequestSpec {
                audiences: strings(&["https://kubernetes.default.svc"]),
                expiration_seconds: Some(3600),
                bound_object_ref: Some(authn::BoundObjectReference {
                    kind: s("Pod"),
                    api_version: s("v1"),
                    name: s("web"),
                    u_id: s("6b1f"),
                }),
            }),
            // k8s-openapi requires `expirationTimestamp` in a status, so the status an
            // empty Go `TokenRequestStatus` becomes (`{}`) would not fit; the server must
            // not deserialize a create body's status into k8s-openapi types.
            status: Some(authn::TokenRequestStatus {
                token: s("ey.x"),
                expiration_timestamp: Some(meta::Time {
                    seconds: Some(1_714_568_400),
                    nanos: None,
                }),
            }),
        },
    );
    assert_eq!(json["spec"]["boundObjectRef"]["uid"], json!("6b1f"));
    round_trip::<typed::core::v1::ServiceAccount>(
        "v1",
        "ServiceAccount",
        &core::ServiceAccount {
            metadata: rich_meta,
            secrets: vec![core::ObjectReference {
                name: s("robot-token"),
                ..Default::default()
            }],
            image_pull_secrets: vec![core::LocalObjectReference {
                name: s("registry"),
            }],
            automount_service_account_token: Some(true),
        },
    );
}

#[test]
fn a_body_without_the_magic_prefix_is_rejected() {
    let body = envelope("v1", "Namespace", &core::Namespace::default());
    let error = decode(&body[1..]).expect_err("the magic is missing");
    assert!(matches!(error, ProtobufError::MissingMagic), "{error:?}");
    let error = decode(br#"{"kind":"Namespace"}"#).expect_err("JSON is not protobuf");
    assert!(matches!(error, ProtobufError::MissingMagic), "{error:?}");
    assert_eq!(error.to_string(), "missing protobuf magic prefix");
}

#[test]
fn a_truncated_body_is_a_bad_envelope() {
    let body = envelope(
        "v1",
        "ConfigMap",
        &core::ConfigMap {
            metadata: object_meta("settings"),
            ..Default::default()
        },
    );
    let error = decode(&body[..body.len() - 3]).expect_err("the envelope is cut short");
    assert!(matches!(error, ProtobufError::BadEnvelope(_)), "{error:?}");
}

#[test]
fn a_raw_message_that_is_not_protobuf_is_a_bad_message() {
    // Field 1 (metadata) declared 16 bytes long with only 2 present.
    let body = envelope_with("v1", "ConfigMap", vec![0x0a, 0x10, 0x0a, 0x00], "", "");
    let error = decode(&body).expect_err("the message is cut short");
    assert!(
        matches!(&error, ProtobufError::BadMessage { kind, .. } if kind == "ConfigMap"),
        "{error:?}"
    );
    assert_eq!(error.to_string(), "bad protobuf message for v1/ConfigMap");
}

#[test]
fn an_unsupported_kind_is_reported_with_its_type() {
    let body = envelope_with("example.com/v1", "Widget", vec![], "", "");
    let error = decode(&body).expect_err("custom resources are never protobuf");
    assert!(
        matches!(&error, ProtobufError::UnsupportedType { api_version, kind }
            if api_version == "example.com/v1" && kind == "Widget"),
        "{error:?}"
    );
    assert_eq!(error.to_string(), "unsupported type example.com/v1/Widget");
    // A built-in kind in a version the server does not serve (k8s-pb has its message).
    let body = envelope_with("apps/v1beta2", "Deployment", vec![], "", "");
    assert!(matches!(
        decode(&body),
        Err(ProtobufError::UnsupportedType { .. })
    ));
    // Read-only and options kinds are never bodies.
    let body = envelope_with("v1", "ComponentStatus", vec![], "", "");
    assert!(matches!(
        decode(&body),
        Err(ProtobufError::UnsupportedType { .. })
    ));
}

#[test]
fn encoded_or_non_protobuf_raw_content_is_rejected() {
    let raw = core::Namespace::default().encode_to_vec();
    let body = envelope_with("v1", "Namespace", raw.clone(), "gzip", "");
    let error = decode(&body).expect_err("gzip is not supported");
    assert!(
        matches!(error, ProtobufError::ContentEncodingNotSupported(_)),
        "{error:?}"
    );
    assert_eq!(error.to_string(), "content encoding \"gzip\" not supported");

    let body = envelope_with("v1", "Namespace", raw.clone(), "", "application/json");
    let error = decode(&body).expect_err("JSON inside protobuf is not supported");
    assert!(
        matches!(error, ProtobufError::ContentTypeNotSupported(_)),
        "{error:?}"
    );

    let body = envelope_with("v1", "Namespace", raw, "", PROTOBUF_CONTENT_TYPE);
    assert_eq!(
        decode(&body).expect("protobuf is protobuf"),
        json!({"apiVersion": "v1", "kind": "Namespace"})
    );
}

#[test]
fn times_are_formatted_in_utc_across_leap_days_and_before_the_epoch() {
    let time = |seconds: i64, nanos: i32| format_time(Some(seconds), Some(nanos), false);
    assert_eq!(time(0, 0), None);
    assert_eq!(format_time(None, None, true), None);
    assert_eq!(time(1, 0).as_deref(), Some("1970-01-01T00:00:01Z"));
    assert_eq!(time(0, 1).as_deref(), Some("1970-01-01T00:00:00Z"));
    assert_eq!(time(-1, 0).as_deref(), Some("1969-12-31T23:59:59Z"));
    assert_eq!(
        time(951_782_400, 0).as_deref(),
        Some("2000-02-29T00:00:00Z")
    );
    assert_eq!(
        time(951_868_800, 0).as_deref(),
        Some("2000-03-01T00:00:00Z")
    );
    assert_eq!(
        time(4_107_456_000, 0).as_deref(),
        Some("2100-02-28T00:00:00Z")
    );
    assert_eq!(
        time(4_107_542_400, 0).as_deref(),
        Some("2100-03-01T00:00:00Z")
    );
    assert_eq!(
        time(253_402_300_799, 0).as_deref(),
        Some("9999-12-31T23:59:59Z")
    );
    assert_eq!(
        time(-62_135_596_800, 0).as_deref(),
        Some("0001-01-01T00:00:00Z")
    );
    assert_eq!(
        time(-62_198_755_200, 0).as_deref(),
        Some("-0001-01-01T00:00:00Z")
    );
    assert_eq!(
        format_time(Some(1), Some(-1), true).as_deref(),
        Some("1970-01-01T00:00:00.999999Z")
    );
    assert_eq!(
        format_time(Some(i64::MAX), Some(1_000_000_000), false),
        None
    );
    assert!(format_time(Some(i64::MIN), Some(0), true).is_some());
}

#[test]
fn durations_are_formatted_like_go() {
    let cases = [
        (0, "0s"),
        (999, "999ns"),
        (1_500, "1.5µs"),
        (300_000_000, "300ms"),
        (1_500_000_000, "1.5s"),
        (61_001_000_000, "1m1.001s"),
        (3_600_000_000_000, "1h0m0s"),
        (-90_000_000_000, "-1m30s"),
        (i64::MIN, "-2562047h47m16.854775808s"),
    ];
    for (nanos, expected) in cases {
        let duration = meta_v1::Duration {
            duration: Some(nanos),
        };
        assert_eq!(duration.to_json(), json!(expected), "{nanos}ns");
    }
}

#[test]
fn embedded_json_is_parsed_and_non_json_is_omitted() {
    let extension = RawExtension {
        raw: Some(br#"{"kind":"Widget","spec":{"a":1}}"#.to_vec()),
    };
    assert_eq!(
        extension.to_json(),
        json!({"kind": "Widget", "spec": {"a": 1}})
    );
    let protobuf = RawExtension {
        raw: Some(b"k8s\0\x0a\x00".to_vec()),
    };
    assert_eq!(protobuf.to_json(), Value::Null);
    let mut object = Obj::new();
    object.message("object", Some(&protobuf));
    object.message("empty", Some(&RawExtension { raw: None }));
    object.message(
        "fields",
        Some(&meta::FieldsV1 {
            raw: Some(b"{}".to_vec()),
        }),
    );
    assert_eq!(object.finish(), json!({"fields": {}}));
}

#[test]
fn int_or_string_and_quantity_take_their_scalar_forms() {
    assert_eq!(IntOrString::default().to_json(), json!(0));
    assert_eq!(int(8080).map(|value| value.to_json()), Some(json!(8080)));
    assert_eq!(
        string_int("25%").map(|value| value.to_json()),
        Some(json!("25%"))
    );
    assert_eq!(quantity("1.5Gi").to_json(), json!("1.5Gi"));
    assert_eq!(quantity("").to_json(), Value::Null);
}

#[test]
fn an_empty_pointer_string_is_kept_and_an_empty_plain_string_dropped() {
    // `PersistentVolumeClaimSpec.StorageClassName` is a `*string`: Go sends it only when set,
    // and `""` asks for no StorageClass. `PersistentVolumeSpec.StorageClassName` is a `string`,
    // on the wire even when empty, which Go's JSON leaves out.
    let claim = core::PersistentVolumeClaim {
        metadata: object_meta("data"),
        spec: Some(core::PersistentVolumeClaimSpec {
            storage_class_name: s(""),
            volume_name: s(""),
            ..Default::default()
        }),
        status: None,
    };
    assert_eq!(
        decoded("v1", "PersistentVolumeClaim", &claim)["spec"],
        json!({"storageClassName": ""})
    );
    let volume = core::PersistentVolume {
        metadata: object_meta("pv"),
        spec: Some(core::PersistentVolumeSpec {
            storage_class_name: s(""),
            ..Default::default()
        }),
        status: None,
    };
    assert_eq!(
        decoded("v1", "PersistentVolume", &volume)["spec"],
        json!({})
    );
}
