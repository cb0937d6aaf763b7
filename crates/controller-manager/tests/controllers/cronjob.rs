//! The CronJob controller against kore-apiserver, on clocks that run fast (a minute a real
//! second) or start at a chosen instant, so "every minute" schedules run in seconds: Jobs run
//! to Complete on simulated nodes and the history limits prune them, Forbid skips a start
//! while a Job runs, Replace replaces it, suspend stops the schedule, missed start times are
//! caught up (only the most recent) with the `TooManyMissedTimes` warning, and
//! startingDeadlineSeconds and timeZone are honoured.

use std::sync::Arc;
use std::time::Duration;

use crate::common::{Cluster, Fate, NS, wait_for_value};
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::jiff::Timestamp;
use kore_controller_manager::Options;
use kore_controller_manager::clock::Clock;
use kore_controller_manager::cronjob::SCHEDULED_TIMESTAMP;
use kore_controller_manager::job::is_complete;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

/// A CronJob running `schedule` whose Jobs run one pod; `extra` is merged into its spec.
fn cronjob(name: &str, schedule: &str, extra: Value) -> anyhow::Result<CronJob> {
    let mut spec = json!({
        "schedule": schedule,
        "jobTemplate": {
            "metadata": {"labels": {"cron": name}},
            "spec": {"template": {"spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "c", "image": "busybox"}],
            }}},
        },
    });
    if let (Some(spec), Some(extra)) = (spec.as_object_mut(), extra.as_object()) {
        spec.extend(extra.clone());
    }
    Ok(serde_json::from_value(json!({
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": name, "namespace": NS},
        "spec": spec,
    }))?)
}

/// A cluster whose CronJob controller reads `clock`; the stand-in kubelet keeps every pod
/// Running (so Jobs stay active).
async fn cluster(clock: Clock) -> anyhow::Result<Cluster> {
    Cluster::start_with(
        Options::default().clock(clock),
        Arc::new(|_: &Pod| Fate::Ready),
    )
    .await
}

/// The Jobs `cronjob` controls, sorted by name.
async fn jobs_of(c: &Cluster, cronjob: &str) -> anyhow::Result<Vec<Job>> {
    let api: Api<Job> = Api::namespaced(c.client.clone(), NS);
    let mut jobs: Vec<Job> = api
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|j| {
            j.metadata
                .owner_references
                .iter()
                .flatten()
                .any(|r| r.kind == "CronJob" && r.name == cronjob && r.controller == Some(true))
        })
        .collect();
    jobs.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    Ok(jobs)
}

/// The notes of the events with `reason` about `name`.
async fn events(c: &Cluster, name: &str, reason: &str) -> anyhow::Result<Vec<String>> {
    let api: Api<Event> = Api::namespaced(c.client.clone(), NS);
    Ok(api
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|e| {
            e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name)
                && e.reason.as_deref() == Some(reason)
        })
        .map(|e| e.note.unwrap_or_default())
        .collect())
}

async fn wait_event(c: &Cluster, name: &str, reason: &str) -> anyhow::Result<Vec<String>> {
    wait_for_value(|| async { events(c, name, reason).await.ok().filter(|e| !e.is_empty()) }).await
}

fn active_names(cj: &CronJob) -> Vec<String> {
    cj.status
        .as_ref()
        .and_then(|s| s.active.as_ref())
        .map(|a| a.iter().filter_map(|r| r.name.clone()).collect())
        .unwrap_or_default()
}

fn minutes(t: &str) -> anyhow::Result<i64> {
    Ok(t.parse::<Timestamp>()?.as_second() / 60)
}

async fn set_suspend(api: &Api<CronJob>, name: &str, on: bool) -> anyhow::Result<()> {
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"suspend": on}})),
    )
    .await?;
    Ok(())
}

