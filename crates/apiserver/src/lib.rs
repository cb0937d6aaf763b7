//! kore-apiserver: a Kubernetes-compatible API server that runs in-process or as a command.
//!
//! kubectl, client-go, the `kube` crate and the Python client work against it unchanged, so
//! everything that needs a Kubernetes API (operator tests, demos, local development) runs
//! without a cluster. It reports Kubernetes v1.32 and behaves as that version does for the
//! endpoints it serves; `docs/design/apiserver.md` lists what it does differently.
//!
//! - [`api`]: the ground floor every layer speaks: `Status` errors, field errors, the user,
//!   the parsed request, and the limits on what the server accepts.
//! - [`storage`]: keys, revisions, optimistic concurrency, watch history; memory and durable
//!   backends.
//! - [`registry`]: the served resources and the verbs with Kubernetes semantics.
//! - [`http`]: routing, negotiation, rendering, watch streams, discovery and OpenAPI.
//! - [`schema`]: structural schemas of custom resources: prune, default, validate.
//! - [`patch`]: patch algorithms; `selector`: label and field selectors (internal).
//! - [`auth`]: TLS material, tokens and kubeconfig files.
//! - [`server`]: [`server::ApiServer`], which puts it together, and the socket serve loop.
//!
//! Start with [`server::ApiServer`].
#![forbid(unsafe_code)]

pub mod api;
pub mod auth;
pub mod controllers;
pub mod http;
pub mod patch;
pub mod registry;
pub mod schema;
pub(crate) mod selector;
pub mod server;
pub mod storage;

#[cfg(test)]
mod layering;
