//! The manager against a real in-process API server: leader election between two managers,
//! graceful shutdown, and the metrics and health server.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use kore_runtime::manager::{self, LeaseConfig, Manager, runnable_fn};
use kube::api::{Api, PostParams};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::watch;
use tokio::time::Instant;

const LEASE: Duration = Duration::from_secs(15);
const RETRY: Duration = Duration::from_secs(2);

/// A manager whose one leader-only runnable publishes whether it runs.
fn candidate(client: kube::Client, id: &str) -> (Manager, watch::Receiver<bool>) {
    let (tx, rx) = watch::channel(false);
    let job = runnable_fn("leader-work", move |shutdown| async move {
        tx.send_replace(true);
        shutdown.cancelled().await;
        tx.send_replace(false);
        Ok(())
    });
    let mgr = Manager::builder(client)
        .handle_signals(false)
        .leader_election(LeaseConfig::new("default", "kore-test").identity(id))
        .add(Box::new(job))
        .build();
    (mgr, rx)
}

async fn wait_for(rx: &mut watch::Receiver<bool>, value: bool) {
    rx.wait_for(|v| *v == value)
        .await
        .expect("the runnable's sender lives");
}

async fn holder(client: &kube::Client) -> Option<String> {
    let leases: Api<Lease> = Api::namespaced(client.clone(), "default");
    leases
        .get("kore-test")
        .await
        .expect("the lease exists")
        .spec
        .and_then(|s| s.holder_identity)
}

