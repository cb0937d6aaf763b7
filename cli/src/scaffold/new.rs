//! `kore new NAME`: a Cargo project holding one operator, ready to build, test and deploy.
//!
//! The project is written into a temporary directory next to the target and renamed into
//! place at the end, so a failure leaves nothing behind and an existing directory is never
//! touched.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use clap::Args;

use super::{KORE_VERSION, LAYOUT, Project, create_api, render, templates as t};

/// Options of `kore new`.
#[derive(Args, Clone, Debug)]
pub(crate) struct NewArgs {
    /// The project's name: its directory, crate, binary, ServiceAccount and Deployment.
    name: String,
    /// The domain its API groups end in (`kore create api --group ship` → ship.DOMAIN).
    #[arg(long, default_value = "example.com")]
    domain: String,
    /// Who owns the project (the crate's `authors`).
    #[arg(long)]
    owner: Option<String>,
    /// Depend on the kore crates of this checkout (path dependencies) instead of their
    /// published versions.
    #[arg(long, value_name = "DIR")]
    kore_path: Option<PathBuf>,
    /// Where to create the project directory (default: the current directory).
    #[arg(long, value_name = "DIR", default_value = ".")]
    parent: PathBuf,
}

/// The kore crates a project depends on, where they live in a checkout, and whether only
/// its tests use them.
pub(crate) const KORE_CRATES: &[(&str, &str, bool)] = &[
    ("kore-operator", "operators/kit", false),
    ("kore-runtime", "crates/runtime", false),
    ("kore-testenv", "crates/testenv", true),
];

/// The dependency lines of the kore crates: (regular, dev).
fn kore_dependencies(kore_path: Option<&Path>) -> anyhow::Result<(String, String)> {
    let root = match kore_path {
        Some(dir) => {
            let root = std::fs::canonicalize(dir)
                .with_context(|| format!("--kore-path {}", dir.display()))?;
            for (name, path, _) in KORE_CRATES {
                anyhow::ensure!(
                    root.join(path).join("Cargo.toml").is_file(),
                    "--kore-path {}: not a kore checkout (no {path}/Cargo.toml for {name})",
                    dir.display()
                );
            }
            Some(root)
        }
        None => None,
    };
    let (mut deps, mut dev) = (String::new(), String::new());
    for (name, path, is_dev) in KORE_CRATES {
        let line = match &root {
            Some(root) => {
                let path = root.join(path);
                let path = path
                    .to_str()
                    .with_context(|| format!("--kore-path: {} is not UTF-8", path.display()))?;
                format!("{name} = {{ path = {} }}\n", toml_string(path))
            }
            None => format!("{name} = \"{KORE_VERSION}\"\n"),
        };
        if *is_dev {
            dev.push_str(&line);
        } else {
            deps.push_str(&line);
        }
    }
    dev.push_str("tokio = { version = \"1\", features = [\"full\", \"test-util\"] }\n");
    Ok((deps, dev))
}

