//! Resource quantities and what a pod asks of a node: its requests as the scheduler counts
//! them (Kubernetes' `resource.PodRequests`).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, Pod};

/// Resource amounts by name, in thousandths of a unit (`cpu: 250m` is 250, `memory: 1Ki` is
/// 1,024,000), so that every resource adds up the same way.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Resources(pub BTreeMap<String, i128>);

/// The scheduler's pod count is a resource too.
pub const PODS: &str = "pods";

impl Resources {
    /// Reads a resource list (`requests`, `allocatable`); unreadable quantities count as 0.
    pub fn from_list(
        list: Option<&BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>>,
    ) -> Self {
        Resources(
            list.into_iter()
                .flatten()
                .map(|(k, q)| (k.clone(), parse_milli(&q.0).unwrap_or(0)))
                .collect(),
        )
    }

    /// The amount of `name` (0 when absent).
    pub fn get(&self, name: &str) -> i128 {
        self.0.get(name).copied().unwrap_or(0)
    }

    /// Adds `other` into `self`.
    pub fn add(&mut self, other: &Resources) {
        for (k, v) in &other.0 {
            *self.0.entry(k.clone()).or_insert(0) += v;
        }
    }

    /// Takes `other` out of `self`.
    pub fn sub(&mut self, other: &Resources) {
        for (k, v) in &other.0 {
            *self.0.entry(k.clone()).or_insert(0) -= v;
        }
    }

    /// Each resource at the larger of the two.
    fn max_with(&mut self, other: &Resources) {
        for (k, v) in &other.0 {
            let e = self.0.entry(k.clone()).or_insert(0);
            *e = (*e).max(*v);
        }
    }
}

/// A container's requests; a limit without a request counts as the request (the API server
/// defaults one from the other).
fn container_requests(c: &Container) -> Resources {
    let Some(r) = &c.resources else {
        return Resources::default();
    };
    let mut out = Resources::from_list(r.limits.as_ref());
    for (k, v) in Resources::from_list(r.requests.as_ref()).0 {
        out.0.insert(k, v);
    }
    out
}

/// What `pod` asks of its node: the sum of its containers' requests or, when larger, the
/// largest init container's (they run one at a time), plus its overhead and one pod.
pub fn pod_requests(pod: &Pod) -> Resources {
    let mut total = Resources::default();
    let Some(spec) = &pod.spec else {
        return total;
    };
    for c in &spec.containers {
        total.add(&container_requests(c));
    }
    for c in spec.init_containers.iter().flatten() {
        total.max_with(&container_requests(c));
    }
    total.add(&Resources::from_list(spec.overhead.as_ref()));
    total.0.insert(PODS.into(), 1000);
    total
}

/// Parses a Kubernetes quantity (`"2"`, `"250m"`, `"1.5Gi"`, `"1e3"`) into thousandths,
/// rounded up as Kubernetes rounds requests.
pub fn parse_milli(s: &str) -> Option<i128> {
    let milli = (kore_runtime::quantity::parse(s)? * 1000.0).ceil();
    milli.is_finite().then_some(milli as i128)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn quantities_read_in_thousandths() {
        assert_eq!(parse_milli("2"), Some(2000));
        assert_eq!(parse_milli("250m"), Some(250));
        assert_eq!(parse_milli("1Ki"), Some(1_024_000));
        assert_eq!(parse_milli("1.5"), Some(1500));
        assert_eq!(parse_milli("1e3"), Some(1_000_000));
        assert_eq!(parse_milli("1k"), Some(1_000_000));
        assert_eq!(parse_milli("x"), None);
        assert_eq!(parse_milli("1Qi"), None);
    }

    #[test]
    fn init_containers_count_at_their_largest() {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "p"},
            "spec": {
                "initContainers": [
                    {"name": "i", "resources": {"requests": {"cpu": "3"}}},
                ],
                "containers": [
                    {"name": "a", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}},
                    {"name": "b", "resources": {"limits": {"cpu": "500m"}}},
                ],
            }
        }))
        .expect("pod");
        let r = pod_requests(&pod);
        assert_eq!(r.get("cpu"), 3000);
        assert_eq!(r.get("memory"), 1024i128.pow(3) * 1000);
        assert_eq!(r.get(PODS), 1000);
    }
}
