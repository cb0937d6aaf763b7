//! A grouped bar chart as a standalone SVG, written by hand (no plotting dependency).

use std::fmt::Write as _;

/// One series of the chart: a name, a colour and one value per group (`None`: not measured).
pub(crate) struct Series {
    /// Legend label.
    pub(crate) name: String,
    /// CSS colour.
    pub(crate) color: &'static str,
    /// One value per group.
    pub(crate) values: Vec<Option<f64>>,
}

const WIDTH: f64 = 760.0;
const HEIGHT: f64 = 440.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 20.0;
const TOP: f64 = 60.0;
const BOTTOM: f64 = 90.0;

/// Renders `series` as bars grouped by `groups`, on a linear axis starting at zero.
pub(crate) fn bar_chart(
    title: &str,
    y_label: &str,
    groups: &[String],
    series: &[Series],
) -> String {
    let max = series
        .iter()
        .flat_map(|s| s.values.iter().flatten())
        .fold(0.0_f64, |a, &b| a.max(b));
    let step = nice_step(max / 5.0);
    let top_value = (max / step).ceil().max(1.0) * step;
    let plot_w = WIDTH - LEFT - RIGHT;
    let plot_h = HEIGHT - TOP - BOTTOM;
    let y = |v: f64| TOP + plot_h * (1.0 - v / top_value);

    let mut svg = String::new();
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="DejaVu Sans, Helvetica, Arial, sans-serif">"#
    );
    let _ = writeln!(svg, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        svg,
        r#"<text x="{}" y="28" font-size="17" text-anchor="middle" font-weight="bold">{}</text>"#,
        WIDTH / 2.0,
        escape(title)
    );

    // Grid lines and y-axis labels.
    let mut tick = 0.0;
    while tick <= top_value + step / 2.0 {
        let ty = y(tick);
        let _ = writeln!(
            svg,
            r##"<line x1="{LEFT}" y1="{ty:.1}" x2="{:.1}" y2="{ty:.1}" stroke="#ddd"/>"##,
            WIDTH - RIGHT
        );
        let _ = writeln!(
            svg,
            r#"<text x="{:.1}" y="{:.1}" font-size="12" text-anchor="end">{}</text>"#,
            LEFT - 8.0,
            ty + 4.0,
            thousands(tick)
        );
        tick += step;
    }
    let _ = writeln!(
        svg,
        r#"<text transform="translate(18 {:.1}) rotate(-90)" font-size="13" text-anchor="middle">{}</text>"#,
        TOP + plot_h / 2.0,
        escape(y_label)
    );

    // Bars.
    let group_w = plot_w / groups.len().max(1) as f64;
    let bar_w = (group_w * 0.8) / series.len().max(1) as f64;
    for (g, group) in groups.iter().enumerate() {
        let gx = LEFT + group_w * g as f64 + group_w * 0.1;
        for (s, serie) in series.iter().enumerate() {
            let x = gx + bar_w * s as f64;
            match serie.values.get(g).copied().flatten() {
                Some(v) => {
                    let top = y(v);
                    let _ = writeln!(
                        svg,
                        r#"<rect x="{:.1}" y="{top:.1}" width="{:.1}" height="{:.1}" fill="{}"/>"#,
                        x + 2.0,
                        bar_w - 4.0,
                        (TOP + plot_h - top).max(0.5),
                        serie.color
                    );
                    let _ = writeln!(
                        svg,
                        r#"<text x="{:.1}" y="{:.1}" font-size="11" text-anchor="middle">{}</text>"#,
                        x + bar_w / 2.0,
                        top - 4.0,
                        thousands(v)
                    );
                }
                None => {
                    let _ = writeln!(
                        svg,
                        r##"<text x="{:.1}" y="{:.1}" font-size="11" text-anchor="middle" fill="#888">n/a</text>"##,
                        x + bar_w / 2.0,
                        TOP + plot_h - 4.0
                    );
                }
            }
        }
        let _ = writeln!(
            svg,
            r#"<text x="{:.1}" y="{:.1}" font-size="13" text-anchor="middle">{}</text>"#,
            gx + group_w * 0.4,
            TOP + plot_h + 20.0,
            escape(group)
        );
    }
    let _ = writeln!(
        svg,
        r##"<line x1="{LEFT}" y1="{0:.1}" x2="{1:.1}" y2="{0:.1}" stroke="#333"/>"##,
        TOP + plot_h,
        WIDTH - RIGHT
    );

    // Legend.
    let legend_y = HEIGHT - 30.0;
    let mut lx = LEFT;
    for serie in series {
        let _ = writeln!(
            svg,
            r#"<rect x="{lx:.1}" y="{:.1}" width="14" height="14" fill="{}"/>"#,
            legend_y - 11.0,
            serie.color
        );
        let _ = writeln!(
            svg,
            r#"<text x="{:.1}" y="{legend_y:.1}" font-size="13">{}</text>"#,
            lx + 20.0,
            escape(&serie.name)
        );
        lx += 28.0 + 7.5 * serie.name.chars().count() as f64;
    }
    svg.push_str("</svg>\n");
    svg
}

/// The smallest of 1, 2 or 5 × 10^k that is at least `raw`.
fn nice_step(raw: f64) -> f64 {
    if raw <= 0.0 || !raw.is_finite() {
        return 1.0;
    }
    let magnitude = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * magnitude)
        .find(|&s| s >= raw)
        .unwrap_or(10.0 * magnitude)
}

/// A whole number with thousands separators: `12,345`.
pub(crate) fn thousands(v: f64) -> String {
    let digits = format!("{:.0}", v.abs());
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    if v < 0.0 && digits != "0" {
        out.insert(0, '-');
    }
    out
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thousands_are_separated() {
        assert_eq!(thousands(0.0), "0");
        assert_eq!(thousands(999.4), "999");
        assert_eq!(thousands(1000.0), "1,000");
        assert_eq!(thousands(1234567.0), "1,234,567");
        assert_eq!(thousands(-25000.0), "-25,000");
    }

    #[test]
    fn steps_are_round() {
        assert_eq!(nice_step(3.0), 5.0);
        assert_eq!(nice_step(4100.0), 5000.0);
        assert_eq!(nice_step(1500.0), 2000.0);
        assert_eq!(nice_step(0.0), 1.0);
    }

    #[test]
    fn the_chart_is_one_svg_with_a_bar_per_value() {
        let svg = bar_chart(
            "t <1>",
            "y",
            &["a".into(), "b".into()],
            &[Series {
                name: "s".into(),
                color: "red",
                values: vec![Some(10.0), None],
            }],
        );
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>\n"));
        assert_eq!(
            svg.matches(r#"fill="red""#).count(),
            2,
            "one bar and one legend key"
        );
        assert!(svg.contains("t &lt;1&gt;") && svg.contains("n/a"));
    }
}
