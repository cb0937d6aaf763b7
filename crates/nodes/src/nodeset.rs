//! [`NodeSet`]: simulated Node objects registered as a kubelet registers them, and their
//! Lease heartbeats in `kube-node-lease`.

use std::collections::HashMap;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use tokio::task::JoinHandle;

/// The namespace of the nodes' heartbeat Leases.
pub const LEASE_NAMESPACE: &str = "kube-node-lease";

/// The field manager of every write.
const MANAGER: &str = "kore-nodes";

/// What the nodes of a [`NodeSet`] look like.
#[derive(Clone, Debug)]
pub struct NodeConfig {
    /// Names are `{prefix}-{i}`, `i` from 0.
    pub name_prefix: String,
    /// CPU capacity (a quantity, `"4"`).
    pub cpu: String,
    /// Memory capacity (a quantity, `"16Gi"`).
    pub memory: String,
    /// Pod capacity.
    pub pods: u32,
    /// `kubernetes.io/os`.
    pub os: String,
    /// `kubernetes.io/arch`.
    pub arch: String,
    /// `topology.kubernetes.io/zone`, assigned round-robin; none when empty.
    pub zones: Vec<String>,
    /// Extra labels on every node.
    pub labels: HashMap<String, String>,
    /// How often each node renews its Lease (the kubelet's default is 10 s).
    pub lease_interval: Duration,
    /// The Lease's `leaseDurationSeconds` (the kubelet's default is 40).
    pub lease_duration_seconds: i32,
}

impl Default for NodeConfig {
    fn default() -> Self {
        NodeConfig {
            name_prefix: "kore-node".into(),
            cpu: "4".into(),
            memory: "16Gi".into(),
            pods: 110,
            os: "linux".into(),
            arch: "amd64".into(),
            zones: vec!["zone-a".into(), "zone-b".into(), "zone-c".into()],
            labels: HashMap::new(),
            lease_interval: Duration::from_secs(10),
            lease_duration_seconds: 40,
        }
    }
}

/// Simulated nodes and their heartbeats; dropping it stops the heartbeats.
pub struct NodeSet {
    client: Client,
    config: NodeConfig,
    heartbeats: HashMap<String, JoinHandle<()>>,
    next: usize,
}

pub(crate) fn now_micro() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%S%.6fZ")
        .to_string()
}

pub(crate) fn now_seconds() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

impl NodeSet {
    /// Registers `count` nodes shaped by `config` and starts their heartbeats.
    pub async fn start(client: Client, count: usize, config: NodeConfig) -> anyhow::Result<Self> {
        let mut set = NodeSet {
            client,
            config,
            heartbeats: HashMap::new(),
            next: 0,
        };
        for _ in 0..count {
            set.add_node().await?;
        }
        Ok(set)
    }

    /// The names of the nodes, in the order they were added.
    pub fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.heartbeats.keys().cloned().collect();
        names.sort_by_key(|n| {
            n.rsplit('-')
                .next()
                .and_then(|i| i.parse::<usize>().ok())
                .unwrap_or(usize::MAX)
        });
        names
    }

    /// Registers one more node with the set's config; answers its name.
    pub async fn add_node(&mut self) -> anyhow::Result<String> {
        let index = self.next;
        self.next += 1;
        let name = format!("{}-{index}", self.config.name_prefix);
        let node = node_object(&self.config, &name, index);
        let nodes: Api<Node> = Api::all(self.client.clone());
        // A node left by an earlier run is taken over (its Lease renewed again).
        let created = match nodes.create(&PostParams::default(), &node).await {
            Err(kube::Error::Api(s)) if s.code == 409 => nodes.get(&name).await?,
            other => other?,
        };
        let status = json!({"status": node_status(&self.config, &name, index)});
        nodes
            .patch_status(
                &name,
                &PatchParams::apply(MANAGER).force(),
                &Patch::Apply(json!({
                    "apiVersion": "v1", "kind": "Node",
                    "metadata": {"name": name},
                    "status": status["status"],
                })),
            )
            .await?;
        let uid = created.metadata.uid.unwrap_or_default();
        let handle = tokio::spawn(heartbeat(
            self.client.clone(),
            name.clone(),
            uid,
            self.config.lease_interval,
            self.config.lease_duration_seconds,
        ));
        self.heartbeats.insert(name.clone(), handle);
        Ok(name)
    }

    /// Stops `node`'s Lease renewals (its Lease then goes stale); false when it has none.
    pub fn stop_heartbeat(&mut self, node: &str) -> bool {
        match self.heartbeats.get(node) {
            Some(h) if !h.is_finished() => {
                h.abort();
                true
            }
            _ => false,
        }
    }
}

impl Drop for NodeSet {
    fn drop(&mut self) {
        for h in self.heartbeats.values() {
            h.abort();
        }
    }
}

