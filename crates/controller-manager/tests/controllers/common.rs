//! What every controller-manager test needs: a server, the controllers running on it under a
//! manager with leader election, and a stand-in for the kubelets that moves pods through
//! their phases.
//!
//! The stand-in ([`Kubelet`]) patches `pods/status` itself. When simulated kubelets land
//! (`kore-nodes`), [`Kubelet::start`] is the one place to swap for them: tests only choose
//! what happens to each pod ([`Fate`]).

#![allow(dead_code, reason = "each test binary uses a part of this module")]

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kore_controller_manager::{ControllerManager, Options};
use kore_runtime::informer::Change;
use kore_runtime::manager::ShutdownHandle;
use kore_runtime::metrics::Metrics;
use kore_runtime::{InformerConfig, Manager, SharedInformer};
use kore_testenv::{TestEnv, wait_for};
use kube::api::{Api, ListParams, Patch, PatchParams};
use serde_json::json;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// How long convergence may take (a bound for a hung test, not a timing assertion).
pub(crate) const WAIT: Duration = Duration::from_secs(60);

/// Where the tests put their objects.
pub(crate) const NS: &str = "default";

/// What the stand-in kubelet does with a new pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fate {
    /// Running and Ready.
    Ready,
    /// Running, not Ready.
    NotReady,
    /// Runs to completion: Succeeded.
    Succeed,
    /// Fails: Failed.
    Fail,
    /// Stays Pending.
    Pending,
}

/// Decides each pod's fate, once, when the kubelet first sees it.
pub(crate) type FateFn = Arc<dyn Fn(&Pod) -> Fate + Send + Sync>;

/// A stand-in for the kubelets: gives every new pod a [`Fate`] by patching its status.
pub(crate) struct Kubelet {
    stop: CancellationToken,
    task: JoinHandle<()>,
}

impl Kubelet {
    /// Starts watching pods in every namespace.
    pub(crate) fn start(client: kube::Client, fate: FateFn) -> Kubelet {
        let stop = CancellationToken::new();
        let informer: SharedInformer<Pod> =
            SharedInformer::new(client.clone(), InformerConfig::default());
        informer.start(stop.clone());
        let mut changes = informer.subscribe();
        let store = informer.store();
        let task = tokio::spawn(async move {
            let mut seen = std::collections::HashSet::new();
            while let Some(change) = changes.next().await {
                let pods = match change {
                    Change::Applied { new, .. } => vec![new],
                    Change::Resync => store.list(),
                    Change::Deleted(_) => continue,
                };
                for pod in pods {
                    let uid = pod.metadata.uid.clone().unwrap_or_default();
                    if pod.metadata.deletion_timestamp.is_some() || !seen.insert(uid) {
                        continue;
                    }
                    let status = status_for(fate(&pod));
                    if let Some(status) = status {
                        let ns = pod.metadata.namespace.clone().unwrap_or_default();
                        let name = pod.metadata.name.clone().unwrap_or_default();
                        let api: Api<Pod> = Api::namespaced(client.clone(), &ns);
                        let _ = api
                            .patch_status(
                                &name,
                                &PatchParams::default(),
                                &Patch::Merge(json!({"status": status})),
                            )
                            .await;
                    }
                }
            }
        });
        Kubelet { stop, task }
    }
}

impl Drop for Kubelet {
    fn drop(&mut self) {
        self.stop.cancel();
        self.task.abort();
    }
}

fn status_for(fate: Fate) -> Option<serde_json::Value> {
    let now = Timestamp::now().to_string();
    let ready = |r: bool| json!([{"type": "Ready", "status": if r { "True" } else { "False" }, "lastTransitionTime": now}]);
    match fate {
        Fate::Pending => None,
        Fate::Ready => {
            Some(json!({"phase": "Running", "conditions": ready(true), "startTime": now}))
        }
        Fate::NotReady => {
            Some(json!({"phase": "Running", "conditions": ready(false), "startTime": now}))
        }
        Fate::Succeed => {
            Some(json!({"phase": "Succeeded", "conditions": ready(false), "startTime": now}))
        }
        Fate::Fail => {
            Some(json!({"phase": "Failed", "conditions": ready(false), "startTime": now}))
        }
    }
}

