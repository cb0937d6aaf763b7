//! `kore`: the embedded Kubernetes control plane and its operators, from one binary.
//!
//! - `kore up [--demo]` starts the embedded API server with every operator, each acting as its
//!   own ServiceAccount, and prints the kubeconfig to use with kubectl (`up.rs`).
//! - `kore run` runs the operators alone against any cluster (`run.rs`).
//! - `kore nodes` runs simulated nodes, a scheduler and kubelets against any API server
//!   (`nodes.rs`); `kore up` runs them in its own process (`--nodes N`, 3 by default).
//! - `kore manifests` writes or checks `deploy/` (`manifests.rs`).
//! - `kore apiserver` starts the API server alone, with every option.
//! - `kore new` and `kore create api` start an operator project of one's own (`scaffold/`).

mod controller_manager;
mod demo;
mod install;
mod manifests;
mod nodes;
mod operators;
mod run;
mod scaffold;
mod up;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use kore_apiserver::server::{ApiServer, Config, Endpoint};
use kore_apiserver::storage::WalConfig;
use tracing_subscriber::EnvFilter;

/// The server allocates and frees many small buffers per request (JSON values, bodies,
/// headers) from several threads; mimalloc's thread-local free lists do this at a fraction of
/// glibc malloc's cost (see docs/design/benchmarks.md).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "kore",
    version,
    about = "Kubernetes operators in Rust, with an embedded control plane"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the embedded control plane with every operator and print a kubeconfig for kubectl.
    Up(up::UpArgs),
    /// Run the operators alone against a cluster.
    Run(run::RunArgs),
    /// Run simulated nodes, a scheduler and kubelets against an API server.
    Nodes(nodes::NodesArgs),
    /// Run Kubernetes' built-in controllers (ReplicaSet, Deployment, Job) against an API server.
    ControllerManager(controller_manager::ControllerManagerArgs),
    /// Write the deploy manifests (CRDs, RBAC, Deployments, samples), or check them.
    Manifests(manifests::ManifestsArgs),
    /// Run the Kubernetes-compatible API server alone.
    Apiserver(ServeArgs),
    /// Create a Cargo project for an operator of your own.
    New(scaffold::new::NewArgs),
    /// Add to a project made by `kore new`.
    #[command(subcommand)]
    Create(scaffold::create_api::CreateCommand),
}

/// Where and how the API server serves.
#[derive(Args, Clone)]
pub(crate) struct ServeArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:6443")]
    pub(crate) listen: SocketAddr,
    /// Keep state here, durably (every acknowledged write survives a crash); in memory if unset.
    #[arg(long)]
    pub(crate) data_dir: Option<PathBuf>,
    /// Start even if the write-ahead log in --data-dir is damaged, truncated or missing,
    /// accepting the loss of what cannot be read. Without it the server refuses to start.
    /// The old log is kept as `kore.wal.damaged-<time>`; revisions continue above every one
    /// handed out before.
    #[arg(long, requires = "data_dir")]
    pub(crate) repair: bool,
    /// Compact the write-ahead log once it is larger than this many bytes (and four times
    /// the live data). For tests.
    #[arg(long, hide = true, value_name = "BYTES")]
    pub(crate) wal_compaction_floor: Option<u64>,
    /// Where to write the kubeconfig.
    #[arg(long, default_value = ".kore/kubeconfig")]
    pub(crate) kubeconfig: PathBuf,
    /// Serve plain HTTP (loopback addresses only; requests act as the administrator).
    #[arg(long)]
    pub(crate) insecure_http: bool,
    /// Write a kubeconfig whose user authenticates by a client certificate signed by the
    /// server's CA (CN kubernetes-admin, O system:masters, valid a year, as kubeadm's
    /// admin.conf) instead of the admin token.
    #[arg(long, conflicts_with = "insecure_http")]
    pub(crate) kubeconfig_client_cert: bool,
    /// Also accept client certificates signed by the CAs in this PEM bundle (user from the
    /// CN, groups from the O values); the server's own CA is always accepted.
    #[arg(long, value_name = "PEM")]
    pub(crate) client_ca_file: Option<PathBuf>,
}

impl ServeArgs {
    /// The server settings these options ask for.
    pub(crate) fn config(&self) -> Config {
        let mut config = Config::default();
        if let Some(dir) = &self.data_dir {
            config = config.data_dir(dir);
        }
        if let Some(bundle) = &self.client_ca_file {
            config = config.client_ca_file(bundle);
        }
        let mut wal = WalConfig::default().repair(self.repair);
        if let Some(bytes) = self.wal_compaction_floor {
            wal = wal.compaction_floor(bytes);
        }
        config.wal(wal)
    }

    /// Writes the kubeconfig of `endpoint` to `--kubeconfig`: with the admin token, or with a
    /// new client certificate under `--kubeconfig-client-cert`.
    pub(crate) fn write_kubeconfig(
        &self,
        server: &ApiServer,
        endpoint: &Endpoint,
    ) -> anyhow::Result<()> {
        let written = if self.kubeconfig_client_cert {
            let yaml = server
                .client_certificate_kubeconfig(endpoint)
                .context("issuing the kubeconfig's client certificate")?;
            kore_apiserver::auth::kubeconfig::write_kubeconfig(&self.kubeconfig, &yaml)
                .map_err(anyhow::Error::from)
        } else {
            ApiServer::write_kubeconfig(endpoint, &self.kubeconfig).map_err(anyhow::Error::from)
        };
        written.with_context(|| format!("writing {}", self.kubeconfig.display()))
    }
}

async fn serve(args: ServeArgs) -> anyhow::Result<()> {
    let config = args.config();
    let server = ApiServer::start(config)
        .await
        .context("starting the API server")?;
    let endpoint = server
        .listen(args.listen, args.insecure_http)
        .await
        .with_context(|| format!("listening on {}", args.listen))?;
    args.write_kubeconfig(&server, &endpoint)?;
    let kubeconfig = std::fs::canonicalize(&args.kubeconfig).unwrap_or(args.kubeconfig.clone());
    tracing::info!(url = %endpoint.url, kubeconfig = %kubeconfig.display(), "serving");
    wait_for_signal().await;
    tracing::info!("shutting down; a second signal aborts");
    tokio::select! {
        () = server.shutdown() => {}
        () = wait_for_signal() => {
            tracing::warn!("second signal: aborting");
            std::process::exit(130);
        }
    }
    Ok(())
}

/// Resolves on SIGINT or SIGTERM.
pub(crate) async fn wait_for_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: starting the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        match cli.command {
            Command::Up(args) => up::up(args).await,
            Command::Run(args) => run::run(args).await,
            Command::Nodes(args) => nodes::nodes(args).await,
            Command::ControllerManager(args) => controller_manager::controller_manager(args).await,
            Command::Manifests(args) => manifests::manifests(&args),
            Command::Apiserver(args) => serve(args).await,
            Command::New(args) => scaffold::new::new(&args),
            Command::Create(command) => scaffold::create_api::create(&command),
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
