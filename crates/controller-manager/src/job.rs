//! The Job controller: runs pods until `completions` of them succeed, or the Job fails.
//!
//! A sync (Kubernetes' `syncJob`) first accounts for finished pods with the
//! `batch.kubernetes.io/job-tracking` finalizer, in three steps that survive a crash between
//! any two: their UIDs go to `status.uncountedTerminatedPods`, their finalizers are removed,
//! then they move to `succeeded` / `failed` (and `completedIndexes`). Then it decides:
//! - failed pods beyond `backoffLimit`, or a run longer than `activeDeadlineSeconds`: the
//!   `FailureTarget` condition, the active pods deleted, and `Failed` once none is left;
//! - enough successes (`completions`, or for a work queue one success and nothing active):
//!   `SuccessCriteriaMet`, then `Complete` and `completionTime` once no pod runs;
//! - `suspend`: active pods deleted, `Suspended` True (False again on resume);
//! - otherwise as many pods as `parallelism` allows, NonIndexed or Indexed (one pod per
//!   missing index, named `<job>-<index>-…`, its index in an annotation, a label and the
//!   `JOB_COMPLETION_INDEX` variable), created in slow-start batches after the exponential
//!   backoff (10 s doubling to 6 min) that follows a failed pod.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::future::join_all;
use k8s_openapi::api::batch::v1::{Job, JobCondition, JobStatus, UncountedTerminatedPods};
use k8s_openapi::api::core::v1::{EnvVar, EnvVarSource, ObjectFieldSelector, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kore_runtime::controller::{Action, ReconcileError, Reconciler, Request};
use kore_runtime::events::{EventType, Recorder};
use kore_runtime::{CachedClient, ObjectKey, Store};
use kube::Resource;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;
use tokio::time::Instant;

use crate::error::{SyncError, message, status_code};
use crate::expectations::Expectations;
use crate::ownership::controller_reference;
use crate::pods::{self, is_active, is_ready};
use crate::replicaset::{BURST_REPLICAS, slow_start_batch};
use crate::{BY_CONTROLLER, publish};

/// The controller's name (`--controllers`), as kube-controller-manager names it.
pub const NAME: &str = "job-controller";
/// The value of `spec.managedBy` this controller syncs (or no value).
pub const MANAGED_BY: &str = "kubernetes.io/job-controller";
/// The finalizer that keeps a finished pod until the Job has counted it.
pub const TRACKING_FINALIZER: &str = "batch.kubernetes.io/job-tracking";
/// The annotation and label holding an Indexed Job pod's index.
pub const COMPLETION_INDEX: &str = "batch.kubernetes.io/job-completion-index";

/// Condition type: the Job finished successfully.
pub const COMPLETE: &str = "Complete";
/// Condition type: the Job failed.
pub const FAILED: &str = "Failed";
/// Condition type: the Job succeeded; its remaining pods are being terminated.
pub const SUCCESS_CRITERIA_MET: &str = "SuccessCriteriaMet";
/// Condition type: the Job failed; its remaining pods are being terminated.
pub const FAILURE_TARGET: &str = "FailureTarget";
/// Condition type: the Job is suspended.
pub const SUSPENDED: &str = "Suspended";

/// Reason: enough pods succeeded.
pub const REASON_COMPLETIONS_REACHED: &str = "CompletionsReached";
/// Reason: more pods failed than backoffLimit allows.
pub const REASON_BACKOFF_LIMIT_EXCEEDED: &str = "BackoffLimitExceeded";
/// Reason: the Job ran longer than activeDeadlineSeconds.
pub const REASON_DEADLINE_EXCEEDED: &str = "DeadlineExceeded";

const BACKOFF_BASE: Duration = Duration::from_secs(10);
const BACKOFF_MAX: Duration = Duration::from_secs(6 * 60);

/// Reconciles Jobs; see the [module docs](self).
pub struct JobReconciler {
    client: kube::Client,
    jobs: CachedClient<Job>,
    pods: Store<Pod>,
    expectations: Arc<Expectations>,
    /// When each Job last counted a failed pod, for the backoff before the next pod.
    last_failure: Mutex<HashMap<ObjectKey, Instant>>,
    recorder: Recorder,
}

impl std::fmt::Debug for JobReconciler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JobReconciler").finish_non_exhaustive()
    }
}

