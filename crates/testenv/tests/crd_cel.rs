//! CEL validation rules (`x-kubernetes-validations`) end to end: CRDs with rules are created
//! through `kube::Client`, custom objects that break a rule get 422 with one cause per rule,
//! rules that do not compile reject the CRD, and transition rules see the stored object.

use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kore_testenv::TestEnv;
use kore_testenv::kubectl::{Kubectl, kubectl_or_skip};
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use kube::core::Status;
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(5);

/// A namespaced `Sync` CRD (`syncs.cel.example.com/v1`) with `schema`.
fn sync_crd(schema: Value) -> CustomResourceDefinition {
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "syncs.cel.example.com"},
        "spec": {
            "group": "cel.example.com",
            "scope": "Namespaced",
            "names": {"plural": "syncs", "kind": "Sync"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                          "schema": {"openAPIV3Schema": schema}}]
        }
    }))
    .expect("a valid CRD")
}

/// The configmap-sync operator's rules, plus an immutable `configMapName` and a rule at the
/// root.
fn sync_schema() -> Value {
    json!({
        "type": "object",
        "x-kubernetes-validations": [
            {"rule": "self.metadata.name.size() <= 20", "message": "name is at most 20 characters"}
        ],
        "properties": {"spec": {
            "type": "object",
            "required": ["sourceNamespace", "configMapName"],
            "properties": {
                "sourceNamespace": {"type": "string", "minLength": 1},
                "destinationNamespace": {"type": "string"},
                "destinationNamespaces": {"type": "array", "items": {"type": "string"}},
                "configMapName": {"type": "string",
                    "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "configMapName is immutable"}]},
                "replicas": {"type": "integer", "default": 1}
            },
            "x-kubernetes-validations": [
                {"rule": "!has(self.destinationNamespace) || self.destinationNamespace != self.sourceNamespace",
                 "message": "the source namespace cannot be its own destination", "fieldPath": ".destinationNamespace"},
                {"rule": "!has(self.destinationNamespaces) || !(self.sourceNamespace in self.destinationNamespaces)",
                 "messageExpression": "'destinationNamespaces must not contain ' + self.sourceNamespace",
                 "reason": "FieldValueForbidden"},
                {"rule": "self.replicas >= 1"}
            ]
        }}
    })
}

fn syncs(env: &TestEnv) -> Api<DynamicObject> {
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("cel.example.com", "v1", "Sync"),
        "syncs",
    );
    Api::namespaced_with(env.client(), "default", &ar)
}

fn sync(name: &str, spec: Value) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "cel.example.com/v1", "kind": "Sync",
        "metadata": {"name": name}, "spec": spec
    }))
    .expect("a valid object")
}

/// Creates the CRD and waits until its objects are served.
async fn install(env: &TestEnv, schema: Value) {
    let crds: Api<CustomResourceDefinition> = Api::all(env.client());
    crds.create(&PostParams::default(), &sync_crd(schema))
        .await
        .expect("create CRD");
    let api = syncs(env);
    kore_testenv::wait_for(WAIT, || async {
        api.list(&Default::default()).await.ok().map(|_| ())
    })
    .await
    .expect("the CRD is served");
}

fn api_error(e: kube::Error) -> Status {
    match e {
        kube::Error::Api(s) => *s,
        other => panic!("expected an API error, got {other:?}"),
    }
}

/// `(field, reason, message)` of each cause.
fn causes(status: &Status) -> Vec<(String, String, String)> {
    status
        .details
        .as_ref()
        .map(|d| {
            d.causes
                .iter()
                .map(|c| (c.field.clone(), c.reason.clone(), c.message.clone()))
                .collect()
        })
        .unwrap_or_default()
}

fn cause(field: &str, reason: &str, message: &str) -> (String, String, String) {
    (field.into(), reason.into(), message.into())
}

#[tokio::test]
async fn an_object_that_breaks_rules_gets_422_with_one_cause_per_rule() {
    let env = TestEnv::start().await.expect("start");
    install(&env, sync_schema()).await;
    let api = syncs(&env);
    let bad = sync(
        "a-name-that-is-far-too-long",
        json!({"sourceNamespace": "a", "destinationNamespace": "a", "destinationNamespaces": ["b", "a"],
               "configMapName": "cm", "replicas": 0}),
    );
    let status = api_error(
        api.create(&PostParams::default(), &bad)
            .await
            .expect_err("rules reject it"),
    );
    assert_eq!(status.code, 422);
    assert_eq!(status.reason, "Invalid");
    assert_eq!(
        causes(&status),
        [
            cause(
                "<nil>",
                "FieldValueInvalid",
                "Invalid value: \"object\": name is at most 20 characters"
            ),
            cause(
                "spec.destinationNamespace",
                "FieldValueInvalid",
                "Invalid value: \"object\": the source namespace cannot be its own destination"
            ),
            cause(
                "spec",
                "FieldValueForbidden",
                "Forbidden: destinationNamespaces must not contain a"
            ),
            cause(
                "spec",
                "FieldValueInvalid",
                "Invalid value: \"object\": failed rule: self.replicas >= 1"
            ),
        ]
    );
    assert!(
        status.message.starts_with(
            "Sync.cel.example.com \"a-name-that-is-far-too-long\" is invalid: [<nil>: Invalid value: \"object\": name is at most 20 characters, "
        ),
        "{}",
        status.message
    );

    // A good object is accepted, with rules seeing the defaulted replicas.
    let good = sync(
        "good",
        json!({"sourceNamespace": "a", "destinationNamespace": "b", "destinationNamespaces": ["c"],
               "configMapName": "cm"}),
    );
    let created = api
        .create(&PostParams::default(), &good)
        .await
        .expect("a valid object is accepted");
    assert_eq!(created.data["spec"]["replicas"], 1);
}

