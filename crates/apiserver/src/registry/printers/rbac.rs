//! Printers of rbac.authorization.k8s.io/v1 kinds (RoleBinding, ClusterRoleBinding; roles get
//! the generic columns, as on a real server).

use serde_json::Value;

use super::*;

/// RoleBinding and ClusterRoleBinding columns.
pub(super) const BINDING: [Column; 6] = [
    NAME,
    shown("Role", "The role bound, as Kind/name."),
    AGE,
    wide("Users", "Users bound."),
    wide("Groups", "Groups bound."),
    wide(
        "ServiceAccounts",
        "Service accounts bound, as namespace/name.",
    ),
];

pub(super) fn binding_cells(obj: &Value, now: i64) -> [Value; BINDING.len()] {
    let subjects = |kind: &str| -> Value {
        let names: Vec<String> = obj
            .get("subjects")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|s| s.get("kind").and_then(Value::as_str) == Some(kind))
            .map(|s| {
                let name = s.get("name").and_then(Value::as_str).unwrap_or_default();
                match s.get("namespace").and_then(Value::as_str) {
                    Some(ns) if kind == "ServiceAccount" => format!("{ns}/{name}"),
                    _ => name.to_owned(),
                }
            })
            .collect();
        Value::from(names.join(", "))
    };
    let role = format!(
        "{}/{}",
        text(obj, &["roleRef", "kind"]),
        text(obj, &["roleRef", "name"])
    );
    [
        name(obj),
        Value::from(role),
        age_cell(obj, now),
        subjects("User"),
        subjects("Group"),
        subjects("ServiceAccount"),
    ]
}
