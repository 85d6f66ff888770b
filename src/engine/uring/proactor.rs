//! One io_uring proactor: a ring, its listener, its connections, helpers and caches, under
//! `ops::Control` like an event loop (its waker is polled by the ring).
//!
//! Owns: the connection slab, the operations each connection has in flight (at most one
//! receive, one send or splice), and turning completions into `Conn` progress.
//! Lifecycle, timeouts and counters are in `proactor/lifecycle.rs`, sending in `proactor/send.rs`.
//! Must not touch: HTTP (`conn`), ring memory (`ampd_sys::uring`).

use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ampd_sys::uring::{Completion, OpId, Ring};
use ampd_sys::{errno, socket};

use crate::config::Level;
use crate::conn::{Conn, Context, Ending, Need, Phase};
use crate::content::budget::CacheBudget;
use crate::content::caches::Caches;
use crate::content::job::{Job, JobDone};
use crate::content::serve::DiskAccess;
use crate::engine::helpers::{Helpers, PoolSize, Token};
use crate::engine::phase_clock::PhaseClock;
use crate::log::clock::Clock;
use crate::log::error::Throttle;
use crate::ops::admission::Ticket;
use crate::ops::{Control, LoopLink};
use crate::site::Generation;

pub const RING_ENTRIES: u32 = 1024;
/// Provided buffers: received data is copied out of them at once, so a few hundred serve
/// thousands of connections.
pub const BUFFER_COUNT: u16 = 256;
pub const BUFFER_SIZE: usize = 16 << 10;

/// Tags of the ring-wide operations; connection tags are `generation << 32 | index << 3 | kind`.
const ACCEPT: u64 = u64::MAX;
const HELPERS: u64 = u64::MAX - 1;
const INOTIFY: u64 = u64::MAX - 2;
const WAKER: u64 = u64::MAX - 3;
const RECEIVE: u64 = 0;
const SEND: u64 = 1;
const SPLICE_IN: u64 = 2;
const SPLICE_OUT: u64 = 3;

/// Most bytes one send or splice moves, so one fast client of a large file cannot starve the rest.
const SEND_CHUNK: usize = 256 << 10;
/// Pipe capacity for splicing file data.
const PIPE_SIZE: usize = 256 << 10;
/// Received-but-unparsed input past which receiving pauses (a client that sends faster than it
/// reads cannot make us buffer without bound).
const INPUT_HIGH_WATER: usize = 256 << 10;
const SWEEP: Duration = Duration::from_millis(250);
const ACCEPT_PAUSE: Duration = Duration::from_millis(100);

/// What a connection is sending now.
enum Sending {
    Nothing,
    /// A `writev` of this many bytes of the output's front.
    Memory,
    /// File data on its way through the pipe: spliced in, not yet out.
    Splice {
        in_pipe: usize,
    },
}

struct Slot {
    fd: OwnedFd,
    conn: Conn,
    generation: u32,
    receive: Option<OpId>,
    sending: Sending,
    /// The send or splice in flight (cancelled if the connection is cut).
    send_op: Option<OpId>,
    /// `(read end, write end)`, made on the first file range.
    pipe: Option<(OwnedFd, OwnedFd)>,
    job_out: bool,
    /// The client closed its sending side (a receive returned end of stream).
    eof: bool,
    /// Write side shut; receiving and discarding until the client closes.
    lingering: bool,
    /// Scoreboard phase and timeouts.
    clock: PhaseClock,
    /// This connection's place in admission control's counts (given back on drop).
    _ticket: Ticket,
}

/// A `Context` for a connection, from the proactor's fields (a macro, so the borrows of the
/// fields stay separate from the borrow of the slot being driven).
macro_rules! context {
    ($self:ident) => {
        Context {
            config: &$self.generation.config,
            sites: &$self.generation.sites,
            caches: &$self.caches,
            clock: &$self.clock,
            disk: DiskAccess::Helpers,
            log: &mut $self.link.log,
            stats: &$self.link.stats,
            metrics: &$self.control.stats,
            upstreams: &$self.generation.upstreams,
            rates: &$self.control.rates,
            draining: $self.draining || $self.announcing,
        }
    };
}

// After the macro, which they use.
mod lifecycle;
mod send;

