//! Benchmark suites beyond the API server's: each measurement is a [`Row`] with kore's
//! value, the peer's value from the same run when there is a peer, and the target it is held
//! to. `--suite NAME` runs one suite and writes `bench/results/NAME.{md,json,svg}`.
//!
//! Honest ratios: a suite runs the measurements that have a peer several times (`--rounds`,
//! 3 by default), kore and its peer alternately, and [`combine`] folds the rounds into one
//! [`Measured`] row per measure: the median of kore's values, the median of the peer's, the
//! median of the per-round ratios with their spread (min–max), and PASS/MISS judged on that
//! median ratio (or, for an absolute target, on kore's median value).

use serde::Serialize;

/// What a row's value is held to.
#[allow(dead_code)] // each suite uses some of them
#[derive(Clone, Copy, Debug, Serialize)]
pub(crate) enum Target {
    /// kore's value must be at least this.
    AtLeast(f64),
    /// kore's value must be strictly below this.
    Below(f64),
    /// kore's value must be at most this.
    AtMost(f64),
    /// kore's value over the peer's must be at least this (throughputs).
    FasterThanPeer(f64),
    /// kore's value over the peer's must be at most this (CPU, bytes: "≤ 0.6× the peer").
    AtMostOfPeer(f64),
    /// The peer's value over kore's must be at least this (times, bytes).
    LeanerThanPeer(f64),
    /// The peer's time over kore's must be at least this (durations; printed as "quicker").
    QuickerThanPeer(f64),
}

/// One measurement.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct Row {
    /// What was measured, e.g. `workqueue items/s (1 producer, 2 workers)`.
    pub(crate) measure: String,
    /// kore's value.
    pub(crate) kore: f64,
    /// The unit of both values, e.g. `items/s`, `ms`, `bytes/object`.
    pub(crate) unit: String,
    /// The peer's name and value, measured in the same run.
    pub(crate) peer: Option<(String, f64)>,
    /// The target, if the issue sets one.
    pub(crate) target: Option<Target>,
    /// How it was measured, or anything a reader needs.
    pub(crate) note: String,
}

impl Row {
    /// Whether the row meets its target (`None` without a target or a missing peer).
    pub(crate) fn pass(&self) -> Option<bool> {
        let ratio = self
            .peer
            .as_ref()
            .and_then(|p| shown_ratio(self.target, self.kore, p.1));
        judge(self.target?, self.kore, ratio)
    }
}

/// The ratio as the table shows it for this target: peer ÷ kore for "leaner" and "quicker"
/// targets (bigger is better), kore ÷ peer otherwise; `None` when either value is not positive.
pub(crate) fn shown_ratio(target: Option<Target>, kore: f64, peer: f64) -> Option<f64> {
    if !(kore > 0.0 && peer > 0.0) {
        return None;
    }
    Some(match target {
        Some(Target::LeanerThanPeer(_) | Target::QuickerThanPeer(_)) => peer / kore,
        _ => kore / peer,
    })
}

/// Whether kore's value (or the shown ratio, for targets relative to the peer) meets the target.
fn judge(target: Target, kore: f64, ratio: Option<f64>) -> Option<bool> {
    Some(match target {
        Target::AtLeast(x) => kore >= x,
        Target::Below(x) => kore < x,
        Target::AtMost(x) => kore <= x,
        Target::FasterThanPeer(r) | Target::LeanerThanPeer(r) | Target::QuickerThanPeer(r) => {
            ratio? >= r
        }
        Target::AtMostOfPeer(r) => ratio? <= r,
    })
}

/// One round's values of a measure.
#[derive(Clone, Copy, Debug, Serialize)]
pub(crate) struct Sample {
    /// kore's value in that round.
    pub(crate) kore: f64,
    /// The peer's value in that round, measured right before or after kore's.
    pub(crate) peer: Option<f64>,
}

/// A measure over every round it ran in: the row holds the medians, `runs` every round.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct Measured {
    /// The measure with kore's and the peer's median values (the note is the first round's).
    #[serde(flatten)]
    pub(crate) row: Row,
    /// Every round's values, in the order they ran.
    pub(crate) runs: Vec<Sample>,
    /// The median of the per-round ratios (as [`shown_ratio`] orients them).
    pub(crate) ratio_median: Option<f64>,
    /// The smallest and largest per-round ratio.
    pub(crate) ratio_spread: Option<(f64, f64)>,
    /// Whether the median meets the target (`None` without a target or a peer value).
    pub(crate) pass: Option<bool>,
}

