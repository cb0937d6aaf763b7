//! A manager with one leader-only worker that simulates slow reconciles, for trying (and
//! testing) graceful shutdown.
//!
//! Each job writes `started: <n>` into the ConfigMap `default/graceful-worker`, works for
//! `--work-seconds` seconds without looking at the shutdown token, then writes
//! `finished: <n>`. On SIGTERM or SIGINT the job in flight finishes, no new job starts, the
//! Lease is released and the process exits 0; a second signal aborts (exit 1).
//!
//! ```text
//! KUBECONFIG=/path/to/kubeconfig cargo run -p kore-runtime --example graceful_worker -- --work-seconds 3
//! ```

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kore_runtime::manager::{LeaseConfig, Manager, runnable_fn};
use kube::api::{Api, Patch, PatchParams};

const NAME: &str = "graceful-worker";

async fn record(api: &Api<ConfigMap>, key: &str, value: String) -> Result<(), kube::Error> {
    let patch = serde_json::json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": NAME},
        "data": BTreeMap::from([(key.to_string(), value)]),
    });
    api.patch(NAME, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map(drop)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut work = Duration::from_secs(2);
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        if arg == "--work-seconds" {
            let secs: u64 = args.next().unwrap_or_default().parse()?;
            work = Duration::from_secs(secs);
        }
    }
    let client = kube::Client::try_default().await?;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some(NAME.into());
    if api.get_opt(NAME).await?.is_none() {
        api.create(&Default::default(), &cm).await?;
    }

    let worker = runnable_fn("worker", move |shutdown| async move {
        let mut n = 0u32;
        while !shutdown.is_cancelled() {
            n += 1;
            record(&api, "started", n.to_string()).await?;
            // The work in flight does not watch the token: it always completes.
            tokio::time::sleep(work).await;
            record(&api, "finished", n.to_string()).await?;
        }
        Ok(())
    });
    let manager = Manager::builder(client)
        .leader_election(LeaseConfig::new("default", NAME))
        .graceful_shutdown_timeout(Duration::from_secs(30))
        .add(Box::new(worker))
        .build();
    if let Err(e) = manager.run().await {
        eprintln!("graceful_worker: {e}");
        std::process::exit(1);
    }
    Ok(())
}
