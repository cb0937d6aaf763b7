//! [`SharedInformer`]: one list/watch loop feeding one [`Store`] and any number of
//! [`Subscription`]s; [`Informers`]: the per-manager registry that hands out one informer per
//! kind, namespace and selectors.
//!
//! # Guarantees
//! - The store is updated before subscribers hear of a change, so a subscriber that reads the
//!   store after a [`Change`] sees that change or a newer one.
//! - A subscriber's first change is [`Change::Resync`]; so is the first change after each
//!   relist, and after the subscriber fell behind by more than its buffer. A handler that
//!   re-reads the store on `Resync` has therefore seen every object, whenever it subscribed.
//! - Objects a relist finds gone (deleted while the watch was down) are sent as
//!   [`Change::Deleted`], with their last cached state, before the relist's `Resync`.
//! - A slow subscriber never slows the informer or other subscribers: the informer only ever
//!   `try_send`s. A full buffer marks the subscriber behind; further changes for it are not
//!   queued, and once it has drained what is queued it gets `Resync`.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use futures::future::BoxFuture;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric as _};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::gauge::ConstGauge;
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::sync::{Notify, mpsc};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::backoff::Backoff;
use super::watcher::{Event, Watcher};
use super::{Change, InformerConfig};
use crate::cache::{Entry, ListBuffer, Outcome, Packed, Store};

/// The bounds every informed kind meets.
pub trait Informable:
    kube::Resource<DynamicType = ()>
    + Clone
    + DeserializeOwned
    + Serialize
    + Debug
    + Send
    + Sync
    + 'static
{
}

impl<K> Informable for K where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + DeserializeOwned
        + Serialize
        + Debug
        + Send
        + Sync
        + 'static
{
}

/// One informer: a list/watch loop, its cache and its subscribers. Cheap to clone.
pub struct SharedInformer<K> {
    shared: Arc<Shared<K>>,
}

