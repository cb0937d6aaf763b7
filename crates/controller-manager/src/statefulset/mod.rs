//! The StatefulSet controller: pods with stable names `<set>-<ordinal>`, their own claims,
//! created and deleted in order (Kubernetes' `pkg/controller/statefulset`).
//!
//! A sync (`sync` + `UpdateStatefulSet`) claims the namespace's pods whose name makes them
//! members (`<set>-<n>`) and that the selector matches, makes sure the current template has
//! its ControllerRevision ([`history`]), then, when the set's [expectations] are met:
//!
//! 1. **Replicas** — for each ordinal `start … start+replicas-1`, lowest first: a Failed or
//!    Succeeded pod is deleted (the next sync recreates it); a missing pod gets its claims
//!    and is created — from the current revision below `partition`, the update revision
//!    above; a Pending pod gets any missing claim; a pod whose identity label, volumes or
//!    claim owners are off is fixed. With `OrderedReady` (the default) the pass stops at the
//!    first pod that was just created, is terminating, or is not Running, Ready and
//!    available (`minReadySeconds`): web-1 is not created before web-0 is Ready. `Parallel`
//!    does every ordinal at once, in slow-start batches.
//! 2. **Condemned** pods (ordinals outside the range, highest first) get their claims'
//!    owners set for the retention policy, then are deleted: all at once with `Parallel`,
//!    one at a time with `OrderedReady`, waiting for the previous to be gone and for the
//!    others to be healthy.
//! 3. **Update** — `OnDelete` stops here (a deleted pod comes back at the update revision).
//!    `RollingUpdate` deletes the highest-ordinal pod at or above `partition` that is not at
//!    the update revision, once every pod above it is healthy; with `maxUnavailable` set, up
//!    to that many unavailable pods at once (the `MaxUnavailableStatefulSet` path).
//!
//! The status (replicas, readyReplicas, availableReplicas, currentReplicas,
//! updatedReplicas, currentRevision, updateRevision, collisionCount, observedGeneration) is
//! written when it changed; once every replica is updated and ready the update revision
//! becomes the current one. Revisions beyond `revisionHistoryLimit` that no pod uses go.
//!
//! **Claims.** Each claim template gives the pod with ordinal `n` a claim
//! `<template>-<set>-<n>`, mounted as a volume named after the template. The claim's
//! ownerReferences carry `persistentVolumeClaimRetentionPolicy` ([`identity`]): whenDeleted
//! Delete makes the set its controller, whenScaled Delete makes a scaled-down pod its
//! controller just before the pod is deleted, so the garbage collector deletes the claim
//! with its owner. A new pod waits while its claim still belongs to an earlier pod of its
//! name.
//!
//! Events regard the set and say what Kubernetes says: `SuccessfulCreate` "create Pod web-0
//! in StatefulSet web successful", "create Claim data-web-0 Pod web-0 in StatefulSet web
//! success", `SuccessfulDelete`, `SuccessfulUpdate`, and `Failed…` with the error.
//!
//! [expectations]: crate::expectations

pub mod history;
pub mod identity;

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{ControllerRevision, StatefulSet, StatefulSetStatus};
use k8s_openapi::api::core::v1::{ObjectReference, PersistentVolumeClaim, Pod, PodTemplateSpec};
use k8s_openapi::jiff::Timestamp;
use kore_runtime::controller::{Action, ReconcileError, Reconciler, Request};
use kore_runtime::events::{EventType, Recorder};
use kore_runtime::metrics::Metrics;
use kore_runtime::{CachedClient, Controller, InformerConfig, Manager, ObjectKey, Store};
use kube::Resource;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use serde_json::json;

use crate::deployment::util::scaled_value;
use crate::error::{SyncError, message, status_code};
use crate::expectations::Expectations;
use crate::ownership::{claim, controller_reference, recheck_owner};
use crate::pods::{self, available_at, is_available, is_ready};
use crate::replicaset::slow_start_batch;
use crate::{
    BY_CONTROLLER, BY_NAMESPACE, Caches, ORPHANS_BY_NAMESPACE, Options, add_indexes, publish,
    recorder, selector,
};

use identity::{Owner, ordinal_of, revision_of};

/// The controller's name (`--controllers`), as kube-controller-manager 1.33 names it.
pub const NAME: &str = "statefulset-controller";

