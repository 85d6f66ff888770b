//! The program: read the command line (`cli`), then the start-up sequence: logs, document
//! roots, bind, pid file, drop privileges, persistent applications, signals, ready, serve,
//! drain, stop the applications, exit.
//!
//! Owns: the start-up order, and how failures are reported (a usage mistake: clap's message,
//! exit status 2; anything else: one `ampd: ` line, exit status 1).
//! Must not touch: the grammar of the command line (`cli`), serving itself (`engine`),
//! signals' meaning (`ops`).

mod cli;

use std::io::Write;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use ampd::config::{self, plain, Config, Level};
use ampd::engine::{self, Start};
use ampd::log::access::LogFile;
use ampd::log::build_info::VERSION;
use ampd::log::error;
use ampd::ops::{self, notify::notify, Shared};
use ampd::site::{BuildError, Generation};
use ampd::tls::TlsError;

use ampd::ops::pid_file::Order;
use cli::{OrderTarget, Request, ServeArgs};

/// A start-up failure, reported as one line.
struct Failure(String);

/// How `main` ends.
enum Stop {
    /// Exit 1 with one `ampd: ` line.
    Failed(Failure),
    /// A usage mistake: clap's message, exit 2.
    Usage(clap::Error),
}

impl From<Failure> for Stop {
    fn from(failure: Failure) -> Stop {
        Stop::Failed(failure)
    }
}

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
    let request = match cli::parse(std::env::args_os()) {
        Ok(request) => request,
        Err(usage) => return usage_exit(&usage),
    };
    match start(request, activated) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Stop::Failed(Failure(message))) => {
            eprintln!("ampd: {message}");
            ExitCode::from(1)
        }
        Err(Stop::Usage(usage)) => usage_exit(&usage),
    }
}

/// Print clap's message (help and version to stdout, mistakes to stderr) and exit with its
/// code: 0 for help, 2 for a mistake.
fn usage_exit(usage: &clap::Error) -> ExitCode {
    let _ = usage.print();
    ExitCode::from(u8::try_from(usage.exit_code()).unwrap_or(2))
}

fn start(request: Request, activated: Vec<OwnedFd>) -> Result<(), Stop> {
    match request {
        Request::Help(page) => print!("{page}"),
        Request::Order(order, target) => send_order(order, &target)?,
        Request::ShortVersion => println!("{}", cli::short_version()),
        Request::LongVersion => println!("{}", cli::long_version()),
        Request::Serve(args) => serve(*args, activated)?,
        Request::Run(file) => run(&file, activated)?,
        Request::Check(file) => {
            check(&file)?;
        }
        Request::Helper => engine::helper_process::serve_parent()
            .map_err(|error| Failure(format!("helper process: {}", plain(&error))))?,
        Request::AcmeManager => ampd::tls::acme::process::serve()
            .map_err(|error| Failure(format!("acme manager: {}", plain(&error))))?,
    }
    Ok(())
}

fn serve(mut args: ServeArgs, activated: Vec<OwnedFd>) -> Result<(), Stop> {
    let dir = args.dir.take().unwrap_or_else(|| PathBuf::from("."));
    let root = document_root(&dir)?;
    let config = cli::serve_config(args, root.clone()).map_err(Stop::Usage)?;
    Ok(launch(
        config,
        None,
        &root.display().to_string(),
        activated,
    )?)
}

