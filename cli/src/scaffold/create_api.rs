//! `kore create api --group G --version V --kind K`: adds a kind (or a version of a kind) to
//! a project made by `kore new`.
//!
//! A new kind gets its type (`src/api/<kind>/<version>.rs`), its controller
//! (`src/controllers/<kind>.rs`) and a test (`tests/<kind>_controller.rs`, a name no kind's
//! test shares with the project's own `tests/operator.rs`); a new version of a kind gets only
//! its type, and the kind's CRD becomes multi-version (the first version stays the stored
//! one, and the controller keeps reconciling it). The `mod.rs` files that list the
//! kinds are rewritten from the `PROJECT` file each time; the other files are the user's and
//! are never overwritten.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use clap::{Args, Subcommand};

use super::{
    Api, GENERATED, KORE_VERSION, Project, new, plural, render, short_name, snake_case,
    templates as t,
};

/// `kore create ...`.
#[derive(Subcommand, Clone, Debug)]
pub(crate) enum CreateCommand {
    /// Add a kind (its type, controller, RBAC rules, sample and test), or a version of one.
    Api(CreateApiArgs),
}

/// Options of `kore create api`.
#[derive(Args, Clone, Debug)]
pub(crate) struct CreateApiArgs {
    /// The API group's first label; the group is GROUP.DOMAIN (the project's domain).
    #[arg(long)]
    group: String,
    /// The version (v1, v1alpha1, v2beta3, ...).
    #[arg(long)]
    version: String,
    /// The kind, in UpperCamelCase (Frigate, CronJob).
    #[arg(long)]
    kind: String,
    /// The kind's objects live in namespaces (the default for a new kind).
    #[arg(long, conflicts_with = "cluster")]
    namespaced: bool,
    /// The kind's objects are cluster-scoped.
    #[arg(long)]
    cluster: bool,
    /// The project's directory.
    #[arg(long, value_name = "DIR", default_value = ".")]
    dir: PathBuf,
}

/// Runs `kore create ...`.
pub(crate) fn create(command: &CreateCommand) -> anyhow::Result<()> {
    match command {
        CreateCommand::Api(args) => create_api(args),
    }
}

fn check_kind(kind: &str) -> anyhow::Result<()> {
    let ok = kind.len() <= 63
        && kind.starts_with(|c: char| c.is_ascii_uppercase())
        && kind.chars().all(|c| c.is_ascii_alphanumeric());
    anyhow::ensure!(
        ok,
        "invalid kind {kind:?}: use UpperCamelCase letters and digits, starting with a capital \
         letter, at most 63 characters (such as Frigate or CronJob)"
    );
    let module = snake_case(kind);
    anyhow::ensure!(
        !super::KEYWORDS.contains(&module.as_str()) && module != "mod",
        "invalid kind {kind:?}: its module name {module} is a Rust keyword"
    );
    Ok(())
}

fn check_group(group: &str, domain: &str) -> anyhow::Result<()> {
    anyhow::ensure!(
        super::is_dns_label(group) && group.starts_with(|c: char| c.is_ascii_lowercase()),
        "invalid group {group:?}: give the group's first label, lowercase letters, digits and \
         '-' starting with a letter (such as ship); the group becomes {}.{domain}",
        if group.is_empty() { "GROUP" } else { group }
    );
    Ok(())
}

/// Whether `version` is a Kubernetes API version: `v` and a number, optionally followed by
/// `alpha` or `beta` and a number (v1, v1alpha1, v2beta3).
fn check_version(version: &str) -> anyhow::Result<()> {
    let number =
        |s: &str| !s.is_empty() && !s.starts_with('0') && s.bytes().all(|b| b.is_ascii_digit());
    let ok = version.strip_prefix('v').is_some_and(|rest| {
        let split = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        let (major, tail) = rest.split_at(split);
        number(major)
            && (tail.is_empty()
                || ["alpha", "beta"]
                    .iter()
                    .any(|s| tail.strip_prefix(s).is_some_and(number)))
    });
    anyhow::ensure!(
        ok,
        "invalid version {version:?}: use v<number>, optionally followed by alpha<number> or \
         beta<number> (v1, v1alpha1, v2beta3)"
    );
    Ok(())
}

