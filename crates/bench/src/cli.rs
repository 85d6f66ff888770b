//! The command line: `ampd-bench WORKLOAD [options]`, `ampd-bench plot`, `ampd-bench compare`.
//!
//! Owns: turning arguments into typed options, and the usage text. Every mistake is one line
//! that names the argument. Must not touch: running anything.

use std::path::PathBuf;
use std::time::Duration;

use crate::client::{Arrival, Length};
use crate::handshakes::{HandshakeOptions, TlsVersion};
use crate::workload::parse_size;

pub const USAGE: &str = "\
usage: ampd-bench WORKLOAD [options] --target [NAME=]http://HOST:PORT[/PATH] ...
       ampd-bench plot FILE.json... [-o OUT.svg|OUT.png] [--metric M] [--title T]
                  [--subtitle TEXT]
       ampd-bench compare FILE.json... --base NAME [--metric M]
       ampd-bench handshakes --url https://HOST:PORT/PATH [--resume] [--tls 1.2|1.3]
                  [--connections N] [--duration TIME] [--warmup TIME] [--timeout TIME]

workloads:
  file                 the URL of each target, over and over (Flash 6.1)
  sweep                one run per file size: --sizes 64,1k,...,10m --path '/f{size}.bin'
  specweb96            SPECweb96 classes 35/50/14/1 % over --dirs N directories (/specweb/...)
  webstone             WebStone mix 500 B 35%, 5 KB 50%, 50 KB 14%, 5 MB 1% (/webstone/...)
  replay               --log FILE (Common/Combined Log Format), GET lines in order, looped;
                       --dataset BYTES keeps the prefix whose files fit (Flash 6.2)
  clients              one run per client count: --counts 1,16,64,256 --of WORKLOAD
  (specweb96, webstone, sweep and replay also take --create DIR: write their files there)

options:
  --target [NAME=]URL  server to measure (repeat; runs interleave A B C A B C)
  --clients N          simultaneous clients [50]
  --duration TIME      measured time per run, e.g. 10s, 500ms [10s]
  --requests N         measure N requests per run instead of a duration
  --warmup TIME        excluded from the figures [1s]
  --rate R             open loop: R requests/s in total (latency counted from when due)
  --think TIME         closed loop: pause between a response and the next request [0]
  --close              a new connection per request (default: persistent connections)
  --pipeline D         D requests written at once per connection [1]
  --timeout TIME       no complete response in TIME is a timeout error [5s]
  --repeat N           runs per point and target [1]; figures are the median run
  --seed N             random seed of the request stream [1]
  --no-verify-size     do not check body lengths against the known file sizes
  --cpu N              pin ampd-bench to CPU N
  --json FILE          write every figure as JSON (for plot and compare)
  --csv FILE           write one CSV row per point and target
  --quiet              no progress and per-run lines on stderr

handshakes: a new TLS connection per request (connect, handshake, GET with Connection: close,
  the whole response), from --connections threads [32]; full handshakes unless --resume (offer
  the session the server gave last). Neither the certificate nor the handshake signature is
  verified; an X25519 key share, AES-128-GCM suites only. --duration [10s], --warmup [1s], --timeout [5s].
  Prints connections/s and a RESULT line (requests, duration_us, bytes, errors, p50_us,
  p99_us, resumed).
";

/// What the command line asks for.
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    Run(Box<RunOptions>),
    Plot(PlotOptions),
    Compare(CompareOptions),
    Handshakes(HandshakeOptions),
    Help,
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

/// Parses the arguments after the program name.
///
/// # Errors
/// One line naming the unknown workload or option, or the bad value.
pub fn parse(arguments: &[String]) -> Result<Command, String> {
    let Some(first) = arguments.first() else {
        return Err("no workload given (try --help)".into());
    };
    let rest = &arguments[1..];
    match first.as_str() {
        "-h" | "--help" | "help" => Ok(Command::Help),
        "plot" => parse_plot(rest),
        "compare" => parse_compare(rest),
        "handshakes" => parse_handshakes(rest).map(Command::Handshakes),
        "file" | "sweep" | "specweb96" | "webstone" | "replay" | "clients" => {
            parse_run(first, rest).map(|options| Command::Run(Box::new(options)))
        }
        other => Err(format!(
            "unknown workload '{other}' (expected file, sweep, specweb96, webstone, replay, \
             clients, plot, compare or handshakes)"
        )),
    }
}

/// Walks `--name value` pairs.
struct Arguments<'a> {
    items: std::slice::Iter<'a, String>,
}

impl<'a> Arguments<'a> {
    fn value(&mut self, option: &str) -> Result<&'a str, String> {
        self.items
            .next()
            .map(String::as_str)
            .ok_or_else(|| format!("{option} needs a value"))
    }

    fn number<T: std::str::FromStr>(&mut self, option: &str) -> Result<T, String> {
        let text = self.value(option)?;
        text.parse()
            .map_err(|_| format!("{option}: '{text}' is not a valid number"))
    }
}

