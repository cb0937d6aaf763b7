//! The Job controller against kore-apiserver: completions and parallelism, Indexed Jobs,
//! backoffLimit, suspend, pod tracking with the job-tracking finalizer, the pod failure and
//! success policies, backoffLimitPerIndex, adoption of orphans and `kubectl wait`.

use std::sync::Arc;
use std::time::Duration;

use crate::common::{Cluster, Fate, NS, wait_for_value};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kore_controller_manager::Options;
use kore_testenv::TestEnv;
use kore_testenv::kubectl::{Kubectl, kubectl_or_skip};
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

/// Options whose Job backoff after a failed pod takes milliseconds.
fn quick_backoff() -> Options {
    let mut options = Options::default();
    options.job_pod_failure_backoff = Duration::from_millis(20);
    options
}

/// A Job whose pods the simulated kubelet ends after 100 ms with `exit_code`.
fn exiting_job(name: &str, exit_code: i32, spec: Value) -> anyhow::Result<Job> {
    let mut j = job(name, spec)?;
    j.spec
        .as_mut()
        .ok_or_else(|| anyhow::anyhow!("a spec"))?
        .template
        .metadata = Some(serde_json::from_value(json!({"annotations": {
        "kore.dev/exit-after": "100ms",
        "kore.dev/exit-code": exit_code.to_string(),
    }}))?);
    Ok(j)
}

fn message(j: &Job, type_: &str) -> String {
    j.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == type_))
        .and_then(|c| c.message.clone())
        .unwrap_or_default()
}

fn has_tracking_finalizer(p: &Pod) -> bool {
    p.metadata
        .finalizers
        .iter()
        .flatten()
        .any(|f| f == "batch.kubernetes.io/job-tracking")
}

#[tokio::test]
async fn a_fail_job_rule_on_exit_code_42_fails_the_job_at_once() -> anyhow::Result<()> {
    let c = Cluster::start_with(quick_backoff(), Arc::new(|_: &Pod| Fate::Pending))
        .await?
        .without_kubelet();
    let sim = c.env.start_simulation(1).await?;
    let api: Api<Job> = Api::namespaced(c.client.clone(), NS);
    let spec = json!({"backoffLimit": 6, "podFailurePolicy": {"rules": [
        {"action": "FailJob", "onExitCodes": {"operator": "In", "values": [42]}},
    ]}});
    api.create(&PostParams::default(), &exiting_job("fatal", 42, spec)?)
        .await?;
    let j = wait_condition(&c, "fatal", "Failed").await?;
    assert_eq!(
        condition(&j, "Failed"),
        Some(("True".into(), "PodFailurePolicy".into()))
    );
    assert_eq!(
        condition(&j, "FailureTarget"),
        Some(("True".into(), "PodFailurePolicy".into()))
    );
    let pods = pods_of(&c, "fatal").await?;
    assert_eq!(pods.len(), 1, "no retry after a FailJob rule matched");
    let pod = pods[0].metadata.name.clone().unwrap_or_default();
    assert_eq!(
        message(&j, "Failed"),
        format!(
            "Container c for pod {NS}/{pod} failed with exit code 42 matching FailJob rule at index 0"
        )
    );
    assert_eq!(j.status.as_ref().and_then(|s| s.failed), Some(1));
    drop(sim);
    c.stop().await
}

