//! The manager: runs informers, controllers and other [`Runnable`]s in one process, with
//! leader election, a metrics and health server, and graceful shutdown.
//!
//! Start with [`Manager::builder`]; add components with [`Manager::add`]; call
//! [`Manager::run`]. The design is in `docs/design/manager.md`.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use kore_runtime::manager::{LeaseConfig, Manager, runnable_fn};
//!
//! let client = kube::Client::try_default().await?;
//! let mut manager = Manager::builder(client)
//!     .leader_election(LeaseConfig::new("kore-system", "my-operator"))
//!     .metrics_bind_address(([0, 0, 0, 0], 8080).into())
//!     .health_probe_bind_address(([0, 0, 0, 0], 8081).into())
//!     .build();
//! // Controllers take their caches from `manager.informers()` and register their metrics
//! // in `manager.registry_mut()` before being added.
//! manager.add(Box::new(runnable_fn("janitor", |shutdown| async move {
//!     shutdown.cancelled().await;
//!     Ok(())
//! })));
//! manager.run().await?; // until SIGTERM
//! # Ok(()) }
//! ```
//!
//! # Startup order
//! 1. the HTTP server(s) for `/metrics`, `/healthz` and `/readyz`;
//! 2. the shared informers, waiting until every cache has synced (then the built-in
//!    `initialized` readiness handle is dropped);
//! 3. runnables that need no leadership;
//! 4. leader election (when configured);
//! 5. leader-only runnables, once this process leads.
//!
//! # Shutdown
//! The first SIGINT or SIGTERM (or [`ShutdownHandle::shutdown`]) stops the phases in reverse
//! order: each phase's token is cancelled and the manager waits for its tasks before moving
//! on, so in-flight reconciles finish while nothing new starts, and the Lease is released
//! only after leader-only work ended. All of it must end within the grace period
//! ([`Builder::graceful_shutdown_timeout`], 30 s by default). A second signal aborts at once.
//!
//! # Losing the Lease
//! Leader-only runnables are aborted at once (another process may already lead). Then, by
//! [`Builder::on_lost_leadership`]: [`OnLostLeadership::Exit`] (the default, as in
//! controller-runtime) stops everything else and returns [`Error::LeaderElection`];
//! [`OnLostLeadership::Recampaign`] keeps the servers, caches and runnables without leader
//! election running, campaigns again, and on winning runs [`Runnable::fresh`] copies of the
//! leader-only runnables.
//!
//! # Errors
//! [`Manager::run`] returns `Ok(())` after a graceful shutdown. It returns an [`Error`] when a
//! runnable failed, the Lease was lost (unless the manager campaigns again), a server could
//! not bind, the grace period ran out, or a second signal aborted; in every case the process
//! should exit non-zero.
//!
//! Dropping the future of [`Manager::run`] aborts every task it started, without releasing
//! the Lease (as if the process had been killed).

pub mod health;
pub mod leader;
mod runnable;
mod server;

use std::net::SocketAddr;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use prometheus_client::registry::Registry;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::AbortHandle;
use tokio::time::Instant;
use tokio_util::sync::{CancellationToken, DropGuard};
use tokio_util::task::TaskTracker;

use crate::informer::Informers;

pub use health::{Health, Readiness, ReadyHandle};
pub use leader::{LeaderElector, Leadership, LeaseConfig};
pub use runnable::{FnRunnable, RestartableFn, RunError, Runnable, restartable_fn, runnable_fn};

