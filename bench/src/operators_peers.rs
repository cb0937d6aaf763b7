//! The peers of kore's configmap-sync in the operators suite: the same operator written on
//! kube-runtime, and the tutorial's naive reconcile. Both serve the same `ConfigMapSync`
//! type (`kore_configmap_sync::types`) and write copies and statuses the way kore's operator
//! does, so the benchmark compares runtimes and reconcile styles, not features.
//!
//! What they support: `destinationNamespace` and `destinationNamespaces`, `destinationName`,
//! `conflictPolicy`, copies of `data` and `binaryData`, a missing source (`SourceNotFound`),
//! and (kube-runtime only) drift repair, ownership, finalizer cleanup and the removal of
//! copies from namespaces that leave the spec. What they do not: `namespaceSelector` (the
//! benchmark does not use it) and syncs whose source is itself a copy.
//!
//! [`kube_runtime`] is written as a kube-runtime user would: a `Controller` over
//! ConfigMapSyncs, a reflector over ConfigMaps that is both the reconcile's cache and, through
//! `watches_stream`, its trigger (a source maps to its ConfigMapSyncs by a scan of the
//! controller's own store, since kube-runtime's `Store` has no index; a copy maps to its owner
//! by its labels), kube-runtime's `finalizer` helper, and a status patch only when the status
//! changed. It writes one finalizer patch, one create per copy and one status patch per
//! ConfigMapSync.
//!
//! [`naive`] is the classic tutorial's loop on the same kube-runtime `Controller`, with no
//! cache and no comparison: every pass GETs the source and the destination from the server,
//! creates or updates (PUT) the copy, and patches the status with the time of the pass, then
//! asks to be requeued in five minutes. It watches ConfigMapSyncs only.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta, Time};
use kore_configmap_sync::{ConfigMapSync, ConfigMapSyncStatus, ConflictPolicy};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::{self, Action, Controller};
use kube::runtime::finalizer::{self, finalizer};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt as _, watcher};
use kube::{Resource as _, ResourceExt as _};
use tokio_util::sync::CancellationToken;

/// The label naming the ConfigMapSync that made a copy.
pub(crate) const OWNER_NAME: &str = "sync.kore.dev/owner-name";
/// The label naming that ConfigMapSync's namespace.
pub(crate) const OWNER_NAMESPACE: &str = "sync.kore.dev/owner-namespace";
/// The peers' finalizer.
const FINALIZER: &str = "sync.kore.dev/peer-cleanup";

/// Why a peer's reconcile failed.
#[derive(Debug)]
pub(crate) enum PeerError {
    /// An API request failed.
    Kube(kube::Error),
    /// The ConfigMap reflector stopped before it was ready.
    CacheGone,
}

impl std::fmt::Display for PeerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PeerError::Kube(e) => write!(f, "api request failed: {e}"),
            PeerError::CacheGone => write!(f, "the configmap cache stopped"),
        }
    }
}

impl std::error::Error for PeerError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            PeerError::Kube(e) => Some(e),
            PeerError::CacheGone => None,
        }
    }
}

impl From<kube::Error> for PeerError {
    fn from(e: kube::Error) -> Self {
        PeerError::Kube(e)
    }
}

/// The namespaces a ConfigMapSync copies into (never its source's).
fn destinations(cms: &ConfigMapSync) -> Vec<String> {
    let spec = &cms.spec;
    let mut out: Vec<String> = spec
        .destination_namespace
        .iter()
        .chain(&spec.destination_namespaces)
        .filter(|ns| **ns != spec.source_namespace)
        .cloned()
        .collect();
    out.sort();
    out.dedup();
    out
}

fn copy_name(cms: &ConfigMapSync) -> String {
    cms.spec
        .destination_name
        .clone()
        .unwrap_or_else(|| cms.spec.config_map_name.clone())
}

/// The copy of `source` that `cms` wants in `namespace`.
fn copy_of(source: &ConfigMap, cms: &ConfigMapSync, namespace: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(copy_name(cms)),
            namespace: Some(namespace.to_owned()),
            labels: Some(BTreeMap::from([
                (OWNER_NAME.to_owned(), cms.name_any()),
                (
                    OWNER_NAMESPACE.to_owned(),
                    cms.namespace().unwrap_or_default(),
                ),
            ])),
            ..ObjectMeta::default()
        },
        data: source.data.clone(),
        binary_data: source.binary_data.clone(),
        ..ConfigMap::default()
    }
}

