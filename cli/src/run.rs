//! `kore run`: the operators alone, against any cluster, in one manager.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context as _;
use clap::{Args, ValueEnum};
use kore_operator::Options;
use kore_runtime::Manager;
use kore_runtime::manager::{LeaseConfig, OnLostLeadership};
use kore_runtime::metrics::Metrics;

use crate::operators::{self, Known};

/// Options of `kore run`.
#[derive(Args, Clone)]
pub(crate) struct RunArgs {
    /// The kubeconfig to use; without it, $KUBECONFIG, ~/.kube/config or the in-cluster
    /// ServiceAccount.
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use (its current context by default).
    #[arg(long)]
    context: Option<String>,
    /// The operators to run, comma-separated.
    #[arg(
        long,
        value_delimiter = ',',
        value_parser = operators::parse,
        default_value = "configmap-sync,sample-controller"
    )]
    operators: Vec<&'static Known>,
    /// Watch only this namespace (default: all).
    #[arg(long)]
    namespace: Option<String>,
    /// Compete for a Lease and reconcile only while holding it (the default).
    #[arg(long, overrides_with = "no_leader_elect")]
    leader_elect: bool,
    /// Reconcile at once, without leader election (only one process may run then).
    #[arg(long, overrides_with = "leader_elect")]
    no_leader_elect: bool,
    /// The Lease's namespace (default: the client's namespace: the pod's namespace in a
    /// cluster, the kubeconfig context's otherwise).
    #[arg(long)]
    leader_election_namespace: Option<String>,
    /// The Lease's name (default: the operator's name if one runs, else `kore-operators`).
    #[arg(long)]
    leader_election_id: Option<String>,
    /// What to do when the Lease is lost: stop the controllers and campaign again, keeping
    /// the caches warm (`recampaign`), or exit non-zero as controller-runtime does (`exit`).
    #[arg(long, value_enum, default_value_t = LostLeadership::Recampaign)]
    on_lost_leadership: LostLeadership,
    /// Where to serve /metrics (`:8080` is every interface; `0` turns it off).
    #[arg(long, default_value = ":8080")]
    metrics_bind_address: String,
    /// Where to serve /healthz and /readyz (`0` turns it off).
    #[arg(long, default_value = ":8081")]
    health_probe_bind_address: String,
}

/// `--on-lost-leadership`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum LostLeadership {
    /// Stop the controllers, keep the caches, campaign again.
    Recampaign,
    /// Exit non-zero; whatever restarts the process competes again.
    Exit,
}

impl From<LostLeadership> for OnLostLeadership {
    fn from(value: LostLeadership) -> Self {
        match value {
            LostLeadership::Recampaign => OnLostLeadership::Recampaign,
            LostLeadership::Exit => OnLostLeadership::Exit,
        }
    }
}

/// Parses a bind address: `host:port`, `:port` (every interface) or `0` (off).
pub(crate) fn bind_address(flag: &str, value: &str) -> anyhow::Result<Option<SocketAddr>> {
    if value == "0" {
        return Ok(None);
    }
    let full = match value.strip_prefix(':') {
        Some(port) => format!("0.0.0.0:{port}"),
        None => value.to_owned(),
    };
    full.parse()
        .map(Some)
        .with_context(|| format!("--{flag} {value}: not host:port, :port or 0"))
}

