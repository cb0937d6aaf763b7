//! Creates with `application/vnd.kubernetes.protobuf` bodies, as client-go sends them when
//! configured with that content type (kube-controller-manager, kube-scheduler, many
//! operators): the body is encoded from Go structs, so every non-pointer field is on the wire,
//! zero or not. The stored object must be what the JSON create would have stored: defaults
//! applied, fields intact, Go's zero values absent where Go's JSON leaves them out.

use http::{Method, Request};
use http_body_util::BodyExt;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_pb::api::apps::v1 as apps;
use k8s_pb::api::autoscaling::v2 as autoscaling;
use k8s_pb::api::batch::v1 as batch;
use k8s_pb::api::core::v1 as core;
use k8s_pb::api::policy::v1 as policy;
use k8s_pb::apimachinery::pkg::api::resource::Quantity;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
use k8s_pb::apimachinery::pkg::runtime::{TypeMeta, Unknown};
use kore_testenv::TestEnv;
use kube::api::Api;
use prost::Message as _;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";

fn s(value: &str) -> Option<String> {
    Some(value.to_owned())
}

fn map(entries: &[(&str, &str)]) -> std::collections::BTreeMap<String, String> {
    entries
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn quantities(entries: &[(&str, &str)]) -> std::collections::BTreeMap<String, Quantity> {
    entries
        .iter()
        .map(|(k, v)| ((*k).to_owned(), Quantity { string: s(v) }))
        .collect()
}

/// The `k8s\0` magic and the `runtime.Unknown` envelope around `message`.
fn body(api_version: &str, kind: &str, message: &impl prost::Message) -> Vec<u8> {
    let unknown = Unknown {
        type_meta: Some(TypeMeta {
            api_version: s(api_version),
            kind: s(kind),
        }),
        raw: Some(message.encode_to_vec()),
        content_encoding: s(""),
        content_type: s(""),
    };
    [b"k8s\0".as_slice(), &unknown.encode_to_vec()].concat()
}

/// POSTs a protobuf body; returns the status code and the JSON answer.
async fn post(env: &TestEnv, path: &str, body: Vec<u8>) -> (u16, Value) {
    let request = Request::builder()
        .method(Method::POST)
        .uri(path)
        .header("content-type", PROTOBUF)
        .header("accept", "application/json")
        .body(kube::client::Body::from(body))
        .expect("request");
    let response = env.client().send(request).await.expect("response");
    let code = response.status().as_u16();
    let bytes = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes();
    (code, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

/// POSTs `message` and asserts a 201; returns the answer.
async fn create(
    env: &TestEnv,
    path: &str,
    api_version: &str,
    kind: &str,
    message: &impl prost::Message,
) -> Value {
    let (code, answer) = post(env, path, body(api_version, kind, message)).await;
    assert_eq!(code, 201, "{answer}");
    answer
}

/// The stored object, read back as JSON through its k8s-openapi type.
async fn stored<K>(api: &Api<K>, name: &str) -> Value
where
    K: kube::Resource + Clone + DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    serde_json::to_value(api.get(name).await.expect("get")).expect("json")
}

/// `ObjectMeta` as Go encodes a new object's: every string and the generation written, and
/// the zero `creationTimestamp` as an empty `Time`.
fn go_meta(name: &str, labels: &[(&str, &str)]) -> Option<meta::ObjectMeta> {
    Some(meta::ObjectMeta {
        name: s(name),
        generate_name: s(""),
        namespace: s(""),
        self_link: s(""),
        uid: s(""),
        resource_version: s(""),
        generation: Some(0),
        creation_timestamp: Some(meta::Time::default()),
        labels: map(labels),
        ..Default::default()
    })
}

/// A pod template as Go encodes it: zero values of the non-pointer fields included.
fn go_template(restart_policy: &str) -> Option<core::PodTemplateSpec> {
    let container = core::Container {
        name: s("main"),
        image: s("busybox:1.36"),
        command: vec!["sh".into(), "-c".into(), "echo hello".into()],
        working_dir: s(""),
        resources: Some(core::ResourceRequirements {
            requests: quantities(&[("cpu", "100m")]),
            ..Default::default()
        }),
        termination_message_path: s(""),
        image_pull_policy: s(""),
        stdin: Some(false),
        stdin_once: Some(false),
        tty: Some(false),
        ..Default::default()
    };
    Some(core::PodTemplateSpec {
        metadata: go_meta("", &[("app", "hello")]),
        spec: Some(core::PodSpec {
            containers: vec![container],
            restart_policy: s(restart_policy),
            dns_policy: s(""),
            service_account_name: s(""),
            node_name: s(""),
            host_network: Some(false),
            host_pid: Some(false),
            host_ipc: Some(false),
            hostname: s(""),
            subdomain: s(""),
            scheduler_name: s(""),
            ..Default::default()
        }),
    })
}

fn go_selector() -> Option<meta::LabelSelector> {
    Some(meta::LabelSelector {
        match_labels: map(&[("app", "hello")]),
        match_expressions: vec![],
    })
}

#[tokio::test]
async fn a_protobuf_job_is_stored_with_its_defaults_and_generated_selector() {
    let env = TestEnv::start().await.expect("start");
    let job = batch::Job {
        metadata: go_meta("hello", &[]),
        spec: Some(batch::JobSpec {
            backoff_limit: Some(2),
            template: go_template("Never"),
            completion_mode: None,
            ..Default::default()
        }),
        // Go's zero JobStatus: its non-pointer counters are on the wire.
        status: Some(batch::JobStatus {
            active: Some(0),
            succeeded: Some(0),
            failed: Some(0),
            completed_indexes: s(""),
            ..Default::default()
        }),
    };
    let answer = create(
        &env,
        "/apis/batch/v1/namespaces/default/jobs",
        "batch/v1",
        "Job",
        &job,
    )
    .await;
    let v = stored(&Api::<Job>::default_namespaced(env.client()), "hello").await;
    assert_eq!(answer["metadata"]["uid"], v["metadata"]["uid"]);
    let spec = &v["spec"];
    assert_eq!(spec["backoffLimit"], 2, "{v}");
    assert_eq!(spec["completions"], 1);
    assert_eq!(spec["parallelism"], 1);
    assert_eq!(spec["completionMode"], "NonIndexed");
    assert_eq!(spec["suspend"], false);
    assert_eq!(spec["podReplacementPolicy"], "TerminatingOrFailed");
    assert!(
        spec["selector"]["matchLabels"]
            .get("batch.kubernetes.io/controller-uid")
            .is_some(),
        "{v}"
    );
    let container = &spec["template"]["spec"]["containers"][0];
    assert_eq!(container["command"], json!(["sh", "-c", "echo hello"]));
    assert_eq!(container["resources"], json!({"requests": {"cpu": "100m"}}));
    assert_eq!(container["terminationMessagePath"], "/dev/termination-log");
    assert_eq!(container["imagePullPolicy"], "IfNotPresent");
    assert!(container.get("stdin").is_none(), "{container}");
    assert_eq!(spec["template"]["spec"]["restartPolicy"], "Never");
    assert_eq!(spec["template"]["spec"]["dnsPolicy"], "ClusterFirst");
    assert!(spec["template"]["spec"].get("hostNetwork").is_none(), "{v}");
    assert_eq!(v["metadata"]["generation"], 1);
    assert!(v["status"].get("active").is_none(), "{v}");
}

#[tokio::test]
async fn a_protobuf_statefulset_keeps_its_claim_templates_and_gets_defaults() {
    let env = TestEnv::start().await.expect("start");
    let sts = apps::StatefulSet {
        metadata: go_meta("db", &[("app", "hello")]),
        spec: Some(apps::StatefulSetSpec {
            replicas: Some(0),
            selector: go_selector(),
            template: go_template("Always"),
            volume_claim_templates: vec![core::PersistentVolumeClaim {
                metadata: go_meta("data", &[]),
                spec: Some(core::PersistentVolumeClaimSpec {
                    access_modes: vec!["ReadWriteOnce".into()],
                    resources: Some(core::VolumeResourceRequirements {
                        requests: quantities(&[("storage", "1Gi")]),
                        ..Default::default()
                    }),
                    volume_name: s(""),
                    ..Default::default()
                }),
                status: Some(core::PersistentVolumeClaimStatus {
                    phase: s(""),
                    ..Default::default()
                }),
            }],
            service_name: s("db"),
            pod_management_policy: s(""),
            min_ready_seconds: Some(0),
            update_strategy: Some(apps::StatefulSetUpdateStrategy {
                r#type: s(""),
                rolling_update: None,
            }),
            ..Default::default()
        }),
        status: Some(apps::StatefulSetStatus {
            observed_generation: Some(0),
            replicas: Some(0),
            ready_replicas: Some(0),
            current_replicas: Some(0),
            updated_replicas: Some(0),
            current_revision: s(""),
            update_revision: s(""),
            available_replicas: Some(0),
            ..Default::default()
        }),
    };
    create(
        &env,
        "/apis/apps/v1/namespaces/default/statefulsets",
        "apps/v1",
        "StatefulSet",
        &sts,
    )
    .await;
    let v = stored(&Api::<StatefulSet>::default_namespaced(env.client()), "db").await;
    let spec = &v["spec"];
    assert_eq!(spec["replicas"], 0, "an explicit zero is kept: {v}");
    assert_eq!(spec["serviceName"], "db");
    assert_eq!(spec["podManagementPolicy"], "OrderedReady");
    assert_eq!(
        spec["updateStrategy"],
        json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 0}})
    );
    assert_eq!(spec["revisionHistoryLimit"], 10);
    assert!(spec.get("minReadySeconds").is_none(), "{v}");
    let claim = &spec["volumeClaimTemplates"][0];
    assert_eq!(claim["metadata"]["name"], "data");
    assert_eq!(
        claim["spec"]["resources"],
        json!({"requests": {"storage": "1Gi"}})
    );
    assert_eq!(claim["spec"]["accessModes"], json!(["ReadWriteOnce"]));
    assert_eq!(claim["spec"]["volumeMode"], "Filesystem");
    assert_eq!(
        spec["template"]["metadata"]["labels"],
        json!({"app": "hello"})
    );
}

