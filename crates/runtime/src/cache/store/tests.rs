//! Tests of `cache/store.rs`.

use super::*;
use k8s_openapi::api::core::v1::ConfigMap;
use serde_json::json;
use std::collections::{HashMap, HashSet};

fn cm(name: &str, rv: u64, src: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "ns", "resourceVersion": rv.to_string(),
                     "labels": {"src": src}},
        "data": {"k": "v"},
    })
}

fn by_src(cm: &ConfigMap) -> Vec<String> {
    cm.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get("src").cloned())
        .into_iter()
        .collect()
}

#[test]
fn an_entry_is_found_by_its_key_and_keeps_its_version() {
    let e = Entry::new("ns/a", 300, b"xyz");
    assert_eq!((e.key(), e.rv(), e.packed()), ("ns/a", 300, &b"xyz"[..]));
    let set: HashSet<Entry> = [e, Entry::new("b", 0, b"")].into_iter().collect();
    assert!(set.contains(&b"ns/a"[..]) && set.contains(&b"b"[..]) && !set.contains(&b"ns/b"[..]));
}

#[test]
fn an_older_version_never_replaces_a_newer_one() {
    let store = Store::<ConfigMap>::new(16);
    let p = store.pack(&cm("a", 5, "x")).expect("packs");
    assert!(matches!(store.apply(&p), Outcome::Changed(..)));
    let old = store.pack(&cm("a", 4, "y")).expect("packs");
    assert!(matches!(store.apply(&old), Outcome::Stale(_)));
    let got = store
        .get(&ObjectKey::namespaced("ns", "a"))
        .expect("cached");
    assert_eq!(got.metadata.resource_version.as_deref(), Some("5"));
}

#[test]
fn a_recorded_deletion_keeps_older_updates_out_until_the_watch_passes_it() {
    let store = Store::<ConfigMap>::new(16);
    store.apply(&store.pack(&cm("a", 5, "x")).expect("packs"));
    assert!(matches!(
        store.delete("ns/a", 7, true),
        Outcome::Changed(..)
    ));
    assert!(matches!(
        store.apply(&store.pack(&cm("a", 6, "x")).expect("packs")),
        Outcome::Stale(_)
    ));
    store.observed(7);
    assert!(matches!(
        store.apply(&store.pack(&cm("a", 8, "x")).expect("packs")),
        Outcome::Changed(..)
    ));
}

#[test]
fn indexes_follow_updates_deletes_and_swaps() {
    let store = Store::<ConfigMap>::new(16);
    store.add_index("src", Arc::new(by_src));
    store.apply(&store.pack(&cm("a", 1, "x")).expect("packs"));
    store.apply(&store.pack(&cm("b", 2, "x")).expect("packs"));
    assert_eq!(store.by_index("src", "x").len(), 2);
    // An update that leaves the indexed value as it was keeps the key under it, and readers
    // by the index get the new version.
    store.apply(&store.pack(&cm("a", 2, "x")).expect("packs"));
    assert_eq!(store.keys_by_index("src", "x").len(), 2);
    let a = store.by_index("src", "x");
    assert!(
        a.iter()
            .any(|cm| cm.metadata.resource_version.as_deref() == Some("2"))
    );
    store.apply(&store.pack(&cm("a", 3, "y")).expect("packs"));
    assert_eq!(store.by_index("src", "x").len(), 1);
    assert_eq!(store.by_index("src", "y").len(), 1);
    store.delete("ns/b", 4, false);
    assert!(store.by_index("src", "x").is_empty());
    let mut list = ListBuffer::default();
    list.push(store.listed(store.pack(&cm("c", 9, "z")).expect("packs")));
    store.replace(list, 9);
    assert!(store.by_index("src", "y").is_empty());
    assert_eq!(
        store.keys_by_index("src", "z"),
        vec![ObjectKey::namespaced("ns", "c")]
    );
    assert!(store.is_synced());
}

#[test]
fn a_swap_reports_the_objects_that_vanished_while_not_watching() {
    let store = Store::<ConfigMap>::new(16);
    let mut list = ListBuffer::default();
    list.push(store.listed(store.pack(&cm("a", 1, "x")).expect("packs")));
    list.push(store.listed(store.pack(&cm("b", 2, "x")).expect("packs")));
    assert!(store.replace(list, 2).is_empty());
    let mut list = ListBuffer::default();
    list.push(store.listed(store.pack(&cm("a", 1, "x")).expect("packs")));
    let vanished = store.replace(list, 5);
    let keys: Vec<&str> = vanished.iter().map(Entry::key).collect();
    assert_eq!(keys, vec!["ns/b"]);
    assert!(store.get(&ObjectKey::namespaced("ns", "b")).is_none());
}

