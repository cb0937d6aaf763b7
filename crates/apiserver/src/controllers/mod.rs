//! Controllers that run inside the server, as kube-controller-manager's would next to a real
//! API server: the garbage collector ([`gc`]), the namespace lifecycle ([`namespace`]),
//! CustomResourceDefinitions ([`crd`]), the `default` ServiceAccount of every namespace
//! ([`serviceaccounts`]), ClusterRole aggregation ([`clusterroles`]), the `default/kubernetes`
//! Service and its endpoints ([`kubernetes_service`]), the `kube-root-ca.crt` ConfigMap of
//! every namespace ([`root_ca`]) and the signer of approved CertificateSigningRequests
//! ([`csr_signing`], here because the CA's key lives in the server).
//!
//! Each controller is one task that owns its state and stops when its cancellation token is
//! cancelled; the server spawns them on its `TaskTracker` and waits for them on shutdown. The
//! level-triggered ones (all but the garbage collector) are passes run by
//! one shared loop (`level.rs`); the garbage collector feeds its workers through
//! `kore-workqueue`, the queue kore-runtime's controllers use too.

pub mod apiservices;
pub mod clusterroles;
pub mod componentstatuses;
pub mod crd;
pub mod csr_signing;
pub mod gc;
pub mod kubernetes_service;
mod level;
pub mod namespace;
pub mod root_ca;
pub mod serviceaccounts;
