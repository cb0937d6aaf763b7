//! The Job controller against kore-apiserver: completions and parallelism, Indexed Jobs,
//! backoffLimit, suspend, and pod tracking with the job-tracking finalizer.

use std::sync::Arc;

use crate::common::{Cluster, Fate, NS};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kore_controller_manager::Options;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

fn job(name: &str, spec: Value) -> anyhow::Result<Job> {
    let mut spec = spec;
    spec["template"] = json!({
        "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]},
    });
    Ok(serde_json::from_value(json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": NS},
        "spec": spec,
    }))?)
}

/// Pods of Jobs named `fail*` fail; the others succeed.
async fn cluster() -> anyhow::Result<Cluster> {
    let fate = Arc::new(|p: &Pod| {
        let job = p
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("batch.kubernetes.io/job-name"))
            .cloned()
            .unwrap_or_default();
        if job.starts_with("fail") {
            Fate::Fail
        } else {
            Fate::Succeed
        }
    });
    Cluster::start_with(Options::default(), fate).await
}

fn condition(j: &Job, type_: &str) -> Option<(String, String)> {
    j.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| (c.status.clone(), c.reason.clone().unwrap_or_default()))
}

async fn wait_condition(c: &Cluster, name: &str, type_: &str) -> anyhow::Result<Job> {
    c.wait_object::<Job, _>(name, |j| {
        (condition(j, type_).map(|c| c.0) == Some("True".into())).then(|| j.clone())
    })
    .await
}

async fn pods_of(c: &Cluster, name: &str) -> anyhow::Result<Vec<Pod>> {
    let api: Api<Pod> = Api::namespaced(c.client.clone(), NS);
    Ok(api
        .list(&ListParams::default().labels(&format!("batch.kubernetes.io/job-name={name}")))
        .await?
        .items)
}

#[tokio::test]
async fn a_job_with_completions_3_and_parallelism_2_runs_three_pods_and_completes()
-> anyhow::Result<()> {
    let c = cluster().await?;
    let api: Api<Job> = Api::namespaced(c.client.clone(), NS);
    api.create(
        &PostParams::default(),
        &job("work", json!({"completions": 3, "parallelism": 2}))?,
    )
    .await?;
    let j = wait_condition(&c, "work", "Complete").await?;
    let s = j.status.clone().unwrap_or_default();
    assert_eq!(s.succeeded, Some(3));
    assert_eq!(s.failed.unwrap_or(0), 0);
    assert!(s.completion_time.is_some() && s.start_time.is_some());
    assert_eq!(
        condition(&j, "Complete"),
        Some(("True".into(), "CompletionsReached".into()))
    );
    assert_eq!(
        condition(&j, "SuccessCriteriaMet"),
        Some(("True".into(), "CompletionsReached".into()))
    );
    let pods = pods_of(&c, "work").await?;
    assert_eq!(pods.len(), 3, "one pod per completion");
    for p in &pods {
        assert!(
            !p.metadata
                .finalizers
                .iter()
                .flatten()
                .any(|f| f == "batch.kubernetes.io/job-tracking"),
            "counted pods are released"
        );
    }
    c.stop().await
}

#[tokio::test]
async fn an_indexed_job_runs_one_pod_per_index() -> anyhow::Result<()> {
    let c = cluster().await?;
    let api: Api<Job> = Api::namespaced(c.client.clone(), NS);
    api.create(
        &PostParams::default(),
        &job(
            "indexed",
            json!({"completions": 3, "parallelism": 3, "completionMode": "Indexed"}),
        )?,
    )
    .await?;
    let j = wait_condition(&c, "indexed", "Complete").await?;
    let s = j.status.clone().unwrap_or_default();
    assert_eq!(s.completed_indexes.as_deref(), Some("0-2"));
    assert_eq!(s.succeeded, Some(3));
    let mut indexes: Vec<String> = pods_of(&c, "indexed")
        .await?
        .iter()
        .filter_map(|p| {
            p.metadata
                .annotations
                .as_ref()?
                .get("batch.kubernetes.io/job-completion-index")
                .cloned()
        })
        .collect();
    indexes.sort();
    assert_eq!(indexes, ["0", "1", "2"]);
    c.stop().await
}

#[tokio::test]
async fn a_job_whose_pod_fails_beyond_the_backoff_limit_fails() -> anyhow::Result<()> {
    let c = cluster().await?;
    let api: Api<Job> = Api::namespaced(c.client.clone(), NS);
    api.create(
        &PostParams::default(),
        &job("failing", json!({"backoffLimit": 0}))?,
    )
    .await?;
    let j = wait_condition(&c, "failing", "Failed").await?;
    assert_eq!(
        condition(&j, "Failed"),
        Some(("True".into(), "BackoffLimitExceeded".into()))
    );
    assert_eq!(
        condition(&j, "FailureTarget"),
        Some(("True".into(), "BackoffLimitExceeded".into()))
    );
    assert_eq!(j.status.as_ref().and_then(|s| s.failed), Some(1));
    assert!(condition(&j, "Complete").is_none());
    assert_eq!(
        pods_of(&c, "failing").await?.len(),
        1,
        "no retry beyond the limit"
    );
    c.stop().await
}

#[tokio::test]
async fn a_suspended_job_runs_nothing_until_resumed() -> anyhow::Result<()> {
    let c = cluster().await?;
    let api: Api<Job> = Api::namespaced(c.client.clone(), NS);
    api.create(
        &PostParams::default(),
        &job("later", json!({"suspend": true, "completions": 2}))?,
    )
    .await?;
    let j = wait_condition(&c, "later", "Suspended").await?;
    assert_eq!(
        condition(&j, "Suspended"),
        Some(("True".into(), "JobSuspended".into()))
    );
    assert!(pods_of(&c, "later").await?.is_empty());
    api.patch(
        "later",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"suspend": false}})),
    )
    .await?;
    let j = wait_condition(&c, "later", "Complete").await?;
    assert_eq!(
        condition(&j, "Suspended"),
        Some(("False".into(), "JobResumed".into()))
    );
    assert_eq!(j.status.as_ref().and_then(|s| s.succeeded), Some(2));
    c.stop().await
}
