//! The send half of the proactor: starting a `writev` or a file → pipe → socket `splice` for
//! what a connection has queued, and what their completions mean.
//!
//! Owns: one send (or splice pair) in flight per connection. Must not touch: receiving, the
//! connection's lifecycle (`proactor.rs`).

use std::os::fd::AsFd;

use ampd_sys::io as sysio;
use ampd_sys::uring::{Completion, SendPart};

use super::{Proactor, Sending, PIPE_SIZE, SEND_CHUNK};
use crate::content::job::Job;
use crate::content::serve;
use crate::engine::core::Driver;
use crate::engine::phase_clock::SEND_RATE_WINDOW;
use crate::engine::slab::Kind;
use crate::tls::session::SEAL_BATCH;

impl Proactor {
    pub(super) fn sent(&mut self, index: usize, completion: Completion) {
        if self
            .slots
            .get(index)
            .is_some_and(|slot| matches!(slot.io.sending, Sending::Records))
        {
            return self.sent_records(index, completion);
        }
        for part in completion.parts {
            if let SendPart::Owned(mut buffer) = part {
                buffer.clear();
                self.spare.push(buffer);
            }
        }
        let Some(slot) = self.slots.get_mut(index) else {
            return;
        };
        slot.io.sending = Sending::Nothing;
        slot.io.send_op = None;
        match usize::try_from(completion.result) {
            Ok(sent) => {
                slot.client.conn.output.advance(sent as u64);
                slot.client.clock.sent(sent as u64);
                self.note_phase(index, sent > 0);
                self.ready.push_back(index);
            }
            Err(_) => self.close(index),
        }
    }

    pub(super) fn spliced_in(&mut self, index: usize, result: i32) {
        let tag = self.tag(index, Kind::SpliceOut);
        let Some(slot) = self.slots.get_mut(index) else {
            return;
        };
        // Zero: the file is shorter than when its head was sent; the response cannot complete.
        let Ok(moved) = usize::try_from(result) else {
            return self.close(index);
        };
        if moved == 0 {
            return self.close(index);
        }
        slot.io.sending = Sending::Splice { in_pipe: moved };
        let Some((pipe_out, _)) = slot.io.pipe.as_ref() else {
            return self.close(index);
        };
        match self.ring.splice(
            pipe_out.as_fd(),
            None,
            slot.client.fd.as_fd(),
            moved as u32,
            tag,
        ) {
            Ok(op) => slot.io.send_op = Some(op),
            Err(_) => self.close(index),
        }
    }

    pub(super) fn spliced_out(&mut self, index: usize, result: i32) {
        let tag = self.tag(index, Kind::SpliceOut);
        let Some(slot) = self.slots.get_mut(index) else {
            return;
        };
        let Ok(moved) = usize::try_from(result) else {
            return self.close(index);
        };
        let Sending::Splice { in_pipe } = slot.io.sending else {
            return self.close(index);
        };
        slot.client.conn.output.advance(moved as u64);
        slot.client.clock.sent(moved as u64);
        let left = in_pipe.saturating_sub(moved);
        if left == 0 || moved == 0 {
            slot.io.sending = Sending::Nothing;
            slot.io.send_op = None;
            if moved == 0 {
                return self.close(index);
            }
            self.note_phase(index, true);
            self.ready.push_back(index);
            return;
        }
        let phase = slot.client.conn.phase();
        slot.client
            .clock
            .note(phase, true, self.core.clock.now(), &self.core.link.stats);
        slot.io.sending = Sending::Splice { in_pipe: left };
        let Some((pipe_out, _)) = slot.io.pipe.as_ref() else {
            return self.close(index);
        };
        match self.ring.splice(
            pipe_out.as_fd(),
            None,
            slot.client.fd.as_fd(),
            left as u32,
            tag,
        ) {
            Ok(op) => slot.io.send_op = Some(op),
            Err(_) => self.close(index),
        }
    }
    /// A send of TLS records completed: what the socket did not take goes again from the same
    /// buffer (records cannot be made again, unlike the output's plain bytes).
    fn sent_records(&mut self, index: usize, completion: Completion) {
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
                let resident =
                    residency_test && serve::range_resident(range.file, range.offset, len);
                if trusted && !residency_test {
                    // As the event loop: without the test a page-in vouches only for the
                    // records sealed right after it.
                    slot.io.paged_in = None;
                }
                if !trusted && !resident {
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

    /// Start sending the front of the output if nothing is in flight. Returns false if the
    /// connection had to be closed.
    pub(super) fn start_send(&mut self, index: usize) -> bool {
        let send_tag = self.tag(index, Kind::Send);
        let splice_tag = self.tag(index, Kind::SpliceIn);
        let Some(slot) = self.slots.get_mut(index) else {
            return false;
        };
        if slot.client.tls.is_some() {
            if !matches!(slot.io.sending, Sending::Nothing) || slot.client.job_out {
                return true;
            }
            return self.start_send_tls(index);
        }
        if !matches!(slot.io.sending, Sending::Nothing) || slot.client.conn.output.is_empty() {
            return true;
        }
        let started = if let Some(range) = slot.client.conn.output.front_file() {
            let chunk = splice_chunk(self.core.serving.generation.config.limits.min_send_rate);
            slot.client
                .clock
                .set_slack(chunk as u64, std::time::Instant::now());
            let len = usize::try_from(range.end - range.offset)
                .unwrap_or(usize::MAX)
                .min(chunk) as u32;
            let (file, offset) = (range.file.clone(), range.offset);
            if slot.io.pipe.is_none() {
                match sysio::pipe() {
                    Ok(pipe) => {
                        let _ = sysio::set_pipe_size(pipe.1.as_fd(), PIPE_SIZE);
                        slot.io.pipe = Some(pipe);
                    }
                    Err(_) => {
                        self.close(index);
                        return false;
                    }
                }
            }
            let Some((_, pipe_in)) = slot.io.pipe.as_ref() else {
                return false;
            };
            slot.io.sending = Sending::Splice { in_pipe: 0 };
            self.ring
                .splice(
                    file.file.as_fd(),
                    Some(offset),
                    pipe_in.as_fd(),
                    len,
                    splice_tag,
                )
                .map(|op| slot.io.send_op = Some(op))
                .is_ok()
        } else {
            let mut buffer = self.spare.pop().unwrap_or_default();
            for piece in slot.client.conn.output.memory_slices() {
                if buffer.len() >= SEND_CHUNK {
                    break;
                }
                buffer.extend_from_slice(&piece);
            }
            slot.io.sending = Sending::Memory;
            self.ring
                .send(
                    slot.client.fd.as_fd(),
                    vec![SendPart::Owned(buffer)],
                    send_tag,
                )
                .map(|op| slot.io.send_op = Some(op))
                .is_ok()
        };
        if !started {
            self.close(index);
        }
        started
    }
}

/// Bytes one splice moves. A splice into a socket completes only when all of it is sent, so
/// with a minimum send rate it is kept to half of what a rate window must move: a reader at the
/// minimum rate then completes splices within every window, and a stalled one cannot hide
/// behind one that never completes.
fn splice_chunk(min_send_rate: u64) -> usize {
    if min_send_rate == 0 {
        return SEND_CHUNK;
    }
    let per_window = min_send_rate as f64 * SEND_RATE_WINDOW.as_secs_f64();
    ((per_window / 2.0) as usize).clamp(16 << 10, SEND_CHUNK)
}
