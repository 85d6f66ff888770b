//! `mp`: pre-forked worker processes, each serving one connection at a time with blocking calls
//! and its own caches (Flash-MP, Apache prefork), under a master.
//!
//! The master stays single-threaded for its whole life, so it can always fork: it forks every
//! worker before any thread exists in it, and takes its signals synchronously with
//! `sigtimedwait` in its own loop (no signal thread). Each worker, once forked, starts its own
//! threads: its access-log thread (writing the log file the master opened, `O_APPEND`, whole
//! lines per write, so lines of several processes never interleave) and a command thread.
//! What the processes share lives in `MAP_SHARED` memory made before the first fork
//! (`ops::Shared`): the scoreboard (each worker writes its own slot, so `/status` in any worker
//! reports the whole server), the admission counts and the rate limiter's table.
//!
//! The operator's signals reach the master, which passes each worker a `Command` over a pipe of
//! its own (Apache's "pipe of death"): `SIGHUP` only after the master has checked the new file
//! (a bad one is logged and the old one keeps serving, nothing is passed on), `SIGUSR1`,
//! `SIGTERM`/`SIGINT` (drain; a second one stops), `SIGQUIT`, and `SIGUSR2` (the master starts
//! the new binary with its listening socket, `ops::upgrade`; once it is ready, workers drain). Workers keep the handled signals
//! blocked and never read them, so a signal sent to the whole process group (Ctrl-C, systemd's
//! default `KillMode`) counts once. The master replaces a worker that dies (not while
//! draining), wiping what the dead one counted in the shared tables; workers die with the
//! master (`PR_SET_PDEATHSIG`, and the end of their pipe).
//!
//! The master also keeps the persistent applications (`ops::applications`): it waits for
//! signals on a signalfd beside their pidfds and output pipes (`Supervisor::tend`), reloads them
//! with a good configuration, and stops them once its workers are gone. It reaps workers by
//! their pids, never any child, so an application's end is the supervisor's to see.
//!
//! Owns: the master's loop (signals, reaping, restarts, shutdown). Must not touch: serving a
//! connection (`blocking.rs`, `waiting_room.rs`), a worker's life (`worker.rs`).
//! Sources: Flash §3.1 (MP), Apache httpd prefork MPM (scoreboard, graceful restart).

mod worker;

use std::collections::HashMap;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ampd_sys::child::{self, Exit, Forked, Pid};
use ampd_sys::signal::{self, SignalFd, SignalSet, SIGCHLD, SIGKILL};

use super::listener::Listener;
use super::Start;
use crate::config::Level;
use crate::log::access::LogFile;
use crate::log::error;
use crate::ops::notify::{monotonic_usec, notify};
use crate::ops::signals::{self, Command, HANDLED};
use crate::ops::{applications, reload, upgrade, RunState, Shared};
use crate::programs::applications::Supervisor;
use crate::site::Generation;

/// A worker that dies sooner than this after it started is replaced only after this long, so a
/// worker that cannot start (out of memory, descriptors) does not become a fork loop.
const RESTART_DELAY: Duration = Duration::from_secs(1);
/// How long past its grace period a draining worker (or a stopped one) may take before the
/// master kills it.
const STOP_MARGIN: Duration = Duration::from_secs(2);
/// How long workers get to write their access log after `SIGQUIT`.
const QUIT_WAIT: Duration = Duration::from_millis(400);
/// The master wakes this often even without a signal (to start delayed replacements).
const TICK: Duration = Duration::from_millis(250);
/// How long the master waits for every worker to install a reloaded configuration before it
/// reports the reload done anyway (a worker's command thread installs it at once, so only a
/// wedged worker takes this long; it is named in the log).
const RELOAD_WAIT: Duration = Duration::from_secs(5);
/// How long the master waits for every worker to begin a graceful stop before it reports the
/// stop begun anyway (as `RELOAD_WAIT`: only a wedged worker takes this long).
const STOP_BEGIN_WAIT: Duration = Duration::from_secs(5);

/// The master's view of one worker.
struct WorkerProcess {
    index: usize,
    started: Instant,
    /// The write end of its command pipe.
    commands: OwnedFd,
}

