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
//! The signal thread holds the lock while it waits (up to `TEND_WAIT`) and takes it again at
//! once: `std`'s mutex is not fair, and a thread that waits for it (`main` at the stop) is woken
//! only to find it taken again. On an idle machine with a core free that went on for tens of
//! seconds (78 s seen); a stop therefore first says so (`STOPPING`), and the signal thread then
//! leaves the applications alone.
//!
//! Owns: when applications start, reload and stop. Must not touch: how (that is
//! `programs::applications`).

use std::os::fd::BorrowedFd;
use std::sync::atomic::{AtomicBool, Ordering};
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
/// A stop has begun: the signal thread no longer tends (or reloads) the applications, so it
/// lets go of `HELD` within one `TEND_WAIT` and does not take it again.
static STOPPING: AtomicBool = AtomicBool::new(false);

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
    if STOPPING.load(Ordering::Acquire) {
        return ampd_sys::poll::poll_one(signals, true, false, None)
            .is_ok_and(|ready| ready.is_some());
    }
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

/// Apply a reloaded configuration's applications (none once a stop has begun: they would
/// start after it took the running ones, and nobody would stop them).
pub fn reload(applications: &[Application]) {
    if STOPPING.load(Ordering::Acquire) {
        return;
    }
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
    STOPPING.store(true, Ordering::Release);
    let supervisor = held().take();
    if let Some(supervisor) = supervisor {
        supervisor.stop_within(limit);
    }
}

#[cfg(test)]
mod tests {
    use std::os::fd::AsFd;
    use std::time::Instant;

    use super::*;
    use crate::programs::test_support::TempDir;

    #[test]
    fn once_a_stop_has_begun_the_signal_thread_waits_without_the_lock() {
        let dir = TempDir::new("handoff");
        let application = Application {
            name: "handoff".to_owned(),
            command: vec!["sleep".to_owned(), "600".to_owned()],
            processes: 1,
            socket: dir.path().join("handoff.sock"),
            directory: dir.path().to_path_buf(),
            env: Vec::new(),
            stop_timeout: Duration::from_secs(30),
        };
        start(&[application]).unwrap();
        // The stopping thread has said so and holds the applications; the signal thread's
        // wait (over a pipe standing for its signalfd, with a signal pending) must not need
        // them.
        STOPPING.store(true, Ordering::Release);
        let holding = held();
        let (signals, pending) = ampd_sys::io::pipe().unwrap();
        ampd_sys::io::write(pending.as_fd(), b"x").unwrap();
        let (done, waited) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = done.send(tend_until(signals.as_fd()));
        });
        let answer = waited.recv_timeout(Duration::from_secs(5));
        drop(holding);
        assert_eq!(answer, Ok(true), "the signal thread waited for the lock");
        // The stop itself: `sleep` ends at its SIGTERM, long before its stop_timeout.
        let began = Instant::now();
        stop_within(Duration::MAX);
        let took = began.elapsed();
        assert!(took < Duration::from_secs(10), "the stop took {took:?}");
        assert!(!dir.path().join("handoff.sock").exists());
    }
}
