//! The seeds' story end to end, with nothing faked: a Foo gets a Deployment from the
//! sample-controller, kore's Deployment and ReplicaSet controllers make its pods, the
//! simulated scheduler and kubelets run them, and the Foo's status reports them available.

#![allow(clippy::disallowed_names, reason = "the custom resource is called Foo")]

mod common;

use common::{NS, Running, available};
use k8s_openapi::api::core::v1::Pod;
use kore_sample_controller::Options;
use kube::api::{Api, ListParams, Patch, PatchParams};
use serde_json::json;

#[tokio::test]
async fn a_foo_reaches_its_available_replicas_through_real_controllers_and_simulated_nodes()
-> anyhow::Result<()> {
    let run = Running::start(Options::default()).await?;
    let _nodes = run.env.start_simulation(2).await?;
    let _controllers = run.env.start_controllers()?;
    run.create_foo(
        NS,
        json!({"metadata": {"name": "web"},
               "spec": {"deploymentName": "web-dep", "replicas": 3}}),
    )
    .await?;
    let foo = run.wait_foo("web", |f| available(f) == Some(3)).await?;
    assert_eq!(available(&foo), Some(3));

    // The pods are real objects: bound to the simulated nodes, Running and Ready.
    let pods: Api<Pod> = Api::namespaced(run.admin.clone(), NS);
    let listed = pods.list(&ListParams::default()).await?;
    assert_eq!(listed.items.len(), 3);
    for pod in &listed.items {
        let spec = pod.spec.as_ref().expect("a spec");
        assert!(spec.node_name.is_some(), "bound: {:?}", pod.metadata.name);
        let status = pod.status.as_ref().expect("a status");
        assert_eq!(status.phase.as_deref(), Some("Running"));
    }

    // Scaling the Foo flows through the Deployment to the pods and back to the Foo.
    run.foos()
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 1}})),
        )
        .await?;
    let foo = run.wait_foo("web", |f| available(f) == Some(1)).await?;
    assert_eq!(available(&foo), Some(1));
    run.assert_no_denials()?;
    Ok(())
}