/// Why [`Manager::run`] ended other than by a graceful shutdown. The process should exit
/// non-zero; a restart starts over.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A runnable returned an error (or panicked); everything else was stopped.
    #[error("runnable {name} failed")]
    RunnableFailed {
        /// The runnable's name.
        name: String,
        /// What it returned.
        #[source]
        source: RunError,
    },
    /// The Lease was lost; leader-only work was stopped at once.
    #[error("leader election")]
    LeaderElection(#[from] leader::Error),
    /// The metrics or health server could not bind or failed.
    #[error("serving {what} on {addr}")]
    ServeFailed {
        /// Which server.
        what: &'static str,
        /// Its address.
        addr: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// Some components did not stop within the grace period; they were aborted.
    #[error("components still running after the grace period: {}", pending.join(", "))]
    GracePeriodExceeded {
        /// The phases that were still running.
        pending: Vec<String>,
    },
    /// A second shutdown signal aborted the graceful shutdown.
    #[error("shutdown aborted by a second signal")]
    Aborted,
    /// The manager is to campaign again after losing the Lease, but these leader-only
    /// runnables cannot run a second time ([`Runnable::fresh`] returned `None`). Implement
    /// `fresh` (or use [`restartable_fn`]), or choose [`OnLostLeadership::Exit`].
    #[error(
        "cannot campaign again after losing the lease: the leader-only runnables {} cannot run twice",
        names.join(", ")
    )]
    NotRestartable {
        /// The runnables without a fresh copy.
        names: Vec<String>,
    },
}

/// What a [`Manager`] does when it loses the Lease while leading. Either way its leader-only
/// runnables are aborted at once.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum OnLostLeadership {
    /// Stop everything else too and return [`Error::LeaderElection`], so the process exits and
    /// a restart competes again with fresh state. controller-runtime's behaviour, and the
    /// default: it suits a Deployment, whose restart count then shows the loss.
    #[default]
    Exit,
    /// Keep the servers, the caches and the runnables without leader election running,
    /// campaign again, and when this process leads again run fresh copies
    /// ([`Runnable::fresh`]) of the leader-only runnables, which start from the caches. For
    /// processes that must outlive a lost Lease, such as one embedding the API server.
    Recampaign,
}

/// Options of a [`Manager`]; see [`Manager::builder`].
#[must_use]
pub struct Builder {
    client: kube::Client,
    lease: Option<LeaseConfig>,
    metrics_addr: Option<Listen>,
    health_addr: Option<Listen>,
    grace: Duration,
    handle_signals: bool,
    on_lost: OnLostLeadership,
    runnables: Vec<Box<dyn Runnable>>,
}

impl std::fmt::Debug for Builder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Builder")
            .field("lease", &self.lease)
            .field("metrics_addr", &self.metrics_addr)
            .field("health_addr", &self.health_addr)
            .field("grace", &self.grace)
            .field("handle_signals", &self.handle_signals)
            .field("on_lost_leadership", &self.on_lost)
            .field("runnables", &self.runnables.len())
            .finish_non_exhaustive()
    }
}

/// Where a server listens.
#[derive(Debug)]
enum Listen {
    Addr(SocketAddr),
    Listener(std::net::TcpListener),
}

impl Listen {
    fn describe(&self) -> String {
        match self {
            Listen::Addr(a) => a.to_string(),
            Listen::Listener(l) => l
                .local_addr()
                .map_or_else(|_| "a listener".into(), |a| a.to_string()),
        }
    }

    async fn bind(self) -> std::io::Result<tokio::net::TcpListener> {
        match self {
            Listen::Addr(a) => tokio::net::TcpListener::bind(a).await,
            Listen::Listener(l) => {
                l.set_nonblocking(true)?;
                tokio::net::TcpListener::from_std(l)
            }
        }
    }
}

impl Builder {
    /// Enables leader election on `config`'s Lease. Without it, every runnable runs at once
    /// (as if this process always led).
    pub fn leader_election(mut self, config: LeaseConfig) -> Self {
        self.lease = Some(config);
        self
    }

    /// Serves `/metrics` (and the probes) on `addr`, e.g. `0.0.0.0:8080`. Off by default.
    pub fn metrics_bind_address(mut self, addr: SocketAddr) -> Self {
        self.metrics_addr = Some(Listen::Addr(addr));
        self
    }

    /// Serves `/metrics` (and the probes) on an already-bound listener (tests bind port 0).
    pub fn metrics_listener(mut self, listener: std::net::TcpListener) -> Self {
        self.metrics_addr = Some(Listen::Listener(listener));
        self
    }

    /// Serves `/healthz` and `/readyz` (and the metrics) on `addr`, e.g. `0.0.0.0:8081`. Off
    /// by default.
    pub fn health_probe_bind_address(mut self, addr: SocketAddr) -> Self {
        self.health_addr = Some(Listen::Addr(addr));
        self
    }

