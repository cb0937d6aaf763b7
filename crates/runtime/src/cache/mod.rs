//! The cache informers fill: a [`Store`] of one kind's objects, keyed by [`ObjectKey`], with
//! secondary indexes registered by name.
//!
//! One writer (the informer, plus the [`CachedClient`](crate::client::CachedClient) recording
//! its own writes) and any number of cheap readers. Objects are held once, in a packed binary
//! form smaller than their JSON; a bounded cache of decoded `Arc<K>`s beside it lets readers
//! of a hot object share one allocation. See `docs/design/informer.md` for why and what it
//! costs.
//!
//! Start with [`crate::informer::SharedInformer::store`]; stores are not built by hand.

mod decoded;
mod key;
mod packed;
mod store;
mod typed;

/// The cache's hash maps use foldhash (hashbrown's default hasher, randomly seeded) rather than
/// SipHash, as the workqueue does: every event, every read and every index lookup hashes an
/// object key, and keys are names the cluster's users choose but cannot make collide without
/// knowing the seed.
type Map<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;
/// A set hashed as [`Map`] is.
type Set<T> = std::collections::HashSet<T, foldhash::fast::RandomState>;

pub use key::ObjectKey;
pub use store::Store;

pub(crate) use store::{Entry, ListBuffer, Listed, Outcome, Packed, parse_rv};
