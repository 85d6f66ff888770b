//! The send half of the proactor: from the ring thread, a nonblocking `sendmsg` for what a
//! connection has queued in memory and `sendfile` for file data whose pages are resident (a
//! helper pages them in first otherwise, as under AMPED); a `writev` on the ring for TLS
//! records; and what their completions mean.
//!
//! Why not io_uring's `splice`: the kernel runs every splice on its worker threads (it forces
//! them async), two hand-offs per chunk through a pipe, which cost 2.8 × `reactor`'s CPU per
//! 100 KiB response and 4.4 × per 1 MiB (docs/research/benchmarks.md). `sendfile` of resident pages
//! cannot wait on the disk, and on the nonblocking socket (`Ring::accept_multishot`) not on the
//! client either: a full socket ends it and a poll for room resumes it.
//!
//! Owns: one send, poll for room or page-in per connection at a time. Must not touch:
//! receiving, the connection's lifecycle (`proactor.rs`).

use std::io;
use std::os::fd::AsFd;

use ampd_sys::io as sysio;
use ampd_sys::uring::{Completion, SendPart};

use super::{Proactor, Sending, SEND_CHUNK};
use crate::content::job::Job;
use crate::content::serve;
use crate::engine::core::Driver;
use crate::engine::slab::Kind;
use crate::tls::session::SEAL_BATCH;

impl Proactor {
    /// The socket has room again (or an error, which the next `sendfile` reports): go on.
    pub(super) fn writable(&mut self, index: usize, result: i32) {
        let Some(slot) = self.slots.get_mut(index) else {
            return;
        };
        slot.io.sending = Sending::Nothing;
        slot.io.send_op = None;
        if result < 0 {
            return self.close(index);
        }
        self.ready.push_back(index);
    }

    /// A send of TLS records completed (the ring sends only those: plain output goes from the
    /// ring thread): what the socket did not take goes again from the same buffer (records
    /// cannot be made again, unlike the output's plain bytes).
    pub(super) fn sent(&mut self, index: usize, completion: Completion) {
        let send_tag = self.tag(index, Kind::Send);
        let mut buffer = completion
            .parts
            .into_iter()
            .find_map(|part| match part {
                SendPart::Owned(buffer) => Some(buffer),
                SendPart::Shared { .. } => None,
            })
            .unwrap_or_default();
        let Some(slot) = self.slots.get_mut(index) else {
            return;
        };
        let Ok(sent) = usize::try_from(completion.result) else {
            return self.close(index);
        };
        slot.client.clock.sent(sent as u64);
        buffer.drain(..sent.min(buffer.len()));
        if buffer.is_empty() || sent == 0 {
            buffer.clear();
            self.spare.push(buffer);
            slot.io.sending = Sending::Nothing;
            slot.io.send_op = None;
            if sent == 0 {
                return self.close(index);
            }
            self.note_phase(index, true);
            self.ready.push_back(index);
            return;
        }
        match self.ring.send(
            slot.client.fd.as_fd(),
            vec![SendPart::Owned(buffer)],
            send_tag,
        ) {
            Ok(op) => slot.io.send_op = Some(op),
            Err(_) => self.close(index),
        }
    }

