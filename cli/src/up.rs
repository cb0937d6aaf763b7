//! `kore up`: the embedded API server and every operator in one process.
//!
//! Each operator runs in its own manager under its own identity: the server gets the
//! operator's CRDs, its ServiceAccount, ClusterRole, Role and bindings (the same objects
//! `deploy/` holds), a token minted through the TokenRequest API, and the operator a client
//! presenting that token in-process. So what an operator may do here is what its generated
//! RBAC grants on a cluster, no more. Leader election is on, on a Lease per operator in
//! `kore-system`, as in the Deployments.

use std::time::Duration;

use anyhow::Context as _;
use clap::Args;
use kore_apiserver::server::{ApiServer, Config};
use kore_operator::manifests::DEFAULT_NAMESPACE;
use kore_runtime::Manager;
use kore_runtime::manager::{LeaseConfig, ShutdownHandle};
use kore_runtime::metrics::Metrics;
use tokio::task::JoinSet;

use crate::operators::KNOWN;
use crate::{ServeArgs, install, wait_for_signal};

/// How long operators may take to stop before the server stops anyway.
const OPERATOR_GRACE: Duration = Duration::from_secs(10);

/// Options of `kore up`.
#[derive(Args, Clone)]
pub(crate) struct UpArgs {
    #[command(flatten)]
    serve: ServeArgs,
    /// Also apply every operator's samples and print what converged.
    #[arg(long)]
    demo: bool,
    /// How long the demo waits for its samples to converge, in seconds.
    #[arg(long, default_value_t = 30, value_name = "SECONDS")]
    demo_timeout: u64,
}

/// Runs `kore up` until a signal.
pub(crate) async fn up(args: UpArgs) -> anyhow::Result<()> {
    let mut config = Config::default();
    if let Some(dir) = &args.serve.data_dir {
        config = config.data_dir(dir);
    }
    let server = ApiServer::start(config)
        .await
        .context("starting the API server")?;
    let endpoint = server
        .listen(args.serve.listen, args.serve.insecure_http)
        .await
        .with_context(|| format!("listening on {}", args.serve.listen))?;

    let admin = kube::Client::new(server.router(), "default");
    install::namespace(&admin, DEFAULT_NAMESPACE).await?;
    let mut managers: JoinSet<(&'static str, Result<(), kore_runtime::manager::Error>)> =
        JoinSet::new();
    let mut stops: Vec<ShutdownHandle> = Vec::new();
    let mut operators = Vec::new();
    for known in KNOWN {
        let operator = (known.operator)();
        let client = install::operator(&admin, server.router(), &operator, DEFAULT_NAMESPACE)
            .await
            .with_context(|| format!("installing {}", known.name))?;
        let mut manager = Manager::builder(client)
            .leader_election(
                // One process per server: a fixed identity lets a restart on the same data
                // directory take its Lease back at once instead of waiting for it to expire.
                LeaseConfig::new(DEFAULT_NAMESPACE, known.name).identity("kore-up"),
            )
            .graceful_shutdown_timeout(OPERATOR_GRACE)
            .handle_signals(false)
            .build();
        let metrics = Metrics::new();
        metrics.register(manager.registry_mut());
        (known.register)(&mut manager, &metrics, None);
        stops.push(manager.shutdown_handle());
        let name = known.name;
        managers.spawn(async move { (name, manager.run().await) });
        operators.push(operator);
    }

    ApiServer::write_kubeconfig(&endpoint, &args.serve.kubeconfig)
        .with_context(|| format!("writing {}", args.serve.kubeconfig.display()))?;
    let kubeconfig =
        std::fs::canonicalize(&args.serve.kubeconfig).unwrap_or(args.serve.kubeconfig.clone());
    tracing::info!(url = %endpoint.url, kubeconfig = %kubeconfig.display(), "serving");
    println!(
        "kore is up: the Kubernetes API is served at {}",
        endpoint.url
    );
    println!(
        "operators: {} (each as its ServiceAccount in {DEFAULT_NAMESPACE})",
        crate::operators::names()
    );
    println!("kubeconfig: {}", kubeconfig.display());
    println!();
    println!("  export KUBECONFIG={}", kubeconfig.display());
    println!("  kubectl get namespaces");
    println!();

    let outcome = tokio::select! {
        result = async {
            if args.demo {
                crate::demo::run(&admin, &operators, Duration::from_secs(args.demo_timeout)).await?;
            }
            println!("Press Ctrl-C to stop.");
            Ok::<_, anyhow::Error>(())
        } => result,
        Some(ended) = managers.join_next() => Err(ended_early(ended)),
    };
    let outcome = match outcome {
        Ok(()) => tokio::select! {
            () = wait_for_signal() => Ok(()),
            Some(ended) = managers.join_next() => Err(ended_early(ended)),
        },
        Err(e) => Err(e),
    };

    tracing::info!("shutting down: operators, then the server; a second signal aborts");
    for stop in &stops {
        stop.shutdown();
    }
    tokio::select! {
        () = async {
            while let Some(ended) = managers.join_next().await {
                match ended {
                    Ok((name, Err(e))) => tracing::warn!(operator = name, error = %e, "stopped with an error"),
                    Ok((name, Ok(()))) => tracing::info!(operator = name, "stopped"),
                    Err(e) => tracing::warn!(error = %e, "an operator task failed"),
                }
            }
            server.shutdown().await;
        } => {}
        () = wait_for_signal() => {
            tracing::warn!("second signal: aborting");
            std::process::exit(130);
        }
    }
    outcome
}

/// The error of a manager that stopped before it was asked to.
fn ended_early(
    ended: Result<(&'static str, Result<(), kore_runtime::manager::Error>), tokio::task::JoinError>,
) -> anyhow::Error {
    match ended {
        Ok((name, Ok(()))) => anyhow::anyhow!("operator {name} stopped unexpectedly"),
        Ok((name, Err(e))) => anyhow::Error::new(e).context(format!("operator {name} failed")),
        Err(e) => anyhow::Error::new(e).context("an operator task failed"),
    }
}
