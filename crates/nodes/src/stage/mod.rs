//! Stages: kwok's Stage API (`kwok.x-k8s.io/v1alpha1`, cluster-scoped) as data that drives the
//! simulated pods and nodes.
//!
//! A [`Stage`] says, for objects of one kind ([`StageSpec::resource_ref`]) that its
//! [`StageSelector`] matches, what happens next ([`StageNext`]: a status written from a Go
//! template, an event, finalizers added or removed, a delete, metadata patches) and after
//! which [`StageDelay`]. Among the Stages that match an object, one is chosen by weight.
//!
//! - [`select`]: the selectors, with kwok's JQ-like keys (`.status.phase`,
//!   `.status.conditions.[] | select( .type == "Ready" ) | .status`);
//! - [`template`]: the status templates, rendered with `gtmpl` and kwok's functions;
//! - [`engine`]: the compiled set of Stages, the choice, the delay and what to write;
//! - [`defaults`]: kore's own Stages, installed so that `kubectl get stages` shows them and
//!   a user can replace them. The kubelet runs those that are unchanged (same name and spec
//!   hash) natively, with no template rendering, to keep 10,000 pods cheap.
//!
//! [`install`] serves the CRD and creates the default Stages that are missing.

pub mod defaults;
pub mod engine;
pub mod select;
pub mod template;

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, JSONSchemaProps, JSONSchemaPropsOrArray, JSONSchemaPropsOrBool,
};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::{CustomResource, CustomResourceExt as _};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// kwok's API group.
pub const GROUP: &str = "kwok.x-k8s.io";

/// What a Stage applies to, how it is selected and what it does.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "kwok.x-k8s.io",
    version = "v1alpha1",
    kind = "Stage",
    plural = "stages",
    printcolumn = r#"{"name":"Kind","type":"string","jsonPath":".spec.resourceRef.kind"}"#,
    printcolumn = r#"{"name":"Weight","type":"integer","jsonPath":".spec.weight"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct StageSpec {
    /// The kind of object the Stage applies to.
    pub resource_ref: StageResourceRef,
    /// Which of those objects; a Stage without a selector matches nothing (as kwok).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<StageSelector>,
    /// Its weight when several Stages match an object (0 by default).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub weight: i64,
    /// The weight read from the object (an integer or a string holding one), else `weight`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight_from: Option<ExpressionFrom>,
    /// How long after the object matched the Stage is applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay: Option<StageDelay>,
    /// What happens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<StageNext>,
    /// Look for the next Stage at once with the written object, without waiting for its
    /// watch event.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub immediate_next_stage: Option<bool>,
}

fn is_zero(n: &i64) -> bool {
    *n == 0
}

/// The kind a Stage applies to.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StageResourceRef {
    /// The API group (`v1` or empty for the core group, as kwok writes it).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_group: String,
    /// The kind: `Pod` or `Node` (the kinds kore's kubelets simulate).
    pub kind: String,
}

/// Which objects a Stage matches: all of its parts must hold.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StageSelector {
    /// Labels the object must carry with these values.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub match_labels: Option<BTreeMap<String, String>>,
    /// Annotations the object must carry with these values.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub match_annotations: Option<BTreeMap<String, String>>,
    /// Expressions on the object's fields.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub match_expressions: Option<Vec<MatchExpression>>,
}

/// One requirement on a field of the object.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MatchExpression {
    /// A JQ-like path (`.metadata.deletionTimestamp`, `.metadata.labels["a/b"]`,
    /// `.status.containerStatuses.[].ready`, `… | select( .type == "Ready" ) | .status`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub key: String,
    /// `In`, `NotIn`, `Exists` or `DoesNotExist`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub operator: String,
    /// The values of `In` and `NotIn`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub values: Option<Vec<String>>,
    /// kwok's newer form: `{key, operator, values}` under `jq`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jq: Option<SelectorJq>,
    /// kwok's CEL expressions are not supported: a Stage using one is refused by the engine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cel: Option<ExpressionCel>,
}

/// A requirement in kwok's `jq` form.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SelectorJq {
    /// The path.
    pub key: String,
    /// The operator.
    pub operator: String,
    /// Its values.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub values: Option<Vec<String>>,
}

/// A CEL expression (kept so that kwok's files load; not evaluated).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExpressionCel {
    /// The expression.
    pub expression: String,
}

/// A JQ expression.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExpressionJq {
    /// The path.
    pub expression: String,
}

/// A value read from the object.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExpressionFrom {
    /// The JQ-like path (kwok's older form).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub expression_from: String,
    /// The same in kwok's newer form.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jq: Option<ExpressionJq>,
    /// CEL (not evaluated).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cel: Option<ExpressionCel>,
}

impl ExpressionFrom {
    /// The path to read.
    pub fn path(&self) -> Option<&str> {
        match &self.jq {
            Some(jq) => Some(jq.expression.as_str()),
            None => (!self.expression_from.is_empty()).then_some(self.expression_from.as_str()),
        }
    }
}

/// When a Stage is applied after its object matched.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StageDelay {
    /// The delay.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_milliseconds: Option<i64>,
    /// The delay read from the object: a duration (`2s`) or a time (then until that time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_from: Option<ExpressionFrom>,
    /// The upper bound of a random delay between the delay and this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jitter_duration_milliseconds: Option<i64>,
    /// The upper bound read from the object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jitter_duration_from: Option<ExpressionFrom>,
}

