//! SIGTERM against a real process: the `graceful_worker` example, talking to a TestEnv over
//! HTTPS, finishes its job in flight, starts nothing new, releases its Lease and exits 0; a
//! second signal aborts it.

use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;

/// The example binary, built on demand (cargo builds examples only for a full `cargo test`).
/// `--workspace` keeps the workspace's unified features: built with `-p kore-runtime` alone,
/// its dependencies resolve to other feature sets and cargo rebuilds them (45 s in CI, for a
/// binary `cargo test --workspace` has already built).
fn example() -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe()?;
    let profile_dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .ok_or_else(|| anyhow::anyhow!("unexpected test binary path {exe:?}"))?;
    let path = profile_dir.join("examples").join("graceful_worker");
    // Set KORE_EXAMPLES_PREBUILT when the example was built beforehand with custom flags.
    if std::env::var_os("KORE_EXAMPLES_PREBUILT").is_none() {
        let mut cargo = Command::new(env!("CARGO"));
        // Without the variables `cargo test` set for this process: build scripts that watch
        // one (ring's watches CARGO_MANIFEST_DIR) would rerun and rebuild half the workspace.
        for (name, _) in std::env::vars_os() {
            if name.to_str().is_some_and(|name| {
                [
                    "CARGO_MANIFEST_",
                    "CARGO_PKG_",
                    "CARGO_CRATE_",
                    "CARGO_BIN_",
                    "CARGO_PRIMARY_PACKAGE",
                    "CARGO_TARGET_TMPDIR",
                    "CARGO_RUSTC_CURRENT_DIR",
                ]
                .iter()
                .any(|prefix| name.starts_with(prefix))
            }) {
                cargo.env_remove(name);
            }
        }
        let status = cargo
            .args(["build", "-q", "--workspace", "--example", "graceful_worker"])
            .status()?;
        anyhow::ensure!(status.success(), "building the example failed");
    }
    anyhow::ensure!(path.exists(), "no example binary at {path:?}");
    Ok(path)
}

fn spawn(env: &kore_testenv::TestEnv, work_seconds: u64) -> anyhow::Result<Child> {
    let kubeconfig = env
        .kubeconfig_path()
        .ok_or_else(|| anyhow::anyhow!("the env serves TCP"))?;
    Ok(Command::new(example()?)
        .args(["--work-seconds", &work_seconds.to_string()])
        .env("KUBECONFIG", kubeconfig)
        .stdin(Stdio::null())
        .spawn()?)
}

fn signal(child: &Child, name: &str) -> anyhow::Result<()> {
    let status = Command::new("kill")
        .args([format!("-{name}"), child.id().to_string()])
        .status()?;
    anyhow::ensure!(status.success(), "kill -{name} failed");
    Ok(())
}

async fn data(env: &kore_testenv::TestEnv, key: &str) -> anyhow::Result<Option<String>> {
    let api: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    Ok(api
        .get_opt("graceful-worker")
        .await?
        .and_then(|cm| cm.data)
        .and_then(|d| d.get(key).cloned()))
}

async fn wait_for_data(env: &kore_testenv::TestEnv, key: &str, want: &str) -> anyhow::Result<()> {
    for _ in 0..600 {
        if data(env, key).await?.as_deref() == Some(want) {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    anyhow::bail!("{key} never became {want}")
}

async fn wait_exit(mut child: Child) -> anyhow::Result<ExitStatus> {
    for _ in 0..600 {
        if let Some(status) = child.try_wait()? {
            return Ok(status);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    child.kill()?;
    anyhow::bail!("the process did not exit within 30 s")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_lets_the_job_in_flight_finish_starts_nothing_new_and_exits_zero()
-> anyhow::Result<()> {
    let env = kore_testenv::TestEnv::builder().tcp().start().await?;
    let child = spawn(&env, 2)?;
    wait_for_data(&env, "started", "1").await?;
    assert_eq!(
        data(&env, "finished").await?,
        None,
        "the first job is in flight"
    );

    signal(&child, "TERM")?;
    let status = wait_exit(child).await?;
    assert!(status.success(), "exit status {status:?}");
    assert_eq!(data(&env, "finished").await?.as_deref(), Some("1"));
    assert_eq!(
        data(&env, "started").await?.as_deref(),
        Some("1"),
        "no new job"
    );

    let leases: Api<Lease> = Api::namespaced(env.client(), "default");
    let lease = leases.get("graceful-worker").await?;
    assert_eq!(lease.spec.and_then(|s| s.holder_identity), None, "released");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_sigterm_aborts_the_graceful_shutdown() -> anyhow::Result<()> {
    let env = kore_testenv::TestEnv::builder().tcp().start().await?;
    let child = spawn(&env, 60)?;
    wait_for_data(&env, "started", "1").await?;

    signal(&child, "TERM")?;
    // Let the first signal be handled on its own before sending the second.
    tokio::time::sleep(Duration::from_millis(500)).await;
    signal(&child, "TERM")?;
    let status = wait_exit(child).await?;
    assert_eq!(status.code(), Some(1), "exit status {status:?}");
    assert_eq!(data(&env, "finished").await?, None, "the job was cut short");
    Ok(())
}
