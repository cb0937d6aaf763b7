//! The bounded history of recent changes, and the watchers that read it.
//!
//! Every change is appended when it is applied (in revision order, under the store's lock) and
//! becomes visible to watchers once its backend reports it durable (the *published* mark).
//! Watchers do not own buffers: each keeps a cursor (the last revision it examined) and copies
//! the next events out of the shared ring when woken. The ring is bounded twice: by a count of
//! events, by their weight in bytes (an upper bound of the memory they hold) and by their age,
//! and the oldest published events are dropped when any bound is passed.
//!
//! A watcher is woken only by publications to its own resource, but it examines every event
//! after its cursor, in batches of [`SCAN`] per hold of the lock, until it has caught up with
//! the published mark; it never goes back to sleep with published events unexamined (a batch
//! full of other resources' events must not strand the next event of its own).
//!
//! A watcher loses events only when an event of its own resource is dropped before it read it:
//! the ring remembers, per resource, the newest revision it dropped. Such a watcher gets
//! [`StorageError::Expired`] and must re-list, as with etcd compaction; a watcher of a quiet
//! resource whose cursor the ring left behind only for other resources' events skips ahead.
//! So a slow client costs memory for nothing but its cursor and never makes the server drop an
//! event silently.
//!
//! The same history lets a list be served "as of" a recent revision (continue tokens, exact
//! resourceVersion): the store undoes the changes made after it.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::{Duration, Instant};

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
    /// The object before the change, if it existed (boxed: a creation, the commonest event,
    /// then carries 8 bytes for it rather than 40).
    pub prev: Option<Box<Stored>>,
    /// The rendered line, boxed for the same reason: most events in the history are never
    /// rendered. With both boxes an event and its reference count take 120 bytes (a 128-byte
    /// block) where they took 176 (a 192-byte one).
    line: OnceLock<Box<Bytes>>,
    /// When the change was made (the history drops events by age).
    at: Instant,
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
            prev: prev.map(Box::new),
            line: OnceLock::new(),
            at: Instant::now(),
        }
    }

    /// The memory this event may hold, in bytes: its object, the line rendered from it (once
    /// a watcher asks) and the previous state it carries. A buffer shared with a neighbouring
    /// event is counted in each, so the sum over the history is an upper bound.
    pub fn weight(&self) -> usize {
        let prev = self.prev.as_ref().map_or(0, |p| p.bytes.len());
        self.object.len() * 2 + prev + self.key.len() + LINE_OVERHEAD
    }

    /// The event as one line of a JSON watch stream, rendered once and shared by every
    /// watcher that sends it unchanged.
    pub fn json_line(&self) -> Bytes {
        self.line
            .get_or_init(|| Box::new(render_line(self.kind.as_str(), &self.object)))
            .as_ref()
            .clone()
    }
}

/// What an event costs beyond its buffers (the event itself, the line's framing).
const LINE_OVERHEAD: usize = 160;

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
    /// What the retained events may weigh, in bytes (see [`WatchEvent::weight`]).
    max_bytes: usize,
    /// What the retained events weigh now.
    bytes: usize,
    /// How old a retained event may be.
    max_age: Duration,
    /// Every event with a revision at or below this one may be gone from the ring.
    compacted: u64,
    /// The revision the history started at: what came before is not known.
    origin: u64,
    /// Per resource (`/core/configmaps/`), the newest revision of its events that were
    /// dropped. A watcher of one resource has lost nothing while its cursor is at or after
    /// that mark, however far the ring moved on for other resources.
    dropped: HashMap<Box<str>, u64>,
    /// Events up to this revision are durable and visible to watchers.
    published: u64,
    /// How many events have left the front of the ring since it was made: event `i` of
    /// `events` is the ring's event number `popped + i` ever, so a watcher can keep its
    /// place as a number that stays true however much is dropped before it.
    popped: u64,
}

