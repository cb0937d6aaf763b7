//! The closed-loop load generator and latency statistics.
//!
//! Every [`Worker`] owns one connection and runs one operation at a time, starting the next as
//! soon as the previous one is answered. [`for_duration`] runs them through a warm-up and a
//! measured window and counts the operations that *complete* inside the window;
//! [`for_count`] runs them until a fixed number of operations is done (to fill a server).

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use bytes::Bytes;
use serde::Serialize;

use crate::clients::{EtcdConn, KoreConn};
use crate::procs;

/// One client of the load: an operation it repeats with increasing sequence numbers.
pub(crate) trait Worker: Send + 'static {
    /// Runs operation number `seq` of this worker and returns the bytes of its answer.
    fn op(&mut self, seq: u64) -> impl Future<Output = anyhow::Result<u64>> + Send;
}

/// A kind the load generator creates: the small ConfigMap of most rows, and two kinds whose
/// stored form is mostly what the server's defaulting adds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub(crate) enum Kind {
    /// [`configmap`].
    ConfigMap,
    /// [`pod`].
    Pod,
    /// [`statefulset`].
    StatefulSet,
}

impl Kind {
    /// The collection to POST to in namespace `ns`.
    pub(crate) fn path(self, ns: &str) -> String {
        match self {
            Kind::ConfigMap => format!("/api/v1/namespaces/{ns}/configmaps"),
            Kind::Pod => format!("/api/v1/namespaces/{ns}/pods"),
            Kind::StatefulSet => format!("/apis/apps/v1/namespaces/{ns}/statefulsets"),
        }
    }

    /// The JSON posted for the object named `name`.
    pub(crate) fn body(self, name: &str) -> Bytes {
        match self {
            Kind::ConfigMap => configmap(name),
            Kind::Pod => pod(name),
            Kind::StatefulSet => statefulset(name),
        }
    }

    /// The kind's name.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Kind::ConfigMap => "ConfigMap",
            Kind::Pod => "Pod",
            Kind::StatefulSet => "StatefulSet",
        }
    }
}

/// Creates objects named `{prefix}-{seq:08}` through kore's REST API.
pub(crate) struct Creator {
    conn: KoreConn,
    kind: Kind,
    path: String,
    prefix: String,
}

impl Creator {
    /// A creator posting `kind` to namespace `ns` with names starting with `prefix`.
    pub(crate) fn of(kind: Kind, conn: KoreConn, ns: &str, prefix: String) -> Creator {
        Creator {
            conn,
            kind,
            path: kind.path(ns),
            prefix,
        }
    }
}

impl Worker for Creator {
    async fn op(&mut self, seq: u64) -> anyhow::Result<u64> {
        let name = format!("{}-{seq:08}", self.prefix);
        let body = self.conn.create(&self.path, self.kind.body(&name)).await?;
        Ok(body.len() as u64)
    }
}

/// Puts keys `/registry/configmaps/bench/{prefix}-{seq:08}` with a fixed value into etcd.
pub(crate) struct Putter {
    conn: EtcdConn,
    prefix: String,
    value: Bytes,
}

impl Putter {
    /// A putter writing `value` under keys starting with `prefix`.
    pub(crate) fn new(conn: EtcdConn, prefix: String, value: Bytes) -> Putter {
        Putter {
            conn,
            prefix,
            value,
        }
    }
}

impl Worker for Putter {
    async fn op(&mut self, seq: u64) -> anyhow::Result<u64> {
        let key = format!("/registry/configmaps/bench/{}-{seq:08}", self.prefix);
        self.conn.put(key.as_bytes(), &self.value).await?;
        Ok(0)
    }
}

