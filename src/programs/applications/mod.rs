//! Persistent FastCGI applications (Flash §5.6's persistent CGI processes; spawn-fcgi and
//! php-fpm's master as operators know them): ampd binds each application's unix socket, starts
//! its processes with that socket as descriptor 0, starts again one that ends (after a
//! backoff, logged with how it ended), restarts an application whose settings a reload changed
//! and stops them all at the end.
//!
//! The `Supervisor` starts no thread: its owner calls `tend` in its own loop (the signal
//! thread of a threaded server, the `mp` master, which must stay single-threaded to fork). An
//! application being stopped (removed or changed by a reload) finishes in the background of
//! the same `tend`: its socket file goes at once, its processes get `SIGTERM`, and `SIGKILL`
//! after its `stop_timeout`; a changed application's new processes serve from the moment the
//! reload returns.
//!
//! Owns: the applications' sockets and processes. Must not touch: the FastCGI protocol (the
//! pool of the application's socket speaks it), reaping other children (every wait names a
//! pid).

mod process;
mod socket;

use std::fmt;
use std::io;
use std::os::fd::BorrowedFd;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use ampd_sys::poll::{self, PollFd};
use ampd_sys::signal::{SIGKILL, SIGTERM};

use crate::config::{Application, Level};
use crate::log::error;
use process::{Live, Output};
use socket::BoundSocket;

/// How long processes killed with `SIGKILL` at the end of a stop get to be reaped.
const KILL_WAIT: Duration = Duration::from_secs(2);

/// Why an application could not be started.
#[derive(Debug)]
pub enum ProgramError {
    /// A file that is not a socket is where the socket goes (never removed).
    NotASocket { application: String, path: PathBuf },
    /// The socket cannot be bound (or the stale one removed).
    Socket {
        application: String,
        path: PathBuf,
        error: io::Error,
    },
    /// The program cannot be executed.
    Spawn {
        application: String,
        program: String,
        error: io::Error,
    },
}

impl fmt::Display for ProgramError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProgramError::NotASocket { application, path } => write!(
                formatter,
                "application {application}: socket {}: a file that is not a socket is there (not removed)",
                path.display()
            ),
            ProgramError::Socket {
                application,
                path,
                error,
            } => write!(
                formatter,
                "application {application}: socket {}: {error}",
                path.display()
            ),
            ProgramError::Spawn {
                application,
                program,
                error,
            } => write!(formatter, "application {application}: cannot run {program}: {error}"),
        }
    }
}

impl std::error::Error for ProgramError {}

/// The applications of one server process. Dropping it closes its descriptors and leaves the
/// processes alone (an `mp` worker drops the copy it inherited); `stop` ends them.
#[derive(Default)]
pub struct Supervisor {
    applications: Vec<Kept>,
    stopping: Vec<Stopping>,
    /// Output of processes that ended while something they started still holds the pipe.
    draining: Vec<Output>,
    buffer: Vec<u8>,
}

impl fmt::Debug for Supervisor {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self
            .applications
            .iter()
            .map(|kept| kept.settings.name.as_str())
            .collect();
        formatter
            .debug_struct("Supervisor")
            .field("applications", &names)
            .field("stopping", &self.stopping.len())
            .finish_non_exhaustive()
    }
}

/// A running application.
struct Kept {
    settings: Application,
    socket: BoundSocket,
    processes: Vec<Slot>,
}

/// One of an application's `processes`.
enum Slot {
    Running { live: Live, backoff: Duration },
    Waiting { until: Instant, backoff: Duration },
}

/// An application on its way out.
struct Stopping {
    name: String,
    processes: Vec<Live>,
    deadline: Instant,
    killed: bool,
}

impl Supervisor {
    /// Bind each application's socket and start its processes.
    ///
    /// # Errors
    /// The first application that cannot be started (those started before it are stopped).
    pub fn start(applications: &[Application]) -> Result<Supervisor, ProgramError> {
        let mut supervisor = Supervisor::default();
        for settings in applications {
            match Kept::start(settings) {
                Ok(kept) => supervisor.applications.push(kept),
                Err(failure) => {
                    supervisor.stop_within(KILL_WAIT);
                    return Err(failure);
                }
            }
        }
        Ok(supervisor)
    }

