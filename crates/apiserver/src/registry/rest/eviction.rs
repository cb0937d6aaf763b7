//! The `pods/eviction` subresource: `POST` a policy/v1 (or v1beta1) `Eviction` to delete a pod
//! the way a drain does, only if the pod's PodDisruptionBudget allows it.
//!
//! The steps are Kubernetes' (`pkg/registry/core/pod/storage/eviction.go`):
//!
//! 1. A pod that already disrupts nothing (phase `Pending`, `Succeeded`, `Failed`, or being
//!    deleted) is deleted without looking at budgets.
//! 2. The budgets of the pod's namespace whose selector matches its labels are found (an empty
//!    or invalid selector matches nothing). More than one: the answer is a `Status` with code
//!    500, as Kubernetes does not support that. None: the pod is deleted.
//! 3. An unready pod is deleted without spending the budget when the budget's
//!    `unhealthyPodEvictionPolicy` is `AlwaysAllow`, or (`IfHealthyBudget`, the default) when the
//!    budget has its desired healthy pods; the delete then carries the pod's resourceVersion
//!    as a precondition, and losing that race answers 429.
//! 4. Otherwise the budget is checked and spent in one storage update: a budget whose status is
//!    older than its spec (`status.observedGeneration < metadata.generation`) answers 429 with
//!    `retryAfterSeconds` 10; a negative `disruptionsAllowed` or more than 2000 `disruptedPods`
//!    answer 403; zero answers 429 "Cannot evict pod as it would violate the pod's disruption
//!    budget." with a `DisruptionBudget` cause. Else `disruptionsAllowed` goes down by one (the
//!    `DisruptionAllowed` condition turns `False` at zero) and the pod is recorded in
//!    `status.disruptedPods`.
//! 5. The pod is deleted with the eviction's `deleteOptions` (the pod's own delete rules
//!    apply); the answer is a `Status` of `Success` with code 201.
//!
//! The server computes no budget itself: `disruptionsAllowed`, `currentHealthy`,
//! `desiredHealthy` and `observedGeneration` are what the status subresource last wrote —
//! by kore's disruption controller (kore-controller-manager) when it runs.

use serde_json::{Value, json};

use super::{DeleteOptions, now_rfc3339};
use crate::api::error::{ApiError, GroupResource};
use crate::registry::Registry;
use crate::selector::LabelSelector;
use crate::storage::{Preconditions, Update};

/// The most pods a budget may record as being disrupted before evictions stop.
const MAX_DISRUPTED_PODS: usize = 2000;
/// The message of a refused eviction.
const REFUSED: &str = "Cannot evict pod as it would violate the pod's disruption budget.";
/// The cause type naming a disruption budget.
const BUDGET_CAUSE: &str = "DisruptionBudget";

/// The 429 of a budget whose status the server has not caught up with.
fn still_processing(pdb: &str) -> ApiError {
    ApiError::TooManyRequestsBecause {
        message: REFUSED.into(),
        retry_after_seconds: 10,
        causes: vec![json!({"reason": BUDGET_CAUSE,
            "message": format!("The disruption budget {pdb} is still being processed by the server.")})],
    }
}

fn pdb_forbidden(name: &str, why: &str) -> ApiError {
    let resource = GroupResource {
        group: "policy".into(),
        resource: "poddisruptionbudget".into(),
    };
    ApiError::Forbidden {
        message: format!("{resource} {name:?} is forbidden: {why}"),
        resource,
        name: Some(name.into()),
        causes: Vec::new(),
    }
}