/// Registers the StatefulSet controller on `manager`: its StatefulSet, ControllerRevision
/// and PersistentVolumeClaim informers, the shared pod informer (owned pods, and orphans its
/// selector matches), `--concurrent-statefulset-syncs` workers.
pub(crate) fn register(
    manager: &mut Manager,
    caches: &Caches,
    options: &Options,
    metrics: &Metrics,
) -> &'static str {
    let client = manager.client();
    let sets = manager
        .informers()
        .get::<StatefulSet>(InformerConfig::default());
    add_indexes(&sets);
    let revisions = manager
        .informers()
        .get::<ControllerRevision>(InformerConfig::default());
    add_indexes(&revisions);
    let claims = manager
        .informers()
        .get::<PersistentVolumeClaim>(InformerConfig::default());
    let builder = Controller::for_::<StatefulSet>(manager.informers())
        .named(NAME)
        .owns::<Pod>()
        .watches::<Pod>(orphan_mapper(sets.store()))
        .max_concurrent_reconciles(options.concurrent_statefulset_syncs)
        .metrics(metrics.clone());
    let reconciler = StatefulSetReconciler {
        client: client.clone(),
        pods: caches.pods.store(),
        claims: CachedClient::new(client.clone(), claims),
        revisions: CachedClient::new(client.clone(), revisions),
        sets: CachedClient::new(client.clone(), sets),
        expectations: Expectations::default(),
        recorder: recorder(&client, NAME),
    };
    manager.add(Box::new(builder.build(reconciler)));
    NAME
}

/// Maps an orphan pod to the StatefulSets of its namespace whose selector matches it.
pub fn orphan_mapper(
    sets: Store<StatefulSet>,
) -> impl Fn(&Pod) -> Vec<ObjectKey> + Send + Sync + 'static {
    move |pod: &Pod| {
        if pods::controller_ref(&pod.metadata).is_some() {
            return Vec::new();
        }
        let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
        sets.by_index(BY_NAMESPACE, namespace)
            .iter()
            .filter(|s| {
                selector::matches(
                    s.spec.as_ref().map(|s| &s.selector),
                    pod.metadata.labels.as_ref(),
                )
            })
            .map(|s| ObjectKey::of(&**s))
            .collect()
    }
}

/// Reconciles StatefulSets; see the [module docs](self).
pub struct StatefulSetReconciler {
    client: kube::Client,
    pods: Store<Pod>,
    claims: CachedClient<PersistentVolumeClaim>,
    revisions: CachedClient<ControllerRevision>,
    sets: CachedClient<StatefulSet>,
    expectations: Expectations,
    recorder: Recorder,
}

impl std::fmt::Debug for StatefulSetReconciler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StatefulSetReconciler")
            .finish_non_exhaustive()
    }
}

/// A failed step: the verb (`create`, `delete`, `update`) and the message.
type StepError = (&'static str, String);

/// Whether the pass over pods stops here (a monotonic set waits) or goes on.
type Step = Result<bool, StepError>;

fn is_running_and_ready(pod: &Pod) -> bool {
    pods::phase(pod) == "Running" && is_ready(pod)
}

fn is_terminating(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_some()
}

fn is_healthy(pod: &Pod) -> bool {
    is_running_and_ready(pod) && !is_terminating(pod)
}

fn name_of(pod: &Pod) -> &str {
    pod.metadata.name.as_deref().unwrap_or_default()
}

/// One sync's view of a set: what the steps need and share.
struct View<'a> {
    key: &'a ObjectKey,
    set: &'a StatefulSet,
    regarding: ObjectReference,
    pod_api: Api<Pod>,
    current: &'a ControllerRevision,
    update: &'a ControllerRevision,
    current_template: PodTemplateSpec,
    update_template: PodTemplateSpec,
    monotonic: bool,
    min_ready: i32,
    now: Timestamp,
}

impl View<'_> {
    fn set_name(&self) -> &str {
        self.set.metadata.name.as_deref().unwrap_or_default()
    }

    fn revision_name(revision: &ControllerRevision) -> &str {
        revision.metadata.name.as_deref().unwrap_or_default()
    }

    fn is_available(&self, pod: &Pod) -> bool {
        is_running_and_ready(pod) && is_available(pod, self.min_ready, self.now)
    }
}

