//! Predicates: which watch events of a controller's primary kind enqueue a reconcile.
//!
//! The built-ins filter updates only (creates and deletes always pass), as controller-runtime's
//! do: [`generation_changed`] (spec changes; status-only writes are skipped),
//! [`labels_changed`], [`annotations_changed`] and [`resource_version_changed`].
//! [`Predicate::new`] makes any other, and [`and`](Predicate::and), [`or`](Predicate::or) and
//! [`not`](Predicate::not) compose them.
//!
//! ```
//! use k8s_openapi::api::apps::v1::Deployment;
//! use kore_runtime::controller::predicate::{self, Event, Predicate};
//!
//! // Spec or label changes, but never objects labelled `skip=true`.
//! let not_skipped = Predicate::new(|e: &Event<'_, Deployment>| {
//!     let labels = e.object().metadata.labels.as_ref();
//!     labels.is_none_or(|l| l.get("skip").map(String::as_str) != Some("true"))
//! });
//! let p = predicate::generation_changed()
//!     .or(predicate::labels_changed())
//!     .and(not_skipped);
//! # let _ = p;
//! ```

use std::sync::Arc;

use kube::Resource;

/// A watch event, as a predicate sees it.
#[derive(Debug)]
pub enum Event<'a, K> {
    /// The object is new to the controller (created, or first listed).
    Create(&'a K),
    /// The object changed from `old` to `new`.
    Update {
        /// The version the cache held before.
        old: &'a K,
        /// The version it holds now.
        new: &'a K,
    },
    /// The object was deleted; this is its final state.
    Delete(&'a K),
}

impl<'a, K> Event<'a, K> {
    /// The object the event is about (the new version of an update).
    pub fn object(&self) -> &'a K {
        match *self {
            Event::Create(obj) | Event::Delete(obj) => obj,
            Event::Update { new, .. } => new,
        }
    }
}

type PredicateFn<K> = dyn Fn(&Event<'_, K>) -> bool + Send + Sync;

/// A filter over watch events. Cheap to clone.
pub struct Predicate<K> {
    f: Arc<PredicateFn<K>>,
    /// Whether every `Create` passes, so a resync can enqueue cached keys without decoding
    /// each object to ask.
    creates_pass: bool,
}

impl<K> Clone for Predicate<K> {
    fn clone(&self) -> Self {
        Self {
            f: self.f.clone(),
            creates_pass: self.creates_pass,
        }
    }
}

impl<K> std::fmt::Debug for Predicate<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Predicate")
            .field("creates_pass", &self.creates_pass)
            .finish_non_exhaustive()
    }
}

impl<K: 'static> Predicate<K> {
    /// A predicate from any function of the event.
    pub fn new(f: impl Fn(&Event<'_, K>) -> bool + Send + Sync + 'static) -> Self {
        Self {
            f: Arc::new(f),
            creates_pass: false,
        }
    }

    /// A predicate that decides updates with `f` and passes creates and deletes.
    pub fn on_update(f: impl Fn(&K, &K) -> bool + Send + Sync + 'static) -> Self {
        Self {
            f: Arc::new(move |e: &Event<'_, K>| match *e {
                Event::Update { old, new } => f(old, new),
                Event::Create(_) | Event::Delete(_) => true,
            }),
            creates_pass: true,
        }
    }

    /// Passes what both pass.
    #[must_use]
    pub fn and(self, other: Predicate<K>) -> Self {
        let (a, b) = (self.f, other.f);
        Self {
            f: Arc::new(move |e: &Event<'_, K>| a(e) && b(e)),
            creates_pass: self.creates_pass && other.creates_pass,
        }
    }

    /// Passes what either passes.
    #[must_use]
    pub fn or(self, other: Predicate<K>) -> Self {
        let (a, b) = (self.f, other.f);
        Self {
            f: Arc::new(move |e: &Event<'_, K>| a(e) || b(e)),
            creates_pass: self.creates_pass || other.creates_pass,
        }
    }

    /// Passes what this rejects.
    #[allow(clippy::should_implement_trait)] // a builder verb, like `and` and `or`
    #[must_use]
    pub fn not(self) -> Self {
        let a = self.f;
        Self {
            f: Arc::new(move |e: &Event<'_, K>| !a(e)),
            creates_pass: false,
        }
    }

    /// Whether `event` passes.
    pub fn accepts(&self, event: &Event<'_, K>) -> bool {
        (self.f)(event)
    }

    /// Whether every create passes without looking at the object.
    pub(crate) fn creates_pass(&self) -> bool {
        self.creates_pass
    }
}

/// Passes updates that change `metadata.generation`, which the API server bumps on spec
/// changes only: the controller then skips its own status writes.
pub fn generation_changed<K: Resource + 'static>() -> Predicate<K> {
    Predicate::on_update(|old: &K, new: &K| old.meta().generation != new.meta().generation)
}

/// Passes updates that change the labels.
pub fn labels_changed<K: Resource + 'static>() -> Predicate<K> {
    Predicate::on_update(|old: &K, new: &K| old.meta().labels != new.meta().labels)
}

