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

use super::{Proactor, Sending, Slot, SWEEP};
use crate::conn::{Context, Phase};
use crate::content::serve::DiskAccess;
use crate::engine::client::Client;
use crate::engine::slab::Slab;
use crate::engine::sweep::{self, Driver, Held};
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
                    && (!self.slots.is_empty() || self.accept_ops.iter().any(Option::is_some))
            }
            RunState::Stopped => false,
        }
    }

    /// A graceful stop began: stop accepting, and close idle connections (what they sent before
    /// is already in; a request that raced the stop is answered, with `Connection: close`).
    fn begin_drain(&mut self) {
        self.draining = true;
        // The op stays recorded until its final completion (`accepted`).
        for armed in &mut self.accept_ops {
            if let Some(op) = *armed {
                if self.ring.cancel(op).is_err() {
                    *armed = None;
                }
            }
        }
        self.listeners.clear();
        sweep::close_drained(self);
    }

    /// Draining, and the connection is idle with nothing in flight.
    pub(super) fn drained(&mut self, index: usize) -> bool {
        sweep::drained(self, index)
    }

    /// Apply each connection's timeouts (`engine::sweep`); free idle connections' buffers;
    /// publish counters; hand the access-log buffer over.
    pub(super) fn sweep(&mut self, now: Instant) {
        // No per-turn loan of buffers here (as the event loop has): an idle connection gives
        // its empty buffers back once it has been idle for a sweep.
        for (_, slot) in self.slots.iter_mut() {
            if slot.client.clock.phase() == Phase::Idle
                && now.saturating_duration_since(slot.client.clock.since()) >= SWEEP
            {
                slot.client.conn.shed_buffers();
            }
        }
        let generation = self.generation.clone();
        sweep::sweep(self, now, &generation.config.limits);
        self.upstream_pool.sweep(now);
        self.publish();
        self.link.log.flush();
    }

    /// The proactor ends: cut what is left, publish counters, hand the log buffer over.
    pub(super) fn finish(&mut self) {
        for index in 0..self.slots.bound() {
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
        if let Some(slot) = self.slots.get(index) {
            let _ = socket::set_linger(slot.client.fd.as_fd(), Some(Duration::ZERO));
        }
        self.close(index);
    }
}

impl Held for Slot {
    fn client(&self) -> &Client {
        &self.client
    }

    fn client_mut(&mut self) -> &mut Client {
        &mut self.client
    }

    /// A send or splice is in flight, or received input waits to be parsed.
    fn busy(&self) -> bool {
        !matches!(self.sending, Sending::Nothing) || self.client.conn.buffered_input() > 0
    }
}

impl Driver for Proactor {
    type Slot = Slot;

    fn slots(&mut self) -> &mut Slab<Slot> {
        &mut self.slots
    }

    fn draining(&self) -> bool {
        self.draining
    }

    fn answer_timeout(&mut self, index: usize) {
        let Some(slot) = self.slots.get_mut(index) else {
            return;
        };
        if !matches!(slot.sending, Sending::Nothing) {
            // A send is out: the client is not reading; no 408 can follow.
            return self.abort(index);
        }
        let mut context = context!(self);
        slot.client.conn.timed_out(&mut context);
        self.settle_upstream(index);
        // The 408 goes out, then the connection closes (bounded by linger).
        self.drive(index);
    }

    fn upstream_timed_out(&mut self, index: usize) {
        if let Some(slot) = self.slots.get_mut(index) {
            slot.client.conn.upstream_timed_out();
        }
        self.drive(index);
    }

    fn reset(&mut self, index: usize) {
        self.abort(index);
    }

    fn close(&mut self, index: usize) {
        Proactor::close(self, index);
    }

    fn begin_close(&mut self, index: usize) {
        Proactor::begin_close(self, index);
    }
}
