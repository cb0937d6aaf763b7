//! The operator side of the operators suite: one operator implementation in a child process
//! of `kore-bench`, so its memory and CPU time are its own and not the server's.
//!
//! The parent re-executes this binary with `KORE_BENCH_OPERATOR_CHILD` set to a JSON
//! [`ChildSpec`]. The child connects to the parent's server over plain HTTP on loopback with a
//! `kube::Client` whose service counts every request it sends (method and resource, see
//! [`Counts`]), runs the implementation, and answers on stdout, one JSON [`Stats`] line for
//! each `stats` line it reads on stdin. `stop` (or the end of stdin) stops the operator and
//! the process.
//!
//! Every implementation runs as the admin (RBAC is not what is measured) and without leader
//! election, whose Lease renewals would be writes that are not the operator's work.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context as _;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _};
use tokio_util::sync::CancellationToken;

/// The environment variable that makes this process a child.
pub(crate) const CHILD_ENV: &str = "KORE_BENCH_OPERATOR_CHILD";

/// Which operator the child runs.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub(crate) enum Implementation {
    /// `kore_configmap_sync::register` on a kore-runtime `Manager`.
    Kore,
    /// The same reconcile on kube-runtime (`operators_peers::kube_runtime`).
    KubeRuntime,
    /// The tutorial's naive reconcile (`operators_peers::naive`).
    Naive,
    /// `kore_sample_controller::register` on a kore-runtime `Manager`.
    KoreFoo,
}

impl Implementation {
    /// The name printed in the table.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Implementation::Kore | Implementation::KoreFoo => "kore",
            Implementation::KubeRuntime => "kube-runtime",
            Implementation::Naive => "naive",
        }
    }
}

/// What the parent asks the child to run.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct ChildSpec {
    /// The operator.
    pub(crate) implementation: Implementation,
    /// The server's base URL (`http://127.0.0.1:PORT`).
    pub(crate) url: String,
    /// Reconciles at once (the same for every implementation).
    pub(crate) concurrency: usize,
}

/// What the child reports.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub(crate) struct Stats {
    /// Requests sent, by `METHOD resource[/subresource]` (a list or get is `GET`, a watch
    /// `WATCH`).
    pub(crate) requests: BTreeMap<String, u64>,
    /// Answers with a status of 400 or more (conflicts, not found).
    pub(crate) errors: u64,
    /// The process's resident memory now (`VmRSS`).
    pub(crate) rss_bytes: u64,
    /// Its peak resident memory (`VmHWM`).
    pub(crate) hwm_bytes: u64,
    /// User + system CPU time of the process so far.
    pub(crate) cpu_seconds: f64,
}

impl Stats {
    /// Requests whose key passes `keep`.
    pub(crate) fn count(&self, keep: impl Fn(&str) -> bool) -> u64 {
        self.requests
            .iter()
            .filter(|(k, _)| keep(k))
            .map(|(_, n)| n)
            .sum()
    }

    /// Write requests: creates, updates, patches, deletes.
    pub(crate) fn writes(&self) -> u64 {
        self.count(is_write)
    }

    /// Gets and lists (not watches).
    pub(crate) fn reads(&self) -> u64 {
        self.count(|k| k.starts_with("GET "))
    }

    /// The difference `self - earlier` of the request counts.
    pub(crate) fn since(&self, earlier: &Stats) -> Stats {
        let requests = self
            .requests
            .iter()
            .map(|(k, n)| {
                let before = earlier.requests.get(k).copied().unwrap_or(0);
                (k.clone(), n.saturating_sub(before))
            })
            .filter(|(_, n)| *n > 0)
            .collect();
        Stats {
            requests,
            errors: self.errors.saturating_sub(earlier.errors),
            ..self.clone()
        }
    }
}

/// Whether a request key names a write.
pub(crate) fn is_write(key: &str) -> bool {
    ["POST ", "PUT ", "PATCH ", "DELETE "]
        .iter()
        .any(|m| key.starts_with(m))
}

/// Counts of the requests a client sent.
#[derive(Default)]
pub(crate) struct Counts {
    requests: Mutex<BTreeMap<String, u64>>,
    errors: std::sync::atomic::AtomicU64,
}

impl Counts {
    fn record(&self, method: &http::Method, uri: &http::Uri) {
        let watch = uri
            .query()
            .is_some_and(|q| q.split('&').any(|p| p == "watch=true" || p == "watch=1"));
        let verb = if watch { "WATCH" } else { method.as_str() };
        let key = format!("{verb} {}", resource_of(uri.path()));
        let mut requests = self.requests.lock().expect("no panic while counting");
        *requests.entry(key).or_default() += 1;
    }

