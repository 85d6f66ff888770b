//! The launcher thread: spawns each queued script and watches every running one with one
//! `poll` over their pidfds and stderr pipes (and the queue's eventfd), with the nearest
//! timeout as its limit.
//!
//! Owns: the spawn (`std::process::Command`: environment cleared then the request's
//! meta-variables; the script's directory as its working directory, RFC 3875 §7.2; a process
//! group of its own; default signal handling, not this thread's mask; the socket as stdin and
//! stdout, blocking, as a script expects; a pipe as stderr), the stderr lines in the error log, the kill at the timeout (`SIGKILL` to the group,
//! so what the script started goes too), reaping, and freeing each `Slot` once its script is
//! reaped. Must not touch: the socket's other end (the engine's).

use std::ffi::OsStr;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, Sender, TryRecvError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ampd_sys::child::{self, Pid};
use ampd_sys::eventfd::EventFd;
use ampd_sys::poll::{self, PollFd};
use ampd_sys::signal::{SignalSet, SIGKILL, SIGTERM};

use super::search::{self, Found};
use super::{Launch, LaunchFailure, Slot};
use crate::config::Level;
use crate::log::error::{self, Throttle};
use crate::programs::lines::{ProgramLines, POOL_LINES_PER_INTERVAL};

/// `PATH` for scripts when ampd has none (Apache's `DEFAULT_PATH`); a script's `#!` line often
/// names `/usr/bin/env`, which needs one.
const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// Reads of one script's stderr per turn, so one that writes without pause cannot hold the
/// thread from the others and from the queue.
const READS_PER_TURN: usize = 16;

static SPAWN_FAILED: Throttle = Throttle::new();
/// The stderr lines of all scripts together (each has its own budget too).
static STDERR_LINES: Throttle = Throttle::with_budget(POOL_LINES_PER_INTERVAL);

/// The way into the launcher thread.
pub struct Queue {
    sender: Sender<Job>,
    wake: Arc<EventFd>,
    /// The server is stopping: kill every script's process group (`Queue::stop_all`).
    stopping: Arc<AtomicBool>,
}

struct Job {
    launch: Launch,
    stdio: OwnedFd,
}

/// How often, and after how long, a start that `exec` refused as "text file busy" is tried
/// again.
const TEXT_BUSY_RETRIES: usize = 3;
const TEXT_BUSY_PAUSE: Duration = Duration::from_millis(5);

/// Scripts started per turn of the launcher thread before it reaps and reads stderr again.
const LAUNCHES_PER_TURN: usize = 8;

/// How long a script may run on after the engine closed its end of the socket (the exchange is
/// over) between `SIGTERM` and `SIGKILL` to its group (Apache's `kill_after_timeout`, 3 s).
const EXCHANGE_GONE_GRACE: Duration = Duration::from_secs(3);

impl Queue {
    /// Start the launcher thread.
    ///
    /// # Errors
    /// The eventfd or the thread cannot be made (said in a line for the log).
    pub fn start() -> Result<Queue, String> {
        let wake = Arc::new(
            EventFd::new()
                .map_err(|failure| format!("cannot make the CGI launcher's eventfd: {failure}"))?,
        );
        let (sender, receiver) = mpsc::channel();
        let thread_wake = wake.clone();
        let stopping = Arc::new(AtomicBool::new(false));
        let thread_stopping = stopping.clone();
        std::thread::Builder::new()
            .name("cgi-launcher".to_owned())
            .spawn(move || Watch::new(receiver, thread_wake, thread_stopping).run())
            .map_err(|failure| format!("cannot start the CGI launcher thread: {failure}"))?;
        Ok(Queue {
            sender,
            wake,
            stopping,
        })
    }

    /// The server is stopping: every script still running has its process group killed (and
    /// no other starts), so none outlives the server.
    pub fn stop_all(&self) {
        self.stopping.store(true, Ordering::Release);
        self.wake.notify();
    }

    pub fn push(&self, launch: Launch, stdio: OwnedFd) {
        match self.sender.send(Job { launch, stdio }) {
            Ok(()) => self.wake.notify(),
            Err(mpsc::SendError(job)) => refuse(&job.launch, "the CGI launcher thread has stopped"),
        }
    }
}

