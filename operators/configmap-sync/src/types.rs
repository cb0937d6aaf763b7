//! The `ConfigMapSync` custom resource (`sync.kore.dev/v1alpha1`), whose CRD is generated from
//! these types.
//!
//! The schema rejects what can never work: empty names, names that are not DNS-1123
//! (namespaces are labels, ConfigMap names subdomains), a spec without any destination, and
//! the source namespace named as its own destination (CEL rules on `spec`, in
//! `x-kubernetes-validations`). What a schema cannot express (a label selector with an
//! unknown operator, say) the operator reports as `Ready=False`, reason `InvalidSpec`.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A DNS-1123 label: what a namespace name must be.
pub const DNS_1123_LABEL: &str = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$";

/// A DNS-1123 subdomain: what a ConfigMap name must be.
pub const DNS_1123_SUBDOMAIN: &str =
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$";

/// Copies the ConfigMap `configMapName` of `sourceNamespace` into destination namespaces and
/// keeps the copies in step.
///
/// The classic tutorial's fields (`sourceNamespace`, `destinationNamespace`,
/// `configMapName`) are accepted as they are; `destinationNamespaces`, `namespaceSelector`,
/// `destinationName` and `conflictPolicy` extend them. The destinations are the union of
/// `destinationNamespace`, `destinationNamespaces` and every namespace `namespaceSelector`
/// matches, never the source namespace.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "sync.kore.dev",
    version = "v1alpha1",
    kind = "ConfigMapSync",
    namespaced,
    status = "ConfigMapSyncStatus",
    shortname = "cms",
    category = "kore",
    printcolumn = r#"{"name":"Source","type":"string","jsonPath":".spec.sourceNamespace"}"#,
    printcolumn = r#"{"name":"ConfigMap","type":"string","jsonPath":".spec.configMapName"}"#,
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Reason","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].reason","priority":1}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {
        "rule": "!has(self.destinationNamespace) || self.destinationNamespace != self.sourceNamespace",
        "message": "destinationNamespace must differ from sourceNamespace",
        "fieldPath": ".destinationNamespace",
        "reason": "FieldValueInvalid"
    },
    {
        "rule": "!has(self.destinationNamespaces) || !(self.sourceNamespace in self.destinationNamespaces)",
        "message": "destinationNamespaces must not contain sourceNamespace",
        "fieldPath": ".destinationNamespaces",
        "reason": "FieldValueInvalid"
    },
    {
        "rule": "has(self.destinationNamespace) || (has(self.destinationNamespaces) && size(self.destinationNamespaces) > 0) || has(self.namespaceSelector)",
        "message": "one of destinationNamespace, destinationNamespaces or namespaceSelector is required",
        "reason": "FieldValueRequired"
    }
]))]
pub struct ConfigMapSyncSpec {
    /// The namespace holding the source ConfigMap.
    #[schemars(length(min = 1, max = 63), pattern(DNS_1123_LABEL))]
    pub source_namespace: String,
    /// The source ConfigMap's name (and the copies' name unless `destinationName` is set).
    #[schemars(length(min = 1, max = 253), pattern(DNS_1123_SUBDOMAIN))]
    pub config_map_name: String,
    /// One destination namespace (the tutorial's field).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 63), pattern(DNS_1123_LABEL))]
    pub destination_namespace: Option<String>,
    /// More destination namespaces.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(
        length(max = 1000),
        inner(length(min = 1, max = 63), pattern(DNS_1123_LABEL)),
        extend("x-kubernetes-list-type" = "set")
    )]
    pub destination_namespaces: Vec<String>,
    /// Every namespace whose labels match also gets a copy (never the source namespace). An
    /// empty selector matches every namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace_selector: Option<LabelSelector>,
    /// The copies' name, if not the source's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253), pattern(DNS_1123_SUBDOMAIN))]
    pub destination_name: Option<String>,
    /// What to do when a destination already holds a ConfigMap this ConfigMapSync did not
    /// create (default `Refuse`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conflict_policy: Option<ConflictPolicy>,
}

