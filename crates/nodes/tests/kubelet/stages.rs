//! Stages (kwok's Stage API) driving the simulated pods and nodes: kore's defaults are
//! Stages a user reads and replaces; scripted lifecycles (a delayed Ready, a crash loop, a
//! failing Job pod, a node going NotReady, kwok-shaped chaos Stages) each end in the pod's or
//! node's status and events.

use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::events::v1::Event;
use kore_nodes::{KubeletConfig, SimulationConfig, Stage};
use kore_testenv::{TestEnv, wait_for};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use serde_json::json;

use super::{WAIT, condition, create, phase, pod, wait_until};

fn stage(yaml: &str) -> Stage {
    serde_saphyr::from_str(yaml).expect("a Stage")
}

async fn events_of(env: &TestEnv, ns: Option<&str>, name: &str) -> Vec<Event> {
    let api: Api<Event> = match ns {
        Some(ns) => Api::namespaced(env.client(), ns),
        None => Api::all(env.client()),
    };
    api.list(&ListParams::default())
        .await
        .expect("events")
        .items
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
        .collect()
}

/// Installs the Stage API and kore's defaults before the simulation starts, so the kubelets'
/// first look at a pod already sees the Stages a test adds.
async fn install(env: &TestEnv) -> Api<Stage> {
    kore_nodes::stage::install(&env.client())
        .await
        .expect("the Stage API");
    Api::all(env.client())
}

#[tokio::test]
async fn the_defaults_are_stages_a_user_can_read() {
    let env = TestEnv::start().await.expect("start");
    let _sim = env.start_simulation(1).await.expect("simulation");
    let stages: Api<Stage> = Api::all(env.client());
    let mut names: Vec<String> = stages
        .list(&ListParams::default())
        .await
        .expect("list")
        .items
        .into_iter()
        .filter_map(|s| s.metadata.name)
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "pod-complete",
            "pod-container-crash",
            "pod-container-restart",
            "pod-create",
            "pod-delete",
            "pod-exit",
            "pod-ready"
        ]
    );
    let ready = stages.get("pod-ready").await.expect("pod-ready");
    assert_eq!(ready.spec.resource_ref.kind, "Pod");
    assert!(
        ready
            .spec
            .next
            .expect("next")
            .status_template
            .contains("phase: Running")
    );
}

#[tokio::test]
async fn a_changed_default_is_interpreted_a_pod_turns_ready_after_its_delay() {
    let env = TestEnv::start().await.expect("start");
    let stages = install(&env).await;
    // kore's pod-ready, with a delay: no longer native, its template runs.
    stages
        .patch(
            "pod-ready",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"delay": {"durationMilliseconds": 300}}})),
        )
        .await
        .expect("patch pod-ready");
    let _sim = env.start_simulation(1).await.expect("simulation");
    let pods: Api<Pod> = Api::namespaced(env.client(), "default");
    let watch = pods
        .watch(&WatchParams::default().fields("metadata.name=slow"), "0")
        .await
        .expect("watch");
    create(&pods, pod("slow", json!({}), json!({}))).await;
    let p = wait_until(&pods, "slow", |p| {
        condition(p, "Ready").as_deref() == Some("True")
    })
    .await;
    let status = p.status.expect("status");
    assert_eq!(status.phase.as_deref(), Some("Running"));
    assert!(status.pod_ip.is_some_and(|ip| ip.starts_with("10.244.0.")));
    let cs = &status.container_statuses.expect("containerStatuses")[0];
    assert!(cs.ready);
    assert_eq!(cs.started, Some(true));
    assert!(
        cs.container_id
            .as_deref()
            .is_some_and(|id| id.starts_with("kore://"))
    );
    assert!(cs.state.as_ref().and_then(|s| s.running.as_ref()).is_some());
    // It was Pending with ContainerCreating first (kore's native pod-create), then Running.
    let mut seen = Vec::new();
    let mut events = watch.boxed();
    while let Some(e) = events.try_next().await.expect("watch") {
        if let WatchEvent::Added(p) | WatchEvent::Modified(p) = e {
            let waiting = p
                .status
                .as_ref()
                .and_then(|s| s.container_statuses.as_ref())
                .and_then(|c| c[0].state.as_ref()?.waiting.as_ref()?.reason.clone());
            seen.push((phase(&p).to_string(), waiting));
            if phase(&p) == "Running" {
                break;
            }
        }
    }
    assert!(
        seen.contains(&("Pending".into(), Some("ContainerCreating".into()))),
        "{seen:?}"
    );
}

