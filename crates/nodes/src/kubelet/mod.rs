//! Simulated kubelets: one controller (on kore-runtime) drives every pod bound to a simulated
//! node, that is a Node annotated `kore.dev/simulated: "true"` (as [`NodeSet`](crate::NodeSet)
//! registers them) or `kwok.x-k8s.io/node: fake`. What it writes, stage by stage, is
//! [`lifecycle::next_step`]; this module reads the pod and its node, hands out pod IPs from
//! the node's `podCIDR`, and makes the API calls.
//!
//! Pods on other nodes, and pods whose node is gone, are left as they are (the node lifecycle
//! controller is not part of this crate).

pub mod lifecycle;
mod stages;

pub use stages::NodeStages;

use std::collections::{BTreeSet, HashMap};
use std::net::Ipv4Addr;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use kore_runtime::controller::{Action, Controller, ReconcileError, Reconciler, Request};
use kore_runtime::events::Reporter;
use kore_runtime::{Informers, ObjectKey, Recorder, Store};
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use serde_json::{Value, json};

use self::lifecycle::{Memory, Placement, Step, next_step};
use crate::stage::Stage;
use crate::stage::defaults::Native;
use crate::stage::engine::{Decision, Tracker};
use crate::stage::select::Labels;
use crate::stage::template::Facts;

/// The annotation that marks a Node as simulated by kore.
pub const SIMULATED: &str = "kore.dev/simulated";
/// kwok's annotation of a fake Node, honoured too.
pub const KWOK_NODE: &str = "kwok.x-k8s.io/node";
/// The field manager of the kubelets' writes.
pub const MANAGER: &str = "kore-kubelet";

/// How simulated pods behave.
#[derive(Clone, Debug)]
pub struct KubeletConfig {
    /// From acknowledged (`ContainerCreating`) to `Running` (default 0).
    pub start_delay: Duration,
    /// How long stopping containers takes on a graceful delete (at most the grace period;
    /// default 100 ms).
    pub stop_time: Duration,
    /// How long a Job's pod runs before it completes, when it carries no
    /// [`lifecycle::EXIT_AFTER`] annotation (default 1 s).
    pub job_run_time: Duration,
    /// How many pods are handled at once.
    pub workers: usize,
    /// The first crash back-off of a container (`BackOff` in Stage templates; the kubelet's
    /// 10 s).
    pub crash_backoff: Duration,
    /// The longest (the kubelet's 5 min).
    pub max_crash_backoff: Duration,
}

impl Default for KubeletConfig {
    fn default() -> Self {
        KubeletConfig {
            start_delay: Duration::ZERO,
            stop_time: Duration::from_millis(100),
            job_run_time: Duration::from_secs(1),
            workers: 16,
            crash_backoff: Duration::from_secs(10),
            max_crash_backoff: Duration::from_secs(300),
        }
    }
}

/// Pod IPs handed out per node.
#[derive(Default)]
struct Addresses {
    /// Whether the addresses pods already held were read from the cache (once, at the first
    /// address handed out: reading them per node cost a scan of every pod per node).
    learned: bool,
    /// node → the host numbers in use within its podCIDR, and where to look for the next.
    used: HashMap<String, NodeAddresses>,
    /// pod uid → (node, host number).
    by_pod: HashMap<String, (String, u32)>,
}

/// The host numbers of one node's podCIDR in use.
#[derive(Default)]
struct NodeAddresses {
    hosts: BTreeSet<u32>,
    /// The host number after the last one handed out: addresses go round the range, so
    /// handing out the next one is not a search from the start.
    next: u32,
}

impl NodeAddresses {
    /// The lowest free host number from `next` on, wrapping once, in a range of `size`
    /// addresses (.0 is the network, .1 the node's bridge, the last the broadcast).
    fn take(&mut self, size: u32) -> u32 {
        let (first, end) = (2, size.saturating_sub(1).max(3));
        let start = self.next.clamp(first, end - 1);
        let host = (start..end)
            .chain(first..start)
            .find(|h| !self.hosts.contains(h))
            .unwrap_or(first);
        self.hosts.insert(host);
        self.next = host + 1;
        host
    }
}

