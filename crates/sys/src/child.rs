//! Worker processes: `fork`, reaping, signalling, and tying a worker's life to its master's;
//! watching a child's end through a pidfd and signalling a child's process group (CGI scripts
//! and persistent applications run in groups of their own).
//!
//! Owns: the process-creation calls the `mp` engine's master makes (Apache prefork's shape),
//! and what a `std::process::Command` does in its child before `exec` (`reset_signals`,
//! `die_with_parent`). Must not touch: what a worker does (the engine decides), the signal
//! calls themselves (see `signal.rs`).

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

/// Make the child that `command` starts receive `signal` when the thread that starts it ends
/// (`PR_SET_PDEATHSIG`, set in the child between `fork` and `exec`): a program the server
/// keeps does not outlive a server killed with `SIGKILL`. If the parent has already gone by
/// then, the spawn fails with `ESRCH` instead. (`std` then forks rather than `posix_spawn`s.)
pub fn die_with_parent(command: &mut std::process::Command, signal: i32) {
    use std::os::unix::process::CommandExt;
    let parent = pid();
    let signal = libc::c_ulong::try_from(signal).unwrap_or(0);
    let in_child = move || -> io::Result<()> {
        // SAFETY: prctl(PR_SET_PDEATHSIG) takes integers, no pointers; it is a plain system
        // call (async-signal-safe), allowed between fork and exec.
        if unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, signal, 0, 0, 0) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: getppid takes no arguments and cannot fail.
        if unsafe { libc::getppid() } != parent {
            return Err(io::Error::from_raw_os_error(libc::ESRCH));
        }
        Ok(())
    };
    // SAFETY: `in_child` runs in the forked child before exec; it only makes the two system
    // calls above and builds an error from an integer (no allocation, no lock), which is what
    // `pre_exec` requires of it.
    unsafe {
        command.pre_exec(in_child);
    }
}

/// Start the program `command` runs with every signal at its default action and `blocked` as
/// its mask (see `signal::reset_in_child`), whichever thread of the server spawns it: empty for
/// a program that is not ampd; ampd's own handled set for a copy of ampd, which reads those
/// from its signalfd, so that one sent before it has set up its handling waits instead of
/// killing it. Every program the server starts goes through here (or `spawn::spawn_passing`).
/// (`std` then forks rather than `posix_spawn`s.)
pub fn reset_signals(command: &mut std::process::Command, blocked: crate::signal::SignalSet) {
    use std::os::unix::process::CommandExt;
    let in_child = move || crate::signal::reset_in_child(&blocked);
    // SAFETY: `in_child` runs in the forked child before exec; it makes only sigaction and
    // sigprocmask calls on a sigset_t it owns (no allocation, no lock), which is what
    // `pre_exec` requires of it.
    unsafe {
        command.pre_exec(in_child);
    }
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

    /// `reap_any` waits for any child of the process: beside the tests that start children it
    /// would take theirs (one killed `sleep` was reaped here, and its own test's `wait` then
    /// failed). So it runs in a process of its own, this test binary started again for it.
    #[test]
    fn reaping_without_children_is_none() {
        let run = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "child::tests::reaping_in_a_process_without_children",
                "--exact",
                "--ignored",
                "--test-threads=1",
            ])
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&run.stdout);
        assert!(
            run.status.success() && stdout.contains("1 passed"),
            "{stdout}\n{}",
            String::from_utf8_lossy(&run.stderr)
        );
    }

    #[test]
    #[ignore = "run in a process of its own by reaping_without_children_is_none"]
    fn reaping_in_a_process_without_children() {
        assert_eq!(reap_any().unwrap(), None);
    }

    #[test]
    fn kill_checks_its_pid() {
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
    fn a_child_dies_with_the_thread_that_started_it() {
        use std::os::unix::process::ExitStatusExt;
        let mut child = std::thread::spawn(|| {
            let mut command = std::process::Command::new("sleep");
            command.arg("30");
            die_with_parent(&mut command, libc::SIGKILL);
            command.spawn().unwrap()
        })
        .join()
        .unwrap();
        // The spawning thread has ended: the kernel sent the signal.
        let status = child.wait().unwrap();
        assert_eq!(status.signal(), Some(libc::SIGKILL), "{status:?}");
    }

    /// `SigBlk:` and `SigIgn:` of `/proc/PID/status`, as numbers.
    fn blocked_and_ignored(pid: u32) -> (u64, u64) {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        let field = |name: &str| {
            let line = status
                .lines()
                .find_map(|line| line.strip_prefix(name))
                .unwrap();
            u64::from_str_radix(line.trim(), 16).unwrap()
        };
        (field("SigBlk:"), field("SigIgn:"))
    }

    #[test]
    fn a_program_starts_with_default_signals_and_the_mask_it_is_given() {
        use crate::signal::{SignalSet, SIGHUP, SIGTERM};
        // On a thread of its own: its mask and the process's ignored SIGPWR stand for the
        // server's (the harness's other threads keep their masks; no test here uses SIGPWR).
        let ignored = libc::SIGPWR;
        std::thread::spawn(move || {
            crate::signal::block(&SignalSet::of(&[SIGTERM, SIGHUP])).unwrap();
            // SAFETY: SIG_IGN installs no handler code; the old disposition is restored below.
            let previous = unsafe { libc::signal(ignored, libc::SIG_IGN) };
            let start = |blocked: SignalSet| {
                let mut command = std::process::Command::new("sleep");
                command.arg("30");
                reset_signals(&mut command, blocked);
                let mut child = command.spawn().unwrap();
                let state = blocked_and_ignored(child.id());
                let _ = child.kill();
                let _ = child.wait();
                state
            };
            let bit = |signal: i32| 1u64 << (signal - 1);
            assert_eq!(start(SignalSet::empty()), (0, 0));
            assert_eq!(start(SignalSet::of(&[SIGHUP])), (bit(SIGHUP), 0));
            // SAFETY: puts back the disposition read above.
            unsafe { libc::signal(ignored, previous) };
        })
        .join()
        .unwrap();
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
