//! `mp`: pre-forked worker processes, each serving one connection at a time with blocking calls
//! and its own caches, under a master that restarts a worker that dies and stops them all on
//! `SIGTERM`/`SIGINT` (Flash-MP, Apache prefork). Workers share the listener inherited across
//! `fork`; `EPOLLEXCLUSIVE` wakes one of them per new connection.
//!
//! Owns: the master's loop (signals, reaping, restarts, shutdown) and a worker's start.
//! Must not touch: serving a connection (`blocking.rs`, `waiting_room.rs`).
//! Sources: Flash §3.1 (MP), Apache httpd prefork MPM.

use std::collections::HashMap;
use std::io;
use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ampd_sys::child::{self, Exit, Forked, Pid};
use ampd_sys::signal::{self, SignalSet, SIGCHLD, SIGINT, SIGKILL, SIGTERM};

use super::blocking::Worker;
use super::waiting_room::{self, Between, ListenerWake, WaitingRoom};
use crate::config::Config;
use crate::content::caches::Caches;
use crate::content::resolve::DocRoot;

/// A worker that dies sooner than this after it started is replaced only after this long, so a
/// worker that cannot start (out of memory, descriptors) does not become a fork loop.
const RESTART_DELAY: Duration = Duration::from_secs(1);
/// How long workers get to exit after `SIGTERM` before they are killed.
const STOP_GRACE: Duration = Duration::from_secs(3);
/// The master wakes this often even without a signal (to start delayed replacements).
const TICK: Duration = Duration::from_millis(250);

struct Master {
    config: Arc<Config>,
    root: Arc<DocRoot>,
    listener: OwnedFd,
    /// The signal mask before the master blocked its signals; workers get it back.
    original_mask: SignalSet,
    master_pid: Pid,
    workers: HashMap<Pid, Instant>,
    /// Replacements owed, and when the next may start.
    owed: usize,
    next_start: Instant,
}

/// Fork the workers and supervise them until `SIGTERM` or `SIGINT`.
///
/// # Errors
/// The process runs threads already (fork refuses), or the first workers cannot be forked.
pub fn run(config: Arc<Config>, root: Arc<DocRoot>, listener: OwnedFd) -> io::Result<()> {
    // Taken synchronously by the loop below, never by a handler: blocked before any fork, so a
    // signal that arrives while workers start is not lost.
    let signals = SignalSet::of(&[SIGCHLD, SIGTERM, SIGINT]);
    let original_mask = signal::block(&signals)?;
    let mut master = Master {
        workers: HashMap::new(),
        owed: config.thread_count(),
        next_start: Instant::now(),
        config,
        root,
        listener,
        original_mask,
        master_pid: child::pid(),
    };
    while master.owed > 0 {
        master.start_worker()?;
    }
    loop {
        // The one place the master reacts to signals (reload and graceful drain belong here).
        match signal::wait(&signals, Some(TICK))? {
            Some(SIGTERM | SIGINT) => {
                master.stop_all();
                return Ok(());
            }
            Some(_) | None => {
                master.reap();
                master.start_owed();
            }
        }
    }
}

impl Master {
    fn start_worker(&mut self) -> io::Result<()> {
        match child::fork()? {
            Forked::Parent { child } => {
                self.workers.insert(child, Instant::now());
                self.owed -= 1;
                Ok(())
            }
            Forked::Child => {
                let code = self.worker_main();
                // Never return into the master's code.
                std::process::exit(code)
            }
        }
    }

    /// Replace dead workers, unless they are dying as fast as they start.
    fn start_owed(&mut self) {
        while self.owed > 0 && Instant::now() >= self.next_start {
            if let Err(error) = self.start_worker() {
                eprintln!("ampd: mp: cannot start a worker: {error}");
                self.next_start = Instant::now() + RESTART_DELAY;
            }
        }
    }

    fn reap(&mut self) {
        while let Ok(Some((pid, exit))) = child::reap_any() {
            let Some(started) = self.workers.remove(&pid) else {
                continue;
            };
            let how = match exit {
                Exit::Code(code) => format!("exited with status {code}"),
                Exit::Signal(signal) => format!("was killed by signal {signal}"),
            };
            eprintln!("ampd: mp worker {pid} {how}; starting another");
            self.owed += 1;
            if started.elapsed() < RESTART_DELAY {
                self.next_start = Instant::now() + RESTART_DELAY;
            }
        }
    }

    /// `SIGTERM` every worker, wait for them (bounded), `SIGKILL` the rest: none outlives us.
    fn stop_all(&mut self) {
        for &pid in self.workers.keys() {
            let _ = child::kill(pid, SIGTERM);
        }
        let deadline = Instant::now() + STOP_GRACE;
        let chld = SignalSet::of(&[SIGCHLD]);
        while !self.workers.is_empty() {
            while let Ok(Some((pid, _))) = child::reap_any() {
                self.workers.remove(&pid);
            }
            if self.workers.is_empty() {
                break;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                for &pid in self.workers.keys() {
                    let _ = child::kill(pid, SIGKILL);
                }
                // Killed processes are reaped at once; bounded by the loop below.
                let killed = Instant::now();
                while !self.workers.is_empty() && killed.elapsed() < STOP_GRACE {
                    while let Ok(Some((pid, _))) = child::reap_any() {
                        self.workers.remove(&pid);
                    }
                    let _ = signal::wait(&chld, Some(Duration::from_millis(50)));
                }
                return;
            }
            let _ = signal::wait(&chld, Some(left.min(TICK)));
        }
    }

    /// A worker: its own caches and waiting room on the shared listener, one connection at a
    /// time. Returns the exit status.
    fn worker_main(&self) -> i32 {
        // Die with the master, even if it is killed with SIGKILL and cannot stop us.
        if child::set_parent_death_signal(SIGTERM).is_err()
            || child::parent_pid() != self.master_pid
        {
            return 1;
        }
        if signal::set_mask(&self.original_mask).is_err() {
            return 1;
        }
        let listener = match self.listener.try_clone() {
            Ok(listener) => listener,
            Err(error) => return worker_failed(&error),
        };
        let room = match WaitingRoom::new(
            listener,
            ListenerWake::Exclusive,
            1,
            self.config.limits.keepalive_timeout,
        ) {
            Ok(room) => room,
            Err(error) => return worker_failed(&error),
        };
        let caches = Arc::new(Caches::new(&self.config.caches, 1));
        let mut worker = Worker::new(self.config.clone(), self.root.clone(), caches);
        match waiting_room::serve_forever(&room, &mut worker, Between::Hold) {
            Ok(()) => 0,
            Err(error) => worker_failed(&error),
        }
    }
}

fn worker_failed(error: &io::Error) -> i32 {
    eprintln!("ampd: mp worker {}: {error}", child::pid());
    1
}