impl<K> Clone for SharedInformer<K> {
    fn clone(&self) -> Self {
        SharedInformer {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<K> Debug for SharedInformer<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedInformer")
            .field("config", &self.shared.config)
            .field("started", &self.shared.started.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

struct Shared<K> {
    client: kube::Client,
    config: InformerConfig,
    store: Store<K>,
    subscribers: Mutex<Subscribers<K>>,
    started: AtomicBool,
}

struct Subscribers<K> {
    list: Vec<Subscriber<K>>,
    stopped: bool,
}

struct Subscriber<K> {
    tx: mpsc::Sender<Change<K>>,
    state: Arc<SubscriberState>,
}

#[derive(Default)]
struct SubscriberState {
    /// The subscriber's buffer overflowed: changes are skipped until it resyncs.
    behind: AtomicBool,
    /// Wakes a subscriber waiting on an empty buffer when it has been marked behind.
    wake: Notify,
}

/// A stream of [`Change`]s from one informer to one handler.
pub struct Subscription<K> {
    rx: mpsc::Receiver<Change<K>>,
    state: Arc<SubscriberState>,
}

impl<K> Debug for Subscription<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Subscription")
            .field("queued", &self.rx.len())
            .field("behind", &self.state.behind.load(Ordering::Relaxed))
            .finish()
    }
}

impl<K> Subscription<K> {
    /// The next change, or `None` once the informer has stopped.
    pub async fn next(&mut self) -> Option<Change<K>> {
        loop {
            match self.rx.try_recv() {
                Ok(change) => return Some(change),
                Err(mpsc::error::TryRecvError::Empty) => {
                    if self.state.behind.swap(false, Ordering::AcqRel) {
                        return Some(Change::Resync);
                    }
                }
                Err(mpsc::error::TryRecvError::Disconnected) => {
                    if self.state.behind.swap(false, Ordering::AcqRel) {
                        return Some(Change::Resync);
                    }
                    return None;
                }
            }
            tokio::select! {
                change = self.rx.recv() => match change {
                    Some(change) => return Some(change),
                    None => continue,
                },
                () = self.state.wake.notified() => {}
            }
        }
    }
}

impl<K: Informable> SharedInformer<K> {
    /// An informer for `K` that is not started yet (see [`SharedInformer::start`]). Usually
    /// obtained from [`Informers::get`] instead, which shares it.
    pub fn new(client: kube::Client, config: InformerConfig) -> Self {
        SharedInformer {
            shared: Arc::new(Shared {
                client,
                store: Store::new(config.decoded_cache),
                config,
                subscribers: Mutex::new(Subscribers {
                    list: Vec::new(),
                    stopped: false,
                }),
                started: AtomicBool::new(false),
            }),
        }
    }

    /// The informer's cache.
    pub fn store(&self) -> Store<K> {
        self.shared.store.clone()
    }

    /// The informer's configuration.
    pub fn config(&self) -> &InformerConfig {
        &self.shared.config
    }

    /// A new subscription; its first change is [`Change::Resync`].
    pub fn subscribe(&self) -> Subscription<K> {
        let (tx, rx) = mpsc::channel(self.shared.config.subscriber_buffer);
        let state = Arc::new(SubscriberState::default());
        // The buffer is new and at least one slot long, so the first Resync always fits.
        let _ = tx.try_send(Change::Resync);
        let mut subs = self.subscribers();
        if !subs.stopped {
            subs.list.push(Subscriber {
                tx,
                state: Arc::clone(&state),
            });
        }
        Subscription { rx, state }
    }

    /// Registers the secondary index `name`: `f` returns the values an object is listed
    /// under, queried with [`Store::by_index`]. Objects already cached are indexed now.
    pub fn add_index(&self, name: &str, f: impl Fn(&K) -> Vec<String> + Send + Sync + 'static) {
        self.shared.store.add_index(name, Arc::new(f));
    }

    /// Starts the list/watch loop (once; later calls do nothing). It stops when `shutdown`
    /// is cancelled; subscriptions then end. The loop's task is not tracked: to wait for it
    /// to end, use [`start_with`](Self::start_with).
    pub fn start(&self, shutdown: CancellationToken) {
        self.start_with(shutdown, &TaskTracker::new());
    }

    /// [`start`](Self::start), with the loop's task spawned on `tracker`, so whoever owns the
    /// tracker (a manager's shutdown phase) can wait for the loop to end.
    pub fn start_with(&self, shutdown: CancellationToken, tracker: &TaskTracker) {
        if self.shared.started.swap(true, Ordering::AcqRel) {
            return;
        }
        let this = self.clone();
        tracker.spawn(async move { this.run(shutdown).await });
    }

    /// Whether the loop was started.
    pub fn is_started(&self) -> bool {
        self.shared.started.load(Ordering::Acquire)
    }

    fn subscribers(&self) -> std::sync::MutexGuard<'_, Subscribers<K>> {
        self.shared
            .subscribers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Parses one object from `d` and packs it as this informer caches it (see
    /// [`InformerConfig::ingest`]).
    pub(crate) fn ingest<'de, D: serde::Deserializer<'de>>(
        &self,
        d: D,
    ) -> Result<Packed<K>, D::Error> {
        self.shared.config.ingest(&self.shared.store, d, true)
    }

    /// The list/watch loop.
    async fn run(self, shutdown: CancellationToken) {
        let shared = &self.shared;
        let mut watcher = Watcher::new(shared.client.clone(), shared.config.clone(), self.store());
        let mut backoff = Backoff::new(shared.config.backoff.clone());
        let mut buffer = ListBuffer::default();
        loop {
            let step = tokio::select! {
                () = shutdown.cancelled() => break,
                step = watcher.step() => step,
            };
            match step {
                Ok(None) => {}
                Ok(Some(event)) => self.handle(event, &mut buffer, &mut backoff),
                Err(e) => {
                    let delay = backoff.failed(tokio::time::Instant::now());
                    tracing::warn!(
                        error = %e, state = ?watcher.state(), ?delay,
                        kind = %K::kind(&()), "informer request failed, retrying"
                    );
                    tokio::select! {
                        () = shutdown.cancelled() => break,
                        () = tokio::time::sleep(delay) => {}
                    }
                }
            }
        }
        let mut subs = self.subscribers();
        subs.stopped = true;
        subs.list.clear();
    }

    fn handle(&self, event: Event<K>, buffer: &mut ListBuffer, backoff: &mut Backoff) {
        let store = &self.shared.store;
        match event {
            Event::Init => *buffer = ListBuffer::default(),
            Event::InitApply(items) => {
                for item in items {
                    buffer.push(item);
                }
            }
            Event::InitDone { rv } => {
                let vanished = store.replace(std::mem::take(buffer), rv);
                tracing::debug!(kind = %K::kind(&()), objects = store.len(), vanished = vanished.len(), "informer synced");
                // Objects deleted while the watch was down: subscribers hear of each, with its
                // last known state, before the Resync (a resync only lists what exists).
                for entry in &vanished {
                    if let Some(obj) = self.decode(entry) {
                        self.dispatch(|| Change::Deleted(Arc::clone(&obj)));
                    }
                }
                self.dispatch(|| Change::Resync);
            }
            Event::Connected => backoff.healthy(tokio::time::Instant::now()),
            Event::Bookmark { rv } => store.observed(rv),
            Event::Applied(packed) => {
                // `new` is the Arc the store's readers of this version share: the event's
                // own, or the one already cached when the store held this version first.
                let (old, old_obj, new) = match store.apply(&packed) {
                    Outcome::Changed(old, old_obj) => (old, old_obj, packed.obj),
                    Outcome::Stale(shared) => (None, None, shared.unwrap_or(packed.obj)),
                };
                store.observed(packed.entry.rv());
                if self.has_subscribers() {
                    let old = old_obj.or_else(|| old.and_then(|e| self.decode(&e)));
                    self.dispatch(|| Change::Applied {
                        old: old.clone(),
                        new: Arc::clone(&new),
                    });
                }
            }
            Event::Deleted(packed) => {
                store.delete(packed.entry.key(), packed.entry.rv(), false);
                store.observed(packed.entry.rv());
                let obj = packed.obj;
                self.dispatch(|| Change::Deleted(Arc::clone(&obj)));
            }
        }
    }

    fn decode(&self, entry: &Entry) -> Option<Arc<K>> {
        self.shared.store.decode_entry(entry)
    }

    fn has_subscribers(&self) -> bool {
        !self.subscribers().list.is_empty()
    }

    /// Offers a change to every subscriber without ever waiting.
    fn dispatch(&self, change: impl Fn() -> Change<K>) {
        let mut subs = self.subscribers();
        subs.list.retain(|s| !s.tx.is_closed());
        for sub in &subs.list {
            if sub.state.behind.load(Ordering::Acquire) {
                continue;
            }
            if let Err(mpsc::error::TrySendError::Full(_)) = sub.tx.try_send(change()) {
                sub.state.behind.store(true, Ordering::Release);
                sub.state.wake.notify_one();
            }
        }
    }
}

type InformerId = (TypeId, Option<String>, Option<String>, Option<String>);
/// Reads a cache's object count and packed bytes.
type CacheSize = Box<dyn Fn() -> (usize, usize) + Send + Sync>;

/// The labels of the cache-size gauges: what an informer caches.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CacheLabels {
    /// The resource, with its group: `pods`, `replicasets.apps`.
    resource: String,
    namespace: String,
    label_selector: String,
    field_selector: String,
}
type SyncWait = Box<dyn Fn() -> BoxFuture<'static, ()> + Send + Sync>;
/// Starts one informer on a tracker, once the registry is started.
type Starter = Box<dyn FnOnce(CancellationToken, &TaskTracker) + Send>;

/// The informers of one manager: one per kind, namespace and selectors, however many
/// controllers ask for it. Cheap to clone.
#[derive(Clone)]
pub struct Informers {
    client: kube::Client,
    registry: Arc<Mutex<Registry>>,
}

#[derive(Default)]
struct Registry {
    informers: HashMap<InformerId, Box<dyn Any + Send + Sync>>,
    /// Each informer's cache size, read on every scrape of `/metrics`.
    sizes: Vec<(CacheLabels, CacheSize)>,
    starters: Vec<Starter>,
    synced: Vec<SyncWait>,
    shutdown: Option<CancellationToken>,
    /// Where the informers' tasks are spawned once started.
    tracker: TaskTracker,
}

impl Debug for Informers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let registry = self.lock();
        f.debug_struct("Informers")
            .field("informers", &registry.informers.len())
            .field("started", &registry.shutdown.is_some())
            .finish()
    }
}

