//! The RBAC authorizer (spec §18.2–§18.4): request attributes, rule matching, and an index of
//! the Roles, ClusterRoles and bindings that answers "may this user do this?".
//!
//! [`RbacIndex`] holds a [`Snapshot`] of the four RBAC kinds, built from storage and rebuilt
//! only after one of them changed: it keeps a storage watcher on the RBAC prefix and drains it
//! (without waiting) when asked for the snapshot, and the HTTP layer marks it stale right after
//! an RBAC write it served, so a binding created by one request applies to the next. A request
//! never scans storage unless RBAC objects changed since the last one.
//!
//! Evaluation follows Kubernetes: ClusterRoleBindings first, then the RoleBindings of the
//! request's namespace; the first rule that allows wins and names its binding in the reason;
//! bindings whose role is missing grant nothing and contribute a resolution error to the
//! reason of a denial.
//!
//! A ClusterRole's `rules` are used as stored; for aggregated roles the aggregation controller
//! (`controllers/clusterroles.rs`) keeps them up to date.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::api::user::User;
use crate::storage::{ListOptions, Storage as _, Store, Watcher};

/// The storage prefix under which all four RBAC kinds live.
pub const RBAC_PREFIX: &str = "/rbac.authorization.k8s.io/";

/// The group whose members are allowed everything without consulting RBAC.
pub const MASTERS: &str = "system:masters";

/// One rule of a Role or ClusterRole.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyRule {
    /// Verbs, or `*`.
    #[serde(default)]
    pub verbs: Vec<String>,
    /// API groups (`""` = core), or `*`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub api_groups: Vec<String>,
    /// Resources, `res/sub`, `*/sub`, or `*`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<String>,
    /// Object names; empty means all.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resource_names: Vec<String>,
    /// Non-resource paths, exact or ending in `*`.
    #[serde(
        default,
        rename = "nonResourceURLs",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub non_resource_urls: Vec<String>,
}

fn has(list: &[String], want: &str) -> bool {
    list.iter().any(|v| v == want)
}

impl PolicyRule {
    /// Whether this rule allows the request `attrs`.
    pub fn allows(&self, attrs: &Attributes) -> bool {
        if !(has(&self.verbs, "*") || has(&self.verbs, &attrs.verb)) {
            return false;
        }
        match &attrs.target {
            Target::Resource(r) => {
                (has(&self.api_groups, "*") || has(&self.api_groups, &r.group))
                    && self.resource_matches(&r.resource, &r.subresource)
                    && (self.resource_names.is_empty() || has(&self.resource_names, &r.name))
            }
            Target::NonResource { path } => self.non_resource_urls.iter().any(|u| {
                u == "*"
                    || u == path
                    || u.strip_suffix('*')
                        .is_some_and(|prefix| path.starts_with(prefix))
            }),
        }
    }

    fn resource_matches(&self, resource: &str, sub: &str) -> bool {
        self.resources.iter().any(|r| {
            if r == "*" {
                return true;
            }
            if sub.is_empty() {
                return r == resource;
            }
            r.strip_suffix(sub)
                .and_then(|head| head.strip_suffix('/'))
                .is_some_and(|head| head == resource || head == "*")
        })
    }
}

/// What a resource request addresses.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ResourceAttributes {
    /// API group (`""` = core).
    pub group: String,
    /// Version.
    pub version: String,
    /// Plural resource.
    pub resource: String,
    /// Subresource, or empty.
    pub subresource: String,
    /// Namespace, or empty for cluster-scoped and all-namespace requests.
    pub namespace: String,
    /// Object name, or empty.
    pub name: String,
}

/// A resource or a non-resource request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// A request for objects.
    Resource(ResourceAttributes),
    /// Any other path.
    NonResource {
        /// The URL path.
        path: String,
    },
}

/// What a request wants to do, as RBAC sees it (spec §18.2).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Attributes {
    /// The verb (`get`, `list`, `create`, …; lowercased method for non-resource requests).
    pub verb: String,
    /// What it is done to.
    pub target: Target,
}

