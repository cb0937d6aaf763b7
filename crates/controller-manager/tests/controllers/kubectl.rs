//! kubectl's rollout commands against Deployments the controller manager rolls: `rollout
//! status` finishes, `rollout history` lists the revisions, `rollout undo` goes back.

use std::sync::Arc;

use crate::common::{Cluster, Fate};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use kore_controller_manager::Options;
use kore_testenv::TestEnv;
use kore_testenv::kubectl::{Kubectl, kubectl_or_skip};

const MANIFEST: &str = r"
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: default
spec:
  replicas: 3
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: c
        image: nginx:1.26
";

fn image(d: &Deployment) -> Option<String> {
    d.spec
        .as_ref()?
        .template
        .spec
        .as_ref()?
        .containers
        .first()?
        .image
        .clone()
}

#[tokio::test]
async fn kubectl_rollout_status_history_and_undo_work() -> anyhow::Result<()> {
    let Some(program) = kubectl_or_skip() else {
        return Ok(());
    };
    let env = TestEnv::builder().tcp().start().await?;
    let kubectl = Kubectl::for_env(program, &env);
    let c = Cluster::start_on(env, Options::default(), Arc::new(|_: &Pod| Fate::Ready)).await?;

    let file = kubectl.file("web.yaml", MANIFEST);
    kubectl.ok(&["apply", "-f", &file]).await;
    let out = kubectl
        .ok(&["rollout", "status", "deployment/web", "--timeout=60s"])
        .await;
    assert!(out.contains("successfully rolled out"), "{out}");

    kubectl
        .ok(&["set", "image", "deployment/web", "c=nginx:1.27"])
        .await;
    let out = kubectl
        .ok(&["rollout", "status", "deployment/web", "--timeout=60s"])
        .await;
    assert!(out.contains("successfully rolled out"), "{out}");

    let history = kubectl.ok(&["rollout", "history", "deployment/web"]).await;
    assert!(history.contains('1') && history.contains('2'), "{history}");

    kubectl.ok(&["rollout", "undo", "deployment/web"]).await;
    let out = kubectl
        .ok(&["rollout", "status", "deployment/web", "--timeout=60s"])
        .await;
    assert!(out.contains("successfully rolled out"), "{out}");
    let d = c
        .wait_object::<Deployment, _>("web", |d| {
            let rev = d
                .metadata
                .annotations
                .as_ref()?
                .get("deployment.kubernetes.io/revision")?;
            (rev == "3").then(|| d.clone())
        })
        .await?;
    assert_eq!(
        image(&d).as_deref(),
        Some("nginx:1.26"),
        "undo went back to revision 1's template"
    );
    c.stop().await
}
