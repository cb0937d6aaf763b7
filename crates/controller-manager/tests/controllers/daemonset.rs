//! The DaemonSet controller against kore-apiserver with simulated nodes (scheduler and
//! kubelets): one pod per node, bound through its node affinity, new nodes get one, tainted
//! nodes without a toleration get none.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use crate::common::{Cluster, NS, names};
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Node, Pod};
use kore_controller_manager::pods::is_ready;
use kore_runtime::informer::Change;
use kore_runtime::{InformerConfig, SharedInformer};
use kore_testenv::wait_for;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use tokio_util::sync::CancellationToken;

fn daemonset(name: &str) -> anyhow::Result<DaemonSet> {
    Ok(serde_json::from_value(json!({
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "agent", "image": "agent:1"}]},
            },
        },
    }))?)
}

/// Waits until `name` reports `n` pods scheduled, ready, available and updated, and `n`
/// running pods exist, each bound to a different node; returns their nodes.
async fn wait_settled(c: &Cluster, name: &str, n: i32) -> anyhow::Result<BTreeSet<String>> {
    c.wait_object::<DaemonSet, _>(name, |ds| {
        let s = ds.status.as_ref()?;
        (s.desired_number_scheduled == n
            && s.current_number_scheduled == n
            && s.number_ready == n
            && s.number_available.unwrap_or(0) == n
            && s.updated_number_scheduled.unwrap_or(0) == n
            && s.number_misscheduled == 0
            && s.observed_generation == ds.metadata.generation)
            .then_some(())
    })
    .await?;
    let selector = format!("app={name}");
    let pods = wait_for(crate::common::WAIT, || async {
        c.active_pods(&selector).await.ok().filter(|p| {
            p.len() == usize::try_from(n).unwrap_or(0)
                && p.iter().all(|p| {
                    p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some()
                        && p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
                })
        })
    })
    .await?;
    let nodes: BTreeSet<String> = pods
        .iter()
        .filter_map(|p| p.spec.as_ref().and_then(|s| s.node_name.clone()))
        .collect();
    assert_eq!(
        nodes.len(),
        pods.len(),
        "one pod per node: {:?}",
        names(&pods)
    );
    for p in &pods {
        let labels = p.metadata.labels.clone().unwrap_or_default();
        assert!(
            labels.contains_key("controller-revision-hash"),
            "{labels:?}"
        );
        let refs = p.metadata.owner_references.clone().unwrap_or_default();
        assert_eq!(refs.first().map(|r| r.kind.as_str()), Some("DaemonSet"));
    }
    Ok(nodes)
}

#[tokio::test]
async fn a_daemonset_runs_one_pod_per_node_and_on_each_new_node() -> anyhow::Result<()> {
    let c = Cluster::start().await?.without_kubelet();
    let mut sim = c.env.start_simulation(3).await?;
    let dss: Api<DaemonSet> = Api::namespaced(c.client.clone(), NS);
    dss.create(&PostParams::default(), &daemonset("agent")?)
        .await?;
    let nodes = wait_settled(&c, "agent", 3).await?;
    let all: BTreeSet<String> = sim.nodes().names().into_iter().collect();
    assert_eq!(nodes, all);

    // Each pod is pinned to its node by `matchFields metadata.name`, which the scheduler
    // honoured.
    let pods: Api<Pod> = Api::namespaced(c.client.clone(), NS);
    for p in pods.list(&Default::default()).await?.items {
        let spec = p.spec.unwrap_or_default();
        let terms = spec
            .affinity
            .and_then(|a| a.node_affinity)
            .and_then(|n| n.required_during_scheduling_ignored_during_execution)
            .map(|s| s.node_selector_terms)
            .unwrap_or_default();
        let fields = terms
            .first()
            .and_then(|t| t.match_fields.clone())
            .unwrap_or_default();
        assert_eq!(fields.len(), 1);
        assert_eq!(fields[0].key, "metadata.name");
        assert_eq!(fields[0].values, spec.node_name.map(|n| vec![n]));
        let tolerations = spec.tolerations.unwrap_or_default();
        assert!(
            tolerations
                .iter()
                .any(|t| t.key.as_deref() == Some("node.kubernetes.io/unschedulable")),
            "default tolerations: {tolerations:?}"
        );
    }

    let added = sim.nodes().add_node().await?;
    let nodes = wait_settled(&c, "agent", 4).await?;
    assert!(nodes.contains(&added), "{nodes:?} lacks {added}");
    drop(sim);
    c.stop().await
}

