//! The default cluster policy present at startup (spec §18.5): the ClusterRoles and
//! ClusterRoleBindings every client relies on, as JSON objects the server creates if missing.
//!
//! `admin`, `edit` and `view` aggregate the built-in `system:aggregate-to-*` roles (and any
//! ClusterRole an operator labels `aggregate-to-*`); they are shipped pre-expanded so they
//! grant at once, before the aggregation controller (`controllers/clusterroles.rs`) has run.

use serde_json::{Value, json};

const READ: &[&str] = &["get", "list", "watch"];
const WRITE: &[&str] = &["create", "update", "patch", "delete", "deletecollection"];
const READ_WRITE: &[&str] = &[
    "get",
    "list",
    "watch",
    "create",
    "update",
    "patch",
    "delete",
    "deletecollection",
];

fn rule(groups: &[&str], resources: &[&str], verbs: &[&str]) -> Value {
    json!({"apiGroups": groups, "resources": resources, "verbs": verbs})
}

fn urls(paths: &[&str], verbs: &[&str]) -> Value {
    json!({"nonResourceURLs": paths, "verbs": verbs})
}

fn meta(name: &str, labels: Value) -> Value {
    let mut labels = labels;
    labels["kubernetes.io/bootstrapping"] = json!("rbac-defaults");
    json!({
        "name": name,
        "labels": labels,
        "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"},
    })
}

fn cluster_role(name: &str, rules: Vec<Value>) -> Value {
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
           "metadata": meta(name, json!({})), "rules": rules})
}

fn binding(name: &str, groups: &[&str]) -> Value {
    let subjects: Vec<Value> = groups
        .iter()
        .map(|g| json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": g}))
        .collect();
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
           "metadata": meta(name, json!({})),
           "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
           "subjects": subjects})
}

fn view_rules() -> Vec<Value> {
    vec![
        rule(
            &[""],
            &[
                "configmaps",
                "endpoints",
                "persistentvolumeclaims",
                "persistentvolumeclaims/status",
                "pods",
                "replicationcontrollers",
                "replicationcontrollers/scale",
                "serviceaccounts",
                "services",
                "services/status",
            ],
            READ,
        ),
        rule(
            &[""],
            &[
                "bindings",
                "events",
                "limitranges",
                "namespaces/status",
                "pods/log",
                "pods/status",
                "replicationcontrollers/status",
                "resourcequotas",
                "resourcequotas/status",
            ],
            READ,
        ),
        rule(&[""], &["namespaces"], READ),
        rule(&["discovery.k8s.io"], &["endpointslices"], READ),
        rule(
            &["apps"],
            &[
                "controllerrevisions",
                "daemonsets",
                "daemonsets/status",
                "deployments",
                "deployments/scale",
                "deployments/status",
                "replicasets",
                "replicasets/scale",
                "replicasets/status",
                "statefulsets",
                "statefulsets/scale",
                "statefulsets/status",
            ],
            READ,
        ),
        rule(
            &["autoscaling"],
            &[
                "horizontalpodautoscalers",
                "horizontalpodautoscalers/status",
            ],
            READ,
        ),
        rule(
            &["batch"],
            &["cronjobs", "cronjobs/status", "jobs", "jobs/status"],
            READ,
        ),
        rule(
            &["policy"],
            &["poddisruptionbudgets", "poddisruptionbudgets/status"],
            READ,
        ),
        rule(
            &["networking.k8s.io"],
            &["ingresses", "ingresses/status", "networkpolicies"],
            READ,
        ),
    ]
}

fn edit_rules() -> Vec<Value> {
    vec![
        rule(
            &[""],
            &[
                "pods/attach",
                "pods/exec",
                "pods/portforward",
                "pods/proxy",
                "secrets",
                "services/proxy",
            ],
            READ,
        ),
        rule(&[""], &["serviceaccounts"], &["impersonate"]),
        rule(
            &[""],
            &[
                "pods",
                "pods/attach",
                "pods/exec",
                "pods/portforward",
                "pods/proxy",
            ],
            WRITE,
        ),
        rule(&[""], &["pods/eviction"], &["create"]),
        rule(
            &[""],
            &[
                "configmaps",
                "events",
                "persistentvolumeclaims",
                "replicationcontrollers",
                "replicationcontrollers/scale",
                "secrets",
                "serviceaccounts",
                "services",
                "services/proxy",
            ],
            WRITE,
        ),
        rule(&[""], &["serviceaccounts/token"], &["create"]),
        rule(
            &["apps"],
            &[
                "daemonsets",
                "deployments",
                "deployments/rollback",
                "deployments/scale",
                "replicasets",
                "replicasets/scale",
                "statefulsets",
                "statefulsets/scale",
            ],
            WRITE,
        ),
        rule(&["autoscaling"], &["horizontalpodautoscalers"], WRITE),
        rule(&["batch"], &["cronjobs", "jobs"], WRITE),
        rule(&["policy"], &["poddisruptionbudgets"], WRITE),
        rule(
            &["networking.k8s.io"],
            &["ingresses", "networkpolicies"],
            WRITE,
        ),
        rule(&["coordination.k8s.io"], &["leases"], READ_WRITE),
    ]
}

