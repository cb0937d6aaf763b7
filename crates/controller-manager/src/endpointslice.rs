//! The EndpointSlice controller (`endpointslice-controller`): for every Service with a
//! selector, EndpointSlices listing the pods the selector matches, as Kubernetes'
//! `pkg/controller/endpointslice` and its reconciler (`k8s.io/endpointslice`) keep them.
//!
//! A Service of type ExternalName, or without a selector, gets nothing from this controller:
//! its slices are someone else's (the API server keeps `default/kubernetes`'s itself). A
//! Service being deleted is left to the garbage collector, which deletes the slices it owns.
//!
//! One sync:
//! 1. The pods the selector matches that should be endpoints: not Succeeded or Failed, with
//!    a pod IP; terminating pods stay, with `terminating: true` (`ShouldPodBeInEndpoints`
//!    with terminating pods included).
//! 2. Per address type of the Service (`spec.ipFamilies`: IPv4, IPv6), each pod becomes an
//!    endpoint: its IPs of that family, `ready` (Ready and not terminating, or always with
//!    `publishNotReadyAddresses`), `serving` (Ready), `terminating`, `nodeName`, `zone` (the
//!    node's `topology.kubernetes.io/zone`), `hostname` (when the pod's subdomain is the
//!    Service), a `targetRef` to the pod. Its ports are the Service's ports resolved on the
//!    pod: a number as it is, a name through the containers' (and sidecars') named ports of
//!    the same protocol; a port that does not resolve is left out. Endpoints are grouped by
//!    their resolved ports: each group gets slices of its own.
//! 3. The existing slices (labelled `kubernetes.io/service-name: <svc>` and
//!    `endpointslice.kubernetes.io/managed-by: endpointslice-controller.k8s.io`) are compared
//!    endpoint by endpoint: a slice keeps the endpoints still wanted (changed ones replaced),
//!    loses the others, and is updated only if something changed (or the Service's labels
//!    did); an emptied slice, one of an unwanted port group or address type, or one not owned
//!    by the Service is deleted. The endpoints left over fill the slices being updated
//!    anyway, then new slices of at most `--max-endpoints-per-slice` (100); a last partial
//!    batch goes into an unchanged slice that has room rather than a new one. A slice to
//!    delete is reused for a slice to create (an update instead of a delete and a create).
//!    A Service with no endpoints keeps one empty placeholder slice per address type.
//! 4. Creates, then updates, then deletes. New slices are named `<svc>-xxxxx`, controlled by
//!    the Service, labelled with the Service's labels (the reserved ones excepted),
//!    `service.kubernetes.io/headless` for a Service without a cluster IP, and the two above.
//!    Every written slice carries `endpoints.kubernetes.io/last-change-trigger-time`: the
//!    earliest change among the pods' readiness transitions (and the Service's creation) since
//!    the previous sync (Kubernetes' `TriggerTimeTracker`), or none.
//!
//! At steady state nothing is written. Writes go through a [`CachedClient`], so the next sync
//! sees them even before their watch events arrive: a lagging cache never creates twice.
//! A pod on a node the cache does not hold yet is left out and the sync retried (unless the
//! Service publishes not-ready addresses), as Kubernetes does.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::{Node, ObjectReference, Pod, Service, ServicePort};
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions, EndpointPort, EndpointSlice};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use k8s_openapi::jiff::Timestamp;
use kore_runtime::controller::{Action, ReconcileError, Reconciler, Request};
use kore_runtime::events::{EventType, Recorder};
use kore_runtime::metrics::Metrics;
use kore_runtime::{CachedClient, Controller, InformerConfig, Manager, ObjectKey, Store};
use kube::Resource;
use kube::api::{DeleteParams, PostParams};

use crate::error::{SyncError, status_code};
use crate::ownership::controller_reference;
use crate::pods::{self, is_ready};
use crate::{BY_NAMESPACE, Caches, Options, publish};

/// The controller's name (`--controllers`), as kube-controller-manager 1.33 names it.
pub const NAME: &str = "endpointslice-controller";
/// The `managed-by` value of the slices this controller keeps.
pub const MANAGED_BY: &str = "endpointslice-controller.k8s.io";
/// The label naming a slice's Service.
pub const LABEL_SERVICE_NAME: &str = "kubernetes.io/service-name";
/// The label naming a slice's manager.
pub const LABEL_MANAGED_BY: &str = "endpointslice.kubernetes.io/managed-by";
/// The label on the slices and Endpoints of a Service without a cluster IP.
pub const LABEL_HEADLESS: &str = "service.kubernetes.io/headless";
/// The annotation with the time of the earliest change a write reflects.
pub const LAST_CHANGE_TRIGGER_TIME: &str = "endpoints.kubernetes.io/last-change-trigger-time";
/// The node label whose value becomes an endpoint's zone.
pub const ZONE_LABEL: &str = "topology.kubernetes.io/zone";
/// The largest `--max-endpoints-per-slice` kube-controller-manager accepts.
pub const MAX_ENDPOINTS_PER_SLICE_LIMIT: usize = 1000;
/// Event reason: writing a Service's slices failed.
pub const REASON_FAILED_UPDATE: &str = "FailedToUpdateEndpointSlices";

