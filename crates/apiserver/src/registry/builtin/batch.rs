//! Strategies of the batch/v1 kinds: Job and CronJob.
//!
//! Defaults, validation and update rules follow Kubernetes' `pkg/apis/batch/v1/defaults.go` and
//! `pkg/apis/batch/validation`; nothing runs the Jobs (there is no Job or CronJob controller).

use k8s_openapi::api::batch::v1 as batch;
use serde_json::{Map, Value, json};

use super::apps::validate_selector;
use super::core::validate_pod_spec;
use super::template::{default_template, null_creation_timestamp};
use crate::api::field::FieldError;
use crate::registry::strategy::{Decoded, Strategy, decode_typed, default_at};

/// The label a generated Job selector matches on: the Job's own uid.
pub(super) const CONTROLLER_UID_LABEL: &str = "batch.kubernetes.io/controller-uid";
/// The label naming the Job on its pods.
pub(super) const JOB_NAME_LABEL: &str = "batch.kubernetes.io/job-name";
/// The legacy spellings of both labels, which Kubernetes still sets beside them.
const LEGACY_CONTROLLER_UID_LABEL: &str = "controller-uid";
const LEGACY_JOB_NAME_LABEL: &str = "job-name";

/// The largest int32, the backoff limit of a Job with a per-index backoff limit.
const MAX_INT32: i64 = 2_147_483_647;

/// Restart policies a Job's pods may have.
const JOB_RESTART_POLICIES: [&str; 2] = ["OnFailure", "Never"];

/// Fills a Job spec's defaults (`spec` is the Job's `spec`, or a CronJob's `jobTemplate.spec`).
fn default_job_spec(spec: &mut Value) {
    if !spec.is_object() {
        return;
    }
    let completions_set = !spec["completions"].is_null();
    if !completions_set && spec["parallelism"].is_null() {
        spec["completions"] = json!(1);
        spec["parallelism"] = json!(1);
    }
    default_at(spec, &["parallelism"], json!(1));
    if spec["backoffLimitPerIndex"].is_null() {
        default_at(spec, &["backoffLimit"], json!(6));
    } else {
        default_at(spec, &["backoffLimit"], json!(MAX_INT32));
    }
    default_at(spec, &["completionMode"], json!("NonIndexed"));
    default_at(spec, &["suspend"], json!(false));
    let replacement = if spec["podFailurePolicy"].is_null() {
        "TerminatingOrFailed"
    } else {
        "Failed"
    };
    default_at(spec, &["podReplacementPolicy"], json!(replacement));
    default_at(spec, &["manualSelector"], json!(false));
    default_template(&mut spec["template"]);
}

