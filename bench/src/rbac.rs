//! RBAC cost: a GET of one ConfigMap in-process as the administrator (`system:masters`, which
//! skips RBAC) and as a ServiceAccount authorized by a RoleBinding, and raw authorizer
//! decisions over a policy with many bindings.

use std::time::Instant;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace, ServiceAccount};
use kore_testenv::TestEnv;
use kore_testenv::kore_apiserver::auth::rbac::{Attributes, ResourceAttributes, Snapshot, Target};
use kore_testenv::kore_apiserver::http::User;
use kube::api::{Api, PostParams};
use serde_json::json;

use crate::suite::Row;

async fn gets_per_second(client: kube::Client, n: usize) -> anyhow::Result<f64> {
    let cms: Api<ConfigMap> = Api::namespaced(client, "demo");
    let start = Instant::now();
    for _ in 0..n {
        cms.get("c").await?;
    }
    Ok(n as f64 / start.elapsed().as_secs_f64())
}

fn create<T: serde::de::DeserializeOwned>(v: serde_json::Value) -> anyhow::Result<T> {
    Ok(serde_json::from_value(v)?)
}

/// Runs the measurements; `quick` uses small counts.
pub(crate) async fn run(quick: bool) -> anyhow::Result<Vec<Row>> {
    let n = if quick { 300 } else { 5_000 };
    let env = TestEnv::start().await?;
    let admin = env.client();
    Api::<Namespace>::all(admin.clone())
        .create(
            &PostParams::default(),
            &create(json!({"metadata": {"name": "demo"}}))?,
        )
        .await?;
    Api::<ServiceAccount>::namespaced(admin.clone(), "demo")
        .create(
            &PostParams::default(),
            &create(json!({"metadata": {"name": "op"}}))?,
        )
        .await?;
    Api::<ConfigMap>::namespaced(admin.clone(), "demo")
        .create(
            &PostParams::default(),
            &create(json!({"metadata": {"name": "c"}, "data": {"k": "v"}}))?,
        )
        .await?;
    let rbac = |kind: &str, plural: &str, obj: serde_json::Value| {
        let ar = kube::api::ApiResource {
            group: "rbac.authorization.k8s.io".into(),
            version: "v1".into(),
            api_version: "rbac.authorization.k8s.io/v1".into(),
            kind: kind.into(),
            plural: plural.into(),
        };
        let api: Api<kube::api::DynamicObject> = Api::namespaced_with(admin.clone(), "demo", &ar);
        async move {
            api.create(&PostParams::default(), &serde_json::from_value(obj)?)
                .await?;
            anyhow::Ok(())
        }
    };
    rbac(
        "Role",
        "roles",
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": "r", "namespace": "demo"},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]}),
    )
    .await?;
    rbac(
        "RoleBinding",
        "rolebindings",
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "b", "namespace": "demo"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r"},
        "subjects": [{"kind": "ServiceAccount", "name": "op"}]}),
    )
    .await?;
    let sa = env.service_account_client("demo", "op").await?;
    // Warm up both paths (and build the RBAC index).
    gets_per_second(admin.clone(), 50).await?;
    gets_per_second(sa.clone(), 50).await?;
    let admin_rate = gets_per_second(admin, n).await?;
    let sa_rate = gets_per_second(sa, n).await?;

    // Raw decisions: 1,000 RoleBindings in the namespace, the allowing one last.
    let bindings: Vec<serde_json::Value> = (0..1_000)
        .map(|i| json!({"metadata": {"name": format!("b{i:04}"), "namespace": "demo"},
            "roleRef": {"kind": "Role", "name": "r"},
            "subjects": [{"kind": "ServiceAccount", "name": if i == 999 { "op".to_string() } else { format!("sa{i}") }}]}))
        .collect();
    let roles = vec![json!({"metadata": {"name": "r", "namespace": "demo"},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]})];
    let snapshot = Snapshot::from_objects(&roles, &[], &bindings, &[]);
    let user = User {
        name: "system:serviceaccount:demo:op".into(),
        groups: vec![
            "system:serviceaccounts".into(),
            "system:serviceaccounts:demo".into(),
            "system:authenticated".into(),
        ],
        ..User::default()
    };
    let attrs = Attributes {
        verb: "get".into(),
        target: Target::Resource(ResourceAttributes {
            group: String::new(),
            version: "v1".into(),
            resource: "configmaps".into(),
            subresource: String::new(),
            namespace: "demo".into(),
            name: "c".into(),
        }),
    };
    let decisions = if quick { 2_000 } else { 50_000 };
    let start = Instant::now();
    let mut allowed = 0usize;
    for _ in 0..decisions {
        allowed += usize::from(snapshot.authorize(&user, &attrs).allowed);
    }
    anyhow::ensure!(allowed == decisions, "every decision allows");
    let decision_rate = decisions as f64 / start.elapsed().as_secs_f64();

    let row = |measure: &str, kore: f64, unit: &str, note: &str| Row {
        measure: measure.into(),
        kore,
        unit: unit.into(),
        peer: None,
        target: None,
        note: note.into(),
    };
    Ok(vec![
        row(
            "GET configmap as admin (system:masters)",
            admin_rate,
            "requests/s",
            "in-process kube::Client, sequential",
        ),
        row(
            "GET configmap as a ServiceAccount (RoleBinding)",
            sa_rate,
            "requests/s",
            "in-process kube::Client, sequential; token check + RBAC",
        ),
        row(
            "RBAC decisions, 1,000 RoleBindings in the namespace",
            decision_rate,
            "decisions/s",
            "Snapshot::authorize, allowing binding last",
        ),
    ])
}

#[cfg(test)]
mod tests {
    #[tokio::test]
    async fn the_quick_rbac_suite_measures_every_row() {
        let rows = super::run(true).await.expect("runs");
        assert_eq!(rows.len(), 3);
        for row in &rows {
            println!("{}: {:.0} {}", row.measure, row.kore, row.unit);
            assert!(row.kore > 0.0, "{}", row.measure);
        }
    }

    /// The full measurement: `cargo test -p kore-bench --release -- --ignored --nocapture rbac`.
    #[tokio::test]
    #[ignore = "a benchmark; run in release"]
    async fn the_full_rbac_suite() {
        for row in super::run(false).await.expect("runs") {
            println!("{}: {:.0} {}", row.measure, row.kore, row.unit);
        }
    }
}
