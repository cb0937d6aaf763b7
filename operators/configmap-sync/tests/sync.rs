//! configmap-sync against kore-apiserver, running as its own ServiceAccount under the RBAC
//! generated from `operator()`, inside a Manager with leader election: every behaviour the
//! operator promises, each test ending with a check that the ServiceAccount was never denied
//! and used every permission it holds.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::api::events::v1::Event as KubeEvent;
use k8s_openapi::api::rbac::v1::ClusterRole;
use kore_configmap_sync::reconcile::{
    REASON_CONFLICT, REASON_DESTINATION_NOT_FOUND, REASON_INVALID_SPEC, REASON_SOURCE_NOT_FOUND,
    REASON_SYNCED,
};
use kore_configmap_sync::{
    ANNOTATION_OWNER, ANNOTATION_SOURCE, ANNOTATION_SOURCE_VERSION, ConfigMapSync,
    ConfigMapSyncSpec, ConflictPolicy, FINALIZER, LABEL_OWNER_NAME, LABEL_OWNER_NAMESPACE, NAME,
    Options,
};
use kore_runtime::Manager;
use kore_runtime::manager::{LeaseConfig, ShutdownHandle};
use kore_runtime::metrics::Metrics;
use kore_testenv::{TestEnv, wait_for};
use kube::api::{
    Api, DeleteParams, ObjectMeta, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use serde_json::json;
use tokio::task::JoinHandle;

const WAIT: Duration = Duration::from_secs(20);
/// The operator's own namespace (its ServiceAccount and Lease).
const OPERATOR_NS: &str = "kore-system";

// ---------------------------------------------------------------------------------------
// Harness

/// Installs the operator (CRDs, generated RBAC) and returns a client acting as its
/// ServiceAccount.
async fn install(env: &TestEnv) -> anyhow::Result<kube::Client> {
    kore_testenv::operator::install(env, &kore_configmap_sync::operator(), OPERATOR_NS).await
}

/// The operator running in a Manager with leader election.
struct Running {
    stop: ShutdownHandle,
    task: JoinHandle<Result<(), kore_runtime::manager::Error>>,
    registry: prometheus_client::registry::Registry,
}

impl Running {
    fn start(client: kube::Client, options: &Options) -> Running {
        let mut manager = Manager::builder(client)
            .leader_election(LeaseConfig::new(OPERATOR_NS, NAME).identity("test"))
            .handle_signals(false)
            .build();
        let metrics = Metrics::new();
        metrics.register(manager.registry_mut());
        let mut registry = prometheus_client::registry::Registry::default();
        metrics.register(&mut registry);
        kore_configmap_sync::register(&mut manager, &metrics, options);
        Running {
            stop: manager.shutdown_handle(),
            task: tokio::spawn(manager.run()),
            registry,
        }
    }

    /// How many reconciles have finished, whatever their result.
    fn reconciles(&self) -> anyhow::Result<f64> {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.registry)?;
        Ok(text
            .lines()
            .filter(|l| {
                l.starts_with("controller_runtime_reconcile_total{")
                    && l.contains(&format!("controller=\"{NAME}\""))
            })
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum())
    }

    async fn stop(self) -> anyhow::Result<()> {
        self.stop.shutdown();
        tokio::time::timeout(WAIT, self.task).await???;
        Ok(())
    }
}

/// A server with the operator installed and running.
struct Fixture {
    env: TestEnv,
    admin: kube::Client,
    operator: kube::Client,
    running: Option<Running>,
}

impl Fixture {
    async fn start() -> anyhow::Result<Fixture> {
        Self::start_with(Options::default()).await
    }

    async fn start_with(options: Options) -> anyhow::Result<Fixture> {
        let env = TestEnv::start().await?;
        let admin = env.client();
        let operator = install(&env).await?;
        let running = Running::start(operator.clone(), &options);
        Ok(Fixture {
            env,
            admin,
            operator,
            running: Some(running),
        })
    }

    fn running(&self) -> anyhow::Result<&Running> {
        self.running
            .as_ref()
            .ok_or_else(|| anyhow::anyhow!("the operator is not running"))
    }

    async fn restart(&mut self) -> anyhow::Result<()> {
        self.stop().await?;
        self.running = Some(Running::start(self.operator.clone(), &Options::default()));
        Ok(())
    }

    async fn stop(&mut self) -> anyhow::Result<()> {
        if let Some(r) = self.running.take() {
            r.stop().await?;
        }
        Ok(())
    }

    /// Stops the operator and checks that it was never refused a request.
    async fn finish(mut self) -> anyhow::Result<()> {
        if let Some(r) = self.running.take() {
            r.stop().await?;
        }
        kore_testenv::operator::assert_no_denials(
            &self.env,
            &kore_configmap_sync::operator(),
            OPERATOR_NS,
        )
    }

    /// Stops the operator and checks that it was never refused a request and used every
    /// permission its RBAC grants.
    async fn finish_least_privilege(mut self) -> anyhow::Result<()> {
        if let Some(r) = self.running.take() {
            r.stop().await?;
        }
        kore_testenv::operator::assert_least_privilege(
            &self.env,
            &kore_configmap_sync::operator(),
            OPERATOR_NS,
        )
    }

    fn syncs(&self, ns: &str) -> Api<ConfigMapSync> {
        Api::namespaced(self.admin.clone(), ns)
    }

    fn configmaps(&self, ns: &str) -> Api<ConfigMap> {
        Api::namespaced(self.admin.clone(), ns)
    }

    async fn namespace(&self, name: &str, labels: &[(&str, &str)]) -> anyhow::Result<()> {
        create_namespace(&self.admin, name, labels).await
    }

    async fn source(
        &self,
        ns: &str,
        name: &str,
        data: &[(&str, &str)],
    ) -> anyhow::Result<ConfigMap> {
        Ok(self
            .configmaps(ns)
            .create(&PostParams::default(), &config_map(ns, name, data))
            .await?)
    }

