//! The Stage engine: the compiled Stages of one kind ([`Lifecycle`]), which one applies to an
//! object and when ([`Tracker`]), and what applying it writes ([`Plan`]).
//!
//! As kwok's stage controller: when an object changes, the Stages whose selector matches it
//! are found; one is chosen by weight (a random pick weighted by `weight`/`weightFrom`; all
//! alike when the weights are 0); it is applied after its delay (`durationMilliseconds` or
//! `durationFrom`, plus a random jitter up to `jitterDuration*`), unless the object changes
//! first, in which case the choice is made again.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use rand::Rng as _;
use serde_json::{Value, json};
use tokio::time::Instant;

use super::defaults::{self, Native};
use super::select::{self, Labels, Query, Selector};
use super::template::{self, Facts};
use super::{ExpressionFrom, Stage, StageNext};

/// Reads a Go duration (`1h2m3.5s`, `500ms`, `10s`) as Go's `time.ParseDuration` does;
/// `None` for anything else or a negative one.
pub fn parse_go_duration(s: &str) -> Option<Duration> {
    let nanos = go_parse_duration::parse_duration(s.trim()).ok()?;
    u64::try_from(nanos).ok().map(Duration::from_nanos)
}

/// A Stage ready to be matched and applied.
#[derive(Debug)]
pub struct Compiled {
    /// The Stage's name.
    pub name: String,
    /// The native behaviour it stands for, when it is one of kore's unchanged defaults.
    pub native: Option<Native>,
    selector: Selector,
    weight: i64,
    weight_from: Option<Query>,
    delay: Option<Duration>,
    delay_from: Option<Query>,
    jitter: Option<Duration>,
    jitter_from: Option<Query>,
    /// What it does.
    pub next: StageNext,
    /// Whether to look for the next Stage at once.
    pub immediate: bool,
}

fn millis(ms: Option<i64>) -> Option<Duration> {
    ms.map(|ms| Duration::from_millis(u64::try_from(ms).unwrap_or(0)))
}

fn query(from: Option<&ExpressionFrom>) -> Result<Option<Query>, select::Error> {
    match from {
        None => Ok(None),
        Some(f) if f.cel.is_some() && f.path().is_none() => Err(select::Error::Cel),
        Some(f) => f.path().map(Query::parse).transpose(),
    }
}

impl Compiled {
    /// Compiles `stage`; its selector and paths must be in the subset kore reads.
    pub fn new(stage: &Stage) -> Result<Compiled, select::Error> {
        let spec = &stage.spec;
        let name = stage.metadata.name.clone().unwrap_or_default();
        let selector = match &spec.selector {
            Some(s) => Selector::compile(s)?,
            None => Selector::default(),
        };
        let delay = spec.delay.clone().unwrap_or_default();
        Ok(Compiled {
            native: defaults::native(&name, spec),
            name,
            selector,
            weight: spec.weight,
            weight_from: query(spec.weight_from.as_ref())?,
            delay: millis(delay.duration_milliseconds),
            delay_from: query(delay.duration_from.as_ref())?,
            jitter: millis(delay.jitter_duration_milliseconds),
            jitter_from: query(delay.jitter_duration_from.as_ref())?,
            next: spec.next.clone().unwrap_or_default(),
            immediate: spec.immediate_next_stage.unwrap_or(false),
        })
    }

    fn weight_of(&self, object: &Value) -> i64 {
        let from = self
            .weight_from
            .as_ref()
            .and_then(|q| select::read(q, object))
            .and_then(|v| match v {
                Value::Number(n) => n.as_i64(),
                Value::String(s) => s.trim().parse().ok(),
                _ => None,
            });
        from.unwrap_or(self.weight)
    }

    /// The delay before the Stage applies to `object`.
    pub fn delay_of(&self, object: &Value, now: Timestamp) -> Duration {
        let read = |q: &Option<Query>, default: Option<Duration>| -> Option<Duration> {
            let Some(q) = q else { return default };
            match select::read(q, object) {
                None => default,
                Some(Value::String(s)) if s.is_empty() => None,
                Some(Value::String(s)) => {
                    if let Ok(t) = s.parse::<Timestamp>() {
                        Some(t.duration_since(now).try_into().unwrap_or(Duration::ZERO))
                    } else {
                        parse_go_duration(s).or(default)
                    }
                }
                Some(_) => default,
            }
        };
        let Some(base) = read(&self.delay_from, self.delay) else {
            return Duration::ZERO;
        };
        let Some(jitter) = read(&self.jitter_from, self.jitter) else {
            return base;
        };
        if jitter <= base {
            return jitter;
        }
        let extra = rand::rng().random_range(0..=(jitter - base).as_millis());
        base + Duration::from_millis(u64::try_from(extra).unwrap_or(0))
    }
}

