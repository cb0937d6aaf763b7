//! autoscaling HorizontalPodAutoscaler against an in-process kore-apiserver: one object served
//! as v2 and v1 (converted both ways, v2-only parts kept in v1's annotations), defaults,
//! validation, the status subresource and kubectl's columns.

use crate::common::{assert_invalid, cell, crud, table};
use k8s_openapi::api::autoscaling::{v1, v2};
use kore_testenv::TestEnv;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

fn hpa_v2(name: &str) -> v2::HorizontalPodAutoscaler {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "maxReplicas": 5,
            "metrics": [
                {"type": "Resource", "resource": {"name": "memory",
                    "target": {"type": "AverageValue", "averageValue": "500Mi"}}},
                {"type": "Resource", "resource": {"name": "cpu",
                    "target": {"type": "Utilization", "averageUtilization": 60}}}
            ],
            "behavior": {"scaleDown": {"stabilizationWindowSeconds": 30}}
        }
    }))
    .expect("valid HPA")
}

fn hpa_v1(name: &str) -> v1::HorizontalPodAutoscaler {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "maxReplicas": 3
        }
    }))
    .expect("valid HPA")
}

#[tokio::test]
async fn hpa_v2_verbs_defaults_and_the_v1_view() {
    let env = TestEnv::start().await.expect("start");
    let hpas: Api<v2::HorizontalPodAutoscaler> = Api::default_namespaced(env.client());
    crud(&hpas, &hpa_v2("tmp"), json!({"spec": {"maxReplicas": 7}})).await;

    let created = hpas
        .create(&PostParams::default(), &hpa_v2("web"))
        .await
        .expect("create");
    let v = serde_json::to_value(&created).expect("json");
    assert_eq!(v["spec"]["minReplicas"], 1);
    let behavior = &v["spec"]["behavior"];
    assert_eq!(behavior["scaleDown"]["stabilizationWindowSeconds"], 30);
    assert_eq!(behavior["scaleDown"]["selectPolicy"], "Max");
    assert_eq!(
        behavior["scaleUp"],
        json!({"stabilizationWindowSeconds": 0, "selectPolicy": "Max", "policies": [
            {"type": "Pods", "value": 4, "periodSeconds": 15},
            {"type": "Percent", "value": 100, "periodSeconds": 15}]})
    );
    assert_eq!(v["status"], json!({"desiredReplicas": 0}));

    // The same object through autoscaling/v1: the CPU target in its field, the rest in
    // annotations.
    let old: Api<v1::HorizontalPodAutoscaler> = Api::default_namespaced(env.client());
    let seen = old.get("web").await.expect("v1 get");
    assert_eq!(
        seen.spec
            .as_ref()
            .expect("spec")
            .target_cpu_utilization_percentage,
        Some(60)
    );
    let ann = seen.metadata.annotations.clone().expect("annotations");
    let metrics: Value = serde_json::from_str(&ann["autoscaling.alpha.kubernetes.io/metrics"])
        .expect("metrics annotation");
    assert_eq!(
        metrics,
        json!([{"type": "Resource", "resource": {"name": "memory", "targetAverageValue": "500Mi"}}])
    );
    let behavior: Value =
        serde_json::from_str(&ann["autoscaling.alpha.kubernetes.io/behavior"]).expect("behavior");
    assert_eq!(behavior["ScaleDown"]["StabilizationWindowSeconds"], 30);

    // A v1 client writing the object back loses nothing of the v2 spec.
    let mut back = seen.clone();
    back.spec
        .as_mut()
        .expect("spec")
        .target_cpu_utilization_percentage = Some(70);
    old.replace("web", &PostParams::default(), &back)
        .await
        .expect("v1 replace");
    let now = hpas.get("web").await.expect("v2 get");
    let now = serde_json::to_value(&now).expect("json");
    assert_eq!(now["spec"]["metrics"][0]["resource"]["name"], "memory");
    assert_eq!(
        now["spec"]["metrics"][1]["resource"]["target"]["averageUtilization"],
        70
    );
    assert_eq!(
        now["spec"]["behavior"]["scaleDown"]["stabilizationWindowSeconds"],
        30
    );
    assert!(
        now["metadata"].get("annotations").is_none(),
        "annotations are not stored: {now}"
    );
}

