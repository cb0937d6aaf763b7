//! The suite's result rows: one per implementation and measure (time, requests, memory, CPU,
//! idle writes), and the rows of the wide scenario.

use super::{CREATORS, Outcome, Sizes, WIDE};
use crate::operators_child::Implementation;
use crate::suite::{Row, Target};

/// The rows: each configmap-sync measure once against each peer, then the Foo rows.
pub(super) fn rows(
    sizes: &Sizes,
    concurrency: usize,
    cms: &[Outcome],
    foo_run: Option<&Outcome>,
) -> Vec<Row> {
    let mut rows = Vec::new();
    let Some((kore, peers)) = cms.split_first() else {
        return rows;
    };
    let n = sizes.syncs();
    let scenario = format!("{} ConfigMapSyncs", crate::svg::thousands(n as f64));
    let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
    type Measure<'a> = (
        String,
        &'a str,
        Box<dyn Fn(&Outcome) -> f64 + 'a>,
        Box<dyn Fn(Implementation) -> Option<Target> + 'a>,
        Box<dyn Fn(&Outcome, &Outcome) -> String + 'a>,
    );
    let measures: Vec<Measure<'_>> = vec![
        (
            format!("{scenario}: start → all copies exist, all Ready"),
            "s",
            Box::new(|o: &Outcome| o.seconds(sizes)),
            Box::new(|peer| {
                Some(Target::QuickerThanPeer(match peer {
                    Implementation::KubeRuntime => 2.0,
                    _ => 1.0,
                }))
            }),
            Box::new(move |k: &Outcome, p: &Outcome| {
                format!(
                    "{} sources × {} destination namespaces, one destination each; all {n} \
                     created at once by {CREATORS} clients ({:.1} s) before the operator starts; \
                     {concurrency} reconciles at once in every implementation.{}{}",
                    sizes.sources,
                    sizes.destinations,
                    k.created_in.as_secs_f64(),
                    k.status_note(sizes),
                    p.status_note(sizes)
                )
            }),
        ),
        (
            format!("{scenario}: writes per sync besides the finalizer"),
            "writes",
            Box::new(|o: &Outcome| {
                o.per_object(o.at_end.writes()) - o.own_writes("configmapsyncs")
            }),
            Box::new(|_| Some(Target::AtMost(2.0))),
            Box::new(|k: &Outcome, p: &Outcome| {
                format!(
                    "minimum: one create per copy + one status write. Per sync, kore: {}; {}: {}",
                    k.write_breakdown(),
                    p.implementation.label(),
                    p.write_breakdown()
                )
            }),
        ),
        (
            format!("{scenario}: finalizer writes per sync"),
            "writes",
            Box::new(|o: &Outcome| o.own_writes("configmapsyncs")),
            Box::new(|_| None),
            Box::new(|_, _| "writes to the ConfigMapSync itself (not its status)".to_owned()),
        ),
        (
            format!("{scenario}: reads (get, list) per sync"),
            "reads",
            Box::new(|o: &Outcome| o.per_object(o.at_end.reads())),
            Box::new(|_| None),
            Box::new(|k: &Outcome, p: &Outcome| {
                let watches = |o: &Outcome| o.at_end.count(|r| r.starts_with("WATCH "));
                format!(
                    "initial lists included; watch requests: kore {}, {} {}",
                    watches(k),
                    p.implementation.label(),
                    watches(p)
                )
            }),
        ),
        (
            format!(
                "{scenario}: writes in the idle {} s after",
                sizes.idle.as_secs()
            ),
            "writes",
            Box::new(|o: &Outcome| o.idle_writes() as f64),
            Box::new(|_| Some(Target::AtMost(0.0))),
            Box::new(|k: &Outcome, p: &Outcome| {
                format!(
                    "nothing changes after convergence; writes by kore: {}; by {}: {}",
                    k.idle_breakdown(),
                    p.implementation.label(),
                    p.idle_breakdown()
                )
            }),
        ),
        (
            format!("{scenario}: operator peak RSS (VmHWM)"),
            "MiB",
            Box::new(move |o: &Outcome| mib(o.at_end.hwm_bytes)),
            Box::new(|_| None),
            Box::new(move |k: &Outcome, p: &Outcome| {
                format!(
                    "the operator's own process; VmRSS at convergence: kore {:.1} MiB, {} {:.1} MiB",
                    mib(k.at_converge.rss_bytes),
                    p.implementation.label(),
                    mib(p.at_converge.rss_bytes)
                )
            }),
        ),
        (
            format!("{scenario}: operator CPU to convergence"),
            "s",
            Box::new(|o: &Outcome| o.at_converge.cpu_seconds),
            // Issue 16: at most 0.6× kube-runtime's CPU for the same converged syncs.
            Box::new(|peer| {
                (peer == Implementation::KubeRuntime).then_some(Target::AtMostOfPeer(0.6))
            }),
            Box::new(|k: &Outcome, p: &Outcome| {
                format!(
                    "user + system of the operator's process; the server's process meanwhile: \
                     kore {:.2} s, {} {:.2} s; error answers: kore {}, {} {}",
                    k.server_seconds,
                    p.implementation.label(),
                    p.server_seconds,
                    k.at_end.errors,
                    p.implementation.label(),
                    p.at_end.errors
                )
            }),
        ),
    ];
    for (i, (measure, unit, value, target, note)) in measures.iter().enumerate() {
        // Writes in the idle period: only a round that has one (the first) measures them.
        if sizes.idle.is_zero() && measure.contains(" idle ") {
            continue;
        }
        // Only the time (the first measure) means something for a run that did not converge.
        let value = |o: &Outcome| {
            if i > 0 && o.converged.is_none() {
                f64::NAN
            } else {
                value(o)
            }
        };
        for peer in peers {
            rows.push(Row {
                measure: format!("{measure} (vs {})", peer.implementation.label()),
                kore: value(kore),
                unit: (*unit).to_owned(),
                peer: Some((peer.implementation.label().to_owned(), value(peer))),
                target: target(peer.implementation),
                note: note(kore, peer),
            });
        }
    }
    let Some(foo_run) = foo_run else {
        return rows;
    };
    let foos = format!("{} Foos", crate::svg::thousands(sizes.foos as f64));
    let row = |measure: String, kore: f64, unit: &str, note: String| Row {
        measure,
        kore: if foo_run.converged.is_some() || unit == "s" {
            kore
        } else {
            f64::NAN
        },
        unit: unit.to_owned(),
        peer: None,
        target: None,
        note,
    };
    rows.push(row(
        format!("{foos}: start → all Deployments, all statuses"),
        foo_run.seconds(sizes),
        "s",
        format!(
            "the bench plays kube-controller-manager: it sets each Deployment's \
             status.availableReplicas to its spec.replicas; done when every Foo's \
             status.availableReplicas equals its spec.replicas.{}",
            foo_run.status_note(sizes)
        ),
    ));
    rows.push(row(
        format!("{foos}: API writes per Foo"),
        foo_run.per_object(foo_run.at_end.writes()),
        "writes",
        format!("per Foo: {}", foo_run.write_breakdown()),
    ));
    rows.push(row(
        format!(
            "{foos}: writes in the idle {} s after",
            sizes.idle.as_secs()
        ),
        foo_run.idle_writes() as f64,
        "writes",
        format!(
            "nothing changes after convergence; writes: {}",
            foo_run.idle_breakdown()
        ),
    ));
    rows.push(row(
        format!("{foos}: operator peak RSS (VmHWM)"),
        mib(foo_run.at_end.hwm_bytes),
        "MiB",
        format!(
            "VmRSS at convergence {:.1} MiB; CPU to convergence {:.2} s",
            mib(foo_run.at_converge.rss_bytes),
            foo_run.at_converge.cpu_seconds
        ),
    ));
    rows
}

