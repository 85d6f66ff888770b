//! The loop's side of `ops::Control`'s lifecycle and of its timeouts: the periodic sweep,
//! beginning a graceful drain, cutting connections, finishing, and publishing what only the
//! loop can read to its scoreboard slot.
//!
//! Owns: those transitions. Must not touch: HTTP; reading and writing (`drive.rs`).

use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use ampd_sys::socket;

use super::EventLoop;
use crate::conn::{Context, Phase};
use crate::engine::phase_clock::Expired;

/// Accept batches taken from the backlog when a graceful stop begins (64 connections each).
const DRAIN_ACCEPT_BATCHES: usize = 16;

impl EventLoop {
    /// Apply each connection's timeouts and the minimum send rate (`PhaseClock::check`);
    /// publish counters; hand the access-log buffer to its thread.
    pub(super) fn sweep(&mut self, now: Instant) {
        let limits = &self.generation.config.limits;
        let mut expired = Vec::new();
        for (index, slot) in self.slots.iter_mut().enumerate() {
            let Some(slot) = slot else { continue };
            if let Some(why) = slot.clock.check(now, limits, slot.job_out) {
                expired.push((index, why));
            }
        }
        for (index, why) in expired {
            match why {
                Expired::Request => {
                    if let Some(slot) = self.slots[index].as_mut() {
                        let mut context = context!(self);
                        slot.conn.timed_out(&mut context);
                        slot.can_read = false;
                    }
                    self.drive(index);
                    // If the 408 could not go out at once, the client is not reading: end it.
                    if let Some(slot) = self.slots[index].as_ref() {
                        if !slot.lingering {
                            self.close(index);
                        }
                    }
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

    /// A graceful stop began: take the connections already waiting in the listen backlog (they
    /// were sent before the stop; an event loop normally takes them at once anyway), then stop
    /// accepting (the listener closes), and close idle connections after reading anything they
    /// already sent (a request that raced the stop is answered, with `Connection: close`).
    /// Busy connections finish their request.
    pub(super) fn begin_drain(&mut self) {
        self.draining = true;
        // Bounded: under a flood the backlog refills as fast as it is taken.
        for _ in 0..DRAIN_ACCEPT_BATCHES {
            if self.listener.is_none() || !self.accept_more_now() {
                break;
            }
        }
        self.accept_more = false;
        if let Some(listener) = self.listener.take() {
            let _ = self.epoll.delete(listener.as_fd());
        }
        for index in 0..self.slots.len() {
            let idle = self.slots[index].as_ref().is_some_and(|slot| {
                slot.clock.phase() == Phase::Idle && !slot.job_out && !slot.lingering
            });
            if !idle {
                continue;
            }
            if let Some(slot) = self.slots[index].as_mut() {
                slot.can_read = true;
            }
            // Reads what it sent (a request that raced the stop is answered), then closes.
            self.drive(index);
            self.close_if_drained(index);
        }
    }

    /// While draining, a connection with nothing left to do closes at once, FIN after its last
    /// byte: an idle one when the drain begins, and one whose response, begun before the stop
    /// and so without `Connection: close`, has just gone out. Without this such a connection
    /// stayed open, idle, until the grace period ended and reset it.
    pub(super) fn close_if_drained(&mut self, index: usize) {
        if !self.draining {
            return;
        }
        let now = Instant::now();
        let idle = self.slots[index].as_ref().is_some_and(|slot| {
            slot.conn.phase() == Phase::Idle
                && !slot.job_out
                && !slot.lingering
                && slot.clock.drain_may_close(slot.conn.has_answered(), now)
        });
        if idle {
            self.begin_close(index);
        }
    }

    /// One accept batch during the drain; whether the backlog may hold more.
    fn accept_more_now(&mut self) -> bool {
        self.accept_paused_until = None;
        self.accept_batch();
        self.accept_more && self.accept_paused_until.is_none()
    }

    /// The loop ends: cut what is left (the grace period is over, or a stop), hand the
    /// access-log buffer over, publish counters.
    pub(super) fn finish(&mut self) {
        for index in 0..self.slots.len() {
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
        if let Some(slot) = self.slots[index].as_ref() {
            let _ = socket::set_linger(slot.fd.as_fd(), Some(Duration::ZERO));
        }
        self.close(index);
    }
}