impl ConfigMapSyncSpec {
    /// The tutorial's spec: copy `config_map_name` from `source_namespace` into
    /// `destination_namespace`.
    pub fn new(
        source_namespace: impl Into<String>,
        config_map_name: impl Into<String>,
        destination_namespace: impl Into<String>,
    ) -> Self {
        ConfigMapSyncSpec {
            source_namespace: source_namespace.into(),
            config_map_name: config_map_name.into(),
            destination_namespace: Some(destination_namespace.into()),
            destination_namespaces: Vec::new(),
            namespace_selector: None,
            destination_name: None,
            conflict_policy: None,
        }
    }

    /// The name the copies carry.
    pub fn target_name(&self) -> &str {
        self.destination_name
            .as_deref()
            .unwrap_or(&self.config_map_name)
    }

    /// The namespaces named explicitly (`destinationNamespace`, then
    /// `destinationNamespaces`), without duplicates, in order.
    pub fn named_destinations(&self) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        for ns in self
            .destination_namespace
            .iter()
            .chain(&self.destination_namespaces)
        {
            if !out.contains(&ns.as_str()) {
                out.push(ns);
            }
        }
        out
    }
}

/// What to do with a ConfigMap in a destination that this ConfigMapSync did not create.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum ConflictPolicy {
    /// Leave it alone and report `Ready=False`, reason `Conflict` (the default).
    #[default]
    Refuse,
    /// Take it over: overwrite it and manage it from then on (never one that another
    /// ConfigMapSync manages).
    Adopt,
}

/// What the operator last saw and did.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConfigMapSyncStatus {
    /// `Ready`, with observedGeneration.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The namespaces holding an up-to-date copy, sorted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub synced_namespaces: Vec<String>,
    /// When the operator last wrote a copy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_sync_time: Option<Time>,
    /// The source's resourceVersion that the copies hold.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_resource_version: Option<String>,
}

#[cfg(test)]
mod tests {
    use kube::CustomResourceExt as _;

    use super::*;

    #[test]
    fn the_crd_schema_bounds_every_name_and_carries_the_cel_rules() -> Result<(), serde_json::Error>
    {
        let crd = serde_json::to_value(ConfigMapSync::crd())?;
        let spec = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"];
        for (field, max) in [
            ("sourceNamespace", 63),
            ("destinationNamespace", 63),
            ("configMapName", 253),
            ("destinationName", 253),
        ] {
            let f = &spec["properties"][field];
            assert_eq!(f["minLength"], 1, "{field}");
            assert_eq!(f["maxLength"], max, "{field}");
            assert!(f["pattern"].is_string(), "{field}");
        }
        let items = &spec["properties"]["destinationNamespaces"]["items"];
        assert_eq!(items["pattern"], DNS_1123_LABEL);
        let rules: Vec<&str> = spec["x-kubernetes-validations"]
            .as_array()
            .map(|a| a.iter().filter_map(|r| r["rule"].as_str()).collect())
            .unwrap_or_default();
        assert_eq!(rules.len(), 3, "{rules:?}");
        assert!(
            rules
                .iter()
                .any(|r| r.contains("self.destinationNamespace != self.sourceNamespace"))
        );
        assert!(
            rules
                .iter()
                .any(|r| r.contains("!(self.sourceNamespace in self.destinationNamespaces)"))
        );
        Ok(())
    }

    #[test]
    fn named_destinations_are_deduplicated_in_order() {
        let mut spec = ConfigMapSyncSpec::new("src", "app", "b");
        spec.destination_namespaces = vec!["a".into(), "b".into(), "a".into()];
        assert_eq!(spec.named_destinations(), ["b", "a"]);
        assert_eq!(spec.target_name(), "app");
        spec.destination_name = Some("copy".into());
        assert_eq!(spec.target_name(), "copy");
    }
}