fn owned_by(cm: &ConfigMap, cms: &ConfigMapSync) -> bool {
    let labels = cm.labels();
    labels.get(OWNER_NAME) == Some(&cms.name_any())
        && labels.get(OWNER_NAMESPACE).map(String::as_str) == cms.namespace().as_deref()
}

fn ready(cms: &ConfigMapSync, ok: bool, reason: &str, message: String, now: Time) -> Condition {
    // The transition time moves only when the condition's status does.
    let previous = cms
        .status
        .as_ref()
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Ready"));
    let status = if ok { "True" } else { "False" };
    Condition {
        type_: "Ready".to_owned(),
        status: status.to_owned(),
        reason: reason.to_owned(),
        message,
        observed_generation: cms.meta().generation,
        last_transition_time: match previous {
            Some(c) if c.status == status => c.last_transition_time.clone(),
            _ => now,
        },
    }
}

/// Whether two statuses say the same, apart from their times.
fn same_status(a: &ConfigMapSyncStatus, b: &ConfigMapSyncStatus) -> bool {
    let strip = |s: &ConfigMapSyncStatus| {
        let mut s = s.clone();
        s.last_sync_time = None;
        for c in &mut s.conditions {
            c.last_transition_time = Time(jiff::Timestamp::UNIX_EPOCH);
        }
        s
    };
    strip(a) == strip(b)
}

fn now() -> Time {
    Time(jiff::Timestamp::now())
}

struct Context {
    client: kube::Client,
    configmaps: Store<ConfigMap>,
}

/// configmap-sync on kube-runtime, until `shutdown`.
pub(crate) async fn kube_runtime(
    client: kube::Client,
    concurrency: usize,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let (configmaps, writer) = reflector::store::<ConfigMap>();
    let configmap_events = watcher(Api::<ConfigMap>::all(client.clone()), Default::default())
        .default_backoff()
        .reflect(writer)
        .applied_objects();
    let controller = Controller::new(
        Api::<ConfigMapSync>::all(client.clone()),
        watcher::Config::default(),
    );
    let syncs = controller.store();
    let context = Arc::new(Context {
        client,
        configmaps: configmaps.clone(),
    });
    controller
        .with_config(controller::Config::default().concurrency(u16::try_from(concurrency)?))
        .watches_stream(configmap_events, move |cm: ConfigMap| syncs_of(&syncs, &cm))
        .graceful_shutdown_on(async move { shutdown.cancelled().await })
        .run(
            reconcile,
            |_, _, _| Action::requeue(Duration::from_secs(1)),
            context,
        )
        .for_each(report)
        .await;
    Ok(())
}

/// Prints the first few failed reconciles on stderr (the parent's log), so a peer that
/// cannot converge says why.
fn report<T, E: std::fmt::Display>(result: Result<T, E>) -> futures::future::Ready<()> {
    static FAILURES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    if let Err(e) = result
        && FAILURES.fetch_add(1, std::sync::atomic::Ordering::Relaxed) < 5
    {
        eprintln!("kore-bench: operator child: reconcile failed: {e}");
    }
    futures::future::ready(())
}

/// The ConfigMapSyncs a ConfigMap event concerns: the owner of a copy, or every sync whose
/// source it is.
fn syncs_of(syncs: &Store<ConfigMapSync>, cm: &ConfigMap) -> Vec<ObjectRef<ConfigMapSync>> {
    let labels = cm.labels();
    if let (Some(name), Some(ns)) = (labels.get(OWNER_NAME), labels.get(OWNER_NAMESPACE)) {
        return vec![ObjectRef::new(name).within(ns)];
    }
    let (Some(ns), name) = (cm.namespace(), cm.name_any()) else {
        return Vec::new();
    };
    syncs
        .state()
        .iter()
        .filter(|s| s.spec.source_namespace == ns && s.spec.config_map_name == name)
        .map(|s| ObjectRef::from_obj(&**s))
        .collect()
}

async fn reconcile(
    cms: Arc<ConfigMapSync>,
    ctx: Arc<Context>,
) -> Result<Action, finalizer::Error<PeerError>> {
    ctx.configmaps
        .wait_until_ready()
        .await
        .map_err(|_| finalizer::Error::ApplyFailed(PeerError::CacheGone))?;
    let ns = cms.namespace().unwrap_or_default();
    let api: Api<ConfigMapSync> = Api::namespaced(ctx.client.clone(), &ns);
    finalizer(&api, FINALIZER, cms, |event| async {
        match event {
            finalizer::Event::Apply(cms) => apply(&cms, &ctx, &api).await,
            finalizer::Event::Cleanup(cms) => cleanup(&cms, &ctx).await,
        }
    })
    .await
}

