//! Turning an [`ApiError`] into an HTTP response: its `Status` as JSON, with `Retry-After`
//! where the error asks the client to come back.

use axum::response::{IntoResponse, Response};
use http::{HeaderValue, header};

pub use crate::api::error::{ApiError, GroupResource};

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut resp = super::json_response(self.code(), super::encoded(&self.status()));
        if let ApiError::TooLargeResourceVersion { .. } | ApiError::TooManyRequests(_) = self {
            resp.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        }
        if let ApiError::TooManyRequestsBecause {
            retry_after_seconds: n @ 1..,
            ..
        } = self
            && let Ok(v) = HeaderValue::from_str(&n.to_string())
        {
            resp.headers_mut().insert(header::RETRY_AFTER, v);
        }
        resp
    }
}
