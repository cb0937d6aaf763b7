//! Simulated nodes from the command line: `kore up` runs nodes, a scheduler and kubelets in
//! its process (3 nodes by default), and `kore nodes --kubeconfig` runs them against another
//! server — there, with two leader-elected `kore controller-manager`s, the standby finishes a
//! rollout when the leader is killed (issue 14).

mod common;

use std::collections::HashSet;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::Duration;

use common::{Process, kore};
use futures::StreamExt as _;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
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

/// Starts `kore controller-manager` against `kubeconfig`, leader-elected with short timings
/// (a 2 s Lease) and no metrics or health ports, so that two can run on one machine.
fn controller_manager(kubeconfig: &std::path::Path) -> tokio::process::Child {
    kore()
        .arg("controller-manager")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args([
            "--leader-elect-lease-duration",
            "2s",
            "--leader-elect-renew-deadline",
            "1500ms",
            "--leader-elect-retry-period",
            "200ms",
            "--metrics-bind-address",
            "0",
            "--health-probe-bind-address",
            "0",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("kore controller-manager starts")
}

/// Who holds the controller manager's Lease, once someone does.
async fn lease_holder(client: &kube::Client, other_than: Option<&str>) -> String {
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-system");
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let holder = leases
            .get_opt("kube-controller-manager")
            .await
            .expect("get the Lease")
            .and_then(|l| l.spec)
            .and_then(|s| s.holder_identity)
            .filter(|h| !h.is_empty() && Some(h.as_str()) != other_than);
        if let Some(holder) = holder {
            return holder;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no new holder of the Lease"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The rolled-out state of `web`: every replica updated and available at its generation.
async fn rolled_out(deployments: &Api<Deployment>, replicas: i32) -> bool {
    let d = deployments.get("web").await.expect("get the Deployment");
    let Some(s) = d.status else { return false };
    s.observed_generation == d.metadata.generation
        && s.replicas == Some(replicas)
        && s.updated_replicas == Some(replicas)
        && s.available_replicas == Some(replicas)
}

/// Issue 14's failover: two leader-elected `kore controller-manager` processes against one
/// `kore apiserver` with `kore nodes`; the leader is SIGKILLed in the middle of a rolling update
/// of 100 replicas (maxSurge 10); the standby takes the Lease over and finishes the rollout, and
/// no moment of the pods' watch history has more than replicas + maxSurge pods that are not
/// terminating.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_controller_manager_finishes_a_rollout_after_the_leader_is_killed() {
    const REPLICAS: i32 = 100;
    const SURGE: i32 = 10;
    let began = std::time::Instant::now();
    let server = Process::start("apiserver", &[]).await;
    let client = server.client().await;
    let mut nodes = kore()
        .args(["nodes", "--count", "3", "--kubeconfig"])
        .arg(&server.kubeconfig)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("kore nodes starts");
    let mut first = controller_manager(&server.kubeconfig);
    let leader = lease_holder(&client, None).await;
    let mut second = controller_manager(&server.kubeconfig);
    eprintln!("a leader at {:?}", began.elapsed());

    // Every pod event from the start, in resourceVersion order: the most pods ever alive
    // (created and not being deleted) at once.
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let from = pods
        .list(&ListParams::default())
        .await
        .expect("list pods")
        .metadata
        .resource_version
        .expect("a resourceVersion");
    let mut events = pods
        .watch(&WatchParams::default(), &from)
        .await
        .expect("watch pods")
        .boxed();
    let most_alive = Arc::new(AtomicI32::new(0));
    let tally = most_alive.clone();
    let watch = tokio::spawn(async move {
        let mut alive = HashSet::new();
        while let Some(event) = events.next().await {
            match event.expect("a watch event") {
                WatchEvent::Added(p) | WatchEvent::Modified(p) => {
                    let name = p.metadata.name.clone().expect("named");
                    let terminating = p.metadata.deletion_timestamp.is_some()
                        || matches!(
                            p.status.as_ref().and_then(|s| s.phase.as_deref()),
                            Some("Succeeded" | "Failed")
                        );
                    if terminating {
                        alive.remove(&name);
                    } else {
                        alive.insert(name);
                    }
                }
                WatchEvent::Deleted(p) => {
                    alive.remove(&p.metadata.name.expect("named"));
                }
                WatchEvent::Bookmark(_) => {}
                WatchEvent::Error(e) => panic!("the pods' watch failed: {e:?}"),
            }
            let n = i32::try_from(alive.len()).expect("fits");
            tally.fetch_max(n, Ordering::SeqCst);
        }
    });

    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
    let deployment: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {
            "replicas": REPLICAS,
            "strategy": {"rollingUpdate": {"maxSurge": SURGE}},
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": "nginx:1"}]},
            },
        },
    }))
    .expect("deployment");
    deployments
        .create(&PostParams::default(), &deployment)
        .await
        .expect("create");
    let deadline = tokio::time::Instant::now() + WAIT;
    while !rolled_out(&deployments, REPLICAS).await {
        assert!(tokio::time::Instant::now() < deadline, "never available");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    eprintln!("available at {:?}", began.elapsed());
    // The rollout: a new image; once the new ReplicaSet has two surges' worth of pods (some
    // old pods are gone by then), the leader dies without a word.
    // minReadySeconds makes each step of the rollout wait a second for the new pods, so it
    // lasts long enough to kill the leader in its middle.
    let patch = json!({"spec": {
        "minReadySeconds": 1,
        "template": {"spec": {"containers": [{"name": "web", "image": "nginx:2"}]}},
    }});
    deployments
        .patch("web", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("patch");
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let d = deployments.get("web").await.expect("get");
        let status = d.status.unwrap_or_default();
        let updated = status.updated_replicas.unwrap_or(0);
        // Until the controller has seen the new template, the status counts the old pods.
        if status.observed_generation == d.metadata.generation && updated >= 2 * SURGE {
            assert!(updated < REPLICAS, "the rollout ended before the kill");
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "no rollout");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    eprintln!("killing the leader at {:?}", began.elapsed());
    first.start_kill().expect("SIGKILL the leader");
    first.wait().await.expect("the leader is gone");

    let successor = lease_holder(&client, Some(&leader)).await;
    eprintln!("a new leader at {:?}", began.elapsed());
    assert_ne!(successor, leader);
    let deadline = tokio::time::Instant::now() + WAIT;
    while !rolled_out(&deployments, REPLICAS).await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the standby did not finish the rollout: {:?}",
            deployments.get("web").await.expect("get").status
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    eprintln!("rolled out at {:?}", began.elapsed());
    // The old pods' deletions may still be arriving; let the watch catch up with the end.
    tokio::time::sleep(Duration::from_millis(500)).await;
    watch.abort();
    let most = most_alive.load(Ordering::SeqCst);
    eprintln!("at most {most} pods alive at once");
    assert!(
        most <= REPLICAS + SURGE,
        "{most} pods were alive at once, more than replicas + maxSurge = {}",
        REPLICAS + SURGE
    );
    assert!(most >= REPLICAS, "the watch saw the pods ({most})");
    second.kill().await.expect("stopped");
    nodes.kill().await.expect("stopped");
}