#[tokio::test]
async fn a_failure_an_ignore_rule_matches_by_condition_does_not_count() -> anyhow::Result<()> {
    let c = Cluster::start_with(quick_backoff(), Arc::new(|_: &Pod| Fate::Pending)).await?;
    let api: Api<Job> = Api::namespaced(c.client.clone(), NS);
    let spec = json!({"backoffLimit": 0, "podFailurePolicy": {"rules": [
        {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
    ]}});
    api.create(&PostParams::default(), &job("disrupted", spec)?)
        .await?;
    let pods: Api<Pod> = Api::namespaced(c.client.clone(), NS);
    let first = wait_for_value(|| async {
        pods_of(&c, "disrupted")
            .await
            .ok()?
            .first()?
            .metadata
            .name
            .clone()
    })
    .await?;
    let now = k8s_openapi::jiff::Timestamp::now().to_string();
    let disrupted = json!({"status": {"phase": "Failed", "conditions": [{
        "type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI",
        "lastTransitionTime": now,
    }]}});
    pods.patch_status(&first, &PatchParams::default(), &Patch::Merge(&disrupted))
        .await?;
    let second = wait_for_value(|| async {
        pods_of(&c, "disrupted")
            .await
            .ok()?
            .into_iter()
            .filter_map(|p| p.metadata.name)
            .find(|n| *n != first)
    })
    .await?;
    let done = json!({"status": {"phase": "Succeeded"}});
    pods.patch_status(&second, &PatchParams::default(), &Patch::Merge(&done))
        .await?;
    let j = wait_condition(&c, "disrupted", "Complete").await?;
    assert_eq!(
        j.status.as_ref().and_then(|s| s.failed).unwrap_or(0),
        0,
        "the ignored failure is not counted"
    );
    assert!(condition(&j, "Failed").is_none());
    let first_pod = pods.get(&first).await?;
    assert!(
        !has_tracking_finalizer(&first_pod),
        "the ignored pod is released"
    );
    c.stop().await
}

#[tokio::test]
async fn an_indexed_job_with_backoff_limit_per_index_marks_failed_indexes() -> anyhow::Result<()> {
    let c = Cluster::start_with(quick_backoff(), Arc::new(|_: &Pod| Fate::Pending))
        .await?
        .without_kubelet();
    let sim = c.env.start_simulation(1).await?;
    let api: Api<Job> = Api::namespaced(c.client.clone(), NS);
    let spec = json!({"completions": 2, "parallelism": 2, "completionMode": "Indexed",
        "backoffLimitPerIndex": 1});
    api.create(&PostParams::default(), &exiting_job("per-index", 1, spec)?)
        .await?;
    let j = wait_condition(&c, "per-index", "Failed").await?;
    assert_eq!(
        condition(&j, "Failed"),
        Some(("True".into(), "FailedIndexes".into()))
    );
    assert_eq!(message(&j, "Failed"), "Job has failed indexes");
    let s = j.status.clone().unwrap_or_default();
    assert_eq!(s.failed_indexes.as_deref(), Some("0-1"));
    assert_eq!(s.failed, Some(4), "two tries per index");
    let mut counts: Vec<(String, String)> = pods_of(&c, "per-index")
        .await?
        .iter()
        .filter_map(|p| {
            let a = p.metadata.annotations.as_ref()?;
            Some((
                a.get("batch.kubernetes.io/job-completion-index")?.clone(),
                a.get("batch.kubernetes.io/job-index-failure-count")?
                    .clone(),
            ))
        })
        .collect();
    counts.sort();
    assert_eq!(
        counts,
        [("0", "0"), ("0", "1"), ("1", "0"), ("1", "1")].map(|(a, b)| (a.into(), b.into()))
    );
    drop(sim);
    c.stop().await
}

#[tokio::test]
async fn a_success_policy_on_index_0_completes_when_index_0_succeeds() -> anyhow::Result<()> {
    let fate = Arc::new(|p: &Pod| {
        let index = p
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get("batch.kubernetes.io/job-completion-index"))
            .cloned();
        if index.as_deref() == Some("0") {
            Fate::Succeed
        } else {
            Fate::Ready
        }
    });
    let c = Cluster::start_with(Options::default(), fate).await?;
    let api: Api<Job> = Api::namespaced(c.client.clone(), NS);
    let spec = json!({"completions": 3, "parallelism": 3, "completionMode": "Indexed",
        "successPolicy": {"rules": [{"succeededIndexes": "0"}]}});
    api.create(&PostParams::default(), &job("leader", spec)?)
        .await?;
    let j = wait_condition(&c, "leader", "Complete").await?;
    assert_eq!(
        condition(&j, "Complete"),
        Some(("True".into(), "SuccessPolicy".into()))
    );
    assert_eq!(
        condition(&j, "SuccessCriteriaMet"),
        Some(("True".into(), "SuccessPolicy".into()))
    );
    assert_eq!(
        message(&j, "SuccessCriteriaMet"),
        "Matched rules at index 0"
    );
    let s = j.status.clone().unwrap_or_default();
    assert_eq!(s.completed_indexes.as_deref(), Some("0"));
    assert_eq!(s.succeeded, Some(1));
    assert!(
        c.active_pods("batch.kubernetes.io/job-name=leader")
            .await?
            .is_empty(),
        "the other indexes' pods are terminated"
    );
    c.stop().await
}

