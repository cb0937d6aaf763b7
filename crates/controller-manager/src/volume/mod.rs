//! The PersistentVolume binder (`persistentvolume-binder-controller`, Kubernetes'
//! `pkg/controller/volume/persistentvolume`), with the [`provisioner`] of the server's
//! default StorageClass.
//!
//! Two syncs, as Kubernetes' two queues: one per claim ([`ClaimReconciler`], `syncClaim`),
//! one per volume ([`VolumeReconciler`], `syncVolume`).
//!
//! **A claim not yet bound** (no `pv.kubernetes.io/bind-completed`):
//! - without `spec.volumeName`: the best matching volume is bound to it — one pre-bound to
//!   this claim (`claimRef`), else the smallest Available one of the same class, with at
//!   least the requested storage, every requested access mode, the same volume mode and
//!   labels its selector matches. None: a claim of a `WaitForFirstConsumer` class without a
//!   consumer waits (`WaitForFirstConsumer` event); one with a class is provisioned (the
//!   [`provisioner`] for `kore.dev/simulated`, else the annotation
//!   `volume.kubernetes.io/storage-provisioner` and an `ExternalProvisioning` event for
//!   whoever provisions that class); one without a class gets `FailedBinding`.
//! - with `spec.volumeName`: that volume is bound to it if it is free (or pre-bound to this
//!   claim) and satisfies it (`VolumeMismatch` otherwise); `FailedBinding` if it is bound to
//!   another claim; a missing volume is waited for.
//!
//! **Binding** (`bind`): the volume gets `claimRef` (and `bound-by-controller` if the
//! controller chose it), then phase Bound; the claim gets `volumeName`,
//! `bind-completed` (and `bound-by-controller` if the controller chose the volume), then
//! phase Bound with the volume's capacity and access modes. Each step is skipped when done,
//! so an interrupted binding finishes in the next sync.
//!
//! **A bound claim** whose volume went away or lost its `claimRef` becomes Lost (`ClaimLost`);
//! one whose volume is bound to another claim too (`ClaimMisbound`).
//!
//! **A volume**: without `claimRef` (or pre-bound to a claim not yet made) it is Available;
//! bound to a claim that exists it is Bound; bound to a claim that is gone (a different UID
//! counts as gone; the server is asked before a cache miss counts) it is Released and
//! reclaimed by its policy: Retain leaves it Released, Delete deletes it (the simulated
//! storage needs no cleanup; a volume another provisioner made is left to it), Recycle is
//! not supported (Failed, `VolumeFailedRecycle`). A volume whose claim chose another volume
//! is given back: Available again if the controller had bound it, Released and deleted if it
//! was provisioned with policy Delete.
//!
//! **WaitForFirstConsumer**: kube-scheduler writes `volume.kubernetes.io/selected-node` on a
//! claim when it schedules its first pod; kore's scheduler does not. So the binder takes a
//! pod using the claim that is bound to a node as the claim's consumer (the annotation,
//! when someone sets it, is honoured first), and provisions for that node.

pub mod provisioner;

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use kore_runtime::controller::{Action, ReconcileError, Reconciler, Request};
use kore_runtime::events::{EventType, Recorder};
use kore_runtime::metrics::Metrics;
use kore_runtime::{CachedClient, Controller, InformerConfig, Manager, ObjectKey, Store};
use kube::Resource;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::error::{SyncError, message, status_code};
use crate::{Caches, Options, publish, recorder, selector};

/// The controller's name (`--controllers`), as kube-controller-manager 1.33 names it.
pub const NAME: &str = "persistentvolume-binder-controller";
/// Its short alias.
pub const ALIAS: &str = "persistentvolume-binder";
/// The name of its volume half (metrics, logs).
pub const VOLUMES_NAME: &str = "persistentvolume-binder-controller-volumes";

/// On a claim: binding is complete.
pub const ANN_BIND_COMPLETED: &str = "pv.kubernetes.io/bind-completed";
/// On a claim or volume: the controller (not a user) bound it.
pub const ANN_BOUND_BY_CONTROLLER: &str = "pv.kubernetes.io/bound-by-controller";
/// On a volume: the provisioner that made it.
pub const ANN_DYNAMICALLY_PROVISIONED: &str = "pv.kubernetes.io/provisioned-by";
/// On a claim: the provisioner expected to provision it.
pub const ANN_STORAGE_PROVISIONER: &str = "volume.kubernetes.io/storage-provisioner";
/// The same, by its older name (still written by Kubernetes).
pub const ANN_BETA_STORAGE_PROVISIONER: &str = "volume.beta.kubernetes.io/storage-provisioner";
/// On a claim: the node its first consumer was scheduled to (kube-scheduler's).
pub const ANN_SELECTED_NODE: &str = "volume.kubernetes.io/selected-node";

