//! The binary upgrade (`SIGUSR2`, as nginx's): the running server starts the binary it was
//! started from, with the same arguments, and passes it its listening sockets by systemd's
//! convention (`LISTEN_FDS`, `LISTEN_PID`: the new process takes them as it takes sockets from
//! systemd), every per-loop `SO_REUSEPORT` socket included, so a connection waiting in any
//! backlog is accepted by one process or the other and none is refused. The new process says it
//! is ready on a pipe (`AMPD_UPGRADE_READY_FD`) once it has printed its ready line; only then
//! does the old one drain (without `drain_delay`: the port never stops answering). A new
//! process that exits, or is not ready within `READY_TIMEOUT`, is reaped (killed if need be),
//! the reason is logged, and the old one goes on serving.
//!
//! The program is the path the server was started by (argv[0] made absolute at start-up,
//! searched in `PATH` if it had no slash), not `/proc/self/exe`: after a package manager has
//! replaced the file, that names the deleted old inode.
//!
//! Owns: remembering the invocation, starting the successor and waiting for it, and the new
//! process's side of the ready pipe. Must not touch: the drain itself (`Control`), the fork and
//! descriptor moves (`ampd_sys::spawn`).

use std::ffi::OsString;
use std::fmt;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use ampd_sys::child::{self, Exit, Pid};
use ampd_sys::spawn::{self, Passed};

/// The variable that names the ready pipe in the new process.
pub const READY_FD_VAR: &str = "AMPD_UPGRADE_READY_FD";

/// How long a new process may take from `exec` to its ready line (it opens every document
/// root and the logs, and under `mp` has not forked its workers yet).
pub const READY_TIMEOUT: Duration = Duration::from_secs(30);

/// How the server was started: what an upgrade runs again.
#[derive(Clone, Debug)]
struct Invocation {
    program: PathBuf,
    /// argv, argv[0] included.
    args: Vec<OsString>,
}

static INVOCATION: OnceLock<Invocation> = OnceLock::new();
/// The new process's end of the ready pipe, until it reports.
static READY: Mutex<Option<OwnedFd>> = Mutex::new(None);

/// At start-up, before anything opens a descriptor (and before `LISTEN_PID` is consumed):
/// remember how this process was started, and take the ready pipe if an upgrading parent
/// passed one.
///
/// # Errors
/// The passed pipe's number names no open descriptor.
pub fn at_start() -> io::Result<()> {
    let args: Vec<OsString> = std::env::args_os().collect();
    if let Some(program) = args.first().and_then(|first| resolve(Path::new(first))) {
        let _ = INVOCATION.set(Invocation { program, args });
    }
    let pipe = spawn::take_passed(READY_FD_VAR)?;
    *READY.lock().unwrap_or_else(PoisonError::into_inner) = pipe;
    Ok(())
}

/// argv[0] as an absolute path: relative to the working directory if it has a slash, else the
/// first match in `PATH` (as the shell found it); else the executable as it is now.
fn resolve(first: &Path) -> Option<PathBuf> {
    if first.is_absolute() {
        return Some(first.to_path_buf());
    }
    if first.components().count() > 1 {
        return std::env::current_dir().ok().map(|dir| dir.join(first));
    }
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(first))
            .find(|candidate| candidate.is_file())
    });
    found.or_else(|| std::env::current_exe().ok())
}

/// In the new process, once it serves (after the ready line): tell the old one. Nothing when
/// this process was not started by an upgrade.
pub fn report_ready() {
    if let Some(pipe) = READY.lock().unwrap_or_else(PoisonError::into_inner).take() {
        let line = format!("{}\n", std::process::id());
        let _ = ampd_sys::io::write(pipe.as_fd(), line.as_bytes());
    }
}

/// Why an upgrade did not happen (the old process keeps serving).
#[derive(Debug)]
pub enum Failed {
    /// The start-up path was not recorded (argv[0] could not be resolved).
    NoInvocation,
    /// Nothing to pass (the listeners are closed: a stop has begun).
    NoListeners,
    Spawn {
        program: PathBuf,
        error: io::Error,
    },
    Exited {
        pid: Pid,
        exit: Exit,
    },
    NotReady {
        pid: Pid,
    },
    Wait(io::Error),
}

