//! A StatefulSet's ControllerRevisions (Kubernetes' `getStatefulSetRevisions`,
//! `newRevision`, `ApplyRevision`, `truncateHistory`): each pod template the set has had is
//! a revision `<set>-<hash>` whose `data` is `{"spec":{"template":{…,"$patch":"replace"}}}`,
//! numbered one above the highest. Its name is what pods carry in their
//! `controller-revision-hash` label and what `status.currentRevision` / `updateRevision` say.

use std::collections::BTreeSet;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::{ControllerRevision, StatefulSet};
use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use serde_json::{Value, json};

use crate::deployment::util::pod_template_hash;
use crate::ownership::controller_reference;
use crate::pods;

use super::identity::{REVISION_LABEL, revision_of};

/// How many names are tried, each with the collision count one higher, before a sync gives
/// up on creating a revision.
pub const MAX_COLLISIONS: i32 = 16;

/// The revision `data` of a template: a strategic merge patch that puts it back.
pub fn revision_data(template: &PodTemplateSpec) -> Value {
    let mut template =
        serde_json::to_value(template).expect("a PodTemplateSpec always serializes to JSON");
    if let Some(obj) = template.as_object_mut() {
        obj.insert("$patch".into(), "replace".into());
    }
    json!({"spec": {"template": template}})
}

/// The template a revision holds (`ApplyRevision` for what a StatefulSet revision stores).
pub fn template_of(revision: &ControllerRevision) -> Option<PodTemplateSpec> {
    let mut template = revision.data.as_ref()?.0.pointer("/spec/template")?.clone();
    if let Some(obj) = template.as_object_mut() {
        obj.remove("$patch");
    }
    serde_json::from_value(template).ok()
}

/// The revision of the set's current template under `collision_count`, numbered `number`,
/// not yet created (`newRevision`): labels the template's plus the hash, annotations the
/// set's, a controller reference to the set.
pub fn new_revision(set: &StatefulSet, number: i64, collision_count: i32) -> ControllerRevision {
    let template = set.spec.clone().unwrap_or_default().template;
    let hash = pod_template_hash(&template, Some(collision_count));
    let mut labels = template
        .metadata
        .as_ref()
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    labels.insert(REVISION_LABEL.into(), hash.clone());
    ControllerRevision {
        metadata: ObjectMeta {
            name: Some(format!(
                "{}-{hash}",
                set.metadata.name.as_deref().unwrap_or_default()
            )),
            namespace: set.metadata.namespace.clone(),
            labels: Some(labels),
            annotations: set.metadata.annotations.clone(),
            owner_references: Some(vec![controller_reference::<StatefulSet>(&set.metadata)]),
            ..ObjectMeta::default()
        },
        data: Some(RawExtension(revision_data(&template))),
        revision: number,
    }
}

/// Whether two revisions hold the same template.
pub fn same_data(a: &ControllerRevision, b: &ControllerRevision) -> bool {
    a.data.as_ref().map(|d| &d.0) == b.data.as_ref().map(|d| &d.0)
}

/// Whether `existing` is this set's revision of the same data (a create that found it
/// already there raced with the cache, not with another object).
pub fn is_ours(existing: &ControllerRevision, wanted: &ControllerRevision) -> bool {
    let uid = wanted
        .metadata
        .owner_references
        .as_ref()
        .and_then(|r| r.first())
        .map(|r| r.uid.as_str());
    pods::controller_ref(&existing.metadata).map(|r| r.uid.as_str()) == uid
        && same_data(existing, wanted)
}

/// Sorts revisions as Kubernetes does: by number, then creation time, then name.
pub fn sort(revisions: &mut [Arc<ControllerRevision>]) {
    revisions.sort_by(|a, b| {
        a.revision
            .cmp(&b.revision)
            .then_with(|| {
                let t = |r: &ControllerRevision| r.metadata.creation_timestamp.clone().map(|t| t.0);
                t(a).cmp(&t(b))
            })
            .then_with(|| a.metadata.name.cmp(&b.metadata.name))
    });
}

/// The revisions (of the sorted `revisions`) to delete so that at most `limit` are kept
/// besides the live ones: the current and update revisions and every revision a pod uses
/// (`truncateHistory`); the lowest go first. A negative limit keeps everything.
pub fn to_truncate<'a>(
    revisions: &'a [Arc<ControllerRevision>],
    pods: &[Arc<Pod>],
    live: [&str; 2],
    limit: i32,
) -> Vec<&'a Arc<ControllerRevision>> {
    let mut used: BTreeSet<&str> = pods.iter().map(|p| revision_of(p)).collect();
    used.extend(live);
    let history: Vec<&Arc<ControllerRevision>> = revisions
        .iter()
        .filter(|r| !used.contains(r.metadata.name.as_deref().unwrap_or_default()))
        .collect();
    let Ok(limit) = usize::try_from(limit) else {
        return Vec::new();
    };
    let excess = history.len().saturating_sub(limit);
    history.into_iter().take(excess).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(image: &str) -> StatefulSet {
        serde_json::from_value(json!({
            "metadata": {"name": "web", "namespace": "ns", "uid": "u"},
            "spec": {
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "c", "image": image}]},
                },
            },
        }))
        .expect("a StatefulSet")
    }

    #[test]
    fn a_revision_holds_the_template_and_is_named_by_its_hash() {
        let s = set("a");
        let r = new_revision(&s, 1, 0);
        let name = r.metadata.name.clone().unwrap_or_default();
        let hash = r
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(REVISION_LABEL))
            .cloned()
            .unwrap_or_default();
        assert_eq!(name, format!("web-{hash}"));
        assert_eq!(template_of(&r), s.spec.as_ref().map(|s| s.template.clone()));
        assert!(same_data(&r, &new_revision(&s, 2, 0)));
        assert!(!same_data(&r, &new_revision(&set("b"), 2, 0)));
        assert_ne!(
            new_revision(&s, 1, 1).metadata.name,
            r.metadata.name,
            "a collision count gives another name"
        );
    }

    #[test]
    fn history_keeps_live_revisions_and_the_newest_others() {
        let s = set("a");
        let revs: Vec<Arc<ControllerRevision>> = (1..=4)
            .map(|n| {
                let mut r = new_revision(&s, n, 0);
                r.metadata.name = Some(format!("web-{n}"));
                Arc::new(r)
            })
            .collect();
        let gone = to_truncate(&revs, &[], ["web-4", "web-4"], 1);
        let names: Vec<_> = gone
            .iter()
            .filter_map(|r| r.metadata.name.clone())
            .collect();
        assert_eq!(names, ["web-1", "web-2"]);
        assert!(to_truncate(&revs, &[], ["web-4", "web-3"], -1).is_empty());
    }
}
