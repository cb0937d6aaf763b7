//! Server-side apply throughput: applies/s of `Patch::Apply` through `kube::Client` against an
//! in-process kore-apiserver (`TestEnv`, in-memory storage), for 10,000 ConfigMaps of ten keys
//! and two labels each, from 16 concurrent clients.
//!
//! Three passes over the same objects: create by apply, change one key of each (the merge,
//! ownership and conflict check against an existing object), and re-apply the unchanged intent
//! (a no-op that must not write).

use std::sync::Arc;
use std::time::Instant;

use k8s_openapi::api::core::v1::ConfigMap;
use kore_testenv::TestEnv;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};

use crate::suite::Row;

/// Concurrent clients.
const CLIENTS: usize = 16;

fn intent(i: usize, generation: usize) -> Value {
    let mut data = serde_json::Map::new();
    for k in 0..10 {
        data.insert(format!("key{k}"), json!(format!("value-{i}-{k}")));
    }
    data.insert("changed".into(), json!(format!("g{generation}")));
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": format!("apply-{i}"), "labels": {"app": "bench", "shard": format!("s{}", i % 8)}},
           "data": data})
}

/// Applies every object's intent for `generation` from [`CLIENTS`] tasks; returns applies/s.
async fn pass(api: &Api<ConfigMap>, n: usize, generation: usize) -> anyhow::Result<f64> {
    let api = Arc::new(api.clone());
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for worker in 0..CLIENTS {
        let api = api.clone();
        tasks.spawn(async move {
            let pp = PatchParams::apply("kore-bench");
            for i in (worker..n).step_by(CLIENTS) {
                api.patch(
                    &format!("apply-{i}"),
                    &pp,
                    &Patch::Apply(intent(i, generation)),
                )
                .await?;
            }
            anyhow::Ok(())
        });
    }
    while let Some(done) = tasks.join_next().await {
        done??;
    }
    Ok(n as f64 / started.elapsed().as_secs_f64())
}

/// Runs the three passes; `quick` uses 200 objects.
pub(crate) async fn run(quick: bool) -> anyhow::Result<Vec<Row>> {
    let n = if quick { 200 } else { 10_000 };
    let env = TestEnv::start().await?;
    let api: Api<ConfigMap> = Api::default_namespaced(env.client());
    let row = |what: &str, value: f64, note: &str| Row {
        measure: format!("server-side apply, {what} ({n} ConfigMaps, {CLIENTS} clients)"),
        kore: value,
        unit: "applies/s".into(),
        peer: None,
        target: None,
        note: note.into(),
    };
    let create = pass(&api, n, 0).await?;
    let before = api.get("apply-0").await?.metadata.resource_version;
    let change = pass(&api, n, 1).await?;
    let changed = api.get("apply-0").await?.metadata.resource_version;
    anyhow::ensure!(before != changed, "the changing pass wrote nothing");
    let noop = pass(&api, n, 1).await?;
    let after = api.get("apply-0").await?.metadata.resource_version;
    anyhow::ensure!(after == changed, "the unchanged re-apply wrote");
    env.stop().await;
    Ok(vec![
        row(
            "create",
            create,
            "in-process TestEnv through kube::Client, in-memory storage",
        ),
        row(
            "change one key",
            change,
            "merge + ownership + conflict check, one write each",
        ),
        row(
            "unchanged re-apply",
            noop,
            "no-op: no write, same resourceVersion",
        ),
    ])
}

#[cfg(test)]
mod tests {
    /// `cargo test -p kore-bench --release apply -- --ignored --nocapture` prints the full run.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    #[ignore = "a benchmark"]
    async fn apply_throughput_is_reported() {
        for row in super::run(false).await.expect("the benchmark runs") {
            println!(
                "{}: {:.0} {} ({})",
                row.measure, row.kore, row.unit, row.note
            );
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_quick_run_creates_changes_and_reapplies_without_writing() {
        let rows = super::run(true)
            .await
            .expect("the quick run passes its checks");
        assert_eq!(rows.len(), 3);
        assert!(rows.iter().all(|r| r.kore > 0.0));
    }
}
