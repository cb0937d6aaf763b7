//! `kore nodes`: simulated nodes, a scheduler and kubelets against any API server (kore's, or
//! a real cluster's, as kwok runs beside a kube-apiserver).
//!
//! The nodes register and renew their Leases for as long as the process runs; the scheduler
//! and the kubelets run in a kore-runtime manager, leader-elected on the Lease
//! `kube-system/kore-nodes`, so a second `kore nodes` on the same cluster waits rather than
//! binding pods twice.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use clap::{Args, Subcommand};
use kore_nodes::{
    KubeletConfig, Kubelets, NodeConfig, NodeSet, NodeStages, Scheduler, SchedulerConfig,
};
use kore_runtime::Manager;
use kore_runtime::manager::LeaseConfig;

/// Options of `kore nodes`.
#[derive(Args, Clone)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub(crate) struct NodesArgs {
    /// Act on one node instead of running nodes.
    #[command(subcommand)]
    command: Option<NodeCommand>,
    /// The kubeconfig of the API server to simulate nodes for.
    #[arg(long, value_name = "FILE", required = true)]
    kubeconfig: Option<PathBuf>,
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

/// `kore nodes stop-heartbeat NODE`, `kore nodes start-heartbeat NODE`.
#[derive(Subcommand, Clone)]
enum NodeCommand {
    /// Stop renewing NODE's Lease in kube-node-lease (whichever `kore up` or `kore nodes`
    /// process simulates it), so that the node lifecycle controller marks it NotReady.
    StopHeartbeat(HeartbeatArgs),
    /// Renew NODE's Lease again.
    StartHeartbeat(HeartbeatArgs),
}

/// Options of the heartbeat commands.
#[derive(Args, Clone)]
struct HeartbeatArgs {
    /// The node.
    node: String,
    /// The kubeconfig of the API server.
    #[arg(long, value_name = "FILE")]
    kubeconfig: PathBuf,
    /// The kubeconfig context to use (its current context by default).
    #[arg(long)]
    context: Option<String>,
}

async fn client_for(kubeconfig: &Path, context: Option<String>) -> anyhow::Result<kube::Client> {
    let options = kube::config::KubeConfigOptions {
        context,
        ..kube::config::KubeConfigOptions::default()
    };
    let file = kube::config::Kubeconfig::read_from(kubeconfig)
        .with_context(|| format!("reading {}", kubeconfig.display()))?;
    let config = kube::Config::from_custom_kubeconfig(file, &options)
        .await
        .with_context(|| format!("using {}", kubeconfig.display()))?;
    kube::Client::try_from(config).context("making a client")
}

/// Runs a heartbeat command.
async fn heartbeat(args: HeartbeatArgs, stop: bool) -> anyhow::Result<()> {
    let client = client_for(&args.kubeconfig, args.context).await?;
    match kore_nodes::set_heartbeat(&client, &args.node, stop).await {
        Ok(()) => {
            let what = if stop { "stopped" } else { "started" };
            println!("node {}: heartbeat {what}", args.node);
            Ok(())
        }
        Err(kube::Error::Api(s)) if s.code == 404 => anyhow::bail!(
            "node {} has no Lease in {} (is it a node kore simulates?)",
            args.node,
            kore_nodes::LEASE_NAMESPACE
        ),
        Err(e) => Err(e).context("annotating the node's Lease"),
    }
}

/// Runs `kore nodes` until a signal (or one of its commands).
pub(crate) async fn nodes(args: NodesArgs) -> anyhow::Result<()> {
    match args.command.clone() {
        Some(NodeCommand::StopHeartbeat(h)) => return heartbeat(h, true).await,
        Some(NodeCommand::StartHeartbeat(h)) => return heartbeat(h, false).await,
        None => {}
    }
    let kubeconfig = args
        .kubeconfig
        .clone()
        .context("--kubeconfig is required")?;
    let client = client_for(&kubeconfig, args.context.clone()).await?;
    kore_nodes::stage::install(&client)
        .await
        .context("installing the Stage API")?;
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
    let node_stages = NodeStages::controller(manager.informers());
    manager.add(Box::new(scheduler));
    manager.add(Box::new(kubelets));
    manager.add(Box::new(node_stages));
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
