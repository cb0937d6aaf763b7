//! [`ObjectKey`]: the namespace and name that identify an object of one kind.

use std::cmp::Ordering;
use std::fmt;

/// The namespace (absent for cluster-scoped kinds) and name of an object.
///
/// Displays as `namespace/name`, or `name` for cluster-scoped objects; that string is also
/// how the cache keys its entries, since names never contain `/`. The key *is* that string
/// (one allocation, with the position of the `/`): client-go's queues hold the same
/// `namespace/name` strings. Reading it back (`namespace()`, `name()`, `as_str()`) borrows
/// from it, and a cache lookup by key builds nothing.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct ObjectKey {
    /// `namespace/name`, or `name` for a cluster-scoped object.
    display: Box<str>,
    /// The length of the namespace (where the `/` is), `None` for a cluster-scoped object.
    slash: Option<u32>,
}

impl ObjectKey {
    /// The key of a namespaced object.
    pub fn namespaced(namespace: impl AsRef<str>, name: impl AsRef<str>) -> ObjectKey {
        let (namespace, name) = (namespace.as_ref(), name.as_ref());
        let mut display = String::with_capacity(namespace.len() + 1 + name.len());
        display.push_str(namespace);
        display.push('/');
        display.push_str(name);
        ObjectKey {
            display: display.into_boxed_str(),
            // Longer namespaces do not exist (Kubernetes allows 63 bytes); the key stays
            // well-formed anyway, only its split is lost.
            slash: u32::try_from(namespace.len()).ok(),
        }
    }

    /// The key of a cluster-scoped object.
    pub fn cluster(name: impl Into<String>) -> ObjectKey {
        ObjectKey {
            display: name.into().into_boxed_str(),
            slash: None,
        }
    }

    /// The key of `obj`, from its metadata (an empty name if the object has none).
    pub fn of<K: kube::Resource>(obj: &K) -> ObjectKey {
        let meta = obj.meta();
        ObjectKey::of_meta(
            meta.namespace.as_deref(),
            meta.name.as_deref().unwrap_or_default(),
        )
    }

    /// The key of the object whose metadata holds `namespace` and `name`: an empty
    /// namespace is a cluster-scoped object's.
    pub(crate) fn of_meta(namespace: Option<&str>, name: &str) -> ObjectKey {
        match namespace {
            Some(ns) if !ns.is_empty() => ObjectKey::namespaced(ns, name),
            _ => ObjectKey::cluster(name),
        }
    }

    /// The namespace, `None` for a cluster-scoped object.
    pub fn namespace(&self) -> Option<&str> {
        let slash = usize::try_from(self.slash?).ok()?;
        self.display.get(..slash)
    }

    /// The name.
    pub fn name(&self) -> &str {
        match self.slash.and_then(|s| usize::try_from(s).ok()) {
            Some(slash) => self.display.get(slash + 1..).unwrap_or_default(),
            None => &self.display,
        }
    }

    /// The display form, `namespace/name` or `name`, without building it.
    pub fn as_str(&self) -> &str {
        &self.display
    }

    /// Parses the display form back (`ns/name` or `name`).
    pub(crate) fn parse(s: &str) -> ObjectKey {
        match s.split_once('/') {
            Some((ns, name)) => ObjectKey::namespaced(ns, name),
            None => ObjectKey::cluster(s),
        }
    }
}

/// Cluster-scoped keys first, then by namespace, then by name: the order of the
/// (namespace, name) pair, not of the display strings (`a/b` sorts after `a-x/c`).
impl Ord for ObjectKey {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.namespace(), self.name()).cmp(&(other.namespace(), other.name()))
    }
}

impl PartialOrd for ObjectKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Debug for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ObjectKey")
            .field("namespace", &self.namespace())
            .field("name", &self.name())
            .finish()
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.display)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_display_form_parses_back_to_the_same_key() {
        for key in [
            ObjectKey::namespaced("ns", "a"),
            ObjectKey::cluster("node-1"),
        ] {
            assert_eq!(ObjectKey::parse(&key.to_string()), key);
        }
        assert_eq!(ObjectKey::namespaced("ns", "a").to_string(), "ns/a");
        assert_eq!(ObjectKey::cluster("n").to_string(), "n");
        assert_eq!(ObjectKey::of_meta(Some("ns"), "a").as_str(), "ns/a");
        assert_eq!(ObjectKey::of_meta(Some(""), "n").as_str(), "n");
        assert_eq!(ObjectKey::of_meta(None, "n").as_str(), "n");
    }

    #[test]
    fn parts_read_back_and_keys_order_by_namespace_then_name() {
        let key = ObjectKey::namespaced("ns", "a");
        assert_eq!(
            (key.namespace(), key.name(), key.as_str()),
            (Some("ns"), "a", "ns/a")
        );
        let node = ObjectKey::cluster("node-1");
        assert_eq!((node.namespace(), node.name()), (None, "node-1"));
        // An empty namespace stays a namespaced key, as it was given.
        let empty = ObjectKey::namespaced("", "x");
        assert_eq!((empty.namespace(), empty.name()), (Some(""), "x"));
        // A cluster-scoped key is never equal to a namespaced one with the same display form.
        assert_ne!(ObjectKey::cluster("ns/a"), key);
        let mut keys = [
            ObjectKey::namespaced("a-x", "c"),
            ObjectKey::namespaced("a", "b"),
            ObjectKey::cluster("z"),
        ];
        keys.sort();
        let sorted: Vec<String> = keys.iter().map(ToString::to_string).collect();
        assert_eq!(sorted, ["z", "a/b", "a-x/c"]);
    }
}