fn index_of(pod: &Pod) -> Option<i32> {
    pod.metadata
        .annotations
        .as_ref()?
        .get(COMPLETION_INDEX)?
        .parse()
        .ok()
}

fn has_finalizer(pod: &Pod) -> bool {
    pod.metadata
        .finalizers
        .iter()
        .flatten()
        .any(|f| f == TRACKING_FINALIZER)
}

fn is_finished(pod: &Pod) -> bool {
    matches!(pods::phase(pod), "Succeeded" | "Failed")
}

/// Whether a pod's end counts as a failure: it failed, or it was deleted before finishing.
fn counts_as_failed(pod: &Pod) -> bool {
    pods::phase(pod) == "Failed"
        || (pods::phase(pod) != "Succeeded" && pod.metadata.deletion_timestamp.is_some())
}

/// A set of indexes in the API's form: `1,3-5,7`.
pub fn format_indexes(indexes: &BTreeSet<i32>) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut iter = indexes.iter().copied().peekable();
    while let Some(start) = iter.next() {
        let mut end = start;
        while iter.peek() == Some(&(end + 1)) {
            end += 1;
            iter.next();
        }
        out.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
    }
    out.join(",")
}

/// Parses [`format_indexes`]' form; malformed parts are skipped.
pub fn parse_indexes(s: Option<&str>) -> BTreeSet<i32> {
    let mut set = BTreeSet::new();
    for part in s.unwrap_or_default().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                if let (Ok(a), Ok(b)) = (a.parse::<i32>(), b.parse::<i32>()) {
                    set.extend(a..=b);
                }
            }
            None => {
                if let Ok(i) = part.parse() {
                    set.insert(i);
                }
            }
        }
    }
    set
}

fn condition_true(status: &JobStatus, type_: &str) -> bool {
    status
        .conditions
        .iter()
        .flatten()
        .any(|c| c.type_ == type_ && c.status == "True")
}

fn find_condition<'a>(status: &'a JobStatus, type_: &str) -> Option<&'a JobCondition> {
    status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == type_)
}

/// Sets a condition; the transition time moves only when the status changes.
fn set_condition(
    status: &mut JobStatus,
    type_: &str,
    value: &str,
    reason: &str,
    msg: &str,
    now: Timestamp,
) {
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    if let Some(c) = conditions.iter_mut().find(|c| c.type_ == type_) {
        if c.status != value {
            c.last_transition_time = Some(Time(now));
        }
        c.status = value.into();
        c.reason = Some(reason.into());
        c.message = Some(msg.into());
        c.last_probe_time = Some(Time(now));
        return;
    }
    conditions.push(JobCondition {
        type_: type_.into(),
        status: value.into(),
        reason: Some(reason.into()),
        message: Some(msg.into()),
        last_probe_time: Some(Time(now)),
        last_transition_time: Some(Time(now)),
    });
}

impl JobReconciler {
    /// A reconciler writing Jobs through `jobs` and reading pods from `pods`.
    pub fn new(
        client: kube::Client,
        jobs: CachedClient<Job>,
        pods: Store<Pod>,
        recorder: Recorder,
    ) -> Self {
        JobReconciler {
            client,
            jobs,
            pods,
            expectations: Arc::new(Expectations::default()),
            last_failure: Mutex::new(HashMap::new()),
            recorder,
        }
    }

    fn event(&self, job: &Job, type_: EventType, reason: &str, action: &str, note: String) {
        publish(
            &self.recorder,
            job.object_ref(&()),
            type_,
            reason,
            action,
            note,
        );
    }