struct Proactor {
    name: String,
    control: Arc<Control>,
    generation: Arc<Generation>,
    epoch: u64,
    link: LoopLink,
    draining: bool,
    /// A graceful stop is announced (`drain_delay`): still accepting, answering as draining.
    announcing: bool,
    ring: Ring,
    /// `None` once a graceful stop began.
    listener: Option<OwnedFd>,
    accept_op: Option<OpId>,
    accept_paused_until: Option<Instant>,
    slots: Vec<Option<Box<Slot>>>,
    free: Vec<usize>,
    next_generation: u32,
    helpers: Helpers,
    caches: Caches,
    clock: Clock,
    ready: VecDeque<usize>,
    /// Send buffers given back by finished sends, for reuse.
    spare: Vec<Vec<u8>>,
    /// Pipes of closed connections whose splice is still in flight: dropping a pipe while the
    /// kernel's worker splices through it would block this thread until the splice ends, so it
    /// waits here for the operation's last completion (after the ring, in drop order).
    orphaned_pipes: Vec<(OpId, (OwnedFd, OwnedFd))>,
    last_sweep: Instant,
}

/// Run one proactor until a graceful stop has drained it (or a stop).
///
/// # Errors
/// The ring, helpers or listener cannot be set up, or waiting on the ring fails.
/// The ring's caches hold what `cache_budget` allows.
pub fn run(
    name: String,
    control: Arc<Control>,
    listener: OwnedFd,
    cache_budget: &CacheBudget,
) -> io::Result<()> {
    // Only the ring does I/O on it: blocking, so the kernel arms a poll rather than fail EAGAIN.
    socket::set_nonblocking(listener.as_fd(), false)?;
    let ring = Ring::new(RING_ENTRIES, BUFFER_COUNT, BUFFER_SIZE)?;
    let generation = control.current();
    let config = &generation.config;
    let helpers = Helpers::start(PoolSize::of(config), &name, config.helper_mode)?;
    let caches = Caches::new(&config.caches, 1, cache_budget);
    let link = control.join_loop()?;
    let mut proactor = Proactor {
        name,
        epoch: 0,
        link,
        draining: false,
        announcing: false,
        ring,
        listener: Some(listener),
        accept_op: None,
        accept_paused_until: None,
        slots: Vec::new(),
        free: Vec::new(),
        next_generation: 1,
        helpers,
        caches,
        clock: Clock::default(),
        ready: VecDeque::new(),
        spare: Vec::new(),
        orphaned_pipes: Vec::new(),
        last_sweep: Instant::now(),
        generation,
        control,
    };
    proactor.arm_accept();
    proactor
        .ring
        .poll_readable(proactor.helpers.wake_fd(), HELPERS)?;
    proactor
        .ring
        .poll_readable(proactor.link.waker.as_fd(), WAKER)?;
    if let Some(watcher) = &proactor.caches.watcher {
        proactor.ring.poll_readable(watcher.as_fd(), INOTIFY)?;
    }
    proactor.serve()
}

impl Proactor {
    fn serve(&mut self) -> io::Result<()> {
        let mut completions = Vec::with_capacity(256);
        loop {
            let wait = if self.ready.is_empty() {
                SWEEP
            } else {
                Duration::ZERO
            };
            self.ring.submit_and_wait(Some(wait))?;
            self.ring.completions(&mut completions);
            self.clock.tick();
            // Lifecycle before this batch, so a request received after the stop signal is
            // answered as draining (`Connection: close`, health 503).
            if !self.follow_lifecycle() {
                break;
            }
            // Changes on disk first: a request received in this batch may have been sent after
            // a change whose inotify completion sits later in the batch (one read when none).
            if completions
                .iter()
                .any(|done| done.tag == INOTIFY || done.received.is_some())
            {
                self.caches.on_change();
            }
            for completion in completions.drain(..) {
                self.complete(completion);
            }
            for _ in 0..self.ready.len() {
                if let Some(index) = self.ready.pop_front() {
                    self.drive(index);
                }
            }
            let now = Instant::now();
            if self.listener.is_some()
                && self.accept_op.is_none()
                && self.accept_paused_until.is_none_or(|until| now >= until)
            {
                self.accept_paused_until = None;
                self.arm_accept();
            }
            if now.duration_since(self.last_sweep) >= SWEEP {
                self.last_sweep = now;
                self.sweep(now);
            }
        }
        self.finish();
        Ok(())
    }

    fn arm_accept(&mut self) {
        let Some(listener) = self.listener.as_ref() else {
            return;
        };
        match self.ring.accept_multishot(listener.as_fd(), ACCEPT) {
            Ok(op) => self.accept_op = Some(op),
            Err(error) => {
                static UNARMED: Throttle = Throttle::new();
                UNARMED.log(
                    Level::Error,
                    format_args!("{}: cannot accept: {error}", self.name),
                );
            }
        }
    }

    fn tag(&self, index: usize, kind: u64) -> u64 {
        let generation = self.slots[index].as_ref().map_or(0, |slot| slot.generation);
        (u64::from(generation) << 32) | ((index as u64) << 3) | kind
    }

