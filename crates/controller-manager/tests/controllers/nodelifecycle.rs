//! The node lifecycle and taint eviction controllers against kore-apiserver with simulated
//! nodes (their Lease heartbeats; the stand-in kubelet runs the pods): a node whose heartbeat stops becomes Unknown, gets the unreachable taints, its pods
//! turn not ready and those not tolerating the taint long enough are evicted; when its
//! kubelet is back the taints go. An untolerated NoExecute taint evicts at once.

use std::sync::Arc;
use std::time::Duration;

use crate::common::{Cluster, Fate, NS, wait_for_value};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Event, Node, Pod};
use k8s_openapi::jiff::Timestamp;
use kore_controller_manager::Options;
use kore_controller_manager::nodelifecycle::{self, TAINT_UNREACHABLE, taint_eviction};
use kore_testenv::NodeConfig;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

/// Both controllers, with a grace period of three seconds (fifteen Lease renewals).
async fn cluster() -> anyhow::Result<Cluster> {
    let mut options = Options::default().controllers([nodelifecycle::NAME, taint_eviction::NAME]);
    options.node_monitor_grace_period = Duration::from_secs(3);
    Cluster::start_with(options, Arc::new(|_: &Pod| Fate::Ready)).await
}

/// Nodes renewing their Leases every 200 ms (the stand-in kubelet runs their pods).
fn nodes() -> NodeConfig {
    NodeConfig {
        lease_interval: Duration::from_millis(200),
        ..NodeConfig::default()
    }
}

/// A pod bound to `node` with `tolerations` (the server adds its 300 s defaults for the
/// not-ready and unreachable taints a pod does not tolerate itself).
fn pod(name: &str, node: &str, tolerations: serde_json::Value) -> anyhow::Result<Pod> {
    Ok(serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": NS, "labels": {"test": "lifecycle"}},
        "spec": {
            "nodeName": node,
            "containers": [{"name": "app", "image": "app:1"}],
            "tolerations": tolerations,
        },
    }))?)
}

fn pod_ready(p: &Pod) -> Option<&str> {
    p.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready")
        .map(|c| c.status.as_str())
}

fn taint_keys(node: &Node) -> Vec<(String, String)> {
    let mut keys: Vec<_> = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .into_iter()
        .flatten()
        .map(|t| (t.key.clone(), t.effect.clone()))
        .collect();
    keys.sort();
    keys
}

/// Waits until the node `name` satisfies `check`; returns it.
async fn wait_node(c: &Cluster, name: &str, check: impl Fn(&Node) -> bool) -> anyhow::Result<Node> {
    let api: Api<Node> = Api::all(c.client.clone());
    wait_for_value(|| {
        let api = api.clone();
        let check = &check;
        async move { api.get_opt(name).await.ok().flatten().filter(|n| check(n)) }
    })
    .await
}

/// Waits until the pod `name` is gone or being deleted.
async fn wait_evicted(c: &Cluster, name: &str) -> anyhow::Result<()> {
    let api: Api<Pod> = Api::namespaced(c.client.clone(), NS);
    wait_for_value(|| {
        let api = api.clone();
        async move {
            match api.get_opt(name).await.ok()? {
                None => Some(()),
                Some(p) => p.metadata.deletion_timestamp.map(|_| ()),
            }
        }
    })
    .await
}