/// Event reasons, Kubernetes'.
pub const REASON_PROVISIONING_SUCCEEDED: &str = "ProvisioningSucceeded";
/// Provisioning failed.
pub const REASON_PROVISIONING_FAILED: &str = "ProvisioningFailed";
/// Another provisioner is expected to provision the claim.
pub const REASON_EXTERNAL_PROVISIONING: &str = "ExternalProvisioning";
/// The claim waits for a pod.
pub const REASON_WAIT_FOR_FIRST_CONSUMER: &str = "WaitForFirstConsumer";
/// Nothing to bind to.
pub const REASON_FAILED_BINDING: &str = "FailedBinding";
/// The requested volume does not satisfy the claim.
pub const REASON_VOLUME_MISMATCH: &str = "VolumeMismatch";
/// A bound claim lost its volume.
pub const REASON_CLAIM_LOST: &str = "ClaimLost";
/// Two claims are bound to one volume.
pub const REASON_CLAIM_MISBOUND: &str = "ClaimMisbound";
/// Deleting a released volume failed.
pub const REASON_VOLUME_FAILED_DELETE: &str = "VolumeFailedDelete";
/// Recycling is not supported.
pub const REASON_VOLUME_FAILED_RECYCLE: &str = "VolumeFailedRecycle";

/// How often a pending claim is looked at again (`--pvclaimbinder-sync-period`, 15 s).
pub const SYNC_PERIOD: Duration = Duration::from_secs(15);

/// The pod cache index of pods by the claims they use (`namespace/claim`).
const BY_CLAIM: &str = "persistentvolumeclaim";
/// The volume cache index by `claimRef` (`namespace/name`).
const BY_CLAIM_REF: &str = "claimRef";
/// The claim cache index by `spec.volumeName`.
const BY_VOLUME_NAME: &str = "spec.volumeName";

fn annotation<'a, K: Resource>(obj: &'a K, key: &str) -> Option<&'a str> {
    obj.meta()
        .annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .map(String::as_str)
}

fn key_of<K: Resource>(obj: &K) -> String {
    format!(
        "{}/{}",
        obj.meta().namespace.as_deref().unwrap_or_default(),
        obj.meta().name.as_deref().unwrap_or_default()
    )
}

/// A storage quantity in bytes (`1Gi`, `500M`, `1.5Ti`, `1e9`); `None` if unreadable.
pub fn parse_bytes(q: &str) -> Option<f64> {
    kore_runtime::quantity::parse(q)
}

/// The claim's requested storage in bytes.
fn requested(claim: &PersistentVolumeClaim) -> f64 {
    claim
        .spec
        .as_ref()
        .and_then(|s| s.resources.as_ref())
        .and_then(|r| r.requests.as_ref())
        .and_then(|r| r.get("storage"))
        .and_then(|q| parse_bytes(&q.0))
        .unwrap_or(0.0)
}

/// The volume's capacity in bytes.
fn capacity(volume: &PersistentVolume) -> f64 {
    volume
        .spec
        .as_ref()
        .and_then(|s| s.capacity.as_ref())
        .and_then(|c| c.get("storage"))
        .and_then(|q| parse_bytes(&q.0))
        .unwrap_or(0.0)
}

/// The claim's class (`spec.storageClassName`, else the old annotation; `""`: none).
pub fn claim_class(claim: &PersistentVolumeClaim) -> String {
    if let Some(class) = annotation(claim, "volume.beta.kubernetes.io/storage-class") {
        return class.to_string();
    }
    claim
        .spec
        .as_ref()
        .and_then(|s| s.storage_class_name.clone())
        .unwrap_or_default()
}

/// The volume's class (`""`: none).
pub fn volume_class(volume: &PersistentVolume) -> String {
    if let Some(class) = annotation(volume, "volume.beta.kubernetes.io/storage-class") {
        return class.to_string();
    }
    volume
        .spec
        .as_ref()
        .and_then(|s| s.storage_class_name.clone())
        .unwrap_or_default()
}

fn volume_phase(volume: &PersistentVolume) -> &str {
    volume
        .status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or_default()
}

fn claim_phase(claim: &PersistentVolumeClaim) -> &str {
    claim
        .status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or_default()
}

/// Whether `volume`'s `claimRef` names `claim` (a ref without UID is a pre-binding by name).
pub fn is_bound_to(volume: &PersistentVolume, claim: &PersistentVolumeClaim) -> bool {
    let Some(r) = volume.spec.as_ref().and_then(|s| s.claim_ref.as_ref()) else {
        return false;
    };
    r.name == claim.metadata.name
        && r.namespace == claim.metadata.namespace
        && r.uid
            .as_deref()
            .is_none_or(|u| u.is_empty() || Some(u) == claim.metadata.uid.as_deref())
}

