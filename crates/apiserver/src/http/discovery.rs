//! Discovery: the legacy documents (`APIVersions`, `APIGroupList`, `APIGroup`,
//! `APIResourceList`) and aggregated discovery (`APIGroupDiscoveryList`, v2 and v2beta1),
//! negotiated strictly by `Accept` as clients expect.

use std::sync::Arc;

use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http::{HeaderMap, HeaderValue, StatusCode, header};
use serde_json::{Map, Value, json};
use sha2::Digest;

use super::App;
use super::error::ApiError;
use super::negotiate::{DiscoveryForm, discovery_form};
use super::request::Target;
use crate::registry::Resource;

fn version_rank(v: &str) -> (u8, u32, u32, String) {
    // GA > beta > alpha > anything else; higher numbers first.
    let parse = |s: &str| -> Option<(u8, u32, u32)> {
        let rest = s.strip_prefix('v')?;
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        let major: u32 = digits.parse().ok()?;
        let tail = &rest[digits.len()..];
        if tail.is_empty() {
            return Some((0, major, 0));
        }
        for (label, rank) in [("beta", 1u8), ("alpha", 2u8)] {
            if let Some(n) = tail.strip_prefix(label) {
                return Some((rank, major, n.parse().ok()?));
            }
        }
        None
    };
    match parse(v) {
        Some((rank, major, minor)) => (rank, u32::MAX - major, u32::MAX - minor, String::new()),
        None => (3, 0, 0, v.to_string()),
    }
}

/// The versions of one group, each with its resources.
type Versions = Vec<(String, Vec<Arc<Resource>>)>;

/// Groups with their versions sorted by preference; core first when present.
fn groups(app: &App) -> Vec<(String, Versions)> {
    let mut out: Vec<(String, Versions)> = Vec::new();
    for (group, version, resources) in app.registry.catalog().group_versions() {
        match out.iter_mut().find(|(g, _)| *g == group) {
            Some((_, versions)) => versions.push((version, resources)),
            None => out.push((group, vec![(version, resources)])),
        }
    }
    for (_, versions) in &mut out {
        versions.sort_by_key(|(v, _)| version_rank(v));
    }
    out
}

fn gv(group: &str, version: &str) -> String {
    if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    }
}

const SUBRESOURCE_VERBS: [&str; 3] = ["get", "patch", "update"];

fn legacy_resources(resources: &[Arc<Resource>]) -> Vec<Value> {
    let mut out = Vec::new();
    for r in resources {
        let mut entry = Map::new();
        entry.insert("name".into(), json!(r.plural));
        entry.insert("singularName".into(), json!(r.singular));
        entry.insert("namespaced".into(), json!(r.namespaced));
        entry.insert("kind".into(), json!(r.kind));
        entry.insert("verbs".into(), json!(r.verbs));
        if !r.short_names.is_empty() {
            entry.insert("shortNames".into(), json!(r.short_names));
        }
        if !r.categories.is_empty() {
            entry.insert("categories".into(), json!(r.categories));
        }
        entry.insert("storageVersionHash".into(), json!(r.storage_version_hash()));
        out.push(Value::Object(entry));
        for (sub, extra) in subresources(r) {
            let mut e = json!({"name": format!("{}/{sub}", r.plural), "singularName": "",
                               "namespaced": r.namespaced});
            match extra {
                SubKind::Same(verbs) => {
                    e["kind"] = json!(r.kind);
                    e["verbs"] = json!(verbs);
                }
                SubKind::Token => {
                    e["group"] = json!("authentication.k8s.io");
                    e["version"] = json!("v1");
                    e["kind"] = json!("TokenRequest");
                    e["verbs"] = json!(["create"]);
                }
                SubKind::Connect(kind, verbs) => {
                    e["kind"] = json!(kind);
                    e["verbs"] = json!(verbs);
                }
                SubKind::Other(group, version, kind, verbs) => {
                    if !group.is_empty() {
                        e["group"] = json!(group);
                        e["version"] = json!(version);
                    }
                    e["kind"] = json!(kind);
                    e["verbs"] = json!(verbs);
                }
                SubKind::Scale => {
                    e["group"] = json!("autoscaling");
                    e["version"] = json!("v1");
                    e["kind"] = json!("Scale");
                    e["verbs"] = json!(SUBRESOURCE_VERBS);
                }
            }
            out.push(e);
        }
    }
    out
}