#[tokio::test]
async fn a_protobuf_node_keeps_its_taints_and_status() {
    let env = TestEnv::start().await.expect("start");
    let node = core::Node {
        metadata: go_meta("worker-1", &[("kubernetes.io/os", "linux")]),
        spec: Some(core::NodeSpec {
            pod_cidr: s("10.244.1.0/24"),
            pod_cid_rs: vec!["10.244.1.0/24".into()],
            provider_id: s("kind://docker/kind/worker-1"),
            unschedulable: Some(false),
            taints: vec![core::Taint {
                key: s("dedicated"),
                value: s("gpu"),
                effect: s("NoSchedule"),
                time_added: None,
            }],
            external_id: s(""),
            config_source: None,
        }),
        status: Some(core::NodeStatus {
            capacity: quantities(&[("cpu", "8"), ("memory", "32Gi"), ("pods", "110")]),
            phase: s(""),
            addresses: vec![core::NodeAddress {
                r#type: s("InternalIP"),
                address: s("172.18.0.3"),
            }],
            daemon_endpoints: Some(core::NodeDaemonEndpoints {
                kubelet_endpoint: Some(core::DaemonEndpoint { port: Some(10250) }),
            }),
            node_info: Some(core::NodeSystemInfo {
                kubelet_version: s("v1.33.1"),
                operating_system: s("linux"),
                architecture: s("arm64"),
                machine_id: s(""),
                ..Default::default()
            }),
            ..Default::default()
        }),
    };
    create(&env, "/api/v1/nodes", "v1", "Node", &node).await;
    let v = stored(&Api::<Node>::all(env.client()), "worker-1").await;
    assert_eq!(
        v["spec"],
        json!({
            "podCIDR": "10.244.1.0/24",
            "podCIDRs": ["10.244.1.0/24"],
            "providerID": "kind://docker/kind/worker-1",
            "taints": [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}],
        })
    );
    let status = &v["status"];
    assert_eq!(
        status["allocatable"], status["capacity"],
        "allocatable defaults to capacity: {v}"
    );
    assert_eq!(status["capacity"]["memory"], "32Gi");
    assert_eq!(
        status["daemonEndpoints"],
        json!({"kubeletEndpoint": {"Port": 10250}})
    );
    assert_eq!(status["nodeInfo"]["kubeletVersion"], "v1.33.1");
    assert_eq!(
        status["addresses"],
        json!([{"type": "InternalIP", "address": "172.18.0.3"}])
    );
}

