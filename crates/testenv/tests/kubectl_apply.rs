//! kubectl 1.32 `apply`, server-side and client-side, against kore-apiserver over HTTPS.
//!
//! Each test starts its own server with a kubeconfig, runs kubectl with a fresh discovery cache
//! and checks what kubectl printed and what the server stored (read back through the `kube`
//! crate). Without kubectl on `PATH` a test prints `skipping: kubectl not found` and passes.

use std::future::Future;
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kore_testenv::TestEnv;
use kube::api::Api;
use serde_json::Value;
use tokio::process::Command;

/// How long one kubectl command may take.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a whole test may take.
const TEST_TIMEOUT: Duration = Duration::from_secs(180);

async fn within(body: impl Future<Output = ()>) {
    tokio::time::timeout(TEST_TIMEOUT, body)
        .await
        .expect("the test finished within its time limit");
}

fn kubectl_or_skip() -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|dir| dir.join("kubectl"))
            .find(|p| p.is_file())
    });
    if found.is_none() {
        println!("skipping: kubectl not found");
    }
    found
}

#[derive(Debug)]
struct Run {
    status: ExitStatus,
    stdout: String,
    stderr: String,
}

/// kubectl bound to one server's kubeconfig, with its own cache and scratch directories.
struct Kubectl {
    program: PathBuf,
    kubeconfig: PathBuf,
    cache: tempfile::TempDir,
    files: tempfile::TempDir,
}

impl Kubectl {
    fn new(program: PathBuf, env: &TestEnv) -> Kubectl {
        Kubectl {
            program,
            kubeconfig: env
                .kubeconfig_path()
                .expect("the env listens on a socket")
                .to_path_buf(),
            cache: tempfile::tempdir().expect("a cache directory"),
            files: tempfile::tempdir().expect("a scratch directory"),
        }
    }

    async fn run(&self, args: &[&str]) -> Run {
        let mut cmd = Command::new(&self.program);
        cmd.arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .arg("--cache-dir")
            .arg(self.cache.path())
            .args(args)
            .env_remove("KUBECONFIG")
            .stdin(Stdio::null())
            .kill_on_drop(true);
        let out = tokio::time::timeout(COMMAND_TIMEOUT, cmd.output())
            .await
            .unwrap_or_else(|_| panic!("kubectl {args:?} timed out"))
            .unwrap_or_else(|e| panic!("kubectl {args:?} could not run: {e}"));
        Run {
            status: out.status,
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    async fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args).await;
        assert!(out.status.success(), "kubectl {args:?} failed: {out:?}");
        out.stdout
    }

    fn file(&self, name: &str, contents: &str) -> String {
        let path = self.files.path().join(name);
        std::fs::write(&path, contents).expect("writing a manifest");
        path.to_str().expect("a UTF-8 path").to_string()
    }
}

async fn tls_env() -> TestEnv {
    TestEnv::builder()
        .tcp()
        .start()
        .await
        .expect("the server starts")
}

/// The managers of `obj`'s managedFields entries that own `.data.<key>`.
fn owners_of_data_key(obj: &Value, key: &str) -> Vec<String> {
    obj["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["fieldsV1"]["f:data"].get(format!("f:{key}")).is_some())
        .filter_map(|e| e["manager"].as_str().map(String::from))
        .collect()
}

const CM: &str =
    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: demo\ndata:\n  a: \"1\"\n  b: \"2\"\n";
const CM_OTHER: &str =
    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: demo\ndata:\n  a: \"9\"\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_server_side_apply_conflicts_with_another_manager_until_forced() {
    within(async {
        let Some(program) = kubectl_or_skip() else {
            return;
        };
        let env = tls_env().await;
        let kubectl = Kubectl::new(program, &env);
        let mine = kubectl.file("cm.yaml", CM);
        let theirs = kubectl.file("cm-other.yaml", CM_OTHER);
        let api: Api<ConfigMap> = Api::default_namespaced(env.client());

        let out = kubectl.ok(&["apply", "--server-side", "-f", &mine]).await;
        assert_eq!(out, "configmap/demo serverside-applied\n");
        // Applying the same manifest again changes nothing.
        let rv = api
            .get("demo")
            .await
            .expect("get")
            .metadata
            .resource_version;
        assert_eq!(
            kubectl.ok(&["apply", "--server-side", "-f", &mine]).await,
            "configmap/demo serverside-applied\n"
        );
        assert_eq!(
            api.get("demo")
                .await
                .expect("get")
                .metadata
                .resource_version,
            rv
        );

        let refused = kubectl
            .run(&[
                "apply",
                "--server-side",
                "--field-manager=other",
                "-f",
                &theirs,
            ])
            .await;
        assert_eq!(refused.status.code(), Some(1), "{refused:?}");
        assert!(
            refused
                .stderr
                .contains("Apply failed with 1 conflict: conflict with \"kubectl\": .data.a"),
            "{refused:?}"
        );
        let stored = api.get("demo").await.expect("get");
        assert_eq!(
            stored
                .data
                .as_ref()
                .and_then(|d| d.get("a"))
                .map(String::as_str),
            Some("1")
        );

        let out = kubectl
            .ok(&[
                "apply",
                "--server-side",
                "--field-manager=other",
                "--force-conflicts",
                "-f",
                &theirs,
            ])
            .await;
        assert_eq!(out, "configmap/demo serverside-applied\n");
        let stored = serde_json::to_value(api.get("demo").await.expect("get")).expect("json");
        assert_eq!(stored["data"]["a"], "9");
        assert_eq!(stored["data"]["b"], "2", "kubectl still owns b");
        assert_eq!(owners_of_data_key(&stored, "a"), ["other"]);
        assert_eq!(owners_of_data_key(&stored, "b"), ["kubectl"]);
    })
    .await;
}

