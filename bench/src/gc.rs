//! Garbage-collection latency: how long the in-process server takes to remove every
//! dependent of one owner after the owner is deleted (issue 3's target: 10,000 dependents in
//! under 2 s).
//!
//! The dependents (ConfigMaps, each with one owner reference) are created through the `kube`
//! client first; the clock starts when the owner's `DELETE` returns and stops when storage
//! holds none of them, read straight from the server's store so the measurement does not load
//! the server it measures.

use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kore_testenv::TestEnv;
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::json;

use crate::suite::{Row, Target};

/// How long the collector may take before the run is abandoned.
const GIVE_UP: Duration = Duration::from_secs(60);

/// Runs the measurement: 10,000 dependents, or 500 when `quick`.
pub(crate) async fn run(quick: bool) -> anyhow::Result<Vec<crate::suite::Row>> {
    let n = if quick { 500 } else { 10_000 };
    let elapsed = collect_dependents(n).await?;
    Ok(vec![Row {
        measure: format!("GC of {n} dependents of one owner"),
        kore: elapsed.as_secs_f64() * 1000.0,
        unit: "ms".into(),
        peer: None,
        target: (!quick).then_some(Target::Below(2000.0)),
        note: "in-process server, memory storage; from the owner's DELETE (Background) returning until \
               no dependent ConfigMap is left in storage"
            .into(),
    }])
}

async fn collect_dependents(n: usize) -> anyhow::Result<Duration> {
    let env = TestEnv::start().await?;
    let cms: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    let owner: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "owner"}}))?;
    let owner = cms.create(&PostParams::default(), &owner).await?;
    let reference = json!({"apiVersion": "v1", "kind": "ConfigMap", "name": "owner",
                           "uid": owner.metadata.uid, "blockOwnerDeletion": true});
    futures::stream::iter(0..n)
        .map(|i| {
            let cms = cms.clone();
            let body = json!({"metadata": {"name": format!("dep-{i:05}"),
                                           "ownerReferences": [reference.clone()]},
                              "data": {"i": i.to_string()}});
            async move {
                let cm: ConfigMap = serde_json::from_value(body)?;
                cms.create(&PostParams::default(), &cm).await?;
                anyhow::Ok(())
            }
        })
        .buffer_unordered(64)
        .try_collect::<Vec<()>>()
        .await?;
    let store = env.server().registry().store().clone();
    let prefix = "/core/configmaps/default/dep-";
    anyhow::ensure!(store.keys(prefix).len() == n, "every dependent was created");
    cms.delete("owner", &DeleteParams::background()).await?;
    let start = Instant::now();
    while !store.keys(prefix).is_empty() {
        anyhow::ensure!(
            start.elapsed() < GIVE_UP,
            "{} dependents still present after {GIVE_UP:?}",
            store.keys(prefix).len()
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let elapsed = start.elapsed();
    env.stop().await;
    Ok(elapsed)
}

#[cfg(test)]
mod tests {
    #[tokio::test]
    async fn a_quick_run_collects_every_dependent() {
        let rows = super::run(true).await.expect("the run completes");
        assert_eq!(rows.len(), 1);
        assert!(rows[0].kore > 0.0);
        eprintln!("{}: {:.1} {}", rows[0].measure, rows[0].kore, rows[0].unit);
    }

    /// The full measurement; run it in release: `cargo test --release -p kore-bench gc:: --
    /// --ignored --nocapture`.
    #[tokio::test(flavor = "multi_thread")]
    #[ignore = "a benchmark: run it explicitly, in release"]
    async fn full_run() {
        let rows = super::run(false).await.expect("the run completes");
        for row in rows {
            eprintln!(
                "{}: {:.1} {} (pass: {:?})",
                row.measure,
                row.kore,
                row.unit,
                row.pass()
            );
        }
    }
}
