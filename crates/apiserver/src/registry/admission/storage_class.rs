//! DefaultStorageClass admission: a PersistentVolumeClaim created without
//! `spec.storageClassName` gets the default StorageClass, the one annotated
//! `storageclass.kubernetes.io/is-default-class: "true"` (the newest if several are, as
//! Kubernetes picks since 1.28). An explicit `""` means "no class" and is kept, as is a claim
//! that names its class through the old `volume.beta.kubernetes.io/storage-class` annotation.
//! Without a default class the claim is left as it is.

use std::sync::Arc;

use serde_json::{Value, json};

use super::{Attributes, Mutating, Operation};
use crate::api::error::ApiError;
use crate::storage::{ListOptions, Storage as _, Store};

/// The annotation that marks the default StorageClass.
pub const IS_DEFAULT: &str = "storageclass.kubernetes.io/is-default-class";
/// The annotation older clients name a claim's class with.
const BETA_CLASS: &str = "volume.beta.kubernetes.io/storage-class";

/// The mutating stage: see the [module docs](self).
#[derive(Debug)]
pub struct DefaultStorageClass {
    store: Arc<Store>,
    classes: String,
}

impl DefaultStorageClass {
    /// Reads StorageClasses from `store` under the collection prefix `classes`.
    pub fn new(store: Arc<Store>, classes: String) -> Self {
        DefaultStorageClass { store, classes }
    }

    /// The name of the default class, if there is one.
    fn default_class(&self) -> Option<String> {
        let page = self
            .store
            .list(&self.classes, &ListOptions::default(), &|_| true)
            .ok()?;
        page.items
            .iter()
            .filter_map(|s| s.value().ok())
            .filter(|c| c["metadata"]["annotations"][IS_DEFAULT].as_str() == Some("true"))
            .max_by(|a, b| {
                let created = |c: &Value| {
                    c["metadata"]["creationTimestamp"]
                        .as_str()
                        .map(str::to_owned)
                };
                created(a).cmp(&created(b)).then_with(|| {
                    // Same second: the name sorting first wins, as Kubernetes breaks ties.
                    b["metadata"]["name"]
                        .as_str()
                        .cmp(&a["metadata"]["name"].as_str())
                })
            })
            .and_then(|c| c["metadata"]["name"].as_str().map(str::to_owned))
    }
}

impl Mutating for DefaultStorageClass {
    fn name(&self) -> &'static str {
        "DefaultStorageClass"
    }

    fn admit(&self, attrs: &Attributes<'_>, object: &mut Value) -> Result<(), ApiError> {
        if attrs.operation != Operation::Create
            || !attrs.res.group.is_empty()
            || attrs.res.plural != "persistentvolumeclaims"
        {
            return Ok(());
        }
        if !object["spec"]["storageClassName"].is_null()
            || !object["metadata"]["annotations"][BETA_CLASS].is_null()
        {
            return Ok(());
        }
        if let Some(class) = self.default_class()
            && object["spec"].is_object()
        {
            object["spec"]["storageClassName"] = json!(class);
        }
        Ok(())
    }
}