/// Why `volume` cannot serve `claim`, if it cannot (Kubernetes' `checkVolumeSatisfyClaim`).
pub fn mismatch(volume: &PersistentVolume, claim: &PersistentVolumeClaim) -> Option<String> {
    if capacity(volume) < requested(claim) {
        return Some("requested PV is too small".into());
    }
    if volume_class(volume) != claim_class(claim) {
        return Some("storageClassName does not match".into());
    }
    let vspec = volume.spec.clone().unwrap_or_default();
    let cspec = claim.spec.clone().unwrap_or_default();
    let mode = |m: Option<String>| m.unwrap_or_else(|| "Filesystem".into());
    if mode(vspec.volume_mode) != mode(cspec.volume_mode) {
        return Some("incompatible volumeMode".into());
    }
    let have = vspec.access_modes.unwrap_or_default();
    if !cspec
        .access_modes
        .unwrap_or_default()
        .iter()
        .all(|m| have.contains(m))
    {
        return Some("incompatible accessMode".into());
    }
    None
}

/// The volume to bind `claim` to (Kubernetes' `findBestMatchForClaim`): one pre-bound to it,
/// else (unless binding waits for a consumer) the smallest Available volume that satisfies it
/// and its selector.
pub fn best_match(
    claim: &PersistentVolumeClaim,
    volumes: &[Arc<PersistentVolume>],
    wait_for_consumer: bool,
) -> Option<Arc<PersistentVolume>> {
    let mut best: Option<(f64, &Arc<PersistentVolume>)> = None;
    let claim_selector = claim.spec.as_ref().and_then(|s| s.selector.as_ref());
    for volume in volumes {
        if volume.metadata.deletion_timestamp.is_some() {
            continue;
        }
        if is_bound_to(volume, claim) {
            if mismatch(volume, claim).is_none() {
                return Some(volume.clone());
            }
            continue;
        }
        if wait_for_consumer
            || volume_phase(volume) != "Available"
            || volume
                .spec
                .as_ref()
                .and_then(|s| s.claim_ref.as_ref())
                .is_some()
            || mismatch(volume, claim).is_some()
            || claim_selector
                .is_some_and(|s| !selector::matches(Some(s), volume.metadata.labels.as_ref()))
        {
            continue;
        }
        let size = capacity(volume);
        if best.is_none_or(|(b, _)| size < b) {
            best = Some((size, volume));
        }
    }
    best.map(|(_, v)| v.clone())
}

/// What the two halves share.
#[derive(Clone)]
struct Shared {
    client: kube::Client,
    claims: CachedClient<PersistentVolumeClaim>,
    volumes: CachedClient<PersistentVolume>,
    classes: Store<StorageClass>,
    pods: Store<Pod>,
    recorder: Recorder,
}

impl Shared {
    fn event<K: Resource<DynamicType = ()>>(
        &self,
        obj: &K,
        type_: EventType,
        reason: &str,
        note: String,
    ) {
        publish(
            &self.recorder,
            obj.object_ref(&()),
            type_,
            reason,
            reason,
            note,
        );
    }

    /// Writes the claim's phase (and, when bound, the volume's capacity and access modes).
    async fn set_claim_phase(
        &self,
        claim: &PersistentVolumeClaim,
        phase: &str,
        volume: Option<&PersistentVolume>,
    ) -> Result<Arc<PersistentVolumeClaim>, SyncError> {
        let mut updated = claim.clone();
        let status = updated.status.get_or_insert_with(Default::default);
        status.phase = Some(phase.into());
        if let Some(v) = volume {
            let spec = v.spec.clone().unwrap_or_default();
            status.access_modes = spec.access_modes;
            status.capacity = spec.capacity;
        }
        if Some(&*status) == claim.status.as_ref() {
            return Ok(Arc::new(claim.clone()));
        }
        self.claims
            .replace_status(&updated, &PostParams::default())
            .await
            .map_err(|e| SyncError::cached(format!("status of claim {}", key_of(claim)), e))
    }

    /// Writes the volume's phase.
    async fn set_volume_phase(
        &self,
        volume: &PersistentVolume,
        phase: &str,
        message: Option<String>,
    ) -> Result<Arc<PersistentVolume>, SyncError> {
        if volume_phase(volume) == phase {
            return Ok(Arc::new(volume.clone()));
        }
        let mut updated = volume.clone();
        let status = updated.status.get_or_insert_with(Default::default);
        status.phase = Some(phase.into());
        status.message = message;
        let name = volume.metadata.name.clone().unwrap_or_default();
        self.volumes
            .replace_status(&updated, &PostParams::default())
            .await
            .map_err(|e| SyncError::cached(format!("status of volume {name}"), e))
    }
}

/// Syncs one claim; see the [module docs](self).
pub struct ClaimReconciler {
    shared: Shared,
}

impl std::fmt::Debug for ClaimReconciler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClaimReconciler").finish_non_exhaustive()
    }
}

impl ClaimReconciler {
    async fn sync(&self, claim: &PersistentVolumeClaim) -> Result<Action, SyncError> {
        if claim.metadata.deletion_timestamp.is_some() {
            return Ok(Action::done());
        }
        if annotation(claim, ANN_BIND_COMPLETED).is_some() {
            return self.sync_bound(claim).await;
        }
        self.sync_unbound(claim).await
    }

