//! The registry: which resources are served, and the verbs on them with Kubernetes semantics.
//!
//! [`Registry`] owns the [`Catalog`] of served [`Resource`]s and the storage. Its methods
//! implement every verb: `get`, `list` ([`list`]), `create`, `update`, `patch`, `apply`,
//! `delete`, `delete_collection`, and the subresources `status` (a [`rest::Part`]), `scale`
//! (`get_scale`, `update_scale`, `patch_scale`) and `finalize` (`finalize_namespace`), one
//! file each in [`rest`]. They carry the parts every kind shares — server-owned metadata,
//! names and namespaces, optimistic concurrency, the status subresource, finalizers, dry
//! runs — and ask the resource's [`Strategy`] for the rest through its hooks (defaults,
//! validation, what a delete refuses, marks or waits for). Results are typed values
//! ([`rest::Reply`], [`rest::Deleted`], [`rest::DeletedCollection`]), not HTTP codes: the
//! HTTP layer parses requests into these calls and renders their results; it holds no
//! semantics of its own.
//!
//! Start with [`Registry::new`] and [`rest`].

pub mod admission;
pub mod builtin;
pub mod crd;
pub mod list;
pub mod printers;
pub mod resource;
pub mod rest;
pub mod reviews;
pub mod strategy;
pub mod validation;
pub mod watch;

use std::sync::{Arc, RwLock};

use crate::storage::Store;

pub use resource::{Resource, ScalePaths, Subresources};
pub use strategy::Strategy;

/// The served resources at one moment. Replaced whole when it changes (CRDs come and go), so
/// a request works on one consistent view.
#[derive(Debug, Default)]
pub struct Catalog {
    resources: Vec<Arc<Resource>>,
}

impl Catalog {
    /// A catalog of these resources.
    pub fn new(resources: Vec<Resource>) -> Self {
        Catalog {
            resources: resources.into_iter().map(Arc::new).collect(),
        }
    }

    /// Every served resource.
    pub fn resources(&self) -> &[Arc<Resource>] {
        &self.resources
    }

    /// The resource served at `group`/`version`/`plural`.
    pub fn find(&self, group: &str, version: &str, plural: &str) -> Option<Arc<Resource>> {
        self.resources
            .iter()
            .find(|r| r.plural == plural && r.group == group && r.version == version)
            .cloned()
    }

    /// The resource of a kind, for a given group and version.
    pub fn find_kind(&self, group: &str, version: &str, kind: &str) -> Option<Arc<Resource>> {
        self.resources
            .iter()
            .find(|r| r.kind == kind && r.group == group && r.version == version)
            .cloned()
    }

    /// The group versions served, each with its resources, groups in first-seen order (core
    /// first).
    pub fn group_versions(&self) -> Vec<(String, String, Vec<Arc<Resource>>)> {
        let mut out: Vec<(String, String, Vec<Arc<Resource>>)> = Vec::new();
        for r in &self.resources {
            match out
                .iter_mut()
                .find(|(g, v, _)| *g == r.group && *v == r.version)
            {
                Some((_, _, list)) => list.push(r.clone()),
                None => out.push((r.group.clone(), r.version.clone(), vec![r.clone()])),
            }
        }
        out
    }
}

/// The served resources and their storage.
pub struct Registry {
    catalog: RwLock<Arc<Catalog>>,
    store: Arc<Store>,
    /// The built-in resources, which every catalog starts with.
    builtin: Vec<Arc<Resource>>,
    /// The admission stages every write passes.
    admission: RwLock<Arc<admission::Admission>>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry").finish_non_exhaustive()
    }
}

impl Registry {
    /// A registry serving the built-in kinds over `store`.
    pub fn new(store: Arc<Store>) -> Self {
        let catalog = Catalog::new(builtin::resources());
        Registry {
            builtin: catalog.resources.clone(),
            catalog: RwLock::new(Arc::new(catalog)),
            store,
            admission: RwLock::new(Arc::new(admission::Admission::new())),
        }
    }

    /// The admission stages every write passes.
    pub fn admission(&self) -> Arc<admission::Admission> {
        self.admission
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Replaces the admission stages.
    pub fn set_admission(&self, stages: admission::Admission) {
        *self
            .admission
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::new(stages);
    }

    /// The current catalog.
    pub fn catalog(&self) -> Arc<Catalog> {
        self.catalog
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Replaces the catalog (when the set of served resources changes).
    pub fn set_catalog(&self, catalog: Catalog) {
        *self
            .catalog
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::new(catalog);
    }

    /// Serves the built-in resources plus `custom` (the CRD controller's resources), replacing
    /// the custom resources served before.
    pub fn set_custom_resources(&self, custom: Vec<Resource>) {
        let mut resources = self.builtin.clone();
        resources.extend(custom.into_iter().map(Arc::new));
        *self
            .catalog
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::new(Catalog { resources });
    }

    /// The built-in resources.
    pub fn builtin_resources(&self) -> &[Arc<Resource>] {
        &self.builtin
    }

    /// The storage.
    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }
}
