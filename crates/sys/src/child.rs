//! Worker processes: `fork`, reaping, signalling, and tying a worker's life to its master's.
//!
//! Owns: the process-creation calls the `mp` engine's master makes (Apache prefork's shape).
//! Must not touch: what a worker does (the engine decides), signal masks (see `signal.rs`).

use std::io;

use crate::cvt::{cvt, cvt_retry};

/// A process id.
pub type Pid = i32;

/// Which side of a `fork` the caller is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Forked {
    /// The original process; `child` is the new one.
    Parent { child: Pid },
    /// The new process.
    Child,
}

/// How a reaped child ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// `exit(code)`.
    Code(i32),
    /// Killed by this signal.
    Signal(i32),
}

/// Whether the calling process runs exactly one thread (reads `/proc/self/task`).
///
/// # Errors
/// `/proc` is not mounted.
pub fn single_threaded() -> io::Result<bool> {
    Ok(std::fs::read_dir("/proc/self/task")?.count() == 1)
}

/// Creates a worker process: a copy of this one that continues from here.
///
/// Refuses (`Err(Other)`) when the process runs more than one thread: the child of a threaded
/// process gets only the calling thread, and a lock another thread held at the moment of the
/// fork (the allocator's, stdout's) would stay locked in the child forever. Masters fork before
/// they start any thread.
///
/// # Errors
/// More than one thread; `EAGAIN` (process limit), `ENOMEM`.
pub fn fork() -> io::Result<Forked> {
    if !single_threaded()? {
        return Err(io::Error::other(
            "fork refused: the process runs more than one thread",
        ));
    }
    // SAFETY: the process has exactly one thread (checked above, and only this thread could
    // start another), so the child inherits no lock held by a thread that does not exist in it;
    // fork takes no pointers.
    let pid = cvt(unsafe { libc::fork() })?;
    if pid == 0 {
        Ok(Forked::Child)
    } else {
        Ok(Forked::Parent { child: pid })
    }
}

/// Reaps one child that has ended, without waiting: `Ok(None)` when none has (or there are no
/// children left).
///
/// # Errors
/// None expected (`ECHILD` is `Ok(None)`).
pub fn reap_any() -> io::Result<Option<(Pid, Exit)>> {
    let mut status: libc::c_int = 0;
    // SAFETY: `status` is a live, writable int; -1 means any child.
    let result = cvt_retry(|| unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) });
    match result {
        Ok(0) => Ok(None),
        Ok(pid) => Ok(Some((pid, decode(status)))),
        Err(error) if error.raw_os_error() == Some(libc::ECHILD) => Ok(None),
        Err(error) => Err(error),
    }
}

/// Reaps child `pid` if it has ended, without waiting: `Ok(None)` while it runs.
///
/// # Errors
/// `ECHILD`: `pid` is not a child of this process (or was reaped already).
pub fn reap(pid: Pid) -> io::Result<Option<Exit>> {
    let mut status: libc::c_int = 0;
    // SAFETY: `status` is a live, writable int; `pid` names one process.
    match cvt_retry(|| unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) })? {
        0 => Ok(None),
        _ => Ok(Some(decode(status))),
    }
}

fn decode(status: libc::c_int) -> Exit {
    if libc::WIFSIGNALED(status) {
        Exit::Signal(libc::WTERMSIG(status))
    } else {
        Exit::Code(libc::WEXITSTATUS(status))
    }
}

/// Sends `signal` to process `pid`.
///
/// # Errors
/// `ESRCH` when it no longer exists; `EINVAL` for a bad signal number. `pid` must be positive
/// (no process groups or broadcast through this call).
pub fn kill(pid: Pid, signal: i32) -> io::Result<()> {
    if pid <= 0 {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    // SAFETY: kill takes no pointers; pid > 0 names one process.
    cvt(unsafe { libc::kill(pid, signal) })?;
    Ok(())
}

/// The calling process's id.
#[must_use]
pub fn pid() -> Pid {
    // SAFETY: getpid cannot fail and takes no arguments.
    unsafe { libc::getpid() }
}

/// The calling process's parent's id (1, or a subreaper's, once the parent has died).
#[must_use]
pub fn parent_pid() -> Pid {
    // SAFETY: getppid cannot fail and takes no arguments.
    unsafe { libc::getppid() }
}

/// Asks the kernel to send `signal` to the calling process when its parent dies, so a worker
/// never outlives a master killed with `SIGKILL`. Check [`parent_pid`] afterwards: a parent that
/// died before this call is not noticed.
///
/// # Errors
/// `EINVAL` for a bad signal number.
pub fn set_parent_death_signal(signal: i32) -> io::Result<()> {
    let signal = libc::c_ulong::try_from(signal).map_err(|_| io::ErrorKind::InvalidInput)?;
    // SAFETY: PR_SET_PDEATHSIG takes an integer argument and no pointers.
    cvt(unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, signal, 0, 0, 0) })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reaping_without_children_is_none_and_kill_checks_its_pid() {
        assert_eq!(reap_any().unwrap(), None);
        assert!(kill(0, libc::SIGTERM).is_err());
        assert!(kill(-1, libc::SIGTERM).is_err());
        // Signal 0 checks existence only.
        kill(pid(), 0).unwrap();
        assert!(parent_pid() > 0);
    }

    #[test]
    fn fork_is_refused_while_other_threads_run() {
        // The test harness runs tests on threads, so this process is multi-threaded.
        let (stop, wait) = std::sync::mpsc::channel::<()>();
        let other = std::thread::spawn(move || {
            let _ = wait.recv();
        });
        let error = fork().unwrap_err();
        assert!(
            error.to_string().contains("more than one thread"),
            "{error}"
        );
        drop(stop);
        other.join().unwrap();
    }
}
