//! The DaemonSet controller: one pod per eligible node.
//!
//! A sync (Kubernetes' `syncDaemonSet`, reduced) claims the active pods of the namespace
//! that the selector matches, groups them by node (`spec.nodeName`, or for a pod not yet
//! bound the node its `matchFields metadata.name` affinity pins it to) and, for each node:
//! creates a pod where the DaemonSet should run and has none, deletes the extras where
//! there are several (the oldest stays), and deletes the pods of a node it must not run on
//! (a NoExecute taint it does not tolerate, a selector or affinity that no longer holds).
//! A node with an untolerated NoSchedule taint gets no new pod but keeps a running one.
//!
//! Pods are made from the template with the `controller-revision-hash` label, Kubernetes'
//! default DaemonSet tolerations added, and a required node affinity of one term
//! `matchFields metadata.name In [node]`, so the scheduler binds each to its node.
//! RollingUpdate deletes pods of an old template hash: the unavailable ones at once, the
//! available ones while fewer than `maxUnavailable` pods are unavailable. With `maxSurge`,
//! a node gets its new pod first (at once when its old pod is not available, else while
//! fewer than `maxSurge` nodes are surging) and the old pod goes once the new one is
//! available. OnDelete leaves them until they are deleted by someone else.
//!
//! Each template the DaemonSet has had is kept as a ControllerRevision `<ds>-<hash>`
//! (Kubernetes' `constructHistory`): `data` is the template as a replacing patch
//! `{"spec":{"template":{…,"$patch":"replace"}}}`, `revision` one above the highest, labels the
//! template's plus the hash. Going back to an older template raises that revision's number
//! instead of creating another; revisions beyond `revisionHistoryLimit` (10) that no pod
//! uses are deleted, lowest first. A name taken by another object raises
//! `status.collisionCount`, so the next sync hashes differently. The status has desiredNumberScheduled,
//! currentNumberScheduled, numberMisscheduled, numberReady, numberAvailable,
//! numberUnavailable, updatedNumberScheduled and observedGeneration.

use std::collections::HashMap;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet, DaemonSetStatus};
use k8s_openapi::api::core::v1::{
    Affinity, Node, NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, Pod,
    PodTemplateSpec, Taint, Toleration,
};
use k8s_openapi::jiff::Timestamp;
use kore_runtime::controller::{Action, ReconcileError, Reconciler, Request};
use kore_runtime::events::{EventType, Recorder};
use kore_runtime::{CachedClient, ObjectKey, Store};
use kube::Resource;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};

use crate::deployment::util::{pod_template_hash, scaled_value};
use crate::error::{SyncError, message, status_code};
use crate::expectations::Expectations;
use crate::ownership::{claim, controller_reference, recheck_owner};
use crate::pods::{self, is_available, is_ready};
use crate::replicaset::{
    REASON_FAILED_CREATE, REASON_FAILED_DELETE, REASON_SUCCESSFUL_CREATE, REASON_SUCCESSFUL_DELETE,
    slow_start_batch,
};
use crate::{BY_CONTROLLER, BY_NAMESPACE, ORPHANS_BY_NAMESPACE, publish, selector};

/// A node's running pods under a surging rolling update: at most one of the current
/// template (`new`) and one of an older one (`old`) are kept, the others deleted.
#[derive(Debug)]
struct SurgeNode {
    name: String,
    should_run: bool,
    new: Option<Arc<Pod>>,
    old: Option<Arc<Pod>>,
    /// Pods deleted here: extras, and the old pod once the new one is available or the old
    /// one is not ready.
    delete: Vec<Arc<Pod>>,
    /// Whether there were extras (the node then counts as surging until they are gone).
    excess: bool,
}

/// Kubernetes' `podsShouldBeOnNode` with surge allowed: of `running` (oldest first) the
/// oldest pod with the current hash and the oldest with another stay; both stay only while
/// the old one is ready and the new one not yet available.
fn surge_node(
    name: String,
    should_run: bool,
    running: Vec<Arc<Pod>>,
    hash: &str,
    min_ready: i32,
    now: Timestamp,
) -> SurgeNode {
    let mut node = SurgeNode {
        name,
        should_run,
        new: None,
        old: None,
        delete: Vec::new(),
        excess: false,
    };
    for p in running {
        let slot = if hash_of(&p) == Some(hash) {
            &mut node.new
        } else {
            &mut node.old
        };
        if slot.is_none() {
            *slot = Some(p);
        } else {
            node.delete.push(p);
            node.excess = true;
        }
    }
    if let (Some(new), Some(old)) = (&node.new, &node.old)
        && (!is_ready(old) || is_available(new, min_ready, now))
    {
        node.delete.push(old.clone());
        node.old = None;
    }
    node
}

