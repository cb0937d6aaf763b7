//! The Endpoints controller (`endpoints-controller`): the legacy v1 Endpoints of every
//! Service with a selector, as Kubernetes' `pkg/controller/endpoint` keeps them.
//!
//! The Services it skips are the EndpointSlice controller's (ExternalName, no selector):
//! their Endpoints are someone else's (`default/kubernetes`'s are the API server's).
//!
//! One sync builds the Endpoints `<namespace>/<service>`:
//! - every pod the selector matches that is not finished, has an IP, and is not terminating
//!   (terminating pods count with `publishNotReadyAddresses`) gives an address: the pod IP of
//!   the Service's first IP family, `nodeName`, a `targetRef` to the pod, and `hostname` when
//!   the pod's subdomain is the Service;
//! - a Ready pod (any pod with `publishNotReadyAddresses`) goes to `addresses`, the others to
//!   `notReadyAddresses`;
//! - per Service port resolved on the pod (as the EndpointSlice controller resolves it), and
//!   with no port for a headless Service without ports; the subsets are then repacked:
//!   addresses offering the same ports share a subset (Kubernetes' `RepackSubsets`), sorted;
//! - over 1000 addresses the list is truncated, ready addresses kept first and each subset
//!   keeping its share, and annotated `endpoints.kubernetes.io/over-capacity: truncated`;
//! - labels are the Service's, plus `service.kubernetes.io/headless` without a cluster IP;
//!   `endpoints.kubernetes.io/last-change-trigger-time` as on EndpointSlices.
//!
//! It is written only when the subsets, the labels or the capacity annotation differ from
//! what is stored. When the controller sees a Service deleted it deletes its Endpoints; an
//! Endpoints object deleted by someone else is recreated.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{
    EndpointAddress, EndpointPort, EndpointSubset, Endpoints, Pod, Service,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kore_runtime::controller::{Action, ReconcileError, Reconciler, Request};
use kore_runtime::events::{EventType, Recorder};
use kore_runtime::metrics::Metrics;
use kore_runtime::{CachedClient, Controller, InformerConfig, Manager, ObjectKey, Store};
use kube::Resource;
use kube::api::{DeleteParams, PostParams};

use crate::endpointslice::{
    LABEL_HEADLESS, LAST_CHANGE_TRIGGER_TIME, TriggerTimes, error_chain, find_port,
    format_trigger_time, has_cluster_ip, headless_without_ports, hostname_for, pod_ips, pod_mapper,
    pod_reference, selected_pods, selector_of, services, should_be_in_endpoints,
};
use crate::error::{SyncError, status_code};
use crate::pods::is_ready;
use crate::{Caches, Options, publish};

/// The controller's name (`--controllers`), as kube-controller-manager 1.33 names it.
pub const NAME: &str = "endpoints-controller";
/// The most addresses an Endpoints object keeps (Kubernetes' `maxCapacity`).
pub const MAX_CAPACITY: usize = 1000;
/// The annotation on an Endpoints object whose addresses were truncated.
pub const OVER_CAPACITY: &str = "endpoints.kubernetes.io/over-capacity";
/// Its value.
pub const TRUNCATED: &str = "truncated";
/// Event reason: creating the Endpoints failed.
pub const REASON_FAILED_CREATE: &str = "FailedToCreateEndpoint";
/// Event reason: updating the Endpoints failed.
pub const REASON_FAILED_UPDATE: &str = "FailedToUpdateEndpoint";

/// Adds the Endpoints controller to `manager`; returns its name.
pub(crate) fn register(
    manager: &mut Manager,
    caches: &Caches,
    options: &Options,
    metrics: &Metrics,
) -> &'static str {
    let client = manager.client();
    let services = services(manager);
    let endpoints = manager
        .informers()
        .get::<Endpoints>(InformerConfig::default());
    let builder = Controller::for_::<Service>(manager.informers())
        .named(NAME)
        .watches::<Pod>(pod_mapper(services.store()))
        .watches::<Endpoints>(|ep: &Endpoints| vec![ObjectKey::of(ep)])
        .max_concurrent_reconciles(options.concurrent_endpoint_syncs)
        .metrics(metrics.clone());
    let reconciler = EndpointsReconciler {
        pods: caches.pods.store(),
        endpoints: CachedClient::new(client.clone(), endpoints),
        triggers: TriggerTimes::default(),
        recorder: crate::recorder(&client, NAME),
    };
    manager.add(Box::new(builder.build(reconciler)));
    NAME
}

