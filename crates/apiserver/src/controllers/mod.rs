//! Controllers that run inside the server, as kube-controller-manager's would next to a real
//! API server: the garbage collector ([`gc`]), the namespace lifecycle ([`namespace`]),
//! CustomResourceDefinitions ([`crd`]), the `default` ServiceAccount of every namespace
//! ([`serviceaccounts`]) and ClusterRole aggregation ([`clusterroles`]).
//!
//! Each controller is one task that owns its state and stops when its cancellation token is
//! cancelled; the server spawns them on its `TaskTracker` and waits for them on shutdown. The
//! four level-triggered ones (namespaces, CRDs, ClusterRoles, ServiceAccounts) are passes run by
//! one shared loop (`level.rs`); the garbage collector feeds its workers through
//! `kore-workqueue`, the queue kore-runtime's controllers use too.

pub mod apiservices;
pub mod clusterroles;
pub mod componentstatuses;
pub mod crd;
pub mod gc;
mod level;
pub mod namespace;
pub mod serviceaccounts;
