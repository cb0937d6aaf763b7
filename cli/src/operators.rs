//! The operators this binary carries, by name: their description (CRDs, RBAC, samples) and
//! how to add them to a manager.

use kore_operator::{Operator, Options};
use kore_runtime::Manager;
use kore_runtime::metrics::Metrics;

/// One operator `kore up` and `kore run` can start.
#[derive(Debug)]
pub(crate) struct Known {
    /// The name users pass to `--operators`.
    pub(crate) name: &'static str,
    /// Its description.
    pub(crate) operator: fn() -> Operator,
    /// Adds its controllers to a manager.
    pub(crate) register: fn(&mut Manager, &Metrics, &Options),
}

/// Every operator, in the order they are installed and started.
pub(crate) const KNOWN: &[Known] = &[
    Known {
        name: kore_configmap_sync::NAME,
        operator: kore_configmap_sync::operator,
        register: kore_configmap_sync::register,
    },
    Known {
        name: kore_sample_controller::NAME,
        operator: kore_sample_controller::operator,
        register: kore_sample_controller::register,
    },
];

/// The names of [`KNOWN`], comma-separated.
pub(crate) fn names() -> String {
    KNOWN.iter().map(|k| k.name).collect::<Vec<_>>().join(", ")
}

/// Parses one `--operators` value (clap splits the list at commas).
pub(crate) fn parse(name: &str) -> Result<&'static Known, String> {
    KNOWN
        .iter()
        .find(|k| k.name == name.trim())
        .ok_or_else(|| format!("unknown operator `{name}`; known operators: {}", names()))
}

/// The descriptions of every known operator.
pub(crate) fn all() -> Vec<Operator> {
    KNOWN.iter().map(|k| (k.operator)()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unknown_name_is_refused_with_the_list_of_known_ones() {
        let err = parse("nope").expect_err("unknown");
        assert!(err.contains("configmap-sync, sample-controller"), "{err}");
        assert_eq!(
            parse("sample-controller").map(|k| k.name),
            Ok("sample-controller")
        );
    }

    #[test]
    fn each_known_name_matches_its_operator() {
        for known in KNOWN {
            assert_eq!((known.operator)().name, known.name);
        }
    }
}