/// Kubernetes' `rollingUpdate` with maxSurge: a node whose old pod is not available gets
/// its new pod at once; nodes with an available old pod get one while fewer than
/// `max_surge` nodes are waiting for a new pod to become available; an old pod on a node
/// it should no longer run on is deleted (not available: at once; available: only while
/// more pods are available than `desired`). Returns the nodes to create a pod on and the
/// pods to delete.
fn surge_update(
    nodes: &[SurgeNode],
    max_surge: i32,
    desired: i32,
    min_ready: i32,
    now: Timestamp,
) -> (Vec<String>, Vec<Arc<Pod>>) {
    let mut delete = Vec::new();
    let mut should_not_run = Vec::new();
    let mut allowed = Vec::new();
    let mut candidates = Vec::new();
    let mut surging = 0;
    let mut available = 0;
    for node in nodes {
        if node.excess {
            surging += 1;
            continue;
        }
        if let Some(p) = node.old.as_ref().or(node.new.as_ref())
            && is_available(p, min_ready, now)
        {
            available += 1;
        }
        match (&node.new, &node.old) {
            (_, None) => {}
            (None, Some(old)) => match (is_available(old, min_ready, now), node.should_run) {
                (false, false) => delete.push(old.clone()),
                (false, true) => allowed.push(node.name.clone()),
                (true, false) => should_not_run.push(old.clone()),
                (true, true) => candidates.push(node.name.clone()),
            },
            // The new pod is not available yet (else the old one was deleted already).
            (Some(_), Some(_)) => surging += 1,
        }
    }
    let deletable = usize::try_from(available - desired).unwrap_or(0);
    delete.extend(should_not_run.into_iter().take(deletable));
    let remaining = usize::try_from(max_surge - surging)
        .unwrap_or(0)
        .min(candidates.len());
    allowed.extend(candidates.into_iter().take(remaining));
    (allowed, delete)
}

/// The controller's name (`--controllers`), as kube-controller-manager 1.33 names it.
pub const NAME: &str = "daemonset-controller";

/// At most this many pods are created, and this many deleted, per sync (the DaemonSet
/// controller's `BurstReplicas`).
pub const BURST_REPLICAS: usize = 250;

/// Event reason: a failed daemon pod is deleted so that the node gets a new one.
pub const REASON_FAILED_DAEMON_POD: &str = "FailedDaemonPod";

/// The first wait before a node's next failed daemon pod is deleted; it doubles per failure.
pub const FAILED_POD_BACKOFF_INITIAL: Duration = Duration::from_secs(1);
/// The longest wait between deletions of a node's failed daemon pods.
pub const FAILED_POD_BACKOFF_MAX: Duration = Duration::from_secs(15 * 60);

/// Per DaemonSet and node, when a failed pod was last deleted and how long to wait before
/// the next (Kubernetes' `failedPodsBackoff`): a kubelet that rejects the pod every time is
/// not fought in a hot loop. An entry idle for twice the maximum wait starts over.
#[derive(Debug, Default)]
struct FailedPodsBackoff {
    entries: Mutex<HashMap<String, (Timestamp, Duration)>>,
}

impl FailedPodsBackoff {
    /// Whether a failed pod under `key` may be deleted at `now`; if so the wait doubles,
    /// otherwise returns how long is left.
    fn try_next(&self, key: &str, now: Timestamp) -> Result<(), Duration> {
        let mut entries = self
            .entries
            .lock()
            .expect("the backoff lock is never poisoned");
        match entries.get_mut(key) {
            Some((last, delay)) => {
                let since = last.duration_until(now).unsigned_abs();
                if since < *delay {
                    return Err(*delay - since);
                }
                *delay = if since > 2 * FAILED_POD_BACKOFF_MAX {
                    FAILED_POD_BACKOFF_INITIAL
                } else {
                    (*delay * 2).min(FAILED_POD_BACKOFF_MAX)
                };
                *last = now;
            }
            None => {
                entries.insert(key.to_owned(), (now, FAILED_POD_BACKOFF_INITIAL));
            }
        }
        Ok(())
    }
}

/// The label carrying the hash of the template a pod was made from.
pub const REVISION_HASH_LABEL: &str = "controller-revision-hash";

/// Reconciles DaemonSets; see the [module docs](self).
pub struct DaemonSetReconciler {
    client: kube::Client,
    pods: Store<Pod>,
    nodes: Store<Node>,
    revisions: Store<ControllerRevision>,
    daemonsets: CachedClient<DaemonSet>,
    expectations: Expectations,
    failed_pods: FailedPodsBackoff,
    recorder: Recorder,
}

impl std::fmt::Debug for DaemonSetReconciler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DaemonSetReconciler")
            .finish_non_exhaustive()
    }
}

/// Where a DaemonSet may run on a node (Kubernetes' `NodeShouldRunDaemonPod`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Placement {
    /// A new pod may be placed there.
    pub should_run: bool,
    /// A pod already there may stay.
    pub should_continue_running: bool,
}

