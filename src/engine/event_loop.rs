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
use std::net::SocketAddr;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ampd_sys::epoll::{Epoll, Events, Interest};
use ampd_sys::{io as sysio, socket};

use super::helpers::{Helpers, Token};
use crate::config::Level;
use crate::conn::{Conn, Context, Ending, Need, Phase, Spare};
use crate::content::caches::Caches;
use crate::content::job::{self, Job, JobDone};
use crate::content::serve::{self, DiskAccess};
use crate::log::clock::Clock;
use crate::log::error;
use crate::ops::admission::{Admit, Ticket};
use crate::ops::{self, Control, LoopLink, RunState};
use crate::site::Generation;

mod lifecycle;

const LISTENER: u64 = u64::MAX;
const HELPERS: u64 = u64::MAX - 1;
const INOTIFY: u64 = u64::MAX - 2;
const WAKER: u64 = u64::MAX - 3;

/// Connections accepted per wake-up before others get a turn.
const ACCEPT_BATCH: usize = 64;
/// How long accepting pauses when descriptors run out (`EMFILE`), instead of spinning on a
/// listener that stays readable. Pending connections wait in the backlog meanwhile.
const ACCEPT_PAUSE: Duration = Duration::from_millis(100);
/// Input read per connection per turn.
const READ_CHUNK: usize = 16 << 10;
/// Passes through one connection's read–decide–write cycle before others get a turn.
const TURNS: usize = 8;
/// How often timeouts are checked.
const SWEEP: Duration = Duration::from_millis(250);
/// The window over which `limits.min_send_rate` is judged: a response must move at least
/// rate × window bytes per window (kernel buffers filled at the start do not count later).
const SEND_RATE_WINDOW: Duration = Duration::from_secs(2);

/// What one loop is told at start-up.
pub struct LoopSettings {
    pub name: String,
    pub control: Arc<Control>,
    pub disk: DiskAccess,
    pub helpers: usize,
}

/// A `Context` for a connection, from the loop's fields (a macro, so the borrows of the
/// fields stay separate from the borrow of the slot being driven).
macro_rules! context {
    ($self:ident) => {
        Context {
            config: &$self.generation.config,
            sites: &$self.generation.sites,
            caches: &mut $self.caches,
            clock: &$self.clock,
            disk: $self.settings.disk,
            log: &mut $self.link.log,
            stats: &$self.link.stats,
            metrics: &$self.settings.control.stats,
            draining: $self.draining,
        }
    };
}

struct Slot {
    fd: OwnedFd,
    conn: Conn,
    generation: u32,
    can_read: bool,
    can_write: bool,
    /// What the epoll set watches on this socket.
    watched: Watched,
    /// A job (or page-in) is out for this connection.
    job_out: bool,
    phase: Phase,
    phase_since: Instant,
    /// Write side shut; draining input until the client closes (lingering close).
    lingering: bool,
    /// Start of the current minimum-send-rate window and the bytes sent in it.
    rate_window: Instant,
    rate_sent: u64,
    /// This connection's place in admission control's counts (given back on drop).
    _ticket: Option<Ticket>,
}

/// What the loop's epoll set watches on a connection's socket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Watched {
    /// Not in the epoll set yet. A new connection joins it at the end of the turn it was
    /// accepted in (`join_new`) unless it is gone by then: with `TCP_DEFER_ACCEPT` a
    /// connection-per-request client is usually read, answered and closed within that turn,
    /// and never costs an `epoll_ctl` (docs/benchmarks.md, row b). `writes`: a write already
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
    epoll: Epoll,
    /// `None` once a graceful stop began: no more accepting.
    listener: Option<OwnedFd>,
    /// The configuration generation new requests are served under, and the reload epoch seen.
    generation: Arc<Generation>,
    epoch: u64,
    link: LoopLink,
    draining: bool,
    /// Boxed, so the slab's spare capacity costs a pointer per slot, not a whole connection.
    slots: Vec<Option<Box<Slot>>>,
    free: Vec<usize>,
    next_generation: u32,
    helpers: Option<Helpers>,
    caches: Caches,
    clock: Clock,
    /// Connections with work they could do now without a new epoll event.
    ready: VecDeque<usize>,
    /// Connections accepted this turn, by slot and generation, to join the epoll set at its end.
    joining: Vec<(usize, u32)>,
    accept_more: bool,
    accept_paused_until: Option<Instant>,
    last_sweep: Instant,
    completions: Vec<(Token, JobDone)>,
    /// The one read buffer of this loop (see `read_input`).
    scratch: Box<[u8]>,
    /// Buffers lent to the connection being driven.
    spare: Spare,
}

