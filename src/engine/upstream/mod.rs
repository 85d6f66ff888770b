//! The upstream endpoint: the sockets a connection drives to upstream servers besides its
//! client socket (one per link: an HTTP/1 connection's one exchange, or each HTTP/2 stream
//! that talks to an upstream), the same in every engine. `Conn` stays sans-I/O
//! (`conn::upstream` has its side of the contract); this module opens a socket (`open`: from
//! the idle pool or a non-blocking `connect`), moves bytes between it and `Conn` (`pump.rs`),
//! and takes it back when `Conn` is done with it (`release`: into the pool or closed).
//!
//! Owns: the upstream descriptors and what may be done on each now. Must not touch: how an engine
//! waits for readiness (epoll, `poll`, io_uring: each engine sets the readiness hints and
//! watches what `Upstream::wants` says), HTTP (`conn`).

mod pool;
mod pump;

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::time::Instant;

use ampd_sys::socket;

use crate::config::UpstreamAddress;
use crate::conn::{Conn, Connect, LinkId, Opened, ProgramStart, Release};
pub use pool::IdlePool;
pub use pump::pump;

/// The side of `Conn` that speaks to its upstream sockets (`conn::upstream`'s contract), as the
/// pump and `open` use it, each call about one link: a trait so that they can be tested against
/// a recording endpoint.
pub trait Endpoint {
    fn upstream_opened(&mut self, link: LinkId, opened: Opened);
    fn upstream_connected(&mut self, link: LinkId);
    fn upstream_output(&self, link: LinkId) -> &[u8];
    fn upstream_sent(&mut self, link: LinkId, count: usize);
    fn upstream_output_ended(&self, link: LinkId) -> bool;
    fn upstream_wants_input(&self, link: LinkId) -> bool;
    fn upstream_receive(&mut self, link: LinkId, bytes: &[u8]);
    fn upstream_finished(&mut self, link: LinkId);
    fn upstream_failed(&mut self, link: LinkId, error: &io::Error);
    fn take_upstream_release(&mut self) -> Option<(LinkId, Release)>;
}

impl Endpoint for Conn {
    fn upstream_opened(&mut self, link: LinkId, opened: Opened) {
        Conn::upstream_opened(self, link, opened);
    }
    fn upstream_connected(&mut self, link: LinkId) {
        Conn::upstream_connected(self, link);
    }
    fn upstream_output(&self, link: LinkId) -> &[u8] {
        Conn::upstream_output(self, link)
    }
    fn upstream_sent(&mut self, link: LinkId, count: usize) {
        Conn::upstream_sent(self, link, count);
    }
    fn upstream_output_ended(&self, link: LinkId) -> bool {
        Conn::upstream_output_ended(self, link)
    }
    fn upstream_wants_input(&self, link: LinkId) -> bool {
        Conn::upstream_wants_input(self, link)
    }
    fn upstream_receive(&mut self, link: LinkId, bytes: &[u8]) {
        Conn::upstream_receive(self, link, bytes);
    }
    fn upstream_finished(&mut self, link: LinkId) {
        Conn::upstream_finished(self, link);
    }
    fn upstream_failed(&mut self, link: LinkId, error: &io::Error) {
        Conn::upstream_failed(self, link, error);
    }
    fn take_upstream_release(&mut self) -> Option<(LinkId, Release)> {
        Conn::take_upstream_release(self)
    }
}

/// An upstream socket attached to a connection.
#[derive(Debug)]
pub struct Upstream {
    pub fd: OwnedFd,
    /// The connection's link it serves (`Need::Connect`).
    pub link: LinkId,
    /// The server's address (the idle pool's key); `None` for a program's socket, which is
    /// never pooled.
    address: Option<UpstreamAddress>,
    /// A non-blocking `connect` is still in progress.
    connecting: bool,
    /// Readiness hints: a read or write may succeed without waiting. Set by the engine from
    /// its readiness events (epoll, `poll`, an io_uring poll); cleared by the pump on `EAGAIN`.
    pub can_read: bool,
    pub can_write: bool,
    /// A readiness event reported a hang-up or an error: the end of stream (or the error) is
    /// there to be read after the data, and edge-triggered epoll will not report it again, so
    /// reading goes on past a short read until it is found.
    hung_up: bool,
    /// The upstream closed its side (a read returned 0).
    finished: bool,
    /// Our write side is shut down (`Endpoint::upstream_output_ended`).
    write_shut: bool,
    /// Connecting, reading or writing failed: nothing more is tried on it.
    broken: bool,
    /// The engine's registration of the descriptor (the epoll token it is watched under; 0:
    /// none). It goes with the descriptor into the idle pool and back.
    pub registration: u64,
}

