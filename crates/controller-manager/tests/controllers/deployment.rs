//! The Deployment controller against kore-apiserver: rolling updates that keep availability,
//! Recreate, rollback to an old ReplicaSet, revision history cleanup.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use crate::common::{Cluster, NS};
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::Pod;
use kore_runtime::informer::Change;
use kore_runtime::{InformerConfig, SharedInformer};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const REVISION: &str = "deployment.kubernetes.io/revision";

fn deployment(
    name: &str,
    image: &str,
    replicas: i32,
    strategy: Value,
) -> anyhow::Result<Deployment> {
    Ok(serde_json::from_value(json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "strategy": strategy,
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "c", "image": image}]},
            },
        },
    }))?)
}

/// Waits until the rollout is done as `kubectl rollout status` judges it, with `image`.
async fn wait_rolled_out(c: &Cluster, name: &str, image: &str) -> anyhow::Result<Deployment> {
    c.wait_object::<Deployment, _>(name, |d| {
        let s = d.status.as_ref()?;
        let spec = d.spec.as_ref()?;
        let replicas = spec.replicas.unwrap_or(1);
        let current = spec
            .template
            .spec
            .as_ref()?
            .containers
            .first()?
            .image
            .as_deref()?;
        (current == image
            && s.observed_generation >= d.metadata.generation
            && s.updated_replicas.unwrap_or(0) == replicas
            && s.replicas.unwrap_or(0) == replicas
            && s.available_replicas.unwrap_or(0) == replicas)
            .then(|| d.clone())
    })
    .await
}

async fn replicasets(c: &Cluster, app: &str) -> anyhow::Result<Vec<ReplicaSet>> {
    let api: Api<ReplicaSet> = Api::namespaced(c.client.clone(), NS);
    Ok(api
        .list(&ListParams::default().labels(&format!("app={app}")))
        .await?
        .items)
}

fn replicas(rs: &ReplicaSet) -> i32 {
    rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1)
}

fn annotation(
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    key: &str,
) -> Option<String> {
    meta.annotations.as_ref()?.get(key).cloned()
}

fn condition_reason(d: &Deployment, type_: &str) -> Option<(String, String)> {
    d.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| (c.status.clone(), c.reason.clone().unwrap_or_default()))
}

async fn set_image(c: &Cluster, name: &str, image: &str) -> anyhow::Result<()> {
    let api: Api<Deployment> = Api::namespaced(c.client.clone(), NS);
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Strategic(json!({"spec": {"template": {"spec": {"containers": [{"name": "c", "image": image}]}}}})),
    )
    .await?;
    Ok(())
}

/// Watches the pods of `app` and records, after every change, how many are ready and which
/// pod-template hashes have active pods.
struct PodWatch {
    stop: CancellationToken,
    min_ready: Arc<Mutex<usize>>,
    max_active: Arc<Mutex<usize>>,
    mixed: Arc<Mutex<bool>>,
}

impl PodWatch {
    /// Starts watching; records from the first moment `armed_at` pods are ready.
    fn start(c: &Cluster, app: &str, armed_at: usize) -> PodWatch {
        let stop = CancellationToken::new();
        let informer: SharedInformer<Pod> = SharedInformer::new(
            c.client.clone(),
            InformerConfig::default()
                .namespace(NS)
                .label_selector(format!("app={app}")),
        );
        informer.start(stop.clone());
        let mut changes = informer.subscribe();
        let min_ready = Arc::new(Mutex::new(usize::MAX));
        let max_active = Arc::new(Mutex::new(0));
        let mixed = Arc::new(Mutex::new(false));
        let (min, max, mix) = (min_ready.clone(), max_active.clone(), mixed.clone());
        let store = informer.store();
        tokio::spawn(async move {
            let mut state: HashMap<String, Arc<Pod>> = HashMap::new();
            let mut synced = false;
            let mut armed = false;
            while let Some(change) = changes.next().await {
                match change {
                    Change::Applied { new, .. } => {
                        state.insert(new.metadata.name.clone().unwrap_or_default(), new);
                    }
                    Change::Deleted(old) => {
                        state.remove(old.metadata.name.as_deref().unwrap_or_default());
                    }
                    Change::Resync => {
                        state = store
                            .list()
                            .into_iter()
                            .map(|p| (p.metadata.name.clone().unwrap_or_default(), p))
                            .collect();
                        synced = true;
                    }
                }
                if !synced {
                    continue;
                }
                if !armed {
                    let ready = state
                        .values()
                        .filter(|p| p.metadata.deletion_timestamp.is_none() && is_ready(p))
                        .count();
                    if ready < armed_at {
                        continue;
                    }
                    armed = true;
                }
                let active: Vec<&Arc<Pod>> = state
                    .values()
                    .filter(|p| p.metadata.deletion_timestamp.is_none())
                    .collect();
                let ready = active.iter().filter(|p| is_ready(p)).count();
                let hashes: BTreeSet<String> = active
                    .iter()
                    .filter_map(|p| {
                        p.metadata
                            .labels
                            .as_ref()?
                            .get("pod-template-hash")
                            .cloned()
                    })
                    .collect();
                let mut m = min.lock().expect("not poisoned");
                *m = (*m).min(ready);
                let mut x = max.lock().expect("not poisoned");
                *x = (*x).max(active.len());
                if hashes.len() > 1 {
                    *mix.lock().expect("not poisoned") = true;
                }
            }
        });
        PodWatch {
            stop,
            min_ready,
            max_active,
            mixed,
        }
    }

