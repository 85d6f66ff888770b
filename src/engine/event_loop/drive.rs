//! The loop's I/O on one connection: read what the socket has, let `Conn` decide, write what
//! it queued (memory by `sendmsg`, files by `sendfile` after a residency test), and end the
//! connection (plain close, or lingering close) as `conn::Ending` says.
//!
//! Owns: those steps. Must not touch: HTTP; accepting and the loop itself (`mod.rs`);
//! lifecycle and timeouts (`lifecycle.rs`).

use std::io;
use std::os::fd::AsFd;

use ampd_sys::epoll::{Epoll, Interest};
use ampd_sys::io as sysio;

use super::{EventLoop, Slot, Watched, READ_CHUNK, TURNS};
use crate::conn::{Ending, Need};
use crate::content::job::Job;
use crate::content::serve;
use crate::content::sink::DiskAccess;
use crate::engine::core::Driver;
use crate::engine::upstream;
use crate::tls::session::{Received, SEAL_BATCH};

impl EventLoop {
    /// Run one connection's read → decide → write cycle as far as it goes without blocking,
    /// with the loop's spare buffers lent to it for the turn (`conn::Spare`).
    pub(super) fn drive(&mut self, index: usize) {
        if let Some(slot) = self.slots.get_mut(index) {
            slot.client.conn.borrow_buffers(&mut self.spare);
        }
        self.drive_turns(index);
        if let Some(slot) = self.slots.get_mut(index) {
            slot.client.conn.return_buffers(&mut self.spare);
        }
    }

    fn drive_turns(&mut self, index: usize) {
        for _ in 0..TURNS {
            let Some(slot) = self.slots.get_mut(index) else {
                return;
            };
            if slot.client.job_out {
                return;
            }
            if slot.client.lingering {
                self.linger(index);
                return;
            }
            let read = match read_input(slot, &mut self.core.scratch) {
                Ok(read) => read,
                Err(_) => return self.close(index),
            };
            // The upstream's side of the cycle: request bytes out, response bytes in (as far
            // as `Conn` wants them: a slow client stops the reading here).
            let pumped = self.core.pump(&mut slot.client);
            let need = {
                let mut context = self.core.context();
                slot.client.conn.advance(&mut context)
            };
            self.settle_upstream(index);
            if let Need::Connect(link, connect) = &need {
                self.connect_upstream(index, *link, connect);
                continue;
            }
            if let Need::Job(job) = need {
                self.submit(index, job);
                // SPED ran it already; AMPED resumes on completion.
                let Some(slot) = self.slots.get_mut(index) else {
                    return;
                };
                if slot.client.job_out {
                    self.flush_and_note(index);
                    return;
                }
                continue;
            }
            // The connection closes at once after this output (see `end`): the close will carry
            // the last segment's FIN, so hold that segment back for it.
            let closes_after = matches!(need, Need::Close(Ending::Close))
                && self.slots.get(index).is_some_and(|slot| !slot.io.can_read);
            let wrote = match self.flush(index, closes_after) {
                Ok(wrote) => wrote,
                Err(_) => return self.close(index),
            };
            self.note_phase(index, read || wrote || pumped);
            let Some(slot) = self.slots.get(index) else {
                return;
            };
            let tls_waits = slot.client.tls_waits();
            if slot.client.tls_ending() {
                if !tls_waits {
                    return self.begin_close(index);
                }
                return;
            }
            if let Need::Close(ending) = need {
                if slot.client.conn.output.is_empty() && !tls_waits {
                    return self.end(index, ending);
                }
            }
            let upstream_can_move =
                upstream::any_can_move(&slot.client.upstreams, &slot.client.conn);
            if !read && !wrote && !pumped && !upstream_can_move {
                // Nothing more to read or write for now: done, if a drain is under way.
                return self.close_if_drained(index);
            }
        }
        // Still busy after its turns: others go first, then it continues.
        self.ready.push_back(index);
    }

    fn flush_and_note(&mut self, index: usize) {
        match self.flush(index, false) {
            Ok(wrote) => self.note_phase(index, wrote),
            Err(_) => self.close(index),
        }
    }

    fn note_phase(&mut self, index: usize, progressed: bool) {
        if let Some(slot) = self.slots.get_mut(index) {
            slot.client.clock.note(
                slot.client.conn.phase(),
                progressed,
                self.core.clock.now(),
                &self.core.link.stats,
            );
        }
    }

