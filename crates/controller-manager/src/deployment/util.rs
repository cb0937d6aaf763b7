//! The arithmetic of Deployments (Kubernetes' `deploymentutil`): the pod-template hash,
//! maxSurge and maxUnavailable, revisions and replica annotations, proportional shares, and
//! the tests of a rollout's state.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentCondition, DeploymentStatus, ReplicaSet};
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use k8s_openapi::jiff::Timestamp;

/// The label that tells a Deployment's ReplicaSets (and their pods) apart.
pub const POD_TEMPLATE_HASH: &str = "pod-template-hash";
/// The revision of a Deployment and of each of its ReplicaSets.
pub const REVISION: &str = "deployment.kubernetes.io/revision";
/// The revisions a ReplicaSet had before it was rolled back to.
pub const REVISION_HISTORY: &str = "deployment.kubernetes.io/revision-history";
/// The Deployment's replicas when it last sized this ReplicaSet.
pub const DESIRED_REPLICAS: &str = "deployment.kubernetes.io/desired-replicas";
/// The Deployment's replicas plus maxSurge when it last sized this ReplicaSet.
pub const MAX_REPLICAS: &str = "deployment.kubernetes.io/max-replicas";
/// The longest revision history kept, in characters.
const MAX_REVISION_HISTORY_CHARS: usize = 2000;

/// The annotation asking for a rollback (apps/v1's stand-in for extensions/v1beta1's
/// `spec.rollbackTo`): the revision to go back to, 0 for the previous one.
pub const ROLLBACK_TO: &str = "deprecated.deployment.rollback.to";

/// Annotations a Deployment does not copy to its ReplicaSets.
const NOT_COPIED: [&str; 6] = [
    "kubectl.kubernetes.io/last-applied-configuration",
    REVISION,
    REVISION_HISTORY,
    DESIRED_REPLICAS,
    MAX_REPLICAS,
    ROLLBACK_TO,
];

/// The characters a hash is rendered with: no vowels (no words), no look-alikes.
const SAFE_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// The pod-template hash of `template` after `collision_count` collisions: FNV-32a of the
/// template's JSON (and of the count, as four little-endian bytes and four zero bytes), its
/// decimal digits each mapped into a 27-letter alphabet without vowels.
pub fn pod_template_hash(template: &PodTemplateSpec, collision_count: Option<i32>) -> String {
    let json = serde_json::to_vec(template).unwrap_or_default();
    let mut hash: u32 = 0x811c_9dc5;
    let mut feed = |bytes: &[u8]| {
        for b in bytes {
            hash ^= u32::from(*b);
            hash = hash.wrapping_mul(0x0100_0193);
        }
    };
    feed(&json);
    if let Some(count) = collision_count {
        let mut bytes = [0u8; 8];
        bytes[..4].copy_from_slice(&count.cast_unsigned().to_le_bytes());
        feed(&bytes);
    }
    hash.to_string()
        .bytes()
        .map(|b| char::from(SAFE_ALPHABET[usize::from(b) % SAFE_ALPHABET.len()]))
        .collect()
}

/// Whether two templates are equal but for the pod-template-hash label.
pub fn equal_ignore_hash(a: Option<&PodTemplateSpec>, b: Option<&PodTemplateSpec>) -> bool {
    let strip = |t: Option<&PodTemplateSpec>| {
        let mut t = t.cloned().unwrap_or_default();
        if let Some(labels) = t.metadata.as_mut().and_then(|m| m.labels.as_mut()) {
            labels.remove(POD_TEMPLATE_HASH);
            if labels.is_empty()
                && let Some(m) = t.metadata.as_mut()
            {
                m.labels = None;
            }
        }
        serde_json::to_value(t).unwrap_or_default()
    };
    strip(a) == strip(b)
}

/// `spec.replicas`, defaulted to 1.
pub fn replicas_of(d: &Deployment) -> i32 {
    d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1)
}

/// A ReplicaSet's `spec.replicas`, defaulted to 1.
pub fn rs_replicas(rs: &ReplicaSet) -> i32 {
    rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1)
}

/// A ReplicaSet's `status.replicas`.
pub fn rs_actual(rs: &ReplicaSet) -> i32 {
    rs.status.as_ref().map_or(0, |s| s.replicas)
}

