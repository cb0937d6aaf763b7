//! An event recorder writing `events.k8s.io/v1` Events, counting repeats as a series.
//!
//! [`Recorder::publish`] creates an Event the first time something happens to an object.
//! When the same thing happens again (same object, type, reason, action, note and related
//! object) within [`SERIES_WINDOW`] of the last time, the recorder does not create another
//! Event: it patches the first one's `series` (`count`, `lastObservedTime`), as client-go's
//! events library does. So a controller that fails the same way every few seconds leaves one
//! Event with a growing count, not thousands.
//!
//! # Guarantees
//! - Publishes are serialized per recorder, so concurrent repeats count correctly.
//! - If the Event of a series was deleted (events expire), the next repeat starts a new one.
//! - The recorder remembers at most [`MAX_SERIES`] series; the least recently seen is
//!   forgotten first (its next repeat starts a new Event).
//!
//! # Errors
//! Publishing fails only when the API server rejects the write; events are best-effort, so
//! callers usually log the error and carry on.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::{Event as KubeEvent, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use tokio::sync::Mutex;
use tokio::time::Instant;

/// A repeat later than this after the last one starts a new Event.
pub const SERIES_WINDOW: Duration = Duration::from_secs(6 * 60);

/// How many series a recorder remembers.
pub const MAX_SERIES: usize = 4096;

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

#[derive(Debug)]
struct Series {
    name: String,
    count: i32,
    last_seen: Instant,
}

/// Publishes Events for one reporter; cheap to clone (clones share series).
#[derive(Clone)]
pub struct Recorder {
    client: kube::Client,
    reporter: Reporter,
    series: Arc<Mutex<HashMap<SeriesKey, Series>>>,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder")
            .field("reporter", &self.reporter)
            .finish_non_exhaustive()
    }
}

impl Recorder {
    /// A recorder writing through `client` as `reporter`.
    pub fn new(client: kube::Client, reporter: Reporter) -> Self {
        Recorder {
            client,
            reporter,
            series: Arc::new(Mutex::new(HashMap::new())),
        }
    }

    /// Records `event` about the object `regarding` (get one with
    /// `kube::Resource::object_ref(&obj, &())`). The Event goes to the object's namespace,
    /// or `default` for cluster-scoped objects.
    pub async fn publish(&self, event: &Event, regarding: &ObjectReference) -> Result<(), Error> {
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
        // Held across the writes on purpose: repeats must be counted one at a time.
        let mut series = self.series.lock().await;
        if let Some(s) = series
            .get_mut(&key)
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
        if series.len() >= MAX_SERIES
            && !series.contains_key(&key)
            && let Some(oldest) = series
                .iter()
                .min_by_key(|(_, s)| s.last_seen)
                .map(|(k, _)| k.clone())
        {
            series.remove(&oldest);
        }
        series.insert(
            key,
            Series {
                name: created.metadata.name.unwrap_or_default(),
                count: 1,
                last_seen: now,
            },
        );
        Ok(())
    }
}
