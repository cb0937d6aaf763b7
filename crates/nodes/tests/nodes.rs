//! Simulated nodes over the real API: their shape and their Lease heartbeats.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;
use kore_nodes::{LEASE_NAMESPACE, NodeConfig, NodeSet};
use kore_testenv::{TestEnv, wait_for};
use kube::api::Api;

#[tokio::test]
async fn nodes_are_registered_like_a_kubelets() {
    let env = TestEnv::start().await.expect("start");
    let set = NodeSet::start(env.client(), 3, NodeConfig::default())
        .await
        .expect("nodes");
    assert_eq!(set.names(), ["kore-node-0", "kore-node-1", "kore-node-2"]);
    let nodes: Api<Node> = Api::all(env.client());
    let n = nodes.get("kore-node-1").await.expect("get");
    let labels = n.metadata.labels.expect("labels");
    assert_eq!(labels["kubernetes.io/hostname"], "kore-node-1");
    assert_eq!(labels["kubernetes.io/os"], "linux");
    assert_eq!(labels["kubernetes.io/arch"], "amd64");
    assert_eq!(labels["topology.kubernetes.io/zone"], "zone-b");
    let status = n.status.expect("status");
    let alloc = status.allocatable.expect("allocatable");
    assert_eq!(alloc["cpu"].0, "4");
    assert_eq!(alloc["pods"].0, "110");
    let types: Vec<(String, String)> = status
        .conditions
        .expect("conditions")
        .into_iter()
        .map(|c| (c.type_, c.status))
        .collect();
    for (ty, st) in [
        ("MemoryPressure", "False"),
        ("DiskPressure", "False"),
        ("PIDPressure", "False"),
        ("Ready", "True"),
    ] {
        assert!(types.contains(&(ty.into(), st.into())), "{ty} in {types:?}");
    }
    assert!(status.node_info.is_some());
    assert_eq!(status.addresses.expect("addresses").len(), 2);
}

async fn renew_time(leases: &Api<Lease>, name: &str) -> Option<String> {
    let l = leases.get_opt(name).await.ok()??;
    l.spec?.renew_time.map(|t| format!("{t:?}"))
}

#[tokio::test]
async fn leases_are_renewed_until_the_heartbeat_stops() {
    let env = TestEnv::start().await.expect("start");
    let config = NodeConfig {
        lease_interval: Duration::from_millis(20),
        ..NodeConfig::default()
    };
    let mut set = NodeSet::start(env.client(), 2, config)
        .await
        .expect("nodes");
    let leases: Api<Lease> = Api::namespaced(env.client(), LEASE_NAMESPACE);
    let first = wait_for(Duration::from_secs(10), || async {
        renew_time(&leases, "kore-node-0").await
    })
    .await
    .expect("a lease");
    // Renewed: the renewTime moves on.
    wait_for(Duration::from_secs(10), || async {
        renew_time(&leases, "kore-node-0")
            .await
            .filter(|t| *t != first)
    })
    .await
    .expect("renewed");
    let lease = leases.get("kore-node-0").await.expect("lease");
    let spec = lease.spec.expect("spec");
    assert_eq!(spec.holder_identity.as_deref(), Some("kore-node-0"));
    assert_eq!(spec.lease_duration_seconds, Some(40));

    assert!(set.stop_heartbeat("kore-node-0"));
    assert!(!set.stop_heartbeat("no-such-node"));
    // Let an in-flight renewal land, then the renewTime must stay put while node 1 moves on.
    tokio::time::sleep(Duration::from_millis(50)).await;
    let stopped = renew_time(&leases, "kore-node-0").await.expect("lease");
    let other = renew_time(&leases, "kore-node-1").await.expect("lease");
    wait_for(Duration::from_secs(10), || async {
        renew_time(&leases, "kore-node-1")
            .await
            .filter(|t| *t != other)
    })
    .await
    .expect("node 1 still renews");
    wait_for(Duration::from_secs(10), || async {
        renew_time(&leases, "kore-node-1")
            .await
            .filter(|t| *t != other)
    })
    .await
    .expect("node 1 renews again");
    assert_eq!(
        renew_time(&leases, "kore-node-0").await.expect("lease"),
        stopped,
        "a stopped heartbeat leaves the lease stale"
    );
}

#[tokio::test]
async fn a_lease_annotated_stopped_is_not_renewed_until_the_annotation_goes() {
    let env = TestEnv::start().await.expect("start");
    let config = NodeConfig {
        lease_interval: Duration::from_millis(20),
        ..NodeConfig::default()
    };
    let _set = NodeSet::start(env.client(), 2, config)
        .await
        .expect("nodes");
    let leases: Api<Lease> = Api::namespaced(env.client(), LEASE_NAMESPACE);
    wait_for(Duration::from_secs(10), || async {
        renew_time(&leases, "kore-node-0").await
    })
    .await
    .expect("a lease");
    // As `kore nodes stop-heartbeat kore-node-0` does, from any process.
    kore_nodes::set_heartbeat(&env.client(), "kore-node-0", true)
        .await
        .expect("stop");
    let missing = kore_nodes::set_heartbeat(&env.client(), "no-such-node", true).await;
    assert!(matches!(missing, Err(kube::Error::Api(s)) if s.code == 404));
    // At most one more renewal lands (the one that reads the annotation back).
    tokio::time::sleep(Duration::from_millis(100)).await;
    let stopped = renew_time(&leases, "kore-node-0").await.expect("lease");
    for _ in 0..2 {
        let other = renew_time(&leases, "kore-node-1").await.expect("lease");
        wait_for(Duration::from_secs(10), || async {
            renew_time(&leases, "kore-node-1")
                .await
                .filter(|t| *t != other)
        })
        .await
        .expect("node 1 still renews");
    }
    assert_eq!(
        renew_time(&leases, "kore-node-0").await.expect("lease"),
        stopped,
        "a stopped heartbeat leaves the lease stale"
    );
    kore_nodes::set_heartbeat(&env.client(), "kore-node-0", false)
        .await
        .expect("start");
    wait_for(Duration::from_secs(10), || async {
        renew_time(&leases, "kore-node-0")
            .await
            .filter(|t| *t != stopped)
    })
    .await
    .expect("renewed again");
}