/// A ReplicaSet's `status.availableReplicas`.
pub fn rs_available(rs: &ReplicaSet) -> i32 {
    rs.status
        .as_ref()
        .and_then(|s| s.available_replicas)
        .unwrap_or(0)
}

/// Whether the Deployment uses the Recreate strategy.
pub fn is_recreate(d: &Deployment) -> bool {
    d.spec
        .as_ref()
        .and_then(|s| s.strategy.as_ref())
        .and_then(|s| s.type_.as_deref())
        == Some("Recreate")
}

/// `value` of `total`: an integer as it is, a percentage rounded up or down.
pub fn scaled_value(value: Option<&IntOrString>, total: i32, round_up: bool, default: &str) -> i32 {
    let percent = |s: &str| -> i32 {
        let n: i64 = s.trim_end_matches('%').parse().unwrap_or(0);
        let product = n * i64::from(total);
        let v = if round_up {
            (product + 99).div_euclid(100)
        } else {
            product.div_euclid(100)
        };
        i32::try_from(v).unwrap_or(i32::MAX)
    };
    match value {
        Some(IntOrString::Int(i)) => *i,
        Some(IntOrString::String(s)) => percent(s),
        None => percent(default),
    }
}

/// maxSurge and maxUnavailable resolved against the replicas: surge rounded up, unavailable
/// rounded down, and unavailable 1 when both would be 0 (a rollout must be able to move).
pub fn resolve_fenceposts(d: &Deployment) -> (i32, i32) {
    let desired = replicas_of(d);
    let rolling = d
        .spec
        .as_ref()
        .and_then(|s| s.strategy.as_ref())
        .and_then(|s| s.rolling_update.as_ref());
    let surge = scaled_value(
        rolling.and_then(|r| r.max_surge.as_ref()),
        desired,
        true,
        "25%",
    );
    let unavailable = scaled_value(
        rolling.and_then(|r| r.max_unavailable.as_ref()),
        desired,
        false,
        "25%",
    );
    if surge == 0 && unavailable == 0 {
        (0, 1)
    } else {
        (surge, unavailable)
    }
}

/// maxSurge (0 for Recreate).
pub fn max_surge(d: &Deployment) -> i32 {
    if is_recreate(d) {
        0
    } else {
        resolve_fenceposts(d).0
    }
}

/// maxUnavailable, at most the replicas (0 for Recreate or no replicas).
pub fn max_unavailable(d: &Deployment) -> i32 {
    let replicas = replicas_of(d);
    if is_recreate(d) || replicas == 0 {
        return 0;
    }
    resolve_fenceposts(d).1.min(replicas)
}

/// The revision annotation of an object, 0 when absent or not a number.
pub fn revision(annotations: Option<&BTreeMap<String, String>>) -> i64 {
    annotations
        .and_then(|a| a.get(REVISION))
        .and_then(|r| r.parse().ok())
        .unwrap_or(0)
}

/// The highest revision among `rss`.
pub fn max_revision(rss: &[ReplicaSet]) -> i64 {
    rss.iter()
        .map(|rs| revision(rs.metadata.annotations.as_ref()))
        .max()
        .unwrap_or(0)
}

fn annotation_i32(rs: &ReplicaSet, key: &str) -> Option<i32> {
    rs.metadata.annotations.as_ref()?.get(key)?.parse().ok()
}

/// The desired-replicas annotation.
pub fn desired_annotation(rs: &ReplicaSet) -> Option<i32> {
    annotation_i32(rs, DESIRED_REPLICAS)
}

/// Whether the replica annotations differ from `desired` and `max`.
pub fn replicas_annotations_need_update(rs: &ReplicaSet, desired: i32, max: i32) -> bool {
    annotation_i32(rs, DESIRED_REPLICAS) != Some(desired)
        || annotation_i32(rs, MAX_REPLICAS) != Some(max)
}

