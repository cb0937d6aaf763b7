//! What every run starts from: a fresh in-process server, the CRDs, the namespaces, and
//! objects created at once by many clients.

use std::time::{Duration, Instant};

use anyhow::Context as _;
use futures::{StreamExt as _, TryStreamExt as _};
use k8s_openapi::api::core::v1::Namespace;
use kore_testenv::TestEnv;
use kube::api::{Api, ObjectMeta, PostParams};

use super::CREATORS;

/// A fresh server on a loopback port, and its URL for the child.
pub(super) async fn server() -> anyhow::Result<(TestEnv, String)> {
    let env = TestEnv::builder().tcp().insecure_http().start().await?;
    let url = env.endpoint().context("a socket endpoint")?.url.clone();
    Ok((env, url))
}

/// Installs `operator`'s CRDs, as its manifests would.
pub(super) async fn install_crds(
    client: &kube::Client,
    operator: &kore_operator::Operator,
) -> anyhow::Result<()> {
    kore_operator::install::crds(client, operator)
        .await
        .with_context(|| format!("installing the CRDs of {}", operator.name))
}

pub(super) async fn create_namespaces(
    client: &kube::Client,
    names: impl IntoIterator<Item = String>,
) -> anyhow::Result<()> {
    let api: Api<Namespace> = Api::all(client.clone());
    for name in names {
        let ns = Namespace {
            metadata: ObjectMeta {
                name: Some(name),
                ..ObjectMeta::default()
            },
            ..Namespace::default()
        };
        api.create(&PostParams::default(), &ns).await?;
    }
    Ok(())
}

/// Creates `objects` in `namespace` with [`CREATORS`] requests in flight; returns how long
/// it took.
pub(super) async fn create_at_once<K>(
    client: &kube::Client,
    namespace: &str,
    objects: Vec<K>,
) -> anyhow::Result<Duration>
where
    K: kube::Resource<Scope = kube::core::NamespaceResourceScope>
        + Clone
        + serde::Serialize
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
    K::DynamicType: Default,
{
    let api: Api<K> = Api::namespaced(client.clone(), namespace);
    let began = Instant::now();
    futures::stream::iter(objects)
        .map(|obj| {
            let api = api.clone();
            async move { api.create(&PostParams::default(), &obj).await.map(drop) }
        })
        .buffer_unordered(CREATORS)
        .try_collect::<Vec<()>>()
        .await?;
    Ok(began.elapsed())
}
