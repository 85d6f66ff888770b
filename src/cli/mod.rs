//! The command line, read by clap: `ampd serve [DIR] [OPTIONS]`, `ampd run FILE` (also
//! `-c FILE`), `ampd check FILE` (also `-c FILE`), nginx's `ampd -t -c FILE` (check) and
//! `ampd -c FILE` (run), `-V`/`--version`, and a help page per subcommand.
//!
//! Owns: the grammar and what each spelling asks for (`Request`); usage mistakes come back as
//! clap errors, which print clap's message and exit 2. Must not touch: the start-up sequence
//! (`main.rs`), the disk.

pub mod serve;
mod values;

use std::ffi::OsString;
use std::path::PathBuf;

use ampd::config::{Arch, Config};
use ampd::engine::{helper_process, uring};
use ampd::log::build_info;
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
    /// `ampd` alone: the help page.
    Help,
    /// How the server starts its own helper processes (`--helpers-mode process`).
    Helper,
    /// How an `mp` master starts its ACME certificate manager (`tls::acme::process`).
    AcmeManager,
}

#[derive(Parser, Debug)]
#[command(
    name = "ampd",
    about = "A web server built on Flash's AMPED architecture",
    disable_version_flag = true,
    args_conflicts_with_subcommands = true,
    after_help = "Examples:\n  \
        ampd serve examples/www --listen 127.0.0.1:8080 --arch reactor\n  \
        ampd run -c /etc/ampd/ampd.toml\n  \
        ampd -t -c /etc/ampd/ampd.toml\n\n\
        'ampd help COMMAND' or 'ampd COMMAND --help' shows one command's options."
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

#[derive(Subcommand, Debug)]
enum Command {
    /// Serve DIR (default: the current directory) with settings from flags
    #[command(after_help = serve::engines_help())]
    Serve(Box<ServeArgs>),
    /// Serve as configured in FILE (TOML; see docs/config.md)
    #[command(
        after_help = "Signals: HUP reload FILE, USR1 reopen logs, USR2 upgrade to the \
                            binary on disk (listeners kept), TERM/INT graceful stop, QUIT exit \
                            at once."
    )]
    Run(ConfigFile),
    /// Check FILE and exit: 0 if 'ampd run' would accept it
    Check(ConfigFile),
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
        (Some(Command::Helper), _) => Request::Helper,
        (Some(Command::AcmeManager), _) => Request::AcmeManager,
        (None, Some(file)) if cli.test => Request::Check(file),
        (None, Some(file)) => Request::Run(file),
        (None, None) => Request::Help,
    })
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
pub fn help() -> String {
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