impl Drop for Queue {
    /// The last launcher is gone: the thread hears it (and ends once its scripts are reaped).
    fn drop(&mut self) {
        self.wake.notify();
    }
}

/// No script runs for `launch` because of `why` (logged; the client gets `502`).
pub fn refuse(launch: &Launch, why: &str) {
    SPAWN_FAILED.log(Level::Error, format_args!("cgi: {why}"));
    let _ = launch.failure.set(LaunchFailure::Spawn);
}

/// A script that runs (or has ended and whose stderr is still open).
struct Running {
    filename: PathBuf,
    child: Child,
    pidfd: OwnedFd,
    /// `None` once it ended (or was closed at the kill).
    stderr: Option<OwnedFd>,
    lines: ProgramLines,
    /// A copy of the script's end of the socket (its stdin and stdout), kept until its group
    /// is gone (the engine sees the response end then), or dropped when the engine's end closed.
    exchange: Option<OwnedFd>,
    timeout: Duration,
    deadline: Instant,
    /// Why the deadline is what it is.
    cause: Cause,
    killed: bool,
    /// `None` once the script was reaped (its place is free).
    slot: Option<Slot>,
}

/// Why a script is killed at its deadline.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Cause {
    /// `cgi_timeout` has passed.
    Timeout,
    /// The exchange ended while the script ran: `EXCHANGE_GONE_GRACE` after its `SIGTERM`.
    ExchangeGone,
}

impl Running {
    fn pid(&self) -> Pid {
        Pid::try_from(self.child.id()).unwrap_or(Pid::MAX)
    }

    fn finished(&self) -> bool {
        self.slot.is_none() && self.stderr.is_none()
    }

    /// Read what stderr holds (at most `READS_PER_TURN` times), log its lines; close it at its
    /// end.
    fn read_stderr(&mut self, buffer: &mut [u8]) {
        let Some(stderr) = &self.stderr else {
            return;
        };
        let filename = &self.filename;
        for _ in 0..READS_PER_TURN {
            match ampd_sys::io::read(stderr.as_fd(), buffer) {
                Ok(0) => {
                    self.close_stderr();
                    return;
                }
                Ok(read) => self
                    .lines
                    .push(&buffer[..read], |line| log_line(filename, line)),
                Err(failure) if failure.kind() == io::ErrorKind::WouldBlock => return,
                Err(failure) if failure.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => {
                    self.close_stderr();
                    return;
                }
            }
        }
    }

    fn close_stderr(&mut self) {
        let filename = &self.filename;
        self.lines.finish(|line| log_line(filename, line));
        self.stderr = None;
    }

    /// Whether the script has ended, and whether the engine has closed its end of the socket
    /// (one `poll` of its pidfd and its copy of the socket, which never waits).
    fn look(&self) -> (bool, bool) {
        let mut fds = vec![PollFd::new(self.pidfd.as_fd(), true, false)];
        if let Some(exchange) = &self.exchange {
            // Nothing asked: `POLLHUP` comes alone, once the engine's end is closed.
            fds.push(PollFd::new(exchange.as_fd(), false, false));
        }
        if poll::poll(&mut fds, Some(Duration::ZERO)).is_err() {
            return (false, false);
        }
        (fds[0].readable, fds.get(1).is_some_and(|fd| fd.hangup))
    }

    /// If the script has ended: kill what it left in its group (before the reap, while its pid
    /// surely names the group), reap it, free its place and let the engine see the end of the
    /// response. If the exchange ended first: `SIGTERM` to the group, `SIGKILL` after a grace.
    fn reap(&mut self, now: Instant) {
        if self.slot.is_none() {
            return;
        }
        let (ended, exchange_gone) = self.look();
        if ended {
            let _ = child::kill_group(self.pid(), SIGKILL);
            if matches!(self.child.try_wait(), Ok(Some(_)) | Err(_)) {
                self.slot = None;
                self.exchange = None;
            }
        } else if exchange_gone {
            let _ = child::kill_group(self.pid(), SIGTERM);
            self.exchange = None;
            let grace = now + EXCHANGE_GONE_GRACE;
            if grace < self.deadline {
                self.deadline = grace;
                self.cause = Cause::ExchangeGone;
            }
        }
    }

