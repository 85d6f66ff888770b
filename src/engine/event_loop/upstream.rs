//! The loop's side of a connection's upstream sockets (`engine::upstream`): opening one for
//! `Need::Connect` and watching it in the loop's epoll set, edge-triggered, under a token of
//! kind `Upstream` (same slot and generation as its connection, and its link); taking it back
//! when `Conn` is done with it (`take_upstream_release`: into this loop's idle pool, or
//! closed).
//!
//! A pooled socket (`core::Driver::settle_upstream`) stays in the epoll set under its token:
//! events it gets while idle reach a link that no longer has it, or none (the token's
//! generation is gone), and are mere hints there (a read that finds nothing); whether it is
//! still usable is checked when it is taken (`IdlePool::take_preferring`).
//!
//! Owns: those steps. Must not touch: reading and writing it (`upstream::pump`, called by
//! `drive.rs`), HTTP.

use std::os::fd::AsFd;

use ampd_sys::epoll::{Event, Interest};

use super::EventLoop;
use crate::conn::{Connect, LinkId};
use crate::engine::slab::{self, Kind};
use crate::engine::upstream;

impl EventLoop {
    /// Carry out `Need::Connect` for link `link` of connection `index`: a socket from the idle
    /// pool (the one this link gave back last, if it is there) or a new one, watched for both
    /// directions under the link's token (a connect under way reports writability when it
    /// completes; a reused one at once).
    pub(super) fn connect_upstream(&mut self, index: usize, link: LinkId, connect: &Connect) {
        let token = self.slots.link_token(index, link.index());
        let Some(slot) = self.slots.get_mut(index) else {
            return;
        };
        // A socket still attached to the link is done with: closed (`Conn` released it, or
        // broke the contract; either way it cannot be trusted for another request).
        upstream::detach(&mut slot.client.upstreams, link);
        let Some(mut socket) = upstream::open_preferring(
            connect,
            link,
            &mut slot.client.conn,
            &mut self.core.upstream_pool,
            token,
        ) else {
            return;
        };
        // An idle socket stays in the epoll set under the token of the link that gave it back
        // (`settle_upstream`): taken again by that link it needs no `epoll_ctl`, by another one
        // a modification; only a new socket is added. Two system calls per proxied request
        // fewer than leaving and joining the set (bench/proxy.sh, 1 KiB row).
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
                upstream::attach(&mut slot.client.upstreams, socket);
            }
            Err(error) => slot.client.conn.upstream_failed(link, &error),
        }
    }

    /// An epoll event (under `token`) for connection `index`'s client or upstream socket.
    pub(super) fn note_event(&mut self, index: usize, kind: Kind, token: u64, event: &Event) {
        let Some(slot) = self.slots.get_mut(index) else {
            return;
        };
        if kind == Kind::Upstream {
            slot.client.upstream_ready(
                slab::link_of(token),
                event.readable,
                event.writable,
                event.hangup || event.error,
            );
        } else {
            slot.io.can_read |= event.readable || event.hangup || event.error;
            slot.io.can_write |= event.writable || event.error;
            slot.io.hung_up |= event.hangup || event.error;
        }
    }
}