/// What an engine should wait for on an upstream socket.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Wants {
    pub read: bool,
    pub write: bool,
}

impl Wants {
    #[must_use]
    pub fn any(self) -> bool {
        self.read || self.write
    }
}

impl Upstream {
    fn new(
        fd: OwnedFd,
        link: LinkId,
        address: Option<UpstreamAddress>,
        connecting: bool,
    ) -> Upstream {
        Upstream {
            fd,
            link,
            address,
            connecting,
            // A socket connected already may be written (and read: nothing is lost by a
            // read that says EAGAIN, and edge-triggered epoll reports nothing already there).
            can_read: !connecting,
            can_write: !connecting,
            hung_up: false,
            finished: false,
            write_shut: false,
            broken: false,
            registration: 0,
        }
    }

    /// The engine's readiness event for this socket: `readable`, `writable`, or an error or
    /// hang-up (which the next read, write or connect check reports).
    pub fn ready(&mut self, readable: bool, writable: bool, error_or_hangup: bool) {
        self.can_read |= readable || error_or_hangup;
        self.can_write |= writable || error_or_hangup;
        self.hung_up |= error_or_hangup;
    }

    /// What to wait for: the connect's completion; writability while `Conn` has bytes for the
    /// upstream that the socket did not take; readability while `Conn` wants the upstream's
    /// bytes and none are known to be there. Nothing once broken or (for reading) finished.
    #[must_use]
    pub fn wants(&self, conn: &impl Endpoint) -> Wants {
        if self.broken {
            return Wants::default();
        }
        if self.connecting {
            return Wants {
                read: false,
                write: !self.can_write,
            };
        }
        Wants {
            read: !self.finished && !self.can_read && conn.upstream_wants_input(self.link),
            write: !self.can_write && !conn.upstream_output(self.link).is_empty(),
        }
    }

    /// Whether the pump could move bytes now without waiting (the engine then runs the
    /// connection again instead of waiting for an event).
    #[must_use]
    pub fn can_move(&self, conn: &impl Endpoint) -> bool {
        if self.broken {
            return false;
        }
        if self.connecting {
            return self.can_write;
        }
        (self.can_write && !conn.upstream_output(self.link).is_empty())
            || (self.can_read && !self.finished && conn.upstream_wants_input(self.link))
    }

    /// Whether it can go back to the idle pool: a server's, connected, nothing failed, both
    /// directions still open.
    fn reusable(&self) -> bool {
        self.address.is_some()
            && !self.connecting
            && !self.broken
            && !self.finished
            && !self.write_shut
    }
}

/// Carry out `Need::Connect` for `link`: an idle connection from `pool` when `connect.reuse`
/// allows (checked alive), else a new non-blocking socket whose `connect` is under way; `Conn`
/// is told which (`upstream_opened`, then `upstream_connected` at once if the connect completed
/// already), or why no socket could be made (`upstream_failed`: refused, no such unix socket,
/// out of descriptors). The socket returned is the connection's to watch (`attach`).
pub fn open(
    connect: &Connect,
    link: LinkId,
    conn: &mut impl Endpoint,
    pool: &mut IdlePool,
) -> Option<Upstream> {
    open_preferring(connect, link, conn, pool, 0)
}

