//! One realistic object of every kind `decode_object` knows, encoded with prost, decoded by
//! [`decode`], and compared with what k8s-openapi makes of that JSON: the decoded JSON must be
//! exactly what k8s-openapi's type serializes after reading it (nothing lost, renamed, or
//! added, no required field missing). [`Kinds::finish`] checks that no kind is left out, so a
//! kind added to the generator's `TOP_LEVEL_KINDS` needs a case here.
//!
//! The objects use fields that k8s-openapi's `v1_33` types have; the few that k8s-pb 0.9 knows
//! from later releases (`restartPolicyRules`, `declaredFeatures`, ...) would be dropped by
//! those types.

use std::collections::BTreeSet;

use k8s_openapi::api as typed;
use k8s_pb::api::admissionregistration::v1 as admission;
use k8s_pb::api::autoscaling::v2 as autoscaling_v2;
use k8s_pb::api::batch::v1 as batch;
use k8s_pb::api::certificates::v1 as certificates;
use k8s_pb::api::discovery::v1 as discovery;
use k8s_pb::api::flowcontrol::v1 as flowcontrol;
use k8s_pb::api::networking::v1 as networking;
use k8s_pb::api::node::v1 as node;
use k8s_pb::api::policy::v1 as policy;
use k8s_pb::api::scheduling::v1 as scheduling;
use k8s_pb::api::storage::v1 as storage;
use k8s_pb::kube_aggregator::pkg::apis::apiregistration::v1 as apiregistration;

use super::*;

/// The kinds checked so far, and the differences found (reported together by `finish`).
#[derive(Default)]
struct Kinds {
    seen: BTreeSet<(Option<&'static str>, &'static str)>,
    differences: Vec<String>,
}

impl Kinds {
    /// Decodes `message` as `api_version`/`kind` and asserts that the JSON is exactly what the
    /// k8s-openapi type `K` serializes after deserializing it. Returns the JSON.
    fn check<K: DeserializeOwned + Serialize>(
        &mut self,
        api_version: &'static str,
        kind: &'static str,
        message: &impl prost::Message,
    ) -> Value {
        let json = decoded(api_version, kind, message);
        let typed = k8s_openapi_round_trip::<K>(&json);
        differences(
            &json,
            &typed,
            &format!("{api_version} {kind}"),
            &mut self.differences,
        );
        self.seen.insert((Some(api_version), kind));
        json
    }

    /// Asserts that no kind differed and that every kind `decode_object` knows was checked.
    fn finish(self) {
        assert!(
            self.differences.is_empty(),
            "decoded JSON != k8s-openapi's:\n{}",
            self.differences.join("\n")
        );
        let known: BTreeSet<_> = generated::KINDS.iter().copied().collect();
        let missing: Vec<_> = known.difference(&self.seen).collect();
        assert!(missing.is_empty(), "kinds without a case: {missing:?}");
        let unknown: Vec<_> = self.seen.difference(&known).collect();
        assert!(unknown.is_empty(), "cases of unknown kinds: {unknown:?}");
    }
}

/// Appends a line for every path where `ours` and `theirs` differ.
fn differences(ours: &Value, theirs: &Value, path: &str, out: &mut Vec<String>) {
    match (ours, theirs) {
        (Value::Object(ours), Value::Object(theirs)) => {
            let keys: BTreeSet<&String> = ours.keys().chain(theirs.keys()).collect();
            for key in keys {
                let path = format!("{path}.{key}");
                match (ours.get(key), theirs.get(key)) {
                    (Some(ours), Some(theirs)) => differences(ours, theirs, &path, out),
                    // A claim template is a whole `PersistentVolumeClaim`: k8s-openapi writes
                    // its `apiVersion`/`kind`, while protobuf (and so Kubernetes) has none.
                    (None, Some(_))
                        if path.contains(".volumeClaimTemplates[")
                            && ["apiVersion", "kind"].contains(&key.as_str()) => {}
                    (ours, theirs) => {
                        out.push(format!("{path}: ours {ours:?}, k8s-openapi {theirs:?}"))
                    }
                }
            }
        }
        (Value::Array(ours), Value::Array(theirs)) if ours.len() == theirs.len() => {
            for (index, (ours, theirs)) in ours.iter().zip(theirs).enumerate() {
                differences(ours, theirs, &format!("{path}[{index}]"), out);
            }
        }
        _ if ours == theirs => {}
        _ => out.push(format!("{path}: ours {ours}, k8s-openapi {theirs}")),
    }
}

fn k8s_openapi_round_trip<K: DeserializeOwned + Serialize>(json: &Value) -> Value {
    let typed: K = serde_json::from_value(json.clone())
        .unwrap_or_else(|error| panic!("{json} does not fit k8s-openapi: {error}"));
    serde_json::to_value(&typed).expect("k8s-openapi types serialize")
}

fn time(seconds: i64) -> Option<meta::Time> {
    Some(meta::Time {
        seconds: Some(seconds),
        nanos: Some(0),
    })
}

const T0: i64 = 1_714_564_800;

fn quantities(entries: &[(&str, &str)]) -> BTreeMap<String, Quantity> {
    entries
        .iter()
        .map(|(k, v)| ((*k).to_owned(), quantity(v)))
        .collect()
}

