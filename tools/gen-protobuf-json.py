#!/usr/bin/env python3
"""Generate `crates/apiserver/src/http/protobuf/generated.rs`.

The file holds a `ToJson` impl for every `k8s-pb` message reachable from the
top-level kinds the API server accepts as protobuf request bodies
(`TOP_LEVEL_KINDS`), plus `decode_object`, which picks the message type for an
envelope's `apiVersion`/`kind`.

Inputs (read from the cargo registry, located by glob):
  * k8s-pb     (`K8S_PB_VERSION`):      prost structs, field tags and types.
  * k8s-openapi (`K8S_OPENAPI_VERSION`): the serde `Deserialize` impls, whose
    `"jsonName" => Field::Key_...` arms spell every JSON field name exactly.

Each prost field is matched to the JSON field of the same k8s-openapi type whose
normalized name is equal (lowercase, everything but letters and digits removed:
prost `non_resource_ur_ls` <-> JSON `nonResourceURLs`, prost `r#ref` <->
JSON `$ref`). The
generator fails if a field cannot be matched, unless `FIELD_NAME_OVERRIDES`
names it. Fields are looked up in the newest k8s-openapi version module first,
then in older ones, so fields added after the version the server compiles
against still get their real names.

Messages whose JSON form is not "an object of its fields" are converted by
hand-written impls in `mod.rs`; they are listed in `HAND_WRITTEN`.

Omit-empty policy (see the module doc of `mod.rs`): empty strings, empty
repeated fields and empty maps are dropped; numbers and booleans are kept as
sent, because Go writes pointer fields only when set, so `replicas: 0` is
meaningful. The exception is `ZERO_IS_UNSET`: Go fields that are *not*
pointers and carry `omitempty` (so Go always writes them to protobuf, and never
writes a zero to JSON); a zero there is dropped, as Go's JSON encoder would.
And `EMPTY_STRING_IS_SET`: Go `*string` fields, whose empty string is kept.

Usage (from anywhere; needs `rustfmt` on PATH and the two crates fetched, which
any build of kore-apiserver does):
  python3 tools/gen-protobuf-json.py [--check]

`--check` exits with status 1 if the file on disk differs from what would be
generated, without writing it. The registry is `$CARGO_HOME/registry/src/*/`
(default `~/.cargo`). The output is piped through `rustfmt --edition 2024`.
"""

from __future__ import annotations

import argparse
import glob
import os
import re
import sys
from dataclasses import dataclass, field
from typing import NoReturn

K8S_PB_VERSION = "0.9.0"
K8S_OPENAPI_VERSION = "0.29.0"
# The k8s-openapi version module the server is built with (its `v1_33` feature).
# Every JSON field it defines for a reachable type must be produced, so an
# older k8s-pb cannot silently drop fields.
SERVED_OPENAPI_VERSION = "v1_33"
# JSON fields that have no protobuf field: TypeMeta comes from the envelope.
NOT_IN_PROTOBUF = {"apiVersion", "kind"}

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUTPUT = os.path.join(REPO_ROOT, "crates/apiserver/src/http/protobuf/generated.rs")

