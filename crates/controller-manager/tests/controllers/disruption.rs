//! The disruption controller against kore-apiserver with simulated nodes: a
//! PodDisruptionBudget's status over a Deployment's pods, for minAvailable and
//! maxUnavailable as numbers and percentages, and the API server's eviction refusing, then
//! allowing, once the controller has computed it.

use crate::common::{Cluster, NS, wait_for_value};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, EvictParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

fn deployment(name: &str, replicas: i32) -> anyhow::Result<Deployment> {
    Ok(serde_json::from_value(json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "c", "image": "db:1"}]},
            },
        },
    }))?)
}

fn pdb(name: &str, app: &str, spec: Value) -> anyhow::Result<PodDisruptionBudget> {
    let mut spec = spec;
    spec["selector"] = json!({"matchLabels": {"app": app}});
    Ok(serde_json::from_value(json!({
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": NS},
        "spec": spec,
    }))?)
}

/// `(expectedPods, desiredHealthy, currentHealthy, disruptionsAllowed)` once the status
/// reflects the budget's generation.
fn counts(p: &PodDisruptionBudget) -> Option<(i32, i32, i32, i32)> {
    let s = p.status.as_ref()?;
    (s.observed_generation == p.metadata.generation).then_some((
        s.expected_pods,
        s.desired_healthy,
        s.current_healthy,
        s.disruptions_allowed,
    ))
}

fn condition(p: &PodDisruptionBudget) -> Option<(String, String)> {
    p.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "DisruptionAllowed")
        .map(|c| (c.status.clone(), c.reason.clone()))
}

async fn wait_counts(
    c: &Cluster,
    name: &str,
    want: (i32, i32, i32, i32),
) -> anyhow::Result<PodDisruptionBudget> {
    c.wait_object::<PodDisruptionBudget, _>(name, |p| (counts(p) == Some(want)).then(|| p.clone()))
        .await
}

async fn patch_spec(c: &Cluster, name: &str, spec: Value) -> anyhow::Result<()> {
    let api: Api<PodDisruptionBudget> = Api::namespaced(c.client.clone(), NS);
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": spec})),
    )
    .await?;
    Ok(())
}

async fn ready_pods(c: &Cluster, app: &str, n: usize) -> anyhow::Result<Vec<Pod>> {
    wait_for_value(|| async {
        c.active_pods(&format!("app={app}"))
            .await
            .ok()
            .filter(|p| p.len() == n && p.iter().all(kore_controller_manager::pods::is_ready))
    })
    .await
}

#[tokio::test]
async fn a_budget_over_a_deployment_gets_its_status_and_gates_evictions() -> anyhow::Result<()> {
    let c = Cluster::start().await?.without_kubelet();
    let sim = c.env.start_simulation(2).await?;
    let deployments: Api<Deployment> = Api::namespaced(c.client.clone(), NS);
    deployments
        .create(&PostParams::default(), &deployment("db", 3)?)
        .await?;
    let pods = ready_pods(&c, "db", 3).await?;
    let budgets: Api<PodDisruptionBudget> = Api::namespaced(c.client.clone(), NS);
    budgets
        .create(
            &PostParams::default(),
            &pdb("db", "db", json!({"minAvailable": 2}))?,
        )
        .await?;
    let p = wait_counts(&c, "db", (3, 2, 3, 1)).await?;
    assert_eq!(
        condition(&p),
        Some(("True".into(), "SufficientPods".into()))
    );

    // Percentages and maxUnavailable use the Deployment's scale: 50% of 3 rounds up to 2.
    patch_spec(&c, "db", json!({"minAvailable": "50%"})).await?;
    wait_counts(&c, "db", (3, 2, 3, 1)).await?;
    patch_spec(
        &c,
        "db",
        json!({"minAvailable": null, "maxUnavailable": "50%"}),
    )
    .await?;
    wait_counts(&c, "db", (3, 1, 3, 2)).await?;
    patch_spec(&c, "db", json!({"maxUnavailable": 0})).await?;
    let p = wait_counts(&c, "db", (3, 3, 3, 0)).await?;
    assert_eq!(
        condition(&p),
        Some(("False".into(), "InsufficientPods".into()))
    );

    // No disruption allowed: the API server refuses the eviction with 429.
    let pod_api: Api<Pod> = Api::namespaced(c.client.clone(), NS);
    let victim = pods[0].metadata.name.clone().unwrap_or_default();
    match pod_api.evict(&victim, &EvictParams::default()).await {
        Err(kube::Error::Api(s)) => assert_eq!(s.code, 429, "{s:?}"),
        other => panic!("the eviction should be refused: {other:?}"),
    }

    // Once the controller has caught up with a looser budget, it goes through.
    patch_spec(&c, "db", json!({"maxUnavailable": 1})).await?;
    wait_counts(&c, "db", (3, 2, 3, 1)).await?;
    pod_api.evict(&victim, &EvictParams::default()).await?;
    // The eviction spent the budget; the controller drops the pod from disruptedPods once it
    // is being deleted, and counts the replacement when it is ready.
    ready_pods(&c, "db", 3).await?;
    let p = wait_counts(&c, "db", (3, 2, 3, 1)).await?;
    let disrupted = p.status.and_then(|s| s.disrupted_pods).unwrap_or_default();
    assert!(disrupted.is_empty(), "{disrupted:?}");
    drop(sim);
    c.stop().await
}