/// Runs `kore create api`.
fn create_api(args: &CreateApiArgs) -> anyhow::Result<()> {
    let mut project = Project::read(&args.dir)?;
    check_kind(&args.kind)?;
    check_group(&args.group, &project.domain)?;
    check_version(&args.version)?;
    let group = format!("{}.{}", args.group, project.domain);
    let existing: Vec<&Api> = project
        .apis
        .iter()
        .filter(|a| a.kind == args.kind)
        .collect();
    let namespaced = match existing.first() {
        None => !args.cluster,
        Some(first) => {
            anyhow::ensure!(
                first.group == group,
                "kind {} already exists in group {}: a project's kinds have distinct names",
                args.kind,
                first.group
            );
            anyhow::ensure!(
                !existing.iter().any(|a| a.version == args.version),
                "kind {} already exists in {group}/{}: nothing to do (edit src/api/{}/{}.rs)",
                args.kind,
                args.version,
                snake_case(&args.kind),
                args.version
            );
            let asked = if args.cluster {
                Some(false)
            } else if args.namespaced {
                Some(true)
            } else {
                None
            };
            anyhow::ensure!(
                asked.is_none_or(|n| n == first.namespaced),
                "kind {} is {}: every version of a kind has the same scope",
                args.kind,
                if first.namespaced {
                    "namespaced"
                } else {
                    "cluster-scoped"
                }
            );
            first.namespaced
        }
    };
    let clash = project
        .apis
        .iter()
        .find(|a| a.kind != args.kind && snake_case(&a.kind) == snake_case(&args.kind));
    if let Some(other) = clash {
        anyhow::bail!(
            "kind {} would share the module {} with kind {}",
            args.kind,
            snake_case(&args.kind),
            other.kind
        );
    }
    let api = Api {
        group,
        version: args.version.clone(),
        kind: args.kind.clone(),
        namespaced,
    };
    let new_kind = existing.is_empty();
    let mut files = user_files(&project, &api, new_kind);
    for (path, _) in &files {
        let full = args.dir.join(path);
        anyhow::ensure!(
            !full.exists(),
            "{} already exists and is not kore's to overwrite: move it away and run again",
            full.display()
        );
    }
    let recorded = std::mem::replace(&mut project.kore_version, KORE_VERSION.to_owned());
    project.apis.push(api.clone());
    files.extend(generated(&project));
    files.push((PathBuf::from(Project::FILE), project.render()?));
    super::write_all(&args.dir, &files)
        .with_context(|| format!("adding {} {}", api.kind, api.version))?;
    println!(
        "added {} ({}/{}, {}). Next: edit src/api/{}/{}.rs and src/controllers/{}.rs, then\n  cargo test\n  cargo run -- manifests",
        api.kind,
        api.group,
        api.version,
        if namespaced {
            "namespaced"
        } else {
            "cluster-scoped"
        },
        snake_case(&api.kind),
        api.version,
        snake_case(&api.kind)
    );
    if recorded.is_empty() {
        eprintln!("note: PROJECT recorded no kore version; it now records {KORE_VERSION}");
    } else if recorded != KORE_VERSION {
        eprintln!(
            "note: the project was last written by kore {recorded}; PROJECT now records \
             {KORE_VERSION}"
        );
    }
    for (name, requirement) in stale_kore_dependencies(&args.dir) {
        eprintln!(
            "warning: the code just added is written for kore {KORE_VERSION}, but Cargo.toml \
             asks for {name} = \"{requirement}\": change it to {name} = \"{KORE_VERSION}\""
        );
    }
    Ok(())
}

/// The kore crates `dir/Cargo.toml` asks for by a version requirement this kore's version
/// does not meet, as (name, requirement). Path dependencies (`--kore-path`) need nothing; a
/// Cargo.toml that cannot be read or parsed gives nothing (cargo will say what is wrong).
pub(crate) fn stale_kore_dependencies(dir: &Path) -> Vec<(String, String)> {
    let Ok(text) = std::fs::read_to_string(dir.join("Cargo.toml")) else {
        return Vec::new();
    };
    let Ok(manifest) = text.parse::<toml_edit::DocumentMut>() else {
        return Vec::new();
    };
    let Ok(ours) = semver::Version::parse(KORE_VERSION) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for table in ["dependencies", "dev-dependencies"] {
        for name in new::KORE_CRATES.iter().map(|(name, _, _)| *name) {
            let Some(item) = manifest.get(table).and_then(|t| t.get(name)) else {
                continue;
            };
            let requirement = match item.as_table_like() {
                Some(t) if t.contains_key("path") => continue,
                Some(t) => t.get("version").and_then(|v| v.as_str()),
                None => item.as_str(),
            };
            let Some(requirement) = requirement else {
                continue;
            };
            let met = semver::VersionReq::parse(requirement).is_ok_and(|r| r.matches(&ours));
            if !met {
                out.push((name.to_owned(), requirement.to_owned()));
            }
        }
    }
    out
}

