//! The loop's side of `ops::Control`'s lifecycle and of its timeouts: the periodic sweep,
//! beginning a graceful drain, cutting connections, finishing, and publishing what only the
//! loop can read to its scoreboard slot.
//!
//! Owns: those transitions. Must not touch: HTTP; reading and writing (`drive.rs`).

use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use ampd_sys::socket;

use super::{EventLoop, Slot};
use crate::conn::{Context, Phase};
use crate::engine::client::Client;
use crate::engine::slab::Slab;
use crate::engine::sweep::{self, Driver, Held};

/// Accept batches taken from the backlog when a graceful stop begins (64 connections each).
const DRAIN_ACCEPT_BATCHES: usize = 16;

impl EventLoop {
    /// Apply each connection's timeouts and the minimum send rate (`engine::sweep`); publish
    /// counters; hand the access-log buffer to its thread.
    pub(super) fn sweep(&mut self, now: Instant) {
        let generation = self.generation.clone();
        sweep::sweep(self, now, &generation.config.limits);
        self.upstream_pool.sweep(now);
        self.publish();
        self.link.log.flush();
    }

    /// A graceful stop began: take the connections already waiting in the listen backlog (they
    /// were sent before the stop; an event loop normally takes them at once anyway), then stop
    /// accepting (the listener closes), and close idle connections after reading anything they
    /// already sent (a request that raced the stop is answered, with `Connection: close`).
    /// Busy connections finish their request.
    pub(super) fn begin_drain(&mut self) {
        self.draining = true;
        // Bounded: under a flood the backlog refills as fast as it is taken.
        for _ in 0..DRAIN_ACCEPT_BATCHES {
            if self.listeners.is_empty() || !self.accept_more_now() {
                break;
            }
        }
        self.accept_more = false;
        for listener in self.listeners.drain(..) {
            let _ = self.epoll.delete(listener.as_fd());
        }
        self.backlogged.clear();
        for index in 0..self.slots.bound() {
            let idle = self.slots.get(index).is_some_and(|slot| {
                slot.client.clock.phase() == Phase::Idle
                    && !slot.client.job_out
                    && !slot.client.lingering
            });
            if !idle {
                continue;
            }
            if let Some(slot) = self.slots.get_mut(index) {
                slot.can_read = true;
            }
            // Reads what it sent (a request that raced the stop is answered), then closes.
            self.drive(index);
            self.close_if_drained(index);
        }
    }

    /// While draining, close the connection if it has nothing left to do (`engine::sweep`).
    pub(super) fn close_if_drained(&mut self, index: usize) {
        sweep::close_if_drained(self, index);
    }

    /// One accept batch during the drain; whether the backlog may hold more.
    fn accept_more_now(&mut self) -> bool {
        self.accept_paused_until = None;
        self.backlogged.fill(true);
        self.accept_batch();
        self.accept_more && self.accept_paused_until.is_none()
    }

    /// The loop ends: cut what is left (the grace period is over, or a stop), hand the
    /// access-log buffer over, publish counters.
    pub(super) fn finish(&mut self) {
        for index in 0..self.slots.bound() {
            self.abort(index);
        }
        self.publish();
        self.link.log.flush();
    }

    /// Copy what only this loop can read (cache and helper counters) to its scoreboard slot.
    pub(super) fn publish(&self) {
        self.caches.publish(&self.link.stats);
        if let Some(helpers) = &self.helpers {
            self.link
                .stats
                .publish_helpers(helpers.queued() as u64, helpers.busy() as u64);
        }
    }

    /// Close with a reset (`SO_LINGER` 0): what is still queued for the client is discarded.
    pub(super) fn abort(&mut self, index: usize) {
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

    /// The loop moves bytes only while it drives a connection: between turns nothing is in
    /// flight.
    fn busy(&self) -> bool {
        false
    }
}

impl Driver for EventLoop {
    type Slot = Slot;

    fn slots(&mut self) -> &mut Slab<Slot> {
        &mut self.slots
    }

    fn draining(&self) -> bool {
        self.draining
    }

    fn answer_timeout(&mut self, index: usize) {
        if let Some(slot) = self.slots.get_mut(index) {
            let mut context = context!(self);
            slot.client.conn.timed_out(&mut context);
            slot.can_read = false;
        }
        self.settle_upstream(index);
        self.drive(index);
        // If the 408 could not go out at once, the client is not reading: end it.
        if self
            .slots
            .get(index)
            .is_some_and(|slot| !slot.client.lingering)
        {
            self.close(index);
        }
    }

    fn reset(&mut self, index: usize) {
        self.abort(index);
    }

    fn close(&mut self, index: usize) {
        EventLoop::close(self, index);
    }

    fn upstream_timed_out(&mut self, index: usize) {
        if let Some(slot) = self.slots.get_mut(index) {
            slot.client.conn.upstream_timed_out();
        }
        self.drive(index);
    }

    fn begin_close(&mut self, index: usize) {
        EventLoop::begin_close(self, index);
    }
}
