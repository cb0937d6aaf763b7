//! Leader election with a `coordination.k8s.io/v1` Lease.
//!
//! One [`LeaderElector`] per process competes for one Lease. The holder writes its identity
//! and a fresh `renewTime` every retry period; the others read the Lease every retry period
//! and take it over once it has not changed for a whole lease duration, or at once when its
//! holder released it (empty `holderIdentity`). The design, and why expiry is judged by the
//! reader's own clock, is in `docs/design/leader-election.md`.
//!
//! # Guarantees
//! - Leadership is published on a [`watch`] channel as a [`Leadership`]; `Leading` is sent only
//!   after a write naming this process succeeded, and `Lost` as soon as the process can no
//!   longer prove it holds the Lease (a failed renewal for the whole renew deadline, or a
//!   Lease naming someone else).
//! - A released Lease names no holder and a one-second duration, so a standby takes over on
//!   its next retry instead of waiting out the lease duration.
//! - One elector can campaign again after losing ([`LeaderElector::campaign`] runs one term);
//!   it then starts over as a standby, publishing `Standby` and, once it wins, `Leading`.
//!
//! # Assumptions
//! - Clocks only need to tick at the same rate: expiry is measured from when *this* process
//!   last saw the Lease change, never by comparing `renewTime` with the local wall clock.
//! - `renew_deadline` is shorter than `lease_duration`, so a leader that cannot renew steps
//!   down before a standby may take over.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use rand::Rng;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Errors of leader election.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// This process held the Lease and lost it. Stop all leader-only work at once; then either
    /// exit (a restart competes again) or [campaign](LeaderElector::campaign) again.
    #[error("lost the lease {namespace}/{name}")]
    Lost {
        /// The Lease's namespace.
        namespace: String,
        /// The Lease's name.
        name: String,
    },
    /// The durations break `lease_duration > renew_deadline > retry_period`. Fix the config.
    #[error("invalid leader election config: {0}")]
    InvalidConfig(String),
}

/// What this process knows about the Lease.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Leadership {
    /// Not the leader (yet); `holder` is who the Lease names, if anyone.
    Standby {
        /// The current holder's identity.
        holder: Option<String>,
    },
    /// This process holds the Lease.
    Leading,
    /// This process held the Lease and lost it. Final for [`LeaderElector::run`]; after
    /// [`LeaderElector::campaign`] the caller may campaign again, which publishes `Standby`
    /// and later `Leading`.
    Lost,
    /// This process held the Lease and gave it up on shutdown. Final.
    Released,
}

/// Which Lease to compete for, as whom, and how fast. Defaults follow client-go: 15 s lease,
/// 10 s renew deadline, 2 s retry period.
#[derive(Debug, Clone)]
#[must_use]
pub struct LeaseConfig {
    namespace: String,
    name: String,
    identity: String,
    lease_duration: Duration,
    renew_deadline: Duration,
    retry_period: Duration,
}

impl LeaseConfig {
    /// Competes for the Lease `namespace/name`, as `$POD_NAME` or `$HOSTNAME` (or `kore`)
    /// plus a random suffix, so that two processes never share an identity.
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        let host = std::env::var("POD_NAME")
            .or_else(|_| std::env::var("HOSTNAME"))
            .unwrap_or_else(|_| "kore".into());
        let suffix: u64 = rand::rng().random();
        LeaseConfig {
            namespace: namespace.into(),
            name: name.into(),
            identity: format!("{host}_{suffix:016x}"),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }

    /// Sets this process's identity (it must be unique among the candidates).
    pub fn identity(mut self, identity: impl Into<String>) -> Self {
        self.identity = identity.into();
        self
    }

    /// How long a standby waits after the Lease last changed before taking it over.
    pub fn lease_duration(mut self, d: Duration) -> Self {
        self.lease_duration = d;
        self
    }

    /// How long the leader keeps trying to renew before it gives up leadership.
    pub fn renew_deadline(mut self, d: Duration) -> Self {
        self.renew_deadline = d;
        self
    }

    /// How often candidates try to acquire, and the leader to renew.
    pub fn retry_period(mut self, d: Duration) -> Self {
        self.retry_period = d;
        self
    }

    /// The identity written into the Lease.
    pub fn identity_str(&self) -> &str {
        &self.identity
    }

