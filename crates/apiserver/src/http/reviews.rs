//! The endpoints that answer questions instead of storing objects (spec §18.7, §18.9):
//! TokenRequest (`serviceaccounts/{name}/token`), SelfSubjectAccessReview,
//! SelfSubjectRulesReview, SubjectAccessReview, SelfSubjectReview and TokenReview.
//!
//! Each is a `POST` that returns 201 with the request echoed and a `status` filled in; nothing
//! is stored. They are listed in the catalog (so discovery shows them) but served here:
//! [`handles`] tells the dispatcher which paths are ours.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use http::request::Parts;
use http::{Method, StatusCode};
use serde_json::{Map, Value, json};

use super::authz::{API_AUDIENCES, user_for_token};
use super::error::{ApiError, GroupResource};
use super::request::ResourcePath;
use super::{App, User, json_response, resources};
use crate::auth::rbac::{Attributes, PolicyRule, ResourceAttributes, Target, is_master};
use crate::auth::sa_token::{Claims, ISSUER, KubernetesClaim, ObjectClaim};
use crate::registry::validation::FieldError;

/// The review kinds: (group, plural, kind).
const REVIEWS: [(&str, &str, &str); 5] = [
    (
        "authorization.k8s.io",
        "selfsubjectaccessreviews",
        "SelfSubjectAccessReview",
    ),
    (
        "authorization.k8s.io",
        "selfsubjectrulesreviews",
        "SelfSubjectRulesReview",
    ),
    (
        "authorization.k8s.io",
        "subjectaccessreviews",
        "SubjectAccessReview",
    ),
    (
        "authentication.k8s.io",
        "selfsubjectreviews",
        "SelfSubjectReview",
    ),
    ("authentication.k8s.io", "tokenreviews", "TokenReview"),
];

/// Whether `path` is one of the endpoints served here.
pub(crate) fn handles(path: &ResourcePath) -> bool {
    if path.group.is_empty() {
        return path.resource == "serviceaccounts" && path.subresource.as_deref() == Some("token");
    }
    path.version == "v1"
        && REVIEWS
            .iter()
            .any(|(g, plural, _)| *g == path.group && *plural == path.resource)
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
        if path.group.is_empty() {
            let (Some(ns), Some(name)) = (path.namespace.as_deref(), path.name.as_deref()) else {
                return Err(ApiError::NoSuchPath);
            };
            return token_request(app, ns, name, obj);
        }
        if path.name.is_some() || path.namespace.is_some() {
            return Err(ApiError::NoSuchPath);
        }
        let body = match path.resource.as_str() {
            "selfsubjectaccessreviews" => access_review(app, &user, obj, false)?,
            "subjectaccessreviews" => access_review(app, &user, obj, true)?,
            "selfsubjectrulesreviews" => rules_review(app, &user, &obj)?,
            "selfsubjectreviews" => self_review(&user),
            "tokenreviews" => token_review(app, obj),
            _ => return Err(ApiError::NoSuchPath),
        };
        Ok(json_response(
            StatusCode::CREATED,
            Bytes::from(body.to_string()),
        ))
    }
    .await;
    result.unwrap_or_else(axum::response::IntoResponse::into_response)
}

fn review_meta() -> Value {
    json!({"creationTimestamp": null})
}

fn string_at(v: &Value, key: &str) -> String {
    v[key].as_str().unwrap_or_default().to_string()
}

fn invalid(kind: &str, group: &str, name: &str, causes: Vec<FieldError>) -> ApiError {
    ApiError::Invalid {
        kind: format!("{kind}.{group}"),
        group: group.into(),
        name: name.into(),
        causes,
    }
}

/// SelfSubjectAccessReview (for the caller) or SubjectAccessReview (for `spec.user`/`groups`).
fn access_review(app: &App, caller: &User, mut obj: Value, other: bool) -> Result<Value, ApiError> {
    let (kind, subject) = if other {
        let spec = &obj["spec"];
        let user = User {
            name: string_at(spec, "user"),
            groups: spec["groups"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|g| g.as_str().map(String::from))
                .collect(),
            uid: string_at(spec, "uid"),
            extra: BTreeMap::new(),
        };
        if user.name.is_empty() && user.groups.is_empty() {
            return Err(invalid(
                "SubjectAccessReview",
                "authorization.k8s.io",
                "",
                vec![FieldError::invalid(
                    "spec.user",
                    json!(""),
                    "at least one of user or group must be specified",
                )],
            ));
        }
        ("SubjectAccessReview", user)
    } else {
        ("SelfSubjectAccessReview", caller.clone())
    };
    let spec = &obj["spec"];
    let attrs = match (
        spec.get("resourceAttributes").filter(|v| v.is_object()),
        spec.get("nonResourceAttributes").filter(|v| v.is_object()),
    ) {
        (Some(r), None) => Attributes {
            verb: string_at(r, "verb"),
            target: Target::Resource(ResourceAttributes {
                group: string_at(r, "group"),
                version: string_at(r, "version"),
                resource: string_at(r, "resource"),
                subresource: string_at(r, "subresource"),
                namespace: string_at(r, "namespace"),
                name: string_at(r, "name"),
            }),
        },
        (None, Some(n)) => Attributes {
            verb: string_at(n, "verb"),
            target: Target::NonResource {
                path: string_at(n, "path"),
            },
        },
        (r, _) => {
            let message = if r.is_some() {
                "cannot be specified in combination with resourceAttributes"
            } else {
                "exactly one of nonResourceAttributes or resourceAttributes must be specified"
            };
            let field = if r.is_some() {
                "spec.nonResourceAttributes"
            } else {
                "spec.resourceAttributes"
            };
            return Err(invalid(
                kind,
                "authorization.k8s.io",
                "",
                vec![FieldError::invalid(field, json!(spec), message)],
            ));
        }
    };
    let decision = if is_master(&subject) {
        crate::auth::rbac::Decision {
            allowed: true,
            reason: String::new(),
        }
    } else {
        app.rbac.snapshot().authorize(&subject, &attrs)
    };
    let mut status = Map::new();
    status.insert("allowed".into(), json!(decision.allowed));
    if !decision.reason.is_empty() {
        status.insert("reason".into(), json!(decision.reason));
    }
    obj["metadata"] = review_meta();
    obj["kind"] = json!(kind);
    obj["apiVersion"] = json!("authorization.k8s.io/v1");
    obj["status"] = Value::Object(status);
    Ok(obj)
}

