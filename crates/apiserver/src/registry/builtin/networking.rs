//! networking.k8s.io/v1 (Ingress, IngressClass, NetworkPolicy, IPAddress, ServiceCIDR) and
//! discovery.k8s.io/v1 EndpointSlice.

use k8s_openapi::api::discovery::v1 as discovery;
use k8s_openapi::api::networking::v1 as networking;
use serde_json::{Value, json};

use super::typed::{Typed, immutable};
use crate::api::field::FieldError;
use crate::api::validation::is_subdomain;
use crate::registry::strategy::default_at;

const PATH_TYPES: [&str; 3] = ["Exact", "ImplementationSpecific", "Prefix"];

/// What an `Exact` or `Prefix` path may not contain, or end with.
const INVALID_PATH_SEQUENCES: [&str; 5] = ["//", "/./", "/../", "%2f", "%2F"];
const INVALID_PATH_SUFFIXES: [&str; 2] = ["/..", "/."];

/// The protocols a NetworkPolicy port may name.
const PROTOCOLS: [&str; 3] = ["SCTP", "TCP", "UDP"];

/// Checks an Ingress backend at `path`: exactly one of `service` and `resource`; a service
/// names itself and one port, by name or by number.
fn validate_backend(backend: &Value, path: &str, errs: &mut Vec<FieldError>) {
    let service = backend.get("service").filter(|v| !v.is_null());
    let resource = backend.get("resource").filter(|v| !v.is_null());
    match (service, resource) {
        (Some(_), Some(_)) => errs.push(FieldError::invalid(
            path,
            json!(""),
            "cannot set both resource and service backends",
        )),
        (None, None) => errs.push(FieldError::required(
            path,
            "one of `resource` or `service` must be specified",
        )),
        (Some(service), None) => {
            if service["name"].as_str().is_none_or(str::is_empty) {
                errs.push(FieldError::required(format!("{path}.service.name"), ""));
            }
            let port = &service["port"];
            let name = port["name"].as_str().filter(|n| !n.is_empty());
            let number = port["number"].as_i64().filter(|n| *n != 0);
            match (name, number) {
                (Some(_), Some(_)) => errs.push(FieldError::invalid(
                    format!("{path}.service.port"),
                    port.clone(),
                    "cannot set both port name & port number",
                )),
                (None, None) => errs.push(FieldError::required(
                    format!("{path}.service.port"),
                    "port name or number is required",
                )),
                (None, Some(n)) if !(1..=65535).contains(&n) => {
                    errs.push(FieldError::invalid(
                        format!("{path}.service.port.number"),
                        json!(n),
                        "must be between 1 and 65535, inclusive",
                    ));
                }
                _ => {}
            }
        }
        (None, Some(resource)) => {
            for f in ["kind", "name"] {
                if resource[f].as_str().is_none_or(str::is_empty) {
                    errs.push(FieldError::required(format!("{path}.resource.{f}"), ""));
                }
            }
        }
    }
}

/// Checks an Ingress rule's host: a DNS name (a leading `*.` allowed), never an IP address.
fn validate_host(host: &str, path: &str, errs: &mut Vec<FieldError>) {
    if host.parse::<std::net::IpAddr>().is_ok() {
        errs.push(FieldError::invalid(
            path,
            json!(host),
            "must be a DNS name, not an IP address",
        ));
        return;
    }
    let name = host.strip_prefix("*.").unwrap_or(host);
    if !is_subdomain(name) {
        errs.push(FieldError::invalid(
            path,
            json!(host),
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (a leading '*.' is allowed)",
        ));
    }
}

