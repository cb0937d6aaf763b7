//! The Python `kubernetes` client (from PyPI), unchanged, against kore-apiserver over HTTPS.
//!
//! The client lives in a virtualenv cached at `target/py-kubernetes-venv` (or `$KORE_PY_VENV`),
//! created with `python3 -m venv` and `pip install kubernetes` the first time, before any timed
//! part of the test. Only when pip cannot reach the package index does the test print
//! `skipping: …` and return; any other failure to prepare the client fails the test.
//!
//! The script `tests/python/client_smoke.py` does the client's side (create, list, watch, patch,
//! version, discovery, a Deployment's scale, the dynamic client) and exits non-zero with a
//! traceback on the first failure.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kore_testenv::TestEnv;
use kube::api::{Api, PostParams};
use serde_json::json;
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, BufReader};

/// How long the script may run, from start to exit.
const SCRIPT_TIMEOUT: Duration = Duration::from_secs(90);

/// Words in pip's output that mean the package index could not be reached.
const NO_NETWORK: [&str; 9] = [
    "Failed to establish a new connection",
    "Temporary failure in name resolution",
    "Name or service not known",
    "Network is unreachable",
    "No route to host",
    "Connection refused",
    "ConnectTimeoutError",
    "ProxyError",
    "No matching distribution found for kubernetes",
];

/// Where the virtualenv is kept.
fn venv_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("KORE_PY_VENV") {
        return PathBuf::from(dir);
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"));
    target.join("py-kubernetes-venv")
}

fn venv_python(venv: &Path) -> PathBuf {
    venv.join("bin").join("python")
}

fn imports_kubernetes(python: &Path) -> bool {
    python.is_file()
        && Command::new(python)
            .args(["-c", "import kubernetes"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
}

/// A Python with `kubernetes` importable, creating the virtualenv if needed; `None` after
/// printing why the test is skipped (pip had no network).
fn python_with_kubernetes() -> Option<PathBuf> {
    let venv = venv_dir();
    let python = venv_python(&venv);
    if imports_kubernetes(&python) {
        return Some(python);
    }
    if !python.is_file() {
        let out = Command::new("python3")
            .args(["-m", "venv"])
            .arg(&venv)
            .output()
            .unwrap_or_else(|e| panic!("python3 is needed to create {}: {e}", venv.display()));
        assert!(
            out.status.success(),
            "python3 -m venv {} failed: {}",
            venv.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let out = Command::new(&python)
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "kubernetes",
        ])
        .env("PIP_DEFAULT_TIMEOUT", "30")
        .output()
        .unwrap_or_else(|e| panic!("running pip of {}: {e}", venv.display()));
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        if NO_NETWORK.iter().any(|marker| stderr.contains(marker)) {
            let last = stderr
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap_or_default();
            println!(
                "skipping: pip could not download the Python kubernetes client into {} (no network?): {last}",
                venv.display()
            );
            return None;
        }
        panic!(
            "pip install kubernetes into {} failed: {stderr}",
            venv.display()
        );
    }
    assert!(
        imports_kubernetes(&python),
        "kubernetes is not importable after pip install"
    );
    Some(python)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_kubernetes_client_creates_lists_watches_and_patches_over_https() {
    // Outside the timed part: the first run creates the virtualenv.
    let Some(python) = tokio::task::spawn_blocking(python_with_kubernetes)
        .await
        .expect("the setup ran")
    else {
        return;
    };
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/client_smoke.py");

    let env = TestEnv::builder()
        .tcp()
        .start()
        .await
        .expect("the server starts");
    assert!(
        env.endpoint()
            .expect("endpoint")
            .url
            .starts_with("https://")
    );
    let kubeconfig = env.kubeconfig_path().expect("kubeconfig").to_path_buf();
    let cms: Api<ConfigMap> = Api::default_namespaced(env.client());

    let mut child = tokio::process::Command::new(&python)
        .arg(&script)
        .arg(&kubeconfig)
        .arg("default")
        .env("PYTHONUNBUFFERED", "1")
        .env_remove("KUBECONFIG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("the script starts");
    let mut stderr_pipe = child.stderr.take().expect("piped stderr");
    let stderr = tokio::spawn(async move {
        let mut s = String::new();
        let _ = stderr_pipe.read_to_string(&mut s).await;
        s
    });
    let mut lines = BufReader::new(child.stdout.take().expect("piped stdout")).lines();

    let run = async {
        let mut stdout = Vec::new();
        // The script lists, then watches from the list's revision: the object created here
        // reaches it as an ADDED event.
        let mut created = false;
        while let Some(line) = lines.next_line().await.expect("reading stdout") {
            if line.starts_with("READY ") && !created {
                cms.create(
                    &PostParams::default(),
                    &serde_json::from_value(
                        json!({"metadata": {"name": "from-rust"}, "data": {"k": "v"}}),
                    )
                    .expect("a ConfigMap"),
                )
                .await
                .expect("create from Rust");
                created = true;
            }
            stdout.push(line);
        }
        let status = child.wait().await.expect("the script's exit status");
        (status, stdout, created)
    };
    let (status, stdout, created) = tokio::time::timeout(SCRIPT_TIMEOUT, run)
        .await
        .unwrap_or_else(|_| panic!("the Python script did not finish within {SCRIPT_TIMEOUT:?}"));
    let stderr = stderr.await.expect("stderr collected");
    assert!(
        status.success(),
        "the Python script failed ({status}):\nstdout: {stdout:#?}\nstderr:\n{stderr}"
    );
    assert!(created, "the script never announced its watch: {stdout:#?}");
    assert_eq!(
        stdout.last().map(String::as_str),
        Some("OK"),
        "{stdout:#?}\n{stderr}"
    );

    // What the client wrote, read back through kube.
    let made = cms
        .get("from-python")
        .await
        .expect("the script created from-python");
    let data = made.data.unwrap_or_default();
    let expected: BTreeMap<String, String> = [("a", "1"), ("c", "3")]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    assert_eq!(
        data, expected,
        "the strategic merge patch removed b and added c"
    );
    let labels = made.metadata.labels.unwrap_or_default();
    assert_eq!(labels.get("app").map(String::as_str), Some("smoke"));
    assert_eq!(labels.get("patched").map(String::as_str), Some("yes"));
    let deployment = Api::<Deployment>::default_namespaced(env.client())
        .get("py-web")
        .await
        .expect("the script created py-web");
    assert_eq!(
        deployment.spec.and_then(|s| s.replicas),
        Some(4),
        "scaled through /scale"
    );
}
