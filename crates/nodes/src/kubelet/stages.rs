//! Applying interpreted Stages to pods and nodes: the API calls of a [`Plan`], and the node
//! side of the kubelets ([`NodeStages`], a controller over simulated Nodes).

use std::sync::{Arc, Mutex, PoisonError};

use k8s_openapi::api::core::v1::Node;
use kore_runtime::controller::{Action, Controller, ReconcileError, Reconciler, Request};
use kore_runtime::events::{Event, EventType, Reporter};
use kore_runtime::{Informers, ObjectKey, Recorder, Store};
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use kube::{Resource, ResourceExt as _};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::{Error, is_simulated};
use crate::stage::Stage;
use crate::stage::engine::{self, Compiled, Decision, Lifecycle, PatchKind, Plan, Tracker};
use crate::stage::select::Labels;
use crate::stage::template::Facts;

/// The (uid, resourceVersion) of every Stage a [`Lifecycle`] was compiled from.
type Versions = Vec<(String, String)>;

fn version(s: &Stage) -> (&str, &str) {
    (
        s.metadata.uid.as_deref().unwrap_or_default(),
        s.metadata.resource_version.as_deref().unwrap_or_default(),
    )
}

/// The Stages of one kind, compiled again only when a Stage changes.
#[derive(Default)]
pub(crate) struct Lifecycles {
    cache: Mutex<(Versions, Arc<Lifecycle>)>,
}

impl Lifecycles {
    /// The current Lifecycle for `kind` from `stages`.
    pub(crate) fn get(&self, stages: &Store<Stage>, kind: &str) -> Arc<Lifecycle> {
        let mut list = stages.list();
        // The store lists in no particular order.
        list.sort_by(|a, b| a.metadata.uid.cmp(&b.metadata.uid));
        let mut cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
        let same = cache.0.len() == list.len()
            && cache
                .0
                .iter()
                .zip(&list)
                .all(|((u, r), s)| (u.as_str(), r.as_str()) == version(s));
        if !same {
            let lifecycle = Lifecycle::new(&list, kind);
            for (name, why) in &lifecycle.rejected {
                tracing::warn!(stage = %name, error = %why, "a Stage is ignored");
            }
            let key: Versions = list
                .iter()
                .map(|s| {
                    let (u, r) = version(s);
                    (u.to_string(), r.to_string())
                })
                .collect();
            *cache = (key, Arc::new(lifecycle));
        }
        cache.1.clone()
    }
}

/// The object as the templates and selectors see it.
pub(crate) fn as_json<K: Serialize>(object: &K) -> Value {
    serde_json::to_value(object).unwrap_or(Value::Null)
}

