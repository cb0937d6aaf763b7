//! A simulated pod's lifecycle as a pure function of the pod, its node and the time: what the
//! kubelet writes next ([`Step`]), so the controller around it stays a thin loop.
//!
//! Stages, each one status write:
//! 1. acknowledged: `Pending`, `hostIP`, `startTime`, containers waiting `ContainerCreating`
//!    (`PodInitializing` behind init containers), `PodReadyToStartContainers=False`;
//! 2. after [`KubeletConfig::start_delay`](super::KubeletConfig::start_delay): `Running` with
//!    `podIP`, init containers terminated `Completed`, containers running and `Ready` unless a
//!    readiness probe's `initialDelaySeconds` has not passed yet (a third write makes them
//!    ready then);
//! 3. a pod that finishes (see [`run_time`]) ends `Succeeded` (exit code 0) or `Failed`.
//!
//! A pod with a `deletionTimestamp` is deleted at once if its containers never started, else
//! its containers are marked terminated after a short simulated stop within the grace period,
//! and it is deleted with grace 0.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, ContainerStatus, Pod};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use serde_json::{Value, json};

use super::KubeletConfig;

/// How long a pod runs before it exits by itself (e.g. `2s`, `500ms`); needs restartPolicy
/// `Never` or `OnFailure`.
pub const EXIT_AFTER: &str = "kore.dev/exit-after";
/// The exit code of a pod that exits (default 0): 0 ends `Succeeded`, others `Failed`.
pub const EXIT_CODE: &str = "kore.dev/exit-code";

/// What the kubelet does next for a pod.
#[derive(Debug, PartialEq)]
pub enum Step {
    /// Write this status (a JSON merge patch's `status`), then look again after the delay.
    Write(Value, Option<Duration>),
    /// Write this status (containers terminated), then delete the pod with grace 0.
    StopAndDelete(Value),
    /// Delete the pod with grace 0.
    Delete,
    /// Nothing now; look again after the delay.
    Wait(Duration),
    /// Nothing to do until the pod changes.
    Nothing,
}

/// Where the pod runs.
#[derive(Debug, Clone)]
pub struct Placement {
    /// The node's InternalIP.
    pub host_ip: String,
    /// The pod's IP, from the node's podCIDR.
    pub pod_ip: String,
}

fn seconds(t: Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

fn elapsed(since: Timestamp, now: Timestamp) -> Duration {
    now.duration_since(since)
        .try_into()
        .unwrap_or(Duration::ZERO)
}

fn remaining(wait: Duration, since: Timestamp, now: Timestamp) -> Option<Duration> {
    let e = elapsed(since, now);
    (e < wait).then(|| wait - e)
}

/// Reads `2s`, `500ms`, `1m`, `1.5s`, or plain seconds.
pub fn parse_duration(s: &str) -> Option<Duration> {
    let s = s.trim();
    let (num, unit) = s.split_at(s.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(s.len()));
    let n: f64 = num.trim().parse().ok()?;
    let secs = match unit {
        "" | "s" => n,
        "ms" => n / 1000.0,
        "m" => n * 60.0,
        "h" => n * 3600.0,
        _ => return None,
    };
    (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs))
}

/// How long `pod` runs before it exits by itself, if it does: the [`EXIT_AFTER`] annotation,
/// else a Job's pod runs [`KubeletConfig::job_run_time`]. Only restartPolicy `Never` or
/// `OnFailure` pods finish (a kubelet restarts the others).
pub fn run_time(pod: &Pod, config: &KubeletConfig) -> Option<Duration> {
    let policy = pod
        .spec
        .as_ref()
        .and_then(|s| s.restart_policy.as_deref())
        .unwrap_or("Always");
    if policy == "Always" {
        return None;
    }
    if let Some(d) = pod
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(EXIT_AFTER))
        .and_then(|v| parse_duration(v))
    {
        return Some(d);
    }
    let job_owned = pod
        .metadata
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.kind == "Job" && o.api_version.starts_with("batch/"));
    job_owned.then_some(config.job_run_time)
}

fn exit_code(pod: &Pod) -> i64 {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(EXIT_CODE))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// A fake, stable 64-hex-digit id.
fn fake_id(parts: &[&str]) -> String {
    use std::hash::{DefaultHasher, Hash, Hasher};
    (0u8..4)
        .map(|salt| {
            let mut h = DefaultHasher::new();
            (salt, parts).hash(&mut h);
            format!("{:016x}", h.finish())
        })
        .collect()
}

fn container_id(pod: &Pod, c: &str) -> String {
    container_id_of(pod.metadata.uid.as_deref().unwrap_or_default(), c)
}