#[tokio::test]
async fn schema_errors_that_block_rules_are_reported_instead_of_running_them() {
    let env = TestEnv::start().await.expect("start");
    install(&env, sync_schema()).await;
    let status = api_error(
        syncs(&env)
            .create(
                &PostParams::default(),
                &sync(
                    "x",
                    json!({"sourceNamespace": "a", "destinationNamespace": "a"}),
                ),
            )
            .await
            .expect_err("configMapName is required"),
    );
    assert_eq!(status.code, 422);
    assert_eq!(
        causes(&status),
        [
            cause("spec.configMapName", "FieldValueRequired", "Required value"),
            cause(
                "<nil>",
                "FieldValueInvalid",
                "Invalid value: \"null\": some validation rules were not checked because the object was invalid; correct the existing errors to complete validation"
            ),
        ]
    );
}

#[tokio::test]
async fn a_rule_that_does_not_compile_rejects_the_crd() {
    let env = TestEnv::start().await.expect("start");
    let schema = json!({"type": "object", "properties": {"spec": {
    "type": "object",
    "properties": {"sourceNamespace": {"type": "string"}},
    "x-kubernetes-validations": [
        {"rule": "self.sourceNamespace != ''"},
        {"rule": "self.sourceNamespaces.size() > 0"},
        {"rule": "self.sourceNamespace =="}
    ]}}});
    let crds: Api<CustomResourceDefinition> = Api::all(env.client());
    let status = api_error(
        crds.create(&PostParams::default(), &sync_crd(schema))
            .await
            .expect_err("the CRD is rejected"),
    );
    assert_eq!(status.code, 422);
    let got = causes(&status);
    let at = "spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations";
    assert_eq!(got.len(), 2, "{got:#?}");
    assert_eq!(got[0].0, format!("{at}[1].rule"));
    assert_eq!(got[0].1, "FieldValueInvalid");
    assert_eq!(
        got[0].2,
        "Invalid value: \"self.sourceNamespaces.size() > 0\": compilation failed: ERROR: <input>:1:5: undefined field 'sourceNamespaces'\n | self.sourceNamespaces.size() > 0\n | ....^"
    );
    assert_eq!(got[1].0, format!("{at}[2].rule"));
    assert!(
        got[1].2.starts_with(
            "Invalid value: \"self.sourceNamespace ==\": compilation failed: ERROR: <input>:1:"
        ),
        "{}",
        got[1].2
    );
    assert!(
        crds.get_opt("syncs.cel.example.com")
            .await
            .expect("get")
            .is_none()
    );
}

#[tokio::test]
async fn self_equals_old_self_makes_a_field_immutable() {
    let env = TestEnv::start().await.expect("start");
    install(&env, sync_schema()).await;
    let api = syncs(&env);
    api.create(
        &PostParams::default(),
        &sync("s", json!({"sourceNamespace": "a", "configMapName": "cm"})),
    )
    .await
    .expect("create");

    // Changing another field is fine; the transition rule sees an unchanged name.
    let pp = PatchParams::default();
    let patched = api
        .patch(
            "s",
            &pp,
            &Patch::Merge(json!({"spec": {"destinationNamespace": "b"}})),
        )
        .await
        .expect("a change elsewhere is accepted");
    assert_eq!(patched.data["spec"]["destinationNamespace"], "b");

    let status = api_error(
        api.patch(
            "s",
            &pp,
            &Patch::Merge(json!({"spec": {"configMapName": "other"}})),
        )
        .await
        .expect_err("configMapName is immutable"),
    );
    assert_eq!(status.code, 422);
    assert_eq!(
        causes(&status),
        [cause(
            "spec.configMapName",
            "FieldValueInvalid",
            "Invalid value: \"string\": configMapName is immutable"
        )]
    );

    // A full update (PUT) is checked the same way.
    let mut current = api.get("s").await.expect("get");
    current.data["spec"]["configMapName"] = json!("third");
    let status = api_error(
        api.replace("s", &PostParams::default(), &current)
            .await
            .expect_err("configMapName is immutable"),
    );
    assert_eq!(status.code, 422);
    let stored = api.get("s").await.expect("get");
    assert_eq!(stored.data["spec"]["configMapName"], "cm");
}