    /// Past the deadline: kill the process group, say so, and stop reading (what escaped the
    /// group may hold stderr open for ever).
    fn kill(&mut self, buffer: &mut [u8], stopping: bool) {
        self.killed = true;
        let _ = child::kill_group(self.pid(), SIGKILL);
        self.exchange = None;
        if stopping {
            error::log(
                Level::Warn,
                format_args!(
                    "cgi {}: still running as the server stops; its process group was killed",
                    self.filename.display()
                ),
            );
        } else if self.cause == Cause::ExchangeGone {
            error::log(
                Level::Warn,
                format_args!(
                    "cgi {}: still running {EXCHANGE_GONE_GRACE:?} after its request ended; its process group was killed",
                    self.filename.display(),
                ),
            );
        } else {
            error::log(
                Level::Error,
                format_args!(
                    "cgi {}: still running after {:?} (cgi_timeout); its process group was killed",
                    self.filename.display(),
                    self.timeout
                ),
            );
        }
        self.read_stderr(buffer);
        if self.stderr.is_some() {
            self.close_stderr();
        }
    }
}

fn log_line(filename: &Path, line: &str) {
    error::log(
        Level::Error,
        format_args!("cgi {}: {line}", filename.display()),
    );
}

struct Watch {
    queue: Receiver<Job>,
    wake: Arc<EventFd>,
    stopping: Arc<AtomicBool>,
    running: Vec<Running>,
    buffer: Vec<u8>,
}

impl Watch {
    fn new(queue: Receiver<Job>, wake: Arc<EventFd>, stopping: Arc<AtomicBool>) -> Watch {
        Watch {
            queue,
            wake,
            stopping,
            running: Vec::new(),
            buffer: vec![0; 16 * 1024],
        }
    }

    fn run(mut self) {
        loop {
            // A bounded batch of starts per turn: under a steady stream of requests the queue
            // never empties, and the scripts that ended must still be reaped (their places
            // freed) between starts, or the cap fills with finished scripts.
            let mut more = false;
            for started in 0.. {
                if started == LAUNCHES_PER_TURN {
                    more = true;
                    break;
                }
                match self.queue.try_recv() {
                    Ok(job) if self.stopping.load(Ordering::Acquire) => {
                        refuse(&job.launch, "the server is stopping");
                    }
                    Ok(job) => self.launch(job),
                    Err(TryRecvError::Empty) => break,
                    // Every launcher and slot is gone, so no script runs either.
                    Err(TryRecvError::Disconnected) if self.running.is_empty() => return,
                    Err(TryRecvError::Disconnected) => break,
                }
            }
            if !more {
                self.wait();
            }
            self.wake.drain();
            let now = Instant::now();
            let stopping = self.stopping.load(Ordering::Acquire);
            let buffer = &mut self.buffer;
            for script in &mut self.running {
                script.read_stderr(buffer);
                script.reap(now);
                if !script.killed && script.slot.is_some() && (stopping || now >= script.deadline) {
                    script.kill(buffer, stopping);
                }
            }
            self.running.retain(|script| !script.finished());
        }
    }

    /// Until the queue, a pidfd or a stderr pipe has something, or the nearest deadline.
    fn wait(&self) {
        let mut fds = vec![PollFd::new(self.wake.as_fd(), true, false)];
        for script in &self.running {
            if script.slot.is_some() {
                fds.push(PollFd::new(script.pidfd.as_fd(), true, false));
            }
            if let Some(exchange) = &script.exchange {
                fds.push(PollFd::new(exchange.as_fd(), false, false));
            }
            if let Some(stderr) = &script.stderr {
                fds.push(PollFd::new(stderr.as_fd(), true, false));
            }
        }
        let now = Instant::now();
        let limit = self
            .running
            .iter()
            .filter(|script| !script.killed)
            .map(|script| script.deadline.saturating_duration_since(now))
            .min();
        let _ = poll::poll(&mut fds, limit);
    }