# (apiVersion, kind, k8s-pb message path). `None` as apiVersion matches any
# apiVersion: client-go encodes DeleteOptions with the group version of the
# client that sends it (`v1`, `apps/v1`, ...) or as `meta.k8s.io/v1`.
TOP_LEVEL_KINDS: list[tuple[str | None, str, str]] = [
    # Every kind kore-apiserver stores or accepts as a request body (registry/builtin/mod.rs,
    # crates/testenv/tests/data/kube-1.33-resources.txt), by group as discovery lists them.
    # Not here: ComponentStatus (get and list only) and the *Options kinds of the proxy,
    # exec, attach and portforward subresources (query parameters, never a body).
    ("v1", "Binding", "api::core::v1::Binding"),
    ("v1", "ConfigMap", "api::core::v1::ConfigMap"),
    ("v1", "Endpoints", "api::core::v1::Endpoints"),
    ("v1", "Event", "api::core::v1::Event"),
    ("v1", "LimitRange", "api::core::v1::LimitRange"),
    ("v1", "Namespace", "api::core::v1::Namespace"),
    ("v1", "Node", "api::core::v1::Node"),
    ("v1", "PersistentVolume", "api::core::v1::PersistentVolume"),
    ("v1", "PersistentVolumeClaim", "api::core::v1::PersistentVolumeClaim"),
    ("v1", "Pod", "api::core::v1::Pod"),
    ("v1", "PodTemplate", "api::core::v1::PodTemplate"),
    ("v1", "ReplicationController", "api::core::v1::ReplicationController"),
    ("v1", "ResourceQuota", "api::core::v1::ResourceQuota"),
    ("v1", "Secret", "api::core::v1::Secret"),
    ("v1", "Service", "api::core::v1::Service"),
    ("v1", "ServiceAccount", "api::core::v1::ServiceAccount"),
    (
        "admissionregistration.k8s.io/v1",
        "MutatingWebhookConfiguration",
        "api::admissionregistration::v1::MutatingWebhookConfiguration",
    ),
    (
        "admissionregistration.k8s.io/v1",
        "ValidatingAdmissionPolicy",
        "api::admissionregistration::v1::ValidatingAdmissionPolicy",
    ),
    (
        "admissionregistration.k8s.io/v1",
        "ValidatingAdmissionPolicyBinding",
        "api::admissionregistration::v1::ValidatingAdmissionPolicyBinding",
    ),
    (
        "admissionregistration.k8s.io/v1",
        "ValidatingWebhookConfiguration",
        "api::admissionregistration::v1::ValidatingWebhookConfiguration",
    ),
    (
        "apiextensions.k8s.io/v1",
        "CustomResourceDefinition",
        "apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition",
    ),
    ("apiregistration.k8s.io/v1", "APIService", "kube_aggregator::pkg::apis::apiregistration::v1::APIService"),
    ("apps/v1", "ControllerRevision", "api::apps::v1::ControllerRevision"),
    ("apps/v1", "DaemonSet", "api::apps::v1::DaemonSet"),
    ("apps/v1", "Deployment", "api::apps::v1::Deployment"),
    ("apps/v1", "ReplicaSet", "api::apps::v1::ReplicaSet"),
    ("apps/v1", "StatefulSet", "api::apps::v1::StatefulSet"),
    ("authentication.k8s.io/v1", "SelfSubjectReview", "api::authentication::v1::SelfSubjectReview"),
    ("authentication.k8s.io/v1", "TokenRequest", "api::authentication::v1::TokenRequest"),
    ("authentication.k8s.io/v1", "TokenReview", "api::authentication::v1::TokenReview"),
    (
        "authorization.k8s.io/v1",
        "LocalSubjectAccessReview",
        "api::authorization::v1::LocalSubjectAccessReview",
    ),
    (
        "authorization.k8s.io/v1",
        "SelfSubjectAccessReview",
        "api::authorization::v1::SelfSubjectAccessReview",
    ),
    (
        "authorization.k8s.io/v1",
        "SelfSubjectRulesReview",
        "api::authorization::v1::SelfSubjectRulesReview",
    ),
    (
        "authorization.k8s.io/v1",
        "SubjectAccessReview",
        "api::authorization::v1::SubjectAccessReview",
    ),
    ("autoscaling/v1", "HorizontalPodAutoscaler", "api::autoscaling::v1::HorizontalPodAutoscaler"),
    # The body of every scale subresource (Deployment, ReplicaSet, StatefulSet,
    # ReplicationController, custom resources): Kubernetes serves them all as autoscaling/v1.
    ("autoscaling/v1", "Scale", "api::autoscaling::v1::Scale"),
    ("autoscaling/v2", "HorizontalPodAutoscaler", "api::autoscaling::v2::HorizontalPodAutoscaler"),
    ("batch/v1", "CronJob", "api::batch::v1::CronJob"),
    ("batch/v1", "Job", "api::batch::v1::Job"),
    (
        "certificates.k8s.io/v1",
        "CertificateSigningRequest",
        "api::certificates::v1::CertificateSigningRequest",
    ),
    ("coordination.k8s.io/v1", "Lease", "api::coordination::v1::Lease"),
    ("discovery.k8s.io/v1", "EndpointSlice", "api::discovery::v1::EndpointSlice"),
    ("events.k8s.io/v1", "Event", "api::events::v1::Event"),
    ("flowcontrol.apiserver.k8s.io/v1", "FlowSchema", "api::flowcontrol::v1::FlowSchema"),
    (
        "flowcontrol.apiserver.k8s.io/v1",
        "PriorityLevelConfiguration",
        "api::flowcontrol::v1::PriorityLevelConfiguration",
    ),
    ("networking.k8s.io/v1", "IPAddress", "api::networking::v1::IPAddress"),
    ("networking.k8s.io/v1", "Ingress", "api::networking::v1::Ingress"),
    ("networking.k8s.io/v1", "IngressClass", "api::networking::v1::IngressClass"),
    ("networking.k8s.io/v1", "NetworkPolicy", "api::networking::v1::NetworkPolicy"),
    ("networking.k8s.io/v1", "ServiceCIDR", "api::networking::v1::ServiceCIDR"),
    ("node.k8s.io/v1", "RuntimeClass", "api::node::v1::RuntimeClass"),
    ("policy/v1", "Eviction", "api::policy::v1::Eviction"),
    # The eviction subresource also takes the policy/v1beta1 Eviction (client-go's
    # `EvictV1beta1`, still used by older drain code). Its message is field for field, tag for
    # tag, the policy/v1 one, and k8s-openapi has no v1beta1 type to name its JSON fields.
    ("policy/v1beta1", "Eviction", "api::policy::v1::Eviction"),
    ("policy/v1", "PodDisruptionBudget", "api::policy::v1::PodDisruptionBudget"),
    ("rbac.authorization.k8s.io/v1", "ClusterRole", "api::rbac::v1::ClusterRole"),
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "api::rbac::v1::ClusterRoleBinding"),
    ("rbac.authorization.k8s.io/v1", "Role", "api::rbac::v1::Role"),
    ("rbac.authorization.k8s.io/v1", "RoleBinding", "api::rbac::v1::RoleBinding"),
    ("scheduling.k8s.io/v1", "PriorityClass", "api::scheduling::v1::PriorityClass"),
    ("storage.k8s.io/v1", "CSIDriver", "api::storage::v1::CSIDriver"),
    ("storage.k8s.io/v1", "CSINode", "api::storage::v1::CSINode"),
    ("storage.k8s.io/v1", "CSIStorageCapacity", "api::storage::v1::CSIStorageCapacity"),
    ("storage.k8s.io/v1", "StorageClass", "api::storage::v1::StorageClass"),
    ("storage.k8s.io/v1", "VolumeAttachment", "api::storage::v1::VolumeAttachment"),
    (None, "DeleteOptions", "apimachinery::pkg::apis::meta::v1::DeleteOptions"),
]

# Messages converted by hand-written `ToJson` impls in mod.rs (their JSON form
# is a scalar, an array, or embedded JSON). Keep in sync with mod.rs; the
# compiler reports a missing impl.
HAND_WRITTEN: set[str] = {
    "apimachinery::pkg::api::resource::Quantity",
    "apimachinery::pkg::apis::meta::v1::Duration",
    "apimachinery::pkg::apis::meta::v1::FieldsV1",
    "apimachinery::pkg::apis::meta::v1::MicroTime",
    "apimachinery::pkg::apis::meta::v1::Time",
    "apimachinery::pkg::runtime::RawExtension",
    "apimachinery::pkg::util::intstr::IntOrString",
    "api::authentication::v1::ExtraValue",
    "api::authorization::v1::ExtraValue",
    "api::certificates::v1::ExtraValue",
    "apiextensions_apiserver::pkg::apis::apiextensions::v1::Json",
    "apiextensions_apiserver::pkg::apis::apiextensions::v1::JsonSchemaPropsOrArray",
    "apiextensions_apiserver::pkg::apis::apiextensions::v1::JsonSchemaPropsOrBool",
    "apiextensions_apiserver::pkg::apis::apiextensions::v1::JsonSchemaPropsOrStringArray",
}

