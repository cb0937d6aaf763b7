//! An event recorder writing `events.k8s.io/v1` Events, counting repeats as a series.
//!
//! [`Recorder::publish`] creates an Event the first time something happens to an object.
//! When the same thing happens again (same object, type, reason, action, note and related
//! object) within [`SERIES_WINDOW`] of the last time, the recorder does not create another
//! Event: it patches the first one's `series` (`count`, `lastObservedTime`), as client-go's
//! events library does. So a controller that fails the same way every few seconds leaves one
//! Event with a growing count, not thousands.
//!
//! [`Recorder::record`] is the fire-and-forget form that controllers use, since a sync should
//! not wait for an event: it hands the event to the recorder's background writer and returns
//! at once. The writer holds at most [`MAX_QUEUED`] events waiting (client-go's event
//! broadcaster also queues 1,000 and drops beyond) and writes up to [`MAX_IN_FLIGHT`] at once.
//! An event that finds the queue full is dropped, counted ([`Recorder::dropped`]) and logged:
//! under a burst, events are the first thing to give way, never the controller or its memory.
//! [`Recorder::flush`] waits until everything recorded so far is written.
//!
//! # Guarantees
//! - Repeats of one series are counted one at a time (a lock per series, held across its
//!   write), so concurrent repeats count correctly; different series are written
//!   concurrently.
//! - If the Event of a series was deleted (events expire), the next repeat starts a new one.
//! - The recorder remembers at most [`MAX_SERIES`] series; when full it forgets the least
//!   recently seen quarter at once (their next repeats start new Events), so a stream of
//!   distinct events costs no scan per event.
//! - Memory is bounded: [`MAX_QUEUED`] queued events, [`MAX_IN_FLIGHT`] writes, [`MAX_SERIES`]
//!   series per recorder (clones share all three).
//!
//! # Errors
//! Publishing fails only when the API server rejects the write; events are best-effort, so
//! callers usually log the error and carry on ([`Recorder::record`] logs at debug level).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, PoisonError};
use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::{Event as KubeEvent, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use tokio::sync::mpsc::error::TrySendError;
use tokio::sync::{Mutex, mpsc, oneshot};
use tokio::task::JoinSet;
use tokio::time::Instant;

/// A repeat later than this after the last one starts a new Event.
pub const SERIES_WINDOW: Duration = Duration::from_secs(6 * 60);

/// How many series a recorder remembers.
pub const MAX_SERIES: usize = 4096;

/// How many recorded events may wait for the background writer; more are dropped.
pub const MAX_QUEUED: usize = 1000;

/// How many Events the background writer writes at once.
pub const MAX_IN_FLIGHT: usize = 8;

/// Errors of [`Recorder::publish`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Creating the Event failed. Events are best-effort: log and carry on.
    #[error("creating the event")]
    Create(#[source] kube::Error),
    /// Updating the Event's series failed. Events are best-effort: log and carry on.
    #[error("updating the event series")]
    UpdateSeries(#[source] kube::Error),
    /// The regarding reference has no name.
    #[error("the regarding object has no name")]
    NoName,
}

/// Whether an event is routine or needs attention.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventType {
    /// Routine.
    Normal,
    /// Something went wrong.
    Warning,
}

impl EventType {
    fn as_str(self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}

/// One thing that happened to an object.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// Normal or Warning.
    pub type_: EventType,
    /// Why, in CamelCase (`ScalingReplicaSet`, `FailedCreate`). Use constants.
    pub reason: String,
    /// What the controller did or failed to do, in CamelCase (`Scale`, `Create`).
    pub action: String,
    /// A human-readable description (at most 1 kB).
    pub note: Option<String>,
    /// A second object involved, if any.
    pub related: Option<ObjectReference>,
}

/// Who reports the events.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reporter {
    /// The controller's name, e.g. `kore.dev/configmap-sync`.
    pub controller: String,
    /// This replica's name (defaults to `$POD_NAME`, `$HOSTNAME`, or the controller name).
    pub instance: String,
}

impl Reporter {
    /// A reporter for `controller`, with the instance taken from the environment.
    pub fn new(controller: impl Into<String>) -> Self {
        let controller = controller.into();
        let instance = std::env::var("POD_NAME")
            .or_else(|_| std::env::var("HOSTNAME"))
            .unwrap_or_else(|_| controller.clone());
        Reporter {
            controller,
            instance,
        }
    }
}

/// (uid, kind, namespace, name) of a reference.
type RefKey = (
    Option<String>,
    Option<String>,
    Option<String>,
    Option<String>,
);