    async fn write_status(&self, job: &mut Job, status: JobStatus) -> Result<(), SyncError> {
        if normalize(job.status.clone().unwrap_or_default()) == normalize(status.clone()) {
            return Ok(());
        }
        let mut updated = job.clone();
        updated.status = Some(status);
        let written = self
            .jobs
            .replace_status(&updated, &PostParams::default())
            .await
            .map_err(|e| SyncError::cached(format!("status of Job {}", ObjectKey::of(&*job)), e))?;
        *job = Arc::unwrap_or_clone(written);
        Ok(())
    }

    /// Removes the tracking finalizer from `pod`; false if the pod changed meanwhile.
    async fn remove_finalizer(&self, pod: &Pod) -> Result<(), SyncError> {
        let namespace = pod.metadata.namespace.clone().unwrap_or_default();
        let name = pod.metadata.name.clone().unwrap_or_default();
        let finalizers: Vec<&String> = pod
            .metadata
            .finalizers
            .iter()
            .flatten()
            .filter(|f| *f != TRACKING_FINALIZER)
            .collect();
        let patch = json!({"metadata": {"finalizers": finalizers, "resourceVersion": pod.metadata.resource_version}});
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &namespace);
        match api
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if status_code(&e) == Some(404) => Ok(()),
            Err(e) => Err(SyncError::api(
                "remove the finalizer of",
                format!("Pod {namespace}/{name}"),
                e,
            )),
        }
    }

    /// Removes the tracking finalizer from every pod of a finished or deleted Job.
    async fn release_pods(&self, uid: &str) -> Result<(), SyncError> {
        let holding: Vec<Arc<Pod>> = self
            .pods
            .by_index(BY_CONTROLLER, uid)
            .into_iter()
            .filter(|p| has_finalizer(p))
            .collect();
        for r in join_all(holding.iter().map(|p| self.remove_finalizer(p))).await {
            r?;
        }
        Ok(())
    }

    async fn delete_pods(
        &self,
        key: &ObjectKey,
        job: &Job,
        victims: &[Arc<Pod>],
    ) -> Result<(), SyncError> {
        let namespace = key.namespace.clone().unwrap_or_default();
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &namespace);
        for v in victims {
            self.expectations.deleting(
                key,
                v.metadata.name.clone().unwrap_or_default(),
                v.metadata.uid.clone().unwrap_or_default(),
            );
        }
        let results = join_all(victims.iter().map(|v| {
            let api = api.clone();
            async move {
                let name = v.metadata.name.clone().unwrap_or_default();
                match api.delete(&name, &DeleteParams::default()).await {
                    Ok(_) => {
                        self.event(
                            job,
                            EventType::Normal,
                            "SuccessfulDelete",
                            "Delete",
                            format!("Deleted pod: {name}"),
                        );
                        Ok(())
                    }
                    Err(e) if status_code(&e) == Some(404) => Ok(()),
                    Err(e) => {
                        self.expectations.delete_failed(key, &name);
                        Err(message(&e))
                    }
                }
            }
        }))
        .await;
        let errors: Vec<String> = results.into_iter().filter_map(Result::err).collect();
        match errors.first() {
            None => Ok(()),
            Some(first) => Err(SyncError::Pods {
                verb: "delete",
                failed: errors.len(),
                attempted: victims.len(),
                first: first.clone(),
            }),
        }
    }

    async fn create_pod(
        &self,
        key: &ObjectKey,
        job: &Job,
        index: Option<i32>,
    ) -> Result<(), String> {
        let spec = job.spec.clone().unwrap_or_default();
        let namespace = key.namespace.clone().unwrap_or_default();
        let prefix = match index {
            Some(i) => format!("{}-{i}-", key.name),
            None => pods::name_prefix(&key.name),
        };
        let mut pod = pods::from_template(
            &spec.template,
            &namespace,
            prefix,
            controller_reference::<Job>(&job.metadata),
        );
        pod.metadata
            .finalizers
            .get_or_insert_with(Vec::new)
            .push(TRACKING_FINALIZER.into());
        if let Some(i) = index {
            pod.metadata
                .annotations
                .get_or_insert_with(BTreeMap::new)
                .insert(COMPLETION_INDEX.into(), i.to_string());
            pod.metadata
                .labels
                .get_or_insert_with(BTreeMap::new)
                .insert(COMPLETION_INDEX.into(), i.to_string());
            if let Some(pod_spec) = pod.spec.as_mut() {
                if pod_spec.hostname.is_none() {
                    pod_spec.hostname = Some(format!("{}-{i}", key.name));
                }
                let var = EnvVar {
                    name: "JOB_COMPLETION_INDEX".into(),
                    value: None,
                    value_from: Some(EnvVarSource {
                        field_ref: Some(ObjectFieldSelector {
                            api_version: None,
                            field_path: format!("metadata.labels['{COMPLETION_INDEX}']"),
                        }),
                        ..EnvVarSource::default()
                    }),
                };
                for c in pod_spec
                    .containers
                    .iter_mut()
                    .chain(pod_spec.init_containers.iter_mut().flatten())
                {
                    c.env.get_or_insert_with(Vec::new).push(var.clone());
                }
            }
        }
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &namespace);
        match api.create(&PostParams::default(), &pod).await {
            Ok(created) => {
                let name = created.metadata.name.unwrap_or_default();
                self.expectations.created(key, name.clone());
                self.event(
                    job,
                    EventType::Normal,
                    "SuccessfulCreate",
                    "Create",
                    format!("Created pod: {name}"),
                );
                Ok(())
            }
            Err(e) => {
                let msg = message(&e);
                self.event(
                    job,
                    EventType::Warning,
                    "FailedCreate",
                    "Create",
                    format!("Error creating: {msg}"),
                );
                Err(msg)
            }
        }
    }

    /// Counts finished pods: UIDs to `uncountedTerminatedPods`, finalizers off, then into the
    /// counters. Returns the pods the Job controls.
    async fn track(&self, job: &mut Job, indexed: bool) -> Result<Vec<Arc<Pod>>, SyncError> {
        let uid = job.metadata.uid.clone().unwrap_or_default();
        let owned = self.pods.by_index(BY_CONTROLLER, &uid);
        let mut status = job.status.clone().unwrap_or_default();
        let mut uncounted = status.uncounted_terminated_pods.clone().unwrap_or_default();
        let listed: BTreeSet<String> = uncounted
            .succeeded
            .iter()
            .flatten()
            .chain(uncounted.failed.iter().flatten())
            .cloned()
            .collect();
        // Step 1: record the newly finished pods.
        let mut added = false;
        for p in owned.iter().filter(|p| has_finalizer(p)) {
            let pod_uid = p.metadata.uid.clone().unwrap_or_default();
            if listed.contains(&pod_uid) {
                continue;
            }
            if counts_as_failed(p) {
                uncounted.failed.get_or_insert_with(Vec::new).push(pod_uid);
                added = true;
            } else if is_finished(p) {
                uncounted
                    .succeeded
                    .get_or_insert_with(Vec::new)
                    .push(pod_uid);
                added = true;
            }
        }
        if added {
            status.uncounted_terminated_pods = Some(uncounted.clone());
            self.write_status(job, status.clone()).await?;
        }
        if uncounted.succeeded.iter().flatten().next().is_none()
            && uncounted.failed.iter().flatten().next().is_none()
        {
            return Ok(owned);
        }
        // Step 2: release the pods.
        let by_uid: HashMap<&str, &Arc<Pod>> = owned
            .iter()
            .filter_map(|p| Some((p.metadata.uid.as_deref()?, p)))
            .collect();
        let holding: Vec<&Arc<Pod>> = uncounted
            .succeeded
            .iter()
            .flatten()
            .chain(uncounted.failed.iter().flatten())
            .filter_map(|u| by_uid.get(u.as_str()).copied())
            .filter(|p| has_finalizer(p))
            .collect();
        for r in join_all(holding.iter().map(|p| self.remove_finalizer(p))).await {
            r?;
        }
        // Step 3: count them.
        let mut completed = parse_indexes(status.completed_indexes.as_deref());
        let mut succeeded = status.succeeded.unwrap_or(0);
        for u in uncounted.succeeded.iter().flatten() {
            match by_uid.get(u.as_str()).and_then(|p| index_of(p)) {
                Some(i) if indexed => {
                    if completed.insert(i) {
                        succeeded += 1;
                    }
                }
                _ => succeeded += 1,
            }
        }
        let failed_now =
            i32::try_from(uncounted.failed.iter().flatten().count()).unwrap_or(i32::MAX);
        if failed_now > 0 {
            self.last_failure
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(ObjectKey::of(&*job), Instant::now());
        }
        status.succeeded = Some(succeeded);
        status.failed = Some(status.failed.unwrap_or(0) + failed_now);
        if indexed {
            status.completed_indexes = Some(format_indexes(&completed));
        }
        status.uncounted_terminated_pods = Some(UncountedTerminatedPods::default());
        self.write_status(job, status).await?;
        Ok(owned)
    }

    async fn sync(&self, key: &ObjectKey, job: &Job) -> Result<Action, SyncError> {
        let mut job = job.clone();
        let spec = job.spec.clone().unwrap_or_default();
        if spec.managed_by.as_deref().is_some_and(|m| m != MANAGED_BY) {
            return Ok(Action::done());
        }
        let uid = job.metadata.uid.clone().unwrap_or_default();
        let existing = job.status.clone().unwrap_or_default();
        if condition_true(&existing, COMPLETE) || condition_true(&existing, FAILED) {
            self.release_pods(&uid).await?;
            return Ok(Action::done());
        }
        let indexed = spec.completion_mode.as_deref() == Some("Indexed");
        let needs_sync = self.expectations.satisfied(key, &self.pods);
        let owned = self.track(&mut job, indexed).await?;
        let mut status = job.status.clone().unwrap_or_default();
        let now = Timestamp::now();
        let active: Vec<Arc<Pod>> = owned.iter().filter(|p| is_active(p)).cloned().collect();
        let succeeded = status.succeeded.unwrap_or(0);
        let failed = status.failed.unwrap_or(0);
        let parallelism = spec.parallelism.unwrap_or(1).max(0);
        let suspended = spec.suspend == Some(true);
        let mut requeue: Option<Duration> = None;

        // Decide the outcome.
        if !condition_true(&status, FAILURE_TARGET)
            && !condition_true(&status, SUCCESS_CRITERIA_MET)
        {
            let completed = match spec.completions {
                Some(c) if indexed => {
                    i32::try_from(parse_indexes(status.completed_indexes.as_deref()).len())
                        .unwrap_or(i32::MAX)
                        >= c
                }
                Some(c) => succeeded >= c,
                None => succeeded > 0 && active.is_empty(),
            };
            let past_deadline = match (spec.active_deadline_seconds, status.start_time.as_ref()) {
                (Some(secs), Some(start)) if !suspended => {
                    let at = start
                        .0
                        .checked_add(SignedDuration::from_secs(secs))
                        .unwrap_or(start.0);
                    if at <= now {
                        true
                    } else {
                        requeue = Some(
                            now.duration_until(at).unsigned_abs() + Duration::from_millis(100),
                        );
                        false
                    }
                }
                _ => false,
            };
            if completed {
                set_condition(
                    &mut status,
                    SUCCESS_CRITERIA_MET,
                    "True",
                    REASON_COMPLETIONS_REACHED,
                    "Reached expected number of succeeded pods",
                    now,
                );
            } else if failed > spec.backoff_limit.unwrap_or(6) {
                set_condition(
                    &mut status,
                    FAILURE_TARGET,
                    "True",
                    REASON_BACKOFF_LIMIT_EXCEEDED,
                    "Job has reached the specified backoff limit",
                    now,
                );
            } else if past_deadline {
                set_condition(
                    &mut status,
                    FAILURE_TARGET,
                    "True",
                    REASON_DEADLINE_EXCEEDED,
                    "Job was active longer than specified deadline",
                    now,
                );
            }
        }

        // A decided Job: terminate what still runs, then finish.
        let target = find_condition(&status, FAILURE_TARGET)
            .filter(|c| c.status == "True")
            .or_else(|| {
                find_condition(&status, SUCCESS_CRITERIA_MET).filter(|c| c.status == "True")
            })
            .cloned();
        if let Some(target) = target {
            if !active.is_empty() && needs_sync {
                self.delete_pods(key, &job, &active).await?;
            }
            let remaining = owned.iter().any(|p| !is_finished(p) || has_finalizer(p));
            if !remaining {
                let reason = target.reason.clone().unwrap_or_default();
                let msg = target.message.clone().unwrap_or_default();
                if target.type_ == FAILURE_TARGET {
                    set_condition(&mut status, FAILED, "True", &reason, &msg, now);
                    self.event(&job, EventType::Warning, &reason, "Sync", msg);
                } else {
                    set_condition(&mut status, COMPLETE, "True", &reason, &msg, now);
                    status.completion_time = Some(Time(now));
                    self.event(
                        &job,
                        EventType::Normal,
                        "Completed",
                        "Sync",
                        "Job completed".into(),
                    );
                }
            }
            status.active = Some(0);
            status.ready = Some(0);
            self.write_status(&mut job, status).await?;
            return Ok(Action::done());
        }

        // Suspend and resume.
        if suspended {
            if !active.is_empty() && needs_sync {
                self.delete_pods(key, &job, &active).await?;
            }
            if !condition_true(&status, SUSPENDED) {
                set_condition(
                    &mut status,
                    SUSPENDED,
                    "True",
                    "JobSuspended",
                    "Job suspended",
                    now,
                );
                status.start_time = None;
                self.event(
                    &job,
                    EventType::Normal,
                    "Suspended",
                    "Sync",
                    "Job suspended".into(),
                );
            }
            status.active = Some(0);
            status.ready = Some(0);
            self.write_status(&mut job, status).await?;
            return Ok(Action::done());
        }
        if condition_true(&status, SUSPENDED) {
            set_condition(
                &mut status,
                SUSPENDED,
                "False",
                "JobResumed",
                "Job resumed",
                now,
            );
            self.event(
                &job,
                EventType::Normal,
                "Resumed",
                "Sync",
                "Job resumed".into(),
            );
        }
        if status.start_time.is_none() {
            status.start_time = Some(Time(now));
            if let Some(secs) = spec.active_deadline_seconds {
                requeue = Some(
                    Duration::from_secs(secs.max(0).cast_unsigned()) + Duration::from_millis(100),
                );
            }
        }

        // Run the pods the Job still needs.
        let mut failure = None;
        let mut active_count = active.len();
        if needs_sync {
            let backoff_left = self.backoff_left(key, failed);
            if let Some(left) = backoff_left {
                requeue = Some(requeue.map_or(left, |r| r.min(left)));
            }
            let want_indexes: Vec<Option<i32>> = if indexed {
                let completions = spec.completions.unwrap_or(parallelism);
                let done = parse_indexes(status.completed_indexes.as_deref());
                let running: BTreeSet<i32> = active.iter().filter_map(|p| index_of(p)).collect();
                (0..completions)
                    .filter(|i| !done.contains(i) && !running.contains(i))
                    .take(
                        usize::try_from(parallelism)
                            .unwrap_or(0)
                            .saturating_sub(active.len()),
                    )
                    .map(Some)
                    .collect()
            } else {
                let want = match spec.completions {
                    Some(c) => (c - succeeded).clamp(0, parallelism),
                    None if succeeded > 0 => i32::try_from(active.len()).unwrap_or(i32::MAX),
                    None => parallelism,
                };
                let want = usize::try_from(want).unwrap_or(0);
                vec![None; want.saturating_sub(active.len())]
            };
            let want_total = active.len() + want_indexes.len();
            let limit = usize::try_from(parallelism).unwrap_or(0);
            if active.len() > limit {
                let mut victims = active.clone();
                pods::sort_for_deletion(&mut victims, &active, now);
                victims.truncate(active.len() - limit);
                failure = self.delete_pods(key, &job, &victims).await.err();
                active_count = limit;
            } else if !want_indexes.is_empty() && backoff_left.is_none() {
                let count = want_indexes.len().min(BURST_REPLICAS);
                let job_ref = &job;
                let created =
                    slow_start_batch(count, |i| self.create_pod(key, job_ref, want_indexes[i]))
                        .await;
                match created {
                    Ok(()) => active_count = want_total.min(active.len() + count),
                    Err((done, first)) => {
                        active_count = active.len() + done;
                        failure = Some(SyncError::Pods {
                            verb: "create",
                            failed: count - done,
                            attempted: count,
                            first,
                        });
                    }
                }
            }
        }
        status.active = Some(i32::try_from(active_count).unwrap_or(i32::MAX));
        status.ready =
            Some(i32::try_from(active.iter().filter(|p| is_ready(p)).count()).unwrap_or(i32::MAX));
        self.write_status(&mut job, status).await?;
        if let Some(e) = failure {
            return Err(e);
        }
        Ok(requeue.map_or_else(Action::done, Action::requeue_after))
    }

    /// How long until the backoff after the last failed pod has passed, if it has not.
    fn backoff_left(&self, key: &ObjectKey, failed: i32) -> Option<Duration> {
        if failed == 0 {
            return None;
        }
        let last = *self
            .last_failure
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(key)?;
        let exponent = u32::try_from(failed - 1).unwrap_or(0).min(16);
        let delay = BACKOFF_BASE.saturating_mul(1 << exponent).min(BACKOFF_MAX);
        let passed = last.elapsed();
        (passed < delay).then(|| delay - passed)
    }
}

