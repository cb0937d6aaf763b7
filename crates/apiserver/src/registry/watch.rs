//! `watch`: a collection's changes as a typed stream of [`Event`]s.
//!
//! [`Registry::watch`] checks the options, waits for a requested resourceVersion, and returns a
//! [`WatchStream`]. The stream starts with synthetic `ADDED` events for the current objects
//! (when no resourceVersion, `0`, or `sendInitialEvents` asks for them), then carries every
//! change after its starting revision from the storage history. Selector transitions become
//! `ADDED` and `DELETED`, as in Kubernetes. Bookmarks come when allowed: after the initial
//! events if `sendInitialEvents` asked for them (annotated `k8s.io/initial-events-end`), on a
//! quiet stream every `bookmark_interval`, and just before `timeoutSeconds` ends the stream. A
//! watcher that falls behind the history receives an `ERROR` event with a 410 Status and the
//! stream ends; clients re-list. Cancelling the shutdown token ends the stream.
//!
//! Objects are in served form. A change the history holds exactly as it is served (the kind
//! converts nothing and no selector turned it into another event type) is handed out as the
//! shared history event ([`EventObject::Stored`]), whose JSON line is rendered once for every
//! watcher; so fan-out to plain JSON watchers costs one reference count per watcher and no
//! allocation. Framing the events (JSON lines, Tables, metadata) is the HTTP layer's job.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::Registry;
use super::list::{ListParams, Selection};
use super::resource::Resource;
use super::validation::FieldError;
use crate::api::error::ApiError;
use crate::storage::{EventType, Storage, StorageError, WatchEvent, Watcher};

/// What a watch needs beyond its query: when to send bookmarks, and when to stop.
#[derive(Clone, Debug)]
pub struct WatchConfig {
    /// How often a quiet watch that allows bookmarks gets one.
    pub bookmark_interval: Duration,
    /// Ends the stream when cancelled (the server stops).
    pub shutdown: CancellationToken,
}

/// The type of a watch event, as Kubernetes names it on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventKind {
    /// An object appeared (or started to match the selectors).
    Added,
    /// An object changed.
    Modified,
    /// An object went away (or stopped matching the selectors).
    Deleted,
    /// No object changed; the object carries only a resourceVersion the client has seen.
    Bookmark,
    /// The stream failed; the object is a `Status` and the stream ends.
    Error,
}

impl EventKind {
    /// The wire name: `ADDED`, `MODIFIED`, `DELETED`, `BOOKMARK` or `ERROR`.
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::Added => "ADDED",
            EventKind::Modified => "MODIFIED",
            EventKind::Deleted => "DELETED",
            EventKind::Bookmark => "BOOKMARK",
            EventKind::Error => "ERROR",
        }
    }
}

impl From<EventType> for EventKind {
    fn from(t: EventType) -> Self {
        match t {
            EventType::Added => EventKind::Added,
            EventType::Modified => EventKind::Modified,
            EventType::Deleted => EventKind::Deleted,
        }
    }
}

/// The object of a watch event.
#[derive(Clone, Debug)]
pub enum EventObject {
    /// The history's event itself: its type is the event's type and its object is already in
    /// served form, so its JSON line ([`WatchEvent::json_line`]) can be sent as it is.
    Stored(Arc<WatchEvent>),
    /// An object in served form (a converted or transitioned object, an initial object, a
    /// bookmark, or the `Status` of an error).
    Value(Value),
}

impl EventObject {
    /// The object as JSON (parsing the stored bytes for [`EventObject::Stored`]); `None` when
    /// stored bytes do not parse.
    pub fn into_value(self) -> Option<Value> {
        match self {
            EventObject::Stored(e) => serde_json::from_slice(&e.object).ok(),
            EventObject::Value(v) => Some(v),
        }
    }
}

/// One watch event: what happened, and to which object.
#[derive(Clone, Debug)]
pub struct Event {
    /// The event type.
    pub kind: EventKind,
    /// The object, in served form.
    pub object: EventObject,
}

impl Event {
    fn value(kind: EventKind, object: Value) -> Self {
        Event {
            kind,
            object: EventObject::Value(object),
        }
    }
}

