//! Controllers against a real in-process API server: collapsing bursts, backoff, quarantine,
//! deletion, owned and mapped sources, predicates, concurrency, shutdown and metrics.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Event, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kore_runtime::cache::ObjectKey;
use kore_runtime::controller::{
    self, Action, Controller, ReconcileError, Request, predicate, reconciler_fn,
};
use kore_runtime::metrics::Metrics;
use kore_runtime::{Informers, Runnable};
use kore_testenv::{TestEnv, wait_for};
use kube::api::{Api, ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use serde_json::json;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// A reconcile failure for the tests.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct Failed(&'static str);

type Outcome = Result<Action, ReconcileError<Failed>>;

/// One call of the reconciler, as it saw the world.
#[derive(Clone, Debug)]
struct Call {
    name: String,
    at: Instant,
    gone: bool,
    last_state: bool,
    value: Option<String>,
}

#[derive(Clone, Default)]
struct Calls(Arc<Mutex<Vec<Call>>>);

impl Calls {
    fn record(&self, request: &Request<ConfigMap>) -> usize {
        let value = request
            .object()
            .and_then(|cm| cm.data.as_ref()?.get("v").cloned());
        let mut calls = self.0.lock().expect("lock");
        calls.push(Call {
            name: request.key().name().to_owned(),
            at: Instant::now(),
            gone: request.is_gone(),
            last_state: request.last_state().is_some(),
            value,
        });
        calls
            .iter()
            .filter(|c| c.name == request.key().name())
            .count()
    }

    fn of(&self, name: &str) -> Vec<Call> {
        let calls = self.0.lock().expect("lock");
        calls.iter().filter(|c| c.name == name).cloned().collect()
    }

    fn count(&self, name: &str) -> usize {
        self.of(name).len()
    }

    async fn wait_for_count(&self, name: &str, n: usize) -> anyhow::Result<()> {
        wait_for(Duration::from_secs(30), || async {
            (self.count(name) >= n).then_some(())
        })
        .await
    }
}

struct Env {
    _env: TestEnv,
    client: kube::Client,
    informers: Informers,
    shutdown: CancellationToken,
    cms: Api<ConfigMap>,
}

impl Env {
    async fn start() -> anyhow::Result<Env> {
        let env = TestEnv::builder().without_root_ca().start().await?;
        let client = env.client();
        Ok(Env {
            informers: Informers::new(client.clone()),
            shutdown: CancellationToken::new(),
            cms: Api::namespaced(client.clone(), "default"),
            client,
            _env: env,
        })
    }

    /// Starts the informers, waits for their first list, then runs `controller`.
    async fn run<R>(
        &self,
        controller: Controller<ConfigMap, R>,
    ) -> tokio::task::JoinHandle<Result<(), controller::Error>>
    where
        R: controller::Reconciler<ConfigMap>,
    {
        self.informers.start(self.shutdown.clone());
        self.informers.wait_until_synced().await;
        tokio::spawn(controller.run(self.shutdown.clone()))
    }

    async fn create(&self, name: &str, value: &str) -> anyhow::Result<ConfigMap> {
        Ok(self
            .cms
            .create(&PostParams::default(), &config_map(name, value))
            .await?)
    }

    async fn set(&self, name: &str, value: &str) -> anyhow::Result<()> {
        let patch = json!({ "data": { "v": value } });
        self.cms
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
        Ok(())
    }
}

fn config_map(name: &str, value: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("default".into()),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([("v".to_owned(), value.to_owned())])),
        ..ConfigMap::default()
    }
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

