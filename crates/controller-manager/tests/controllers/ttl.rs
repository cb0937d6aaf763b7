//! The TTL-after-finished controller against kore-apiserver: a finished Job with
//! `ttlSecondsAfterFinished` is deleted after its TTL, its pods with it (the server's garbage
//! collector, foreground), a Job without a TTL stays, and lowering the TTL of a finished Job
//! deletes it.

use std::sync::Arc;

use crate::common::{Cluster, Fate, NS, wait_for_value};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kore_controller_manager::Options;
use kore_controller_manager::job::is_complete;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

fn job(name: &str, extra: Value) -> anyhow::Result<Job> {
    let mut spec = json!({
        "template": {"spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "c", "image": "busybox"}],
        }},
    });
    if let (Some(spec), Some(extra)) = (spec.as_object_mut(), extra.as_object()) {
        spec.extend(extra.clone());
    }
    Ok(serde_json::from_value(json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": NS},
        "spec": spec,
    }))?)
}

async fn pods_of(c: &Cluster, name: &str) -> anyhow::Result<Vec<Pod>> {
    let api: Api<Pod> = Api::namespaced(c.client.clone(), NS);
    let selector = format!("batch.kubernetes.io/job-name={name}");
    Ok(api
        .list(&ListParams::default().labels(&selector))
        .await?
        .items)
}

/// Waits until the Job `name` and its pods are gone.
async fn wait_gone(c: &Cluster, name: &str) -> anyhow::Result<()> {
    let jobs: Api<Job> = Api::namespaced(c.client.clone(), NS);
    wait_for_value(|| async {
        let gone = jobs.get_opt(name).await.ok()?.is_none();
        let pods = pods_of(c, name).await.ok()?;
        (gone && pods.is_empty()).then_some(())
    })
    .await
}

#[tokio::test]
async fn a_job_with_ttl_0_is_deleted_with_its_pods_once_it_completes() -> anyhow::Result<()> {
    let c = Cluster::start_with(Options::default(), Arc::new(|_: &Pod| Fate::Succeed)).await?;
    let jobs: Api<Job> = Api::namespaced(c.client.clone(), NS);
    jobs.create(
        &PostParams::default(),
        &job("brief", json!({"ttlSecondsAfterFinished": 0}))?,
    )
    .await?;
    jobs.create(&PostParams::default(), &job("kept", json!({}))?)
        .await?;
    // The pod ran: the Job existed with a pod before it went.
    wait_for_value(|| async {
        let gone = jobs.get_opt("brief").await.ok()?.is_none();
        let ran = !pods_of(&c, "brief").await.ok()?.is_empty();
        (gone || ran).then_some(())
    })
    .await?;
    wait_gone(&c, "brief").await?;
    // A Job without a TTL stays once it completes.
    let kept = c
        .wait_object::<Job, _>("kept", |j| is_complete(j).then(|| j.clone()))
        .await?;
    assert!(kept.metadata.deletion_timestamp.is_none());
    c.stop().await
}

#[tokio::test]
async fn a_job_on_simulated_nodes_with_ttl_1_goes_a_second_after_it_completes() -> anyhow::Result<()>
{
    let c = Cluster::start().await?.without_kubelet();
    let sim = c.env.start_simulation(1).await?;
    let jobs: Api<Job> = Api::namespaced(c.client.clone(), NS);
    jobs.create(
        &PostParams::default(),
        &job(
            "short",
            json!({"ttlSecondsAfterFinished": 1, "completions": 2}),
        )?,
    )
    .await?;
    // It completes first (its pods ran on the node), then it is deleted with them.
    let done = c
        .wait_object::<Job, _>("short", |j| is_complete(j).then(|| j.clone()))
        .await?;
    assert_eq!(done.status.as_ref().and_then(|s| s.succeeded), Some(2));
    assert_eq!(pods_of(&c, "short").await?.len(), 2);
    wait_gone(&c, "short").await?;
    drop(sim);
    c.stop().await
}

#[tokio::test]
async fn lowering_the_ttl_of_a_finished_job_deletes_it() -> anyhow::Result<()> {
    let c = Cluster::start_with(Options::default(), Arc::new(|_: &Pod| Fate::Succeed)).await?;
    let jobs: Api<Job> = Api::namespaced(c.client.clone(), NS);
    jobs.create(
        &PostParams::default(),
        &job("lasting", json!({"ttlSecondsAfterFinished": 3600}))?,
    )
    .await?;
    c.wait_object::<Job, _>("lasting", |j| is_complete(j).then_some(()))
        .await?;
    jobs.patch(
        "lasting",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"ttlSecondsAfterFinished": 0}})),
    )
    .await?;
    wait_gone(&c, "lasting").await?;
    c.stop().await
}
