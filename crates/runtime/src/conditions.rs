//! Status conditions (`metav1.Condition`): set or replace by type, following the Kubernetes
//! API conventions.
//!
//! # Guarantees
//! - One condition per `type`: [`set_condition`] replaces the existing one in place (order is
//!   kept) or appends a new one.
//! - `lastTransitionTime` moves only when `status` changes (or the condition is new). A new
//!   reason, message or observedGeneration updates those fields and keeps the time.
//! - The return value says whether anything changed, so a caller can skip writing status
//!   (see also [`crate::status`], which skips unchanged writes on its own).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;

/// The status of a condition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConditionStatus {
    /// `"True"`.
    True,
    /// `"False"`.
    False,
    /// `"Unknown"`.
    Unknown,
}

impl ConditionStatus {
    /// The wire form.
    pub fn as_str(self) -> &'static str {
        match self {
            ConditionStatus::True => "True",
            ConditionStatus::False => "False",
            ConditionStatus::Unknown => "Unknown",
        }
    }
}

impl From<bool> for ConditionStatus {
    fn from(b: bool) -> Self {
        if b {
            ConditionStatus::True
        } else {
            ConditionStatus::False
        }
    }
}

/// The condition a controller wants in place; see [`set_condition`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub struct DesiredCondition {
    type_: String,
    status: ConditionStatus,
    reason: String,
    message: String,
    observed_generation: Option<i64>,
}

impl DesiredCondition {
    /// A condition of `type_` with `status`. Kubernetes requires a reason (CamelCase); set one
    /// with [`DesiredCondition::reason`].
    pub fn new(type_: impl Into<String>, status: impl Into<ConditionStatus>) -> Self {
        DesiredCondition {
            type_: type_.into(),
            status: status.into(),
            reason: String::new(),
            message: String::new(),
            observed_generation: None,
        }
    }

    /// A CamelCase reason for the status.
    pub fn reason(mut self, reason: impl Into<String>) -> Self {
        self.reason = reason.into();
        self
    }

    /// A human-readable message.
    pub fn message(mut self, message: impl Into<String>) -> Self {
        self.message = message.into();
        self
    }

    /// The `metadata.generation` the controller acted on.
    pub fn observed_generation(mut self, generation: Option<i64>) -> Self {
        self.observed_generation = generation;
        self
    }
}

/// Sets `desired` in `conditions` with the current time as a possible transition time;
/// returns whether anything changed. See [`set_condition_with`].
pub fn set_condition(conditions: &mut Vec<Condition>, desired: DesiredCondition) -> bool {
    set_condition_with(conditions, desired, Time(Timestamp::now()))
}

/// Sets `desired` in `conditions`, using `now` as the transition time if the status changed
/// or the condition is new; returns whether anything changed.
pub fn set_condition_with(
    conditions: &mut Vec<Condition>,
    desired: DesiredCondition,
    now: Time,
) -> bool {
    let status = desired.status.as_str();
    let Some(existing) = conditions.iter_mut().find(|c| c.type_ == desired.type_) else {
        conditions.push(Condition {
            type_: desired.type_,
            status: status.to_string(),
            reason: desired.reason,
            message: desired.message,
            observed_generation: desired.observed_generation,
            last_transition_time: now,
        });
        return true;
    };
    let mut changed = false;
    if existing.status != status {
        existing.status = status.to_string();
        existing.last_transition_time = now;
        changed = true;
    }
    if existing.reason != desired.reason {
        existing.reason = desired.reason;
        changed = true;
    }
    if existing.message != desired.message {
        existing.message = desired.message;
        changed = true;
    }
    if existing.observed_generation != desired.observed_generation {
        existing.observed_generation = desired.observed_generation;
        changed = true;
    }
    changed
}

/// The condition of `type_`, if present.
pub fn find_condition<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// Whether the condition of `type_` is present with status `"True"`.
pub fn is_condition_true(conditions: &[Condition], type_: &str) -> bool {
    find_condition(conditions, type_).is_some_and(|c| c.status == "True")
}

/// Removes the condition of `type_`; returns whether it was present.
pub fn remove_condition(conditions: &mut Vec<Condition>, type_: &str) -> bool {
    let before = conditions.len();
    conditions.retain(|c| c.type_ != type_);
    conditions.len() != before
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: i64) -> Time {
        Time(Timestamp::from_second(secs).expect("a valid second"))
    }

    fn ready(status: bool) -> DesiredCondition {
        DesiredCondition::new("Ready", status)
            .reason("Reconciled")
            .observed_generation(Some(1))
    }

    #[test]
    fn a_new_condition_is_appended_with_the_transition_time() {
        let mut conds = Vec::new();
        assert!(set_condition_with(&mut conds, ready(true), at(10)));
        assert_eq!(conds.len(), 1);
        assert_eq!(conds[0].status, "True");
        assert_eq!(conds[0].reason, "Reconciled");
        assert_eq!(conds[0].observed_generation, Some(1));
        assert_eq!(conds[0].last_transition_time, at(10));
    }

    #[test]
    fn setting_the_same_condition_again_changes_nothing() {
        let mut conds = Vec::new();
        set_condition_with(&mut conds, ready(true), at(10));
        let before = conds.clone();
        assert!(!set_condition_with(&mut conds, ready(true), at(20)));
        assert_eq!(conds, before);
    }

    #[test]
    fn a_status_change_moves_the_transition_time() {
        let mut conds = Vec::new();
        set_condition_with(&mut conds, ready(true), at(10));
        assert!(set_condition_with(&mut conds, ready(false), at(20)));
        assert_eq!(conds[0].status, "False");
        assert_eq!(conds[0].last_transition_time, at(20));
    }

    #[test]
    fn a_new_reason_message_or_generation_keeps_the_transition_time() {
        let mut conds = Vec::new();
        set_condition_with(&mut conds, ready(true), at(10));
        let next = ready(true)
            .reason("StillFine")
            .message("all replicas up")
            .observed_generation(Some(2));
        assert!(set_condition_with(&mut conds, next, at(30)));
        assert_eq!(conds[0].reason, "StillFine");
        assert_eq!(conds[0].message, "all replicas up");
        assert_eq!(conds[0].observed_generation, Some(2));
        assert_eq!(conds[0].last_transition_time, at(10));
    }

    #[test]
    fn conditions_of_other_types_are_left_alone_and_order_is_kept() {
        let mut conds = Vec::new();
        set_condition_with(&mut conds, ready(true), at(10));
        set_condition_with(
            &mut conds,
            DesiredCondition::new("Degraded", false).reason("AsExpected"),
            at(11),
        );
        set_condition_with(&mut conds, ready(false), at(12));
        let types: Vec<&str> = conds.iter().map(|c| c.type_.as_str()).collect();
        assert_eq!(types, ["Ready", "Degraded"]);
        assert_eq!(conds[1].last_transition_time, at(11));
        assert!(!is_condition_true(&conds, "Ready"));
        assert!(find_condition(&conds, "Degraded").is_some());
        assert!(remove_condition(&mut conds, "Degraded"));
        assert!(!remove_condition(&mut conds, "Degraded"));
        assert_eq!(conds.len(), 1);
    }
}