impl Attributes {
    /// The namespace of a resource request, or `""`.
    pub fn namespace(&self) -> &str {
        match &self.target {
            Target::Resource(r) => &r.namespace,
            Target::NonResource { .. } => "",
        }
    }

    /// The body of the Forbidden message after `… is forbidden: ` (spec §18.6), without any
    /// RBAC reason.
    pub fn forbidden_reason(&self, user: &str) -> String {
        match &self.target {
            Target::Resource(r) => {
                let resource = if r.subresource.is_empty() {
                    r.resource.clone()
                } else {
                    format!("{}/{}", r.resource, r.subresource)
                };
                let scope = if r.namespace.is_empty() {
                    "at the cluster scope".to_string()
                } else {
                    format!("in the namespace {}", quote(&r.namespace))
                };
                format!(
                    "User {} cannot {} resource {} in API group {} {scope}",
                    quote(user),
                    self.verb,
                    quote(&resource),
                    quote(&r.group)
                )
            }
            Target::NonResource { path } => format!(
                "User {} cannot {} path {}",
                quote(user),
                self.verb,
                quote(path)
            ),
        }
    }
}

/// A string in double quotes with Go's `%q` escaping of the characters that occur in names.
pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The answer of the authorizer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    /// Whether the request is allowed.
    pub allowed: bool,
    /// For an allow: which binding allowed it (empty for `system:masters`). For a denial: the
    /// resolution errors met on the way (`RBAC: …`), or empty.
    pub reason: String,
}

/// A subject of a binding.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Subject {
    /// `User`, `Group` or `ServiceAccount`.
    #[serde(default)]
    pub kind: String,
    /// The name.
    #[serde(default)]
    pub name: String,
    /// A ServiceAccount's namespace.
    #[serde(default)]
    pub namespace: String,
}

/// A binding's role reference.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoleRef {
    /// `Role` or `ClusterRole`.
    #[serde(default)]
    pub kind: String,
    /// The role's name.
    #[serde(default)]
    pub name: String,
}

/// A RoleBinding or ClusterRoleBinding.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Binding {
    /// The binding's name.
    pub name: String,
    /// Its namespace (empty for a ClusterRoleBinding).
    pub namespace: String,
    /// The role it grants.
    pub role_ref: RoleRef,
    /// To whom.
    pub subjects: Vec<Subject>,
}

impl Binding {
    /// The first subject that is `user`, if any.
    fn subject_for(&self, user: &User) -> Option<&Subject> {
        self.subjects.iter().find(|s| match s.kind.as_str() {
            "User" => s.name == user.name,
            "Group" => user.groups.contains(&s.name),
            "ServiceAccount" => {
                let ns = if s.namespace.is_empty() {
                    &self.namespace
                } else {
                    &s.namespace
                };
                !ns.is_empty()
                    && user
                        .name
                        .strip_prefix("system:serviceaccount:")
                        .and_then(|rest| rest.split_once(':'))
                        .is_some_and(|(n, name)| n == ns && name == s.name)
            }
            _ => false,
        })
    }

    fn describe(&self, subject: &Subject) -> String {
        let binding = if self.namespace.is_empty() {
            format!("ClusterRoleBinding {}", quote(&self.name))
        } else {
            format!(
                "RoleBinding {}",
                quote(&format!("{}/{}", self.name, self.namespace))
            )
        };
        let who = match subject.kind.as_str() {
            "ServiceAccount" => {
                let ns = if subject.namespace.is_empty() {
                    &self.namespace
                } else {
                    &subject.namespace
                };
                format!(
                    "ServiceAccount {}",
                    quote(&format!("{}/{ns}", subject.name))
                )
            }
            kind => format!("{kind} {}", quote(&subject.name)),
        };
        format!(
            "{binding} of {} {} to {who}",
            self.role_ref.kind,
            quote(&self.role_ref.name)
        )
    }
}

/// A rule granted to a user, with the binding and subject that grant it, or the error that a
/// binding's role could not be found.
type Grant<'a> = Result<(&'a PolicyRule, &'a Binding, &'a Subject), String>;

