//! batch/v1 Job and CronJob against an in-process kore-apiserver: the verbs, the defaults
//! Kubernetes applies (field by field), the generated selector, the validation errors clients
//! hit, the status subresource and kubectl's Table columns.

use crate::common::{assert_invalid, cell, crud, table};
use k8s_openapi::api::batch::v1::{CronJob, Job};
use kore_testenv::TestEnv;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

fn job(name: &str, restart: &str) -> Job {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"template": {"spec": {
            "restartPolicy": restart,
            "containers": [{"name": "pi", "image": "perl:5.34"}]}}}
    }))
    .expect("valid Job")
}

fn cronjob(name: &str, schedule: &str) -> CronJob {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"schedule": schedule, "jobTemplate": {"spec": {"template": {"spec": {
            "restartPolicy": "OnFailure",
            "containers": [{"name": "hello", "image": "busybox:1.36"}]}}}}}
    }))
    .expect("valid CronJob")
}

#[tokio::test]
async fn job_verbs_work() {
    let env = TestEnv::start().await.expect("start");
    let jobs: Api<Job> = Api::default_namespaced(env.client());
    crud(
        &jobs,
        &job("pi", "Never"),
        json!({"spec": {"suspend": true}}),
    )
    .await;
}

#[tokio::test]
async fn a_job_gets_kubernetes_defaults_and_a_generated_selector() {
    let env = TestEnv::start().await.expect("start");
    let jobs: Api<Job> = Api::default_namespaced(env.client());
    let created = jobs
        .create(&PostParams::default(), &job("pi", "Never"))
        .await
        .expect("create");
    let v = serde_json::to_value(&created).expect("json");
    let spec = &v["spec"];
    assert_eq!(spec["completions"], 1);
    assert_eq!(spec["parallelism"], 1);
    assert_eq!(spec["backoffLimit"], 6);
    assert_eq!(spec["completionMode"], "NonIndexed");
    assert_eq!(spec["suspend"], false);
    assert_eq!(spec["manualSelector"], false);
    assert_eq!(spec["podReplacementPolicy"], "TerminatingOrFailed");
    assert_eq!(v["metadata"]["generation"], 1);
    assert_eq!(v["status"], json!({}));
    let uid = &spec["selector"]["matchLabels"]["batch.kubernetes.io/controller-uid"];
    assert!(uid.as_str().is_some_and(|u| u.len() == 36), "{spec}");
    // Keyed on the Job's own uid, as Kubernetes keys it.
    assert_eq!(uid, &v["metadata"]["uid"]);
    let labels = &spec["template"]["metadata"]["labels"];
    assert_eq!(&labels["batch.kubernetes.io/controller-uid"], uid);
    assert_eq!(&labels["controller-uid"], uid);
    assert_eq!(labels["batch.kubernetes.io/job-name"], "pi");
    assert_eq!(labels["job-name"], "pi");
    // The pod template gets the pod defaults.
    assert_eq!(spec["template"]["spec"]["dnsPolicy"], "ClusterFirst");
    assert_eq!(
        spec["template"]["spec"]["containers"][0]["imagePullPolicy"],
        "IfNotPresent"
    );

    // With parallelism alone, completions stay unset; a per-index backoff limit makes the
    // global one the largest int32; a pod failure policy changes the replacement policy.
    let mut parallel = serde_json::to_value(job("par", "Never")).expect("json");
    parallel["spec"]["parallelism"] = json!(3);
    parallel["spec"]["completionMode"] = json!("Indexed");
    parallel["spec"]["completions"] = json!(3);
    parallel["spec"]["backoffLimitPerIndex"] = json!(1);
    let created = jobs
        .create(
            &PostParams::default(),
            &serde_json::from_value(parallel).expect("Job"),
        )
        .await
        .expect("create indexed");
    assert_eq!(
        created.spec.as_ref().and_then(|s| s.backoff_limit),
        Some(2_147_483_647)
    );
    let mut only_parallel = serde_json::to_value(job("only", "Never")).expect("json");
    only_parallel["spec"]["parallelism"] = json!(2);
    let created = jobs
        .create(
            &PostParams::default(),
            &serde_json::from_value(only_parallel).expect("Job"),
        )
        .await
        .expect("create");
    let spec = created.spec.expect("spec");
    assert_eq!((spec.parallelism, spec.completions), (Some(2), None));
}

#[tokio::test]
async fn job_validation_and_immutable_fields() {
    let env = TestEnv::start().await.expect("start");
    let jobs: Api<Job> = Api::default_namespaced(env.client());
    let err = jobs
        .create(&PostParams::default(), &job("bad", "Always"))
        .await
        .expect_err("Always is not a Job restart policy");
    assert_invalid(
        err,
        "spec.template.spec.restartPolicy",
        "supported values: \"OnFailure\", \"Never\"",
    );
    let mut negative = serde_json::to_value(job("neg", "Never")).expect("json");
    negative["spec"]["parallelism"] = json!(-1);
    let err = jobs
        .create(
            &PostParams::default(),
            &serde_json::from_value(negative).expect("Job"),
        )
        .await
        .expect_err("negative parallelism");
    assert_invalid(
        err,
        "spec.parallelism",
        "must be greater than or equal to 0",
    );

    jobs.create(&PostParams::default(), &job("pi", "Never"))
        .await
        .expect("create");
    let err = jobs
        .patch(
            "pi",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"template": {"spec": {"containers": [
                {"name": "pi", "image": "perl:5.36"}]}}}})),
        )
        .await
        .expect_err("the template is immutable");
    assert_invalid(err, "spec.template", "field is immutable");
    let err = jobs
        .patch(
            "pi",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"completions": 4}})),
        )
        .await
        .expect_err("completions are immutable");
    assert_invalid(err, "spec.completions", "field is immutable");
    // Parallelism and suspend may change.
    let patched = jobs
        .patch(
            "pi",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"parallelism": 0, "suspend": true}})),
        )
        .await
        .expect("parallelism is mutable");
    assert_eq!(patched.metadata.generation, Some(2));
}