    /// `start_send` over TLS: seal the output into records (a file range paged in by a helper
    /// first when it is not resident: the ring thread never waits on the disk) and send them.
    fn start_send_tls(&mut self, index: usize) -> bool {
        let send_tag = self.tag(index, Kind::Send);
        let Some(slot) = self.slots.get_mut(index) else {
            return false;
        };
        let Some(tls) = slot.client.tls.as_mut() else {
            return true;
        };
        if !tls.wants_write() && !slot.client.conn.output.is_empty() {
            if let Some(range) = slot.client.conn.output.front_file() {
                let len = (range.end - range.offset).min(SEAL_BATCH);
                let key = range.file.key;
                let trusted = slot
                    .io
                    .paged_in
                    .is_some_and(|(paged, end)| paged == key && range.offset + len <= end);
                let residency_test = self.core.serving.generation.config.caches.residency_test;
                // A range a helper is still reading in counts as resident before it is.
                let resident = residency_test
                    && !self.pages_in_flight.reading(&key)
                    && serve::range_resident(range.file, range.offset, len);
                if trusted && !residency_test {
                    // As the event loop: without the test a page-in vouches only for the
                    // records sealed right after it.
                    slot.io.paged_in = None;
                }
                if !trusted && !resident {
                    self.pages_in_flight.started(key);
                    let job = Job::PageIn {
                        file: range.file.clone(),
                        offset: range.offset,
                        len,
                        send_to: None,
                    };
                    self.submit(index, job);
                    return true;
                }
            }
            if tls
                .seal(&mut slot.client.conn.output, &mut self.core.scratch)
                .is_err()
            {
                self.close(index);
                return false;
            }
        }
        if !tls.wants_write() {
            return true;
        }
        let mut buffer = self.spare.pop().unwrap_or_default();
        tls.take_ciphertext(&mut buffer, SEND_CHUNK);
        slot.io.sending = Sending::Records;
        match self.ring.send(
            slot.client.fd.as_fd(),
            vec![SendPart::Owned(buffer)],
            send_tag,
        ) {
            Ok(op) => {
                slot.io.send_op = Some(op);
                true
            }
            Err(_) => {
                self.close(index);
                false
            }
        }
    }

    /// Send the front of the output if nothing is in flight, from the ring thread: memory by a
    /// nonblocking `sendmsg`, file ranges by `send_file`, until the output is empty, the socket
    /// is full (a poll for room resumes it), a page-in is out, or this turn's
    /// `send.send_chunk` is spent. Returns false if the connection had to be closed.
    pub(super) fn start_send(&mut self, index: usize) -> bool {
        let Some(slot) = self.slots.get_mut(index) else {
            return false;
        };
        if slot.client.tls.is_some() {
            if !matches!(slot.io.sending, Sending::Nothing) || slot.client.job_out {
                return true;
            }
            return self.start_send_tls(index);
        }
        let mut budget = self.core.serving.generation.config.send.send_chunk as u64;
        loop {
            let Some(slot) = self.slots.get_mut(index) else {
                return false;
            };
            if !matches!(slot.io.sending, Sending::Nothing)
                || slot.client.job_out
                || slot.client.conn.output.is_empty()
            {
                return true;
            }
            if slot.client.conn.output.front_file().is_some() {
                if !self.send_file(index) {
                    return false;
                }
                // Still at the front: a page-in is out, the socket is full or the turn's
                // budget is spent (`send_file` arranged what comes next).
                let Some(slot) = self.slots.get_mut(index) else {
                    return false;
                };
                if slot.client.conn.output.front_file().is_some() {
                    return true;
                }
                continue;
            }
            if budget == 0 {
                self.ready.push_back(index);
                return true;
            }
            let Some(sent) = self.send_memory(index) else {
                return false;
            };
            budget = budget.saturating_sub(sent);
        }
    }

    /// Send the memory at the front of the output with one nonblocking `sendmsg` (`MSG_MORE`
    /// when a file range follows, so a file response's head leaves with the body's first
    /// segment, as under the event loop), waiting for room when the socket did not take it
    /// all. Returns the bytes sent, `None` if the connection had to be closed.
    ///
    /// Why not a `writev` on the ring: the kernel runs it inline at submission just the same,
    /// but the ring's way costs a copy of the output into an owned buffer, its iovec and
    /// parts allocations, a completion and another turn before the connection goes on.
    fn send_memory(&mut self, index: usize) -> Option<u64> {
        let slot = self.slots.get_mut(index)?;
        let more = if slot.client.conn.output.file_follows_memory() {
            sysio::MSG_MORE
        } else {
            0
        };
        let slices = slot.client.conn.output.memory_slices();
        let pending: usize = slices.iter().map(|slice| slice.len()).sum();
        let sent = sysio::send_vectored(
            slot.client.fd.as_fd(),
            &slices,
            sysio::MSG_NOSIGNAL | sysio::MSG_DONTWAIT | more,
        );
        drop(slices);
        let (sent, full) = match sent {
            Ok(sent) => {
                slot.client.conn.output.advance(sent as u64);
                slot.client.clock.sent(sent as u64);
                self.note_phase(index, sent > 0);
                (sent, sent < pending || sent == 0)
            }
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => (0, true),
            Err(_) => {
                self.close(index);
                return None;
            }
        };
        if full {
            let writable_tag = self.tag(index, Kind::Writable);
            if !self.await_room(index, writable_tag) {
                return None;
            }
        }
        Some(sent as u64)
    }

