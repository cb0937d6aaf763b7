//! ClusterRole aggregation as a pure function: the rules an aggregated ClusterRole ends up
//! with. The controller that writes them is `controllers/clusterroles.rs`; the shipped default
//! roles are checked against this same function (`auth/policy.rs`).

use serde_json::{Map, Value};

use crate::selector::LabelSelector;

/// The union of the rules of `roles` (other than `name`) that `selectors` match, in name order
/// and selector order, without duplicates.
pub(crate) fn aggregated_rules(
    name: &str,
    selectors: &[LabelSelector],
    roles: &[Value],
) -> Vec<Value> {
    let mut rules: Vec<Value> = Vec::new();
    for selector in selectors {
        for role in roles {
            if role["metadata"]["name"].as_str() == Some(name) {
                continue;
            }
            let labels: Option<&Map<String, Value>> = role["metadata"]["labels"].as_object();
            if !selector.matches(labels) {
                continue;
            }
            for rule in role["rules"].as_array().into_iter().flatten() {
                if !rules.contains(rule) {
                    rules.push(rule.clone());
                }
            }
        }
    }
    rules
}
