//! [`InformerConfig`]: what an informer lists and watches, and how.

use std::sync::Arc;
use std::time::Duration;

use serde::de::{DeserializeOwned, Error as _};
use serde::{Deserialize as _, Serialize};
use serde_json::Value;

use super::BackoffConfig;
use crate::cache::{Packed, Store};

/// A hook applied to each object's JSON before it is cached.
pub type Transform = Arc<dyn Fn(&mut Value) + Send + Sync>;

/// What an informer watches and how.
///
/// Informers are shared per kind, namespace and selectors: [`crate::informer::Informers::get`]
/// returns the existing informer when those match, and the first caller's other settings
/// (page size, transform, buffers, backoff) win.
#[derive(Clone)]
#[must_use]
pub struct InformerConfig {
    pub(crate) namespace: Option<String>,
    pub(crate) label_selector: Option<String>,
    pub(crate) field_selector: Option<String>,
    pub(crate) page_size: u32,
    pub(crate) transform: Option<Transform>,
    pub(crate) keep_managed_fields: bool,
    pub(crate) subscriber_buffer: usize,
    pub(crate) decoded_cache: usize,
    pub(crate) watch_timeout: Duration,
    pub(crate) backoff: BackoffConfig,
}

impl Default for InformerConfig {
    fn default() -> Self {
        InformerConfig {
            namespace: None,
            label_selector: None,
            field_selector: None,
            page_size: 500,
            transform: None,
            keep_managed_fields: false,
            subscriber_buffer: 1024,
            decoded_cache: 1024,
            watch_timeout: Duration::from_secs(290),
            backoff: BackoffConfig::default(),
        }
    }
}

impl std::fmt::Debug for InformerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InformerConfig")
            .field("namespace", &self.namespace)
            .field("label_selector", &self.label_selector)
            .field("field_selector", &self.field_selector)
            .field("page_size", &self.page_size)
            .field("transform", &self.transform.is_some())
            .field("keep_managed_fields", &self.keep_managed_fields)
            .field("subscriber_buffer", &self.subscriber_buffer)
            .field("decoded_cache", &self.decoded_cache)
            .finish_non_exhaustive()
    }
}

impl InformerConfig {
    /// Watches only `namespace` (default: all namespaces).
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = Some(namespace.into());
        self
    }

    /// Watches only objects matching this label selector, e.g. `app=web,tier!=db`.
    pub fn label_selector(mut self, selector: impl Into<String>) -> Self {
        self.label_selector = Some(selector.into());
        self
    }

    /// Watches only objects matching this field selector, e.g. `metadata.name=x`.
    pub fn field_selector(mut self, selector: impl Into<String>) -> Self {
        self.field_selector = Some(selector.into());
        self
    }

    /// Objects per page of the initial list (default 500; 0 lists in one response).
    pub fn page_size(mut self, n: u32) -> Self {
        self.page_size = n;
        self
    }

    /// Rewrites each object's JSON before it is cached and before subscribers see it, e.g.
    /// to drop large fields the controller never reads. Runs after `managedFields` is dropped.
    pub fn transform(mut self, f: impl Fn(&mut Value) + Send + Sync + 'static) -> Self {
        self.transform = Some(Arc::new(f));
        self
    }

    /// Keeps `metadata.managedFields` (dropped by default: controllers rarely read it and it
    /// is often the largest part of an object).
    pub fn keep_managed_fields(mut self) -> Self {
        self.keep_managed_fields = true;
        self
    }

    /// Changes each subscriber may queue before it is marked as behind and resynced from
    /// the cache instead (default 1024).
    pub fn subscriber_buffer(mut self, n: usize) -> Self {
        self.subscriber_buffer = n.max(1);
        self
    }

    /// Decoded objects the cache keeps for its readers to share (default 1024; 0 decodes on
    /// every read).
    ///
    /// The cache holds each object packed, smaller than its JSON; reads decode it into an
    /// `Arc<K>`. The most recently read or changed objects are kept decoded, so every reader
    /// of a hot object gets the same allocation and a controller reading an object right
    /// after its change event gets the event's `Arc` without decoding. Each kept object costs
    /// its decoded size (a small ConfigMap: about 2.5 KB) on top of the packed cache; eviction
    /// is second-chance (CLOCK). The capacity is split into up to 8 shards by key hash, so
    /// size it well above the set of objects read again and again (a hot set close to the
    /// capacity may overflow a shard and miss).
    pub fn decoded_cache(mut self, n: usize) -> Self {
        self.decoded_cache = n;
        self
    }

    /// How long each watch request may last before the informer reopens it (default 290 s).
    pub fn watch_timeout(mut self, d: Duration) -> Self {
        self.watch_timeout = d;
        self
    }

    /// Retry delays after a failed list or watch.
    pub fn backoff(mut self, backoff: BackoffConfig) -> Self {
        self.backoff = backoff;
        self
    }

    /// Parses one object from `d` and packs it for `store` as this informer caches it.
    ///
    /// Without a transform the object is parsed straight into `K`, its managedFields skipped
    /// unparsed (`skip_managed.rs`), and packed from `K` (no JSON value in between, and the `K` is the one readers
    /// get). A transform works on JSON, so with one the object goes through a `Value`.
    ///
    /// With `event` (a watch event, or a write's answer) an object the cache already holds at
    /// this resourceVersion or a newer one is not packed at all: applying it is a no-op, and
    /// this is what the watch event of every `CachedClient` write is.
    pub(crate) fn ingest<'de, K, D>(
        &self,
        store: &Store<K>,
        d: D,
        event: bool,
    ) -> Result<Packed<K>, D::Error>
    where
        K: kube::Resource + DeserializeOwned + Serialize,
        D: serde::Deserializer<'de>,
    {
        if self.transform.is_some() {
            let mut value = Value::deserialize(d)?;
            self.prepare(&mut value);
            return store.pack(&value).map_err(D::Error::custom);
        }
        let obj = if self.keep_managed_fields {
            K::deserialize(d)?
        } else {
            // managedFields are skipped unparsed rather than parsed and dropped.
            K::deserialize(super::skip_managed::WithoutManagedFields(d))?
        };
        if event {
            store.pack_event(obj).map_err(D::Error::custom)
        } else {
            store.pack_typed(obj).map_err(D::Error::custom)
        }
    }

    /// Applies the default managedFields drop and the transform hook to `obj`.
    pub(crate) fn prepare(&self, obj: &mut Value) {
        if !self.keep_managed_fields
            && let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut)
        {
            meta.remove("managedFields");
        }
        if let Some(f) = &self.transform {
            f(obj);
        }
    }

    /// The identity of an informer built from this config, beside its kind.
    pub(crate) fn identity(&self) -> (Option<String>, Option<String>, Option<String>) {
        (
            self.namespace.clone(),
            self.label_selector.clone(),
            self.field_selector.clone(),
        )
    }
}
