//! The scheduler over the real API: pods bound through pods/binding, spread over nodes,
//! nodeSelector, taints and tolerations, requests against what is left, Unschedulable with
//! Kubernetes' message and a FailedScheduling event, retried when a node with room comes.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::events::v1::Event;
use kore_nodes::{NodeConfig, NodeSet, SimulationConfig};
use kore_testenv::{TestEnv, wait_for};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(20);

fn pod(name: &str, spec: Value) -> Pod {
    let mut spec = spec;
    if spec.get("containers").is_none() {
        spec["containers"] = json!([{"name": "c", "image": "busybox"}]);
    }
    serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).expect("pod")
}

async fn create(pods: &Api<Pod>, name: &str, spec: Value) {
    pods.create(&PostParams::default(), &pod(name, spec))
        .await
        .expect("create");
}

async fn bound_to(pods: &Api<Pod>, name: &str) -> String {
    wait_for(WAIT, || async {
        pods.get(name).await.ok()?.spec?.node_name
    })
    .await
    .expect("bound")
}

/// The pod's PodScheduled=False message, once it has one.
async fn unschedulable(pods: &Api<Pod>, name: &str) -> String {
    wait_for(WAIT, || async {
        let p = pods.get(name).await.ok()?;
        let c = p
            .status?
            .conditions?
            .into_iter()
            .find(|c| c.type_ == "PodScheduled" && c.status == "False")?;
        assert_eq!(c.reason.as_deref(), Some("Unschedulable"));
        c.message
    })
    .await
    .expect("reported unschedulable")
}