impl EventLoop {
    /// # Errors
    /// epoll, helper threads or inotify cannot be set up.
    pub fn new(listener: OwnedFd, settings: LoopSettings) -> io::Result<EventLoop> {
        let epoll = Epoll::new()?;
        epoll.add(listener.as_fd(), LISTENER, Interest::READABLE.edge())?;
        let link = settings.control.join_loop()?;
        epoll.add(link.waker.as_fd(), WAKER, Interest::READABLE.edge())?;
        let generation = settings.control.current();
        let helpers = if settings.disk == DiskAccess::Helpers {
            let helpers = Helpers::start(settings.helpers, &settings.name)?;
            epoll.add(helpers.wake_fd(), HELPERS, Interest::READABLE.edge())?;
            Some(helpers)
        } else {
            None
        };
        let caches = Caches::new(&generation.config.caches);
        if let Some(watcher) = &caches.watcher {
            epoll.add(watcher.as_fd(), INOTIFY, Interest::READABLE.edge())?;
        }
        Ok(EventLoop {
            settings,
            epoll,
            listener: Some(listener),
            generation,
            epoch: 0,
            link,
            draining: false,
            slots: Vec::new(),
            free: Vec::new(),
            next_generation: 1,
            helpers,
            caches,
            clock: Clock::default(),
            ready: VecDeque::new(),
            joining: Vec::new(),
            accept_more: false,
            accept_paused_until: None,
            last_sweep: Instant::now(),
            completions: Vec::new(),
            scratch: vec![0u8; READ_CHUNK].into_boxed_slice(),
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
            let now = Instant::now();
            self.clock.tick();
            if self
                .settings
                .control
                .refresh(&mut self.epoch, &mut self.generation)
            {
                self.link.log.set_format(ops::log_format(&self.generation));
                // Translations are keyed by the old generation's roots: they can never hit
                // again, and they hold descriptors open.
                self.caches.paths.clear();
            }
            // Lifecycle before this wake-up's events, so that a request read after the stop
            // signal is answered as draining (`Connection: close`, health 503).
            match self.settings.control.run_state() {
                RunState::Running => {}
                RunState::Draining { deadline } => {
                    if !self.draining {
                        self.begin_drain();
                    }
                    if now >= deadline || self.slots.iter().all(Option::is_none) {
                        break;
                    }
                }
                RunState::Stopped => break,
            }
            // Changes on disk first: a request that arrived after a change must see it.
            if events.iter().any(|event| event.token == INOTIFY) {
                self.caches.on_change();
            }
            for event in events.iter() {
                match event.token {
                    LISTENER => self.accept_more = self.listener.is_some(),
                    HELPERS => self.take_completions(),
                    INOTIFY => {}
                    WAKER => {
                        self.link.waker.drain();
                    }
                    token => {
                        let Some(index) = self.slot_of(token) else {
                            continue;
                        };
                        if let Some(slot) = self.slots[index].as_mut() {
                            slot.can_read |= event.readable || event.hangup || event.error;
                            slot.can_write |= event.writable || event.error;
                        }
                        self.drive(index);
                    }
                }
            }
            if self.accept_more && self.accept_paused_until.is_none_or(|until| now >= until) {
                self.accept_paused_until = None;
                self.accept_batch();
            }
            for _ in 0..self.ready.len() {
                if let Some(index) = self.ready.pop_front() {
                    self.drive(index);
                }
            }
            self.join_new();
            if now.duration_since(self.last_sweep) >= SWEEP {
                self.last_sweep = now;
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
            return match self.accept_paused_until {
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
        let index = usize::try_from(token & 0xffff_ffff).ok()?;
        let generation = (token >> 32) as u32;
        match self.slots.get(index) {
            Some(Some(slot)) if slot.generation == generation => Some(index),
            _ => None,
        }
    }

    fn token(&self, index: usize) -> u64 {
        let generation = self.slots[index].as_ref().map_or(0, |slot| slot.generation);
        (u64::from(generation) << 32) | index as u64
    }

    fn accept_batch(&mut self) {
        for _ in 0..ACCEPT_BATCH {
            let Some(listener) = self.listener.as_ref() else {
                self.accept_more = false;
                return;
            };
            match socket::accept(listener.as_fd()) {
                Ok((fd, peer)) => {
                    let limits = &self.generation.config.admission;
                    let (ticket, refused) =
                        match self.settings.control.admission.admit(peer.ip(), limits) {
                            Admit::Yes(ticket) => (ticket, false),
                            Admit::Refuse(ticket, why) => {
                                self.link.stats.shed(why);
                                (ticket, true)
                            }
                            Admit::Drop(why) => {
                                self.link.stats.shed(why);
                                continue;
                            }
                        };
                    self.admit(fd, peer, ticket, refused);
                }
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => {
                    self.accept_more = false;
                    return;
                }
                // Out of descriptors or memory (EMFILE, ENFILE, ENOBUFS, ENOMEM): pause (the
                // listener stays registered and the backlog keeps the clients) rather than spin
                // on a listener that stays readable. Other errors (the client gave up between
                // SYN and accept, a signal) just move on to the next connection.
                Err(error) => {
                    if let Some(23 | 24 | 105 | 12) = error.raw_os_error() {
                        self.accept_paused_until = Some(Instant::now() + ACCEPT_PAUSE);
                        return;
                    }
                }
            }
        }
        // A full batch: more may be waiting; the flag brings us back after others had a turn.
        self.accept_more = true;
    }

    /// Take a new connection into the slab and serve it right after this accept batch: with
    /// `TCP_DEFER_ACCEPT` on the listener its request is already here, so reading it now saves
    /// a trip through `epoll_wait`. It joins the epoll set at the end of the turn (`Watched`).
    fn admit(&mut self, fd: OwnedFd, peer: SocketAddr, ticket: Ticket, refused: bool) {
        let index = self.free.pop().unwrap_or_else(|| {
            self.slots.push(None);
            self.slots.len() - 1
        });
        let generation = self.next_generation;
        self.next_generation = self.next_generation.wrapping_add(1).max(1);
        let config = &self.generation.config;
        let conn = if refused {
            Conn::refusing(config, peer.ip())
        } else {
            Conn::new(config, peer.ip())
        };
        let now = Instant::now();
        self.link.stats.accepted.fetch_add(1, Ordering::Relaxed);
        self.link
            .stats
            .connection_moved(None, Some(Phase::Idle.index()));
        self.slots[index] = Some(Box::new(Slot {
            fd,
            conn,
            generation,
            can_read: true,
            can_write: true,
            watched: Watched::NotYet { writes: false },
            job_out: false,
            phase: Phase::Idle,
            phase_since: now,
            lingering: false,
            rate_window: now,
            rate_sent: 0,
            _ticket: Some(ticket),
        }));
        self.ready.push_back(index);
        self.joining.push((index, generation));
    }

    /// Connections accepted this turn and still open join the epoll set.
    fn join_new(&mut self) {
        let joining = std::mem::take(&mut self.joining);
        for &(index, generation) in &joining {
            let token = (u64::from(generation) << 32) | index as u64;
            let Some(slot) = self.slots[index].as_mut() else {
                continue;
            };
            let Watched::NotYet { writes } = slot.watched else {
                continue;
            };
            if slot.generation != generation {
                continue;
            }
            let (interest, watched) = if writes {
                (Interest::BOTH, Watched::InputAndOutput)
            } else {
                (Interest::READABLE, Watched::Input)
            };
            match self.epoll.add(slot.fd.as_fd(), token, interest.edge()) {
                Ok(()) => slot.watched = watched,
                Err(error) => {
                    error::log(
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
        self.joining = joining;
        self.joining.clear();
    }

    fn take_completions(&mut self) {
        let Some(helpers) = self.helpers.as_ref() else {
            return;
        };
        let mut completions = std::mem::take(&mut self.completions);
        helpers.completed(&mut completions);
        for (token, done) in completions.drain(..) {
            let Some(index) = self.slot_of(token) else {
                // The connection went away; a translation is still worth keeping.
                continue;
            };
            let next = {
                let slot = self.slots[index].as_mut().expect("slot_of checked it");
                slot.job_out = false;
                if let JobDone::PagedIn = done {
                    self.drive(index);
                    continue;
                }
                let mut context = context!(self);
                slot.conn.job_done(done, &mut context)
            };
            match next {
                Some(job) => self.submit(index, job),
                None => self.drive(index),
            }
        }
        self.completions = completions;
    }

    fn submit(&mut self, index: usize, job: Job) {
        let token = self.token(index);
        if let Some(slot) = self.slots[index].as_mut() {
            slot.job_out = true;
        }
        match &self.helpers {
            Some(helpers) => helpers.submit(token, job),
            // SPED: the loop itself blocks on the disk, which is the point of comparison.
            None => {
                let done = job::run(job);
                let next = {
                    let Some(slot) = self.slots[index].as_mut() else {
                        return;
                    };
                    slot.job_out = false;
                    let mut context = context!(self);
                    slot.conn.job_done(done, &mut context)
                };
                if let Some(job) = next {
                    self.submit(index, job);
                }
            }
        }
    }

    /// Run one connection's read → decide → write cycle as far as it goes without blocking,
    /// with the loop's spare buffers lent to it for the turn (`conn::Spare`).
    fn drive(&mut self, index: usize) {
        if let Some(slot) = self.slots[index].as_mut() {
            slot.conn.borrow_buffers(&mut self.spare);
        }
        self.drive_turns(index);
        if let Some(slot) = self.slots[index].as_mut() {
            slot.conn.return_buffers(&mut self.spare);
        }
    }

    fn drive_turns(&mut self, index: usize) {
        for _ in 0..TURNS {
            let Some(slot) = self.slots[index].as_mut() else {
                return;
            };
            if slot.job_out {
                return;
            }
            if slot.lingering {
                self.linger(index);
                return;
            }
            let read = match read_input(slot, &mut self.scratch) {
                Ok(read) => read,
                Err(_) => return self.close(index),
            };
            let need = {
                let mut context = context!(self);
                slot.conn.advance(&mut context)
            };
            if let Need::Job(job) = need {
                self.submit(index, job);
                // SPED ran it already; AMPED resumes on completion.
                let Some(slot) = self.slots[index].as_mut() else {
                    return;
                };
                if slot.job_out {
                    self.flush_and_note(index);
                    return;
                }
                continue;
            }
            // The connection closes at once after this output (see `end`): the close will carry
            // the last segment's FIN, so hold that segment back for it.
            let closes_after = matches!(need, Need::Close(Ending::Close)) && !slot.can_read;
            let wrote = match self.flush(index, closes_after) {
                Ok(wrote) => wrote,
                Err(_) => return self.close(index),
            };
            self.note_phase(index, read || wrote);
            let Some(slot) = self.slots[index].as_ref() else {
                return;
            };
            if let Need::Close(ending) = need {
                if slot.conn.output.is_empty() {
                    return self.end(index, ending);
                }
            }
            if !read && !wrote {
                return;
            }
        }
        // Still busy after its turns: others go first, then it continues.
        self.ready.push_back(index);
    }

    fn flush_and_note(&mut self, index: usize) {
        match self.flush(index, false) {
            Ok(wrote) => self.note_phase(index, wrote),
            Err(_) => self.close(index),
        }
    }

    fn note_phase(&mut self, index: usize, progressed: bool) {
        let Some(slot) = self.slots[index].as_mut() else {
            return;
        };
        let phase = slot.conn.phase();
        // Progress restarts the idle and send clocks; the head clock runs from the first byte
        // of the head however slowly the rest trickles in (slowloris).
        if phase != slot.phase || (progressed && matches!(phase, Phase::Sending | Phase::Idle)) {
            let now = Instant::now();
            if phase != slot.phase {
                self.link
                    .stats
                    .connection_moved(Some(slot.phase.index()), Some(phase.index()));
                if phase == Phase::Sending {
                    slot.rate_window = now;
                    slot.rate_sent = 0;
                }
            }
            slot.phase = phase;
            slot.phase_since = now;
        }
    }

    /// Write queued output until the socket is full, the output is empty, this turn's budget
    /// is spent, or a file range must first be paged in by a helper. Returns whether any byte
    /// went out.
    ///
    /// Memory is sent with `MSG_MORE` when more follows at once: a file range (the head then
    /// leaves with the body's first segment), or the close (`closes_after`: the kernel then puts
    /// the FIN on the response's last segment instead of sending it alone, one packet less per
    /// connection-per-request exchange, docs/benchmarks.md row b).
    fn flush(&mut self, index: usize, closes_after: bool) -> io::Result<bool> {
        let token = self.token(index);
        let send_chunk = self.generation.config.send.send_chunk as u64;
        let mut budget = send_chunk;
        let mut wrote = false;
        let disk = self.settings.disk;
        loop {
            let Some(slot) = self.slots[index].as_mut() else {
                return Ok(wrote);
            };
            if !slot.can_write || slot.conn.output.is_empty() || budget == 0 {
                if budget == 0 && !slot.conn.output.is_empty() && slot.can_write {
                    self.ready.push_back(index);
                }
                return Ok(wrote);
            }
            if let Some(range) = slot.conn.output.front_file() {
                let len = (range.end - range.offset).min(budget);
                if disk == DiskAccess::Helpers
                    && !serve::range_resident(range.file, range.offset, len)
                {
                    let job = Job::PageIn {
                        file: range.file.clone(),
                        offset: range.offset,
                        len,
                    };
                    self.submit(index, job);
                    return Ok(wrote);
                }
                let mut offset = range.offset;
                let count = usize::try_from(len).unwrap_or(usize::MAX);
                match sysio::sendfile(slot.fd.as_fd(), range.file.file.as_fd(), &mut offset, count)
                {
                    // The file is shorter than when its head was sent: the response cannot be
                    // completed, so the connection must end (the client sees a short body).
                    Ok(0) => return Err(io::Error::from(io::ErrorKind::UnexpectedEof)),
                    Ok(sent) => {
                        slot.conn.output.advance(sent as u64);
                        slot.rate_sent += sent as u64;
                        budget = budget.saturating_sub(sent as u64);
                        wrote = true;
                    }
                    Err(error) if error.kind() == io::ErrorKind::WouldBlock => {
                        watch_writes(&self.epoll, slot, token)?;
                    }
                    Err(error) => return Err(error),
                }
            } else {
                let more = if closes_after || slot.conn.output.file_follows_memory() {
                    sysio::MSG_MORE
                } else {
                    0
                };
                let slices = slot.conn.output.memory_slices();
                match sysio::send_vectored(slot.fd.as_fd(), &slices, sysio::MSG_NOSIGNAL | more) {
                    Ok(sent) => {
                        slot.conn.output.advance(sent as u64);
                        slot.rate_sent += sent as u64;
                        budget = budget.saturating_sub(sent as u64);
                        wrote = true;
                    }
                    Err(error) if error.kind() == io::ErrorKind::WouldBlock => {
                        watch_writes(&self.epoll, slot, token)?;
                    }
                    Err(error) => return Err(error),
                }
            }
        }
    }

    /// The last response is out. A client that has sent nothing more gets a plain close (its
    /// FIN follows the response); otherwise the close lingers.
    fn end(&mut self, index: usize, ending: Ending) {
        let Some(slot) = self.slots[index].as_mut() else {
            return;
        };
        if ending == Ending::Close && !slot.can_read {
            return self.close(index);
        }
        self.begin_close(index);
    }

    /// The response is out and the connection must end: shut down our side so the client gets
    /// a FIN after the data, then drain its input until it closes, so unread request bytes do
    /// not turn our close into a reset that destroys the response in flight (lingering close).
    fn begin_close(&mut self, index: usize) {
        let Some(slot) = self.slots[index].as_mut() else {
            return;
        };
        if socket::shutdown_write(slot.fd.as_fd()).is_err() {
            return self.close(index);
        }
        slot.lingering = true;
        self.link
            .stats
            .connection_moved(Some(slot.phase.index()), Some(Phase::Closing.index()));
        slot.phase = Phase::Closing;
        slot.phase_since = Instant::now();
        self.linger(index);
    }

    fn linger(&mut self, index: usize) {
        let Some(slot) = self.slots[index].as_mut() else {
            return;
        };
        let mut scratch = [0u8; 4096];
        loop {
            match sysio::read(slot.fd.as_fd(), &mut scratch) {
                Ok(0) => return self.close(index),
                Ok(_) => {}
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => return,
                Err(_) => return self.close(index),
            }
        }
    }

    fn close(&mut self, index: usize) {
        if let Some(slot) = self.slots[index].take() {
            self.link
                .stats
                .connection_moved(Some(slot.phase.index()), None);
            // Closing the descriptor removes it from the epoll set.
            drop(slot);
            self.free.push(index);
        }
    }

    /// Apply the timeouts of each connection's phase and the minimum send rate; publish
    /// counters; hand the access-log buffer to its thread.
    fn sweep(&mut self, now: Instant) {
        let limits = &self.generation.config.limits;
        let min_rate = limits.min_send_rate;
        let mut expired = Vec::new();
        for (index, slot) in self.slots.iter_mut().enumerate() {
            let Some(slot) = slot else { continue };
            let limit = match slot.phase {
                Phase::Idle => limits.keepalive_timeout,
                Phase::Head => limits.header_timeout,
                Phase::Busy if !slot.job_out => limits.body_timeout,
                Phase::Busy => continue,
                Phase::Sending => limits.send_timeout,
                Phase::Closing => limits.linger_timeout,
            };
            if now.saturating_duration_since(slot.phase_since) >= limit {
                expired.push((index, slot.phase));
                continue;
            }
            // Slow-read defence: a response must keep moving at `min_send_rate`, judged per
            // window so that kernel buffers filled at the start cannot carry a stalled reader.
            if slot.phase == Phase::Sending && min_rate > 0 && !slot.job_out {
                let window = now.saturating_duration_since(slot.rate_window);
                if window >= SEND_RATE_WINDOW {
                    let floor = (min_rate as f64 * window.as_secs_f64()) as u64;
                    if slot.rate_sent < floor {
                        expired.push((index, Phase::Sending));
                        continue;
                    }
                    slot.rate_window = now;
                    slot.rate_sent = 0;
                }
            }
        }
        for (index, phase) in expired {
            match phase {
                Phase::Head | Phase::Busy => {
                    if let Some(slot) = self.slots[index].as_mut() {
                        let mut context = context!(self);
                        slot.conn.timed_out(&mut context);
                        slot.can_read = false;
                    }
                    self.drive(index);
                    // If the 408 could not go out at once, the client is not reading: end it.
                    if let Some(slot) = self.slots[index].as_ref() {
                        if !slot.lingering {
                            self.close(index);
                        }
                    }
                }
                // A stalled or too-slow reader: reset, so that the response still queued in
                // the kernel's send buffer is dropped instead of trickling out after close.
                Phase::Sending => self.abort(index),
                _ => self.close(index),
            }
        }
        self.publish();
        self.link.log.flush();
    }
}

/// The socket is full: wait for writability, registering for it the first time (the epoll
/// modification, or joining the set, reports it at once if the socket drained in between, so no
/// wake-up is lost).
fn watch_writes(epoll: &Epoll, slot: &mut Slot, token: u64) -> io::Result<()> {
    slot.can_write = false;
    match slot.watched {
        Watched::NotYet { .. } => slot.watched = Watched::NotYet { writes: true },
        Watched::Input => {
            epoll.modify(slot.fd.as_fd(), token, Interest::BOTH.edge())?;
            slot.watched = Watched::InputAndOutput;
        }
        Watched::InputAndOutput => {}
    }
    Ok(())
}

/// Read what the socket has (up to a turn's worth) into the connection, through the loop's
/// one read buffer. Returns whether anything changed (bytes or end of input).
fn read_input(slot: &mut Slot, scratch: &mut [u8]) -> io::Result<bool> {
    let mut changed = false;
    let mut total = 0;
    while slot.can_read && slot.conn.wants_input() && total < 4 * READ_CHUNK {
        match sysio::read(slot.fd.as_fd(), scratch) {
            Ok(0) => {
                slot.conn.peer_finished();
                slot.can_read = false;
                return Ok(true);
            }
            Ok(count) => {
                slot.conn.receive(&scratch[..count]);
                total += count;
                changed = true;
                if count < scratch.len() {
                    // A short read means the socket is drained (stream sockets): skip the
                    // read that would only say EAGAIN; edge-triggered epoll reports new data.
                    slot.can_read = false;
                }
            }
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => slot.can_read = false,
            Err(error) => return Err(error),
        }
    }
    Ok(changed)
}