/// The cache index of EndpointSlices by `<namespace>/<service-name label>`.
const BY_SERVICE: &str = "service";

/// Why a sync of a Service's slices failed; retried with the key's backoff.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Writing a slice failed (a conflict means the cache was stale).
    #[error(transparent)]
    Sync(#[from] SyncError),
    /// A pod's node is not in the cache yet: the pod was left out, the sync is retried.
    #[error("{0}")]
    NodeNotCached(String),
}

/// An error with its sources, `: `-separated, for an event's note.
pub(crate) fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

/// The Service informer with its namespace index (shared with the Endpoints controller).
pub(crate) fn services(manager: &Manager) -> kore_runtime::SharedInformer<Service> {
    let services = manager
        .informers()
        .get::<Service>(InformerConfig::default());
    services.add_index(BY_NAMESPACE, |s: &Service| {
        s.metadata.namespace.clone().into_iter().collect()
    });
    services
}

/// Adds the EndpointSlice controller to `manager`; returns its name.
pub(crate) fn register(
    manager: &mut Manager,
    caches: &Caches,
    options: &Options,
    metrics: &Metrics,
) -> &'static str {
    let client = manager.client();
    let services = services(manager);
    let slices = manager
        .informers()
        .get::<EndpointSlice>(InformerConfig::default());
    slices.add_index(BY_SERVICE, |s: &EndpointSlice| {
        let name = s
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(LABEL_SERVICE_NAME));
        match (&s.metadata.namespace, name) {
            (Some(ns), Some(name)) => vec![format!("{ns}/{name}")],
            _ => Vec::new(),
        }
    });
    let nodes = manager.informers().get::<Node>(InformerConfig::default());
    let builder = Controller::for_::<Service>(manager.informers())
        .named(NAME)
        .owns::<EndpointSlice>()
        .watches::<Pod>(pod_mapper(services.store()))
        .max_concurrent_reconciles(options.concurrent_service_endpoint_syncs)
        .metrics(metrics.clone());
    let reconciler = EndpointSliceReconciler {
        pods: caches.pods.store(),
        nodes: nodes.store(),
        slices: CachedClient::new(client.clone(), slices),
        max_per_slice: options
            .max_endpoints_per_slice
            .clamp(1, MAX_ENDPOINTS_PER_SLICE_LIMIT),
        triggers: TriggerTimes::default(),
        recorder: crate::recorder(&client, NAME),
    };
    manager.add(Box::new(builder.build(reconciler)));
    NAME
}

/// Maps a pod to the Services of its namespace whose selector matches it.
pub(crate) fn pod_mapper(
    services: Store<Service>,
) -> impl Fn(&Pod) -> Vec<ObjectKey> + Send + Sync + 'static {
    move |pod: &Pod| {
        let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
        services
            .by_index(BY_NAMESPACE, namespace)
            .iter()
            .filter(|s| selector_of(s).is_some_and(|sel| selects(sel, &pod.metadata)))
            .map(|s| ObjectKey::of(&**s))
            .collect()
    }
}

/// The selector of a Service whose endpoints the controllers keep: none for ExternalName
/// Services and Services without a selector.
pub(crate) fn selector_of(svc: &Service) -> Option<&BTreeMap<String, String>> {
    let spec = svc.spec.as_ref()?;
    if spec.type_.as_deref() == Some("ExternalName") {
        return None;
    }
    spec.selector.as_ref()
}

/// Whether a Service selector (a map; an empty one selects everything) selects `meta`.
fn selects(selector: &BTreeMap<String, String>, meta: &ObjectMeta) -> bool {
    selector
        .iter()
        .all(|(k, v)| meta.labels.as_ref().and_then(|l| l.get(k)) == Some(v))
}

/// The pods of the Service's namespace its selector matches, sorted by name.
pub(crate) fn selected_pods(
    pods: &Store<Pod>,
    svc: &Service,
    selector: &BTreeMap<String, String>,
) -> Vec<Arc<Pod>> {
    let namespace = svc.metadata.namespace.as_deref().unwrap_or_default();
    let mut selected: Vec<Arc<Pod>> = pods
        .by_index(BY_NAMESPACE, namespace)
        .into_iter()
        .filter(|p| selects(selector, &p.metadata))
        .collect();
    selected.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    selected
}

/// Whether a pod belongs in a Service's endpoints (Kubernetes' `ShouldPodBeInEndpoints`):
/// not finished, with an IP, and not terminating unless `include_terminating`.
pub(crate) fn should_be_in_endpoints(pod: &Pod, include_terminating: bool) -> bool {
    if matches!(pods::phase(pod), "Succeeded" | "Failed") {
        return false;
    }
    if pod_ips(pod).is_empty() {
        return false;
    }
    include_terminating || pod.metadata.deletion_timestamp.is_none()
}