    fn min_ready(&self) -> usize {
        *self.min_ready.lock().expect("not poisoned")
    }

    fn max_active(&self) -> usize {
        *self.max_active.lock().expect("not poisoned")
    }

    fn saw_two_templates(&self) -> bool {
        *self.mixed.lock().expect("not poisoned")
    }
}

impl Drop for PodWatch {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

fn is_ready(p: &Pod) -> bool {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

#[tokio::test]
async fn a_rolling_update_with_max_unavailable_zero_never_drops_below_the_replicas_and_rolls_back()
-> anyhow::Result<()> {
    let c = Cluster::start().await?;
    let api: Api<Deployment> = Api::namespaced(c.client.clone(), NS);
    let strategy =
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}});
    api.create(
        &PostParams::default(),
        &deployment("web", "nginx:1.26", 4, strategy)?,
    )
    .await?;
    let d = wait_rolled_out(&c, "web", "nginx:1.26").await?;
    assert_eq!(annotation(&d.metadata, REVISION).as_deref(), Some("1"));
    assert_eq!(
        condition_reason(&d, "Available"),
        Some(("True".into(), "MinimumReplicasAvailable".into()))
    );
    let first = replicasets(&c, "web").await?;
    assert_eq!(first.len(), 1);
    let first_name = first[0].metadata.name.clone().unwrap_or_default();
    let hash = first[0]
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get("pod-template-hash"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(first_name, format!("web-{hash}"));

    // Roll out a new image while watching the pods.
    let watch = PodWatch::start(&c, "web", 4);
    crate::common::wait_until(|| watch.min_ready() != usize::MAX).await?;
    set_image(&c, "web", "nginx:1.27").await?;
    let d = wait_rolled_out(&c, "web", "nginx:1.27").await?;
    let rss = replicasets(&c, "web").await?;
    assert_eq!(rss.len(), 2);
    let old = rss
        .iter()
        .find(|rs| rs.metadata.name.as_deref() == Some(&first_name))
        .expect("the old ReplicaSet is kept");
    let new = rss
        .iter()
        .find(|rs| rs.metadata.name.as_deref() != Some(&first_name))
        .expect("a new ReplicaSet");
    assert_eq!((replicas(old), replicas(new)), (0, 4));
    assert_eq!(annotation(&new.metadata, REVISION).as_deref(), Some("2"));
    assert_eq!(annotation(&d.metadata, REVISION).as_deref(), Some("2"));
    assert_eq!(
        condition_reason(&d, "Progressing"),
        Some(("True".into(), "NewReplicaSetAvailable".into()))
    );
    // Settle the watch on the final state before reading it.
    crate::common::wait_until(|| true).await?;
    assert!(
        watch.min_ready() >= 4,
        "ready pods dropped to {} during the rollout",
        watch.min_ready()
    );
    assert!(
        watch.saw_two_templates(),
        "old and new pods overlapped, as a rolling update does"
    );

    // Roll back by putting the old template back: the old ReplicaSet is reused with a new revision.
    set_image(&c, "web", "nginx:1.26").await?;
    let d = wait_rolled_out(&c, "web", "nginx:1.26").await?;
    let rss = replicasets(&c, "web").await?;
    assert_eq!(rss.len(), 2, "no third ReplicaSet");
    let back = rss
        .iter()
        .find(|rs| rs.metadata.name.as_deref() == Some(&first_name))
        .expect("the first ReplicaSet");
    assert_eq!(replicas(back), 4);
    assert_eq!(annotation(&back.metadata, REVISION).as_deref(), Some("3"));
    assert_eq!(
        annotation(&back.metadata, "deployment.kubernetes.io/revision-history").as_deref(),
        Some("1")
    );
    assert_eq!(annotation(&d.metadata, REVISION).as_deref(), Some("3"));
    assert!(
        watch.min_ready() >= 4,
        "ready pods dropped to {} during the rollback",
        watch.min_ready()
    );
    c.stop().await
}

