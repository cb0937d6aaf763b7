//! `kore new` and `kore create api`: a generated project builds without warnings, its own
//! tests pass, its manifests are idempotent and checked, and its binary reconciles a sample
//! against `kore apiserver`; bad input is refused with nothing written.
//!
//! The generated project is built into the workspace's target directory with the
//! workspace's `Cargo.lock`, offline, so it reuses the dependencies the workspace built.

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use common::{Process, kore, workspace};
use kube::api::{Api, DynamicObject};
use kube::core::GroupVersionKind;

const WAIT: Duration = Duration::from_secs(30);

async fn run_kore(dir: &Path, args: &[&str]) -> Output {
    kore()
        .current_dir(dir)
        .args(args)
        .output()
        .await
        .expect("kore runs")
}

fn text(out: &Output) -> String {
    format!(
        "status: {}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The target directory the workspace's tests are built in.
fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace().join("target"))
}

/// `cargo <args>` in `dir`, offline, into the workspace's target directory.
async fn cargo(dir: &Path, args: &[&str]) -> Output {
    common::cargo()
        .current_dir(dir)
        .args(args)
        .arg("--offline")
        .env("CARGO_TARGET_DIR", target_dir())
        .env_remove("RUSTFLAGS")
        .output()
        .await
        .expect("cargo runs")
}

