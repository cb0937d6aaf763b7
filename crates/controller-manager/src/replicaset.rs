//! The ReplicaSet controller: keeps `spec.replicas` active pods for each ReplicaSet.
//!
//! A sync (Kubernetes' `syncReplicaSet`) claims the active pods of the namespace (adopting
//! orphans the selector matches, releasing controlled pods it no longer matches); if the
//! ReplicaSet's [expectations](crate::expectations) are met, creates the missing pods in
//! slow-start batches (1, 2, 4, …) or deletes the surplus in [deletion
//! order](crate::pods::sort_for_deletion), at most [`BURST_REPLICAS`] per sync; then writes
//! the status: replicas, fullyLabeledReplicas, readyReplicas, availableReplicas,
//! observedGeneration and the ReplicaFailure condition when creating or deleting failed.
//!
//! The reconciler is generic over [`Replicated`]: a kind that reads as a ReplicaSet. That
//! is how the [ReplicationController controller](crate::replication) runs this same logic,
//! as kube-controller-manager's `pkg/controller/replication` wraps its ReplicaSet
//! controller through conversion.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::future::join_all;
use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::apps::v1::{ReplicaSet, ReplicaSetCondition, ReplicaSetStatus};
use k8s_openapi::api::core::v1::{ObjectReference, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Time};
use k8s_openapi::jiff::Timestamp;
use kore_runtime::controller::{Action, ReconcileError, Reconciler, Request};
use kore_runtime::events::{EventType, Recorder};
use kore_runtime::informer::Informable;
use kore_runtime::{CachedClient, ObjectKey, Store};
use kube::Resource;
use kube::api::{Api, DeleteParams, PostParams};

use crate::error::{SyncError, message, status_code};
use crate::expectations::Expectations;
use crate::ownership::{claim, controller_reference, recheck_owner};
use crate::pods::{self, is_active, is_available, is_ready};
use crate::{BY_CONTROLLER, BY_NAMESPACE, ORPHANS_BY_NAMESPACE, publish, selector};

/// The controller's name (`--controllers`), as kube-controller-manager names it.
pub const NAME: &str = "replicaset-controller";

/// At most this many pods are created or deleted per sync (kube-controller-manager's
/// `BurstReplicas`).
pub const BURST_REPLICAS: usize = 500;

/// Event reason: a pod was created.
pub const REASON_SUCCESSFUL_CREATE: &str = "SuccessfulCreate";
/// Event reason and ReplicaFailure reason: creating a pod failed.
pub const REASON_FAILED_CREATE: &str = "FailedCreate";
/// Event reason: a pod was deleted.
pub const REASON_SUCCESSFUL_DELETE: &str = "SuccessfulDelete";
/// Event reason and ReplicaFailure reason: deleting a pod failed.
pub const REASON_FAILED_DELETE: &str = "FailedDelete";
/// The condition type set while creating or deleting pods fails.
pub const CONDITION_REPLICA_FAILURE: &str = "ReplicaFailure";

/// A kind the ReplicaSet logic runs on: ReplicaSets themselves, and ReplicationControllers
/// read as ReplicaSets.
pub trait Replicated:
    Informable + Resource<Scope = NamespaceResourceScope> + Send + Sync + 'static
{
    /// This object read as a ReplicaSet (same metadata, spec and status).
    fn as_replica_set(&self) -> Cow<'_, ReplicaSet>;
    /// Whether this object's selector selects a pod with `labels`.
    fn selects(&self, labels: Option<&BTreeMap<String, String>>) -> bool;
    /// This object with `status` (computed for its ReplicaSet reading) as its status.
    fn with_status(&self, status: ReplicaSetStatus) -> Self;
}

