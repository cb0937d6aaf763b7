//! Tests of the shared name and `metadata` rules.

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

#[test]
fn a_long_label_name_with_a_multibyte_character_is_refused_not_a_panic() {
    // Byte 63 falls inside the two-byte `é`: the check must not slice through it.
    let name = format!("{}é", "a".repeat(62));
    let why = check_name(NameRule::Label, &name);
    assert!(why.iter().any(|w| w.contains("no more than 63")), "{why:?}");
    assert!(why.iter().any(|w| w.contains("RFC 1123")), "{why:?}");
}
