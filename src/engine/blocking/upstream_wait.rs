//! A blocking engine's thread with an upstream socket attached to its connection: the pump
//! between the two sockets, and the wait on both (`poll` on the client, the upstream and the
//! stop descriptor), bounded by the earlier of the client phase's deadline and the exchange's
//! `Conn::upstream_deadline`.
//!
//! Owns: that wait and what it reports. Must not touch: the client's reads and writes
//! (`blocking.rs`), HTTP.

use std::os::fd::AsFd;
use std::time::Instant;

use ampd_sys::poll::{self, PollFd};

use super::{Connection, Reset, Waited, Worker, TICK};
use crate::engine::upstream;

impl Worker {
    /// Move what can move between the upstream socket and `Conn`; whether anything did.
    pub(super) fn pump_upstream(&mut self, connection: &mut Connection) -> bool {
        match connection.upstream.as_mut() {
            Some(socket) => upstream::pump(socket, &mut connection.conn, &mut self.scratch),
            None => false,
        }
    }

    /// Wait until the client sends (when `Conn` wants its input), the upstream socket is ready
    /// for what `Conn` waits on, a limit runs out (the client phase's: `Expired`; the
    /// upstream's: `Conn::upstream_timed_out`, then `Ready` so the connection decides), or a
    /// graceful stop begins. A client that hangs up meanwhile is reset (the upstream socket
    /// closes with it).
    pub(super) fn wait_upstream(&mut self, connection: &mut Connection) -> Result<Waited, Reset> {
        let was_draining = self.lifecycle()?;
        loop {
            let draining = self.lifecycle()?;
            if draining && !was_draining {
                self.drain_began_while_busy();
                return Ok(Waited::DrainBegan);
            }
            let now = Instant::now();
            let upstream_deadline = connection.conn.upstream_deadline();
            if upstream_deadline.is_some_and(|deadline| now >= deadline) {
                connection.conn.upstream_timed_out();
                return Ok(Waited::Ready);
            }
            let limits = &self.generation.config.limits;
            if let Some(why) = connection.clock.check(now, limits, false) {
                return Ok(Waited::Expired(why));
            }
            let deadline = [connection.clock.deadline(limits, false), upstream_deadline]
                .into_iter()
                .flatten()
                .min();
            // At most a tick, so the drain and a second stop signal are seen.
            let left = deadline
                .map_or(TICK, |deadline| deadline.saturating_duration_since(now))
                .min(TICK);
            let Some(socket) = connection.upstream.as_ref() else {
                return Ok(Waited::Ready);
            };
            let client_reads = connection.conn.wants_input();
            let wants = socket.wants(&connection.conn);
            let mut fds = Vec::with_capacity(3);
            fds.push(PollFd::new(connection.fd.as_fd(), client_reads, false));
            // An upstream socket is watched only for what `Conn` waits on: one that hung up
            // while nothing is wanted from it would otherwise report so on every poll.
            let upstream_at = wants.any().then(|| {
                fds.push(PollFd::new(socket.fd.as_fd(), wants.read, wants.write));
                fds.len() - 1
            });
            // While draining the stop descriptor stays readable: it is not watched again.
            if !draining {
                fds.push(PollFd::new(self.control.stopping_fd(), true, false));
            }
            poll::poll(&mut fds, Some(left))?;
            let client = fds[0];
            let upstream_ready = upstream_at.map(|at| fds[at]);
            let (client_readable, client_hangup) = (client.readable, client.hangup);
            drop(fds);
            if let Some(ready) = upstream_ready.filter(PollFd::ready) {
                let (readable, writable, hangup) = (ready.readable, ready.writable, ready.hangup);
                if let Some(socket) = connection.upstream.as_mut() {
                    socket.ready(readable, writable, hangup);
                }
                return Ok(Waited::Ready);
            }
            if client_readable || (client_reads && client_hangup) {
                return Ok(Waited::Ready);
            }
            if client_hangup {
                // Gone (or failed) while the exchange waits: nothing more can reach it.
                return Err(Reset);
            }
        }
    }
}