    async fn create_sync(
        &self,
        ns: &str,
        name: &str,
        spec: ConfigMapSyncSpec,
    ) -> anyhow::Result<()> {
        self.syncs(ns)
            .create(&PostParams::default(), &ConfigMapSync::new(name, spec))
            .await?;
        Ok(())
    }

    async fn patch_spec(
        &self,
        ns: &str,
        name: &str,
        spec: serde_json::Value,
    ) -> anyhow::Result<()> {
        self.syncs(ns)
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({ "spec": spec })),
            )
            .await?;
        Ok(())
    }

    /// The scenario most tests start from: namespaces `src`, `a` and `b`, the source
    /// `src/app` holding `v=1`, and the ConfigMapSync `src/sync` copying it into `a` and `b`,
    /// with both copies in place.
    async fn sync_app_to_a_and_b(&self) -> anyhow::Result<()> {
        for ns in ["src", "a", "b"] {
            self.namespace(ns, &[]).await?;
        }
        self.source("src", "app", &[("v", "1")]).await?;
        let mut s = spec("src", "app");
        s.destination_namespaces = vec!["a".into(), "b".into()];
        self.create_sync("src", "sync", s).await?;
        self.wait_copy("a", "app", &[("v", "1")]).await?;
        self.wait_copy("b", "app", &[("v", "1")]).await?;
        Ok(())
    }

    /// Waits until the copy `ns/name` holds `data`, and returns it.
    async fn wait_copy(
        &self,
        ns: &str,
        name: &str,
        data: &[(&str, &str)],
    ) -> anyhow::Result<ConfigMap> {
        let api = self.configmaps(ns);
        let want = to_map(data);
        wait_for(WAIT, || async {
            let cm = api.get_opt(name).await.ok()??;
            (cm.data.clone().unwrap_or_default() == want).then_some(cm)
        })
        .await
    }

    async fn wait_gone(&self, ns: &str, name: &str) -> anyhow::Result<()> {
        let api = self.configmaps(ns);
        wait_for(WAIT, || async {
            api.get_opt(name).await.ok()?.is_none().then_some(())
        })
        .await
    }

    /// Waits until the ConfigMapSync `ns/name` is gone (its finalizer has run).
    async fn wait_sync_gone(&self, ns: &str, name: &str) -> anyhow::Result<()> {
        let api = self.syncs(ns);
        wait_for(WAIT, || async {
            api.get_opt(name).await.ok()?.is_none().then_some(())
        })
        .await
    }

    /// Waits until the Ready condition of `ns/name` has `reason`, and returns the object.
    async fn wait_ready(
        &self,
        ns: &str,
        name: &str,
        reason: &str,
    ) -> anyhow::Result<ConfigMapSync> {
        let api = self.syncs(ns);
        wait_for(WAIT, || async {
            let sync = api.get(name).await.ok()?;
            let ready = ready(&sync).ok()?;
            (ready.reason == reason).then_some(sync)
        })
        .await
        .map_err(|e| anyhow::anyhow!("{ns}/{name} never became {reason}: {e}"))
    }

    /// The Events about ConfigMapSync `ns/name` with `reason`.
    async fn events(&self, ns: &str, name: &str, reason: &str) -> anyhow::Result<Vec<KubeEvent>> {
        let api: Api<KubeEvent> = Api::namespaced(self.admin.clone(), ns);
        Ok(api
            .list(&Default::default())
            .await?
            .items
            .into_iter()
            .filter(|e| {
                e.reason.as_deref() == Some(reason)
                    && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name)
            })
            .collect())
    }

    async fn wait_event(&self, ns: &str, name: &str, reason: &str) -> anyhow::Result<KubeEvent> {
        wait_for(WAIT, || async {
            let events = self.events(ns, name, reason).await.ok()?;
            events.into_iter().next()
        })
        .await
        .map_err(|e| anyhow::anyhow!("no {reason} event for {ns}/{name}: {e}"))
    }
}

async fn create_namespace(
    client: &kube::Client,
    name: &str,
    labels: &[(&str, &str)],
) -> anyhow::Result<()> {
    let ns = Namespace {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            labels: (!labels.is_empty()).then(|| to_map(labels)),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    };
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await?;
    Ok(())
}

fn to_map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn config_map(ns: &str, name: &str, data: &[(&str, &str)]) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(ns.to_owned()),
            ..ObjectMeta::default()
        },
        data: Some(to_map(data)),
        ..ConfigMap::default()
    }
}

fn ready(
    sync: &ConfigMapSync,
) -> anyhow::Result<k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition> {
    sync.status
        .iter()
        .flat_map(|s| s.conditions.iter())
        .find(|c| c.type_ == "Ready")
        .cloned()
        .ok_or_else(|| anyhow::anyhow!("no Ready condition"))
}

/// A spec copying `source_ns/name` to no destination yet (the test adds them).
fn spec(source_ns: &str, name: &str) -> ConfigMapSyncSpec {
    ConfigMapSyncSpec {
        source_namespace: source_ns.to_owned(),
        config_map_name: name.to_owned(),
        destination_namespace: None,
        destination_namespaces: Vec::new(),
        namespace_selector: None,
        destination_name: None,
        conflict_policy: None,
    }
}

// ---------------------------------------------------------------------------------------
// Behaviour

