//! The built-in kinds the server serves, as Kubernetes v1.33 serves them: their discovery
//! entries ([`resources`]) and their strategies (one module per API group).
//!
//! No controllers run for them (no scheduler, kubelet or Deployment controller): objects are
//! decoded, defaulted, validated, stored and watched.

mod apiregistration;
mod apps;
mod autoscaling;
mod batch;
mod cluster;
mod componentstatus;
mod core;
mod core_misc;
mod core_volumes;
mod events;
mod networking;
mod nodes;
mod other;
mod pod_defaults;
mod policy;
mod storage;
mod template;
mod typed;

use std::sync::Arc;

pub use policy::SYSTEM_PRIORITY_CLASSES;

use super::resource::{ALL_VERBS, Resource, ScalePaths, Subresources};
use super::strategy::Strategy;

pub(crate) use autoscaling::v2_form as hpa_v2_form;
pub(crate) use componentstatus::{COMPONENTS, healthy as healthy_component};

struct Def {
    group: &'static str,
    kind: &'static str,
    plural: &'static str,
    namespaced: bool,
    short_names: &'static [&'static str],
    all: bool,
    status: bool,
    scale: bool,
    other_subresources: &'static [&'static str],
    storage_prefix: Option<&'static str>,
    strategy: Arc<dyn Strategy>,
}

impl Def {
    fn new(
        group: &'static str,
        kind: &'static str,
        plural: &'static str,
        strategy: Arc<dyn Strategy>,
    ) -> Self {
        Def {
            group,
            kind,
            plural,
            namespaced: true,
            short_names: &[],
            all: false,
            status: false,
            scale: false,
            other_subresources: &[],
            storage_prefix: None,
            strategy,
        }
    }

    fn cluster(mut self) -> Self {
        self.namespaced = false;
        self
    }

    fn short(mut self, names: &'static [&'static str]) -> Self {
        self.short_names = names;
        self
    }

    fn in_all(mut self) -> Self {
        self.all = true;
        self
    }

    fn with_status(mut self) -> Self {
        self.status = true;
        self
    }

    fn with_scale(mut self) -> Self {
        self.scale = true;
        self
    }

    fn stored_at(mut self, prefix: &'static str) -> Self {
        self.storage_prefix = Some(prefix);
        self
    }

    fn build(self) -> Resource {
        let version = "v1".to_string();
        let group_dir = if self.group.is_empty() {
            "core"
        } else {
            self.group
        };
        let mut verbs = ALL_VERBS.to_vec();
        if self.kind == "Namespace" {
            verbs.retain(|v| *v != "deletecollection");
        }
        Resource {
            group: self.group.into(),
            version,
            kind: self.kind.into(),
            list_kind: format!("{}List", self.kind),
            plural: self.plural.into(),
            singular: self.kind.to_ascii_lowercase(),
            namespaced: self.namespaced,
            short_names: self.short_names.iter().map(|s| s.to_string()).collect(),
            categories: if self.all {
                vec!["all".into()]
            } else {
                Vec::new()
            },
            verbs,
            subresources: Subresources {
                status: self.status,
                scale: self.scale.then(|| ScalePaths {
                    spec_replicas: "/spec/replicas".into(),
                    status_replicas: "/status/replicas".into(),
                    label_selector: Some("/spec/selector".into()),
                }),
                other: self.other_subresources.to_vec(),
            },
            storage_prefix: self
                .storage_prefix
                .map(str::to_string)
                .unwrap_or_else(|| format!("/{group_dir}/{}", self.plural)),
            strategy: self.strategy,
            printer: super::printers::builtin(self.group, self.kind),
        }
    }
}

