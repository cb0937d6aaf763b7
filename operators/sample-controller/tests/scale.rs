//! Many Foos at once: every one converges, with the fewest writes (one Deployment create,
//! one status patch, one event each), and nothing is written once they are in step.
//!
//! `KORE_SAMPLE_FOOS=n` sets how many (default 1,000); the test prints how long convergence
//! took, the number the benchmark reports.

#![allow(clippy::disallowed_names, reason = "the custom resource is called Foo")]

mod common;

use std::time::{Duration, Instant};

use common::{NS, Running};
use futures::{StreamExt as _, TryStreamExt as _};
use kore_sample_controller::Options;
use kore_testenv::wait_for;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_foos_converge_with_one_create_and_one_status_write_each() -> anyhow::Result<()>
{
    let n: usize = std::env::var("KORE_SAMPLE_FOOS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000);
    let run = Running::start(Options::default()).await?;
    let started = Instant::now();
    futures::stream::iter(0..n)
        .map(|i| {
            run.create_foo(
                NS,
                json!({"metadata": {"name": format!("foo-{i}")},
                       "spec": {"deploymentName": format!("dep-{i}"), "replicas": 1}}),
            )
        })
        .buffer_unordered(32)
        .try_collect::<Vec<_>>()
        .await?;
    let created = started.elapsed();
    wait_for(Duration::from_secs(300), || async {
        let deployments = run.deployments().list(&Default::default()).await.ok()?;
        if deployments.items.len() < n {
            return None;
        }
        let foos = run.foos().list(&Default::default()).await.ok()?;
        foos.items.iter().all(|f| f.status.is_some()).then_some(())
    })
    .await?;
    let converged = started.elapsed();
    println!(
        "{n} Foos: created in {:.2} s, every Deployment and status written after {:.2} s",
        created.as_secs_f64(),
        converged.as_secs_f64()
    );

    run.settle().await?;
    let writes = run.writes();
    let count = |w: &str| writes.get(w).copied().unwrap_or(0);
    let n = u64::try_from(n)?;
    assert_eq!(count("create apps/deployments"), n, "{writes:?}");
    assert_eq!(
        count("patch samplecontroller.k8s.io/foos/status"),
        n,
        "{writes:?}"
    );
    assert_eq!(count("patch apps/deployments"), 0, "{writes:?}");
    assert!(
        count("create events.k8s.io/events") + count("patch events.k8s.io/events") <= n,
        "{writes:?}"
    );
    run.assert_no_denials()?;
    run.stop().await
}