/// A server with the controllers running on it.
pub(crate) struct Cluster {
    pub(crate) env: TestEnv,
    pub(crate) client: kube::Client,
    shutdown: ShutdownHandle,
    manager: JoinHandle<Result<(), kore_runtime::manager::Error>>,
    kubelet: Option<Kubelet>,
}

impl Cluster {
    /// Starts a server, the controllers `options` enable, and a kubelet giving every pod `fate`.
    pub(crate) async fn start_with(options: Options, fate: FateFn) -> anyhow::Result<Cluster> {
        Self::start_on(TestEnv::start().await?, options, fate).await
    }

    /// [`Cluster::start_with`] on a server of the test's making (over TCP, for kubectl).
    pub(crate) async fn start_on(
        env: TestEnv,
        options: Options,
        fate: FateFn,
    ) -> anyhow::Result<Cluster> {
        let client = env.client();
        let cm = ControllerManager::new(options.identity("test"))?;
        let mut manager = Manager::builder(client.clone())
            .leader_election(Options::default().lease())
            .handle_signals(false)
            .build();
        let metrics = Metrics::new();
        metrics.register(manager.registry_mut());
        cm.register(&mut manager, &metrics);
        let shutdown = manager.shutdown_handle();
        let manager = tokio::spawn(manager.run());
        let kubelet = Some(Kubelet::start(client.clone(), fate));
        Ok(Cluster {
            env,
            client,
            shutdown,
            manager,
            kubelet,
        })
    }

    /// Stops the stand-in kubelet, for tests whose pods are run by simulated nodes
    /// (`env.start_simulation`) instead.
    pub(crate) fn without_kubelet(mut self) -> Self {
        self.kubelet = None;
        self
    }

    /// [`Cluster::start_with`] with every controller and every pod Ready.
    pub(crate) async fn start() -> anyhow::Result<Cluster> {
        Self::start_with(Options::default(), Arc::new(|_: &Pod| Fate::Ready)).await
    }

    /// The active pods (not finished, not being deleted) in [`NS`] whose labels match `selector`.
    pub(crate) async fn active_pods(&self, selector: &str) -> anyhow::Result<Vec<Pod>> {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), NS);
        let list = api.list(&ListParams::default().labels(selector)).await?;
        Ok(list
            .items
            .into_iter()
            .filter(|p| {
                p.metadata.deletion_timestamp.is_none()
                    && !matches!(
                        p.status.as_ref().and_then(|s| s.phase.as_deref()),
                        Some("Succeeded" | "Failed")
                    )
            })
            .collect())
    }

    /// Waits until `check` returns `Some` for the object `name` of kind `K` in [`NS`].
    pub(crate) async fn wait_object<K, T>(
        &self,
        name: &str,
        check: impl Fn(&K) -> Option<T>,
    ) -> anyhow::Result<T>
    where
        K: kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
            + Clone
            + serde::de::DeserializeOwned
            + std::fmt::Debug,
    {
        let api: Api<K> = Api::namespaced(self.client.clone(), NS);
        wait_for(WAIT, || {
            let api = api.clone();
            let check = &check;
            async move {
                api.get_opt(name)
                    .await
                    .ok()
                    .flatten()
                    .and_then(|o| check(&o))
            }
        })
        .await
    }

    /// Stops the controllers and the kubelet.
    pub(crate) async fn stop(mut self) -> anyhow::Result<()> {
        self.kubelet.take();
        self.shutdown.shutdown();
        self.manager.await??;
        Ok(())
    }
}

/// The names of `pods`, sorted.
pub(crate) fn names(pods: &[Pod]) -> Vec<String> {
    let mut n: Vec<String> = pods
        .iter()
        .filter_map(|p| p.metadata.name.clone())
        .collect();
    n.sort();
    n
}

/// Waits until `check` holds (polling; a bound for a hung test, not a timing assertion).
pub(crate) async fn wait_until(check: impl Fn() -> bool) -> anyhow::Result<()> {
    wait_for(WAIT, || {
        let ok = check();
        async move { ok.then_some(()) }
    })
    .await
}

/// Waits until `check` returns `Some`.
pub(crate) async fn wait_for_value<T, F, Fut>(check: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    wait_for(WAIT, check).await
}