#[tokio::test]
async fn hpa_created_through_v1_gets_v2_defaults() {
    let env = TestEnv::start().await.expect("start");
    let old: Api<v1::HorizontalPodAutoscaler> = Api::default_namespaced(env.client());
    let created = old
        .create(&PostParams::default(), &hpa_v1("api"))
        .await
        .expect("create v1");
    let spec = created.spec.as_ref().expect("spec");
    assert_eq!(spec.min_replicas, Some(1));
    assert_eq!(spec.target_cpu_utilization_percentage, Some(80));
    let status = created.status.as_ref().expect("status");
    assert_eq!((status.current_replicas, status.desired_replicas), (0, 0));
    let hpas: Api<v2::HorizontalPodAutoscaler> = Api::default_namespaced(env.client());
    let v = serde_json::to_value(hpas.get("api").await.expect("v2 get")).expect("json");
    assert_eq!(
        v["spec"]["metrics"],
        json!([{"type": "Resource", "resource": {"name": "cpu",
                "target": {"type": "Utilization", "averageUtilization": 80}}}])
    );
}

#[tokio::test]
async fn hpa_status_subresource_and_validation() {
    let env = TestEnv::start().await.expect("start");
    let hpas: Api<v2::HorizontalPodAutoscaler> = Api::default_namespaced(env.client());
    hpas.create(&PostParams::default(), &hpa_v2("web"))
        .await
        .expect("create");
    let status = json!({"status": {"currentReplicas": 3, "desiredReplicas": 4,
        "currentMetrics": [
            {"type": "Resource", "resource": {"name": "memory", "current": {"averageValue": "300Mi"}}},
            {"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": 42}}}],
        "conditions": [{"type": "AbleToScale", "status": "True", "reason": "ReadyForNewScale",
                        "lastTransitionTime": "2025-01-01T00:00:00Z"}]}});
    let patched = hpas
        .patch_status("web", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .expect("status patch");
    assert_eq!(
        patched.status.as_ref().expect("status").current_replicas,
        Some(3)
    );
    // A spec change through the main resource keeps the status.
    let patched = hpas
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"maxReplicas": 9}, "status": {"desiredReplicas": 1}})),
        )
        .await
        .expect("patch");
    assert_eq!(patched.status.as_ref().expect("status").desired_replicas, 4);

    // The v1 view of the status.
    let old: Api<v1::HorizontalPodAutoscaler> = Api::default_namespaced(env.client());
    let seen = old.get("web").await.expect("v1 get");
    let st = seen.status.as_ref().expect("status");
    assert_eq!(st.current_cpu_utilization_percentage, Some(42));
    let ann = seen.metadata.annotations.clone().expect("annotations");
    assert!(ann.contains_key("autoscaling.alpha.kubernetes.io/conditions"));
    assert!(ann.contains_key("autoscaling.alpha.kubernetes.io/current-metrics"));

    // Tables print both versions alike.
    for path in [
        "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers",
        "/apis/autoscaling/v1/namespaces/default/horizontalpodautoscalers",
    ] {
        let (columns, rows) = table(&env, path).await;
        assert_eq!(
            columns,
            [
                "Name",
                "Reference",
                "Targets",
                "MinPods",
                "MaxPods",
                "Replicas",
                "Age"
            ]
        );
        assert_eq!(cell(&columns, &rows, "Reference"), "Deployment/web");
        assert_eq!(
            cell(&columns, &rows, "Targets"),
            "memory: 300Mi/500Mi, cpu: 42%/60%"
        );
        assert_eq!(cell(&columns, &rows, "MinPods"), "1");
        assert_eq!(cell(&columns, &rows, "MaxPods"), 9);
        assert_eq!(cell(&columns, &rows, "Replicas"), 3);
    }

    let mut bad = serde_json::to_value(hpa_v2("bad")).expect("json");
    bad["spec"]["minReplicas"] = json!(4);
    bad["spec"]["maxReplicas"] = json!(2);
    let bad: v2::HorizontalPodAutoscaler = serde_json::from_value(bad).expect("typed");
    let err = hpas
        .create(&PostParams::default(), &bad)
        .await
        .expect_err("max below min");
    assert_invalid(
        err,
        "spec.maxReplicas",
        "must be greater than or equal to `minReplicas`",
    );
    let mut bad = hpa_v1("bad");
    bad.spec.as_mut().expect("spec").scale_target_ref.name = String::new();
    bad.spec.as_mut().expect("spec").min_replicas = Some(0);
    let old_err = old
        .create(&PostParams::default(), &bad)
        .await
        .expect_err("no target name");
    assert_invalid(old_err, "spec.scaleTargetRef.name", "Required");
    let mut bad = hpa_v1("bad");
    bad.spec.as_mut().expect("spec").min_replicas = Some(0);
    let old_err = old
        .create(&PostParams::default(), &bad)
        .await
        .expect_err("min 0");
    assert_invalid(
        old_err,
        "spec.minReplicas",
        "must be greater than or equal to 1",
    );
}
