//! The `default/kubernetes` Service (spec §18.11): how pods find the API server. Every real
//! API server keeps one, with the first address of the service range as its cluster IP, port
//! 443 (`https`) forwarding to the serving port, and an Endpoints and an EndpointSlice named
//! `kubernetes` that point at the serving address.
//!
//! The server creates the three objects at start ([`ensure`]) and again with the real address
//! when it starts listening on a socket; this controller keeps them in step afterwards: a
//! deleted object comes back, and a Service whose ports or an Endpoints/EndpointSlice whose
//! address was changed is set back. Like Kubernetes' bootstrap controller it leaves the rest of
//! the Service (labels, annotations, selectors someone added) alone.
//!
//! Until the server listens on a socket (an in-process server, as `TestEnv` runs by default)
//! the address is `127.0.0.1:6443`, kube-apiserver's default secure port.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;

use serde_json::{Value, json};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::level::{self, Next, Scope};
use crate::api::error::ApiError;
use crate::registry::Registry;
use crate::registry::resource::Resource;
use crate::registry::rest::{Part, WriteOptions};

/// The Service's (and its endpoints') name and namespace.
pub const NAME: &str = "kubernetes";
/// The namespace of the Service.
pub const NAMESPACE: &str = "default";
/// The Service's cluster IP: the first address of kore's service range, 10.96.0.0/12 (which
/// the Service IP allocator never hands out).
pub const CLUSTER_IP: &str = "10.96.0.1";
/// The address reported before the server listens on a socket.
pub const UNBOUND: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 6443);

/// The address clients should use for a server listening on `addr`: a wildcard listener is
/// reached through loopback (kore does not guess the host's interfaces).
pub fn advertised(addr: SocketAddr) -> SocketAddr {
    if addr.ip().is_unspecified() {
        let ip = if addr.is_ipv4() {
            IpAddr::V4(Ipv4Addr::LOCALHOST)
        } else {
            IpAddr::V6(std::net::Ipv6Addr::LOCALHOST)
        };
        SocketAddr::new(ip, addr.port())
    } else {
        addr
    }
}

struct Kinds {
    services: Arc<Resource>,
    endpoints: Arc<Resource>,
    slices: Arc<Resource>,
}

fn kinds(registry: &Registry) -> Option<Kinds> {
    let catalog = registry.catalog();
    Some(Kinds {
        services: catalog.find("", "v1", "services")?,
        endpoints: catalog.find("", "v1", "endpoints")?,
        slices: catalog.find("discovery.k8s.io", "v1", "endpointslices")?,
    })
}

/// Runs the controller until `stop` is cancelled: the three objects are checked at start and
/// after every change of the Service, Endpoints or EndpointSlice `default/kubernetes`,
/// against the address `addr` holds.
pub async fn run(
    registry: Arc<Registry>,
    addr: watch::Receiver<SocketAddr>,
    stop: CancellationToken,
) {
    let Some(k) = kinds(&registry) else {
        return;
    };
    let prefixes = [
        k.services.collection_prefix(Some(NAMESPACE)),
        k.endpoints.collection_prefix(Some(NAMESPACE)),
        k.slices.collection_prefix(Some(NAMESPACE)),
    ];
    // Only the three objects named `kubernetes`: other Services in `default` do not wake it.
    let scopes: Vec<Scope<'_>> = prefixes.iter().map(|p| Scope::named(p, NAME)).collect();
    let registry = &*registry;
    let addr = &addr;
    level::run(
        registry,
        &stop,
        "kubernetes-service",
        &scopes,
        |_| async move {
            let now = *addr.borrow();
            ensure(registry, now).await;
            Next::Wait
        },
    )
    .await;
}

