//! What `kubectl get` prints for each built-in kind: the `columnDefinitions` of a `meta.k8s.io/v1`
//! `Table` and the `cells` of one object's row.
//!
//! kubectl asks for `Accept: application/json;as=Table;v=v1;g=meta.k8s.io` and prints whatever the
//! server sends, so the columns and their formatting live here, on the server, as they do in
//! Kubernetes. Start with [`columns`] and [`cells`]; both pick a printer from `(group, kind)`, and
//! each printer's cell function returns an array whose length is its column list's length, so a row
//! can never be wider or narrower than its header.
//!
//! # What this module does not do
//!
//! - The Table envelope (`metadata`, `rows[].object`, `includeObject`, watch events) belongs to the
//!   caller.
//! - Custom resources with `additionalPrinterColumns` are printed elsewhere; a CRD-served kind that
//!   reaches this module gets the generic `Name`, `Created At` pair.
//! - There is no `-o wide` switch: like a real API server, every row carries every column and
//!   kubectl hides the `priority: 1` ones unless asked.
//!
//! # Rules followed (spec §10.1, and Kubernetes' own printers)
//!
//! - Age cells are pre-rendered strings ([`human_duration`]); `<unknown>` when the timestamp is
//!   absent or unparseable, `<invalid>` when it lies more than a second in the future.
//! - Counting columns (`Data`, `Secrets`, `Up-to-date`, `Desired`, event `Count`, …) carry JSON
//!   numbers and are declared `integer`. Kubernetes declares several of them `string` while still
//!   sending numbers; kubectl prints both alike, and here the declared type always matches the cell.
//! - Pod `Restarts` is a string, because it reads `3 (5m ago)` once a container has restarted.
//! - Missing or wrongly typed fields never panic: they read as empty, zero or absent.
//! - RBAC kinds, CRDs and unknown kinds get `Name` plus `Created At` (type `date`, the RFC 3339
//!   creation time in UTC), as kinds without a dedicated printer do in Kubernetes.

use serde_json::Value;

/// One column of a Table (a `meta.k8s.io/v1` `TableColumnDefinition`).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub(crate) struct Column {
    /// Header text; kubectl prints it upper-cased.
    pub(crate) name: &'static str,
    /// OpenAPI type of the column's cells: `string`, `integer` or `date` here.
    #[serde(rename = "type")]
    pub(crate) kind: &'static str,
    /// OpenAPI format: `name` marks the column holding the object's name, otherwise empty.
    pub(crate) format: &'static str,
    /// A short human-readable description of the column.
    pub(crate) description: &'static str,
    /// 0 for default columns, 1 for columns kubectl shows only with `-o wide`.
    pub(crate) priority: u8,
}

/// The columns for a built-in kind (`group` is `""` for the core group), e.g. `("apps",
/// "Deployment")`. Kinds without a dedicated printer get `Name` and `Created At`.
pub(crate) fn columns(group: &str, kind: &str) -> Vec<Column> {
    Printer::of(group, kind).columns().to_vec()
}

/// The cells of one object's row, in the order of [`columns`] for the same `group` and `kind`.
///
/// `now` is the server's clock in seconds since the Unix epoch; it is what Age-like cells are
/// measured against. Fields missing from `obj` read as empty, so this never panics.
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

/// Container names of a pod template (wide).
const CONTAINERS: Column = wide("Containers", "Names of the template's containers.");

/// Container images of a pod template (wide).
const IMAGES: Column = wide("Images", "Images of the template's containers.");

/// Label selector of the pods a workload manages (wide).
const WORKLOAD_SELECTOR: Column = wide("Selector", "Label selector of the managed pods.");

/// Columns of kinds without a dedicated printer.
const GENERIC: [Column; 2] = [
    NAME,
    Column {
        kind: "date",
        ..shown("Created At", "When the object was created (RFC 3339, UTC).")
    },
];

/// Namespace columns.
const NAMESPACE: [Column; 3] = [
    NAME,
    shown("Status", "Lifecycle phase of the namespace."),
    AGE,
];

/// ConfigMap columns.
const CONFIG_MAP: [Column; 3] = [
    NAME,
    counted("Data", "Number of keys in data and binaryData."),
    AGE,
];

/// Secret columns.
const SECRET: [Column; 4] = [
    NAME,
    shown("Type", "Kind of secret, which fixes its keys."),
    counted("Data", "Number of keys in data."),
    AGE,
];

/// ServiceAccount columns.
const SERVICE_ACCOUNT: [Column; 3] = [
    NAME,
    counted("Secrets", "Number of secrets the account lists."),
    AGE,
];

/// Lease columns.
const LEASE: [Column; 3] = [
    NAME,
    shown("Holder", "Identity currently holding the lease."),
    AGE,
];

/// RoleBinding and ClusterRoleBinding columns.
const BINDING: [Column; 6] = [
    NAME,
    shown("Role", "The role bound, as Kind/name."),
    AGE,
    wide("Users", "Users bound."),
    wide("Groups", "Groups bound."),
    wide(
        "ServiceAccounts",
        "Service accounts bound, as namespace/name.",
    ),
];

/// Event columns, shared by core/v1 and events.k8s.io/v1 Events.
const EVENT: [Column; 10] = [
    shown("Last Seen", "Time since the event last occurred."),
    shown("Type", "Normal or Warning."),
    shown("Reason", "Short machine-readable cause."),
    shown("Object", "The object it is about, as kind/name."),
    wide("Subobject", "Field path within that object."),
    wide("Source", "Who reported it, and on which host."),
    shown("Message", "Human-readable description."),
    wide("First Seen", "Time since the event first occurred."),
    Column {
        priority: 1,
        ..counted("Count", "How many times it occurred.")
    },
    Column {
        priority: 1,
        ..NAME
    },
];

/// Pod columns.
const POD: [Column; 9] = [
    NAME,
    shown("Ready", "Ready containers out of all containers."),
    shown("Status", "Summary of the pod's and its containers' state."),
    shown("Restarts", "Container restarts, and time since the last."),
    AGE,
    wide("IP", "The pod's first IP address."),
    wide("Node", "Node the pod is bound to."),
    wide("Nominated Node", "Node nominated by preemption."),
    wide("Readiness Gates", "Readiness gates met, out of all."),
];

/// Service columns.
const SERVICE: [Column; 7] = [
    NAME,
    shown("Type", "How the service is exposed."),
    shown("Cluster-IP", "Virtual IP inside the cluster."),
    shown("External-IP", "Addresses reachable from outside."),
    shown("Port(s)", "Exposed ports, with node ports."),
    AGE,
    wide("Selector", "Labels of the pods behind the service."),
];

/// Deployment columns.
const DEPLOYMENT: [Column; 8] = [
    NAME,
    shown("Ready", "Ready replicas out of desired replicas."),
    counted("Up-to-date", "Replicas running the latest template."),
    counted("Available", "Replicas available to serve."),
    AGE,
    CONTAINERS,
    IMAGES,
    WORKLOAD_SELECTOR,
];