/// Reconciles Services into Endpoints; see the [module docs](self).
pub struct EndpointsReconciler {
    pods: Store<Pod>,
    endpoints: CachedClient<Endpoints>,
    triggers: TriggerTimes,
    recorder: Recorder,
}

impl std::fmt::Debug for EndpointsReconciler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EndpointsReconciler")
            .finish_non_exhaustive()
    }
}

/// The pod's IP of the Service's family (the first of `ipFamilies`, else its cluster IP's).
fn address_of(svc: &Service, pod: &Pod) -> Option<IpAddr> {
    let spec = svc.spec.clone().unwrap_or_default();
    let v6 = match spec.ip_families.as_ref().and_then(|f| f.first()) {
        Some(f) => f == "IPv6",
        None => matches!(
            spec.cluster_ip.as_deref().map(str::parse::<IpAddr>),
            Some(Ok(IpAddr::V6(_)))
        ),
    };
    pod_ips(pod).into_iter().find(|ip| ip.is_ipv6() == v6)
}

/// An address's identity: its IP and pod.
type AddressKey = (String, String);

fn address_key(a: &EndpointAddress) -> AddressKey {
    (
        a.ip.clone(),
        a.target_ref
            .as_ref()
            .and_then(|r| r.uid.clone())
            .unwrap_or_default(),
    )
}

/// A port's identity: name, number, protocol, app protocol.
type PortKey = (String, i32, String, String);

fn port_key(p: &EndpointPort) -> PortKey {
    (
        p.name.clone().unwrap_or_default(),
        p.port,
        p.protocol.clone().unwrap_or_else(|| "TCP".into()),
        p.app_protocol.clone().unwrap_or_default(),
    )
}