# (message path, prost field name) -> JSON name, for fields whose normalized
# names differ between k8s-pb and k8s-openapi. Empty today: every field of every
# reachable message matches. Add an entry (with a comment saying why) only when
# the generator reports an unmatched field that really is the same field.
FIELD_NAME_OVERRIDES: dict[tuple[str, str], str] = {}

# (message path, prost field name) of fields Go embeds with `json:",inline"`:
# protobuf nests them as a message, JSON flattens their fields into the parent.
# The generator checks that every JSON name of the inlined message is also a
# JSON name of the parent.
INLINE_FIELDS: set[tuple[str, str]] = {
    ("api::admissionregistration::v1::NamedRuleWithOperations", "rule_with_operations"),
    ("api::admissionregistration::v1::RuleWithOperations", "rule"),
    ("api::core::v1::ConfigMapEnvSource", "local_object_reference"),
    ("api::core::v1::ConfigMapKeySelector", "local_object_reference"),
    ("api::core::v1::ConfigMapProjection", "local_object_reference"),
    ("api::core::v1::ConfigMapVolumeSource", "local_object_reference"),
    ("api::core::v1::EphemeralContainer", "ephemeral_container_common"),
    ("api::core::v1::PersistentVolumeSpec", "persistent_volume_source"),
    ("api::core::v1::Probe", "handler"),
    ("api::networking::v1::IngressRule", "ingress_rule_value"),
    ("api::core::v1::SecretEnvSource", "local_object_reference"),
    ("api::core::v1::SecretKeySelector", "local_object_reference"),
    ("api::core::v1::SecretProjection", "local_object_reference"),
    ("api::core::v1::Volume", "volume_source"),
}

