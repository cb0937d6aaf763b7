//! The reconciler: brings one ConfigMapSync's copies in line with its spec and its source, and
//! reports what it found in the status. Also the cache indexes and the mappers that turn
//! changes of ConfigMaps and Namespaces into the keys of the ConfigMapSyncs they concern.
//!
//! # Reads and writes
//! Every read comes from the informers' caches; writes go through [`CachedClient`]s, which put
//! the server's answer in the cache before returning, so the next reconcile of the same key
//! sees its own writes even before their watch events arrive. A reconcile that finds the
//! copies and the status as they should be writes nothing at all.
//!
//! When everything converges at once, a ConfigMapSync costs one finalizer patch, one create
//! per copy and one status patch, in that order; see `docs/design/configmap-sync.md`.
//!
//! # Outcomes
//! - A problem the world can fix (the source or a destination namespace missing, a ConfigMap
//!   in the way) is reported as `Ready=False` and a Warning event, and the reconcile succeeds:
//!   the ConfigMap and Namespace watches bring the key back when the world changes.
//! - A spec that can never work (`InvalidSpec`) is a terminal error: not retried until the
//!   ConfigMapSync changes.
//! - A failed write is retried with the key's backoff.

use std::collections::BTreeSet;
use std::sync::Arc;

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kore_runtime::conditions::{DesiredCondition, set_condition};
use kore_runtime::controller::{Action, ReconcileError, Reconciler, Request};
use kore_runtime::events::{Event, EventType, Recorder, Reporter};
use kore_runtime::{CachedClient, ObjectKey, Store};
use kube::Resource as _;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams, Preconditions};

use crate::copy::{self, owner_of};
use crate::selector::Selector;
use crate::status_patch::StatusPatch;
use crate::types::{ConfigMapSync, ConfigMapSyncStatus, ConflictPolicy};

/// The finalizer that holds a ConfigMapSync until its copies are removed.
pub const FINALIZER: &str = "sync.kore.dev/cleanup";
/// The condition type the operator maintains.
pub const CONDITION_READY: &str = "Ready";
/// `Ready=True`: every destination holds an up-to-date copy.
pub const REASON_SYNCED: &str = "Synced";
/// `Ready=False`: the source ConfigMap does not exist; existing copies are kept.
pub const REASON_SOURCE_NOT_FOUND: &str = "SourceNotFound";
/// `Ready=False`: a destination holds a ConfigMap this ConfigMapSync did not create.
pub const REASON_CONFLICT: &str = "Conflict";
/// `Ready=False`: a destination namespace named in the spec does not exist.
pub const REASON_DESTINATION_NOT_FOUND: &str = "DestinationNotFound";
/// `Ready=False`: the spec can never be satisfied.
pub const REASON_INVALID_SPEC: &str = "InvalidSpec";
/// `Ready=False`: the API server refused a write of a copy.
pub const REASON_SYNC_FAILED: &str = "SyncFailed";
/// The action of the operator's events.
pub const ACTION_SYNC: &str = "Sync";

/// ConfigMapSync index: `sourceNamespace/configMapName`.
pub const INDEX_SOURCE: &str = "source";
/// ConfigMapSync index: `namespace/name` of each named destination's copy, and `*/name` when
/// a selector picks destinations.
pub const INDEX_TARGET: &str = "target";
/// ConfigMapSync index: each named destination namespace, and `*` when a selector picks
/// destinations.
pub const INDEX_NAMESPACE: &str = "namespace";
/// ConfigMap index: `namespace/name` of the ConfigMapSync a copy belongs to.
pub const INDEX_OWNER: &str = "owner";

