//! Strategies of the core/v1 kinds.

use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicU32, Ordering};

use base64::Engine;
use k8s_openapi::api::core::v1 as core;
use serde_json::{Value, json};

use crate::registry::strategy::{Decoded, Strategy, decode_typed, default_at};
use crate::registry::validation::{FieldError, NameRule};

/// Namespaces: cluster-scoped, DNS-label names, `kubernetes` finalizer, phase Active.
pub(super) struct NamespaceStrategy;

impl Strategy for NamespaceStrategy {
    fn status_keeps_metadata(&self) -> Option<&'static [&'static str]> {
        Some(&[])
    }

    fn decode(&self, obj: Value) -> Result<Decoded, String> {
        decode_typed::<core::Namespace>(obj)
    }

    fn name_rule(&self) -> NameRule {
        NameRule::Label
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        let name = obj["metadata"]["name"].clone();
        obj["metadata"]["labels"]["kubernetes.io/metadata.name"] = name;
        obj["spec"] = json!({"finalizers": ["kubernetes"]});
        obj["status"] = json!({"phase": "Active"});
    }

    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        let name = old["metadata"]["name"].clone();
        if !new["metadata"]["labels"].is_object() {
            new["metadata"]["labels"] = json!({});
        }
        new["metadata"]["labels"]["kubernetes.io/metadata.name"] = name;
        // spec.finalizers change only through /finalize.
        new["spec"] = old["spec"].clone();
    }

    fn field_labels(&self) -> &'static [&'static str] {
        &["status.phase"]
    }

    fn refuse_delete(&self, name: &str) -> Option<String> {
        super::IMMORTAL_NAMESPACES
            .contains(&name)
            .then(|| "this namespace may not be deleted".to_string())
    }

    fn held_by_spec(&self, obj: &Value) -> bool {
        obj.pointer("/spec/finalizers")
            .and_then(Value::as_array)
            .is_some_and(|f| !f.is_empty())
    }

    fn prepare_for_delete(&self, obj: &mut Value, now: &str) {
        let _ = now;
        obj["status"]["phase"] = json!("Terminating");
    }
}

fn check_data_keys(obj: &Value, errs: &mut Vec<FieldError>) {
    let data = obj.get("data").and_then(Value::as_object);
    let binary = obj.get("binaryData").and_then(Value::as_object);
    let mut total = 0usize;
    for (field, map) in [("data", data), ("binaryData", binary)] {
        for (k, v) in map.into_iter().flatten() {
            let ok = !k.is_empty()
                && k.len() <= 253
                && k.bytes()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'));
            if !ok {
                errs.push(FieldError::invalid(
                    format!("{field}[{k}]"),
                    Value::String(k.clone()),
                    "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')",
                ));
            }
            total += k.len() + v.as_str().map_or(0, str::len);
        }
    }
    if let (Some(d), Some(b)) = (data, binary) {
        for k in d.keys().filter(|k| b.contains_key(*k)) {
            errs.push(FieldError::invalid(
                format!("data[{k}]"),
                Value::String(k.clone()),
                "duplicate of key present in binaryData",
            ));
        }
    }
    if total > 1024 * 1024 {
        errs.push(FieldError::too_long("data", 1024 * 1024));
    }
}

fn check_immutable(new: &Value, old: &Value, errs: &mut Vec<FieldError>) {
    if old.get("immutable").and_then(Value::as_bool) != Some(true) {
        return;
    }
    if new.get("immutable").and_then(Value::as_bool) != Some(true) {
        errs.push(FieldError::forbidden(
            "immutable",
            "field is immutable when `immutable` is set",
        ));
    }
    if new.get("data") != old.get("data") || new.get("binaryData") != old.get("binaryData") {
        errs.push(FieldError::forbidden(
            "data",
            "field is immutable when `immutable` is set",
        ));
    }
}

/// ConfigMaps.
pub(super) struct ConfigMapStrategy;

impl Strategy for ConfigMapStrategy {
    fn decode(&self, obj: Value) -> Result<Decoded, String> {
        decode_typed::<core::ConfigMap>(obj)
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        check_data_keys(obj, &mut errs);
        errs
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = self.validate(new);
        check_immutable(new, old, &mut errs);
        errs
    }
}

/// Secrets: `type` defaults to Opaque and is immutable; `stringData` is folded into `data`.
pub(super) struct SecretStrategy;