impl Replicated for ReplicaSet {
    fn as_replica_set(&self) -> Cow<'_, ReplicaSet> {
        Cow::Borrowed(self)
    }

    fn selects(&self, labels: Option<&BTreeMap<String, String>>) -> bool {
        selector::matches(self.spec.as_ref().map(|s| &s.selector), labels)
    }

    fn with_status(&self, status: ReplicaSetStatus) -> Self {
        ReplicaSet {
            status: Some(status),
            ..self.clone()
        }
    }
}

/// Reconciles ReplicaSets (or another [`Replicated`] kind); see the [module docs](self).
pub struct ReplicaSetReconciler<K = ReplicaSet> {
    client: kube::Client,
    pods: Store<Pod>,
    replicasets: CachedClient<K>,
    expectations: Arc<Expectations>,
    recorder: Recorder,
}

impl<K> std::fmt::Debug for ReplicaSetReconciler<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReplicaSetReconciler")
            .finish_non_exhaustive()
    }
}

impl<K: Replicated> ReplicaSetReconciler<K> {
    /// A reconciler reading pods from `pods` and its objects through `replicasets`.
    pub fn new(
        client: kube::Client,
        pods: Store<Pod>,
        replicasets: CachedClient<K>,
        recorder: Recorder,
    ) -> Self {
        ReplicaSetReconciler {
            client,
            pods,
            replicasets,
            expectations: Arc::new(Expectations::default()),
            recorder,
        }
    }

    async fn sync(&self, key: &ObjectKey, obj: &K) -> Result<Action, SyncError> {
        let read = obj.as_replica_set();
        let rs: &ReplicaSet = &read;
        let namespace = key.namespace().unwrap_or_default().to_owned();
        let name = key.name().to_owned();
        let uid = rs.metadata.uid.clone().unwrap_or_default();
        let needs_sync = self.expectations.satisfied(key, &self.pods);
        let spec = rs.spec.clone().unwrap_or_default();

        let candidates: Vec<Arc<Pod>> = self
            .pods
            .by_index(BY_CONTROLLER, &uid)
            .into_iter()
            .chain(self.pods.by_index(ORPHANS_BY_NAMESPACE, &namespace))
            .filter(|p| is_active(p))
            .collect();
        let reference = controller_reference::<K>(&rs.metadata);
        let regarding = obj.object_ref(&());
        let pod_api: Api<Pod> = Api::namespaced(self.client.clone(), &namespace);
        let rs_api: Api<K> = Api::namespaced(self.client.clone(), &namespace);
        let pods = claim(
            &pod_api,
            &reference,
            rs.metadata.deletion_timestamp.is_some(),
            |p: &Pod| obj.selects(p.metadata.labels.as_ref()),
            candidates,
            || recheck_owner(&rs_api, &name, &uid),
        )
        .await?;

        let mut failure = None;
        if needs_sync && rs.metadata.deletion_timestamp.is_none() {
            failure = self
                .manage_replicas(key, rs, &regarding, &pods, &pod_api, reference)
                .await
                .err();
        }
        let now = Timestamp::now();
        let status = calculate_status(rs, &pods, failure.as_ref(), now);
        self.write_status(obj, rs, status).await?;
        if let Some(e) = failure {
            return Err(e);
        }
        if !needs_sync {
            // Pod events settle the expectations; this only unsticks an owner whose events
            // were lost.
            let wait = self.expectations.expires_in(key).unwrap_or_default();
            return Ok(Action::requeue_after(wait + Duration::from_secs(1)));
        }
        let min_ready = spec.min_ready_seconds.unwrap_or(0);
        let next_available = pods
            .iter()
            .filter_map(|p| pods::available_at(p, min_ready, now))
            .min();
        Ok(match next_available {
            Some(at) => {
                let wait = now.duration_until(at).unsigned_abs();
                Action::requeue_after(wait + Duration::from_secs(1))
            }
            None => Action::done(),
        })
    }