#[tokio::test]
async fn an_orphan_pod_matching_the_selector_is_adopted_and_counted() -> anyhow::Result<()> {
    let env = TestEnv::start().await?;
    let pods: Api<Pod> = Api::namespaced(env.client(), NS);
    let stray: Pod = serde_json::from_value(json!({
        "metadata": {"name": "stray", "labels": {"app": "stray"}},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]},
    }))?;
    pods.create(&PostParams::default(), &stray).await?;
    let c = Cluster::start_on(env, Options::default(), Arc::new(|_: &Pod| Fate::Ready)).await?;
    let api: Api<Job> = Api::namespaced(c.client.clone(), NS);
    let mut adopter = job(
        "adopter",
        json!({"manualSelector": true,
        "selector": {"matchLabels": {"app": "stray"}}}),
    )?;
    if let Some(spec) = adopter.spec.as_mut() {
        spec.template.metadata = Some(serde_json::from_value(json!({"labels": {"app": "stray"}}))?);
    }
    let created = api.create(&PostParams::default(), &adopter).await?;
    let uid = created.metadata.uid.clone().unwrap_or_default();
    let adopted = c
        .wait_object::<Pod, _>("stray", |p| {
            let owned = p
                .metadata
                .owner_references
                .iter()
                .flatten()
                .any(|r| r.uid == uid && r.controller == Some(true) && r.kind == "Job");
            (owned && has_tracking_finalizer(p)).then(|| p.clone())
        })
        .await?;
    assert_eq!(adopted.metadata.name.as_deref(), Some("stray"));
    pods.patch_status(
        "stray",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": "Succeeded"}})),
    )
    .await?;
    let j = wait_condition(&c, "adopter", "Complete").await?;
    assert_eq!(j.status.as_ref().and_then(|s| s.succeeded), Some(1));
    let all = pods
        .list(&ListParams::default().labels("app=stray"))
        .await?
        .items;
    assert_eq!(
        crate::common::names(&all),
        ["stray"],
        "the adopted pod counts toward parallelism: no other pod was created"
    );
    c.stop().await
}

const WAITED_JOB: &str = r"
apiVersion: batch/v1
kind: Job
metadata:
  name: x
  namespace: default
spec:
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: c
        image: busybox
";

#[tokio::test]
async fn kubectl_wait_for_condition_complete_returns_when_the_job_completes() -> anyhow::Result<()>
{
    let Some(program) = kubectl_or_skip() else {
        return Ok(());
    };
    let env = TestEnv::builder().tcp().start().await?;
    let kubectl = Kubectl::for_env(program, &env);
    let c = Cluster::start_on(env, Options::default(), Arc::new(|_: &Pod| Fate::Succeed)).await?;
    let file = kubectl.file("job.yaml", WAITED_JOB);
    kubectl.ok(&["apply", "-f", &file]).await;
    let out = kubectl
        .ok(&["wait", "--for=condition=complete", "job/x", "--timeout=60s"])
        .await;
    assert!(out.contains("condition met"), "{out}");
    c.stop().await
}

#[tokio::test]
async fn with_pod_replacement_policy_failed_a_terminating_pod_is_replaced_once_it_failed()
-> anyhow::Result<()> {
    let c = Cluster::start_with(quick_backoff(), Arc::new(|_: &Pod| Fate::Ready)).await?;
    let api: Api<Job> = Api::namespaced(c.client.clone(), NS);
    api.create(
        &PostParams::default(),
        &job("patient", json!({"podReplacementPolicy": "Failed"}))?,
    )
    .await?;
    let pods: Api<Pod> = Api::namespaced(c.client.clone(), NS);
    let first = wait_for_value(|| async {
        pods_of(&c, "patient")
            .await
            .ok()?
            .first()?
            .metadata
            .name
            .clone()
    })
    .await?;
    pods.delete(&first, &Default::default()).await?;
    let j = c
        .wait_object::<Job, _>("patient", |j| {
            (j.status.as_ref()?.terminating == Some(1)).then(|| j.clone())
        })
        .await?;
    assert_eq!(j.status.as_ref().and_then(|s| s.failed).unwrap_or(0), 0);
    assert_eq!(
        pods_of(&c, "patient").await?.len(),
        1,
        "no replacement while the pod terminates"
    );
    pods.patch_status(
        &first,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": "Failed"}})),
    )
    .await?;
    let second = wait_for_value(|| async {
        pods_of(&c, "patient")
            .await
            .ok()?
            .into_iter()
            .filter_map(|p| p.metadata.name)
            .find(|n| *n != first)
    })
    .await?;
    let j = c
        .wait_object::<Job, _>("patient", |j| {
            (j.status.as_ref()?.failed == Some(1)).then(|| j.clone())
        })
        .await?;
    assert_eq!(
        j.status.as_ref().and_then(|s| s.terminating).unwrap_or(0),
        0
    );
    pods.patch_status(
        &second,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": "Succeeded"}})),
    )
    .await?;
    wait_condition(&c, "patient", "Complete").await?;
    c.stop().await
}
