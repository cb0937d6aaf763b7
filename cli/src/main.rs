//! `kore`: the embedded Kubernetes control plane and its operators, from one binary.
//!
//! - `kore up` starts the embedded API server (the operators join it in a later release) and
//!   prints the kubeconfig to use with kubectl.
//! - `kore apiserver` starts the API server alone, with every option.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use kore_apiserver::server::{ApiServer, Config};
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
    /// Run the embedded control plane and print a kubeconfig for kubectl.
    Up(ServeArgs),
    /// Run the Kubernetes-compatible API server alone.
    Apiserver(ServeArgs),
}

#[derive(Args, Clone)]
struct ServeArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:6443")]
    listen: SocketAddr,
    /// Keep state here, durably (every acknowledged write survives a crash); in memory if unset.
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Where to write the kubeconfig.
    #[arg(long, default_value = ".kore/kubeconfig")]
    kubeconfig: PathBuf,
    /// Serve plain HTTP (loopback addresses only; requests act as the administrator).
    #[arg(long)]
    insecure_http: bool,
}

async fn serve(args: ServeArgs, banner: bool) -> anyhow::Result<()> {
    let mut config = Config::default();
    if let Some(dir) = &args.data_dir {
        config = config.data_dir(dir);
    }
    let server = ApiServer::start(config)
        .await
        .context("starting the API server")?;
    let endpoint = server
        .listen(args.listen, args.insecure_http)
        .await
        .with_context(|| format!("listening on {}", args.listen))?;
    ApiServer::write_kubeconfig(&endpoint, &args.kubeconfig)
        .with_context(|| format!("writing {}", args.kubeconfig.display()))?;
    let kubeconfig = std::fs::canonicalize(&args.kubeconfig).unwrap_or(args.kubeconfig.clone());
    tracing::info!(url = %endpoint.url, kubeconfig = %kubeconfig.display(), "serving");
    if banner {
        println!(
            "kore is up: the Kubernetes API is served at {}",
            endpoint.url
        );
        println!("kubeconfig: {}", kubeconfig.display());
        println!();
        println!("  export KUBECONFIG={}", kubeconfig.display());
        println!("  kubectl get namespaces");
        println!();
        println!("Press Ctrl-C to stop.");
    }
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

async fn wait_for_signal() {
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
            Command::Up(args) => serve(args, true).await,
            Command::Apiserver(args) => serve(args, false).await,
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
