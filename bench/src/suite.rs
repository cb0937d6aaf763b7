//! Benchmark suites beyond the API server's: each measurement is a [`Row`] with kore's
//! value, the peer's value from the same run when there is a peer, and the target it is held
//! to. `--suite NAME` runs one suite and writes `bench/results/NAME.{md,json,svg}`.

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
        let ratio = |num: f64, den: f64| (den > 0.0).then(|| num / den);
        Some(match self.target? {
            Target::AtLeast(x) => self.kore >= x,
            Target::Below(x) => self.kore < x,
            Target::AtMost(x) => self.kore <= x,
            Target::FasterThanPeer(r) => ratio(self.kore, self.peer.as_ref()?.1)? >= r,
            Target::LeanerThanPeer(r) | Target::QuickerThanPeer(r) => {
                ratio(self.peer.as_ref()?.1, self.kore)? >= r
            }
        })
    }
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
    /// The measurements.
    pub(crate) rows: &'a [Row],
}

/// How far the row is from its target as a factor where 1.0 just meets it and more is better.
pub(crate) fn margin(row: &Row) -> Option<f64> {
    let peer = row.peer.as_ref().map(|p| p.1);
    let v = row.kore;
    let m = match row.target? {
        Target::AtLeast(x) => v / x,
        Target::Below(x) | Target::AtMost(x) => x / v,
        Target::FasterThanPeer(r) => v / peer? / r,
        Target::LeanerThanPeer(r) | Target::QuickerThanPeer(r) => peer? / v / r,
    };
    m.is_finite().then_some(m)
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
    let _ = writeln!(
        out,
        "| measure | kore | peer | ratio | target | result | note |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|---|---|---|");
    for row in results.rows {
        let (peer, ratio) = match &row.peer {
            Some((name, p)) => (
                format!("{} ({name})", number(*p)),
                match row.target {
                    _ if *p <= 0.0 || row.kore <= 0.0 => "n/a".into(),
                    // Memory rows: how many times leaner kore is.
                    Some(Target::LeanerThanPeer(_)) => format!("{:.2}× leaner", p / row.kore),
                    Some(Target::QuickerThanPeer(_)) => format!("{:.2}× quicker", p / row.kore),
                    _ => format!("{:.2}×", row.kore / p),
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
            Some(Target::LeanerThanPeer(r)) => format!("≥ {r}× leaner than the peer"),
            Some(Target::QuickerThanPeer(r)) => format!("≥ {r}× quicker than the peer"),
        };
        let result = match row.pass() {
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
        .filter_map(|r| margin(r).map(|m| (r, m)))
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
