//! The built-in API of a Kubernetes 1.33 server, kind by kind, in one test binary (one link
//! instead of one per file): verbs, defaults, validation, subresources, Tables, discovery.
//! Run one part with `cargo test -p kore-testenv --test builtin -- apps::`.

mod common;

mod apiservices;
mod apps;
mod autoscaling;
mod batch;
mod certificates;
mod core_extras;
mod core_v1;
mod discovery;
mod eviction;
mod groups;
mod kubectl;
mod omitted;
mod openapi;
mod pod_subresources;
mod protobuf;
mod proxy;