impl StatefulSetReconciler {
    async fn sync(&self, key: &ObjectKey, set: &StatefulSet) -> Result<Action, SyncError> {
        let namespace = key.namespace().unwrap_or_default().to_owned();
        let uid = set.metadata.uid.clone().unwrap_or_default();
        let spec = set.spec.clone().unwrap_or_default();
        let needs_sync = self.expectations.satisfied(key, &self.pods);
        let reference = controller_reference::<StatefulSet>(&set.metadata);
        let pod_api: Api<Pod> = Api::namespaced(self.client.clone(), &namespace);
        let set_api: Api<StatefulSet> = Api::namespaced(self.client.clone(), &namespace);
        let mut candidates: Vec<Arc<Pod>> = self.pods.by_index(BY_CONTROLLER, &uid);
        candidates.extend(self.pods.by_index(ORPHANS_BY_NAMESPACE, &namespace));
        let pods = claim(
            &pod_api,
            &reference,
            set.metadata.deletion_timestamp.is_some(),
            |p: &Pod| {
                selector::matches(Some(&spec.selector), p.metadata.labels.as_ref())
                    && identity::is_member_of(key.name(), p)
            },
            candidates,
            || recheck_owner(&set_api, key.name(), &uid),
        )
        .await?;

        let mut revisions = self.revisions.by_index(BY_CONTROLLER, &uid);
        history::sort(&mut revisions);
        let (current, update, collision_count) = self.revisions_for(set, &revisions).await?;
        let current_template =
            history::template_of(&current).unwrap_or_else(|| spec.template.clone());
        let update_template =
            history::template_of(&update).unwrap_or_else(|| spec.template.clone());
        let view = View {
            key,
            set,
            regarding: set.object_ref(&()),
            pod_api,
            current: &current,
            update: &update,
            current_template,
            update_template,
            monotonic: spec.pod_management_policy.as_deref() != Some("Parallel"),
            min_ready: spec.min_ready_seconds.unwrap_or(0),
            now: Timestamp::now(),
        };
        let mut status = StatefulSetStatus {
            observed_generation: set.metadata.generation,
            current_revision: Some(View::revision_name(&current).to_owned()),
            update_revision: Some(View::revision_name(&update).to_owned()),
            collision_count: Some(collision_count),
            ..StatefulSetStatus::default()
        };
        let outcome = self.update_set(&view, &pods, &mut status, needs_sync).await;
        let written = self.write_status(set, status).await;
        let truncated = self
            .truncate_history(set, &revisions, &pods, &current, &update)
            .await;
        outcome?;
        written?;
        truncated?;
        // A pod ready but not yet available becomes so without an event, and expectations
        // may wait for something never observed: look again then.
        let until_available = pods
            .iter()
            .filter_map(|p| available_at(p, view.min_ready, view.now))
            .min()
            .map(|at| view.now.duration_until(at).unsigned_abs() + Duration::from_secs(1));
        let until_expired = self.expectations.expires_in(key);
        Ok(
            match until_available.into_iter().chain(until_expired).min() {
                Some(after) => Action::requeue_after(after),
                None => Action::done(),
            },
        )
    }

    /// The current and update revisions and the collision count (`getStatefulSetRevisions`):
    /// the update revision is the current template's, created if none holds it, or an older
    /// one renumbered to the highest when the set went back to its template.
    async fn revisions_for(
        &self,
        set: &StatefulSet,
        revisions: &[Arc<ControllerRevision>],
    ) -> Result<(ControllerRevision, ControllerRevision, i32), SyncError> {
        let mut collision_count = set
            .status
            .as_ref()
            .and_then(|s| s.collision_count)
            .unwrap_or(0);
        let next = revisions.last().map_or(1, |r| r.revision + 1);
        let wanted = history::new_revision(set, next, collision_count);
        let equal = revisions.iter().rfind(|r| history::same_data(r, &wanted));
        let update = match equal {
            Some(e) if revisions.last().map(|l| &l.metadata.name) == Some(&e.metadata.name) => {
                (**e).clone()
            }
            Some(e) => {
                let name = e.metadata.name.clone().unwrap_or_default();
                let key = ObjectKey::of(&**e);
                let patched = self
                    .revisions
                    .patch(
                        &key,
                        &PatchParams::default(),
                        &Patch::Merge(json!({"revision": next})),
                    )
                    .await
                    .map_err(|e| SyncError::cached(format!("ControllerRevision {name}"), e))?;
                (*patched).clone()
            }
            None => {
                let mut attempt = wanted;
                loop {
                    match self
                        .revisions
                        .create(&attempt, &PostParams::default())
                        .await
                    {
                        Ok(created) => break (*created).clone(),
                        Err(kore_runtime::client::Error::Api(e))
                            if status_code(&e) == Some(409) =>
                        {
                            let name = attempt.metadata.name.clone().unwrap_or_default();
                            let api: Api<ControllerRevision> = Api::namespaced(
                                self.client.clone(),
                                set.metadata.namespace.as_deref().unwrap_or_default(),
                            );
                            let existing = api.get(&name).await.map_err(|e| {
                                SyncError::api("get", format!("ControllerRevision {name}"), e)
                            })?;
                            if history::is_ours(&existing, &attempt) {
                                break existing;
                            }
                            collision_count += 1;
                            if collision_count > history::MAX_COLLISIONS {
                                return Err(SyncError::HashCollision(format!(
                                    "ControllerRevision {name}"
                                )));
                            }
                            attempt = history::new_revision(set, next, collision_count);
                        }
                        Err(e) => {
                            let name = attempt.metadata.name.clone().unwrap_or_default();
                            return Err(SyncError::cached(format!("ControllerRevision {name}"), e));
                        }
                    }
                }
            }
        };
        let current_name = set
            .status
            .as_ref()
            .and_then(|s| s.current_revision.as_deref());
        let current = revisions
            .iter()
            .find(|r| {
                r.metadata
                    .name
                    .as_deref()
                    .is_some_and(|n| Some(n) == current_name)
            })
            .map_or_else(|| update.clone(), |r| (**r).clone());
        Ok((current, update, collision_count))
    }

