//! Label selectors (`metav1.LabelSelector`) evaluated against an object's labels, with the
//! meaning Kubernetes gives them: a missing selector selects nothing, an empty one selects
//! everything, and every `matchLabels` pair and `matchExpressions` requirement must hold.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

/// Whether `selector` selects an object with `labels`. An operator Kubernetes does not know
/// selects nothing (the API server refuses such selectors on write).
pub fn matches(
    selector: Option<&LabelSelector>,
    labels: Option<&BTreeMap<String, String>>,
) -> bool {
    let Some(selector) = selector else {
        return false;
    };
    let get = |key: &str| labels.and_then(|l| l.get(key));
    let labels_hold = selector
        .match_labels
        .iter()
        .flatten()
        .all(|(k, v)| get(k) == Some(v));
    labels_hold
        && selector.match_expressions.iter().flatten().all(|req| {
            let values = req.values.as_deref().unwrap_or_default();
            match req.operator.as_str() {
                "In" => get(&req.key).is_some_and(|v| values.contains(v)),
                "NotIn" => get(&req.key).is_none_or(|v| !values.contains(v)),
                "Exists" => get(&req.key).is_some(),
                "DoesNotExist" => get(&req.key).is_none(),
                _ => false,
            }
        })
}

/// Whether `selector` is present and empty, which selects every object.
pub fn selects_everything(selector: Option<&LabelSelector>) -> bool {
    selector.is_some_and(|s| {
        s.match_labels.as_ref().is_none_or(BTreeMap::is_empty)
            && s.match_expressions.as_ref().is_none_or(Vec::is_empty)
    })
}

/// Whether a map-form selector (a ReplicationController's) selects `labels`; an empty or
/// missing one selects nothing, as for ReplicationControllers.
pub fn map_matches(
    selector: Option<&BTreeMap<String, String>>,
    labels: Option<&BTreeMap<String, String>>,
) -> bool {
    match selector {
        Some(s) if !s.is_empty() => s
            .iter()
            .all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v)),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn selectors_mean_what_kubernetes_says() {
        let l = labels(&[("app", "web"), ("tier", "front")]);
        assert!(!matches(None, Some(&l)), "no selector selects nothing");
        assert!(matches(Some(&LabelSelector::default()), Some(&l)));
        assert!(selects_everything(Some(&LabelSelector::default())));
        let s = LabelSelector {
            match_labels: Some(labels(&[("app", "web")])),
            match_expressions: Some(vec![
                LabelSelectorRequirement {
                    key: "tier".into(),
                    operator: "In".into(),
                    values: Some(vec!["front".into(), "back".into()]),
                },
                LabelSelectorRequirement {
                    key: "canary".into(),
                    operator: "DoesNotExist".into(),
                    values: None,
                },
            ]),
        };
        assert!(matches(Some(&s), Some(&l)));
        assert!(!matches(Some(&s), Some(&labels(&[("app", "web")]))));
        assert!(!matches(Some(&s), None));
        assert!(map_matches(Some(&labels(&[("app", "web")])), Some(&l)));
        assert!(!map_matches(Some(&BTreeMap::new()), Some(&l)));
    }
}
