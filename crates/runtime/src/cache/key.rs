//! [`ObjectKey`]: the namespace and name that identify an object of one kind.

use std::fmt;

/// The namespace (absent for cluster-scoped kinds) and name of an object.
///
/// Displays as `namespace/name`, or `name` for cluster-scoped objects; that string is also
/// how the cache keys its entries, since names never contain `/`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey {
    /// The namespace, `None` for cluster-scoped objects.
    pub namespace: Option<String>,
    /// The name.
    pub name: String,
}

impl ObjectKey {
    /// The key of a namespaced object.
    pub fn namespaced(namespace: impl Into<String>, name: impl Into<String>) -> ObjectKey {
        ObjectKey {
            namespace: Some(namespace.into()),
            name: name.into(),
        }
    }

    /// The key of a cluster-scoped object.
    pub fn cluster(name: impl Into<String>) -> ObjectKey {
        ObjectKey {
            namespace: None,
            name: name.into(),
        }
    }

    /// The key of `obj`, from its metadata (an empty name if the object has none).
    pub fn of<K: kube::Resource>(obj: &K) -> ObjectKey {
        let meta = obj.meta();
        ObjectKey {
            namespace: meta.namespace.clone().filter(|ns| !ns.is_empty()),
            name: meta.name.clone().unwrap_or_default(),
        }
    }

    /// The display form of the key of the object whose metadata holds `namespace` and
    /// `name`, as [`ObjectKey::of`] and `to_string` would make it (an empty namespace is a
    /// cluster-scoped object's), without building the key.
    pub(crate) fn display_form(namespace: Option<&str>, name: &str) -> String {
        match namespace {
            Some(ns) if !ns.is_empty() => format!("{ns}/{name}"),
            _ => name.to_owned(),
        }
    }

    /// Parses the display form back (`ns/name` or `name`).
    pub(crate) fn parse(s: &str) -> ObjectKey {
        match s.split_once('/') {
            Some((ns, name)) => ObjectKey::namespaced(ns, name),
            None => ObjectKey::cluster(s),
        }
    }

    /// The display form, as the cache stores it.
    pub(crate) fn to_boxed(&self) -> Box<str> {
        self.to_string().into_boxed_str()
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{ns}/{}", self.name),
            None => f.write_str(&self.name),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_form_parses_back_to_the_same_key() {
        for key in [
            ObjectKey::namespaced("ns", "a"),
            ObjectKey::cluster("node-1"),
        ] {
            assert_eq!(ObjectKey::parse(&key.to_string()), key);
        }
        assert_eq!(ObjectKey::namespaced("ns", "a").to_string(), "ns/a");
        assert_eq!(ObjectKey::cluster("n").to_string(), "n");
        assert_eq!(ObjectKey::display_form(Some("ns"), "a"), "ns/a");
        assert_eq!(ObjectKey::display_form(Some(""), "n"), "n");
        assert_eq!(ObjectKey::display_form(None, "n"), "n");
    }
}
