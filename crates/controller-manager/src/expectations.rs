//! Controller expectations: what a controller has asked the API server to create or delete
//! for one owner and has not yet seen in its cache. While an owner has pending expectations
//! its controller does not create or delete pods for it again, so a lagging cache never
//! leads to creating or deleting twice (Kubernetes' `ControllerExpectations`).
//!
//! Kubernetes counts pending creates and tracks pending deletes by pod key, and lowers them
//! in its informer event handlers. kore records the names of the pods it created (the API
//! server returns them) and the keys and UIDs of those it deleted, and settles them against
//! the pod cache when the owner is next synced: a created pod is observed once the cache
//! holds it, a deleted one once the cache no longer holds it (or holds it with a deletion
//! timestamp, or under another UID). Because the cache is updated before the controller hears
//! of a change, this sees exactly what event handlers would have, and it also settles
//! expectations whose events were folded into a relist. As in Kubernetes, expectations older
//! than [`EXPECTATIONS_TTL`] count as satisfied, so a lost observation delays an owner by at
//! most that long.

use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kore_runtime::{ObjectKey, Store};
use tokio::time::Instant;

/// How long pending expectations hold an owner back at most (Kubernetes' `ExpectationsTimeout`).
pub const EXPECTATIONS_TTL: Duration = Duration::from_secs(5 * 60);

#[derive(Debug)]
struct Pending {
    /// Names of pods created and not yet cached.
    creates: HashSet<String>,
    /// Names and UIDs of pods deleted and still cached.
    deletes: HashMap<String, String>,
    /// When the last expectation was recorded.
    since: Instant,
}

/// Pending creates and deletes per owner, shared by a controller's workers.
#[derive(Debug)]
pub struct Expectations {
    owners: Mutex<HashMap<ObjectKey, Pending>>,
    ttl: Duration,
}

impl Default for Expectations {
    fn default() -> Self {
        Self::new(EXPECTATIONS_TTL)
    }
}

impl Expectations {
    /// Expectations that expire after `ttl`.
    pub fn new(ttl: Duration) -> Self {
        Expectations {
            owners: Mutex::new(HashMap::new()),
            ttl,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<ObjectKey, Pending>> {
        self.owners.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn pending<'a>(map: &'a mut HashMap<ObjectKey, Pending>, owner: &ObjectKey) -> &'a mut Pending {
        let p = map.entry(owner.clone()).or_insert_with(|| Pending {
            creates: HashSet::new(),
            deletes: HashMap::new(),
            since: Instant::now(),
        });
        p.since = Instant::now();
        p
    }

    /// Records that the pod `name` was created for `owner` (in the owner's namespace).
    pub fn created(&self, owner: &ObjectKey, name: String) {
        Self::pending(&mut self.lock(), owner).creates.insert(name);
    }

    /// Records that the pod `name` with `uid` is being deleted for `owner`.
    pub fn deleting(&self, owner: &ObjectKey, name: String, uid: String) {
        Self::pending(&mut self.lock(), owner)
            .deletes
            .insert(name, uid);
    }

    /// Forgets a delete that failed (so the pod stays and nothing will observe its deletion).
    pub fn delete_failed(&self, owner: &ObjectKey, name: &str) {
        if let Some(p) = self.lock().get_mut(owner) {
            p.deletes.remove(name);
        }
    }

    /// Whether `owner` may create or delete again: every create and delete it asked for is
    /// in `pods`' cache, or the expectations expired. Observed expectations are dropped.
    pub fn satisfied(&self, owner: &ObjectKey, pods: &Store<Pod>) -> bool {
        let mut map = self.lock();
        let Some(p) = map.get_mut(owner) else {
            return true;
        };
        let namespace = owner.namespace().unwrap_or_default().to_owned();
        let key = |name: &str| ObjectKey::namespaced(namespace.clone(), name);
        p.creates.retain(|name| pods.get(&key(name)).is_none());
        p.deletes.retain(|name, uid| {
            pods.get(&key(name)).is_some_and(|pod| {
                pod.metadata.uid.as_deref() == Some(uid.as_str())
                    && pod.metadata.deletion_timestamp.is_none()
            })
        });
        if p.creates.is_empty() && p.deletes.is_empty() {
            map.remove(owner);
            return true;
        }
        if p.since.elapsed() >= self.ttl {
            tracing::warn!(owner = %owner, creates = p.creates.len(), deletes = p.deletes.len(),
                "expectations expired before the cache showed them; syncing anyway");
            map.remove(owner);
            return true;
        }
        false
    }

    /// Drops `owner`'s expectations (it was deleted).
    pub fn forget(&self, owner: &ObjectKey) {
        self.lock().remove(owner);
    }

    /// How long until `owner`'s expectations expire, if it has any.
    pub fn expires_in(&self, owner: &ObjectKey) -> Option<Duration> {
        self.lock()
            .get(owner)
            .map(|p| self.ttl.saturating_sub(p.since.elapsed()))
    }
}
