//! The readiness driver shared by `sped`, `amped` and `reactor`: one epoll loop that accepts,
//! reads, lets each `Conn` decide, and writes — and never blocks unless told it may (`sped`).
//!
//! Owns: sockets, the connection slab, timeouts, the `Date` clock, and carrying out `Need`s:
//! `writev` for memory, `sendfile` for files (after a residency test under AMPED, Flash §5.4),
//! jobs inline or on helpers. Epoll is edge-triggered: each socket is registered once for both
//! directions, and the loop remembers what it may still read or write.
//! Lifecycle (reload, drain, stop) and admission come from `ops::Control` through the loop's
//! `LoopLink`; see `ops` for the contract every engine follows.
//! Must not touch: HTTP (that is `conn`'s), what a job does (that is `content::job`'s).

use std::collections::VecDeque;
use std::io;
use std::os::fd::AsFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ampd_sys::epoll::{Epoll, Events, Interest};

use super::client::{Accepted, Client};
use super::core::{self, Core, Driver, Follow, ACCEPT_BATCH};
use super::helpers::{Helpers, PoolSize, Token};
use super::listener::Listener;
use super::slab::{Kind, Slab};
use crate::config::Level;
use crate::conn::Spare;
use crate::content::budget::CacheBudget;
use crate::content::caches::Caches;
use crate::content::file::FileKey;
use crate::content::job::{self, Job, JobDone};
use crate::content::sink::DiskAccess;
use crate::log::error;
use crate::ops::Control;

const HELPERS: u64 = u64::MAX - 1;
const INOTIFY: u64 = u64::MAX - 2;
const WAKER: u64 = u64::MAX - 3;
/// The first listener's token; the next ones count down from it (a slab's tokens stay far
/// below).
const LISTENER: u64 = u64::MAX - 4;

/// Input read per connection per turn (at most: the core's read buffer is this large).
const READ_CHUNK: usize = 16 << 10;
/// Passes through one connection's read–decide–write cycle before others get a turn.
const TURNS: usize = 8;
/// How often timeouts are checked.
const SWEEP: Duration = Duration::from_millis(250);

/// What one loop is told at start-up.
pub struct LoopSettings {
    pub name: String,
    pub control: Arc<Control>,
    pub disk: DiskAccess,
    pub helpers: PoolSize,
    /// Files being paged in by any loop's helpers (one set per server).
    pub pages_in_flight: Arc<PagesInFlight>,
    /// What the loop's caches may hold (`content::budget`).
    pub cache_budget: CacheBudget,
}

mod drive;
mod lifecycle;
mod page_ins;
mod upstream;

pub use page_ins::PagesInFlight;

/// A connection in the loop's slab.
pub(crate) type Slot = core::Slot<Readiness>;

/// What the loop knows of a connection's socket besides its `Client`.
pub(crate) struct Readiness {
    can_read: bool,
    can_write: bool,
    /// An event reported the client's hang-up (or an error): its end of stream follows the
    /// data, and edge-triggered epoll will not report it again, so reads go on past a short one.
    hung_up: bool,
    /// What the epoll set watches on this socket.
    watched: Watched,
    /// The range this connection's last page-in made resident: trusted to the residency test
    /// even while another connection's read of the same file is in flight (else two
    /// connections of one file could hand it to helpers in turn forever).
    paged_in: Option<(FileKey, u64)>,
}

/// What the loop's epoll set watches on a connection's socket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Watched {
    /// Not in the epoll set yet. A new connection joins it at the end of the turn it was
    /// accepted in (`join_new`) unless it is gone by then: with `TCP_DEFER_ACCEPT` a
    /// connection-per-request client is usually read, answered and closed within that turn,
    /// and never costs an `epoll_ctl` (docs/research/benchmarks.md, row b). `writes`: a write already
    /// filled the socket, so join watching writability too.
    NotYet {
        writes: bool,
    },
    /// Input only: writability is watched from the first write that fills the socket
    /// (`watch_writes`), since watching it at once reports every new socket writable, a
    /// wake-up per connection for nothing.
    Input,
    InputAndOutput,
}

pub struct EventLoop {
    settings: LoopSettings,
    /// What every connection shares (generation, caches, clock, link, control, drain state).
    core: Core,
    epoll: Epoll,
    /// One per `listen` entry; none once a graceful stop began: no more accepting.
    listeners: Vec<Listener>,
    /// Per listener: epoll said it is readable and the backlog has not been seen empty since.
    backlogged: Vec<bool>,
    slots: Slab<Slot>,
    helpers: Option<Helpers>,
    /// Connections with work they could do now without a new epoll event.
    ready: VecDeque<usize>,
    /// Connections accepted this turn, by token, to join the epoll set at its end.
    joining: Vec<u64>,
    accept_more: bool,
    completions: Vec<(Token, JobDone)>,
    /// Buffers lent to the connection being driven.
    spare: Spare,
}

