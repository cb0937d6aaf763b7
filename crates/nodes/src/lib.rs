//! kore-nodes: simulated nodes, written on `kube::Client` and kore-runtime so they run
//! against kore or any Kubernetes API server.
//!
//! - [`NodeSet`] registers Node objects shaped like a kubelet's (capacity and allocatable,
//!   well-known labels, addresses, nodeInfo, the four conditions) and renews one Lease per
//!   node in `kube-node-lease` every [`NodeConfig::lease_interval`] (10 s by default, as the
//!   kubelet). [`NodeSet::stop_heartbeat`] stops one node's renewals, so its Lease goes stale.
//! - [`Scheduler`] binds pods to nodes through `pods/binding` as kube-scheduler does.
//! - [`Kubelets`] drive the pods bound to simulated nodes through their lifecycle.
//! - [`stage`]: kwok's Stage API (`kwok.x-k8s.io/v1alpha1`): the lifecycles of simulated
//!   pods and nodes as data; kore's defaults are Stages too ([`stage::defaults`]).
//! - [`Simulation`] runs all three in the current process.
//!
//! The design, and what differs from Kubernetes, is in docs/design/nodes.md.

pub mod kubelet;
mod nodeset;
pub mod resources;
pub mod scheduler;
mod simulation;
pub mod stage;

pub use kubelet::{KubeletConfig, Kubelets, NodeStages};
pub use nodeset::{HEARTBEAT, LEASE_NAMESPACE, NodeConfig, NodeSet, set_heartbeat};
pub use scheduler::{Scheduler, SchedulerConfig};
pub use simulation::{Simulation, SimulationConfig};
pub use stage::Stage;

pub(crate) use nodeset::now_seconds;