    /// The Lease's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Checks `lease_duration > renew_deadline > retry_period`.
    pub fn validate(&self) -> Result<(), Error> {
        if self.lease_duration <= self.renew_deadline {
            return Err(Error::InvalidConfig(
                "the lease duration must be longer than the renew deadline".into(),
            ));
        }
        if self.renew_deadline <= self.retry_period.mul_f64(1.2) {
            return Err(Error::InvalidConfig(
                "the renew deadline must be longer than 1.2 retry periods".into(),
            ));
        }
        if self.retry_period.is_zero() || self.lease_duration < Duration::from_secs(1) {
            return Err(Error::InvalidConfig(
                "the retry period must be positive and the lease at least a second long".into(),
            ));
        }
        if self.identity.is_empty() {
            return Err(Error::InvalidConfig(
                "the identity must not be empty".into(),
            ));
        }
        Ok(())
    }
}

/// Labels of `leader_election_master_status`.
type NameLabel = Vec<(String, String)>;

/// The outcome of one attempt to acquire or renew.
enum Attempt {
    /// The Lease now names this process.
    Held,
    /// Someone else holds an unexpired Lease.
    HeldByOther(Option<String>),
    /// The attempt failed (conflict, server error); try again.
    Failed(String),
}

/// Competes for a Lease; see the [module docs](self).
pub struct LeaderElector {
    api: Api<Lease>,
    config: LeaseConfig,
    tx: watch::Sender<Leadership>,
    status: Family<NameLabel, Gauge>,
    lost: Family<NameLabel, Counter>,
    /// The resourceVersion last seen, and when it was first seen.
    observed: Option<(String, Instant)>,
}

impl std::fmt::Debug for LeaderElector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaderElector")
            .field("config", &self.config)
            .field("leadership", &*self.tx.borrow())
            .finish_non_exhaustive()
    }
}

impl LeaderElector {
    /// An elector for `config`'s Lease; nothing happens until [`LeaderElector::run`].
    pub fn new(client: kube::Client, config: LeaseConfig) -> Self {
        let api = Api::namespaced(client, &config.namespace);
        let (tx, _) = watch::channel(Leadership::Standby { holder: None });
        LeaderElector {
            api,
            config,
            tx,
            status: Family::default(),
            lost: Family::default(),
            observed: None,
        }
    }

    /// Registers `leader_election_master_status{name}` (1 while leading, else 0) and
    /// `kore_leader_election_lost_total{name}` (how often this process lost the Lease; a
    /// scrape can miss a short dip of the gauge, never a step of the counter).
    pub fn register_metrics(&self, registry: &mut Registry) {
        registry.register(
            "leader_election_master_status",
            "Whether this process holds the named leader election lease (1) or stands by (0)",
            self.status.clone(),
        );
        registry.register(
            "kore_leader_election_lost",
            "How many times this process lost the named leader election lease while leading",
            self.lost.clone(),
        );
        self.gauge().set(0);
        let _ = self.lost_counter();
    }

    /// The Lease this elector competes for.
    pub fn config(&self) -> &LeaseConfig {
        &self.config
    }

    /// Follows leadership changes.
    pub fn subscribe(&self) -> watch::Receiver<Leadership> {
        self.tx.subscribe()
    }

    fn gauge(&self) -> Gauge {
        self.status
            .get_or_create(&vec![("name".to_string(), self.config.name.clone())])
            .clone()
    }

    fn lost_counter(&self) -> Counter {
        self.lost
            .get_or_create(&vec![("name".to_string(), self.config.name.clone())])
            .clone()
    }

    fn publish(&self, state: Leadership) {
        self.gauge()
            .set(i64::from(matches!(state, Leadership::Leading)));
        self.tx.send_if_modified(|cur| {
            if *cur == state {
                false
            } else {
                *cur = state;
                true
            }
        });
    }

    /// Acquires the Lease, keeps renewing it, and releases it when `shutdown` is cancelled.
    ///
    /// Returns `Ok(())` after a shutdown (released, or never acquired) and [`Error::Lost`]
    /// when the Lease was lost; the caller must stop leader-only work at once. For one elector
    /// that campaigns again after a loss, call [`LeaderElector::campaign`] in a loop instead.
    pub async fn run(mut self, shutdown: CancellationToken) -> Result<(), Error> {
        self.campaign(&shutdown).await
    }

