//! Printers of core/v1 kinds (Namespace, ConfigMap, Secret, ServiceAccount, Event, Pod,
//! Service), and of events.k8s.io/v1 Event, which shares the core Event's columns.

use serde_json::Value;

use super::*;

/// Namespace columns.
pub(super) const NAMESPACE: [Column; 3] = [
    NAME,
    shown("Status", "Lifecycle phase of the namespace."),
    AGE,
];

/// ConfigMap columns.
pub(super) const CONFIG_MAP: [Column; 3] = [
    NAME,
    counted("Data", "Number of keys in data and binaryData."),
    AGE,
];

/// Secret columns.
pub(super) const SECRET: [Column; 4] = [
    NAME,
    shown("Type", "Kind of secret, which fixes its keys."),
    counted("Data", "Number of keys in data."),
    AGE,
];

/// ServiceAccount columns.
pub(super) const SERVICE_ACCOUNT: [Column; 3] = [
    NAME,
    counted("Secrets", "Number of secrets the account lists."),
    AGE,
];

/// Event columns, shared by core/v1 and events.k8s.io/v1 Events.
pub(super) const EVENT: [Column; 10] = [
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
pub(super) const POD: [Column; 9] = [
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
pub(super) const SERVICE: [Column; 7] = [
    NAME,
    shown("Type", "How the service is exposed."),
    shown("Cluster-IP", "Virtual IP inside the cluster."),
    shown("External-IP", "Addresses reachable from outside."),
    shown("Port(s)", "Exposed ports, with node ports."),
    AGE,
    wide("Selector", "Labels of the pods behind the service."),
];

/// `Name`, `Status`, `Age`.
pub(super) fn namespace_cells(obj: &Value, now: i64) -> [Value; NAMESPACE.len()] {
    [
        name(obj),
        Value::from(text(obj, &["status", "phase"])),
        age_cell(obj, now),
    ]
}

/// `Name`, `Data`, `Age`.
pub(super) fn config_map_cells(obj: &Value, now: i64) -> [Value; CONFIG_MAP.len()] {
    let keys = key_count(obj, &["data"]) + key_count(obj, &["binaryData"]);
    [name(obj), Value::from(keys), age_cell(obj, now)]
}

/// `Name`, `Type`, `Data`, `Age`.
pub(super) fn secret_cells(obj: &Value, now: i64) -> [Value; SECRET.len()] {
    [
        name(obj),
        Value::from(text(obj, &["type"])),
        Value::from(key_count(obj, &["data"])),
        age_cell(obj, now),
    ]
}

/// `Name`, `Secrets`, `Age`.
pub(super) fn service_account_cells(obj: &Value, now: i64) -> [Value; SERVICE_ACCOUNT.len()] {
    [
        name(obj),
        Value::from(list(obj, &["secrets"]).len()),
        age_cell(obj, now),
    ]
}

// ---------------------------------------------------------------------------------------------
// Events
// ---------------------------------------------------------------------------------------------

/// Where one Event schema keeps the fields the printer reads. `type`, `reason`, `eventTime`,
/// `series` and `reportingInstance` have the same names in both schemas.
pub(super) struct EventFields {
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
pub(super) const CORE_EVENT_FIELDS: EventFields = EventFields {
    message: "message",
    object: "involvedObject",
    source: "source",
    first: "firstTimestamp",
    last: "lastTimestamp",
    count: "count",
    controller: "reportingComponent",
};

/// events.k8s.io/v1 field names.
pub(super) const EVENTS_EVENT_FIELDS: EventFields = EventFields {
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
pub(super) fn event_cells(obj: &Value, now: i64, fields: &EventFields) -> [Value; EVENT.len()] {
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
pub(super) struct Restarts {
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
pub(super) fn termination_reason(prefix: &str, terminated: &Value) -> String {
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
pub(super) fn condition_is_true(pod: &Value, kind: &str) -> bool {
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
pub(super) fn pod_cells(pod: &Value, now: i64) -> [Value; POD.len()] {
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
pub(super) fn or_none(text: &str) -> &str {
    if text.is_empty() { "<none>" } else { text }
}

// ---------------------------------------------------------------------------------------------
// Services
// ---------------------------------------------------------------------------------------------

/// `Name`, `Type`, `Cluster-IP`, `External-IP`, `Port(s)`, `Age`, `Selector`.
pub(super) fn service_cells(svc: &Value, now: i64) -> [Value; SERVICE.len()] {
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
pub(super) fn external_ip(svc: &Value, kind: &str) -> String {
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
pub(super) fn label_map(labels: Option<&Value>) -> String {
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