    /// Creates, fixes and deletes pods (`updateStatefulSet`), filling in `status`. Only the
    /// status is computed while expectations are pending or the set is being deleted.
    async fn update_set(
        &self,
        view: &View<'_>,
        pods: &[Arc<Pod>],
        status: &mut StatefulSetStatus,
        needs_sync: bool,
    ) -> Result<(), SyncError> {
        let set = view.set;
        let start = identity::start_ordinal(set);
        let count = usize::try_from(identity::replicas(set)).unwrap_or(0);
        let mut slots: Vec<Option<Arc<Pod>>> = vec![None; count];
        let mut condemned: Vec<Arc<Pod>> = Vec::new();
        for p in pods {
            let Some(ordinal) = ordinal_of(p) else {
                continue;
            };
            if identity::in_range(set, ordinal) {
                let i = usize::try_from(ordinal - start).unwrap_or(0);
                slots[i] = Some(p.clone());
            } else if ordinal >= 0 {
                condemned.push(p.clone());
            }
        }
        condemned.sort_by_key(|p| std::cmp::Reverse(ordinal_of(p)));
        count_replicas(status, slots.iter().flatten().chain(condemned.iter()), view);
        if set.metadata.deletion_timestamp.is_some() || !needs_sync {
            return Ok(());
        }

        // The first unhealthy replica (a missing one counts), else the lowest unhealthy
        // condemned pod: the only one a monotonic scale-down may delete while unhealthy.
        let first_unhealthy: Option<String> = slots
            .iter()
            .enumerate()
            .find(|(_, p)| p.as_ref().is_none_or(|p| !is_healthy(p)))
            .map(|(i, _)| identity::pod_name(set, start + i32::try_from(i).unwrap_or(0)))
            .or_else(|| {
                condemned
                    .iter()
                    .rev()
                    .find(|p| !is_healthy(p))
                    .map(|p| name_of(p).to_owned())
            });

        if self
            .run_for_all(view.monotonic, count, |i| {
                self.process_replica(view, &slots, i)
            })
            .await?
        {
            return Ok(());
        }
        if self
            .run_for_all(view.monotonic, condemned.len(), |i| {
                self.fix_condemned_claims(view, &condemned[i])
            })
            .await?
        {
            return Ok(());
        }
        if self
            .run_for_all(view.monotonic, condemned.len(), |i| {
                self.process_condemned(view, &condemned[i], first_unhealthy.as_deref())
            })
            .await?
        {
            return Ok(());
        }

        let strategy = set.spec.as_ref().and_then(|s| s.update_strategy.as_ref());
        if strategy.and_then(|s| s.type_.as_deref()) == Some("OnDelete") {
            return Ok(());
        }
        let rolling = strategy.and_then(|s| s.rolling_update.as_ref());
        let update_min =
            usize::try_from(rolling.and_then(|r| r.partition).unwrap_or(0)).unwrap_or(0);
        let update_name = View::revision_name(view.update);
        match rolling.and_then(|r| r.max_unavailable.as_ref()) {
            None => {
                // The highest pod not at the update revision goes, once all above are healthy.
                for target in (update_min..count).rev() {
                    let Some(pod) = &slots[target] else {
                        return Ok(());
                    };
                    if revision_of(pod) != update_name && !is_terminating(pod) {
                        self.delete_pod(view, pod).await.map_err(one_failed)?;
                        status.current_replicas = Some(status.current_replicas.unwrap_or(0) - 1);
                        return Ok(());
                    }
                    if !is_healthy(pod) {
                        return Ok(());
                    }
                }
            }
            Some(max) => {
                let max_unavailable =
                    scaled_value(Some(max), identity::replicas(set), false, "1").max(1);
                let unavailable = slots
                    .iter()
                    .filter(|p| p.as_ref().is_none_or(|p| !is_healthy(p)))
                    .count();
                let mut allowed = usize::try_from(max_unavailable)
                    .unwrap_or(1)
                    .saturating_sub(unavailable);
                for target in (update_min..count).rev() {
                    if allowed == 0 {
                        break;
                    }
                    if let Some(pod) = &slots[target]
                        && revision_of(pod) != update_name
                        && !is_terminating(pod)
                    {
                        self.delete_pod(view, pod).await.map_err(one_failed)?;
                        status.current_replicas = Some(status.current_replicas.unwrap_or(0) - 1);
                        allowed -= 1;
                    }
                }
            }
        }
        Ok(())
    }