fn admin_rules() -> Vec<Value> {
    vec![
        rule(
            &["rbac.authorization.k8s.io"],
            &["roles", "rolebindings"],
            READ_WRITE,
        ),
        rule(
            &["authorization.k8s.io"],
            &["localsubjectaccessreviews"],
            &["create"],
        ),
    ]
}

fn aggregated(name: &str, label: Option<&str>, rules: Vec<Value>) -> Value {
    let labels = match label {
        Some(l) => json!({ format!("rbac.authorization.k8s.io/aggregate-to-{l}"): "true" }),
        None => json!({}),
    };
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
           "metadata": meta(name, labels),
           "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {
               format!("rbac.authorization.k8s.io/aggregate-to-{name}"): "true"}}]},
           "rules": rules})
}

/// A ClusterRole whose rules aggregate into `into` (`admin`, `edit` or `view`).
fn labelled_role(name: &str, into: &str, rules: Vec<Value>) -> Value {
    let labels = json!({ format!("rbac.authorization.k8s.io/aggregate-to-{into}"): "true" });
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
           "metadata": meta(name, labels), "rules": rules})
}

/// The default ClusterRoles, then the default ClusterRoleBindings.
pub fn default_objects() -> Vec<Value> {
    let public = ["/healthz", "/livez", "/readyz", "/version", "/version/"];
    let mut discovery = vec![
        "/api",
        "/api/*",
        "/apis",
        "/apis/*",
        "/openapi",
        "/openapi/*",
    ];
    discovery.extend(public);
    discovery.sort_unstable();
    // Pre-expanded in the order aggregation produces (matching roles by name), so the
    // aggregation controller finds nothing to change at startup.
    let view = view_rules();
    let edit: Vec<Value> = edit_rules()
        .into_iter()
        .chain(view.iter().cloned())
        .collect();
    let admin: Vec<Value> = edit.iter().cloned().chain(admin_rules()).collect();
    vec![
        cluster_role(
            "cluster-admin",
            vec![rule(&["*"], &["*"], &["*"]), urls(&["*"], &["*"])],
        ),
        cluster_role(
            "system:basic-user",
            vec![
                rule(
                    &["authorization.k8s.io"],
                    &["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
                    &["create"],
                ),
                rule(
                    &["authentication.k8s.io"],
                    &["selfsubjectreviews"],
                    &["create"],
                ),
            ],
        ),
        cluster_role("system:discovery", vec![urls(&discovery, &["get"])]),
        cluster_role("system:public-info-viewer", vec![urls(&public, &["get"])]),
        cluster_role(
            "system:auth-delegator",
            vec![
                rule(&["authentication.k8s.io"], &["tokenreviews"], &["create"]),
                rule(
                    &["authorization.k8s.io"],
                    &["subjectaccessreviews"],
                    &["create"],
                ),
            ],
        ),
        labelled_role("system:aggregate-to-admin", "admin", admin_rules()),
        labelled_role("system:aggregate-to-edit", "edit", edit_rules()),
        labelled_role("system:aggregate-to-view", "view", view_rules()),
        aggregated("admin", None, admin),
        aggregated("edit", Some("admin"), edit),
        aggregated("view", Some("edit"), view),
        binding("cluster-admin", &["system:masters"]),
        binding("system:basic-user", &["system:authenticated"]),
        binding("system:discovery", &["system:authenticated"]),
        binding(
            "system:public-info-viewer",
            &["system:authenticated", "system:unauthenticated"],
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::aggregation::aggregated_rules;
    use crate::selector::LabelSelector;

    #[test]
    fn the_shipped_aggregated_roles_are_already_what_aggregation_computes() {
        let mut roles: Vec<Value> = default_objects()
            .into_iter()
            .filter(|o| o["kind"] == "ClusterRole")
            .collect();
        roles.sort_by(|a, b| {
            a["metadata"]["name"]
                .as_str()
                .cmp(&b["metadata"]["name"].as_str())
        });
        for name in ["admin", "edit", "view"] {
            let role = roles
                .iter()
                .find(|r| r["metadata"]["name"] == name)
                .expect("shipped");
            let selectors: Vec<LabelSelector> = role["aggregationRule"]["clusterRoleSelectors"]
                .as_array()
                .expect("selectors")
                .iter()
                .map(|s| LabelSelector::from_label_selector_json(s).expect("valid"))
                .collect();
            assert_eq!(
                Value::Array(aggregated_rules(name, &selectors, &roles)),
                role["rules"],
                "{name}"
            );
        }
    }
}