#[test]
fn a_swap_keeps_writes_newer_than_the_list() {
    let store = Store::<ConfigMap>::new(16);
    store.apply(&store.pack(&cm("a", 12, "new")).expect("packs"));
    store.delete("ns/gone", 13, true);
    let mut list = ListBuffer::default();
    list.push(store.listed(store.pack(&cm("a", 10, "old")).expect("packs")));
    list.push(store.listed(store.pack(&cm("gone", 9, "old")).expect("packs")));
    let vanished = store.replace(list, 11);
    assert!(vanished.is_empty(), "nothing cached went missing");
    let a = store.get(&ObjectKey::namespaced("ns", "a")).expect("kept");
    assert_eq!(a.metadata.resource_version.as_deref(), Some("12"));
    assert!(store.get(&ObjectKey::namespaced("ns", "gone")).is_none());
}

#[test]
fn random_applies_and_deletes_leave_exactly_the_newest_state_per_key() {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let store = Store::<ConfigMap>::new(16);
    store.add_index("src", Arc::new(by_src));
    let mut truth: HashMap<String, (u64, String)> = HashMap::new();
    for rv in 1..3000u64 {
        let name = format!("k{}", rng.random_range(0..40));
        if rng.random_bool(0.3) {
            store.delete(&format!("ns/{name}"), rv, false);
            truth.remove(&name);
        } else {
            let src = format!("s{}", rng.random_range(0..5));
            store.apply(&store.pack(&cm(&name, rv, &src)).expect("packs"));
            truth.insert(name, (rv, src));
        }
    }
    assert_eq!(store.len(), truth.len());
    let mut keys: Vec<String> = store.keys().iter().map(ToString::to_string).collect();
    keys.sort();
    keys.dedup();
    assert_eq!(keys.len(), truth.len(), "no duplicates");
    for (name, (rv, src)) in &truth {
        let got = store
            .get(&ObjectKey::namespaced("ns", name))
            .expect("cached");
        assert_eq!(got.metadata.resource_version, Some(rv.to_string()));
        assert!(
            store
                .keys_by_index("src", src)
                .contains(&ObjectKey::namespaced("ns", name))
        );
    }
    let indexed: usize = (0..5)
        .map(|i| store.keys_by_index("src", &format!("s{i}")).len())
        .sum();
    assert_eq!(indexed, truth.len(), "each key is indexed once");
    assert_eq!(store.packed_bytes(), summed_entries(&store));
}

/// The packed bytes counted entry by entry, to check the running total.
fn summed_entries(store: &Store<ConfigMap>) -> usize {
    store.read().entries.iter().map(Entry::len).sum()
}

#[test]
fn packed_bytes_follow_applies_deletes_and_swaps() {
    let store = Store::<ConfigMap>::new(16);
    assert_eq!(store.packed_bytes(), 0);
    store.apply(&store.pack(&cm("a", 1, "x")).expect("packs"));
    let one = store.packed_bytes();
    assert!(one > "ns/a".len(), "the key and the packed object count");
    store.apply(&store.pack(&cm("b", 2, "x")).expect("packs"));
    store.apply(
        &store
            .pack(&cm("a", 3, "a longer label value"))
            .expect("packs"),
    );
    assert_eq!(store.packed_bytes(), summed_entries(&store));
    store.delete("ns/a", 4, false);
    store.delete("ns/b", 5, false);
    assert_eq!(store.packed_bytes(), 0);
    let mut list = ListBuffer::default();
    list.push(store.listed(store.pack(&cm("c", 9, "z")).expect("packs")));
    list.push(store.listed(store.pack(&cm("d", 9, "z")).expect("packs")));
    store.replace(list, 9);
    assert_eq!(store.packed_bytes(), summed_entries(&store));
    assert!(store.packed_bytes() > one);
}

fn key(name: &str) -> ObjectKey {
    ObjectKey::namespaced("ns", name)
}

fn rv_of(cm: &ConfigMap) -> Option<&str> {
    cm.metadata.resource_version.as_deref()
}

fn synced_with(store: &Store<ConfigMap>, objs: &[Value], list_rv: u64) {
    let mut list = ListBuffer::default();
    for o in objs {
        list.push(store.listed(store.pack(o).expect("packs")));
    }
    store.replace(list, list_rv);
}

