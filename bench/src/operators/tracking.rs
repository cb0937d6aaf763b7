//! Watching a run to its end: the watches that see the last copy exist and the last object
//! Ready (ConfigMapSyncs) or the last Deployment exist and the last status written (Foos).

use std::collections::HashSet;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use futures::{StreamExt as _, TryStreamExt as _};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kore_configmap_sync::ConfigMapSync;
use kore_sample_controller::Foo;
use kube::ResourceExt as _;
use kube::api::Api;
use kube::runtime::{WatchStreamExt as _, watcher};

use super::{FOO_NS, Outcome, SOURCE_NS, Sizes};
use crate::operators_child::{Child, ChildSpec, Implementation};

/// Starts the operator, waits for `tracker` to see convergence, then for the idle period.
pub(super) async fn observe(
    implementation: Implementation,
    url: &str,
    concurrency: usize,
    mut tracker: tokio::task::JoinHandle<anyhow::Result<Instant>>,
    sizes: &Sizes,
    objects: usize,
    created_in: Duration,
) -> anyhow::Result<Outcome> {
    let server_cpu = || crate::procs::cpu_time("/proc/self/stat").map(|d| d.as_secs_f64());
    let cpu_before = server_cpu()?;
    let started = Instant::now();
    let mut child = Child::spawn(&ChildSpec {
        implementation,
        url: url.to_owned(),
        concurrency,
    })?;
    let converged = match tokio::time::timeout(sizes.timeout, &mut tracker).await {
        Ok(done) => Some(
            done.context("the tracker panicked")??
                .duration_since(started),
        ),
        Err(_) => {
            tracker.abort();
            eprintln!(
                "kore-bench: operators: {} did not converge within {:?}",
                implementation.label(),
                sizes.timeout
            );
            None
        }
    };
    let server_seconds = server_cpu()? - cpu_before;
    let at_converge = child.stats().await?;
    eprintln!(
        "kore-bench: operators: {}: {:?} to converge, operator CPU {:.2} s, this process \
         (server, watches) CPU {server_seconds:.2} s, {} error answers, requests {:?}",
        implementation.label(),
        converged,
        at_converge.cpu_seconds,
        at_converge.errors,
        at_converge.requests
    );
    tokio::time::sleep(sizes.idle).await;
    let at_end = child.stats().await?;
    child.stop().await?;
    Ok(Outcome {
        implementation,
        objects,
        converged,
        at_converge,
        at_end,
        created_in,
        server_seconds,
    })
}

pub(super) fn is_ready(cms: &ConfigMapSync) -> bool {
    cms.status.as_ref().is_some_and(|s| {
        s.conditions
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True")
    })
}

/// What a tracker's two watches say.
pub(super) enum Seen<A, B> {
    A(watcher::Event<A>),
    B(watcher::Event<B>),
}

/// Follows two watches; `done(a, b)` is asked after every event. Reports on `listed` once
/// both initial lists are in, returns the instant `done` first holds.
pub(super) async fn track<A, B>(
    a: Api<A>,
    b: Api<B>,
    listed: tokio::sync::oneshot::Sender<()>,
    mut on_a: impl FnMut(watcher::Event<A>),
    mut on_b: impl FnMut(watcher::Event<B>),
    mut done: impl FnMut() -> bool,
) -> anyhow::Result<Instant>
where
    A: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
    B: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
    A::DynamicType: Default,
    B::DynamicType: Default,
{
    let a = watcher(a, watcher::Config::default())
        .default_backoff()
        .map_ok(Seen::A)
        .boxed();
    let b = watcher(b, watcher::Config::default())
        .default_backoff()
        .map_ok(Seen::B)
        .boxed();
    let mut events = futures::stream::select(a, b);
    let mut listed = Some(listed);
    let mut lists_done = 0;
    while let Some(event) = events.try_next().await? {
        let init_done = match event {
            Seen::A(e) => {
                let init = matches!(e, watcher::Event::InitDone);
                on_a(e);
                init
            }
            Seen::B(e) => {
                let init = matches!(e, watcher::Event::InitDone);
                on_b(e);
                init
            }
        };
        if init_done {
            lists_done += 1;
            if lists_done == 2
                && let Some(tx) = listed.take()
            {
                let _ = tx.send(());
            }
        }
        if listed.is_none() && done() {
            return Ok(Instant::now());
        }
    }
    anyhow::bail!("the tracker's watches ended")
}

