//! Who a StatefulSet's pods and claims are: the ordinal in a pod's name, the pod an ordinal
//! gets (name, hostname, subdomain, identity labels, one volume per claim template), the
//! claims it mounts, and which ownerReferences those claims carry under the set's
//! `persistentVolumeClaimRetentionPolicy` (Kubernetes' `stateful_set_utils.go`). Everything
//! here is a pure function of the objects, so it is tested without a server.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{
    PersistentVolumeClaim, PersistentVolumeClaimVolumeSource, Pod, PodSpec, PodTemplateSpec, Volume,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

/// The label with the pod's own name, which a headless Service can select one pod by.
pub const POD_NAME_LABEL: &str = "statefulset.kubernetes.io/pod-name";
/// The label with the pod's ordinal (Kubernetes' `PodIndexLabel`, on by default since 1.32).
pub const POD_INDEX_LABEL: &str = "apps.kubernetes.io/pod-index";
/// The label with the name of the ControllerRevision a pod was made from.
pub const REVISION_LABEL: &str = "controller-revision-hash";

/// The parent name and ordinal in a pod name `<parent>-<ordinal>` (Kubernetes' regex
/// `(.*)-([0-9]+)$`); the ordinal is `None` when it does not fit an `i32`.
pub fn parent_and_ordinal(name: &str) -> Option<(&str, Option<i32>)> {
    let (parent, digits) = name.rsplit_once('-')?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((parent, digits.parse().ok()))
}

/// A pod's ordinal, if its name has one.
pub fn ordinal_of(pod: &Pod) -> Option<i32> {
    parent_and_ordinal(pod.metadata.name.as_deref()?)?.1
}

/// Whether the pod's name makes it a member of the set named `set` (`isMemberOf`).
pub fn is_member_of(set: &str, pod: &Pod) -> bool {
    pod.metadata
        .name
        .as_deref()
        .and_then(parent_and_ordinal)
        .is_some_and(|(parent, _)| parent == set)
}

/// `spec.replicas` (default 1).
pub fn replicas(set: &StatefulSet) -> i32 {
    set.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1)
}

/// The first ordinal, `spec.ordinals.start` (default 0).
pub fn start_ordinal(set: &StatefulSet) -> i32 {
    set.spec
        .as_ref()
        .and_then(|s| s.ordinals.as_ref())
        .and_then(|o| o.start)
        .unwrap_or(0)
}

/// Whether `ordinal` is one of the set's current replicas: `start ≤ ordinal < start + replicas`.
pub fn in_range(set: &StatefulSet, ordinal: i32) -> bool {
    let start = start_ordinal(set);
    ordinal >= start && i64::from(ordinal) < i64::from(start) + i64::from(replicas(set))
}

fn set_name(set: &StatefulSet) -> &str {
    set.metadata.name.as_deref().unwrap_or_default()
}

/// The name of the set's pod with `ordinal`: `<set>-<ordinal>`.
pub fn pod_name(set: &StatefulSet, ordinal: i32) -> String {
    format!("{}-{ordinal}", set_name(set))
}

/// The name of the claim from `template` for the pod with `ordinal`: `<claim>-<set>-<ordinal>`.
pub fn claim_name(set: &StatefulSet, template: &str, ordinal: i32) -> String {
    format!("{template}-{}-{ordinal}", set_name(set))
}

fn claim_templates(set: &StatefulSet) -> &[PersistentVolumeClaim] {
    set.spec
        .as_ref()
        .and_then(|s| s.volume_claim_templates.as_deref())
        .unwrap_or_default()
}

/// The claims the pod with `ordinal` mounts, with the name of the template each comes from:
/// the template with its name, the set's namespace, and the selector's `matchLabels` added
/// to its labels (`getPersistentVolumeClaims`).
pub fn claims(set: &StatefulSet, ordinal: i32) -> Vec<(String, PersistentVolumeClaim)> {
    let match_labels = set
        .spec
        .as_ref()
        .and_then(|s| s.selector.match_labels.clone())
        .unwrap_or_default();
    claim_templates(set)
        .iter()
        .map(|t| {
            let template = t.metadata.name.clone().unwrap_or_default();
            let mut meta = t.metadata.clone();
            meta.name = Some(claim_name(set, &template, ordinal));
            meta.namespace = set.metadata.namespace.clone();
            let labels = meta.labels.get_or_insert_with(BTreeMap::new);
            labels.extend(match_labels.clone());
            meta.resource_version = None;
            meta.uid = None;
            let claim = PersistentVolumeClaim {
                metadata: meta,
                spec: t.spec.clone(),
                status: None,
            };
            (template, claim)
        })
        .collect()
}