/// The median of the finite values (the mean of the middle two for an even count); NaN when
/// there is none.
pub(crate) fn median(values: impl IntoIterator<Item = f64>) -> f64 {
    let mut v: Vec<f64> = values.into_iter().filter(|x| x.is_finite()).collect();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// Folds the rows of every round into one [`Measured`] per measure, in the order the measures
/// first appeared. A measure that ran in only some rounds (one without a peer runs once) keeps
/// the samples it has.
pub(crate) fn combine(rows: Vec<Row>) -> Vec<Measured> {
    let mut grouped: Vec<(Row, Vec<Sample>)> = Vec::new();
    for row in rows {
        let sample = Sample {
            kore: row.kore,
            peer: row.peer.as_ref().map(|p| p.1),
        };
        match grouped.iter_mut().find(|(r, _)| r.measure == row.measure) {
            Some((_, samples)) => samples.push(sample),
            None => grouped.push((row, vec![sample])),
        }
    }
    grouped
        .into_iter()
        .map(|(mut row, runs)| {
            row.kore = median(runs.iter().map(|s| s.kore));
            let ratios: Vec<f64> = runs
                .iter()
                .filter_map(|s| shown_ratio(row.target, s.kore, s.peer?))
                .collect();
            if let Some((_, peer)) = row.peer.as_mut() {
                *peer = median(runs.iter().filter_map(|s| s.peer));
            }
            let ratio_median = (!ratios.is_empty()).then(|| median(ratios.iter().copied()));
            let ratio_spread = (!ratios.is_empty()).then(|| {
                ratios
                    .iter()
                    .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &r| {
                        (lo.min(r), hi.max(r))
                    })
            });
            let pass = row.target.and_then(|t| judge(t, row.kore, ratio_median));
            Measured {
                row,
                runs,
                ratio_median,
                ratio_spread,
                pass,
            }
        })
        .collect()
}

/// A suite's results as written to `NAME.json`.
#[derive(Debug, Serialize)]
pub(crate) struct SuiteResults<'a> {
    /// The suite's name.
    pub(crate) suite: &'a str,
    /// Where and on what it ran.
    pub(crate) machine: &'a crate::report::Machine,
    /// Whether sizes were reduced (`--quick`): such numbers are smoke tests, not results.
    pub(crate) quick: bool,
    /// How many times the measurements with a peer ran, kore and the peer alternately.
    pub(crate) rounds: usize,
    /// The measurements, rounds combined.
    pub(crate) rows: &'a [Measured],
}

/// How far the row is from its target as a factor where 1.0 just meets it and more is better
/// (from the median ratio for targets relative to the peer).
pub(crate) fn margin(m: &Measured) -> Option<f64> {
    let v = m.row.kore;
    let margin = match m.row.target? {
        Target::AtLeast(x) => v / x,
        Target::Below(x) | Target::AtMost(x) => x / v,
        Target::FasterThanPeer(r) | Target::LeanerThanPeer(r) | Target::QuickerThanPeer(r) => {
            m.ratio_median? / r
        }
        Target::AtMostOfPeer(r) => r / m.ratio_median?,
    };
    margin.is_finite().then_some(margin)
}

fn number(v: f64) -> String {
    if v.abs() >= 1000.0 {
        crate::svg::thousands(v)
    } else if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.3}")
    }
}

/// The suite's Markdown table.
pub(crate) fn markdown(results: &SuiteResults<'_>) -> String {
    use std::fmt::Write as _;
    let m = results.machine;
    let mut out = String::new();
    let _ = writeln!(out, "# kore benchmark suite: {}\n", results.suite);
    let _ = writeln!(
        out,
        "{} · commit {} · {} × {} · load {}{}\n",
        m.date,
        m.commit,
        m.nproc,
        m.cpu,
        m.loadavg.trim(),
        if results.quick {
            " · QUICK (reduced sizes)"
        } else {
            ""
        }
    );
    if results.rows.iter().any(|m| m.row.peer.is_some()) {
        let _ = writeln!(out, "{}\n", rounds_note(results.rounds, results.quick));
    }
    let _ = writeln!(
        out,
        "| measure | kore | peer | ratio (min–max) | target | result | note |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|---|---|---|");
    for measured in results.rows {
        let row = &measured.row;
        let (peer, ratio) = match &row.peer {
            Some((name, p)) => (
                format!("{} ({name})", number(*p)),
                match (measured.ratio_median, measured.ratio_spread) {
                    (Some(r), Some((lo, hi))) => {
                        let word = match row.target {
                            // Memory rows: how many times leaner kore is.
                            Some(Target::LeanerThanPeer(_)) => " leaner",
                            Some(Target::QuickerThanPeer(_)) => " quicker",
                            _ => "",
                        };
                        if measured.runs.len() > 1 {
                            format!(
                                "{r:.2}×{word} ({lo:.2}–{hi:.2}, {} runs)",
                                measured.runs.len()
                            )
                        } else {
                            format!("{r:.2}×{word} (1 run)")
                        }
                    }
                    _ => "n/a".into(),
                },
            ),
            None => ("—".into(), "—".into()),
        };
        let target = match row.target {
            None => "—".to_owned(),
            Some(Target::AtLeast(x)) => format!("≥ {} {}", number(x), row.unit),
            Some(Target::Below(x)) => format!("< {} {}", number(x), row.unit),
            Some(Target::AtMost(x)) => format!("≤ {} {}", number(x), row.unit),
            Some(Target::FasterThanPeer(r)) => format!("≥ {r}× the peer"),
            Some(Target::AtMostOfPeer(r)) => format!("≤ {r}× the peer"),
            Some(Target::LeanerThanPeer(r)) => format!("≥ {r}× leaner than the peer"),
            Some(Target::QuickerThanPeer(r)) => format!("≥ {r}× quicker than the peer"),
        };
        let result = match measured.pass {
            Some(true) => "PASS",
            Some(false) => "MISS",
            None => "—",
        };
        let _ = writeln!(
            out,
            "| {} | {} {} | {peer} | {ratio} | {target} | {result} | {} |",
            row.measure,
            number(row.kore),
            row.unit,
            row.note
        );
    }
    out
}

