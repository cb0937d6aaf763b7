//! Printers of batch/v1 kinds (Job, CronJob).

use serde_json::Value;

use super::apps::{CONTAINERS, IMAGES, WORKLOAD_SELECTOR, label_selector};
use super::*;

/// Job columns.
pub(super) const JOB: [Column; 8] = [
    NAME,
    shown("Status", "Status of the job."),
    shown("Completions", "Succeeded pods out of desired completions."),
    shown("Duration", "Time the job took, or has been running."),
    AGE,
    CONTAINERS,
    IMAGES,
    WORKLOAD_SELECTOR,
];

/// CronJob columns.
pub(super) const CRON_JOB: [Column; 10] = [
    NAME,
    shown("Schedule", "The cron schedule."),
    shown("Timezone", "Time zone the schedule is read in."),
    shown("Suspend", "Whether new runs are suspended."),
    counted("Active", "Number of running jobs."),
    shown("Last Schedule", "Time since a job was last scheduled."),
    AGE,
    CONTAINERS,
    IMAGES,
    WORKLOAD_SELECTOR,
];

/// Whether the Job has a condition of `kind` with status `True`.
fn has_condition(obj: &Value, kind: &str) -> bool {
    list(obj, &["status", "conditions"])
        .iter()
        .any(|c| text(c, &["type"]) == kind && text(c, &["status"]) == "True")
}

/// The Status cell, in the order Kubernetes' Job printer checks conditions.
fn job_status(obj: &Value) -> &'static str {
    if has_condition(obj, "Complete") {
        "Complete"
    } else if has_condition(obj, "Failed") {
        "Failed"
    } else if at(obj, &["metadata", "deletionTimestamp"]).is_some() {
        "Terminating"
    } else if has_condition(obj, "SuccessCriteriaMet") {
        "SuccessCriteriaMet"
    } else if has_condition(obj, "Suspended") {
        "Suspended"
    } else if has_condition(obj, "FailureTarget") {
        "FailureTarget"
    } else {
        "Running"
    }
}

/// `Name`, `Status`, `Completions`, `Duration`, `Age`, `Containers`, `Images`, `Selector`.
pub(super) fn job_cells(obj: &Value, now: i64) -> [Value; JOB.len()] {
    let succeeded = int(obj, &["status", "succeeded"]);
    let completions = match at(obj, &["spec", "completions"]).and_then(Value::as_i64) {
        Some(c) => format!("{succeeded}/{c}"),
        None => match int(obj, &["spec", "parallelism"]) {
            p if p > 1 => format!("{succeeded}/1 of {p}"),
            _ => format!("{succeeded}/1"),
        },
    };
    let start = non_empty(obj, &["status", "startTime"]).and_then(parse_time);
    let end = non_empty(obj, &["status", "completionTime"]).and_then(parse_time);
    let duration = match (start, end) {
        (None, _) => String::new(),
        (Some(start), None) => since(start, now),
        (Some(start), Some(end)) => {
            human_duration(end.as_second().saturating_sub(start.as_second()))
        }
    };
    let (containers, images) = super::apps::template_containers(obj);
    let selector = label_selector(at(obj, &["spec", "selector"]))
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "<none>".to_owned());
    [
        name(obj),
        Value::from(job_status(obj)),
        Value::from(completions),
        Value::from(duration),
        age_cell(obj, now),
        Value::from(containers),
        Value::from(images),
        Value::from(selector),
    ]
}

/// `Name`, `Schedule`, `Timezone`, `Suspend`, `Active`, `Last Schedule`, `Age`, `Containers`,
/// `Images`, `Selector`.
pub(super) fn cron_job_cells(obj: &Value, now: i64) -> [Value; CRON_JOB.len()] {
    let last = match non_empty(obj, &["status", "lastScheduleTime"]) {
        Some(t) => age(Some(t), now),
        None => "<none>".to_owned(),
    };
    let template = at(obj, &["spec", "jobTemplate"])
        .cloned()
        .unwrap_or_default();
    let (containers, images) = super::apps::template_containers(&template);
    let selector = label_selector(at(&template, &["spec", "selector"]))
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "<none>".to_owned());
    let suspend = if flag(obj, &["spec", "suspend"]) {
        "True"
    } else {
        "False"
    };
    [
        name(obj),
        Value::from(text(obj, &["spec", "schedule"])),
        Value::from(non_empty(obj, &["spec", "timeZone"]).unwrap_or("<none>")),
        Value::from(suspend),
        Value::from(list(obj, &["status", "active"]).len()),
        Value::from(last),
        age_cell(obj, now),
        Value::from(containers),
        Value::from(images),
        Value::from(selector),
    ]
}
