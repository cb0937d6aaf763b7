//! CustomResourceDefinitions (`apiextensions.k8s.io/v1`): the CRD kind's own strategy
//! (defaults, validation of names, scope, versions, schemas, printer columns and scale paths)
//! and, in [`custom`], the resources a CRD makes the server serve.
//!
//! What happens after a CRD is stored (names accepted, endpoints served, `Established`,
//! deletion of its objects) is the CRD controller's job: `controllers/crd.rs`.
//!
//! # Caveats
//! - A CRD gets the finalizer `customresourcecleanup.apiextensions.k8s.io` when it is deleted
//!   (as Kubernetes' CRD storage does), so that the generic delete path keeps it until the
//!   controller has removed its objects.
//! - Webhook conversion is rejected; every version is stored under the storage version and
//!   served by rewriting `apiVersion`.

pub mod custom;
pub mod jsonpath;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde_json::{Value, json};

use crate::registry::strategy::{Decoded, Strategy, decode_typed};
use crate::registry::validation::{FieldError, NameRule, check_name, is_label};
use crate::schema::Structural;

/// The API group of CRDs.
pub const GROUP: &str = "apiextensions.k8s.io";

/// The finalizer that holds a deleted CRD until its objects are gone.
pub const CLEANUP_FINALIZER: &str = "customresourcecleanup.apiextensions.k8s.io";

/// The storage prefix of CRDs.
pub const STORAGE_PREFIX: &str = "/apiextensions.k8s.io/customresourcedefinitions";

const COLUMN_TYPES: [&str; 5] = ["integer", "number", "string", "boolean", "date"];
const COLUMN_FORMATS: [&str; 8] = [
    "int32",
    "int64",
    "float",
    "double",
    "byte",
    "date",
    "date-time",
    "password",
];

/// The CRD kind.
pub struct CrdStrategy;

fn str_at<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// The name of the version marked `storage: true`, if exactly one is.
pub fn storage_version(crd: &Value) -> Option<&str> {
    let mut found = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)?
        .iter()
        .filter(|v| v.get("storage").and_then(Value::as_bool) == Some(true));
    let first = found.next()?;
    if found.next().is_some() {
        return None;
    }
    first.get("name").and_then(Value::as_str)
}

/// Whether the CRD has condition `kind` with status `True`.
pub fn has_condition(crd: &Value, kind: &str) -> bool {
    crd.pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|c| c["type"] == kind && c["status"] == "True")
}

/// Marks a CRD that a delete leaves held by its cleanup finalizer
/// `Terminating=True/InstanceDeletionPending`, so the delete's answer shows it as Kubernetes'
/// does; the CRD controller moves the condition on as it removes the objects. A CRD that
/// already has a `Terminating` condition keeps it.
fn mark_terminating(crd: &mut Value, now: &str) {
    if !crd["status"].is_object() {
        crd["status"] = json!({});
    }
    let conditions = &mut crd["status"]["conditions"];
    if !conditions.is_array() {
        *conditions = json!([]);
    }
    if let Some(list) = conditions.as_array_mut()
        && !list.iter().any(|c| c["type"] == "Terminating")
    {
        list.push(json!({
            "type": "Terminating",
            "status": "True",
            "lastTransitionTime": now,
            "reason": "InstanceDeletionPending",
            "message": "CustomResourceDefinition marked for deletion; CustomResource deletion will begin soon",
        }));
    }
}

fn set_defaults(obj: &mut Value) {
    let kind = str_at(obj, "/spec/names/kind").to_string();
    let Some(names) = obj
        .pointer_mut("/spec/names")
        .and_then(Value::as_object_mut)
    else {
        return;
    };
    if names
        .get("singular")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        names.insert("singular".into(), json!(kind.to_ascii_lowercase()));
    }
    if names
        .get("listKind")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
        && !kind.is_empty()
    {
        names.insert("listKind".into(), json!(format!("{kind}List")));
    }
    if let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut)
        && !spec.get("conversion").is_some_and(Value::is_object)
    {
        spec.insert("conversion".into(), json!({"strategy": "None"}));
    }
}

