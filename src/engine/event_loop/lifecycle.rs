//! The loop's side of `ops::Control`'s lifecycle: beginning a graceful drain, cutting
//! connections, finishing, and publishing what only the loop can read to its scoreboard shard.
//!
//! Owns: those transitions. Must not touch: HTTP; reading and writing (the parent module).

use std::os::fd::AsFd;
use std::sync::atomic::Ordering;
use std::time::Duration;

use ampd_sys::socket;

use super::EventLoop;
use crate::conn::Phase;

impl EventLoop {
    /// A graceful stop began: stop accepting (the listener closes), and close idle
    /// connections after reading anything they already sent (a request that raced the stop
    /// is answered, with `Connection: close`). Busy connections finish their request.
    pub(super) fn begin_drain(&mut self) {
        self.draining = true;
        self.accept_more = false;
        if let Some(listener) = self.listener.take() {
            let _ = self.epoll.delete(listener.as_fd());
        }
        for index in 0..self.slots.len() {
            let idle = self.slots[index]
                .as_ref()
                .is_some_and(|slot| slot.phase == Phase::Idle && !slot.job_out && !slot.lingering);
            if !idle {
                continue;
            }
            if let Some(slot) = self.slots[index].as_mut() {
                slot.can_read = true;
            }
            self.drive(index);
            let still_idle = self.slots[index]
                .as_ref()
                .is_some_and(|slot| slot.conn.phase() == Phase::Idle && !slot.lingering);
            if still_idle {
                self.begin_close(index);
            }
        }
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

    /// Copy what only this loop can read (cache and helper counters) to its scoreboard shard.
    pub(super) fn publish(&self) {
        let stats = &self.link.stats;
        let caches = [
            (
                self.caches.paths.hits,
                self.caches.paths.misses,
                self.caches.paths.len() as u64,
            ),
            (
                self.caches.heads.hits,
                self.caches.heads.misses,
                self.caches.heads.len() as u64,
            ),
            (
                self.caches.files.hits,
                self.caches.files.misses,
                self.caches.files.weight(),
            ),
        ];
        for (counters, (hits, misses, size)) in stats.caches.iter().zip(caches) {
            counters.hits.store(hits, Ordering::Relaxed);
            counters.misses.store(misses, Ordering::Relaxed);
            counters.size.store(size, Ordering::Relaxed);
        }
        if let Some(helpers) = &self.helpers {
            stats
                .helper_queue
                .store(helpers.queued() as u64, Ordering::Relaxed);
            stats
                .helper_busy
                .store(helpers.busy() as u64, Ordering::Relaxed);
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