/// The files a new kind (or version) adds that are the user's from then on.
fn user_files(project: &Project, api: &Api, new_kind: bool) -> Vec<(PathBuf, String)> {
    let module = snake_case(&api.kind);
    let lower = api.kind.to_lowercase();
    let plural = plural(&api.kind);
    let crate_name = project.name.replace('-', "_");
    let sample_name = format!("{lower}-sample-{}", api.version);
    let scope_attr = if api.namespaced {
        "\n    namespaced,"
    } else {
        ""
    };
    let shortname_attr = match short_name(&api.kind) {
        Some(s) => format!("\n    shortname = \"{s}\","),
        None => String::new(),
    };
    let (api_expr, informer_config, test_api) = if api.namespaced {
        (
            "Api::namespaced(\n            self.client.clone(),\n            key.namespace().unwrap_or_default(),\n        )",
            "match &options.namespace {\n        Some(ns) => InformerConfig::default().namespace(ns.clone()),\n        None => InformerConfig::default(),\n    }",
            "Api::namespaced(admin.clone(), \"default\")",
        )
    } else {
        (
            "let _ = key;\n        Api::all(self.client.clone())",
            "InformerConfig::default()",
            "Api::all(admin.clone())",
        )
    };
    let values = [
        ("crate", crate_name.as_str()),
        ("group", api.group.as_str()),
        ("version", api.version.as_str()),
        ("kind", api.kind.as_str()),
        ("kind_mod", module.as_str()),
        ("kind_lower", lower.as_str()),
        ("plural", plural.as_str()),
        ("sample_name", sample_name.as_str()),
        ("scope_attr", scope_attr),
        ("shortname_attr", shortname_attr.as_str()),
        ("api_expr", api_expr),
        ("informer_config", informer_config),
        ("test_api", test_api),
    ];
    let mut out = vec![(
        PathBuf::from(format!("src/api/{module}/{}.rs", api.version)),
        render(t::TYPE_RS, &values),
    )];
    if new_kind {
        out.push((
            PathBuf::from(format!("src/controllers/{module}.rs")),
            render(t::CONTROLLER_RS, &values),
        ));
        out.push((
            PathBuf::from(format!("tests/{module}_controller.rs")),
            render(t::TEST_RS, &values),
        ));
    }
    out
}

/// The kinds of `project` in the order they were first added, each with its versions (the
/// first is stored).
fn kinds(project: &Project) -> Vec<(&str, Vec<&str>)> {
    let mut out: Vec<(&str, Vec<&str>)> = Vec::new();
    for api in &project.apis {
        match out.iter_mut().find(|(k, _)| *k == api.kind) {
            Some((_, versions)) => versions.push(&api.version),
            None => out.push((&api.kind, vec![&api.version])),
        }
    }
    out
}

