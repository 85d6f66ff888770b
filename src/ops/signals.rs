//! What each signal means, taken synchronously (no handler code runs in signal context):
//!
//! | signal | command |
//! |---|---|
//! | `HUP` | `Reload` the configuration file (`reload.rs`) |
//! | `USR1` | `Reopen` the access and error logs (after logrotate moved them) |
//! | `TERM`, `INT` | `Drain`: health answers `503` while still accepting for `drain_delay`, then stop accepting and finish in-flight requests within `grace_period`; a second one is `Stop` |
//! | `QUIT` | `Quit` at once (what the access-log thread already holds is written first) |
//! | `USR2` | `Upgrade`: start the binary again with the listening sockets (`upgrade.rs`); once it is ready, drain |
//!
//! A threaded process reads the signals from a signalfd on its signal thread (`spawn`), which
//! tends the persistent applications between signals (`applications.rs`). The
//! single-threaded `mp` master takes them with `sigtimedwait` in its own loop and passes each
//! worker the resulting `Command` over a pipe; a worker's command thread (`spawn_commands`)
//! applies it exactly as the signal thread would. Workers never act on signals themselves, so a
//! signal sent to the whole process group (Ctrl-C, systemd's default `KillMode`) counts once.
//!
//! Owns: the signal thread, the command thread, and the mapping signal → command → `Control`.
//! Must not touch: connections (it changes `Control`'s state and the loops act on it).

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;
use std::time::Duration;

use ampd_sys::signal::{
    self, SignalFd, SignalSet, SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2,
};

use super::notify::notify;
use super::{applications, reload, upgrade, Control, Role, RunState};
use crate::config::Level;
use crate::log::error;

/// The signals the server handles (blocked in every thread and process).
pub const HANDLED: [i32; 6] = crate::programs::HANDLED_SIGNALS;

/// What the operator asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Command {
    Reload,
    Reopen,
    Drain,
    Stop,
    Quit,
    /// Start the new binary with the listening sockets; once it is ready, drain (in an `mp`
    /// worker: the master started it, drain).
    Upgrade,
}

impl Command {
    /// The command a signal means, given the current state (a stop signal while draining
    /// stops at once).
    #[must_use]
    pub fn of_signal(number: i32, state: RunState) -> Option<Command> {
        match number {
            SIGHUP => Some(Command::Reload),
            SIGUSR1 => Some(Command::Reopen),
            SIGTERM | SIGINT if state == RunState::Running => Some(Command::Drain),
            SIGTERM | SIGINT => Some(Command::Stop),
            SIGQUIT => Some(Command::Quit),
            SIGUSR2 => Some(Command::Upgrade),
            _ => None,
        }
    }

    /// One byte on a worker's command pipe.
    #[must_use]
    pub fn byte(self) -> u8 {
        match self {
            Command::Reload => b'H',
            Command::Reopen => b'U',
            Command::Drain => b'T',
            Command::Stop => b'S',
            Command::Quit => b'Q',
            Command::Upgrade => b'G',
        }
    }

    #[must_use]
    pub fn from_byte(byte: u8) -> Option<Command> {
        [
            Command::Reload,
            Command::Reopen,
            Command::Drain,
            Command::Stop,
            Command::Quit,
            Command::Upgrade,
        ]
        .into_iter()
        .find(|command| command.byte() == byte)
    }
}

/// The handled signals as a set (`programs::handled_signals`).
#[must_use]
pub fn handled() -> SignalSet {
    crate::programs::handled_signals()
}

/// Block the handled signals in the calling thread. Call first in `main`, before any thread
/// starts, so every thread (and forked process) inherits the mask and only the signalfd (or
/// the `mp` master's wait) sees them.
///
/// # Errors
/// Only for a bad signal number.
pub fn block() -> io::Result<()> {
    signal::block(&handled()).map(|_| ())
}

/// Start the signal thread.
///
/// # Errors
/// The signalfd or the thread cannot be created.
pub fn spawn(control: Arc<Control>) -> io::Result<()> {
    let signals = SignalFd::new(&handled())?;
    std::thread::Builder::new()
        .name("signals".to_owned())
        .spawn(move || loop {
            if !applications::tend_until(signals.as_fd()) {
                continue;
            }
            let Ok(number) = signals.wait() else {
                return;
            };
            if let Some(command) = Command::of_signal(number, control.run_state()) {
                apply(&control, command);
            }
        })?;
    Ok(())
}

