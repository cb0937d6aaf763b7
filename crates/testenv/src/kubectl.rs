//! kubectl, unchanged, against a [`TestEnv`] over its real socket: find it (or say why a test
//! is skipped), run it with the env's kubeconfig, its own discovery cache and a scratch
//! directory for manifests, and kill it when it overruns [`COMMAND_TIMEOUT`] or is dropped.
//!
//! The helpers panic with the command and its output on failure: they are for tests.

use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use tokio::process::{Child, Command};

use crate::TestEnv;

/// How long one kubectl command may take before it is killed and the test fails.
pub const COMMAND_TIMEOUT: Duration = Duration::from_secs(60);

/// The kubectl on `PATH`, or `None` after printing why the test is skipped.
pub fn kubectl_or_skip() -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|dir| dir.join("kubectl"))
            .find(|candidate| candidate.is_file())
    });
    if found.is_none() {
        println!("skipping: kubectl not found");
    }
    found
}

/// What a finished kubectl printed.
#[derive(Debug)]
pub struct Output {
    /// How kubectl exited.
    pub status: ExitStatus,
    /// Its standard output.
    pub stdout: String,
    /// Its standard error.
    pub stderr: String,
}

/// kubectl bound to one kubeconfig and its own discovery cache and scratch directory.
pub struct Kubectl {
    program: PathBuf,
    kubeconfig: PathBuf,
    cache: tempfile::TempDir,
    files: tempfile::TempDir,
}

impl Kubectl {
    /// kubectl at `program` with `kubeconfig`, a fresh discovery cache and scratch directory.
    pub fn new(program: PathBuf, kubeconfig: &Path) -> Kubectl {
        Kubectl {
            program,
            kubeconfig: kubeconfig.to_path_buf(),
            cache: tempfile::tempdir().expect("a cache directory"),
            files: tempfile::tempdir().expect("a scratch directory"),
        }
    }

    /// The same kubectl (and discovery cache) with another kubeconfig: a rotated credential.
    #[must_use]
    pub fn with_kubeconfig(mut self, kubeconfig: &Path) -> Kubectl {
        self.kubeconfig = kubeconfig.to_path_buf();
        self
    }

    /// kubectl with the kubeconfig of `env` (started with [`crate::Builder::tcp`]).
    pub fn for_env(program: PathBuf, env: &TestEnv) -> Kubectl {
        Kubectl::new(
            program,
            env.kubeconfig_path().expect("the env has a kubeconfig"),
        )
    }

    /// A kubectl command with the kubeconfig and cache set, killed when dropped.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(&self.program);
        cmd.arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .arg("--cache-dir")
            .arg(self.cache.path())
            .args(args)
            .env_remove("KUBECONFIG")
            .stdin(Stdio::null())
            .kill_on_drop(true);
        cmd
    }

    /// Runs kubectl to completion under [`COMMAND_TIMEOUT`].
    pub async fn run(&self, args: &[&str]) -> Output {
        let out = tokio::time::timeout(COMMAND_TIMEOUT, self.command(args).output())
            .await
            .unwrap_or_else(|_| {
                panic!("kubectl {args:?} did not finish within {COMMAND_TIMEOUT:?}")
            })
            .unwrap_or_else(|e| panic!("kubectl {args:?} could not run: {e}"));
        Output {
            status: out.status,
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// Runs kubectl, requires exit code 0 and returns its standard output.
    pub async fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args).await;
        assert!(out.status.success(), "kubectl {args:?} failed: {out:?}");
        out.stdout
    }

    /// Starts a long-running kubectl with piped output.
    pub fn spawn(&self, args: &[&str]) -> Child {
        self.command(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("kubectl {args:?} could not start: {e}"))
    }

    /// Writes `contents` to a file named `name` in the scratch directory.
    pub fn file(&self, name: &str, contents: &str) -> String {
        let path = self.files.path().join(name);
        std::fs::write(&path, contents).expect("writing a manifest");
        path.to_str().expect("a UTF-8 temporary path").to_string()
    }
}
