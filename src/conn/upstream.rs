//! The connection's second endpoint: the upstream socket a proxied exchange talks to, seen from
//! the sans-I/O side. The engine owns the descriptor, connects it, and moves bytes; `Conn` says
//! what to write, takes what was read, and decides (AFPA's "remote response").
//!
//! Owns: the contract every engine follows (`Need::Connect`, the `upstream_*` calls,
//! `take_upstream_release`) and the link's bookkeeping (bytes to write, bytes read, when it last
//! moved, how it ended).
//! Must not touch: sockets, the pools' shared state (`crate::upstream`); what the bytes mean is
//! the proxy exchange's (`proxy/`).

use std::cell::Cell;
use std::fmt;
use std::io;
use std::os::fd::OwnedFd;
use std::time::{Duration, Instant};

use super::Conn;
use crate::config::UpstreamAddress;

/// What `Need::Connect` asks the engine to attach.
#[derive(Debug)]
pub enum Connect {
    /// A connection to an upstream server.
    Server {
        address: UpstreamAddress,
        /// An idle keep-alive connection to `address` from the loop's pool may be used.
        reuse: bool,
    },
    /// A program started for this request (a CGI script): the engine makes a connected pair
    /// of unix stream sockets, attaches one (connected at once) and hands the other to
    /// `ProgramStart::start`, which makes it the program's standard input and output (as
    /// Apache's mod_cgid does): one descriptor both ways, the end of the request body a
    /// half-close (`upstream_output_ended`), the end of the response the program's exit.
    Program(ProgramStart),
}

/// Starts a program on the far end of its socket pair; it must not block (it queues the start
/// to a thread of its own: `crate::programs`).
pub struct ProgramStart(Cell<Option<StartProgram>>);

type StartProgram = Box<dyn FnOnce(OwnedFd) + Send>;

impl ProgramStart {
    pub fn new(start: impl FnOnce(OwnedFd) + Send + 'static) -> ProgramStart {
        ProgramStart(Cell::new(Some(Box::new(start))))
    }

    /// Hand `stdio` to the program (once; a second call drops it, closing it).
    pub fn start(&self, stdio: OwnedFd) {
        if let Some(start) = self.0.take() {
            start(stdio);
        }
    }
}

impl fmt::Debug for ProgramStart {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("ProgramStart")
    }
}

/// Which of a connection's upstream links an engine call is about. An HTTP/1 connection runs
/// one exchange at a time: link 0 (`FIRST`). An HTTP/2 connection gives each stream that talks
/// to an upstream a link of its own, at most `[http2] max_upstream_streams` at once
/// (`h2::Session`), so a slow upstream holds back only its own stream.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct LinkId(u8);

impl LinkId {
    /// The one link of an HTTP/1 connection.
    pub const FIRST: LinkId = LinkId(0);
    /// Links one connection may hold at once (`[http2] max_upstream_streams` at most).
    pub const LIMIT: usize = crate::config::http2::MAX_UPSTREAM_STREAMS;

    /// The link numbered `index`, if it is below `LIMIT`.
    #[must_use]
    pub fn from_index(index: usize) -> Option<LinkId> {
        u8::try_from(index)
            .ok()
            .filter(|_| index < LinkId::LIMIT)
            .map(LinkId)
    }

    #[must_use]
    pub fn index(self) -> usize {
        usize::from(self.0)
    }
}

/// How the engine provided the upstream socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Opened {
    /// A new socket; its `connect` may still be in progress (`upstream_connected` follows).
    Fresh,
    /// An idle pooled connection, connected and checked alive.
    Reused,
}

/// What the engine does with an upstream socket the connection is done with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Release {
    /// The exchange ended cleanly on a persistent connection: keep it in the loop's idle pool
    /// under its address (at most `keepalive` per address, for `keepalive_timeout`).
    Keep { keepalive: usize, timeout: Duration },
    /// Close it.
    Close,
}

/// How the upstream connection failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Failure {
    /// No socket could be made, or `connect` failed (refused, unreachable, no such socket).
    Connect(io::ErrorKind),
    /// No socket could be made because the process (`EMFILE`) or the system (`ENFILE`) has no
    /// descriptor left: ampd's passing state, not the upstream's fault.
    OutOfDescriptors,
    /// Reading or writing failed (reset, broken pipe).
    Io(io::ErrorKind),
    /// The upstream closed before the response was complete.
    Closed,
    /// A timeout of the exchange ran out.
    TimedOut,
}

/// Timeouts of one attempt, from its pool.
#[derive(Debug, Clone, Copy)]
pub(super) struct Timeouts {
    pub connect: Duration,
    pub send: Duration,
    pub read: Duration,
}

/// Largest buffer a connection keeps from one upstream link for the next.
const KEPT_BUFFER: usize = 16 << 10;

/// A link's two buffers, kept for the next link (lent by the loop between turns, as
/// `conn::Spare`'s others).
#[derive(Debug, Default)]
pub(super) struct Buffers {
    out: Vec<u8>,
    input: Vec<u8>,
}