/// Why a reconcile failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The spec can never be satisfied; fix the ConfigMapSync (not retried until it changes).
    #[error("the spec can never be satisfied: {0}")]
    InvalidSpec(String),
    /// Creating or updating a copy failed; retried with backoff.
    #[error("writing the copy {key}")]
    WriteCopy {
        /// The copy.
        key: ObjectKey,
        /// What the server said.
        #[source]
        source: kore_runtime::client::Error,
    },
    /// Deleting a copy failed; retried with backoff.
    #[error("deleting the copy {key}")]
    DeleteCopy {
        /// The copy.
        key: ObjectKey,
        /// What the server said.
        #[source]
        source: kore_runtime::client::Error,
    },
    /// Writing the status failed; retried with backoff.
    #[error("writing the status")]
    WriteStatus(#[source] kore_runtime::client::Error),
    /// Adding or removing the finalizer failed; retried with backoff.
    #[error("updating the finalizer")]
    Finalizer(#[source] kore_runtime::client::Error),
}

/// Reconciles ConfigMapSyncs; built by [`crate::register`].
#[derive(Clone)]
pub struct SyncReconciler {
    syncs: CachedClient<ConfigMapSync>,
    configmaps: CachedClient<ConfigMap>,
    namespaces: Store<Namespace>,
    recorder: Recorder,
}

/// Where copies belong, as the spec and the namespaces say now.
#[derive(Debug, Default)]
struct Targets {
    /// The copies' name.
    name: String,
    /// The namespaces that should hold a copy.
    namespaces: BTreeSet<String>,
    /// Named destination namespaces that do not exist (or are being deleted).
    missing: Vec<String>,
}

/// What became of one destination.
enum Placed {
    /// It holds an up-to-date copy; `wrote` if this reconcile wrote it.
    Synced { namespace: String, wrote: bool },
    /// A ConfigMap this ConfigMapSync may not take is in the way.
    Conflict { namespace: String },
    /// The write failed.
    Failed(Error),
}

fn has_finalizer(sync: &ConfigMapSync) -> bool {
    sync.metadata
        .finalizers
        .iter()
        .flatten()
        .any(|f| f == FINALIZER)
}

fn is_terminating(ns: &Namespace) -> bool {
    ns.metadata.deletion_timestamp.is_some()
        || ns.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Terminating")
}

/// The HTTP status of a failed write, if the server answered.
fn status_code(e: &kore_runtime::client::Error) -> Option<u16> {
    match e {
        kore_runtime::client::Error::Api(kube::Error::Api(s)) => Some(s.code),
        _ => None,
    }
}

/// Whether a write failed only because the cache was behind (retry without reporting).
fn is_stale(e: &Error) -> bool {
    match e {
        Error::WriteCopy { source, .. } | Error::DeleteCopy { source, .. } => {
            status_code(source) == Some(409)
        }
        _ => false,
    }
}

/// The values a ConfigMapSync is indexed under in [`INDEX_SOURCE`].
pub fn source_index(sync: &ConfigMapSync) -> Vec<String> {
    vec![format!(
        "{}/{}",
        sync.spec.source_namespace, sync.spec.config_map_name
    )]
}

/// The values a ConfigMapSync is indexed under in [`INDEX_TARGET`].
pub fn target_index(sync: &ConfigMapSync) -> Vec<String> {
    let name = sync.spec.target_name();
    let mut out: Vec<String> = sync
        .spec
        .named_destinations()
        .into_iter()
        .map(|ns| format!("{ns}/{name}"))
        .collect();
    if sync.spec.namespace_selector.is_some() {
        out.push(format!("*/{name}"));
    }
    out
}

/// The values a ConfigMapSync is indexed under in [`INDEX_NAMESPACE`].
pub fn namespace_index(sync: &ConfigMapSync) -> Vec<String> {
    let mut out: Vec<String> = sync
        .spec
        .named_destinations()
        .into_iter()
        .map(str::to_owned)
        .collect();
    if sync.spec.namespace_selector.is_some() {
        out.push("*".to_owned());
    }
    out
}

/// The values a ConfigMap is indexed under in [`INDEX_OWNER`].
pub fn owner_index(cm: &ConfigMap) -> Vec<String> {
    owner_of(cm).map(|k| k.to_string()).into_iter().collect()
}

/// The ConfigMapSyncs a change of `cm` concerns: those whose source it is (through
/// [`INDEX_SOURCE`]), the one whose copy it is (its owner annotation; only in `only_namespace`
/// when set), and those that want a copy where it stands ([`INDEX_TARGET`]), so that removing
/// a ConfigMap that was in the way lets the copy be made.
pub fn map_config_map(
    syncs: &Store<ConfigMapSync>,
    only_namespace: Option<&str>,
    cm: &ConfigMap,
) -> Vec<ObjectKey> {
    let key = ObjectKey::of(cm);
    let whole = key.to_string();
    let mut keys = syncs.keys_by_index(INDEX_SOURCE, &whole);
    keys.extend(syncs.keys_by_index(INDEX_TARGET, &whole));
    keys.extend(syncs.keys_by_index(INDEX_TARGET, &format!("*/{}", key.name())));
    if let Some(owner) = owner_of(cm)
        && only_namespace.is_none_or(|only| owner.namespace() == Some(only))
    {
        keys.push(owner);
    }
    keys.sort();
    keys.dedup();
    keys
}

/// The ConfigMapSyncs a change of namespace `ns` concerns: those naming it as a destination,
/// and those whose selector matches its labels (both versions of an update are mapped, so a
/// namespace that stops matching is seen by the ConfigMapSyncs that matched it before).
pub fn map_namespace(syncs: &Store<ConfigMapSync>, ns: &Namespace) -> Vec<ObjectKey> {
    let name = ns.metadata.name.as_deref().unwrap_or_default();
    let mut keys = syncs.keys_by_index(INDEX_NAMESPACE, name);
    for sync in syncs.by_index(INDEX_NAMESPACE, "*") {
        if sync.spec.source_namespace == name {
            continue;
        }
        let matches = sync
            .spec
            .namespace_selector
            .as_ref()
            .and_then(|s| Selector::parse(s).ok())
            .is_some_and(|s| s.matches(ns.metadata.labels.as_ref()));
        if matches {
            keys.push(ObjectKey::of(&*sync));
        }
    }
    keys.sort();
    keys.dedup();
    keys
}

impl std::fmt::Debug for SyncReconciler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SyncReconciler").finish_non_exhaustive()
    }
}

