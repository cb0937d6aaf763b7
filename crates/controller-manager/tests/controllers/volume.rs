//! The PersistentVolume binder against kore-apiserver: claims of the default StorageClass get
//! a simulated volume and become Bound; reclaim policies Delete and Retain; pre-created
//! volumes matched by class, size and access modes; `volumeName` honoured;
//! WaitForFirstConsumer waits for a pod on a node.

use std::sync::Arc;

use crate::common::{Cluster, Fate, NS, wait_for_value};
use k8s_openapi::api::core::v1::{Event, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use kore_controller_manager::Options;
use kore_controller_manager::volume::{
    self, ANN_BIND_COMPLETED, ANN_BOUND_BY_CONTROLLER, ANN_DYNAMICALLY_PROVISIONED,
};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde_json::json;

async fn binder() -> anyhow::Result<Cluster> {
    let options = Options::default().controllers([volume::NAME]);
    Cluster::start_with(options, Arc::new(|_: &Pod| Fate::Ready)).await
}

fn claim(
    name: &str,
    size: &str,
    extra: serde_json::Value,
) -> anyhow::Result<PersistentVolumeClaim> {
    let mut v = json!({
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": size}}},
    });
    if let (Some(spec), Some(more)) = (v["spec"].as_object_mut(), extra.as_object()) {
        spec.extend(more.clone());
    }
    Ok(serde_json::from_value(v)?)
}

fn volume(name: &str, size: &str, modes: &[&str], class: &str) -> anyhow::Result<PersistentVolume> {
    Ok(serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "PersistentVolume",
        "metadata": {"name": name},
        "spec": {
            "capacity": {"storage": size}, "accessModes": modes,
            "storageClassName": class, "hostPath": {"path": format!("/data/{name}")},
        },
    }))?)
}

/// Waits until the claim is Bound; returns it.
async fn bound(c: &Cluster, name: &str) -> anyhow::Result<PersistentVolumeClaim> {
    c.wait_object::<PersistentVolumeClaim, _>(name, |pvc| {
        (pvc.status.as_ref()?.phase.as_deref() == Some("Bound")).then(|| pvc.clone())
    })
    .await
}

/// Waits until the volume reaches `phase`; returns it.
async fn volume_in(c: &Cluster, name: &str, phase: &str) -> anyhow::Result<PersistentVolume> {
    let api: Api<PersistentVolume> = Api::all(c.client.clone());
    wait_for_value(|| {
        let api = api.clone();
        async move {
            let v = api.get_opt(name).await.ok().flatten()?;
            (v.status.as_ref()?.phase.as_deref() == Some(phase)).then_some(v)
        }
    })
    .await
}

fn annotation<'a>(
    meta: &'a k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    key: &str,
) -> Option<&'a str> {
    meta.annotations.as_ref()?.get(key).map(String::as_str)
}

