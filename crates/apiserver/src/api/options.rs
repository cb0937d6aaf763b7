//! A request's options, typed: what the query string (and, for a patch, the content type)
//! asks of its verb, read once when the [`RequestInfo`](super::request_info::RequestInfo) is
//! built.
//!
//! Which options a request has follows from its verb ([`Options`]): `list` and `watch` read
//! [`ListParams`]; `create` and `update` read [`WriteOptions`]; `patch` reads [`PatchOptions`]
//! (the write options, the patch type and `force`); `delete` reads [`DeleteQuery`], and
//! `deletecollection` both that and [`ListParams`]. A malformed option is kept as the error it
//! is, and the handler answers it at the point Kubernetes does (after authorization, after
//! content negotiation), so a request is never parsed twice to learn what it asked.
//!
//! Names and messages follow Kubernetes' `metav1` option types (`ListOptions`, `CreateOptions`,
//! `PatchOptions`, `DeleteOptions`) and their query conversions.

use std::sync::Arc;

use serde_json::json;

use super::body::BodyType;
use super::error::ApiError;
use super::field::FieldError;
use super::request_info::{Query, query_bool};
use super::user::User;

/// How unknown fields in a request body are treated (`fieldValidation`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FieldValidation {
    /// Drop them silently.
    Ignore,
    /// Drop them and warn (the default).
    #[default]
    Warn,
    /// Reject the request.
    Strict,
}

/// Options shared by create, update and patch.
#[derive(Clone, Debug, Default)]
pub struct WriteOptions {
    /// `dryRun=All`: do everything but persist.
    pub dry_run: bool,
    /// `fieldManager`.
    pub field_manager: Option<String>,
    /// `fieldValidation`.
    pub field_validation: FieldValidation,
    /// Who writes, for the admission stages (set by the handler from the authenticated
    /// request; `None` for the server's own writes).
    pub user: Option<Arc<User>>,
}

/// The query parameters of a list or watch.
#[derive(Clone, Debug, Default)]
pub struct ListParams {
    /// `labelSelector`.
    pub label_selector: Option<String>,
    /// `fieldSelector`.
    pub field_selector: Option<String>,
    /// `limit`.
    pub limit: Option<i64>,
    /// `continue`.
    pub continue_token: Option<String>,
    /// `resourceVersion`.
    pub resource_version: Option<String>,
    /// `resourceVersionMatch`.
    pub resource_version_match: Option<String>,
    /// `sendInitialEvents`.
    pub send_initial_events: Option<bool>,
    /// `allowWatchBookmarks`.
    pub allow_watch_bookmarks: bool,
    /// `timeoutSeconds`.
    pub timeout_seconds: Option<u64>,
}

/// The options of a `PATCH`.
#[derive(Clone, Debug)]
pub struct PatchOptions {
    /// `dryRun`, `fieldManager` (defaulted from the User-Agent unless this is an apply),
    /// `fieldValidation`.
    pub write: WriteOptions,
    /// The patch type from `Content-Type`; the unrecognised media type otherwise.
    pub patch_type: Result<BodyType, String>,
    /// `force`, when the query names it at all (only an apply may).
    pub force: Option<bool>,
}

/// The query part of `DeleteOptions` (the body may carry the same fields; the query wins).
#[derive(Clone, Debug, Default)]
pub struct DeleteQuery {
    /// `propagationPolicy`, unchecked: it is judged together with the body's fields.
    pub propagation_policy: Option<String>,
    /// `gracePeriodSeconds` (ignored when it is not a number, as Kubernetes' conversion does).
    pub grace_period_seconds: Option<i64>,
    /// `orphanDependents`.
    pub orphan_dependents: Option<bool>,
    /// `dryRun=All`.
    pub dry_run: bool,
}

/// A request's options, by verb.
#[derive(Clone, Debug, Default)]
pub enum Options {
    /// `get`, and requests that are not resource requests: no options.
    #[default]
    None,
    /// `list` and `watch`.
    List(ListParams),
    /// `create` and `update`.
    Write(WriteOptions),
    /// `patch`.
    Patch(PatchOptions),
    /// `delete`.
    Delete(DeleteQuery),
    /// `deletecollection`: which objects, and how each is deleted.
    DeleteCollection(ListParams, DeleteQuery),
}

