//! The Deployment controller: one ReplicaSet per pod template, rolled from old to new.
//!
//! A sync (Kubernetes' `syncDeployment`) claims the ReplicaSets the selector matches, then:
//! a paused Deployment, or one whose replicas changed (`is_scaling_event`), is only scaled
//! (proportionally across its ReplicaSets during a rollout); one with the
//! `deprecated.deployment.rollback.to` annotation takes the template of that revision back
//! (`rollback`) and rolls it out at the next sync; otherwise it rolls out by its
//! strategy. RollingUpdate (`rolling.rs`) creates the new ReplicaSet (named
//! `<deployment>-<pod-template-hash>`) and scales it up within maxSurge while scaling the old
//! ones down within maxUnavailable; Recreate (`recreate.rs`) scales the old ones to zero, waits
//! for their pods to be gone, then scales the new one up. The status (replicas,
//! updatedReplicas, readyReplicas, availableReplicas, unavailableReplicas,
//! observedGeneration) and the Progressing and Available conditions follow the ReplicaSets;
//! old ReplicaSets beyond revisionHistoryLimit are deleted once the rollout is complete.

mod recreate;
mod rolling;
pub mod util;

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentStatus, ReplicaSet, ReplicaSetSpec};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::Timestamp;
use kore_runtime::controller::{Action, ReconcileError, Reconciler, Request};
use kore_runtime::events::{EventType, Recorder};
use kore_runtime::{CachedClient, ObjectKey, Store};
use kube::Resource;
use kube::api::{Api, DeleteParams, PostParams};

use self::util::{
    POD_TEMPLATE_HASH, REVISION, by_creation, by_revision, condition, equal_ignore_hash, find_new,
    is_complete, is_progressing, max_revision, max_surge, max_unavailable, new_condition,
    new_rs_new_replicas, progress_deadline, remove_condition, replicas_annotations_need_update,
    replicas_of, revision_history_limit, rs_actual, rs_available, rs_replicas, set_condition,
    set_new_rs_annotations, set_replicas_annotations,
};
use crate::error::{SyncError, status_code};
use crate::ownership::{claim, controller_reference, is_controlled_by, recheck_owner};
use crate::{BY_CONTROLLER, BY_NAMESPACE, ORPHANS_BY_NAMESPACE, pods, publish, selector};

/// The controller's name (`--controllers`), as kube-controller-manager names it.
pub const NAME: &str = "deployment-controller";

/// Condition type: the rollout is moving (or done, or stuck).
pub const PROGRESSING: &str = "Progressing";
/// Condition type: enough replicas are available.
pub const AVAILABLE: &str = "Available";
/// Condition type: the ReplicaSets cannot create or delete pods.
pub const REPLICA_FAILURE: &str = "ReplicaFailure";

/// Progressing reason: the new ReplicaSet was created.
pub const NEW_RS_CREATED: &str = "NewReplicaSetCreated";
/// Progressing reason: the new ReplicaSet already existed.
pub const FOUND_NEW_RS: &str = "FoundNewReplicaSet";
/// Progressing reason: the rollout moved.
pub const RS_UPDATED: &str = "ReplicaSetUpdated";
/// Progressing reason: the rollout is complete.
pub const NEW_RS_AVAILABLE: &str = "NewReplicaSetAvailable";
/// Progressing reason: the rollout did not move within progressDeadlineSeconds.
pub const TIMED_OUT: &str = "ProgressDeadlineExceeded";
/// Progressing reason: creating the new ReplicaSet failed.
pub const RS_CREATE_ERROR: &str = "ReplicaSetCreateError";
/// Progressing reason: the Deployment is paused.
pub const PAUSED: &str = "DeploymentPaused";
/// Progressing reason: the Deployment was resumed.
pub const RESUMED: &str = "DeploymentResumed";
/// Available reason: at least replicas - maxUnavailable are available.
pub const MIN_AVAILABLE: &str = "MinimumReplicasAvailable";
/// Available reason: fewer than replicas - maxUnavailable are available.
pub const MIN_UNAVAILABLE: &str = "MinimumReplicasUnavailable";

/// Event reason: a ReplicaSet was scaled.
pub const REASON_SCALING: &str = "ScalingReplicaSet";
/// Event reason: a rollback asked for by `deprecated.deployment.rollback.to` was done.
pub const REASON_ROLLBACK_DONE: &str = "DeploymentRollback";
/// Event reason: the revision a rollback asks for does not exist.
pub const REASON_ROLLBACK_NOT_FOUND: &str = "DeploymentRollbackRevisionNotFound";
/// Event reason: the revision a rollback asks for has the current template.
pub const REASON_ROLLBACK_TEMPLATE_UNCHANGED: &str = "DeploymentRollbackTemplateUnchanged";
/// Event reason: the Deployment selects every pod, which is refused.
pub const REASON_SELECTING_ALL: &str = "SelectingAll";