/// The files kore rewrites from the `PROJECT` file: `src/api/mod.rs`, each kind's
/// `src/api/<kind>/mod.rs`, and `src/controllers/mod.rs`.
pub(crate) fn generated(project: &Project) -> Vec<(PathBuf, String)> {
    let kinds = kinds(project);
    let mut out = Vec::new();

    let mut api = format!(
        "{GENERATED}\n//! The kinds of this operator: one module per kind, one submodule per version.\n\n"
    );
    for (kind, _) in &kinds {
        api.push_str(&format!("pub mod {};\n", snake_case(kind)));
    }
    if !kinds.is_empty() {
        api.push('\n');
    }
    api.push_str(
        "use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;\n\n\
         /// The CRDs of every kind.\npub fn crds() -> Vec<CustomResourceDefinition> {\n    vec![",
    );
    let crds: Vec<String> = kinds
        .iter()
        .map(|(k, _)| format!("{}::crd()", snake_case(k)))
        .collect();
    api.push_str(&crds.join(", "));
    api.push_str(
        "]\n}\n\n/// The samples of every kind and version, in the order they are applied.\n\
         pub fn samples() -> Vec<serde_json::Value> {\n",
    );
    if kinds.is_empty() {
        api.push_str("    Vec::new()\n}\n");
    } else {
        api.push_str("    let mut out = Vec::new();\n");
        for (kind, _) in &kinds {
            api.push_str(&format!(
                "    out.extend({}::samples());\n",
                snake_case(kind)
            ));
        }
        api.push_str("    out\n}\n");
    }
    out.push((PathBuf::from("src/api/mod.rs"), api));

    for (kind, versions) in &kinds {
        let module = snake_case(kind);
        let stored = versions[0];
        let mut text = format!(
            "{GENERATED}\n//! `{kind}` in every version the operator serves; {stored} is stored and reconciled.\n\n"
        );
        for v in versions {
            text.push_str(&format!("pub mod {v};\n"));
        }
        text.push_str(&format!(
            "\npub use {stored}::{{{kind}, {kind}Spec, {kind}Status}};\n\n\
             use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;\n\
             use kube::CustomResourceExt as _;\n\n\
             /// The CRD of `{kind}`, with every version.\n\
             pub fn crd() -> CustomResourceDefinition {{\n"
        ));
        if versions.len() == 1 {
            text.push_str(&format!("    {stored}::{kind}::crd()\n}}\n"));
        } else {
            let list: Vec<String> = versions
                .iter()
                .map(|v| format!("{v}::{kind}::crd()"))
                .collect();
            text.push_str(&format!(
                "    kube::core::crd::merge_crds(vec![{}], \"{stored}\")\n        .expect(\"the versions of {kind} share group, kind, names and scope\")\n}}\n",
                list.join(", ")
            ));
        }
        let samples: Vec<String> = versions.iter().map(|v| format!("{v}::sample()")).collect();
        text.push_str(&format!(
            "\n/// A sample `{kind}` of each version.\npub fn samples() -> Vec<serde_json::Value> {{\n    vec![{}]\n}}\n",
            samples.join(", ")
        ));
        out.push((PathBuf::from(format!("src/api/{module}/mod.rs")), text));
    }

    let mut controllers = format!(
        "{GENERATED}\n//! The controllers, one per kind, each with the RBAC rules it needs.\n\n"
    );
    for (kind, _) in &kinds {
        controllers.push_str(&format!("pub mod {};\n", snake_case(kind)));
    }
    if !kinds.is_empty() {
        controllers.push('\n');
    }
    controllers.push_str(
        "use k8s_openapi::api::rbac::v1::PolicyRule;\n\n\
         /// What the controllers do to the API, cluster-wide: each controller's rules, and\n\
         /// recording events.\npub fn rules() -> Vec<PolicyRule> {\n",
    );
    if kinds.is_empty() {
        controllers.push_str("    Vec::new()\n}\n");
    } else {
        controllers.push_str("    let mut rules = Vec::new();\n");
        for (kind, _) in &kinds {
            controllers.push_str(&format!(
                "    rules.extend({}::rules());\n",
                snake_case(kind)
            ));
        }
        controllers.push_str("    rules.push(kore_operator::events_rule());\n    rules\n}\n");
    }
    controllers.push_str(
        "\n/// Adds every controller to `manager`.\npub fn register(\n    manager: &mut kore_runtime::Manager,\n    metrics: &kore_runtime::metrics::Metrics,\n    options: &crate::Options,\n) {\n",
    );
    if kinds.is_empty() {
        controllers.push_str("    let _ = (manager, metrics, options);\n}\n");
    } else {
        for (kind, _) in &kinds {
            controllers.push_str(&format!(
                "    {}::register(manager, metrics, options);\n",
                snake_case(kind)
            ));
        }
        controllers.push_str("}\n");
    }
    out.push((PathBuf::from("src/controllers/mod.rs"), controllers));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_follow_the_kubernetes_pattern() {
        for ok in ["v1", "v12", "v1alpha1", "v2beta3"] {
            assert!(check_version(ok).is_ok(), "{ok}");
        }
        for bad in [
            "", "1", "v0", "v01", "V1", "v1alpha", "v1gamma1", "v1alpha0", "v1-beta1",
        ] {
            assert!(check_version(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn kinds_and_groups_are_checked() {
        assert!(check_kind("Frigate").is_ok());
        assert!(check_kind("CronJob2").is_ok());
        for bad in ["", "frigate", "Frig-ate", "Frig_ate", "Self"] {
            assert!(check_kind(bad).is_err(), "{bad}");
        }
        assert!(check_group("ship", "example.com").is_ok());
        for bad in ["", "Ship", "ship.example.com", "-ship", "1ship"] {
            assert!(check_group(bad, "example.com").is_err(), "{bad}");
        }
    }
}