/// Every built-in resource, in discovery order within each group.
pub fn resources() -> Vec<Resource> {
    let core_events = Arc::new(core::EventStrategy);
    let defs = vec![
        // core/v1
        Def::new(
            "",
            "ConfigMap",
            "configmaps",
            Arc::new(core::ConfigMapStrategy),
        )
        .short(&["cm"]),
        Def::new(
            "",
            "Endpoints",
            "endpoints",
            Arc::new(core_misc::endpoints()),
        )
        .short(&["ep"]),
        Def::new("", "Event", "events", core_events).short(&["ev"]),
        Def::new(
            "",
            "LimitRange",
            "limitranges",
            Arc::new(core_misc::limit_range()),
        )
        .short(&["limits"]),
        {
            let mut d = Def::new(
                "",
                "Namespace",
                "namespaces",
                Arc::new(core::NamespaceStrategy),
            )
            .cluster()
            .short(&["ns"])
            .with_status();
            d.other_subresources = &["finalize"];
            d
        },
        {
            let mut d = Def::new("", "Node", "nodes", Arc::new(nodes::NodeStrategy))
                .cluster()
                .short(&["no"])
                .with_status();
            d.other_subresources = &["proxy"];
            d
        },
        Def::new(
            "",
            "PersistentVolumeClaim",
            "persistentvolumeclaims",
            Arc::new(core_volumes::persistent_volume_claim()),
        )
        .short(&["pvc"])
        .with_status(),
        Def::new(
            "",
            "PersistentVolume",
            "persistentvolumes",
            Arc::new(core_volumes::persistent_volume()),
        )
        .cluster()
        .short(&["pv"])
        .with_status(),
        {
            let mut d = Def::new("", "Pod", "pods", Arc::new(core::PodStrategy))
                .short(&["po"])
                .in_all()
                .with_status();
            d.other_subresources = &[
                "binding",
                "ephemeralcontainers",
                "eviction",
                "resize",
                "log",
                "exec",
                "attach",
                "portforward",
                "proxy",
            ];
            d
        },
        Def::new(
            "",
            "PodTemplate",
            "podtemplates",
            Arc::new(core_misc::pod_template()),
        ),
        Def::new(
            "",
            "ReplicationController",
            "replicationcontrollers",
            Arc::new(core_misc::replication_controller()),
        )
        .short(&["rc"])
        .in_all()
        .with_status()
        .with_scale(),
        Def::new(
            "",
            "ResourceQuota",
            "resourcequotas",
            Arc::new(core_misc::resource_quota()),
        )
        .short(&["quota"])
        .with_status(),
        Def::new("", "Secret", "secrets", Arc::new(core::SecretStrategy)),
        {
            let mut d = Def::new(
                "",
                "ServiceAccount",
                "serviceaccounts",
                Arc::new(core::ServiceAccountStrategy),
            )
            .short(&["sa"]);
            d.other_subresources = &["token"];
            d
        },
        {
            let mut d = Def::new(
                "",
                "Service",
                "services",
                Arc::new(core::ServiceStrategy::new()),
            )
            .short(&["svc"])
            .in_all()
            .with_status();
            d.other_subresources = &["proxy"];
            d
        },
        // apps/v1
        Def::new(
            "apps",
            "ControllerRevision",
            "controllerrevisions",
            Arc::new(apps::ControllerRevisionStrategy),
        ),
        Def::new(
            "apps",
            "DaemonSet",
            "daemonsets",
            Arc::new(apps::DaemonSetStrategy),
        )
        .short(&["ds"])
        .in_all()
        .with_status(),
        Def::new(
            "apps",
            "Deployment",
            "deployments",
            Arc::new(apps::DeploymentStrategy),
        )
        .short(&["deploy"])
        .in_all()
        .with_status()
        .with_scale(),
        Def::new(
            "apps",
            "ReplicaSet",
            "replicasets",
            Arc::new(apps::ReplicaSetStrategy),
        )
        .short(&["rs"])
        .in_all()
        .with_status()
        .with_scale(),
        Def::new(
            "apps",
            "StatefulSet",
            "statefulsets",
            Arc::new(apps::StatefulSetStrategy),
        )
        .short(&["sts"])
        .in_all()
        .with_status()
        .with_scale(),
        // batch/v1
        Def::new(
            "batch",
            "CronJob",
            "cronjobs",
            Arc::new(batch::CronJobStrategy),
        )
        .short(&["cj"])
        .in_all()
        .with_status(),
        Def::new("batch", "Job", "jobs", Arc::new(batch::JobStrategy))
            .in_all()
            .with_status(),
        // policy/v1
        Def::new(
            "policy",
            "PodDisruptionBudget",
            "poddisruptionbudgets",
            Arc::new(policy::pod_disruption_budget()),
        )
        .short(&["pdb"])
        .with_status(),
        // scheduling.k8s.io/v1
        Def::new(
            "scheduling.k8s.io",
            "PriorityClass",
            "priorityclasses",
            Arc::new(policy::priority_class()),
        )
        .cluster()
        .short(&["pc"]),
        // networking.k8s.io/v1
        Def::new(
            "networking.k8s.io",
            "IngressClass",
            "ingressclasses",
            Arc::new(networking::ingress_class()),
        )
        .cluster(),
        Def::new(
            "networking.k8s.io",
            "Ingress",
            "ingresses",
            Arc::new(networking::ingress()),
        )
        .short(&["ing"])
        .with_status(),
        Def::new(
            "networking.k8s.io",
            "IPAddress",
            "ipaddresses",
            Arc::new(networking::ip_address()),
        )
        .cluster()
        .short(&["ip"]),
        Def::new(
            "networking.k8s.io",
            "NetworkPolicy",
            "networkpolicies",
            Arc::new(networking::network_policy()),
        )
        .short(&["netpol"]),
        Def::new(
            "networking.k8s.io",
            "ServiceCIDR",
            "servicecidrs",
            Arc::new(networking::service_cidr()),
        )
        .cluster()
        .with_status(),
        // discovery.k8s.io/v1
        Def::new(
            "discovery.k8s.io",
            "EndpointSlice",
            "endpointslices",
            Arc::new(networking::endpoint_slice()),
        ),
        // storage.k8s.io/v1
        Def::new(
            "storage.k8s.io",
            "CSIDriver",
            "csidrivers",
            Arc::new(storage::csi_driver()),
        )
        .cluster(),
        Def::new(
            "storage.k8s.io",
            "CSINode",
            "csinodes",
            Arc::new(storage::csi_node()),
        )
        .cluster(),
        Def::new(
            "storage.k8s.io",
            "CSIStorageCapacity",
            "csistoragecapacities",
            Arc::new(storage::csi_storage_capacity()),
        ),
        Def::new(
            "storage.k8s.io",
            "StorageClass",
            "storageclasses",
            Arc::new(storage::storage_class()),
        )
        .cluster()
        .short(&["sc"]),
        Def::new(
            "storage.k8s.io",
            "VolumeAttachment",
            "volumeattachments",
            Arc::new(storage::volume_attachment()),
        )
        .cluster()
        .with_status(),
        // node.k8s.io/v1
        Def::new(
            "node.k8s.io",
            "RuntimeClass",
            "runtimeclasses",
            Arc::new(cluster::runtime_class()),
        )
        .cluster(),
        // certificates.k8s.io/v1 (approval: rest/approval)
        {
            let mut d = Def::new(
                "certificates.k8s.io",
                "CertificateSigningRequest",
                "certificatesigningrequests",
                Arc::new(cluster::certificate_signing_request()),
            )
            .cluster()
            .short(&["csr"])
            .with_status();
            d.other_subresources = &["approval"];
            d
        },
        // admissionregistration.k8s.io/v1: stored and checked; nothing calls the webhooks yet
        Def::new(
            "admissionregistration.k8s.io",
            "MutatingWebhookConfiguration",
            "mutatingwebhookconfigurations",
            Arc::new(cluster::mutating_webhook_configuration()),
        )
        .cluster(),
        Def::new(
            "admissionregistration.k8s.io",
            "ValidatingAdmissionPolicy",
            "validatingadmissionpolicies",
            Arc::new(cluster::validating_admission_policy()),
        )
        .cluster()
        .with_status(),
        Def::new(
            "admissionregistration.k8s.io",
            "ValidatingAdmissionPolicyBinding",
            "validatingadmissionpolicybindings",
            Arc::new(cluster::validating_admission_policy_binding()),
        )
        .cluster(),
        Def::new(
            "admissionregistration.k8s.io",
            "ValidatingWebhookConfiguration",
            "validatingwebhookconfigurations",
            Arc::new(cluster::validating_webhook_configuration()),
        )
        .cluster(),
        // flowcontrol.apiserver.k8s.io/v1: stored only
        Def::new(
            "flowcontrol.apiserver.k8s.io",
            "FlowSchema",
            "flowschemas",
            Arc::new(cluster::flow_schema()),
        )
        .cluster()
        .with_status(),
        Def::new(
            "flowcontrol.apiserver.k8s.io",
            "PriorityLevelConfiguration",
            "prioritylevelconfigurations",
            Arc::new(cluster::priority_level_configuration()),
        )
        .cluster()
        .with_status(),
        // coordination.k8s.io/v1
        Def::new(
            "coordination.k8s.io",
            "Lease",
            "leases",
            Arc::new(other::LeaseStrategy),
        ),
        // events.k8s.io/v1: the same objects as core Events, another schema
        Def::new(
            "events.k8s.io",
            "Event",
            "events",
            Arc::new(events::EventsV1Strategy),
        )
        .short(&["ev"])
        .stored_at("/core/events"),
        // apiextensions.k8s.io/v1
        Def::new(
            super::crd::GROUP,
            "CustomResourceDefinition",
            "customresourcedefinitions",
            Arc::new(super::crd::CrdStrategy),
        )
        .cluster()
        .short(&["crd", "crds"])
        .with_status(),
        // apiregistration.k8s.io/v1: local APIServices, kept by controllers::apiservices
        Def::new(
            "apiregistration.k8s.io",
            "APIService",
            "apiservices",
            Arc::new(apiregistration::api_service()),
        )
        .cluster()
        .with_status(),
        // rbac.authorization.k8s.io/v1
        Def::new(
            "rbac.authorization.k8s.io",
            "ClusterRoleBinding",
            "clusterrolebindings",
            Arc::new(other::RbacStrategy::ClusterRoleBinding),
        )
        .cluster(),
        Def::new(
            "rbac.authorization.k8s.io",
            "ClusterRole",
            "clusterroles",
            Arc::new(other::RbacStrategy::ClusterRole),
        )
        .cluster(),
        Def::new(
            "rbac.authorization.k8s.io",
            "RoleBinding",
            "rolebindings",
            Arc::new(other::RbacStrategy::RoleBinding),
        ),
        Def::new(
            "rbac.authorization.k8s.io",
            "Role",
            "roles",
            Arc::new(other::RbacStrategy::Role),
        ),
    ];
    let mut out: Vec<Resource> = defs.into_iter().map(Def::build).collect();
    // core/v1 componentstatuses (read-only) and bindings (create-only, served by rest/binding)
    let mut cs = Def::new(
        "",
        "ComponentStatus",
        "componentstatuses",
        Arc::new(componentstatus::ComponentStatusStrategy),
    )
    .cluster()
    .short(&["cs"])
    .build();
    cs.verbs = vec!["get", "list"];
    out.push(cs);
    let mut bindings = Def::new("", "Binding", "bindings", Arc::new(other::ReviewStrategy)).build();
    bindings.verbs = vec!["create"];
    out.push(bindings);
    out.extend(autoscaling::resources());
    out.extend(reviews());
    out
}

