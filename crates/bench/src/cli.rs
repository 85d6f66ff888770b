//! The command line, read by clap as `ampd`'s is: `ampd-bench WORKLOAD [options]`,
//! `ampd-bench plot`, `ampd-bench compare`, `ampd-bench handshakes`, `--help` per command and
//! `--version`.
//!
//! Owns: turning arguments into typed options, and the help text. Usage mistakes, and options
//! that contradict each other, are clap errors: clap's message, exit status 2. Must not touch:
//! running anything.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use clap::error::ErrorKind;
use clap::{Args, CommandFactory, Parser, Subcommand};

use crate::client::{Arrival, Length};
use crate::handshakes::{HandshakeOptions, TlsVersion};
use crate::workload::parse_size;

/// What the command line asks for.
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    Run(Box<RunOptions>),
    Plot(PlotOptions),
    Compare(CompareOptions),
    Handshakes(HandshakeOptions),
}

/// A request workload as named on the command line.
#[derive(Debug, Clone, PartialEq)]
pub enum WorkloadChoice {
    File,
    /// (label as written, bytes) per point, and the path template with `{size}`.
    Sweep {
        sizes: Vec<(String, u64)>,
        path: String,
    },
    SpecWeb96 {
        directories: u64,
    },
    WebStone,
    Replay {
        log: PathBuf,
        data_set: Option<u64>,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub struct RunOptions {
    pub name: String,
    pub workload: WorkloadChoice,
    /// `clients`: one run per count.
    pub client_counts: Option<Vec<usize>>,
    /// `rates`: one open-loop run per offered rate, as (label as written, requests/s).
    pub offered_rates: Option<Vec<(String, f64)>>,
    pub targets: Vec<String>,
    pub clients: usize,
    pub arrival: Arrival,
    pub keep_alive: bool,
    pub pipeline: usize,
    pub length: Length,
    pub warmup: Duration,
    pub timeout: Duration,
    pub repeat: usize,
    pub seed: u64,
    pub verify_sizes: bool,
    pub create: Option<PathBuf>,
    pub cpu: Option<usize>,
    pub json: Option<PathBuf>,
    pub csv: Option<PathBuf>,
    pub quiet: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlotOptions {
    pub inputs: Vec<PathBuf>,
    pub output: PathBuf,
    /// What `output`'s extension asks for.
    pub format: ChartFormat,
    pub metric: String,
    pub title: Option<String>,
    /// The conditions line under the title (what ran | machine | commit).
    pub subtitle: Option<String>,
}

/// The file format of a chart, from the output's extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChartFormat {
    Svg,
    Png,
}

impl ChartFormat {
    /// The format `path`'s extension names (any case).
    ///
    /// # Errors
    /// Another extension or none, with the ones there are.
    pub fn of(path: &std::path::Path) -> Result<ChartFormat, String> {
        let extension = path
            .extension()
            .and_then(|extension| extension.to_str())
            .map(str::to_ascii_lowercase);
        match extension.as_deref() {
            Some("svg") => Ok(ChartFormat::Svg),
            Some("png") => Ok(ChartFormat::Png),
            _ => Err(format!(
                "plot: cannot tell the format of '{}' (supported: .svg, .png)",
                path.display()
            )),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompareOptions {
    pub inputs: Vec<PathBuf>,
    pub base: String,
    pub metric: String,
}

#[derive(Parser, Debug)]
#[command(
    name = "ampd-bench",
    version,
    about = "A load generator that measures web servers the way the Flash, JAWS, AFPA and Abyss \
             papers did",
    arg_required_else_help = true,
    after_help = "Every workload takes the run options ('ampd-bench file --help'); specweb96, \
                  webstone, sweep and replay also take --create DIR: write their files there.\n\
                  Times: 10s, 500ms, 2m, or seconds. Sizes: 64, 1k, 10m, 1GiB (binary)."
)]
struct Cli {
    #[command(subcommand)]
    command: Workload,
}

#[derive(Subcommand, Debug)]
enum Workload {
    /// The URL of each target, over and over (Flash 6.1)
    File(RunArgs),
    /// One run per file size: --sizes 64,1k,...,10m --path '/f{size}.bin'
    Sweep(RunArgs),
    /// SPECweb96 classes 35/50/14/1 % over --dirs N directories (/specweb/...)
    Specweb96(RunArgs),
    /// WebStone mix 500 B 35%, 5 KB 50%, 50 KB 14%, 5 MB 1% (/webstone/...)
    Webstone(RunArgs),
    /// --log FILE (Common/Combined Log Format), GET lines in order, looped; --dataset BYTES
    /// keeps the prefix whose files fit (Flash 6.2)
    Replay(RunArgs),
    /// One run per client count: --counts 1,16,64,256 --of WORKLOAD
    Clients(RunArgs),
    /// One open-loop run per offered rate (httperf --rate, Abyss §5): --rates 1000,2k,4k --of
    /// WORKLOAD; --clients caps the connections open at once, --timeout turns a request not
    /// answered in time into an error (requests waiting for a free connection count from when
    /// due)
    Rates(RunArgs),
    /// Charts of JSON results: FILE.json... [-o OUT.svg|OUT.png]
    Plot(PlotArgs),
    /// Ratios of each target to --base, per point, as a Markdown table
    Compare(CompareArgs),
    /// A new TLS connection per request (connect, handshake, GET with Connection: close, the
    /// whole response), full handshakes unless --resume (offer the session the server gave
    /// last)
    #[command(
        after_help = "Neither the certificate nor the handshake signature is verified; an \
                      X25519 key share, AES-128-GCM suites only. Prints connections/s and a \
                      RESULT line (requests, duration_us, bytes, errors, p50_us, p99_us, \
                      resumed)."
    )]
    Handshakes(HandshakeArgs),
}

#[derive(Args, Debug)]
struct RunArgs {
    /// Server to measure, [NAME=]http://HOST:PORT[/PATH] (repeat; runs interleave A B C A B C)
    #[arg(long = "target", value_name = "[NAME=]URL")]
    targets: Vec<String>,
    /// Simultaneous clients
    #[arg(long, value_name = "N", default_value = "50", value_parser = positive::<usize>)]
    clients: usize,
    /// Measured time per run, e.g. 10s, 500ms [default: 10s]
    #[arg(long, value_name = "TIME", value_parser = parse_duration, conflicts_with = "requests")]
    duration: Option<Duration>,
    /// Measure N requests per run instead of a duration
    #[arg(long, value_name = "N", value_parser = positive::<u64>)]
    requests: Option<u64>,
    /// Excluded from the figures
    #[arg(long, value_name = "TIME", default_value = "1s", value_parser = parse_duration)]
    warmup: Duration,
    /// Open loop: R requests/s in total (latency counted from when due)
    #[arg(long, value_name = "R", conflicts_with = "think")]
    rate: Option<f64>,
    /// Closed loop: pause between a response and the next request [default: 0]
    #[arg(long, value_name = "TIME", value_parser = parse_duration)]
    think: Option<Duration>,
    /// A new connection per request (default: persistent connections)
    #[arg(long, overrides_with = "keep_alive")]
    close: bool,
    /// Persistent connections (the default; undoes an earlier --close)
    #[arg(long, overrides_with = "close")]
    keep_alive: bool,
    /// D requests written at once per connection
    #[arg(long, value_name = "D", default_value = "1", value_parser = positive::<usize>)]
    pipeline: usize,
    /// No complete response in TIME is a timeout error
    #[arg(long, value_name = "TIME", default_value = "5s", value_parser = parse_duration)]
    timeout: Duration,
    /// Runs per point and target; figures are the median run
    #[arg(long, value_name = "N", default_value = "1", value_parser = positive::<usize>)]
    repeat: usize,
    /// Random seed of the request stream
    #[arg(long, value_name = "N", default_value = "1")]
    seed: u64,
    /// Do not check body lengths against the known file sizes
    #[arg(long)]
    no_verify_size: bool,
    /// Write the workload's files under DIR (and run only if --target is given)
    #[arg(long, value_name = "DIR")]
    create: Option<PathBuf>,
    /// Pin ampd-bench to CPU N
    #[arg(long, value_name = "N")]
    cpu: Option<usize>,
    /// Write every figure as JSON (for plot and compare)
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Write one CSV row per point and target
    #[arg(long, value_name = "FILE")]
    csv: Option<PathBuf>,
    /// No progress and per-run lines on stderr
    #[arg(short, long)]
    quiet: bool,
    /// sweep: the file sizes [default: 64,1k,4k,16k,100k,1m,10m]
    #[arg(long, value_name = "LIST")]
    sizes: Option<String>,
    /// sweep: the path of each size, with {size} [default: /f{size}.bin]
    #[arg(long, value_name = "TEMPLATE")]
    path: Option<String>,
    /// specweb96: directories [default: 10]
    #[arg(long = "dirs", value_name = "N", value_parser = positive::<u64>)]
    directories: Option<u64>,
    /// replay: the access log
    #[arg(long, value_name = "FILE")]
    log: Option<PathBuf>,
    /// replay: keep the log's prefix whose files fit in BYTES
    #[arg(long = "dataset", value_name = "BYTES", value_parser = parse_size)]
    data_set: Option<u64>,
    /// clients: the client counts [default: 1,4,16,64,256]
    #[arg(long, value_name = "LIST")]
    counts: Option<String>,
    /// rates: the offered rates, requests/s [default: 500,1k,2k,4k,8k]
    #[arg(long, value_name = "LIST")]
    rates: Option<String>,
    /// clients, rates: the request workload of each point [default: file]
    #[arg(long, value_name = "WORKLOAD")]
    of: Option<String>,
}

#[derive(Args, Debug)]
struct PlotArgs {
    /// JSON results (--json) to draw
    #[arg(value_name = "FILE.json", required = true)]
    inputs: Vec<PathBuf>,
    /// The chart, .svg or .png
    #[arg(short, long, value_name = "OUT", default_value = "ampd-bench.svg")]
    output: PathBuf,
    /// The figure drawn (M, or M,M2 for two panels)
    #[arg(long, value_name = "M", default_value = "requests_per_second")]
    metric: String,
    /// The chart's title
    #[arg(long, value_name = "TEXT")]
    title: Option<String>,
    /// The conditions line under the title (what ran | machine | commit)
    #[arg(long, value_name = "TEXT")]
    subtitle: Option<String>,
}

#[derive(Args, Debug)]
struct CompareArgs {
    /// JSON results (--json) to compare
    #[arg(value_name = "FILE.json", required = true)]
    inputs: Vec<PathBuf>,
    /// The target the ratios are of
    #[arg(long, value_name = "NAME", required = true)]
    base: String,
    /// The figure compared
    #[arg(long, value_name = "M", default_value = "requests_per_second")]
    metric: String,
}

#[derive(Args, Debug)]
struct HandshakeArgs {
    /// https://HOST:PORT/PATH
    #[arg(long, value_name = "URL", required = true)]
    url: String,
    /// Connecting threads
    #[arg(long, value_name = "N", default_value = "32", value_parser = positive::<usize>)]
    connections: usize,
    /// Measured time
    #[arg(long, value_name = "TIME", default_value = "10s", value_parser = parse_duration)]
    duration: Duration,
    /// Excluded from the figures
    #[arg(long, value_name = "TIME", default_value = "1s", value_parser = parse_duration)]
    warmup: Duration,
    /// No handshake and response within TIME is an error
    #[arg(long, value_name = "TIME", default_value = "5s", value_parser = parse_duration)]
    timeout: Duration,
    /// Offer the session the server gave last (resumed handshakes)
    #[arg(long)]
    resume: bool,
    /// Offer only this TLS version: 1.2 or 1.3
    #[arg(long = "tls", value_name = "VERSION", value_parser = tls_version)]
    version: Option<TlsVersion>,
}

/// Parses the arguments after the program name.
///
/// # Errors
/// A usage mistake or options that contradict each other, as clap's error (print it, exit
/// with its code, 2); `--help` and `--version` come back as clap's "errors" that print to
/// stdout and exit 0.
pub fn parse(arguments: &[String]) -> Result<Command, clap::Error> {
    let cli = Cli::try_parse_from(
        std::iter::once(OsString::from("ampd-bench")).chain(arguments.iter().map(OsString::from)),
    )?;
    let (name, args) = match cli.command {
        Workload::Plot(args) => return plot(args),
        Workload::Compare(args) => {
            return Ok(Command::Compare(CompareOptions {
                inputs: args.inputs,
                base: args.base,
                metric: args.metric,
            }))
        }
        Workload::Handshakes(args) => {
            return Ok(Command::Handshakes(HandshakeOptions {
                url: args.url,
                connections: args.connections,
                duration: args.duration,
                warmup: args.warmup,
                timeout: args.timeout,
                resume: args.resume,
                version: args.version.unwrap_or(TlsVersion::Any),
            }))
        }
        Workload::File(args) => ("file", args),
        Workload::Sweep(args) => ("sweep", args),
        Workload::Specweb96(args) => ("specweb96", args),
        Workload::Webstone(args) => ("webstone", args),
        Workload::Replay(args) => ("replay", args),
        Workload::Clients(args) => ("clients", args),
        Workload::Rates(args) => ("rates", args),
    };
    run_options(name, args)
        .map(|options| Command::Run(Box::new(options)))
        .map_err(|message| usage_error(name, message))
}

/// A contradiction among `name`'s options, as clap's usage error of that subcommand.
fn usage_error(name: &str, message: String) -> clap::Error {
    let mut command = Cli::command();
    command.build();
    match command.find_subcommand_mut(name) {
        Some(subcommand) => subcommand.error(ErrorKind::ArgumentConflict, message),
        None => command.error(ErrorKind::ArgumentConflict, message),
    }
}

fn plot(args: PlotArgs) -> Result<Command, clap::Error> {
    let format = ChartFormat::of(&args.output).map_err(|message| usage_error("plot", message))?;
    Ok(Command::Plot(PlotOptions {
        inputs: args.inputs,
        output: args.output,
        format,
        metric: args.metric,
        title: args.title,
        subtitle: args.subtitle,
    }))
}

/// The run options of workload `name`, checked against each other.
fn run_options(name: &str, args: RunArgs) -> Result<RunOptions, String> {
    let mut options = RunOptions {
        name: name.to_owned(),
        workload: WorkloadChoice::File,
        client_counts: None,
        offered_rates: None,
        targets: args.targets,
        clients: args.clients,
        arrival: Arrival::Closed {
            think: Duration::ZERO,
        },
        keep_alive: !args.close,
        pipeline: args.pipeline,
        length: match (args.duration, args.requests) {
            (_, Some(count)) => Length::Requests(count),
            (Some(duration), None) => Length::Time(duration),
            (None, None) => Length::Time(Duration::from_secs(10)),
        },
        warmup: args.warmup,
        timeout: args.timeout,
        repeat: args.repeat,
        seed: args.seed,
        verify_sizes: !args.no_verify_size,
        create: args.create,
        cpu: args.cpu,
        json: args.json,
        csv: args.csv,
        quiet: args.quiet,
    };
    let mut rate = args.rate;
    if args.rates.is_some() && name != "rates" {
        return Err(format!("{name}: --rates is for the rates workload"));
    }
    if args.counts.is_some() && name != "clients" {
        return Err(format!("{name}: --counts is for the clients workload"));
    }
    if name == "rates" {
        if rate.is_some() {
            return Err("rates: give the offered rates with --rates, not --rate".into());
        }
        if args.think.is_some() {
            return Err("--think is for closed loop; rates is open loop".into());
        }
        let rates = parse_rates(args.rates.as_deref().unwrap_or("500,1k,2k,4k,8k"))?;
        // The arrival of the first point; the runner gives each point its own rate.
        rate = rates.first().map(|(_, rate)| *rate);
        options.offered_rates = Some(rates);
    }
    options.arrival = match (rate, args.think) {
        (Some(_), Some(_)) => return Err("--think is for closed loop; --rate is open loop".into()),
        (Some(rate), None) if rate > 0.0 && rate.is_finite() => Arrival::Open { rate },
        (Some(_), None) => return Err("--rate must be a positive number".into()),
        (None, think) => Arrival::Closed {
            think: think.unwrap_or_default(),
        },
    };
    if options.pipeline > 1 && matches!(options.arrival, Arrival::Open { .. }) {
        return Err("--pipeline needs closed loop (no --rate)".into());
    }
    let kind = if name == "clients" || name == "rates" {
        if name == "clients" {
            let counts = args.counts.as_deref().unwrap_or("1,4,16,64,256");
            options.client_counts = Some(
                counts
                    .split(',')
                    .map(|count| match count.trim().parse::<usize>() {
                        Ok(count) if count > 0 => Ok(count),
                        _ => Err(format!("--counts: '{count}' is not a positive number")),
                    })
                    .collect::<Result<_, _>>()?,
            );
        }
        match args.of.as_deref().unwrap_or("file") {
            sweep @ ("clients" | "rates") => {
                return Err(format!("--of {sweep}: pick a request workload"))
            }
            kind @ ("file" | "sweep" | "specweb96" | "webstone" | "replay") => kind.to_owned(),
            other => return Err(format!("--of: unknown workload '{other}'")),
        }
    } else {
        name.to_owned()
    };
    options.workload = match kind.as_str() {
        "sweep" => WorkloadChoice::Sweep {
            sizes: parse_sizes(args.sizes.as_deref().unwrap_or("64,1k,4k,16k,100k,1m,10m"))?,
            path: args.path.unwrap_or_else(|| "/f{size}.bin".into()),
        },
        "specweb96" => WorkloadChoice::SpecWeb96 {
            directories: args.directories.unwrap_or(10),
        },
        "webstone" => WorkloadChoice::WebStone,
        "replay" => WorkloadChoice::Replay {
            log: args.log.ok_or("replay needs --log FILE")?,
            data_set: args.data_set,
        },
        _ => WorkloadChoice::File,
    };
    if (options.name == "clients" || options.name == "rates")
        && matches!(options.workload, WorkloadChoice::Sweep { .. })
    {
        return Err("--of sweep: sweep one variable at a time".into());
    }
    if options.targets.is_empty() && options.create.is_none() {
        return Err(format!("{name}: no --target given"));
    }
    Ok(options)
}

/// A number above zero.
fn positive<T>(text: &str) -> Result<T, String>
where
    T: std::str::FromStr + PartialOrd + Default,
{
    match text.parse::<T>() {
        Ok(value) if value > T::default() => Ok(value),
        Ok(_) => Err("must be at least 1".to_owned()),
        Err(_) => Err("not a whole number".to_owned()),
    }
}

fn tls_version(text: &str) -> Result<TlsVersion, String> {
    match text {
        "1.2" => Ok(TlsVersion::V12),
        "1.3" => Ok(TlsVersion::V13),
        _ => Err("expected 1.2 or 1.3".to_owned()),
    }
}

/// `500,1k,2.5k,10000`: requests per second, each positive; labels as written.
fn parse_rates(list: &str) -> Result<Vec<(String, f64)>, String> {
    list.split(',')
        .map(|label| {
            let label = label.trim().to_ascii_lowercase();
            let (number, scale) = match label.strip_suffix('k') {
                Some(number) => (number, 1000.0),
                None => (label.as_str(), 1.0),
            };
            match number.parse::<f64>() {
                Ok(rate) if rate > 0.0 && rate.is_finite() => Ok((label.clone(), rate * scale)),
                _ => Err(format!(
                    "--rates: '{label}' is not a positive rate (requests/s, e.g. 500 or 2k)"
                )),
            }
        })
        .collect()
}

fn parse_sizes(list: &str) -> Result<Vec<(String, u64)>, String> {
    list.split(',')
        .map(|label| {
            let label = label.trim();
            parse_size(label).map(|bytes| (label.to_ascii_lowercase(), bytes))
        })
        .collect()
}

/// `10`, `10s`, `500ms`, `2m`, `1.5s`.
///
/// # Errors
/// One line naming the text.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let bad = || format!("'{text}' is not a duration (use e.g. 10s, 500ms, 2m)");
    let (number, scale) = if let Some(number) = text.strip_suffix("ms") {
        (number, 0.001)
    } else if let Some(number) = text.strip_suffix('s') {
        (number, 1.0)
    } else if let Some(number) = text.strip_suffix('m') {
        (number, 60.0)
    } else {
        (text, 1.0)
    };
    let value: f64 = number.parse().map_err(|_| bad())?;
    if !value.is_finite() || value < 0.0 || value * scale > 1e7 {
        return Err(bad());
    }
    Ok(Duration::from_secs_f64(value * scale))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(line: &str) -> Vec<String> {
        line.split_whitespace().map(str::to_owned).collect()
    }