/// `s` as a TOML basic string.
fn toml_string(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The files of a new project, by path.
pub(crate) fn files(
    project: &Project,
    owner: Option<&str>,
    kore_path: Option<&Path>,
) -> anyhow::Result<Vec<(PathBuf, String)>> {
    let (deps, dev_deps) = kore_dependencies(kore_path)?;
    let authors = match owner {
        Some(owner) => format!("\nauthors = [{}]", toml_string(owner)),
        None => String::new(),
    };
    let crate_name = project.name.replace('-', "_");
    let values = [
        ("name", project.name.as_str()),
        ("crate", crate_name.as_str()),
        ("domain", project.domain.as_str()),
        ("kore_version", KORE_VERSION),
        ("layout", LAYOUT),
        ("authors", authors.as_str()),
        ("kore_deps", deps.as_str()),
        ("kore_dev_deps", dev_deps.as_str()),
    ];
    let mut out: Vec<(PathBuf, String)> = [
        ("Cargo.toml", t::CARGO_TOML),
        ("src/lib.rs", t::LIB_RS),
        ("src/main.rs", t::MAIN_RS),
        ("src/manifests.rs", t::MANIFESTS_RS),
        ("tests/operator.rs", t::TEST_OPERATOR_RS),
        ("README.md", t::README_MD),
        ("Dockerfile", t::DOCKERFILE),
        (".dockerignore", t::DOCKERIGNORE),
        (".gitignore", t::GITIGNORE),
        ("rustfmt.toml", t::RUSTFMT_TOML),
        ("clippy.toml", t::CLIPPY_TOML),
        ("ci.sh", t::CI_SH),
    ]
    .into_iter()
    .map(|(path, template)| (PathBuf::from(path), render(template, &values)))
    .collect();
    out.extend(create_api::generated(project));
    out.push((PathBuf::from(Project::FILE), project.render()?));
    Ok(out)
}

/// Runs `kore new`.
pub(crate) fn new(args: &NewArgs) -> anyhow::Result<()> {
    super::check_project_name(&args.name)?;
    super::check_domain(&args.domain)?;
    if let Some(owner) = &args.owner {
        anyhow::ensure!(
            !owner.trim().is_empty() && !owner.chars().any(char::is_control),
            "invalid --owner {owner:?}: give a name on one line"
        );
    }
    let target = args.parent.join(&args.name);
    anyhow::ensure!(
        !target.exists(),
        "{} already exists: choose another name or remove it",
        target.display()
    );
    let project = Project {
        layout: LAYOUT.to_owned(),
        kore_version: KORE_VERSION.to_owned(),
        name: args.name.clone(),
        domain: args.domain.clone(),
        apis: Vec::new(),
    };
    let files = files(&project, args.owner.as_deref(), args.kore_path.as_deref())?;
    let staging = tempfile::Builder::new()
        .prefix(&format!(".{}.kore-new-", args.name))
        .tempdir_in(&args.parent)
        .with_context(|| format!("creating a directory in {}", args.parent.display()))?;
    super::write_all(staging.path(), &files)?;
    set_executable(&staging.path().join("ci.sh"))?;
    // A rename does not replace a directory that appeared meanwhile (it fails if the target
    // is a non-empty directory); check again right before it to report it clearly.
    anyhow::ensure!(
        !target.exists(),
        "{} already exists: choose another name or remove it",
        target.display()
    );
    let staged = staging.keep();
    if let Err(e) = std::fs::rename(&staged, &target) {
        let _ = std::fs::remove_dir_all(&staged);
        return Err(e).with_context(|| format!("creating {}", target.display()));
    }
    println!(
        "created {}: a kore operator project. Next:\n  cd {}\n  kore create api --group GROUP --version v1alpha1 --kind KIND\n  cargo test\n  cargo run -- manifests",
        target.display(),
        target.display()
    );
    Ok(())
}

#[cfg(unix)]
fn set_executable(path: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))
        .with_context(|| format!("making {} executable", path.display()))
}

