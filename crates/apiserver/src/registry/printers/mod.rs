//! What `kubectl get` prints for each built-in kind: the `columnDefinitions` of a `meta.k8s.io/v1`
//! `Table` and the `cells` of one object's row.
//!
//! kubectl asks for `Accept: application/json;as=Table;v=v1;g=meta.k8s.io` and prints whatever the
//! server sends, so the columns and their formatting live here, on the server, as they do in
//! Kubernetes. Start with [`builtin`] and [`TablePrinter`]: a printer is picked from `(group, kind)`, and
//! each printer's cell function returns an array whose length is its column list's length, so a row
//! can never be wider or narrower than its header.
//!
//! # What this module does not do
//!
//! - The Table envelope (`metadata`, `rows[].object`, `includeObject`, watch events) belongs to the
//!   caller.
//! - Custom resources' `additionalPrinterColumns` are printed by their own [`TablePrinter`]
//!   (`registry/crd/custom.rs`); every [`Resource`](super::Resource) holds exactly one printer.
//! - There is no `-o wide` switch: like a real API server, every row carries every column and
//!   kubectl hides the `priority: 1` ones unless asked.
//!
//! # Rules followed (spec §10.1, and Kubernetes' own printers)
//!
//! - Age cells are pre-rendered strings (`human_duration`); `<unknown>` when the timestamp is
//!   absent or unparseable, `<invalid>` when it lies more than a second in the future.
//! - Counting columns (`Data`, `Secrets`, `Up-to-date`, `Desired`, event `Count`, …) carry JSON
//!   numbers and are declared `integer`. Kubernetes declares several of them `string` while still
//!   sending numbers; kubectl prints both alike, and here the declared type always matches the cell.
//! - Pod `Restarts` is a string, because it reads `3 (5m ago)` once a container has restarted.
//! - Missing or wrongly typed fields never panic: they read as empty, zero or absent.
//! - RBAC kinds, CRDs and unknown kinds get `Name` plus `Created At` (type `date`, the RFC 3339
//!   creation time in UTC), as kinds without a dedicated printer do in Kubernetes.

use std::sync::Arc;

use serde_json::Value;

mod apps;
mod autoscaling;
mod batch;
mod cluster;
mod coordination;
mod core;
mod nodes;
mod policy;
mod rbac;
#[cfg(test)]
mod tests;

use self::core::*;
use apps::*;
use autoscaling::*;
use batch::*;
use cluster::*;
use coordination::*;
use nodes::*;
use policy::*;
use rbac::*;

/// One column of a Table (a `meta.k8s.io/v1` `TableColumnDefinition`).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub(crate) struct Column {
    /// Header text; kubectl prints it upper-cased.
    pub(crate) name: &'static str,
    /// OpenAPI type of the column's cells: `string`, `integer`, `boolean` or `date` here.
    #[serde(rename = "type")]
    pub(crate) kind: &'static str,
    /// OpenAPI format: `name` marks the column holding the object's name, otherwise empty.
    pub(crate) format: &'static str,
    /// A short human-readable description of the column.
    pub(crate) description: &'static str,
    /// 0 for default columns, 1 for columns kubectl shows only with `-o wide`.
    pub(crate) priority: u8,
}

/// What prints one resource's objects as the rows of a `meta.k8s.io` `Table`: one per
/// resource, held by its [`Resource`](super::Resource), so rendering a Table never asks which
/// kind of printer a resource has.
pub trait TablePrinter: Send + Sync {
    /// The `columnDefinitions`.
    fn columns(&self) -> Value;
    /// The cells of `obj`'s row, as many as [`TablePrinter::columns`]; `now` is the server's
    /// clock in seconds since the Unix epoch.
    fn cells(&self, obj: &Value, now: i64) -> Vec<Value>;
}

/// The printer of a built-in kind.
struct Builtin(Printer);

impl TablePrinter for Builtin {
    fn columns(&self) -> Value {
        serde_json::to_value(self.0.columns()).unwrap_or(Value::Null)
    }

    fn cells(&self, obj: &Value, now: i64) -> Vec<Value> {
        self.0.cells(obj, now)
    }
}

/// The printer of the built-in kind `kind` of `group` (`""` for core); kinds without a
/// dedicated printer get `Name` and `Created At`.
pub fn builtin(group: &str, kind: &str) -> Arc<dyn TablePrinter> {
    Arc::new(Builtin(Printer::of(group, kind)))
}

