//! The list/watch protocol as an explicit state machine.
//!
//! ```text
//!   Empty ──Init──▶ Listing(continue) ──InitApply(page)──▶ … ──▶ Listed(rv) ──InitDone──▶
//!   Connecting(rv) ──open──▶ Watching(rv, lines) ──Applied/Deleted/bookmark──▶ Watching(rv')
//!        ▲                         │ stream ends (timeout, server closed)
//!        └─────────────────────────┘
//!   410 Gone anywhere ──▶ Empty (full relist)
//!   other errors: state kept, error returned, the caller backs off and steps again
//! ```
//!
//! [`Watcher::step`] performs one transition and returns at most one event. It never sleeps;
//! the informer loop owns backoff and cancellation.

use std::borrow::Cow;
use std::pin::Pin;

use futures::{AsyncBufReadExt, Stream, StreamExt};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Status;
use kube::api::{ListParams, WatchParams};
use kube::core::Request;
use serde_json::Value;

use super::{Error, Informable, InformerConfig};
use crate::cache::{Listed, ObjectKey, Packed, Store, parse_rv};

type Lines = Pin<Box<dyn Stream<Item = std::io::Result<String>> + Send>>;

/// Where the watcher is in the protocol.
pub(crate) enum State {
    /// Nothing listed yet, or the history the watcher relied on is gone.
    Empty,
    /// Paging through the initial list.
    Listing {
        /// The continue token of the next page (`None` for the first page).
        continue_token: Option<String>,
    },
    /// The list is complete at this resourceVersion.
    Listed {
        /// The list's resourceVersion.
        rv: String,
    },
    /// About to open a watch from this resourceVersion.
    Connecting {
        /// The newest resourceVersion seen.
        rv: String,
    },
    /// Reading watch events.
    Watching {
        /// The newest resourceVersion seen.
        rv: String,
        /// The watch response, one JSON event per line.
        lines: Lines,
    },
}

impl std::fmt::Debug for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            State::Empty => f.write_str("Empty"),
            State::Listing { continue_token } => f
                .debug_struct("Listing")
                .field("continue_token", continue_token)
                .finish(),
            State::Listed { rv } => f.debug_struct("Listed").field("rv", rv).finish(),
            State::Connecting { rv } => f.debug_struct("Connecting").field("rv", rv).finish(),
            State::Watching { rv, .. } => f.debug_struct("Watching").field("rv", rv).finish(),
        }
    }
}

/// What one step produced.
pub(crate) enum Event<K> {
    /// A full list starts: buffer what follows.
    Init,
    /// Objects of the list being built.
    InitApply(Vec<Listed>),
    /// The list is complete: swap it in.
    InitDone {
        /// The list's resourceVersion.
        rv: u64,
    },
    /// A watch opened (the informer is healthy).
    Connected,
    /// An object was created or updated.
    Applied(Packed<K>),
    /// An object was deleted (its last state).
    Deleted(Packed<K>),
    /// The server reports progress without a change.
    Bookmark {
        /// The bookmark's resourceVersion.
        rv: u64,
    },
}

/// Lists then watches one kind into packed objects.
pub(crate) struct Watcher<K> {
    ctx: Ctx<K>,
    state: State,
}

/// What every transition reads: shared with no state, so it is `Sync`.
struct Ctx<K> {
    client: kube::Client,
    config: InformerConfig,
    store: Store<K>,
    metadata_only: bool,
    url: String,
}

/// A watch event's object: packed when the event carries one of the kind's objects and its
/// type came first (as servers write it), else the JSON as sent.
enum LineObject<K> {
    Packed(Packed<K>),
    Json(Value),
}

/// One watch event, parsed and packed in one pass.
struct WatchLine<K> {
    kind: String,
    object: Option<LineObject<K>>,
}

/// Whether a watch event of this type carries one of the kind's objects.
fn carries_object(kind: &str) -> bool {
    matches!(kind, "ADDED" | "MODIFIED" | "DELETED")
}

/// What a watch line says about its object's identity, read without building the object
/// (every other field is skipped unparsed): enough to find an echo in the cache
/// ([`Ctx::echo`]).
#[derive(serde::Deserialize)]
struct PeekLine<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(borrow)]
    object: Option<PeekObject<'a>>,
}