impl EventLoop {
    /// # Errors
    /// epoll, helper threads or inotify cannot be set up.
    pub fn new(listeners: Vec<Listener>, settings: LoopSettings) -> io::Result<EventLoop> {
        let epoll = Epoll::new()?;
        for (index, listener) in listeners.iter().enumerate() {
            epoll.add(
                listener.as_fd(),
                LISTENER - index as u64,
                Interest::READABLE.edge(),
            )?;
        }
        let link = settings.control.join_loop()?;
        epoll.add(link.waker.as_fd(), WAKER, Interest::READABLE.edge())?;
        let generation = settings.control.current();
        let helpers = if settings.disk == DiskAccess::Helpers {
            let helpers = Helpers::start(
                settings.helpers,
                &settings.name,
                generation.config.helper_mode,
            )?;
            epoll.add(helpers.wake_fd(), HELPERS, Interest::READABLE.edge())?;
            Some(helpers)
        } else {
            None
        };
        let caches = Caches::new(&generation.config.caches, 1, &settings.cache_budget);
        if let Some(watcher) = &caches.watcher {
            epoll.add(watcher.as_fd(), INOTIFY, Interest::READABLE.edge())?;
        }
        let core = Core::new(settings.control.clone(), link, caches, settings.disk);
        Ok(EventLoop {
            settings,
            core,
            epoll,
            backlogged: vec![false; listeners.len()],
            listeners,
            slots: Slab::default(),
            helpers,
            ready: VecDeque::new(),
            joining: Vec::new(),
            accept_more: false,
            completions: Vec::new(),
            spare: Spare::default(),
        })
    }

    /// Serve until a graceful stop has drained this loop, or a stop.
    ///
    /// # Errors
    /// `epoll_wait` fails for a reason other than a signal.
    pub fn run(&mut self) -> io::Result<()> {
        let mut events = Events::with_capacity(256);
        loop {
            let timeout = self.wait_timeout();
            self.epoll.wait(&mut events, timeout)?;
            self.core.clock.tick();
            let now = self.core.clock.now();
            match self.core.follow() {
                Follow::Serve => {}
                Follow::Drain { began, deadline } => {
                    if began {
                        self.begin_drain();
                    }
                    if now >= deadline || self.slots.is_empty() {
                        break;
                    }
                }
                Follow::End => break,
            }
            // Changes on disk first: a request that arrived after a change must see it.
            if events.iter().any(|event| event.token == INOTIFY) {
                self.core.caches.on_change();
            }
            for event in events.iter() {
                match event.token {
                    HELPERS => self.take_completions(),
                    INOTIFY => {}
                    WAKER => {
                        self.core.link.waker.drain();
                    }
                    token
                        if token <= LISTENER && LISTENER - token < self.listeners.len() as u64 =>
                    {
                        self.backlogged[(LISTENER - token) as usize] = true;
                        self.accept_more = true;
                    }
                    token => {
                        let Some((index, kind)) = self.slots.resolve(token) else {
                            continue;
                        };
                        self.note_event(index, kind, token, &event);
                        self.drive(index);
                    }
                }
            }
            if self.accept_more && self.core.accept_pause.over(now) {
                self.accept_batch();
            }
            for _ in 0..self.ready.len() {
                if let Some(index) = self.ready.pop_front() {
                    self.drive(index);
                }
            }
            self.join_new();
            if self.core.sweep_due(now, SWEEP) {
                self.sweep(now);
            }
        }
        self.finish();
        Ok(())
    }

    /// How long `epoll_wait` may sleep: not at all while work is ready, until the end of an
    /// accept pause (never a busy loop while descriptors are exhausted), else one sweep.
    fn wait_timeout(&self) -> i32 {
        if !self.ready.is_empty() {
            return 0;
        }
        if self.accept_more {
            return match self.core.accept_pause.until() {
                Some(until) => {
                    let left = until.saturating_duration_since(Instant::now()).min(SWEEP);
                    i32::try_from(left.as_millis()).unwrap_or(0).max(1)
                }
                None => 0,
            };
        }
        i32::try_from(SWEEP.as_millis()).unwrap_or(250)
    }

    fn slot_of(&self, token: u64) -> Option<usize> {
        self.slots.resolve(token).map(|(index, _)| index)
    }

