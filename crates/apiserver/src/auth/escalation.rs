//! Escalation prevention (spec §18.4): a user who is not in `system:masters` may only write a
//! Role or binding that grants permissions they already hold, unless RBAC gives them the
//! `escalate` (roles) or `bind` (bindings) verb.
//!
//! [`missing_rules`] breaks the requested rules into single permissions (one verb, group,
//! resource, name or URL each) and keeps those no held rule covers; [`escalation_message`]
//! compacts and prints them as Kubernetes does.

use super::rbac::{PolicyRule, quote};

fn one(v: &str) -> Vec<String> {
    vec![v.to_string()]
}

/// Every single permission `rule` grants.
fn breakdown(rule: &PolicyRule) -> Vec<PolicyRule> {
    let mut out = Vec::new();
    for group in &rule.api_groups {
        for resource in &rule.resources {
            let names: Vec<Option<&String>> = if rule.resource_names.is_empty() {
                vec![None]
            } else {
                rule.resource_names.iter().map(Some).collect()
            };
            for name in names {
                for verb in &rule.verbs {
                    out.push(PolicyRule {
                        verbs: one(verb),
                        api_groups: one(group),
                        resources: one(resource),
                        resource_names: name.map(|n| one(n)).unwrap_or_default(),
                        non_resource_urls: Vec::new(),
                    });
                }
            }
        }
    }
    for url in &rule.non_resource_urls {
        for verb in &rule.verbs {
            out.push(PolicyRule {
                verbs: one(verb),
                non_resource_urls: one(url),
                ..PolicyRule::default()
            });
        }
    }
    out
}

fn has_or_star(list: &[String], want: &str) -> bool {
    list.iter().any(|v| v == "*" || v == want)
}

fn resource_covered(owner: &[String], resource: &str) -> bool {
    if has_or_star(owner, resource) {
        return true;
    }
    // `*/sub` held covers `<res>/sub` requested.
    resource
        .split_once('/')
        .is_some_and(|(_, sub)| owner.iter().any(|o| *o == format!("*/{sub}")))
}

/// Whether held rule `owner` covers the single permission `atom`.
fn covers(owner: &PolicyRule, atom: &PolicyRule) -> bool {
    let verb = &atom.verbs[0];
    if !has_or_star(&owner.verbs, verb) {
        return false;
    }
    if let Some(url) = atom.non_resource_urls.first() {
        return owner.non_resource_urls.iter().any(|o| {
            o == "*" || o == url || o.strip_suffix('*').is_some_and(|p| url.starts_with(p))
        });
    }
    has_or_star(&owner.api_groups, &atom.api_groups[0])
        && resource_covered(&owner.resources, &atom.resources[0])
        && (owner.resource_names.is_empty()
            || atom
                .resource_names
                .first()
                .is_some_and(|n| owner.resource_names.contains(n)))
}

/// The single permissions of `requested` that no rule of `held` covers.
pub fn missing_rules(held: &[PolicyRule], requested: &[PolicyRule]) -> Vec<PolicyRule> {
    requested
        .iter()
        .flat_map(breakdown)
        .filter(|atom| !held.iter().any(|owner| covers(owner, atom)))
        .collect()
}

fn go_strings(list: &[String]) -> String {
    let items: Vec<String> = list.iter().map(|s| quote(s)).collect();
    format!("[{}]", items.join(" "))
}

/// `{APIGroups:["apps"], Resources:["deployments"], Verbs:["get" "list"]}`.
fn compact_string(rule: &PolicyRule) -> String {
    let mut parts = Vec::new();
    for (label, list) in [
        ("APIGroups", &rule.api_groups),
        ("Resources", &rule.resources),
        ("NonResourceURLs", &rule.non_resource_urls),
        ("ResourceNames", &rule.resource_names),
        ("Verbs", &rule.verbs),
    ] {
        if !list.is_empty() {
            parts.push(format!("{label}:{}", go_strings(list)));
        }
    }
    format!("{{{}}}", parts.join(", "))
}

/// Merges single permissions that differ only in their verb.
fn compact(atoms: &[PolicyRule]) -> Vec<PolicyRule> {
    let mut out: Vec<PolicyRule> = Vec::new();
    for atom in atoms {
        let same = out.iter_mut().find(|r| {
            r.api_groups == atom.api_groups
                && r.resources == atom.resources
                && r.resource_names == atom.resource_names
                && r.non_resource_urls == atom.non_resource_urls
        });
        match same {
            Some(r) => {
                for v in &atom.verbs {
                    if !r.verbs.contains(v) {
                        r.verbs.push(v.clone());
                    }
                }
            }
            None => out.push(atom.clone()),
        }
    }
    out
}

/// The body of the 403 for an attempt to grant `missing` (after `… is forbidden: `).
pub fn escalation_message(
    user: &str,
    groups: &[String],
    missing: &[PolicyRule],
    resolution_errors: &[String],
) -> String {
    let mut lines: Vec<String> = compact(missing).iter().map(compact_string).collect();
    lines.sort();
    let mut msg = format!(
        "user {} (groups={}) is attempting to grant RBAC permissions not currently held:\n{}",
        quote(user),
        go_strings(groups),
        lines.join("\n")
    );
    if !resolution_errors.is_empty() {
        msg.push_str(&format!(
            "; resolution errors: [{}]",
            resolution_errors.join(" ")
        ));
    }
    msg
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn rules(v: serde_json::Value) -> Vec<PolicyRule> {
        serde_json::from_value(v).expect("rules")
    }

    #[test]
    fn held_rules_cover_what_they_name_and_a_star_only_by_a_star() {
        let held = rules(
            json!([{"apiGroups": [""], "resources": ["pods", "*/status"], "verbs": ["get", "list"]}]),
        );
        let asked = rules(
            json!([{"apiGroups": [""], "resources": ["pods", "services/status"], "verbs": ["get"]}]),
        );
        assert!(missing_rules(&held, &asked).is_empty());
        let star = rules(json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["*"]}]));
        assert_eq!(missing_rules(&held, &star).len(), 1);
    }

    #[test]
    fn resource_names_held_cover_only_those_names() {
        let held = rules(
            json!([{"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["x"], "verbs": ["get"]}]),
        );
        let named = rules(
            json!([{"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["x"], "verbs": ["get"]}]),
        );
        let all =
            rules(json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]));
        assert!(missing_rules(&held, &named).is_empty());
        assert_eq!(missing_rules(&held, &all).len(), 1);
    }

    #[test]
    fn the_message_lists_compacted_missing_rules_like_kubernetes() {
        let asked =
            rules(json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["delete", "get"]}]));
        let missing = missing_rules(&[], &asked);
        let groups = vec![
            "system:serviceaccounts".to_string(),
            "system:serviceaccounts:rbac".to_string(),
            "system:authenticated".to_string(),
        ];
        assert_eq!(
            escalation_message("system:serviceaccount:rbac:privesc", &groups, &missing, &[]),
            "user \"system:serviceaccount:rbac:privesc\" (groups=[\"system:serviceaccounts\" \"system:serviceaccounts:rbac\" \"system:authenticated\"]) is attempting to grant RBAC permissions not currently held:\n{APIGroups:[\"\"], Resources:[\"pods\"], Verbs:[\"delete\" \"get\"]}"
        );
    }
}
