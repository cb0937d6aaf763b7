//! The Go sample-controller and this one against the same objects: this controller serves
//! Foos under the Go CRD, takes objects as the Go controller and Go clients write them, and
//! writes objects the Go controller would take as its own.

#![allow(clippy::disallowed_names, reason = "the custom resource is called Foo")]

mod common;

use common::{NS, Prepared, Running, available, create_foo, replicas};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kore_sample_controller::Options;
use kore_sample_controller::reconcile::{REASON_INVALID_SPEC, REASON_RESOURCE_EXISTS};
use kore_testenv::wait_for;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

/// The CRD the Go sample-controller ships (its `artifacts/examples/crd.yaml`), as JSON.
fn go_crd() -> anyhow::Result<CustomResourceDefinition> {
    Ok(serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": "foos.samplecontroller.k8s.io",
            "annotations": {"api-approved.kubernetes.io": "unapproved, experimental-only"},
        },
        "spec": {
            "group": "samplecontroller.k8s.io",
            "versions": [{
                "name": "v1alpha1",
                "served": true,
                "storage": true,
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "properties": {
                        "spec": {"type": "object", "properties": {
                            "deploymentName": {"type": "string"},
                            "replicas": {"type": "integer", "minimum": 1, "maximum": 10},
                        }},
                        "status": {"type": "object", "properties": {
                            "availableReplicas": {"type": "integer"},
                        }},
                    },
                }},
                "subresources": {"status": {}},
            }],
            "names": {"kind": "Foo", "plural": "foos"},
            "scope": "Namespaced",
        },
    }))?)
}

/// The Deployment the Go controller writes for a Foo (its `newDeployment`, with the
/// controller reference `metav1.NewControllerRef` makes).
fn go_deployment(foo: &str, uid: &str, name: &str, replicas: i32) -> Value {
    let labels = json!({"app": "nginx", "controller": foo});
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": name,
            "namespace": NS,
            "ownerReferences": [{
                "apiVersion": "samplecontroller.k8s.io/v1alpha1",
                "kind": "Foo",
                "name": foo,
                "uid": uid,
                "controller": true,
                "blockOwnerDeletion": true,
            }],
        },
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "nginx", "image": "nginx:latest"}]},
            },
        },
    })
}

#[tokio::test]
async fn under_the_go_crd_foos_as_go_clients_write_them_are_served() -> anyhow::Result<()> {
    let operator = kore_operator::Operator {
        crds: vec![go_crd()?],
        ..kore_sample_controller::operator()
    };
    let run = Running::start_as(operator, Options::default()).await?;
    // A Go client sends every field of the Go types, a zero status included.
    run.create_foo(
        NS,
        json!({"metadata": {"name": "go-shaped"},
               "spec": {"deploymentName": "go-shaped", "replicas": 2},
               "status": {"availableReplicas": 0}}),
    )
    .await?;
    // A Go client sends a nil replicas pointer as null; the Go CRD (not nullable) drops it.
    let null_replicas = run
        .create_foo(
            NS,
            json!({"metadata": {"name": "null-replicas"},
                   "spec": {"deploymentName": "null-replicas", "replicas": null}}),
        )
        .await?;
    assert_eq!(
        null_replicas["spec"],
        json!({"deploymentName": "null-replicas"})
    );
    // Fields the Go CRD does not require, left out.
    run.create_foo(
        NS,
        json!({"metadata": {"name": "no-replicas"}, "spec": {"deploymentName": "no-replicas"}}),
    )
    .await?;
    run.create_foo(
        NS,
        json!({"metadata": {"name": "no-name"}, "spec": {"replicas": 1}}),
    )
    .await?;
    run.create_foo(NS, json!({"metadata": {"name": "no-spec"}}))
        .await?;

    run.wait_deployment(NS, "go-shaped", |d| replicas(d) == Some(2))
        .await?;
    run.wait_foo("go-shaped", |f| available(f) == Some(0))
        .await?;
    // Without replicas the Deployment keeps its own default, and it is not fought over.
    for name in ["no-replicas", "null-replicas"] {
        run.wait_deployment(NS, name, |d| replicas(d) == Some(1))
            .await?;
        run.wait_foo(name, |f| available(f) == Some(0)).await?;
    }
    // Without a Deployment name there is nothing to do: a Warning each, and no retries.
    for name in ["no-name", "no-spec"] {
        wait_for(common::WAIT, || async {
            (run.events(NS, name, REASON_INVALID_SPEC).await.0 >= 1).then_some(())
        })
        .await?;
    }
    run.settle().await?;
    for name in ["no-name", "no-spec"] {
        assert_eq!(run.events(NS, name, REASON_INVALID_SPEC).await.0, 1);
        assert_eq!(run.foo_json(name).await?.get("status"), None);
    }
    let deployments = run.deployments().list(&Default::default()).await?;
    assert_eq!(deployments.items.len(), 3);

    run.assert_no_denials()?;
    run.stop().await
}

