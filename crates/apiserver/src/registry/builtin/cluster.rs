//! Cluster configuration kinds stored and checked here, acted upon elsewhere (or not yet):
//! node.k8s.io/v1 RuntimeClass, certificates.k8s.io/v1 CertificateSigningRequest, the four
//! admissionregistration.k8s.io/v1 kinds and flowcontrol.apiserver.k8s.io/v1's two.

use k8s_openapi::api::admissionregistration::v1 as admission;
use k8s_openapi::api::certificates::v1 as certificates;
use k8s_openapi::api::flowcontrol::v1 as flowcontrol;
use k8s_openapi::api::node::v1 as node;
use serde_json::{Value, json};

use super::typed::{Typed, immutable};
use crate::api::field::FieldError;
use crate::api::validation::{NameRule, check_name, is_label, is_subdomain};
use crate::auth::csr;
use crate::registry::strategy::default_at;

/// RuntimeClasses: `handler` is required and immutable.
pub(super) fn runtime_class() -> Typed<node::RuntimeClass> {
    Typed::new()
        .validate(|obj| {
            let mut errs = Vec::new();
            if obj["handler"].as_str().is_none_or(str::is_empty) {
                errs.push(FieldError::required("handler", ""));
            }
            errs
        })
        .validate_update(|new, old| {
            let mut errs = Vec::new();
            immutable(new, old, &["handler"], &mut errs);
            errs
        })
}

/// CertificateSigningRequests, checked as Kubernetes checks them on create and update: a
/// `request` that is a PEM certificate request whose signature verifies, known usages (at
/// least one, none twice), a signer name of the form `example.com/name`, no expiration under
/// ten minutes; the spec is immutable; a new request has an empty status. Approved ones are
/// signed by `controllers/csr_signing.rs`.
pub(super) fn certificate_signing_request() -> Typed<certificates::CertificateSigningRequest> {
    Typed::new()
        .initial_status(|| json!({}))
        .validate(|obj| {
            let mut errs = Vec::new();
            let spec = &obj["spec"];
            if let Err(why) = csr_request(spec) {
                errs.push(FieldError::invalid(
                    "spec.request",
                    spec["request"].clone(),
                    why,
                ));
            }
            let usages = spec["usages"].as_array().map_or(&[][..], Vec::as_slice);
            if usages.is_empty() {
                errs.push(FieldError::required(
                    "spec.usages",
                    "usages must be provided",
                ));
            }
            let mut seen = Vec::new();
            for (i, usage) in usages.iter().enumerate() {
                let path = format!("spec.usages[{i}]");
                let text = usage.as_str().unwrap_or_default();
                if !csr::VALID_USAGES.contains(&text) {
                    let mut allowed = csr::VALID_USAGES;
                    allowed.sort_unstable();
                    errs.push(FieldError::not_supported(path, usage.clone(), &allowed));
                } else if seen.contains(&text) {
                    errs.push(FieldError::duplicate(path, usage.clone()));
                }
                seen.push(text);
            }
            errs.extend(signer_name_errors(
                spec["signerName"].as_str().unwrap_or_default(),
            ));
            if let Some(seconds) = spec["expirationSeconds"].as_i64()
                && seconds < 600
            {
                errs.push(FieldError::invalid(
                    "spec.expirationSeconds",
                    json!(seconds),
                    "may not specify a duration less than 600 seconds (10 minutes)",
                ));
            }
            errs
        })
        .validate_update(|new, old| {
            let mut errs = Vec::new();
            immutable(new, old, &["spec", "request"], &mut errs);
            immutable(new, old, &["spec", "signerName"], &mut errs);
            errs
        })
}

/// The PEM of `spec.request` (base64 in JSON), checked.
fn csr_request(spec: &Value) -> Result<(), String> {
    use base64::Engine as _;
    let text = spec["request"].as_str().unwrap_or_default();
    let pem = base64::engine::general_purpose::STANDARD
        .decode(text)
        .map_err(|_| "PEM block type must be CERTIFICATE REQUEST".to_owned())?;
    csr::check_request(&pem)
}

