//! The command line: `serve DIR` (flags fill a `Config`), `run -c FILE` and `check FILE` (the
//! file fills the same `Config`); then the start-up sequence: logs, document roots, bind, pid
//! file, drop privileges, signals, ready, serve, drain, exit.
//!
//! Owns: argument parsing, the start-up order, and how failures are reported (one `ampd: `
//! line, exit status 1).
//! Must not touch: serving itself (that is `engine`'s), signals' meaning (`ops`).

use std::io::Write;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use ampd::config::{self, Arch, Config, HelperMode, Level};
use ampd::engine::{self, Start};
use ampd::log::access::LogFile;
use ampd::log::error;
use ampd::ops::{self, notify::notify, Shared};
use ampd::site::Generation;

const VERSION: &str = env!("CARGO_PKG_VERSION");

fn usage() -> String {
    let mut arches = String::new();
    for arch in Arch::ALL {
        arches.push_str(&format!("      {:<9} {}\n", arch.name(), arch.describe()));
    }
    format!(
        "ampd {VERSION}: a web server built on Flash's AMPED architecture

USAGE:
    ampd serve [DIR] [OPTIONS]    serve DIR (default: the current directory)
    ampd run -c FILE              serve as configured in FILE (TOML; see docs/config.md)
    ampd check FILE               check FILE and exit: 0 if ampd run would accept it
    ampd --help | --version

SIGNALS (ampd run and ampd serve):
    HUP reload FILE, USR1 reopen logs, TERM/INT graceful stop, QUIT exit at once

OPTIONS:
    --listen ADDR              address to listen on [default: 127.0.0.1:8080]
    --arch ARCH                concurrency architecture [default: reactor]
{arches}    --threads N                loops (reactor, uring: one per core), pool threads (mt: 64),
                               most connection threads (tpc: 2048), processes (mp: 8)
    --helpers N                helpers per loop for disk work, started at once [default: 4]
    --helpers-max N            most helpers per loop when disk work waits [default: 32]
    --helpers-mode MODE        'threads', or 'process' for helper processes as in Flash
                               [default: threads]
    --autoindex                list directories that have no index.html
    --dotfiles                 serve files whose names start with '.'
    --follow-symlinks          follow symlinks that lead out of DIR
    --userdir PATTERN          serve /~user/ from PATTERN: relative to the user's home
                               (public_html), or absolute with * for the user name
    --no-precompressed         do not serve .br/.gz siblings
    --no-path-cache            switch off the path translation cache
    --no-header-cache          switch off the response header cache
    --no-file-cache            switch off the file data cache
    --revalidate-after SECS    age at which a cached translation is checked with stat, for
                               changes inotify cannot report (network, FUSE) [default: 1]
    --sendfile-threshold BYTES files larger than this go by sendfile [default: 65536]
    --max-body BYTES           largest request body read and discarded [default: 1048576]
    --header-timeout SECS      time to receive a request head [default: 20]
    --keepalive-timeout SECS   idle time on a persistent connection [default: 75]
    --send-timeout SECS        time a response may make no progress [default: 60]
"
    )
}

/// A command-line mistake or start-up failure, reported as one line.
struct Failure(String);

fn main() -> ExitCode {
    // Before any thread exists, so that every thread inherits the mask and only the signal
    // thread's signalfd sees these signals.
    if let Err(failure) = ops::signals::block() {
        eprintln!("ampd: cannot block signals: {failure}");
        return ExitCode::from(1);
    }
    // Also before anything opens a descriptor: the sockets systemd (or the process this one
    // upgrades, with its ready pipe after them) passed sit at 3, 4, ….
    if let Err(failure) = ops::upgrade::at_start() {
        eprintln!("ampd: upgrade: {}", plain(&failure));
        return ExitCode::from(1);
    }
    let activated = match ampd_sys::socket::take_activated_listeners() {
        Ok(listeners) => listeners,
        Err(failure) => {
            eprintln!("ampd: socket activation: {}", plain(&failure));
            return ExitCode::from(1);
        }
    };
    match start(std::env::args().skip(1).collect(), activated) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure(message)) => {
            eprintln!("ampd: {message}");
            ExitCode::from(1)
        }
    }
}

fn start(args: Vec<String>, activated: Vec<OwnedFd>) -> Result<(), Failure> {
    let mut args = args.into_iter();
    match args.next().as_deref() {
        None | Some("--help" | "-h" | "help") => {
            print!("{}", usage());
            Ok(())
        }
        Some("--version" | "-V") => {
            println!("ampd {VERSION}");
            Ok(())
        }
        Some("serve") => serve(args.collect(), activated),
        Some("run") => run(args.collect(), activated),
        Some("check") => check(args.collect()),
        // Not in --help: how the server starts its own helper processes (--helpers-mode process).
        Some(engine::helper_process::SUBCOMMAND) => engine::helper_process::serve_parent()
            .map_err(|error| Failure(format!("helper process: {}", plain(&error)))),
        Some(other) => Err(Failure(format!(
            "unknown command '{other}' (try 'ampd --help')"
        ))),
    }
}

