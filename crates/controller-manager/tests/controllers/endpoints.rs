//! The EndpointSlice and Endpoints controllers against kore-apiserver with simulated nodes: a
//! Deployment behind a Service gets one slice of ready endpoints with ports resolved from a
//! named port, pods leaving and not-ready pods show, the Endpoints mirror it, nothing is
//! written at steady state, and Services without a selector are left alone.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use crate::common::{Cluster, Fate, NS, wait_for_value};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Endpoints, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kore_controller_manager::Options;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

fn deployment(name: &str, replicas: i32) -> anyhow::Result<Deployment> {
    Ok(serde_json::from_value(json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name, "tier": "web"}},
                "spec": {"containers": [{"name": "c", "image": "web:1",
                                         "ports": [{"name": "http", "containerPort": 8080}]}]},
            },
        },
    }))?)
}

/// A Service selecting `tier: web`, port 80 to the named port `http`.
fn service(name: &str) -> anyhow::Result<Service> {
    Ok(serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": NS, "labels": {"team": "a"}},
        "spec": {"selector": {"tier": "web"},
                 "ports": [{"name": "web", "port": 80, "targetPort": "http"}]},
    }))?)
}

async fn slices_of(c: &Cluster, svc: &str) -> anyhow::Result<Vec<EndpointSlice>> {
    let api: Api<EndpointSlice> = Api::namespaced(c.client.clone(), NS);
    Ok(api
        .list(&ListParams::default().labels(&format!("kubernetes.io/service-name={svc}")))
        .await?
        .items)
}

/// Waits until the Service's slices hold exactly `pods` (by name) with `ready` for each.
async fn wait_endpoints(
    c: &Cluster,
    svc: &str,
    want: &[(String, bool)],
) -> anyhow::Result<Vec<EndpointSlice>> {
    let want: BTreeSet<(String, bool)> = want.iter().cloned().collect();
    wait_for_value(|| async {
        let slices = slices_of(c, svc).await.ok()?;
        let got: BTreeSet<(String, bool)> = slices
            .iter()
            .flat_map(|s| s.endpoints.iter())
            .map(|e| {
                (
                    e.target_ref
                        .as_ref()
                        .and_then(|r| r.name.clone())
                        .unwrap_or_default(),
                    e.conditions.as_ref().and_then(|c| c.ready) == Some(true),
                )
            })
            .collect();
        (got == want).then_some(slices)
    })
    .await
}

async fn running_pods(c: &Cluster, selector: &str, n: usize) -> anyhow::Result<Vec<Pod>> {
    wait_for_value(|| async {
        c.active_pods(selector).await.ok().filter(|p| {
            p.len() == n
                && p.iter().all(|p| {
                    kore_controller_manager::pods::is_ready(p)
                        && p.status.as_ref().and_then(|s| s.pod_ip.as_ref()).is_some()
                })
        })
    })
    .await
}

fn names_ready(pods: &[Pod]) -> Vec<(String, bool)> {
    pods.iter()
        .map(|p| (p.metadata.name.clone().unwrap_or_default(), true))
        .collect()
}

