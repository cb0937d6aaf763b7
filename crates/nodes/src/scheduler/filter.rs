//! Whether a pod fits a node, with the reasons Kubernetes' filter plugins give when it does not
//! (NodeUnschedulable, TaintToleration, NodeAffinity, NodeResourcesFit, in that order: the
//! first plugin that fails decides, as the scheduling framework stops at the first failure).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Node, NodeSelectorRequirement, NodeSelectorTerm, Pod, Taint, Toleration,
};

use crate::resources::{PODS, Resources};

/// What the scheduler keeps of a node.
#[derive(Clone, Debug)]
pub struct NodeInfo {
    /// The node's name.
    pub name: String,
    labels: BTreeMap<String, String>,
    taints: Vec<Taint>,
    unschedulable: bool,
    /// `status.allocatable`.
    pub allocatable: Resources,
}

impl NodeInfo {
    /// Reads a Node.
    pub fn new(node: &Node) -> Self {
        let spec = node.spec.as_ref();
        NodeInfo {
            name: node.metadata.name.clone().unwrap_or_default(),
            labels: node.metadata.labels.clone().unwrap_or_default(),
            taints: spec.and_then(|s| s.taints.clone()).unwrap_or_default(),
            unschedulable: spec.and_then(|s| s.unschedulable).unwrap_or(false),
            allocatable: Resources::from_list(
                node.status.as_ref().and_then(|s| s.allocatable.as_ref()),
            ),
        }
    }
}

/// Why a node does not fit; [`Unfit::reasons`] are the strings Kubernetes counts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Unfit {
    /// `spec.unschedulable` (cordoned) and not tolerated.
    Unschedulable,
    /// A NoSchedule/NoExecute taint the pod does not tolerate.
    Taint(String, String),
    /// nodeSelector or required node affinity.
    Affinity,
    /// Not enough of these resources left (`pods` means too many pods).
    Resources(Vec<String>),
}

impl Unfit {
    /// The reasons as Kubernetes words them in a FitError.
    pub fn reasons(&self) -> Vec<String> {
        match self {
            Unfit::Unschedulable => vec!["node(s) were unschedulable".into()],
            Unfit::Taint(k, v) => vec![format!("node(s) had untolerated taint {{{k}: {v}}}")],
            Unfit::Affinity => vec!["node(s) didn't match Pod's node affinity/selector".into()],
            Unfit::Resources(names) => names
                .iter()
                .map(|n| {
                    if n == PODS {
                        "Too many pods".to_string()
                    } else {
                        format!("Insufficient {n}")
                    }
                })
                .collect(),
        }
    }

    /// Whether evicting other pods could help (only for resources); Kubernetes' preemption
    /// reports the other nodes as "Preemption is not helpful for scheduling".
    pub fn resolvable(&self) -> bool {
        matches!(self, Unfit::Resources(_))
    }
}

const UNSCHEDULABLE_TAINT: &str = "node.kubernetes.io/unschedulable";

/// Checks `pod` (asking `requests`) against `node` with `used` already taken.
pub fn fits(
    pod: &Pod,
    requests: &Resources,
    node: &NodeInfo,
    used: &Resources,
) -> Result<(), Unfit> {
    let tolerations: &[Toleration] = pod
        .spec
        .as_ref()
        .and_then(|s| s.tolerations.as_deref())
        .unwrap_or_default();
    if node.unschedulable {
        let cordon = Taint {
            key: UNSCHEDULABLE_TAINT.into(),
            effect: "NoSchedule".into(),
            ..Taint::default()
        };
        if !tolerations.iter().any(|t| tolerates(t, &cordon)) {
            return Err(Unfit::Unschedulable);
        }
    }
    for taint in &node.taints {
        if matches!(taint.effect.as_str(), "NoSchedule" | "NoExecute")
            && !tolerations.iter().any(|t| tolerates(t, taint))
        {
            return Err(Unfit::Taint(
                taint.key.clone(),
                taint.value.clone().unwrap_or_default(),
            ));
        }
    }
    if !matches_affinity(pod, node) {
        return Err(Unfit::Affinity);
    }
    let short = short_resources(requests, node, used);
    if short.is_empty() {
        Ok(())
    } else {
        Err(Unfit::Resources(short))
    }
}

/// The resources `requests` needs more of than `node` has left, pods first, then cpu, memory,
/// ephemeral-storage and the others by name (the order Kubernetes lists them in).
fn short_resources(requests: &Resources, node: &NodeInfo, used: &Resources) -> Vec<String> {
    let rank = |n: &str| match n {
        PODS => 0,
        "cpu" => 1,
        "memory" => 2,
        "ephemeral-storage" => 3,
        _ => 4,
    };
    let mut short: Vec<String> = requests
        .0
        .iter()
        .filter(|(_, want)| **want > 0)
        .filter(|(name, want)| node.allocatable.get(name) - used.get(name) < **want)
        .map(|(name, _)| name.clone())
        .collect();
    short.sort_by_key(|n| rank(n));
    short
}

/// Kubernetes' `Toleration.ToleratesTaint`.
fn tolerates(t: &Toleration, taint: &Taint) -> bool {
    let effect = t.effect.as_deref().unwrap_or_default();
    if !effect.is_empty() && effect != taint.effect {
        return false;
    }
    let key = t.key.as_deref().unwrap_or_default();
    if !key.is_empty() && key != taint.key {
        return false;
    }
    match t.operator.as_deref().unwrap_or("Equal") {
        "Exists" => true,
        "Equal" | "" => {
            t.value.as_deref().unwrap_or_default() == taint.value.as_deref().unwrap_or_default()
        }
        _ => false,
    }
}

