//! A blocking worker's I/O on its client socket: reading what the client sent (through TLS
//! when there is one), writing everything `Conn` queued (`sendmsg` with `MSG_MORE` before a
//! file, `sendfile`, or sealed records), and the waits in between, each a `poll` bounded by the
//! connection's phase limit (`phase_clock.rs`) and woken by a graceful stop.
//!
//! Owns: those steps. Must not touch: deciding (`blocking.rs`), the upstream sockets
//! (`upstream_wait.rs`), HTTP.

use std::io;
use std::os::fd::AsFd;
use std::time::Instant;

use ampd_sys::{io as sysio, poll};

use super::{Connection, Reset, Waited, Worker, READ_TURN, TICK};
use crate::conn::Phase;
use crate::engine::phase_clock::Expired;
use crate::tls::session::Received;

impl Worker {
    /// Read what the socket has, up to a turn's worth. Returns (anything changed, socket
    /// drained).
    pub(super) fn read_input(
        &mut self,
        connection: &mut Connection,
    ) -> Result<(bool, bool), Reset> {
        let mut total = 0;
        let mut changed = false;
        while connection.client.conn.wants_input() && total < READ_TURN {
            match sysio::read(connection.client.fd.as_fd(), &mut self.scratch) {
                Ok(0) => {
                    connection.client.conn.peer_finished();
                    connection.client.eof = true;
                    return Ok((true, true));
                }
                Ok(count) => {
                    match connection.client.tls.as_mut() {
                        Some(tls) => {
                            if let Received::Ending(_) =
                                tls.receive(&self.scratch[..count], &mut connection.client.conn)
                            {
                                return Ok((true, true));
                            }
                        }
                        None => connection.client.conn.receive(&self.scratch[..count]),
                    }
                    total += count;
                    changed = true;
                    if count < self.scratch.len() {
                        return Ok((true, true));
                    }
                }
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => {
                    return Ok((changed, true))
                }
                Err(_) => return Err(Reset),
            }
        }
        Ok((changed, total < READ_TURN))
    }

    /// Write everything queued, waiting for the socket as needed, under the send timeout and
    /// the minimum send rate. Returns whether any byte went out.
    pub(super) fn flush(&mut self, connection: &mut Connection) -> Result<bool, Reset> {
        if connection.client.tls.is_some() {
            return self.flush_tls(connection);
        }
        let mut wrote = false;
        while !connection.client.conn.output.is_empty() {
            let fd = connection.client.fd.as_fd();
            let result = match connection.client.conn.output.front_file() {
                Some(range) => {
                    let mut offset = range.offset;
                    let count = usize::try_from(range.end - range.offset)
                        .unwrap_or(usize::MAX)
                        .min(sysio::MAX_RW_COUNT);
                    match sysio::sendfile(fd, range.file.file.as_fd(), &mut offset, count) {
                        // The file shrank under the response: it cannot be completed.
                        Ok(0) => return Err(Reset),
                        other => other,
                    }
                }
                None => {
                    // A head followed by a file body: MSG_MORE lets them leave in full segments.
                    let more = if connection.client.conn.output.file_follows_memory() {
                        sysio::MSG_MORE
                    } else {
                        0
                    };
                    let slices = connection.client.conn.output.memory_slices();
                    sysio::send_vectored(fd, &slices, sysio::MSG_NOSIGNAL | more)
                }
            };
            if let Some(sent) = self.sent_or_wait(connection, result)? {
                connection.client.conn.output.advance(sent as u64);
                wrote = true;
            }
        }
        Ok(wrote)
    }

    /// What one write to the client came to: `Some(bytes)` counted against the send timeout
    /// and rate, or `None` after waiting for the full socket to take more (under the send
    /// timeout).
    fn sent_or_wait(
        &mut self,
        connection: &mut Connection,
        result: io::Result<usize>,
    ) -> Result<Option<usize>, Reset> {
        match result {
            Ok(sent) => {
                connection.client.clock.sent(sent as u64);
                connection.client.clock.note(
                    Phase::Sending,
                    true,
                    Instant::now(),
                    &connection.stats,
                );
                Ok(Some(sent))
            }
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => {
                match self.wait(connection, true)? {
                    Waited::Ready | Waited::DrainBegan => Ok(None),
                    Waited::Expired(_) => Err(Reset),
                }
            }
            Err(_) => Err(Reset),
        }
    }

    /// `flush` over TLS: seal the output into records (files read with `pread`, no
    /// `sendfile` over userspace TLS) and write them, waiting for the socket as needed.
    fn flush_tls(&mut self, connection: &mut Connection) -> Result<bool, Reset> {
        let mut wrote = false;
        loop {
            let Some(tls) = connection.client.tls.as_mut() else {
                return Ok(wrote);
            };
            if tls.wants_write() {
                let result = tls.write_to(connection.client.fd.as_fd());
                if self.sent_or_wait(connection, result)?.is_some() {
                    wrote = true;
                }
                continue;
            }
            if connection.client.conn.output.is_empty() {
                return Ok(wrote);
            }
            match tls.seal(&mut connection.client.conn.output, &mut self.scratch) {
                // Still handshaking: the output waits for it.
                Ok(0) => return Ok(wrote),
                Ok(_) => {}
                Err(_) => return Err(Reset),
            }
        }
    }

    /// Wait until the connection can be read (or, `write`, written), its phase's limit runs
    /// out, or a graceful stop begins.
    pub(super) fn wait(
        &mut self,
        connection: &mut Connection,
        write: bool,
    ) -> Result<Waited, Reset> {
        let was_draining = self.lifecycle()?;
        loop {
            let Some(draining) = self.wait_turn(was_draining)? else {
                return Ok(Waited::DrainBegan);
            };
            let now = Instant::now();
            let limits = &self.serving.generation.config.limits;
            if let Some(why) = connection.client.clock.check(now, limits, false) {
                return Ok(Waited::Expired(why));
            }
            if connection
                .client
                .handshake_due()
                .is_some_and(|deadline| now >= deadline)
            {
                return Ok(Waited::Expired(Expired::Quietly));
            }
            let mut left = connection
                .deadline(limits)
                .map_or(TICK, |deadline| deadline.saturating_duration_since(now));
            if draining || write {
                left = left.min(TICK);
            }
            let mut fds = [
                poll::PollFd::new(connection.client.fd.as_fd(), !write, write),
                poll::PollFd::new(self.serving.control.stopping_fd(), true, false),
            ];
            // While draining the stop descriptor stays readable: it is not watched again.
            let watched = if draining { 1 } else { 2 };
            poll::poll(&mut fds[..watched], Some(left))?;
            if fds[0].ready() {
                return Ok(Waited::Ready);
            }
        }
    }
}