/// ReplicaSet columns.
const REPLICA_SET: [Column; 8] = [
    NAME,
    counted("Desired", "Replicas asked for."),
    counted("Current", "Replicas that exist."),
    counted("Ready", "Replicas that are ready."),
    AGE,
    CONTAINERS,
    IMAGES,
    WORKLOAD_SELECTOR,
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

/// `Name`, `Status`, `Age`.
fn namespace_cells(obj: &Value, now: i64) -> [Value; NAMESPACE.len()] {
    [
        name(obj),
        Value::from(text(obj, &["status", "phase"])),
        age_cell(obj, now),
    ]
}

/// `Name`, `Data`, `Age`.
fn config_map_cells(obj: &Value, now: i64) -> [Value; CONFIG_MAP.len()] {
    let keys = key_count(obj, &["data"]) + key_count(obj, &["binaryData"]);
    [name(obj), Value::from(keys), age_cell(obj, now)]
}

/// `Name`, `Type`, `Data`, `Age`.
fn secret_cells(obj: &Value, now: i64) -> [Value; SECRET.len()] {
    [
        name(obj),
        Value::from(text(obj, &["type"])),
        Value::from(key_count(obj, &["data"])),
        age_cell(obj, now),
    ]
}

/// `Name`, `Secrets`, `Age`.
fn service_account_cells(obj: &Value, now: i64) -> [Value; SERVICE_ACCOUNT.len()] {
    [
        name(obj),
        Value::from(list(obj, &["secrets"]).len()),
        age_cell(obj, now),
    ]
}

/// `Name`, `Holder`, `Age`.
fn lease_cells(obj: &Value, now: i64) -> [Value; LEASE.len()] {
    [
        name(obj),
        Value::from(text(obj, &["spec", "holderIdentity"])),
        age_cell(obj, now),
    ]
}

fn binding_cells(obj: &Value, now: i64) -> [Value; BINDING.len()] {
    let subjects = |kind: &str| -> Value {
        let names: Vec<String> = obj
            .get("subjects")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|s| s.get("kind").and_then(Value::as_str) == Some(kind))
            .map(|s| {
                let name = s.get("name").and_then(Value::as_str).unwrap_or_default();
                match s.get("namespace").and_then(Value::as_str) {
                    Some(ns) if kind == "ServiceAccount" => format!("{ns}/{name}"),
                    _ => name.to_owned(),
                }
            })
            .collect();
        Value::from(names.join(", "))
    };
    let role = format!(
        "{}/{}",
        text(obj, &["roleRef", "kind"]),
        text(obj, &["roleRef", "name"])
    );
    [
        name(obj),
        Value::from(role),
        age_cell(obj, now),
        subjects("User"),
        subjects("Group"),
        subjects("ServiceAccount"),
    ]
}

// ---------------------------------------------------------------------------------------------
// Events
// ---------------------------------------------------------------------------------------------

/// Where one Event schema keeps the fields the printer reads. `type`, `reason`, `eventTime`,
/// `series` and `reportingInstance` have the same names in both schemas.
struct EventFields {
    /// Human-readable text.
    message: &'static str,
    /// Reference to the object the event is about.
    object: &'static str,
    /// `{component, host}` of the legacy reporter.
    source: &'static str,
    /// First occurrence (second precision).
    first: &'static str,
    /// Last occurrence (second precision).
    last: &'static str,
    /// Occurrences, for events without a series.
    count: &'static str,
    /// Controller that reported the event.
    controller: &'static str,
}

/// core/v1 field names.
const CORE_EVENT_FIELDS: EventFields = EventFields {
    message: "message",
    object: "involvedObject",
    source: "source",
    first: "firstTimestamp",
    last: "lastTimestamp",
    count: "count",
    controller: "reportingComponent",
};

/// events.k8s.io/v1 field names.
const EVENTS_EVENT_FIELDS: EventFields = EventFields {
    message: "note",
    object: "regarding",
    source: "deprecatedSource",
    first: "deprecatedFirstTimestamp",
    last: "deprecatedLastTimestamp",
    count: "deprecatedCount",
    controller: "reportingController",
};

/// `Last Seen`, `Type`, `Reason`, `Object`, `Subobject`, `Source`, `Message`, `First Seen`,
/// `Count`, `Name`.
///
/// First Seen is the first timestamp, else `eventTime`. Last Seen is the last timestamp, else First
/// Seen; with a `series` it is `series.lastObservedTime` and Count is `series.count`. Without a
/// series a count of 0 reads 1 (single events of the new API carry no count). The object reads
/// `kind/name` with the kind lower-cased, as kubectl shows it (`pod/web-1`).
fn event_cells(obj: &Value, now: i64, fields: &EventFields) -> [Value; EVENT.len()] {
    let first_seen = match non_empty(obj, &[fields.first]) {
        Some(first) => age(Some(first), now),
        None => age(non_empty(obj, &["eventTime"]), now),
    };
    let mut last_seen = match non_empty(obj, &[fields.last]) {
        Some(last) => age(Some(last), now),
        None => first_seen.clone(),
    };
    let count = match at(obj, &["series"]) {
        Some(series) => {
            last_seen = age(non_empty(series, &["lastObservedTime"]), now);
            int(series, &["count"])
        }
        None => match int(obj, &[fields.count]) {
            0 => 1,
            count => count,
        },
    };

    let kind = text(obj, &[fields.object, "kind"]).to_lowercase();
    let object = match non_empty(obj, &[fields.object, "name"]) {
        Some(name) => format!("{kind}/{name}"),
        None => kind,
    };

    let component = non_empty(obj, &[fields.source, "component"])
        .unwrap_or_else(|| text(obj, &[fields.controller]));
    let source = match non_empty(obj, &[fields.source, "host"])
        .or_else(|| non_empty(obj, &["reportingInstance"]))
    {
        Some(instance) => format!("{component}, {instance}"),
        None => component.to_owned(),
    };

    [
        Value::from(last_seen),
        Value::from(text(obj, &["type"])),
        Value::from(text(obj, &["reason"])),
        Value::from(object),
        Value::from(text(obj, &[fields.object, "fieldPath"])),
        Value::from(source),
        Value::from(text(obj, &[fields.message]).trim()),
        Value::from(first_seen),
        Value::from(count),
        name(obj),
    ]
}

// ---------------------------------------------------------------------------------------------
// Pods
// ---------------------------------------------------------------------------------------------

/// Restart count and the latest `lastState.terminated.finishedAt` over some container statuses.
#[derive(Clone, Copy, Debug, Default)]
struct Restarts {
    /// Sum of `restartCount`.
    count: i64,
    /// Latest termination time seen, if any.
    last: Option<jiff::Timestamp>,
}

impl Restarts {
    /// Adds one container status.
    fn add(&mut self, status: &Value) {
        self.count = self.count.saturating_add(int(status, &["restartCount"]));
        let finished = non_empty(status, &["lastState", "terminated", "finishedAt"]);
        if let Some(time) = finished.and_then(parse_time) {
            self.last = self.last.max(Some(time));
        }
    }

    /// `3`, or `3 (5m ago)` once a restart time is known.
    fn render(self, now: i64) -> String {
        match self.last {
            Some(last) if self.count != 0 => format!("{} ({} ago)", self.count, since(last, now)),
            _ => self.count.to_string(),
        }
    }
}

/// The status of a terminated container: its reason, else `Signal:N`, else `ExitCode:N`, each
/// after `prefix`.
fn termination_reason(prefix: &str, terminated: &Value) -> String {
    if let Some(reason) = non_empty(terminated, &["reason"]) {
        return format!("{prefix}{reason}");
    }
    match int(terminated, &["signal"]) {
        0 => format!("{prefix}ExitCode:{}", int(terminated, &["exitCode"])),
        signal => format!("{prefix}Signal:{signal}"),
    }
}

/// Whether the pod has a condition of `kind` with status `True`; only the first condition of
/// that type counts.
fn condition_is_true(pod: &Value, kind: &str) -> bool {
    list(pod, &["status", "conditions"])
        .iter()
        .find(|condition| text(condition, &["type"]) == kind)
        .is_some_and(|condition| text(condition, &["status"]) == "True")
}

