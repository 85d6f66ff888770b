//! Operations: the lifecycle every engine obeys (reload, drain, stop), signals, admission
//! control, systemd integration, the process around the server and the persistent
//! applications it keeps (`applications.rs`).
//!
//! Owns: `Control`, the one interface between the operator and the engines (one per process):
//!
//! * an event loop (or ring) calls `join_loop` once and keeps the `LoopLink` (a waker to
//!   register with its poller, its scoreboard slot, its access-log buffer); a thread of a
//!   blocking engine calls `join_thread` (a slot it may share, its log buffer) and polls
//!   `stopping_fd` beside its sockets;
//! * on every wake-up (or request) it calls `refresh` (one relaxed atomic load unless a reload
//!   happened) and serves new requests under the generation it holds;
//! * it obeys `run_state`: `Running`; `Announcing` (for `drain_delay`: keep accepting, but
//!   answer health with `503` and every response with `Connection: close`); `Draining` (stop
//!   accepting, answer with `Connection: close`, close idle connections, exit when none are
//!   left or at the deadline); `Stopped` (exit now);
//! * it admits connections through `admission`, limits request rates through `rates`, and
//!   flushes its log buffer before it exits.
//!
//! What every process of the server shares — the scoreboard, the admission counts and the
//! rate limiter's table — is made once, before any `mp` worker is forked (`Shared`).
//! Must not touch: HTTP (that is `conn`'s), how an engine polls (that is `engine`'s).
//! Sources: Abyss §5 (admission control as future work); nginx signals (`HUP`, `USR1`,
//! `TERM`, `QUIT`); Apache prefork's shared scoreboard; sd_notify(3); sd_listen_fds(3).

pub mod admission;
pub mod applications;
pub mod notify;
pub mod pid_file;
pub mod process;
pub mod reload;
pub mod signals;
pub mod upgrade;

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use ampd_sys::eventfd::EventFd;

use crate::config::{Arch, Config, LogFormat};
use crate::log::access::{AccessLog, LogFile, LogThread};
use crate::log::stats::{LoopStats, Stats};
use crate::site::rate::RateLimiter;
use crate::site::Generation;
use admission::Admission;

/// What the engines should be doing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunState {
    Running,
    /// A graceful stop is announced (`drain_delay`): health answers `503` and every response
    /// carries `Connection: close`, while new connections are still accepted and served until
    /// `until`, so that a load balancer's checks take the instance out before its port closes.
    Announcing {
        until: Instant,
    },
    /// Graceful stop: finish what is in flight until `deadline`.
    Draining {
        deadline: Instant,
    },
    /// Exit now.
    Stopped,
}

const RUNNING: u8 = 0;
const ANNOUNCING: u8 = 1;
const DRAINING: u8 = 2;
const STOPPED: u8 = 3;

/// Which process of the server this `Control` runs in.
#[derive(Clone, Copy, Debug)]
pub enum Role {
    /// The only process (every engine but `mp`): it counts reloads and talks to systemd.
    Server,
    /// An `mp` worker with its scoreboard slot: its master validates reloads, counts them and
    /// talks to systemd (which accepts notifications from the main process only), and waits
    /// until every worker's slot shows the new generation installed.
    Worker { slot: LoopStats },
}

/// What all processes of the server share, in memory that forked workers inherit: made
/// before any fork.
pub struct Shared {
    pub stats: Arc<Stats>,
    pub admission: Arc<Admission>,
    pub rates: Arc<RateLimiter>,
}

impl Shared {
    /// For `config`'s engine: one scoreboard slot per loop, thread group or process.
    ///
    /// # Errors
    /// The shared mappings cannot be made.
    pub fn new(config: &Config) -> io::Result<Shared> {
        let count = config.thread_count();
        let (slots, processes) = match config.arch {
            Arch::Sped | Arch::Amped => (1, 1),
            Arch::Reactor | Arch::Uring => (count, 1),
            // Pool threads have a slot each; one more for the shared caches.
            Arch::Mt => (count + 1, 1),
            // Connection threads share a few slots; one more for the shared caches.
            Arch::Tpc => (TPC_SLOTS + 1, 1),
            Arch::Mp => (count, count),
        };
        Ok(Shared {
            stats: Arc::new(Stats::new(slots)?),
            admission: Arc::new(Admission::new(processes)?),
            rates: Arc::new(RateLimiter::new()?),
        })
    }
}

