//! The garbage collector: deletes objects whose owners are gone, and carries out the
//! `Foreground` and `Orphan` propagation policies.
//!
//! One task owns the owner-reference graph (`Graph`): every object in storage, by uid, with
//! its owner references, and for every uid that some object names as an owner, the set of those
//! dependents. The task reads one storage watch of every key (`/`), so every resource —
//! built-in or custom, including resources served later — feeds it without registration. For
//! each change it updates the graph, marks the objects whose fate may have changed, decides
//! what each of them needs ([`Action`]) and puts that on a work queue. Workers take actions off
//! the queue and carry them out through the registry's ordinary delete and update paths, so
//! finalizers hold objects as usual and every change is a normal watch event, which flows back
//! into the graph. Workers never read the graph; the graph is never locked.
//!
//! # Guarantees
//! - An object is deleted only when each of its owner references is dangling (no object with
//!   that uid, kind and name in a namespace the reference may point to) or names an owner being
//!   deleted in the foreground; the deletion carries the resource version the decision saw, so
//!   a changed object is decided again rather than deleted on stale grounds.
//! - Objects with a solid owner lose only the references that are dangling.
//! - A namespaced owner in another namespace than its dependent never counts as an owner; a
//!   cluster-scoped object that names a namespaced owner is left alone.
//! - An owner deleted with `Foreground` keeps its `foregroundDeletion` finalizer until no
//!   dependent whose reference has `blockOwnerDeletion: true` remains; one deleted with
//!   `Orphan` keeps its `orphan` finalizer until no dependent refers to it.
//!
//! # Caveats
//! - Decisions are made on the graph's view, which trails storage by the watch's delay; a
//!   dependent created while its owner's deletion is being processed may outlive the owner
//!   briefly before it is collected, as in Kubernetes.
//! - A failed action has its object decided again after a per-object exponential delay
//!   ([`RETRY_MIN`] doubling up to [`RETRY_MAX`], reset by a success), which the
//!   `kore-workqueue` queue the workers take from keeps and fires itself; conflicts and missing
//!   objects are not retried, since the change that caused them arrives as a watch event.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use kore_workqueue::{ExponentialBackoff, Guard, Queue, QueueConfig, Retry, TokenBucket};
use serde::Deserialize;
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::api::error::ApiError;
// The propagation policies the collector deletes with.
use crate::api::propagation::Propagation as Policy;
use crate::registry::rest::{DeleteOptions, FOREGROUND_DELETION, ORPHAN, Part, Target};
use crate::registry::{Registry, Resource};
use crate::storage::{
    EventType, ListOptions, Preconditions, Storage, StorageError, WatchEvent, Watcher,
};

/// How many workers carry out actions at once.
const WORKERS: usize = 8;
/// The delay before an object whose action failed is decided again, doubled per failure.
pub const RETRY_MIN: Duration = Duration::from_millis(5);
/// The longest delay before a failed object is decided again.
pub const RETRY_MAX: Duration = Duration::from_secs(1000);
/// How long the collector waits before listing storage again after a failed list.
const RELIST_AFTER: Duration = Duration::from_millis(250);
/// How many watch events are folded into the graph before the marked objects are decided.
const BATCH: usize = 4096;

/// A uid, shared between the graph's maps.
type Uid = Arc<str>;

/// One owner reference of an object, as the graph keeps it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct OwnerRef {
    uid: Uid,
    group: String,
    kind: String,
    name: String,
    block: bool,
}

/// One observed object.
#[derive(Clone, Debug)]
struct Node {
    rv: u64,
    group: String,
    kind: String,
    namespace: Option<String>,
    name: String,
    owners: Vec<OwnerRef>,
    deleting: bool,
    orphan: bool,
    foreground: bool,
}

/// The objects naming one uid as their owner.
#[derive(Debug, Default)]
struct Dependents {
    all: HashSet<Uid>,
    /// How many of them set `blockOwnerDeletion: true` on that reference.
    blocking: usize,
}