/// A signer name's errors, as Kubernetes' `ValidateCertificateSigningRequestSignerName`: a
/// domain of at least two DNS labels, one `/`, and a path of DNS subdomains separated by dots.
fn signer_name_errors(name: &str) -> Vec<FieldError> {
    const PATH: &str = "spec.signerName";
    if name.is_empty() {
        return vec![FieldError::required(PATH, "signerName must be provided")];
    }
    let Some((domain, path)) = name.split_once('/').filter(|(_, p)| !p.contains('/')) else {
        return vec![FieldError::invalid(
            PATH,
            json!(name),
            "must be a fully qualified domain and path of the form 'example.com/signer-name'",
        )];
    };
    let mut errs = Vec::new();
    if domain.len() > 253 {
        errs.push(FieldError::too_long(PATH, 253));
    }
    let labels: Vec<&str> = domain.split('.').collect();
    if let Some(bad) = labels.iter().find(|l| !is_label(l)) {
        for why in check_name(NameRule::Label, bad) {
            errs.push(FieldError::invalid(
                PATH,
                json!(domain),
                format!("validating label {bad:?}: {why}"),
            ));
        }
    }
    if labels.len() < 2 {
        errs.push(FieldError::invalid(
            PATH,
            json!(domain),
            "should be a domain with at least two segments separated by dots",
        ));
    }
    if let Some(bad) = path.split('.').find(|l| !is_subdomain(l)) {
        for why in check_name(NameRule::Subdomain, bad) {
            errs.push(FieldError::invalid(
                PATH,
                json!(path),
                format!("validating label {bad:?}: {why}"),
            ));
        }
    }
    // A domain, one dot, a namespace and a resource name: 253 + 1 + (253 + 63 + 1).
    if name.len() > 571 {
        errs.push(FieldError::too_long(PATH, 571));
    }
    errs
}

/// The defaults of one webhook of a (Validating|Mutating)WebhookConfiguration, as Kubernetes'
/// `SetDefaults_ValidatingWebhook` / `SetDefaults_MutatingWebhook`.
fn default_webhooks(obj: &mut Value, mutating: bool) {
    if let Some(hooks) = obj.get_mut("webhooks").and_then(Value::as_array_mut) {
        for hook in hooks {
            default_at(hook, &["failurePolicy"], json!("Fail"));
            default_at(hook, &["matchPolicy"], json!("Equivalent"));
            default_at(hook, &["namespaceSelector"], json!({}));
            default_at(hook, &["objectSelector"], json!({}));
            default_at(hook, &["timeoutSeconds"], json!(10));
            if mutating {
                default_at(hook, &["reinvocationPolicy"], json!("Never"));
            }
            if let Some(rules) = hook.get_mut("rules").and_then(Value::as_array_mut) {
                for rule in rules {
                    default_at(rule, &["scope"], json!("*"));
                }
            }
            if let Some(service) = hook
                .get_mut("clientConfig")
                .and_then(|c| c.get_mut("service"))
                .filter(|s| s.is_object())
            {
                default_at(service, &["port"], json!(443));
            }
        }
    }
}

/// The side effects a v1 webhook may declare (v1 has no default: the field is required).
const SIDE_EFFECTS: [&str; 2] = ["None", "NoneOnDryRun"];