    fn token(&self, index: usize) -> u64 {
        self.slots.token(index, Kind::Connection)
    }

    /// Accept from each listener with a backlog, up to a batch each.
    fn accept_batch(&mut self) {
        for which in 0..self.listeners.len() {
            if !self.backlogged[which] {
                continue;
            }
            for _ in 0..ACCEPT_BATCH {
                let accepted = self.core.door().accept(&self.listeners[which]);
                match accepted {
                    Accepted::Client(client) => self.admit(*client),
                    Accepted::Skipped => {}
                    Accepted::Empty => {
                        self.backlogged[which] = false;
                        break;
                    }
                    // The listener stays registered and the backlog keeps the clients.
                    Accepted::Exhausted => {
                        self.core.accept_pause.begin(Instant::now());
                        return;
                    }
                }
            }
        }
        // After a full batch more may be waiting: the flag brings us back after others had a
        // turn.
        self.accept_more = self.backlogged.iter().any(|&backlogged| backlogged);
    }

    /// Take a new connection into the slab and serve it right after this accept batch: with
    /// `TCP_DEFER_ACCEPT` on the listener its request is already here, so reading it now saves
    /// a trip through `epoll_wait`. It joins the epoll set at the end of the turn (`Watched`).
    fn admit(&mut self, client: Client) {
        let slot = Slot {
            client,
            io: Readiness {
                can_read: true,
                can_write: true,
                hung_up: false,
                watched: Watched::NotYet { writes: false },
                paged_in: None,
            },
        };
        // A full slab (2^24 connections) cannot happen before descriptors run out; the
        // connection would be dropped.
        let Some(index) = self.slots.insert(slot) else {
            return;
        };
        self.ready.push_back(index);
        self.joining.push(self.token(index));
    }

    /// Connections accepted this turn and still open join the epoll set.
    fn join_new(&mut self) {
        let mut joining = std::mem::take(&mut self.joining);
        for &token in &joining {
            let Some(index) = self.slot_of(token) else {
                continue;
            };
            let Some(slot) = self.slots.get_mut(index) else {
                continue;
            };
            let Watched::NotYet { writes } = slot.io.watched else {
                continue;
            };
            let (interest, watched) = if writes {
                (Interest::BOTH, Watched::InputAndOutput)
            } else {
                (Interest::READABLE, Watched::Input)
            };
            match self
                .epoll
                .add(slot.client.fd.as_fd(), token, interest.edge())
            {
                Ok(()) => slot.io.watched = watched,
                Err(error) => {
                    static UNREGISTERED: error::Throttle = error::Throttle::new();
                    UNREGISTERED.log(
                        Level::Error,
                        format_args!(
                            "{}: cannot register connection: {error}",
                            self.settings.name
                        ),
                    );
                    self.close(index);
                }
            }
        }
        joining.clear();
        self.joining = joining;
    }

    fn take_completions(&mut self) {
        let Some(helpers) = self.helpers.as_ref() else {
            return;
        };
        let mut completions = std::mem::take(&mut self.completions);
        helpers.completed(&mut completions);
        for (token, done) in completions.drain(..) {
            if let JobDone::PagedIn { key, .. } = done {
                self.settings.pages_in_flight.finished(key);
            }
            let Some(index) = self.slot_of(token) else {
                // The connection went away; a translation is still worth keeping.
                continue;
            };
            if let JobDone::PagedIn { key, end, sent } = done {
                let slot = self.slots.get_mut(index).expect("slot_of checked it");
                slot.client.job_out = false;
                slot.io.paged_in = Some((key, end));
                slot.client.conn.output.advance(sent);
                slot.client.clock.sent(sent);
                // The helper's bytes are progress: the send timeout starts again.
                slot.client.clock.note(
                    slot.client.conn.phase(),
                    sent > 0,
                    self.core.clock.now(),
                    &self.core.link.stats,
                );
                self.drive(index);
                continue;
            }
            match self.job_done(index, done) {
                Some(job) => self.submit(index, job),
                None => self.drive(index),
            }
        }
        self.completions = completions;
    }

    fn submit(&mut self, index: usize, job: Job) {
        let token = self.token(index);
        if let Some(slot) = self.slots.get_mut(index) {
            slot.client.job_out = true;
        }
        match &self.helpers {
            Some(helpers) => helpers.submit(token, job),
            // SPED: the loop itself blocks on the disk, which is the point of comparison.
            None => {
                let done = job::run(job);
                if let Some(job) = self.job_done(index, done) {
                    self.submit(index, job);
                }
            }
        }
    }
}