/// `DeleteOptions` as the eviction carries them.
fn delete_options(v: &Value) -> Result<DeleteOptions, ApiError> {
    let mut opts = DeleteOptions {
        grace_period_seconds: v.get("gracePeriodSeconds").and_then(Value::as_i64),
        orphan_dependents: v.get("orphanDependents").and_then(Value::as_bool),
        dry_run: v
            .get("dryRun")
            .and_then(Value::as_array)
            .is_some_and(|a| a.iter().any(|d| d == "All")),
        ..DeleteOptions::default()
    };
    let pre = &v["preconditions"];
    opts.preconditions =
        Preconditions {
            uid: pre["uid"]
                .as_str()
                .filter(|s| !s.is_empty())
                .map(String::from),
            resource_version: match pre["resourceVersion"].as_str() {
                Some(rv) if !rv.is_empty() => Some(rv.parse().map_err(|_| {
                    ApiError::BadRequest(format!("invalid resource version: {rv:?}"))
                })?),
                _ => None,
            },
        };
    opts.propagation = DeleteOptions::parse_propagation(
        v.get("propagationPolicy").and_then(Value::as_str),
        opts.orphan_dependents,
    )?;
    Ok(opts)
}

fn phase(pod: &Value) -> &str {
    pod.pointer("/status/phase")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

fn being_deleted(pod: &Value) -> bool {
    pod.pointer("/metadata/deletionTimestamp")
        .is_some_and(|v| !v.is_null())
}

/// A pod whose eviction disrupts nothing more.
fn can_ignore_budget(pod: &Value) -> bool {
    matches!(phase(pod), "Pending" | "Succeeded" | "Failed") || being_deleted(pod)
}

fn is_ready(pod: &Value) -> bool {
    pod.pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Ready" && c["status"] == "True")
}

/// Whether `pdb` selects `pod`; an empty or invalid selector selects nothing.
fn selects(pdb: &Value, pod: &Value) -> bool {
    let Some(selector) = pdb
        .pointer("/spec/selector")
        .filter(|s| s.as_object().is_some_and(|m| !m.is_empty()))
    else {
        return false;
    };
    match LabelSelector::from_label_selector_json(selector) {
        Ok(s) if !s.is_empty() => {
            s.matches(pod.pointer("/metadata/labels").and_then(Value::as_object))
        }
        _ => false,
    }
}

/// Checks that `pdb` allows one more disruption and spends it (step 4 of the module doc).
fn check_and_decrement(pdb: &mut Value, pod: &str, dry_run: bool) -> Result<(), ApiError> {
    let name = pdb["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let status = &pdb["status"];
    let observed = status["observedGeneration"].as_i64().unwrap_or(0);
    let generation = pdb["metadata"]["generation"].as_i64().unwrap_or(0);
    if observed < generation {
        return Err(still_processing(&name));
    }
    let allowed = status["disruptionsAllowed"].as_i64().unwrap_or(0);
    if allowed < 0 {
        return Err(pdb_forbidden(&name, "pdb disruptions allowed is negative"));
    }
    if status["disruptedPods"]
        .as_object()
        .is_some_and(|m| m.len() > MAX_DISRUPTED_PODS)
    {
        return Err(pdb_forbidden(
            &name,
            "DisruptedPods map too big - too many evictions not confirmed by PDB controller",
        ));
    }
    if allowed == 0 {
        return Err(ApiError::TooManyRequestsBecause {
            message: REFUSED.into(),
            retry_after_seconds: 0,
            causes: vec![json!({"reason": BUDGET_CAUSE, "message": format!(
                "The disruption budget {name} needs {} healthy pods and has {} currently",
                status["desiredHealthy"].as_i64().unwrap_or(0),
                status["currentHealthy"].as_i64().unwrap_or(0))})],
        });
    }
    if dry_run {
        return Ok(());
    }
    let now = now_rfc3339();
    if !pdb["status"].is_object() {
        pdb["status"] = json!({});
    }
    let status = &mut pdb["status"];
    status["disruptionsAllowed"] = json!(allowed - 1);
    if allowed - 1 == 0 {
        set_insufficient(status, observed, &now);
    }
    if !status["disruptedPods"].is_object() {
        status["disruptedPods"] = json!({});
    }
    status["disruptedPods"][pod] = json!(now);
    Ok(())
}

/// Sets the `DisruptionAllowed` condition to `False` (reason `InsufficientPods`).
fn set_insufficient(status: &mut Value, observed: i64, now: &str) {
    if !status["conditions"].is_array() {
        status["conditions"] = json!([]);
    }
    let Some(conditions) = status["conditions"].as_array_mut() else {
        return;
    };
    let fresh = json!({"type": "DisruptionAllowed", "status": "False",
        "observedGeneration": observed, "lastTransitionTime": now,
        "reason": "InsufficientPods", "message": ""});
    match conditions
        .iter_mut()
        .find(|c| c["type"] == "DisruptionAllowed")
    {
        Some(c) if c["status"] == "False" => {
            c["reason"] = json!("InsufficientPods");
            c["observedGeneration"] = json!(observed);
        }
        Some(c) => *c = fresh,
        None => conditions.push(fresh),
    }
}

/// What a successful eviction answers.
fn success() -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201})
}