#[tokio::test]
async fn a_protobuf_cronjob_is_stored_with_its_defaults() {
    let env = TestEnv::start().await.expect("start");
    let cronjob = batch::CronJob {
        metadata: go_meta("nightly", &[]),
        spec: Some(batch::CronJobSpec {
            schedule: s("0 3 * * *"),
            time_zone: s("Europe/Berlin"),
            concurrency_policy: s(""),
            job_template: Some(batch::JobTemplateSpec {
                metadata: go_meta("", &[]),
                spec: Some(batch::JobSpec {
                    template: go_template("OnFailure"),
                    completion_mode: None,
                    ..Default::default()
                }),
            }),
            ..Default::default()
        }),
        status: Some(batch::CronJobStatus::default()),
    };
    create(
        &env,
        "/apis/batch/v1/namespaces/default/cronjobs",
        "batch/v1",
        "CronJob",
        &cronjob,
    )
    .await;
    let v = stored(&Api::<CronJob>::default_namespaced(env.client()), "nightly").await;
    let spec = &v["spec"];
    assert_eq!(spec["schedule"], "0 3 * * *");
    assert_eq!(spec["timeZone"], "Europe/Berlin");
    assert_eq!(spec["concurrencyPolicy"], "Allow");
    assert_eq!(spec["suspend"], false);
    assert_eq!(spec["successfulJobsHistoryLimit"], 3);
    assert_eq!(spec["failedJobsHistoryLimit"], 1);
    let pod = &spec["jobTemplate"]["spec"]["template"]["spec"];
    assert_eq!(pod["schedulerName"], "default-scheduler");
    assert_eq!(pod["restartPolicy"], "OnFailure");
    assert_eq!(pod["containers"][0]["image"], "busybox:1.36");
}

