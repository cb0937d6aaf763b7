//! The resources that answer questions instead of storing objects (spec §18.7, §18.9):
//! SelfSubjectAccessReview, SubjectAccessReview, SelfSubjectRulesReview, SelfSubjectReview,
//! TokenReview, and TokenRequest (the `token` subresource of a ServiceAccount).
//!
//! Each is a create that stores nothing: [`Registry::review`] and [`Registry::token_request`]
//! take the decoded request, validate it with Kubernetes' messages, ask the RBAC index or the
//! token signer, and return the request echoed with its `status` filled in (the HTTP layer
//! answers 201 with it). The review kinds are in the catalog, so discovery lists them, but
//! they have no storage; [`Review::find`] says which resource is which review.
//!
//! The authorities they consult live in `auth` and are passed in per call ([`Authorities`]),
//! so the registry keeps no handle on them; in return the registry tells `auth` whether the
//! objects a token names still exist, by implementing [`BoundObjects`].

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::Registry;
use super::validation::FieldError;
use crate::api::error::{ApiError, GroupResource};
use crate::api::user::User;
use crate::auth::authenticate::{API_AUDIENCES, BoundObjects, TokenAuthenticator};
use crate::auth::rbac::{
    Attributes, Decision, PolicyRule, RbacIndex, ResourceAttributes, Target, is_master,
};
use crate::auth::sa_token::{Claims, ISSUER, KubernetesClaim, ObjectClaim, TokenSigner};

/// One of the review resources.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Review {
    /// `authorization.k8s.io/v1` `selfsubjectaccessreviews`: may the caller do this?
    SelfSubjectAccess,
    /// `authorization.k8s.io/v1` `subjectaccessreviews`: may `spec.user`/`groups` do this?
    SubjectAccess,
    /// `authorization.k8s.io/v1` `localsubjectaccessreviews` (namespaced): may
    /// `spec.user`/`groups` do this in this namespace?
    LocalSubjectAccess,
    /// `authorization.k8s.io/v1` `selfsubjectrulesreviews`: what may the caller do in a
    /// namespace?
    SelfSubjectRules,
    /// `authentication.k8s.io/v1` `selfsubjectreviews`: who is the caller?
    SelfSubject,
    /// `authentication.k8s.io/v1` `tokenreviews`: whom does a token authenticate?
    Token,
}

impl Review {
    /// Every review, each with its group and plural.
    const ALL: [(Review, &'static str, &'static str); 6] = [
        (
            Review::LocalSubjectAccess,
            "authorization.k8s.io",
            "localsubjectaccessreviews",
        ),
        (
            Review::SelfSubjectAccess,
            "authorization.k8s.io",
            "selfsubjectaccessreviews",
        ),
        (
            Review::SubjectAccess,
            "authorization.k8s.io",
            "subjectaccessreviews",
        ),
        (
            Review::SelfSubjectRules,
            "authorization.k8s.io",
            "selfsubjectrulesreviews",
        ),
        (
            Review::SelfSubject,
            "authentication.k8s.io",
            "selfsubjectreviews",
        ),
        (Review::Token, "authentication.k8s.io", "tokenreviews"),
    ];

    /// The review served at `group`/`version`/`plural`, if that is one.
    pub fn find(group: &str, version: &str, plural: &str) -> Option<Review> {
        if version != "v1" {
            return None;
        }
        Review::ALL
            .iter()
            .find(|(_, g, p)| *g == group && *p == plural)
            .map(|(review, _, _)| *review)
    }

    /// The kind.
    pub fn kind(self) -> &'static str {
        match self {
            Review::SelfSubjectAccess => "SelfSubjectAccessReview",
            Review::SubjectAccess => "SubjectAccessReview",
            Review::LocalSubjectAccess => "LocalSubjectAccessReview",
            Review::SelfSubjectRules => "SelfSubjectRulesReview",
            Review::SelfSubject => "SelfSubjectReview",
            Review::Token => "TokenReview",
        }
    }

    /// The API group.
    pub fn group(self) -> &'static str {
        Review::ALL
            .iter()
            .find(|(review, _, _)| *review == self)
            .map_or("", |(_, group, _)| group)
    }

    /// The plural resource name.
    pub fn plural(self) -> &'static str {
        Review::ALL
            .iter()
            .find(|(review, _, _)| *review == self)
            .map_or("", |(_, _, plural)| plural)
    }

    /// The group and resource, as errors name it.
    pub fn group_resource(self) -> GroupResource {
        GroupResource {
            group: self.group().into(),
            resource: self.plural().into(),
        }
    }
}

