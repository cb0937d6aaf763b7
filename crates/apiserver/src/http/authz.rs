//! Who a request acts as, and whether it may: the credentials bearer tokens are checked
//! against (the check itself is `auth::authenticate`), impersonation (spec §18.8) and the
//! RBAC check (spec §18.1–§18.6), in Kubernetes' order:
//! 401 → impersonation 403 → authorization 403 → routing.
//!
//! [`authorize`] is a middleware that runs after [`super::authenticate`] has put the caller (an
//! `Arc<User>`) into the request's extensions. Members of `system:masters` skip the RBAC
//! index entirely, so the administrator's path costs one header lookup and one group scan.
//! Everyone else is checked against [`crate::auth::rbac::RbacIndex`], which is rebuilt only
//! after RBAC objects change; a successful RBAC write through this layer marks it stale at
//! once, so the next request sees the new binding.
//!
//! Escalation prevention for RBAC writes is not decided here: it needs the object as it will
//! be stored, so it runs in the registry as a validating admission stage
//! (`registry/admission/escalation.rs`), and this layer never reads a request's body.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http::{HeaderMap, Method, StatusCode, Uri, header};

use super::error::{ApiError, GroupResource};
use super::request::{RequestInfo, Target as PathTarget};
use super::{App, User};
use crate::auth::authenticate::TokenAuthenticator;
use crate::auth::rbac::{Attributes, ResourceAttributes, Target, is_master};

/// The credentials this server accepts, as `auth` checks bearer tokens against them.
pub(crate) fn token_authenticator(app: &App) -> TokenAuthenticator<'_> {
    TokenAuthenticator {
        admin_token: app.admin_token.as_ref(),
        signer: &app.signer,
    }
}

/// The middleware: impersonation, then RBAC, then the handler.
pub(crate) async fn authorize(
    State(app): State<Arc<App>>,
    mut req: Request,
    next: Next,
) -> Response {
    let Some(caller) = req.extensions().get::<Arc<User>>().cloned() else {
        // Anonymous over TLS: `authenticate` only lets the public paths through.
        return next.run(req).await;
    };
    let user = match impersonate(&app, &caller, req.headers(), req.uri()) {
        Ok(Some(user)) => {
            req.extensions_mut().insert(user.clone());
            user
        }
        Ok(None) => caller,
        Err(resp) => return *resp,
    };
    if !is_master(&user) {
        let info = match req.extensions().get::<Arc<RequestInfo>>() {
            Some(info) => info.clone(),
            None => Arc::new(RequestInfo::from_parts(
                req.method(),
                req.uri(),
                req.headers(),
            )),
        };
        let attrs = attributes(&info);
        let decision = app.rbac.snapshot().authorize(&user, &attrs);
        if let Some(log) = &app.authorizations {
            log.record(&user.name, &attrs, decision.allowed);
        }
        if !decision.allowed {
            return forbidden(&user.name, &attrs, &decision.reason).into_response();
        }
        let apply = req
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("application/apply-patch"));
        if let Some(create) = creates_through_update(&app, &attrs, apply) {
            let decision = app.rbac.snapshot().authorize(&user, &create);
            if let Some(log) = &app.authorizations {
                log.record(&user.name, &create, decision.allowed);
            }
            if !decision.allowed {
                return forbidden(&user.name, &create, &decision.reason).into_response();
            }
        }
    }
    let rbac_write = req.method() != Method::GET
        && req.method() != Method::HEAD
        && req
            .uri()
            .path()
            .starts_with("/apis/rbac.authorization.k8s.io/");
    let resp = next.run(req).await;
    if rbac_write && resp.status().is_success() {
        app.rbac.invalidate();
    }
    resp
}

/// For an update or patch of a missing object of a kind that allows create-on-update (or any
/// server-side apply, which creates): the `create` it amounts to, which must be allowed too
/// (spec §18.2).
fn creates_through_update(app: &App, attrs: &Attributes, apply: bool) -> Option<Attributes> {
    let Target::Resource(r) = &attrs.target else {
        return None;
    };
    if !(attrs.verb == "update" || attrs.verb == "patch") || !r.subresource.is_empty() {
        return None;
    }
    let res = app
        .registry
        .catalog()
        .find(&r.group, &r.version, &r.resource)?;
    if !apply && !res.strategy.allow_create_on_update() {
        return None;
    }
    let ns = (!r.namespace.is_empty()).then_some(r.namespace.as_str());
    match app.registry.get(&res, ns, &r.name) {
        Err(ApiError::NotFound { .. }) => Some(Attributes {
            verb: "create".into(),
            target: attrs.target.clone(),
        }),
        _ => None,
    }
}

