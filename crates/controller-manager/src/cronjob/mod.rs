//! The CronJob controller: creates a Job at each start time of a CronJob's schedule, as
//! kube-controller-manager's `cronjob-controller` (the v2 controller of
//! `pkg/controller/cronjob`).
//!
//! A sync reads the CronJob and the Jobs it controls from the caches, then:
//! 1. deletes the oldest finished Jobs beyond `successfulJobsHistoryLimit` /
//!    `failedJobsHistoryLimit` (oldest by `status.startTime`, then name), with a
//!    `SuccessfulDelete` event each;
//! 2. settles `status.active`: a finished Job leaves it (`SawCompletedJob`), a Job gone from
//!    the server too (`MissingJob`); an unfinished Job it controls but does not list is
//!    reported (`UnexpectedJob`); `lastSuccessfulTime` follows the newest `completionTime`;
//! 3. unless the CronJob is being deleted, is suspended, or has an unknown `timeZone`
//!    (`UnknownTimeZone`) or a schedule that does not parse (`UnparseableSchedule`,
//!    `InvalidSchedule`): finds the most recent start time due since `lastScheduleTime` (or
//!    the creation time) — only that one runs, missed older ones are skipped, and more than
//!    100 of them raise `TooManyMissedTimes`. A start later than `startingDeadlineSeconds`
//!    is skipped (`MissSchedule`); a start already in `status.active` or equal to
//!    `lastScheduleTime` was done. `concurrencyPolicy` Forbid skips the start while a Job is
//!    active (`JobAlreadyActive`), Replace deletes the active Jobs first, Allow runs them side
//!    by side;
//! 4. creates the Job `<cronjob>-<start time in minutes since the epoch>` from `jobTemplate`
//!    (its labels and annotations, plus `batch.kubernetes.io/cronjob-scheduled-timestamp`,
//!    the start time in RFC 3339 in the CronJob's zone), controlled by the CronJob
//!    (`SuccessfulCreate`), adds it to `status.active` and sets `lastScheduleTime`. The name
//!    is the same for every attempt, so a retry or a second controller meets AlreadyExists
//!    instead of creating twice: that is this controller's expectations;
//! 5. writes the status once, if it changed, and asks to be run again 100 ms after the next
//!    start time.
//!
//! The time comes from the [`Clock`] in [`crate::Options`], so tests can run a schedule of
//! every minute in seconds. Schedules are parsed by [`schedule`].

pub mod schedule;

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::batch::v1::{CronJob, CronJobStatus, Job};
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::tz::TimeZone;
use kore_runtime::controller::{Action, ReconcileError, Reconciler, Request};
use kore_runtime::events::{EventType, Recorder};
use kore_runtime::metrics::Metrics;
use kore_runtime::{CachedClient, Controller, InformerConfig, Manager, ObjectKey};
use kube::Resource;
use kube::api::{Api, DeleteParams, PostParams};

use crate::clock::Clock;
use crate::error::{SyncError, message, status_code};
use crate::ownership::{controller_reference, is_controlled_by};
use crate::{BY_CONTROLLER, Caches, Options, publish};
use schedule::{Missed, Schedule};

/// The controller's name (`--controllers`), as kube-controller-manager names it.
pub const NAME: &str = "cronjob-controller";
/// The annotation on each Job holding its scheduled start time (RFC 3339, in the CronJob's
/// time zone).
pub const SCHEDULED_TIMESTAMP: &str = "batch.kubernetes.io/cronjob-scheduled-timestamp";

/// Registers the controller: CronJobs, and the Jobs they control.
pub(crate) fn register(
    manager: &mut Manager,
    _caches: &Caches,
    options: &Options,
    metrics: &Metrics,
) -> &'static str {
    let client = manager.client();
    let cronjobs = manager
        .informers()
        .get::<CronJob>(InformerConfig::default());
    let jobs = manager.informers().get::<Job>(InformerConfig::default());
    crate::add_indexes(&jobs);
    let builder = Controller::for_::<CronJob>(manager.informers())
        .named(NAME)
        .owns::<Job>()
        .max_concurrent_reconciles(options.concurrent_cron_job_syncs)
        .metrics(metrics.clone());
    let reconciler = CronJobReconciler::new(
        client.clone(),
        CachedClient::new(client.clone(), cronjobs),
        CachedClient::new(client.clone(), jobs),
        crate::recorder(&client, NAME),
        options.clock,
    );
    manager.add(Box::new(builder.build(reconciler)));
    NAME
}

