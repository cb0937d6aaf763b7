//! The loop the server's level-triggered controllers share: watch some storage prefixes, run a
//! pass over the current state, and run it again whenever something under them changes (and,
//! if the pass asks, again after a delay), until the controller is stopped.
//!
//! The namespace, CRD, ClusterRole-aggregation and ServiceAccount controllers each used to
//! copy this loop; now each is a *pass* ([`run`]'s `pass`) and this module owns the watching,
//! the batching of changes, the resyncs and the stopping.
//!
//! # Guarantees
//!
//! - The watches start before the first pass ([`Trigger::Resync`]), from the revision storage
//!   had then, so no change made during a pass (the pass's own writes included) goes unseen:
//!   it wakes the next pass.
//! - Changes that arrive together are folded into one [`Trigger::Changed`] pass (at most
//!   [`BATCH`] events at a time), so a burst of writes costs one pass, not one per write.
//! - A watch that falls behind the history (410 Gone) or fails is started again from the
//!   current revision and followed by a [`Trigger::Resync`] pass, since changes were missed.
//!   If the watch cannot be started at all, it is tried again after [`RETRY`].
//! - Cancelling `stop` ends the loop at its next wait; a pass in progress finishes first.
//!
//! The loop runs in the caller's task and spawns nothing: the server spawns each controller on
//! its `TaskTracker`, so shutdown waits for all of them.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::future::select_all;
use tokio_util::sync::CancellationToken;

use crate::registry::Registry;
use crate::storage::{Storage as _, StorageError, WatchEvent, Watcher};

/// How many watch events are folded into one [`Trigger::Changed`] pass at most.
pub(crate) const BATCH: usize = 1024;
/// How long the loop waits before trying again to start watches that failed to start.
pub(crate) const RETRY: Duration = Duration::from_millis(100);

/// Why a pass runs.
#[derive(Debug)]
pub(crate) enum Trigger {
    /// The watches (re)started: changes may have been missed, look at everything.
    Resync,
    /// These changes arrived (at least one), in revision order.
    Changed(Vec<Arc<WatchEvent>>),
    /// The delay the previous pass asked for is over, with no change meanwhile.
    Recheck,
}

/// What one of a loop's watches covers: the keys under a storage prefix, or only those of one
/// name under it (the loop then sleeps through writes to other names).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Scope<'a> {
    prefix: &'a str,
    name: Option<&'a str>,
}

impl<'a> Scope<'a> {
    /// Every key under `prefix`.
    pub(crate) const fn all(prefix: &'a str) -> Scope<'a> {
        Scope { prefix, name: None }
    }

    /// The keys under `prefix` whose last segment is `name`.
    pub(crate) const fn named(prefix: &'a str, name: &'a str) -> Scope<'a> {
        Scope {
            prefix,
            name: Some(name),
        }
    }
}

/// What a pass wants next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Next {
    /// Run again on the next change only.
    Wait,
    /// Run again on the next change, or after this delay if nothing changes (work is pending
    /// that no watched change will announce, such as objects elsewhere losing finalizers).
    RecheckAfter(Duration),
}

/// Runs `pass` as `name`'s level-triggered loop over the storage scopes `scopes` until
/// `stop` is cancelled (see the module docs).
pub(crate) async fn run<F, Fut>(
    registry: &Registry,
    stop: &CancellationToken,
    name: &'static str,
    scopes: &[Scope<'_>],
    mut pass: F,
) where
    F: FnMut(Trigger) -> Fut,
    Fut: Future<Output = Next>,
{
    'watch: loop {
        let from = registry.store().current_rv();
        let watchers: Result<Vec<Watcher>, StorageError> = scopes
            .iter()
            .map(|scope| match scope.name {
                None => registry.store().watch(scope.prefix, from),
                Some(name) => registry.store().watch_name(scope.prefix, name, from),
            })
            .collect();
        let mut watchers = match watchers {
            Ok(w) => w,
            Err(e) => {
                tracing::warn!(controller = name, error = %e, "starting the watch failed");
                tokio::select! {
                    () = stop.cancelled() => return,
                    () = tokio::time::sleep(RETRY) => continue 'watch,
                }
            }
        };
        let mut trigger = Trigger::Resync;
        loop {
            if stop.is_cancelled() {
                return;
            }
            let next = pass(trigger).await;
            let recheck = match next {
                Next::Wait => None,
                Next::RecheckAfter(delay) => Some(delay),
            };
            let first = tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(recheck.unwrap_or_default()), if recheck.is_some() => {
                    trigger = Trigger::Recheck;
                    continue;
                }
                first = next_event(&mut watchers) => first,
            };
            match first.and_then(|first| drain(first, &mut watchers)) {
                Ok(events) => trigger = Trigger::Changed(events),
                Err(StorageError::Expired { .. }) => {
                    tracing::debug!(
                        controller = name,
                        "watch fell behind the history; resyncing"
                    );
                    continue 'watch;
                }
                Err(e) => {
                    tracing::warn!(controller = name, error = %e, "watch failed; resyncing");
                    continue 'watch;
                }
            }
        }
    }
}

/// The next event of any of `watchers`.
async fn next_event(watchers: &mut [Watcher]) -> Result<Arc<WatchEvent>, StorageError> {
    if let [only] = watchers {
        return only.next().await;
    }
    let (event, _, _) = select_all(watchers.iter_mut().map(|w| Box::pin(w.next()))).await;
    event
}