/// The subsets of a Service: see the [module docs](self). `None` as a port stands for "no
/// ports" (a headless Service without ports).
pub(crate) fn subsets(svc: &Service, pods: &[Arc<Pod>]) -> Vec<EndpointSubset> {
    let spec = svc.spec.clone().unwrap_or_default();
    let publish_not_ready = spec.publish_not_ready_addresses.unwrap_or(false);
    // Per port: the addresses offering it and whether each is ready.
    let mut by_port: BTreeMap<Option<PortKey>, BTreeMap<AddressKey, bool>> = BTreeMap::new();
    let mut ports: BTreeMap<PortKey, EndpointPort> = BTreeMap::new();
    let mut addresses: BTreeMap<AddressKey, EndpointAddress> = BTreeMap::new();
    for pod in pods {
        if !should_be_in_endpoints(pod, publish_not_ready) {
            continue;
        }
        let Some(ip) = address_of(svc, pod) else {
            continue;
        };
        let address = EndpointAddress {
            ip: ip.to_string(),
            hostname: hostname_for(pod, svc),
            node_name: pod
                .spec
                .as_ref()
                .and_then(|s| s.node_name.clone())
                .filter(|n| !n.is_empty()),
            target_ref: Some(pod_reference(pod)),
        };
        let key = address_key(&address);
        let ready = publish_not_ready || is_ready(pod);
        let mut offered = Vec::new();
        if headless_without_ports(svc) {
            offered.push(None);
        } else {
            for p in spec.ports.iter().flatten() {
                let Some(n) = find_port(pod, p) else {
                    continue;
                };
                let port = EndpointPort {
                    name: p.name.clone().filter(|n| !n.is_empty()),
                    port: n,
                    protocol: Some(p.protocol.clone().unwrap_or_else(|| "TCP".into())),
                    app_protocol: p.app_protocol.clone(),
                };
                let pk = port_key(&port);
                ports.insert(pk.clone(), port);
                offered.push(Some(pk));
            }
        }
        if offered.is_empty() {
            continue;
        }
        addresses.insert(key.clone(), address);
        for port in offered {
            by_port.entry(port).or_default().insert(key.clone(), ready);
        }
    }
    // Ports offered by the same addresses (with the same readiness) share a subset.
    let mut groups: BTreeMap<Vec<(AddressKey, bool)>, BTreeSet<Option<PortKey>>> = BTreeMap::new();
    for (port, addrs) in by_port {
        groups
            .entry(addrs.into_iter().collect())
            .or_default()
            .insert(port);
    }
    let mut out: Vec<EndpointSubset> = groups
        .into_iter()
        .map(|(addrs, group_ports)| {
            let pick = |ready: bool| -> Option<Vec<EndpointAddress>> {
                let list: Vec<EndpointAddress> = addrs
                    .iter()
                    .filter(|(_, r)| *r == ready)
                    .filter_map(|(k, _)| addresses.get(k).cloned())
                    .collect();
                (!list.is_empty()).then_some(list)
            };
            let subset_ports: Vec<EndpointPort> = group_ports
                .iter()
                .flatten()
                .filter_map(|k| ports.get(k).cloned())
                .collect();
            EndpointSubset {
                addresses: pick(true),
                not_ready_addresses: pick(false),
                ports: (!subset_ports.is_empty()).then_some(subset_ports),
            }
        })
        .collect();
    out.sort_by_key(|s| {
        (
            s.ports.iter().flatten().map(port_key).collect::<Vec<_>>(),
            s.addresses
                .iter()
                .flatten()
                .map(address_key)
                .collect::<Vec<_>>(),
        )
    });
    out
}

/// Truncates `subsets` to [`MAX_CAPACITY`] addresses (Kubernetes' `truncateEndpoints`): ready
/// addresses first; each subset keeps its share, rounded up. Returns whether it truncated.
pub(crate) fn truncate(subsets: &mut [EndpointSubset]) -> bool {
    let count = |v: &Option<Vec<EndpointAddress>>| v.as_ref().map_or(0, Vec::len);
    let ready: usize = subsets.iter().map(|s| count(&s.addresses)).sum();
    let not_ready: usize = subsets.iter().map(|s| count(&s.not_ready_addresses)).sum();
    if ready + not_ready <= MAX_CAPACITY {
        return false;
    }
    let truncate_ready = ready > MAX_CAPACITY;
    let (max, total) = if truncate_ready {
        (MAX_CAPACITY, ready)
    } else {
        (MAX_CAPACITY - ready, not_ready)
    };
    let mut room = max;
    for s in subsets.iter_mut() {
        let list = if truncate_ready {
            s.not_ready_addresses = None;
            &mut s.addresses
        } else {
            &mut s.not_ready_addresses
        };
        let here = count(list);
        // ceil(here / total * max) in integers.
        let share = (here * max).div_ceil(total.max(1)).min(room);
        if let Some(l) = list.as_mut() {
            l.truncate(share);
        }
        room -= count(list);
    }
    true
}

/// Subsets compared with empty lists and absent ones alike.
fn same_subsets(a: Option<&Vec<EndpointSubset>>, b: &[EndpointSubset]) -> bool {
    let norm = |s: &EndpointSubset| EndpointSubset {
        addresses: s.addresses.clone().filter(|v| !v.is_empty()).map(|v| {
            v.into_iter()
                .map(|mut a| {
                    if let Some(r) = a.target_ref.as_mut() {
                        r.resource_version = None;
                    }
                    a
                })
                .collect()
        }),
        not_ready_addresses: s
            .not_ready_addresses
            .clone()
            .filter(|v| !v.is_empty())
            .map(|v| {
                v.into_iter()
                    .map(|mut a| {
                        if let Some(r) = a.target_ref.as_mut() {
                            r.resource_version = None;
                        }
                        a
                    })
                    .collect()
            }),
        ports: s.ports.clone().filter(|v| !v.is_empty()),
    };
    let a: Vec<EndpointSubset> = a.into_iter().flatten().map(norm).collect();
    let b: Vec<EndpointSubset> = b.iter().map(norm).collect();
    a == b
}