/// The pod's IPs: `status.podIPs`, or `status.podIP` when that list is empty.
pub(crate) fn pod_ips(pod: &Pod) -> Vec<IpAddr> {
    let Some(status) = pod.status.as_ref() else {
        return Vec::new();
    };
    let listed: Vec<IpAddr> = status
        .pod_ips
        .iter()
        .flatten()
        .filter_map(|p| p.ip.parse().ok())
        .collect();
    if !listed.is_empty() {
        return listed;
    }
    status
        .pod_ip
        .iter()
        .filter_map(|ip| ip.parse().ok())
        .collect()
}

/// Whether the Service has a cluster IP (not headless).
pub(crate) fn has_cluster_ip(svc: &Service) -> bool {
    let ip = svc
        .spec
        .as_ref()
        .and_then(|s| s.cluster_ip.as_deref())
        .unwrap_or_default();
    !ip.is_empty() && ip != "None"
}

/// Whether a headless Service without ports still gets endpoints (with no ports).
pub(crate) fn headless_without_ports(svc: &Service) -> bool {
    let spec = svc.spec.clone().unwrap_or_default();
    spec.ports.as_ref().is_none_or(Vec::is_empty) && spec.cluster_ip.as_deref() == Some("None")
}

/// The protocol, `TCP` when unset (the API server's default).
fn protocol(p: Option<&String>) -> &str {
    p.map_or("TCP", String::as_str)
}

/// The container port a Service port reaches on `pod` (Kubernetes' `FindPort`): a number as
/// it is, a name looked up among the named ports of the containers and sidecars (init
/// containers with `restartPolicy: Always`) with the same protocol.
pub(crate) fn find_port(pod: &Pod, port: &ServicePort) -> Option<i32> {
    match port.target_port.as_ref() {
        Some(IntOrString::String(name)) => {
            let spec = pod.spec.as_ref()?;
            let sidecars = spec
                .init_containers
                .iter()
                .flatten()
                .filter(|c| c.restart_policy.as_deref() == Some("Always"));
            spec.containers
                .iter()
                .chain(sidecars)
                .flat_map(|c| c.ports.iter().flatten())
                .find(|p| {
                    p.name.as_deref() == Some(name.as_str())
                        && protocol(p.protocol.as_ref()) == protocol(port.protocol.as_ref())
                })
                .map(|p| p.container_port)
        }
        Some(IntOrString::Int(n)) => Some(*n),
        None => Some(port.port),
    }
}

/// Whether the endpoint gets the pod's hostname: the pod names one and its subdomain is the
/// Service (Kubernetes' `ShouldSetHostname`).
pub(crate) fn hostname_for(pod: &Pod, svc: &Service) -> Option<String> {
    let spec = pod.spec.as_ref()?;
    let hostname = spec.hostname.as_ref().filter(|h| !h.is_empty())?;
    (spec.subdomain.as_deref() == svc.metadata.name.as_deref()
        && svc.metadata.namespace == pod.metadata.namespace)
        .then(|| hostname.clone())
}

/// A reference to `pod`, as endpoints carry it.
pub(crate) fn pod_reference(pod: &Pod) -> ObjectReference {
    ObjectReference {
        kind: Some("Pod".into()),
        namespace: pod.metadata.namespace.clone(),
        name: pod.metadata.name.clone(),
        uid: pod.metadata.uid.clone(),
        ..ObjectReference::default()
    }
}

/// When each Service's pods last changed readiness, to tell which changes a sync reflects
/// (Kubernetes' `TriggerTimeTracker`).
#[derive(Debug, Default)]
pub(crate) struct TriggerTimes {
    services: Mutex<HashMap<ObjectKey, ServiceTriggers>>,
}

#[derive(Debug, Default)]
struct ServiceTriggers {
    pods: HashMap<String, Timestamp>,
    service: Option<Timestamp>,
}

impl TriggerTimes {
    /// The time to put in `last-change-trigger-time`: the Service's creation for a Service
    /// not seen before, else the earliest pod readiness transition (or Service change)
    /// newer than at the previous sync; `None` when nothing changed.
    pub(crate) fn compute(
        &self,
        key: &ObjectKey,
        svc: &Service,
        pods: &[Arc<Pod>],
    ) -> Option<Timestamp> {
        let mut services = self
            .services
            .lock()
            .expect("the trigger time lock is never poisoned");
        let known = services.contains_key(key);
        let state = services.entry(key.clone()).or_default();
        let mut earliest: Option<Timestamp> = None;
        let mut now_pods = HashMap::new();
        for pod in pods {
            let Some(t) = ready_transition(pod) else {
                continue;
            };
            let name = pod.metadata.name.clone().unwrap_or_default();
            if state.pods.get(&name).is_none_or(|last| t > *last) {
                earliest = Some(earliest.map_or(t, |e| e.min(t)));
            }
            now_pods.insert(name, t);
        }
        let created = svc.metadata.creation_timestamp.as_ref().map(|t| t.0);
        if let Some(c) = created
            && state.service.is_none_or(|last| c > last)
        {
            earliest = Some(earliest.map_or(c, |e| e.min(c)));
        }
        state.pods = now_pods;
        state.service = created;
        if known { earliest } else { created }
    }

