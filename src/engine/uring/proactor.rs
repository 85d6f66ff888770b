//! One io_uring proactor: a ring, its listener, its connections, helpers and caches, under
//! `ops::Control` like an event loop (its waker is polled by the ring).
//!
//! Owns: the connection slab, the operations each connection has in flight (at most one
//! receive, one send or poll for room), and turning completions into `Conn` progress.
//! Lifecycle, timeouts and counters are in `proactor/lifecycle.rs`, sending in `proactor/send.rs`.
//! Must not touch: HTTP (`conn`), ring memory (`ampd_sys::uring`).

use std::collections::VecDeque;
use std::io;
use std::os::fd::AsFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ampd_sys::uring::{Completion, OpId, Ring};
use ampd_sys::{errno, socket};

use crate::config::Level;
use crate::conn::Need;
use crate::content::budget::CacheBudget;
use crate::content::caches::Caches;
use crate::content::file::FileKey;
use crate::content::job::{Job, JobDone};
use crate::content::sink::DiskAccess;
use crate::engine::client::{Accepted, Client};
use crate::engine::core::{self, Core, Driver};
use crate::engine::event_loop::PagesInFlight;
use crate::engine::helpers::{Helpers, PoolSize, Token};
use crate::engine::listener::{Endpoint, Listener};
use crate::engine::slab::{Kind, Slab};
use crate::log::error::Throttle;
use crate::ops::Control;

pub const RING_ENTRIES: u32 = 1024;
/// Provided buffers: received data is copied out of them at once, so a few hundred serve
/// thousands of connections.
pub const BUFFER_COUNT: u16 = 256;
pub const BUFFER_SIZE: usize = 16 << 10;

/// Tags of the ring-wide operations; a connection's operations are tagged with its slab token
/// (`engine::slab`), whose kind says which operation completed.
const HELPERS: u64 = u64::MAX - 1;
const INOTIFY: u64 = u64::MAX - 2;
const WAKER: u64 = u64::MAX - 3;
/// The first listener's accept; the next ones count down from it (a slab's tokens stay far
/// below).
const ACCEPT: u64 = u64::MAX - 4;

/// Most bytes one send (or one turn's `sendfile`s) moves, so one fast client of a large file
/// cannot starve the rest.
const SEND_CHUNK: usize = 256 << 10;
/// Received-but-unparsed input past which receiving pauses (a client that sends faster than it
/// reads cannot make us buffer without bound).
const INPUT_HIGH_WATER: usize = 256 << 10;
const SWEEP: Duration = Duration::from_millis(250);

/// What a connection is sending now.
enum Sending {
    Nothing,
    /// A poll for room in the socket, which the ring thread's `sendmsg` or `sendfile` filled.
    Room,
    /// TLS records (the output was sealed into them already).
    Records,
}

/// A connection in the proactor's slab.
pub(crate) type Slot = core::Slot<InFlight>;

/// The operations a connection has in flight on the ring, besides its `Client`.
pub(crate) struct InFlight {
    receive: Option<OpId>,
    sending: Sending,
    /// The send or poll for room in flight (cancelled if the connection is cut).
    send_op: Option<OpId>,
    /// The polls in flight on the connection's upstream sockets, one per socket at most.
    upstream_polls: Vec<upstream::UpstreamPoll>,
    /// The range this connection's last page-in made resident (see the event loop's
    /// `page_in_job`).
    paged_in: Option<(FileKey, u64)>,
}

mod lifecycle;
mod send;
mod upstream;

struct Proactor {
    name: String,
    /// What every connection shares (generation, caches, clock, link, control, drain state).
    core: Core,
    ring: Ring,
    /// One per `listen` entry; none once a graceful stop began.
    listeners: Vec<Listener>,
    /// What the listeners were, by accept tag: an accept cancelled by the drain still
    /// completes with connections, which are served.
    endpoints: Vec<Endpoint>,
    /// Each listener's multishot accept, while armed.
    accept_ops: Vec<Option<OpId>>,
    slots: Slab<Slot>,
    helpers: Helpers,
    ready: VecDeque<usize>,
    /// Send buffers given back by finished sends, for reuse.
    spare: Vec<Vec<u8>>,
    /// Files the rings' helpers are paging in: their pages count as cached before they are
    /// read, so a residency test cannot vouch for them (`engine::event_loop::page_ins`).
    pages_in_flight: Arc<PagesInFlight>,
}