/// The 403 for `attrs` (spec §18.6), with the RBAC reason appended if there is one.
pub(crate) fn forbidden(user: &str, attrs: &Attributes, reason: &str) -> ApiError {
    let mut why = attrs.forbidden_reason(user);
    if !reason.is_empty() {
        why.push_str(": ");
        why.push_str(reason);
    }
    match &attrs.target {
        Target::Resource(r) => {
            let resource = GroupResource {
                group: r.group.clone(),
                resource: r.resource.clone(),
            };
            let name = (!r.name.is_empty()).then(|| r.name.clone());
            let message = match &name {
                Some(n) => format!(
                    "{resource} {} is forbidden: {why}",
                    crate::auth::rbac::quote(n)
                ),
                None => format!("{resource} is forbidden: {why}"),
            };
            ApiError::Forbidden {
                resource,
                name,
                message,
                causes: Vec::new(),
            }
        }
        Target::NonResource { .. } => ApiError::Forbidden {
            resource: GroupResource {
                group: String::new(),
                resource: String::new(),
            },
            name: None,
            message: format!("forbidden: {why}"),
            causes: Vec::new(),
        },
    }
}

/// The name a `fieldSelector` pins with `metadata.name=X` (or `==`), if any.
fn selected_name(selector: &str) -> Option<String> {
    selector.split(',').find_map(|req| {
        let req = req.trim();
        let value = req
            .strip_prefix("metadata.name==")
            .or_else(|| req.strip_prefix("metadata.name="))?;
        Some(value.trim().to_string())
    })
}

/// The RBAC attributes of a request (spec §18.2), from its [`RequestInfo`].
pub(crate) fn attributes(info: &RequestInfo) -> Attributes {
    let PathTarget::Resource(p) = &info.target else {
        return Attributes {
            verb: info.verb.clone(),
            target: Target::NonResource {
                path: info.path.clone(),
            },
        };
    };
    let mut name = p.name.clone().unwrap_or_default();
    let mut namespace = p.namespace.clone().unwrap_or_default();
    if p.group.is_empty() && p.resource == "namespaces" && namespace.is_empty() {
        namespace = name.clone();
    }
    if name.is_empty()
        && (info.verb == "list" || info.verb == "watch")
        && let Some(selected) = info
            .query
            .get("fieldSelector")
            .and_then(|s| selected_name(s))
    {
        name = selected;
    }
    Attributes {
        verb: info.verb.clone(),
        target: Target::Resource(ResourceAttributes {
            group: p.group.clone(),
            version: p.version.clone(),
            resource: p.resource.clone(),
            subresource: p.subresource.clone().unwrap_or_default(),
            namespace,
            name,
        }),
    }
}