fn ref_key(r: &ObjectReference) -> RefKey {
    (
        r.uid.clone(),
        r.kind.clone(),
        r.namespace.clone(),
        r.name.clone(),
    )
}

/// What makes two events the same for counting: everything but the time.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct SeriesKey {
    regarding: RefKey,
    related: Option<RefKey>,
    type_: EventType,
    reason: String,
    action: String,
    note: Option<String>,
}

/// The Event a series writes to, and how far it has counted.
#[derive(Debug)]
struct Series {
    name: String,
    count: i32,
    last_seen: Instant,
}

/// A remembered series: when it was last seen, and its state behind its own lock.
#[derive(Debug)]
struct Slot {
    last_seen: Instant,
    state: Arc<Mutex<Option<Series>>>,
}

/// What the background writer is handed.
enum Item {
    Event(Box<(Event, ObjectReference)>),
    /// Answered once everything queued before it is written.
    Flush(oneshot::Sender<()>),
}

/// Publishes Events for one reporter; cheap to clone (clones share series, queue and writer).
#[derive(Clone)]
pub struct Recorder {
    shared: Arc<Shared>,
    /// The background writer's queue, started by the first [`Recorder::record`]. It ends
    /// when the last clone is dropped (after writing what is queued).
    queue: Arc<OnceLock<mpsc::Sender<Item>>>,
}

struct Shared {
    client: kube::Client,
    reporter: Reporter,
    series: std::sync::Mutex<HashMap<SeriesKey, Slot>>,
    dropped: AtomicU64,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder")
            .field("reporter", &self.shared.reporter)
            .finish_non_exhaustive()
    }
}

impl Recorder {
    /// A recorder writing through `client` as `reporter`.
    pub fn new(client: kube::Client, reporter: Reporter) -> Self {
        Recorder {
            shared: Arc::new(Shared {
                client,
                reporter,
                series: std::sync::Mutex::new(HashMap::new()),
                dropped: AtomicU64::new(0),
            }),
            queue: Arc::new(OnceLock::new()),
        }
    }

    /// Records `event` about the object `regarding` (get one with
    /// `kube::Resource::object_ref(&obj, &())`) and waits for the write. The Event goes to the
    /// object's namespace, or `default` for cluster-scoped objects.
    pub async fn publish(&self, event: &Event, regarding: &ObjectReference) -> Result<(), Error> {
        self.shared.publish(event, regarding).await
    }

    /// Hands `event` about `regarding` to the background writer and returns at once; the
    /// write happens as [`Recorder::publish`]'s would, and a failure is logged at debug
    /// level. When [`MAX_QUEUED`] events are already waiting (or outside a Tokio runtime),
    /// the event is dropped and counted in [`Recorder::dropped`].
    pub fn record(&self, event: Event, regarding: ObjectReference) {
        let Some(queue) = self.queue() else {
            self.count_dropped("no Tokio runtime to write it");
            return;
        };
        match queue.try_send(Item::Event(Box::new((event, regarding)))) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => self.count_dropped("the event queue is full"),
            Err(TrySendError::Closed(_)) => self.count_dropped("the event writer has stopped"),
        }
    }

    /// Waits until every event recorded before this call is written (or failed).
    pub async fn flush(&self) {
        let Some(queue) = self.queue.get() else {
            return;
        };
        let (done, written) = oneshot::channel();
        if queue.send(Item::Flush(done)).await.is_ok() {
            // An error means the writer stopped, so nothing is left to wait for.
            let _ = written.await;
        }
    }

    /// How many events [`Recorder::record`] dropped because its queue was full.
    pub fn dropped(&self) -> u64 {
        self.shared.dropped.load(Ordering::Relaxed)
    }

    fn count_dropped(&self, why: &'static str) {
        let dropped = self.shared.dropped.fetch_add(1, Ordering::Relaxed) + 1;
        // The first drop and then one line per thousand: a burst must not flood the log.
        if dropped == 1 || dropped.is_multiple_of(1000) {
            tracing::warn!(
                reporter = %self.shared.reporter.controller,
                dropped,
                "dropping events: {why}"
            );
        }
    }

    /// The background writer's queue, started on first use.
    fn queue(&self) -> Option<&mpsc::Sender<Item>> {
        if let Some(queue) = self.queue.get() {
            return Some(queue);
        }
        let runtime = tokio::runtime::Handle::try_current().ok()?;
        Some(self.queue.get_or_init(|| {
            let (queue, items) = mpsc::channel(MAX_QUEUED);
            runtime.spawn(write_queued(self.shared.clone(), items));
            queue
        }))
    }
}

