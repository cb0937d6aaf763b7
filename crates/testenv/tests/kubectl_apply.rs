//! kubectl 1.32 `apply`, server-side and client-side, against kore-apiserver over HTTPS.
//!
//! Each test starts its own server with a kubeconfig, runs kubectl with a fresh discovery cache
//! and checks what kubectl printed and what the server stored (read back through the `kube`
//! crate). Without kubectl on `PATH` a test prints `skipping: kubectl not found` and passes.

use std::future::Future;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kore_testenv::TestEnv;
use kore_testenv::kubectl::{Kubectl, kubectl_or_skip};
use kube::api::Api;
use serde_json::Value;

/// How long a whole test may take.
const TEST_TIMEOUT: Duration = Duration::from_secs(180);

async fn within(body: impl Future<Output = ()>) {
    tokio::time::timeout(TEST_TIMEOUT, body)
        .await
        .expect("the test finished within its time limit");
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
        let kubectl = Kubectl::for_env(program, &env);
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
        let kubectl = Kubectl::for_env(program, &env);
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
        let kubectl = Kubectl::for_env(program, &env);
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
