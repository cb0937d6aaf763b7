//! [`ApiError`]: every failure the API reports, shaped as a Kubernetes `Status`.
//!
//! Clients read `code`, `reason`, `message` and `details` (kubectl prints
//! `Error from server (<reason>): <message>`, the Python client reads all three keys, kube-rs
//! parses the whole Status), so the wording follows Kubernetes where clients or users rely on
//! it. Every layer returns these; only `http/` turns one into a response.

use http::StatusCode;
use serde_json::{Map, Value, json};

use super::field::FieldError;

/// A resource name qualified by its group: `configmaps`, `deployments.apps`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupResource {
    /// The API group ("" for core).
    pub group: String,
    /// The plural resource name.
    pub resource: String,
}

impl std::fmt::Display for GroupResource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.group.is_empty() {
            f.write_str(&self.resource)
        } else {
            write!(f, "{}.{}", self.resource, self.group)
        }
    }
}

/// A failed API request. Each variant is one Kubernetes `reason`.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum ApiError {
    /// 400: the request is malformed.
    #[error("{0}")]
    BadRequest(String),
    /// 401: no valid credentials.
    #[error("Unauthorized")]
    Unauthorized,
    /// 403: not allowed.
    #[error("{message}")]
    Forbidden {
        /// The resource.
        resource: GroupResource,
        /// The object's name, if any.
        name: Option<String>,
        /// The whole message.
        message: String,
        /// Field causes.
        causes: Vec<Value>,
    },
    /// 404 for an object.
    #[error("{resource} {name:?} not found")]
    NotFound {
        /// The resource.
        resource: GroupResource,
        /// The object's name.
        name: String,
    },
    /// 404 for a path the server does not serve.
    #[error("the server could not find the requested resource")]
    NoSuchPath,
    /// 405.
    #[error("{verb} is not supported on resources of kind {resource:?}")]
    MethodNotAllowed {
        /// The verb.
        verb: String,
        /// The resource, qualified.
        resource: String,
    },
    /// 405 with its own message (creating objects of a terminating CRD).
    #[error("{0}")]
    NotAllowed(String),
    /// 406.
    #[error(
        "only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf"
    )]
    NotAcceptable,
    /// 409 AlreadyExists.
    #[error("{resource} {name:?} already exists")]
    AlreadyExists {
        /// The resource.
        resource: GroupResource,
        /// The object's name.
        name: String,
        /// Replaces the default message when set.
        message: Option<String>,
    },
    /// 409 Conflict.
    #[error("Operation cannot be fulfilled on {resource} {name:?}: {detail}")]
    Conflict {
        /// The resource.
        resource: GroupResource,
        /// The object's name.
        name: String,
        /// Why.
        detail: String,
    },
    /// 409 Conflict of a server-side apply: fields other managers own (`details.causes` only).
    #[error("{message}")]
    ApplyConflict {
        /// `Apply failed with N conflict(s): …`.
        message: String,
        /// One `FieldManagerConflict` cause per field.
        causes: Vec<Value>,
    },
    /// 410 Expired.
    #[error("{message}")]
    Expired {
        /// The message.
        message: String,
        /// A continue token to carry on with, if any.
        continue_token: Option<String>,
    },
    /// 413.
    #[error("Request entity too large: {0}")]
    TooLarge(String),
    /// 415.
    #[error("the body of the request was in an unknown format - accepted media types include: {}", accepted.join(", "))]
    UnsupportedMediaType {
        /// The media types this endpoint accepts.
        accepted: Vec<&'static str>,
    },
    /// 422.
    #[error("{}", invalid_message(kind, name, causes))]
    Invalid {
        /// The qualified kind (`ConfigMap`, `Widget.example.com`) or options type.
        kind: String,
        /// The group, for details.
        group: String,
        /// The object's name.
        name: String,
        /// One error per failing field.
        causes: Vec<FieldError>,
    },
    /// 500.
    #[error("Internal error occurred: {0}")]
    Internal(String),
    /// 500 StorageReadError: stored objects that cannot be read back.
    #[error("{message}")]
    StoreReadError {
        /// The resource.
        resource: GroupResource,
        /// The object's name, or `""` for a list.
        name: String,
        /// The whole message.
        message: String,
        /// One `(key, why)` per object that cannot be read.
        keys: Vec<(String, String)>,
    },
    /// 504: a resourceVersion from the future.
    #[error("Timeout: Too large resource version: {requested}, current: {current}")]
    TooLargeResourceVersion {
        /// The revision asked for.
        requested: u64,
        /// The server's clock.
        current: u64,
    },
    /// 503: the server is shutting down or storage failed.
    #[error("{0}")]
    Unavailable(String),
    /// 429: a client holds more of a bounded resource (open watches) than it may; retry later.
    #[error("{0}")]
    TooManyRequests(String),
    /// 429 with causes and a suggested delay: an eviction a disruption budget refuses now.
    #[error("{message}")]
    TooManyRequestsBecause {
        /// The message.
        message: String,
        /// `details.retryAfterSeconds` (left out when 0).
        retry_after_seconds: u64,
        /// `details.causes`.
        causes: Vec<Value>,
    },
}

