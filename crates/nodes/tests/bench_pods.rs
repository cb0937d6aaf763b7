//! A measurement, not a check: how fast bare pods go from created to Running over simulated
//! nodes with the server in the same process. Ignored by default; run with
//! `KORE_BENCH_PODS=10000 KORE_BENCH_NODES=100 cargo test --release -p kore-nodes --test
//! bench_pods -- --ignored --nocapture`.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kore_nodes::{NodeConfig, SchedulerConfig, SimulationConfig};
use kore_testenv::{TestEnv, wait_for};
use kube::api::{Api, ListParams, PostParams};
use serde_json::json;

fn env_or(key: &str, default: usize) -> usize {
    std::env::var(key)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a benchmark; run it explicitly"]
async fn bare_pods_created_to_running() {
    let pods_n = env_or("KORE_BENCH_PODS", 1000);
    let nodes_n = env_or("KORE_BENCH_NODES", 10);
    let env = TestEnv::start().await.expect("start");
    let config = SimulationConfig {
        nodes: nodes_n,
        node: NodeConfig {
            pods: u32::try_from(pods_n / nodes_n * 2 + 10).expect("fits"),
            cpu: "1000".into(),
            memory: "4Ti".into(),
            lease_interval: Duration::from_secs(10),
            ..NodeConfig::default()
        },
        scheduler: SchedulerConfig {
            record_scheduled: false,
            ..SchedulerConfig::default()
        },
        ..SimulationConfig::default()
    };
    let _sim = env.start_simulation_with(config).await.expect("simulation");
    let pods: Api<Pod> = Api::namespaced(env.client(), "default");
    let rv_before: u64 = pods
        .list(&ListParams::default().limit(1))
        .await
        .expect("list")
        .metadata
        .resource_version
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let start = Instant::now();
    let mut creates = tokio::task::JoinSet::new();
    let per_task = pods_n.div_ceil(32);
    for t in 0..32 {
        let pods = pods.clone();
        creates.spawn(async move {
            for i in t * per_task..((t + 1) * per_task).min(pods_n) {
                let p: Pod = serde_json::from_value(json!({
                    "metadata": {"name": format!("p{i}")},
                    "spec": {"containers": [{"name": "c", "image": "busybox"}]},
                }))
                .expect("pod");
                pods.create(&PostParams::default(), &p)
                    .await
                    .expect("create");
            }
        });
    }
    while creates.join_next().await.is_some() {}
    let created = start.elapsed();
    wait_for(Duration::from_secs(600), || async {
        let running = pods
            .list(&ListParams::default().fields("status.phase=Running"))
            .await
            .ok()?
            .items
            .len();
        (running == pods_n).then_some(())
    })
    .await
    .expect("all running");
    let running = start.elapsed();
    let rv_after: u64 = pods
        .list(&ListParams::default().limit(1))
        .await
        .expect("list")
        .metadata
        .resource_version
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    println!(
        "{pods_n} pods over {nodes_n} nodes: created in {created:?}, all Running after {running:?} \
         ({:.0} pods/s); {} writes in all (~{:.2} per pod incl. the create; leases included)",
        pods_n as f64 / running.as_secs_f64(),
        rv_after - rv_before,
        (rv_after - rv_before) as f64 / pods_n as f64
    );
}
