//! `ampd-bench plot`: JSON results in, an SVG chart out, drawn like the papers' figures: the
//! swept variable on x (logarithmic when it spans decades, as file sizes do), one line per
//! server, a legend, labelled axes and a title, so the chart reads without the text around it.
//! The y axis of a line chart is logarithmic too when the values span two decades or more (a
//! data-set sweep that falls from cached to disk-bound rates would otherwise flatten every
//! disk-bound point onto the axis). With nothing swept (a SPECweb96 or WebStone run), one bar
//! per server, on a linear axis, with a legend of bars.
//!
//! Every chart can carry a subtitle under its title naming the conditions (what ran, the
//! machine, the commit), so a chart copied out of its document still says what it measured.
//! Tick labels follow one scheme on every axis: sizes in binary units (64 B, 1 KiB, 10 MiB),
//! any other number with a k or M suffix from a thousand up (64, 1k, 10k, 1.5M), never a mix of
//! 1000 and 10k on one axis.
//!
//! Owns: chart layout and SVG text. Must not touch: measuring. Hand-written SVG keeps the
//! dependency list short; every string from the results is XML-escaped.

use std::fmt::Write as _;

use crate::report::{metric, metric_label, Report};

const WIDTH: f64 = 760.0;
const HEIGHT: f64 = 460.0;
const LEFT: f64 = 86.0;
const RIGHT: f64 = 170.0;
/// Room above the plot for the title and up to two subtitle lines.
const TOP: f64 = 76.0;
/// Subtitle lines are broken at a ` | ` once they pass this many characters (about the width
/// of the chart at the subtitle's font size).
const SUBTITLE_LINE: usize = 100;
const BOTTOM: f64 = 66.0;
/// Colour-blind-safe palette (Okabe and Ito), then markers tell lines apart in grey print too.
const COLOURS: [&str; 8] = [
    "#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442",
];

struct Series {
    name: String,
    /// The server's place among the servers: its colour and marker.
    server: usize,
    /// A second metric of the same server (p99 beside the median): dashed, or a paler bar.
    dashed: bool,
    /// (x, label, y), sorted by x.
    points: Vec<(f64, String, f64)>,
}

impl Series {
    fn colour(&self) -> &'static str {
        COLOURS[self.server % COLOURS.len()]
    }

    /// The SVG attribute that tells a second metric's line from the first's.
    fn style(&self) -> &'static str {
        if self.dashed {
            r#" stroke-dasharray="7 4""#
        } else {
            ""
        }
    }

    /// The same for a bar: paler.
    fn fill_style(&self) -> &'static str {
        if self.dashed {
            r#" fill-opacity="0.55""#
        } else {
            ""
        }
    }
}

/// Renders the chart. `metric_names` is one metric, or several separated by commas (the median
/// and the 99th percentile latency): each server keeps its colour, the second metric's line is
/// dashed, and the legend names both.
///
/// # Errors
/// An unknown metric, or results with nothing to draw.
pub fn render(
    reports: &[Report],
    metric_names: &str,
    title: Option<&str>,
    subtitle: Option<&str>,
) -> Result<String, String> {
    let metrics: Vec<&str> = metric_names.split(',').map(str::trim).collect();
    let mut servers: Vec<&str> = Vec::new();
    let mut series: Vec<Series> = Vec::new();
    for report in reports {
        for point in &report.points {
            let server = match servers.iter().position(|name| *name == point.target) {
                Some(server) => server,
                None => {
                    servers.push(&point.target);
                    servers.len() - 1
                }
            };
            for (index, metric_name) in metrics.iter().enumerate() {
                let y = metric(&point.median, metric_name)?;
                let x = point.x.unwrap_or(0.0);
                let name = if metrics.len() == 1 {
                    point.target.clone()
                } else {
                    format!("{}, {}", point.target, metric_short_label(metric_name))
                };
                match series.iter_mut().find(|series| series.name == name) {
                    Some(series) => series.points.push((x, point.label.clone(), y)),
                    None => series.push(Series {
                        name,
                        server,
                        dashed: index > 0,
                        points: vec![(x, point.label.clone(), y)],
                    }),
                }
            }
        }
    }
    if series.is_empty() {
        return Err("the results have no points to plot".into());
    }
    for series in &mut series {
        series.points.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    let first = &reports[0];
    let y_label = axis_label(&metrics);
    let default_title = format!("{}: {y_label}", first.workload);
    let title = title.unwrap_or(&default_title);
    let swept = reports.iter().find_map(|report| report.swept.clone());
    let mut svg = String::new();
    let _ = write!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="Helvetica, Arial, sans-serif" font-size="13">
<rect width="100%" height="100%" fill="white"/>
<text x="{}" y="26" text-anchor="middle" font-size="17" font-weight="bold">{}</text>
"#,
        WIDTH / 2.0,
        escape(title)
    );
    for (index, line) in subtitle_lines(subtitle.unwrap_or_default())
        .iter()
        .enumerate()
    {
        let _ = writeln!(
            svg,
            r##"<text class="subtitle" x="{}" y="{}" text-anchor="middle" font-size="12" fill="#444444">{}</text>"##,
            WIDTH / 2.0,
            46.0 + 15.0 * index as f64,
            escape(line)
        );
    }
    let values: Vec<f64> = series
        .iter()
        .flat_map(|series| series.points.iter().map(|point| point.2))
        .collect();
    let axis = YAxis::fit(&values, swept.is_some());
    draw_y_axis(&mut svg, &axis, &y_label);
    match &swept {
        Some(swept) => draw_lines(&mut svg, &series, &axis, swept),
        None => draw_bars(&mut svg, &series, &axis),
    }
    draw_legend(&mut svg, &series, swept.is_none());
    svg.push_str("</svg>\n");
    Ok(svg)
}