fn serve(args: Vec<String>, activated: Vec<OwnedFd>) -> Result<(), Failure> {
    let mut dir: Option<PathBuf> = None;
    let mut config = Config::new(PathBuf::new());
    let mut helpers_max = None;
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        let mut value = |name: &str| {
            args.next()
                .ok_or_else(|| Failure(format!("{name} needs a value")))
        };
        match arg.as_str() {
            "--help" | "-h" => {
                print!("{}", usage());
                return Ok(());
            }
            "--listen" => {
                let text = value("--listen")?;
                config.listen = text.parse().map_err(|_| {
                    Failure(format!(
                        "--listen: '{text}' is not an address like 127.0.0.1:8080"
                    ))
                })?;
            }
            "--arch" => {
                let text = value("--arch")?;
                config.arch = Arch::from_name(&text).ok_or_else(|| {
                    let names: Vec<&str> = Arch::ALL.iter().map(|arch| arch.name()).collect();
                    Failure(format!(
                        "--arch: unknown architecture '{text}' (one of: {})",
                        names.join(", ")
                    ))
                })?;
            }
            "--threads" => {
                config.threads = Some(positive("--threads", &value("--threads")?)?);
            }
            "--helpers" => config.helpers = positive("--helpers", &value("--helpers")?)?,
            "--helpers-max" => {
                helpers_max = Some(positive("--helpers-max", &value("--helpers-max")?)?);
            }
            "--helpers-mode" => {
                let text = value("--helpers-mode")?;
                config.helper_mode = HelperMode::from_name(&text).ok_or_else(|| {
                    Failure(format!(
                        "--helpers-mode: unknown mode '{text}' (one of: threads, process)"
                    ))
                })?;
            }
            "--autoindex" => config.serve_location().static_files.autoindex = true,
            "--dotfiles" => config.serve_location().static_files.dotfiles = true,
            "--follow-symlinks" => config.serve_location().static_files.follow_symlinks = true,
            "--userdir" => config.serve_location().static_files.userdir = Some(value("--userdir")?),
            "--no-precompressed" => config.serve_location().static_files.precompressed = false,
            "--no-path-cache" => config.caches.path_cache = false,
            "--no-header-cache" => config.caches.header_cache = false,
            "--no-file-cache" => config.caches.file_cache = false,
            "--revalidate-after" => {
                config.caches.revalidate_after =
                    seconds("--revalidate-after", &value("--revalidate-after")?)?;
            }
            "--sendfile-threshold" => {
                config.send.sendfile_threshold =
                    number("--sendfile-threshold", &value("--sendfile-threshold")?)?;
            }
            "--max-body" => config.limits.max_body = number("--max-body", &value("--max-body")?)?,
            "--header-timeout" => {
                config.limits.header_timeout =
                    seconds("--header-timeout", &value("--header-timeout")?)?
            }
            "--keepalive-timeout" => {
                config.limits.keepalive_timeout =
                    seconds("--keepalive-timeout", &value("--keepalive-timeout")?)?;
            }
            "--send-timeout" => {
                config.limits.send_timeout = seconds("--send-timeout", &value("--send-timeout")?)?
            }
            flag if flag.starts_with('-') => {
                return Err(Failure(format!(
                    "unknown option '{flag}' (try 'ampd serve --help')"
                )));
            }
            path if dir.is_none() => dir = Some(PathBuf::from(path)),
            extra => {
                return Err(Failure(format!(
                    "unexpected argument '{extra}': serve takes one directory"
                )))
            }
        }
    }

    let dir = dir.unwrap_or_else(|| PathBuf::from("."));
    let root = std::fs::canonicalize(&dir).map_err(|error| {
        Failure(format!(
            "document root {}: {}",
            dir.display(),
            plain(&error)
        ))
    })?;
    if !root.is_dir() {
        return Err(Failure(format!(
            "document root {}: not a directory",
            root.display()
        )));
    }
    std::fs::read_dir(&root).map_err(|error| {
        Failure(format!(
            "document root {}: {}",
            root.display(),
            plain(&error)
        ))
    })?;
    match helpers_max {
        Some(max) if max < config.helpers => {
            return Err(Failure(format!(
                "--helpers-max {max} is less than --helpers {}",
                config.helpers
            )));
        }
        Some(max) => config.helpers_max = max,
        None => config.helpers_max = config.helpers_max.max(config.helpers),
    }
    config.serve_location().static_files.root = root.clone();
    launch(config, None, &root.display().to_string(), activated)
}

/// `ampd run -c FILE` (also `--config FILE`).
fn run(args: Vec<String>, activated: Vec<OwnedFd>) -> Result<(), Failure> {
    let mut file = None;
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "-c" | "--config" => {
                file = Some(PathBuf::from(args.next().ok_or_else(|| {
                    Failure(format!("{arg} needs a configuration file"))
                })?));
            }
            "--help" | "-h" => {
                print!("{}", usage());
                return Ok(());
            }
            other => {
                return Err(Failure(format!(
                    "unexpected argument '{other}' (ampd run -c FILE)"
                )))
            }
        }
    }
    let file = file.ok_or_else(|| Failure("run needs -c FILE".to_owned()))?;
    let file = absolute(&file);
    let config = config::load_file(&file).map_err(|error| Failure(error.to_string()))?;
    launch(
        config,
        Some(file.clone()),
        &file.display().to_string(),
        activated,
    )
}

