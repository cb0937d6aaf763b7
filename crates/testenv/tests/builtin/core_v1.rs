//! The core/v1 kinds beyond the first ones: Node, PersistentVolume, PersistentVolumeClaim,
//! ReplicationController, PodTemplate, Endpoints, LimitRange and ResourceQuota — verbs,
//! Kubernetes' defaults, common validation errors, status and scale subresources, Tables.

use crate::common::{assert_invalid, cell, crud, table};
use k8s_openapi::api::core::v1::{
    Endpoints, LimitRange, Node, PersistentVolume, PersistentVolumeClaim, PodTemplate,
    ReplicationController, ResourceQuota,
};
use kore_testenv::TestEnv;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

fn from<T: DeserializeOwned>(v: Value) -> T {
    serde_json::from_value(v).expect("valid object")
}

fn node(name: &str) -> Node {
    from(json!({
        "metadata": {"name": name, "labels": {"node-role.kubernetes.io/control-plane": ""}},
        "status": {"capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"}}
    }))
}

#[tokio::test]
async fn node_verbs_defaults_and_validation() {
    let env = TestEnv::start().await.expect("start");
    let nodes: Api<Node> = Api::all(env.client());
    crud(
        &nodes,
        &node("tmp"),
        json!({"spec": {"unschedulable": true}}),
    )
    .await;

    let created = nodes
        .create(&PostParams::default(), &node("n1"))
        .await
        .expect("create");
    assert_eq!(created.metadata.namespace, None, "nodes are cluster-scoped");
    assert_eq!(
        created.metadata.generation, None,
        "nodes do not track generation"
    );
    let status = created.status.expect("status");
    assert_eq!(
        status.allocatable, status.capacity,
        "allocatable defaults to capacity"
    );

    let err = nodes
        .create(
            &PostParams::default(),
            &from(json!({"metadata": {"name": "bad"},
                "spec": {"taints": [{"key": "k", "effect": "Sometimes"}]}})),
        )
        .await
        .expect_err("unknown taint effect");
    assert_invalid(
        err,
        "spec.taints[0].effect",
        "supported values: \"NoSchedule\", \"PreferNoSchedule\", \"NoExecute\"",
    );
}

#[tokio::test]
async fn node_status_is_a_subresource_and_the_table_reads_it() {
    let env = TestEnv::start().await.expect("start");
    let nodes: Api<Node> = Api::all(env.client());
    nodes
        .create(&PostParams::default(), &node("n1"))
        .await
        .expect("create");
    let (columns, rows) = table(&env, "/api/v1/nodes").await;
    assert_eq!(
        columns,
        [
            "Name",
            "Status",
            "Roles",
            "Age",
            "Version",
            "Internal-IP",
            "External-IP",
            "OS-Image",
            "Kernel-Version",
            "Container-Runtime"
        ]
    );
    assert_eq!(cell(&columns, &rows, "Status"), "Unknown");
    assert_eq!(cell(&columns, &rows, "Roles"), "control-plane");

    nodes
        .patch_status(
            "n1",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {
                "conditions": [{"type": "Ready", "status": "True"}],
                "addresses": [{"type": "InternalIP", "address": "10.0.0.5"}],
                "nodeInfo": {"kubeletVersion": "v1.33.0", "osImage": "Debian", "kernelVersion": "6.1",
                    "containerRuntimeVersion": "containerd://2.0", "architecture": "amd64",
                    "bootID": "", "kubeProxyVersion": "", "machineID": "", "operatingSystem": "linux",
                    "systemUUID": ""}}})),
        )
        .await
        .expect("status patch");
    // A main-resource write cannot change the status.
    let after = nodes
        .patch(
            "n1",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"unschedulable": true}, "status": {"conditions": []}})),
        )
        .await
        .expect("cordon");
    assert_eq!(
        after.status.and_then(|s| s.conditions).map(|c| c.len()),
        Some(1)
    );

    let (columns, rows) = table(&env, "/api/v1/nodes").await;
    assert_eq!(cell(&columns, &rows, "Status"), "Ready,SchedulingDisabled");
    assert_eq!(cell(&columns, &rows, "Version"), "v1.33.0");
    assert_eq!(cell(&columns, &rows, "Internal-IP"), "10.0.0.5");
    assert_eq!(cell(&columns, &rows, "External-IP"), "<none>");
    assert_eq!(
        cell(&columns, &rows, "Container-Runtime"),
        "containerd://2.0"
    );
}

