//! Watch streams: `{"type":…,"object":…}` lines, one per change, flushed as they come.
//!
//! A stream starts with synthetic `ADDED` events for the current objects (when no
//! resourceVersion, `0`, or `sendInitialEvents` asks for them), then carries every change after
//! its starting revision from the storage history. Selector transitions become `ADDED` and
//! `DELETED`, as in Kubernetes. Bookmarks are sent when allowed (after the initial events, if
//! asked, on a quiet stream every `bookmark_interval`, and just before `timeoutSeconds` ends the
//! stream). A watcher that falls behind the
//! history receives an `ERROR` event with a 410 Status and the stream ends; clients re-list.
//!
//! Plain JSON watches without selectors send the event line the history rendered once for all
//! watchers, so fan-out costs one copy of a reference per watcher.

use std::collections::{HashMap, VecDeque};
use std::convert::Infallible;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use http::{HeaderValue, StatusCode, header};
use serde_json::{Value, json};
use tokio::time::Instant;

use super::App;
use super::error::ApiError;
use super::negotiate::Shape;
use super::render::{self, IncludeObject};
use super::resources::Query;
use crate::registry::Resource;
use crate::registry::list::{ListParams, Selection};
use crate::registry::validation::FieldError;
use crate::storage::{EventType, Storage, StorageError, WatchEvent, Watcher, render_line};

fn invalid(detail: &str, field: &str) -> ApiError {
    ApiError::invalid_options("ListOptions", vec![FieldError::forbidden(field, detail)])
}

/// Serves a watch request on a collection.
pub(crate) async fn serve(
    app: &Arc<App>,
    res: &Arc<Resource>,
    ns: Option<&str>,
    params: &ListParams,
    shape: Shape,
    q: &Query,
    slot: WatchSlot,
) -> Result<Response, ApiError> {
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
    let requested = match rv {
        None | Some("0") => None,
        Some(v) => Some(
            v.parse::<u64>()
                .map_err(|_| ApiError::BadRequest(format!("invalid resource version: {v:?}")))?,
        ),
    };
    if let Some(n) = requested {
        app.registry.wait_for_rv(n).await?;
    }
    let wants_initial = match send_initial {
        Some(flag) => flag,
        None => requested.is_none(),
    };
    let mut state = Stream {
        app: app.clone(),
        res: res.clone(),
        selection,
        shape,
        include: IncludeObject::parse(q.get("includeObject").map(String::as_str)),
        watcher: None,
        pending: VecDeque::new(),
        columns_sent: false,
        bookmarks: params.allow_watch_bookmarks,
        // A timeout past what the clock can represent (`timeoutSeconds=9223372036854775807`)
        // is no timeout at all.
        _slot: slot,
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
        let out = app.registry.list(res, ns, &snapshot_params).await?;
        for item in &out.items {
            if let Ok(v) = serde_json::from_slice::<Value>(item) {
                let line = state.line("ADDED", v);
                state.pending.push_back(line);
            }
        }
        if send_initial == Some(true) && state.bookmarks {
            let bookmark = state.bookmark(out.rv, true);
            state.pending.push_back(bookmark);
        }
        out.rv
    } else {
        requested.unwrap_or_else(|| app.registry.store().current_rv())
    };
    match app
        .registry
        .store()
        .watch(&res.collection_prefix(ns), start)
    {
        Ok(w) => state.watcher = Some(w),
        Err(StorageError::Expired { requested, oldest }) => {
            state.pending.push_back(expired_line(requested, oldest));
            state.done = true;
        }
        Err(e) => return Err(ApiError::from_storage(e, &res.group_resource(), "")),
    }
    let stream = futures::stream::unfold(state, |mut st| async move {
        st.next_chunk()
            .await
            .map(|chunk| (Ok::<_, Infallible>(chunk), st))
    });
    let mut resp = Response::new(Body::from_stream(stream));
    *resp.status_mut() = StatusCode::OK;
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    Ok(resp)
}

/// How many watches each user has open, bounded per user.
#[derive(Debug)]
pub struct WatchSlots {
    limit: usize,
    open: Arc<Mutex<HashMap<String, usize>>>,
}

/// One open watch of one user; dropping it (the stream ended) gives the place back.
#[derive(Debug)]
pub struct WatchSlot {
    open: Arc<Mutex<HashMap<String, usize>>>,
    user: String,
}

impl WatchSlots {
    /// Slots for at most `limit` open watches per user.
    pub fn new(limit: usize) -> Self {
        WatchSlots {
            limit,
            open: Arc::default(),
        }
    }

    /// Takes a place for a new watch of `user` (requests with no user, in-process ones
    /// included, count as one anonymous user).
    ///
    /// # Errors
    /// [`ApiError::TooManyRequests`] (429) when the user already has `limit` watches open.
    pub fn acquire(&self, user: Option<&super::User>) -> Result<WatchSlot, ApiError> {
        let name = user.map_or("", |u| u.name.as_str());
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        let count = open.entry(name.to_string()).or_default();
        if *count >= self.limit {
            return Err(ApiError::TooManyRequests(format!(
                "too many watches open by {name:?}: the limit is {} per user; close some or retry later",
                self.limit
            )));
        }
        *count += 1;
        Ok(WatchSlot {
            open: self.open.clone(),
            user: name.to_string(),
        })
    }
}