/// `ampd check FILE`: everything `run` checks before it binds.
fn check(args: Vec<String>) -> Result<(), Failure> {
    let [file] = args.as_slice() else {
        return Err(Failure("check takes one configuration file".to_owned()));
    };
    let path = Path::new(file);
    let config = config::check_file(path).map_err(|error| Failure(error.to_string()))?;
    let sites = config.sites.len();
    let locations: usize = config.sites.iter().map(|site| site.locations.len()).sum();
    Generation::build(config, 1)
        .map_err(|error| Failure(format!("{}: {error}", path.display())))?;
    println!(
        "ampd: {}: configuration OK ({sites} site{}, {locations} location{})",
        path.display(),
        if sites == 1 { "" } else { "s" },
        if locations == 1 { "" } else { "s" },
    );
    Ok(())
}

/// The start-up sequence, then serve until a graceful stop has drained every loop.
fn launch(
    config: Config,
    file: Option<PathBuf>,
    what: &str,
    activated: Vec<OwnedFd>,
) -> Result<(), Failure> {
    error::configure(&config.logs).map_err(|failure| {
        let path = config.logs.error.as_deref().unwrap_or(Path::new("stderr"));
        Failure(format!("error log {}: {}", path.display(), plain(&failure)))
    })?;
    let generation = Generation::build(config, 1).map_err(|failure| {
        Failure(format!(
            "document root {}: {}",
            failure.root.display(),
            plain(&failure.error)
        ))
    })?;
    let config = generation.config.clone();
    let bound = engine::bind(&config, activated).map_err(|failure| {
        Failure(format!(
            "cannot listen on {}: {}",
            config.listen,
            plain(&failure)
        ))
    })?;
    if let Some(pid_file) = &config.process.pid_file {
        ops::process::write_pid_file(pid_file).map_err(|failure| {
            Failure(format!(
                "pid file {}: {}",
                pid_file.display(),
                plain(&failure)
            ))
        })?;
    }
    // Opened while still privileged; under mp, shared by every worker forked later.
    let log_file = LogFile::open(config.logs.access.as_deref()).map_err(|failure| {
        let path = config.logs.access.as_deref().unwrap_or(Path::new("-"));
        Failure(format!(
            "access log {}: {}",
            path.display(),
            plain(&failure)
        ))
    })?;
    let shared = Shared::new(&config)
        .map_err(|failure| Failure(format!("cannot set up the scoreboard: {}", plain(&failure))))?;
    ops::process::drop_privileges(&config.process)
        .map_err(|failure| Failure(format!("cannot switch user: {}", plain(&failure))))?;

    let mut stdout = std::io::stdout();
    let _ = writeln!(
        stdout,
        "ampd {VERSION} serving {what} at http://{}/ ({})",
        bound.local,
        engine::describe(&config, &bound),
    );
    let _ = stdout.flush();
    notify(&format!("READY=1\nMAINPID={}", std::process::id()));
    ops::upgrade::report_ready();

    // No thread exists yet: `mp` forks its workers in there; every other engine starts its
    // log and signal threads and its loops.
    let start = Start {
        generation,
        config_path: file,
        shared,
        log_file,
    };
    let served = engine::run(start, bound);
    if let Some(pid_file) = &config.process.pid_file {
        ops::process::remove_pid_file(pid_file);
    }
    match served {
        Ok(()) => {
            error::log(Level::Info, format_args!("stopped"));
            Ok(())
        }
        Err(failure) => Err(Failure(format!("server stopped: {}", plain(&failure)))),
    }
}

/// `path` made absolute against the working directory (a reload must find the same file).
fn absolute(path: &Path) -> PathBuf {
    if path.is_absolute() {
        return path.to_path_buf();
    }
    std::env::current_dir().map_or_else(|_| path.to_path_buf(), |dir| dir.join(path))
}

/// An I/O error's message without Rust's "(os error N)" suffix.
fn plain(error: &std::io::Error) -> String {
    let text = error.to_string();
    match text.find(" (os error") {
        Some(at) => text[..at].to_owned(),
        None => text,
    }
}

fn number(name: &str, text: &str) -> Result<u64, Failure> {
    text.parse()
        .map_err(|_| Failure(format!("{name}: '{text}' is not a whole number")))
}

fn positive(name: &str, text: &str) -> Result<usize, Failure> {
    match text.parse::<usize>() {
        Ok(value) if value > 0 => Ok(value),
        _ => Err(Failure(format!(
            "{name}: '{text}' is not a positive whole number"
        ))),
    }
}

fn seconds(name: &str, text: &str) -> Result<Duration, Failure> {
    let value: f64 = text
        .parse()
        .map_err(|_| Failure(format!("{name}: '{text}' is not a number of seconds")))?;
    if !(value > 0.0 && value.is_finite()) {
        return Err(Failure(format!("{name}: '{text}' must be more than zero")));
    }
    Ok(Duration::from_secs_f64(value))
}
