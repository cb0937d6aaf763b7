//! Printers of core/v1 ResourceQuota and PodTemplate, discovery.k8s.io/v1 EndpointSlice and
//! certificates.k8s.io/v1 CertificateSigningRequest.

use serde_json::Value;

use super::apps::{CONTAINERS, IMAGES, template_containers};
use super::*;

/// ResourceQuota columns.
pub(super) const RESOURCE_QUOTA: [Column; 4] = [
    NAME,
    AGE,
    shown("Request", "Used and hard request quotas."),
    shown("Limit", "Used and hard limit quotas."),
];

/// PodTemplate columns.
pub(super) const POD_TEMPLATE: [Column; 4] = [
    NAME,
    Column {
        priority: 0,
        ..CONTAINERS
    },
    Column {
        priority: 0,
        ..IMAGES
    },
    shown("Pod Labels", "Labels of the template's pods."),
];

/// EndpointSlice columns.
pub(super) const ENDPOINT_SLICE: [Column; 5] = [
    NAME,
    shown("AddressType", "IPv4, IPv6 or FQDN."),
    shown("Ports", "Port numbers of the slice."),
    shown("Endpoints", "Addresses, the first three."),
    AGE,
];

/// CertificateSigningRequest columns.
pub(super) const CERTIFICATE_SIGNING_REQUEST: [Column; 6] = [
    NAME,
    AGE,
    shown("SignerName", "Who is asked to sign."),
    shown("Requestor", "Who asked."),
    shown(
        "RequestedDuration",
        "Requested validity of the certificate.",
    ),
    shown("Condition", "Approved, Denied, Failed, Issued, or Pending."),
];

/// `resource: used/hard` pairs of the quota's hard limits, sorted by resource, split into
/// requests and `limits.*`.
pub(super) fn resource_quota_cells(obj: &Value, now: i64) -> [Value; RESOURCE_QUOTA.len()] {
    let mut requests = Vec::new();
    let mut limits = Vec::new();
    let hard = at(obj, &["spec", "hard"]).and_then(Value::as_object);
    let mut keys: Vec<&String> = hard.into_iter().flat_map(|h| h.keys()).collect();
    keys.sort_unstable();
    for key in keys {
        let limit = text(obj, &["spec", "hard", key]);
        let used = non_empty(obj, &["status", "used", key]).unwrap_or("0");
        let pair = format!("{key}: {used}/{limit}");
        if key.starts_with("limits.") {
            limits.push(pair);
        } else {
            requests.push(pair);
        }
    }
    [
        name(obj),
        age_cell(obj, now),
        Value::from(requests.join(", ")),
        Value::from(limits.join(", ")),
    ]
}

/// The PodTemplate row; pod labels as sorted `k=v` pairs, or `<none>`.
pub(super) fn pod_template_cells(obj: &Value, _now: i64) -> [Value; POD_TEMPLATE.len()] {
    let template = json_object(at(obj, &["template"]));
    let (containers, images) =
        template_containers(&serde_json::json!({"spec": {"template": template}}));
    let mut labels: Vec<String> = at(obj, &["template", "metadata", "labels"])
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
        .collect();
    labels.sort_unstable();
    let labels = if labels.is_empty() {
        "<none>".to_owned()
    } else {
        labels.join(",")
    };
    [
        name(obj),
        Value::from(containers),
        Value::from(images),
        Value::from(labels),
    ]
}

/// A clone of an object value, or an empty object.
fn json_object(value: Option<&Value>) -> Value {
    value
        .cloned()
        .unwrap_or_else(|| Value::Object(Default::default()))
}

/// The EndpointSlice row: ports (`<unset>` for a port without number), the first three
/// addresses then `+ N more...`, `<none>` when empty.
pub(super) fn endpoint_slice_cells(obj: &Value, now: i64) -> [Value; ENDPOINT_SLICE.len()] {
    let ports: Vec<String> = list(obj, &["ports"])
        .iter()
        .map(|p| match at(p, &["port"]).and_then(Value::as_i64) {
            Some(n) => n.to_string(),
            None => "<unset>".to_owned(),
        })
        .collect();
    let addresses: Vec<&str> = list(obj, &["endpoints"])
        .iter()
        .flat_map(|e| strings(e, &["addresses"]))
        .collect();
    let endpoints = if addresses.is_empty() {
        "<none>".to_owned()
    } else if addresses.len() > 3 {
        format!(
            "{} + {} more...",
            addresses[..3].join(","),
            addresses.len() - 3
        )
    } else {
        addresses.join(",")
    };
    [
        name(obj),
        Value::from(text(obj, &["addressType"])),
        Value::from(if ports.is_empty() {
            "<unset>".to_owned()
        } else {
            ports.join(",")
        }),
        Value::from(endpoints),
        age_cell(obj, now),
    ]
}

/// The CSR row; Condition lists the condition types, `Pending` without any, and `Issued` once a
/// certificate is there.
pub(super) fn certificate_signing_request_cells(
    obj: &Value,
    now: i64,
) -> [Value; CERTIFICATE_SIGNING_REQUEST.len()] {
    let mut conditions: Vec<&str> = list(obj, &["status", "conditions"])
        .iter()
        .filter_map(|c| non_empty(c, &["type"]))
        .collect();
    if conditions.is_empty() {
        conditions.push("Pending");
    }
    if non_empty(obj, &["status", "certificate"]).is_some() {
        conditions.push("Issued");
    }
    let duration = match at(obj, &["spec", "expirationSeconds"]).and_then(Value::as_i64) {
        Some(seconds) => human_duration(seconds),
        None => "<none>".to_owned(),
    };
    [
        name(obj),
        age_cell(obj, now),
        Value::from(text(obj, &["spec", "signerName"])),
        Value::from(text(obj, &["spec", "username"])),
        Value::from(duration),
        Value::from(conditions.join(",")),
    ]
}