    /// Forgets a deleted Service.
    pub(crate) fn forget(&self, key: &ObjectKey) {
        self.services
            .lock()
            .expect("the trigger time lock is never poisoned")
            .remove(key);
    }
}

fn ready_transition(pod: &Pod) -> Option<Timestamp> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready")?
        .last_transition_time
        .as_ref()
        .map(|t| t.0)
}

/// The trigger time as the annotation writes it (RFC 3339, UTC).
pub(crate) fn format_trigger_time(t: Timestamp) -> String {
    t.to_string()
}

/// Reconciles Services into EndpointSlices; see the [module docs](self).
pub struct EndpointSliceReconciler {
    pods: Store<Pod>,
    nodes: Store<Node>,
    slices: CachedClient<EndpointSlice>,
    max_per_slice: usize,
    triggers: TriggerTimes,
    recorder: Recorder,
}

impl std::fmt::Debug for EndpointSliceReconciler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EndpointSliceReconciler")
            .field("max_per_slice", &self.max_per_slice)
            .finish_non_exhaustive()
    }
}

/// The address types a Service's slices have (Kubernetes' `getAddressTypesForService`):
/// its `ipFamilies`; without them, its cluster IP's family, or both for a headless one.
fn address_types(svc: &Service) -> BTreeSet<&'static str> {
    let spec = svc.spec.clone().unwrap_or_default();
    let mut types: BTreeSet<&'static str> = spec
        .ip_families
        .iter()
        .flatten()
        .filter_map(|f| match f.as_str() {
            "IPv4" => Some("IPv4"),
            "IPv6" => Some("IPv6"),
            _ => None,
        })
        .collect();
    if types.is_empty() {
        match spec.cluster_ip.as_deref().map(str::parse::<IpAddr>) {
            Some(Ok(IpAddr::V6(_))) => {
                types.insert("IPv6");
            }
            Some(Ok(IpAddr::V4(_))) => {
                types.insert("IPv4");
            }
            _ => {
                types.insert("IPv4");
                types.insert("IPv6");
            }
        }
    }
    types
}

/// The labels a slice of `svc` carries: the Service's (reserved ones excepted), the
/// headless label when it has no cluster IP, its name and the manager.
fn slice_labels(svc: &Service) -> BTreeMap<String, String> {
    let mut labels = user_labels(svc.metadata.labels.as_ref());
    if !has_cluster_ip(svc) {
        labels.insert(LABEL_HEADLESS.into(), String::new());
    }
    labels.insert(
        LABEL_SERVICE_NAME.into(),
        svc.metadata.name.clone().unwrap_or_default(),
    );
    labels.insert(LABEL_MANAGED_BY.into(), MANAGED_BY.into());
    labels
}