/// The fake container id of container `c` of the pod `uid`.
pub fn container_id_of(uid: &str, c: &str) -> String {
    format!("kore://{}", fake_id(&[uid, c]))
}

/// The fake image id of `image`.
pub fn image_id(image: &str) -> String {
    let name = image.split('@').next().unwrap_or(image);
    format!("{name}@sha256:{}", fake_id(&[image]))
}

fn containers(pod: &Pod) -> (&[Container], &[Container]) {
    match &pod.spec {
        Some(s) => (
            s.init_containers.as_deref().unwrap_or_default(),
            &s.containers,
        ),
        None => (&[], &[]),
    }
}

fn status_of<'a>(
    statuses: Option<&'a Vec<ContainerStatus>>,
    name: &str,
) -> Option<&'a ContainerStatus> {
    statuses?.iter().find(|s| s.name == name)
}

fn condition(
    ty: &str,
    ok: bool,
    reason: Option<&str>,
    message: Option<String>,
    old: &Value,
    now: &str,
) -> Value {
    let status = if ok { "True" } else { "False" };
    // The transition time moves only when the status changes.
    let since = old
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == ty))
        .filter(|c| c["status"] == status)
        .and_then(|c| c["lastTransitionTime"].as_str().map(String::from))
        .unwrap_or_else(|| now.to_string());
    let mut c =
        json!({"type": ty, "status": status, "lastProbeTime": null, "lastTransitionTime": since});
    if let Some(r) = reason {
        c["reason"] = json!(r);
    }
    if let Some(m) = message {
        c["message"] = json!(m);
    }
    c
}

/// The pod's conditions in the kubelet's order (PodReadyToStartContainers, Initialized,
/// Ready, ContainersReady, PodScheduled), then any others it had (readiness gates, …).
fn conditions(
    pod: &Pod,
    sandbox: bool,
    init_pending: &[String],
    unready: &[String],
    completed: bool,
    now: &str,
) -> Value {
    let old = serde_json::to_value(pod.status.as_ref().and_then(|s| s.conditions.as_ref()))
        .unwrap_or(Value::Null);
    let list = |names: &[String]| format!("[{}]", names.join(" "));
    let (ready_reason, ready_msg) = if completed {
        (Some("PodCompleted"), None)
    } else if unready.is_empty() {
        (None, None)
    } else {
        (
            Some("ContainersNotReady"),
            Some(format!("containers with unready status: {}", list(unready))),
        )
    };
    let mut out = vec![
        condition("PodReadyToStartContainers", sandbox, None, None, &old, now),
        if init_pending.is_empty() {
            condition(
                "Initialized",
                true,
                completed.then_some("PodCompleted"),
                None,
                &old,
                now,
            )
        } else {
            condition(
                "Initialized",
                false,
                Some("ContainersNotInitialized"),
                Some(format!(
                    "containers with incomplete status: {}",
                    list(init_pending)
                )),
                &old,
                now,
            )
        },
        condition(
            "Ready",
            unready.is_empty() && !completed,
            ready_reason,
            ready_msg.clone(),
            &old,
            now,
        ),
        condition(
            "ContainersReady",
            unready.is_empty() && !completed,
            ready_reason,
            ready_msg,
            &old,
            now,
        ),
    ];
    const OURS: [&str; 4] = [
        "PodReadyToStartContainers",
        "Initialized",
        "Ready",
        "ContainersReady",
    ];
    let others: Vec<Value> = old
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| !OURS.iter().any(|t| c["type"] == *t))
        .cloned()
        .collect();
    let (scheduled, rest): (Vec<Value>, Vec<Value>) = others
        .into_iter()
        .partition(|c| c["type"] == "PodScheduled");
    out.extend(scheduled);
    out.extend(rest);
    Value::Array(out)
}

fn base_status(c: &Container) -> Value {
    json!({
        "name": c.name, "image": c.image.clone().unwrap_or_default(), "imageID": "",
        "ready": false, "restartCount": 0, "started": false,
        "state": {"waiting": {"reason": "ContainerCreating"}},
    })
}

