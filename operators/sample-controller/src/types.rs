//! The `Foo` custom resource (`samplecontroller.k8s.io/v1alpha1`), the same CRD the Go
//! sample-controller serves, generated from these types.
//!
//! # Compatibility with the Go sample-controller's CRD
//!
//! [`crd`] is what `kore manifests` and the tests install. It has the Go CRD's name
//! (`foos.samplecontroller.k8s.io`), group, the single served and stored version `v1alpha1`,
//! kind `Foo`, plural `foos`, namespaced scope and the status subresource, and the same
//! schema: `spec.deploymentName` a string, `spec.replicas` an integer from 1 to 10,
//! `status.availableReplicas` an integer, none of them required. It adds printer columns,
//! and carries the `api-approved.kubernetes.io` annotation that Kubernetes demands of CRDs
//! in `*.k8s.io` groups, as the Go CRD does. Every object valid under one CRD is valid under
//! the other, except that `replicas: null` (what a Go client sends for a nil pointer) is
//! declared nullable here. See `docs/design/sample-controller.md`.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, JSONSchemaProps,
};
use kube::{CustomResource, CustomResourceExt as _};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The annotation Kubernetes requires on CRDs of `*.k8s.io` and `*.kubernetes.io` groups.
pub const API_APPROVAL_ANNOTATION: &str = "api-approved.kubernetes.io";

/// Its value for this CRD: an example outside the Kubernetes API review, which Kubernetes
/// accepts because it starts with `unapproved`.
pub const API_APPROVAL_VALUE: &str =
    "unapproved, the sample-controller example; not reviewed as a Kubernetes API";

/// A Foo asks for a Deployment named `deploymentName` with `replicas` replicas.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "samplecontroller.k8s.io",
    version = "v1alpha1",
    kind = "Foo",
    plural = "foos",
    namespaced,
    status = "FooStatus",
    printcolumn = r#"{"name":"Deployment","type":"string","jsonPath":".spec.deploymentName"}"#,
    printcolumn = r#"{"name":"Replicas","type":"integer","jsonPath":".spec.replicas"}"#,
    printcolumn = r#"{"name":"Available","type":"integer","jsonPath":".status.availableReplicas"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct FooSpec {
    /// The Deployment's name. Empty (or absent, which the Go CRD allows) means the Foo
    /// cannot be served: the controller records a Warning event and leaves it alone.
    #[serde(default)]
    pub deployment_name: String,
    /// Its replicas; absent means the Deployment's own default (1), and the controller
    /// then leaves the Deployment's replicas as they are, as the Go controller does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 10))]
    pub replicas: Option<i32>,
}

/// What the controller last saw of the Deployment.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FooStatus {
    /// The Deployment's available replicas.
    #[serde(default)]
    pub available_replicas: i32,
}

/// The Foo CRD as deployed: [`Foo::crd`] with the API approval annotation, without requiring
/// `spec` and without the defaults serde's `default` attributes put into the schema, so it
/// accepts and stores objects as the Go sample-controller's CRD does.
pub fn crd() -> CustomResourceDefinition {
    let mut crd = Foo::crd();
    crd.metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(
            API_APPROVAL_ANNOTATION.to_owned(),
            API_APPROVAL_VALUE.to_owned(),
        );
    for version in &mut crd.spec.versions {
        if let Some(schema) = version
            .schema
            .as_mut()
            .and_then(|s| s.open_api_v3_schema.as_mut())
        {
            schema.required = None;
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
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn crd_json() -> Value {
        serde_json::to_value(crd()).expect("a CRD serializes")
    }

    #[test]
    fn the_crd_has_the_go_crds_identity_scope_and_status_subresource() {
        let crd = crd_json();
        assert_eq!(crd["metadata"]["name"], "foos.samplecontroller.k8s.io");
        assert_eq!(crd["spec"]["group"], "samplecontroller.k8s.io");
        assert_eq!(crd["spec"]["names"]["kind"], "Foo");
        assert_eq!(crd["spec"]["names"]["plural"], "foos");
        assert_eq!(crd["spec"]["scope"], "Namespaced");
        let versions = crd["spec"]["versions"].as_array().expect("versions");
        assert_eq!(versions.len(), 1);
        assert_eq!(versions[0]["name"], "v1alpha1");
        assert_eq!(versions[0]["served"], true);
        assert_eq!(versions[0]["storage"], true);
        assert_eq!(versions[0]["subresources"], json!({"status": {}}));
        assert!(
            crd["metadata"]["annotations"][API_APPROVAL_ANNOTATION]
                .as_str()
                .is_some_and(|v| v.starts_with("unapproved"))
        );
    }

    #[test]
    fn the_schema_types_and_bounds_are_the_go_crds_and_nothing_is_required_or_defaulted() {
        let crd = crd_json();
        let schema = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"];
        let spec = &schema["properties"]["spec"];
        let status = &schema["properties"]["status"];
        assert_eq!(spec["properties"]["deploymentName"]["type"], "string");
        assert_eq!(spec["properties"]["replicas"]["type"], "integer");
        assert_eq!(spec["properties"]["replicas"]["minimum"], 1.0);
        assert_eq!(spec["properties"]["replicas"]["maximum"], 10.0);
        assert_eq!(status["properties"]["availableReplicas"]["type"], "integer");
        let text = schema.to_string();
        assert!(!text.contains("\"required\""), "{text}");
        assert!(!text.contains("\"default\""), "{text}");
    }

    #[test]
    fn the_printer_columns_show_deployment_replicas_and_available() {
        let crd = crd_json();
        let columns: Vec<&str> = crd["spec"]["versions"][0]["additionalPrinterColumns"]
            .as_array()
            .expect("columns")
            .iter()
            .filter_map(|c| c["jsonPath"].as_str())
            .collect();
        assert_eq!(
            columns,
            [
                ".spec.deploymentName",
                ".spec.replicas",
                ".status.availableReplicas",
                ".metadata.creationTimestamp"
            ]
        );
    }

    #[test]
    fn a_foo_as_a_go_client_writes_it_decodes() {
        let foo: Foo = serde_json::from_value(json!({
            "apiVersion": "samplecontroller.k8s.io/v1alpha1",
            "kind": "Foo",
            "metadata": {"name": "example-foo", "namespace": "default"},
            "spec": {"deploymentName": "example-foo", "replicas": null},
            "status": {"availableReplicas": 0}
        }))
        .expect("decodes");
        assert_eq!(foo.spec.deployment_name, "example-foo");
        assert_eq!(foo.spec.replicas, None);
        assert_eq!(foo.status, Some(FooStatus::default()));
    }
}