#[tokio::test]
async fn a_claim_of_the_default_class_is_provisioned_bound_and_deleted_with_its_volume()
-> anyhow::Result<()> {
    let c = binder().await?;
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(c.client.clone(), NS);
    // No class named: the server's admission gives it the default class, `standard`.
    let created = claims
        .create(&PostParams::default(), &claim("data", "3Gi", json!({}))?)
        .await?;
    let uid = created.metadata.uid.clone().unwrap_or_default();
    let pvc = bound(&c, "data").await?;
    let pv_name = format!("pvc-{uid}");
    assert_eq!(
        pvc.spec.as_ref().and_then(|s| s.volume_name.as_deref()),
        Some(pv_name.as_str())
    );
    assert_eq!(annotation(&pvc.metadata, ANN_BIND_COMPLETED), Some("yes"));
    assert_eq!(
        annotation(&pvc.metadata, ANN_BOUND_BY_CONTROLLER),
        Some("yes")
    );
    assert_eq!(
        annotation(&pvc.metadata, volume::ANN_STORAGE_PROVISIONER),
        Some("kore.dev/simulated")
    );
    let status = pvc.status.clone().unwrap_or_default();
    assert_eq!(
        status
            .capacity
            .as_ref()
            .and_then(|c| c.get("storage"))
            .map(|q| q.0.as_str()),
        Some("3Gi")
    );
    assert_eq!(status.access_modes, Some(vec!["ReadWriteOnce".to_string()]));

    let pv = volume_in(&c, &pv_name, "Bound").await?;
    assert_eq!(
        annotation(&pv.metadata, ANN_DYNAMICALLY_PROVISIONED),
        Some("kore.dev/simulated")
    );
    assert_eq!(
        annotation(&pv.metadata, ANN_BOUND_BY_CONTROLLER),
        Some("yes")
    );
    let spec = pv.spec.clone().unwrap_or_default();
    assert_eq!(spec.storage_class_name.as_deref(), Some("standard"));
    assert_eq!(
        spec.persistent_volume_reclaim_policy.as_deref(),
        Some("Delete")
    );
    assert_eq!(
        spec.claim_ref.as_ref().and_then(|r| r.uid.as_deref()),
        Some(uid.as_str())
    );
    assert!(spec.host_path.is_some());

    let events: Api<Event> = Api::namespaced(c.client.clone(), NS);
    let reasons: Vec<String> = wait_for_value(|| {
        let events = events.clone();
        async move {
            let list = events.list(&ListParams::default()).await.ok()?;
            let reasons: Vec<String> = list.items.iter().filter_map(|e| e.reason.clone()).collect();
            reasons
                .iter()
                .any(|r| r == volume::REASON_PROVISIONING_SUCCEEDED)
                .then_some(reasons)
        }
    })
    .await?;
    assert!(
        reasons
            .iter()
            .any(|r| r == volume::REASON_PROVISIONING_SUCCEEDED)
    );

    // Reclaim policy Delete: the volume goes with its claim.
    claims.delete("data", &DeleteParams::default()).await?;
    let pvs: Api<PersistentVolume> = Api::all(c.client.clone());
    wait_for_value(|| {
        let pvs = pvs.clone();
        let name = pv_name.clone();
        async move { pvs.get_opt(&name).await.ok()?.is_none().then_some(()) }
    })
    .await?;
    c.stop().await
}

#[tokio::test]
async fn a_retained_volume_is_released_when_its_claim_goes() -> anyhow::Result<()> {
    let c = binder().await?;
    let classes: Api<StorageClass> = Api::all(c.client.clone());
    classes
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                "metadata": {"name": "keep"},
                "provisioner": "kore.dev/simulated",
                "reclaimPolicy": "Retain",
            }))?,
        )
        .await?;
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(c.client.clone(), NS);
    claims
        .create(
            &PostParams::default(),
            &claim("kept", "1Gi", json!({"storageClassName": "keep"}))?,
        )
        .await?;
    let pvc = bound(&c, "kept").await?;
    let pv_name = pvc.spec.and_then(|s| s.volume_name).unwrap_or_default();
    let pv = volume_in(&c, &pv_name, "Bound").await?;
    assert_eq!(
        pv.spec
            .and_then(|s| s.persistent_volume_reclaim_policy)
            .as_deref(),
        Some("Retain")
    );
    claims.delete("kept", &DeleteParams::default()).await?;
    let released = volume_in(&c, &pv_name, "Released").await?;
    assert!(released.metadata.deletion_timestamp.is_none());
    c.stop().await
}