/// Kubernetes' default tolerations of DaemonSet pods (`AddOrUpdateDaemonPodTolerations`).
pub fn default_tolerations(host_network: bool) -> Vec<Toleration> {
    let mut keys = vec![
        ("node.kubernetes.io/not-ready", "NoExecute"),
        ("node.kubernetes.io/unreachable", "NoExecute"),
        ("node.kubernetes.io/disk-pressure", "NoSchedule"),
        ("node.kubernetes.io/memory-pressure", "NoSchedule"),
        ("node.kubernetes.io/pid-pressure", "NoSchedule"),
        ("node.kubernetes.io/unschedulable", "NoSchedule"),
    ];
    if host_network {
        keys.push(("node.kubernetes.io/network-unavailable", "NoSchedule"));
    }
    keys.into_iter()
        .map(|(key, effect)| Toleration {
            key: Some(key.into()),
            operator: Some("Exists".into()),
            effect: Some(effect.into()),
            ..Toleration::default()
        })
        .collect()
}

/// The template's tolerations with the default ones added (those already there kept).
fn tolerations_of(template: &PodTemplateSpec) -> Vec<Toleration> {
    let spec = template.spec.clone().unwrap_or_default();
    let mut all = spec.tolerations.unwrap_or_default();
    for t in default_tolerations(spec.host_network.unwrap_or(false)) {
        if !all.iter().any(|o| o.key == t.key && o.effect == t.effect) {
            all.push(t);
        }
    }
    all
}

/// Whether `toleration` tolerates `taint` (Kubernetes' `ToleratesTaint`).
pub(crate) fn tolerates(toleration: &Toleration, taint: &Taint) -> bool {
    if let Some(effect) = toleration.effect.as_deref()
        && !effect.is_empty()
        && effect != taint.effect
    {
        return false;
    }
    match toleration.operator.as_deref().unwrap_or("Equal") {
        "Exists" => toleration
            .key
            .as_deref()
            .is_none_or(|k| k.is_empty() || k == taint.key),
        _ => {
            toleration.key.as_deref() == Some(taint.key.as_str())
                && toleration.value.as_deref().unwrap_or_default()
                    == taint.value.as_deref().unwrap_or_default()
        }
    }
}

fn requirement_holds(req: &NodeSelectorRequirement, value: Option<&str>) -> bool {
    let values = req.values.as_deref().unwrap_or_default();
    match req.operator.as_str() {
        "In" => value.is_some_and(|v| values.iter().any(|x| x == v)),
        "NotIn" => value.is_none_or(|v| !values.iter().any(|x| x == v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        "Gt" | "Lt" => {
            let (Some(v), Some(bound)) = (
                value.and_then(|v| v.parse::<i64>().ok()),
                values.first().and_then(|b| b.parse::<i64>().ok()),
            ) else {
                return false;
            };
            if req.operator == "Gt" {
                v > bound
            } else {
                v < bound
            }
        }
        _ => false,
    }
}

/// Whether `node` matches one of `selector`'s terms (labels and `metadata.name` fields).
fn node_selector_matches(selector: &NodeSelector, node: &Node) -> bool {
    let labels = node.metadata.labels.as_ref();
    let name = node.metadata.name.as_deref();
    selector.node_selector_terms.iter().any(|term| {
        let exprs = term.match_expressions.as_deref().unwrap_or_default();
        let fields = term.match_fields.as_deref().unwrap_or_default();
        (!exprs.is_empty() || !fields.is_empty())
            && exprs.iter().all(|r| {
                requirement_holds(r, labels.and_then(|l| l.get(&r.key)).map(String::as_str))
            })
            && fields.iter().all(|r| {
                let value = (r.key == "metadata.name").then_some(name).flatten();
                requirement_holds(r, value)
            })
    })
}

/// Where pods of `template` may run on `node`: its nodeSelector and required node affinity
/// must hold, and every NoSchedule (for new pods) and NoExecute (for any) taint must be
/// tolerated, counting the default DaemonSet tolerations.
pub fn placement(template: &PodTemplateSpec, node: &Node) -> Placement {
    let spec = template.spec.clone().unwrap_or_default();
    let labels = node.metadata.labels.as_ref();
    let selected = spec
        .node_selector
        .iter()
        .flatten()
        .all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v));
    let affinity = spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|n| {
            n.required_during_scheduling_ignored_during_execution
                .as_ref()
        })
        .is_none_or(|s| node_selector_matches(s, node));
    if !(selected && affinity) {
        return Placement {
            should_run: false,
            should_continue_running: false,
        };
    }
    let tolerations = tolerations_of(template);
    let untolerated = |effect: &str| {
        node.spec
            .as_ref()
            .and_then(|s| s.taints.as_ref())
            .into_iter()
            .flatten()
            .filter(|t| t.effect == effect)
            .any(|t| !tolerations.iter().any(|tol| tolerates(tol, t)))
    };
    let no_execute = untolerated("NoExecute");
    Placement {
        should_run: !no_execute && !untolerated("NoSchedule"),
        should_continue_running: !no_execute,
    }
}

