//! Tests of `patch/apply`.

use super::*;

const DEPLOYMENT: Lists<'static> = Lists::Builtin("Deployment");
const CONFIGMAP: Lists<'static> = Lists::Builtin("ConfigMap");

fn params(manager: &'static str, force: bool) -> ApplyParams<'static> {
    ApplyParams {
        manager,
        force,
        api_version: "v1",
        subresource: "",
        lists: CONFIGMAP,
    }
}

fn run(live: Option<&Value>, config: Value, p: &ApplyParams<'_>) -> Result<Value, ApiError> {
    apply(live, &config, p, &mut |v| Ok(v))
}

fn fields_of(obj: &Value, manager: &str) -> Value {
    obj["metadata"]["managedFields"]
        .as_array()
        .and_then(|a| a.iter().find(|e| e["manager"] == manager))
        .map(|e| e["fieldsV1"].clone())
        .unwrap_or(Value::Null)
}

#[test]
fn apply_sets_of_containers_are_keyed_by_name_and_metadata_is_not_owned() {
    let config = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "d", "labels": {"app": "x"}},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "x"}},
                 "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}});
    let set = field_set(&config, DEPLOYMENT);
    assert_eq!(
        set.to_fields_v1(),
        json!({"f:metadata": {"f:labels": {"f:app": {}}},
               "f:spec": {"f:replicas": {}, "f:selector": {},
                          "f:template": {"f:spec": {"f:containers": {
                              "k:{\"name\":\"c\"}": {".": {}, "f:image": {}, "f:name": {}}}}}}})
    );
}

#[test]
fn reapplying_without_a_field_removes_it_unless_someone_else_owns_it() {
    let first = run(
        None,
        json!({"metadata": {"name": "c"}, "data": {"a": "1", "b": "2"}}),
        &params("m1", false),
    )
    .expect("applies");
    let shared = run(
        Some(&first),
        json!({"metadata": {"name": "c"}, "data": {"b": "2"}}),
        &params("m2", false),
    )
    .expect("same value: shared, no conflict");
    let second = run(
        Some(&shared),
        json!({"metadata": {"name": "c"}, "data": {}}),
        &params("m1", false),
    )
    .expect("applies");
    assert_eq!(second["data"], json!({"b": "2"}), "a dropped, b kept by m2");
    assert_eq!(fields_of(&second, "m2"), json!({"f:data": {"f:b": {}}}));
}

#[test]
fn changing_another_managers_field_conflicts_unless_forced() {
    let first = run(
        None,
        json!({"metadata": {"name": "c"}, "data": {"a": "1"}}),
        &params("m1", false),
    )
    .expect("applies");
    let err = run(
        Some(&first),
        json!({"metadata": {"name": "c"}, "data": {"a": "2"}}),
        &params("m2", false),
    )
    .expect_err("conflicts");
    assert_eq!(err.code(), 409);
    assert_eq!(
        err.to_string(),
        "Apply failed with 1 conflict: conflict with \"m1\": .data.a"
    );
    let forced = run(
        Some(&first),
        json!({"metadata": {"name": "c"}, "data": {"a": "2"}}),
        &params("m2", true),
    )
    .expect("forced");
    assert_eq!(forced["data"]["a"], "2");
    assert_eq!(
        fields_of(&forced, "m1"),
        Value::Null,
        "m1 owns nothing left"
    );
    assert_eq!(fields_of(&forced, "m2"), json!({"f:data": {"f:a": {}}}));
}

#[test]
fn conflicts_with_several_fields_list_them_per_manager() {
    let err = conflict_error(vec![
        ("\"b\"".into(), ".x".into()),
        ("\"a\" using v1".into(), ".y".into()),
        ("\"a\" using v1".into(), ".z".into()),
    ]);
    assert_eq!(
        err.to_string(),
        "Apply failed with 3 conflicts: conflicts with \"a\" using v1:\n- .y\n- .z\nconflicts with \"b\":\n- .x"
    );
}

