//! The bounded history of recent changes, and the watchers that read it.
//!
//! Every change is appended when it is applied (in revision order, under the store's lock) and
//! becomes visible to watchers once its backend reports it durable (the *published* mark).
//! Watchers do not own buffers: each keeps a cursor (the last revision it examined) and copies
//! the next events out of the shared ring when woken. A watcher that falls behind the oldest
//! retained event gets [`StorageError::Expired`] and must re-list, as with etcd compaction, so
//! a slow client costs memory for nothing but its cursor and never makes the server drop an
//! event silently.
//!
//! The same history lets a list be served "as of" a recent revision (continue tokens, exact
//! resourceVersion): the store undoes the changes made after it.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};

use bytes::{BufMut, Bytes, BytesMut};
use tokio::sync::watch;

use super::{StorageError, Stored};

/// The kind of a change, as a watch reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    /// The object was created.
    Added,
    /// The object was changed.
    Modified,
    /// The object was removed.
    Deleted,
}

impl EventType {
    /// The name used on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

/// One change to one key.
#[derive(Debug)]
pub struct WatchEvent {
    /// The revision of the change.
    pub rv: u64,
    /// What happened.
    pub kind: EventType,
    /// The key that changed.
    pub key: Arc<str>,
    /// The object after the change (for a deletion: its last state, stamped with `rv`).
    pub object: Bytes,
    /// The object before the change, if it existed.
    pub prev: Option<Stored>,
    line: OnceLock<Bytes>,
}

impl WatchEvent {
    /// Creates an event.
    pub fn new(
        rv: u64,
        kind: EventType,
        key: Arc<str>,
        object: Bytes,
        prev: Option<Stored>,
    ) -> Self {
        WatchEvent {
            rv,
            kind,
            key,
            object,
            prev,
            line: OnceLock::new(),
        }
    }