/// Run one proactor until a graceful stop has drained it (or a stop).
///
/// # Errors
/// The ring, helpers or listener cannot be set up, or waiting on the ring fails.
/// The ring's caches hold what `cache_budget` allows.
pub fn run(
    name: String,
    control: Arc<Control>,
    listeners: Vec<Listener>,
    cache_budget: &CacheBudget,
    pages_in_flight: Arc<PagesInFlight>,
) -> io::Result<()> {
    // Only the ring does I/O on it: blocking, so the kernel arms a poll rather than fail EAGAIN.
    for listener in &listeners {
        socket::set_nonblocking(listener.as_fd(), false)?;
    }
    let ring = Ring::new(RING_ENTRIES, BUFFER_COUNT, BUFFER_SIZE)?;
    let generation = control.current();
    let config = &generation.config;
    let helpers = Helpers::start(PoolSize::of(config), &name, config.helper_mode)?;
    let caches = Caches::new(&config.caches, 1, cache_budget);
    let link = control.join_loop()?;
    let mut proactor = Proactor {
        name,
        core: Core::new(control, link, caches, DiskAccess::Helpers),
        ring,
        endpoints: listeners.iter().map(Listener::endpoint).collect(),
        accept_ops: vec![None; listeners.len()],
        listeners,
        slots: Slab::default(),
        helpers,
        ready: VecDeque::new(),
        spare: Vec::new(),
        pages_in_flight,
    };
    proactor.arm_accept();
    proactor
        .ring
        .poll_readable(proactor.helpers.wake_fd(), HELPERS)?;
    proactor
        .ring
        .poll_readable(proactor.core.link.waker.as_fd(), WAKER)?;
    if let Some(watcher) = &proactor.core.caches.watcher {
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
            self.core.clock.tick();
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
                self.core.caches.on_change();
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
            if self
                .accept_ops
                .iter()
                .zip(&self.listeners)
                .any(|(op, _)| op.is_none())
                && self.core.accept_pause.over(now)
            {
                self.arm_accept();
            }
            if self.core.sweep_due(now, SWEEP) {
                self.sweep_idle(now);
            }
        }
        self.finish();
        Ok(())
    }

    /// Arm a multishot accept on every listener that has none.
    fn arm_accept(&mut self) {
        for (which, listener) in self.listeners.iter().enumerate() {
            if self.accept_ops[which].is_some() {
                continue;
            }
            match self
                .ring
                .accept_multishot(listener.as_fd(), ACCEPT - which as u64)
            {
                Ok(op) => self.accept_ops[which] = Some(op),
                Err(error) => {
                    static UNARMED: Throttle = Throttle::new();
                    UNARMED.log(
                        Level::Error,
                        format_args!("{}: cannot accept: {error}", self.name),
                    );
                }
            }
        }
    }

    fn tag(&self, index: usize, kind: Kind) -> u64 {
        self.slots.token(index, kind)
    }

    fn complete(&mut self, completion: Completion) {
        match completion.tag {
            tag if tag <= ACCEPT && ACCEPT - tag < self.endpoints.len() as u64 => {
                self.accepted((ACCEPT - tag) as usize, completion);
            }
            HELPERS => {
                self.take_job_completions();
                if !completion.more {
                    let _ = self.ring.poll_readable(self.helpers.wake_fd(), HELPERS);
                }
            }
            WAKER => {
                self.core.link.waker.drain();
                if !completion.more {
                    let _ = self.ring.poll_readable(self.core.link.waker.as_fd(), WAKER);
                }
            }
            INOTIFY => {
                if !completion.more {
                    if let Some(watcher) = &self.core.caches.watcher {
                        let _ = self.ring.poll_readable(watcher.as_fd(), INOTIFY);
                    }
                }
            }
            tag => {
                let Some((index, kind)) = self.slots.resolve(tag) else {
                    // A closed connection's late completion: give its buffer back.
                    if let Some(received) = completion.received {
                        self.ring.take_received(received, |_| {});
                    }
                    return;
                };
                match kind {
                    Kind::Connection => self.received(index, completion),
                    Kind::Send => self.sent(index, completion),
                    Kind::Writable => self.writable(index, completion.result),
                    Kind::Upstream => self.upstream_polled(index, &completion),
                }
            }
        }
    }

    fn accepted(&mut self, which: usize, completion: Completion) {
        let door = self.core.door();
        let accepted = match completion.accepted {
            // TCP_NODELAY comes from the listener (see `engine::bind`). Admission needs the
            // peer's address, which a multishot accept does not report.
            Some(fd) => match socket::peer_addr(fd.as_fd()) {
                Ok(peer) => door.admit(fd, peer, self.endpoints[which]),
                Err(_) => Accepted::Skipped,
            },
            None => door.accept_failed(&io::Error::from_raw_os_error(-completion.result)),
        };
        match accepted {
            Accepted::Client(client) => self.admit(*client),
            // Out of descriptors or memory: pause, clients wait in the backlog.
            Accepted::Exhausted => self.core.accept_pause.begin(Instant::now()),
            Accepted::Empty | Accepted::Skipped => {}
        }
        if !completion.more {
            self.accept_ops[which] = None;
        }
    }

    /// A slot and a receive for a new connection.
    fn admit(&mut self, client: Client) {
        let slot = Slot {
            client,
            io: InFlight {
                receive: None,
                sending: Sending::Nothing,
                send_op: None,
                upstream_polls: Vec::new(),
                paged_in: None,
            },
        };
        // A full slab (2^24 connections) cannot happen before descriptors run out.
        if let Some(index) = self.slots.insert(slot) {
            self.arm_receive(index);
        }
    }

    fn arm_receive(&mut self, index: usize) {
        let tag = self.tag(index, Kind::Connection);
        let Some(slot) = self.slots.get_mut(index) else {
            return;
        };
        if slot.io.receive.is_some() {
            return;
        }
        match self.ring.receive_multishot(slot.client.fd.as_fd(), tag) {
            Ok(op) => slot.io.receive = Some(op),
            Err(_) => self.close(index),
        }
    }

    fn received(&mut self, index: usize, completion: Completion) {
        let Some(slot) = self.slots.get_mut(index) else {
            return;
        };
        if !completion.more {
            slot.io.receive = None;
        }
        if let Some(received) = completion.received {
            let lingering = slot.client.lingering;
            let Client { conn, tls, .. } = &mut slot.client;
            self.ring.take_received(received, |bytes| {
                if lingering {
                    return;
                }
                match tls.as_mut() {
                    // An ending (alert, plain-HTTP answer) is seen by `drive`.
                    Some(tls) => {
                        tls.receive(bytes, conn);
                    }
                    None => conn.receive(bytes),
                }
            });
        }
        match completion.result {
            0 => {
                if slot.client.lingering {
                    return self.close(index);
                }
                slot.client.eof = true;
                slot.client.conn.peer_finished();
            }
            // Out of provided buffers: the data waits in the socket; receive again next turn.
            result if errno::no_provided_buffer(result) => {}
            result if result < 0 => {
                if slot.io.receive.is_none() && !errno::cancelled(result) {
                    return self.close(index);
                }
            }
            _ => {
                let phase = slot.client.conn.phase();
                slot.client
                    .clock
                    .note(phase, true, self.core.clock.now(), &self.core.link.stats);
            }
        }
        self.ready.push_back(index);
    }

    fn take_job_completions(&mut self) {
        let mut completions: Vec<(Token, JobDone)> = Vec::new();
        self.helpers.completed(&mut completions);
        for (token, done) in completions {
            if let JobDone::PagedIn { key, .. } = done {
                self.pages_in_flight.finished(key);
            }
            let Some((index, _)) = self.slots.resolve(token) else {
                continue;
            };
            if let JobDone::PagedIn { key, end, .. } = done {
                // A file range, touched (`send_file`, `start_send_tls`): send it now.
                if let Some(slot) = self.slots.get_mut(index) {
                    slot.client.job_out = false;
                    slot.io.paged_in = Some((key, end));
                }
                self.ready.push_back(index);
                continue;
            }
            match self.job_done(index, done) {
                Some(job) => self.submit(index, job),
                None => self.ready.push_back(index),
            }
        }
    }

    fn submit(&mut self, index: usize, job: Job) {
        let token = self.tag(index, Kind::Connection);
        if let Some(slot) = self.slots.get_mut(index) {
            slot.client.job_out = true;
        }
        self.helpers.submit(token, job);
    }

    /// Let a connection decide on what it has, start sending what it queued, and keep its
    /// receive armed while it wants input.
    pub(super) fn drive(&mut self, index: usize) {
        let Some(slot) = self.slots.get_mut(index) else {
            return;
        };
        if slot.client.lingering
            || slot.client.job_out
            || !matches!(slot.io.sending, Sending::Nothing)
        {
            return;
        }
        let pumped = self.pump_upstream(index);
        let need = loop {
            let Some(slot) = self.slots.get_mut(index) else {
                return;
            };
            let need = slot.client.conn.advance(&mut self.core.context());
            self.settle_upstream(index);
            match need {
                Need::Connect(link, connect) => {
                    // Then `advance` again: it queues the request, which `watch_upstream`
                    // sends on its way (at once on a socket connected already).
                    self.connect_upstream(index, link, &connect);
                }
                Need::Job(job) => {
                    self.submit(index, job);
                    break Need::Wait;
                }
                other => break other,
            }
        };
        self.note_phase(index, pumped);
        // Everything the requests received so far produced goes out from here until the
        // socket is full; a poll for room drives the connection again.
        if !self.start_send(index) {
            return;
        }
        let drained = self.drained(index);
        let Some(slot) = self.slots.get_mut(index) else {
            return;
        };
        let sending = !matches!(slot.io.sending, Sending::Nothing);
        let tls_waits = slot.client.tls_waits();
        if slot.client.tls_ending() {
            if !sending && !tls_waits {
                self.begin_close(index);
            }
            return;
        }
        match need {
            Need::Close(ending) if !sending && !tls_waits && slot.client.conn.output.is_empty() => {
                self.end(index, ending);
            }
            // The output drained from this thread, with no completion to drive the connection
            // on: the requests behind the backlog go now.
            Need::Flush
                if !sending && !slot.client.job_out && slot.client.conn.output.is_empty() =>
            {
                self.ready.push_back(index);
            }
            // Its response is out and a drain is under way: nothing more comes of it.
            Need::Read if drained => self.begin_close(index),
            Need::Read => {
                let wanted = slot.client.conn.wants_input()
                    && slot.client.conn.buffered_input() < INPUT_HIGH_WATER;
                if wanted && slot.io.receive.is_none() {
                    self.arm_receive(index);
                } else if !wanted && slot.client.conn.buffered_input() >= INPUT_HIGH_WATER {
                    if let Some(op) = slot.io.receive {
                        let _ = self.ring.cancel(op);
                    }
                }
            }
            _ => {}
        }
        self.watch_upstream(index);
    }

    fn note_phase(&mut self, index: usize, progressed: bool) {
        if let Some(slot) = self.slots.get_mut(index) {
            let phase = slot.client.conn.phase();
            slot.client.clock.note(
                phase,
                progressed,
                self.core.clock.now(),
                &self.core.link.stats,
            );
        }
    }

    /// Take the connection out of the slab. Operations still in flight on it are cancelled;
    /// their completions carry a stale generation and are ignored (the ring keeps their memory
    /// until they end).
    fn remove_slot(&mut self, index: usize) -> Option<Slot> {
        let slot = self.slots.remove(index)?;
        {
            if slot.io.send_op.is_some() {
                // A send blocked on a slow reader ends at once (EPIPE), rather than keep the
                // socket open until the client has read it all.
                let _ = socket::shutdown_both(slot.client.fd.as_fd());
            }
            let upstream_polls = slot.io.upstream_polls.iter().map(|poll| Some(poll.op()));
            for op in [slot.io.receive, slot.io.send_op]
                .into_iter()
                .chain(upstream_polls)
                .flatten()
            {
                let _ = self.ring.cancel(op);
            }
        }
        Some(slot)
    }
}
