//! Serving custom resources: the [`Resource`]s one CRD stands for (one per served version) and
//! their [`CustomStrategy`].
//!
//! Every write runs, in order: prune (unknown fields dropped and reported, so the registry can
//! warn or reject per `fieldValidation`), defaults, schema validation, then the registry's
//! metadata rules. Reads apply defaults again, so a default added to the schema later shows on
//! old objects. Objects are stored once, under the storage version's `apiVersion`; with
//! conversion `None` serving another version only rewrites `apiVersion`.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::jsonpath::JsonPath;
use crate::api::field::FieldError;
use crate::registry::printers::TablePrinter;
use crate::registry::resource::{ALL_VERBS, Resource, ScalePaths, Subresources};
use crate::registry::strategy::{Decoded, Strategy};
use crate::schema::{self, Structural};

/// One `additionalPrinterColumns` entry, parsed.
#[derive(Clone, Debug)]
pub struct PrinterColumn {
    name: String,
    kind: String,
    format: String,
    description: String,
    priority: i64,
    path: JsonPath,
}

/// The behaviour of one served version of a custom resource.
pub struct CustomStrategy {
    kind: String,
    /// `group/version` of the served version.
    api_version: String,
    /// `group/version` objects are stored under.
    storage_api_version: String,
    schema: Arc<Structural>,
    status_subresource: bool,
    deprecation: Option<String>,
}

impl std::fmt::Debug for CustomStrategy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CustomStrategy")
            .field("api_version", &self.api_version)
            .field("kind", &self.kind)
            .finish_non_exhaustive()
    }
}

impl CustomStrategy {
    fn set_api_version(obj: &mut Value, api_version: &str) {
        if let Some(m) = obj.as_object_mut() {
            m.insert("apiVersion".into(), json!(api_version));
        }
    }

    fn defaulted(&self, obj: &mut Value) {
        schema::apply_defaults(&self.schema, obj);
    }

    /// Schema validation, then the CEL rules unless a schema error blocks them.
    fn validated(&self, obj: &Value, old: Option<&Value>) -> Vec<FieldError> {
        let mut errs = schema::validate(&self.schema, obj);
        if !self.schema.has_rules() {
            return errs;
        }
        match schema::blocks_rules(&errs) {
            Some(blocked) => errs.push(blocked),
            None => errs.extend(schema::validate_rules(&self.schema, obj, old)),
        }
        errs
    }
}

impl Strategy for CustomStrategy {
    fn decode(&self, mut obj: Value) -> Result<Decoded, String> {
        let unknown_fields = schema::prune(&self.schema, &mut obj);
        Ok(Decoded {
            object: obj,
            unknown_fields,
        })
    }

    fn to_stored(&self, mut obj: Value) -> Value {
        Self::set_api_version(&mut obj, &self.storage_api_version);
        obj
    }

    fn to_served(&self, mut obj: Value) -> Value {
        Self::set_api_version(&mut obj, &self.api_version);
        self.defaulted(&mut obj);
        obj
    }

    fn converts(&self) -> bool {
        true
    }

    fn tracks_generation(&self) -> bool {
        true
    }

    /// Everything but `metadata` counts, and `status` too unless it has its own endpoint.
    fn generation_changed(&self, new: &Value, old: &Value) -> bool {
        let counted = |v: &Value| -> Map<String, Value> {
            v.as_object()
                .map(|m| {
                    m.iter()
                        .filter(|(k, _)| {
                            let ignored = matches!(k.as_str(), "metadata" | "apiVersion" | "kind")
                                || (self.status_subresource && k.as_str() == "status");
                            !ignored
                        })
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect()
                })
                .unwrap_or_default()
        };
        counted(new) != counted(old)
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        if self.status_subresource
            && let Some(m) = obj.as_object_mut()
        {
            m.remove("status");
        }
        self.defaulted(obj);
    }

    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        let _ = old;
        self.defaulted(new);
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        self.validated(obj, None)
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        self.validated(new, Some(old))
    }

    fn structural_schema(&self) -> Option<Arc<Structural>> {
        Some(self.schema.clone())
    }

    fn deprecation_warning(&self) -> Option<String> {
        self.deprecation.clone()
    }
}