    async fn sync_unbound(&self, claim: &PersistentVolumeClaim) -> Result<Action, SyncError> {
        let s = &self.shared;
        let volume_name = claim
            .spec
            .as_ref()
            .and_then(|s| s.volume_name.clone())
            .unwrap_or_default();
        if !volume_name.is_empty() {
            let Some(volume) = s.volumes.get(&ObjectKey::cluster(&volume_name)) else {
                // Waited for: it may be created later.
                s.set_claim_phase(claim, "Pending", None).await?;
                return Ok(Action::requeue_after(SYNC_PERIOD));
            };
            let claim_ref = volume.spec.as_ref().and_then(|s| s.claim_ref.as_ref());
            if claim_ref.is_none() || is_bound_to(&volume, claim) {
                if let Some(why) = mismatch(&volume, claim) {
                    s.event(
                        claim,
                        EventType::Warning,
                        REASON_VOLUME_MISMATCH,
                        format!("Cannot bind to requested volume {volume_name:?}: {why}"),
                    );
                    s.set_claim_phase(claim, "Pending", None).await?;
                    return Ok(Action::requeue_after(SYNC_PERIOD));
                }
                self.bind(&volume, claim).await?;
                return Ok(Action::done());
            }
            s.event(
                claim,
                EventType::Warning,
                REASON_FAILED_BINDING,
                format!("volume {volume_name:?} already bound to a different claim."),
            );
            s.set_claim_phase(claim, "Pending", None).await?;
            return Ok(Action::requeue_after(SYNC_PERIOD));
        }

        let class_name = claim_class(claim);
        let class = (!class_name.is_empty())
            .then(|| s.classes.get(&ObjectKey::cluster(&class_name)))
            .flatten();
        let waits = class
            .as_ref()
            .and_then(|c| c.volume_binding_mode.as_deref())
            == Some("WaitForFirstConsumer");
        let consumer = if waits {
            self.consumer_node(claim)
        } else {
            None
        };
        let volumes = s.volumes.list();
        if let Some(volume) = best_match(claim, &volumes, waits && consumer.is_none()) {
            self.bind(&volume, claim).await?;
            return Ok(Action::done());
        }
        if waits && consumer.is_none() {
            s.event(
                claim,
                EventType::Normal,
                REASON_WAIT_FOR_FIRST_CONSUMER,
                "waiting for first consumer to be created before binding".into(),
            );
            s.set_claim_phase(claim, "Pending", None).await?;
            return Ok(Action::requeue_after(SYNC_PERIOD));
        }
        if class_name.is_empty() {
            s.event(
                claim,
                EventType::Normal,
                REASON_FAILED_BINDING,
                "no persistent volumes available for this claim and no storage class is set".into(),
            );
            s.set_claim_phase(claim, "Pending", None).await?;
            return Ok(Action::requeue_after(SYNC_PERIOD));
        }
        s.set_claim_phase(claim, "Pending", None).await?;
        let Some(class) = class else {
            s.event(
                claim,
                EventType::Warning,
                REASON_PROVISIONING_FAILED,
                format!("storageclass.storage.k8s.io {class_name:?} not found"),
            );
            return Ok(Action::requeue_after(SYNC_PERIOD));
        };
        self.provision(claim, &class, consumer.as_deref()).await?;
        Ok(Action::requeue_after(SYNC_PERIOD))
    }

    /// The node of the claim's first consumer: the `selected-node` annotation, else the node
    /// of a running or pending pod that uses the claim.
    fn consumer_node(&self, claim: &PersistentVolumeClaim) -> Option<String> {
        if let Some(node) = annotation(claim, ANN_SELECTED_NODE) {
            return Some(node.to_string());
        }
        self.shared
            .pods
            .by_index(BY_CLAIM, &key_of(claim))
            .iter()
            .filter(|p| crate::pods::is_active(p))
            .find_map(|p| p.spec.as_ref().and_then(|s| s.node_name.clone()))
    }

    /// Provisions a volume for `claim` of `class` (`provisionClaim`).
    async fn provision(
        &self,
        claim: &PersistentVolumeClaim,
        class: &StorageClass,
        node: Option<&str>,
    ) -> Result<(), SyncError> {
        let s = &self.shared;
        let provisioner = class.provisioner.as_str();
        if annotation(claim, ANN_STORAGE_PROVISIONER) != Some(provisioner) {
            let patch = json!({"metadata": {"annotations": {
                ANN_STORAGE_PROVISIONER: provisioner,
                ANN_BETA_STORAGE_PROVISIONER: provisioner,
            }}});
            s.claims
                .patch(
                    &ObjectKey::of(claim),
                    &PatchParams::default(),
                    &Patch::Merge(&patch),
                )
                .await
                .map_err(|e| SyncError::cached(format!("claim {}", key_of(claim)), e))?;
        }
        if provisioner != provisioner::SIMULATED_PROVISIONER {
            s.event(
                claim,
                EventType::Normal,
                REASON_EXTERNAL_PROVISIONING,
                format!(
                    "Waiting for a volume to be created either by the external provisioner \
                     '{provisioner}' or manually by the system administrator. If volume \
                     creation is delayed, please verify that the provisioner is running and \
                     correctly registered."
                ),
            );
            return Ok(());
        }
        let name = provisioner::volume_name(claim);
        if s.volumes.get(&ObjectKey::cluster(&name)).is_some() {
            return Ok(());
        }
        let volume = provisioner::volume_for(claim, class, node);
        match s.volumes.create(&volume, &PostParams::default()).await {
            Ok(_) => {
                s.event(
                    claim,
                    EventType::Normal,
                    REASON_PROVISIONING_SUCCEEDED,
                    format!("Successfully provisioned volume {name} using {provisioner}"),
                );
                Ok(())
            }
            Err(kore_runtime::client::Error::Api(e)) if status_code(&e) == Some(409) => Ok(()),
            Err(e) => {
                s.event(
                    claim,
                    EventType::Warning,
                    REASON_PROVISIONING_FAILED,
                    format!(
                        "Failed to provision volume with StorageClass {:?}: {e}",
                        class.metadata.name.as_deref().unwrap_or_default()
                    ),
                );
                Err(SyncError::cached(format!("volume {name}"), e))
            }
        }
    }