/// Reconciles Deployments; see the [module docs](self).
pub struct DeploymentReconciler {
    client: kube::Client,
    deployments: CachedClient<Deployment>,
    replicasets: CachedClient<ReplicaSet>,
    pods: Store<Pod>,
    recorder: Recorder,
}

impl std::fmt::Debug for DeploymentReconciler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeploymentReconciler")
            .finish_non_exhaustive()
    }
}

/// Maps an orphan ReplicaSet to the Deployments of its namespace that select it.
pub fn orphan_mapper(
    deployments: Store<Deployment>,
) -> impl Fn(&ReplicaSet) -> Vec<ObjectKey> + Send + Sync + 'static {
    move |rs: &ReplicaSet| {
        if pods::controller_ref(&rs.metadata).is_some() {
            return Vec::new();
        }
        let namespace = rs.metadata.namespace.as_deref().unwrap_or_default();
        deployments
            .by_index(BY_NAMESPACE, namespace)
            .iter()
            .filter(|d| {
                let s = d.spec.as_ref().map(|s| &s.selector);
                selector::matches(s, rs.metadata.labels.as_ref())
            })
            .map(|d| ObjectKey::of(&**d))
            .collect()
    }
}

/// Maps a pod to the Recreate Deployment owning its ReplicaSet: a Recreate rollout waits for
/// the old pods to be gone.
pub fn pod_mapper(
    deployments: Store<Deployment>,
    replicasets: Store<ReplicaSet>,
) -> impl Fn(&Pod) -> Vec<ObjectKey> + Send + Sync + 'static {
    move |pod: &Pod| {
        let Some(rs_ref) = pods::controller_ref(&pod.metadata) else {
            return Vec::new();
        };
        if rs_ref.kind != "ReplicaSet" {
            return Vec::new();
        }
        let namespace = pod.metadata.namespace.clone().unwrap_or_default();
        let Some(rs) = replicasets.get(&ObjectKey::namespaced(namespace.clone(), &rs_ref.name))
        else {
            return Vec::new();
        };
        let Some(d_ref) = pods::controller_ref(&rs.metadata).filter(|r| r.kind == "Deployment")
        else {
            return Vec::new();
        };
        let key = ObjectKey::namespaced(namespace, &d_ref.name);
        match deployments.get(&key) {
            Some(d) if util::is_recreate(&d) => vec![key],
            _ => Vec::new(),
        }
    }
}

impl DeploymentReconciler {
    /// A reconciler reading and writing Deployments and ReplicaSets through their cached
    /// clients, and reading pods from `pods`.
    pub fn new(
        client: kube::Client,
        deployments: CachedClient<Deployment>,
        replicasets: CachedClient<ReplicaSet>,
        pods: Store<Pod>,
        recorder: Recorder,
    ) -> Self {
        DeploymentReconciler {
            client,
            deployments,
            replicasets,
            pods,
            recorder,
        }
    }

    fn event(&self, d: &Deployment, type_: EventType, reason: &str, action: &str, note: String) {
        publish(
            &self.recorder,
            d.object_ref(&()),
            type_,
            reason,
            action,
            note,
        );
    }

    async fn sync(&self, d: &Deployment) -> Result<Action, SyncError> {
        let mut d = d.clone();
        let spec = d.spec.clone().unwrap_or_default();
        if selector::selects_everything(Some(&spec.selector)) {
            self.event(
                &d,
                EventType::Warning,
                REASON_SELECTING_ALL,
                "Sync",
                "This deployment is selecting all pods. A non-empty selector is required.".into(),
            );
            let status = d.status.clone().unwrap_or_default();
            if status.observed_generation < d.metadata.generation {
                let status = DeploymentStatus {
                    observed_generation: d.metadata.generation,
                    ..status
                };
                self.write_status(&mut d, status).await?;
            }
            return Ok(Action::done());
        }
        let rss = self.claim_replicasets(&d).await?;
        if d.metadata.deletion_timestamp.is_some() {
            let (new, old) = self.new_and_old(&mut d, rss, false).await?;
            self.sync_status(&mut d, new.as_ref(), &old).await?;
            return Ok(Action::done());
        }
        self.check_paused_conditions(&mut d).await?;
        if spec.paused != Some(true)
            && let Some(to) = util::rollback_to(&d)
        {
            // Not re-entrant: nothing is rolled until the annotation is gone.
            self.rollback(&mut d, rss, to).await?;
            return Ok(Action::done());
        }
        if spec.paused == Some(true) || is_scaling_event(&d, &rss) {
            self.sync_scale(&mut d, rss).await?;
            return Ok(Action::done());
        }
        if util::is_recreate(&d) {
            recreate::rollout(self, &mut d, rss).await
        } else {
            rolling::rollout(self, &mut d, rss).await
        }
    }

