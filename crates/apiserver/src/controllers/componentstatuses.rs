//! Writes the ComponentStatuses a healthy server lists (see
//! `registry::builtin::componentstatus`) once, at start.

use crate::api::error::ApiError;
use crate::registry::Registry;
use crate::registry::builtin::{COMPONENTS, healthy_component};
use crate::registry::rest::WriteOptions;

/// Creates the component statuses that are missing.
pub async fn ensure(registry: &Registry) {
    let Some(res) = registry.catalog().find("", "v1", "componentstatuses") else {
        return;
    };
    for name in COMPONENTS {
        if registry.get_value(&res, None, name).is_ok() {
            continue;
        }
        match registry
            .create(
                &res,
                None,
                healthy_component(name),
                &WriteOptions::default(),
            )
            .await
        {
            Ok(_) | Err(ApiError::AlreadyExists { .. }) => {}
            Err(e) => tracing::warn!(error = %e, component = name, "writing its status failed"),
        }
    }
}