impl Drop for WatchSlot {
    fn drop(&mut self) {
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(count) = open.get_mut(&self.user) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                open.remove(&self.user);
            }
        }
    }
}

fn expired_line(requested: u64, oldest: u64) -> Bytes {
    let status = ApiError::Expired {
        message: format!("too old resource version: {requested} ({oldest})"),
        continue_token: None,
    }
    .status();
    render_line("ERROR", status.to_string().as_bytes())
}

struct Stream {
    app: Arc<App>,
    res: Arc<Resource>,
    selection: Selection,
    shape: Shape,
    include: IncludeObject,
    watcher: Option<Watcher>,
    pending: VecDeque<Bytes>,
    columns_sent: bool,
    bookmarks: bool,
    /// The user's place among its open watches, given back when the stream ends.
    _slot: WatchSlot,
    deadline: Option<Instant>,
    done: bool,
}

impl Stream {
    /// Renders an event line for an object in served form.
    fn line(&mut self, kind: &str, obj: Value) -> Bytes {
        let body = match self.shape {
            Shape::Object => obj,
            Shape::Metadata => render::partial_metadata(&obj),
            Shape::Table(version) => {
                let with_columns = !self.columns_sent;
                self.columns_sent = true;
                let mut t = render::table(
                    &self.res,
                    version,
                    std::slice::from_ref(&obj),
                    None,
                    self.include,
                    with_columns,
                );
                t["metadata"] = json!({"resourceVersion": obj["metadata"]["resourceVersion"]});
                t
            }
        };
        render_line(kind, body.to_string().as_bytes())
    }

    fn bookmark(&self, rv: u64, initial_end: bool) -> Bytes {
        let (kind, api_version) = match self.shape {
            Shape::Metadata => (
                "PartialObjectMetadata".to_string(),
                "meta.k8s.io/v1".to_string(),
            ),
            _ => (self.res.kind.clone(), self.res.api_version()),
        };
        let mut meta = json!({"resourceVersion": rv.to_string(), "creationTimestamp": null});
        if initial_end {
            meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        let obj = json!({"kind": kind, "apiVersion": api_version, "metadata": meta});
        render_line("BOOKMARK", obj.to_string().as_bytes())
    }

    /// Renders a storage event for this watcher, or `None` when it is filtered out.
    fn event_line(&mut self, e: &WatchEvent) -> Option<Bytes> {
        let plain = self.shape == Shape::Object && !self.res.strategy.converts();
        if plain && self.selection.is_everything() {
            return Some(e.json_line());
        }
        let current: Value = serde_json::from_slice(&e.object).ok()?;
        let (kind, obj) = if self.selection.is_everything() {
            (e.kind.as_str(), current)
        } else {
            let now = self.selection.matches(&self.res, &current);
            let before = e
                .prev
                .as_ref()
                .and_then(|p| serde_json::from_slice::<Value>(&p.bytes).ok())
                .is_some_and(|p| self.selection.matches(&self.res, &p));
            match (e.kind, before, now) {
                (EventType::Added, _, true) => ("ADDED", current),
                (EventType::Modified, true, true) => ("MODIFIED", current),
                (EventType::Modified, false, true) => ("ADDED", current),
                (EventType::Modified, true, false) => {
                    let mut prev: Value = e
                        .prev
                        .as_ref()
                        .and_then(|p| serde_json::from_slice(&p.bytes).ok())?;
                    crate::storage::set_resource_version(&mut prev, e.rv);
                    ("DELETED", prev)
                }
                (EventType::Deleted, _, true) => ("DELETED", current),
                _ => return None,
            }
        };
        if plain && kind == e.kind.as_str() {
            return Some(e.json_line());
        }
        let served = self.res.strategy.to_served(obj);
        Some(self.line(kind, served))
    }

    async fn next_chunk(&mut self) -> Option<Bytes> {
        enum Woke {
            Stop,
            TimedOut(Result<u64, StorageError>),
            Bookmark(Result<u64, StorageError>),
            Event(Result<Arc<WatchEvent>, StorageError>),
        }
        loop {
            if let Some(line) = self.pending.pop_front() {
                return Some(line);
            }
            if self.done {
                return None;
            }
            let mut watcher = self.watcher.take()?;
            let shutdown = self.app.shutdown.clone();
            let woke = tokio::select! {
                biased;
                () = shutdown.cancelled() => Woke::Stop,
                () = sleep_until(self.deadline) => Woke::TimedOut(watcher.progress()),
                () = tokio::time::sleep(self.app.bookmark_interval), if self.bookmarks => {
                    Woke::Bookmark(watcher.progress())
                }
                next = watcher.next() => Woke::Event(next),
            };
            self.watcher = Some(watcher);
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
                    if let Some(line) = self.event_line(&event) {
                        return Some(line);
                    }
                }
                Woke::TimedOut(Err(StorageError::Expired { requested, oldest }))
                | Woke::Bookmark(Err(StorageError::Expired { requested, oldest }))
                | Woke::Event(Err(StorageError::Expired { requested, oldest })) => {
                    self.done = true;
                    return Some(expired_line(requested, oldest));
                }
                Woke::TimedOut(Err(_)) | Woke::Bookmark(Err(_)) | Woke::Event(Err(_)) => {
                    return None;
                }
            }
        }
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}
