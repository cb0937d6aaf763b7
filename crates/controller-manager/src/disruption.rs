//! The disruption controller (`disruption-controller`): the status of every
//! PodDisruptionBudget, which the API server's eviction reads (`disruptionsAllowed`), as
//! Kubernetes' `pkg/controller/disruption` computes it.
//!
//! One sync of a budget:
//! 1. Its pods: those of its namespace its selector matches (policy/v1: an empty selector
//!    matches every pod, a missing one none). None: a `NoPods` event.
//! 2. `expectedPods` and `desiredHealthy`:
//!    - `minAvailable` as an integer: that many, out of the pods found;
//!    - `minAvailable` as a percentage, or `maxUnavailable`: out of the sum of the scales of
//!      the pods' controllers (`spec.replicas` of the ReplicationController, the Deployment
//!      of a pod's ReplicaSet, the ReplicaSet, the StatefulSet, from the caches; for any
//!      other controller kind its `scale` subresource), each controller counted once;
//!      percentages round up; `desiredHealthy` is `minAvailable`, or the scale minus
//!      `maxUnavailable` (at least 0). A pod without a controller is skipped with an
//!      `UnmanagedPods` warning; a controller that cannot be found fails the sync.
//! 3. `disruptedPods` (the pods evictions took from the budget) keeps the pods still there,
//!    not yet being deleted, and recorded less than two minutes ago (`DeletionTimeout`);
//!    the budget is looked at again when the first of them expires.
//! 4. `currentHealthy`: the pods Ready, not being deleted and not in `disruptedPods`.
//! 5. `disruptionsAllowed` = `currentHealthy - desiredHealthy`, 0 when negative or when no
//!    pod is expected; the `DisruptionAllowed` condition True `SufficientPods` when above 0,
//!    else False `InsufficientPods`; `observedGeneration`. Written only when one of these
//!    changed.
//!
//! When a sync fails for any other reason than a conflict, the status gets
//! `disruptionsAllowed: 0` and the condition False `SyncFailed` with the error: evictions stop
//! rather than go through on a wrong count (Kubernetes' `failSafe`).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{Pod, ReplicationController};
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kore_runtime::conditions::{DesiredCondition, set_condition};
use kore_runtime::controller::{Action, ReconcileError, Reconciler, Request};
use kore_runtime::events::{EventType, Recorder};
use kore_runtime::metrics::Metrics;
use kore_runtime::{CachedClient, Controller, InformerConfig, Manager, ObjectKey, Store};
use kube::Resource;
use kube::api::{Api, DynamicObject, PostParams};
use kube::core::gvk::GroupVersion;

use crate::deployment::util::scaled_value;
use crate::endpointslice::error_chain;
use crate::error::{SyncError, status_code};
use crate::pods::{controller_ref, is_ready};
use crate::{BY_NAMESPACE, Caches, Options, publish, selector};

/// The controller's name (`--controllers`), as kube-controller-manager 1.33 names it.
pub const NAME: &str = "disruption-controller";
/// How long a pod recorded in `disruptedPods` is expected to take to be deleted.
pub const DELETION_TIMEOUT: Duration = Duration::from_secs(2 * 60);
/// The budget's condition.
pub const CONDITION_DISRUPTION_ALLOWED: &str = "DisruptionAllowed";
/// Condition reason: more healthy pods than desired.
pub const REASON_SUFFICIENT_PODS: &str = "SufficientPods";
/// Condition reason: no disruption allowed.
pub const REASON_INSUFFICIENT_PODS: &str = "InsufficientPods";
/// Condition reason: the status could not be computed.
pub const REASON_SYNC_FAILED: &str = "SyncFailed";
/// Event reason: the budget selects no pod (or they could not be listed).
pub const REASON_NO_PODS: &str = "NoPods";
/// Event reason: some selected pods have no controller.
pub const REASON_UNMANAGED_PODS: &str = "UnmanagedPods";
/// Event reason: the expected pod count could not be computed.
pub const REASON_CALCULATE_FAILED: &str = "CalculateExpectedPodCountFailed";

