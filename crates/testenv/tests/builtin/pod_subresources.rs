//! A pod's `ephemeralcontainers` and `resize` subresources against an in-process
//! kore-apiserver: each changes one part of the pod, with Kubernetes' checks.

use crate::common::assert_invalid;
use k8s_openapi::api::core::v1::Pod;
use kore_testenv::TestEnv;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

fn pod(name: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "app", "image": "nginx",
            "resources": {"requests": {"cpu": "100m", "memory": "64Mi"},
                          "limits": {"cpu": "200m", "memory": "128Mi"}}}]}
    }))
    .expect("valid Pod")
}

#[tokio::test]
async fn ephemeral_containers_are_added_and_nothing_else_changes() {
    let env = TestEnv::start().await.expect("start");
    let pods: Api<Pod> = Api::default_namespaced(env.client());
    pods.create(&PostParams::default(), &pod("p"))
        .await
        .expect("create");
    let patch = json!({"metadata": {"labels": {"app": "changed"}},
        "spec": {"ephemeralContainers": [{"name": "debug", "image": "busybox",
            "targetContainerName": "app", "stdin": true, "tty": true}]}});
    let got = pods
        .patch_ephemeral_containers("p", &PatchParams::default(), &Patch::Strategic(patch))
        .await
        .expect("add an ephemeral container");
    let spec = got.spec.as_ref().expect("spec");
    let eph = spec
        .ephemeral_containers
        .as_ref()
        .expect("ephemeral containers");
    assert_eq!(eph[0].name, "debug");
    assert_eq!(eph[0].target_container_name.as_deref(), Some("app"));
    assert_eq!(
        got.metadata.labels.as_ref().expect("labels")["app"],
        "web",
        "labels do not change through the subresource"
    );
    let read = pods.get_ephemeral_containers("p").await.expect("get");
    assert_eq!(read.metadata.uid, got.metadata.uid);

    // Changing or removing an existing one is refused; so are ports, and a second "app".
    let mut changed = got.clone();
    changed
        .spec
        .as_mut()
        .expect("spec")
        .ephemeral_containers
        .as_mut()
        .expect("list")[0]
        .image = Some("alpine".into());
    let err = pods
        .replace_ephemeral_containers("p", &PostParams::default(), &changed)
        .await
        .expect_err("changed");
    assert_invalid(err, "spec.ephemeralContainers[0]", "may not be changed");
    let mut removed = got.clone();
    removed.spec.as_mut().expect("spec").ephemeral_containers = Some(Vec::new());
    let err = pods
        .replace_ephemeral_containers("p", &PostParams::default(), &removed)
        .await
        .expect_err("removed");
    assert_invalid(err, "spec.ephemeralContainers[0]", "may not be removed");
    let patch = json!({"spec": {"ephemeralContainers": [
        {"name": "debug", "image": "busybox", "targetContainerName": "app", "stdin": true, "tty": true},
        {"name": "app", "image": "busybox", "ports": [{"containerPort": 80}]}]}});
    let err = pods
        .patch_ephemeral_containers("p", &PatchParams::default(), &Patch::Merge(patch))
        .await
        .expect_err("bad container");
    assert_invalid(err, "spec.ephemeralContainers[1].name", "Duplicate");
    let patch = json!({"spec": {"ephemeralContainers": [
        {"name": "debug", "image": "busybox", "targetContainerName": "app", "stdin": true, "tty": true},
        {"name": "two", "image": "busybox", "ports": [{"containerPort": 80}]}]}});
    let err = pods
        .patch_ephemeral_containers("p", &PatchParams::default(), &Patch::Merge(patch))
        .await
        .expect_err("ports");
    assert_invalid(
        err,
        "spec.ephemeralContainers[1].ports",
        "cannot be set for an Ephemeral Container",
    );
}

#[tokio::test]
async fn resize_changes_only_resources_and_keeps_the_qos_class() {
    let env = TestEnv::start().await.expect("start");
    let pods: Api<Pod> = Api::default_namespaced(env.client());
    pods.create(&PostParams::default(), &pod("p"))
        .await
        .expect("create");
    let patch = json!({"spec": {"containers": [{"name": "app", "image": "other",
        "resources": {"requests": {"cpu": "150m"}, "limits": {"cpu": "300m"}}}]}});
    let got = pods
        .patch_resize("p", &PatchParams::default(), &Patch::Strategic(patch))
        .await
        .expect("resize");
    let c = &got.spec.as_ref().expect("spec").containers[0];
    assert_eq!(c.image.as_deref(), Some("nginx"), "only resources change");
    let res = c.resources.as_ref().expect("resources");
    assert_eq!(res.limits.as_ref().expect("limits")["cpu"].0, "300m");
    assert_eq!(res.limits.as_ref().expect("limits")["memory"].0, "128Mi");
    assert_eq!(res.requests.as_ref().expect("requests")["cpu"].0, "150m");

    // Requests equal to limits everywhere would make the pod Guaranteed: refused.
    let patch = json!({"spec": {"containers": [{"name": "app",
        "resources": {"requests": {"cpu": "300m", "memory": "128Mi"}}}]}});
    let err = pods
        .patch_resize("p", &PatchParams::default(), &Patch::Strategic(patch))
        .await
        .expect_err("QoS change");
    assert_invalid(
        err,
        "spec",
        "Pod QOS Class may not change as a result of resizing",
    );
    // A plain update of the resources is still refused on the main resource.
    let patch = json!({"spec": {"containers": [{"name": "app",
        "resources": {"limits": {"cpu": "400m"}}}]}});
    let err = pods
        .patch("p", &PatchParams::default(), &Patch::Strategic(patch))
        .await
        .expect_err("not through the pod");
    assert_invalid(err, "spec", "pod updates may not change fields");
}
