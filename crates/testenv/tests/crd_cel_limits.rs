//! The limits on CEL rules (issue 11, defect 3): a rule that would make the server recurse
//! without bound is refused when its CRD is written (422 on the rule's field), a stored CRD
//! with such a rule (older data) is not served instead of aborting the server on start-up or
//! on the first create, and a rule within the limits evaluates on the server's own threads.

use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kore_apiserver::registry::crd::STORAGE_PREFIX;
use kore_apiserver::storage::{Preconditions, Storage, Update};
use kore_testenv::TestEnv;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};
use kube::core::Status;
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(10);
/// Each test is bounded, so a hang is a failure.
const TEST_TIMEOUT: Duration = Duration::from_secs(120);
const RULE_FIELD: &str =
    "spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule";

/// A namespaced `Deep` CRD (`deeps.limits.example.com/v1`) whose `spec` (with an integer
/// `n`) has `rule`.
fn deep_crd(rule: &str) -> CustomResourceDefinition {
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "deeps.limits.example.com"},
        "spec": {
            "group": "limits.example.com",
            "scope": "Namespaced",
            "names": {"plural": "deeps", "kind": "Deep"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {
                    "type": "object",
                    "properties": {"n": {"type": "integer"}},
                    "x-kubernetes-validations": [{"rule": rule}]}}}}}]
        }
    }))
    .expect("a valid CRD")
}

fn deeps(env: &TestEnv) -> Api<DynamicObject> {
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("limits.example.com", "v1", "Deep"),
        "deeps",
    );
    Api::namespaced_with(env.client(), "default", &ar)
}

fn deep(name: &str, n: i64) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "limits.example.com/v1", "kind": "Deep",
        "metadata": {"name": name}, "spec": {"n": n}
    }))
    .expect("a valid object")
}

fn api_error(e: kube::Error) -> Status {
    match e {
        kube::Error::Api(s) => *s,
        other => panic!("expected an API error, got {other:?}"),
    }
}

/// Creates the CRD and waits until its objects are served.
async fn install(env: &TestEnv, rule: &str) {
    let crds: Api<CustomResourceDefinition> = Api::all(env.client());
    crds.create(&PostParams::default(), &deep_crd(rule))
        .await
        .expect("create CRD");
    let api = deeps(env);
    kore_testenv::wait_for(WAIT, || async {
        api.list(&Default::default()).await.ok().map(|_| ())
    })
    .await
    .expect("the CRD is served");
}

/// The issue's rule: `1 + 1 + … + 1 > 0` with 1,500 terms (about 6 KB).
fn issue_rule() -> String {
    format!("{} > 0", vec!["1"; 1_500].join(" + "))
}

/// Asserts that the server still answers.
async fn still_serving(env: &TestEnv) {
    let namespaces: Api<Namespace> = Api::all(env.client());
    namespaces
        .get("default")
        .await
        .expect("the server still answers");
}

#[tokio::test]
async fn rules_that_nest_too_deep_or_are_too_long_are_refused_with_the_crd() {
    tokio::time::timeout(TEST_TIMEOUT, async {
        let env = TestEnv::start().await.expect("start");
        let crds: Api<CustomResourceDefinition> = Api::all(env.client());
        let too_deep = "compilation failed: ERROR: <input>:-1:0: expression recursion limit exceeded: 250";
        let long = vec!["self.n == 1"; 10_000].join(" || ");
        let cases = [
            (issue_rule(), too_deep.to_string()),
            (format!("{}1{} > 0", "(".repeat(3_000), ")".repeat(3_000)), too_deep.to_string()),
            (format!("self{} == 1", ".n".repeat(5_000)), too_deep.to_string()),
            (format!("[1]{} == 1", "[0]".repeat(5_000)), too_deep.to_string()),
            (format!("{}{} != []", "[".repeat(5_000), "]".repeat(5_000)), too_deep.to_string()),
            ("true ? true : ".repeat(5_000) + "true", too_deep.to_string()),
            (vec!["true"; 5_000].join(" == "), too_deep.to_string()),
            (
                long.clone(),
                format!(
                    "compilation failed: ERROR: <input>:-1:0: expression code point size exceeds limit: size: {}, limit 100000",
                    long.len()
                ),
            ),
        ];
        for (rule, want) in cases {
            let status = api_error(
                crds.create(&PostParams::default(), &deep_crd(&rule))
                    .await
                    .expect_err("the CRD is refused"),
            );
            assert_eq!(status.code, 422, "{}", status.message);
            let causes = status.details.map(|d| d.causes).unwrap_or_default();
            assert_eq!(causes.len(), 1, "{causes:?}");
            assert_eq!(causes[0].field, RULE_FIELD);
            assert_eq!(causes[0].reason, "FieldValueInvalid");
            assert!(causes[0].message.ends_with(&want), "{}", causes[0].message);
        }
        still_serving(&env).await;
    })
    .await
    .expect("no hang");
}