#[tokio::test]
async fn every_minute_on_a_fast_clock_runs_jobs_to_complete_and_prunes_the_history()
-> anyhow::Result<()> {
    let c = cluster(Clock::scaled(60)).await?.without_kubelet();
    let sim = c.env.start_simulation(1).await?;
    let api: Api<CronJob> = Api::namespaced(c.client.clone(), NS);
    api.create(
        &PostParams::default(),
        &cronjob(
            "tick",
            "* * * * *",
            json!({"successfulJobsHistoryLimit": 2}),
        )?,
    )
    .await?;
    // Jobs run to Complete, and beyond two the oldest ones are deleted.
    wait_event(&c, "tick", "SuccessfulDelete").await?;
    c.wait_object::<CronJob, _>("tick", |cj| {
        cj.status
            .as_ref()?
            .last_successful_time
            .as_ref()
            .map(|_| ())
    })
    .await?;
    wait_event(&c, "tick", "SuccessfulCreate").await?;
    wait_event(&c, "tick", "SawCompletedJob").await?;
    set_suspend(&api, "tick", true).await?;
    // Suspended, the controller still prunes: once the last Jobs finish, two are kept.
    let jobs = wait_for_value(|| async {
        let jobs = jobs_of(&c, "tick").await.ok()?;
        let cj = api.get("tick").await.ok()?;
        (jobs.len() == 2 && jobs.iter().all(is_complete) && active_names(&cj).is_empty())
            .then_some(jobs)
    })
    .await?;
    let cj = api.get("tick").await?;
    let status = cj.status.clone().unwrap_or_default();
    let mut scheduled = Vec::new();
    for j in &jobs {
        let name = j.metadata.name.clone().unwrap_or_default();
        let stamp = j
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(SCHEDULED_TIMESTAMP))
            .cloned()
            .unwrap_or_default();
        assert_eq!(
            name,
            format!("tick-{}", minutes(&stamp)?),
            "named after its scheduled minute"
        );
        assert!(stamp.ends_with('Z'), "in UTC without a timeZone: {stamp}");
        assert_eq!(
            j.metadata.labels.as_ref().and_then(|l| l.get("cron")),
            Some(&"tick".to_string()),
            "labels come from the job template"
        );
        scheduled.push(stamp.parse::<Timestamp>()?);
    }
    let newest = scheduled.iter().max().copied();
    assert_eq!(status.last_schedule_time.map(|t| t.0), newest);
    let pods: Api<Pod> = Api::namespaced(c.client.clone(), NS);
    for j in &jobs {
        let name = j.metadata.name.clone().unwrap_or_default();
        let selector = format!("batch.kubernetes.io/job-name={name}");
        let ran = pods.list(&ListParams::default().labels(&selector)).await?;
        assert!(!ran.items.is_empty(), "{name} ran a pod");
        assert!(
            ran.items.iter().all(|p| {
                p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Succeeded")
            }),
            "the pods of {name} ran to Succeeded on the simulated node"
        );
    }
    drop(sim);
    c.stop().await
}

#[tokio::test]
async fn forbid_skips_a_start_while_a_job_is_active() -> anyhow::Result<()> {
    let c = cluster(Clock::scaled(60)).await?;
    let api: Api<CronJob> = Api::namespaced(c.client.clone(), NS);
    api.create(
        &PostParams::default(),
        &cronjob(
            "single",
            "* * * * *",
            json!({"concurrencyPolicy": "Forbid"}),
        )?,
    )
    .await?;
    wait_event(&c, "single", "JobAlreadyActive").await?;
    let jobs = jobs_of(&c, "single").await?;
    assert_eq!(jobs.len(), 1, "no second Job while the first runs");
    let cj = api.get("single").await?;
    let first = jobs[0].metadata.name.clone().unwrap_or_default();
    assert_eq!(active_names(&cj), vec![first.clone()]);
    // Deleted behind the controller's back, the Job leaves the active list and the next
    // start runs.
    let api_jobs: Api<Job> = Api::namespaced(c.client.clone(), NS);
    api_jobs.delete(&first, &Default::default()).await?;
    let notes = wait_event(&c, "single", "MissingJob").await?;
    assert_eq!(notes[0], format!("Active job went missing: {first}"));
    let next = c
        .wait_object::<CronJob, _>("single", |cj| {
            let a = active_names(cj);
            (a.len() == 1 && a[0] != first).then(|| a[0].clone())
        })
        .await?;
    assert!(next > first);
    c.stop().await
}

#[tokio::test]
async fn replace_deletes_the_running_job_and_starts_a_new_one() -> anyhow::Result<()> {
    let c = cluster(Clock::scaled(60)).await?;
    let api: Api<CronJob> = Api::namespaced(c.client.clone(), NS);
    api.create(
        &PostParams::default(),
        &cronjob(
            "fresh",
            "* * * * *",
            json!({"concurrencyPolicy": "Replace"}),
        )?,
    )
    .await?;
    let first = c
        .wait_object::<CronJob, _>("fresh", |cj| active_names(cj).first().cloned())
        .await?;
    let second = c
        .wait_object::<CronJob, _>("fresh", |cj| {
            let active = active_names(cj);
            (active.len() == 1 && active[0] != first).then(|| active[0].clone())
        })
        .await?;
    let notes = wait_event(&c, "fresh", "SuccessfulDelete").await?;
    assert!(
        notes.iter().any(|n| n == &format!("Deleted job {first}")),
        "{notes:?}"
    );
    let jobs: Api<Job> = Api::namespaced(c.client.clone(), NS);
    wait_for_value(|| async { jobs.get_opt(&first).await.ok()?.is_none().then_some(()) }).await?;
    assert!(second > first, "the new Job is for a later minute");
    c.stop().await
}