/// The node a daemon pod is on, or is pinned to by its `matchFields metadata.name` affinity.
fn node_of(pod: &Pod) -> Option<String> {
    let spec = pod.spec.as_ref()?;
    if let Some(n) = spec.node_name.as_ref().filter(|n| !n.is_empty()) {
        return Some(n.clone());
    }
    spec.affinity
        .as_ref()?
        .node_affinity
        .as_ref()?
        .required_during_scheduling_ignored_during_execution
        .as_ref()?
        .node_selector_terms
        .iter()
        .flat_map(|t| t.match_fields.iter().flatten())
        .find(|r| r.key == "metadata.name" && r.operator == "In")
        .and_then(|r| r.values.as_ref()?.first().cloned())
}

/// `template` pinned to `node`: its required node affinity replaced by one term
/// `matchFields metadata.name In [node]` (`ReplaceDaemonSetPodNodeNameNodeAffinity`), the
/// default tolerations added, and the revision hash label set.
fn pod_template_for(template: &PodTemplateSpec, node: &str, hash: &str) -> PodTemplateSpec {
    let mut t = template.clone();
    let meta = t.metadata.get_or_insert_with(Default::default);
    meta.labels
        .get_or_insert_with(BTreeMap::new)
        .insert(REVISION_HASH_LABEL.into(), hash.into());
    let tolerations = tolerations_of(template);
    let spec = t.spec.get_or_insert_with(Default::default);
    spec.tolerations = Some(tolerations);
    let affinity = spec.affinity.get_or_insert_with(Affinity::default);
    let node_affinity = affinity
        .node_affinity
        .get_or_insert_with(NodeAffinity::default);
    node_affinity.required_during_scheduling_ignored_during_execution = Some(NodeSelector {
        node_selector_terms: vec![NodeSelectorTerm {
            match_expressions: None,
            match_fields: Some(vec![NodeSelectorRequirement {
                key: "metadata.name".into(),
                operator: "In".into(),
                values: Some(vec![node.into()]),
            }]),
        }],
    });
    t
}

/// The hash of a DaemonSet's template, as its pods' `controller-revision-hash`.
pub fn template_hash(ds: &DaemonSet) -> String {
    let spec = ds.spec.clone().unwrap_or_default();
    pod_template_hash(
        &spec.template,
        ds.status.as_ref().and_then(|s| s.collision_count),
    )
}

fn hash_of(pod: &Pod) -> Option<&str> {
    pod.metadata
        .labels
        .as_ref()?
        .get(REVISION_HASH_LABEL)
        .map(String::as_str)
}

impl DaemonSetReconciler {
    /// A reconciler reading pods and nodes from their caches.
    pub fn new(
        client: kube::Client,
        pods: Store<Pod>,
        nodes: Store<Node>,
        revisions: Store<ControllerRevision>,
        daemonsets: CachedClient<DaemonSet>,
        recorder: Recorder,
    ) -> Self {
        DaemonSetReconciler {
            client,
            pods,
            nodes,
            revisions,
            daemonsets,
            expectations: Expectations::default(),
            failed_pods: FailedPodsBackoff::default(),
            recorder,
        }
    }

