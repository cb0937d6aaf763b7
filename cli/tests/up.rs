//! `kore up`: the server with both operators, each as its ServiceAccount; `--demo` converges
//! the samples; every file of deploy/ is accepted by the server; Ctrl-C stops it cleanly.

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::{Process, workspace};
use k8s_openapi::api::core::v1::Namespace;
use kore_testenv::kubectl::{Kubectl, kubectl_or_skip};
use kube::api::{Api, PostParams};

const CONVERGE: Duration = Duration::from_secs(40);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kore_up_demo_converges_prints_it_and_stops_on_ctrl_c() {
    let mut kore = Process::start("up", &["--demo"]).await;
    let converged = kore
        .line(CONVERGE, |l| {
            l.starts_with("demo: converged") || l.starts_with("demo: did not converge")
        })
        .await;
    assert!(
        converged.starts_with("demo: converged"),
        "{}",
        kore.output()
    );
    let out = kore.stdout().join("\n");
    let cms = kore_configmap_sync::operator();
    let foo = kore_sample_controller::operator();
    assert!(
        !cms.samples.is_empty() && !foo.samples.is_empty(),
        "both operators have samples"
    );
    for sample in cms.samples.iter().chain(&foo.samples) {
        let kind = sample["kind"].as_str().expect("a kind");
        let ns = sample["metadata"]["namespace"].as_str();
        let name = sample["metadata"]["name"].as_str().expect("a name");
        let what = match ns {
            Some(ns) => format!("{kind} {ns}/{name}"),
            None => format!("{kind} {name}"),
        };
        assert!(
            out.contains(&format!("demo: applied {what}")),
            "{what} not applied:\n{out}"
        );
        // Convergence lines always name the namespace.
        let what = format!("{kind} {}/{name}", ns.unwrap_or("default"));
        match kind {
            "ConfigMapSync" => assert!(
                out.contains(&format!("  {what}: Ready; copies of")),
                "{what} not converged:\n{out}"
            ),
            "Foo" => assert!(
                out.contains(&format!("  {what}: Deployment")),
                "{what} not converged:\n{out}"
            ),
            _ => {}
        }
    }
    kore.line(Duration::from_secs(5), |l| l == "Press Ctrl-C to stop.")
        .await;

    kore.interrupt().await;
    let status = tokio::time::timeout(Duration::from_secs(20), kore.child.wait())
        .await
        .expect("kore up stops within 20 s of Ctrl-C")
        .expect("waited");
    assert!(status.success(), "{status:?}\n{}", kore.output());
    let output = kore.output();
    assert!(
        !output.to_lowercase().contains("forbidden"),
        "an operator was denied something its RBAC should grant:\n{output}"
    );
    for operator in ["configmap-sync", "sample-controller"] {
        assert!(
            output.contains(&format!("released the lease lease={operator}")),
            "{operator} did not stop gracefully:\n{output}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_file_in_deploy_is_accepted_by_kubectl_apply_dry_run_server() {
    let Some(kubectl) = kubectl_or_skip() else {
        return;
    };
    let kore = Process::start("up", &[]).await;
    let kubectl = Kubectl::new(kubectl, &kore.kubeconfig);
    let mut files = Vec::new();
    collect_yaml(&workspace().join("deploy"), &mut files);
    files.sort();
    assert!(
        files.len() >= 9,
        "deploy/ holds the generated files: {files:?}"
    );

    // A dry run creates nothing, so the namespaces a sample file creates do not exist when
    // the file's other objects are checked: create them for real first.
    let client = kore.client().await;
    let namespaces: Api<Namespace> = Api::all(client);
    let mut needed = BTreeSet::new();
    for file in &files {
        let text = std::fs::read_to_string(file).expect("readable");
        for doc in text.split("---\n").skip(1) {
            let object: serde_json::Value = serde_saphyr::from_str(doc).expect("YAML");
            if object["kind"] == "Namespace" {
                needed.insert(
                    object["metadata"]["name"]
                        .as_str()
                        .expect("a name")
                        .to_owned(),
                );
            }
        }
    }
    for name in needed {
        let mut ns = Namespace::default();
        ns.metadata.name = Some(name);
        match namespaces.create(&PostParams::default(), &ns).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            Err(e) => panic!("creating a namespace: {e}"),
        }
    }

    for file in &files {
        let path = file.to_str().expect("UTF-8");
        let out = kubectl
            .run(&["apply", "--dry-run=server", "-f", path])
            .await;
        assert!(out.status.success(), "{path} was refused: {out:?}");
        let documents = std::fs::read_to_string(file)
            .expect("readable")
            .matches("---\n")
            .count();
        assert_eq!(
            out.stdout
                .lines()
                .filter(|l| l.ends_with("(server dry run)"))
                .count(),
            documents,
            "{path}: every object is checked: {out:?}"
        );
    }
}

fn collect_yaml(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("deploy/ exists") {
        let path = entry.expect("an entry").path();
        if path.is_dir() {
            collect_yaml(&path, out);
        } else if path.extension().is_some_and(|e| e == "yaml") {
            out.push(path);
        }
    }
}

/// Issue 11, defect 8: `kore up` stopped (SIGSTOP) for longer than the renew deadline, then
/// continued: every operator loses its Lease and campaigns again, the process stays up and
/// ready, and the operators reconcile what changed while it was stopped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kore_up_survives_a_sigstop_longer_than_the_renew_deadline_and_its_operators_resume() {
    use k8s_openapi::api::apps::v1::Deployment;
    use kore_sample_controller::{Foo, FooSpec};
    use kore_testenv::wait_for;

    const OPERATORS: [&str; 2] = ["configmap-sync", "sample-controller"];
    let mut kore = Process::start("up", &[]).await;
    let client = kore.client().await;
    let foos: Api<Foo> = Api::namespaced(client.clone(), "default");
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
    let foo = |name: &str| {
        Foo::new(
            name,
            FooSpec {
                deployment_name: format!("{name}-deploy"),
                replicas: Some(1),
            },
        )
    };
    let deployed = |name: String| {
        let deployments = deployments.clone();
        async move { deployments.get_opt(&name).await.ok().flatten().map(|_| ()) }
    };
    foos.create(&PostParams::default(), &foo("before"))
        .await
        .expect("Foo created");
    wait_for(CONVERGE, || deployed("before-deploy".into()))
        .await
        .unwrap_or_else(|e| {
            panic!(
                "{e}: the operator works before the stop:\n{}",
                kore.output()
            )
        });

    // Stopped for 12 s: past the 10 s renew deadline, within the 15 s lease.
    signal(&kore, "-STOP").await;
    tokio::time::sleep(Duration::from_secs(12)).await;
    signal(&kore, "-CONT").await;

    wait_for(CONVERGE, || async {
        let out = kore.output();
        OPERATORS
            .iter()
            .all(|op| {
                out.contains(&format!("lost the lease lease={op}"))
                    && out
                        .matches(&format!("acquired the lease lease={op}"))
                        .count()
                        >= 2
            })
            .then_some(())
    })
    .await
    .unwrap_or_else(|e| {
        panic!(
            "{e}: every operator lost its lease and won it back:\n{}",
            kore.output()
        )
    });
    assert!(
        kore.child.try_wait().expect("polled").is_none(),
        "kore up still runs:\n{}",
        kore.output()
    );
    let ready = client
        .request_text(
            http::Request::get("/readyz")
                .body(Vec::new())
                .expect("a request"),
        )
        .await
        .expect("/readyz answers 200");
    assert_eq!(ready, "ok");

    // The operators reconcile again: a new Foo gets its Deployment.
    foos.create(&PostParams::default(), &foo("after"))
        .await
        .expect("Foo created");
    wait_for(CONVERGE, || deployed("after-deploy".into()))
        .await
        .unwrap_or_else(|e| panic!("{e}: the operator resumed:\n{}", kore.output()));

    kore.interrupt().await;
    let status = tokio::time::timeout(Duration::from_secs(20), kore.child.wait())
        .await
        .expect("kore up stops within 20 s of Ctrl-C")
        .expect("waited");
    assert!(status.success(), "{status:?}\n{}", kore.output());
}

/// Sends `kill <flag>` to the process.
async fn signal(process: &Process, flag: &str) {
    let pid = process.child.id().expect("still running");
    let status = tokio::process::Command::new("kill")
        .args([flag, &pid.to_string()])
        .status()
        .await
        .expect("kill runs");
    assert!(status.success(), "kill {flag} {pid}");
}