# Number and boolean fields whose zero value is dropped: Go fields that are not
# pointers and are tagged `omitempty` (`MinReadySeconds int32
# `json:"minReadySeconds,omitempty"``). Go writes them to protobuf even when
# zero, while its JSON encoder omits them, so a zero here means "unset". Facts
# from the Go types in k8s.io/api, k8s.io/apimachinery and
# k8s.io/apiextensions-apiserver.
#
# Every other number or boolean is kept as sent: pointer fields (`*int32`) are
# only written when set, so their zero is meaningful (`replicas: 0`,
# `automountServiceAccountToken: false`), and required fields without
# `omitempty` (`containerPort`, `allowed`) are written by Go's JSON encoder too.
# A field missing here only costs an explicit zero in the JSON; a pointer field
# listed here by mistake would lose a meaningful zero. When unsure, leave it
# out.
#
# Deliberately absent although non-pointer `omitempty` in Go: autoscaling/v1
# ScaleSpec.replicas, so that an `UpdateScale` to zero says so explicitly.
#
# Checked for every reachable k8s.io/api message against k8s.io/api v0.33.9 (`*/v1/types.go`,
# autoscaling/v2) and for APIService against k8s.io/kube-aggregator v0.33.9
# (`apiregistration/v1/types.go`): the `api::` and `kube_aggregator::` entries are exactly
# their non-pointer `omitempty` int32/int64/bool fields, ScaleSpec.replicas aside. (The
# apiextensions and meta entries predate that check.) Look-alikes that stay: required
# counters without `omitempty` (DaemonSetStatus.currentNumberScheduled/numberMisscheduled/
# desiredNumberScheduled/numberReady, StatefulSetStatus.replicas/availableReplicas,
# HPA v1 status currentReplicas and both desiredReplicas, PDB status counts, FlowSchemaSpec.
# matchingPrecedence, QueuingConfiguration, APIServiceSpec priorities, PriorityClass.value,
# ControllerRevision.revision, StatefulSetOrdinals.start, VolumeAttachmentStatus.attached,
# DaemonEndpoint.Port), and pointers (every JobSpec and CronJobSpec number and boolean, the
# CSIDriverSpec booleans, EndpointConditions, HPA minReplicas, flowcontrol shares/percents).
ZERO_IS_UNSET: dict[str, list[str]] = {
    "api::admissionregistration::v1::ValidatingAdmissionPolicyStatus": ["observed_generation"],
    "api::apps::v1::DaemonSetSpec": ["min_ready_seconds"],
    "api::apps::v1::DaemonSetStatus": [
        "number_available",
        "number_unavailable",
        "observed_generation",
        "updated_number_scheduled",
    ],
    "api::apps::v1::DeploymentSpec": ["min_ready_seconds", "paused"],
    "api::apps::v1::DeploymentStatus": [
        "available_replicas",
        "observed_generation",
        "ready_replicas",
        "replicas",
        "unavailable_replicas",
        "updated_replicas",
    ],
    "api::apps::v1::ReplicaSetSpec": ["min_ready_seconds"],
    "api::apps::v1::ReplicaSetStatus": [
        "available_replicas",
        "fully_labeled_replicas",
        "observed_generation",
        "ready_replicas",
    ],
    "api::apps::v1::StatefulSetSpec": ["min_ready_seconds"],
    "api::apps::v1::StatefulSetStatus": [
        "current_replicas",
        "observed_generation",
        "ready_replicas",
        "updated_replicas",
    ],
    "api::authentication::v1::TokenReviewStatus": ["authenticated"],
    "api::authorization::v1::SubjectAccessReviewStatus": ["denied"],
    "api::autoscaling::v2::HorizontalPodAutoscalerStatus": ["current_replicas"],
    "api::batch::v1::JobStatus": ["active", "failed", "succeeded"],
    "api::core::v1::AwsElasticBlockStoreVolumeSource": ["partition", "read_only"],
    "api::core::v1::AzureFilePersistentVolumeSource": ["read_only"],
    "api::core::v1::AzureFileVolumeSource": ["read_only"],
    "api::core::v1::CSIPersistentVolumeSource": ["read_only"],
    "api::core::v1::CephFsPersistentVolumeSource": ["read_only"],
    "api::core::v1::CephFsVolumeSource": ["read_only"],
    "api::core::v1::CinderPersistentVolumeSource": ["read_only"],
    "api::core::v1::CinderVolumeSource": ["read_only"],
    "api::core::v1::Container": ["stdin", "stdin_once", "tty"],
    "api::core::v1::ContainerImage": ["size_bytes"],
    "api::core::v1::ContainerPort": ["host_port"],
    "api::core::v1::ContainerStateTerminated": ["signal"],
    "api::core::v1::EphemeralContainerCommon": ["stdin", "stdin_once", "tty"],
    "api::core::v1::Event": ["count"],
    "api::core::v1::EventSeries": ["count"],
    "api::core::v1::FcVolumeSource": ["read_only"],
    "api::core::v1::FlexPersistentVolumeSource": ["read_only"],
    "api::core::v1::FlexVolumeSource": ["read_only"],
    "api::core::v1::GcePersistentDiskVolumeSource": ["partition", "read_only"],
    "api::core::v1::GlusterfsPersistentVolumeSource": ["read_only"],
    "api::core::v1::GlusterfsVolumeSource": ["read_only"],
    "api::core::v1::IscsiPersistentVolumeSource": [
        "chap_auth_discovery",
        "chap_auth_session",
        "read_only",
    ],
    "api::core::v1::IscsiVolumeSource": ["chap_auth_discovery", "chap_auth_session", "read_only"],
    "api::core::v1::NfsVolumeSource": ["read_only"],
    "api::core::v1::NodeSpec": ["unschedulable"],
    "api::core::v1::PersistentVolumeClaimVolumeSource": ["read_only"],
    "api::core::v1::PodCondition": ["observed_generation"],
    "api::core::v1::PodSpec": ["host_ipc", "host_network", "host_pid"],
    "api::core::v1::PodStatus": ["observed_generation"],
    "api::core::v1::PortworxVolumeSource": ["read_only"],
    "api::core::v1::Probe": [
        "failure_threshold",
        "initial_delay_seconds",
        "period_seconds",
        "success_threshold",
        "timeout_seconds",
    ],
    "api::core::v1::QuobyteVolumeSource": ["read_only"],
    "api::core::v1::RbdPersistentVolumeSource": ["read_only"],
    "api::core::v1::RbdVolumeSource": ["read_only"],
    "api::core::v1::ReplicationControllerSpec": ["min_ready_seconds"],
    "api::core::v1::ReplicationControllerStatus": [
        "available_replicas",
        "fully_labeled_replicas",
        "observed_generation",
        "ready_replicas",
    ],
    "api::core::v1::ScaleIoPersistentVolumeSource": ["read_only", "ssl_enabled"],
    "api::core::v1::ScaleIoVolumeSource": ["read_only", "ssl_enabled"],
    "api::core::v1::ServicePort": ["node_port"],
    "api::core::v1::ServiceSpec": ["health_check_node_port", "publish_not_ready_addresses"],
    "api::core::v1::StorageOsPersistentVolumeSource": ["read_only"],
    "api::core::v1::StorageOsVolumeSource": ["read_only"],
    "api::core::v1::VolumeMount": ["read_only"],
    "api::core::v1::VolumeMountStatus": ["read_only"],
    "api::events::v1::Event": ["deprecated_count"],
    "api::flowcontrol::v1::ResourcePolicyRule": ["cluster_scope"],
    "api::networking::v1::ServiceBackendPort": ["number"],
    "api::policy::v1::PodDisruptionBudgetStatus": ["observed_generation"],
    "api::scheduling::v1::PriorityClass": ["global_default"],
    "apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceColumnDefinition": [
        "priority",
    ],
    "apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinitionCondition": [
        "observed_generation",
    ],
    "apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinitionSpec": [
        "preserve_unknown_fields",
    ],
    "apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinitionStatus": [
        "observed_generation",
    ],
    "apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinitionVersion": [
        "deprecated",
    ],
    "apiextensions_apiserver::pkg::apis::apiextensions::v1::JsonSchemaProps": [
        "exclusive_maximum",
        "exclusive_minimum",
        "nullable",
        "unique_items",
        "x_kubernetes_embedded_resource",
        "x_kubernetes_int_or_string",
    ],
    "apimachinery::pkg::apis::meta::v1::Condition": ["observed_generation"],
    "apimachinery::pkg::apis::meta::v1::ObjectMeta": ["generation"],
    "kube_aggregator::pkg::apis::apiregistration::v1::APIServiceSpec": ["insecure_skip_tls_verify"],
}