#[tokio::test]
async fn rules_added_by_a_crd_update_apply_to_later_writes_and_bad_ones_are_refused() {
    let env = TestEnv::start().await.expect("start");
    let plain = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "size": {"type": "integer"}}}}});
    install(&env, plain).await;
    let api = syncs(&env);
    api.create(&PostParams::default(), &sync("big", json!({"size": 50})))
        .await
        .expect("no rule yet");

    let crds: Api<CustomResourceDefinition> = Api::all(env.client());
    let pp = PatchParams::default();
    let add_rule = |rule: &str| {
        Patch::Merge(
            json!({"spec": {"versions": [{"name": "v1", "served": true, "storage": true,
            "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {"type": "object",
                "properties": {"size": {"type": "integer"}},
                "x-kubernetes-validations": [{"rule": rule, "message": "size is at most 10"}]}}}}}]}}),
        )
    };

    // A rule that does not compile is refused on update too, and changes nothing.
    let status = api_error(
        crds.patch("syncs.cel.example.com", &pp, &add_rule("self.size <= '10'"))
            .await
            .expect_err("the rule does not compile"),
    );
    assert_eq!(status.code, 422);
    assert_eq!(
        causes(&status)
            .iter()
            .map(|c| c.0.as_str())
            .collect::<Vec<_>>(),
        ["spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule"]
    );
    assert!(
        causes(&status)[0]
            .2
            .contains("found no matching overload for '_<=_' applied to '(int, string)'"),
        "{:?}",
        causes(&status)
    );

    crds.patch("syncs.cel.example.com", &pp, &add_rule("self.size <= 10"))
        .await
        .expect("a valid rule is accepted");
    let rejected = kore_testenv::wait_for(WAIT, || async {
        match api
            .create(&PostParams::default(), &sync("bigger", json!({"size": 60})))
            .await
        {
            Err(kube::Error::Api(s)) if s.code == 422 => Some(*s),
            Ok(_) => {
                // Served before the new schema: remove it and try again.
                let _ = api.delete("bigger", &Default::default()).await;
                None
            }
            Err(_) => None,
        }
    })
    .await
    .expect("the new rule applies");
    assert_eq!(
        causes(&rejected),
        [cause(
            "spec",
            "FieldValueInvalid",
            "Invalid value: \"object\": size is at most 10"
        )]
    );
    // An object written before the rule keeps its value through updates that leave it as
    // it is (ratcheting), and must meet the rule once the value changes.
    api.patch(
        "big",
        &pp,
        &Patch::Merge(json!({"metadata": {"labels": {"a": "b"}}})),
    )
    .await
    .expect("an unchanged spec is not checked again");
    let status = api_error(
        api.patch("big", &pp, &Patch::Merge(json!({"spec": {"size": 40}})))
            .await
            .expect_err("a changed spec meets the new rule"),
    );
    assert_eq!(status.code, 422);
}

const CRD_YAML: &str = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: syncs.cel.example.com
spec:
  group: cel.example.com
  scope: Namespaced
  names: {plural: syncs, kind: Sync}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              sourceNamespace: {type: string}
              destinationNamespace: {type: string}
            x-kubernetes-validations:
            - rule: "!has(self.destinationNamespace) || self.destinationNamespace != self.sourceNamespace"
              message: the source namespace cannot be its own destination
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_shows_the_rule_message_of_a_refused_object() {
    let Some(program) = kubectl_or_skip() else {
        return;
    };
    let env = TestEnv::builder().tcp().start().await.expect("start");
    let kubectl = Kubectl::for_env(program, &env);
    let crd = kubectl.file("crd.yaml", CRD_YAML);
    kubectl.ok(&["apply", "-f", &crd]).await;
    kubectl
        .ok(&[
            "wait",
            "--for=condition=Established",
            "crd/syncs.cel.example.com",
            "--timeout=30s",
        ])
        .await;
    let bad = kubectl.file(
        "bad.yaml",
        "apiVersion: cel.example.com/v1\nkind: Sync\nmetadata: {name: bad, namespace: default}\nspec: {sourceNamespace: a, destinationNamespace: a}\n",
    );
    let out = kubectl.run(&["apply", "-f", &bad]).await;
    assert!(!out.status.success(), "{out:?}");
    assert!(
        out.stderr.contains(
            "The Sync \"bad\" is invalid: spec: Invalid value: \"object\": the source namespace cannot be its own destination"
        ),
        "{}",
        out.stderr
    );
    let good = kubectl.file(
        "good.yaml",
        "apiVersion: cel.example.com/v1\nkind: Sync\nmetadata: {name: good, namespace: default}\nspec: {sourceNamespace: a, destinationNamespace: b}\n",
    );
    assert_eq!(
        kubectl.ok(&["apply", "-f", &good]).await,
        "sync.cel.example.com/good created\n"
    );
}