impl Buffers {
    /// Whether they hold no memory.
    pub(super) fn is_empty(&self) -> bool {
        self.out.capacity() == 0 && self.input.capacity() == 0
    }
}

/// The connection's view of its upstream socket.
#[derive(Debug)]
pub(super) struct Link {
    pub opened: Opened,
    pub connected: bool,
    pub timeouts: Timeouts,
    /// Bytes to write: `out[sent..]`.
    pub out: Vec<u8>,
    pub sent: usize,
    /// Bytes read and not yet used.
    pub input: Vec<u8>,
    /// The upstream closed its side.
    pub finished: bool,
    pub failure: Option<Failure>,
    /// When the link was opened, or bytes last moved on it.
    pub moved: Instant,
    /// When the last byte queued so far was written (or the link was opened): once the whole
    /// request is queued, when it had all gone out.
    pub drained: Instant,
    /// Bytes read from the upstream in all.
    pub received: u64,
    /// Nothing more will be queued: once `out` is written, the engine shuts down the write
    /// side (a program's standard input reaches its end).
    pub output_ended: bool,
}

impl Link {
    /// A link whose buffers are `spare` (those of the connection's previous link, emptied).
    pub(super) fn new(opened: Opened, timeouts: Timeouts, now: Instant, spare: Buffers) -> Link {
        Link {
            opened,
            connected: opened == Opened::Reused,
            timeouts,
            out: spare.out,
            sent: 0,
            input: spare.input,
            finished: false,
            failure: None,
            moved: now,
            drained: now,
            received: 0,
            output_ended: false,
        }
    }

    /// Its buffers, emptied, for the next link (a proxied keep-alive client then allocates
    /// none per request); large ones are let go, so an upload or a burst does not keep memory.
    pub(super) fn into_buffers(self) -> Buffers {
        let keep = |mut buffer: Vec<u8>| {
            if buffer.capacity() > KEPT_BUFFER {
                Vec::new()
            } else {
                buffer.clear();
                buffer
            }
        };
        Buffers {
            out: keep(self.out),
            input: keep(self.input),
        }
    }

    /// Bytes queued for the upstream and not yet written.
    pub(super) fn pending(&self) -> usize {
        self.out.len() - self.sent
    }

    /// Queue bytes for the upstream, reclaiming what was already written.
    pub(super) fn queue(&mut self) -> &mut Vec<u8> {
        if self.sent == self.out.len() {
            self.out.clear();
            self.sent = 0;
        }
        &mut self.out
    }
}

impl Conn {
    /// The `Conn` whose exchange link `link` belongs to: this one under HTTP/1 (one exchange
    /// at a time, link 0); under HTTP/2 the inner `Conn` of the stream the session gave the
    /// link to (`h2::Session`), or none if no stream holds it.
    fn link_owner(&self, link: LinkId) -> Option<&Conn> {
        match &self.state {
            super::State::Http2(session) => session.linked(link),
            _ => Some(self),
        }
    }

    fn link_owner_mut(&mut self, link: LinkId) -> Option<&mut Conn> {
        if !matches!(self.state, super::State::Http2(_)) {
            return Some(self);
        }
        match &mut self.state {
            super::State::Http2(session) => session.linked_mut(link),
            _ => None,
        }
    }

    fn proxy_opened(&mut self, opened: Opened, now: Instant) {
        if let Some(timeouts) = self.awaiting_link.take() {
            let spare = std::mem::take(&mut self.link_buffers);
            self.link = Some(Link::new(opened, timeouts, now, spare));
        }
    }

    fn proxy_open_failed(&mut self, error: &io::Error) {
        if self.awaiting_link.take().is_some() {
            self.open_failure = Some(if ampd_sys::errno::out_of_descriptors(error) {
                Failure::OutOfDescriptors
            } else {
                Failure::Connect(error.kind())
            });
        }
    }

    /// The engine attached an upstream socket as `link` after `Need::Connect`.
    pub fn upstream_opened(&mut self, link: LinkId, opened: Opened) {
        if let Some(owner) = self.link_owner_mut(link) {
            owner.proxy_opened(opened, Instant::now());
        }
    }

    /// A fresh socket's `connect` completed.
    pub fn upstream_connected(&mut self, link: LinkId) {
        if let Some(link) = self
            .link_owner_mut(link)
            .and_then(|owner| owner.link.as_mut())
        {
            link.connected = true;
            link.moved = Instant::now();
        }
    }

    /// Bytes to write to the upstream on `link` now (empty: nothing, for now).
    #[must_use]
    pub fn upstream_output(&self, link: LinkId) -> &[u8] {
        self.link_owner(link)
            .and_then(|owner| owner.link.as_ref())
            .filter(|link| link.connected && link.failure.is_none())
            .map_or(&[][..], |link| &link.out[link.sent..])
    }