impl SyncReconciler {
    /// A reconciler recording its Events with `client`, reading ConfigMapSyncs, ConfigMaps
    /// and Namespaces from these caches and writing through the first two.
    pub fn new(
        client: kube::Client,
        syncs: CachedClient<ConfigMapSync>,
        configmaps: CachedClient<ConfigMap>,
        namespaces: Store<Namespace>,
    ) -> Self {
        let recorder = Recorder::new(client, Reporter::new(format!("kore.dev/{}", crate::NAME)));
        SyncReconciler {
            syncs,
            configmaps,
            namespaces,
            recorder,
        }
    }

    /// Where the copies of `sync` belong, or why that can never be worked out.
    fn targets(&self, sync: &ConfigMapSync) -> Result<Targets, String> {
        let spec = &sync.spec;
        let named = spec.named_destinations();
        if named.contains(&spec.source_namespace.as_str()) {
            return Err(format!(
                "the source namespace {} cannot be a destination",
                spec.source_namespace
            ));
        }
        if named.is_empty() && spec.namespace_selector.is_none() {
            return Err("no destination: set destinationNamespace, destinationNamespaces or namespaceSelector".to_owned());
        }
        let selector = spec
            .namespace_selector
            .as_ref()
            .map(Selector::parse)
            .transpose()?;
        let mut targets = Targets {
            name: spec.target_name().to_owned(),
            ..Targets::default()
        };
        for ns in named {
            match self.namespaces.get(&ObjectKey::cluster(ns)) {
                Some(n) if !is_terminating(&n) => {
                    targets.namespaces.insert(ns.to_owned());
                }
                _ => targets.missing.push(ns.to_owned()),
            }
        }
        if let Some(selector) = selector {
            for n in self.namespaces.list() {
                let name = n.metadata.name.as_deref().unwrap_or_default();
                if name != spec.source_namespace
                    && !is_terminating(&n)
                    && selector.matches(n.metadata.labels.as_ref())
                {
                    targets.namespaces.insert(name.to_owned());
                }
            }
        }
        Ok(targets)
    }

