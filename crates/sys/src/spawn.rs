//! Starting a program that inherits listening sockets at fixed descriptor numbers, by systemd's
//! socket-passing convention (sd_listen_fds(3)): the sockets at 3, 4, …, `LISTEN_FDS` their
//! count and `LISTEN_PID` the new process's own id (so a grandchild that inherits the
//! environment does not take them), plus one more descriptor the program is told about in an
//! environment variable of the caller's choice (a pipe to report readiness on).
//!
//! Owns: `fork` + descriptor moves + signal reset + `execve` from a process that may run
//! threads. Between `fork` and `execve` the child runs only async-signal-safe calls (`fcntl`,
//! `dup2`, `getpid`, `sigaction`, `sigprocmask`, `execve`, `write`, `_exit`) on memory prepared
//! before the fork: another thread may have held
//! the allocator's lock at the moment of the fork, so nothing there allocates.
//! Must not touch: what the program does, or the caller's own descriptors (only the child's
//! copies are moved).

use std::ffi::{CString, OsStr, OsString};
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use crate::child::Pid;
use crate::cvt::{cvt, cvt_retry};
use crate::signal::SignalSet;

/// The first descriptor passed sockets sit at (sd_listen_fds' `SD_LISTEN_FDS_START`).
const FIRST: libc::c_int = 3;

/// Digits reserved for the child's pid in `LISTEN_PID=` (pid_max is at most 2^22).
const PID_DIGITS: usize = 10;

/// What the new program gets besides its arguments and environment.
pub struct Passed<'fd> {
    /// Placed at 3, 4, … in this order, with `LISTEN_FDS` and `LISTEN_PID` set.
    pub listeners: &'fd [BorrowedFd<'fd>],
    /// Placed right after the listeners, its number in the environment variable `name`.
    pub extra: Option<(&'fd str, BorrowedFd<'fd>)>,
    /// The new program's signal mask (every signal is at its default action): the signals a
    /// new ampd takes from its signalfd stay pending until it has set up its own handling.
    pub blocked: SignalSet,
}

/// Start `program` with `args` (`args[0]` is its argv[0]) and `env` (which must not set
/// `LISTEN_PID`, `LISTEN_FDS` or the extra's variable: they are added here), passing it
/// `passed`. Returns once the program has been executed (or has failed to be), with its pid.
/// The child starts with `passed.blocked` as its mask, whatever the calling thread's, and no
/// signal ignored (`signal::reset_in_child`).
///
/// # Errors
/// An argument holds a NUL byte (`InvalidInput`); `fork` fails (`EAGAIN`, `ENOMEM`); the
/// program cannot be executed (`ENOENT`, `EACCES`, `ENOEXEC`, …: the child's `execve` error).
pub fn spawn_passing(
    program: &Path,
    args: &[OsString],
    env: &[(OsString, OsString)],
    passed: &Passed<'_>,
) -> io::Result<Pid> {
    let count = passed.listeners.len();
    let sources: Vec<libc::c_int> = passed
        .listeners
        .iter()
        .chain(passed.extra.as_ref().map(|(_, fd)| fd))
        .map(AsRawFd::as_raw_fd)
        .collect();
    let above =
        FIRST + libc::c_int::try_from(sources.len()).map_err(|_| io::ErrorKind::InvalidInput)?;

    let program = c_string(program.as_os_str())?;
    let args: Vec<CString> = args
        .iter()
        .map(|arg| c_string(arg))
        .collect::<io::Result<_>>()?;
    let mut env_lines: Vec<Vec<u8>> = Vec::with_capacity(env.len() + 3);
    for (name, value) in env {
        let mut line = name.as_bytes().to_vec();
        line.push(b'=');
        line.extend_from_slice(value.as_bytes());
        env_lines.push(line);
    }
    env_lines.push(format!("LISTEN_FDS={count}").into_bytes());
    if let Some((name, _)) = passed.extra {
        env_lines.push(format!("{name}={}", above - 1).into_bytes());
    }
    // Filled in by the child, which alone knows its pid.
    let mut pid_line = b"LISTEN_PID=".to_vec();
    let pid_at = pid_line.len();
    pid_line.extend_from_slice(&[b'0'; PID_DIGITS]);
    env_lines.push(pid_line);
    for line in &mut env_lines {
        if line.contains(&0) {
            return Err(io::ErrorKind::InvalidInput.into());
        }
        line.push(0);
    }
    let mut argv: Vec<*const libc::c_char> = args.iter().map(|arg| arg.as_ptr()).collect();
    argv.push(std::ptr::null());
    let lines: Vec<*mut u8> = env_lines.iter_mut().map(Vec::as_mut_ptr).collect();
    // The pid line is the last; its digits start at `pid_at`.
    let pid_digits = lines
        .last()
        .map_or(std::ptr::null_mut(), |line| line.wrapping_add(pid_at));
    let mut envp: Vec<*const libc::c_char> =
        lines.iter().map(|line| line.cast_const().cast()).collect();
    envp.push(std::ptr::null());

    // The child reports a failed execve on this pipe; a successful one closes it (CLOEXEC).
    let (failure_in, failure_out) = crate::io::pipe()?;
    // SAFETY: the child (pid 0) runs only `child_exec`, which makes async-signal-safe calls on
    // memory prepared above (no allocation, no lock) and never returns; the parent continues
    // normally. fork takes no pointers.
    let pid = cvt(unsafe { libc::fork() })?;
    if pid == 0 {
        child_exec(
            &sources,
            above,
            pid_digits,
            &passed.blocked,
            &program,
            &argv,
            &envp,
            failure_out.as_raw_fd(),
        );
    }
    drop(failure_out);
    let mut code = [0u8; 4];
    let read = read_full(&failure_in, &mut code)?;
    if read == 0 {
        return Ok(pid);
    }
    // The exec failed and the child has exited (or is about to): reap it.
    let mut status = 0;
    // SAFETY: `status` is a live, writable int; `pid` is our child.
    let _ = cvt_retry(|| unsafe { libc::waitpid(pid, &mut status, 0) });
    Err(io::Error::from_raw_os_error(i32::from_ne_bytes(code)))
}

