//! [`Simulation`]: nodes, a scheduler and kubelets running together in this process.

use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::{KubeletConfig, Kubelets, NodeConfig, NodeSet, NodeStages, Scheduler, SchedulerConfig};
use kore_runtime::Informers;

/// What a [`Simulation`] runs.
#[derive(Clone, Debug)]
pub struct SimulationConfig {
    /// How many nodes to register.
    pub nodes: usize,
    /// Their shape.
    pub node: NodeConfig,
    /// The scheduler's.
    pub scheduler: SchedulerConfig,
    /// The kubelets'.
    pub kubelet: KubeletConfig,
}

impl Default for SimulationConfig {
    fn default() -> Self {
        SimulationConfig {
            nodes: 3,
            node: NodeConfig::default(),
            scheduler: SchedulerConfig::default(),
            kubelet: KubeletConfig::default(),
        }
    }
}

/// Simulated nodes with their heartbeats, a scheduler and kubelets; dropping it stops them
/// all (pods and nodes stay in the API server as they are).
pub struct Simulation {
    nodes: NodeSet,
    shutdown: CancellationToken,
    tasks: JoinSet<()>,
}

impl std::fmt::Debug for Simulation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Simulation")
            .field("nodes", &self.nodes.names())
            .finish_non_exhaustive()
    }
}

impl Simulation {
    /// Installs the Stage API and kore's default Stages ([`crate::stage::install`]),
    /// registers the nodes, then starts the scheduler and the kubelets (no leader election:
    /// use a kore-runtime `Manager` with [`Scheduler`], [`Kubelets::controller`] and
    /// [`NodeStages::controller`] for that).
    pub async fn start(client: kube::Client, config: SimulationConfig) -> anyhow::Result<Self> {
        crate::stage::install(&client).await?;
        let nodes = NodeSet::start(client.clone(), config.nodes, config.node).await?;
        let shutdown = CancellationToken::new();
        let informers = Informers::new(client);
        let scheduler = Scheduler::new(&informers, config.scheduler);
        let kubelets = Kubelets::controller(&informers, config.kubelet);
        let node_stages = NodeStages::controller(&informers);
        informers.start(shutdown.child_token());
        let mut tasks = JoinSet::new();
        tasks.spawn(scheduler.run(shutdown.child_token()));
        let token = shutdown.child_token();
        tasks.spawn(async move {
            if let Err(e) = kubelets.run(token).await {
                tracing::error!(error = %e, "the kubelets stopped");
            }
        });
        let token = shutdown.child_token();
        tasks.spawn(async move {
            if let Err(e) = node_stages.run(token).await {
                tracing::error!(error = %e, "the node Stages stopped");
            }
        });
        Ok(Simulation {
            nodes,
            shutdown,
            tasks,
        })
    }

    /// The nodes (to add one, or stop a heartbeat).
    pub fn nodes(&mut self) -> &mut NodeSet {
        &mut self.nodes
    }

    /// Stops the scheduler and the kubelets and waits for them.
    pub async fn stop(mut self) {
        self.shutdown.cancel();
        while self.tasks.join_next().await.is_some() {}
    }
}

impl Drop for Simulation {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}