/// The review kinds: create-only, cluster-scoped, never stored (served by `http/reviews.rs`).
fn reviews() -> Vec<Resource> {
    [
        (
            "authentication.k8s.io",
            "SelfSubjectReview",
            "selfsubjectreviews",
        ),
        ("authentication.k8s.io", "TokenReview", "tokenreviews"),
        (
            "authorization.k8s.io",
            "SelfSubjectAccessReview",
            "selfsubjectaccessreviews",
        ),
        (
            "authorization.k8s.io",
            "SelfSubjectRulesReview",
            "selfsubjectrulesreviews",
        ),
        (
            "authorization.k8s.io",
            "SubjectAccessReview",
            "subjectaccessreviews",
        ),
    ]
    .into_iter()
    .map(|(group, kind, plural)| {
        let mut r = Def::new(group, kind, plural, Arc::new(other::ReviewStrategy))
            .cluster()
            .build();
        r.verbs = vec!["create"];
        r
    })
    .chain(std::iter::once({
        let mut r = Def::new(
            "authorization.k8s.io",
            "LocalSubjectAccessReview",
            "localsubjectaccessreviews",
            Arc::new(other::ReviewStrategy),
        )
        .build();
        r.verbs = vec!["create"];
        r
    }))
    .collect()
}

/// The namespaces that exist when the server first starts.
pub const INITIAL_NAMESPACES: [&str; 4] =
    ["default", "kube-system", "kube-public", "kube-node-lease"];

/// Namespaces that may never be deleted.
pub const IMMORTAL_NAMESPACES: [&str; 3] = ["default", "kube-system", "kube-public"];