/// The suite's chart: one horizontal bar per measure with a target, its length kore's margin
/// over the target on a log scale (1.0, the dashed line, just meets it; right of it is better).
pub(crate) fn chart(results: &SuiteResults<'_>) -> String {
    use std::fmt::Write as _;
    const LABEL_W: f64 = 560.0;
    const BAR_W: f64 = 360.0;
    const ROW_H: f64 = 26.0;
    const TOP: f64 = 56.0;
    // The axis spans margins 1/16 .. 16 on a log2 scale; bars are clamped to it.
    let x = |m: f64| LABEL_W + BAR_W * ((m.log2().clamp(-4.0, 4.0) + 4.0) / 8.0);
    let rows: Vec<(&Row, f64)> = results
        .rows
        .iter()
        .filter_map(|r| margin(r).map(|m| (&r.row, m)))
        .collect();
    let width = LABEL_W + BAR_W + 90.0;
    let height = TOP + ROW_H * rows.len() as f64 + 40.0;
    let mut svg = String::new();
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="DejaVu Sans, Helvetica, Arial, sans-serif" font-size="12">"#
    );
    let _ = writeln!(svg, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        svg,
        r#"<text x="{}" y="24" font-size="16" text-anchor="middle" font-weight="bold">kore {} suite: kore ÷ target (log scale; ≥ 1 meets it)</text>"#,
        width / 2.0,
        escape(results.suite)
    );
    for tick in [0.0625, 0.25, 1.0, 4.0, 16.0] {
        let tx = x(tick);
        let dash = if tick == 1.0 {
            r##" stroke-dasharray="4 3" stroke="#333""##
        } else {
            r##" stroke="#ddd""##
        };
        let _ = writeln!(
            svg,
            r#"<line x1="{tx:.1}" y1="{}" x2="{tx:.1}" y2="{:.1}"{dash}/>"#,
            TOP - 8.0,
            TOP + ROW_H * rows.len() as f64
        );
        let _ = writeln!(
            svg,
            r##"<text x="{tx:.1}" y="{:.1}" text-anchor="middle" fill="#555">{tick}×</text>"##,
            TOP + ROW_H * rows.len() as f64 + 16.0
        );
    }
    for (i, (row, m)) in rows.iter().enumerate() {
        let y = TOP + ROW_H * i as f64;
        let color = if *m >= 1.0 { "#2f855a" } else { "#c53030" };
        let (a, b) = (x(1.0).min(x(*m)), x(1.0).max(x(*m)));
        let _ = writeln!(
            svg,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"#,
            LABEL_W - 8.0,
            y + 16.0,
            escape(&row.measure)
        );
        let _ = writeln!(
            svg,
            r#"<rect x="{a:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="{color}"/>"#,
            y + 5.0,
            (b - a).max(1.0),
            ROW_H - 10.0
        );
        let _ = writeln!(
            svg,
            r#"<text x="{:.1}" y="{:.1}">{m:.2}×</text>"#,
            x(1.0).max(x(*m)) + 6.0,
            y + 16.0
        );
    }
    let _ = writeln!(svg, "</svg>");
    svg
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// The line above the table that says how the ratios were measured.
pub(crate) fn rounds_note(rounds: usize, quick: bool) -> String {
    if rounds > 1 {
        format!(
            "Rows with a peer: kore and the peer ran alternately, {rounds} times; values are \
             the medians, the ratio is the median of the {rounds} per-run ratios with their \
             spread (min–max), and PASS/MISS judges the median."
        )
    } else {
        format!(
            "Rows with a peer: ONE run each{} (not alternated: `--rounds 3` or more for \
             results); PASS/MISS judges that single run.",
            if quick { ", as `--quick` does" } else { "" }
        )
    }
}