    /// Write queued output until the socket is full, the output is empty, this turn's budget
    /// is spent, or a file range must first be paged in by a helper. Returns whether any byte
    /// went out.
    ///
    /// Memory is sent with `MSG_MORE` when more follows at once: a file range (the head then
    /// leaves with the body's first segment), or the close (`closes_after`: the kernel then puts
    /// the FIN on the response's last segment instead of sending it alone, one packet less per
    /// connection-per-request exchange, docs/research/benchmarks.md row b).
    fn flush(&mut self, index: usize, closes_after: bool) -> io::Result<bool> {
        if self
            .slots
            .get(index)
            .is_some_and(|slot| slot.client.tls.is_some())
        {
            return self.flush_tls(index);
        }
        let token = self.token(index);
        let send_chunk = self.core.serving.generation.config.send.send_chunk as u64;
        let mut budget = send_chunk;
        let mut wrote = false;
        let disk = self.core.disk;
        loop {
            let Some(slot) = self.slots.get_mut(index) else {
                return Ok(wrote);
            };
            if !slot.io.can_write || slot.client.conn.output.is_empty() || budget == 0 {
                if budget == 0 && !slot.client.conn.output.is_empty() && slot.io.can_write {
                    self.ready.push_back(index);
                }
                return Ok(wrote);
            }
            if let Some(range) = slot.client.conn.output.front_file() {
                let len = (range.end - range.offset).min(budget);
                if disk == DiskAccess::Helpers {
                    if let Some(job) = self.page_in_job(index, len, SendBy::Helper) {
                        self.submit(index, job);
                        return Ok(wrote);
                    }
                }
                let Some(slot) = self.slots.get_mut(index) else {
                    return Ok(wrote);
                };
                let Some(range) = slot.client.conn.output.front_file() else {
                    continue;
                };
                let mut offset = range.offset;
                let count = usize::try_from(len).unwrap_or(usize::MAX);
                match sysio::sendfile(
                    slot.client.fd.as_fd(),
                    range.file.file.as_fd(),
                    &mut offset,
                    count,
                ) {
                    // The file is shorter than when its head was sent: the response cannot be
                    // completed, so the connection must end (the client sees a short body).
                    Ok(0) => return Err(io::Error::from(io::ErrorKind::UnexpectedEof)),
                    Ok(sent) => {
                        slot.client.conn.output.advance(sent as u64);
                        slot.client.clock.sent(sent as u64);
                        budget = budget.saturating_sub(sent as u64);
                        wrote = true;
                    }
                    Err(error) if error.kind() == io::ErrorKind::WouldBlock => {
                        watch_writes(&self.epoll, slot, token)?;
                    }
                    Err(error) => return Err(error),
                }
            } else {
                let more = if closes_after || slot.client.conn.output.file_follows_memory() {
                    sysio::MSG_MORE
                } else {
                    0
                };
                let slices = slot.client.conn.output.memory_slices();
                match sysio::send_vectored(
                    slot.client.fd.as_fd(),
                    &slices,
                    sysio::MSG_NOSIGNAL | more,
                ) {
                    Ok(sent) => {
                        slot.client.conn.output.advance(sent as u64);
                        slot.client.clock.sent(sent as u64);
                        budget = budget.saturating_sub(sent as u64);
                        wrote = true;
                    }
                    Err(error) if error.kind() == io::ErrorKind::WouldBlock => {
                        watch_writes(&self.epoll, slot, token)?;
                    }
                    Err(error) => return Err(error),
                }
            }
        }
    }

    /// Under AMPED, the page-in a file range at the front of the output needs first (Flash
    /// §5.4: the loop never waits on the disk), or `None` when its next `len` bytes (at most
    /// what is left of the range: pages past the end are never resident) are resident
    /// (or this connection's own last page-in made them so, even while another connection's
    /// read of the file is still in flight: else two connections of one file could hand it to
    /// helpers in turn forever).
    fn page_in_job(&mut self, index: usize, len: u64, send_by: SendBy) -> Option<Job> {
        let slot = self.slots.get_mut(index)?;
        let range = slot.client.conn.output.front_file()?;
        let len = len.min(range.end - range.offset);
        let key = range.file.key;
        let trusted = slot
            .io
            .paged_in
            .is_some_and(|(paged, end)| paged == key && range.offset < end);
        let residency_test = self.core.serving.generation.config.caches.residency_test;
        let page_in = serve::page_in_needed(
            range.file,
            (range.offset, len),
            trusted,
            self.settings.pages_in_flight.reading(&key),
            residency_test,
        );
        if !page_in {
            if !residency_test {
                // Without the test a page-in vouches only for the send right after it: the
                // next range, or the next response of the same file, goes to a helper again.
                slot.io.paged_in = None;
            }
            return None;
        }
        // The helper sends what it reads (`job::send_or_touch`) through a duplicate of the
        // socket, so that a close here (a timeout) while the job is out cannot hand its number
        // to another connection. Made only for a job: for every response it would cost an
        // `fcntl` and a `close` beside the three calls a resident file needs
        // (tests/it/syscalls_per_request.rs).
        let send_to = match send_by {
            SendBy::Helper => slot.client.fd.try_clone().ok(),
            SendBy::Loop => None,
        };
        self.settings.pages_in_flight.started(key);
        Some(Job::PageIn {
            file: range.file.clone(),
            offset: range.offset,
            len,
            send_to,
        })
    }

