//! The idle keep-alive connections to upstream servers of one loop, ring, thread group (`mt`,
//! `tpc`) or process (`mp`): kept after a complete response (`Release::Keep`), taken again by
//! the next `Need::Connect` to the same address.
//!
//! Owns: which idle connections are kept, for how long, and whether one is still usable.
//! Per address at most the pool's `keepalive` (the oldest goes first when a newer one comes
//! back), each for at most `keepalive_timeout` (`sweep`). A connection is checked before reuse:
//! the upstream may have closed it while it sat idle (its keep-alive timeout may be shorter
//! than ours), and a request written to it would then fail after the fact.
//! Must not touch: choosing a server (`crate::upstream`), the exchange (`conn`).

use std::collections::{HashMap, VecDeque};
use std::os::fd::{AsFd, OwnedFd};
use std::time::{Duration, Instant};

use ampd_sys::socket::{self, IdlePeek};

use crate::config::UpstreamAddress;

struct Idle {
    fd: OwnedFd,
    /// The engine's registration of the descriptor (the epoll token it is watched under; 0:
    /// none), kept so that the next owner can be given it without a system call.
    registration: u64,
    /// When it came back to the pool.
    since: Instant,
    /// `keepalive_timeout` of the pool it came from.
    timeout: Duration,
}

impl Idle {
    fn expired(&self, now: Instant) -> bool {
        now.saturating_duration_since(self.since) >= self.timeout
    }
}

/// Idle upstream connections by address.
#[derive(Default)]
pub struct IdlePool {
    idle: HashMap<UpstreamAddress, VecDeque<Idle>>,
    count: usize,
}

impl IdlePool {
    /// Keep `fd`, connected to `address`, for up to `timeout`; at most `keepalive` for this
    /// address (0: none is kept, `fd` is closed).
    pub fn put(
        &mut self,
        address: &UpstreamAddress,
        fd: OwnedFd,
        keepalive: usize,
        timeout: Duration,
        now: Instant,
    ) {
        self.put_registered(address, fd, 0, keepalive, timeout, now);
    }

    /// `put`, remembering the engine's `registration` of the descriptor (see `Idle`).
    pub fn put_registered(
        &mut self,
        address: &UpstreamAddress,
        fd: OwnedFd,
        registration: u64,
        keepalive: usize,
        timeout: Duration,
        now: Instant,
    ) {
        if keepalive == 0 || timeout.is_zero() {
            return;
        }
        // The key is cloned only for an address seen for the first time (a unix path is an
        // allocation).
        if !self.idle.contains_key(address) {
            self.idle.insert(address.clone(), VecDeque::new());
        }
        let Some(queue) = self.idle.get_mut(address) else {
            return;
        };
        queue.push_back(Idle {
            fd,
            registration,
            since: now,
            timeout,
        });
        self.count += 1;
        while queue.len() > keepalive {
            // The oldest idle connection is closed first.
            queue.pop_front();
            self.count -= 1;
        }
    }

    /// An idle connection to `address` that is still usable, newest first (the one least
    /// likely to have been closed by the upstream; older ones then age out). Connections found
    /// expired, closed by the upstream, or holding bytes nobody asked for are closed.
    pub fn take(&mut self, address: &UpstreamAddress, now: Instant) -> Option<OwnedFd> {
        self.take_preferring(address, 0, now).map(|(fd, _)| fd)
    }

    /// `take`, preferring a connection registered as `preferred` (the one this owner gave back
    /// last: an event loop then needs no `epoll_ctl` to watch it again); otherwise the newest.
    /// Returns the descriptor and its registration.
    pub fn take_preferring(
        &mut self,
        address: &UpstreamAddress,
        preferred: u64,
        now: Instant,
    ) -> Option<(OwnedFd, u64)> {
        let queue = self.idle.get_mut(address)?;
        if preferred != 0 {
            if let Some(at) = queue
                .iter()
                .rposition(|idle| idle.registration == preferred)
            {
                if let Some(idle) = queue.remove(at) {
                    queue.push_back(idle);
                }
            }
        }
        let mut found = None;
        while let Some(idle) = queue.pop_back() {
            self.count -= 1;
            if idle.expired(now) {
                continue;
            }
            // Nothing to read (EAGAIN) is the only sign of a usable idle connection: end of
            // stream means the upstream closed it; bytes mean it sent something unasked (a late
            // part of an earlier response, or a 408), after which it is out of step.
            if matches!(socket::peek_idle(idle.fd.as_fd()), Ok(IdlePeek::Quiet)) {
                found = Some((idle.fd, idle.registration));
                break;
            }
        }
        if queue.is_empty() {
            self.idle.remove(address);
        }
        found
    }

    /// Close the connections idle past their pool's `keepalive_timeout`.
    pub fn sweep(&mut self, now: Instant) {
        let mut closed = 0;
        self.idle.retain(|_, queue| {
            let before = queue.len();
            queue.retain(|idle| !idle.expired(now));
            closed += before - queue.len();
            !queue.is_empty()
        });
        self.count -= closed;
    }