impl Ring {
    /// Drops the oldest published events while the ring holds more than it may, by count or
    /// by weight; the newest event always stays, so that a watcher can start after it.
    fn trim(&mut self) {
        let now = Instant::now();
        while self.events.len() > 1
            && (self.events.len() > self.capacity
                || self.bytes > self.max_bytes
                || self
                    .events
                    .front()
                    .is_some_and(|e| now.duration_since(e.at) > self.max_age))
        {
            match self.events.front() {
                Some(front) if front.rv <= self.published => {
                    self.compacted = front.rv;
                    self.bytes = self.bytes.saturating_sub(front.weight());
                    if let Some(resource) = resource_of(&front.key) {
                        match self.dropped.get_mut(resource) {
                            Some(mark) => *mark = front.rv,
                            None => {
                                self.dropped.insert(resource.into(), front.rv);
                            }
                        }
                    }
                    self.events.pop_front();
                    self.popped += 1;
                }
                _ => break,
            }
        }
    }

    /// The index in `events` of the first event after revision `rv`. `hint` is where the
    /// caller's last scan ended, as an event number (see `popped`); when it is still the
    /// answer, that costs two comparisons instead of a binary search whose every step reads
    /// an event from memory no core has touched lately (a watcher woken per write made that
    /// search a visible share of a busy server's CPU).
    fn start_after(&self, rv: u64, hint: u64) -> usize {
        let at = hint
            .checked_sub(self.popped)
            .and_then(|i| usize::try_from(i).ok())
            .filter(|&i| {
                i <= self.events.len()
                    && (i == 0 || self.events[i - 1].rv <= rv)
                    && self.events.get(i).is_none_or(|e| e.rv > rv)
            });
        at.unwrap_or_else(|| self.events.partition_point(|e| e.rv <= rv))
    }

    /// The oldest revision a reader of `resource` (or of everything, for `None`) can start
    /// after without having missed one of its events.
    fn horizon(&self, resource: Option<&str>) -> u64 {
        match resource {
            Some(r) => self.dropped.get(r).copied().unwrap_or(0).max(self.origin),
            None => self.compacted,
        }
    }
}

/// The shared history. Cheap to clone.
///
/// Watchers are woken per resource: a watcher of `/core/configmaps/…` sleeps through writes to
/// other resources. Each resource (the first two segments of a key) has its own channel
/// carrying the published mark; watchers of broader prefixes, and waits for a revision, use
/// the channel every publication goes to. A watcher of one name (a watch with the field
/// selector `metadata.name=…`, the root CA publisher's watch of `kube-root-ca.crt`) has a
/// channel of that name within its resource, and sleeps through writes to other names.
#[derive(Debug, Clone)]
pub(crate) struct History {
    ring: Arc<Mutex<Ring>>,
    notify: Arc<watch::Sender<u64>>,
    channels: Arc<Mutex<HashMap<Box<str>, Channels>>>,
}

/// The channels of one resource.
#[derive(Debug)]
struct Channels {
    /// Every publication of the resource.
    all: watch::Sender<u64>,
    /// Publications of one name (a key's last segment), for the names someone watches.
    named: HashMap<Box<str>, watch::Sender<u64>>,
    /// How many named channels there may be before the unwatched ones are dropped.
    prune_at: usize,
}

/// The fewest named channels at which unwatched ones are dropped.
const PRUNE_MIN: usize = 16;

impl Channels {
    fn new(published: u64) -> Channels {
        Channels {
            all: watch::channel(published).0,
            named: HashMap::new(),
            prune_at: PRUNE_MIN,
        }
    }

