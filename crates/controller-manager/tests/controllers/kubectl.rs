//! kubectl's rollout commands against Deployments the controller manager rolls: `rollout
//! status` finishes, `rollout history` lists the revisions, `rollout undo` goes back,
//! `rollout pause` holds a template change back (scaling still goes on), `rollout resume`
//! rolls it out, `rollout restart` rolls out a new ReplicaSet of the same template.

use std::sync::Arc;

use crate::common::{Cluster, Fate};
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::Pod;
use kore_controller_manager::Options;
use kore_testenv::TestEnv;
use kore_testenv::kubectl::{Kubectl, kubectl_or_skip};
use kube::api::{Api, ListParams};

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

fn revision(d: &Deployment) -> Option<String> {
    d.metadata
        .annotations
        .as_ref()?
        .get("deployment.kubernetes.io/revision")
        .cloned()
}

fn progressing_reason(d: &Deployment) -> Option<String> {
    d.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Progressing")?
        .reason
        .clone()
}

/// The ReplicaSets of `app=web` with their sizes.
async fn replicasets(c: &Cluster) -> anyhow::Result<Vec<ReplicaSet>> {
    let api: Api<ReplicaSet> = Api::namespaced(c.client.clone(), "default");
    Ok(api
        .list(&ListParams::default().labels("app=web"))
        .await?
        .items)
}

fn size(rs: &ReplicaSet) -> i32 {
    rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1)
}

#[tokio::test]
async fn kubectl_rollout_pause_resume_and_restart_work() -> anyhow::Result<()> {
    let Some(program) = kubectl_or_skip() else {
        return Ok(());
    };
    let env = TestEnv::builder().tcp().start().await?;
    let kubectl = Kubectl::for_env(program, &env);
    let c = Cluster::start_on(env, Options::default(), Arc::new(|_: &Pod| Fate::Ready)).await?;

    let file = kubectl.file("web.yaml", MANIFEST);
    kubectl.ok(&["apply", "-f", &file]).await;
    kubectl
        .ok(&["rollout", "status", "deployment/web", "--timeout=60s"])
        .await;

    // Paused: a new template is not rolled out, and the Deployment says so.
    kubectl.ok(&["rollout", "pause", "deployment/web"]).await;
    kubectl
        .ok(&["set", "image", "deployment/web", "c=nginx:1.27"])
        .await;
    // Scaling still works while paused.
    kubectl
        .ok(&["scale", "deployment/web", "--replicas=5"])
        .await;
    c.wait_object::<Deployment, _>("web", |d| {
        let s = d.status.as_ref()?;
        (s.observed_generation == d.metadata.generation
            && progressing_reason(d).as_deref() == Some("DeploymentPaused")
            && s.replicas == Some(5))
        .then_some(())
    })
    .await?;
    let rss = replicasets(&c).await?;
    assert_eq!(rss.len(), 1, "no new ReplicaSet while paused");
    assert_eq!(size(&rss[0]), 5, "the paused Deployment was scaled");
    let out = kubectl.run(&["rollout", "restart", "deployment/web"]).await;
    assert!(
        !out.status.success(),
        "kubectl refuses to restart a paused Deployment"
    );

    // Resumed: the held-back template rolls out.
    kubectl.ok(&["rollout", "resume", "deployment/web"]).await;
    let out = kubectl
        .ok(&["rollout", "status", "deployment/web", "--timeout=60s"])
        .await;
    assert!(out.contains("successfully rolled out"), "{out}");
    let d = c
        .wait_object::<Deployment, _>("web", |d| {
            (revision(d).as_deref() == Some("2")).then(|| d.clone())
        })
        .await?;
    assert_eq!(image(&d).as_deref(), Some("nginx:1.27"));

    // Restart: the same image in a new ReplicaSet (the template's restartedAt annotation).
    kubectl.ok(&["rollout", "restart", "deployment/web"]).await;
    let out = kubectl
        .ok(&["rollout", "status", "deployment/web", "--timeout=60s"])
        .await;
    assert!(out.contains("successfully rolled out"), "{out}");
    let d = c
        .wait_object::<Deployment, _>("web", |d| {
            (revision(d).as_deref() == Some("3")).then(|| d.clone())
        })
        .await?;
    assert_eq!(image(&d).as_deref(), Some("nginx:1.27"));
    let rss = replicasets(&c).await?;
    assert_eq!(rss.len(), 3);
    let restarted: Vec<&ReplicaSet> = rss.iter().filter(|rs| size(rs) > 0).collect();
    assert_eq!(
        restarted.len(),
        1,
        "one active ReplicaSet after the restart"
    );
    let annotations = restarted[0]
        .spec
        .as_ref()
        .and_then(|s| s.template.as_ref())
        .and_then(|t| t.metadata.as_ref())
        .and_then(|m| m.annotations.clone())
        .unwrap_or_default();
    assert!(
        annotations.contains_key("kubectl.kubernetes.io/restartedAt"),
        "{annotations:?}"
    );
    assert_eq!(size(restarted[0]), 5);
    c.stop().await
}
