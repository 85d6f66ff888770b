//! The proactor's side of a connection's upstream sockets (`engine::upstream`): readiness by a
//! single-shot `IORING_OP_POLL_ADD` per socket, tagged with the connection's token of kind
//! `Upstream` for its link, then the same non-blocking pump as the epoll loop; opening a socket
//! for `Need::Connect` and taking it back when `Conn` is done with it (this ring's idle pool,
//! or closed).
//!
//! Owns: at most one poll in flight per upstream socket. Must not touch: the client socket's
//! receive and send (`proactor.rs`, `send.rs`), HTTP.

use std::os::fd::AsFd;

use ampd_sys::uring::{poll_events, Completion, OpId};

use super::Proactor;
use crate::conn::{Connect, LinkId};
use crate::engine::slab::{self, Kind};
use crate::engine::upstream::{self, Wants};

/// The poll in flight on one upstream socket.
#[derive(Debug, Clone, Copy)]
pub(super) struct UpstreamPoll {
    link: LinkId,
    op: OpId,
    /// What it waits for.
    watching: Wants,
}

impl UpstreamPoll {
    pub(super) fn op(&self) -> OpId {
        self.op
    }
}

impl Proactor {
    /// Move what can move between the upstream sockets and `Conn`; whether anything did.
    pub(super) fn pump_upstream(&mut self, index: usize) -> bool {
        let Some(slot) = self.slots.get_mut(index) else {
            return false;
        };
        self.core.pump(&mut slot.client)
    }

    /// Carry out `Need::Connect` for `link`: a socket from the ring's idle pool or a new one;
    /// the poll that watches it is armed by `watch_upstream`.
    pub(super) fn connect_upstream(&mut self, index: usize, link: LinkId, connect: &Connect) {
        let Some(slot) = self.slots.get_mut(index) else {
            return;
        };
        // A socket still attached to the link is done with: closed, its poll cancelled.
        upstream::detach(&mut slot.client.upstreams, link);
        if let Some(at) = slot
            .io
            .upstream_polls
            .iter()
            .position(|poll| poll.link == link)
        {
            let _ = self.ring.cancel(slot.io.upstream_polls.swap_remove(at).op);
        }
        if let Some(socket) = upstream::open(
            connect,
            link,
            &mut slot.client.conn,
            &mut self.core.upstream_pool,
        ) {
            upstream::attach(&mut slot.client.upstreams, socket);
        }
    }

    /// After `advance`, `job_done` or `timed_out`: the sockets `Conn` is done with go to the
    /// idle pool or are closed, and their polls are cancelled.
    pub(super) fn settle_upstream(&mut self, index: usize) {
        let Some(slot) = self.slots.get_mut(index) else {
            return;
        };
        self.core.settle(&mut slot.client);
        let upstreams = &slot.client.upstreams;
        let ring = &mut self.ring;
        slot.io.upstream_polls.retain(|poll| {
            let watched = upstreams.iter().any(|socket| socket.link == poll.link);
            if !watched {
                let _ = ring.cancel(poll.op);
            }
            watched
        });
    }

    /// Close the connection's upstream sockets and cancel their polls.
    pub(super) fn drop_upstream(&mut self, index: usize) {
        let Some(slot) = self.slots.get_mut(index) else {
            return;
        };
        slot.client.upstreams.clear();
        for poll in slot.io.upstream_polls.drain(..) {
            let _ = self.ring.cancel(poll.op);
        }
    }

    /// After a turn: run the connection again if an upstream socket can move now, else poll
    /// each for what it waits on (once: a poll already in flight covers it).
    pub(super) fn watch_upstream(&mut self, index: usize) {
        let upstream_tag = self.slots.token(index, Kind::Upstream);
        let Some(slot) = self.slots.get_mut(index) else {
            return;
        };
        if upstream::any_can_move(&slot.client.upstreams, &slot.client.conn) {
            self.ready.push_back(index);
            return;
        }
        for at in 0..slot.client.upstreams.len() {
            let socket = &slot.client.upstreams[at];
            let link = socket.link;
            let wants = socket.wants(&slot.client.conn);
            let polls = &mut slot.io.upstream_polls;
            if let Some(poll_at) = polls.iter().position(|poll| poll.link == link) {
                let watching = polls[poll_at].watching;
                if (watching.read || !wants.read) && (watching.write || !wants.write) {
                    // The poll in flight covers what is waited for.
                    continue;
                }
                // It does not (it waits for a response while the request now waits for room,
                // as in an upload): replace it, or neither would ever complete.
                let _ = self.ring.cancel(polls.swap_remove(poll_at).op);
            }
            if !wants.any() {
                continue;
            }
            let tag = slab::with_link(upstream_tag, link.index());
            match self
                .ring
                .poll_once(socket.fd.as_fd(), wants.read, wants.write, tag)
            {
                Ok(op) => slot.io.upstream_polls.push(UpstreamPoll {
                    link,
                    op,
                    watching: wants,
                }),
                Err(error) => {
                    slot.client.conn.upstream_failed(link, &error);
                    self.ready.push_back(index);
                    return;
                }
            }
        }
    }

    /// An upstream socket's poll completed: note what is ready and drive the connection.
    pub(super) fn upstream_polled(&mut self, index: usize, completion: &Completion) {
        let Some(slot) = self.slots.get_mut(index) else {
            return;
        };
        let link = slab::link_of(completion.tag);
        // A cancelled poll of a socket given up already completes too: only the current one
        // counts.
        let Some(at) = slot
            .io
            .upstream_polls
            .iter()
            .position(|poll| poll.link.index() == link && poll.op == completion.op)
        else {
            return;
        };
        slot.io.upstream_polls.swap_remove(at);
        let events = poll_events(completion.result);
        slot.client.upstream_ready(
            link,
            events.readable,
            events.writable,
            events.error_or_hangup,
        );
        self.ready.push_back(index);
    }
}