#[tokio::test]
async fn rules_whose_estimated_cost_exceeds_the_budget_are_refused_with_the_crd() {
    tokio::time::timeout(TEST_TIMEOUT, async {
        let env = TestEnv::start().await.expect("start");
        let crds: Api<CustomResourceDefinition> = Api::all(env.client());
        let hint = "(try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)";
        // A million lists of a million numbers would fill the memory; a string replaced ten
        // times over would be 10^10 characters long.
        for rule in [
            "lists.range(1000000).map(x, lists.range(1000000)).size() > 0".to_string(),
            format!("'a'{} != ''", ".replace('', 'aaaaaaaaaa')".repeat(10)),
        ] {
            let status = api_error(
                crds.create(&PostParams::default(), &deep_crd(&rule))
                    .await
                    .expect_err("the CRD is refused"),
            );
            assert_eq!(status.code, 422, "{}", status.message);
            let causes = status.details.map(|d| d.causes).unwrap_or_default();
            assert_eq!(causes.len(), 1, "{causes:?}");
            assert_eq!(causes[0].field, RULE_FIELD);
            assert_eq!(causes[0].reason, "FieldValueForbidden");
            assert_eq!(
                causes[0].message,
                format!("Forbidden: estimated rule cost exceeds budget by factor of more than 100x {hint}")
            );
        }
        still_serving(&env).await;
    })
    .await
    .expect("no hang");
}

#[tokio::test]
async fn a_rule_just_within_the_depth_limit_is_accepted_and_evaluated() {
    tokio::time::timeout(TEST_TIMEOUT, async {
        let env = TestEnv::start().await.expect("start");
        // 230 subtractions: a tree 232 deep, under the limit of 250.
        let rule = format!("self.n{} > 0", " - 1".repeat(230));
        install(&env, &rule).await;
        let api = deeps(&env);
        api.create(&PostParams::default(), &deep("big", 231))
            .await
            .expect("a value that passes the rule is accepted");
        let status = api_error(
            api.create(&PostParams::default(), &deep("small", 230))
                .await
                .expect_err("the rule refuses it"),
        );
        assert_eq!(status.code, 422);
        let causes = status.details.map(|d| d.causes).unwrap_or_default();
        assert_eq!(causes.len(), 1, "{causes:?}");
        assert_eq!(causes[0].field, "spec");
        assert!(
            causes[0]
                .message
                .starts_with("Invalid value: \"object\": failed rule: self.n - 1 - 1"),
            "{}",
            causes[0].message
        );
    })
    .await
    .expect("no hang");
}

/// Replaces the stored CRD's rule with `rule`, as data written by an older kore that
/// accepted it would have it: storage is written directly, without validation.
async fn store_rule(env: &TestEnv, rule: &str) {
    let key = format!("{STORAGE_PREFIX}/deeps.limits.example.com");
    let rule = rule.to_string();
    let mut edit = move |mut crd: Value| {
        let at = "/spec/versions/0/schema/openAPIV3Schema/properties/spec/x-kubernetes-validations/0/rule";
        match crd.pointer_mut(at) {
            Some(r) => {
                *r = Value::String(rule.clone());
                Update::Put(crd)
            }
            None => Update::Abort,
        }
    };
    env.server()
        .registry()
        .store()
        .guaranteed_update(&key, &Preconditions::default(), &mut edit)
        .await
        .expect("the stored CRD is rewritten");
}

/// Creating a `Deep` now fails with 404: the version with the bad rule is not served. Waits
/// for the CRD controller to rebuild the resource.
async fn creates_are_refused(env: &TestEnv, name: &str) {
    let api = deeps(env);
    let code = kore_testenv::wait_for(WAIT, || async {
        match api.create(&PostParams::default(), &deep(name, 1)).await {
            Err(kube::Error::Api(s)) => Some(s.code),
            _ => None,
        }
    })
    .await
    .expect("creates are refused");
    assert_eq!(code, 404);
}

#[tokio::test]
async fn a_stored_crd_with_a_rule_too_deep_is_not_served_and_never_aborts_the_server() {
    tokio::time::timeout(TEST_TIMEOUT, async {
        let dir = tempfile::tempdir().expect("dir");
        {
            let env = TestEnv::builder()
                .data_dir(dir.path())
                .start()
                .await
                .expect("start");
            install(&env, "self.n >= 0").await;
            deeps(&env)
                .create(&PostParams::default(), &deep("before", 1))
                .await
                .expect("created under the old rule");
            store_rule(&env, &issue_rule()).await;
            creates_are_refused(&env, "after").await;
            still_serving(&env).await;
            env.stop().await;
        }
        // After a restart the stored CRD is loaded again: the server starts and refuses
        // creates of the kind instead of aborting.
        let env = kore_testenv::wait_for(WAIT, || async {
            TestEnv::builder().data_dir(dir.path()).start().await.ok()
        })
        .await
        .expect("restart");
        creates_are_refused(&env, "after-restart").await;
        still_serving(&env).await;
    })
    .await
    .expect("no hang");
}
