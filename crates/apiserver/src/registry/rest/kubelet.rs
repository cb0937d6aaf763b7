//! What a kubelet answers through the API server: `pods/log`, synthesised from the pod's
//! status, and the connect subresources (`pods/exec|attach|portforward|proxy`,
//! `nodes/proxy`), refused with a clear 400 because containers are simulated.
//!
//! kore runs no containers, so a container's log is the story of its lifecycle as the
//! (simulated) kubelet recorded it in `status.containerStatuses`: a line when it started, a
//! line when it exited. The server writes it from the status alone, so the kubelets write
//! nothing extra and any status writer (kore's kubelets, kwok, a test) gets logs for free.
//! The checks follow Kubernetes' pod log REST (`validateContainer`: which container) and the
//! kubelet's (`validateContainerLogStatus`: whether it has logs, `previous`).

use serde_json::{Value, json};

use crate::api::error::ApiError;
use crate::api::field::FieldError;
use crate::api::request_info::Query;
use crate::registry::Registry;
use crate::registry::resource::Resource;

/// `PodLogOptions`, as the query carries them.
#[derive(Clone, Debug, Default)]
pub struct LogOptions {
    /// `container`.
    pub container: Option<String>,
    /// `follow`.
    pub follow: bool,
    /// `previous`: the last terminated instance.
    pub previous: bool,
    /// `timestamps`: each line starts with its RFC 3339 time.
    pub timestamps: bool,
    /// `tailLines`.
    pub tail_lines: Option<i64>,
    /// `limitBytes`.
    pub limit_bytes: Option<i64>,
    /// `sinceSeconds`.
    pub since_seconds: Option<i64>,
    /// `sinceTime`.
    pub since_time: Option<jiff::Timestamp>,
}

fn flag(q: &Query, key: &str) -> Result<bool, ApiError> {
    match q.get(key).map(String::as_str) {
        None | Some("" | "false" | "0") => Ok(false),
        Some("true" | "1") => Ok(true),
        Some(other) => Err(ApiError::BadRequest(format!(
            "invalid value {other:?} for {key}: must be true or false"
        ))),
    }
}

fn int(q: &Query, key: &str) -> Result<Option<i64>, ApiError> {
    q.get(key)
        .map(|v| {
            v.parse().map_err(|_| {
                ApiError::BadRequest(format!("invalid value {v:?} for {key}: not an integer"))
            })
        })
        .transpose()
}

impl LogOptions {
    /// Reads and validates the query (Kubernetes' `ValidatePodLogOptions`: 422 with causes).
    pub fn parse(q: &Query) -> Result<Self, ApiError> {
        let since_time = match q.get("sinceTime") {
            None => None,
            Some(t) => Some(t.parse::<jiff::Timestamp>().map_err(|_| {
                ApiError::BadRequest(format!("invalid value {t:?} for sinceTime: not RFC 3339"))
            })?),
        };
        let opts = LogOptions {
            container: q.get("container").filter(|c| !c.is_empty()).cloned(),
            follow: flag(q, "follow")?,
            previous: flag(q, "previous")?,
            timestamps: flag(q, "timestamps")?,
            tail_lines: int(q, "tailLines")?,
            limit_bytes: int(q, "limitBytes")?,
            since_seconds: int(q, "sinceSeconds")?,
            since_time,
        };
        let mut causes = Vec::new();
        if let Some(n) = opts.tail_lines.filter(|n| *n < 0) {
            causes.push(FieldError::invalid(
                "tailLines",
                json!(n),
                "must be greater than or equal to 0",
            ));
        }
        if let Some(n) = opts.limit_bytes.filter(|n| *n < 1) {
            causes.push(FieldError::invalid(
                "limitBytes",
                json!(n),
                "must be greater than 0",
            ));
        }
        if opts.since_seconds.is_some() && opts.since_time.is_some() {
            causes.push(FieldError::forbidden(
                "",
                "at most one of `sinceTime` or `sinceSeconds` may be specified",
            ));
        }
        if let Some(n) = opts.since_seconds.filter(|n| *n < 1) {
            causes.push(FieldError::invalid(
                "sinceSeconds",
                json!(n),
                "must be greater than 0",
            ));
        }
        if causes.is_empty() {
            Ok(opts)
        } else {
            Err(ApiError::Invalid {
                kind: "PodLogOptions".into(),
                group: String::new(),
                name: String::new(),
                causes,
            })
        }
    }
}

/// A container's log as the server tells it.
#[derive(Clone, Debug, PartialEq)]
pub struct PodLog {
    /// `(time, text)`, oldest first.
    pub lines: Vec<(jiff::Timestamp, String)>,
    /// Whether the container still runs (a follower waits for more).
    pub running: bool,
    /// The pod's uid (a follower stops when the pod is replaced).
    pub uid: String,
}