    #[test]
    fn run_options_parse() {
        let Command::Run(options) = parse(&args(
            "sweep --target a=http://127.0.0.1:1/ --sizes 64,1K --clients 8 --requests 100 \
             --close --pipeline 4 --think 5ms --repeat 3",
        ))
        .unwrap() else {
            panic!()
        };
        assert_eq!(
            options.workload,
            WorkloadChoice::Sweep {
                sizes: vec![("64".into(), 64), ("1k".into(), 1024)],
                path: "/f{size}.bin".into()
            }
        );
        assert_eq!(options.length, Length::Requests(100));
        assert_eq!(
            options.arrival,
            Arrival::Closed {
                think: Duration::from_millis(5)
            }
        );
        assert!(!options.keep_alive);
        assert_eq!(
            (options.clients, options.pipeline, options.repeat),
            (8, 4, 3)
        );
    }

    /// Every mistake is clap's usage error (exit status 2) naming what is wrong.
    fn mistake(line: &str) -> String {
        let error = parse(&args(line)).unwrap_err();
        assert_eq!(error.exit_code(), 2, "{line}: {error}");
        error.to_string()
    }

    #[test]
    fn mistakes_are_usage_errors_naming_the_argument() {
        for (line, expected) in [
            ("nonsense", "unrecognized subcommand 'nonsense'"),
            ("file", "no --target given"),
            ("file --target x --bogus", "unexpected argument '--bogus'"),
            (
                "file --target x --clients",
                "a value is required for '--clients <N>'",
            ),
            (
                "file --target x --clients 0",
                "invalid value '0' for '--clients <N>': must be at least 1",
            ),
            (
                "file --target x --duration soon",
                "'soon' is not a duration",
            ),
            (
                "file --target x --duration 1s --requests 5",
                "cannot be used with '--requests <N>'",
            ),
            (
                "file --target x --rate 10 --think 1s",
                "cannot be used with '--think <TIME>'",
            ),
            (
                "file --target x --rate 10 --pipeline 2",
                "--pipeline needs closed loop",
            ),
            ("replay --target x", "replay needs --log FILE"),
            ("sweep --target x --sizes 1k,big", "'big' is not a size"),
            (
                "clients --target x --counts 1,0",
                "'0' is not a positive number",
            ),
            ("clients --target x --of dance", "unknown workload 'dance'"),
            ("compare r.json", "--base <NAME>"),
            ("plot", "<FILE.json>"),
            ("plot a.json -o chart.gif", "cannot tell the format"),
            ("handshakes --url x --tls 1.1", "expected 1.2 or 1.3"),
        ] {
            let error = mistake(line);
            assert!(error.contains(expected), "{line}: {error}");
        }
    }