/// Bindings (sorted by name) indexed by the users and groups they name, so a decision looks
/// only at the bindings of its caller.
#[derive(Debug, Default)]
struct BindingSet {
    bindings: Vec<Binding>,
    by_user: HashMap<String, Vec<usize>>,
    by_group: HashMap<String, Vec<usize>>,
}

impl BindingSet {
    fn new(mut bindings: Vec<Binding>) -> BindingSet {
        bindings.sort_by(|a, b| a.name.cmp(&b.name));
        let mut set = BindingSet::default();
        for (i, b) in bindings.iter().enumerate() {
            for s in &b.subjects {
                let (map, key) = match s.kind.as_str() {
                    "User" => (&mut set.by_user, s.name.clone()),
                    "Group" => (&mut set.by_group, s.name.clone()),
                    "ServiceAccount" => {
                        let ns = if s.namespace.is_empty() {
                            &b.namespace
                        } else {
                            &s.namespace
                        };
                        if ns.is_empty() {
                            continue;
                        }
                        (
                            &mut set.by_user,
                            format!("system:serviceaccount:{ns}:{}", s.name),
                        )
                    }
                    _ => continue,
                };
                let list = map.entry(key).or_default();
                if list.last() != Some(&i) {
                    list.push(i);
                }
            }
        }
        set.bindings = bindings;
        set
    }

    /// The bindings naming `user` or one of its groups, in name order.
    fn for_user(&self, user: &User) -> impl Iterator<Item = &Binding> {
        let mut picked: Vec<usize> = self.by_user.get(&user.name).cloned().unwrap_or_default();
        for g in &user.groups {
            if let Some(list) = self.by_group.get(g) {
                picked.extend_from_slice(list);
            }
        }
        picked.sort_unstable();
        picked.dedup();
        picked.into_iter().map(|i| &self.bindings[i])
    }
}

/// The RBAC objects at one moment, arranged for evaluation.
#[derive(Debug, Default)]
pub struct Snapshot {
    roles: HashMap<String, HashMap<String, Arc<[PolicyRule]>>>,
    cluster_roles: HashMap<String, Arc<[PolicyRule]>>,
    cluster_role_bindings: BindingSet,
    role_bindings: HashMap<String, BindingSet>,
}

#[derive(Deserialize)]
struct RoleObject {
    #[serde(default)]
    metadata: Meta,
    #[serde(default)]
    rules: Option<Vec<PolicyRule>>,
}

#[derive(Deserialize)]
struct BindingObject {
    #[serde(default)]
    metadata: Meta,
    #[serde(default, rename = "roleRef")]
    role_ref: RoleRef,
    #[serde(default)]
    subjects: Option<Vec<Subject>>,
}

#[derive(Default, Deserialize)]
struct Meta {
    #[serde(default)]
    name: String,
    #[serde(default)]
    namespace: String,
}

impl Snapshot {
    /// Builds a snapshot from the stored objects of the four kinds (JSON bodies).
    pub fn from_objects(
        roles: &[Value],
        cluster_roles: &[Value],
        role_bindings: &[Value],
        cluster_role_bindings: &[Value],
    ) -> Snapshot {
        let mut snap = Snapshot::default();
        let role = |v: &Value| serde_json::from_value::<RoleObject>(v.clone()).ok();
        let binding = |v: &Value| {
            serde_json::from_value::<BindingObject>(v.clone())
                .ok()
                .map(|b| Binding {
                    name: b.metadata.name,
                    namespace: b.metadata.namespace,
                    role_ref: b.role_ref,
                    subjects: b.subjects.unwrap_or_default(),
                })
        };
        for r in roles.iter().filter_map(role) {
            snap.roles
                .entry(r.metadata.namespace)
                .or_default()
                .insert(r.metadata.name, r.rules.unwrap_or_default().into());
        }
        for r in cluster_roles.iter().filter_map(role) {
            snap.cluster_roles
                .insert(r.metadata.name, r.rules.unwrap_or_default().into());
        }
        let mut by_namespace: HashMap<String, Vec<Binding>> = HashMap::new();
        for b in role_bindings.iter().filter_map(binding) {
            by_namespace.entry(b.namespace.clone()).or_default().push(b);
        }
        snap.role_bindings = by_namespace
            .into_iter()
            .map(|(ns, list)| (ns, BindingSet::new(list)))
            .collect();
        snap.cluster_role_bindings =
            BindingSet::new(cluster_role_bindings.iter().filter_map(binding).collect());
        snap
    }