impl Options {
    /// Reads the options of `verb` from the query and the content type.
    pub fn parse(
        verb: &str,
        query: &Query,
        content_type: Option<&str>,
        user_agent: Option<&str>,
    ) -> Result<Options, ApiError> {
        Ok(match verb {
            "list" | "watch" => Options::List(ListParams::from_query(query)?),
            "create" | "update" => {
                let mut write = WriteOptions::from_query(query)?;
                write.default_field_manager(user_agent);
                Options::Write(write)
            }
            "patch" => {
                let mut write = WriteOptions::from_query(query)?;
                let patch_type = BodyType::from_content_type(content_type);
                if patch_type != Ok(BodyType::ApplyPatch) {
                    // An apply names its manager itself: it is never defaulted.
                    write.default_field_manager(user_agent);
                }
                Options::Patch(PatchOptions {
                    write,
                    patch_type,
                    force: query
                        .contains_key("force")
                        .then(|| flag(query, "force").unwrap_or(false)),
                })
            }
            "delete" => Options::Delete(DeleteQuery::from_query(query)),
            "deletecollection" => Options::DeleteCollection(
                ListParams::from_query(query)?,
                DeleteQuery::from_query(query),
            ),
            _ => Options::None,
        })
    }
}

fn flag(q: &Query, name: &str) -> Option<bool> {
    query_bool(q.get(name).map(String::as_str))
}

impl ListParams {
    /// Reads `labelSelector`, `fieldSelector`, `limit`, `continue`, `resourceVersion`,
    /// `resourceVersionMatch`, `sendInitialEvents`, `allowWatchBookmarks`, `timeoutSeconds`.
    pub fn from_query(q: &Query) -> Result<ListParams, ApiError> {
        let number = |name: &str| -> Result<Option<i64>, ApiError> {
            q.get(name)
                .filter(|v| !v.is_empty())
                .map(|v| {
                    v.parse::<i64>()
                        .map_err(|_| ApiError::BadRequest(format!("invalid {name}: {v:?}")))
                })
                .transpose()
        };
        Ok(ListParams {
            label_selector: q.get("labelSelector").cloned(),
            field_selector: q.get("fieldSelector").cloned(),
            limit: number("limit")?,
            continue_token: q.get("continue").cloned(),
            resource_version: q.get("resourceVersion").cloned(),
            resource_version_match: q.get("resourceVersionMatch").cloned(),
            send_initial_events: flag(q, "sendInitialEvents"),
            allow_watch_bookmarks: flag(q, "allowWatchBookmarks").unwrap_or(false),
            timeout_seconds: number("timeoutSeconds")?.map(|t| t.max(0) as u64),
        })
    }
}

impl WriteOptions {
    /// Reads `dryRun`, `fieldValidation` and `fieldManager`.
    pub fn from_query(q: &Query) -> Result<WriteOptions, ApiError> {
        let dry_run = match q.get("dryRun").map(String::as_str) {
            None | Some("") => false,
            Some("All") => true,
            Some(other) => {
                return Err(ApiError::invalid_options(
                    "CreateOptions",
                    vec![FieldError::not_supported("dryRun", json!(other), &["All"])],
                ));
            }
        };
        let field_validation = match q.get("fieldValidation").map(String::as_str) {
            None | Some("") | Some("Warn") => FieldValidation::Warn,
            Some("Ignore") => FieldValidation::Ignore,
            Some("Strict") => FieldValidation::Strict,
            Some(other) => {
                return Err(ApiError::BadRequest(format!(
                    "fieldValidation must be one of \"Ignore\", \"Warn\", or \"Strict\", got {other:?}"
                )));
            }
        };
        let field_manager = q.get("fieldManager").cloned();
        if let Some(m) = &field_manager
            && (m.len() > 128 || m.chars().any(char::is_control))
        {
            return Err(ApiError::invalid_options(
                "PatchOptions",
                vec![FieldError::invalid(
                    "fieldManager",
                    json!(m),
                    "must be at most 128 printable characters",
                )],
            ));
        }
        Ok(WriteOptions {
            dry_run,
            field_manager,
            field_validation,
            user: None,
        })
    }