    /// One term: acquires the Lease (as a standby until it can), renews it, and releases it
    /// when `shutdown` is cancelled.
    ///
    /// Returns `Ok(())` after a shutdown and [`Error::Lost`] when the Lease was lost, with
    /// `Lost` published. The elector may then campaign again: it keeps what it observed of the
    /// Lease, so it waits out the new holder's lease like any standby, and when the Lease still
    /// names it (nobody took over) it renews at once.
    pub async fn campaign(&mut self, shutdown: &CancellationToken) -> Result<(), Error> {
        self.config.validate()?;
        // Acquire: try at once, then every retry period with up to 20% jitter.
        loop {
            match self.try_acquire_or_renew().await {
                Attempt::Held => break,
                Attempt::HeldByOther(holder) => self.publish(Leadership::Standby { holder }),
                Attempt::Failed(reason) => {
                    tracing::debug!(lease = %self.config.name, %reason, "could not acquire the lease");
                }
            }
            let jitter = rand::rng().random_range(0.0..0.2);
            let wait = self.config.retry_period.mul_f64(1.0 + jitter);
            tokio::select! {
                () = shutdown.cancelled() => return Ok(()),
                () = tokio::time::sleep(wait) => {}
            }
        }
        tracing::info!(lease = %self.config.name, identity = %self.config.identity, "acquired the lease");
        self.publish(Leadership::Leading);

        // Renew every retry period; give up once no renewal succeeded for the renew deadline.
        let mut last_renew = Instant::now();
        loop {
            tokio::select! {
                () = shutdown.cancelled() => {
                    self.release().await;
                    self.publish(Leadership::Released);
                    return Ok(());
                }
                () = tokio::time::sleep(self.config.retry_period) => {}
            }
            let deadline = last_renew + self.config.renew_deadline;
            if Instant::now() >= deadline {
                // The process did not run (stopped, suspended, starved) for the whole renew
                // deadline: whatever a renewal says now, leader-only work ran unchecked past
                // it, so the term ends here, as client-go's does.
                tracing::warn!(lease = %self.config.name, "the renew deadline passed before the next renewal");
                break;
            }
            let attempt = tokio::select! {
                () = shutdown.cancelled() => {
                    self.release().await;
                    self.publish(Leadership::Released);
                    return Ok(());
                }
                a = tokio::time::timeout_at(deadline, self.try_acquire_or_renew()) => a,
            };
            match attempt {
                Ok(Attempt::Held) => {
                    last_renew = Instant::now();
                    continue;
                }
                Ok(Attempt::HeldByOther(holder)) => {
                    tracing::warn!(lease = %self.config.name, ?holder, "the lease names another holder");
                    break;
                }
                Ok(Attempt::Failed(reason)) => {
                    tracing::warn!(lease = %self.config.name, %reason, "could not renew the lease");
                }
                Err(_) => {
                    tracing::warn!(lease = %self.config.name, "renewing the lease timed out");
                }
            }
            if Instant::now() >= deadline {
                break;
            }
        }
        tracing::error!(lease = %self.config.name, "lost the lease");
        self.lost_counter().inc();
        self.publish(Leadership::Lost);
        Err(Error::Lost {
            namespace: self.config.namespace.clone(),
            name: self.config.name.clone(),
        })
    }

    /// Notes when the Lease last changed, by its resourceVersion, on the local clock.
    fn observe(&mut self, lease: &Lease) {
        let rv = lease.metadata.resource_version.clone().unwrap_or_default();
        match &self.observed {
            Some((seen, _)) if *seen == rv => {}
            _ => self.observed = Some((rv, Instant::now())),
        }
    }

    fn lease_seconds(&self) -> i32 {
        i32::try_from(self.config.lease_duration.as_secs()).unwrap_or(i32::MAX)
    }