/// The events of one watch, in order; see the module docs.
#[derive(Debug)]
pub struct WatchStream {
    res: Arc<Resource>,
    selection: Selection,
    watcher: Option<Watcher>,
    pending: VecDeque<Event>,
    bookmarks: bool,
    bookmark_interval: Duration,
    shutdown: CancellationToken,
    deadline: Option<Instant>,
    done: bool,
}

fn invalid(detail: &str, field: &str) -> ApiError {
    ApiError::invalid_options("ListOptions", vec![FieldError::forbidden(field, detail)])
}

fn expired(requested: u64, oldest: u64) -> Event {
    let status = ApiError::Expired {
        message: format!("too old resource version: {requested} ({oldest})"),
        continue_token: None,
    }
    .status();
    Event::value(EventKind::Error, status)
}

impl Registry {
    /// `GET` a collection with `watch`: the checked options open a [`WatchStream`].
    ///
    /// # Errors
    /// 422 for `sendInitialEvents` without `resourceVersionMatch=NotOlderThan` and for
    /// `resourceVersionMatch` without `sendInitialEvents`; 400 for bad selectors or a
    /// resourceVersion that is not a number; 504 (Timeout) when a future
    /// resourceVersion does not arrive in time; the initial list's errors. A start revision
    /// older than the history is no error: the stream carries one 410 `ERROR` event.
    pub async fn watch(
        &self,
        res: &Arc<Resource>,
        ns: Option<&str>,
        params: &ListParams,
        config: WatchConfig,
    ) -> Result<WatchStream, ApiError> {
        let rv_match = params
            .resource_version_match
            .as_deref()
            .filter(|s| !s.is_empty());
        let send_initial = params.send_initial_events;
        match (send_initial, rv_match) {
            (Some(true), m) if m != Some("NotOlderThan") => {
                return Err(invalid(
                    "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
                    "sendInitialEvents",
                ));
            }
            (None, Some(_)) => {
                return Err(invalid(
                    "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
                    "resourceVersionMatch",
                ));
            }
            _ => {}
        }
        let selection = Selection::new(res, params)?;
        let rv = params.resource_version.as_deref().filter(|s| !s.is_empty());
        let requested =
            match rv {
                None | Some("0") => None,
                Some(v) => Some(v.parse::<u64>().map_err(|_| {
                    ApiError::BadRequest(format!("invalid resource version: {v:?}"))
                })?),
            };
        if let Some(n) = requested {
            self.wait_for_rv(n).await?;
        }
        let wants_initial = send_initial.unwrap_or(requested.is_none());
        let mut stream = WatchStream {
            res: res.clone(),
            selection,
            watcher: None,
            pending: VecDeque::new(),
            bookmarks: params.allow_watch_bookmarks,
            bookmark_interval: config.bookmark_interval,
            shutdown: config.shutdown,
            // A timeout past what the clock can represent (`timeoutSeconds=9223372036854775807`)
            // is no timeout at all.
            deadline: params
                .timeout_seconds
                .and_then(|t| Instant::now().checked_add(Duration::from_secs(t))),
            done: false,
        };
        let start = if wants_initial {
            let snapshot_params = ListParams {
                label_selector: params.label_selector.clone(),
                field_selector: params.field_selector.clone(),
                ..Default::default()
            };
            let out = self.list(res, ns, &snapshot_params).await?;
            for item in &out.items {
                if let Ok(v) = serde_json::from_slice::<Value>(item) {
                    stream.pending.push_back(Event::value(EventKind::Added, v));
                }
            }
            if send_initial == Some(true) && stream.bookmarks {
                let bookmark = stream.bookmark(out.rv, true);
                stream.pending.push_back(bookmark);
            }
            out.rv
        } else {
            requested.unwrap_or_else(|| self.store().current_rv())
        };
        let prefix = res.collection_prefix(ns);
        // A watch of one object (`fieldSelector=metadata.name=…`, as `kubectl wait` and
        // client-go's single-object informers send) sleeps through writes to other names.
        let watched = match stream.selection.only_name() {
            Some(name) => self.store().watch_name(&prefix, name, start),
            None => self.store().watch(&prefix, start),
        };
        match watched {
            Ok(w) => stream.watcher = Some(w),
            Err(StorageError::Expired { requested, oldest }) => {
                stream.pending.push_back(expired(requested, oldest));
                stream.done = true;
            }
            Err(e) => return Err(ApiError::from_storage(e, &res.group_resource(), "")),
        }
        Ok(stream)
    }
}