/// What one object needs from the collector.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Action {
    /// Delete it with this policy.
    Delete(Policy),
    /// Remove its references to these owner uids.
    Strip(Vec<Arc<str>>),
    /// Remove this finalizer from it (its dependents have been dealt with).
    RemoveFinalizer(&'static str),
}

/// An action on one object, with what the worker needs to find it.
#[derive(Clone, Debug)]
struct Work {
    uid: Uid,
    rv: u64,
    group: String,
    kind: String,
    namespace: Option<String>,
    name: String,
    action: Action,
}

/// How one owner reference of an object resolves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Resolved {
    /// The owner exists where the reference may point.
    Solid,
    /// The owner exists and is being deleted with `Orphan`: the reference is to be removed.
    Orphaning,
    /// The owner is being deleted with `Foreground`.
    Waiting,
    /// No such owner (or one the reference may not point to).
    Dangling,
    /// A cluster-scoped object naming a namespaced owner: never resolvable.
    Invalid,
}

/// The metadata the graph reads from a stored object.
#[derive(Deserialize)]
struct Doc<'a> {
    #[serde(rename = "apiVersion", borrow, default)]
    api_version: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    metadata: Option<DocMeta<'a>>,
}

#[derive(Deserialize)]
struct DocMeta<'a> {
    #[serde(borrow, default)]
    name: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    namespace: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    uid: Option<Cow<'a, str>>,
    #[serde(rename = "deletionTimestamp", borrow, default)]
    deletion_timestamp: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    finalizers: Option<Vec<Cow<'a, str>>>,
    #[serde(rename = "ownerReferences", borrow, default)]
    owner_references: Option<Vec<DocRef<'a>>>,
}

#[derive(Deserialize)]
struct DocRef<'a> {
    #[serde(rename = "apiVersion", borrow, default)]
    api_version: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    name: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    uid: Option<Cow<'a, str>>,
    #[serde(rename = "blockOwnerDeletion", default)]
    block_owner_deletion: Option<bool>,
}

/// The group of an `apiVersion` (`apps/v1` → `apps`, `v1` → ``).
fn group_of(api_version: &str) -> &str {
    api_version.split_once('/').map_or("", |(g, _)| g)
}

/// Reads a stored object into a node; `None` for documents without a uid.
fn parse_node(rv: u64, bytes: &[u8]) -> Option<(Uid, Node)> {
    let doc: Doc<'_> = serde_json::from_slice(bytes).ok()?;
    let meta = doc.metadata?;
    let uid: Uid = Arc::from(meta.uid.filter(|u| !u.is_empty())?.as_ref());
    let finalizers = meta.finalizers.unwrap_or_default();
    let owners = meta
        .owner_references
        .unwrap_or_default()
        .into_iter()
        .filter_map(|r| {
            Some(OwnerRef {
                uid: Arc::from(r.uid.filter(|u| !u.is_empty())?.as_ref()),
                group: group_of(r.api_version.as_deref().unwrap_or_default()).to_string(),
                kind: r.kind.unwrap_or_default().into_owned(),
                name: r.name.unwrap_or_default().into_owned(),
                block: r.block_owner_deletion == Some(true),
            })
        })
        .collect();
    let node = Node {
        rv,
        group: group_of(doc.api_version.as_deref().unwrap_or_default()).to_string(),
        kind: doc.kind.unwrap_or_default().into_owned(),
        namespace: meta
            .namespace
            .filter(|n| !n.is_empty())
            .map(Cow::into_owned),
        name: meta.name.unwrap_or_default().into_owned(),
        owners,
        deleting: meta.deletion_timestamp.is_some(),
        orphan: finalizers.iter().any(|f| f == ORPHAN),
        foreground: finalizers.iter().any(|f| f == FOREGROUND_DELETION),
    };
    Some((uid, node))
}