#[tokio::test]
async fn a_deployment_behind_a_service_gets_one_slice_and_endpoints() -> anyhow::Result<()> {
    let c = Cluster::start().await?.without_kubelet();
    let sim = c.env.start_simulation(2).await?;
    let deployments: Api<Deployment> = Api::namespaced(c.client.clone(), NS);
    deployments
        .create(&PostParams::default(), &deployment("web", 3)?)
        .await?;
    let services: Api<Service> = Api::namespaced(c.client.clone(), NS);
    let svc = services
        .create(&PostParams::default(), &service("web")?)
        .await?;
    let pods = running_pods(&c, "app=web", 3).await?;

    let slices = wait_endpoints(&c, "web", &names_ready(&pods)).await?;
    assert_eq!(slices.len(), 1, "one slice for 3 endpoints");
    let slice = &slices[0];
    assert_eq!(slice.address_type, "IPv4");
    assert!(
        slice
            .metadata
            .name
            .as_deref()
            .is_some_and(|n| n.starts_with("web-")),
        "{:?}",
        slice.metadata.name
    );
    let labels = slice.metadata.labels.clone().unwrap_or_default();
    assert_eq!(
        labels
            .get("endpointslice.kubernetes.io/managed-by")
            .map(String::as_str),
        Some("endpointslice-controller.k8s.io")
    );
    assert_eq!(labels.get("team").map(String::as_str), Some("a"));
    let owner = slice.metadata.owner_references.clone().unwrap_or_default();
    assert_eq!(owner.len(), 1);
    assert_eq!(
        (owner[0].kind.as_str(), owner[0].controller),
        ("Service", Some(true))
    );
    assert_eq!(Some(&owner[0].uid), svc.metadata.uid.as_ref());
    let ports = slice.ports.clone().unwrap_or_default();
    assert_eq!(ports.len(), 1);
    assert_eq!(
        (
            ports[0].name.as_deref(),
            ports[0].port,
            ports[0].protocol.as_deref()
        ),
        (Some("web"), Some(8080), Some("TCP")),
        "the named port resolved"
    );
    let zones: BTreeSet<String> = ["zone-a", "zone-b", "zone-c"]
        .into_iter()
        .map(String::from)
        .collect();
    for e in &slice.endpoints {
        let pod = pods
            .iter()
            .find(|p| p.metadata.name == e.target_ref.as_ref().and_then(|r| r.name.clone()))
            .expect("an endpoint per pod");
        let status = pod.status.clone().unwrap_or_default();
        assert_eq!(e.addresses, vec![status.pod_ip.unwrap_or_default()]);
        assert_eq!(
            e.node_name,
            pod.spec.as_ref().and_then(|s| s.node_name.clone())
        );
        assert!(e.zone.as_ref().is_some_and(|z| zones.contains(z)), "{e:?}");
        let cond = e.conditions.clone().unwrap_or_default();
        assert_eq!(
            (cond.ready, cond.serving, cond.terminating),
            (Some(true), Some(true), Some(false))
        );
        assert_eq!(
            e.target_ref.as_ref().and_then(|r| r.kind.as_deref()),
            Some("Pod")
        );
    }
    // The trigger time is that of the earliest change the write reflects; readiness
    // transitions in the same second as the previous state leave none (as in Kubernetes).
    if let Some(t) = slice
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get("endpoints.kubernetes.io/last-change-trigger-time"))
    {
        t.parse::<k8s_openapi::jiff::Timestamp>()?;
    }

    // The Endpoints mirror it.
    let ips: BTreeSet<String> = pods
        .iter()
        .filter_map(|p| p.status.as_ref()?.pod_ip.clone())
        .collect();
    let endpoints = c
        .wait_object::<Endpoints, _>("web", |e| {
            let subsets = e.subsets.clone().unwrap_or_default();
            let got: BTreeSet<String> = subsets
                .iter()
                .flat_map(|s| s.addresses.iter().flatten())
                .map(|a| a.ip.clone())
                .collect();
            (got == ips).then(|| e.clone())
        })
        .await?;
    let subsets = endpoints.subsets.clone().unwrap_or_default();
    assert_eq!(subsets.len(), 1);
    let port = subsets[0].ports.clone().unwrap_or_default();
    assert_eq!(
        port.iter()
            .map(|p| (p.name.clone(), p.port))
            .collect::<Vec<_>>(),
        [(Some("web".into()), 8080)]
    );
    assert_eq!(
        endpoints
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("team"))
            .map(String::as_str),
        Some("a")
    );

    // Steady state: neither is written again over a quiet moment.
    let slice_rv = slice.metadata.resource_version.clone();
    let endpoints_rv = endpoints.metadata.resource_version.clone();
    tokio::time::sleep(Duration::from_millis(800)).await;
    let slices = slices_of(&c, "web").await?;
    assert_eq!(slices.len(), 1);
    assert_eq!(slices[0].metadata.resource_version, slice_rv);
    let eps: Api<Endpoints> = Api::namespaced(c.client.clone(), NS);
    assert_eq!(
        eps.get("web").await?.metadata.resource_version,
        endpoints_rv
    );

    // A not-ready pod the Service selects (not the ReplicaSet: no `app` label).
    let pod_api: Api<Pod> = Api::namespaced(c.client.clone(), NS);
    let canary: Pod = serde_json::from_value(json!({
        "metadata": {"name": "canary", "namespace": NS, "labels": {"tier": "web"}},
        "spec": {"containers": [{"name": "c", "image": "web:2",
            "ports": [{"name": "http", "containerPort": 8081}],
            "readinessProbe": {"initialDelaySeconds": 3600, "httpGet": {"port": 8081}}}]},
    }))?;
    pod_api.create(&PostParams::default(), &canary).await?;
    let mut want = names_ready(&pods);
    want.push(("canary".into(), false));
    let slices = wait_endpoints(&c, "web", &want).await?;
    // Its port resolves to 8081: a slice of its own.
    assert_eq!(slices.len(), 2);
    let canary_ep = slices
        .iter()
        .flat_map(|s| s.endpoints.iter())
        .find(|e| e.target_ref.as_ref().and_then(|r| r.name.as_deref()) == Some("canary"))
        .cloned()
        .unwrap_or_default();
    let cond = canary_ep.conditions.unwrap_or_default();
    assert_eq!((cond.ready, cond.serving), (Some(false), Some(false)));
    let canary_ip = wait_for_value(|| async {
        pod_api
            .get("canary")
            .await
            .ok()?
            .status?
            .pod_ip
            .filter(|ip| !ip.is_empty())
    })
    .await?;
    c.wait_object::<Endpoints, _>("web", |e| {
        e.subsets
            .iter()
            .flatten()
            .flat_map(|s| s.not_ready_addresses.iter().flatten())
            .any(|a| a.ip == canary_ip)
            .then_some(())
    })
    .await?;
    pod_api
        .delete("canary", &DeleteParams::default().grace_period(0))
        .await?;
    wait_endpoints(&c, "web", &names_ready(&pods)).await?;

    // A deleted pod leaves; its replacement joins.
    let gone = pods[0].metadata.name.clone().unwrap_or_default();
    pod_api.delete(&gone, &DeleteParams::default()).await?;
    let replaced = wait_for_value(|| async {
        c.active_pods("app=web").await.ok().filter(|p| {
            p.len() == 3
                && p.iter()
                    .all(|p| p.metadata.name.as_deref() != Some(gone.as_str()))
                && p.iter().all(kore_controller_manager::pods::is_ready)
        })
    })
    .await?;
    wait_endpoints(&c, "web", &names_ready(&replaced)).await?;

    // Scaled to 2: two endpoints are left, in one slice.
    deployments
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 2}})),
        )
        .await?;
    let two = running_pods(&c, "app=web", 2).await?;
    let slices = wait_endpoints(&c, "web", &names_ready(&two)).await?;
    assert_eq!(slices.len(), 1, "emptied slices are deleted");
    c.wait_object::<Endpoints, _>("web", |e| {
        let n: usize = e
            .subsets
            .iter()
            .flatten()
            .map(|s| s.addresses.as_ref().map_or(0, Vec::len))
            .sum();
        (n == 2).then_some(())
    })
    .await?;
    drop(sim);
    c.stop().await
}

