//! The layering rule, checked: every folder of `src/` has a layer in [`LAYERS`], and a file
//! may name only folders at or below its own layer; and no two folders import each other,
//! directly or around a circle.
//!
//! A file "names" a folder when its text holds `crate::folder` (a path, a `use`, a doc link:
//! comments count, as a reader follows a doc link), a top-level item of a grouped
//! `use crate::{…}`, or a `super::…` path that climbs to the crate root and then into the
//! folder. Test code counts too: a test that needs a higher layer belongs in that layer or
//! in `crates/testenv`.
//!
//! What the tree does against the rule today is listed in [`KNOWN_UPWARD`] and
//! [`KNOWN_CYCLES`], each with its reason. Both tests fail when something new appears, and
//! also when a listed entry is gone, so the lists only ever shrink and say exactly what is
//! left to move.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The folders of `src/` and their layers, lowest first. A folder may import its own layer
/// and the layers below it, never one above.
///
/// | layer | folders                                     | holds                                   |
/// |-------|---------------------------------------------|-----------------------------------------|
/// | 0     | api                                         | errors, field errors, user, request, names |
/// | 1     | storage, selector, schema, patch, auth      | the building blocks, each on its own    |
/// | 2     | registry                                    | the resources and every verb            |
/// | 3     | controllers                                 | the server's own control loops          |
/// | 4     | http                                        | parse, call the registry, render        |
/// | 5     | server                                      | puts it together, serves the socket     |
const LAYERS: &[(&str, u8)] = &[
    ("api", 0),
    ("storage", 1),
    ("selector", 1),
    ("schema", 1),
    ("patch", 1),
    ("auth", 1),
    ("registry", 2),
    ("controllers", 3),
    ("http", 4),
    ("server", 5),
];

/// Imports of a higher layer allowed for now, as `file: crate::folder`, each with why.
const KNOWN_UPWARD: &[(&str, &str)] = &[];

/// Import circles between folders allowed for now, as the circle's folders joined by ` -> `
/// starting from the smallest name, each with why.
const KNOWN_CYCLES: &[(&str, &str)] = &[];

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

/// The identifier at the start of `text` (letters, digits, `_`).
fn leading_ident(text: &str) -> &str {
    let end = text
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(text.len());
    &text[..end]
}

/// How deep the module of `file` sits below the crate root: `storage/mod.rs` is 1,
/// `storage/store.rs` and `storage/wal/mod.rs` are 2.
fn module_depth(file: &str) -> usize {
    let parts: Vec<&str> = file.split('/').collect();
    let last = parts.last().copied().unwrap_or("");
    if last == "mod.rs" {
        parts.len() - 1
    } else {
        parts.len()
    }
}

/// The folders of `src/` that `text` (the file `file`) names.
fn named_folders(file: &str, text: &str) -> BTreeSet<String> {
    let mut named = BTreeSet::new();
    for (at, _) in text.match_indices("crate::") {
        // Not `kore_apiserver::` or `other_crate::`.
        let before = text[..at].chars().next_back();
        if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') {
            continue;
        }
        let ident = leading_ident(&text[at + "crate::".len()..]);
        if !ident.is_empty() {
            named.insert(ident.to_string());
        }
    }
    for item in grouped_crate_imports(text) {
        let ident = leading_ident(&item);
        if !ident.is_empty() {
            named.insert(ident.to_string());
        }
    }
    // `super::super::x` from a module `depth` deep names the root's `x` when it climbs `depth`.
    let depth = module_depth(file);
    let climb = "super::".repeat(depth);
    for (at, _) in text.match_indices(&climb) {
        let before = &text[..at];
        if before.ends_with("super::") {
            continue;
        }
        let ident = leading_ident(&text[at + climb.len()..]);
        if !ident.is_empty() {
            named.insert(ident.to_string());
        }
    }
    named
}

/// The folder a file lives in (`storage/wal/file.rs` → `storage`); `None` for `lib.rs` and
/// this file.
fn folder_of(file: &str) -> Option<&str> {
    file.split_once('/').map(|(folder, _)| folder)
}

/// Every reference of a file to another folder, as `(file, from folder, to folder)`.
fn references(src: &Path) -> Vec<(String, String, String)> {
    let mut files = Vec::new();
    sources(src, src, &mut files);
    files.sort();
    let folders: BTreeSet<&str> = LAYERS.iter().map(|(f, _)| *f).collect();
    let mut found = Vec::new();
    for file in files {
        let Some(from) = folder_of(&file) else {
            continue;
        };
        let Ok(text) = std::fs::read_to_string(src.join(&file)) else {
            continue;
        };
        for to in named_folders(&file, &text) {
            if to != from && folders.contains(to.as_str()) {
                found.push((file.clone(), from.to_string(), to));
            }
        }
    }
    found
}

fn layer_of(folder: &str) -> Option<u8> {
    LAYERS.iter().find(|(f, _)| *f == folder).map(|(_, l)| *l)
}

/// Compares what was found with a known list: (new entries, listed entries that are gone).
fn against_known<'a>(
    found: &'a BTreeSet<String>,
    known: &'a [(&'a str, &'a str)],
) -> (Vec<&'a String>, Vec<&'a str>) {
    let new = found
        .iter()
        .filter(|f| !known.iter().any(|(k, _)| k == f))
        .collect();
    let gone = known
        .iter()
        .map(|(k, _)| *k)
        .filter(|k| !found.contains(*k))
        .collect();
    (new, gone)
}