    /// Creates or deletes pods so that `pods` (the active pods the ReplicaSet controls) number
    /// `spec.replicas`.
    async fn manage_replicas(
        &self,
        key: &ObjectKey,
        rs: &ReplicaSet,
        regarding: &ObjectReference,
        pods: &[Arc<Pod>],
        api: &Api<Pod>,
        reference: OwnerReference,
    ) -> Result<(), SyncError> {
        let spec = rs.spec.clone().unwrap_or_default();
        let want = usize::try_from(spec.replicas.unwrap_or(1)).unwrap_or(0);
        if pods.len() < want {
            let count = (want - pods.len()).min(BURST_REPLICAS);
            let template = spec.template.unwrap_or_default();
            let prefix = pods::name_prefix(key.name());
            let namespace = key.namespace().unwrap_or_default().to_owned();
            let created = slow_start_batch(count, |_| {
                let pod =
                    pods::from_template(&template, &namespace, prefix.clone(), reference.clone());
                self.create_pod(key, regarding, api, pod)
            })
            .await;
            return match created {
                Ok(()) => Ok(()),
                Err((done, first)) => Err(SyncError::Pods {
                    verb: "create",
                    failed: count - done,
                    attempted: count,
                    first,
                }),
            };
        }
        if pods.len() > want {
            let count = (pods.len() - want).min(BURST_REPLICAS);
            let related = self.related_pods(rs, pods);
            let mut victims = pods.to_vec();
            pods::sort_for_deletion(&mut victims, &related, Timestamp::now());
            victims.truncate(count);
            for v in &victims {
                self.expectations.deleting(
                    key,
                    v.metadata.name.clone().unwrap_or_default(),
                    v.metadata.uid.clone().unwrap_or_default(),
                );
            }
            let results = join_all(
                victims
                    .iter()
                    .map(|v| self.delete_pod(key, regarding, api, v)),
            )
            .await;
            let errors: Vec<String> = results.into_iter().filter_map(Result::err).collect();
            if let Some(first) = errors.first() {
                return Err(SyncError::Pods {
                    verb: "delete",
                    failed: errors.len(),
                    attempted: count,
                    first: first.clone(),
                });
            }
        }
        Ok(())
    }

    async fn create_pod(
        &self,
        key: &ObjectKey,
        regarding: &ObjectReference,
        api: &Api<Pod>,
        pod: Pod,
    ) -> Result<(), String> {
        match api.create(&PostParams::default(), &pod).await {
            Ok(created) => {
                let name = created.metadata.name.unwrap_or_default();
                self.expectations.created(key, name.clone());
                publish(
                    &self.recorder,
                    regarding.clone(),
                    EventType::Normal,
                    REASON_SUCCESSFUL_CREATE,
                    "Create",
                    format!("Created pod: {name}"),
                );
                Ok(())
            }
            Err(e) => {
                let msg = message(&e);
                publish(
                    &self.recorder,
                    regarding.clone(),
                    EventType::Warning,
                    REASON_FAILED_CREATE,
                    "Create",
                    format!("Error creating: {msg}"),
                );
                Err(msg)
            }
        }
    }

    async fn delete_pod(
        &self,
        key: &ObjectKey,
        regarding: &ObjectReference,
        api: &Api<Pod>,
        pod: &Pod,
    ) -> Result<(), String> {
        let name = pod.metadata.name.clone().unwrap_or_default();
        match api.delete(&name, &DeleteParams::default()).await {
            Ok(_) => {
                publish(
                    &self.recorder,
                    regarding.clone(),
                    EventType::Normal,
                    REASON_SUCCESSFUL_DELETE,
                    "Delete",
                    format!("Deleted pod: {name}"),
                );
                Ok(())
            }
            // Gone already: the cache will show it gone, which settles the expectation.
            Err(e) if status_code(&e) == Some(404) => Ok(()),
            Err(e) => {
                self.expectations.delete_failed(key, &name);
                let msg = message(&e);
                publish(
                    &self.recorder,
                    regarding.clone(),
                    EventType::Warning,
                    REASON_FAILED_DELETE,
                    "Delete",
                    format!("Error deleting: {msg}"),
                );
                Err(msg)
            }
        }
    }

