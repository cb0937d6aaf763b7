//! kore's discovery against the resources a default Kubernetes v1.33 API server serves
//! (`tests/data/kube-1.33-resources.txt`, written from Kubernetes' storage providers).
//!
//! Every resource of that list must be served, with its kind, scope and short names, unless it is
//! in [`GAPS`]. `GAPS` can only shrink: a resource listed there that kore now serves fails the
//! test too, so whoever adds a kind also removes it from the list.

use std::collections::{BTreeMap, BTreeSet};

use kore_testenv::TestEnv;

/// Resources of Kubernetes v1.33 that kore does not serve yet (`group/version resource`).
const GAPS: &[&str] = &[];

/// One line of the checked-in list.
#[derive(Debug)]
struct Expected {
    key: String,
    kind: String,
    namespaced: bool,
    short_names: BTreeSet<String>,
}

fn expected() -> Vec<Expected> {
    let text = include_str!("../data/kube-1.33-resources.txt");
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            assert_eq!(f.len(), 5, "malformed line {line:?}");
            Expected {
                key: format!("{} {}", f[0], f[1]),
                kind: f[2].to_owned(),
                namespaced: f[3] == "true",
                short_names: if f[4] == "-" {
                    BTreeSet::new()
                } else {
                    f[4].split(',').map(str::to_owned).collect()
                },
            }
        })
        .collect()
}

/// One resource as kore's discovery lists it.
struct Served {
    kind: String,
    namespaced: bool,
    short_names: BTreeSet<String>,
}

/// What kore's discovery lists, keyed `group/version resource`: every version of `/api` and
/// every group version of `/apis`.
async fn served(env: &TestEnv) -> BTreeMap<String, Served> {
    let client = env.client();
    let mut lists = Vec::new();
    let core = client
        .list_core_api_versions()
        .await
        .expect("GET /api answers");
    for v in core.versions {
        let list = client
            .list_core_api_resources(&v)
            .await
            .expect("core resources");
        lists.push((v, list));
    }
    let groups = client.list_api_groups().await.expect("GET /apis answers");
    for g in groups.groups {
        for v in g.versions {
            let list = client
                .list_api_group_resources(&v.group_version)
                .await
                .expect("group resources");
            lists.push((v.group_version, list));
        }
    }
    let mut out = BTreeMap::new();
    for (gv, list) in lists {
        for r in list.resources {
            out.insert(
                format!("{gv} {}", r.name),
                Served {
                    kind: r.kind,
                    namespaced: r.namespaced,
                    short_names: r.short_names.unwrap_or_default().into_iter().collect(),
                },
            );
        }
    }
    out
}

#[tokio::test]
async fn discovery_serves_every_kubernetes_1_33_resource_outside_the_gaps() {
    let env = TestEnv::start().await.expect("start");
    let served = served(&env).await;
    let gaps: BTreeSet<&str> = GAPS.iter().copied().collect();
    let listed = expected();
    let listed_keys: BTreeSet<&str> = listed.iter().map(|e| e.key.as_str()).collect();
    let mut problems = Vec::new();
    for gap in &gaps {
        if !listed_keys.contains(gap) {
            problems.push(format!("{gap}: in GAPS but not in the v1.33 list"));
        }
    }
    for e in &listed {
        let Some(got) = served.get(&e.key) else {
            if !gaps.contains(e.key.as_str()) {
                problems.push(format!("{}: not served (and not in GAPS)", e.key));
            }
            continue;
        };
        if gaps.contains(e.key.as_str()) {
            problems.push(format!("{}: served now, remove it from GAPS", e.key));
        }
        if got.namespaced != e.namespaced {
            problems.push(format!("{}: namespaced is {}", e.key, got.namespaced));
        }
        // Kind and short names are compared for resources; subresources' kinds vary.
        let top_level = !e.key.split(' ').nth(1).unwrap_or("").contains('/');
        if top_level {
            if got.kind != e.kind {
                problems.push(format!("{}: kind is {}, not {}", e.key, got.kind, e.kind));
            }
            if got.short_names != e.short_names {
                problems.push(format!(
                    "{}: short names {:?}, Kubernetes has {:?}",
                    e.key, got.short_names, e.short_names
                ));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "discovery differs from Kubernetes v1.33:\n{}",
        problems.join("\n")
    );
}