/// The owner-reference graph. Owned by the collector's task; see the module docs.
#[derive(Debug, Default)]
pub(crate) struct Graph {
    nodes: HashMap<Uid, Node>,
    /// Owner uid → the objects referring to it, whether or not the owner exists.
    dependents: HashMap<Uid, Dependents>,
    /// Objects to decide again.
    dirty: HashSet<Uid>,
    /// The last action put on the queue for each object, with the revision it was decided on,
    /// so an unchanged object is not sent the same action twice.
    issued: HashMap<Uid, (u64, Action)>,
}

impl Graph {
    /// Records a created or changed object.
    fn upsert(&mut self, uid: Uid, node: Node) {
        if self.nodes.get(&uid).is_some_and(|old| old.rv >= node.rv) {
            return;
        }
        let old = self.nodes.remove(&uid);
        let old_owners = old.as_ref().map(|o| o.owners.clone()).unwrap_or_default();
        for r in &old_owners {
            if !node.owners.contains(r) {
                self.unlink(&uid, r);
            }
        }
        for r in &node.owners {
            if !old_owners.contains(r) {
                self.link(&uid, r);
            }
        }
        let started_gc_deletion = node.deleting
            && (node.foreground || node.orphan)
            && old.as_ref().is_none_or(|o| {
                !o.deleting || o.foreground != node.foreground || o.orphan != node.orphan
            });
        if started_gc_deletion && let Some(deps) = self.dependents.get(&uid) {
            self.dirty.extend(deps.all.iter().cloned());
        }
        self.issued.remove(&uid);
        self.dirty.insert(uid.clone());
        self.nodes.insert(uid, node);
    }

    /// Records a removed object.
    fn remove(&mut self, uid: &Uid) {
        let Some(old) = self.nodes.remove(uid) else {
            return;
        };
        for r in &old.owners {
            self.unlink(uid, r);
        }
        if let Some(deps) = self.dependents.get(uid) {
            self.dirty.extend(deps.all.iter().cloned());
        }
        self.issued.remove(uid);
    }

    fn link(&mut self, dependent: &Uid, r: &OwnerRef) {
        let deps = self.dependents.entry(r.uid.clone()).or_default();
        if deps.all.insert(dependent.clone()) && r.block {
            deps.blocking += 1;
        }
        self.dirty.insert(r.uid.clone());
    }

    fn unlink(&mut self, dependent: &Uid, r: &OwnerRef) {
        if let Some(deps) = self.dependents.get_mut(&r.uid) {
            if deps.all.remove(dependent) && r.block {
                deps.blocking = deps.blocking.saturating_sub(1);
            }
            if deps.all.is_empty() {
                self.dependents.remove(&r.uid);
            }
        }
        self.dirty.insert(r.uid.clone());
    }

    /// How `r`, an owner reference of `dependent`, resolves. `namespaced_kind` tells whether a
    /// kind that has no object in the graph is namespaced (`None`: unknown).
    fn resolve(
        &self,
        dependent: &Node,
        r: &OwnerRef,
        namespaced_kind: &dyn Fn(&str, &str) -> Option<bool>,
    ) -> Resolved {
        let owner = self
            .nodes
            .get(&r.uid)
            .filter(|o| o.name == r.name && o.kind == r.kind && o.group == r.group);
        let owner_namespaced = match owner {
            Some(o) => o.namespace.is_some(),
            None => namespaced_kind(&r.group, &r.kind).unwrap_or(false),
        };
        if dependent.namespace.is_none() && owner_namespaced {
            return Resolved::Invalid;
        }
        let Some(owner) = owner else {
            return Resolved::Dangling;
        };
        if owner.namespace.is_some() && owner.namespace != dependent.namespace {
            return Resolved::Dangling;
        }
        if owner.deleting && owner.orphan {
            Resolved::Orphaning
        } else if owner.deleting && owner.foreground {
            Resolved::Waiting
        } else {
            Resolved::Solid
        }
    }

