//! `kore nodes`: simulated nodes, a scheduler and kubelets against any API server (kore's, or
//! a real cluster's, as kwok runs beside a kube-apiserver).
//!
//! The nodes register and renew their Leases for as long as the process runs; the scheduler
//! and the kubelets run in a kore-runtime manager, leader-elected on the Lease
//! `kube-system/kore-nodes`, so a second `kore nodes` on the same cluster waits rather than
//! binding pods twice.

use std::path::PathBuf;

use anyhow::Context as _;
use clap::Args;
use kore_nodes::{KubeletConfig, Kubelets, NodeConfig, NodeSet, Scheduler, SchedulerConfig};
use kore_runtime::Manager;
use kore_runtime::manager::LeaseConfig;

/// Options of `kore nodes`.
#[derive(Args, Clone)]
pub(crate) struct NodesArgs {
    /// The kubeconfig of the API server to simulate nodes for.
    #[arg(long, value_name = "FILE")]
    kubeconfig: PathBuf,
    /// The kubeconfig context to use (its current context by default).
    #[arg(long)]
    context: Option<String>,
    /// How many nodes to register.
    #[arg(long, default_value_t = 3)]
    count: usize,
    /// Node names are PREFIX-0, PREFIX-1, ….
    #[arg(long, default_value = "kore-node", value_name = "PREFIX")]
    prefix: String,
    /// Each node's cpu.
    #[arg(long, default_value = "4")]
    cpu: String,
    /// Each node's memory.
    #[arg(long, default_value = "16Gi")]
    memory: String,
    /// Each node's pod capacity.
    #[arg(long, default_value_t = 110)]
    pods: u32,
}

/// Runs `kore nodes` until a signal.
pub(crate) async fn nodes(args: NodesArgs) -> anyhow::Result<()> {
    let options = kube::config::KubeConfigOptions {
        context: args.context.clone(),
        ..kube::config::KubeConfigOptions::default()
    };
    let kubeconfig = kube::config::Kubeconfig::read_from(&args.kubeconfig)
        .with_context(|| format!("reading {}", args.kubeconfig.display()))?;
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &options)
        .await
        .with_context(|| format!("using {}", args.kubeconfig.display()))?;
    let client = kube::Client::try_from(config).context("making a client")?;
    let node = NodeConfig {
        name_prefix: args.prefix.clone(),
        cpu: args.cpu.clone(),
        memory: args.memory.clone(),
        pods: args.pods,
        ..NodeConfig::default()
    };
    let set = NodeSet::start(client.clone(), args.count, node)
        .await
        .context("registering the nodes")?;
    println!("nodes: {}", set.names().join(", "));
    let mut manager = Manager::builder(client)
        .leader_election(LeaseConfig::new("kube-system", "kore-nodes"))
        .build();
    let scheduler = Scheduler::new(manager.informers(), SchedulerConfig::default());
    let kubelets = Kubelets::controller(manager.informers(), KubeletConfig::default());
    manager.add(Box::new(scheduler));
    manager.add(Box::new(kubelets));
    println!("scheduling and running pods; press Ctrl-C to stop");
    let outcome = manager.run().await.context("the scheduler and kubelets");
    drop(set);
    outcome
}

/// Runs the nodes, scheduler and kubelets of `kore up` in its process (no leader election:
/// the server lives here too).
pub(crate) async fn in_process(
    client: kube::Client,
    count: usize,
) -> anyhow::Result<Option<kore_nodes::Simulation>> {
    if count == 0 {
        return Ok(None);
    }
    let config = kore_nodes::SimulationConfig {
        nodes: count,
        ..kore_nodes::SimulationConfig::default()
    };
    let sim = kore_nodes::Simulation::start(client, config)
        .await
        .context("starting the simulated nodes")?;
    Ok(Some(sim))
}
