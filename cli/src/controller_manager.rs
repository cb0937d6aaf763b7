//! `kore controller-manager`: Kubernetes' built-in controllers against any API server,
//! leader-elected on the Lease `kube-system/kube-controller-manager` as
//! kube-controller-manager is. `kore up` runs the same controllers in its process through
//! `kore_controller_manager::spawn`.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use clap::Args;
use kore_controller_manager::{ControllerManager, Options};
use kore_runtime::Manager;
use kore_runtime::metrics::Metrics;

use crate::run::bind_address;

/// Options of `kore controller-manager`.
#[derive(Args, Clone)]
pub(crate) struct ControllerManagerArgs {
    /// The kubeconfig of the API server (default: $KUBECONFIG, ~/.kube/config or the
    /// in-cluster ServiceAccount).
    #[arg(long, value_name = "FILE")]
    kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use (its current context by default).
    #[arg(long)]
    context: Option<String>,
    /// Which controllers run, as kube-controller-manager's flag: `*` for all, `name` to turn
    /// one on, `-name` to turn one off (`replicaset-controller`, `deployment-controller`,
    /// `job-controller`, or their short names).
    #[arg(long, value_delimiter = ',', default_value = "*")]
    controllers: Vec<String>,
    /// Act only while holding the Lease (the default).
    #[arg(long, overrides_with = "no_leader_elect")]
    leader_elect: bool,
    /// Act at once, without leader election (only one instance may run then).
    #[arg(long, overrides_with = "leader_elect")]
    no_leader_elect: bool,
    /// How long a follower waits after the leader's last renewal before taking the Lease
    /// (a duration such as `15s` or `500ms`, as kube-controller-manager's flag).
    #[arg(long, default_value = "15s", value_parser = duration, value_name = "DURATION")]
    leader_elect_lease_duration: Duration,
    /// How long the leader keeps trying to renew before it gives up leading.
    #[arg(long, default_value = "10s", value_parser = duration, value_name = "DURATION")]
    leader_elect_renew_deadline: Duration,
    /// How long candidates wait between tries to acquire or renew the Lease.
    #[arg(long, default_value = "2s", value_parser = duration, value_name = "DURATION")]
    leader_elect_retry_period: Duration,
    /// How long a node may go without renewing its Lease before the node lifecycle
    /// controller marks it Unknown (kube-controller-manager's flag and default).
    #[arg(long, default_value = "50s", value_parser = duration, value_name = "DURATION")]
    node_monitor_grace_period: Duration,
    /// Where to serve /metrics (`0` turns it off).
    #[arg(long, default_value = ":10257")]
    metrics_bind_address: String,
    /// Where to serve /healthz and /readyz (`0` turns it off).
    #[arg(long, default_value = ":10258")]
    health_probe_bind_address: String,
}

/// Runs `kore controller-manager` until a signal.
pub(crate) async fn controller_manager(args: ControllerManagerArgs) -> anyhow::Result<()> {
    let metrics_addr = bind_address("metrics-bind-address", &args.metrics_bind_address)?;
    let health_addr = bind_address("health-probe-bind-address", &args.health_probe_bind_address)?;
    let options = kube::config::KubeConfigOptions {
        context: args.context.clone(),
        ..kube::config::KubeConfigOptions::default()
    };
    let config = match &args.kubeconfig {
        Some(path) => {
            let kubeconfig = kube::config::Kubeconfig::read_from(path)
                .with_context(|| format!("reading {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kubeconfig, &options)
                .await
                .with_context(|| format!("using {}", path.display()))?
        }
        None => kube::Config::infer().await.context(
            "finding a cluster: no --kubeconfig, $KUBECONFIG, ~/.kube/config or in-cluster ServiceAccount",
        )?,
    };
    let client = kube::Client::try_from(config).context("making a client")?;
    let leader_elect = args.leader_elect || !args.no_leader_elect;
    let mut cm_options = Options::default()
        .controllers(args.controllers.clone())
        .leader_elect(leader_elect)
        .lease_timing(
            args.leader_elect_lease_duration,
            args.leader_elect_renew_deadline,
            args.leader_elect_retry_period,
        );
    cm_options.node_monitor_grace_period = args.node_monitor_grace_period;
    let cm = ControllerManager::new(cm_options)?;
    let mut builder = Manager::builder(client);
    if leader_elect {
        builder = builder.leader_election(cm.options().lease());
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
    let names = cm.register(&mut manager, &metrics);
    println!("controllers: {}", names.join(", "));
    manager
        .run()
        .await
        .context("the controller manager stopped")
}

/// Parses a duration flag: `15s`, `500ms`, `1m30s` (jiff's friendly format, which covers
/// the Go durations kube-controller-manager's flags take).
fn duration(value: &str) -> Result<Duration, String> {
    let parsed: jiff::SignedDuration = value
        .parse()
        .map_err(|e| format!("not a duration such as 15s or 500ms: {e}"))?;
    Duration::try_from(parsed).map_err(|_| format!("{value} is negative"))
}

#[cfg(test)]
mod tests {
    use super::duration;
    use std::time::Duration;

    #[test]
    fn lease_timing_flags_take_go_style_durations() {
        assert_eq!(duration("15s"), Ok(Duration::from_secs(15)));
        assert_eq!(duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(duration("1m30s"), Ok(Duration::from_secs(90)));
        assert!(duration("-2s").is_err());
        assert!(duration("soon").is_err());
    }
}