/// The JSON of a small, realistic ConfigMap named `name` (about 350 bytes for the names the
/// benchmark uses): two labels, three settings and a short YAML file.
pub(crate) fn configmap(name: &str) -> Bytes {
    Bytes::from(format!(
        concat!(
            r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"{}","#,
            r#""labels":{{"app.kubernetes.io/name":"kore-bench","app.kubernetes.io/component":"load"}}}},"#,
            r#""data":{{"LOG_LEVEL":"info","LISTEN_ADDR":"0.0.0.0:8080","FEATURE_GATES":"Alpha=false,Beta=true","#,
            r#""app.yaml":"replicas: 3\ntimeout: 30s\nretries: 5\ncache:\n  size: 256Mi\n  ttl: 10m\n"}}}}"#
        ),
        name
    ))
}

/// The JSON of a typical single-container Pod named `name` (about 700 bytes): labels, a
/// container with a port, an environment variable, requests and limits, and a readiness probe.
/// The server adds what Kubernetes defaults (restart and DNS policy, scheduler, termination
/// settings, the service account token volume and mount, tolerations, …).
pub(crate) fn pod(name: &str) -> Bytes {
    Bytes::from(format!(
        concat!(
            r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"{}","#,
            r#""labels":{{"app.kubernetes.io/name":"kore-bench","app.kubernetes.io/component":"load"}}}},"#,
            r#""spec":{{"containers":[{{"name":"web","image":"registry.example/web:1.27.3","#,
            r#""ports":[{{"name":"http","containerPort":8080}}],"#,
            r#""env":[{{"name":"LOG_LEVEL","value":"info"}}],"#,
            r#""resources":{{"requests":{{"cpu":"100m","memory":"128Mi"}},"limits":{{"memory":"256Mi"}}}},"#,
            r#""readinessProbe":{{"httpGet":{{"path":"/healthz","port":"http"}},"periodSeconds":5}}}}]}}}}"#
        ),
        name
    ))
}

/// The JSON of a StatefulSet named `name` with three replicas of the [`pod`]'s container and a
/// volume claim template (about 900 bytes); the server defaults the update strategy, pod
/// management policy, history limit, retention policy and the pod template's fields.
pub(crate) fn statefulset(name: &str) -> Bytes {
    Bytes::from(format!(
        concat!(
            r#"{{"apiVersion":"apps/v1","kind":"StatefulSet","metadata":{{"name":"{0}","#,
            r#""labels":{{"app.kubernetes.io/name":"kore-bench","app.kubernetes.io/component":"load"}}}},"#,
            r#""spec":{{"replicas":3,"serviceName":"{0}","selector":{{"matchLabels":{{"app":"{0}"}}}},"#,
            r#""template":{{"metadata":{{"labels":{{"app":"{0}"}}}},"#,
            r#""spec":{{"containers":[{{"name":"web","image":"registry.example/web:1.27.3","#,
            r#""ports":[{{"name":"http","containerPort":8080}}],"#,
            r#""env":[{{"name":"LOG_LEVEL","value":"info"}}],"#,
            r#""resources":{{"requests":{{"cpu":"100m","memory":"128Mi"}},"limits":{{"memory":"256Mi"}}}},"#,
            r#""volumeMounts":[{{"name":"data","mountPath":"/data"}}]}}]}}}},"#,
            r#""volumeClaimTemplates":[{{"metadata":{{"name":"data"}},"#,
            r#""spec":{{"accessModes":["ReadWriteOnce"],"resources":{{"requests":{{"storage":"1Gi"}}}}}}}}]}}}}"#
        ),
        name
    ))
}

/// Phases of a timed run, shared by the workers.
const WARMUP: u8 = 0;
const MEASURE: u8 = 1;
const STOP: u8 = 2;

/// What a timed run measured.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct Throughput {
    /// Concurrent clients.
    pub(crate) clients: usize,
    /// Connections they used (one per client unless they shared one).
    pub(crate) connections: usize,
    /// Operations completed inside the measured window.
    pub(crate) ops: u64,
    /// Length of the measured window, in seconds.
    pub(crate) seconds: f64,
    /// `ops / seconds`.
    pub(crate) ops_per_sec: f64,
    /// Median latency of one operation, in milliseconds.
    pub(crate) p50_ms: f64,
    /// 99th-percentile latency, in milliseconds.
    pub(crate) p99_ms: f64,
    /// Failed operations (a failed worker stops; see `first_error`).
    pub(crate) errors: u64,
    /// The first failure, if any.
    pub(crate) first_error: Option<String>,
    /// CPU used by the server during the window, in cores (1.0 = one core busy).
    pub(crate) server_cores: f64,
    /// CPU used by the load generator (this process) during the window, in cores.
    pub(crate) client_cores: f64,
    /// CPU used by everything else on the machine during the window, in cores (other work
    /// skews the numbers; the kernel's share of loopback networking may land here too).
    pub(crate) other_cores: f64,
}