#[derive(serde::Deserialize)]
struct PeekObject<'a> {
    #[serde(borrow)]
    metadata: Option<PeekMeta<'a>>,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct PeekMeta<'a> {
    #[serde(borrow)]
    name: Option<Cow<'a, str>>,
    #[serde(borrow)]
    namespace: Option<Cow<'a, str>>,
    #[serde(borrow)]
    resource_version: Option<Cow<'a, str>>,
}

/// Parses a watch line, packing its object as it is parsed.
struct LineSeed<'a, K> {
    ctx: &'a Ctx<K>,
}

impl<'de, K: Informable> serde::de::DeserializeSeed<'de> for LineSeed<'_, K> {
    type Value = WatchLine<K>;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<WatchLine<K>, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de, K: Informable> serde::de::Visitor<'de> for LineSeed<'_, K> {
    type Value = WatchLine<K>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a watch event")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<WatchLine<K>, A::Error> {
        let mut kind: Option<String> = None;
        let mut object = None;
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            match &*key {
                "type" => kind = Some(map.next_value()?),
                "object" => {
                    object = Some(match kind.as_deref() {
                        Some(k) if carries_object(k) => {
                            LineObject::Packed(map.next_value_seed(IngestSeed {
                                ctx: self.ctx,
                                event: true,
                            })?)
                        }
                        _ => LineObject::Json(map.next_value()?),
                    });
                }
                _ => {
                    map.next_value::<serde::de::IgnoredAny>()?;
                }
            }
        }
        let kind = kind.ok_or_else(|| serde::de::Error::missing_field("type"))?;
        Ok(WatchLine { kind, object })
    }
}

/// Parses one object and packs it as the informer caches it.
struct IngestSeed<'a, K> {
    ctx: &'a Ctx<K>,
    /// A watch event's object: left unpacked when the cache already holds this version or a
    /// newer one (see `Store::pack_event`). A listed object is always packed.
    event: bool,
}

impl<'de, K: Informable> serde::de::DeserializeSeed<'de> for IngestSeed<'_, K> {
    type Value = Packed<K>;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Packed<K>, D::Error> {
        self.ctx.config.ingest(&self.ctx.store, d, self.event)
    }
}

/// Parses a list page, packing each item as soon as it is parsed.
struct PageSeed<'a, K> {
    ctx: &'a Ctx<K>,
    items: &'a mut Vec<Listed>,
}

impl<'de, K> serde::de::DeserializeSeed<'de> for PageSeed<'_, K>
where
    K: Informable,
{
    type Value = ListMeta;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<ListMeta, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de, K> serde::de::Visitor<'de> for PageSeed<'_, K>
where
    K: Informable,
{
    type Value = ListMeta;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a list object")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<ListMeta, A::Error> {
        let mut meta = ListMeta::default();
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            match &*key {
                "metadata" => meta = map.next_value()?,
                "items" => map.next_value_seed(ItemsSeed {
                    ctx: self.ctx,
                    items: &mut *self.items,
                })?,
                _ => {
                    map.next_value::<serde::de::IgnoredAny>()?;
                }
            }
        }
        Ok(meta)
    }
}

struct ItemsSeed<'a, K> {
    ctx: &'a Ctx<K>,
    items: &'a mut Vec<Listed>,
}

impl<'de, K> serde::de::DeserializeSeed<'de> for ItemsSeed<'_, K>
where
    K: Informable,
{
    type Value = ();

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de, K> serde::de::Visitor<'de> for ItemsSeed<'_, K>
where
    K: Informable,
{
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a list of objects")
    }

    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        if let Some(n) = seq.size_hint() {
            self.items.reserve(n);
        }
        while let Some(packed) = seq.next_element_seed(IngestSeed {
            ctx: self.ctx,
            event: false,
        })? {
            self.items.push(self.ctx.store.listed(packed));
        }
        Ok(())
    }
}

#[derive(serde::Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct ListMeta {
    resource_version: Option<String>,
    #[serde(rename = "continue")]
    continue_token: Option<String>,
}

fn is_gone(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 410)
}