/// Every file and directory below `dir`, relative, sorted, with its contents (a directory's
/// are empty).
fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<(PathBuf, Vec<u8>)>) {
        for entry in std::fs::read_dir(dir).expect("readable") {
            let path = entry.expect("an entry").path();
            let rel = path.strip_prefix(root).expect("below root").to_path_buf();
            if path.is_dir() {
                walk(root, &path, out);
                out.push((rel, Vec::new()));
            } else {
                out.push((rel, std::fs::read(&path).expect("readable")));
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

/// Gives the project the one dependency the workspace has and it has not: kube-runtime (the
/// benchmarks' peers and one watch test use it). kube-runtime turns on features of kube-core,
/// kube-client, hashbrown and syn, and a crate built with other features is another crate to
/// cargo: without this the project's build compiles kube, serde's derive and everything above
/// them a second time (about four minutes of CI; `docs/design/ci.md`). The dependency is a
/// dev-dependency the project never uses, so the code under test is what `kore new` wrote.
fn resolve_as_the_workspace(project: &Path) {
    let manifest = project.join("Cargo.toml");
    let text = std::fs::read_to_string(&manifest).expect("Cargo.toml");
    // The kube the project already names, so the two requirements are one version.
    let version = text
        .lines()
        .find_map(|line| line.strip_prefix("kube = { version = \""))
        .and_then(|rest| rest.split('"').next())
        .expect("a kube dependency with a version");
    let dev = "[dev-dependencies]\n";
    assert!(text.contains(dev), "a [dev-dependencies] table:\n{text}");
    let peer = format!(
        "kube = {{ version = \"{version}\", default-features = false, \
         features = [\"runtime\", \"unstable-runtime\"] }}\n"
    );
    let mut text = text.replacen(dev, &format!("{dev}{peer}"), 1);
    // The kore crates are compiled again here whatever their profile (cargo fingerprints a
    // path dependency by its path relative to the workspace that builds it), and the
    // project's `"*"` profile would compile them at opt-level 1. At the workspace's opt-level
    // 0 they compile quicker; the test checks that the project builds, not how fast kore runs.
    for name in LIBRARY_CRATES {
        text.push_str(&format!("\n[profile.dev.package.{name}]\nopt-level = 0\n"));
    }
    std::fs::write(&manifest, text).expect("written");
}

#[tokio::test]
async fn a_new_project_with_two_kinds_builds_tests_checks_its_manifests_and_reconciles() {
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let ws = workspace();
    let out = run_kore(
        tmp.path(),
        &["new", "demo", "--kore-path", ws.to_str().expect("UTF-8")],
    )
    .await;
    assert!(out.status.success(), "{}", text(&out));
    let project = tmp.path().join("demo");
    for args in [
        &[
            "create",
            "api",
            "--group",
            "ship",
            "--version",
            "v1",
            "--kind",
            "Frigate",
        ][..],
        &[
            "create",
            "api",
            "--group",
            "infra",
            "--version",
            "v1alpha1",
            "--kind",
            "CronJob",
            "--cluster",
        ],
        &[
            "create",
            "api",
            "--group",
            "ship",
            "--version",
            "v2",
            "--kind",
            "Frigate",
        ],
    ] {
        let out = run_kore(&project, args).await;
        assert!(out.status.success(), "{args:?}: {}", text(&out));
    }
    std::fs::copy(ws.join("Cargo.lock"), project.join("Cargo.lock")).expect("copied");
    resolve_as_the_workspace(&project);

    let fmt = cargo(&project, &["fmt", "--check"]).await;
    // `cargo fmt` takes no --offline; it is the only call that must do without it.
    if !String::from_utf8_lossy(&fmt.stderr).contains("--offline") {
        assert!(fmt.status.success(), "cargo fmt --check: {}", text(&fmt));
    }
    let build = cargo(&project, &["build", "--all-targets"]).await;
    assert!(build.status.success(), "cargo build: {}", text(&build));
    let stderr = String::from_utf8_lossy(&build.stderr);
    assert!(!stderr.contains("warning"), "the build warns:\n{stderr}");
    let test = cargo(&project, &["test"]).await;
    assert!(test.status.success(), "cargo test: {}", text(&test));
    // The test that reconciles every kind's sample (two kinds, one of them in two versions)
    // under the operator's RBAC and proves it least privilege ran, and passed.
    assert!(
        String::from_utf8_lossy(&test.stdout).contains(
            "test every_kind_is_reconciled_under_exactly_the_rbac_the_operator_declares ... ok"
        ),
        "cargo test: {}",
        text(&test)
    );

    let bin = target_dir().join("debug").join("demo");
    let demo = |args: &[&str]| {
        std::process::Command::new(&bin)
            .current_dir(&project)
            .args(args)
            .output()
            .expect("demo runs")
    };
    let version = demo(&["--version"]);
    assert_eq!(
        String::from_utf8_lossy(&version.stdout).trim(),
        "demo 0.1.0"
    );
    let written = demo(&["manifests"]);
    assert!(written.status.success(), "{written:?}");
    let first = snapshot(&project.join("config"));
    let again = demo(&["manifests"]);
    assert!(again.status.success(), "{again:?}");
    assert_eq!(
        snapshot(&project.join("config")),
        first,
        "manifests is idempotent"
    );
    assert!(demo(&["manifests", "--check"]).status.success());
    let paths: Vec<String> = first.iter().map(|(p, _)| p.display().to_string()).collect();
    for (path, contents) in &first {
        if !contents.is_empty() {
            assert!(
                contents.starts_with(
                    b"# generated by `demo manifests` (`cargo run -- manifests`); do not edit\n"
                ),
                "{} names the project's own command",
                path.display()
            );
        }
    }
    for expected in [
        "kustomization.yaml",
        "crd/frigates.ship.example.com.yaml",
        "crd/cronjobs.infra.example.com.yaml",
        "rbac/rbac.yaml",
        "manager/deployment.yaml",
        "samples/frigate_v2.yaml",
    ] {
        assert!(
            paths.iter().any(|p| p == expected),
            "{expected} in {paths:?}"
        );
    }
    let crd = std::fs::read_to_string(project.join("config/crd/frigates.ship.example.com.yaml"))
        .expect("the CRD");
    assert!(
        crd.contains("name: v1") && crd.contains("name: v2"),
        "{crd}"
    );
    std::fs::write(
        project.join("config/rbac/rbac.yaml"),
        "# generated by `demo manifests` (`cargo run -- manifests`); do not edit\n",
    )
    .expect("written");
    let drift = demo(&["manifests", "--check"]);
    assert!(!drift.status.success());
    assert!(
        String::from_utf8_lossy(&drift.stderr).contains("changed: config/rbac/rbac.yaml"),
        "{drift:?}"
    );

    // The walkthrough's manifests for a registry's image, in another directory.
    let image = "registry.example.com/demo:0.1.0";
    let other = demo(&["manifests", "--image", image, "--out", "deploy"]);
    assert!(other.status.success(), "{other:?}");
    let deployment = std::fs::read_to_string(project.join("deploy/manager/deployment.yaml"))
        .expect("the deployment");
    assert!(
        deployment.contains(&format!("image: {image}")),
        "{deployment}"
    );

    // examples/my-operator.md: against `kore up`, install with the samples, run, and the
    // sample Frigate becomes Ready.
    let walkthrough =
        std::fs::read_to_string(ws.join("examples/my-operator.md")).expect("the walkthrough");
    for command in [
        "kore new demo --kore-path",
        "kore create api --group ship --version v1 --kind Frigate",
        "kore up",
        "cargo run -- install --samples",
        "cargo run -- run",
        "kubectl get frigates",
        "docker build -t registry.example.com/demo:0.1.0 .",
        "cargo run -- manifests --image registry.example.com/demo:0.1.0 --out deploy",
        "kubectl apply -k deploy/",
    ] {
        assert!(
            walkthrough.contains(command),
            "the walkthrough shows `{command}`"
        );
    }
    let server = Process::start("up", &[]).await;
    let kubeconfig = server.kubeconfig.to_str().expect("UTF-8").to_owned();
    let install = demo(&["install", "--samples", "--kubeconfig", &kubeconfig]);
    assert!(install.status.success(), "{install:?}");
    // The whole of config/, as a cluster would get it, is accepted by the server.
    assert!(
        demo(&["manifests"]).status.success(),
        "the drift is repaired"
    );
    if let Some(kubectl) = kore_testenv::kubectl::kubectl_or_skip() {
        let out = std::process::Command::new(kubectl)
            .current_dir(&project)
            .env("KUBECONFIG", &kubeconfig)
            .args(["apply", "--dry-run=server", "-k", "config/"])
            .output()
            .expect("kubectl runs");
        assert!(
            out.status.success(),
            "kubectl apply --dry-run=server -k config/: {}",
            text(&out)
        );
    }
    let _running = tokio::process::Command::new(&bin)
        .args(["run", "--kubeconfig", &kubeconfig])
        .kill_on_drop(true)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("demo run starts");
    let client = server.client().await;
    let gvk = GroupVersionKind::gvk("ship.example.com", "v1", "Frigate");
    let (resource, _) = kube::discovery::pinned_kind(&client, &gvk)
        .await
        .expect("the CRD is served");
    let api: Api<DynamicObject> = Api::namespaced_with(client, "default", &resource);
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let current = api
            .get("frigate-sample-v1")
            .await
            .expect("the sample exists");
        let ready = current.data["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"] == "Ready" && c["status"] == "True");
        if ready {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the sample did not become Ready: {current:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn bad_input_is_refused_with_a_clear_message_and_nothing_written() {
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let refused = |out: &Output, expected: &str| {
        assert!(!out.status.success(), "{}", text(out));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(expected), "expected {expected:?}: {stderr}");
    };
    for (name, expected) in [
        ("Demo", "invalid project name"),
        ("2demo", "invalid project name"),
        ("de_mo", "invalid project name"),
        ("self", "Rust keyword"),
    ] {
        refused(&run_kore(tmp.path(), &["new", name]).await, expected);
    }
    refused(
        &run_kore(tmp.path(), &["new", "demo", "--domain", "nodot"]).await,
        "invalid domain",
    );
    refused(
        &run_kore(tmp.path(), &["new", "demo", "--kore-path", "/nonexistent"]).await,
        "--kore-path",
    );
    assert!(snapshot(tmp.path()).is_empty(), "nothing written");

    refused(
        &run_kore(
            tmp.path(),
            &[
                "create",
                "api",
                "--group",
                "ship",
                "--version",
                "v1",
                "--kind",
                "Frigate",
            ],
        )
        .await,
        "not a kore project",
    );

    let out = run_kore(tmp.path(), &["new", "demo"]).await;
    assert!(out.status.success(), "{}", text(&out));
    let cargo_toml =
        std::fs::read_to_string(tmp.path().join("demo/Cargo.toml")).expect("Cargo.toml");
    assert!(
        cargo_toml.contains(&format!("kore-runtime = \"{}\"", env!("CARGO_PKG_VERSION"))),
        "published versions by default:\n{cargo_toml}"
    );
    refused(
        &run_kore(tmp.path(), &["new", "demo"]).await,
        "already exists",
    );

    let project = tmp.path().join("demo");
    let ok = run_kore(
        &project,
        &[
            "create",
            "api",
            "--group",
            "ship",
            "--version",
            "v1",
            "--kind",
            "Frigate",
        ],
    )
    .await;
    assert!(ok.status.success(), "{}", text(&ok));
    let before = snapshot(&project);
    for (args, expected) in [
        (
            &["--group", "ship", "--version", "v1", "--kind", "frigate"][..],
            "invalid kind",
        ),
        (
            &["--group", "ship", "--version", "v1", "--kind", "Fri-gate"],
            "invalid kind",
        ),
        (
            &["--group", "Ship", "--version", "v1", "--kind", "Boat"],
            "invalid group",
        ),
        (
            &[
                "--group",
                "ship.example.com",
                "--version",
                "v1",
                "--kind",
                "Boat",
            ],
            "invalid group",
        ),
        (
            &["--group", "ship", "--version", "1", "--kind", "Boat"],
            "invalid version",
        ),
        (
            &["--group", "ship", "--version", "v1", "--kind", "Frigate"],
            "already exists",
        ),
        (
            &["--group", "other", "--version", "v2", "--kind", "Frigate"],
            "already exists in group",
        ),
        (
            &[
                "--group",
                "ship",
                "--version",
                "v2",
                "--kind",
                "Frigate",
                "--cluster",
            ],
            "same scope",
        ),
    ] {
        let mut full = vec!["create", "api"];
        full.extend_from_slice(args);
        refused(&run_kore(&project, &full).await, expected);
    }
    assert_eq!(snapshot(&project), before, "nothing written");

    // A project from a newer kore is refused with what to do.
    let boat = [
        "create",
        "api",
        "--group",
        "ship",
        "--version",
        "v1",
        "--kind",
        "Boat",
    ];
    let file = project.join("PROJECT");
    let text_before = std::fs::read_to_string(&file).expect("PROJECT");
    std::fs::write(
        &file,
        text_before.replace(env!("CARGO_PKG_VERSION"), "99.0.0"),
    )
    .expect("written");
    refused(
        &run_kore(
            &project,
            &[
                "create",
                "api",
                "--group",
                "ship",
                "--version",
                "v1",
                "--kind",
                "Boat",
            ],
        )
        .await,
        "upgrade kore",
    );
    assert_eq!(
        std::fs::read_to_string(&file).expect("PROJECT"),
        text_before.replace(env!("CARGO_PKG_VERSION"), "99.0.0"),
        "nothing written"
    );
    // Another layout is refused naming the kore that wrote it; no layout, saying what to do.
    let layout = text_before.replace("layout: kore/v1", "layout: kore/v9");
    assert_ne!(
        layout, text_before,
        "PROJECT has a layout line:\n{text_before}"
    );
    std::fs::write(&file, &layout).expect("written");
    refused(
        &run_kore(&project, &boat).await,
        &format!("install kore {}", env!("CARGO_PKG_VERSION")),
    );
    std::fs::write(&file, text_before.replace("layout: kore/v1\n", "")).expect("written");
    refused(
        &run_kore(&project, &boat).await,
        "records no layout: a project made by `kore new` has the line `layout: kore/v1`",
    );

    // A project from an older kore, whose Cargo.toml asks for older kore crates: the kind is
    // added, PROJECT records this kore, and the message names each line of Cargo.toml to
    // change.
    let version = env!("CARGO_PKG_VERSION");
    std::fs::write(&file, text_before.replace(version, "0.0.1")).expect("written");
    let manifest = project.join("Cargo.toml");
    let cargo_before = std::fs::read_to_string(&manifest).expect("Cargo.toml");
    let old_crates = cargo_before.replace(&format!("= \"{version}\""), "= \"0.0.1\"");
    std::fs::write(&manifest, &old_crates).expect("written");
    let out = run_kore(&project, &boat).await;
    assert!(out.status.success(), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("last written by kore 0.0.1"), "{stderr}");
    for name in ["kore-operator", "kore-runtime", "kore-testenv"] {
        assert!(
            stderr.contains(&format!(
                "asks for {name} = \"0.0.1\": change it to {name} = \"{version}\""
            )),
            "{stderr}"
        );
    }
    let after = std::fs::read_to_string(&file).expect("PROJECT");
    assert!(
        after.contains(&format!("koreVersion: \"{version}\"")) && after.contains("kind: Boat"),
        "{after}"
    );
    assert_eq!(
        std::fs::read_to_string(&manifest).expect("Cargo.toml"),
        old_crates,
        "Cargo.toml is the user's: told, not edited"
    );
    std::fs::write(&manifest, &cargo_before).expect("written");

    // A PROJECT that records no kore version: the kind is added and the version recorded.
    let unrecorded: String = after
        .lines()
        .filter(|l| !l.starts_with("koreVersion:"))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&file, unrecorded).expect("written");
    let out = run_kore(
        &project,
        &[
            "create",
            "api",
            "--group",
            "ship",
            "--version",
            "v1",
            "--kind",
            "Raft",
        ],
    )
    .await;
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("recorded no kore version"),
        "{}",
        text(&out)
    );
    let after = std::fs::read_to_string(&file).expect("PROJECT");
    assert!(
        after.contains(&format!("koreVersion: \"{version}\"")) && after.contains("kind: Raft"),
        "{after}"
    );
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("warning"),
        "Cargo.toml asks for this kore's crates: {}",
        text(&out)
    );

    // A kind named like one of the project's own files gets files of its own.
    let operator_test = std::fs::read(project.join("tests/operator.rs")).expect("the test");
    let out = run_kore(
        &project,
        &[
            "create",
            "api",
            "--group",
            "ship",
            "--version",
            "v1",
            "--kind",
            "Operator",
        ],
    )
    .await;
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(
        std::fs::read(project.join("tests/operator.rs")).expect("the test"),
        operator_test
    );
    assert!(project.join("tests/operator_controller.rs").is_file());
}

/// A directory that cannot be written is refused with the path and the reason, and nothing
/// is left behind: for `kore new` a parent that is not a writable directory, for `kore
/// create api` a directory in the way of the files it adds (and, when permissions are
/// enforced, that is, not as root, a read-only directory).
#[tokio::test]
async fn an_unwritable_directory_is_refused_and_nothing_is_half_written() {
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let refused = |out: &Output, expected: &str| {
        assert!(!out.status.success(), "{}", text(out));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(expected), "expected {expected:?}: {stderr}");
    };
    let not_a_dir = tmp.path().join("file");
    std::fs::write(&not_a_dir, "").expect("written");
    refused(
        &run_kore(
            tmp.path(),
            &[
                "new",
                "demo",
                "--parent",
                not_a_dir.to_str().expect("UTF-8"),
            ],
        )
        .await,
        "creating a directory in",
    );
    assert!(
        run_kore(tmp.path(), &["new", "demo"])
            .await
            .status
            .success()
    );
    let project = tmp.path().join("demo");
    let boat = [
        "create",
        "api",
        "--group",
        "ship",
        "--version",
        "v1",
        "--kind",
        "Boat",
    ];

    // `tests` is a file: the type and controller are staged (src/api/boat/ created for them),
    // then the test cannot be, and everything is taken back.
    let tests = project.join("tests");
    let kept = tmp.path().join("tests-kept");
    std::fs::rename(&tests, &kept).expect("moved");
    std::fs::write(&tests, "").expect("written");
    let before = snapshot(&project);
    refused(
        &run_kore(&project, &boat).await,
        "cannot create the directory ./tests: File exists",
    );
    assert_eq!(snapshot(&project), before, "nothing written");
    std::fs::remove_file(&tests).expect("removed");
    std::fs::rename(&kept, &tests).expect("moved back");

    // A read-only directory, where permissions hold.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let controllers = project.join("src/controllers");
        std::fs::set_permissions(&controllers, std::fs::Permissions::from_mode(0o555))
            .expect("read-only");
        let probe = controllers.join("probe");
        if std::fs::write(&probe, "").is_ok() {
            std::fs::remove_file(&probe).expect("removed");
            eprintln!("permissions are not enforced (root): the read-only case is skipped");
        } else {
            let before = snapshot(&project);
            refused(
                &run_kore(&project, &boat).await,
                "cannot write into ./src/controllers",
            );
            assert_eq!(snapshot(&project), before, "nothing written");
        }
        std::fs::set_permissions(&controllers, std::fs::Permissions::from_mode(0o755))
            .expect("writable");
    }
    let out = run_kore(&project, &boat).await;
    assert!(out.status.success(), "then it works: {}", text(&out));
}