/// Creates the Service, Endpoints and EndpointSlice, or sets their managed parts back to what
/// a server serving at `addr` keeps. Failures are logged; the next change retries.
pub async fn ensure(registry: &Registry, addr: SocketAddr) {
    let Some(k) = kinds(registry) else {
        return;
    };
    let addr = advertised(addr);
    let service = service(addr.port());
    reconcile(registry, &k.services, service, |want, have| {
        let mut changed = false;
        for field in ["type", "ports"] {
            if have["spec"][field] != want["spec"][field] {
                have["spec"][field] = want["spec"][field].clone();
                changed = true;
            }
        }
        changed
    })
    .await;
    reconcile(registry, &k.endpoints, endpoints(addr), |want, have| {
        let mut changed = have["subsets"] != want["subsets"];
        have["subsets"] = want["subsets"].clone();
        if have["metadata"]["labels"][SKIP_MIRROR] != want["metadata"]["labels"][SKIP_MIRROR] {
            have["metadata"]["labels"][SKIP_MIRROR] = json!("true");
            changed = true;
        }
        changed
    })
    .await;
    reconcile(registry, &k.slices, endpoint_slice(addr), |want, have| {
        let mut changed = false;
        for field in ["addressType", "endpoints", "ports"] {
            if have[field] != want[field] {
                have[field] = want[field].clone();
                changed = true;
            }
        }
        if have["metadata"]["labels"][SERVICE_NAME] != json!(NAME) {
            have["metadata"]["labels"][SERVICE_NAME] = json!(NAME);
            changed = true;
        }
        changed
    })
    .await;
}

const SKIP_MIRROR: &str = "endpointslice.kubernetes.io/skip-mirror";
const SERVICE_NAME: &str = "kubernetes.io/service-name";

/// Creates `want` if missing; otherwise lets `fix` set the managed parts of the stored object
/// back and writes it if `fix` changed something.
async fn reconcile(
    registry: &Registry,
    res: &Arc<Resource>,
    want: Value,
    fix: impl Fn(&Value, &mut Value) -> bool,
) {
    let outcome = match registry.get_value(res, Some(NAMESPACE), NAME) {
        Err(ApiError::NotFound { .. }) => registry
            .create(res, Some(NAMESPACE), want, &WriteOptions::default())
            .await
            .map(drop),
        Err(e) => Err(e),
        Ok(mut have) => {
            if !fix(&want, &mut have) {
                return;
            }
            registry
                .update(
                    res,
                    Some(NAMESPACE),
                    NAME,
                    Part::Main,
                    have,
                    &WriteOptions::default(),
                )
                .await
                .map(drop)
        }
    };
    match outcome {
        // A racing write (or the namespace's end) triggers another pass through its event.
        Ok(()) | Err(ApiError::AlreadyExists { .. } | ApiError::Conflict { .. }) => {}
        Err(e) => {
            tracing::warn!(error = %e, resource = %res.group_resource(), "keeping default/kubernetes failed")
        }
    }
}

fn service(port: u16) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": NAME, "namespace": NAMESPACE,
                     "labels": {"component": "apiserver", "provider": "kubernetes"}},
        "spec": {
            "type": "ClusterIP",
            "clusterIP": CLUSTER_IP,
            "sessionAffinity": "None",
            "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": port}],
        },
    })
}

fn endpoints(addr: SocketAddr) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Endpoints",
        "metadata": {"name": NAME, "namespace": NAMESPACE, "labels": {SKIP_MIRROR: "true"}},
        "subsets": [{
            "addresses": [{"ip": addr.ip().to_string()}],
            "ports": [{"name": "https", "port": addr.port(), "protocol": "TCP"}],
        }],
    })
}

fn endpoint_slice(addr: SocketAddr) -> Value {
    let family = if addr.is_ipv4() { "IPv4" } else { "IPv6" };
    json!({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": NAME, "namespace": NAMESPACE, "labels": {SERVICE_NAME: NAME}},
        "addressType": family,
        "endpoints": [{"addresses": [addr.ip().to_string()], "conditions": {"ready": true}}],
        "ports": [{"name": "https", "port": addr.port(), "protocol": "TCP"}],
    })
}