    fn snapshot(&self) -> (BTreeMap<String, u64>, u64) {
        (
            self.requests
                .lock()
                .expect("no panic while counting")
                .clone(),
            self.errors.load(std::sync::atomic::Ordering::Relaxed),
        )
    }
}

/// `resource[/subresource]` of an API path: `/api/v1/namespaces/a/configmaps/x` is
/// `configmaps`, `/apis/g/v/namespaces/a/foos/x/status` is `foos/status`.
fn resource_of(path: &str) -> String {
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let rest = match segs.first() {
        Some(&"api") => segs.get(2..),
        Some(&"apis") => segs.get(3..),
        _ => None,
    }
    .unwrap_or(&[]);
    let rest = match rest {
        ["namespaces", _, tail @ ..] if !tail.is_empty() => tail,
        _ => rest,
    };
    match rest {
        [] => path.to_owned(),
        [resource] | [resource, _] => (*resource).to_owned(),
        [resource, _, sub, ..] => format!("{resource}/{sub}"),
    }
}

/// A client for `url` whose requests are counted in the returned [`Counts`].
pub(crate) fn counted_client(url: &str) -> anyhow::Result<(kube::Client, Arc<Counts>)> {
    let config = kube::Config::new(url.parse().context("parsing the server URL")?);
    let counts = Arc::new(Counts::default());
    let on_request = counts.clone();
    let on_response = counts.clone();
    let client = kube::client::ClientBuilder::try_from(config)?
        .with_layer(&tower::util::MapRequestLayer::new(
            move |req: http::Request<kube::client::Body>| {
                on_request.record(req.method(), req.uri());
                req
            },
        ))
        .with_layer(&tower::util::MapResponseLayer::new(
            move |res: http::Response<_>| {
                if res.status().as_u16() >= 400 {
                    on_response
                        .errors
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
                res
            },
        ))
        .build();
    Ok((client, counts))
}

fn status_field(name: &str) -> anyhow::Result<u64> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    let kib = status
        .lines()
        .find_map(|l| l.strip_prefix(name))
        .and_then(|v| v.trim().strip_suffix("kB"))
        .and_then(|v| v.trim().parse::<u64>().ok())
        .with_context(|| format!("no {name} in /proc/self/status"))?;
    Ok(kib * 1024)
}

fn stats(counts: &Counts) -> anyhow::Result<Stats> {
    let (requests, errors) = counts.snapshot();
    Ok(Stats {
        requests,
        errors,
        rss_bytes: status_field("VmRSS:")?,
        hwm_bytes: status_field("VmHWM:")?,
        cpu_seconds: crate::procs::cpu_time("/proc/self/stat")?.as_secs_f64(),
    })
}

/// Runs the child if this process is one (`main` calls this first).
pub(crate) fn main_from_env() -> Option<anyhow::Result<()>> {
    let spec = std::env::var(CHILD_ENV).ok()?;
    Some((|| {
        let spec: ChildSpec = serde_json::from_str(&spec).context("parsing the child spec")?;
        // A real operator's runtime: one worker per core.
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()?;
        runtime.block_on(child(spec))
    })())
}

async fn child(spec: ChildSpec) -> anyhow::Result<()> {
    let (client, counts) = counted_client(&spec.url)?;
    let shutdown = CancellationToken::new();
    let mut operator = tokio::spawn(run_operator(
        spec.implementation,
        client,
        spec.concurrency,
        shutdown.clone(),
    ));
    let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    let mut stdout = tokio::io::stdout();
    loop {
        tokio::select! {
            line = lines.next_line() => match line?.as_deref() {
                Some("stats") => {
                    let mut text = serde_json::to_string(&stats(&counts)?)?;
                    text.push('\n');
                    stdout.write_all(text.as_bytes()).await?;
                    stdout.flush().await?;
                }
                Some("stop") | None => break,
                Some(other) => anyhow::bail!("unknown command {other:?}"),
            },
            ended = &mut operator => {
                ended.context("the operator task panicked")??;
                anyhow::bail!("the operator stopped by itself");
            }
        }
    }
    shutdown.cancel();
    match tokio::time::timeout(Duration::from_secs(10), operator).await {
        Ok(ended) => ended.context("the operator task panicked")?,
        // A slow stop is not what is measured: the process exits anyway.
        Err(_) => Ok(()),
    }
}