/// What the reviews consult besides storage: the RBAC index (access and rules reviews) and
/// the accepted credentials (TokenReview).
#[derive(Clone, Copy, Debug)]
pub struct Authorities<'a> {
    /// The RBAC authorizer.
    pub rbac: &'a RbacIndex,
    /// The credentials tokens are checked against.
    pub tokens: TokenAuthenticator<'a>,
}

/// The registry answers `auth`'s question from the core resources it serves.
impl BoundObjects for Registry {
    fn uid(&self, plural: &str, namespace: &str, name: &str) -> Option<String> {
        let res = self.catalog().find("", "v1", plural)?;
        let obj = self.get_value(&res, Some(namespace), name).ok()?;
        obj["metadata"]["uid"].as_str().map(String::from)
    }
}

/// The shortest token lifetime a TokenRequest may ask for (10 minutes).
const MIN_EXPIRATION: i64 = 600;

/// The longest token lifetime a TokenRequest may ask for (2^32 seconds).
const MAX_EXPIRATION: i64 = 1 << 32;

/// The lifetime of a requested token when the request names none (one hour).
const DEFAULT_EXPIRATION: i64 = 3600;

impl Registry {
    /// Answers `review` asked by `user` with request `body`: the request echoed (kind,
    /// apiVersion, empty metadata) with its `status` filled in. Nothing is stored.
    ///
    /// # Errors
    /// 422 `Invalid` or 400 when the request is malformed (no attributes or subject for an
    /// access review, no namespace for a rules review, no token for a TokenReview), with
    /// Kubernetes' messages.
    pub fn review(
        &self,
        authorities: &Authorities<'_>,
        review: Review,
        user: &User,
        body: Value,
    ) -> Result<Value, ApiError> {
        match review {
            Review::SelfSubjectAccess => {
                access_review(authorities.rbac, review, Ok(user.clone()), body)
            }
            Review::SubjectAccess => {
                let subject = subject_of(&body["spec"]);
                access_review(authorities.rbac, review, subject, body)
            }
            Review::LocalSubjectAccess => Err(ApiError::BadRequest(
                "namespace is required on this type: ".into(),
            )),
            Review::SelfSubjectRules => rules_review(authorities.rbac, user, &body),
            Review::SelfSubject => Ok(self_review(user)),
            Review::Token => self.token_review(&authorities.tokens, body),
        }
    }

    /// LocalSubjectAccessReview in namespace `ns`: a SubjectAccessReview whose resource
    /// attributes must name `ns` (`metadata.namespace`, defaulted from the path, must be `ns`
    /// too) and which may not ask about non-resource URLs, as in Kubernetes.
    ///
    /// # Errors
    /// 400 when `metadata.namespace` differs from `ns`; 422 `Invalid` for a namespace or
    /// non-resource attributes the kind does not allow, or what a SubjectAccessReview refuses.
    pub fn local_access_review(
        &self,
        authorities: &Authorities<'_>,
        ns: &str,
        mut body: Value,
    ) -> Result<Value, ApiError> {
        let review = Review::LocalSubjectAccess;
        match body["metadata"]["namespace"].as_str() {
            None | Some("") => {
                if !body["metadata"].is_object() {
                    body["metadata"] = json!({});
                }
                body["metadata"]["namespace"] = json!(ns);
            }
            Some(given) if given != ns => {
                return Err(ApiError::BadRequest(format!(
                    "the namespace of the provided object ({given}) does not match the namespace sent on the request ({ns})"
                )));
            }
            Some(_) => {}
        }
        let mut causes = Vec::new();
        let asked = body
            .pointer("/spec/resourceAttributes/namespace")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if body
            .pointer("/spec/resourceAttributes")
            .is_some_and(Value::is_object)
            && asked != ns
        {
            causes.push(FieldError::invalid(
                "spec.resourceAttributes.namespace",
                json!(asked),
                "must match metadata.namespace",
            ));
        }
        if body
            .pointer("/spec/nonResourceAttributes")
            .is_some_and(|v| !v.is_null())
        {
            causes.push(FieldError::invalid(
                "spec.nonResourceAttributes",
                body["spec"]["nonResourceAttributes"].clone(),
                "disallowed on this kind of request",
            ));
        }
        if !causes.is_empty() {
            return Err(invalid(review.kind(), review.group(), "", causes));
        }
        let subject = subject_of(&body["spec"]);
        let mut answer = access_review(authorities.rbac, review, subject, body)?;
        answer["metadata"]["namespace"] = json!(ns);
        Ok(answer)
    }

