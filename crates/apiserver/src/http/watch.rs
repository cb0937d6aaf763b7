//! Watch responses: the registry's typed events ([`crate::registry::watch`]) framed as
//! `{"type":…,"object":…}` lines, one per event, in a chunked body flushed as they come.
//!
//! The watch semantics (initial events, selector transitions, bookmarks, timeouts, 410 expiry)
//! are the registry's. This file frames: a history event the registry hands out as it is stored
//! goes out, on a plain JSON watch, as the line the history rendered once for all watchers
//! (fan-out costs one copy of a reference per watcher); other objects are rendered here in the
//! negotiated shape (the object, a `PartialObjectMetadata`, or a one-row `Table` with the
//! columns in the first only). Bookmarks and errors are never turned into Table rows.
//!
//! It also keeps the per-user bound on open watches ([`WatchSlots`]): it counts open
//! connections per user, a transport concern of the HTTP layer; the registry knows no users.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex, PoisonError};

use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use http::{HeaderValue, StatusCode, header};
use serde_json::json;

use super::App;
use super::error::ApiError;
use super::negotiate::Shape;
use super::render::{self, IncludeObject};
use super::resources::Query;
use crate::registry::Resource;
use crate::registry::list::ListParams;
use crate::registry::watch::{Event, EventKind, EventObject, WatchConfig};
use crate::storage::render_line;

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
    let config = WatchConfig {
        bookmark_interval: app.bookmark_interval,
        shutdown: app.shutdown.clone(),
    };
    let events = app.registry.watch(res, ns, params, config).await?;
    let framing = Framing {
        res: res.clone(),
        shape,
        include: IncludeObject::parse(q.get("includeObject").map(String::as_str)),
        columns_sent: false,
        _slot: slot,
        sent: app
            .metrics
            .watch_events(&res.group, &res.version, &res.kind),
    };
    let stream =
        futures::stream::unfold((events, framing), |(mut events, mut framing)| async move {
            loop {
                let event = events.next().await?;
                if let Some(line) = framing.line(event) {
                    framing.sent.inc();
                    return Some((Ok::<_, Infallible>(line), (events, framing)));
                }
            }
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

/// How one watch's events become lines.
struct Framing {
    res: Arc<Resource>,
    shape: Shape,
    include: IncludeObject,
    columns_sent: bool,
    /// The user's place among its open watches, given back when the stream ends.
    _slot: WatchSlot,
    /// `apiserver_watch_events_total` of this kind.
    sent: Arc<super::metrics::Counter>,
}

impl Framing {
    /// The line of an event in the negotiated shape; `None` when stored bytes do not parse.
    fn line(&mut self, event: Event) -> Option<Bytes> {
        let kind = event.kind;
        let obj = match (self.shape, event.object) {
            (Shape::Object, EventObject::Stored(e)) => return Some(e.json_line()),
            (_, object) => object.into_value()?,
        };
        let body = match (self.shape, kind) {
            (Shape::Object, _) | (_, EventKind::Error) | (Shape::Table(_), EventKind::Bookmark) => {
                obj
            }
            (Shape::Metadata, _) => render::partial_metadata(&obj),
            (Shape::Table(version), _) => {
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
        Some(render_line(
            kind.as_str(),
            &crate::api::encoding::to_vec(&body).unwrap_or_default(),
        ))
    }
}