async fn taint(client: kube::Client, node: &str, key: &str, value: &str) {
    let nodes: Api<Node> = Api::all(client);
    let patch = json!({"spec": {"taints": [{"key": key, "value": value, "effect": "NoSchedule"}]}});
    nodes
        .patch(node, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("taint");
}

#[tokio::test]
async fn bare_pods_are_bound_and_spread_over_the_nodes() {
    let env = TestEnv::start().await.expect("start");
    let _sim = env.start_simulation(3).await.expect("simulation");
    let pods: Api<Pod> = Api::namespaced(env.client(), "default");
    for i in 0..6 {
        create(&pods, &format!("p{i}"), json!({})).await;
    }
    let mut per_node: BTreeMap<String, usize> = BTreeMap::new();
    for i in 0..6 {
        *per_node
            .entry(bound_to(&pods, &format!("p{i}")).await)
            .or_default() += 1;
    }
    assert_eq!(per_node.len(), 3, "{per_node:?}");
    assert!(per_node.values().all(|n| *n == 2), "{per_node:?}");

    // The Scheduled event, as kube-scheduler records it.
    let events: Api<Event> = Api::namespaced(env.client(), "default");
    let node = bound_to(&pods, "p0").await;
    let note = wait_for(WAIT, || async {
        events
            .list(&ListParams::default())
            .await
            .ok()?
            .items
            .into_iter()
            .find(|e| {
                e.reason.as_deref() == Some("Scheduled")
                    && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("p0")
            })?
            .note
    })
    .await
    .expect("a Scheduled event");
    assert_eq!(note, format!("Successfully assigned default/p0 to {node}"));
}

#[tokio::test]
async fn other_schedulers_pods_are_left_alone() {
    let env = TestEnv::start().await.expect("start");
    let _sim = env.start_simulation(1).await.expect("simulation");
    let pods: Api<Pod> = Api::namespaced(env.client(), "default");
    create(&pods, "theirs", json!({"schedulerName": "my-scheduler"})).await;
    create(&pods, "ours", json!({"schedulerName": "kore-scheduler"})).await;
    bound_to(&pods, "ours").await;
    // "ours" was created after "theirs" and is bound: "theirs" was seen and skipped.
    let theirs = pods.get("theirs").await.expect("get");
    assert_eq!(theirs.spec.and_then(|s| s.node_name), None);
    let conditions = theirs.status.and_then(|s| s.conditions).unwrap_or_default();
    assert!(conditions.iter().all(|c| c.type_ != "PodScheduled"));
}

#[tokio::test]
async fn a_pod_too_big_for_every_node_is_unschedulable_until_a_node_with_room_comes() {
    let env = TestEnv::start().await.expect("start");
    let config = SimulationConfig {
        nodes: 3,
        node: NodeConfig {
            cpu: "2".into(),
            ..NodeConfig::default()
        },
        ..SimulationConfig::default()
    };
    let _sim = env.start_simulation_with(config).await.expect("simulation");
    let pods: Api<Pod> = Api::namespaced(env.client(), "default");
    let big = json!({"containers": [{"name": "c", "image": "busybox",
        "resources": {"requests": {"cpu": "3", "memory": "1Gi"}}}]});
    create(&pods, "big", big).await;
    let message = unschedulable(&pods, "big").await;
    assert_eq!(
        message,
        "0/3 nodes are available: 3 Insufficient cpu. preemption: 0/3 nodes are available: \
         3 No preemption victims found for incoming pod."
    );
    let events: Api<Event> = Api::namespaced(env.client(), "default");
    let event = wait_for(WAIT, || async {
        events
            .list(&ListParams::default())
            .await
            .ok()?
            .items
            .into_iter()
            .find(|e| e.reason.as_deref() == Some("FailedScheduling"))
    })
    .await
    .expect("a FailedScheduling event");
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    assert_eq!(event.note.as_deref(), Some(message.as_str()));
    assert_eq!(
        event.reporting_controller.as_deref(),
        Some("default-scheduler")
    );

    // A node with room: the pod is tried again and bound there.
    let _big = NodeSet::start(
        env.client(),
        1,
        NodeConfig {
            name_prefix: "big".into(),
            cpu: "8".into(),
            ..NodeConfig::default()
        },
    )
    .await
    .expect("a big node");
    assert_eq!(bound_to(&pods, "big").await, "big-0");
    let p = pods.get("big").await.expect("get");
    let scheduled = p
        .status
        .and_then(|s| s.conditions)
        .unwrap_or_default()
        .into_iter()
        .find(|c| c.type_ == "PodScheduled")
        .expect("PodScheduled");
    assert_eq!(scheduled.status, "True");
}

#[tokio::test]
async fn requests_count_against_what_is_left_on_the_node() {
    let env = TestEnv::start().await.expect("start");
    let config = SimulationConfig {
        nodes: 1,
        node: NodeConfig {
            cpu: "2".into(),
            pods: 3,
            ..NodeConfig::default()
        },
        ..SimulationConfig::default()
    };
    let _sim = env.start_simulation_with(config).await.expect("simulation");
    let pods: Api<Pod> = Api::namespaced(env.client(), "default");
    let cpu = |c: &str| {
        json!({"containers": [{"name": "c", "image": "busybox",
        "resources": {"requests": {"cpu": c}}}]})
    };
    create(&pods, "a", cpu("1500m")).await;
    bound_to(&pods, "a").await;
    create(&pods, "b", cpu("1")).await;
    let message = unschedulable(&pods, "b").await;
    assert!(
        message.starts_with("0/1 nodes are available: 1 Insufficient cpu."),
        "{message}"
    );
    create(&pods, "c", json!({})).await;
    create(&pods, "d", json!({})).await;
    bound_to(&pods, "c").await;
    bound_to(&pods, "d").await;
    create(&pods, "e", json!({})).await;
    let message = unschedulable(&pods, "e").await;
    assert!(
        message.starts_with("0/1 nodes are available: 1 Too many pods."),
        "{message}"
    );
    // Deleting "a" frees room: "b" is bound.
    pods.delete("e", &Default::default()).await.expect("delete");
    pods.delete("a", &Default::default()).await.expect("delete");
    assert_eq!(bound_to(&pods, "b").await, "kore-node-0");
}

#[tokio::test]
async fn node_selectors_affinity_and_tolerations_are_honoured() {
    let env = TestEnv::start().await.expect("start");
    let _sim = env.start_simulation(3).await.expect("simulation");
    taint(env.client(), "kore-node-0", "dedicated", "gpu").await;
    taint(env.client(), "kore-node-1", "dedicated", "gpu").await;
    let pods: Api<Pod> = Api::namespaced(env.client(), "default");

    // Without a toleration, only kore-node-2 is left.
    create(&pods, "plain", json!({})).await;
    assert_eq!(bound_to(&pods, "plain").await, "kore-node-2");

    // A selector for a tainted node without a toleration: nowhere.
    let on_zero = json!({"kubernetes.io/hostname": "kore-node-0"});
    create(&pods, "untolerated", json!({"nodeSelector": on_zero})).await;
    let message = unschedulable(&pods, "untolerated").await;
    assert_eq!(
        message,
        "0/3 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, 2 \
         node(s) had untolerated taint {dedicated: gpu}. preemption: 0/3 nodes are available: \
         3 Preemption is not helpful for scheduling."
    );

    // With the toleration it goes there.
    let tolerate =
        json!([{"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}]);
    create(
        &pods,
        "tolerated",
        json!({"nodeSelector": on_zero, "tolerations": tolerate}),
    )
    .await;
    assert_eq!(bound_to(&pods, "tolerated").await, "kore-node-0");

    // Required node affinity: zone-b (kore-node-1) by label, NotIn the other names by field.
    let affinity = json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
    "nodeSelectorTerms": [{
        "matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["zone-b", "zone-c"]}],
        "matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["kore-node-2"]}],
    }]}}});
    create(
        &pods,
        "affine",
        json!({"affinity": affinity, "tolerations": [{"operator": "Exists"}]}),
    )
    .await;
    assert_eq!(bound_to(&pods, "affine").await, "kore-node-1");

    // A cordoned node takes no new pods.
    let nodes: Api<Node> = Api::all(env.client());
    let cordon = json!({"spec": {"unschedulable": true}});
    nodes
        .patch(
            "kore-node-2",
            &PatchParams::default(),
            &Patch::Merge(&cordon),
        )
        .await
        .expect("cordon");
    create(
        &pods,
        "cordoned",
        json!({"nodeSelector": {"kubernetes.io/hostname": "kore-node-2"}}),
    )
    .await;
    let message = unschedulable(&pods, "cordoned").await;
    assert!(
        message.starts_with(
            "0/3 nodes are available: 1 node(s) were unschedulable, 2 node(s) had untolerated taint {dedicated: gpu}."
        ),
        "{message}"
    );
}