    /// TokenReview: whether the token in `spec.token` authenticates, and as whom. A request
    /// without a token is a 400, as in Kubernetes; a token that does not authenticate is an
    /// answer (`status.error`), not a failure.
    fn token_review(
        &self,
        tokens: &TokenAuthenticator<'_>,
        mut obj: Value,
    ) -> Result<Value, ApiError> {
        let token = string_at(&obj["spec"], "token");
        if token.is_empty() {
            return Err(ApiError::BadRequest(
                "token is required for TokenReview in authentication".into(),
            ));
        }
        let requested = strings_at(&obj["spec"], "audiences");
        let audiences: Vec<&str> = if requested.is_empty() {
            API_AUDIENCES.to_vec()
        } else {
            requested.iter().map(String::as_str).collect()
        };
        let status = match tokens.authenticate(&token, &audiences, self) {
            Some(user) => {
                json!({"authenticated": true, "user": user_info(&user), "audiences": audiences})
            }
            None => json!({"user": {}, "error": "invalid bearer token"}),
        };
        echo(&mut obj, Review::Token, status);
        Ok(obj)
    }

    /// TokenRequest: mints a token for ServiceAccount `ns`/`name` as `body` (a TokenRequest)
    /// asks, bound to the Pod or Secret it names, and returns the request with
    /// `status.token` and `status.expirationTimestamp`.
    ///
    /// # Errors
    /// 422 `Invalid` for a lifetime out of range or a `metadata` name/namespace that differs
    /// from the path; 404 when the account or the bound object does not exist; 409 when the
    /// bound object's uid differs; 400 for an object kind tokens cannot be bound to, or a Pod
    /// that runs as another account.
    pub fn token_request(
        &self,
        signer: &TokenSigner,
        ns: &str,
        name: &str,
        body: Value,
    ) -> Result<Value, ApiError> {
        const KIND: &str = "TokenRequest";
        const GROUP: &str = "authentication.k8s.io";
        let spec = &body["spec"];
        let expiration = spec["expirationSeconds"]
            .as_i64()
            .unwrap_or(DEFAULT_EXPIRATION);
        let too = if expiration < MIN_EXPIRATION {
            Some("may not specify a duration less than 10 minutes")
        } else if expiration > MAX_EXPIRATION {
            Some("may not specify a duration larger than 2^32 seconds")
        } else {
            None
        };
        if let Some(message) = too {
            return Err(invalid(
                KIND,
                GROUP,
                "",
                vec![FieldError::invalid(
                    "spec.expirationSeconds",
                    json!(expiration),
                    message,
                )],
            ));
        }
        for (field, want, what) in [
            ("name", name, "service account name"),
            ("namespace", ns, "namespace"),
        ] {
            let given = body["metadata"][field].as_str().unwrap_or_default();
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
        let catalog = self.catalog();
        let sa_res = catalog
            .find("", "v1", "serviceaccounts")
            .ok_or(ApiError::NoSuchPath)?;
        let sa = self.get_value(&sa_res, Some(ns), name)?;

        let mut claim = KubernetesClaim {
            namespace: ns.into(),
            serviceaccount: ObjectClaim {
                name: name.into(),
                uid: string_at(&sa["metadata"], "uid"),
            },
            ..KubernetesClaim::default()
        };
        let bound = spec.get("boundObjectRef").filter(|v| v.is_object());
        if let Some(bound) = bound {
            self.bind(ns, name, bound, &mut claim)?;
        }

        let audiences = match strings_at(spec, "audiences") {
            a if a.is_empty() => vec![ISSUER.to_string()],
            a => a,
        };
        let now = jiff::Timestamp::now().as_second();
        let claims = Claims {
            aud: audiences.clone(),
            exp: now + expiration,
            iat: now,
            nbf: now,
            iss: ISSUER.into(),
            jti: crate::registry::rest::new_uid(),
            sub: format!("system:serviceaccount:{ns}:{name}"),
            kubernetes: claim,
        };
        let token = signer
            .mint(&claims)
            .map_err(|e| ApiError::Internal(e.to_string()))?;
        Ok(json!({
            "kind": KIND,
            "apiVersion": "authentication.k8s.io/v1",
            "metadata": {"name": name, "namespace": ns, "creationTimestamp": rfc3339(now)},
            "spec": {
                "audiences": audiences,
                "expirationSeconds": expiration,
                "boundObjectRef": bound.cloned().unwrap_or(Value::Null),
            },
            "status": {"token": token, "expirationTimestamp": rfc3339(claims.exp)},
        }))
    }

    /// Records in `claim` the object `bound` (a TokenRequest's `spec.boundObjectRef`) that a
    /// token for ServiceAccount `ns`/`sa` is bound to, after checking it exists as named.
    fn bind(
        &self,
        ns: &str,
        sa: &str,
        bound: &Value,
        claim: &mut KubernetesClaim,
    ) -> Result<(), ApiError> {
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
        let Some(res) = self.catalog().find("", "v1", plural) else {
            return Err(ApiError::NotFound {
                resource: GroupResource {
                    group: String::new(),
                    resource: plural.into(),
                },
                name: bound_name,
            });
        };
        let target = self.get_value(&res, Some(ns), &bound_name)?;
        let uid = string_at(&target["metadata"], "uid");
        let want_uid = string_at(bound, "uid");
        if !want_uid.is_empty() && want_uid != uid {
            return Err(ApiError::Conflict {
                resource: GroupResource {
                    group: String::new(),
                    resource: kind,
                },
                name: bound_name,
                detail: format!(
                    "the UID in the bound object reference ({want_uid}) does not match the UID in record. The object might have been deleted and then recreated"
                ),
            });
        }
        let object = ObjectClaim {
            name: bound_name,
            uid,
        };
        if kind == "Pod" {
            let runs_as = target["spec"]["serviceAccountName"]
                .as_str()
                .unwrap_or("default");
            if runs_as != sa {
                return Err(ApiError::BadRequest(format!(
                    "cannot bind token for serviceaccount {sa:?} to pod running with different serviceaccount name."
                )));
            }
            claim.pod = Some(object);
        } else {
            claim.secret = Some(object);
        }
        Ok(())
    }
}

/// The string at `v[key]`, or empty.
fn string_at(v: &Value, key: &str) -> String {
    v[key].as_str().unwrap_or_default().to_string()
}

/// The strings in the array at `v[key]` (others skipped), or none.
fn strings_at(v: &Value, key: &str) -> Vec<String> {
    v[key]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s.as_str().map(String::from))
        .collect()
}