    /// Runs `step` for `0..count`: in order, stopping at the first that says so
    /// (monotonic), or all of them in slow-start batches (burst). True if the pass stopped.
    async fn run_for_all<F, Fut>(
        &self,
        monotonic: bool,
        count: usize,
        mut step: F,
    ) -> Result<bool, SyncError>
    where
        F: FnMut(usize) -> Fut,
        Fut: Future<Output = Step>,
    {
        if monotonic {
            for i in 0..count {
                match step(i).await {
                    Ok(true) => return Ok(true),
                    Ok(false) => {}
                    Err((verb, first)) => {
                        return Err(SyncError::Pods {
                            verb,
                            failed: 1,
                            attempted: 1,
                            first,
                        });
                    }
                }
            }
            return Ok(false);
        }
        let verb = std::sync::Mutex::new("update");
        let result = slow_start_batch(count, |i| {
            let fut = step(i);
            let verb = &verb;
            async move {
                fut.await.map(|_| ()).map_err(|(v, m)| {
                    *verb
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner) = v;
                    m
                })
            }
        })
        .await;
        match result {
            Ok(()) => Ok(false),
            Err((done, first)) => Err(SyncError::Pods {
                verb: *verb
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner),
                failed: count - done,
                attempted: count,
                first,
            }),
        }
    }

    /// One replica slot (`processReplica`); true when a monotonic pass must stop here.
    async fn process_replica(&self, view: &View<'_>, slots: &[Option<Arc<Pod>>], i: usize) -> Step {
        let set = view.set;
        let ordinal = identity::start_ordinal(set) + i32::try_from(i).unwrap_or(0);
        let Some(pod) = &slots[i] else {
            if self.claim_is_stale(set, ordinal) {
                return Ok(true);
            }
            let (template, revision) = if use_current_revision(set, ordinal) {
                (&view.current_template, view.current)
            } else {
                (&view.update_template, view.update)
            };
            let pod = identity::new_pod(
                set,
                template,
                ordinal,
                View::revision_name(revision),
                controller_reference::<StatefulSet>(&set.metadata),
            );
            self.create_pod(view, pod).await?;
            return Ok(view.monotonic);
        };
        if matches!(pods::phase(pod), "Failed" | "Succeeded") {
            if !is_terminating(pod) {
                self.delete_pod(view, pod).await?;
            }
            return Ok(true);
        }
        if pods::phase(pod) == "Pending" {
            self.create_claims(view, pod).await?;
            self.update_claims_for_retention(view, pod).await?;
        }
        if view.monotonic && (is_terminating(pod) || !view.is_available(pod)) {
            return Ok(true);
        }
        let retention_ok = self.claims_match_retention(set, pod);
        if identity::identity_matches(set, pod)
            && identity::storage_matches(set, pod)
            && retention_ok
        {
            return Ok(false);
        }
        self.update_pod(view, pod, ordinal).await?;
        Ok(false)
    }

    /// Whether a claim of the pod with `ordinal` still belongs to an earlier pod of that
    /// name (being deleted with it), so the pod must wait (`PodClaimIsStale`).
    fn claim_is_stale(&self, set: &StatefulSet, ordinal: i32) -> bool {
        if !identity::retention(set).1 {
            return false;
        }
        let pod = Owner::pod(&identity::pod_name(set, ordinal), None);
        identity::claims(set, ordinal).iter().any(|(_, c)| {
            self.claims
                .get(&ObjectKey::of(c))
                .is_some_and(|existing| identity::has_stale_owner_ref(&existing, &pod))
        })
    }

    fn event(&self, view: &View<'_>, type_: EventType, reason: &str, action: &str, note: String) {
        publish(
            &self.recorder,
            view.regarding.clone(),
            type_,
            reason,
            action,
            note,
        );
    }

    fn pod_event(&self, view: &View<'_>, verb: &'static str, pod: &str, err: Option<&str>) {
        let title = format!("{}{}", verb[..1].to_uppercase(), &verb[1..]);
        let set = view.set_name();
        match err {
            None => self.event(
                view,
                EventType::Normal,
                &format!("Successful{title}"),
                &title,
                format!("{verb} Pod {pod} in StatefulSet {set} successful"),
            ),
            Some(e) => self.event(
                view,
                EventType::Warning,
                &format!("Failed{title}"),
                &title,
                format!("{verb} Pod {pod} in StatefulSet {set} failed error: {e}"),
            ),
        }
    }

    /// Creates the pod's claims, then the pod, then sets its claims' owners
    /// (`CreateStatefulPod`).
    async fn create_pod(&self, view: &View<'_>, pod: Pod) -> Result<(), StepError> {
        let name = name_of(&pod).to_owned();
        if let Err((_, e)) = self.create_claims(view, &pod).await {
            self.pod_event(view, "create", &name, Some(&e));
            return Err(("create", e));
        }
        match view.pod_api.create(&PostParams::default(), &pod).await {
            Ok(created) => {
                self.expectations.created(view.key, name.clone());
                if let Err((_, e)) = self.update_claims_for_retention(view, &created).await {
                    self.pod_event(view, "update", &name, Some(&e));
                    return Err(("update", e));
                }
                self.pod_event(view, "create", &name, None);
                Ok(())
            }
            // The cache is behind: the next sync sees the pod.
            Err(e) if status_code(&e) == Some(409) => Err(("create", message(&e))),
            Err(e) => {
                let msg = message(&e);
                self.pod_event(view, "create", &name, Some(&msg));
                Err(("create", msg))
            }
        }
    }

    /// Deletes a pod (its UID as precondition) under expectations (`DeleteStatefulPod`).
    async fn delete_pod(&self, view: &View<'_>, pod: &Pod) -> Result<(), StepError> {
        let name = name_of(pod).to_owned();
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        self.expectations
            .deleting(view.key, name.clone(), uid.clone());
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid: Some(uid),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        match view.pod_api.delete(&name, &params).await {
            Ok(_) => {
                self.pod_event(view, "delete", &name, None);
                Ok(())
            }
            Err(e) if status_code(&e) == Some(404) => Ok(()),
            Err(e) => {
                self.expectations.delete_failed(view.key, &name);
                let msg = message(&e);
                self.pod_event(view, "delete", &name, Some(&msg));
                Err(("delete", msg))
            }
        }
    }

    /// Fixes a pod's identity label and volumes and its claims' owners (`UpdateStatefulPod`).
    async fn update_pod(&self, view: &View<'_>, pod: &Pod, ordinal: i32) -> Result<(), StepError> {
        let set = view.set;
        let name = name_of(pod).to_owned();
        let mut fixed = pod.clone();
        let mut patch = serde_json::Map::new();
        if !identity::identity_matches(set, pod) {
            identity::update_identity(&mut fixed, ordinal);
            patch.insert(
                "metadata".into(),
                json!({"labels": fixed.metadata.labels, "resourceVersion": pod.metadata.resource_version}),
            );
        }
        if !identity::storage_matches(set, pod) {
            if let Err((_, e)) = self.create_claims(view, pod).await {
                self.pod_event(view, "update", &name, Some(&e));
                return Err(("update", e));
            }
            let spec = fixed.spec.get_or_insert_with(Default::default);
            identity::update_storage(set, ordinal, spec);
            patch.insert("spec".into(), json!({"volumes": spec.volumes}));
        }
        let mut changed = !patch.is_empty();
        if !self.claims_match_retention(set, pod) {
            if let Err((_, e)) = self.update_claims_for_retention(view, pod).await {
                self.pod_event(view, "update", &name, Some(&e));
                return Err(("update", e));
            }
            changed = true;
        }
        if !patch.is_empty() {
            let body = serde_json::Value::Object(patch);
            if let Err(e) = view
                .pod_api
                .patch(&name, &PatchParams::default(), &Patch::Merge(&body))
                .await
            {
                let msg = message(&e);
                self.pod_event(view, "update", &name, Some(&msg));
                return Err(("update", msg));
            }
        }
        if changed {
            self.pod_event(view, "update", &name, None);
        }
        Ok(())
    }

    /// Creates the pod's missing claims (`createPersistentVolumeClaims`); a claim being
    /// deleted is an error (the pod waits for it to go).
    async fn create_claims(&self, view: &View<'_>, pod: &Pod) -> Result<(), StepError> {
        let Some(ordinal) = ordinal_of(pod) else {
            return Ok(());
        };
        let set = view.set_name();
        let pod_name = name_of(pod);
        let mut errors = Vec::new();
        for (_, claim) in identity::claims(view.set, ordinal) {
            let claim_name = claim.metadata.name.clone().unwrap_or_default();
            match self.claims.get(&ObjectKey::of(&claim)) {
                Some(existing) if existing.metadata.deletion_timestamp.is_some() => {
                    errors.push(format!("pvc {claim_name} is being deleted"));
                }
                Some(_) => {}
                None => match self.claims.create(&claim, &PostParams::default()).await {
                    Ok(_) => self.event(
                        view,
                        EventType::Normal,
                        "SuccessfulCreate",
                        "Create",
                        format!(
                            "create Claim {claim_name} Pod {pod_name} in StatefulSet {set} success"
                        ),
                    ),
                    Err(e) => {
                        let already = matches!(&e, kore_runtime::client::Error::Api(k) if status_code(k) == Some(409));
                        let msg = match &e {
                            kore_runtime::client::Error::Api(k) => message(k),
                            other => other.to_string(),
                        };
                        if !already {
                            self.event(
                                view,
                                EventType::Warning,
                                "FailedCreate",
                                "Create",
                                format!("create Claim {claim_name} for Pod {pod_name} in StatefulSet {set} failed error: {msg}"),
                            );
                        }
                        errors.push(format!("failed to create PVC {claim_name}: {msg}"));
                    }
                },
            }
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(("create", errors.join("; ")))
        }
    }

    /// Whether every existing claim of the pod has the owners the retention policy wants
    /// (`ClaimsMatchRetentionPolicy`).
    fn claims_match_retention(&self, set: &StatefulSet, pod: &Pod) -> bool {
        let Some(ordinal) = ordinal_of(pod) else {
            return true;
        };
        let owner = Owner::pod(name_of(pod), pod.metadata.uid.as_deref());
        let scaled_down = !identity::in_range(set, ordinal);
        identity::claims(set, ordinal).iter().all(|(_, c)| {
            self.claims.get(&ObjectKey::of(c)).is_none_or(|existing| {
                identity::claim_owner_up_to_date(&existing, set, &owner, scaled_down)
            })
        })
    }

    /// Sets the owners of the pod's claims for the retention policy
    /// (`UpdatePodClaimForRetentionPolicy`); a claim not in the cache yet is done next sync.
    async fn update_claims_for_retention(
        &self,
        view: &View<'_>,
        pod: &Pod,
    ) -> Result<(), StepError> {
        let set = view.set;
        let Some(ordinal) = ordinal_of(pod) else {
            return Ok(());
        };
        let owner = Owner::pod(name_of(pod), pod.metadata.uid.as_deref());
        let set_owner = Owner::set(set);
        let scaled_down = !identity::in_range(set, ordinal);
        for (_, c) in identity::claims(set, ordinal) {
            let key = ObjectKey::of(&c);
            let Some(existing) = self.claims.get(&key) else {
                continue;
            };
            if identity::has_unexpected_controller(&existing, set, &set_owner, &owner) {
                self.event(
                    view,
                    EventType::Warning,
                    "ConflictingController",
                    "Update",
                    format!(
                        "PersistentVolumeClaim {} has a conflicting OwnerReference that acts as a manging controller, the retention policy is ignored for this claim",
                        key.name()
                    ),
                );
            }
            if identity::claim_owner_up_to_date(&existing, set, &owner, scaled_down) {
                continue;
            }
            let refs = identity::claim_owner_refs(&existing, set, &owner, scaled_down);
            let patch = json!({"metadata": {
                "ownerReferences": refs,
                "resourceVersion": existing.metadata.resource_version,
            }});
            self.claims
                .patch(&key, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map_err(|e| {
                    (
                        "update",
                        format!(
                            "could not update claim {} for delete policy ownerRefs: {e}",
                            key.name()
                        ),
                    )
                })?;
        }
        Ok(())
    }

    /// Sets a condemned pod's claim owners before it goes (`fixPodClaim`).
    async fn fix_condemned_claims(&self, view: &View<'_>, pod: &Pod) -> Step {
        if !self.claims_match_retention(view.set, pod) {
            self.update_claims_for_retention(view, pod).await?;
        }
        Ok(false)
    }

    /// One condemned pod (`processCondemned`); true when a monotonic pass must stop here.
    async fn process_condemned(
        &self,
        view: &View<'_>,
        pod: &Pod,
        first_unhealthy: Option<&str>,
    ) -> Step {
        if is_terminating(pod) {
            return Ok(view.monotonic);
        }
        let first = first_unhealthy == Some(name_of(pod));
        if view.monotonic && !first && !view.is_available(pod) {
            return Ok(true);
        }
        self.delete_pod(view, pod).await?;
        Ok(true)
    }

    /// Writes the status when it changed (`updateStatefulSetStatus`), completing a rolling
    /// update whose replicas are all updated and ready.
    async fn write_status(
        &self,
        set: &StatefulSet,
        mut status: StatefulSetStatus,
    ) -> Result<(), SyncError> {
        let replicas = identity::replicas(set);
        let rolling = set
            .spec
            .as_ref()
            .and_then(|s| s.update_strategy.as_ref())
            .and_then(|s| s.type_.as_deref())
            .is_none_or(|t| t == "RollingUpdate");
        let n = |v: Option<i32>| v.unwrap_or(0);
        if rolling
            && n(status.updated_replicas) == replicas
            && n(status.ready_replicas) == replicas
            && status.replicas == replicas
        {
            status.current_replicas = status.updated_replicas;
            status.current_revision = status.update_revision.clone();
        }
        let current = set.status.clone().unwrap_or_default();
        let same = current.observed_generation == status.observed_generation
            && current.replicas == status.replicas
            && n(current.ready_replicas) == n(status.ready_replicas)
            && n(current.available_replicas) == n(status.available_replicas)
            && n(current.current_replicas) == n(status.current_replicas)
            && n(current.updated_replicas) == n(status.updated_replicas)
            && current.current_revision == status.current_revision
            && current.update_revision == status.update_revision
            && n(current.collision_count) == n(status.collision_count);
        if same {
            return Ok(());
        }
        let updated = StatefulSet {
            status: Some(status),
            ..set.clone()
        };
        self.sets
            .replace_status(&updated, &PostParams::default())
            .await
            .map_err(|e| {
                SyncError::cached(format!("status of StatefulSet {}", ObjectKey::of(set)), e)
            })?;
        Ok(())
    }

    /// Deletes revisions beyond `revisionHistoryLimit` that nothing uses.
    async fn truncate_history(
        &self,
        set: &StatefulSet,
        revisions: &[Arc<ControllerRevision>],
        pods: &[Arc<Pod>],
        current: &ControllerRevision,
        update: &ControllerRevision,
    ) -> Result<(), SyncError> {
        let limit = set
            .spec
            .as_ref()
            .and_then(|s| s.revision_history_limit)
            .unwrap_or(10);
        let live = [View::revision_name(current), View::revision_name(update)];
        for r in history::to_truncate(revisions, pods, live, limit) {
            let name = r.metadata.name.clone().unwrap_or_default();
            match self
                .revisions
                .delete(&ObjectKey::of(&**r), &DeleteParams::default())
                .await
            {
                Ok(_) => {}
                Err(kore_runtime::client::Error::Api(e)) if status_code(&e) == Some(404) => {}
                Err(e) => return Err(SyncError::cached(format!("ControllerRevision {name}"), e)),
            }
        }
        Ok(())
    }
}