/// Reconciles CronJobs; see the [module docs](self).
pub struct CronJobReconciler {
    client: kube::Client,
    cronjobs: CachedClient<CronJob>,
    jobs: CachedClient<Job>,
    recorder: Recorder,
    clock: Clock,
}

impl std::fmt::Debug for CronJobReconciler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CronJobReconciler").finish_non_exhaustive()
    }
}

/// The finished condition of a Job (`Complete` or `Failed`, True), if it has one.
fn finished_condition(job: &Job) -> Option<&'static str> {
    let conditions = job.status.as_ref()?.conditions.as_ref()?;
    conditions.iter().find_map(|c| {
        if c.status != "True" {
            return None;
        }
        match c.type_.as_str() {
            "Complete" => Some("Complete"),
            "Failed" => Some("Failed"),
            _ => None,
        }
    })
}

fn in_active(status: &CronJobStatus, uid: &str) -> bool {
    status
        .active
        .iter()
        .flatten()
        .any(|r| r.uid.as_deref() == Some(uid))
}

fn remove_active(status: &mut CronJobStatus, uid: &str) {
    if let Some(active) = status.active.as_mut() {
        active.retain(|r| r.uid.as_deref() != Some(uid));
    }
}

/// A reference to `job` for `status.active`.
fn reference(job: &Job) -> ObjectReference {
    ObjectReference {
        resource_version: job.metadata.resource_version.clone(),
        ..job.object_ref(&())
    }
}

/// The order finished Jobs are deleted in: oldest start first, unstarted last, then by name.
fn oldest_first(a: &Arc<Job>, b: &Arc<Job>) -> std::cmp::Ordering {
    let start = |j: &Job| j.status.as_ref().and_then(|s| s.start_time.clone());
    match (start(a), start(b)) {
        (Some(x), Some(y)) if x != y => x.0.cmp(&y.0),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        _ => a.metadata.name.cmp(&b.metadata.name),
    }
}

impl CronJobReconciler {
    /// A reconciler for CronJobs in `cronjobs`, creating Jobs through `jobs`, reading the time
    /// from `clock`.
    pub fn new(
        client: kube::Client,
        cronjobs: CachedClient<CronJob>,
        jobs: CachedClient<Job>,
        recorder: Recorder,
        clock: Clock,
    ) -> Self {
        CronJobReconciler {
            client,
            cronjobs,
            jobs,
            recorder,
            clock,
        }
    }

    fn event(&self, cj: &CronJob, type_: EventType, reason: &str, action: &str, note: String) {
        publish(
            &self.recorder,
            cj.object_ref(&()),
            type_,
            reason,
            action,
            note,
        );
    }

    fn jobs_api(&self, namespace: &str) -> Api<Job> {
        Api::namespaced(self.client.clone(), namespace)
    }

    /// Deletes a Job (its pods in the background) and drops it from `status.active`; a
    /// failure is also reported by a `FailedDelete` event.
    async fn delete_job(
        &self,
        cj: &CronJob,
        status: &mut CronJobStatus,
        job: &Job,
    ) -> Result<(), SyncError> {
        let namespace = job.metadata.namespace.clone().unwrap_or_default();
        let name = job.metadata.name.clone().unwrap_or_default();
        match self
            .jobs_api(&namespace)
            .delete(&name, &DeleteParams::background())
            .await
        {
            Ok(_) => {}
            Err(e) if status_code(&e) == Some(404) => {}
            Err(e) => {
                self.event(
                    cj,
                    EventType::Warning,
                    "FailedDelete",
                    "Delete",
                    format!("Deleted job: {}", message(&e)),
                );
                return Err(SyncError::api(
                    "delete",
                    format!("Job {namespace}/{name}"),
                    e,
                ));
            }
        }
        remove_active(status, job.metadata.uid.as_deref().unwrap_or_default());
        self.event(
            cj,
            EventType::Normal,
            "SuccessfulDelete",
            "Delete",
            format!("Deleted job {name}"),
        );
        Ok(())
    }