fn validate_ingress(obj: &Value) -> Vec<FieldError> {
    let spec = &obj["spec"];
    let mut errs = Vec::new();
    let rules = spec["rules"].as_array().map_or(&[][..], Vec::as_slice);
    let default_backend = spec.get("defaultBackend").filter(|v| !v.is_null());
    if rules.is_empty() && default_backend.is_none() {
        errs.push(FieldError::invalid(
            "spec",
            json!(rules),
            "either `defaultBackend` or `rules` must be specified",
        ));
    }
    if let Some(b) = default_backend {
        validate_backend(b, "spec.defaultBackend", &mut errs);
    }
    for (i, rule) in rules.iter().enumerate() {
        if let Some(host) = rule["host"].as_str().filter(|h| !h.is_empty()) {
            validate_host(host, &format!("spec.rules[{i}].host"), &mut errs);
        }
        let Some(http) = rule.get("http").filter(|v| !v.is_null()) else {
            continue;
        };
        let paths = http["paths"].as_array().map_or(&[][..], Vec::as_slice);
        if paths.is_empty() {
            errs.push(FieldError::required(
                format!("spec.rules[{i}].http.paths"),
                "",
            ));
        }
        for (j, p) in paths.iter().enumerate() {
            let at = format!("spec.rules[{i}].http.paths[{j}]");
            match p["pathType"].as_str() {
                None | Some("") => {
                    // Kubernetes checks nothing else of such a path.
                    errs.push(FieldError::required(
                        format!("{at}.pathType"),
                        "pathType must be specified",
                    ));
                    continue;
                }
                Some(t) if !PATH_TYPES.contains(&t) => errs.push(FieldError::not_supported(
                    format!("{at}.pathType"),
                    json!(t),
                    &PATH_TYPES,
                )),
                Some("Exact" | "Prefix") => {
                    let path = p["path"].as_str().unwrap_or_default();
                    if !path.starts_with('/') {
                        errs.push(FieldError::invalid(
                            format!("{at}.path"),
                            json!(path),
                            "must be an absolute path",
                        ));
                    }
                    for seq in INVALID_PATH_SEQUENCES {
                        if path.contains(seq) {
                            errs.push(FieldError::invalid(
                                format!("{at}.path"),
                                json!(path),
                                format!("must not contain '{seq}'"),
                            ));
                        }
                    }
                    for suffix in INVALID_PATH_SUFFIXES {
                        if path.ends_with(suffix) {
                            errs.push(FieldError::invalid(
                                format!("{at}.path"),
                                json!(path),
                                format!("cannot end with '{suffix}'"),
                            ));
                        }
                    }
                }
                Some(_) => {
                    let path = p["path"].as_str().unwrap_or_default();
                    if !path.is_empty() && !path.starts_with('/') {
                        errs.push(FieldError::invalid(
                            format!("{at}.path"),
                            json!(path),
                            "must be an absolute path",
                        ));
                    }
                }
            }
            validate_backend(&p["backend"], &format!("{at}.backend"), &mut errs);
        }
    }
    if let Some(class) = spec["ingressClassName"].as_str()
        && !is_subdomain(class)
    {
        errs.push(FieldError::invalid(
            "spec.ingressClassName",
            json!(class),
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character",
        ));
    }
    errs
}

/// Ingresses: a new Ingress's status is empty.
pub(super) fn ingress() -> Typed<networking::Ingress> {
    Typed::new()
        .status_keeps_metadata(&[])
        .generation()
        .initial_status(|| json!({"loadBalancer": {}}))
        .validate(validate_ingress)
}

/// IngressClasses: `spec.controller` is a domain-prefixed path, required and immutable;
/// parameters default to cluster scope, and a namespace goes with namespace scope only.
pub(super) fn ingress_class() -> Typed<networking::IngressClass> {
    Typed::new()
        .generation()
        .defaults(|obj| {
            if obj["spec"]["parameters"].is_object() {
                default_at(obj, &["spec", "parameters", "scope"], json!("Cluster"));
            }
        })
        .validate(validate_ingress_class)
        .validate_update(|new, old| {
            let mut errs = Vec::new();
            immutable(new, old, &["spec", "controller"], &mut errs);
            errs
        })
}

fn validate_ingress_class(obj: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let controller = obj["spec"]["controller"].as_str().unwrap_or_default();
    if controller.len() > 250 {
        errs.push(FieldError::too_long("spec.controller", 250));
    }
    match controller.split_once('/') {
        _ if controller.is_empty() => errs.push(FieldError::required("spec.controller", "")),
        Some((domain, _)) if is_subdomain(domain) => {}
        _ => errs.push(FieldError::invalid(
            "spec.controller",
            json!(controller),
            "must be a domain-prefixed path (such as \"acme.io/foo\")",
        )),
    }
    let params = &obj["spec"]["parameters"];
    if params.is_object() {
        match params["scope"].as_str().unwrap_or_default() {
            "Cluster" if params["namespace"].is_string() => errs.push(FieldError::forbidden(
                "spec.parameters.namespace",
                "`parameters.scope` is set to 'Cluster'",
            )),
            "Namespace" if !params["namespace"].is_string() => errs.push(FieldError::required(
                "spec.parameters.namespace",
                "`parameters.scope` is set to 'Namespace'",
            )),
            "Cluster" | "Namespace" => {}
            other => errs.push(FieldError::not_supported(
                "spec.parameters.scope",
                json!(other),
                &["Cluster", "Namespace"],
            )),
        }
    }
    errs
}

