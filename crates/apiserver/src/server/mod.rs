//! The network front of the API server: accepting connections and running the HTTP router on them.
//!
//! [`serve::serve`] is the entry point. It owns the accept loop, TLS, HTTP/1.1 and HTTP/2, and
//! graceful shutdown; it knows nothing of Kubernetes. Routing, authentication and handlers live
//! in the [`axum::Router`] it is given, which reads the peer address and the transport from the
//! request extensions ([`serve::Transport`], [`axum::extract::ConnectInfo`]).

pub mod serve;

mod api;
mod bootstrap;

pub use api::{ADMIN_CERTIFICATE_USER, ApiServer, Config, Endpoint, RouterWithToken, ServerError};
pub use bootstrap::{DEFAULT_STORAGE_CLASS, SIMULATED_PROVISIONER};

#[cfg(test)]
mod tests;
