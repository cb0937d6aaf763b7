//! The Recreate strategy (Kubernetes' `rolloutRecreate`).

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use kore_runtime::controller::Action;

use super::DeploymentReconciler;
use super::util::{is_complete, replicas_of, rs_actual, rs_replicas};
use crate::BY_CONTROLLER;
use crate::error::SyncError;
use crate::pods;

/// One step of a Recreate rollout: scale every old ReplicaSet to zero; once none of their
/// pods is left (running, pending or terminating), create or scale up the new one.
pub(super) async fn rollout(
    r: &DeploymentReconciler,
    d: &mut Deployment,
    rss: Vec<ReplicaSet>,
) -> Result<Action, SyncError> {
    let (new, mut old) = r.new_and_old(d, rss, false).await?;

    let mut scaled_down = false;
    for rs in old.iter_mut().filter(|rs| rs_replicas(rs) > 0) {
        scaled_down |= r.scale_if_needed(rs, 0, d).await?;
    }
    if scaled_down || old_pods_running(r, new.as_ref(), &old) {
        return r.sync_rollout_status(d, new.as_ref(), &old).await;
    }

    let mut new = match new {
        Some(new) => new,
        None => {
            let rss: Vec<ReplicaSet> = old.clone();
            let (created, _) = r.new_and_old(d, rss, true).await?;
            match created {
                Some(rs) => rs,
                None => return r.sync_rollout_status(d, None, &old).await,
            }
        }
    };
    r.scale_if_needed(&mut new, replicas_of(d), d).await?;

    let status = super::calculate_status(d, Some(&new), &old);
    if is_complete(d, &status) {
        r.cleanup(d, &old).await?;
    }
    r.sync_rollout_status(d, Some(&new), &old).await
}

/// Whether an old ReplicaSet still reports pods, or a pod it controls has not finished.
fn old_pods_running(
    r: &DeploymentReconciler,
    new: Option<&ReplicaSet>,
    old: &[ReplicaSet],
) -> bool {
    if old.iter().map(rs_actual).sum::<i32>() > 0 {
        return true;
    }
    let new_uid = new.and_then(|rs| rs.metadata.uid.as_deref());
    old.iter()
        .filter_map(|rs| rs.metadata.uid.as_deref())
        .filter(|uid| Some(*uid) != new_uid)
        .flat_map(|uid| r.pods.by_index(BY_CONTROLLER, uid))
        .any(|p| !matches!(pods::phase(&p), "Succeeded" | "Failed"))
}