    /// Idle connections held.
    #[must_use]
    pub fn len(&self) -> usize {
        self.count
    }

    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;
    use std::os::fd::AsRawFd;

    /// A connected pair over loopback TCP: (our end, the upstream's end).
    fn connected(listener: &TcpListener) -> (OwnedFd, std::net::TcpStream) {
        let ours = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        ours.set_nonblocking(true).unwrap();
        let (theirs, _) = listener.accept().unwrap();
        (OwnedFd::from(ours), theirs)
    }

    fn address(listener: &TcpListener) -> UpstreamAddress {
        UpstreamAddress::Tcp(listener.local_addr().unwrap())
    }

    #[test]
    fn the_connection_an_owner_gave_back_is_given_to_it_again_with_its_registration() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = address(&listener);
        let mut pool = IdlePool::default();
        let now = Instant::now();
        let minute = Duration::from_secs(60);
        let mut upstream_ends = Vec::new();
        let mut numbers = Vec::new();
        for registration in [7, 8, 9] {
            let (ours, theirs) = connected(&listener);
            numbers.push(ours.as_raw_fd());
            upstream_ends.push(theirs);
            pool.put_registered(&address, ours, registration, 8, minute, now);
        }
        let (fd, registration) = pool.take_preferring(&address, 7, now).unwrap();
        assert_eq!((fd.as_raw_fd(), registration), (numbers[0], 7));
        // No such owner: the newest.
        let (fd, registration) = pool.take_preferring(&address, 42, now).unwrap();
        assert_eq!((fd.as_raw_fd(), registration), (numbers[2], 9));
        assert_eq!(pool.len(), 1);
    }

    #[test]
    fn a_kept_connection_is_taken_again_newest_first_and_the_cap_closes_the_oldest() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = address(&listener);
        let mut pool = IdlePool::default();
        let now = Instant::now();
        let minute = Duration::from_secs(60);
        let mut upstream_ends = Vec::new();
        let mut numbers = Vec::new();
        for _ in 0..3 {
            let (ours, theirs) = connected(&listener);
            numbers.push(ours.as_raw_fd());
            upstream_ends.push(theirs);
            pool.put(&address, ours, 2, minute, now);
        }
        assert_eq!(pool.len(), 2, "capped at keepalive = 2");
        // The first was closed: the upstream sees end of stream on it.
        let mut byte = [0u8; 1];
        use std::io::Read;
        upstream_ends[0]
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        assert_eq!(upstream_ends[0].read(&mut byte).unwrap(), 0);
        let taken = pool.take(&address, now).unwrap();
        assert_eq!(taken.as_raw_fd(), numbers[2], "newest first");
        let other = UpstreamAddress::Unix("/nonexistent.sock".into());
        assert!(pool.take(&other, now).is_none());
        assert_eq!(pool.len(), 1);
    }

    #[test]
    fn a_connection_the_upstream_closed_or_wrote_to_is_not_reused() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = address(&listener);
        let mut pool = IdlePool::default();
        let now = Instant::now();
        let minute = Duration::from_secs(60);
        let (healthy, _keep) = connected(&listener);
        let healthy_number = healthy.as_raw_fd();
        pool.put(&address, healthy, 8, minute, now);
        let (chatty, mut chatty_end) = connected(&listener);
        pool.put(&address, chatty, 8, minute, now);
        let (closed, closed_end) = connected(&listener);
        pool.put(&address, closed, 8, minute, now);
        use std::io::Write;
        chatty_end.write_all(b"HTTP/1.1 408 \r\n\r\n").unwrap();
        drop(closed_end);
        // Let the FIN and the bytes arrive (loopback: at once; bounded anyway).
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let taken = pool.take(&address, now);
            if let Some(fd) = taken {
                if fd.as_raw_fd() == healthy_number {
                    break;
                }
                // Arrived before the FIN/bytes did: put back and try again.
                pool.put(&address, fd, 8, minute, now);
            }
            assert!(
                Instant::now() < deadline,
                "the healthy connection was not found"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(pool.is_empty(), "the closed and the chatty one were closed");
    }

    #[test]
    fn the_sweep_closes_connections_idle_past_their_timeout() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = address(&listener);
        let mut pool = IdlePool::default();
        let now = Instant::now();
        let (short, _a) = connected(&listener);
        let (long, _b) = connected(&listener);
        pool.put(&address, short, 8, Duration::from_secs(1), now);
        pool.put(&address, long, 8, Duration::from_secs(60), now);
        pool.sweep(now + Duration::from_millis(500));
        assert_eq!(pool.len(), 2);
        pool.sweep(now + Duration::from_secs(2));
        assert_eq!(pool.len(), 1);
        // Taking also skips an expired one.
        assert!(pool.take(&address, now + Duration::from_secs(61)).is_none());
        assert!(pool.is_empty());
        // keepalive = 0 keeps nothing.
        let (none, _c) = connected(&listener);
        pool.put(&address, none, 0, Duration::from_secs(60), now);
        assert!(pool.is_empty());
    }
}