/// Sets the pod's volumes so that each claim template has a volume of its name mounting the
/// pod's claim; other volumes stay (`updateStorage`).
pub fn update_storage(set: &StatefulSet, ordinal: i32, spec: &mut PodSpec) {
    let claims = claims(set, ordinal);
    let mut volumes: Vec<Volume> = claims
        .iter()
        .map(|(template, claim)| Volume {
            name: template.clone(),
            persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                claim_name: claim.metadata.name.clone().unwrap_or_default(),
                read_only: Some(false),
            }),
            ..Volume::default()
        })
        .collect();
    for v in spec.volumes.take().unwrap_or_default() {
        if !claims.iter().any(|(t, _)| *t == v.name) {
            volumes.push(v);
        }
    }
    spec.volumes = Some(volumes);
}

/// Whether the pod mounts the claim of every template under the template's name
/// (`storageMatches`).
pub fn storage_matches(set: &StatefulSet, pod: &Pod) -> bool {
    let Some(ordinal) = ordinal_of(pod) else {
        return false;
    };
    let volumes = pod
        .spec
        .as_ref()
        .and_then(|s| s.volumes.as_deref())
        .unwrap_or_default();
    claims(set, ordinal).iter().all(|(template, claim)| {
        volumes.iter().any(|v| {
            v.name == *template
                && v.persistent_volume_claim.as_ref().map(|c| &c.claim_name)
                    == claim.metadata.name.as_ref()
        })
    })
}

/// Whether the pod's name, namespace and pod-name label are those of a member of the set
/// (`identityMatches`).
pub fn identity_matches(set: &StatefulSet, pod: &Pod) -> bool {
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    let Some((parent, Some(ordinal))) = parent_and_ordinal(name) else {
        return false;
    };
    ordinal >= 0
        && parent == set_name(set)
        && name == pod_name(set, ordinal)
        && pod.metadata.namespace == set.metadata.namespace
        && pod
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(POD_NAME_LABEL))
            .map(String::as_str)
            == Some(name)
}

/// Sets the identity labels (pod name and index) of a member pod (`updateIdentity`).
pub fn update_identity(pod: &mut Pod, ordinal: i32) {
    let name = pod.metadata.name.clone().unwrap_or_default();
    let labels = pod.metadata.labels.get_or_insert_with(BTreeMap::new);
    labels.insert(POD_NAME_LABEL.into(), name);
    labels.insert(POD_INDEX_LABEL.into(), ordinal.to_string());
}

/// The pod with `ordinal` made from `template` (the template of revision `revision`): its
/// name, identity labels and revision label, `hostname` its name and `subdomain` the set's
/// `serviceName`, a volume per claim template, and a controller reference to the set.
pub fn new_pod(
    set: &StatefulSet,
    template: &PodTemplateSpec,
    ordinal: i32,
    revision: &str,
    owner: OwnerReference,
) -> Pod {
    let meta = template.metadata.clone().unwrap_or_default();
    let name = pod_name(set, ordinal);
    let mut pod = Pod {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            namespace: set.metadata.namespace.clone(),
            labels: meta.labels,
            annotations: meta.annotations,
            finalizers: meta.finalizers,
            owner_references: Some(vec![owner]),
            ..ObjectMeta::default()
        },
        spec: template.spec.clone(),
        status: None,
    };
    update_identity(&mut pod, ordinal);
    pod.metadata
        .labels
        .get_or_insert_with(BTreeMap::new)
        .insert(REVISION_LABEL.into(), revision.into());
    let service = set.spec.as_ref().and_then(|s| s.service_name.clone());
    let spec = pod.spec.get_or_insert_with(PodSpec::default);
    spec.hostname = Some(name);
    spec.subdomain = service.filter(|s| !s.is_empty());
    update_storage(set, ordinal, spec);
    pod
}

