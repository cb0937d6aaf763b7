//! `pods/eviction` against an in-process kore-apiserver: PodDisruptionBudgets decide, as in
//! Kubernetes, whether a pod may be evicted, and an allowed eviction deletes the pod.

use crate::common::{api_error, raw};
use http::Method;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kore_testenv::TestEnv;
use kube::api::{Api, EvictParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

fn pod(name: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "c", "image": "nginx"}]}
    }))
    .expect("valid Pod")
}

/// Creates a pod and marks it Running and, if `ready`, Ready (no kubelet runs here).
async fn running_pod(pods: &Api<Pod>, name: &str, ready: bool) {
    pods.create(&PostParams::default(), &pod(name))
        .await
        .expect("create pod");
    let status = json!({"status": {"phase": "Running", "conditions": [
        {"type": "Ready", "status": if ready { "True" } else { "False" }}]}});
    pods.patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .expect("pod status");
}

/// Creates a budget over `app=web` whose status says it allows `allowed` disruptions.
async fn budget(env: &TestEnv, name: &str, allowed: i64, extra_spec: Value) {
    let pdbs: Api<PodDisruptionBudget> = Api::default_namespaced(env.client());
    let mut spec = json!({"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}});
    if let (Some(s), Some(extra)) = (spec.as_object_mut(), extra_spec.as_object()) {
        s.extend(extra.clone());
    }
    let pdb: PodDisruptionBudget =
        serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).expect("pdb");
    pdbs.create(&PostParams::default(), &pdb)
        .await
        .expect("create pdb");
    let status = json!({"status": {"observedGeneration": 1, "disruptionsAllowed": allowed,
        "currentHealthy": 2, "desiredHealthy": 1, "expectedPods": 2}});
    pdbs.patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .expect("pdb status");
}

/// Whether the pod is gone or on its way out.
async fn evicted(pods: &Api<Pod>, name: &str) -> bool {
    match pods.get_opt(name).await.expect("get") {
        None => true,
        Some(p) => p.metadata.deletion_timestamp.is_some(),
    }
}

#[tokio::test]
async fn eviction_spends_the_budget_then_answers_429() {
    let env = TestEnv::start().await.expect("start");
    let pods: Api<Pod> = Api::default_namespaced(env.client());
    running_pod(&pods, "a", true).await;
    running_pod(&pods, "b", true).await;
    budget(&env, "web", 1, json!({})).await;

    pods.evict("a", &EvictParams::default())
        .await
        .expect("first eviction is allowed");
    assert!(evicted(&pods, "a").await);
    let pdbs: Api<PodDisruptionBudget> = Api::default_namespaced(env.client());
    let pdb = pdbs.get("web").await.expect("pdb");
    let status = pdb.status.expect("status");
    assert_eq!(status.disruptions_allowed, 0);
    assert!(
        status
            .disrupted_pods
            .expect("disruptedPods")
            .contains_key("a")
    );

    let err = pods
        .evict("b", &EvictParams::default())
        .await
        .expect_err("the budget is spent");
    let status = api_error(err);
    assert_eq!(status.code, 429, "{status:?}");
    assert_eq!(status.reason, "TooManyRequests");
    assert_eq!(
        status.message,
        "Cannot evict pod as it would violate the pod's disruption budget."
    );
    let causes = status.details.expect("details").causes;
    assert_eq!(causes[0].reason, "DisruptionBudget");
    assert_eq!(
        causes[0].message,
        "The disruption budget web needs 1 healthy pods and has 2 currently"
    );
    assert!(!evicted(&pods, "b").await);
}

#[tokio::test]
async fn eviction_answers_201_and_honours_dry_run() {
    let env = TestEnv::start().await.expect("start");
    let pods: Api<Pod> = Api::default_namespaced(env.client());
    running_pod(&pods, "a", true).await;
    budget(&env, "web", 1, json!({})).await;
    let body = json!({"apiVersion": "policy/v1", "kind": "Eviction",
        "metadata": {"name": "a", "namespace": "default"}});
    let (code, status) = raw(
        &env,
        Method::POST,
        "/api/v1/namespaces/default/pods/a/eviction?dryRun=All",
        "application/json",
        Some(body.clone()),
    )
    .await;
    assert_eq!(
        (code, &status["status"]),
        (201, &json!("Success")),
        "{status}"
    );
    assert!(!evicted(&pods, "a").await, "a dry run deletes nothing");
    let pdbs: Api<PodDisruptionBudget> = Api::default_namespaced(env.client());
    let pdb = pdbs.get("web").await.expect("pdb");
    assert_eq!(pdb.status.expect("status").disruptions_allowed, 1);

    // A policy/v1beta1 body is accepted too.
    let mut old = body.clone();
    old["apiVersion"] = json!("policy/v1beta1");
    let (code, _) = raw(
        &env,
        Method::POST,
        "/api/v1/namespaces/default/pods/a/eviction",
        "application/json",
        Some(old),
    )
    .await;
    assert_eq!(code, 201);
    assert!(evicted(&pods, "a").await);

    // Errors: a name that differs from the URL's, a missing pod.
    let (code, status) = raw(
        &env,
        Method::POST,
        "/api/v1/namespaces/default/pods/other/eviction",
        "application/json",
        Some(body),
    )
    .await;
    assert_eq!(code, 400, "{status}");
    assert_eq!(
        status["message"],
        "name in URL does not match name in Eviction object"
    );
    let err = pods
        .evict("missing", &EvictParams::default())
        .await
        .expect_err("no such pod");
    assert_eq!(api_error(err).code, 404);
}

#[tokio::test]
async fn eviction_with_two_budgets_is_a_500_and_unready_pods_follow_the_policy() {
    let env = TestEnv::start().await.expect("start");
    let pods: Api<Pod> = Api::default_namespaced(env.client());
    running_pod(&pods, "a", true).await;
    budget(&env, "one", 1, json!({})).await;
    budget(&env, "two", 1, json!({})).await;
    let err = pods
        .evict("a", &EvictParams::default())
        .await
        .expect_err("two budgets");
    let status = api_error(err);
    assert_eq!(status.code, 500, "{status:?}");
    assert_eq!(
        status.message,
        "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."
    );

    // One budget that allows nothing: an unready pod still goes under AlwaysAllow.
    let env = TestEnv::start().await.expect("start");
    let pods: Api<Pod> = Api::default_namespaced(env.client());
    running_pod(&pods, "sick", false).await;
    running_pod(&pods, "fine", true).await;
    budget(
        &env,
        "web",
        0,
        json!({"unhealthyPodEvictionPolicy": "AlwaysAllow"}),
    )
    .await;
    pods.evict("sick", &EvictParams::default())
        .await
        .expect("an unready pod is evicted under AlwaysAllow");
    assert!(evicted(&pods, "sick").await);
    let err = pods
        .evict("fine", &EvictParams::default())
        .await
        .expect_err("a ready pod needs the budget");
    assert_eq!(api_error(err).code, 429);

    // A pending pod disrupts nothing: no budget is consulted.
    pods.create(&PostParams::default(), &pod("new"))
        .await
        .expect("create");
    pods.evict("new", &EvictParams::default())
        .await
        .expect("a pending pod is evicted");
    assert!(evicted(&pods, "new").await);
}