/// Stage 1: the pod is acknowledged and its sandbox is being made.
fn acknowledged(pod: &Pod, at: &Placement, now: &str) -> Value {
    let (inits, mains) = containers(pod);
    let waiting = |reason: &str| json!({"waiting": {"reason": reason}});
    let main_reason = if inits.is_empty() {
        "ContainerCreating"
    } else {
        "PodInitializing"
    };
    let init_statuses: Vec<Value> = inits
        .iter()
        .map(|c| {
            let mut s = base_status(c);
            s["state"] = waiting("PodInitializing");
            s
        })
        .collect();
    let main_statuses: Vec<Value> = mains
        .iter()
        .map(|c| {
            let mut s = base_status(c);
            s["state"] = waiting(main_reason);
            s
        })
        .collect();
    let init_names: Vec<String> = inits.iter().map(|c| c.name.clone()).collect();
    let main_names: Vec<String> = mains.iter().map(|c| c.name.clone()).collect();
    let mut status = json!({
        "phase": "Pending",
        "hostIP": at.host_ip, "hostIPs": [{"ip": at.host_ip}],
        "startTime": now,
        "conditions": conditions(pod, false, &init_names, &main_names, false, now),
        "containerStatuses": main_statuses,
    });
    if !init_statuses.is_empty() {
        status["initContainerStatuses"] = json!(init_statuses);
    }
    status
}

/// The delay before a container is ready: its readiness probe's `initialDelaySeconds`.
fn ready_delay(c: &Container) -> Duration {
    let secs = c
        .readiness_probe
        .as_ref()
        .and_then(|p| p.initial_delay_seconds)
        .unwrap_or(0);
    Duration::from_secs(u64::try_from(secs).unwrap_or(0))
}

/// Stage 2 (and its readiness updates): init containers completed, containers running since
/// `started`; answers the status and when the next container turns ready.
fn running(
    pod: &Pod,
    at: &Placement,
    started: Timestamp,
    now: Timestamp,
) -> (Value, Option<Duration>) {
    let (inits, mains) = containers(pod);
    let started_s = seconds(started);
    let now_s = seconds(now);
    let init_statuses: Vec<Value> = inits
        .iter()
        .map(|c| {
            json!({
                "name": c.name, "image": c.image, "imageID": image_id(c.image.as_deref().unwrap_or_default()),
                "containerID": container_id(pod, &c.name),
                "ready": true, "restartCount": 0, "started": false,
                "state": {"terminated": {
                    "exitCode": 0, "reason": "Completed",
                    "startedAt": started_s, "finishedAt": started_s,
                    "containerID": container_id(pod, &c.name),
                }},
            })
        })
        .collect();
    let mut unready = Vec::new();
    let mut next: Option<Duration> = None;
    let main_statuses: Vec<Value> = mains
        .iter()
        .map(|c| {
            let ready = match remaining(ready_delay(c), started, now) {
                None => true,
                Some(left) => {
                    next = Some(next.map_or(left, |n| n.min(left)));
                    unready.push(c.name.clone());
                    false
                }
            };
            json!({
                "name": c.name, "image": c.image, "imageID": image_id(c.image.as_deref().unwrap_or_default()),
                "containerID": container_id(pod, &c.name),
                "ready": ready, "restartCount": 0, "started": true,
                "state": {"running": {"startedAt": started_s}},
            })
        })
        .collect();
    let start_time = pod
        .status
        .as_ref()
        .and_then(|s| s.start_time.as_ref())
        .map(|t| seconds(t.0))
        .unwrap_or_else(|| now_s.clone());
    let mut status = json!({
        "phase": "Running",
        "hostIP": at.host_ip, "hostIPs": [{"ip": at.host_ip}],
        "podIP": at.pod_ip, "podIPs": [{"ip": at.pod_ip}],
        "startTime": start_time,
        "conditions": conditions(pod, true, &[], &unready, false, &now_s),
        "containerStatuses": main_statuses,
    });
    if !init_statuses.is_empty() {
        status["initContainerStatuses"] = json!(init_statuses);
    }
    (status, next)
}

/// The containers terminated with `code` at `now` (a finished pod, or one being stopped).
fn terminated(pod: &Pod, code: i64, phase: Option<&str>, now: Timestamp) -> Value {
    let now_s = seconds(now);
    let reason = if code == 0 { "Completed" } else { "Error" };
    let old = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref());
    let (_, mains) = containers(pod);
    let statuses: Vec<Value> = mains
        .iter()
        .map(|c| {
            let started = status_of(old, &c.name)
                .and_then(|s| s.state.as_ref()?.running.as_ref()?.started_at.as_ref())
                .map(|t| seconds(t.0))
                .unwrap_or_else(|| now_s.clone());
            json!({
                "name": c.name, "image": c.image, "imageID": image_id(c.image.as_deref().unwrap_or_default()),
                "containerID": container_id(pod, &c.name),
                "ready": false, "restartCount": 0, "started": false,
                "state": {"terminated": {
                    "exitCode": code, "reason": reason,
                    "startedAt": started, "finishedAt": now_s,
                    "containerID": container_id(pod, &c.name),
                }},
            })
        })
        .collect();
    let names: Vec<String> = mains.iter().map(|c| c.name.clone()).collect();
    let mut status = json!({
        "conditions": conditions(pod, phase.is_none(), &[], &names, phase.is_some(), &now_s),
        "containerStatuses": statuses,
    });
    if let Some(p) = phase {
        status["phase"] = json!(p);
    }
    status
}