#[test]
fn every_folder_of_src_has_a_layer() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut missing = Vec::new();
    for entry in std::fs::read_dir(&src).expect("src/ is readable").flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if entry.path().is_dir() && layer_of(&name).is_none() {
            missing.push(name);
        }
    }
    assert!(
        missing.is_empty(),
        "give these folders a layer in LAYERS (layering.rs): {missing:?}"
    );
}

#[test]
fn no_folder_imports_a_higher_layer_beyond_the_known_list() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut found = BTreeSet::new();
    for (file, from, to) in references(&src) {
        if let (Some(own), Some(named)) = (layer_of(&from), layer_of(&to))
            && named > own
        {
            found.insert(format!("{file}: crate::{to}"));
        }
    }
    let (new, gone) = against_known(&found, KNOWN_UPWARD);
    assert!(
        new.is_empty(),
        "these files import a higher layer (move what they need down instead): {new:#?}"
    );
    assert!(
        gone.is_empty(),
        "these upward imports are gone: take them off KNOWN_UPWARD in layering.rs: {gone:#?}"
    );
}

/// One circle through every strongly connected group of `graph` with more than one folder,
/// as `a -> b -> a`, starting from the group's smallest folder.
fn cycles(graph: &BTreeMap<String, BTreeSet<String>>) -> BTreeSet<String> {
    let reaches = |from: &str, to: &str| -> Option<Vec<String>> {
        // Breadth-first, so the circle reported is a shortest one.
        let mut parent: BTreeMap<String, String> = BTreeMap::new();
        let mut queue = std::collections::VecDeque::from([from.to_string()]);
        while let Some(at) = queue.pop_front() {
            for next in graph.get(&at).into_iter().flatten() {
                if next == to {
                    let mut path = vec![to.to_string(), at.clone()];
                    let mut step = at.clone();
                    while let Some(p) = parent.get(&step) {
                        path.push(p.clone());
                        step = p.clone();
                    }
                    path.reverse();
                    return Some(path);
                }
                if next != from && !parent.contains_key(next) {
                    parent.insert(next.clone(), at.clone());
                    queue.push_back(next.clone());
                }
            }
        }
        None
    };
    let mut seen: BTreeSet<String> = BTreeSet::new();
    let mut found = BTreeSet::new();
    for folder in graph.keys() {
        if seen.contains(folder) {
            continue;
        }
        if let Some(path) = reaches(folder, folder) {
            // Folders come in sorted order, so `folder` is the smallest of its group: one
            // circle is reported per group, and the group's other folders are skipped.
            let group: BTreeSet<String> = graph
                .keys()
                .filter(|other| {
                    *other == folder
                        || (reaches(folder, other).is_some() && reaches(other, folder).is_some())
                })
                .cloned()
                .collect();
            seen.extend(group);
            found.insert(path.join(" -> "));
        }
    }
    found
}

#[test]
fn no_import_circle_between_folders_beyond_the_known_list() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    // Upward imports are the other test's business; the circles left run within a layer.
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut by: BTreeMap<(String, String), BTreeSet<String>> = BTreeMap::new();
    for (file, from, to) in references(&src) {
        if layer_of(&to) > layer_of(&from) {
            continue;
        }
        graph.entry(from.clone()).or_default().insert(to.clone());
        by.entry((from, to)).or_default().insert(file);
    }
    let found = cycles(&graph);
    let (new, gone) = against_known(&found, KNOWN_CYCLES);
    let explain: Vec<String> = new
        .iter()
        .flat_map(|circle| {
            let steps: Vec<&str> = circle.split(" -> ").collect();
            steps
                .windows(2)
                .map(|w| {
                    let files = by
                        .get(&(w[0].to_string(), w[1].to_string()))
                        .map(|f| f.iter().cloned().collect::<Vec<_>>().join(", "))
                        .unwrap_or_default();
                    format!("{} -> {}: {files}", w[0], w[1])
                })
                .collect::<Vec<_>>()
        })
        .collect();
    assert!(
        new.is_empty(),
        "import circles between folders (one of them must stop naming the other): {new:#?}\n\
         made by: {explain:#?}"
    );
    assert!(
        gone.is_empty(),
        "these circles are gone: take them off KNOWN_CYCLES in layering.rs: {gone:#?}"
    );
}

#[test]
fn the_circle_check_finds_a_circle_and_names_it_from_its_smallest_folder() {
    let graph: BTreeMap<String, BTreeSet<String>> = [
        ("patch", vec!["schema", "api"]),
        ("schema", vec!["selector"]),
        ("selector", vec!["patch"]),
        ("storage", vec!["api"]),
    ]
    .into_iter()
    .map(|(from, to)| {
        (
            from.to_string(),
            to.into_iter().map(str::to_string).collect(),
        )
    })
    .collect();
    assert_eq!(
        cycles(&graph).into_iter().collect::<Vec<_>>(),
        ["patch -> schema -> selector -> patch"]
    );
}

#[test]
fn super_paths_that_climb_to_the_root_name_a_folder() {
    let named = named_folders(
        "storage/wal/file.rs",
        "use super::super::super::http::x; use super::super::store::Y; use kore_apiserver::server;",
    );
    assert_eq!(named.into_iter().collect::<Vec<_>>(), ["http"]);
    let named = named_folders(
        "registry/mod.rs",
        "use super::auth::User; //! [`crate::api`]",
    );
    assert_eq!(named.into_iter().collect::<Vec<_>>(), ["api", "auth"]);
}
