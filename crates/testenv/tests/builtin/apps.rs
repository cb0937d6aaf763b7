//! apps/v1 StatefulSet, DaemonSet and ControllerRevision against an in-process kore-apiserver:
//! the verbs, Kubernetes' defaults field by field, immutable fields, the scale and status
//! subresources and kubectl's Table columns.

use crate::common::{assert_invalid, cell, crud, table};
use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet, StatefulSet};
use kore_testenv::TestEnv;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

fn statefulset(name: &str) -> StatefulSet {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {
            "serviceName": "web",
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                         "spec": {"containers": [{"name": "nginx", "image": "nginx:1.27"}]}},
            "volumeClaimTemplates": [{"metadata": {"name": "www"}, "spec": {
                "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}]
        }
    }))
    .expect("valid StatefulSet")
}

fn daemonset(name: &str) -> DaemonSet {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {
            "selector": {"matchLabels": {"app": "agent"}},
            "template": {"metadata": {"labels": {"app": "agent"}},
                         "spec": {"nodeSelector": {"disk": "ssd"},
                                  "containers": [{"name": "agent", "image": "agent:1"}]}}
        }
    }))
    .expect("valid DaemonSet")
}

#[tokio::test]
async fn statefulset_verbs_and_defaults() {
    let env = TestEnv::start().await.expect("start");
    let sts: Api<StatefulSet> = Api::default_namespaced(env.client());
    crud(&sts, &statefulset("tmp"), json!({"spec": {"replicas": 2}})).await;

    let created = sts
        .create(&PostParams::default(), &statefulset("web"))
        .await
        .expect("create");
    let v = serde_json::to_value(&created).expect("json");
    let spec = &v["spec"];
    assert_eq!(spec["replicas"], 1);
    assert_eq!(spec["podManagementPolicy"], "OrderedReady");
    assert_eq!(
        spec["updateStrategy"],
        json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 0}})
    );
    assert_eq!(spec["revisionHistoryLimit"], 10);
    assert_eq!(
        spec["persistentVolumeClaimRetentionPolicy"],
        json!({"whenDeleted": "Retain", "whenScaled": "Retain"})
    );
    let claim = &spec["volumeClaimTemplates"][0];
    assert_eq!(claim["apiVersion"], "v1");
    assert_eq!(claim["kind"], "PersistentVolumeClaim");
    assert_eq!(claim["spec"]["volumeMode"], "Filesystem");
    assert_eq!(claim["status"]["phase"], "Pending");
    assert_eq!(spec["template"]["spec"]["restartPolicy"], "Always");
    assert_eq!(v["status"], json!({"replicas": 0, "availableReplicas": 0}));
    assert_eq!(v["metadata"]["generation"], 1);
}

#[tokio::test]
async fn statefulset_validation_and_immutable_spec() {
    let env = TestEnv::start().await.expect("start");
    let sts: Api<StatefulSet> = Api::default_namespaced(env.client());
    let mut never = serde_json::to_value(statefulset("bad")).expect("json");
    never["spec"]["template"]["spec"]["restartPolicy"] = json!("Never");
    let err = sts
        .create(
            &PostParams::default(),
            &serde_json::from_value(never).expect("sts"),
        )
        .await
        .expect_err("pods of a StatefulSet always restart");
    assert_invalid(
        err,
        "spec.template.spec.restartPolicy",
        "supported values: \"Always\"",
    );
    let mut policy = serde_json::to_value(statefulset("bad")).expect("json");
    policy["spec"]["podManagementPolicy"] = json!("Random");
    let err = sts
        .create(
            &PostParams::default(),
            &serde_json::from_value(policy).expect("sts"),
        )
        .await
        .expect_err("unknown policy");
    assert_invalid(
        err,
        "spec.podManagementPolicy",
        "\"OrderedReady\", \"Parallel\"",
    );

    sts.create(&PostParams::default(), &statefulset("web"))
        .await
        .expect("create");
    for change in [
        json!({"spec": {"serviceName": "other"}}),
        json!({"spec": {"selector": {"matchLabels": {"app": "web", "x": "y"}}}}),
        json!({"spec": {"podManagementPolicy": "Parallel"}}),
    ] {
        let err = sts
            .patch("web", &PatchParams::default(), &Patch::Merge(change))
            .await
            .expect_err("forbidden change");
        assert_invalid(
            err,
            "spec",
            "updates to statefulset spec for fields other than",
        );
    }
    let patched = sts
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"minReadySeconds": 5, "updateStrategy": {"type": "OnDelete", "rollingUpdate": null}}})),
        )
        .await
        .expect("mutable fields change");
    assert_eq!(patched.metadata.generation, Some(2));
}