    /// Deletes the oldest finished Jobs beyond the history limits; true if the status changed.
    async fn cleanup_finished(
        &self,
        cj: &CronJob,
        status: &mut CronJobStatus,
        jobs: &[Arc<Job>],
    ) -> bool {
        let spec = cj.spec.clone().unwrap_or_default();
        let mut changed = false;
        for (kind, limit) in [
            ("Complete", spec.successful_jobs_history_limit),
            ("Failed", spec.failed_jobs_history_limit),
        ] {
            let Some(limit) = limit else { continue };
            let mut finished: Vec<Arc<Job>> = jobs
                .iter()
                .filter(|j| finished_condition(j) == Some(kind))
                .cloned()
                .collect();
            let excess = finished
                .len()
                .saturating_sub(usize::try_from(limit).unwrap_or(0));
            if excess == 0 {
                continue;
            }
            finished.sort_by(oldest_first);
            for job in &finished[..excess] {
                // A failure is reported by an event; the next sync tries again.
                if self.delete_job(cj, status, job).await.is_ok() {
                    changed = true;
                }
            }
        }
        changed
    }

    /// Settles `status.active` and `lastSuccessfulTime` against the Jobs, then starts the
    /// Job due now, if one is (Kubernetes' `syncCronJob`). Returns when to look again, in
    /// clock time; `changed` is set when the status changed (also when it then fails).
    async fn sync_cronjob(
        &self,
        cj: &mut CronJob,
        status: &mut CronJobStatus,
        jobs: &[Arc<Job>],
        changed: &mut bool,
    ) -> Result<Option<Duration>, SyncError> {
        let now = self.clock.now();
        let key = ObjectKey::of(&*cj);
        let namespace = key.namespace().unwrap_or_default().to_owned();

        for job in jobs {
            let uid = job.metadata.uid.clone().unwrap_or_default();
            let name = job.metadata.name.clone().unwrap_or_default();
            let listed = in_active(status, &uid);
            let finished = finished_condition(job);
            if !listed && finished.is_none() {
                // Our status may be older than the Job list: ask the server before warning.
                let fresh = Api::<CronJob>::namespaced(self.client.clone(), &namespace)
                    .get(key.name())
                    .await
                    .map_err(|e| SyncError::api("get", format!("CronJob {key}"), e))?;
                let fresh_status = fresh.status.clone().unwrap_or_default();
                if in_active(&fresh_status, &uid) {
                    *status = fresh_status;
                    *cj = fresh;
                    continue;
                }
                self.event(
                    cj,
                    EventType::Warning,
                    "UnexpectedJob",
                    "Sync",
                    format!("Saw a job that the controller did not create or forgot: {name}"),
                );
            } else if let Some(condition) = finished {
                if listed {
                    remove_active(status, &uid);
                    self.event(
                        cj,
                        EventType::Normal,
                        "SawCompletedJob",
                        "Sync",
                        format!("Saw completed job: {name}, condition: {condition}"),
                    );
                    *changed = true;
                }
                if condition == "Complete"
                    && let Some(done) = job.status.as_ref().and_then(|s| s.completion_time.clone())
                    && status
                        .last_successful_time
                        .as_ref()
                        .is_none_or(|last| done.0 > last.0)
                {
                    status.last_successful_time = Some(done);
                    *changed = true;
                }
            }
        }

        // Drop active Jobs that no longer exist: the cache may lag, so ask the server.
        let known: Vec<String> = jobs.iter().filter_map(|j| j.metadata.uid.clone()).collect();
        let missing: Vec<ObjectReference> = status
            .active
            .iter()
            .flatten()
            .filter(|r| !r.uid.as_ref().is_some_and(|u| known.contains(u)))
            .cloned()
            .collect();
        for r in missing {
            let name = r.name.clone().unwrap_or_default();
            let ns = r.namespace.clone().unwrap_or_else(|| namespace.clone());
            match self.jobs_api(&ns).get(&name).await {
                Err(e) if status_code(&e) == Some(404) => {
                    self.event(
                        cj,
                        EventType::Normal,
                        "MissingJob",
                        "Sync",
                        format!("Active job went missing: {name}"),
                    );
                    remove_active(status, r.uid.as_deref().unwrap_or_default());
                    *changed = true;
                }
                Err(e) => return Err(SyncError::api("get", format!("Job {ns}/{name}"), e)),
                Ok(_) => {}
            }
        }

        if cj.metadata.deletion_timestamp.is_some() {
            return Ok(None);
        }
        let spec = cj.spec.clone().unwrap_or_default();
        let zone = match spec.time_zone.as_deref() {
            None => TimeZone::system(),
            Some(name) => match TimeZone::get(name) {
                Ok(zone) => zone,
                Err(e) => {
                    self.event(
                        cj,
                        EventType::Warning,
                        "UnknownTimeZone",
                        "Sync",
                        format!("invalid timeZone: {name:?}: {e}"),
                    );
                    return Ok(None);
                }
            },
        };
        if spec.suspend == Some(true) {
            return Ok(None);
        }
        if spec.schedule.contains("TZ") {
            self.event(
                cj,
                EventType::Warning,
                "UnsupportedSchedule",
                "Sync",
                format!(
                    "CRON_TZ or TZ used in schedule {:?} is not officially supported, see https://kubernetes.io/docs/concepts/workloads/controllers/cron-jobs/ for more details",
                    spec.schedule
                ),
            );
        }
        let sched = match Schedule::parse(&spec.schedule, zone.clone()) {
            Ok(s) => s,
            Err(e) => {
                self.event(
                    cj,
                    EventType::Warning,
                    "UnparseableSchedule",
                    "Sync",
                    format!("unparseable schedule: {:?} : {e}", spec.schedule),
                );
                return Ok(None);
            }
        };
        let created = cj.metadata.creation_timestamp.as_ref().map_or(now, |t| t.0);
        let last = status.last_schedule_time.as_ref().map(|t| t.0);
        let next_wait = |status: &CronJobStatus| {
            sched.until_next(
                created,
                status.last_schedule_time.as_ref().map(|t| t.0),
                now,
            )
        };
        let due = match sched.due(created, last, spec.starting_deadline_seconds, now) {
            Ok(due) => due,
            Err(e) => {
                self.event(
                    cj,
                    EventType::Warning,
                    "InvalidSchedule",
                    "Sync",
                    format!("invalid schedule: {} : {e}", spec.schedule),
                );
                return Ok(None);
            }
        };
        if due.missed == Missed::Many {
            self.event(
                cj,
                EventType::Warning,
                "TooManyMissedTimes",
                "Sync",
                "too many missed start times. Set or decrease .spec.startingDeadlineSeconds or check clock skew".into(),
            );
        }
        let Some(scheduled) = due.most_recent else {
            return Ok(next_wait(status));
        };
        if let Some(secs) = spec.starting_deadline_seconds
            && scheduled
                .checked_add(k8s_openapi::jiff::SignedDuration::from_secs(secs))
                .is_ok_and(|end| end < now)
        {
            self.event(
                cj,
                EventType::Warning,
                "MissSchedule",
                "Sync",
                format!(
                    "Missed scheduled time to start a job: {}",
                    schedule::rfc1123z(scheduled)
                ),
            );
            return Ok(next_wait(status));
        }
        let job_name = schedule::job_name(key.name(), scheduled);
        let already = status
            .active
            .iter()
            .flatten()
            .any(|r| r.name.as_deref() == Some(job_name.as_str()))
            || status
                .last_schedule_time
                .as_ref()
                .is_some_and(|t| t.0 == scheduled);
        if already {
            return Ok(next_wait(status));
        }
        let active_count = status.active.as_ref().map_or(0, Vec::len);
        match spec.concurrency_policy.as_deref() {
            Some("Forbid") if active_count > 0 => {
                self.event(
                    cj,
                    EventType::Normal,
                    "JobAlreadyActive",
                    "Sync",
                    "Not starting job because prior execution is running and concurrency policy is Forbid".into(),
                );
                return Ok(next_wait(status));
            }
            Some("Replace") => {
                let refs: Vec<ObjectReference> = status.active.clone().unwrap_or_default();
                for r in refs {
                    let name = r.name.clone().unwrap_or_default();
                    let ns = r.namespace.clone().unwrap_or_else(|| namespace.clone());
                    let cached = self.jobs.get(&ObjectKey::namespaced(ns.clone(), &name));
                    let job = match cached {
                        Some(job) => Arc::unwrap_or_clone(job),
                        None => match self.jobs_api(&ns).get(&name).await {
                            Ok(job) => job,
                            Err(e) => {
                                self.event(
                                    cj,
                                    EventType::Warning,
                                    "FailedGet",
                                    "Delete",
                                    format!("Get job: {}", message(&e)),
                                );
                                return Err(SyncError::api("get", format!("Job {ns}/{name}"), e));
                            }
                        },
                    };
                    self.delete_job(cj, status, &job).await?;
                    *changed = true;
                }
            }
            _ => {}
        }

        // Without a timeZone the annotation is in UTC, as Kubernetes writes it.
        let annotation_zone = if spec.time_zone.is_some() {
            zone
        } else {
            TimeZone::UTC
        };
        let template = spec.job_template.clone();
        let template_meta = template.metadata.unwrap_or_default();
        let mut annotations = template_meta.annotations.unwrap_or_default();
        annotations.insert(
            SCHEDULED_TIMESTAMP.into(),
            schedule::rfc3339_in(scheduled, &annotation_zone),
        );
        let job = Job {
            metadata: ObjectMeta {
                name: Some(job_name.clone()),
                namespace: Some(namespace.clone()),
                labels: template_meta.labels.filter(|l| !l.is_empty()),
                annotations: Some(annotations),
                owner_references: Some(vec![controller_reference::<CronJob>(&cj.metadata)]),
                ..ObjectMeta::default()
            },
            spec: template.spec,
            status: None,
        };
        let created_job = match self.jobs.create(&job, &PostParams::default()).await {
            Ok(created) => {
                self.event(
                    cj,
                    EventType::Normal,
                    "SuccessfulCreate",
                    "Create",
                    format!("Created job {job_name}"),
                );
                created
            }
            Err(kore_runtime::client::Error::Api(e)) if status_code(&e) == Some(409) => {
                // Created before (by an earlier attempt, or another controller).
                let existing = self
                    .jobs_api(&namespace)
                    .get(&job_name)
                    .await
                    .map_err(|e| SyncError::api("get", format!("Job {namespace}/{job_name}"), e))?;
                let uid = cj.metadata.uid.clone().unwrap_or_default();
                if !is_controlled_by(&existing.metadata, &uid)
                    || in_active(status, existing.metadata.uid.as_deref().unwrap_or_default())
                {
                    return Ok(None);
                }
                Arc::new(existing)
            }
            Err(e) => {
                let note = match &e {
                    kore_runtime::client::Error::Api(api) => message(api),
                    other => other.to_string(),
                };
                self.event(
                    cj,
                    EventType::Warning,
                    "FailedCreate",
                    "Create",
                    format!("Error creating job: {note}"),
                );
                return Err(SyncError::cached(format!("Job {namespace}/{job_name}"), e));
            }
        };
        status
            .active
            .get_or_insert_with(Vec::new)
            .push(reference(&created_job));
        status.last_schedule_time = Some(Time(scheduled));
        *changed = true;
        Ok(next_wait(status))
    }