/// `dir` made absolute, if it is a directory ampd can list.
fn document_root(dir: &Path) -> Result<PathBuf, Failure> {
    let root = std::fs::canonicalize(dir).map_err(|error| {
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
    Ok(root)
}

/// `ampd run FILE` (also `run -c FILE`, `-c FILE`).
fn run(file: &Path, activated: Vec<OwnedFd>) -> Result<(), Failure> {
    let file = absolute(file);
    let config = config::load_file(&file).map_err(|error| Failure(error.to_string()))?;
    launch(
        config,
        Some(file.clone()),
        &file.display().to_string(),
        activated,
    )
}

/// `ampd check FILE` (also `check -c FILE`, `-t -c FILE`): everything `run` checks before it
/// binds.
fn check(path: &Path) -> Result<Config, Failure> {
    let config = config::check_file(path).map_err(|error| Failure(error.to_string()))?;
    let sites = config.sites.len();
    let locations: usize = config.sites.iter().map(|site| site.locations.len()).sum();
    let generation = Generation::build(config.clone(), 1).map_err(|error| {
        Failure(format!(
            "{}: {error}{}",
            path.display(),
            build_hint(Some(path), &error)
        ))
    })?;
    for warning in &generation.warnings {
        eprintln!("ampd: {}: warning: {warning}", path.display());
    }
    println!(
        "ampd: {}: configuration OK ({sites} site{}, {locations} location{})",
        path.display(),
        if sites == 1 { "" } else { "s" },
        if locations == 1 { "" } else { "s" },
    );
    Ok(config)
}

/// The start-up sequence, then serve until a graceful stop has drained every loop.
fn launch(
    mut config: Config,
    file: Option<PathBuf>,
    what: &str,
    activated: Vec<OwnedFd>,
) -> Result<(), Failure> {
    error::configure(&config.logs).map_err(|failure| {
        let path = config.logs.error.as_deref().unwrap_or(Path::new("stderr"));
        Failure(format!("error log {}: {}", path.display(), plain(&failure)))
    })?;
    let bound = engine::bind(&config, activated).map_err(|failure| Failure(failure.to_string()))?;
    // The addresses as bound (a port 0 is the kernel's choice): what an HTTPS redirect names.
    config.listen = bound.listening();
    let generation = Generation::build(config, 1).map_err(|failure| {
        Failure(format!(
            "{failure}{}",
            build_hint(file.as_deref(), &failure)
        ))
    })?;
    for warning in &generation.warnings {
        error::log(Level::Warn, format_args!("{warning}"));
    }
    let config = generation.config.clone();
    write_pid_file(&config, file.as_deref())?;
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
    // As the server's user, before the first request can be routed to them.
    ops::applications::start(&config.applications)
        .map_err(|failure| Failure(failure.to_string()))?;
    // Writes its state directory as the server's user; never on a serving thread.
    ampd::tls::acme::start(&config);

    let mut stdout = std::io::stdout();
    let _ = writeln!(
        stdout,
        "ampd {VERSION} serving {what} at {} ({})",
        bound.urls(),
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
    // No script outlives the server (their requests are over or cut by now).
    ampd::programs::cgi::stop_process_scripts(ampd::programs::cgi::STOP_WAIT);
    // After the drain: requests in flight to an application have finished. (The mp master
    // stops its own; nothing is held here then.)
    ops::applications::stop_within(Duration::MAX);
    ops::pid_file::remove_written();
    match served {
        Ok(()) => {
            error::log(Level::Info, format_args!("stopped"));
            Ok(())
        }
        Err(failure) => Err(Failure(format!("server stopped: {}", plain(&failure)))),
    }
}

/// Write the pid file: `pid_file` (a failure stops the start), or, for a server started with a
/// configuration file that sets none, the default one `ampd reload -c FILE` looks for
/// (`ops::pid_file`; a failure there is a warning: the server runs, unreachable by name).
/// `ops::pid_file::remove_written` removes it at exit.
fn write_pid_file(config: &Config, file: Option<&Path>) -> Result<(), Failure> {
    if let Some(path) = &config.process.pid_file {
        ops::process::write_pid_file(path).map_err(|failure| {
            Failure(format!("pid file {}: {}", path.display(), plain(&failure)))
        })?;
        ops::pid_file::remember(path);
        return Ok(());
    }
    let Some(path) = file.and_then(ops::pid_file::default_path) else {
        return Ok(());
    };
    match ops::pid_file::write_default(&path) {
        Ok(()) => ops::pid_file::remember(&path),
        Err(failure) => error::log(
            Level::Warn,
            format_args!(
                "pid file {}: {}; `ampd reload|stop|reopen` cannot find this server (set \
                     pid_file)",
                path.display(),
                plain(&failure)
            ),
        ),
    }
    Ok(())
}

/// `ampd reload|stop|reopen [-c FILE] [--pid-file PATH]`: find the server's pid file, check
/// the process is an ampd, send the signal. A reload checks FILE first, as `ampd check` does:
/// a file the server would refuse is reported here, where it is read, not only in its error
/// log.
fn send_order(order: Order, target: &OrderTarget) -> Result<(), Failure> {
    let config_exists = target.config.exists();
    let mut configured_pid_file = None;
    if order == Order::Reload && (target.config_given || config_exists) {
        configured_pid_file = check(&target.config)?.process.pid_file;
    } else if config_exists {
        configured_pid_file = config::pid_file_setting(&target.config);
    } else if target.config_given && target.pid_file.is_none() {
        return Err(Failure(format!(
            "{}: no such file (hint: the configuration file the server was started with)",
            target.config.display()
        )));
    }
    let file = absolute(&target.config);
    let pid_file = target
        .pid_file
        .clone()
        .or(configured_pid_file)
        .or_else(|| ops::pid_file::default_path(&file))
        .ok_or_else(|| {
            Failure(format!(
                "{} sets no pid_file, and there is no runtime directory for the default one \
                 (hint: set XDG_RUNTIME_DIR, pid_file in the file, or give --pid-file)",
                file.display()
            ))
        })?;
    let hint = if target.pid_file.is_some() {
        "a server writes it when started with --pid-file (ampd serve) or pid_file (a file)"
            .to_owned()
    } else {
        format!(
            "start the server with 'ampd run -c {}', or give --pid-file",
            file.display()
        )
    };
    let pid = ops::pid_file::send(order, &pid_file, &hint)
        .map_err(|failure| Failure(failure.to_string()))?;
    println!(
        "ampd: sent {} to process {pid} ({}): it {}",
        order.signal_name(),
        pid_file.display(),
        order.effect()
    );
    Ok(())
}

/// ` (hint: …)` for a build failure a hint helps with: a certificate, key or CA file that does
/// not exist yet (the TLS examples have the reader make theirs first).
fn build_hint(file: Option<&Path>, error: &BuildError) -> String {
    match (file, error) {
        (Some(file), BuildError::Tls(TlsError::Missing { .. })) => {
            let text = std::fs::read_to_string(file).unwrap_or_default();
            format!(" (hint: {})", config::missing_file_hint(file, &text))
        }
        _ => String::new(),
    }
}

/// `path` made absolute against the working directory (a reload must find the same file).
fn absolute(path: &Path) -> PathBuf {
    if path.is_absolute() {
        return path.to_path_buf();
    }
    std::env::current_dir().map_or_else(|_| path.to_path_buf(), |dir| dir.join(path))
}
