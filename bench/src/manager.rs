//! kore-runtime's manager and helpers (issue 4): how long a manager takes from `run` to
//! ready with a populated cache, how fast the event recorder counts repeats, what the status
//! writer's skip of unchanged writes is worth, and how fast a released Lease changes hands.
//! Everything runs against an in-process kore-apiserver (no sockets), so the numbers are
//! the runtime's own cost plus the server's, not the network's.

use std::time::{Duration, Instant};

use anyhow::Context;
use k8s_openapi::api::apps::v1::{Deployment, DeploymentStatus};
use k8s_openapi::api::core::v1::ConfigMap;
use kore_runtime::InformerConfig;
use kore_runtime::events::{Event, EventType, Recorder, Reporter};
use kore_runtime::manager::{LeaseConfig, Manager, runnable_fn};
use kore_runtime::status::{StatusWrite, StatusWriter};
use kube::Resource;
use kube::api::{Api, PostParams};
use serde_json::json;

use crate::suite::Row;

fn row(measure: String, kore: f64, unit: &str, note: &str) -> Row {
    Row {
        measure,
        kore,
        unit: unit.into(),
        peer: None,
        target: None,
        note: note.into(),
    }
}

/// Runs the manager measurements; `quick` shrinks the sizes for a smoke test.
pub(crate) async fn run(quick: bool) -> anyhow::Result<Vec<Row>> {
    let objects = if quick { 100 } else { 5_000 };
    let repeats = if quick { 50 } else { 2_000 };
    Ok(vec![
        start_to_ready(objects).await?,
        event_repeats(repeats).await?,
        status_writes(repeats, false).await?,
        status_writes(repeats, true).await?,
        released_handover().await?,
    ])
}

async fn start_to_ready(objects: usize) -> anyhow::Result<Row> {
    let env = kore_testenv::TestEnv::start().await?;
    let cms: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    for i in 0..objects {
        let mut cm = ConfigMap::default();
        cm.metadata.name = Some(format!("cm-{i}"));
        cm.data = Some([("k".to_string(), "v".repeat(64))].into());
        cms.create(&PostParams::default(), &cm).await?;
    }
    // The server's own ConfigMaps (kube-root-ca.crt in every namespace) are cached too.
    let all: Api<ConfigMap> = Api::all(env.client());
    let expected = all.list(&Default::default()).await?.items.len();
    let mgr = Manager::builder(env.client()).handle_signals(false).build();
    let store = mgr
        .informers()
        .get::<ConfigMap>(InformerConfig::default())
        .store();
    let health = mgr.health().clone();
    let stop = mgr.shutdown_handle();
    let began = Instant::now();
    let task = tokio::spawn(mgr.run());
    health.readiness().ready().await;
    let took = began.elapsed();
    anyhow::ensure!(store.len() == expected, "the cache holds every object");
    stop.shutdown();
    task.await??;
    Ok(row(
        format!("manager run → /readyz ready, {objects} ConfigMaps cached"),
        took.as_secs_f64() * 1e3,
        "ms",
        "one ConfigMap informer; includes the initial list",
    ))
}

async fn event_repeats(repeats: usize) -> anyhow::Result<Row> {
    let env = kore_testenv::TestEnv::start().await?;
    let cms: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("subject".into());
    let cm = cms.create(&PostParams::default(), &cm).await?;
    let recorder = Recorder::new(env.client(), Reporter::new("kore.dev/bench"));
    let event = Event {
        type_: EventType::Warning,
        reason: "FailedSync".into(),
        action: "Sync".into(),
        note: Some("the same failure".into()),
        related: None,
    };
    let began = Instant::now();
    for _ in 0..repeats {
        recorder.publish(&event, &cm.object_ref(&())).await?;
    }
    let rate = repeats as f64 / began.elapsed().as_secs_f64();
    Ok(row(
        "event recorder: repeats of one event (series patches)".into(),
        rate,
        "events/s",
        "the first creates the Event, each repeat patches series.count",
    ))
}

async fn status_writes(writes: usize, changing: bool) -> anyhow::Result<Row> {
    let env = kore_testenv::TestEnv::start().await?;
    let api: Api<Deployment> = Api::namespaced(env.client(), "default");
    let dep: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                         "spec": {"containers": [{"name": "main", "image": "nginx"}]}}
        }
    }))?;
    let mut current = api.create(&PostParams::default(), &dep).await?;
    let writer = StatusWriter::new(api);
    let began = Instant::now();
    for i in 0..writes {
        let replicas = if changing { i32::try_from(i)? } else { 1 };
        let status = DeploymentStatus {
            replicas: Some(replicas),
            ..DeploymentStatus::default()
        };
        if let StatusWrite::Written(obj) = writer.write(&current, &status).await? {
            current = *obj;
        }
    }
    let rate = writes as f64 / began.elapsed().as_secs_f64();
    let (what, note) = if changing {
        ("status writer: changed status", "a merge patch per call")
    } else {
        (
            "status writer: unchanged status",
            "compared and skipped; one write in all",
        )
    };
    Ok(row(what.into(), rate, "calls/s", note))
}

async fn released_handover() -> anyhow::Result<Row> {
    let env = kore_testenv::TestEnv::start().await?;
    let lease = |id: &str| {
        LeaseConfig::new("default", "bench")
            .identity(id)
            .lease_duration(Duration::from_secs(15))
            .renew_deadline(Duration::from_secs(10))
            .retry_period(Duration::from_millis(100))
    };
    let (a_tx, mut a_leads) = tokio::sync::watch::channel(false);
    let a = Manager::builder(env.client())
        .handle_signals(false)
        .leader_election(lease("a"))
        .add(Box::new(runnable_fn("a", move |s| async move {
            a_tx.send_replace(true);
            s.cancelled().await;
            Ok(())
        })))
        .build();
    let (b_tx, mut b_leads) = tokio::sync::watch::channel(false);
    let b = Manager::builder(env.client())
        .handle_signals(false)
        .leader_election(lease("b"))
        .add(Box::new(runnable_fn("b", move |s| async move {
            b_tx.send_replace(true);
            s.cancelled().await;
            Ok(())
        })))
        .build();
    let (a_stop, b_stop) = (a.shutdown_handle(), b.shutdown_handle());
    let a_task = tokio::spawn(a.run());
    a_leads.wait_for(|l| *l).await?;
    let b_task = tokio::spawn(b.run());
    tokio::time::sleep(Duration::from_millis(300)).await;
    let began = Instant::now();
    a_stop.shutdown();
    b_leads.wait_for(|l| *l).await?;
    let took = began.elapsed();
    a_task.await?.context("manager a")?;
    b_stop.shutdown();
    b_task.await?.context("manager b")?;
    Ok(row(
        "leader handover after a graceful stop (retry period 100 ms)".into(),
        took.as_secs_f64() * 1e3,
        "ms",
        "from the shutdown request to the standby's first leader-only work",
    ))
}

#[cfg(test)]
mod tests {
    #[tokio::test]
    async fn the_quick_run_measures_every_row() -> anyhow::Result<()> {
        // KORE_BENCH_FULL=1 (with --release) measures the full sizes.
        let rows = super::run(std::env::var_os("KORE_BENCH_FULL").is_none()).await?;
        assert_eq!(rows.len(), 5);
        assert!(rows.iter().all(|r| r.kore > 0.0), "{rows:?}");
        if std::env::var_os("KORE_BENCH_PRINT").is_some() {
            for r in &rows {
                eprintln!("{:<70} {:>12.1} {}", r.measure, r.kore, r.unit);
            }
        }
        Ok(())
    }
}