#[tokio::test]
async fn a_suspended_cronjob_starts_nothing_and_catches_up_when_resumed() -> anyhow::Result<()> {
    let c = cluster(Clock::scaled(60)).await?;
    let api: Api<CronJob> = Api::namespaced(c.client.clone(), NS);
    api.create(
        &PostParams::default(),
        // Forbid, and Jobs that keep running: nothing but the catch-up start can run.
        &cronjob(
            "paused",
            "* * * * *",
            json!({"suspend": true, "concurrencyPolicy": "Forbid"}),
        )?,
    )
    .await?;
    // Two minutes of the fast clock pass; nothing may start.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert!(jobs_of(&c, "paused").await?.is_empty());
    let cj = api.get("paused").await?;
    assert!(cj.status.and_then(|s| s.last_schedule_time).is_none());
    set_suspend(&api, "paused", false).await?;
    // Resumed, one Job runs for the most recent of the missed minutes, not one for each.
    let (active, last) = c
        .wait_object::<CronJob, _>("paused", |cj| {
            let a = active_names(cj);
            let last = cj.status.as_ref()?.last_schedule_time.clone()?;
            (!a.is_empty()).then_some((a, last))
        })
        .await?;
    assert_eq!(active, vec![format!("paused-{}", last.0.as_second() / 60)]);
    assert_eq!(jobs_of(&c, "paused").await?.len(), 1);
    c.stop().await
}

#[tokio::test]
async fn missed_start_times_run_once_and_deadline_and_time_zone_count() -> anyhow::Result<()> {
    // The clock reads 12:00:30 UTC and runs ten times as fast.
    let start: Timestamp = "2030-01-01T12:00:30Z".parse()?;
    let c = cluster(Clock::starting_at(start, 10)).await?;
    let api: Api<CronJob> = Api::namespaced(c.client.clone(), NS);
    for (name, schedule, extra) in [
        ("late", "* * * * *", json!({})),
        (
            "strict",
            "* * * * *",
            json!({"startingDeadlineSeconds": 10, "concurrencyPolicy": "Forbid"}),
        ),
        ("tokyo", "0 21 * * *", json!({"timeZone": "Asia/Tokyo"})),
    ] {
        let mut extra = extra;
        extra["suspend"] = json!(true);
        api.create(&PostParams::default(), &cronjob(name, schedule, extra)?)
            .await?;
        // The last start was three hours ago: 180 start times were missed.
        api.patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"lastScheduleTime": "2030-01-01T09:00:00Z"}})),
        )
        .await?;
        set_suspend(&api, name, false).await?;
    }
    let noon = minutes("2030-01-01T12:00:00Z")?;
    // Only the most recent missed start runs, with a warning about the others.
    let late = c
        .wait_object::<CronJob, _>("late", |cj| active_names(cj).first().cloned())
        .await?;
    assert_eq!(late, format!("late-{noon}"));
    let notes = wait_event(&c, "late", "TooManyMissedTimes").await?;
    assert!(
        notes[0].starts_with("too many missed start times"),
        "{notes:?}"
    );
    // 21:00 in Tokyo is 12:00 UTC; the annotation is in the CronJob's zone.
    let tokyo = c
        .wait_object::<CronJob, _>("tokyo", |cj| active_names(cj).first().cloned())
        .await?;
    assert_eq!(tokyo, format!("tokyo-{noon}"));
    let job: Job = Api::namespaced(c.client.clone(), NS).get(&tokyo).await?;
    assert_eq!(
        job.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(SCHEDULED_TIMESTAMP))
            .map(String::as_str),
        Some("2030-01-01T21:00:00+09:00")
    );
    // 12:00 was 30 s late for a 10 s deadline: it is skipped, and 12:01 runs on time.
    let strict = c
        .wait_object::<CronJob, _>("strict", |cj| active_names(cj).first().cloned())
        .await?;
    assert_eq!(strict, format!("strict-{}", noon + 1));
    assert_eq!(jobs_of(&c, "strict").await?.len(), 1);
    c.stop().await
}
