//! configmap-sync: keeps a ConfigMap copied from a source namespace into destination
//! namespaces, as the `ConfigMapSync` custom resource asks.
//!
//! - [`types`]: the custom resource, whose CRD is generated from it.
//! - [`reconcile`]: the reconciler, the cache indexes and the watch mappers.
//! - [`register`] adds the controller to a [`kore_runtime::Manager`]; [`operator`] describes
//!   the operator for manifests, RBAC and tests.
//!
//! The design (mapping, indexes, write minimality, conflicts, status) is written up in
//! `docs/design/configmap-sync.md`.

mod copy;
pub mod reconcile;
mod selector;
mod status_patch;
pub mod types;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kore_runtime::controller::predicate::Predicate;
use kore_runtime::{CachedClient, Controller, InformerConfig};
use kube::CustomResourceExt as _;
use serde_json::json;

pub use copy::{
    ANNOTATION_OWNER, ANNOTATION_SOURCE, ANNOTATION_SOURCE_VERSION, LABEL_MANAGED_BY,
    LABEL_OWNER_NAME, LABEL_OWNER_NAMESPACE, owner_of,
};
pub use reconcile::{Error, FINALIZER, SyncReconciler};
pub use types::{ConfigMapSync, ConfigMapSyncSpec, ConfigMapSyncStatus, ConflictPolicy};

/// The operator's name.
pub const NAME: &str = "configmap-sync";

/// The API group of [`ConfigMapSync`].
pub const GROUP: &str = "sync.kore.dev";

/// What deployment and tests need to know about the operator: exactly the verbs its code
/// uses. ConfigMapSyncs are listed and watched (the informer) and patched (the finalizer),
/// their status patched; ConfigMaps listed, watched, created, updated and deleted; Namespaces
/// listed and watched; Events created and patched (repeats are counted on the first Event).
pub fn operator() -> kore_operator::Operator {
    kore_operator::Operator {
        name: NAME,
        crds: vec![ConfigMapSync::crd()],
        rules: vec![
            kore_operator::rule(GROUP, &["configmapsyncs"], &["list", "watch", "patch"]),
            kore_operator::rule(GROUP, &["configmapsyncs/status"], &["patch"]),
            kore_operator::rule(
                "",
                &["configmaps"],
                &["list", "watch", "create", "update", "delete"],
            ),
            kore_operator::rule("", &["namespaces"], &["list", "watch"]),
            kore_operator::events_rule(),
        ],
        samples: samples(),
    }
}

/// The demo, in the order it is applied: two namespaces, the source ConfigMap, and a
/// ConfigMapSync in the tutorial's form that copies it.
fn samples() -> Vec<serde_json::Value> {
    let namespace = |name: &str| {
        json!({
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": { "name": name },
        })
    };
    vec![
        namespace("demo-source"),
        namespace("demo-target"),
        json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": { "name": "app-config", "namespace": "demo-source" },
            "data": { "greeting": "hello from demo-source", "log-level": "info" },
        }),
        json!({
            "apiVersion": format!("{GROUP}/v1alpha1"),
            "kind": "ConfigMapSync",
            "metadata": { "name": "app-config", "namespace": "demo-source" },
            "spec": {
                "sourceNamespace": "demo-source",
                "destinationNamespace": "demo-target",
                "configMapName": "app-config",
            },
        }),
    ]
}

/// How the operator runs (shared by every kore operator).
pub use kore_operator::Options;

/// Whether an update of a ConfigMapSync needs a reconcile: its spec changed, its deletion
/// began, or someone removed the finalizer. Status writes and the operator's own finalizer
/// add pass over it.
fn needs_reconcile(old: &ConfigMapSync, new: &ConfigMapSync) -> bool {
    let has = |s: &ConfigMapSync| {
        s.metadata
            .finalizers
            .iter()
            .flatten()
            .any(|f| f == FINALIZER)
    };
    old.metadata.generation != new.metadata.generation
        || old.metadata.deletion_timestamp != new.metadata.deletion_timestamp
        || (has(old) && !has(new))
}

/// Adds the operator's controllers to `manager`, reporting to `metrics` (which the caller
/// registers once in the manager's registry). They run when the manager runs, on the leader.
///
/// ConfigMapSyncs are watched in [`Options::namespace`] (all namespaces by default);
/// ConfigMaps and Namespaces everywhere, since sources and copies live in other namespaces.
///
/// ```no_run
/// # async fn run(client: kube::Client) -> Result<(), Box<dyn std::error::Error>> {
/// use kore_runtime::Manager;
/// use kore_runtime::manager::LeaseConfig;
/// use kore_runtime::metrics::Metrics;
///
/// let mut manager = Manager::builder(client)
///     .leader_election(LeaseConfig::new("kore-system", kore_configmap_sync::NAME))
///     .build();
/// let metrics = Metrics::new();
/// metrics.register(manager.registry_mut());
/// kore_configmap_sync::register(&mut manager, &metrics, &kore_configmap_sync::Options::default());
/// manager.run().await?;
/// # Ok(())
/// # }
/// ```
pub fn register(
    manager: &mut kore_runtime::Manager,
    metrics: &kore_runtime::metrics::Metrics,
    options: &Options,
) {
    let informers = manager.informers().clone();
    let client = manager.client();
    let mut config = InformerConfig::default();
    if let Some(ns) = &options.namespace {
        config = config.namespace(ns.clone());
    }
    let builder = Controller::for_with::<ConfigMapSync>(&informers, config).named(NAME);
    let syncs = builder.informer().clone();
    syncs.add_index(reconcile::INDEX_SOURCE, reconcile::source_index);
    syncs.add_index(reconcile::INDEX_TARGET, reconcile::target_index);
    syncs.add_index(reconcile::INDEX_NAMESPACE, reconcile::namespace_index);
    let configmaps = informers.get::<ConfigMap>(InformerConfig::default());
    configmaps.add_index(reconcile::INDEX_OWNER, reconcile::owner_index);
    let namespaces = informers.get::<Namespace>(InformerConfig::default());

    let store = syncs.store();
    let only = options.namespace.clone();
    let by_config_map =
        move |cm: &ConfigMap| reconcile::map_config_map(&store, only.as_deref(), cm);
    let store = syncs.store();
    let by_namespace = move |ns: &Namespace| reconcile::map_namespace(&store, ns);
    let reconciler = SyncReconciler::new(
        client.clone(),
        CachedClient::new(client.clone(), syncs),
        CachedClient::new(client, configmaps),
        namespaces.store(),
    );
    let controller = builder
        .with_predicate(Predicate::on_update(needs_reconcile))
        .watches::<ConfigMap>(by_config_map)
        .watches::<Namespace>(by_namespace)
        .max_concurrent_reconciles(options.max_concurrent_reconciles)
        .metrics(metrics.clone())
        .build(reconciler);
    manager.add(Box::new(controller));
}