/// The Stages of one kind.
#[derive(Debug, Default)]
pub struct Lifecycle {
    /// Those interpreted (every Stage that is not an intact native default).
    interpreted: Vec<Arc<Compiled>>,
    /// The native behaviours whose default Stages are all present and unchanged.
    natives: HashSet<Native>,
    /// Stages that could not be compiled, with why.
    pub rejected: Vec<(String, String)>,
}

fn core_group(g: &str) -> bool {
    g.is_empty() || g == "v1" || g == "core"
}

impl Lifecycle {
    /// The Stages of `stages` for `kind` in the core group.
    pub fn new(stages: &[Arc<Stage>], kind: &str) -> Lifecycle {
        let mut compiled = Vec::new();
        let mut rejected = Vec::new();
        for s in stages {
            let r = &s.spec.resource_ref;
            if r.kind != kind || !core_group(&r.api_group) || s.spec.selector.is_none() {
                continue;
            }
            match Compiled::new(s) {
                Ok(c) => compiled.push(Arc::new(c)),
                Err(e) => {
                    rejected.push((s.metadata.name.clone().unwrap_or_default(), e.to_string()))
                }
            }
        }
        let present: HashMap<&str, Option<Native>> = compiled
            .iter()
            .map(|c| (c.name.as_str(), c.native))
            .collect();
        let natives: HashSet<Native> = [
            Native::Create,
            Native::Ready,
            Native::Complete,
            Native::Delete,
        ]
        .into_iter()
        .filter(|n| defaults::names_of(*n).all(|name| present.get(name) == Some(&Some(*n))))
        .collect();
        let interpreted = compiled
            .into_iter()
            .filter(|c| !c.native.is_some_and(|n| natives.contains(&n)))
            .collect();
        Lifecycle {
            interpreted,
            natives,
            rejected,
        }
    }

    /// Whether `native` runs as code.
    pub fn runs_natively(&self, native: Native) -> bool {
        self.natives.contains(&native)
    }

    /// The interpreted Stages that may match an object with these labels and annotations.
    fn candidates(&self, labels: Labels<'_>) -> Vec<&Arc<Compiled>> {
        self.interpreted
            .iter()
            .filter(|c| c.selector.may_match(labels))
            .collect()
    }

    /// The Stage to apply to `object` (kwok's weighted choice among those that match).
    fn choose(&self, candidates: Vec<&Arc<Compiled>>, object: &Value) -> Option<Arc<Compiled>> {
        let matched: Vec<&Arc<Compiled>> = candidates
            .into_iter()
            .filter(|c| c.selector.matches(object))
            .collect();
        match matched.len() {
            0 => return None,
            1 => return Some(matched[0].clone()),
            _ => {}
        }
        let weights: Vec<i64> = matched.iter().map(|c| c.weight_of(object).max(0)).collect();
        let total: i64 = weights.iter().sum();
        let mut rng = rand::rng();
        if total == 0 {
            return Some(matched[rng.random_range(0..matched.len())].clone());
        }
        let mut off = rng.random_range(0..total);
        for (c, w) in matched.iter().zip(&weights) {
            if off < *w {
                return Some((*c).clone());
            }
            off -= w;
        }
        matched.last().map(|c| (*c).clone())
    }
}

/// What to do with an object now.
#[derive(Debug)]
pub enum Decision {
    /// Apply this Stage; the object as JSON comes along.
    Apply(Arc<Compiled>, Value),
    /// A Stage is due after this long.
    Wait(Duration),
    /// No interpreted Stage matches: the native lifecycle (if any) decides.
    Native,
    /// The cache is older than this kubelet's last write: wait for the watch event.
    Stale,
}

struct Pending {
    rv: String,
    stage: Arc<Compiled>,
    due: Instant,
}

/// Per object: the Stage chosen for its current version and when it is due, and the version
/// this kubelet last wrote.
#[derive(Default)]
pub struct Tracker {
    pending: Mutex<HashMap<String, Pending>>,
    written: Mutex<HashMap<String, u64>>,
}

impl std::fmt::Debug for Tracker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tracker").finish_non_exhaustive()
    }
}