/// In the child: move the passed descriptors into place, write the pid, reset the signals,
/// execute. Never returns.
#[allow(clippy::too_many_arguments)]
fn child_exec(
    sources: &[libc::c_int],
    above: libc::c_int,
    pid_digits: *mut u8,
    blocked: &SignalSet,
    program: &CString,
    argv: &[*const libc::c_char],
    envp: &[*const libc::c_char],
    failure: libc::c_int,
) -> ! {
    let fail = || -> ! {
        let code = io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO)
            .to_ne_bytes();
        // SAFETY: `code` is 4 readable bytes; write and _exit are async-signal-safe.
        unsafe {
            libc::write(failure, code.as_ptr().cast(), code.len());
            libc::_exit(127)
        }
    };
    // First copy every source above the target range (a source may sit where another must go),
    // close-on-exec so the copies vanish at execve; then dup2 into place, which clears
    // close-on-exec on the targets. At most 64 + 1 descriptors are passed.
    let mut copies = [0 as libc::c_int; 72];
    if sources.len() > copies.len() {
        fail();
    }
    for (copy, &source) in copies.iter_mut().zip(sources) {
        // SAFETY: fcntl(F_DUPFD_CLOEXEC) takes an integer argument and no pointers.
        let duplicate = unsafe { libc::fcntl(source, libc::F_DUPFD_CLOEXEC, above) };
        if duplicate < 0 {
            fail();
        }
        *copy = duplicate;
    }
    for (target, &copy) in (FIRST..).zip(&copies[..sources.len()]) {
        // SAFETY: dup2 takes two integers and no pointers.
        if unsafe { libc::dup2(copy, target) } < 0 {
            fail();
        }
    }
    // SAFETY: getpid takes no arguments and cannot fail.
    let mut pid = unsafe { libc::getpid() }.unsigned_abs();
    let mut digits = [0u8; PID_DIGITS];
    let mut used = 0;
    loop {
        digits[PID_DIGITS - 1 - used] = b'0' + (pid % 10) as u8;
        used += 1;
        pid /= 10;
        if pid == 0 || used == PID_DIGITS {
            break;
        }
    }
    // SAFETY: `pid_digits` points at the PID_DIGITS bytes after "LISTEN_PID=" in a line this
    // process owns (its copy after the fork), followed by the line's NUL; we write `used` ≤
    // PID_DIGITS digits and a NUL right after them, inside those bytes or onto the final NUL.
    unsafe {
        std::ptr::copy_nonoverlapping(digits[PID_DIGITS - used..].as_ptr(), pid_digits, used);
        *pid_digits.add(used) = 0;
    }
    if crate::signal::reset_in_child(blocked).is_err() {
        fail();
    }
    // SAFETY: `program` is a NUL-terminated path; `argv` and `envp` are arrays of pointers to
    // NUL-terminated strings that live until execve replaces the process, each ending in NULL.
    unsafe { libc::execve(program.as_ptr(), argv.as_ptr(), envp.as_ptr()) };
    fail()
}

fn c_string(text: &OsStr) -> io::Result<CString> {
    CString::new(text.as_bytes()).map_err(|_| io::ErrorKind::InvalidInput.into())
}

/// Read until `buf` is full or the end of the pipe; how many bytes were read.
fn read_full(fd: &OwnedFd, buf: &mut [u8]) -> io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match crate::io::read(std::os::fd::AsFd::as_fd(fd), &mut buf[filled..]) {
            Ok(0) => break,
            Ok(read) => filled += read,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
            Err(error) => return Err(error),
        }
    }
    Ok(filled)
}

