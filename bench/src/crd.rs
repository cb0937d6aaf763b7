//! Custom resources end to end inside the server: how long a new CRD takes to be Established
//! (served, in discovery, condition written), and how many custom objects per second the
//! registry's write path creates — decode, prune, default, schema validation, metadata rules,
//! storage — next to ConfigMaps through the same path as the reference.
//!
//! Everything runs in this process against an in-memory `TestEnv`, calling the registry
//! directly (no HTTP), one create at a time, so the numbers are the per-object cost of the
//! write path and not of the transport.

use std::time::{Duration, Instant};

use anyhow::Context as _;
use kore_testenv::TestEnv;
use kore_testenv::kore_apiserver::registry::rest::WriteOptions;
use serde_json::{Value, json};

use crate::suite::Row;

fn crd(n: usize) -> Value {
    let mut props = serde_json::Map::new();
    for i in 0..20 {
        props.insert(format!("s{i}"), json!({"type": "string", "maxLength": 64}));
        props.insert(
            format!("n{i}"),
            json!({"type": "integer", "minimum": 0, "maximum": 1000, "default": 1}),
        );
    }
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("widgets{n}.example.com")},
        "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": format!("widgets{n}"), "kind": format!("Widget{n}")},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": props}}}}}]}
    })
}

fn widget(i: usize) -> Value {
    let mut spec = serde_json::Map::new();
    for f in 0..20 {
        spec.insert(format!("s{f}"), json!(format!("value-{i}-{f}")));
        if f % 2 == 0 {
            spec.insert(format!("n{f}"), json!((i + f) % 1000));
        }
    }
    json!({"apiVersion": "example.com/v1", "kind": "Widget0",
           "metadata": {"name": format!("w{i}")}, "spec": spec})
}

fn configmap(i: usize) -> Value {
    let data: serde_json::Map<String, Value> = (0..20)
        .map(|f| (format!("k{f}"), json!(format!("value-{i}-{f}"))))
        .collect();
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": format!("c{i}")}, "data": data})
}

/// Creates CRD number `n` and returns how long it took to be Established.
async fn establish(env: &TestEnv, n: usize) -> anyhow::Result<Duration> {
    let registry = env.server().registry();
    let catalog = registry.catalog();
    let crds = catalog
        .find("apiextensions.k8s.io", "v1", "customresourcedefinitions")
        .context("CRDs are served")?;
    let start = Instant::now();
    registry
        .create(&crds, None, crd(n), &WriteOptions::default())
        .await
        .map_err(|e| anyhow::anyhow!("creating the CRD failed: {e}"))?;
    let name = format!("widgets{n}.example.com");
    loop {
        let c = registry
            .get_value(&crds, None, &name)
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        let established = c
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .is_some_and(|cs| {
                cs.iter()
                    .any(|x| x["type"] == "Established" && x["status"] == "True")
            });
        if established {
            return Ok(start.elapsed());
        }
        anyhow::ensure!(
            start.elapsed() < Duration::from_secs(10),
            "not Established in 10 s"
        );
        tokio::task::yield_now().await;
    }
}

/// Runs the measurements; `quick` uses few objects.
pub(crate) async fn run(quick: bool) -> anyhow::Result<Vec<Row>> {
    let (objects, crds) = if quick { (500, 3) } else { (20_000, 20) };
    let env = TestEnv::start().await?;
    let mut waits = Vec::with_capacity(crds);
    for n in 0..crds {
        waits.push(establish(&env, n).await?);
    }
    waits.sort();
    let median = waits[waits.len() / 2];

    let registry = env.server().registry();
    let catalog = registry.catalog();
    let widgets = catalog
        .find("example.com", "v1", "widgets0")
        .context("widgets0 served")?;
    let configmaps = catalog
        .find("", "v1", "configmaps")
        .context("configmaps served")?;
    let opts = WriteOptions::default();
    let start = Instant::now();
    for i in 0..objects {
        registry
            .create(&widgets, Some("default"), widget(i), &opts)
            .await
            .map_err(|e| anyhow::anyhow!("creating a widget failed: {e}"))?;
    }
    let custom_rate = objects as f64 / start.elapsed().as_secs_f64();
    let start = Instant::now();
    for i in 0..objects {
        registry
            .create(&configmaps, Some("default"), configmap(i), &opts)
            .await
            .map_err(|e| anyhow::anyhow!("creating a ConfigMap failed: {e}"))?;
    }
    let cm_rate = objects as f64 / start.elapsed().as_secs_f64();
    env.stop().await;
    Ok(vec![
        Row {
            measure: "CRD create → Established (median)".into(),
            kore: median.as_secs_f64() * 1000.0,
            unit: "ms".into(),
            peer: None,
            target: None,
            note: format!(
                "{crds} CRDs created one after another in memory; the controller serves each, then writes its conditions"
            ),
        },
        Row {
            measure: "custom object creates/s, 40-field schema, registry write path (1 client)"
                .into(),
            kore: custom_rate,
            unit: "objects/s".into(),
            peer: Some(("ConfigMap, 20 keys, same path".into(), cm_rate)),
            target: None,
            note: format!(
                "{objects} creates each, in memory, no HTTP: decode, prune, default, validate, metadata, storage"
            ),
        },
    ])
}

#[cfg(test)]
mod tests {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_quick_crd_suite_measures_both_rows() {
        let rows = super::run(true).await.expect("the suite runs");
        assert_eq!(rows.len(), 2);
        assert!(rows.iter().all(|r| r.kore > 0.0), "{rows:?}");
    }

    /// The full run, for the report: `cargo test -p kore-bench --release crd -- --ignored --nocapture`.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    #[ignore = "a measurement, not a test"]
    async fn full_crd_suite() {
        for row in super::run(false).await.expect("the suite runs") {
            println!("{row:?}");
        }
    }
}