    /// Serves the probes (and the metrics) on an already-bound listener.
    pub fn health_probe_listener(mut self, listener: std::net::TcpListener) -> Self {
        self.health_addr = Some(Listen::Listener(listener));
        self
    }

    /// How long a graceful shutdown may take in all (30 s by default).
    pub fn graceful_shutdown_timeout(mut self, grace: Duration) -> Self {
        self.grace = grace;
        self
    }

    /// Whether SIGINT and SIGTERM start the shutdown (on by default). Tests turn it off and
    /// use [`Manager::shutdown_handle`].
    pub fn handle_signals(mut self, on: bool) -> Self {
        self.handle_signals = on;
        self
    }

    /// What to do when the Lease is lost ([`OnLostLeadership::Exit`] by default).
    pub fn on_lost_leadership(mut self, on_lost: OnLostLeadership) -> Self {
        self.on_lost = on_lost;
        self
    }

    /// Adds a runnable.
    #[allow(
        clippy::should_implement_trait,
        reason = "the name the runtime contract fixed"
    )]
    pub fn add(mut self, runnable: Box<dyn Runnable>) -> Self {
        self.runnables.push(runnable);
        self
    }

    /// Builds the manager. Nothing runs until [`Manager::run`].
    pub fn build(self) -> Manager {
        let (shutdown, _) = watch::channel(0u32);
        let elector = self
            .lease
            .map(|config| LeaderElector::new(self.client.clone(), config));
        Manager {
            elector,
            metrics_addr: self.metrics_addr,
            health_addr: self.health_addr,
            grace: self.grace,
            handle_signals: self.handle_signals,
            on_lost: self.on_lost,
            runnables: self.runnables,
            informers: Informers::new(self.client),
            registry: Registry::default(),
            health: Health::new(),
            shutdown: Arc::new(shutdown),
        }
    }
}

/// Runs a process's components; see the [module docs](self).
pub struct Manager {
    elector: Option<LeaderElector>,
    metrics_addr: Option<Listen>,
    health_addr: Option<Listen>,
    grace: Duration,
    handle_signals: bool,
    on_lost: OnLostLeadership,
    runnables: Vec<Box<dyn Runnable>>,
    informers: Informers,
    registry: Registry,
    health: Health,
    shutdown: Arc<watch::Sender<u32>>,
}

impl std::fmt::Debug for Manager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Manager")
            .field("elector", &self.elector)
            .field("runnables", &self.runnables.len())
            .finish_non_exhaustive()
    }
}

/// Starts a graceful shutdown of a running manager, as a signal would. Cheap to clone.
#[derive(Debug, Clone)]
pub struct ShutdownHandle {
    tx: Arc<watch::Sender<u32>>,
}

impl ShutdownHandle {
    /// The first call starts a graceful shutdown; a second one aborts it.
    pub fn shutdown(&self) {
        self.tx.send_modify(|n| *n += 1);
    }
}

/// Aborts the tasks it holds (and cancels the tokens) when dropped, so dropping
/// [`Manager::run`]'s future ends everything it started.
#[derive(Default)]
struct AbortOnDrop {
    tasks: Vec<AbortHandle>,
    tokens: Vec<DropGuard>,
}

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        for h in &self.tasks {
            h.abort();
        }
    }
}

/// The name of the phase of leader-only runnables.
const LEADER_ONLY: &str = "leader-only runnables";

/// Why the running phase ended.
enum Stop {
    Requested,
    Failed(String, RunError),
    Error(Error),
    Lost(leader::Error),
}

/// One stage of startup, stopped as a unit.
struct Phase {
    name: &'static str,
    token: CancellationToken,
    tracker: TaskTracker,
    handles: Vec<AbortHandle>,
}

impl Phase {
    fn new(name: &'static str) -> Self {
        Phase {
            name,
            token: CancellationToken::new(),
            tracker: TaskTracker::new(),
            handles: Vec::new(),
        }
    }

    fn spawn<F>(&mut self, guard: &mut AbortOnDrop, fut: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let handle = self.tracker.spawn(fut);
        self.handles.push(handle.abort_handle());
        guard.tasks.push(handle.abort_handle());
    }

