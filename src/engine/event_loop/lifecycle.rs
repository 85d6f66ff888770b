//! The loop's side of the connection core (`engine::core`): what differs from the proactor
//! when a connection closes, lingers or is swept, and its part of a graceful drain.
//!
//! Owns: those engine-specific steps. Must not touch: HTTP; reading and writing (`drive.rs`);
//! the policy itself (`engine::core::Driver`).

use super::{EventLoop, Readiness, Slot};
use crate::conn::Phase;
use crate::engine::core::{self, Core, Driver};
use crate::engine::slab::Slab;

impl EventLoop {
    /// A graceful stop began: take the connections already waiting in the listen backlog (they
    /// were sent before the stop; an event loop normally takes them at once anyway), then stop
    /// accepting (the listener closes), and close idle connections after reading anything they
    /// already sent (a request that raced the stop is answered, with `Connection: close`).
    /// Busy connections finish their request.
    pub(super) fn begin_drain(&mut self) {
        let listeners = std::mem::take(&mut self.listeners);
        core::take_backlog(&listeners, |listener| {
            let accepted = self.core.door().accept(listener);
            accepted.map(|client| self.admit(*client))
        });
        self.accept_more = false;
        for listener in listeners {
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
                slot.io.can_read = true;
            }
            // Reads what it sent (a request that raced the stop is answered), then closes.
            self.drive(index);
            self.close_if_drained(index);
        }
    }
}

impl Driver for EventLoop {
    type Io = Readiness;

    fn parts(&mut self) -> (&mut Core, &mut Slab<Slot>) {
        (&mut self.core, &mut self.slots)
    }

    fn drive(&mut self, index: usize) {
        EventLoop::drive(self, index);
    }

    /// Closing the descriptor (as the slot is dropped) removes it from the epoll set.
    fn remove(&mut self, index: usize) -> Option<Slot> {
        self.slots.remove(index)
    }

    /// Read what is there now; the rest comes with the socket's next event (`drive`).
    fn linger(&mut self, index: usize) {
        let Some(slot) = self.slots.get_mut(index) else {
            return;
        };
        if slot.client.linger_read(&mut self.core.scratch) {
            self.close(index);
        }
    }

    /// The last read found the socket drained (edge-triggered epoll reports more).
    fn input_drained(&self, index: usize) -> bool {
        self.slots.get(index).is_some_and(|slot| !slot.io.can_read)
    }

    fn publish(&self) {
        self.core.caches.publish(&self.core.link.stats);
        if let Some(helpers) = &self.helpers {
            self.core
                .link
                .stats
                .publish_helpers(helpers.queued() as u64, helpers.busy() as u64);
        }
    }
}
