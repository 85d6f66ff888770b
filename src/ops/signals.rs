//! What each signal means, read from a signalfd on one thread (no handler code runs in signal
//! context):
//!
//! | signal | meaning |
//! |---|---|
//! | `HUP` | reload the configuration file (`reload.rs`) |
//! | `USR1` | reopen the access and error logs (after logrotate moved them) |
//! | `TERM`, `INT` | graceful stop: stop accepting, finish in-flight requests within `grace_period`; a second one stops at once |
//! | `QUIT` | exit at once (what the access-log thread already holds is written first) |
//!
//! Owns: the signal thread. Must not touch: connections (it changes `Control`'s state and the
//! loops act on it).

use std::io;
use std::sync::Arc;
use std::time::Duration;

use ampd_sys::signal::{self, SignalFd, SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1};

use super::notify::notify;
use super::{reload, Control, RunState};
use crate::config::Level;
use crate::log::error;

const HANDLED: [i32; 5] = [SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1];

/// Block the handled signals in the calling thread. Call first in `main`, before any thread
/// starts, so every thread inherits the mask and only the signalfd sees them.
///
/// # Errors
/// Only for a bad signal number.
pub fn block() -> io::Result<()> {
    signal::block(&HANDLED)
}

/// Start the signal thread.
///
/// # Errors
/// The signalfd or the thread cannot be created.
pub fn spawn(control: Arc<Control>) -> io::Result<()> {
    let signals = SignalFd::new(&HANDLED)?;
    std::thread::Builder::new()
        .name("signals".to_owned())
        .spawn(move || {
            while let Ok(number) = signals.wait() {
                handle(&control, number);
            }
        })?;
    Ok(())
}

fn handle(control: &Control, number: i32) {
    match number {
        SIGHUP => match &control.config_path {
            Some(path) => reload::reload(control, path),
            None => error::log(
                Level::Warn,
                format_args!("SIGHUP: no configuration file to reload (started with ampd serve)"),
            ),
        },
        SIGUSR1 => {
            control.access_log.reopen();
            error::reopen();
            error::log(Level::Info, format_args!("SIGUSR1: logs reopened"));
        }
        SIGTERM | SIGINT => {
            if control.run_state() == RunState::Running {
                // Drain first: whoever reads the log line may rely on the stop having begun.
                control.drain();
                notify("STOPPING=1");
                error::log(
                    Level::Info,
                    format_args!("graceful stop: draining connections"),
                );
            } else {
                error::log(
                    Level::Info,
                    format_args!("second stop signal: stopping now"),
                );
                control.stop();
            }
        }
        SIGQUIT => {
            control.access_log.sync(Duration::from_secs(1));
            std::process::exit(0);
        }
        _ => {}
    }
}