/// The revision label of a pod (`getPodRevision`), `""` without one.
pub fn revision_of(pod: &Pod) -> &str {
    pod.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(REVISION_LABEL))
        .map_or("", String::as_str)
}

/// An object a claim may be owned by: the set or one of its pods.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner {
    /// `apps/v1` or `v1`.
    pub api_version: &'static str,
    /// `StatefulSet` or `Pod`.
    pub kind: &'static str,
    /// Its name.
    pub name: String,
    /// Its UID (empty for a pod not yet created).
    pub uid: String,
}

impl Owner {
    /// The set as an owner.
    pub fn set(set: &StatefulSet) -> Owner {
        Owner {
            api_version: "apps/v1",
            kind: "StatefulSet",
            name: set_name(set).to_owned(),
            uid: set.metadata.uid.clone().unwrap_or_default(),
        }
    }

    /// A pod as an owner.
    pub fn pod(name: &str, uid: Option<&str>) -> Owner {
        Owner {
            api_version: "v1",
            kind: "Pod",
            name: name.to_owned(),
            uid: uid.unwrap_or_default().to_owned(),
        }
    }

    /// Whether `r` points at an object of this kind and name (any UID): `matchesRef`.
    fn named_by(&self, r: &OwnerReference) -> bool {
        r.api_version == self.api_version && r.kind == self.kind && r.name == self.name
    }

