//! Namespace lifecycle against an in-process kore-apiserver: a deleted namespace turns
//! Terminating, reports what holds it in `status.conditions`, refuses new content, empties
//! itself honouring every object's finalizers, and is removed last. One test drives
//! `kubectl delete ns` over a real socket (skipped when kubectl is not on `PATH`).

use std::future::Future;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use kore_testenv::{TestEnv, wait_for};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::core::Status;
use serde_json::{Value, json};

/// How long a whole test may take.
const TEST_TIMEOUT: Duration = Duration::from_secs(120);
/// How long the namespace controller may take to reach a state.
const SETTLE: Duration = Duration::from_secs(10);

async fn within(body: impl Future<Output = ()>) {
    tokio::time::timeout(TEST_TIMEOUT, body)
        .await
        .expect("the test finished within its time limit");
}

fn api_error(e: kube::Error) -> Status {
    match e {
        kube::Error::Api(s) => *s,
        other => panic!("expected an API error, got {other:?}"),
    }
}

async fn create_namespace(client: &kube::Client, name: &str) {
    let ns: Namespace =
        serde_json::from_value(json!({"metadata": {"name": name}})).expect("a namespace");
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .expect("create namespace");
}

fn cm(name: &str, finalizers: &[&str]) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name, "finalizers": finalizers}}))
        .expect("a ConfigMap")
}

/// The namespace's conditions as `type → (status, reason, message)`.
fn conditions(ns: &Namespace) -> Vec<(String, String, String, String)> {
    ns.status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default()
        .into_iter()
        .map(|c| {
            (
                c.type_,
                c.status,
                c.reason.unwrap_or_default(),
                c.message.unwrap_or_default(),
            )
        })
        .collect()
}

#[tokio::test]
async fn a_finalizer_holds_a_terminating_namespace_and_its_conditions_say_so() {
    within(async {
        let env = TestEnv::start().await.expect("start");
        let client = env.client();
        create_namespace(&client, "doomed").await;
        let namespaces: Api<Namespace> = Api::all(client.clone());
        let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "doomed");
        let secrets: Api<Secret> = Api::namespaced(client.clone(), "doomed");
        cms.create(&PostParams::default(), &cm("held", &["example.com/hold"]))
            .await
            .expect("create held");
        cms.create(&PostParams::default(), &cm("plain", &[]))
            .await
            .expect("create plain");
        let secret: Secret =
            serde_json::from_value(json!({"metadata": {"name": "s"}})).expect("secret");
        secrets
            .create(&PostParams::default(), &secret)
            .await
            .expect("create secret");

        let deleted = namespaces
            .delete("doomed", &DeleteParams::background())
            .await
            .expect("delete namespace")
            .left()
            .expect("the namespace is returned, terminating");
        assert!(deleted.metadata.deletion_timestamp.is_some());
        assert_eq!(
            deleted.status.as_ref().and_then(|s| s.phase.as_deref()),
            Some("Terminating")
        );

        let ns = wait_for(SETTLE, || async {
            let ns = namespaces.get("doomed").await.expect("still there");
            conditions(&ns)
                .iter()
                .any(|c| c.0 == "NamespaceFinalizersRemaining" && c.1 == "True")
                .then_some(ns)
        })
        .await
        .expect("the conditions report the finalizer");
        // Nothing new goes into a terminating namespace.
        match cms.create(&PostParams::default(), &cm("late", &[])).await {
            Err(kube::Error::Api(e)) => {
                assert_eq!(e.code, 403, "{e:?}");
                assert!(e.message.contains("is being terminated"), "{e:?}");
            }
            other => panic!("a create in a terminating namespace: {other:?}"),
        }
        assert_eq!(
            conditions(&ns),
            vec![
                (
                    "NamespaceDeletionDiscoveryFailure".into(),
                    "False".into(),
                    "ResourcesDiscovered".into(),
                    "All resources successfully discovered".into()
                ),
                (
                    "NamespaceDeletionGroupVersionParsingFailure".into(),
                    "False".into(),
                    "ParsedGroupVersions".into(),
                    "All legacy kube types successfully parsed".into()
                ),
                (
                    "NamespaceDeletionContentFailure".into(),
                    "False".into(),
                    "ContentDeleted".into(),
                    "All content successfully deleted, may be waiting on finalization".into()
                ),
                (
                    "NamespaceContentRemaining".into(),
                    "True".into(),
                    "SomeResourcesRemain".into(),
                    "Some resources are remaining: configmaps. has 1 resource instances".into()
                ),
                (
                    "NamespaceFinalizersRemaining".into(),
                    "True".into(),
                    "SomeFinalizersRemain".into(),
                    "Some content in the namespace has finalizers remaining: example.com/hold in 1 resource instances".into()
                ),
            ]
        );
        assert!(cms.get_opt("plain").await.expect("get").is_none());
        assert!(secrets.get_opt("s").await.expect("get").is_none());
        let held = cms.get("held").await.expect("held by its finalizer");
        assert!(held.metadata.deletion_timestamp.is_some());

        // New content is refused while the namespace terminates.
        let err = cms
            .create(&PostParams::default(), &cm("late", &[]))
            .await
            .map_err(api_error)
            .expect_err("403");
        assert_eq!(err.code, 403);
        assert_eq!(err.reason, "Forbidden");
        assert!(
            err.message
                .contains("unable to create new content in namespace doomed because it is being terminated"),
            "{}",
            err.message
        );

        // Updates of existing content still work: removing the finalizer lets everything go.
        cms.patch(
            "held",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": null}})),
        )
        .await
        .expect("remove the finalizer");
        wait_for(SETTLE, || async {
            namespaces
                .get_opt("doomed")
                .await
                .expect("get")
                .is_none()
                .then_some(())
        })
        .await
        .expect("the namespace is removed");
        assert!(cms.get_opt("held").await.expect("get").is_none());
    })
    .await;
}

