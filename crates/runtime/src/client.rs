//! [`CachedClient`]: what a reconciler reads and writes through. Reads come from an
//! informer's cache; writes go to the API server through `kube::Client`.
//!
//! # Guarantees
//! - Read-your-own-writes: when a write succeeds, the object the server returned is put in
//!   the cache before the call returns, so the next read of that key sees it (or something
//!   newer), even though the watch event for it has not arrived yet. A successful delete
//!   removes the key at once; stale watch events for it cannot bring it back.
//! - The cache never goes back in time per key (see [`crate::cache::Store`]).
//!
//! # Caveats
//! - Reads are only as fresh as the informer plus this client's own writes; writes by others
//!   show up when their watch events arrive.
//! - Reads only cover what the informer watches (its namespace and selectors).

use std::fmt::Debug;
use std::sync::Arc;

use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::core::Request;
use serde::Serialize;
use serde_json::Value;

use crate::cache::{ObjectKey, Outcome, Packed, Store, parse_rv};
use crate::informer::{Informable, SharedInformer};

/// Why a cached client call failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The request could not be built.
    #[error("building the request")]
    BuildRequest(#[source] kube::core::request::Error),
    /// The object could not be serialized.
    #[error("serializing the object")]
    Serialize(#[source] serde_json::Error),
    /// The API server refused the write or could not be reached; a conflict (409) means the
    /// cache was stale: re-read and retry (the reconciler's usual backoff does this).
    #[error("the write failed")]
    Api(#[source] kube::Error),
    /// The server's answer did not decode as the kind.
    #[error("decoding the server's answer")]
    Decode(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The object has no name to address it by.
    #[error("the object has no name")]
    MissingName,
}

/// Reads from an informer's cache, writes through the API server, and records its own writes
/// in the cache. Cheap to clone.
pub struct CachedClient<K> {
    client: kube::Client,
    informer: SharedInformer<K>,
}

impl<K> Clone for CachedClient<K> {
    fn clone(&self) -> Self {
        CachedClient {
            client: self.client.clone(),
            informer: self.informer.clone(),
        }
    }
}

impl<K> Debug for CachedClient<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CachedClient").finish_non_exhaustive()
    }
}

impl<K: Informable + Serialize> CachedClient<K> {
    /// A client reading from `informer`'s cache and writing with `client`.
    pub fn new(client: kube::Client, informer: SharedInformer<K>) -> Self {
        CachedClient { client, informer }
    }

    /// The cache this client reads from.
    pub fn store(&self) -> Store<K> {
        self.informer.store()
    }

    /// The object under `key`, from the cache.
    pub fn get(&self, key: &ObjectKey) -> Option<Arc<K>> {
        self.informer.store().get(key)
    }

    /// Every cached object.
    pub fn list(&self) -> Vec<Arc<K>> {
        self.informer.store().list()
    }

    /// The cached objects the index `index` lists under `value`.
    pub fn by_index(&self, index: &str, value: &str) -> Vec<Arc<K>> {
        self.informer.store().by_index(index, value)
    }

    /// The keys the index `index` lists under `value`, from the cache: nothing is decoded.
    pub fn keys_by_index(&self, index: &str, value: &str) -> Vec<ObjectKey> {
        self.informer.store().keys_by_index(index, value)
    }

    fn request(namespace: Option<&str>) -> Request {
        Request::new(K::url_path(&(), namespace))
    }

    fn key_of(obj: &K) -> Result<ObjectKey, Error> {
        let key = ObjectKey::of(obj);
        if key.name().is_empty() && obj.meta().generate_name.is_none() {
            return Err(Error::MissingName);
        }
        Ok(key)
    }

    /// Sends a write and records the object the server returned.
    async fn write(&self, request: http::Request<Vec<u8>>) -> Result<Arc<K>, Error> {
        let text = self
            .client
            .request_text(request)
            .await
            .map_err(Error::Api)?;
        let mut de = serde_json::Deserializer::from_str(&text);
        let packed = self
            .informer
            .ingest(&mut de)
            .and_then(|p| de.end().map(|()| p))
            .map_err(|e| Error::Decode(Box::new(e)))?;
        self.record(packed)
    }

    /// Puts an object the server returned in the cache, unless the cache already holds a
    /// newer version; returns the object readers of this version share.
    fn record(&self, packed: Packed<K>) -> Result<Arc<K>, Error> {
        let store = self.informer.store();
        // The returned Arc is the one the store's readers of this version share.
        match store.apply(&packed) {
            Outcome::Stale(Some(shared)) => Ok(shared),
            Outcome::Stale(None) => Ok(packed.obj),
            Outcome::Changed(..) => {
                store.recorded(packed.entry.rv());
                Ok(packed.obj)
            }
        }
    }

    /// Creates `obj` (in its own namespace) and records the result in the cache.
    pub async fn create(&self, obj: &K, pp: &PostParams) -> Result<Arc<K>, Error> {
        let key = Self::key_of(obj)?;
        let body = serde_json::to_vec(obj).map_err(Error::Serialize)?;
        let request = Self::request(key.namespace())
            .create(pp, body)
            .map_err(Error::BuildRequest)?;
        self.write(request).await
    }

    /// Replaces `obj` (its resourceVersion is the precondition) and records the result.
    pub async fn replace(&self, obj: &K, pp: &PostParams) -> Result<Arc<K>, Error> {
        let key = Self::key_of(obj)?;
        let body = serde_json::to_vec(obj).map_err(Error::Serialize)?;
        let request = Self::request(key.namespace())
            .replace(key.name(), pp, body)
            .map_err(Error::BuildRequest)?;
        self.write(request).await
    }

    /// Replaces the status of `obj` and records the result.
    pub async fn replace_status(&self, obj: &K, pp: &PostParams) -> Result<Arc<K>, Error> {
        let key = Self::key_of(obj)?;
        let body = serde_json::to_vec(obj).map_err(Error::Serialize)?;
        let request = Self::request(key.namespace())
            .replace_subresource("status", key.name(), pp, body)
            .map_err(Error::BuildRequest)?;
        self.write(request).await
    }

    /// Patches the object under `key` and records the result.
    pub async fn patch<P: Serialize + Debug>(
        &self,
        key: &ObjectKey,
        pp: &PatchParams,
        patch: &Patch<P>,
    ) -> Result<Arc<K>, Error> {
        let request = Self::request(key.namespace())
            .patch(key.name(), pp, patch)
            .map_err(Error::BuildRequest)?;
        self.write(request).await
    }

    /// Patches the status of the object under `key` and records the result.
    pub async fn patch_status<P: Serialize + Debug>(
        &self,
        key: &ObjectKey,
        pp: &PatchParams,
        patch: &Patch<P>,
    ) -> Result<Arc<K>, Error> {
        let request = Self::request(key.namespace())
            .patch_subresource("status", key.name(), pp, patch)
            .map_err(Error::BuildRequest)?;
        self.write(request).await
    }

    /// Adds the finalizer `name` to `obj` in one write and records the answer: `obj` itself
    /// if it carries `name` already. The write carries `obj`'s resourceVersion, so a stale
    /// `obj` gets a conflict (409) back instead of dropping what another writer changed
    /// meanwhile; the object is never read from the API server. What
    /// [`finalizer::try_add_finalizer`](crate::finalizer::try_add_finalizer) does, with the
    /// answer in the cache: the next reconcile reads the finalizer, and the watch event of
    /// the write finds its version already there.
    pub async fn try_add_finalizer(&self, obj: &Arc<K>, name: &str) -> Result<Arc<K>, Error> {
        let Some(patch) =
            crate::finalizer::patch(obj.meta(), |list| crate::finalizer::adding(list, name))
        else {
            return Ok(Arc::clone(obj));
        };
        let key = Self::key_of(obj)?;
        self.patch(&key, &PatchParams::default(), &Patch::Merge(&patch))
            .await
    }

    /// Removes the finalizer `name` from `obj` in one write, as
    /// [`try_add_finalizer`](Self::try_add_finalizer) adds it; `obj` itself if it does not
    /// carry `name`, `None` if the object is gone (404).
    pub async fn try_remove_finalizer(
        &self,
        obj: &Arc<K>,
        name: &str,
    ) -> Result<Option<Arc<K>>, Error> {
        let Some(patch) =
            crate::finalizer::patch(obj.meta(), |list| crate::finalizer::removing(list, name))
        else {
            return Ok(Some(Arc::clone(obj)));
        };
        let key = Self::key_of(obj)?;
        match self
            .patch(&key, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(written) => Ok(Some(written)),
            Err(Error::Api(kube::Error::Api(s))) if s.code == 404 => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Deletes the object under `key`. Returns the object if it still exists (finalizers
    /// pending; the cache then holds it with its deletionTimestamp), `None` once it is gone
    /// (the cache no longer holds it).
    pub async fn delete(
        &self,
        key: &ObjectKey,
        dp: &DeleteParams,
    ) -> Result<Option<Arc<K>>, Error> {
        let request = Self::request(key.namespace())
            .delete(key.name(), dp)
            .map_err(Error::BuildRequest)?;
        let text = self
            .client
            .request_text(request)
            .await
            .map_err(Error::Api)?;
        let value: Value = serde_json::from_str(&text).map_err(|e| Error::Decode(Box::new(e)))?;
        let store = self.informer.store();
        let still_there = value.get("kind").and_then(Value::as_str) != Some("Status")
            && value
                .pointer("/metadata/finalizers")
                .and_then(Value::as_array)
                .is_some_and(|f| !f.is_empty());
        if still_there {
            let packed = self
                .informer
                .ingest(value)
                .map_err(|e| Error::Decode(Box::new(e)))?;
            return self.record(packed).map(Some);
        }
        let rv = parse_rv(
            value
                .pointer("/metadata/resourceVersion")
                .and_then(Value::as_str),
        );
        let rv = rv.max(store.entry(key.as_str()).map_or(0, |e| e.rv()));
        store.delete(key.as_str(), rv, true);
        Ok(None)
    }
}
