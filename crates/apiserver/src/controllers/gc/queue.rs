//! The collector's work queue: one pending action per object, retried with a per-object
//! backoff, handed to the workers through `kore-workqueue`.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use kore_workqueue::{ExponentialBackoff, Guard, Queue, QueueConfig, Retry, TokenBucket};
use tokio::sync::oneshot;

use super::graph::{Uid, Work};
use super::{RETRY_MAX, RETRY_MIN};

/// The work queue between the graph and the workers: kore-workqueue's queue of uids (one
/// worker per object, duplicates collapse, an object queued while it is worked on runs once
/// more afterwards, per-object exponential backoff through the queue's own delayed re-add),
/// with the newest undone action of each object beside it, so a newer action replaces a queued
/// one.
#[derive(Debug)]
pub(super) struct WorkQueue {
    pub(super) uids: Queue<Uid>,
    pub(super) pending: Mutex<HashMap<Uid, Pending>>,
}

/// What a queued uid stands for.
#[derive(Debug)]
pub(super) enum Pending {
    /// This action, decided by the graph.
    Work(Work),
    /// The last action failed: ask the graph to decide the object again.
    Recheck,
}

/// An object handed to a worker: what to do, and the queue's guard that settles it.
pub(super) struct Job {
    pub(super) pending: Option<Pending>,
    pub(super) guard: Guard<Uid>,
}

impl WorkQueue {
    /// An empty queue; failed objects wait [`RETRY_MIN`] doubling up to [`RETRY_MAX`], with no
    /// rate shared between objects.
    pub(super) fn new() -> Self {
        let config = QueueConfig::default()
            .backoff(ExponentialBackoff::new(RETRY_MIN, RETRY_MAX))
            .token_bucket(TokenBucket::unlimited());
        Self {
            uids: Queue::new(config),
            pending: Mutex::new(HashMap::new()),
        }
    }

    pub(super) fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Uid, Pending>> {
        self.pending.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Queues `work`, replacing an action of the same object not yet handed out.
    pub(super) fn push(&self, work: Work) {
        let uid = work.uid.clone();
        self.lock().insert(uid.clone(), Pending::Work(work));
        self.uids.add(uid);
    }

    /// Stops handing out work; work in progress finishes.
    pub(super) fn close(&self) {
        self.uids.shutdown();
    }

    /// The next object to work on, or `None` once the queue is closed. `pending` is `None` when
    /// a newer hand-out of the object already took its action (nothing is left to do).
    pub(super) async fn next(&self) -> Option<Job> {
        let guard = self.uids.next().await?;
        let pending = self.lock().remove(guard.key());
        Some(Job { pending, guard })
    }

    /// Settles a failed job: the object is decided again after its backoff, unless a newer
    /// action arrived meanwhile (that one runs at once). Returns the queue's verdict.
    pub(super) fn retry(&self, job: Job) -> Retry {
        self.lock()
            .entry(job.guard.key().clone())
            .or_insert(Pending::Recheck);
        job.guard.retry()
    }
}

/// A worker's request to decide one object again, answered with its work (if any).
pub(super) type Recheck = (Uid, oneshot::Sender<Option<Work>>);