# String fields whose empty value is kept: Go `*string` fields. Go writes a pointer to
# protobuf only when it is set, and its JSON encoder writes a set pointer to `""` as `""`, so
# an empty string here is a value (`storageClassName: ""` on a PersistentVolumeClaim asks for
# no StorageClass at all; dropping it would let the default class be filled in). Every other
# string is a Go `string`, on the wire even when empty, and its empty value is dropped.
#
# Exactly the `*string` fields of the reachable messages in k8s.io/api,
# k8s.io/kube-aggregator and k8s.io/apiextensions-apiserver v0.33.9. Pointers to named
# string types (`*PersistentVolumeMode`, `*PathType`, `*DeletionPropagation`, ...) are
# left out: their empty value is invalid, and dropping it lets the default apply instead.
EMPTY_STRING_IS_SET: dict[str, list[str]] = {
    "api::admissionregistration::v1::ServiceReference": ["path"],
    "api::admissionregistration::v1::WebhookClientConfig": ["url"],
    "api::batch::v1::CronJobSpec": ["time_zone"],
    "api::batch::v1::JobSpec": ["managed_by"],
    "api::batch::v1::JobStatus": ["failed_indexes"],
    "api::batch::v1::PodFailurePolicyOnExitCodesRequirement": ["container_name"],
    "api::batch::v1::SuccessPolicyRule": ["succeeded_indexes"],
    "api::coordination::v1::LeaseSpec": ["holder_identity", "preferred_holder"],
    "api::core::v1::AppArmorProfile": ["localhost_profile"],
    "api::core::v1::AzureDiskVolumeSource": ["fs_type"],
    "api::core::v1::AzureFilePersistentVolumeSource": ["secret_namespace"],
    "api::core::v1::CSIVolumeSource": ["fs_type"],
    "api::core::v1::ClusterTrustBundleProjection": ["name", "signer_name"],
    "api::core::v1::EndpointAddress": ["node_name"],
    "api::core::v1::EndpointPort": ["app_protocol"],
    "api::core::v1::GlusterfsPersistentVolumeSource": ["endpoints_namespace"],
    "api::core::v1::GrpcAction": ["service"],
    "api::core::v1::IscsiPersistentVolumeSource": ["initiator_name"],
    "api::core::v1::IscsiVolumeSource": ["initiator_name"],
    "api::core::v1::LocalVolumeSource": ["fs_type"],
    "api::core::v1::PersistentVolumeClaimSpec": ["storage_class_name", "volume_attributes_class_name"],
    "api::core::v1::PersistentVolumeClaimStatus": ["current_volume_attributes_class_name"],
    "api::core::v1::PersistentVolumeSpec": ["volume_attributes_class_name"],
    "api::core::v1::PodDnsConfigOption": ["value"],
    "api::core::v1::PodResourceClaim": ["resource_claim_name", "resource_claim_template_name"],
    "api::core::v1::PodResourceClaimStatus": ["resource_claim_name"],
    "api::core::v1::PodSpec": ["runtime_class_name"],
    "api::core::v1::PortStatus": ["error"],
    "api::core::v1::SeccompProfile": ["localhost_profile"],
    "api::core::v1::ServicePort": ["app_protocol"],
    "api::core::v1::ServiceSpec": ["load_balancer_class", "traffic_distribution"],
    "api::core::v1::TypedLocalObjectReference": ["api_group"],
    "api::core::v1::TypedObjectReference": ["api_group", "namespace"],
    "api::core::v1::WindowsSecurityContextOptions": ["gmsa_credential_spec", "gmsa_credential_spec_name", "run_as_user_name"],
    "api::discovery::v1::Endpoint": ["hostname", "node_name", "zone"],
    "api::discovery::v1::EndpointPort": ["app_protocol", "name"],
    "api::networking::v1::IngressClassParametersReference": ["a_pi_group", "namespace", "scope"],
    "api::networking::v1::IngressPortStatus": ["error"],
    "api::networking::v1::IngressSpec": ["ingress_class_name"],
    "api::storage::v1::VolumeAttachmentSource": ["persistent_volume_name"],
    "apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinitionVersion": ["deprecation_warning"],
    "apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceSubresourceScale": ["label_selector_path"],
    "apiextensions_apiserver::pkg::apis::apiextensions::v1::JsonSchemaProps": ["ref", "x_kubernetes_list_type", "x_kubernetes_map_type"],
    "apiextensions_apiserver::pkg::apis::apiextensions::v1::ServiceReference": ["path"],
    "apiextensions_apiserver::pkg::apis::apiextensions::v1::WebhookClientConfig": ["url"],
}


def fail(message: str) -> NoReturn:
    print(f"gen-protobuf-json: error: {message}", file=sys.stderr)
    sys.exit(1)


def find_crate_src(name: str, version: str) -> str:
    cargo_home = os.environ.get("CARGO_HOME") or os.path.expanduser("~/.cargo")
    pattern = os.path.join(cargo_home, "registry", "src", "*", f"{name}-{version}", "src")
    matches = sorted(glob.glob(pattern))
    if not matches:
        fail(f"{name} {version} not found at {pattern}; run `cargo fetch` first")
    return matches[0]


# ---------------------------------------------------------------------------
# k8s-pb


@dataclass
class PbField:
    name: str  # Rust field name without `r#`
    rust_name: str  # as written in Rust (`r#type`)
    kind: str  # string, bool, int32, int64, double, bytes, message, map
    repeated: bool
    tag: int
    # The message path, for kind == "message" and for maps of messages.
    message: str | None = None
    # For kind == "map": the value kind ("string", "bytes" or "message").
    map_value: str | None = None
    boxed: bool = False


@dataclass
class PbMessage:
    path: str  # e.g. api::core::v1::Pod
    module: str  # e.g. api::core::v1
    name: str  # e.g. Pod
    fields: list[PbField] = field(default_factory=list)


# Every parsed message by path; filled by parse_k8s_pb.
_MESSAGES: dict[str, PbMessage] = {}

STRUCT_RE = re.compile(r"^pub struct (\w+) \{\n(.*?)^\}", re.S | re.M)
EMPTY_STRUCT_RE = re.compile(r"^pub struct (\w+) \{\}", re.M)
FIELD_RE = re.compile(
    r"#\[prost\((?P<attr>[^\]]*)\)\]\s*pub (?P<name>(?:r#)?\w+):\s*(?P<ty>.*?),\s*(?=#\[prost|\Z)",
    re.S,
)
FIELD_KINDS = {"string", "bool", "int32", "int64", "double", "bytes", "message"}


def resolve_type_path(module: str, ty: str) -> str:
    """Resolves a Rust type path written inside `module` to a crate path."""
    ty = ty.strip()
    parts = module.split("::")
    segments = ty.split("::")
    while segments and segments[0] == "super":
        segments.pop(0)
        parts.pop()
    if segments and segments[0] == "crate":
        segments.pop(0)
        parts = []
    return "::".join(parts + segments)


def strip_wrappers(ty: str) -> str:
    # rustfmt leaves a trailing comma inside generics it breaks across lines.
    ty = re.sub(r"\s+", "", ty).replace(",>", ">")
    for wrapper in ("::core::option::Option<", "::prost::alloc::vec::Vec<", "::prost::alloc::boxed::Box<"):
        while ty.startswith(wrapper):
            ty = ty[len(wrapper) : -1]
    return ty