/// What a kubelet that comes back does: renews its Lease (every 200 ms from then on) and
/// posts Ready True.
async fn revive(c: &Cluster, node: &str) -> anyhow::Result<tokio::task::JoinHandle<()>> {
    let leases: Api<Lease> = Api::namespaced(c.client.clone(), nodelifecycle::LEASE_NAMESPACE);
    let name = node.to_string();
    let renewals = tokio::spawn(async move {
        loop {
            let now = Timestamp::now()
                .strftime("%Y-%m-%dT%H:%M:%S%.6fZ")
                .to_string();
            let _ = leases
                .patch(
                    &name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"spec": {"renewTime": now}})),
                )
                .await;
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    });
    let nodes: Api<Node> = Api::all(c.client.clone());
    // The controller writes the node too: a conflict is retried with a fresh copy.
    wait_for_value(|| {
        let nodes = nodes.clone();
        async move {
            let mut current = nodes.get(node).await.ok()?;
            let now = k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(Timestamp::now());
            for cond in current
                .status
                .get_or_insert_with(Default::default)
                .conditions
                .get_or_insert_with(Vec::new)
            {
                cond.last_heartbeat_time = Some(now.clone());
                cond.last_transition_time = Some(now.clone());
                if cond.type_ == "Ready" {
                    cond.status = "True".into();
                    cond.reason = Some("KubeletReady".into());
                    cond.message = Some("kubelet is posting ready status".into());
                } else {
                    cond.status = "False".into();
                }
            }
            nodes
                .replace_status(node, &PostParams::default(), &current)
                .await
                .ok()
                .map(|_| ())
        }
    })
    .await?;
    Ok(renewals)
}

#[tokio::test]
async fn a_silent_node_is_tainted_and_loses_its_pods_until_its_kubelet_is_back()
-> anyhow::Result<()> {
    let c = cluster().await?;
    let mut set = c.env.start_nodes_with(3, nodes()).await?;
    let names = set.names();
    let (dead, alive) = (names[0].clone(), names[1].clone());

    let pods: Api<Pod> = Api::namespaced(c.client.clone(), NS);
    let pp = PostParams::default();
    // Tolerates the unreachable taint for one second: evicted after it.
    let brief = json!([{"key": TAINT_UNREACHABLE, "operator": "Exists",
                        "effect": "NoExecute", "tolerationSeconds": 1}]);
    // Tolerates it forever.
    let loyal = json!([{"key": TAINT_UNREACHABLE, "operator": "Exists", "effect": "NoExecute"}]);
    pods.create(&pp, &pod("plain", &dead, json!([]))?).await?;
    pods.create(&pp, &pod("brief", &dead, brief)?).await?;
    pods.create(&pp, &pod("loyal", &dead, loyal)?).await?;
    pods.create(&pp, &pod("elsewhere", &alive, json!([]))?)
        .await?;
    for name in ["plain", "brief", "loyal", "elsewhere"] {
        c.wait_object::<Pod, _>(name, |p| (pod_ready(p) == Some("True")).then_some(()))
            .await?;
    }
    // The server gave the plain pod Kubernetes' 300 s tolerations.
    let plain = pods.get("plain").await?;
    assert!(
        plain
            .spec
            .and_then(|s| s.tolerations)
            .unwrap_or_default()
            .iter()
            .any(|t| t.key.as_deref() == Some(TAINT_UNREACHABLE)
                && t.toleration_seconds == Some(300))
    );

    assert!(set.stop_heartbeat(&dead));
    let node = wait_node(&c, &dead, |n| {
        taint_keys(n).contains(&(TAINT_UNREACHABLE.to_string(), "NoExecute".to_string()))
    })
    .await?;
    let ready = nodelifecycle::condition(&node, "Ready")
        .cloned()
        .unwrap_or_default();
    assert_eq!(ready.status, "Unknown");
    assert_eq!(
        ready.reason.as_deref(),
        Some(nodelifecycle::REASON_STATUS_UNKNOWN)
    );
    assert_eq!(
        ready.message.as_deref(),
        Some("Kubelet stopped posting node status.")
    );
    for type_ in ["MemoryPressure", "DiskPressure", "PIDPressure"] {
        let cond = nodelifecycle::condition(&node, type_)
            .cloned()
            .unwrap_or_default();
        assert_eq!(cond.status, "Unknown", "{type_}");
    }
    assert!(
        taint_keys(&node).contains(&(TAINT_UNREACHABLE.to_string(), "NoSchedule".to_string())),
        "{:?}",
        taint_keys(&node)
    );

    // The pod tolerating one second goes; the others are marked not ready and stay.
    wait_evicted(&c, "brief").await?;
    for name in ["plain", "loyal"] {
        c.wait_object::<Pod, _>(name, |p| (pod_ready(p) == Some("False")).then_some(()))
            .await?;
    }
    for name in ["plain", "loyal"] {
        let p = pods.get(name).await?;
        assert!(
            p.metadata.deletion_timestamp.is_none(),
            "{name} was evicted"
        );
    }
    // Nodes still heard from, and their pods, are left alone.
    let other = Api::<Node>::all(c.client.clone()).get(&alive).await?;
    assert_eq!(nodelifecycle::ready_status(&other), "True");
    assert!(taint_keys(&other).is_empty(), "{:?}", taint_keys(&other));
    assert_eq!(pod_ready(&pods.get("elsewhere").await?), Some("True"));

    let events: Api<Event> = Api::namespaced(c.client.clone(), NS);
    let reasons: Vec<(String, String)> = wait_for_value(|| {
        let events = events.clone();
        let dead = dead.clone();
        async move {
            let list = events.list(&ListParams::default()).await.ok()?;
            let reasons: Vec<(String, String)> = list
                .items
                .iter()
                .map(|e| {
                    (
                        e.involved_object.name.clone().unwrap_or_default(),
                        e.reason.clone().unwrap_or_default(),
                    )
                })
                .collect();
            let has = |o: &str, r: &str| reasons.iter().any(|(n, x)| n == o && x == r);
            (has(&dead, nodelifecycle::REASON_NODE_NOT_READY)
                && has("plain", nodelifecycle::REASON_NODE_NOT_READY)
                && has("brief", taint_eviction::REASON_TAINT_MANAGER_EVICTION))
            .then_some(reasons)
        }
    })
    .await?;
    assert!(!reasons.is_empty());

    // The kubelet is back: the taints go.
    let renewals = revive(&c, &dead).await?;
    let node = wait_node(&c, &dead, |n| taint_keys(n).is_empty()).await?;
    assert_eq!(nodelifecycle::ready_status(&node), "True");
    renewals.abort();
    c.stop().await
}