/// The Table printer of a custom resource version: `Name`, then its
/// `additionalPrinterColumns` (or `Age` when it declares none).
struct CustomPrinter {
    columns: Vec<PrinterColumn>,
}

impl TablePrinter for CustomPrinter {
    fn columns(&self) -> Value {
        let mut cols = vec![json!({
            "name": "Name", "type": "string", "format": "name", "priority": 0,
            "description": "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names"
        })];
        for c in &self.columns {
            cols.push(json!({
                "name": c.name, "type": c.kind, "format": c.format,
                "description": c.description, "priority": c.priority,
            }));
        }
        Value::Array(cols)
    }

    fn cells(&self, obj: &Value, now: i64) -> Vec<Value> {
        let mut cells = vec![obj["metadata"]["name"].clone()];
        for c in &self.columns {
            cells.push(cell(c, obj, now));
        }
        cells
    }
}

/// One cell of a printer column: nothing found is `null`; one scalar keeps its JSON type
/// (dates become ages); several values or objects are printed as text.
fn cell(c: &PrinterColumn, obj: &Value, now: i64) -> Value {
    let found = c.path.eval(obj);
    let text = |v: &Value| match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    match found.as_slice() {
        [] => Value::Null,
        [one] => match (c.kind.as_str(), one) {
            (_, Value::Null) => Value::Null,
            ("date", Value::String(s)) => json!(crate::registry::printers::age(Some(s), now)),
            ("integer", Value::Number(n)) if n.is_i64() || n.is_u64() => (*one).clone(),
            ("number", Value::Number(_)) | ("boolean", Value::Bool(_)) => (*one).clone(),
            _ => json!(text(one)),
        },
        many => json!(many.iter().map(|v| text(v)).collect::<Vec<_>>().join(" ")),
    }
}

/// The default columns of a version without `additionalPrinterColumns`.
fn default_columns() -> Vec<PrinterColumn> {
    vec![PrinterColumn {
        name: "Age".into(),
        kind: "date".into(),
        format: String::new(),
        description: "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata".into(),
        priority: 0,
        path: JsonPath::parse(".metadata.creationTimestamp").expect("a valid constant path"),
    }]
}

fn printer_columns(version: &Value) -> Vec<PrinterColumn> {
    let Some(list) = version
        .get("additionalPrinterColumns")
        .and_then(Value::as_array)
    else {
        return default_columns();
    };
    list.iter()
        .filter_map(|c| {
            Some(PrinterColumn {
                name: c.get("name")?.as_str()?.to_string(),
                kind: c.get("type")?.as_str()?.to_string(),
                format: c
                    .get("format")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string(),
                description: c
                    .get("description")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string(),
                priority: c.get("priority").and_then(Value::as_i64).unwrap_or(0),
                path: JsonPath::parse(c.get("jsonPath")?.as_str()?).ok()?,
            })
        })
        .collect()
}

/// `.spec.replicas` → `/spec/replicas`.
pub(crate) fn pointer_of(path: &str) -> String {
    path.split('.')
        .filter(|s| !s.is_empty())
        .fold(String::new(), |mut acc, s| {
            acc.push('/');
            acc.push_str(s);
            acc
        })
}

fn str_at<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_default()
}

fn strings_at(v: &Value, pointer: &str) -> Vec<String> {
    v.pointer(pointer)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|s| s.as_str().map(str::to_string))
        .collect()
}

/// The storage prefix of a CRD's objects.
pub fn storage_prefix(group: &str, plural: &str) -> String {
    format!("/{group}/{plural}")
}

/// Which of a CRD's resources [`resources_of`] builds, and how.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Build {
    /// Every version, not only the `served` ones (to reach stored objects).
    pub all_versions: bool,
    /// The CRD is being deleted: no `create`.
    pub terminating: bool,
}