    fn controller_ref(&self) -> OwnerReference {
        OwnerReference {
            api_version: self.api_version.into(),
            kind: self.kind.into(),
            name: self.name.clone(),
            uid: self.uid.clone(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }
    }
}

/// The set's claim retention policy: (whenDeleted is Delete, whenScaled is Delete); anything
/// else (Retain, unset, unknown) retains.
pub fn retention(set: &StatefulSet) -> (bool, bool) {
    let policy = set
        .spec
        .as_ref()
        .and_then(|s| s.persistent_volume_claim_retention_policy.as_ref());
    let delete = |v: Option<&String>| v.is_some_and(|v| v == "Delete");
    (
        delete(policy.and_then(|p| p.when_deleted.as_ref())),
        delete(policy.and_then(|p| p.when_scaled.as_ref())),
    )
}

fn refs(claim: &PersistentVolumeClaim) -> &[OwnerReference] {
    claim
        .metadata
        .owner_references
        .as_deref()
        .unwrap_or_default()
}

fn has_owner_ref(claim: &PersistentVolumeClaim, owner: &Owner) -> bool {
    refs(claim).iter().any(|r| r.uid == owner.uid)
}

/// Whether the first reference to `owner`'s kind and name carries another UID: it points at
/// an earlier object of that name (`hasStaleOwnerRef`).
pub fn has_stale_owner_ref(claim: &PersistentVolumeClaim, owner: &Owner) -> bool {
    refs(claim)
        .iter()
        .find(|r| owner.named_by(r))
        .is_some_and(|r| r.uid != owner.uid)
}

/// Whether, under a deleting policy, the claim has a controller other than the set or the pod,
/// or a reference to an earlier set or pod of the same name (`hasUnexpectedController`).
pub fn has_unexpected_controller(
    claim: &PersistentVolumeClaim,
    set: &StatefulSet,
    set_owner: &Owner,
    pod: &Owner,
) -> bool {
    if retention(set) == (false, false) {
        return false;
    }
    refs(claim).iter().any(|r| {
        if set_owner.named_by(r) {
            r.uid != set_owner.uid
        } else if pod.named_by(r) {
            r.uid != pod.uid
        } else {
            r.controller == Some(true)
        }
    })
}

/// Whether the claim's references to the set and the pod are what the retention policy
/// wants (`isClaimOwnerUpToDate`): none for Retain/Retain; the set for whenDeleted Delete;
/// the pod, once it is scaled down, for whenScaled Delete (and then not the set). A claim
/// with a stale reference or a foreign controller is left as it is.
pub fn claim_owner_up_to_date(
    claim: &PersistentVolumeClaim,
    set: &StatefulSet,
    pod: &Owner,
    scaled_down: bool,
) -> bool {
    let set_owner = Owner::set(set);
    if has_stale_owner_ref(claim, &set_owner) || has_stale_owner_ref(claim, pod) {
        return true;
    }
    if has_unexpected_controller(claim, set, &set_owner, pod) {
        return !(has_owner_ref(claim, &set_owner) || has_owner_ref(claim, pod));
    }
    let non_controller = refs(claim)
        .iter()
        .any(|r| (r.uid == set_owner.uid || r.uid == pod.uid) && r.controller != Some(true));
    if non_controller {
        return false;
    }
    let (has_set, has_pod) = (has_owner_ref(claim, &set_owner), has_owner_ref(claim, pod));
    match retention(set) {
        (false, false) => !has_set && !has_pod,
        (true, false) => has_set && !has_pod,
        (false, true) => !has_set && scaled_down == has_pod,
        (true, true) => scaled_down != has_set && scaled_down == has_pod,
    }
}

/// The claim's ownerReferences as the retention policy wants them
/// (`updateClaimOwnerRefForSetAndPod`): references to the set and the pod are dropped, then,
/// unless another controller holds the claim, the set is added as controller when the claim
/// must go with the set, and the pod when it must go with a scaled-down pod.
pub fn claim_owner_refs(
    claim: &PersistentVolumeClaim,
    set: &StatefulSet,
    pod: &Owner,
    scaled_down: bool,
) -> Vec<OwnerReference> {
    let set_owner = Owner::set(set);
    let unexpected = has_unexpected_controller(claim, set, &set_owner, pod);
    let mut out: Vec<OwnerReference> = refs(claim)
        .iter()
        .filter(|r| !set_owner.named_by(r) && !pod.named_by(r))
        .cloned()
        .collect();
    if unexpected {
        return out;
    }
    let mut add = |owner: &Owner| {
        if !out.iter().any(|r| r.uid == owner.uid) {
            out.push(owner.controller_ref());
        }
    };
    match retention(set) {
        (false, false) => {}
        (true, false) => add(&set_owner),
        (_, true) if scaled_down => add(pod),
        (true, true) => add(&set_owner),
        (false, true) => {}
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn set(policy: serde_json::Value) -> StatefulSet {
        serde_json::from_value(json!({
            "metadata": {"name": "web", "namespace": "ns", "uid": "set-uid"},
            "spec": {
                "replicas": 2,
                "serviceName": "nginx",
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {
                        "containers": [{"name": "c", "image": "i"}],
                        "volumes": [{"name": "tmp", "emptyDir": {}}],
                    },
                },
                "volumeClaimTemplates": [{"metadata": {"name": "data"}}],
                "persistentVolumeClaimRetentionPolicy": policy,
            },
        }))
        .expect("a StatefulSet")
    }

    #[test]
    fn ordinals_come_from_the_last_dash() {
        assert_eq!(parent_and_ordinal("web-0"), Some(("web", Some(0))));
        assert_eq!(parent_and_ordinal("my-web-12"), Some(("my-web", Some(12))));
        assert_eq!(parent_and_ordinal("web-x"), None);
        assert_eq!(parent_and_ordinal("web"), None);
        assert_eq!(
            parent_and_ordinal("web-99999999999"),
            Some(("web", None)),
            "too big for an i32"
        );
    }

    #[test]
    fn a_new_pod_has_its_identity_and_claims() {
        let s = set(json!({}));
        let template = s
            .spec
            .as_ref()
            .map(|s| s.template.clone())
            .unwrap_or_default();
        let owner = OwnerReference::default();
        let pod = new_pod(&s, &template, 1, "web-abc", owner);
        assert_eq!(pod.metadata.name.as_deref(), Some("web-1"));
        let labels = pod.metadata.labels.clone().unwrap_or_default();
        assert_eq!(
            labels.get(POD_NAME_LABEL).map(String::as_str),
            Some("web-1")
        );
        assert_eq!(labels.get(POD_INDEX_LABEL).map(String::as_str), Some("1"));
        assert_eq!(revision_of(&pod), "web-abc");
        let spec = pod.spec.clone().unwrap_or_default();
        assert_eq!(spec.hostname.as_deref(), Some("web-1"));
        assert_eq!(spec.subdomain.as_deref(), Some("nginx"));
        let volumes = spec.volumes.unwrap_or_default();
        let names: Vec<&str> = volumes.iter().map(|v| v.name.as_str()).collect();
        assert_eq!(names, ["data", "tmp"]);
        assert_eq!(
            volumes[0]
                .persistent_volume_claim
                .as_ref()
                .map(|c| c.claim_name.as_str()),
            Some("data-web-1")
        );
        assert!(identity_matches(&s, &pod) && storage_matches(&s, &pod));
        let (_, claim) = &claims(&s, 1)[0];
        assert_eq!(claim.metadata.name.as_deref(), Some("data-web-1"));
        assert_eq!(
            claim
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("app"))
                .map(String::as_str),
            Some("web")
        );
    }

