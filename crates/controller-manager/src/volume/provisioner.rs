//! The simulated provisioner of the API server's default StorageClass `standard`
//! (provisioner `kore.dev/simulated`): it plays the part an in-tree volume plugin plays in
//! Kubernetes' binder (`provisionClaimOperation`). Nothing is stored anywhere; the
//! PersistentVolume says so with a `hostPath` under [`VOLUME_ROOT`] that no kubelet creates.
//!
//! A claim of such a class gets the PersistentVolume `pvc-<claim uid>` (the name makes a
//! second creation impossible: a lagging cache gets 409, which counts as done): the
//! requested storage as capacity, the claim's access modes and volume mode, the class's
//! reclaim policy (default Delete) and mount options, `storageClassName`, a `claimRef` to the
//! claim (so the binder binds the two), the annotations `pv.kubernetes.io/provisioned-by`
//! and `pv.kubernetes.io/bound-by-controller`, and, when the claim waited for its first
//! consumer, a node affinity to the consumer's node (a host path lives on one node).

use k8s_openapi::api::core::v1::{
    HostPathVolumeSource, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, ObjectReference,
    PersistentVolume, PersistentVolumeClaim, PersistentVolumeSpec, VolumeNodeAffinity,
};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::{ANN_BOUND_BY_CONTROLLER, ANN_DYNAMICALLY_PROVISIONED};

/// The provisioner name of the server's default StorageClass (kore-apiserver's
/// `SIMULATED_PROVISIONER`).
pub const SIMULATED_PROVISIONER: &str = "kore.dev/simulated";

/// Where the simulated volumes pretend to live.
pub const VOLUME_ROOT: &str = "/var/lib/kore/volumes";

/// The name of the volume provisioned for `claim` (Kubernetes' `getProvisionedVolumeNameForClaim`).
pub fn volume_name(claim: &PersistentVolumeClaim) -> String {
    format!("pvc-{}", claim.metadata.uid.as_deref().unwrap_or_default())
}

/// The PersistentVolume provisioned for `claim` of `class`, bound in advance to the claim;
/// `node` is the node of the claim's first consumer, if it waited for one.
pub fn volume_for(
    claim: &PersistentVolumeClaim,
    class: &StorageClass,
    node: Option<&str>,
) -> PersistentVolume {
    let name = volume_name(claim);
    let spec = claim.spec.clone().unwrap_or_default();
    let capacity = spec
        .resources
        .as_ref()
        .and_then(|r| r.requests.as_ref())
        .and_then(|r| r.get("storage").cloned())
        .map(|q| [("storage".to_string(), q)].into_iter().collect());
    let node_affinity = node.map(|node| VolumeNodeAffinity {
        required: Some(NodeSelector {
            node_selector_terms: vec![NodeSelectorTerm {
                match_expressions: Some(vec![NodeSelectorRequirement {
                    key: "kubernetes.io/hostname".into(),
                    operator: "In".into(),
                    values: Some(vec![node.to_string()]),
                }]),
                match_fields: None,
            }],
        }),
    });
    PersistentVolume {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            annotations: Some(
                [
                    (
                        ANN_DYNAMICALLY_PROVISIONED.to_string(),
                        class.provisioner.clone(),
                    ),
                    (ANN_BOUND_BY_CONTROLLER.to_string(), "yes".to_string()),
                ]
                .into_iter()
                .collect(),
            ),
            ..ObjectMeta::default()
        },
        spec: Some(PersistentVolumeSpec {
            capacity,
            access_modes: spec.access_modes.clone(),
            volume_mode: spec.volume_mode.clone(),
            persistent_volume_reclaim_policy: Some(
                class
                    .reclaim_policy
                    .clone()
                    .unwrap_or_else(|| "Delete".into()),
            ),
            storage_class_name: class.metadata.name.clone(),
            mount_options: class.mount_options.clone(),
            claim_ref: Some(claim_ref(claim)),
            host_path: Some(HostPathVolumeSource {
                path: format!("{VOLUME_ROOT}/{name}"),
                type_: Some("DirectoryOrCreate".into()),
            }),
            node_affinity,
            ..PersistentVolumeSpec::default()
        }),
        status: None,
    }
}

/// A volume's reference to `claim` (Kubernetes' `GetReference`).
pub fn claim_ref(claim: &PersistentVolumeClaim) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("PersistentVolumeClaim".into()),
        namespace: claim.metadata.namespace.clone(),
        name: claim.metadata.name.clone(),
        uid: claim.metadata.uid.clone(),
        resource_version: claim.metadata.resource_version.clone(),
        field_path: None,
    }
}