/// SelfSubjectRulesReview: the rules that apply to the caller in `spec.namespace`.
fn rules_review(app: &App, user: &User, obj: &Value) -> Result<Value, ApiError> {
    let namespace = obj["spec"]["namespace"].as_str().unwrap_or_default();
    if namespace.is_empty() {
        return Err(ApiError::BadRequest("no namespace on request".into()));
    }
    let (rules, errors) = app.rbac.snapshot().rules_for(user, namespace);
    let to_json = |r: &PolicyRule| serde_json::to_value(r).unwrap_or(Value::Null);
    let resource_rules: Vec<Value> = rules
        .iter()
        .filter(|r| r.non_resource_urls.is_empty())
        .map(|r| {
            let mut v = to_json(r);
            for key in ["apiGroups", "resources"] {
                if v.get(key).is_none() {
                    v[key] = json!([]);
                }
            }
            v
        })
        .collect();
    let non_resource_rules: Vec<Value> = rules
        .iter()
        .filter(|r| !r.non_resource_urls.is_empty())
        .map(|r| json!({"verbs": r.verbs, "nonResourceURLs": r.non_resource_urls}))
        .collect();
    let mut status = json!({
        "resourceRules": resource_rules,
        "nonResourceRules": non_resource_rules,
        "incomplete": false,
    });
    if !errors.is_empty() {
        status["evaluationError"] = json!(errors.join(", "));
    }
    Ok(json!({
        "kind": "SelfSubjectRulesReview",
        "apiVersion": "authorization.k8s.io/v1",
        "metadata": review_meta(),
        "spec": {},
        "status": status,
    }))
}

fn user_info(user: &User) -> Value {
    let mut info = Map::new();
    info.insert("username".into(), json!(user.name));
    if !user.uid.is_empty() {
        info.insert("uid".into(), json!(user.uid));
    }
    info.insert("groups".into(), json!(user.groups));
    if !user.extra.is_empty() {
        info.insert("extra".into(), json!(user.extra));
    }
    Value::Object(info)
}

/// SelfSubjectReview: who the caller is (`kubectl auth whoami`).
fn self_review(user: &User) -> Value {
    json!({
        "kind": "SelfSubjectReview",
        "apiVersion": "authentication.k8s.io/v1",
        "metadata": review_meta(),
        "status": {"userInfo": user_info(user)},
    })
}