    /// The ReplicaSets of the namespace the Deployment controls after adopting orphans it
    /// selects and releasing the ones it no longer selects.
    async fn claim_replicasets(&self, d: &Deployment) -> Result<Vec<ReplicaSet>, SyncError> {
        let namespace = d.metadata.namespace.clone().unwrap_or_default();
        let name = d.metadata.name.clone().unwrap_or_default();
        let uid = d.metadata.uid.clone().unwrap_or_default();
        let selector = d
            .spec
            .as_ref()
            .map(|s| s.selector.clone())
            .unwrap_or_default();
        let mut candidates = self.replicasets.by_index(BY_CONTROLLER, &uid);
        candidates.extend(self.replicasets.by_index(ORPHANS_BY_NAMESPACE, &namespace));
        let api: Api<ReplicaSet> = Api::namespaced(self.client.clone(), &namespace);
        let d_api: Api<Deployment> = Api::namespaced(self.client.clone(), &namespace);
        let claimed = claim(
            &api,
            &controller_reference::<Deployment>(&d.metadata),
            d.metadata.deletion_timestamp.is_some(),
            |rs: &ReplicaSet| selector::matches(Some(&selector), rs.metadata.labels.as_ref()),
            candidates,
            || recheck_owner(&d_api, &name, &uid),
        )
        .await?;
        Ok(claimed.into_iter().map(Arc::unwrap_or_clone).collect())
    }

    /// Kubernetes' `getAllReplicaSetsAndSyncRevision`: the new ReplicaSet (created if `create`
    /// and missing) with its revision raised above the old ones', the old ReplicaSets, and
    /// the Deployment's revision annotation set to the new one's.
    async fn new_and_old(
        &self,
        d: &mut Deployment,
        rss: Vec<ReplicaSet>,
        create: bool,
    ) -> Result<(Option<ReplicaSet>, Vec<ReplicaSet>), SyncError> {
        let existing = find_new(d, &rss);
        let old: Vec<ReplicaSet> = rss
            .into_iter()
            .filter(|rs| {
                existing
                    .as_ref()
                    .is_none_or(|n| n.metadata.uid != rs.metadata.uid)
            })
            .collect();
        let new_revision = max_revision(&old) + 1;
        let now = Timestamp::now();
        if let Some(existing) = existing {
            let mut copy = existing.clone();
            let annotations_updated = set_new_rs_annotations(d, &mut copy, new_revision, true);
            let min_ready = d.spec.as_ref().and_then(|s| s.min_ready_seconds);
            let spec = copy.spec.get_or_insert_with(ReplicaSetSpec::default);
            let min_ready_changed = spec.min_ready_seconds != min_ready;
            let new = if annotations_updated || min_ready_changed {
                spec.min_ready_seconds = min_ready;
                self.replace_rs(&copy).await?
            } else {
                copy
            };
            let rev = util::revision(new.metadata.annotations.as_ref());
            let revision_changed = set_revision(d, rev);
            let mut status = d.status.clone().unwrap_or_default();
            if progress_deadline(d).is_some() && condition(&status, PROGRESSING).is_none() {
                let msg = format!("Found new replica set {:?}", name_of(&new.metadata));
                set_condition(
                    &mut status,
                    new_condition(PROGRESSING, "True", FOUND_NEW_RS, msg, now),
                );
            }
            self.write(d, status, revision_changed).await?;
            return Ok((Some(new), old));
        }
        if !create {
            return Ok((None, old));
        }

        let spec = d.spec.clone().unwrap_or_default();
        let collision_count = d.status.as_ref().and_then(|s| s.collision_count);
        let hash = util::pod_template_hash(&spec.template, collision_count);
        let mut template = spec.template.clone();
        template
            .metadata
            .get_or_insert_with(ObjectMeta::default)
            .labels
            .get_or_insert_with(Default::default)
            .insert(POD_TEMPLATE_HASH.into(), hash.clone());
        let mut selector = spec.selector.clone();
        selector
            .match_labels
            .get_or_insert_with(Default::default)
            .insert(POD_TEMPLATE_HASH.into(), hash.clone());
        let namespace = d.metadata.namespace.clone().unwrap_or_default();
        let rs_name = format!("{}-{hash}", name_of(&d.metadata));
        let mut new = ReplicaSet {
            metadata: ObjectMeta {
                name: Some(rs_name.clone()),
                namespace: Some(namespace.clone()),
                owner_references: Some(vec![controller_reference::<Deployment>(&d.metadata)]),
                labels: template.metadata.as_ref().and_then(|m| m.labels.clone()),
                ..ObjectMeta::default()
            },
            spec: Some(ReplicaSetSpec {
                replicas: Some(0),
                min_ready_seconds: spec.min_ready_seconds,
                selector,
                template: Some(template),
            }),
            status: None,
        };
        let all: Vec<&ReplicaSet> = old.iter().chain(std::iter::once(&new)).collect();
        let replicas = new_rs_new_replicas(d, &all, &new);
        if let Some(s) = new.spec.as_mut() {
            s.replicas = Some(replicas);
        }
        set_new_rs_annotations(d, &mut new, new_revision, false);

        let mut already_existed = false;
        let created = match self.replicasets.create(&new, &PostParams::default()).await {
            Ok(rs) => Arc::unwrap_or_clone(rs),
            Err(kore_runtime::client::Error::Api(e)) if status_code(&e) == Some(409) => {
                let api: Api<ReplicaSet> = Api::namespaced(self.client.clone(), &namespace);
                let found = api.get(&rs_name).await.map_err(|e| {
                    SyncError::api("get", format!("ReplicaSet {namespace}/{rs_name}"), e)
                })?;
                let uid = d.metadata.uid.clone().unwrap_or_default();
                let same_template = equal_ignore_hash(
                    found.spec.as_ref().and_then(|s| s.template.as_ref()),
                    Some(&spec.template),
                );
                if is_controlled_by(&found.metadata, &uid) && same_template {
                    already_existed = true;
                    found
                } else {
                    // Another template hashes to the same name: count the collision, so
                    // the next sync hashes with another count.
                    let mut status = d.status.clone().unwrap_or_default();
                    status.collision_count = Some(status.collision_count.unwrap_or(0) + 1);
                    self.write_status(d, status).await?;
                    return Err(SyncError::HashCollision(rs_name));
                }
            }
            Err(e) => {
                let msg = format!("Failed to create new replica set {rs_name:?}: {e}");
                if progress_deadline(d).is_some() {
                    let mut status = d.status.clone().unwrap_or_default();
                    set_condition(
                        &mut status,
                        new_condition(PROGRESSING, "False", RS_CREATE_ERROR, msg.clone(), now),
                    );
                    self.write_status(d, status).await?;
                }
                self.event(d, EventType::Warning, "FailedCreate", "Create", msg);
                return Err(SyncError::cached(
                    format!("ReplicaSet {namespace}/{rs_name}"),
                    e,
                ));
            }
        };
        if !already_existed && replicas > 0 {
            self.event(
                d,
                EventType::Normal,
                REASON_SCALING,
                "Scale",
                format!("Scaled up replica set {rs_name} from 0 to {replicas}"),
            );
        }
        let revision_changed = set_revision(d, new_revision);
        let mut status = d.status.clone().unwrap_or_default();
        if !already_existed && progress_deadline(d).is_some() {
            let msg = format!("Created new replica set {rs_name:?}");
            set_condition(
                &mut status,
                new_condition(PROGRESSING, "True", NEW_RS_CREATED, msg, now),
            );
        }
        self.write(d, status, revision_changed).await?;
        Ok((Some(created), old))
    }