/// The columns for a built-in kind (`group` is `""` for the core group), e.g. `("apps",
/// "Deployment")`. Kinds without a dedicated printer get `Name` and `Created At`.
#[cfg(test)]
pub(crate) fn columns(group: &str, kind: &str) -> Vec<Column> {
    Printer::of(group, kind).columns().to_vec()
}

/// The cells of one object's row, in the order of [`columns`] for the same `group` and `kind`.
///
/// `now` is the server's clock in seconds since the Unix epoch; it is what Age-like cells are
/// measured against. Fields missing from `obj` read as empty, so this never panics.
#[cfg(test)]
pub(crate) fn cells(group: &str, kind: &str, obj: &Value, now: i64) -> Vec<Value> {
    Printer::of(group, kind).cells(obj, now)
}

/// Renders a duration in whole seconds the way kubectl's Age column does.
///
/// Precision shrinks as the duration grows: seconds below 2 minutes (`119s`), minutes and seconds
/// below 10 minutes (`9m59s`, `2m`), minutes below 3 hours (`179m`), hours and minutes below 8 hours
/// (`7h59m`), hours below 48 hours (`47h`), days and hours below 8 days (`7d23h`), days below 2 years
/// (`729d`), years and days below 8 years (`7y364d`), then years (`8y`); a zero remainder is left
/// out. A duration of -1 s counts as clock skew and reads `0s`; anything further in the future reads
/// `<invalid>`. These are the rules of Kubernetes' `duration.HumanDuration`.
pub(crate) fn human_duration(seconds: i64) -> String {
    if seconds < -1 {
        return "<invalid>".to_owned();
    }
    if seconds < 0 {
        return "0s".to_owned();
    }
    if seconds < 2 * 60 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    if minutes < 10 {
        return unit_and_remainder(minutes, "m", seconds % 60, "s");
    }
    if minutes < 3 * 60 {
        return format!("{minutes}m");
    }
    let hours = seconds / 3600;
    if hours < 8 {
        return unit_and_remainder(hours, "h", minutes % 60, "m");
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    let days = hours / 24;
    if hours < 8 * 24 {
        return unit_and_remainder(days, "d", hours % 24, "h");
    }
    if hours < 2 * 365 * 24 {
        return format!("{days}d");
    }
    let years = days / 365;
    if hours < 8 * 365 * 24 {
        return unit_and_remainder(years, "y", days % 365, "d");
    }
    format!("{years}y")
}

/// The Age cell for an RFC 3339 timestamp, measured against `now` (seconds since the Unix epoch):
/// [`human_duration`] of the elapsed whole seconds, or `<unknown>` if the timestamp is absent or
/// unparseable. Fractional seconds (MicroTime) are accepted.
pub(crate) fn age(created: Option<&str>, now: i64) -> String {
    match created.and_then(parse_time) {
        Some(time) => since(time, now),
        None => "<unknown>".to_owned(),
    }
}

/// `"{major}{unit}"`, followed by `"{minor}{minor_unit}"` unless `minor` is zero.
fn unit_and_remainder(major: i64, unit: &str, minor: i64, minor_unit: &str) -> String {
    if minor == 0 {
        format!("{major}{unit}")
    } else {
        format!("{major}{unit}{minor}{minor_unit}")
    }
}

/// Parses an RFC 3339 timestamp (with or without fractional seconds).
fn parse_time(text: &str) -> Option<jiff::Timestamp> {
    text.parse().ok()
}

/// The human duration from `time` to `now`, truncating to whole seconds toward zero.
fn since(time: jiff::Timestamp, now: i64) -> String {
    const NANOS_PER_SECOND: i128 = 1_000_000_000;
    let elapsed = (i128::from(now) * NANOS_PER_SECOND - time.as_nanosecond()) / NANOS_PER_SECOND;
    let seconds = i64::try_from(elapsed).unwrap_or(if elapsed < 0 { i64::MIN } else { i64::MAX });
    human_duration(seconds)
}

// ---------------------------------------------------------------------------------------------
// Printer selection
// ---------------------------------------------------------------------------------------------

/// Which printer a `(group, kind)` pair uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Printer {
    /// core/v1 Namespace.
    Namespace,
    /// core/v1 ConfigMap.
    ConfigMap,
    /// core/v1 Secret.
    Secret,
    /// core/v1 ServiceAccount.
    ServiceAccount,
    /// coordination.k8s.io/v1 Lease.
    Lease,
    /// core/v1 Event.
    CoreEvent,
    /// events.k8s.io/v1 Event: the same columns, read from that schema's field names.
    EventsEvent,
    /// core/v1 Pod.
    Pod,
    /// core/v1 Service.
    Service,
    /// apps/v1 Deployment.
    Deployment,
    /// apps/v1 ReplicaSet.
    ReplicaSet,
    /// core/v1 Node.
    Node,
    /// core/v1 PersistentVolume.
    PersistentVolume,
    /// core/v1 PersistentVolumeClaim.
    PersistentVolumeClaim,
    /// core/v1 ReplicationController.
    ReplicationController,
    /// apps/v1 StatefulSet.
    StatefulSet,
    /// apps/v1 DaemonSet.
    DaemonSet,
    /// apps/v1 ControllerRevision.
    ControllerRevision,
    /// batch/v1 Job.
    Job,
    /// batch/v1 CronJob.
    CronJob,
    /// policy/v1 PodDisruptionBudget.
    PodDisruptionBudget,
    /// autoscaling/v1 and v2 HorizontalPodAutoscaler.
    HorizontalPodAutoscaler,
    /// scheduling.k8s.io/v1 PriorityClass.
    PriorityClass,
    /// storage.k8s.io/v1 StorageClass.
    StorageClass,
    /// networking.k8s.io/v1 Ingress.
    Ingress,
    /// core/v1 Endpoints.
    Endpoints,
    /// networking.k8s.io/v1 IngressClass.
    IngressClass,
    /// networking.k8s.io/v1 NetworkPolicy.
    NetworkPolicy,
    /// node.k8s.io/v1 RuntimeClass.
    RuntimeClass,
    /// core/v1 ResourceQuota.
    ResourceQuota,
    /// core/v1 PodTemplate.
    PodTemplate,
    /// discovery.k8s.io/v1 EndpointSlice.
    EndpointSlice,
    /// certificates.k8s.io/v1 CertificateSigningRequest.
    CertificateSigningRequest,
    /// rbac.authorization.k8s.io/v1 RoleBinding and ClusterRoleBinding.
    Binding,
    /// Everything else: `Name` and `Created At`.
    Generic,
}

