//! The command line: parse arguments into a `Config`, bind, say where we serve, run.
//!
//! Owns: argument parsing and how failures are reported (one `ampd: ` line, exit status 1).
//! Must not touch: serving itself (that is `engine`'s).

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use ampd::config::{Arch, Config, HelperMode};
use ampd::content::resolve::DocRoot;
use ampd::engine;

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
    ampd --help | --version

OPTIONS:
    --listen ADDR              address to listen on [default: 127.0.0.1:8080]
    --arch ARCH                concurrency architecture [default: reactor]
{arches}    --threads N                loops (reactor, uring: one per core), pool threads (mt: 64),
                               most connection threads (tpc: 2048), processes (mp: 8)
    --helpers N                helpers per loop for disk work [default: 4]
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
    match start(std::env::args().skip(1).collect()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure(message)) => {
            eprintln!("ampd: {message}");
            ExitCode::from(1)
        }
    }
}

fn start(args: Vec<String>) -> Result<(), Failure> {
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
        Some("serve") => serve(args.collect()),
        // Not in --help: how the server starts its own helper processes (--helpers-mode process).
        Some(engine::helper_process::SUBCOMMAND) => engine::helper_process::serve_parent()
            .map_err(|error| Failure(format!("helper process: {}", plain(&error)))),
        Some(other) => Err(Failure(format!(
            "unknown command '{other}' (try 'ampd --help')"
        ))),
    }
}

fn serve(args: Vec<String>) -> Result<(), Failure> {
    let mut dir: Option<PathBuf> = None;
    let mut config = Config::new(PathBuf::new());
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
            "--helpers-mode" => {
                let text = value("--helpers-mode")?;
                config.helper_mode = HelperMode::from_name(&text).ok_or_else(|| {
                    Failure(format!(
                        "--helpers-mode: unknown mode '{text}' (one of: threads, process)"
                    ))
                })?;
            }
            "--autoindex" => config.static_files.autoindex = true,
            "--dotfiles" => config.static_files.dotfiles = true,
            "--follow-symlinks" => config.static_files.follow_symlinks = true,
            "--userdir" => config.static_files.userdir = Some(value("--userdir")?),
            "--no-precompressed" => config.static_files.precompressed = false,
            "--no-path-cache" => config.caches.path_cache = false,
            "--no-header-cache" => config.caches.header_cache = false,
            "--no-file-cache" => config.caches.file_cache = false,
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
    config.static_files.root = root.clone();
    let doc_root = DocRoot::open(config.static_files.clone()).map_err(|error| {
        Failure(format!(
            "document root {}: {}",
            root.display(),
            plain(&error)
        ))
    })?;

    let bound = engine::bind(&config).map_err(|error| {
        Failure(format!(
            "cannot listen on {}: {}",
            config.listen,
            plain(&error)
        ))
    })?;
    let mut stdout = std::io::stdout();
    let _ = writeln!(
        stdout,
        "ampd {VERSION} serving {} at http://{}/ ({})",
        root.display(),
        bound.local,
        engine::describe(&config, &bound),
    );
    let _ = stdout.flush();
    engine::run(config, doc_root, bound)
        .map_err(|error| Failure(format!("server stopped: {}", plain(&error))))
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
