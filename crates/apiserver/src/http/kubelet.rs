//! The kubelet's subresources at the edge: `pods/log` framed as `text/plain` (streamed while
//! the container runs when `follow=true`), and the connect subresources answered with the
//! registry's refusal. What they say is `registry/rest/kubelet.rs`.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use http::{HeaderValue, Method, StatusCode, header};

use super::App;
use super::error::ApiError;
use super::request::Query;
use crate::registry::Resource;
use crate::registry::rest::kubelet::{LogOptions, PodLog};

/// How often a follower looks at the pod again.
const FOLLOW_POLL: Duration = Duration::from_millis(100);

fn text(body: Body) -> Response {
    let mut resp = Response::new(body);
    *resp.status_mut() = StatusCode::OK;
    resp.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
    resp
}

/// Serves `pods/{name}/{sub}` for `log`, `exec`, `attach`, `portforward`, `proxy` and
/// `nodes/{name}/proxy`.
pub(super) async fn serve(
    app: &Arc<App>,
    method: &Method,
    res: &Arc<Resource>,
    (ns, name, sub): (Option<&str>, &str, &str),
    q: &Query,
) -> Result<Response, ApiError> {
    if sub != "log" {
        return Err(app.registry.refuse_connect(res, ns, name, sub));
    }
    if method != Method::GET {
        return Err(ApiError::MethodNotAllowed {
            verb: method.to_string(),
            resource: "pods/log".into(),
        });
    }
    let opts = LogOptions::parse(q)?;
    let log = app.registry.pod_log(res, ns, name, &opts)?;
    let first = log.render(&opts, jiff::Timestamp::now());
    if !(opts.follow && log.running) {
        return Ok(text(Body::from(first)));
    }
    // Follow: send what there is, then the lines that come, until the container stops, the
    // pod goes (or is replaced), or the server stops.
    let (app, res) = (Arc::clone(app), Arc::clone(res));
    let (ns, name) = (ns.map(String::from), name.to_string());
    let start = Follow {
        sent: log.lines.len(),
        uid: log.uid.clone(),
        first: Some(first),
        done: false,
    };
    let stream = futures::stream::unfold(start, move |mut f| {
        let (app, res, ns, name, opts) = (
            Arc::clone(&app),
            Arc::clone(&res),
            ns.clone(),
            name.clone(),
            opts.clone(),
        );
        async move {
            if let Some(first) = f.first.take() {
                return Some((Ok::<Bytes, std::io::Error>(Bytes::from(first)), f));
            }
            loop {
                if f.done {
                    return None;
                }
                tokio::select! {
                    () = app.shutdown.cancelled() => return None,
                    () = tokio::time::sleep(FOLLOW_POLL) => {}
                }
                let Ok(now) = app.registry.pod_log(&res, ns.as_deref(), &name, &opts) else {
                    return None;
                };
                if now.uid != f.uid {
                    return None;
                }
                f.done = !now.running;
                if now.lines.len() > f.sent {
                    let fresh = PodLog {
                        lines: now.lines[f.sent..].to_vec(),
                        ..now
                    };
                    f.sent += fresh.lines.len();
                    let all = LogOptions {
                        tail_lines: None,
                        since_seconds: None,
                        since_time: None,
                        ..opts.clone()
                    };
                    let chunk = fresh.render(&all, jiff::Timestamp::now());
                    return Some((Ok(Bytes::from(chunk)), f));
                }
            }
        }
    });
    Ok(text(Body::from_stream(stream)))
}

/// A follower's progress.
struct Follow {
    /// Lines sent so far.
    sent: usize,
    /// The pod followed.
    uid: String,
    /// The first chunk, not sent yet.
    first: Option<String>,
    /// The container stopped: end after this.
    done: bool,
}