    async fn sync(&self, cj: &CronJob) -> Result<Action, SyncError> {
        let mut cj = cj.clone();
        let uid = cj.metadata.uid.clone().unwrap_or_default();
        let jobs = self.jobs.by_index(BY_CONTROLLER, &uid);
        let mut status = cj.status.clone().unwrap_or_default();
        let mut changed = self.cleanup_finished(&cj, &mut status, &jobs).await;
        let outcome = self
            .sync_cronjob(&mut cj, &mut status, &jobs, &mut changed)
            .await;
        if changed && cj.status.clone().unwrap_or_default() != status {
            let mut updated = cj.clone();
            updated.status = Some(status);
            self.cronjobs
                .replace_status(&updated, &PostParams::default())
                .await
                .map_err(|e| {
                    SyncError::cached(format!("status of CronJob {}", ObjectKey::of(&cj)), e)
                })?;
        }
        match outcome {
            Ok(Some(wait)) => Ok(Action::requeue_after(self.clock.real(wait))),
            Ok(None) => Ok(Action::done()),
            Err(e) => Err(e),
        }
    }
}

impl Reconciler<CronJob> for CronJobReconciler {
    type Error = SyncError;

    async fn reconcile(
        &self,
        request: Request<CronJob>,
    ) -> Result<Action, ReconcileError<SyncError>> {
        let Some(cj) = request.object() else {
            return Ok(Action::done());
        };
        Ok(self.sync(&cj).await?)
    }
}