/// nodeSelector and required node affinity (the NodeAffinity plugin checks both).
fn matches_affinity(pod: &Pod, node: &NodeInfo) -> bool {
    let Some(spec) = &pod.spec else { return true };
    if let Some(sel) = &spec.node_selector
        && !sel.iter().all(|(k, v)| node.labels.get(k) == Some(v))
    {
        return false;
    }
    let required = spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|na| {
            na.required_during_scheduling_ignored_during_execution
                .as_ref()
        });
    match required {
        // The terms are ORed; no term matches nothing.
        Some(sel) => sel
            .node_selector_terms
            .iter()
            .any(|term| term_matches(term, node)),
        None => true,
    }
}

/// A term's expressions and fields are ANDed; an empty term matches nothing.
fn term_matches(term: &NodeSelectorTerm, node: &NodeInfo) -> bool {
    let exprs = term.match_expressions.as_deref().unwrap_or_default();
    let fields = term.match_fields.as_deref().unwrap_or_default();
    if exprs.is_empty() && fields.is_empty() {
        return false;
    }
    exprs
        .iter()
        .all(|r| requirement_matches(r, node.labels.get(&r.key).map(String::as_str)))
        && fields
            .iter()
            .all(|r| r.key == "metadata.name" && requirement_matches(r, Some(node.name.as_str())))
}

fn requirement_matches(r: &NodeSelectorRequirement, value: Option<&str>) -> bool {
    let values = r.values.as_deref().unwrap_or_default();
    let int = |s: &str| s.parse::<i64>().ok();
    match r.operator.as_str() {
        "In" => value.is_some_and(|v| values.iter().any(|x| x == v)),
        "NotIn" => value.is_none_or(|v| !values.iter().any(|x| x == v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        "Gt" | "Lt" => {
            let (Some(have), Some(bound)) =
                (value.and_then(int), values.first().and_then(|b| int(b)))
            else {
                return false;
            };
            if r.operator == "Gt" {
                have > bound
            } else {
                have < bound
            }
        }
        _ => false,
    }
}

/// Kubernetes' FitError message: how many nodes failed for each reason, then what preemption
/// found ("0/3 nodes are available: 1 node(s) were unschedulable, 2 Insufficient cpu.
/// preemption: 0/3 nodes are available: 1 Preemption is not helpful for scheduling, 2 No
/// preemption victims found for incoming pod.").
/// With no nodes at all, Kubernetes says "no nodes available to schedule pods".
pub fn fit_error(total: usize, unfit: &[Unfit]) -> String {
    if total == 0 {
        return "no nodes available to schedule pods".into();
    }
    let histogram = |reasons: Vec<String>| {
        let mut counts: BTreeMap<String, usize> = BTreeMap::new();
        for r in reasons {
            *counts.entry(r).or_default() += 1;
        }
        let mut parts: Vec<String> = counts.iter().map(|(r, n)| format!("{n} {r}")).collect();
        parts.sort();
        parts.join(", ")
    };
    let mut msg = format!(
        "0/{total} nodes are available: {}.",
        histogram(unfit.iter().flat_map(Unfit::reasons).collect())
    );
    let preemption = unfit
        .iter()
        .map(|u| {
            if u.resolvable() {
                "No preemption victims found for incoming pod".to_string()
            } else {
                "Preemption is not helpful for scheduling".to_string()
            }
        })
        .collect::<Vec<_>>();
    msg += &format!(
        " preemption: 0/{total} nodes are available: {}.",
        histogram(preemption)
    );
    msg
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fit_error_counts_reasons_as_kubernetes_does() {
        let unfit = vec![
            Unfit::Affinity,
            Unfit::Resources(vec!["cpu".into()]),
            Unfit::Resources(vec!["cpu".into(), "memory".into()]),
        ];
        assert_eq!(
            fit_error(3, &unfit),
            "0/3 nodes are available: 1 Insufficient memory, 1 node(s) didn't match Pod's node \
             affinity/selector, 2 Insufficient cpu. preemption: 0/3 nodes are available: 1 \
             Preemption is not helpful for scheduling, 2 No preemption victims found for \
             incoming pod."
        );
        assert_eq!(fit_error(0, &[]), "no nodes available to schedule pods");
    }

    #[test]
    fn tolerations_match_as_kubernetes_does() {
        let taint = Taint {
            key: "dedicated".into(),
            value: Some("gpu".into()),
            effect: "NoSchedule".into(),
            ..Taint::default()
        };
        let t = |key: Option<&str>, op: Option<&str>, value: Option<&str>, effect: Option<&str>| {
            Toleration {
                key: key.map(Into::into),
                operator: op.map(Into::into),
                value: value.map(Into::into),
                effect: effect.map(Into::into),
                ..Toleration::default()
            }
        };
        assert!(tolerates(
            &t(Some("dedicated"), None, Some("gpu"), None),
            &taint
        ));
        assert!(tolerates(&t(None, Some("Exists"), None, None), &taint));
        assert!(!tolerates(
            &t(Some("dedicated"), None, Some("cpu"), None),
            &taint
        ));
        assert!(!tolerates(
            &t(Some("dedicated"), Some("Exists"), None, Some("NoExecute")),
            &taint
        ));
    }
}