#[tokio::test]
async fn the_tutorial_spec_copies_data_and_binary_data_and_reports_ready() -> anyhow::Result<()> {
    let f = Fixture::start().await?;
    f.namespace("src", &[]).await?;
    f.namespace("dst", &[]).await?;
    let mut source = config_map("src", "app", &[("greeting", "hello")]);
    source.binary_data = Some(BTreeMap::from([(
        "blob".to_owned(),
        ByteString(vec![0, 159, 146, 150]),
    )]));
    let source = f
        .configmaps("src")
        .create(&PostParams::default(), &source)
        .await?;
    // Exactly the tutorial's three fields, as JSON a user would write.
    let tutorial: ConfigMapSync = serde_json::from_value(json!({
        "apiVersion": "sync.kore.dev/v1alpha1",
        "kind": "ConfigMapSync",
        "metadata": { "name": "app-sync", "namespace": "src" },
        "spec": { "sourceNamespace": "src", "destinationNamespace": "dst", "configMapName": "app" },
    }))?;
    f.syncs("src")
        .create(&PostParams::default(), &tutorial)
        .await?;

    let copy = f.wait_copy("dst", "app", &[("greeting", "hello")]).await?;
    assert_eq!(copy.binary_data, source.binary_data);
    let labels = copy.metadata.labels.clone().unwrap_or_default();
    assert_eq!(
        labels.get(LABEL_OWNER_NAMESPACE).map(String::as_str),
        Some("src")
    );
    assert_eq!(
        labels.get(LABEL_OWNER_NAME).map(String::as_str),
        Some("app-sync")
    );
    let annotations = copy.metadata.annotations.clone().unwrap_or_default();
    assert_eq!(
        annotations.get(ANNOTATION_OWNER).map(String::as_str),
        Some("src/app-sync")
    );
    assert_eq!(
        annotations.get(ANNOTATION_SOURCE).map(String::as_str),
        Some("src/app")
    );
    assert_eq!(
        annotations.get(ANNOTATION_SOURCE_VERSION),
        source.metadata.resource_version.as_ref()
    );

    let sync = f.wait_ready("src", "app-sync", REASON_SYNCED).await?;
    let status = sync.status.clone().unwrap_or_default();
    let cond = ready(&sync)?;
    assert_eq!(cond.status, "True");
    assert_eq!(cond.observed_generation, sync.metadata.generation);
    assert_eq!(status.synced_namespaces, ["dst"]);
    assert_eq!(
        status.source_resource_version,
        source.metadata.resource_version
    );
    assert!(status.last_sync_time.is_some());
    assert!(
        sync.metadata
            .finalizers
            .iter()
            .flatten()
            .any(|x| x == FINALIZER)
    );
    f.finish().await
}

#[tokio::test]
async fn copies_follow_the_source_and_edited_or_deleted_copies_are_restored() -> anyhow::Result<()>
{
    let f = Fixture::start().await?;
    f.sync_app_to_a_and_b().await?;

    // The source changes: both copies follow, and the status names the new version.
    let changed = f
        .configmaps("src")
        .patch(
            "app",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"v": "2", "w": "x"}})),
        )
        .await?;
    f.wait_copy("a", "app", &[("v", "2"), ("w", "x")]).await?;
    f.wait_copy("b", "app", &[("v", "2"), ("w", "x")]).await?;
    let rv = changed.metadata.resource_version.clone();
    wait_for(WAIT, || async {
        let s = f.syncs("src").get("sync").await.ok()?.status?;
        (s.source_resource_version == rv).then_some(())
    })
    .await?;

    // Someone edits a copy: it is put back.
    f.configmaps("a")
        .patch(
            "app",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"v": "hacked"}})),
        )
        .await?;
    f.wait_copy("a", "app", &[("v", "2"), ("w", "x")]).await?;

    // Someone deletes a copy: it comes back.
    let old_uid = f.configmaps("b").get("app").await?.metadata.uid;
    f.configmaps("b")
        .delete("app", &DeleteParams::default())
        .await?;
    let back = f.wait_copy("b", "app", &[("v", "2"), ("w", "x")]).await?;
    assert_ne!(back.metadata.uid, old_uid);
    f.finish().await
}

#[tokio::test]
async fn a_configmap_it_did_not_create_is_refused_then_adopted_and_never_deleted()
-> anyhow::Result<()> {
    let f = Fixture::start().await?;
    for ns in ["src", "taken", "free"] {
        f.namespace(ns, &[]).await?;
    }
    f.source("src", "app", &[("v", "source")]).await?;
    let theirs = f.source("taken", "app", &[("v", "theirs")]).await?;
    let mut s = spec("src", "app");
    s.destination_namespaces = vec!["taken".into(), "free".into()];
    f.create_sync("src", "sync", s).await?;

    // Refused: Ready=False Conflict, a Warning event, their ConfigMap untouched; the free
    // destination is synced all the same.
    let sync = f.wait_ready("src", "sync", REASON_CONFLICT).await?;
    let cond = ready(&sync)?;
    assert_eq!(cond.status, "False");
    assert!(cond.message.contains("taken/app"), "{}", cond.message);
    assert_eq!(sync.status.unwrap_or_default().synced_namespaces, ["free"]);
    let event = f.wait_event("src", "sync", REASON_CONFLICT).await?;
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    f.wait_copy("free", "app", &[("v", "source")]).await?;
    let still = f.configmaps("taken").get("app").await?;
    assert_eq!(
        still.metadata.resource_version,
        theirs.metadata.resource_version
    );

    // Leaving the spec, their ConfigMap is not deleted either (it was never ours).
    f.patch_spec("src", "sync", json!({"destinationNamespaces": ["free"]}))
        .await?;
    f.wait_ready("src", "sync", REASON_SYNCED).await?;
    let still = f.configmaps("taken").get("app").await?;
    assert_eq!(
        still.metadata.resource_version,
        theirs.metadata.resource_version
    );

    // Back in the spec with conflictPolicy Adopt: taken over, marked, in step.
    f.patch_spec(
        "src",
        "sync",
        json!({"destinationNamespaces": ["free", "taken"], "conflictPolicy": "Adopt"}),
    )
    .await?;
    let adopted = f.wait_copy("taken", "app", &[("v", "source")]).await?;
    assert_eq!(adopted.metadata.uid, theirs.metadata.uid);
    assert_eq!(
        adopted
            .metadata
            .annotations
            .unwrap_or_default()
            .get(ANNOTATION_OWNER)
            .map(String::as_str),
        Some("src/sync")
    );
    let sync = f.wait_ready("src", "sync", REASON_SYNCED).await?;
    assert_eq!(
        sync.status.unwrap_or_default().synced_namespaces,
        ["free", "taken"]
    );
    f.finish().await
}

