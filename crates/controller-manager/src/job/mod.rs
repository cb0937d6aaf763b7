//! The Job controller: runs pods until `completions` of them succeed, or the Job fails.
//!
//! A sync (Kubernetes' `syncJob`) first claims the pods its selector matches (adopting
//! orphans, with the `batch.kubernetes.io/job-tracking` finalizer), then accounts for the
//! finished pods holding that finalizer, in three steps that survive a crash between any
//! two: their UIDs go to `status.uncountedTerminatedPods`, their finalizers are removed,
//! then they move to `succeeded` / `failed` (and `completedIndexes` / `failedIndexes`). A
//! failed pod a `podFailurePolicy` (`policy.rs`) rule ignores is released without being counted.
//! Then it decides:
//! - a failed pod matching a `FailJob` rule, failed pods beyond `backoffLimit`, failed
//!   indexes beyond `maxFailedIndexes` or every index finished with some failed, or a run
//!   longer than `activeDeadlineSeconds`: the `FailureTarget` condition, the active pods
//!   deleted, and `Failed` once none is left;
//! - a `successPolicy` (`policy.rs`) rule holding, or enough successes (`completions`, or for a
//!   work queue one success and nothing active): `SuccessCriteriaMet`, then `Complete` and
//!   `completionTime` once no pod runs;
//! - `suspend`: active pods deleted, `Suspended` True (False again on resume);
//! - otherwise as many pods as `parallelism` allows, NonIndexed or Indexed (one pod per
//!   missing index that has not failed, named `<job>-<index>-…`, its index in an annotation,
//!   a label and the `JOB_COMPLETION_INDEX` variable), created in slow-start batches after
//!   the backoff (`backoff.rs`) that follows failed pods. With `podReplacementPolicy: Failed` a
//!   terminating pod is replaced only once it has failed.

mod backoff;
mod indexes;
mod policy;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::future::join_all;
use k8s_openapi::api::batch::v1::{Job, JobCondition, JobSpec, JobStatus, UncountedTerminatedPods};
use k8s_openapi::api::core::v1::{EnvVar, EnvVarSource, ObjectFieldSelector, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Time};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kore_runtime::controller::{Action, Controller, ReconcileError, Reconciler, Request};
use kore_runtime::events::{EventType, Recorder};
use kore_runtime::metrics::Metrics;
use kore_runtime::{CachedClient, InformerConfig, Manager, ObjectKey, Store};
use kube::Resource;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::error::{SyncError, message, status_code};
use crate::expectations::Expectations;
use crate::ownership::{controller_reference, recheck_owner};
use crate::pods::{self, is_active, is_ready};
use crate::replicaset::{BURST_REPLICAS, slow_start_batch};
use crate::{
    BY_CONTROLLER, BY_NAMESPACE, Caches, ORPHANS_BY_NAMESPACE, Options, add_indexes, publish,
    recorder,
};

pub use backoff::{BackoffRecord, finished_time};
pub use indexes::{
    COMPLETION_INDEX, INDEX_FAILURE_COUNT, INDEX_IGNORED_FAILURE_COUNT, format_indexes, index_of,
    parse_indexes,
};
pub use policy::{FailureAction, match_failure, match_success};

/// The controller's name (`--controllers`), as kube-controller-manager names it.
pub const NAME: &str = "job-controller";
/// The value of `spec.managedBy` this controller syncs (or no value).
pub const MANAGED_BY: &str = "kubernetes.io/job-controller";
/// The finalizer that keeps a finished pod until the Job has counted it.
pub const TRACKING_FINALIZER: &str = "batch.kubernetes.io/job-tracking";

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
/// Reason: a rule of the success policy holds.
pub const REASON_SUCCESS_POLICY: &str = "SuccessPolicy";
/// Reason: more pods failed than backoffLimit allows.
pub const REASON_BACKOFF_LIMIT_EXCEEDED: &str = "BackoffLimitExceeded";
/// Reason: the Job ran longer than activeDeadlineSeconds.
pub const REASON_DEADLINE_EXCEEDED: &str = "DeadlineExceeded";
/// Reason: a failed pod matched a `FailJob` rule of the pod failure policy.
pub const REASON_POD_FAILURE_POLICY: &str = "PodFailurePolicy";
/// Reason: every index finished and some failed (`backoffLimitPerIndex`).
pub const REASON_FAILED_INDEXES: &str = "FailedIndexes";
/// Reason: more indexes failed than `maxFailedIndexes` allows.
pub const REASON_MAX_FAILED_INDEXES_EXCEEDED: &str = "MaxFailedIndexesExceeded";