    /// Deletes the copy `cm` unless it changed since it was read (uid and resourceVersion
    /// preconditions); a copy already gone is fine.
    async fn delete_copy(&self, cm: &ConfigMap) -> Result<(), Error> {
        let key = ObjectKey::of(cm);
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid: cm.metadata.uid.clone(),
                resource_version: cm.metadata.resource_version.clone(),
            }),
            ..DeleteParams::default()
        };
        match self.configmaps.delete(&key, &params).await {
            Ok(_) => Ok(()),
            Err(e) if status_code(&e) == Some(404) => Ok(()),
            Err(source) => Err(Error::DeleteCopy { key, source }),
        }
    }

    /// Deletes every copy of `owner` whose key `keep` rejects; returns whether it deleted any.
    ///
    /// Decides by key, so only the copies it deletes are read from the cache (decoded): a
    /// copy's namespace and name are all `keep` needs, and its uid and resourceVersion are
    /// what the delete's preconditions need.
    async fn delete_copies(
        &self,
        owner: &ObjectKey,
        keep: impl Fn(&ObjectKey) -> bool,
    ) -> Result<bool, Error> {
        let mut deleted = false;
        for key in self
            .configmaps
            .keys_by_index(INDEX_OWNER, &owner.to_string())
        {
            if keep(&key) {
                continue;
            }
            if let Some(cm) = self.configmaps.get(&key) {
                self.delete_copy(&cm).await?;
                deleted = true;
            }
        }
        Ok(deleted)
    }

    /// Makes the copy in `namespace` hold `source`, unless a ConfigMap not ours is in the way.
    async fn place(
        &self,
        owner: &ObjectKey,
        adopt: bool,
        source: &ConfigMap,
        namespace: String,
        name: &str,
    ) -> Placed {
        let key = ObjectKey::namespaced(namespace.as_str(), name);
        let existing = self.configmaps.get(&key);
        let write = match existing.as_deref() {
            None => {
                let copy = copy::desired(owner, source, None, &namespace, name);
                self.configmaps.create(&copy, &PostParams::default()).await
            }
            Some(cm) => {
                let ours = match owner_of(cm) {
                    Some(o) => &o == owner,
                    // Never take a ConfigMap from another ConfigMapSync: they would fight.
                    None => adopt,
                };
                if !ours {
                    return Placed::Conflict { namespace };
                }
                if copy::in_step(cm, owner, source) {
                    return Placed::Synced {
                        namespace,
                        wrote: false,
                    };
                }
                let copy = copy::desired(owner, source, Some(cm), &namespace, name);
                self.configmaps.replace(&copy, &PostParams::default()).await
            }
        };
        match write {
            Ok(_) => Placed::Synced {
                namespace,
                wrote: true,
            },
            Err(source) => Placed::Failed(Error::WriteCopy { key, source }),
        }
    }

    /// Writes `status` if it differs from what `sync` holds, and records a Warning event when
    /// the Ready condition turns to a new problem.
    async fn report(
        &self,
        sync: &ConfigMapSync,
        previous: &ConfigMapSyncStatus,
        status: ConfigMapSyncStatus,
    ) -> Result<(), Error> {
        if &status == previous {
            return Ok(());
        }
        let patch = StatusPatch {
            previous,
            new: &status,
        };
        self.syncs
            .patch_status(
                &ObjectKey::of(sync),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
            .map_err(Error::WriteStatus)?;
        let ready = |s: &ConfigMapSyncStatus| {
            s.conditions
                .iter()
                .find(|c| c.type_ == CONDITION_READY)
                .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
        };
        if let Some((state, reason, message)) = ready(&status)
            && state == "False"
            && ready(previous) != Some((state, reason.clone(), message.clone()))
        {
            let event = Event {
                type_: EventType::Warning,
                reason,
                action: ACTION_SYNC.to_owned(),
                note: Some(truncated(message, MAX_NOTE)),
                related: None,
            };
            if let Err(e) = self.recorder.publish(&event, &sync.object_ref(&())).await {
                tracing::warn!(error = %e, "recording an event failed");
            }
        }
        Ok(())
    }

    /// The status `previous` becomes with the Ready condition set as given.
    fn with_ready(
        sync: &ConfigMapSync,
        mut status: ConfigMapSyncStatus,
        ready: bool,
        reason: &str,
        message: String,
    ) -> ConfigMapSyncStatus {
        set_condition(
            &mut status.conditions,
            DesiredCondition::new(CONDITION_READY, ready)
                .reason(reason)
                .message(message)
                .observed_generation(sync.metadata.generation),
        );
        status
    }

    /// Syncs a live ConfigMapSync that carries the finalizer and has a valid spec.
    async fn sync(
        &self,
        sync: &ConfigMapSync,
        key: &ObjectKey,
        targets: Targets,
        previous: &ConfigMapSyncStatus,
    ) -> Result<(), Error> {
        let spec = &sync.spec;
        // Copies where none belongs any more: the destination left the spec, the namespace
        // stopped matching, or the copies' name changed.
        let mut wrote = self
            .delete_copies(key, |copy| {
                copy.name() == targets.name
                    && copy
                        .namespace()
                        .is_some_and(|ns| targets.namespaces.contains(ns))
            })
            .await?;
        let source_key = ObjectKey::namespaced(&spec.source_namespace, &spec.config_map_name);
        let source = self.configmaps.get(&source_key);
        let mut status = previous.clone();
        let mut problems: Vec<(&str, String)> = Vec::new();
        let mut failure = None;
        match &source {
            None => {
                // Keep the copies as they are: those holding the version last copied still
                // count as synced.
                let last = previous.source_resource_version.as_deref();
                let copies: BTreeSet<String> = self
                    .configmaps
                    .by_index(INDEX_OWNER, &key.to_string())
                    .iter()
                    .filter(|cm| last.is_some() && copy::source_version(cm) == last)
                    .filter_map(|cm| cm.metadata.namespace.clone())
                    .collect();
                status.synced_namespaces.retain(|ns| copies.contains(ns));
                problems.push((
                    REASON_SOURCE_NOT_FOUND,
                    format!("the source ConfigMap {source_key} does not exist"),
                ));
            }
            Some(source) => {
                let adopt = spec.conflict_policy == Some(ConflictPolicy::Adopt);
                let name = targets.name.as_str();
                let writes: Vec<_> = targets
                    .namespaces
                    .iter()
                    .cloned()
                    .map(|ns| self.place(key, adopt, source, ns, name))
                    .collect();
                let placed: Vec<Placed> = futures::stream::iter(writes)
                    .buffer_unordered(8)
                    .collect()
                    .await;
                let mut synced = Vec::new();
                let mut conflicts = Vec::new();
                for p in placed {
                    match p {
                        Placed::Synced {
                            namespace,
                            wrote: w,
                        } => {
                            wrote |= w;
                            synced.push(namespace);
                        }
                        Placed::Conflict { namespace } => conflicts.push(namespace),
                        Placed::Failed(e) => {
                            failure.get_or_insert(e);
                        }
                    }
                }
                synced.sort();
                conflicts.sort();
                status.synced_namespaces = synced;
                status.source_resource_version = source.metadata.resource_version.clone();
                if !conflicts.is_empty() {
                    let list: Vec<String> = conflicts
                        .iter()
                        .map(|ns| format!("{ns}/{}", targets.name))
                        .collect();
                    problems.push((
                        REASON_CONFLICT,
                        format!(
                            "ConfigMaps this ConfigMapSync did not create are in the way (conflictPolicy Refuse leaves them alone): {}",
                            listed(&list)
                        ),
                    ));
                }
            }
        }
        if let Some(e) = &failure {
            if is_stale(e) {
                // The cache was behind: retry on a fresher one, reporting nothing.
                return Err(failure.expect("just matched"));
            }
            problems.insert(0, (REASON_SYNC_FAILED, format!("{e}: {}", error_chain(e))));
        }
        if !targets.missing.is_empty() {
            problems.push((
                REASON_DESTINATION_NOT_FOUND,
                format!(
                    "destination namespaces do not exist: {}",
                    listed(&targets.missing)
                ),
            ));
        }
        if wrote {
            status.last_sync_time = Some(Time(k8s_openapi::jiff::Timestamp::now()));
        }
        let status = match problems.first() {
            None => {
                let n = status.synced_namespaces.len();
                Self::with_ready(
                    sync,
                    status,
                    true,
                    REASON_SYNCED,
                    format!("copied to {n} namespace{}", if n == 1 { "" } else { "s" }),
                )
            }
            Some((reason, _)) => {
                let message: Vec<&str> = problems.iter().map(|(_, m)| m.as_str()).collect();
                Self::with_ready(sync, status, false, reason, message.join("; "))
            }
        };
        self.report(sync, previous, status).await?;
        match failure {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

/// How many names a message lists before it only counts the rest.
const MAX_LISTED: usize = 10;

/// The longest note an Event may carry, in bytes.
const MAX_NOTE: usize = 1024;

/// `names` joined with commas, the first [`MAX_LISTED`] of them and a count of the rest.
fn listed(names: &[String]) -> String {
    let mut out = names
        .iter()
        .take(MAX_LISTED)
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join(", ");
    if names.len() > MAX_LISTED {
        out.push_str(&format!(" and {} more", names.len() - MAX_LISTED));
    }
    out
}

/// `s` cut to at most `max` bytes, on a character boundary.
fn truncated(mut s: String, max: usize) -> String {
    if s.len() > max {
        let mut end = max;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
    }
    s
}

/// The causes of `e`, innermost last, for a status message.
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut parts = Vec::new();
    let mut cause = e.source();
    while let Some(c) = cause {
        parts.push(c.to_string());
        cause = c.source();
    }
    parts.join(": ")
}

impl Reconciler<ConfigMapSync> for SyncReconciler {
    type Error = Error;

    async fn reconcile(
        &self,
        request: Request<ConfigMapSync>,
    ) -> Result<Action, ReconcileError<Error>> {
        let key = request.key().clone();
        let Some(sync) = request.object() else {
            // Gone without its finalizer having run (removed by hand, or never added):
            // remove what is still marked as its copies.
            self.delete_copies(&key, |_| false).await?;
            return Ok(Action::done());
        };
        if sync.metadata.deletion_timestamp.is_some() {
            if has_finalizer(&sync) {
                self.delete_copies(&key, |_| false).await?;
                self.syncs
                    .try_remove_finalizer(&sync, FINALIZER)
                    .await
                    .map_err(Error::Finalizer)?;
            }
            return Ok(Action::done());
        }
        let previous = sync.status.clone().unwrap_or_default();
        let targets = match self.targets(&sync) {
            Ok(t) => t,
            Err(why) => {
                let status = Self::with_ready(
                    &sync,
                    previous.clone(),
                    false,
                    REASON_INVALID_SPEC,
                    why.clone(),
                );
                self.report(&sync, &previous, status).await?;
                return Err(ReconcileError::Terminal(Error::InvalidSpec(why)));
            }
        };
        let sync: Arc<ConfigMapSync> = if has_finalizer(&sync) {
            sync
        } else {
            self.syncs
                .try_add_finalizer(&sync, FINALIZER)
                .await
                .map_err(Error::Finalizer)?
        };
        self.sync(&sync, &key, targets, &previous).await?;
        Ok(Action::done())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_lists_are_cut_and_counted() {
        let names: Vec<String> = (0..12).map(|i| format!("ns{i}")).collect();
        let text = listed(&names);
        assert!(text.starts_with("ns0, ns1,"), "{text}");
        assert!(text.ends_with("ns9 and 2 more"), "{text}");
        assert_eq!(listed(&names[..2]), "ns0, ns1");
    }

    #[test]
    fn notes_are_cut_on_a_character_boundary() {
        let s = "é".repeat(600);
        let cut = truncated(s, MAX_NOTE);
        assert!(cut.len() <= MAX_NOTE);
        assert_eq!(cut.chars().count(), 512);
        assert_eq!(truncated("short".into(), MAX_NOTE), "short");
    }
}
