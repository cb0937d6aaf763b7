//! How storage failures read as API errors.

use crate::api::error::{ApiError, GroupResource};

use super::StorageError;

impl ApiError {
    /// Maps a storage failure on `resource`/`name`.
    pub fn from_storage(e: StorageError, resource: &GroupResource, name: &str) -> Self {
        match e {
            StorageError::NotFound { .. } => ApiError::NotFound {
                resource: resource.clone(),
                name: name.into(),
            },
            StorageError::AlreadyExists { .. } => ApiError::AlreadyExists {
                resource: resource.clone(),
                name: name.into(),
                message: None,
            },
            StorageError::Conflict { message } => ApiError::Conflict {
                resource: resource.clone(),
                name: name.into(),
                detail: message,
            },
            StorageError::Expired { requested, oldest } => ApiError::Expired {
                message: format!("too old resource version: {requested} ({oldest})"),
                continue_token: None,
            },
            StorageError::TooLarge { requested, current } => {
                ApiError::TooLargeResourceVersion { requested, current }
            }
            StorageError::Backend(e) => ApiError::Unavailable(format!("storage unavailable: {e}")),
            StorageError::Unreadable { key, message } => ApiError::StoreReadError {
                resource: resource.clone(),
                name: name.into(),
                message: format!(
                    "failed to read {resource} {name:?} from the storage: {message}; it can only be deleted"
                ),
                keys: vec![(key, message)],
            },
            StorageError::Aborted | StorageError::Internal(_) => ApiError::Internal(e.to_string()),
        }
    }
}