/// Adds the disruption controller to `manager`; returns its name.
pub(crate) fn register(
    manager: &mut Manager,
    caches: &Caches,
    _options: &Options,
    metrics: &Metrics,
) -> &'static str {
    let client = manager.client();
    let informers = manager.informers();
    let pdbs = informers.get::<PodDisruptionBudget>(InformerConfig::default());
    pdbs.add_index(BY_NAMESPACE, |p: &PodDisruptionBudget| {
        p.metadata.namespace.clone().into_iter().collect()
    });
    let builder = Controller::for_::<PodDisruptionBudget>(informers)
        .named(NAME)
        .watches::<Pod>(pod_mapper(pdbs.store()))
        .max_concurrent_reconciles(1)
        .metrics(metrics.clone());
    let reconciler = DisruptionReconciler {
        client: client.clone(),
        pods: caches.pods.store(),
        replicasets: caches.replicasets.store(),
        deployments: informers
            .get::<Deployment>(InformerConfig::default())
            .store(),
        statefulsets: informers
            .get::<StatefulSet>(InformerConfig::default())
            .store(),
        rcs: informers
            .get::<ReplicationController>(InformerConfig::default())
            .store(),
        pdbs: CachedClient::new(client.clone(), pdbs),
        recorder: crate::recorder(&client, NAME),
    };
    manager.add(Box::new(builder.build(reconciler)));
    NAME
}

/// Maps a pod to the budgets of its namespace whose selector matches it.
fn pod_mapper(
    pdbs: Store<PodDisruptionBudget>,
) -> impl Fn(&Pod) -> Vec<ObjectKey> + Send + Sync + 'static {
    move |pod: &Pod| {
        let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
        pdbs.by_index(BY_NAMESPACE, namespace)
            .iter()
            .filter(|p| selects(p, pod))
            .map(|p| ObjectKey::of(&**p))
            .collect()
    }
}

fn selects(pdb: &PodDisruptionBudget, pod: &Pod) -> bool {
    selector::matches(
        pdb.spec.as_ref().and_then(|s| s.selector.as_ref()),
        pod.metadata.labels.as_ref(),
    )
}

/// Why a budget's status could not be computed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A pod's controller is of no kind whose scale can be read, or is not there.
    #[error("found no controllers for pod {0:?}")]
    NoController(String),
    /// Reading a controller's scale failed.
    #[error("reading the scale of {what}")]
    Scale {
        /// The controller, `kind namespace/name`.
        what: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// Writing the status failed; a conflict means the cache was stale.
    #[error(transparent)]
    Sync(#[from] SyncError),
}

/// Reconciles PodDisruptionBudgets; see the [module docs](self).
pub struct DisruptionReconciler {
    client: kube::Client,
    pods: Store<Pod>,
    replicasets: Store<ReplicaSet>,
    deployments: Store<Deployment>,
    statefulsets: Store<StatefulSet>,
    rcs: Store<ReplicationController>,
    pdbs: CachedClient<PodDisruptionBudget>,
    recorder: Recorder,
}

impl std::fmt::Debug for DisruptionReconciler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DisruptionReconciler")
            .finish_non_exhaustive()
    }
}

fn is_apps(r: &OwnerReference) -> bool {
    r.api_version.split('/').next() == Some("apps")
}

/// The object `store` holds under `namespace/r.name` if it has `r`'s UID.
fn owner<K: kore_runtime::informer::Informable>(
    store: &Store<K>,
    namespace: &str,
    r: &OwnerReference,
) -> Option<Arc<K>> {
    store
        .get(&ObjectKey::namespaced(namespace, r.name.clone()))
        .filter(|o| o.meta().uid.as_deref() == Some(r.uid.as_str()))
}

