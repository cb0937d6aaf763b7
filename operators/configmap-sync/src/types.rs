//! The `ConfigMapSync` custom resource (`sync.kore.dev/v1alpha1`), whose CRD is generated from
//! these types.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Copies the ConfigMap `configMapName` of `sourceNamespace` into destination namespaces and
/// keeps the copies in step.
///
/// The classic tutorial's fields (`sourceNamespace`, `destinationNamespace`,
/// `configMapName`) are accepted as they are; `destinationNamespaces`, `namespaceSelector`,
/// `destinationName` and `conflictPolicy` extend them.
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
pub struct ConfigMapSyncSpec {
    /// The namespace holding the source ConfigMap.
    pub source_namespace: String,
    /// The source ConfigMap's name (and the copies' name unless `destinationName` is set).
    pub config_map_name: String,
    /// One destination namespace (the tutorial's field).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destination_namespace: Option<String>,
    /// More destination namespaces.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub destination_namespaces: Vec<String>,
    /// Every namespace whose labels match also gets a copy (never the source namespace).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace_selector: Option<LabelSelector>,
    /// The copies' name, if not the source's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destination_name: Option<String>,
    /// What to do when a destination already holds a ConfigMap this ConfigMapSync did not
    /// create.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conflict_policy: Option<ConflictPolicy>,
}

/// What to do with a ConfigMap in a destination that this ConfigMapSync did not create.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum ConflictPolicy {
    /// Leave it alone and report `Ready=False`, reason `Conflict` (the default).
    #[default]
    Refuse,
    /// Take it over: overwrite it and manage it from then on.
    Adopt,
}

/// What the operator last saw and did.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConfigMapSyncStatus {
    /// `Ready`, with observedGeneration.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The namespaces holding an up-to-date copy.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub synced_namespaces: Vec<String>,
    /// When the copies last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_sync_time: Option<Time>,
    /// The source's resourceVersion that the copies hold.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_resource_version: Option<String>,
}
