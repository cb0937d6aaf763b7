//! Simulated kubelets over the real API: pods go ContainerCreating → Running and Ready with
//! IPs and container statuses, init containers first, readiness after a probe's delay, pods
//! that finish end Succeeded or Failed, and graceful deletion ends with the pod gone.

use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Pod;
use kore_nodes::SimulationConfig;
use kore_testenv::{TestEnv, wait_for};
use kube::api::{Api, DeleteParams, PostParams, WatchEvent, WatchParams};
use serde_json::{Value, json};

#[path = "kubelet/stages.rs"]
mod stages;

const WAIT: Duration = Duration::from_secs(20);

fn pod(name: &str, meta: Value, spec: Value) -> Pod {
    let mut spec = spec;
    if spec.get("containers").is_none() {
        spec["containers"] = json!([{"name": "web", "image": "nginx:1.27"}]);
    }
    let mut metadata = meta;
    metadata["name"] = json!(name);
    serde_json::from_value(json!({"metadata": metadata, "spec": spec})).expect("pod")
}

async fn create(pods: &Api<Pod>, p: Pod) {
    pods.create(&PostParams::default(), &p)
        .await
        .expect("create");
}

fn condition(p: &Pod, ty: &str) -> Option<String> {
    p.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == ty)
        .map(|c| c.status.clone())
}

async fn wait_until(pods: &Api<Pod>, name: &str, ok: impl Fn(&Pod) -> bool) -> Pod {
    wait_for(WAIT, || async {
        let p = pods.get(name).await.ok()?;
        ok(&p).then_some(p)
    })
    .await
    .unwrap_or_else(|e| panic!("pod {name}: {e}"))
}

fn phase(p: &Pod) -> &str {
    p.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or_default()
}

#[tokio::test]
async fn a_bare_pod_runs_is_ready_and_is_deleted_gracefully() {
    let env = TestEnv::start().await.expect("start");
    let _sim = env.start_simulation(2).await.expect("simulation");
    let pods: Api<Pod> = Api::namespaced(env.client(), "default");

    // Every change of the pod, from its creation, to count the writes.
    let watch = pods
        .watch(&WatchParams::default().fields("metadata.name=web"), "0")
        .await
        .expect("watch");
    create(&pods, pod("web", json!({}), json!({}))).await;

    let p = wait_until(&pods, "web", |p| {
        condition(p, "Ready").as_deref() == Some("True")
    })
    .await;
    let status = p.status.clone().expect("status");
    assert_eq!(status.phase.as_deref(), Some("Running"));
    let node = p
        .spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .expect("node");
    let pod_ip = status.pod_ip.clone().expect("podIP");
    let cidr_prefix = if node == "kore-node-0" {
        "10.244.0."
    } else {
        "10.244.1."
    };
    assert!(pod_ip.starts_with(cidr_prefix), "{pod_ip} on {node}");
    assert!(status.host_ip.is_some());
    assert!(status.start_time.is_some());
    let types: Vec<&str> = status
        .conditions
        .as_ref()
        .expect("conditions")
        .iter()
        .map(|c| c.type_.as_str())
        .collect();
    assert_eq!(
        types,
        [
            "PodReadyToStartContainers",
            "Initialized",
            "Ready",
            "ContainersReady",
            "PodScheduled"
        ]
    );
    let cs = &status.container_statuses.expect("containerStatuses")[0];
    assert_eq!(cs.name, "web");
    assert_eq!(cs.image, "nginx:1.27");
    assert!(cs.image_id.starts_with("nginx:1.27@sha256:"));
    assert!(
        cs.container_id
            .as_deref()
            .is_some_and(|id| id.starts_with("kore://"))
    );
    assert!(cs.ready);
    assert_eq!(cs.started, Some(true));
    assert_eq!(cs.restart_count, 0);
    assert!(
        cs.state
            .as_ref()
            .and_then(|s| s.running.as_ref())
            .and_then(|r| r.started_at.as_ref())
            .is_some()
    );

    // The writes: created, bound, acknowledged (ContainerCreating), running.
    let mut events = watch.boxed();
    let mut seen: Vec<(String, String, Option<String>)> = Vec::new();
    while let Some(e) = events.try_next().await.expect("watch") {
        if let WatchEvent::Added(p) | WatchEvent::Modified(p) = e {
            let waiting = p
                .status
                .as_ref()
                .and_then(|s| s.container_statuses.as_ref())
                .and_then(|c| c[0].state.as_ref()?.waiting.as_ref()?.reason.clone());
            seen.push((
                phase(&p).to_string(),
                p.spec.and_then(|s| s.node_name).unwrap_or_default(),
                waiting,
            ));
            if condition_ready(&seen) {
                break;
            }
        }
    }
    assert_eq!(
        seen.len(),
        4,
        "creation, binding and two status writes: {seen:?}"
    );
    assert_eq!(seen[2].0, "Pending");
    assert_eq!(seen[2].2.as_deref(), Some("ContainerCreating"));
    assert_eq!(seen[3].0, "Running");

    // Graceful deletion: marked, then its kubelet stops it and deletes it.
    let answer = pods
        .delete("web", &DeleteParams::default())
        .await
        .expect("delete");
    let marked = answer.left().expect("still there while it stops");
    assert_eq!(marked.metadata.deletion_grace_period_seconds, Some(30));
    wait_for(WAIT, || async {
        pods.get_opt("web").await.ok()?.is_none().then_some(())
    })
    .await
    .expect("the kubelet deletes it");
}

fn condition_ready(seen: &[(String, String, Option<String>)]) -> bool {
    seen.last().is_some_and(|s| s.0 == "Running")
}

