//! The ReplicaSet controller against kore-apiserver: replicas kept, deletion order, adoption
//! and release, status.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::common::{Cluster, Fate, NS, names};
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
use kore_controller_manager::Options;
use kore_testenv::wait_for;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;

fn replicaset(name: &str, app: &str, replicas: i32) -> anyhow::Result<ReplicaSet> {
    Ok(serde_json::from_value(json!({
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": app}},
            "template": {
                "metadata": {"labels": {"app": app}},
                "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]},
            },
        },
    }))?)
}

/// Waits until `name` has `n` active pods and a status that says so.
async fn wait_settled(
    c: &Cluster,
    name: &str,
    app: &str,
    n: i32,
    ready: i32,
) -> anyhow::Result<Vec<Pod>> {
    c.wait_object::<ReplicaSet, _>(name, |rs| {
        let s = rs.status.as_ref()?;
        (s.replicas == n
            && s.ready_replicas.unwrap_or(0) == ready
            && s.available_replicas.unwrap_or(0) == ready
            && s.fully_labeled_replicas.unwrap_or(0) == n
            && s.observed_generation == rs.metadata.generation)
            .then_some(())
    })
    .await?;
    let selector = format!("app={app}");
    wait_for(crate::common::WAIT, || async {
        c.active_pods(&selector)
            .await
            .ok()
            .filter(|p| p.len() == usize::try_from(n).unwrap_or(0))
    })
    .await
}

#[tokio::test]
async fn a_replicaset_of_five_keeps_five_pods_when_pods_are_deleted() -> anyhow::Result<()> {
    let c = Cluster::start().await?;
    let rss: Api<ReplicaSet> = Api::namespaced(c.client.clone(), NS);
    let rs = rss
        .create(&PostParams::default(), &replicaset("web", "web", 5)?)
        .await?;
    let uid = rs.metadata.uid.clone().unwrap_or_default();

    let pods = wait_settled(&c, "web", "web", 5, 5).await?;
    for p in &pods {
        let name = p.metadata.name.as_deref().unwrap_or_default();
        assert!(
            name.starts_with("web-") && name.len() == "web-".len() + 5,
            "{name}"
        );
        let refs = p.metadata.owner_references.clone().unwrap_or_default();
        assert_eq!(refs.len(), 1);
        assert_eq!(refs[0].uid, uid);
        assert_eq!(refs[0].kind, "ReplicaSet");
        assert_eq!(refs[0].controller, Some(true));
        assert_eq!(refs[0].block_owner_deletion, Some(true));
    }

    // Two pods are deleted: two new ones replace them, and no more.
    let api: Api<Pod> = Api::namespaced(c.client.clone(), NS);
    let gone = names(&pods)[..2].to_vec();
    for name in &gone {
        api.delete(name, &DeleteParams::default()).await?;
    }
    let again = wait_for(crate::common::WAIT, || async {
        c.active_pods("app=web")
            .await
            .ok()
            .filter(|p| p.len() == 5 && names(p).iter().all(|n| !gone.contains(n)))
    })
    .await?;
    wait_settled(&c, "web", "web", 5, 5).await?;
    let all = api.list(&Default::default()).await?.items;
    assert_eq!(
        all.len(),
        5,
        "no pod beyond the replicas: {:?}",
        names(&all)
    );
    assert_eq!(names(&again).len(), 5);
    c.stop().await
}

#[tokio::test]
async fn scaling_down_deletes_the_pods_that_are_not_ready_first() -> anyhow::Result<()> {
    // The first three pods become Ready, the other two only Running.
    let seen = Arc::new(AtomicUsize::new(0));
    let fate = {
        let seen = seen.clone();
        Arc::new(move |_: &Pod| {
            if seen.fetch_add(1, Ordering::SeqCst) < 3 {
                Fate::Ready
            } else {
                Fate::NotReady
            }
        })
    };
    let c = Cluster::start_with(Options::default(), fate).await?;
    let rss: Api<ReplicaSet> = Api::namespaced(c.client.clone(), NS);
    rss.create(&PostParams::default(), &replicaset("mixed", "mixed", 5)?)
        .await?;
    let pods = wait_settled(&c, "mixed", "mixed", 5, 3).await?;
    let ready: Vec<String> = names(
        &pods
            .iter()
            .filter(|p| {
                p.status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
            })
            .cloned()
            .collect::<Vec<_>>(),
    );
    assert_eq!(ready.len(), 3);

    rss.patch(
        "mixed",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 3}})),
    )
    .await?;
    let left = wait_settled(&c, "mixed", "mixed", 3, 3).await?;
    assert_eq!(
        names(&left),
        ready,
        "the two pods that were not ready went first"
    );
    c.stop().await
}

#[tokio::test]
async fn orphans_that_match_are_adopted_and_pods_that_stop_matching_are_released()
-> anyhow::Result<()> {
    let c = Cluster::start().await?;
    let api: Api<Pod> = Api::namespaced(c.client.clone(), NS);
    let orphan: Pod = serde_json::from_value(json!({
        "metadata": {"name": "orphan", "labels": {"app": "adopt"}},
        "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]},
    }))?;
    api.create(&PostParams::default(), &orphan).await?;

    let rss: Api<ReplicaSet> = Api::namespaced(c.client.clone(), NS);
    let rs = rss
        .create(&PostParams::default(), &replicaset("adopter", "adopt", 2)?)
        .await?;
    let uid = rs.metadata.uid.clone().unwrap_or_default();
    let pods = wait_settled(&c, "adopter", "adopt", 2, 2).await?;
    assert!(
        names(&pods).contains(&"orphan".to_owned()),
        "the orphan counts toward the replicas"
    );
    let adopted = api.get("orphan").await?;
    let refs = adopted.metadata.owner_references.unwrap_or_default();
    assert_eq!(refs.len(), 1);
    assert_eq!(
        (refs[0].uid.as_str(), refs[0].controller),
        (uid.as_str(), Some(true))
    );

    // The orphan's labels change: it is released, and a new pod takes its place.
    api.patch(
        "orphan",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"app": "other"}}})),
    )
    .await?;
    wait_for(crate::common::WAIT, || async {
        let p = api.get("orphan").await.ok()?;
        p.metadata
            .owner_references
            .unwrap_or_default()
            .is_empty()
            .then_some(())
    })
    .await?;
    let pods = wait_settled(&c, "adopter", "adopt", 2, 2).await?;
    assert!(!names(&pods).contains(&"orphan".to_owned()));
    c.stop().await
}

#[tokio::test]
async fn pods_count_as_available_once_ready_for_min_ready_seconds() -> anyhow::Result<()> {
    let c = Cluster::start().await?;
    let rss: Api<ReplicaSet> = Api::namespaced(c.client.clone(), NS);
    let mut rs = replicaset("patient", "patient", 2)?;
    if let Some(spec) = rs.spec.as_mut() {
        spec.min_ready_seconds = Some(1);
    }
    rss.create(&PostParams::default(), &rs).await?;
    // The pods are ready at once and available a second later. No pod event comes then:
    // the controller must requeue itself for that moment for the status to say so.
    wait_settled(&c, "patient", "patient", 2, 2).await?;
    c.stop().await
}
