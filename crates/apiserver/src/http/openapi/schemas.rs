//! The component schemas of the built-in kinds, generated from k8s-openapi's types.
//!
//! k8s-openapi (feature `schemars`) knows every type's fields, descriptions, formats and
//! `required` lists, under Kubernetes' definition names (`io.k8s.api.apps.v1.DeploymentSpec`).
//! It does not carry the extensions that say how lists and maps merge, which kubectl reads to
//! compute strategic merge patches (`x-kubernetes-patch-strategy`, `-patch-merge-key`,
//! `-list-type`, `-list-map-keys`, `-map-type`). Those come from `extensions.tsv`, a table with
//! one line per field (or per type, with an empty field name) carrying them:
//! `definition, field, patch strategy, merge key, list type, list map keys, map type`. It was
//! extracted from the published Kubernetes OpenAPI document and limited to the stable types
//! k8s-openapi's v1.33 types know; a field a type does not have is skipped.
//!
//! Generating a document's definitions walks a few hundred types, so each set is built once,
//! on first request, and kept for the life of the process: the types are compiled in, so the
//! result never changes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use k8s_openapi::Resource as _;
use k8s_openapi::schemars::generate::{SchemaGenerator, SchemaSettings};
use k8s_openapi::schemars::transform::{RemoveRefSiblings, Transform};
use k8s_openapi::schemars::{JsonSchema, Schema};
use serde_json::{Map, Value, json};

/// Which OpenAPI dialect the definitions are written for.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub(crate) enum Dialect {
    /// Swagger 2.0 (`/openapi/v2`): `#/definitions/...`, `$ref` with sibling descriptions.
    V2,
    /// OpenAPI 3.0 (`/openapi/v3/...`): `#/components/schemas/...`, a `$ref` with siblings
    /// wrapped in `allOf` as Kubernetes writes it.
    V3,
}

/// One built-in kind: its group, version and kind, as the registry names them.
pub(crate) type Gvk = (String, String, String);

macro_rules! builtin_kinds {
    ($($ty:ty),* $(,)?) => {
        /// Adds `kind`'s schema (and every schema it refers to) to `generator`, returning its
        /// definition name; `None` for a kind k8s-openapi has no type for.
        fn add_kind(generator: &mut SchemaGenerator, group: &str, version: &str, kind: &str) -> Option<String> {
            $(
                if <$ty>::GROUP == group && <$ty>::VERSION == version && <$ty>::KIND == kind {
                    generator.subschema_for::<$ty>();
                    return Some(<$ty as JsonSchema>::schema_name().into_owned());
                }
            )*
            None
        }
    };
}