#[test]
fn updates_take_changed_fields_from_other_managers() {
    let old = json!({"metadata": {"name": "c"}, "data": {"a": "1", "b": "2"}});
    let entries = track_update(Vec::new(), None, &old, ("creator", "v1", ""), CONFIGMAP);
    let mut old = old;
    put_managed(&mut old, &mut entries.clone());
    let new = json!({"metadata": {"name": "c"}, "data": {"a": "9", "b": "2"}});
    let entries = track_update(
        decode_managed(&old),
        Some(&old),
        &new,
        ("editor", "v1", ""),
        CONFIGMAP,
    );
    let by = |m: &str| {
        entries
            .iter()
            .find(|e| e.manager == m)
            .map(|e| e.fields.to_fields_v1())
    };
    assert_eq!(by("creator"), Some(json!({"f:data": {".": {}, "f:b": {}}})));
    assert_eq!(by("editor"), Some(json!({"f:data": {"f:a": {}}})));
}

#[test]
fn merging_keyed_lists_keeps_other_items_and_merges_matching_ones() {
    let live = json!({"spec": {"template": {"spec": {"containers": [
        {"name": "a", "image": "1"}, {"name": "b", "image": "2"}]}}}});
    let config = json!({"spec": {"template": {"spec": {"containers": [
        {"name": "b", "image": "3"}, {"name": "c", "image": "4"}]}}}});
    let out = merge(Some(&live), &config, &Cursor::root(DEPLOYMENT));
    assert_eq!(
        out["spec"]["template"]["spec"]["containers"],
        json!([{"name": "a", "image": "1"}, {"name": "b", "image": "3"}, {"name": "c", "image": "4"}])
    );
}

