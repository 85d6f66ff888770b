//! A client connection as every engine holds it, and the steps every engine takes with it in
//! the same way: accepting and admitting it (`Door`), the sweep's verdict on its timeouts
//! (`Client::verdict`), and whether a graceful drain may close it (`Client::drain_may_close`).
//!
//! Owns: those decisions. Must not touch: how an engine waits, reads, writes or closes (the
//! engine carries out what the verdicts say), HTTP (`conn`).

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsFd, OwnedFd};
use std::time::{Duration, Instant};

use ampd_sys::{errno, io as sysio, socket};

use super::listener::{Endpoint, Listener};
use super::phase_clock::{Expired, PhaseClock};
use super::upstream::Upstream;
use crate::config::{Level, Limits};
use crate::conn::{Conn, Phase};
use crate::content::caches::Caches;
use crate::log::error::Throttle;
use crate::log::stats::{LoopStats, ProxyRefusal, Shed};
use crate::ops::admission::{Admit, Ticket};
use crate::ops::Control;
use crate::site::Generation;
use crate::tls::TlsSession;

/// An admitted client connection: its socket, its state machine, its scoreboard phase and
/// timeouts, and its place in admission control's counts.
#[derive(Debug)]
pub struct Client {
    pub fd: OwnedFd,
    pub conn: Conn,
    /// Scoreboard phase and timeouts.
    pub clock: PhaseClock,
    /// A job (or page-in) is out for this connection: no request timeout runs meanwhile.
    pub job_out: bool,
    /// Write side shut; input is read and discarded until the client closes (lingering close).
    pub lingering: bool,
    /// The client ended its stream (a read returned end of stream): nothing to linger for.
    pub eof: bool,
    /// The upstream sockets it drives besides its client socket (`Need::Connect`), one per
    /// link; closed with the connection, never pooled then.
    pub upstreams: Vec<Upstream>,
    /// Given back to admission control when the connection is dropped.
    pub ticket: Ticket,
    /// The connection's TLS (accepted on a TLS listener): the engine reads and writes through
    /// it (`tls::session`).
    pub tls: Option<Box<TlsSession>>,
    /// When an unfinished handshake is cut (`[tls] handshake_timeout`): a client that opens
    /// a TLS connection and stalls holds no slot for longer (slowloris on the handshake).
    pub handshake_deadline: Option<Instant>,
}

/// What the sweep does with a connection past one of its limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// A request head or body had begun: `Conn::timed_out` (a `408`), then close.
    AnswerTimeout,
    /// A response stalled or moved too slowly: reset.
    Reset,
    /// Idle too long, or a lingering close the client never finished: close.
    Close,
    /// The exchange's upstream timeout ran out (`Conn::upstream_deadline`):
    /// `Conn::upstream_timed_out`, then the connection decides (a `504`, or another server).
    UpstreamTimedOut,
}

impl Client {
    /// Whether the connection is past a limit at `now` (`PhaseClock::check`), and what follows.
    /// The upstream's deadline first: while the connection waits on its upstream the client
    /// phase sets none (`Phase::Upstream`).
    pub fn verdict(&mut self, now: Instant, limits: &Limits) -> Option<Verdict> {
        if self.handshake_due().is_some_and(|deadline| now >= deadline) {
            return Some(Verdict::Close);
        }
        if self
            .conn
            .upstream_deadline()
            .is_some_and(|deadline| now >= deadline)
        {
            return Some(Verdict::UpstreamTimedOut);
        }
        Some(match self.clock.check(now, limits, self.job_out)? {
            Expired::Request => Verdict::AnswerTimeout,
            Expired::Sending => Verdict::Reset,
            // An idle HTTP/2 connection says GOAWAY before it closes (RFC 9113 §6.8).
            Expired::Quietly if self.conn.speaks_http2() => Verdict::AnswerTimeout,
            Expired::Quietly => Verdict::Close,
        })
    }