/// Writes `NAME.md`, `NAME.json` and `NAME.svg` under `out` and prints the table.
pub(crate) fn write(out: &std::path::Path, results: &SuiteResults<'_>) -> anyhow::Result<()> {
    use anyhow::Context as _;
    let md = markdown(results);
    print!("{md}");
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let name = results.suite;
    std::fs::write(out.join(format!("{name}.md")), &md)?;
    std::fs::write(
        out.join(format!("{name}.json")),
        serde_json::to_string_pretty(results)?,
    )?;
    std::fs::write(out.join(format!("{name}.svg")), chart(results))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(measure: &str, kore: f64, peer: Option<f64>, target: Option<Target>) -> Row {
        Row {
            measure: measure.to_owned(),
            kore,
            unit: "s".to_owned(),
            peer: peer.map(|p| ("peer".to_owned(), p)),
            target,
            note: String::new(),
        }
    }

    #[test]
    fn rounds_fold_into_medians_and_the_median_ratio_is_judged() {
        let quicker = Some(Target::QuickerThanPeer(2.0));
        let rows = vec![
            row("time", 1.0, Some(2.5), quicker),
            row("writes", 2.0, None, Some(Target::AtMost(2.0))),
            row("time", 1.0, Some(1.5), quicker),
            row("time", 1.0, Some(2.1), quicker),
        ];
        let measured = combine(rows);
        assert_eq!(measured.len(), 2);
        let time = &measured[0];
        assert_eq!(time.row.measure, "time");
        assert_eq!(time.runs.len(), 3);
        assert_eq!(time.row.peer.as_ref().map(|p| p.1), Some(2.1));
        assert_eq!(time.ratio_median, Some(2.1));
        assert_eq!(time.ratio_spread, Some((1.5, 2.5)));
        // One round of three missed; the median passes.
        assert_eq!(time.pass, Some(true));
        let writes = &measured[1];
        assert_eq!(writes.runs.len(), 1);
        assert_eq!(writes.pass, Some(true));
        assert_eq!(writes.ratio_median, None);
    }

    #[test]
    fn a_ceiling_relative_to_the_peer_is_judged_on_kore_over_the_peer() {
        let target = Some(Target::AtMostOfPeer(0.6));
        let measured = combine(vec![
            row("cpu", 1.0, Some(1.5), target),
            row("cpu", 1.2, Some(1.5), target),
            row("cpu", 0.8, Some(1.5), target),
        ]);
        let cpu = &measured[0];
        assert_eq!(cpu.row.kore, 1.0);
        assert!((cpu.ratio_median.expect("has a peer") - 1.0 / 1.5).abs() < 1e-9);
        assert_eq!(cpu.pass, Some(false));
        assert!(margin(cpu).expect("judged") < 1.0);
    }

    #[test]
    fn runs_that_measured_nothing_are_left_out_of_the_median() {
        assert_eq!(median([3.0, f64::NAN, 1.0]), 2.0);
        assert!(median([f64::NAN]).is_nan());
        assert_eq!(median([4.0, 1.0, 9.0]), 4.0);
    }

    #[test]
    fn the_table_shows_the_median_ratio_and_its_spread() {
        let machine = crate::report::Machine {
            date: "d".into(),
            commit: "c".into(),
            nproc: 2,
            cpu: "cpu".into(),
            memory_bytes: 0,
            kernel: "k".into(),
            scratch_fs: "ext4".into(),
            fdatasync_ms: None,
            loadavg: "0".into(),
        };
        let quicker = Some(Target::QuickerThanPeer(2.0));
        let rows = combine(vec![
            row("time", 1.0, Some(2.5), quicker),
            row("time", 1.0, Some(1.5), quicker),
            row("time", 1.0, Some(2.1), quicker),
        ]);
        let md = markdown(&SuiteResults {
            suite: "t",
            machine: &machine,
            quick: false,
            rounds: 3,
            rows: &rows,
        });
        assert!(md.contains("2.10× quicker (1.50–2.50, 3 runs)"), "{md}");
        assert!(md.contains("| PASS |"), "{md}");
        assert!(md.contains("alternately, 3 times"), "{md}");
    }
}