    #[test]
    fn help_and_version_exit_0() {
        for line in [
            "--help",
            "help",
            "file --help",
            "help plot",
            "--version",
            "-V",
        ] {
            let error = parse(&args(line)).unwrap_err();
            assert_eq!(error.exit_code(), 0, "{line}: {error}");
        }
        let version = parse(&args("--version")).unwrap_err().to_string();
        assert!(version.starts_with("ampd-bench "), "{version}");
        let help = parse(&args("--help")).unwrap_err().to_string();
        for workload in [
            "file",
            "sweep",
            "specweb96",
            "webstone",
            "replay",
            "clients",
            "rates",
        ] {
            assert!(help.contains(workload), "{workload}: {help}");
        }
        // Nothing at all: the help, as a usage mistake (clap's convention).
        assert_eq!(parse(&[]).unwrap_err().exit_code(), 2);
    }

    #[test]
    fn the_grammar_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn rates_sweep_offered_rates_in_open_loop() {
        let Command::Run(options) = parse(&args(
            "rates --target a=http://127.0.0.1:1/f1k.bin --rates 500,2K,2.5k --close \
             --clients 1000 --timeout 1s",
        ))
        .unwrap() else {
            panic!()
        };
        assert_eq!(
            options.offered_rates,
            Some(vec![
                ("500".into(), 500.0),
                ("2k".into(), 2000.0),
                ("2.5k".into(), 2500.0)
            ])
        );
        assert_eq!(options.workload, WorkloadChoice::File);
        assert_eq!(options.arrival, Arrival::Open { rate: 500.0 });
        assert!(!options.keep_alive);
        assert_eq!(options.clients, 1000);
        assert_eq!(options.client_counts, None);
        // Defaults: five rates doubling from 500/s, of the file workload.
        let Command::Run(options) = parse(&args("rates --target x --of specweb96")).unwrap() else {
            panic!()
        };
        let rates: Vec<f64> = options.offered_rates.unwrap().iter().map(|r| r.1).collect();
        assert_eq!(rates, [500.0, 1000.0, 2000.0, 4000.0, 8000.0]);
        assert_eq!(
            options.workload,
            WorkloadChoice::SpecWeb96 { directories: 10 }
        );
        for (line, expected) in [
            (
                "rates --target x --rates 1k,0",
                "'0' is not a positive rate",
            ),
            (
                "rates --target x --rates fast",
                "'fast' is not a positive rate",
            ),
            (
                "rates --target x --rate 10",
                "give the offered rates with --rates",
            ),
            ("rates --target x --think 1s", "rates is open loop"),
            (
                "rates --target x --pipeline 2",
                "--pipeline needs closed loop",
            ),
            (
                "rates --target x --of rates",
                "--of rates: pick a request workload",
            ),
            (
                "rates --target x --of sweep",
                "sweep one variable at a time",
            ),
            (
                "clients --target x --rates 1k",
                "--rates is for the rates workload",
            ),
            (
                "rates --target x --counts 1",
                "--counts is for the clients workload",
            ),
        ] {
            let error = mistake(line);
            assert!(error.contains(expected), "{line}: {error}");
        }
    }

    #[test]
    fn plot_takes_a_title_and_a_subtitle() {
        let arguments: Vec<String> = [
            "plot",
            "a.json",
            "-o",
            "out.svg",
            "--title",
            "Flash figure 6",
            "--subtitle",
            "50 clients | CPU (2 cores), Linux 6.1 | ampd 1a2b3c4",
        ]
        .map(str::to_owned)
        .to_vec();
        let Command::Plot(options) = parse(&arguments).unwrap() else {
            panic!()
        };
        assert_eq!(options.title.as_deref(), Some("Flash figure 6"));
        assert_eq!(
            options.subtitle.as_deref(),
            Some("50 clients | CPU (2 cores), Linux 6.1 | ampd 1a2b3c4")
        );
        assert!(mistake("plot a.json --subtitle").contains("a value is required for '--subtitle"));
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("10"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert!(parse_duration("-1s").is_err());
    }
}