fn fold_string_data(obj: &mut Value) {
    let Some(map) = obj.as_object_mut() else {
        return;
    };
    if let Some(Value::Object(strings)) = map.remove("stringData") {
        let data = map
            .entry("data")
            .or_insert_with(|| Value::Object(Default::default()));
        if !data.is_object() {
            *data = Value::Object(Default::default());
        }
        for (k, v) in strings {
            let encoded =
                base64::engine::general_purpose::STANDARD.encode(v.as_str().unwrap_or_default());
            data[k.as_str()] = Value::String(encoded);
        }
    }
}

impl Strategy for SecretStrategy {
    fn decode(&self, obj: Value) -> Result<Decoded, String> {
        decode_typed::<core::Secret>(obj)
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        fold_string_data(obj);
        if obj
            .get("type")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
        {
            obj["type"] = json!("Opaque");
        }
    }

    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        fold_string_data(new);
        if new
            .get("type")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
        {
            new["type"] = old.get("type").cloned().unwrap_or_else(|| json!("Opaque"));
        }
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        check_data_keys(obj, &mut errs);
        errs
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = self.validate(new);
        if new.get("type") != old.get("type") {
            errs.push(FieldError::invalid(
                "type",
                new.get("type").cloned().unwrap_or(Value::Null),
                "field is immutable",
            ));
        }
        check_immutable(new, old, &mut errs);
        errs
    }

    fn field_labels(&self) -> &'static [&'static str] {
        &["type"]
    }
}

/// ServiceAccounts.
pub(super) struct ServiceAccountStrategy;

impl Strategy for ServiceAccountStrategy {
    fn decode(&self, obj: Value) -> Result<Decoded, String> {
        decode_typed::<core::ServiceAccount>(obj)
    }

    fn returns_object_on_delete(&self) -> bool {
        true
    }
}

/// Services: defaults and a cluster IP from 10.96.0.0/12.
pub(super) struct ServiceStrategy {
    next_ip: AtomicU32,
}

impl ServiceStrategy {
    pub(super) fn new() -> Self {
        // Start at a random offset so restarts rarely hand out an address twice.
        let start = rand::random::<u32>() % (1 << 19) + 10;
        ServiceStrategy {
            next_ip: AtomicU32::new(start),
        }
    }

    /// An address of 10.96.0.0/12 other than the network and broadcast addresses and
    /// 10.96.0.1, which is the `default/kubernetes` Service's.
    fn allocate_ip(&self) -> String {
        let base = u32::from(Ipv4Addr::new(10, 96, 0, 0));
        let offset = self.next_ip.fetch_add(1, Ordering::Relaxed) % ((1 << 20) - 3) + 2;
        Ipv4Addr::from(base + offset).to_string()
    }
}

impl Strategy for ServiceStrategy {
    fn status_keeps_metadata(&self) -> Option<&'static [&'static str]> {
        Some(&[])
    }

    fn decode(&self, obj: Value) -> Result<Decoded, String> {
        decode_typed::<core::Service>(obj)
    }

    fn returns_object_on_delete(&self) -> bool {
        true
    }

    fn name_rule(&self) -> NameRule {
        NameRule::Dns1035Label
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        default_at(obj, &["spec", "type"], json!("ClusterIP"));
        default_at(obj, &["spec", "sessionAffinity"], json!("None"));
        let kind = obj["spec"]["type"]
            .as_str()
            .unwrap_or("ClusterIP")
            .to_string();
        if kind != "ExternalName" {
            default_at(obj, &["spec", "internalTrafficPolicy"], json!("Cluster"));
            default_at(obj, &["spec", "ipFamilies"], json!(["IPv4"]));
            default_at(obj, &["spec", "ipFamilyPolicy"], json!("SingleStack"));
            let ip = match obj["spec"]["clusterIP"].as_str() {
                Some(ip) if !ip.is_empty() => ip.to_string(),
                _ => self.allocate_ip(),
            };
            obj["spec"]["clusterIP"] = json!(ip);
            obj["spec"]["clusterIPs"] = json!([ip]);
        }
        if let Some(ports) = obj.pointer_mut("/spec/ports").and_then(Value::as_array_mut) {
            for p in ports {
                default_at(p, &["protocol"], json!("TCP"));
                if p.get("targetPort").is_none() {
                    p["targetPort"] = p["port"].clone();
                }
            }
        }
        obj["status"] = json!({"loadBalancer": {}});
    }

    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        if new["spec"].get("clusterIP").is_none_or(Value::is_null) {
            new["spec"]["clusterIP"] = old["spec"]["clusterIP"].clone();
            new["spec"]["clusterIPs"] = old["spec"]["clusterIPs"].clone();
        }
        if let Some(ports) = new.pointer_mut("/spec/ports").and_then(Value::as_array_mut) {
            for p in ports {
                default_at(p, &["protocol"], json!("TCP"));
                if p.get("targetPort").is_none() {
                    p["targetPort"] = p["port"].clone();
                }
            }
        }
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        let kind = obj["spec"]["type"].as_str().unwrap_or("ClusterIP");
        let headless = obj["spec"]["clusterIP"].as_str() == Some("None");
        let ports = obj["spec"]["ports"].as_array().map_or(0, Vec::len);
        if ports == 0 && kind != "ExternalName" && !headless {
            errs.push(FieldError::required("spec.ports", ""));
        }
        if !["ClusterIP", "NodePort", "LoadBalancer", "ExternalName"].contains(&kind) {
            errs.push(FieldError::not_supported(
                "spec.type",
                json!(kind),
                &["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"],
            ));
        }
        errs
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = self.validate(new);
        if new["spec"]["clusterIP"] != old["spec"]["clusterIP"] {
            errs.push(FieldError::invalid(
                "spec.clusterIP",
                new["spec"]["clusterIP"].clone(),
                "field is immutable",
            ));
        }
        errs
    }

    fn field_labels(&self) -> &'static [&'static str] {
        &["spec.clusterIP", "spec.type"]
    }
}