#[test]
fn readers_of_the_same_version_share_one_allocation() {
    let store = Store::<ConfigMap>::new(16);
    store.add_index("src", Arc::new(by_src));
    synced_with(&store, &[cm("a", 1, "x"), cm("b", 2, "x")], 2);
    assert_eq!(store.decoded_len(), 0, "a list decodes nothing for keeps");
    let first = store.get(&key("a")).expect("cached");
    let second = store.get(&key("a")).expect("cached");
    assert!(Arc::ptr_eq(&first, &second));
    let indexed = store.by_index("src", "x");
    assert_eq!(indexed.len(), 2);
    assert!(indexed.iter().any(|o| Arc::ptr_eq(o, &first)));
    let listed = store.list();
    assert!(listed.iter().any(|o| Arc::ptr_eq(o, &first)));
    let b = store.get(&key("b")).expect("cached");
    assert!(
        indexed.iter().any(|o| Arc::ptr_eq(o, &b)),
        "by_index cached what it decoded"
    );
}

#[test]
fn a_read_after_a_write_sees_the_write_not_the_cached_object() {
    let store = Store::<ConfigMap>::new(16);
    store.apply(&store.pack(&cm("a", 1, "x")).expect("packs"));
    let v1 = store.get(&key("a")).expect("cached");
    store.apply(&store.pack(&cm("a", 2, "y")).expect("packs"));
    let v2 = store.get(&key("a")).expect("cached");
    assert_eq!((rv_of(&v1), rv_of(&v2)), (Some("1"), Some("2")));
    assert_eq!(by_src(&v2), vec!["y".to_string()]);

    // A relist with a newer version replaces what readers share.
    synced_with(&store, &[cm("a", 5, "z"), cm("b", 5, "z")], 5);
    let v5 = store.get(&key("a")).expect("cached");
    assert_eq!(rv_of(&v5), Some("5"));
    assert_eq!(by_src(&v5), vec!["z".to_string()]);
    // A relist that finds the same version keeps sharing the decoded object.
    synced_with(&store, &[cm("a", 5, "z"), cm("b", 5, "z")], 6);
    let again = store.get(&key("a")).expect("cached");
    assert!(Arc::ptr_eq(&v5, &again));
    // A relist without the object drops it from every read path.
    synced_with(&store, &[cm("b", 5, "z")], 7);
    assert!(store.get(&key("a")).is_none());
    assert_eq!(store.list().len(), 1);

    store.delete("ns/b", 8, false);
    assert!(store.get(&key("b")).is_none());
    assert_eq!(store.decoded_len(), 0);
}

#[test]
fn opaque_versions_are_never_served_from_an_older_decode() {
    let store = Store::<ConfigMap>::new(16);
    let opaque = |src: &str| {
        let mut o = cm("a", 0, src);
        o["metadata"]["resourceVersion"] = json!("opaque");
        o
    };
    store.apply(&store.pack(&opaque("x")).expect("packs"));
    assert_eq!(by_src(&store.get(&key("a")).expect("cached")), ["x"]);
    store.apply(&store.pack(&opaque("y")).expect("packs"));
    assert_eq!(by_src(&store.get(&key("a")).expect("cached")), ["y"]);
    synced_with(&store, &[opaque("z")], 0);
    assert_eq!(by_src(&store.get(&key("a")).expect("cached")), ["z"]);
}

#[test]
fn the_decoded_cache_never_exceeds_its_capacity() {
    let store = Store::<ConfigMap>::new(10);
    store.add_index("src", Arc::new(by_src));
    for i in 0..100 {
        store.apply(
            &store
                .pack(&cm(&format!("k{i}"), i + 1, "x"))
                .expect("packs"),
        );
        assert!(store.decoded_len() <= 10);
    }
    for i in 0..100 {
        store.get(&key(&format!("k{i}"))).expect("cached");
        assert!(store.decoded_len() <= 10);
    }
    assert_eq!(store.list().len(), 100);
    assert_eq!(store.by_index("src", "x").len(), 100);
    assert_eq!(store.decoded_len(), 10);
    assert_eq!(store.decoded_capacity(), 10);
}

#[test]
fn capacity_zero_decodes_on_every_read() {
    let store = Store::<ConfigMap>::new(0);
    let p = store.pack(&cm("a", 1, "x")).expect("packs");
    store.apply(&p);
    let first = store.get(&key("a")).expect("cached");
    let second = store.get(&key("a")).expect("cached");
    assert!(!Arc::ptr_eq(&first, &second) && !Arc::ptr_eq(&first, &p.obj));
    assert_eq!(first, second);
    assert_eq!(store.list().len(), 1);
    assert_eq!(store.decoded_len(), 0);
}

