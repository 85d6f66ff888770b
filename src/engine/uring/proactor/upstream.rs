//! The proactor's side of a connection's upstream socket (`engine::upstream`): readiness by a
//! single-shot `IORING_OP_POLL_ADD` tagged with the connection's token of kind `Upstream`, then
//! the same non-blocking pump as the epoll loop; opening it for `Need::Connect` and taking it
//! back when `Conn` is done with it (this ring's idle pool, or closed).
//!
//! Owns: at most one poll in flight per upstream socket. Must not touch: the client socket's
//! receive and send (`proactor.rs`, `send.rs`), HTTP.

use std::os::fd::AsFd;

use ampd_sys::uring::{poll_events, Completion};

use super::Proactor;
use crate::conn::Connect;
use crate::engine::slab::Kind;
use crate::engine::upstream;

impl Proactor {
    /// Move what can move between the upstream socket and `Conn`; whether anything did.
    pub(super) fn pump_upstream(&mut self, index: usize) -> bool {
        let Some(slot) = self.slots.get_mut(index) else {
            return false;
        };
        match slot.client.upstream.as_mut() {
            Some(socket) => upstream::pump(socket, &mut slot.client.conn, &mut self.scratch),
            None => false,
        }
    }

    /// Carry out `Need::Connect`: a socket from the ring's idle pool or a new one; the poll
    /// that watches it is armed by `watch_upstream`.
    pub(super) fn connect_upstream(&mut self, index: usize, connect: &Connect) {
        self.drop_upstream(index);
        let Some(slot) = self.slots.get_mut(index) else {
            return;
        };
        slot.client.upstream =
            upstream::open(connect, &mut slot.client.conn, &mut self.upstream_pool);
    }

    /// After `advance`, `job_done` or `timed_out`: the socket `Conn` is done with goes to the
    /// idle pool or is closed, and its poll is cancelled.
    pub(super) fn settle_upstream(&mut self, index: usize) {
        let Some(slot) = self.slots.get_mut(index) else {
            return;
        };
        upstream::release(
            &mut slot.client.conn,
            &mut slot.client.upstream,
            &mut self.upstream_pool,
            |_| {},
        );
        if slot.client.upstream.is_none() {
            if let Some(op) = slot.upstream_poll.take() {
                let _ = self.ring.cancel(op);
            }
        }
    }

    /// Close the connection's upstream socket, if any, and cancel its poll.
    pub(super) fn drop_upstream(&mut self, index: usize) {
        let Some(slot) = self.slots.get_mut(index) else {
            return;
        };
        slot.client.upstream = None;
        if let Some(op) = slot.upstream_poll.take() {
            let _ = self.ring.cancel(op);
        }
    }

    /// After a turn: run the connection again if its upstream can move now, else poll for what
    /// it waits on (once: a poll already in flight covers it).
    pub(super) fn watch_upstream(&mut self, index: usize) {
        let tag = self.tag(index, Kind::Upstream);
        let Some(slot) = self.slots.get_mut(index) else {
            return;
        };
        let Some(socket) = slot.client.upstream.as_ref() else {
            return;
        };
        if socket.can_move(&slot.client.conn) {
            self.ready.push_back(index);
            return;
        }
        let wants = socket.wants(&slot.client.conn);
        if let Some(op) = slot.upstream_poll {
            let watching = slot.upstream_watching;
            if (watching.read || !wants.read) && (watching.write || !wants.write) {
                // The poll in flight covers what is waited for.
                return;
            }
            // It does not (it waits for a response while the request now waits for room, as
            // in an upload): replace it, or neither would ever complete.
            let _ = self.ring.cancel(op);
            slot.upstream_poll = None;
        }
        if !wants.any() {
            return;
        }
        match self
            .ring
            .poll_once(socket.fd.as_fd(), wants.read, wants.write, tag)
        {
            Ok(op) => {
                slot.upstream_poll = Some(op);
                slot.upstream_watching = wants;
            }
            Err(error) => {
                slot.client.conn.upstream_failed(&error);
                self.ready.push_back(index);
            }
        }
    }

    /// The upstream socket's poll completed: note what is ready and drive the connection.
    pub(super) fn upstream_polled(&mut self, index: usize, completion: &Completion) {
        let Some(slot) = self.slots.get_mut(index) else {
            return;
        };
        // A cancelled poll of a socket given up already completes too: only the current one
        // counts.
        if slot.upstream_poll != Some(completion.op) {
            return;
        }
        slot.upstream_poll = None;
        if let Some(socket) = slot.client.upstream.as_mut() {
            let events = poll_events(completion.result);
            socket.ready(events.readable, events.writable, events.error_or_hangup);
        }
        self.ready.push_back(index);
    }
}