    /// The rules a binding grants, or the error that its role does not exist.
    fn role_rules(&self, binding: &Binding) -> Result<Arc<[PolicyRule]>, String> {
        let name = &binding.role_ref.name;
        match binding.role_ref.kind.as_str() {
            "ClusterRole" => self.cluster_roles.get(name).cloned().ok_or_else(|| {
                format!(
                    "clusterrole.rbac.authorization.k8s.io {} not found",
                    quote(name)
                )
            }),
            "Role" if !binding.namespace.is_empty() => self
                .roles
                .get(&binding.namespace)
                .and_then(|in_ns| in_ns.get(name))
                .cloned()
                .ok_or_else(|| format!("role.rbac.authorization.k8s.io {} not found", quote(name))),
            other => Err(format!("unsupported role reference kind: {}", quote(other))),
        }
    }

    /// The rules of the role a binding in `namespace` (empty for a ClusterRoleBinding) refers
    /// to, or the error that it does not exist.
    pub fn role_ref_rules(
        &self,
        role_ref: &RoleRef,
        namespace: &str,
    ) -> Result<Arc<[PolicyRule]>, String> {
        self.role_rules(&Binding {
            name: String::new(),
            namespace: namespace.to_string(),
            role_ref: role_ref.clone(),
            subjects: Vec::new(),
        })
    }

    /// Calls `visit` with every rule granted to `user` in `namespace` (cluster-wide bindings
    /// first; `""` = cluster-wide only), with a description of where it came from, or with a
    /// resolution error. Stops when `visit` returns `false`.
    fn visit(&self, user: &User, namespace: &str, visit: &mut dyn FnMut(Grant<'_>) -> bool) {
        let namespaced = self
            .role_bindings
            .get(namespace)
            .filter(|_| !namespace.is_empty());
        let bindings = self
            .cluster_role_bindings
            .for_user(user)
            .chain(namespaced.into_iter().flat_map(|set| set.for_user(user)));
        for binding in bindings {
            let Some(subject) = binding.subject_for(user) else {
                continue;
            };
            match self.role_rules(binding) {
                Ok(rules) => {
                    for rule in rules.iter() {
                        if !visit(Ok((rule, binding, subject))) {
                            return;
                        }
                    }
                }
                Err(e) => {
                    if !visit(Err(e)) {
                        return;
                    }
                }
            }
        }
    }

    /// Whether RBAC allows `attrs` for `user`, with the reason (spec §18.9 formats).
    pub fn authorize(&self, user: &User, attrs: &Attributes) -> Decision {
        let mut errors: Vec<String> = Vec::new();
        let mut allowed_by = None;
        self.visit(user, attrs.namespace(), &mut |item| match item {
            Ok((rule, binding, subject)) => {
                if rule.allows(attrs) {
                    allowed_by = Some(binding.describe(subject));
                    false
                } else {
                    true
                }
            }
            Err(e) => {
                if !errors.contains(&e) {
                    errors.push(e);
                }
                true
            }
        });
        match allowed_by {
            Some(by) => Decision {
                allowed: true,
                reason: format!("RBAC: allowed by {by}"),
            },
            None => Decision {
                allowed: false,
                reason: rbac_errors(&errors),
            },
        }
    }

    /// Every rule granted to `user` in `namespace` (plus the cluster-wide ones), and the
    /// resolution errors met, for SelfSubjectRulesReview.
    pub fn rules_for(&self, user: &User, namespace: &str) -> (Vec<PolicyRule>, Vec<String>) {
        let mut rules = Vec::new();
        let mut errors = Vec::new();
        self.visit(user, namespace, &mut |item| {
            match item {
                Ok((rule, _, _)) => rules.push(rule.clone()),
                Err(e) if !errors.contains(&e) => errors.push(e),
                Err(_) => {}
            }
            true
        });
        (rules, errors)
    }
}

/// `RBAC: <e>` or `RBAC: [e1, e2]`, or empty without errors (Kubernetes' aggregate format).
pub fn rbac_errors(errors: &[String]) -> String {
    match errors {
        [] => String::new(),
        [one] => format!("RBAC: {one}"),
        many => format!("RBAC: [{}]", many.join(", ")),
    }
}

/// Whether `user` belongs to `system:masters`.
pub fn is_master(user: &User) -> bool {
    user.groups.iter().any(|g| g == MASTERS)
}

/// The authorizer: `system:masters` first, then RBAC over an index kept fresh from storage.
pub struct RbacIndex {
    store: Arc<Store>,
    inner: Mutex<Inner>,
}

struct Inner {
    snapshot: Arc<Snapshot>,
    watcher: Option<Watcher>,
    stale: bool,
}

impl std::fmt::Debug for RbacIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RbacIndex").finish_non_exhaustive()
    }
}

