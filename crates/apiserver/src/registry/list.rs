//! `list`: selectors, pagination with continue tokens, and resourceVersion semantics.

use std::time::Duration;

use base64::Engine;
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::Registry;
use super::resource::Resource;
use super::validation::FieldError;
use crate::api::error::ApiError;
use crate::selector::{FieldOp, FieldSelector, LabelSelector};
use crate::storage::{ListAt, ListOptions, Storage, StorageError, Stored};

pub use crate::api::options::ListParams;

/// Which objects a request selects: label and field selectors, checked against the kind.
#[derive(Debug, Clone)]
pub struct Selection {
    label: LabelSelector,
    field: FieldSelector,
    field_labels: &'static [&'static str],
}

impl Selection {
    /// Parses and checks the selectors of `params` for `res`.
    pub fn new(res: &Resource, params: &ListParams) -> Result<Selection, ApiError> {
        let label = LabelSelector::parse(params.label_selector.as_deref().unwrap_or(""))
            .map_err(|e| ApiError::BadRequest(e.to_string()))?;
        let field = FieldSelector::parse(params.field_selector.as_deref().unwrap_or(""))
            .map_err(|e| ApiError::BadRequest(e.to_string()))?;
        let extra = res.strategy.field_labels();
        for req in field.requirements() {
            let f = req.field.as_str();
            let known = f == "metadata.name" || f == "metadata.namespace" || extra.contains(&f);
            if !known {
                return Err(ApiError::BadRequest(format!(
                    "field label not supported: {f}"
                )));
            }
        }
        Ok(Selection {
            label,
            field,
            field_labels: extra,
        })
    }

    /// The one name the selection admits, when its field selector requires
    /// `metadata.name=…`: a watch then needs to look at objects of that name only.
    pub(crate) fn only_name(&self) -> Option<&str> {
        self.field
            .requirements()
            .iter()
            .find(|r| r.field == "metadata.name" && r.op == FieldOp::Eq)
            .map(|r| r.value.as_str())
    }

    /// Whether nothing is filtered.
    pub fn is_everything(&self) -> bool {
        self.label.is_empty() && self.field.is_empty()
    }

    /// Whether `obj` (in stored form) is selected.
    pub fn matches(&self, res: &Resource, obj: &Value) -> bool {
        if !self
            .label
            .matches(obj.pointer("/metadata/labels").and_then(Value::as_object))
        {
            return false;
        }
        self.field.matches(|f| {
            Some(match f {
                "metadata.name" | "metadata.namespace" => {
                    let key = &f["metadata.".len()..];
                    obj["metadata"][key]
                        .as_str()
                        .unwrap_or_default()
                        .to_string()
                }
                other if self.field_labels.contains(&other) => res.strategy.field_value(obj, other),
                _ => String::new(),
            })
        })
    }

    /// Whether stored bytes are selected (parsing only when a selector is set).
    pub fn matches_stored(&self, res: &Resource, stored: &[u8]) -> bool {
        if self.is_everything() {
            return true;
        }
        serde_json::from_slice::<Value>(stored).is_ok_and(|v| self.matches(res, &v))
    }
}

#[derive(Serialize, Deserialize)]
struct ContinueToken {
    v: String,
    rv: u64,
    start: String,
}

fn encode_continue(rv: u64, start: &str) -> String {
    let token = ContinueToken {
        v: "meta.k8s.io/v1".into(),
        rv,
        start: start.into(),
    };
    let json = serde_json::to_vec(&token).unwrap_or_default();
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(json)
}

fn decode_continue(token: &str) -> Result<ContinueToken, ApiError> {
    let bad = |why: &str| ApiError::BadRequest(format!("invalid continue token: {why}"));
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token.trim_end_matches('='))
        .map_err(|_| bad("not base64"))?;
    let t: ContinueToken = serde_json::from_slice(&raw).map_err(|_| bad("not a continue token"))?;
    if t.v != "meta.k8s.io/v1" {
        return Err(bad("unknown version"));
    }
    if t.start.contains("..") || t.start.starts_with('/') {
        return Err(bad("invalid start key"));
    }
    Ok(t)
}

/// One page of a list, in served form.
#[derive(Debug, Clone)]
pub struct ListOutput {
    /// The revision the page shows.
    pub rv: u64,
    /// The objects' JSON.
    pub items: Vec<Bytes>,
    /// The continue token, when more remain.
    pub continue_token: Option<String>,
    /// How many objects remain after this page, when known.
    pub remaining: Option<u64>,
    /// `Warning` headers for the client: one per stored object of this page that cannot be
    /// read back and was left out (see [`crate::storage::StorageError::Unreadable`]).
    pub warnings: Vec<String>,
}

/// The most unreadable objects a list names in warnings (as Kubernetes' StorageReadError
/// names at most 100 keys).
const MAX_UNREADABLE_WARNINGS: usize = 100;

/// Warnings for the unreadable objects a list left out.
fn unreadable_warnings(res: &Resource, unreadable: &[(String, String)]) -> Vec<String> {
    let mut warnings: Vec<String> = unreadable
        .iter()
        .take(MAX_UNREADABLE_WARNINGS)
        .map(|(key, why)| {
            tracing::warn!(%key, reason = %why, "left an unreadable object out of a list");
            format!(
                "{} at storage key {key} was left out of this list: it cannot be read ({why}); it can only be deleted",
                res.group_resource()
            )
        })
        .collect();
    if unreadable.len() > MAX_UNREADABLE_WARNINGS {
        warnings.push(format!(
            "{} more unreadable objects were left out of this list",
            unreadable.len() - MAX_UNREADABLE_WARNINGS
        ));
    }
    warnings
}

