//! examples/README.md, followed step by step with kubectl against a `kore up` process: each
//! command the test runs appears in the README verbatim, and each step's result is checked.

mod common;

use std::time::Duration;

use common::{Process, workspace};
use kore_testenv::kubectl::{Kubectl, kubectl_or_skip};

const CONVERGE: Duration = Duration::from_secs(30);

/// A command as the README shows it: arguments with shell characters single-quoted.
fn shown(args: &[&str]) -> String {
    let mut line = String::from("kubectl");
    for arg in args {
        line.push(' ');
        if arg.chars().any(|c| " {}[]()\"'?$*&|;<>=@".contains(c)) && !arg.starts_with("--") {
            line.push_str(&format!("'{arg}'"));
        } else {
            line.push_str(arg);
        }
    }
    line
}

struct Walkthrough {
    kubectl: Kubectl,
    readme: String,
}

impl Walkthrough {
    fn check_shown(&self, args: &[&str]) {
        let line = shown(args);
        assert!(
            self.readme.contains(&line),
            "examples/README.md does not show `{line}`"
        );
    }

    /// Runs a README command that must succeed; returns its output.
    async fn step(&self, args: &[&str]) -> String {
        self.check_shown(args);
        self.kubectl.ok(args).await
    }

    /// Runs a README command until its output satisfies `done`.
    async fn until(&self, args: &[&str], done: impl Fn(&kore_testenv::kubectl::Output) -> bool) {
        self.check_shown(args);
        let deadline = tokio::time::Instant::now() + CONVERGE;
        loop {
            let out = self.kubectl.run(args).await;
            if done(&out) {
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "`{}` did not reach the expected result within {CONVERGE:?}: {out:?}",
                shown(args)
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_examples_walkthrough_works_as_written_against_kore_up() {
    let Some(kubectl) = kubectl_or_skip() else {
        return;
    };
    let root = workspace();
    // The README's paths are relative to the repository root; the test passes them so too.
    std::env::set_current_dir(&root).expect("the workspace root");
    let kore = Process::start("up", &[]).await;
    let w = Walkthrough {
        kubectl: Kubectl::new(kubectl, &kore.kubeconfig),
        readme: std::fs::read_to_string(root.join("examples/README.md")).expect("the README"),
    };
    let printed = |expected: &'static str| {
        move |out: &kore_testenv::kubectl::Output| out.status.success() && out.stdout == expected
    };
    let not_found = |out: &kore_testenv::kubectl::Output| {
        !out.status.success() && out.stderr.contains("NotFound")
    };

    // ConfigMapSync: copies appear, follow the source, and go with the ConfigMapSync.
    w.step(&["apply", "-f", "examples/namespaces.yaml"]).await;
    w.step(&["apply", "-f", "examples/source-configmap.yaml"])
        .await;
    w.step(&["apply", "-f", "examples/configmapsync.yaml"])
        .await;
    w.until(
        &[
            "get",
            "configmapsync",
            "app-config",
            "-n",
            "platform",
            "-o",
            "jsonpath={.status.conditions[?(@.type==\"Ready\")].status}",
        ],
        printed("True"),
    )
    .await;
    for team in ["team-a", "team-b"] {
        w.until(
            &[
                "get",
                "configmap",
                "app-config",
                "-n",
                team,
                "-o",
                "jsonpath={.data.greeting}",
            ],
            printed("hello"),
        )
        .await;
    }
    let listed = w.step(&["get", "configmapsyncs", "-A"]).await;
    assert!(
        listed.contains("app-config") && listed.contains("True"),
        "{listed}"
    );

    w.step(&[
        "patch",
        "configmap",
        "app-config",
        "-n",
        "platform",
        "--type",
        "merge",
        "-p",
        "{\"data\":{\"greeting\":\"hello again\"}}",
    ])
    .await;
    w.until(
        &[
            "get",
            "configmap",
            "app-config",
            "-n",
            "team-b",
            "-o",
            "jsonpath={.data.greeting}",
        ],
        printed("hello again"),
    )
    .await;

    w.step(&["delete", "configmap", "app-config", "-n", "team-a"])
        .await;
    w.until(
        &[
            "get",
            "configmap",
            "app-config",
            "-n",
            "team-a",
            "-o",
            "jsonpath={.data.greeting}",
        ],
        printed("hello again"),
    )
    .await;

    w.step(&["delete", "configmapsync", "app-config", "-n", "platform"])
        .await;
    for team in ["team-a", "team-b"] {
        w.until(&["get", "configmap", "app-config", "-n", team], not_found)
            .await;
    }
    let source = w
        .step(&[
            "get",
            "configmap",
            "app-config",
            "-n",
            "platform",
            "-o",
            "jsonpath={.data.greeting}",
        ])
        .await;
    assert_eq!(source, "hello again", "the source is never touched");

    // Foo: a Deployment with its replicas, owned by the Foo.
    w.step(&["apply", "-f", "examples/foo.yaml"]).await;
    w.until(
        &[
            "get",
            "deployment",
            "example-foo",
            "-o",
            "jsonpath={.spec.replicas}",
        ],
        printed("1"),
    )
    .await;
    w.step(&[
        "patch",
        "foo",
        "example-foo",
        "--type",
        "merge",
        "-p",
        "{\"spec\":{\"replicas\":3}}",
    ])
    .await;
    w.until(
        &[
            "get",
            "deployment",
            "example-foo",
            "-o",
            "jsonpath={.spec.replicas}",
        ],
        printed("3"),
    )
    .await;
    let owner = w
        .step(&[
            "get",
            "deployment",
            "example-foo",
            "-o",
            "jsonpath={.metadata.ownerReferences[0].kind}",
        ])
        .await;
    assert_eq!(owner, "Foo");
    // kore up runs the Deployment controller and simulated nodes: the pods run, and the
    // Foo's status follows the Deployment's.
    w.until(
        &[
            "get",
            "foo",
            "example-foo",
            "-o",
            "jsonpath={.status.availableReplicas}",
        ],
        printed("3"),
    )
    .await;
    w.step(&["delete", "foo", "example-foo"]).await;
    w.until(&["get", "deployment", "example-foo"], not_found)
        .await;
}