    /// Kubernetes' `rollback`: the Deployment's template goes back to the ReplicaSet of
    /// revision `to` (0: the revision before the current), with that ReplicaSet's annotations,
    /// and the `deprecated.deployment.rollback.to` annotation is removed, in one update. The
    /// next sync rolls out the template as usual (reusing the ReplicaSet, a new revision).
    async fn rollback(
        &self,
        d: &mut Deployment,
        rss: Vec<ReplicaSet>,
        mut to: i64,
    ) -> Result<(), SyncError> {
        let (new, old) = self.new_and_old(d, rss, true).await?;
        let all: Vec<&ReplicaSet> = old.iter().chain(new.as_ref()).collect();
        if to == 0 {
            to = util::last_revision(&all);
            if to == 0 {
                self.event(
                    d,
                    EventType::Warning,
                    REASON_ROLLBACK_NOT_FOUND,
                    "Rollback",
                    "Unable to find last revision.".into(),
                );
                return self.clear_rollback_to(d).await;
            }
        }
        let target = all
            .iter()
            .find(|rs| util::revision(rs.metadata.annotations.as_ref()) == to);
        let Some(rs) = target else {
            self.event(
                d,
                EventType::Warning,
                REASON_ROLLBACK_NOT_FOUND,
                "Rollback",
                "Unable to find the revision to rollback to.".into(),
            );
            return self.clear_rollback_to(d).await;
        };
        let current = d.spec.as_ref().map(|s| &s.template);
        let same = equal_ignore_hash(current, rs.spec.as_ref().and_then(|s| s.template.as_ref()));
        if same {
            self.event(
                d,
                EventType::Warning,
                REASON_ROLLBACK_TEMPLATE_UNCHANGED,
                "Rollback",
                format!(
                    "The rollback revision contains the same template as current deployment {:?}",
                    name_of(&d.metadata)
                ),
            );
        } else {
            util::set_from_replicaset(d, rs);
        }
        self.clear_rollback_to(d).await?;
        if !same {
            self.event(
                d,
                EventType::Normal,
                REASON_ROLLBACK_DONE,
                "Rollback",
                format!(
                    "Rolled back deployment {:?} to revision {to}",
                    name_of(&d.metadata)
                ),
            );
        }
        Ok(())
    }