#[tokio::test]
async fn persistent_volumes_and_claims() {
    let env = TestEnv::start().await.expect("start");
    let pvs: Api<PersistentVolume> = Api::all(env.client());
    let pv = |name: &str| -> PersistentVolume {
        from(json!({"metadata": {"name": name}, "spec": {
            "capacity": {"storage": "5Gi"}, "accessModes": ["ReadWriteOnce", "ReadOnlyMany"],
            "hostPath": {"path": "/data"}}}))
    };
    crud(
        &pvs,
        &pv("tmp"),
        json!({"spec": {"storageClassName": "slow"}}),
    )
    .await;
    let created = pvs
        .create(&PostParams::default(), &pv("pv1"))
        .await
        .expect("create");
    let v = serde_json::to_value(&created).expect("json");
    assert_eq!(v["spec"]["persistentVolumeReclaimPolicy"], "Retain");
    assert_eq!(v["spec"]["volumeMode"], "Filesystem");
    assert_eq!(v["status"]["phase"], "Pending");
    let err = pvs
        .create(
            &PostParams::default(),
            &from(
                json!({"metadata": {"name": "bad"}, "spec": {"capacity": {"storage": "1Gi"},
                "hostPath": {"path": "/x"}}}),
            ),
        )
        .await
        .expect_err("no access modes");
    assert_invalid(
        err,
        "spec.accessModes",
        "at least 1 access mode is required",
    );
    let (columns, rows) = table(&env, "/api/v1/persistentvolumes").await;
    assert_eq!(
        columns,
        [
            "Name",
            "Capacity",
            "Access Modes",
            "Reclaim Policy",
            "Status",
            "Claim",
            "StorageClass",
            "VolumeAttributesClass",
            "Reason",
            "Age",
            "VolumeMode"
        ]
    );
    assert_eq!(cell(&columns, &rows, "Access Modes"), "RWO,ROX");
    assert_eq!(cell(&columns, &rows, "Status"), "Pending");
    assert_eq!(cell(&columns, &rows, "VolumeAttributesClass"), "<unset>");

    let pvcs: Api<PersistentVolumeClaim> = Api::default_namespaced(env.client());
    let pvc = |name: &str| -> PersistentVolumeClaim {
        from(json!({"metadata": {"name": name}, "spec": {
            "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}))
    };
    crud(
        &pvcs,
        &pvc("tmp"),
        json!({"spec": {"resources": {"requests": {"storage": "2Gi"}}}}),
    )
    .await;
    let created = pvcs
        .create(&PostParams::default(), &pvc("data"))
        .await
        .expect("create");
    let v = serde_json::to_value(&created).expect("json");
    assert_eq!(v["spec"]["volumeMode"], "Filesystem");
    assert_eq!(v["status"], json!({"phase": "Pending"}));
    let err = pvcs
        .patch(
            "data",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"accessModes": ["ReadWriteMany"]}})),
        )
        .await
        .expect_err("access modes are immutable");
    assert_invalid(err, "spec", "spec is immutable after creation");
    let err = pvcs
        .create(
            &PostParams::default(),
            &from(json!({"metadata": {"name": "bad"}, "spec": {"accessModes": ["ReadWriteOnce"]}})),
        )
        .await
        .expect_err("no size");
    assert_invalid(err, "spec.resources[storage]", "Required value");
    let (columns, rows) = table(&env, "/api/v1/namespaces/default/persistentvolumeclaims").await;
    assert_eq!(
        columns,
        [
            "Name",
            "Status",
            "Volume",
            "Capacity",
            "Access Modes",
            "StorageClass",
            "VolumeAttributesClass",
            "Age",
            "VolumeMode"
        ]
    );
    assert_eq!(cell(&columns, &rows, "Status"), "Pending");
    assert_eq!(cell(&columns, &rows, "VolumeMode"), "Filesystem");
}