    fn abort(&self) {
        self.token.cancel();
        for h in &self.handles {
            h.abort();
        }
    }
}

impl Manager {
    /// Options for a manager whose components talk to the API server through `client`.
    pub fn builder(client: kube::Client) -> Builder {
        Builder {
            client,
            lease: None,
            metrics_addr: None,
            health_addr: None,
            grace: Duration::from_secs(30),
            handle_signals: true,
            on_lost: OnLostLeadership::Exit,
            runnables: Vec::new(),
        }
    }

    /// The client components should use (the one the informers use).
    pub fn client(&self) -> kube::Client {
        self.informers.client()
    }

    /// The shared informers: controllers get their caches here before [`Manager::run`]; the
    /// manager starts them and waits until they synced before starting any runnable.
    pub fn informers(&self) -> &Informers {
        &self.informers
    }

    /// The registry served on `/metrics`; register metric families here before
    /// [`Manager::run`].
    pub fn registry_mut(&mut self) -> &mut Registry {
        &mut self.registry
    }

    /// The health and readiness checks served on `/healthz` and `/readyz`.
    pub fn health(&self) -> &Health {
        &self.health
    }

    /// Adds a runnable.
    pub fn add(&mut self, runnable: Box<dyn Runnable>) -> &mut Self {
        self.runnables.push(runnable);
        self
    }

    /// Follows this process's leadership, when leader election is on (`None` otherwise:
    /// every runnable runs as if leading).
    pub fn leadership(&self) -> Option<watch::Receiver<Leadership>> {
        self.elector.as_ref().map(LeaderElector::subscribe)
    }

    /// A handle that stops the manager as a signal would.
    pub fn shutdown_handle(&self) -> ShutdownHandle {
        ShutdownHandle {
            tx: Arc::clone(&self.shutdown),
        }
    }

