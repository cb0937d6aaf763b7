//! networking.k8s.io/v1 (Ingress, IngressClass, NetworkPolicy, IPAddress, ServiceCIDR) and
//! discovery.k8s.io/v1 EndpointSlice.

use k8s_openapi::api::discovery::v1 as discovery;
use k8s_openapi::api::networking::v1 as networking;
use serde_json::{Value, json};

use super::typed::{Typed, immutable};
use crate::api::field::FieldError;
use crate::registry::strategy::default_at;

const PATH_TYPES: [&str; 3] = ["Exact", "ImplementationSpecific", "Prefix"];

fn validate_ingress(obj: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let spec = &obj["spec"];
    let rules = spec["rules"].as_array().map(Vec::as_slice).unwrap_or(&[]);
    if rules.is_empty() && spec["defaultBackend"].is_null() {
        errs.push(FieldError::invalid(
            "spec",
            spec.clone(),
            "either `defaultBackend` or `rules` must be specified",
        ));
    }
    for (i, rule) in rules.iter().enumerate() {
        let paths = rule["http"]["paths"].as_array().into_iter().flatten();
        for (j, path) in paths.enumerate() {
            let at = format!("spec.rules[{i}].http.paths[{j}]");
            match path["pathType"].as_str() {
                None | Some("") => {
                    errs.push(FieldError::required(
                        format!("{at}.pathType"),
                        "pathType must be specified",
                    ));
                }
                Some(t) if !PATH_TYPES.contains(&t) => errs.push(FieldError::not_supported(
                    format!("{at}.pathType"),
                    json!(t),
                    &PATH_TYPES,
                )),
                Some(t) => {
                    let p = path["path"].as_str().unwrap_or_default();
                    if t != "ImplementationSpecific" && !p.starts_with('/') {
                        errs.push(FieldError::invalid(
                            format!("{at}.path"),
                            json!(p),
                            "must be an absolute path",
                        ));
                    }
                }
            }
        }
    }
    errs
}

/// Ingresses: a new Ingress's status is empty.
pub(super) fn ingress() -> Typed<networking::Ingress> {
    Typed::new()
        .generation()
        .initial_status(|| json!({"loadBalancer": {}}))
        .validate(validate_ingress)
}

/// IngressClasses: `spec.controller` is required and immutable.
pub(super) fn ingress_class() -> Typed<networking::IngressClass> {
    Typed::new()
        .validate(|obj| {
            let mut errs = Vec::new();
            if obj["spec"]["controller"].as_str().is_none_or(str::is_empty) {
                errs.push(FieldError::required("spec.controller", ""));
            }
            errs
        })
        .validate_update(|new, old| {
            let mut errs = Vec::new();
            immutable(new, old, &["spec", "controller"], &mut errs);
            errs
        })
}

/// NetworkPolicies: Kubernetes' `SetDefaults_NetworkPolicy` fills `policyTypes` (Ingress, and
/// Egress when egress rules are given) and ports' protocol.
pub(super) fn network_policy() -> Typed<networking::NetworkPolicy> {
    Typed::new().generation().defaults(|obj| {
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
