//! The rules every kind shares, at the ground floor: object names (DNS-1123 labels and
//! subdomains, DNS-1035 labels, path segments), qualified names (label and annotation keys,
//! finalizers), label values, and the `metadata` fields common to all objects (labels,
//! annotations, finalizers, owner references).
//!
//! Kubernetes keeps these in apimachinery (`util/validation` for the name formats,
//! `api/validation` for `ObjectMeta`); here they sit in `api/` for the same reason: the
//! selector parser, schema validation and the registry all check names, and none of them
//! may import another for it.
//!
//! Validation never mutates and never stops at the first problem: it returns one
//! [`FieldError`] per failing field path.

use serde_json::Value;

use super::field::FieldError;

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
            // The first 63 bytes, or the whole name when byte 63 falls inside a character
            // (such a name is not a label anyway: labels are ASCII).
            let head = name.get(..name.len().min(63)).unwrap_or(name);
            if !is_dns_label(head) || name.contains('.') {
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

/// Kubernetes' explanation of the name part of a qualified name.
pub(crate) const NAME_PART_FORMAT: &str = "must consist of alphanumeric characters, '-', '_' or '.', and \
     must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or \
     '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";

/// Kubernetes' explanation of a DNS-1123 subdomain.
pub(crate) const SUBDOMAIN_FORMAT: &str = "a lowercase RFC 1123 subdomain must consist of lower case \
     alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character \
     (e.g. 'example.com', regex used for validation is \
     '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

/// Kubernetes' explanation of a label value.
pub(crate) const LABEL_VALUE_FORMAT: &str = "a valid label must be an empty string or consist of \
     alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric \
     character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is \
     '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";

/// The longest name part of a key, and the longest value.
const MAX_NAME_LENGTH: usize = 63;
/// The longest key prefix.
const MAX_PREFIX_LENGTH: usize = 253;

/// What is wrong with a qualified name (`[prefix/]name`: label keys, annotation keys,
/// finalizers), in Kubernetes' words; empty when it is valid.
pub fn qualified_name_errors(key: &str) -> Vec<String> {
    let mut errors = Vec::new();
    let name = match key.split('/').collect::<Vec<_>>()[..] {
        [name] => name,
        [prefix, name] => {
            if prefix.is_empty() {
                errors.push("prefix part must be non-empty".to_owned());
            } else {
                if prefix.len() > MAX_PREFIX_LENGTH {
                    errors.push(format!(
                        "prefix part must be no more than {MAX_PREFIX_LENGTH} characters"
                    ));
                }
                if !is_dns_subdomain(prefix) {
                    errors.push(format!("prefix part {SUBDOMAIN_FORMAT}"));
                }
            }
            name
        }
        _ => {
            return vec![format!(
                "a qualified name {NAME_PART_FORMAT} with an optional DNS subdomain prefix and '/' \
                 (e.g. 'example.com/MyName')"
            )];
        }
    };
    if name.is_empty() {
        errors.push("name part must be non-empty".to_owned());
    } else if name.len() > MAX_NAME_LENGTH {
        errors.push(format!(
            "name part must be no more than {MAX_NAME_LENGTH} characters"
        ));
    }
    if !is_name_part(name) {
        errors.push(format!("name part {NAME_PART_FORMAT}"));
    }
    errors
}

/// What is wrong with a label value (empty is allowed), in Kubernetes' words.
pub fn label_value_errors(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if value.len() > MAX_NAME_LENGTH {
        errors.push(format!("must be no more than {MAX_NAME_LENGTH} characters"));
    }
    if !value.is_empty() && !is_name_part(value) {
        errors.push(LABEL_VALUE_FORMAT.to_owned());
    }
    errors
}

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`: alphanumeric at both ends, `-_.` inside.
fn is_name_part(text: &str) -> bool {
    let bytes = text.as_bytes();
    match (bytes.first(), bytes.last()) {
        (Some(first), Some(last)) => {
            first.is_ascii_alphanumeric()
                && last.is_ascii_alphanumeric()
                && bytes
                    .iter()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        }
        _ => false,
    }
}

/// Dot-separated DNS-1123 labels: lowercase alphanumeric at both ends, `-` inside.
fn is_dns_subdomain(text: &str) -> bool {
    text.split('.').all(|label| {
        let bytes = label.as_bytes();
        match (bytes.first(), bytes.last()) {
            (Some(first), Some(last)) => {
                (first.is_ascii_lowercase() || first.is_ascii_digit())
                    && (last.is_ascii_lowercase() || last.is_ascii_digit())
                    && bytes
                        .iter()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
            }
            _ => false,
        }
    })
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
                    "metadata.finalizers: {s:?}: prefer a domain-qualified finalizer name including a path (/) to avoid accidental conflicts with other finalizer writers"
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
mod tests;