#[derive(Default)]
struct Raw {
    sizes: Option<String>,
    path: Option<String>,
    directories: Option<u64>,
    log: Option<PathBuf>,
    data_set: Option<u64>,
    counts: Option<String>,
    of: Option<String>,
    rate: Option<f64>,
    think: Option<Duration>,
    duration: Option<Duration>,
    requests: Option<u64>,
}

fn parse_run(name: &str, rest: &[String]) -> Result<RunOptions, String> {
    let mut options = RunOptions {
        name: name.to_owned(),
        workload: WorkloadChoice::File,
        client_counts: None,
        targets: Vec::new(),
        clients: 50,
        arrival: Arrival::Closed {
            think: Duration::ZERO,
        },
        keep_alive: true,
        pipeline: 1,
        length: Length::Time(Duration::from_secs(10)),
        warmup: Duration::from_secs(1),
        timeout: Duration::from_secs(5),
        repeat: 1,
        seed: 1,
        verify_sizes: true,
        create: None,
        cpu: None,
        json: None,
        csv: None,
        quiet: false,
    };
    let mut raw = Raw::default();
    let mut arguments = Arguments { items: rest.iter() };
    while let Some(option) = arguments.items.next() {
        let option = option.as_str();
        match option {
            "--target" => options.targets.push(arguments.value(option)?.to_owned()),
            "--clients" => options.clients = positive(arguments.number(option)?, option)?,
            "--duration" => raw.duration = Some(parse_duration(arguments.value(option)?)?),
            "--requests" => raw.requests = Some(positive(arguments.number(option)?, option)?),
            "--warmup" => options.warmup = parse_duration(arguments.value(option)?)?,
            "--rate" => raw.rate = Some(arguments.number(option)?),
            "--think" => raw.think = Some(parse_duration(arguments.value(option)?)?),
            "--close" => options.keep_alive = false,
            "--keep-alive" => options.keep_alive = true,
            "--pipeline" => options.pipeline = positive(arguments.number(option)?, option)?,
            "--timeout" => options.timeout = parse_duration(arguments.value(option)?)?,
            "--repeat" => options.repeat = positive(arguments.number(option)?, option)?,
            "--seed" => options.seed = arguments.number(option)?,
            "--no-verify-size" => options.verify_sizes = false,
            "--create" => options.create = Some(arguments.value(option)?.into()),
            "--cpu" => options.cpu = Some(arguments.number(option)?),
            "--json" => options.json = Some(arguments.value(option)?.into()),
            "--csv" => options.csv = Some(arguments.value(option)?.into()),
            "--quiet" | "-q" => options.quiet = true,
            "--sizes" => raw.sizes = Some(arguments.value(option)?.to_owned()),
            "--path" => raw.path = Some(arguments.value(option)?.to_owned()),
            "--dirs" => raw.directories = Some(positive(arguments.number(option)?, option)?),
            "--log" => raw.log = Some(arguments.value(option)?.into()),
            "--dataset" => raw.data_set = Some(parse_size(arguments.value(option)?)?),
            "--counts" => raw.counts = Some(arguments.value(option)?.to_owned()),
            "--of" => raw.of = Some(arguments.value(option)?.to_owned()),
            other => return Err(format!("{name}: unknown option '{other}' (try --help)")),
        }
    }
    options.length = match (raw.duration, raw.requests) {
        (Some(_), Some(_)) => return Err("give --duration or --requests, not both".into()),
        (_, Some(count)) => Length::Requests(count),
        (Some(duration), None) => Length::Time(duration),
        (None, None) => options.length,
    };
    options.arrival = match (raw.rate, raw.think) {
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
    let kind = if name == "clients" {
        let counts = raw.counts.as_deref().unwrap_or("1,4,16,64,256");
        options.client_counts = Some(
            counts
                .split(',')
                .map(|count| match count.trim().parse::<usize>() {
                    Ok(count) if count > 0 => Ok(count),
                    _ => Err(format!("--counts: '{count}' is not a positive number")),
                })
                .collect::<Result<_, _>>()?,
        );
        match raw.of.as_deref().unwrap_or("file") {
            "clients" => return Err("--of clients: pick a request workload".into()),
            kind @ ("file" | "sweep" | "specweb96" | "webstone" | "replay") => kind.to_owned(),
            other => return Err(format!("--of: unknown workload '{other}'")),
        }
    } else {
        name.to_owned()
    };
    options.workload = match kind.as_str() {
        "sweep" => WorkloadChoice::Sweep {
            sizes: parse_sizes(raw.sizes.as_deref().unwrap_or("64,1k,4k,16k,100k,1m,10m"))?,
            path: raw.path.unwrap_or_else(|| "/f{size}.bin".into()),
        },
        "specweb96" => WorkloadChoice::SpecWeb96 {
            directories: raw.directories.unwrap_or(10),
        },
        "webstone" => WorkloadChoice::WebStone,
        "replay" => WorkloadChoice::Replay {
            log: raw.log.ok_or("replay needs --log FILE")?,
            data_set: raw.data_set,
        },
        _ => WorkloadChoice::File,
    };
    if options.name == "clients" && matches!(options.workload, WorkloadChoice::Sweep { .. }) {
        return Err("--of sweep: sweep one variable at a time".into());
    }
    if options.targets.is_empty() && options.create.is_none() {
        return Err(format!("{name}: no --target given"));
    }
    Ok(options)
}

fn positive<T: PartialOrd + Default>(value: T, option: &str) -> Result<T, String> {
    if value > T::default() {
        Ok(value)
    } else {
        Err(format!("{option} must be at least 1"))
    }
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

fn parse_plot(rest: &[String]) -> Result<Command, String> {
    let mut options = PlotOptions {
        inputs: Vec::new(),
        output: "ampd-bench.svg".into(),
        format: ChartFormat::Svg,
        metric: "requests_per_second".into(),
        title: None,
        subtitle: None,
    };
    let mut arguments = Arguments { items: rest.iter() };
    while let Some(argument) = arguments.items.next() {
        match argument.as_str() {
            "-o" | "--output" => options.output = arguments.value(argument)?.into(),
            "--metric" => options.metric = arguments.value(argument)?.to_owned(),
            "--title" => options.title = Some(arguments.value(argument)?.to_owned()),
            "--subtitle" => options.subtitle = Some(arguments.value(argument)?.to_owned()),
            other if other.starts_with('-') => {
                return Err(format!("plot: unknown option '{other}'"))
            }
            input => options.inputs.push(input.into()),
        }
    }
    if options.inputs.is_empty() {
        return Err("plot: no JSON result files given".into());
    }
    options.format = ChartFormat::of(&options.output)?;
    Ok(Command::Plot(options))
}

fn parse_compare(rest: &[String]) -> Result<Command, String> {
    let mut inputs = Vec::new();
    let mut base = None;
    let mut metric = "requests_per_second".to_owned();
    let mut arguments = Arguments { items: rest.iter() };
    while let Some(argument) = arguments.items.next() {
        match argument.as_str() {
            "--base" => base = Some(arguments.value(argument)?.to_owned()),
            "--metric" => metric = arguments.value(argument)?.to_owned(),
            other if other.starts_with('-') => {
                return Err(format!("compare: unknown option '{other}'"))
            }
            input => inputs.push(input.into()),
        }
    }
    if inputs.is_empty() {
        return Err("compare: no JSON result files given".into());
    }
    let base = base.ok_or("compare needs --base NAME (the target the ratios are of)")?;
    Ok(Command::Compare(CompareOptions {
        inputs,
        base,
        metric,
    }))
}

fn parse_handshakes(rest: &[String]) -> Result<HandshakeOptions, String> {
    let mut options = HandshakeOptions {
        url: String::new(),
        connections: 32,
        duration: Duration::from_secs(10),
        warmup: Duration::from_secs(1),
        timeout: Duration::from_secs(5),
        resume: false,
        version: TlsVersion::Any,
    };
    let mut arguments = Arguments { items: rest.iter() };
    while let Some(argument) = arguments.items.next() {
        match argument.as_str() {
            "--url" => options.url = arguments.value(argument)?.to_owned(),
            "--connections" => options.connections = arguments.number(argument)?,
            "--duration" => options.duration = parse_duration(arguments.value(argument)?)?,
            "--warmup" => options.warmup = parse_duration(arguments.value(argument)?)?,
            "--timeout" => options.timeout = parse_duration(arguments.value(argument)?)?,
            "--resume" => options.resume = true,
            "--tls" => {
                options.version = match arguments.value(argument)? {
                    "1.2" => TlsVersion::V12,
                    "1.3" => TlsVersion::V13,
                    other => return Err(format!("--tls: '{other}' (expected 1.2 or 1.3)")),
                }
            }
            other => return Err(format!("handshakes: unknown option '{other}'")),
        }
    }
    if options.url.is_empty() {
        return Err("handshakes needs --url https://HOST:PORT/PATH".into());
    }
    if options.connections == 0 {
        return Err("--connections must be at least 1".into());
    }
    Ok(options)
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

    #[test]
    fn mistakes_are_one_line_each() {
        for (line, expected) in [
            ("", "no workload given"),
            ("nonsense", "unknown workload 'nonsense'"),
            ("file", "no --target given"),
            ("file --target x --bogus", "unknown option '--bogus'"),
            ("file --target x --clients", "--clients needs a value"),
            (
                "file --target x --clients 0",
                "--clients must be at least 1",
            ),
            (
                "file --target x --duration soon",
                "'soon' is not a duration",
            ),
            (
                "file --target x --rate 10 --think 1s",
                "--think is for closed loop",
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
            ("compare r.json", "compare needs --base NAME"),
            ("plot", "no JSON result files"),
        ] {
            let error = parse(&args(line)).unwrap_err();
            assert!(error.contains(expected), "{line}: {error}");
            assert!(!error.contains('\n'));
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
        assert!(parse(&args("plot a.json --subtitle"))
            .unwrap_err()
            .contains("--subtitle needs a value"));
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