#[tokio::test(start_paused = true)]
async fn ten_thousand_rapid_updates_of_one_key_collapse_into_far_fewer_reconciles()
-> anyhow::Result<()> {
    let env = Env::start().await?;
    env.create("burst", "0").await?;
    let calls = Calls::default();
    let c = calls.clone();
    let controller = Controller::for_::<ConfigMap>(&env.informers).build(reconciler_fn(
        move |request: Request<ConfigMap>| {
            let c = c.clone();
            async move {
                c.record(&request);
                tokio::time::sleep(ms(1)).await;
                Outcome::Ok(Action::done())
            }
        },
    ));
    let task = env.run(controller).await;
    for i in 1..=10_000 {
        env.set("burst", &i.to_string()).await?;
    }
    wait_for(Duration::from_secs(60), || async {
        let seen = calls.of("burst");
        (seen.last()?.value.as_deref() == Some("10000")).then_some(())
    })
    .await?;
    let n = calls.count("burst");
    assert!(
        n < 1_000,
        "10,000 updates should collapse, got {n} reconciles"
    );
    env.shutdown.cancel();
    task.await??;
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn a_failing_key_is_retried_at_5_10_20_40_ms_and_success_resets_the_backoff()
-> anyhow::Result<()> {
    let env = Env::start().await?;
    env.create("flaky", "a").await?;
    let calls = Calls::default();
    let c = calls.clone();
    let controller = Controller::for_::<ConfigMap>(&env.informers).build(reconciler_fn(
        move |request: Request<ConfigMap>| {
            let c = c.clone();
            async move {
                // Calls 1-4 fail, 5 succeeds; after the change, 6 fails and 7 succeeds.
                match c.record(&request) {
                    1..=4 | 6 => Err(ReconcileError::Retry(Failed("not yet"))),
                    _ => Ok(Action::done()),
                }
            }
        },
    ));
    let task = env.run(controller).await;
    calls.wait_for_count("flaky", 5).await?;
    let at: Vec<Instant> = calls.of("flaky").iter().map(|c| c.at).collect();
    let gaps: Vec<Duration> = at.windows(2).map(|w| w[1] - w[0]).collect();
    for (gap, want) in gaps.iter().zip([5, 10, 20, 40]) {
        assert!(
            *gap >= ms(want) && *gap <= ms(want + 1),
            "retry gaps {gaps:?} should be 5, 10, 20, 40 ms"
        );
    }

    env.set("flaky", "b").await?;
    calls.wait_for_count("flaky", 7).await?;
    let seen = calls.of("flaky");
    let gap = seen[6].at - seen[5].at;
    assert!(
        gap >= ms(5) && gap <= ms(6),
        "success reset the backoff: {gap:?}"
    );
    assert_eq!(seen[6].value.as_deref(), Some("b"));
    env.shutdown.cancel();
    task.await??;
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn a_key_out_of_retries_is_quarantined_until_its_object_changes() -> anyhow::Result<()> {
    let env = Env::start().await?;
    env.create("broken", "bad").await?;
    let calls = Calls::default();
    let c = calls.clone();
    let metrics = Metrics::new();
    let mut registry = prometheus_client::registry::Registry::default();
    metrics.register(&mut registry);
    let controller = Controller::for_::<ConfigMap>(&env.informers)
        .max_retries(2)
        .metrics(metrics)
        .build(reconciler_fn(move |request: Request<ConfigMap>| {
            let c = c.clone();
            async move {
                c.record(&request);
                let value = request
                    .object()
                    .and_then(|cm| cm.data.clone()?.get("v").cloned());
                match value.as_deref() {
                    Some("bad") => Err(ReconcileError::Retry(Failed("bad value"))),
                    _ => Ok(Action::done()),
                }
            }
        }));
    let task = env.run(controller).await;

    calls.wait_for_count("broken", 3).await?;
    tokio::time::sleep(Duration::from_secs(3600)).await;
    assert_eq!(
        calls.count("broken"),
        3,
        "the first try and two retries, then quarantine"
    );

    let events: Api<Event> = Api::namespaced(env.client.clone(), "default");
    let warnings = wait_for(Duration::from_secs(10), || async {
        let list = events.list(&ListParams::default()).await.ok()?;
        let found: Vec<Event> = list
            .items
            .into_iter()
            .filter(|e| e.reason.as_deref() == Some(controller::REASON_QUARANTINED))
            .collect();
        (!found.is_empty()).then_some(found)
    })
    .await?;
    assert_eq!(warnings.len(), 1);
    assert_eq!(warnings[0].type_.as_deref(), Some("Warning"));
    assert_eq!(warnings[0].involved_object.name.as_deref(), Some("broken"));
    assert_eq!(
        warnings[0].involved_object.kind.as_deref(),
        Some("ConfigMap")
    );
    let text = encode(&registry);
    assert!(
        text.contains("kore_controller_quarantined_total{controller=\"configmap\"} 1"),
        "{text}"
    );

    env.set("broken", "fixed").await?;
    calls.wait_for_count("broken", 4).await?;
    tokio::time::sleep(Duration::from_secs(60)).await;
    let seen = calls.of("broken");
    assert_eq!(
        seen.len(),
        4,
        "the change released the key, and it then succeeded"
    );
    assert_eq!(seen[3].value.as_deref(), Some("fixed"));
    env.shutdown.cancel();
    task.await??;
    Ok(())
}

/// Issue 10, item 5: the quarantine Warning goes through the runtime's event recorder, so a
/// key quarantined again soon after counts on one Event's series (it used to hand-build a new
/// core Event every time).
#[tokio::test(start_paused = true)]
async fn a_key_quarantined_twice_leaves_one_event_counting_both() -> anyhow::Result<()> {
    use k8s_openapi::api::events::v1::Event as NewEvent;
    let env = Env::start().await?;
    env.create("flaky", "bad").await?;
    let calls = Calls::default();
    let c = calls.clone();
    let controller = Controller::for_::<ConfigMap>(&env.informers)
        .max_retries(1)
        .build(reconciler_fn(move |request: Request<ConfigMap>| {
            let c = c.clone();
            async move {
                c.record(&request);
                let value = request
                    .object()
                    .and_then(|cm| cm.data.clone()?.get("v").cloned());
                match value.as_deref() {
                    Some(v) if v.starts_with("bad") => {
                        Err(ReconcileError::Retry(Failed("bad value")))
                    }
                    _ => Ok(Action::done()),
                }
            }
        }));
    let task = env.run(controller).await;
    let events: Api<NewEvent> = Api::namespaced(env.client.clone(), "default");
    let quarantines = || async {
        let list = events.list(&ListParams::default()).await.ok()?;
        let found: Vec<NewEvent> = list
            .items
            .into_iter()
            .filter(|e| e.reason.as_deref() == Some(controller::REASON_QUARANTINED))
            .collect();
        Some(found)
    };

    calls.wait_for_count("flaky", 2).await?;
    wait_for(Duration::from_secs(10), || async {
        quarantines().await.filter(|f| !f.is_empty())
    })
    .await?;
    // A change releases the key; it fails its retries again and is quarantined again.
    env.set("flaky", "bad-again").await?;
    calls.wait_for_count("flaky", 4).await?;
    let counted = wait_for(Duration::from_secs(10), || async {
        quarantines().await.filter(|f| {
            f.iter()
                .any(|e| e.series.as_ref().is_some_and(|s| s.count == 2))
        })
    })
    .await?;
    assert_eq!(
        counted.len(),
        1,
        "one Event for both quarantines: {counted:?}"
    );
    let event = &counted[0];
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    assert_eq!(event.action.as_deref(), Some(controller::ACTION_RECONCILE));
    assert_eq!(event.reporting_controller.as_deref(), Some("configmap"));
    let regarding = event.regarding.as_ref().expect("regarding");
    assert_eq!(regarding.name.as_deref(), Some("flaky"));
    assert_eq!(regarding.kind.as_deref(), Some("ConfigMap"));
    env.shutdown.cancel();
    task.await??;
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn the_reconciler_is_told_when_its_object_is_gone() -> anyhow::Result<()> {
    let env = Env::start().await?;
    env.create("doomed", "x").await?;
    let calls = Calls::default();
    let c = calls.clone();
    let controller = Controller::for_::<ConfigMap>(&env.informers).build(reconciler_fn(
        move |request: Request<ConfigMap>| {
            let c = c.clone();
            async move {
                c.record(&request);
                Outcome::Ok(Action::done())
            }
        },
    ));
    let task = env.run(controller).await;
    calls.wait_for_count("doomed", 1).await?;
    assert!(!calls.of("doomed")[0].gone);
    env.cms.delete("doomed", &Default::default()).await?;
    calls.wait_for_count("doomed", 2).await?;
    let gone = &calls.of("doomed")[1];
    assert!(gone.gone, "the deletion is reported as gone");
    assert!(gone.last_state, "with the final state the watch delivered");
    assert_eq!(gone.value, None, "a gone object cannot be read");
    env.shutdown.cancel();
    task.await??;
    Ok(())
}

fn owner_ref(owner: &ConfigMap, controller: bool) -> OwnerReference {
    OwnerReference {
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
        name: owner.metadata.name.clone().expect("named"),
        uid: owner
            .metadata
            .uid
            .clone()
            .expect("created objects have a uid"),
        controller: Some(controller),
        block_owner_deletion: None,
    }
}

fn secret(name: &str, owners: Vec<OwnerReference>, value: &str) -> Secret {
    Secret {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("default".into()),
            owner_references: Some(owners),
            ..ObjectMeta::default()
        },
        string_data: Some(BTreeMap::from([("v".to_owned(), value.to_owned())])),
        ..Secret::default()
    }
}

#[tokio::test(start_paused = true)]
async fn a_change_of_an_owned_object_reconciles_its_controller_owner() -> anyhow::Result<()> {
    let env = Env::start().await?;
    let owner = env.create("owner", "x").await?;
    let bystander = env.create("bystander", "x").await?;
    let calls = Calls::default();
    let c = calls.clone();
    let controller = Controller::for_::<ConfigMap>(&env.informers)
        .owns::<Secret>()
        .build(reconciler_fn(move |request: Request<ConfigMap>| {
            let c = c.clone();
            async move {
                c.record(&request);
                Outcome::Ok(Action::done())
            }
        }));
    let task = env.run(controller).await;
    calls.wait_for_count("owner", 1).await?;
    calls.wait_for_count("bystander", 1).await?;

    let secrets: Api<Secret> = Api::namespaced(env.client.clone(), "default");
    let refs = vec![owner_ref(&bystander, false), owner_ref(&owner, true)];
    secrets
        .create(&PostParams::default(), &secret("child", refs, "1"))
        .await?;
    calls.wait_for_count("owner", 2).await?;
    let patch = json!({ "stringData": { "v": "2" } });
    secrets
        .patch("child", &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    calls.wait_for_count("owner", 3).await?;
    secrets.delete("child", &Default::default()).await?;
    calls.wait_for_count("owner", 4).await?;
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(
        calls.count("owner"),
        4,
        "create, update and delete of the child"
    );
    assert_eq!(
        calls.count("bystander"),
        1,
        "an owner that is not the controller is not reconciled"
    );
    env.shutdown.cancel();
    task.await??;
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn watches_maps_other_kinds_through_an_index_of_the_primary_cache() -> anyhow::Result<()> {
    let env = Env::start().await?;
    let mut uses = config_map("user", "x");
    uses.data
        .get_or_insert_default()
        .insert("secret".into(), "creds".into());
    env.cms.create(&PostParams::default(), &uses).await?;
    env.create("other", "x").await?;
    let calls = Calls::default();
    let c = calls.clone();
    let builder = Controller::for_::<ConfigMap>(&env.informers);
    builder.informer().add_index("by-secret", |cm: &ConfigMap| {
        cm.data
            .as_ref()
            .and_then(|d| d.get("secret").cloned())
            .into_iter()
            .collect()
    });
    let store = builder.store();
    let controller = builder
        .watches::<Secret>(move |s: &Secret| {
            let name = s.metadata.name.as_deref().unwrap_or_default();
            store
                .by_index("by-secret", name)
                .iter()
                .map(|cm| ObjectKey::of(&**cm))
                .collect()
        })
        .build(reconciler_fn(move |request: Request<ConfigMap>| {
            let c = c.clone();
            async move {
                c.record(&request);
                Outcome::Ok(Action::done())
            }
        }));
    let task = env.run(controller).await;
    calls.wait_for_count("user", 1).await?;
    calls.wait_for_count("other", 1).await?;
    let secrets: Api<Secret> = Api::namespaced(env.client.clone(), "default");
    secrets
        .create(&PostParams::default(), &secret("creds", Vec::new(), "1"))
        .await?;
    calls.wait_for_count("user", 2).await?;
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(calls.count("user"), 2);
    assert_eq!(
        calls.count("other"),
        1,
        "only the indexed user of the secret"
    );
    env.shutdown.cancel();
    task.await??;
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn predicates_filter_the_primary_kinds_updates() -> anyhow::Result<()> {
    let env = Env::start().await?;
    env.create("filtered", "0").await?;
    let calls = Calls::default();
    let c = calls.clone();
    let controller = Controller::for_::<ConfigMap>(&env.informers)
        .with_predicate(predicate::labels_changed().or(predicate::annotations_changed()))
        .build(reconciler_fn(move |request: Request<ConfigMap>| {
            let c = c.clone();
            async move {
                c.record(&request);
                Outcome::Ok(Action::done())
            }
        }));
    let task = env.run(controller).await;
    calls.wait_for_count("filtered", 1).await?;
    env.set("filtered", "1").await?;
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(
        calls.count("filtered"),
        1,
        "a data change passes no predicate"
    );
    let patch = json!({ "metadata": { "labels": { "tier": "web" } } });
    env.cms
        .patch("filtered", &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    calls.wait_for_count("filtered", 2).await?;
    env.shutdown.cancel();
    task.await??;
    Ok(())
}

/// Runs 12 slow reconciles and returns the most that ran at once.
async fn peak_concurrency(workers: Option<usize>) -> anyhow::Result<usize> {
    let env = Env::start().await?;
    for i in 0..12 {
        env.create(&format!("cm-{i}"), "x").await?;
    }
    let running = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let finished = Arc::new(AtomicUsize::new(0));
    let (r, p, f) = (running.clone(), peak.clone(), finished.clone());
    let mut builder = Controller::for_::<ConfigMap>(&env.informers);
    if let Some(n) = workers {
        builder = builder.max_concurrent_reconciles(n);
    }
    let controller = builder.build(reconciler_fn(move |_request: Request<ConfigMap>| {
        let (r, p, f) = (r.clone(), p.clone(), f.clone());
        async move {
            let now = r.fetch_add(1, Ordering::SeqCst) + 1;
            p.fetch_max(now, Ordering::SeqCst);
            tokio::time::sleep(ms(100)).await;
            r.fetch_sub(1, Ordering::SeqCst);
            f.fetch_add(1, Ordering::SeqCst);
            Outcome::Ok(Action::done())
        }
    }));
    let task = env.run(controller).await;
    wait_for(Duration::from_secs(60), || async {
        (finished.load(Ordering::SeqCst) >= 12).then_some(())
    })
    .await?;
    env.shutdown.cancel();
    task.await??;
    Ok(peak.load(Ordering::SeqCst))
}

#[tokio::test(start_paused = true)]
async fn max_concurrent_reconciles_bounds_parallel_work_and_defaults_to_a_small_number()
-> anyhow::Result<()> {
    assert_eq!(peak_concurrency(Some(3)).await?, 3);
    assert_eq!(
        peak_concurrency(None).await?,
        controller::DEFAULT_MAX_CONCURRENT_RECONCILES
    );
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn shutdown_lets_the_reconcile_in_flight_finish() -> anyhow::Result<()> {
    let env = Env::start().await?;
    env.create("slow", "x").await?;
    let started = Arc::new(AtomicBool::new(false));
    let finished = Arc::new(AtomicBool::new(false));
    let (s, f) = (started.clone(), finished.clone());
    let controller = Controller::for_::<ConfigMap>(&env.informers).build(reconciler_fn(
        move |_request: Request<ConfigMap>| {
            let (s, f) = (s.clone(), f.clone());
            async move {
                s.store(true, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_secs(5)).await;
                f.store(true, Ordering::SeqCst);
                Outcome::Ok(Action::done())
            }
        },
    ));
    // Run through the Runnable trait, as the manager does.
    let runnable: Box<dyn Runnable> = Box::new(controller);
    assert_eq!(runnable.name(), "configmap");
    env.informers.start(env.shutdown.clone());
    let task = tokio::spawn(runnable.run(env.shutdown.clone()));
    wait_for(Duration::from_secs(10), || async {
        started.load(Ordering::SeqCst).then_some(())
    })
    .await?;
    env.shutdown.cancel();
    task.await?.map_err(|e| anyhow::anyhow!(e))?;
    assert!(
        finished.load(Ordering::SeqCst),
        "run returned only after the reconcile ended"
    );
    Ok(())
}

fn encode(registry: &prometheus_client::registry::Registry) -> String {
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, registry).expect("encode to a string");
    text
}

#[tokio::test(start_paused = true)]
async fn metrics_count_a_scripted_run_under_controller_runtime_names() -> anyhow::Result<()> {
    let env = Env::start().await?;
    for name in ["ok", "flaky", "periodic", "invalid"] {
        env.create(name, "x").await?;
    }
    let metrics = Metrics::new();
    let mut registry = prometheus_client::registry::Registry::default();
    metrics.register(&mut registry);
    let calls = Calls::default();
    let c = calls.clone();
    let controller = Controller::for_::<ConfigMap>(&env.informers)
        .named("scripted")
        .max_concurrent_reconciles(3)
        .metrics(metrics)
        .build(reconciler_fn(move |request: Request<ConfigMap>| {
            let c = c.clone();
            async move {
                let n = c.record(&request);
                match (request.key().name(), n) {
                    ("flaky", 1 | 2) => Err(ReconcileError::Retry(Failed("flaky"))),
                    ("periodic", 1) => Ok(Action::requeue_after(Duration::from_secs(30))),
                    ("invalid", _) => Err(ReconcileError::Terminal(Failed("invalid spec"))),
                    _ => Ok(Action::done()),
                }
            }
        }));
    let task = env.run(controller).await;
    calls.wait_for_count("flaky", 3).await?;
    calls.wait_for_count("periodic", 2).await?;
    tokio::time::sleep(Duration::from_secs(120)).await;
    assert_eq!(calls.count("ok"), 1);
    assert_eq!(calls.count("invalid"), 1, "terminal errors are not retried");
    assert_eq!(
        calls.count("periodic"),
        2,
        "requeue_after ran once more, then done"
    );
    // Calls: ok 1 (success), flaky 3 (error, error, success), periodic 2 (requeue_after,
    // success), invalid 1 (terminal error): 7 reconciles.
    let text = encode(&registry);
    for line in [
        "controller_runtime_reconcile_total{controller=\"scripted\",result=\"success\"} 3",
        "controller_runtime_reconcile_total{controller=\"scripted\",result=\"error\"} 3",
        "controller_runtime_reconcile_total{controller=\"scripted\",result=\"requeue_after\"} 1",
        "controller_runtime_reconcile_total{controller=\"scripted\",result=\"requeue\"} 0",
        "controller_runtime_reconcile_errors_total{controller=\"scripted\"} 3",
        "controller_runtime_terminal_reconcile_errors_total{controller=\"scripted\"} 1",
        "controller_runtime_reconcile_time_seconds_count{controller=\"scripted\"} 7",
        "controller_runtime_max_concurrent_reconciles{controller=\"scripted\"} 3",
        "controller_runtime_active_workers{controller=\"scripted\"} 0",
        "workqueue_depth{name=\"scripted\"} 0",
        // 4 initial adds, 2 retries of flaky and 1 requeue of periodic.
        "workqueue_adds_total{name=\"scripted\"} 7",
        "workqueue_queue_duration_seconds_count{name=\"scripted\"} 7",
        "workqueue_work_duration_seconds_count{name=\"scripted\"} 7",
        "workqueue_retries_total{name=\"scripted\"} 2",
    ] {
        assert!(text.contains(line), "missing {line:?} in\n{text}");
    }
    env.shutdown.cancel();
    task.await??;
    Ok(())
}