#[tokio::test(start_paused = true)]
async fn only_the_leader_runs_leader_only_work_and_a_killed_leader_is_replaced_within_the_lease()
-> anyhow::Result<()> {
    let env = kore_testenv::TestEnv::builder()
        .without_root_ca()
        .start()
        .await?;
    let (a, mut a_runs) = candidate(env.client(), "a");
    let a_task = tokio::spawn(a.run());
    wait_for(&mut a_runs, true).await;
    assert_eq!(holder(&env.client()).await.as_deref(), Some("a"));

    let (b, mut b_runs) = candidate(env.client(), "b");
    let b_stop = b.shutdown_handle();
    let b_task = tokio::spawn(b.run());
    // b keeps trying for several retry periods but never runs leader work while a renews.
    tokio::time::sleep(LEASE * 2).await;
    assert!(*a_runs.borrow());
    assert!(!*b_runs.borrow());

    // Kill a without releasing: its tasks go away with its future.
    a_task.abort();
    let killed = Instant::now();
    wait_for(&mut b_runs, true).await;
    let handover = killed.elapsed();
    assert!(
        handover <= LEASE + RETRY.mul_f64(1.2) + RETRY,
        "handover took {handover:?}"
    );
    assert!(
        handover >= LEASE - RETRY,
        "b took over a live lease after {handover:?}"
    );
    assert_eq!(holder(&env.client()).await.as_deref(), Some("b"));

    b_stop.shutdown();
    b_task.await??;
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn a_graceful_stop_releases_the_lease_so_the_standby_takes_over_at_once() -> anyhow::Result<()>
{
    let env = kore_testenv::TestEnv::builder()
        .without_root_ca()
        .start()
        .await?;
    let (a, mut a_runs) = candidate(env.client(), "a");
    let a_stop = a.shutdown_handle();
    let a_task = tokio::spawn(a.run());
    wait_for(&mut a_runs, true).await;
    let (b, mut b_runs) = candidate(env.client(), "b");
    let b_stop = b.shutdown_handle();
    let b_task = tokio::spawn(b.run());
    tokio::time::sleep(RETRY * 3).await;
    assert!(!*b_runs.borrow());

    a_stop.shutdown();
    let stopped = Instant::now();
    a_task.await??;
    assert!(
        !*a_runs.borrow(),
        "a's leader work stopped before it returned"
    );
    assert_eq!(holder(&env.client()).await, None, "a released the lease");
    wait_for(&mut b_runs, true).await;
    let handover = stopped.elapsed();
    assert!(handover <= RETRY.mul_f64(1.2), "handover took {handover:?}");
    assert_eq!(holder(&env.client()).await.as_deref(), Some("b"));

    b_stop.shutdown();
    b_task.await??;
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn losing_the_lease_stops_leader_work_at_once_and_ends_the_manager_with_an_error()
-> anyhow::Result<()> {
    let env = kore_testenv::TestEnv::builder()
        .without_root_ca()
        .start()
        .await?;
    let (a, mut a_runs) = candidate(env.client(), "a");
    let mut leadership = a.leadership().expect("leader election is on");
    let a_task = tokio::spawn(a.run());
    wait_for(&mut a_runs, true).await;
    assert_eq!(
        *leadership.borrow_and_update(),
        manager::Leadership::Leading
    );

    // Another process overwrites the Lease (as after a partition healed).
    let leases: Api<Lease> = Api::namespaced(env.client(), "default");
    let mut lease = leases.get("kore-test").await?;
    if let Some(spec) = lease.spec.as_mut() {
        spec.holder_identity = Some("intruder".into());
    }
    leases
        .replace("kore-test", &PostParams::default(), &lease)
        .await?;

    let result = tokio::time::timeout(RETRY * 2, a_task).await??;
    assert!(
        matches!(
            result,
            Err(manager::Error::LeaderElection(
                manager::leader::Error::Lost { .. }
            ))
        ),
        "{result:?}"
    );
    assert!(
        a_runs.has_changed().is_err(),
        "leader work was stopped (its future dropped)"
    );
    assert_eq!(*leadership.borrow(), manager::Leadership::Lost);
    assert_eq!(holder(&env.client()).await.as_deref(), Some("intruder"));
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn shutdown_lets_work_in_flight_finish_and_starts_nothing_new() -> anyhow::Result<()> {
    let env = kore_testenv::TestEnv::builder()
        .without_root_ca()
        .start()
        .await?;
    let started = Arc::new(AtomicUsize::new(0));
    let finished = Arc::new(AtomicUsize::new(0));
    let (s, f) = (Arc::clone(&started), Arc::clone(&finished));
    let worker = runnable_fn("worker", move |shutdown| async move {
        while !shutdown.is_cancelled() {
            s.fetch_add(1, Ordering::SeqCst);
            // Work that ignores cancellation once begun.
            tokio::time::sleep(Duration::from_secs(5)).await;
            f.fetch_add(1, Ordering::SeqCst);
        }
        Ok(())
    });
    let mgr = Manager::builder(env.client())
        .handle_signals(false)
        .add(Box::new(worker))
        .build();
    let stop = mgr.shutdown_handle();
    let task = tokio::spawn(mgr.run());
    tokio::time::sleep(Duration::from_secs(7)).await; // the second job is in flight
    stop.shutdown();
    task.await??;
    assert_eq!(started.load(Ordering::SeqCst), 2);
    assert_eq!(finished.load(Ordering::SeqCst), 2);
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn a_second_shutdown_request_aborts_the_graceful_shutdown() -> anyhow::Result<()> {
    let env = kore_testenv::TestEnv::builder()
        .without_root_ca()
        .start()
        .await?;
    let finished = Arc::new(AtomicUsize::new(0));
    let f = Arc::clone(&finished);
    let worker = runnable_fn("slow", move |_shutdown| async move {
        tokio::time::sleep(Duration::from_secs(20)).await;
        f.fetch_add(1, Ordering::SeqCst);
        Ok(())
    })
    .without_leader_election();
    let mgr = Manager::builder(env.client())
        .handle_signals(false)
        .add(Box::new(worker))
        .build();
    let stop = mgr.shutdown_handle();
    let task = tokio::spawn(mgr.run());
    tokio::time::sleep(Duration::from_secs(1)).await;
    stop.shutdown();
    tokio::time::sleep(Duration::from_secs(1)).await;
    stop.shutdown();
    let result = tokio::time::timeout(Duration::from_secs(1), task).await??;
    assert!(matches!(result, Err(manager::Error::Aborted)), "{result:?}");
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert_eq!(
        finished.load(Ordering::SeqCst),
        0,
        "the aborted work never finished"
    );
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn work_that_outlives_the_grace_period_is_aborted_with_an_error() -> anyhow::Result<()> {
    let env = kore_testenv::TestEnv::builder()
        .without_root_ca()
        .start()
        .await?;
    let worker = runnable_fn("stuck", |_shutdown| async move {
        futures::future::pending::<()>().await;
        Ok(())
    });
    let mgr = Manager::builder(env.client())
        .handle_signals(false)
        .graceful_shutdown_timeout(Duration::from_secs(3))
        .add(Box::new(worker))
        .build();
    let stop = mgr.shutdown_handle();
    let task = tokio::spawn(mgr.run());
    tokio::time::sleep(Duration::from_secs(1)).await;
    stop.shutdown();
    let stopped = Instant::now();
    let result = task.await?;
    assert_eq!(stopped.elapsed(), Duration::from_secs(3));
    match result {
        Err(manager::Error::GracePeriodExceeded { pending }) => {
            assert_eq!(pending[0], "runnables without leader election");
        }
        other => panic!("expected a grace period error, got {other:?}"),
    }
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn a_failing_runnable_stops_the_others_and_is_reported() -> anyhow::Result<()> {
    let env = kore_testenv::TestEnv::builder()
        .without_root_ca()
        .start()
        .await?;
    let (tx, mut stopped) = watch::channel(false);
    let healthy = runnable_fn("healthy", move |shutdown| async move {
        shutdown.cancelled().await;
        tx.send_replace(true);
        Ok(())
    });
    let failing = runnable_fn("failing", |_shutdown| async move {
        tokio::time::sleep(Duration::from_secs(1)).await;
        Err("the disk is on fire".into())
    });
    let mgr = Manager::builder(env.client())
        .handle_signals(false)
        .add(Box::new(healthy))
        .add(Box::new(failing))
        .build();
    let result = mgr.run().await;
    match result {
        Err(manager::Error::RunnableFailed { name, source }) => {
            assert_eq!(name, "failing");
            assert_eq!(source.to_string(), "the disk is on fire");
        }
        other => panic!("expected a runnable failure, got {other:?}"),
    }
    assert!(
        *stopped.borrow_and_update(),
        "the healthy runnable was stopped"
    );
    Ok(())
}

/// A minimal HTTP/1.1 GET: (status code, body).
async fn get(addr: std::net::SocketAddr, path: &str) -> anyhow::Result<(u16, String)> {
    let mut stream = tokio::net::TcpStream::connect(addr).await?;
    let req = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    stream.write_all(req.as_bytes()).await?;
    let mut raw = String::new();
    stream.read_to_string(&mut raw).await?;
    let status = raw
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| anyhow::anyhow!("no status line in {raw:?}"))?;
    let body = raw
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    Ok((status, body))
}

fn listener() -> anyhow::Result<(std::net::TcpListener, std::net::SocketAddr)> {
    let l = std::net::TcpListener::bind("127.0.0.1:0")?;
    let addr = l.local_addr()?;
    Ok((l, addr))
}

#[tokio::test]
async fn readyz_turns_ready_once_every_readiness_handle_is_dropped_and_never_goes_back()
-> anyhow::Result<()> {
    let env = kore_testenv::TestEnv::builder()
        .without_root_ca()
        .start()
        .await?;
    let (l, addr) = listener()?;
    let (release_tx, release_rx) = tokio::sync::oneshot::channel::<()>();
    let mut mgr = Manager::builder(env.client())
        .handle_signals(false)
        .health_probe_listener(l)
        .build();
    let handle = mgr.health().readiness().handle();
    let flaky = Arc::new(AtomicUsize::new(0));
    let f = Arc::clone(&flaky);
    mgr.health().add_readyz_check("flaky", move || {
        if f.load(Ordering::SeqCst) == 0 {
            Ok(())
        } else {
            Err("down".into())
        }
    });
    mgr.add(Box::new(
        runnable_fn("initializer", move |shutdown| async move {
            let _ = release_rx.await;
            drop(handle);
            shutdown.cancelled().await;
            Ok(())
        })
        .without_leader_election(),
    ));
    let health = mgr.health().clone();
    let stop = mgr.shutdown_handle();
    let task = tokio::spawn(mgr.run());

    let (code, body) = get(addr, "/readyz?verbose").await?;
    assert_eq!(code, 500);
    assert!(body.contains("[-]initialized failed"), "{body}");
    assert!(body.contains("[+]flaky ok"), "{body}");
    assert_eq!(get(addr, "/readyz/initialized").await?.0, 500);

    release_tx
        .send(())
        .map_err(|()| anyhow::anyhow!("initializer gone"))?;
    health.readiness().ready().await;
    let (code, body) = get(addr, "/readyz").await?;
    assert_eq!((code, body.as_str()), (200, "ok"));

    flaky.store(1, Ordering::SeqCst);
    assert_eq!(
        get(addr, "/readyz").await?.0,
        200,
        "readiness never goes back"
    );

    stop.shutdown();
    task.await??;
    Ok(())
}

#[tokio::test]
async fn healthz_runs_its_named_checks_on_every_request() -> anyhow::Result<()> {
    let env = kore_testenv::TestEnv::builder()
        .without_root_ca()
        .start()
        .await?;
    let (l, addr) = listener()?;
    let mgr = Manager::builder(env.client())
        .handle_signals(false)
        .health_probe_listener(l)
        .build();
    let broken = Arc::new(AtomicUsize::new(0));
    let b = Arc::clone(&broken);
    mgr.health().add_healthz_check("watchdog", move || {
        if b.load(Ordering::SeqCst) == 0 {
            Ok(())
        } else {
            Err("stalled".into())
        }
    });
    let stop = mgr.shutdown_handle();
    let task = tokio::spawn(mgr.run());

    // The server may take a moment to accept.
    let mut first = get(addr, "/healthz").await;
    for _ in 0..50 {
        if first.is_ok() {
            break;
        }
        tokio::task::yield_now().await;
        first = get(addr, "/healthz").await;
    }
    assert_eq!(first?, (200, "ok".to_string()));
    let (code, body) = get(addr, "/healthz?verbose").await?;
    assert_eq!(code, 200);
    assert!(
        body.contains("[+]ping ok") && body.contains("[+]watchdog ok"),
        "{body}"
    );

    broken.store(1, Ordering::SeqCst);
    let (code, body) = get(addr, "/healthz").await?;
    assert_eq!(code, 500);
    assert!(body.contains("[-]watchdog failed: stalled"), "{body}");
    assert_eq!(get(addr, "/healthz/ping").await?.0, 200);
    assert_eq!(get(addr, "/healthz/watchdog").await?.0, 500);
    assert_eq!(get(addr, "/healthz/nope").await?.0, 404);

    stop.shutdown();
    task.await??;
    Ok(())
}

#[tokio::test]
async fn metrics_serves_the_registry_with_the_leader_election_status() -> anyhow::Result<()> {
    use prometheus_client::metrics::counter::Counter;

    let env = kore_testenv::TestEnv::builder()
        .without_root_ca()
        .start()
        .await?;
    let (l, addr) = listener()?;
    let (tx, mut leading) = watch::channel(false);
    let mut mgr = Manager::builder(env.client())
        .handle_signals(false)
        .metrics_listener(l)
        .leader_election(
            LeaseConfig::new("default", "metrics-lease")
                .lease_duration(Duration::from_secs(3))
                .renew_deadline(Duration::from_secs(2))
                .retry_period(Duration::from_millis(500)),
        )
        .add(Box::new(runnable_fn(
            "leader",
            move |shutdown| async move {
                tx.send_replace(true);
                shutdown.cancelled().await;
                Ok(())
            },
        )))
        .build();
    let reconciles = Counter::<u64>::default();
    mgr.registry_mut().register(
        "test_reconciles",
        "Reconciles in this test",
        reconciles.clone(),
    );
    reconciles.inc_by(3);
    let stop = mgr.shutdown_handle();
    let task = tokio::spawn(mgr.run());
    leading.wait_for(|l| *l).await?;

    let (code, body) = get(addr, "/metrics").await?;
    assert_eq!(code, 200);
    assert!(body.contains("test_reconciles_total 3"), "{body}");
    assert!(
        body.contains("leader_election_master_status{name=\"metrics-lease\"} 1"),
        "{body}"
    );
    assert!(body.trim_end().ends_with("# EOF"), "{body}");

    stop.shutdown();
    task.await??;
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn readiness_and_runnables_wait_until_the_caches_synced() -> anyhow::Result<()> {
    use k8s_openapi::api::core::v1::ConfigMap;
    use kore_runtime::InformerConfig;

    let (env, _cms) = with_two_configmaps("").await?;
    let mut mgr = Manager::builder(env.client()).handle_signals(false).build();
    let store = mgr
        .informers()
        .get::<ConfigMap>(InformerConfig::default().namespace("default"))
        .store();
    let health = mgr.health().clone();
    assert!(
        !health.readyz().is_ok(),
        "not ready before the manager runs"
    );
    let (tx, seen) = tokio::sync::oneshot::channel();
    let seen_by_runnable = store.clone();
    mgr.add(Box::new(runnable_fn(
        "reader",
        move |shutdown| async move {
            let _ = tx.send(seen_by_runnable.len());
            shutdown.cancelled().await;
            Ok(())
        },
    )));
    let stop = mgr.shutdown_handle();
    let task = tokio::spawn(mgr.run());

    assert_eq!(seen.await?, 2, "the runnable started on a synced cache");
    health.readiness().ready().await;
    assert!(store.is_synced());
    assert!(health.readyz().is_ok());
    stop.shutdown();
    task.await??;
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn readyz_stays_unready_while_a_cache_cannot_sync() -> anyhow::Result<()> {
    use k8s_openapi::api::core::v1::ConfigMap;
    use kore_runtime::InformerConfig;

    let env = kore_testenv::TestEnv::builder()
        .without_root_ca()
        .start()
        .await?;
    let mgr = Manager::builder(env.client()).handle_signals(false).build();
    // The server rejects this selector, so the informer's list fails and it keeps retrying.
    let store = mgr
        .informers()
        .get::<ConfigMap>(InformerConfig::default().label_selector("a in (b"))
        .store();
    let started = Arc::new(AtomicUsize::new(0));
    let s = Arc::clone(&started);
    let mut mgr = mgr;
    mgr.add(Box::new(runnable_fn(
        "never",
        move |_shutdown| async move {
            s.fetch_add(1, Ordering::SeqCst);
            Ok(())
        },
    )));
    let health = mgr.health().clone();
    let stop = mgr.shutdown_handle();
    let task = tokio::spawn(mgr.run());

    tokio::time::sleep(Duration::from_secs(120)).await;
    assert!(!store.is_synced());
    let report = health.readyz();
    assert!(!report.is_ok());
    assert!(
        report
            .render("readyz", true)
            .contains("[-]initialized failed")
    );
    assert_eq!(
        started.load(Ordering::SeqCst),
        0,
        "no runnable starts before the sync"
    );

    stop.shutdown();
    task.await??;
    Ok(())
}

/// Writes the Lease `name` as held by `holder`, renewed now; retried on conflicts.
async fn hold(leases: &Api<Lease>, name: &str, holder: &str) -> anyhow::Result<()> {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
    for _ in 0..5 {
        let mut lease = leases.get(name).await?;
        let spec = lease.spec.get_or_insert_with(Default::default);
        spec.holder_identity = Some(holder.into());
        spec.renew_time = Some(MicroTime(k8s_openapi::jiff::Timestamp::now()));
        match leases.replace(name, &PostParams::default(), &lease).await {
            Ok(_) => return Ok(()),
            Err(kube::Error::Api(e)) if e.code == 409 => continue,
            Err(e) => return Err(e.into()),
        }
    }
    anyhow::bail!("the lease kept changing")
}

/// Issue 11, defect 8: a manager that campaigns again keeps running when another holder takes
/// its Lease; its controller reconciles nothing while it stands by (though its cache keeps
/// following the server), and reconciles again, from a fresh queue filled from the cache, once
/// it holds the Lease again.
#[tokio::test(start_paused = true)]
async fn a_recampaigning_manager_stops_its_controller_while_another_holds_the_lease_and_resumes_after_winning_it_back()
-> anyhow::Result<()> {
    use std::convert::Infallible;

    use k8s_openapi::api::core::v1::ConfigMap;
    use kore_runtime::InformerConfig;
    use kore_runtime::controller::{Action, Controller, ReconcileError, Request, reconciler_fn};
    use kore_runtime::manager::{Leadership, OnLostLeadership};

    let run = async {
        let env = kore_testenv::TestEnv::builder()
            .without_root_ca()
            .start()
            .await?;
        let cms: Api<ConfigMap> = Api::namespaced(env.client(), "default");
        let leases: Api<Lease> = Api::namespaced(env.client(), "default");
        let create = |name: &str| {
            let mut cm = ConfigMap::default();
            cm.metadata.name = Some(name.into());
            let cms = cms.clone();
            async move { cms.create(&PostParams::default(), &cm).await }
        };
        create("before").await?;

        let mut mgr = Manager::builder(env.client())
            .handle_signals(false)
            .leader_election(LeaseConfig::new("default", "recampaign").identity("a"))
            .on_lost_leadership(OnLostLeadership::Recampaign)
            .build();
        let mut leadership = mgr.leadership().expect("leader election is on");
        // Every reconcile records the object and whether the manager led at that moment.
        let (tx, mut reconciled) = tokio::sync::mpsc::unbounded_channel::<(String, Leadership)>();
        let led = leadership.clone();
        let scope = InformerConfig::default().namespace("default");
        let store = mgr.informers().get::<ConfigMap>(scope.clone()).store();
        let controller = Controller::for_with::<ConfigMap>(mgr.informers(), scope)
            .named("recorder")
            .build(reconciler_fn(move |req: Request<ConfigMap>| {
                let record = (req.key().name().to_owned(), led.borrow().clone());
                let _ = tx.send(record);
                async { Ok::<_, ReconcileError<Infallible>>(Action::done()) }
            }));
        mgr.add(Box::new(controller));
        let stop = mgr.shutdown_handle();
        let task = tokio::spawn(mgr.run());

        let mut records = Vec::new();
        let first = next_of(&mut reconciled, "before", &mut records).await;
        assert_eq!(first.1, Leadership::Leading);

        // Another process takes the Lease (a partition healed, a paused leader) and keeps it.
        hold(&leases, "recampaign", "thief").await?;
        leadership
            .wait_for(|l| {
                *l == Leadership::Standby {
                    holder: Some("thief".into()),
                }
            })
            .await?;
        create("during").await?;
        let mut renewals = 0;
        while renewals < 10
            || store
                .get(&kore_runtime::ObjectKey::namespaced("default", "during"))
                .is_none()
        {
            tokio::time::sleep(RETRY).await;
            hold(&leases, "recampaign", "thief").await?;
            renewals += 1;
        }
        assert!(
            !task.is_finished(),
            "the manager keeps running while it stands by"
        );
        assert!(
            matches!(*leadership.borrow(), Leadership::Standby { .. }),
            "the thief's renewals keep the manager standing by"
        );

        // The thief goes away without releasing: the manager waits out the lease and leads.
        let (name, state) = next_of(&mut reconciled, "during", &mut records).await;
        assert_eq!((name.as_str(), state), ("during", Leadership::Leading));
        assert_eq!(
            holder_of(&leases, "recampaign").await?.as_deref(),
            Some("a")
        );
        // The new term started from a fresh queue filled from the cache: "before" again too.
        while records.iter().filter(|(n, _)| n == "before").count() < 2 {
            next_of(&mut reconciled, "before", &mut records).await;
        }
        assert!(
            records
                .iter()
                .all(|(_, state)| *state == Leadership::Leading),
            "reconciled only while leading: {records:?}"
        );

        stop.shutdown();
        task.await??;
        anyhow::Ok(())
    };
    tokio::time::timeout(Duration::from_secs(600), run).await?
}

/// Reads reconcile records into `records` until one names `name`, and returns that one.
async fn next_of<T: Clone>(
    rx: &mut tokio::sync::mpsc::UnboundedReceiver<(String, T)>,
    name: &str,
    records: &mut Vec<(String, T)>,
) -> (String, T) {
    loop {
        let record = rx.recv().await.expect("the controller lives");
        records.push(record.clone());
        if record.0 == name {
            return record;
        }
    }
}

async fn holder_of(leases: &Api<Lease>, name: &str) -> anyhow::Result<Option<String>> {
    Ok(leases.get(name).await?.spec.and_then(|s| s.holder_identity))
}

#[tokio::test(start_paused = true)]
async fn a_manager_that_recampaigns_refuses_leader_only_runnables_that_cannot_run_twice()
-> anyhow::Result<()> {
    use kore_runtime::manager::{OnLostLeadership, restartable_fn};

    let env = kore_testenv::TestEnv::builder()
        .without_root_ca()
        .start()
        .await?;
    let mgr = Manager::builder(env.client())
        .handle_signals(false)
        .leader_election(LeaseConfig::new("default", "refused"))
        .on_lost_leadership(OnLostLeadership::Recampaign)
        .add(Box::new(runnable_fn("once", |_| async { Ok(()) })))
        .add(Box::new(restartable_fn("again", |_| async { Ok(()) })))
        .add(Box::new(
            runnable_fn("everywhere", |_| async { Ok(()) }).without_leader_election(),
        ))
        .build();
    match mgr.run().await {
        Err(manager::Error::NotRestartable { names }) => assert_eq!(names, ["once"]),
        other => panic!("expected a refusal, got {other:?}"),
    }
    let leases: Api<Lease> = Api::namespaced(env.client(), "default");
    assert!(
        leases.get_opt("refused").await?.is_none(),
        "refused before campaigning"
    );
    Ok(())
}

/// One elector, campaigning term after term: the loss is counted in
/// `kore_leader_election_lost_total` and `leader_election_master_status` follows each term.
#[tokio::test(start_paused = true)]
async fn an_elector_campaigns_again_after_a_loss_and_its_metrics_record_the_loss()
-> anyhow::Result<()> {
    use kore_runtime::manager::{LeaderElector, Leadership};
    use prometheus_client::registry::Registry;

    fn metrics(registry: &Registry) -> String {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, registry).expect("encodes");
        text
    }

    let env = kore_testenv::TestEnv::builder()
        .without_root_ca()
        .start()
        .await?;
    let leases: Api<Lease> = Api::namespaced(env.client(), "default");
    let mut registry = Registry::default();
    let mut elector = LeaderElector::new(
        env.client(),
        LeaseConfig::new("default", "terms").identity("a"),
    );
    elector.register_metrics(&mut registry);
    let mut leadership = elector.subscribe();
    let shutdown = tokio_util::sync::CancellationToken::new();
    assert!(metrics(&registry).contains("kore_leader_election_lost_total{name=\"terms\"} 0"));

    let first = tokio::spawn(async move {
        let result = elector.campaign(&shutdown).await;
        (elector, shutdown, result)
    });
    leadership.wait_for(|l| *l == Leadership::Leading).await?;
    assert!(metrics(&registry).contains("leader_election_master_status{name=\"terms\"} 1"));

    hold(&leases, "terms", "thief").await?;
    let (mut elector, shutdown, result) = first.await?;
    assert!(
        matches!(result, Err(manager::leader::Error::Lost { .. })),
        "{result:?}"
    );
    let text = metrics(&registry);
    assert!(
        text.contains("leader_election_master_status{name=\"terms\"} 0"),
        "{text}"
    );
    assert!(
        text.contains("kore_leader_election_lost_total{name=\"terms\"} 1"),
        "{text}"
    );

    // The thief stops renewing; the same elector takes the Lease over after its duration.
    let stopped = Instant::now();
    let second = tokio::spawn({
        let shutdown = shutdown.clone();
        async move { elector.campaign(&shutdown).await }
    });
    leadership.wait_for(|l| *l == Leadership::Leading).await?;
    assert!(stopped.elapsed() >= LEASE - RETRY, "took over a live lease");
    assert_eq!(holder_of(&leases, "terms").await?.as_deref(), Some("a"));
    assert!(metrics(&registry).contains("leader_election_master_status{name=\"terms\"} 1"));

    shutdown.cancel();
    second.await??;
    assert_eq!(
        holder_of(&leases, "terms").await?,
        None,
        "released on shutdown"
    );
    assert!(metrics(&registry).contains("kore_leader_election_lost_total{name=\"terms\"} 1"));
    Ok(())
}

/// Issue 11, defect 8, in process: a manager that did not run for longer than its renew
/// deadline (SIGSTOP, a suspended laptop, a debugger) loses its term even though nobody took
/// the Lease; it stops its leader-only work, campaigns again, wins at once (the Lease still
/// names it), and runs its leader-only work again, all without ending.
#[tokio::test(start_paused = true)]
async fn a_manager_stalled_past_its_renew_deadline_starts_a_new_term_instead_of_exiting()
-> anyhow::Result<()> {
    use kore_runtime::manager::{Leadership, OnLostLeadership, restartable_fn};

    let run = async {
        let env = kore_testenv::TestEnv::builder()
            .without_root_ca()
            .start()
            .await?;
        let leases: Api<Lease> = Api::namespaced(env.client(), "default");
        let (terms_tx, mut terms) = watch::channel(0usize);
        let (running_tx, mut running) = watch::channel(0usize);
        let terms_tx = Arc::new(terms_tx);
        let running_tx = Arc::new(running_tx);
        let work = restartable_fn("term", move |shutdown| {
            let (terms, running) = (Arc::clone(&terms_tx), Arc::clone(&running_tx));
            async move {
                terms.send_modify(|n| *n += 1);
                running.send_modify(|n| *n += 1);
                // Decrements even when the manager aborts the task (the future is dropped).
                let _still = scopeguard(move || running.send_modify(|n| *n -= 1));
                shutdown.cancelled().await;
                Ok(())
            }
        });
        let mgr = Manager::builder(env.client())
            .handle_signals(false)
            .leader_election(LeaseConfig::new("default", "stalled").identity("a"))
            .on_lost_leadership(OnLostLeadership::Recampaign)
            .add(Box::new(work))
            .build();
        let leadership = mgr.leadership().expect("leader election is on");
        let stop = mgr.shutdown_handle();
        let task = tokio::spawn(mgr.run());
        terms.wait_for(|n| *n == 1).await?;

        // Every timer of the process fires late at once, as after SIGCONT.
        tokio::time::advance(Duration::from_secs(12)).await;
        terms.wait_for(|n| *n == 2).await?;
        assert_eq!(
            *running.borrow_and_update(),
            1,
            "the first term's work ended"
        );
        running.wait_for(|n| *n == 1).await?;
        assert_eq!(*leadership.borrow(), Leadership::Leading);
        assert!(!task.is_finished(), "the manager kept running");
        let lease = leases.get("stalled").await?;
        let spec = lease.spec.unwrap_or_default();
        assert_eq!(spec.holder_identity.as_deref(), Some("a"));
        assert_eq!(spec.lease_transitions, Some(0), "nobody else held it");

        stop.shutdown();
        task.await??;
        assert_eq!(*running.borrow(), 0);
        anyhow::Ok(())
    };
    tokio::time::timeout(Duration::from_secs(600), run).await?
}

/// Runs `f` when dropped.
fn scopeguard(f: impl FnOnce()) -> impl Drop {
    struct Guard<F: FnOnce()>(Option<F>);
    impl<F: FnOnce()> Drop for Guard<F> {
        fn drop(&mut self) {
            if let Some(f) = self.0.take() {
                f();
            }
        }
    }
    Guard(Some(f))
}

#[tokio::test]
async fn metrics_serve_each_informers_cache_size_as_it_changes() -> anyhow::Result<()> {
    use k8s_openapi::api::core::v1::ConfigMap;
    use kore_runtime::InformerConfig;

    let (env, cms) = with_two_configmaps(&"v".repeat(100)).await?;
    let (l, addr) = listener()?;
    let mgr = Manager::builder(env.client())
        .handle_signals(false)
        .metrics_listener(l)
        .build();
    let store = mgr
        .informers()
        .get::<ConfigMap>(InformerConfig::default().namespace("default"))
        .store();
    let stop = mgr.shutdown_handle();
    let task = tokio::spawn(mgr.run());
    store.wait_until_synced().await;

    // The gauges of the one informer: (objects, packed bytes).
    let sizes = || async {
        let (code, body) = get(addr, "/metrics").await?;
        anyhow::ensure!(code == 200, "{body}");
        let labels = "{resource=\"configmaps\",namespace=\"default\",label_selector=\"\",field_selector=\"\"}";
        let value = |family: &str| {
            body.lines()
                .find_map(|l| l.strip_prefix(&format!("{family}{labels} ")))
                .and_then(|v| v.parse::<usize>().ok())
        };
        match (
            value("kore_cache_objects"),
            value("kore_cache_packed_bytes"),
        ) {
            (Some(n), Some(bytes)) => Ok((n, bytes)),
            _ => anyhow::bail!("no cache gauges in {body}"),
        }
    };
    let (n, bytes) = sizes().await?;
    assert_eq!((n, bytes), (2, store.packed_bytes()));
    assert!(bytes > 200, "two objects with 100-byte values: {bytes}");

    cms.delete("one", &Default::default()).await?;
    let deadline = Instant::now() + Duration::from_secs(10);
    while store.len() != 1 {
        assert!(
            Instant::now() < deadline,
            "the delete never reached the cache"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let (n, after) = sizes().await?;
    assert_eq!(n, 1);
    assert!(after < bytes && after > 100, "{bytes} → {after}");

    stop.shutdown();
    task.await??;
    Ok(())
}

/// A server holding ConfigMaps `one` and `two` in `default`, each with `k: value` unless
/// `value` is empty.
async fn with_two_configmaps(
    value: &str,
) -> anyhow::Result<(
    kore_testenv::TestEnv,
    Api<k8s_openapi::api::core::v1::ConfigMap>,
)> {
    use k8s_openapi::api::core::v1::ConfigMap;

    let env = kore_testenv::TestEnv::builder()
        .without_root_ca()
        .start()
        .await?;
    let cms: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    for name in ["one", "two"] {
        let mut cm = ConfigMap::default();
        cm.metadata.name = Some(name.into());
        if !value.is_empty() {
            cm.data = Some([("k".to_string(), value.to_string())].into());
        }
        cms.create(&PostParams::default(), &cm).await?;
    }
    Ok((env, cms))
}