impl Strategy for CrdStrategy {
    fn decode(&self, obj: Value) -> Result<Decoded, String> {
        decode_typed::<CustomResourceDefinition>(obj)
    }

    fn tracks_generation(&self) -> bool {
        true
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        set_defaults(obj);
        let stored: Vec<Value> = storage_version(obj).map(|v| json!(v)).into_iter().collect();
        obj["status"] = json!({
            "conditions": [],
            "acceptedNames": {"plural": "", "kind": ""},
            "storedVersions": stored,
        });
    }

    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        let _ = old;
        set_defaults(new);
        // A new storage version joins the versions objects may be stored under.
        if let Some(v) = storage_version(new).map(str::to_string) {
            if !new["status"].is_object() {
                new["status"] = json!({});
            }
            let stored = &mut new["status"]["storedVersions"];
            if !stored.is_array() {
                *stored = json!([]);
            }
            if let Some(a) = stored.as_array_mut()
                && !a.iter().any(|x| x == v.as_str())
            {
                a.push(json!(v));
            }
        }
    }

    fn finalizers_on_delete(&self) -> &'static [&'static str] {
        &[CLEANUP_FINALIZER]
    }

    fn prepare_for_delete(&self, obj: &mut Value, now: &str) {
        mark_terminating(obj, now);
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        validate_crd(obj)
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = validate_crd(new);
        for (path, field) in [
            ("/spec/group", "spec.group"),
            ("/spec/names/plural", "spec.names.plural"),
        ] {
            if new.pointer(path) != old.pointer(path) {
                errs.push(FieldError::invalid(
                    field,
                    new.pointer(path).cloned().unwrap_or(Value::Null),
                    "field is immutable",
                ));
            }
        }
        if has_condition(old, "Established") {
            for (path, field) in [
                ("/spec/scope", "spec.scope"),
                ("/spec/names/kind", "spec.names.kind"),
            ] {
                if new.pointer(path) != old.pointer(path) {
                    errs.push(FieldError::invalid(
                        field,
                        new.pointer(path).cloned().unwrap_or(Value::Null),
                        "field is immutable",
                    ));
                }
            }
        }
        let names: Vec<&str> = new
            .pointer("/spec/versions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|v| v.get("name").and_then(Value::as_str))
            .collect();
        for (i, stored) in new
            .pointer("/status/storedVersions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            if let Some(s) = stored.as_str()
                && !names.contains(&s)
            {
                errs.push(FieldError::invalid(
                    format!("status.storedVersions[{i}]"),
                    json!(s),
                    "must appear in spec.versions",
                ));
            }
        }
        errs
    }
}

fn label_errors(field: &str, value: &str, errs: &mut Vec<FieldError>) {
    for why in check_name(NameRule::Label, value) {
        errs.push(FieldError::invalid(field, json!(value), why));
    }
}

fn kind_errors(field: &str, value: &str, errs: &mut Vec<FieldError>) {
    let ok = value
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic())
        && value.chars().all(|c| c.is_ascii_alphanumeric())
        && value.len() <= 63;
    if !ok {
        errs.push(FieldError::invalid(
            field,
            json!(value),
            "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')",
        ));
    }
}

/// Checks a CRD as Kubernetes does on create and update; one error per field path.
pub fn validate_crd(crd: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let name = str_at(crd, "/metadata/name");
    let group = str_at(crd, "/spec/group");
    let plural = str_at(crd, "/spec/names/plural");
    if name != format!("{plural}.{group}") {
        errs.push(FieldError::invalid(
            "metadata.name",
            json!(name),
            "must be spec.names.plural+\".\"+spec.group",
        ));
    }
    if group.is_empty() {
        errs.push(FieldError::required("spec.group", ""));
    } else if !group.contains('.') {
        errs.push(FieldError::invalid(
            "spec.group",
            json!(group),
            "should be a domain with at least one dot",
        ));
    } else {
        for why in check_name(NameRule::Subdomain, group) {
            errs.push(FieldError::invalid("spec.group", json!(group), why));
        }
    }
    match str_at(crd, "/spec/scope") {
        "Namespaced" | "Cluster" => {}
        "" => errs.push(FieldError::required("spec.scope", "")),
        other => errs.push(FieldError::not_supported(
            "spec.scope",
            json!(other),
            &["Cluster", "Namespaced"],
        )),
    }
    validate_names(crd, &mut errs);
    match str_at(crd, "/spec/conversion/strategy") {
        "" | "None" => {}
        other => errs.push(FieldError::not_supported(
            "spec.conversion.strategy",
            json!(other),
            &["None"],
        )),
    }
    validate_versions(crd, &mut errs);
    errs
}

