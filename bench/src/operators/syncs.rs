//! The ConfigMapSync scenario: its sources and destinations, one run of an implementation
//! on it, and the check that every copy exists.

use std::collections::BTreeMap;

use anyhow::Context as _;
use k8s_openapi::api::core::v1::ConfigMap;
use kore_configmap_sync::{ConfigMapSync, ConfigMapSyncSpec};
use kube::ResourceExt as _;
use kube::api::{Api, ObjectMeta};

use super::setup::{create_at_once, create_namespaces, install_crds, server};
use super::tracking::{observe, track_syncs};
use super::{Outcome, SOURCE_NS, Sizes};
use crate::operators_child::Implementation;

pub(super) fn source_name(s: usize) -> String {
    format!("cfg-{s:03}")
}

pub(super) fn destination_ns(d: usize) -> String {
    format!("dst-{d:03}")
}

pub(super) fn source(s: usize) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(source_name(s)),
            labels: Some(BTreeMap::from([("app".to_owned(), "bench".to_owned())])),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([
            ("LOG_LEVEL".to_owned(), "info".to_owned()),
            ("FEATURE_FLAGS".to_owned(), format!("alpha,beta,source-{s}")),
            (
                "app.yaml".to_owned(),
                format!("server:\n  port: 8080\n  workers: 4\nsource: {s}\n"),
            ),
        ])),
        ..ConfigMap::default()
    }
}

/// One run of the configmap-sync scenario with `implementation` on a fresh server.
pub(super) async fn configmap_sync(
    implementation: Implementation,
    sizes: &Sizes,
    concurrency: usize,
) -> anyhow::Result<Outcome> {
    let (env, url) = server().await?;
    let client = env.client();
    install_crds(&client, &kore_configmap_sync::operator()).await?;
    create_namespaces(
        &client,
        std::iter::once(SOURCE_NS.to_owned()).chain((0..sizes.destinations).map(destination_ns)),
    )
    .await?;
    create_at_once(&client, SOURCE_NS, (0..sizes.sources).map(source).collect()).await?;
    let syncs: Vec<ConfigMapSync> = (0..sizes.sources)
        .flat_map(|s| (0..sizes.destinations).map(move |d| (s, d)))
        .map(|(s, d)| {
            ConfigMapSync::new(
                &format!("sync-{s:03}-{d:03}"),
                ConfigMapSyncSpec {
                    source_namespace: SOURCE_NS.to_owned(),
                    config_map_name: source_name(s),
                    destination_namespace: Some(destination_ns(d)),
                    destination_namespaces: Vec::new(),
                    namespace_selector: None,
                    destination_name: None,
                    conflict_policy: None,
                },
            )
        })
        .collect();
    let created_in = create_at_once(&client, SOURCE_NS, syncs).await?;

    let (listed, is_listed) = tokio::sync::oneshot::channel();
    let tracker = tokio::spawn(track_syncs(client.clone(), sizes.syncs(), listed));
    is_listed.await.context("the tracker stopped")?;
    let outcome = observe(
        implementation,
        &url,
        concurrency,
        tracker,
        sizes,
        sizes.syncs(),
        created_in,
    )
    .await?;
    if outcome.converged.is_some() {
        verify_copies(&client, sizes).await?;
    }
    env.stop().await;
    Ok(outcome)
}

/// Every copy holds its source's data.
pub(super) async fn verify_copies(client: &kube::Client, sizes: &Sizes) -> anyhow::Result<()> {
    let all = Api::<ConfigMap>::all(client.clone())
        .list(&Default::default())
        .await?;
    let mut copies = 0;
    for cm in &all.items {
        let ns = cm.namespace().unwrap_or_default();
        if !ns.starts_with("dst-") || !cm.name_any().starts_with("cfg-") {
            continue;
        }
        let s: usize = cm.name_any()["cfg-".len()..].parse()?;
        anyhow::ensure!(
            cm.data == source(s).data,
            "the copy {ns}/{} differs from its source",
            cm.name_any()
        );
        copies += 1;
    }
    anyhow::ensure!(
        copies == sizes.syncs(),
        "{copies} copies of {}",
        sizes.syncs()
    );
    Ok(())
}