impl Reconciler<Job> for JobReconciler {
    type Error = SyncError;

    async fn reconcile(&self, request: Request<Job>) -> Result<Action, ReconcileError<SyncError>> {
        let key = request.key().clone();
        let Some(job) = request.object() else {
            self.expectations.forget(&key);
            self.last_failure
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(&key);
            if let Some(uid) = request.last_state().and_then(|j| j.metadata.uid.clone()) {
                self.release_pods(&uid).await?;
            }
            return Ok(Action::done());
        };
        Ok(self.sync(&key, &job).await?)
    }
}

/// The status as the API server returns it: empty lists and strings omitted.
fn normalize(mut s: JobStatus) -> JobStatus {
    for field in [
        &mut s.active,
        &mut s.failed,
        &mut s.succeeded,
        &mut s.terminating,
    ] {
        if *field == Some(0) {
            *field = None;
        }
    }
    if s.conditions.as_ref().is_some_and(Vec::is_empty) {
        s.conditions = None;
    }
    if s.completed_indexes.as_deref() == Some("") {
        s.completed_indexes = None;
    }
    if let Some(u) = s.uncounted_terminated_pods.as_mut() {
        if u.failed.as_ref().is_some_and(Vec::is_empty) {
            u.failed = None;
        }
        if u.succeeded.as_ref().is_some_and(Vec::is_empty) {
            u.succeeded = None;
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indexes_round_trip_in_the_api_form() {
        let set: BTreeSet<i32> = [0, 1, 2, 4, 6, 7].into_iter().collect();
        assert_eq!(format_indexes(&set), "0-2,4,6-7");
        assert_eq!(parse_indexes(Some("0-2,4,6-7")), set);
        assert!(parse_indexes(None).is_empty());
    }
}
