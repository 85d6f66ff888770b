//! A WebSocket tunnel (RFC 6455 §4): after the upstream's `101`, bytes pass both ways untouched
//! until either side closes or the tunnel is idle for the pool's read timeout.
//!
//! Owns: switching a proxied exchange into a tunnel and moving its bytes, each direction bounded
//! by `HIGH_WATER`. Must not touch: sockets, WebSocket frames (they are the endpoints' business).

use ampd_http::upstream::ResponseHead;

use super::{head, Proxy, Stage, Step, HIGH_WATER};
use crate::conn::upstream::Release;
use crate::conn::{Conn, Context, Ending, Need, State};
use crate::content::sink::Sink;
use crate::upstream::Report;

impl Conn {
    /// The upstream agreed to switch: pass its `101` on and start tunnelling.
    pub(in crate::conn) fn begin_tunnel(
        &mut self,
        mut proxy: Box<Proxy>,
        head: &ResponseHead,
        context: &mut Context<'_>,
    ) -> Step {
        proxy.report(Report::Success);
        let date = context.clock.date();
        let out = self.output.bytes();
        let before = out.len();
        head::write_switching_head(out, head, date);
        proxy.stage = Stage::Tunnel {
            head_bytes: (out.len() - before) as u64,
            down: 0,
        };
        Step::Again(proxy)
    }

    /// Move what each side sent to the other, as far as there is room.
    /// `head_bytes`, `down`: the `101` head's size and the bytes passed down so far.
    pub(in crate::conn) fn tunnel(
        &mut self,
        mut proxy: Box<Proxy>,
        head_bytes: u64,
        mut down: u64,
        context: &mut Context<'_>,
    ) -> Step {
        let Some(link) = self.link.as_mut() else {
            return Step::Wait(proxy, Need::Wait);
        };
        let waiting = &self.input[self.consumed..];
        let take = waiting.len().min(HIGH_WATER.saturating_sub(link.pending()));
        if take > 0 {
            link.queue().extend_from_slice(&waiting[..take]);
            self.consumed += take;
        }
        let room =
            HIGH_WATER.saturating_sub(usize::try_from(self.output.pending()).unwrap_or(usize::MAX));
        let take = link.input.len().min(room);
        if take > 0 {
            self.output.bytes().extend_from_slice(&link.input[..take]);
            link.input.drain(..take);
            down += take as u64;
            proxy.stage = Stage::Tunnel { head_bytes, down };
        }
        let upstream_done = link.finished && link.input.is_empty();
        let client_done = self.peer_finished && self.consumed == self.input.len();
        if !upstream_done && !client_done {
            return Step::Wait(proxy, Need::Read);
        }
        self.drop_link(Release::Close);
        self.record_sizes(Some(&proxy.exchange), 101, head_bytes, down, context);
        // A tunnelled connection never carries another HTTP request.
        self.state = State::Closing(Ending::Close);
        Step::Over
    }
}
