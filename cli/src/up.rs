//! `kore up`: the embedded API server and every operator in one process.
//!
//! Each operator runs in its own manager under its own identity: the server gets the
//! operator's CRDs, its ServiceAccount, ClusterRole, Role and bindings (the same objects
//! `deploy/` holds), a token minted through the TokenRequest API, and the operator a client
//! presenting that token in-process. So what an operator may do here is what its generated
//! RBAC grants on a cluster, no more. Leader election is on, on a Lease per operator in
//! `kore-system`, as in the Deployments.
//!
//! An operator that loses its Lease (the process was stopped or suspended for longer than the
//! renew deadline) stops its controllers and campaigns again; it never ends the process, whose
//! API server others are using.

use std::time::Duration;

use anyhow::Context as _;
use clap::Args;
use kore_apiserver::server::ApiServer;
use kore_operator::manifests::DEFAULT_NAMESPACE;
use kore_operator::{Operator, Options};
use kore_runtime::Manager;
use kore_runtime::manager::{LeaseConfig, OnLostLeadership, ShutdownHandle};
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
    /// How many simulated nodes to run (with a scheduler and kubelets), so that pods run; 0
    /// for none.
    #[arg(long, default_value_t = 3, value_name = "N")]
    nodes: usize,
}

/// Runs `kore up` until a signal.
pub(crate) async fn up(args: UpArgs) -> anyhow::Result<()> {
    let config = args.serve.config();
    let server = ApiServer::start(config)
        .await
        .context("starting the API server")?;
    let endpoint = server
        .listen(args.serve.listen, args.serve.insecure_http)
        .await
        .with_context(|| format!("listening on {}", args.serve.listen))?;

    let admin = kube::Client::new(server.router(), "default");
    let mut running = Running::start(&admin, server.router(), DEFAULT_NAMESPACE).await?;
    let simulation = crate::nodes::in_process(admin.clone(), args.nodes).await?;
    let controllers =
        kore_controller_manager::spawn(admin.clone(), kore_controller_manager::Options::default())?;

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
    if args.nodes > 0 {
        println!(
            "nodes: {} simulated (kore-node-0..{}), with a scheduler and kubelets",
            args.nodes,
            args.nodes - 1
        );
    }
    println!(
        "controllers: {} (as kube-controller-manager's)",
        kore_controller_manager::CONTROLLERS
            .iter()
            .map(|(_, alias)| *alias)
            .collect::<Vec<_>>()
            .join(", ")
    );
    println!("kubeconfig: {}", kubeconfig.display());
    println!();
    println!("  export KUBECONFIG={}", kubeconfig.display());
    println!("  kubectl get namespaces");
    println!();

    let operators = running.operators.clone();
    let demo = async {
        if args.demo {
            let timeout = Duration::from_secs(args.demo_timeout);
            crate::demo::run(&admin, &operators, timeout).await?;
        }
        println!("Press Ctrl-C to stop.");
        // Serve until a signal or a failure; the demo ends the process only by failing.
        std::future::pending::<anyhow::Result<()>>().await
    };
    let outcome = tokio::select! {
        result = demo => result,
        () = wait_for_signal() => Ok(()),
        e = running.failed() => Err(e),
    };

    tracing::info!("shutting down: operators, then the server; a second signal aborts");
    tokio::select! {
        () = async {
            if let Err(e) = controllers.stop().await {
                tracing::warn!(error = %e, "the controllers stopped with an error");
            }
            if let Some(sim) = simulation {
                sim.stop().await;
            }
            running.stop().await;
            server.shutdown().await;
        } => {}
        () = wait_for_signal() => {
            tracing::warn!("second signal: aborting");
            std::process::exit(130);
        }
    }
    outcome
}

