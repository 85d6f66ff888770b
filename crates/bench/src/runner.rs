//! An experiment: the points to measure (one, a sweep of file sizes, of client counts or of
//! offered request rates) times the targets, run interleaved A B C A B C, collected into one
//! report.
//!
//! Owns: building each run's workload from the options, creating file sets (`--create`), the
//! run order, and choosing the median run. Must not touch: sockets (see `client.rs`).
//! Sources: Flash figures 6/7 (size sweep), 9/10 (data-set sweep by log truncation), 12 (adding
//! clients); Abyss §5 (httperf at fixed request rates rising past saturation); interleaving
//! runs so slow drift (thermal, other load) hits every server alike.

use std::io::Write;

use crate::cli::{RunOptions, WorkloadChoice};
use crate::client::{self, Arrival, Length, RunConfig};
use crate::report::{human_bytes, PointResult, Report, Settings};
use crate::stats::Summary;
use crate::target::Target;
use crate::workload::fileset::{self, FileSpec};
use crate::workload::replay::Log;
use crate::workload::{specweb96, webstone, Workload};

/// One value of the swept variable.
struct Point {
    x: Option<f64>,
    label: String,
    clients: usize,
    arrival: Arrival,
    /// For a sweep: the size label that replaces `{size}` and the expected body size.
    size: Option<(String, u64)>,
}

/// Runs the experiment the options describe.
///
/// # Errors
/// One line: a bad log, a file set that cannot be created, an unreachable target, a failure
/// of the event loop itself.
pub fn run(options: &RunOptions) -> Result<Option<Report>, String> {
    let log = match &options.workload {
        WorkloadChoice::Replay { log, .. } => {
            Some(Log::read(log).map_err(|error| error.to_string())?)
        }
        _ => None,
    };
    if let Some(directory) = &options.create {
        let files = files_to_create(options, log.as_ref())?;
        let created = fileset::create(directory, &files, options.seed)?;
        eprintln!(
            "ampd-bench: {} files ({}) in {}: {} written, {} already there",
            files.len(),
            human_bytes(created.bytes),
            directory.display(),
            created.written,
            created.kept
        );
    }
    if options.targets.is_empty() {
        return Ok(None);
    }
    let targets = options
        .targets
        .iter()
        .map(|text| Target::parse(text))
        .collect::<Result<Vec<_>, _>>()?;
    for target in &targets {
        target.check_reachable()?;
    }
    if let Some(cpu) = options.cpu {
        ampd_sys::process::set_cpu_affinity(cpu)
            .map_err(|error| format!("--cpu {cpu}: {error}"))?;
    }
    // Many clients need many descriptors; best effort, the error shows up as connect errors.
    let _ = ampd_sys::process::raise_nofile_limit();
    let _ = ampd_sys::process::ignore_sigpipe();
    let base = base_workload(options, log.as_ref());
    let points = points(options);
    let total_runs = points.len() * options.repeat * targets.len();
    let mut results: Vec<PointResult> = Vec::new();
    let mut run_number = 0;
    for point in &points {
        let first = results.len();
        for target in &targets {
            results.push(PointResult {
                target: target.name.clone(),
                url: target.url.clone(),
                x: point.x,
                label: point.label.clone(),
                median: Summary::default(),
                runs: Vec::new(),
            });
        }
        for _ in 0..options.repeat {
            for (offset, target) in targets.iter().enumerate() {
                run_number += 1;
                let workload = workload_for(options, base.as_ref(), point, target);
                let config = RunConfig {
                    clients: point.clients,
                    arrival: point.arrival,
                    keep_alive: options.keep_alive,
                    pipeline: options.pipeline,
                    length: options.length,
                    warmup: options.warmup,
                    timeout: options.timeout,
                    seed: options.seed,
                    progress: (!options.quiet).then(|| {
                        format!(
                            "[{run_number}/{total_runs}] {} {}",
                            point.label, target.name
                        )
                    }),
                };
                let outcome = client::run(target, workload, &config)
                    .map_err(|error| format!("event loop failed: {error}"))?;
                let summary = Summary::of(&outcome.recorder, outcome.elapsed);
                if !options.quiet {
                    let _ = writeln!(
                        std::io::stderr(),
                        "[{run_number}/{total_runs}] {} on {}: {:.0} req/s, {:.1} Mbit/s, p99 {:.3} ms, {} errors",
                        point.label,
                        target.name,
                        summary.requests_per_second,
                        summary.mbit_per_second,
                        summary.latency_ms.p99,
                        summary.errors_total
                    );
                }
                results[first + offset].runs.push(summary);
            }
        }
    }
    for result in &mut results {
        result.median = median_run(&result.runs);
    }
    Ok(Some(Report {
        tool: "ampd-bench".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        workload: workload_name(options),
        swept: swept_name(options),
        settings: settings(options),
        points: results,
    }))
}

