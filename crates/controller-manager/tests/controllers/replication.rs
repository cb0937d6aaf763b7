//! The ReplicationController controller against kore-apiserver: the ReplicaSet logic over a
//! map selector, with ReplicationController owner references and status.

use crate::common::{Cluster, NS, names};
use k8s_openapi::api::core::v1::{Pod, ReplicationController};
use kore_testenv::wait_for;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;

fn rc(name: &str, app: &str, replicas: i32) -> anyhow::Result<ReplicationController> {
    Ok(serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "ReplicationController",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "replicas": replicas,
            "selector": {"app": app},
            "template": {
                "metadata": {"labels": {"app": app}},
                "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]},
            },
        },
    }))?)
}

/// Waits until `name` reports `n` replicas, all ready and available, for its generation,
/// and `n` active pods exist.
async fn wait_settled(c: &Cluster, name: &str, app: &str, n: i32) -> anyhow::Result<Vec<Pod>> {
    c.wait_object::<ReplicationController, _>(name, |rc| {
        let s = rc.status.as_ref()?;
        (s.replicas == n
            && s.ready_replicas.unwrap_or(0) == n
            && s.available_replicas.unwrap_or(0) == n
            && s.fully_labeled_replicas.unwrap_or(0) == n
            && s.observed_generation == rc.metadata.generation)
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
async fn a_replication_controller_of_three_keeps_three_pods() -> anyhow::Result<()> {
    let c = Cluster::start().await?;
    let rcs: Api<ReplicationController> = Api::namespaced(c.client.clone(), NS);
    let created = rcs
        .create(&PostParams::default(), &rc("legacy", "legacy", 3)?)
        .await?;
    let uid = created.metadata.uid.clone().unwrap_or_default();

    let pods = wait_settled(&c, "legacy", "legacy", 3).await?;
    for p in &pods {
        let name = p.metadata.name.as_deref().unwrap_or_default();
        assert!(name.starts_with("legacy-"), "{name}");
        let refs = p.metadata.owner_references.clone().unwrap_or_default();
        assert_eq!(refs.len(), 1);
        assert_eq!(
            (refs[0].kind.as_str(), refs[0].api_version.as_str()),
            ("ReplicationController", "v1")
        );
        assert_eq!(refs[0].uid, uid);
        assert_eq!(refs[0].controller, Some(true));
    }

    // A deleted pod is replaced, and no fourth pod appears.
    let api: Api<Pod> = Api::namespaced(c.client.clone(), NS);
    let gone = names(&pods)[0].clone();
    api.delete(&gone, &DeleteParams::default()).await?;
    wait_for(crate::common::WAIT, || async {
        c.active_pods("app=legacy")
            .await
            .ok()
            .filter(|p| p.len() == 3 && names(p).iter().all(|n| *n != gone))
    })
    .await?;
    wait_settled(&c, "legacy", "legacy", 3).await?;
    let all = api.list(&Default::default()).await?.items;
    assert_eq!(
        all.len(),
        3,
        "no pod beyond the replicas: {:?}",
        names(&all)
    );

    // Scaling down to 1 deletes two.
    rcs.patch(
        "legacy",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 1}})),
    )
    .await?;
    wait_settled(&c, "legacy", "legacy", 1).await?;
    c.stop().await
}

#[tokio::test]
async fn a_replication_controller_adopts_a_matching_orphan() -> anyhow::Result<()> {
    let c = Cluster::start().await?;
    let api: Api<Pod> = Api::namespaced(c.client.clone(), NS);
    let orphan: Pod = serde_json::from_value(json!({
        "metadata": {"name": "stray", "labels": {"app": "adopt"}},
        "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]},
    }))?;
    api.create(&PostParams::default(), &orphan).await?;
    let rcs: Api<ReplicationController> = Api::namespaced(c.client.clone(), NS);
    let created = rcs
        .create(&PostParams::default(), &rc("adopter", "adopt", 2)?)
        .await?;
    let pods = wait_settled(&c, "adopter", "adopt", 2).await?;
    assert!(
        names(&pods).contains(&"stray".to_owned()),
        "{:?}",
        names(&pods)
    );
    let stray = api.get("stray").await?;
    let refs = stray.metadata.owner_references.unwrap_or_default();
    assert_eq!(refs.len(), 1);
    assert_eq!(refs[0].uid, created.metadata.uid.unwrap_or_default());
    c.stop().await
}
