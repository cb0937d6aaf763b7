//! The authenticated user a request acts as.

use std::sync::Arc;

/// Who made a request.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct User {
    /// The user name.
    pub name: String,
    /// The groups.
    pub groups: Vec<String>,
    /// The uid (a ServiceAccount's `metadata.uid`), or empty.
    pub uid: String,
    /// Extra attributes (a token's credential id, a bound Pod).
    pub extra: std::collections::BTreeMap<String, Vec<String>>,
}

impl User {
    /// The administrator: `system:masters`, allowed everything. Shared, built once.
    pub fn admin() -> Arc<User> {
        static ADMIN: std::sync::OnceLock<Arc<User>> = std::sync::OnceLock::new();
        ADMIN
            .get_or_init(|| {
                Arc::new(User {
                    name: "kore-admin".into(),
                    groups: vec!["system:masters".into(), "system:authenticated".into()],
                    ..User::default()
                })
            })
            .clone()
    }
}
