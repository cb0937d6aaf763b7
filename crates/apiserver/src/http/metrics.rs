//! `/metrics`: the server's request, watch and storage metrics under kube-apiserver's names
//! and labels (`staging/src/k8s.io/apiserver/pkg/endpoints/metrics/metrics.go` of 1.33), in
//! the Prometheus text format, so dashboards and alerts written for real API servers read kore.
//!
//! | metric | labels | what kore counts |
//! |---|---|---|
//! | `apiserver_request_total` (counter) | verb, dry_run, group, version, resource, subresource, scope, component, code | every request, when it is answered (a watch when it ends) |
//! | `apiserver_request_duration_seconds` (histogram, Kubernetes' buckets) | the same without code | the time to the response (a watch: its whole life) |
//! | `apiserver_longrunning_requests` (gauge) | verb, group, version, resource, subresource, scope, component | open watches |
//! | `apiserver_current_inflight_requests` (gauge) | request_kind (`readOnly`, `mutating`) | the most requests in flight at once since the last scrape |
//! | `apiserver_watch_events_total` (counter) | group, version, kind | events sent to watchers |
//! | `apiserver_storage_objects` (gauge) | resource (`configmaps`, `deployments.apps`) | objects stored, counted at scrape time |
//!
//! Label values follow Kubernetes: verbs are `GET`, `LIST`, `WATCH`, `POST`, `PUT`, `PATCH`,
//! `APPLY`, `DELETE`, `DELETECOLLECTION`; scope is `resource` for a named object or a create,
//! `namespace` inside a namespace, `cluster` otherwise; a non-resource request has empty
//! group/version/resource, its path as subresource and an empty scope. `component` is
//! `apiserver`. `apiserver_registered_watchers` was removed from Kubernetes (deprecated in
//! 1.23); `apiserver_longrunning_requests{verb="WATCH"}` answers the same question.
//!
//! The request path pays little: a label set is looked up by a hash computed from borrowed
//! strings under a read lock (no allocation once a label set has been seen), and its counter,
//! buckets and sum are atomics. Storage counts are taken only when `/metrics` is scraped.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Instant;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http::{HeaderValue, StatusCode, header};
use http_body_util::BodyExt;

use super::App;
use super::request::{RequestInfo, Target};
use crate::api::body::BodyType;
use crate::api::options::Options;

/// The buckets of `apiserver_request_duration_seconds`, Kubernetes' own.
const DURATION_BUCKETS: [f64; 21] = [
    0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 15.0, 20.0,
    30.0, 45.0, 60.0,
];

/// The `component` label: kube-apiserver's endpoints all report `apiserver`.
const COMPONENT: &str = "apiserver";

const REQUEST_LABELS: [&str; 9] = [
    "verb",
    "dry_run",
    "group",
    "version",
    "resource",
    "subresource",
    "scope",
    "component",
    "code",
];
const LONGRUNNING_LABELS: [&str; 7] = [
    "verb",
    "group",
    "version",
    "resource",
    "subresource",
    "scope",
    "component",
];
const WATCH_EVENT_LABELS: [&str; 3] = ["group", "version", "kind"];

/// A label set's values, in the order of the metric's label names.
type LabelValues = Box<[Box<str>]>;

/// One label set and its cell.
type Cell<C> = (LabelValues, Arc<C>);

/// Summed buckets and the summed nanoseconds of one histogram label set.
type Summed = ([u64; DURATION_BUCKETS.len() + 1], u64);

/// Cells keyed by a label set, found without allocating once the set has been seen.
struct Family<C> {
    cells: RwLock<HashMap<u64, Vec<Cell<C>>>>,
    /// Hashes label values; foldhash rather than SipHash, since every request hashes its nine
    /// labels (SipHash's share of a create was visible in the server's profile), seeded per
    /// process.
    hasher: foldhash::fast::RandomState,
}

impl<C> Default for Family<C> {
    fn default() -> Self {
        Family {
            cells: RwLock::default(),
            hasher: foldhash::fast::RandomState::default(),
        }
    }
}

fn same_labels(stored: &[Box<str>], values: &[&str]) -> bool {
    stored.len() == values.len() && stored.iter().zip(values).all(|(a, b)| &**a == *b)
}

impl<C: Default> Family<C> {
    /// The cell of `values`, created on first use.
    fn get(&self, values: &[&str]) -> Arc<C> {
        let h = self.hasher.hash_one(values);
        {
            let cells = self.cells.read().unwrap_or_else(PoisonError::into_inner);
            if let Some((_, c)) = cells
                .get(&h)
                .and_then(|v| v.iter().find(|(k, _)| same_labels(k, values)))
            {
                return c.clone();
            }
        }
        let mut cells = self.cells.write().unwrap_or_else(PoisonError::into_inner);
        let bucket = cells.entry(h).or_default();
        if let Some((_, c)) = bucket.iter().find(|(k, _)| same_labels(k, values)) {
            return c.clone();
        }
        let cell = Arc::new(C::default());
        bucket.push((values.iter().map(|v| Box::from(*v)).collect(), cell.clone()));
        cell
    }

