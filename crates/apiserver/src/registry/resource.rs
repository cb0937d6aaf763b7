//! [`Resource`]: everything the server knows about one served resource (a group, version and
//! plural), from its discovery entry to its storage prefix and its [`Strategy`].

use std::sync::Arc;

use crate::api::error::GroupResource;

use super::printers::TablePrinter;
use super::strategy::Strategy;

/// The `scale` subresource's mapping onto the parent object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScalePaths {
    /// JSON pointer of the desired replicas, e.g. `/spec/replicas`.
    pub spec_replicas: String,
    /// JSON pointer of the observed replicas, e.g. `/status/replicas`.
    pub status_replicas: String,
    /// JSON pointer of the label selector, if any (`/spec/selector`).
    pub label_selector: Option<String>,
}

/// The subresources a resource serves.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Subresources {
    /// `/status`: the main endpoint ignores status, this one changes only status.
    pub status: bool,
    /// `/scale`.
    pub scale: Option<ScalePaths>,
    /// Other subresources listed in discovery (`token`, `finalize`), served by dedicated code.
    pub other: Vec<&'static str>,
}

/// The eight standard verbs, in discovery order.
pub const ALL_VERBS: [&str; 8] = [
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

/// One served resource.
#[derive(Clone)]
pub struct Resource {
    /// API group ("" for core).
    pub group: String,
    /// Version, e.g. `v1`.
    pub version: String,
    /// Kind, e.g. `ConfigMap`.
    pub kind: String,
    /// Kind of its lists, e.g. `ConfigMapList`.
    pub list_kind: String,
    /// Plural resource name, e.g. `configmaps`.
    pub plural: String,
    /// Singular resource name, e.g. `configmap`.
    pub singular: String,
    /// Whether objects live in namespaces.
    pub namespaced: bool,
    /// Short names for kubectl (`cm`).
    pub short_names: Vec<String>,
    /// Categories (`all`).
    pub categories: Vec<String>,
    /// Verbs served on the resource.
    pub verbs: Vec<&'static str>,
    /// Subresources served.
    pub subresources: Subresources,
    /// Where its objects live in storage, e.g. `/core/configmaps`. Two resources may share a
    /// prefix when they are two views of the same objects (core and events.k8s.io Events).
    pub storage_prefix: String,
    /// The kind-specific behaviour.
    pub strategy: Arc<dyn Strategy>,
    /// What prints its objects as Table rows (built-in printers and custom resources'
    /// `additionalPrinterColumns` alike).
    pub printer: Arc<dyn TablePrinter>,
}

impl std::fmt::Debug for Resource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Resource")
            .field("group", &self.group)
            .field("version", &self.version)
            .field("plural", &self.plural)
            .finish_non_exhaustive()
    }
}

impl Resource {
    /// `v1` or `apps/v1`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// The URL prefix of the group version: `/api/v1` or `/apis/apps/v1`.
    pub fn gv_path(&self) -> String {
        if self.group.is_empty() {
            format!("/api/{}", self.version)
        } else {
            format!("/apis/{}/{}", self.group, self.version)
        }
    }

    /// `configmaps` or `deployments.apps`, as error messages name it.
    pub fn group_resource(&self) -> GroupResource {
        GroupResource {
            group: self.group.clone(),
            resource: self.plural.clone(),
        }
    }

    /// `ConfigMap` or `Widget.example.com`, as `Invalid` errors name it.
    pub fn qualified_kind(&self) -> String {
        if self.group.is_empty() {
            self.kind.clone()
        } else {
            format!("{}.{}", self.kind, self.group)
        }
    }

    /// The storage key of one object.
    pub fn key(&self, namespace: Option<&str>, name: &str) -> String {
        match namespace {
            Some(ns) if self.namespaced => format!("{}/{ns}/{name}", self.storage_prefix),
            _ => format!("{}/{name}", self.storage_prefix),
        }
    }

    /// The storage prefix of a collection: one namespace, or all of them.
    pub fn collection_prefix(&self, namespace: Option<&str>) -> String {
        match namespace {
            Some(ns) if self.namespaced => format!("{}/{ns}/", self.storage_prefix),
            _ => format!("{}/", self.storage_prefix),
        }
    }

    /// Whether the resource serves `verb`.
    pub fn allows(&self, verb: &str) -> bool {
        self.verbs.contains(&verb)
    }

    /// The "hash" discovery reports for the storage version.
    pub fn storage_version_hash(&self) -> String {
        use base64::Engine;
        use sha2::Digest;
        let digest = sha2::Sha256::digest(format!("{}/{}/{}", self.group, self.version, self.kind));
        base64::engine::general_purpose::STANDARD.encode(&digest[..8])
    }
}

#[cfg(test)]
mod tests {
    use crate::registry::builtin;

    #[test]
    fn storage_version_hashes_match_kubernetes() {
        let catalog = builtin::resources();
        let hash = |plural: &str| {
            catalog
                .iter()
                .find(|r| r.plural == plural && (r.group.is_empty() || r.group == "apps"))
                .map(|r| r.storage_version_hash())
        };
        assert_eq!(hash("configmaps").as_deref(), Some("qFsyl6wFWjQ="));
        assert_eq!(hash("deployments").as_deref(), Some("8aSe+NMegvE="));
        assert_eq!(hash("namespaces").as_deref(), Some("Q3oi5N2YM8M="));
    }
}