    /// Binds `volume` and `claim` to each other, each step once (`bind`).
    async fn bind(
        &self,
        volume: &PersistentVolume,
        claim: &PersistentVolumeClaim,
    ) -> Result<(), SyncError> {
        let s = &self.shared;
        let volume_name = volume.metadata.name.clone().unwrap_or_default();
        let mut volume = Arc::new(volume.clone());
        let current_ref = volume.spec.as_ref().and_then(|s| s.claim_ref.as_ref());
        let complete = current_ref.is_some_and(|r| r.uid == claim.metadata.uid);
        if !complete {
            let mut updated = (*volume).clone();
            if current_ref.is_none() {
                updated
                    .metadata
                    .annotations
                    .get_or_insert_with(Default::default)
                    .insert(ANN_BOUND_BY_CONTROLLER.into(), "yes".into());
            }
            updated.spec.get_or_insert_with(Default::default).claim_ref =
                Some(provisioner::claim_ref(claim));
            volume = s
                .volumes
                .replace(&updated, &PostParams::default())
                .await
                .map_err(|e| SyncError::cached(format!("volume {volume_name}"), e))?;
        }
        let volume = s.set_volume_phase(&volume, "Bound", None).await?;

        let mut claim = Arc::new(claim.clone());
        let named = claim.spec.as_ref().and_then(|s| s.volume_name.as_deref())
            == Some(volume_name.as_str());
        if !named || annotation(&*claim, ANN_BIND_COMPLETED).is_none() {
            let mut updated = (*claim).clone();
            let annotations = updated
                .metadata
                .annotations
                .get_or_insert_with(Default::default);
            if !named {
                annotations.insert(ANN_BOUND_BY_CONTROLLER.into(), "yes".into());
            }
            annotations.insert(ANN_BIND_COMPLETED.into(), "yes".into());
            updated
                .spec
                .get_or_insert_with(Default::default)
                .volume_name = Some(volume_name.clone());
            claim = s
                .claims
                .replace(&updated, &PostParams::default())
                .await
                .map_err(|e| SyncError::cached(format!("claim {}", key_of(&*claim)), e))?;
        }
        s.set_claim_phase(&claim, "Bound", Some(&volume)).await?;
        Ok(())
    }

    async fn sync_bound(&self, claim: &PersistentVolumeClaim) -> Result<Action, SyncError> {
        let s = &self.shared;
        let volume_name = claim
            .spec
            .as_ref()
            .and_then(|s| s.volume_name.clone())
            .unwrap_or_default();
        let lost = |note: &str| {
            if claim_phase(claim) != "Lost" {
                s.event(claim, EventType::Warning, REASON_CLAIM_LOST, note.into());
            }
        };
        if volume_name.is_empty() {
            lost("Bound claim has lost reference to PersistentVolume. Data on the volume is lost!");
            s.set_claim_phase(claim, "Lost", None).await?;
            return Ok(Action::done());
        }
        let Some(volume) = s.volumes.get(&ObjectKey::cluster(&volume_name)) else {
            lost("Bound claim has lost its PersistentVolume. Data on the volume is lost!");
            s.set_claim_phase(claim, "Lost", None).await?;
            return Ok(Action::done());
        };
        let claim_ref = volume.spec.as_ref().and_then(|s| s.claim_ref.as_ref());
        if claim_ref.is_none() || claim_ref.is_some_and(|r| r.uid == claim.metadata.uid) {
            self.bind(&volume, claim).await?;
            return Ok(Action::done());
        }
        if claim_phase(claim) != "Lost" {
            s.event(
                claim,
                EventType::Warning,
                REASON_CLAIM_MISBOUND,
                "Two claims are bound to the same volume, this one is bound incorrectly".into(),
            );
        }
        s.set_claim_phase(claim, "Lost", None).await?;
        Ok(Action::done())
    }
}

impl Reconciler<PersistentVolumeClaim> for ClaimReconciler {
    type Error = SyncError;