#[tokio::test]
async fn a_protobuf_hpa_v2_keeps_its_metrics_and_gets_behavior_defaults() {
    let env = TestEnv::start().await.expect("start");
    let hpa = autoscaling::HorizontalPodAutoscaler {
        metadata: go_meta("web", &[]),
        spec: Some(autoscaling::HorizontalPodAutoscalerSpec {
            scale_target_ref: Some(autoscaling::CrossVersionObjectReference {
                kind: s("Deployment"),
                name: s("web"),
                api_version: s("apps/v1"),
            }),
            min_replicas: None,
            max_replicas: Some(5),
            metrics: vec![
                autoscaling::MetricSpec {
                    r#type: s("Resource"),
                    resource: Some(autoscaling::ResourceMetricSource {
                        name: s("cpu"),
                        target: Some(autoscaling::MetricTarget {
                            r#type: s("Utilization"),
                            average_utilization: Some(60),
                            ..Default::default()
                        }),
                    }),
                    ..Default::default()
                },
                autoscaling::MetricSpec {
                    r#type: s("Pods"),
                    pods: Some(autoscaling::PodsMetricSource {
                        metric: Some(autoscaling::MetricIdentifier {
                            name: s("requests_per_second"),
                            selector: None,
                        }),
                        target: Some(autoscaling::MetricTarget {
                            r#type: s("AverageValue"),
                            average_value: Some(Quantity { string: s("10") }),
                            ..Default::default()
                        }),
                    }),
                    ..Default::default()
                },
            ],
            behavior: Some(autoscaling::HorizontalPodAutoscalerBehavior {
                scale_up: None,
                scale_down: Some(autoscaling::HpaScalingRules {
                    stabilization_window_seconds: Some(60),
                    select_policy: None,
                    policies: vec![],
                    tolerance: None,
                }),
            }),
        }),
        // Go's zero status: `currentReplicas` (non-pointer, omitempty) and `desiredReplicas`.
        status: Some(autoscaling::HorizontalPodAutoscalerStatus {
            current_replicas: Some(0),
            desired_replicas: Some(0),
            ..Default::default()
        }),
    };
    create(
        &env,
        "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers",
        "autoscaling/v2",
        "HorizontalPodAutoscaler",
        &hpa,
    )
    .await;
    let v = stored(
        &Api::<HorizontalPodAutoscaler>::default_namespaced(env.client()),
        "web",
    )
    .await;
    let spec = &v["spec"];
    assert_eq!(spec["minReplicas"], 1);
    assert_eq!(spec["maxReplicas"], 5);
    assert_eq!(
        spec["metrics"],
        json!([
            {"type": "Resource", "resource": {"name": "cpu",
                "target": {"type": "Utilization", "averageUtilization": 60}}},
            {"type": "Pods", "pods": {"metric": {"name": "requests_per_second"},
                "target": {"type": "AverageValue", "averageValue": "10"}}},
        ])
    );
    assert_eq!(
        spec["behavior"]["scaleDown"]["stabilizationWindowSeconds"],
        60
    );
    assert_eq!(spec["behavior"]["scaleDown"]["selectPolicy"], "Max");
    assert_eq!(
        spec["behavior"]["scaleUp"],
        json!({"stabilizationWindowSeconds": 0, "selectPolicy": "Max", "policies": [
            {"type": "Pods", "value": 4, "periodSeconds": 15},
            {"type": "Percent", "value": 100, "periodSeconds": 15}]})
    );
    assert_eq!(v["status"], json!({"desiredReplicas": 0}));
}