    async fn sync(&self, key: &ObjectKey, ds: &DaemonSet) -> Result<Action, SyncError> {
        let namespace = key.namespace().unwrap_or_default().to_owned();
        let uid = ds.metadata.uid.clone().unwrap_or_default();
        let spec = ds.spec.clone().unwrap_or_default();
        if selector::selects_everything(Some(&spec.selector)) {
            return Ok(Action::done());
        }
        let needs_sync = self.expectations.satisfied(key, &self.pods);
        let mut candidates: Vec<Arc<Pod>> = self.pods.by_index(BY_CONTROLLER, &uid);
        candidates.extend(self.pods.by_index(ORPHANS_BY_NAMESPACE, &namespace));
        let reference = controller_reference::<DaemonSet>(&ds.metadata);
        let pod_api: Api<Pod> = Api::namespaced(self.client.clone(), &namespace);
        let ds_api: Api<DaemonSet> = Api::namespaced(self.client.clone(), &namespace);
        let pods = claim(
            &pod_api,
            &reference,
            ds.metadata.deletion_timestamp.is_some(),
            |p: &Pod| selector::matches(Some(&spec.selector), p.metadata.labels.as_ref()),
            candidates,
            || recheck_owner(&ds_api, key.name(), &uid),
        )
        .await?;

        let hash = template_hash(ds);
        if ds.metadata.deletion_timestamp.is_none() {
            self.construct_history(ds, &hash, &pods).await?;
        }
        let min_ready = spec.min_ready_seconds.unwrap_or(0);
        let now = Timestamp::now();
        let mut by_node: BTreeMap<String, Vec<Arc<Pod>>> = BTreeMap::new();
        for p in &pods {
            if let Some(n) = node_of(p) {
                by_node.entry(n).or_default().push(p.clone());
            }
        }
        for list in by_node.values_mut() {
            list.sort_by_key(|p| p.metadata.creation_timestamp.clone().map(|t| t.0));
        }

        let rolling = spec
            .update_strategy
            .as_ref()
            .and_then(|s| s.type_.as_deref())
            .is_none_or(|t| t == "RollingUpdate");
        let max_surge_value = spec
            .update_strategy
            .as_ref()
            .and_then(|s| s.rolling_update.as_ref())
            .and_then(|r| r.max_surge.as_ref());
        // Kubernetes' `AllowsSurge`: maxSurge of one node, rounded up, is not zero.
        let surge = rolling && scaled_value(max_surge_value, 1, true, "0") > 0;

        let mut to_create = Vec::new();
        let mut to_delete: Vec<Arc<Pod>> = Vec::new();
        let mut surge_nodes: Vec<SurgeNode> = Vec::new();
        let mut status = DaemonSetStatus::default();
        let mut unavailable = 0;
        let mut old_pods = Vec::new();
        let regarding = ds.object_ref(&());
        let mut retry_in: Option<Duration> = None;
        for node in self.nodes.list() {
            let name = node.metadata.name.clone().unwrap_or_default();
            let place = placement(&spec.template, &node);
            let here = by_node.remove(&name).unwrap_or_default();
            // Status: every pod counts as scheduled (terminating ones too); the oldest is
            // the one whose readiness and revision count.
            if place.should_run {
                status.desired_number_scheduled += 1;
                if let Some(oldest) = here.first() {
                    status.current_number_scheduled += 1;
                    if is_ready(oldest) {
                        status.number_ready += 1;
                    }
                    if is_available(oldest, min_ready, now) {
                        *status.number_available.get_or_insert(0) += 1;
                    }
                    if hash_of(oldest) == Some(hash.as_str()) {
                        *status.updated_number_scheduled.get_or_insert(0) += 1;
                    }
                }
            } else if !here.is_empty() {
                status.number_misscheduled += 1;
            }

            if place.should_run && here.is_empty() {
                to_create.push(name);
                unavailable += 1;
            } else if place.should_continue_running {
                // Finished pods go (a node whose pod fails gets a new one next sync); a pod
                // being deleted is waited for; of several running pods the oldest stays.
                let mut running = Vec::new();
                for p in here {
                    if p.metadata.deletion_timestamp.is_some() {
                        continue;
                    }
                    match pods::phase(&p) {
                        "Failed" => {
                            let backoff_key = format!("{}/{name}", ObjectKey::of(ds));
                            if let Err(wait) = self.failed_pods.try_next(&backoff_key, now) {
                                retry_in = Some(retry_in.map_or(wait, |r: Duration| r.min(wait)));
                                continue;
                            }
                            publish(
                                &self.recorder,
                                regarding.clone(),
                                EventType::Warning,
                                REASON_FAILED_DAEMON_POD,
                                "Delete",
                                format!(
                                    "Found failed daemon pod {namespace}/{} on node {name}, will try to kill it",
                                    p.metadata.name.as_deref().unwrap_or_default()
                                ),
                            );
                            to_delete.push(p);
                        }
                        "Succeeded" => to_delete.push(p),
                        _ => running.push(p),
                    }
                }
                if surge {
                    let node = surge_node(name, place.should_run, running, &hash, min_ready, now);
                    to_delete.extend(node.delete.iter().cloned());
                    surge_nodes.push(node);
                    continue;
                }
                match running.split_first() {
                    Some((kept, extra)) => {
                        to_delete.extend(extra.iter().cloned());
                        if !is_available(kept, min_ready, now) {
                            unavailable += 1;
                        }
                        if hash_of(kept) != Some(hash.as_str()) {
                            old_pods.push(kept.clone());
                        }
                    }
                    None if place.should_run => unavailable += 1,
                    None => {}
                }
            } else {
                to_delete.extend(
                    here.into_iter()
                        .filter(|p| p.metadata.deletion_timestamp.is_none()),
                );
            }
        }
        // Pods pinned to nodes that do not exist never get scheduled: they go. (Bound pods
        // of deleted nodes are the pod garbage collector's.)
        to_delete.extend(by_node.into_values().flatten().filter(|p| {
            p.metadata.deletion_timestamp.is_none()
                && p.spec
                    .as_ref()
                    .and_then(|s| s.node_name.as_deref())
                    .is_none_or(str::is_empty)
        }));

        if surge {
            // As Kubernetes, the update waits for a sync in which `manage` had nothing to
            // do: a node's old pod is deleted (once its new one is available) and observed
            // before the next node surges, so at most maxSurge nodes ever run two pods.
            if to_create.is_empty() && to_delete.is_empty() {
                let max_surge =
                    scaled_value(max_surge_value, status.desired_number_scheduled, true, "0");
                let (create, delete) = surge_update(
                    &surge_nodes,
                    max_surge,
                    status.desired_number_scheduled,
                    min_ready,
                    now,
                );
                to_create.extend(create);
                to_delete.extend(delete);
            }
        } else if rolling {
            let max_unavailable = scaled_value(
                spec.update_strategy
                    .as_ref()
                    .and_then(|s| s.rolling_update.as_ref())
                    .and_then(|r| r.max_unavailable.as_ref()),
                status.desired_number_scheduled,
                true,
                "1",
            )
            .max(1);
            let (not_available, available): (Vec<_>, Vec<_>) = old_pods
                .into_iter()
                .partition(|p| !is_available(p, min_ready, now));
            to_delete.extend(not_available);
            for p in available {
                if unavailable >= max_unavailable {
                    break;
                }
                unavailable += 1;
                to_delete.push(p);
            }
        }

        let mut failure = None;
        if needs_sync && ds.metadata.deletion_timestamp.is_none() {
            failure = self
                .manage(key, ds, &hash, &to_create, &to_delete, &pod_api)
                .await
                .err();
        }
        status.number_unavailable =
            Some(status.desired_number_scheduled - status.number_available.unwrap_or(0))
                .filter(|n| *n > 0);
        self.write_status(ds, status).await?;
        if let Some(e) = failure {
            return Err(e);
        }
        let next = pods
            .iter()
            .filter_map(|p| pods::available_at(p, min_ready, now))
            .min();
        let until_available =
            next.map(|at| now.duration_until(at).unsigned_abs() + Duration::from_secs(1));
        Ok(match (until_available, retry_in) {
            (Some(a), Some(b)) => Action::requeue_after(a.min(b)),
            (Some(a), None) | (None, Some(a)) => Action::requeue_after(a),
            (None, None) => Action::done(),
        })
    }

