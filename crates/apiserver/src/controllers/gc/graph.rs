//! The owner-reference graph the collector's task owns: the objects that take part in
//! ownership by uid with their owner references, the dependents of every uid named as an
//! owner, and the decision of what an object needs ([`Action`]) when its fate may have changed.
//!
//! # Isolated objects
//! Most objects own nothing and are owned by nothing (a ConfigMap written by hand, a
//! Namespace, a Secret). The graph keeps no node for such an *isolated* object: one with no
//! owner references, not being deleted, and named as an owner by nothing the graph holds.
//! A node costs about 300 bytes (the table slot, the uid, the name and kind), which was more
//! than half of an ordinary ConfigMap's own JSON. When a dependent first names an owner the
//! graph does not hold, the graph reads that owner from storage by the reference's kind, name
//! and the dependent's namespace ([`Lookup`]) and keeps it only if its uid is the
//! reference's. The node is dropped again once the object is isolated once more (its last
//! dependent gone, its own references removed). Reading storage sees a state at least as new
//! as the watch has delivered; a later event for an older revision is ignored, as for any
//! node.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use serde::Deserialize;

use crate::api::propagation::Propagation as Policy;
use crate::registry::rest::{FOREGROUND_DELETION, ORPHAN};
use crate::storage::{EventType, Stored, WatchEvent};

/// A uid, shared between the graph's maps.
pub(super) type Uid = Arc<str>;

/// Reads the object an owner reference names, as storage holds it now: the reference's group,
/// kind and name, in the dependent's namespace (`None` for a cluster-scoped dependent; a
/// cluster-scoped owner is found without one). `None` when there is no such object.
pub(super) type Lookup<'a> = &'a dyn Fn(&OwnerRef, Option<&str>) -> Option<Stored>;

/// One owner reference of an object, as the graph keeps it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct OwnerRef {
    pub(super) uid: Uid,
    pub(super) group: String,
    pub(super) kind: String,
    pub(super) name: String,
    pub(super) block: bool,
}

/// One observed object.
#[derive(Clone, Debug)]
pub(super) struct Node {
    pub(super) rv: u64,
    pub(super) group: String,
    pub(super) kind: String,
    pub(super) namespace: Option<String>,
    pub(super) name: String,
    pub(super) owners: Vec<OwnerRef>,
    pub(super) deleting: bool,
    pub(super) orphan: bool,
    pub(super) foreground: bool,
}

/// The objects naming one uid as their owner.
#[derive(Debug, Default)]
pub(super) struct Dependents {
    pub(super) all: HashSet<Uid>,
    /// How many of them set `blockOwnerDeletion: true` on that reference.
    pub(super) blocking: usize,
}

/// What one object needs from the collector.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Action {
    /// Delete it with this policy.
    Delete(Policy),
    /// Remove its references to these owner uids.
    Strip(Vec<Arc<str>>),
    /// Remove this finalizer from it (its dependents have been dealt with).
    RemoveFinalizer(&'static str),
}

/// An action on one object, with what the worker needs to find it.
#[derive(Clone, Debug)]
pub(super) struct Work {
    pub(super) uid: Uid,
    pub(super) rv: u64,
    pub(super) group: String,
    pub(super) kind: String,
    pub(super) namespace: Option<String>,
    pub(super) name: String,
    pub(super) action: Action,
}

/// How one owner reference of an object resolves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Resolved {
    /// The owner exists where the reference may point.
    Solid,
    /// The owner exists and is being deleted with `Orphan`: the reference is to be removed.
    Orphaning,
    /// The owner is being deleted with `Foreground`.
    Waiting,
    /// No such owner (or one the reference may not point to).
    Dangling,
    /// A cluster-scoped object naming a namespaced owner: never resolvable.
    Invalid,
}

/// The metadata the graph reads from a stored object.
#[derive(Deserialize)]
pub(super) struct Doc<'a> {
    #[serde(rename = "apiVersion", borrow, default)]
    pub(super) api_version: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub(super) kind: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub(super) metadata: Option<DocMeta<'a>>,
}

#[derive(Deserialize)]
pub(super) struct DocMeta<'a> {
    #[serde(borrow, default)]
    pub(super) name: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub(super) namespace: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub(super) uid: Option<Cow<'a, str>>,
    #[serde(rename = "deletionTimestamp", borrow, default)]
    pub(super) deletion_timestamp: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub(super) finalizers: Option<Vec<Cow<'a, str>>>,
    #[serde(rename = "ownerReferences", borrow, default)]
    pub(super) owner_references: Option<Vec<DocRef<'a>>>,
}

