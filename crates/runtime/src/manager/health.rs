//! Named liveness and readiness checks, and readiness handles.
//!
//! [`Health`] holds two lists of named checks: `healthz` (is the process alive?) and `readyz`
//! (may it receive traffic / count as started?). The manager serves them on `/healthz` and
//! `/readyz`; `?verbose` lists each check.
//!
//! # Guarantees
//! - `/readyz` first fails with the check `initialized` until the manager's caches have synced
//!   and every [`ReadyHandle`] has been dropped.
//! - Readiness never goes back: once every readyz check passed, `/readyz` answers 200 for the
//!   rest of the process's life, whatever the checks say later. A controller that is slow to
//!   catch up is still running; restarting traffic routing for it helps nobody.
//! - `/healthz` runs its checks on every request.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

/// A named check: `Ok(())` when healthy, `Err(reason)` otherwise. Must not block.
pub type Check = Arc<dyn Fn() -> Result<(), String> + Send + Sync>;

/// The name of the built-in readiness check fed by [`Readiness`].
pub const INITIALIZED: &str = "initialized";

/// Liveness and readiness checks, shared by the manager and its components. Cheap to clone.
#[derive(Clone)]
pub struct Health {
    inner: Arc<HealthInner>,
}

struct HealthInner {
    healthz: Mutex<BTreeMap<String, Check>>,
    readyz: Mutex<BTreeMap<String, Check>>,
    readiness: Readiness,
    /// Latched once every readyz check passed.
    ready: AtomicBool,
}

impl std::fmt::Debug for Health {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Health")
            .field("ready", &self.inner.ready.load(Ordering::Acquire))
            .finish_non_exhaustive()
    }
}

impl Default for Health {
    fn default() -> Self {
        Self::new()
    }
}

/// The result of running one list of checks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// Each check by name, with `Err(reason)` when it failed.
    pub checks: Vec<(String, Result<(), String>)>,
}

impl Report {
    /// Whether every check passed.
    pub fn is_ok(&self) -> bool {
        self.checks.iter().all(|(_, r)| r.is_ok())
    }

    /// Renders the report the way Kubernetes components do with `?verbose`.
    pub fn render(&self, endpoint: &str, verbose: bool) -> String {
        let mut out = String::new();
        if verbose || !self.is_ok() {
            for (name, result) in &self.checks {
                match result {
                    Ok(()) => out.push_str(&format!("[+]{name} ok\n")),
                    Err(reason) => out.push_str(&format!("[-]{name} failed: {reason}\n")),
                }
            }
        }
        if self.is_ok() {
            if verbose {
                out.push_str(&format!("{endpoint} check passed\n"));
            } else {
                out.push_str("ok");
            }
        } else {
            out.push_str(&format!("{endpoint} check failed\n"));
        }
        out
    }
}

impl Health {
    /// Empty lists, with the `initialized` readiness check in place.
    pub fn new() -> Self {
        let readiness = Readiness::new();
        let health = Health {
            inner: Arc::new(HealthInner {
                healthz: Mutex::new(BTreeMap::new()),
                readyz: Mutex::new(BTreeMap::new()),
                readiness: readiness.clone(),
                ready: AtomicBool::new(false),
            }),
        };
        health.add_readyz_check(INITIALIZED, move || {
            if readiness.is_ready() {
                Ok(())
            } else {
                Err("caches not synced or components still starting".into())
            }
        });
        health.add_healthz_check("ping", || Ok(()));
        health
    }

    /// Adds (or replaces) a named liveness check.
    pub fn add_healthz_check(
        &self,
        name: impl Into<String>,
        check: impl Fn() -> Result<(), String> + Send + Sync + 'static,
    ) {
        lock(&self.inner.healthz).insert(name.into(), Arc::new(check));
    }

    /// Adds (or replaces) a named readiness check.
    pub fn add_readyz_check(
        &self,
        name: impl Into<String>,
        check: impl Fn() -> Result<(), String> + Send + Sync + 'static,
    ) {
        lock(&self.inner.readyz).insert(name.into(), Arc::new(check));
    }