enum SubKind {
    Same(Vec<&'static str>),
    Scale,
    /// `serviceaccounts/token`: answers with an authentication.k8s.io TokenRequest.
    Token,
    /// A connect subresource of a pod or node, whose kind is its options (`PodExecOptions`).
    Connect(String, Vec<&'static str>),
    /// A subresource of another kind (group, version, kind) and its verbs: `pods/eviction`
    /// takes a policy/v1 Eviction.
    Other(&'static str, &'static str, &'static str, Vec<&'static str>),
}

/// The subresources whose kind is not their resource's.
fn other_kind(sub: &str) -> Option<SubKind> {
    match sub {
        "eviction" => Some(SubKind::Other("policy", "v1", "Eviction", vec!["create"])),
        "binding" => Some(SubKind::Other("", "v1", "Binding", vec!["create"])),
        _ => None,
    }
}

fn subresources(r: &Resource) -> Vec<(&'static str, SubKind)> {
    let mut subs = Vec::new();
    for other in &r.subresources.other {
        if *other == "token" {
            subs.push(("token", SubKind::Token));
            continue;
        }
        if let Some(kind) = other_kind(other) {
            subs.push((*other, kind));
            continue;
        }
        let connect = |kind: String, verbs: &[&'static str]| SubKind::Connect(kind, verbs.to_vec());
        match *other {
            "log" => {
                subs.push(("log", SubKind::Same(vec!["get"])));
                continue;
            }
            "exec" | "attach" | "portforward" => {
                let kind = match *other {
                    "exec" => "PodExecOptions",
                    "attach" => "PodAttachOptions",
                    _ => "PodPortForwardOptions",
                };
                subs.push((*other, connect(kind.into(), &["create", "get"])));
                continue;
            }
            "proxy" => {
                let kind = format!("{}ProxyOptions", r.kind);
                let verbs = ["create", "delete", "get", "patch", "update"];
                subs.push(("proxy", connect(kind, &verbs)));
                continue;
            }
            _ => {}
        }
        let verbs = match *other {
            "finalize" => vec!["update"],
            "token" => vec!["create"],
            _ => SUBRESOURCE_VERBS.to_vec(),
        };
        subs.push((*other, SubKind::Same(verbs)));
    }
    if r.subresources.scale.is_some() {
        subs.push(("scale", SubKind::Scale));
    }
    if r.subresources.status {
        subs.push(("status", SubKind::Same(SUBRESOURCE_VERBS.to_vec())));
    }
    subs.sort_by_key(|(name, _)| *name);
    subs
}

fn aggregated_resources(resources: &[Arc<Resource>]) -> Vec<Value> {
    resources
        .iter()
        .map(|r| {
            let mut entry = Map::new();
            entry.insert("resource".into(), json!(r.plural));
            entry.insert(
                "responseKind".into(),
                json!({"group": r.group, "version": r.version, "kind": r.kind}),
            );
            entry.insert(
                "scope".into(),
                json!(if r.namespaced {
                    "Namespaced"
                } else {
                    "Cluster"
                }),
            );
            entry.insert("singularResource".into(), json!(r.singular));
            entry.insert("verbs".into(), json!(r.verbs));
            if !r.short_names.is_empty() {
                entry.insert("shortNames".into(), json!(r.short_names));
            }
            if !r.categories.is_empty() {
                entry.insert("categories".into(), json!(r.categories));
            }
            let subs: Vec<Value> = subresources(r)
                .into_iter()
                .map(|(sub, kind)| match kind {
                    SubKind::Same(verbs) => json!({"subresource": sub,
                        "responseKind": {"group": r.group, "version": r.version, "kind": r.kind},
                        "verbs": verbs}),
                    SubKind::Token => json!({"subresource": sub,
                        "responseKind": {"group": "authentication.k8s.io", "version": "v1", "kind": "TokenRequest"},
                        "verbs": ["create"]}),
                    SubKind::Connect(kind, verbs) => json!({"subresource": sub,
                        "responseKind": {"group": r.group, "version": r.version, "kind": kind},
                        "verbs": verbs}),
                    SubKind::Other(group, version, kind, verbs) => json!({"subresource": sub,
                        "responseKind": {"group": group, "version": version, "kind": kind},
                        "verbs": verbs}),
                    SubKind::Scale => json!({"subresource": sub,
                        "responseKind": {"group": "autoscaling", "version": "v1", "kind": "Scale"},
                        "verbs": SUBRESOURCE_VERBS}),
                })
                .collect();
            if !subs.is_empty() {
                entry.insert("subresources".into(), Value::Array(subs));
            }
            Value::Object(entry)
        })
        .collect()
}

fn aggregated(app: &App, core: bool, version: &str) -> Value {
    let items: Vec<Value> = groups(app)
        .into_iter()
        .filter(|(g, _)| g.is_empty() == core)
        .map(|(group, versions)| {
            let metadata = if core {
                json!({"creationTimestamp": null})
            } else {
                json!({"name": group, "creationTimestamp": null})
            };
            let versions: Vec<Value> = versions
                .iter()
                .map(|(v, resources)| {
                    json!({"version": v, "freshness": "Current",
                           "resources": aggregated_resources(resources)})
                })
                .collect();
            json!({"metadata": metadata, "versions": versions})
        })
        .collect();
    json!({"kind": "APIGroupDiscoveryList",
           "apiVersion": format!("apidiscovery.k8s.io/{version}"),
           "metadata": {}, "items": items})
}

fn api_group(group: &str, versions: &[(String, Vec<Arc<Resource>>)]) -> Value {
    let list: Vec<Value> = versions
        .iter()
        .map(|(v, _)| json!({"groupVersion": gv(group, v), "version": v}))
        .collect();
    let preferred = list.first().cloned().unwrap_or(Value::Null);
    json!({"name": group, "versions": list, "preferredVersion": preferred})
}

fn respond(body: Value, content_type: &'static str, headers: &HeaderMap) -> Response {
    let mut text = body.to_string();
    text.push('\n');
    let bytes = Bytes::from(text);
    let etag = format!("\"{:x}\"", sha2::Sha512::digest(&bytes));
    let matches = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v == etag);
    let mut resp = if matches {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        (StatusCode::OK, bytes).into_response()
    };
    let h = resp.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(header::VARY, HeaderValue::from_static("Accept"));
    if let Ok(v) = HeaderValue::from_str(&etag) {
        h.insert(header::ETAG, v);
    }
    resp
}

const AGGREGATED_V2: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";
const AGGREGATED_V2BETA1: &str =
    "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList";

/// Serves a discovery document.
pub(crate) fn serve(app: &App, target: &Target, headers: &HeaderMap) -> Response {
    let form = discovery_form(headers);
    let aggregated_type = |v: &str| {
        if v == "v2" {
            AGGREGATED_V2
        } else {
            AGGREGATED_V2BETA1
        }
    };
    match target {
        Target::CoreGroups => match form {
            DiscoveryForm::Aggregated(v) => {
                respond(aggregated(app, true, v), aggregated_type(v), headers)
            }
            DiscoveryForm::Legacy => {
                let host = headers
                    .get(header::HOST)
                    .and_then(|h| h.to_str().ok())
                    .unwrap_or("127.0.0.1:6443");
                respond(
                    json!({"kind": "APIVersions", "versions": ["v1"],
                           "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": host}]}),
                    "application/json",
                    headers,
                )
            }
        },
        Target::Groups => match form {
            DiscoveryForm::Aggregated(v) => {
                respond(aggregated(app, false, v), aggregated_type(v), headers)
            }
            DiscoveryForm::Legacy => {
                let list: Vec<Value> = groups(app)
                    .iter()
                    .filter(|(g, _)| !g.is_empty())
                    .map(|(g, versions)| api_group(g, versions))
                    .collect();
                respond(
                    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": list}),
                    "application/json",
                    headers,
                )
            }
        },
        Target::Group(group) => match groups(app)
            .into_iter()
            .find(|(g, _)| g == group && !g.is_empty())
        {
            Some((g, versions)) => {
                let mut doc = api_group(&g, &versions);
                doc["kind"] = json!("APIGroup");
                doc["apiVersion"] = json!("v1");
                respond(doc, "application/json", headers)
            }
            None => ApiError::NoSuchPath.into_response(),
        },
        Target::GroupVersion { group, version } => {
            let catalog = app.registry.catalog();
            let found = catalog
                .group_versions()
                .into_iter()
                .find(|(g, v, _)| g == group && v == version);
            match found {
                Some((g, v, resources)) => respond(
                    json!({"kind": "APIResourceList", "apiVersion": "v1",
                           "groupVersion": gv(&g, &v), "resources": legacy_resources(&resources)}),
                    "application/json",
                    headers,
                ),
                None => ApiError::NoSuchPath.into_response(),
            }
        }
        _ => ApiError::NoSuchPath.into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_sort_ga_then_beta_then_alpha_then_others() {
        let mut v = vec!["v1alpha1", "foo", "v1beta1", "v1", "v2", "v1beta2"];
        v.sort_by_key(|s| version_rank(s));
        assert_eq!(v, ["v2", "v1", "v1beta2", "v1beta1", "v1alpha1", "foo"]);
    }
}