fn validate_webhooks(obj: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let hooks = obj["webhooks"].as_array().into_iter().flatten();
    let mut names = std::collections::BTreeSet::new();
    for (i, hook) in hooks.enumerate() {
        let name = hook["name"].as_str().unwrap_or_default();
        if name.is_empty() {
            errs.push(FieldError::required(format!("webhooks[{i}].name"), ""));
        } else if !names.insert(name) {
            errs.push(FieldError::duplicate(
                format!("webhooks[{i}].name"),
                json!(name),
            ));
        }
        if hook["admissionReviewVersions"]
            .as_array()
            .is_none_or(Vec::is_empty)
        {
            errs.push(FieldError::required(
                format!("webhooks[{i}].admissionReviewVersions"),
                "must specify one of v1, v1beta1",
            ));
        }
        // k8s-openapi reads a missing `sideEffects` as "".
        match hook["sideEffects"].as_str() {
            None | Some("") => errs.push(FieldError::required(
                format!("webhooks[{i}].sideEffects"),
                "must specify one of None, NoneOnDryRun",
            )),
            Some(effects) if !SIDE_EFFECTS.contains(&effects) => {
                errs.push(FieldError::not_supported(
                    format!("webhooks[{i}].sideEffects"),
                    json!(effects),
                    &SIDE_EFFECTS,
                ));
            }
            Some(_) => {}
        }
        let config = &hook["clientConfig"];
        if config["url"].is_null() == config["service"].is_null() {
            errs.push(FieldError::required(
                format!("webhooks[{i}].clientConfig"),
                "exactly one of url or service is required",
            ));
        }
    }
    errs
}

/// ValidatingWebhookConfigurations.
pub(super) fn validating_webhook_configuration() -> Typed<admission::ValidatingWebhookConfiguration>
{
    Typed::new()
        .defaults(|obj| default_webhooks(obj, false))
        .validate(validate_webhooks)
}

/// MutatingWebhookConfigurations.
pub(super) fn mutating_webhook_configuration() -> Typed<admission::MutatingWebhookConfiguration> {
    Typed::new()
        .defaults(|obj| default_webhooks(obj, true))
        .validate(validate_webhooks)
}

/// ValidatingAdmissionPolicies: `failurePolicy` defaults to `Fail`, `matchConstraints`'
/// `matchPolicy` to `Equivalent`.
pub(super) fn validating_admission_policy() -> Typed<admission::ValidatingAdmissionPolicy> {
    Typed::new()
        .generation()
        .initial_status(|| json!({}))
        .defaults(|obj| {
            default_at(obj, &["spec", "failurePolicy"], json!("Fail"));
            if obj["spec"]["matchConstraints"].is_object() {
                let constraints = &mut obj["spec"]["matchConstraints"];
                default_at(constraints, &["matchPolicy"], json!("Equivalent"));
                default_at(constraints, &["namespaceSelector"], json!({}));
                default_at(constraints, &["objectSelector"], json!({}));
            }
        })
        .validate(|obj| {
            let mut errs = Vec::new();
            let spec = &obj["spec"];
            let has_checks = ["validations", "auditAnnotations"]
                .iter()
                .any(|f| spec[*f].as_array().is_some_and(|a| !a.is_empty()));
            if !has_checks {
                errs.push(FieldError::required(
                    "spec.validations",
                    "validations or auditAnnotations must contain at least one item",
                ));
            }
            errs
        })
}

/// ValidatingAdmissionPolicyBindings: `policyName` is required.
pub(super) fn validating_admission_policy_binding()
-> Typed<admission::ValidatingAdmissionPolicyBinding> {
    Typed::new().generation().validate(|obj| {
        let mut errs = Vec::new();
        if obj["spec"]["policyName"].as_str().is_none_or(str::is_empty) {
            errs.push(FieldError::required("spec.policyName", ""));
        }
        errs
    })
}

/// FlowSchemas: stored; nothing applies them.
pub(super) fn flow_schema() -> Typed<flowcontrol::FlowSchema> {
    Typed::new().generation().initial_status(|| json!({}))
}

/// PriorityLevelConfigurations: stored; nothing applies them.
pub(super) fn priority_level_configuration() -> Typed<flowcontrol::PriorityLevelConfiguration> {
    Typed::new().generation().initial_status(|| json!({}))
}
