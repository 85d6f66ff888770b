//! The command line, read by clap: `ampd serve [DIR] [OPTIONS]`, `ampd run FILE` (also
//! `-c FILE`), `ampd check FILE` (also `-c FILE`), nginx's `ampd -t -c FILE` (check) and
//! `ampd -c FILE` (run), `ampd reload|stop|reopen [-c FILE]` (nginx's `-s`), `-V`/`--version`,
//! and a help page per subcommand (`ampd help COMMAND`).
//!
//! Owns: the grammar and what each spelling asks for (`Request`); usage mistakes, `ampd` alone
//! included, come back as clap errors, which print clap's message and exit 2. Must not touch:
//! the start-up sequence (`main.rs`), the disk.

pub mod serve;
mod values;

use std::ffi::OsString;
use std::path::PathBuf;

use ampd::config::{Arch, Config};
use ampd::engine::{helper_process, uring};
use ampd::log::build_info;
use ampd::ops::pid_file::Order;
use clap::error::ErrorKind;
use clap::{Args, CommandFactory, Parser, Subcommand};

pub use serve::ServeArgs;

/// What the command line asks for.
pub enum Request {
    Serve(Box<ServeArgs>),
    Run(PathBuf),
    Check(PathBuf),
    /// `-V`: the name and version.
    ShortVersion,
    /// `--version`: the build too.
    LongVersion,
    /// `ampd help [COMMAND]`: the help page of ampd or of one command.
    Help(String),
    /// `ampd reload|stop|reopen`: signal the running server.
    Order(Order, Box<OrderTarget>),
    /// How the server starts its own helper processes (`--helpers-mode process`).
    Helper,
    /// How an `mp` master starts its ACME certificate manager (`tls::acme::process`).
    AcmeManager,
}

/// The configuration file `reload`, `stop` and `reopen` assume, as the shipped systemd unit
/// runs it.
pub const DEFAULT_CONFIG: &str = "/etc/ampd/ampd.toml";

/// The signals, for the top-level and `run` help pages.
const SIGNALS: &str =
    "Signals ('ampd reload|stop|reopen' send HUP, TERM, USR1 by the pid file):\n  \
    HUP        reload the configuration file (a bad one is refused; the old one keeps serving)\n  \
    TERM, INT  graceful stop: finish requests in flight, then exit (a second one: at once)\n  \
    USR1       reopen the access and error logs (after logrotate moved them)\n  \
    USR2       upgrade to the binary on disk, keeping the listening sockets\n  \
    QUIT       exit at once";

#[derive(Parser, Debug)]
#[command(
    name = "ampd",
    about = "A web server built on Flash's AMPED architecture",
    disable_version_flag = true,
    disable_help_subcommand = true,
    arg_required_else_help = true,
    args_conflicts_with_subcommands = true,
    after_help = top_after_help()
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,

    /// Check the configuration file and exit (nginx's -t; the same as 'ampd check FILE')
    #[arg(short = 't', long = "test", requires = "config")]
    test: bool,

    /// Serve as configured in FILE (the same as 'ampd run FILE')
    #[arg(short = 'c', long = "config", value_name = "FILE")]
    config: Option<PathBuf>,

    /// Print the version
    #[arg(short = 'V')]
    short_version: bool,

    /// Print the version, commit, compiler, target and engines
    #[arg(long = "version")]
    version: bool,
}

/// The top-level page's closing text: examples, then the signals.
fn top_after_help() -> String {
    format!(
        "Examples:\n  \
         ampd serve examples/www --listen 127.0.0.1:8080 --arch reactor\n  \
         ampd run -c /etc/ampd/ampd.toml\n  \
         ampd -t -c /etc/ampd/ampd.toml\n  \
         ampd reload -c /etc/ampd/ampd.toml\n\n\
         {SIGNALS}\n\n\
         'ampd help COMMAND' or 'ampd COMMAND --help' shows one command's options."
    )
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Serve DIR (default: the current directory) with settings from flags
    #[command(after_help = serve::engines_help())]
    Serve(Box<ServeArgs>),
    /// Serve as configured in FILE (TOML; see docs/config.md)
    #[command(after_help = SIGNALS)]
    Run(ConfigFile),
    /// Check FILE and exit: 0 if 'ampd run' would accept it
    Check(ConfigFile),
    /// Check FILE, then tell the server started with it to reload it (SIGHUP)
    #[command(after_help = ORDER_HELP)]
    Reload(OrderArgs),
    /// Tell the server started with FILE to stop gracefully (SIGTERM)
    #[command(after_help = ORDER_HELP)]
    Stop(OrderArgs),
    /// Tell the server started with FILE to reopen its logs (SIGUSR1)
    #[command(after_help = ORDER_HELP)]
    Reopen(OrderArgs),
    /// Print this page, or one command's help
    Help {
        /// The command whose help to print
        #[arg(value_name = "COMMAND")]
        command: Option<String>,
    },
    #[command(name = helper_process::SUBCOMMAND, hide = true)]
    Helper,
    #[command(name = ampd::tls::acme::process::SUBCOMMAND, hide = true)]
    AcmeManager,
}