/// The time rows of the round with [`WIDE`] reconciles at once.
pub(super) fn wide_rows(sizes: &Sizes, wide: &[Outcome]) -> Vec<Row> {
    let Some((kore, peers)) = wide.split_first() else {
        return Vec::new();
    };
    peers
        .iter()
        .map(|peer| Row {
            measure: format!(
                "{} ConfigMapSyncs, {WIDE} at once: start → all Ready (vs {})",
                crate::svg::thousands(sizes.syncs() as f64),
                peer.implementation.label()
            ),
            kore: kore.seconds(sizes),
            unit: "s".to_owned(),
            peer: Some((peer.implementation.label().to_owned(), peer.seconds(sizes))),
            target: Some(Target::QuickerThanPeer(
                if peer.implementation == Implementation::KubeRuntime {
                    2.0
                } else {
                    1.0
                },
            )),
            note: format!(
                "a second round, fresh servers, every implementation at {WIDE}; operator CPU: \
                 kore {:.2} s, {} {:.2} s; server process CPU: kore {:.2} s, {} {:.2} s.{}{}",
                kore.at_converge.cpu_seconds,
                peer.implementation.label(),
                peer.at_converge.cpu_seconds,
                kore.server_seconds,
                peer.implementation.label(),
                peer.server_seconds,
                kore.status_note(sizes),
                peer.status_note(sizes)
            ),
        })
        .collect()
}
