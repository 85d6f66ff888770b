//! The buffer loan: a connection uses its event loop's spare input and output buffers for the
//! turn where its own hold nothing, and gives them back at the end of the turn (`Spare`).
//!
//! Owns: which buffers a connection keeps across turns, and taking in the bytes the engine
//! read. Must not touch: what the bytes mean (parsing is `mod.rs`'s).

use super::output::Output;
use super::{upstream, Conn};

/// Input and output buffers an event loop lends to each connection it drives, for the turn.
///
/// Thousands of idle keep-alive connections then cost their bookkeeping and nothing more (nginx
/// frees the header buffers of idle connections for the same reason), and a request answered
/// within one turn allocates no buffer: the same two are lent turn after turn. Only a connection
/// that must keep bytes across turns (a partial request, output the socket did not take) keeps
/// buffers of its own until they empty.
#[derive(Debug, Default)]
pub struct Spare {
    input: Vec<u8>,
    output: Output,
    /// An upstream link's buffers (`upstream::Buffers`).
    link: upstream::Buffers,
}

impl Conn {
    /// Bytes read from the socket (the engine reads into one buffer per loop and hands them
    /// over).
    pub fn receive(&mut self, bytes: &[u8]) {
        if self.consumed == self.input.len() {
            self.input.clear();
            self.consumed = 0;
        } else if self.consumed > 0 && self.consumed >= self.input.len() / 2 {
            self.input.drain(..self.consumed);
            self.consumed = 0;
        }
        self.input.extend_from_slice(bytes);
    }

    /// Use the loop's spare buffers for this turn where ours hold nothing (see `Spare`).
    pub fn borrow_buffers(&mut self, spare: &mut Spare) {
        if self.consumed == self.input.len() && self.input.capacity() == 0 {
            std::mem::swap(&mut self.input, &mut spare.input);
            self.input.clear();
            self.consumed = 0;
        }
        if self.output.is_empty() && !self.output.holds_memory() {
            self.output.trade_memory(&mut spare.output);
        }
        if self.link_buffers.is_empty() {
            std::mem::swap(&mut self.link_buffers, &mut spare.link);
        }
    }

    /// End of a turn: buffers that hold nothing go back to the loop (or are freed if the loop
    /// already has its spare), so a connection between requests owns no buffer memory.
    pub fn return_buffers(&mut self, spare: &mut Spare) {
        if self.consumed == self.input.len() {
            self.input.clear();
            self.consumed = 0;
            if spare.input.capacity() == 0 {
                std::mem::swap(&mut self.input, &mut spare.input);
            } else {
                self.input = Vec::new();
            }
        }
        if self.output.is_empty() {
            if spare.output.holds_memory() {
                self.output.shed();
            } else {
                self.output.trade_memory(&mut spare.output);
            }
        }
        if spare.link.is_empty() {
            std::mem::swap(&mut self.link_buffers, &mut spare.link);
        }
        self.link_buffers = upstream::Buffers::default();
    }

    /// Free buffers that hold nothing, for engines that keep idle connections without a loop
    /// to lend buffers (the blocking engines' waiting room, the proactor): an idle keep-alive
    /// connection then costs little more than its bookkeeping.
    pub fn shed_buffers(&mut self) {
        if self.consumed == self.input.len() {
            self.input = Vec::new();
            self.consumed = 0;
        }
        self.output.shed();
        self.link_buffers = upstream::Buffers::default();
    }
}