#[tokio::test]
async fn a_copy_of_another_configmapsync_is_never_adopted() -> anyhow::Result<()> {
    let f = Fixture::start().await?;
    for ns in ["src", "dst"] {
        f.namespace(ns, &[]).await?;
    }
    f.source("src", "one", &[("v", "1")]).await?;
    f.source("src", "two", &[("v", "2")]).await?;
    f.create_sync(
        "src",
        "first",
        ConfigMapSyncSpec {
            destination_name: Some("shared".into()),
            ..ConfigMapSyncSpec::new("src", "one", "dst")
        },
    )
    .await?;
    f.wait_copy("dst", "shared", &[("v", "1")]).await?;
    f.create_sync(
        "src",
        "second",
        ConfigMapSyncSpec {
            destination_name: Some("shared".into()),
            conflict_policy: Some(ConflictPolicy::Adopt),
            ..ConfigMapSyncSpec::new("src", "two", "dst")
        },
    )
    .await?;
    f.wait_ready("src", "second", REASON_CONFLICT).await?;
    f.wait_event("src", "second", REASON_CONFLICT).await?;
    let copy = f.configmaps("dst").get("shared").await?;
    assert_eq!(copy.data.unwrap_or_default(), to_map(&[("v", "1")]));

    // The first lets go of it (deleted): the second may now make its own.
    f.syncs("src")
        .delete("first", &DeleteParams::default())
        .await?;
    f.wait_copy("dst", "shared", &[("v", "2")]).await?;
    f.wait_ready("src", "second", REASON_SYNCED).await?;
    f.finish().await
}

#[tokio::test]
async fn namespaces_gain_and_lose_copies_as_their_labels_match_the_selector() -> anyhow::Result<()>
{
    let f = Fixture::start().await?;
    f.namespace("src", &[("sync", "yes")]).await?;
    f.namespace("a", &[("sync", "yes")]).await?;
    f.namespace("b", &[]).await?;
    f.source("src", "app", &[("v", "1")]).await?;
    let mut s = spec("src", "app");
    s.namespace_selector = Some(
        k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector {
            match_labels: Some(to_map(&[("sync", "yes")])),
            ..Default::default()
        },
    );
    f.create_sync("src", "sync", s).await?;
    f.wait_copy("a", "app", &[("v", "1")]).await?;
    let sync = f.wait_ready("src", "sync", REASON_SYNCED).await?;
    assert_eq!(sync.status.unwrap_or_default().synced_namespaces, ["a"]);
    // The source namespace matches too, but is never a destination: the source stays the
    // only ConfigMap there.
    let src = f.configmaps("src").get("app").await?;
    assert!(kore_configmap_sync::owner_of(&src).is_none());

    // b is labelled: it gets a copy. A new matching namespace gets one too.
    let namespaces: Api<Namespace> = Api::all(f.admin.clone());
    let label = |v: Option<&str>| Patch::Merge(json!({"metadata": {"labels": {"sync": v}}}));
    namespaces
        .patch("b", &PatchParams::default(), &label(Some("yes")))
        .await?;
    f.wait_copy("b", "app", &[("v", "1")]).await?;
    f.namespace("c", &[("sync", "yes")]).await?;
    f.wait_copy("c", "app", &[("v", "1")]).await?;

    // a stops matching: its copy goes.
    namespaces
        .patch("a", &PatchParams::default(), &label(None))
        .await?;
    f.wait_gone("a", "app").await?;
    wait_for(WAIT, || async {
        let s = f.syncs("src").get("sync").await.ok()?.status?;
        (s.synced_namespaces == ["b", "c"]).then_some(())
    })
    .await?;
    f.finish().await
}

#[tokio::test]
async fn a_missing_source_keeps_the_copies_and_syncing_resumes_when_it_returns()
-> anyhow::Result<()> {
    let f = Fixture::start().await?;
    for ns in ["src", "dst"] {
        f.namespace(ns, &[]).await?;
    }
    f.source("src", "app", &[("v", "1")]).await?;
    f.create_sync("src", "sync", ConfigMapSyncSpec::new("src", "app", "dst"))
        .await?;
    f.wait_copy("dst", "app", &[("v", "1")]).await?;
    f.wait_ready("src", "sync", REASON_SYNCED).await?;

    for round in 2..4 {
        f.configmaps("src")
            .delete("app", &DeleteParams::default())
            .await?;
        let sync = f.wait_ready("src", "sync", REASON_SOURCE_NOT_FOUND).await?;
        assert_eq!(ready(&sync)?.status, "False");
        // The copy stays, and still counts as synced: it holds the version last copied.
        assert_eq!(sync.status.unwrap_or_default().synced_namespaces, ["dst"]);
        let copy = f.configmaps("dst").get("app").await?;
        assert_eq!(
            copy.data.unwrap_or_default(),
            to_map(&[("v", &(round - 1).to_string())])
        );
        let event = f.wait_event("src", "sync", REASON_SOURCE_NOT_FOUND).await?;
        assert_eq!(event.type_.as_deref(), Some("Warning"));

        let v = round.to_string();
        f.source("src", "app", &[("v", &v)]).await?;
        f.wait_copy("dst", "app", &[("v", &v)]).await?;
        f.wait_ready("src", "sync", REASON_SYNCED).await?;
    }
    // The second time the same problem was reported, it was counted on the first Event.
    let events = f.events("src", "sync", REASON_SOURCE_NOT_FOUND).await?;
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].series.as_ref().map(|s| s.count), Some(2));
    f.finish().await
}