/// Scoreboard slots the connection threads of `tpc` share (chosen in turn).
pub const TPC_SLOTS: usize = 16;

/// A loop's end of `Control`.
pub struct LoopLink {
    /// Notified on every change of state or generation; register it with the poller.
    pub waker: Arc<EventFd>,
    pub stats: LoopStats,
    pub log: AccessLog,
}

/// A blocking engine thread's end of `Control` (it waits on `Control::stopping_fd`).
pub struct ThreadLink {
    pub stats: LoopStats,
    pub log: AccessLog,
}

pub struct Control {
    generation: Mutex<Arc<Generation>>,
    /// Bumped by every reload, so loops notice with one load.
    epoch: AtomicU64,
    state: AtomicU8,
    /// The end of the announcement (`Announcing`).
    announce_until: Mutex<Option<Instant>>,
    deadline: Mutex<Option<Instant>>,
    wakers: Mutex<Vec<Arc<EventFd>>>,
    /// Made readable when a graceful stop (or a stop) begins and never read, so every thread
    /// of a blocking engine that polls it wakes, however many there are.
    stopping: EventFd,
    /// Duplicates of the listening sockets, for an upgrade to pass on (`upgrade.rs`); dropped
    /// when the drain begins, so that a stopping server's port refuses new connections rather
    /// than queues them where nobody accepts.
    listeners: Mutex<Vec<OwnedFd>>,
    pub stats: Arc<Stats>,
    pub admission: Arc<Admission>,
    pub rates: Arc<RateLimiter>,
    pub access_log: LogThread,
    /// The file `SIGHUP` reloads (`None` under `ampd serve`).
    pub config_path: Option<PathBuf>,
    pub role: Role,
}

/// The access-log format a generation asks for (`None`: off).
#[must_use]
pub fn log_format(generation: &Generation) -> Option<LogFormat> {
    generation
        .config
        .logs
        .access
        .as_ref()
        .map(|_| generation.config.logs.format)
}

impl Control {
    /// Starts the access-log thread (so a process that forks must do it in each child).
    ///
    /// # Errors
    /// The log thread or the stop eventfd cannot be created.
    pub fn new(
        generation: Arc<Generation>,
        config_path: Option<PathBuf>,
        shared: &Shared,
        access_log: LogFile,
        role: Role,
    ) -> io::Result<Control> {
        let access_log = LogThread::start(access_log)?;
        let stats = shared.stats.clone();
        match role {
            Role::Server => stats.set_generation(generation.number),
            Role::Worker { slot } => slot.set_installed(generation.number),
        }
        Ok(Control {
            generation: Mutex::new(generation),
            epoch: AtomicU64::new(0),
            state: AtomicU8::new(RUNNING),
            announce_until: Mutex::new(None),
            deadline: Mutex::new(None),
            wakers: Mutex::new(Vec::new()),
            stopping: EventFd::new()?,
            listeners: Mutex::new(Vec::new()),
            stats,
            admission: shared.admission.clone(),
            rates: shared.rates.clone(),
            access_log,
            config_path,
            role,
        })
    }

    /// Register an event loop (or ring).
    ///
    /// # Errors
    /// The waker's eventfd cannot be created.
    pub fn join_loop(&self) -> io::Result<LoopLink> {
        let waker = Arc::new(EventFd::new()?);
        self.wakers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(waker.clone());
        let generation = self.current();
        Ok(LoopLink {
            waker,
            stats: self.stats.add_loop(),
            log: self.access_log.handle(log_format(&generation)),
        })
    }

    /// Register a thread of a blocking engine that counts into `stats`.
    #[must_use]
    pub fn join_thread(&self, stats: LoopStats) -> ThreadLink {
        ThreadLink {
            stats,
            log: self.access_log.handle(log_format(&self.current())),
        }
    }

    /// Keep duplicates of the listening sockets (every one, in order) for an upgrade.
    pub fn keep_listeners(&self, listeners: Vec<OwnedFd>) {
        *self
            .listeners
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = listeners;
    }