/// `Name`, `Ready`, `Status`, `Restarts`, `Age`, `IP`, `Node`, `Nominated Node`, `Readiness Gates`.
///
/// Ready counts running, ready containers out of `spec.containers` plus sidecars (init containers
/// with `restartPolicy: Always`). Status starts from `status.reason` or the phase and is refined by
/// container states the way kubectl shows them (`Init:0/1`, `CrashLoopBackOff`, `Completed`,
/// `Terminating`, …). Restarts sums `restartCount`.
fn pod_cells(pod: &Value, now: i64) -> [Value; POD.len()] {
    let init_specs = list(pod, &["spec", "initContainers"]);
    let is_sidecar = |spec: &Value| text(spec, &["restartPolicy"]) == "Always";
    let named_sidecar = |name: &str| {
        init_specs
            .iter()
            .any(|spec| text(spec, &["name"]) == name && is_sidecar(spec))
    };
    let total = list(pod, &["spec", "containers"]).len()
        + init_specs.iter().filter(|spec| is_sidecar(spec)).count();

    let phase = text(pod, &["status", "phase"]);
    let mut reason = non_empty(pod, &["status", "reason"])
        .unwrap_or(phase)
        .to_owned();
    let gated = list(pod, &["status", "conditions"])
        .iter()
        .any(|condition| {
            text(condition, &["type"]) == "PodScheduled"
                && text(condition, &["reason"]) == "SchedulingGated"
        });
    if gated {
        reason = "SchedulingGated".to_owned();
    }

    let mut ready = 0_usize;
    let mut restarts = Restarts::default();
    let mut sidecar_restarts = Restarts::default();
    let mut initializing = false;
    for (index, status) in list(pod, &["status", "initContainerStatuses"])
        .iter()
        .enumerate()
    {
        restarts.add(status);
        let sidecar = named_sidecar(text(status, &["name"]));
        if sidecar {
            sidecar_restarts.add(status);
        }
        let terminated = at(status, &["state", "terminated"]);
        if terminated.is_some_and(|terminated| int(terminated, &["exitCode"]) == 0) {
            continue;
        }
        if sidecar && flag(status, &["started"]) {
            if flag(status, &["ready"]) {
                ready += 1;
            }
            continue;
        }
        let waiting = text(status, &["state", "waiting", "reason"]);
        reason = match terminated {
            Some(terminated) => termination_reason("Init:", terminated),
            None if !waiting.is_empty() && waiting != "PodInitializing" => {
                format!("Init:{waiting}")
            }
            None => format!("Init:{index}/{}", init_specs.len()),
        };
        initializing = true;
        break;
    }

    if !initializing || condition_is_true(pod, "Initialized") {
        restarts = sidecar_restarts;
        let mut has_running = false;
        for status in list(pod, &["status", "containerStatuses"]).iter().rev() {
            restarts.add(status);
            if let Some(waiting) = non_empty(status, &["state", "waiting", "reason"]) {
                reason = waiting.to_owned();
            } else if let Some(terminated) = at(status, &["state", "terminated"]) {
                reason = termination_reason("", terminated);
            } else if flag(status, &["ready"]) && at(status, &["state", "running"]).is_some() {
                has_running = true;
                ready += 1;
            }
        }
        if reason == "Completed" && has_running {
            reason = if condition_is_true(pod, "Ready") {
                "Running"
            } else {
                "NotReady"
            }
            .to_owned();
        }
    }

    if non_empty(pod, &["metadata", "deletionTimestamp"]).is_some() {
        if text(pod, &["status", "reason"]) == "NodeLost" {
            reason = "Unknown".to_owned();
        } else if phase != "Succeeded" && phase != "Failed" {
            reason = "Terminating".to_owned();
        }
    }

    let ip = list(pod, &["status", "podIPs"])
        .first()
        .map_or_else(|| text(pod, &["status", "podIP"]), |ip| text(ip, &["ip"]));
    let gates = list(pod, &["spec", "readinessGates"]);
    let readiness_gates = if gates.is_empty() {
        "<none>".to_owned()
    } else {
        let met = gates
            .iter()
            .filter(|gate| condition_is_true(pod, text(gate, &["conditionType"])))
            .count();
        format!("{met}/{}", gates.len())
    };

    [
        name(pod),
        Value::from(format!("{ready}/{total}")),
        Value::from(reason),
        Value::from(restarts.render(now)),
        age_cell(pod, now),
        Value::from(or_none(ip)),
        Value::from(or_none(text(pod, &["spec", "nodeName"]))),
        Value::from(or_none(text(pod, &["status", "nominatedNodeName"]))),
        Value::from(readiness_gates),
    ]
}

/// `text`, or `<none>` when it is empty.
fn or_none(text: &str) -> &str {
    if text.is_empty() { "<none>" } else { text }
}

// ---------------------------------------------------------------------------------------------
// Services
// ---------------------------------------------------------------------------------------------

/// `Name`, `Type`, `Cluster-IP`, `External-IP`, `Port(s)`, `Age`, `Selector`.
fn service_cells(svc: &Value, now: i64) -> [Value; SERVICE.len()] {
    let kind = text(svc, &["spec", "type"]);
    let cluster_ip = list(svc, &["spec", "clusterIPs"])
        .first()
        .and_then(Value::as_str)
        .or_else(|| non_empty(svc, &["spec", "clusterIP"]))
        .unwrap_or("<none>");
    let ports = list(svc, &["spec", "ports"])
        .iter()
        .map(|port| {
            let protocol = non_empty(port, &["protocol"]).unwrap_or("TCP");
            match int(port, &["nodePort"]) {
                node_port if node_port > 0 => {
                    format!("{}:{node_port}/{protocol}", int(port, &["port"]))
                }
                _ => format!("{}/{protocol}", int(port, &["port"])),
            }
        })
        .collect::<Vec<_>>()
        .join(",");
    [
        name(svc),
        Value::from(kind),
        Value::from(cluster_ip),
        Value::from(external_ip(svc, kind)),
        Value::from(or_none(&ports)),
        age_cell(svc, now),
        Value::from(label_map(at(svc, &["spec", "selector"]))),
    ]
}

/// The External-IP cell: `spec.externalIPs` for ClusterIP and NodePort (`<none>` if empty); for
/// LoadBalancer the ingress IPs or hostnames (sorted, deduplicated) followed by `spec.externalIPs`,
/// or `<pending>` if there are none; `spec.externalName` for ExternalName; `<unknown>` otherwise.
fn external_ip(svc: &Value, kind: &str) -> String {
    let external_ips = strings(svc, &["spec", "externalIPs"]);
    match kind {
        "ClusterIP" | "NodePort" if external_ips.is_empty() => "<none>".to_owned(),
        "ClusterIP" | "NodePort" => external_ips.join(","),
        "LoadBalancer" => {
            let mut addresses: Vec<&str> = list(svc, &["status", "loadBalancer", "ingress"])
                .iter()
                .filter_map(|ingress| {
                    non_empty(ingress, &["ip"]).or_else(|| non_empty(ingress, &["hostname"]))
                })
                .collect();
            addresses.sort_unstable();
            addresses.dedup();
            addresses.extend(external_ips);
            if addresses.is_empty() {
                "<pending>".to_owned()
            } else {
                addresses.join(",")
            }
        }
        "ExternalName" => text(svc, &["spec", "externalName"]).to_owned(),
        _ => "<unknown>".to_owned(),
    }
}

/// A label map as `k=v,k2=v2` sorted by key, or `<none>` when empty.
fn label_map(labels: Option<&Value>) -> String {
    let Some(labels) = labels.and_then(Value::as_object).filter(|m| !m.is_empty()) else {
        return "<none>".to_owned();
    };
    let mut pairs: Vec<String> = labels
        .iter()
        .map(|(key, value)| format!("{key}={}", value.as_str().unwrap_or("")))
        .collect();
    pairs.sort_unstable();
    pairs.join(",")
}