fn node_object(config: &NodeConfig, name: &str, index: usize) -> Node {
    let mut labels: serde_json::Map<String, Value> = config
        .labels
        .iter()
        .map(|(k, v)| (k.clone(), json!(v)))
        .collect();
    labels.insert("kubernetes.io/hostname".into(), json!(name));
    labels.insert("kubernetes.io/os".into(), json!(config.os));
    labels.insert("kubernetes.io/arch".into(), json!(config.arch));
    labels.insert("beta.kubernetes.io/os".into(), json!(config.os));
    labels.insert("beta.kubernetes.io/arch".into(), json!(config.arch));
    if !config.zones.is_empty() {
        let zone = &config.zones[index % config.zones.len()];
        labels.insert("topology.kubernetes.io/zone".into(), json!(zone));
    }
    let v = json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {
            "name": name,
            "labels": labels,
            "annotations": {"kwok.x-k8s.io/node": "fake", "kore.dev/simulated": "true"},
        },
        "spec": {"podCIDR": format!("10.244.{}.0/24", index % 256)},
        "status": node_status(config, name, index),
    });
    match serde_json::from_value(v) {
        Ok(n) => n,
        Err(e) => unreachable!("a node built from known fields deserializes: {e}"),
    }
}

/// A healthy kubelet's node conditions (type, status, reason, message), in its order.
const CONDITIONS: [(&str, &str, &str, &str); 4] = [
    (
        "MemoryPressure",
        "False",
        "KubeletHasSufficientMemory",
        "kubelet has sufficient memory available",
    ),
    (
        "DiskPressure",
        "False",
        "KubeletHasNoDiskPressure",
        "kubelet has no disk pressure",
    ),
    (
        "PIDPressure",
        "False",
        "KubeletHasSufficientPID",
        "kubelet has sufficient PID available",
    ),
    (
        "Ready",
        "True",
        "KubeletReady",
        "kubelet is posting ready status",
    ),
];

/// The node conditions a healthy simulated kubelet posts (what a Stage template's
/// `NodeConditions` answers).
pub(crate) fn kubelet_conditions() -> Value {
    CONDITIONS
        .iter()
        .map(|(ty, status, reason, message)| {
            json!({"type": ty, "status": status, "reason": reason, "message": message})
        })
        .collect()
}

fn node_status(config: &NodeConfig, name: &str, index: usize) -> Value {
    let now = now_seconds();
    let conditions: Vec<Value> = CONDITIONS
        .iter()
        .map(|(ty, status, reason, message)| {
            json!({
                "type": ty, "status": status, "reason": reason, "message": message,
                "lastHeartbeatTime": now, "lastTransitionTime": now,
            })
        })
        .collect();
    let resources = json!({
        "cpu": config.cpu, "memory": config.memory, "pods": config.pods.to_string(),
        "ephemeral-storage": "100Gi",
    });
    json!({
        "capacity": resources,
        "allocatable": resources,
        "phase": "Running",
        "addresses": [
            {"type": "InternalIP", "address": format!("10.0.{}.{}", index / 250, index % 250 + 1)},
            {"type": "Hostname", "address": name},
        ],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
        "nodeInfo": {
            "machineID": "", "systemUUID": "", "bootID": "",
            "kernelVersion": "", "osImage": "kore simulated node",
            "containerRuntimeVersion": "kore://simulated", "kubeletVersion": "v1.34.0-kore",
            "kubeProxyVersion": "", "operatingSystem": config.os, "architecture": config.arch,
        },
        "conditions": conditions,
    })
}

/// The annotation on a node's Lease that stops its renewals while it is `stopped` (what
/// `kore nodes stop-heartbeat` sets; removing it resumes them). It works across processes: the
/// heartbeat reads it from each renewal's answer, so it takes effect within one interval.
pub const HEARTBEAT: &str = "kore.dev/heartbeat";

/// Stops (`stop` true) or resumes the heartbeat of `node`, whichever process renews it, by
/// annotating its Lease with [`HEARTBEAT`]. Fails with the API's 404 when the node has no
/// Lease.
pub async fn set_heartbeat(client: &Client, node: &str, stop: bool) -> Result<(), kube::Error> {
    let leases: Api<Lease> = Api::namespaced(client.clone(), LEASE_NAMESPACE);
    let value = if stop { json!("stopped") } else { Value::Null };
    leases
        .patch(
            node,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {HEARTBEAT: value}}})),
        )
        .await
        .map(|_| ())
}

fn stopped(lease: &Lease) -> bool {
    lease
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(HEARTBEAT))
        .is_some_and(|v| v == "stopped")
}

/// Creates `node`'s Lease, then renews it every `interval` until aborted, except while the
/// Lease is annotated [`HEARTBEAT`]`: stopped`.
async fn heartbeat(client: Client, node: String, uid: String, interval: Duration, duration: i32) {
    let leases: Api<Lease> = Api::namespaced(client, LEASE_NAMESPACE);
    let mut tick = tokio::time::interval(interval);
    let mut paused = false;
    loop {
        tick.tick().await;
        if paused {
            // Renew again once the annotation is gone (a failed read keeps the pause).
            match leases.get_opt(&node).await {
                Ok(Some(l)) if stopped(&l) => continue,
                Err(_) => continue,
                _ => paused = false,
            }
        }
        let lease = json!({
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {
                "name": node,
                "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": node, "uid": uid}],
            },
            "spec": {
                "holderIdentity": node,
                "leaseDurationSeconds": duration,
                "renewTime": now_micro(),
            },
        });
        // A failed renewal is retried at the next tick, as the kubelet does.
        if let Ok(l) = leases
            .patch(
                &node,
                &PatchParams::apply(MANAGER).force(),
                &Patch::Apply(lease),
            )
            .await
        {
            paused = stopped(&l);
        }
    }
}
