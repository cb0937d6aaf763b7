//! The defaults a real server gives a pod: `SetDefaults_PodSpec` and friends (also in pod
//! templates) and the default admission plugins (ServiceAccount, Priority,
//! DefaultTolerationSeconds), so that `kubectl run --dry-run=server -o yaml` shows what
//! Kubernetes shows.

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Pod, ServiceAccount};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use kore_testenv::{TestEnv, wait_for};
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

fn from<T: DeserializeOwned>(v: Value) -> T {
    serde_json::from_value(v).expect("valid object")
}

fn api_error(e: kube::Error) -> kube::core::Status {
    match e {
        kube::Error::Api(s) => *s,
        other => panic!("expected an API error, got {other:?}"),
    }
}

fn pod(name: &str, spec: Value) -> Pod {
    from(json!({"metadata": {"name": name}, "spec": spec}))
}

fn nginx() -> Value {
    json!({"containers": [{"name": "nginx", "image": "nginx"}]})
}

#[tokio::test]
async fn a_dry_run_pod_shows_every_default_kubernetes_applies() {
    let env = TestEnv::start().await.expect("start");
    let pods: Api<Pod> = Api::namespaced(env.client(), "default");
    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let created = pods
        .create(&dry, &pod("nginx", nginx()))
        .await
        .expect("dry run");
    let v = serde_json::to_value(&created).expect("json");
    let spec = &v["spec"];
    let volume = spec["volumes"][0]["name"].as_str().expect("token volume");
    assert!(
        volume.starts_with("kube-api-access-") && volume.len() == "kube-api-access-".len() + 5,
        "{volume}"
    );
    let mut expected = json!({
        "containers": [{
            "image": "nginx",
            "imagePullPolicy": "Always",
            "name": "nginx",
            "resources": {},
            "terminationMessagePath": "/dev/termination-log",
            "terminationMessagePolicy": "File",
            "volumeMounts": [{"mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                              "name": volume, "readOnly": true}],
        }],
        "dnsPolicy": "ClusterFirst",
        "enableServiceLinks": true,
        "preemptionPolicy": "PreemptLowerPriority",
        "priority": 0,
        "restartPolicy": "Always",
        "schedulerName": "default-scheduler",
        "securityContext": {},
        "serviceAccount": "default",
        "serviceAccountName": "default",
        "terminationGracePeriodSeconds": 30,
        "tolerations": [
            {"effect": "NoExecute", "key": "node.kubernetes.io/not-ready",
             "operator": "Exists", "tolerationSeconds": 300},
            {"effect": "NoExecute", "key": "node.kubernetes.io/unreachable",
             "operator": "Exists", "tolerationSeconds": 300},
        ],
        "volumes": [{"name": volume, "projected": {
            "defaultMode": 420,
            "sources": [
                {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                {"configMap": {"items": [{"key": "ca.crt", "path": "ca.crt"}],
                               "name": "kube-root-ca.crt"}},
                {"downwardAPI": {"items": [{"fieldRef": {"apiVersion": "v1",
                    "fieldPath": "metadata.namespace"}, "path": "namespace"}]}},
            ]}}],
    });
    // Compare whole, key order aside.
    expected.sort_all_objects();
    let mut got = spec.clone();
    got.sort_all_objects();
    assert_eq!(got, expected);
    assert_eq!(
        v["status"],
        json!({"phase": "Pending", "qosClass": "BestEffort"})
    );
    assert!(
        pods.get_opt("nginx").await.expect("get").is_none(),
        "a dry run stores nothing"
    );
}

#[tokio::test]
async fn the_service_account_decides_the_token_mount_and_must_exist() {
    let env = TestEnv::start().await.expect("start");
    let pods: Api<Pod> = Api::namespaced(env.client(), "default");
    let accounts: Api<ServiceAccount> = Api::namespaced(env.client(), "default");

    let err = api_error(
        pods.create(
            &PostParams::default(),
            &pod(
                "p0",
                json!({"serviceAccountName": "ghost",
                              "containers": [{"name": "c", "image": "busybox:1.36"}]}),
            ),
        )
        .await
        .expect_err("a missing service account"),
    );
    assert_eq!(err.code, 403, "{err:?}");
    assert_eq!(
        err.message,
        r#"pods "p0" is forbidden: error looking up service account default/ghost: serviceaccount "ghost" not found"#
    );

    accounts
        .create(
            &PostParams::default(),
            &from(
                json!({"metadata": {"name": "quiet"}, "automountServiceAccountToken": false,
                         "imagePullSecrets": [{"name": "registry"}]}),
            ),
        )
        .await
        .expect("service account");
    let quiet = pods
        .create(
            &PostParams::default(),
            &pod(
                "p1",
                json!({"serviceAccountName": "quiet",
                              "containers": [{"name": "c", "image": "busybox:1.36"}]}),
            ),
        )
        .await
        .expect("create");
    let spec = serde_json::to_value(quiet.spec.expect("spec")).expect("json");
    assert!(spec.get("volumes").is_none(), "{spec}");
    assert!(
        spec["containers"][0].get("volumeMounts").is_none(),
        "{spec}"
    );
    assert_eq!(spec["containers"][0]["imagePullPolicy"], "IfNotPresent");
    assert_eq!(spec["imagePullSecrets"], json!([{"name": "registry"}]));

    // The pod's own choice wins over its account's; an existing mount at the token path is
    // left alone, init containers get the mount too.
    let pod2 = pods
        .create(
            &PostParams::default(),
            &pod("p2", json!({"serviceAccountName": "quiet", "automountServiceAccountToken": true,
                "initContainers": [{"name": "init", "image": "busybox"}],
                "containers": [
                    {"name": "a", "image": "busybox"},
                    {"name": "b", "image": "busybox", "volumeMounts": [
                        {"name": "own", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}]}],
                "volumes": [{"name": "own"}]})),
        )
        .await
        .expect("create");
    let spec = serde_json::to_value(pod2.spec.expect("spec")).expect("json");
    let volumes = spec["volumes"].as_array().expect("volumes");
    assert_eq!(volumes.len(), 2, "{spec}");
    assert_eq!(
        volumes[0],
        json!({"name": "own", "emptyDir": {}}),
        "a volume without a source is an emptyDir"
    );
    let token = volumes[1]["name"].as_str().expect("name");
    assert_eq!(spec["initContainers"][0]["volumeMounts"][0]["name"], token);
    assert_eq!(spec["containers"][0]["volumeMounts"][0]["name"], token);
    assert_eq!(
        spec["containers"][1]["volumeMounts"],
        json!([{"name": "own", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}])
    );

    // The deprecated field still names the account.
    let old = pods
        .create(
            &PostParams::default(),
            &pod(
                "p3",
                json!({"serviceAccount": "quiet",
                              "containers": [{"name": "c", "image": "busybox"}]}),
            ),
        )
        .await
        .expect("create");
    let spec = old.spec.expect("spec");
    assert_eq!(spec.service_account_name.as_deref(), Some("quiet"));
    assert_eq!(spec.service_account.as_deref(), Some("quiet"));
}

#[tokio::test]
async fn priority_comes_from_the_priority_class() {
    let env = TestEnv::start().await.expect("start");
    let pods: Api<Pod> = Api::namespaced(env.client(), "default");
    let classes: Api<PriorityClass> = Api::all(env.client());

    let critical = pods
        .create(
            &PostParams::default(),
            &pod(
                "critical",
                json!({"priorityClassName": "system-cluster-critical",
                "containers": [{"name": "c", "image": "busybox"}]}),
            ),
        )
        .await
        .expect("create");
    let spec = critical.spec.expect("spec");
    assert_eq!(spec.priority, Some(2_000_000_000));
    assert_eq!(
        spec.preemption_policy.as_deref(),
        Some("PreemptLowerPriority")
    );

    let err = api_error(
        pods.create(
            &PostParams::default(),
            &pod(
                "unknown",
                json!({"priorityClassName": "gold",
                "containers": [{"name": "c", "image": "busybox"}]}),
            ),
        )
        .await
        .expect_err("no such class"),
    );
    assert_eq!(err.code, 403, "{err:?}");
    assert_eq!(
        err.message,
        r#"pods "unknown" is forbidden: no PriorityClass with name gold was found"#
    );

    let err = api_error(
        pods.create(
            &PostParams::default(),
            &pod(
                "given",
                json!({"priority": 7, "containers": [{"name": "c", "image": "busybox"}]}),
            ),
        )
        .await
        .expect_err("priority given"),
    );
    assert_eq!(err.code, 403, "{err:?}");
    assert!(
        err.message.contains(
            "the integer value of priority (7) must not be provided in pod spec; priority admission controller computed 0 from the given PriorityClass name"
        ),
        "{}",
        err.message
    );

    classes
        .create(
            &PostParams::default(),
            &from(
                json!({"metadata": {"name": "batch"}, "value": 50, "globalDefault": true,
                         "preemptionPolicy": "Never"}),
            ),
        )
        .await
        .expect("class");
    let defaulted = pods
        .create(
            &PostParams::default(),
            &pod(
                "plain",
                json!({"containers": [{"name": "c", "image": "busybox"}]}),
            ),
        )
        .await
        .expect("create");
    let spec = defaulted.spec.expect("spec");
    assert_eq!(spec.priority_class_name.as_deref(), Some("batch"));
    assert_eq!(spec.priority, Some(50));
    assert_eq!(spec.preemption_policy.as_deref(), Some("Never"));

    // An update that leaves the priority out keeps it.
    let mut body = serde_json::to_value(pods.get("plain").await.expect("get")).expect("json");
    body["spec"]
        .as_object_mut()
        .expect("spec")
        .remove("priority");
    body["spec"]["containers"][0]["image"] = json!("busybox:1.37");
    let replaced = pods
        .replace("plain", &PostParams::default(), &from(body))
        .await
        .expect("replace");
    assert_eq!(replaced.spec.expect("spec").priority, Some(50));
}

#[tokio::test]
async fn given_tolerations_of_the_default_taints_are_kept() {
    let env = TestEnv::start().await.expect("start");
    let pods: Api<Pod> = Api::namespaced(env.client(), "default");
    let created = pods
        .create(
            &PostParams::default(),
            &pod("tolerant", json!({
                "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                                 "effect": "NoExecute", "tolerationSeconds": 10}],
                "containers": [{"name": "c", "image": "busybox",
                                "resources": {"limits": {"cpu": "1", "memory": "1Gi"}},
                                "livenessProbe": {"httpGet": {"port": 8080}},
                                "env": [{"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}]}]})),
        )
        .await
        .expect("create");
    let v = serde_json::to_value(&created).expect("json");
    assert_eq!(
        v["spec"]["tolerations"],
        json!([
            {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
             "tolerationSeconds": 10},
            {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute",
             "tolerationSeconds": 300},
        ])
    );
    let c = &v["spec"]["containers"][0];
    assert_eq!(
        c["resources"]["requests"],
        json!({"cpu": "1", "memory": "1Gi"}),
        "requests default to limits"
    );
    assert_eq!(v["status"]["qosClass"], "Guaranteed");
    assert_eq!(
        c["livenessProbe"],
        json!({"httpGet": {"port": 8080, "path": "/", "scheme": "HTTP"}, "timeoutSeconds": 1,
               "periodSeconds": 10, "successThreshold": 1, "failureThreshold": 3})
    );
    assert_eq!(c["env"][0]["valueFrom"]["fieldRef"]["apiVersion"], "v1");
}

#[tokio::test]
async fn pod_templates_get_spec_defaults_but_not_admission_ones() {
    let env = TestEnv::start().await.expect("start");
    let deployments: Api<Deployment> = Api::namespaced(env.client(), "default");
    let created = deployments
        .create(
            &PostParams::default(),
            &from(json!({"metadata": {"name": "web"}, "spec": {
                "selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": {"labels": {"app": "web"}}, "spec": {
                    "serviceAccount": "robot",
                    "volumes": [{"name": "cfg", "configMap": {"name": "cfg"}}],
                    "containers": [{"name": "c", "image": "nginx:1.27",
                                    "readinessProbe": {"tcpSocket": {"port": 80}}}]}}}})),
        )
        .await
        .expect("create");
    let v = serde_json::to_value(&created).expect("json");
    let spec = &v["spec"]["template"]["spec"];
    assert_eq!(spec["serviceAccountName"], "robot");
    assert_eq!(spec["serviceAccount"], "robot");
    assert_eq!(spec["volumes"][0]["configMap"]["defaultMode"], 420);
    assert_eq!(spec["containers"][0]["readinessProbe"]["periodSeconds"], 10);
    for admission_only in ["tolerations", "priority", "enableServiceLinks"] {
        assert!(
            spec.get(admission_only).is_none(),
            "{admission_only}: {spec}"
        );
    }
    assert_eq!(
        spec["volumes"].as_array().map(Vec::len),
        Some(1),
        "no token volume in a template"
    );
}

#[tokio::test]
async fn kubectl_style_server_side_apply_of_a_pod_gets_the_defaults_too() {
    let env = TestEnv::start().await.expect("start");
    let api: Api<DynamicObject> = Api::namespaced_with(
        env.client(),
        "default",
        &kube::api::ApiResource::erase::<Pod>(&()),
    );
    let applied = api
        .patch(
            "applied",
            &PatchParams::apply("test").force(),
            &Patch::Apply(json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "applied"},
                "spec": {"containers": [{"name": "c", "image": "busybox"}]}})),
        )
        .await
        .expect("apply");
    assert_eq!(applied.data["spec"]["serviceAccountName"], "default");
    assert_eq!(applied.data["spec"]["priority"], 0);
    // And the pod is readable afterwards by a watcher-style list.
    let pods: Api<Pod> = Api::namespaced(env.client(), "default");
    wait_for(Duration::from_secs(5), || async {
        pods.get_opt("applied").await.ok().flatten()
    })
    .await
    .expect("stored");
}

#[tokio::test]
async fn limit_ranges_give_containers_their_default_requests_and_limits() {
    use k8s_openapi::api::core::v1::LimitRange;
    let env = TestEnv::start().await.expect("start");
    let ranges: Api<LimitRange> = Api::namespaced(env.client(), "default");
    let range = ranges
        .create(
            &PostParams::default(),
            &from(
                json!({"metadata": {"name": "defaults"}, "spec": {"limits": [{
                "type": "Container",
                "max": {"memory": "1Gi"},
                "default": {"cpu": "500m"},
                "min": {"ephemeral-storage": "1Mi"}}]}}),
            ),
        )
        .await
        .expect("limit range");
    // SetDefaults_LimitRangeItem: default from max, defaultRequest from default, then min.
    let item = serde_json::to_value(&range.spec.expect("spec").limits[0]).expect("json");
    assert_eq!(item["default"], json!({"cpu": "500m", "memory": "1Gi"}));
    assert_eq!(
        item["defaultRequest"],
        json!({"cpu": "500m", "memory": "1Gi", "ephemeral-storage": "1Mi"})
    );

    let pods: Api<Pod> = Api::namespaced(env.client(), "default");
    let created = pods
        .create(
            &PostParams::default(),
            &pod(
                "limited",
                json!({"containers": [
                {"name": "a", "image": "busybox"},
                {"name": "b", "image": "busybox",
                 "resources": {"limits": {"cpu": "2"}, "requests": {"memory": "100Mi"}}}]}),
            ),
        )
        .await
        .expect("create");
    let v = serde_json::to_value(&created).expect("json");
    assert_eq!(
        v["spec"]["containers"][0]["resources"],
        json!({"limits": {"cpu": "500m", "memory": "1Gi"},
               "requests": {"cpu": "500m", "memory": "1Gi", "ephemeral-storage": "1Mi"}})
    );
    // b's own values stay; its cpu request is its cpu limit (a request defaults to the limit
    // the pod gives, before LimitRanger runs).
    assert_eq!(
        v["spec"]["containers"][1]["resources"],
        json!({"limits": {"cpu": "2", "memory": "1Gi"},
               "requests": {"cpu": "2", "memory": "100Mi", "ephemeral-storage": "1Mi"}})
    );
    assert_eq!(
        v["metadata"]["annotations"]["kubernetes.io/limit-ranger"],
        "LimitRanger plugin set: cpu, ephemeral-storage, memory request for container a; \
         cpu, memory limit for container a; ephemeral-storage request for container b; \
         memory limit for container b"
    );
    assert_eq!(v["status"]["qosClass"], "Burstable");
}
