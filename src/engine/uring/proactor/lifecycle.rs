//! The proactor's side of `ops::Control`'s lifecycle and of its timeouts, as the event loop's:
//! taking up a reload, the graceful drain (stop accepting, close idle connections, finish busy
//! ones until the deadline), the periodic sweep (`PhaseClock::check`: header, body, idle, send,
//! minimum send rate, linger), and publishing counters.
//!
//! Owns: those transitions. Must not touch: HTTP; receiving and sending (`proactor.rs`,
//! `send.rs`).

use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use ampd_sys::socket;

use super::{Proactor, Sending, SWEEP};
use crate::conn::{Context, Phase};
use crate::content::serve::DiskAccess;
use crate::engine::phase_clock::Expired;
use crate::ops::{self, RunState};

impl Proactor {
    /// Take up a reload and obey the run state; `false` when the proactor is to end.
    pub(super) fn follow_lifecycle(&mut self) -> bool {
        if self.control.refresh(&mut self.epoch, &mut self.generation) {
            self.link.log.set_format(ops::log_format(&self.generation));
            // Translations are keyed by the old generation's roots: they can never hit again.
            self.caches.paths.clear();
        }
        match self.control.run_state() {
            RunState::Running => true,
            // Still accepting; responses say the stop is coming (`drain_delay`).
            RunState::Announcing { .. } => {
                self.announcing = true;
                true
            }
            RunState::Draining { deadline } => {
                if !self.draining {
                    self.begin_drain();
                }
                // Until the cancelled accept's last completion is in: a connection the kernel
                // accepted for it meanwhile is served, not dropped with a reset (an upgrade's
                // successor accepts on the same socket, so connections arrive to the end).
                Instant::now() < deadline
                    && (self.slots.iter().any(Option::is_some) || self.accept_op.is_some())
            }
            RunState::Stopped => false,
        }
    }

    /// A graceful stop began: stop accepting, and close idle connections (what they sent before
    /// is already in; a request that raced the stop is answered, with `Connection: close`).
    fn begin_drain(&mut self) {
        self.draining = true;
        // The op stays recorded until its final completion (`accepted`).
        if let Some(op) = self.accept_op {
            if self.ring.cancel(op).is_err() {
                self.accept_op = None;
            }
        }
        self.listener = None;
        for index in 0..self.slots.len() {
            self.close_if_drained(index);
        }
    }

    /// While draining, a connection with nothing left to do closes at once, FIN after its last
    /// byte: an idle one when the drain begins, and one whose response, begun before the stop
    /// and so without `Connection: close`, has just gone out. Without this such a connection
    /// stayed open, idle, until the grace period ended and reset it.
    pub(super) fn close_if_drained(&mut self, index: usize) {
        if self.drained(index) {
            self.begin_close(index);
        }
    }

    /// Draining, and the connection is idle with nothing in flight.
    pub(super) fn drained(&self, index: usize) -> bool {
        self.draining
            && self.slots[index].as_ref().is_some_and(|slot| {
                slot.conn.phase() == Phase::Idle
                    && slot.conn.buffered_input() == 0
                    && !slot.job_out
                    && !slot.lingering
                    && matches!(slot.sending, Sending::Nothing)
                    && slot
                        .clock
                        .drain_may_close(slot.conn.has_answered(), Instant::now())
            })
    }

    /// Apply each connection's timeouts; publish counters; hand the access-log buffer over.
    pub(super) fn sweep(&mut self, now: Instant) {
        let mut expired = Vec::new();
        let limits = &self.generation.config.limits;
        for (index, slot) in self.slots.iter_mut().enumerate() {
            let Some(slot) = slot else { continue };
            if slot.clock.phase() == Phase::Idle
                && now.saturating_duration_since(slot.clock.since()) >= SWEEP
            {
                slot.conn.shed_buffers();
            }
            if let Some(why) = slot.clock.check(now, limits, slot.job_out) {
                expired.push((index, why));
            }
        }
        for (index, why) in expired {
            match why {
                Expired::Request => {
                    if let Some(slot) = self.slots[index].as_mut() {
                        if !matches!(slot.sending, Sending::Nothing) {
                            // A send is out: the client is not reading; no 408 can follow.
                            self.abort(index);
                            continue;
                        }
                        let mut context = context!(self);
                        slot.conn.timed_out(&mut context);
                    }
                    // The 408 goes out, then the connection closes (bounded by linger).
                    self.drive(index);
                }
                Expired::Sending => self.abort(index),
                Expired::Quietly => self.close(index),
            }
        }
        if self.draining {
            // Connections that were still to send their first request when the drain began.
            for index in 0..self.slots.len() {
                self.close_if_drained(index);
            }
        }
        self.publish();
        self.link.log.flush();
    }

    /// The proactor ends: cut what is left, publish counters, hand the log buffer over.
    pub(super) fn finish(&mut self) {
        for index in 0..self.slots.len() {
            self.abort(index);
        }
        self.publish();
        self.link.log.flush();
    }

    fn publish(&self) {
        self.caches.publish(&self.link.stats);
        self.link
            .stats
            .publish_helpers(self.helpers.queued() as u64, self.helpers.busy() as u64);
    }

    /// Close with a reset (`SO_LINGER` 0): what is still queued for the client is discarded.
    fn abort(&mut self, index: usize) {
        if let Some(slot) = self.slots[index].as_ref() {
            let _ = socket::set_linger(slot.fd.as_fd(), Some(Duration::ZERO));
        }
        self.close(index);
    }
}