// ---------------------------------------------------------------------------------------------
// Workloads
// ---------------------------------------------------------------------------------------------

/// `Name`, `Ready`, `Up-to-date`, `Available`, `Age`, `Containers`, `Images`, `Selector`.
///
/// An absent or empty selector renders as `""` and a malformed one as `<invalid>`, as Kubernetes'
/// Deployment printer does.
fn deployment_cells(obj: &Value, now: i64) -> [Value; DEPLOYMENT.len()] {
    let ready = int(obj, &["status", "readyReplicas"]);
    let desired = int(obj, &["spec", "replicas"]);
    let (containers, images) = template_containers(obj);
    let selector =
        label_selector(at(obj, &["spec", "selector"])).unwrap_or_else(|| "<invalid>".to_owned());
    [
        name(obj),
        Value::from(format!("{ready}/{desired}")),
        Value::from(int(obj, &["status", "updatedReplicas"])),
        Value::from(int(obj, &["status", "availableReplicas"])),
        age_cell(obj, now),
        Value::from(containers),
        Value::from(images),
        Value::from(selector),
    ]
}

/// `Name`, `Desired`, `Current`, `Ready`, `Age`, `Containers`, `Images`, `Selector`.
///
/// An absent or empty selector renders as `<none>` and a malformed one as `<error>`, as
/// Kubernetes' ReplicaSet printer does.
fn replica_set_cells(obj: &Value, now: i64) -> [Value; REPLICA_SET.len()] {
    let (containers, images) = template_containers(obj);
    let selector = match label_selector(at(obj, &["spec", "selector"])) {
        None => "<error>".to_owned(),
        Some(selector) if selector.is_empty() => "<none>".to_owned(),
        Some(selector) => selector,
    };
    [
        name(obj),
        Value::from(int(obj, &["spec", "replicas"])),
        Value::from(int(obj, &["status", "replicas"])),
        Value::from(int(obj, &["status", "readyReplicas"])),
        age_cell(obj, now),
        Value::from(containers),
        Value::from(images),
        Value::from(selector),
    ]
}

/// Comma-joined names and images of `spec.template.spec.containers`.
fn template_containers(obj: &Value) -> (String, String) {
    let containers = list(obj, &["spec", "template", "spec", "containers"]);
    let joined = |field: &str| {
        containers
            .iter()
            .map(|container| text(container, &[field]))
            .collect::<Vec<_>>()
            .join(",")
    };
    (joined("name"), joined("image"))
}

