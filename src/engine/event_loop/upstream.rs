//! The loop's side of a connection's upstream socket (`engine::upstream`): opening it for
//! `Need::Connect` and watching it in the loop's epoll set, edge-triggered, under a token of
//! kind `Upstream` (same slot and generation as its connection); taking it back when `Conn` is
//! done with it (`take_upstream_release`: into this loop's idle pool, out of the epoll set, or
//! closed).
//!
//! Owns: those steps. Must not touch: reading and writing it (`upstream::pump`, called by
//! `drive.rs`), HTTP.

use std::os::fd::AsFd;

use ampd_sys::epoll::{Event, Interest};

use super::EventLoop;
use crate::conn::Connect;
use crate::engine::slab::Kind;
use crate::engine::upstream;

impl EventLoop {
    /// Carry out `Need::Connect` for connection `index`: a socket from the idle pool (the one
    /// this connection gave back last, if it is there) or a new one, watched for both
    /// directions under this connection's token (a connect under way reports writability when
    /// it completes; a reused one at once).
    pub(super) fn connect_upstream(&mut self, index: usize, connect: &Connect) {
        let token = self.slots.token(index, Kind::Upstream);
        let Some(slot) = self.slots.get_mut(index) else {
            return;
        };
        // A socket still attached is done with: closed (`Conn` released it, or broke the
        // contract; either way it cannot be trusted for another request).
        slot.client.upstream = None;
        let Some(mut socket) = upstream::open_preferring(
            connect,
            &mut slot.client.conn,
            &mut self.upstream_pool,
            token,
        ) else {
            return;
        };
        // An idle socket stays in the epoll set under the token of the connection that gave it
        // back (`settle_upstream`): taken again by that connection it needs no `epoll_ctl`, by
        // another one a modification; only a new socket is added. Two system calls per
        // proxied request fewer than leaving and joining the set (bench/proxy.sh, 1 KiB row).
        let watched = match socket.registration {
            registration if registration == token => Ok(()),
            0 => self
                .epoll
                .add(socket.fd.as_fd(), token, Interest::BOTH.edge()),
            _ => self
                .epoll
                .modify(socket.fd.as_fd(), token, Interest::BOTH.edge()),
        };
        match watched {
            Ok(()) => {
                socket.registration = token;
                slot.client.upstream = Some(socket);
            }
            Err(error) => slot.client.conn.upstream_failed(&error),
        }
    }

    /// After `advance`, `job_done` or `timed_out`: the upstream socket `Conn` is done with goes
    /// to the idle pool or is closed. A pooled socket stays in the epoll set under its token:
    /// events it gets while idle reach a connection that no longer has it, or none (the token's
    /// generation is gone), and are mere hints there (a read that finds nothing); whether it is
    /// still usable is checked when it is taken (`IdlePool::take_preferring`).
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
    }

    /// An epoll event for connection `index`'s client or upstream socket.
    pub(super) fn note_event(&mut self, index: usize, kind: Kind, event: &Event) {
        let Some(slot) = self.slots.get_mut(index) else {
            return;
        };
        if kind == Kind::Upstream {
            if let Some(socket) = slot.client.upstream.as_mut() {
                socket.ready(event.readable, event.writable, event.hangup || event.error);
            }
        } else {
            slot.can_read |= event.readable || event.hangup || event.error;
            slot.can_write |= event.writable || event.error;
            slot.hung_up |= event.hangup || event.error;
        }
    }
}