impl EndpointsReconciler {
    async fn sync(&self, key: &ObjectKey, svc: &Service) -> Result<Action, SyncError> {
        let Some(selector) = selector_of(svc) else {
            return Ok(Action::done());
        };
        let pods = selected_pods(&self.pods, svc, selector);
        // Computed on every sync so that the tracker sees every state, written or not.
        let trigger = self.triggers.compute(key, svc, &pods);
        let wanted = subsets(svc, &pods);
        let current = self.endpoints.get(key);
        let service_labels = svc.metadata.labels.clone().unwrap_or_default();
        if let Some(cur) = &current {
            let mut labels = cur.metadata.labels.clone().unwrap_or_default();
            labels.remove(LABEL_HEADLESS);
            let over = wanted
                .iter()
                .map(|s| {
                    s.addresses.as_ref().map_or(0, Vec::len)
                        + s.not_ready_addresses.as_ref().map_or(0, Vec::len)
                })
                .sum::<usize>()
                > MAX_CAPACITY;
            let annotated = cur
                .metadata
                .annotations
                .as_ref()
                .is_some_and(|a| a.contains_key(OVER_CAPACITY));
            if same_subsets(cur.subsets.as_ref(), &wanted)
                && labels == service_labels
                && !over
                && !annotated
            {
                return Ok(Action::done());
            }
        }
        let mut subsets = wanted;
        let mut annotations = current
            .as_ref()
            .and_then(|c| c.metadata.annotations.clone())
            .unwrap_or_default();
        match trigger {
            Some(t) => {
                annotations.insert(LAST_CHANGE_TRIGGER_TIME.into(), format_trigger_time(t));
            }
            None => {
                annotations.remove(LAST_CHANGE_TRIGGER_TIME);
            }
        }
        if truncate(&mut subsets) {
            annotations.insert(OVER_CAPACITY.into(), TRUNCATED.into());
        } else {
            annotations.remove(OVER_CAPACITY);
        }
        let mut labels = service_labels;
        if has_cluster_ip(svc) {
            labels.remove(LABEL_HEADLESS);
        } else {
            labels.insert(LABEL_HEADLESS.into(), String::new());
        }
        let meta = ObjectMeta {
            labels: Some(labels),
            annotations: Some(annotations),
            ..current
                .as_ref()
                .map(|c| c.metadata.clone())
                .unwrap_or_else(|| ObjectMeta {
                    name: Some(key.name().to_owned()),
                    namespace: key.namespace().map(str::to_owned),
                    ..ObjectMeta::default()
                })
        };
        let endpoints = Endpoints {
            metadata: meta,
            subsets: (!subsets.is_empty()).then_some(subsets),
        };
        let written = if current.is_some() {
            self.endpoints
                .replace(&endpoints, &PostParams::default())
                .await
        } else {
            self.endpoints
                .create(&endpoints, &PostParams::default())
                .await
        };
        if let Err(e) = written {
            let (reason, what) = if current.is_some() {
                (
                    REASON_FAILED_UPDATE,
                    format!("Failed to update endpoint {key}"),
                )
            } else {
                (
                    REASON_FAILED_CREATE,
                    format!("Failed to create endpoint for service {key}"),
                )
            };
            publish(
                &self.recorder,
                endpoints.object_ref(&()),
                EventType::Warning,
                reason,
                "Update",
                format!("{what}: {}", error_chain(&e)),
            );
            return Err(SyncError::cached(format!("Endpoints {key}"), e));
        }
        Ok(Action::done())
    }
}

impl Reconciler<Service> for EndpointsReconciler {
    type Error = SyncError;