#[tokio::test]
async fn an_untolerated_no_execute_taint_evicts_at_once() -> anyhow::Result<()> {
    let c = cluster().await?;
    let set = c.env.start_nodes_with(1, nodes()).await?;
    let node = set.names()[0].clone();
    let pods: Api<Pod> = Api::namespaced(c.client.clone(), NS);
    let pp = PostParams::default();
    pods.create(&pp, &pod("intolerant", &node, json!([]))?)
        .await?;
    let tolerant =
        json!([{"key": "dedicated", "operator": "Equal", "value": "db", "effect": "NoExecute"}]);
    pods.create(&pp, &pod("tolerant", &node, tolerant)?).await?;
    for name in ["intolerant", "tolerant"] {
        c.wait_object::<Pod, _>(name, |p| (pod_ready(p) == Some("True")).then_some(()))
            .await?;
    }
    Api::<Node>::all(c.client.clone())
        .patch(
            &node,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"taints": [
                {"key": "dedicated", "value": "db", "effect": "NoExecute"},
            ]}})),
        )
        .await?;
    wait_evicted(&c, "intolerant").await?;
    // The evicted pod was marked a disruption target first (unless it is already gone).
    if let Some(p) = pods.get_opt("intolerant").await? {
        let target = p
            .status
            .and_then(|s| s.conditions)
            .unwrap_or_default()
            .into_iter()
            .find(|c| c.type_ == "DisruptionTarget");
        assert_eq!(
            target.and_then(|c| c.reason).as_deref(),
            Some(taint_eviction::REASON_DELETION_BY_TAINT_MANAGER)
        );
    }
    let kept = pods.get("tolerant").await?;
    assert!(kept.metadata.deletion_timestamp.is_none());
    c.stop().await
}