async fn run_operator(
    implementation: Implementation,
    client: kube::Client,
    concurrency: usize,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    match implementation {
        Implementation::Kore | Implementation::KoreFoo => {
            let mut manager = kore_runtime::Manager::builder(client)
                .handle_signals(false)
                .build();
            let metrics = kore_runtime::metrics::Metrics::new();
            metrics.register(manager.registry_mut());
            if implementation == Implementation::Kore {
                let options =
                    kore_configmap_sync::Options::default().max_concurrent_reconciles(concurrency);
                kore_configmap_sync::register(&mut manager, &metrics, &options);
            } else {
                let options = kore_sample_controller::Options::default()
                    .max_concurrent_reconciles(concurrency);
                kore_sample_controller::register(&mut manager, &metrics, &options);
            }
            let stop = manager.shutdown_handle();
            tokio::spawn(async move {
                shutdown.cancelled().await;
                stop.shutdown();
            });
            manager.run().await.context("the kore manager failed")
        }
        Implementation::KubeRuntime => {
            crate::operators_peers::kube_runtime(client, concurrency, shutdown).await
        }
        Implementation::Naive => crate::operators_peers::naive(client, concurrency, shutdown).await,
    }
}

/// A running child, as the parent holds it.
pub(crate) struct Child {
    process: tokio::process::Child,
    stdin: tokio::process::ChildStdin,
    stdout: tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
}

impl Child {
    /// Starts a child running `spec`.
    pub(crate) fn spawn(spec: &ChildSpec) -> anyhow::Result<Child> {
        // This very executable even if its file has been replaced since it started (a
        // rebuild in a shared target directory): the fork's /proc/self/exe is ours.
        let exe = std::path::Path::new("/proc/self/exe");
        let exe = if exe.exists() {
            exe.to_path_buf()
        } else {
            std::env::current_exe()?
        };
        let mut process = tokio::process::Command::new(exe)
            .env(CHILD_ENV, serde_json::to_string(spec)?)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .context("starting the operator child")?;
        let stdin = process.stdin.take().context("the child's stdin")?;
        let stdout = process.stdout.take().context("the child's stdout")?;
        Ok(Child {
            process,
            stdin,
            stdout: tokio::io::BufReader::new(stdout).lines(),
        })
    }

    /// The child's counts and memory now.
    pub(crate) async fn stats(&mut self) -> anyhow::Result<Stats> {
        self.stdin.write_all(b"stats\n").await?;
        self.stdin.flush().await?;
        let line = tokio::time::timeout(Duration::from_secs(30), self.stdout.next_line())
            .await
            .context("the operator child did not answer")??
            .context("the operator child exited")?;
        serde_json::from_str(&line).context("parsing the child's stats")
    }

    /// Stops the child and waits for it to exit.
    pub(crate) async fn stop(mut self) -> anyhow::Result<()> {
        // A child that already failed has closed its stdin; its exit status says why.
        let _ = self.stdin.write_all(b"stop\n").await;
        drop(self.stdin);
        let status = match tokio::time::timeout(Duration::from_secs(20), self.process.wait()).await
        {
            Ok(status) => status?,
            Err(_) => {
                self.process.kill().await?;
                anyhow::bail!("the operator child did not stop");
            }
        };
        anyhow::ensure!(status.success(), "the operator child failed: {status}");
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_paths_name_their_resource_and_subresource() {
        assert_eq!(
            resource_of("/api/v1/namespaces/a/configmaps/x"),
            "configmaps"
        );
        assert_eq!(resource_of("/api/v1/namespaces/a/configmaps"), "configmaps");
        assert_eq!(resource_of("/api/v1/configmaps"), "configmaps");
        assert_eq!(
            resource_of("/apis/sync.kore.dev/v1alpha1/namespaces/a/configmapsyncs/x/status"),
            "configmapsyncs/status"
        );
        assert_eq!(resource_of("/api/v1/namespaces/a"), "namespaces");
        assert_eq!(resource_of("/api/v1/namespaces"), "namespaces");
        assert_eq!(
            resource_of("/apis/events.k8s.io/v1/namespaces/a/events"),
            "events"
        );
    }

    #[test]
    fn stats_since_an_earlier_snapshot_keep_only_what_was_added() {
        let earlier = Stats {
            requests: [
                ("POST configmaps".to_owned(), 3),
                ("GET configmaps".to_owned(), 1),
            ]
            .into(),
            ..Stats::default()
        };
        let later = Stats {
            requests: [
                ("POST configmaps".to_owned(), 3),
                ("GET configmaps".to_owned(), 4),
                ("PATCH configmapsyncs/status".to_owned(), 2),
            ]
            .into(),
            ..Stats::default()
        };
        let added = later.since(&earlier);
        assert_eq!(added.writes(), 2);
        assert_eq!(added.reads(), 3);
    }
}
