//! The proactor's side of the connection core (`engine::core`): what differs from the event
//! loop when a connection closes, lingers or is swept (operations in flight are cancelled, a
//! lingering connection keeps a receive armed), and its part of a graceful drain (the
//! multishot accepts are cancelled; what they still complete with is served).
//!
//! Owns: those engine-specific steps. Must not touch: HTTP; receiving and sending
//! (`proactor.rs`, `send.rs`); the policy itself (`engine::core::Driver`).

use std::os::fd::AsFd;
use std::time::Instant;

use ampd_sys::socket;

use super::{InFlight, Proactor, Sending, Slot, SWEEP};
use crate::conn::Phase;
use crate::engine::core::{self, Core, Driver, Follow};
use crate::engine::slab::Slab;

impl Proactor {
    /// Take up a reload and obey the run state; `false` when the proactor is to end.
    pub(super) fn follow_lifecycle(&mut self) -> bool {
        match self.core.follow() {
            Follow::Serve => true,
            Follow::Drain { began, deadline } => {
                if began {
                    self.begin_drain();
                }
                // Until the cancelled accept's last completion is in: a connection the kernel
                // accepted for it meanwhile is served, not dropped with a reset (an upgrade's
                // successor accepts on the same socket, so connections arrive to the end).
                Instant::now() < deadline
                    && (!self.slots.is_empty() || self.accept_ops.iter().any(Option::is_some))
            }
            Follow::End => false,
        }
    }

    /// A graceful stop began: stop accepting, take what waits in the listen backlog (it was sent
    /// before the stop: `core::take_backlog`, as every engine does), and close idle connections
    /// (what they sent before is already in; a request that raced the stop is answered, with
    /// `Connection: close`). What the cancelled multishot accepts still complete with is served.
    fn begin_drain(&mut self) {
        // The op stays recorded until its final completion (`accepted`).
        for armed in &mut self.accept_ops {
            if let Some(op) = *armed {
                if self.ring.cancel(op).is_err() {
                    *armed = None;
                }
            }
        }
        // Taken with `accept`, which must find the backlog empty rather than wait: the ring's
        // listeners are blocking (`run`) for its own accepts, which are cancelled now. The
        // flag is on the socket an upgrade's successor shares, so it is put back at once.
        let listeners: Vec<_> = std::mem::take(&mut self.listeners)
            .into_iter()
            .filter(|listener| socket::set_nonblocking(listener.as_fd(), true).is_ok())
            .collect();
        core::take_backlog(&listeners, |listener| {
            let accepted = self.core.door().accept(listener);
            accepted.map(|client| {
                // The ring's receives and sends wait on a blocking socket, as the multishot
                // accept makes them; on a non-blocking one they complete with `EAGAIN`.
                if socket::set_nonblocking(client.fd.as_fd(), false).is_ok() {
                    self.admit(*client);
                }
            })
        });
        for listener in &listeners {
            let _ = socket::set_nonblocking(listener.as_fd(), false);
        }
        self.close_drained();
    }

    /// Apply each connection's timeouts (`Driver::sweep`) after freeing idle connections'
    /// buffers.
    pub(super) fn sweep_idle(&mut self, now: Instant) {
        // No per-turn loan of buffers here (as the event loop has): an idle connection gives
        // its empty buffers back once it has been idle for a sweep.
        for (_, slot) in self.slots.iter_mut() {
            if slot.client.clock.phase() == Phase::Idle
                && now.saturating_duration_since(slot.client.clock.since()) >= SWEEP
            {
                slot.client.conn.shed_buffers();
            }
        }
        self.sweep(now);
    }
}

impl Driver for Proactor {
    type Io = InFlight;

    fn parts(&mut self) -> (&mut Core, &mut Slab<Slot>) {
        (&mut self.core, &mut self.slots)
    }

    /// A send or splice is in flight, or received input waits to be parsed.
    fn busy(slot: &Slot) -> bool {
        !matches!(slot.io.sending, Sending::Nothing) || slot.client.conn.buffered_input() > 0
    }

    fn drive(&mut self, index: usize) {
        Proactor::drive(self, index);
    }

    fn remove(&mut self, index: usize) -> Option<Slot> {
        self.remove_slot(index)
    }

    fn settle_upstream(&mut self, index: usize) {
        Proactor::settle_upstream(self, index);
    }

    fn drop_upstreams(&mut self, index: usize) {
        self.drop_upstream(index);
    }

    /// Input is discarded as the receive completes (`received`), until end of stream.
    fn linger(&mut self, index: usize) {
        self.arm_receive(index);
    }

    /// A send or splice in flight means the client is not reading.
    fn may_write_now(&self, index: usize) -> bool {
        self.slots
            .get(index)
            .is_some_and(|slot| matches!(slot.io.sending, Sending::Nothing))
    }

    /// The ring receives as data comes: nothing received waits to be parsed.
    fn input_drained(&self, index: usize) -> bool {
        self.slots
            .get(index)
            .is_some_and(|slot| slot.client.conn.buffered_input() == 0)
    }

    fn publish(&self) {
        self.core.caches.publish(&self.core.link.stats);
        self.core
            .link
            .stats
            .publish_helpers(self.helpers.queued() as u64, self.helpers.busy() as u64);
    }
}