/// Sets the replica annotations; whether anything changed.
pub fn set_replicas_annotations(rs: &mut ReplicaSet, desired: i32, max: i32) -> bool {
    if !replicas_annotations_need_update(rs, desired, max) {
        return false;
    }
    let a = rs.metadata.annotations.get_or_insert_with(BTreeMap::new);
    a.insert(DESIRED_REPLICAS.into(), desired.to_string());
    a.insert(MAX_REPLICAS.into(), max.to_string());
    true
}

/// Copies the Deployment's annotations (but the ones Deployments manage) to the ReplicaSet,
/// raises its revision to `new_revision` (remembering the old one in the revision history),
/// and for a new ReplicaSet sets the replica annotations. Whether anything changed.
pub fn set_new_rs_annotations(
    d: &Deployment,
    rs: &mut ReplicaSet,
    new_revision: i64,
    exists: bool,
) -> bool {
    let mut changed = false;
    let annotations = rs.metadata.annotations.get_or_insert_with(BTreeMap::new);
    for (k, v) in d.metadata.annotations.iter().flatten() {
        if NOT_COPIED.contains(&k.as_str()) {
            continue;
        }
        if annotations.get(k) != Some(v) {
            annotations.insert(k.clone(), v.clone());
            changed = true;
        }
    }
    let old = annotations.get(REVISION).cloned().unwrap_or_default();
    let old_number: i64 = old.parse().unwrap_or(0);
    if old_number < new_revision {
        annotations.insert(REVISION.into(), new_revision.to_string());
        changed = true;
        if !old.is_empty() {
            let history = match annotations.get(REVISION_HISTORY) {
                Some(h) if !h.is_empty() => format!("{h},{old}"),
                _ => old,
            };
            let history = if history.len() > MAX_REVISION_HISTORY_CHARS {
                let cut = history.len() - MAX_REVISION_HISTORY_CHARS;
                let start = history[cut..].find(',').map_or(cut, |i| cut + i + 1);
                history[start..].to_owned()
            } else {
                history
            };
            annotations.insert(REVISION_HISTORY.into(), history);
        }
    }
    if !exists {
        let replicas = replicas_of(d);
        changed |= set_replicas_annotations(rs, replicas, replicas + max_surge(d));
    }
    changed
}

/// The revision a rollback asks for (Kubernetes' `getRollbackTo`): the annotation's number;
/// none when it is absent, empty or not a number.
pub fn rollback_to(d: &Deployment) -> Option<i64> {
    let value = d.metadata.annotations.as_ref()?.get(ROLLBACK_TO)?;
    value.parse().ok()
}

/// The second highest revision among `rss` (Kubernetes' `LastRevision`): the one before the
/// current; 0 when there is none.
pub fn last_revision(rss: &[&ReplicaSet]) -> i64 {
    let (mut max, mut second) = (0, 0);
    for rs in rss {
        let Some(v) = rs
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(REVISION))
            .and_then(|r| r.parse::<i64>().ok())
        else {
            continue;
        };
        if v >= max {
            second = max;
            max = v;
        } else if v > second {
            second = v;
        }
    }
    second
}

/// Rolls the Deployment's template back to the ReplicaSet's (without the pod-template-hash
/// label) and its annotations to the ReplicaSet's, keeping the Deployment's own
/// (Kubernetes' `SetFromReplicaSetTemplate` and `SetDeploymentAnnotationsTo`).
pub fn set_from_replicaset(d: &mut Deployment, rs: &ReplicaSet) {
    let mut template = rs
        .spec
        .as_ref()
        .and_then(|s| s.template.clone())
        .unwrap_or_default();
    if let Some(labels) = template.metadata.as_mut().and_then(|m| m.labels.as_mut()) {
        labels.remove(POD_TEMPLATE_HASH);
    }
    d.spec.get_or_insert_with(Default::default).template = template;
    let mut annotations: BTreeMap<String, String> = d
        .metadata
        .annotations
        .take()
        .unwrap_or_default()
        .into_iter()
        .filter(|(k, _)| NOT_COPIED.contains(&k.as_str()))
        .collect();
    for (k, v) in rs.metadata.annotations.iter().flatten() {
        if !NOT_COPIED.contains(&k.as_str()) {
            annotations.insert(k.clone(), v.clone());
        }
    }
    d.metadata.annotations = Some(annotations);
}

