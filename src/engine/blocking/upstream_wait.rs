//! A blocking engine's thread with upstream sockets attached to its connection (one per link:
//! several for an HTTP/2 connection's streams): the pump between them and the client, and the
//! wait on all of them (`poll` on the client, the upstreams and the stop descriptor), bounded
//! by the earlier of the client phase's deadline and the exchanges' `Conn::upstream_deadline`.
//!
//! Owns: that wait and what it reports. Must not touch: the client's reads and writes
//! (`blocking.rs`), HTTP.

use std::os::fd::AsFd;
use std::time::Instant;

use ampd_sys::poll::{self, PollFd};

use super::{Connection, Reset, Waited, Worker, TICK};
use crate::engine::upstream;

impl Worker {
    /// Move what can move between the upstream sockets and `Conn`; whether anything did.
    pub(super) fn pump_upstream(&mut self, connection: &mut Connection) -> bool {
        upstream::pump_all(
            &mut connection.client.upstreams,
            &mut connection.client.conn,
            &mut self.scratch,
        )
    }

    /// Wait until the client sends (when `Conn` wants its input), an upstream socket is ready
    /// for what `Conn` waits on, a limit runs out (the client phase's: `Expired`; the
    /// upstream's: `Conn::upstream_timed_out`, then `Ready` so the connection decides), or a
    /// graceful stop begins. A client that hangs up meanwhile is reset (the upstream socket
    /// closes with it).
    pub(super) fn wait_upstream(&mut self, connection: &mut Connection) -> Result<Waited, Reset> {
        let was_draining = self.lifecycle()?;
        loop {
            let Some(draining) = self.wait_turn(was_draining)? else {
                return Ok(Waited::DrainBegan);
            };
            let now = Instant::now();
            let upstream_deadline = connection.client.conn.upstream_deadline();
            if upstream_deadline.is_some_and(|deadline| now >= deadline) {
                connection.client.conn.upstream_timed_out();
                return Ok(Waited::Ready);
            }
            let limits = &self.serving.generation.config.limits;
            if let Some(why) = connection.client.clock.check(now, limits, false) {
                return Ok(Waited::Expired(why));
            }
            let deadline = [
                connection.client.clock.deadline(limits, false),
                upstream_deadline,
            ]
            .into_iter()
            .flatten()
            .min();
            // At most a tick, so the drain and a second stop signal are seen.
            let left = deadline
                .map_or(TICK, |deadline| deadline.saturating_duration_since(now))
                .min(TICK);
            if connection.client.upstreams.is_empty() {
                return Ok(Waited::Ready);
            }
            let client_reads = connection.client.conn.wants_input();
            let mut fds = Vec::with_capacity(2 + connection.client.upstreams.len());
            fds.push(PollFd::new(
                connection.client.fd.as_fd(),
                client_reads,
                false,
            ));
            // An upstream socket is watched only for what `Conn` waits on: one that hung up
            // while nothing is wanted from it would otherwise report so on every poll.
            // `watched[i]`: the upstream socket `fds[i + 1]` is.
            let mut watched = Vec::with_capacity(connection.client.upstreams.len());
            for (at, socket) in connection.client.upstreams.iter().enumerate() {
                let wants = socket.wants(&connection.client.conn);
                if wants.any() {
                    fds.push(PollFd::new(socket.fd.as_fd(), wants.read, wants.write));
                    watched.push(at);
                }
            }
            // While draining the stop descriptor stays readable: it is not watched again.
            if !draining {
                fds.push(PollFd::new(self.serving.control.stopping_fd(), true, false));
            }
            poll::poll(&mut fds, Some(left))?;
            let client = fds[0];
            let (client_readable, client_hangup) = (client.readable, client.hangup);
            let ready: Vec<(usize, bool, bool, bool)> = watched
                .iter()
                .zip(&fds[1..])
                .filter(|(_, fd)| fd.ready())
                .map(|(&at, fd)| (at, fd.readable, fd.writable, fd.hangup))
                .collect();
            drop(fds);
            if !ready.is_empty() {
                for (at, readable, writable, hangup) in ready {
                    connection.client.upstreams[at].ready(readable, writable, hangup);
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
