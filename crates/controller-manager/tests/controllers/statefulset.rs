//! The StatefulSet controller against kore-apiserver with simulated nodes: pods `web-0`,
//! `web-1`, … created in order with their claims, Parallel creation, scale-down from the
//! highest ordinal, rolling updates with a partition, OnDelete, claim retention, pods
//! replaced under the same name, and `kubectl rollout status`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::common::{Cluster, Fate, NS, names};
use k8s_openapi::api::apps::v1::{ControllerRevision, StatefulSet};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use k8s_openapi::api::events::v1::Event;
use kore_controller_manager::Options;
use kore_controller_manager::pods::is_ready;
use kore_runtime::informer::Change;
use kore_runtime::{InformerConfig, SharedInformer};
use kore_testenv::kubectl::{Kubectl, kubectl_or_skip};
use kore_testenv::{TestEnv, wait_for};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::common::WAIT;

/// A StatefulSet `name` of `replicas` pods of image `img:1`, one claim template `data`,
/// with `extra` merged into its spec.
fn statefulset(name: &str, replicas: i32, extra: Value) -> anyhow::Result<StatefulSet> {
    let mut spec = json!({
        "replicas": replicas,
        "serviceName": name,
        "selector": {"matchLabels": {"app": name}},
        "template": {
            "metadata": {"labels": {"app": name}},
            "spec": {"containers": [{
                "name": "c",
                "image": "img:1",
                "volumeMounts": [{"name": "data", "mountPath": "/data"}],
            }]},
        },
        "volumeClaimTemplates": [{
            "metadata": {"name": "data"},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "1Gi"}},
            },
        }],
    });
    if let (Some(spec), Some(extra)) = (spec.as_object_mut(), extra.as_object()) {
        for (k, v) in extra {
            spec.insert(k.clone(), v.clone());
        }
    }
    Ok(serde_json::from_value(json!({
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": name, "namespace": NS},
        "spec": spec,
    }))?)
}

/// What the watch saw happen to a pod, in the server's order.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Seen {
    Created(String),
    Ready(String),
    Terminating(String),
}

/// Records what happens to the pods of `app` from now on, in watch order.
async fn record(c: &Cluster, app: &str, stop: &CancellationToken) -> Arc<Mutex<Vec<Seen>>> {
    let informer: SharedInformer<Pod> = SharedInformer::new(
        c.client.clone(),
        InformerConfig::default()
            .namespace(NS)
            .label_selector(format!("app={app}")),
    );
    informer.start(stop.clone());
    let mut changes = informer.subscribe();
    let store = informer.store();
    let log = Arc::new(Mutex::new(Vec::new()));
    let out = log.clone();
    let (synced_tx, synced_rx) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        // name → (uid, ready, terminating)
        let mut state: HashMap<String, (String, bool, bool)> = HashMap::new();
        let mut synced = Some(synced_tx);
        while let Some(change) = changes.next().await {
            let pods = match change {
                Change::Applied { new, .. } => vec![new],
                Change::Resync => {
                    if let Some(tx) = synced.take() {
                        let _ = tx.send(());
                    }
                    store.list()
                }
                Change::Deleted(_) => continue,
            };
            let mut log = out.lock().expect("not poisoned");
            for p in pods {
                let name = p.metadata.name.clone().unwrap_or_default();
                let uid = p.metadata.uid.clone().unwrap_or_default();
                let entry = state.entry(name.clone()).or_default();
                if entry.0 != uid {
                    *entry = (uid, false, false);
                    log.push(Seen::Created(name.clone()));
                }
                if is_ready(&p) && !entry.1 {
                    entry.1 = true;
                    log.push(Seen::Ready(name.clone()));
                }
                if p.metadata.deletion_timestamp.is_some() && !entry.2 {
                    entry.2 = true;
                    log.push(Seen::Terminating(name.clone()));
                }
            }
        }
    });
    let _ = synced_rx.await;
    log
}

fn position(log: &[Seen], seen: &Seen) -> usize {
    log.iter()
        .position(|s| s == seen)
        .unwrap_or_else(|| panic!("{seen:?} not in {log:?}"))
}

/// Waits until the set's status shows `ready` ready pods, observed at its generation, with
/// `check` holding; returns the set.
async fn wait_status(
    c: &Cluster,
    name: &str,
    check: impl Fn(&k8s_openapi::api::apps::v1::StatefulSetStatus) -> bool,
) -> anyhow::Result<StatefulSet> {
    c.wait_object::<StatefulSet, _>(name, |s| {
        let status = s.status.as_ref()?;
        (status.observed_generation == s.metadata.generation && check(status)).then(|| s.clone())
    })
    .await
}

