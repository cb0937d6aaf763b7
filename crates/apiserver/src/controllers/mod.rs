//! Controllers that run inside the server, as kube-controller-manager's would next to a real
//! API server: the namespace lifecycle, the `default` ServiceAccount of every namespace and
//! ClusterRole aggregation.
//!
//! Each controller is one task that owns its state and stops when its cancellation token is
//! cancelled.

pub mod clusterroles;
pub mod namespace;
pub mod serviceaccounts;