#[cfg(not(unix))]
fn set_executable(_: &Path) -> anyhow::Result<()> {
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn project(name: &str) -> Project {
        Project {
            layout: LAYOUT.to_owned(),
            kore_version: KORE_VERSION.to_owned(),
            name: name.to_owned(),
            domain: "example.com".to_owned(),
            apis: Vec::new(),
        }
    }

    fn file<'a>(files: &'a [(PathBuf, String)], path: &str) -> &'a str {
        files
            .iter()
            .find(|(p, _)| p == Path::new(path))
            .map(|(_, text)| text.as_str())
            .unwrap_or_else(|| panic!("{path} is generated"))
    }

    /// The Dockerfile cannot be built here (no container runtime), so its rules are checked
    /// as a linter would: two stages, the build stage pinned to a toolchain no older than the
    /// crate's `rust-version` and building with the lock file, a distroless runtime stage
    /// with no RUN (it has no shell) that copies only the binary from the build stage and runs
    /// as the non-root user the Deployment asks for, and an exec-form ENTRYPOINT naming the
    /// crate's binary.
    #[test]
    fn the_dockerfile_is_multi_stage_distroless_non_root_and_runs_the_crates_binary() {
        let files = files(&project("my-op"), None, None).expect("renders");
        let dockerfile = file(&files, "Dockerfile");
        let cargo_toml = file(&files, "Cargo.toml");
        let instructions: Vec<(&str, &str)> = dockerfile
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .map(|l| l.split_once(' ').unwrap_or((l, "")))
            .collect();
        let stages: Vec<usize> = instructions
            .iter()
            .enumerate()
            .filter(|(_, (op, _))| *op == "FROM")
            .map(|(i, _)| i)
            .collect();
        assert_eq!(
            stages.len(),
            2,
            "a build and a runtime stage:\n{dockerfile}"
        );
        let (build, runtime) = (
            &instructions[stages[0]..stages[1]],
            &instructions[stages[1]..],
        );

        let (build_image, build_name) = build[0].1.split_once(" AS ").expect("a named stage");
        let toolchain = build_image
            .strip_prefix("rust:")
            .and_then(|tag| tag.split('-').next())
            .expect("a rust image with a version tag");
        let rust_version = cargo_toml
            .lines()
            .find_map(|l| l.strip_prefix("rust-version = "))
            .map(|v| v.trim_matches('"'))
            .expect("rust-version");
        assert!(
            !super::super::newer(rust_version, toolchain),
            "the image's Rust {toolchain} is older than rust-version {rust_version}"
        );
        let builds = build
            .iter()
            .find(|(op, args)| *op == "RUN" && args.contains("cargo build"))
            .expect("the build stage runs cargo build")
            .1;
        for flag in ["--release", "--locked", "--bin my-op"] {
            assert!(builds.contains(flag), "cargo build {flag}: {builds}");
        }

        let runtime_image = runtime[0].1;
        assert!(
            runtime_image.starts_with("gcr.io/distroless/") && runtime_image.ends_with(":nonroot"),
            "a distroless non-root runtime: {runtime_image}"
        );
        for (op, args) in runtime {
            assert_ne!(*op, "RUN", "the runtime image has no shell: RUN {args}");
            if *op == "COPY" {
                assert!(
                    args.starts_with(&format!("--from={build_name} ")),
                    "the runtime stage copies only from the build stage: COPY {args}"
                );
            }
        }
        let user = runtime
            .iter()
            .rev()
            .find(|(op, _)| *op == "USER")
            .expect("a USER in the runtime stage")
            .1;
        let uid = user.split(':').next().unwrap_or_default();
        assert_eq!(
            uid,
            kore_operator::manifests::RUN_AS_USER.to_string(),
            "the Deployment's runAsUser, not root"
        );
        let (last, entrypoint) = instructions.last().expect("instructions");
        assert_eq!(*last, "ENTRYPOINT");
        let entrypoint: Vec<String> =
            serde_json::from_str(entrypoint).expect("an exec-form ENTRYPOINT");
        assert_eq!(entrypoint, ["/my-op"]);
        assert!(
            cargo_toml.contains("[[bin]]\nname = \"my-op\""),
            "the binary is the crate's:\n{cargo_toml}"
        );

        let ignored: Vec<&str> = file(&files, ".dockerignore").lines().collect();
        for path in ["target/", ".git/"] {
            assert!(ignored.contains(&path), ".dockerignore leaves out {path}");
        }
    }

    #[test]
    fn the_manifests_header_and_the_readme_name_the_projects_own_command() {
        let files = files(&project("my-op"), None, None).expect("renders");
        assert!(
            file(&files, "src/manifests.rs")
                .contains("\"# generated by `my-op manifests` (`cargo run -- manifests`)"),
            "the generated YAML names my-op's command"
        );
        assert!(file(&files, "README.md").contains("docker build -t my-op:0.1.0 ."));
    }
}