impl DisruptionReconciler {
    /// The UID and scale of the controller `r` names (Kubernetes' finders, in order).
    async fn scale_of(
        &self,
        r: &OwnerReference,
        namespace: &str,
    ) -> Result<Option<(String, i32)>, Error> {
        if r.kind == "ReplicationController"
            && r.api_version == "v1"
            && let Some(rc) = owner(&self.rcs, namespace, r)
        {
            let n = rc.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
            return Ok(Some((r.uid.clone(), n)));
        }
        if r.kind == "ReplicaSet"
            && is_apps(r)
            && let Some(rs) = owner(&self.replicasets, namespace, r)
        {
            match controller_ref(&rs.metadata) {
                Some(d) if d.kind == "Deployment" && is_apps(d) => {
                    if let Some(dep) = owner(&self.deployments, namespace, d) {
                        let n = dep.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
                        return Ok(Some((d.uid.clone(), n)));
                    }
                }
                _ => {
                    let n = rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
                    return Ok(Some((r.uid.clone(), n)));
                }
            }
        }
        if r.kind == "StatefulSet"
            && is_apps(r)
            && let Some(ss) = owner(&self.statefulsets, namespace, r)
        {
            let n = ss.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
            return Ok(Some((r.uid.clone(), n)));
        }
        self.generic_scale(r, namespace).await
    }

