//! `[cgi]` and `[application.NAME]`: the server-wide limit on CGI scripts, and the FastCGI
//! applications ampd starts and keeps (Flash's persistent CGI processes), each of which makes a
//! pool of its own socket that `fastcgi_pass = "NAME"` names.
//!
//! Owns: reading these tables into `CgiLimits` and `Application`s, with their errors (missing
//! command or socket, `processes = 0`, a name another pool or application has, a socket path
//! too long for `sun_path`, environment names that cannot be).
//! Must not touch: processes and sockets (`crate::programs` starts them), location keys
//! (`gateway_keys.rs`).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use toml::Spanned;

use super::gateway::{Application, CgiLimits};
use super::load::{Loaded, Loader};
use super::raw::{RawApplication, RawCgi};
use super::targets::is_pool_name;
use super::text::position;
use super::upstream::{UpstreamAddress, UpstreamPool, UpstreamServer};

/// The longest unix socket path `bind` takes: `sun_path` is 108 bytes with its NUL.
const MAX_SOCKET_PATH: usize = 107;

/// How long a stopping application has between `SIGTERM` and `SIGKILL` when not set
/// (supervisord's `stopwaitsecs`).
const STOP_TIMEOUT: Duration = Duration::from_secs(10);

type RawApplications = BTreeMap<Spanned<String>, Spanned<RawApplication>>;