    /// Removes the rollback annotation with an update of the whole Deployment (its template
    /// too, after a rollback).
    async fn clear_rollback_to(&self, d: &mut Deployment) -> Result<(), SyncError> {
        if let Some(a) = d.metadata.annotations.as_mut() {
            a.remove(util::ROLLBACK_TO);
        }
        let written = self
            .deployments
            .replace(d, &PostParams::default())
            .await
            .map_err(|e| SyncError::cached(format!("Deployment {}", ObjectKey::of(&*d)), e))?;
        *d = Arc::unwrap_or_clone(written);
        Ok(())
    }

    async fn replace_rs(&self, rs: &ReplicaSet) -> Result<ReplicaSet, SyncError> {
        self.replicasets
            .replace(rs, &PostParams::default())
            .await
            .map(Arc::unwrap_or_clone)
            .map_err(|e| SyncError::cached(format!("ReplicaSet {}", ObjectKey::of(rs)), e))
    }

    /// Writes `status` if it differs from the Deployment's.
    async fn write_status(
        &self,
        d: &mut Deployment,
        status: DeploymentStatus,
    ) -> Result<(), SyncError> {
        self.write(d, status, false).await
    }

    /// Writes `status`, and the metadata changed in `d` if `metadata_changed`, in one update
    /// of the status subresource (the server keeps a Deployment's annotation changes there,
    /// as Kubernetes' Deployment status strategy does); nothing when neither changed.
    async fn write(
        &self,
        d: &mut Deployment,
        status: DeploymentStatus,
        metadata_changed: bool,
    ) -> Result<(), SyncError> {
        if !metadata_changed
            && normalize(d.status.clone().unwrap_or_default()) == normalize(status.clone())
        {
            return Ok(());
        }
        let mut updated = d.clone();
        updated.status = Some(status);
        let written = self
            .deployments
            .replace_status(&updated, &PostParams::default())
            .await
            .map_err(|e| {
                SyncError::cached(format!("status of Deployment {}", ObjectKey::of(&*d)), e)
            })?;
        *d = Arc::unwrap_or_clone(written);
        Ok(())
    }

    /// Scales `rs` to `to` (and refreshes its replica annotations); returns the ReplicaSet as
    /// written, and whether its size changed.
    async fn scale(
        &self,
        rs: &ReplicaSet,
        to: i32,
        d: &Deployment,
    ) -> Result<(bool, ReplicaSet), SyncError> {
        let from = rs_replicas(rs);
        let replicas = replicas_of(d);
        let max = replicas + max_surge(d);
        let resize = from != to;
        if !resize && !replicas_annotations_need_update(rs, replicas, max) {
            return Ok((false, rs.clone()));
        }
        let mut copy = rs.clone();
        copy.spec
            .get_or_insert_with(ReplicaSetSpec::default)
            .replicas = Some(to);
        set_replicas_annotations(&mut copy, replicas, max);
        let written = self.replace_rs(&copy).await?;
        if resize {
            let direction = if to > from { "up" } else { "down" };
            self.event(
                d,
                EventType::Normal,
                REASON_SCALING,
                "Scale",
                format!(
                    "Scaled {direction} replica set {} from {from} to {to}",
                    name_of(&rs.metadata)
                ),
            );
        }
        Ok((resize, written))
    }

    /// Scales `rs` to `to` unless it already has that size; whether it changed.
    async fn scale_if_needed(
        &self,
        rs: &mut ReplicaSet,
        to: i32,
        d: &Deployment,
    ) -> Result<bool, SyncError> {
        if rs_replicas(rs) == to {
            return Ok(false);
        }
        let (scaled, written) = self.scale(rs, to, d).await?;
        *rs = written;
        Ok(scaled)
    }

    /// Kubernetes' `sync`: scaling only (a paused Deployment, or new replicas).
    async fn sync_scale(&self, d: &mut Deployment, rss: Vec<ReplicaSet>) -> Result<(), SyncError> {
        let (mut new, mut old) = self.new_and_old(d, rss, false).await?;
        self.scale_all(d, new.as_mut(), &mut old).await?;
        if d.spec.as_ref().and_then(|s| s.paused) == Some(true) {
            self.cleanup(d, &old).await?;
        }
        self.sync_status(d, new.as_ref(), &old).await
    }