    /// Runs everything until shutdown; see the [module docs](self) for the order and errors.
    pub async fn run(self) -> Result<(), Error> {
        let Manager {
            elector,
            metrics_addr,
            health_addr,
            grace,
            handle_signals,
            on_lost,
            runnables,
            informers,
            mut registry,
            health,
            shutdown,
        } = self;
        let mut guard = AbortOnDrop::default();
        let mut requests = shutdown.subscribe();
        if let Some(elector) = &elector {
            elector.config().validate()?;
            elector.register_metrics(&mut registry);
        }
        informers.register_metrics(&mut registry);
        let fail_slots = runnables.len() + 4;
        let (leaders, others): (Vec<_>, Vec<_>) = runnables
            .into_iter()
            .partition(|r| r.needs_leader_election() && elector.is_some());
        // Campaigning again needs a copy of every leader-only runnable for the next term;
        // refuse before starting anything when one cannot run twice.
        let recampaign = on_lost == OnLostLeadership::Recampaign && elector.is_some();
        let mut spares = Ok(Vec::new());
        if recampaign {
            spares = Ok(fresh_copies(&leaders).map_err(|names| Error::NotRestartable { names })?);
        }
        let registry = Arc::new(registry);
        if handle_signals {
            let tx = Arc::clone(&shutdown);
            guard
                .tasks
                .push(tokio::spawn(forward_signals(tx)).abort_handle());
        }
        let (fail_tx, mut failures) = mpsc::channel::<(String, RunError)>(fail_slots);
        // In `Recampaign` mode the elector reports each loss here and waits for the
        // acknowledgement (sent once the leader-only runnables stopped) before campaigning again.
        let (lost_tx, mut losses) = mpsc::channel::<oneshot::Sender<()>>(1);
        let mut phases: Vec<Phase> = Vec::new();

        let stop = 'run: {
            // 1. The HTTP servers.
            let mut servers = Phase::new("servers");
            let router = server::router(health.clone(), Arc::clone(&registry));
            for (what, listen) in [("metrics", metrics_addr), ("health probes", health_addr)] {
                let Some(listen) = listen else { continue };
                let addr = listen.describe();
                let listener = match listen.bind().await {
                    Ok(l) => l,
                    Err(source) => {
                        break 'run Stop::Error(Error::ServeFailed { what, addr, source });
                    }
                };
                tracing::info!(%addr, what, "serving");
                let (router, token) = (router.clone(), servers.token.clone());
                servers.spawn(&mut guard, async move {
                    if let Err(e) = server::serve(listener, router, token).await {
                        tracing::error!(error = %e, what, "server failed");
                    }
                });
            }
            phases.push(servers);

            // 2. The shared informers, until every cache synced.
            let caches = Phase::new("informers");
            guard.tokens.push(caches.token.clone().drop_guard());
            informers.start_with(caches.token.clone(), caches.tracker.clone());
            phases.push(caches);
            tokio::select! {
                () = informers.wait_until_synced() => {}
                _ = requests.changed() => break 'run Stop::Requested,
            }
            tracing::debug!("caches synced");
            health.readiness().release_initial();

            // 3. Components that need no leadership.
            let mut rest = Phase::new("runnables without leader election");
            for r in others {
                start(&mut rest, &mut guard, r, fail_tx.clone());
            }
            phases.push(rest);

            // 4. Leader election, then 5. leader-only components.
            let mut leadership = match elector {
                Some(mut elector) => {
                    let rx = elector.subscribe();
                    let mut election = Phase::new("leader election");
                    let token = election.token.clone();
                    let failed = fail_tx.clone();
                    let lost_tx = recampaign.then(|| lost_tx.clone());
                    election.spawn(&mut guard, async move {
                        loop {
                            let Err(e) = elector.campaign(&token).await else {
                                return;
                            };
                            let Some(lost_tx) = &lost_tx else {
                                let _ = failed.send(("leader election".into(), Box::new(e))).await;
                                return;
                            };
                            // Campaign again once the manager stopped the leader-only work.
                            let (ack, acked) = oneshot::channel();
                            if lost_tx.send(ack).await.is_err() {
                                return;
                            }
                            tokio::select! {
                                () = token.cancelled() => return,
                                r = acked => if r.is_err() { return },
                            }
                        }
                    });
                    phases.push(election);
                    Some(rx)
                }
                None => None,
            };
            // The runnables of the next term of leadership (`None` while one runs).
            let mut next_term = Some(leaders);
            loop {
                if let Some(rx) = &leadership {
                    let state = rx.borrow().clone();
                    match state {
                        Leadership::Leading => {
                            if let Some(list) = next_term.take() {
                                let mut phase = Phase::new(LEADER_ONLY);
                                for r in list {
                                    start(&mut phase, &mut guard, r, fail_tx.clone());
                                }
                                phases.push(phase);
                            }
                        }
                        Leadership::Lost => {
                            // Stop leader-only work at once; the elector's report follows.
                            if let Some(p) = phases.iter().find(|p| p.name == LEADER_ONLY) {
                                p.abort();
                            }
                        }
                        Leadership::Standby { .. } | Leadership::Released => {}
                    }
                }
                tokio::select! {
                    _ = requests.changed() => break 'run Stop::Requested,
                    Some((name, source)) = failures.recv() => {
                        break 'run match source.downcast::<leader::Error>() {
                            Ok(lost) => Stop::Lost(*lost),
                            Err(source) => Stop::Failed(name, source),
                        };
                    }
                    Some(ack) = losses.recv() => {
                        // `Recampaign`: the term ended. Abort its runnables, wait until they
                        // are gone, and line up fresh copies for the next term.
                        if let Some(i) = phases.iter().position(|p| p.name == LEADER_ONLY) {
                            let phase = &phases[i];
                            phase.abort();
                            phase.tracker.close();
                            tokio::select! {
                                () = phase.tracker.wait() => {}
                                _ = requests.changed() => break 'run Stop::Requested,
                            }
                            phases.remove(i);
                        }
                        guard.tasks.retain(|h| !h.is_finished());
                        let list = match std::mem::replace(&mut spares, Ok(Vec::new())) {
                            Ok(list) => list,
                            Err(names) => break 'run Stop::Error(Error::NotRestartable { names }),
                        };
                        spares = fresh_copies(&list);
                        next_term = Some(list);
                        tracing::warn!("lost the lease: leader-only runnables stopped; campaigning again");
                        let _ = ack.send(());
                    }
                    changed = async {
                        match leadership.as_mut() {
                            Some(rx) => rx.changed().await.is_ok(),
                            None => futures::future::pending().await,
                        }
                    } => {
                        if !changed {
                            leadership = None;
                        }
                    }
                }
            }
        };

        let outcome = match stop {
            Stop::Requested => {
                tracing::info!("shutting down");
                Ok(())
            }
            Stop::Failed(name, source) => {
                tracing::error!(%name, error = %source, "runnable failed; shutting down");
                Err(Error::RunnableFailed { name, source })
            }
            Stop::Error(e) => Err(e),
            Stop::Lost(e) => {
                // Leader-only work stops at once, without a grace period.
                if let Some(p) = phases.iter().find(|p| p.name == LEADER_ONLY) {
                    p.abort();
                }
                Err(Error::LeaderElection(e))
            }
        };

        // Stop in reverse order, within one grace period in all.
        let deadline = Instant::now() + grace;
        let aborted = *requests.borrow_and_update() >= 2;
        if aborted {
            return Err(Error::Aborted);
        }
        while let Some(phase) = phases.pop() {
            phase.token.cancel();
            phase.tracker.close();
            tokio::select! {
                () = phase.tracker.wait() => {}
                () = tokio::time::sleep_until(deadline) => {
                    let mut pending = vec![phase.name.to_string()];
                    pending.extend(phases.iter().rev().map(|p| p.name.to_string()));
                    tracing::error!(?pending, "grace period exceeded; aborting");
                    return Err(Error::GracePeriodExceeded { pending });
                }
                () = second_request(&mut requests) => {
                    tracing::warn!("second shutdown signal; aborting");
                    return Err(Error::Aborted);
                }
            }
        }
        drop(guard);
        outcome
    }
}