#[tokio::test]
async fn services_without_a_selector_are_left_alone() -> anyhow::Result<()> {
    let c = Cluster::start().await?;
    let services: Api<Service> = Api::namespaced(c.client.clone(), NS);
    let manual: Service = serde_json::from_value(json!({
        "metadata": {"name": "external", "namespace": NS},
        "spec": {"ports": [{"port": 80}]},
    }))?;
    services.create(&PostParams::default(), &manual).await?;
    // A Service with a selector and no pods gets one empty placeholder slice and empty
    // Endpoints: once it has them, the controllers have also seen the one without.
    let mut empty = service("empty")?;
    if let Some(spec) = empty.spec.as_mut() {
        spec.selector = Some([("tier".to_owned(), "none".to_owned())].into());
    }
    services.create(&PostParams::default(), &empty).await?;
    let placeholder =
        wait_for_value(|| async { slices_of(&c, "empty").await.ok().filter(|s| s.len() == 1) })
            .await?;
    assert!(placeholder[0].endpoints.is_empty());
    c.wait_object::<Endpoints, _>("empty", |e| {
        e.subsets.as_ref().is_none_or(Vec::is_empty).then_some(())
    })
    .await?;
    assert!(slices_of(&c, "external").await?.is_empty());
    let eps: Api<Endpoints> = Api::namespaced(c.client.clone(), NS);
    assert!(eps.get_opt("external").await?.is_none());
    // The API server's own `default/kubernetes` slice is not this controller's.
    for s in slices_of(&c, "kubernetes").await? {
        let managed = s
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("endpointslice.kubernetes.io/managed-by"))
            .cloned();
        assert_ne!(managed.as_deref(), Some("endpointslice-controller.k8s.io"));
    }

    // A deleted Service's Endpoints go with it.
    services.delete("empty", &DeleteParams::default()).await?;
    wait_for_value(|| async { eps.get_opt("empty").await.ok()?.is_none().then_some(()) }).await?;
    c.stop().await
}

