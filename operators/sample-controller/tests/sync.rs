//! The sample-controller against kore-apiserver, running as its own ServiceAccount under its
//! generated RBAC, with leader election on. kore-apiserver runs no Deployment controller, so
//! the tests play kube-controller-manager by writing Deployment status themselves.

#![allow(clippy::disallowed_names, reason = "the custom resource is called Foo")]

mod common;

use common::{NS, Running, WAIT, available, replicas};
use k8s_openapi::api::apps::v1::Deployment;
use kore_sample_controller::Options;
use kore_sample_controller::reconcile::{MESSAGE_SYNCED, REASON_RESOURCE_EXISTS, REASON_SYNCED};
use std::time::Duration;

use kore_testenv::wait_for;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;

/// What kube-controller-manager would write once `n` replicas are available.
async fn set_available(run: &Running, deployment: &str, n: i32) -> anyhow::Result<()> {
    run.deployments()
        .patch_status(
            deployment,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {
                "replicas": n, "readyReplicas": n, "updatedReplicas": n, "availableReplicas": n,
            }})),
        )
        .await?;
    Ok(())
}

#[tokio::test]
async fn a_foo_gets_a_deployment_kept_in_step_with_it_and_the_operator_uses_exactly_its_rbac()
-> anyhow::Result<()> {
    let run = Running::start(Options::default()).await?;
    let foo = run
        .create_foo(
            NS,
            json!({"metadata": {"name": "example-foo"},
                   "spec": {"deploymentName": "example-dep", "replicas": 1}}),
        )
        .await?;
    let uid = foo["metadata"]["uid"]
        .as_str()
        .unwrap_or_default()
        .to_owned();

    // The Deployment, shaped as the Go controller makes it and controlled by the Foo.
    let d = run.wait_deployment(NS, "example-dep", |_| true).await?;
    let d_json = serde_json::to_value(&d)?;
    assert_eq!(
        d_json["metadata"]["ownerReferences"],
        json!([{
            "apiVersion": "samplecontroller.k8s.io/v1alpha1",
            "kind": "Foo",
            "name": "example-foo",
            "uid": uid,
            "controller": true,
            "blockOwnerDeletion": true,
        }])
    );
    assert_eq!(replicas(&d), Some(1));
    let labels = json!({"app": "nginx", "controller": "example-foo"});
    assert_eq!(d_json["spec"]["selector"], json!({"matchLabels": labels}));
    assert_eq!(d_json["spec"]["template"]["metadata"]["labels"], labels);
    assert_eq!(
        d_json["spec"]["template"]["spec"]["containers"][0]["image"],
        "nginx:latest"
    );
    assert_eq!(
        d_json["spec"]["template"]["spec"]["containers"][0]["name"],
        "nginx"
    );
    // The status is written at once, as the Go controller does: nothing available yet.
    run.wait_foo("example-foo", |f| available(f) == Some(0))
        .await?;

    // The Foo's replicas change: the Deployment follows.
    run.foos()
        .patch(
            "example-foo",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 3}})),
        )
        .await?;
    run.wait_deployment(NS, "example-dep", |d| replicas(d) == Some(3))
        .await?;

    // The Deployment's available replicas reach the Foo's status.
    set_available(&run, "example-dep", 3).await?;
    run.wait_foo("example-foo", |f| available(f) == Some(3))
        .await?;

    // Someone scales the Deployment by hand: the Foo's replicas are restored.
    run.deployments()
        .patch(
            "example-dep",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 5}})),
        )
        .await?;
    run.wait_deployment(NS, "example-dep", |d| replicas(d) == Some(3))
        .await?;

    // Someone deletes the Deployment: it is made again, and the status follows the new one.
    let old_uid = run
        .deployments()
        .get("example-dep")
        .await?
        .metadata
        .uid
        .unwrap_or_default();
    run.deployments()
        .delete("example-dep", &DeleteParams::default())
        .await?;
    run.wait_deployment(NS, "example-dep", |d| {
        d.metadata.uid.as_deref() != Some(old_uid.as_str()) && replicas(d) == Some(3)
    })
    .await?;
    run.wait_foo("example-foo", |f| available(f) == Some(0))
        .await?;

    // Each change was reported once as Synced (repeats counted in the Event's series).
    let (synced, notes) = run.events(NS, "example-foo", REASON_SYNCED).await;
    assert!(synced >= 4, "Synced {synced} times");
    assert!(notes.iter().all(|n| n == MESSAGE_SYNCED), "{notes:?}");

    // The Foo goes: the garbage collector takes its Deployment.
    run.foos()
        .delete("example-foo", &DeleteParams::default())
        .await?;
    wait_for(WAIT, || async {
        run.deployments()
            .get_opt("example-dep")
            .await
            .ok()?
            .is_none()
            .then_some(())
    })
    .await?;

    run.assert_least_privilege().await?;
    run.stop().await
}