/// The copy `cms` has in `namespace`, from the cache.
fn existing_copy(ctx: &Context, cms: &ConfigMapSync, namespace: &str) -> Option<Arc<ConfigMap>> {
    ctx.configmaps
        .get(&ObjectRef::new(&copy_name(cms)).within(namespace))
}

async fn apply(
    cms: &ConfigMapSync,
    ctx: &Context,
    api: &Api<ConfigMapSync>,
) -> Result<Action, PeerError> {
    let spec = &cms.spec;
    let source = ctx
        .configmaps
        .get(&ObjectRef::new(&spec.config_map_name).within(&spec.source_namespace));
    let current = cms.status.clone().unwrap_or_default();
    let Some(source) = source else {
        let status = ConfigMapSyncStatus {
            conditions: vec![ready(
                cms,
                false,
                "SourceNotFound",
                format!(
                    "ConfigMap {}/{} does not exist",
                    spec.source_namespace, spec.config_map_name
                ),
                now(),
            )],
            ..current.clone()
        };
        write_status(api, cms, &current, status, false).await?;
        return Ok(Action::await_change());
    };
    let wanted = destinations(cms);
    let mut synced = Vec::new();
    let mut conflicts = Vec::new();
    let mut changed = false;
    for ns in &wanted {
        let copies: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), ns);
        let desired = copy_of(&source, cms, ns);
        match existing_copy(ctx, cms, ns) {
            None => match copies.create(&PostParams::default(), &desired).await {
                Ok(_) => {
                    changed = true;
                    synced.push(ns.clone());
                }
                // The cache lags a create of ours: the copy's event triggers another pass.
                Err(kube::Error::Api(e)) if e.code == 409 => {
                    return Ok(Action::requeue(Duration::from_millis(200)));
                }
                Err(e) => return Err(e.into()),
            },
            Some(cm)
                if !owned_by(&cm, cms) && spec.conflict_policy != Some(ConflictPolicy::Adopt) =>
            {
                conflicts.push(ns.clone());
            }
            Some(cm) => {
                if !owned_by(&cm, cms)
                    || cm.data != source.data
                    || cm.binary_data != source.binary_data
                {
                    let mut update = desired;
                    update.metadata.resource_version = cm.resource_version();
                    copies
                        .replace(&copy_name(cms), &PostParams::default(), &update)
                        .await?;
                    changed = true;
                }
                synced.push(ns.clone());
            }
        }
    }
    // Copies in namespaces that left the spec go.
    for ns in current
        .synced_namespaces
        .iter()
        .filter(|ns| !wanted.contains(ns))
    {
        delete_copy(ctx, cms, ns).await?;
        changed = true;
    }
    let condition = if conflicts.is_empty() {
        ready(
            cms,
            true,
            "Synced",
            "every copy is up to date".into(),
            now(),
        )
    } else {
        ready(
            cms,
            false,
            "Conflict",
            format!(
                "ConfigMaps not created by this sync exist in {}",
                conflicts.join(", ")
            ),
            now(),
        )
    };
    let status = ConfigMapSyncStatus {
        conditions: vec![condition],
        synced_namespaces: synced,
        last_sync_time: current.last_sync_time.clone(),
        source_resource_version: source.resource_version(),
    };
    write_status(api, cms, &current, status, changed).await?;
    Ok(Action::await_change())
}

/// Patches the status when it says something new; `changed` (copies were written) moves
/// `lastSyncTime`.
async fn write_status(
    api: &Api<ConfigMapSync>,
    cms: &ConfigMapSync,
    current: &ConfigMapSyncStatus,
    mut status: ConfigMapSyncStatus,
    changed: bool,
) -> Result<(), PeerError> {
    if changed || status.last_sync_time.is_none() && !status.synced_namespaces.is_empty() {
        status.last_sync_time = Some(now());
    }
    if cms.status.is_some() && same_status(current, &status) && !changed {
        return Ok(());
    }
    api.patch_status(
        &cms.name_any(),
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({ "status": status })),
    )
    .await?;
    Ok(())
}