#[tokio::test]
async fn a_deployment_the_go_controller_made_is_adopted_not_fought_over() -> anyhow::Result<()> {
    let prepared = Prepared::install(kore_sample_controller::operator()).await?;
    let admin = prepared.admin.clone();
    // What the Go controller and kube-controller-manager left behind: a Foo with its
    // status, and its Deployment with two replicas available.
    let foo = create_foo(
        &admin,
        NS,
        json!({"metadata": {"name": "go-foo"},
               "spec": {"deploymentName": "go-dep", "replicas": 2}}),
    )
    .await?;
    let uid = foo["metadata"]["uid"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let deployments: Api<Deployment> = Api::namespaced(admin.clone(), NS);
    let go_made: Deployment = serde_json::from_value(go_deployment("go-foo", &uid, "go-dep", 2))?;
    let pp = PostParams {
        field_manager: Some("sample-controller".to_owned()),
        ..PostParams::default()
    };
    deployments.create(&pp, &go_made).await?;
    let go_made = deployments
        .patch_status(
            "go-dep",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"replicas": 2, "availableReplicas": 2}})),
        )
        .await?;
    let foos: Api<kore_sample_controller::Foo> = Api::namespaced(admin.clone(), NS);
    foos.patch_status(
        "go-foo",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"availableReplicas": 2}})),
    )
    .await?;

    // This controller takes over: it finds everything in step and writes nothing.
    let run = prepared.run(Options::default())?;
    wait_for(common::WAIT, || async {
        (run.reconciles() >= 1.0).then_some(())
    })
    .await?;
    run.settle().await?;
    assert!(run.writes().is_empty(), "{:?}", run.writes());
    assert_eq!(run.events(NS, "go-foo", REASON_RESOURCE_EXISTS).await.0, 0);
    let now = run.deployments().get("go-dep").await?;
    assert_eq!(
        now.metadata.resource_version,
        go_made.metadata.resource_version
    );

    // The adopted Deployment is this controller's to scale.
    run.foos()
        .patch(
            "go-foo",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 4}})),
        )
        .await?;
    let scaled = run
        .wait_deployment(NS, "go-dep", |d| replicas(d) == Some(4))
        .await?;
    assert_eq!(scaled.metadata.uid, now.metadata.uid);
    assert_eq!(
        scaled.metadata.owner_references,
        now.metadata.owner_references
    );

    run.assert_no_denials()?;
    run.stop().await
}

#[tokio::test]
async fn the_crd_refuses_replicas_outside_one_to_ten_as_the_go_crd_does() -> anyhow::Result<()> {
    let run = Running::start(Options::default()).await?;
    for bad in [0, 11] {
        let refused = run
            .create_foo(
                NS,
                json!({"metadata": {"name": format!("bad-{bad}")},
                       "spec": {"deploymentName": "x", "replicas": bad}}),
            )
            .await;
        let Err(e) = refused else {
            anyhow::bail!("replicas {bad} was accepted");
        };
        assert!(
            e.to_string().contains("spec.replicas"),
            "replicas {bad}: {e}"
        );
    }
    run.stop().await
}
