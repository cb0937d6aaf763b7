//! Two controller-manager instances on one Lease: only the leader acts; when it dies (its
//! tasks dropped, as by SIGKILL, so the Lease is not released) the other takes over within
//! the lease duration, and nothing is created twice across the handover.

use std::sync::Arc;
use std::time::Duration;

use crate::common::{Fate, Kubelet, NS};
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kore_controller_manager::{ControllerManager, LEASE_NAME, LEASE_NAMESPACE, Options};
use kore_runtime::Manager;
use kore_runtime::metrics::Metrics;
use kore_testenv::{TestEnv, wait_for};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use tokio::task::JoinHandle;

/// Starts one instance named `identity` with a short Lease (2 s).
fn instance(
    client: kube::Client,
    identity: &str,
) -> anyhow::Result<JoinHandle<Result<(), kore_runtime::manager::Error>>> {
    let options = Options::default().identity(identity).lease_timing(
        Duration::from_secs(2),
        Duration::from_millis(1500),
        Duration::from_millis(200),
    );
    let cm = ControllerManager::new(options.clone())?;
    let mut manager = Manager::builder(client)
        .leader_election(options.lease())
        .handle_signals(false)
        .build();
    let metrics = Metrics::new();
    metrics.register(manager.registry_mut());
    cm.register(&mut manager, &metrics);
    Ok(tokio::spawn(manager.run()))
}

async fn holder(client: &kube::Client) -> Option<String> {
    let leases: Api<Lease> = Api::namespaced(client.clone(), LEASE_NAMESPACE);
    leases.get(LEASE_NAME).await.ok()?.spec?.holder_identity
}

#[tokio::test]
async fn the_standby_takes_over_when_the_leader_dies_and_creates_nothing_twice()
-> anyhow::Result<()> {
    let env = TestEnv::start().await?;
    let client = env.client();
    let _kubelet = Kubelet::start(client.clone(), Arc::new(|_: &Pod| Fate::Ready));
    let first = instance(client.clone(), "first")?;
    wait_for(crate::common::WAIT, || async {
        (holder(&client).await.as_deref() == Some("first")).then_some(())
    })
    .await?;
    let second = instance(client.clone(), "second")?;

    let rss: Api<ReplicaSet> = Api::namespaced(client.clone(), NS);
    let rs: ReplicaSet = serde_json::from_value(json!({
        "metadata": {"name": "ha", "namespace": NS},
        "spec": {
            "replicas": 5,
            "selector": {"matchLabels": {"app": "ha"}},
            "template": {"metadata": {"labels": {"app": "ha"}},
                         "spec": {"containers": [{"name": "c", "image": "nginx"}]}},
        },
    }))?;
    rss.create(&PostParams::default(), &rs).await?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let count = || async {
        pods.list(&Default::default())
            .await
            .map(|l| l.items.len())
            .unwrap_or(0)
    };
    wait_for(crate::common::WAIT, || async {
        (count().await == 5).then_some(())
    })
    .await?;
    assert_eq!(
        holder(&client).await.as_deref(),
        Some("first"),
        "the standby did not take the Lease"
    );

    // The leader dies without releasing the Lease; the standby waits out the lease, then acts.
    first.abort();
    let _ = first.await;
    rss.patch(
        "ha",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 8}})),
    )
    .await?;
    wait_for(crate::common::WAIT, || async {
        (holder(&client).await.as_deref() == Some("second")).then_some(())
    })
    .await?;
    wait_for(crate::common::WAIT, || async {
        let rs = rss.get("ha").await.ok()?;
        let s = rs.status?;
        (s.replicas == 8
            && s.ready_replicas == Some(8)
            && s.observed_generation == rs.metadata.generation)
            .then_some(())
    })
    .await?;
    assert_eq!(
        count().await,
        8,
        "exactly the replicas: nothing was created twice across the handover"
    );
    second.abort();
    Ok(())
}