/// The kubelets' reconciler.
pub struct Kubelets {
    client: kube::Client,
    nodes: Store<Node>,
    pods: Store<Pod>,
    config: KubeletConfig,
    addresses: Mutex<Addresses>,
    /// pod uid → the exact times of this kubelet's writes.
    memory: Mutex<HashMap<String, Memory>>,
    stages: Store<Stage>,
    lifecycles: stages::Lifecycles,
    tracker: Tracker,
    recorder: Recorder,
}

impl std::fmt::Debug for Kubelets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kubelets")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// Why a step failed; retried with backoff.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A status write or delete failed.
    #[error("kubelet write failed: {0}")]
    Write(#[from] kube::Error),
}

pub(crate) fn is_simulated(node: &Node) -> bool {
    node.metadata.annotations.as_ref().is_some_and(|a| {
        a.get(SIMULATED).is_some_and(|v| v == "true")
            || a.get(KWOK_NODE).is_some_and(|v| v == "fake")
    })
}

pub(crate) fn internal_ip(node: &Node) -> String {
    node.status
        .as_ref()
        .and_then(|s| s.addresses.as_ref())
        .and_then(|a| a.iter().find(|a| a.type_ == "InternalIP"))
        .map(|a| a.address.clone())
        .unwrap_or_default()
}

/// The network and size of an IPv4 CIDR (`10.244.3.0/24`).
fn parse_cidr(cidr: &str) -> Option<(u32, u32)> {
    let (addr, bits) = cidr.split_once('/')?;
    let addr: Ipv4Addr = addr.parse().ok()?;
    let bits: u32 = bits.parse().ok()?;
    if !(8..=30).contains(&bits) {
        return None;
    }
    Some((u32::from(addr), 1u32 << (32 - bits)))
}

impl Kubelets {
    /// The kubelets' controller: watches pods (and nodes) through `informers`; run it, or add
    /// it to a manager.
    pub fn controller(informers: &Informers, config: KubeletConfig) -> Controller<Pod, Kubelets> {
        let nodes = informers.get::<Node>(Default::default()).store();
        let pods = informers.get::<Pod>(Default::default()).store();
        let kubelets = Kubelets {
            client: informers.client(),
            nodes,
            pods: pods.clone(),
            addresses: Mutex::new(Addresses::default()),
            memory: Mutex::new(HashMap::new()),
            config: config.clone(),
            stages: informers.get::<Stage>(Default::default()).store(),
            lifecycles: stages::Lifecycles::default(),
            tracker: Tracker::default(),
            recorder: Recorder::new(informers.client(), Reporter::new("kubelet")),
        };
        // A changed Stage is looked at for every pod (Stages change rarely).
        Controller::for_::<Pod>(informers)
            .named(MANAGER)
            .max_concurrent_reconciles(config.workers.max(1))
            .watches::<Stage>(move |_| pods.list().iter().map(|p| ObjectKey::of(&**p)).collect())
            .build(kubelets)
    }

    /// The pod's IP: the one it has, else the next free host of its node's podCIDR after
    /// the last one handed out (as the host-local IPAM of CNI hands them out).
    fn pod_ip(&self, pod: &Pod, node: &Node) -> String {
        if let Some(ip) = pod.status.as_ref().and_then(|s| s.pod_ip.clone()) {
            return ip;
        }
        let node_name = node.metadata.name.clone().unwrap_or_default();
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let cidr = node
            .spec
            .as_ref()
            .and_then(|s| s.pod_cidr.as_deref())
            .and_then(parse_cidr);
        let Some((base, size)) = cidr else {
            return internal_ip(node);
        };
        let mut a = self
            .addresses
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some((_, host)) = a.by_pod.get(&uid) {
            return Ipv4Addr::from(base + host).to_string();
        }
        if !a.learned {
            // The first address since start: learn the ones pods already hold, on every node.
            self.learn(&mut a);
        }
        let host = a.used.entry(node_name.clone()).or_default().take(size);
        a.by_pod.insert(uid, (node_name, host));
        Ipv4Addr::from(base + host).to_string()
    }

