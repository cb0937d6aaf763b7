//! The ground floor: what every layer of the API server speaks, and nothing else.
//!
//! - [`body`]: [`body::BodyType`], how a request body is encoded (objects and patches);
//! - [`data_dir`]: the names of the files kept in the data directory;
//! - [`encoding`]: objects as JSON with Kubernetes' key order (Go struct order for built-in kinds);
//! - [`error`]: [`error::ApiError`], a failure shaped as a Kubernetes `Status` (code, reason,
//!   message, causes), and [`error::GroupResource`];
//! - [`field`]: [`field::FieldError`], one invalid field with its path;
//! - [`limits`]: the nesting depth and JSON patch limits, and the non-recursive checks behind
//!   them;
//! - [`options`]: [`options::Options`], a request's list, watch, write, patch and delete
//!   options, typed;
//! - [`propagation`]: [`propagation::Propagation`], a deletion's propagation policy;
//! - [`request_info`]: [`request_info::RequestInfo`], a request parsed once (target, verb,
//!   query, typed options);
//! - [`transport`]: [`transport::Transport`], how a request reached the server;
//! - [`user`]: [`user::User`], who a request acts as;
//! - [`validation`]: the name rules and the `metadata` checks every kind shares.
//!
//! Nothing here imports another module of this crate: storage, schema, patch, the registry,
//! auth, the controllers and HTTP all build on it, and it builds on none of them.

pub mod body;
pub mod data_dir;
pub mod encoding;
pub mod error;
pub mod field;
pub mod limits;
pub mod options;
pub mod propagation;
pub mod request_info;
pub mod transport;
pub mod user;
pub mod validation;