/// `first` and the events already waiting in `watchers`, up to [`BATCH`], in revision order.
fn drain(
    first: Arc<WatchEvent>,
    watchers: &mut [Watcher],
) -> Result<Vec<Arc<WatchEvent>>, StorageError> {
    let mut events = vec![first];
    for watcher in watchers.iter_mut() {
        while events.len() < BATCH {
            match watcher.try_next()? {
                Some(event) => events.push(event),
                None => break,
            }
        }
    }
    events.sort_by_key(|e| e.rv);
    Ok(events)
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use serde_json::json;

    use super::*;
    use crate::storage::{MemoryBackend, Storage, Store, StoreConfig};

    fn registry(config: StoreConfig) -> Arc<Registry> {
        let store = Store::open(Arc::new(MemoryBackend), config).expect("store");
        Arc::new(Registry::new(store))
    }

    fn cm(name: &str) -> serde_json::Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": name, "namespace": "ns", "uid": name}})
    }

    /// What each pass saw: "resync", "recheck", or the keys of the changes.
    type Seen = Arc<Mutex<Vec<String>>>;

    /// Spawns the loop over `/core/configmaps/` with a pass that records its triggers and
    /// answers `next`.
    fn spawn(
        registry: &Arc<Registry>,
        scopes: Vec<Scope<'static>>,
        next: Next,
    ) -> (Seen, CancellationToken, tokio::task::JoinHandle<()>) {
        let seen: Seen = Arc::default();
        let stop = CancellationToken::new();
        let task = tokio::spawn({
            let (registry, stop, seen) = (registry.clone(), stop.clone(), seen.clone());
            async move {
                run(&registry, &stop, "test", &scopes, |trigger| {
                    let entry = match trigger {
                        Trigger::Resync => "resync".to_string(),
                        Trigger::Recheck => "recheck".to_string(),
                        Trigger::Changed(events) => events
                            .iter()
                            .map(|e| e.key.to_string())
                            .collect::<Vec<_>>()
                            .join(","),
                    };
                    seen.lock().expect("lock").push(entry);
                    async move { next }
                })
                .await;
            }
        });
        (seen, stop, task)
    }

    /// Waits until `seen` holds `n` passes.
    async fn passes(seen: &Seen, n: usize) -> Vec<String> {
        tokio::time::timeout(Duration::from_secs(10), async {
            loop {
                let now = seen.lock().expect("lock").clone();
                if now.len() >= n {
                    return now;
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        })
        .await
        .expect("the passes ran")
    }

    #[tokio::test]
    async fn a_pass_runs_at_start_and_once_per_batch_of_changes_under_its_prefixes() {
        let registry = registry(StoreConfig::default());
        let (seen, stop, task) = spawn(
            &registry,
            vec![
                Scope::all("/core/configmaps/"),
                Scope::all("/core/secrets/"),
            ],
            Next::Wait,
        );
        assert_eq!(passes(&seen, 1).await, ["resync"]);
        let store = registry.store();
        // Written without yielding to the loop: one pass sees all three, in revision order.
        store
            .create("/core/configmaps/ns/a", cm("a"))
            .await
            .expect("a");
        store.create("/core/other/ns/x", cm("x")).await.expect("x");
        store
            .create("/core/secrets/ns/b", cm("b"))
            .await
            .expect("b");
        store
            .create("/core/configmaps/ns/c", cm("c"))
            .await
            .expect("c");
        assert_eq!(
            passes(&seen, 2).await,
            [
                "resync",
                "/core/configmaps/ns/a,/core/secrets/ns/b,/core/configmaps/ns/c"
            ]
        );
        stop.cancel();
        tokio::time::timeout(Duration::from_secs(10), task)
            .await
            .expect("the loop stops")
            .expect("without a panic");
    }

    #[tokio::test(start_paused = true)]
    async fn a_pass_that_asks_for_a_recheck_runs_again_after_the_delay() {
        let registry = registry(StoreConfig::default());
        let (seen, stop, task) = spawn(
            &registry,
            vec![Scope::all("/core/configmaps/")],
            Next::RecheckAfter(Duration::from_secs(1)),
        );
        let start = tokio::time::Instant::now();
        assert_eq!(passes(&seen, 3).await, ["resync", "recheck", "recheck"]);
        assert!(start.elapsed() >= Duration::from_secs(2));
        stop.cancel();
        task.await.expect("the loop stops");
    }

    #[tokio::test]
    async fn a_loop_behind_the_history_resyncs_instead_of_stalling() {
        let registry = registry(StoreConfig::default().history_capacity(4));
        let (seen, stop, task) =
            spawn(&registry, vec![Scope::all("/core/configmaps/")], Next::Wait);
        assert_eq!(passes(&seen, 1).await, ["resync"]);
        // Far more writes than the history holds, without giving the loop a turn between
        // (the test runtime has one thread), so its watch expires.
        for i in 0..64 {
            let name = format!("cm-{i}");
            registry
                .store()
                .create(&format!("/core/configmaps/ns/{name}"), cm(&name))
                .await
                .expect("create");
        }
        assert_eq!(passes(&seen, 2).await, ["resync", "resync"]);
        stop.cancel();
        task.await.expect("the loop stops");
    }
}