/// The default delay after the first failed pod (Kubernetes' `DefaultJobPodFailureBackOff`).
pub const DEFAULT_BACKOFF: Duration = Duration::from_secs(10);
/// How much longer than the first the longest delay is (6 min after 10 s).
const BACKOFF_MAX_FACTOR: u32 = 36;

/// Reconciles Jobs; see the [module docs](self).
pub struct JobReconciler {
    client: kube::Client,
    jobs: CachedClient<Job>,
    pods: Store<Pod>,
    expectations: Arc<Expectations>,
    /// The failed pods since the last success of each Job, for the backoff before the next.
    backoff: Mutex<HashMap<ObjectKey, BackoffRecord>>,
    backoff_base: Duration,
    recorder: Recorder,
}

impl std::fmt::Debug for JobReconciler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JobReconciler").finish_non_exhaustive()
    }
}

/// How often an index failed before, for its next pod (`backoffLimitPerIndex`).
#[derive(Debug, Clone, Copy, Default)]
struct IndexFailures {
    counted: i32,
    ignored: i32,
}

/// Adds the Job controller to `manager`.
pub(crate) fn register(
    manager: &mut Manager,
    caches: &Caches,
    options: &Options,
    metrics: &Metrics,
) -> &'static str {
    let client = manager.client();
    let jobs = manager.informers().get::<Job>(InformerConfig::default());
    add_indexes(&jobs);
    let builder = Controller::for_::<Job>(manager.informers())
        .named(NAME)
        .owns::<Pod>()
        .watches::<Pod>(orphan_mapper(jobs.store()))
        .max_concurrent_reconciles(options.concurrent_job_syncs)
        .metrics(metrics.clone());
    let reconciler = JobReconciler::new(
        client.clone(),
        CachedClient::new(client.clone(), jobs),
        caches.pods.store(),
        recorder(&client, NAME),
    )
    .backoff(options.job_pod_failure_backoff);
    manager.add(Box::new(builder.build(reconciler)));
    NAME
}

/// Maps an orphan pod (no controller owner) to the Jobs of its namespace whose selector
/// matches it, so they can adopt it.
pub fn orphan_mapper(jobs: Store<Job>) -> impl Fn(&Pod) -> Vec<ObjectKey> + Send + Sync + 'static {
    move |pod: &Pod| {
        if pods::controller_ref(&pod.metadata).is_some()
            || pod.metadata.deletion_timestamp.is_some()
        {
            return Vec::new();
        }
        let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
        jobs.by_index(BY_NAMESPACE, namespace)
            .iter()
            .filter(|j| selects(j, pod))
            .map(|j| ObjectKey::of(&**j))
            .collect()
    }
}