#[tokio::test]
async fn a_container_crashes_n_times_in_crash_loop_back_off_then_runs() {
    let env = TestEnv::start().await.expect("start");
    let config = SimulationConfig {
        nodes: 1,
        kubelet: KubeletConfig {
            crash_backoff: Duration::from_millis(200),
            max_crash_backoff: Duration::from_millis(400),
            ..KubeletConfig::default()
        },
        ..SimulationConfig::default()
    };
    let _sim = env.start_simulation_with(config).await.expect("simulation");
    let pods: Api<Pod> = Api::namespaced(env.client(), "default");
    let watch = pods
        .watch(&WatchParams::default().fields("metadata.name=crash"), "0")
        .await
        .expect("watch");
    let annotations =
        json!({"annotations": {"kore.dev/crash-count": "3", "kore.dev/crash-after": "50ms"}});
    create(&pods, pod("crash", annotations, json!({}))).await;
    let uid = pods
        .get("crash")
        .await
        .expect("get")
        .metadata
        .uid
        .expect("uid");

    // Every waiting message, until the third restart.
    let mut messages = Vec::new();
    let mut events = watch.boxed();
    let mut last = None;
    let deadline = tokio::time::Instant::now() + WAIT;
    while let Ok(Some(e)) = tokio::time::timeout_at(deadline, events.try_next())
        .await
        .map(|r| r.expect("watch"))
    {
        if let WatchEvent::Modified(p) = e {
            let cs = p
                .status
                .as_ref()
                .and_then(|s| s.container_statuses.as_ref())
                .map(|c| c[0].clone());
            if let Some(cs) = cs {
                if let Some(w) = cs.state.as_ref().and_then(|s| s.waiting.as_ref())
                    && w.reason.as_deref() == Some("CrashLoopBackOff")
                {
                    // One per crash: the status written by the crash, not the later writes.
                    if cs.restart_count as usize == messages.len() {
                        messages.push(w.message.clone().expect("a message"));
                    }
                }
                if cs.restart_count == 3 && cs.ready {
                    last = Some(p);
                    break;
                }
            }
        }
    }
    let Some(p) = last else {
        let now = pods.get("crash").await.expect("get");
        panic!("the pod did not run after three crashes: {messages:?} {now:#?}");
    };
    let pod_ref = format!("crash_default({uid})");
    assert_eq!(
        messages,
        [
            format!("back-off 200ms restarting failed container=web pod={pod_ref}"),
            format!("back-off 400ms restarting failed container=web pod={pod_ref}"),
            format!("back-off 400ms restarting failed container=web pod={pod_ref}"),
        ]
    );
    let cs = p
        .status
        .as_ref()
        .expect("status")
        .container_statuses
        .as_ref()
        .expect("cs")[0]
        .clone();
    assert!(cs.state.as_ref().and_then(|s| s.running.as_ref()).is_some());
    assert_eq!(cs.image, "nginx:1.27");
    let last_state = cs
        .last_state
        .and_then(|s| s.terminated)
        .expect("lastState.terminated");
    assert_eq!(
        (last_state.exit_code, last_state.reason.as_deref()),
        (1, Some("Error"))
    );
    assert_eq!(phase(&p), "Running");
    assert_eq!(condition(&p, "Ready").as_deref(), Some("True"));
    assert_eq!(
        p.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get("kore.dev/crash-count"))
            .map(String::as_str),
        Some("0")
    );
    // The kubelet's BackOff event, counted as a series.
    let events = events_of(&env, Some("default"), "crash").await;
    let backoff = events
        .iter()
        .find(|e| e.reason.as_deref() == Some("BackOff"))
        .expect("a BackOff event");
    assert_eq!(backoff.type_.as_deref(), Some("Warning"));
    assert_eq!(
        backoff.note.as_deref(),
        Some(format!("Back-off restarting failed container web in pod {pod_ref}").as_str())
    );
}

#[tokio::test]
async fn a_job_pod_fails_with_exit_code_1_through_a_replaced_pod_complete() {
    let env = TestEnv::start().await.expect("start");
    let stages = install(&env).await;
    // kore's pod-complete, sooner: interpreted from its template.
    stages
        .patch(
            "pod-complete",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"delay": {"durationMilliseconds": 100}}})),
        )
        .await
        .expect("patch pod-complete");
    let _sim = env.start_simulation(1).await.expect("simulation");
    let jobs: Api<k8s_openapi::api::batch::v1::Job> = Api::namespaced(env.client(), "default");
    let job = serde_json::from_value(json!({
        "metadata": {"name": "j"},
        "spec": {"template": {"spec": {"restartPolicy": "Never",
            "containers": [{"name": "c", "image": "busybox"}]}}},
    }))
    .expect("job");
    let job = jobs
        .create(&PostParams::default(), &job)
        .await
        .expect("job");
    let pods: Api<Pod> = Api::namespaced(env.client(), "default");
    let meta = json!({
        "annotations": {"kore.dev/exit-code": "1"},
        "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "j",
            "uid": job.metadata.uid, "controller": true}],
    });
    create(
        &pods,
        pod("job-pod", meta, json!({"restartPolicy": "Never"})),
    )
    .await;
    let failed = wait_until(&pods, "job-pod", |p| phase(p) == "Failed").await;
    let t = failed
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .expect("cs")[0]
        .state
        .clone()
        .and_then(|s| s.terminated)
        .expect("terminated");
    assert_eq!((t.exit_code, t.reason.as_deref()), (1, Some("Error")));
    assert_eq!(condition(&failed, "Ready").as_deref(), Some("False"));
    // The whole container status is written (Kubernetes replaces containerStatuses whole).
    let cs = &failed
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .expect("cs")[0];
    assert_eq!(cs.image, "nginx:1.27");
    assert!(
        cs.container_id
            .as_deref()
            .is_some_and(|id| id.starts_with("kore://"))
    );
}