impl WatchStream {
    /// The next event; `None` once the stream has ended (timeout, shutdown, an `ERROR` event
    /// sent, or the history closed).
    ///
    /// Cancel-safe: dropping the future loses no event and does not end the stream.
    pub async fn next(&mut self) -> Option<Event> {
        enum Woke {
            Stop,
            TimedOut(Result<u64, StorageError>),
            Bookmark(Result<u64, StorageError>),
            Event(Result<Arc<WatchEvent>, StorageError>),
        }
        loop {
            if let Some(event) = self.pending.pop_front() {
                return Some(event);
            }
            if self.done {
                return None;
            }
            let watcher = self.watcher.as_mut()?;
            let shutdown = self.shutdown.clone();
            let woke = tokio::select! {
                biased;
                () = shutdown.cancelled() => Woke::Stop,
                () = sleep_until(self.deadline) => Woke::TimedOut(watcher.progress()),
                () = tokio::time::sleep(self.bookmark_interval), if self.bookmarks => {
                    Woke::Bookmark(watcher.progress())
                }
                next = watcher.next() => Woke::Event(next),
            };
            match woke {
                Woke::Stop => return None,
                // A last bookmark lets the client re-watch from the newest revision it saw.
                Woke::TimedOut(Ok(rv)) if self.bookmarks => {
                    self.done = true;
                    return Some(self.bookmark(rv, false));
                }
                Woke::TimedOut(Ok(_)) => return None,
                Woke::Bookmark(Ok(rv)) => return Some(self.bookmark(rv, false)),
                Woke::Event(Ok(event)) => {
                    if let Some(event) = self.event(event) {
                        return Some(event);
                    }
                }
                Woke::TimedOut(Err(StorageError::Expired { requested, oldest }))
                | Woke::Bookmark(Err(StorageError::Expired { requested, oldest }))
                | Woke::Event(Err(StorageError::Expired { requested, oldest })) => {
                    self.done = true;
                    return Some(expired(requested, oldest));
                }
                Woke::TimedOut(Err(_)) | Woke::Bookmark(Err(_)) | Woke::Event(Err(_)) => {
                    return None;
                }
            }
        }
    }

    /// A bookmark at `rv`: an object of the watched kind carrying only its resourceVersion.
    fn bookmark(&self, rv: u64, initial_end: bool) -> Event {
        let mut meta = json!({"resourceVersion": rv.to_string(), "creationTimestamp": null});
        if initial_end {
            meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        let obj = json!({
            "kind": self.res.kind,
            "apiVersion": self.res.api_version(),
            "metadata": meta,
        });
        Event::value(EventKind::Bookmark, obj)
    }

    /// The event a history change is for this watcher, or `None` when it is filtered out.
    fn event(&self, e: Arc<WatchEvent>) -> Option<Event> {
        let plain = !self.res.strategy.converts();
        if plain && self.selection.is_everything() {
            return Some(Event {
                kind: e.kind.into(),
                object: EventObject::Stored(e),
            });
        }
        let current: Value = serde_json::from_slice(&e.object).ok()?;
        let (kind, obj) = if self.selection.is_everything() {
            (EventKind::from(e.kind), current)
        } else {
            let now = self.selection.matches(&self.res, &current);
            let before = e
                .prev
                .as_ref()
                .and_then(|p| serde_json::from_slice::<Value>(&p.bytes).ok())
                .is_some_and(|p| self.selection.matches(&self.res, &p));
            match (e.kind, before, now) {
                (EventType::Added, _, true) => (EventKind::Added, current),
                (EventType::Modified, true, true) => (EventKind::Modified, current),
                (EventType::Modified, false, true) => (EventKind::Added, current),
                (EventType::Modified, true, false) => {
                    let mut prev: Value = e
                        .prev
                        .as_ref()
                        .and_then(|p| serde_json::from_slice(&p.bytes).ok())?;
                    crate::storage::set_resource_version(&mut prev, e.rv);
                    (EventKind::Deleted, prev)
                }
                (EventType::Deleted, _, true) => (EventKind::Deleted, current),
                _ => return None,
            }
        };
        if plain && kind == EventKind::from(e.kind) {
            return Some(Event {
                kind,
                object: EventObject::Stored(e),
            });
        }
        Some(Event::value(kind, self.res.strategy.to_served(obj)))
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests;