/// The run with the median requests/s (the lower middle one for an even count).
fn median_run(runs: &[Summary]) -> Summary {
    let mut order: Vec<&Summary> = runs.iter().collect();
    order.sort_by(|a, b| a.requests_per_second.total_cmp(&b.requests_per_second));
    order
        .get(order.len().saturating_sub(1) / 2)
        .map(|summary| (*summary).clone())
        .unwrap_or_default()
}

fn workload_name(options: &RunOptions) -> String {
    let kind = match &options.workload {
        WorkloadChoice::File => "file",
        WorkloadChoice::Sweep { .. } => "sweep",
        WorkloadChoice::SpecWeb96 { .. } => "specweb96",
        WorkloadChoice::WebStone => "webstone",
        WorkloadChoice::Replay { .. } => "replay",
    };
    if options.client_counts.is_some() {
        format!("clients ({kind})")
    } else if options.offered_rates.is_some() {
        format!("rates ({kind})")
    } else {
        kind.to_owned()
    }
}

fn swept_name(options: &RunOptions) -> Option<String> {
    if options.client_counts.is_some() {
        Some("simultaneous clients".into())
    } else if options.offered_rates.is_some() {
        Some("offered request rate (requests/s)".into())
    } else if matches!(options.workload, WorkloadChoice::Sweep { .. }) {
        Some("file size (bytes)".into())
    } else {
        None
    }
}

fn settings(options: &RunOptions) -> Settings {
    let (rate, think) = match options.arrival {
        // A rates sweep has no one rate: each point's x is its own.
        Arrival::Open { .. } if options.offered_rates.is_some() => (None, 0.0),
        Arrival::Open { rate } => (Some(rate), 0.0),
        Arrival::Closed { think } => (None, think.as_secs_f64() * 1000.0),
    };
    let (duration_s, requests) = match options.length {
        Length::Time(duration) => (Some(duration.as_secs_f64()), None),
        Length::Requests(count) => (None, Some(count)),
    };
    Settings {
        clients: options.clients,
        rate,
        think_ms: think,
        keep_alive: options.keep_alive,
        pipeline: options.pipeline,
        duration_s,
        requests,
        warmup_s: options.warmup.as_secs_f64(),
        timeout_s: options.timeout.as_secs_f64(),
        repeat: options.repeat,
        seed: options.seed,
    }
}

fn points(options: &RunOptions) -> Vec<Point> {
    if let Some(counts) = &options.client_counts {
        return counts
            .iter()
            .map(|&clients| Point {
                x: Some(clients as f64),
                label: clients.to_string(),
                clients,
                arrival: options.arrival,
                size: None,
            })
            .collect();
    }
    if let Some(rates) = &options.offered_rates {
        return rates
            .iter()
            .map(|(label, rate)| Point {
                x: Some(*rate),
                label: label.clone(),
                clients: options.clients,
                arrival: Arrival::Open { rate: *rate },
                size: None,
            })
            .collect();
    }
    match &options.workload {
        WorkloadChoice::Sweep { sizes, .. } => sizes
            .iter()
            .map(|(label, bytes)| Point {
                x: Some(*bytes as f64),
                label: label.clone(),
                clients: options.clients,
                arrival: options.arrival,
                size: Some((label.clone(), *bytes)),
            })
            .collect(),
        _ => vec![Point {
            x: None,
            label: options.name.clone(),
            clients: options.clients,
            arrival: options.arrival,
            size: None,
        }],
    }
}