    /// What object `uid` needs now, if anything.
    fn decide(
        &self,
        uid: &Uid,
        namespaced_kind: &dyn Fn(&str, &str) -> Option<bool>,
    ) -> Option<Action> {
        let node = self.nodes.get(uid)?;
        let deps = self.dependents.get(uid);
        if node.deleting {
            // Being deleted: its references to orphaning owners still go (so those owners
            // need not wait for it); otherwise only the collector's own finalizers concern it.
            let mut orphaning: Vec<Uid> = node
                .owners
                .iter()
                .filter(|r| self.resolve(node, r, namespaced_kind) == Resolved::Orphaning)
                .map(|r| r.uid.clone())
                .collect();
            if !orphaning.is_empty() {
                orphaning.sort();
                orphaning.dedup();
                return Some(Action::Strip(orphaning));
            }
            if node.orphan {
                return deps
                    .is_none_or(|d| d.all.is_empty())
                    .then_some(Action::RemoveFinalizer(ORPHAN));
            }
            if node.foreground {
                return deps
                    .is_none_or(|d| d.blocking == 0)
                    .then_some(Action::RemoveFinalizer(FOREGROUND_DELETION));
            }
            return None;
        }
        if node.owners.is_empty() {
            return None;
        }
        let mut solid = false;
        let mut orphaning = Vec::new();
        let mut waiting = Vec::new();
        let mut dangling = Vec::new();
        for r in &node.owners {
            match self.resolve(node, r, namespaced_kind) {
                Resolved::Invalid => return None,
                Resolved::Solid => solid = true,
                Resolved::Orphaning => orphaning.push(r.uid.clone()),
                Resolved::Waiting => waiting.push(r.uid.clone()),
                Resolved::Dangling => dangling.push(r.uid.clone()),
            }
        }
        let strip = |mut uids: Vec<Uid>| {
            uids.sort();
            uids.dedup();
            (!uids.is_empty()).then_some(Action::Strip(uids))
        };
        if !orphaning.is_empty() {
            // Orphaning first; whether the object then goes is decided on what remains.
            if solid {
                orphaning.extend(dangling);
                orphaning.extend(waiting);
            }
            return strip(orphaning);
        }
        if solid {
            dangling.extend(waiting);
            return strip(dangling);
        }
        let has_dependents = deps.is_some_and(|d| !d.all.is_empty());
        if !waiting.is_empty() && has_dependents {
            return Some(Action::Delete(Policy::Foreground));
        }
        Some(Action::Delete(if node.orphan {
            Policy::Orphan
        } else if node.foreground {
            Policy::Foreground
        } else {
            Policy::Background
        }))
    }

    /// Decides every marked object; returns the work not already handed out.
    fn drain_dirty(&mut self, namespaced_kind: &dyn Fn(&str, &str) -> Option<bool>) -> Vec<Work> {
        let dirty = std::mem::take(&mut self.dirty);
        let mut out = Vec::new();
        for uid in dirty {
            let Some(action) = self.decide(&uid, namespaced_kind) else {
                continue;
            };
            let Some(node) = self.nodes.get(&uid) else {
                continue;
            };
            if self
                .issued
                .get(&uid)
                .is_some_and(|(rv, a)| *rv == node.rv && *a == action)
            {
                continue;
            }
            self.issued.insert(uid.clone(), (node.rv, action.clone()));
            out.push(Work {
                uid,
                rv: node.rv,
                group: node.group.clone(),
                kind: node.kind.clone(),
                namespace: node.namespace.clone(),
                name: node.name.clone(),
                action,
            });
        }
        out
    }