/// Fills the defaults Kubernetes gives a pod spec (also inside pod templates).
pub(super) fn default_pod_spec(spec: &mut Value) {
    if !spec.is_object() {
        return;
    }
    default_at(spec, &["restartPolicy"], json!("Always"));
    default_at(spec, &["terminationGracePeriodSeconds"], json!(30));
    default_at(spec, &["dnsPolicy"], json!("ClusterFirst"));
    default_at(spec, &["securityContext"], json!({}));
    default_at(spec, &["schedulerName"], json!("default-scheduler"));
    super::pod_defaults::default_pod_spec_parts(spec);
    for list in ["containers", "initContainers"] {
        // `get_mut`, not `spec[list]`: indexing a missing key would insert `null`.
        if let Some(containers) = spec.get_mut(list).and_then(Value::as_array_mut) {
            for c in containers {
                default_at(
                    c,
                    &["terminationMessagePath"],
                    json!("/dev/termination-log"),
                );
                default_at(c, &["terminationMessagePolicy"], json!("File"));
                default_at(c, &["resources"], json!({}));
                let image = c["image"].as_str().unwrap_or_default();
                let tag = image
                    .rsplit('/')
                    .next()
                    .and_then(|last| last.split_once(':'))
                    .map(|(_, t)| t);
                let policy = if image.contains('@') {
                    "IfNotPresent"
                } else if tag.is_none() || tag == Some("latest") {
                    "Always"
                } else {
                    "IfNotPresent"
                };
                default_at(c, &["imagePullPolicy"], json!(policy));
                if let Some(ports) = c.get_mut("ports").and_then(Value::as_array_mut) {
                    for p in ports {
                        default_at(p, &["protocol"], json!("TCP"));
                    }
                }
            }
        }
    }
}

/// Validates the containers of a pod spec at `path`.
pub(super) fn validate_pod_spec(spec: &Value, path: &str, errs: &mut Vec<FieldError>) {
    match spec["containers"].as_array() {
        Some(cs) if !cs.is_empty() => {
            let mut names = std::collections::BTreeSet::new();
            for (i, c) in cs.iter().enumerate() {
                match c["name"].as_str() {
                    Some(n) if !n.is_empty() => {
                        if !names.insert(n) {
                            errs.push(FieldError::duplicate(
                                format!("{path}.containers[{i}].name"),
                                json!(n),
                            ));
                        }
                    }
                    _ => errs.push(FieldError::required(
                        format!("{path}.containers[{i}].name"),
                        "",
                    )),
                }
                if c["image"].as_str().is_none_or(str::is_empty) {
                    errs.push(FieldError::required(
                        format!("{path}.containers[{i}].image"),
                        "",
                    ));
                }
            }
        }
        _ => errs.push(FieldError::required(format!("{path}.containers"), "")),
    }
}