async fn delete_copy(ctx: &Context, cms: &ConfigMapSync, ns: &str) -> Result<(), PeerError> {
    let owned = existing_copy(ctx, cms, ns).is_some_and(|cm| owned_by(&cm, cms));
    if owned {
        let copies: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), ns);
        match copies
            .delete(&copy_name(cms), &DeleteParams::default())
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

async fn cleanup(cms: &ConfigMapSync, ctx: &Context) -> Result<Action, PeerError> {
    let mut namespaces = destinations(cms);
    if let Some(status) = &cms.status {
        namespaces.extend(status.synced_namespaces.iter().cloned());
    }
    namespaces.sort();
    namespaces.dedup();
    for ns in &namespaces {
        delete_copy(ctx, cms, ns).await?;
    }
    Ok(Action::await_change())
}

/// The tutorial's configmap-sync, until `shutdown`.
pub(crate) async fn naive(
    client: kube::Client,
    concurrency: usize,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    Controller::new(
        Api::<ConfigMapSync>::all(client.clone()),
        watcher::Config::default(),
    )
    .with_config(controller::Config::default().concurrency(u16::try_from(concurrency)?))
    .graceful_shutdown_on(async move { shutdown.cancelled().await })
    .run(
        naive_reconcile,
        |_, _, _| Action::requeue(Duration::from_secs(1)),
        Arc::new(client),
    )
    .for_each(report)
    .await;
    Ok(())
}