impl Registry {
    /// `POST …/namespaces/{ns}/pods/{name}/eviction` with `eviction` as its body; `dry_run` is
    /// the request's `dryRun=All`. Answers the `Status` to send (its `code` is the HTTP
    /// status: 201, or 500 for a pod with several budgets) or the error.
    pub async fn evict_pod(
        &self,
        ns: &str,
        name: &str,
        eviction: &Value,
        dry_run: bool,
    ) -> Result<Value, ApiError> {
        let api_version = eviction["apiVersion"].as_str().unwrap_or("policy/v1");
        let kind = eviction["kind"].as_str().unwrap_or("Eviction");
        if kind != "Eviction" || !["policy/v1", "policy/v1beta1"].contains(&api_version) {
            return Err(ApiError::BadRequest(format!(
                "the body of the request must be a policy/v1 Eviction, not {api_version} {kind}"
            )));
        }
        if eviction.pointer("/metadata/name").and_then(Value::as_str) != Some(name) {
            return Err(ApiError::BadRequest(
                "name in URL does not match name in Eviction object".into(),
            ));
        }
        if let Some(body_ns) = eviction
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty() && *s != ns)
        {
            return Err(ApiError::BadRequest(format!(
                "the namespace of the provided object ({body_ns}) does not match the namespace sent on the request ({ns})"
            )));
        }
        let mut opts = delete_options(&eviction["deleteOptions"])?;
        let body_dry_run = eviction
            .pointer("/deleteOptions/dryRun")
            .and_then(Value::as_array)
            .is_some_and(|a| !a.is_empty());
        if dry_run && body_dry_run && !opts.dry_run {
            return Err(ApiError::Internal(
                "Non-matching dry-run options in request and content".into(),
            ));
        }
        opts.dry_run |= dry_run;
        let catalog = self.catalog();
        let pods = catalog.find("", "v1", "pods").ok_or(ApiError::NoSuchPath)?;
        let pod = self.get_value(&pods, Some(ns), name)?;
        let pod_rv = pod
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
            .and_then(|s| s.parse::<u64>().ok());
        let rv_unset = opts.preconditions.resource_version.is_none();

        if can_ignore_budget(&pod) {
            let mut delete = opts.clone();
            if rv_unset && !matches!(phase(&pod), "Succeeded" | "Failed") && !being_deleted(&pod) {
                delete.preconditions.resource_version = pod_rv;
            }
            self.delete(&pods, Some(ns), name, &delete).await?;
            return Ok(success());
        }

