//! Operations: the lifecycle every engine obeys (reload, drain, stop), signals, admission
//! control, systemd integration and the process around the server.
//!
//! Owns: `Control`, the one interface between the operator and the engines:
//!
//! * each loop calls `join_loop` once and keeps the `LoopLink` (a waker to register with its
//!   poller, its scoreboard shard, its access-log buffer);
//! * on every wake-up it calls `refresh` (one relaxed atomic load unless a reload happened)
//!   and serves new requests under the generation it holds;
//! * it obeys `run_state`: `Running`; `Draining` (stop accepting, answer with
//!   `Connection: close`, close idle connections, exit when none are left or at the
//!   deadline); `Stopped` (exit now);
//! * it admits connections through `admission` and flushes its log buffer before it exits.
//!
//! Must not touch: HTTP (that is `conn`'s), how an engine polls (that is `engine`'s).
//! Sources: Abyss §5 (admission control as future work); nginx signals (`HUP`, `USR1`,
//! `TERM`, `QUIT`); sd_notify(3); sd_listen_fds(3).

pub mod admission;
pub mod notify;
pub mod process;
pub mod reload;
pub mod signals;

use std::io;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use ampd_sys::eventfd::EventFd;

use crate::config::LogFormat;
use crate::log::access::{AccessLog, LogThread};
use crate::log::stats::{LoopStats, Stats};
use crate::site::Generation;
use admission::Admission;

/// What the engines should be doing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunState {
    Running,
    /// Graceful stop: finish what is in flight until `deadline`.
    Draining {
        deadline: Instant,
    },
    /// Exit now.
    Stopped,
}

const RUNNING: u8 = 0;
const DRAINING: u8 = 1;
const STOPPED: u8 = 2;

/// A loop's end of `Control`.
pub struct LoopLink {
    /// Notified on every change of state or generation; register it with the poller.
    pub waker: Arc<EventFd>,
    pub stats: Arc<LoopStats>,
    pub log: AccessLog,
}

pub struct Control {
    generation: Mutex<Arc<Generation>>,
    /// Bumped by every reload, so loops notice with one load.
    epoch: AtomicU64,
    state: AtomicU8,
    deadline: Mutex<Option<Instant>>,
    wakers: Mutex<Vec<Arc<EventFd>>>,
    pub stats: Arc<Stats>,
    pub admission: Arc<Admission>,
    pub access_log: LogThread,
    /// The file `SIGHUP` reloads (`None` under `ampd serve`).
    pub config_path: Option<PathBuf>,
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
    /// # Errors
    /// The access log cannot be opened.
    pub fn new(generation: Generation, config_path: Option<PathBuf>) -> io::Result<Control> {
        let access_log = LogThread::start(generation.config.logs.access.as_deref())?;
        let stats = Arc::new(Stats::default());
        stats.generation.store(generation.number, Ordering::Relaxed);
        Ok(Control {
            generation: Mutex::new(Arc::new(generation)),
            epoch: AtomicU64::new(0),
            state: AtomicU8::new(RUNNING),
            deadline: Mutex::new(None),
            wakers: Mutex::new(Vec::new()),
            stats,
            admission: Arc::new(Admission::new()),
            access_log,
            config_path,
        })
    }

    /// Register a loop.
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
            DRAINING => match *self.deadline.lock().unwrap_or_else(PoisonError::into_inner) {
                Some(deadline) => RunState::Draining { deadline },
                None => RunState::Stopped,
            },
            _ => RunState::Stopped,
        }
    }

    /// Make `generation` serve new requests.
    pub fn install(&self, generation: Generation) {
        self.stats
            .generation
            .store(generation.number, Ordering::Relaxed);
        *self
            .generation
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Arc::new(generation);
        self.epoch.fetch_add(1, Ordering::Release);
        self.wake_all();
    }

    /// Begin a graceful stop with the current generation's grace period.
    pub fn drain(&self) {
        let grace = self.current().config.process.grace_period;
        *self.deadline.lock().unwrap_or_else(PoisonError::into_inner) =
            Some(Instant::now() + grace);
        let _ = self
            .state
            .compare_exchange(RUNNING, DRAINING, Ordering::AcqRel, Ordering::Acquire);
        self.wake_all();
    }

    /// Stop now (the grace period is cut short).
    pub fn stop(&self) {
        self.state.store(STOPPED, Ordering::Release);
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