    /// A receiver of `name`'s publications, making its channel if needed.
    fn subscribe_name(&mut self, name: &str, published: u64) -> watch::Receiver<u64> {
        if let Some(tx) = self.named.get(name) {
            return tx.subscribe();
        }
        // Channels of names nobody watches any more are dropped once the map has doubled
        // since the last time, so it stays within twice the watched names (and 16), and the
        // cost of dropping them, under the lock every publication takes, is spread over the
        // channels made meanwhile.
        if self.named.len() >= self.prune_at {
            self.named.retain(|_, tx| tx.receiver_count() > 0);
            self.prune_at = (2 * self.named.len()).max(PRUNE_MIN);
        }
        let (tx, rx) = watch::channel(published);
        self.named.insert(name.into(), tx);
        rx
    }
}

/// The name (last segment) of a key.
fn name_of(key: &str) -> &str {
    key.rsplit_once('/').map_or(key, |(_, name)| name)
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
    /// A history that starts at revision `start` and keeps up to `capacity` published events
    /// weighing up to `max_bytes`, none older than `max_age` (whichever bound is reached
    /// first; the newest event is kept whatever it weighs and however old it is).
    pub(crate) fn new(start: u64, capacity: usize, max_bytes: usize, max_age: Duration) -> Self {
        let (tx, _rx) = watch::channel(start);
        History {
            ring: Arc::new(Mutex::new(Ring {
                events: VecDeque::with_capacity(capacity.min(4096)),
                capacity: capacity.max(1),
                max_bytes,
                bytes: 0,
                max_age,
                compacted: start,
                origin: start,
                dropped: HashMap::new(),
                published: start,
                popped: 0,
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
        let mut ring = self.lock();
        ring.bytes += event.weight();
        ring.events.push_back(event);
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
            ring.trim();
        }
        self.notify.send_replace(rv);
        if let Some(resource) = resource_of(key) {
            let channels = self.channels.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(c) = channels.get(resource) {
                c.all.send_replace(rv);
                if !c.named.is_empty()
                    && let Some(tx) = c.named.get(name_of(key))
                {
                    tx.send_replace(rv);
                }
            }
        }
    }

    /// The channel that wakes watchers of `prefix` (of the keys named `name` only, if given).
    fn subscribe(&self, prefix: &str, name: Option<&str>) -> watch::Receiver<u64> {
        let Some(resource) = resource_of(prefix) else {
            return self.notify.subscribe();
        };
        let published = self.lock().published;
        let mut channels = self.channels.lock().unwrap_or_else(PoisonError::into_inner);
        let c = channels
            .entry(resource.into())
            .or_insert_with(|| Channels::new(published));
        match name {
            None => c.all.subscribe(),
            Some(name) => c.subscribe_name(name, published),
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

    /// Forgets every published change: readers asking for a revision before now are told it
    /// expired, as a watch cache initialised from a list at this revision answers them.
    pub(crate) fn start_here(&self) {
        let mut ring = self.lock();
        let published = ring.published;
        while ring.events.front().is_some_and(|e| e.rv <= published) {
            if let Some(e) = ring.events.pop_front() {
                ring.bytes = ring.bytes.saturating_sub(e.weight());
                ring.popped += 1;
            }
        }
        ring.origin = ring.origin.max(published);
        ring.compacted = ring.compacted.max(published);
    }

    /// Every change after `rv` (applied, durable or not), oldest first; fails if the ring no
    /// longer reaches back to `rv`.
    pub(crate) fn changes_after(&self, rv: u64) -> Result<Vec<Arc<WatchEvent>>, StorageError> {
        let mut ring = self.lock();
        ring.trim();
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
    #[cfg(test)]
    pub(crate) fn watcher(&self, prefix: &str, from: u64) -> Result<Watcher, StorageError> {
        self.watcher_of(prefix, None, from)
    }

    /// A watcher of keys under `prefix` (and named `name`, if given: keys whose last segment
    /// it is), starting after revision `from`.
    pub(crate) fn watcher_of(
        &self,
        prefix: &str,
        name: Option<&str>,
        from: u64,
    ) -> Result<Watcher, StorageError> {
        let resource = resource_of(prefix).map(Box::<str>::from);
        let horizon = {
            let mut ring = self.lock();
            // A quiet server trims by age here too: nobody published since the events aged.
            ring.trim();
            ring.horizon(resource.as_deref())
        };
        if from < horizon {
            return Err(StorageError::Expired {
                requested: from,
                oldest: horizon,
            });
        }
        Ok(Watcher {
            history: self.clone(),
            rx: self.subscribe(prefix, name),
            prefix: prefix.to_string(),
            name: name.map(Box::from),
            resource,
            cursor: from,
            place: 0,
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
    /// Only keys of this name (last segment), if given.
    name: Option<Box<str>>,
    /// The resource the prefix lies in, if it reaches that deep.
    resource: Option<Box<str>>,
    cursor: u64,
    /// The ring's event number (see `Ring::popped`) the next scan probably starts at: a hint,
    /// checked before it is used.
    place: u64,
    buf: VecDeque<Arc<WatchEvent>>,
}

/// How many events a watcher examines per hold of the ring's lock. It bounds how long one
/// watcher keeps writers waiting, not how far it reads: a watcher keeps scanning, a batch at
/// a time, until it has examined every published event.
const SCAN: usize = 1024;

/// How far one call to [`Watcher::fill`] got.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Scan {
    /// Every published event has been examined.
    CaughtUp,
    /// The batch ended before the published mark: scan again.
    More,
}

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
            // Mark the channel seen before scanning: a publication after this point wakes
            // the wait below even if the scan already covered it.
            self.rx.borrow_and_update();
            match self.fill()? {
                _ if !self.buf.is_empty() => {}
                // Events of other resources filled the batch: the ones after it may be ours,
                // and nothing would wake us for them. Let other tasks run, then go on.
                Scan::More => tokio::task::yield_now().await,
                Scan::CaughtUp => {
                    if self.rx.changed().await.is_err() {
                        // The store is gone; nothing more will ever come.
                        std::future::pending::<()>().await;
                    }
                }
            }
        }
    }

    /// The next change that is already published, without waiting; `None` once the watcher
    /// has examined every published change.
    pub fn try_next(&mut self) -> Result<Option<Arc<WatchEvent>>, StorageError> {
        while self.buf.is_empty() {
            if self.fill()? == Scan::CaughtUp {
                break;
            }
        }
        Ok(self.buf.pop_front())
    }

    /// The revision up to which this watcher has examined every change; the revision to put
    /// in a bookmark. Scans what was published since (without waiting), so a watcher whose
    /// resource is quiet still reports the newest revision.
    pub fn progress(&mut self) -> Result<u64, StorageError> {
        while self.buf.is_empty() {
            if self.fill()? == Scan::CaughtUp {
                break;
            }
        }
        Ok(self.buf.front().map_or(self.cursor, |e| e.rv - 1))
    }

    /// Examines up to [`SCAN`] published events after the cursor, keeping those under the
    /// prefix. When it has examined every published event the cursor moves to the published
    /// mark, which can be past the last retained event (a publication of unretained work).
    fn fill(&mut self) -> Result<Scan, StorageError> {
        let ring = self.history.lock();
        let horizon = ring.horizon(self.resource.as_deref());
        if self.cursor < horizon {
            return Err(StorageError::Expired {
                requested: self.cursor,
                oldest: horizon,
            });
        }
        // Only other resources' events were dropped since the cursor: skip past them.
        self.cursor = self.cursor.max(ring.compacted);
        let start = ring.start_after(self.cursor, self.place);
        let mut examined = 0;
        // Where the scan stopped before the ring's end, if it did.
        let mut stopped = None;
        for event in ring.events.range(start..) {
            if event.rv > ring.published {
                stopped = Some(Scan::CaughtUp);
                break;
            }
            if examined == SCAN {
                stopped = Some(Scan::More);
                break;
            }
            examined += 1;
            self.cursor = event.rv;
            if event.key.starts_with(&self.prefix)
                && self
                    .name
                    .as_deref()
                    .is_none_or(|n| name_of(&event.key) == n)
            {
                self.buf.push_back(event.clone());
            }
        }
        self.place = ring.popped + (start + examined) as u64;
        if let Some(scan) = stopped {
            return Ok(scan);
        }
        if ring.published > self.cursor {
            self.cursor = ring.published;
        }
        Ok(Scan::CaughtUp)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// No age bound, for the tests of the other bounds.
    const FOREVER: Duration = Duration::from_secs(1 << 40);

    #[test]
    fn an_event_with_its_reference_count_fits_a_128_byte_block() {
        // The history holds up to 20,000 of them; see the `prev` and `line` fields.
        assert!(
            std::mem::size_of::<WatchEvent>() + 16 <= 128,
            "{} bytes",
            std::mem::size_of::<WatchEvent>()
        );
    }

    fn event(rv: u64, key: &str) -> Arc<WatchEvent> {
        Arc::new(WatchEvent::new(
            rv,
            EventType::Added,
            key.into(),
            Bytes::from(format!("{{\"rv\":{rv}}}")),
            None,
        ))
    }

    #[test]
    fn the_place_hint_never_changes_where_a_scan_starts() {
        // Revisions with gaps (as unretained work leaves), trimmed from the front by count.
        let h = History::new(0, 8, usize::MAX, FOREVER);
        let revisions: Vec<u64> = (1..=40).map(|i| i * 3).collect();
        for &rv in &revisions {
            h.append(event(rv, "/a/x"));
            h.publish(rv, "/a/x");
        }
        let ring = h.lock();
        assert!(ring.popped > 0, "the ring was trimmed");
        for rv in [0, 1, 3, 90, 95, 96, 119, 120, 121, 500] {
            let truth = ring.events.partition_point(|e| e.rv <= rv);
            for hint in [
                0,
                ring.popped,
                ring.popped + 1,
                ring.popped + 5,
                ring.popped + 8,
                1 << 40,
            ] {
                assert_eq!(ring.start_after(rv, hint), truth, "rv {rv}, hint {hint}");
            }
        }
    }

    #[tokio::test]
    async fn a_watcher_keeps_its_place_while_the_ring_is_trimmed_before_it() {
        let h = History::new(0, 4, usize::MAX, FOREVER);
        let mut w = h.watcher("/a/", 0).expect("watch");
        let mut seen = Vec::new();
        for rv in 1..=30 {
            // Every third write is another resource's, which this watcher skips.
            let key = if rv % 3 == 0 { "/b/x" } else { "/a/x" };
            h.append(event(rv, key));
            h.publish(rv, key);
            while let Some(e) = w.try_next().expect("kept up") {
                seen.push(e.rv);
            }
        }
        let want: Vec<u64> = (1..=30).filter(|rv| rv % 3 != 0).collect();
        assert_eq!(seen, want);
        assert_eq!(w.place, h.lock().popped + 4, "the place is the ring's end");
    }

    #[tokio::test]
    async fn watcher_sees_only_published_events_under_its_prefix() {
        let h = History::new(0, 100, usize::MAX, FOREVER);
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
        let h = History::new(0, 2, usize::MAX, FOREVER);
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
        let h = History::new(0, 3, usize::MAX, FOREVER);
        let mut w = h.watcher("/", 0).expect("watch");
        for rv in 1..=10 {
            h.append(event(rv, "/a/x"));
            h.publish(rv, "/a/x");
        }
        assert!(matches!(w.try_next(), Err(StorageError::Expired { .. })));
    }

    #[test]
    fn unpublished_events_are_never_trimmed() {
        let h = History::new(0, 1, usize::MAX, FOREVER);
        for rv in 1..=4 {
            h.append(event(rv, "/a/x"));
        }
        h.publish(1, "/a/x");
        let changes = h.changes_after(1).expect("retained");
        assert_eq!(changes.iter().map(|e| e.rv).collect::<Vec<_>>(), [2, 3, 4]);
    }

    #[test]
    fn progress_moves_to_the_published_mark_when_idle() {
        let h = History::new(7, 10, usize::MAX, FOREVER);
        let mut w = h.watcher("/a/", 7).expect("watch");
        h.append(event(8, "/b/x"));
        h.publish(8, "/a/x");
        assert!(w.try_next().expect("next").is_none());
        assert_eq!(w.progress().expect("retained"), 8);
    }

    #[tokio::test]
    async fn a_watcher_of_one_name_sleeps_through_other_names() {
        let h = History::new(0, 100, usize::MAX, FOREVER);
        let mut a = h
            .watcher_of("/core/configmaps/", Some("a"), 0)
            .expect("watch");
        h.append(event(1, "/core/configmaps/ns/b"));
        h.publish(1, "/core/configmaps/ns/b");
        h.append(event(2, "/core/configmaps/ns/ab"));
        h.publish(2, "/core/configmaps/ns/ab");
        assert!(
            tokio::time::timeout(std::time::Duration::from_millis(50), a.next())
                .await
                .is_err(),
            "asleep through b and ab"
        );
        h.append(event(3, "/core/configmaps/other/a"));
        h.publish(3, "/core/configmaps/other/a");
        assert_eq!(a.next().await.expect("event").rv, 3);
    }

    #[test]
    fn channels_of_names_nobody_watches_are_dropped() {
        let h = History::new(0, 100, usize::MAX, FOREVER);
        let kept = h
            .watcher_of("/core/configmaps/", Some("kept"), 0)
            .expect("watch");
        for i in 0..1000 {
            let name = format!("n{i}");
            drop(h.watcher_of("/core/configmaps/", Some(&name), 0));
        }
        let after = h.channels.lock().expect("lock")["/core/configmaps/"]
            .named
            .len();
        assert!(after <= PRUNE_MIN, "{after} channels for one watched name");
        let many: Vec<Watcher> = (0..100)
            .map(|i| {
                h.watcher_of("/core/configmaps/", Some(&format!("live{i}")), 0)
                    .expect("watch")
            })
            .collect();
        let channels = h.channels.lock().expect("lock");
        let named = &channels["/core/configmaps/"].named;
        // The 101 watched names, and at most as many unwatched ones not yet dropped.
        assert!(named.len() <= 2 * 101, "{} channels", named.len());
        assert!(named.contains_key("kept") && named.contains_key("live99"));
        drop((kept, many));
    }

    #[tokio::test]
    async fn watchers_of_other_resources_are_not_woken() {
        let h = History::new(0, 100, usize::MAX, FOREVER);
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

    #[tokio::test]
    async fn a_watcher_reads_past_any_number_of_other_resources_events() {
        let h = History::new(0, 100_000, usize::MAX, FOREVER);
        let mut cms = h.watcher("/core/configmaps/", 0).expect("watch");
        let n = (SCAN * 5) as u64;
        for rv in 1..=n {
            h.append(event(rv, "/coordination.k8s.io/leases/default/l"));
            h.publish(rv, "/coordination.k8s.io/leases/default/l");
        }
        h.append(event(n + 1, "/core/configmaps/default/c"));
        h.publish(n + 1, "/core/configmaps/default/c");
        let got = tokio::time::timeout(std::time::Duration::from_secs(5), cms.next())
            .await
            .expect("delivered without another ConfigMap write")
            .expect("event");
        assert_eq!(got.rv, n + 1);
        // The same through the non-waiting read and the bookmark's progress.
        let mut again = h.watcher("/core/configmaps/", 0).expect("watch");
        assert_eq!(again.try_next().expect("next").map(|e| e.rv), Some(n + 1));
        let mut quiet = h.watcher("/core/secrets/", 0).expect("watch");
        assert_eq!(quiet.progress().expect("progress"), n + 1);
    }

    #[test]
    fn the_ring_is_bounded_by_weight_and_keeps_the_newest_event() {
        let big = |rv: u64| {
            Arc::new(WatchEvent::new(
                rv,
                EventType::Modified,
                "/core/configmaps/default/big".into(),
                Bytes::from(vec![b'x'; 1000]),
                None,
            ))
        };
        let one = big(1).weight();
        let h = History::new(0, 100, one * 3, FOREVER);
        for rv in 1..=10 {
            h.append(big(rv));
            h.publish(rv, "/core/configmaps/default/big");
        }
        let ring = h.lock();
        assert_eq!(ring.events.len(), 3);
        assert_eq!(ring.bytes, one * 3);
        assert_eq!(ring.compacted, 7);
        drop(ring);
        let h = History::new(0, 100, 1, FOREVER);
        h.append(big(1));
        h.publish(1, "/core/configmaps/default/big");
        assert_eq!(h.changes_after(0).expect("retained").len(), 1);
    }

    #[test]
    fn only_dropped_events_of_its_own_resource_expire_a_watcher() {
        let h = History::new(0, 4, usize::MAX, FOREVER);
        let mut cms = h.watcher("/core/configmaps/default/", 0).expect("watch");
        let mut leases = h.watcher("/coordination.k8s.io/leases/", 0).expect("watch");
        for rv in 1..=20 {
            h.append(event(rv, "/coordination.k8s.io/leases/default/l"));
            h.publish(rv, "/coordination.k8s.io/leases/default/l");
        }
        assert!(cms.try_next().expect("nothing lost").is_none());
        assert!(matches!(
            leases.try_next(),
            Err(StorageError::Expired { .. })
        ));
        assert!(h.watcher("/core/configmaps/", 0).is_ok());
        assert!(
            h.watcher("/", 0).is_err(),
            "everything-watchers lost lease events"
        );
        h.append(event(21, "/core/configmaps/default/c"));
        h.publish(21, "/core/configmaps/default/c");
        assert_eq!(cms.try_next().expect("next").map(|e| e.rv), Some(21));
    }

    #[test]
    fn events_older_than_the_age_bound_are_dropped_even_on_a_quiet_server() {
        let h = History::new(0, 100, usize::MAX, Duration::ZERO);
        for rv in 1..=3 {
            h.append(event(rv, "/core/configmaps/default/c"));
            h.publish(rv, "/core/configmaps/default/c");
        }
        // The newest event stays so that a watcher can start after it; the others aged.
        assert!(matches!(
            h.changes_after(1),
            Err(StorageError::Expired {
                requested: 1,
                oldest: 2
            })
        ));
        assert!(h.watcher("/core/configmaps/", 1).is_err());
        assert!(h.watcher("/core/configmaps/", 2).is_ok());
        assert_eq!(h.changes_after(2).expect("retained").len(), 1);
    }

    #[test]
    fn starting_here_expires_every_earlier_revision() {
        let h = History::new(0, 100, usize::MAX, FOREVER);
        for rv in 1..=5 {
            h.append(event(rv, "/core/namespaces/default"));
            h.publish(rv, "/core/namespaces/default");
        }
        h.start_here();
        assert!(matches!(
            h.watcher("/core/namespaces/", 1),
            Err(StorageError::Expired {
                requested: 1,
                oldest: 5
            })
        ));
        let mut w = h.watcher("/core/namespaces/", 5).expect("from now");
        h.append(event(6, "/core/namespaces/other"));
        h.publish(6, "/core/namespaces/other");
        assert_eq!(w.try_next().expect("next").map(|e| e.rv), Some(6));
        let ring = h.lock();
        assert_eq!(
            ring.events.len(),
            1,
            "only the change after the start is kept"
        );
        assert_eq!(ring.bytes, ring.events[0].weight());
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