    /// What a readiness report says of the upstream socket of link `link` (a slab link index),
    /// if the connection still has it.
    pub fn upstream_ready(&mut self, link: usize, readable: bool, writable: bool, hangup: bool) {
        let socket = self
            .upstreams
            .iter_mut()
            .find(|socket| socket.link.index() == link);
        if let Some(socket) = socket {
            socket.ready(readable, writable, hangup);
        }
    }

    /// When its handshake is cut, while one is under way.
    #[must_use]
    pub fn handshake_due(&self) -> Option<Instant> {
        self.handshake_deadline
            .filter(|_| self.tls.as_ref().is_some_and(|tls| tls.is_handshaking()))
    }

    /// TLS bytes (records, an alert, the plain-HTTP answer) wait to be written.
    #[must_use]
    pub fn tls_waits(&self) -> bool {
        self.tls.as_ref().is_some_and(|tls| tls.wants_write())
    }

    /// The TLS session is ending (an alert, the plain-HTTP answer, the end of an ACME
    /// validation): nothing more is served; once `tls_waits` is false the connection closes.
    #[must_use]
    pub fn tls_ending(&self) -> bool {
        self.tls.as_ref().is_some_and(|tls| tls.ending().is_some())
    }

    /// End the connection's side, the way every engine does once its last response is out:
    /// upstream sockets still attached close (the exchanges are over or abandoned), TLS says
    /// `close_notify` (without waiting: a client that stopped reading does not get it), and a
    /// FIN follows the data. Returns whether the close lingers (input is then read and
    /// discarded until the client closes, so unread request bytes do not turn the close into
    /// a reset that destroys the response in flight); `false`: close now, the client ended its
    /// stream already (nothing to drain) or the socket is gone.
    pub fn shut(&mut self, now: Instant, stats: &LoopStats) -> bool {
        self.upstreams.clear();
        self.send_close_notify();
        let shut = socket::shutdown_write(self.fd.as_fd()).is_ok();
        if !shut || self.eof {
            return false;
        }
        self.lingering = true;
        self.clock.note(Phase::Closing, false, now, stats);
        true
    }

    /// `close_notify`, sent without waiting (whether the socket blocks or not).
    fn send_close_notify(&mut self) {
        let Some(tls) = self.tls.as_mut() else {
            return;
        };
        tls.close();
        let mut notify = Vec::new();
        tls.take_ciphertext(&mut notify, 1 << 10);
        if !notify.is_empty() {
            let _ = sysio::send(
                self.fd.as_fd(),
                &notify,
                sysio::MSG_NOSIGNAL | sysio::MSG_DONTWAIT,
            );
        }
    }

    /// Write what `Conn` queued (memory: a `408`, a GOAWAY) once, without waiting; whether all
    /// of it went out. A client too slow to take it gets what fits.
    pub fn write_now(&mut self, scratch: &mut [u8]) -> bool {
        let fd = self.fd.as_fd();
        let flags = sysio::MSG_NOSIGNAL | sysio::MSG_DONTWAIT;
        match self.tls.as_mut() {
            Some(tls) => {
                if tls.seal(&mut self.conn.output, scratch).is_err() {
                    return false;
                }
                let mut records = Vec::new();
                tls.take_ciphertext(&mut records, usize::MAX);
                let sent = sysio::send(fd, &records, flags);
                sent.is_ok_and(|sent| sent == records.len()) && self.conn.output.is_empty()
            }
            None => {
                let slices = self.conn.output.memory_slices();
                let pending: usize = slices.iter().map(|slice| slice.len()).sum();
                let sent = sysio::send_vectored(fd, &slices, flags);
                drop(slices);
                match sent {
                    Ok(sent) => {
                        self.conn.output.advance(sent as u64);
                        self.clock.sent(sent as u64);
                        sent == pending && self.conn.output.is_empty()
                    }
                    Err(_) => false,
                }
            }
        }
    }