async fn client_config(args: &RunArgs) -> anyhow::Result<kube::Config> {
    let options = kube::config::KubeConfigOptions {
        context: args.context.clone(),
        ..kube::config::KubeConfigOptions::default()
    };
    match (&args.kubeconfig, &args.context) {
        (Some(path), _) => {
            let kubeconfig = kube::config::Kubeconfig::read_from(path)
                .with_context(|| format!("reading {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kubeconfig, &options)
                .await
                .with_context(|| format!("using {}", path.display()))
        }
        (None, Some(_)) => kube::Config::from_kubeconfig(&options)
            .await
            .context("loading the kubeconfig"),
        (None, None) => kube::Config::infer()
            .await
            .context("finding a cluster: no --kubeconfig, $KUBECONFIG, ~/.kube/config or in-cluster ServiceAccount"),
    }
}

/// Runs the chosen operators until a signal (the manager handles SIGINT and SIGTERM).
pub(crate) async fn run(args: RunArgs) -> anyhow::Result<()> {
    let metrics_addr = bind_address("metrics-bind-address", &args.metrics_bind_address)?;
    let health_addr = bind_address("health-probe-bind-address", &args.health_probe_bind_address)?;
    let config = client_config(&args).await?;
    let default_namespace = config.default_namespace.clone();
    let client = kube::Client::try_from(config).context("building the client")?;

    let mut chosen: Vec<&'static Known> = Vec::new();
    for known in &args.operators {
        if !chosen.iter().any(|c| c.name == known.name) {
            chosen.push(known);
        }
    }
    let names: Vec<&'static str> = chosen.iter().map(|k| k.name).collect();
    require_crds(&client, &chosen).await?;
    let mut builder = Manager::builder(client);
    let leader_elect = args.leader_elect || !args.no_leader_elect;
    if leader_elect {
        let namespace = args
            .leader_election_namespace
            .clone()
            .unwrap_or(default_namespace);
        let id = args
            .leader_election_id
            .clone()
            .unwrap_or_else(|| match names.as_slice() {
                [one] => (*one).to_owned(),
                _ => "kore-operators".to_owned(),
            });
        tracing::info!(lease = %format!("{namespace}/{id}"), "leader election on");
        builder = builder
            .leader_election(LeaseConfig::new(namespace, id))
            .on_lost_leadership(args.on_lost_leadership.into());
    }
    if let Some(addr) = metrics_addr {
        builder = builder.metrics_bind_address(addr);
    }
    if let Some(addr) = health_addr {
        builder = builder.health_probe_bind_address(addr);
    }
    let mut manager = builder.build();
    let metrics = Metrics::new();
    metrics.register(manager.registry_mut());
    for known in &chosen {
        let mut options = Options::default();
        if let Some(ns) = &args.namespace {
            options = options.namespace(ns.clone());
        }
        (known.register)(&mut manager, &metrics, &options);
    }
    tracing::info!(operators = %names.join(","), namespace = ?args.namespace, "running");
    manager.run().await.context("the manager stopped")
}

/// Fails, naming what to install, unless the server serves every CRD of `operators`
/// (checked through discovery, which every authenticated user may read). Without it the
/// controllers would only log list errors forever.
async fn require_crds(client: &kube::Client, operators: &[&'static Known]) -> anyhow::Result<()> {
    let mut missing = Vec::new();
    for known in operators {
        for crd in (known.operator)().crds {
            let Some(version) = crd.spec.versions.iter().find(|v| v.served) else {
                continue;
            };
            let gvk = kube::core::GroupVersionKind::gvk(
                &crd.spec.group,
                &version.name,
                &crd.spec.names.kind,
            );
            match kube::discovery::pinned_kind(client, &gvk).await {
                Ok(_) => {}
                Err(kube::Error::Api(e)) if e.code == 404 => {
                    missing.push(crd.metadata.name.unwrap_or_default());
                }
                Err(e) => {
                    return Err(e).with_context(|| {
                        format!(
                            "checking that {}/{} is served",
                            crd.spec.group, version.name
                        )
                    });
                }
            }
        }
    }
    anyhow::ensure!(
        missing.is_empty(),
        "the server does not serve the CRDs {}: install them first (kubectl apply -f deploy/crds/)",
        missing.join(", ")
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        run: RunArgs,
    }

    #[test]
    fn a_lost_lease_means_campaigning_again_unless_exit_is_asked_for() {
        use clap::Parser as _;
        let parse = |args: &[&str]| {
            Cli::try_parse_from(std::iter::once("run").chain(args.iter().copied()))
                .map(|c| OnLostLeadership::from(c.run.on_lost_leadership))
        };
        assert_eq!(parse(&[]).expect("valid"), OnLostLeadership::Recampaign);
        assert_eq!(
            parse(&["--on-lost-leadership", "exit"]).expect("valid"),
            OnLostLeadership::Exit
        );
        assert_eq!(
            parse(&["--on-lost-leadership=recampaign"]).expect("valid"),
            OnLostLeadership::Recampaign
        );
        let err = parse(&["--on-lost-leadership", "restart"])
            .expect_err("refused")
            .to_string();
        assert!(err.contains("exit") && err.contains("recampaign"), "{err}");
    }

    #[test]
    fn bind_addresses_accept_host_port_a_bare_port_and_zero_for_off() {
        assert_eq!(
            bind_address("x", ":8080").expect("valid"),
            Some(SocketAddr::from(([0, 0, 0, 0], 8080)))
        );
        assert_eq!(
            bind_address("x", "127.0.0.1:0").expect("valid"),
            Some(SocketAddr::from(([127, 0, 0, 1], 0)))
        );
        assert_eq!(bind_address("x", "0").expect("valid"), None);
        assert!(bind_address("x", "nope").is_err());
    }
}
