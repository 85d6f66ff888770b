//! The control frames (RFC 9113 §6.3-§6.9): PRIORITY (checked, then ignored: §5.3.2
//! deprecates the tree), RST_STREAM (counted against rapid reset), SETTINGS both ways (the
//! client's applied, the ACK of ours), PING, the client's GOAWAY, WINDOW_UPDATE for the
//! connection and for a stream.
//! Must not touch: request heads and bodies (`receive.rs`), how an error ends a stream or the
//! connection (`closing.rs`).

use std::time::Instant;

use super::{Connection, Event};
use crate::h2::error::ErrorCode;
use crate::h2::frame::{self, flags, setting, FrameHeader, MAX_WINDOW};
use crate::h2::stream::{Closure, RecvState};

impl Connection {
    pub(super) fn on_priority<'a>(
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
        self.spend_empty(now)?;
        match frame::priority(payload) {
            // A PRIORITY of the wrong size is a stream error (§6.3).
            Err(code) => self.stream_error(id, code, now, events),
            Ok(priority) if priority.dependency == id => {
                self.stream_error(id, ErrorCode::ProtocolError, now, events)
            }
            Ok(_) => Ok(()),
        }
    }

    pub(super) fn on_rst_stream<'a>(
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
        let code = frame::rst_stream(payload)?;
        if self.is_idle(id) {
            return Err(ErrorCode::ProtocolError);
        }
        // Rapid reset (CVE-2023-44487): every reset costs the server the work it started.
        if !self.budgets.resets.spend(now) {
            return Err(ErrorCode::EnhanceYourCalm);
        }
        if self.streams.remove(id).is_some() {
            self.closed.push(id, Closure::ResetByPeer);
            events.push(Event::Reset { stream: id, code });
        } else if self.closed.get(id) == Some(Closure::ResetByUs) {
            // Our resets crossed: from now on it is the client's reset that closed it, and
            // what it sends after is STREAM_CLOSED (§5.1).
            self.closed.push(id, Closure::ResetByPeer);
        }
        Ok(())
    }

    pub(super) fn on_settings<'a>(
        &mut self,
        header: FrameHeader,
        payload: &'a [u8],
        now: Instant,
        events: &mut Vec<Event<'a>>,
    ) -> Result<(), ErrorCode> {
        if header.stream != 0 {
            return Err(ErrorCode::ProtocolError);
        }
        if header.has(flags::ACK) {
            if !payload.is_empty() {
                return Err(ErrorCode::FrameSizeError);
            }
            return self.our_settings_acknowledged(now);
        }
        if !self.budgets.settings.spend(now) {
            return Err(ErrorCode::EnhanceYourCalm);
        }
        let mut opened = false;
        for (id, value) in frame::settings(payload)? {
            match id {
                setting::HEADER_TABLE_SIZE if value != self.peer_header_table => {
                    self.peer_header_table = value;
                    self.encoder.set_max_table_size(value as usize);
                }
                setting::ENABLE_PUSH if value > 1 => return Err(ErrorCode::ProtocolError),
                setting::INITIAL_WINDOW_SIZE => {
                    if value > MAX_WINDOW {
                        return Err(ErrorCode::FlowControlError);
                    }
                    // Every open stream's window moves by the difference (§6.9.2), and may
                    // not pass 2^31-1.
                    let delta = i64::from(value) - i64::from(self.peer_initial_window);
                    let max = i64::from(MAX_WINDOW);
                    if self.streams.iter().any(|s| s.send_window + delta > max) {
                        return Err(ErrorCode::FlowControlError);
                    }
                    for stream in self.streams.iter_mut() {
                        stream.send_window += delta;
                    }
                    self.peer_initial_window = value;
                    opened |= delta > 0;
                }
                setting::MAX_FRAME_SIZE => {
                    if !(frame::DEFAULT_MAX_FRAME_SIZE..=frame::MAX_FRAME_SIZE_LIMIT)
                        .contains(&value)
                    {
                        return Err(ErrorCode::ProtocolError);
                    }
                    self.peer_max_frame = value;
                }
                // MAX_CONCURRENT_STREAMS (we push none), MAX_HEADER_LIST_SIZE (advisory), and
                // unknown parameters (§6.5.2: ignored).
                _ => {}
            }
        }
        frame::write_settings_ack(&mut self.control);
        if opened {
            window_opened(events);
        }
        Ok(())
    }

    /// The client applied our SETTINGS: from now on its streams start with our
    /// INITIAL_WINDOW_SIZE; streams opened before it see the difference (§6.9.2).
    fn our_settings_acknowledged(&mut self, now: Instant) -> Result<(), ErrorCode> {
        if self.settings_acked {
            // We sent one SETTINGS: more ACKs are noise, counted as such.
            return self.spend_empty(now);
        }
        self.settings_acked = true;
        self.decoder.settings_acknowledged();
        let ours = self.limits.initial_window_size;
        let delta = i64::from(ours) - i64::from(self.recv_initial);
        self.recv_initial = ours;
        let half = (ours / 2).max(1);
        for stream in self.streams.iter_mut() {
            stream.recv_window += delta;
            // Credit owed under the old, larger threshold may now be due: a client whose
            // window the change left empty waits for it (§6.9.2).
            if stream.recv == RecvState::Open && stream.recv_owed >= half {
                let owed = stream.recv_owed;
                stream.recv_owed = 0;
                stream.recv_window += i64::from(owed);
                frame::write_window_update(&mut self.control, stream.id, owed);
            }
        }
        Ok(())
    }

    pub(super) fn on_ping(
        &mut self,
        header: FrameHeader,
        payload: &[u8],
        now: Instant,
    ) -> Result<(), ErrorCode> {
        if header.stream != 0 {
            return Err(ErrorCode::ProtocolError);
        }
        let opaque = frame::ping(payload)?;
        if header.has(flags::ACK) {
            // We send no PING of our own: an unsolicited ACK is ignored.
            return self.spend_empty(now);
        }
        if !self.budgets.pings.spend(now) {
            return Err(ErrorCode::EnhanceYourCalm);
        }
        frame::write_ping_ack(&mut self.control, opaque);
        Ok(())
    }

    pub(super) fn on_go_away<'a>(
        &mut self,
        header: FrameHeader,
        payload: &'a [u8],
        events: &mut Vec<Event<'a>>,
    ) -> Result<(), ErrorCode> {
        if header.stream != 0 {
            return Err(ErrorCode::ProtocolError);
        }
        let go_away = frame::go_away(payload)?;
        events.push(Event::GoAway { code: go_away.code });
        Ok(())
    }

    pub(super) fn on_window_update<'a>(
        &mut self,
        header: FrameHeader,
        payload: &'a [u8],
        now: Instant,
        events: &mut Vec<Event<'a>>,
    ) -> Result<(), ErrorCode> {
        let id = header.stream;
        let increment = frame::window_update(payload)?;
        if !self.budgets.window_updates.received() {
            return Err(ErrorCode::EnhanceYourCalm);
        }
        if id == 0 {
            if increment == 0 {
                return Err(ErrorCode::ProtocolError);
            }
            if self.send_window + i64::from(increment) > i64::from(MAX_WINDOW) {
                return Err(ErrorCode::FlowControlError);
            }
            self.send_window += i64::from(increment);
            window_opened(events);
            return Ok(());
        }
        if self.is_idle(id) {
            return Err(ErrorCode::ProtocolError);
        }
        if increment == 0 {
            return self.stream_error(id, ErrorCode::ProtocolError, now, events);
        }
        let Some(stream) = self.streams.get_mut(id) else {
            // In flight when the stream closed (§5.1): ignored, but counted.
            return self.spend_empty(now);
        };
        if stream.send_window + i64::from(increment) > i64::from(MAX_WINDOW) {
            return self.stream_error(id, ErrorCode::FlowControlError, now, events);
        }
        stream.send_window += i64::from(increment);
        window_opened(events);
        Ok(())
    }
}

/// Report a window that grew, once per batch of events.
fn window_opened(events: &mut Vec<Event<'_>>) {
    if !matches!(events.last(), Some(Event::WindowOpened)) {
        events.push(Event::WindowOpened);
    }
}