#[tokio::test]
async fn recreate_removes_every_old_pod_before_starting_new_ones() -> anyhow::Result<()> {
    let c = Cluster::start().await?;
    let api: Api<Deployment> = Api::namespaced(c.client.clone(), NS);
    api.create(
        &PostParams::default(),
        &deployment("batch", "app:1", 3, json!({"type": "Recreate"}))?,
    )
    .await?;
    wait_rolled_out(&c, "batch", "app:1").await?;
    let watch = PodWatch::start(&c, "batch", 3);
    crate::common::wait_until(|| watch.min_ready() != usize::MAX).await?;
    set_image(&c, "batch", "app:2").await?;
    let d = wait_rolled_out(&c, "batch", "app:2").await?;
    assert!(
        !watch.saw_two_templates(),
        "old and new pods never run together"
    );
    assert!(watch.max_active() <= 3);
    let rss = replicasets(&c, "batch").await?;
    assert_eq!(rss.len(), 2);
    assert_eq!(annotation(&d.metadata, REVISION).as_deref(), Some("2"));
    c.stop().await
}

#[tokio::test]
async fn old_replicasets_beyond_the_revision_history_limit_are_deleted() -> anyhow::Result<()> {
    let c = Cluster::start().await?;
    let api: Api<Deployment> = Api::namespaced(c.client.clone(), NS);
    let mut d = deployment("hist", "app:1", 2, json!({"type": "RollingUpdate"}))?;
    if let Some(spec) = d.spec.as_mut() {
        spec.revision_history_limit = Some(1);
    }
    api.create(&PostParams::default(), &d).await?;
    wait_rolled_out(&c, "hist", "app:1").await?;
    for image in ["app:2", "app:3", "app:4"] {
        set_image(&c, "hist", image).await?;
        wait_rolled_out(&c, "hist", image).await?;
    }
    let rss = crate::common::wait_for_value(|| async {
        let rss = replicasets(&c, "hist").await.ok()?;
        (rss.len() == 2).then_some(rss)
    })
    .await?;
    let mut revisions: Vec<String> = rss
        .iter()
        .filter_map(|rs| annotation(&rs.metadata, REVISION))
        .collect();
    revisions.sort();
    assert_eq!(revisions, ["3", "4"], "the newest old revision is kept");
    c.stop().await
}

#[tokio::test]
async fn scaling_a_deployment_scales_its_replicaset() -> anyhow::Result<()> {
    let c = Cluster::start().await?;
    let api: Api<Deployment> = Api::namespaced(c.client.clone(), NS);
    api.create(
        &PostParams::default(),
        &deployment("scale", "app:1", 2, json!({"type": "RollingUpdate"}))?,
    )
    .await?;
    wait_rolled_out(&c, "scale", "app:1").await?;
    api.patch(
        "scale",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 5}})),
    )
    .await?;
    c.wait_object::<Deployment, _>("scale", |d| {
        let s = d.status.as_ref()?;
        (s.available_replicas == Some(5) && s.observed_generation >= d.metadata.generation)
            .then_some(())
    })
    .await?;
    let rss = replicasets(&c, "scale").await?;
    assert_eq!(rss.len(), 1);
    assert_eq!(replicas(&rss[0]), 5);
    assert_eq!(
        annotation(
            &rss[0].metadata,
            "deployment.kubernetes.io/desired-replicas"
        )
        .as_deref(),
        Some("5")
    );
    assert_eq!(c.active_pods("app=scale").await?.len(), 5);
    c.stop().await
}

/// Pods of image `app:2` never become ready; the others do.
fn new_image_stuck() -> crate::common::FateFn {
    Arc::new(|p: &Pod| {
        let image = p
            .spec
            .as_ref()
            .and_then(|s| s.containers.first())
            .and_then(|c| c.image.clone())
            .unwrap_or_default();
        if image == "app:2" {
            crate::common::Fate::NotReady
        } else {
            crate::common::Fate::Ready
        }
    })
}