    fn slot_of(&self, tag: u64) -> Option<usize> {
        let index = ((tag & 0xffff_ffff) >> 3) as usize;
        let generation = (tag >> 32) as u32;
        match self.slots.get(index) {
            Some(Some(slot)) if slot.generation == generation => Some(index),
            _ => None,
        }
    }

    fn complete(&mut self, completion: Completion) {
        match completion.tag {
            ACCEPT => self.accepted(completion),
            HELPERS => {
                self.take_job_completions();
                if !completion.more {
                    let _ = self.ring.poll_readable(self.helpers.wake_fd(), HELPERS);
                }
            }
            WAKER => {
                self.link.waker.drain();
                if !completion.more {
                    let _ = self.ring.poll_readable(self.link.waker.as_fd(), WAKER);
                }
            }
            INOTIFY => {
                if !completion.more {
                    if let Some(watcher) = &self.caches.watcher {
                        let _ = self.ring.poll_readable(watcher.as_fd(), INOTIFY);
                    }
                }
            }
            tag => {
                let Some(index) = self.slot_of(tag) else {
                    // A closed connection's late completion: give its buffer back, and its
                    // pipe once nothing splices through it any more.
                    if let Some(received) = completion.received {
                        self.ring.take_received(received, |_| {});
                    }
                    if !completion.more {
                        self.orphaned_pipes.retain(|(op, _)| *op != completion.op);
                    }
                    return;
                };
                match tag & 0b111 {
                    RECEIVE => self.received(index, completion),
                    SEND => self.sent(index, completion),
                    SPLICE_IN => self.spliced_in(index, completion.result),
                    _ => self.spliced_out(index, completion.result),
                }
            }
        }
    }

    fn accepted(&mut self, completion: Completion) {
        if let Some(fd) = completion.accepted {
            self.admit(fd);
        } else if errno::out_of_resources_errno(-completion.result) {
            // Out of descriptors or memory: pause, clients wait in the backlog.
            let error = io::Error::from_raw_os_error(-completion.result);
            super::super::accept_exhausted(&error, &self.caches);
            self.accept_paused_until = Some(Instant::now() + ACCEPT_PAUSE);
        }
        if !completion.more {
            self.accept_op = None;
        }
    }

    /// Admission control, then a slot and a receive for a new connection.
    fn admit(&mut self, fd: OwnedFd) {
        // TCP_NODELAY comes from the listener (see `engine::bind`).
        let Ok(peer) = socket::peer_addr(fd.as_fd()) else {
            return;
        };
        let admitted =
            crate::engine::admit(&self.control, &self.generation, &self.link.stats, peer.ip());
        let Some((conn, ticket)) = admitted else {
            return;
        };
        let index = self.free.pop().unwrap_or_else(|| {
            self.slots.push(None);
            self.slots.len() - 1
        });
        let generation = self.next_generation;
        self.next_generation = self.next_generation.wrapping_add(1).max(1);
        self.slots[index] = Some(Box::new(Slot {
            fd,
            conn,
            generation,
            receive: None,
            sending: Sending::Nothing,
            send_op: None,
            pipe: None,
            job_out: false,
            eof: false,
            lingering: false,
            clock: PhaseClock::opened(&self.link.stats, Instant::now()),
            _ticket: ticket,
        }));
        self.arm_receive(index);
    }

    fn arm_receive(&mut self, index: usize) {
        let tag = self.tag(index, RECEIVE);
        let Some(slot) = self.slots[index].as_mut() else {
            return;
        };
        if slot.receive.is_some() {
            return;
        }
        match self.ring.receive_multishot(slot.fd.as_fd(), tag) {
            Ok(op) => slot.receive = Some(op),
            Err(_) => self.close(index),
        }
    }

    fn received(&mut self, index: usize, completion: Completion) {
        let Some(slot) = self.slots[index].as_mut() else {
            return;
        };
        if !completion.more {
            slot.receive = None;
        }
        if let Some(received) = completion.received {
            let lingering = slot.lingering;
            let conn = &mut slot.conn;
            self.ring.take_received(received, |bytes| {
                if !lingering {
                    conn.receive(bytes);
                }
            });
        }
        match completion.result {
            0 => {
                if slot.lingering {
                    return self.close(index);
                }
                slot.eof = true;
                slot.conn.peer_finished();
            }
            // Out of provided buffers: the data waits in the socket; receive again next turn.
            -105 => {}
            result if result < 0 => {
                if slot.receive.is_none() && result != -125 {
                    return self.close(index);
                }
            }
            _ => {
                let phase = slot.conn.phase();
                slot.clock.note(phase, true, &self.link.stats);
            }
        }
        self.ready.push_back(index);
    }