    /// Scales the Deployment's ReplicaSets to its replicas: the one active (or latest)
    /// ReplicaSet directly; old ones to zero once the new one is saturated; during a rolling
    /// update, the difference is shared in proportion to the ReplicaSets' sizes.
    async fn scale_all(
        &self,
        d: &Deployment,
        mut new: Option<&mut ReplicaSet>,
        old: &mut [ReplicaSet],
    ) -> Result<(), SyncError> {
        let replicas = replicas_of(d);
        let active_old = old.iter().filter(|rs| rs_replicas(rs) > 0).count();
        let new_active = new.as_ref().is_some_and(|rs| rs_replicas(rs) > 0);
        if active_old + usize::from(new_active) <= 1 {
            // One active ReplicaSet (or none: then the new one, or the newest old one).
            if new_active || (active_old == 0 && new.is_some()) {
                if let Some(rs) = new {
                    self.scale_if_needed(rs, replicas, d).await?;
                }
                return Ok(());
            }
            let target = if active_old == 1 {
                old.iter_mut().find(|rs| rs_replicas(rs) > 0)
            } else {
                old.iter_mut().max_by(|a, b| by_creation(a, b))
            };
            if let Some(rs) = target {
                self.scale_if_needed(rs, replicas, d).await?;
            }
            return Ok(());
        }
        if util::is_saturated(d, new.as_deref()) {
            for rs in old.iter_mut().filter(|rs| rs_replicas(rs) > 0) {
                self.scale_if_needed(rs, 0, d).await?;
            }
            return Ok(());
        }
        if util::is_recreate(d) {
            return Ok(());
        }
        // Proportional scaling across the active ReplicaSets.
        let mut active: Vec<&mut ReplicaSet> =
            old.iter_mut().filter(|rs| rs_replicas(rs) > 0).collect();
        if let Some(n) = new.as_mut().filter(|rs| rs_replicas(rs) > 0) {
            active.push(n);
        }
        let current: i32 = active.iter().map(|rs| rs_replicas(rs)).sum();
        let allowed = if replicas > 0 {
            replicas + max_surge(d)
        } else {
            0
        };
        let to_add = allowed - current;
        if to_add > 0 {
            // Bigger first; newer first among equals.
            active.sort_by(|a, b| {
                rs_replicas(b)
                    .cmp(&rs_replicas(a))
                    .then_with(|| by_creation(b, a))
            });
        } else {
            // Bigger first; older first among equals.
            active.sort_by(|a, b| {
                rs_replicas(b)
                    .cmp(&rs_replicas(a))
                    .then_with(|| by_creation(a, b))
            });
        }
        let mut sizes: Vec<i32> = Vec::with_capacity(active.len());
        let mut added = 0;
        for rs in &active {
            if to_add == 0 {
                sizes.push(rs_replicas(rs));
                continue;
            }
            let share = util::proportion(rs, d, to_add, added);
            sizes.push(rs_replicas(rs) + share);
            added += share;
        }
        if to_add != 0
            && let Some(first) = sizes.first_mut()
        {
            *first = (*first + to_add - added).max(0);
        }
        for (rs, size) in active.into_iter().zip(sizes) {
            let (_, written) = self.scale(rs, size, d).await?;
            *rs = written;
        }
        Ok(())
    }

    /// Deletes the oldest ReplicaSets beyond revisionHistoryLimit that have no pods left.
    async fn cleanup(&self, d: &Deployment, old: &[ReplicaSet]) -> Result<(), SyncError> {
        let Some(limit) = revision_history_limit(d) else {
            return Ok(());
        };
        let mut cleanable: Vec<&ReplicaSet> = old
            .iter()
            .filter(|rs| rs.metadata.deletion_timestamp.is_none())
            .collect();
        let excess = cleanable
            .len()
            .saturating_sub(usize::try_from(limit).unwrap_or(0));
        if excess == 0 {
            return Ok(());
        }
        cleanable.sort_by(|a, b| by_revision(a, b));
        for rs in cleanable.into_iter().take(excess) {
            let observed = rs.status.as_ref().and_then(|s| s.observed_generation);
            if rs_actual(rs) != 0 || rs_replicas(rs) != 0 || observed < rs.metadata.generation {
                continue;
            }
            match self
                .replicasets
                .delete(&ObjectKey::of(rs), &DeleteParams::default())
                .await
            {
                Ok(_) => {}
                Err(kore_runtime::client::Error::Api(e)) if status_code(&e) == Some(404) => {}
                Err(e) => {
                    return Err(SyncError::cached(
                        format!("ReplicaSet {}", ObjectKey::of(rs)),
                        e,
                    ));
                }
            }
        }
        Ok(())
    }