/// `s` seconds since the epoch as an RFC 3339 timestamp, as Kubernetes writes them.
fn rfc3339(s: i64) -> String {
    jiff::Timestamp::from_second(s)
        .map(|t| t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string())
        .unwrap_or_default()
}

/// A 422 naming `kind` in `group`.
fn invalid(kind: &str, group: &str, name: &str, causes: Vec<FieldError>) -> ApiError {
    ApiError::Invalid {
        kind: format!("{kind}.{group}"),
        group: group.into(),
        name: name.into(),
        causes,
    }
}

/// Turns the request `obj` into the answer to `review`: its kind and apiVersion, empty
/// metadata, and `status`.
fn echo(obj: &mut Value, review: Review, status: Value) {
    obj["kind"] = json!(review.kind());
    obj["apiVersion"] = json!(format!("{}/v1", review.group()));
    obj["metadata"] = json!({"creationTimestamp": null});
    obj["status"] = status;
}

/// The subject of a SubjectAccessReview `spec`: `user`, `groups`, `uid`; at least one of the
/// first two must be given.
fn subject_of(spec: &Value) -> Result<User, FieldError> {
    let user = User {
        name: string_at(spec, "user"),
        groups: strings_at(spec, "groups"),
        uid: string_at(spec, "uid"),
        extra: BTreeMap::new(),
    };
    if user.name.is_empty() && user.groups.is_empty() {
        return Err(FieldError::invalid(
            "spec.user",
            json!(""),
            "at least one of user or group must be specified",
        ));
    }
    Ok(user)
}