#[tokio::test]
async fn a_kwok_shaped_chaos_stage_fails_a_running_container() {
    let env = TestEnv::start().await.expect("start");
    let stages = install(&env).await;
    stages
        .create(
            &PostParams::default(),
            &stage(include_str!(
                "../testdata/pod-container-running-failed.yaml"
            )),
        )
        .await
        .expect("create the Stage");
    let _sim = env.start_simulation(1).await.expect("simulation");
    let pods: Api<Pod> = Api::namespaced(env.client(), "default");
    let meta = json!({
        "labels": {"pod-container-running-failed.stage.kwok.x-k8s.io": "true"},
        "annotations": {
            "pod-container-running-failed.stage.kwok.x-k8s.io/delay": "100ms",
            "pod-container-running-failed.stage.kwok.x-k8s.io/exit-code": "2",
            "pod-container-running-failed.stage.kwok.x-k8s.io/reason": "OOMKilled",
        },
    });
    create(&pods, pod("chaos", meta, json!({}))).await;
    let failed = wait_until(&pods, "chaos", |p| phase(p) == "Failed").await;
    let status = failed.status.expect("status");
    let t = status.container_statuses.expect("cs")[0]
        .state
        .clone()
        .and_then(|s| s.terminated)
        .expect("terminated");
    assert_eq!(t.exit_code, 2);
    assert_eq!(t.reason.as_deref(), Some("OOMKilled"));
    assert_eq!(t.message.as_deref(), Some("container failed"));
    assert!(status.pod_ip.is_some_and(|ip| ip.starts_with("10.244.0.")));
}

#[tokio::test]
async fn a_node_stage_makes_a_labelled_node_not_ready() {
    let env = TestEnv::start().await.expect("start");
    let stages = install(&env).await;
    stages
        .create(
            &PostParams::default(),
            &stage(include_str!("../testdata/node-not-ready.yaml")),
        )
        .await
        .expect("create the Stage");
    let _sim = env.start_simulation(2).await.expect("simulation");
    let nodes: Api<Node> = Api::all(env.client());
    nodes
        .patch(
            "kore-node-1",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {
                "labels": {"node-not-ready.stage.kwok.x-k8s.io": "true"},
                "annotations": {
                    "node-not-ready.stage.kwok.x-k8s.io/delay": "100ms",
                    "node-not-ready.stage.kwok.x-k8s.io/jitter-delay": "200ms",
                    "node-not-ready.stage.kwok.x-k8s.io/type": "DiskPressure",
                },
            }})),
        )
        .await
        .expect("label the node");
    let ready_of = |n: &Node, ty: &str| {
        n.status
            .as_ref()?
            .conditions
            .as_ref()?
            .iter()
            .find(|c| c.type_ == ty)
            .cloned()
    };
    let node = wait_for(WAIT, || async {
        let n = nodes.get("kore-node-1").await.ok()?;
        (ready_of(&n, "Ready")?.status == "False").then_some(n)
    })
    .await
    .expect("kore-node-1 NotReady");
    let ready = ready_of(&node, "Ready").expect("Ready");
    assert_eq!(ready.reason.as_deref(), Some("nodeFailed"));
    assert_eq!(ready.message.as_deref(), Some("node failed"));
    let disk = ready_of(&node, "DiskPressure").expect("DiskPressure");
    assert_eq!(disk.status, "True");
    let memory = ready_of(&node, "MemoryPressure").expect("MemoryPressure");
    assert_eq!(memory.status, "False");
    // The other node is untouched.
    let other = nodes.get("kore-node-0").await.expect("kore-node-0");
    assert_eq!(ready_of(&other, "Ready").expect("Ready").status, "True");
    let events = events_of(&env, None, "kore-node-1").await;
    assert!(
        events
            .iter()
            .any(|e| e.reason.as_deref() == Some("NodeNotReady")
                && e.note.as_deref() == Some("Node kore-node-1 status is now: NodeNotReady")),
        "{events:?}"
    );
}