    /// Kubernetes' `checkPausedConditions`: Progressing Unknown while paused, and when resumed.
    async fn check_paused_conditions(&self, d: &mut Deployment) -> Result<(), SyncError> {
        if progress_deadline(d).is_none() {
            return Ok(());
        }
        let mut status = d.status.clone().unwrap_or_default();
        let reason = condition(&status, PROGRESSING).and_then(|c| c.reason.clone());
        if reason.as_deref() == Some(TIMED_OUT) {
            return Ok(());
        }
        let paused = d.spec.as_ref().and_then(|s| s.paused) == Some(true);
        let paused_condition = reason.as_deref() == Some(PAUSED);
        let now = Timestamp::now();
        if paused && !paused_condition {
            set_condition(
                &mut status,
                new_condition(
                    PROGRESSING,
                    "Unknown",
                    PAUSED,
                    "Deployment is paused".into(),
                    now,
                ),
            );
        } else if !paused && paused_condition {
            set_condition(
                &mut status,
                new_condition(
                    PROGRESSING,
                    "Unknown",
                    RESUMED,
                    "Deployment is resumed".into(),
                    now,
                ),
            );
        } else {
            return Ok(());
        }
        self.write_status(d, status).await
    }

    /// Kubernetes' `syncDeploymentStatus`: the status from the ReplicaSets.
    async fn sync_status(
        &self,
        d: &mut Deployment,
        new: Option<&ReplicaSet>,
        old: &[ReplicaSet],
    ) -> Result<(), SyncError> {
        let status = calculate_status(d, new, old);
        self.write_status(d, status).await
    }

    /// Kubernetes' `syncRolloutStatus`: the status, with the Progressing condition moved by
    /// the rollout's progress and ReplicaFailure copied from the ReplicaSets. Returns when to
    /// check the progress deadline again.
    async fn sync_rollout_status(
        &self,
        d: &mut Deployment,
        new: Option<&ReplicaSet>,
        old: &[ReplicaSet],
    ) -> Result<Action, SyncError> {
        let mut status = calculate_status(d, new, old);
        let now = Timestamp::now();
        if progress_deadline(d).is_none() {
            remove_condition(&mut status, PROGRESSING);
        }
        let current = condition(&status, PROGRESSING).cloned();
        let complete_before = status.replicas == status.updated_replicas
            && current.as_ref().and_then(|c| c.reason.as_deref()) == Some(NEW_RS_AVAILABLE);
        if progress_deadline(d).is_some() && !complete_before {
            let rs_name = new.map(|rs| name_of(&rs.metadata));
            if is_complete(d, &status) {
                let msg = match &rs_name {
                    Some(n) => format!("ReplicaSet {n:?} has successfully progressed."),
                    None => "Deployment has successfully progressed.".into(),
                };
                set_condition(
                    &mut status,
                    new_condition(PROGRESSING, "True", NEW_RS_AVAILABLE, msg, now),
                );
            } else if is_progressing(d, &status) {
                let msg = match &rs_name {
                    Some(n) => format!("ReplicaSet {n:?} is progressing."),
                    None => format!("Deployment {:?} is progressing.", name_of(&d.metadata)),
                };
                let mut c = new_condition(PROGRESSING, "True", RS_UPDATED, msg, now);
                if let Some(current) = &current {
                    if current.status == "True" {
                        c.last_transition_time = current.last_transition_time.clone();
                    }
                    remove_condition(&mut status, PROGRESSING);
                }
                set_condition(&mut status, c);
            } else if timed_out(d, &status, now) {
                let msg = match &rs_name {
                    Some(n) => format!("ReplicaSet {n:?} has timed out progressing."),
                    None => format!(
                        "Deployment {:?} has timed out progressing.",
                        name_of(&d.metadata)
                    ),
                };
                set_condition(
                    &mut status,
                    new_condition(PROGRESSING, "False", TIMED_OUT, msg, now),
                );
            }
        }
        match replica_failure(new, old) {
            Some(c) => set_condition(&mut status, c),
            None => remove_condition(&mut status, REPLICA_FAILURE),
        }
        let requeue = requeue_stuck(d, &status, now);
        self.write_status(d, status).await?;
        Ok(requeue.map_or_else(Action::done, Action::requeue_after))
    }
}

impl Reconciler<Deployment> for DeploymentReconciler {
    type Error = SyncError;

    async fn reconcile(
        &self,
        request: Request<Deployment>,
    ) -> Result<Action, ReconcileError<SyncError>> {
        let Some(d) = request.object() else {
            return Ok(Action::done());
        };
        Ok(self.sync(&d).await?)
    }
}

/// Sets the Deployment's revision annotation in `d` (written with its status); whether it
/// changed (Kubernetes' `SetDeploymentRevision`).
fn set_revision(d: &mut Deployment, revision: i64) -> bool {
    let value = revision.to_string();
    let annotations = d.metadata.annotations.get_or_insert_with(Default::default);
    if annotations.get(REVISION) == Some(&value) {
        return false;
    }
    annotations.insert(REVISION.into(), value);
    true
}

fn name_of(meta: &ObjectMeta) -> String {
    meta.name.clone().unwrap_or_default()
}

/// Whether the Deployment's replicas differ from what an active ReplicaSet was last sized
/// for (its desired-replicas annotation): a scale, not a rollout.
fn is_scaling_event(d: &Deployment, rss: &[ReplicaSet]) -> bool {
    let replicas = replicas_of(d);
    rss.iter()
        .filter(|rs| rs_replicas(rs) > 0)
        .filter_map(util::desired_annotation)
        .any(|desired| desired != replicas)
}