    /// The `scale` subresource of any other controller (Kubernetes' `getScaleController`).
    async fn generic_scale(
        &self,
        r: &OwnerReference,
        namespace: &str,
    ) -> Result<Option<(String, i32)>, Error> {
        let what = format!("{} {namespace}/{}", r.kind, r.name);
        let Ok(gv) = GroupVersion::from_str(&r.api_version) else {
            return Ok(None);
        };
        let gvk = gv.with_kind(&r.kind);
        let resource = match kube::discovery::pinned_kind(&self.client, &gvk).await {
            Ok((resource, _)) => resource,
            // The kind is not served: no scale to read.
            Err(kube::Error::Api(s)) if s.code == 404 => return Ok(None),
            Err(kube::Error::Discovery(_)) => return Ok(None),
            Err(source) => return Err(Error::Scale { what, source }),
        };
        let api: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), namespace, &resource);
        match api.get_scale(&r.name).await {
            Ok(scale) => {
                if scale.metadata.uid.as_deref() != Some(r.uid.as_str()) {
                    return Ok(None);
                }
                let n = scale.spec.and_then(|s| s.replicas).unwrap_or(0);
                Ok(Some((r.uid.clone(), n)))
            }
            Err(e) if status_code(&e) == Some(404) => Ok(None),
            Err(source) => Err(Error::Scale { what, source }),
        }
    }

    /// The sum of the scales of the pods' controllers, and the pods without one.
    async fn expected_scale(
        &self,
        pods: &[Arc<Pod>],
        namespace: &str,
    ) -> Result<(i32, Vec<String>), Error> {
        let mut scales: HashMap<String, i32> = HashMap::new();
        let mut unmanaged = Vec::new();
        let mut looked_up: HashSet<String> = HashSet::new();
        for pod in pods {
            let name = pod.metadata.name.clone().unwrap_or_default();
            let Some(r) = controller_ref(&pod.metadata) else {
                unmanaged.push(name);
                continue;
            };
            if looked_up.contains(&r.uid) {
                continue;
            }
            match self.scale_of(r, namespace).await? {
                Some((uid, n)) => {
                    looked_up.insert(r.uid.clone());
                    scales.insert(uid, n);
                }
                None => return Err(Error::NoController(name)),
            }
        }
        Ok((scales.values().sum(), unmanaged))
    }

    /// `(expectedPods, desiredHealthy, unmanaged pods)` (Kubernetes' `getExpectedPodCount`).
    async fn expected_count(
        &self,
        pdb: &PodDisruptionBudget,
        pods: &[Arc<Pod>],
        namespace: &str,
    ) -> Result<(i32, i32, Vec<String>), Error> {
        let spec = pdb.spec.clone().unwrap_or_default();
        if let Some(max) = spec.max_unavailable.as_ref() {
            let (expected, unmanaged) = self.expected_scale(pods, namespace).await?;
            let max = scaled_value(Some(max), expected, true, "0%");
            return Ok((expected, (expected - max).max(0), unmanaged));
        }
        match spec.min_available.as_ref() {
            Some(IntOrString::Int(n)) => Ok((len_i32(pods.len()), *n, Vec::new())),
            Some(min @ IntOrString::String(_)) => {
                let (expected, unmanaged) = self.expected_scale(pods, namespace).await?;
                Ok((
                    expected,
                    scaled_value(Some(min), expected, true, "0%"),
                    unmanaged,
                ))
            }
            None => Ok((0, 0, Vec::new())),
        }
    }

    async fn try_sync(&self, pdb: &PodDisruptionBudget) -> Result<Action, Error> {
        let namespace = pdb.metadata.namespace.clone().unwrap_or_default();
        let mut pods: Vec<Arc<Pod>> = self
            .pods
            .by_index(BY_NAMESPACE, &namespace)
            .into_iter()
            .filter(|p| selects(pdb, p))
            .collect();
        pods.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        let regarding = pdb.object_ref(&());
        let no_pods = pods.is_empty();
        let (expected, desired, unmanaged) = match self.expected_count(pdb, &pods, &namespace).await
        {
            Ok(v) => v,
            Err(e) => {
                publish(
                    &self.recorder,
                    regarding,
                    EventType::Warning,
                    REASON_CALCULATE_FAILED,
                    "Calculate",
                    format!(
                        "Failed to calculate the number of expected pods: {}",
                        error_chain(&e)
                    ),
                );
                return Err(e);
            }
        };
        let now = Timestamp::now();
        let (disrupted, recheck) = disrupted_pods(pdb, &pods, now);
        let healthy = count_healthy(&pods, &disrupted, now);
        let written = self
            .update_status(pdb, healthy, desired, expected, disrupted)
            .await?;
        if written {
            if no_pods {
                publish(
                    &self.recorder,
                    pdb.object_ref(&()),
                    EventType::Normal,
                    REASON_NO_PODS,
                    "Sync",
                    "No matching pods found".into(),
                );
            }
            if !unmanaged.is_empty() {
                let selector =
                    serde_json::to_string(&pdb.spec.as_ref().and_then(|s| s.selector.clone()))
                        .unwrap_or_default();
                publish(
                    &self.recorder,
                    pdb.object_ref(&()),
                    EventType::Warning,
                    REASON_UNMANAGED_PODS,
                    "Sync",
                    format!(
                        "Pods selected by this PodDisruptionBudget (selector: {selector}) were found to be \
                         unmanaged. As a result, the status of the PDB cannot be calculated correctly, \
                         which may result in undefined behavior. To account for these pods please set \
                         \".spec.minAvailable\" field of the PDB to an integer value."
                    ),
                );
            }
        }
        Ok(match recheck {
            Some(at) => Action::requeue_after(
                now.duration_until(at)
                    .unsigned_abs()
                    .max(Duration::from_millis(1)),
            ),
            None => Action::done(),
        })
    }

    /// Writes the status if it changed; returns whether it wrote.
    async fn update_status(
        &self,
        pdb: &PodDisruptionBudget,
        healthy: i32,
        desired: i32,
        expected: i32,
        disrupted: BTreeMap<String, Time>,
    ) -> Result<bool, Error> {
        let allowed = if expected <= 0 {
            0
        } else {
            (healthy - desired).max(0)
        };
        let current = pdb.status.clone().unwrap_or_default();
        let generation = pdb.metadata.generation;
        let mut conditions = current.conditions.clone().unwrap_or_default();
        let condition_changed =
            set_condition(&mut conditions, allowed_condition(allowed, generation));
        let same = current.current_healthy == healthy
            && current.desired_healthy == desired
            && current.expected_pods == expected
            && current.disruptions_allowed == allowed
            && current.disrupted_pods.clone().unwrap_or_default() == disrupted
            && current.observed_generation == generation
            && !condition_changed;
        if same {
            return Ok(false);
        }
        let status = PodDisruptionBudgetStatus {
            current_healthy: healthy,
            desired_healthy: desired,
            expected_pods: expected,
            disruptions_allowed: allowed,
            disrupted_pods: (!disrupted.is_empty()).then_some(disrupted),
            observed_generation: generation,
            conditions: Some(conditions),
        };
        self.write(pdb, status).await?;
        Ok(true)
    }

    async fn write(
        &self,
        pdb: &PodDisruptionBudget,
        status: PodDisruptionBudgetStatus,
    ) -> Result<(), SyncError> {
        let updated = PodDisruptionBudget {
            status: Some(status),
            ..pdb.clone()
        };
        self.pdbs
            .replace_status(&updated, &PostParams::default())
            .await
            .map_err(|e| {
                SyncError::cached(
                    format!("status of PodDisruptionBudget {}", ObjectKey::of(pdb)),
                    e,
                )
            })?;
        Ok(())
    }

    /// Stops evictions after a failed sync: `disruptionsAllowed` 0, condition `SyncFailed`.
    async fn fail_safe(&self, pdb: &PodDisruptionBudget, e: &Error) -> Result<(), SyncError> {
        let mut status = pdb.status.clone().unwrap_or_default();
        status.disruptions_allowed = 0;
        let mut conditions = status.conditions.clone().unwrap_or_default();
        let changed = set_condition(
            &mut conditions,
            DesiredCondition::new(CONDITION_DISRUPTION_ALLOWED, false)
                .reason(REASON_SYNC_FAILED)
                .message(error_chain(e))
                .observed_generation(status.observed_generation),
        );
        if !changed
            && pdb
                .status
                .as_ref()
                .is_some_and(|s| s.disruptions_allowed == 0)
        {
            return Ok(());
        }
        status.conditions = Some(conditions);
        self.write(pdb, status).await
    }
}