/// The background writer: writes queued events, [`MAX_IN_FLIGHT`] at a time, until every
/// [`Recorder`] clone is gone and the queue is empty.
async fn write_queued(shared: Arc<Shared>, mut items: mpsc::Receiver<Item>) {
    let mut writes = JoinSet::new();
    while let Some(item) = items.recv().await {
        match item {
            Item::Event(boxed) => {
                while writes.len() >= MAX_IN_FLIGHT {
                    writes.join_next().await;
                }
                let shared = shared.clone();
                writes.spawn(async move {
                    let (event, regarding) = *boxed;
                    if let Err(e) = shared.publish(&event, &regarding).await {
                        tracing::debug!(error = %e, reason = %event.reason, "recording an event failed");
                    }
                });
            }
            Item::Flush(done) => {
                while writes.join_next().await.is_some() {}
                // The flusher may have stopped waiting; nothing to do then.
                let _ = done.send(());
            }
        }
    }
    while writes.join_next().await.is_some() {}
}

impl Shared {
    async fn publish(&self, event: &Event, regarding: &ObjectReference) -> Result<(), Error> {
        let object_name = regarding.name.clone().ok_or(Error::NoName)?;
        let namespace = regarding
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into());
        let key = SeriesKey {
            regarding: ref_key(regarding),
            related: event.related.as_ref().map(ref_key),
            type_: event.type_,
            reason: event.reason.clone(),
            action: event.action.clone(),
            note: event.note.clone(),
        };
        let api: Api<KubeEvent> = Api::namespaced(self.client.clone(), &namespace);
        let now = Instant::now();
        let state = self.slot(key, now);
        // Held across the writes on purpose: repeats of one series are counted one at a time.
        let mut series = state.lock().await;
        if let Some(s) = series
            .as_mut()
            .filter(|s| now.duration_since(s.last_seen) <= SERIES_WINDOW)
        {
            let count = s.count + 1;
            let patch = json!({
                "series": EventSeries {
                    count,
                    last_observed_time: MicroTime(Timestamp::now()),
                }
            });
            match api
                .patch(&s.name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(_) => {
                    s.count = count;
                    s.last_seen = now;
                    return Ok(());
                }
                Err(kube::Error::Api(status)) if status.code == 404 => {
                    tracing::debug!(event = %s.name, "the event of a series is gone; starting anew");
                }
                Err(e) => return Err(Error::UpdateSeries(e)),
            }
        }
        let name = format!(
            "{object_name}.{:x}",
            Timestamp::now().as_nanosecond().unsigned_abs()
        );
        let obj = KubeEvent {
            metadata: ObjectMeta {
                name: Some(name),
                namespace: Some(namespace.clone()),
                ..ObjectMeta::default()
            },
            event_time: Some(MicroTime(Timestamp::now())),
            type_: Some(event.type_.as_str().into()),
            reason: Some(event.reason.clone()),
            action: Some(event.action.clone()),
            note: event.note.clone(),
            regarding: Some(regarding.clone()),
            related: event.related.clone(),
            reporting_controller: Some(self.reporter.controller.clone()),
            reporting_instance: Some(self.reporter.instance.clone()),
            ..KubeEvent::default()
        };
        let created = api
            .create(&PostParams::default(), &obj)
            .await
            .map_err(Error::Create)?;
        *series = Some(Series {
            name: created.metadata.name.unwrap_or_default(),
            count: 1,
            last_seen: now,
        });
        Ok(())
    }

    /// The state of `key`'s series, remembered from now on.
    fn slot(&self, key: SeriesKey, now: Instant) -> Arc<Mutex<Option<Series>>> {
        // The map is only touched between awaits, so a poisoned lock holds consistent data.
        let mut slots = self.series.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(slot) = slots.get_mut(&key) {
            slot.last_seen = now;
            return slot.state.clone();
        }
        if slots.len() >= MAX_SERIES {
            forget_oldest_quarter(&mut slots);
        }
        let state = Arc::new(Mutex::new(None));
        slots.insert(
            key,
            Slot {
                last_seen: now,
                state: state.clone(),
            },
        );
        state
    }
}

/// Forgets the least recently seen quarter of `slots` (or more, on ties) in one pass. A
/// series being written keeps its state until the write ends; its next repeat starts anew.
fn forget_oldest_quarter(slots: &mut HashMap<SeriesKey, Slot>) {
    let mut seen: Vec<Instant> = slots.values().map(|s| s.last_seen).collect();
    if seen.is_empty() {
        return;
    }
    let quarter = seen.len() / 4;
    let (_, &mut threshold, _) = seen.select_nth_unstable(quarter);
    slots.retain(|_, s| s.last_seen > threshold);
}