    /// Fills `fieldManager`, when the request names none, from the User-Agent up to its first
    /// `/` (at most 128 characters), as Kubernetes does: `kubectl/v1.32.4 (…)` writes as
    /// `kubectl`.
    pub fn default_field_manager(&mut self, user_agent: Option<&str>) {
        if self.field_manager.as_deref().is_some_and(|m| !m.is_empty()) {
            return;
        }
        self.field_manager = user_agent
            .map(|ua| {
                ua.split('/')
                    .next()
                    .unwrap_or(ua)
                    .chars()
                    .take(128)
                    .collect::<String>()
            })
            .filter(|m| !m.is_empty());
    }
}

impl DeleteQuery {
    /// Reads `propagationPolicy`, `gracePeriodSeconds`, `orphanDependents` and `dryRun`.
    pub fn from_query(q: &Query) -> DeleteQuery {
        DeleteQuery {
            propagation_policy: q.get("propagationPolicy").cloned(),
            grace_period_seconds: q.get("gracePeriodSeconds").and_then(|g| g.parse().ok()),
            orphan_dependents: flag(q, "orphanDependents"),
            dry_run: q.get("dryRun").map(String::as_str) == Some("All"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(pairs: &[(&str, &str)]) -> Query {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
            .collect()
    }

    #[test]
    fn each_verb_reads_its_own_options() {
        let q = query(&[("limit", "5"), ("dryRun", "All"), ("force", "")]);
        let Ok(Options::List(list)) = Options::parse("list", &q, None, None) else {
            panic!("list options");
        };
        assert_eq!(list.limit, Some(5));
        let Ok(Options::Write(write)) = Options::parse("create", &q, None, Some("kubectl/v1.32"))
        else {
            panic!("write options");
        };
        assert!(write.dry_run);
        assert_eq!(write.field_manager.as_deref(), Some("kubectl"));
        assert!(matches!(
            Options::parse("get", &q, None, None),
            Ok(Options::None)
        ));
    }

    #[test]
    fn a_patch_knows_its_type_and_whether_force_was_named() {
        let q = query(&[("force", "")]);
        let Ok(Options::Patch(p)) = Options::parse(
            "patch",
            &q,
            Some("application/apply-patch+yaml"),
            Some("kubectl/v1"),
        ) else {
            panic!("patch options");
        };
        assert_eq!(p.patch_type, Ok(BodyType::ApplyPatch));
        // An empty `force` is true, as Kubernetes reads booleans; an apply's manager is its own.
        assert_eq!(p.force, Some(true));
        assert_eq!(p.write.field_manager, None);
        let Ok(Options::Patch(p)) = Options::parse(
            "patch",
            &Query::new(),
            Some("text/plain"),
            Some("kubectl/v1"),
        ) else {
            panic!("patch options");
        };
        assert_eq!(p.patch_type, Err("text/plain".to_string()));
        assert_eq!(p.force, None);
        assert_eq!(p.write.field_manager.as_deref(), Some("kubectl"));
    }

    #[test]
    fn malformed_options_are_errors_kept_for_the_handler() {
        let bad_limit = query(&[("limit", "ten")]);
        assert!(matches!(
            Options::parse("list", &bad_limit, None, None),
            Err(ApiError::BadRequest(_))
        ));
        let bad_dry_run = query(&[("dryRun", "Some")]);
        assert!(Options::parse("update", &bad_dry_run, None, None).is_err());
        // Delete options from the query are judged with the body's: nothing fails here.
        let q = query(&[
            ("propagationPolicy", "Sideways"),
            ("gracePeriodSeconds", "x"),
        ]);
        let Ok(Options::Delete(d)) = Options::parse("delete", &q, None, None) else {
            panic!("delete options");
        };
        assert_eq!(d.propagation_policy.as_deref(), Some("Sideways"));
        assert_eq!(d.grace_period_seconds, None);
    }
}