#[tokio::test]
async fn an_empty_namespace_is_removed_promptly() {
    within(async {
        let env = TestEnv::start().await.expect("start");
        let client = env.client();
        create_namespace(&client, "empty").await;
        let namespaces: Api<Namespace> = Api::all(client.clone());
        namespaces
            .delete("empty", &DeleteParams::default())
            .await
            .expect("delete");
        wait_for(Duration::from_secs(1), || async {
            namespaces
                .get_opt("empty")
                .await
                .expect("get")
                .is_none()
                .then_some(())
        })
        .await
        .expect("removed within a second");
    })
    .await;
}

#[tokio::test]
async fn a_foreground_namespace_deletion_waits_for_its_owned_objects_elsewhere() {
    within(async {
        let env = TestEnv::start().await.expect("start");
        let client = env.client();
        create_namespace(&client, "owner-ns").await;
        let namespaces: Api<Namespace> = Api::all(client.clone());
        let owner = namespaces.get("owner-ns").await.expect("get");
        // A ConfigMap in `default`, owned by the namespace (a cluster-scoped owner).
        let dep: ConfigMap = serde_json::from_value(json!({"metadata": {
            "name": "owned-by-ns",
            "finalizers": ["example.com/hold"],
            "ownerReferences": [{"apiVersion": "v1", "kind": "Namespace", "name": "owner-ns",
                                 "uid": owner.uid(), "blockOwnerDeletion": true}],
        }}))
        .expect("cm");
        let cms: Api<ConfigMap> = Api::default_namespaced(client.clone());
        cms.create(&PostParams::default(), &dep)
            .await
            .expect("create dependent");
        namespaces
            .delete("owner-ns", &DeleteParams::foreground())
            .await
            .expect("delete");
        let dep = wait_for(SETTLE, || async {
            let d = cms.get("owned-by-ns").await.expect("get");
            d.metadata.deletion_timestamp.is_some().then_some(d)
        })
        .await
        .expect("the dependent is being deleted");
        assert!(dep.finalizers().contains(&"example.com/hold".to_string()));
        tokio::time::sleep(Duration::from_millis(300)).await;
        let ns = namespaces.get("owner-ns").await.expect("still there");
        assert!(ns.finalizers().contains(&"foregroundDeletion".to_string()));
        cms.patch(
            "owned-by-ns",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": null}})),
        )
        .await
        .expect("remove finalizer");
        wait_for(SETTLE, || async {
            namespaces
                .get_opt("owner-ns")
                .await
                .expect("get")
                .is_none()
                .then_some(())
        })
        .await
        .expect("the namespace is removed");
    })
    .await;
}

/// The kubectl on `PATH`, or `None` after printing why the test is skipped.
fn kubectl_or_skip() -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|dir| dir.join("kubectl"))
            .find(|candidate| candidate.is_file())
    });
    if found.is_none() {
        println!("skipping: kubectl not found");
    }
    found
}

#[tokio::test]
async fn kubectl_delete_ns_removes_everything_in_it() {
    let Some(kubectl) = kubectl_or_skip() else {
        return;
    };
    within(async {
        let env = TestEnv::builder().tcp().start().await.expect("start");
        let client = env.client();
        create_namespace(&client, "team").await;
        let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "team");
        let deployments: Api<Deployment> = Api::namespaced(client.clone(), "team");
        for i in 0..5 {
            cms.create(&PostParams::default(), &cm(&format!("cm-{i}"), &[]))
                .await
                .expect("create cm");
        }
        let d: Deployment = serde_json::from_value(json!({
            "metadata": {"name": "web"},
            "spec": {
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "c", "image": "nginx"}]},
                },
            },
        }))
        .expect("deployment");
        deployments
            .create(&PostParams::default(), &d)
            .await
            .expect("create deployment");
        let cache = tempfile::tempdir().expect("cache dir");
        let out = tokio::time::timeout(
            Duration::from_secs(60),
            tokio::process::Command::new(&kubectl)
                .arg("--kubeconfig")
                .arg(env.kubeconfig_path().expect("kubeconfig"))
                .arg("--cache-dir")
                .arg(cache.path())
                .args(["delete", "ns", "team", "--timeout=30s"])
                .env_remove("KUBECONFIG")
                .stdin(Stdio::null())
                .kill_on_drop(true)
                .output(),
        )
        .await
        .expect("kubectl finished in time")
        .expect("kubectl ran");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "kubectl failed: {stdout} {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(stdout.trim(), "namespace \"team\" deleted");
        // kubectl waited for the namespace to go; it and its content are gone.
        let namespaces: Api<Namespace> = Api::all(client.clone());
        assert!(namespaces.get_opt("team").await.expect("get").is_none());
        let lp = ListParams::default();
        assert!(cms.list(&lp).await.expect("list").items.is_empty());
        assert!(deployments.list(&lp).await.expect("list").items.is_empty());
        let raw: Value = client
            .request(
                http::Request::get("/api/v1/namespaces/team/configmaps")
                    .body(Vec::new())
                    .expect("request"),
            )
            .await
            .expect("list after deletion");
        assert_eq!(raw["items"], json!([]));
    })
    .await;
}