    /// Every label set and its cell, sorted by labels (a stable exposition).
    fn snapshot(&self) -> Vec<Cell<C>> {
        let cells = self.cells.read().unwrap_or_else(PoisonError::into_inner);
        let mut all: Vec<_> = cells
            .values()
            .flatten()
            .map(|(k, c)| (k.clone(), c.clone()))
            .collect();
        all.sort_by(|a, b| a.0.cmp(&b.0));
        all
    }
}

/// One request label set (code included): its count and its durations.
#[derive(Default)]
struct RequestCell {
    count: AtomicU64,
    /// Per bucket (not cumulative), plus one past the last bound.
    buckets: [AtomicU64; DURATION_BUCKETS.len() + 1],
    sum_nanos: AtomicU64,
}

impl RequestCell {
    fn observe(&self, seconds: f64) {
        self.count.fetch_add(1, Ordering::Relaxed);
        let i = DURATION_BUCKETS
            .iter()
            .position(|b| seconds <= *b)
            .unwrap_or(DURATION_BUCKETS.len());
        self.buckets[i].fetch_add(1, Ordering::Relaxed);
        // Nanoseconds fit a u64 for 584 years of summed request time.
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let nanos = (seconds * 1e9) as u64;
        self.sum_nanos.fetch_add(nanos, Ordering::Relaxed);
    }
}

/// A gauge.
#[derive(Default)]
struct Gauge(AtomicI64);

/// A counter.
#[derive(Default)]
pub(crate) struct Counter(AtomicU64);

