//! Sources: tasks that turn informer changes into keys of the primary kind in the workqueue.
//!
//! Each source owns one [`Subscription`](crate::informer::Subscription) and runs
//! `loop { select! { stopped, next change } }`. Adding to the queue never waits, so a source
//! drains its subscription as fast as the informer fills it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use futures::future::BoxFuture;
use kube::Resource;
use tokio_util::sync::CancellationToken;

use super::predicate::{Event, Predicate};
use crate::cache::{ObjectKey, Store};
use crate::informer::{Change, Informable, SharedInformer};
use crate::queue::Queue;

/// A source not yet started: given the queue and a stop token, it returns its task. It can
/// start again (with a new queue) when a controller runs another term of leadership.
pub(crate) type SourceFn =
    Arc<dyn Fn(Queue<ObjectKey>, CancellationToken) -> BoxFuture<'static, ()> + Send + Sync>;

/// Maps an object of a watched kind to keys of the primary kind.
pub(crate) type MapFn<X> = Arc<dyn Fn(&X) -> Vec<ObjectKey> + Send + Sync>;

/// Final states of deleted primary objects, kept until a worker reconciles their keys.
pub(crate) struct Tombstones<K> {
    map: Mutex<HashMap<ObjectKey, Arc<K>>>,
}

impl<K> Tombstones<K> {
    pub(crate) fn new() -> Self {
        Self {
            map: Mutex::new(HashMap::new()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<ObjectKey, Arc<K>>> {
        self.map.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn insert(&self, key: ObjectKey, obj: Arc<K>) {
        self.lock().insert(key, obj);
    }

    /// Forgets a tombstone (the object is back, or its deletion was reconciled).
    pub(crate) fn take(&self, key: &ObjectKey) -> Option<Arc<K>> {
        let mut map = self.lock();
        if map.is_empty() {
            return None;
        }
        map.remove(key)
    }
}

/// Enqueues `key` for a change of the object itself: lifts a quarantine, or adds it.
fn enqueue_changed(queue: &Queue<ObjectKey>, key: ObjectKey) {
    if !queue.release(&key) {
        queue.add(key);
    }
}

fn accepts<K: 'static>(predicate: Option<&Predicate<K>>, event: &Event<'_, K>) -> bool {
    predicate.is_none_or(|p| p.accepts(event))
}

/// The source of the primary kind: its own changes, filtered by the predicate.
pub(crate) async fn primary<K: Informable>(
    informer: SharedInformer<K>,
    predicate: Option<Predicate<K>>,
    queue: Queue<ObjectKey>,
    tombstones: Arc<Tombstones<K>>,
    stop: CancellationToken,
) {
    let mut changes = informer.subscribe();
    let store = informer.store();
    let predicate = predicate.as_ref();
    loop {
        let change = tokio::select! {
            () = stop.cancelled() => return,
            change = changes.next() => change,
        };
        match change {
            None => return,
            Some(Change::Applied { old, new }) => {
                let event = match &old {
                    Some(old) => Event::Update {
                        old: &**old,
                        new: &*new,
                    },
                    None => Event::Create(&*new),
                };
                if accepts(predicate, &event) {
                    let key = ObjectKey::of(&*new);
                    tombstones.take(&key);
                    enqueue_changed(&queue, key);
                }
            }
            Some(Change::Deleted(obj)) => {
                if accepts(predicate, &Event::Delete(&obj)) {
                    let key = ObjectKey::of(&*obj);
                    tombstones.insert(key.clone(), obj);
                    enqueue_changed(&queue, key);
                }
            }
            Some(Change::Resync) => resync_primary(&store, predicate, &queue),
        }
    }
}

/// Enqueues every cached object (as creates, for the predicate). A resync is not a change,
/// so quarantined keys stay quarantined.
fn resync_primary<K: Informable>(
    store: &Store<K>,
    predicate: Option<&Predicate<K>>,
    queue: &Queue<ObjectKey>,
) {
    match predicate {
        Some(p) if !p.creates_pass() => {
            for obj in store.list() {
                if p.accepts(&Event::Create(&obj)) {
                    queue.add(ObjectKey::of(&*obj));
                }
            }
        }
        _ => queue.add_all(store.keys()),
    }
}

/// A source of another kind, mapped to primary keys by `map` (applied to both versions of an
/// update, so moving an object between owners reconciles both).
pub(crate) fn mapped<X: Informable>(informer: SharedInformer<X>, map: MapFn<X>) -> SourceFn {
    Arc::new(move |queue, stop| {
        let (informer, map) = (informer.clone(), Arc::clone(&map));
        Box::pin(async move {
            let mut changes = informer.subscribe();
            let store = informer.store();
            loop {
                let change = tokio::select! {
                    () = stop.cancelled() => return,
                    change = changes.next() => change,
                };
                match change {
                    None => return,
                    Some(Change::Applied { old, new }) => {
                        for key in map(&new) {
                            queue.add(key);
                        }
                        for key in old.iter().flat_map(|old| map(old)) {
                            queue.add(key);
                        }
                    }
                    Some(Change::Deleted(obj)) => {
                        for key in map(&obj) {
                            queue.add(key);
                        }
                    }
                    Some(Change::Resync) => {
                        for obj in store.list() {
                            for key in map(&obj) {
                                queue.add(key);
                            }
                        }
                    }
                }
            }
        })
    })
}

/// Maps an owned object to its controller owner of kind `K` (the ownerReference with
/// `controller: true` whose group and kind are `K`'s).
pub(crate) fn controller_owner<K, C>() -> MapFn<C>
where
    K: Resource<DynamicType = ()>,
    C: Resource,
{
    let kind = K::kind(&()).into_owned();
    let group = K::group(&()).into_owned();
    let cluster_scoped = is_cluster_scoped::<K>();
    Arc::new(move |child: &C| {
        let meta = child.meta();
        meta.owner_references
            .iter()
            .flatten()
            .filter(|r| r.controller == Some(true) && r.kind == kind)
            .filter(|r| group_of(&r.api_version) == group)
            .map(|r| match meta.namespace.as_deref() {
                Some(ns) if !cluster_scoped => ObjectKey::namespaced(ns, &r.name),
                _ => ObjectKey::cluster(r.name.clone()),
            })
            .collect()
    })
}

/// The group of an apiVersion (`apps/v1` → `apps`, `v1` → the core group, ``).
fn group_of(api_version: &str) -> &str {
    api_version.rsplit_once('/').map_or("", |(group, _)| group)
}

/// Whether `K` is cluster-scoped. kube's `Resource` names its scope only as a type, and
/// k8s-openapi and kube-derive both use `ClusterResourceScope` for cluster-scoped kinds.
fn is_cluster_scoped<K: Resource>() -> bool {
    std::any::type_name::<K::Scope>().ends_with("ClusterResourceScope")
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
    use k8s_openapi::api::core::v1::Namespace;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
    use kube::api::ObjectMeta;

    use super::*;

    fn owned_by(refs: Vec<OwnerReference>) -> ReplicaSet {
        ReplicaSet {
            metadata: ObjectMeta {
                name: Some("rs".into()),
                namespace: Some("ns".into()),
                owner_references: Some(refs),
                ..ObjectMeta::default()
            },
            ..ReplicaSet::default()
        }
    }

    fn reference(api_version: &str, kind: &str, name: &str, controller: bool) -> OwnerReference {
        OwnerReference {
            api_version: api_version.into(),
            kind: kind.into(),
            name: name.into(),
            uid: "u".into(),
            controller: Some(controller),
            block_owner_deletion: None,
        }
    }

    #[test]
    fn owned_objects_map_to_their_controller_owner_only() {
        let map = controller_owner::<Deployment, ReplicaSet>();
        let rs = owned_by(vec![
            reference("apps/v1", "Deployment", "not-controller", false),
            reference("apps/v1beta1", "Deployment", "web", true),
        ]);
        assert_eq!(map(&rs), vec![ObjectKey::namespaced("ns", "web")]);
        let other_kind = owned_by(vec![reference("v1", "Deployment", "web", true)]);
        assert!(
            map(&other_kind).is_empty(),
            "the core group has no Deployment"
        );
    }

    #[test]
    fn scope_is_read_from_the_kind() {
        assert!(is_cluster_scoped::<Namespace>());
        assert!(!is_cluster_scoped::<Deployment>());
        assert_eq!(group_of("apps/v1"), "apps");
        assert_eq!(group_of("v1"), "");
    }
}