/// The resources a (valid) CRD stands for, one per version as `build` says. Versions whose
/// schema does not parse are skipped (validation rejects such CRDs before they are stored).
pub fn resources_of(crd: &Value, build: Build) -> Vec<Resource> {
    let Build {
        all_versions,
        terminating,
    } = build;
    let group = str_at(crd, "/spec/group").to_string();
    let plural = str_at(crd, "/spec/names/plural").to_string();
    let kind = str_at(crd, "/spec/names/kind").to_string();
    let singular = match str_at(crd, "/spec/names/singular") {
        "" => kind.to_ascii_lowercase(),
        s => s.to_string(),
    };
    let list_kind = match str_at(crd, "/spec/names/listKind") {
        "" => format!("{kind}List"),
        s => s.to_string(),
    };
    let namespaced = str_at(crd, "/spec/scope") != "Cluster";
    let versions = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let Some(storage) = versions
        .iter()
        .find(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
        .and_then(|v| v.get("name").and_then(Value::as_str))
    else {
        return Vec::new();
    };
    let storage_api_version = format!("{group}/{storage}");
    let mut verbs = ALL_VERBS.to_vec();
    if terminating {
        verbs.retain(|v| *v != "create");
    }
    let mut out = Vec::new();
    for (i, v) in versions.iter().enumerate() {
        let name = v.get("name").and_then(Value::as_str).unwrap_or_default();
        if !all_versions && v.get("served").and_then(Value::as_bool) != Some(true) {
            continue;
        }
        let schema_json = v
            .pointer("/schema/openAPIV3Schema")
            .cloned()
            .unwrap_or_else(
                || json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}),
            );
        let base = format!("spec.versions[{i}].schema.openAPIV3Schema");
        let schema = match Structural::from_json(&schema_json, &base) {
            Ok(s) => Arc::new(s),
            Err(errs) => {
                tracing::warn!(crd = %plural, version = %name, errors = errs.len(), "skipping a version whose schema is not structural");
                continue;
            }
        };
        let status = v
            .pointer("/subresources/status")
            .is_some_and(Value::is_object);
        let scale = v
            .pointer("/subresources/scale")
            .filter(|s| s.is_object())
            .map(|s| ScalePaths {
                spec_replicas: pointer_of(str_at(s, "/specReplicasPath")),
                status_replicas: pointer_of(str_at(s, "/statusReplicasPath")),
                label_selector: s
                    .get("labelSelectorPath")
                    .and_then(Value::as_str)
                    .map(pointer_of),
            });
        let deprecation = (v.get("deprecated").and_then(Value::as_bool) == Some(true)).then(|| {
            match v.get("deprecationWarning").and_then(Value::as_str) {
                Some(text) => text.to_string(),
                None => format!("{group}/{name} {kind} is deprecated"),
            }
        });
        let strategy = CustomStrategy {
            kind: kind.clone(),
            api_version: format!("{group}/{name}"),
            storage_api_version: storage_api_version.clone(),
            schema,
            status_subresource: status,
            deprecation,
        };
        out.push(Resource {
            group: group.clone(),
            version: name.to_string(),
            kind: kind.clone(),
            list_kind: list_kind.clone(),
            plural: plural.clone(),
            singular: singular.clone(),
            namespaced,
            short_names: strings_at(crd, "/spec/names/shortNames"),
            categories: strings_at(crd, "/spec/names/categories"),
            verbs: verbs.clone(),
            subresources: Subresources {
                status,
                scale,
                other: Vec::new(),
            },
            storage_prefix: storage_prefix(&group, &plural),
            strategy: Arc::new(strategy),
            printer: Arc::new(CustomPrinter {
                columns: printer_columns(v),
            }),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crd() -> Value {
        json!({"spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "kind": "Widget", "shortNames": ["wd"]},
            "versions": [
                {"name": "v1", "served": true, "storage": true,
                 "schema": {"openAPIV3Schema": {"type": "object"}},
                 "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"}},
                 "additionalPrinterColumns": [
                    {"name": "Size", "type": "integer", "jsonPath": ".spec.size"},
                    {"name": "Ready", "type": "string", "jsonPath": ".status.conditions[?(@.type==\"Ready\")].status"},
                    {"name": "Made", "type": "date", "jsonPath": ".metadata.creationTimestamp", "priority": 1}]},
                {"name": "v1beta1", "served": true, "storage": false, "deprecated": true,
                 "schema": {"openAPIV3Schema": {"type": "object"}}},
                {"name": "v1alpha1", "served": false, "storage": false,
                 "schema": {"openAPIV3Schema": {"type": "object"}}}]}})
    }

    #[test]
    fn a_crd_serves_one_resource_per_served_version() {
        let rs = resources_of(&crd(), Build::default());
        let versions: Vec<&str> = rs.iter().map(|r| r.version.as_str()).collect();
        assert_eq!(versions, ["v1", "v1beta1"]);
        assert_eq!(rs[0].singular, "widget");
        assert_eq!(rs[0].list_kind, "WidgetList");
        assert_eq!(rs[0].storage_prefix, rs[1].storage_prefix);
        assert!(rs[0].subresources.status && !rs[1].subresources.status);
        assert_eq!(
            rs[0]
                .subresources
                .scale
                .as_ref()
                .map(|s| s.spec_replicas.as_str()),
            Some("/spec/replicas")
        );
        assert_eq!(
            rs[1].strategy.deprecation_warning().as_deref(),
            Some("example.com/v1beta1 Widget is deprecated")
        );
    }

    #[test]
    fn objects_are_stored_under_the_storage_version_and_served_under_their_own() {
        let rs = resources_of(&crd(), Build::default());
        let obj = json!({"apiVersion": "example.com/v1beta1", "kind": "Widget", "spec": {"a": 1}});
        let stored = rs[1].strategy.to_stored(obj);
        assert_eq!(stored["apiVersion"], "example.com/v1");
        assert_eq!(stored["spec"]["a"], 1);
        assert_eq!(
            rs[1].strategy.to_served(stored)["apiVersion"],
            "example.com/v1beta1"
        );
    }

    #[test]
    fn printer_columns_render_typed_cells_and_ages() {
        let rs = resources_of(&crd(), Build::default());
        let obj = json!({"metadata": {"name": "w", "creationTimestamp": "2024-05-01T12:00:00Z"},
            "spec": {"size": 3},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]}});
        let now = jiff::Timestamp::from_second(1_714_564_800 + 300)
            .expect("a valid time")
            .as_second();
        let cells = rs[0].printer.cells(&obj, now);
        assert_eq!(cells, [json!("w"), json!(3), json!("True"), json!("5m")]);
        let cols = rs[0].printer.columns();
        assert_eq!(cols[3]["priority"], 1);
        // No columns declared: Name and Age.
        let cols = rs[1].printer.columns();
        let names: Vec<&str> = cols
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| c["name"].as_str())
            .collect();
        assert_eq!(names, ["Name", "Age"]);
    }

    #[test]
    fn generation_ignores_metadata_and_a_status_with_its_own_endpoint() {
        let rs = resources_of(&crd(), Build::default());
        let old = json!({"metadata": {"labels": {}}, "spec": {"a": 1}, "status": {"x": 1}});
        let relabelled =
            json!({"metadata": {"labels": {"b": "c"}}, "spec": {"a": 1}, "status": {"x": 2}});
        assert!(!rs[0].strategy.generation_changed(&relabelled, &old));
        assert!(rs[1].strategy.generation_changed(&relabelled, &old));
        let respec = json!({"metadata": {}, "spec": {"a": 2}});
        assert!(rs[0].strategy.generation_changed(&respec, &old));
    }

    #[test]
    fn a_terminating_crd_serves_no_create() {
        let rs = resources_of(
            &crd(),
            Build {
                terminating: true,
                ..Build::default()
            },
        );
        assert!(!rs[0].allows("create") && rs[0].allows("delete"));
    }
}