builtin_kinds![
    k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration,
    k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicy,
    k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicyBinding,
    k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration,
    k8s_openapi::api::apps::v1::ControllerRevision,
    k8s_openapi::api::apps::v1::DaemonSet,
    k8s_openapi::api::apps::v1::Deployment,
    k8s_openapi::api::apps::v1::ReplicaSet,
    k8s_openapi::api::apps::v1::StatefulSet,
    k8s_openapi::api::authentication::v1::SelfSubjectReview,
    k8s_openapi::api::authentication::v1::TokenRequest,
    k8s_openapi::api::authentication::v1::TokenReview,
    k8s_openapi::api::authorization::v1::LocalSubjectAccessReview,
    k8s_openapi::api::authorization::v1::SelfSubjectAccessReview,
    k8s_openapi::api::authorization::v1::SelfSubjectRulesReview,
    k8s_openapi::api::authorization::v1::SubjectAccessReview,
    k8s_openapi::api::autoscaling::v1::HorizontalPodAutoscaler,
    k8s_openapi::api::autoscaling::v1::Scale,
    k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler,
    k8s_openapi::api::batch::v1::CronJob,
    k8s_openapi::api::batch::v1::Job,
    k8s_openapi::api::certificates::v1::CertificateSigningRequest,
    k8s_openapi::api::coordination::v1::Lease,
    k8s_openapi::api::core::v1::Binding,
    k8s_openapi::api::core::v1::ComponentStatus,
    k8s_openapi::api::core::v1::ConfigMap,
    k8s_openapi::api::core::v1::Endpoints,
    k8s_openapi::api::core::v1::Event,
    k8s_openapi::api::core::v1::LimitRange,
    k8s_openapi::api::core::v1::Namespace,
    k8s_openapi::api::core::v1::Node,
    k8s_openapi::api::core::v1::PersistentVolume,
    k8s_openapi::api::core::v1::PersistentVolumeClaim,
    k8s_openapi::api::core::v1::Pod,
    k8s_openapi::api::core::v1::PodTemplate,
    k8s_openapi::api::core::v1::ReplicationController,
    k8s_openapi::api::core::v1::ResourceQuota,
    k8s_openapi::api::core::v1::Secret,
    k8s_openapi::api::core::v1::Service,
    k8s_openapi::api::core::v1::ServiceAccount,
    k8s_openapi::api::discovery::v1::EndpointSlice,
    k8s_openapi::api::events::v1::Event,
    k8s_openapi::api::flowcontrol::v1::FlowSchema,
    k8s_openapi::api::flowcontrol::v1::PriorityLevelConfiguration,
    k8s_openapi::api::networking::v1::IPAddress,
    k8s_openapi::api::networking::v1::Ingress,
    k8s_openapi::api::networking::v1::IngressClass,
    k8s_openapi::api::networking::v1::NetworkPolicy,
    k8s_openapi::api::networking::v1::ServiceCIDR,
    k8s_openapi::api::node::v1::RuntimeClass,
    k8s_openapi::api::policy::v1::Eviction,
    k8s_openapi::api::policy::v1::PodDisruptionBudget,
    k8s_openapi::api::rbac::v1::ClusterRole,
    k8s_openapi::api::rbac::v1::ClusterRoleBinding,
    k8s_openapi::api::rbac::v1::Role,
    k8s_openapi::api::rbac::v1::RoleBinding,
    k8s_openapi::api::scheduling::v1::PriorityClass,
    k8s_openapi::api::storage::v1::CSIDriver,
    k8s_openapi::api::storage::v1::CSINode,
    k8s_openapi::api::storage::v1::CSIStorageCapacity,
    k8s_openapi::api::storage::v1::StorageClass,
    k8s_openapi::api::storage::v1::VolumeAttachment,
    k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
    k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService,
];

/// The definitions of a set of built-in kinds: each kind's schema (with its
/// `x-kubernetes-group-version-kind`) and every schema they refer to, by definition name.
#[derive(Debug, Default)]
pub(crate) struct Definitions {
    /// Definition name → schema.
    pub(crate) schemas: Map<String, Value>,
    /// Kind → its definition name, for the kinds k8s-openapi has a type for.
    pub(crate) names: HashMap<Gvk, String>,
}

type Cache = Mutex<HashMap<(Dialect, Vec<Gvk>), Arc<Definitions>>>;

/// The definitions of `kinds` in `dialect`, built on first use and cached.
pub(crate) fn definitions(dialect: Dialect, kinds: &[Gvk]) -> Arc<Definitions> {
    static CACHE: OnceLock<Cache> = OnceLock::new();
    let cache = CACHE.get_or_init(Cache::default);
    let key = (dialect, kinds.to_vec());
    if let Some(found) = cache.lock().expect("openapi cache lock").get(&key) {
        return found.clone();
    }
    let built = Arc::new(build(dialect, kinds));
    cache
        .lock()
        .expect("openapi cache lock")
        .entry(key)
        .or_insert(built)
        .clone()
}

fn build(dialect: Dialect, kinds: &[Gvk]) -> Definitions {
    let settings = match dialect {
        Dialect::V2 => SchemaSettings::draft07().with(|s| {
            s.meta_schema = None;
            s.transforms.clear();
        }),
        Dialect::V3 => SchemaSettings::openapi3().with(|s| {
            s.meta_schema = None;
            s.transforms.clear();
        }),
    };
    let mut generator = SchemaGenerator::new(settings);
    let mut names = HashMap::new();
    for (group, version, kind) in kinds {
        if let Some(name) = add_kind(&mut generator, group, version, kind) {
            names.insert((group.clone(), version.clone(), kind.clone()), name);
        }
    }
    let mut schemas = generator.take_definitions(false);
    let table = extensions();
    for (name, schema) in schemas.iter_mut() {
        if let Some(fields) = table.get(name.as_str()) {
            for (field, extensions) in fields {
                let target = if field.is_empty() {
                    Some(&mut *schema)
                } else {
                    schema.pointer_mut(&format!("/properties/{field}"))
                };
                if let Some(Value::Object(target)) = target {
                    for (key, value) in extensions {
                        target.insert((*key).to_string(), value.clone());
                    }
                }
            }
        }
    }
    for ((group, version, kind), name) in &names {
        if let Some(Value::Object(schema)) = schemas.get_mut(name) {
            schema.insert(
                "x-kubernetes-group-version-kind".into(),
                json!([{"group": group, "kind": kind, "version": version}]),
            );
        }
    }
    if dialect == Dialect::V3 {
        for schema in schemas.values_mut() {
            if let Ok(schema) = <&mut Schema>::try_from(schema) {
                RemoveRefSiblings::default().transform(schema);
            }
        }
    }
    Definitions { schemas, names }
}