#[tokio::test]
async fn job_status_and_table() {
    let env = TestEnv::start().await.expect("start");
    let jobs: Api<Job> = Api::default_namespaced(env.client());
    jobs.create(&PostParams::default(), &job("pi", "Never"))
        .await
        .expect("create");
    let (columns, rows) = table(&env, "/apis/batch/v1/namespaces/default/jobs").await;
    assert_eq!(
        columns,
        [
            "Name",
            "Status",
            "Completions",
            "Duration",
            "Age",
            "Containers",
            "Images",
            "Selector"
        ]
    );
    assert_eq!(cell(&columns, &rows, "Status"), "Running");
    assert_eq!(cell(&columns, &rows, "Completions"), "0/1");
    assert_eq!(cell(&columns, &rows, "Duration"), "");
    assert_eq!(cell(&columns, &rows, "Containers"), "pi");

    let status = json!({"status": {
        "startTime": "2026-01-01T00:00:00Z", "completionTime": "2026-01-01T00:01:05Z",
        "succeeded": 1,
        "conditions": [{"type": "Complete", "status": "True"}]}});
    let done = jobs
        .patch_status("pi", &PatchParams::default(), &Patch::Merge(status))
        .await
        .expect("status patch");
    assert_eq!(done.status.and_then(|s| s.succeeded), Some(1));
    assert_eq!(
        done.metadata.generation,
        Some(1),
        "status writes keep the generation"
    );
    let (columns, rows) = table(&env, "/apis/batch/v1/namespaces/default/jobs").await;
    assert_eq!(cell(&columns, &rows, "Status"), "Complete");
    assert_eq!(cell(&columns, &rows, "Completions"), "1/1");
    assert_eq!(cell(&columns, &rows, "Duration"), "65s");
}

#[tokio::test]
async fn cronjob_verbs_defaults_validation_and_table() {
    let env = TestEnv::start().await.expect("start");
    let cjs: Api<CronJob> = Api::default_namespaced(env.client());
    crud(
        &cjs,
        &cronjob("tick", "*/5 * * * *"),
        json!({"spec": {"suspend": true}}),
    )
    .await;

    let created = cjs
        .create(&PostParams::default(), &cronjob("hello", "0 3 * * MON-FRI"))
        .await
        .expect("create");
    let v = serde_json::to_value(&created).expect("json");
    assert_eq!(v["spec"]["concurrencyPolicy"], "Allow");
    assert_eq!(v["spec"]["suspend"], false);
    assert_eq!(v["spec"]["successfulJobsHistoryLimit"], 3);
    assert_eq!(v["spec"]["failedJobsHistoryLimit"], 1);
    assert_eq!(v["metadata"]["generation"], 1);
    assert_eq!(
        v["spec"]["jobTemplate"]["spec"]["template"]["spec"]["schedulerName"],
        "default-scheduler"
    );

    let err = cjs
        .create(&PostParams::default(), &cronjob("bad", "every minute"))
        .await
        .expect_err("not a schedule");
    assert_invalid(err, "spec.schedule", "expected exactly 5 fields, found 2");
    let err = cjs
        .create(&PostParams::default(), &cronjob("bad", "61 * * * *"))
        .await
        .expect_err("minute out of range");
    assert_invalid(err, "spec.schedule", "");
    let err = cjs
        .create(&PostParams::default(), &cronjob("bad", "TZ=UTC 0 * * * *"))
        .await
        .expect_err("a time zone inside the schedule");
    assert_invalid(err, "spec.schedule", "use timeZone field instead");
    let mut policy = serde_json::to_value(cronjob("bad", "@hourly")).expect("json");
    policy["spec"]["concurrencyPolicy"] = json!("Sometimes");
    let err = cjs
        .create(
            &PostParams::default(),
            &serde_json::from_value::<CronJob>(policy).expect("CronJob"),
        )
        .await
        .expect_err("unknown policy");
    assert_invalid(
        err,
        "spec.concurrencyPolicy",
        "supported values: \"Allow\", \"Forbid\", \"Replace\"",
    );
    let long = "c".repeat(53);
    let err = cjs
        .create(&PostParams::default(), &cronjob(&long, "@daily"))
        .await
        .expect_err("name too long");
    assert_invalid(err, "metadata.name", "must be no more than 52 characters");

    let (columns, rows) = table(&env, "/apis/batch/v1/namespaces/default/cronjobs").await;
    assert_eq!(
        columns,
        [
            "Name",
            "Schedule",
            "Timezone",
            "Suspend",
            "Active",
            "Last Schedule",
            "Age",
            "Containers",
            "Images",
            "Selector"
        ]
    );
    assert_eq!(cell(&columns, &rows, "Schedule"), "0 3 * * MON-FRI");
    assert_eq!(cell(&columns, &rows, "Timezone"), "<none>");
    assert_eq!(cell(&columns, &rows, "Suspend"), "False");
    assert_eq!(cell(&columns, &rows, "Active"), &Value::from(0));
    assert_eq!(cell(&columns, &rows, "Last Schedule"), "<none>");
    assert_eq!(cell(&columns, &rows, "Images"), "busybox:1.36");
}