    /// Run `with` on the listening sockets kept for an upgrade (none once a drain began).
    pub fn with_listeners<R>(&self, with: impl FnOnce(&[BorrowedFd<'_>]) -> R) -> R {
        let listeners = self
            .listeners
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let borrowed: Vec<BorrowedFd<'_>> = listeners.iter().map(AsFd::as_fd).collect();
        with(&borrowed)
    }

    /// Readable once a graceful stop or a stop has begun (level-triggered: poll it).
    #[must_use]
    pub fn stopping_fd(&self) -> BorrowedFd<'_> {
        self.stopping.as_fd()
    }

    /// The newest generation.
    #[must_use]
    pub fn current(&self) -> Arc<Generation> {
        self.generation
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Replace `held` with the newest generation if a reload happened since `seen`; returns
    /// whether it did.
    pub fn refresh(&self, seen: &mut u64, held: &mut Arc<Generation>) -> bool {
        let epoch = self.epoch.load(Ordering::Acquire);
        if epoch == *seen {
            return false;
        }
        *seen = epoch;
        *held = self.current();
        true
    }

    #[must_use]
    pub fn run_state(&self) -> RunState {
        match self.state.load(Ordering::Acquire) {
            RUNNING => RunState::Running,
            ANNOUNCING => match *self
                .announce_until
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
            {
                Some(until) => RunState::Announcing { until },
                None => RunState::Running,
            },
            DRAINING => match *self.deadline.lock().unwrap_or_else(PoisonError::into_inner) {
                Some(deadline) => RunState::Draining { deadline },
                None => RunState::Stopped,
            },
            _ => RunState::Stopped,
        }
    }

    /// Make `generation` serve new requests.
    pub fn install(&self, generation: Generation) {
        match self.role {
            Role::Server => self.stats.set_generation(generation.number),
            Role::Worker { slot } => slot.set_installed(generation.number),
        }
        *self
            .generation
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Arc::new(generation);
        self.epoch.fetch_add(1, Ordering::Release);
        self.wake_all();
    }

    /// Begin a graceful stop: announce it for the current generation's `drain_delay` (a
    /// thread of its own ends the announcement), then drain within its `grace_period`.
    ///
    /// # Errors
    /// The thread that ends the announcement cannot be started (the stop is then not begun).
    pub fn drain(self: &Arc<Self>) -> io::Result<()> {
        let delay = self.current().config.process.drain_delay;
        if delay.is_zero() {
            self.drain_now();
            return Ok(());
        }
        let until = Instant::now() + delay;
        *self
            .announce_until
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(until);
        let control = self.clone();
        std::thread::Builder::new()
            .name("drain-delay".to_owned())
            .spawn(move || {
                std::thread::sleep(until.saturating_duration_since(Instant::now()));
                control.drain_now();
            })?;
        if self
            .state
            .compare_exchange(RUNNING, ANNOUNCING, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            self.wake_all();
        }
        self.publish_stop_begun();
        Ok(())
    }

    /// Drain now, within the current generation's grace period: the listeners close (a
    /// running announcement ends early; a stop stays a stop).
    pub fn drain_now(&self) {
        let grace = self.current().config.process.grace_period;
        *self.deadline.lock().unwrap_or_else(PoisonError::into_inner) =
            Some(Instant::now() + grace);
        let began = self
            .state
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |state| {
                matches!(state, RUNNING | ANNOUNCING).then_some(DRAINING)
            })
            .is_ok();
        if began {
            self.release();
        }
        self.publish_stop_begun();
    }

    /// Stop now (the grace period is cut short).
    pub fn stop(&self) {
        self.state.store(STOPPED, Ordering::Release);
        self.release();
        self.publish_stop_begun();
    }

    /// Under `mp`, the master reports a graceful stop begun only once every worker's slot says
    /// so: a health check that reads the log line must not reach a worker still answering `200`.
    fn publish_stop_begun(&self) {
        if let Role::Worker { slot } = self.role {
            slot.set_stop_begun();
        }
    }

    /// The stop has begun: the listeners kept for an upgrade are closed, and every thread and
    /// loop hears of it.
    fn release(&self) {
        self.listeners
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
        self.stopping.notify();
        self.wake_all();
    }

    fn wake_all(&self) {
        for waker in self
            .wakers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
        {
            waker.notify();
        }
    }
}