#[tokio::test]
async fn a_budget_without_pods_allows_nothing() -> anyhow::Result<()> {
    let c = Cluster::start().await?;
    let budgets: Api<PodDisruptionBudget> = Api::namespaced(c.client.clone(), NS);
    budgets
        .create(
            &PostParams::default(),
            &pdb("none", "nothing", json!({"maxUnavailable": "10%"}))?,
        )
        .await?;
    let p = wait_counts(&c, "none", (0, 0, 0, 0)).await?;
    assert_eq!(
        condition(&p),
        Some(("False".into(), "InsufficientPods".into()))
    );
    c.stop().await
}

#[tokio::test]
async fn a_budget_whose_pods_controller_cannot_be_found_fails_safe() -> anyhow::Result<()> {
    let c = Cluster::start().await?;
    // A pod controlled by an object without a scale (a ConfigMap): a percentage cannot be
    // resolved.
    let cms: Api<ConfigMap> = Api::namespaced(c.client.clone(), NS);
    let cm = cms
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "owner", "namespace": NS}}))?,
        )
        .await?;
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "orphan", "namespace": NS, "labels": {"app": "lost"},
                     "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner",
                                          "uid": cm.metadata.uid, "controller": true}]},
        "spec": {"containers": [{"name": "c", "image": "lost:1"}]},
    }))?;
    let pods: Api<Pod> = Api::namespaced(c.client.clone(), NS);
    pods.create(&PostParams::default(), &pod).await?;
    let budgets: Api<PodDisruptionBudget> = Api::namespaced(c.client.clone(), NS);
    budgets
        .create(
            &PostParams::default(),
            &pdb("lost", "lost", json!({"minAvailable": "50%"}))?,
        )
        .await?;
    let p = c
        .wait_object::<PodDisruptionBudget, _>("lost", |p| {
            (condition(p).map(|c| c.1).as_deref() == Some("SyncFailed")).then(|| p.clone())
        })
        .await?;
    let status = p.status.unwrap_or_default();
    assert_eq!(status.disruptions_allowed, 0);
    let message = status
        .conditions
        .unwrap_or_default()
        .into_iter()
        .find(|c| c.type_ == "DisruptionAllowed")
        .map(|c| c.message)
        .unwrap_or_default();
    assert!(
        message.contains("found no controllers for pod \"orphan\""),
        "{message}"
    );

    // An integer minAvailable needs no scale: the budget recovers.
    patch_spec(&c, "lost", json!({"minAvailable": 0})).await?;
    let p = wait_counts(&c, "lost", (1, 0, 1, 1)).await?;
    assert_eq!(
        condition(&p),
        Some(("True".into(), "SufficientPods".into()))
    );
    c.stop().await
}