/// Gives a Job whose selector is not manual the generated selector and pod labels.
///
/// Both are keyed on the Job's uid, which the registry assigns before the strategy runs.
fn generate_selector(obj: &mut Value) {
    if obj["spec"]["manualSelector"] == json!(true) {
        return;
    }
    let uid = obj["metadata"]["uid"]
        .as_str()
        .map_or_else(crate::registry::rest::new_uid, str::to_owned);
    let name = obj["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let template_meta = &mut obj["spec"]["template"]["metadata"];
    if !template_meta.is_object() {
        *template_meta = json!({});
    }
    if !template_meta["labels"].is_object() {
        template_meta["labels"] = json!({});
    }
    if let Some(labels) = template_meta["labels"].as_object_mut() {
        labels.insert(CONTROLLER_UID_LABEL.into(), json!(uid));
        labels.insert(JOB_NAME_LABEL.into(), json!(name));
        labels.insert(LEGACY_CONTROLLER_UID_LABEL.into(), json!(uid));
        labels.insert(LEGACY_JOB_NAME_LABEL.into(), json!(name));
    }
    if obj["spec"]["selector"].is_null() {
        let mut match_labels = Map::new();
        match_labels.insert(CONTROLLER_UID_LABEL.into(), json!(uid));
        obj["spec"]["selector"] = json!({"matchLabels": match_labels});
    }
}

/// `field` must be >= 0 when set.
fn non_negative(spec: &Value, path: &str, field: &str, errs: &mut Vec<FieldError>) {
    if let Some(n) = spec[field].as_i64()
        && n < 0
    {
        errs.push(FieldError::invalid(
            format!("{path}.{field}"),
            json!(n),
            "must be greater than or equal to 0",
        ));
    }
}

/// Validates a Job spec at `path` (`spec`, or `spec.jobTemplate.spec` of a CronJob).
fn validate_job_spec(spec: &Value, path: &str, errs: &mut Vec<FieldError>) {
    for field in [
        "parallelism",
        "completions",
        "backoffLimit",
        "ttlSecondsAfterFinished",
    ] {
        non_negative(spec, path, field, errs);
    }
    if let Some(n) = spec["activeDeadlineSeconds"].as_i64()
        && n <= 0
    {
        errs.push(FieldError::invalid(
            format!("{path}.activeDeadlineSeconds"),
            json!(n),
            "must be greater than 0",
        ));
    }
    let mode = spec["completionMode"].as_str().unwrap_or("NonIndexed");
    if !["NonIndexed", "Indexed"].contains(&mode) {
        errs.push(FieldError::not_supported(
            format!("{path}.completionMode"),
            json!(mode),
            &["NonIndexed", "Indexed"],
        ));
    }
    if mode == "Indexed" && spec["completions"].is_null() {
        errs.push(FieldError::required(
            format!("{path}.completions"),
            "when completion mode is Indexed",
        ));
    }
    if let Some(policy) = spec["podReplacementPolicy"].as_str()
        && !["TerminatingOrFailed", "Failed"].contains(&policy)
    {
        errs.push(FieldError::not_supported(
            format!("{path}.podReplacementPolicy"),
            json!(policy),
            &["Failed", "TerminatingOrFailed"],
        ));
    }
    let template_spec = &spec["template"]["spec"];
    let restart = template_spec["restartPolicy"].as_str().unwrap_or_default();
    if restart.is_empty() {
        errs.push(FieldError::required(
            format!("{path}.template.spec.restartPolicy"),
            "valid values: \"OnFailure\", \"Never\"",
        ));
    } else if !JOB_RESTART_POLICIES.contains(&restart) {
        errs.push(FieldError::not_supported(
            format!("{path}.template.spec.restartPolicy"),
            json!(restart),
            &JOB_RESTART_POLICIES,
        ));
    }
    validate_pod_spec(template_spec, &format!("{path}.template.spec"), errs);
}

/// Jobs.
pub(super) struct JobStrategy;

fn validate_job(obj: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let spec = &obj["spec"];
    if spec["manualSelector"] == json!(true) || !spec["selector"].is_null() {
        validate_selector(obj, &mut errs);
    }
    validate_job_spec(spec, "spec", &mut errs);
    errs
}

/// `spec.<field>` may not change.
fn immutable(new: &Value, old: &Value, field: &str, errs: &mut Vec<FieldError>) {
    if new["spec"][field] != old["spec"][field] {
        errs.push(FieldError::invalid(
            format!("spec.{field}"),
            new["spec"][field].clone(),
            "field is immutable",
        ));
    }
}

impl Strategy for JobStrategy {
    fn status_keeps_metadata(&self) -> Option<&'static [&'static str]> {
        Some(&[])
    }

    fn decode(&self, obj: Value) -> Result<Decoded, String> {
        decode_typed::<batch::Job>(obj)
    }

    fn tracks_generation(&self) -> bool {
        true
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        default_job_spec(&mut obj["spec"]);
        generate_selector(obj);
        obj["status"] = json!({});
    }

    fn prepare_for_update(&self, new: &mut Value, _old: &Value) {
        default_job_spec(&mut new["spec"]);
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        validate_job(obj)
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = validate_job(new);
        for field in ["selector", "template", "completionMode", "podFailurePolicy"] {
            immutable(new, old, field, &mut errs);
        }
        // Completions may change only in Indexed mode, together with parallelism.
        let indexed_scale = new["spec"]["completionMode"] == "Indexed"
            && new["spec"]["completions"] == new["spec"]["parallelism"];
        if !indexed_scale {
            immutable(new, old, "completions", &mut errs);
        }
        errs
    }

    fn field_labels(&self) -> &'static [&'static str] {
        &["status.successful"]
    }
}

/// Values of a CronJob's `spec.concurrencyPolicy`.
const CONCURRENCY_POLICIES: [&str; 3] = ["Allow", "Forbid", "Replace"];

/// The longest CronJob name: 63 minus the 11 characters of the suffix its Jobs get.
const MAX_CRONJOB_NAME: usize = 52;

/// Checks a schedule as Kubernetes' standard cron parser (robfig/cron v3) does: five fields
/// or a descriptor (`@hourly`, `@midnight`, `@every 5m` with a Go duration), ranges with a
/// bare start (`5/15`), and no time zone inside the schedule.
fn check_schedule(schedule: &str) -> Result<(), String> {
    if schedule.contains("TZ") {
        return Err("cannot use TZ or CRON_TZ in schedule, use timeZone field instead".into());
    }
    let trimmed = schedule.trim();
    if let Some(every) = trimmed.strip_prefix("@every ") {
        return match go_parse_duration::parse_duration(every.trim()) {
            Ok(_) => Ok(()),
            Err(_) => Err(format!("failed to parse duration {trimmed}")),
        };
    }
    let spec = if trimmed.eq_ignore_ascii_case("@midnight") {
        "@daily"
    } else {
        trimmed
    };
    if !spec.starts_with('@') {
        let fields: Vec<&str> = spec.split_whitespace().collect();
        if fields.len() != 5 {
            return Err(format!(
                "expected exactly 5 fields, found {}: [{}]",
                fields.len(),
                fields.join(" ")
            ));
        }
    }
    croner::parser::CronParser::builder()
        .seconds(croner::parser::Seconds::Disallowed)
        .year(croner::parser::Year::Disallowed)
        .sloppy_ranges(true)
        .build()
        .parse(spec)
        .map(|_| ())
        .map_err(|e| e.to_string())
}

