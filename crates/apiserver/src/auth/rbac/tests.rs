//! Tests of `auth/rbac.rs`.

use serde_json::json;

use super::*;

fn res(verb: &str, group: &str, resource: &str, sub: &str, ns: &str, name: &str) -> Attributes {
    Attributes {
        verb: verb.into(),
        target: Target::Resource(ResourceAttributes {
            group: group.into(),
            version: "v1".into(),
            resource: resource.into(),
            subresource: sub.into(),
            namespace: ns.into(),
            name: name.into(),
        }),
    }
}

fn rule(v: Value) -> PolicyRule {
    serde_json::from_value(v).expect("rule")
}

fn sa(ns: &str, name: &str) -> User {
    User {
        name: format!("system:serviceaccount:{ns}:{name}"),
        groups: vec![
            "system:serviceaccounts".into(),
            format!("system:serviceaccounts:{ns}"),
            "system:authenticated".into(),
        ],
        ..User::default()
    }
}

#[test]
fn subresources_need_their_own_rule_or_a_wildcard() {
    let pods = rule(json!({"verbs":["get"],"apiGroups":[""],"resources":["pods"]}));
    assert!(pods.allows(&res("get", "", "pods", "", "d", "p")));
    assert!(!pods.allows(&res("get", "", "pods", "status", "d", "p")));
    let star_sub = rule(json!({"verbs":["get"],"apiGroups":[""],"resources":["*/status"]}));
    assert!(star_sub.allows(&res("get", "", "pods", "status", "d", "p")));
    assert!(!star_sub.allows(&res("get", "", "pods", "", "d", "p")));
    let pods_star = rule(json!({"verbs":["get"],"apiGroups":[""],"resources":["pods/*"]}));
    assert!(!pods_star.allows(&res("get", "", "pods", "status", "d", "p")));
    let all = rule(json!({"verbs":["*"],"apiGroups":["*"],"resources":["*"]}));
    assert!(all.allows(&res("update", "apps", "deployments", "status", "", "x")));
}

#[test]
fn resource_names_never_allow_a_create_without_a_name() {
    let named = rule(
        json!({"verbs":["create","get"],"apiGroups":[""],"resources":["configmaps"],"resourceNames":["x"]}),
    );
    assert!(named.allows(&res("get", "", "configmaps", "", "d", "x")));
    assert!(!named.allows(&res("get", "", "configmaps", "", "d", "y")));
    assert!(!named.allows(&res("create", "", "configmaps", "", "d", "")));
}

#[test]
fn a_requested_star_verb_matches_only_a_star_rule() {
    let get = rule(json!({"verbs":["get"],"apiGroups":[""],"resources":["pods"]}));
    assert!(!get.allows(&res("*", "", "pods", "", "d", "")));
}

#[test]
fn non_resource_urls_match_exactly_or_by_prefix() {
    let r = rule(json!({"verbs":["get"],"nonResourceURLs":["/healthz/*","/version"]}));
    let path = |p: &str| Attributes {
        verb: "get".into(),
        target: Target::NonResource { path: p.into() },
    };
    assert!(r.allows(&path("/healthz/etcd")));
    assert!(!r.allows(&path("/healthz")));
    assert!(r.allows(&path("/version")));
    assert!(!r.allows(&path("/version/")));
}

#[test]
fn role_bindings_grant_only_in_their_namespace_and_name_their_binding() {
    let snap = Snapshot::from_objects(
        &[json!({"metadata":{"name":"r","namespace":"demo"},
                 "rules":[{"verbs":["list"],"apiGroups":[""],"resources":["configmaps"]}]})],
        &[],
        &[json!({"metadata":{"name":"b","namespace":"demo"},
                 "roleRef":{"kind":"Role","name":"r"},
                 "subjects":[{"kind":"ServiceAccount","name":"op"}]})],
        &[],
    );
    let user = sa("demo", "op");
    let d = snap.authorize(&user, &res("list", "", "configmaps", "", "demo", ""));
    assert_eq!(
        d,
        Decision {
            allowed: true,
            reason:
                r#"RBAC: allowed by RoleBinding "b/demo" of Role "r" to ServiceAccount "op/demo""#
                    .into()
        }
    );
    assert!(
        !snap
            .authorize(&user, &res("list", "", "configmaps", "", "other", ""))
            .allowed
    );
    assert!(
        !snap
            .authorize(&user, &res("list", "", "configmaps", "", "", ""))
            .allowed
    );
    assert!(
        !snap
            .authorize(
                &sa("other", "op"),
                &res("list", "", "configmaps", "", "demo", "")
            )
            .allowed
    );
}

#[test]
fn a_missing_role_is_reported_in_the_denial() {
    let snap = Snapshot::from_objects(
        &[],
        &[],
        &[json!({"metadata":{"name":"b","namespace":"demo"},
                 "roleRef":{"kind":"ClusterRole","name":"gone"},
                 "subjects":[{"kind":"User","name":"alice"}]})],
        &[json!({"metadata":{"name":"c"},
                 "roleRef":{"kind":"ClusterRole","name":"gone2"},
                 "subjects":[{"kind":"Group","name":"devs"}]})],
    );
    let alice = User {
        name: "alice".into(),
        groups: vec!["devs".into()],
        ..User::default()
    };
    let d = snap.authorize(&alice, &res("get", "", "pods", "", "demo", "p"));
    assert_eq!(
        d.reason,
        r#"RBAC: [clusterrole.rbac.authorization.k8s.io "gone2" not found, clusterrole.rbac.authorization.k8s.io "gone" not found]"#
    );
}

#[test]
fn forbidden_reasons_follow_kubernetes_wording() {
    assert_eq!(
        res("update", "apps", "deployments", "status", "demo", "web").forbidden_reason("alice"),
        r#"User "alice" cannot update resource "deployments/status" in API group "apps" in the namespace "demo""#
    );
    assert_eq!(
        res("list", "", "configmaps", "", "", "").forbidden_reason("alice"),
        r#"User "alice" cannot list resource "configmaps" in API group "" at the cluster scope"#
    );
}
