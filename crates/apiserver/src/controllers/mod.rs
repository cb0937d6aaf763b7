//! Controllers that run inside the server, as kube-controller-manager's would next to a real
//! API server: the garbage collector ([`gc`]), the namespace lifecycle ([`namespace`]),
//! CustomResourceDefinitions ([`crd`]), the `default` ServiceAccount of every namespace
//! ([`serviceaccounts`]) and ClusterRole aggregation ([`clusterroles`]).
//!
//! Each controller is one task that owns its state and stops when its cancellation token is
//! cancelled.

pub mod clusterroles;
pub mod crd;
pub mod gc;
pub mod namespace;
pub mod serviceaccounts;
