//! Fuzz targets for every input kore-apiserver takes from untrusted hands.
//!
//! Each target is a function from arbitrary bytes to nothing that panics (or aborts) only when
//! kore misbehaves. The same functions run in three ways:
//!
//! - under AFL++ (`src/bin/kore-fuzz.rs`, built with `cargo afl build --features afl`),
//!   coverage-guided; `fuzz/run` drives it, bounded in CI and for as long as you like by hand;
//! - as replay tests (`tests/replay.rs`) over `corpus/<target>/` and `regressions/<target>/`
//!   in every `cargo test`, so a crash once found stays fixed;
//! - one file at a time with `cargo run -p kore-fuzz --bin kore-fuzz-replay -- <target> <file>`,
//!   to debug a reproducer.
//!
//! The request targets drive the real router in-process (`tower::ServiceExt::oneshot`), with
//! `dryRun=All` on writes so that every input meets the same state. The library targets call
//! the public functions of the schema and storage modules. `docs/design/fuzzing.md` says what
//! each target covers and how to run them.

use std::path::Path;

pub mod request;
pub mod schema;
pub mod wal;

/// The stack size inputs run on: that of tokio's worker threads, where the server handles
/// requests.
pub const STACK_SIZE: usize = 2 * 1024 * 1024;

/// A fuzz target: its name (the corpus and regression directory name) and its function.
#[derive(Clone, Copy, Debug)]
pub struct Target {
    /// The name, as given to `kore-fuzz` and used for `corpus/<name>/`.
    pub name: &'static str,
    /// What the input is.
    pub about: &'static str,
    /// Runs one input; panics when kore misbehaves.
    pub run: fn(&[u8]),
    /// `Some(why)` while the target still finds a known crash whose fix is under way elsewhere:
    /// CI skips it and the replay test skips its regressions. Set to `None` once the fix is
    /// merged and `fuzz/run replay` passes.
    pub pending: Option<&'static str>,
}

/// Every target.
pub const TARGETS: &[Target] = &[
    Target {
        name: "body_json",
        about: "a create request body as JSON (first byte picks the resource)",
        run: request::body_json,
        pending: None,
    },
    Target {
        name: "body_yaml",
        about: "a create request body as YAML (first byte picks the resource)",
        run: request::body_yaml,
        pending: None,
    },
    Target {
        name: "body_protobuf",
        about: "a create request body as Kubernetes protobuf (first byte picks the resource)",
        run: request::body_protobuf,
        pending: None,
    },
    Target {
        name: "patch_json",
        about: "a JSON patch (RFC 6902) of a stored object (first byte picks the resource)",
        run: request::patch_json,
        pending: None,
    },
    Target {
        name: "patch_merge",
        about: "a JSON merge patch (RFC 7386) of a stored object (first byte picks the resource)",
        run: request::patch_merge,
        pending: None,
    },
    Target {
        name: "patch_strategic",
        about: "a strategic merge patch of a stored object (first byte picks the resource)",
        run: request::patch_strategic,
        pending: None,
    },
    Target {
        name: "patch_apply",
        about: "a server-side apply body (YAML) for a stored object (first byte picks the resource)",
        run: request::patch_apply,
        pending: None,
    },
    Target {
        name: "label_selector",
        about: "the labelSelector query parameter of a list",
        run: request::label_selector,
        pending: None,
    },
    Target {
        name: "field_selector",
        about: "the fieldSelector query parameter of a list",
        run: request::field_selector,
        pending: None,
    },
    Target {
        name: "crd_schema",
        about: "JSON values: an openAPIV3Schema, an object, an old object",
        run: schema::crd_schema,
        pending: None,
    },
    Target {
        name: "cel_rule",
        about: "the text of one x-kubernetes-validations rule",
        run: schema::cel_rule,
        pending: None,
    },
    Target {
        name: "wal_recovery",
        about: "the bytes of the write-ahead log file, recovered by WalBackend::open",
        run: wal::recovery,
        pending: None,
    },
];

/// The target called `name`.
pub fn target(name: &str) -> Option<&'static Target> {
    TARGETS.iter().find(|t| t.name == name)
}

/// The files directly inside `dir` (none if it does not exist), sorted by name.
///
/// # Errors
/// When the directory exists but cannot be read.
pub fn inputs(dir: &Path) -> std::io::Result<Vec<std::path::PathBuf>> {
    let mut files = Vec::new();
    match std::fs::read_dir(dir) {
        Ok(entries) => {
            for entry in entries {
                let path = entry?.path();
                if path.is_file() {
                    files.push(path);
                }
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    files.sort();
    Ok(files)
}
