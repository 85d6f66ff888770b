//! The manager as a process of its own, for `mp`: its master must stay single-threaded to
//! fork workers, so it starts `ampd acme-manager` (this binary again, dying with the master)
//! and writes it each plan as a line of JSON on its standard input; the process runs the
//! manager's loop until that input ends.
//!
//! Owns: starting that process and the plan's wire form. Must not touch: the manager's
//! decisions (`manager`).

use std::io::{self, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::manager::{self, Plan};
use crate::config::{AcmeChallenge, AcmeSettings, Level, LogFormat, LogOptions};
use crate::log::error;

/// The hidden subcommand the manager process runs as.
pub const SUBCOMMAND: &str = "acme-manager";

/// A plan and where to log, as sent to the process.
#[derive(Serialize, Deserialize)]
struct Message {
    directory: String,
    ca_root: Option<PathBuf>,
    email: Option<String>,
    tls_alpn: bool,
    state_dir: PathBuf,
    renew_before_seconds: u64,
    sites: Vec<Vec<String>>,
    error_log: Option<PathBuf>,
    level: String,
}

impl Message {
    fn of(plan: &Plan, logs: &LogOptions) -> Message {
        let settings = &plan.settings;
        Message {
            directory: settings.directory.clone(),
            ca_root: settings.ca_root.clone(),
            email: settings.email.clone(),
            tls_alpn: settings.challenge == AcmeChallenge::TlsAlpn01,
            state_dir: settings.state_dir.clone(),
            renew_before_seconds: settings.renew_before.as_secs(),
            sites: plan.sites.clone(),
            error_log: logs.error.clone(),
            level: logs.level.name().to_owned(),
        }
    }

    fn plan(&self) -> Plan {
        Plan {
            settings: AcmeSettings {
                directory: self.directory.clone(),
                ca_root: self.ca_root.clone(),
                email: self.email.clone(),
                challenge: if self.tls_alpn {
                    AcmeChallenge::TlsAlpn01
                } else {
                    AcmeChallenge::Http01
                },
                state_dir: self.state_dir.clone(),
                renew_before: Duration::from_secs(self.renew_before_seconds),
            },
            sites: self.sites.clone(),
        }
    }

    fn logs(&self) -> LogOptions {
        let level = [Level::Error, Level::Warn, Level::Info, Level::Debug]
            .into_iter()
            .find(|level| level.name() == self.level)
            .unwrap_or(Level::Info);
        LogOptions {
            access: None,
            format: LogFormat::Common,
            error: self.error_log.clone(),
            level,
        }
    }
}

/// The master's handle on the manager process.
pub struct ManagerProcess {
    child: Child,
    input: ChildStdin,
}

impl ManagerProcess {
    /// Start the process and give it `plan`.
    ///
    /// # Errors
    /// It cannot be started.
    pub fn spawn(plan: &Plan, logs: &LogOptions) -> io::Result<ManagerProcess> {
        let mut command = Command::new(std::env::current_exe()?);
        command
            .arg(SUBCOMMAND)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit());
        ampd_sys::child::die_with_parent(&mut command, ampd_sys::signal::SIGKILL);
        ampd_sys::child::reset_signals(&mut command, crate::programs::handled_signals());
        let mut child = command.spawn()?;
        let input = child
            .stdin
            .take()
            .ok_or_else(|| io::Error::other("no pipe to the manager process"))?;
        let mut manager = ManagerProcess { child, input };
        manager.send(plan, logs)?;
        Ok(manager)
    }

    /// Give the process a new plan.
    ///
    /// # Errors
    /// It has gone (it is reaped; the caller starts another).
    pub fn send(&mut self, plan: &Plan, logs: &LogOptions) -> io::Result<()> {
        let mut line = serde_json::to_string(&Message::of(plan, logs)).map_err(io::Error::other)?;
        line.push('\n');
        let written = self.input.write_all(line.as_bytes());
        if written.is_err() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        written
    }
}

/// Log where the server logs; when this process may not open that file (the server opened it
/// before dropping privileges, this process starts after), to the standard error it inherited.
fn configure_logs(message: &Message) {
    let logs = message.logs();
    if let Err(failure) = error::configure(&logs) {
        let path = logs.error.clone().unwrap_or_default();
        let _ = error::configure(&LogOptions {
            error: None,
            ..logs
        });
        error::log(
            Level::Warn,
            format_args!(
                "acme manager: error log {}: {failure}; logging to standard error",
                path.display()
            ),
        );
    }
}

/// `ampd acme-manager`: run the manager on the plans read from standard input, until it ends.
///
/// # Errors
/// The first plan cannot be read.
pub fn serve() -> io::Result<()> {
    let mut first = String::new();
    if io::stdin().read_line(&mut first)? == 0 {
        return Err(io::Error::other("no plan on standard input"));
    }
    let message: Message = serde_json::from_str(&first).map_err(io::Error::other)?;
    configure_logs(&message);
    let (plans, received) = mpsc::channel();
    std::thread::Builder::new()
        .name("acme-plans".to_owned())
        .spawn(move || {
            for line in io::stdin().lines().map_while(Result::ok) {
                let Ok(message) = serde_json::from_str::<Message>(&line) else {
                    continue;
                };
                configure_logs(&message);
                if plans.send(message.plan()).is_err() {
                    return;
                }
            }
        })?;
    manager::run(message.plan(), &received);
    Ok(())
}
