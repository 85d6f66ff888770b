//! Results for people and machines: the JSON document, the terminal table, CSV, and the
//! ratio table of `compare`.
//!
//! Owns: the result schema (read back by `plot` and `compare`) and its renderings.
//! Must not touch: measuring.

use std::fmt::Write as _;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::stats::Summary;

/// How the runs were made.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    pub clients: usize,
    /// Open loop: requests per second; absent for closed loop and for a rates sweep (each
    /// point's x is its offered rate).
    pub rate: Option<f64>,
    pub think_ms: f64,
    pub keep_alive: bool,
    pub pipeline: usize,
    pub duration_s: Option<f64>,
    pub requests: Option<u64>,
    pub warmup_s: f64,
    pub timeout_s: f64,
    pub repeat: usize,
    pub seed: u64,
}

/// All runs of one point (a file size, a client count, or the only point) on one target.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PointResult {
    pub target: String,
    pub url: String,
    /// The swept variable's value; absent when nothing is swept.
    pub x: Option<f64>,
    pub label: String,
    /// The run with the median requests/s (a real run, not a blend of several).
    pub median: Summary,
    pub runs: Vec<Summary>,
}

/// One invocation's results: what `--json` writes and `plot`/`compare` read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub tool: String,
    pub version: String,
    pub workload: String,
    /// Name and unit of the swept variable (`file size (bytes)`, `simultaneous clients`).
    pub swept: Option<String>,
    pub settings: Settings,
    pub points: Vec<PointResult>,
}

impl Report {
    /// Reads a JSON report.
    ///
    /// # Errors
    /// One line naming the file: unreadable, or not an ampd-bench report.
    pub fn read(path: &Path) -> Result<Report, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|error| format!("cannot read {}: {error}", path.display()))?;
        serde_json::from_str(&text).map_err(|error| {
            format!(
                "{} is not an ampd-bench JSON report: {error}",
                path.display()
            )
        })
    }

    /// Writes the JSON report.
    ///
    /// # Errors
    /// One line naming the file.
    pub fn write_json(&self, path: &Path) -> Result<(), String> {
        let text = serde_json::to_string_pretty(self)
            .map_err(|error| format!("cannot encode results: {error}"))?;
        std::fs::write(path, text + "\n")
            .map_err(|error| format!("cannot write {}: {error}", path.display()))
    }

    /// Writes one CSV row per point and target.
    ///
    /// # Errors
    /// One line naming the file.
    pub fn write_csv(&self, path: &Path) -> Result<(), String> {
        let mut out = String::from(
            "workload,target,x,label,requests_per_second,mbit_per_second,responses,\
             latency_p50_ms,latency_p90_ms,latency_p99_ms,latency_p99_9_ms,latency_max_ms,\
             first_byte_p50_ms,first_byte_p99_ms,connect_p50_ms,connect_p99_ms,errors,\
             connect_refused,connect_failed,reset,timeout,bad_status_line,bad_header,\
             bad_chunked,wrong_length,truncated,http_status,bytes_received,bytes_verified\n",
        );
        for point in &self.points {
            let summary = &point.median;
            let errors = &summary.errors;
            let x = point.x.map(|x| x.to_string()).unwrap_or_default();
            let _ = writeln!(
                out,
                "{},{},{x},{},{:.1},{:.3},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
                self.workload,
                csv_field(&point.target),
                csv_field(&point.label),
                summary.requests_per_second,
                summary.mbit_per_second,
                summary.responses,
                summary.latency_ms.p50,
                summary.latency_ms.p90,
                summary.latency_ms.p99,
                summary.latency_ms.p99_9,
                summary.latency_ms.max,
                summary.first_byte_ms.p50,
                summary.first_byte_ms.p99,
                summary.connect_ms.p50,
                summary.connect_ms.p99,
                summary.errors_total,
                errors.connect_refused,
                errors.connect_failed,
                errors.reset,
                errors.timeout,
                errors.bad_status_line,
                errors.bad_header,
                errors.bad_chunked,
                errors.wrong_length,
                errors.truncated,
                errors.http_status,
                summary.bytes_received,
                summary.bytes_verified
            );
        }
        std::fs::write(path, out)
            .map_err(|error| format!("cannot write {}: {error}", path.display()))
    }

    /// The terminal table.
    #[must_use]
    pub fn table(&self) -> String {
        let mut out = String::new();
        let header = format!(
            "{:<10} {:<12} {:>11} {:>9} | {:>29} | {:>13} | {:>8} | {:>7} {}",
            "point",
            "target",
            "req/s",
            "Mbit/s",
            "latency ms p50 / p90 / p99 / p99.9 / max",
            "ttfb p50/p99",
            "conn p50",
            "errors",
            "verified"
        );
        let _ = writeln!(out, "{header}");
        for point in &self.points {
            let summary = &point.median;
            let latency = &summary.latency_ms;
            // Persistent connections all open during the warm-up: no connect time to show.
            let connect = if summary.connections == 0 {
                "-".to_owned()
            } else {
                format!("{:.3}", summary.connect_ms.p50)
            };
            let _ = writeln!(
                out,
                "{:<10} {:<12} {:>11.0} {:>9.1} | {:>7.3} {:>7.3} {:>7.3} {:>7.3} {:>8.2} | {:>6.3} {:>6.3} | {:>8} | {:>7} {}",
                point.label,
                point.target,
                summary.requests_per_second,
                summary.mbit_per_second,
                latency.p50,
                latency.p90,
                latency.p99,
                latency.p99_9,
                latency.max,
                summary.first_byte_ms.p50,
                summary.first_byte_ms.p99,
                connect,
                summary.errors_total,
                human_bytes(summary.bytes_verified)
            );
            for (kind, count) in summary.errors.nonzero() {
                let _ = writeln!(out, "{:<23} error {kind}: {count}", "");
            }
        }
        out
    }
}