/// Labels without the reserved slice labels.
fn user_labels(labels: Option<&BTreeMap<String, String>>) -> BTreeMap<String, String> {
    labels
        .into_iter()
        .flatten()
        .filter(|(k, _)| {
            !matches!(
                k.as_str(),
                LABEL_SERVICE_NAME | LABEL_MANAGED_BY | LABEL_HEADLESS
            )
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// A group of endpoints with the same resolved ports.
type PortsKey = Vec<(String, i32, String, String)>;

fn ports_key(ports: Option<&Vec<EndpointPort>>) -> PortsKey {
    let mut key: PortsKey = ports
        .into_iter()
        .flatten()
        .map(|p| {
            (
                p.name.clone().unwrap_or_default(),
                p.port.unwrap_or(0),
                protocol(p.protocol.as_ref()).to_owned(),
                p.app_protocol.clone().unwrap_or_default(),
            )
        })
        .collect();
    key.sort();
    key
}

/// What identifies an endpoint across syncs: its pod's namespace and name, its addresses.
type EndpointKey = (String, String, Vec<String>);

fn endpoint_key(ep: &Endpoint) -> EndpointKey {
    let r = ep.target_ref.clone().unwrap_or_default();
    let mut addresses = ep.addresses.clone();
    addresses.sort();
    (
        r.namespace.unwrap_or_default(),
        r.name.unwrap_or_default(),
        addresses,
    )
}

/// The endpoint with the fields the controller does not set cleared, to compare.
fn normalized(ep: &Endpoint) -> Endpoint {
    let mut ep = ep.clone();
    if let Some(r) = ep.target_ref.as_mut() {
        r.resource_version = None;
    }
    ep.hints = None;
    ep.deprecated_topology = None;
    ep
}

/// The endpoints one address type wants, grouped by resolved ports.
type Desired = BTreeMap<PortsKey, (Vec<EndpointPort>, Vec<Endpoint>)>;

/// What a sync writes.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Plan {
    pub(crate) create: Vec<EndpointSlice>,
    pub(crate) update: Vec<EndpointSlice>,
    pub(crate) delete: Vec<EndpointSlice>,
}

/// A new, empty slice of `svc` with `ports` and `address_type`.
fn new_slice(svc: &Service, address_type: &str, ports: Vec<EndpointPort>) -> EndpointSlice {
    EndpointSlice {
        metadata: ObjectMeta {
            generate_name: Some(format!(
                "{}-",
                svc.metadata.name.as_deref().unwrap_or_default()
            )),
            namespace: svc.metadata.namespace.clone(),
            labels: Some(slice_labels(svc)),
            owner_references: Some(vec![controller_reference::<Service>(&svc.metadata)]),
            ..ObjectMeta::default()
        },
        address_type: address_type.into(),
        endpoints: Vec::new(),
        ports: Some(ports),
    }
}

fn owned_by(slice: &EndpointSlice, svc: &Service) -> bool {
    slice.metadata.owner_references.iter().flatten().any(|r| {
        Some(&r.uid) == svc.metadata.uid.as_ref() && r.kind == "Service" && r.api_version == "v1"
    })
}

/// Plans the slices of one address type (Kubernetes' `reconcileByAddressType`).
fn plan_address_type(
    svc: &Service,
    address_type: &str,
    mut desired: Desired,
    existing: &[Arc<EndpointSlice>],
    max: usize,
    plan: &mut Plan,
) {
    let labels = slice_labels(svc);
    let wanted_user_labels = user_labels(svc.metadata.labels.as_ref());
    let deleted_before = plan.delete.len();
    // Endpoints still to place, per port group, by key.
    let mut remaining: BTreeMap<PortsKey, BTreeMap<EndpointKey, Endpoint>> = BTreeMap::new();
    for (key, (_, eps)) in &mut desired {
        remaining.insert(
            key.clone(),
            eps.drain(..).map(|e| (endpoint_key(&e), e)).collect(),
        );
    }
    let mut updates: Vec<EndpointSlice> = Vec::new();
    let mut unchanged: Vec<EndpointSlice> = Vec::new();
    for slice in existing {
        let key = ports_key(slice.ports.as_ref());
        let Some(wanted) = remaining.get_mut(&key) else {
            plan.delete.push((**slice).clone());
            continue;
        };
        let mut changed = false;
        let mut kept = Vec::new();
        for ep in &slice.endpoints {
            match wanted.remove(&endpoint_key(ep)) {
                Some(d) => {
                    if normalized(ep) != d {
                        changed = true;
                    }
                    kept.push(d);
                }
                None => changed = true,
            }
        }
        let labels_changed = user_labels(slice.metadata.labels.as_ref()) != wanted_user_labels;
        if kept.is_empty() {
            plan.delete.push((**slice).clone());
        } else if changed || labels_changed {
            let mut s = (**slice).clone();
            s.endpoints = kept;
            s.metadata.labels = Some(labels.clone());
            updates.push(s);
        } else {
            unchanged.push((**slice).clone());
        }
    }
    let mut creates: Vec<EndpointSlice> = Vec::new();
    for (key, (ports, _)) in &desired {
        let Some(wanted) = remaining.remove(key) else {
            continue;
        };
        let mut left: Vec<Endpoint> = wanted.into_values().collect();
        if left.is_empty() {
            continue;
        }
        // Fill the slices written anyway first, the fullest first.
        let mut same: Vec<&mut EndpointSlice> = updates
            .iter_mut()
            .filter(|s| ports_key(s.ports.as_ref()) == *key)
            .collect();
        same.sort_by_key(|s| std::cmp::Reverse(s.endpoints.len()));
        for s in same {
            let room = max.saturating_sub(s.endpoints.len()).min(left.len());
            s.endpoints.extend(left.drain(..room));
        }
        while !left.is_empty() {
            let n = max.min(left.len());
            let batch: Vec<Endpoint> = left.drain(..n).collect();
            if batch.len() < max {
                // A last partial batch goes into the unchanged slice it fills most.
                let fit = unchanged
                    .iter()
                    .enumerate()
                    .filter(|(_, s)| ports_key(s.ports.as_ref()) == *key)
                    .filter(|(_, s)| s.endpoints.len() + batch.len() <= max)
                    .max_by_key(|(_, s)| s.endpoints.len())
                    .map(|(i, _)| i);
                if let Some(i) = fit {
                    let mut s = unchanged.remove(i);
                    s.endpoints.extend(batch);
                    s.metadata.labels = Some(labels.clone());
                    updates.push(s);
                    continue;
                }
            }
            let mut s = new_slice(svc, address_type, ports.clone());
            s.endpoints = batch;
            creates.push(s);
        }
    }
    // A Service without endpoints keeps one empty placeholder slice.
    let deleted_here = plan.delete.len() - deleted_before;
    if existing.len() == deleted_here && creates.is_empty() {
        let placeholder = new_slice(svc, address_type, Vec::new());
        let only = (deleted_here == 1).then(|| &plan.delete[deleted_before]);
        let same = only.is_some_and(|s| {
            s.endpoints.is_empty()
                && s.ports.as_ref().is_none_or(Vec::is_empty)
                && s.address_type == address_type
                && s.metadata.labels == placeholder.metadata.labels
                && owned_by(s, svc)
        });
        if same {
            plan.delete.truncate(deleted_before);
        } else {
            creates.push(placeholder);
        }
    }
    plan.create.extend(creates);
    plan.update.extend(updates);
}

/// Plans a Service's slices from its endpoints: see the [module docs](self).
pub(crate) fn plan(
    svc: &Service,
    desired: BTreeMap<&'static str, Desired>,
    existing: &[Arc<EndpointSlice>],
    max: usize,
) -> Plan {
    let mut plan = Plan::default();
    let mut by_type: BTreeMap<String, Vec<Arc<EndpointSlice>>> = BTreeMap::new();
    for s in existing {
        if owned_by(s, svc) && desired.contains_key(s.address_type.as_str()) {
            by_type
                .entry(s.address_type.clone())
                .or_default()
                .push(Arc::clone(s));
        } else {
            plan.delete.push((**s).clone());
        }
    }
    for (address_type, wanted) in desired {
        let slices = by_type.remove(address_type).unwrap_or_default();
        plan_address_type(svc, address_type, wanted, &slices, max, &mut plan);
    }
    // Reuse slices to delete for slices to create: an update instead of two writes.
    let mut i = 0;
    while i < plan.delete.len() && !plan.create.is_empty() {
        let reusable = plan.delete[i].address_type == plan.create[0].address_type
            && owned_by(&plan.delete[i], svc);
        if reusable {
            let old = plan.delete.remove(i);
            let mut s = plan.create.remove(0);
            s.metadata.name = old.metadata.name;
            s.metadata.generate_name = old.metadata.generate_name;
            s.metadata.resource_version = old.metadata.resource_version;
            s.metadata.uid = old.metadata.uid;
            s.metadata.annotations = old.metadata.annotations;
            plan.update.push(s);
        } else {
            i += 1;
        }
    }
    plan
}

impl EndpointSliceReconciler {
    /// The endpoints `svc` wants, per address type and port group. Returns also whether a
    /// pod was left out because its node is not cached yet.
    fn desired(
        &self,
        svc: &Service,
        pods: &[Arc<Pod>],
    ) -> (BTreeMap<&'static str, Desired>, Vec<String>) {
        let publish_not_ready = svc
            .spec
            .as_ref()
            .and_then(|s| s.publish_not_ready_addresses)
            .unwrap_or(false);
        let service_ports = svc
            .spec
            .as_ref()
            .and_then(|s| s.ports.clone())
            .unwrap_or_default();
        let mut missing_nodes = Vec::new();
        let mut desired: BTreeMap<&'static str, Desired> = BTreeMap::new();
        let types = address_types(svc);
        for t in &types {
            desired.insert(t, Desired::new());
        }
        for pod in pods {
            if !should_be_in_endpoints(pod, true) {
                continue;
            }
            let node_name = pod
                .spec
                .as_ref()
                .and_then(|s| s.node_name.clone())
                .filter(|n| !n.is_empty());
            let node = node_name
                .as_ref()
                .and_then(|n| self.nodes.get(&ObjectKey::cluster(n.clone())));
            if let Some(n) = &node_name
                && node.is_none()
                && !publish_not_ready
            {
                missing_nodes.push(format!(
                    "pod {} is on node {n}, which is not known yet",
                    pod.metadata.name.as_deref().unwrap_or_default()
                ));
                continue;
            }
            let ports: Vec<EndpointPort> = if headless_without_ports(svc) {
                Vec::new()
            } else {
                service_ports
                    .iter()
                    .filter_map(|p| {
                        find_port(pod, p).map(|n| EndpointPort {
                            name: Some(p.name.clone().unwrap_or_default()),
                            port: Some(n),
                            protocol: Some(protocol(p.protocol.as_ref()).to_owned()),
                            app_protocol: p.app_protocol.clone(),
                        })
                    })
                    .collect()
            };
            let serving = is_ready(pod);
            let terminating = pod.metadata.deletion_timestamp.is_some();
            let zone = node
                .as_ref()
                .and_then(|n| n.metadata.labels.as_ref()?.get(ZONE_LABEL).cloned())
                .filter(|z| !z.is_empty());
            for t in &types {
                let addresses: Vec<String> = pod_ips(pod)
                    .into_iter()
                    .filter(|ip| match *t {
                        "IPv6" => ip.is_ipv6(),
                        _ => ip.is_ipv4(),
                    })
                    .map(|ip| ip.to_string())
                    .collect();
                if addresses.is_empty() {
                    continue;
                }
                let ep = Endpoint {
                    addresses,
                    conditions: Some(EndpointConditions {
                        ready: Some(publish_not_ready || (serving && !terminating)),
                        serving: Some(serving),
                        terminating: Some(terminating),
                    }),
                    hostname: hostname_for(pod, svc),
                    node_name: node_name.clone(),
                    target_ref: Some(pod_reference(pod)),
                    zone: zone.clone(),
                    ..Endpoint::default()
                };
                let group = desired
                    .entry(t)
                    .or_default()
                    .entry(ports_key(Some(&ports)))
                    .or_insert_with(|| (ports.clone(), Vec::new()));
                group.1.push(ep);
            }
        }
        (desired, missing_nodes)
    }

    async fn sync(&self, key: &ObjectKey, svc: &Service) -> Result<Action, Error> {
        let Some(selector) = selector_of(svc) else {
            return Ok(Action::done());
        };
        if svc.metadata.deletion_timestamp.is_some() {
            return Ok(Action::done());
        }
        let pods = selected_pods(&self.pods, svc, selector);
        let trigger = self.triggers.compute(key, svc, &pods);
        let existing: Vec<Arc<EndpointSlice>> = self
            .slices
            .by_index(BY_SERVICE, key.as_str())
            .into_iter()
            .filter(|s| {
                s.metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(LABEL_MANAGED_BY))
                    .map(String::as_str)
                    == Some(MANAGED_BY)
            })
            .collect();
        let (desired, missing_nodes) = self.desired(svc, &pods);
        let plan = plan(svc, desired, &existing, self.max_per_slice);
        if let Err(e) = self.apply(plan, trigger).await {
            publish(
                &self.recorder,
                svc.object_ref(&()),
                EventType::Warning,
                REASON_FAILED_UPDATE,
                "Update",
                format!(
                    "Error updating Endpoint Slices for Service {key}: {}",
                    error_chain(&e)
                ),
            );
            return Err(e.into());
        }
        if let Some(first) = missing_nodes.into_iter().next() {
            return Err(Error::NodeNotCached(first));
        }
        Ok(Action::done())
    }

    async fn apply(&self, plan: Plan, trigger: Option<Timestamp>) -> Result<(), SyncError> {
        let stamp = |s: &mut EndpointSlice| {
            let annotations = s.metadata.annotations.get_or_insert_with(BTreeMap::new);
            match trigger {
                Some(t) => {
                    annotations.insert(LAST_CHANGE_TRIGGER_TIME.into(), format_trigger_time(t));
                }
                None => {
                    annotations.remove(LAST_CHANGE_TRIGGER_TIME);
                }
            }
        };
        for mut s in plan.create {
            stamp(&mut s);
            self.slices
                .create(&s, &PostParams::default())
                .await
                .map_err(|e| {
                    SyncError::cached(format!("EndpointSlice {}", ObjectKey::of(&s)), e)
                })?;
        }
        for mut s in plan.update {
            stamp(&mut s);
            self.slices
                .replace(&s, &PostParams::default())
                .await
                .map_err(|e| {
                    SyncError::cached(format!("EndpointSlice {}", ObjectKey::of(&s)), e)
                })?;
        }
        for s in plan.delete {
            let key = ObjectKey::of(&s);
            match self.slices.delete(&key, &DeleteParams::default()).await {
                Ok(_) => {}
                Err(kore_runtime::client::Error::Api(e)) if status_code(&e) == Some(404) => {}
                Err(e) => return Err(SyncError::cached(format!("EndpointSlice {key}"), e)),
            }
        }
        Ok(())
    }
}

impl Reconciler<Service> for EndpointSliceReconciler {
    type Error = Error;

    async fn reconcile(&self, request: Request<Service>) -> Result<Action, ReconcileError<Error>> {
        let key = request.key().clone();
        let Some(svc) = request.object() else {
            // The garbage collector deletes the slices the Service owned.
            self.triggers.forget(&key);
            return Ok(Action::done());
        };
        Ok(self.sync(&key, &svc).await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn service(v: serde_json::Value) -> Service {
        serde_json::from_value(v).expect("a service")
    }

    fn svc() -> Service {
        service(json!({
            "metadata": {"name": "web", "namespace": "ns", "uid": "svc-uid", "labels": {"app": "web"}},
            "spec": {"selector": {"app": "web"}, "clusterIP": "10.0.0.1", "ipFamilies": ["IPv4"],
                     "ports": [{"name": "http", "port": 80, "targetPort": "http"}]},
        }))
    }

    fn pod(name: &str, ip: &str) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "ns", "uid": format!("{name}-uid"), "labels": {"app": "web"}},
            "spec": {"containers": [{"name": "c", "ports": [{"name": "http", "containerPort": 8080}]}]},
            "status": {"phase": "Running", "podIP": ip, "conditions": [{"type": "Ready", "status": "True"}]},
        }))
        .expect("a pod")
    }

    fn endpoint(name: &str, ip: &str) -> Endpoint {
        Endpoint {
            addresses: vec![ip.into()],
            conditions: Some(EndpointConditions {
                ready: Some(true),
                serving: Some(true),
                terminating: Some(false),
            }),
            target_ref: Some(pod_reference(&pod(name, ip))),
            ..Endpoint::default()
        }
    }

    fn desired(eps: Vec<Endpoint>) -> BTreeMap<&'static str, Desired> {
        let ports = vec![EndpointPort {
            name: Some("http".into()),
            port: Some(8080),
            protocol: Some("TCP".into()),
            app_protocol: None,
        }];
        let mut d = Desired::new();
        if !eps.is_empty() {
            d.insert(ports_key(Some(&ports)), (ports, eps));
        }
        BTreeMap::from([("IPv4", d)])
    }

    fn named(mut s: EndpointSlice, name: &str) -> Arc<EndpointSlice> {
        s.metadata.name = Some(name.into());
        Arc::new(s)
    }

    #[test]
    fn named_target_ports_resolve_through_the_pods_container_ports() {
        let s = svc();
        let port = &s
            .spec
            .as_ref()
            .and_then(|s| s.ports.clone())
            .unwrap_or_default()[0];
        assert_eq!(find_port(&pod("a", "10.1.0.1"), port), Some(8080));
        let udp = ServicePort {
            protocol: Some("UDP".into()),
            ..port.clone()
        };
        assert_eq!(
            find_port(&pod("a", "10.1.0.1"), &udp),
            None,
            "protocols differ"
        );
        let numbered = ServicePort {
            target_port: Some(IntOrString::Int(9090)),
            ..port.clone()
        };
        assert_eq!(find_port(&pod("a", "10.1.0.1"), &numbered), Some(9090));
    }

    #[test]
    fn endpoints_are_packed_into_slices_of_at_most_max() {
        let s = svc();
        let eps: Vec<Endpoint> = (1..=5)
            .map(|i| endpoint(&format!("p{i}"), &format!("10.1.0.{i}")))
            .collect();
        let p = plan(&s, desired(eps.clone()), &[], 2);
        assert_eq!(p.create.len(), 3);
        assert_eq!(
            p.create
                .iter()
                .map(|s| s.endpoints.len())
                .collect::<Vec<_>>(),
            [2, 2, 1]
        );
        assert!(p.update.is_empty() && p.delete.is_empty());
        let labels = p.create[0].metadata.labels.clone().unwrap_or_default();
        assert_eq!(
            labels.get(LABEL_SERVICE_NAME).map(String::as_str),
            Some("web")
        );
        assert_eq!(
            labels.get(LABEL_MANAGED_BY).map(String::as_str),
            Some(MANAGED_BY)
        );
        assert_eq!(labels.get("app").map(String::as_str), Some("web"));

        // Written back as they were: nothing to do.
        let existing: Vec<Arc<EndpointSlice>> = p
            .create
            .iter()
            .enumerate()
            .map(|(i, s)| named(s.clone(), &format!("web-{i}")))
            .collect();
        let same = plan(&s, desired(eps.clone()), &existing, 2);
        assert_eq!(same, Plan::default(), "no writes at steady state");

        // One endpoint gone: only its slice is updated.
        let fewer: Vec<Endpoint> = eps
            .iter()
            .filter(|e| e.addresses[0] != "10.1.0.1")
            .cloned()
            .collect();
        let p = plan(&s, desired(fewer), &existing, 2);
        assert_eq!(p.update.len(), 1);
        assert_eq!(p.update[0].metadata.name.as_deref(), Some("web-0"));
        assert!(p.create.is_empty() && p.delete.is_empty());
    }

    #[test]
    fn a_service_without_endpoints_keeps_one_placeholder() {
        let s = svc();
        let p = plan(&s, desired(Vec::new()), &[], 100);
        assert_eq!(p.create.len(), 1);
        assert!(p.create[0].endpoints.is_empty());
        let existing = vec![named(p.create[0].clone(), "web-0")];
        assert_eq!(
            plan(&s, desired(Vec::new()), &existing, 100),
            Plan::default()
        );

        // A full slice emptied is reused as the placeholder.
        let mut full = new_slice(&s, "IPv4", Vec::new());
        full.endpoints = vec![endpoint("a", "10.1.0.1")];
        full.ports = Some(vec![EndpointPort {
            name: Some("http".into()),
            port: Some(8080),
            protocol: Some("TCP".into()),
            app_protocol: None,
        }]);
        let p = plan(&s, desired(Vec::new()), &[named(full, "web-1")], 100);
        assert!(p.create.is_empty() && p.delete.is_empty());
        assert_eq!(p.update.len(), 1);
        assert_eq!(p.update[0].metadata.name.as_deref(), Some("web-1"));
        assert!(p.update[0].endpoints.is_empty());
    }

    #[test]
    fn trigger_time_is_the_earliest_change_since_the_last_sync() {
        let s = service(json!({
            "metadata": {"name": "web", "namespace": "ns", "creationTimestamp": "2026-01-01T00:00:00Z"},
        }));
        let key = ObjectKey::namespaced("ns", "web");
        let ready_at = |name: &str, t: &str| {
            let mut p = pod(name, "10.1.0.1");
            if let Some(c) = p.status.as_mut().and_then(|s| s.conditions.as_mut()) {
                c[0].last_transition_time =
                    Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                        t.parse().expect("a time"),
                    ));
            }
            Arc::new(p)
        };
        let times = TriggerTimes::default();
        let first = times.compute(&key, &s, &[ready_at("a", "2026-01-01T00:01:00Z")]);
        assert_eq!(
            first.map(|t| t.to_string()).as_deref(),
            Some("2026-01-01T00:00:00Z")
        );
        let pods = [
            ready_at("a", "2026-01-01T00:01:00Z"),
            ready_at("b", "2026-01-01T00:03:00Z"),
        ];
        let second = times.compute(&key, &s, &pods);
        assert_eq!(
            second.map(|t| t.to_string()).as_deref(),
            Some("2026-01-01T00:03:00Z")
        );
        assert_eq!(times.compute(&key, &s, &pods), None, "nothing changed");
    }
}