struct Master {
    generation: Arc<Generation>,
    config_path: Option<PathBuf>,
    shared: Shared,
    log_file: LogFile,
    /// Given up (`None`) once the stop begins: workers close theirs as their drain takes the
    /// backlog, and the port refuses from then on instead of queueing for nobody.
    /// Empty once a stop began (the workers' copies are theirs).
    listeners: Vec<Listener>,
    workers: HashMap<Pid, WorkerProcess>,
    /// Worker indexes (scoreboard slots, admission tables) without a process, to be started.
    owed: Vec<usize>,
    next_start: Instant,
    state: RunState,
    /// The persistent applications (`ops::applications`), tended in the master's loop.
    applications: Supervisor,
}

/// Fork the workers and supervise them until they have drained (or were stopped).
///
/// # Errors
/// The process runs threads already (fork refuses), or the first workers cannot be forked.
pub fn run(start: Start, listeners: Vec<Listener>) -> io::Result<()> {
    // SIGCHLD joins the handled signals (all blocked since main), so the loop below takes it.
    let mut watched = HANDLED.to_vec();
    watched.push(SIGCHLD);
    let signals = SignalSet::of(&watched);
    signal::block(&signals)?;
    // Readable while one of them is pending: polled beside the applications' descriptors.
    let signal_fd = SignalFd::new(&signals)?;
    let processes = start.generation.config.thread_count();
    start.shared.stats.set_generation(start.generation.number);
    let mut master = Master {
        generation: Arc::new(start.generation),
        config_path: start.config_path,
        shared: start.shared,
        log_file: start.log_file,
        listeners,
        workers: HashMap::new(),
        owed: (0..processes).rev().collect(),
        next_start: Instant::now(),
        state: RunState::Running,
        applications: applications::take(),
    };
    let served = master.serve(&signals, &signal_fd);
    // The workers are gone (or were killed): requests to the applications have ended.
    std::mem::take(&mut master.applications).stop();
    served
}

impl Master {
    /// Start the workers, then supervise until they have drained (or were stopped).
    fn serve(&mut self, signals: &SignalSet, signal_fd: &SignalFd) -> io::Result<()> {
        while let Some(index) = self.owed.pop() {
            self.start_worker(index)?;
        }
        loop {
            if self.applications.tend(TICK, Some(signal_fd.as_fd())) {
                if let Some(number) = signal::wait(signals, Some(Duration::ZERO))? {
                    if let Some(command) = Command::of_signal(number, self.state) {
                        self.command(command);
                    }
                }
            }
            self.reap();
            match self.state {
                RunState::Running => self.start_owed(),
                // Each worker times the announcement itself; the master follows the same clock.
                RunState::Announcing { until } => {
                    if Instant::now() >= until {
                        self.state = RunState::Draining {
                            deadline: until + self.generation.config.process.grace_period,
                        };
                        self.listeners.clear();
                    }
                }
                RunState::Draining { deadline } => {
                    if self.workers.is_empty() {
                        return Ok(());
                    }
                    if Instant::now() >= deadline + STOP_MARGIN {
                        self.kill_all();
                        return Ok(());
                    }
                }
                RunState::Stopped => {
                    self.wait_for_workers(STOP_MARGIN);
                    return Ok(());
                }
            }
        }
    }

    fn start_worker(&mut self, index: usize) -> io::Result<()> {
        let (commands_in, commands_out) = ampd_sys::io::pipe()?;
        match child::fork()? {
            Forked::Parent { child } => {
                drop(commands_in);
                self.workers.insert(
                    child,
                    WorkerProcess {
                        index,
                        started: Instant::now(),
                        commands: commands_out,
                    },
                );
                Ok(())
            }
            Forked::Child => {
                drop(commands_out);
                // Other workers' pipes are theirs: only the master may write to them.
                self.workers.clear();
                // The applications are the master's: the copies of their descriptors go (their
                // processes are left alone).
                drop(std::mem::take(&mut self.applications));
                // The worker's own copy goes to its waiting room, which closes it when drained.
                let listeners = std::mem::take(&mut self.listeners);
                let code = worker::main(self, index, commands_in, listeners);
                crate::programs::cgi::stop_process_scripts(crate::programs::cgi::STOP_WAIT);
                // Never return into the master's code.
                std::process::exit(code)
            }
        }
    }

    /// Replace dead workers, unless they are dying as fast as they start.
    fn start_owed(&mut self) {
        while Instant::now() >= self.next_start {
            let Some(index) = self.owed.pop() else {
                return;
            };
            if let Err(failure) = self.start_worker(index) {
                error::log(
                    Level::Error,
                    format_args!("mp: cannot start a worker: {failure}"),
                );
                self.owed.push(index);
                self.next_start = Instant::now() + RESTART_DELAY;
            }
        }
    }