#[tokio::test]
async fn a_tainted_node_without_a_toleration_gets_no_pod() -> anyhow::Result<()> {
    let c = Cluster::start().await?.without_kubelet();
    let mut sim = c.env.start_simulation(3).await?;
    let tainted = sim.nodes().names()[0].clone();
    let nodes: Api<Node> = Api::all(c.client.clone());
    nodes
        .patch(
            &tainted,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"taints": [
                {"key": "dedicated", "value": "db", "effect": "NoSchedule"},
            ]}})),
        )
        .await?;
    let dss: Api<DaemonSet> = Api::namespaced(c.client.clone(), NS);
    dss.create(&PostParams::default(), &daemonset("logs")?)
        .await?;
    let placed = wait_settled(&c, "logs", 2).await?;
    assert!(!placed.contains(&tainted), "{placed:?} includes {tainted}");
    drop(sim);
    c.stop().await
}

/// The `controller-revision-hash` labels of the running pods of `app`.
async fn hashes(c: &Cluster, app: &str) -> anyhow::Result<Vec<String>> {
    Ok(c.active_pods(&format!("app={app}"))
        .await?
        .iter()
        .filter_map(|p| {
            p.metadata
                .labels
                .as_ref()?
                .get("controller-revision-hash")
                .cloned()
        })
        .collect())
}

async fn set_image(dss: &Api<DaemonSet>, name: &str, image: &str) -> anyhow::Result<()> {
    dss.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"template": {"spec": {"containers": [
            {"name": "agent", "image": image},
        ]}}}})),
    )
    .await?;
    Ok(())
}

/// Records the fewest ready pods of `app` (not being deleted) after any change, from the
/// moment the watch has seen `armed_at` of them ready.
fn watch_min_ready(
    c: &Cluster,
    app: &str,
    armed_at: usize,
    stop: &CancellationToken,
) -> Arc<Mutex<usize>> {
    watch_counts(c, app, armed_at, stop).0
}

/// Records the fewest ready pods of `app` (not being deleted) and the most pods not being
/// deleted, after any change from the moment the watch has seen `armed_at` of them ready.
fn watch_counts(
    c: &Cluster,
    app: &str,
    armed_at: usize,
    stop: &CancellationToken,
) -> (Arc<Mutex<usize>>, Arc<Mutex<usize>>) {
    let informer: SharedInformer<Pod> = SharedInformer::new(
        c.client.clone(),
        InformerConfig::default()
            .namespace(NS)
            .label_selector(format!("app={app}")),
    );
    informer.start(stop.clone());
    let mut changes = informer.subscribe();
    let store = informer.store();
    let min = Arc::new(Mutex::new(usize::MAX));
    let max = Arc::new(Mutex::new(0));
    let recorded = min.clone();
    let recorded_max = max.clone();
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
            if synced {
                let ready = state
                    .values()
                    .filter(|p| p.metadata.deletion_timestamp.is_none() && is_ready(p))
                    .count();
                armed = armed || ready >= armed_at;
                if !armed {
                    continue;
                }
                let mut m = recorded.lock().expect("not poisoned");
                *m = (*m).min(ready);
                let active = state
                    .values()
                    .filter(|p| p.metadata.deletion_timestamp.is_none())
                    .count();
                let mut x = recorded_max.lock().expect("not poisoned");
                *x = (*x).max(active);
            }
        }
    });
    (min, max)
}