    async fn reconcile(
        &self,
        request: Request<Service>,
    ) -> Result<Action, ReconcileError<SyncError>> {
        let key = request.key().clone();
        let Some(svc) = request.object() else {
            self.triggers.forget(&key);
            // Only a deletion seen here removes the Endpoints: an Endpoints object whose
            // Service was never seen may be someone's on purpose.
            if request.last_state().is_some() {
                match self.endpoints.delete(&key, &DeleteParams::default()).await {
                    Ok(_) => {}
                    Err(kore_runtime::client::Error::Api(e)) if status_code(&e) == Some(404) => {}
                    Err(e) => {
                        return Err(SyncError::cached(format!("Endpoints {key}"), e).into());
                    }
                }
            }
            return Ok(Action::done());
        };
        Ok(self.sync(&key, &svc).await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(name: &str, ip: &str, ready: bool) -> Arc<Pod> {
        Arc::new(
            serde_json::from_value(json!({
                "metadata": {"name": name, "namespace": "ns", "uid": name, "labels": {"app": "web"}},
                "spec": {"nodeName": "n1", "containers": [{"name": "c", "ports": [
                    {"name": "http", "containerPort": 8080}, {"name": "metrics", "containerPort": 9090}]}]},
                "status": {"phase": "Running", "podIP": ip,
                           "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]},
            }))
            .expect("a pod"),
        )
    }

    fn svc() -> Service {
        serde_json::from_value(json!({
            "metadata": {"name": "web", "namespace": "ns"},
            "spec": {"selector": {"app": "web"}, "clusterIP": "10.0.0.1",
                     "ports": [{"name": "http", "port": 80, "targetPort": "http"},
                               {"name": "metrics", "port": 9090, "targetPort": 9090}]},
        }))
        .expect("a service")
    }

    #[test]
    fn ready_and_not_ready_pods_share_one_subset_per_port_set() {
        let pods = [
            pod("b", "10.1.0.2", true),
            pod("a", "10.1.0.1", true),
            pod("c", "10.1.0.3", false),
        ];
        let s = subsets(&svc(), &pods);
        assert_eq!(s.len(), 1, "{s:?}");
        let ips = |v: &Option<Vec<EndpointAddress>>| {
            v.iter().flatten().map(|a| a.ip.clone()).collect::<Vec<_>>()
        };
        assert_eq!(ips(&s[0].addresses), ["10.1.0.1", "10.1.0.2"]);
        assert_eq!(ips(&s[0].not_ready_addresses), ["10.1.0.3"]);
        let ports: Vec<(Option<String>, i32)> = s[0]
            .ports
            .iter()
            .flatten()
            .map(|p| (p.name.clone(), p.port))
            .collect();
        assert_eq!(
            ports,
            [(Some("http".into()), 8080), (Some("metrics".into()), 9090)]
        );
    }

    #[test]
    fn more_than_1000_addresses_are_truncated_ready_ones_first() {
        let address = |i: usize| EndpointAddress {
            ip: format!("10.{}.{}.{}", i / 65536, (i / 256) % 256, i % 256),
            ..EndpointAddress::default()
        };
        let mut s = vec![
            EndpointSubset {
                addresses: Some((0..600).map(address).collect()),
                not_ready_addresses: Some((600..900).map(address).collect()),
                ports: None,
            },
            EndpointSubset {
                addresses: Some((900..1200).map(address).collect()),
                not_ready_addresses: None,
                ports: None,
            },
        ];
        assert!(truncate(&mut s));
        let n = |v: &Option<Vec<EndpointAddress>>| v.as_ref().map_or(0, Vec::len);
        assert_eq!((n(&s[0].addresses), n(&s[1].addresses)), (600, 300));
        assert_eq!(n(&s[0].not_ready_addresses), 100, "the room left");
        let mut small = vec![EndpointSubset {
            addresses: Some((0..10).map(address).collect()),
            ..EndpointSubset::default()
        }];
        assert!(!truncate(&mut small));
    }
}