/// The configuration file of `run` and `check`, given either way.
#[derive(Args, Debug)]
#[group(required = true, multiple = false)]
struct ConfigFile {
    /// The configuration file
    #[arg(value_name = "FILE")]
    file: Option<PathBuf>,

    /// The configuration file (nginx's spelling)
    #[arg(short = 'c', long = "config", value_name = "FILE")]
    config: Option<PathBuf>,
}

impl ConfigFile {
    fn path(self) -> PathBuf {
        // The group is required: clap has refused a command line without either.
        self.file.or(self.config).unwrap_or_default()
    }
}

const ORDER_HELP: &str = "The server is found by its pid file: FILE's pid_file, or the one \
    a server started with FILE writes when it sets none (/run/ampd/ as root, \
    $XDG_RUNTIME_DIR/ampd/ otherwise), or --pid-file. The process it names must be an ampd.";

/// Which server `reload`, `stop` and `reopen` mean.
#[derive(Args, Debug)]
struct OrderArgs {
    /// The configuration file the server was started with [default: /etc/ampd/ampd.toml]
    #[arg(value_name = "FILE", conflicts_with = "config")]
    file: Option<PathBuf>,

    /// The configuration file (nginx's spelling)
    #[arg(short = 'c', long = "config", value_name = "FILE")]
    config: Option<PathBuf>,

    /// The server's pid file (a server started by 'ampd serve --pid-file', or another path)
    #[arg(long, value_name = "PATH")]
    pid_file: Option<PathBuf>,
}

/// The server an order is for, as the command line names it.
#[derive(Debug, PartialEq, Eq)]
pub struct OrderTarget {
    /// The configuration file: as given, or `DEFAULT_CONFIG`.
    pub config: PathBuf,
    /// Whether the command line named `config` (not the default).
    pub config_given: bool,
    /// `--pid-file`.
    pub pid_file: Option<PathBuf>,
}

impl OrderArgs {
    fn target(self) -> OrderTarget {
        let given = self.file.or(self.config);
        OrderTarget {
            config_given: given.is_some(),
            config: given.unwrap_or_else(|| PathBuf::from(DEFAULT_CONFIG)),
            pid_file: self.pid_file,
        }
    }
}

/// Read the command line (`args` includes the program name).
///
/// # Errors
/// A usage mistake, as clap's error (print it, exit with its code).
pub fn parse(args: impl IntoIterator<Item = OsString>) -> Result<Request, clap::Error> {
    let cli = Cli::try_parse_from(args)?;
    if cli.version {
        return Ok(Request::LongVersion);
    }
    if cli.short_version {
        return Ok(Request::ShortVersion);
    }
    Ok(match (cli.command, cli.config) {
        (Some(Command::Serve(args)), _) => Request::Serve(args),
        (Some(Command::Run(file)), _) => Request::Run(file.path()),
        (Some(Command::Check(file)), _) => Request::Check(file.path()),
        (Some(Command::Reload(args)), _) => Request::Order(Order::Reload, Box::new(args.target())),
        (Some(Command::Stop(args)), _) => Request::Order(Order::Stop, Box::new(args.target())),
        (Some(Command::Reopen(args)), _) => Request::Order(Order::Reopen, Box::new(args.target())),
        (Some(Command::Help { command }), _) => Request::Help(help_of(command.as_deref())?),
        (Some(Command::Helper), _) => Request::Helper,
        (Some(Command::AcmeManager), _) => Request::AcmeManager,
        (None, Some(file)) if cli.test => Request::Check(file),
        (None, Some(file)) => Request::Run(file),
        // `arg_required_else_help`: clap has answered a bare `ampd` with the help page and
        // exit status 2; `-V` and `--version` were taken above. What is left is `-t` alone,
        // which `requires = "config"` refuses.
        (None, None) => {
            return Err(Cli::command().error(
                ErrorKind::MissingRequiredArgument,
                "a command or --config FILE is required",
            ))
        }
    })
}