#[tokio::test]
async fn a_surging_rolling_update_starts_the_new_pod_before_deleting_the_old() -> anyhow::Result<()>
{
    let c = Cluster::start().await?.without_kubelet();
    let sim = c.env.start_simulation(2).await?;
    let dss: Api<DaemonSet> = Api::namespaced(c.client.clone(), NS);
    let mut ds = daemonset("surge")?;
    if let Some(spec) = ds.spec.as_mut() {
        spec.update_strategy = Some(serde_json::from_value(json!({
            "type": "RollingUpdate",
            "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0},
        }))?);
    }
    dss.create(&PostParams::default(), &ds).await?;
    wait_settled(&c, "surge", 2).await?;
    let first = hashes(&c, "surge").await?;
    let stop = CancellationToken::new();
    let (min_ready, max_active) = watch_counts(&c, "surge", 2, &stop);
    crate::common::wait_until(|| *min_ready.lock().expect("not poisoned") == 2).await?;

    set_image(&dss, "surge", "agent:2").await?;
    wait_for(crate::common::WAIT, || async {
        hashes(&c, "surge")
            .await
            .ok()
            .filter(|h| h.len() == 2 && h.iter().all(|x| !first.contains(x)))
    })
    .await?;
    wait_settled(&c, "surge", 2).await?;
    stop.cancel();
    // maxUnavailable 0: both nodes always have a ready pod; maxSurge 1: one node at a time
    // runs an old and a new pod.
    assert_eq!(
        *min_ready.lock().expect("not poisoned"),
        2,
        "fewest ready pods during the surging update"
    );
    assert_eq!(
        *max_active.lock().expect("not poisoned"),
        3,
        "most pods at once during the surging update"
    );
    drop(sim);
    c.stop().await
}

#[tokio::test]
async fn a_rolling_update_replaces_every_pod_and_records_revisions() -> anyhow::Result<()> {
    let c = Cluster::start().await?.without_kubelet();
    let sim = c.env.start_simulation(3).await?;
    let dss: Api<DaemonSet> = Api::namespaced(c.client.clone(), NS);
    dss.create(&PostParams::default(), &daemonset("roll")?)
        .await?;
    wait_settled(&c, "roll", 3).await?;
    let first = hashes(&c, "roll").await?;
    let stop = CancellationToken::new();
    let min_ready = watch_min_ready(&c, "roll", 3, &stop);
    crate::common::wait_until(|| *min_ready.lock().expect("not poisoned") == 3).await?;

    set_image(&dss, "roll", "agent:2").await?;
    wait_settled(&c, "roll", 3).await?;
    let second = wait_for(crate::common::WAIT, || async {
        hashes(&c, "roll")
            .await
            .ok()
            .filter(|h| h.len() == 3 && h.iter().all(|x| !first.contains(x)))
    })
    .await?;
    let pods: Api<Pod> = Api::namespaced(c.client.clone(), NS);
    for p in c.active_pods("app=roll").await? {
        let spec = p.spec.unwrap_or_default();
        assert_eq!(spec.containers[0].image.as_deref(), Some("agent:2"));
    }
    drop(pods);
    // maxUnavailable 1 (the default): never fewer than 2 of the 3 ready during the update.
    stop.cancel();
    let min = *min_ready.lock().expect("not poisoned");
    assert_eq!(min, 2, "fewest ready pods during the rolling update");

    // One ControllerRevision per template, the current one highest.
    let revisions: Api<k8s_openapi::api::apps::v1::ControllerRevision> =
        Api::namespaced(c.client.clone(), NS);
    let list = wait_for(crate::common::WAIT, || async {
        revisions
            .list(&Default::default())
            .await
            .ok()
            .map(|l| l.items)
            .filter(|l| l.len() == 2)
    })
    .await?;
    let newest = list
        .iter()
        .max_by_key(|r| r.revision)
        .and_then(|r| r.metadata.name.clone());
    assert_eq!(newest, Some(format!("roll-{}", second[0])));
    assert_eq!(
        list.iter().map(|r| r.revision).collect::<BTreeSet<_>>(),
        BTreeSet::from([1, 2])
    );
    drop(sim);
    c.stop().await
}