fn validate_names(crd: &Value, errs: &mut Vec<FieldError>) {
    let plural = str_at(crd, "/spec/names/plural");
    if plural.is_empty() {
        errs.push(FieldError::required("spec.names.plural", ""));
    } else {
        label_errors("spec.names.plural", plural, errs);
    }
    let singular = str_at(crd, "/spec/names/singular");
    if !singular.is_empty() {
        label_errors("spec.names.singular", singular, errs);
    }
    let kind = str_at(crd, "/spec/names/kind");
    if kind.is_empty() {
        errs.push(FieldError::required("spec.names.kind", ""));
    } else {
        kind_errors("spec.names.kind", kind, errs);
    }
    let list_kind = str_at(crd, "/spec/names/listKind");
    if !list_kind.is_empty() {
        kind_errors("spec.names.listKind", list_kind, errs);
        if list_kind == kind {
            errs.push(FieldError::invalid(
                "spec.names.listKind",
                json!(list_kind),
                "kind and listKind may not be the same",
            ));
        }
    }
    for field in ["shortNames", "categories"] {
        let pointer = format!("/spec/names/{field}");
        for (i, s) in crd
            .pointer(&pointer)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            let s = s.as_str().unwrap_or_default();
            label_errors(&format!("spec.names.{field}[{i}]"), s, errs);
        }
    }
}

fn validate_versions(crd: &Value, errs: &mut Vec<FieldError>) {
    let versions = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    if versions.is_empty() {
        errs.push(FieldError::required(
            "spec.versions",
            "must have exactly one version marked as storage version",
        ));
        return;
    }
    let storage_count = versions
        .iter()
        .filter(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
        .count();
    if storage_count != 1 {
        errs.push(FieldError::invalid(
            "spec.versions",
            json!(storage_count),
            "must have exactly one version marked as storage version",
        ));
    }
    if !versions
        .iter()
        .any(|v| v.get("served").and_then(Value::as_bool) == Some(true))
    {
        errs.push(FieldError::invalid(
            "spec.versions",
            json!(versions.len()),
            "must have at least one served version",
        ));
    }
    // Kubernetes checks a schema every version shares once, as `spec.validation`, and names
    // its errors so (the internal form hoists it there).
    let shared = versions[0]
        .pointer("/schema/openAPIV3Schema")
        .filter(|s| s.is_object())
        .filter(|s| {
            versions
                .iter()
                .all(|v| v.pointer("/schema/openAPIV3Schema") == Some(*s))
        });
    if let Some(schema) = shared
        && let Err(schema_errs) = Structural::from_json(schema, "spec.validation.openAPIV3Schema")
    {
        errs.extend(schema_errs);
    }
    let mut seen: Vec<&str> = Vec::new();
    for (i, v) in versions.iter().enumerate() {
        let base = format!("spec.versions[{i}]");
        let name = v.get("name").and_then(Value::as_str).unwrap_or_default();
        if name.is_empty() {
            errs.push(FieldError::required(format!("{base}.name"), ""));
        } else if !is_label(name) {
            label_errors(&format!("{base}.name"), name, errs);
        } else if seen.contains(&name) {
            errs.push(FieldError::duplicate(format!("{base}.name"), json!(name)));
        }
        seen.push(name);
        match v.pointer("/schema/openAPIV3Schema") {
            Some(_) if shared.is_some() => {}
            Some(schema) if schema.is_object() => {
                let path = format!("{base}.schema.openAPIV3Schema");
                if let Err(schema_errs) = Structural::from_json(schema, &path) {
                    errs.extend(schema_errs);
                }
            }
            _ => errs.push(FieldError::required(
                format!("{base}.schema.openAPIV3Schema"),
                "schemas are required",
            )),
        }
        validate_columns(v, &base, errs);
        validate_scale(v, &base, errs);
    }
}

fn validate_columns(version: &Value, base: &str, errs: &mut Vec<FieldError>) {
    for (j, c) in version
        .get("additionalPrinterColumns")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let at = format!("{base}.additionalPrinterColumns[{j}]");
        if str_at(c, "/name").is_empty() {
            errs.push(FieldError::required(format!("{at}.name"), ""));
        }
        let ty = str_at(c, "/type");
        if !COLUMN_TYPES.contains(&ty) {
            errs.push(FieldError::not_supported(
                format!("{at}.type"),
                json!(ty),
                &COLUMN_TYPES,
            ));
        }
        let format = str_at(c, "/format");
        if !format.is_empty() && !COLUMN_FORMATS.contains(&format) {
            errs.push(FieldError::not_supported(
                format!("{at}.format"),
                json!(format),
                &COLUMN_FORMATS,
            ));
        }
        if c.get("priority")
            .and_then(Value::as_i64)
            .is_some_and(|p| p < 0)
        {
            errs.push(FieldError::invalid(
                format!("{at}.priority"),
                c["priority"].clone(),
                "must be greater than or equal to 0",
            ));
        }
        let path = str_at(c, "/jsonPath");
        if path.is_empty() {
            errs.push(FieldError::required(format!("{at}.jsonPath"), ""));
        } else if let Err(why) = jsonpath::JsonPath::parse(path) {
            errs.push(FieldError::invalid(
                format!("{at}.jsonPath"),
                json!(path),
                format!("invalid JSONPath: {why}"),
            ));
        }
    }
}