/// Orders by creation time, then name.
pub fn by_creation(a: &ReplicaSet, b: &ReplicaSet) -> Ordering {
    let t = |rs: &ReplicaSet| rs.metadata.creation_timestamp.as_ref().map(|t| t.0);
    t(a).cmp(&t(b))
        .then_with(|| a.metadata.name.cmp(&b.metadata.name))
}

/// Orders by revision, then creation time.
pub fn by_revision(a: &ReplicaSet, b: &ReplicaSet) -> Ordering {
    revision(a.metadata.annotations.as_ref())
        .cmp(&revision(b.metadata.annotations.as_ref()))
        .then_with(|| by_creation(a, b))
}

/// The new ReplicaSet: the oldest whose template equals the Deployment's but for the hash.
pub fn find_new(d: &Deployment, rss: &[ReplicaSet]) -> Option<ReplicaSet> {
    let mut sorted: Vec<&ReplicaSet> = rss.iter().collect();
    sorted.sort_by(|a, b| by_creation(a, b));
    let template = d.spec.as_ref().map(|s| &s.template);
    sorted
        .into_iter()
        .find(|rs| equal_ignore_hash(rs.spec.as_ref().and_then(|s| s.template.as_ref()), template))
        .cloned()
}

/// The sum of `spec.replicas`.
pub fn total_replicas(rss: &[&ReplicaSet]) -> i32 {
    rss.iter().map(|rs| rs_replicas(rs)).sum()
}

/// The pods the ReplicaSets may have at once: each counts as the larger of its
/// `spec.replicas` and its `status.replicas`, so a ReplicaSet that was scaled down but whose
/// surplus pods are not yet being deleted still counts them.
pub fn pods_in_flight(rss: &[&ReplicaSet]) -> i32 {
    rss.iter()
        .map(|rs| rs_replicas(rs).max(rs_actual(rs)))
        .sum()
}

/// How many replicas the new ReplicaSet may have now: for RollingUpdate, as many more as
/// maxSurge allows above the replicas, up to the replicas; for Recreate, the replicas.
///
/// Kubernetes counts the ReplicaSets' `spec.replicas` only, so between an old ReplicaSet's
/// scale-down and its controller deleting the pods, the new ReplicaSet's pods can already
/// exist beside them: more than replicas + maxSurge pods for a moment, and for longer when a
/// new controller-manager leader takes over with both writes outstanding. kore counts what
/// `status.replicas` still reports too ([`pods_in_flight`]): the new ReplicaSet grows once
/// the old pods are gone.
pub fn new_rs_new_replicas(d: &Deployment, all: &[&ReplicaSet], new: &ReplicaSet) -> i32 {
    let replicas = replicas_of(d);
    if is_recreate(d) {
        return replicas;
    }
    let current = pods_in_flight(all);
    let max_total = replicas + max_surge(d);
    if current >= max_total {
        return rs_replicas(new);
    }
    let up = (max_total - current).min(replicas - rs_replicas(new));
    rs_replicas(new) + up
}

/// Whether the new ReplicaSet alone runs the Deployment: sized at the replicas, annotated so,
/// and all of them available.
pub fn is_saturated(d: &Deployment, rs: Option<&ReplicaSet>) -> bool {
    let Some(rs) = rs else { return false };
    let replicas = replicas_of(d);
    rs_replicas(rs) == replicas
        && desired_annotation(rs) == Some(replicas)
        && rs_available(rs) == replicas
}

/// The ReplicaSet's share of a scaling by `to_add` (positive or negative), of which `added`
/// is already handed out: its size in proportion to the Deployment's old maximum.
pub fn proportion(rs: &ReplicaSet, d: &Deployment, to_add: i32, added: i32) -> i32 {
    if rs_replicas(rs) == 0 || to_add == 0 || to_add == added {
        return 0;
    }
    let fraction = fraction(rs, d);
    let allowed = to_add - added;
    if to_add > 0 {
        fraction.min(allowed)
    } else {
        fraction.max(allowed)
    }
}

