//! One io_uring proactor: a ring, its listener, its connections, helpers and caches.
//!
//! Owns: the connection slab, the operations each connection has in flight (at most one
//! receive, one send or splice), timeouts, and turning completions into `Conn` progress.
//! Must not touch: HTTP (`conn`), ring memory (`ampd_sys::uring`).

use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ampd_sys::socket;
use ampd_sys::uring::{Completion, OpId, Ring};

use crate::config::Config;
use crate::conn::{Conn, Context, Ending, Need, Phase};
use crate::content::caches::Caches;
use crate::content::job::JobDone;
use crate::content::resolve::DocRoot;
use crate::content::serve::DiskAccess;
use crate::engine::blocking::DateClock;
use crate::engine::helpers::{Helpers, Token};

mod send;

pub const RING_ENTRIES: u32 = 1024;
/// Provided buffers: received data is copied out of them at once, so a few hundred serve
/// thousands of connections.
pub const BUFFER_COUNT: u16 = 256;
pub const BUFFER_SIZE: usize = 16 << 10;

/// Tags of the ring-wide operations; connection tags are `generation << 32 | index << 3 | kind`.
const ACCEPT: u64 = u64::MAX;
const HELPERS: u64 = u64::MAX - 1;
const INOTIFY: u64 = u64::MAX - 2;
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
    /// `(read end, write end)`, made on the first file range.
    pipe: Option<(OwnedFd, OwnedFd)>,
    job_out: bool,
    /// The client closed its sending side (a receive returned end of stream).
    eof: bool,
    /// Write side shut; receiving and discarding until the client closes.
    lingering: bool,
    phase: Phase,
    phase_since: Instant,
}

struct Proactor {
    name: String,
    config: Arc<Config>,
    root: Arc<DocRoot>,
    ring: Ring,
    listener: OwnedFd,
    accept_armed: bool,
    accept_paused_until: Option<Instant>,
    slots: Vec<Option<Box<Slot>>>,
    free: Vec<usize>,
    next_generation: u32,
    helpers: Helpers,
    caches: Caches,
    date: DateClock,
    ready: VecDeque<usize>,
    /// Send buffers given back by finished sends, for reuse.
    spare: Vec<Vec<u8>>,
    last_sweep: Instant,
}

/// Run one proactor until the process ends.
///
/// # Errors
/// The ring, helpers or listener cannot be set up, or waiting on the ring fails.
pub fn run(
    name: String,
    config: Arc<Config>,
    root: Arc<DocRoot>,
    listener: OwnedFd,
) -> io::Result<()> {
    // Only the ring does I/O on it: blocking, so the kernel arms a poll rather than fail EAGAIN.
    socket::set_nonblocking(listener.as_fd(), false)?;
    let ring = Ring::new(RING_ENTRIES, BUFFER_COUNT, BUFFER_SIZE)?;
    let helpers = Helpers::start(config.helpers, &name, config.helper_mode)?;
    let caches = Caches::new(&config.caches, 1);
    let mut proactor = Proactor {
        name,
        root,
        ring,
        listener,
        accept_armed: false,
        accept_paused_until: None,
        slots: Vec::new(),
        free: Vec::new(),
        next_generation: 1,
        helpers,
        caches,
        date: DateClock::new(),
        ready: VecDeque::new(),
        spare: Vec::new(),
        last_sweep: Instant::now(),
        config,
    };
    proactor.arm_accept();
    proactor
        .ring
        .poll_readable(proactor.helpers.wake_fd(), HELPERS)?;
    if let Some(watcher) = &proactor.caches.watcher {
        proactor.ring.poll_readable(watcher.as_fd(), INOTIFY)?;
    }
    proactor.serve()
}

impl Proactor {
    fn serve(&mut self) -> io::Result<()> {
        let mut completions = Vec::with_capacity(256);
        loop {
            // The one place a stop or drain check belongs: stop re-arming accept here.
            let wait = if self.ready.is_empty() {
                SWEEP
            } else {
                Duration::ZERO
            };
            self.ring.submit_and_wait(Some(wait))?;
            self.ring.completions(&mut completions);
            self.date.tick();
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
            if !self.accept_armed && self.accept_paused_until.is_none_or(|until| now >= until) {
                self.accept_paused_until = None;
                self.arm_accept();
            }
            if now.duration_since(self.last_sweep) >= SWEEP {
                self.last_sweep = now;
                self.sweep(now);
            }
        }
    }

