//! The cost of the CRD schema pipeline: prune + default + validate of one custom object
//! against a realistic 40-field structural schema, on one core (the target is
//! ≥ 50,000 objects/s).
//!
//! The schema mixes what operators write: nested objects, a map, int-or-string fields,
//! arrays with `x-kubernetes-list-type: map` and `set`, strings with patterns, enums and
//! formats, bounded integers, defaults, and a preserve-unknown-fields subtree. Each object
//! is distinct (values vary with its index), carries one unknown field to prune and misses
//! a few defaulted ones. Objects are cloned outside the timed region; the timed loop runs
//! the three algorithms on each object in turn, in one thread.

use std::time::{Duration, Instant};

use anyhow::anyhow;
use kore_apiserver::schema::{self, Structural};
use serde_json::{Value, json};

use crate::suite::{Row, Target};

/// Runs the measurement on a blocking thread; `quick` measures 1,000 objects once.
pub(crate) async fn run(quick: bool) -> anyhow::Result<Vec<Row>> {
    let (batch, rounds) = if quick { (1_000, 1) } else { (10_000, 20) };
    let m = tokio::task::spawn_blocking(move || measure(batch, rounds)).await??;
    let r = tokio::task::spawn_blocking(move || measure_rules(batch, rounds)).await??;
    Ok(vec![
        Row {
            measure: "CRD schema prune + default + validate, 40-field schema (1 core)".into(),
            kore: m.per_second,
            unit: "objects/s".into(),
            peer: None,
            target: Some(Target::AtLeast(50_000.0)),
            note: format!(
                "{} objects in {} rounds of {batch}; {:.1} µs/object; one unknown field pruned and 3 defaults applied per object",
                m.objects,
                rounds,
                m.per_object.as_secs_f64() * 1e6
            ),
        },
        Row {
            measure: format!(
                "CRD CEL rules, {RULES} x-kubernetes-validations on the same schema (1 core)"
            ),
            kore: r.per_second,
            unit: "objects/s".into(),
            peer: None,
            target: None,
            note: format!(
                "{} objects in {} rounds of {batch}; {:.1} µs/object for the rules alone (compiled once with the schema; each object passes them all)",
                r.objects,
                rounds,
                r.per_object.as_secs_f64() * 1e6
            ),
        },
    ])
}

/// How many rules [`schema_with_rules`] adds.
const RULES: usize = 6;

/// The benchmark schema with CEL rules of the kinds operators write, at several levels.
fn schema_with_rules() -> Value {
    let mut schema = schema_json();
    let spec = &mut schema["properties"]["spec"];
    spec["x-kubernetes-validations"] = json!([
        {"rule": "self.replicas <= 100 || self.paused", "message": "at most 100 replicas unless paused"},
        {"rule": "!has(self.owner) || self.owner.endsWith('@example.com')"},
        {"rule": "!has(self.tags) || !('forbidden' in self.tags)", "reason": "FieldValueForbidden"},
    ]);
    let props = &mut spec["properties"];
    props["image"]["x-kubernetes-validations"] = json!([{"rule": "self.startsWith('registry.')", "messageExpression": "'image ' + self + ' is not from the registry'"}]);
    props["ports"]["x-kubernetes-validations"] =
        json!([{"rule": "self.all(p, p.port > 0 && p.port < 65536)"}]);
    props["labels"]["x-kubernetes-validations"] = json!([{"rule": "self.all(k, k.size() < 64)"}]);
    schema
}