/// Runs `workers` for `warmup`, then counts completions for `measure`. `server_cpu` reads the
/// server's CPU time, to report how busy it was.
pub(crate) async fn for_duration<W: Worker>(
    workers: Vec<W>,
    warmup: Duration,
    measure: Duration,
    server_cpu: impl Fn() -> anyhow::Result<Duration>,
) -> anyhow::Result<Throughput> {
    let clients = workers.len();
    let phase = Arc::new(AtomicU8::new(WARMUP));
    let mut tasks = Vec::with_capacity(clients);
    for mut worker in workers {
        let phase = phase.clone();
        tasks.push(tokio::spawn(async move {
            let mut latencies_us: Vec<u32> = Vec::with_capacity(1 << 14);
            let mut seq = 0u64;
            loop {
                if phase.load(Ordering::Relaxed) == STOP {
                    return (latencies_us, None);
                }
                let began = Instant::now();
                let result = worker.op(seq).await;
                seq += 1;
                if let Err(e) = result {
                    return (latencies_us, Some(format!("{e:#}")));
                }
                if phase.load(Ordering::Relaxed) == MEASURE {
                    let us = began.elapsed().as_micros();
                    latencies_us.push(u32::try_from(us).unwrap_or(u32::MAX));
                }
            }
        }));
    }
    tokio::time::sleep(warmup).await;
    let server_before = server_cpu()?;
    let client_before = procs::cpu_time("/proc/self/stat")?;
    let machine_before = procs::machine_busy()?;
    let start = Instant::now();
    phase.store(MEASURE, Ordering::Relaxed);
    tokio::time::sleep(measure).await;
    phase.store(STOP, Ordering::Relaxed);
    let seconds = start.elapsed().as_secs_f64();
    let cores =
        |after: Duration, before: Duration| after.saturating_sub(before).as_secs_f64() / seconds;
    let server_cores = cores(server_cpu()?, server_before);
    let client_cores = cores(procs::cpu_time("/proc/self/stat")?, client_before);
    let machine_cores = cores(procs::machine_busy()?, machine_before);
    let other_cores = (machine_cores - server_cores - client_cores).max(0.0);

    let mut all = Vec::new();
    let mut errors = 0;
    let mut first_error = None;
    for task in tasks {
        let (latencies, error) = task.await.context("a load worker panicked")?;
        all.extend(latencies);
        if let Some(e) = error {
            errors += 1;
            first_error.get_or_insert(e);
        }
    }
    all.sort_unstable();
    let ops = all.len() as u64;
    Ok(Throughput {
        clients,
        connections: clients,
        ops,
        seconds,
        ops_per_sec: ops as f64 / seconds,
        p50_ms: percentile_ms(&all, 0.50),
        p99_ms: percentile_ms(&all, 0.99),
        errors,
        first_error,
        server_cores,
        client_cores,
        other_cores,
    })
}

/// What a fixed-count run did.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Filled {
    /// Operations run.
    pub(crate) ops: u64,
    /// Sum of the answers' sizes, in bytes.
    pub(crate) bytes: u64,
    /// Wall-clock time.
    pub(crate) elapsed: Duration,
}