#[tokio::test]
async fn statefulset_scale_status_and_table() {
    let env = TestEnv::start().await.expect("start");
    let sts: Api<StatefulSet> = Api::default_namespaced(env.client());
    sts.create(&PostParams::default(), &statefulset("web"))
        .await
        .expect("create");
    let scale = sts.get_scale("web").await.expect("scale");
    assert_eq!(scale.spec.and_then(|s| s.replicas), Some(1));
    assert_eq!(
        scale.status.and_then(|s| s.selector).as_deref(),
        Some("app=web")
    );
    sts.patch_scale(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 3}})),
    )
    .await
    .expect("scale up");
    sts.patch_status(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"replicas": 3, "readyReplicas": 2}})),
    )
    .await
    .expect("status");
    let got = sts.get("web").await.expect("get");
    assert_eq!(got.spec.and_then(|s| s.replicas), Some(3));

    let (columns, rows) = table(&env, "/apis/apps/v1/namespaces/default/statefulsets").await;
    assert_eq!(columns, ["Name", "Ready", "Age", "Containers", "Images"]);
    assert_eq!(cell(&columns, &rows, "Ready"), "2/3");
    assert_eq!(cell(&columns, &rows, "Images"), "nginx:1.27");
}

#[tokio::test]
async fn daemonset_verbs_defaults_validation_and_table() {
    let env = TestEnv::start().await.expect("start");
    let ds: Api<DaemonSet> = Api::default_namespaced(env.client());
    crud(
        &ds,
        &daemonset("tmp"),
        json!({"spec": {"minReadySeconds": 3}}),
    )
    .await;

    let created = ds
        .create(&PostParams::default(), &daemonset("agent"))
        .await
        .expect("create");
    let v = serde_json::to_value(&created).expect("json");
    assert_eq!(
        v["spec"]["updateStrategy"],
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}})
    );
    assert_eq!(v["spec"]["revisionHistoryLimit"], 10);
    assert_eq!(
        v["status"],
        json!({"currentNumberScheduled": 0, "numberMisscheduled": 0,
               "desiredNumberScheduled": 0, "numberReady": 0})
    );

    let err = ds
        .patch(
            "agent",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"spec": {"selector": {"matchLabels": {"app": "other"}},
                "template": {"metadata": {"labels": {"app": "other"}}}}}),
            ),
        )
        .await
        .expect_err("the selector is immutable");
    assert_invalid(err, "spec.selector", "field is immutable");
    let mut never = serde_json::to_value(daemonset("bad")).expect("json");
    never["spec"]["template"]["spec"]["restartPolicy"] = json!("OnFailure");
    let err = ds
        .create(
            &PostParams::default(),
            &serde_json::from_value(never).expect("ds"),
        )
        .await
        .expect_err("restart policy");
    assert_invalid(
        err,
        "spec.template.spec.restartPolicy",
        "supported values: \"Always\"",
    );

    let (columns, rows) = table(&env, "/apis/apps/v1/namespaces/default/daemonsets").await;
    assert_eq!(
        columns,
        [
            "Name",
            "Desired",
            "Current",
            "Ready",
            "Up-to-date",
            "Available",
            "Node Selector",
            "Age",
            "Containers",
            "Images",
            "Selector"
        ]
    );
    assert_eq!(cell(&columns, &rows, "Desired"), &Value::from(0));
    assert_eq!(cell(&columns, &rows, "Node Selector"), "disk=ssd");
    assert_eq!(cell(&columns, &rows, "Selector"), "app=agent");
}

#[tokio::test]
async fn controller_revision_verbs_immutable_data_and_table() {
    let env = TestEnv::start().await.expect("start");
    let revs: Api<ControllerRevision> = Api::default_namespaced(env.client());
    // The owner must exist, or the garbage collector removes the revisions.
    let sts: Api<StatefulSet> = Api::default_namespaced(env.client());
    let owner = sts
        .create(&PostParams::default(), &statefulset("web"))
        .await
        .expect("owner");
    let uid = owner.metadata.uid.expect("uid");
    let rev = |name: &str| -> ControllerRevision {
        serde_json::from_value(json!({
            "metadata": {"name": name, "ownerReferences": [{
                "apiVersion": "apps/v1", "kind": "StatefulSet", "name": "web",
                "uid": uid, "controller": true}]},
            "data": {"spec": {"template": {"metadata": {"labels": {"app": "web"}}}}},
            "revision": 1
        }))
        .expect("valid ControllerRevision")
    };
    crud(&revs, &rev("tmp"), json!({"revision": 2})).await;
    revs.create(&PostParams::default(), &rev("web-1"))
        .await
        .expect("create");
    let err = revs
        .patch(
            "web-1",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"replicas": 2}})),
        )
        .await
        .expect_err("data is immutable");
    assert_invalid(err, "data", "field is immutable");
    let (columns, rows) = table(&env, "/apis/apps/v1/namespaces/default/controllerrevisions").await;
    assert_eq!(columns, ["Name", "Controller", "Revision", "Age"]);
    assert_eq!(cell(&columns, &rows, "Controller"), "statefulset.apps/web");
    assert_eq!(cell(&columns, &rows, "Revision"), &Value::from(1));
}