impl fmt::Display for Failed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failed::NoInvocation => write!(f, "the path this server was started by is unknown"),
            Failed::NoListeners => write!(f, "the listening sockets are closed (stopping)"),
            Failed::Spawn { program, error } => {
                write!(f, "cannot start {}: {error}", program.display())
            }
            Failed::Exited {
                pid,
                exit: Exit::Code(code),
            } => write!(
                f,
                "new process {pid} exited with status {code} before it was ready (its error is above)"
            ),
            Failed::Exited {
                pid,
                exit: Exit::Signal(signal),
            } => write!(
                f,
                "new process {pid} was killed by signal {signal} before it was ready"
            ),
            Failed::NotReady { pid } => write!(
                f,
                "new process {pid} was not ready within {}s; killed it",
                READY_TIMEOUT.as_secs()
            ),
            Failed::Wait(error) => write!(f, "waiting for the new process: {error}"),
        }
    }
}

/// Start the successor with `listeners` and wait until it is ready; its pid.
///
/// # Errors
/// See `Failed`: in every case no successor runs any more.
pub fn start_successor(listeners: &[BorrowedFd<'_>]) -> Result<Pid, Failed> {
    let invocation = INVOCATION.get().ok_or(Failed::NoInvocation)?;
    if listeners.is_empty() {
        return Err(Failed::NoListeners);
    }
    let (ready_in, ready_out) = ampd_sys::io::pipe().map_err(Failed::Wait)?;
    let env: Vec<(OsString, OsString)> = std::env::vars_os()
        .filter(|(name, _)| {
            !matches!(
                name.to_str(),
                Some("LISTEN_PID" | "LISTEN_FDS" | "LISTEN_FDNAMES" | READY_FD_VAR)
            )
        })
        .collect();
    let pid = spawn::spawn_passing(
        &invocation.program,
        &invocation.args,
        &env,
        &Passed {
            listeners,
            extra: Some((READY_FD_VAR, ready_out.as_fd())),
            blocked: crate::programs::handled_signals(),
        },
    )
    .map_err(|error| Failed::Spawn {
        program: invocation.program.clone(),
        error,
    })?;
    drop(ready_out);
    wait_ready(pid, &ready_in)
}

/// Wait for the ready line (the pipe's end means the process exited, or closed it unready).
fn wait_ready(pid: Pid, ready: &OwnedFd) -> Result<Pid, Failed> {
    let deadline = Instant::now() + READY_TIMEOUT;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            let _ = child::kill(pid, ampd_sys::signal::SIGKILL);
            return Err(reap_within(pid, Duration::from_secs(5))
                .map_or_else(Failed::Wait, |_| Failed::NotReady { pid }));
        }
        let mut fds = [ampd_sys::poll::PollFd::new(ready.as_fd(), true, false)];
        ampd_sys::poll::poll(&mut fds, Some(left)).map_err(Failed::Wait)?;
        if !fds[0].ready() {
            continue;
        }
        let mut line = [0u8; 32];
        match ampd_sys::io::read(ready.as_fd(), &mut line) {
            Ok(0) => {
                // Closed unready: it exits (or has); a process that lingers is made to.
                return match reap_within(pid, Duration::from_secs(5)) {
                    Ok(Some(exit)) => Err(Failed::Exited { pid, exit }),
                    Ok(None) => {
                        let _ = child::kill(pid, ampd_sys::signal::SIGKILL);
                        let _ = reap_within(pid, Duration::from_secs(5));
                        Err(Failed::NotReady { pid })
                    }
                    Err(error) => Err(Failed::Wait(error)),
                };
            }
            Ok(_) => return Ok(pid),
            Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
            Err(error) => return Err(Failed::Wait(error)),
        }
    }
}

/// Reap `pid`, waiting at most `within`: its exit, or `None` if it still runs.
fn reap_within(pid: Pid, within: Duration) -> io::Result<Option<Exit>> {
    let deadline = Instant::now() + within;
    loop {
        if let Some(exit) = child::reap(pid)? {
            return Ok(Some(exit));
        }
        if Instant::now() >= deadline {
            return Ok(None);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argv0_becomes_an_absolute_path_without_resolving_links() {
        let dir = std::env::current_dir().unwrap();
        assert_eq!(
            resolve(Path::new("target/debug/ampd")),
            Some(dir.join("target/debug/ampd"))
        );
        assert_eq!(
            resolve(Path::new("/usr/sbin/ampd")),
            Some(PathBuf::from("/usr/sbin/ampd"))
        );
        // A bare name is looked up in PATH, as the shell did.
        let sh = resolve(Path::new("sh")).unwrap();
        assert!(sh.is_absolute() && sh.ends_with("sh"), "{}", sh.display());
    }
}