/// Metadata with every commonly set field, Go zero values included where Go sends them.
fn meta(name: &str, namespace: &str) -> Option<meta::ObjectMeta> {
    Some(meta::ObjectMeta {
        name: s(name),
        generate_name: s(""),
        namespace: s(namespace),
        self_link: s(""),
        uid: s("6b1f0d2e-0000-4000-8000-000000000001"),
        resource_version: s("42"),
        generation: Some(3),
        creation_timestamp: time(T0),
        deletion_timestamp: None,
        deletion_grace_period_seconds: None,
        labels: string_map(&[("app", "web"), ("tier", "frontend")]),
        annotations: string_map(&[("example.com/note", "hello")]),
        owner_references: vec![meta::OwnerReference {
            api_version: s("apps/v1"),
            kind: s("Deployment"),
            name: s("web"),
            uid: s("77aa"),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }],
        finalizers: strings(&["example.com/cleanup"]),
        managed_fields: vec![meta::ManagedFieldsEntry {
            manager: s("kube-controller-manager"),
            operation: s("Update"),
            api_version: s("v1"),
            time: time(T0),
            fields_type: s("FieldsV1"),
            fields_v1: Some(meta::FieldsV1 {
                raw: Some(br#"{"f:metadata":{"f:labels":{"f:app":{}}}}"#.to_vec()),
            }),
            subresource: s("status"),
        }],
    })
}

/// What Go sends for a pod template's metadata: the zero `creationTimestamp` included.
fn template_meta() -> Option<meta::ObjectMeta> {
    Some(meta::ObjectMeta {
        labels: string_map(&[("app", "web")]),
        creation_timestamp: Some(meta::Time::default()),
        generation: Some(0),
        ..Default::default()
    })
}

fn pod_template() -> Option<core::PodTemplateSpec> {
    Some(core::PodTemplateSpec {
        metadata: template_meta(),
        spec: Some(pod_spec()),
    })
}

fn selector() -> Option<meta::LabelSelector> {
    Some(meta::LabelSelector {
        match_labels: string_map(&[("app", "web")]),
        match_expressions: vec![meta::LabelSelectorRequirement {
            key: s("tier"),
            operator: s("In"),
            values: strings(&["frontend", "backend"]),
        }],
    })
}

fn condition(kind: &str) -> meta::Condition {
    meta::Condition {
        r#type: s(kind),
        status: s("True"),
        observed_generation: Some(3),
        last_transition_time: time(T0),
        reason: s("AsExpected"),
        message: s("all good"),
    }
}

fn object_reference(kind: &str, name: &str) -> Option<core::ObjectReference> {
    Some(core::ObjectReference {
        kind: s(kind),
        namespace: s("default"),
        name: s(name),
        uid: s("6b1f"),
        api_version: s("v1"),
        resource_version: s("7"),
        field_path: s(""),
    })
}

fn secret_reference() -> Option<core::SecretReference> {
    Some(core::SecretReference {
        name: s("credentials"),
        namespace: s("kube-system"),
    })
}

fn node_selector() -> Option<core::NodeSelector> {
    Some(core::NodeSelector {
        node_selector_terms: vec![core::NodeSelectorTerm {
            match_expressions: vec![core::NodeSelectorRequirement {
                key: s("topology.kubernetes.io/zone"),
                operator: s("In"),
                values: strings(&["eu-west-1a"]),
            }],
            match_fields: vec![],
        }],
    })
}

fn pvc_spec() -> Option<core::PersistentVolumeClaimSpec> {
    Some(core::PersistentVolumeClaimSpec {
        access_modes: strings(&["ReadWriteOnce"]),
        selector: selector(),
        resources: Some(core::VolumeResourceRequirements {
            limits: quantities(&[("storage", "20Gi")]),
            requests: quantities(&[("storage", "10Gi")]),
        }),
        volume_name: s(""),
        storage_class_name: s("fast"),
        volume_mode: s("Filesystem"),
        data_source: Some(core::TypedLocalObjectReference {
            api_group: s("snapshot.storage.k8s.io"),
            kind: s("VolumeSnapshot"),
            name: s("snap"),
        }),
        data_source_ref: Some(core::TypedObjectReference {
            api_group: s("snapshot.storage.k8s.io"),
            kind: s("VolumeSnapshot"),
            name: s("snap"),
            namespace: s("default"),
        }),
        volume_attributes_class_name: None,
    })
}

fn persistent_volume_spec() -> core::PersistentVolumeSpec {
    core::PersistentVolumeSpec {
        capacity: quantities(&[("storage", "10Gi")]),
        persistent_volume_source: Some(core::PersistentVolumeSource {
            csi: Some(core::CSIPersistentVolumeSource {
                driver: s("ebs.csi.aws.com"),
                volume_handle: s("vol-0123"),
                read_only: Some(false),
                fs_type: s("ext4"),
                volume_attributes: string_map(&[("type", "gp3")]),
                controller_publish_secret_ref: None,
                node_stage_secret_ref: secret_reference(),
                node_publish_secret_ref: None,
                controller_expand_secret_ref: None,
                node_expand_secret_ref: None,
            }),
            ..Default::default()
        }),
        access_modes: strings(&["ReadWriteOnce"]),
        claim_ref: object_reference("PersistentVolumeClaim", "data"),
        persistent_volume_reclaim_policy: s("Delete"),
        storage_class_name: s("fast"),
        mount_options: strings(&["noatime"]),
        volume_mode: s("Filesystem"),
        node_affinity: Some(core::VolumeNodeAffinity {
            required: node_selector(),
        }),
        volume_attributes_class_name: None,
    }
}

fn webhook_client_config() -> Option<admission::WebhookClientConfig> {
    Some(admission::WebhookClientConfig {
        url: None,
        service: Some(admission::ServiceReference {
            namespace: s("kube-system"),
            name: s("webhook"),
            path: s("/validate"),
            port: Some(443),
        }),
        ca_bundle: Some(b"-----BEGIN CERTIFICATE-----".to_vec()),
    })
}

fn rule_with_operations() -> admission::RuleWithOperations {
    admission::RuleWithOperations {
        operations: strings(&["CREATE", "UPDATE"]),
        rule: Some(admission::Rule {
            api_groups: strings(&["apps"]),
            api_versions: strings(&["v1"]),
            resources: strings(&["deployments", "deployments/scale"]),
            scope: s("Namespaced"),
        }),
    }
}

fn match_resources() -> Option<admission::MatchResources> {
    Some(admission::MatchResources {
        namespace_selector: selector(),
        object_selector: Some(meta::LabelSelector::default()),
        resource_rules: vec![admission::NamedRuleWithOperations {
            resource_names: strings(&["web"]),
            rule_with_operations: Some(rule_with_operations()),
        }],
        exclude_resource_rules: vec![],
        match_policy: s("Equivalent"),
    })
}

fn match_conditions() -> Vec<admission::MatchCondition> {
    vec![admission::MatchCondition {
        name: s("not-system"),
        expression: s("!request.userInfo.username.startsWith('system:')"),
    }]
}

fn job_spec() -> batch::JobSpec {
    batch::JobSpec {
        parallelism: Some(2),
        completions: Some(4),
        active_deadline_seconds: Some(600),
        pod_failure_policy: Some(batch::PodFailurePolicy {
            rules: vec![
                batch::PodFailurePolicyRule {
                    action: s("FailJob"),
                    on_exit_codes: Some(batch::PodFailurePolicyOnExitCodesRequirement {
                        container_name: s("web"),
                        operator: s("In"),
                        values: vec![42, 43],
                    }),
                    on_pod_conditions: vec![],
                },
                batch::PodFailurePolicyRule {
                    action: s("Ignore"),
                    on_exit_codes: None,
                    on_pod_conditions: vec![batch::PodFailurePolicyOnPodConditionsPattern {
                        r#type: s("DisruptionTarget"),
                        status: s("True"),
                    }],
                },
            ],
        }),
        success_policy: Some(batch::SuccessPolicy {
            rules: vec![batch::SuccessPolicyRule {
                succeeded_indexes: s("0-2"),
                succeeded_count: Some(0),
            }],
        }),
        backoff_limit: Some(0),
        backoff_limit_per_index: Some(1),
        max_failed_indexes: Some(2),
        selector: selector(),
        manual_selector: Some(false),
        template: Some(core::PodTemplateSpec {
            metadata: template_meta(),
            spec: Some(core::PodSpec {
                restart_policy: s("Never"),
                ..pod_spec()
            }),
        }),
        ttl_seconds_after_finished: Some(0),
        completion_mode: s("Indexed"),
        suspend: Some(false),
        pod_replacement_policy: s("Failed"),
        managed_by: s("kueue.x-k8s.io/multikueue"),
    }
}

fn metric_target() -> Option<autoscaling_v2::MetricTarget> {
    Some(autoscaling_v2::MetricTarget {
        r#type: s("AverageValue"),
        value: None,
        average_value: Some(quantity("500m")),
        average_utilization: None,
    })
}

fn metric_identifier() -> Option<autoscaling_v2::MetricIdentifier> {
    Some(autoscaling_v2::MetricIdentifier {
        name: s("requests_per_second"),
        selector: selector(),
    })
}

fn metric_value() -> Option<autoscaling_v2::MetricValueStatus> {
    Some(autoscaling_v2::MetricValueStatus {
        value: Some(quantity("12")),
        average_value: Some(quantity("400m")),
        average_utilization: Some(0),
    })
}

fn scaling_rules(window: i32) -> Option<autoscaling_v2::HpaScalingRules> {
    Some(autoscaling_v2::HpaScalingRules {
        stabilization_window_seconds: Some(window),
        select_policy: s("Max"),
        policies: vec![autoscaling_v2::HpaScalingPolicy {
            r#type: s("Percent"),
            value: Some(100),
            period_seconds: Some(15),
        }],
        tolerance: None,
    })
}

fn hpa_v2() -> autoscaling_v2::HorizontalPodAutoscaler {
    autoscaling_v2::HorizontalPodAutoscaler {
        metadata: meta("web", "default"),
        spec: Some(autoscaling_v2::HorizontalPodAutoscalerSpec {
            scale_target_ref: Some(autoscaling_v2::CrossVersionObjectReference {
                kind: s("Deployment"),
                name: s("web"),
                api_version: s("apps/v1"),
            }),
            min_replicas: Some(1),
            max_replicas: Some(10),
            metrics: vec![
                autoscaling_v2::MetricSpec {
                    r#type: s("Resource"),
                    resource: Some(autoscaling_v2::ResourceMetricSource {
                        name: s("cpu"),
                        target: Some(autoscaling_v2::MetricTarget {
                            r#type: s("Utilization"),
                            value: None,
                            average_value: None,
                            average_utilization: Some(80),
                        }),
                    }),
                    ..Default::default()
                },
                autoscaling_v2::MetricSpec {
                    r#type: s("Pods"),
                    pods: Some(autoscaling_v2::PodsMetricSource {
                        metric: metric_identifier(),
                        target: metric_target(),
                    }),
                    ..Default::default()
                },
                autoscaling_v2::MetricSpec {
                    r#type: s("Object"),
                    object: Some(autoscaling_v2::ObjectMetricSource {
                        described_object: Some(autoscaling_v2::CrossVersionObjectReference {
                            kind: s("Ingress"),
                            name: s("main"),
                            api_version: s("networking.k8s.io/v1"),
                        }),
                        target: Some(autoscaling_v2::MetricTarget {
                            r#type: s("Value"),
                            value: Some(quantity("10k")),
                            average_value: None,
                            average_utilization: None,
                        }),
                        metric: metric_identifier(),
                    }),
                    ..Default::default()
                },
                autoscaling_v2::MetricSpec {
                    r#type: s("ContainerResource"),
                    container_resource: Some(autoscaling_v2::ContainerResourceMetricSource {
                        name: s("memory"),
                        target: metric_target(),
                        container: s("web"),
                    }),
                    ..Default::default()
                },
                autoscaling_v2::MetricSpec {
                    r#type: s("External"),
                    external: Some(autoscaling_v2::ExternalMetricSource {
                        metric: metric_identifier(),
                        target: metric_target(),
                    }),
                    ..Default::default()
                },
            ],
            behavior: Some(autoscaling_v2::HorizontalPodAutoscalerBehavior {
                scale_up: scaling_rules(0),
                scale_down: scaling_rules(300),
            }),
        }),
        status: Some(autoscaling_v2::HorizontalPodAutoscalerStatus {
            observed_generation: Some(3),
            last_scale_time: time(T0),
            current_replicas: Some(2),
            desired_replicas: Some(3),
            current_metrics: vec![
                autoscaling_v2::MetricStatus {
                    r#type: s("Resource"),
                    resource: Some(autoscaling_v2::ResourceMetricStatus {
                        name: s("cpu"),
                        current: metric_value(),
                    }),
                    ..Default::default()
                },
                autoscaling_v2::MetricStatus {
                    r#type: s("Pods"),
                    pods: Some(autoscaling_v2::PodsMetricStatus {
                        metric: metric_identifier(),
                        current: metric_value(),
                    }),
                    ..Default::default()
                },
                autoscaling_v2::MetricStatus {
                    r#type: s("Object"),
                    object: Some(autoscaling_v2::ObjectMetricStatus {
                        metric: metric_identifier(),
                        current: metric_value(),
                        described_object: Some(autoscaling_v2::CrossVersionObjectReference {
                            kind: s("Ingress"),
                            name: s("main"),
                            api_version: s("networking.k8s.io/v1"),
                        }),
                    }),
                    ..Default::default()
                },
                autoscaling_v2::MetricStatus {
                    r#type: s("ContainerResource"),
                    container_resource: Some(autoscaling_v2::ContainerResourceMetricStatus {
                        name: s("memory"),
                        current: metric_value(),
                        container: s("web"),
                    }),
                    ..Default::default()
                },
                autoscaling_v2::MetricStatus {
                    r#type: s("External"),
                    external: Some(autoscaling_v2::ExternalMetricStatus {
                        metric: metric_identifier(),
                        current: metric_value(),
                    }),
                    ..Default::default()
                },
            ],
            conditions: vec![autoscaling_v2::HorizontalPodAutoscalerCondition {
                r#type: s("AbleToScale"),
                status: s("True"),
                last_transition_time: time(T0),
                reason: s("ReadyForNewScale"),
                message: s("recommended size matches current size"),
            }],
        }),
    }
}

#[test]
fn every_kind_decodes_to_exactly_the_json_of_its_k8s_openapi_type() {
    let mut kinds = Kinds::default();
    core_kinds(&mut kinds);
    workload_kinds(&mut kinds);
    review_kinds(&mut kinds);
    cluster_kinds(&mut kinds);
    networking_and_storage_kinds(&mut kinds);
    kinds.finish();
}

fn core_kinds(kinds: &mut Kinds) {
    kinds.check::<typed::core::v1::Binding>(
        "v1",
        "Binding",
        &core::Binding {
            metadata: meta("web-0", "default"),
            target: Some(core::ObjectReference {
                kind: s("Node"),
                name: s("node-1"),
                ..Default::default()
            }),
        },
    );
    kinds.check::<typed::core::v1::ConfigMap>(
        "v1",
        "ConfigMap",
        &core::ConfigMap {
            metadata: meta("settings", "default"),
            immutable: Some(false),
            data: string_map(&[("mode", "prod"), ("empty", "")]),
            binary_data: [("blob".to_owned(), vec![0, 1, 2, 255])].into(),
        },
    );
    let json = kinds.check::<typed::core::v1::Endpoints>(
        "v1",
        "Endpoints",
        &core::Endpoints {
            metadata: meta("web", "default"),
            subsets: vec![core::EndpointSubset {
                addresses: vec![core::EndpointAddress {
                    ip: s("10.0.0.7"),
                    hostname: s("web-0"),
                    node_name: s("node-1"),
                    target_ref: object_reference("Pod", "web-0"),
                }],
                not_ready_addresses: vec![core::EndpointAddress {
                    ip: s("10.0.0.8"),
                    ..Default::default()
                }],
                ports: vec![core::EndpointPort {
                    name: s("http"),
                    port: Some(8080),
                    protocol: s("TCP"),
                    app_protocol: s("http"),
                }],
            }],
        },
    );
    assert_eq!(json["subsets"][0]["ports"][0]["port"], json!(8080));
    kinds.check::<typed::core::v1::Event>(
        "v1",
        "Event",
        &core::Event {
            metadata: meta("web.17", "default"),
            involved_object: object_reference("Pod", "web-0"),
            reason: s("Pulled"),
            message: s("image pulled"),
            source: Some(core::EventSource {
                component: s("kubelet"),
                host: s("node-1"),
            }),
            first_timestamp: time(T0),
            last_timestamp: time(T0 + 60),
            count: Some(2),
            r#type: s("Normal"),
            event_time: Some(meta::MicroTime {
                seconds: Some(T0),
                nanos: Some(123_456_000),
            }),
            series: None,
            action: s("Pulling"),
            related: None,
            reporting_component: s("kubelet"),
            reporting_instance: s("node-1"),
        },
    );
    kinds.check::<typed::core::v1::LimitRange>(
        "v1",
        "LimitRange",
        &core::LimitRange {
            metadata: meta("limits", "default"),
            spec: Some(core::LimitRangeSpec {
                limits: vec![core::LimitRangeItem {
                    r#type: s("Container"),
                    max: quantities(&[("cpu", "2"), ("memory", "1Gi")]),
                    min: quantities(&[("cpu", "10m")]),
                    default: quantities(&[("cpu", "500m")]),
                    default_request: quantities(&[("cpu", "100m")]),
                    max_limit_request_ratio: quantities(&[("cpu", "10")]),
                }],
            }),
        },
    );
    kinds.check::<typed::core::v1::Namespace>(
        "v1",
        "Namespace",
        &core::Namespace {
            metadata: meta("team-a", ""),
            spec: Some(core::NamespaceSpec {
                finalizers: strings(&["kubernetes"]),
            }),
            status: Some(core::NamespaceStatus {
                phase: s("Active"),
                conditions: vec![core::NamespaceCondition {
                    r#type: s("NamespaceDeletionDiscoveryFailure"),
                    status: s("False"),
                    last_transition_time: time(T0),
                    reason: s("ResourcesDiscovered"),
                    message: s("All resources successfully discovered"),
                }],
            }),
        },
    );
    let json = kinds.check::<typed::core::v1::Node>("v1", "Node", &node());
    assert_eq!(
        json["status"]["daemonEndpoints"],
        json!({"kubeletEndpoint": {"Port": 10250}})
    );
    assert!(json["spec"].get("unschedulable").is_none(), "{json}");
    let json = kinds.check::<typed::core::v1::PersistentVolume>(
        "v1",
        "PersistentVolume",
        &core::PersistentVolume {
            metadata: meta("pv-1", ""),
            spec: Some(persistent_volume_spec()),
            status: Some(core::PersistentVolumeStatus {
                phase: s("Bound"),
                message: s(""),
                reason: s(""),
                last_phase_transition_time: time(T0),
            }),
        },
    );
    // The volume source is inlined, and a false non-pointer `readOnly` is dropped.
    assert_eq!(
        json["spec"]["csi"]["volumeAttributes"],
        json!({"type": "gp3"})
    );
    assert!(json["spec"]["csi"].get("readOnly").is_none(), "{json}");
    kinds.check::<typed::core::v1::PersistentVolume>(
        "v1",
        "PersistentVolume",
        &core::PersistentVolume {
            metadata: meta("pv-2", ""),
            spec: Some(core::PersistentVolumeSpec {
                persistent_volume_source: Some(core::PersistentVolumeSource {
                    iscsi: Some(core::IscsiPersistentVolumeSource {
                        target_portal: s("10.0.0.1:3260"),
                        iqn: s("iqn.2001-04.com.example:storage"),
                        lun: Some(0),
                        iscsi_interface: s("default"),
                        fs_type: s("ext4"),
                        read_only: Some(true),
                        portals: strings(&["10.0.0.2:3260"]),
                        chap_auth_discovery: Some(false),
                        chap_auth_session: Some(true),
                        secret_ref: secret_reference(),
                        initiator_name: None,
                    }),
                    ..Default::default()
                }),
                ..persistent_volume_spec()
            }),
            status: None,
        },
    );
    kinds.check::<typed::core::v1::PersistentVolumeClaim>(
        "v1",
        "PersistentVolumeClaim",
        &core::PersistentVolumeClaim {
            metadata: meta("data", "default"),
            spec: pvc_spec(),
            status: Some(core::PersistentVolumeClaimStatus {
                phase: s("Bound"),
                access_modes: strings(&["ReadWriteOnce"]),
                capacity: quantities(&[("storage", "10Gi")]),
                conditions: vec![core::PersistentVolumeClaimCondition {
                    r#type: s("Resizing"),
                    status: s("True"),
                    last_probe_time: time(T0),
                    last_transition_time: time(T0),
                    reason: s(""),
                    message: s(""),
                }],
                allocated_resources: quantities(&[("storage", "10Gi")]),
                allocated_resource_statuses: string_map(&[(
                    "storage",
                    "ControllerResizeInProgress",
                )]),
                current_volume_attributes_class_name: None,
                modify_volume_status: None,
            }),
        },
    );
    kinds.check::<typed::core::v1::Pod>(
        "v1",
        "Pod",
        &core::Pod {
            metadata: meta("web-0", "default"),
            spec: Some(pod_spec()),
            status: Some(core::PodStatus {
                observed_generation: Some(0),
                phase: s("Running"),
                conditions: vec![core::PodCondition {
                    r#type: s("Ready"),
                    status: s("True"),
                    last_transition_time: time(T0),
                    ..Default::default()
                }],
                host_ip: s("192.168.1.10"),
                pod_ip: s("10.0.0.7"),
                pod_ips: vec![core::PodIp { ip: s("10.0.0.7") }],
                start_time: time(T0),
                qos_class: s("Burstable"),
                ..Default::default()
            }),
        },
    );
    kinds.check::<typed::core::v1::PodTemplate>(
        "v1",
        "PodTemplate",
        &core::PodTemplate {
            metadata: meta("web", "default"),
            template: pod_template(),
        },
    );
    let json = kinds.check::<typed::core::v1::ReplicationController>(
        "v1",
        "ReplicationController",
        &core::ReplicationController {
            metadata: meta("web", "default"),
            spec: Some(core::ReplicationControllerSpec {
                replicas: Some(0),
                min_ready_seconds: Some(0),
                selector: string_map(&[("app", "web")]),
                template: pod_template(),
            }),
            status: Some(core::ReplicationControllerStatus {
                replicas: Some(0),
                fully_labeled_replicas: Some(0),
                ready_replicas: Some(0),
                available_replicas: Some(0),
                observed_generation: Some(3),
                conditions: vec![core::ReplicationControllerCondition {
                    r#type: s("ReplicaFailure"),
                    status: s("True"),
                    last_transition_time: time(T0),
                    reason: s("FailedCreate"),
                    message: s("quota exceeded"),
                }],
            }),
        },
    );
    assert_eq!(
        json["spec"],
        json!({"replicas": 0, "selector": {"app": "web"}, "template": json["spec"]["template"]})
    );
    assert_eq!(json["status"]["replicas"], json!(0));
    assert!(json["status"].get("readyReplicas").is_none(), "{json}");
    kinds.check::<typed::core::v1::ResourceQuota>(
        "v1",
        "ResourceQuota",
        &core::ResourceQuota {
            metadata: meta("compute", "default"),
            spec: Some(core::ResourceQuotaSpec {
                hard: quantities(&[("pods", "10"), ("requests.cpu", "4")]),
                scopes: strings(&["NotTerminating"]),
                scope_selector: Some(core::ScopeSelector {
                    match_expressions: vec![core::ScopedResourceSelectorRequirement {
                        scope_name: s("PriorityClass"),
                        operator: s("In"),
                        values: strings(&["high"]),
                    }],
                }),
            }),
            status: Some(core::ResourceQuotaStatus {
                hard: quantities(&[("pods", "10")]),
                used: quantities(&[("pods", "3")]),
            }),
        },
    );
    kinds.check::<typed::core::v1::Secret>(
        "v1",
        "Secret",
        &core::Secret {
            metadata: meta("db", "default"),
            immutable: Some(true),
            data: [("password".to_owned(), b"hunter2".to_vec())].into(),
            string_data: string_map(&[("user", "admin")]),
            r#type: s("Opaque"),
        },
    );
    kinds.check::<typed::core::v1::Service>(
        "v1",
        "Service",
        &core::Service {
            metadata: meta("web", "default"),
            spec: Some(core::ServiceSpec {
                ports: vec![core::ServicePort {
                    name: s("http"),
                    protocol: s("TCP"),
                    app_protocol: None,
                    port: Some(80),
                    target_port: string_int("http"),
                    node_port: Some(30080),
                }],
                selector: string_map(&[("app", "web")]),
                cluster_ip: s("10.96.0.10"),
                cluster_ips: strings(&["10.96.0.10"]),
                r#type: s("NodePort"),
                session_affinity: s("None"),
                external_traffic_policy: s("Cluster"),
                health_check_node_port: Some(0),
                publish_not_ready_addresses: Some(false),
                ip_families: strings(&["IPv4"]),
                ip_family_policy: s("SingleStack"),
                internal_traffic_policy: s("Cluster"),
                ..Default::default()
            }),
            status: Some(core::ServiceStatus {
                load_balancer: Some(core::LoadBalancerStatus::default()),
                conditions: vec![],
            }),
        },
    );
    kinds.check::<typed::core::v1::ServiceAccount>(
        "v1",
        "ServiceAccount",
        &core::ServiceAccount {
            metadata: meta("robot", "default"),
            secrets: vec![core::ObjectReference {
                name: s("robot-token"),
                ..Default::default()
            }],
            image_pull_secrets: vec![core::LocalObjectReference {
                name: s("registry"),
            }],
            automount_service_account_token: Some(false),
        },
    );
}

fn node() -> core::Node {
    core::Node {
        metadata: meta("node-1", ""),
        spec: Some(core::NodeSpec {
            pod_cidr: s("10.244.1.0/24"),
            pod_cid_rs: strings(&["10.244.1.0/24", "fd00:10:244:1::/64"]),
            provider_id: s("aws:///eu-west-1a/i-0123"),
            unschedulable: Some(false),
            taints: vec![core::Taint {
                key: s("node.kubernetes.io/not-ready"),
                value: s(""),
                effect: s("NoExecute"),
                time_added: time(T0),
            }],
            config_source: None,
            external_id: s(""),
        }),
        status: Some(core::NodeStatus {
            capacity: quantities(&[("cpu", "4"), ("memory", "16Gi"), ("pods", "110")]),
            allocatable: quantities(&[("cpu", "3800m"), ("memory", "15Gi"), ("pods", "110")]),
            phase: s(""),
            conditions: vec![core::NodeCondition {
                r#type: s("Ready"),
                status: s("True"),
                last_heartbeat_time: time(T0 + 30),
                last_transition_time: time(T0),
                reason: s("KubeletReady"),
                message: s("kubelet is posting ready status"),
            }],
            addresses: vec![
                core::NodeAddress {
                    r#type: s("InternalIP"),
                    address: s("192.168.1.10"),
                },
                core::NodeAddress {
                    r#type: s("Hostname"),
                    address: s("node-1"),
                },
            ],
            daemon_endpoints: Some(core::NodeDaemonEndpoints {
                kubelet_endpoint: Some(core::DaemonEndpoint { port: Some(10250) }),
            }),
            node_info: Some(core::NodeSystemInfo {
                machine_id: s("ec2a"),
                system_uuid: s("ec2a-uuid"),
                boot_id: s("boot"),
                kernel_version: s("6.1.0"),
                os_image: s("Debian GNU/Linux 12 (bookworm)"),
                container_runtime_version: s("containerd://1.7.22"),
                kubelet_version: s("v1.33.1"),
                kube_proxy_version: s("v1.33.1"),
                operating_system: s("linux"),
                architecture: s("amd64"),
                swap: Some(core::NodeSwapStatus { capacity: Some(0) }),
            }),
            images: vec![core::ContainerImage {
                names: strings(&["docker.io/library/nginx:1.27"]),
                size_bytes: Some(72_000_000),
            }],
            volumes_in_use: strings(&["kubernetes.io/csi/ebs.csi.aws.com^vol-0123"]),
            volumes_attached: vec![core::AttachedVolume {
                name: s("kubernetes.io/csi/ebs.csi.aws.com^vol-0123"),
                device_path: s("/dev/xvdba"),
            }],
            config: None,
            runtime_handlers: vec![core::NodeRuntimeHandler {
                name: s("runc"),
                features: Some(core::NodeRuntimeHandlerFeatures {
                    recursive_read_only_mounts: Some(true),
                    user_namespaces: Some(false),
                }),
            }],
            features: Some(core::NodeFeatures {
                supplemental_groups_policy: Some(true),
            }),
            declared_features: vec![],
        }),
    }
}

fn workload_kinds(kinds: &mut Kinds) {
    kinds.check::<typed::apps::v1::ControllerRevision>(
        "apps/v1",
        "ControllerRevision",
        &apps::ControllerRevision {
            metadata: meta("web-7d4b9c", "default"),
            data: Some(RawExtension {
                raw: Some(br#"{"spec":{"template":{"$patch":"replace"}}}"#.to_vec()),
            }),
            revision: Some(1),
        },
    );
    let json = kinds.check::<typed::apps::v1::DaemonSet>(
        "apps/v1",
        "DaemonSet",
        &apps::DaemonSet {
            metadata: meta("agent", "kube-system"),
            spec: Some(apps::DaemonSetSpec {
                selector: selector(),
                template: pod_template(),
                update_strategy: Some(apps::DaemonSetUpdateStrategy {
                    r#type: s("RollingUpdate"),
                    rolling_update: Some(apps::RollingUpdateDaemonSet {
                        max_unavailable: int(1),
                        max_surge: int(0),
                    }),
                }),
                min_ready_seconds: Some(0),
                revision_history_limit: Some(10),
            }),
            status: Some(apps::DaemonSetStatus {
                current_number_scheduled: Some(0),
                number_misscheduled: Some(0),
                desired_number_scheduled: Some(3),
                number_ready: Some(0),
                observed_generation: Some(0),
                updated_number_scheduled: Some(0),
                number_available: Some(0),
                number_unavailable: Some(3),
                collision_count: None,
                conditions: vec![apps::DaemonSetCondition {
                    r#type: s("Progressing"),
                    status: s("True"),
                    last_transition_time: time(T0),
                    reason: s(""),
                    message: s(""),
                }],
            }),
        },
    );
    assert_eq!(
        json["status"]
            .as_object()
            .map(|status| status.keys().cloned().collect::<Vec<_>>()),
        Some(strings(&[
            "conditions",
            "currentNumberScheduled",
            "desiredNumberScheduled",
            "numberMisscheduled",
            "numberReady",
            "numberUnavailable",
        ]))
    );
    kinds.check::<typed::apps::v1::Deployment>("apps/v1", "Deployment", &deployment());
    kinds.check::<typed::apps::v1::ReplicaSet>(
        "apps/v1",
        "ReplicaSet",
        &apps::ReplicaSet {
            metadata: meta("web-7d4b9c", "default"),
            spec: Some(apps::ReplicaSetSpec {
                replicas: Some(2),
                min_ready_seconds: Some(5),
                selector: selector(),
                template: pod_template(),
            }),
            status: Some(apps::ReplicaSetStatus {
                replicas: Some(2),
                fully_labeled_replicas: Some(2),
                ready_replicas: Some(1),
                available_replicas: Some(1),
                terminating_replicas: None,
                observed_generation: Some(3),
                conditions: vec![],
            }),
        },
    );
    let json =
        kinds.check::<typed::apps::v1::StatefulSet>("apps/v1", "StatefulSet", &statefulset());
    assert_eq!(
        json["spec"]["volumeClaimTemplates"][0]["spec"]["resources"],
        json!({"limits": {"storage": "20Gi"}, "requests": {"storage": "10Gi"}})
    );
    assert_eq!(json["spec"]["ordinals"], json!({"start": 0}));
    kinds.check::<typed::autoscaling::v1::HorizontalPodAutoscaler>(
        "autoscaling/v1",
        "HorizontalPodAutoscaler",
        &autoscaling::HorizontalPodAutoscaler {
            metadata: meta("web", "default"),
            spec: Some(autoscaling::HorizontalPodAutoscalerSpec {
                scale_target_ref: Some(autoscaling::CrossVersionObjectReference {
                    kind: s("Deployment"),
                    name: s("web"),
                    api_version: s("apps/v1"),
                }),
                min_replicas: Some(1),
                max_replicas: Some(5),
                target_cpu_utilization_percentage: Some(75),
            }),
            status: Some(autoscaling::HorizontalPodAutoscalerStatus {
                observed_generation: Some(3),
                last_scale_time: time(T0),
                current_replicas: Some(0),
                desired_replicas: Some(0),
                current_cpu_utilization_percentage: Some(0),
            }),
        },
    );
    kinds.check::<typed::autoscaling::v1::Scale>(
        "autoscaling/v1",
        "Scale",
        &autoscaling::Scale {
            metadata: meta("web", "default"),
            spec: Some(autoscaling::ScaleSpec { replicas: Some(0) }),
            status: Some(autoscaling::ScaleStatus {
                replicas: Some(3),
                selector: s("app=web,tier in (backend,frontend)"),
            }),
        },
    );
    let json = kinds.check::<typed::autoscaling::v2::HorizontalPodAutoscaler>(
        "autoscaling/v2",
        "HorizontalPodAutoscaler",
        &hpa_v2(),
    );
    assert_eq!(
        json["spec"]["behavior"]["scaleUp"]["stabilizationWindowSeconds"],
        json!(0)
    );
    kinds.check::<typed::batch::v1::CronJob>("batch/v1", "CronJob", &cronjob());
    let json = kinds.check::<typed::batch::v1::Job>(
        "batch/v1",
        "Job",
        &batch::Job {
            metadata: meta("backup", "default"),
            spec: Some(job_spec()),
            status: Some(batch::JobStatus {
                conditions: vec![batch::JobCondition {
                    r#type: s("Complete"),
                    status: s("True"),
                    last_probe_time: time(T0),
                    last_transition_time: time(T0),
                    reason: s(""),
                    message: s(""),
                }],
                start_time: time(T0),
                completion_time: time(T0 + 120),
                active: Some(0),
                succeeded: Some(4),
                failed: Some(0),
                terminating: Some(0),
                completed_indexes: s("0-3"),
                failed_indexes: s(""),
                uncounted_terminated_pods: Some(batch::UncountedTerminatedPods::default()),
                ready: Some(0),
            }),
        },
    );
    assert_eq!(json["spec"]["backoffLimit"], json!(0));
    assert!(json["status"].get("active").is_none(), "{json}");
    assert_eq!(json["status"]["ready"], json!(0));
    kinds.check::<typed::policy::v1::Eviction>(
        "policy/v1",
        "Eviction",
        &policy::Eviction {
            metadata: meta("web-0", "default"),
            delete_options: Some(meta::DeleteOptions {
                grace_period_seconds: Some(0),
                preconditions: Some(meta::Preconditions {
                    uid: s("6b1f"),
                    resource_version: s("42"),
                }),
                dry_run: strings(&["All"]),
                ..Default::default()
            }),
        },
    );
    // The policy/v1beta1 Eviction (same message) keeps its apiVersion.
    let v1beta1 = policy::Eviction {
        metadata: object_meta("web-0"),
        delete_options: None,
    };
    let json = decoded("policy/v1beta1", "Eviction", &v1beta1);
    assert_eq!(
        json,
        json!({"apiVersion": "policy/v1beta1", "kind": "Eviction", "metadata": {"name": "web-0"}})
    );
    kinds.seen.insert((Some("policy/v1beta1"), "Eviction"));
    kinds.check::<typed::policy::v1::PodDisruptionBudget>(
        "policy/v1",
        "PodDisruptionBudget",
        &policy::PodDisruptionBudget {
            metadata: meta("web", "default"),
            spec: Some(policy::PodDisruptionBudgetSpec {
                min_available: string_int("50%"),
                selector: selector(),
                max_unavailable: None,
                unhealthy_pod_eviction_policy: s("AlwaysAllow"),
            }),
            status: Some(policy::PodDisruptionBudgetStatus {
                observed_generation: Some(3),
                disrupted_pods: [(
                    "web-0".to_owned(),
                    meta::Time {
                        seconds: Some(T0),
                        nanos: Some(0),
                    },
                )]
                .into(),
                disruptions_allowed: Some(0),
                current_healthy: Some(2),
                desired_healthy: Some(2),
                expected_pods: Some(3),
                conditions: vec![condition("DisruptionAllowed")],
            }),
        },
    );
}

fn statefulset() -> apps::StatefulSet {
    apps::StatefulSet {
        metadata: meta("db", "default"),
        spec: Some(apps::StatefulSetSpec {
            replicas: Some(3),
            selector: selector(),
            template: pod_template(),
            volume_claim_templates: vec![core::PersistentVolumeClaim {
                metadata: Some(meta::ObjectMeta {
                    name: s("data"),
                    creation_timestamp: Some(meta::Time::default()),
                    ..Default::default()
                }),
                spec: pvc_spec(),
                status: Some(core::PersistentVolumeClaimStatus {
                    phase: s("Pending"),
                    ..Default::default()
                }),
            }],
            service_name: s("db"),
            pod_management_policy: s("Parallel"),
            update_strategy: Some(apps::StatefulSetUpdateStrategy {
                r#type: s("RollingUpdate"),
                rolling_update: Some(apps::RollingUpdateStatefulSetStrategy {
                    partition: Some(0),
                    max_unavailable: int(1),
                }),
            }),
            revision_history_limit: Some(10),
            min_ready_seconds: Some(0),
            persistent_volume_claim_retention_policy: Some(
                apps::StatefulSetPersistentVolumeClaimRetentionPolicy {
                    when_deleted: s("Retain"),
                    when_scaled: s("Delete"),
                },
            ),
            ordinals: Some(apps::StatefulSetOrdinals { start: Some(0) }),
        }),
        status: Some(apps::StatefulSetStatus {
            observed_generation: Some(3),
            replicas: Some(3),
            ready_replicas: Some(2),
            current_replicas: Some(3),
            updated_replicas: Some(0),
            current_revision: s("db-5d8f"),
            update_revision: s("db-5d8f"),
            collision_count: Some(0),
            conditions: vec![apps::StatefulSetCondition {
                r#type: s("Available"),
                status: s("False"),
                last_transition_time: time(T0),
                reason: s(""),
                message: s(""),
            }],
            available_replicas: Some(2),
        }),
    }
}

fn cronjob() -> batch::CronJob {
    batch::CronJob {
        metadata: meta("backup", "default"),
        spec: Some(batch::CronJobSpec {
            schedule: s("*/5 * * * *"),
            time_zone: s("Europe/Berlin"),
            starting_deadline_seconds: Some(60),
            concurrency_policy: s("Forbid"),
            suspend: Some(false),
            job_template: Some(batch::JobTemplateSpec {
                metadata: template_meta(),
                spec: Some(job_spec()),
            }),
            successful_jobs_history_limit: Some(3),
            failed_jobs_history_limit: Some(0),
        }),
        status: Some(batch::CronJobStatus {
            active: vec![core::ObjectReference {
                kind: s("Job"),
                namespace: s("default"),
                name: s("backup-28597680"),
                uid: s("aa11"),
                api_version: s("batch/v1"),
                resource_version: s("99"),
                field_path: s(""),
            }],
            last_schedule_time: time(T0),
            last_successful_time: time(T0 - 300),
        }),
    }
}

fn review_kinds(kinds: &mut Kinds) {
    let user_extra = |items: &[&str]| {
        [(
            "scopes".to_owned(),
            authn::ExtraValue {
                items: strings(items),
            },
        )]
        .into()
    };
    kinds.check::<typed::authentication::v1::SelfSubjectReview>(
        "authentication.k8s.io/v1",
        "SelfSubjectReview",
        &authn::SelfSubjectReview {
            metadata: Some(meta::ObjectMeta::default()),
            status: Some(authn::SelfSubjectReviewStatus {
                user_info: Some(authn::UserInfo {
                    username: s("alice"),
                    uid: s("1"),
                    groups: strings(&["dev", "system:authenticated"]),
                    extra: user_extra(&["read", "write"]),
                }),
            }),
        },
    );
    kinds.check::<typed::authentication::v1::TokenRequest>(
        "authentication.k8s.io/v1",
        "TokenRequest",
        &authn::TokenRequest {
            metadata: meta("robot", "default"),
            spec: Some(authn::TokenRequestSpec {
                audiences: strings(&["https://kubernetes.default.svc"]),
                expiration_seconds: Some(3600),
                bound_object_ref: Some(authn::BoundObjectReference {
                    kind: s("Pod"),
                    api_version: s("v1"),
                    name: s("web-0"),
                    u_id: s("6b1f"),
                }),
            }),
            status: Some(authn::TokenRequestStatus {
                token: s("ey.x"),
                expiration_timestamp: time(T0 + 3600),
            }),
        },
    );
    kinds.check::<typed::authentication::v1::TokenReview>(
        "authentication.k8s.io/v1",
        "TokenReview",
        &authn::TokenReview {
            metadata: Some(meta::ObjectMeta::default()),
            spec: Some(authn::TokenReviewSpec {
                token: s("ey.x"),
                audiences: strings(&["api"]),
            }),
            status: Some(authn::TokenReviewStatus {
                authenticated: Some(false),
                user: Some(authn::UserInfo::default()),
                audiences: vec![],
                error: s("token expired"),
            }),
        },
    );
    let sar_spec = || {
        Some(authz::SubjectAccessReviewSpec {
            resource_attributes: Some(authz::ResourceAttributes {
                namespace: s("default"),
                verb: s("list"),
                group: s("apps"),
                version: s("v1"),
                resource: s("deployments"),
                subresource: s(""),
                name: s(""),
                field_selector: Some(authz::FieldSelectorAttributes {
                    raw_selector: s("metadata.name=web"),
                    requirements: vec![],
                }),
                label_selector: Some(authz::LabelSelectorAttributes {
                    raw_selector: s(""),
                    requirements: vec![meta::LabelSelectorRequirement {
                        key: s("app"),
                        operator: s("In"),
                        values: strings(&["web"]),
                    }],
                }),
            }),
            non_resource_attributes: None,
            user: s("alice"),
            groups: strings(&["dev"]),
            extra: [(
                "scopes".to_owned(),
                authz::ExtraValue {
                    items: strings(&["read"]),
                },
            )]
            .into(),
            uid: s("1"),
        })
    };
    let sar_status = || {
        Some(authz::SubjectAccessReviewStatus {
            allowed: Some(false),
            denied: Some(true),
            reason: s("no RBAC policy matched"),
            evaluation_error: s(""),
        })
    };
    kinds.check::<typed::authorization::v1::LocalSubjectAccessReview>(
        "authorization.k8s.io/v1",
        "LocalSubjectAccessReview",
        &authz::LocalSubjectAccessReview {
            metadata: Some(meta::ObjectMeta {
                namespace: s("default"),
                ..Default::default()
            }),
            spec: sar_spec(),
            status: sar_status(),
        },
    );
    kinds.check::<typed::authorization::v1::SelfSubjectAccessReview>(
        "authorization.k8s.io/v1",
        "SelfSubjectAccessReview",
        &authz::SelfSubjectAccessReview {
            metadata: Some(meta::ObjectMeta::default()),
            spec: Some(authz::SelfSubjectAccessReviewSpec {
                resource_attributes: None,
                non_resource_attributes: Some(authz::NonResourceAttributes {
                    path: s("/healthz"),
                    verb: s("get"),
                }),
            }),
            status: Some(authz::SubjectAccessReviewStatus {
                allowed: Some(true),
                denied: Some(false),
                reason: s(""),
                evaluation_error: s(""),
            }),
        },
    );
    kinds.check::<typed::authorization::v1::SelfSubjectRulesReview>(
        "authorization.k8s.io/v1",
        "SelfSubjectRulesReview",
        &authz::SelfSubjectRulesReview {
            metadata: Some(meta::ObjectMeta::default()),
            spec: Some(authz::SelfSubjectRulesReviewSpec {
                namespace: s("default"),
            }),
            status: Some(authz::SubjectRulesReviewStatus {
                resource_rules: vec![authz::ResourceRule {
                    verbs: strings(&["get"]),
                    api_groups: strings(&[""]),
                    resources: strings(&["pods"]),
                    resource_names: vec![],
                }],
                non_resource_rules: vec![authz::NonResourceRule {
                    verbs: strings(&["get"]),
                    non_resource_ur_ls: strings(&["/api", "/api/*"]),
                }],
                incomplete: Some(false),
                evaluation_error: s(""),
            }),
        },
    );
    kinds.check::<typed::authorization::v1::SubjectAccessReview>(
        "authorization.k8s.io/v1",
        "SubjectAccessReview",
        &authz::SubjectAccessReview {
            metadata: Some(meta::ObjectMeta::default()),
            spec: sar_spec(),
            status: sar_status(),
        },
    );
    let json = kinds.check::<typed::certificates::v1::CertificateSigningRequest>(
        "certificates.k8s.io/v1",
        "CertificateSigningRequest",
        &certificates::CertificateSigningRequest {
            metadata: meta("alice", ""),
            spec: Some(certificates::CertificateSigningRequestSpec {
                request: Some(b"-----BEGIN CERTIFICATE REQUEST-----".to_vec()),
                signer_name: s("kubernetes.io/kube-apiserver-client"),
                expiration_seconds: Some(86_400),
                usages: strings(&["client auth", "digital signature"]),
                username: s("alice"),
                uid: s("1"),
                groups: strings(&["system:authenticated"]),
                extra: [(
                    "scopes".to_owned(),
                    certificates::ExtraValue {
                        items: strings(&["a", "b"]),
                    },
                )]
                .into(),
            }),
            status: Some(certificates::CertificateSigningRequestStatus {
                conditions: vec![certificates::CertificateSigningRequestCondition {
                    r#type: s("Approved"),
                    status: s("True"),
                    reason: s("KubectlApprove"),
                    message: s("approved by kubectl"),
                    last_update_time: time(T0),
                    last_transition_time: time(T0),
                }],
                certificate: Some(b"-----BEGIN CERTIFICATE-----".to_vec()),
            }),
        },
    );
    assert_eq!(json["spec"]["extra"], json!({"scopes": ["a", "b"]}));
    assert_eq!(
        json["spec"]["request"],
        json!("LS0tLS1CRUdJTiBDRVJUSUZJQ0FURSBSRVFVRVNULS0tLS0=")
    );
    kinds.check::<k8s_openapi::apimachinery::pkg::apis::meta::v1::DeleteOptions>(
        "meta.k8s.io/v1",
        "DeleteOptions",
        &meta::DeleteOptions {
            grace_period_seconds: Some(30),
            preconditions: Some(meta::Preconditions {
                uid: s("6b1f"),
                resource_version: s(""),
            }),
            orphan_dependents: None,
            propagation_policy: s("Foreground"),
            dry_run: vec![],
            ignore_store_read_error_with_cluster_breaking_potential: Some(false),
        },
    );
    kinds
        .seen
        .remove(&(Some("meta.k8s.io/v1"), "DeleteOptions"));
    kinds.seen.insert((None, "DeleteOptions"));
}

fn cluster_kinds(kinds: &mut Kinds) {
    let json = kinds.check::<typed::admissionregistration::v1::MutatingWebhookConfiguration>(
        "admissionregistration.k8s.io/v1",
        "MutatingWebhookConfiguration",
        &admission::MutatingWebhookConfiguration {
            metadata: meta("inject", ""),
            webhooks: vec![admission::MutatingWebhook {
                name: s("inject.example.com"),
                client_config: webhook_client_config(),
                rules: vec![rule_with_operations()],
                failure_policy: s("Fail"),
                match_policy: s("Equivalent"),
                namespace_selector: selector(),
                object_selector: Some(meta::LabelSelector::default()),
                side_effects: s("None"),
                timeout_seconds: Some(10),
                admission_review_versions: strings(&["v1"]),
                reinvocation_policy: s("IfNeeded"),
                match_conditions: match_conditions(),
            }],
        },
    );
    // `Rule` is inlined into `RuleWithOperations`.
    assert_eq!(
        json["webhooks"][0]["rules"][0],
        json!({
            "operations": ["CREATE", "UPDATE"],
            "apiGroups": ["apps"],
            "apiVersions": ["v1"],
            "resources": ["deployments", "deployments/scale"],
            "scope": "Namespaced",
        })
    );
    let json = kinds.check::<typed::admissionregistration::v1::ValidatingAdmissionPolicy>(
        "admissionregistration.k8s.io/v1",
        "ValidatingAdmissionPolicy",
        &admission::ValidatingAdmissionPolicy {
            metadata: meta("replica-limit", ""),
            spec: Some(admission::ValidatingAdmissionPolicySpec {
                param_kind: Some(admission::ParamKind {
                    api_version: s("v1"),
                    kind: s("ConfigMap"),
                }),
                match_constraints: match_resources(),
                validations: vec![admission::Validation {
                    expression: s("object.spec.replicas <= params.data.max"),
                    message: s(""),
                    reason: s("Invalid"),
                    message_expression: s("'too many: ' + string(object.spec.replicas)"),
                }],
                failure_policy: s("Fail"),
                audit_annotations: vec![admission::AuditAnnotation {
                    key: s("replicas"),
                    value_expression: s("string(object.spec.replicas)"),
                }],
                match_conditions: match_conditions(),
                variables: vec![admission::Variable {
                    name: s("max"),
                    expression: s("int(params.data.max)"),
                }],
            }),
            status: Some(admission::ValidatingAdmissionPolicyStatus {
                observed_generation: Some(3),
                type_checking: Some(admission::TypeChecking {
                    expression_warnings: vec![admission::ExpressionWarning {
                        field_ref: s("spec.validations[0].expression"),
                        warning: s("no such key: max"),
                    }],
                }),
                conditions: vec![condition("Ready")],
            }),
        },
    );
    // `RuleWithOperations` is inlined into `NamedRuleWithOperations`, and `Rule` into that.
    assert_eq!(
        json["spec"]["matchConstraints"]["resourceRules"][0]["resourceNames"],
        json!(["web"])
    );
    assert_eq!(
        json["spec"]["matchConstraints"]["resourceRules"][0]["scope"],
        json!("Namespaced")
    );
    kinds.check::<typed::admissionregistration::v1::ValidatingAdmissionPolicyBinding>(
        "admissionregistration.k8s.io/v1",
        "ValidatingAdmissionPolicyBinding",
        &admission::ValidatingAdmissionPolicyBinding {
            metadata: meta("replica-limit", ""),
            spec: Some(admission::ValidatingAdmissionPolicyBindingSpec {
                policy_name: s("replica-limit"),
                param_ref: Some(admission::ParamRef {
                    name: s("limits"),
                    namespace: s("default"),
                    selector: None,
                    parameter_not_found_action: s("Deny"),
                }),
                match_resources: match_resources(),
                validation_actions: strings(&["Deny", "Audit"]),
            }),
        },
    );
    kinds.check::<typed::admissionregistration::v1::ValidatingWebhookConfiguration>(
        "admissionregistration.k8s.io/v1",
        "ValidatingWebhookConfiguration",
        &admission::ValidatingWebhookConfiguration {
            metadata: meta("policy", ""),
            webhooks: vec![admission::ValidatingWebhook {
                name: s("policy.example.com"),
                client_config: Some(admission::WebhookClientConfig {
                    url: s("https://policy.example.com/validate"),
                    service: None,
                    ca_bundle: None,
                }),
                rules: vec![rule_with_operations()],
                failure_policy: s("Ignore"),
                match_policy: s("Exact"),
                namespace_selector: Some(meta::LabelSelector::default()),
                object_selector: selector(),
                side_effects: s("NoneOnDryRun"),
                timeout_seconds: Some(5),
                admission_review_versions: strings(&["v1", "v1beta1"]),
                match_conditions: vec![],
            }],
        },
    );
    kinds.check::<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition>(
        "apiextensions.k8s.io/v1",
        "CustomResourceDefinition",
        &custom_resource_definition(),
    );
    kinds.check::<k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService>(
        "apiregistration.k8s.io/v1",
        "APIService",
        &apiregistration::APIService {
            metadata: meta("v1beta1.metrics.k8s.io", ""),
            spec: Some(apiregistration::APIServiceSpec {
                service: Some(apiregistration::ServiceReference {
                    namespace: s("kube-system"),
                    name: s("metrics-server"),
                    port: Some(443),
                }),
                group: s("metrics.k8s.io"),
                version: s("v1beta1"),
                insecure_skip_tls_verify: Some(false),
                ca_bundle: Some(b"-----BEGIN CERTIFICATE-----".to_vec()),
                group_priority_minimum: Some(100),
                version_priority: Some(0),
            }),
            status: Some(apiregistration::APIServiceStatus {
                conditions: vec![apiregistration::APIServiceCondition {
                    r#type: s("Available"),
                    status: s("True"),
                    last_transition_time: time(T0),
                    reason: s("Passed"),
                    message: s("all checks passed"),
                }],
            }),
        },
    );
    kinds.check::<typed::coordination::v1::Lease>(
        "coordination.k8s.io/v1",
        "Lease",
        &coordination::Lease {
            metadata: meta("kube-scheduler", "kube-system"),
            spec: Some(coordination::LeaseSpec {
                holder_identity: s("node-1_6b1f"),
                lease_duration_seconds: Some(15),
                acquire_time: Some(meta::MicroTime {
                    seconds: Some(T0),
                    nanos: Some(500_000),
                }),
                renew_time: Some(meta::MicroTime {
                    seconds: Some(T0 + 10),
                    nanos: Some(0),
                }),
                lease_transitions: Some(0),
                strategy: None,
                preferred_holder: None,
            }),
        },
    );
    kinds.check::<typed::events::v1::Event>(
        "events.k8s.io/v1",
        "Event",
        &events::Event {
            metadata: meta("web.18", "default"),
            event_time: Some(meta::MicroTime {
                seconds: Some(T0),
                nanos: Some(1_000),
            }),
            series: Some(events::EventSeries {
                count: Some(3),
                last_observed_time: Some(meta::MicroTime {
                    seconds: Some(T0 + 60),
                    nanos: Some(0),
                }),
            }),
            reporting_controller: s("kubelet"),
            reporting_instance: s("node-1"),
            action: s("Pulling"),
            reason: s("Pulled"),
            regarding: object_reference("Pod", "web-0"),
            related: None,
            note: s("image pulled"),
            r#type: s("Normal"),
            deprecated_source: None,
            deprecated_first_timestamp: None,
            deprecated_last_timestamp: None,
            deprecated_count: Some(0),
        },
    );
    let subject = |kind: &str| flowcontrol::Subject {
        kind: s(kind),
        user: (kind == "User").then(|| flowcontrol::UserSubject { name: s("alice") }),
        group: (kind == "Group").then(|| flowcontrol::GroupSubject {
            name: s("system:nodes"),
        }),
        service_account: (kind == "ServiceAccount").then(|| flowcontrol::ServiceAccountSubject {
            namespace: s("kube-system"),
            name: s("*"),
        }),
    };
    let json = kinds.check::<typed::flowcontrol::v1::FlowSchema>(
        "flowcontrol.apiserver.k8s.io/v1",
        "FlowSchema",
        &flowcontrol::FlowSchema {
            metadata: meta("system-nodes", ""),
            spec: Some(flowcontrol::FlowSchemaSpec {
                priority_level_configuration: Some(
                    flowcontrol::PriorityLevelConfigurationReference { name: s("system") },
                ),
                matching_precedence: Some(500),
                distinguisher_method: Some(flowcontrol::FlowDistinguisherMethod {
                    r#type: s("ByUser"),
                }),
                rules: vec![flowcontrol::PolicyRulesWithSubjects {
                    subjects: vec![subject("User"), subject("Group"), subject("ServiceAccount")],
                    resource_rules: vec![flowcontrol::ResourcePolicyRule {
                        verbs: strings(&["*"]),
                        api_groups: strings(&["*"]),
                        resources: strings(&["*"]),
                        cluster_scope: Some(false),
                        namespaces: strings(&["*"]),
                    }],
                    non_resource_rules: vec![flowcontrol::NonResourcePolicyRule {
                        verbs: strings(&["*"]),
                        non_resource_ur_ls: strings(&["*"]),
                    }],
                }],
            }),
            status: Some(flowcontrol::FlowSchemaStatus {
                conditions: vec![flowcontrol::FlowSchemaCondition {
                    r#type: s("Dangling"),
                    status: s("False"),
                    last_transition_time: time(T0),
                    reason: s("Found"),
                    message: s(""),
                }],
            }),
        },
    );
    assert!(
        json["spec"]["rules"][0]["resourceRules"][0]
            .get("clusterScope")
            .is_none(),
        "{json}"
    );
    kinds.check::<typed::flowcontrol::v1::PriorityLevelConfiguration>(
        "flowcontrol.apiserver.k8s.io/v1",
        "PriorityLevelConfiguration",
        &flowcontrol::PriorityLevelConfiguration {
            metadata: meta("workload-low", ""),
            spec: Some(flowcontrol::PriorityLevelConfigurationSpec {
                r#type: s("Limited"),
                limited: Some(flowcontrol::LimitedPriorityLevelConfiguration {
                    nominal_concurrency_shares: Some(100),
                    limit_response: Some(flowcontrol::LimitResponse {
                        r#type: s("Queue"),
                        queuing: Some(flowcontrol::QueuingConfiguration {
                            queues: Some(128),
                            hand_size: Some(6),
                            queue_length_limit: Some(50),
                        }),
                    }),
                    lendable_percent: Some(90),
                    borrowing_limit_percent: None,
                }),
                exempt: None,
            }),
            status: Some(flowcontrol::PriorityLevelConfigurationStatus {
                conditions: vec![flowcontrol::PriorityLevelConfigurationCondition {
                    r#type: s("ConcurrencyShared"),
                    status: s("True"),
                    last_transition_time: time(T0),
                    reason: s(""),
                    message: s(""),
                }],
            }),
        },
    );
    kinds.check::<typed::flowcontrol::v1::PriorityLevelConfiguration>(
        "flowcontrol.apiserver.k8s.io/v1",
        "PriorityLevelConfiguration",
        &flowcontrol::PriorityLevelConfiguration {
            metadata: meta("exempt", ""),
            spec: Some(flowcontrol::PriorityLevelConfigurationSpec {
                r#type: s("Exempt"),
                limited: None,
                exempt: Some(flowcontrol::ExemptPriorityLevelConfiguration {
                    nominal_concurrency_shares: Some(0),
                    lendable_percent: Some(0),
                }),
            }),
            status: None,
        },
    );
    kinds.check::<typed::node::v1::RuntimeClass>(
        "node.k8s.io/v1",
        "RuntimeClass",
        &node::RuntimeClass {
            metadata: meta("gvisor", ""),
            handler: s("runsc"),
            overhead: Some(node::Overhead {
                pod_fixed: quantities(&[("cpu", "250m"), ("memory", "120Mi")]),
            }),
            scheduling: Some(node::Scheduling {
                node_selector: string_map(&[("runtime", "gvisor")]),
                tolerations: vec![core::Toleration {
                    key: s("runtime"),
                    operator: s("Equal"),
                    value: s("gvisor"),
                    effect: s("NoSchedule"),
                    toleration_seconds: None,
                }],
            }),
        },
    );
    let json = kinds.check::<typed::rbac::v1::ClusterRole>(
        "rbac.authorization.k8s.io/v1",
        "ClusterRole",
        &rbac::ClusterRole {
            metadata: meta("reader", ""),
            rules: vec![rbac::PolicyRule {
                verbs: strings(&["get"]),
                non_resource_ur_ls: strings(&["/healthz"]),
                ..Default::default()
            }],
            aggregation_rule: Some(rbac::AggregationRule {
                cluster_role_selectors: vec![selector().unwrap_or_default()],
            }),
        },
    );
    assert_eq!(json["rules"][0]["nonResourceURLs"], json!(["/healthz"]));
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
    kinds.check::<typed::rbac::v1::ClusterRoleBinding>(
        "rbac.authorization.k8s.io/v1",
        "ClusterRoleBinding",
        &rbac::ClusterRoleBinding {
            metadata: meta("reader", ""),
            subjects: subjects.clone(),
            role_ref: role_ref("ClusterRole"),
        },
    );
    kinds.check::<typed::rbac::v1::Role>(
        "rbac.authorization.k8s.io/v1",
        "Role",
        &rbac::Role {
            metadata: meta("reader", "default"),
            rules: vec![rbac::PolicyRule {
                verbs: strings(&["get", "list"]),
                api_groups: strings(&[""]),
                resources: strings(&["configmaps"]),
                resource_names: strings(&["settings"]),
                non_resource_ur_ls: vec![],
            }],
        },
    );
    kinds.check::<typed::rbac::v1::RoleBinding>(
        "rbac.authorization.k8s.io/v1",
        "RoleBinding",
        &rbac::RoleBinding {
            metadata: meta("reader", "default"),
            subjects,
            role_ref: role_ref("Role"),
        },
    );
    let json = kinds.check::<typed::scheduling::v1::PriorityClass>(
        "scheduling.k8s.io/v1",
        "PriorityClass",
        &scheduling::PriorityClass {
            metadata: meta("high", ""),
            value: Some(0),
            global_default: Some(false),
            description: s("for important pods"),
            preemption_policy: s("PreemptLowerPriority"),
        },
    );
    assert_eq!(json["value"], json!(0));
    assert!(json.get("globalDefault").is_none(), "{json}");
}

fn custom_resource_definition() -> apiext::CustomResourceDefinition {
    let string_schema = apiext::JsonSchemaProps {
        r#type: s("string"),
        ..Default::default()
    };
    apiext::CustomResourceDefinition {
        metadata: meta("widgets.example.com", ""),
        spec: Some(apiext::CustomResourceDefinitionSpec {
            group: s("example.com"),
            names: Some(apiext::CustomResourceDefinitionNames {
                plural: s("widgets"),
                singular: s("widget"),
                short_names: strings(&["wg"]),
                kind: s("Widget"),
                list_kind: s("WidgetList"),
                categories: strings(&["all"]),
            }),
            scope: s("Namespaced"),
            versions: vec![apiext::CustomResourceDefinitionVersion {
                name: s("v1"),
                served: Some(true),
                storage: Some(true),
                deprecated: Some(false),
                deprecation_warning: None,
                schema: Some(apiext::CustomResourceValidation {
                    open_apiv3_schema: Some(apiext::JsonSchemaProps {
                        r#type: s("object"),
                        properties: [
                            (
                                "spec".to_owned(),
                                apiext::JsonSchemaProps {
                                    r#type: s("object"),
                                    properties: [("size".to_owned(), string_schema)].into(),
                                    required: strings(&["size"]),
                                    ..Default::default()
                                },
                            ),
                            (
                                "status".to_owned(),
                                apiext::JsonSchemaProps {
                                    r#type: s("object"),
                                    x_kubernetes_preserve_unknown_fields: Some(true),
                                    ..Default::default()
                                },
                            ),
                        ]
                        .into(),
                        ..Default::default()
                    }),
                }),
                subresources: Some(apiext::CustomResourceSubresources {
                    status: Some(apiext::CustomResourceSubresourceStatus {}),
                    scale: None,
                }),
                additional_printer_columns: vec![],
                selectable_fields: vec![],
            }],
            conversion: None,
            preserve_unknown_fields: Some(false),
        }),
        status: None,
    }
}

fn networking_and_storage_kinds(kinds: &mut Kinds) {
    let json = kinds.check::<typed::discovery::v1::EndpointSlice>(
        "discovery.k8s.io/v1",
        "EndpointSlice",
        &discovery::EndpointSlice {
            metadata: meta("web-abc12", "default"),
            address_type: s("IPv4"),
            endpoints: vec![discovery::Endpoint {
                addresses: strings(&["10.0.0.7"]),
                conditions: Some(discovery::EndpointConditions {
                    ready: Some(false),
                    serving: Some(true),
                    terminating: Some(false),
                }),
                hostname: s("web-0"),
                target_ref: object_reference("Pod", "web-0"),
                deprecated_topology: BTreeMap::new(),
                node_name: s("node-1"),
                zone: s("eu-west-1a"),
                hints: Some(discovery::EndpointHints {
                    for_zones: vec![discovery::ForZone {
                        name: s("eu-west-1a"),
                    }],
                    for_nodes: vec![],
                }),
            }],
            ports: vec![discovery::EndpointPort {
                name: s("http"),
                protocol: s("TCP"),
                port: Some(8080),
                app_protocol: None,
            }],
        },
    );
    assert_eq!(
        json["endpoints"][0]["conditions"],
        json!({"ready": false, "serving": true, "terminating": false})
    );
    kinds.check::<typed::networking::v1::IPAddress>(
        "networking.k8s.io/v1",
        "IPAddress",
        &networking::IPAddress {
            metadata: meta("10.96.0.10", ""),
            spec: Some(networking::IPAddressSpec {
                parent_ref: Some(networking::ParentReference {
                    group: s(""),
                    resource: s("services"),
                    namespace: s("kube-system"),
                    name: s("kube-dns"),
                }),
            }),
        },
    );
    let backend = |port: networking::ServiceBackendPort| {
        Some(networking::IngressBackend {
            service: Some(networking::IngressServiceBackend {
                name: s("web"),
                port: Some(port),
            }),
            resource: None,
        })
    };
    let json = kinds.check::<typed::networking::v1::Ingress>(
        "networking.k8s.io/v1",
        "Ingress",
        &networking::Ingress {
            metadata: meta("web", "default"),
            spec: Some(networking::IngressSpec {
                ingress_class_name: s("nginx"),
                default_backend: Some(networking::IngressBackend {
                    service: None,
                    resource: Some(core::TypedLocalObjectReference {
                        api_group: s("storage.example.com"),
                        kind: s("Bucket"),
                        name: s("static"),
                    }),
                }),
                tls: vec![networking::IngressTls {
                    hosts: strings(&["web.example.com"]),
                    secret_name: s("web-tls"),
                }],
                rules: vec![networking::IngressRule {
                    host: s("web.example.com"),
                    ingress_rule_value: Some(networking::IngressRuleValue {
                        http: Some(networking::HttpIngressRuleValue {
                            paths: vec![
                                networking::HttpIngressPath {
                                    path: s("/"),
                                    path_type: s("Prefix"),
                                    backend: backend(networking::ServiceBackendPort {
                                        name: s("http"),
                                        number: Some(0),
                                    }),
                                },
                                networking::HttpIngressPath {
                                    path: s("/api"),
                                    path_type: s("Exact"),
                                    backend: backend(networking::ServiceBackendPort {
                                        name: s(""),
                                        number: Some(8080),
                                    }),
                                },
                            ],
                        }),
                    }),
                }],
            }),
            status: Some(networking::IngressStatus {
                load_balancer: Some(networking::IngressLoadBalancerStatus {
                    ingress: vec![networking::IngressLoadBalancerIngress {
                        ip: s("203.0.113.7"),
                        hostname: s(""),
                        ports: vec![networking::IngressPortStatus {
                            port: Some(443),
                            protocol: s("TCP"),
                            error: None,
                        }],
                    }],
                }),
            }),
        },
    );
    // `IngressRuleValue` is inlined; a named port's zero number is dropped.
    assert_eq!(
        json["spec"]["rules"][0]["http"]["paths"][0]["backend"],
        json!({"service": {"name": "web", "port": {"name": "http"}}})
    );
    assert_eq!(
        json["spec"]["rules"][0]["http"]["paths"][1]["backend"]["service"]["port"],
        json!({"number": 8080})
    );
    kinds.check::<typed::networking::v1::IngressClass>(
        "networking.k8s.io/v1",
        "IngressClass",
        &networking::IngressClass {
            metadata: meta("nginx", ""),
            spec: Some(networking::IngressClassSpec {
                controller: s("k8s.io/ingress-nginx"),
                parameters: Some(networking::IngressClassParametersReference {
                    a_pi_group: s("k8s.example.com"),
                    kind: s("IngressParameters"),
                    name: s("external-lb"),
                    scope: s("Namespace"),
                    namespace: s("ingress"),
                }),
            }),
        },
    );
    let peer = networking::NetworkPolicyPeer {
        pod_selector: selector(),
        namespace_selector: Some(meta::LabelSelector::default()),
        ip_block: None,
    };
    kinds.check::<typed::networking::v1::NetworkPolicy>(
        "networking.k8s.io/v1",
        "NetworkPolicy",
        &networking::NetworkPolicy {
            metadata: meta("web", "default"),
            spec: Some(networking::NetworkPolicySpec {
                pod_selector: Some(meta::LabelSelector::default()),
                ingress: vec![networking::NetworkPolicyIngressRule {
                    ports: vec![networking::NetworkPolicyPort {
                        protocol: s("TCP"),
                        port: int(8000),
                        end_port: Some(9000),
                    }],
                    from: vec![peer],
                }],
                egress: vec![networking::NetworkPolicyEgressRule {
                    ports: vec![networking::NetworkPolicyPort {
                        protocol: s("UDP"),
                        port: string_int("dns"),
                        end_port: None,
                    }],
                    to: vec![networking::NetworkPolicyPeer {
                        pod_selector: None,
                        namespace_selector: None,
                        ip_block: Some(networking::IpBlock {
                            cidr: s("10.0.0.0/8"),
                            except: strings(&["10.1.0.0/16"]),
                        }),
                    }],
                }],
                policy_types: strings(&["Ingress", "Egress"]),
            }),
        },
    );
    kinds.check::<typed::networking::v1::ServiceCIDR>(
        "networking.k8s.io/v1",
        "ServiceCIDR",
        &networking::ServiceCIDR {
            metadata: meta("kubernetes", ""),
            spec: Some(networking::ServiceCIDRSpec {
                cidrs: strings(&["10.96.0.0/12", "fd00:10:96::/112"]),
            }),
            status: Some(networking::ServiceCIDRStatus {
                conditions: vec![condition("Ready")],
            }),
        },
    );
    kinds.check::<typed::storage::v1::CSIDriver>(
        "storage.k8s.io/v1",
        "CSIDriver",
        &storage::CSIDriver {
            metadata: meta("ebs.csi.aws.com", ""),
            spec: Some(storage::CSIDriverSpec {
                attach_required: Some(true),
                pod_info_on_mount: Some(false),
                volume_lifecycle_modes: strings(&["Persistent"]),
                storage_capacity: Some(false),
                fs_group_policy: s("ReadWriteOnceWithFSType"),
                token_requests: vec![storage::TokenRequest {
                    audience: s("sts.amazonaws.com"),
                    expiration_seconds: Some(3600),
                }],
                requires_republish: Some(false),
                se_linux_mount: Some(true),
                node_allocatable_update_period_seconds: Some(60),
                service_account_token_in_secrets: None,
            }),
        },
    );
    kinds.check::<typed::storage::v1::CSINode>(
        "storage.k8s.io/v1",
        "CSINode",
        &storage::CSINode {
            metadata: meta("node-1", ""),
            spec: Some(storage::CSINodeSpec {
                drivers: vec![storage::CSINodeDriver {
                    name: s("ebs.csi.aws.com"),
                    node_id: s("i-0123"),
                    topology_keys: strings(&["topology.ebs.csi.aws.com/zone"]),
                    allocatable: Some(storage::VolumeNodeResources { count: Some(25) }),
                }],
            }),
        },
    );
    kinds.check::<typed::storage::v1::CSIStorageCapacity>(
        "storage.k8s.io/v1",
        "CSIStorageCapacity",
        &storage::CSIStorageCapacity {
            metadata: meta("csisc-abc12", "kube-system"),
            node_topology: selector(),
            storage_class_name: s("fast"),
            capacity: Some(quantity("100Gi")),
            maximum_volume_size: Some(quantity("16Ti")),
        },
    );
    kinds.check::<typed::storage::v1::StorageClass>(
        "storage.k8s.io/v1",
        "StorageClass",
        &storage::StorageClass {
            metadata: meta("fast", ""),
            provisioner: s("ebs.csi.aws.com"),
            parameters: string_map(&[("type", "gp3")]),
            reclaim_policy: s("Delete"),
            mount_options: strings(&["noatime"]),
            allow_volume_expansion: Some(false),
            volume_binding_mode: s("WaitForFirstConsumer"),
            allowed_topologies: vec![core::TopologySelectorTerm {
                match_label_expressions: vec![core::TopologySelectorLabelRequirement {
                    key: s("topology.kubernetes.io/zone"),
                    values: strings(&["eu-west-1a"]),
                }],
            }],
        },
    );
    let volume_error = |code| {
        Some(storage::VolumeError {
            time: time(T0),
            message: s("attach failed"),
            error_code: code,
        })
    };
    kinds.check::<typed::storage::v1::VolumeAttachment>(
        "storage.k8s.io/v1",
        "VolumeAttachment",
        &storage::VolumeAttachment {
            metadata: meta("csi-0123", ""),
            spec: Some(storage::VolumeAttachmentSpec {
                attacher: s("ebs.csi.aws.com"),
                source: Some(storage::VolumeAttachmentSource {
                    persistent_volume_name: None,
                    inline_volume_spec: Some(persistent_volume_spec()),
                }),
                node_name: s("node-1"),
            }),
            status: Some(storage::VolumeAttachmentStatus {
                attached: Some(false),
                attachment_metadata: string_map(&[("devicePath", "/dev/xvdba")]),
                attach_error: volume_error(Some(0)),
                detach_error: volume_error(None),
            }),
        },
    );
}
