//! A tally of RBAC decisions, per user and permission, kept when
//! the server is configured to record authorizations (`record_authorizations`).
//!
//! It answers "what did this ServiceAccount actually do, and was it ever refused?", which is
//! how a test proves that an operator's Role grants exactly what its code uses. The tally
//! holds one entry per distinct (user, verb, group, resource, subresource), so its size is
//! bounded by the permissions used, not by the number of requests.

use std::collections::BTreeMap;
use std::sync::Mutex;

use super::rbac::{Attributes, Target};

/// One permission a user exercised, and how often it was allowed and refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuthorizationSummary {
    /// The user (`system:serviceaccount:<ns>:<name>` for a ServiceAccount).
    pub user: String,
    /// The RBAC verb (`get`, `list`, `watch`, `create`, `update`, `patch`, `delete`, …).
    pub verb: String,
    /// The API group (`""` for core); empty for non-resource requests.
    pub group: String,
    /// The plural resource, or the path of a non-resource request.
    pub resource: String,
    /// The subresource, or `""`.
    pub subresource: String,
    /// Requests allowed.
    pub allowed: u64,
    /// Requests refused with 403.
    pub denied: u64,
}

type Key = (String, String, String, String, String);

/// The tally; cheap to update (one lock, no allocation for a permission seen before).
#[derive(Debug, Default)]
pub struct AuthorizationLog {
    entries: Mutex<BTreeMap<Key, (u64, u64)>>,
}

impl AuthorizationLog {
    /// Counts one decision.
    pub(crate) fn record(&self, user: &str, attrs: &Attributes, allowed: bool) {
        let (group, resource, subresource) = match &attrs.target {
            Target::Resource(r) => (
                r.group.as_str(),
                r.resource.as_str(),
                r.subresource.as_str(),
            ),
            Target::NonResource { path } => ("", path.as_str(), ""),
        };
        let key = (
            user.to_owned(),
            attrs.verb.clone(),
            group.to_owned(),
            resource.to_owned(),
            subresource.to_owned(),
        );
        let mut entries = self
            .entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let counts = entries.entry(key).or_default();
        if allowed {
            counts.0 += 1;
        } else {
            counts.1 += 1;
        }
    }

    /// Everything recorded, ordered by user, verb, group, resource and subresource.
    pub(crate) fn summaries(&self) -> Vec<AuthorizationSummary> {
        let entries = self
            .entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        entries
            .iter()
            .map(
                |((user, verb, group, resource, subresource), &(allowed, denied))| {
                    AuthorizationSummary {
                        user: user.clone(),
                        verb: verb.clone(),
                        group: group.clone(),
                        resource: resource.clone(),
                        subresource: subresource.clone(),
                        allowed,
                        denied,
                    }
                },
            )
            .collect()
    }
}