impl Loader<'_> {
    pub(super) fn cgi_limits(&self, raw: Option<RawCgi>) -> Loaded<CgiLimits> {
        let mut limits = CgiLimits::default();
        if let Some(value) = raw.and_then(|raw| raw.max_scripts) {
            limits.max_scripts = self.count(&value, "cgi.max_scripts", 1)?;
        }
        Ok(limits)
    }

    /// Every `[application.NAME]`, in file order; each adds its pool to the pool table (after
    /// the `[upstream.NAME]` pools, so its name is checked against theirs).
    pub(super) fn applications(&self, raw: Option<RawApplications>) -> Loaded<Vec<Application>> {
        let mut tables: Vec<_> = raw.unwrap_or_default().into_iter().collect();
        tables.sort_by_key(|(name, _)| name.span().start);
        let mut applications: Vec<Application> = Vec::new();
        let mut sockets: Vec<(PathBuf, usize)> = Vec::new();
        // Applications' pools follow the `[upstream.NAME]` ones in the table.
        let first_application = self.pools.borrow().named_count();
        for (name, table) in &tables {
            let key = format!("application.{}", name.get_ref());
            if !is_pool_name(name.get_ref()) {
                return Err(self.hinted(
                    name.span(),
                    &key,
                    format!("'{}' is not an application name", name.get_ref()),
                    "letters, digits, '-', '_' and '.': fastcgi_pass = \"NAME\" names it",
                ));
            }
            if let Some(pool) = self.pools.borrow().named(name.get_ref()) {
                let what = match pool.checked_sub(first_application) {
                    Some(other) => {
                        let at = tables[other].0.span().start;
                        format!("another application (line {})", position(self.text(), at).0)
                    }
                    None => format!("an [upstream.{}]", self.pools.borrow().pool_name(pool)),
                };
                return Err(self.hinted(
                    name.span(),
                    &key,
                    format!("'{}' is already the name of {what}", name.get_ref()),
                    "an application makes a pool of its name, which fastcgi_pass names: names are unique among [upstream.NAME] and [application.NAME], without case",
                ));
            }
            let application = self.application(name, table, &key)?;
            let socket_start = table
                .get_ref()
                .socket
                .as_ref()
                .map_or(0, |socket| socket.span().start);
            if let Some((_, first)) = sockets
                .iter()
                .find(|(socket, _)| *socket == application.socket)
            {
                let (line, _) = position(self.text(), *first);
                let span = table.get_ref().socket.as_ref().map_or(0..0, Spanned::span);
                return Err(self.hinted(
                    span,
                    &format!("{key}.socket"),
                    format!(
                        "{} is already the socket of another application (line {line})",
                        application.socket.display()
                    ),
                    "each application binds a socket of its own",
                ));
            }
            sockets.push((application.socket.clone(), socket_start));
            let pool = UpstreamPool::new(
                application.name.clone(),
                vec![UpstreamServer {
                    address: UpstreamAddress::Unix(application.socket.clone()),
                    weight: 1,
                    backup: false,
                }],
            );
            self.pools
                .borrow_mut()
                .add_application(pool, name.span().start);
            applications.push(application);
        }
        Ok(applications)
    }

    fn application(
        &self,
        name: &Spanned<String>,
        table: &Spanned<RawApplication>,
        key: &str,
    ) -> Loaded<Application> {
        let raw = table.get_ref();
        let field = |field: &str| format!("{key}.{field}");
        let command = match &raw.command {
            None => {
                return Err(self.hinted(
                    name.span(),
                    &field("command"),
                    "an application needs a command",
                    "command = [\"python3\", \"app.py\"]: the program and its arguments, no shell",
                ))
            }
            Some(command) => {
                let list = command.get_ref();
                if list.first().is_none_or(String::is_empty) {
                    return Err(self.hinted(
                        command.span(),
                        &field("command"),
                        "no program",
                        "command = [\"python3\", \"app.py\"]: the program and its arguments, no shell",
                    ));
                }
                if list.iter().any(|word| word.contains('\0')) {
                    return Err(self.error(command.span(), &field("command"), "has a NUL byte"));
                }
                list.clone()
            }
        };
        let processes = match &raw.processes {
            Some(value) if *value.get_ref() < 1 => return Err(self.hinted(
                value.span(),
                &field("processes"),
                format!("{} is less than 1", value.get_ref()),
                "the processes ampd keeps running: at least 1 (remove the application to run none)",
            )),
            Some(value) => self.count(value, &field("processes"), 1)?,
            None => 1,
        };
        let Some(socket) = &raw.socket else {
            return Err(self.hinted(
                name.span(),
                &field("socket"),
                "an application needs a socket",
                "socket = \"/run/ampd/NAME.sock\": ampd binds it and passes it to the processes as descriptor 0",
            ));
        };
        let socket_path = self.socket_path(socket, &field("socket"))?;
        let directory = match &raw.directory {
            Some(directory) => self.directory(directory, &field("directory"))?,
            // Canonical, as a `directory` written in the file is: the processes may be started
            // from another working directory.
            None => {
                std::fs::canonicalize(self.base()).unwrap_or_else(|_| self.base().to_path_buf())
            }
        };
        let env = match &raw.env {
            Some(table) => self.named_values(
                table,
                &field("env"),
                |name| !name.is_empty() && !name.contains(['=', '\0']),
                "an environment variable name",
                "a name without '=' or NUL, like APP_ENV",
            )?,
            None => Vec::new(),
        };
        let stop_timeout = match &raw.stop_timeout {
            Some(value) => self.duration(value, &field("stop_timeout"), false)?,
            None => STOP_TIMEOUT,
        };
        Ok(Application {
            name: name.get_ref().clone(),
            command,
            processes,
            socket: socket_path,
            directory,
            env,
            stop_timeout,
        })
    }

    /// The socket's path, absolute (its directory's canonical path and its name: the processes
    /// run elsewhere); the directory must exist (ampd binds the socket there) and the path must
    /// fit `sun_path`.
    fn socket_path(&self, socket: &Spanned<String>, key: &str) -> Loaded<PathBuf> {
        let written = self.path(socket.get_ref());
        let names_a_file =
            !socket.get_ref().is_empty() && !socket.get_ref().ends_with('/') && !written.is_dir();
        let (Some(directory), Some(name), true) =
            (written.parent(), written.file_name(), names_a_file)
        else {
            return Err(self.hinted(
                socket.span(),
                key,
                format!("'{}' is not a socket file's path", socket.get_ref()),
                "a file in an existing directory, like /run/ampd/NAME.sock",
            ));
        };
        let directory = std::fs::canonicalize(directory)
            .ok()
            .filter(|directory| directory.is_dir())
            .ok_or_else(|| {
                self.hinted(
                    socket.span(),
                    key,
                    format!("{}: its directory does not exist", written.display()),
                    "create the directory; ampd binds the socket in it",
                )
            })?;
        let path = directory.join(name);
        if path.as_os_str().len() > MAX_SOCKET_PATH {
            return Err(self.hinted(
                socket.span(),
                key,
                format!(
                    "{} is {} bytes long, more than a unix socket's {MAX_SOCKET_PATH}",
                    path.display(),
                    path.as_os_str().len()
                ),
                "choose a shorter path, like /run/ampd/NAME.sock",
            ));
        }
        Ok(path)
    }
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};
    use std::time::Duration;

    use super::super::load::load_str;
    use super::super::upstream::{UpstreamAddress, UpstreamProtocol};
    use super::super::{Application, CgiLimits, Config, ConfigError};

    fn load(text: &str) -> Result<Config, ConfigError> {
        load_str(
            &format!("{text}[[site]]\nroot = \"/tmp\"\n"),
            Path::new("/tmp/ampd.toml"),
        )
    }

    /// (line, key, message) of the error `text` gets, which has a hint.
    fn error(text: &str) -> (usize, String, String) {
        let error = load(text).expect_err("an error");
        assert!(error.hint.is_some(), "a hint: {error}");
        (error.line, error.key, error.message)
    }

    #[test]
    fn cgi_limits() {
        assert_eq!(load("").unwrap().cgi, CgiLimits { max_scripts: 64 });
        assert_eq!(
            load("[cgi]\nmax_scripts = 3\n").unwrap().cgi,
            CgiLimits { max_scripts: 3 }
        );
        let zero = load("[cgi]\nmax_scripts = 0\n").unwrap_err();
        assert_eq!((zero.line, zero.key.as_str()), (2, "cgi.max_scripts"));
        let unknown = load("[cgi]\nmax_script = 3\n").unwrap_err();
        assert_eq!(unknown.hint.as_deref(), Some("did you mean `max_scripts`?"));
    }

    #[test]
    fn an_application_with_every_key_and_one_with_the_defaults() {
        let config = load(
            "[application.flask]\ncommand = [\"python3\", \"app.py\"]\nprocesses = 2\n\
             socket = \"flask.sock\"\ndirectory = \"/tmp\"\nenv = { APP_ENV = \"test\" }\n\
             stop_timeout = \"3s\"\n\
             [application.perl]\ncommand = [\"/usr/bin/perl\", \"app.pl\"]\nsocket = \"/tmp/perl.sock\"\n",
        )
        .unwrap();
        assert_eq!(
            config.applications,
            [
                Application {
                    name: "flask".to_owned(),
                    command: vec!["python3".to_owned(), "app.py".to_owned()],
                    processes: 2,
                    socket: PathBuf::from("/tmp/flask.sock"),
                    directory: std::fs::canonicalize("/tmp").unwrap(),
                    env: vec![("APP_ENV".to_owned(), "test".to_owned())],
                    stop_timeout: Duration::from_secs(3),
                },
                Application {
                    name: "perl".to_owned(),
                    command: vec!["/usr/bin/perl".to_owned(), "app.pl".to_owned()],
                    processes: 1,
                    socket: PathBuf::from("/tmp/perl.sock"),
                    directory: PathBuf::from("/tmp"),
                    env: Vec::new(),
                    stop_timeout: Duration::from_secs(10),
                },
            ]
        );
        // Each makes a FastCGI pool of its socket, even when no location names it yet.
        let pools: Vec<_> = config
            .upstreams
            .iter()
            .map(|pool| (pool.name.as_str(), pool.protocol, pool.keepalive))
            .collect();
        assert_eq!(
            pools,
            [
                ("flask", UpstreamProtocol::FastCgi, 0),
                ("perl", UpstreamProtocol::FastCgi, 0)
            ]
        );
        assert_eq!(
            config.upstreams[0].servers[0].address,
            UpstreamAddress::Unix(PathBuf::from("/tmp/flask.sock"))
        );
    }

    #[test]
    fn application_errors() {
        let (line, key, message) = error("[application.app]\nsocket = \"/tmp/a.sock\"\n");
        assert_eq!((line, key.as_str()), (1, "application.app.command"));
        assert_eq!(message, "an application needs a command");
        let (line, key, message) =
            error("[application.app]\ncommand = []\nsocket = \"/tmp/a.sock\"\n");
        assert_eq!((line, key.as_str()), (2, "application.app.command"));
        assert_eq!(message, "no program");
        let (line, key, message) = error("[application.app]\ncommand = [\"app\"]\n");
        assert_eq!((line, key.as_str()), (1, "application.app.socket"));
        assert_eq!(message, "an application needs a socket");
        let (line, key, message) = error(
            "[application.app]\ncommand = [\"app\"]\nsocket = \"/tmp/a.sock\"\nprocesses = 0\n",
        );
        assert_eq!((line, key.as_str()), (4, "application.app.processes"));
        assert_eq!(message, "0 is less than 1");
        let (line, key, message) = error(
            "[upstream.App]\nservers = [\"127.0.0.1:1\"]\n[application.app]\ncommand = [\"app\"]\nsocket = \"/tmp/a.sock\"\n",
        );
        assert_eq!((line, key.as_str()), (3, "application.app"));
        assert_eq!(message, "'app' is already the name of an [upstream.App]");
        let (line, _, message) = error(
            "[application.a]\ncommand = [\"app\"]\nsocket = \"/tmp/a.sock\"\n[application.A]\ncommand = [\"app\"]\nsocket = \"/tmp/b.sock\"\n",
        );
        assert_eq!(line, 4);
        assert_eq!(
            message,
            "'A' is already the name of another application (line 1)"
        );
        let (line, key, _) = error(
            "[application.a]\ncommand = [\"app\"]\nsocket = \"/tmp/a.sock\"\n[application.b]\ncommand = [\"app\"]\nsocket = \"a.sock\"\n",
        );
        assert_eq!((line, key.as_str()), (6, "application.b.socket"));
        for bad in ["", "/", "/tmp", "/tmp/"] {
            let (_, key, _) = error(&format!(
                "[application.app]\ncommand = [\"app\"]\nsocket = \"{bad}\"\n"
            ));
            assert_eq!(key, "application.app.socket", "{bad:?}");
        }
        let (_, key, message) =
            error("[application.app]\ncommand = [\"app\"]\nsocket = \"/no/such/dir/a.sock\"\n");
        assert_eq!(key, "application.app.socket");
        assert_eq!(message, "/no/such/dir/a.sock: its directory does not exist");
        let long = format!("/tmp/{}.sock", "s".repeat(120));
        let (_, key, _) = error(&format!(
            "[application.app]\ncommand = [\"app\"]\nsocket = \"{long}\"\n"
        ));
        assert_eq!(key, "application.app.socket");
        let (_, key, _) = error("[application.app]\ncommand = [\"app\"]\nsocket = \"/tmp/a.sock\"\nenv = { \"A=B\" = \"1\" }\n");
        assert_eq!(key, "application.app.env");
        let (_, key, _) =
            error("[application.\"a b\"]\ncommand = [\"app\"]\nsocket = \"/tmp/a.sock\"\n");
        assert_eq!(key, "application.a b");
        let directory = load("[application.app]\ncommand = [\"app\"]\nsocket = \"/tmp/a.sock\"\ndirectory = \"/no/such/dir\"\n").unwrap_err();
        assert_eq!(directory.key, "application.app.directory");
    }
}