    async fn reconcile(
        &self,
        request: Request<PersistentVolumeClaim>,
    ) -> Result<Action, ReconcileError<SyncError>> {
        let Some(claim) = request.object() else {
            return Ok(Action::done());
        };
        Ok(self.sync(&claim).await?)
    }
}

/// Syncs one volume; see the [module docs](self).
pub struct VolumeReconciler {
    shared: Shared,
}

impl std::fmt::Debug for VolumeReconciler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VolumeReconciler").finish_non_exhaustive()
    }
}

impl VolumeReconciler {
    async fn sync(&self, volume: &PersistentVolume) -> Result<Action, SyncError> {
        let s = &self.shared;
        if volume.metadata.deletion_timestamp.is_some() {
            return Ok(Action::done());
        }
        let Some(claim_ref) = volume.spec.as_ref().and_then(|s| s.claim_ref.clone()) else {
            s.set_volume_phase(volume, "Available", None).await?;
            return Ok(Action::done());
        };
        if claim_ref.uid.as_deref().is_none_or(str::is_empty) {
            // Pre-bound by a user to a claim by name; the claim's sync binds it.
            s.set_volume_phase(volume, "Available", None).await?;
            return Ok(Action::done());
        }
        let namespace = claim_ref.namespace.clone().unwrap_or_default();
        let claim_name = claim_ref.name.clone().unwrap_or_default();
        let key = ObjectKey::namespaced(&namespace, &claim_name);
        let claim = match s.claims.get(&key) {
            Some(c) => Some(c),
            // A cache miss is checked with the server before the volume is released.
            None => {
                let api: Api<PersistentVolumeClaim> = Api::namespaced(s.client.clone(), &namespace);
                api.get_opt(&claim_name)
                    .await
                    .map_err(|e| {
                        SyncError::api("get", format!("claim {namespace}/{claim_name}"), e)
                    })?
                    .map(Arc::new)
            }
        };
        let claim = claim.filter(|c| c.metadata.uid == claim_ref.uid);
        let Some(claim) = claim else {
            return self.release(volume).await;
        };
        let volume_name = volume.metadata.name.clone().unwrap_or_default();
        let claim_volume = claim
            .spec
            .as_ref()
            .and_then(|s| s.volume_name.clone())
            .unwrap_or_default();
        if claim_volume.is_empty() {
            // The claim's sync finishes the binding (it is enqueued by this volume's change).
            return Ok(Action::done());
        }
        if claim_volume == volume_name {
            s.set_volume_phase(volume, "Bound", None).await?;
            return Ok(Action::done());
        }
        // The claim is bound to another volume: give this one back.
        let provisioned = annotation(volume, ANN_DYNAMICALLY_PROVISIONED).is_some();
        if provisioned && reclaim_policy(volume) == "Delete" {
            return self.release(volume).await;
        }
        let mut updated = volume.clone();
        if annotation(volume, ANN_BOUND_BY_CONTROLLER).is_some() {
            updated.spec.get_or_insert_with(Default::default).claim_ref = None;
            if let Some(a) = updated.metadata.annotations.as_mut() {
                a.remove(ANN_BOUND_BY_CONTROLLER);
            }
        } else if let Some(r) = updated.spec.as_mut().and_then(|s| s.claim_ref.as_mut()) {
            r.uid = None;
        }
        let updated = s
            .volumes
            .replace(&updated, &PostParams::default())
            .await
            .map_err(|e| SyncError::cached(format!("volume {volume_name}"), e))?;
        s.set_volume_phase(&updated, "Available", None).await?;
        Ok(Action::done())
    }

    /// Marks the volume Released and reclaims it by its policy (`reclaimVolume`).
    async fn release(&self, volume: &PersistentVolume) -> Result<Action, SyncError> {
        let s = &self.shared;
        let name = volume.metadata.name.clone().unwrap_or_default();
        let volume = if volume_phase(volume) == "Failed" {
            Arc::new(volume.clone())
        } else {
            s.set_volume_phase(volume, "Released", None).await?
        };
        match reclaim_policy(&volume) {
            "Delete" => {
                if let Some(by) = annotation(&*volume, ANN_DYNAMICALLY_PROVISIONED)
                    && by != provisioner::SIMULATED_PROVISIONER
                {
                    // Another provisioner's volume: deleting it is that provisioner's job.
                    return Ok(Action::done());
                }
                match s
                    .volumes
                    .delete(&ObjectKey::cluster(&name), &DeleteParams::default())
                    .await
                {
                    Ok(_) => Ok(Action::done()),
                    Err(kore_runtime::client::Error::Api(e)) if status_code(&e) == Some(404) => {
                        Ok(Action::done())
                    }
                    Err(e) => {
                        let note = match &e {
                            kore_runtime::client::Error::Api(api) => message(api),
                            other => other.to_string(),
                        };
                        s.event(
                            &*volume,
                            EventType::Warning,
                            REASON_VOLUME_FAILED_DELETE,
                            note,
                        );
                        Err(SyncError::cached(format!("volume {name}"), e))
                    }
                }
            }
            "Recycle" => {
                let note = "recycling is not supported: set the reclaim policy to Retain or Delete";
                if volume_phase(&volume) != "Failed" {
                    s.event(
                        &*volume,
                        EventType::Warning,
                        REASON_VOLUME_FAILED_RECYCLE,
                        note.into(),
                    );
                }
                s.set_volume_phase(&volume, "Failed", Some(note.into()))
                    .await?;
                Ok(Action::done())
            }
            // Retain: the administrator decides.
            _ => Ok(Action::done()),
        }
    }
}

