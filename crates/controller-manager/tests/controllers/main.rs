//! kore's controller manager against the in-process API server, controller by controller, in
//! one test binary (one link instead of one per file). Run one part with
//! `cargo test -p kore-controller-manager --test controllers -- deployment::`.

mod common;

mod cronjob;
mod daemonset;
mod deployment;
mod disruption;
mod endpoints;
mod failover;
mod job;
mod kubectl;
mod nodelifecycle;
mod replicaset;
mod replication;
mod statefulset;
mod ttl;
mod volume;