#[tokio::test]
async fn deleting_the_configmapsync_removes_its_copies_before_it_goes() -> anyhow::Result<()> {
    let f = Fixture::start().await?;
    f.sync_app_to_a_and_b().await?;
    f.wait_ready("src", "sync", REASON_SYNCED).await?;

    f.syncs("src")
        .delete("sync", &DeleteParams::default())
        .await?;
    f.wait_gone("a", "app").await?;
    f.wait_gone("b", "app").await?;
    f.wait_sync_gone("src", "sync").await?;
    // The source is never touched.
    f.configmaps("src").get("app").await?;
    f.finish().await
}

#[tokio::test]
async fn a_destination_that_leaves_the_spec_loses_its_copy() -> anyhow::Result<()> {
    let f = Fixture::start().await?;
    f.sync_app_to_a_and_b().await?;

    f.patch_spec("src", "sync", json!({"destinationNamespaces": ["a"]}))
        .await?;
    f.wait_gone("b", "app").await?;
    wait_for(WAIT, || async {
        let s = f.syncs("src").get("sync").await.ok()?.status?;
        (s.synced_namespaces == ["a"]).then_some(())
    })
    .await?;
    f.configmaps("a").get("app").await?;

    // Renaming the copies moves them: the old name goes, the new one comes.
    f.patch_spec("src", "sync", json!({"destinationName": "renamed"}))
        .await?;
    f.wait_copy("a", "renamed", &[("v", "1")]).await?;
    f.wait_gone("a", "app").await?;
    f.finish().await
}

#[tokio::test]
async fn a_missing_destination_namespace_is_reported_and_synced_once_it_exists()
-> anyhow::Result<()> {
    let f = Fixture::start().await?;
    f.namespace("src", &[]).await?;
    f.source("src", "app", &[("v", "1")]).await?;
    f.create_sync("src", "sync", ConfigMapSyncSpec::new("src", "app", "later"))
        .await?;
    let sync = f
        .wait_ready("src", "sync", REASON_DESTINATION_NOT_FOUND)
        .await?;
    let cond = ready(&sync)?;
    assert_eq!(cond.status, "False");
    assert!(cond.message.contains("later"), "{}", cond.message);
    let event = f
        .wait_event("src", "sync", REASON_DESTINATION_NOT_FOUND)
        .await?;
    assert_eq!(event.type_.as_deref(), Some("Warning"));

    f.namespace("later", &[]).await?;
    f.wait_copy("later", "app", &[("v", "1")]).await?;
    f.wait_ready("src", "sync", REASON_SYNCED).await?;
    f.finish().await
}

/// (event type, object name) of each watch event seen.
type Seen = Arc<Mutex<Vec<(String, String)>>>;

#[tokio::test]
async fn copies_of_a_configmapsync_deleted_while_the_operator_was_down_are_removed()
-> anyhow::Result<()> {
    let mut f = Fixture::start().await?;
    for ns in ["src", "dst"] {
        f.namespace(ns, &[]).await?;
    }
    f.source("src", "app", &[("v", "1")]).await?;
    f.create_sync("src", "sync", ConfigMapSyncSpec::new("src", "app", "dst"))
        .await?;
    f.wait_copy("dst", "app", &[("v", "1")]).await?;
    f.wait_ready("src", "sync", REASON_SYNCED).await?;

    // While the operator is down, the ConfigMapSync goes without its finalizer running.
    f.stop().await?;
    f.syncs("src")
        .patch(
            "sync",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": null}})),
        )
        .await?;
    f.syncs("src")
        .delete("sync", &DeleteParams::default())
        .await?;
    assert!(f.syncs("src").get_opt("sync").await?.is_none());
    assert!(f.configmaps("dst").get_opt("app").await?.is_some());

    // Back up, it finds the copy marked with an owner that no longer exists, and removes it.
    f.restart().await?;
    f.wait_gone("dst", "app").await?;
    f.configmaps("src").get("app").await?;
    f.finish().await
}

/// No copy exists before the finalizer that would remove it: with the finalizer's patch
/// refused (the ClusterRole loses `patch` on configmapsyncs), the operator copies nothing and
/// backs off; once the permission is back, the finalizer goes on and the copy is made.
#[tokio::test]
async fn nothing_is_copied_until_the_finalizer_is_in_place() -> anyhow::Result<()> {
    let mut f = Fixture::start().await?;
    for ns in ["src", "dst"] {
        f.namespace(ns, &[]).await?;
    }
    f.source("src", "app", &[("v", "1")]).await?;
    let operator = kore_configmap_sync::operator();
    let roles: Api<ClusterRole> = Api::all(f.admin.clone());
    let name = kore_operator::manifests::cluster_role_name(&operator);
    let granted = roles.get(&name).await?;
    let mut refused = granted.clone();
    for rule in refused.rules.iter_mut().flatten() {
        if rule.resources.as_deref() == Some(&["configmapsyncs".to_owned()][..]) {
            rule.verbs.retain(|v| v != "patch");
        }
    }
    roles
        .replace(&name, &PostParams::default(), &refused)
        .await?;

    f.create_sync("src", "sync", ConfigMapSyncSpec::new("src", "app", "dst"))
        .await?;
    // Two failed reconciles (the first try and a retry after its backoff).
    let running = f.running()?;
    wait_for(WAIT, || async {
        (running.reconciles().ok()? >= 2.0).then_some(())
    })
    .await?;
    assert!(f.configmaps("dst").get_opt("app").await?.is_none());
    let sync = f.syncs("src").get("sync").await?;
    assert_eq!(sync.metadata.finalizers, None);
    assert_eq!(sync.status, None);
    let report = kore_testenv::operator::privileges(&f.env, &operator, OPERATOR_NS)?;
    let denied: Vec<String> = report.denied.iter().map(ToString::to_string).collect();
    assert_eq!(denied, ["patch sync.kore.dev/configmapsyncs"]);

    let mut restored = roles.get(&name).await?;
    restored.rules = granted.rules;
    roles
        .replace(&name, &PostParams::default(), &restored)
        .await?;
    f.wait_copy("dst", "app", &[("v", "1")]).await?;
    let sync = f.wait_ready("src", "sync", REASON_SYNCED).await?;
    assert_eq!(sync.metadata.finalizers, Some(vec![FINALIZER.to_owned()]));
    f.stop().await?;
    Ok(())
}