impl RbacIndex {
    /// An index over `store`, built on first use.
    pub fn new(store: Arc<Store>) -> RbacIndex {
        RbacIndex {
            store,
            inner: Mutex::new(Inner {
                snapshot: Arc::new(Snapshot::default()),
                watcher: None,
                stale: true,
            }),
        }
    }

    /// Marks the index stale: the next request rebuilds it. Called after an RBAC write.
    pub fn invalidate(&self) {
        self.inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .stale = true;
    }

    /// The current snapshot, rebuilt first if any RBAC object changed since the last build.
    pub fn snapshot(&self) -> Arc<Snapshot> {
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let mut stale = inner.stale;
        match inner.watcher.as_mut() {
            None => stale = true,
            Some(w) => loop {
                match w.try_next() {
                    Ok(Some(_)) => stale = true,
                    Ok(None) => break,
                    Err(_) => {
                        stale = true;
                        break;
                    }
                }
            },
        }
        if stale {
            // Watch from the current revision first, so no change slips between the scan
            // and the watch; a change seen twice only costs one more rebuild.
            inner.watcher = self.store.watch(RBAC_PREFIX, self.store.current_rv()).ok();
            inner.snapshot = Arc::new(self.build());
            inner.stale = false;
        }
        inner.snapshot.clone()
    }

    fn build(&self) -> Snapshot {
        let list = |plural: &str| -> Vec<Value> {
            let prefix = format!("{RBAC_PREFIX}{plural}/");
            match self.store.list(&prefix, &ListOptions::default(), &|_| true) {
                Ok(page) => page.items.iter().filter_map(|s| s.value().ok()).collect(),
                Err(e) => {
                    tracing::warn!(error = %e, prefix, "listing RBAC objects failed");
                    Vec::new()
                }
            }
        };
        Snapshot::from_objects(
            &list("roles"),
            &list("clusterroles"),
            &list("rolebindings"),
            &list("clusterrolebindings"),
        )
    }

    /// Whether `user` may do `attrs`: `system:masters` always (empty reason), else RBAC.
    pub fn authorize(&self, user: &User, attrs: &Attributes) -> Decision {
        if is_master(user) {
            return Decision {
                allowed: true,
                reason: String::new(),
            };
        }
        self.snapshot().authorize(user, attrs)
    }
}

/// Groups rules by everything but their verbs, as `kubectl auth can-i --list` shows them.
pub fn compact(rules: &[PolicyRule]) -> Vec<PolicyRule> {
    let mut by_key: BTreeMap<PolicyRule, Vec<String>> = BTreeMap::new();
    for r in rules {
        let key = PolicyRule {
            verbs: Vec::new(),
            ..r.clone()
        };
        let verbs = by_key.entry(key).or_default();
        for v in &r.verbs {
            if !verbs.contains(v) {
                verbs.push(v.clone());
            }
        }
    }
    by_key
        .into_iter()
        .map(|(mut k, v)| {
            k.verbs = v;
            k
        })
        .collect()
}

#[cfg(test)]
mod tests;