impl PodLog {
    /// The text to send: the lines `opts` selects (since, tail, timestamps), cut at
    /// `limitBytes`.
    pub fn render(&self, opts: &LogOptions, now: jiff::Timestamp) -> String {
        let since = opts.since_time.or_else(|| {
            opts.since_seconds
                .and_then(|s| now.checked_sub(jiff::SignedDuration::from_secs(s)).ok())
        });
        let mut lines: Vec<&(jiff::Timestamp, String)> = self
            .lines
            .iter()
            .filter(|(t, _)| since.is_none_or(|s| *t >= s))
            .collect();
        if let Some(n) = opts.tail_lines {
            let keep = usize::try_from(n).unwrap_or(0);
            lines = lines.split_off(lines.len().saturating_sub(keep));
        }
        let mut out = String::new();
        for (t, text) in lines {
            if opts.timestamps {
                out.push_str(&t.strftime("%Y-%m-%dT%H:%M:%S.%NZ").to_string());
                out.push(' ');
            }
            out.push_str(text);
            out.push('\n');
        }
        if let Some(limit) = opts.limit_bytes.and_then(|l| usize::try_from(l).ok())
            && out.len() > limit
        {
            let mut cut = limit;
            while !out.is_char_boundary(cut) {
                cut -= 1;
            }
            out.truncate(cut);
        }
        out
    }
}

fn time(v: &Value) -> Option<jiff::Timestamp> {
    v.as_str()?.parse().ok()
}

/// The lines of one container instance's state (`running` or `terminated`).
fn instance_lines(name: &str, image: &str, state: &Value) -> Vec<(jiff::Timestamp, String)> {
    let mut out = Vec::new();
    let body = if state["running"].is_object() {
        &state["running"]
    } else {
        &state["terminated"]
    };
    if let Some(t) = time(&body["startedAt"]) {
        out.push((
            t,
            format!("kore: container {name} started (image {image}; simulated, no process runs)"),
        ));
    }
    if state["terminated"].is_object()
        && let Some(t) = time(&body["finishedAt"]).or_else(|| out.first().map(|l| l.0))
    {
        let code = body["exitCode"].as_i64().unwrap_or(0);
        let reason = body["reason"].as_str().unwrap_or("Completed");
        out.push((
            t,
            format!("kore: container {name} exited with code {code} ({reason})"),
        ));
    }
    out
}

/// Kubernetes' `validateContainer`: the container asked for, or the only one.
fn pick_container(pod: &Value, name: &str, asked: Option<&str>) -> Result<String, ApiError> {
    let names = |list: &str| -> Vec<String> {
        pod["spec"][list]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| c["name"].as_str().map(String::from))
            .collect()
    };
    let mains = names("containers");
    let all: Vec<String> = names("initContainers")
        .into_iter()
        .chain(mains.iter().cloned())
        .chain(names("ephemeralContainers"))
        .collect();
    match asked {
        Some(c) if all.iter().any(|n| n == c) => Ok(c.to_string()),
        Some(c) => Err(ApiError::BadRequest(format!(
            "container {c} is not valid for pod {name}"
        ))),
        None if mains.len() == 1 => Ok(mains[0].clone()),
        None if mains.is_empty() => Err(ApiError::BadRequest(format!(
            "a container name must be specified for pod {name}"
        ))),
        None => Err(ApiError::BadRequest(format!(
            "a container name must be specified for pod {name}, choose one of: [{}]",
            all.join(" ")
        ))),
    }
}