impl Informers {
    /// An empty registry whose informers will use `client`.
    pub fn new(client: kube::Client) -> Self {
        Informers {
            client,
            registry: Arc::new(Mutex::new(Registry::default())),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Registry> {
        self.registry.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The informer for `K` with this namespace and these selectors, created on first use
    /// (and started at once if [`Informers::start`] already ran).
    ///
    /// For a kind the controller only maps (for example owned objects it never reads in
    /// full), ask for `kube::core::PartialObjectMeta<K>`: the informer then lists and watches
    /// metadata only.
    pub fn get<K: Informable>(&self, config: InformerConfig) -> SharedInformer<K> {
        let (ns, labels, fields) = config.identity();
        let id = (TypeId::of::<K>(), ns, labels, fields);
        let mut registry = self.lock();
        if let Some(existing) = registry
            .informers
            .get(&id)
            .and_then(|i| i.downcast_ref::<SharedInformer<K>>())
        {
            return existing.clone();
        }
        let informer = SharedInformer::<K>::new(self.client.clone(), config);
        let group = K::group(&());
        let plural = K::plural(&());
        let labels = CacheLabels {
            resource: if group.is_empty() {
                plural.into_owned()
            } else {
                format!("{plural}.{group}")
            },
            namespace: id.1.clone().unwrap_or_default(),
            label_selector: id.2.clone().unwrap_or_default(),
            field_selector: id.3.clone().unwrap_or_default(),
        };
        registry.informers.insert(id, Box::new(informer.clone()));
        let store = informer.store();
        let sized = store.clone();
        registry.sizes.push((
            labels,
            Box::new(move || (sized.len(), sized.packed_bytes())),
        ));
        registry.synced.push(Box::new(move || {
            let store = store.clone();
            Box::pin(async move { store.wait_until_synced().await })
        }));
        match &registry.shutdown {
            Some(token) => informer.start_with(token.child_token(), &registry.tracker),
            None => {
                let informer = informer.clone();
                registry.starters.push(Box::new(move |token, tracker| {
                    informer.start_with(token, tracker)
                }));
            }
        }
        informer
    }

    /// Starts every informer, and from now on starts new ones as they are created. They stop
    /// when `shutdown` is cancelled. Their tasks are not tracked: to wait for them to end, use
    /// [`start_with`](Self::start_with).
    pub fn start(&self, shutdown: CancellationToken) {
        self.start_with(shutdown, TaskTracker::new());
    }

    /// [`start`](Self::start), with every informer's task (those created later too) spawned on
    /// `tracker`, so its owner can wait for them after cancelling `shutdown` (the manager's
    /// informer phase does). Only the first call of `start` or `start_with` counts.
    pub fn start_with(&self, shutdown: CancellationToken, tracker: TaskTracker) {
        let starters = {
            let mut registry = self.lock();
            if registry.shutdown.is_some() {
                return;
            }
            registry.shutdown = Some(shutdown.clone());
            registry.tracker = tracker.clone();
            std::mem::take(&mut registry.starters)
        };
        for start in starters {
            start(shutdown.child_token(), &tracker);
        }
    }

    /// Waits until every informer created so far has swapped in its first list (forever if
    /// [`Informers::start`] is never called).
    pub async fn wait_until_synced(&self) {
        let waits: Vec<BoxFuture<'static, ()>> = self.lock().synced.iter().map(|w| w()).collect();
        futures::future::join_all(waits).await;
    }

    /// The client the informers use.
    pub fn client(&self) -> kube::Client {
        self.client.clone()
    }

    /// Serves the size of every informer's cache in `registry` (the manager's `/metrics`
    /// does this for its informers), read at each scrape, labelled by `resource`,
    /// `namespace`, `label_selector` and `field_selector` (informers that differ only in
    /// what they decode, such as a metadata-only one, add up in one series):
    ///
    /// | family | type | what |
    /// | --- | --- | --- |
    /// | `kore_cache_objects` | gauge | cached objects |
    /// | `kore_cache_packed_bytes` | gauge | the packed entries' bytes ([`Store::packed_bytes`]) |
    pub fn register_metrics(&self, registry: &mut prometheus_client::registry::Registry) {
        registry.register_collector(Box::new(CacheSizes(Arc::clone(&self.registry))));
    }
}

/// A gauge family of [`CacheSizes`]: name, help, and which of (objects, bytes) it reports.
type Family = (&'static str, &'static str, fn((usize, usize)) -> usize);

/// The collector behind [`Informers::register_metrics`].
struct CacheSizes(Arc<Mutex<Registry>>);

impl Debug for CacheSizes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CacheSizes")
    }
}

impl Collector for CacheSizes {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let mut sizes: Vec<(CacheLabels, (usize, usize))> = Vec::new();
        {
            let registry = self.0.lock().unwrap_or_else(PoisonError::into_inner);
            for (labels, read) in &registry.sizes {
                let (objects, bytes) = read();
                match sizes.iter_mut().find(|(l, _)| l == labels) {
                    Some((_, sum)) => *sum = (sum.0 + objects, sum.1 + bytes),
                    None => sizes.push((labels.clone(), (objects, bytes))),
                }
            }
        }
        let families: [Family; 2] = [
            (
                "kore_cache_objects",
                "Objects in an informer's cache",
                |s| s.0,
            ),
            (
                "kore_cache_packed_bytes",
                "Bytes of an informer's packed cache entries",
                |s| s.1,
            ),
        ];
        for (name, help, pick) in families {
            let mut family = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
            for (labels, size) in &sizes {
                let value = i64::try_from(pick(*size)).unwrap_or(i64::MAX);
                ConstGauge::new(value).encode(family.encode_family(labels)?)?;
            }
        }
        Ok(())
    }
}