/// `open`, preferring the idle connection registered as `preferred` (see
/// `IdlePool::take_preferring`).
pub fn open_preferring(
    connect: &Connect,
    link: LinkId,
    conn: &mut impl Endpoint,
    pool: &mut IdlePool,
    preferred: u64,
) -> Option<Upstream> {
    let (address, reuse) = match connect {
        Connect::Server { address, reuse } => (address, *reuse),
        Connect::Program(start) => return open_program(start, link, conn),
    };
    let now = Instant::now();
    if reuse {
        if let Some((fd, registration)) = pool.take_preferring(address, preferred, now) {
            conn.upstream_opened(link, Opened::Reused);
            let mut upstream = Upstream::new(fd, link, Some(address.clone()), false);
            upstream.registration = registration;
            // The pool found nothing to read on it: the response to come is what the next
            // readiness event reports, so no read is tried before then (one `read` that would
            // say EAGAIN per reused connection).
            upstream.can_read = false;
            return Some(upstream);
        }
    }
    let opened = match address {
        // No Nagle: a request head and the last piece of a body are written as they come,
        // and each would otherwise wait for the upstream's delayed ACK (up to 40 ms on Linux),
        // as nginx's `tcp_nodelay` avoids on its upstream keep-alive connections.
        UpstreamAddress::Tcp(address) => socket::connect_tcp_nonblocking(*address)
            .and_then(|fd| socket::set_nodelay(fd.as_fd(), true).map(|()| fd)),
        UpstreamAddress::Unix(path) => socket::connect_unix_nonblocking(path),
    };
    let fd = match opened {
        Ok(fd) => fd,
        Err(error) => {
            conn.upstream_failed(link, &error);
            return None;
        }
    };
    conn.upstream_opened(link, Opened::Fresh);
    let mut upstream = Upstream::new(fd, link, Some(address.clone()), true);
    match socket::connect_finished(upstream.fd.as_fd()) {
        Ok(true) => {
            upstream.connecting = false;
            upstream.can_read = true;
            upstream.can_write = true;
            conn.upstream_connected(link);
        }
        Ok(false) => {}
        Err(error) => {
            upstream.broken = true;
            conn.upstream_failed(link, &error);
        }
    }
    Some(upstream)
}

/// `Connect::Program`: a socket pair, one end attached (connected), the other (blocking, as a
/// program's standard streams are) handed to the program's start.
fn open_program(start: &ProgramStart, link: LinkId, conn: &mut impl Endpoint) -> Option<Upstream> {
    let pair = socket::socket_pair().and_then(|(ours, theirs)| {
        socket::set_nonblocking(theirs.as_fd(), false).map(|()| (ours, theirs))
    });
    let (ours, theirs) = match pair {
        Ok(pair) => pair,
        Err(error) => {
            conn.upstream_failed(link, &error);
            return None;
        }
    };
    start.start(theirs);
    conn.upstream_opened(link, Opened::Fresh);
    conn.upstream_connected(link);
    Some(Upstream::new(ours, link, None, false))
}

/// Attach `socket` to a connection's `attached` sockets. One still attached under the same
/// link is done with: closed (`Conn` released it, or broke the contract; either way it cannot
/// be trusted for another request).
pub fn attach(attached: &mut Vec<Upstream>, socket: Upstream) {
    detach(attached, socket.link);
    attached.push(socket);
}

/// The socket attached under `link`, taken out of `attached`.
pub fn detach(attached: &mut Vec<Upstream>, link: LinkId) -> Option<Upstream> {
    let at = attached.iter().position(|socket| socket.link == link)?;
    Some(attached.swap_remove(at))
}

/// Pump every attached socket (`pump`); whether anything moved on any.
pub fn pump_all(attached: &mut [Upstream], conn: &mut impl Endpoint, scratch: &mut [u8]) -> bool {
    let mut moved = false;
    for socket in attached {
        moved |= pump(socket, conn, scratch);
    }
    moved
}

/// Whether the pump could move bytes on any attached socket now (`Upstream::can_move`).
#[must_use]
pub fn any_can_move(attached: &[Upstream], conn: &impl Endpoint) -> bool {
    attached.iter().any(|socket| socket.can_move(conn))
}

/// After an `advance`, `job_done` or `timed_out`: every upstream socket `Conn` is done with is
/// taken out of `attached` and kept in `pool` (`Release::Keep`, when it is fit for another
/// request) or closed. `before_pooling` runs on a socket about to be pooled.
pub fn release(
    conn: &mut impl Endpoint,
    attached: &mut Vec<Upstream>,
    pool: &mut IdlePool,
    mut before_pooling: impl FnMut(&Upstream),
) {
    while let Some((link, release)) = conn.take_upstream_release() {
        let Some(socket) = detach(attached, link) else {
            continue;
        };
        if let (Release::Keep { keepalive, timeout }, Some(address)) = (release, &socket.address) {
            if socket.reusable() && keepalive > 0 {
                before_pooling(&socket);
                pool.put_registered(
                    address,
                    socket.fd,
                    socket.registration,
                    keepalive,
                    timeout,
                    Instant::now(),
                );
            }
        }
    }
}

#[cfg(test)]
mod tests;