/// Take the descriptor a parent passed as `Passed::extra` under `name`, if the variable names an
/// open descriptor and `LISTEN_PID` names this process (call it before
/// `socket::take_activated_listeners`, which removes `LISTEN_PID`). The variable is removed, so
/// a second call, or a child that inherits the environment, finds nothing.
///
/// # Errors
/// The variable names a descriptor that is not open (`EBADF`).
pub fn take_passed(name: &str) -> io::Result<Option<OwnedFd>> {
    let Some(value) = std::env::var_os(name) else {
        return Ok(None);
    };
    std::env::remove_var(name);
    let for_us = std::env::var("LISTEN_PID")
        .ok()
        .and_then(|pid| pid.parse::<u32>().ok())
        == Some(std::process::id());
    let Some(fd) = value
        .to_str()
        .and_then(|text| text.parse::<libc::c_int>().ok())
    else {
        return Ok(None);
    };
    if !for_us || fd < FIRST {
        return Ok(None);
    }
    // SAFETY: F_GETFD takes no pointers; it only tells whether `fd` is open.
    cvt(unsafe { libc::fcntl(fd, libc::F_GETFD) })?;
    // SAFETY: F_SETFD takes an integer flag, no pointers.
    cvt(unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) })?;
    // SAFETY: `fd` is open (checked above) and was passed to this process for it alone
    // (`for_us`); the variable is removed, so nothing else takes it.
    Ok(Some(unsafe { std::os::fd::FromRawFd::from_raw_fd(fd) }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn the_child_finds_the_descriptors_in_place_and_its_own_pid() {
        // Two pipes stand in for sockets; the child reports what it sees at 3, 4 and 5.
        let (first_in, first_out) = crate::io::pipe().unwrap();
        let (report_in, report_out) = crate::io::pipe().unwrap();
        crate::io::write(first_out.as_fd(), b"one").unwrap();
        drop(first_out);
        let script = "read -r line <&3; echo \"$line $LISTEN_FDS $LISTEN_PID $$ $EXTRA\" >&4";
        let args: Vec<OsString> = ["sh", "-c", script].iter().map(OsString::from).collect();
        let env = vec![(OsString::from("PATH"), OsString::from("/usr/bin:/bin"))];
        let listeners = [first_in.as_fd()];
        let pid = spawn_passing(
            Path::new("/bin/sh"),
            &args,
            &env,
            &Passed {
                listeners: &listeners,
                extra: Some(("EXTRA", report_out.as_fd())),
                blocked: SignalSet::empty(),
            },
        )
        .unwrap();
        drop(report_out);
        let mut out = [0u8; 128];
        let read = read_full(&report_in, &mut out).unwrap();
        let text = String::from_utf8_lossy(&out[..read]).trim().to_owned();
        let words: Vec<&str> = text.split(' ').collect();
        assert_eq!(words[0], "one", "{text}");
        assert_eq!(words[1], "1", "{text}");
        assert_eq!(
            words[2],
            pid.to_string(),
            "LISTEN_PID is the child's: {text}"
        );
        assert_eq!(words[3], pid.to_string(), "{text}");
        assert_eq!(words[4], "4", "{text}");
        let mut status = 0;
        // SAFETY: `status` is writable; `pid` is our child.
        unsafe { libc::waitpid(pid, &mut status, 0) };
    }

    #[test]
    fn the_child_has_the_mask_it_is_given_and_no_signal_ignored() {
        // This process ignores SIGPIPE (Rust's runtime does); a shell would clear its mask
        // itself, so the child is `sleep`, read from outside.
        let args: Vec<OsString> = ["sleep", "30"].iter().map(OsString::from).collect();
        let pid = spawn_passing(
            Path::new("/bin/sleep"),
            &args,
            &[],
            &Passed {
                listeners: &[],
                extra: None,
                blocked: SignalSet::of(&[crate::signal::SIGHUP]),
            },
        )
        .unwrap();
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        crate::child::kill(pid, crate::signal::SIGKILL).unwrap();
        let mut code = 0;
        // SAFETY: `code` is writable; `pid` is our child.
        unsafe { libc::waitpid(pid, &mut code, 0) };
        let field = |name: &str| {
            status
                .lines()
                .find_map(|line| line.strip_prefix(name))
                .map(str::trim)
        };
        assert_eq!(field("SigBlk:"), Some("0000000000000001"), "{status}");
        assert_eq!(field("SigIgn:"), Some("0000000000000000"), "{status}");
    }

    #[test]
    fn a_program_that_cannot_run_is_an_error_here() {
        let args = vec![OsString::from("missing")];
        let error = spawn_passing(
            Path::new("/nonexistent/ampd"),
            &args,
            &[],
            &Passed {
                listeners: &[],
                extra: None,
                blocked: SignalSet::empty(),
            },
        )
        .unwrap_err();
        assert_eq!(error.raw_os_error(), Some(libc::ENOENT), "{error}");
    }
}