impl Tracker {
    /// Decides for the object `uid` at `rv`; `object` makes its JSON when a selector needs it.
    pub fn decide(
        &self,
        lifecycle: &Lifecycle,
        uid: &str,
        rv: &str,
        labels: Labels<'_>,
        object: impl FnOnce() -> Value,
    ) -> Decision {
        if let (Some(w), Ok(now)) = (
            self.written
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .get(uid)
                .copied(),
            rv.parse::<u64>(),
        ) && now < w
        {
            return Decision::Stale;
        }
        let candidates = lifecycle.candidates(labels);
        if candidates.is_empty() {
            self.forget_pending(uid);
            return Decision::Native;
        }
        let object = object();
        let mut pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
        let now = Instant::now();
        if let Some(p) = pending.get(uid)
            && p.rv == rv
            && candidates.iter().any(|c| Arc::ptr_eq(c, &p.stage))
        {
            if p.due <= now {
                let stage = p.stage.clone();
                pending.remove(uid);
                return Decision::Apply(stage, object);
            }
            return Decision::Wait(p.due - now);
        }
        let Some(stage) = lifecycle.choose(candidates, &object) else {
            pending.remove(uid);
            return Decision::Native;
        };
        let delay = stage.delay_of(&object, Timestamp::now());
        if delay.is_zero() {
            pending.remove(uid);
            return Decision::Apply(stage, object);
        }
        pending.insert(
            uid.to_string(),
            Pending {
                rv: rv.to_string(),
                stage,
                due: now + delay,
            },
        );
        Decision::Wait(delay)
    }

    fn forget_pending(&self, uid: &str) {
        let mut pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
        if !pending.is_empty() {
            pending.remove(uid);
        }
    }

    /// Remembers the version this kubelet wrote last.
    pub fn wrote(&self, uid: &str, rv: Option<&str>) {
        if let Some(rv) = rv.and_then(|r| r.parse::<u64>().ok()) {
            self.written
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(uid.to_string(), rv);
        }
    }

    /// Forgets a deleted object.
    pub fn forget(&self, uid: &str) {
        self.forget_pending(uid);
        self.written
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(uid);
    }
}

/// How a patch is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchKind {
    /// JSON merge patch.
    Merge,
    /// Strategic merge patch.
    Strategic,
    /// JSON patch.
    Json,
}

/// One patch to send.
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedPatch {
    /// The subresource (`status`) or empty.
    pub subresource: String,
    /// Its kind.
    pub kind: PatchKind,
    /// Its body.
    pub body: Value,
}

/// What applying a Stage writes, in order (kwok's): the event, the finalizers, the patches
/// (or, when there are none, the status from `statusTemplate`), then the delete.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Plan {
    /// (type, reason, message).
    pub event: Option<(String, String, String)>,
    /// The object's new finalizers.
    pub finalizers: Option<Vec<String>>,
    /// The patches.
    pub patches: Vec<PlannedPatch>,
    /// Whether to delete the object.
    pub delete: bool,
}

/// Why a Stage could not be planned (a template failed).
pub type PlanError = template::Error;

fn wrap(root: &str, v: Value) -> Value {
    if root.is_empty() {
        v
    } else {
        json!({ root: v })
    }
}