    /// Whether it has nothing to watch: no application, none stopping, no output left.
    #[must_use]
    pub fn is_idle(&self) -> bool {
        self.applications.is_empty() && self.stopping.is_empty() && self.draining.is_empty()
    }

    /// Names and process ids of the running processes (for tests and status).
    #[must_use]
    pub fn pids(&self) -> Vec<(String, i32)> {
        self.applications
            .iter()
            .flat_map(|kept| {
                kept.processes.iter().filter_map(|slot| match slot {
                    Slot::Running { live, .. } => Some((kept.settings.name.clone(), live.pid)),
                    Slot::Waiting { .. } => None,
                })
            })
            .collect()
    }

    /// Apply a reloaded configuration: applications that are gone, or whose command, env,
    /// directory, process count or socket changed, are stopped (in the background); new and
    /// changed ones start; unchanged ones keep running (a new `stop_timeout` is taken). A
    /// changed application that cannot start is logged and its old processes keep serving.
    pub fn reload(&mut self, applications: &[Application]) {
        let mut old = std::mem::take(&mut self.applications);
        for settings in applications {
            let position = old
                .iter()
                .position(|kept| kept.settings.name == settings.name);
            match position {
                Some(at) if same_processes(&old[at].settings, settings) => {
                    let mut kept = old.swap_remove(at);
                    kept.settings.stop_timeout = settings.stop_timeout;
                    self.applications.push(kept);
                }
                _ => match Kept::start(settings) {
                    Ok(kept) => {
                        error::log(
                            Level::Info,
                            format_args!("reload: application {} started", settings.name),
                        );
                        if let Some(at) = position {
                            self.retire(old.swap_remove(at));
                        }
                        self.applications.push(kept);
                    }
                    Err(failure) => {
                        error::log(Level::Error, format_args!("reload: {failure}"));
                        if let Some(at) = position {
                            self.applications.push(old.swap_remove(at));
                        }
                    }
                },
            }
        }
        for kept in old {
            self.retire(kept);
        }
    }

    /// Stop every application: `SIGTERM` to each process group, `SIGKILL` to what is left
    /// after its `stop_timeout`, socket files removed. Returns once all are reaped.
    pub fn stop(self) {
        self.stop_within(Duration::MAX);
    }

    /// `stop`, but no application gets more than `limit` after `SIGTERM` (a fast exit).
    pub fn stop_within(mut self, limit: Duration) {
        for kept in std::mem::take(&mut self.applications) {
            self.retire(kept);
        }
        for stopping in &mut self.stopping {
            let cut = Instant::now().checked_add(limit);
            if let Some(cut) = cut {
                stopping.deadline = stopping.deadline.min(cut);
            }
        }
        let give_up = self
            .stopping
            .iter()
            .map(|stopping| stopping.deadline)
            .max()
            .map(|latest| latest + KILL_WAIT);
        while !self.stopping.is_empty() {
            if give_up.is_some_and(|give_up| Instant::now() >= give_up) {
                break;
            }
            self.tend(Duration::from_millis(100), None);
        }
        let mut buffer = std::mem::take(&mut self.buffer);
        buffer.resize(16 * 1024, 0);
        for output in &mut self.draining {
            output.read(&mut buffer);
        }
    }

    /// Wait up to `wait` for the processes' output and ends, and for `also` (if given) to be
    /// readable; then log output, notice ended processes (started again after their backoff),
    /// start those whose backoff has passed and kill what outlived its stop timeout. Returns
    /// whether `also` is readable.
    pub fn tend(&mut self, wait: Duration, also: Option<BorrowedFd<'_>>) -> bool {
        if self.buffer.is_empty() {
            self.buffer = vec![0; 16 * 1024];
        }
        let also_ready = self.wait(wait, also);
        let mut buffer = std::mem::take(&mut self.buffer);
        let now = Instant::now();
        for kept in &mut self.applications {
            kept.tend(now, &mut buffer, &mut self.draining);
        }
        for stopping in &mut self.stopping {
            stopping.tend(now, &mut buffer, &mut self.draining);
        }
        self.stopping.retain(|stopping| {
            let done = stopping.processes.is_empty();
            if done {
                error::log(
                    Level::Info,
                    format_args!("application {}: stopped", stopping.name),
                );
            }
            !done
        });
        self.draining.retain_mut(|output| !output.read(&mut buffer));
        self.buffer = buffer;
        also_ready
    }