#[tokio::test]
async fn scaling_during_a_stuck_rollout_is_shared_in_proportion() -> anyhow::Result<()> {
    let c = Cluster::start_with(
        kore_controller_manager::Options::default(),
        new_image_stuck(),
    )
    .await?;
    let api: Api<Deployment> = Api::namespaced(c.client.clone(), NS);
    let strategy =
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 3, "maxUnavailable": 2}});
    api.create(
        &PostParams::default(),
        &deployment("prop", "app:1", 10, strategy)?,
    )
    .await?;
    wait_rolled_out(&c, "prop", "app:1").await?;
    set_image(&c, "prop", "app:2").await?;
    // The new pods never become ready: the rollout stops at 8 old + 5 new (13 = 10 + maxSurge,
    // 8 available = 10 - maxUnavailable).
    let sizes = |rss: &[ReplicaSet]| {
        let mut by_image: Vec<(String, i32)> = rss
            .iter()
            .map(|rs| {
                let image = rs
                    .spec
                    .as_ref()
                    .and_then(|s| s.template.as_ref())
                    .and_then(|t| t.spec.as_ref())
                    .and_then(|s| s.containers.first())
                    .and_then(|c| c.image.clone())
                    .unwrap_or_default();
                (image, replicas(rs))
            })
            .collect();
        by_image.sort();
        by_image
    };
    let stuck = vec![("app:1".to_owned(), 8), ("app:2".to_owned(), 5)];
    crate::common::wait_for_value(|| async {
        let rss = replicasets(&c, "prop").await.ok()?;
        (sizes(&rss) == stuck).then_some(())
    })
    .await?;

    // Scaling to 20 shares the 10 new replicas in proportion: 8 * 23/13 → 14, 5 * 23/13 → 9.
    api.patch(
        "prop",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 20}})),
    )
    .await?;
    let scaled = vec![("app:1".to_owned(), 14), ("app:2".to_owned(), 9)];
    crate::common::wait_for_value(|| async {
        let rss = replicasets(&c, "prop").await.ok()?;
        (sizes(&rss) == scaled).then_some(())
    })
    .await?;
    c.stop().await
}

#[tokio::test]
async fn a_rollout_that_does_not_progress_exceeds_its_deadline() -> anyhow::Result<()> {
    let c = Cluster::start_with(
        kore_controller_manager::Options::default(),
        new_image_stuck(),
    )
    .await?;
    let api: Api<Deployment> = Api::namespaced(c.client.clone(), NS);
    let mut d = deployment("slow", "app:1", 2, json!({"type": "RollingUpdate"}))?;
    if let Some(spec) = d.spec.as_mut() {
        spec.progress_deadline_seconds = Some(1);
    }
    api.create(&PostParams::default(), &d).await?;
    let d = wait_rolled_out(&c, "slow", "app:1").await?;
    assert_eq!(
        condition_reason(&d, "Progressing"),
        Some(("True".into(), "NewReplicaSetAvailable".into()))
    );
    set_image(&c, "slow", "app:2").await?;
    let d = c
        .wait_object::<Deployment, _>("slow", |d| {
            (condition_reason(d, "Progressing")?.1 == "ProgressDeadlineExceeded").then(|| d.clone())
        })
        .await?;
    assert_eq!(
        condition_reason(&d, "Progressing"),
        Some(("False".into(), "ProgressDeadlineExceeded".into()))
    );
    c.stop().await
}

#[tokio::test]
async fn a_rolled_out_deployment_writes_nothing_more() -> anyhow::Result<()> {
    let c = Cluster::start().await?;
    let api: Api<Deployment> = Api::namespaced(c.client.clone(), NS);
    api.create(
        &PostParams::default(),
        &deployment("quiet", "app:1", 3, json!({"type": "RollingUpdate"}))?,
    )
    .await?;
    wait_rolled_out(&c, "quiet", "app:1").await?;
    let versions = || async {
        let d = api.get("quiet").await.ok()?.metadata.resource_version?;
        let mut rss: Vec<String> = replicasets(&c, "quiet")
            .await
            .ok()?
            .into_iter()
            .filter_map(|rs| rs.metadata.resource_version)
            .collect();
        rss.push(d);
        Some(rss)
    };
    // Let in-flight syncs land (the last status writes follow the pods' readiness).
    let before = crate::common::wait_for_value(|| async {
        let a = versions().await?;
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        let b = versions().await?;
        (a == b).then_some(b)
    })
    .await?;
    // A quiet period: the controllers must not write to a settled Deployment or ReplicaSet.
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    assert_eq!(versions().await, Some(before), "no writes at steady state");
    c.stop().await
}