#[tokio::test]
async fn a_deployment_the_foo_does_not_control_is_left_alone_and_reported() -> anyhow::Result<()> {
    let run = Running::start(Options::default()).await?;
    let foreign: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "taken", "namespace": NS},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "other"}},
            "template": {"metadata": {"labels": {"app": "other"}},
                         "spec": {"containers": [{"name": "web", "image": "httpd"}]}},
        },
    }))?;
    let foreign = run
        .deployments()
        .create(&PostParams::default(), &foreign)
        .await?;
    run.create_foo(
        NS,
        json!({"metadata": {"name": "squatted"},
               "spec": {"deploymentName": "taken", "replicas": 4}}),
    )
    .await?;

    // A Warning event with the Go controller's message, repeated while the reconcile backs
    // off and retries.
    let notes = wait_for(WAIT, || async {
        let (count, notes) = run.events(NS, "squatted", REASON_RESOURCE_EXISTS).await;
        (count >= 3).then_some(notes)
    })
    .await?;
    assert_eq!(
        notes,
        [r#"Resource "taken" already exists and is not managed by Foo"#]
    );
    // The Deployment was not touched and the Foo got no status.
    let now = run.deployments().get("taken").await?;
    assert_eq!(
        now.metadata.resource_version,
        foreign.metadata.resource_version
    );
    assert_eq!(replicas(&now), Some(2));
    assert!(now.metadata.owner_references.is_none());
    assert_eq!(available(&run.foos().get("squatted").await?), None);
    let writes = run.writes();
    assert!(
        !writes
            .keys()
            .any(|w| w.contains("apps/deployments") || w.contains("foos/status")),
        "{writes:?}"
    );
    assert_eq!(run.events(NS, "squatted", REASON_SYNCED).await.0, 0);

    // Once the other Deployment is gone, a retry makes the Foo's own.
    run.deployments()
        .delete("taken", &DeleteParams::default())
        .await?;
    run.wait_deployment(NS, "taken", |d| {
        replicas(d) == Some(4) && d.metadata.owner_references.is_some()
    })
    .await?;
    run.wait_foo("squatted", |f| available(f) == Some(0))
        .await?;

    run.assert_no_denials()?;
    run.stop().await
}

#[tokio::test]
async fn a_reconcile_that_finds_everything_in_step_writes_nothing() -> anyhow::Result<()> {
    let run = Running::start(Options::default()).await?;
    run.create_foo(
        NS,
        json!({"metadata": {"name": "steady"},
               "spec": {"deploymentName": "steady", "replicas": 2}}),
    )
    .await?;
    run.wait_deployment(NS, "steady", |d| replicas(d) == Some(2))
        .await?;
    set_available(&run, "steady", 2).await?;
    run.wait_foo("steady", |f| available(f) == Some(2)).await?;
    // Let the reconciles the operator's own writes caused run out.
    let settled = run.settle().await?;
    let writes = run.writes();
    let synced = run.events(NS, "steady", REASON_SYNCED).await.0;

    // Changes that need nothing done: a label on the Foo, an annotation on the Deployment.
    // Each is awaited before the next, so the queue cannot fold them into one reconcile.
    run.foos()
        .patch(
            "steady",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"touched": "yes"}}})),
        )
        .await?;
    wait_for(WAIT, || async {
        (run.reconciles() > settled).then_some(())
    })
    .await?;
    let after_foo = run.settle().await?;
    run.deployments()
        .patch(
            "steady",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {"touched": "yes"}}})),
        )
        .await?;
    wait_for(WAIT, || async {
        (run.reconciles() > after_foo).then_some(())
    })
    .await?;
    run.settle().await?;

    assert_eq!(run.writes(), writes, "a reconcile in step wrote");
    assert_eq!(run.events(NS, "steady", REASON_SYNCED).await.0, synced);
    run.assert_no_denials()?;
    run.stop().await
}

#[tokio::test]
async fn the_operator_confined_to_a_namespace_leaves_the_others_alone() -> anyhow::Result<()> {
    let run = Running::start(Options::default().namespace(NS)).await?;
    run.create_foo(
        "other",
        json!({"metadata": {"name": "elsewhere"},
               "spec": {"deploymentName": "elsewhere", "replicas": 1}}),
    )
    .await?;
    run.create_foo(
        NS,
        json!({"metadata": {"name": "here"},
               "spec": {"deploymentName": "here", "replicas": 1}}),
    )
    .await?;
    run.wait_deployment(NS, "here", |_| true).await?;
    run.wait_foo("here", |f| available(f) == Some(0)).await?;
    let others: kube::Api<Deployment> = kube::Api::namespaced(run.admin.clone(), "other");
    assert!(others.get_opt("elsewhere").await?.is_none());
    run.assert_no_denials()?;
    run.stop().await
}

#[tokio::test(start_paused = true)]
async fn a_foo_blocked_by_another_deployment_backs_off_instead_of_spinning() -> anyhow::Result<()> {
    let run = Running::start(Options::default()).await?;
    let foreign: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "taken", "namespace": NS},
        "spec": {
            "selector": {"matchLabels": {"app": "other"}},
            "template": {"metadata": {"labels": {"app": "other"}},
                         "spec": {"containers": [{"name": "web", "image": "httpd"}]}},
        },
    }))?;
    run.deployments()
        .create(&PostParams::default(), &foreign)
        .await?;
    run.create_foo(
        NS,
        json!({"metadata": {"name": "blocked"},
               "spec": {"deploymentName": "taken", "replicas": 1}}),
    )
    .await?;
    wait_for(WAIT, || async {
        (run.events(NS, "blocked", REASON_RESOURCE_EXISTS).await.0 >= 1).then_some(())
    })
    .await?;

    // A minute of (paused) time: the retries back off exponentially from 5 ms, so they
    // number about log2(60 s / 5 ms) ≈ 14, not thousands.
    tokio::time::sleep(Duration::from_secs(60)).await;
    let reconciles = run.reconciles();
    assert!(
        (5.0..=20.0).contains(&reconciles),
        "{reconciles} reconciles in a minute"
    );
    let (events, _) = run.events(NS, "blocked", REASON_RESOURCE_EXISTS).await;
    assert!(
        f64::from(events) <= reconciles,
        "{events} events for {reconciles} reconciles"
    );
    run.assert_no_denials()?;
    run.stop().await
}
