//! The `certificatesigningrequests/approval` subresource, and the rule it pairs with on
//! `certificatesigningrequests/status`.
//!
//! As in Kubernetes (`csrApprovalStrategy`), a write through `approval` changes only
//! `status.conditions` of the stored request; conditions get `lastUpdateTime` (and
//! `lastTransitionTime`) now when they come without. `Approved`, `Denied` and `Failed`
//! conditions must have status `True`, appear once, and `Approved` excludes `Denied`. An
//! `Approved` or `Denied` condition can be added only through `approval` and removed by
//! nobody.
//!
//! Not done here: signing. The server's CSR signer (`controllers/csr_signing.rs`) writes
//! `status.certificate` of approved requests for the `kubernetes.io/*` client and kubelet
//! signers through `status`, as kube-controller-manager's `csrsigning` controllers do.

use serde_json::{Value, json};

use super::now_rfc3339;
use crate::api::field::FieldError;

/// The conditions only `approval` may add.
const DECISIONS: [&str; 2] = ["Approved", "Denied"];
/// The conditions whose status must be `True`.
const TRUE_ONLY: [&str; 3] = ["Approved", "Denied", "Failed"];

fn conditions(csr: &Value) -> &[Value] {
    csr.pointer("/status/conditions")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

fn has(csr: &Value, ty: &str) -> bool {
    conditions(csr).iter().any(|c| c["type"] == ty)
}

/// The stored request `old` with the conditions of `new`.
pub(super) fn narrow(new: &Value, old: &Value) -> Value {
    let mut csr = old.clone();
    if let Some(rv) = new.pointer("/metadata/resourceVersion") {
        csr["metadata"]["resourceVersion"] = rv.clone();
    }
    if !csr["status"].is_object() {
        csr["status"] = json!({});
    }
    let now = now_rfc3339();
    let mut list: Vec<Value> = conditions(new).to_vec();
    for c in &mut list {
        let Some(m) = c.as_object_mut() else { continue };
        for field in ["lastUpdateTime", "lastTransitionTime"] {
            if m.get(field).is_none_or(Value::is_null) {
                m.insert(field.into(), json!(now));
            }
        }
    }
    if list.is_empty() {
        if let Some(m) = csr["status"].as_object_mut() {
            m.remove("conditions");
        }
    } else {
        csr["status"]["conditions"] = Value::Array(list);
    }
    csr
}

/// The checks of the conditions themselves.
fn validate_conditions(csr: &Value, errs: &mut Vec<FieldError>) {
    let mut seen: Vec<&str> = Vec::new();
    for (i, c) in conditions(csr).iter().enumerate() {
        let path = format!("status.conditions[{i}]");
        let ty = c["type"].as_str().unwrap_or_default();
        if ty.is_empty() {
            errs.push(FieldError::required(format!("{path}.type"), ""));
            continue;
        }
        if TRUE_ONLY.contains(&ty) {
            if seen.contains(&ty) {
                errs.push(FieldError::duplicate(format!("{path}.type"), json!(ty)));
            }
            seen.push(ty);
            let status = c["status"].as_str().unwrap_or_default();
            if status != "True" {
                errs.push(FieldError::not_supported(
                    format!("{path}.status"),
                    json!(status),
                    &["True"],
                ));
            }
        }
    }
    if has(csr, "Approved") && has(csr, "Denied") {
        errs.push(FieldError::invalid(
            "status.conditions",
            csr["status"]["conditions"].clone(),
            "Approved and Denied conditions are mutually exclusive",
        ));
    }
}

/// The checks of a write through `approval`.
pub(super) fn validate(new: &Value, old: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    validate_conditions(new, &mut errs);
    for ty in DECISIONS {
        if has(old, ty) && !has(new, ty) {
            errs.push(FieldError::forbidden(
                "status.conditions",
                format!("updates may not remove a condition of type {ty:?}"),
            ));
        }
    }
    errs
}

/// The extra checks of a write through `status`: no decision added or removed, and an issued
/// certificate stays.
pub(super) fn validate_status(new: &Value, old: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    validate_conditions(new, &mut errs);
    for ty in DECISIONS {
        match (has(old, ty), has(new, ty)) {
            (true, false) => errs.push(FieldError::forbidden(
                "status.conditions",
                format!("updates may not remove a condition of type {ty:?}"),
            )),
            (false, true) => errs.push(FieldError::forbidden(
                "status.conditions",
                format!("updates may not add a condition of type {ty:?}"),
            )),
            _ => {}
        }
    }
    let before = old.pointer("/status/certificate").and_then(Value::as_str);
    if before.is_some_and(|c| !c.is_empty())
        && new.pointer("/status/certificate").and_then(Value::as_str) != before
    {
        errs.push(FieldError::forbidden(
            "status.certificate",
            "updates may not modify existing certificate content",
        ));
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn approval_changes_only_conditions_and_stamps_them() {
        let old = json!({"metadata": {"name": "c", "labels": {"a": "1"}},
            "spec": {"signerName": "x"}, "status": {}});
        let new = json!({"metadata": {"name": "c", "labels": {"a": "2"}},
            "spec": {"signerName": "y"},
            "status": {"conditions": [{"type": "Approved", "status": "True"}],
                       "certificate": "Zm9v"}});
        let out = narrow(&new, &old);
        assert_eq!(out["metadata"]["labels"]["a"], "1");
        assert_eq!(out["spec"]["signerName"], "x");
        assert!(out["status"].get("certificate").is_none());
        assert!(out["status"]["conditions"][0]["lastUpdateTime"].is_string());
        assert!(validate(&out, &old).is_empty());
    }

    #[test]
    fn decisions_are_exclusive_and_kept() {
        let approved = json!({"status": {"conditions": [{"type": "Approved", "status": "True"}]}});
        let both = json!({"status": {"conditions": [
            {"type": "Approved", "status": "True"}, {"type": "Denied", "status": "True"}]}});
        assert!(
            validate(&both, &approved)
                .iter()
                .any(|e| e.detail.contains("mutually exclusive"))
        );
        let none = json!({"status": {}});
        assert!(
            validate(&none, &approved)[0]
                .detail
                .contains("may not remove")
        );
        assert!(
            validate_status(&approved, &none)[0]
                .detail
                .contains("may not add")
        );
    }
}