    async fn manage(
        &self,
        key: &ObjectKey,
        ds: &DaemonSet,
        hash: &str,
        create: &[String],
        delete: &[Arc<Pod>],
        api: &Api<Pod>,
    ) -> Result<(), SyncError> {
        let spec = ds.spec.clone().unwrap_or_default();
        let regarding = ds.object_ref(&());
        let reference = controller_reference::<DaemonSet>(&ds.metadata);
        let namespace = key.namespace().unwrap_or_default().to_owned();
        let mut first = None;
        let mut failed = 0;
        let create = &create[..create.len().min(BURST_REPLICAS)];
        let delete = &delete[..delete.len().min(BURST_REPLICAS)];
        let created = slow_start_batch(create.len(), |i| {
            let template = pod_template_for(&spec.template, &create[i], hash);
            let pod = pods::from_template(
                &template,
                &namespace,
                pods::name_prefix(key.name()),
                reference.clone(),
            );
            let regarding = regarding.clone();
            async move {
                match api.create(&PostParams::default(), &pod).await {
                    Ok(created) => {
                        let name = created.metadata.name.unwrap_or_default();
                        self.expectations.created(key, name.clone());
                        publish(
                            &self.recorder,
                            regarding,
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
                            regarding,
                            EventType::Warning,
                            REASON_FAILED_CREATE,
                            "Create",
                            format!("Error creating: {msg}"),
                        );
                        Err(msg)
                    }
                }
            }
        })
        .await;
        if let Err((done, msg)) = created {
            failed += create.len() - done;
            first = Some(msg);
        }
        for pod in delete {
            let name = pod.metadata.name.clone().unwrap_or_default();
            self.expectations.deleting(
                key,
                name.clone(),
                pod.metadata.uid.clone().unwrap_or_default(),
            );
            match api.delete(&name, &DeleteParams::default()).await {
                Ok(_) => publish(
                    &self.recorder,
                    regarding.clone(),
                    EventType::Normal,
                    REASON_SUCCESSFUL_DELETE,
                    "Delete",
                    format!("Deleted pod: {name}"),
                ),
                Err(e) if status_code(&e) == Some(404) => {}
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
                    failed += 1;
                    first.get_or_insert(msg);
                }
            }
        }
        match first {
            None => Ok(()),
            Some(first) => Err(SyncError::Pods {
                verb: if failed > 0 && create.is_empty() {
                    "delete"
                } else {
                    "create"
                },
                failed,
                attempted: create.len() + delete.len(),
                first,
            }),
        }
    }

    /// Makes sure the current template has the highest ControllerRevision and trims the
    /// history to `revisionHistoryLimit`.
    async fn construct_history(
        &self,
        ds: &DaemonSet,
        hash: &str,
        pods: &[Arc<Pod>],
    ) -> Result<(), SyncError> {
        let namespace = ds.metadata.namespace.clone().unwrap_or_default();
        let ds_name = ds.metadata.name.clone().unwrap_or_default();
        let uid = ds.metadata.uid.clone().unwrap_or_default();
        let api: Api<ControllerRevision> = Api::namespaced(self.client.clone(), &namespace);
        let name = format!("{ds_name}-{hash}");
        let mut revisions = self.revisions.by_index(BY_CONTROLLER, &uid);
        revisions.sort_by_key(|r| r.revision);
        let highest = revisions.iter().map(|r| r.revision).max().unwrap_or(0);
        let current = revisions
            .iter()
            .find(|r| r.metadata.name.as_deref() == Some(name.as_str()));
        match current {
            Some(r) if r.revision < highest => {
                api.patch(
                    &name,
                    &PatchParams::default(),
                    &Patch::Merge(serde_json::json!({"revision": highest + 1})),
                )
                .await
                .map_err(|e| SyncError::api("patch", format!("ControllerRevision {name}"), e))?;
            }
            Some(_) => {}
            None => {
                self.create_revision(ds, &api, &name, hash, highest + 1)
                    .await?
            }
        }

        let limit = ds
            .spec
            .as_ref()
            .and_then(|s| s.revision_history_limit)
            .unwrap_or(10);
        let in_use: BTreeSet<&str> = pods.iter().filter_map(|p| hash_of(p)).collect();
        let old: Vec<&Arc<ControllerRevision>> = revisions
            .iter()
            .filter(|r| r.metadata.name.as_deref() != Some(name.as_str()))
            .filter(|r| {
                let h = r
                    .metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(REVISION_HASH_LABEL));
                h.is_none_or(|h| !in_use.contains(h.as_str()))
            })
            .collect();
        let excess = old
            .len()
            .saturating_sub(usize::try_from(limit).unwrap_or(0));
        for r in old.into_iter().take(excess) {
            let rname = r.metadata.name.clone().unwrap_or_default();
            match api.delete(&rname, &DeleteParams::default()).await {
                Ok(_) => {}
                Err(e) if status_code(&e) == Some(404) => {}
                Err(e) => {
                    return Err(SyncError::api(
                        "delete",
                        format!("ControllerRevision {rname}"),
                        e,
                    ));
                }
            }
        }
        Ok(())
    }

    async fn create_revision(
        &self,
        ds: &DaemonSet,
        api: &Api<ControllerRevision>,
        name: &str,
        hash: &str,
        revision: i64,
    ) -> Result<(), SyncError> {
        let spec = ds.spec.clone().unwrap_or_default();
        let mut template = serde_json::to_value(&spec.template)
            .expect("a PodTemplateSpec always serializes to JSON");
        if let Some(obj) = template.as_object_mut() {
            obj.insert("$patch".into(), "replace".into());
        }
        let data = serde_json::json!({"spec": {"template": template}});
        let mut labels = spec
            .template
            .metadata
            .as_ref()
            .and_then(|m| m.labels.clone())
            .unwrap_or_default();
        labels.insert(REVISION_HASH_LABEL.into(), hash.into());
        let cr = ControllerRevision {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                name: Some(name.into()),
                namespace: ds.metadata.namespace.clone(),
                labels: Some(labels),
                owner_references: Some(vec![controller_reference::<DaemonSet>(&ds.metadata)]),
                ..Default::default()
            },
            data: Some(k8s_openapi::apimachinery::pkg::runtime::RawExtension(
                data.clone(),
            )),
            revision,
        };
        match api.create(&PostParams::default(), &cr).await {
            Ok(_) => Ok(()),
            Err(e) if status_code(&e) == Some(409) => {
                let existing = api
                    .get(name)
                    .await
                    .map_err(|e| SyncError::api("get", format!("ControllerRevision {name}"), e))?;
                let ours = pods::controller_ref(&existing.metadata)
                    .is_some_and(|r| Some(&r.uid) == ds.metadata.uid.as_ref());
                if ours && existing.data.as_ref().map(|d| &d.0) == Some(&data) {
                    // The cache had not seen it yet.
                    return Ok(());
                }
                let mut updated = ds.clone();
                let status = updated.status.get_or_insert_with(Default::default);
                status.collision_count = Some(status.collision_count.unwrap_or(0) + 1);
                self.daemonsets
                    .replace_status(&updated, &PostParams::default())
                    .await
                    .map_err(|e| {
                        SyncError::cached(format!("status of DaemonSet {}", ObjectKey::of(ds)), e)
                    })?;
                Err(SyncError::HashCollision(format!(
                    "ControllerRevision {name}"
                )))
            }
            Err(e) => Err(SyncError::api(
                "create",
                format!("ControllerRevision {name}"),
                e,
            )),
        }
    }

    async fn write_status(&self, ds: &DaemonSet, status: DaemonSetStatus) -> Result<(), SyncError> {
        let current = ds.status.clone().unwrap_or_default();
        let wanted = DaemonSetStatus {
            observed_generation: ds.metadata.generation,
            collision_count: current.collision_count,
            conditions: current.conditions.clone(),
            ..status
        };
        let zero = |v: Option<i32>| v.filter(|n| *n != 0);
        let same = |a: &DaemonSetStatus, b: &DaemonSetStatus| {
            a.desired_number_scheduled == b.desired_number_scheduled
                && a.current_number_scheduled == b.current_number_scheduled
                && a.number_misscheduled == b.number_misscheduled
                && a.number_ready == b.number_ready
                && zero(a.number_available) == zero(b.number_available)
                && zero(a.number_unavailable) == zero(b.number_unavailable)
                && zero(a.updated_number_scheduled) == zero(b.updated_number_scheduled)
                && a.observed_generation == b.observed_generation
        };
        if same(&current, &wanted) {
            return Ok(());
        }
        let updated = DaemonSet {
            status: Some(wanted),
            ..ds.clone()
        };
        self.daemonsets
            .replace_status(&updated, &PostParams::default())
            .await
            .map_err(|e| {
                SyncError::cached(format!("status of DaemonSet {}", ObjectKey::of(ds)), e)
            })?;
        Ok(())
    }
}

