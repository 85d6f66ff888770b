//! The server's persistent applications (`[application.NAME]`) over its life: started at
//! start-up once the listeners are bound and privileges dropped (so they run as the server's
//! user), reloaded with the configuration on `SIGHUP`, stopped when the server exits (after
//! its drain, so requests in flight finish; within a second on `SIGQUIT`).
//!
//! One process-wide holder, like the error log: `main` starts the applications, the signal
//! thread of a threaded server tends them between signals and reloads them, `main` stops them
//! once the engine has returned. The `mp` master `take`s them and tends them in its own loop
//! (it must stay single-threaded, and the supervisor starts no thread). On a binary upgrade
//! (`SIGUSR2`) the new process starts its own applications (its sockets renamed over the
//! paths), and the old one stops its own when it exits, leaving the new socket files alone.
//!
//! Owns: when applications start, reload and stop. Must not touch: how (that is
//! `programs::applications`).

use std::os::fd::BorrowedFd;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use crate::config::Application;
use crate::programs::applications::{ProgramError, Supervisor};

/// How long the signal thread waits between looks at the applications while any run (the
/// longest `main` waits for it before stopping them).
const TEND_WAIT: Duration = Duration::from_millis(250);

/// On `SIGQUIT`, how long applications get after `SIGTERM`.
pub const QUIT_STOP: Duration = Duration::from_secs(1);

static HELD: Mutex<Option<Supervisor>> = Mutex::new(None);

fn held() -> std::sync::MutexGuard<'static, Option<Supervisor>> {
    HELD.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Start the configured applications.
///
/// # Errors
/// The first that cannot start (its name and the cause); none is left running.
pub fn start(applications: &[Application]) -> Result<(), ProgramError> {
    let supervisor = Supervisor::start(applications)?;
    *held() = Some(supervisor);
    Ok(())
}

/// The applications, for the `mp` master to tend in its own loop (empty if none were started).
#[must_use]
pub fn take() -> Supervisor {
    held().take().unwrap_or_default()
}

/// Wait until `signals` is readable, tending the applications meanwhile (the signal thread's
/// wait). Returns whether `signals` is readable.
pub fn tend_until(signals: BorrowedFd<'_>) -> bool {
    let mut guard = held();
    match guard.as_mut() {
        Some(supervisor) if !supervisor.is_idle() => supervisor.tend(TEND_WAIT, Some(signals)),
        // Nothing to watch: wait for the signal alone, without holding the lock (only this
        // thread gives the holder something to watch, by a reload).
        _ => {
            drop(guard);
            ampd_sys::poll::poll_one(signals, true, false, None).is_ok_and(|ready| ready.is_some())
        }
    }
}

/// Apply a reloaded configuration's applications.
pub fn reload(applications: &[Application]) {
    let mut guard = held();
    match guard.as_mut() {
        Some(supervisor) => supervisor.reload(applications),
        None if applications.is_empty() => {}
        None => {
            let mut supervisor = Supervisor::default();
            supervisor.reload(applications);
            *guard = Some(supervisor);
        }
    }
}

/// Stop every application (each within its `stop_timeout`, or `limit` if shorter).
pub fn stop_within(limit: Duration) {
    let supervisor = held().take();
    if let Some(supervisor) = supervisor {
        supervisor.stop_within(limit);
    }
}