    /// Decides `uid` again after a failed action, forgetting what was handed out for it; returns
    /// its work, or `None` when it is gone or needs nothing now.
    fn recheck(
        &mut self,
        uid: Uid,
        namespaced_kind: &dyn Fn(&str, &str) -> Option<bool>,
    ) -> Option<Work> {
        self.issued.remove(&uid);
        let action = self.decide(&uid, namespaced_kind)?;
        let node = self.nodes.get(&uid)?;
        self.issued.insert(uid.clone(), (node.rv, action.clone()));
        Some(Work {
            uid,
            rv: node.rv,
            group: node.group.clone(),
            kind: node.kind.clone(),
            namespace: node.namespace.clone(),
            name: node.name.clone(),
            action,
        })
    }

    /// Applies one watch event.
    fn apply(&mut self, event: &WatchEvent) {
        match event.kind {
            EventType::Added | EventType::Modified => {
                if let Some((uid, node)) = parse_node(event.rv, &event.object) {
                    self.upsert(uid, node);
                }
            }
            EventType::Deleted => {
                if let Some((uid, _)) = parse_node(event.rv, &event.object) {
                    self.remove(&uid);
                }
            }
        }
    }
}

/// The work queue between the graph and the workers: kore-workqueue's queue of uids (one
/// worker per object, duplicates collapse, an object queued while it is worked on runs once
/// more afterwards, per-object exponential backoff through the queue's own delayed re-add),
/// with the newest undone action of each object beside it, so a newer action replaces a queued
/// one.
#[derive(Debug)]
struct WorkQueue {
    uids: Queue<Uid>,
    pending: Mutex<HashMap<Uid, Pending>>,
}

/// What a queued uid stands for.
#[derive(Debug)]
enum Pending {
    /// This action, decided by the graph.
    Work(Work),
    /// The last action failed: ask the graph to decide the object again.
    Recheck,
}

/// An object handed to a worker: what to do, and the queue's guard that settles it.
struct Job {
    pending: Option<Pending>,
    guard: Guard<Uid>,
}

