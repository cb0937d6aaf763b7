//! Simulated nodes for tests: [`TestEnv::start_nodes`] registers Nodes with their Lease
//! heartbeats; [`TestEnv::start_simulation`] adds a scheduler and kubelets, so that pods run
//! (see `kore_nodes`).

use kore_nodes::{NodeConfig, NodeSet, Simulation, SimulationConfig};

use crate::TestEnv;

impl TestEnv {
    /// Registers `count` simulated nodes with the default shape (4 cpu, 16Gi, 110 pods, Leases
    /// renewed every 10 s); they live as long as the returned [`NodeSet`].
    pub async fn start_nodes(&self, count: usize) -> anyhow::Result<NodeSet> {
        self.start_nodes_with(count, NodeConfig::default()).await
    }

    /// Registers `count` simulated nodes shaped by `config`.
    pub async fn start_nodes_with(
        &self,
        count: usize,
        config: NodeConfig,
    ) -> anyhow::Result<NodeSet> {
        NodeSet::start(self.client(), count, config).await
    }

    /// Registers `nodes` simulated nodes and runs a scheduler and kubelets for them, so that
    /// pods are bound and run; they live as long as the returned [`Simulation`].
    pub async fn start_simulation(&self, nodes: usize) -> anyhow::Result<Simulation> {
        self.start_simulation_with(SimulationConfig {
            nodes,
            ..SimulationConfig::default()
        })
        .await
    }

    /// [`start_simulation`](Self::start_simulation) shaped by `config`.
    pub async fn start_simulation_with(
        &self,
        config: SimulationConfig,
    ) -> anyhow::Result<Simulation> {
        Simulation::start(self.client(), config).await
    }
}