#[test]
fn the_applied_object_is_the_one_the_next_read_returns() {
    let store = Store::<ConfigMap>::new(16);
    let p = store.pack(&cm("a", 3, "x")).expect("packs");
    assert!(matches!(store.apply(&p), Outcome::Changed(None, None)));
    let got = store.get(&key("a")).expect("cached");
    assert!(Arc::ptr_eq(&got, &p.obj));
    // The same version again (the watch event after a recorded write): the store hands
    // back the Arc its readers already share.
    let again = store.pack(&cm("a", 3, "x")).expect("packs");
    match store.apply(&again) {
        Outcome::Stale(Some(shared)) => assert!(Arc::ptr_eq(&shared, &p.obj)),
        _ => panic!("the same version is stale and shared"),
    }
    // The replaced version's shared object is handed back as the old one.
    let next = store.pack(&cm("a", 4, "x")).expect("packs");
    match store.apply(&next) {
        Outcome::Changed(Some(old), Some(old_obj)) => {
            assert_eq!(old.rv(), 3);
            assert!(Arc::ptr_eq(&old_obj, &p.obj));
        }
        _ => panic!("the update changes the store"),
    }
}

#[test]
fn concurrent_readers_never_see_an_older_version_than_the_last_applied() {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    let store = Store::<ConfigMap>::new(4);
    let applied = AtomicU64::new(0);
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        for _ in 0..3 {
            s.spawn(|| {
                while !done.load(Ordering::Acquire) {
                    let floor = applied.load(Ordering::Acquire);
                    let Some(got) = store.get(&key("a")) else {
                        assert_eq!(floor, 0);
                        continue;
                    };
                    let rv: u64 = rv_of(&got).and_then(|r| r.parse().ok()).expect("rv");
                    assert!(rv >= floor, "read {rv} after {floor} was applied");
                }
            });
        }
        for rv in 1..=2000 {
            store.apply(&store.pack(&cm("a", rv, "x")).expect("packs"));
            applied.store(rv, Ordering::Release);
        }
        done.store(true, Ordering::Release);
    });
    let last = store.get(&key("a")).expect("cached");
    assert_eq!(rv_of(&last), Some("2000"));
}

fn typed(v: Value) -> ConfigMap {
    serde_json::from_value(v).expect("a ConfigMap")
}

#[test]
fn an_event_the_cache_already_holds_is_not_packed_and_changes_nothing() {
    let store = Store::<ConfigMap>::new(16);
    store.apply(&store.pack(&cm("a", 5, "x")).expect("packs"));
    for rv in [4, 5] {
        let p = store.pack_event(typed(cm("a", rv, "old"))).expect("packs");
        assert!(p.hollow, "version {rv} is not newer than the cached 5");
        assert!(matches!(store.apply(&p), Outcome::Stale(_)));
    }
    let newer = store.pack_event(typed(cm("a", 6, "new"))).expect("packs");
    assert!(!newer.hollow);
    assert!(matches!(store.apply(&newer), Outcome::Changed(..)));
    store.delete("ns/a", 8, true);
    let p = store.pack_event(typed(cm("a", 7, "x"))).expect("packs");
    assert!(p.hollow, "deleted after it");
    assert!(matches!(store.apply(&p), Outcome::Stale(None)));
    assert!(store.get(&key("a")).is_none());
}

#[test]
fn a_hollow_event_is_packed_after_all_when_a_relist_dropped_the_newer_version() {
    // Capacity 0: every read decodes the stored bytes.
    let store = Store::<ConfigMap>::new(0);
    store.add_index("src", Arc::new(by_src));
    store.apply(&store.pack(&cm("a", 5, "x")).expect("packs"));
    let hollow = store.pack_event(typed(cm("a", 5, "x"))).expect("packs");
    assert!(hollow.hollow);
    // A relist in which `a` is gone (deleted while the watch was down).
    synced_with(&store, &[cm("b", 6, "y")], 6);
    assert!(store.get(&key("a")).is_none());
    assert!(matches!(store.apply(&hollow), Outcome::Changed(..)));
    let a = store.get(&key("a")).expect("applied");
    assert_eq!(rv_of(&a), Some("5"));
    assert_eq!(a.data.as_ref().expect("data")["k"], "v");
    assert_eq!(
        store.keys_by_index("src", "x"),
        vec![key("a")],
        "indexed when filled"
    );
}