/// Sends `plan` for `object`; answers the resourceVersion of the last write.
pub(crate) async fn execute<K>(
    api: Api<K>,
    recorder: &Recorder,
    object: &K,
    plan: Plan,
) -> Result<Option<String>, kube::Error>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Serialize + std::fmt::Debug,
{
    let name = object.name_any();
    let uid = object.meta().uid.clone();
    if let Some((ty, reason, message)) = &plan.event {
        let event = Event {
            type_: if ty == "Warning" {
                EventType::Warning
            } else {
                EventType::Normal
            },
            reason: reason.clone(),
            action: reason.clone(),
            note: (!message.is_empty()).then(|| message.clone()),
            related: None,
        };
        if let Err(e) = recorder.publish(&event, &object.object_ref(&())).await {
            tracing::debug!(error = %e, "a Stage's event was not recorded");
        }
    }
    let mut last = None;
    let pp = PatchParams::default();
    if let Some(finalizers) = plan.finalizers {
        let body = json!({"metadata": {"uid": uid, "finalizers": finalizers}});
        let done = api.patch(&name, &pp, &Patch::Merge(body)).await?;
        last = done.meta().resource_version.clone();
    }
    for p in plan.patches {
        let mut body = p.body;
        if p.kind != PatchKind::Json
            && let Some(o) = body.as_object_mut()
        {
            // The write applies to this object only, not to a new one of the same name.
            let meta = o.entry("metadata").or_insert_with(|| json!({}));
            if let Some(m) = meta.as_object_mut() {
                m.insert("uid".into(), json!(uid));
            }
        }
        let patch = match p.kind {
            PatchKind::Merge => Patch::Merge(body),
            PatchKind::Strategic => Patch::Strategic(body),
            PatchKind::Json => {
                tracing::warn!(object = %name, "JSON patches of Stages are not supported; skipped");
                continue;
            }
        };
        let done = match p.subresource.as_str() {
            "" => api.patch(&name, &pp, &patch).await,
            "status" => api.patch_status(&name, &pp, &patch).await,
            sub => api.patch_subresource(sub, &name, &pp, &patch).await,
        };
        match done {
            Ok(o) => last = o.meta().resource_version.clone(),
            Err(kube::Error::Api(s)) if matches!(s.code, 404 | 409) => return Ok(None),
            Err(e) => return Err(e),
        }
    }
    if plan.delete {
        let mut dp = DeleteParams {
            grace_period_seconds: Some(0),
            ..DeleteParams::default()
        };
        dp.preconditions = Some(kube::api::Preconditions {
            uid,
            resource_version: None,
        });
        match api.delete(&name, &dp).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if matches!(s.code, 404 | 409) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(last)
}

/// Plans `stage` and sends it; a template that fails is logged and the Stage skipped.
pub(crate) async fn apply<K>(
    api: Api<K>,
    recorder: &Recorder,
    tracker: &Tracker,
    object: &K,
    stage: &Compiled,
    json: &Value,
    facts: &Facts,
) -> Result<Action, Error>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Serialize + std::fmt::Debug,
{
    let plan = match engine::plan(stage, json, facts) {
        Ok(p) => p,
        Err(e) => {
            tracing::warn!(stage = %stage.name, object = %object.name_any(), error = %e, "a Stage's template failed");
            return Ok(Action::done());
        }
    };
    let uid = object.meta().uid.clone().unwrap_or_default();
    let rv = execute(api, recorder, object, plan).await?;
    tracker.wrote(&uid, rv.as_deref());
    Ok(if stage.immediate {
        Action::requeue_after(std::time::Duration::ZERO)
    } else {
        Action::done()
    })
}

/// The node side of the kubelets: Node Stages applied to simulated nodes.
pub struct NodeStages {
    client: kube::Client,
    stages: Store<Stage>,
    lifecycles: Lifecycles,
    tracker: Tracker,
    recorder: Recorder,
}

impl std::fmt::Debug for NodeStages {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeStages").finish_non_exhaustive()
    }
}

impl NodeStages {
    /// The controller applying Node Stages; run it beside [`Kubelets`](super::Kubelets).
    pub fn controller(informers: &Informers) -> Controller<Node, NodeStages> {
        let stages = informers.get::<Stage>(Default::default()).store();
        let nodes = informers.get::<Node>(Default::default()).store();
        let reconciler = NodeStages {
            client: informers.client(),
            stages,
            lifecycles: Lifecycles::default(),
            tracker: Tracker::default(),
            recorder: Recorder::new(informers.client(), Reporter::new("kubelet")),
        };
        Controller::for_::<Node>(informers)
            .named("kore-kubelet-nodes")
            .watches::<Stage>(move |_| nodes.list().iter().map(|n| ObjectKey::of(&**n)).collect())
            .build(reconciler)
    }
}

impl Reconciler<Node> for NodeStages {
    type Error = Error;

    async fn reconcile(&self, request: Request<Node>) -> Result<Action, ReconcileError<Error>> {
        let Some(node) = request.object() else {
            if let Some(uid) = request.last_state().and_then(|n| n.metadata.uid.clone()) {
                self.tracker.forget(&uid);
            }
            return Ok(Action::done());
        };
        if !is_simulated(&node) {
            return Ok(Action::done());
        }
        let lifecycle = self.lifecycles.get(&self.stages, "Node");
        let uid = node.metadata.uid.clone().unwrap_or_default();
        let rv = node.metadata.resource_version.clone().unwrap_or_default();
        let labels = Labels {
            labels: node.metadata.labels.as_ref(),
            annotations: node.metadata.annotations.as_ref(),
        };
        match self
            .tracker
            .decide(&lifecycle, &uid, &rv, labels, || as_json(&*node))
        {
            Decision::Apply(stage, json) => {
                let facts = Facts {
                    node_name: node.name_any(),
                    node_ip: super::internal_ip(&node),
                    node_conditions: crate::nodeset::kubelet_conditions(),
                    ..Facts::default()
                };
                Ok(apply(
                    Api::all(self.client.clone()),
                    &self.recorder,
                    &self.tracker,
                    &*node,
                    &stage,
                    &json,
                    &facts,
                )
                .await?)
            }
            Decision::Wait(d) => Ok(Action::requeue_after(d)),
            Decision::Native | Decision::Stale => Ok(Action::done()),
        }
    }
}