/// `ampd help [COMMAND]`: the page of ampd, or of one of its commands.
///
/// # Errors
/// COMMAND is not one (exit 2, as clap's own help subcommand does).
fn help_of(command: Option<&str>) -> Result<String, clap::Error> {
    let mut cli = Cli::command();
    cli.build();
    let Some(name) = command else {
        return Ok(cli.render_help().to_string());
    };
    let visible = cli
        .get_subcommands()
        .any(|subcommand| subcommand.get_name() == name && !subcommand.is_hide_set());
    match cli.find_subcommand_mut(name) {
        Some(subcommand) if visible => Ok(subcommand.render_help().to_string()),
        _ => Err(cli.error(
            ErrorKind::InvalidSubcommand,
            format!("'{name}' is not a command of ampd"),
        )),
    }
}

/// `ampd serve`'s settings, or clap's usage error naming the flags that contradict.
///
/// # Errors
/// See `ServeArgs::config`.
pub fn serve_config(args: ServeArgs, root: PathBuf) -> Result<Config, clap::Error> {
    args.config(root).map_err(|message| {
        let mut command = Cli::command();
        command.build();
        let serve = command
            .find_subcommand_mut("serve")
            .expect("serve is a subcommand");
        serve.error(ErrorKind::ArgumentConflict, message)
    })
}

/// The top-level help page.
#[cfg(test)]
fn help() -> String {
    Cli::command().render_help().to_string()
}

/// `-V`.
pub fn short_version() -> String {
    format!("ampd {}", build_info::VERSION)
}

/// `--version`: one `name: value` line per fact, after the name and version.
pub fn long_version() -> String {
    let engines: Vec<&str> = Arch::ALL.iter().map(|arch| arch.name()).collect();
    let io_uring = match uring::probe() {
        Ok(()) => "available".to_owned(),
        Err(reason) => format!("unavailable ({reason}; uring falls back to reactor)"),
    };
    format!(
        "ampd {}\ncommit: {}\nrustc: {}\ntarget: {}\nengines: {}\nio_uring: {io_uring}",
        build_info::VERSION,
        build_info::COMMIT,
        build_info::RUSTC,
        build_info::TARGET,
        engines.join(" "),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(args: &[&str]) -> Result<Request, clap::Error> {
        parse(
            std::iter::once("ampd")
                .chain(args.iter().copied())
                .map(OsString::from),
        )
    }

    fn file_of(args: &[&str]) -> (&'static str, PathBuf) {
        match request(args) {
            Ok(Request::Run(file)) => ("run", file),
            Ok(Request::Check(file)) => ("check", file),
            Ok(_) => ("other", PathBuf::new()),
            Err(error) => panic!("{args:?}: {error}"),
        }
    }

    #[test]
    fn every_spelling_of_run_and_check() {
        let file = PathBuf::from("a.toml");
        for args in [
            &["run", "a.toml"][..],
            &["run", "-c", "a.toml"],
            &["run", "--config=a.toml"],
            &["run", "-ca.toml"],
            &["-c", "a.toml"],
        ] {
            assert_eq!(file_of(args), ("run", file.clone()), "{args:?}");
        }
        for args in [
            &["check", "a.toml"][..],
            &["check", "-c", "a.toml"],
            &["check", "--config", "a.toml"],
            &["-t", "-c", "a.toml"],
            &["-tc", "a.toml"],
            &["--test", "--config=a.toml"],
        ] {
            assert_eq!(file_of(args), ("check", file.clone()), "{args:?}");
        }
    }

    #[test]
    fn usage_mistakes_are_clap_errors_with_exit_code_2() {
        for args in [
            &["check"][..],
            &["check", "a.toml", "-c", "b.toml"],
            &["run"],
            &["-t"],
            &["-c", "a.toml", "serve"],
            &["bogus"],
        ] {
            let error = request(args)
                .err()
                .unwrap_or_else(|| panic!("{args:?} accepted"));
            assert_eq!(error.exit_code(), 2, "{args:?}: {error}");
        }
    }

    #[test]
    fn helper_processes_keep_their_subcommand() {
        assert!(matches!(
            request(&[helper_process::SUBCOMMAND]),
            Ok(Request::Helper)
        ));
        assert!(!help().contains(helper_process::SUBCOMMAND));
        assert!(matches!(
            request(&[ampd::tls::acme::process::SUBCOMMAND]),
            Ok(Request::AcmeManager)
        ));
        assert!(!help().contains(ampd::tls::acme::process::SUBCOMMAND));
    }

    #[test]
    fn the_grammar_is_consistent() {
        Cli::command().debug_assert();
    }
}