#[derive(Deserialize)]
pub(super) struct DocRef<'a> {
    #[serde(rename = "apiVersion", borrow, default)]
    pub(super) api_version: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub(super) kind: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub(super) name: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub(super) uid: Option<Cow<'a, str>>,
    #[serde(rename = "blockOwnerDeletion", default)]
    pub(super) block_owner_deletion: Option<bool>,
}

/// The group of an `apiVersion` (`apps/v1` → `apps`, `v1` → ``).
pub(super) fn group_of(api_version: &str) -> &str {
    api_version.split_once('/').map_or("", |(g, _)| g)
}

/// Reads a stored object into a node; `None` for documents without a uid.
pub(super) fn parse_node(rv: u64, bytes: &[u8]) -> Option<(Uid, Node)> {
    node_of(rv, serde_json::from_slice(bytes).ok()?)
}

impl Doc<'_> {
    /// The object's uid, if it has one.
    fn uid(&self) -> Option<&str> {
        let uid = self.metadata.as_ref()?.uid.as_deref()?;
        (!uid.is_empty()).then_some(uid)
    }

    /// Whether the object names no owner and is not being deleted: isolated unless something
    /// names it as an owner.
    fn unowned_and_live(&self) -> bool {
        self.metadata.as_ref().is_none_or(|m| {
            m.deletion_timestamp.is_none()
                && m.owner_references.as_ref().is_none_or(|refs| {
                    refs.iter()
                        .all(|r| r.uid.as_deref().is_none_or(str::is_empty))
                })
        })
    }
}

/// The node of a parsed object; `None` for documents without a uid.
fn node_of(rv: u64, doc: Doc<'_>) -> Option<(Uid, Node)> {
    let uid: Uid = Arc::from(doc.uid()?);
    let meta = doc.metadata?;
    let finalizers = meta.finalizers.unwrap_or_default();
    let owners = meta
        .owner_references
        .unwrap_or_default()
        .into_iter()
        .filter_map(|r| {
            Some(OwnerRef {
                uid: Arc::from(r.uid.filter(|u| !u.is_empty())?.as_ref()),
                group: group_of(r.api_version.as_deref().unwrap_or_default()).to_string(),
                kind: r.kind.unwrap_or_default().into_owned(),
                name: r.name.unwrap_or_default().into_owned(),
                block: r.block_owner_deletion == Some(true),
            })
        })
        .collect();
    let node = Node {
        rv,
        group: group_of(doc.api_version.as_deref().unwrap_or_default()).to_string(),
        kind: doc.kind.unwrap_or_default().into_owned(),
        namespace: meta
            .namespace
            .filter(|n| !n.is_empty())
            .map(Cow::into_owned),
        name: meta.name.unwrap_or_default().into_owned(),
        owners,
        deleting: meta.deletion_timestamp.is_some(),
        orphan: finalizers.iter().any(|f| f == ORPHAN),
        foreground: finalizers.iter().any(|f| f == FOREGROUND_DELETION),
    };
    Some((uid, node))
}

/// The owner-reference graph. Owned by the collector's task; see the module docs.
#[derive(Debug, Default)]
pub(crate) struct Graph {
    pub(super) nodes: HashMap<Uid, Node>,
    /// Owner uid → the objects referring to it, whether or not the owner exists.
    pub(super) dependents: HashMap<Uid, Dependents>,
    /// Objects to decide again.
    pub(super) dirty: HashSet<Uid>,
    /// The last action put on the queue for each object, with the revision it was decided on,
    /// so an unchanged object is not sent the same action twice.
    pub(super) issued: HashMap<Uid, (u64, Action)>,
}

impl Graph {
    /// Records a created or changed object; `lookup` finds the owners it names that the
    /// graph does not hold yet.
    pub(super) fn upsert(&mut self, uid: Uid, node: Node, lookup: Lookup<'_>) {
        if self.nodes.get(&uid).is_some_and(|old| old.rv >= node.rv) {
            return;
        }
        let old = self.nodes.remove(&uid);
        let old_owners = old.as_ref().map(|o| o.owners.clone()).unwrap_or_default();
        for r in &old_owners {
            if !node.owners.contains(r) {
                self.unlink(&uid, r);
            }
        }
        for r in &node.owners {
            if !old_owners.contains(r) {
                self.link(&uid, r);
            }
        }
        for r in &node.owners {
            if !self.nodes.contains_key(&r.uid) && r.uid != uid {
                self.adopt(r, node.namespace.as_deref(), lookup);
            }
        }
        let started_gc_deletion = node.deleting
            && (node.foreground || node.orphan)
            && old.as_ref().is_none_or(|o| {
                !o.deleting || o.foreground != node.foreground || o.orphan != node.orphan
            });
        if started_gc_deletion && let Some(deps) = self.dependents.get(&uid) {
            self.dirty.extend(deps.all.iter().cloned());
        }
        self.issued.remove(&uid);
        self.dirty.insert(uid.clone());
        self.nodes.insert(uid.clone(), node);
        self.drop_if_isolated(&uid);
    }