    /// Read and discard what the lingering client still sends, without waiting: `true` once
    /// it closed (or the socket failed), `false` while it may send more.
    pub fn linger_read(&mut self, scratch: &mut [u8]) -> bool {
        loop {
            match sysio::read(self.fd.as_fd(), scratch) {
                Ok(0) => return true,
                Ok(_) => {}
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => return false,
                Err(_) => return true,
            }
        }
    }

    /// The coming close resets the connection (`SO_LINGER` 0): what is still queued for the
    /// client is discarded.
    pub fn reset_on_close(&self) {
        let _ = socket::set_linger(self.fd.as_fd(), Some(Duration::ZERO));
    }

    /// Whether a graceful drain may close the connection now: idle between requests with
    /// nothing in flight (`busy`: the engine still moves bytes for it), or quiet since it was
    /// accepted for `FIRST_REQUEST_GRACE` (`PhaseClock::drain_may_close`).
    #[must_use]
    pub fn drain_may_close(&self, busy: bool, now: Instant) -> bool {
        self.conn.phase() == Phase::Idle
            && !busy
            && !self.job_out
            && !self.lingering
            && self.upstreams.is_empty()
            && self.clock.drain_may_close(self.conn.has_answered(), now)
    }
}

/// The outcome of one `accept`: an admitted client (`C`: as the engine holds it).
pub enum Accepted<C = Box<Client>> {
    Client(C),
    /// The backlog is empty.
    Empty,
    /// Nothing to serve this time (refused far over a cap, or the client gave up).
    Skipped,
    /// Out of descriptors or memory: the caller pauses accepting (clients wait in the backlog).
    Exhausted,
}

impl<C> Accepted<C> {
    /// The same outcome, with the admitted client made into what the engine holds.
    pub fn map<D>(self, make: impl FnOnce(C) -> D) -> Accepted<D> {
        match self {
            Accepted::Client(client) => Accepted::Client(make(client)),
            Accepted::Empty => Accepted::Empty,
            Accepted::Skipped => Accepted::Skipped,
            Accepted::Exhausted => Accepted::Exhausted,
        }
    }
}

/// What admitting a connection needs from the engine that accepts it.
pub struct Door<'a> {
    pub control: &'a Control,
    pub generation: &'a Generation,
    /// The accepting loop's or thread's scoreboard slot.
    pub stats: &'a LoopStats,
    /// Relieved when descriptors run out (`accept_exhausted`).
    pub caches: &'a Caches,
}

impl Door<'_> {
    /// Accept one connection from `listener` and admit it.
    pub fn accept(&self, listener: &Listener) -> Accepted {
        match socket::accept(listener.as_fd()) {
            Ok((fd, peer)) => self.admit(fd, peer, listener.endpoint()),
            Err(error) => self.accept_failed(&error),
        }
    }

    /// Admission control for a socket from `peer` accepted on `listener` (`admit`): a
    /// `Client` (with its TLS session on a TLS listener), or `Skipped` (closed at once).
    pub fn admit(&self, fd: OwnedFd, peer: SocketAddr, listener: Endpoint) -> Accepted {
        let tls = match (listener.tls, &self.generation.tls) {
            (false, _) => None,
            (true, Some(context)) => Some(Box::new(TlsSession::new(context.clone()))),
            // A TLS listener outlived every TLS setting (a reload cannot remove them: the
            // generation is built with the listeners' settings); nothing to answer with.
            (true, None) => return Accepted::Skipped,
        };
        match admit(self.control, self.generation, self.stats, peer.ip()) {
            Some((mut conn, ticket)) => {
                conn.set_peer_port(peer.port());
                conn.set_listener(listener.local, listener.tls);
                if listener.h2c {
                    conn.accept_prior_knowledge();
                }
                let now = Instant::now();
                let handshake_deadline = tls
                    .is_some()
                    .then(|| now + self.generation.config.tls.handshake_timeout);
                Accepted::Client(Box::new(Client {
                    fd,
                    conn,
                    clock: PhaseClock::opened(self.stats, now),
                    job_out: false,
                    lingering: false,
                    eof: false,
                    upstreams: Vec::new(),
                    ticket,
                    tls,
                    handshake_deadline,
                }))
            }
            None => Accepted::Skipped,
        }
    }

    /// What a failed `accept` means. Out of descriptors or memory (`EMFILE`, `ENFILE`,
    /// `ENOBUFS`, `ENOMEM`): pause rather than spin on a listener that stays readable (see
    /// `accept_exhausted`). Other errors (the client gave up between SYN and accept, a signal)
    /// just move on to the next connection.
    pub fn accept_failed(&self, error: &io::Error) -> Accepted {
        if error.kind() == io::ErrorKind::WouldBlock {
            Accepted::Empty
        } else if errno::out_of_resources(error) {
            accept_exhausted(error, self.caches);
            Accepted::Exhausted
        } else {
            Accepted::Skipped
        }
    }
}