#[tokio::test]
async fn on_delete_replaces_only_the_pods_that_are_deleted() -> anyhow::Result<()> {
    let c = Cluster::start().await?.without_kubelet();
    let sim = c.env.start_simulation(3).await?;
    let dss: Api<DaemonSet> = Api::namespaced(c.client.clone(), NS);
    let mut ds = daemonset("manual")?;
    if let Some(spec) = ds.spec.as_mut() {
        spec.update_strategy = Some(serde_json::from_value(json!({"type": "OnDelete"}))?);
    }
    dss.create(&PostParams::default(), &ds).await?;
    wait_settled(&c, "manual", 3).await?;
    let first = hashes(&c, "manual").await?;

    set_image(&dss, "manual", "agent:2").await?;
    c.wait_object::<DaemonSet, _>("manual", |ds| {
        let s = ds.status.as_ref()?;
        (s.observed_generation == ds.metadata.generation
            && s.updated_number_scheduled.unwrap_or(0) == 0
            && s.current_number_scheduled == 3)
            .then_some(())
    })
    .await?;
    assert_eq!(hashes(&c, "manual").await?, first, "no pod replaced");

    let pods: Api<Pod> = Api::namespaced(c.client.clone(), NS);
    let victim = names(&c.active_pods("app=manual").await?)[0].clone();
    pods.delete(&victim, &Default::default()).await?;
    c.wait_object::<DaemonSet, _>("manual", |ds| {
        let s = ds.status.as_ref()?;
        (s.updated_number_scheduled.unwrap_or(0) == 1 && s.number_ready == 3).then_some(())
    })
    .await?;
    let now = hashes(&c, "manual").await?;
    assert_eq!(
        now.iter().filter(|h| !first.contains(h)).count(),
        1,
        "{now:?}"
    );
    drop(sim);
    c.stop().await
}

#[tokio::test]
async fn a_noexecute_taint_removes_the_pod_and_a_noschedule_one_keeps_it() -> anyhow::Result<()> {
    let c = Cluster::start().await?.without_kubelet();
    let mut sim = c.env.start_simulation(3).await?;
    let names_of_nodes = sim.nodes().names();
    let dss: Api<DaemonSet> = Api::namespaced(c.client.clone(), NS);
    dss.create(&PostParams::default(), &daemonset("evict")?)
        .await?;
    wait_settled(&c, "evict", 3).await?;

    let nodes: Api<Node> = Api::all(c.client.clone());
    let taint = |node: &str, effect: &str| {
        let nodes = nodes.clone();
        let node = node.to_owned();
        let patch = json!({"spec": {"taints": [{"key": "maintenance", "effect": effect}]}});
        async move {
            nodes
                .patch(&node, &PatchParams::default(), &Patch::Merge(patch))
                .await
        }
    };
    // NoSchedule on a node that runs a pod: it stays, but the node is no longer desired.
    taint(&names_of_nodes[1], "NoSchedule").await?;
    c.wait_object::<DaemonSet, _>("evict", |ds| {
        let s = ds.status.as_ref()?;
        (s.desired_number_scheduled == 2 && s.number_misscheduled == 1).then_some(())
    })
    .await?;
    assert_eq!(c.active_pods("app=evict").await?.len(), 3);

    // NoExecute: the pod goes.
    taint(&names_of_nodes[0], "NoExecute").await?;
    let left = wait_for(crate::common::WAIT, || async {
        c.active_pods("app=evict")
            .await
            .ok()
            .filter(|p| p.len() == 2)
    })
    .await?;
    assert!(
        left.iter()
            .all(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref())
                != Some(names_of_nodes[0].as_str())),
        "{:?}",
        names(&left)
    );
    drop(sim);
    c.stop().await
}