impl Printer {
    /// The printer for a kind; `group` is `""` for the core group.
    fn of(group: &str, kind: &str) -> Self {
        match (group, kind) {
            ("", "Namespace") => Self::Namespace,
            ("", "ConfigMap") => Self::ConfigMap,
            ("", "Secret") => Self::Secret,
            ("", "ServiceAccount") => Self::ServiceAccount,
            ("", "Event") => Self::CoreEvent,
            ("", "Pod") => Self::Pod,
            ("", "Service") => Self::Service,
            ("coordination.k8s.io", "Lease") => Self::Lease,
            ("events.k8s.io", "Event") => Self::EventsEvent,
            ("apps", "Deployment") => Self::Deployment,
            ("apps", "ReplicaSet") => Self::ReplicaSet,
            ("", "Node") => Self::Node,
            ("", "PersistentVolume") => Self::PersistentVolume,
            ("", "PersistentVolumeClaim") => Self::PersistentVolumeClaim,
            ("", "ReplicationController") => Self::ReplicationController,
            ("apps", "StatefulSet") => Self::StatefulSet,
            ("apps", "DaemonSet") => Self::DaemonSet,
            ("apps", "ControllerRevision") => Self::ControllerRevision,
            ("batch", "Job") => Self::Job,
            ("batch", "CronJob") => Self::CronJob,
            ("policy", "PodDisruptionBudget") => Self::PodDisruptionBudget,
            ("autoscaling", "HorizontalPodAutoscaler") => Self::HorizontalPodAutoscaler,
            ("scheduling.k8s.io", "PriorityClass") => Self::PriorityClass,
            ("storage.k8s.io", "StorageClass") => Self::StorageClass,
            ("networking.k8s.io", "Ingress") => Self::Ingress,
            ("", "Endpoints") => Self::Endpoints,
            ("networking.k8s.io", "IngressClass") => Self::IngressClass,
            ("networking.k8s.io", "NetworkPolicy") => Self::NetworkPolicy,
            ("node.k8s.io", "RuntimeClass") => Self::RuntimeClass,
            ("", "ResourceQuota") => Self::ResourceQuota,
            ("", "PodTemplate") => Self::PodTemplate,
            ("discovery.k8s.io", "EndpointSlice") => Self::EndpointSlice,
            ("certificates.k8s.io", "CertificateSigningRequest") => Self::CertificateSigningRequest,
            ("rbac.authorization.k8s.io", "RoleBinding" | "ClusterRoleBinding") => Self::Binding,
            _ => Self::Generic,
        }
    }

