//! Receiving (RFC 9113 §4-§6): each frame dispatched by type, after the checks that come
//! before its type (the first frame is SETTINGS, §3.4; nothing comes between a HEADERS and its
//! CONTINUATIONs, §6.10); DATA (both receive windows, padding, content-length); HEADERS and
//! CONTINUATION (what a block is for, its assembly under `max_header_block`, its decoding into a
//! new stream or the trailers that end a body).
//! Must not touch: the control frames (`control.rs`), how an error ends a stream or the
//! connection (`closing.rs`): a handler returns `Err` for a connection error and calls
//! `stream_error` for a stream error.

use std::time::Instant;

use super::{BlockUse, Connection, Event, PendingBlock, Phase, StreamId};
use crate::h2::error::ErrorCode;
use crate::h2::fields::{MalformedRequest, RequestBuilder};
use crate::h2::frame::{self, flags, FrameHeader, Kind};
use crate::h2::stream::{BodyUse, Closure, RecvState, Stream};
use crate::request::BodyFraming;

/// Receiving: one frame at a time. `Err` is a connection error (§5.4.1); stream errors are
/// handled where they are found (`stream_error`).
impl Connection {
    pub(super) fn frame<'a>(
        &mut self,
        header: FrameHeader,
        payload: &'a [u8],
        now: Instant,
        events: &mut Vec<Event<'a>>,
    ) -> Result<(), ErrorCode> {
        if self.phase == Phase::FirstSettings {
            if header.kind != Kind::Settings || header.has(flags::ACK) {
                return Err(ErrorCode::ProtocolError);
            }
            self.phase = Phase::Frames;
        }
        if let Some(pending) = self.pending {
            // Nothing may come between a HEADERS and its CONTINUATIONs (§6.10).
            if header.kind != Kind::Continuation || header.stream != pending.stream {
                return Err(ErrorCode::ProtocolError);
            }
        }
        match header.kind {
            Kind::Data => self.on_data(header, payload, now, events),
            Kind::Headers => self.on_headers(header, payload, now, events),
            Kind::Continuation => self.on_continuation(header, payload, now, events),
            Kind::Priority => self.on_priority(header, payload, now, events),
            Kind::RstStream => self.on_rst_stream(header, payload, now, events),
            Kind::Settings => self.on_settings(header, payload, now, events),
            Kind::Ping => self.on_ping(header, payload, now),
            Kind::GoAway => self.on_go_away(header, payload, events),
            Kind::WindowUpdate => self.on_window_update(header, payload, now, events),
            // A client cannot push (§8.4).
            Kind::PushPromise => Err(ErrorCode::ProtocolError),
            // Unknown types are ignored (§4.1, §5.5), but counted: they cost a read each.
            Kind::Unknown(_) => self.spend_empty(now),
        }
    }

    fn on_data<'a>(
        &mut self,
        header: FrameHeader,
        payload: &'a [u8],
        now: Instant,
        events: &mut Vec<Event<'a>>,
    ) -> Result<(), ErrorCode> {
        let id = header.stream;
        if id == 0 {
            return Err(ErrorCode::ProtocolError);
        }
        if self.is_idle(id) {
            return Err(ErrorCode::ProtocolError);
        }
        // Every DATA frame counts against the connection window, padding included, whatever
        // its stream's state (§6.9).
        let len = header.length;
        if i64::from(len) > self.recv_window {
            return Err(ErrorCode::FlowControlError);
        }
        self.recv_window -= i64::from(len);
        let data = frame::unpad(&header, payload)?;
        let end_stream = header.has(flags::END_STREAM);
        if data.is_empty() && !end_stream {
            self.spend_empty(now)?;
        }
        let Some(stream) = self.streams.get_mut(id) else {
            self.credit_connection(len);
            return self.on_closed_stream(id, Kind::Data, now);
        };
        if stream.recv == RecvState::Ended {
            // Half-closed (remote): STREAM_CLOSED (§5.1).
            self.credit_connection(len);
            self.stream_error(id, ErrorCode::StreamClosed, now, events)?;
            return Ok(());
        }
        if i64::from(len) > stream.recv_window {
            self.credit_connection(len);
            self.stream_error(id, ErrorCode::FlowControlError, now, events)?;
            return Ok(());
        }
        stream.recv_window -= i64::from(len);
        stream.received += data.len() as u64;
        if let Some(expected) = stream.content_length {
            // More than content-length, or fewer at the end: malformed (§8.1.1).
            if stream.received > expected || (end_stream && stream.received != expected) {
                self.credit_connection(len);
                self.stream_error(id, ErrorCode::ProtocolError, now, events)?;
                return Ok(());
            }
        }
        if end_stream {
            stream.recv = RecvState::Ended;
        }
        let body = stream.body;
        let done = stream.is_done();
        match body {
            BodyUse::Delivered => {
                // The padding is not the server's to release: credit it now.
                let padding = len - data.len() as u32;
                if padding > 0 {
                    self.release_body(id, padding as usize);
                }
                events.push(Event::Data {
                    stream: id,
                    data,
                    end_stream,
                });
            }
            BodyUse::Discarded => self.credit_connection(len),
        }
        if done {
            self.close(id, Closure::Ended);
        }
        Ok(())
    }

    fn on_headers<'a>(
        &mut self,
        header: FrameHeader,
        payload: &'a [u8],
        now: Instant,
        events: &mut Vec<Event<'a>>,
    ) -> Result<(), ErrorCode> {
        let id = header.stream;
        if id == 0 {
            return Err(ErrorCode::ProtocolError);
        }
        let parsed = frame::headers(&header, payload)?;
        let end_stream = header.has(flags::END_STREAM);
        let self_dependent = parsed.priority.is_some_and(|p| p.dependency == id);
        let use_ = if let Some(stream) = self.streams.get(id) {
            if stream.recv == RecvState::Ended {
                BlockUse::StreamError(ErrorCode::StreamClosed)
            } else if !end_stream || self_dependent {
                // A second HEADERS is trailers, and trailers end the stream (§8.1).
                BlockUse::StreamError(ErrorCode::ProtocolError)
            } else {
                BlockUse::Trailers
            }
        } else if id.is_multiple_of(2) {
            // Client streams are odd (§5.1.1).
            return Err(ErrorCode::ProtocolError);
        } else if id <= self.highest {
            match self.closed.get(id) {
                // Trailers may be in flight; a second request head never is (§8.1).
                Some(Closure::ResetByUs) if end_stream => BlockUse::Discard,
                Some(Closure::ResetByUs) => BlockUse::StreamError(ErrorCode::ProtocolError),
                Some(Closure::Ended | Closure::ResetByPeer) => return Err(ErrorCode::StreamClosed),
                // A new stream must have a larger id than every earlier one (§5.1.1).
                None => return Err(ErrorCode::ProtocolError),
            }
        } else {
            self.highest = id;
            if self.going_away {
                // After our GOAWAY, streams above its last id are ignored (§6.8).
                self.closed.push(id, Closure::ResetByUs);
                BlockUse::Discard
            } else {
                BlockUse::Request { self_dependent }
            }
        };
        let pending = PendingBlock {
            stream: id,
            end_stream,
            use_,
        };
        if parsed.fragment.len() > self.limits.max_header_block as usize {
            return Err(ErrorCode::EnhanceYourCalm);
        }
        if header.has(flags::END_HEADERS) {
            // The common case: decode straight from the input, no copy.
            return self.finish_block(pending, parsed.fragment, now, events);
        }
        self.block.clear();
        self.block.extend_from_slice(parsed.fragment);
        self.pending = Some(pending);
        Ok(())
    }

    fn on_continuation<'a>(
        &mut self,
        header: FrameHeader,
        payload: &'a [u8],
        now: Instant,
        events: &mut Vec<Event<'a>>,
    ) -> Result<(), ErrorCode> {
        // Without a HEADERS before it (checked in `frame` for the stream id).
        let Some(pending) = self.pending else {
            return Err(ErrorCode::ProtocolError);
        };
        let end_headers = header.has(flags::END_HEADERS);
        if payload.is_empty() && !end_headers {
            self.spend_empty(now)?;
        }
        // The CONTINUATION flood (2024): a block is bounded however it is cut.
        if self.block.len() + payload.len() > self.limits.max_header_block as usize {
            return Err(ErrorCode::EnhanceYourCalm);
        }
        self.block.extend_from_slice(payload);
        if !end_headers {
            return Ok(());
        }
        self.pending = None;
        let block = std::mem::take(&mut self.block);
        let outcome = self.finish_block(pending, &block, now, events);
        self.block = block;
        outcome
    }

    /// A complete header block: decode it (always, to keep HPACK in step, §4.3) and act on
    /// what it was for.
    fn finish_block<'a>(
        &mut self,
        pending: PendingBlock,
        block: &[u8],
        now: Instant,
        events: &mut Vec<Event<'a>>,
    ) -> Result<(), ErrorCode> {
        let id = pending.stream;
        let max_list = self.limits.max_header_list_size as usize;
        match pending.use_ {
            BlockUse::Request { self_dependent } => {
                let mut builder = RequestBuilder::new();
                let decoded = self
                    .decoder
                    .decode(block, max_list, &mut |name, value| {
                        builder.field(name, value);
                    })
                    .map_err(|_| ErrorCode::CompressionError)?;
                if self_dependent {
                    // A stream cannot depend on itself (§5.3.1).
                    return self.refuse(id, ErrorCode::ProtocolError, now);
                }
                if self.streams.len() >= self.limits.max_concurrent_streams as usize {
                    return self.refuse(id, ErrorCode::RefusedStream, now);
                }
                self.open(
                    id,
                    pending.end_stream,
                    builder,
                    decoded.over_limit,
                    now,
                    events,
                )
            }
            BlockUse::Trailers => {
                let mut malformed = false;
                self.decoder
                    .decode(block, max_list, &mut |name, _value| {
                        malformed |= !is_trailer_name(name);
                    })
                    .map_err(|_| ErrorCode::CompressionError)?;
                if malformed {
                    return self.stream_error(id, ErrorCode::ProtocolError, now, events);
                }
                self.end_of_body(id, now, events)
            }
            BlockUse::Discard => self.discard_block(block),
            BlockUse::StreamError(code) => {
                self.discard_block(block)?;
                self.stream_error(id, code, now, events)
            }
        }
    }

    fn discard_block(&mut self, block: &[u8]) -> Result<(), ErrorCode> {
        self.decoder
            .decode(block, 0, &mut |_, _| {})
            .map(|_| ())
            .map_err(|_| ErrorCode::CompressionError)
    }

    /// A new stream with a decoded head: announce it as a request, or as refused (431, 405),
    /// or reset it when malformed (§8.1.1).
    fn open<'a>(
        &mut self,
        id: StreamId,
        end_stream: bool,
        builder: RequestBuilder,
        over_limit: bool,
        now: Instant,
        events: &mut Vec<Event<'a>>,
    ) -> Result<(), ErrorCode> {
        let mut stream = Stream::new(
            id,
            i64::from(self.recv_initial),
            i64::from(self.peer_initial_window),
        );
        if end_stream {
            stream.recv = RecvState::Ended;
        }
        let refused = if over_limit {
            Some(431)
        } else {
            match builder.finish(end_stream) {
                Ok(head) => {
                    if let BodyFraming::Length(length) = head.body {
                        if end_stream && length > 0 {
                            // content-length promises a body the stream ended without.
                            return self.refuse(id, ErrorCode::ProtocolError, now);
                        }
                        stream.content_length = Some(length);
                    }
                    self.streams.insert(stream);
                    self.budgets.window_updates.earn();
                    events.push(Event::Request {
                        stream: id,
                        head,
                        end_stream,
                    });
                    return Ok(());
                }
                Err(MalformedRequest::Connect) => Some(405),
                Err(_) => return self.refuse(id, ErrorCode::ProtocolError, now),
            }
        };
        if let Some(status) = refused {
            // Refused streams count with the resets: a stream of HPACK bombs (each block
            // decoding past the list limit) ends like a rapid reset.
            if !self.budgets.resets.spend(now) {
                return Err(ErrorCode::EnhanceYourCalm);
            }
            stream.body = BodyUse::Discarded;
            self.streams.insert(stream);
            events.push(Event::Refused { stream: id, status });
        }
        Ok(())
    }

    /// Trailers (or DATA with END_STREAM) ended the client's side of a stream.
    fn end_of_body<'a>(
        &mut self,
        id: StreamId,
        now: Instant,
        events: &mut Vec<Event<'a>>,
    ) -> Result<(), ErrorCode> {
        let Some(stream) = self.streams.get_mut(id) else {
            return Ok(());
        };
        if stream
            .content_length
            .is_some_and(|expected| expected != stream.received)
        {
            return self.stream_error(id, ErrorCode::ProtocolError, now, events);
        }
        stream.recv = RecvState::Ended;
        let (body, done) = (stream.body, stream.is_done());
        if body == BodyUse::Delivered {
            events.push(Event::Data {
                stream: id,
                data: &[],
                end_stream: true,
            });
        }
        if done {
            self.close(id, Closure::Ended);
        }
        Ok(())
    }
}

/// A trailer field name: lower case, no pseudo-header, no connection-specific field (§8.1,
/// §8.2.1, §8.2.2).
fn is_trailer_name(name: &[u8]) -> bool {
    !name.is_empty()
        && !name.starts_with(b":")
        && !name.iter().any(u8::is_ascii_uppercase)
        && !matches!(
            name,
            b"connection" | b"keep-alive" | b"proxy-connection" | b"transfer-encoding" | b"upgrade"
        )
}
