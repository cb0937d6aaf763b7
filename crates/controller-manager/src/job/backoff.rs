//! The delay before a failed Job pod is replaced: `base` after the first failure since the
//! last success, doubling with each further one up to `max` (10 s and 6 min by default),
//! measured from when the last failed pod finished (Kubernetes' `backoff_utils.go`).

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::{SignedDuration, Timestamp};

/// What the backoff remembers of a Job's finished pods.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BackoffRecord {
    /// Failed pods that finished after the last succeeded one.
    pub failures_after_last_success: u32,
    /// When the last of them finished.
    pub last_failure: Option<Timestamp>,
}

impl BackoffRecord {
    /// Accounts for pods that finished since the last update.
    pub fn update(&mut self, succeeded: &[&Pod], failed: &[&Pod]) {
        let mut failed_at: Vec<Timestamp> = failed.iter().map(|p| finished_time(p)).collect();
        failed_at.sort();
        let Some(last_success) = succeeded.iter().map(|p| finished_time(p)).max() else {
            if let Some(last) = failed_at.last() {
                self.failures_after_last_success = self
                    .failures_after_last_success
                    .saturating_add(u32::try_from(failed_at.len()).unwrap_or(u32::MAX));
                self.last_failure = Some(*last);
            }
            return;
        };
        let after: Vec<&Timestamp> = failed_at.iter().filter(|t| **t > last_success).collect();
        self.failures_after_last_success = u32::try_from(after.len()).unwrap_or(u32::MAX);
        self.last_failure = after.last().map(|t| **t);
    }

    /// How long pod creation must still wait at `now`; `None` when it need not.
    pub fn remaining(&self, base: Duration, max: Duration, now: Timestamp) -> Option<Duration> {
        let last = self.last_failure?;
        if self.failures_after_last_success == 0 {
            return None;
        }
        let mut delay = base;
        for _ in 1..self.failures_after_last_success {
            delay = delay.saturating_mul(2);
            if delay >= max {
                delay = max;
                break;
            }
        }
        let elapsed = now.duration_since(last);
        let left = SignedDuration::try_from(delay).ok()?.checked_sub(elapsed)?;
        (left > SignedDuration::ZERO).then(|| left.unsigned_abs())
    }
}

/// When a finished pod finished: its Ready condition's turn to False, else its containers'
/// last termination, else the start of its deletion, else its creation.
pub fn finished_time(pod: &Pod) -> Timestamp {
    let status = pod.status.as_ref();
    let terminal = matches!(
        status.and_then(|s| s.phase.as_deref()),
        Some("Failed" | "Succeeded")
    );
    let ready_false = status
        .filter(|_| terminal)
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready" && c.status == "False"))
        .and_then(|c| c.last_transition_time.as_ref())
        .map(|t| t.0);
    let containers = || {
        status
            .into_iter()
            .flat_map(|s| {
                s.container_statuses
                    .iter()
                    .flatten()
                    .chain(s.init_container_statuses.iter().flatten())
            })
            .filter_map(|c| c.state.as_ref()?.terminated.as_ref()?.finished_at.as_ref())
            .map(|t| t.0)
            .max()
    };
    let deleted = || {
        let at = pod.metadata.deletion_timestamp.as_ref()?.0;
        let grace = pod.metadata.deletion_grace_period_seconds.unwrap_or(0);
        at.checked_sub(SignedDuration::from_secs(grace)).ok()
    };
    ready_false
        .or_else(containers)
        .or_else(deleted)
        .or_else(|| pod.metadata.creation_timestamp.as_ref().map(|t| t.0))
        .unwrap_or(Timestamp::UNIX_EPOCH)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn failed_at(t: &str) -> Pod {
        serde_json::from_value(json!({"status": {"phase": "Failed", "containerStatuses": [{
            "name": "c", "image": "i", "imageID": "", "ready": false, "restartCount": 0,
            "state": {"terminated": {"exitCode": 1, "finishedAt": t}},
        }]}}))
        .expect("a valid pod")
    }

    fn at(t: &str) -> Timestamp {
        t.parse().expect("a valid time")
    }

    #[test]
    fn the_delay_doubles_per_failure_from_the_last_finish_and_is_capped() {
        let base = Duration::from_secs(10);
        let max = Duration::from_secs(360);
        let mut r = BackoffRecord::default();
        let (a, b) = (
            failed_at("2026-01-01T00:00:00Z"),
            failed_at("2026-01-01T00:00:05Z"),
        );
        r.update(&[], &[&a, &b]);
        assert_eq!(r.failures_after_last_success, 2);
        assert_eq!(
            r.remaining(base, max, at("2026-01-01T00:00:10Z")),
            Some(Duration::from_secs(15))
        );
        assert_eq!(r.remaining(base, max, at("2026-01-01T00:00:25Z")), None);
        r.failures_after_last_success = 20;
        assert_eq!(
            r.remaining(base, max, at("2026-01-01T00:00:05Z")),
            Some(max)
        );
    }

    #[test]
    fn a_later_success_resets_the_count() {
        let ok: Pod = serde_json::from_value(json!({"status": {"phase": "Succeeded",
            "conditions": [{"type": "Ready", "status": "False",
                "lastTransitionTime": "2026-01-01T00:00:03Z"}]}}))
        .expect("a valid pod");
        let mut r = BackoffRecord::default();
        let (a, b) = (
            failed_at("2026-01-01T00:00:00Z"),
            failed_at("2026-01-01T00:00:05Z"),
        );
        r.update(&[&ok], &[&a, &b]);
        assert_eq!(r.failures_after_last_success, 1);
        assert_eq!(r.last_failure, Some(at("2026-01-01T00:00:05Z")));
        r.update(&[&ok], &[]);
        assert_eq!(r, BackoffRecord::default());
    }
}