/// The library crates a generated project depends on, directly (kore-operator,
/// kore-runtime, kore-testenv) or through them.
const LIBRARY_CRATES: [&str; 7] = [
    "kore-apiserver",
    "kore-workqueue",
    "kore-runtime",
    "kore-testenv",
    "kore-nodes",
    "kore-controller-manager",
    "kore-operator",
];

/// What `cargo package` and crates.io need of the library crates a generated project depends
/// on: a description, license, repository, readme and keywords, no `publish = false`, and
/// `cargo package --no-verify` (offline, from the registry index cargo already has) packing
/// them all, in an order it can find (a dev-dependency cycle between two of them breaks it).
/// `cargo doc` of each runs in CI (`.ci/run`, with warnings denied); `cargo package` with
/// verification compiles each crate again alone and costs minutes, so it is not run (see
/// docs/design/scaffolding.md).
#[tokio::test]
async fn the_library_crates_carry_what_publishing_needs() {
    let out = common::cargo()
        .current_dir(workspace())
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .output()
        .await
        .expect("cargo metadata runs");
    assert!(out.status.success(), "{}", text(&out));
    let metadata: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let packages = metadata["packages"].as_array().expect("packages");
    for name in LIBRARY_CRATES {
        let package = packages
            .iter()
            .find(|p| p["name"] == name)
            .unwrap_or_else(|| panic!("{name} is a member"));
        for field in ["description", "license", "repository", "readme"] {
            assert!(
                package[field].as_str().is_some_and(|v| !v.is_empty()),
                "{name} has no {field}"
            );
        }
        assert!(
            package["keywords"]
                .as_array()
                .is_some_and(|k| !k.is_empty() && k.len() <= 5),
            "{name} needs one to five keywords"
        );
        assert_ne!(
            package["publish"],
            serde_json::json!([]),
            "{name} is publishable"
        );
    }

    let target = tempfile::tempdir().expect("a temporary directory");
    let mut package = common::cargo();
    package
        .current_dir(workspace())
        .args(["package", "--no-verify", "--offline", "--allow-dirty"])
        .arg("--target-dir")
        .arg(target.path());
    for name in LIBRARY_CRATES {
        package.args(["-p", name]);
    }
    let out = package.output().await.expect("cargo package runs");
    assert!(out.status.success(), "cargo package: {}", text(&out));
    for name in LIBRARY_CRATES {
        let file = target
            .path()
            .join("package")
            .join(format!("{name}-{}.crate", env!("CARGO_PKG_VERSION")));
        assert!(
            file.is_file(),
            "{} is packed: {}",
            file.display(),
            text(&out)
        );
    }
}