/// Runs `workers` until `total` operations are done between them; any failure fails the run.
pub(crate) async fn for_count<W: Worker>(workers: Vec<W>, total: u64) -> anyhow::Result<Filled> {
    let next = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let mut tasks = Vec::with_capacity(workers.len());
    for mut worker in workers {
        let next = next.clone();
        tasks.push(tokio::spawn(async move {
            let mut bytes = 0u64;
            loop {
                let seq = next.fetch_add(1, Ordering::Relaxed);
                if seq >= total {
                    return anyhow::Ok(bytes);
                }
                bytes += worker.op(seq).await?;
            }
        }));
    }
    let mut bytes = 0;
    for task in tasks {
        bytes += task.await.context("a load worker panicked")??;
    }
    Ok(Filled {
        ops: total,
        bytes,
        elapsed: start.elapsed(),
    })
}

/// The `q` quantile (0..=1) of sorted microsecond samples, in milliseconds (nearest rank).
pub(crate) fn percentile_ms(sorted_us: &[u32], q: f64) -> f64 {
    if sorted_us.is_empty() {
        return f64::NAN;
    }
    let rank = (q * sorted_us.len() as f64).ceil() as usize;
    let index = rank.clamp(1, sorted_us.len()) - 1;
    f64::from(sorted_us[index]) / 1000.0
}

/// The median of durations, in milliseconds.
pub(crate) fn median_ms(samples: &[Duration]) -> f64 {
    let mut us: Vec<u32> = samples
        .iter()
        .map(|d| u32::try_from(d.as_micros()).unwrap_or(u32::MAX))
        .collect();
    us.sort_unstable();
    percentile_ms(&us, 0.5)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_use_the_nearest_rank() {
        let samples: Vec<u32> = (1..=100).map(|ms| ms * 1000).collect();
        assert_eq!(percentile_ms(&samples, 0.5), 50.0);
        assert_eq!(percentile_ms(&samples, 0.99), 99.0);
        assert_eq!(percentile_ms(&samples, 1.0), 100.0);
        assert_eq!(percentile_ms(&[7000], 0.99), 7.0);
        assert!(percentile_ms(&[], 0.5).is_nan());
    }

    #[test]
    fn the_configmap_is_valid_json_of_about_350_bytes() {
        let body = configmap("bench-m064-07-00012345");
        let value: serde_json::Value = serde_json::from_slice(&body).expect("valid JSON");
        assert_eq!(value["metadata"]["name"], "bench-m064-07-00012345");
        assert!((330..=370).contains(&body.len()), "{} bytes", body.len());
    }

    /// The Pod and StatefulSet the kind rows post are valid for kore's API (a server that
    /// refused them would make the rows measure errors).
    #[tokio::test]
    async fn every_kind_is_accepted_by_the_server() {
        use k8s_openapi::api::apps::v1::StatefulSet;
        use k8s_openapi::api::core::v1::{ConfigMap, Pod};
        use kube::api::{Api, PostParams};

        let env = kore_testenv::TestEnv::start().await.expect("start");
        let pp = PostParams::default();
        for kind in [Kind::ConfigMap, Kind::Pod, Kind::StatefulSet] {
            let body = kind.body("bench-k-00000001");
            assert!(kind.path("default").starts_with('/'));
            match kind {
                Kind::ConfigMap => {
                    let cm: ConfigMap = serde_json::from_slice(&body).expect("a ConfigMap");
                    Api::<ConfigMap>::default_namespaced(env.client())
                        .create(&pp, &cm)
                        .await
                        .expect("created");
                }
                Kind::Pod => {
                    let pod: Pod = serde_json::from_slice(&body).expect("a Pod");
                    let made = Api::<Pod>::default_namespaced(env.client())
                        .create(&pp, &pod)
                        .await
                        .expect("created");
                    let spec = made.spec.expect("spec");
                    assert_eq!(spec.restart_policy.as_deref(), Some("Always"));
                }
                Kind::StatefulSet => {
                    let sts: StatefulSet = serde_json::from_slice(&body).expect("a StatefulSet");
                    let made = Api::<StatefulSet>::default_namespaced(env.client())
                        .create(&pp, &sts)
                        .await
                        .expect("created");
                    let spec = made.spec.expect("spec");
                    assert_eq!(spec.pod_management_policy.as_deref(), Some("OrderedReady"));
                }
            }
        }
    }
}