fn header_values(headers: &HeaderMap, name: &str) -> Vec<String> {
    headers
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .map(str::to_string)
        .collect()
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let Some(hex) = s.get(i + 1..i + 3)
            && let Ok(b) = u8::from_str_radix(hex, 16)
        {
            out.push(b);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn impersonate_attrs(
    group: &str,
    resource: &str,
    subresource: &str,
    namespace: &str,
    name: &str,
) -> Attributes {
    Attributes {
        verb: "impersonate".into(),
        target: Target::Resource(ResourceAttributes {
            group: group.into(),
            version: String::new(),
            resource: resource.into(),
            subresource: subresource.into(),
            namespace: namespace.into(),
            name: name.into(),
        }),
    }
}

/// Applies `Impersonate-*` headers: each item authorized for `caller` with verb `impersonate`,
/// then the identity they describe. `Ok(None)` when there are none.
fn impersonate(
    app: &App,
    caller: &User,
    headers: &HeaderMap,
    uri: &Uri,
) -> Result<Option<Arc<User>>, Box<Response>> {
    // Nearly every request has none: one pass over the names, no lookups.
    if !headers
        .keys()
        .any(|name| name.as_str().starts_with("impersonate-"))
    {
        return Ok(None);
    }
    let user = header_values(headers, "impersonate-user")
        .into_iter()
        .next();
    let groups = header_values(headers, "impersonate-group");
    let uid = header_values(headers, "impersonate-uid").into_iter().next();
    let mut extra: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (name, value) in headers {
        if let Some(key) = name.as_str().strip_prefix("impersonate-extra-")
            && let Ok(v) = value.to_str()
        {
            extra
                .entry(percent_decode(&key.to_ascii_lowercase()))
                .or_default()
                .push(v.to_string());
        }
    }
    let Some(username) = user else {
        if groups.is_empty() && uid.is_none() && extra.is_empty() {
            return Ok(None);
        }
        let mut requested: Vec<String> = groups.iter().map(|g| format!("group {g:?}")).collect();
        requested.extend(uid.iter().map(|u| format!("uid {u:?}")));
        requested.extend(extra.keys().map(|k| format!("user-extra {k:?}")));
        let body = format!(
            "Internal Server Error: {:?}: requested [{}] without impersonating a user",
            uri.to_string(),
            requested.join(" ")
        );
        let mut resp = (StatusCode::INTERNAL_SERVER_ERROR, body).into_response();
        resp.headers_mut().insert(
            header::CONTENT_TYPE,
            http::HeaderValue::from_static("text/plain; charset=utf-8"),
        );
        return Err(Box::new(resp));
    };
    let sa = username
        .strip_prefix("system:serviceaccount:")
        .and_then(|rest| rest.split_once(':'));
    let mut checks = vec![match sa {
        Some((ns, name)) => impersonate_attrs("", "serviceaccounts", "", ns, name),
        None => impersonate_attrs("", "users", "", "", &username),
    }];
    checks.extend(
        groups
            .iter()
            .map(|g| impersonate_attrs("", "groups", "", "", g)),
    );
    checks.extend(
        uid.iter()
            .map(|u| impersonate_attrs("authentication.k8s.io", "uids", "", "", u)),
    );
    for (key, values) in &extra {
        for v in values {
            checks.push(impersonate_attrs(
                "authentication.k8s.io",
                "userextras",
                key,
                "",
                v,
            ));
        }
    }
    if !is_master(caller) {
        let snapshot = app.rbac.snapshot();
        for attrs in &checks {
            let decision = snapshot.authorize(caller, attrs);
            if !decision.allowed {
                return Err(Box::new(
                    forbidden(&caller.name, attrs, &decision.reason).into_response(),
                ));
            }
        }
    }
    let mut groups = groups;
    if groups.is_empty()
        && let Some((ns, _)) = sa
    {
        groups = vec![
            "system:serviceaccounts".into(),
            format!("system:serviceaccounts:{ns}"),
        ];
    }
    if username == "system:anonymous" {
        if !groups.iter().any(|g| g == "system:unauthenticated") {
            groups.push("system:unauthenticated".into());
        }
    } else if !groups
        .iter()
        .any(|g| g == "system:authenticated" || g == "system:unauthenticated")
    {
        groups.push("system:authenticated".into());
    }
    Ok(Some(Arc::new(User {
        name: username,
        groups,
        uid: uid.unwrap_or_default(),
        extra,
    })))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attrs(method: Method, uri: &str) -> Attributes {
        attributes(&RequestInfo::new(&method, &uri.parse().expect("uri")))
    }

    fn resource(a: &Attributes) -> (&str, &ResourceAttributes) {
        match &a.target {
            Target::Resource(r) => (a.verb.as_str(), r),
            Target::NonResource { .. } => panic!("not a resource request"),
        }
    }

    #[test]
    fn reading_a_namespace_names_it_as_the_namespace_too() {
        let a = attrs(Method::GET, "/api/v1/namespaces/demo");
        let (verb, r) = resource(&a);
        assert_eq!(
            (verb, r.name.as_str(), r.namespace.as_str()),
            ("get", "demo", "demo")
        );
    }

    #[test]
    fn a_field_selected_name_is_the_name_of_a_list_or_watch() {
        let a = attrs(
            Method::GET,
            "/api/v1/namespaces/demo/configmaps?fieldSelector=metadata.name%3Dx&watch=true",
        );
        let (verb, r) = resource(&a);
        assert_eq!((verb, r.name.as_str()), ("watch", "x"));
        let a = attrs(
            Method::GET,
            "/api/v1/namespaces/demo/configmaps?watch=false",
        );
        assert_eq!(resource(&a).0, "list");
    }

    #[test]
    fn verbs_follow_the_method_and_the_presence_of_a_name() {
        assert_eq!(
            resource(&attrs(Method::POST, "/api/v1/namespaces/d/configmaps")).0,
            "create"
        );
        assert_eq!(
            resource(&attrs(Method::DELETE, "/api/v1/namespaces/d/configmaps")).0,
            "deletecollection"
        );
        assert_eq!(
            resource(&attrs(Method::DELETE, "/api/v1/namespaces/d/configmaps/x")).0,
            "delete"
        );
        let a = attrs(
            Method::PUT,
            "/apis/apps/v1/namespaces/d/deployments/web/status",
        );
        let (verb, r) = resource(&a);
        assert_eq!((verb, r.subresource.as_str()), ("update", "status"));
    }

    #[test]
    fn other_paths_are_non_resource_requests() {
        let a = attrs(Method::GET, "/apis/apps/v1");
        assert_eq!(
            a.target,
            Target::NonResource {
                path: "/apis/apps/v1".into()
            }
        );
        let a = attrs(Method::GET, "/metrics");
        assert_eq!(
            forbidden("alice", &a, "").to_string(),
            r#"forbidden: User "alice" cannot get path "/metrics""#
        );
    }

    #[test]
    fn percent_encoded_extra_keys_are_decoded() {
        assert_eq!(
            percent_decode("scopes.example.com%2fx"),
            "scopes.example.com/x"
        );
    }
}
