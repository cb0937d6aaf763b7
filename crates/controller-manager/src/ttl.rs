//! The TTL-after-finished controller: deletes a finished Job `ttlSecondsAfterFinished`
//! seconds after it finished, as kube-controller-manager's `ttl-after-finished-controller`
//! (`pkg/controller/ttlafterfinished`).
//!
//! A Job is its business once it has `ttlSecondsAfterFinished`, is finished (a `Complete` or
//! `Failed` condition that is True, whose `lastTransitionTime` is the finish time) and is
//! not being deleted. Until the TTL has passed, the Job is looked at again when it will have.
//! Once it has, the Job is read again from the server (the cached one may be stale: the TTL
//! may have been raised or removed meanwhile) and, if its TTL has passed there too, deleted
//! with propagation `Foreground` and a precondition on its UID, so a Job recreated under the
//! same name is never deleted by mistake, and the Job goes only after its pods are gone (the
//! server's garbage collector deletes them).
//!
//! The time comes from the [`Clock`] in [`crate::Options`].

use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kore_runtime::controller::predicate::{Event, Predicate};
use kore_runtime::controller::{Action, ReconcileError, Reconciler, Request};
use kore_runtime::metrics::Metrics;
use kore_runtime::{Controller, Manager, ObjectKey};
use kube::api::{Api, DeleteParams, Preconditions, PropagationPolicy};

use crate::clock::Clock;
use crate::error::status_code;
use crate::{Caches, Options};

/// The controller's name (`--controllers`), as kube-controller-manager names it.
pub const NAME: &str = "ttl-after-finished-controller";

/// Why cleaning up a Job failed; every variant is retried with the key's backoff.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Reading the Job from the server failed.
    #[error("reading Job {0} failed")]
    Get(String, #[source] kube::Error),
    /// Deleting the Job failed (a conflict means it was replaced by a Job of another UID).
    #[error("deleting Job {0} failed")]
    Delete(String, #[source] kube::Error),
    /// The Job is finished but its finished condition has no transition time.
    #[error("cannot tell when Job {0} finished")]
    NoFinishTime(String),
}

/// Registers the controller on the Jobs informer the Job controller shares.
pub(crate) fn register(
    manager: &mut Manager,
    _caches: &Caches,
    options: &Options,
    metrics: &Metrics,
) -> &'static str {
    let client = manager.client();
    // Only Jobs that may need cleaning up are queued, as Kubernetes' event handlers decide.
    let wanted = Predicate::new(|e: &Event<'_, Job>| match e {
        Event::Delete(_) => false,
        _ => needs_cleanup(e.object()),
    });
    let builder = Controller::for_::<Job>(manager.informers())
        .named(NAME)
        .with_predicate(wanted)
        .max_concurrent_reconciles(options.concurrent_ttl_after_finished_syncs)
        .metrics(metrics.clone());
    let reconciler = TtlReconciler::new(client, options.clock);
    manager.add(Box::new(builder.build(reconciler)));
    NAME
}

/// Whether `job` is finished, has a TTL and is not being deleted.
pub fn needs_cleanup(job: &Job) -> bool {
    job.metadata.deletion_timestamp.is_none()
        && job
            .spec
            .as_ref()
            .is_some_and(|s| s.ttl_seconds_after_finished.is_some())
        && finish_condition(job).is_some()
}

fn finish_condition(job: &Job) -> Option<&k8s_openapi::api::batch::v1::JobCondition> {
    job.status
        .as_ref()?
        .conditions
        .iter()
        .flatten()
        .find(|c| (c.type_ == "Complete" || c.type_ == "Failed") && c.status == "True")
}

/// When `job`'s TTL expires: its finish time plus `ttlSecondsAfterFinished`; `None` if the
/// Job does not need cleaning up.
pub fn expires_at(job: &Job) -> Result<Option<Timestamp>, Error> {
    if !needs_cleanup(job) {
        return Ok(None);
    }
    let finished = finish_condition(job)
        .and_then(|c| c.last_transition_time.as_ref())
        .ok_or_else(|| Error::NoFinishTime(ObjectKey::of(job).to_string()))?;
    let ttl = job
        .spec
        .as_ref()
        .and_then(|s| s.ttl_seconds_after_finished)
        .unwrap_or(0);
    Ok(Some(
        finished
            .0
            .checked_add(SignedDuration::from_secs(i64::from(ttl)))
            .unwrap_or(Timestamp::MAX),
    ))
}

