//! The send half of the proactor: starting a `writev` or a file → pipe → socket `splice` for
//! what a connection has queued, and what their completions mean.
//!
//! Owns: one send (or splice pair) in flight per connection. Must not touch: receiving, the
//! connection's lifecycle (`proactor.rs`).

use std::os::fd::AsFd;
use std::time::Instant;

use ampd_sys::io as sysio;
use ampd_sys::uring::{Completion, SendPart};

use super::{Proactor, Sending, PIPE_SIZE, SEND, SEND_CHUNK, SPLICE_IN, SPLICE_OUT};

impl Proactor {
    pub(super) fn sent(&mut self, index: usize, completion: Completion) {
        for part in completion.parts {
            if let SendPart::Owned(mut buffer) = part {
                buffer.clear();
                self.spare.push(buffer);
            }
        }
        let Some(slot) = self.slots[index].as_mut() else {
            return;
        };
        slot.sending = Sending::Nothing;
        match usize::try_from(completion.result) {
            Ok(sent) => {
                slot.conn.output.advance(sent as u64);
                slot.phase_since = Instant::now();
                self.ready.push_back(index);
            }
            Err(_) => self.close(index),
        }
    }

    pub(super) fn spliced_in(&mut self, index: usize, result: i32) {
        let tag = self.tag(index, SPLICE_OUT);
        let Some(slot) = self.slots[index].as_mut() else {
            return;
        };
        // Zero: the file is shorter than when its head was sent; the response cannot complete.
        let Ok(moved) = usize::try_from(result) else {
            return self.close(index);
        };
        if moved == 0 {
            return self.close(index);
        }
        slot.sending = Sending::Splice { in_pipe: moved };
        let Some((pipe_out, _)) = slot.pipe.as_ref() else {
            return self.close(index);
        };
        if self
            .ring
            .splice(pipe_out.as_fd(), None, slot.fd.as_fd(), moved as u32, tag)
            .is_err()
        {
            self.close(index);
        }
    }

    pub(super) fn spliced_out(&mut self, index: usize, result: i32) {
        let tag = self.tag(index, SPLICE_OUT);
        let Some(slot) = self.slots[index].as_mut() else {
            return;
        };
        let Ok(moved) = usize::try_from(result) else {
            return self.close(index);
        };
        let Sending::Splice { in_pipe } = slot.sending else {
            return self.close(index);
        };
        slot.conn.output.advance(moved as u64);
        slot.phase_since = Instant::now();
        let left = in_pipe.saturating_sub(moved);
        if left == 0 || moved == 0 {
            slot.sending = Sending::Nothing;
            if moved == 0 {
                return self.close(index);
            }
            self.ready.push_back(index);
            return;
        }
        slot.sending = Sending::Splice { in_pipe: left };
        let Some((pipe_out, _)) = slot.pipe.as_ref() else {
            return self.close(index);
        };
        if self
            .ring
            .splice(pipe_out.as_fd(), None, slot.fd.as_fd(), left as u32, tag)
            .is_err()
        {
            self.close(index);
        }
    }
    /// Start sending the front of the output if nothing is in flight. Returns false if the
    /// connection had to be closed.
    pub(super) fn start_send(&mut self, index: usize) -> bool {
        let send_tag = self.tag(index, SEND);
        let splice_tag = self.tag(index, SPLICE_IN);
        let Some(slot) = self.slots[index].as_mut() else {
            return false;
        };
        if !matches!(slot.sending, Sending::Nothing) || slot.conn.output.is_empty() {
            return true;
        }
        let started = if let Some(range) = slot.conn.output.front_file() {
            let len = usize::try_from(range.end - range.offset)
                .unwrap_or(usize::MAX)
                .min(SEND_CHUNK) as u32;
            let (file, offset) = (range.file.clone(), range.offset);
            if slot.pipe.is_none() {
                match sysio::pipe() {
                    Ok(pipe) => {
                        let _ = sysio::set_pipe_size(pipe.1.as_fd(), PIPE_SIZE);
                        slot.pipe = Some(pipe);
                    }
                    Err(_) => {
                        self.close(index);
                        return false;
                    }
                }
            }
            let Some((_, pipe_in)) = slot.pipe.as_ref() else {
                return false;
            };
            slot.sending = Sending::Splice { in_pipe: 0 };
            self.ring
                .splice(
                    file.file.as_fd(),
                    Some(offset),
                    pipe_in.as_fd(),
                    len,
                    splice_tag,
                )
                .is_ok()
        } else {
            let mut buffer = self.spare.pop().unwrap_or_default();
            for piece in slot.conn.output.memory_slices() {
                if buffer.len() >= SEND_CHUNK {
                    break;
                }
                buffer.extend_from_slice(&piece);
            }
            slot.sending = Sending::Memory;
            self.ring
                .send(slot.fd.as_fd(), vec![SendPart::Owned(buffer)], send_tag)
                .is_ok()
        };
        if !started {
            self.close(index);
        }
        started
    }
}