impl Counter {
    /// Adds one.
    pub(crate) fn inc(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

/// The in-flight requests of one kind and the most seen since the last scrape.
#[derive(Default)]
struct Inflight {
    now: AtomicI64,
    peak: AtomicI64,
}

impl Inflight {
    fn enter(&self) {
        let n = self.now.fetch_add(1, Ordering::Relaxed) + 1;
        self.peak.fetch_max(n, Ordering::Relaxed);
    }

    fn leave(&self) {
        self.now.fetch_sub(1, Ordering::Relaxed);
    }

    /// The peak since the last call, which starts the next period at the current count.
    fn take_peak(&self) -> i64 {
        let now = self.now.load(Ordering::Relaxed);
        self.peak.swap(now, Ordering::Relaxed).max(now)
    }
}

/// The server's metrics (one per server; tests running several servers keep them apart).
#[derive(Default)]
pub struct Metrics {
    requests: Family<RequestCell>,
    longrunning: Family<Gauge>,
    watch_events: Family<Counter>,
    read_only: Inflight,
    mutating: Inflight,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Metrics {
    /// The counter of events sent to watchers of `group/version` `kind`; a watch looks it up
    /// once and counts each event on it.
    pub(crate) fn watch_events(&self, group: &str, version: &str, kind: &str) -> Arc<Counter> {
        self.watch_events.get(&[group, version, kind])
    }
}

/// The labels of one request, borrowed from its [`RequestInfo`].
struct Labels<'a> {
    verb: &'static str,
    dry_run: &'static str,
    group: &'a str,
    version: &'a str,
    resource: &'a str,
    subresource: &'a str,
    scope: &'static str,
    long_running: bool,
    mutating: bool,
}

impl<'a> Labels<'a> {
    fn of(info: &'a RequestInfo, method: &http::Method) -> Labels<'a> {
        let Target::Resource(p) = &info.target else {
            return Labels {
                verb: method_verb(method),
                dry_run: "",
                group: "",
                version: "",
                resource: "",
                subresource: &info.path,
                scope: "",
                long_running: false,
                mutating: !matches!(*method, http::Method::GET | http::Method::HEAD),
            };
        };
        let apply = matches!(&info.options, Ok(Options::Patch(o)) if o.patch_type == Ok(BodyType::ApplyPatch));
        let verb = match info.verb.as_str() {
            "get" => "GET",
            "list" => "LIST",
            "watch" => "WATCH",
            "create" => "POST",
            "update" => "PUT",
            "patch" if apply => "APPLY",
            "patch" => "PATCH",
            "delete" => "DELETE",
            "deletecollection" => "DELETECOLLECTION",
            _ => method_verb(method),
        };
        // Kubernetes' `CleanScope`: a named object or a create is `resource`.
        let scope = if p.name.is_some() || info.verb == "create" {
            "resource"
        } else if p.namespace.is_some() {
            "namespace"
        } else {
            "cluster"
        };
        Labels {
            verb,
            dry_run: if info.query.get("dryRun").is_some_and(|v| v == "All") {
                "All"
            } else {
                ""
            },
            group: &p.group,
            version: &p.version,
            resource: &p.resource,
            subresource: p.subresource.as_deref().unwrap_or(""),
            scope,
            long_running: verb == "WATCH",
            mutating: matches!(
                verb,
                "POST" | "PUT" | "PATCH" | "APPLY" | "DELETE" | "DELETECOLLECTION"
            ),
        }
    }
}

fn method_verb(method: &http::Method) -> &'static str {
    match *method {
        http::Method::GET => "GET",
        http::Method::HEAD => "HEAD",
        http::Method::POST => "POST",
        http::Method::PUT => "PUT",
        http::Method::PATCH => "PATCH",
        http::Method::DELETE => "DELETE",
        http::Method::OPTIONS => "OPTIONS",
        http::Method::CONNECT => "CONNECT",
        _ => "other",
    }
}

/// Where one request's outcome is recorded: on the response, or when a watch's body ends.
struct Record {
    cell: Arc<RequestCell>,
    started: Instant,
    longrunning: Option<Arc<Gauge>>,
}

impl Drop for Record {
    fn drop(&mut self) {
        self.cell.observe(self.started.elapsed().as_secs_f64());
        if let Some(g) = &self.longrunning {
            g.0.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// The layer that counts and times every request (right after parsing, so 401s and 403s
/// count too, as kube-apiserver's do).
pub(crate) async fn measure(State(app): State<Arc<App>>, req: Request, next: Next) -> Response {
    let Some(info) = req.extensions().get::<Arc<RequestInfo>>().cloned() else {
        return next.run(req).await;
    };
    let started = Instant::now();
    let method = req.method().clone();
    let labels = Labels::of(&info, &method);
    let m = &app.metrics;
    let inflight = if labels.mutating {
        &m.mutating
    } else {
        &m.read_only
    };
    if !labels.long_running {
        inflight.enter();
    }
    let resp = next.run(req).await;
    if !labels.long_running {
        inflight.leave();
    }
    let status = resp.status().as_u16();
    let other_code;
    let code = match code_label(status) {
        Some(c) => c,
        None => {
            other_code = status.to_string();
            other_code.as_str()
        }
    };
    let cell = m.requests.get(&[
        labels.verb,
        labels.dry_run,
        labels.group,
        labels.version,
        labels.resource,
        labels.subresource,
        labels.scope,
        COMPONENT,
        code,
    ]);
    if labels.long_running && resp.status().is_success() {
        let gauge = m.longrunning.get(&[
            labels.verb,
            labels.group,
            labels.version,
            labels.resource,
            labels.subresource,
            labels.scope,
            COMPONENT,
        ]);
        gauge.0.fetch_add(1, Ordering::Relaxed);
        let record = Record {
            cell,
            started,
            longrunning: Some(gauge),
        };
        let (parts, body) = resp.into_parts();
        let body = body.map_frame(move |f| {
            let _ = &record;
            f
        });
        return Response::from_parts(parts, Body::new(body));
    }
    drop(Record {
        cell,
        started,
        longrunning: None,
    });
    resp
}

/// The code label of the usual codes, without formatting on the request path.
fn code_label(code: u16) -> Option<&'static str> {
    Some(match code {
        200 => "200",
        201 => "201",
        202 => "202",
        204 => "204",
        400 => "400",
        401 => "401",
        403 => "403",
        404 => "404",
        405 => "405",
        406 => "406",
        409 => "409",
        410 => "410",
        413 => "413",
        415 => "415",
        422 => "422",
        429 => "429",
        500 => "500",
        503 => "503",
        504 => "504",
        _ => return None,
    })
}

/// `GET /metrics`.
pub(crate) async fn serve(State(app): State<Arc<App>>) -> Response {
    let mut resp = (StatusCode::OK, render(&app)).into_response();
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
    );
    resp
}

fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn label_text(names: &[&str], values: &[Box<str>]) -> String {
    let mut s = String::new();
    for (i, (n, v)) in names.iter().zip(values).enumerate() {
        if i > 0 {
            s.push(',');
        }
        let _ = write!(s, "{n}=\"{}\"", escape(v));
    }
    s
}

/// The whole exposition.
fn render(app: &App) -> String {
    let m = &app.metrics;
    let mut out = String::new();
    let requests = m.requests.snapshot();

    out.push_str("# HELP apiserver_request_total Counter of apiserver requests broken out for each verb, dry run value, group, version, resource, scope, component, and HTTP response code.\n# TYPE apiserver_request_total counter\n");
    for (labels, cell) in &requests {
        let _ = writeln!(
            out,
            "apiserver_request_total{{{}}} {}",
            label_text(&REQUEST_LABELS, labels),
            cell.count.load(Ordering::Relaxed)
        );
    }

    // The histogram's label sets are the counter's without the code: sum the cells per set.
    let mut durations: Vec<(LabelValues, Summed)> = Vec::new();
    for (labels, cell) in &requests {
        let key: LabelValues = labels[..labels.len() - 1].into();
        let idx = match durations.iter().position(|(k, _)| *k == key) {
            Some(i) => i,
            None => {
                durations.push((key, ([0; DURATION_BUCKETS.len() + 1], 0)));
                durations.len() - 1
            }
        };
        let (buckets, sum_nanos) = &mut durations[idx].1;
        for (sum, b) in buckets.iter_mut().zip(&cell.buckets) {
            *sum += b.load(Ordering::Relaxed);
        }
        *sum_nanos += cell.sum_nanos.load(Ordering::Relaxed);
    }
    out.push_str("# HELP apiserver_request_duration_seconds Response latency distribution in seconds for each verb, dry run value, group, version, resource, subresource, scope and component.\n# TYPE apiserver_request_duration_seconds histogram\n");
    for (labels, (buckets, sum_nanos)) in &durations {
        let l = label_text(&REQUEST_LABELS[..8], labels);
        let mut cumulative = 0;
        for (bound, n) in DURATION_BUCKETS.iter().zip(buckets) {
            cumulative += n;
            let _ = writeln!(
                out,
                "apiserver_request_duration_seconds_bucket{{{l},le=\"{bound}\"}} {cumulative}"
            );
        }
        cumulative += buckets[DURATION_BUCKETS.len()];
        let _ = writeln!(
            out,
            "apiserver_request_duration_seconds_bucket{{{l},le=\"+Inf\"}} {cumulative}"
        );
        #[allow(clippy::cast_precision_loss)]
        let sum = *sum_nanos as f64 / 1e9;
        let _ = writeln!(out, "apiserver_request_duration_seconds_sum{{{l}}} {sum}");
        let _ = writeln!(
            out,
            "apiserver_request_duration_seconds_count{{{l}}} {cumulative}"
        );
    }

    out.push_str("# HELP apiserver_longrunning_requests Gauge of all active long-running apiserver requests broken out by verb, group, version, resource, scope and component. Not all requests are tracked this way.\n# TYPE apiserver_longrunning_requests gauge\n");
    for (labels, g) in m.longrunning.snapshot() {
        let _ = writeln!(
            out,
            "apiserver_longrunning_requests{{{}}} {}",
            label_text(&LONGRUNNING_LABELS, &labels),
            g.0.load(Ordering::Relaxed)
        );
    }

    out.push_str("# HELP apiserver_current_inflight_requests Maximal number of currently used inflight request limit of this apiserver per request kind in last second.\n# TYPE apiserver_current_inflight_requests gauge\n");
    let _ = writeln!(
        out,
        "apiserver_current_inflight_requests{{request_kind=\"mutating\"}} {}",
        m.mutating.take_peak()
    );
    let _ = writeln!(
        out,
        "apiserver_current_inflight_requests{{request_kind=\"readOnly\"}} {}",
        m.read_only.take_peak()
    );

    out.push_str("# HELP apiserver_watch_events_total Number of events sent in watch clients\n# TYPE apiserver_watch_events_total counter\n");
    for (labels, c) in m.watch_events.snapshot() {
        let _ = writeln!(
            out,
            "apiserver_watch_events_total{{{}}} {}",
            label_text(&WATCH_EVENT_LABELS, &labels),
            c.0.load(Ordering::Relaxed)
        );
    }

    out.push_str("# HELP apiserver_storage_objects Number of stored objects at the time of last check split by kind. In case of a fetching error, the value will be -1.\n# TYPE apiserver_storage_objects gauge\n");
    let mut counted: Vec<(String, usize)> = Vec::new();
    let catalog = app.registry.catalog();
    for res in catalog
        .resources()
        .iter()
        .filter(|r| r.verbs.contains(&"list"))
    {
        let name = if res.group.is_empty() {
            res.plural.clone()
        } else {
            format!("{}.{}", res.plural, res.group)
        };
        if counted.iter().any(|(n, _)| *n == name) {
            continue;
        }
        let n = app
            .registry
            .store()
            .keys(&format!("{}/", res.storage_prefix))
            .len();
        counted.push((name, n));
    }
    counted.sort();
    for (name, n) in counted {
        let _ = writeln!(
            out,
            "apiserver_storage_objects{{resource=\"{}\"}} {n}",
            escape(&name)
        );
    }
    out
}
