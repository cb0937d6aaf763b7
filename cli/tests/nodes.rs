//! Simulated nodes from the command line: `kore up` runs nodes, a scheduler and kubelets in
//! its process (3 nodes by default), and `kore nodes --kubeconfig` runs them against another
//! server.

mod common;

use std::process::Stdio;
use std::time::Duration;

use common::{Process, kore};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(40);

/// Creates a bare pod and waits until it runs; answers its node.
async fn a_pod_runs(client: kube::Client) -> String {
    let pods: Api<Pod> = Api::namespaced(client, "default");
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"containers": [{"name": "web", "image": "nginx"}]},
    }))
    .expect("pod");
    pods.create(&PostParams::default(), &pod)
        .await
        .expect("create");
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let p = pods.get("web").await.expect("get");
        if p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running") {
            return p.spec.and_then(|s| s.node_name).expect("bound");
        }
        assert!(tokio::time::Instant::now() < deadline, "not running: {p:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kore_up_runs_pods_on_three_simulated_nodes() {
    let kore = Process::start("up", &[]).await;
    kore.line(WAIT, |l| {
        l == "nodes: 3 simulated (kore-node-0..2), with a scheduler and kubelets"
    })
    .await;
    let node = a_pod_runs(kore.client().await).await;
    assert!(node.starts_with("kore-node-"), "{node}");
    kore.interrupt().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kore_nodes_runs_pods_against_another_server() {
    let server = Process::start("apiserver", &[]).await;
    let mut nodes = kore()
        .args(["nodes", "--count", "2", "--prefix", "sim", "--kubeconfig"])
        .arg(&server.kubeconfig)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("kore nodes starts");
    let node = a_pod_runs(server.client().await).await;
    assert!(node == "sim-0" || node == "sim-1", "{node}");

    // Stopping a node's heartbeat from another process annotates its Lease.
    let out = kore()
        .args(["nodes", "stop-heartbeat", "sim-1", "--kubeconfig"])
        .arg(&server.kubeconfig)
        .output()
        .await
        .expect("kore nodes stop-heartbeat runs");
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "node sim-1: heartbeat stopped"
    );
    let leases: Api<Lease> = Api::namespaced(server.client().await, "kube-node-lease");
    let lease = leases.get("sim-1").await.expect("sim-1's Lease");
    assert_eq!(
        lease
            .metadata
            .annotations
            .and_then(|a| a.get("kore.dev/heartbeat").cloned())
            .as_deref(),
        Some("stopped")
    );
    let out = kore()
        .args(["nodes", "stop-heartbeat", "nope", "--kubeconfig"])
        .arg(&server.kubeconfig)
        .output()
        .await
        .expect("kore nodes stop-heartbeat runs");
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("node nope has no Lease in kube-node-lease"),
        "{out:?}"
    );
    nodes.kill().await.expect("stopped");
}