/// The instant every one of `n` ConfigMapSyncs is Ready and every copy exists.
pub(super) async fn track_syncs(
    client: kube::Client,
    n: usize,
    listed: tokio::sync::oneshot::Sender<()>,
) -> anyhow::Result<Instant> {
    let ready = std::sync::Mutex::new(HashSet::new());
    let copies = std::sync::Mutex::new(HashSet::new());
    track(
        Api::<ConfigMapSync>::namespaced(client.clone(), SOURCE_NS),
        Api::<ConfigMap>::all(client),
        listed,
        |e| match e {
            watcher::Event::Apply(s) | watcher::Event::InitApply(s) => {
                if is_ready(&s) {
                    ready
                        .lock()
                        .expect("no panic while tracking")
                        .insert(s.name_any());
                } else {
                    ready
                        .lock()
                        .expect("no panic while tracking")
                        .remove(&s.name_any());
                }
            }
            watcher::Event::Delete(s) => {
                ready
                    .lock()
                    .expect("no panic while tracking")
                    .remove(&s.name_any());
            }
            watcher::Event::Init | watcher::Event::InitDone => {}
        },
        |e| {
            let is_copy = |cm: &ConfigMap| {
                cm.namespace().is_some_and(|ns| ns.starts_with("dst-"))
                    && cm.name_any().starts_with("cfg-")
            };
            match e {
                watcher::Event::Apply(cm) | watcher::Event::InitApply(cm) if is_copy(&cm) => {
                    copies
                        .lock()
                        .expect("no panic while tracking")
                        .insert((cm.namespace(), cm.name_any()));
                }
                watcher::Event::Delete(cm) if is_copy(&cm) => {
                    copies
                        .lock()
                        .expect("no panic while tracking")
                        .remove(&(cm.namespace(), cm.name_any()));
                }
                _ => {}
            }
        },
        || {
            ready.lock().expect("no panic while tracking").len() == n
                && copies.lock().expect("no panic while tracking").len() == n
        },
    )
    .await
}

/// The instant every Deployment exists and every Foo's status shows its replicas available.
pub(super) async fn track_foos(
    client: kube::Client,
    n: usize,
    listed: tokio::sync::oneshot::Sender<()>,
) -> anyhow::Result<Instant> {
    let done = std::sync::Mutex::new(HashSet::new());
    let deployments = std::sync::Mutex::new(HashSet::new());
    track(
        Api::<Foo>::namespaced(client.clone(), FOO_NS),
        Api::<Deployment>::namespaced(client, FOO_NS),
        listed,
        |e| match e {
            watcher::Event::Apply(f) | watcher::Event::InitApply(f) => {
                let want = f.spec.replicas.unwrap_or(1);
                if f.status.as_ref().map(|s| s.available_replicas) == Some(want) {
                    done.lock()
                        .expect("no panic while tracking")
                        .insert(f.name_any());
                } else {
                    done.lock()
                        .expect("no panic while tracking")
                        .remove(&f.name_any());
                }
            }
            watcher::Event::Delete(f) => {
                done.lock()
                    .expect("no panic while tracking")
                    .remove(&f.name_any());
            }
            watcher::Event::Init | watcher::Event::InitDone => {}
        },
        |e| match e {
            watcher::Event::Apply(d) | watcher::Event::InitApply(d) => {
                deployments
                    .lock()
                    .expect("no panic while tracking")
                    .insert(d.name_any());
            }
            watcher::Event::Delete(d) => {
                deployments
                    .lock()
                    .expect("no panic while tracking")
                    .remove(&d.name_any());
            }
            watcher::Event::Init | watcher::Event::InitDone => {}
        },
        || {
            done.lock().expect("no panic while tracking").len() == n
                && deployments.lock().expect("no panic while tracking").len() == n
        },
    )
    .await
}