/// What a Stage does.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StageNext {
    /// An event recorded on the object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event: Option<StageEvent>,
    /// Finalizers to add or remove.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finalizers: Option<StageFinalizers>,
    /// Delete the object (with grace 0).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub delete: bool,
    /// Patches of the object, rendered from templates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub patches: Option<Vec<StagePatch>>,
    /// The status to write: a Go template rendering YAML.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub status_template: String,
    /// The subresource of the status write (`status` by default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_subresource: Option<String>,
    /// Impersonation of the status write (not supported: kore writes as itself).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_patch_as: Option<ImpersonationConfig>,
}

/// An event of a Stage.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StageEvent {
    /// `Normal` or `Warning`.
    #[serde(default, skip_serializing_if = "String::is_empty", rename = "type")]
    pub type_: String,
    /// The reason.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// The message (kore renders it as a template too).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
}

/// Finalizer changes.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StageFinalizers {
    /// Finalizers to add.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub add: Option<Vec<FinalizerItem>>,
    /// Finalizers to remove.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remove: Option<Vec<FinalizerItem>>,
    /// Remove them all.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub empty: bool,
}

/// A finalizer.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FinalizerItem {
    /// Its name.
    #[serde(default)]
    pub value: String,
}

/// A patch rendered from a template.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StagePatch {
    /// The subresource (`status`), or none for the object itself.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub subresource: String,
    /// The field the rendered document goes under (`metadata`, `status`), or the root.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub root: String,
    /// The Go template rendering YAML.
    #[serde(default)]
    pub template: String,
    /// `merge`, `strategic` or `json` (strategic for pods and nodes by default, as kwok).
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "type")]
    pub type_: Option<String>,
    /// Impersonation (not supported).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub impersonation: Option<ImpersonationConfig>,
}

/// Whom to impersonate.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ImpersonationConfig {
    /// The user name.
    pub username: String,
}

/// The Stage CRD as kore installs it: [`Stage::crd`] without the `default`s serde's
/// attributes put into the schema, so stored Stages hold what was written (as kwok's CRD).
pub fn crd() -> CustomResourceDefinition {
    let mut crd = Stage::crd();
    for version in &mut crd.spec.versions {
        if let Some(schema) = version
            .schema
            .as_mut()
            .and_then(|s| s.open_api_v3_schema.as_mut())
        {
            drop_defaults(schema);
        }
    }
    crd
}

/// Removes every `default` from `schema` and the schemas below it.
fn drop_defaults(schema: &mut JSONSchemaProps) {
    schema.default = None;
    for child in schema.properties.iter_mut().flat_map(|p| p.values_mut()) {
        drop_defaults(child);
    }
    if let Some(JSONSchemaPropsOrArray::Schema(items)) = schema.items.as_mut() {
        drop_defaults(items);
    }
    if let Some(JSONSchemaPropsOrBool::Schema(more)) = schema.additional_properties.as_mut() {
        drop_defaults(more);
    }
}

/// Why [`install`] failed; retry.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InstallError {
    /// Creating or reading the CRD or a Stage failed.
    #[error("installing the Stage API: {0}")]
    Api(#[from] kube::Error),
    /// The CRD did not become Established in time.
    #[error("the Stage CRD was not established within 10s")]
    NotEstablished,
}

/// Serves the Stage CRD (applied, so a newer kore updates it) and creates kore's default
/// Stages that do not exist yet (a Stage a user changed or deleted is left as it is; one
/// deleted comes back at the next install).
pub async fn install(client: &kube::Client) -> Result<(), InstallError> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut object = serde_json::to_value(crd()).expect("a CRD serializes");
    object["apiVersion"] = "apiextensions.k8s.io/v1".into();
    object["kind"] = "CustomResourceDefinition".into();
    let name = format!("stages.{GROUP}");
    crds.patch(
        &name,
        &PatchParams::apply(crate::kubelet::MANAGER).force(),
        &Patch::Apply(object),
    )
    .await?;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let current = crds.get(&name).await?;
        let established = current
            .status
            .and_then(|s| s.conditions)
            .into_iter()
            .flatten()
            .any(|c| c.type_ == "Established" && c.status == "True");
        if established {
            break;
        }
        if tokio::time::Instant::now() > deadline {
            return Err(InstallError::NotEstablished);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let stages: Api<Stage> = Api::all(client.clone());
    for stage in defaults::stages() {
        loop {
            match stages.create(&PostParams::default(), &stage).await {
                Ok(_) => break,
                Err(kube::Error::Api(s)) if s.code == 409 => break,
                // Served a moment after Established on some servers.
                Err(kube::Error::Api(s))
                    if s.code == 404 && tokio::time::Instant::now() < deadline =>
                {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                Err(e) => return Err(e.into()),
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_crd_is_kwoks_cluster_scoped_stage_without_schema_defaults() {
        let crd = serde_json::to_value(super::crd()).expect("a CRD serializes");
        assert_eq!(crd["metadata"]["name"], "stages.kwok.x-k8s.io");
        assert_eq!(crd["spec"]["scope"], "Cluster");
        assert_eq!(crd["spec"]["names"]["kind"], "Stage");
        assert_eq!(crd["spec"]["versions"][0]["name"], "v1alpha1");
        assert!(!crd.to_string().contains("\"default\""), "{crd}");
    }
}
