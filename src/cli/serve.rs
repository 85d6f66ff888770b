//! `ampd serve [DIR] [OPTIONS]`: its flags, and how they fill the same `Config` a file fills
//! (one default site serving DIR, plus exact status and health locations when asked for).
//!
//! Owns: the serve flags, their help, and the mapping onto `Config`. Must not touch: the
//! document root on disk (main checks it at start-up), serving.

use std::path::PathBuf;
use std::time::Duration;

use ampd::config::{
    Arch, Config, Handler, HelperMode, Level, ListenAddress, Location, LocationSettings, LogFormat,
};
use clap::Args;

use super::values;

/// The engines, one line each, for `ampd serve --help`.
pub fn engines_help() -> String {
    let mut text = String::from("Engines (--arch):\n");
    for arch in Arch::ALL {
        text.push_str(&format!("  {:<9} {}\n", arch.name(), arch.describe()));
    }
    text.push_str(
        "\nAddresses: 127.0.0.1:8080, [::1]:8080, localhost:8080 and 8080 (loopback, 127.0.0.1:\n  \
         the default's host), :8080 and *:8080 (every address, IPv4 and IPv6),\n  \
         0.0.0.0:8080 (every IPv4 address), [::]:8080 (every IPv6 address).\n\
         Sizes: bytes, or 64KiB, 1MiB, 2GiB. Durations: seconds (0.5), or 500ms, 30s, 5m, 1h.\n\
         Signals: USR1 reopen logs, USR2 upgrade to the binary on disk (listeners kept),
  TERM/INT graceful stop, QUIT exit at once.",
    );
    text
}

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Directory to serve [default: the current directory]
    #[arg(value_name = "DIR")]
    pub dir: Option<PathBuf>,

    /// Address to listen on; :PORT is every address, IPv4 and IPv6 (listed below)
    /// [default: 127.0.0.1:8080, loopback only]
    #[arg(short = 'l', long, value_name = "ADDR", value_parser = values::listen)]
    listen: Option<ListenAddress>,

    /// Concurrency architecture (listed below) [default: reactor]
    #[arg(short = 'a', long, value_name = "ARCH", value_parser = values::arch)]
    arch: Option<Arch>,

    /// The engine's unit: loops or rings (one per core), threads (mt: 64, tpc: 2048), mp's
    /// processes (8)
    #[arg(long, value_name = "N", value_parser = values::positive)]
    threads: Option<usize>,

    /// Helpers per loop for disk work, started at once [default: 4]
    #[arg(long, value_name = "N", value_parser = values::positive)]
    helpers: Option<usize>,

    /// Most helpers per loop when disk work waits [default: 32]
    #[arg(long, value_name = "N", value_parser = values::positive)]
    helpers_max: Option<usize>,

    /// 'threads', or 'process' for helper processes as in Flash [default: threads]
    #[arg(long, value_name = "MODE", value_parser = values::helper_mode)]
    helpers_mode: Option<HelperMode>,

    /// List directories that have no index.html
    #[arg(long)]
    autoindex: bool,

    /// Serve files whose names start with '.'
    #[arg(long)]
    dotfiles: bool,

    /// Follow symlinks that lead out of DIR
    #[arg(long)]
    follow_symlinks: bool,

    /// Serve /~user/ from PATTERN: in the user's home (public_html), or absolute with * for
    /// the user
    #[arg(long, value_name = "PATTERN")]
    userdir: Option<String>,

    /// Do not serve .br/.gz siblings
    #[arg(long)]
    no_precompressed: bool,

    /// Switch off the path translation cache
    #[arg(long)]
    no_path_cache: bool,

    /// Switch off the response header cache
    #[arg(long)]
    no_header_cache: bool,

    /// Switch off the file data cache
    #[arg(long)]
    no_file_cache: bool,

    /// Hand every read the file cache does not answer to a helper, without asking the page
    /// cache first (amped, reactor, uring)
    #[arg(long)]
    no_residency_test: bool,

    /// Age at which a cached translation is checked with stat (network, FUSE) [default: 1s]
    #[arg(long, value_name = "TIME", value_parser = values::duration)]
    revalidate_after: Option<Duration>,

    /// Files larger than this go by sendfile, e.g. 64KiB [default: 64KiB]
    #[arg(long, value_name = "SIZE", value_parser = values::size)]
    sendfile_threshold: Option<u64>,

    /// Largest request body read and discarded [default: 1MiB]
    #[arg(long, value_name = "SIZE", value_parser = values::size)]
    max_body: Option<u64>,

    /// Time to receive a request head, e.g. 500ms, 20s [default: 20s]
    #[arg(long, value_name = "TIME", value_parser = values::duration)]
    header_timeout: Option<Duration>,

    /// Idle time on a persistent connection [default: 75s]
    #[arg(long, value_name = "TIME", value_parser = values::duration)]
    keepalive_timeout: Option<Duration>,

    /// Time a response may make no progress [default: 60s]
    #[arg(long, value_name = "TIME", value_parser = values::duration)]
    send_timeout: Option<Duration>,

    /// Access log file, or '-' for standard output [default: none]
    #[arg(long, value_name = "FILE")]
    access_log: Option<PathBuf>,

    /// Access log format: common, combined or json [default: combined]
    #[arg(long, value_name = "FORMAT", value_parser = values::log_format)]
    log_format: Option<LogFormat>,

    /// Error log file, or '-' for standard error [default: -]
    #[arg(long, value_name = "FILE")]
    error_log: Option<PathBuf>,

    /// Write the server's pid to FILE ('ampd stop --pid-file FILE' finds it) [default: none]
    #[arg(long, value_name = "FILE")]
    pid_file: Option<PathBuf>,

    /// Error log level: error, warn, info or debug [default: info]
    #[arg(long, value_name = "LEVEL", value_parser = values::level)]
    log_level: Option<Level>,

    /// Serve the Prometheus metrics at this exact path, e.g. /status
    #[arg(long, value_name = "PATH", value_parser = values::location_path)]
    status: Option<String>,

    /// Answer 200 "ok" at this exact path, 503 while draining
    #[arg(long, value_name = "PATH", value_parser = values::location_path)]
    health: Option<String>,

    /// Add a header to every response, 'Name: value' (repeatable)
    #[arg(short = 'H', long = "header", value_name = "HEADER", value_parser = values::header)]
    headers: Vec<(String, String)>,
}

