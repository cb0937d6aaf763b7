//! Simulated nodes for tests: [`TestEnv::start_nodes`] registers Nodes with their Lease
//! heartbeats (see `kore_nodes`).

use kore_nodes::{NodeConfig, NodeSet};

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
}
