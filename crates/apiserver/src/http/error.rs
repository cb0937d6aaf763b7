//! Turning an [`ApiError`] into an HTTP response: its `Status` as JSON, with `Retry-After`
//! where the error asks the client to come back.

use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http::{HeaderValue, header};

pub use crate::api::error::{ApiError, GroupResource};

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = Bytes::from(self.status().to_string());
        let mut resp = (self.code(), body).into_response();
        resp.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
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