fn validate_scale(version: &Value, base: &str, errs: &mut Vec<FieldError>) {
    let Some(scale) = version
        .pointer("/subresources/scale")
        .filter(|s| s.is_object())
    else {
        return;
    };
    let at = format!("{base}.subresources.scale");
    let under = |path: &str, roots: &[&str]| {
        roots.iter().any(|r| {
            path.strip_prefix(r)
                .and_then(|rest| rest.strip_prefix('.'))
                .is_some_and(|rest| {
                    !rest.is_empty() && jsonpath::JsonPath::parse(&format!(".{rest}")).is_ok()
                })
        })
    };
    let spec = str_at(scale, "/specReplicasPath");
    if spec.is_empty() {
        errs.push(FieldError::required(format!("{at}.specReplicasPath"), ""));
    } else if !under(spec, &[".spec"]) {
        errs.push(FieldError::invalid(
            format!("{at}.specReplicasPath"),
            json!(spec),
            "should be a json path under .spec",
        ));
    }
    let status = str_at(scale, "/statusReplicasPath");
    if status.is_empty() {
        errs.push(FieldError::required(format!("{at}.statusReplicasPath"), ""));
    } else if !under(status, &[".status"]) {
        errs.push(FieldError::invalid(
            format!("{at}.statusReplicasPath"),
            json!(status),
            "should be a json path under .status",
        ));
    }
    let selector = str_at(scale, "/labelSelectorPath");
    if !selector.is_empty() && !under(selector, &[".spec", ".status"]) {
        errs.push(FieldError::invalid(
            format!("{at}.labelSelectorPath"),
            json!(selector),
            "should be a json path under either .spec or .status",
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crd() -> Value {
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                "names": {"plural": "widgets", "kind": "Widget"},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object"}}}]}})
    }

    fn fields(errs: &[FieldError]) -> Vec<String> {
        errs.iter().map(|e| e.field.clone()).collect()
    }

    #[test]
    fn a_valid_crd_passes_and_gets_its_defaults() {
        let mut c = crd();
        CrdStrategy.prepare_for_create(&mut c);
        assert!(validate_crd(&c).is_empty(), "{:?}", validate_crd(&c));
        assert_eq!(c["spec"]["names"]["singular"], "widget");
        assert_eq!(c["spec"]["names"]["listKind"], "WidgetList");
        assert_eq!(c["spec"]["conversion"]["strategy"], "None");
        assert_eq!(c["status"]["storedVersions"], json!(["v1"]));
        assert_eq!(
            c["status"]["acceptedNames"],
            json!({"plural": "", "kind": ""})
        );
        assert!(
            c["metadata"].get("finalizers").is_none(),
            "the cleanup finalizer is added at deletion, not at creation"
        );
    }

    #[test]
    fn names_group_and_scope_are_checked() {
        let mut c = crd();
        c["metadata"]["name"] = json!("gadgets.example.com");
        c["spec"]["group"] = json!("example");
        c["spec"]["scope"] = json!("Galaxy");
        c["spec"]["names"]["plural"] = json!("Widgets");
        let errs = validate_crd(&c);
        assert_eq!(
            fields(&errs),
            [
                "metadata.name",
                "spec.group",
                "spec.scope",
                "spec.names.plural"
            ]
        );
        assert!(
            errs[1]
                .message()
                .contains("should be a domain with at least one dot")
        );
    }

    #[test]
    fn a_schema_every_version_shares_is_checked_once_as_spec_validation() {
        let bad = json!({"type": "object", "properties": {"spec": {"type": "object",
            "x-kubernetes-validations": [{"rule": "self.x == 1"}]}}});
        let mut c = crd();
        c["spec"]["versions"] = json!([
            {"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": bad}},
            {"name": "v2", "served": true, "storage": false, "schema": {"openAPIV3Schema": bad}}
        ]);
        assert_eq!(
            fields(&validate_crd(&c)),
            ["spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule"]
        );
        // Schemas that differ are checked per version.
        c["spec"]["versions"][0]["schema"]["openAPIV3Schema"] = json!({"type": "object"});
        assert_eq!(
            fields(&validate_crd(&c)),
            [
                "spec.versions[1].schema.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule"
            ]
        );
    }

    #[test]
    fn exactly_one_storage_version_and_a_schema_each_are_required() {
        let mut c = crd();
        c["spec"]["versions"] = json!([
            {"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {"type": "object"}}},
            {"name": "v2", "served": true, "storage": true}
        ]);
        let errs = validate_crd(&c);
        assert_eq!(
            fields(&errs),
            ["spec.versions", "spec.versions[1].schema.openAPIV3Schema"]
        );
        assert!(
            errs[0]
                .message()
                .contains("must have exactly one version marked as storage version")
        );
        assert!(errs[1].message().contains("schemas are required"));
    }

    #[test]
    fn printer_columns_and_scale_paths_are_checked() {
        let mut c = crd();
        c["spec"]["versions"][0]["additionalPrinterColumns"] = json!([
            {"name": "A", "type": "color", "jsonPath": ".spec.a"},
            {"name": "B", "type": "string", "format": "weird", "jsonPath": "spec["}
        ]);
        c["spec"]["versions"][0]["subresources"] = json!({"scale": {
            "specReplicasPath": ".status.replicas", "statusReplicasPath": ".status.replicas",
            "labelSelectorPath": ".metadata.labels"}});
        let errs = validate_crd(&c);
        assert_eq!(
            fields(&errs),
            [
                "spec.versions[0].additionalPrinterColumns[0].type",
                "spec.versions[0].additionalPrinterColumns[1].format",
                "spec.versions[0].additionalPrinterColumns[1].jsonPath",
                "spec.versions[0].subresources.scale.specReplicasPath",
                "spec.versions[0].subresources.scale.labelSelectorPath",
            ]
        );
    }

    #[test]
    fn group_and_plural_are_immutable_and_stored_versions_must_stay() {
        let mut old = crd();
        CrdStrategy.prepare_for_create(&mut old);
        old["status"]["storedVersions"] = json!(["v1"]);
        let mut new = old.clone();
        new["spec"]["group"] = json!("other.com");
        new["spec"]["versions"][0]["name"] = json!("v2");
        CrdStrategy.prepare_for_update(&mut new, &old);
        let errs = CrdStrategy.validate_update(&new, &old);
        assert!(
            fields(&errs).contains(&"spec.group".to_string()),
            "{errs:?}"
        );
        assert!(
            fields(&errs).contains(&"status.storedVersions[0]".to_string()),
            "{errs:?}"
        );
        assert_eq!(new["status"]["storedVersions"], json!(["v1", "v2"]));
    }
}