fn plot_height() -> f64 {
    HEIGHT - TOP - BOTTOM
}

fn plot_width() -> f64 {
    WIDTH - LEFT - RIGHT
}

/// The y axis: from 0 to a round maximum, or logarithmic between powers of ten.
enum YAxis {
    Linear {
        max: f64,
    },
    /// Exponents of the powers of ten at the bottom and the top.
    Logarithmic {
        low: i32,
        high: i32,
    },
}

impl YAxis {
    fn fit(values: &[f64], lines: bool) -> YAxis {
        let high = values.iter().copied().fold(0.0, f64::max);
        let low = values.iter().copied().fold(f64::INFINITY, f64::min);
        if lines && low > 0.0 && high / low >= 100.0 {
            let low = low.log10().floor() as i32;
            let high = (high.log10().ceil() as i32).max(low + 1);
            YAxis::Logarithmic { low, high }
        } else {
            YAxis::Linear {
                max: nice_ceiling(high),
            }
        }
    }

    fn position(&self, value: f64) -> f64 {
        let fraction = match *self {
            YAxis::Linear { max } => value / max,
            YAxis::Logarithmic { low, high } => {
                (value.max(f64::MIN_POSITIVE).log10() - f64::from(low)) / f64::from(high - low)
            }
        };
        TOP + plot_height() * (1.0 - fraction)
    }

    fn ticks(&self) -> Vec<f64> {
        match *self {
            YAxis::Linear { max } => (0..=5).map(|tick| max * f64::from(tick) / 5.0).collect(),
            YAxis::Logarithmic { low, high } => {
                (low..=high).map(|exponent| 10f64.powi(exponent)).collect()
            }
        }
    }
}

fn draw_y_axis(svg: &mut String, axis: &YAxis, label: &str) {
    let label = match axis {
        YAxis::Linear { .. } => label.to_owned(),
        YAxis::Logarithmic { .. } => format!("{label}, logarithmic scale"),
    };
    for value in axis.ticks() {
        let y = axis.position(value);
        let _ = writeln!(
            svg,
            r##"<line x1="{LEFT}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#dddddd"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
            WIDTH - RIGHT,
            LEFT - 8.0,
            y + 4.0,
            short_number(value)
        );
    }
    let middle = TOP + plot_height() / 2.0;
    let _ = writeln!(
        svg,
        r##"<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{:.1}" stroke="#333333"/>
<text transform="translate(22 {middle:.1}) rotate(-90)" text-anchor="middle" font-size="14">{}</text>"##,
        TOP + plot_height(),
        escape(&label)
    );
}