fn reclaim_policy(volume: &PersistentVolume) -> &str {
    volume
        .spec
        .as_ref()
        .and_then(|s| s.persistent_volume_reclaim_policy.as_deref())
        .unwrap_or("Retain")
}

impl Reconciler<PersistentVolume> for VolumeReconciler {
    type Error = SyncError;

    async fn reconcile(
        &self,
        request: Request<PersistentVolume>,
    ) -> Result<Action, ReconcileError<SyncError>> {
        let Some(volume) = request.object() else {
            return Ok(Action::done());
        };
        Ok(self.sync(&volume).await?)
    }
}

/// Registers both halves of the binder on `manager`: claims (watching volumes by their
/// `claimRef` and `volumeName`, and pods that use a claim waiting for its consumer) and
/// volumes (watching claims by the volumes that name them).
pub(crate) fn register(
    manager: &mut Manager,
    caches: &Caches,
    _options: &Options,
    metrics: &Metrics,
) -> &'static str {
    let client = manager.client();
    caches.pods.add_index(BY_CLAIM, |pod: &Pod| {
        let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
        pod.spec
            .iter()
            .flat_map(|s| s.volumes.iter().flatten())
            .filter_map(|v| v.persistent_volume_claim.as_ref())
            .map(|c| format!("{namespace}/{}", c.claim_name))
            .collect()
    });
    let claims = manager
        .informers()
        .get::<PersistentVolumeClaim>(InformerConfig::default());
    claims.add_index(BY_VOLUME_NAME, |c: &PersistentVolumeClaim| {
        c.spec
            .as_ref()
            .and_then(|s| s.volume_name.clone())
            .filter(|n| !n.is_empty())
            .into_iter()
            .collect()
    });
    let volumes = manager
        .informers()
        .get::<PersistentVolume>(InformerConfig::default());
    volumes.add_index(BY_CLAIM_REF, |v: &PersistentVolume| {
        v.spec
            .as_ref()
            .and_then(|s| s.claim_ref.as_ref())
            .map(|r| {
                format!(
                    "{}/{}",
                    r.namespace.as_deref().unwrap_or_default(),
                    r.name.as_deref().unwrap_or_default()
                )
            })
            .into_iter()
            .collect()
    });
    let classes = manager
        .informers()
        .get::<StorageClass>(InformerConfig::default());
    let shared = Shared {
        client: client.clone(),
        claims: CachedClient::new(client.clone(), claims.clone()),
        volumes: CachedClient::new(client.clone(), volumes.clone()),
        classes: classes.store(),
        pods: caches.pods.store(),
        recorder: recorder(&client, "persistentvolume-controller"),
    };

    let claim_store = claims.store();
    let by_volume = move |v: &PersistentVolume| {
        let mut keys: Vec<ObjectKey> = v
            .spec
            .as_ref()
            .and_then(|s| s.claim_ref.as_ref())
            .map(|r| {
                ObjectKey::namespaced(
                    r.namespace.clone().unwrap_or_default(),
                    r.name.clone().unwrap_or_default(),
                )
            })
            .into_iter()
            .collect();
        let name = v.metadata.name.as_deref().unwrap_or_default();
        keys.extend(
            claim_store
                .by_index(BY_VOLUME_NAME, name)
                .iter()
                .map(|c| ObjectKey::of(&**c)),
        );
        keys
    };
    let claim_store = claims.store();
    let by_pod = move |pod: &Pod| {
        if pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.as_ref())
            .is_none()
        {
            return Vec::new();
        }
        let namespace = pod.metadata.namespace.clone().unwrap_or_default();
        pod.spec
            .iter()
            .flat_map(|s| s.volumes.iter().flatten())
            .filter_map(|v| v.persistent_volume_claim.as_ref())
            .map(|c| ObjectKey::namespaced(namespace.clone(), c.claim_name.clone()))
            .filter(|k| {
                claim_store
                    .get(k)
                    .is_some_and(|c| annotation(&*c, ANN_BIND_COMPLETED).is_none())
            })
            .collect()
    };
    let claim_controller = Controller::for_::<PersistentVolumeClaim>(manager.informers())
        .named(NAME)
        .watches::<PersistentVolume>(by_volume)
        .watches::<Pod>(by_pod)
        .metrics(metrics.clone())
        .build(ClaimReconciler {
            shared: shared.clone(),
        });
    manager.add(Box::new(claim_controller));

    let volume_store = volumes.store();
    let by_claim = move |c: &PersistentVolumeClaim| {
        let mut keys: Vec<ObjectKey> = volume_store
            .by_index(BY_CLAIM_REF, &key_of(c))
            .iter()
            .map(|v| ObjectKey::of(&**v))
            .collect();
        if let Some(name) = c
            .spec
            .as_ref()
            .and_then(|s| s.volume_name.as_deref())
            .filter(|n| !n.is_empty())
        {
            let key = ObjectKey::cluster(name);
            if !keys.contains(&key) {
                keys.push(key);
            }
        }
        keys
    };
    let volume_controller = Controller::for_::<PersistentVolume>(manager.informers())
        .named(VOLUMES_NAME)
        .watches::<PersistentVolumeClaim>(by_claim)
        .metrics(metrics.clone())
        .build(VolumeReconciler { shared });
    manager.add(Box::new(volume_controller));
    NAME
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn claim(request: &str, modes: &[&str], class: &str) -> PersistentVolumeClaim {
        serde_json::from_value(json!({
            "metadata": {"name": "c", "namespace": "default", "uid": "u1"},
            "spec": {
                "accessModes": modes,
                "storageClassName": class,
                "resources": {"requests": {"storage": request}},
            },
        }))
        .expect("a valid claim")
    }

    fn volume(name: &str, size: &str, modes: &[&str], class: &str) -> Arc<PersistentVolume> {
        Arc::new(
            serde_json::from_value(json!({
                "metadata": {"name": name},
                "spec": {
                    "capacity": {"storage": size},
                    "accessModes": modes,
                    "storageClassName": class,
                    "hostPath": {"path": "/x"},
                },
                "status": {"phase": "Available"},
            }))
            .expect("a valid volume"),
        )
    }

    #[test]
    fn quantities_read_as_bytes() {
        assert_eq!(parse_bytes("1Gi"), Some(1024f64.powi(3)));
        assert_eq!(parse_bytes("500M"), Some(5e8));
        assert_eq!(parse_bytes("1e3"), Some(1000.0));
        assert_eq!(parse_bytes("12"), Some(12.0));
        assert_eq!(parse_bytes("1Qi"), None);
    }

    #[test]
    fn the_smallest_fitting_volume_of_the_class_wins() {
        let c = claim("1Gi", &["ReadWriteOnce"], "fast");
        let volumes = vec![
            volume("big", "10Gi", &["ReadWriteOnce"], "fast"),
            volume("small", "500Mi", &["ReadWriteOnce"], "fast"),
            volume("fit", "2Gi", &["ReadWriteOnce", "ReadOnlyMany"], "fast"),
            volume("other-class", "1Gi", &["ReadWriteOnce"], "slow"),
            volume("wrong-mode", "1Gi", &["ReadOnlyMany"], "fast"),
        ];
        let best = best_match(&c, &volumes, false).expect("a match");
        assert_eq!(best.metadata.name.as_deref(), Some("fit"));
        // Waiting for a consumer: nothing but a pre-bound volume is taken.
        assert!(best_match(&c, &volumes, true).is_none());
        let mut pre_bound = (*volume("mine", "1Gi", &["ReadWriteOnce"], "fast")).clone();
        pre_bound.spec.as_mut().expect("spec").claim_ref = Some(provisioner::claim_ref(&c));
        let mut with_mine = volumes.clone();
        with_mine.push(Arc::new(pre_bound));
        let best = best_match(&c, &with_mine, true).expect("the pre-bound one");
        assert_eq!(best.metadata.name.as_deref(), Some("mine"));
        // A volume bound to another claim is never taken.
        let mut taken = (*volume("taken", "1Gi", &["ReadWriteOnce"], "fast")).clone();
        let mut other = c.clone();
        other.metadata.name = Some("other".into());
        taken.spec.as_mut().expect("spec").claim_ref = Some(provisioner::claim_ref(&other));
        assert!(best_match(&c, &[Arc::new(taken)], false).is_none());
    }

    #[test]
    fn a_provisioned_volume_is_made_for_its_claim() {
        let c = claim("3Gi", &["ReadWriteOnce"], "standard");
        let class: StorageClass = serde_json::from_value(json!({
            "metadata": {"name": "standard"},
            "provisioner": provisioner::SIMULATED_PROVISIONER,
            "reclaimPolicy": "Retain",
        }))
        .expect("a valid class");
        let v = provisioner::volume_for(&c, &class, Some("node-1"));
        assert_eq!(v.metadata.name.as_deref(), Some("pvc-u1"));
        assert!(mismatch(&v, &c).is_none());
        let spec = v.spec.expect("spec");
        assert_eq!(
            spec.persistent_volume_reclaim_policy.as_deref(),
            Some("Retain")
        );
        assert_eq!(spec.claim_ref.and_then(|r| r.uid).as_deref(), Some("u1"));
        assert!(spec.node_affinity.is_some());
        assert_eq!(
            v.metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(ANN_DYNAMICALLY_PROVISIONED))
                .map(String::as_str),
            Some(provisioner::SIMULATED_PROVISIONER)
        );
    }
}