#[tokio::test]
async fn a_pod_that_never_started_is_deleted_at_once() {
    let env = TestEnv::start().await.expect("start");
    let config = SimulationConfig {
        nodes: 1,
        kubelet: kore_nodes::KubeletConfig {
            start_delay: Duration::from_secs(3600),
            ..Default::default()
        },
        ..SimulationConfig::default()
    };
    let _sim = env.start_simulation_with(config).await.expect("simulation");
    let pods: Api<Pod> = Api::namespaced(env.client(), "default");
    create(&pods, pod("slow", json!({}), json!({}))).await;
    let p = wait_until(&pods, "slow", |p| {
        p.status.as_ref().and_then(|s| s.host_ip.as_ref()).is_some()
    })
    .await;
    assert_eq!(phase(&p), "Pending");
    pods.delete("slow", &DeleteParams::default())
        .await
        .expect("delete");
    wait_for(WAIT, || async {
        pods.get_opt("slow").await.ok()?.is_none().then_some(())
    })
    .await
    .expect("deleted");
}

#[tokio::test]
async fn init_containers_complete_before_the_containers_run() {
    let env = TestEnv::start().await.expect("start");
    let _sim = env.start_simulation(1).await.expect("simulation");
    let pods: Api<Pod> = Api::namespaced(env.client(), "default");
    let spec = json!({
        "initContainers": [{"name": "setup", "image": "busybox"}, {"name": "migrate", "image": "busybox"}],
        "containers": [{"name": "app", "image": "busybox"}],
    });
    create(&pods, pod("init", json!({}), spec)).await;
    let p = wait_until(&pods, "init", |p| phase(p) == "Running").await;
    let status = p.status.expect("status");
    let inits = status.init_container_statuses.expect("init statuses");
    assert_eq!(inits.len(), 2);
    for s in &inits {
        let t = s
            .state
            .as_ref()
            .and_then(|s| s.terminated.as_ref())
            .expect("terminated");
        assert_eq!(t.exit_code, 0);
        assert_eq!(t.reason.as_deref(), Some("Completed"));
    }
    let initialized = status
        .conditions
        .expect("conditions")
        .into_iter()
        .find(|c| c.type_ == "Initialized")
        .expect("Initialized");
    assert_eq!(initialized.status, "True");
}

#[tokio::test]
async fn a_readiness_probe_delays_ready() {
    let env = TestEnv::start().await.expect("start");
    let _sim = env.start_simulation(1).await.expect("simulation");
    let pods: Api<Pod> = Api::namespaced(env.client(), "default");
    let spec = json!({"containers": [{"name": "web", "image": "nginx",
        "readinessProbe": {"httpGet": {"path": "/", "port": 80}, "initialDelaySeconds": 1}}]});
    create(&pods, pod("probed", json!({}), spec)).await;
    let running = wait_until(&pods, "probed", |p| phase(p) == "Running").await;
    // Running before ready: the probe's initial delay has not passed at the first write.
    let cs = &running
        .status
        .as_ref()
        .expect("status")
        .container_statuses
        .as_ref()
        .expect("cs")[0];
    assert!(!cs.ready);
    assert_eq!(condition(&running, "Ready").as_deref(), Some("False"));
    assert_eq!(
        condition(&running, "ContainersReady").as_deref(),
        Some("False")
    );
    let ready = wait_until(&pods, "probed", |p| {
        condition(p, "Ready").as_deref() == Some("True")
    })
    .await;
    assert!(
        ready
            .status
            .expect("status")
            .container_statuses
            .expect("cs")[0]
            .ready
    );
}

#[tokio::test]
async fn pods_that_finish_end_succeeded_or_failed_with_their_exit_code() {
    let env = TestEnv::start().await.expect("start");
    let config = SimulationConfig {
        nodes: 1,
        kubelet: kore_nodes::KubeletConfig {
            job_run_time: Duration::from_millis(50),
            ..Default::default()
        },
        ..SimulationConfig::default()
    };
    let _sim = env.start_simulation_with(config).await.expect("simulation");
    let pods: Api<Pod> = Api::namespaced(env.client(), "default");
    let never = json!({"restartPolicy": "Never"});
    // A Job's pod completes after the kubelet's job run time.
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
    let job_owned = json!({"ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job",
        "name": "j", "uid": job.metadata.uid, "controller": true}]});
    create(&pods, pod("job-pod", job_owned, never.clone())).await;
    // Told to fail, by annotation.
    let fails = json!({"annotations": {"kore.dev/exit-after": "100ms", "kore.dev/exit-code": "1"}});
    create(&pods, pod("failing", fails, never)).await;
    // restartPolicy Always pods do not finish.
    let forever = json!({"annotations": {"kore.dev/exit-after": "10ms"}});
    create(&pods, pod("forever", forever, json!({}))).await;

    let done = wait_until(&pods, "job-pod", |p| phase(p) == "Succeeded").await;
    let t = done
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .expect("cs")[0]
        .state
        .clone()
        .and_then(|s| s.terminated)
        .expect("terminated");
    assert_eq!((t.exit_code, t.reason.as_deref()), (0, Some("Completed")));
    assert_eq!(condition(&done, "Ready").as_deref(), Some("False"));

    let failed = wait_until(&pods, "failing", |p| phase(p) == "Failed").await;
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

    let p = wait_until(&pods, "forever", |p| phase(p) == "Running").await;
    assert_eq!(phase(&p), "Running");
    // A finished pod is deleted at once.
    pods.delete("failing", &DeleteParams::default())
        .await
        .expect("delete");
    assert!(pods.get_opt("failing").await.expect("get").is_none());
}