/// Waits until the set has `n` replicas, all ready and updated, its rollout complete.
async fn wait_rolled_out(c: &Cluster, name: &str, n: i32) -> anyhow::Result<StatefulSet> {
    wait_status(c, name, |s| {
        s.replicas == n
            && s.ready_replicas == Some(n)
            && s.available_replicas == Some(n)
            && s.updated_replicas == Some(n)
            && s.current_replicas == Some(n)
            && s.current_revision.is_some()
            && s.current_revision == s.update_revision
    })
    .await
}

fn image(p: &Pod) -> Option<String> {
    p.spec.as_ref()?.containers.first()?.image.clone()
}

fn label<'a>(p: &'a Pod, key: &str) -> Option<&'a str> {
    p.metadata.labels.as_ref()?.get(key).map(String::as_str)
}

async fn pod(c: &Cluster, name: &str) -> anyhow::Result<Pod> {
    Ok(Api::<Pod>::namespaced(c.client.clone(), NS)
        .get(name)
        .await?)
}

async fn set_image(c: &Cluster, name: &str, img: &str) -> anyhow::Result<()> {
    Api::<StatefulSet>::namespaced(c.client.clone(), NS)
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"template": {"spec": {"containers": [{
                "name": "c",
                "image": img,
                "volumeMounts": [{"name": "data", "mountPath": "/data"}],
            }]}}}})),
        )
        .await?;
    Ok(())
}

async fn patch_spec(c: &Cluster, name: &str, spec: Value) -> anyhow::Result<()> {
    Api::<StatefulSet>::namespaced(c.client.clone(), NS)
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": spec})),
        )
        .await?;
    Ok(())
}

async fn claim_names(c: &Cluster) -> anyhow::Result<Vec<String>> {
    let mut names: Vec<String> = Api::<PersistentVolumeClaim>::namespaced(c.client.clone(), NS)
        .list(&Default::default())
        .await?
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter_map(|p| p.metadata.name)
        .collect();
    names.sort();
    Ok(names)
}

#[tokio::test]
async fn pods_are_created_in_order_each_after_the_previous_is_ready() -> anyhow::Result<()> {
    let c = Cluster::start().await?.without_kubelet();
    let sim = c.env.start_simulation(2).await?;
    let stop = CancellationToken::new();
    let log = record(&c, "web", &stop).await;
    let sets: Api<StatefulSet> = Api::namespaced(c.client.clone(), NS);
    sets.create(&PostParams::default(), &statefulset("web", 3, json!({}))?)
        .await?;
    let set = wait_rolled_out(&c, "web", 3).await?;

    let log = log.lock().expect("not poisoned").clone();
    for (prev, next) in [("web-0", "web-1"), ("web-1", "web-2")] {
        assert!(
            position(&log, &Seen::Ready(prev.into())) < position(&log, &Seen::Created(next.into())),
            "{next} was created before {prev} was ready: {log:?}"
        );
    }
    let revision = set.status.and_then(|s| s.update_revision);
    for ordinal in 0..3 {
        let name = format!("web-{ordinal}");
        let p = pod(&c, &name).await?;
        assert_eq!(
            label(&p, "statefulset.kubernetes.io/pod-name"),
            Some(name.as_str())
        );
        assert_eq!(
            label(&p, "apps.kubernetes.io/pod-index"),
            Some(ordinal.to_string().as_str())
        );
        assert_eq!(label(&p, "controller-revision-hash"), revision.as_deref());
        let spec = p.spec.clone().unwrap_or_default();
        assert_eq!(spec.hostname.as_deref(), Some(name.as_str()));
        assert_eq!(spec.subdomain.as_deref(), Some("web"));
        let claim = spec
            .volumes
            .unwrap_or_default()
            .into_iter()
            .find(|v| v.name == "data")
            .and_then(|v| v.persistent_volume_claim)
            .map(|c| c.claim_name);
        assert_eq!(claim, Some(format!("data-web-{ordinal}")));
        let refs = p.metadata.owner_references.unwrap_or_default();
        assert_eq!(refs.first().map(|r| r.kind.as_str()), Some("StatefulSet"));
    }
    assert_eq!(
        claim_names(&c).await?,
        ["data-web-0", "data-web-1", "data-web-2"]
    );
    let pvc = Api::<PersistentVolumeClaim>::namespaced(c.client.clone(), NS)
        .get("data-web-0")
        .await?;
    assert_eq!(
        pvc.metadata
            .labels
            .and_then(|l| l.get("app").cloned())
            .as_deref(),
        Some("web")
    );

    // Kubernetes' events, on the set.
    let events: Api<Event> = Api::namespaced(c.client.clone(), NS);
    wait_for(WAIT, || async {
        let list = events.list(&Default::default()).await.ok()?;
        let notes: Vec<String> = list.items.into_iter().filter_map(|e| e.note).collect();
        (notes
            .iter()
            .any(|n| n == "create Pod web-0 in StatefulSet web successful")
            && notes
                .iter()
                .any(|n| n == "create Claim data-web-0 Pod web-0 in StatefulSet web success"))
        .then_some(())
    })
    .await?;
    stop.cancel();
    drop(sim);
    c.stop().await
}