fn fraction(rs: &ReplicaSet, d: &Deployment) -> i32 {
    let replicas = replicas_of(d);
    if replicas == 0 {
        return -rs_replicas(rs);
    }
    let deployment_replicas = replicas + max_surge(d);
    let annotated = annotation_i32(rs, MAX_REPLICAS)
        .unwrap_or_else(|| d.status.as_ref().and_then(|s| s.replicas).unwrap_or(0));
    if annotated == 0 {
        return 0;
    }
    let size = f64::from(rs_replicas(rs)) * f64::from(deployment_replicas) / f64::from(annotated);
    #[allow(
        clippy::cast_possible_truncation,
        reason = "a replica count fits an i32"
    )]
    let rounded = size.round() as i32;
    rounded - rs_replicas(rs)
}

/// Whether `progressDeadlineSeconds` is set (and not "never").
pub fn progress_deadline(d: &Deployment) -> Option<i32> {
    d.spec
        .as_ref()
        .and_then(|s| s.progress_deadline_seconds)
        .filter(|s| *s != i32::MAX)
}

/// `revisionHistoryLimit`, if one is set.
pub fn revision_history_limit(d: &Deployment) -> Option<i32> {
    d.spec
        .as_ref()
        .and_then(|s| s.revision_history_limit)
        .filter(|s| *s != i32::MAX)
}

/// Whether the rollout is done: every replica updated and available, nothing else left,
/// and the latest spec observed.
pub fn is_complete(d: &Deployment, s: &DeploymentStatus) -> bool {
    let replicas = replicas_of(d);
    s.updated_replicas.unwrap_or(0) == replicas
        && s.replicas.unwrap_or(0) == replicas
        && s.available_replicas.unwrap_or(0) == replicas
        && s.observed_generation >= d.metadata.generation
}

/// Whether the rollout moved since `d`'s status: more updated, fewer old, more ready or
/// more available replicas.
pub fn is_progressing(d: &Deployment, new: &DeploymentStatus) -> bool {
    let old = d.status.clone().unwrap_or_default();
    let n = |v: Option<i32>| v.unwrap_or(0);
    let old_old = n(old.replicas) - n(old.updated_replicas);
    let new_old = n(new.replicas) - n(new.updated_replicas);
    n(new.updated_replicas) > n(old.updated_replicas)
        || new_old < old_old
        || n(new.ready_replicas) > n(old.ready_replicas)
        || n(new.available_replicas) > n(old.available_replicas)
}

/// The condition of `type_`.
pub fn condition<'a>(s: &'a DeploymentStatus, type_: &str) -> Option<&'a DeploymentCondition> {
    s.conditions.as_ref()?.iter().find(|c| c.type_ == type_)
}

/// A new condition, its times now.
pub fn new_condition(
    type_: &str,
    status: &str,
    reason: &str,
    message: String,
    now: Timestamp,
) -> DeploymentCondition {
    DeploymentCondition {
        type_: type_.into(),
        status: status.into(),
        reason: Some(reason.into()),
        message: Some(message),
        last_transition_time: Some(Time(now)),
        last_update_time: Some(Time(now)),
    }
}

/// Sets a condition: unchanged if one with the same status and reason exists; otherwise it
/// replaces the old one (keeping its transition time if the status is the same).
pub fn set_condition(s: &mut DeploymentStatus, mut c: DeploymentCondition) {
    let conditions = s.conditions.get_or_insert_with(Vec::new);
    if let Some(current) = conditions.iter().find(|x| x.type_ == c.type_) {
        if current.status == c.status && current.reason == c.reason {
            return;
        }
        if current.status == c.status {
            c.last_transition_time = current.last_transition_time.clone();
        }
    }
    conditions.retain(|x| x.type_ != c.type_);
    conditions.push(c);
}

