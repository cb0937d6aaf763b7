//! The ClusterRole aggregation controller (spec §18.5): the `rules` of every ClusterRole with an
//! `aggregationRule` become the union of the rules of the ClusterRoles its
//! `clusterRoleSelectors` match, as kube-controller-manager computes them.
//!
//! This is how operators extend `admin`, `edit` and `view` to their custom resources: they ship
//! ClusterRoles labelled `rbac.authorization.k8s.io/aggregate-to-edit: "true"` and so on. The
//! controller re-aggregates after every ClusterRole change; a write that changes nothing emits
//! no event, so it settles after one pass.

use std::sync::Arc;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::level::{self, Next, Scope};
use crate::auth::aggregation::aggregated_rules;
use crate::registry::Registry;
use crate::registry::rest::{Part, WriteOptions};
use crate::selector::LabelSelector;
use crate::storage::{ListOptions, Storage as _};

const CLUSTER_ROLES: &str = "/rbac.authorization.k8s.io/clusterroles/";

/// Runs the controller until `stop` is cancelled: one aggregation pass at start and one per
/// batch of ClusterRole changes.
pub async fn run(registry: Arc<Registry>, stop: CancellationToken) {
    let registry = &*registry;
    level::run(
        registry,
        &stop,
        "clusterroles",
        &[Scope::all(CLUSTER_ROLES)],
        |_| async move {
            aggregate_all(registry).await;
            Next::Wait
        },
    )
    .await;
}

async fn aggregate_all(registry: &Registry) {
    let page = match registry
        .store()
        .list(CLUSTER_ROLES, &ListOptions::default(), &|_| true)
    {
        Ok(page) => page,
        Err(e) => {
            tracing::warn!(error = %e, "listing clusterroles failed");
            return;
        }
    };
    let mut roles: Vec<Value> = page.items.iter().filter_map(|s| s.value().ok()).collect();
    roles.sort_by(|a, b| {
        a["metadata"]["name"]
            .as_str()
            .cmp(&b["metadata"]["name"].as_str())
    });
    let Some(res) = registry
        .catalog()
        .find("rbac.authorization.k8s.io", "v1", "clusterroles")
    else {
        return;
    };
    for role in &roles {
        let Some(selectors) = role["aggregationRule"]["clusterRoleSelectors"].as_array() else {
            continue;
        };
        let selectors: Vec<LabelSelector> = selectors
            .iter()
            .filter_map(|s| LabelSelector::from_label_selector_json(s).ok())
            .collect();
        let name = role["metadata"]["name"].as_str().unwrap_or_default();
        let rules = aggregated_rules(name, &selectors, &roles);
        let current = role["rules"].as_array().cloned().unwrap_or_default();
        if rules == current {
            continue;
        }
        let mut updated = role.clone();
        updated["rules"] = Value::Array(rules);
        if let Err(e) = registry
            .update(
                &res,
                None,
                name,
                Part::Main,
                updated,
                &WriteOptions::default(),
            )
            .await
        {
            // A conflicting write triggers another pass through its own event.
            tracing::debug!(error = %e, role = name, "aggregating clusterrole failed");
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn matching_roles_contribute_their_rules_once() {
        let selector = LabelSelector::from_label_selector_json(
            &json!({"matchLabels": {"rbac.authorization.k8s.io/aggregate-to-edit": "true"}}),
        )
        .expect("selector");
        let read = json!({"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]});
        let widgets =
            json!({"apiGroups": ["example.com"], "resources": ["widgets"], "verbs": ["*"]});
        let roles = vec![
            json!({"metadata": {"name": "a", "labels": {"rbac.authorization.k8s.io/aggregate-to-edit": "true"}},
                   "rules": [read.clone()]}),
            json!({"metadata": {"name": "b", "labels": {"rbac.authorization.k8s.io/aggregate-to-edit": "true"}},
                   "rules": [read.clone(), widgets.clone()]}),
            json!({"metadata": {"name": "c"}, "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]}),
        ];
        assert_eq!(
            aggregated_rules("edit", &[selector], &roles),
            vec![read, widgets]
        );
    }
}
