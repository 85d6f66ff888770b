//! ampd-bench: a load generator that measures web servers the way the Flash, JAWS, AFPA and
//! Abyss papers did: one event loop simulating many clients, the papers' workloads (single-file
//! size sweeps, SPECweb96, WebStone, access-log replay truncated to a data-set size, client-count
//! sweeps), closed or open loop, and the figures as a table, JSON, CSV and SVG charts.
//!
//! Layout (each file opens with what it owns):
//!
//! ```text
//! main.rs      command line → run / plot / compare; a usage mistake is clap's message and exit
//!              status 2, a failure one line and exit status 1
//! cli.rs       arguments → typed options (clap)
//! runner.rs    points × targets, interleaved; --create; median run
//! client.rs    the event loop: clients as state machines (Connecting, Sending, ReadingHead,
//!              ReadingBody, Thinking, Waiting); timeouts; open-loop arrivals; warm-up window
//! response.rs  the strict response parser (sans-I/O)
//! workload/    file, sweep, specweb96, webstone, replay; fileset (creating the files)
//! stats.rs     histograms, errors by kind, the summary of a run
//! report.rs    JSON schema, terminal table, CSV, compare
//! plot.rs      SVG charts
//! raster.rs    the same charts as PNG (resvg)
//! target.rs    --target parsing and reachability
//! handshakes.rs `handshakes`: a new TLS connection per request, full or resumed (rustls)
//! rng.rs       the seeded generator behind every draw
//! ```
//!
//! It depends on `ampd-sys` only: it shares no code with the server it measures.

mod cli;
mod client;
mod handshakes;
mod plot;
mod raster;
mod report;
mod response;
mod rng;
mod runner;
mod stats;
mod target;
mod workload;

use std::process::ExitCode;

use cli::Command;
use report::Report;

fn main() -> ExitCode {
    let arguments: Vec<String> = std::env::args().skip(1).collect();
    let command = match cli::parse(&arguments) {
        Ok(command) => command,
        // clap's message: help and version on stdout (exit 0), a mistake on stderr (exit 2).
        Err(usage) => {
            let _ = usage.print();
            return ExitCode::from(u8::try_from(usage.exit_code()).unwrap_or(2));
        }
    };
    match execute(command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("ampd-bench: {message}");
            ExitCode::FAILURE
        }
    }
}

fn execute(command: Command) -> Result<(), String> {
    match command {
        Command::Run(options) => {
            let Some(report) = runner::run(&options)? else {
                return Ok(());
            };
            print!("{}", report.table());
            if let Some(path) = &options.json {
                report.write_json(path)?;
            }
            if let Some(path) = &options.csv {
                report.write_csv(path)?;
            }
            Ok(())
        }
        Command::Plot(options) => {
            let reports = read_all(&options.inputs)?;
            let svg = plot::render(
                &reports,
                &options.metric,
                options.title.as_deref(),
                options.subtitle.as_deref(),
            )?;
            let bytes = match options.format {
                cli::ChartFormat::Svg => svg.into_bytes(),
                cli::ChartFormat::Png => raster::png(&svg)?,
            };
            std::fs::write(&options.output, bytes)
                .map_err(|error| format!("cannot write {}: {error}", options.output.display()))
        }
        Command::Handshakes(options) => {
            print!("{}", handshakes::run(&options)?.report());
            Ok(())
        }
        Command::Compare(options) => {
            let reports = read_all(&options.inputs)?;
            print!(
                "{}",
                report::compare(&reports, &options.base, &options.metric)?
            );
            Ok(())
        }
    }
}

fn read_all(paths: &[std::path::PathBuf]) -> Result<Vec<Report>, String> {
    paths.iter().map(|path| Report::read(path)).collect()
}