    /// Records the pod IPs the cached pods hold, by node, in one pass over the pods.
    fn learn(&self, a: &mut Addresses) {
        a.learned = true;
        let mut bases: HashMap<String, Option<u32>> = HashMap::new();
        for pod in self.pods.list().iter() {
            let Some(node) = pod.spec.as_ref().and_then(|s| s.node_name.as_deref()) else {
                continue;
            };
            let Some(ip) = pod
                .status
                .as_ref()
                .and_then(|s| s.pod_ip.as_deref())
                .and_then(|ip| ip.parse::<Ipv4Addr>().ok())
            else {
                continue;
            };
            let base = *bases.entry(node.to_string()).or_insert_with(|| {
                self.nodes
                    .get(&ObjectKey::cluster(node))
                    .and_then(|n| n.spec.as_ref()?.pod_cidr.as_deref().and_then(parse_cidr))
                    .map(|(base, _)| base)
            });
            let Some(base) = base else { continue };
            let host = u32::from(ip).wrapping_sub(base);
            a.used
                .entry(node.to_string())
                .or_default()
                .hosts
                .insert(host);
            if let Some(uid) = pod.metadata.uid.clone() {
                a.by_pod.insert(uid, (node.to_string(), host));
            }
        }
    }

    fn release(&self, uid: &str) {
        let mut a = self
            .addresses
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some((node, host)) = a.by_pod.remove(uid)
            && let Some(used) = a.used.get_mut(&node)
        {
            used.hosts.remove(&host);
        }
    }

    /// Writes `status`; answers the resourceVersion the pod got.
    async fn write_status(&self, pod: &Pod, status: Value) -> Result<Option<u64>, kube::Error> {
        let api: Api<Pod> = Api::namespaced(
            self.client.clone(),
            pod.metadata.namespace.as_deref().unwrap_or("default"),
        );
        let mut patch = json!({"status": status});
        // The write applies to this pod only, not to a new one of the same name.
        patch["metadata"] = json!({"uid": pod.metadata.uid});
        api.patch_status(
            pod.metadata.name.as_deref().unwrap_or_default(),
            &PatchParams::default(),
            &Patch::Merge(patch),
        )
        .await
        .map(|written| {
            written
                .metadata
                .resource_version
                .and_then(|rv| rv.parse().ok())
        })
    }

    async fn delete_now(&self, pod: &Pod) -> Result<(), kube::Error> {
        let api: Api<Pod> = Api::namespaced(
            self.client.clone(),
            pod.metadata.namespace.as_deref().unwrap_or("default"),
        );
        let mut dp = DeleteParams {
            grace_period_seconds: Some(0),
            ..DeleteParams::default()
        };
        dp.preconditions = Some(kube::api::Preconditions {
            uid: pod.metadata.uid.clone(),
            resource_version: None,
        });
        match api
            .delete(pod.metadata.name.as_deref().unwrap_or_default(), &dp)
            .await
        {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if matches!(s.code, 404 | 409) => Ok(()),
            Err(e) => Err(e),
        }
    }
}

fn gone_ok<T: Default>(r: Result<T, kube::Error>) -> Result<T, kube::Error> {
    match r {
        Err(kube::Error::Api(s)) if matches!(s.code, 404 | 409) => Ok(T::default()),
        other => other,
    }
}

impl Reconciler<Pod> for Kubelets {
    type Error = Error;

