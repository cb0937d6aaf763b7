//! The RollingUpdate strategy (Kubernetes' `rolloutRolling`).

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use kore_runtime::controller::Action;

use super::DeploymentReconciler;
use super::util::{
    by_creation, is_complete, max_unavailable, new_rs_new_replicas, replicas_of, rs_available,
    rs_replicas,
};
use crate::error::SyncError;

/// One step of a rolling update: scale the new ReplicaSet up if maxSurge allows; otherwise
/// scale old ones down if maxUnavailable allows; once complete, clean up old revisions.
pub(super) async fn rollout(
    r: &DeploymentReconciler,
    d: &mut Deployment,
    rss: Vec<ReplicaSet>,
) -> Result<Action, SyncError> {
    let (new, mut old) = r.new_and_old(d, rss, true).await?;
    let Some(mut new) = new else {
        return r.sync_rollout_status(d, None, &old).await;
    };

    // Scale up, if we can.
    let replicas = replicas_of(d);
    let current = rs_replicas(&new);
    if current != replicas {
        let target = if current > replicas {
            replicas
        } else {
            let all: Vec<&ReplicaSet> = old.iter().chain(std::iter::once(&new)).collect();
            new_rs_new_replicas(d, &all, &new)
        };
        if r.scale_if_needed(&mut new, target, d).await? {
            return r.sync_rollout_status(d, Some(&new), &old).await;
        }
    }

    // Scale down, if we can.
    if reconcile_old(r, d, &new, &mut old).await? {
        return r.sync_rollout_status(d, Some(&new), &old).await;
    }

    let status = super::calculate_status(d, Some(&new), &old);
    if is_complete(d, &status) {
        r.cleanup(d, &old).await?;
    }
    r.sync_rollout_status(d, Some(&new), &old).await
}

/// Scales old ReplicaSets down as far as availability allows: first the replicas that are not
/// available anyway, then available ones down to replicas - maxUnavailable available in all.
/// Whether anything was scaled.
async fn reconcile_old(
    r: &DeploymentReconciler,
    d: &Deployment,
    new: &ReplicaSet,
    old: &mut [ReplicaSet],
) -> Result<bool, SyncError> {
    let old_count: i32 = old.iter().map(rs_replicas).sum();
    if old_count == 0 {
        return Ok(false);
    }
    let all_count = old_count + rs_replicas(new);
    let min_available = replicas_of(d) - max_unavailable(d);
    let new_unavailable = rs_replicas(new) - rs_available(new);
    let max_scaled_down = all_count - min_available - new_unavailable;
    if max_scaled_down <= 0 {
        return Ok(false);
    }

    // Unhealthy replicas first: removing them costs no availability.
    old.sort_by(by_creation);
    let mut cleaned = 0;
    for rs in old.iter_mut() {
        if cleaned >= max_scaled_down {
            break;
        }
        let size = rs_replicas(rs);
        if size == 0 || size == rs_available(rs) {
            continue;
        }
        let down = (max_scaled_down - cleaned).min(size - rs_available(rs));
        r.scale_if_needed(rs, size - down, d).await?;
        cleaned += down;
    }

    // Then available ones, keeping replicas - maxUnavailable available.
    let available: i32 = old.iter().map(rs_available).sum::<i32>() + rs_available(new);
    let mut scaled = 0;
    if available > min_available {
        let total = available - min_available;
        for rs in old.iter_mut() {
            if scaled >= total {
                break;
            }
            let size = rs_replicas(rs);
            if size == 0 {
                continue;
            }
            let down = size.min(total - scaled);
            r.scale_if_needed(rs, size - down, d).await?;
            scaled += down;
        }
    }
    Ok(cleaned + scaled > 0)
}