/// Start an `mp` worker's command thread: commands from the master's pipe. The pipe's end
/// (the master is gone) stops the worker at once.
///
/// # Errors
/// The thread cannot be created.
pub fn spawn_commands(control: Arc<Control>, pipe: OwnedFd) -> io::Result<()> {
    std::thread::Builder::new()
        .name("commands".to_owned())
        .spawn(move || {
            let mut byte = [0u8; 1];
            loop {
                match ampd_sys::io::read(pipe.as_fd(), &mut byte) {
                    Ok(1) => {
                        if let Some(command) = Command::from_byte(byte[0]) {
                            apply(&control, command);
                        }
                    }
                    _ => {
                        control.stop();
                        return;
                    }
                }
            }
        })?;
    Ok(())
}

/// The error log's line for a graceful stop that has begun (the server's, or mp's master).
pub fn log_stop_begun(drain_delay: Duration) {
    if drain_delay.is_zero() {
        error::log(
            Level::Info,
            format_args!("graceful stop: draining connections"),
        );
    } else {
        error::log(
            Level::Info,
            format_args!(
                "graceful stop: health answers 503, listening {drain_delay:?} more (drain_delay), then draining connections"
            ),
        );
    }
}

/// Carry out `command` in this process.
pub fn apply(control: &Arc<Control>, command: Command) {
    match command {
        Command::Reload => match &control.config_path {
            Some(path) => reload::reload(control, path),
            None => error::log(
                Level::Warn,
                format_args!("SIGHUP: no configuration file to reload (started with ampd serve)"),
            ),
        },
        Command::Reopen => {
            control.access_log.reopen();
            error::reopen();
            if matches!(control.role, Role::Server) {
                error::log(Level::Info, format_args!("SIGUSR1: logs reopened"));
            }
        }
        Command::Drain => {
            if control.run_state() != RunState::Running {
                return;
            }
            // systemd hears of the stop before it begins: with nothing to drain, the process
            // can exit before this thread runs again, and a STOPPING=1 sent after the drain
            // would be lost.
            if matches!(control.role, Role::Server) {
                notify("STOPPING=1");
            }
            // Drain before the log line: whoever reads it may rely on the stop having begun.
            if let Err(failure) = control.drain() {
                error::log(
                    Level::Error,
                    format_args!(
                        "graceful stop: cannot time the drain delay ({failure}); draining now"
                    ),
                );
                control.drain_now();
            }
            if matches!(control.role, Role::Server) {
                log_stop_begun(control.current().config.process.drain_delay);
            }
        }
        Command::Stop => {
            if matches!(control.role, Role::Server) {
                error::log(
                    Level::Info,
                    format_args!("second stop signal: stopping now"),
                );
            }
            control.stop();
        }
        Command::Quit => {
            control.access_log.sync(Duration::from_secs(1));
            applications::stop_within(applications::QUIT_STOP);
            super::pid_file::remove_written();
            std::process::exit(0);
        }
        Command::Upgrade => match control.role {
            Role::Server => upgrade(control),
            Role::Worker { .. } => control.drain_now(),
        },
    }
}

/// `SIGUSR2` in the only process: start the successor; once it is ready, drain at once (it
/// serves the same sockets, so there is nothing to announce). If it fails, keep serving.
fn upgrade(control: &Control) {
    if control.run_state() != RunState::Running {
        error::log(
            Level::Warn,
            format_args!("SIGUSR2 ignored: the server is stopping"),
        );
        return;
    }
    error::log(
        Level::Info,
        format_args!("SIGUSR2: starting a new process with the listening sockets"),
    );
    match control.with_listeners(upgrade::start_successor) {
        Ok(pid) => {
            error::log(
                Level::Info,
                format_args!("upgrade: process {pid} is ready; this one drains"),
            );
            control.drain_now();
        }
        Err(failure) => error::log(
            Level::Error,
            format_args!("upgrade failed: {failure}; this process keeps serving"),
        ),
    }
}
