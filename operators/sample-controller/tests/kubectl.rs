//! kubectl against the operator over a real socket: the sample applies and converges, and
//! `kubectl get foos` shows the printer columns.

#![allow(clippy::disallowed_names, reason = "the custom resource is called Foo")]

mod common;

use common::{NS, Prepared, available};
use kore_sample_controller::Options;
use kore_testenv::TestEnv;
use kore_testenv::kubectl::{Kubectl, kubectl_or_skip};

#[tokio::test]
async fn the_sample_applied_with_kubectl_converges_and_get_shows_the_printer_columns()
-> anyhow::Result<()> {
    let Some(program) = kubectl_or_skip() else {
        return Ok(());
    };
    let env = TestEnv::builder().tcp().start().await?;
    let run = Prepared::install_on(env, kore_sample_controller::operator())
        .await?
        .run(Options::default())?;
    let kubectl = Kubectl::for_env(program, &run.env);
    let samples = kore_sample_controller::operator().samples;
    assert_eq!(samples.len(), 1);
    let file = kubectl.file("foo.json", &serde_json::to_string(&samples[0])?);
    kubectl.ok(&["apply", "-n", NS, "-f", &file]).await;

    run.wait_deployment(NS, "example-foo", |d| {
        d.spec.as_ref().and_then(|s| s.replicas) == Some(1)
    })
    .await?;
    run.wait_foo("example-foo", |f| available(f) == Some(0))
        .await?;

    let table = kubectl.ok(&["get", "foos", "-n", NS]).await;
    let rows: Vec<Vec<&str>> = table
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        rows.first().map(Vec::as_slice),
        Some(&["NAME", "DEPLOYMENT", "REPLICAS", "AVAILABLE", "AGE"][..]),
        "{table}"
    );
    assert_eq!(
        rows.get(1).map(|r| &r[..4]),
        Some(&["example-foo", "example-foo", "1", "0"][..]),
        "{table}"
    );
    run.assert_no_denials()?;
    run.stop().await
}