    /// Reads the owner `r` names from storage and keeps it, if it is the object the reference
    /// means (its uid, kind and group; the lookup went by name and namespace).
    fn adopt(&mut self, r: &OwnerRef, namespace: Option<&str>, lookup: Lookup<'_>) {
        let Some(stored) = lookup(r, namespace) else {
            return;
        };
        let Some((uid, node)) = parse_node(stored.rv, &stored.bytes) else {
            return;
        };
        if uid == r.uid && node.kind == r.kind && node.group == r.group {
            // An adopted owner is held by its dependents; nothing about it needs deciding
            // until its own events come.
            self.nodes.insert(uid, node);
        }
    }

    /// Drops the node of `uid` if nothing about it needs the graph any more (see
    /// "Isolated objects" in the module docs).
    fn drop_if_isolated(&mut self, uid: &Uid) {
        let isolated = self
            .nodes
            .get(uid)
            .is_some_and(|n| n.owners.is_empty() && !n.deleting)
            && !self.dependents.contains_key(uid);
        if isolated {
            self.nodes.remove(uid);
            self.issued.remove(uid);
        }
    }

    /// Records a removed object.
    pub(super) fn remove(&mut self, uid: &Uid) {
        let Some(old) = self.nodes.remove(uid) else {
            return;
        };
        for r in &old.owners {
            self.unlink(uid, r);
        }
        if let Some(deps) = self.dependents.get(uid) {
            self.dirty.extend(deps.all.iter().cloned());
        }
        self.issued.remove(uid);
    }

    pub(super) fn link(&mut self, dependent: &Uid, r: &OwnerRef) {
        let deps = self.dependents.entry(r.uid.clone()).or_default();
        if deps.all.insert(dependent.clone()) && r.block {
            deps.blocking += 1;
        }
        self.dirty.insert(r.uid.clone());
    }

    pub(super) fn unlink(&mut self, dependent: &Uid, r: &OwnerRef) {
        if let Some(deps) = self.dependents.get_mut(&r.uid) {
            if deps.all.remove(dependent) && r.block {
                deps.blocking = deps.blocking.saturating_sub(1);
            }
            if deps.all.is_empty() {
                self.dependents.remove(&r.uid);
                self.drop_if_isolated(&r.uid);
            }
        }
        self.dirty.insert(r.uid.clone());
    }

    /// How `r`, an owner reference of `dependent`, resolves. `namespaced_kind` tells whether a
    /// kind that has no object in the graph is namespaced (`None`: unknown).
    pub(super) fn resolve(
        &self,
        dependent: &Node,
        r: &OwnerRef,
        namespaced_kind: &dyn Fn(&str, &str) -> Option<bool>,
    ) -> Resolved {
        let owner = self
            .nodes
            .get(&r.uid)
            .filter(|o| o.name == r.name && o.kind == r.kind && o.group == r.group);
        let owner_namespaced = match owner {
            Some(o) => o.namespace.is_some(),
            None => namespaced_kind(&r.group, &r.kind).unwrap_or(false),
        };
        if dependent.namespace.is_none() && owner_namespaced {
            return Resolved::Invalid;
        }
        let Some(owner) = owner else {
            return Resolved::Dangling;
        };
        if owner.namespace.is_some() && owner.namespace != dependent.namespace {
            return Resolved::Dangling;
        }
        if owner.deleting && owner.orphan {
            Resolved::Orphaning
        } else if owner.deleting && owner.foreground {
            Resolved::Waiting
        } else {
            Resolved::Solid
        }
    }