fn parse_rv(s: &str) -> Result<u64, ApiError> {
    s.parse()
        .map_err(|_| ApiError::BadRequest(format!("invalid resource version: {s:?}")))
}

/// How long a list or watch waits for a resourceVersion from the future.
pub const FUTURE_RV_WAIT: Duration = Duration::from_secs(3);

impl Registry {
    /// Checks a resourceVersion the client wants at least, waiting briefly if it is ahead.
    pub async fn wait_for_rv(&self, rv: u64) -> Result<(), ApiError> {
        if self.store().wait_for_rv(rv, FUTURE_RV_WAIT).await {
            Ok(())
        } else {
            Err(ApiError::TooLargeResourceVersion {
                requested: rv,
                current: self.store().current_rv(),
            })
        }
    }

    /// `GET` a collection.
    pub async fn list(
        &self,
        res: &Resource,
        ns: Option<&str>,
        params: &ListParams,
    ) -> Result<ListOutput, ApiError> {
        let selection = Selection::new(res, params)?;
        let prefix = res.collection_prefix(ns);
        let invalid = |f: FieldError| ApiError::invalid_options("ListOptions", vec![f]);
        if params.send_initial_events.is_some() {
            return Err(invalid(FieldError::forbidden(
                "sendInitialEvents",
                "sendInitialEvents is forbidden for list",
            )));
        }
        let rv = params.resource_version.as_deref().filter(|s| !s.is_empty());
        let rv_match = params
            .resource_version_match
            .as_deref()
            .filter(|s| !s.is_empty());
        let limit = params.limit.filter(|l| *l > 0).map_or(0, |l| l as usize);
        let mut opts = ListOptions {
            limit,
            ..Default::default()
        };
        if let Some(token) = params.continue_token.as_deref().filter(|s| !s.is_empty()) {
            if rv_match.is_some() {
                return Err(invalid(FieldError::forbidden(
                    "resourceVersionMatch",
                    "resourceVersionMatch is forbidden when continue is provided",
                )));
            }
            if rv.is_some() {
                return Err(ApiError::BadRequest(
                    "specifying resource version is not allowed when using continue".into(),
                ));
            }
            let t = decode_continue(token)?;
            opts.start_after = Some(format!("{prefix}{}", t.start));
            opts.at = ListAt::Exact(t.rv);
        } else {
            match (rv, rv_match) {
                (None, Some(_)) => {
                    return Err(invalid(FieldError::forbidden(
                        "resourceVersionMatch",
                        "resourceVersionMatch is forbidden unless resourceVersion is provided",
                    )));
                }
                (None, None) => {}
                (Some("0"), Some("Exact")) => {
                    return Err(invalid(FieldError::forbidden(
                        "resourceVersionMatch",
                        "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
                    )));
                }
                (Some("0"), None | Some("NotOlderThan")) => {}
                (Some(v), Some("NotOlderThan")) => self.wait_for_rv(parse_rv(v)?).await?,
                (Some(v), None) if limit == 0 => self.wait_for_rv(parse_rv(v)?).await?,
                (Some(v), None | Some("Exact")) => {
                    let n = parse_rv(v)?;
                    if n != self.store().current_rv() {
                        opts.at = ListAt::Exact(n);
                    }
                }
                (Some(_), Some(other)) => {
                    return Err(invalid(FieldError::not_supported(
                        "resourceVersionMatch",
                        json!(other),
                        &["Exact", "NotOlderThan", ""],
                    )));
                }
            }
        }
        let filter = |s: &Stored| selection.matches_stored(res, &s.bytes);
        let page = match self.store().list(&prefix, &opts, &filter) {
            Ok(page) => page,
            Err(StorageError::Expired { .. }) if opts.start_after.is_some() => {
                // Offer to carry on from the same key at the latest state.
                let start = opts
                    .start_after
                    .as_deref()
                    .and_then(|k| k.strip_prefix(&prefix))
                    .unwrap_or_default();
                return Err(ApiError::Expired {
                    message: "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.".into(),
                    continue_token: Some(encode_continue(self.store().current_rv(), start)),
                });
            }
            Err(StorageError::Expired { .. }) => {
                return Err(ApiError::Expired {
                    message: "The resourceVersion for the provided list is too old.".into(),
                    continue_token: None,
                });
            }
            Err(e) => return Err(ApiError::from_storage(e, &res.group_resource(), "")),
        };
        let items = page
            .items
            .iter()
            .map(|s| self.served(res, s))
            .collect::<Result<Vec<_>, _>>()?;
        let continue_token = page
            .continue_after
            .as_deref()
            .map(|k| encode_continue(page.rv, k.strip_prefix(&prefix).unwrap_or(k)));
        Ok(ListOutput {
            rv: page.rv,
            items,
            warnings: unreadable_warnings(res, &page.unreadable),
            continue_token,
            remaining: if selection.is_everything() {
                page.remaining
            } else {
                None
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn continue_tokens_round_trip_and_reject_garbage() {
        let t = encode_continue(42, "default/b");
        let back = decode_continue(&t).expect("valid");
        assert_eq!((back.rv, back.start.as_str()), (42, "default/b"));
        assert!(decode_continue("%%%").is_err());
        assert!(
            decode_continue(&base64::engine::general_purpose::URL_SAFE_NO_PAD.encode("{}"))
                .is_err()
        );
    }
}