/// Passes updates that change the annotations.
pub fn annotations_changed<K: Resource + 'static>() -> Predicate<K> {
    Predicate::on_update(|old: &K, new: &K| old.meta().annotations != new.meta().annotations)
}

/// Passes updates that change `metadata.resourceVersion` (every real write; it skips only
/// repeats of the same version).
pub fn resource_version_changed<K: Resource + 'static>() -> Predicate<K> {
    Predicate::on_update(|old: &K, new: &K| {
        old.meta().resource_version != new.meta().resource_version
    })
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::ObjectMeta;

    use super::*;

    fn cm(generation: i64, label: &str, rv: &str) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                name: Some("a".into()),
                generation: Some(generation),
                resource_version: Some(rv.into()),
                labels: Some([("l".to_owned(), label.to_owned())].into()),
                ..ObjectMeta::default()
            },
            ..ConfigMap::default()
        }
    }

    fn update<'a>(old: &'a ConfigMap, new: &'a ConfigMap) -> Event<'a, ConfigMap> {
        Event::Update { old, new }
    }

    #[test]
    fn generation_changed_skips_status_only_updates_but_passes_creates_and_deletes() {
        let p = generation_changed::<ConfigMap>();
        let (a, b, c) = (cm(1, "x", "1"), cm(1, "x", "2"), cm(2, "x", "3"));
        assert!(!p.accepts(&update(&a, &b)));
        assert!(p.accepts(&update(&b, &c)));
        assert!(p.accepts(&Event::Create(&a)));
        assert!(p.accepts(&Event::Delete(&a)));
        assert!(p.creates_pass());
    }

    #[test]
    fn built_ins_compare_the_field_they_name() {
        let (a, b) = (cm(1, "x", "1"), cm(1, "y", "1"));
        assert!(labels_changed::<ConfigMap>().accepts(&update(&a, &b)));
        assert!(!annotations_changed::<ConfigMap>().accepts(&update(&a, &b)));
        assert!(!resource_version_changed::<ConfigMap>().accepts(&update(&a, &b)));
        assert!(resource_version_changed::<ConfigMap>().accepts(&update(&a, &cm(1, "x", "2"))));
    }

    #[test]
    fn predicates_compose() {
        let (a, b) = (cm(1, "x", "1"), cm(1, "y", "2"));
        let gen_or_labels = generation_changed::<ConfigMap>().or(labels_changed());
        assert!(gen_or_labels.accepts(&update(&a, &b)));
        let gen_and_labels = generation_changed::<ConfigMap>().and(labels_changed());
        assert!(!gen_and_labels.accepts(&update(&a, &b)));
        assert!(
            generation_changed::<ConfigMap>()
                .not()
                .accepts(&update(&a, &b))
        );
        let named_b = Predicate::new(|e: &Event<'_, ConfigMap>| {
            e.object().metadata.resource_version.as_deref() == Some("2")
        });
        assert!(named_b.accepts(&update(&a, &b)));
        assert!(!named_b.accepts(&Event::Create(&a)));
        assert!(
            !named_b.creates_pass(),
            "a custom predicate may filter creates"
        );
        assert!(!named_b.clone().and(gen_or_labels.clone()).creates_pass());
        assert!(named_b.or(gen_or_labels).creates_pass());
    }
}
