//! Every fuzz target over its seed corpus (`corpus/<target>/`) and its regressions
//! (`regressions/<target>/`, the crashes fuzzing found, each fixed since). Regressions of a
//! target that is still `pending` are skipped: their fixes are under way elsewhere.

use std::path::Path;

fn replay(name: &str) {
    let target = kore_fuzz::target(name).expect("a known target");
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut dirs = vec![root.join("corpus").join(name)];
    if target.pending.is_none() {
        dirs.push(root.join("regressions").join(name));
    }
    let files: Vec<_> = dirs
        .iter()
        .flat_map(|d| kore_fuzz::inputs(d).expect("the directory is readable"))
        .collect();
    assert!(!files.is_empty(), "{name} has no seed inputs");
    // On a thread with the server's stack size, as under AFL++.
    std::thread::Builder::new()
        .stack_size(kore_fuzz::STACK_SIZE)
        .spawn(move || {
            for file in files {
                let data = std::fs::read(&file).expect("the input is readable");
                eprintln!("{}", file.display());
                (target.run)(&data);
            }
        })
        .expect("the thread starts")
        .join()
        .expect("no input crashes");
}

macro_rules! replay_tests {
    ($($name:ident),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                replay(stringify!($name));
            }
        )*

        #[test]
        fn every_target_is_replayed() {
            let tested = [$(stringify!($name)),*];
            for t in kore_fuzz::TARGETS {
                assert!(tested.contains(&t.name), "{} has no replay test", t.name);
            }
        }
    };
}

replay_tests!(
    body_json,
    body_yaml,
    body_protobuf,
    patch_json,
    patch_merge,
    patch_strategic,
    patch_apply,
    label_selector,
    field_selector,
    crd_schema,
    cel_rule,
    wal_recovery,
);