/// Waits until a second shutdown request arrived (counting the one that started shutdown).
async fn second_request(requests: &mut watch::Receiver<u32>) {
    loop {
        if *requests.borrow_and_update() >= 2 {
            return;
        }
        if requests.changed().await.is_err() {
            futures::future::pending::<()>().await;
        }
    }
}

/// A fresh copy of each runnable, or the names of those that have none.
fn fresh_copies(runnables: &[Box<dyn Runnable>]) -> Result<Vec<Box<dyn Runnable>>, Vec<String>> {
    let mut copies = Vec::with_capacity(runnables.len());
    let mut missing = Vec::new();
    for r in runnables {
        match r.fresh() {
            Some(copy) => copies.push(copy),
            None => missing.push(r.name().to_string()),
        }
    }
    if missing.is_empty() {
        Ok(copies)
    } else {
        Err(missing)
    }
}

fn start(
    phase: &mut Phase,
    guard: &mut AbortOnDrop,
    runnable: Box<dyn Runnable>,
    failures: mpsc::Sender<(String, RunError)>,
) {
    let name = runnable.name().to_string();
    let token = phase.token.child_token();
    tracing::debug!(%name, "starting runnable");
    phase.spawn(guard, async move {
        let result = AssertUnwindSafe(runnable.run(token)).catch_unwind().await;
        let error: RunError = match result {
            Ok(Ok(())) => {
                tracing::debug!(%name, "runnable ended");
                return;
            }
            Ok(Err(e)) => e,
            Err(_) => format!("runnable {name} panicked").into(),
        };
        // Each task sends at most once and the channel has a slot per task.
        let _ = failures.send((name, error)).await;
    });
}

/// Turns SIGINT and SIGTERM into shutdown requests.
async fn forward_signals(tx: Arc<watch::Sender<u32>>) {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let (Ok(mut term), Ok(mut int)) = (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
        ) else {
            tracing::error!("could not install signal handlers");
            return;
        };
        loop {
            tokio::select! {
                _ = term.recv() => tracing::info!("received SIGTERM"),
                _ = int.recv() => tracing::info!("received SIGINT"),
            }
            tx.send_modify(|n| *n += 1);
        }
    }
    #[cfg(not(unix))]
    loop {
        if tokio::signal::ctrl_c().await.is_err() {
            return;
        }
        tx.send_modify(|n| *n += 1);
    }
}