fn draw_lines(svg: &mut String, series: &[Series], y_axis: &YAxis, swept: &str) {
    let xs: Vec<f64> = series
        .iter()
        .flat_map(|series| series.points.iter().map(|point| point.0))
        .collect();
    let low = xs.iter().copied().fold(f64::INFINITY, f64::min);
    let high = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let logarithmic = low > 0.0 && high / low >= 100.0;
    let scale = |x: f64| -> f64 {
        let fraction = if high <= low {
            0.5
        } else if logarithmic {
            (x.ln() - low.ln()) / (high.ln() - low.ln())
        } else {
            (x - low) / (high - low)
        };
        LEFT + 20.0 + (plot_width() - 40.0) * fraction
    };
    let bottom = TOP + plot_height();
    let _ = writeln!(
        svg,
        r##"<line x1="{LEFT}" y1="{bottom:.1}" x2="{:.1}" y2="{bottom:.1}" stroke="#333333"/>"##,
        WIDTH - RIGHT
    );
    // One tick per measured point: sizes in binary units (64 B, 1 KiB, 10 MiB), numbers in the
    // y axis's scheme (64, 1k, 10k) whether the command line wrote 1000 or 1k, and a label in
    // words ("64 clients") as written.
    // A tick too close to the last labelled one keeps its mark but not its label.
    let sizes = swept.contains("bytes");
    let mut ticks: Vec<(f64, String)> = Vec::new();
    for (x, label, _) in series.iter().flat_map(|series| &series.points) {
        if !ticks
            .iter()
            .any(|(seen, _)| (seen - x).abs() < f64::EPSILON)
        {
            ticks.push((
                *x,
                if sizes {
                    size_label(*x)
                } else if is_written_number(label) {
                    short_number(*x)
                } else {
                    label.clone()
                },
            ));
        }
    }
    ticks.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut last_label = f64::NEG_INFINITY;
    for (x, label) in ticks {
        let position = scale(x);
        let _ = write!(
            svg,
            r##"<line x1="{position:.1}" y1="{bottom:.1}" x2="{position:.1}" y2="{:.1}" stroke="#333333"/>"##,
            bottom + 5.0,
        );
        if position - last_label >= 64.0 {
            last_label = position;
            let _ = write!(
                svg,
                r#"<text x="{position:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
                bottom + 20.0,
                escape(&label)
            );
        }
        svg.push('\n');
    }
    let axis = if logarithmic {
        format!("{swept}, logarithmic scale")
    } else {
        swept.to_owned()
    };
    let _ = writeln!(
        svg,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle" font-size="14">{}</text>"#,
        LEFT + plot_width() / 2.0,
        HEIGHT - 18.0,
        escape(&axis)
    );
    for series in series {
        let (colour, style) = (series.colour(), series.style());
        let path: Vec<String> = series
            .points
            .iter()
            .map(|(x, _, y)| format!("{:.1},{:.1}", scale(*x), y_axis.position(*y)))
            .collect();
        let _ = writeln!(
            svg,
            r#"<polyline points="{}" fill="none" stroke="{colour}" stroke-width="2.5"{style}/>"#,
            path.join(" ")
        );
        for (x, _, y) in &series.points {
            let _ = writeln!(
                svg,
                "{}",
                marker(series.server, scale(*x), y_axis.position(*y), colour)
            );
        }
    }
}

fn draw_bars(svg: &mut String, series: &[Series], axis: &YAxis) {
    let bottom = TOP + plot_height();
    let slot = plot_width() / series.len() as f64;
    let _ = writeln!(
        svg,
        r##"<line x1="{LEFT}" y1="{bottom:.1}" x2="{:.1}" y2="{bottom:.1}" stroke="#333333"/>"##,
        WIDTH - RIGHT
    );
    for (index, series) in series.iter().enumerate() {
        let value = series.points.first().map_or(0.0, |point| point.2);
        let x = LEFT + slot * index as f64 + slot * 0.2;
        let y = axis.position(value);
        let colour = series.colour();
        let opacity = series.fill_style();
        let _ = writeln!(
            svg,
            r#"<rect class="bar" x="{x:.1}" y="{y:.1}" width="{:.1}" height="{:.1}" fill="{colour}"{opacity}/><text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text><text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            slot * 0.6,
            bottom - y,
            x + slot * 0.3,
            y - 6.0,
            short_number(value),
            x + slot * 0.3,
            bottom + 20.0,
            escape(&series.name)
        );
    }
    let _ = writeln!(
        svg,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle" font-size="14">server</text>"#,
        LEFT + plot_width() / 2.0,
        HEIGHT - 18.0
    );
}

