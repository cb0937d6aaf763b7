//! `kore_testenv::operator`: an operator installed from its description runs as its own
//! ServiceAccount, and the privilege report tells used, unused and refused permissions apart.

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kore_operator::{Operator, rule};
use kore_testenv::TestEnv;
use kore_testenv::operator::{assert_least_privilege, assert_no_denials, install, privileges};
use kube::api::{Api, ObjectMeta, PostParams};

fn crd() -> CustomResourceDefinition {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "gadgets.test.kore.dev"},
        "spec": {
            "group": "test.kore.dev",
            "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
            "scope": "Namespaced",
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object",
                    "x-kubernetes-preserve-unknown-fields": true}}
            }]
        }
    }))
    .expect("a valid CRD")
}

fn gadget_resource() -> kube::api::ApiResource {
    kube::api::ApiResource {
        group: "test.kore.dev".into(),
        version: "v1".into(),
        api_version: "test.kore.dev/v1".into(),
        kind: "Gadget".into(),
        plural: "gadgets".into(),
    }
}

fn operator() -> Operator {
    Operator {
        name: "gadget-operator",
        crds: vec![crd()],
        rules: vec![
            rule("", &["configmaps"], &["list", "create"]),
            rule("test.kore.dev", &["gadgets"], &["list"]),
        ],
        samples: Vec::new(),
    }
}

fn lease(name: &str) -> Lease {
    Lease {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..ObjectMeta::default()
        },
        ..Lease::default()
    }
}

#[tokio::test]
async fn an_installed_operator_acts_as_its_service_account_and_its_unused_and_refused_permissions_are_reported()
-> anyhow::Result<()> {
    let env = TestEnv::start().await?;
    let op = operator();
    let client = install(&env, &op, "gadgets-system").await?;

    // Allowed: what the rules grant.
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    cms.list(&Default::default()).await?;
    let gadgets: Api<kube::api::DynamicObject> =
        Api::namespaced_with(client.clone(), "default", &gadget_resource());
    gadgets.list(&Default::default()).await?;
    // The leader-election Role allows the Lease in the operator's namespace only.
    let leases: Api<Lease> = Api::namespaced(client.clone(), "gadgets-system");
    let created = leases
        .create(&PostParams::default(), &lease("gadget-operator"))
        .await?;
    assert!(leases.get("gadget-operator").await.is_ok());
    leases
        .replace("gadget-operator", &PostParams::default(), &created)
        .await?;
    let elsewhere: Api<Lease> = Api::namespaced(client.clone(), "default");
    assert!(elsewhere.get("x").await.is_err());

    let report = privileges(&env, &op, "gadgets-system")?;
    assert_eq!(
        report.user,
        "system:serviceaccount:gadgets-system:gadget-operator"
    );
    let unused: Vec<String> = report.unused().iter().map(ToString::to_string).collect();
    assert_eq!(unused, ["create core/configmaps"]);
    let denied: Vec<String> = report.denied.iter().map(ToString::to_string).collect();
    assert_eq!(denied, ["get coordination.k8s.io/leases"]);
    assert!(assert_no_denials(&env, &op, "gadgets-system").is_err());

    // A clean run: a fresh server, every grant used, nothing refused.
    let env = TestEnv::start().await?;
    let client = install(&env, &op, "gadgets-system").await?;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    cms.list(&Default::default()).await?;
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("made".into());
    cms.create(&PostParams::default(), &cm).await?;
    let gadgets: Api<kube::api::DynamicObject> = Api::all_with(client.clone(), &gadget_resource());
    gadgets.list(&Default::default()).await?;
    let leases: Api<Lease> = Api::namespaced(client.clone(), "gadgets-system");
    let created = leases
        .create(&PostParams::default(), &lease("gadget-operator"))
        .await?;
    leases.get("gadget-operator").await?;
    leases
        .replace("gadget-operator", &PostParams::default(), &created)
        .await?;
    assert_least_privilege(&env, &op, "gadgets-system")?;

    // A permission outside the rules is refused and reported.
    let secrets: Api<Secret> = Api::namespaced(client, "default");
    assert!(secrets.list(&Default::default()).await.is_err());
    let err =
        assert_least_privilege(&env, &op, "gadgets-system").expect_err("a refusal fails the check");
    assert!(err.to_string().contains("list core/secrets"), "{err}");
    Ok(())
}