#[tokio::test]
async fn pre_created_volumes_are_matched_by_class_size_and_access_modes() -> anyhow::Result<()> {
    let c = binder().await?;
    let pvs: Api<PersistentVolume> = Api::all(c.client.clone());
    let pp = PostParams::default();
    pvs.create(&pp, &volume("huge", "100Gi", &["ReadWriteOnce"], "manual")?)
        .await?;
    pvs.create(
        &pp,
        &volume("fits", "5Gi", &["ReadWriteOnce", "ReadOnlyMany"], "manual")?,
    )
    .await?;
    pvs.create(&pp, &volume("small", "1Gi", &["ReadWriteOnce"], "manual")?)
        .await?;
    pvs.create(
        &pp,
        &volume("read-only", "4Gi", &["ReadOnlyMany"], "manual")?,
    )
    .await?;
    pvs.create(
        &pp,
        &volume("other-class", "4Gi", &["ReadWriteOnce"], "slow")?,
    )
    .await?;
    pvs.create(
        &pp,
        &volume("wanted", "50Gi", &["ReadWriteOnce"], "manual")?,
    )
    .await?;
    for name in [
        "huge",
        "fits",
        "small",
        "read-only",
        "other-class",
        "wanted",
    ] {
        volume_in(&c, name, "Available").await?;
    }

    let claims: Api<PersistentVolumeClaim> = Api::namespaced(c.client.clone(), NS);
    claims
        .create(
            &pp,
            &claim("db", "2Gi", json!({"storageClassName": "manual"}))?,
        )
        .await?;
    // The smallest Available volume of the class with room and ReadWriteOnce.
    let pvc = bound(&c, "db").await?;
    assert_eq!(
        pvc.spec.as_ref().and_then(|s| s.volume_name.as_deref()),
        Some("fits")
    );
    assert_eq!(
        pvc.status
            .and_then(|s| s.capacity)
            .and_then(|c| c.get("storage").cloned())
            .map(|q| q.0),
        Some("5Gi".to_string())
    );
    let pv = volume_in(&c, "fits", "Bound").await?;
    assert_eq!(
        annotation(&pv.metadata, ANN_BOUND_BY_CONTROLLER),
        Some("yes")
    );
    assert_eq!(
        pv.spec
            .and_then(|s| s.claim_ref)
            .and_then(|r| r.name)
            .as_deref(),
        Some("db")
    );

    // A claim naming its volume gets that one, and the claim says a user chose it.
    claims
        .create(
            &pp,
            &claim(
                "named",
                "1Gi",
                json!({"storageClassName": "manual", "volumeName": "wanted"}),
            )?,
        )
        .await?;
    let pvc = bound(&c, "named").await?;
    assert_eq!(
        pvc.spec.as_ref().and_then(|s| s.volume_name.as_deref()),
        Some("wanted")
    );
    assert_eq!(annotation(&pvc.metadata, ANN_BOUND_BY_CONTROLLER), None);
    volume_in(&c, "wanted", "Bound").await?;

    // Deleting the claim of a pre-created volume (policy Retain by default) releases it.
    claims.delete("db", &DeleteParams::default()).await?;
    volume_in(&c, "fits", "Released").await?;
    for name in ["huge", "small", "read-only", "other-class"] {
        let v = pvs.get(name).await?;
        assert_eq!(
            v.status.and_then(|s| s.phase).as_deref(),
            Some("Available"),
            "{name}"
        );
    }
    c.stop().await
}

#[tokio::test]
async fn wait_for_first_consumer_provisions_once_a_pod_is_on_a_node() -> anyhow::Result<()> {
    let c = binder().await?.without_kubelet();
    let _sim = c.env.start_simulation(2).await?;
    let classes: Api<StorageClass> = Api::all(c.client.clone());
    classes
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                "metadata": {"name": "local"},
                "provisioner": "kore.dev/simulated",
                "volumeBindingMode": "WaitForFirstConsumer",
            }))?,
        )
        .await?;
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(c.client.clone(), NS);
    claims
        .create(
            &PostParams::default(),
            &claim("scratch", "1Gi", json!({"storageClassName": "local"}))?,
        )
        .await?;
    // It waits: an event says so, and no volume is made.
    let events: Api<Event> = Api::namespaced(c.client.clone(), NS);
    wait_for_value(|| {
        let events = events.clone();
        async move {
            let list = events.list(&ListParams::default()).await.ok()?;
            list.items
                .iter()
                .any(|e| e.reason.as_deref() == Some(volume::REASON_WAIT_FOR_FIRST_CONSUMER))
                .then_some(())
        }
    })
    .await?;
    let pvs: Api<PersistentVolume> = Api::all(c.client.clone());
    assert!(pvs.list(&ListParams::default()).await?.items.is_empty());

    let pods: Api<Pod> = Api::namespaced(c.client.clone(), NS);
    pods.create(
        &PostParams::default(),
        &serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "user", "namespace": NS},
            "spec": {
                "containers": [{"name": "app", "image": "app:1"}],
                "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "scratch"}}],
            },
        }))?,
    )
    .await?;
    let node = c
        .wait_object::<Pod, _>("user", |p| p.spec.as_ref()?.node_name.clone())
        .await?;
    let pvc = bound(&c, "scratch").await?;
    let pv_name = pvc.spec.and_then(|s| s.volume_name).unwrap_or_default();
    let pv = volume_in(&c, &pv_name, "Bound").await?;
    // The volume lives on the consumer's node.
    let terms = pv
        .spec
        .and_then(|s| s.node_affinity)
        .and_then(|a| a.required)
        .map(|r| r.node_selector_terms)
        .unwrap_or_default();
    let values = terms
        .first()
        .and_then(|t| t.match_expressions.as_ref())
        .and_then(|e| e.first())
        .and_then(|r| r.values.clone());
    assert_eq!(values, Some(vec![node]));
    c.stop().await
}