#[tokio::test]
async fn the_samples_applied_in_order_converge() -> anyhow::Result<()> {
    use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
    let f = Fixture::start().await?;
    let samples = kore_configmap_sync::operator().samples;
    for sample in &samples {
        let obj: DynamicObject = serde_json::from_value(sample.clone())?;
        let types = obj
            .types
            .clone()
            .ok_or_else(|| anyhow::anyhow!("a sample without apiVersion/kind"))?;
        let gvk = GroupVersionKind::try_from(&types)?;
        let ar = ApiResource::from_gvk(&gvk);
        let api: Api<DynamicObject> = match obj.metadata.namespace.as_deref() {
            Some(ns) => Api::namespaced_with(f.admin.clone(), ns, &ar),
            None => Api::all_with(f.admin.clone(), &ar),
        };
        api.create(&PostParams::default(), &obj).await?;
    }
    let sync = samples
        .iter()
        .find(|s| s["kind"] == "ConfigMapSync")
        .ok_or_else(|| anyhow::anyhow!("no ConfigMapSync sample"))?;
    let (ns, name) = (
        sync["metadata"]["namespace"].as_str().unwrap_or_default(),
        sync["metadata"]["name"].as_str().unwrap_or_default(),
    );
    let converged = f.wait_ready(ns, name, REASON_SYNCED).await?;
    let dest = converged
        .spec
        .destination_namespace
        .clone()
        .unwrap_or_default();
    let source = f
        .configmaps(ns)
        .get(&converged.spec.config_map_name)
        .await?;
    let pairs: Vec<(String, String)> = source
        .data
        .clone()
        .unwrap_or_default()
        .into_iter()
        .collect();
    let pairs: Vec<(&str, &str)> = pairs
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    f.wait_copy(&dest, converged.spec.target_name(), &pairs)
        .await?;
    f.finish().await
}

/// The walkthrough a new user follows, with kubectl over HTTPS, the operator also talking
/// to the server through its socket.
#[tokio::test]
async fn the_kubectl_walkthrough_works_over_a_real_socket() -> anyhow::Result<()> {
    let Some(program) = kore_testenv::kubectl::kubectl_or_skip() else {
        return Ok(());
    };
    let env = TestEnv::builder().tcp().start().await?;
    install(&env).await?;
    let operator = env.service_account_socket_client(OPERATOR_NS, NAME).await?;
    let running = Running::start(operator, &Options::default());
    let kubectl = kore_testenv::kubectl::Kubectl::for_env(program, &env);
    kubectl.ok(&["create", "namespace", "team-a"]).await;
    kubectl.ok(&["create", "namespace", "team-b"]).await;
    kubectl
        .ok(&[
            "create",
            "configmap",
            "app-config",
            "-n",
            "team-a",
            "--from-literal=greeting=hello",
        ])
        .await;
    let manifest = kubectl.file(
        "sync.yaml",
        "apiVersion: sync.kore.dev/v1alpha1\n\
         kind: ConfigMapSync\n\
         metadata:\n  name: app-config\n  namespace: team-a\n\
         spec:\n  sourceNamespace: team-a\n  destinationNamespace: team-b\n  configMapName: app-config\n",
    );
    kubectl.ok(&["apply", "-f", &manifest]).await;
    let copy = || async {
        kubectl
            .run(&[
                "get",
                "configmap",
                "app-config",
                "-n",
                "team-b",
                "-o",
                "jsonpath={.data.greeting}",
            ])
            .await
            .stdout
    };
    wait_for(WAIT, || async { (copy().await == "hello").then_some(()) }).await?;
    wait_for(WAIT, || async {
        let table = kubectl.run(&["get", "cms", "-n", "team-a"]).await.stdout;
        (table.contains("READY") && table.contains("True")).then_some(())
    })
    .await?;

    kubectl
        .ok(&[
            "patch",
            "configmap",
            "app-config",
            "-n",
            "team-a",
            "--type",
            "merge",
            "-p",
            r#"{"data":{"greeting":"hi"}}"#,
        ])
        .await;
    wait_for(WAIT, || async { (copy().await == "hi").then_some(()) }).await?;

    // kubectl waits for the finalizer: when it returns, the copy is gone.
    kubectl
        .ok(&["delete", "configmapsync", "app-config", "-n", "team-a"])
        .await;
    let gone = kubectl
        .run(&["get", "configmap", "app-config", "-n", "team-b"])
        .await;
    assert!(!gone.status.success(), "{gone:?}");
    running.stop().await?;
    kore_testenv::operator::assert_no_denials(&env, &kore_configmap_sync::operator(), OPERATOR_NS)
}

/// Every watch event of one kind in one namespace, from a resourceVersion on.
fn record<K>(api: Api<K>, from: String) -> (Seen, JoinHandle<()>)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    let seen = Arc::new(Mutex::new(Vec::new()));
    let out = seen.clone();
    let task = tokio::spawn(async move {
        use futures::StreamExt as _;
        let Ok(stream) = api.watch(&WatchParams::default().timeout(290), &from).await else {
            return;
        };
        let mut stream = std::pin::pin!(stream);
        while let Some(Ok(event)) = stream.next().await {
            let (kind, obj) = match event {
                WatchEvent::Added(o) => ("ADDED", o),
                WatchEvent::Modified(o) => ("MODIFIED", o),
                WatchEvent::Deleted(o) => ("DELETED", o),
                _ => continue,
            };
            let name = obj.meta().name.clone().unwrap_or_default();
            out.lock()
                .expect("not poisoned")
                .push((kind.to_owned(), name));
        }
    });
    (seen, task)
}