#[tokio::test]
async fn replication_controllers_default_their_selector_and_scale() {
    let env = TestEnv::start().await.expect("start");
    let rcs: Api<ReplicationController> = Api::default_namespaced(env.client());
    let rc = |name: &str| -> ReplicationController {
        from(json!({"metadata": {"name": name}, "spec": {"template": {
            "metadata": {"labels": {"app": "legacy"}},
            "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}))
    };
    crud(&rcs, &rc("tmp"), json!({"spec": {"replicas": 2}})).await;
    let created = rcs
        .create(&PostParams::default(), &rc("legacy"))
        .await
        .expect("create");
    let v = serde_json::to_value(&created).expect("json");
    assert_eq!(v["spec"]["selector"], json!({"app": "legacy"}));
    assert_eq!(v["metadata"]["labels"], json!({"app": "legacy"}));
    assert_eq!(v["spec"]["replicas"], 1);
    assert_eq!(v["status"], json!({"replicas": 0}));
    let scale = rcs
        .patch_scale(
            "legacy",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 4}})),
        )
        .await
        .expect("scale");
    // The Scale's selector reads the controller's plain label map.
    assert_eq!(
        scale.status.and_then(|s| s.selector).as_deref(),
        Some("app=legacy")
    );
    let (columns, rows) = table(&env, "/api/v1/namespaces/default/replicationcontrollers").await;
    assert_eq!(
        columns,
        [
            "Name",
            "Desired",
            "Current",
            "Ready",
            "Age",
            "Containers",
            "Images",
            "Selector"
        ]
    );
    assert_eq!(cell(&columns, &rows, "Desired"), &Value::from(4));
    assert_eq!(cell(&columns, &rows, "Selector"), "app=legacy");
    let err = rcs
        .create(
            &PostParams::default(),
            &from(
                json!({"metadata": {"name": "bad"}, "spec": {"selector": {"app": "x"},
                "template": {"metadata": {"labels": {"app": "y"}},
                "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}),
            ),
        )
        .await
        .expect_err("selector misses the labels");
    assert_invalid(
        err,
        "spec.template.metadata.labels",
        "`selector` does not match template `labels`",
    );
}

#[tokio::test]
async fn pod_templates_endpoints_limit_ranges_and_quotas() {
    let env = TestEnv::start().await.expect("start");
    let templates: Api<PodTemplate> = Api::default_namespaced(env.client());
    let created = crud(
        &templates,
        &from(json!({"metadata": {"name": "t"}, "template": {"spec": {
            "containers": [{"name": "c", "image": "nginx:1.27"}]}}})),
        json!({"metadata": {"annotations": {"a": "b"}}}),
    )
    .await;
    let v = serde_json::to_value(&created).expect("json");
    assert_eq!(v["template"]["spec"]["restartPolicy"], "Always");
    assert_eq!(
        v["template"]["spec"]["containers"][0]["terminationMessagePolicy"],
        "File"
    );

    let eps: Api<Endpoints> = Api::default_namespaced(env.client());
    let created = crud(
        &eps,
        &from(json!({"metadata": {"name": "svc"}, "subsets": [{
            "addresses": [{"ip": "10.1.2.3"}], "ports": [{"port": 80}]}]})),
        json!({"metadata": {"annotations": {"a": "b"}}}),
    )
    .await;
    let v = serde_json::to_value(&created).expect("json");
    assert_eq!(v["subsets"][0]["ports"][0]["protocol"], "TCP");
    eps.create(
        &PostParams::default(),
        &from(json!({"metadata": {"name": "web"}, "subsets": [{
            "addresses": [{"ip": "10.1.2.3"}, {"ip": "10.1.2.4"}],
            "ports": [{"port": 80}, {"port": 443}]}]})),
    )
    .await
    .expect("create");
    // `default` also holds the `kubernetes` endpoints every server keeps.
    let (columns, rows) = table(
        &env,
        "/api/v1/namespaces/default/endpoints?fieldSelector=metadata.name%3Dweb",
    )
    .await;
    assert_eq!(columns, ["Name", "Endpoints", "Age"]);
    assert_eq!(
        cell(&columns, &rows, "Endpoints"),
        "10.1.2.3:80,10.1.2.3:443,10.1.2.4:80 + 1 more..."
    );

    let limits: Api<LimitRange> = Api::default_namespaced(env.client());
    crud(
        &limits,
        &from(json!({"metadata": {"name": "l"}, "spec": {"limits": [
            {"type": "Container", "max": {"cpu": "2"}}]}})),
        json!({"metadata": {"annotations": {"a": "b"}}}),
    )
    .await;
    let err = limits
        .create(
            &PostParams::default(),
            &from(json!({"metadata": {"name": "bad"}, "spec": {"limits": [{"type": "Cluster"}]}})),
        )
        .await
        .expect_err("unknown limit type");
    assert_invalid(err, "spec.limits[0].type", "supported values");

    let quotas: Api<ResourceQuota> = Api::default_namespaced(env.client());
    let created = crud(
        &quotas,
        &from(
            json!({"metadata": {"name": "q"}, "spec": {"hard": {"pods": "10"}},
            "status": {"used": {"pods": "3"}}}),
        ),
        json!({"spec": {"hard": {"pods": "20"}}}),
    )
    .await;
    assert!(
        created.status.and_then(|s| s.used).is_none(),
        "a new quota's status is the server's, not the client's"
    );
    quotas
        .create(
            &PostParams::default(),
            &from(json!({"metadata": {"name": "compute"}, "spec": {"hard": {
                "requests.cpu": "2", "pods": "10", "limits.memory": "4Gi"}}})),
        )
        .await
        .expect("create");
    let (columns, rows) = table(&env, "/api/v1/namespaces/default/resourcequotas").await;
    assert_eq!(columns, ["Name", "Age", "Request", "Limit"]);
    assert_eq!(
        cell(&columns, &rows, "Request"),
        "pods: 0/10, requests.cpu: 0/2"
    );
    assert_eq!(cell(&columns, &rows, "Limit"), "limits.memory: 0/4Gi");

    templates
        .create(
            &PostParams::default(),
            &from(json!({"metadata": {"name": "web"}, "template": {
                "metadata": {"labels": {"app": "web", "tier": "front"}},
                "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]}}})),
        )
        .await
        .expect("create");
    let (columns, rows) = table(&env, "/api/v1/namespaces/default/podtemplates").await;
    assert_eq!(columns, ["Name", "Containers", "Images", "Pod Labels"]);
    assert_eq!(cell(&columns, &rows, "Images"), "nginx:1.27");
    assert_eq!(cell(&columns, &rows, "Pod Labels"), "app=web,tier=front");
}