/// How a manager's task ended: the operator's name and what `run` returned.
type Ended = (&'static str, Result<(), kore_runtime::manager::Error>);

/// Every known operator running in this process, each in its own manager.
pub(crate) struct Running {
    /// Their descriptions, in start order.
    pub(crate) operators: Vec<Operator>,
    managers: JoinSet<Ended>,
    stops: Vec<ShutdownHandle>,
}

impl Running {
    /// Installs every known operator on the server behind `router` (namespace, CRDs, RBAC)
    /// and starts each in a manager that acts as its ServiceAccount, leader-elected on a
    /// Lease in `namespace`.
    pub(crate) async fn start(
        admin: &kube::Client,
        router: axum::Router,
        namespace: &str,
    ) -> anyhow::Result<Running> {
        kore_operator::install::namespace(admin, namespace).await?;
        let mut running = Running {
            operators: Vec::new(),
            managers: JoinSet::new(),
            stops: Vec::new(),
        };
        for known in KNOWN {
            let operator = (known.operator)();
            let client = install::operator(admin, router.clone(), &operator, namespace)
                .await
                .with_context(|| format!("installing {}", known.name))?;
            let mut manager = Manager::builder(client)
                .leader_election(
                    // One process per server: a fixed identity lets a restart on the same
                    // data directory take its Lease back at once instead of waiting for it
                    // to expire.
                    LeaseConfig::new(namespace, known.name).identity("kore-up"),
                )
                // The server lives in this process: losing a Lease must never end it.
                .on_lost_leadership(OnLostLeadership::Recampaign)
                .graceful_shutdown_timeout(OPERATOR_GRACE)
                .handle_signals(false)
                .build();
            let metrics = Metrics::new();
            metrics.register(manager.registry_mut());
            (known.register)(&mut manager, &metrics, &Options::default());
            running.stops.push(manager.shutdown_handle());
            let name = known.name;
            running
                .managers
                .spawn(async move { (name, manager.run().await) });
            running.operators.push(operator);
        }
        Ok(running)
    }

    /// Resolves when a manager stops without being asked to, with why.
    pub(crate) async fn failed(&mut self) -> anyhow::Error {
        match self.managers.join_next().await {
            Some(ended) => ended_early(ended),
            None => std::future::pending().await,
        }
    }

    /// Asks every manager to stop gracefully and waits until they have.
    pub(crate) async fn stop(mut self) {
        for stop in &self.stops {
            stop.shutdown();
        }
        while let Some(ended) = self.managers.join_next().await {
            match ended {
                Ok((name, Err(e))) => {
                    tracing::warn!(operator = name, error = %e, "stopped with an error");
                }
                Ok((name, Ok(()))) => tracing::info!(operator = name, "stopped"),
                Err(e) => tracing::warn!(error = %e, "an operator task failed"),
            }
        }
    }
}

/// The error of a manager that stopped before it was asked to.
fn ended_early(ended: Result<Ended, tokio::task::JoinError>) -> anyhow::Error {
    match ended {
        Ok((name, Ok(()))) => anyhow::anyhow!("operator {name} stopped unexpectedly"),
        Ok((name, Err(e))) => anyhow::Error::new(e).context(format!("operator {name} failed")),
        Err(e) => anyhow::Error::new(e).context("an operator task failed"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Secret;

    #[tokio::test]
    async fn each_operator_acts_as_its_service_account_and_is_never_denied() -> anyhow::Result<()> {
        let env = kore_testenv::TestEnv::start().await?;
        let admin = env.client();
        let running = Running::start(&admin, env.server().router(), "ops").await?;
        // As in `kore up`: the Foos' Deployments get pods that run.
        let _nodes = env.start_simulation(2).await?;
        let _controllers = env.start_controllers()?;
        let missing = crate::demo::run(&admin, &running.operators, Duration::from_secs(20)).await?;
        assert!(missing.is_empty(), "{missing:?}");
        running.stop().await;
        for operator in crate::operators::all() {
            kore_testenv::operator::assert_no_denials(&env, &operator, "ops")?;
            let report = kore_testenv::operator::privileges(&env, &operator, "ops")?;
            assert!(
                report.used.iter().any(|p| p.resource == "leases"),
                "{} ran as its ServiceAccount, leader-elected: {report:?}",
                operator.name
            );
        }
        // The identity is not the administrator's: what the RBAC does not grant is refused.
        let client = install::operator(
            &admin,
            env.server().router(),
            &crate::operators::all()[0],
            "ops",
        )
        .await?;
        let secrets: kube::Api<Secret> = kube::Api::namespaced(client, "ops");
        match secrets.list(&Default::default()).await {
            Err(kube::Error::Api(e)) => assert_eq!(e.code, 403),
            other => panic!("listing secrets must be forbidden: {other:?}"),
        }
        Ok(())
    }
}