/// Whether a new pod of `ordinal` is made from the current revision
/// (`newVersionedStatefulSetPod`): below the partition of a RollingUpdate.
fn use_current_revision(set: &StatefulSet, ordinal: i32) -> bool {
    let strategy = set.spec.as_ref().and_then(|s| s.update_strategy.as_ref());
    let rolling_type = strategy
        .and_then(|s| s.type_.as_deref())
        .is_none_or(|t| t == "RollingUpdate");
    let start = identity::start_ordinal(set);
    match strategy.and_then(|s| s.rolling_update.as_ref()) {
        // Kubernetes reads `A && B || C`: the partition counts even for OnDelete.
        Some(r) => ordinal < start.saturating_add(r.partition.unwrap_or(0)),
        None => {
            rolling_type
                && ordinal
                    < start.saturating_add(
                        set.status
                            .as_ref()
                            .and_then(|s| s.current_replicas)
                            .unwrap_or(0),
                    )
        }
    }
}

/// The error of one failed pod operation.
fn one_failed((verb, first): StepError) -> SyncError {
    SyncError::Pods {
        verb,
        failed: 1,
        attempted: 1,
        first,
    }
}

/// Counts replicas, ready, available, current and updated pods into `status`
/// (`computeReplicaStatus`).
fn count_replicas<'p>(
    status: &mut StatefulSetStatus,
    pods: impl Iterator<Item = &'p Arc<Pod>>,
    view: &View<'_>,
) {
    let (mut replicas, mut ready, mut available, mut current, mut updated) = (0, 0, 0, 0, 0);
    let current_name = View::revision_name(view.current);
    let update_name = View::revision_name(view.update);
    for p in pods {
        replicas += 1;
        if is_running_and_ready(p) {
            ready += 1;
            if is_available(p, view.min_ready, view.now) {
                available += 1;
            }
        }
        if !is_terminating(p) {
            let revision = revision_of(p);
            if revision == current_name {
                current += 1;
            }
            if revision == update_name {
                updated += 1;
            }
        }
    }
    status.replicas = replicas;
    status.ready_replicas = Some(ready);
    status.available_replicas = Some(available);
    status.current_replicas = Some(current);
    status.updated_replicas = Some(updated);
}

impl Reconciler<StatefulSet> for StatefulSetReconciler {
    type Error = SyncError;

    async fn reconcile(
        &self,
        request: Request<StatefulSet>,
    ) -> Result<Action, ReconcileError<SyncError>> {
        let key = request.key().clone();
        let Some(set) = request.object() else {
            self.expectations.forget(&key);
            return Ok(Action::done());
        };
        Ok(self.sync(&key, &set).await?)
    }
}
