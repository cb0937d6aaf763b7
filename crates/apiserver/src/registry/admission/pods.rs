//! What the admission stages of pods share: which writes they look at, how they read other
//! objects, and how they refuse.

use std::sync::Arc;

use serde_json::Value;

use super::{Attributes, Operation};
use crate::api::error::ApiError;
use crate::storage::{Storage as _, Store};

/// Whether the write is of a pod itself (not a subresource's body or another kind).
pub(super) fn is_pod(attrs: &Attributes<'_>) -> bool {
    attrs.res.group.is_empty() && attrs.res.plural == "pods"
}

/// Whether the write creates a pod.
pub(super) fn is_pod_create(attrs: &Attributes<'_>) -> bool {
    is_pod(attrs) && attrs.operation == Operation::Create
}

/// A 403 as Kubernetes' admission plugins answer it: `pods "name" is forbidden: why` (or
/// `pods is forbidden: why` for a name not generated yet).
pub(super) fn forbidden(attrs: &Attributes<'_>, object: &Value, why: String) -> ApiError {
    let resource = attrs.res.group_resource();
    let name = object["metadata"]["name"]
        .as_str()
        .filter(|n| !n.is_empty())
        .map(str::to_owned);
    let message = match &name {
        Some(n) => format!("{resource} {n:?} is forbidden: {why}"),
        None => format!("{resource} is forbidden: {why}"),
    };
    ApiError::Forbidden {
        resource,
        name,
        message,
        causes: Vec::new(),
    }
}

/// Reads objects of one kind straight from storage (admission runs inside a write and must
/// not go through the registry's verbs).
#[derive(Debug, Clone)]
pub(super) struct Reader {
    store: Arc<Store>,
    /// The kind's collection prefix, ending in `/`.
    prefix: String,
}

impl Reader {
    pub(super) fn new(store: Arc<Store>, prefix: String) -> Self {
        Reader { store, prefix }
    }

    /// The object `name` (in `namespace` for a namespaced kind), if it exists and reads.
    pub(super) fn get(&self, namespace: Option<&str>, name: &str) -> Option<Value> {
        let key = match namespace {
            Some(ns) => format!("{}{ns}/{name}", self.prefix),
            None => format!("{}{name}", self.prefix),
        };
        self.store.get(&key).ok()?.value().ok()
    }

    /// Every object (of `namespace`, for a namespaced kind).
    pub(super) fn list(&self, namespace: Option<&str>) -> Vec<Value> {
        let prefix = match namespace {
            Some(ns) => format!("{}{ns}/", self.prefix),
            None => self.prefix.clone(),
        };
        self.store
            .list(&prefix, &crate::storage::ListOptions::default(), &|_| true)
            .map(|page| page.items.iter().filter_map(|s| s.value().ok()).collect())
            .unwrap_or_default()
    }
}