/// Whether the Job's selector matches the pod (a Job without a selector matches none).
fn selects(job: &Job, pod: &Pod) -> bool {
    crate::selector::matches(
        job.spec.as_ref().and_then(|s| s.selector.as_ref()),
        pod.metadata.labels.as_ref(),
    )
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

/// Whether a pod is being deleted but has not finished: it still runs.
fn is_terminating(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_some() && !is_finished(pod)
}

/// Whether the Job replaces a pod only once it has failed, not already while it terminates
/// (`podReplacementPolicy: Failed`, implied by a `podFailurePolicy`).
fn only_replace_failed(spec: &JobSpec) -> bool {
    spec.pod_replacement_policy.as_deref() == Some("Failed") || spec.pod_failure_policy.is_some()
}

/// Whether a pod's end counts as a failure: it failed or, unless the Job replaces only failed
/// pods, it was deleted before finishing.
fn is_failed(pod: &Pod, spec: &JobSpec) -> bool {
    pods::phase(pod) == "Failed"
        || (!only_replace_failed(spec)
            && pods::phase(pod) != "Succeeded"
            && pod.metadata.deletion_timestamp.is_some())
}

/// Whether a finished Job is `Complete` (its condition `Complete` is `True`): what
/// `kubectl wait --for=condition=complete` waits for.
pub fn is_complete(job: &Job) -> bool {
    job.status
        .as_ref()
        .is_some_and(|s| condition_true(s, COMPLETE))
}

/// Whether the Job's status has condition `type_` with status `True`.
pub fn condition_true(status: &JobStatus, type_: &str) -> bool {
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
            backoff: Mutex::new(HashMap::new()),
            backoff_base: DEFAULT_BACKOFF,
            recorder,
        }
    }

    /// Waits `base` after the first failed pod before replacing it, doubling per further
    /// failure up to 36 times `base` (10 s and 6 min by default).
    #[must_use]
    pub fn backoff(mut self, base: Duration) -> Self {
        self.backoff_base = base;
        self
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
        let namespace = key.namespace().unwrap_or_default().to_owned();
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
        index: Option<(i32, IndexFailures)>,
    ) -> Result<(), String> {
        let spec = job.spec.clone().unwrap_or_default();
        let namespace = key.namespace().unwrap_or_default().to_owned();
        let prefix = match index {
            Some((i, _)) => format!("{}-{i}-", key.name()),
            None => pods::name_prefix(key.name()),
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
        if let Some((i, failures)) = index {
            let annotations = pod.metadata.annotations.get_or_insert_with(BTreeMap::new);
            annotations.insert(COMPLETION_INDEX.into(), i.to_string());
            if spec.backoff_limit_per_index.is_some() {
                annotations.insert(INDEX_FAILURE_COUNT.into(), failures.counted.to_string());
                if failures.ignored > 0 {
                    annotations.insert(
                        INDEX_IGNORED_FAILURE_COUNT.into(),
                        failures.ignored.to_string(),
                    );
                }
            }
            pod.metadata
                .labels
                .get_or_insert_with(BTreeMap::new)
                .insert(COMPLETION_INDEX.into(), i.to_string());
            if let Some(pod_spec) = pod.spec.as_mut() {
                if pod_spec.hostname.is_none() {
                    pod_spec.hostname = Some(format!("{}-{i}", key.name()));
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

    /// The pods the Job controls once claiming is done: those it controls and still
    /// selects, and the orphans it selects, which it adopts with the tracking finalizer.
    /// Those it controls and no longer selects are released.
    async fn claim_pods(&self, job: &Job) -> Result<Vec<Arc<Pod>>, SyncError> {
        let uid = job.metadata.uid.clone().unwrap_or_default();
        let namespace = job.metadata.namespace.clone().unwrap_or_default();
        let name = job.metadata.name.clone().unwrap_or_default();
        let deleting = job.metadata.deletion_timestamp.is_some();
        let has_selector = job.spec.as_ref().is_some_and(|s| s.selector.is_some());
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &namespace);
        let mut owned = Vec::new();
        for p in self.pods.by_index(BY_CONTROLLER, &uid) {
            if !has_selector || selects(job, &p) {
                owned.push(p);
            } else if !deleting && p.metadata.deletion_timestamp.is_none() {
                self.set_owner(&api, &uid, &p, None).await?;
            }
        }
        if !has_selector || deleting {
            return Ok(owned);
        }
        let orphans: Vec<Arc<Pod>> = self
            .pods
            .by_index(ORPHANS_BY_NAMESPACE, &namespace)
            .into_iter()
            .filter(|p| {
                pods::controller_ref(&p.metadata).is_none()
                    && p.metadata.deletion_timestamp.is_none()
                    && selects(job, p)
            })
            .collect();
        if orphans.is_empty() {
            return Ok(owned);
        }
        let jobs: Api<Job> = Api::namespaced(self.client.clone(), &namespace);
        recheck_owner(&jobs, &name, &uid).await?;
        let reference = controller_reference::<Job>(&job.metadata);
        for p in orphans {
            if let Some(adopted) = self.set_owner(&api, &uid, &p, Some(&reference)).await? {
                owned.push(Arc::new(adopted));
            }
        }
        Ok(owned)
    }

    /// Adopts `pod` (adding `reference` and the tracking finalizer) or, without a reference,
    /// releases it (removing the Job's reference and the finalizer), if the pod did not change
    /// since it was read. `None` if the pod is gone or can no longer change.
    async fn set_owner(
        &self,
        api: &Api<Pod>,
        uid: &str,
        pod: &Pod,
        reference: Option<&OwnerReference>,
    ) -> Result<Option<Pod>, SyncError> {
        let mut refs: Vec<OwnerReference> = pod
            .metadata
            .owner_references
            .iter()
            .flatten()
            .filter(|r| r.uid != uid)
            .cloned()
            .collect();
        let mut finalizers: Vec<String> = pod
            .metadata
            .finalizers
            .iter()
            .flatten()
            .filter(|f| *f != TRACKING_FINALIZER)
            .cloned()
            .collect();
        if let Some(r) = reference {
            refs.push(r.clone());
            finalizers.push(TRACKING_FINALIZER.into());
        }
        let patch = json!({"metadata": {
            "ownerReferences": refs,
            "finalizers": finalizers,
            "resourceVersion": pod.metadata.resource_version,
        }});
        let name = pod.metadata.name.as_deref().unwrap_or_default();
        let verb = if reference.is_some() {
            "adopt"
        } else {
            "release"
        };
        match api
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(p) => Ok(Some(p)),
            Err(e) if matches!(status_code(&e), Some(404 | 422)) => Ok(None),
            Err(e) => Err(SyncError::api(
                verb,
                format!(
                    "Pod {}/{name}",
                    pod.metadata.namespace.as_deref().unwrap_or_default()
                ),
                e,
            )),
        }
    }

    /// Counts finished pods: UIDs to `uncountedTerminatedPods`, finalizers off, then into the
    /// counters. A failed pod the pod failure policy ignores, and a terminating pod of a Job
    /// that succeeded, lose their finalizer without being counted; once the Job failed,
    /// every pod not succeeded counts as failed.
    async fn track(
        &self,
        key: &ObjectKey,
        job: &mut Job,
        owned: &[Arc<Pod>],
    ) -> Result<(), SyncError> {
        let spec = job.spec.clone().unwrap_or_default();
        let indexed = spec.completion_mode.as_deref() == Some("Indexed");
        let policy = spec.pod_failure_policy.as_ref();
        let mut status = job.status.clone().unwrap_or_default();
        let failing = condition_true(&status, FAILURE_TARGET);
        let succeeding = condition_true(&status, SUCCESS_CRITERIA_MET);
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
        let mut release: Vec<&Arc<Pod>> = Vec::new();
        let mut new_succeeded: Vec<&Pod> = Vec::new();
        let mut new_failed: Vec<&Pod> = Vec::new();
        for p in owned.iter().filter(|p| has_finalizer(p)) {
            let pod_uid = p.metadata.uid.clone().unwrap_or_default();
            if listed.contains(&pod_uid) {
                continue;
            }
            let in_range =
                !indexed || index_of(p).is_some_and(|i| spec.completions.is_none_or(|c| i < c));
            if pods::phase(p) == "Succeeded" {
                new_succeeded.push(p);
                if in_range {
                    uncounted
                        .succeeded
                        .get_or_insert_with(Vec::new)
                        .push(pod_uid);
                    added = true;
                } else {
                    release.push(p);
                }
            } else if is_failed(p, &spec) || failing {
                if is_finished(p) || p.metadata.deletion_timestamp.is_some() {
                    new_failed.push(p);
                }
                let counts = match_failure(policy, p).is_none_or(|a| a.counts());
                if counts && in_range {
                    uncounted.failed.get_or_insert_with(Vec::new).push(pod_uid);
                    added = true;
                } else {
                    release.push(p);
                }
            } else if succeeding && p.metadata.deletion_timestamp.is_some() {
                release.push(p);
            }
        }
        if added {
            status.uncounted_terminated_pods = Some(uncounted.clone());
            self.write_status(job, status.clone()).await?;
        }
        if !new_succeeded.is_empty() || !new_failed.is_empty() {
            self.backoff
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .entry(key.clone())
                .or_default()
                .update(&new_succeeded, &new_failed);
        }
        let nothing_uncounted = uncounted.succeeded.iter().flatten().next().is_none()
            && uncounted.failed.iter().flatten().next().is_none();
        if nothing_uncounted && release.is_empty() {
            return Ok(());
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
            .chain(release)
            .collect();
        for r in join_all(holding.iter().map(|p| self.remove_finalizer(p))).await {
            r?;
        }
        if nothing_uncounted {
            return Ok(());
        }
        // Step 3: count them.
        let mut completed = parse_indexes(status.completed_indexes.as_deref());
        let mut failed_indexes = parse_indexes(status.failed_indexes.as_deref());
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
        let mut failed = status.failed.unwrap_or(0);
        for u in uncounted.failed.iter().flatten() {
            failed = failed.saturating_add(1);
            let (Some(limit), Some(p)) = (spec.backoff_limit_per_index, by_uid.get(u.as_str()))
            else {
                continue;
            };
            let Some(i) = index_of(p).filter(|_| indexed) else {
                continue;
            };
            let fail_index = match_failure(policy, p) == Some(FailureAction::FailIndex);
            if fail_index || indexes::failure_count(p).saturating_add(1) > limit {
                failed_indexes.insert(i);
            }
        }
        status.succeeded = Some(succeeded);
        status.failed = Some(failed);
        if indexed {
            status.completed_indexes = Some(format_indexes(&completed));
        }
        if spec.backoff_limit_per_index.is_some() {
            status.failed_indexes = Some(format_indexes(&failed_indexes));
        }
        status.uncounted_terminated_pods = Some(UncountedTerminatedPods::default());
        self.write_status(job, status).await?;
        Ok(())
    }

    /// The failures of index `i` so far, for its next pod's annotations.
    fn index_failures(owned: &[Arc<Pod>], i: i32, spec: &JobSpec) -> IndexFailures {
        let mut out = IndexFailures::default();
        for p in owned
            .iter()
            .filter(|p| index_of(p) == Some(i) && is_failed(p, spec))
        {
            let counts =
                match_failure(spec.pod_failure_policy.as_ref(), p).is_none_or(|a| a.counts());
            out.counted = out
                .counted
                .max(indexes::failure_count(p) + i32::from(counts));
            out.ignored = out
                .ignored
                .max(indexes::ignored_failure_count(p) + i32::from(!counts));
        }
        out
    }

    /// The reason and message of the Job's failure, if it failed.
    fn failure(
        spec: &JobSpec,
        status: &JobStatus,
        owned: &[Arc<Pod>],
        past_deadline: bool,
    ) -> Option<(&'static str, String)> {
        let fail_job = spec.pod_failure_policy.as_ref().and_then(|policy| {
            owned
                .iter()
                .filter(|p| pods::phase(p) == "Failed")
                .find_map(|p| match match_failure(Some(policy), p) {
                    Some(FailureAction::FailJob(msg)) => Some(msg),
                    _ => None,
                })
        });
        if let Some(msg) = fail_job {
            return Some((REASON_POD_FAILURE_POLICY, msg));
        }
        if status.failed.unwrap_or(0) > spec.backoff_limit.unwrap_or(6) {
            return Some((
                REASON_BACKOFF_LIMIT_EXCEEDED,
                "Job has reached the specified backoff limit".into(),
            ));
        }
        if spec.backoff_limit_per_index.is_some() {
            let failed = parse_indexes(status.failed_indexes.as_deref()).len();
            let completed = parse_indexes(status.completed_indexes.as_deref()).len();
            let completions = usize::try_from(spec.completions.unwrap_or(0)).unwrap_or(0);
            if spec
                .max_failed_indexes
                .is_some_and(|m| failed > usize::try_from(m).unwrap_or(0))
            {
                return Some((
                    REASON_MAX_FAILED_INDEXES_EXCEEDED,
                    "Job has exceeded the specified maximal number of failed indexes".into(),
                ));
            }
            if failed > 0 && failed + completed >= completions {
                return Some((REASON_FAILED_INDEXES, "Job has failed indexes".into()));
            }
        }
        if past_deadline {
            return Some((
                REASON_DEADLINE_EXCEEDED,
                "Job was active longer than specified deadline".into(),
            ));
        }
        None
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
        let owned = self.claim_pods(&job).await?;
        self.track(key, &mut job, &owned).await?;
        let mut status = job.status.clone().unwrap_or_default();
        let now = Timestamp::now();
        let mut active: Vec<Arc<Pod>> = owned.iter().filter(|p| is_active(p)).cloned().collect();
        let terminating: Vec<&Arc<Pod>> = owned.iter().filter(|p| is_terminating(p)).collect();
        let succeeded = status.succeeded.unwrap_or(0);
        let parallelism = spec.parallelism.unwrap_or(1).max(0);
        let suspended = spec.suspend == Some(true);
        let mut requeue: Option<Duration> = None;
        status.terminating = Some(i32::try_from(terminating.len()).unwrap_or(i32::MAX));

        // Decide the outcome.
        if !condition_true(&status, FAILURE_TARGET)
            && !condition_true(&status, SUCCESS_CRITERIA_MET)
        {
            let completed_indexes = parse_indexes(status.completed_indexes.as_deref());
            let completed = match spec.completions {
                Some(c) if indexed => {
                    i32::try_from(completed_indexes.len()).unwrap_or(i32::MAX) >= c
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
            let success_policy = if indexed {
                match_success(
                    spec.success_policy.as_ref(),
                    spec.completions.unwrap_or(0),
                    &completed_indexes,
                )
            } else {
                None
            };
            if let Some((reason, msg)) = Self::failure(&spec, &status, &owned, past_deadline) {
                set_condition(&mut status, FAILURE_TARGET, "True", reason, &msg, now);
            } else if let Some(msg) = success_policy {
                set_condition(
                    &mut status,
                    SUCCESS_CRITERIA_MET,
                    "True",
                    REASON_SUCCESS_POLICY,
                    &msg,
                    now,
                );
            } else if completed {
                set_condition(
                    &mut status,
                    SUCCESS_CRITERIA_MET,
                    "True",
                    REASON_COMPLETIONS_REACHED,
                    "Reached expected number of succeeded pods",
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
            // The pods of indexes that failed stop.
            let failed_indexes = parse_indexes(status.failed_indexes.as_deref());
            let (doomed, running): (Vec<Arc<Pod>>, Vec<Arc<Pod>>) = active
                .into_iter()
                .partition(|p| index_of(p).is_some_and(|i| indexed && failed_indexes.contains(&i)));
            active = running;
            active_count = active.len();
            if !doomed.is_empty() {
                failure = self.delete_pods(key, &job, &doomed).await.err();
            }
            let backoff_left = self.backoff_remaining(key, now);
            if let Some(left) = backoff_left {
                requeue = Some(requeue.map_or(left, |r| r.min(left)));
            }
            // With podReplacementPolicy Failed, a terminating pod still holds its place.
            let waiting: Vec<&Arc<Pod>> = if only_replace_failed(&spec) {
                terminating.clone()
            } else {
                Vec::new()
            };
            let room = usize::try_from(parallelism)
                .unwrap_or(0)
                .saturating_sub(active.len() + waiting.len());
            let want_indexes: Vec<Option<(i32, IndexFailures)>> = if indexed {
                let completions = spec.completions.unwrap_or(parallelism);
                let done = parse_indexes(status.completed_indexes.as_deref());
                let running: BTreeSet<i32> = active
                    .iter()
                    .chain(waiting.iter().copied())
                    .filter_map(|p| index_of(p))
                    .collect();
                (0..completions)
                    .filter(|i| {
                        !done.contains(i) && !failed_indexes.contains(i) && !running.contains(i)
                    })
                    .take(room)
                    .map(|i| Some((i, Self::index_failures(&owned, i, &spec))))
                    .collect()
            } else {
                let want = match spec.completions {
                    Some(c) => (c - succeeded).clamp(0, parallelism),
                    None if succeeded > 0 => i32::try_from(active.len()).unwrap_or(i32::MAX),
                    None => parallelism,
                };
                let want = usize::try_from(want).unwrap_or(0);
                vec![None; want.saturating_sub(active.len() + waiting.len())]
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

    /// How long until the backoff after the last failed pods has passed, if it has not.
    fn backoff_remaining(&self, key: &ObjectKey, now: Timestamp) -> Option<Duration> {
        let record = *self
            .backoff
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(key)?;
        let max = self.backoff_base.saturating_mul(BACKOFF_MAX_FACTOR);
        record
            .remaining(self.backoff_base, max, now)
            .map(|d| d + Duration::from_millis(10))
    }
}

impl Reconciler<Job> for JobReconciler {
    type Error = SyncError;

    async fn reconcile(&self, request: Request<Job>) -> Result<Action, ReconcileError<SyncError>> {
        let key = request.key().clone();
        let Some(job) = request.object() else {
            self.expectations.forget(&key);
            self.backoff
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
    if s.failed_indexes.as_deref() == Some("") {
        s.failed_indexes = None;
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
