//! Field errors and the validators shared by every kind: names, labels, annotations,
//! finalizers, owner references.
//!
//! Validation never mutates and never stops at the first problem: it returns one
//! [`FieldError`] per failing field path, which the API turns into a 422 `Invalid` Status with
//! one cause each.

use serde_json::Value;

pub use crate::api::field::{FieldError, FieldErrorKind};

/// How a kind's object names are checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NameRule {
    /// A DNS-1123 subdomain (most kinds).
    Subdomain,
    /// A DNS-1123 label (namespaces).
    Label,
    /// A DNS-1035 label: starts with a letter (services).
    Dns1035Label,
    /// Any path segment: not `.` or `..`, no `/` or `%` (RBAC roles and bindings).
    PathSegment,
}

const LABEL_FMT: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
const SUBDOMAIN_FMT: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const DNS1035_FMT: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";

fn is_dns_label(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b[0] != b'-'
        && b[b.len() - 1] != b'-'
}

/// Whether `s` is a DNS-1123 label.
pub fn is_label(s: &str) -> bool {
    is_dns_label(s)
}

/// Whether `s` is a DNS-1123 subdomain.
pub fn is_subdomain(s: &str) -> bool {
    !s.is_empty() && s.len() <= 253 && s.split('.').all(is_dns_label)
}

/// Checks a name against `rule`; returns the reasons it fails.
pub fn check_name(rule: NameRule, name: &str) -> Vec<String> {
    let mut why = Vec::new();
    match rule {
        NameRule::Subdomain => {
            if name.len() > 253 {
                why.push("must be no more than 253 characters".to_string());
            }
            if !name.split('.').all(is_dns_label) {
                why.push(SUBDOMAIN_FMT.to_string());
            }
        }
        NameRule::Label => {
            if name.len() > 63 {
                why.push("must be no more than 63 characters".to_string());
            }
            if !is_dns_label(&name[..name.len().min(63)]) || name.contains('.') {
                why.push(LABEL_FMT.to_string());
            }
        }
        NameRule::Dns1035Label => {
            if name.len() > 63 {
                why.push("must be no more than 63 characters".to_string());
            }
            if !is_dns_label(name) || !name.starts_with(|c: char| c.is_ascii_lowercase()) {
                why.push(DNS1035_FMT.to_string());
            }
        }
        NameRule::PathSegment => {
            if name == "." || name == ".." {
                why.push(format!("may not be '{name}'"));
            }
            for bad in ["/", "%"] {
                if name.contains(bad) {
                    why.push(format!("may not contain '{bad}'"));
                }
            }
        }
    }
    why
}

/// What is wrong with a qualified name (`[prefix/]name`: label keys, annotation keys,
/// finalizers), in Kubernetes' words; empty when it is valid.
pub fn qualified_name_errors(s: &str) -> Vec<String> {
    crate::selector::label::key_errors(s)
}

/// What is wrong with a label value (empty is allowed), in Kubernetes' words.
pub fn label_value_errors(s: &str) -> Vec<String> {
    crate::selector::label::value_errors(s)
}

/// Finalizer names that need no domain prefix.
const STANDARD_FINALIZERS: [&str; 3] = ["kubernetes", "orphan", "foregroundDeletion"];