def parse_field(module: str, attr: str, rust_name: str, ty: str) -> PbField:
    attr_parts = [p.strip() for p in attr.split(",")]
    head = attr_parts[0]
    tag_match = re.search(r'tag = "(\d+)"', attr)
    if not tag_match:
        fail(f"{module}: field {rust_name} has no tag: {attr}")
    tag = int(tag_match.group(1))
    name = rust_name.removeprefix("r#")
    if head.startswith("btree_map") or head.startswith("map") or head.startswith("hash_map"):
        kv = re.match(r'\w+ = "(\w+), (\w+)"', attr)
        if not kv or kv.group(1) != "string":
            fail(f"{module}: unsupported map field {rust_name}: {attr}")
        value_kind = kv.group(2)
        f = PbField(name, rust_name, "map", False, tag, map_value=value_kind)
        if value_kind == "message":
            inner = re.sub(r"\s+", "", ty).replace(",>", ">")
            m = re.match(r".*BTreeMap<::prost::alloc::string::String,(.*)>$", inner)
            if not m:
                fail(f"{module}: cannot parse map type of {rust_name}: {ty}")
            f.message = resolve_type_path(module, m.group(1))
        elif value_kind not in ("string", "bytes"):
            fail(f"{module}: unsupported map value kind {value_kind} in {rust_name}")
        return f
    kind = head.split(" ")[0]
    if kind not in FIELD_KINDS:
        fail(f"{module}: unsupported prost field kind {kind!r} in {rust_name}")
    labels = set(attr_parts[1:])
    repeated = "repeated" in labels
    if not repeated and "optional" not in labels:
        fail(f"{module}: field {rust_name} is neither optional nor repeated: {attr}")
    f = PbField(name, rust_name, kind, repeated, tag, boxed="boxed" in labels)
    if kind == "message":
        f.message = resolve_type_path(module, strip_wrappers(ty))
    return f


def parse_k8s_pb(src: str) -> dict[str, PbMessage]:
    messages: dict[str, PbMessage] = {}
    for path in sorted(glob.glob(os.path.join(src, "**", "mod.rs"), recursive=True)):
        rel = os.path.relpath(os.path.dirname(path), src)
        if rel == ".":
            continue
        module = rel.replace(os.sep, "::")
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
        # Doc comments can contain anything; drop them before matching.
        code = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("//"))
        for m in EMPTY_STRUCT_RE.finditer(code):
            msg = PbMessage(f"{module}::{m.group(1)}", module, m.group(1))
            messages[msg.path] = msg
        for m in STRUCT_RE.finditer(code):
            msg = PbMessage(f"{module}::{m.group(1)}", module, m.group(1))
            body = m.group(2)
            fields = list(FIELD_RE.finditer(body))
            if body.count("#[prost(") != len(fields):
                fail(f"{msg.path}: could not parse every field")
            for fm in fields:
                msg.fields.append(parse_field(module, fm.group("attr"), fm.group("name"), fm.group("ty")))
            messages[msg.path] = msg
    if not messages:
        fail(f"no prost messages found under {src}")
    _MESSAGES.update(messages)
    return messages


# ---------------------------------------------------------------------------
# k8s-openapi

# Names of the k8s-openapi version modules, in the order parse_k8s_openapi
# returns them (newest first).
_OPENAPI_VERSIONS: list[str] = []

DEFINITION_RE = re.compile(r"^// Generated from definition (\S+)$", re.M)
JSON_NAME_RE = re.compile(r'^\s*"([^"]+)" => Field::Key_\w+,$', re.M)


def openapi_version_dirs(src: str) -> list[str]:
    """Version modules (v1_33, v1_34, ...), newest first."""
    dirs = [d for d in os.listdir(src) if re.fullmatch(r"v1_\d+", d)]
    if not dirs:
        fail(f"no version modules in {src}")
    dirs.sort(key=lambda d: int(d.split("_")[1]), reverse=True)
    return [os.path.join(src, d) for d in dirs]


def definition_to_pb_key(definition: str) -> str:
    """`io.k8s.api.core.v1.Pod` -> `api::core::v1::pod` (message name lowercased)."""
    name = definition.removeprefix("io.k8s.")
    parts = name.replace("-", "_").split(".")
    return "::".join(parts[:-1] + [parts[-1].lower()])


def parse_k8s_openapi(src: str) -> list[dict[str, list[str]]]:
    """Per version module (newest first): pb key -> JSON field names."""
    result = []
    dirs = openapi_version_dirs(src)
    if not any(os.path.basename(d) == SERVED_OPENAPI_VERSION for d in dirs):
        fail(f"k8s-openapi has no {SERVED_OPENAPI_VERSION} module")
    for vdir in dirs:
        defs: dict[str, list[str]] = {}
        for path in sorted(glob.glob(os.path.join(vdir, "**", "*.rs"), recursive=True)):
            with open(path, encoding="utf-8") as fh:
                text = fh.read()
            d = DEFINITION_RE.search(text)
            if not d:
                continue
            defs[definition_to_pb_key(d.group(1))] = JSON_NAME_RE.findall(text)
        result.append(defs)
        _OPENAPI_VERSIONS.append(os.path.basename(vdir))
    return result



