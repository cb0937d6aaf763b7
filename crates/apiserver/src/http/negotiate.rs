//! Content negotiation: what a client accepts (`Accept`) and what it sent (`Content-Type`).
//!
//! Responses are always JSON, in one of several shapes: the object itself, a `Table` for
//! kubectl, `PartialObjectMetadata` for metadata-only clients, or aggregated discovery. The
//! shape is picked from the first media range in `Accept` that the server can produce, as the
//! Kubernetes API server does; protobuf ranges are skipped because a JSON range always follows
//! them in what real clients send.

use http::HeaderMap;

use super::error::ApiError;

/// One media range of an `Accept` header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MediaRange {
    /// `application/json` etc., lowercased.
    pub essence: String,
    /// Parameters (`as`, `g`, `v`, ...), names lowercased.
    pub params: Vec<(String, String)>,
}

impl MediaRange {
    /// The value of parameter `name`.
    pub fn param(&self, name: &str) -> Option<&str> {
        self.params
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Parses an `Accept` header value into its media ranges, in order.
pub fn parse_accept(value: &str) -> Vec<MediaRange> {
    value
        .split(',')
        .filter_map(|part| {
            let mut pieces = part.split(';');
            let essence = pieces.next()?.trim().to_ascii_lowercase();
            if essence.is_empty() {
                return None;
            }
            let params = pieces
                .filter_map(|p| {
                    let (k, v) = p.split_once('=')?;
                    Some((
                        k.trim().to_ascii_lowercase(),
                        v.trim().trim_matches('"').to_string(),
                    ))
                })
                .collect();
            Some(MediaRange { essence, params })
        })
        .collect()
}

/// The shape of an object or list response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// The object(s) as stored.
    Object,
    /// A `meta.k8s.io` Table (with its version).
    Table(&'static str),
    /// `PartialObjectMetadata` (or its list).
    Metadata,
}

fn is_json(essence: &str) -> bool {
    matches!(essence, "application/json" | "*/*" | "application/*")
}

/// Picks the response shape for an object, list or watch request.
pub fn object_shape(headers: &HeaderMap) -> Result<Shape, ApiError> {
    let Some(accept) = headers
        .get(http::header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.trim().is_empty())
    else {
        return Ok(Shape::Object);
    };
    for range in parse_accept(accept) {
        if !is_json(&range.essence) {
            continue;
        }
        match (range.param("as"), range.param("g"), range.param("v")) {
            (None, _, _) => return Ok(Shape::Object),
            (Some("Table"), Some("meta.k8s.io"), Some("v1")) => return Ok(Shape::Table("v1")),
            (Some("Table"), Some("meta.k8s.io"), Some("v1beta1")) => {
                return Ok(Shape::Table("v1beta1"));
            }
            (
                Some("PartialObjectMetadata" | "PartialObjectMetadataList"),
                Some("meta.k8s.io"),
                Some("v1"),
            ) => return Ok(Shape::Metadata),
            _ => continue,
        }
    }
    Err(ApiError::NotAcceptable)
}

/// The form of a discovery response for `/api` and `/apis`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DiscoveryForm {
    /// `APIVersions` / `APIGroupList`.
    Legacy,
    /// `APIGroupDiscoveryList` at `apidiscovery.k8s.io/<version>`.
    Aggregated(&'static str),
}

/// Negotiates the discovery form strictly: aggregated only when its exact type is accepted.
pub fn discovery_form(headers: &HeaderMap) -> DiscoveryForm {
    let accept = headers
        .get(http::header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    for range in parse_accept(accept) {
        if range.essence != "application/json" {
            continue;
        }
        match (range.param("g"), range.param("v"), range.param("as")) {
            (Some("apidiscovery.k8s.io"), Some("v2"), Some("APIGroupDiscoveryList")) => {
                return DiscoveryForm::Aggregated("v2");
            }
            (Some("apidiscovery.k8s.io"), Some("v2beta1"), Some("APIGroupDiscoveryList")) => {
                return DiscoveryForm::Aggregated("v2beta1");
            }
            (None, None, None) => return DiscoveryForm::Legacy,
            _ => continue,
        }
    }
    DiscoveryForm::Legacy
}

pub use crate::api::body::BodyType;

/// Reads `Content-Type`, ignoring parameters such as `charset`; absent means JSON.
pub fn body_type(headers: &HeaderMap) -> Result<BodyType, String> {
    BodyType::from_content_type(
        headers
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn with_accept(v: &'static str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(http::header::ACCEPT, HeaderValue::from_static(v));
        h
    }

    #[test]
    fn kubectl_get_receives_a_table() {
        let h = with_accept(
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json",
        );
        assert_eq!(object_shape(&h).expect("acceptable"), Shape::Table("v1"));
    }

    #[test]
    fn protobuf_first_then_json_is_answered_with_json() {
        let h = with_accept("application/vnd.kubernetes.protobuf, */*");
        assert_eq!(object_shape(&h).expect("acceptable"), Shape::Object);
        let h = with_accept(
            "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json",
        );
        assert_eq!(object_shape(&h).expect("acceptable"), Shape::Metadata);
    }

    #[test]
    fn protobuf_alone_is_not_acceptable() {
        let h = with_accept("application/vnd.kubernetes.protobuf");
        assert!(matches!(object_shape(&h), Err(ApiError::NotAcceptable)));
    }

    #[test]
    fn aggregated_discovery_needs_its_exact_type() {
        let kubectl = with_accept(
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json",
        );
        assert_eq!(discovery_form(&kubectl), DiscoveryForm::Aggregated("v2"));
        let old = with_accept(
            "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json",
        );
        assert_eq!(discovery_form(&old), DiscoveryForm::Aggregated("v2beta1"));
        assert_eq!(
            discovery_form(&with_accept("application/json, */*")),
            DiscoveryForm::Legacy
        );
        assert_eq!(discovery_form(&HeaderMap::new()), DiscoveryForm::Legacy);
    }

    #[test]
    fn content_type_parameters_are_ignored() {
        let mut h = HeaderMap::new();
        h.insert(
            http::header::CONTENT_TYPE,
            HeaderValue::from_static("application/merge-patch+json; charset=utf-8"),
        );
        assert_eq!(body_type(&h), Ok(BodyType::MergePatch));
        h.insert(
            http::header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain"),
        );
        assert_eq!(body_type(&h), Err("text/plain".into()));
    }
}