    fn arm_accept(&mut self) {
        match self.ring.accept_multishot(self.listener.as_fd(), ACCEPT) {
            Ok(_) => self.accept_armed = true,
            Err(error) => eprintln!("ampd: {}: cannot accept: {error}", self.name),
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
            INOTIFY => {
                if !completion.more {
                    if let Some(watcher) = &self.caches.watcher {
                        let _ = self.ring.poll_readable(watcher.as_fd(), INOTIFY);
                    }
                }
            }
            tag => {
                let Some(index) = self.slot_of(tag) else {
                    // A closed connection's late completion: give its buffer back.
                    if let Some(received) = completion.received {
                        self.ring.take_received(received, |_| {});
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
            if let Err(error) = self.admit(fd) {
                eprintln!("ampd: {}: cannot register connection: {error}", self.name);
            }
        } else if matches!(-completion.result, 23 | 24 | 105 | 12) {
            // Out of descriptors or memory: pause, clients wait in the backlog.
            self.accept_paused_until = Some(Instant::now() + ACCEPT_PAUSE);
        }
        if !completion.more {
            self.accept_armed = false;
        }
    }

    fn admit(&mut self, fd: OwnedFd) -> io::Result<()> {
        // TCP_NODELAY comes from the listener (see `engine::bind`).
        let index = self.free.pop().unwrap_or_else(|| {
            self.slots.push(None);
            self.slots.len() - 1
        });
        let generation = self.next_generation;
        self.next_generation = self.next_generation.wrapping_add(1).max(1);
        self.slots[index] = Some(Box::new(Slot {
            fd,
            conn: Conn::new(&self.config),
            generation,
            receive: None,
            sending: Sending::Nothing,
            pipe: None,
            job_out: false,
            eof: false,
            lingering: false,
            phase: Phase::Idle,
            phase_since: Instant::now(),
        }));
        self.arm_receive(index);
        Ok(())
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
                slot.phase_since = Instant::now();
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
                let mut context = Context {
                    config: &self.config,
                    root: &self.root,
                    caches: &self.caches,
                    date: self.date.tick(),
                    disk: DiskAccess::Helpers,
                };
                slot.conn.job_done(done, &mut context)
            };
            match next {
                Some(job) => {
                    let token = self.tag(index, RECEIVE);
                    if let Some(slot) = self.slots[index].as_mut() {
                        slot.job_out = true;
                    }
                    self.helpers.submit(token, job);
                }
                None => self.ready.push_back(index),
            }
        }
    }

    /// Let a connection decide on what it has, start sending what it queued, and keep its
    /// receive armed while it wants input.
    fn drive(&mut self, index: usize) {
        let token = self.tag(index, RECEIVE);
        let Some(slot) = self.slots[index].as_mut() else {
            return;
        };
        if slot.lingering || slot.job_out || !matches!(slot.sending, Sending::Nothing) {
            return;
        }
        let need = {
            let mut context = Context {
                config: &self.config,
                root: &self.root,
                caches: &self.caches,
                date: self.date.tick(),
                disk: DiskAccess::Helpers,
            };
            slot.conn.advance(&mut context)
        };
        let need = match need {
            Need::Job(job) => {
                slot.job_out = true;
                self.helpers.submit(token, job);
                Need::Wait
            }
            other => other,
        };
        self.note_phase(index);
        // Everything the requests received so far produced goes out in one send; its
        // completion drives the connection again (for the next pipelined requests too).
        if !self.start_send(index) {
            return;
        }
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

    fn note_phase(&mut self, index: usize) {
        if let Some(slot) = self.slots[index].as_mut() {
            let phase = slot.conn.phase();
            if phase != slot.phase {
                slot.phase = phase;
                slot.phase_since = Instant::now();
            }
        }
    }

    /// The response is out and the connection must end: FIN after the data, then discard
    /// input until the client closes (lingering close).
    fn begin_close(&mut self, index: usize) {
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
        slot.phase = Phase::Closing;
        slot.phase_since = Instant::now();
        self.arm_receive(index);
    }

    /// Drop the connection. Operations still in flight on it are cancelled; their completions
    /// carry a stale generation and are ignored (the ring keeps their memory until they end).
    fn close(&mut self, index: usize) {
        if let Some(slot) = self.slots[index].take() {
            if let Some(op) = slot.receive {
                let _ = self.ring.cancel(op);
            }
            drop(slot);
            self.free.push(index);
        }
    }

    /// Apply each connection's phase timeout.
    fn sweep(&mut self, now: Instant) {
        let limits = self.config.limits.clone();
        let mut expired = Vec::new();
        for (index, slot) in self.slots.iter_mut().enumerate() {
            let Some(slot) = slot else { continue };
            let idle = now.saturating_duration_since(slot.phase_since);
            if slot.phase == Phase::Idle && idle >= SWEEP {
                slot.conn.shed_buffers();
            }
            let limit = match slot.phase {
                Phase::Idle => limits.keepalive_timeout,
                Phase::Head | Phase::Busy if !slot.job_out => limits.header_timeout,
                Phase::Head | Phase::Busy => continue,
                Phase::Sending => limits.send_timeout,
                Phase::Closing => limits.linger_timeout,
            };
            if idle >= limit {
                expired.push((index, slot.phase));
            }
        }
        for (index, phase) in expired {
            if phase == Phase::Head {
                if let Some(slot) = self.slots[index].as_mut() {
                    let context = Context {
                        config: &self.config,
                        root: &self.root,
                        caches: &self.caches,
                        date: self.date.tick(),
                        disk: DiskAccess::Helpers,
                    };
                    slot.conn.timed_out(&context);
                    slot.phase = Phase::Closing;
                    slot.phase_since = now;
                }
                // The 408 goes out, then the connection closes (bounded by the linger timeout).
                self.drive(index);
            } else {
                self.close(index);
            }
        }
    }
}