#[tokio::test]
async fn converging_costs_the_minimum_of_writes_and_a_reconcile_in_step_writes_nothing()
-> anyhow::Result<()> {
    let mut f = Fixture::start().await?;
    for ns in ["src", "dst"] {
        f.namespace(ns, &[]).await?;
    }
    f.source("src", "app", &[("v", "1")]).await?;
    let rv = f
        .syncs("src")
        .list(&Default::default())
        .await?
        .metadata
        .resource_version
        .unwrap_or_default();
    let (sync_events, t1) = record(f.syncs("src"), rv.clone());
    let (copy_events, t2) = record(f.configmaps("dst"), rv);
    f.create_sync("src", "sync", ConfigMapSyncSpec::new("src", "app", "dst"))
        .await?;
    f.wait_copy("dst", "app", &[("v", "1")]).await?;
    f.wait_ready("src", "sync", REASON_SYNCED).await?;
    // Let anything still in flight land.
    tokio::time::sleep(Duration::from_millis(500)).await;

    // One finalizer patch and one status patch of the ConfigMapSync (beside the user's
    // create), one create of the copy.
    let writes =
        |events: &Arc<Mutex<Vec<(String, String)>>>| events.lock().expect("not poisoned").clone();
    let sync_writes = writes(&sync_events);
    assert_eq!(
        sync_writes,
        [
            ("ADDED".into(), "sync".into()),
            ("MODIFIED".into(), "sync".into()),
            ("MODIFIED".into(), "sync".into())
        ],
    );
    assert_eq!(
        writes(&copy_events),
        [("ADDED".to_owned(), "app".to_owned())]
    );

    // In step: a restart reconciles everything again, a destination namespace changes in a
    // way that does not matter; nothing is written, no event recorded.
    let events_before = Api::<KubeEvent>::all(f.admin.clone())
        .list(&Default::default())
        .await?
        .items
        .len();
    f.restart().await?;
    wait_for(WAIT, || async {
        (f.running().ok()?.reconciles().ok()? >= 1.0).then_some(())
    })
    .await?;
    Api::<Namespace>::all(f.admin.clone())
        .patch(
            "dst",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"unrelated": "x"}}})),
        )
        .await?;
    wait_for(WAIT, || async {
        (f.running().ok()?.reconciles().ok()? >= 2.0).then_some(())
    })
    .await?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(writes(&sync_events), sync_writes);
    assert_eq!(
        writes(&copy_events),
        [("ADDED".to_owned(), "app".to_owned())]
    );
    let events_after = Api::<KubeEvent>::all(f.admin.clone())
        .list(&Default::default())
        .await?
        .items
        .len();
    assert_eq!(events_after, events_before);
    t1.abort();
    t2.abort();
    f.finish().await
}

#[tokio::test(start_paused = true)]
async fn a_spec_that_can_never_be_satisfied_is_reported_once_and_does_not_spin()
-> anyhow::Result<()> {
    let f = Fixture::start().await?;
    for ns in ["src", "dst"] {
        f.namespace(ns, &[]).await?;
    }
    f.source("src", "app", &[("v", "1")]).await?;
    let mut s = spec("src", "app");
    // The schema cannot know label selector operators; the operator can.
    s.namespace_selector = Some(serde_json::from_value(json!({
        "matchExpressions": [{"key": "team", "operator": "Equals", "values": ["a"]}]
    }))?);
    f.create_sync("src", "bad", s).await?;
    let sync = f.wait_ready("src", "bad", REASON_INVALID_SPEC).await?;
    let cond = ready(&sync)?;
    assert_eq!(cond.status, "False");
    assert!(cond.message.contains("Equals"), "{}", cond.message);
    f.wait_event("src", "bad", REASON_INVALID_SPEC).await?;

    let before = f.running()?.reconciles()?;
    tokio::time::sleep(Duration::from_secs(60)).await;
    let after = f.running()?.reconciles()?;
    assert!(before <= 2.0, "{before} reconciles before the minute");
    assert_eq!(after, before, "reconciled again while nothing changed");
    let events = f.events("src", "bad", REASON_INVALID_SPEC).await?;
    assert_eq!(events.len(), 1);
    assert!(events[0].series.is_none(), "{:?}", events[0].series);
    // Nothing was made, and no finalizer holds it.
    let sync = f.syncs("src").get("bad").await?;
    assert!(sync.metadata.finalizers.unwrap_or_default().is_empty());
    assert!(f.configmaps("dst").get_opt("app").await?.is_none());

    // Fixed, it syncs.
    f.patch_spec(
        "src",
        "bad",
        json!({"namespaceSelector": null, "destinationNamespace": "dst"}),
    )
    .await?;
    f.wait_copy("dst", "app", &[("v", "1")]).await?;
    f.wait_ready("src", "bad", REASON_SYNCED).await?;
    f.finish().await
}

#[tokio::test]
async fn with_a_namespace_option_only_that_namespace_is_watched() -> anyhow::Result<()> {
    let f = Fixture::start_with(Options::default().namespace("team-a")).await?;
    for ns in ["team-a", "team-b", "dst"] {
        f.namespace(ns, &[]).await?;
    }
    f.source("team-a", "app", &[("v", "a")]).await?;
    f.source("team-b", "other", &[("v", "b")]).await?;
    f.create_sync(
        "team-b",
        "sync",
        ConfigMapSyncSpec::new("team-b", "other", "dst"),
    )
    .await?;
    f.create_sync(
        "team-a",
        "sync",
        ConfigMapSyncSpec::new("team-a", "app", "dst"),
    )
    .await?;
    f.wait_copy("dst", "app", &[("v", "a")]).await?;
    f.wait_ready("team-a", "sync", REASON_SYNCED).await?;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let ignored = f.syncs("team-b").get("sync").await?;
    assert!(ignored.status.is_none());
    assert!(ignored.metadata.finalizers.unwrap_or_default().is_empty());
    assert!(f.configmaps("dst").get_opt("other").await?.is_none());
    f.finish().await
}