/// The cost of evaluating the rules of [`schema_with_rules`] on valid objects.
pub(crate) fn measure_rules(batch: usize, rounds: usize) -> anyhow::Result<Measurement> {
    let s = Structural::from_json(&schema_with_rules(), "openAPIV3Schema")
        .map_err(|errs| anyhow!("the benchmark rules do not compile: {errs:?}"))?;
    let mut objects: Vec<Value> = (0..batch).map(object).collect();
    for o in &mut objects {
        schema::prune(&s, o);
        schema::apply_defaults(&s, o);
    }
    for obj in objects.iter().take(10) {
        let errs = schema::validate_rules(&s, obj, None);
        anyhow::ensure!(errs.is_empty(), "benchmark object breaks a rule: {errs:?}");
    }
    let mut total = Duration::ZERO;
    let mut count = 0usize;
    for _ in 0..rounds {
        let start = Instant::now();
        for obj in &objects {
            std::hint::black_box(schema::validate_rules(&s, obj, None));
        }
        total += start.elapsed();
        count += objects.len();
    }
    let secs = total.as_secs_f64().max(1e-9);
    Ok(Measurement {
        objects: count,
        per_second: count as f64 / secs,
        per_object: total / u32::try_from(count.max(1)).unwrap_or(u32::MAX),
    })
}

/// One measurement.
pub(crate) struct Measurement {
    pub(crate) objects: usize,
    pub(crate) per_second: f64,
    pub(crate) per_object: Duration,
}

pub(crate) fn measure(batch: usize, rounds: usize) -> anyhow::Result<Measurement> {
    let s = Structural::from_json(&schema_json(), "openAPIV3Schema")
        .map_err(|errs| anyhow!("the benchmark schema is not structural: {errs:?}"))?;
    let objects: Vec<Value> = (0..batch).map(object).collect();
    // The objects must be valid, or the loop would measure error reporting.
    for obj in objects.iter().take(10) {
        let mut o = obj.clone();
        let pruned = schema::prune(&s, &mut o);
        schema::apply_defaults(&s, &mut o);
        let errs = schema::validate(&s, &o);
        anyhow::ensure!(errs.is_empty(), "benchmark object is invalid: {errs:?}");
        anyhow::ensure!(
            pruned == ["spec.legacyField"],
            "unexpected pruning: {pruned:?}"
        );
    }
    let mut total = Duration::ZERO;
    let mut count = 0usize;
    for _ in 0..rounds {
        let mut work = objects.clone();
        let start = Instant::now();
        for obj in &mut work {
            let pruned = schema::prune(&s, obj);
            schema::apply_defaults(&s, obj);
            let errs = schema::validate(&s, obj);
            std::hint::black_box((pruned, errs));
        }
        total += start.elapsed();
        count += work.len();
    }
    let secs = total.as_secs_f64().max(1e-9);
    Ok(Measurement {
        objects: count,
        per_second: count as f64 / secs,
        per_object: total / u32::try_from(count.max(1)).unwrap_or(u32::MAX),
    })
}