    #[test]
    fn claim_owners_follow_the_retention_policy() {
        let claim = PersistentVolumeClaim::default();
        let pod = Owner::pod("web-1", Some("pod-uid"));
        let kinds =
            |refs: &[OwnerReference]| refs.iter().map(|r| r.kind.clone()).collect::<Vec<_>>();

        let retain = set(json!({"whenDeleted": "Retain", "whenScaled": "Retain"}));
        assert!(claim_owner_up_to_date(&claim, &retain, &pod, true));

        let with_set = set(json!({"whenDeleted": "Delete", "whenScaled": "Retain"}));
        assert!(!claim_owner_up_to_date(&claim, &with_set, &pod, false));
        let refs = claim_owner_refs(&claim, &with_set, &pod, false);
        assert_eq!(kinds(&refs), ["StatefulSet"]);

        let scaled = set(json!({"whenDeleted": "Retain", "whenScaled": "Delete"}));
        assert!(claim_owner_up_to_date(&claim, &scaled, &pod, false));
        assert!(!claim_owner_up_to_date(&claim, &scaled, &pod, true));
        let refs = claim_owner_refs(&claim, &scaled, &pod, true);
        assert_eq!(kinds(&refs), ["Pod"]);
        assert_eq!(refs[0].controller, Some(true));

        // Both Delete: the set while in range, the pod (only) once scaled down.
        let both = set(json!({"whenDeleted": "Delete", "whenScaled": "Delete"}));
        let owned = PersistentVolumeClaim {
            metadata: ObjectMeta {
                owner_references: Some(claim_owner_refs(&claim, &both, &pod, false)),
                ..ObjectMeta::default()
            },
            ..PersistentVolumeClaim::default()
        };
        assert_eq!(
            kinds(
                owned
                    .metadata
                    .owner_references
                    .as_deref()
                    .unwrap_or_default()
            ),
            ["StatefulSet"]
        );
        assert!(claim_owner_up_to_date(&owned, &both, &pod, false));
        assert!(!claim_owner_up_to_date(&owned, &both, &pod, true));
        assert_eq!(kinds(&claim_owner_refs(&owned, &both, &pod, true)), ["Pod"]);

        // A reference to an earlier pod of the same name makes a claim stale for a new pod.
        let old = Owner::pod("web-1", Some("old-uid"));
        let stale = PersistentVolumeClaim {
            metadata: ObjectMeta {
                owner_references: Some(vec![old.controller_ref()]),
                ..ObjectMeta::default()
            },
            ..PersistentVolumeClaim::default()
        };
        assert!(has_stale_owner_ref(&stale, &Owner::pod("web-1", None)));
        assert!(
            claim_owner_up_to_date(&stale, &both, &pod, true),
            "left alone"
        );
    }

    #[test]
    fn ordinals_start_where_the_spec_says() {
        let mut s = set(json!({}));
        assert!(in_range(&s, 0) && in_range(&s, 1) && !in_range(&s, 2));
        if let Some(spec) = s.spec.as_mut() {
            spec.ordinals = Some(serde_json::from_value(json!({"start": 5})).expect("ordinals"));
        }
        assert!(!in_range(&s, 0) && in_range(&s, 5) && in_range(&s, 6) && !in_range(&s, 7));
    }
}
