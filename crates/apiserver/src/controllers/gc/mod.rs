//! The garbage collector: deletes objects whose owners are gone, and carries out the
//! `Foreground` and `Orphan` propagation policies.
//!
//! One task owns the owner-reference graph (`Graph`): every object in storage that owns or is
//! owned by something, by uid, with its owner references, and for every uid that some object
//! names as an owner, the set of those dependents (objects that take no part in ownership get
//! no node: `graph`'s "Isolated objects"). The task reads one storage watch of every key
//! (`/`), so every resource — built-in or custom, including resources served later — feeds it
//! without registration. For each change it updates the graph, marks the objects whose fate
//! may have changed, decides what each of them needs ([`Action`]) and puts that on a work
//! queue. Workers take actions off the queue and carry them out through the registry's
//! ordinary delete and update paths, so finalizers hold objects as usual and every change is a
//! normal watch event, which flows back into the graph. Workers never read the graph; the
//! graph is never locked.
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
//!
//! # Layout
//! This file holds the task (`run`: the initial list, the watch, handing out work); `graph`
//! the owner-reference graph and its decisions, `queue` the work queue between the graph and
//! the workers, `workers` the workers that carry the actions out.

mod graph;
mod queue;
mod workers;

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

// The propagation policies the collector deletes with.
use crate::registry::{Registry, Resource};
use crate::storage::{ListOptions, Storage, StorageError, Stored, Watcher};

pub use graph::Action;
pub(crate) use graph::Graph;
use graph::{OwnerRef, parse_node};
use queue::{Recheck, WorkQueue};
use workers::work;

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
                            Ok(e) => graph.apply(&e, &owner_lookup(&registry)),
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
    let lookup = owner_lookup(registry);
    for stored in page.items {
        if let Some((uid, node)) = parse_node(stored.rv, &stored.bytes) {
            graph.upsert(uid, node, &lookup);
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

/// Reads the object an owner reference names from storage (the graph's `Lookup`).
fn owner_lookup(registry: &Registry) -> impl Fn(&OwnerRef, Option<&str>) -> Option<Stored> {
    move |r: &OwnerRef, namespace: Option<&str>| {
        let res = resource_for(registry, &r.group, &r.kind)?;
        registry.store().get(&res.key(namespace, &r.name)).ok()
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

#[cfg(test)]
mod tests;