#[tokio::test]
async fn a_protobuf_eviction_evicts_the_pod() {
    let env = TestEnv::start().await.expect("start");
    let pod = core::Pod {
        metadata: go_meta("victim", &[]),
        spec: go_template("Always").and_then(|template| template.spec),
        status: Some(core::PodStatus::default()),
    };
    create(&env, "/api/v1/namespaces/default/pods", "v1", "Pod", &pod).await;
    let eviction = policy::Eviction {
        metadata: go_meta("victim", &[]),
        delete_options: Some(meta::DeleteOptions {
            grace_period_seconds: Some(0),
            ..Default::default()
        }),
    };
    let answer = create(
        &env,
        "/api/v1/namespaces/default/pods/victim/eviction",
        "policy/v1",
        "Eviction",
        &eviction,
    )
    .await;
    assert_eq!(answer["status"], "Success", "{answer}");
    let pods = Api::<Pod>::default_namespaced(env.client());
    assert!(
        pods.get_opt("victim").await.expect("get").is_none(),
        "the pod is gone"
    );
}

#[tokio::test]
async fn a_protobuf_body_of_a_kind_without_a_protobuf_form_is_unsupported_media_type() {
    let env = TestEnv::start().await.expect("start");
    let cases = [
        // A custom resource: never protobuf.
        ("example.com/v1", "Widget"),
        // A built-in kind in a version no server serves any more.
        ("apps/v1beta2", "Deployment"),
        // A kind no create takes.
        ("v1", "ComponentStatus"),
    ];
    for (api_version, kind) in cases {
        let (code, answer) = post(
            &env,
            "/api/v1/namespaces/default/configmaps",
            body(api_version, kind, &core::ConfigMap::default()),
        )
        .await;
        assert_eq!(code, 415, "{api_version} {kind}: {answer}");
        assert_eq!(answer["kind"], "Status", "{answer}");
        assert_eq!(answer["reason"], "UnsupportedMediaType", "{answer}");
    }
    // A body that is not protobuf at all is a bad request.
    let (code, answer) = post(
        &env,
        "/api/v1/namespaces/default/configmaps",
        br#"{"kind":"ConfigMap"}"#.to_vec(),
    )
    .await;
    assert_eq!(code, 400, "{answer}");
    assert_eq!(answer["reason"], "BadRequest", "{answer}");
}
