//! Spawning the built `kore` binary for the CLI's tests: `kore up` and `kore apiserver` on a
//! free port with their kubeconfig in a temporary directory, their output collected, and the
//! process killed when the test ends.

#![allow(dead_code, reason = "each test file uses a part of these helpers")]

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt as _, BufReader};
use tokio::process::{Child, Command};

/// How long a spawned process may take to serve.
pub(crate) const START: Duration = Duration::from_secs(30);

/// The workspace root (deploy/ and examples/ live there).
pub(crate) fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("cli/ has a parent")
        .to_path_buf()
}

/// The `kore` binary under test.
pub(crate) fn kore() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_kore"));
    cmd.env("RUST_LOG", "info").kill_on_drop(true);
    cmd
}

/// `cargo`, as the test's own cargo, without the variables `cargo test` sets for this test
/// process (`CARGO_MANIFEST_DIR`, `CARGO_PKG_*`, …). Build scripts that watch one of them
/// (ring's watches `CARGO_MANIFEST_DIR`) would otherwise see it change between this build and
/// the workspace's, rerun, and rebuild everything above them twice: once here and once in the
/// next `cargo test` (docs/design/ci.md).
pub(crate) fn cargo() -> Command {
    let mut cmd = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    for (name, _) in std::env::vars_os() {
        if name.to_str().is_some_and(is_test_package_variable) {
            cmd.env_remove(name);
        }
    }
    cmd
}

fn is_test_package_variable(name: &str) -> bool {
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
}

/// A running `kore` process and what it printed so far.
pub(crate) struct Process {
    pub(crate) child: Child,
    pub(crate) dir: tempfile::TempDir,
    pub(crate) kubeconfig: PathBuf,
    stdout: Arc<Mutex<Vec<String>>>,
    stderr: Arc<Mutex<Vec<String>>>,
}

fn collect<R: tokio::io::AsyncRead + Unpin + Send + 'static>(reader: R) -> Arc<Mutex<Vec<String>>> {
    let lines = Arc::new(Mutex::new(Vec::new()));
    let sink = lines.clone();
    tokio::spawn(async move {
        let mut reader = BufReader::new(reader).lines();
        while let Ok(Some(line)) = reader.next_line().await {
            sink.lock().expect("not poisoned").push(line);
        }
    });
    lines
}

impl Process {
    /// Starts `kore <command> --listen 127.0.0.1:0 --kubeconfig <tmp> <extra>` and waits
    /// until its kubeconfig is written (after the operators are installed, for `up`).
    pub(crate) async fn start(command: &str, extra: &[&str]) -> Process {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let kubeconfig = dir.path().join("kubeconfig");
        let mut child = kore()
            .arg(command)
            .args(["--listen", "127.0.0.1:0", "--kubeconfig"])
            .arg(&kubeconfig)
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("kore starts");
        let stdout = collect(child.stdout.take().expect("piped"));
        let stderr = collect(child.stderr.take().expect("piped"));
        let process = Process {
            child,
            dir,
            kubeconfig,
            stdout,
            stderr,
        };
        let deadline = tokio::time::Instant::now() + START;
        while !process.kubeconfig.exists() {
            assert!(
                tokio::time::Instant::now() < deadline,
                "kore {command} wrote no kubeconfig within {START:?}:\n{}",
                process.output()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        process
    }

    /// The standard output lines so far.
    pub(crate) fn stdout(&self) -> Vec<String> {
        self.stdout.lock().expect("not poisoned").clone()
    }

    /// Everything printed so far, for failure messages.
    pub(crate) fn output(&self) -> String {
        format!(
            "stdout:\n{}\nstderr:\n{}",
            self.stdout().join("\n"),
            self.stderr.lock().expect("not poisoned").join("\n")
        )
    }

    /// Waits until a standard output line satisfies `matches`, and returns it.
    pub(crate) async fn line(&self, timeout: Duration, matches: impl Fn(&str) -> bool) -> String {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if let Some(line) = self.stdout().into_iter().find(|l| matches(l)) {
                return line;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "no such line within {timeout:?}:\n{}",
                self.output()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// A client using the kubeconfig, as the administrator.
    pub(crate) async fn client(&self) -> kube::Client {
        let kubeconfig =
            kube::config::Kubeconfig::read_from(&self.kubeconfig).expect("a kubeconfig");
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
            .await
            .expect("a usable kubeconfig");
        kube::Client::try_from(config).expect("a client")
    }

    /// Sends SIGINT, as Ctrl-C does.
    pub(crate) async fn interrupt(&self) {
        let pid = self.child.id().expect("still running");
        let status = Command::new("kill")
            .args(["-INT", &pid.to_string()])
            .status()
            .await
            .expect("kill runs");
        assert!(status.success());
    }
}