/// What an access review `spec` asks about: exactly one of `resourceAttributes` and
/// `nonResourceAttributes`.
fn attributes_of(spec: &Value) -> Result<Attributes, FieldError> {
    let resource = spec.get("resourceAttributes").filter(|v| v.is_object());
    let non_resource = spec.get("nonResourceAttributes").filter(|v| v.is_object());
    match (resource, non_resource) {
        (Some(r), None) => Ok(Attributes {
            verb: string_at(r, "verb"),
            target: Target::Resource(ResourceAttributes {
                group: string_at(r, "group"),
                version: string_at(r, "version"),
                resource: string_at(r, "resource"),
                subresource: string_at(r, "subresource"),
                namespace: string_at(r, "namespace"),
                name: string_at(r, "name"),
            }),
        }),
        (None, Some(n)) => Ok(Attributes {
            verb: string_at(n, "verb"),
            target: Target::NonResource {
                path: string_at(n, "path"),
            },
        }),
        (Some(_), Some(n)) => Err(FieldError::invalid(
            "spec.nonResourceAttributes",
            n.clone(),
            "cannot be specified in combination with resourceAttributes",
        )),
        (None, None) => Err(FieldError::invalid(
            "spec.resourceAttributes",
            Value::Null,
            "exactly one of nonResourceAttributes or resourceAttributes must be specified",
        )),
    }
}

/// A (Self)SubjectAccessReview: whether `subject` may do what `obj`'s spec describes. Every
/// problem with the request is reported at once, attributes first, as Kubernetes does.
fn access_review(
    rbac: &RbacIndex,
    review: Review,
    subject: Result<User, FieldError>,
    mut obj: Value,
) -> Result<Value, ApiError> {
    let (attrs, subject) = match (attributes_of(&obj["spec"]), subject) {
        (Ok(attrs), Ok(subject)) => (attrs, subject),
        (attrs, subject) => {
            let causes = [attrs.err(), subject.err()].into_iter().flatten().collect();
            return Err(invalid(review.kind(), review.group(), "", causes));
        }
    };
    let decision = if is_master(&subject) {
        Decision {
            allowed: true,
            reason: String::new(),
        }
    } else {
        rbac.snapshot().authorize(&subject, &attrs)
    };
    let mut status = Map::new();
    status.insert("allowed".into(), json!(decision.allowed));
    if !decision.reason.is_empty() {
        status.insert("reason".into(), json!(decision.reason));
    }
    echo(&mut obj, review, Value::Object(status));
    Ok(obj)
}

/// SelfSubjectRulesReview: the rules that apply to `user` in `spec.namespace`.
fn rules_review(rbac: &RbacIndex, user: &User, obj: &Value) -> Result<Value, ApiError> {
    let namespace = obj["spec"]["namespace"].as_str().unwrap_or_default();
    if namespace.is_empty() {
        return Err(ApiError::BadRequest("no namespace on request".into()));
    }
    let (rules, errors) = rbac.snapshot().rules_for(user, namespace);
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
    let mut answer = json!({"spec": {}});
    echo(&mut answer, Review::SelfSubjectRules, status);
    Ok(answer)
}

/// `user` as a review's `userInfo`: username, uid and extra only when set, groups always.
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
    let mut answer = json!({});
    echo(
        &mut answer,
        Review::SelfSubject,
        json!({"userInfo": user_info(user)}),
    );
    answer
}

#[cfg(test)]
mod tests;
