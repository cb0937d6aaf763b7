//! Framing for the resources that answer questions instead of storing objects: TokenRequest
//! (`serviceaccounts/{name}/token`) and the review kinds (SelfSubjectAccessReview,
//! SelfSubjectRulesReview, SubjectAccessReview, SelfSubjectReview, TokenReview).
//!
//! Their semantics are the registry's (`registry/reviews.rs`); this file only accepts the
//! `POST`, decodes the body, hands it to [`Registry::review`] or [`Registry::token_request`]
//! with the caller and the authorities they consult, and answers 201 with the result.
//! [`handles`] tells the dispatcher which paths these are.
//!
//! [`Registry::review`]: crate::registry::Registry::review
//! [`Registry::token_request`]: crate::registry::Registry::token_request

use std::sync::Arc;

use axum::body::Body;
use axum::response::{IntoResponse, Response};
use http::request::Parts;
use http::{Method, StatusCode};

use super::error::{ApiError, GroupResource};
use super::request::ResourcePath;
use super::{App, User, authz, json_response, resources};
use crate::registry::reviews::{Authorities, Review};

/// What a path under [`handles`] asks for.
enum Asked {
    /// One of the review kinds.
    Review(Review),
    /// The `token` subresource of a ServiceAccount.
    TokenRequest,
}

/// What `path` asks for, if it is one of the endpoints framed here.
fn asked(path: &ResourcePath) -> Option<Asked> {
    if path.group.is_empty() {
        return (path.resource == "serviceaccounts"
            && path.subresource.as_deref() == Some("token"))
        .then_some(Asked::TokenRequest);
    }
    Review::find(&path.group, &path.version, &path.resource).map(Asked::Review)
}

/// Whether `path` is one of the endpoints framed here.
pub(crate) fn handles(path: &ResourcePath) -> bool {
    asked(path).is_some()
}

/// Serves one of the endpoints [`handles`] accepts.
pub(crate) async fn serve(
    app: &Arc<App>,
    parts: &Parts,
    path: ResourcePath,
    body: Body,
) -> Response {
    let user = parts
        .extensions
        .get::<Arc<User>>()
        .cloned()
        .unwrap_or_else(User::admin);
    let result = async {
        let asked = asked(&path).ok_or(ApiError::NoSuchPath)?;
        if parts.method != Method::POST {
            return Err(ApiError::MethodNotAllowed {
                verb: parts.method.to_string(),
                resource: GroupResource {
                    group: path.group.clone(),
                    resource: path.resource.clone(),
                }
                .to_string(),
            });
        }
        let obj = resources::body_value(&parts.headers, body).await?;
        let answer = match asked {
            Asked::TokenRequest => {
                let (Some(ns), Some(name)) = (path.namespace.as_deref(), path.name.as_deref())
                else {
                    return Err(ApiError::NoSuchPath);
                };
                app.registry.token_request(&app.signer, ns, name, obj)?
            }
            Asked::Review(review) => {
                let local = review == Review::LocalSubjectAccess;
                if path.name.is_some() || path.namespace.is_some() != local {
                    return Err(ApiError::NoSuchPath);
                }
                let authorities = Authorities {
                    rbac: &app.rbac,
                    tokens: authz::token_authenticator(app),
                };
                match path.namespace.as_deref() {
                    Some(ns) if local => app.registry.local_access_review(&authorities, ns, obj)?,
                    _ => app.registry.review(&authorities, review, &user, obj)?,
                }
            }
        };
        Ok(json_response(StatusCode::CREATED, super::encoded(&answer)))
    }
    .await;
    result.unwrap_or_else(IntoResponse::into_response)
}
