//! The layering rule, checked: the folders below the HTTP layer (storage, schema, patch,
//! selector, registry, auth, controllers) never import `http` or `server`.
//!
//! Exceptions, if ever one is needed while something moves down, are listed in [`KNOWN`] with
//! the file that has them (none today). The test fails when
//! a file not on the list imports upward, and also when a listed file no longer does (so the
//! list only ever shrinks, and says exactly what is left to move).

use std::path::Path;

/// The lower layers, as folders of `src/`.
const LOWER: &[&str] = &[
    "storage",
    "schema",
    "patch",
    "selector",
    "registry",
    "auth",
    "controllers",
];

/// The layers nobody below may import.
const UPPER: &[&str] = &["crate::http", "crate::server"];

/// Upward imports allowed for now, as `file: path imported` (none).
const KNOWN: &[&str] = &[];

/// Every `.rs` file under `dir`, as paths relative to `root`.
fn sources(root: &Path, dir: &Path, out: &mut Vec<String>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            sources(root, &path, out);
        } else if path.extension().is_some_and(|e| e == "rs")
            && let Ok(rel) = path.strip_prefix(root)
        {
            out.push(rel.to_string_lossy().replace('\\', "/"));
        }
    }
}

/// The top-level items of every `use crate::{…}` group in `code` (`http::error::ApiError`,
/// `registry`), so that grouped imports are seen too.
fn grouped_crate_imports(code: &str) -> Vec<String> {
    let mut items = Vec::new();
    let mut rest = code;
    while let Some(start) = rest.find("use crate::{") {
        let after = &rest[start + "use crate::{".len()..];
        let mut depth = 1usize;
        let mut end = after.len();
        for (i, c) in after.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = i;
                        break;
                    }
                }
                _ => {}
            }
        }
        let mut nesting = 0usize;
        let mut item = String::new();
        for c in after[..end].chars() {
            match c {
                '{' => nesting += 1,
                '}' => nesting = nesting.saturating_sub(1),
                ',' if nesting == 0 => {
                    items.push(item.trim().to_string());
                    item.clear();
                    continue;
                }
                _ => {}
            }
            item.push(c);
        }
        items.push(item.trim().to_string());
        rest = &after[end..];
    }
    items
}

/// The upward imports of the lower layers, as `file: layer`, sorted.
fn upward_imports(src: &Path) -> Vec<String> {
    let mut files = Vec::new();
    for layer in LOWER {
        sources(src, &src.join(layer), &mut files);
    }
    let mut found = Vec::new();
    for file in files {
        let Ok(text) = std::fs::read_to_string(src.join(&file)) else {
            continue;
        };
        // Comments count too: a doc link to a higher layer is a dependency a reader follows.
        let code = text;
        let grouped = grouped_crate_imports(&code);
        for upper in UPPER {
            let layer = upper.trim_start_matches("crate::");
            let imports = code.contains(upper)
                || code.contains(&format!("super::{layer}::"))
                || grouped
                    .iter()
                    .any(|item| item == layer || item.starts_with(&format!("{layer}::")));
            if imports {
                found.push(format!("{file}: {upper}"));
            }
        }
    }
    found.sort();
    found.dedup();
    found
}

#[test]
fn lower_layers_import_neither_http_nor_server_beyond_the_known_list() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let found = upward_imports(&src);
    let new: Vec<&String> = found
        .iter()
        .filter(|f| !KNOWN.contains(&f.as_str()))
        .collect();
    assert!(
        new.is_empty(),
        "a lower layer imports http or server (move what it needs down instead): {new:#?}"
    );
    let gone: Vec<&&str> = KNOWN
        .iter()
        .filter(|k| !found.iter().any(|f| f == *k))
        .collect();
    assert!(
        gone.is_empty(),
        "these upward imports are gone: take them off KNOWN in layering.rs: {gone:#?}"
    );
}