    /// The event as one line of a JSON watch stream, rendered once and shared by every
    /// watcher that sends it unchanged.
    pub fn json_line(&self) -> Bytes {
        self.line
            .get_or_init(|| render_line(self.kind.as_str(), &self.object))
            .clone()
    }
}

/// Renders `{"type":T,"object":O}\n` from an already encoded object.
pub fn render_line(kind: &str, object: &[u8]) -> Bytes {
    let mut buf = BytesMut::with_capacity(object.len() + 32);
    buf.put_slice(b"{\"type\":\"");
    buf.put_slice(kind.as_bytes());
    buf.put_slice(b"\",\"object\":");
    buf.put_slice(object);
    buf.put_slice(b"}\n");
    buf.freeze()
}

#[derive(Debug)]
struct Ring {
    events: VecDeque<Arc<WatchEvent>>,
    capacity: usize,
    /// Every event with a revision at or below this one may be gone from the ring.
    compacted: u64,
    /// Events up to this revision are durable and visible to watchers.
    published: u64,
}

/// The shared history. Cheap to clone.
///
/// Watchers are woken per resource: a watcher of `/core/configmaps/…` sleeps through writes to
/// other resources. Each resource (the first two segments of a key) has its own channel
/// carrying the published mark; watchers of broader prefixes, and waits for a revision, use
/// the channel every publication goes to.
#[derive(Debug, Clone)]
pub(crate) struct History {
    ring: Arc<Mutex<Ring>>,
    notify: Arc<watch::Sender<u64>>,
    channels: Arc<Mutex<HashMap<Box<str>, watch::Sender<u64>>>>,
}

/// The resource part (`/core/configmaps/`) of a key or of a prefix that reaches that deep.
fn resource_of(key: &str) -> Option<&str> {
    let mut slashes = key.match_indices('/').map(|(i, _)| i);
    match (slashes.next(), slashes.next(), slashes.next()) {
        (Some(0), Some(second), Some(third)) if second > 1 && third > second + 1 => {
            Some(&key[..=third])
        }
        _ => None,
    }
}

impl History {
    /// A history that starts at revision `start` and keeps at least `capacity` events.
    pub(crate) fn new(start: u64, capacity: usize) -> Self {
        let (tx, _rx) = watch::channel(start);
        History {
            ring: Arc::new(Mutex::new(Ring {
                events: VecDeque::with_capacity(capacity.min(4096)),
                capacity: capacity.max(1),
                compacted: start,
                published: start,
            })),
            notify: Arc::new(tx),
            channels: Arc::default(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Ring> {
        self.ring.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Appends an applied (not yet durable) change. Called in revision order.
    pub(crate) fn append(&self, event: Arc<WatchEvent>) {
        self.lock().events.push_back(event);
    }

    /// Marks every change up to `rv` (a change of `key`) durable, wakes the watchers that
    /// care and trims the ring.
    pub(crate) fn publish(&self, rv: u64, key: &str) {
        {
            let mut ring = self.lock();
            if rv <= ring.published {
                return;
            }
            ring.published = rv;
            while ring.events.len() > ring.capacity {
                match ring.events.front() {
                    Some(front) if front.rv <= ring.published => {
                        ring.compacted = front.rv;
                        ring.events.pop_front();
                    }
                    _ => break,
                }
            }
        }
        self.notify.send_replace(rv);
        if let Some(resource) = resource_of(key) {
            let channels = self.channels.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(tx) = channels.get(resource) {
                tx.send_replace(rv);
            }
        }
    }

    /// The channel that wakes watchers of `prefix`.
    fn subscribe(&self, prefix: &str) -> watch::Receiver<u64> {
        match resource_of(prefix) {
            Some(resource) => {
                let published = self.lock().published;
                let mut channels = self.channels.lock().unwrap_or_else(PoisonError::into_inner);
                channels
                    .entry(resource.into())
                    .or_insert_with(|| watch::channel(published).0)
                    .subscribe()
            }
            None => self.notify.subscribe(),
        }
    }

    /// Waits until changes up to `rv` are visible, or `timeout` passes; returns whether they are.
    pub(crate) async fn wait_published(&self, rv: u64, timeout: std::time::Duration) -> bool {
        let mut rx = self.notify.subscribe();
        tokio::time::timeout(timeout, rx.wait_for(|p| *p >= rv))
            .await
            .is_ok_and(|r| r.is_ok())
    }

    /// The revision up to which changes are visible to watchers.
    pub(crate) fn published(&self) -> u64 {
        self.lock().published
    }

    /// Every change after `rv` (applied, durable or not), oldest first; fails if the ring no
    /// longer reaches back to `rv`.
    pub(crate) fn changes_after(&self, rv: u64) -> Result<Vec<Arc<WatchEvent>>, StorageError> {
        let ring = self.lock();
        if rv < ring.compacted {
            return Err(StorageError::Expired {
                requested: rv,
                oldest: ring.compacted,
            });
        }
        let start = ring.events.partition_point(|e| e.rv <= rv);
        Ok(ring.events.range(start..).cloned().collect())
    }

    /// A watcher of keys under `prefix`, starting after revision `from`.
    pub(crate) fn watcher(&self, prefix: &str, from: u64) -> Result<Watcher, StorageError> {
        let compacted = self.lock().compacted;
        if from < compacted {
            return Err(StorageError::Expired {
                requested: from,
                oldest: compacted,
            });
        }
        Ok(Watcher {
            history: self.clone(),
            rx: self.subscribe(prefix),
            prefix: prefix.to_string(),
            cursor: from,
            buf: VecDeque::new(),
        })
    }
}

/// Reads the changes under one key prefix after a starting revision, in order.
///
/// Obtained from [`Storage::watch`](super::Storage::watch). Dropping it is all the cleanup
/// there is.
#[derive(Debug)]
pub struct Watcher {
    history: History,
    rx: watch::Receiver<u64>,
    prefix: String,
    cursor: u64,
    buf: VecDeque<Arc<WatchEvent>>,
}

/// How many events a watcher copies out of the ring per lock.
const BATCH: usize = 512;

impl Watcher {
    /// The next change, waiting for one if needed.
    ///
    /// # Errors
    /// [`StorageError::Expired`] when the watcher fell behind the history; it must re-list.
    ///
    /// Cancel-safe: dropping the future loses no event.
    pub async fn next(&mut self) -> Result<Arc<WatchEvent>, StorageError> {
        loop {
            if let Some(event) = self.buf.pop_front() {
                return Ok(event);
            }
            self.rx.borrow_and_update();
            self.fill()?;
            if self.buf.is_empty() && self.rx.changed().await.is_err() {
                // The store is gone; nothing more will ever come.
                std::future::pending::<()>().await;
            }
        }
    }

    /// Every change after the cursor that is already published, without waiting.
    pub fn try_next(&mut self) -> Result<Option<Arc<WatchEvent>>, StorageError> {
        if self.buf.is_empty() {
            self.fill()?;
        }
        Ok(self.buf.pop_front())
    }

    /// The revision up to which this watcher has examined every change; the revision to put
    /// in a bookmark. Advances to the published mark when the ring holds nothing newer.
    pub fn progress(&mut self) -> u64 {
        if self.buf.is_empty() {
            let ring = self.history.lock();
            let newest_examined = ring.events.back().map_or(0, |e| e.rv);
            if newest_examined <= self.cursor && ring.published > self.cursor {
                self.cursor = ring.published;
            }
        }
        self.buf.front().map_or(self.cursor, |e| e.rv - 1)
    }

    fn fill(&mut self) -> Result<(), StorageError> {
        let ring = self.history.lock();
        if self.cursor < ring.compacted {
            return Err(StorageError::Expired {
                requested: self.cursor,
                oldest: ring.compacted,
            });
        }
        let start = ring.events.partition_point(|e| e.rv <= self.cursor);
        for event in ring.events.range(start..).take(BATCH) {
            if event.rv > ring.published {
                break;
            }
            self.cursor = event.rv;
            if event.key.starts_with(&self.prefix) {
                self.buf.push_back(event.clone());
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(rv: u64, key: &str) -> Arc<WatchEvent> {
        Arc::new(WatchEvent::new(
            rv,
            EventType::Added,
            key.into(),
            Bytes::from(format!("{{\"rv\":{rv}}}")),
            None,
        ))
    }

    #[tokio::test]
    async fn watcher_sees_only_published_events_under_its_prefix() {
        let h = History::new(0, 100);
        let mut w = h.watcher("/a/", 0).expect("watch");
        h.append(event(1, "/a/x"));
        h.append(event(2, "/b/x"));
        h.append(event(3, "/a/y"));
        assert!(
            w.try_next().expect("next").is_none(),
            "nothing published yet"
        );
        h.publish(2, "/a/x");
        assert_eq!(w.next().await.expect("next").rv, 1);
        assert!(w.try_next().expect("next").is_none());
        h.publish(3, "/a/x");
        assert_eq!(w.next().await.expect("next").rv, 3);
    }

    #[test]
    fn watcher_behind_the_ring_gets_expired() {
        let h = History::new(0, 2);
        for rv in 1..=5 {
            h.append(event(rv, "/a/x"));
        }
        h.publish(5, "/a/x");
        assert!(matches!(
            h.watcher("/a/", 1),
            Err(StorageError::Expired { requested: 1, .. })
        ));
        let mut w = h.watcher("/a/", 3).expect("rv 3 is retained");
        assert_eq!(w.try_next().expect("next").map(|e| e.rv), Some(4));
    }

    #[test]
    fn a_slow_watcher_expires_instead_of_holding_events() {
        let h = History::new(0, 3);
        let mut w = h.watcher("/", 0).expect("watch");
        for rv in 1..=10 {
            h.append(event(rv, "/a/x"));
            h.publish(rv, "/a/x");
        }
        assert!(matches!(w.try_next(), Err(StorageError::Expired { .. })));
    }

    #[test]
    fn unpublished_events_are_never_trimmed() {
        let h = History::new(0, 1);
        for rv in 1..=4 {
            h.append(event(rv, "/a/x"));
        }
        h.publish(1, "/a/x");
        let changes = h.changes_after(1).expect("retained");
        assert_eq!(changes.iter().map(|e| e.rv).collect::<Vec<_>>(), [2, 3, 4]);
    }

    #[test]
    fn progress_moves_to_the_published_mark_when_idle() {
        let h = History::new(7, 10);
        let mut w = h.watcher("/a/", 7).expect("watch");
        h.append(event(8, "/b/x"));
        h.publish(8, "/a/x");
        assert!(w.try_next().expect("next").is_none());
        assert_eq!(w.progress(), 8);
    }

    #[tokio::test]
    async fn watchers_of_other_resources_are_not_woken() {
        let h = History::new(0, 100);
        let mut cms = h.watcher("/core/configmaps/default/", 0).expect("watch");
        let mut secrets = h.watcher("/core/secrets/", 0).expect("watch");
        h.append(event(1, "/core/secrets/default/s"));
        h.publish(1, "/core/secrets/default/s");
        assert!(
            tokio::time::timeout(std::time::Duration::from_millis(50), cms.next())
                .await
                .is_err(),
            "a ConfigMap watcher sleeps through a Secret change"
        );
        assert_eq!(secrets.next().await.expect("event").rv, 1);
        h.append(event(2, "/core/configmaps/default/c"));
        h.publish(2, "/core/configmaps/default/c");
        assert_eq!(cms.next().await.expect("event").rv, 2);
    }

    #[test]
    fn resources_are_the_first_two_segments() {
        assert_eq!(
            resource_of("/core/configmaps/default/a"),
            Some("/core/configmaps/")
        );
        assert_eq!(resource_of("/core/namespaces/"), Some("/core/namespaces/"));
        assert_eq!(resource_of("/core/"), None);
        assert_eq!(resource_of("/"), None);
        assert_eq!(resource_of("//x/"), None);
    }

    #[test]
    fn json_line_is_one_compact_line() {
        let e = event(1, "/a/x");
        assert_eq!(
            &e.json_line()[..],
            b"{\"type\":\"ADDED\",\"object\":{\"rv\":1}}\n"
        );
    }
}
