//! Graceful pod deletion over the real API: a pod bound to a node and still running is marked
//! with a deletionTimestamp and kept for its grace period (its kubelet deletes it with grace 0);
//! an unbound or finished pod goes at once.

use k8s_openapi::api::core::v1::Pod;
use kore_testenv::TestEnv;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

fn pod(name: &str, grace: Option<i64>) -> Pod {
    let mut spec = json!({"containers": [{"name": "c", "image": "busybox"}]});
    if let Some(g) = grace {
        spec["terminationGracePeriodSeconds"] = json!(g);
    }
    serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).expect("valid pod")
}

async fn bound_pod(pods: &Api<Pod>, name: &str, grace: Option<i64>) {
    pods.create(&PostParams::default(), &pod(name, grace))
        .await
        .expect("create");
    let binding = json!({
        "apiVersion": "v1", "kind": "Binding",
        "metadata": {"name": name},
        "target": {"kind": "Node", "name": "n1"}
    });
    pods.create_subresource::<Value, Value>("binding", name, &PostParams::default(), &binding)
        .await
        .expect("bind");
}

fn grace_params(seconds: u32) -> DeleteParams {
    DeleteParams {
        grace_period_seconds: Some(seconds),
        ..DeleteParams::default()
    }
}

fn deletion(p: &Pod) -> (k8s_openapi::jiff::Timestamp, i64) {
    let ts = p
        .metadata
        .deletion_timestamp
        .as_ref()
        .expect("deletionTimestamp")
        .0;
    let ts: k8s_openapi::jiff::Timestamp = ts;
    let grace = p
        .metadata
        .deletion_grace_period_seconds
        .expect("deletionGracePeriodSeconds");
    (ts, grace)
}

#[tokio::test]
async fn a_running_pod_waits_for_its_grace_period_which_may_only_shrink() {
    let env = TestEnv::start().await.expect("start");
    let pods: Api<Pod> = Api::namespaced(env.client(), "default");
    bound_pod(&pods, "web", None).await;

    // The default grace period is spec.terminationGracePeriodSeconds (defaulted to 30).
    let before = k8s_openapi::jiff::Timestamp::now();
    let answer = pods
        .delete("web", &DeleteParams::default())
        .await
        .expect("delete");
    let marked = answer.left().expect("the pod, still there");
    let (ts, grace) = deletion(&marked);
    assert_eq!(grace, 30);
    let ahead = ts.duration_since(before).as_secs();
    assert!(
        (28..=32).contains(&ahead),
        "deletionTimestamp {ahead}s ahead"
    );
    assert!(pods.get_opt("web").await.expect("get").is_some());

    // A longer grace period changes nothing.
    let again = pods
        .delete("web", &grace_params(60))
        .await
        .expect("delete again")
        .left()
        .expect("still there");
    assert_eq!(deletion(&again), (ts, 30));

    // A shorter one moves the deletionTimestamp earlier by the difference.
    let shorter = pods
        .delete("web", &grace_params(10))
        .await
        .expect("shorten")
        .left()
        .expect("still there");
    let (ts10, grace10) = deletion(&shorter);
    assert_eq!(grace10, 10);
    assert_eq!(ts.duration_since(ts10).as_secs(), 20);

    // Status writes during the grace period do not remove it.
    let status = json!({"status": {"phase": "Running"}});
    pods.patch_status("web", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .expect("status");
    assert!(pods.get_opt("web").await.expect("get").is_some());

    // Grace 0 (what the kubelet sends once the containers stopped) removes it.
    let gone = pods.delete("web", &grace_params(0)).await.expect("force");
    assert!(gone.is_left(), "pods answer with the deleted object");
    assert!(pods.get_opt("web").await.expect("get").is_none());
}

#[tokio::test]
async fn the_request_grace_period_wins_over_the_pods() {
    let env = TestEnv::start().await.expect("start");
    let pods: Api<Pod> = Api::namespaced(env.client(), "default");
    bound_pod(&pods, "p", Some(120)).await;
    let marked = pods
        .delete("p", &grace_params(5))
        .await
        .expect("delete")
        .left()
        .expect("marked");
    assert_eq!(deletion(&marked).1, 5);
    bound_pod(&pods, "q", Some(7)).await;
    let marked = pods
        .delete("q", &DeleteParams::default())
        .await
        .expect("delete")
        .left()
        .expect("marked");
    assert_eq!(deletion(&marked).1, 7);
}

#[tokio::test]
async fn unbound_finished_and_zero_grace_pods_go_at_once() {
    let env = TestEnv::start().await.expect("start");
    let pods: Api<Pod> = Api::namespaced(env.client(), "default");

    // Not scheduled: nothing runs it.
    pods.create(&PostParams::default(), &pod("pending", None))
        .await
        .expect("create");
    pods.delete("pending", &DeleteParams::default())
        .await
        .expect("delete");
    assert!(pods.get_opt("pending").await.expect("get").is_none());

    // Terminal: nothing left to stop.
    bound_pod(&pods, "done", None).await;
    let status = json!({"status": {"phase": "Succeeded"}});
    pods.patch_status("done", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .expect("status");
    pods.delete("done", &DeleteParams::default())
        .await
        .expect("delete");
    assert!(pods.get_opt("done").await.expect("get").is_none());

    // Grace 0 on a running pod.
    bound_pod(&pods, "now", None).await;
    pods.delete("now", &grace_params(0)).await.expect("delete");
    assert!(pods.get_opt("now").await.expect("get").is_none());
}

#[tokio::test]
async fn a_finalizer_keeps_a_pod_deleted_with_grace_zero() {
    let env = TestEnv::start().await.expect("start");
    let pods: Api<Pod> = Api::namespaced(env.client(), "default");
    bound_pod(&pods, "held", None).await;
    let fin = json!({"metadata": {"finalizers": ["example.com/hold"]}});
    pods.patch("held", &PatchParams::default(), &Patch::Merge(&fin))
        .await
        .expect("finalizer");
    pods.delete("held", &DeleteParams::default())
        .await
        .expect("graceful");
    pods.delete("held", &grace_params(0)).await.expect("force");
    let p = pods.get("held").await.expect("still held");
    assert_eq!(deletion(&p).1, 0);
    let clear = json!({"metadata": {"finalizers": null}});
    pods.patch("held", &PatchParams::default(), &Patch::Merge(&clear))
        .await
        .expect("release");
    assert!(pods.get_opt("held").await.expect("get").is_none());
}

#[tokio::test]
async fn dry_run_marks_nothing() {
    let env = TestEnv::start().await.expect("start");
    let pods: Api<Pod> = Api::namespaced(env.client(), "default");
    bound_pod(&pods, "dry", None).await;
    let dp = DeleteParams {
        dry_run: true,
        ..DeleteParams::default()
    };
    let answer = pods.delete("dry", &dp).await.expect("dry run");
    let p = answer.left().expect("the pod");
    assert_eq!(deletion(&p).1, 30);
    let stored = pods.get("dry").await.expect("get");
    assert!(stored.metadata.deletion_timestamp.is_none());
}