#[tokio::test]
async fn parallel_creates_every_pod_at_once() -> anyhow::Result<()> {
    let c = Cluster::start().await?.without_kubelet();
    let sim = c.env.start_simulation(2).await?;
    let mut set = statefulset("par", 3, json!({"podManagementPolicy": "Parallel"}))?;
    // Pods that never become ready: OrderedReady would stop at par-0.
    if let Some(container) = set
        .spec
        .as_mut()
        .and_then(|s| s.template.spec.as_mut())
        .and_then(|s| s.containers.first_mut())
    {
        container.readiness_probe = Some(serde_json::from_value(json!({
            "exec": {"command": ["true"]},
            "initialDelaySeconds": 3600,
        }))?);
    }
    Api::<StatefulSet>::namespaced(c.client.clone(), NS)
        .create(&PostParams::default(), &set)
        .await?;
    wait_status(&c, "par", |s| {
        s.replicas == 3 && s.ready_replicas.unwrap_or(0) == 0
    })
    .await?;
    assert_eq!(
        names(&c.active_pods("app=par").await?),
        ["par-0", "par-1", "par-2"]
    );
    drop(sim);
    c.stop().await
}

#[tokio::test]
async fn scaling_down_removes_the_highest_ordinal_first_and_keeps_claims() -> anyhow::Result<()> {
    let c = Cluster::start().await?.without_kubelet();
    let sim = c.env.start_simulation(2).await?;
    Api::<StatefulSet>::namespaced(c.client.clone(), NS)
        .create(&PostParams::default(), &statefulset("db", 3, json!({}))?)
        .await?;
    wait_rolled_out(&c, "db", 3).await?;
    let stop = CancellationToken::new();
    let log = record(&c, "db", &stop).await;
    patch_spec(&c, "db", json!({"replicas": 1})).await?;
    wait_rolled_out(&c, "db", 1).await?;
    let left = wait_for(WAIT, || async {
        c.active_pods("app=db").await.ok().filter(|p| p.len() == 1)
    })
    .await?;
    assert_eq!(names(&left), ["db-0"]);
    let log = log.lock().expect("not poisoned").clone();
    assert!(
        position(&log, &Seen::Terminating("db-2".into()))
            < position(&log, &Seen::Terminating("db-1".into())),
        "{log:?}"
    );
    // The default retention policy keeps the claims.
    assert_eq!(
        claim_names(&c).await?,
        ["data-db-0", "data-db-1", "data-db-2"]
    );
    stop.cancel();
    drop(sim);
    c.stop().await
}