/// A `LabelSelector` in Kubernetes' selector syntax: requirements sorted by key and joined with
/// commas, `key=value` for `matchLabels`, and `key in (a,b)`, `key notin (a,b)` (values sorted),
/// `key`, `!key` for `matchExpressions`.
///
/// `Some("")` for an absent or empty selector; `None` for one Kubernetes would reject (unknown
/// operator, `In`/`NotIn` without values, `Exists`/`DoesNotExist` with values, empty key, or a
/// non-string label value).
fn label_selector(selector: Option<&Value>) -> Option<String> {
    let Some(selector) = selector else {
        return Some(String::new());
    };
    let mut requirements: Vec<(&str, String)> = Vec::new();
    if let Some(labels) = at(selector, &["matchLabels"]) {
        for (key, value) in labels.as_object()? {
            requirements.push((key, format!("{key}={}", value.as_str()?)));
        }
    }
    for expression in list(selector, &["matchExpressions"]) {
        let key = non_empty(expression, &["key"])?;
        let mut values = list(expression, &["values"])
            .iter()
            .map(Value::as_str)
            .collect::<Option<Vec<_>>>()?;
        values.sort_unstable();
        let requirement = match (text(expression, &["operator"]), values.is_empty()) {
            ("In", false) => format!("{key} in ({})", values.join(",")),
            ("NotIn", false) => format!("{key} notin ({})", values.join(",")),
            ("Exists", true) => key.to_owned(),
            ("DoesNotExist", true) => format!("!{key}"),
            _ => return None,
        };
        requirements.push((key, requirement));
    }
    requirements.sort_by(|a, b| a.0.cmp(b.0));
    Some(
        requirements
            .into_iter()
            .map(|(_, requirement)| requirement)
            .collect::<Vec<_>>()
            .join(","),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// 2024-05-01T12:00:00Z, the clock every test reads.
    const NOW: i64 = 1_714_564_800;

    const MINUTE: i64 = 60;
    const HOUR: i64 = 60 * MINUTE;
    const DAY: i64 = 24 * HOUR;
    const YEAR: i64 = 365 * DAY;

    /// Every kind with a dedicated printer, plus a few that fall back to the generic one.
    const KINDS: &[(&str, &str)] = &[
        ("", "Namespace"),
        ("", "ConfigMap"),
        ("", "Secret"),
        ("", "ServiceAccount"),
        ("", "Event"),
        ("", "Pod"),
        ("", "Service"),
        ("coordination.k8s.io", "Lease"),
        ("events.k8s.io", "Event"),
        ("apps", "Deployment"),
        ("apps", "ReplicaSet"),
        ("rbac.authorization.k8s.io", "ClusterRole"),
        ("rbac.authorization.k8s.io", "RoleBinding"),
        ("apiextensions.k8s.io", "CustomResourceDefinition"),
        ("example.com", "Widget"),
        ("example.com", "Pod"),
    ];

    /// A timestamp `seconds` before [`NOW`], in RFC 3339.
    fn ago(seconds: i64) -> String {
        let time = jiff::Timestamp::from_second(NOW - seconds).expect("in range");
        time.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
    }

    /// `columns` and `cells` for one object, zipped by column name.
    fn row(group: &str, kind: &str, obj: &Value) -> Vec<(&'static str, Value)> {
        let columns = columns(group, kind);
        let cells = cells(group, kind, obj, NOW);
        assert_eq!(columns.len(), cells.len(), "{group}/{kind}");
        columns.iter().map(|c| c.name).zip(cells).collect()
    }

    /// The cell under `column` in a row.
    fn cell(row: &[(&str, Value)], column: &str) -> Value {
        row.iter()
            .find(|(name, _)| *name == column)
            .map(|(_, value)| value.clone())
            .unwrap_or_else(|| panic!("no column {column}"))
    }

    fn names(group: &str, kind: &str) -> Vec<(&'static str, u8)> {
        columns(group, kind)
            .iter()
            .map(|c| (c.name, c.priority))
            .collect()
    }

    #[test]
    fn human_duration_counts_seconds_below_two_minutes() {
        assert_eq!(human_duration(0), "0s");
        assert_eq!(human_duration(5), "5s");
        assert_eq!(human_duration(59), "59s");
        assert_eq!(human_duration(60), "60s");
        assert_eq!(human_duration(119), "119s");
    }

    #[test]
    fn human_duration_adds_seconds_to_minutes_below_ten_minutes() {
        assert_eq!(human_duration(2 * MINUTE), "2m");
        assert_eq!(human_duration(3 * MINUTE + 20), "3m20s");
        assert_eq!(human_duration(9 * MINUTE + 59), "9m59s");
    }

    #[test]
    fn human_duration_counts_minutes_below_three_hours() {
        assert_eq!(human_duration(10 * MINUTE), "10m");
        assert_eq!(human_duration(10 * MINUTE + 59), "10m");
        assert_eq!(human_duration(2 * HOUR + 59 * MINUTE), "179m");
        assert_eq!(human_duration(3 * HOUR - 1), "179m");
    }

    #[test]
    fn human_duration_adds_minutes_to_hours_below_eight_hours() {
        assert_eq!(human_duration(3 * HOUR), "3h");
        assert_eq!(human_duration(3 * HOUR + 59), "3h");
        assert_eq!(human_duration(4 * HOUR + 5 * MINUTE), "4h5m");
        assert_eq!(human_duration(7 * HOUR + 59 * MINUTE), "7h59m");
    }

    #[test]
    fn human_duration_counts_hours_below_two_days() {
        assert_eq!(human_duration(8 * HOUR), "8h");
        assert_eq!(human_duration(8 * HOUR + 30 * MINUTE), "8h");
        assert_eq!(human_duration(47 * HOUR), "47h");
        assert_eq!(human_duration(48 * HOUR - 1), "47h");
    }

    #[test]
    fn human_duration_adds_hours_to_days_below_eight_days() {
        assert_eq!(human_duration(2 * DAY), "2d");
        assert_eq!(human_duration(2 * DAY + HOUR), "2d1h");
        assert_eq!(human_duration(7 * DAY + 23 * HOUR), "7d23h");
        assert_eq!(human_duration(8 * DAY - 1), "7d23h");
    }

    #[test]
    fn human_duration_counts_days_below_two_years() {
        assert_eq!(human_duration(8 * DAY), "8d");
        assert_eq!(human_duration(8 * DAY + 23 * HOUR), "8d");
        assert_eq!(human_duration(400 * DAY), "400d");
        assert_eq!(human_duration(2 * YEAR - 1), "729d");
    }

    #[test]
    fn human_duration_adds_days_to_years_below_eight_years() {
        assert_eq!(human_duration(2 * YEAR), "2y");
        assert_eq!(human_duration(2 * YEAR + DAY), "2y1d");
        assert_eq!(human_duration(5 * YEAR + 100 * DAY), "5y100d");
        assert_eq!(human_duration(8 * YEAR - 1), "7y364d");
    }

    #[test]
    fn human_duration_counts_years_from_eight_years() {
        assert_eq!(human_duration(8 * YEAR), "8y");
        assert_eq!(human_duration(8 * YEAR + 200 * DAY), "8y");
        assert_eq!(human_duration(120 * YEAR), "120y");
        assert_eq!(human_duration(i64::MAX), format!("{}y", i64::MAX / YEAR));
    }

    #[test]
    fn human_duration_forgives_one_second_of_clock_skew_only() {
        assert_eq!(human_duration(-1), "0s");
        assert_eq!(human_duration(-2), "<invalid>");
        assert_eq!(human_duration(i64::MIN), "<invalid>");
    }

    #[test]
    fn age_is_unknown_without_a_parseable_timestamp() {
        assert_eq!(age(None, NOW), "<unknown>");
        assert_eq!(age(Some(""), NOW), "<unknown>");
        assert_eq!(age(Some("yesterday"), NOW), "<unknown>");
        assert_eq!(age(Some("2024-05-01T11:00:00"), NOW), "<unknown>");
    }

    #[test]
    fn age_measures_whole_seconds_against_the_given_clock() {
        assert_eq!(age(Some("2024-05-01T11:56:40Z"), NOW), "3m20s");
        assert_eq!(age(Some("2024-05-01T13:56:40+02:00"), NOW), "3m20s");
        // MicroTime: 9.5 s ago truncates to 9 s; 1.5 s ahead is tolerated skew; 2.5 s is not.
        assert_eq!(age(Some("2024-05-01T11:59:50.500000Z"), NOW), "9s");
        assert_eq!(age(Some("2024-05-01T12:00:01.500000Z"), NOW), "0s");
        assert_eq!(age(Some("2024-05-01T12:00:02.500000Z"), NOW), "<invalid>");
        // Years are 365 days: two calendar years spanning 29 February are 731 days.
        assert_eq!(age(Some("2022-05-01T12:00:00Z"), NOW), "2y1d");
        assert_eq!(age(Some("2022-05-02T12:00:00Z"), NOW), "2y");
    }

    #[test]
    fn a_deployment_row_shows_replicas_containers_and_selector() {
        let deployment = json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "default", "creationTimestamp": ago(5 * MINUTE)},
            "spec": {
                "replicas": 3,
                "selector": {
                    "matchLabels": {"app": "web", "tier": "front"},
                    "matchExpressions": [
                        {"key": "env", "operator": "In", "values": ["prod", "canary"]},
                        {"key": "zone", "operator": "NotIn", "values": ["b"]},
                        {"key": "managed", "operator": "Exists"},
                        {"key": "legacy", "operator": "DoesNotExist"}
                    ]
                },
                "template": {"spec": {"containers": [
                    {"name": "nginx", "image": "nginx:1.27"},
                    {"name": "sidecar", "image": "busybox"}
                ]}}
            },
            "status": {"replicas": 3, "readyReplicas": 2, "updatedReplicas": 3, "availableReplicas": 1}
        });
        let cells = cells("apps", "Deployment", &deployment, NOW);
        assert_eq!(
            cells,
            vec![
                json!("web"),
                json!("2/3"),
                json!(3),
                json!(1),
                json!("5m"),
                json!("nginx,sidecar"),
                json!("nginx:1.27,busybox"),
                json!("app=web,env in (canary,prod),!legacy,managed,tier=front,zone notin (b)"),
            ]
        );
        assert_eq!(
            names("apps", "Deployment"),
            [
                ("Name", 0),
                ("Ready", 0),
                ("Up-to-date", 0),
                ("Available", 0),
                ("Age", 0),
                ("Containers", 1),
                ("Images", 1),
                ("Selector", 1)
            ]
        );
    }

    #[test]
    fn a_fresh_deployment_without_status_reads_zero_ready() {
        let deployment = json!({
            "metadata": {"name": "web", "creationTimestamp": ago(30)},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"spec": {"containers": [{"name": "nginx", "image": "nginx"}]}}},
            "status": {}
        });
        let row = row("apps", "Deployment", &deployment);
        assert_eq!(cell(&row, "Ready"), json!("0/1"));
        assert_eq!(cell(&row, "Up-to-date"), json!(0));
        assert_eq!(cell(&row, "Available"), json!(0));
        assert_eq!(cell(&row, "Age"), json!("30s"));
        assert_eq!(cell(&row, "Selector"), json!("app=web"));
    }

    #[test]
    fn selectors_render_empty_or_malformed_the_way_each_printer_does() {
        let with_selector = |selector: Value| json!({"spec": {"selector": selector}});
        let selector_of = |kind: &str, obj: &Value| cell(&row("apps", kind, obj), "Selector");

        let empty = with_selector(json!({}));
        assert_eq!(selector_of("Deployment", &empty), json!(""));
        assert_eq!(selector_of("ReplicaSet", &empty), json!("<none>"));
        assert_eq!(selector_of("Deployment", &json!({})), json!(""));

        let bad = with_selector(json!({"matchExpressions": [{"key": "a", "operator": "In"}]}));
        assert_eq!(selector_of("Deployment", &bad), json!("<invalid>"));
        assert_eq!(selector_of("ReplicaSet", &bad), json!("<error>"));

        let unknown = with_selector(json!({"matchExpressions": [{"key": "a", "operator": "Gt"}]}));
        assert_eq!(selector_of("Deployment", &unknown), json!("<invalid>"));
        let exists_with_values = with_selector(
            json!({"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]}),
        );
        assert_eq!(
            selector_of("Deployment", &exists_with_values),
            json!("<invalid>")
        );
    }

    #[test]
    fn a_replica_set_row_shows_desired_current_and_ready() {
        let replica_set = json!({
            "metadata": {"name": "web-7d4b9c", "creationTimestamp": ago(2 * DAY + 3 * HOUR)},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web", "pod-template-hash": "7d4b9c"}},
                     "template": {"spec": {"containers": [{"name": "nginx", "image": "nginx"}]}}},
            "status": {"replicas": 2, "readyReplicas": 1}
        });
        assert_eq!(
            cells("apps", "ReplicaSet", &replica_set, NOW),
            vec![
                json!("web-7d4b9c"),
                json!(3),
                json!(2),
                json!(1),
                json!("2d3h"),
                json!("nginx"),
                json!("nginx"),
                json!("app=web,pod-template-hash=7d4b9c"),
            ]
        );
    }

    #[test]
    fn a_pending_pod_without_statuses_reads_zero_ready() {
        let pod = json!({
            "metadata": {"name": "web-1", "creationTimestamp": ago(10)},
            "spec": {"containers": [{"name": "a", "image": "nginx"}, {"name": "b", "image": "nginx"}]},
            "status": {"phase": "Pending", "qosClass": "BestEffort"}
        });
        assert_eq!(
            cells("", "Pod", &pod, NOW),
            vec![
                json!("web-1"),
                json!("0/2"),
                json!("Pending"),
                json!("0"),
                json!("10s"),
                json!("<none>"),
                json!("<none>"),
                json!("<none>"),
                json!("<none>"),
            ]
        );
    }

    #[test]
    fn a_pod_with_restarts_sums_them_and_says_when_the_last_one_was() {
        let pod = json!({
            "metadata": {"name": "api-0", "creationTimestamp": ago(3 * HOUR)},
            "spec": {
                "nodeName": "node-a",
                "containers": [{"name": "app", "image": "app"}, {"name": "proxy", "image": "envoy"}],
                "readinessGates": [{"conditionType": "example.com/lb"}, {"conditionType": "example.com/dns"}]
            },
            "status": {
                "phase": "Running",
                "podIP": "10.0.0.9",
                "podIPs": [{"ip": "10.0.0.9"}, {"ip": "fd00::9"}],
                "conditions": [
                    {"type": "Ready", "status": "False"},
                    {"type": "example.com/lb", "status": "True"},
                    {"type": "example.com/dns", "status": "False"}
                ],
                "containerStatuses": [
                    {"name": "app", "ready": true, "restartCount": 2, "state": {"running": {}},
                     "lastState": {"terminated": {"exitCode": 1, "finishedAt": ago(20 * MINUTE)}}},
                    {"name": "proxy", "ready": false, "restartCount": 3,
                     "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                     "lastState": {"terminated": {"exitCode": 137, "finishedAt": ago(4 * MINUTE)}}}
                ]
            }
        });
        assert_eq!(
            cells("", "Pod", &pod, NOW),
            vec![
                json!("api-0"),
                json!("1/2"),
                json!("CrashLoopBackOff"),
                json!("5 (4m ago)"),
                json!("3h"),
                json!("10.0.0.9"),
                json!("node-a"),
                json!("<none>"),
                json!("1/2"),
            ]
        );
    }

    #[test]
    fn a_pod_restart_count_without_a_termination_time_is_a_bare_number() {
        let pod = json!({
            "spec": {"containers": [{"name": "app"}]},
            "status": {"phase": "Running", "containerStatuses": [
                {"name": "app", "ready": true, "restartCount": 4, "state": {"running": {}}}
            ]}
        });
        let row = row("", "Pod", &pod);
        assert_eq!(cell(&row, "Restarts"), json!("4"));
        assert_eq!(cell(&row, "Ready"), json!("1/1"));
        assert_eq!(cell(&row, "Status"), json!("Running"));
        assert_eq!(cell(&row, "Age"), json!("<unknown>"));
    }

    #[test]
    fn a_pod_status_follows_init_containers_and_terminations() {
        let initializing = json!({
            "spec": {"initContainers": [{"name": "migrate"}, {"name": "seed"}],
                     "containers": [{"name": "app"}]},
            "status": {"phase": "Pending", "initContainerStatuses": [
                {"name": "migrate", "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}},
                {"name": "seed", "restartCount": 1, "state": {"running": {}}}
            ]}
        });
        let row1 = row("", "Pod", &initializing);
        assert_eq!(cell(&row1, "Status"), json!("Init:1/2"));
        assert_eq!(cell(&row1, "Restarts"), json!("1"));

        let failed_init = json!({
            "spec": {"initContainers": [{"name": "migrate"}], "containers": [{"name": "app"}]},
            "status": {"phase": "Pending", "initContainerStatuses": [
                {"name": "migrate", "state": {"terminated": {"exitCode": 2}}}
            ]}
        });
        assert_eq!(
            cell(&row("", "Pod", &failed_init), "Status"),
            json!("Init:ExitCode:2")
        );

        let sidecar = json!({
            "spec": {"initContainers": [{"name": "mesh", "restartPolicy": "Always"}],
                     "containers": [{"name": "app"}]},
            "status": {"phase": "Running",
                "initContainerStatuses": [{"name": "mesh", "started": true, "ready": true,
                                           "restartCount": 1, "state": {"running": {}}}],
                "containerStatuses": [{"name": "app", "ready": true, "state": {"running": {}}}]}
        });
        let row3 = row("", "Pod", &sidecar);
        assert_eq!(cell(&row3, "Ready"), json!("2/2"));
        assert_eq!(cell(&row3, "Status"), json!("Running"));
        assert_eq!(cell(&row3, "Restarts"), json!("1"));

        let completed = json!({
            "spec": {"containers": [{"name": "job"}]},
            "status": {"phase": "Succeeded", "containerStatuses": [
                {"name": "job", "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}
            ]}
        });
        assert_eq!(
            cell(&row("", "Pod", &completed), "Status"),
            json!("Completed")
        );

        let killed = json!({
            "spec": {"containers": [{"name": "app"}]},
            "status": {"phase": "Failed", "containerStatuses": [
                {"name": "app", "state": {"terminated": {"exitCode": 137, "signal": 9}}}
            ]}
        });
        assert_eq!(cell(&row("", "Pod", &killed), "Status"), json!("Signal:9"));
    }

    #[test]
    fn a_pod_being_deleted_reads_terminating_unless_finished() {
        let pod = |phase: &str| {
            json!({
                "metadata": {"name": "p", "deletionTimestamp": ago(5)},
                "spec": {"containers": [{"name": "app"}]},
                "status": {"phase": phase}
            })
        };
        assert_eq!(
            cell(&row("", "Pod", &pod("Running")), "Status"),
            json!("Terminating")
        );
        assert_eq!(
            cell(&row("", "Pod", &pod("Succeeded")), "Status"),
            json!("Succeeded")
        );

        let evicted = json!({"status": {"phase": "Failed", "reason": "Evicted"}});
        assert_eq!(cell(&row("", "Pod", &evicted), "Status"), json!("Evicted"));
        let lost = json!({"metadata": {"deletionTimestamp": ago(5)},
                          "status": {"phase": "Running", "reason": "NodeLost"}});
        assert_eq!(cell(&row("", "Pod", &lost), "Status"), json!("Unknown"));
    }

    #[test]
    fn a_cluster_ip_service_row_shows_ports_and_selector() {
        let svc = json!({
            "metadata": {"name": "web", "creationTimestamp": ago(90)},
            "spec": {"type": "ClusterIP", "clusterIP": "10.96.0.10", "clusterIPs": ["10.96.0.10"],
                     "ports": [{"port": 80, "protocol": "TCP"}, {"port": 53, "protocol": "UDP"}],
                     "selector": {"tier": "front", "app": "web"}}
        });
        assert_eq!(
            cells("", "Service", &svc, NOW),
            vec![
                json!("web"),
                json!("ClusterIP"),
                json!("10.96.0.10"),
                json!("<none>"),
                json!("80/TCP,53/UDP"),
                json!("90s"),
                json!("app=web,tier=front"),
            ]
        );
        assert_eq!(
            names("", "Service"),
            [
                ("Name", 0),
                ("Type", 0),
                ("Cluster-IP", 0),
                ("External-IP", 0),
                ("Port(s)", 0),
                ("Age", 0),
                ("Selector", 1)
            ]
        );
    }

    #[test]
    fn a_node_port_service_shows_node_ports_and_external_ips() {
        let svc = json!({
            "metadata": {"name": "edge"},
            "spec": {"type": "NodePort", "clusterIPs": ["10.96.0.20"],
                     "externalIPs": ["192.0.2.1", "192.0.2.2"],
                     "ports": [{"port": 80, "nodePort": 30080, "protocol": "TCP"},
                               {"port": 443, "nodePort": 30443}]}
        });
        let row = row("", "Service", &svc);
        assert_eq!(cell(&row, "External-IP"), json!("192.0.2.1,192.0.2.2"));
        assert_eq!(cell(&row, "Port(s)"), json!("80:30080/TCP,443:30443/TCP"));
        assert_eq!(cell(&row, "Selector"), json!("<none>"));
    }

    #[test]
    fn a_load_balancer_service_is_pending_until_it_has_ingress() {
        let pending = json!({
            "spec": {"type": "LoadBalancer", "clusterIPs": ["10.96.0.30"],
                     "ports": [{"port": 443, "nodePort": 31443, "protocol": "TCP"}]},
            "status": {"loadBalancer": {}}
        });
        assert_eq!(
            cell(&row("", "Service", &pending), "External-IP"),
            json!("<pending>")
        );

        let ready = json!({
            "spec": {"type": "LoadBalancer", "externalIPs": ["192.0.2.9"]},
            "status": {"loadBalancer": {"ingress": [
                {"ip": "203.0.113.7"}, {"hostname": "lb.example.com"}, {"ip": "203.0.113.7"}
            ]}}
        });
        assert_eq!(
            cell(&row("", "Service", &ready), "External-IP"),
            json!("203.0.113.7,lb.example.com,192.0.2.9")
        );
        let only_external = json!({"spec": {"type": "LoadBalancer", "externalIPs": ["192.0.2.9"]}});
        assert_eq!(
            cell(&row("", "Service", &only_external), "External-IP"),
            json!("192.0.2.9")
        );
    }

    #[test]
    fn external_name_and_headless_services_show_what_they_point_at() {
        let external = json!({
            "spec": {"type": "ExternalName", "externalName": "db.example.com"}
        });
        let row1 = row("", "Service", &external);
        assert_eq!(cell(&row1, "Type"), json!("ExternalName"));
        assert_eq!(cell(&row1, "Cluster-IP"), json!("<none>"));
        assert_eq!(cell(&row1, "External-IP"), json!("db.example.com"));
        assert_eq!(cell(&row1, "Port(s)"), json!("<none>"));

        let headless = json!({
            "spec": {"type": "ClusterIP", "clusterIP": "None", "clusterIPs": ["None"],
                     "ports": [{"port": 5432, "protocol": "TCP"}]}
        });
        assert_eq!(
            cell(&row("", "Service", &headless), "Cluster-IP"),
            json!("None")
        );

        let untyped = json!({"spec": {}});
        assert_eq!(
            cell(&row("", "Service", &untyped), "External-IP"),
            json!("<unknown>")
        );
    }

    #[test]
    fn a_secret_row_shows_its_type_and_counts_data_keys() {
        let secret = json!({
            "metadata": {"name": "tls", "creationTimestamp": ago(7 * DAY + 23 * HOUR)},
            "type": "kubernetes.io/tls",
            "data": {"tls.crt": "Y2VydA==", "tls.key": "a2V5"}
        });
        assert_eq!(
            cells("", "Secret", &secret, NOW),
            vec![
                json!("tls"),
                json!("kubernetes.io/tls"),
                json!(2),
                json!("7d23h")
            ]
        );
    }

    #[test]
    fn a_config_map_counts_data_and_binary_data_keys() {
        let config_map = json!({
            "metadata": {"name": "demo", "creationTimestamp": ago(5 * MINUTE)},
            "data": {"a": "1", "b": "2"},
            "binaryData": {"logo.png": "iVBORw0KGgo="}
        });
        assert_eq!(
            cells("", "ConfigMap", &config_map, NOW),
            vec![json!("demo"), json!(3), json!("5m")]
        );
    }

    #[test]
    fn namespaces_service_accounts_and_leases_show_their_one_field() {
        let namespace = json!({"metadata": {"name": "team-a", "creationTimestamp": ago(400 * DAY)},
                               "status": {"phase": "Terminating"}});
        assert_eq!(
            cells("", "Namespace", &namespace, NOW),
            vec![json!("team-a"), json!("Terminating"), json!("400d")]
        );

        let account = json!({"metadata": {"name": "builder"},
                             "secrets": [{"name": "builder-token"}, {"name": "registry"}]});
        assert_eq!(
            cell(&row("", "ServiceAccount", &account), "Secrets"),
            json!(2)
        );

        let held =
            json!({"metadata": {"name": "leader"}, "spec": {"holderIdentity": "pod-a_1234"}});
        let released = json!({"metadata": {"name": "leader"}, "spec": {}});
        assert_eq!(
            cell(&row("coordination.k8s.io", "Lease", &held), "Holder"),
            json!("pod-a_1234")
        );
        assert_eq!(
            cell(&row("coordination.k8s.io", "Lease", &released), "Holder"),
            json!("")
        );
        assert_eq!(names("", "Lease"), [("Name", 0), ("Created At", 0)]);
    }

    #[test]
    fn a_core_event_row_shows_what_happened_to_which_object() {
        let event = json!({
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": "web-1.17c9a0b3d5e2f4a1", "namespace": "default"},
            "involvedObject": {"kind": "Pod", "name": "web-1", "fieldPath": "spec.containers{nginx}"},
            "reason": "BackOff", "type": "Warning",
            "message": "Back-off restarting failed container\n",
            "source": {"component": "kubelet", "host": "node-a"},
            "firstTimestamp": ago(HOUR), "lastTimestamp": ago(2 * MINUTE), "count": 14
        });
        assert_eq!(
            cells("", "Event", &event, NOW),
            vec![
                json!("2m"),
                json!("Warning"),
                json!("BackOff"),
                json!("pod/web-1"),
                json!("spec.containers{nginx}"),
                json!("kubelet, node-a"),
                json!("Back-off restarting failed container"),
                json!("60m"),
                json!(14),
                json!("web-1.17c9a0b3d5e2f4a1"),
            ]
        );
        assert_eq!(
            names("", "Event"),
            [
                ("Last Seen", 0),
                ("Type", 0),
                ("Reason", 0),
                ("Object", 0),
                ("Subobject", 1),
                ("Source", 1),
                ("Message", 0),
                ("First Seen", 1),
                ("Count", 1),
                ("Name", 1)
            ]
        );
    }

    #[test]
    fn a_core_event_from_the_new_api_falls_back_to_event_time_and_reporter() {
        let event = json!({
            "metadata": {"name": "e"},
            "involvedObject": {"kind": "Deployment"},
            "reason": "ScalingReplicaSet", "type": "Normal", "message": "Scaled up",
            "eventTime": "2024-05-01T11:59:30.123456Z",
            "reportingComponent": "deployment-controller",
            "reportingInstance": "cm-1"
        });
        let row = row("", "Event", &event);
        assert_eq!(cell(&row, "Last Seen"), json!("29s"));
        assert_eq!(cell(&row, "First Seen"), json!("29s"));
        assert_eq!(cell(&row, "Object"), json!("deployment"));
        assert_eq!(cell(&row, "Source"), json!("deployment-controller, cm-1"));
        assert_eq!(cell(&row, "Count"), json!(1));
    }

    #[test]
    fn an_events_k8s_io_event_reads_its_own_field_names() {
        let event = json!({
            "apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": "web.1"},
            "eventTime": ago(3 * HOUR),
            "regarding": {"kind": "Deployment", "name": "web", "fieldPath": ""},
            "note": "  Scaled up replica set web-7d4b9c to 3 ",
            "reason": "ScalingReplicaSet", "type": "Normal", "action": "Scale",
            "reportingController": "deployment-controller",
            "reportingInstance": "deployment-controller-node-a",
            "series": {"count": 4, "lastObservedTime": ago(10 * MINUTE)}
        });
        assert_eq!(
            cells("events.k8s.io", "Event", &event, NOW),
            vec![
                json!("10m"),
                json!("Normal"),
                json!("ScalingReplicaSet"),
                json!("deployment/web"),
                json!(""),
                json!("deployment-controller, deployment-controller-node-a"),
                json!("Scaled up replica set web-7d4b9c to 3"),
                json!("3h"),
                json!(4),
                json!("web.1"),
            ]
        );

        let legacy = json!({
            "regarding": {"kind": "Pod", "name": "p"},
            "deprecatedSource": {"component": "kubelet"},
            "deprecatedFirstTimestamp": ago(2 * DAY),
            "deprecatedLastTimestamp": ago(HOUR),
            "deprecatedCount": 7,
            "reportingController": "ignored-because-source-wins"
        });
        let row = row("events.k8s.io", "Event", &legacy);
        assert_eq!(cell(&row, "Last Seen"), json!("60m"));
        assert_eq!(cell(&row, "First Seen"), json!("2d"));
        assert_eq!(cell(&row, "Count"), json!(7));
        assert_eq!(cell(&row, "Source"), json!("kubelet"));
    }

    #[test]
    fn rbac_objects_get_name_and_created_at() {
        let role = json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "view", "creationTimestamp": "2024-04-30T10:00:00Z"},
            "rules": []
        });
        let columns = columns("rbac.authorization.k8s.io", "ClusterRole");
        assert_eq!(
            serde_json::to_value(&columns).expect("serializes"),
            json!([
                {"name": "Name", "type": "string", "format": "name",
                 "description": "Name of the object, unique within its namespace.", "priority": 0},
                {"name": "Created At", "type": "date", "format": "",
                 "description": "When the object was created (RFC 3339, UTC).", "priority": 0}
            ])
        );
        assert_eq!(
            cells("rbac.authorization.k8s.io", "ClusterRole", &role, NOW),
            vec![json!("view"), json!("2024-04-30T10:00:00Z")]
        );
    }

    #[test]
    fn created_at_is_normalised_to_utc_and_never_missing() {
        let shifted =
            json!({"metadata": {"name": "x", "creationTimestamp": "2024-04-30T12:00:00.25+02:00"}});
        assert_eq!(
            cells("example.com", "Widget", &shifted, NOW),
            vec![json!("x"), json!("2024-04-30T10:00:00Z")]
        );
        let garbled = json!({"metadata": {"creationTimestamp": "not a time"}});
        assert_eq!(
            cells("example.com", "Widget", &garbled, NOW)[1],
            json!("not a time")
        );
        assert_eq!(
            cells("example.com", "Widget", &json!({}), NOW),
            vec![json!(""), json!("0001-01-01T00:00:00Z")]
        );
    }

    #[test]
    fn kinds_are_matched_by_group_as_well_as_name() {
        assert_eq!(
            names("example.com", "Pod"),
            [("Name", 0), ("Created At", 0)]
        );
        assert_eq!(names("apps", "Pod"), [("Name", 0), ("Created At", 0)]);
        assert_eq!(names("", "Deployment"), [("Name", 0), ("Created At", 0)]);
        assert_eq!(names("events.k8s.io", "Event"), names("", "Event"));
    }

    #[test]
    fn columns_and_cells_agree_for_every_kind_even_on_empty_or_odd_objects() {
        let odd_objects = [
            json!({}),
            json!(null),
            json!([]),
            json!("text"),
            json!({"metadata": null, "spec": null, "status": null}),
            json!({"metadata": 5, "spec": "x", "status": [], "data": [], "secrets": {}}),
            json!({"spec": {"containers": [null, 1, {"name": 2}], "ports": [{}],
                            "selector": {"matchLabels": "x"}, "readinessGates": [{}]},
                   "status": {"containerStatuses": [{}, null], "initContainerStatuses": [{"state": {}}],
                              "loadBalancer": {"ingress": [{}]}},
                   "series": {}, "involvedObject": {}, "regarding": {}}),
        ];
        for (group, kind) in KINDS {
            let columns = columns(group, kind);
            assert!(!columns.is_empty());
            for obj in &odd_objects {
                let cells = cells(group, kind, obj, NOW);
                assert_eq!(cells.len(), columns.len(), "{group}/{kind} on {obj}");
            }
        }
    }

    #[test]
    fn every_kind_has_exactly_one_name_column_and_typed_cells() {
        let full = json!({
            "metadata": {"name": "n", "creationTimestamp": ago(1)},
            "spec": {"replicas": 2, "containers": [{"name": "c"}], "type": "ClusterIP"},
            "status": {"replicas": 1},
            "data": {"k": "v"},
            "secrets": [],
            "count": 2
        });
        for (group, kind) in KINDS {
            let columns = columns(group, kind);
            let named = columns.iter().filter(|c| c.format == "name").count();
            assert_eq!(named, 1, "{group}/{kind}");
            for obj in [json!({}), full.clone()] {
                for (column, cell) in columns.iter().zip(cells(group, kind, &obj, NOW)) {
                    let expected = match column.kind {
                        "integer" => cell.is_i64(),
                        "string" | "date" => cell.is_string(),
                        other => panic!("unexpected column type {other}"),
                    };
                    assert!(expected, "{group}/{kind} {}: {cell}", column.name);
                    assert!(column.priority <= 1);
                    assert!(!column.description.is_empty());
                }
            }
        }
    }

    #[test]
    fn role_bindings_show_the_role_and_their_subjects() {
        let binding = json!({
            "metadata": {"name": "readers", "creationTimestamp": ago(90)},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
            "subjects": [
                {"kind": "User", "name": "alice"},
                {"kind": "Group", "name": "devs"},
                {"kind": "ServiceAccount", "name": "bot", "namespace": "ops"},
                {"kind": "User", "name": "bob"}
            ]
        });
        let names: Vec<&str> = columns("rbac.authorization.k8s.io", "RoleBinding")
            .iter()
            .map(|c| c.name)
            .collect();
        assert_eq!(
            names,
            ["Name", "Role", "Age", "Users", "Groups", "ServiceAccounts"]
        );
        assert_eq!(
            cells(
                "rbac.authorization.k8s.io",
                "ClusterRoleBinding",
                &binding,
                NOW
            ),
            [
                json!("readers"),
                json!("ClusterRole/view"),
                json!("90s"),
                json!("alice, bob"),
                json!("devs"),
                json!("ops/bot")
            ]
        );
    }
}