impl ServeArgs {
    /// The settings these flags describe, serving `root` (absolute, checked).
    ///
    /// # Errors
    /// Flags that contradict each other, as a message for clap's usage error.
    pub fn config(self, root: PathBuf) -> Result<Config, String> {
        let mut config = Config::new(root);
        if let Some(listen) = self.listen {
            config.listen = listen.listeners(false, false);
        }
        if let Some(arch) = self.arch {
            config.arch = arch;
        }
        config.threads = self.threads.or(config.threads);
        if let Some(helpers) = self.helpers {
            config.helpers = helpers;
        }
        config.helpers_max = match self.helpers_max {
            Some(max) if max < config.helpers => {
                return Err(format!(
                    "--helpers-max {max} is less than --helpers {}",
                    config.helpers
                ))
            }
            Some(max) => max,
            None => config.helpers_max.max(config.helpers),
        };
        if let Some(mode) = self.helpers_mode {
            config.helper_mode = mode;
        }

        let caches = &mut config.caches;
        caches.path_cache &= !self.no_path_cache;
        caches.header_cache &= !self.no_header_cache;
        caches.file_cache &= !self.no_file_cache;
        caches.residency_test &= !self.no_residency_test;
        if let Some(after) = self.revalidate_after {
            caches.revalidate_after = after;
        }
        if let Some(threshold) = self.sendfile_threshold {
            config.send.sendfile_threshold = threshold;
        }
        let limits = &mut config.limits;
        limits.max_body = self.max_body.unwrap_or(limits.max_body);
        limits.header_timeout = self.header_timeout.unwrap_or(limits.header_timeout);
        limits.keepalive_timeout = self.keepalive_timeout.unwrap_or(limits.keepalive_timeout);
        limits.send_timeout = self.send_timeout.unwrap_or(limits.send_timeout);

        let logs = &mut config.logs;
        // `-`: the standard streams, as most servers and tools read it.
        logs.access = self.access_log.map(|path| {
            if path.as_os_str() == "-" {
                PathBuf::from("/dev/stdout")
            } else {
                path
            }
        });
        logs.format = self.log_format.unwrap_or(logs.format);
        logs.error = self.error_log.filter(|path| path.as_os_str() != "-");
        logs.level = self.log_level.unwrap_or(logs.level);
        config.process.pid_file = self.pid_file;

        let files = config.serve_location();
        let options = &mut files.static_files;
        options.autoindex = self.autoindex;
        options.dotfiles = self.dotfiles;
        options.follow_symlinks = self.follow_symlinks;
        options.userdir = self.userdir;
        options.precompressed = !self.no_precompressed;
        files.headers = self.headers;

        let handlers = [
            (self.status, Handler::Status),
            (self.health, Handler::Health),
        ];
        if let [(Some(status), _), (Some(health), _)] = &handlers {
            if status == health {
                return Err(format!("--status and --health are both {status}"));
            }
        }
        let base = files.clone();
        for (path, handler) in handlers {
            if let Some(path) = path {
                config.sites[0].locations.push(Location {
                    path,
                    exact: true,
                    regex: None,
                    settings: LocationSettings {
                        handler,
                        ..base.clone()
                    },
                });
            }
        }
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Probe {
        #[command(flatten)]
        serve: ServeArgs,
    }

    fn config(args: &[&str]) -> Result<Config, String> {
        let probe = Probe::try_parse_from(std::iter::once("serve").chain(args.iter().copied()))
            .map_err(|error| error.to_string())?;
        probe.serve.config(PathBuf::from("/srv"))
    }

    #[test]
    fn no_flags_is_the_default_config() {
        let config = config(&[]).unwrap();
        let default = Config::new(PathBuf::from("/srv"));
        assert_eq!(config.listen, default.listen);
        assert_eq!(config.arch, default.arch);
        assert_eq!(config.helpers_max, default.helpers_max);
        assert_eq!(config.sites[0].locations.len(), 1);
        assert_eq!(config.logs.access, None);
        assert_eq!(config.logs.error, None);
    }

    #[test]
    fn flags_fill_the_config() {
        let config = config(&[
            "-l",
            ":9000",
            "-a",
            "mp",
            "--threads",
            "3",
            "--helpers=6",
            "--max-body",
            "2KiB",
            "--header-timeout",
            "1500ms",
            "--access-log",
            "-",
            "--error-log",
            "/tmp/e.log",
            "--log-level",
            "debug",
            "--log-format",
            "json",
            "-H",
            "X-A: 1",
            "-H",
            "X-B: 2",
            "--status",
            "/status",
            "--health",
            "/healthz",
            "--no-file-cache",
            "--no-residency-test",
            "--autoindex",
        ])
        .unwrap();
        let listen: Vec<String> = config.listen.iter().map(ToString::to_string).collect();
        assert_eq!(
            listen,
            ["0.0.0.0:9000", "[::]:9000"],
            ":PORT is every address"
        );
        assert_eq!((config.arch, config.threads), (Arch::Mp, Some(3)));
        assert_eq!((config.helpers, config.helpers_max), (6, 32));
        assert_eq!(config.limits.max_body, 2048);
        assert_eq!(config.limits.header_timeout, Duration::from_millis(1500));
        assert_eq!(config.logs.access, Some(PathBuf::from("/dev/stdout")));
        assert_eq!(config.logs.error, Some(PathBuf::from("/tmp/e.log")));
        assert_eq!(
            (config.logs.level, config.logs.format),
            (Level::Debug, LogFormat::Json)
        );
        assert!(!config.caches.file_cache && config.caches.path_cache);
        assert!(!config.caches.residency_test);
        let locations = &config.sites[0].locations;
        let handlers: Vec<(&str, bool, Handler)> = locations
            .iter()
            .map(|location| {
                (
                    location.path.as_str(),
                    location.exact,
                    location.settings.handler.clone(),
                )
            })
            .collect();
        assert_eq!(
            handlers,
            [
                ("/", false, Handler::Static),
                ("/status", true, Handler::Status),
                ("/healthz", true, Handler::Health)
            ]
        );
        for location in locations {
            assert!(location.settings.static_files.autoindex);
            assert_eq!(
                location.settings.headers,
                [
                    ("X-A".to_owned(), "1".to_owned()),
                    ("X-B".to_owned(), "2".to_owned())
                ]
            );
        }
    }

    #[test]
    fn contradictions_are_refused() {
        assert!(config(&["--helpers", "8", "--helpers-max", "2"]).is_err());
        assert!(config(&["--status", "/x", "--health", "/x"]).is_err());
        let config = config(&["--helpers", "40"]).unwrap();
        assert_eq!(
            config.helpers_max, 40,
            "the cap rises to the helpers started"
        );
    }
}