fn deployment_params(manager: &'static str) -> ApplyParams<'static> {
    ApplyParams {
        lists: DEPLOYMENT,
        api_version: "apps/v1",
        ..params(manager, false)
    }
}

fn containers(c: Value) -> Value {
    json!({"metadata": {"name": "d"}, "spec": {"template": {"spec": {"containers": c}}}})
}

#[test]
fn a_list_item_stays_while_another_manager_owns_something_inside_it() {
    let first = run(
        None,
        containers(json!([{"name": "a", "image": "i"}])),
        &deployment_params("m1"),
    )
    .expect("m1");
    let second = run(
        Some(&first),
        containers(json!([{"name": "a", "env": [{"name": "X", "value": "1"}]}])),
        &deployment_params("m2"),
    )
    .expect("m2 adds env to the same container");
    let third = run(
        Some(&second),
        json!({"metadata": {"name": "d"}}),
        &deployment_params("m1"),
    )
    .expect("m1 gives the container up");
    assert_eq!(
        third["spec"]["template"]["spec"]["containers"],
        json!([{"name": "a", "env": [{"name": "X", "value": "1"}]}]),
        "the image (m1's alone) goes, the container (shared) and env (m2's) stay"
    );
}

#[test]
fn finalizers_are_a_set_each_manager_owning_its_values() {
    let with = |f: Value| json!({"metadata": {"name": "c", "finalizers": f}});
    let first = run(None, with(json!(["example.com/a"])), &params("m1", false)).expect("m1");
    let second = run(
        Some(&first),
        with(json!(["example.com/b"])),
        &params("m2", false),
    )
    .expect("m2");
    assert_eq!(
        second["metadata"]["finalizers"],
        json!(["example.com/a", "example.com/b"])
    );
    assert_eq!(
        fields_of(&second, "m2"),
        json!({"f:metadata": {"f:finalizers": {"v:\"example.com/b\"": {}}}})
    );
    let third = run(Some(&second), with(json!([])), &params("m1", false)).expect("m1");
    assert_eq!(third["metadata"]["finalizers"], json!(["example.com/b"]));
}

#[test]
fn fields_the_decoder_drops_are_not_owned() {
    let drop_bogus = &mut |mut v: Value| {
        if let Some(d) = v.get_mut("data").and_then(Value::as_object_mut) {
            d.remove("bogus");
        }
        Ok(v)
    };
    let out = apply(
        None,
        &json!({"metadata": {"name": "c"}, "data": {"a": "1", "bogus": "x"}}),
        &params("m1", false),
        drop_bogus,
    )
    .expect("applies");
    assert_eq!(fields_of(&out, "m1"), json!({"f:data": {"f:a": {}}}));
}

#[test]
fn random_applies_by_three_managers_keep_ownership_and_data_consistent() {
    use rand::{Rng, SeedableRng};
    let managers = ["m0", "m1", "m2"];
    let keys = ["a", "b", "c", "d", "e"];
    for seed in 0..50u64 {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let mut live: Option<Value> = None;
        for _ in 0..40 {
            let m = managers[rng.random_range(0..managers.len())];
            let force = rng.random_bool(0.5);
            let mut data = Map::new();
            for k in keys {
                if rng.random_bool(0.4) {
                    data.insert(k.into(), json!(rng.random_range(0..2).to_string()));
                }
            }
            let config = json!({"metadata": {"name": "c"}, "data": data});
            let Ok(out) = run(live.as_ref(), config, &params(m, force)) else {
                assert!(!force, "a forced apply never conflicts");
                continue;
            };
            // The applier's values are in the object, and it owns exactly its keys.
            for (k, v) in &data {
                assert_eq!(&out["data"][k], v, "seed {seed}");
            }
            let owned: Vec<String> = decode_managed(&out)
                .iter()
                .find(|e| e.manager == m)
                .map(|e| e.fields.paths())
                .unwrap_or_default();
            let mut expected: Vec<String> = data.keys().map(|k| format!(".data.{k}")).collect();
            if data.is_empty() {
                expected.push(".data".into());
            }
            assert_eq!(owned, expected, "seed {seed}");
            // Every data key is owned by someone, and every owned key exists.
            let mut all = FieldSet::new();
            for e in decode_managed(&out) {
                all.union(&e.fields);
            }
            let present: Vec<&String> = out["data"]
                .as_object()
                .map(|d| d.keys().collect())
                .unwrap_or_default();
            for k in &present {
                assert!(
                    all.child("f:data")
                        .and_then(|d| d.child(&format!("f:{k}")))
                        .is_some(),
                    "seed {seed}: {k} is owned by nobody in {out}"
                );
            }
            for path in all.paths() {
                if let Some(k) = path.strip_prefix(".data.") {
                    assert!(
                        present.iter().any(|p| *p == k),
                        "seed {seed}: {path} owned but absent"
                    );
                }
            }
            live = Some(out);
        }
    }
}

#[test]
fn objects_differing_only_in_managed_fields_are_the_same() {
    let a =
        json!({"metadata": {"name": "c", "managedFields": [{"manager": "x"}]}, "data": {"a": "1"}});
    let b = json!({"metadata": {"name": "c"}, "data": {"a": "1"}});
    let c = json!({"metadata": {"name": "c", "labels": {"l": "v"}}, "data": {"a": "1"}});
    assert!(same_ignoring_managed_fields(&a, &b));
    assert!(same_ignoring_managed_fields(&b, &a));
    assert!(!same_ignoring_managed_fields(&a, &c));
    assert!(!same_ignoring_managed_fields(
        &b,
        &json!({"metadata": {"name": "c"}})
    ));
}

#[test]
fn unchanged_objects_keep_the_writers_time() {
    let old = vec![ManagedEntry {
        manager: "m".into(),
        operation: Operation::Apply,
        api_version: "v1".into(),
        time: Some("2020-01-01T00:00:00Z".into()),
        subresource: String::new(),
        fields: FieldSet::from_fields_v1(&json!({"f:a": {}})),
    }];
    let mut new = old.clone();
    new[0].time = None;
    settle_times(&mut new, &old, ("m", Operation::Apply, ""), false, "now");
    assert_eq!(new[0].time.as_deref(), Some("2020-01-01T00:00:00Z"));
    settle_times(&mut new, &old, ("m", Operation::Apply, ""), true, "now");
    assert_eq!(new[0].time.as_deref(), Some("now"));
}