    /// `sendfile` the file range at the front of the output until the socket is full, the
    /// range ends, or this turn's `send.send_chunk` is spent (others go first, then it
    /// continues; as under the event loop),
    /// handing the range to a helper first when its pages are not resident (Flash §5.4: the
    /// ring thread never waits on the disk). Returns false if the connection had to be closed.
    fn send_file(&mut self, index: usize) -> bool {
        let writable_tag = self.tag(index, Kind::Writable);
        let residency_test = self.core.serving.generation.config.caches.residency_test;
        let mut budget = self.core.serving.generation.config.send.send_chunk as u64;
        loop {
            let Some(slot) = self.slots.get_mut(index) else {
                return false;
            };
            let Some(range) = slot.client.conn.output.front_file() else {
                return true;
            };
            if budget == 0 {
                self.ready.push_back(index);
                return true;
            }
            let len = (range.end - range.offset).min(budget);
            let key = range.file.key;
            let trusted = slot
                .io
                .paged_in
                .is_some_and(|(paged, end)| paged == key && range.offset < end);
            if serve::page_in_needed(
                range.file,
                (range.offset, len),
                trusted,
                self.pages_in_flight.reading(&key),
                residency_test,
            ) {
                self.pages_in_flight.started(key);
                let job = Job::PageIn {
                    file: range.file.clone(),
                    offset: range.offset,
                    len,
                    send_to: None,
                };
                self.submit(index, job);
                return true;
            }
            if !residency_test {
                // As the event loop: without the test a page-in vouches only for the send
                // right after it.
                slot.io.paged_in = None;
            }
            let mut offset = range.offset;
            let count = usize::try_from(len).unwrap_or(usize::MAX);
            let full = match sysio::sendfile(
                slot.client.fd.as_fd(),
                range.file.file.as_fd(),
                &mut offset,
                count,
            ) {
                // The file is shorter than when its head was sent: the response cannot
                // complete, so the connection ends (the client sees a short body).
                Ok(0) => {
                    self.close(index);
                    return false;
                }
                Ok(sent) => {
                    slot.client.conn.output.advance(sent as u64);
                    slot.client.clock.sent(sent as u64);
                    budget = budget.saturating_sub(sent as u64);
                    self.note_phase(index, true);
                    // Short of what was asked: the socket is full (another call would only
                    // say `EAGAIN`).
                    (sent as u64) < len
                }
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => true,
                Err(_) => {
                    self.close(index);
                    return false;
                }
            };
            if full {
                return self.await_room(index, writable_tag);
            }
        }
    }

    /// Poll for room in the client's socket; its completion (`writable`) sends on.
    fn await_room(&mut self, index: usize, writable_tag: u64) -> bool {
        let Some(slot) = self.slots.get_mut(index) else {
            return false;
        };
        match self
            .ring
            .poll_once(slot.client.fd.as_fd(), false, true, writable_tag)
        {
            Ok(op) => {
                slot.io.sending = Sending::Room;
                slot.io.send_op = Some(op);
                true
            }
            Err(_) => {
                self.close(index);
                false
            }
        }
    }
}
