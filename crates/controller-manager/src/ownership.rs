//! Controller references and claiming: a controller adopts the orphans its selector matches
//! and releases the objects it controls that its selector no longer matches (Kubernetes'
//! `ControllerRefManager`).

use std::fmt::Debug;
use std::future::Future;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::Resource;
use kube::api::{Api, Patch, PatchParams};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::json;

use crate::error::{SyncError, status_code};
use crate::pods::controller_ref;

/// The controller reference of an object of kind `K` to `owner`: `controller` and
/// `blockOwnerDeletion` set.
pub fn controller_reference<K: Resource<DynamicType = ()>>(owner: &ObjectMeta) -> OwnerReference {
    OwnerReference {
        api_version: K::api_version(&()).into_owned(),
        kind: K::kind(&()).into_owned(),
        name: owner.name.clone().unwrap_or_default(),
        uid: owner.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// Whether `meta` is controlled by the object with `uid`.
pub fn is_controlled_by(meta: &ObjectMeta, uid: &str) -> bool {
    controller_ref(meta).is_some_and(|r| r.uid == uid)
}

/// The objects among `candidates` that the owner of `reference` controls once claiming is
/// done: the ones it already controls and still selects, and the orphans it selects, which
/// it adopts. Those it controls and no longer selects are released. Objects being deleted
/// are neither adopted nor released.
///
/// `can_adopt` runs once, before the first adoption: it must read the owner from the API
/// server (not the cache) and fail if its UID changed or it is being deleted, so a stale
/// cache never makes a dead owner adopt.
pub async fn claim<C, F, Fut>(
    api: &Api<C>,
    reference: &OwnerReference,
    owner_deleting: bool,
    selects: impl Fn(&C) -> bool,
    candidates: Vec<Arc<C>>,
    can_adopt: F,
) -> Result<Vec<Arc<C>>, SyncError>
where
    C: Resource<DynamicType = ()> + Clone + Serialize + DeserializeOwned + Debug,
    F: FnOnce() -> Fut,
    Fut: Future<Output = Result<(), SyncError>>,
{
    let mut claimed = Vec::with_capacity(candidates.len());
    let mut can_adopt = Some(can_adopt);
    for obj in candidates {
        let meta = obj.meta();
        match controller_ref(meta) {
            Some(r) if r.uid != reference.uid => {}
            Some(_) => {
                if selects(&obj) {
                    claimed.push(obj);
                } else if !owner_deleting && meta.deletion_timestamp.is_none() {
                    release(api, reference, meta).await?;
                }
            }
            None => {
                if owner_deleting || meta.deletion_timestamp.is_some() || !selects(&obj) {
                    continue;
                }
                if let Some(check) = can_adopt.take() {
                    check().await?;
                }
                if let Some(adopted) = adopt(api, reference, meta).await? {
                    claimed.push(Arc::new(adopted));
                }
            }
        }
    }
    Ok(claimed)
}

fn describe<C: Resource<DynamicType = ()>>(meta: &ObjectMeta) -> String {
    format!(
        "{} {}/{}",
        C::kind(&()),
        meta.namespace.as_deref().unwrap_or_default(),
        meta.name.as_deref().unwrap_or_default()
    )
}

/// Adds `reference` to the object's ownerReferences, if the object did not change since it
/// was read; `None` if it is gone.
async fn adopt<C>(
    api: &Api<C>,
    reference: &OwnerReference,
    meta: &ObjectMeta,
) -> Result<Option<C>, SyncError>
where
    C: Resource<DynamicType = ()> + Clone + Serialize + DeserializeOwned + Debug,
{
    let mut refs = meta.owner_references.clone().unwrap_or_default();
    refs.push(reference.clone());
    let patch = json!({"metadata": {
        "ownerReferences": refs,
        "resourceVersion": meta.resource_version,
    }});
    let name = meta.name.as_deref().unwrap_or_default();
    match api
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(obj) => Ok(Some(obj)),
        Err(e) if status_code(&e) == Some(404) => Ok(None),
        Err(e) => Err(SyncError::api("adopt", describe::<C>(meta), e)),
    }
}

/// Removes `reference` from the object's ownerReferences. A gone object, or one that can no
/// longer be changed, needs no release.
async fn release<C>(
    api: &Api<C>,
    reference: &OwnerReference,
    meta: &ObjectMeta,
) -> Result<(), SyncError>
where
    C: Resource<DynamicType = ()> + Clone + Serialize + DeserializeOwned + Debug,
{
    let refs: Vec<&OwnerReference> = meta
        .owner_references
        .iter()
        .flatten()
        .filter(|r| r.uid != reference.uid)
        .collect();
    let patch = json!({"metadata": {
        "ownerReferences": refs,
        "resourceVersion": meta.resource_version,
    }});
    let name = meta.name.as_deref().unwrap_or_default();
    match api
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => Ok(()),
        Err(e) if matches!(status_code(&e), Some(404 | 422)) => Ok(()),
        Err(e) => Err(SyncError::api("release", describe::<C>(meta), e)),
    }
}

/// The check [`claim`] runs before adopting: reads the owner from the API server and fails
/// if its UID is not `uid` or it is being deleted.
pub async fn recheck_owner<O>(api: &Api<O>, name: &str, uid: &str) -> Result<(), SyncError>
where
    O: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug,
{
    let fresh = api
        .get(name)
        .await
        .map_err(|e| SyncError::api("get", format!("{} {name}", O::kind(&())), e))?;
    let meta = fresh.meta();
    if meta.uid.as_deref() != Some(uid) {
        return Err(SyncError::CannotAdopt(format!(
            "{} {name}: the original is gone (uid {}, wanted {uid})",
            O::kind(&()),
            meta.uid.as_deref().unwrap_or_default()
        )));
    }
    if meta.deletion_timestamp.is_some() {
        return Err(SyncError::CannotAdopt(format!(
            "{} {name}: it is being deleted",
            O::kind(&())
        )));
    }
    Ok(())
}