#[tokio::test]
async fn a_rolling_update_with_a_partition_updates_only_the_pods_above_it() -> anyhow::Result<()> {
    let c = Cluster::start().await?.without_kubelet();
    let sim = c.env.start_simulation(2).await?;
    let extra =
        json!({"updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 1}}});
    Api::<StatefulSet>::namespaced(c.client.clone(), NS)
        .create(&PostParams::default(), &statefulset("part", 3, extra)?)
        .await?;
    let before = wait_rolled_out(&c, "part", 3).await?;
    let first = before.status.and_then(|s| s.current_revision);
    let stop = CancellationToken::new();
    let log = record(&c, "part", &stop).await;

    set_image(&c, "part", "img:2").await?;
    let set = wait_status(&c, "part", |s| {
        s.updated_replicas == Some(2)
            && s.ready_replicas == Some(3)
            && s.current_replicas == Some(1)
    })
    .await?;
    let status = set.status.unwrap_or_default();
    assert_eq!(status.current_revision, first, "the current revision stays");
    assert_ne!(status.update_revision, status.current_revision);
    let p0 = pod(&c, "part-0").await?;
    assert_eq!(image(&p0).as_deref(), Some("img:1"));
    assert_eq!(label(&p0, "controller-revision-hash"), first.as_deref());
    for name in ["part-1", "part-2"] {
        let p = pod(&c, name).await?;
        assert_eq!(image(&p).as_deref(), Some("img:2"), "{name}");
        assert_eq!(
            label(&p, "controller-revision-hash"),
            status.update_revision.as_deref()
        );
    }
    {
        let log = log.lock().expect("not poisoned").clone();
        assert!(
            position(&log, &Seen::Terminating("part-2".into()))
                < position(&log, &Seen::Terminating("part-1".into())),
            "highest ordinal first: {log:?}"
        );
        assert!(
            !log.contains(&Seen::Terminating("part-0".into())),
            "{log:?}"
        );
    }
    let revisions: Vec<ControllerRevision> =
        Api::<ControllerRevision>::namespaced(c.client.clone(), NS)
            .list(&Default::default())
            .await?
            .items;
    let mut numbers: Vec<(i64, Option<String>)> = revisions
        .into_iter()
        .map(|r| (r.revision, r.metadata.name))
        .collect();
    numbers.sort();
    assert_eq!(
        numbers,
        [(1, first.clone()), (2, status.update_revision.clone())]
    );

    // Partition 0: the last pod follows and the update completes.
    patch_spec(
        &c,
        "part",
        json!({"updateStrategy": {"rollingUpdate": {"partition": 0}}}),
    )
    .await?;
    let done = wait_rolled_out(&c, "part", 3).await?;
    assert_eq!(
        done.status.and_then(|s| s.current_revision),
        status.update_revision
    );
    assert_eq!(image(&pod(&c, "part-0").await?).as_deref(), Some("img:2"));
    stop.cancel();
    drop(sim);
    c.stop().await
}

#[tokio::test]
async fn on_delete_updates_only_the_pods_that_are_deleted() -> anyhow::Result<()> {
    let c = Cluster::start().await?.without_kubelet();
    let sim = c.env.start_simulation(2).await?;
    let extra = json!({"updateStrategy": {"type": "OnDelete"}});
    Api::<StatefulSet>::namespaced(c.client.clone(), NS)
        .create(&PostParams::default(), &statefulset("od", 3, extra)?)
        .await?;
    let before = wait_status(&c, "od", |s| {
        s.ready_replicas == Some(3) && s.updated_replicas == Some(3)
    })
    .await?;
    let first = before.status.and_then(|s| s.current_revision);

    set_image(&c, "od", "img:2").await?;
    let set = wait_status(&c, "od", |s| {
        s.update_revision != s.current_revision && s.updated_replicas.unwrap_or(0) == 0
    })
    .await?;
    let update = set.status.and_then(|s| s.update_revision);
    for name in ["od-0", "od-1", "od-2"] {
        assert_eq!(image(&pod(&c, name).await?).as_deref(), Some("img:1"));
    }

    let old_uid = pod(&c, "od-1").await?.metadata.uid;
    Api::<Pod>::namespaced(c.client.clone(), NS)
        .delete("od-1", &Default::default())
        .await?;
    wait_status(&c, "od", |s| {
        s.updated_replicas == Some(1) && s.ready_replicas == Some(3)
    })
    .await?;
    let p1 = pod(&c, "od-1").await?;
    assert_ne!(p1.metadata.uid, old_uid);
    assert_eq!(image(&p1).as_deref(), Some("img:2"));
    assert_eq!(label(&p1, "controller-revision-hash"), update.as_deref());
    for name in ["od-0", "od-2"] {
        let p = pod(&c, name).await?;
        assert_eq!(image(&p).as_deref(), Some("img:1"), "{name}");
        assert_eq!(label(&p, "controller-revision-hash"), first.as_deref());
    }
    drop(sim);
    c.stop().await
}

#[tokio::test]
async fn a_delete_retention_policy_deletes_the_claim_of_a_scaled_down_pod() -> anyhow::Result<()> {
    let c = Cluster::start().await?.without_kubelet();
    let sim = c.env.start_simulation(2).await?;
    let extra = json!({"persistentVolumeClaimRetentionPolicy": {
        "whenDeleted": "Retain",
        "whenScaled": "Delete",
    }});
    Api::<StatefulSet>::namespaced(c.client.clone(), NS)
        .create(&PostParams::default(), &statefulset("ret", 2, extra)?)
        .await?;
    wait_rolled_out(&c, "ret", 2).await?;
    assert_eq!(claim_names(&c).await?, ["data-ret-0", "data-ret-1"]);

    patch_spec(&c, "ret", json!({"replicas": 1})).await?;
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(c.client.clone(), NS);
    wait_for(WAIT, || async {
        matches!(claims.get_opt("data-ret-1").await, Ok(None)).then_some(())
    })
    .await?;
    assert_eq!(claim_names(&c).await?, ["data-ret-0"]);

    // Scaling up again gives the pod a new claim.
    patch_spec(&c, "ret", json!({"replicas": 2})).await?;
    wait_rolled_out(&c, "ret", 2).await?;
    assert_eq!(claim_names(&c).await?, ["data-ret-0", "data-ret-1"]);
    drop(sim);
    c.stop().await
}

#[tokio::test]
async fn deleted_and_failed_pods_come_back_under_the_same_name() -> anyhow::Result<()> {
    let c = Cluster::start().await?.without_kubelet();
    let sim = c.env.start_simulation(2).await?;
    Api::<StatefulSet>::namespaced(c.client.clone(), NS)
        .create(&PostParams::default(), &statefulset("back", 2, json!({}))?)
        .await?;
    wait_rolled_out(&c, "back", 2).await?;
    let pods: Api<Pod> = Api::namespaced(c.client.clone(), NS);

    let deleted = pod(&c, "back-0").await?.metadata.uid;
    pods.delete("back-0", &Default::default()).await?;
    let failed = pod(&c, "back-1").await?.metadata.uid;
    pods.patch_status(
        "back-1",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": "Failed"}})),
    )
    .await?;
    for (name, old) in [("back-0", deleted), ("back-1", failed)] {
        wait_for(WAIT, || async {
            let p = pods.get_opt(name).await.ok()??;
            (p.metadata.uid != old && is_ready(&p)).then_some(())
        })
        .await?;
    }
    wait_rolled_out(&c, "back", 2).await?;
    drop(sim);
    c.stop().await
}

#[tokio::test]
async fn kubectl_rollout_status_follows_a_statefulset() -> anyhow::Result<()> {
    let Some(program) = kubectl_or_skip() else {
        return Ok(());
    };
    let env = TestEnv::builder().tcp().start().await?;
    let kubectl = Kubectl::for_env(program, &env);
    let c = Cluster::start_on(env, Options::default(), Arc::new(|_: &Pod| Fate::Ready))
        .await?
        .without_kubelet();
    let sim = c.env.start_simulation(2).await?;
    let manifest = serde_json::to_string(&statefulset("kweb", 2, json!({}))?)?;
    let file = kubectl.file("kweb.json", &manifest);
    kubectl.ok(&["apply", "-f", &file]).await;
    let out = kubectl
        .ok(&["rollout", "status", "statefulset/kweb", "--timeout=60s"])
        .await;
    assert!(out.contains("roll out complete"), "{out}");
    kubectl
        .ok(&["set", "image", "statefulset/kweb", "c=img:2"])
        .await;
    let out = kubectl
        .ok(&["rollout", "status", "statefulset/kweb", "--timeout=60s"])
        .await;
    assert!(out.contains("roll out complete"), "{out}");
    assert_eq!(image(&pod(&c, "kweb-0").await?).as_deref(), Some("img:2"));

    // The revisions are what kubectl reads and restores.
    let history = kubectl
        .ok(&["rollout", "history", "statefulset/kweb"])
        .await;
    assert!(history.contains('1') && history.contains('2'), "{history}");
    kubectl.ok(&["rollout", "undo", "statefulset/kweb"]).await;
    let out = kubectl
        .ok(&["rollout", "status", "statefulset/kweb", "--timeout=60s"])
        .await;
    assert!(out.contains("roll out complete"), "{out}");
    wait_for(WAIT, || async {
        let pods = c.active_pods("app=kweb").await.ok()?;
        (pods.len() == 2
            && pods
                .iter()
                .all(|p| image(p).as_deref() == Some("img:1") && is_ready(p)))
        .then_some(())
    })
    .await?;
    // Going back renumbered the first revision instead of making a third.
    let set = wait_rolled_out(&c, "kweb", 2).await?;
    let mut revisions: Vec<(i64, Option<String>)> =
        Api::<ControllerRevision>::namespaced(c.client.clone(), NS)
            .list(&Default::default())
            .await?
            .items
            .into_iter()
            .map(|r| (r.revision, r.metadata.name))
            .collect();
    revisions.sort();
    assert_eq!(revisions.len(), 2, "{revisions:?}");
    assert_eq!(
        revisions[1],
        (3, set.status.and_then(|s| s.current_revision))
    );
    drop(sim);
    c.stop().await
}

#[tokio::test]
async fn max_unavailable_lets_a_rolling_update_replace_several_pods_at_once() -> anyhow::Result<()>
{
    let c = Cluster::start().await?.without_kubelet();
    let sim = c.env.start_simulation(2).await?;
    let extra = json!({"updateStrategy": {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxUnavailable": 2},
    }});
    Api::<StatefulSet>::namespaced(c.client.clone(), NS)
        .create(&PostParams::default(), &statefulset("mu", 3, extra)?)
        .await?;
    wait_rolled_out(&c, "mu", 3).await?;
    let stop = CancellationToken::new();
    let log = record(&c, "mu", &stop).await;
    set_image(&c, "mu", "img:2").await?;
    wait_for(WAIT, || async {
        let pods = c.active_pods("app=mu").await.ok()?;
        (pods.len() == 3
            && pods
                .iter()
                .all(|p| image(p).as_deref() == Some("img:2") && is_ready(p)))
        .then_some(())
    })
    .await?;
    let log = log.lock().expect("not poisoned").clone();
    // mu-2 and mu-1 went together: mu-1 was terminating before mu-2 came back.
    let mu2_back = log
        .iter()
        .rposition(|s| *s == Seen::Created("mu-2".into()))
        .unwrap_or_default();
    assert!(
        position(&log, &Seen::Terminating("mu-1".into())) < mu2_back,
        "{log:?}"
    );
    stop.cancel();
    drop(sim);
    c.stop().await
}

#[tokio::test]
async fn ordinals_start_at_spec_ordinals_start() -> anyhow::Result<()> {
    let c = Cluster::start().await?.without_kubelet();
    let sim = c.env.start_simulation(2).await?;
    Api::<StatefulSet>::namespaced(c.client.clone(), NS)
        .create(
            &PostParams::default(),
            &statefulset("ord", 2, json!({"ordinals": {"start": 5}}))?,
        )
        .await?;
    wait_rolled_out(&c, "ord", 2).await?;
    assert_eq!(names(&c.active_pods("app=ord").await?), ["ord-5", "ord-6"]);
    assert_eq!(
        label(&pod(&c, "ord-5").await?, "apps.kubernetes.io/pod-index"),
        Some("5")
    );
    assert_eq!(claim_names(&c).await?, ["data-ord-5", "data-ord-6"]);
    drop(sim);
    c.stop().await
}

#[tokio::test]
async fn min_ready_seconds_holds_the_next_pod_until_the_previous_is_available() -> anyhow::Result<()>
{
    let c = Cluster::start().await?.without_kubelet();
    let sim = c.env.start_simulation(2).await?;
    Api::<StatefulSet>::namespaced(c.client.clone(), NS)
        .create(
            &PostParams::default(),
            &statefulset("slow", 2, json!({"minReadySeconds": 1}))?,
        )
        .await?;
    // availableReplicas reaches 2 with no pod event after the last readiness: the
    // controller requeues itself for the moment a pod becomes available.
    wait_rolled_out(&c, "slow", 2).await?;
    let ready_at = pod(&c, "slow-0")
        .await?
        .status
        .and_then(|s| s.conditions)
        .unwrap_or_default()
        .into_iter()
        .find(|c| c.type_ == "Ready")
        .and_then(|c| c.last_transition_time)
        .map(|t| t.0.as_second());
    let created_at = pod(&c, "slow-1")
        .await?
        .metadata
        .creation_timestamp
        .map(|t| t.0.as_second());
    let (Some(ready_at), Some(created_at)) = (ready_at, created_at) else {
        anyhow::bail!("slow-0 has no Ready time or slow-1 no creation time");
    };
    assert!(
        created_at > ready_at,
        "slow-1 was created at {created_at}, before slow-0 (ready at {ready_at}) was available"
    );
    drop(sim);
    c.stop().await
}
