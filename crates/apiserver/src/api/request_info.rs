//! What a request addresses and asks, parsed once at the edge: [`RequestInfo`].
//!
//! The path becomes a [`Target`] (a meta endpoint, a discovery document, or a resource: group,
//! version, resource, namespace, name, subresource), the method and path together become the
//! Kubernetes verb (`get`, `list`, `watch`, `create`, `update`, `patch`, `delete`,
//! `deletecollection`), and the query becomes a map. HTTP builds one per request and keeps it
//! in the request's extensions; authorization, the handlers and audit read it from there
//! instead of parsing the request again.
//!
//! Routing is done here rather than by axum routes because the set of resources changes at run
//! time (custom resources) and Kubernetes paths are ambiguous in ways a route table cannot
//! express (`/api/v1/namespaces/{x}/{y}` is a namespace subresource when `y` is `status` or
//! `finalize`, else a resource `y` in namespace `x`).

use std::collections::HashMap;

use super::error::ApiError;
use super::options::Options;

/// A request's query parameters; a repeated parameter keeps its last value.
pub type Query = HashMap<String, String>;

/// A request, parsed once: see the [module docs](self).
#[derive(Clone, Debug)]
pub struct RequestInfo {
    /// The request's path.
    pub path: String,
    /// What the path addresses.
    pub target: Target,
    /// The Kubernetes verb of a resource request (`list`, `watch`, `deletecollection`, …), or
    /// the lower-cased HTTP method of any other request.
    pub verb: String,
    /// The query parameters.
    pub query: Query,
    /// The verb's options, typed ([`Options`]), or why they are malformed: the handler
    /// answers that error where Kubernetes does.
    pub options: Result<Options, ApiError>,
}

impl RequestInfo {
    /// Parses a request's method, path and query, and its options as far as the query alone
    /// tells them (no `Content-Type`: a patch reads as JSON; no User-Agent).
    pub fn new(method: &http::Method, uri: &http::Uri) -> RequestInfo {
        Self::from_parts(method, uri, &http::HeaderMap::new())
    }

    /// Parses a request's method, path, query and the headers its options read
    /// (`Content-Type` for a patch's type, `User-Agent` for the default field manager).
    pub fn from_parts(
        method: &http::Method,
        uri: &http::Uri,
        headers: &http::HeaderMap,
    ) -> RequestInfo {
        let target = parse(uri.path());
        let query: Query = uri
            .query()
            .and_then(|q| serde_urlencoded::from_str::<Vec<(String, String)>>(q).ok())
            .unwrap_or_default()
            .into_iter()
            .collect();
        let verb = match &target {
            Target::Resource(p) => {
                let named = p.name.is_some();
                let watching =
                    p.watch || query_bool(query.get("watch").map(String::as_str)) == Some(true);
                match *method {
                    http::Method::GET | http::Method::HEAD if watching => Some("watch"),
                    http::Method::GET | http::Method::HEAD if !named => Some("list"),
                    http::Method::GET | http::Method::HEAD => Some("get"),
                    http::Method::POST => Some("create"),
                    http::Method::PUT => Some("update"),
                    http::Method::PATCH => Some("patch"),
                    http::Method::DELETE if !named => Some("deletecollection"),
                    http::Method::DELETE => Some("delete"),
                    _ => None,
                }
            }
            _ => None,
        };
        let header =
            |name: http::header::HeaderName| headers.get(name).and_then(|v| v.to_str().ok());
        let options = match verb {
            Some(verb) => Options::parse(
                verb,
                &query,
                header(http::header::CONTENT_TYPE),
                header(http::header::USER_AGENT),
            ),
            None => Ok(Options::None),
        };
        RequestInfo {
            path: uri.path().to_string(),
            target,
            verb: verb.map_or_else(|| method.as_str().to_ascii_lowercase(), str::to_string),
            query,
            options,
        }
    }
}

/// A boolean query parameter as Kubernetes reads one (`Convert_Slice_string_To_bool`): absent
/// is `None`; `0` and `false` (in any case) are false; anything else, the empty string and
/// `garbage` included, is true.
pub fn query_bool(value: Option<&str>) -> Option<bool> {
    value.map(|v| !(v == "0" || v.eq_ignore_ascii_case("false")))
}

/// What a path addresses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// `/api`.
    CoreGroups,
    /// `/apis`.
    Groups,
    /// `/apis/{group}`.
    Group(String),
    /// `/api/v1` or `/apis/{group}/{version}`.
    GroupVersion {
        /// Group ("" for core).
        group: String,
        /// Version.
        version: String,
    },
    /// A resource path.
    Resource(ResourcePath),
    /// Not a path the API serves.
    Unknown,
}

/// A path under a group version that names a resource.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ResourcePath {
    /// Group ("" for core).
    pub group: String,
    /// Version.
    pub version: String,
    /// Plural resource name.
    pub resource: String,
    /// Namespace from the path, if any.
    pub namespace: Option<String>,
    /// Object name, if any.
    pub name: Option<String>,
    /// Subresource, if any.
    pub subresource: Option<String>,
    /// Whether the deprecated `/watch/` form was used.
    pub watch: bool,
}