fn default_cronjob(obj: &mut Value) {
    let spec = &mut obj["spec"];
    default_at(spec, &["concurrencyPolicy"], json!("Allow"));
    default_at(spec, &["suspend"], json!(false));
    default_at(spec, &["successfulJobsHistoryLimit"], json!(3));
    default_at(spec, &["failedJobsHistoryLimit"], json!(1));
    // A CronJob's job template gets the pod defaults; the Job defaults come when a Job is made.
    default_template(&mut spec["jobTemplate"]["spec"]["template"]);
    null_creation_timestamp(&mut spec["jobTemplate"]);
}

fn validate_cronjob(obj: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let name = obj["metadata"]["name"].as_str().unwrap_or_default();
    if name.len() > MAX_CRONJOB_NAME {
        errs.push(FieldError::invalid(
            "metadata.name",
            json!(name),
            format!("must be no more than {MAX_CRONJOB_NAME} characters"),
        ));
    }
    let spec = &obj["spec"];
    match spec["schedule"].as_str() {
        None | Some("") => errs.push(FieldError::required("spec.schedule", "")),
        Some(schedule) => {
            if let Err(e) = check_schedule(schedule) {
                errs.push(FieldError::invalid("spec.schedule", json!(schedule), e));
            }
        }
    }
    if let Some(policy) = spec["concurrencyPolicy"].as_str()
        && !CONCURRENCY_POLICIES.contains(&policy)
    {
        errs.push(FieldError::not_supported(
            "spec.concurrencyPolicy",
            json!(policy),
            &CONCURRENCY_POLICIES,
        ));
    }
    for field in [
        "startingDeadlineSeconds",
        "successfulJobsHistoryLimit",
        "failedJobsHistoryLimit",
    ] {
        non_negative(spec, "spec", field, &mut errs);
    }
    // Kubernetes refuses a zone its time-zone database does not know (`time.LoadLocation`).
    if let Some(zone) = spec["timeZone"].as_str()
        && (zone.is_empty()
            || zone.contains(char::is_whitespace)
            || zone == "Local"
            || jiff::tz::TimeZone::get(zone).is_err())
    {
        errs.push(FieldError::invalid(
            "spec.timeZone",
            json!(zone),
            format!("unknown time zone {zone}"),
        ));
    }
    validate_job_spec(
        &spec["jobTemplate"]["spec"],
        "spec.jobTemplate.spec",
        &mut errs,
    );
    errs
}

/// CronJobs.
pub(super) struct CronJobStrategy;

impl Strategy for CronJobStrategy {
    fn status_keeps_metadata(&self) -> Option<&'static [&'static str]> {
        Some(&[])
    }

    fn decode(&self, obj: Value) -> Result<Decoded, String> {
        decode_typed::<batch::CronJob>(obj)
    }

    fn tracks_generation(&self) -> bool {
        true
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        default_cronjob(obj);
        obj["status"] = json!({});
    }

    fn prepare_for_update(&self, new: &mut Value, _old: &Value) {
        default_cronjob(new);
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        validate_cronjob(obj)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_zones_must_be_in_the_database() {
        let zone_errors = |zone: &str| {
            let cronjob = json!({
                "metadata": {"name": "c"},
                "spec": {"schedule": "@hourly", "timeZone": zone}
            });
            validate_cronjob(&cronjob)
                .into_iter()
                .filter(|e| e.field == "spec.timeZone")
                .count()
        };
        assert_eq!(zone_errors("Europe/Berlin"), 0);
        assert_eq!(zone_errors("Etc/UTC"), 0);
        assert_eq!(zone_errors("Mars/Olympus"), 1);
        assert_eq!(zone_errors("Local"), 1);
    }

    #[test]
    fn schedules_are_checked_as_kubernetes_standard_parser_does() {
        assert!(check_schedule("*/5 * * * *").is_ok());
        assert!(check_schedule("0 3 * * MON-FRI").is_ok());
        assert!(check_schedule("@hourly").is_ok());
        assert!(check_schedule("@every 5m").is_ok());
        assert!(check_schedule("@midnight").is_ok());
        assert!(check_schedule("5/15 * * * *").is_ok());
        assert!(check_schedule("@every 5 minutes").is_err());
        assert_eq!(
            check_schedule("* * *"),
            Err("expected exactly 5 fields, found 3: [* * *]".to_owned())
        );
        assert!(check_schedule("61 * * * *").is_err());
        assert!(check_schedule("CRON_TZ=UTC 0 * * * *").is_err());
    }

    #[test]
    fn parallelism_alone_leaves_completions_unset() {
        let mut spec = json!({"parallelism": 3, "template": {"spec": {}}});
        default_job_spec(&mut spec);
        assert_eq!(spec["parallelism"], 3);
        assert!(spec.get("completions").is_none());
    }
}