fn is_conflict(e: &Error) -> bool {
    matches!(e, Error::Sync(SyncError::Cached {
        source: kore_runtime::client::Error::Api(e),
        ..
    }) if status_code(e) == Some(409))
}

fn len_i32(n: usize) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

fn allowed_condition(allowed: i32, generation: Option<i64>) -> DesiredCondition {
    let (ok, reason) = if allowed > 0 {
        (true, REASON_SUFFICIENT_PODS)
    } else {
        (false, REASON_INSUFFICIENT_PODS)
    };
    DesiredCondition::new(CONDITION_DISRUPTION_ALLOWED, ok)
        .reason(reason)
        .observed_generation(generation)
}

fn expires(t: &Time) -> Option<Timestamp> {
    t.0.checked_add(SignedDuration::try_from(DELETION_TIMEOUT).ok()?)
        .ok()
}

/// The budget's `disruptedPods` still pending (Kubernetes' `buildDisruptedPodMap`), and when
/// the first of them expires.
fn disrupted_pods(
    pdb: &PodDisruptionBudget,
    pods: &[Arc<Pod>],
    now: Timestamp,
) -> (BTreeMap<String, Time>, Option<Timestamp>) {
    let recorded = pdb
        .status
        .as_ref()
        .and_then(|s| s.disrupted_pods.clone())
        .unwrap_or_default();
    let mut kept = BTreeMap::new();
    let mut recheck: Option<Timestamp> = None;
    for pod in pods {
        if pod.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let name = pod.metadata.name.clone().unwrap_or_default();
        let Some(at) = recorded.get(&name) else {
            continue;
        };
        let Some(deadline) = expires(at) else {
            continue;
        };
        if deadline < now {
            tracing::info!(pod = %name, "a pod was expected to be deleted after its eviction but was not");
            continue;
        }
        recheck = Some(recheck.map_or(deadline, |r| r.min(deadline)));
        kept.insert(name, at.clone());
    }
    (kept, recheck)
}