def normalize(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


def pb_key(path: str) -> str:
    module, _, name = path.rpartition("::")
    return f"{module}::{name.lower()}"


def inline_parents(path: str) -> list[str]:
    return sorted(parent for parent, fname in INLINE_FIELDS if inline_target(parent, fname) == path)


def inline_target(parent: str, fname: str) -> str:
    msg = _MESSAGES.get(parent)
    if msg is None:
        fail(f"INLINE_FIELDS names unknown message {parent}")
    for f in msg.fields:
        if f.name == fname:
            if f.kind != "message" or f.repeated or f.message is None:
                fail(f"INLINE_FIELDS entry {parent}.{fname} is not a singular message field")
            return f.message
    fail(f"INLINE_FIELDS names unknown field {parent}.{fname}")


def definitions_for(path: str, openapi: list[dict[str, list[str]]]) -> list[list[str]]:
    """JSON names of the k8s-openapi definition of `path`, newest version first.

    A message that only exists inlined into others (VolumeSource, ProbeHandler)
    has no definition of its own; its fields are named in its parents'.
    """
    key = pb_key(path)
    versions = [defs[key] for defs in openapi if key in defs]
    if versions:
        return versions
    parents = inline_parents(path)
    if not parents:
        fail(f"{path}: no k8s-openapi definition found (add it to HAND_WRITTEN if its JSON form is special)")
    merged: list[list[str]] = []
    for defs in openapi:
        names: set[str] = set()
        for parent in parents:
            names.update(defs.get(pb_key(parent), []))
        if names:
            merged.append(sorted(names))
    if not merged:
        fail(f"{path}: no k8s-openapi definition for it or its inlining parents {parents}")
    return merged


def json_names_for(msg: PbMessage, openapi: list[dict[str, list[str]]]) -> dict[str, str | None]:
    """prost field name -> JSON field name (`None` for inlined fields).

    Fails on any field that cannot be matched.
    """
    versions = definitions_for(msg.path, openapi)
    names: dict[str, str | None] = {}
    for f in msg.fields:
        if (msg.path, f.name) in INLINE_FIELDS:
            names[f.name] = None
            continue
        override = FIELD_NAME_OVERRIDES.get((msg.path, f.name))
        if override is not None:
            names[f.name] = override
            continue
        found = None
        for json_names in versions:
            candidates = sorted({j for j in json_names if normalize(j) == normalize(f.name)})
            if len(candidates) > 1:
                fail(f"{msg.path}.{f.name}: ambiguous JSON names {candidates}")
            if candidates:
                found = candidates[0]
                break
        if found is None:
            fail(
                f"{msg.path}.{f.name}: no JSON field with normalized name "
                f"{normalize(f.name)!r} in k8s-openapi; if Go embeds this field with "
                "`json:\",inline\"` add it to INLINE_FIELDS, if it is a true name mismatch "
                "add it to FIELD_NAME_OVERRIDES"
            )
        names[f.name] = found
    return names


def produced_names(msg: PbMessage, messages: dict[str, PbMessage], openapi: list[dict[str, list[str]]]) -> set[str]:
    """The JSON names the conversion of `msg` can write, through inlined fields at any depth
    (admissionregistration `NamedRuleWithOperations` inlines `RuleWithOperations`, which
    inlines `Rule`)."""
    produced: set[str] = set()
    for fname, name in json_names_for(msg, openapi).items():
        if name is None:
            produced |= produced_names(messages[inline_target(msg.path, fname)], messages, openapi)
        else:
            produced.add(name)
    return produced


# ---------------------------------------------------------------------------
# reachability


def reachable(messages: dict[str, PbMessage]) -> list[str]:
    seen: set[str] = set()
    stack = [path for _, _, path in TOP_LEVEL_KINDS]
    while stack:
        path = stack.pop()
        if path in seen:
            continue
        if path not in messages:
            fail(f"message {path} not found in k8s-pb")
        seen.add(path)
        for f in messages[path].fields:
            if f.message is not None:
                stack.append(f.message)
    return sorted(seen)


# ---------------------------------------------------------------------------
# checks


def check_tables(messages: dict[str, PbMessage], reached: list[str], openapi: list[dict[str, list[str]]]) -> None:
    reached_set = set(reached)
    for path in sorted(HAND_WRITTEN):
        if path not in messages:
            fail(f"HAND_WRITTEN names unknown message {path}")
    for parent, fname in sorted(INLINE_FIELDS):
        child = inline_target(parent, fname)
        if child in HAND_WRITTEN:
            fail(f"INLINE_FIELDS entry {parent}.{fname} points at a hand-written message")
        parent_names = {normalize(n) for versions in definitions_for(parent, openapi) for n in versions}
        for child_field, json_name in json_names_for(messages[child], openapi).items():
            if json_name is not None and normalize(json_name) not in parent_names:
                fail(f"inlined field {child}.{child_field} ({json_name}) is not a JSON field of {parent}")
    for path, fnames in sorted(ZERO_IS_UNSET.items()):
        if path not in reached_set:
            fail(f"ZERO_IS_UNSET names {path}, which is not reachable")
        kinds = {f.name: f for f in messages[path].fields}
        for fname in fnames:
            f = kinds.get(fname)
            if f is None or f.kind not in ("bool", "int32", "int64", "double") or f.repeated:
                fail(f"ZERO_IS_UNSET entry {path}.{fname} is not a singular number or boolean field")
    served = openapi[_OPENAPI_VERSIONS.index(SERVED_OPENAPI_VERSION)]
    for path in reached:
        key = pb_key(path)
        if path in HAND_WRITTEN or key not in served:
            continue
        missing = sorted(set(served[key]) - produced_names(messages[path], messages, openapi) - NOT_IN_PROTOBUF)
        if missing:
            fail(f"{path}: k8s-openapi {SERVED_OPENAPI_VERSION} has JSON fields {missing} that no protobuf field produces")
    for path, fnames in sorted(EMPTY_STRING_IS_SET.items()):
        if path not in reached_set:
            fail(f"EMPTY_STRING_IS_SET names {path}, which is not reachable")
        kinds = {f.name: f for f in messages[path].fields}
        for fname in fnames:
            f = kinds.get(fname)
            if f is None or f.kind != "string" or f.repeated:
                fail(f"EMPTY_STRING_IS_SET entry {path}.{fname} is not a singular string field")
    for (path, fname), _ in sorted(FIELD_NAME_OVERRIDES.items()):
        if path not in messages or fname not in {f.name for f in messages[path].fields}:
            fail(f"FIELD_NAME_OVERRIDES names unknown field {path}.{fname}")


# ---------------------------------------------------------------------------
# emission


def module_alias(module: str) -> str:
    """`api::core::v1` -> `core_v1`, `apimachinery::pkg::util::intstr` -> `util_intstr`."""
    return "_".join(module.split("::")[-2:])


def rust_type(path: str) -> str:
    module, _, name = path.rpartition("::")
    return f"{module_alias(module)}::{name}"


def emit_field(msg: PbMessage, f: PbField, json_name: str | None) -> str:
    access = f"self.{f.rust_name}"
    if json_name is None:
        return f"o.inline({access}.as_ref());"
    key = json_name.replace("\\", "\\\\").replace('"', '\\"')
    if f.kind == "map":
        method = {"string": "string_map", "bytes": "bytes_map", "message": "message_map"}[f.map_value or ""]
        return f'o.{method}("{key}", &{access});'
    if f.repeated:
        method = {
            "string": "strings",
            "message": "messages",
            "int32": "scalars",
            "int64": "scalars",
            "bool": "scalars",
            "double": "scalars",
        }.get(f.kind)
        if method is None:
            fail(f"{msg.path}.{f.name}: repeated {f.kind} fields are not supported")
        return f'o.{method}("{key}", &{access});'
    if f.kind == "string":
        method = "set_string" if f.name in EMPTY_STRING_IS_SET.get(msg.path, []) else "string"
        return f'o.{method}("{key}", {access}.as_deref());'
    if f.kind == "bytes":
        return f'o.bytes("{key}", {access}.as_deref());'
    if f.kind == "message":
        deref = "as_deref" if f.boxed else "as_ref"
        return f'o.message("{key}", {access}.{deref}());'
    method = "nonzero" if f.name in ZERO_IS_UNSET.get(msg.path, []) else "scalar"
    return f'o.{method}("{key}", {access});'


def emit(messages: dict[str, PbMessage], reached: list[str], openapi: list[dict[str, list[str]]]) -> str:
    generated = [p for p in reached if p not in HAND_WRITTEN]
    used = set(generated) | {path for _, _, path in TOP_LEVEL_KINDS}
    modules = sorted({messages[p].module for p in used})
    aliases: dict[str, str] = {}
    for module in modules:
        alias = module_alias(module)
        if alias in aliases:
            fail(f"module alias {alias} is ambiguous: {aliases[alias]} and {module}")
        aliases[alias] = module

    out: list[str] = []
    w = out.append
    w("// @generated by tools/gen-protobuf-json.py; do not edit")
    w("")
    w(f"//! `ToJson` for the k8s-pb {K8S_PB_VERSION} messages reachable from the top-level kinds in")
    w("//! `decode_object`, with JSON field names taken from k8s-openapi.")
    w("")
    for alias, module in sorted(aliases.items()):
        w(f"use k8s_pb::{module} as {alias};")
    w("use serde_json::Value;")
    w("")
    w("use super::{Obj, ToJson, decode_as};")
    w("")
    w("/// Decodes `raw` as the message of `apiVersion`/`kind` and converts it to JSON.")
    w("///")
    w("/// Returns `None` for a type this module does not know.")
    w("pub(super) fn decode_object(")
    w("    api_version: &str,")
    w("    kind: &str,")
    w("    raw: &[u8],")
    w(") -> Option<Result<Value, prost::DecodeError>> {")
    w("    let value = match (api_version, kind) {")
    any_version = []
    for api_version, kind, path in TOP_LEVEL_KINDS:
        if api_version is None:
            any_version.append((kind, path))
            continue
        w(f'        ("{api_version}", "{kind}") => decode_as::<{rust_type(path)}>(raw),')
    for kind, path in any_version:
        w(f'        (_, "{kind}") => decode_as::<{rust_type(path)}>(raw),')
    w("        _ => return None,")
    w("    };")
    w("    Some(value)")
    w("}")
    w("")
    w("/// The `(apiVersion, kind)` of every type `decode_object` knows; `None` is any `apiVersion`.")
    w("#[cfg(test)]")
    w("pub(super) const KINDS: &[(Option<&str>, &str)] = &[")
    for api_version, kind, _ in TOP_LEVEL_KINDS:
        version = "None" if api_version is None else f'Some("{api_version}")'
        w(f'    ({version}, "{kind}"),')
    w("];")

    for path in generated:
        msg = messages[path]
        names = json_names_for(msg, openapi)
        w("")
        w(f"impl ToJson for {rust_type(path)} {{")
        w("    fn to_json(&self) -> Value {")
        if not msg.fields:
            w("        Obj::new().finish()")
        else:
            w("        let mut o = Obj::new();")
            for f in msg.fields:
                w("        " + emit_field(msg, f, names[f.name]))
            w("        o.finish()")
        w("    }")
        w("}")
    return "\n".join(out) + "\n"


def rustfmt(source: str) -> str:
    import subprocess

    try:
        result = subprocess.run(
            ["rustfmt", "--edition", "2024", "--emit", "stdout"],
            input=source,
            capture_output=True,
            text=True,
            check=False,
        )
    except FileNotFoundError:
        fail("rustfmt not found on PATH (install it with `rustup component add rustfmt`)")
    if result.returncode != 0:
        fail(f"rustfmt failed:\n{result.stderr}")
    return result.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="fail if the generated file is out of date")
    args = parser.parse_args()

    messages = parse_k8s_pb(find_crate_src("k8s-pb", K8S_PB_VERSION))
    openapi = parse_k8s_openapi(find_crate_src("k8s-openapi", K8S_OPENAPI_VERSION))
    reached = reachable(messages)
    check_tables(messages, reached, openapi)
    source = rustfmt(emit(messages, reached, openapi))

    if args.check:
        try:
            with open(OUTPUT, encoding="utf-8") as fh:
                current = fh.read()
        except FileNotFoundError:
            current = ""
        if current != source:
            fail(f"{os.path.relpath(OUTPUT, REPO_ROOT)} is out of date; run tools/gen-protobuf-json.py")
        return
    with open(OUTPUT, "w", encoding="utf-8") as fh:
        fh.write(source)
    count = sum(1 for p in reached if p not in HAND_WRITTEN)
    print(f"wrote {os.path.relpath(OUTPUT, REPO_ROOT)}: {count} messages", file=sys.stderr)


if __name__ == "__main__":
    main()