fn csv_field(text: &str) -> String {
    if text.contains([',', '"', '\n']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.to_owned()
    }
}

/// `1.5 MB`, `12 kB`, `999 B` (powers of 10, as for Mbit/s).
#[must_use]
pub fn human_bytes(bytes: u64) -> String {
    let value = bytes as f64;
    match bytes {
        0..=999 => format!("{bytes} B"),
        1_000..=999_999 => format!("{:.1} kB", value / 1e3),
        1_000_000..=999_999_999 => format!("{:.1} MB", value / 1e6),
        _ => format!("{:.2} GB", value / 1e9),
    }
}

/// The named figure of a summary (`plot --metric`, `compare --metric`).
///
/// # Errors
/// The list of names, when `name` is not one of them.
pub fn metric(summary: &Summary, name: &str) -> Result<f64, String> {
    Ok(match name {
        "requests_per_second" => summary.requests_per_second,
        "mbit_per_second" => summary.mbit_per_second,
        "latency_p50_ms" => summary.latency_ms.p50,
        "latency_p90_ms" => summary.latency_ms.p90,
        "latency_p99_ms" => summary.latency_ms.p99,
        "latency_max_ms" => summary.latency_ms.max,
        "first_byte_p50_ms" => summary.first_byte_ms.p50,
        "first_byte_p99_ms" => summary.first_byte_ms.p99,
        "connect_p50_ms" => summary.connect_ms.p50,
        "errors" => summary.errors_total as f64,
        "errors_per_second" => summary.errors_total as f64 / summary.seconds.max(1e-9),
        other => {
            return Err(format!(
                "unknown metric '{other}' (requests_per_second, mbit_per_second, latency_p50_ms, \
                 latency_p90_ms, latency_p99_ms, latency_max_ms, first_byte_p50_ms, \
                 first_byte_p99_ms, connect_p50_ms, errors, errors_per_second)"
            ))
        }
    })
}