impl Registry {
    /// `GET pods/{name}/log`: the container's simulated log. A pod not bound to a node yet
    /// answers an empty log, as Kubernetes does (it has no kubelet to ask); a container with
    /// nothing to show answers the kubelet's 400.
    pub fn pod_log(
        &self,
        res: &Resource,
        ns: Option<&str>,
        name: &str,
        opts: &LogOptions,
    ) -> Result<PodLog, ApiError> {
        let bytes = self.get(res, ns, name)?;
        let pod: Value = serde_json::from_slice(&bytes)
            .map_err(|e| ApiError::Internal(format!("stored pod unreadable: {e}")))?;
        let container = pick_container(&pod, name, opts.container.as_deref())?;
        let uid = pod["metadata"]["uid"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let empty = PodLog {
            lines: Vec::new(),
            running: false,
            uid: uid.clone(),
        };
        if pod["spec"]["nodeName"].as_str().is_none_or(str::is_empty) {
            return Ok(empty);
        }
        let status = [
            "containerStatuses",
            "initContainerStatuses",
            "ephemeralContainerStatuses",
        ]
        .iter()
        .flat_map(|list| pod["status"][*list].as_array().into_iter().flatten())
        .find(|s| s["name"] == container.as_str());
        let gone = |what: &str| {
            ApiError::BadRequest(format!("container {container:?} in pod {name:?} {what}"))
        };
        let Some(status) = status else {
            return Err(gone("is not available"));
        };
        let image = status["image"].as_str().unwrap_or_default();
        let state = &status["state"];
        let last = &status["lastState"];
        if opts.previous {
            if !last["terminated"].is_object() {
                return Err(ApiError::BadRequest(format!(
                    "previous terminated container {container:?} in pod {name:?} not found"
                )));
            }
            return Ok(PodLog {
                lines: instance_lines(&container, image, last),
                running: false,
                uid,
            });
        }
        if state["running"].is_object() || state["terminated"].is_object() {
            return Ok(PodLog {
                lines: instance_lines(&container, image, state),
                running: state["running"].is_object(),
                uid,
            });
        }
        if last["terminated"].is_object() {
            return Ok(PodLog {
                lines: instance_lines(&container, image, last),
                running: false,
                uid,
            });
        }
        match state["waiting"]["reason"].as_str() {
            Some(reason) => Err(gone(&format!("is waiting to start: {reason}"))),
            None => Err(gone("is waiting to start - no logs yet")),
        }
    }

    /// The answer to a connect subresource (`exec`, `attach`, `portforward`, `proxy`) of a
    /// pod or node: 400, since no container or kubelet is there to connect to; and to a
    /// service's `proxy`: 503, since no pod behind it listens (Kubernetes answers a service
    /// without ready endpoints `503 no endpoints available for service`). The object must
    /// exist (404 otherwise, as Kubernetes answers). A proxy name may carry Kubernetes'
    /// `[scheme:]name[:port]` parts; the name is looked up.
    pub fn refuse_connect(
        &self,
        res: &Resource,
        ns: Option<&str>,
        name: &str,
        sub: &str,
    ) -> ApiError {
        let name = if sub == "proxy" {
            proxied_name(name)
        } else {
            name
        };
        if let Err(e) = self.get(res, ns, name) {
            return e;
        }
        let what = match sub {
            "exec" => "exec into",
            "attach" => "attach to",
            "portforward" => "forward ports to",
            _ => "proxy to",
        };
        let kind = res.kind.to_lowercase();
        if kind == "service" {
            return ApiError::Unavailable(format!(
                "no endpoints available for service {name:?}: kore simulates pods, so no \
                 process listens behind a service (services/proxy is not supported)"
            ));
        }
        ApiError::BadRequest(format!(
            "{kind} {name:?}: kore simulates {}, so there is no process to {what} \
             ({}/{sub} is not supported)",
            if kind == "node" {
                "this node's kubelet"
            } else {
                "this pod's containers"
            },
            res.plural
        ))
    }
}

/// The object name in a proxy path's `[scheme:]name[:port]` (Kubernetes'
/// `net.SplitSchemeNamePort`): `https:web:8443` and `web:http` both name `web`.
fn proxied_name(id: &str) -> &str {
    let parts: Vec<&str> = id.split(':').collect();
    match parts.as_slice() {
        [scheme, name, _] if matches!(*scheme, "http" | "https") => name,
        [name, _] | [name] => name,
        _ => id,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proxy_names_drop_scheme_and_port() {
        assert_eq!(proxied_name("web"), "web");
        assert_eq!(proxied_name("web:8080"), "web");
        assert_eq!(proxied_name("https:web:8443"), "web");
        assert_eq!(proxied_name("a:b:c:d"), "a:b:c:d");
    }

    fn pod(status: Value) -> Value {
        json!({
            "metadata": {"name": "p", "uid": "u"},
            "spec": {"nodeName": "n", "containers": [{"name": "web"}, {"name": "side"}]},
            "status": status,
        })
    }

    #[test]
    fn containers_are_picked_as_kubernetes_picks_them() {
        let p = pod(json!({}));
        assert_eq!(
            pick_container(&p, "p", Some("web")).ok().as_deref(),
            Some("web")
        );
        let e = pick_container(&p, "p", None).expect_err("two containers");
        assert_eq!(
            e.to_string(),
            "a container name must be specified for pod p, choose one of: [web side]"
        );
        let e = pick_container(&p, "p", Some("nope")).expect_err("unknown");
        assert_eq!(e.to_string(), "container nope is not valid for pod p");
    }

    #[test]
    fn lines_follow_the_lifecycle_and_options() {
        let state = json!({"terminated": {"startedAt": "2026-01-01T00:00:00Z",
            "finishedAt": "2026-01-01T00:00:05Z", "exitCode": 1, "reason": "Error"}});
        let log = PodLog {
            lines: instance_lines("web", "nginx", &state),
            running: false,
            uid: "u".into(),
        };
        let now = jiff::Timestamp::now();
        let all = log.render(&LogOptions::default(), now);
        assert_eq!(
            all,
            "kore: container web started (image nginx; simulated, no process runs)\n\
             kore: container web exited with code 1 (Error)\n"
        );
        let tail = LogOptions {
            tail_lines: Some(1),
            timestamps: true,
            ..LogOptions::default()
        };
        assert_eq!(
            log.render(&tail, now),
            "2026-01-01T00:00:05.000000000Z kore: container web exited with code 1 (Error)\n"
        );
        let limited = LogOptions {
            limit_bytes: Some(4),
            ..LogOptions::default()
        };
        assert_eq!(log.render(&limited, now), "kore");
    }
}