    /// The poll of `tend`: `also` first, then every pidfd and pipe; the limit is `wait` or the
    /// nearest backoff or stop deadline.
    fn wait(&self, wait: Duration, also: Option<BorrowedFd<'_>>) -> bool {
        let mut fds: Vec<PollFd<'_>> = also
            .into_iter()
            .map(|fd| PollFd::new(fd, true, false))
            .collect();
        let now = Instant::now();
        let mut limit = wait;
        for kept in &self.applications {
            for slot in &kept.processes {
                match slot {
                    Slot::Running { live, .. } => {
                        fds.push(PollFd::new(live.pidfd(), true, false));
                        if let Some(output) = &live.output {
                            fds.push(PollFd::new(output.fd(), true, false));
                        }
                    }
                    Slot::Waiting { until, .. } => {
                        limit = limit.min(until.saturating_duration_since(now));
                    }
                }
            }
        }
        for stopping in &self.stopping {
            if !stopping.killed {
                limit = limit.min(stopping.deadline.saturating_duration_since(now));
            }
            for live in &stopping.processes {
                fds.push(PollFd::new(live.pidfd(), true, false));
                if let Some(output) = &live.output {
                    fds.push(PollFd::new(output.fd(), true, false));
                }
            }
        }
        for output in &self.draining {
            fds.push(PollFd::new(output.fd(), true, false));
        }
        if poll::poll(&mut fds, Some(limit)).is_err() {
            // Out of memory for the poll: do not spin.
            std::thread::sleep(limit.min(Duration::from_millis(100)));
            return false;
        }
        also.is_some() && fds[0].ready()
    }

    /// Stop `kept` in the background: its socket file goes now (no new connection reaches
    /// it), its processes get `SIGTERM`.
    fn retire(&mut self, kept: Kept) {
        let Kept {
            settings,
            socket,
            processes,
        } = kept;
        socket.remove_file();
        let processes: Vec<Live> = processes
            .into_iter()
            .filter_map(|slot| match slot {
                Slot::Running { live, .. } => {
                    live.signal_group(SIGTERM);
                    Some(live)
                }
                Slot::Waiting { .. } => None,
            })
            .collect();
        error::log(
            Level::Info,
            format_args!(
                "application {}: stopping {} process{}",
                settings.name,
                processes.len(),
                if processes.len() == 1 { "" } else { "es" }
            ),
        );
        self.stopping.push(Stopping {
            name: settings.name,
            processes,
            deadline: Instant::now()
                .checked_add(settings.stop_timeout)
                .unwrap_or_else(|| Instant::now() + Duration::from_secs(86_400)),
            killed: false,
        });
    }
}

/// Whether `new` can keep `old`'s processes (only `stop_timeout` differs, or nothing).
fn same_processes(old: &Application, new: &Application) -> bool {
    old.command == new.command
        && old.env == new.env
        && old.directory == new.directory
        && old.processes == new.processes
        && old.socket == new.socket
}

impl Kept {
    fn start(settings: &Application) -> Result<Kept, ProgramError> {
        let mut socket = BoundSocket::bind(&settings.name, &settings.socket)?;
        let mut processes = Vec::with_capacity(settings.processes);
        for _ in 0..settings.processes {
            match Live::spawn(settings, socket.fd()) {
                Ok(live) => processes.push(Slot::Running {
                    live,
                    backoff: process::FIRST_BACKOFF,
                }),
                Err(error) => {
                    kill_now(processes);
                    socket.remove_file();
                    return Err(ProgramError::Spawn {
                        application: settings.name.clone(),
                        program: settings.command.first().cloned().unwrap_or_default(),
                        error,
                    });
                }
            }
        }
        if let Err(error) = socket.publish() {
            kill_now(processes);
            socket.remove_file();
            return Err(ProgramError::Socket {
                application: settings.name.clone(),
                path: settings.socket.clone(),
                error,
            });
        }
        let pids: Vec<String> = processes
            .iter()
            .filter_map(|slot| match slot {
                Slot::Running { live, .. } => Some(live.pid.to_string()),
                Slot::Waiting { .. } => None,
            })
            .collect();
        error::log(
            Level::Info,
            format_args!(
                "application {}: listening on {}, processes {}",
                settings.name,
                settings.socket.display(),
                pids.join(" ")
            ),
        );
        Ok(Kept {
            settings: settings.clone(),
            socket,
            processes,
        })
    }