/// Pods: stored only, nothing runs them.
pub(super) struct PodStrategy;

impl Strategy for PodStrategy {
    fn status_keeps_metadata(&self) -> Option<&'static [&'static str]> {
        Some(&["deletionTimestamp", "ownerReferences"])
    }

    fn decode(&self, obj: Value) -> Result<Decoded, String> {
        decode_typed::<core::Pod>(obj)
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        default_at(obj, &["spec", "enableServiceLinks"], json!(true));
        default_pod_spec(&mut obj["spec"]);
        super::pod_defaults::default_requests_from_limits(&mut obj["spec"]);
        let qos = super::pod_defaults::qos_class(&obj["spec"]);
        obj["status"] = json!({"phase": "Pending", "qosClass": qos});
    }

    fn prepare_for_update(&self, new: &mut Value, _old: &Value) {
        default_pod_spec(&mut new["spec"]);
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        validate_pod_spec(&obj["spec"], "spec", &mut errs);
        errs
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = self.validate(new);
        // Only images (and a few scheduling fields) may change once a pod exists.
        let strip = |spec: &Value| {
            let mut s = spec.clone();
            for list in ["containers", "initContainers"] {
                if let Some(cs) = s.get_mut(list).and_then(Value::as_array_mut) {
                    for c in cs {
                        if let Some(m) = c.as_object_mut() {
                            m.remove("image");
                        }
                    }
                }
            }
            if let Some(m) = s.as_object_mut() {
                m.remove("activeDeadlineSeconds");
                m.remove("tolerations");
            }
            s
        };
        if strip(&new["spec"]) != strip(&old["spec"]) {
            errs.push(FieldError::forbidden(
                "spec",
                "pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)",
            ));
        }
        errs
    }

    fn field_labels(&self) -> &'static [&'static str] {
        &[
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.podIPs",
            "status.nominatedNodeName",
        ]
    }

    fn field_value(&self, obj: &Value, label: &str) -> String {
        match label {
            "spec.hostNetwork" => obj["spec"]["hostNetwork"]
                .as_bool()
                .unwrap_or(false)
                .to_string(),
            "status.podIPs" => obj["status"]["podIPs"][0]["ip"]
                .as_str()
                .unwrap_or_default()
                .into(),
            _ => crate::registry::strategy::dotted(obj, label),
        }
    }

    fn returns_object_on_delete(&self) -> bool {
        true
    }

    /// A pod bound to a node and not terminal waits for its kubelet: the request's period,
    /// else `spec.terminationGracePeriodSeconds`; an unbound or finished pod goes at once.
    fn graceful_delete_period(&self, obj: &Value, requested: Option<i64>) -> Option<i64> {
        let unbound = obj["spec"]["nodeName"].as_str().is_none_or(str::is_empty);
        let terminal = matches!(
            obj["status"]["phase"].as_str(),
            Some("Succeeded" | "Failed")
        );
        if unbound || terminal {
            return Some(0);
        }
        Some(
            requested
                .or_else(|| obj["spec"]["terminationGracePeriodSeconds"].as_i64())
                .unwrap_or(0),
        )
    }
}

/// core/v1 Events (also the storage form of events.k8s.io/v1 Events).
pub(super) struct EventStrategy;

impl Strategy for EventStrategy {
    fn decode(&self, obj: Value) -> Result<Decoded, String> {
        decode_typed::<core::Event>(obj)
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        let involved = &obj["involvedObject"];
        if !involved.is_object() {
            errs.push(FieldError::required("involvedObject", ""));
        }
        let event_ns = obj["metadata"]["namespace"].as_str().unwrap_or_default();
        if let Some(ns) = involved["namespace"].as_str()
            && !ns.is_empty()
            && ns != event_ns
        {
            errs.push(FieldError::invalid(
                "involvedObject.namespace",
                json!(ns),
                "does not match event.namespace",
            ));
        }
        errs
    }

    fn allow_create_on_update(&self) -> bool {
        true
    }

    fn field_labels(&self) -> &'static [&'static str] {
        &[
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
        ]
    }

    fn field_value(&self, obj: &Value, label: &str) -> String {
        match label {
            "source" => obj["source"]["component"]
                .as_str()
                .unwrap_or_default()
                .into(),
            _ => crate::registry::strategy::dotted(obj, label),
        }
    }
}