    /// Whether the bytes of `upstream_output` are the last: once they are written, the engine
    /// shuts down the socket's write side (once).
    #[must_use]
    pub fn upstream_output_ended(&self, link: LinkId) -> bool {
        self.link_owner(link)
            .and_then(|owner| owner.link.as_ref())
            .is_some_and(|link| link.output_ended)
    }

    /// `count` bytes of `upstream_output` were written.
    pub fn upstream_sent(&mut self, link: LinkId, count: usize) {
        if let Some(link) = self
            .link_owner_mut(link)
            .and_then(|owner| owner.link.as_mut())
        {
            link.sent = (link.sent + count).min(link.out.len());
            if count > 0 {
                link.moved = Instant::now();
                if link.pending() == 0 {
                    link.drained = link.moved;
                }
            }
        }
    }

    /// Whether reading from the upstream on `link` is useful now (false: nothing is expected,
    /// or the client is slower than the upstream and its output is full: backpressure).
    #[must_use]
    pub fn upstream_wants_input(&self, link: LinkId) -> bool {
        self.link_owner(link)
            .is_some_and(Conn::proxy_reads_upstream)
    }

    /// Bytes read from the upstream on `link`.
    pub fn upstream_receive(&mut self, link: LinkId, bytes: &[u8]) {
        if let Some(link) = self
            .link_owner_mut(link)
            .and_then(|owner| owner.link.as_mut())
        {
            link.input.extend_from_slice(bytes);
            link.received += bytes.len() as u64;
            if !bytes.is_empty() {
                link.moved = Instant::now();
            }
        }
    }

    /// The upstream on `link` closed its side (a read returned 0).
    pub fn upstream_finished(&mut self, link: LinkId) {
        if let Some(link) = self
            .link_owner_mut(link)
            .and_then(|owner| owner.link.as_mut())
        {
            link.finished = true;
        }
    }

    /// Connecting, reading or writing the upstream socket of `link` failed, or (with no socket
    /// attached after `Need::Connect`) no socket could be made.
    pub fn upstream_failed(&mut self, link: LinkId, error: &io::Error) {
        let Some(owner) = self.link_owner_mut(link) else {
            return;
        };
        match owner.link.as_mut() {
            Some(link) => {
                let failure = if link.connected {
                    Failure::Io(error.kind())
                } else {
                    Failure::Connect(error.kind())
                };
                link.failure.get_or_insert(failure);
            }
            None => owner.proxy_open_failed(error),
        }
    }

    /// When the earliest of the exchanges' current timeouts runs out: connecting, the upstream
    /// taking request bytes, or sending response bytes (for an HTTP upstream's head, counted
    /// from the end of the request: `proxy_read_deadline`). `None` while nothing is awaited
    /// from an upstream (the client is slow: its own send timeout governs).
    #[must_use]
    pub fn upstream_deadline(&self) -> Option<Instant> {
        match &self.state {
            super::State::Http2(session) => session.upstream_deadline(),
            _ => self.exchange_deadline(),
        }
    }

    /// This `Conn`'s own exchange's deadline (see `upstream_deadline`).
    pub(super) fn exchange_deadline(&self) -> Option<Instant> {
        let link = self.link.as_ref()?;
        if link.failure.is_some() {
            return None;
        }
        if !link.connected {
            return Some(link.moved + link.timeouts.connect);
        }
        if link.pending() > 0 {
            return Some(link.moved + link.timeouts.send);
        }
        self.proxy_reads_upstream()
            .then(|| self.proxy_read_deadline(link))
    }

    /// The engine saw `upstream_deadline` pass: every exchange whose deadline has passed
    /// fails with a timeout (the others go on).
    pub fn upstream_timed_out(&mut self) {
        let now = Instant::now();
        match &mut self.state {
            super::State::Http2(session) => session.upstream_timed_out(now),
            _ => self.exchange_timed_out(),
        }
    }

    /// This `Conn`'s own exchange timed out.
    pub(super) fn exchange_timed_out(&mut self) {
        if let Some(link) = self.link.as_mut() {
            link.failure.get_or_insert(Failure::TimedOut);
        }
    }

    /// An upstream socket the connection is done with, once per socket: pool it or close it.
    /// The engine takes every one (until `None`) after each `advance`, `job_done` or
    /// `timed_out`, before it carries out a `Need::Connect`: the link a socket was released
    /// from may be handed to another exchange in the same `advance`.
    pub fn take_upstream_release(&mut self) -> Option<(LinkId, Release)> {
        if let super::State::Http2(session) = &mut self.state {
            return session.take_release();
        }
        if let Some(ended) = self.ended_links.pop() {
            return Some(ended);
        }
        self.release.take().map(|release| (LinkId::FIRST, release))
    }

    /// Whether an upstream socket is attached (the engine watches it).
    #[must_use]
    pub fn has_upstream(&self) -> bool {
        match &self.state {
            super::State::Http2(session) => session.has_upstream(),
            _ => self.link.is_some(),
        }
    }
}