    /// The pods whose placement counts when ranking `own` for deletion: the active pods of
    /// every ReplicaSet with the same controller owner (a Deployment's), or `own` alone.
    fn related_pods(&self, rs: &ReplicaSet, own: &[Arc<Pod>]) -> Vec<Arc<Pod>> {
        let Some(owner) = pods::controller_ref(&rs.metadata) else {
            return own.to_vec();
        };
        self.replicasets
            .by_index(BY_CONTROLLER, &owner.uid)
            .iter()
            .filter_map(|sibling| sibling.meta().uid.clone())
            .flat_map(|uid| self.pods.by_index(BY_CONTROLLER, &uid))
            .filter(|p| is_active(p))
            .collect()
    }

    async fn write_status(
        &self,
        obj: &K,
        rs: &ReplicaSet,
        status: ReplicaSetStatus,
    ) -> Result<(), SyncError> {
        let current = normalize(rs.status.clone().unwrap_or_default());
        let status = normalize(status);
        if current == status
            && rs.status.as_ref().and_then(|s| s.observed_generation) == rs.metadata.generation
        {
            return Ok(());
        }
        let updated = obj.with_status(ReplicaSetStatus {
            observed_generation: rs.metadata.generation,
            ..status
        });
        self.replicasets
            .replace_status(&updated, &PostParams::default())
            .await
            .map_err(|e| {
                SyncError::cached(
                    format!("status of {} {}", K::kind(&()), ObjectKey::of(obj)),
                    e,
                )
            })?;
        Ok(())
    }

    /// Drops what is known of a deleted ReplicaSet.
    fn forget(&self, key: &ObjectKey) {
        self.expectations.forget(key);
    }
}

impl<K: Replicated> Reconciler<K> for ReplicaSetReconciler<K> {
    type Error = SyncError;

    async fn reconcile(&self, request: Request<K>) -> Result<Action, ReconcileError<SyncError>> {
        let key = request.key().clone();
        let Some(rs) = request.object() else {
            self.forget(&key);
            return Ok(Action::done());
        };
        Ok(self.sync(&key, &rs).await?)
    }
}

/// Maps an orphan pod (no controller owner) to the ReplicaSets (or other [`Replicated`]
/// objects) of its namespace whose selector matches it, so they can adopt it. Controlled
/// pods reach their owner through the controller's `owns`.
pub fn orphan_mapper<K: Replicated>(
    replicasets: Store<K>,
) -> impl Fn(&Pod) -> Vec<ObjectKey> + Send + Sync + 'static {
    move |pod: &Pod| {
        if pods::controller_ref(&pod.metadata).is_some() {
            return Vec::new();
        }
        let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
        replicasets
            .by_index(BY_NAMESPACE, namespace)
            .iter()
            .filter(|rs| rs.selects(pod.metadata.labels.as_ref()))
            .map(|rs| ObjectKey::of(&**rs))
            .collect()
    }
}

/// Runs `count` calls of `call` in batches of 1, 2, 4, … (each batch at once), stopping
/// after the first batch with a failure: a failure (quota, admission) is likely to repeat,
/// so this sends one failing request instead of `count`. Returns how many succeeded and the
/// first failure's message.
pub(crate) async fn slow_start_batch<F, Fut>(
    count: usize,
    mut call: F,
) -> Result<(), (usize, String)>
where
    F: FnMut(usize) -> Fut,
    Fut: Future<Output = Result<(), String>>,
{
    let mut remaining = count;
    let mut done = 0;
    let mut batch = remaining.min(1);
    let mut index = 0;
    while batch > 0 {
        let calls: Vec<Fut> = (index..index + batch).map(&mut call).collect();
        index += batch;
        let results = join_all(calls).await;
        let mut first = None;
        for r in results {
            match r {
                Ok(()) => done += 1,
                Err(e) => {
                    first.get_or_insert(e);
                }
            }
        }
        if let Some(first) = first {
            return Err((done, first));
        }
        remaining -= batch;
        batch = (2 * batch).min(remaining);
    }
    Ok(())
}