    fn take_job_completions(&mut self) {
        let mut completions: Vec<(Token, JobDone)> = Vec::new();
        self.helpers.completed(&mut completions);
        for (token, done) in completions {
            let Some(index) = self.slot_of(token) else {
                continue;
            };
            let next = {
                let slot = self.slots[index].as_mut().expect("slot_of checked it");
                slot.job_out = false;
                let mut context = context!(self);
                slot.conn.job_done(done, &mut context)
            };
            match next {
                Some(job) => self.submit(index, job),
                None => self.ready.push_back(index),
            }
        }
    }

    fn submit(&mut self, index: usize, job: Job) {
        let token = self.tag(index, RECEIVE);
        if let Some(slot) = self.slots[index].as_mut() {
            slot.job_out = true;
        }
        self.helpers.submit(token, job);
    }

    /// Let a connection decide on what it has, start sending what it queued, and keep its
    /// receive armed while it wants input.
    pub(super) fn drive(&mut self, index: usize) {
        let Some(slot) = self.slots[index].as_mut() else {
            return;
        };
        if slot.lingering || slot.job_out || !matches!(slot.sending, Sending::Nothing) {
            return;
        }
        let need = {
            let mut context = context!(self);
            slot.conn.advance(&mut context)
        };
        let need = match need {
            Need::Job(job) => {
                self.submit(index, job);
                Need::Wait
            }
            other => other,
        };
        self.note_phase(index, false);
        // Everything the requests received so far produced goes out in one send; its
        // completion drives the connection again (for the next pipelined requests too).
        if !self.start_send(index) {
            return;
        }
        let drained = self.drained(index);
        let Some(slot) = self.slots[index].as_mut() else {
            return;
        };
        let sending = !matches!(slot.sending, Sending::Nothing);
        match need {
            Need::Close(ending) if !sending && slot.conn.output.is_empty() => {
                // Nothing more from the client: a plain close, its FIN follows the response.
                if ending == Ending::Close && slot.conn.buffered_input() == 0 {
                    return self.close(index);
                }
                self.begin_close(index);
            }
            // Its response is out and a drain is under way: nothing more comes of it.
            Need::Read if drained => self.begin_close(index),
            Need::Read => {
                let wanted =
                    slot.conn.wants_input() && slot.conn.buffered_input() < INPUT_HIGH_WATER;
                if wanted && slot.receive.is_none() {
                    self.arm_receive(index);
                } else if !wanted && slot.conn.buffered_input() >= INPUT_HIGH_WATER {
                    if let Some(op) = slot.receive {
                        let _ = self.ring.cancel(op);
                    }
                }
            }
            _ => {}
        }
    }

    fn note_phase(&mut self, index: usize, progressed: bool) {
        if let Some(slot) = self.slots[index].as_mut() {
            let phase = slot.conn.phase();
            slot.clock.note(phase, progressed, &self.link.stats);
        }
    }

    /// The response is out and the connection must end: FIN after the data, then discard
    /// input until the client closes (lingering close).
    pub(super) fn begin_close(&mut self, index: usize) {
        let Some(slot) = self.slots[index].as_mut() else {
            return;
        };
        if slot.eof {
            // The client already closed its side (end of stream seen): nothing to drain.
            let _ = socket::shutdown_write(slot.fd.as_fd());
            return self.close(index);
        }
        if socket::shutdown_write(slot.fd.as_fd()).is_err() {
            return self.close(index);
        }
        slot.lingering = true;
        slot.clock.note(Phase::Closing, false, &self.link.stats);
        self.arm_receive(index);
    }

    /// Drop the connection. Operations still in flight on it are cancelled; their completions
    /// carry a stale generation and are ignored (the ring keeps their memory until they end).
    pub(super) fn close(&mut self, index: usize) {
        if let Some(mut slot) = self.slots[index].take() {
            if let Some(op) = slot.send_op {
                // A send or splice blocked on a slow reader ends at once (EPIPE), rather than
                // keep the socket open until the client has read it all.
                let _ = socket::shutdown_both(slot.fd.as_fd());
                if let Some(pipe) = slot.pipe.take() {
                    self.orphaned_pipes.push((op, pipe));
                }
            }
            for op in [slot.receive, slot.send_op].into_iter().flatten() {
                let _ = self.ring.cancel(op);
            }
            slot.clock.closed(&self.link.stats);
            drop(slot);
            self.free.push(index);
        }
    }
}