    fn launch(&mut self, job: Job) {
        let Job { launch, stdio } = job;
        let found = match search::find(&launch.script, &launch.document_root) {
            Ok(found) => found,
            Err(failure) => {
                let _ = launch.failure.set(failure);
                return;
            }
        };
        // `stdio` stays open here until the failure, if any, is set: the engine reads the
        // reason once it sees the end of stream.
        let mut spawned = spawn(&launch, &found, &stdio);
        for _ in 0..TEXT_BUSY_RETRIES {
            // A script being written as it is run (a deployment, an editor saving it), or a
            // process forked elsewhere in the server between the writer's open and close,
            // holds a descriptor open for writing: exec says "text file busy" for that moment.
            match &spawned {
                Err(failure) if ampd_sys::errno::text_file_busy(failure) => {
                    std::thread::sleep(TEXT_BUSY_PAUSE);
                    spawned = spawn(&launch, &found, &stdio);
                }
                _ => break,
            }
        }
        match spawned {
            Ok((child, pidfd, stderr)) => self.running.push(Running {
                filename: found.filename,
                child,
                pidfd,
                stderr: Some(stderr),
                lines: ProgramLines::new(&STDERR_LINES),
                exchange: Some(stdio),
                timeout: launch.timeout,
                deadline: Instant::now() + launch.timeout,
                cause: Cause::Timeout,
                killed: false,
                slot: Some(launch.slot),
            }),
            Err(failure) if failure.kind() == io::ErrorKind::PermissionDenied => {
                let _ = launch.failure.set(LaunchFailure::Forbidden);
            }
            Err(failure) => refuse(
                &launch,
                &format!("cannot run {}: {failure}", found.filename.display()),
            ),
        }
    }
}

/// Start the script with copies of `stdio` as its stdin and stdout: returns it, its pidfd and
/// the read end of its stderr (non-blocking). The copies are closed here; the caller keeps or
/// closes `stdio`.
fn spawn(launch: &Launch, found: &Found, stdio: &OwnedFd) -> io::Result<(Child, OwnedFd, OwnedFd)> {
    // The pair is made non-blocking for the engine's end; the flag belongs to the open file,
    // so this end gets its own state: a script reads and writes blocking.
    ampd_sys::socket::set_nonblocking(stdio.as_fd(), false)?;
    let stdin = stdio.try_clone()?;
    let stdout = stdio.try_clone()?;
    let mut command = Command::new(&found.filename);
    command.env_clear();
    if !launch.env.iter().any(|(name, _)| name == b"PATH") {
        let path = std::env::var_os("PATH").unwrap_or_else(|| DEFAULT_PATH.into());
        command.env("PATH", path);
    }
    for (name, value) in &launch.env {
        command.env(OsStr::from_bytes(name), OsStr::from_bytes(value));
    }
    command
        .env("SCRIPT_NAME", &found.script_name)
        .env("SCRIPT_FILENAME", &found.filename);
    if !found.path_info.is_empty() {
        let mut translated = launch.document_root.as_os_str().to_owned();
        translated.push(&found.path_info);
        command
            .env("PATH_INFO", &found.path_info)
            .env("PATH_TRANSLATED", translated);
    }
    if let Some(directory) = found.filename.parent() {
        command.current_dir(directory);
    }
    child::reset_signals(&mut command, SignalSet::empty());
    command
        .process_group(0)
        .stdin(Stdio::from(stdin))
        .stdout(Stdio::from(stdout))
        .stderr(Stdio::piped());
    let spawned = command.spawn();
    // The command holds copies of the socket: closed now, so that once the caller closes
    // `stdio`, the engine sees the end of stream when the script (and whatever it started) is
    // done with it.
    drop(command);
    let mut script = spawned?;
    let watched = script
        .stderr
        .take()
        .map(OwnedFd::from)
        .ok_or_else(|| io::Error::other("no stderr pipe"))
        .and_then(|stderr| {
            ampd_sys::socket::set_nonblocking(stderr.as_fd(), true)?;
            let pid = Pid::try_from(script.id()).map_err(io::Error::other)?;
            Ok((child::pidfd_open(pid)?, stderr))
        });
    match watched {
        Ok((pidfd, stderr)) => Ok((script, pidfd, stderr)),
        Err(failure) => {
            let _ = child::kill_group(Pid::try_from(script.id()).unwrap_or(Pid::MAX), SIGKILL);
            let _ = script.wait();
            Err(failure)
        }
    }
}