    async fn reconcile(&self, request: Request<Pod>) -> Result<Action, ReconcileError<Error>> {
        let Some(pod) = request.object() else {
            if let Some(uid) = request.last_state().and_then(|p| p.metadata.uid.clone()) {
                self.release(&uid);
                self.tracker.forget(&uid);
                self.memory
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .remove(&uid);
            }
            return Ok(Action::done());
        };
        let Some(node_name) = pod.spec.as_ref().and_then(|s| s.node_name.as_deref()) else {
            return Ok(Action::done());
        };
        let Some(node) = self.nodes.get(&kore_runtime::ObjectKey::cluster(node_name)) else {
            return Ok(Action::done());
        };
        if !is_simulated(&node) {
            return Ok(Action::done());
        }
        let lifecycle = self.lifecycles.get(&self.stages, "Pod");
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let rv = pod.metadata.resource_version.clone().unwrap_or_default();
        let labels = Labels {
            labels: pod.metadata.labels.as_ref(),
            annotations: pod.metadata.annotations.as_ref(),
        };
        match self
            .tracker
            .decide(&lifecycle, &uid, &rv, labels, || stages::as_json(&*pod))
        {
            Decision::Apply(stage, json) => {
                let facts = Facts {
                    node_name: node_name.to_string(),
                    node_ip: internal_ip(&node),
                    pod_ip: self.pod_ip(&pod, &node),
                    uid: uid.clone(),
                    node_conditions: Value::Null,
                    backoff: self.config.crash_backoff,
                    max_backoff: self.config.max_crash_backoff,
                };
                return Ok(stages::apply(
                    Api::namespaced(
                        self.client.clone(),
                        pod.metadata.namespace.as_deref().unwrap_or("default"),
                    ),
                    &self.recorder,
                    &self.tracker,
                    &*pod,
                    &stage,
                    &json,
                    &facts,
                )
                .await?);
            }
            Decision::Wait(d) => return Ok(Action::requeue_after(d)),
            Decision::Stale => return Ok(Action::done()),
            Decision::Native => {}
        }
        let placement = Placement {
            host_ip: internal_ip(&node),
            pod_ip: String::new(),
        };
        let now = k8s_openapi::jiff::Timestamp::now();
        let memory = self
            .memory
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&uid)
            .copied()
            .unwrap_or_default();
        if memory.is_stale(&pod) {
            // The event of the last write brings the pod back; a step decided now would
            // repeat that write.
            return Ok(Action::done());
        }
        let step = next_step(&pod, &placement, &self.config, now, memory);
        // Each native step is one of kore's default Stages; it runs only while that Stage is
        // installed and unchanged.
        let native = match &step {
            Step::Write(status, _) => match status["phase"].as_str() {
                Some("Pending") => Some(Native::Create),
                Some("Succeeded" | "Failed") => Some(Native::Complete),
                _ => Some(Native::Ready),
            },
            Step::Delete | Step::StopAndDelete(_) => Some(Native::Delete),
            Step::Wait(_) | Step::Nothing => None,
        };
        if native.is_some_and(|n| !lifecycle.runs_natively(n)) {
            return Ok(Action::done());
        }
        let after = |d: Option<Duration>| match d {
            Some(d) => Action::requeue_after(d),
            None => Action::done(),
        };
        match step {
            Step::Nothing => Ok(Action::done()),
            Step::Wait(d) => Ok(Action::requeue_after(d)),
            Step::Delete => {
                self.delete_now(&pod).await.map_err(Error::from)?;
                Ok(Action::done())
            }
            Step::StopAndDelete(status) => {
                gone_ok(self.write_status(&pod, status).await).map_err(Error::from)?;
                self.delete_now(&pod).await.map_err(Error::from)?;
                Ok(Action::done())
            }
            Step::Write(mut status, next) => {
                if status.get("podIP").is_some() {
                    let ip = self.pod_ip(&pod, &node);
                    status["podIP"] = json!(ip);
                    status["podIPs"] = json!([{"ip": ip}]);
                }
                let stage = status["phase"].as_str().map(String::from);
                let written =
                    gone_ok(self.write_status(&pod, status).await).map_err(Error::from)?;
                let mut memories = self.memory.lock().unwrap_or_else(PoisonError::into_inner);
                let m = memories.entry(uid).or_default();
                m.written = written.or(m.written);
                match stage.as_deref() {
                    Some("Pending") => m.acknowledged = Some(now),
                    Some("Running") if m.started.is_none() => m.started = Some(now),
                    _ => {}
                }
                Ok(after(next))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_go_round_the_range_skipping_those_in_use() {
        // A /29: hosts 2..=6 (0 the network, 1 the bridge, 7 the broadcast).
        let mut node = NodeAddresses::default();
        assert_eq!(node.take(8), 2);
        assert_eq!(node.take(8), 3);
        node.hosts.insert(4);
        assert_eq!(node.take(8), 5);
        node.hosts.remove(&2);
        assert_eq!(node.take(8), 6);
        // The end of the range: round to the lowest free one.
        assert_eq!(node.take(8), 2);
        assert_eq!(parse_cidr("10.244.3.0/29"), Some((0x0af4_0300, 8)));
    }
}
