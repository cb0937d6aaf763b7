//! kore's default Stages: the simulated lifecycle as data a user can read
//! (`kubectl get stages`, `kubectl get stage pod-ready -o yaml`) and replace.
//!
//! | Stage | what | native |
//! |---|---|---|
//! | `pod-create` | acknowledged: Pending, hostIP, ContainerCreating | [`Native::Create`] |
//! | `pod-ready` | running and ready, podIP | [`Native::Ready`] |
//! | `pod-complete` | a Job's pod ends Succeeded (or Failed with `kore.dev/exit-code`) | [`Native::Complete`] |
//! | `pod-exit` | a pod with `kore.dev/exit-after` ends the same way | [`Native::Complete`] |
//! | `pod-delete` | graceful deletion: containers stopped, then the pod removed | [`Native::Delete`] |
//! | `pod-container-crash` | `kore.dev/crash-count: N`: containers crash into CrashLoopBackOff | interpreted |
//! | `pod-container-restart` | ... and restart after the back-off | interpreted |
//!
//! A Stage whose name and spec are those below runs natively: the kubelet's code in
//! [`lifecycle`](crate::kubelet::lifecycle) does what its template says, without rendering
//! it (so 10,000 pods cost no template work). A native behaviour needs all of its Stages
//! unchanged; once one is edited or deleted, its Stages are interpreted like any other.

use super::{Stage, StageSpec};

/// A behaviour the kubelet has in code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Native {
    /// Acknowledge a pod (the first status write).
    Create,
    /// Run it (the second), and make containers ready after their probe's delay.
    Ready,
    /// End a Job's pod or one with `kore.dev/exit-after`.
    Complete,
    /// Stop and remove a pod being deleted.
    Delete,
}

const FILES: &[(&str, &str, Option<Native>)] = &[
    (
        "pod-create",
        include_str!("defaults/pod-create.yaml"),
        Some(Native::Create),
    ),
    (
        "pod-ready",
        include_str!("defaults/pod-ready.yaml"),
        Some(Native::Ready),
    ),
    (
        "pod-complete",
        include_str!("defaults/pod-complete.yaml"),
        Some(Native::Complete),
    ),
    (
        "pod-exit",
        include_str!("defaults/pod-exit.yaml"),
        Some(Native::Complete),
    ),
    (
        "pod-delete",
        include_str!("defaults/pod-delete.yaml"),
        Some(Native::Delete),
    ),
    (
        "pod-container-crash",
        include_str!("defaults/pod-container-crash.yaml"),
        None,
    ),
    (
        "pod-container-restart",
        include_str!("defaults/pod-container-restart.yaml"),
        None,
    ),
];

/// kore's default Stages.
pub fn stages() -> Vec<Stage> {
    FILES
        .iter()
        .map(|(name, text, _)| {
            let stage: Stage = serde_saphyr::from_str(text)
                .unwrap_or_else(|e| panic!("the default Stage {name} parses: {e}"));
            stage
        })
        .collect()
}

/// The native behaviour of the default Stage `name`, if `spec` is still kore's.
pub fn native(name: &str, spec: &StageSpec) -> Option<Native> {
    static PARSED: std::sync::OnceLock<Vec<(String, StageSpec, Option<Native>)>> =
        std::sync::OnceLock::new();
    let parsed = PARSED.get_or_init(|| {
        stages()
            .into_iter()
            .zip(FILES)
            .map(|(s, (n, _, native))| ((*n).to_string(), s.spec, *native))
            .collect()
    });
    parsed
        .iter()
        .find(|(n, s, _)| n == name && s == spec)
        .and_then(|(_, _, native)| *native)
}

/// The default Stages that express `native`.
pub fn names_of(native: Native) -> impl Iterator<Item = &'static str> {
    FILES
        .iter()
        .filter(move |(_, _, n)| *n == Some(native))
        .map(|(name, _, _)| *name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_parse_compile_and_are_recognised() {
        for stage in stages() {
            let name = stage.metadata.name.clone().expect("named");
            let compiled = super::super::engine::Compiled::new(&stage);
            assert!(compiled.is_ok(), "{name}: {:?}", compiled.err());
            let expected = FILES.iter().find(|(n, _, _)| *n == name).and_then(|f| f.2);
            assert_eq!(native(&name, &stage.spec), expected, "{name}");
            let mut changed = stage.spec.clone();
            changed.weight += 1;
            assert_eq!(native(&name, &changed), None);
        }
    }
}