    async fn try_acquire_or_renew(&mut self) -> Attempt {
        let now = MicroTime(Timestamp::now());
        let current = match self.api.get_opt(&self.config.name).await {
            Ok(c) => c,
            Err(e) => return Attempt::Failed(format!("reading the lease: {e}")),
        };
        let Some(mut lease) = current else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.config.name.clone()),
                    namespace: Some(self.config.namespace.clone()),
                    ..ObjectMeta::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some(self.config.identity.clone()),
                    lease_duration_seconds: Some(self.lease_seconds()),
                    acquire_time: Some(now.clone()),
                    renew_time: Some(now),
                    lease_transitions: Some(0),
                    ..LeaseSpec::default()
                }),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(created) => {
                    self.observe(&created);
                    Attempt::Held
                }
                Err(e) => Attempt::Failed(format!("creating the lease: {e}")),
            };
        };
        self.observe(&lease);
        let spec = lease.spec.clone().unwrap_or_default();
        let holder = spec.holder_identity.clone().filter(|h| !h.is_empty());
        let mine = holder.as_deref() == Some(self.config.identity.as_str());
        if let Some(other) = holder.as_ref().filter(|_| !mine) {
            let duration = spec
                .lease_duration_seconds
                .and_then(|s| u64::try_from(s).ok())
                .map_or(self.config.lease_duration, Duration::from_secs);
            let seen_at = self
                .observed
                .as_ref()
                .map_or_else(Instant::now, |(_, at)| *at);
            if seen_at + duration > Instant::now() {
                return Attempt::HeldByOther(Some(other.clone()));
            }
            tracing::info!(lease = %self.config.name, previous = %other, "the lease expired; taking it over");
        }
        let mut next = spec;
        if !mine {
            next.acquire_time = Some(now.clone());
            next.lease_transitions = Some(next.lease_transitions.unwrap_or(0) + 1);
        }
        next.holder_identity = Some(self.config.identity.clone());
        next.lease_duration_seconds = Some(self.lease_seconds());
        next.renew_time = Some(now);
        lease.spec = Some(next);
        match self
            .api
            .replace(&self.config.name, &PostParams::default(), &lease)
            .await
        {
            Ok(written) => {
                self.observe(&written);
                Attempt::Held
            }
            Err(e) => Attempt::Failed(format!("updating the lease: {e}")),
        }
    }

    /// Clears the holder if the Lease still names this process; errors are logged only (the
    /// Lease then simply expires). A conflict is retried on a fresh read: a renewal cut short
    /// by the shutdown may still land between this read and this write.
    async fn release(&mut self) {
        const ATTEMPTS: usize = 3;
        for attempt in 1..=ATTEMPTS {
            let mut lease = match self.api.get_opt(&self.config.name).await {
                Ok(Some(l)) => l,
                Ok(None) => return,
                Err(e) => {
                    tracing::warn!(lease = %self.config.name, error = %e, "could not read the lease to release it");
                    return;
                }
            };
            let mut spec = lease.spec.clone().unwrap_or_default();
            if spec.holder_identity.as_deref() != Some(self.config.identity.as_str()) {
                return;
            }
            let now = MicroTime(Timestamp::now());
            spec.holder_identity = None;
            spec.lease_duration_seconds = Some(1);
            spec.acquire_time = Some(now.clone());
            spec.renew_time = Some(now);
            lease.spec = Some(spec);
            match self
                .api
                .replace(&self.config.name, &PostParams::default(), &lease)
                .await
            {
                Ok(_) => {
                    tracing::info!(lease = %self.config.name, "released the lease");
                    return;
                }
                Err(kube::Error::Api(e)) if e.code == 409 && attempt < ATTEMPTS => {
                    tracing::debug!(lease = %self.config.name, "the lease changed while releasing it; reading it again");
                }
                Err(e) => {
                    tracing::warn!(lease = %self.config.name, error = %e, "could not release the lease");
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_durations_are_valid_and_follow_client_go() {
        let c = LeaseConfig::new("ns", "lease");
        assert_eq!(c.lease_duration, Duration::from_secs(15));
        assert_eq!(c.renew_deadline, Duration::from_secs(10));
        assert_eq!(c.retry_period, Duration::from_secs(2));
        c.validate().expect("defaults are valid");
    }

    #[test]
    fn a_renew_deadline_as_long_as_the_lease_is_rejected() {
        let c = LeaseConfig::new("ns", "lease")
            .lease_duration(Duration::from_secs(10))
            .renew_deadline(Duration::from_secs(10));
        assert!(matches!(c.validate(), Err(Error::InvalidConfig(_))));
    }

    #[test]
    fn two_configs_get_different_identities() {
        let a = LeaseConfig::new("ns", "lease");
        let b = LeaseConfig::new("ns", "lease");
        assert_ne!(a.identity_str(), b.identity_str());
    }
}