/// A 40-leaf schema shaped like a real operator's.
fn schema_json() -> Value {
    let int_or_string = json!({"x-kubernetes-int-or-string": true});
    json!({
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": {
                "type": "object",
                "required": ["image", "replicas"],
                "properties": {
                    "replicas": {"type": "integer", "minimum": 0, "maximum": 100, "default": 1},
                    "image": {"type": "string", "pattern": "^[a-z0-9./:-]+$", "maxLength": 255},
                    "pullPolicy": {"type": "string", "enum": ["Always", "IfNotPresent", "Never"], "default": "IfNotPresent"},
                    "paused": {"type": "boolean"},
                    "priority": {"type": "integer", "minimum": -10, "maximum": 10},
                    "ratio": {"type": "number", "minimum": 0, "maximum": 1},
                    "owner": {"type": "string", "format": "email"},
                    "createdAt": {"type": "string", "format": "date-time"},
                    "timeout": {"type": "string", "format": "duration"},
                    "labels": {"type": "object", "additionalProperties": {"type": "string", "maxLength": 63}},
                    "resources": {"type": "object", "properties": {
                        "cpu": int_or_string, "memory": int_or_string,
                        "gpu": {"type": "integer", "minimum": 0, "maximum": 8},
                    }},
                    "ports": {
                        "type": "array", "maxItems": 16,
                        "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                        "items": {"type": "object", "required": ["name", "port"], "properties": {
                            "name": {"type": "string", "pattern": "^[a-z][a-z0-9-]*$", "maxLength": 15},
                            "port": {"type": "integer", "minimum": 1, "maximum": 65535},
                            "protocol": {"type": "string", "enum": ["TCP", "UDP", "SCTP"], "default": "TCP"},
                        }},
                    },
                    "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string", "maxLength": 32}},
                    "env": {"type": "array", "items": {"type": "object", "required": ["name"], "properties": {
                        "name": {"type": "string", "minLength": 1, "pattern": "^[A-Za-z_][A-Za-z0-9_]*$"},
                        "value": {"type": "string"},
                    }}},
                    "strategy": {"type": "object", "properties": {
                        "type": {"type": "string", "enum": ["Rolling", "Recreate"]},
                        "maxSurge": int_or_string,
                        "maxUnavailable": int_or_string,
                        "partition": {"type": "integer", "minimum": 0},
                    }},
                    "storage": {"type": "object", "properties": {
                        "size": {"type": "string", "pattern": "^[0-9]+(Mi|Gi|Ti)$"},
                        "class": {"type": "string", "maxLength": 63},
                        "accessModes": {"type": "array", "maxItems": 3, "items": {"type": "string", "enum": ["ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany"]}},
                    }},
                    "network": {"type": "object", "properties": {
                        "host": {"type": "string", "format": "hostname"},
                        "ip": {"type": "string", "format": "ipv4"},
                        "cidr": {"type": "string", "format": "cidr"},
                    }},
                    "schedule": {"type": "object", "properties": {
                        "cron": {"type": "string", "pattern": "^(\\S+\\s+){4}\\S+$"},
                        "suspend": {"type": "boolean"},
                        "history": {"type": "integer", "minimum": 0, "maximum": 100, "default": 3},
                    }},
                    "config": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                },
            },
            "status": {"type": "object", "properties": {
                "phase": {"type": "string", "enum": ["Pending", "Running", "Failed"]},
                "observedGeneration": {"type": "integer", "minimum": 0},
                "readyReplicas": {"type": "integer", "minimum": 0},
                "conditions": {
                    "type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"],
                    "items": {"type": "object", "required": ["type", "status"], "properties": {
                        "type": {"type": "string", "maxLength": 316},
                        "status": {"type": "string", "enum": ["True", "False", "Unknown"]},
                        "reason": {"type": "string", "pattern": "^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"},
                        "message": {"type": "string", "maxLength": 32768},
                        "lastTransitionTime": {"type": "string", "format": "date-time"},
                    }},
                },
            }},
        },
    })
}