    /// This printer's columns.
    fn columns(self) -> &'static [Column] {
        match self {
            Self::Namespace => &NAMESPACE,
            Self::ConfigMap => &CONFIG_MAP,
            Self::Secret => &SECRET,
            Self::ServiceAccount => &SERVICE_ACCOUNT,
            Self::Lease => &LEASE,
            Self::CoreEvent | Self::EventsEvent => &EVENT,
            Self::Pod => &POD,
            Self::Service => &SERVICE,
            Self::Deployment => &DEPLOYMENT,
            Self::ReplicaSet => &REPLICA_SET,
            Self::Node => &NODE,
            Self::PersistentVolume => &PERSISTENT_VOLUME,
            Self::PersistentVolumeClaim => &PERSISTENT_VOLUME_CLAIM,
            Self::ReplicationController => &REPLICATION_CONTROLLER,
            Self::StatefulSet => &STATEFUL_SET,
            Self::DaemonSet => &DAEMON_SET,
            Self::ControllerRevision => &CONTROLLER_REVISION,
            Self::Job => &JOB,
            Self::CronJob => &CRON_JOB,
            Self::PodDisruptionBudget => &POD_DISRUPTION_BUDGET,
            Self::HorizontalPodAutoscaler => &HORIZONTAL_POD_AUTOSCALER,
            Self::PriorityClass => &PRIORITY_CLASS,
            Self::StorageClass => &STORAGE_CLASS,
            Self::Ingress => &INGRESS,
            Self::Endpoints => &ENDPOINTS,
            Self::IngressClass => &INGRESS_CLASS,
            Self::NetworkPolicy => &NETWORK_POLICY,
            Self::RuntimeClass => &RUNTIME_CLASS,
            Self::ResourceQuota => &RESOURCE_QUOTA,
            Self::PodTemplate => &POD_TEMPLATE,
            Self::EndpointSlice => &ENDPOINT_SLICE,
            Self::CertificateSigningRequest => &CERTIFICATE_SIGNING_REQUEST,
            Self::Binding => &BINDING,
            Self::Generic => &GENERIC,
        }
    }

    /// This printer's row for `obj`; always as long as [`Printer::columns`].
    fn cells(self, obj: &Value, now: i64) -> Vec<Value> {
        match self {
            Self::Namespace => namespace_cells(obj, now).into(),
            Self::ConfigMap => config_map_cells(obj, now).into(),
            Self::Secret => secret_cells(obj, now).into(),
            Self::ServiceAccount => service_account_cells(obj, now).into(),
            Self::Lease => lease_cells(obj, now).into(),
            Self::CoreEvent => event_cells(obj, now, &CORE_EVENT_FIELDS).into(),
            Self::EventsEvent => event_cells(obj, now, &EVENTS_EVENT_FIELDS).into(),
            Self::Pod => pod_cells(obj, now).into(),
            Self::Service => service_cells(obj, now).into(),
            Self::Deployment => deployment_cells(obj, now).into(),
            Self::ReplicaSet => replica_set_cells(obj, now).into(),
            Self::Node => node_cells(obj, now).into(),
            Self::PersistentVolume => persistent_volume_cells(obj, now).into(),
            Self::PersistentVolumeClaim => persistent_volume_claim_cells(obj, now).into(),
            Self::ReplicationController => replication_controller_cells(obj, now).into(),
            Self::StatefulSet => stateful_set_cells(obj, now).into(),
            Self::DaemonSet => daemon_set_cells(obj, now).into(),
            Self::ControllerRevision => controller_revision_cells(obj, now).into(),
            Self::Job => job_cells(obj, now).into(),
            Self::CronJob => cron_job_cells(obj, now).into(),
            Self::PodDisruptionBudget => pod_disruption_budget_cells(obj, now).into(),
            Self::HorizontalPodAutoscaler => horizontal_pod_autoscaler_cells(obj, now).into(),
            Self::PriorityClass => priority_class_cells(obj, now).into(),
            Self::StorageClass => storage_class_cells(obj, now).into(),
            Self::Ingress => ingress_cells(obj, now).into(),
            Self::Endpoints => endpoints_cells(obj, now).into(),
            Self::IngressClass => ingress_class_cells(obj, now).into(),
            Self::NetworkPolicy => network_policy_cells(obj, now).into(),
            Self::RuntimeClass => runtime_class_cells(obj, now).into(),
            Self::ResourceQuota => resource_quota_cells(obj, now).into(),
            Self::PodTemplate => pod_template_cells(obj, now).into(),
            Self::EndpointSlice => endpoint_slice_cells(obj, now).into(),
            Self::CertificateSigningRequest => certificate_signing_request_cells(obj, now).into(),
            Self::Binding => binding_cells(obj, now).into(),
            Self::Generic => generic_cells(obj).into(),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Column definitions
// ---------------------------------------------------------------------------------------------

/// A default text column.
const fn shown(name: &'static str, description: &'static str) -> Column {
    Column {
        name,
        kind: "string",
        format: "",
        description,
        priority: 0,
    }
}

/// A default column of whole numbers.
const fn counted(name: &'static str, description: &'static str) -> Column {
    Column {
        kind: "integer",
        ..shown(name, description)
    }
}

/// A text column shown only with `-o wide`.
const fn wide(name: &'static str, description: &'static str) -> Column {
    Column {
        priority: 1,
        ..shown(name, description)
    }
}

/// The object's name, marked with `format: name`.
const NAME: Column = Column {
    format: "name",
    ..shown("Name", "Name of the object, unique within its namespace.")
};

/// Time since the object was created.
const AGE: Column = shown("Age", "Time since the object was created.");

/// Columns of kinds without a dedicated printer.
const GENERIC: [Column; 2] = [
    NAME,
    Column {
        kind: "date",
        ..shown("Created At", "When the object was created (RFC 3339, UTC).")
    },
];

// ---------------------------------------------------------------------------------------------
// Reading JSON leniently
// ---------------------------------------------------------------------------------------------

/// The value at `path` through nested objects; `None` if absent, `null`, or not reachable.
fn at<'a>(value: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter()
        .try_fold(value, |value, key| value.get(key))
        .filter(|value| !value.is_null())
}

/// The string at `path`, or `""`.
fn text<'a>(value: &'a Value, path: &[&str]) -> &'a str {
    at(value, path).and_then(Value::as_str).unwrap_or("")
}