/// Keys drawn like the series: a filled square for a bar, a line and its marker for a line.
fn draw_legend(svg: &mut String, series: &[Series], bars: bool) {
    let x = WIDTH - RIGHT + 18.0;
    let _ = writeln!(
        svg,
        r#"<text x="{x:.1}" y="{:.1}" font-weight="bold">server</text>"#,
        TOP + 4.0
    );
    for (index, series) in series.iter().enumerate() {
        let y = TOP + 26.0 + 24.0 * index as f64;
        let (colour, style) = (series.colour(), series.style());
        let key = if bars {
            format!(
                r#"<rect class="key" x="{:.1}" y="{:.1}" width="14" height="14" fill="{colour}"{}/>"#,
                x + 8.0,
                y - 7.0,
                series.fill_style()
            )
        } else {
            format!(
                r#"<line class="key" x1="{x:.1}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="{colour}" stroke-width="2.5"{style}/>{}"#,
                x + 30.0,
                marker(series.server, x + 15.0, y, colour)
            )
        };
        let _ = writeln!(
            svg,
            r#"{key}<text x="{:.1}" y="{:.1}">{}</text>"#,
            x + 38.0,
            y + 4.5,
            escape(&series.name)
        );
    }
}

/// The y axis's name: the metric's, or for several latencies "latency (ms)".
fn axis_label(metrics: &[&str]) -> String {
    match metrics {
        [one] => metric_label(one).to_owned(),
        _ if metrics.iter().all(|name| name.starts_with("latency_")) => "latency (ms)".into(),
        _ => metrics
            .iter()
            .map(|name| metric_label(name))
            .collect::<Vec<_>>()
            .join(", "),
    }
}

/// What tells one metric from another in a legend: `p50`, `p99`, `max`, or the metric's name.
fn metric_short_label(name: &str) -> &str {
    name.strip_prefix("latency_")
        .or_else(|| name.strip_prefix("first_byte_"))
        .and_then(|rest| rest.strip_suffix("_ms"))
        .unwrap_or(name)
}

/// A different marker shape per series: circle, square, triangle, diamond. Past the eighth
/// series the colours repeat, so the shapes shift by one: series N and N+8 never look alike.
fn marker(index: usize, x: f64, y: f64, colour: &str) -> String {
    match (index + index / COLOURS.len()) % 4 {
        0 => format!(r#"<circle cx="{x:.1}" cy="{y:.1}" r="4.5" fill="{colour}"/>"#),
        1 => format!(
            r#"<rect x="{:.1}" y="{:.1}" width="8" height="8" fill="{colour}"/>"#,
            x - 4.0,
            y - 4.0
        ),
        2 => format!(
            r#"<polygon points="{x:.1},{:.1} {:.1},{:.1} {:.1},{:.1}" fill="{colour}"/>"#,
            y - 5.5,
            x - 5.0,
            y + 4.0,
            x + 5.0,
            y + 4.0
        ),
        _ => format!(
            r#"<polygon points="{x:.1},{:.1} {:.1},{y:.1} {x:.1},{:.1} {:.1},{y:.1}" fill="{colour}"/>"#,
            y - 5.5,
            x + 5.5,
            y + 5.5,
            x - 5.5
        ),
    }
}

/// The smallest 1, 2, 2.5 or 5 × 10^n at or above `value`, so ticks land on round numbers.
fn nice_ceiling(value: f64) -> f64 {
    if value <= 0.0 || !value.is_finite() {
        return 1.0;
    }
    let magnitude = 10f64.powf(value.log10().floor());
    [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|step| step * magnitude)
        .find(|candidate| *candidate >= value * 1.0000001)
        .unwrap_or(10.0 * magnitude)
}

/// `64 B`, `1 KiB`, `1.5 MiB`, `10 MiB`.
fn size_label(bytes: f64) -> String {
    let (value, unit) = if bytes >= 1024.0 * 1024.0 {
        (bytes / (1024.0 * 1024.0), "MiB")
    } else if bytes >= 1024.0 {
        (bytes / 1024.0, "KiB")
    } else {
        (bytes, "B")
    };
    if (value - value.round()).abs() < 1e-9 {
        format!("{value:.0} {unit}")
    } else {
        format!("{value:.1} {unit}")
    }
}

/// `1000`, `1k`, `2.5M`: a label that only writes its number, so the axis may rewrite it.
fn is_written_number(label: &str) -> bool {
    let digits = label.trim_end_matches(['k', 'K', 'm', 'M']);
    !digits.is_empty() && digits.parse::<f64>().is_ok()
}

/// The subtitle in lines of about `SUBTITLE_LINE` characters, broken only at ` | ` (between
/// what ran, the machine and the commit); none for an empty subtitle.
fn subtitle_lines(subtitle: &str) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    for part in subtitle.split(" | ").filter(|part| !part.trim().is_empty()) {
        let full = lines.len() == 2;
        match lines.last_mut() {
            Some(line) if line.len() + 3 + part.len() <= SUBTITLE_LINE || full => {
                line.push_str(" | ");
                line.push_str(part);
            }
            _ => lines.push(part.to_owned()),
        }
    }
    lines
}