/// Plans `stage` on `object` (a pod or a node as JSON).
pub fn plan(stage: &Compiled, object: &Value, facts: &Facts) -> Result<Plan, PlanError> {
    let next = &stage.next;
    let mut plan = Plan {
        delete: next.delete,
        ..Plan::default()
    };
    if let Some(e) = &next.event {
        let message = if e.message.contains("{{") {
            template::render_text(&e.message, object, facts)?
        } else {
            e.message.clone()
        };
        let ty = if e.type_.is_empty() {
            "Normal"
        } else {
            &e.type_
        };
        plan.event = Some((ty.to_string(), e.reason.clone(), message));
    }
    if let Some(f) = &next.finalizers {
        let mut have: Vec<String> = object["metadata"]["finalizers"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|v| v.as_str().map(String::from))
            .collect();
        let before = have.clone();
        if f.empty {
            have.clear();
        }
        for r in f.remove.iter().flatten() {
            have.retain(|h| *h != r.value);
        }
        for a in f.add.iter().flatten() {
            if !have.contains(&a.value) {
                have.push(a.value.clone());
            }
        }
        if have != before {
            plan.finalizers = Some(have);
        }
    }
    for p in next.patches.iter().flatten() {
        let Some(body) = template::render(&p.template, object, facts)? else {
            continue;
        };
        let kind = match p.type_.as_deref() {
            Some("merge") => PatchKind::Merge,
            Some("json") => PatchKind::Json,
            _ => PatchKind::Strategic,
        };
        let body = if kind == PatchKind::Json {
            // A JSON patch's paths are under the root.
            let prefix = if p.root.is_empty() {
                String::new()
            } else {
                format!("/{}", p.root)
            };
            let ops: Vec<Value> = body
                .as_array()
                .into_iter()
                .flatten()
                .map(|op| {
                    let mut op = op.clone();
                    if let Some(path) = op["path"].as_str() {
                        op["path"] = json!(format!("{prefix}{path}"));
                    }
                    op
                })
                .collect();
            Value::Array(ops)
        } else {
            wrap(&p.root, body)
        };
        plan.patches.push(PlannedPatch {
            subresource: p.subresource.clone(),
            kind,
            body,
        });
    }
    // As kwok: the status template is used only when there are no patches.
    if next.patches.as_ref().is_none_or(Vec::is_empty)
        && !next.status_template.is_empty()
        && let Some(status) = template::render(&next.status_template, object, facts)?
    {
        plan.patches.push(PlannedPatch {
            subresource: next
                .status_subresource
                .clone()
                .unwrap_or_else(|| "status".to_string()),
            kind: PatchKind::Strategic,
            body: json!({ "status": status }),
        });
    }
    Ok(plan)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stage(v: Value) -> Stage {
        serde_json::from_value(v).expect("stage")
    }

    #[test]
    fn go_durations_read() {
        assert_eq!(parse_go_duration("1m30s"), Some(Duration::from_secs(90)));
        assert_eq!(parse_go_duration("250ms"), Some(Duration::from_millis(250)));
        assert_eq!(parse_go_duration("soon"), None);
        assert_eq!(parse_go_duration(""), None);
    }

    #[test]
    fn delays_come_from_the_object_else_the_stage() {
        let s = stage(json!({
            "metadata": {"name": "s"},
            "spec": {
                "resourceRef": {"kind": "Pod"},
                "selector": {},
                "delay": {
                    "durationMilliseconds": 1000,
                    "durationFrom": {"expressionFrom": ".metadata.annotations[\"d\"]"},
                },
            },
        }));
        let c = Compiled::new(&s).expect("compiles");
        let now = Timestamp::now();
        assert_eq!(c.delay_of(&json!({}), now), Duration::from_secs(1));
        let o = json!({"metadata": {"annotations": {"d": "250ms"}}});
        assert_eq!(c.delay_of(&o, now), Duration::from_millis(250));
        let at = now + k8s_openapi::jiff::SignedDuration::from_secs(2);
        let o = json!({"metadata": {"annotations": {"d": at.to_string()}}});
        assert_eq!(c.delay_of(&o, now), Duration::from_secs(2));
    }

    #[test]
    fn a_plan_renders_event_finalizers_patches_and_status() {
        let s = stage(json!({
            "metadata": {"name": "s"},
            "spec": {
                "resourceRef": {"kind": "Pod"},
                "selector": {},
                "next": {
                    "event": {"type": "Warning", "reason": "Boom", "message": "pod {{ .metadata.name }}"},
                    "finalizers": {"add": [{"value": "a"}], "remove": [{"value": "b"}]},
                    "patches": [{"root": "metadata", "type": "merge", "template": "labels:\n  x: z"}],
                    "statusTemplate": "phase: Failed",
                },
            },
        }));
        let c = Compiled::new(&s).expect("compiles");
        let pod = json!({"metadata": {"name": "p", "finalizers": ["b", "c"]}});
        let p = plan(&c, &pod, &Facts::default()).expect("plans");
        assert_eq!(
            p.event,
            Some(("Warning".into(), "Boom".into(), "pod p".into()))
        );
        assert_eq!(p.finalizers, Some(vec!["c".to_string(), "a".to_string()]));
        assert_eq!(
            p.patches[0].body,
            json!({"metadata": {"labels": {"x": "z"}}})
        );
        assert_eq!(p.patches[0].kind, PatchKind::Merge);
        // As kwok: with patches, the status template is not used.
        assert_eq!(p.patches.len(), 1);
        let mut s = s.clone();
        if let Some(next) = s.spec.next.as_mut() {
            next.patches = None;
        }
        let p = plan(
            &Compiled::new(&s).expect("compiles"),
            &pod,
            &Facts::default(),
        )
        .expect("plans");
        assert_eq!(p.patches[0].body, json!({"status": {"phase": "Failed"}}));
        assert_eq!(p.patches[0].subresource, "status");
        assert_eq!(p.patches[0].kind, PatchKind::Strategic);
    }
}
