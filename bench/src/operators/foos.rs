//! The Foo scenario of the sample-controller, with this process playing
//! kube-controller-manager for the Deployments' availability.

use anyhow::Context as _;
use futures::TryStreamExt as _;
use k8s_openapi::api::apps::v1::Deployment;
use kore_sample_controller::{Foo, FooSpec};
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::{WatchStreamExt as _, watcher};
use kube::{Resource as _, ResourceExt as _};
use serde_json::json;

use super::setup::{create_at_once, create_namespaces, install_crds, server};
use super::tracking::{observe, track_foos};
use super::{FOO_NS, Outcome, Sizes};
use crate::operators_child::Implementation;

/// The Foo scenario with kore's sample-controller on a fresh server.
pub(super) async fn foos(sizes: &Sizes, concurrency: usize) -> anyhow::Result<Outcome> {
    let (env, url) = server().await?;
    let client = env.client();
    install_crds(&client, &kore_sample_controller::operator()).await?;
    create_namespaces(&client, [FOO_NS.to_owned()]).await?;
    let replicas = |i: usize| i32::try_from(1 + i % 3).expect("1..=3 fits");
    let objects: Vec<Foo> = (0..sizes.foos)
        .map(|i| {
            Foo::new(
                &format!("foo-{i:04}"),
                FooSpec {
                    deployment_name: format!("dep-{i:04}"),
                    replicas: Some(replicas(i)),
                },
            )
        })
        .collect();
    let created_in = create_at_once(&client, FOO_NS, objects).await?;
    let kcm = tokio::spawn(play_controller_manager(client.clone()));

    let (listed, is_listed) = tokio::sync::oneshot::channel();
    let tracker = tokio::spawn(track_foos(client.clone(), sizes.foos, listed));
    is_listed.await.context("the tracker stopped")?;
    let outcome = observe(
        Implementation::KoreFoo,
        &url,
        concurrency,
        tracker,
        sizes,
        sizes.foos,
        created_in,
    )
    .await?;
    kcm.abort();
    if outcome.converged.is_some() {
        let deployments = Api::<Deployment>::namespaced(client.clone(), FOO_NS)
            .list(&Default::default())
            .await?;
        for d in &deployments.items {
            let i: usize = d.name_any()["dep-".len()..].parse()?;
            anyhow::ensure!(
                d.spec.as_ref().and_then(|s| s.replicas) == Some(replicas(i)),
                "{} has the wrong replicas",
                d.name_any()
            );
            let owner = d
                .owner_references()
                .iter()
                .find(|o| o.controller == Some(true));
            anyhow::ensure!(
                owner.is_some_and(|o| o.name == format!("foo-{i:04}")),
                "{} is not controlled by its Foo",
                d.name_any()
            );
        }
    }
    env.stop().await;
    Ok(outcome)
}

/// Sets every Deployment's available replicas to its spec's, as the Deployment controller
/// would once the pods run.
pub(super) async fn play_controller_manager(client: kube::Client) -> anyhow::Result<()> {
    let api: Api<Deployment> = Api::namespaced(client, FOO_NS);
    watcher(api.clone(), watcher::Config::default())
        .default_backoff()
        .applied_objects()
        .try_for_each_concurrent(16, |d| {
            let api = api.clone();
            async move {
                let want = d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
                let have = d.status.as_ref().and_then(|s| s.available_replicas);
                if have == Some(want) {
                    return Ok(());
                }
                let status = json!({"status": {
                    "observedGeneration": d.meta().generation,
                    "replicas": want, "updatedReplicas": want,
                    "readyReplicas": want, "availableReplicas": want,
                }});
                if let Err(e) = api
                    .patch_status(
                        &d.name_any(),
                        &PatchParams::default(),
                        &Patch::Merge(status),
                    )
                    .await
                {
                    eprintln!("kore-bench: operators: deployment status: {e}");
                }
                Ok(())
            }
        })
        .await?;
    Ok(())
}
