//! The cache informers fill: a [`Store`] of one kind's objects, keyed by [`ObjectKey`], with
//! secondary indexes registered by name.
//!
//! One writer (the informer, plus the [`CachedClient`](crate::client::CachedClient) recording
//! its own writes) and any number of cheap readers. Objects are held once, in a packed binary
//! form smaller than their JSON, and decoded into `Arc<K>` for each read; see
//! `docs/design/informer.md` for why and what it costs.
//!
//! Start with [`crate::informer::SharedInformer::store`]; stores are not built by hand.

mod key;
mod packed;
mod store;

pub use key::ObjectKey;
pub use store::Store;

pub(crate) use store::{Entry, ListBuffer, Listed, Outcome, Packed, parse_rv};