/// What a metric is called on a chart axis.
#[must_use]
pub fn metric_label(name: &str) -> &'static str {
    match name {
        "requests_per_second" => "requests per second",
        "mbit_per_second" => "output bandwidth (Mbit/s)",
        "latency_p50_ms" => "median latency (ms)",
        "latency_p90_ms" => "90th percentile latency (ms)",
        "latency_p99_ms" => "99th percentile latency (ms)",
        "latency_max_ms" => "maximum latency (ms)",
        "first_byte_p50_ms" => "median time to first byte (ms)",
        "first_byte_p99_ms" => "99th percentile time to first byte (ms)",
        "connect_p50_ms" => "median connect time (ms)",
        "errors_per_second" => "errors per second",
        _ => "errors",
    }
}

/// `compare`: the base target's figure divided by each other target's, point by point.
///
/// # Errors
/// An unknown metric, or a base name that no point has.
pub fn compare(reports: &[Report], base: &str, metric_name: &str) -> Result<String, String> {
    let points: Vec<&PointResult> = reports.iter().flat_map(|report| &report.points).collect();
    if !points.iter().any(|point| point.target == base) {
        return Err(format!("no results for target '{base}' in the given files"));
    }
    let mut peers: Vec<&str> = Vec::new();
    for point in &points {
        if point.target != base && !peers.contains(&point.target.as_str()) {
            peers.push(&point.target);
        }
    }
    let mut out = String::new();
    let _ = write!(out, "| point | {base} |");
    for peer in &peers {
        let _ = write!(out, " {peer} | {base}/{peer} |");
    }
    let _ = writeln!(out);
    let _ = writeln!(out, "|---|---:|{}", "---:|---:|".repeat(peers.len()));
    for base_point in points.iter().filter(|point| point.target == base) {
        let base_value = metric(&base_point.median, metric_name)?;
        let _ = write!(out, "| {} | {} |", base_point.label, figure(base_value));
        for peer in &peers {
            let found = points.iter().find(|point| {
                point.target == *peer && point.label == base_point.label && point.x == base_point.x
            });
            match found {
                Some(point) => {
                    let value = metric(&point.median, metric_name)?;
                    let ratio = if value > 0.0 {
                        format!("{:.2}", base_value / value)
                    } else {
                        "n/a".into()
                    };
                    let _ = write!(out, " {} | {ratio} |", figure(value));
                }
                None => {
                    let _ = write!(out, " – | – |");
                }
            }
        }
        let _ = writeln!(out);
    }
    Ok(out)
}

fn figure(value: f64) -> String {
    if value >= 100.0 {
        format!("{value:.0}")
    } else {
        format!("{value:.3}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(target: &str, label: &str, rate: f64) -> PointResult {
        let median = Summary {
            requests_per_second: rate,
            ..Summary::default()
        };
        PointResult {
            target: target.into(),
            url: String::new(),
            x: Some(1.0),
            label: label.into(),
            median: median.clone(),
            runs: vec![median],
        }
    }

    #[test]
    fn json_round_trips_and_compare_divides_by_peer() {
        let report = Report {
            tool: "ampd-bench".into(),
            version: "0".into(),
            workload: "sweep".into(),
            swept: Some("file size (bytes)".into()),
            settings: Settings::default(),
            points: vec![point("ampd", "1k", 300.0), point("nginx", "1k", 200.0)],
        };
        let path =
            std::env::temp_dir().join(format!("ampd-bench-report-{}.json", std::process::id()));
        report.write_json(&path).unwrap();
        assert_eq!(Report::read(&path).unwrap(), report);
        std::fs::remove_file(&path).unwrap();
        let table = compare(std::slice::from_ref(&report), "ampd", "requests_per_second").unwrap();
        assert!(table.contains("| 1k | 300 | 200 | 1.50 |"), "{table}");
        assert!(compare(std::slice::from_ref(&report), "h2o", "errors").is_err());
        assert!(compare(&[report], "ampd", "speed")
            .unwrap_err()
            .contains("unknown metric"));
        assert!(Report::read(Path::new("/nonexistent.json")).is_err());
    }
}
