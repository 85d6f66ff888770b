//! One process of an application: started with the listening socket as descriptor 0 and one
//! pipe as both stdout and stderr (so their lines keep their order), in a process group of its
//! own, with default signal handling (not the server's mask), killed by the kernel if the
//! thread that started it ends (the server killed outright); its output in the error log as
//! `application NAME[pid]: line`; its end noticed through a pidfd; the backoff before it is
//! started again.
//!
//! Owns: spawning, the output, the backoff arithmetic. Must not touch: when to stop (the
//! supervisor decides).

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use ampd_sys::child::{self, Pid};
use ampd_sys::signal::SignalSet;

use crate::config::{Application, Level};
use crate::log::error;
use crate::log::error::Throttle;
use crate::programs::lines::{ProgramLines, POOL_LINES_PER_INTERVAL};

/// The first wait before a process that ended is started again; it doubles with each quick
/// end, up to `LONGEST_BACKOFF` (systemd's `RestartSec`, supervisord's backoff).
pub const FIRST_BACKOFF: Duration = Duration::from_millis(100);
pub const LONGEST_BACKOFF: Duration = Duration::from_secs(30);
/// A process that ran this long before it ended is started again after `FIRST_BACKOFF`.
pub const STABLE_RUN: Duration = Duration::from_secs(10);

/// The output lines of all applications' processes together (each has its own budget too).
static OUTPUT_LINES: Throttle = Throttle::with_budget(POOL_LINES_PER_INTERVAL);

/// A process's stdout and stderr (one pipe), cut into lines for the error log.
#[derive(Debug)]
pub struct Output {
    fd: OwnedFd,
    lines: ProgramLines,
    label: String,
}

impl Output {
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// Log what the pipe holds; `true` at its end (every writer closed it).
    pub fn read(&mut self, buffer: &mut [u8]) -> bool {
        let label = &self.label;
        // Bounded, so one process that writes without pause cannot hold the others.
        for _ in 0..16 {
            match ampd_sys::io::read(self.fd.as_fd(), buffer) {
                Ok(0) => {
                    self.lines.finish(|line| log_line(label, line));
                    return true;
                }
                Ok(read) => self
                    .lines
                    .push(&buffer[..read], |line| log_line(label, line)),
                Err(failure) if failure.kind() == io::ErrorKind::Interrupted => {}
                Err(failure) if failure.kind() == io::ErrorKind::WouldBlock => return false,
                Err(_) => {
                    self.lines.finish(|line| log_line(label, line));
                    return true;
                }
            }
        }
        false
    }
}

fn log_line(label: &str, line: &str) {
    error::log(Level::Warn, format_args!("{label}: {line}"));
}

/// A process that runs.
#[derive(Debug)]
pub struct Live {
    pub pid: Pid,
    child: Child,
    pidfd: OwnedFd,
    /// `None` once the pipe ended (the process closed it, or it was handed on at its end).
    pub output: Option<Output>,
    started: Instant,
}

impl Live {
    /// Start one process of `application` with `socket` as its descriptor 0.
    ///
    /// # Errors
    /// The program cannot be executed (not found, not executable); descriptors exhausted.
    pub fn spawn(application: &Application, socket: BorrowedFd<'_>) -> io::Result<Live> {
        let Some((program, arguments)) = application.command.split_first() else {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "empty command"));
        };
        // A program named by a relative path with a slash is found from the application's
        // directory; a bare name is looked up in PATH.
        let program = if program.contains('/') {
            application.directory.join(program)
        } else {
            PathBuf::from(program)
        };
        let (read_end, write_end) = ampd_sys::io::pipe()?;
        ampd_sys::socket::set_nonblocking(read_end.as_fd(), true)?;
        let mut command = Command::new(&program);
        // Not left running by a server killed outright (no one would stop them, and the next
        // start replaces their socket).
        child::die_with_parent(&mut command, ampd_sys::signal::SIGKILL);
        // Not with the server's blocked signals: it stops them with SIGTERM.
        child::reset_signals(&mut command, SignalSet::empty());
        command
            .args(arguments)
            .envs(application.env.iter().map(|(name, value)| (name, value)))
            .current_dir(&application.directory)
            .process_group(0)
            .stdin(Stdio::from(socket.try_clone_to_owned()?))
            .stdout(Stdio::from(write_end.try_clone()?))
            .stderr(Stdio::from(write_end));
        let spawned = command.spawn();
        // This process's copies of the socket and the pipe's write end go now: the pipe then
        // ends when the process (and whatever it started) has closed it.
        drop(command);
        let mut child = spawned?;
        let pid = Pid::try_from(child.id()).map_err(io::Error::other)?;
        let pidfd = match child::pidfd_open(pid) {
            Ok(pidfd) => pidfd,
            Err(failure) => {
                let _ = child::kill_group(pid, ampd_sys::signal::SIGKILL);
                let _ = child.wait();
                return Err(failure);
            }
        };
        Ok(Live {
            pid,
            child,
            pidfd,
            output: Some(Output {
                fd: read_end,
                lines: ProgramLines::new(&OUTPUT_LINES),
                label: format!("application {}[{pid}]", application.name),
            }),
            started: Instant::now(),
        })
    }

    pub fn pidfd(&self) -> BorrowedFd<'_> {
        self.pidfd.as_fd()
    }

    /// Whether the process has ended (it is a zombie until `reap`).
    pub fn ended(&self) -> bool {
        ampd_sys::poll::poll_one(self.pidfd.as_fd(), true, false, Some(Duration::ZERO))
            .is_ok_and(|ready| ready.is_some())
    }

    /// Send `signal` to the process's group (before it is reaped, its id still names it).
    pub fn signal_group(&self, signal: i32) {
        let _ = child::kill_group(self.pid, signal);
    }

    /// `SIGKILL` to the group, then wait for the process.
    pub fn kill_and_reap(mut self) {
        self.signal_group(ampd_sys::signal::SIGKILL);
        let _ = self.child.wait();
    }

    /// Reap an ended process: how it ended and how long it ran.
    pub fn reap(mut self) -> (Option<ExitStatus>, Duration, Option<Output>) {
        let status = self.child.try_wait().ok().flatten();
        (status, self.started.elapsed(), self.output.take())
    }
}

/// How a process ended, for the log.
pub fn describe(status: Option<ExitStatus>) -> String {
    match status {
        Some(status) => match (status.code(), status.signal()) {
            (Some(code), _) => format!("exited with status {code}"),
            (None, Some(signal)) => format!("was killed by signal {signal}"),
            (None, None) => "ended".to_owned(),
        },
        None => "ended".to_owned(),
    }
}

/// The wait before the next start, given the last one and how long the process ran; and the
/// wait after that one.
pub fn backoff(last: Duration, ran: Duration) -> (Duration, Duration) {
    let wait = if ran >= STABLE_RUN {
        FIRST_BACKOFF
    } else {
        last
    };
    (wait, (wait * 2).min(LONGEST_BACKOFF))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_backoff_doubles_to_thirty_seconds_and_resets_after_a_stable_run() {
        let quick = Duration::from_millis(5);
        let mut next = FIRST_BACKOFF;
        let mut waits = Vec::new();
        for _ in 0..12 {
            let (wait, after) = backoff(next, quick);
            waits.push(wait.as_millis());
            next = after;
        }
        assert_eq!(
            waits,
            [100, 200, 400, 800, 1600, 3200, 6400, 12800, 25600, 30000, 30000, 30000]
        );
        assert_eq!(
            backoff(next, STABLE_RUN),
            (FIRST_BACKOFF, FIRST_BACKOFF * 2)
        );
    }
}