/// The mix workloads, built once (a replay parses its log once).
fn base_workload(options: &RunOptions, log: Option<&Log>) -> Option<Workload> {
    match &options.workload {
        WorkloadChoice::SpecWeb96 { directories } => Some(specweb96::workload(*directories)),
        WorkloadChoice::WebStone => Some(webstone::workload()),
        WorkloadChoice::Replay { data_set, .. } => {
            let log = log?;
            Some(log.workload(log.prefix_for(*data_set)))
        }
        WorkloadChoice::File | WorkloadChoice::Sweep { .. } => None,
    }
}

fn workload_for(
    options: &RunOptions,
    base: Option<&Workload>,
    point: &Point,
    target: &Target,
) -> Workload {
    let mut workload = match (&options.workload, base, &point.size) {
        (WorkloadChoice::Sweep { path, .. }, _, Some((label, bytes))) => {
            let mut workload = Workload::single(&path.replace("{size}", label), Some(*bytes));
            workload.prefix_paths(&target.path);
            workload
        }
        (_, Some(base), _) => {
            let mut workload = base.clone();
            workload.prefix_paths(&target.path);
            workload
        }
        _ => Workload::single(&target.path, None),
    };
    if !options.verify_sizes {
        workload.forget_sizes();
    }
    workload
}

fn files_to_create(options: &RunOptions, log: Option<&Log>) -> Result<Vec<FileSpec>, String> {
    match &options.workload {
        WorkloadChoice::SpecWeb96 { directories } => Ok(specweb96::files(*directories)),
        WorkloadChoice::WebStone => Ok(webstone::files()),
        WorkloadChoice::Sweep { sizes, path } => sizes
            .iter()
            .map(|(label, bytes)| {
                let relative = path.replace("{size}", label);
                let relative = relative.trim_start_matches('/');
                Ok(FileSpec {
                    relative: relative.into(),
                    size: *bytes,
                })
            })
            .collect(),
        WorkloadChoice::Replay { data_set, .. } => match log {
            Some(log) => log.files(log.prefix_for(*data_set)),
            None => Err("replay needs --log FILE".into()),
        },
        WorkloadChoice::File => Err(
            "--create: the file workload names no files (use sweep, specweb96, webstone or replay)"
                .into(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{parse, Command};

    fn parsed(line: &str) -> RunOptions {
        let arguments: Vec<String> = line.split_whitespace().map(str::to_owned).collect();
        match parse(&arguments).unwrap() {
            Command::Run(options) => *options,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_rates_sweep_is_one_open_loop_point_per_rate() {
        let options = parsed("rates --target x --rates 1k,4000 --clients 300 --close");
        let swept = points(&options);
        assert_eq!(swept.len(), 2);
        assert_eq!(
            swept
                .iter()
                .map(|point| (point.x, point.label.as_str(), point.clients, point.arrival))
                .collect::<Vec<_>>(),
            [
                (Some(1000.0), "1k", 300, Arrival::Open { rate: 1000.0 }),
                (Some(4000.0), "4000", 300, Arrival::Open { rate: 4000.0 }),
            ]
        );
        assert_eq!(workload_name(&options), "rates (file)");
        assert_eq!(
            swept_name(&options).as_deref(),
            Some("offered request rate (requests/s)")
        );
        let recorded = settings(&options);
        assert_eq!((recorded.rate, recorded.keep_alive), (None, false));
        // A single open-loop run keeps its rate in the settings, and its one point the option's.
        let single = parsed("file --target x --rate 250");
        assert_eq!(settings(&single).rate, Some(250.0));
        assert_eq!(points(&single)[0].arrival, Arrival::Open { rate: 250.0 });
    }
}
