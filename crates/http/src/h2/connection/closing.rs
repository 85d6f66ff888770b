//! How streams and the connection end (RFC 9113 §5.1, §5.4): a stream error (RST_STREAM,
//! counted with the resets), a stream refused before it was announced, a stream both sides
//! have ended, a late DATA frame on a closed stream (judged by how it closed), and a connection
//! error (GOAWAY, then nothing more is read).
//! Must not touch: what a frame means (`receive.rs` and `control.rs` decide, then call in
//! here).

use std::time::Instant;

use super::{Connection, Event, Phase, StreamId};
use crate::h2::error::ErrorCode;
use crate::h2::frame::{self, Kind};
use crate::h2::stream::{Closure, SendState};

impl Connection {
    /// A DATA frame on a stream not in the table (and not idle): what §5.1 says of closed
    /// streams, by how it was closed.
    pub(super) fn on_closed_stream(
        &mut self,
        id: StreamId,
        kind: Kind,
        now: Instant,
    ) -> Result<(), ErrorCode> {
        debug_assert_eq!(kind, Kind::Data);
        match self.closed.get(id) {
            // In flight when we reset it: ignored.
            Some(Closure::ResetByUs) => self.spend_empty(now),
            // After the client's END_STREAM: a connection error STREAM_CLOSED.
            Some(Closure::Ended) => Err(ErrorCode::StreamClosed),
            // After the client's own RST_STREAM, or long closed: a stream error.
            Some(Closure::ResetByPeer) | None => {
                self.spend_empty(now)?;
                frame::write_rst_stream(&mut self.control, id, ErrorCode::StreamClosed);
                Ok(())
            }
        }
    }

    /// A stream error (§5.4.2): RST_STREAM with `code`; an announced stream is dropped and
    /// the server told. Counted with the resets: each costs a frame and maybe work.
    pub(super) fn stream_error<'a>(
        &mut self,
        id: StreamId,
        code: ErrorCode,
        now: Instant,
        events: &mut Vec<Event<'a>>,
    ) -> Result<(), ErrorCode> {
        if self.streams.remove(id).is_some() {
            self.closed.push(id, Closure::ResetByUs);
            events.push(Event::Reset { stream: id, code });
        }
        if !self.budgets.resets.spend(now) {
            return Err(ErrorCode::EnhanceYourCalm);
        }
        frame::write_rst_stream(&mut self.control, id, code);
        Ok(())
    }

    /// Refuse a stream before it was announced (REFUSED_STREAM past the concurrency limit,
    /// §5.1.2; PROTOCOL_ERROR for a malformed head).
    pub(super) fn refuse(
        &mut self,
        id: StreamId,
        code: ErrorCode,
        now: Instant,
    ) -> Result<(), ErrorCode> {
        self.closed.push(id, Closure::ResetByUs);
        if !self.budgets.resets.spend(now) {
            return Err(ErrorCode::EnhanceYourCalm);
        }
        frame::write_rst_stream(&mut self.control, id, code);
        Ok(())
    }

    pub(super) fn close(&mut self, id: StreamId, closure: Closure) {
        if self.streams.remove(id).is_some() {
            self.closed.push(id, closure);
        }
    }

    /// We sent END_STREAM on `id`.
    pub(super) fn end_sending(&mut self, id: StreamId) {
        if let Some(stream) = self.streams.get_mut(id) {
            stream.send = SendState::Ended;
            if stream.is_done() {
                self.close(id, Closure::Ended);
            }
        }
    }

    pub(super) fn connection_error(&mut self, code: ErrorCode) {
        frame::write_go_away(&mut self.control, self.highest, code);
        self.going_away = true;
        self.phase = Phase::Closing;
        self.pending = None;
    }
}
