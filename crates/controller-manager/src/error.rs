//! The error a sync of any controller ends with. Every variant is retried with the key's
//! backoff: an API failure or conflict passes, and a cache that was behind catches up.

/// Why a sync failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SyncError {
    /// A request to the API server failed (a conflict means the cache was stale).
    #[error("{verb} {what} failed")]
    Api {
        /// The verb: `create`, `delete`, `patch`, `update status`, …
        verb: &'static str,
        /// What was written, `kind namespace/name`.
        what: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// A write through a cached client failed.
    #[error("writing {what} failed")]
    Cached {
        /// What was written.
        what: String,
        /// The client error.
        #[source]
        source: kore_runtime::client::Error,
    },
    /// Objects could not be adopted: the owner changed or is being deleted.
    #[error("cannot adopt for {0}")]
    CannotAdopt(String),
    /// Creating or deleting some of an owner's pods failed; the rest went through.
    #[error("{failed} of {attempted} pod {verb}s failed, the first with: {first}")]
    Pods {
        /// `create` or `delete`.
        verb: &'static str,
        /// How many failed.
        failed: usize,
        /// How many were tried.
        attempted: usize,
        /// The first failure's message.
        first: String,
    },
    /// Two ReplicaSets would get the same name: the Deployment's collision count was raised,
    /// the next sync uses another name.
    #[error("hash collision for {0}")]
    HashCollision(String),
}

impl SyncError {
    pub(crate) fn api(verb: &'static str, what: impl Into<String>, source: kube::Error) -> Self {
        SyncError::Api {
            verb,
            what: what.into(),
            source,
        }
    }

    pub(crate) fn cached(what: impl Into<String>, source: kore_runtime::client::Error) -> Self {
        SyncError::Cached {
            what: what.into(),
            source,
        }
    }
}

/// The HTTP status of an API error, if the server answered with one.
pub(crate) fn status_code(e: &kube::Error) -> Option<u16> {
    match e {
        kube::Error::Api(s) => Some(s.code),
        _ => None,
    }
}

/// The message of an API error, as the server wrote it.
pub(crate) fn message(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => s.message.clone(),
        other => other.to_string(),
    }
}
