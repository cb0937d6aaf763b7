//! [`Propagation`]: what happens to an object's dependents when it is deleted
//! (`DeleteOptions.propagationPolicy`).

/// A deletion's propagation policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Propagation {
    /// Delete the object now; the garbage collector deletes its dependents afterwards.
    Background,
    /// Delete the dependents first (the object waits with the `foregroundDeletion` finalizer).
    Foreground,
    /// Keep the dependents, without their reference to the object (the `orphan` finalizer).
    Orphan,
}

impl Propagation {
    /// The name on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Propagation::Background => "Background",
            Propagation::Foreground => "Foreground",
            Propagation::Orphan => "Orphan",
        }
    }

    /// Reads a `propagationPolicy` value; `None` for anything Kubernetes does not accept.
    pub fn parse(value: &str) -> Option<Propagation> {
        match value {
            "Background" => Some(Propagation::Background),
            "Foreground" => Some(Propagation::Foreground),
            "Orphan" => Some(Propagation::Orphan),
            _ => None,
        }
    }
}