    /// `flush` over TLS: seal the output into records (a file range paged in first under
    /// AMPED; the helper only touches it, a TLS socket takes records only from here) and
    /// write them, until the socket is full, the output is empty or the turn's budget is
    /// spent.
    fn flush_tls(&mut self, index: usize) -> io::Result<bool> {
        let token = self.token(index);
        let mut budget = self.core.serving.generation.config.send.send_chunk as u64;
        let mut wrote = false;
        loop {
            let Some(slot) = self.slots.get_mut(index) else {
                return Ok(wrote);
            };
            if !slot.io.can_write {
                return Ok(wrote);
            }
            let Some(tls) = slot.client.tls.as_mut() else {
                return Ok(wrote);
            };
            if tls.wants_write() {
                match tls.write_to(slot.client.fd.as_fd()) {
                    Ok(sent) => {
                        slot.client.clock.sent(sent as u64);
                        wrote = true;
                    }
                    Err(error) if error.kind() == io::ErrorKind::WouldBlock => {
                        watch_writes(&self.epoll, slot, token)?;
                    }
                    Err(error) => return Err(error),
                }
                continue;
            }
            if slot.client.conn.output.is_empty() {
                return Ok(wrote);
            }
            if budget == 0 {
                self.ready.push_back(index);
                return Ok(wrote);
            }
            if self.core.disk == DiskAccess::Helpers {
                if let Some(job) = self.page_in_job(index, SEAL_BATCH, SendBy::Loop) {
                    self.submit(index, job);
                    return Ok(wrote);
                }
            }
            let Some(slot) = self.slots.get_mut(index) else {
                return Ok(wrote);
            };
            let Some(tls) = slot.client.tls.as_mut() else {
                return Ok(wrote);
            };
            let sealed = tls.seal(&mut slot.client.conn.output, &mut self.core.scratch)?;
            if sealed == 0 {
                // Still handshaking: the output waits for it.
                return Ok(wrote);
            }
            budget = budget.saturating_sub(sealed);
        }
    }
}

/// The socket is full: wait for writability, registering for it the first time (the epoll
/// modification, or joining the set, reports it at once if the socket drained in between, so no
/// wake-up is lost).
fn watch_writes(epoll: &Epoll, slot: &mut Slot, token: u64) -> io::Result<()> {
    slot.io.can_write = false;
    match slot.io.watched {
        Watched::NotYet { .. } => slot.io.watched = Watched::NotYet { writes: true },
        Watched::Input => {
            epoll.modify(slot.client.fd.as_fd(), token, Interest::BOTH.edge())?;
            slot.io.watched = Watched::InputAndOutput;
        }
        Watched::InputAndOutput => {}
    }
    Ok(())
}

/// Read what the socket has (up to a turn's worth) into the connection, through the loop's
/// one read buffer. Returns whether anything changed (bytes or end of input).
fn read_input(slot: &mut Slot, scratch: &mut [u8]) -> io::Result<bool> {
    let mut changed = false;
    let mut total = 0;
    while slot.io.can_read && slot.client.conn.wants_input() && total < 4 * READ_CHUNK {
        match sysio::read(slot.client.fd.as_fd(), scratch) {
            Ok(0) => {
                slot.client.conn.peer_finished();
                slot.client.eof = true;
                slot.io.can_read = false;
                return Ok(true);
            }
            Ok(count) => {
                match slot.client.tls.as_mut() {
                    Some(tls) => {
                        if let Received::Ending(_) =
                            tls.receive(&scratch[..count], &mut slot.client.conn)
                        {
                            slot.io.can_read = false;
                            return Ok(true);
                        }
                    }
                    None => slot.client.conn.receive(&scratch[..count]),
                }
                total += count;
                changed = true;
                if count < scratch.len() && !slot.io.hung_up {
                    // A short read means the socket is drained (stream sockets): skip the
                    // read that would only say EAGAIN; edge-triggered epoll reports new data
                    // (not an end of stream already reported: read on until it is found).
                    slot.io.can_read = false;
                }
            }
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => slot.io.can_read = false,
            Err(error) => return Err(error),
        }
    }
    Ok(changed)
}

/// Who sends a range once its page-in is done: the helper that read it (plain sockets) or the
/// loop (TLS: records are sealed only here).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SendBy {
    Helper,
    Loop,
}