/// Watches the Deployment `name` and records every write that changed its revision
/// annotation without changing its status: Kubernetes writes both in one status update.
fn watch_revision_only_writes(c: &Cluster, name: &str) -> (CancellationToken, Arc<Mutex<usize>>) {
    let stop = CancellationToken::new();
    let informer: SharedInformer<Deployment> = SharedInformer::new(
        c.client.clone(),
        InformerConfig::default()
            .namespace(NS)
            .field_selector(format!("metadata.name={name}")),
    );
    informer.start(stop.clone());
    let mut changes = informer.subscribe();
    let count = Arc::new(Mutex::new(0));
    let recorded = count.clone();
    tokio::spawn(async move {
        let mut last: Option<Arc<Deployment>> = None;
        while let Some(change) = changes.next().await {
            let Change::Applied { new, .. } = change else {
                continue;
            };
            if let Some(prev) = &last
                && annotation(&prev.metadata, REVISION) != annotation(&new.metadata, REVISION)
                && prev.status == new.status
            {
                *recorded.lock().expect("not poisoned") += 1;
            }
            last = Some(new);
        }
    });
    (stop, count)
}

/// A new ReplicaSet's revision reaches the Deployment in the same write as the Progressing
/// condition `NewReplicaSetCreated`, never in a write of its own.
#[tokio::test]
async fn the_revision_annotation_is_written_with_the_status() -> anyhow::Result<()> {
    let c = Cluster::start().await?;
    let api: Api<Deployment> = Api::namespaced(c.client.clone(), NS);
    let (stop, revision_only) = watch_revision_only_writes(&c, "onewrite");
    api.create(
        &PostParams::default(),
        &deployment("onewrite", "app:1", 2, json!({"type": "RollingUpdate"}))?,
    )
    .await?;
    let d = wait_rolled_out(&c, "onewrite", "app:1").await?;
    assert_eq!(annotation(&d.metadata, REVISION).as_deref(), Some("1"));
    set_image(&c, "onewrite", "app:2").await?;
    let d = wait_rolled_out(&c, "onewrite", "app:2").await?;
    assert_eq!(annotation(&d.metadata, REVISION).as_deref(), Some("2"));
    stop.cancel();
    assert_eq!(
        *revision_only.lock().expect("not poisoned"),
        0,
        "writes of the revision annotation alone"
    );
    c.stop().await
}

#[tokio::test]
async fn the_deprecated_rollback_annotation_rolls_back_and_is_removed() -> anyhow::Result<()> {
    let c = Cluster::start().await?;
    let api: Api<Deployment> = Api::namespaced(c.client.clone(), NS);
    let mut d = deployment("back", "app:1", 2, json!({"type": "RollingUpdate"}))?;
    d.metadata.annotations = Some([("team".to_owned(), "one".to_owned())].into());
    api.create(&PostParams::default(), &d).await?;
    wait_rolled_out(&c, "back", "app:1").await?;
    api.patch(
        "back",
        &PatchParams::default(),
        &Patch::Strategic(json!({
            "metadata": {"annotations": {"team": "two"}},
            "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "app:2"}]}}},
        })),
    )
    .await?;
    wait_rolled_out(&c, "back", "app:2").await?;

    // 0: the revision before the current one.
    let ask = |revision: &str| json!({"metadata": {"annotations": {"deprecated.deployment.rollback.to": revision}}});
    api.patch("back", &PatchParams::default(), &Patch::Merge(ask("0")))
        .await?;
    let d = wait_rolled_out(&c, "back", "app:1").await?;
    assert_eq!(annotation(&d.metadata, REVISION).as_deref(), Some("3"));
    assert_eq!(
        annotation(&d.metadata, "deprecated.deployment.rollback.to"),
        None
    );
    assert_eq!(
        annotation(&d.metadata, "team").as_deref(),
        Some("one"),
        "the annotations of revision 1 came back with its template"
    );
    assert_eq!(
        replicasets(&c, "back").await?.len(),
        2,
        "no third ReplicaSet"
    );

    // A revision that does not exist: the request is dropped, nothing changes.
    api.patch("back", &PatchParams::default(), &Patch::Merge(ask("9")))
        .await?;
    let d = c
        .wait_object::<Deployment, _>("back", |d| {
            annotation(&d.metadata, "deprecated.deployment.rollback.to")
                .is_none()
                .then(|| d.clone())
        })
        .await?;
    assert_eq!(annotation(&d.metadata, REVISION).as_deref(), Some("3"));

    let events: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(c.client.clone(), NS);
    crate::common::wait_for_value(|| async {
        let list = events.list(&ListParams::default()).await.ok()?;
        let reasons: Vec<String> = list.items.into_iter().filter_map(|e| e.reason).collect();
        (reasons.iter().any(|r| r == "DeploymentRollback")
            && reasons
                .iter()
                .any(|r| r == "DeploymentRollbackRevisionNotFound"))
        .then_some(())
    })
    .await?;
    c.stop().await
}