/// `250`, `1k`, `1.5k`, `12k`, `1.5M`, `0.75`: a k or M suffix from a thousand up, so a
/// logarithmic axis reads 100, 1k, 10k, 100k, 1M.
fn short_number(value: f64) -> String {
    let trim = |text: String| {
        if text.contains('.') {
            text.trim_end_matches('0').trim_end_matches('.').to_owned()
        } else {
            text
        }
    };
    if value >= 1e6 {
        format!("{}M", trim(format!("{:.2}", value / 1e6)))
    } else if value >= 1e4 {
        format!("{}k", trim(format!("{:.1}", value / 1e3)))
    } else if value >= 1e3 {
        format!("{}k", trim(format!("{:.2}", value / 1e3)))
    } else if value >= 10.0 || value == 0.0 {
        format!("{value:.0}")
    } else {
        trim(format!("{value:.3}"))
    }
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{PointResult, Settings};
    use crate::stats::Summary;

    fn report(swept: Option<&str>, points: &[(&str, f64, &str, f64)]) -> Report {
        Report {
            tool: "ampd-bench".into(),
            version: "0".into(),
            workload: "sweep".into(),
            swept: swept.map(str::to_owned),
            settings: Settings::default(),
            points: points
                .iter()
                .map(|&(target, x, label, rate)| {
                    let median = Summary {
                        requests_per_second: rate,
                        ..Summary::default()
                    };
                    PointResult {
                        target: target.into(),
                        url: String::new(),
                        x: Some(x),
                        label: label.into(),
                        median: median.clone(),
                        runs: vec![median],
                    }
                })
                .collect(),
        }
    }

    #[test]
    fn line_chart_has_title_axes_legend_and_one_line_per_server() {
        let results = report(
            Some("file size (bytes)"),
            &[
                ("ampd", 64.0, "64", 50_000.0),
                ("ampd", 1_048_576.0, "1m", 2_000.0),
                ("ng<nx>", 64.0, "64", 40_000.0),
                ("ng<nx>", 1_048_576.0, "1m", 1_900.0),
            ],
        );
        let svg = render(
            &[results],
            "requests_per_second",
            Some("Sweep & test"),
            None,
        )
        .unwrap();
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>\n"));
        assert!(svg.contains("Sweep &amp; test"));
        assert!(svg.contains("requests per second"));
        assert!(svg.contains("file size (bytes), logarithmic scale"));
        assert!(svg.contains(">ng&lt;nx&gt;</text>"));
        assert_eq!(svg.matches("<polyline").count(), 2);
        assert!(svg.contains(">1 MiB</text>") && svg.contains(">64 B</text>"));
        assert!(svg.contains(">100k</text>"));
        assert!(!svg.contains("second, logarithmic scale"));
    }

    #[test]
    fn values_over_two_decades_get_a_logarithmic_y_axis_and_close_ticks_share_a_label() {
        let results = report(
            Some("data-set size (bytes)"),
            &[
                ("amped", 32.0 * 1048576.0, "32m", 40_000.0),
                ("amped", 33.0 * 1048576.0, "33m", 30_000.0),
                ("amped", 375.0 * 1048576.0, "375m", 210.0),
            ],
        );
        let svg = render(&[results], "requests_per_second", None, None).unwrap();
        assert!(svg.contains("requests per second, logarithmic scale"));
        // Ticks at 100, 1k, 10k and 100k; the 33 MiB point is too close to 32 MiB for a label.
        for tick in [">100</text>", ">1k</text>", ">10k</text>", ">100k</text>"] {
            assert!(svg.contains(tick), "{tick}");
        }
        assert!(svg.contains(">32 MiB</text>") && !svg.contains(">33 MiB</text>"));
        assert!(svg.contains(">375 MiB</text>"));
        // 210 sits between the 100 and 1000 grid lines.
        let axis = YAxis::Logarithmic { low: 2, high: 5 };
        let (y100, y1000) = (axis.position(100.0), axis.position(1000.0));
        assert!(axis.position(210.0) < y100 && axis.position(210.0) > y1000);
    }

    #[test]
    fn unswept_results_become_bars_and_bad_metrics_are_refused() {
        let results = report(
            None,
            &[
                ("ampd", 0.0, "specweb96", 9000.0),
                ("nginx", 0.0, "specweb96", 8000.0),
            ],
        );
        let svg = render(
            std::slice::from_ref(&results),
            "requests_per_second",
            None,
            None,
        )
        .unwrap();
        assert_eq!(svg.matches("<rect class=\"bar\"").count(), 2);
        assert!(render(&[results], "speed", None, None).is_err());
        assert_eq!(nice_ceiling(43_000.0), 50_000.0);
        assert_eq!(nice_ceiling(0.0), 1.0);
        assert_eq!(short_number(1_500_000.0), "1.5M");
        assert_eq!(size_label(10.0 * 1024.0 * 1024.0), "10 MiB");
        assert_eq!(size_label(1536.0), "1.5 KiB");
    }

    #[test]
    fn the_subtitle_sits_under_the_title_in_a_smaller_font_and_breaks_at_a_bar() {
        let results = report(
            Some("simultaneous clients"),
            &[("ampd", 1.0, "1", 10.0), ("ampd", 64.0, "64", 20.0)],
        );
        let short = "50 clients, 3 s | Xeon (2 cores), Linux 6.1 | ampd 1a2b3c4";
        let svg = render(
            std::slice::from_ref(&results),
            "requests_per_second",
            Some("T"),
            Some(short),
        )
        .unwrap();
        let title = svg
            .find(r#"font-size="17" font-weight="bold">T</text>"#)
            .unwrap();
        let subtitle = svg
            .find(r##"font-size="12" fill="#444444">50 clients, 3 s | Xeon (2 cores), Linux 6.1 | ampd 1a2b3c4</text>"##)
            .unwrap();
        assert!(title < subtitle);
        assert_eq!(svg.matches("class=\"subtitle\"").count(), 1);
        // Without one, no subtitle element at all.
        let bare = render(
            std::slice::from_ref(&results),
            "requests_per_second",
            None,
            None,
        );
        assert!(!bare.unwrap().contains("subtitle"));
        // A long one takes two lines, broken between its parts, never inside one; XML-escaped.
        let what = "fixed rates 1k..20k req/s, new connection per request, 10 s each <close>";
        let machine = "Intel(R) Xeon(R) CPU @ 2.20GHz (2 cores), Linux 6.1";
        let long = format!("{what} | {machine} | ampd 1a2b3c4+changes");
        assert_eq!(
            subtitle_lines(&long),
            vec![what.to_owned(), format!("{machine} | ampd 1a2b3c4+changes")]
        );
        let svg = render(&[results], "requests_per_second", None, Some(&long)).unwrap();
        assert_eq!(svg.matches("class=\"subtitle\"").count(), 2);
        assert!(svg.contains("each &lt;close&gt;</text>"));
        assert_eq!(subtitle_lines("a | b | c"), vec!["a | b | c".to_owned()]);
        assert!(subtitle_lines("").is_empty());
    }

    #[test]
    fn logarithmic_axes_label_every_tick_in_one_scheme() {
        // Client counts written 1000 on the command line still read 1k beside 10k and 100k.
        let results = report(
            Some("simultaneous clients"),
            &[
                ("ampd", 10.0, "10", 50.0),
                ("ampd", 1000.0, "1000", 5_000.0),
                ("ampd", 100_000.0, "100000", 1_000_000.0),
            ],
        );
        let svg = render(&[results], "requests_per_second", None, None).unwrap();
        let labels: Vec<&str> = svg
            .split("</text>")
            .filter_map(|piece| piece.rsplit_once('>').map(|(_, label)| label))
            .collect();
        for tick in ["10", "100", "1k", "10k", "100k", "1M"] {
            assert!(labels.contains(&tick), "y tick {tick} missing: {labels:?}");
        }
        for written in ["1000", "100000", "1e3", "1000000"] {
            assert!(!labels.contains(&written), "{written} in {labels:?}");
        }
        assert!(svg.contains("simultaneous clients, logarithmic scale"));
        assert!(svg.contains("requests per second, logarithmic scale"));
        for (value, label) in [
            (64.0, "64"),
            (1000.0, "1k"),
            (1500.0, "1.5k"),
            (2500.0, "2.5k"),
            (10_000.0, "10k"),
            (123_456.0, "123.5k"),
            (1e6, "1M"),
            (0.75, "0.75"),
            (0.0, "0"),
        ] {
            assert_eq!(short_number(value), label);
        }
        assert!(is_written_number("1000") && is_written_number("1k") && is_written_number("2.5M"));
        assert!(!is_written_number("64 clients") && !is_written_number("k"));
        // Sizes keep binary units on both scales.
        assert_eq!(size_label(64.0), "64 B");
        assert_eq!(size_label(1024.0), "1 KiB");
    }

    #[test]
    fn bar_charts_have_bar_keys_and_line_charts_line_keys() {
        let bars = report(
            None,
            &[
                ("ampd", 0.0, "specweb96", 9000.0),
                ("nginx", 0.0, "specweb96", 8000.0),
            ],
        );
        let svg = render(&[bars], "requests_per_second", None, None).unwrap();
        assert_eq!(svg.matches(r#"<rect class="key""#).count(), 2);
        let key = svg.find(r##"<rect class="key""##).unwrap();
        let first_key = svg[key..].split('\n').next().unwrap();
        assert!(first_key.contains(r##"width="14" height="14" fill="#0072B2"/>"##));
        assert!(first_key.ends_with(">ampd</text>"));
        assert!(!svg.contains(r#"<line class="key""#));
        let lines = report(
            Some("simultaneous clients"),
            &[("ampd", 1.0, "1", 10.0), ("nginx", 1.0, "1", 12.0)],
        );
        let svg = render(&[lines], "requests_per_second", None, None).unwrap();
        assert_eq!(svg.matches(r#"<line class="key""#).count(), 2);
        assert!(!svg.contains(r#"<rect class="key""#));
    }

    #[test]
    fn two_metrics_share_a_colour_per_server_and_the_second_is_dashed() {
        let mut results = report(
            Some("offered request rate (requests/s)"),
            &[
                ("ampd", 1000.0, "1000", 1000.0),
                ("ampd", 8000.0, "8000", 8000.0),
                ("nginx", 1000.0, "1000", 1000.0),
                ("nginx", 8000.0, "8000", 8000.0),
            ],
        );
        for (index, point) in results.points.iter_mut().enumerate() {
            point.median.latency_ms.p50 = 0.2 * (index + 1) as f64;
            point.median.latency_ms.p99 = 40.0 * (index + 1) as f64;
        }
        let svg = render(&[results], "latency_p50_ms,latency_p99_ms", None, Some("c")).unwrap();
        assert_eq!(svg.matches("<polyline").count(), 4);
        assert_eq!(svg.matches(r#"stroke-dasharray="7 4""#).count(), 4);
        for name in [">ampd, p50<", ">ampd, p99<", ">nginx, p50<", ">nginx, p99<"] {
            assert!(svg.contains(name), "{name}");
        }
        // The same server keeps its colour for both metrics.
        assert_eq!(svg.matches(r##"<polyline points"##).count(), 4);
        assert_eq!(
            svg.matches(r##"stroke="#0072B2" stroke-width="2.5"/>"##)
                .count()
                + svg
                    .matches(r##"stroke="#0072B2" stroke-width="2.5" stroke-dasharray"##)
                    .count(),
            4
        );
        // 0.2 ms to 160 ms: a logarithmic y axis named for both, rates in the k scheme.
        assert!(svg.contains("latency (ms), logarithmic scale"));
        assert!(svg.contains(">8k</text>") && svg.contains(">1k</text>"));
        assert!(render(&[report(None, &[])], "latency_p50_ms,speed", None, None).is_err());
    }
}