impl WorkQueue {
    /// An empty queue; failed objects wait [`RETRY_MIN`] doubling up to [`RETRY_MAX`], with no
    /// rate shared between objects.
    fn new() -> Self {
        let config = QueueConfig::default()
            .backoff(ExponentialBackoff::new(RETRY_MIN, RETRY_MAX))
            .token_bucket(TokenBucket::unlimited());
        Self {
            uids: Queue::new(config),
            pending: Mutex::new(HashMap::new()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Uid, Pending>> {
        self.pending.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Queues `work`, replacing an action of the same object not yet handed out.
    fn push(&self, work: Work) {
        let uid = work.uid.clone();
        self.lock().insert(uid.clone(), Pending::Work(work));
        self.uids.add(uid);
    }

    /// Stops handing out work; work in progress finishes.
    fn close(&self) {
        self.uids.shutdown();
    }

    /// The next object to work on, or `None` once the queue is closed. `pending` is `None` when
    /// a newer hand-out of the object already took its action (nothing is left to do).
    async fn next(&self) -> Option<Job> {
        let guard = self.uids.next().await?;
        let pending = self.lock().remove(guard.key());
        Some(Job { pending, guard })
    }

    /// Settles a failed job: the object is decided again after its backoff, unless a newer
    /// action arrived meanwhile (that one runs at once). Returns the queue's verdict.
    fn retry(&self, job: Job) -> Retry {
        self.lock()
            .entry(job.guard.key().clone())
            .or_insert(Pending::Recheck);
        job.guard.retry()
    }
}

/// A worker's request to decide one object again, answered with its work (if any).
type Recheck = (Uid, oneshot::Sender<Option<Work>>);

/// Runs the garbage collector until `stop` is cancelled.
pub async fn run(registry: Arc<Registry>, stop: CancellationToken) {
    let queue = Arc::new(WorkQueue::new());
    let (recheck_tx, mut recheck_rx) = mpsc::channel::<Recheck>(WORKERS);
    let workers = TaskTracker::new();
    for _ in 0..WORKERS {
        workers.spawn(work(
            registry.clone(),
            queue.clone(),
            recheck_tx.clone(),
            stop.clone(),
        ));
    }
    drop(recheck_tx);
    'sync: loop {
        let (mut graph, mut watcher) = match initial_graph(&registry) {
            Ok(v) => v,
            Err(e) => {
                tracing::warn!(error = %e, "garbage collector could not list storage");
                tokio::select! {
                    () = stop.cancelled() => break 'sync,
                    () = tokio::time::sleep(RELIST_AFTER) => continue 'sync,
                }
            }
        };
        hand_out(&registry, &mut graph, &queue);
        loop {
            tokio::select! {
                () = stop.cancelled() => break 'sync,
                event = watcher.next() => {
                    let mut event = event;
                    let mut folded = 0;
                    loop {
                        match event {
                            Ok(e) => graph.apply(&e),
                            Err(StorageError::Expired { .. }) => {
                                tracing::info!("garbage collector fell behind the history; rebuilding its graph");
                                continue 'sync;
                            }
                            Err(e) => {
                                tracing::warn!(error = %e, "garbage collector watch failed");
                                continue 'sync;
                            }
                        }
                        folded += 1;
                        if folded >= BATCH {
                            break;
                        }
                        event = match watcher.try_next() {
                            Ok(Some(e)) => Ok(e),
                            Ok(None) => break,
                            Err(e) => Err(e),
                        };
                    }
                    hand_out(&registry, &mut graph, &queue);
                }
                Some((uid, reply)) = recheck_rx.recv() => {
                    let work = graph.recheck(uid, &namespaced_kind(&registry));
                    // A worker that stopped waiting has nothing left to do with it.
                    let _ = reply.send(work);
                }
            }
        }
    }
    // Workers waiting for an answer get none (their request fails) rather than wait forever.
    drop(recheck_rx);
    queue.close();
    workers.close();
    workers.wait().await;
}

/// Builds the graph from one consistent list of all of storage, and a watch from its revision.
fn initial_graph(registry: &Registry) -> Result<(Graph, Watcher), StorageError> {
    let page = registry
        .store()
        .list("/", &ListOptions::default(), &|_| true)?;
    let mut graph = Graph::default();
    for stored in page.items {
        if let Some((uid, node)) = parse_node(stored.rv, &stored.bytes) {
            graph.upsert(uid, node);
        }
    }
    let watcher = registry.store().watch("/", page.rv)?;
    Ok((graph, watcher))
}

/// Whether the served kind `group`/`kind` is namespaced (`None`: not served).
fn namespaced_kind(registry: &Registry) -> impl Fn(&str, &str) -> Option<bool> {
    let catalog = registry.catalog();
    move |group: &str, kind: &str| {
        catalog
            .resources()
            .iter()
            .find(|r| r.group == group && r.kind == kind)
            .map(|r| r.namespaced)
    }
}

/// Decides the marked objects and queues their work.
fn hand_out(registry: &Registry, graph: &mut Graph, queue: &WorkQueue) {
    for work in graph.drain_dirty(&namespaced_kind(registry)) {
        queue.push(work);
    }
}

/// The served resource of a kind (any served version: they share storage).
fn resource_for(registry: &Registry, group: &str, kind: &str) -> Option<Arc<Resource>> {
    registry
        .catalog()
        .resources()
        .iter()
        .find(|r| r.group == group && r.kind == kind)
        .cloned()
}

/// A worker: carries out queued work until the queue closes.
async fn work(
    registry: Arc<Registry>,
    queue: Arc<WorkQueue>,
    recheck: mpsc::Sender<Recheck>,
    stop: CancellationToken,
) {
    while let Some(mut job) = queue.next().await {
        let item = match job.pending.take() {
            Some(Pending::Work(item)) => item,
            // A newer hand-out already took the action: nothing left to do.
            None => continue,
            // Its backoff is over: the graph decides the object again on its current view.
            Some(Pending::Recheck) => {
                let (tx, rx) = oneshot::channel();
                let uid = job.guard.key().clone();
                let decided = tokio::select! {
                    () = stop.cancelled() => return,
                    sent = recheck.send((uid, tx)) => match sent {
                        Ok(()) => rx.await.ok().flatten(),
                        Err(_) => return,
                    },
                };
                match decided {
                    Some(item) => item,
                    // Gone, or nothing to do any more: settled as a success.
                    None => continue,
                }
            }
        };
        match carry_out(&registry, &item).await {
            // The object changed or went away: its watch event brings it back to the graph.
            Ok(()) | Err(ApiError::NotFound { .. } | ApiError::Conflict { .. }) => drop(job),
            Err(e) => {
                let retry = queue.retry(job);
                tracing::warn!(kind = %item.kind, name = %item.name, action = ?item.action, error = %e, ?retry, "garbage collector action failed; retrying");
            }
        }
    }
}

/// Carries out one action through the registry's ordinary paths.
async fn carry_out(registry: &Registry, item: &Work) -> Result<(), ApiError> {
    let Some(res) = resource_for(registry, &item.group, &item.kind) else {
        // No longer served (a removed custom resource): nothing to act through.
        return Ok(());
    };
    let ns = item.namespace.as_deref();
    let target = Target {
        res: &res,
        ns,
        name: &item.name,
        part: Part::Main,
    };
    let opts = crate::registry::rest::WriteOptions::default();
    match &item.action {
        Action::Delete(policy) => {
            let opts = DeleteOptions {
                preconditions: Preconditions {
                    uid: Some(item.uid.to_string()),
                    resource_version: Some(item.rv),
                },
                propagation: Some(*policy),
                ..DeleteOptions::default()
            };
            registry.delete(&res, ns, &item.name, &opts).await?;
        }
        Action::Strip(owners) => {
            let mut produce = |cur: &Value| {
                same_object(cur, item)?;
                let mut next = cur.clone();
                if let Some(meta) = next.get_mut("metadata").and_then(Value::as_object_mut) {
                    let refs: Vec<Value> = meta
                        .get("ownerReferences")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                        .filter(|r| {
                            !r.get("uid")
                                .and_then(Value::as_str)
                                .is_some_and(|u| owners.iter().any(|o| &**o == u))
                        })
                        .cloned()
                        .collect();
                    if refs.is_empty() {
                        meta.remove("ownerReferences");
                    } else {
                        meta.insert("ownerReferences".into(), Value::Array(refs));
                    }
                }
                Ok(next)
            };
            registry
                .write_existing(target, None, &mut produce, &opts)
                .await?;
        }
        Action::RemoveFinalizer(finalizer) => {
            let mut produce = |cur: &Value| {
                same_object(cur, item)?;
                let mut next = cur.clone();
                if let Some(meta) = next.get_mut("metadata").and_then(Value::as_object_mut) {
                    let left: Vec<Value> = meta
                        .get("finalizers")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                        .filter(|f| f.as_str() != Some(finalizer))
                        .cloned()
                        .collect();
                    if left.is_empty() {
                        meta.remove("finalizers");
                    } else {
                        meta.insert("finalizers".into(), Value::Array(left));
                    }
                }
                Ok(next)
            };
            registry
                .write_existing(target, None, &mut produce, &opts)
                .await?;
        }
    }
    Ok(())
}

/// Fails with a conflict unless `cur` is the object the work was decided for.
fn same_object(cur: &Value, item: &Work) -> Result<(), ApiError> {
    let uid = cur.pointer("/metadata/uid").and_then(Value::as_str);
    if uid == Some(&*item.uid) {
        return Ok(());
    }
    Err(ApiError::Conflict {
        resource: crate::api::error::GroupResource {
            group: item.group.clone(),
            resource: String::new(),
        },
        name: item.name.clone(),
        detail: "the object was replaced".into(),
    })
}

#[cfg(test)]
mod tests;