/// The status of `rs` given the active pods it controls.
fn calculate_status(
    rs: &ReplicaSet,
    pods: &[Arc<Pod>],
    failure: Option<&SyncError>,
    now: Timestamp,
) -> ReplicaSetStatus {
    let spec = rs.spec.clone().unwrap_or_default();
    let min_ready = spec.min_ready_seconds.unwrap_or(0);
    let template_labels = spec
        .template
        .as_ref()
        .and_then(|t| t.metadata.as_ref())
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    let count = |f: &dyn Fn(&Pod) -> bool| {
        i32::try_from(pods.iter().filter(|p| f(p)).count()).unwrap_or(i32::MAX)
    };
    let fully_labeled = count(&|p: &Pod| {
        template_labels
            .iter()
            .all(|(k, v)| p.metadata.labels.as_ref().and_then(|l| l.get(k)) == Some(v))
    });
    let mut status = rs.status.clone().unwrap_or_default();
    let mut conditions = status.conditions.take().unwrap_or_default();
    let existing = conditions
        .iter()
        .position(|c| c.type_ == CONDITION_REPLICA_FAILURE);
    match (failure, existing) {
        (Some(e), None) => {
            let reason = match e {
                SyncError::Pods { verb: "delete", .. } => REASON_FAILED_DELETE,
                _ => REASON_FAILED_CREATE,
            };
            conditions.push(ReplicaSetCondition {
                type_: CONDITION_REPLICA_FAILURE.into(),
                status: "True".into(),
                reason: Some(reason.into()),
                message: Some(e.to_string()),
                last_transition_time: Some(Time(now)),
            });
        }
        (None, Some(i)) => {
            conditions.remove(i);
        }
        _ => {}
    }
    ReplicaSetStatus {
        replicas: i32::try_from(pods.len()).unwrap_or(i32::MAX),
        fully_labeled_replicas: Some(fully_labeled),
        ready_replicas: Some(count(&|p: &Pod| is_ready(p))),
        available_replicas: Some(count(&|p: &Pod| is_available(p, min_ready, now))),
        conditions: (!conditions.is_empty()).then_some(conditions),
        ..status
    }
}

/// The status as the API server returns it: zero counts and empty lists omitted.
fn normalize(mut s: ReplicaSetStatus) -> ReplicaSetStatus {
    for field in [
        &mut s.fully_labeled_replicas,
        &mut s.ready_replicas,
        &mut s.available_replicas,
        &mut s.terminating_replicas,
    ] {
        if *field == Some(0) {
            *field = None;
        }
    }
    if s.conditions.as_ref().is_some_and(Vec::is_empty) {
        s.conditions = None;
    }
    s.observed_generation = None;
    s
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    #[tokio::test]
    async fn slow_start_doubles_batches_and_stops_at_the_first_failing_one() {
        let batches = Mutex::new(Vec::new());
        let ok = slow_start_batch(10, |i| {
            batches.lock().expect("not poisoned").push(i);
            async { Ok(()) }
        })
        .await;
        assert!(ok.is_ok());
        assert_eq!(batches.lock().expect("not poisoned").len(), 10);

        // Calls 0, then 1-2, then 3-6: the third batch has a failure, so 7-9 never run.
        let calls = Mutex::new(0);
        let result = slow_start_batch(10, |i| {
            *calls.lock().expect("not poisoned") += 1;
            async move {
                if i == 4 {
                    Err("quota".to_owned())
                } else {
                    Ok(())
                }
            }
        })
        .await;
        assert_eq!(result, Err((6, "quota".to_owned())));
        assert_eq!(*calls.lock().expect("not poisoned"), 7);
    }
}