    /// Reap the workers that have ended (by pid: other children are the applications').
    fn reap_workers(&self) -> Vec<(Pid, Exit)> {
        self.workers
            .keys()
            .filter_map(|&pid| match child::reap(pid) {
                Ok(Some(exit)) => Some((pid, exit)),
                // Not our child any more (reaped elsewhere): gone all the same.
                Err(_) => Some((pid, Exit::Code(0))),
                Ok(None) => None,
            })
            .collect()
    }

    fn reap(&mut self) {
        for (pid, exit) in self.reap_workers() {
            let Some(worker) = self.workers.remove(&pid) else {
                continue;
            };
            // Its connections died with it: what it counted in the shared tables goes too.
            self.shared.admission.forget_process(worker.index);
            if self.state != RunState::Running {
                continue;
            }
            let how = match exit {
                Exit::Code(code) => format!("exited with status {code}"),
                Exit::Signal(signal) => format!("was killed by signal {signal}"),
            };
            error::log(
                Level::Warn,
                format_args!("mp worker {pid} {how}; starting another"),
            );
            self.owed.push(worker.index);
            if worker.started.elapsed() < RESTART_DELAY {
                self.next_start = Instant::now() + RESTART_DELAY;
            }
        }
    }

    fn command(&mut self, command: Command) {
        match command {
            Command::Reload => self.reload(),
            Command::Reopen => {
                error::reopen();
                self.tell_workers(command);
                error::log(Level::Info, format_args!("SIGUSR1: logs reopened"));
            }
            Command::Drain => {
                let process = &self.generation.config.process;
                let now = Instant::now();
                self.state = if process.drain_delay.is_zero() {
                    self.listeners.clear();
                    RunState::Draining {
                        deadline: now + process.grace_period,
                    }
                } else {
                    RunState::Announcing {
                        until: now + process.drain_delay,
                    }
                };
                let delay = process.drain_delay;
                self.tell_workers(command);
                notify("STOPPING=1");
                // As with one process (`signals::apply`), the line is logged once the stop has
                // begun in every worker, so whoever reads it finds health answering 503.
                self.wait_for_stop_begun();
                signals::log_stop_begun(delay);
            }
            Command::Stop => {
                error::log(
                    Level::Info,
                    format_args!("second stop signal: stopping now"),
                );
                self.state = RunState::Stopped;
                self.listeners.clear();
                self.tell_workers(command);
            }
            Command::Quit => {
                self.tell_workers(command);
                self.wait_for_workers(QUIT_WAIT);
                std::mem::take(&mut self.applications).stop_within(applications::QUIT_STOP);
                crate::ops::pid_file::remove_written();
                std::process::exit(0);
            }
            Command::Upgrade => self.upgrade(),
        }
    }

    /// `SIGUSR2`: the master holds the listening socket, so it starts the successor (workers
    /// keep serving meanwhile); once that is ready, every worker drains at once.
    fn upgrade(&mut self) {
        if self.state != RunState::Running {
            error::log(
                Level::Warn,
                format_args!("SIGUSR2 ignored: the server is stopping"),
            );
            return;
        }
        error::log(
            Level::Info,
            format_args!("SIGUSR2: starting a new process with the listening sockets"),
        );
        let listeners: Vec<_> = self.listeners.iter().map(Listener::as_fd).collect();
        match upgrade::start_successor(&listeners) {
            Ok(pid) => {
                error::log(
                    Level::Info,
                    format_args!("upgrade: process {pid} is ready; this one drains"),
                );
                self.state = RunState::Draining {
                    deadline: Instant::now() + self.generation.config.process.grace_period,
                };
                self.listeners.clear();
                self.tell_workers(Command::Upgrade);
            }
            Err(failure) => error::log(
                Level::Error,
                format_args!("upgrade failed: {failure}; this process keeps serving"),
            ),
        }
    }

