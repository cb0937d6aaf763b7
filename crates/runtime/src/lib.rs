//! kore-runtime: the control-loop machinery for Kubernetes operators.
//!
//! Informers list and watch the API server into an indexed cache; controllers map
//! changes to keys in a deduplicating, rate-limited workqueue; workers hand each key
//! to a [`Reconciler`](controller)-style function; a manager runs them all with
//! shared informers, leader election, metrics, health probes and graceful shutdown.
//! Everything talks to the API server through `kube::Client`, so the same code runs
//! against kore-apiserver in tests and against a real cluster in production.

pub mod cache;
pub mod client;
pub mod conditions;
pub mod controller;
pub mod events;
pub mod finalizer;
pub mod informer;
pub mod manager;
pub mod metrics;
pub mod quantity;
pub mod queue;
pub mod status;

pub use cache::{ObjectKey, Store};
pub use client::CachedClient;
pub use controller::{Action, Controller, Reconciler};
pub use events::Recorder;
pub use informer::{Change, InformerConfig, Informers, SharedInformer, Subscription};
pub use manager::{Manager, Runnable};
pub use status::StatusWriter;