impl Reconciler<DaemonSet> for DaemonSetReconciler {
    type Error = SyncError;

    async fn reconcile(
        &self,
        request: Request<DaemonSet>,
    ) -> Result<Action, ReconcileError<SyncError>> {
        let key = request.key().clone();
        let Some(ds) = request.object() else {
            self.expectations.forget(&key);
            return Ok(Action::done());
        };
        Ok(self.sync(&key, &ds).await?)
    }
}

/// Maps a node change to every DaemonSet: any of them may now belong on it, or not.
pub fn node_mapper(
    daemonsets: Store<DaemonSet>,
) -> impl Fn(&Node) -> Vec<ObjectKey> + Send + Sync + 'static {
    move |_: &Node| daemonsets.keys()
}

/// Maps an orphan pod to the DaemonSets of its namespace whose selector matches it.
pub fn orphan_mapper(
    daemonsets: Store<DaemonSet>,
) -> impl Fn(&Pod) -> Vec<ObjectKey> + Send + Sync + 'static {
    move |pod: &Pod| {
        if pods::controller_ref(&pod.metadata).is_some() {
            return Vec::new();
        }
        let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
        daemonsets
            .by_index(BY_NAMESPACE, namespace)
            .iter()
            .filter(|ds| {
                selector::matches(
                    ds.spec.as_ref().map(|s| &s.selector),
                    pod.metadata.labels.as_ref(),
                )
            })
            .map(|ds| ObjectKey::of(&**ds))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(v: serde_json::Value) -> Node {
        serde_json::from_value(v).expect("a node")
    }

    #[test]
    fn failed_pods_are_deleted_with_a_doubling_backoff_per_node() {
        let backoff = FailedPodsBackoff::default();
        let t0 = Timestamp::UNIX_EPOCH;
        let at = |secs: i64| t0 + k8s_openapi::jiff::SignedDuration::from_secs(secs);
        assert_eq!(backoff.try_next("ds/a", t0), Ok(()));
        // 1 s after the first deletion.
        assert_eq!(backoff.try_next("ds/a", t0), Err(Duration::from_secs(1)));
        assert_eq!(backoff.try_next("ds/b", t0), Ok(()), "nodes back off apart");
        assert_eq!(backoff.try_next("ds/a", at(1)), Ok(()));
        // Now 2 s.
        assert_eq!(backoff.try_next("ds/a", at(2)), Err(Duration::from_secs(1)));
        assert_eq!(backoff.try_next("ds/a", at(3)), Ok(()));
        // Idle long enough: starts over at 1 s.
        assert_eq!(backoff.try_next("ds/a", at(3 + 3600)), Ok(()));
        assert_eq!(
            backoff.try_next("ds/a", at(3 + 3600)),
            Err(Duration::from_secs(1))
        );
    }

    #[test]
    fn placement_follows_selector_affinity_and_taints() {
        let template: PodTemplateSpec = serde_json::from_value(json!({
            "spec": {"nodeSelector": {"disk": "ssd"}, "containers": []},
        }))
        .expect("a template");
        let ssd = node(json!({"metadata": {"name": "a", "labels": {"disk": "ssd"}}}));
        let hdd = node(json!({"metadata": {"name": "b", "labels": {"disk": "hdd"}}}));
        assert!(placement(&template, &ssd).should_run);
        assert!(!placement(&template, &hdd).should_continue_running);

        let tainted = node(json!({
            "metadata": {"name": "c", "labels": {"disk": "ssd"}},
            "spec": {"taints": [{"key": "gpu", "effect": "NoSchedule"}]},
        }));
        let p = placement(&template, &tainted);
        assert!(!p.should_run && p.should_continue_running);
        // The default tolerations cover an unschedulable or not-ready node.
        let cordoned = node(json!({
            "metadata": {"name": "d", "labels": {"disk": "ssd"}},
            "spec": {"taints": [
                {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"},
                {"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"},
            ]},
        }));
        assert!(placement(&template, &cordoned).should_run);

        let pinned = pod_template_for(&template, "a", "h1");
        let pod = Pod {
            spec: pinned.spec.clone(),
            ..Pod::default()
        };
        assert_eq!(node_of(&pod).as_deref(), Some("a"));
        assert!(placement(&pinned, &ssd).should_run);
        assert!(
            !placement(
                &pinned,
                &node(json!({"metadata": {"name": "z", "labels": {"disk": "ssd"}}}))
            )
            .should_run
        );
    }
}