/// `accept` failed for want of descriptors or memory (the caller pauses accepting, and clients
/// wait in the backlog): out of descriptors, the caches close the older half of their files so
/// that accepting can resume; either way the error log says so, at most once per interval.
fn accept_exhausted(error: &io::Error, caches: &Caches) {
    static NO_MEMORY: Throttle = Throttle::new();
    if errno::out_of_descriptors(error) {
        caches.relieve("accept");
    } else {
        NO_MEMORY.log(
            Level::Error,
            format_args!("accept: {error}; accepting pauses"),
        );
    }
}

/// What admission control says about a new connection from `peer`, counted on `stats`: its
/// `Conn` (one that answers `503` if it came in over a cap) and its place in the counts, or
/// `None` to close it at once (far over a cap, or not a trusted balancer where the PROXY
/// protocol is on: only `proxy_protocol_from` may say who the client is).
///
/// Under the PROXY protocol, `peer` is the balancer: the client's address is known only once
/// the connection's header has been read, after admission, so the per-address connection cap
/// counts connections per balancer (the access rules and request-rate limits, checked per
/// request, use the client's).
#[must_use]
fn admit(
    control: &Control,
    generation: &Generation,
    stats: &LoopStats,
    peer: IpAddr,
) -> Option<(Conn, Ticket)> {
    static REFUSED: Throttle = Throttle::new();
    static DROPPED: Throttle = Throttle::new();
    let config = &generation.config;
    if !config.proxy_protocol.admits(peer) {
        crate::conn::proxy_header::refused(
            stats,
            ProxyRefusal::Untrusted,
            peer,
            "not in proxy_protocol_from",
        );
        return None;
    }
    let limits = &config.admission;
    let cap = |why: Shed| match why {
        Shed::Connections => match control.admission.cap(limits) {
            cap if cap < limits.max_connections => format!(
                "the connection cap {cap} (max_connections = {}, lowered for RLIMIT_NOFILE)",
                limits.max_connections
            ),
            _ => format!("max_connections = {}", limits.max_connections),
        },
        Shed::Address => format!(
            "max_connections_per_address = {}",
            limits.max_connections_per_address
        ),
        Shed::Rate => "requests_per_second".to_owned(),
    };
    match control.admission.admit(peer, limits) {
        Admit::Yes(ticket) => Some((Conn::new(config, peer), ticket)),
        Admit::Refuse(ticket, why) => {
            stats.shed(why);
            REFUSED.log(
                Level::Warn,
                format_args!(
                    "connection from {peer} refused with 503: over {} ({} open)",
                    cap(why),
                    control.admission.open()
                ),
            );
            Some((Conn::refusing(config, peer), ticket))
        }
        Admit::Drop(why) => {
            stats.shed(why);
            stats.dropped(why);
            DROPPED.log(
                Level::Warn,
                format_args!(
                    "connection from {peer} dropped unanswered: far over {} ({} open)",
                    cap(why),
                    control.admission.open()
                ),
            );
            None
        }
    }
}