fn started_at(pod: &Pod) -> Option<Timestamp> {
    pod.status
        .as_ref()?
        .container_statuses
        .as_ref()?
        .iter()
        .find_map(|s| s.state.as_ref()?.running.as_ref()?.started_at.as_ref())
        .map(|t| t.0)
}

fn condition_since(pod: &Pod, ty: &str) -> Option<Timestamp> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == ty)?
        .last_transition_time
        .as_ref()
        .map(|t| t.0)
}

/// What the kubelet remembers of a pod beyond its status: the exact times of its own writes
/// (the status holds them to the second only), and the resourceVersion its last write got.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Memory {
    /// When it wrote the pod acknowledged.
    pub acknowledged: Option<Timestamp>,
    /// When it wrote the containers running.
    pub started: Option<Timestamp>,
    /// The resourceVersion the server gave its last status write. A cached pod older than
    /// that has not seen the write yet: deciding on it would write the same step twice.
    pub written: Option<u64>,
}

impl Memory {
    /// Whether `pod`, as the cache has it, predates this kubelet's last write to it. Its
    /// watch event is on the way and will bring the pod back, current.
    pub fn is_stale(&self, pod: &Pod) -> bool {
        let cached = pod
            .metadata
            .resource_version
            .as_deref()
            .and_then(|rv| rv.parse::<u64>().ok());
        matches!((self.written, cached), (Some(written), Some(cached)) if cached < written)
    }
}

/// What the kubelet does next for `pod` (bound to its node), at `now`.
pub fn next_step(
    pod: &Pod,
    at: &Placement,
    config: &KubeletConfig,
    now: Timestamp,
    memory: Memory,
) -> Step {
    let status = pod.status.as_ref();
    let phase = status.and_then(|s| s.phase.as_deref()).unwrap_or("Pending");
    let terminal = matches!(phase, "Succeeded" | "Failed");
    if let Some(deleted) = &pod.metadata.deletion_timestamp {
        let grace = pod.metadata.deletion_grace_period_seconds.unwrap_or(0);
        if grace <= 0 && terminal {
            // Deleted with grace 0 already; a finalizer holds it.
            return Step::Nothing;
        }
        let Some(_) = started_at(pod) else {
            return Step::Delete;
        };
        let asked = deleted
            .0
            .checked_sub(SignedDuration::from_secs(grace))
            .unwrap_or(now);
        let stop = config
            .stop_time
            .min(Duration::from_secs(u64::try_from(grace).unwrap_or(0)));
        return match remaining(stop, asked, now) {
            Some(left) => Step::Wait(left),
            None => Step::StopAndDelete(terminated(pod, 0, None, now)),
        };
    }
    if terminal {
        return Step::Nothing;
    }
    if status.and_then(|s| s.host_ip.as_ref()).is_none() {
        let write = acknowledged(pod, at, &seconds(now));
        return Step::Write(write, Some(config.start_delay));
    }
    if phase == "Pending" {
        // The sandbox is made start_delay after the pod was acknowledged.
        let since = memory
            .acknowledged
            .or_else(|| condition_since(pod, "PodReadyToStartContainers"))
            .unwrap_or(now);
        if let Some(left) = remaining(config.start_delay, since, now) {
            return Step::Wait(left);
        }
        let (write, next) = running(pod, at, now, now);
        let finish = run_time(pod, config);
        return Step::Write(write, min_opt(next, finish));
    }
    // Running.
    let started = memory.started.or_else(|| started_at(pod)).unwrap_or(now);
    if let Some(run) = run_time(pod, config) {
        match remaining(run, started, now) {
            None => {
                let code = exit_code(pod);
                let phase = if code == 0 { "Succeeded" } else { "Failed" };
                return Step::Write(terminated(pod, code, Some(phase), now), None);
            }
            Some(left) => {
                if readiness_changed(pod, started, now) {
                    let (write, next) = running(pod, at, started, now);
                    return Step::Write(write, min_opt(next, Some(left)));
                }
                let next = running(pod, at, started, now).1;
                return Step::Wait(min_opt(next, Some(left)).unwrap_or(left));
            }
        }
    }
    if readiness_changed(pod, started, now) {
        let (write, next) = running(pod, at, started, now);
        return Step::Write(write, next);
    }
    match running(pod, at, started, now).1 {
        Some(left) => Step::Wait(left),
        None => Step::Nothing,
    }
}