fn deployment_yaml(image: &str) -> String {
    format!(
        "apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 2
  selector:
    matchLabels:
      app: web
  template:
    metadata:
      labels:
        app: web
    spec:
      containers:
      - name: web
        image: {image}
        ports:
        - containerPort: 80
        env:
        - name: MODE
          value: demo
"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_client_side_apply_of_a_changed_deployment_updates_the_image() {
    within(async {
        let Some(program) = kubectl_or_skip() else {
            return;
        };
        let env = tls_env().await;
        let kubectl = Kubectl::new(program, &env);
        let api: Api<Deployment> = Api::default_namespaced(env.client());
        let first = kubectl.file("web.yaml", &deployment_yaml("nginx:1.26"));
        assert_eq!(
            kubectl.ok(&["apply", "-f", &first]).await,
            "deployment.apps/web created\n"
        );
        let created = api.get("web").await.expect("get");
        assert_eq!(created.metadata.generation, Some(1));

        let second = kubectl.file("web2.yaml", &deployment_yaml("nginx:1.27"));
        assert_eq!(
            kubectl.ok(&["apply", "-f", &second]).await,
            "deployment.apps/web configured\n"
        );
        let updated = api.get("web").await.expect("get");
        assert_eq!(updated.metadata.generation, Some(2));
        let pod = updated
            .spec
            .as_ref()
            .and_then(|s| s.template.spec.as_ref())
            .expect("a pod template");
        assert_eq!(pod.containers.len(), 1);
        let c = &pod.containers[0];
        assert_eq!(c.image.as_deref(), Some("nginx:1.27"));
        // The strategic merge kept what the patch did not mention.
        assert_eq!(c.ports.as_ref().map(|p| p[0].container_port), Some(80));
        assert_eq!(
            c.env.as_ref().and_then(|e| e[0].value.as_deref()),
            Some("demo")
        );
        let managers: Vec<String> = updated
            .metadata
            .managed_fields
            .unwrap_or_default()
            .into_iter()
            .filter_map(|e| e.manager)
            .collect();
        assert_eq!(managers, ["kubectl-client-side-apply"]);

        assert_eq!(
            kubectl.ok(&["apply", "-f", &second]).await,
            "deployment.apps/web unchanged\n"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_moves_a_client_side_applied_object_to_server_side_apply_without_conflicts() {
    within(async {
        let Some(program) = kubectl_or_skip() else {
            return;
        };
        let env = tls_env().await;
        let kubectl = Kubectl::new(program, &env);
        let api: Api<ConfigMap> = Api::default_namespaced(env.client());
        let first = kubectl.file("cm.yaml", CM);
        assert_eq!(
            kubectl.ok(&["apply", "-f", &first]).await,
            "configmap/demo created\n"
        );
        // kubectl rewrites the client-side apply entry into its own Apply entry first (a
        // managedFields patch the server honours), so the changed value is no conflict.
        let changed = kubectl.file(
            "cm2.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: demo\ndata:\n  a: \"5\"\n  b: \"2\"\n",
        );
        let out = kubectl.run(&["apply", "--server-side", "-f", &changed]).await;
        assert!(out.status.success(), "{out:?}");
        let stored = serde_json::to_value(api.get("demo").await.expect("get")).expect("json");
        assert_eq!(stored["data"]["a"], "5");
        assert_eq!(owners_of_data_key(&stored, "a"), ["kubectl"]);
    })
    .await;
}