impl<K> Watcher<K>
where
    K: Informable,
{
    pub(crate) fn new(client: kube::Client, config: InformerConfig, store: Store<K>) -> Self {
        let url = K::url_path(&(), config.namespace.as_deref());
        Watcher {
            ctx: Ctx {
                client,
                config,
                store,
                metadata_only: K::metadata_api(),
                url,
            },
            state: State::Empty,
        }
    }

    /// The current state (for logs and tests).
    pub(crate) fn state(&self) -> &State {
        &self.state
    }

    /// Performs one transition. `Ok(None)` means the step produced no event (keep stepping).
    pub(crate) async fn step(&mut self) -> Result<Option<Event<K>>, Error> {
        let state = std::mem::replace(&mut self.state, State::Empty);
        let (event, next) = self.ctx.transition(state).await;
        self.state = next;
        event
    }
}

impl<K> Ctx<K>
where
    K: Informable,
{
    async fn transition(&self, state: State) -> (Result<Option<Event<K>>, Error>, State) {
        match state {
            State::Empty => (
                Ok(Some(Event::Init)),
                State::Listing {
                    continue_token: None,
                },
            ),
            State::Listing { continue_token } => match self.list_page(&continue_token).await {
                Ok((items, Some(next), _)) => (
                    Ok(Some(Event::InitApply(items))),
                    State::Listing {
                        continue_token: Some(next),
                    },
                ),
                Ok((items, None, rv)) => (Ok(Some(Event::InitApply(items))), State::Listed { rv }),
                Err(Error::InitialListFailed(e)) if is_gone(&e) => {
                    tracing::info!(url = %self.url, "list continuation expired, listing again");
                    (Ok(None), State::Empty)
                }
                Err(e) => (Err(e), State::Listing { continue_token }),
            },
            State::Listed { rv } => (
                Ok(Some(Event::InitDone {
                    rv: parse_rv(Some(&rv)),
                })),
                State::Connecting { rv },
            ),
            State::Connecting { rv } => match self.open_watch(&rv).await {
                Ok(lines) => (Ok(Some(Event::Connected)), State::Watching { rv, lines }),
                Err(Error::WatchStartFailed(e)) if is_gone(&e) => {
                    tracing::info!(url = %self.url, %rv, "watch history compacted, relisting");
                    (Ok(None), State::Empty)
                }
                Err(e) => (Err(e), State::Connecting { rv }),
            },
            State::Watching { rv, mut lines } => match lines.next().await {
                None => (Ok(None), State::Connecting { rv }),
                Some(Err(e)) => (Err(Error::WatchFailed(e)), State::Connecting { rv }),
                Some(Ok(line)) if line.trim().is_empty() => {
                    (Ok(None), State::Watching { rv, lines })
                }
                Some(Ok(line)) => self.watch_line(&line, rv, lines),
            },
        }
    }

    fn watch_line(
        &self,
        line: &str,
        rv: String,
        lines: Lines,
    ) -> (Result<Option<Event<K>>, Error>, State) {
        if self.store.expects_echoes(parse_rv(Some(&rv)))
            && let Some((packed, rv)) = self.echo(line)
        {
            return (
                Ok(Some(Event::Applied(packed))),
                State::Watching { rv, lines },
            );
        }
        let mut de = serde_json::Deserializer::from_str(line);
        let parsed = serde::de::DeserializeSeed::deserialize(LineSeed { ctx: self }, &mut de)
            .and_then(|p| de.end().map(|()| p));
        let parsed = match parsed {
            Ok(p) => p,
            // Well-formed JSON whose object is not a `K`: skip the event, keep watching.
            Err(e) if e.classify() == serde_json::error::Category::Data => {
                return (
                    Err(Error::Decode(Box::new(e))),
                    State::Watching { rv, lines },
                );
            }
            Err(e) => return (Err(Error::Decode(Box::new(e))), State::Connecting { rv }),
        };
        let object = match parsed.object {
            // The object came before the type: pack it now.
            Some(LineObject::Json(value)) if carries_object(&parsed.kind) => {
                match self.config.ingest(&self.store, value, true) {
                    Ok(p) => LineObject::Packed(p),
                    Err(e) => {
                        return (
                            Err(Error::Decode(Box::new(e))),
                            State::Watching { rv, lines },
                        );
                    }
                }
            }
            Some(o) => o,
            None => LineObject::Json(Value::Null),
        };
        let new_rv = match &object {
            LineObject::Packed(p) => p.obj.meta().resource_version.clone(),
            LineObject::Json(v) => v
                .pointer("/metadata/resourceVersion")
                .and_then(Value::as_str)
                .map(str::to_string),
        };
        match parsed.kind.as_str() {
            "ERROR" => {
                let status: Status = match object {
                    LineObject::Json(v) => serde_json::from_value(v).unwrap_or_default(),
                    LineObject::Packed(_) => Status::default(),
                };
                if status.code == Some(410) {
                    tracing::info!(url = %self.url, %rv, "watch history compacted, relisting");
                    return (Ok(None), State::Empty);
                }
                (
                    Err(Error::WatchError(Box::new(status))),
                    State::Connecting { rv },
                )
            }
            kind => {
                let rv = new_rv.unwrap_or(rv);
                if kind == "BOOKMARK" {
                    let event = Event::Bookmark {
                        rv: parse_rv(Some(&rv)),
                    };
                    return (Ok(Some(event)), State::Watching { rv, lines });
                }
                let LineObject::Packed(packed) = object else {
                    let e = format!("a watch event of type {kind:?} without an object");
                    return (Err(Error::Decode(e.into())), State::Watching { rv, lines });
                };
                let event = match kind {
                    "DELETED" => Event::Deleted(packed),
                    _ => Event::Applied(packed),
                };
                (Ok(Some(event)), State::Watching { rv, lines })
            }
        }
    }

    /// A watch line that adds or modifies an object at the version the cache holds, with its
    /// decoded object at hand: the echo of a write a `CachedClient` recorded, in the common
    /// case. It is checked to be well-formed JSON, and only the object's name, namespace and
    /// resourceVersion are read; the event carries the cached object (the one subscribers of
    /// a parsed echo got as well), so the object is never parsed. Returns the event's object
    /// and its resourceVersion.
    fn echo(&self, line: &str) -> Option<(Packed<K>, String)> {
        let peek: PeekLine<'_> = serde_json::from_str(line).ok()?;
        if !matches!(&*peek.kind, "ADDED" | "MODIFIED") {
            return None;
        }
        let meta = peek.object?.metadata?;
        let name = meta.name?;
        let rv = meta.resource_version?;
        let key = ObjectKey::of_meta(meta.namespace.as_deref(), &name);
        let packed = self.store.echo(key.as_str(), parse_rv(Some(&rv)))?;
        Some((packed, rv.into_owned()))
    }

    async fn list_page(
        &self,
        continue_token: &Option<String>,
    ) -> Result<(Vec<Listed>, Option<String>, String), Error> {
        let mut lp = ListParams::default();
        lp.label_selector.clone_from(&self.config.label_selector);
        lp.field_selector.clone_from(&self.config.field_selector);
        if self.config.page_size > 0 {
            lp.limit = Some(self.config.page_size);
        }
        lp.continue_token.clone_from(continue_token);
        let request = Request::new(&self.url);
        let request = if self.metadata_only {
            request.list_metadata(&lp)
        } else {
            request.list(&lp)
        }
        .map_err(Error::BuildRequest)?;
        let text = self
            .client
            .request_text(request)
            .await
            .map_err(Error::InitialListFailed)?;
        // Pack each item as it is parsed, so a page never exists as a tree of values.
        let mut items = Vec::new();
        let mut de = serde_json::Deserializer::from_str(&text);
        let meta = serde::de::DeserializeSeed::deserialize(
            PageSeed {
                ctx: self,
                items: &mut items,
            },
            &mut de,
        )
        .map_err(|e| Error::Decode(Box::new(e)))?;
        let next = meta.continue_token.filter(|c| !c.is_empty());
        Ok((items, next, meta.resource_version.unwrap_or_default()))
    }

    async fn open_watch(&self, rv: &str) -> Result<Lines, Error> {
        let mut wp = WatchParams::default()
            .timeout(u32::try_from(self.config.watch_timeout.as_secs()).unwrap_or(290));
        wp.label_selector.clone_from(&self.config.label_selector);
        wp.field_selector.clone_from(&self.config.field_selector);
        wp.bookmarks = true;
        let request = Request::new(&self.url);
        let mut request = if self.metadata_only {
            request.watch_metadata(&wp, rv)
        } else {
            request.watch(&wp, rv)
        }
        .map_err(Error::BuildRequest)?;
        request.headers_mut().insert(
            http::header::ACCEPT_ENCODING,
            http::HeaderValue::from_static("identity"),
        );
        let body = self
            .client
            .request_stream(request)
            .await
            .map_err(Error::WatchStartFailed)?;
        Ok(Box::pin(body.lines()))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;
    use std::sync::{Arc, Mutex};
    use std::task::{Context, Poll};

    use futures::future::BoxFuture;
    use k8s_openapi::api::core::v1::ConfigMap;

    use super::*;

    /// Answers requests in order from a script of (status, body), recording each request's
    /// path and query.
    #[derive(Clone, Default)]
    struct Script {
        answers: Arc<Mutex<VecDeque<(u16, String)>>>,
        seen: Arc<Mutex<Vec<String>>>,
    }

    impl tower::Service<http::Request<kube::client::Body>> for Script {
        type Response = http::Response<axum::body::Body>;
        type Error = Box<dyn std::error::Error + Send + Sync>;
        type Future = BoxFuture<'static, Result<Self::Response, Self::Error>>;

        fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, req: http::Request<kube::client::Body>) -> Self::Future {
            self.seen
                .lock()
                .expect("not poisoned")
                .push(req.uri().to_string());
            let answer = self.answers.lock().expect("not poisoned").pop_front();
            Box::pin(async move {
                let (status, body) = answer.ok_or("script exhausted")?;
                Ok(http::Response::builder()
                    .status(status)
                    .header("content-type", "application/json")
                    .body(axum::body::Body::from(body))?)
            })
        }
    }

    fn cm(name: &str, rv: u64) -> String {
        format!(
            r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"{name}","namespace":"ns","resourceVersion":"{rv}","managedFields":[{{"manager":"x"}}]}}}}"#
        )
    }

    fn page(items: &[String], rv: u64, cont: Option<&str>) -> String {
        let cont = cont.map_or(String::new(), |c| format!(r#","continue":"{c}""#));
        format!(
            r#"{{"kind":"ConfigMapList","apiVersion":"v1","metadata":{{"resourceVersion":"{rv}"{cont}}},"items":[{}]}}"#,
            items.join(",")
        )
    }

    fn gone() -> (u16, String) {
        (
            410,
            r#"{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Expired","code":410,"message":"too old"}"#.into(),
        )
    }

    fn watcher(script: &Script) -> Watcher<ConfigMap> {
        let client = kube::Client::new(script.clone(), "default");
        Watcher::new(
            client,
            InformerConfig::default().page_size(1),
            Store::new(0),
        )
    }

    async fn events(w: &mut Watcher<ConfigMap>, n: usize) -> Vec<String> {
        let mut out = Vec::new();
        while out.len() < n {
            match w.step().await {
                Ok(Some(Event::Init)) => out.push("Init".to_string()),
                Ok(Some(Event::InitApply(items))) => {
                    out.push(format!("InitApply({})", items.len()))
                }
                Ok(Some(Event::InitDone { rv })) => out.push(format!("InitDone({rv})")),
                Ok(Some(Event::Connected)) => out.push("Connected".to_string()),
                Ok(Some(Event::Applied(p))) => out.push(format!("Applied({})", p.entry.key())),
                Ok(Some(Event::Deleted(p))) => out.push(format!("Deleted({})", p.entry.key())),
                Ok(Some(Event::Bookmark { rv })) => out.push(format!("Bookmark({rv})")),
                Ok(None) => out.push(format!("-> {:?}", w.state())),
                Err(e) => out.push(format!("Err({e})")),
            }
        }
        out
    }

    #[tokio::test]
    async fn an_expired_continue_token_restarts_the_list_from_scratch() {
        let script = Script::default();
        script.answers.lock().expect("not poisoned").extend([
            (200, page(&[cm("a", 5)], 10, Some("tok"))),
            gone(),
            (200, page(&[cm("a", 5)], 12, Some("tok2"))),
            (200, page(&[cm("b", 11)], 12, None)),
        ]);
        let mut w = watcher(&script);
        let got = events(&mut w, 7).await;
        assert_eq!(
            got,
            [
                "Init",
                "InitApply(1)",
                "-> Empty",
                "Init",
                "InitApply(1)",
                "InitApply(1)",
                "InitDone(12)"
            ]
        );
        let seen = script.seen.lock().expect("not poisoned").clone();
        assert!(seen[1].contains("continue=tok"), "{seen:?}");
        assert!(
            !seen[2].contains("continue="),
            "the relist starts over: {seen:?}"
        );
        assert!(seen.iter().all(|s| s.contains("limit=1")));
    }

    #[tokio::test]
    async fn watch_events_bookmarks_and_a_410_error_event_drive_the_states() {
        let script = Script::default();
        let lines = [
            format!(r#"{{"type":"ADDED","object":{}}}"#, cm("c", 13)),
            r#"{"type":"BOOKMARK","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"resourceVersion":"20"}}}"#.to_string(),
            format!(r#"{{"type":"DELETED","object":{}}}"#, cm("c", 21)),
            r#"{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","code":410,"reason":"Expired","message":"too old"}}"#.to_string(),
        ];
        script.answers.lock().expect("not poisoned").extend([
            (200, page(&[], 12, None)),
            (200, lines.join("\n") + "\n"),
            (200, page(&[cm("d", 30)], 30, None)),
            (
                500,
                r#"{"kind":"Status","apiVersion":"v1","code":500,"message":"boom"}"#.into(),
            ),
            gone(),
        ]);
        let mut w = watcher(&script);
        let got = events(&mut w, 16).await;
        assert_eq!(
            got,
            [
                "Init",
                "InitApply(0)",
                "InitDone(12)",
                "Connected",
                "Applied(ns/c)",
                "Bookmark(20)",
                "Deleted(ns/c)",
                "-> Empty",
                "Init",
                "InitApply(1)",
                "InitDone(30)",
                "Err(starting the watch failed)",
                "-> Empty",
                "Init",
                "Err(listing failed)",
                "Err(listing failed)",
            ]
        );
        let seen = script.seen.lock().expect("not poisoned").clone();
        assert!(seen[1].contains("watch=true") && seen[1].contains("resourceVersion=12"));
        assert!(seen[1].contains("allowWatchBookmarks=true"), "{seen:?}");
        assert!(seen[3].contains("resourceVersion=30"), "{seen:?}");
    }

    #[tokio::test]
    async fn the_echo_of_a_recorded_write_is_not_parsed_and_carries_the_cached_object() {
        // The cache holds version 13 of ns/a, recorded from a write's answer.
        let store: Store<ConfigMap> = Store::new(16);
        let mut written = ConfigMap::default();
        written.metadata.name = Some("a".into());
        written.metadata.namespace = Some("ns".into());
        written.metadata.resource_version = Some("13".into());
        let packed = store.pack_typed(written).expect("packs");
        let cached = Arc::clone(&packed.obj);
        store.apply(&packed);
        store.recorded(13);

        // Each line's object is not a ConfigMap (`data` is a number), so only a line whose
        // object is never parsed can come through as an event.
        let bad = |kind: &str, name: &str, rv: u64| {
            format!(
                r#"{{"type":"{kind}","object":{{"kind":"ConfigMap","metadata":{{"name":"{name}","namespace":"ns","resourceVersion":"{rv}"}},"data":5}}}}"#
            )
        };
        let lines = [
            bad("ADDED", "a", 13),    // the echo: the cached object, unparsed
            bad("MODIFIED", "a", 14), // newer than the recorded write: parsed, refused
            bad("MODIFIED", "b", 13), // another key: parsed, refused
        ];
        let script = Script::default();
        script
            .answers
            .lock()
            .expect("not poisoned")
            .extend([(200, page(&[], 12, None)), (200, lines.join("\n") + "\n")]);
        let client = kube::Client::new(script.clone(), "default");
        let mut w = Watcher::new(client, InformerConfig::default(), store);
        let mut got = Vec::new();
        while got.len() < 3 {
            match w.step().await {
                Ok(Some(Event::Applied(p))) => {
                    assert!(Arc::ptr_eq(&p.obj, &cached), "the cached object");
                    assert!(p.hollow, "nothing to pack");
                    got.push(format!("Applied({}@{})", p.entry.key(), p.entry.rv()));
                }
                Ok(_) => {}
                Err(e) => got.push(format!("Err({e})")),
            }
        }
        assert_eq!(got[0], "Applied(ns/a@13)");
        assert!(got[1].starts_with("Err(decoding"), "{got:?}");
        assert!(got[2].starts_with("Err(decoding"), "{got:?}");
    }

    #[tokio::test]
    async fn an_object_before_its_type_is_packed_and_a_bad_one_is_skipped_while_bad_json_rewatches()
    {
        let script = Script::default();
        let lines = [
            // Servers write the type first; the other order works too.
            format!(r#"{{"object":{},"type":"MODIFIED"}}"#, cm("a", 13)),
            // Well-formed, but not a ConfigMap: skipped, the watch goes on.
            r#"{"type":"ADDED","object":{"kind":"ConfigMap","metadata":{"name":"x","namespace":"ns"},"data":5}}"#.to_string(),
            format!(r#"{{"type":"ADDED","object":{}}}"#, cm("b", 14)),
            // Not JSON: the watch is reopened.
            r#"{"type":"ADDED","object":{"#.to_string(),
        ];
        script
            .answers
            .lock()
            .expect("not poisoned")
            .extend([(200, page(&[], 12, None)), (200, lines.join("\n") + "\n")]);
        let mut w = watcher(&script);
        let got = events(&mut w, 8).await;
        assert_eq!(
            got[..4],
            ["Init", "InitApply(0)", "InitDone(12)", "Connected"]
        );
        assert_eq!(got[4], "Applied(ns/a)");
        assert!(got[5].starts_with("Err(decoding"), "{got:?}");
        assert_eq!(got[6], "Applied(ns/b)");
        assert!(got[7].starts_with("Err(decoding"), "{got:?}");
        assert!(
            matches!(w.state(), State::Connecting { rv } if rv == "14"),
            "{:?}",
            w.state()
        );
    }

    #[tokio::test]
    async fn a_transform_sees_the_json_of_listed_and_watched_objects() {
        let script = Script::default();
        script.answers.lock().expect("not poisoned").extend([
            (200, page(&[cm("a", 5)], 5, None)),
            (
                200,
                format!(r#"{{"type":"ADDED","object":{}}}"#, cm("b", 6)) + "\n",
            ),
        ]);
        let client = kube::Client::new(script.clone(), "default");
        let config = InformerConfig::default().transform(|v| {
            let seen = v.pointer("/metadata/managedFields").is_some();
            v["data"] = serde_json::json!({ "managedFieldsSeen": seen.to_string() });
        });
        let store: Store<ConfigMap> = Store::new(0);
        let mut w = Watcher::new(client, config, store.clone());
        let mut got = Vec::new();
        while got.len() < 2 {
            match w.step().await.expect("scripted answers succeed") {
                Some(Event::InitApply(items)) => {
                    let mut list = crate::cache::ListBuffer::default();
                    for item in items {
                        list.push(item);
                    }
                    store.replace(list, 5);
                    got.extend(store.get(&crate::cache::ObjectKey::namespaced("ns", "a")));
                }
                Some(Event::Applied(p)) => got.push(p.obj),
                _ => {}
            }
        }
        for obj in got {
            let data = obj.data.clone().unwrap_or_default();
            assert_eq!(
                data.get("managedFieldsSeen").map(String::as_str),
                Some("false")
            );
            assert!(obj.metadata.managed_fields.is_none());
        }
    }

    #[tokio::test]
    async fn managed_fields_are_dropped_before_caching() {
        let script = Script::default();
        script.answers.lock().expect("not poisoned").extend([
            (200, page(&[], 5, None)),
            (
                200,
                format!(r#"{{"type":"ADDED","object":{}}}"#, cm("a", 6)) + "\n",
            ),
        ]);
        let mut w = watcher(&script);
        for _ in 0..4 {
            w.step().await.expect("scripted answers succeed");
        }
        match w.step().await {
            Ok(Some(Event::Applied(p))) => assert!(p.obj.metadata.managed_fields.is_none()),
            _ => panic!("expected the added object"),
        }
    }
}