/// The pods Ready, not being deleted, and not about to be (Kubernetes' `countHealthyPods`).
fn count_healthy(pods: &[Arc<Pod>], disrupted: &BTreeMap<String, Time>, now: Timestamp) -> i32 {
    len_i32(
        pods.iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .filter(|p| {
                let name = p.metadata.name.as_deref().unwrap_or_default();
                disrupted
                    .get(name)
                    .and_then(expires)
                    .is_none_or(|deadline| deadline <= now)
            })
            .filter(|p| is_ready(p))
            .count(),
    )
}

impl Reconciler<PodDisruptionBudget> for DisruptionReconciler {
    type Error = Error;

    async fn reconcile(
        &self,
        request: Request<PodDisruptionBudget>,
    ) -> Result<Action, ReconcileError<Error>> {
        let Some(pdb) = request.object() else {
            return Ok(Action::done());
        };
        match self.try_sync(&pdb).await {
            Ok(action) => Ok(action),
            // A conflict is retried without failing safe: the cache was behind.
            Err(e) if is_conflict(&e) => Err(e.into()),
            Err(e) => {
                tracing::warn!(pdb = %request.key(), error = %error_chain(&e), "syncing a PodDisruptionBudget failed");
                self.fail_safe(&pdb, &e).await.map_err(Error::from)?;
                Err(e.into())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(name: &str, ready: bool, deleting: bool) -> Arc<Pod> {
        let mut v = json!({
            "metadata": {"name": name},
            "status": {"conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]},
        });
        if deleting {
            v["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        }
        Arc::new(serde_json::from_value(v).expect("a pod"))
    }

    #[test]
    fn healthy_pods_are_ready_not_deleted_and_not_just_evicted() {
        let now: Timestamp = "2026-01-01T00:10:00Z".parse().expect("a time");
        let pdb: PodDisruptionBudget = serde_json::from_value(json!({
            "metadata": {"name": "b"},
            "status": {"disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0, "expectedPods": 0,
                       "disruptedPods": {"evicted": "2026-01-01T00:09:00Z", "stale": "2026-01-01T00:00:00Z",
                                         "gone": "2026-01-01T00:09:30Z"}}
        }))
        .expect("a pdb");
        let pods = [
            pod("a", true, false),
            pod("evicted", true, false),
            pod("stale", true, false),
            pod("unready", false, false),
            pod("deleting", true, true),
        ];
        let (disrupted, recheck) = disrupted_pods(&pdb, &pods, now);
        assert_eq!(disrupted.keys().collect::<Vec<_>>(), ["evicted"]);
        assert_eq!(
            recheck.map(|t| t.to_string()).as_deref(),
            Some("2026-01-01T00:11:00Z")
        );
        // "a" and "stale" (its eviction expired, so it counts again).
        assert_eq!(count_healthy(&pods, &disrupted, now), 2);
    }

    #[test]
    fn the_condition_follows_disruptions_allowed() {
        let mut conditions = Vec::new();
        set_condition(&mut conditions, allowed_condition(1, Some(2)));
        assert_eq!(conditions[0].status, "True");
        assert_eq!(conditions[0].reason, REASON_SUFFICIENT_PODS);
        assert_eq!(conditions[0].observed_generation, Some(2));
        set_condition(&mut conditions, allowed_condition(0, Some(2)));
        assert_eq!(conditions[0].status, "False");
        assert_eq!(conditions[0].reason, REASON_INSUFFICIENT_PODS);
    }
}