/// NetworkPolicies: Kubernetes' `SetDefaults_NetworkPolicy` fills `policyTypes` (Ingress, and
/// Egress when egress rules are given) and ports' protocol.
pub(super) fn network_policy() -> Typed<networking::NetworkPolicy> {
    Typed::new()
        .generation()
        .validate(validate_network_policy)
        .defaults(|obj| {
            let spec = &mut obj["spec"];
            if !spec.is_object() {
                return;
            }
            if spec["policyTypes"].as_array().is_none_or(Vec::is_empty) {
                let mut types = vec![json!("Ingress")];
                if spec["egress"].as_array().is_some_and(|e| !e.is_empty()) {
                    types.push(json!("Egress"));
                }
                spec["policyTypes"] = Value::Array(types);
            }
            for rules in ["ingress", "egress"] {
                if let Some(rules) = spec.get_mut(rules).and_then(Value::as_array_mut) {
                    for rule in rules {
                        if let Some(ports) = rule.get_mut("ports").and_then(Value::as_array_mut) {
                            for port in ports {
                                default_at(port, &["protocol"], json!("TCP"));
                            }
                        }
                    }
                }
            }
        })
}

/// `policyTypes` are `Ingress` or `Egress` (two at most); rule ports name a known protocol and
/// a port in 1..=65535.
fn validate_network_policy(obj: &Value) -> Vec<FieldError> {
    let spec = &obj["spec"];
    let mut errs = Vec::new();
    let types = spec["policyTypes"]
        .as_array()
        .map_or(&[][..], Vec::as_slice);
    for (i, t) in types.iter().enumerate() {
        let t = t.as_str().unwrap_or_default();
        if t != "Ingress" && t != "Egress" {
            errs.push(FieldError::not_supported(
                format!("spec.policyTypes[{i}]"),
                json!(t),
                &["Egress", "Ingress"],
            ));
        }
    }
    if types.len() > 2 {
        errs.push(FieldError::invalid(
            "spec.policyTypes",
            json!(types),
            "may not specify more than two policyTypes",
        ));
    }
    for direction in ["ingress", "egress"] {
        for (i, rule) in spec[direction].as_array().into_iter().flatten().enumerate() {
            for (j, port) in rule["ports"].as_array().into_iter().flatten().enumerate() {
                let at = format!("spec.{direction}[{i}].ports[{j}]");
                if let Some(p) = port["protocol"].as_str()
                    && !PROTOCOLS.contains(&p)
                {
                    errs.push(FieldError::not_supported(
                        format!("{at}.protocol"),
                        json!(p),
                        &PROTOCOLS,
                    ));
                }
                if let Some(n) = port["port"].as_i64()
                    && !(1..=65535).contains(&n)
                {
                    errs.push(FieldError::invalid(
                        format!("{at}.port"),
                        json!(n),
                        "must be between 1 and 65535, inclusive",
                    ));
                }
            }
        }
    }
    errs
}

/// IPAddresses: the IP allocations of Services; `spec.parentRef` is required and immutable.
pub(super) fn ip_address() -> Typed<networking::IPAddress> {
    Typed::new()
        .validate(|obj| {
            let mut errs = Vec::new();
            let name = obj["metadata"]["name"].as_str().unwrap_or_default();
            if name.parse::<std::net::IpAddr>().is_err() {
                errs.push(FieldError::invalid(
                    "metadata.name",
                    json!(name),
                    "must be a valid ip address",
                ));
            }
            if obj["spec"]["parentRef"].is_null() {
                errs.push(FieldError::required("spec.parentRef", ""));
            }
            errs
        })
        .validate_update(|new, old| {
            let mut errs = Vec::new();
            immutable(new, old, &["spec", "parentRef"], &mut errs);
            errs
        })
}

/// ServiceCIDRs: the ranges Service cluster IPs come from; `spec.cidrs` is immutable.
pub(super) fn service_cidr() -> Typed<networking::ServiceCIDR> {
    Typed::new()
        .initial_status(|| json!({}))
        .validate_update(|new, old| {
            let mut errs = Vec::new();
            immutable(new, old, &["spec", "cidrs"], &mut errs);
            errs
        })
}

const ADDRESS_TYPES: [&str; 3] = ["IPv4", "IPv6", "FQDN"];

/// EndpointSlices: `addressType` is required and immutable; ports default to TCP.
pub(super) fn endpoint_slice() -> Typed<discovery::EndpointSlice> {
    Typed::new()
        .generation()
        .defaults(|obj| {
            if let Some(ports) = obj.get_mut("ports").and_then(Value::as_array_mut) {
                for port in ports {
                    default_at(port, &["protocol"], json!("TCP"));
                }
            }
        })
        .validate(|obj| {
            let mut errs = Vec::new();
            match obj["addressType"].as_str() {
                None | Some("") => errs.push(FieldError::required("addressType", "")),
                Some(t) if !ADDRESS_TYPES.contains(&t) => errs.push(FieldError::not_supported(
                    "addressType",
                    json!(t),
                    &ADDRESS_TYPES,
                )),
                Some(_) => {}
            }
            errs
        })
        .validate_update(|new, old| {
            let mut errs = Vec::new();
            immutable(new, old, &["addressType"], &mut errs);
            errs
        })
}