/// TokenReview: whether a token authenticates, and as whom.
fn token_review(app: &App, mut obj: Value) -> Value {
    let token = obj["spec"]["token"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let requested: Vec<String> = obj["spec"]["audiences"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|a| a.as_str().map(String::from))
        .collect();
    let audiences: Vec<&str> = if requested.is_empty() {
        API_AUDIENCES.to_vec()
    } else {
        requested.iter().map(String::as_str).collect()
    };
    let status = match user_for_token(app, &token, &audiences) {
        Some(user) => {
            json!({"authenticated": true, "user": user_info(&user), "audiences": audiences})
        }
        None => json!({"user": {}, "error": "invalid bearer token"}),
    };
    obj["kind"] = json!("TokenReview");
    obj["apiVersion"] = json!("authentication.k8s.io/v1");
    obj["metadata"] = review_meta();
    obj["status"] = status;
    obj
}

/// The largest `expirationSeconds` accepted (2^32).
const MAX_EXPIRATION: i64 = 1 << 32;

/// TokenRequest: mints a token for ServiceAccount `ns`/`name`.
fn token_request(app: &App, ns: &str, name: &str, obj: Value) -> Result<Response, ApiError> {
    const KIND: &str = "TokenRequest";
    const GROUP: &str = "authentication.k8s.io";
    let spec = &obj["spec"];
    let expiration = spec["expirationSeconds"].as_i64().unwrap_or(3600);
    if expiration < 600 {
        return Err(invalid(
            KIND,
            GROUP,
            "",
            vec![FieldError::invalid(
                "spec.expirationSeconds",
                json!(expiration),
                "may not specify a duration less than 10 minutes",
            )],
        ));
    }
    if expiration > MAX_EXPIRATION {
        return Err(invalid(
            KIND,
            GROUP,
            "",
            vec![FieldError::invalid(
                "spec.expirationSeconds",
                json!(expiration),
                "may not specify a duration larger than 2^32 seconds",
            )],
        ));
    }
    for (field, want, what) in [
        ("name", name, "service account name"),
        ("namespace", ns, "namespace"),
    ] {
        let given = obj["metadata"][field].as_str().unwrap_or_default();
        if !given.is_empty() && given != want {
            return Err(invalid(
                KIND,
                GROUP,
                name,
                vec![FieldError::invalid(
                    format!("metadata.{field}"),
                    json!(given),
                    format!("must match the {what} if specified"),
                )],
            ));
        }
    }
    let catalog = app.registry.catalog();
    let sa_res = catalog
        .find("", "v1", "serviceaccounts")
        .ok_or(ApiError::NoSuchPath)?;
    let sa = app.registry.get_value(&sa_res, Some(ns), name)?;
    let sa_uid = string_at(&sa["metadata"], "uid");

    let mut claim = KubernetesClaim {
        namespace: ns.into(),
        serviceaccount: ObjectClaim {
            name: name.into(),
            uid: sa_uid,
        },
        ..KubernetesClaim::default()
    };
    let bound = spec.get("boundObjectRef").filter(|v| v.is_object());
    if let Some(bound) = bound {
        let kind = string_at(bound, "kind");
        let api_version = string_at(bound, "apiVersion");
        let bound_name = string_at(bound, "name");
        let plural = match (api_version.as_str(), kind.as_str()) {
            ("v1", "Pod") => "pods",
            ("v1", "Secret") => "secrets",
            ("v1", "Node") => "nodes",
            _ => {
                let (group, version) = api_version.rsplit_once('/').unwrap_or(("", &api_version));
                return Err(ApiError::BadRequest(format!(
                    "cannot bind token to object of type {group}/{version}, Kind={kind}"
                )));
            }
        };
        let Some(res) = catalog.find("", "v1", plural) else {
            return Err(ApiError::NotFound {
                resource: GroupResource {
                    group: String::new(),
                    resource: plural.into(),
                },
                name: bound_name,
            });
        };
        let target = app.registry.get_value(&res, Some(ns), &bound_name)?;
        let uid = string_at(&target["metadata"], "uid");
        let want_uid = string_at(bound, "uid");
        if !want_uid.is_empty() && want_uid != uid {
            return Err(ApiError::Conflict {
                resource: GroupResource {
                    group: String::new(),
                    resource: kind.clone(),
                },
                name: bound_name,
                detail: format!(
                    "the UID in the bound object reference ({want_uid}) does not match the UID in record. The object might have been deleted and then recreated"
                ),
            });
        }
        if kind == "Pod" {
            let runs_as = target["spec"]["serviceAccountName"]
                .as_str()
                .unwrap_or("default");
            if runs_as != name {
                return Err(ApiError::BadRequest(format!(
                    "cannot bind token for serviceaccount {name:?} to pod running with different serviceaccount name."
                )));
            }
        }
        let object = ObjectClaim {
            name: bound_name,
            uid,
        };
        if kind == "Pod" {
            claim.pod = Some(object);
        } else {
            claim.secret = Some(object);
        }
    }

    let audiences: Vec<String> = spec["audiences"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|a| a.as_str().map(String::from))
        .collect();
    let audiences = if audiences.is_empty() {
        vec![ISSUER.to_string()]
    } else {
        audiences
    };
    let now = jiff::Timestamp::now();
    let now_s = now.as_second();
    let claims = Claims {
        aud: audiences.clone(),
        exp: now_s + expiration,
        iat: now_s,
        nbf: now_s,
        iss: ISSUER.into(),
        jti: uuid::Uuid::new_v4().to_string(),
        sub: format!("system:serviceaccount:{ns}:{name}"),
        kubernetes: claim,
    };
    let token = app
        .signer
        .mint(&claims)
        .map_err(|e| ApiError::Internal(e.to_string()))?;
    let rfc3339 = |s: i64| {
        jiff::Timestamp::from_second(s)
            .map(|t| t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string())
            .unwrap_or_default()
    };
    let body = json!({
        "kind": "TokenRequest",
        "apiVersion": "authentication.k8s.io/v1",
        "metadata": {"name": name, "namespace": ns, "creationTimestamp": rfc3339(now_s)},
        "spec": {
            "audiences": audiences,
            "expirationSeconds": expiration,
            "boundObjectRef": bound.cloned().unwrap_or(Value::Null),
        },
        "status": {"token": token, "expirationTimestamp": rfc3339(claims.exp)},
    });
    Ok(json_response(
        StatusCode::CREATED,
        Bytes::from(body.to_string()),
    ))
}