/// The status the ReplicaSets add up to, with the Available condition.
fn calculate_status(
    d: &Deployment,
    new: Option<&ReplicaSet>,
    old: &[ReplicaSet],
) -> DeploymentStatus {
    let all: Vec<&ReplicaSet> = old.iter().chain(new).collect();
    let available: i32 = all.iter().map(|rs| rs_available(rs)).sum();
    let total: i32 = all.iter().map(|rs| rs_replicas(rs)).sum();
    let previous = d.status.clone().unwrap_or_default();
    let mut status = DeploymentStatus {
        observed_generation: d.metadata.generation,
        replicas: Some(all.iter().map(|rs| rs_actual(rs)).sum()),
        updated_replicas: Some(new.map_or(0, rs_actual)),
        ready_replicas: Some(
            all.iter()
                .map(|rs| {
                    rs.status
                        .as_ref()
                        .and_then(|s| s.ready_replicas)
                        .unwrap_or(0)
                })
                .sum(),
        ),
        available_replicas: Some(available),
        unavailable_replicas: Some((total - available).max(0)),
        collision_count: previous.collision_count,
        conditions: previous.conditions,
        terminating_replicas: None,
    };
    let now = Timestamp::now();
    if available >= replicas_of(d) - max_unavailable(d) {
        set_condition(
            &mut status,
            new_condition(
                AVAILABLE,
                "True",
                MIN_AVAILABLE,
                "Deployment has minimum availability.".into(),
                now,
            ),
        );
    } else {
        set_condition(
            &mut status,
            new_condition(
                AVAILABLE,
                "False",
                MIN_UNAVAILABLE,
                "Deployment does not have minimum availability.".into(),
                now,
            ),
        );
    }
    status
}

/// Whether the Progressing condition has not moved for progressDeadlineSeconds.
fn timed_out(d: &Deployment, status: &DeploymentStatus, now: Timestamp) -> bool {
    let Some(deadline) = progress_deadline(d) else {
        return false;
    };
    let Some(c) = condition(status, PROGRESSING) else {
        return false;
    };
    match c.reason.as_deref() {
        Some(NEW_RS_AVAILABLE) => false,
        Some(TIMED_OUT) => true,
        _ => c.last_update_time.as_ref().is_some_and(|t| {
            t.0.checked_add(k8s_openapi::jiff::SignedDuration::from_secs(i64::from(
                deadline,
            )))
            .is_ok_and(|at| at < now)
        }),
    }
}

/// When the progress deadline of a rollout in progress passes, if one does.
fn requeue_stuck(d: &Deployment, status: &DeploymentStatus, now: Timestamp) -> Option<Duration> {
    let deadline = progress_deadline(d)?;
    let c = condition(status, PROGRESSING)?;
    if c.status != "True" || c.reason.as_deref() == Some(NEW_RS_AVAILABLE) || is_complete(d, status)
    {
        return None;
    }
    let from = c.last_update_time.as_ref()?.0;
    let at = from
        .checked_add(k8s_openapi::jiff::SignedDuration::from_secs(i64::from(
            deadline,
        )))
        .ok()?;
    let wait = now.duration_until(at);
    Some(if wait.is_negative() {
        Duration::from_secs(1)
    } else {
        wait.unsigned_abs() + Duration::from_secs(1)
    })
}

/// The ReplicaFailure condition of the new ReplicaSet, else of an old one, as a Deployment
/// condition.
fn replica_failure(
    new: Option<&ReplicaSet>,
    old: &[ReplicaSet],
) -> Option<k8s_openapi::api::apps::v1::DeploymentCondition> {
    new.into_iter().chain(old).find_map(|rs| {
        let c = rs
            .status
            .as_ref()?
            .conditions
            .as_ref()?
            .iter()
            .find(|c| c.type_ == REPLICA_FAILURE)?;
        Some(k8s_openapi::api::apps::v1::DeploymentCondition {
            type_: c.type_.clone(),
            status: c.status.clone(),
            reason: c.reason.clone(),
            message: c.message.clone(),
            last_transition_time: c.last_transition_time.clone(),
            last_update_time: c.last_transition_time.clone(),
        })
    })
}

/// The status as the API server returns it: zero counts and empty lists omitted.
fn normalize(mut s: DeploymentStatus) -> DeploymentStatus {
    for field in [
        &mut s.replicas,
        &mut s.updated_replicas,
        &mut s.ready_replicas,
        &mut s.available_replicas,
        &mut s.unavailable_replicas,
        &mut s.terminating_replicas,
    ] {
        if *field == Some(0) {
            *field = None;
        }
    }
    if s.conditions.as_ref().is_some_and(Vec::is_empty) {
        s.conditions = None;
    }
    s
}
