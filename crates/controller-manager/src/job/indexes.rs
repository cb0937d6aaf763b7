//! Completion indexes: the `1,3-5` form of `completedIndexes` / `failedIndexes`, and the
//! annotations an Indexed Job's pods carry (their index and, with `backoffLimitPerIndex`,
//! how often their index failed before them).

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::Pod;

/// The annotation and label holding an Indexed Job pod's index.
pub const COMPLETION_INDEX: &str = "batch.kubernetes.io/job-completion-index";
/// The annotation counting the failed pods of the index before this one (with
/// `backoffLimitPerIndex`).
pub const INDEX_FAILURE_COUNT: &str = "batch.kubernetes.io/job-index-failure-count";
/// The annotation counting the failures of the index a pod failure policy ignored.
pub const INDEX_IGNORED_FAILURE_COUNT: &str = "batch.kubernetes.io/job-index-ignored-failure-count";

fn annotation(pod: &Pod, key: &str) -> Option<i32> {
    pod.metadata.annotations.as_ref()?.get(key)?.parse().ok()
}

/// The pod's completion index, if it has a valid one.
pub fn index_of(pod: &Pod) -> Option<i32> {
    annotation(pod, COMPLETION_INDEX).filter(|i| *i >= 0)
}

/// How many failed pods of its index came before this pod (0 without the annotation).
pub(super) fn failure_count(pod: &Pod) -> i32 {
    annotation(pod, INDEX_FAILURE_COUNT).unwrap_or(0).max(0)
}

/// How many ignored failures of its index came before this pod.
pub(super) fn ignored_failure_count(pod: &Pod) -> i32 {
    annotation(pod, INDEX_IGNORED_FAILURE_COUNT)
        .unwrap_or(0)
        .max(0)
}

/// A set of indexes in the API's form: `1,3-5,7`.
pub fn format_indexes(indexes: &BTreeSet<i32>) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut iter = indexes.iter().copied().peekable();
    while let Some(start) = iter.next() {
        let mut end = start;
        while iter.peek() == Some(&(end + 1)) {
            end += 1;
            iter.next();
        }
        out.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
    }
    out.join(",")
}

/// Parses [`format_indexes`]' form; malformed parts are skipped.
pub fn parse_indexes(s: Option<&str>) -> BTreeSet<i32> {
    let mut set = BTreeSet::new();
    for part in s.unwrap_or_default().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                if let (Ok(a), Ok(b)) = (a.trim().parse::<i32>(), b.trim().parse::<i32>()) {
                    set.extend(a..=b);
                }
            }
            None => {
                if let Ok(i) = part.trim().parse() {
                    set.insert(i);
                }
            }
        }
    }
    set
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indexes_round_trip_in_the_api_form() {
        let set: BTreeSet<i32> = [0, 1, 2, 4, 6, 7].into_iter().collect();
        assert_eq!(format_indexes(&set), "0-2,4,6-7");
        assert_eq!(parse_indexes(Some("0-2,4,6-7")), set);
        assert!(parse_indexes(None).is_empty());
    }
}
