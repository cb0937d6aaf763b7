//! Informers: list then watch one kind into a [`Store`](crate::cache::Store), and fan the
//! changes out to subscribers.
//!
//! Start with [`Informers`] (one per manager): [`Informers::get`] returns the
//! [`SharedInformer`] for a kind, namespace and selectors, creating it on first use; its
//! [`SharedInformer::store`] is the cache and [`SharedInformer::subscribe`] a stream of
//! [`Change`]s for one handler.
//!
//! The protocol (list in pages, watch from the list's resourceVersion with bookmarks, relist
//! on 410 Gone, back off on other failures) is an explicit state machine in `watcher.rs`; the
//! design and its guarantees are in `docs/design/informer.md`.
//!
//! What informers do not do: write to the API server (see [`crate::client::CachedClient`])
//! or queue work (controllers map changes to keys themselves).

use std::sync::Arc;

pub(crate) mod backoff;
mod config;
mod shared;
mod skip_managed;
mod watcher;

pub use backoff::BackoffConfig;
pub use config::{InformerConfig, Transform};
pub use shared::{Informable, Informers, SharedInformer, Subscription};

/// A change an informer reports to a subscriber. The cache already reflects it.
#[derive(Debug)]
pub enum Change<K> {
    /// An object was created or updated. `old` is the version the cache held before, when it
    /// held an older one (`None` for a new object, or when the cache was already ahead, e.g.
    /// after the [`CachedClient`](crate::client::CachedClient) recorded this very write).
    Applied {
        /// The version this change replaced in the cache.
        old: Option<Arc<K>>,
        /// The object as the server sent it (after the transform hook).
        new: Arc<K>,
    },
    /// An object was deleted; this is its last state.
    Deleted(Arc<K>),
    /// The subscriber must re-read the whole store (first event, after a relist, or after it fell behind).
    ///
    /// [`Store::keys`](crate::cache::Store::keys) is the cheap way to do so: it decodes
    /// nothing, while `list` decodes every object.
    Resync,
}

impl<K> Clone for Change<K> {
    fn clone(&self) -> Self {
        match self {
            Change::Applied { old, new } => Change::Applied {
                old: old.clone(),
                new: Arc::clone(new),
            },
            Change::Deleted(obj) => Change::Deleted(Arc::clone(obj)),
            Change::Resync => Change::Resync,
        }
    }
}

/// Why an informer request failed. The informer retries every one of them itself with
/// backoff (a 410 Gone is not an error: it relists); they surface only in logs.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A request could not be built (a bad selector, for example).
    #[error("building the request")]
    BuildRequest(#[source] kube::core::request::Error),
    /// A page of the initial list failed.
    #[error("listing failed")]
    InitialListFailed(#[source] kube::Error),
    /// Opening a watch failed.
    #[error("starting the watch failed")]
    WatchStartFailed(#[source] kube::Error),
    /// Reading the watch stream failed.
    #[error("reading the watch stream failed")]
    WatchFailed(#[source] std::io::Error),
    /// The server ended the watch with an error other than 410 Gone.
    #[error("the watch ended with an error: {}", .0.message.as_deref().unwrap_or("no message"))]
    WatchError(Box<k8s_openapi::apimachinery::pkg::apis::meta::v1::Status>),
    /// An object or event did not decode as the informer's kind.
    #[error("decoding an object failed")]
    Decode(#[source] Box<dyn std::error::Error + Send + Sync>),
}