/// Object `i`: every field set but three defaulted ones, plus one unknown field.
fn object(i: usize) -> Value {
    json!({
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {"name": format!("w{i}"), "namespace": "default", "labels": {"app": "bench"}},
        "spec": {
            "replicas": i % 100,
            "image": format!("registry.example.com/team/app:{}.{}", i % 7, i % 13),
            "paused": i.is_multiple_of(2),
            "priority": (i % 21) as i64 - 10,
            "ratio": (i % 100) as f64 / 100.0,
            "owner": format!("owner{}@example.com", i % 50),
            "createdAt": "2024-05-01T12:00:00Z",
            "timeout": "1h30m",
            "labels": {"team": "core", "tier": format!("t{}", i % 3)},
            "resources": {"cpu": "500m", "memory": "1Gi", "gpu": i % 4},
            "ports": [
                {"name": "http", "port": 8080},
                {"name": "metrics", "port": 9090, "protocol": "TCP"},
                {"name": "dns", "port": 53, "protocol": "UDP"},
            ],
            "tags": ["a", "b", format!("t{i}")],
            "env": [{"name": "MODE", "value": "fast"}, {"name": "LEVEL", "value": format!("{}", i % 5)}],
            "strategy": {"type": "Rolling", "maxSurge": "25%", "maxUnavailable": 1, "partition": 0},
            "storage": {"size": format!("{}Gi", 1 + i % 10), "class": "standard", "accessModes": ["ReadWriteOnce"]},
            "network": {"host": "db.example.com", "ip": format!("10.0.{}.{}", i % 250, (i / 250) % 250), "cidr": "10.0.0.0/16"},
            "schedule": {"cron": "*/5 * * * *", "suspend": false},
            "config": {"anything": {"goes": [1, 2, 3]}, "here": true},
            "legacyField": "dropped by pruning",
        },
        "status": {
            "phase": "Running",
            "observedGeneration": 3,
            "readyReplicas": i % 100,
            "conditions": [
                {"type": "Ready", "status": "True", "reason": "AllGood", "message": "ready", "lastTransitionTime": "2024-05-01T12:00:00Z"},
                {"type": "Progressing", "status": "False", "reason": "Done", "message": "", "lastTransitionTime": "2024-05-01T12:00:00Z"},
            ],
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_benchmark_objects_are_valid_and_get_pruned_and_defaulted() {
        let s = Structural::from_json(&schema_json(), "s").expect("structural");
        let mut obj = object(7);
        assert_eq!(schema::prune(&s, &mut obj), ["spec.legacyField"]);
        schema::apply_defaults(&s, &mut obj);
        assert_eq!(obj["spec"]["pullPolicy"], "IfNotPresent");
        assert_eq!(obj["spec"]["schedule"]["history"], 3);
        assert_eq!(obj["spec"]["ports"][0]["protocol"], "TCP");
        assert_eq!(schema::validate(&s, &obj), []);
        let m = measure(50, 1).expect("measures");
        assert_eq!(m.objects, 50);
        assert!(m.per_second > 0.0);
    }

    #[test]
    fn the_benchmark_rules_compile_pass_and_catch_a_bad_object() {
        let s = Structural::from_json(&schema_with_rules(), "s").expect("rules compile");
        let mut obj = object(3);
        schema::prune(&s, &mut obj);
        schema::apply_defaults(&s, &mut obj);
        assert_eq!(schema::validate_rules(&s, &obj, None), []);
        obj["spec"]["image"] = json!("docker.io/app");
        obj["spec"]["tags"] = json!(["forbidden"]);
        let errs: Vec<String> = schema::validate_rules(&s, &obj, None)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            errs,
            [
                "spec: Forbidden: failed rule: !has(self.tags) || !('forbidden' in self.tags)",
                "spec.image: Invalid value: \"string\": image docker.io/app is not from the registry",
            ]
        );
        let r = measure_rules(20, 1).expect("measures");
        assert_eq!(r.objects, 20);
    }

    /// `cargo test --release -p kore-bench schema -- --ignored --nocapture`
    #[test]
    #[ignore = "a measurement, run in release"]
    fn prints_the_schema_pipeline_rate() {
        let m = measure(10_000, 20).expect("measures");
        println!(
            "schema pipeline: {:.0} objects/s ({:.2} µs/object, {} objects)",
            m.per_second,
            m.per_object.as_secs_f64() * 1e6,
            m.objects
        );
        // Each stage alone, on objects already pruned and defaulted where that matters.
        let s = Structural::from_json(&schema_json(), "s").expect("structural");
        let objects: Vec<Value> = (0..10_000).map(object).collect();
        let time = |f: &dyn Fn(&mut Value)| {
            let mut work = objects.clone();
            let start = Instant::now();
            for o in &mut work {
                f(o);
            }
            start.elapsed().as_secs_f64() * 1e6 / work.len() as f64
        };
        let prune = time(&|o| {
            std::hint::black_box(schema::prune(&s, o));
        });
        let default = time(&|o| schema::apply_defaults(&s, o));
        let mut ready = objects.clone();
        for o in &mut ready {
            schema::prune(&s, o);
            schema::apply_defaults(&s, o);
        }
        let start = Instant::now();
        for o in &ready {
            std::hint::black_box(schema::validate(&s, o));
        }
        let validate = start.elapsed().as_secs_f64() * 1e6 / ready.len() as f64;
        println!("µs/object: prune {prune:.2}, default {default:.2}, validate {validate:.2}");
    }
}