        let budgets = catalog
            .find("policy", "v1", "poddisruptionbudgets")
            .ok_or(ApiError::NoSuchPath)?;
        let listed = self
            .list(
                &budgets,
                Some(ns),
                &crate::api::options::ListParams::default(),
            )
            .await?;
        let matching: Vec<Value> = listed
            .items
            .iter()
            .filter_map(|b| serde_json::from_slice::<Value>(b).ok())
            .filter(|pdb| selects(pdb, &pod))
            .collect();
        if matching.len() > 1 {
            return Ok(json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
                "status": "Failure", "code": 500, "message":
                "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."}));
        }
        let mut guard_rv = false;
        if let Some(pdb) = matching.first() {
            let status = &pdb["status"];
            let always_allow =
                pdb.pointer("/spec/unhealthyPodEvictionPolicy") == Some(&json!("AlwaysAllow"));
            let desired = status["desiredHealthy"].as_i64().unwrap_or(0);
            let healthy = status["currentHealthy"].as_i64().unwrap_or(0);
            if !is_ready(&pod) && (always_allow || (healthy >= desired && desired > 0)) {
                guard_rv = true;
            } else {
                let pdb_name = pdb["metadata"]["name"].as_str().unwrap_or_default();
                let key = budgets.key(Some(ns), pdb_name);
                let mut refusal: Option<ApiError> = None;
                let dry = opts.dry_run;
                let mut step = |mut current: Value| -> Update {
                    match check_and_decrement(&mut current, name, dry) {
                        Ok(()) if dry => Update::Abort,
                        Ok(()) => Update::Put(current),
                        Err(e) => {
                            refusal = Some(e);
                            Update::Abort
                        }
                    }
                };
                let result = self
                    .storage()
                    .guaranteed_update(&key, &Preconditions::default(), &mut step)
                    .await;
                if let Some(e) = refusal {
                    return Err(e);
                }
                if !dry {
                    result.map_err(|e| {
                        ApiError::from_storage(e, &budgets.group_resource(), pdb_name)
                    })?;
                }
            }
        }
        let mut delete = opts.clone();
        if guard_rv {
            delete.preconditions.resource_version = pod_rv;
        }
        match self.delete(&pods, Some(ns), name, &delete).await {
            Err(ApiError::Conflict { .. }) if guard_rv && rv_unset => {
                let pdb = matching
                    .first()
                    .and_then(|p| p["metadata"]["name"].as_str())
                    .unwrap_or_default();
                Err(still_processing(pdb))
            }
            Err(e) => Err(e),
            Ok(_) => Ok(success()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_budget_is_spent_once_and_then_refuses() {
        let mut pdb = json!({"metadata": {"name": "b", "generation": 1},
            "status": {"observedGeneration": 1, "disruptionsAllowed": 1,
                       "currentHealthy": 2, "desiredHealthy": 1}});
        check_and_decrement(&mut pdb, "p", false).expect("allowed");
        assert_eq!(pdb["status"]["disruptionsAllowed"], 0);
        assert!(pdb["status"]["disruptedPods"]["p"].is_string());
        assert_eq!(pdb["status"]["conditions"][0]["reason"], "InsufficientPods");
        let err = check_and_decrement(&mut pdb, "q", false).expect_err("spent");
        assert_eq!(err.code().as_u16(), 429);
        assert_eq!(err.to_string(), REFUSED);
    }

    #[test]
    fn a_stale_budget_or_a_negative_one_refuses() {
        let mut stale = json!({"metadata": {"name": "b", "generation": 2},
            "status": {"observedGeneration": 1, "disruptionsAllowed": 3}});
        let err = check_and_decrement(&mut stale, "p", false).expect_err("stale");
        assert_eq!(err.status()["details"]["retryAfterSeconds"], 10);
        let mut negative = json!({"metadata": {"name": "b"},
            "status": {"disruptionsAllowed": -1}});
        let err = check_and_decrement(&mut negative, "p", false).expect_err("negative");
        assert_eq!(err.code().as_u16(), 403);
    }

    #[test]
    fn empty_selectors_select_nothing() {
        let pod = json!({"metadata": {"labels": {"app": "a"}}});
        assert!(!selects(&json!({"spec": {"selector": {}}}), &pod));
        assert!(!selects(&json!({"spec": {}}), &pod));
        assert!(selects(
            &json!({"spec": {"selector": {"matchLabels": {"app": "a"}}}}),
            &pod
        ));
    }
}