/// Extension name → value, per field, per definition.
type Table = HashMap<&'static str, Vec<(&'static str, Vec<(&'static str, Value)>)>>;

/// `extensions.tsv`, parsed once.
fn extensions() -> &'static Table {
    static TABLE: OnceLock<Table> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut table: Table = HashMap::new();
        for line in include_str!("extensions.tsv").lines() {
            let cells: Vec<&str> = line.split('\t').collect();
            let [
                definition,
                field,
                strategy,
                merge_key,
                list_type,
                map_keys,
                map_type,
            ] = cells[..]
            else {
                continue;
            };
            let mut extensions = Vec::new();
            if !strategy.is_empty() {
                extensions.push(("x-kubernetes-patch-strategy", json!(strategy)));
            }
            if !merge_key.is_empty() {
                extensions.push(("x-kubernetes-patch-merge-key", json!(merge_key)));
            }
            if !list_type.is_empty() {
                extensions.push(("x-kubernetes-list-type", json!(list_type)));
            }
            if !map_keys.is_empty() {
                let keys: Vec<&str> = map_keys.split(',').collect();
                extensions.push(("x-kubernetes-list-map-keys", json!(keys)));
            }
            if !map_type.is_empty() {
                extensions.push(("x-kubernetes-map-type", json!(map_type)));
            }
            table
                .entry(definition)
                .or_default()
                .push((field, extensions));
        }
        table
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deployment() -> Vec<Gvk> {
        vec![("apps".into(), "v1".into(), "Deployment".into())]
    }

    #[test]
    fn deployment_schemas_carry_fields_extensions_and_kind() {
        let defs = definitions(Dialect::V3, &deployment());
        let deploy = &defs.schemas["io.k8s.api.apps.v1.Deployment"];
        assert_eq!(
            deploy["x-kubernetes-group-version-kind"],
            json!([{"group": "apps", "kind": "Deployment", "version": "v1"}])
        );
        assert_eq!(
            deploy["properties"]["spec"]["allOf"][0]["$ref"],
            "#/components/schemas/io.k8s.api.apps.v1.DeploymentSpec"
        );
        let spec = &defs.schemas["io.k8s.api.apps.v1.DeploymentSpec"];
        assert_eq!(spec["required"], json!(["selector", "template"]));
        assert_eq!(
            spec["properties"]["strategy"]["x-kubernetes-patch-strategy"],
            "retainKeys"
        );
        let containers = &defs.schemas["io.k8s.api.core.v1.PodSpec"]["properties"]["containers"];
        assert_eq!(containers["x-kubernetes-patch-merge-key"], "name");
        assert_eq!(containers["x-kubernetes-patch-strategy"], "merge");
        assert_eq!(containers["x-kubernetes-list-type"], "map");
        assert_eq!(containers["x-kubernetes-list-map-keys"], json!(["name"]));
        assert_eq!(
            containers["items"]["$ref"],
            "#/components/schemas/io.k8s.api.core.v1.Container"
        );
        let selector = &defs.schemas["io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelector"];
        assert_eq!(selector["x-kubernetes-map-type"], "atomic");
    }

    #[test]
    fn swagger_definitions_refer_to_definitions() {
        let defs = definitions(Dialect::V2, &deployment());
        let spec = &defs.schemas["io.k8s.api.apps.v1.Deployment"]["properties"]["spec"];
        assert_eq!(
            spec["$ref"],
            "#/definitions/io.k8s.api.apps.v1.DeploymentSpec"
        );
        assert!(spec["description"].is_string());
    }

    #[test]
    fn every_table_line_parses() {
        let lines = include_str!("extensions.tsv").lines().count();
        let parsed: usize = extensions().values().map(Vec::len).sum();
        assert_eq!(lines, parsed);
    }
}