/// Validates `metadata` fields every kind shares (not the name: see [`check_name`]).
/// Returns errors and non-fatal warnings.
pub fn validate_object_meta(obj: &Value) -> (Vec<FieldError>, Vec<String>) {
    let mut errs = Vec::new();
    let mut warnings = Vec::new();
    let meta = &obj["metadata"];
    if let Some(labels) = meta.get("labels").and_then(Value::as_object) {
        for (k, v) in labels {
            for why in qualified_name_errors(k) {
                errs.push(FieldError::invalid(
                    "metadata.labels",
                    Value::String(k.clone()),
                    why,
                ));
            }
            match v.as_str() {
                Some(s) => {
                    for why in label_value_errors(s) {
                        errs.push(FieldError::invalid("metadata.labels", v.clone(), why));
                    }
                }
                None => errs.push(FieldError::invalid(
                    "metadata.labels",
                    v.clone(),
                    "must be a string",
                )),
            }
        }
    }
    if let Some(annotations) = meta.get("annotations").and_then(Value::as_object) {
        let mut total = 0usize;
        for (k, v) in annotations {
            for why in qualified_name_errors(&k.to_ascii_lowercase()) {
                errs.push(FieldError::invalid(
                    "metadata.annotations",
                    Value::String(k.clone()),
                    why,
                ));
            }
            total += k.len() + v.as_str().map_or(0, str::len);
        }
        if total > 256 * 1024 {
            errs.push(FieldError::too_long("metadata.annotations", 256 * 1024));
        }
    }
    if let Some(finalizers) = meta.get("finalizers").and_then(Value::as_array) {
        for (i, f) in finalizers.iter().enumerate() {
            let Some(s) = f.as_str() else {
                errs.push(FieldError::invalid(
                    format!("metadata.finalizers[{i}]"),
                    f.clone(),
                    "must be a string",
                ));
                continue;
            };
            for why in qualified_name_errors(s) {
                errs.push(FieldError::invalid(
                    format!("metadata.finalizers[{i}]"),
                    f.clone(),
                    why,
                ));
            }
            if !s.contains('/') && !STANDARD_FINALIZERS.contains(&s) {
                warnings.push(format!(
                    "metadata.finalizers: {s:?}: prefer a domain-qualified finalizer name to avoid accidental conflicts with other finalizer writers"
                ));
            }
        }
        if finalizers.iter().any(|f| f == "orphan")
            && finalizers.iter().any(|f| f == "foregroundDeletion")
        {
            errs.push(FieldError::invalid(
                "metadata.finalizers",
                Value::Array(finalizers.clone()),
                "finalizer orphan and foregroundDeletion cannot be both set",
            ));
        }
    }
    if let Some(refs) = meta.get("ownerReferences").and_then(Value::as_array) {
        let mut controllers = 0;
        for (i, r) in refs.iter().enumerate() {
            for field in ["apiVersion", "kind", "name", "uid"] {
                if r.get(field)
                    .and_then(Value::as_str)
                    .is_none_or(str::is_empty)
                {
                    errs.push(FieldError::required(
                        format!("metadata.ownerReferences[{i}].{field}"),
                        "",
                    ));
                }
            }
            if r.get("controller").and_then(Value::as_bool) == Some(true) {
                controllers += 1;
            }
        }
        if controllers > 1 {
            errs.push(FieldError::invalid(
                "metadata.ownerReferences",
                Value::Array(refs.clone()),
                "Only one reference can have Controller set to true",
            ));
        }
    }
    (errs, warnings)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn subdomain_names_allow_dots_and_reject_capitals() {
        assert!(check_name(NameRule::Subdomain, "a.b-c.d").is_empty());
        assert!(!check_name(NameRule::Subdomain, "Abc").is_empty());
        assert!(!check_name(NameRule::Subdomain, "-a").is_empty());
        assert!(!check_name(NameRule::Subdomain, &"a".repeat(254)).is_empty());
    }

    #[test]
    fn namespace_names_are_labels_without_dots() {
        assert!(check_name(NameRule::Label, "kube-system").is_empty());
        assert!(!check_name(NameRule::Label, "a.b").is_empty());
        assert!(!check_name(NameRule::Label, &"a".repeat(64)).is_empty());
    }

    #[test]
    fn service_names_start_with_a_letter() {
        assert!(check_name(NameRule::Dns1035Label, "web").is_empty());
        assert!(!check_name(NameRule::Dns1035Label, "1web").is_empty());
    }

    #[test]
    fn rbac_names_may_hold_colons_but_not_slashes() {
        assert!(check_name(NameRule::PathSegment, "system:controller:x").is_empty());
        assert!(!check_name(NameRule::PathSegment, "a/b").is_empty());
        assert!(!check_name(NameRule::PathSegment, "..").is_empty());
    }

    #[test]
    fn invalid_messages_quote_strings_and_keep_numbers_bare() {
        let e = FieldError::invalid("spec.size", json!("big"), "must be an integer");
        assert_eq!(
            e.to_string(),
            "spec.size: Invalid value: \"big\": must be an integer"
        );
        let e = FieldError::invalid(
            "spec.replicas",
            json!(-1),
            "must be greater than or equal to 0",
        );
        assert_eq!(
            e.message(),
            "Invalid value: -1: must be greater than or equal to 0"
        );
        let e = FieldError::not_supported("dryRun", json!("x"), &["All"]);
        assert_eq!(
            e.message(),
            "Unsupported value: \"x\": supported values: \"All\""
        );
        assert_eq!(
            FieldError::required("metadata.name", "").message(),
            "Required value"
        );
    }

    #[test]
    fn label_keys_and_values_are_checked() {
        let obj = json!({"metadata": {"labels": {"app.kubernetes.io/name": "web", "bad key": "x", "ok": "not ok!"}}});
        let (errs, _) = validate_object_meta(&obj);
        assert_eq!(errs.len(), 2, "{errs:?}");
    }

    #[test]
    fn unqualified_finalizers_warn_and_standard_ones_do_not() {
        let obj = json!({"metadata": {"finalizers": ["kubernetes", "foo", "example.com/hold"]}});
        let (errs, warnings) = validate_object_meta(&obj);
        assert!(errs.is_empty());
        assert_eq!(warnings.len(), 1);
        assert!(warnings[0].contains("\"foo\""));
    }

    #[test]
    fn owner_references_need_their_fields_and_one_controller_at_most() {
        let obj = json!({"metadata": {"ownerReferences": [
            {"apiVersion": "v1", "kind": "ConfigMap", "name": "a", "uid": "1", "controller": true},
            {"apiVersion": "v1", "kind": "ConfigMap", "name": "b", "controller": true}
        ]}});
        let (errs, _) = validate_object_meta(&obj);
        let fields: Vec<&str> = errs.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "metadata.ownerReferences[1].uid",
                "metadata.ownerReferences"
            ]
        );
    }
}