/// Deletes finished Jobs whose TTL passed; see the [module docs](self).
pub struct TtlReconciler {
    client: kube::Client,
    clock: Clock,
}

impl std::fmt::Debug for TtlReconciler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TtlReconciler").finish_non_exhaustive()
    }
}

/// What to do with a Job now.
enum Verdict {
    /// Nothing: it needs no cleaning up.
    Keep,
    /// Look again after this much clock time.
    Wait(Duration),
    /// Its TTL has passed.
    Expired,
}

impl TtlReconciler {
    /// A reconciler deleting Jobs through `client`, reading the time from `clock`.
    pub fn new(client: kube::Client, clock: Clock) -> Self {
        TtlReconciler { client, clock }
    }

    fn verdict(&self, job: &Job) -> Result<Verdict, Error> {
        let Some(at) = expires_at(job)? else {
            return Ok(Verdict::Keep);
        };
        let now = self.clock.now();
        if at <= now {
            return Ok(Verdict::Expired);
        }
        Ok(Verdict::Wait(
            Duration::try_from(now.duration_until(at)).unwrap_or(Duration::ZERO),
        ))
    }

    fn wait(&self, span: Duration) -> Action {
        Action::requeue_after(self.clock.real(span))
    }

    async fn process(&self, key: &ObjectKey, cached: &Job) -> Result<Action, Error> {
        match self.verdict(cached)? {
            Verdict::Keep => return Ok(Action::done()),
            Verdict::Wait(span) => return Ok(self.wait(span)),
            Verdict::Expired => {}
        }
        // The cached Job may be stale: decide again on the server's.
        let api: Api<Job> =
            Api::namespaced(self.client.clone(), key.namespace().unwrap_or_default());
        let fresh = match api.get_opt(key.name()).await {
            Ok(Some(job)) => job,
            Ok(None) => return Ok(Action::done()),
            Err(e) => return Err(Error::Get(key.to_string(), e)),
        };
        match self.verdict(&fresh)? {
            Verdict::Keep => return Ok(Action::done()),
            Verdict::Wait(span) => return Ok(self.wait(span)),
            Verdict::Expired => {}
        }
        let params = DeleteParams {
            propagation_policy: Some(PropagationPolicy::Foreground),
            preconditions: Some(Preconditions {
                uid: fresh.metadata.uid.clone(),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        tracing::debug!(job = %key, "deleting a finished Job whose TTL passed");
        match api.delete(key.name(), &params).await {
            Ok(_) => Ok(Action::done()),
            Err(e) if status_code(&e) == Some(404) => Ok(Action::done()),
            Err(e) => Err(Error::Delete(key.to_string(), e)),
        }
    }
}

impl Reconciler<Job> for TtlReconciler {
    type Error = Error;

    async fn reconcile(&self, request: Request<Job>) -> Result<Action, ReconcileError<Error>> {
        let Some(job) = request.object() else {
            return Ok(Action::done());
        };
        Ok(self.process(request.key(), &job).await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn job(ttl: Option<i32>, condition: Option<(&str, &str)>) -> Job {
        let mut j: Job = serde_json::from_value(json!({
            "metadata": {"name": "j", "namespace": "default"},
            "spec": {"template": {}},
        }))
        .expect("a Job");
        if let Some(spec) = j.spec.as_mut() {
            spec.ttl_seconds_after_finished = ttl;
        }
        if let Some((type_, at)) = condition {
            j.status = Some(
                serde_json::from_value(json!({"conditions": [
                    {"type": type_, "status": "True", "lastTransitionTime": at},
                ]}))
                .expect("a status"),
            );
        }
        j
    }

    #[test]
    fn a_job_expires_its_ttl_after_its_finish_time() {
        let done = Some(("Complete", "2030-01-01T12:00:00Z"));
        assert_eq!(
            expires_at(&job(Some(30), done)).expect("a finish time"),
            Some("2030-01-01T12:00:30Z".parse().expect("a timestamp"))
        );
        let failed = Some(("Failed", "2030-01-01T12:00:00Z"));
        assert!(expires_at(&job(Some(0), failed)).expect("ok").is_some());
        assert_eq!(expires_at(&job(None, done)).expect("ok"), None);
        assert_eq!(expires_at(&job(Some(30), None)).expect("ok"), None);
        let suspended = Some(("Suspended", "2030-01-01T12:00:00Z"));
        assert_eq!(expires_at(&job(Some(30), suspended)).expect("ok"), None);
    }
}