fn invalid_message(kind: &str, name: &str, causes: &[FieldError]) -> String {
    let list = match causes {
        [one] => one.to_string(),
        many => format!(
            "[{}]",
            many.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    format!("{kind} {name:?} is invalid: {list}")
}

impl ApiError {
    /// 422 for list options or other request parameters (`ListOptions.meta.k8s.io "" is invalid: …`).
    pub fn invalid_options(kind: &str, causes: Vec<FieldError>) -> Self {
        ApiError::Invalid {
            kind: format!("{kind}.meta.k8s.io"),
            group: "meta.k8s.io".into(),
            name: String::new(),
            causes,
        }
    }

    /// The HTTP status.
    pub fn code(&self) -> StatusCode {
        match self {
            ApiError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ApiError::Unauthorized => StatusCode::UNAUTHORIZED,
            ApiError::Forbidden { .. } => StatusCode::FORBIDDEN,
            ApiError::NotFound { .. } | ApiError::NoSuchPath => StatusCode::NOT_FOUND,
            ApiError::MethodNotAllowed { .. } | ApiError::NotAllowed(_) => {
                StatusCode::METHOD_NOT_ALLOWED
            }
            ApiError::NotAcceptable => StatusCode::NOT_ACCEPTABLE,
            ApiError::AlreadyExists { .. }
            | ApiError::Conflict { .. }
            | ApiError::ApplyConflict { .. } => StatusCode::CONFLICT,
            ApiError::Expired { .. } => StatusCode::GONE,
            ApiError::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::UnsupportedMediaType { .. } => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ApiError::Invalid { .. } => StatusCode::UNPROCESSABLE_ENTITY,
            ApiError::Internal(_) | ApiError::StoreReadError { .. } => {
                StatusCode::INTERNAL_SERVER_ERROR
            }
            ApiError::TooLargeResourceVersion { .. } => StatusCode::GATEWAY_TIMEOUT,
            ApiError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::TooManyRequests(_) | ApiError::TooManyRequestsBecause { .. } => {
                StatusCode::TOO_MANY_REQUESTS
            }
        }
    }

    /// The Kubernetes `reason`.
    pub fn reason(&self) -> &'static str {
        match self {
            ApiError::BadRequest(_) => "BadRequest",
            ApiError::Unauthorized => "Unauthorized",
            ApiError::Forbidden { .. } => "Forbidden",
            ApiError::NotFound { .. } | ApiError::NoSuchPath => "NotFound",
            ApiError::MethodNotAllowed { .. } | ApiError::NotAllowed(_) => "MethodNotAllowed",
            ApiError::NotAcceptable => "NotAcceptable",
            ApiError::AlreadyExists { .. } => "AlreadyExists",
            ApiError::Conflict { .. } | ApiError::ApplyConflict { .. } => "Conflict",
            ApiError::Expired { .. } => "Expired",
            ApiError::TooLarge(_) => "RequestEntityTooLarge",
            ApiError::UnsupportedMediaType { .. } => "UnsupportedMediaType",
            ApiError::Invalid { .. } => "Invalid",
            ApiError::Internal(_) => "InternalError",
            ApiError::StoreReadError { .. } => "StorageReadError",
            ApiError::TooLargeResourceVersion { .. } => "Timeout",
            ApiError::Unavailable(_) => "ServiceUnavailable",
            ApiError::TooManyRequests(_) | ApiError::TooManyRequestsBecause { .. } => {
                "TooManyRequests"
            }
        }
    }

    fn details(&self) -> Option<Value> {
        let named = |r: &GroupResource, name: &str| {
            let mut d = Map::new();
            d.insert("name".into(), json!(name));
            if !r.group.is_empty() {
                d.insert("group".into(), json!(r.group));
            }
            d.insert("kind".into(), json!(r.resource));
            Value::Object(d)
        };
        match self {
            ApiError::NotFound { resource, name }
            | ApiError::AlreadyExists { resource, name, .. }
            | ApiError::Conflict { resource, name, .. } => Some(named(resource, name)),
            ApiError::Forbidden { resource, .. } if resource.resource.is_empty() => {
                // A non-resource request (`forbidden: User … cannot get path …`).
                Some(json!({}))
            }
            ApiError::Forbidden {
                resource,
                name,
                causes,
                ..
            } => {
                let mut d = named(resource, name.as_deref().unwrap_or(""));
                if name.is_none()
                    && let Some(m) = d.as_object_mut()
                {
                    m.remove("name");
                }
                if !causes.is_empty()
                    && let Some(m) = d.as_object_mut()
                {
                    m.insert("causes".into(), Value::Array(causes.clone()));
                }
                Some(d)
            }
            ApiError::MethodNotAllowed { .. } | ApiError::NotAllowed(_) | ApiError::NoSuchPath => {
                Some(json!({}))
            }
            ApiError::Invalid {
                kind,
                group,
                name,
                causes,
            } => {
                let bare_kind = kind.split('.').next().unwrap_or(kind);
                let mut d = Map::new();
                d.insert("name".into(), json!(name));
                if !group.is_empty() {
                    d.insert("group".into(), json!(group));
                }
                d.insert("kind".into(), json!(bare_kind));
                d.insert(
                    "causes".into(),
                    causes
                        .iter()
                        .map(|c| {
                            json!({"reason": c.kind.cause_type(), "message": c.message(), "field": c.field})
                        })
                        .collect(),
                );
                Some(Value::Object(d))
            }
            ApiError::TooLargeResourceVersion { .. } => Some(json!({
                "causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
                "retryAfterSeconds": 1
            })),
            ApiError::Internal(msg) => Some(json!({"causes": [{"message": msg}]})),
            ApiError::StoreReadError {
                resource,
                name,
                keys,
                ..
            } => {
                let mut d = named(resource, name);
                d["causes"] = keys
                    .iter()
                    .map(|(key, why)| {
                        json!({"reason": "UnexpectedServerResponse", "field": key, "message": why})
                    })
                    .collect();
                Some(d)
            }
            ApiError::TooManyRequests(_) => Some(json!({"retryAfterSeconds": 1})),
            ApiError::TooManyRequestsBecause {
                retry_after_seconds,
                causes,
                ..
            } => {
                let mut d = Map::new();
                d.insert("causes".into(), json!(causes));
                if *retry_after_seconds > 0 {
                    d.insert("retryAfterSeconds".into(), json!(retry_after_seconds));
                }
                Some(Value::Object(d))
            }
            ApiError::ApplyConflict { causes, .. } => Some(json!({"causes": causes})),
            _ => None,
        }
    }

    /// The `Status` object for this error.
    pub fn status(&self) -> Value {
        let mut s = Map::new();
        s.insert("kind".into(), json!("Status"));
        s.insert("apiVersion".into(), json!("v1"));
        let mut meta = Map::new();
        if let ApiError::Expired {
            continue_token: Some(token),
            ..
        } = self
        {
            meta.insert("continue".into(), json!(token));
        }
        s.insert("metadata".into(), Value::Object(meta));
        s.insert("status".into(), json!("Failure"));
        s.insert("message".into(), json!(self.to_string()));
        s.insert("reason".into(), json!(self.reason()));
        if let Some(d) = self.details() {
            s.insert("details".into(), d);
        }
        s.insert("code".into(), json!(self.code().as_u16()));
        Value::Object(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cm() -> GroupResource {
        GroupResource {
            group: String::new(),
            resource: "configmaps".into(),
        }
    }

    #[test]
    fn not_found_names_the_plural_resource() {
        let s = ApiError::NotFound {
            resource: cm(),
            name: "nothere".into(),
        }
        .status();
        assert_eq!(
            s,
            json!({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
                   "message":"configmaps \"nothere\" not found","reason":"NotFound",
                   "details":{"name":"nothere","kind":"configmaps"},"code":404})
        );
    }

    #[test]
    fn invalid_lists_one_cause_per_field_and_names_the_kind() {
        let e = ApiError::Invalid {
            kind: "Widget.example.com".into(),
            group: "example.com".into(),
            name: "w1".into(),
            causes: vec![
                FieldError::invalid("spec.size", json!("big"), "must be an integer"),
                FieldError::required("spec.color", ""),
            ],
        };
        let s = e.status();
        assert_eq!(s["code"], 422);
        assert_eq!(
            s["message"],
            "Widget.example.com \"w1\" is invalid: [spec.size: Invalid value: \"big\": must be an integer, spec.color: Required value]"
        );
        assert_eq!(s["details"]["kind"], "Widget");
        assert_eq!(s["details"]["causes"][1]["reason"], "FieldValueRequired");
        assert_eq!(s["details"]["causes"][0]["field"], "spec.size");
    }

    #[test]
    fn conflict_uses_the_optimistic_lock_wording() {
        let e = ApiError::Conflict {
            resource: GroupResource {
                group: "apps".into(),
                resource: "deployments".into(),
            },
            name: "web".into(),
            detail: "the object has been modified; please apply your changes to the latest version and try again".into(),
        };
        assert_eq!(
            e.to_string(),
            "Operation cannot be fulfilled on deployments.apps \"web\": the object has been modified; please apply your changes to the latest version and try again"
        );
        assert_eq!(e.status()["details"]["group"], "apps");
    }
}