    /// Check the file, then pass the reload on: each worker reads the same file and installs
    /// it the way a threaded server's signal thread does. A bad file goes no further.
    fn reload(&mut self) {
        let Some(path) = self.config_path.clone() else {
            error::log(
                Level::Warn,
                format_args!("SIGHUP: no configuration file to reload (started with ampd serve)"),
            );
            return;
        };
        notify(&format!("RELOADING=1\nMONOTONIC_USEC={}", monotonic_usec()));
        match reload::prepare(&self.generation, &path, true) {
            Ok(generation) => {
                if let Err(failure) = error::configure(&generation.config.logs) {
                    error::log(Level::Error, format_args!("reload: error log: {failure}"));
                }
                let access = generation.config.logs.access.clone();
                if access != self.generation.config.logs.access {
                    // For workers started from now on; running ones open it themselves.
                    match LogFile::open(access.as_deref()) {
                        Ok(file) => self.log_file = file,
                        Err(failure) => {
                            error::log(Level::Error, format_args!("reload: access log: {failure}"))
                        }
                    }
                }
                let number = generation.number;
                self.applications.reload(&generation.config.applications);
                crate::tls::acme::update(&generation.config);
                self.generation = Arc::new(generation);
                self.shared.stats.count_reload(true);
                self.shared.stats.set_generation(number);
                self.tell_workers(Command::Reload);
                self.wait_for_install(number);
                reload::reloaded(&path, number, access.is_some());
            }
            Err(failure) => {
                self.shared.stats.count_reload(false);
                reload::rejected(self.generation.number, &failure);
            }
        }
        notify("READY=1");
    }

    fn tell_workers(&self, command: Command) {
        for worker in self.workers.values() {
            // A worker that died has not been reaped yet: EPIPE is ignored (SIGPIPE is too).
            let _ = ampd_sys::io::write(worker.commands.as_fd(), &[command.byte()]);
        }
    }

    /// Wait until every worker's scoreboard slot shows generation `number` installed, so that
    /// once the reload is reported, every new request is served under it (as with the threaded
    /// engines, where the reload is installed before it is reported).
    fn wait_for_install(&self, number: u64) {
        let deadline = Instant::now() + RELOAD_WAIT;
        let behind = || {
            self.workers
                .iter()
                .filter(|(_, worker)| {
                    let slots = self.shared.stats.loops();
                    slots[worker.index % slots.len()].installed() < number
                })
                .map(|(pid, _)| *pid)
                .collect::<Vec<_>>()
        };
        let mut late = behind();
        while !late.is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
            late = behind();
        }
        for pid in late {
            error::log(
                Level::Warn,
                format_args!("mp worker {pid} has not installed generation {number} yet"),
            );
        }
    }

    /// Wait until every worker's scoreboard slot shows its graceful stop begun (each worker's
    /// command thread begins it at once; one that exits meanwhile is reaped and counts as
    /// stopped). A wedged worker holds this at most `STOP_BEGIN_WAIT` and is named in the log.
    fn wait_for_stop_begun(&mut self) {
        let deadline = Instant::now() + STOP_BEGIN_WAIT;
        let behind = |master: &Self| {
            let slots = master.shared.stats.loops();
            master
                .workers
                .iter()
                .filter(|(_, worker)| !slots[worker.index % slots.len()].stop_begun())
                .map(|(pid, _)| *pid)
                .collect::<Vec<_>>()
        };
        let mut late = behind(self);
        while !late.is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
            self.reap();
            late = behind(self);
        }
        for pid in late {
            error::log(
                Level::Warn,
                format_args!("mp worker {pid} has not begun the graceful stop yet"),
            );
        }
    }

    /// Wait (at most `limit`) for every worker to exit, then kill the rest.
    fn wait_for_workers(&mut self, limit: Duration) {
        let deadline = Instant::now() + limit;
        let children = SignalSet::of(&[SIGCHLD]);
        while !self.workers.is_empty() && Instant::now() < deadline {
            for (pid, _) in self.reap_workers() {
                self.workers.remove(&pid);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            let _ = signal::wait(&children, Some(left.min(Duration::from_millis(20))));
        }
        self.kill_all();
    }

    /// `SIGKILL` every worker still there and reap it: none outlives the master.
    fn kill_all(&mut self) {
        for &pid in self.workers.keys() {
            let _ = child::kill(pid, SIGKILL);
        }
        let deadline = Instant::now() + STOP_MARGIN;
        let children = SignalSet::of(&[SIGCHLD]);
        while !self.workers.is_empty() && Instant::now() < deadline {
            for (pid, _) in self.reap_workers() {
                self.workers.remove(&pid);
            }
            let _ = signal::wait(&children, Some(Duration::from_millis(20)));
        }
    }
}