fn min_opt(a: Option<Duration>, b: Option<Duration>) -> Option<Duration> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// Whether a container's readiness is due to change.
fn readiness_changed(pod: &Pod, started: Timestamp, now: Timestamp) -> bool {
    let statuses = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref());
    containers(pod).1.iter().any(|c| {
        let want = remaining(ready_delay(c), started, now).is_none();
        status_of(statuses, &c.name).is_none_or(|s| s.ready != want)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(v: Value) -> Pod {
        serde_json::from_value(v).expect("pod")
    }

    fn at() -> Placement {
        Placement {
            host_ip: "10.0.0.1".into(),
            pod_ip: String::new(),
        }
    }

    fn bare(status: Value) -> Pod {
        pod(json!({
            "metadata": {"name": "p", "uid": "u"},
            "spec": {"nodeName": "n", "containers": [{"name": "web", "image": "nginx",
                "readinessProbe": {"exec": {"command": ["true"]}, "initialDelaySeconds": 5}}]},
            "status": status,
        }))
    }

    #[test]
    fn a_cached_pod_older_than_the_last_write_is_stale() {
        let mut pod = bare(json!({"phase": "Pending"}));
        let memory = Memory {
            written: Some(12),
            ..Memory::default()
        };
        pod.metadata.resource_version = Some("11".into());
        assert!(memory.is_stale(&pod));
        pod.metadata.resource_version = Some("12".into());
        assert!(!memory.is_stale(&pod));
        // Opaque resourceVersions (another server's) are never taken for stale.
        pod.metadata.resource_version = Some("a1".into());
        assert!(!memory.is_stale(&pod));
        assert!(!Memory::default().is_stale(&pod));
    }

    #[test]
    fn a_new_pod_is_acknowledged_then_runs_then_turns_ready() {
        let config = KubeletConfig::default();
        let t0: Timestamp = "2026-01-01T00:00:00Z".parse().expect("time");
        let Step::Write(ack, _) = next_step(
            &bare(json!({"phase": "Pending"})),
            &at(),
            &config,
            t0,
            Memory::default(),
        ) else {
            panic!("acknowledged first")
        };
        assert_eq!(ack["phase"], "Pending");
        assert_eq!(
            ack["containerStatuses"][0]["state"]["waiting"]["reason"],
            "ContainerCreating"
        );
        let Step::Write(run, next) = next_step(&bare(ack), &at(), &config, t0, Memory::default())
        else {
            panic!("then running")
        };
        assert_eq!(run["phase"], "Running");
        assert_eq!(run["containerStatuses"][0]["ready"], false);
        assert_eq!(next, Some(Duration::from_secs(5)));
        let later = t0 + SignedDuration::from_secs(5);
        let Step::Write(ready, _) =
            next_step(&bare(run.clone()), &at(), &config, later, Memory::default())
        else {
            panic!("then ready")
        };
        assert_eq!(ready["containerStatuses"][0]["ready"], true);
        assert_eq!(ready["conditions"][2]["type"], "Ready");
        assert_eq!(ready["conditions"][2]["status"], "True");
        // Ready and running: nothing more to write.
        assert_eq!(
            next_step(&bare(ready), &at(), &config, later, Memory::default()),
            Step::Nothing
        );
    }

    #[test]
    fn a_deleted_pod_that_never_started_goes_at_once() {
        let mut p = bare(json!({"phase": "Pending", "hostIP": "10.0.0.1"}));
        p.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            Timestamp::now(),
        ));
        p.metadata.deletion_grace_period_seconds = Some(30);
        assert_eq!(
            next_step(
                &p,
                &at(),
                &KubeletConfig::default(),
                Timestamp::now(),
                Memory::default()
            ),
            Step::Delete
        );
    }

    #[test]
    fn durations_read_like_kubectl_flags() {
        assert_eq!(parse_duration("2s"), Some(Duration::from_secs(2)));
        assert_eq!(parse_duration("500ms"), Some(Duration::from_millis(500)));
        assert_eq!(parse_duration("1m"), Some(Duration::from_secs(60)));
        assert_eq!(parse_duration("3"), Some(Duration::from_secs(3)));
        assert_eq!(parse_duration("-1s"), None);
        assert_eq!(parse_duration("soon"), None);
    }
}
