//! Worker processes: `fork`, reaping, signalling, and tying a worker's life to its master's;
//! watching a child's end through a pidfd and signalling a child's process group (CGI scripts
//! and persistent applications run in groups of their own).
//!
//! Owns: the process-creation calls the `mp` engine's master makes (Apache prefork's shape).
//! Must not touch: what a worker does (the engine decides), signal masks (see `signal.rs`).

use std::io;
use std::os::fd::{FromRawFd, OwnedFd};

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

/// Sends `signal` to every process of group `group` (`killpg`): a script's or an
/// application's children go with it.
///
/// # Errors
/// `ESRCH` when no process is left in the group; `EINVAL` for a bad signal number. `group`
/// must be positive (0 would name the caller's own group, -1 every process).
pub fn kill_group(group: Pid, signal: i32) -> io::Result<()> {
    if group <= 0 {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    // SAFETY: killpg takes no pointers; group > 0 names one process group.
    cvt(unsafe { libc::killpg(group, signal) })?;
    Ok(())
}

/// A pidfd for process `pid` (`pidfd_open`, Linux 5.3): it polls readable once the process has
/// ended, so a thread that waits on several descriptors hears of a child's end without
/// `SIGCHLD`. Close-on-exec. Open it before the child is reaped (then `pid` cannot be reused).
///
/// # Errors
/// `ESRCH` when `pid` names no process; `ENOSYS` before Linux 5.3; `EMFILE`.
pub fn pidfd_open(pid: Pid) -> io::Result<OwnedFd> {
    if pid <= 0 {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    // SAFETY: pidfd_open takes a pid and flags, no pointers.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    let fd = libc::c_int::try_from(fd).map_err(|_| io::Error::from_raw_os_error(libc::EBADF))?;
    // SAFETY: the kernel just created `fd` (close-on-exec by pidfd_open's definition) and nobody
    // else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
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
    fn a_pidfd_polls_readable_at_the_end_and_a_group_is_signalled_whole() {
        use std::os::fd::AsFd;
        use std::os::unix::process::CommandExt;
        use std::time::Duration;
        // A group of two: the shell and its sleeping child; killing the group ends both.
        let mut shell = std::process::Command::new("/bin/sh")
            .args(["-c", "sleep 30 & wait"])
            .process_group(0)
            .spawn()
            .unwrap();
        let pid = Pid::try_from(shell.id()).unwrap();
        let pidfd = pidfd_open(pid).unwrap();
        let quiet = crate::poll::poll_one(pidfd.as_fd(), true, false, Some(Duration::ZERO));
        assert!(quiet.unwrap().is_none(), "running: not readable");
        assert!(kill_group(0, libc::SIGKILL).is_err() && kill_group(-1, libc::SIGKILL).is_err());
        kill_group(pid, libc::SIGKILL).unwrap();
        let ended = crate::poll::poll_one(pidfd.as_fd(), true, false, Some(Duration::from_secs(5)));
        assert!(ended.unwrap().is_some_and(|fd| fd.readable));
        assert!(shell.wait().unwrap().code().is_none());
        // The sleeping child was in the group: nothing is left in it.
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while kill_group(pid, 0).is_ok() {
            assert!(
                std::time::Instant::now() < deadline,
                "the group outlived the kill"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
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