    /// What object `uid` needs now, if anything.
    pub(super) fn decide(
        &self,
        uid: &Uid,
        namespaced_kind: &dyn Fn(&str, &str) -> Option<bool>,
    ) -> Option<Action> {
        let node = self.nodes.get(uid)?;
        let deps = self.dependents.get(uid);
        if node.deleting {
            // Being deleted: its references to orphaning owners still go (so those owners
            // need not wait for it); otherwise only the collector's own finalizers concern it.
            let mut orphaning: Vec<Uid> = node
                .owners
                .iter()
                .filter(|r| self.resolve(node, r, namespaced_kind) == Resolved::Orphaning)
                .map(|r| r.uid.clone())
                .collect();
            if !orphaning.is_empty() {
                orphaning.sort();
                orphaning.dedup();
                return Some(Action::Strip(orphaning));
            }
            if node.orphan {
                return deps
                    .is_none_or(|d| d.all.is_empty())
                    .then_some(Action::RemoveFinalizer(ORPHAN));
            }
            if node.foreground {
                return deps
                    .is_none_or(|d| d.blocking == 0)
                    .then_some(Action::RemoveFinalizer(FOREGROUND_DELETION));
            }
            return None;
        }
        if node.owners.is_empty() {
            return None;
        }
        let mut solid = false;
        let mut orphaning = Vec::new();
        let mut waiting = Vec::new();
        let mut dangling = Vec::new();
        for r in &node.owners {
            match self.resolve(node, r, namespaced_kind) {
                Resolved::Invalid => return None,
                Resolved::Solid => solid = true,
                Resolved::Orphaning => orphaning.push(r.uid.clone()),
                Resolved::Waiting => waiting.push(r.uid.clone()),
                Resolved::Dangling => dangling.push(r.uid.clone()),
            }
        }
        let strip = |mut uids: Vec<Uid>| {
            uids.sort();
            uids.dedup();
            (!uids.is_empty()).then_some(Action::Strip(uids))
        };
        if !orphaning.is_empty() {
            // Orphaning first; whether the object then goes is decided on what remains.
            if solid {
                orphaning.extend(dangling);
                orphaning.extend(waiting);
            }
            return strip(orphaning);
        }
        if solid {
            dangling.extend(waiting);
            return strip(dangling);
        }
        let has_dependents = deps.is_some_and(|d| !d.all.is_empty());
        if !waiting.is_empty() && has_dependents {
            return Some(Action::Delete(Policy::Foreground));
        }
        Some(Action::Delete(if node.orphan {
            Policy::Orphan
        } else if node.foreground {
            Policy::Foreground
        } else {
            Policy::Background
        }))
    }

    /// Decides every marked object; returns the work not already handed out.
    pub(super) fn drain_dirty(
        &mut self,
        namespaced_kind: &dyn Fn(&str, &str) -> Option<bool>,
    ) -> Vec<Work> {
        let dirty = std::mem::take(&mut self.dirty);
        let mut out = Vec::new();
        for uid in dirty {
            let Some(action) = self.decide(&uid, namespaced_kind) else {
                continue;
            };
            let Some(node) = self.nodes.get(&uid) else {
                continue;
            };
            if self
                .issued
                .get(&uid)
                .is_some_and(|(rv, a)| *rv == node.rv && *a == action)
            {
                continue;
            }
            self.issued.insert(uid.clone(), (node.rv, action.clone()));
            out.push(Work {
                uid,
                rv: node.rv,
                group: node.group.clone(),
                kind: node.kind.clone(),
                namespace: node.namespace.clone(),
                name: node.name.clone(),
                action,
            });
        }
        out
    }

    /// Decides `uid` again after a failed action, forgetting what was handed out for it; returns
    /// its work, or `None` when it is gone or needs nothing now.
    pub(super) fn recheck(
        &mut self,
        uid: Uid,
        namespaced_kind: &dyn Fn(&str, &str) -> Option<bool>,
    ) -> Option<Work> {
        self.issued.remove(&uid);
        let action = self.decide(&uid, namespaced_kind)?;
        let node = self.nodes.get(&uid)?;
        self.issued.insert(uid.clone(), (node.rv, action.clone()));
        Some(Work {
            uid,
            rv: node.rv,
            group: node.group.clone(),
            kind: node.kind.clone(),
            namespace: node.namespace.clone(),
            name: node.name.clone(),
            action,
        })
    }

    /// Applies one watch event.
    pub(super) fn apply(&mut self, event: &WatchEvent, lookup: Lookup<'_>) {
        match event.kind {
            EventType::Added | EventType::Modified => {
                let Ok(doc) = serde_json::from_slice::<Doc<'_>>(&event.object) else {
                    return;
                };
                // Most writes are of objects that stay isolated (see the module docs): one
                // the graph does not hold, and that is no owner's or dependent's, leaves the
                // graph as it is, so nothing of it is copied out and nothing is recorded.
                if let Some(uid) = doc.uid()
                    && doc.unowned_and_live()
                    && !self.nodes.contains_key(uid)
                    && !self.dependents.contains_key(uid)
                {
                    return;
                }
                if let Some((uid, node)) = node_of(event.rv, doc) {
                    self.upsert(uid, node, lookup);
                }
            }
            EventType::Deleted => {
                if let Some((uid, _)) = parse_node(event.rv, &event.object) {
                    self.remove(&uid);
                }
            }
        }
    }
}