fn nonempty(segments: &[&str]) -> bool {
    segments.iter().all(|s| !s.is_empty())
}

/// Parses a request path.
pub fn parse(path: &str) -> Target {
    let trimmed = path.trim_start_matches('/');
    let trimmed = trimmed.strip_suffix('/').unwrap_or(trimmed);
    let segments: Vec<&str> = trimmed.split('/').collect();
    if !nonempty(&segments) {
        return Target::Unknown;
    }
    let (group, version, rest) = match segments.as_slice() {
        ["api"] => return Target::CoreGroups,
        ["apis"] => return Target::Groups,
        ["apis", g] => return Target::Group((*g).to_string()),
        ["api", v] => {
            return Target::GroupVersion {
                group: String::new(),
                version: (*v).to_string(),
            };
        }
        ["apis", g, v] => {
            return Target::GroupVersion {
                group: (*g).to_string(),
                version: (*v).to_string(),
            };
        }
        ["api", v, rest @ ..] => ("", *v, rest),
        ["apis", g, v, rest @ ..] => (*g, *v, rest),
        _ => return Target::Unknown,
    };
    let (watch, rest) = match rest {
        ["watch", rest @ ..] => (true, rest),
        _ => (false, rest),
    };
    let mut p = ResourcePath {
        group: group.to_string(),
        version: version.to_string(),
        watch,
        ..Default::default()
    };
    let own = |s: &&str| (*s).to_string();
    match rest {
        ["namespaces", ns, sub @ ("status" | "finalize")] if group.is_empty() => {
            p.resource = "namespaces".into();
            p.name = Some(own(ns));
            p.subresource = Some(own(sub));
        }
        // A proxy path goes on after `proxy` (`services/web/proxy/healthz`); the rest is the
        // proxied path, not part of the resource.
        ["namespaces", ns, resource, name, "proxy", _, ..] => {
            p.namespace = Some(own(ns));
            p.resource = own(resource);
            p.name = Some(own(name));
            p.subresource = Some("proxy".into());
        }
        [resource, name, "proxy", _, ..] => {
            p.resource = own(resource);
            p.name = Some(own(name));
            p.subresource = Some("proxy".into());
        }
        ["namespaces", ns, resource, tail @ ..] if tail.len() <= 2 => {
            p.namespace = Some(own(ns));
            p.resource = own(resource);
            p.name = tail.first().map(own);
            p.subresource = tail.get(1).map(own);
        }
        [resource, tail @ ..] if tail.len() <= 2 => {
            p.resource = own(resource);
            p.name = tail.first().map(own);
            p.subresource = tail.get(1).map(own);
        }
        _ => return Target::Unknown,
    }
    Target::Resource(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn res(path: &str) -> ResourcePath {
        match parse(path) {
            Target::Resource(p) => p,
            other => panic!("{path}: {other:?}"),
        }
    }

    #[test]
    fn discovery_paths_are_recognised() {
        assert_eq!(parse("/api"), Target::CoreGroups);
        assert_eq!(parse("/apis/"), Target::Groups);
        assert_eq!(parse("/apis/apps"), Target::Group("apps".into()));
        assert_eq!(
            parse("/apis/apps/v1"),
            Target::GroupVersion {
                group: "apps".into(),
                version: "v1".into()
            }
        );
    }

    #[test]
    fn namespaced_object_paths_split_into_their_parts() {
        let p = res("/apis/apps/v1/namespaces/default/deployments/web/scale");
        assert_eq!(p.group, "apps");
        assert_eq!(p.namespace.as_deref(), Some("default"));
        assert_eq!(p.resource, "deployments");
        assert_eq!(p.name.as_deref(), Some("web"));
        assert_eq!(p.subresource.as_deref(), Some("scale"));
    }

    #[test]
    fn namespace_subresources_are_not_resources_in_a_namespace() {
        let p = res("/api/v1/namespaces/foo/finalize");
        assert_eq!(
            (p.resource.as_str(), p.name.as_deref(), p.namespace),
            ("namespaces", Some("foo"), None)
        );
        let p = res("/api/v1/namespaces/foo/configmaps");
        assert_eq!(
            (p.resource.as_str(), p.namespace.as_deref()),
            ("configmaps", Some("foo"))
        );
        let p = res("/api/v1/namespaces/foo");
        assert_eq!(
            (p.resource.as_str(), p.name.as_deref()),
            ("namespaces", Some("foo"))
        );
    }

    #[test]
    fn the_deprecated_watch_prefix_is_understood() {
        let p = res("/api/v1/watch/namespaces/default/configmaps");
        assert!(p.watch);
        assert_eq!(p.resource, "configmaps");
    }

    #[test]
    fn too_many_segments_or_empty_ones_are_unknown() {
        assert_eq!(
            parse("/api/v1/namespaces/a/configmaps/b/c/d"),
            Target::Unknown
        );
        assert_eq!(parse("/api//v1"), Target::Unknown);
        assert_eq!(parse("/foo"), Target::Unknown);
    }
}