#[tokio::test]
async fn slices_hold_at_most_max_endpoints_and_can_publish_not_ready_pods() -> anyhow::Result<()> {
    let mut options = Options::default();
    options.max_endpoints_per_slice = 2;
    let c = Cluster::start_with(options, Arc::new(|_: &Pod| Fate::Ready))
        .await?
        .without_kubelet();
    let sim = c.env.start_simulation(2).await?;
    // Pods that never become ready.
    let mut d = deployment("slow", 3)?;
    if let Some(spec) = d.spec.as_mut()
        && let Some(pod) = spec.template.spec.as_mut()
    {
        pod.containers[0].readiness_probe = Some(serde_json::from_value(
            json!({"initialDelaySeconds": 3600, "httpGet": {"port": 8080}}),
        )?);
    }
    if let Some(labels) = d
        .spec
        .as_mut()
        .and_then(|s| s.template.metadata.as_mut())
        .and_then(|m| m.labels.as_mut())
    {
        labels.insert("tier".into(), "slow".into());
    }
    let deployments: Api<Deployment> = Api::namespaced(c.client.clone(), NS);
    deployments.create(&PostParams::default(), &d).await?;
    let mut svc = service("slow")?;
    if let Some(spec) = svc.spec.as_mut() {
        spec.selector = Some([("tier".to_owned(), "slow".to_owned())].into());
        spec.publish_not_ready_addresses = Some(true);
    }
    let services: Api<Service> = Api::namespaced(c.client.clone(), NS);
    services.create(&PostParams::default(), &svc).await?;
    let pods = wait_for_value(|| async {
        c.active_pods("app=slow").await.ok().filter(|p| {
            p.len() == 3
                && p.iter()
                    .all(|p| p.status.as_ref().and_then(|s| s.pod_ip.as_ref()).is_some())
        })
    })
    .await?;
    // publishNotReadyAddresses: ready although the pods are not.
    let slices = wait_endpoints(&c, "slow", &names_ready(&pods)).await?;
    let mut sizes: Vec<usize> = slices.iter().map(|s| s.endpoints.len()).collect();
    sizes.sort_unstable();
    assert_eq!(sizes, [1, 2], "at most 2 endpoints per slice");
    for e in slices.iter().flat_map(|s| s.endpoints.iter()) {
        let cond = e.conditions.clone().unwrap_or_default();
        assert_eq!((cond.ready, cond.serving), (Some(true), Some(false)));
    }
    c.wait_object::<Endpoints, _>("slow", |e| {
        let n: usize = e
            .subsets
            .iter()
            .flatten()
            .map(|s| s.addresses.as_ref().map_or(0, Vec::len))
            .sum();
        (n == 3).then_some(())
    })
    .await?;
    drop(sim);
    c.stop().await
}