    /// The readiness handles behind the `initialized` check.
    pub fn readiness(&self) -> &Readiness {
        &self.inner.readiness
    }

    /// Runs the liveness checks.
    pub fn healthz(&self) -> Report {
        run(&self.inner.healthz)
    }

    /// Runs the readiness checks; once they all passed, reports them as passed for good.
    pub fn readyz(&self) -> Report {
        if self.inner.ready.load(Ordering::Acquire) {
            let names: Vec<String> = lock(&self.inner.readyz).keys().cloned().collect();
            return Report {
                checks: names.into_iter().map(|n| (n, Ok(()))).collect(),
            };
        }
        let report = run(&self.inner.readyz);
        if report.is_ok() {
            self.inner.ready.store(true, Ordering::Release);
        }
        report
    }

    /// Whether `/readyz` has passed (it never goes back).
    pub fn is_ready(&self) -> bool {
        self.inner.ready.load(Ordering::Acquire) || self.readyz().is_ok()
    }
}

fn run(checks: &Mutex<BTreeMap<String, Check>>) -> Report {
    // Clone the checks out so that none runs under the lock.
    let list: Vec<(String, Check)> = lock(checks)
        .iter()
        .map(|(n, c)| (n.clone(), Arc::clone(c)))
        .collect();
    Report {
        checks: list.into_iter().map(|(n, c)| (n, c())).collect(),
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A check that panicked cannot leave the map half-updated: inserts are single calls.
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Readiness built from handles: ready once every handle has been dropped, and ready for
/// good from then on.
///
/// The set starts with one handle of its own, held by the manager until its caches have
/// synced, so that it cannot become ready before anything registered. Components take a
/// [`ReadyHandle`] while they build (before the manager runs) and drop it once they are
/// initialised.
#[derive(Clone)]
pub struct Readiness {
    inner: Arc<ReadinessInner>,
}

struct ReadinessInner {
    outstanding: AtomicUsize,
    ready: AtomicBool,
    notify: Notify,
}

impl std::fmt::Debug for Readiness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Readiness")
            .field(
                "outstanding",
                &self.inner.outstanding.load(Ordering::Acquire),
            )
            .field("ready", &self.is_ready())
            .finish()
    }
}

impl Readiness {
    /// A set holding one handle of its own, released by [`Readiness::release_initial`].
    fn new() -> Self {
        Readiness {
            inner: Arc::new(ReadinessInner {
                outstanding: AtomicUsize::new(1),
                ready: AtomicBool::new(false),
                notify: Notify::new(),
            }),
        }
    }

    /// A handle that keeps the process unready until it is dropped. Taking a handle after
    /// readiness was reached has no effect.
    pub fn handle(&self) -> ReadyHandle {
        self.inner.outstanding.fetch_add(1, Ordering::AcqRel);
        ReadyHandle {
            inner: Arc::clone(&self.inner),
        }
    }

    /// Drops the set's own handle (the manager does this once its caches have synced).
    pub(crate) fn release_initial(&self) {
        release(&self.inner);
    }

    /// Whether every handle has been dropped.
    pub fn is_ready(&self) -> bool {
        self.inner.ready.load(Ordering::Acquire)
    }

    /// Waits until every handle has been dropped.
    pub async fn ready(&self) {
        loop {
            let notified = self.inner.notify.notified();
            if self.is_ready() {
                return;
            }
            notified.await;
        }
    }
}

fn release(inner: &ReadinessInner) {
    if inner.outstanding.fetch_sub(1, Ordering::AcqRel) == 1 {
        inner.ready.store(true, Ordering::Release);
        inner.notify.notify_waiters();
    }
}

/// Keeps the process unready while held; see [`Readiness`].
#[must_use = "readiness is reached when this handle is dropped"]
pub struct ReadyHandle {
    inner: Arc<ReadinessInner>,
}

impl std::fmt::Debug for ReadyHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadyHandle").finish_non_exhaustive()
    }
}

impl Drop for ReadyHandle {
    fn drop(&mut self) {
        release(&self.inner);
    }
}