async fn naive_reconcile(
    cms: Arc<ConfigMapSync>,
    client: Arc<kube::Client>,
) -> Result<Action, PeerError> {
    let ns = cms.namespace().unwrap_or_default();
    let spec = &cms.spec;
    let syncs: Api<ConfigMapSync> = Api::namespaced((*client).clone(), &ns);
    let sources: Api<ConfigMap> = Api::namespaced((*client).clone(), &spec.source_namespace);
    let status = match sources.get_opt(&spec.config_map_name).await? {
        None => ConfigMapSyncStatus {
            conditions: vec![ready(
                &cms,
                false,
                "SourceNotFound",
                "the source ConfigMap does not exist".into(),
                now(),
            )],
            ..ConfigMapSyncStatus::default()
        },
        Some(source) => {
            let mut synced = Vec::new();
            for dest in destinations(&cms) {
                let copies: Api<ConfigMap> = Api::namespaced((*client).clone(), &dest);
                let mut copy = copy_of(&source, &cms, &dest);
                match copies.get_opt(&copy_name(&cms)).await? {
                    None => {
                        copies.create(&PostParams::default(), &copy).await?;
                    }
                    Some(existing) => {
                        copy.metadata.resource_version = existing.resource_version();
                        copies
                            .replace(&copy_name(&cms), &PostParams::default(), &copy)
                            .await?;
                    }
                }
                synced.push(dest);
            }
            ConfigMapSyncStatus {
                conditions: vec![ready(&cms, true, "Synced", "synced".into(), now())],
                synced_namespaces: synced,
                last_sync_time: Some(now()),
                source_resource_version: source.resource_version(),
            }
        }
    };
    syncs
        .patch_status(
            &cms.name_any(),
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({ "status": status })),
        )
        .await?;
    Ok(Action::requeue(Duration::from_secs(300)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use kore_configmap_sync::ConfigMapSyncSpec;

    fn sync(dest: Option<&str>, more: &[&str]) -> ConfigMapSync {
        let mut cms = ConfigMapSync::new(
            "s",
            ConfigMapSyncSpec {
                source_namespace: "src".into(),
                config_map_name: "cfg".into(),
                destination_namespace: dest.map(Into::into),
                destination_namespaces: more.iter().map(|s| (*s).to_owned()).collect(),
                namespace_selector: None,
                destination_name: None,
                conflict_policy: None,
            },
        );
        cms.metadata.namespace = Some("src".into());
        cms
    }

    #[test]
    fn destinations_merge_both_fields_and_never_include_the_source() {
        let cms = sync(Some("b"), &["a", "b", "src"]);
        assert_eq!(destinations(&cms), ["a", "b"]);
    }

    #[test]
    fn statuses_that_differ_only_in_their_times_are_the_same() {
        let cms = sync(Some("b"), &[]);
        let a = ConfigMapSyncStatus {
            conditions: vec![ready(&cms, true, "Synced", "m".into(), now())],
            last_sync_time: Some(now()),
            ..ConfigMapSyncStatus::default()
        };
        let mut b = a.clone();
        b.last_sync_time = None;
        b.conditions[0].last_transition_time = Time(jiff::Timestamp::UNIX_EPOCH);
        assert!(same_status(&a, &b));
        b.conditions[0].reason = "Conflict".into();
        assert!(!same_status(&a, &b));
    }

    /// A server with the CRD, a source `src/cfg` and a ConfigMapSync `src/s` → `dst`.
    async fn scenario() -> anyhow::Result<kore_testenv::TestEnv> {
        use k8s_openapi::api::core::v1::Namespace;
        let env = kore_testenv::TestEnv::start().await?;
        let client = env.client();
        kore_operator::install::crds(&client, &kore_configmap_sync::operator()).await?;
        for ns in ["src", "dst"] {
            let mut namespace = Namespace::default();
            namespace.metadata.name = Some(ns.into());
            Api::<Namespace>::all(client.clone())
                .create(&PostParams::default(), &namespace)
                .await?;
        }
        let mut source = ConfigMap::default();
        source.metadata.name = Some("cfg".into());
        source.data = Some(BTreeMap::from([("k".to_owned(), "v1".to_owned())]));
        Api::<ConfigMap>::namespaced(client.clone(), "src")
            .create(&PostParams::default(), &source)
            .await?;
        Api::<ConfigMapSync>::namespaced(client, "src")
            .create(&PostParams::default(), &sync(Some("dst"), &[]))
            .await?;
        Ok(env)
    }

    /// Waits until the copy in `dst` holds `value` and the sync is Ready.
    async fn converged(client: &kube::Client, value: &str) -> anyhow::Result<()> {
        let copies: Api<ConfigMap> = Api::namespaced(client.clone(), "dst");
        let syncs: Api<ConfigMapSync> = Api::namespaced(client.clone(), "src");
        kore_testenv::wait_for(Duration::from_secs(20), || async {
            let copy = copies.get("cfg").await.ok()?;
            let cms = syncs.get("s").await.ok()?;
            let ready = cms
                .status?
                .conditions
                .iter()
                .any(|c| c.type_ == "Ready" && c.status == "True");
            (ready && copy.data?.get("k").map(String::as_str) == Some(value)).then_some(())
        })
        .await
    }

    #[tokio::test]
    async fn the_kube_runtime_peer_copies_follows_the_source_repairs_drift_and_cleans_up()
    -> anyhow::Result<()> {
        let env = scenario().await?;
        let client = env.client();
        let stop = CancellationToken::new();
        let peer = tokio::spawn(kube_runtime(client.clone(), 4, stop.clone()));
        converged(&client, "v1").await?;

        let sources: Api<ConfigMap> = Api::namespaced(client.clone(), "src");
        let change = |v: &str| Patch::Merge(serde_json::json!({"data": {"k": v}}));
        sources
            .patch("cfg", &PatchParams::default(), &change("v2"))
            .await?;
        converged(&client, "v2").await?;
        let copies: Api<ConfigMap> = Api::namespaced(client.clone(), "dst");
        copies
            .patch("cfg", &PatchParams::default(), &change("edited"))
            .await?;
        converged(&client, "v2").await?;

        Api::<ConfigMapSync>::namespaced(client.clone(), "src")
            .delete("s", &DeleteParams::default())
            .await?;
        kore_testenv::wait_for(Duration::from_secs(20), || async {
            copies.get_opt("cfg").await.ok()?.is_none().then_some(())
        })
        .await?;
        stop.cancel();
        peer.await??;
        Ok(())
    }

    #[tokio::test]
    async fn the_naive_peer_copies_and_reports_ready() -> anyhow::Result<()> {
        let env = scenario().await?;
        let client = env.client();
        let stop = CancellationToken::new();
        let peer = tokio::spawn(naive(client.clone(), 4, stop.clone()));
        converged(&client, "v1").await?;
        stop.cancel();
        peer.await??;
        Ok(())
    }

    #[test]
    fn a_copy_is_labelled_with_its_sync_and_owned_by_it_only() {
        let cms = sync(Some("b"), &[]);
        let source = ConfigMap {
            data: Some(BTreeMap::from([("k".to_owned(), "v".to_owned())])),
            ..ConfigMap::default()
        };
        let copy = copy_of(&source, &cms, "b");
        assert!(owned_by(&copy, &cms));
        assert_eq!(copy.data, source.data);
        let mut other = cms.clone();
        other.metadata.name = Some("t".into());
        assert!(!owned_by(&copy, &other));
    }
}