    fn tend(&mut self, now: Instant, buffer: &mut [u8], draining: &mut Vec<Output>) {
        let (settings, socket) = (&self.settings, &self.socket);
        for slot in &mut self.processes {
            if let Slot::Running { live, .. } = slot {
                if let Some(output) = &mut live.output {
                    if output.read(buffer) {
                        live.output = None;
                    }
                }
                if !live.ended() {
                    continue;
                }
                // What it started goes with it (not reaped yet, its id still names the group).
                live.signal_group(SIGTERM);
            }
            let taken = std::mem::replace(
                slot,
                Slot::Waiting {
                    until: now,
                    backoff: process::FIRST_BACKOFF,
                },
            );
            *slot = match taken {
                Slot::Running { live, backoff } => ended(settings, live, backoff, now, draining),
                Slot::Waiting { until, backoff } if now < until => Slot::Waiting { until, backoff },
                Slot::Waiting { backoff, .. } => start_again(settings, socket, backoff, now),
            };
        }
    }
}

/// The processes of an application that could not start: killed and reaped at once.
fn kill_now(processes: Vec<Slot>) {
    for slot in processes {
        if let Slot::Running { live, .. } = slot {
            live.kill_and_reap();
        }
    }
}

/// A process of `settings` has ended: reap it, log how, and wait its backoff.
fn ended(
    settings: &Application,
    live: Live,
    backoff: Duration,
    now: Instant,
    draining: &mut Vec<Output>,
) -> Slot {
    let pid = live.pid;
    let (status, ran, output) = live.reap();
    draining.extend(output);
    let (wait, next) = process::backoff(backoff, ran);
    error::log(
        Level::Warn,
        format_args!(
            "application {}[{pid}] {}; starting it again in {wait:?}",
            settings.name,
            process::describe(status)
        ),
    );
    Slot::Waiting {
        until: now + wait,
        backoff: next,
    }
}

/// Start a process of `settings` again after its backoff (or wait longer if it cannot run).
fn start_again(
    settings: &Application,
    socket: &BoundSocket,
    backoff: Duration,
    now: Instant,
) -> Slot {
    match Live::spawn(settings, socket.fd()) {
        Ok(live) => Slot::Running { live, backoff },
        Err(failure) => {
            error::log(
                Level::Error,
                format_args!(
                    "application {}: cannot run {}: {failure}; trying again in {backoff:?}",
                    settings.name,
                    settings.command.first().map_or("", String::as_str)
                ),
            );
            Slot::Waiting {
                until: now + backoff,
                backoff: (backoff * 2).min(process::LONGEST_BACKOFF),
            }
        }
    }
}

impl Stopping {
    fn tend(&mut self, now: Instant, buffer: &mut [u8], draining: &mut Vec<Output>) {
        if !self.killed && now >= self.deadline {
            self.killed = true;
            for live in &self.processes {
                if !live.ended() {
                    error::log(
                        Level::Warn,
                        format_args!(
                            "application {}[{}]: still running after its stop_timeout; killed",
                            self.name, live.pid
                        ),
                    );
                    live.signal_group(SIGKILL);
                }
            }
        }
        let mut left = Vec::with_capacity(self.processes.len());
        for mut live in std::mem::take(&mut self.processes) {
            if let Some(output) = &mut live.output {
                if output.read(buffer) {
                    live.output = None;
                }
            }
            if live.ended() {
                let (_, _, output) = live.reap();
                draining.extend(output);
            } else {
                left.push(live);
            }
        }
        self.processes = left;
    }
}

#[cfg(test)]
mod tests;