/// The whole life of a ConfigMapSync, which between them needs every permission in the
/// operator's RBAC: afterwards nothing granted is unused and nothing was refused.
#[tokio::test]
async fn one_lifecycle_uses_every_permission_the_rbac_grants_and_nothing_else() -> anyhow::Result<()>
{
    let f = Fixture::start().await?;
    f.sync_app_to_a_and_b().await?;
    f.wait_ready("src", "sync", REASON_SYNCED).await?;

    // Updates of copies.
    f.configmaps("src")
        .patch(
            "app",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"v": "2"}})),
        )
        .await?;
    f.wait_copy("a", "app", &[("v", "2")]).await?;

    // An event, and its repeat counted on it.
    for v in ["3", "4"] {
        f.configmaps("src")
            .delete("app", &DeleteParams::default())
            .await?;
        f.wait_ready("src", "sync", REASON_SOURCE_NOT_FOUND).await?;
        f.source("src", "app", &[("v", v)]).await?;
        f.wait_copy("a", "app", &[("v", v)]).await?;
        f.wait_ready("src", "sync", REASON_SYNCED).await?;
    }
    wait_for(WAIT, || async {
        let events = f
            .events("src", "sync", REASON_SOURCE_NOT_FOUND)
            .await
            .ok()?;
        (events.first()?.series.as_ref()?.count == 2).then_some(())
    })
    .await?;

    // A deletion of a copy, then of the ConfigMapSync.
    f.patch_spec("src", "sync", json!({"destinationNamespaces": ["a"]}))
        .await?;
    f.wait_gone("b", "app").await?;
    f.syncs("src")
        .delete("sync", &DeleteParams::default())
        .await?;
    f.wait_gone("a", "app").await?;
    f.wait_sync_gone("src", "sync").await?;
    f.finish_least_privilege().await
}

// ---------------------------------------------------------------------------------------
// The schema

/// Creates a ConfigMapSync from raw JSON as the administrator; returns the error's status.
async fn rejected(
    admin: &kube::Client,
    spec: serde_json::Value,
) -> anyhow::Result<kube::core::Status> {
    let request =
        http::Request::post("/apis/sync.kore.dev/v1alpha1/namespaces/default/configmapsyncs")
            .header("content-type", "application/json")
            .body(serde_json::to_vec(&json!({
                "apiVersion": "sync.kore.dev/v1alpha1",
                "kind": "ConfigMapSync",
                "metadata": { "name": "x" },
                "spec": spec,
            }))?)?;
    match admin.request::<serde_json::Value>(request).await {
        Ok(v) => anyhow::bail!("accepted: {v}"),
        Err(kube::Error::Api(status)) => Ok(*status),
        Err(e) => Err(e.into()),
    }
}

#[tokio::test]
async fn the_crd_rejects_specs_that_can_never_work() -> anyhow::Result<()> {
    let env = TestEnv::start().await?;
    install(&env).await?;
    let admin = env.client();
    for (spec, field) in [
        (
            json!({"sourceNamespace": "", "destinationNamespace": "b", "configMapName": "app"}),
            "spec.sourceNamespace",
        ),
        (
            json!({"sourceNamespace": "a", "destinationNamespace": "b", "configMapName": ""}),
            "spec.configMapName",
        ),
        (
            json!({"sourceNamespace": "Not_DNS", "destinationNamespace": "b", "configMapName": "app"}),
            "spec.sourceNamespace",
        ),
        (
            json!({"sourceNamespace": "a", "destinationNamespace": "b", "configMapName": "UPPER"}),
            "spec.configMapName",
        ),
        (
            json!({"sourceNamespace": "a", "destinationNamespace": "-b", "configMapName": "app"}),
            "spec.destinationNamespace",
        ),
        (
            json!({"sourceNamespace": "a", "destinationNamespaces": ["ok", "x".repeat(64)], "configMapName": "app"}),
            "spec.destinationNamespaces[1]",
        ),
        (
            json!({"sourceNamespace": "a", "destinationNamespace": "b", "configMapName": "app", "destinationName": "a/b"}),
            "spec.destinationName",
        ),
        (
            json!({"sourceNamespace": "a", "destinationNamespace": "b", "configMapName": "app", "conflictPolicy": "Overwrite"}),
            "spec.conflictPolicy",
        ),
        // The CEL rules: the source as its own destination, and no destination at all.
        (
            json!({"sourceNamespace": "a", "destinationNamespace": "a", "configMapName": "app"}),
            "spec.destinationNamespace",
        ),
        (
            json!({"sourceNamespace": "a", "destinationNamespaces": ["b", "a"], "configMapName": "app"}),
            "spec.destinationNamespaces",
        ),
        (
            json!({"sourceNamespace": "a", "configMapName": "app"}),
            "spec",
        ),
    ] {
        let status = rejected(&admin, spec.clone()).await?;
        assert_eq!(status.code, 422, "{spec}: {status:?}");
        let fields: Vec<String> = status
            .details
            .iter()
            .flat_map(|d| d.causes.iter())
            .map(|c| c.field.clone())
            .collect();
        assert!(
            fields.iter().any(|f| f == field),
            "{spec}: causes {fields:?}"
        );
    }
    // The same rules hold on update: a valid ConfigMapSync cannot be turned into one that
    // names its source as destination.
    let api: Api<ConfigMapSync> = Api::namespaced(admin.clone(), "default");
    api.create(
        &PostParams::default(),
        &ConfigMapSync::new("ok", ConfigMapSyncSpec::new("a", "app", "b")),
    )
    .await?;
    let err = api
        .patch(
            "ok",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"destinationNamespace": "a"}})),
        )
        .await
        .expect_err("the rule holds on update");
    match err {
        kube::Error::Api(status) => assert_eq!(status.code, 422, "{status:?}"),
        other => anyhow::bail!("expected 422, got {other}"),
    }
    Ok(())
}