/// The non-empty string at `path`, if any.
fn non_empty<'a>(value: &'a Value, path: &[&str]) -> Option<&'a str> {
    Some(text(value, path)).filter(|text| !text.is_empty())
}

/// The integer at `path`, or 0.
fn int(value: &Value, path: &[&str]) -> i64 {
    at(value, path).and_then(Value::as_i64).unwrap_or(0)
}

/// The boolean at `path`, or `false`.
fn flag(value: &Value, path: &[&str]) -> bool {
    at(value, path).and_then(Value::as_bool).unwrap_or(false)
}

/// The array at `path`, or an empty slice.
fn list<'a>(value: &'a Value, path: &[&str]) -> &'a [Value] {
    at(value, path)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// The number of keys of the object at `path`, or 0.
fn key_count(value: &Value, path: &[&str]) -> usize {
    at(value, path)
        .and_then(Value::as_object)
        .map_or(0, serde_json::Map::len)
}

/// `metadata.name`, or `""`.
fn name(obj: &Value) -> Value {
    Value::from(text(obj, &["metadata", "name"]))
}

/// The Age cell from `metadata.creationTimestamp`.
fn age_cell(obj: &Value, now: i64) -> Value {
    Value::from(age(
        at(obj, &["metadata", "creationTimestamp"]).and_then(Value::as_str),
        now,
    ))
}

/// The strings of the array at `path`, skipping anything that is not a string.
fn strings<'a>(value: &'a Value, path: &[&str]) -> Vec<&'a str> {
    list(value, path).iter().filter_map(Value::as_str).collect()
}

// ---------------------------------------------------------------------------------------------
// Simple kinds
// ---------------------------------------------------------------------------------------------

/// `Name`, `Created At`: the creation time normalised to RFC 3339 in UTC, the raw text if it does
/// not parse, and the zero time Kubernetes prints when it is missing.
fn generic_cells(obj: &Value) -> [Value; GENERIC.len()] {
    let created = match at(obj, &["metadata", "creationTimestamp"]).and_then(Value::as_str) {
        Some(raw) => parse_time(raw).map_or_else(
            || raw.to_owned(),
            |time| time.strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
        ),
        None => "0001-01-01T00:00:00Z".to_owned(),
    };
    [name(obj), Value::from(created)]
}