/// Removes the condition of `type_`.
pub fn remove_condition(s: &mut DeploymentStatus, type_: &str) {
    if let Some(c) = s.conditions.as_mut() {
        c.retain(|x| x.type_ != type_);
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::apps::v1::{DeploymentSpec, DeploymentStrategy, RollingUpdateDeployment};

    use super::*;

    fn deployment(replicas: i32, surge: IntOrString, unavailable: IntOrString) -> Deployment {
        Deployment {
            spec: Some(DeploymentSpec {
                replicas: Some(replicas),
                strategy: Some(DeploymentStrategy {
                    type_: Some("RollingUpdate".into()),
                    rolling_update: Some(RollingUpdateDeployment {
                        max_surge: Some(surge),
                        max_unavailable: Some(unavailable),
                    }),
                }),
                ..DeploymentSpec::default()
            }),
            ..Deployment::default()
        }
    }

    #[test]
    fn surge_rounds_up_and_unavailable_rounds_down() {
        let pct = |s: &str| IntOrString::String(s.into());
        assert_eq!(
            resolve_fenceposts(&deployment(10, pct("25%"), pct("25%"))),
            (3, 2)
        );
        assert_eq!(
            resolve_fenceposts(&deployment(3, pct("10%"), pct("10%"))),
            (1, 0)
        );
        assert_eq!(
            resolve_fenceposts(&deployment(3, IntOrString::Int(0), IntOrString::Int(0))),
            (0, 1),
            "a rollout must be able to move"
        );
        assert_eq!(
            max_unavailable(&deployment(2, IntOrString::Int(0), IntOrString::Int(5))),
            2
        );
    }

    #[test]
    fn the_hash_is_stable_safe_and_changes_with_collisions() {
        let t = PodTemplateSpec::default();
        let h = pod_template_hash(&t, None);
        assert_eq!(h, pod_template_hash(&t, None));
        assert!(h.bytes().all(|b| SAFE_ALPHABET.contains(&b)) && !h.is_empty() && h.len() <= 10);
        assert_ne!(h, pod_template_hash(&t, Some(1)));
    }

    #[test]
    fn a_rollback_raises_the_revision_and_keeps_history() {
        let d = deployment(3, IntOrString::Int(1), IntOrString::Int(0));
        let mut rs = ReplicaSet::default();
        rs.metadata.annotations = Some(BTreeMap::from([(REVISION.to_owned(), "1".to_owned())]));
        assert!(set_new_rs_annotations(&d, &mut rs, 3, true));
        let a = rs.metadata.annotations.clone().unwrap_or_default();
        assert_eq!(a.get(REVISION).map(String::as_str), Some("3"));
        assert_eq!(a.get(REVISION_HISTORY).map(String::as_str), Some("1"));
        assert!(
            !set_new_rs_annotations(&d, &mut rs, 3, true),
            "nothing more to change"
        );
    }

    #[test]
    fn the_last_revision_is_the_second_highest_and_a_rollback_keeps_managed_annotations() {
        let rs = |revision: Option<&str>, extra: &[(&str, &str)]| {
            let mut rs = ReplicaSet::default();
            let mut a: BTreeMap<String, String> = extra
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect();
            if let Some(r) = revision {
                a.insert(REVISION.to_owned(), r.to_owned());
            }
            rs.metadata.annotations = Some(a);
            rs
        };
        let (a, b, c, none) = (
            rs(Some("4"), &[]),
            rs(Some("7"), &[]),
            rs(Some("2"), &[]),
            rs(None, &[]),
        );
        assert_eq!(last_revision(&[&a, &b, &c, &none]), 4);
        assert_eq!(last_revision(&[&b]), 0, "no revision before the only one");

        let mut d = deployment(3, IntOrString::Int(1), IntOrString::Int(0));
        d.metadata.annotations = Some(BTreeMap::from([
            (REVISION.to_owned(), "7".to_owned()),
            (ROLLBACK_TO.to_owned(), "4".to_owned()),
            ("team".to_owned(), "new".to_owned()),
        ]));
        assert_eq!(rollback_to(&d), Some(4));
        let old = rs(Some("4"), &[("team", "old"), (MAX_REPLICAS, "4")]);
        set_from_replicaset(&mut d, &old);
        let got = d.metadata.annotations.clone().unwrap_or_default();
        assert_eq!(got.get("team").map(String::as_str), Some("old"));
        assert_eq!(got.get(REVISION).map(String::as_str), Some("7"), "kept");
        assert_eq!(
            got.get(MAX_REPLICAS),
            None,
            "not copied from the ReplicaSet"
        );
        d.metadata.annotations = Some(BTreeMap::from([(ROLLBACK_TO.to_owned(), "x".to_owned())]));
        assert_eq!(rollback_to(&d), None, "not a number: ignored");
    }
}
