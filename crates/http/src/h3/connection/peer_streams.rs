//! The client's unidirectional streams (RFC 9114 §6.2, RFC 9204 §4.2): the stream type first,
//! then the control stream's frames, the QPACK encoder stream's instructions for our decoder,
//! the QPACK decoder stream's for our encoder.
//!
//! Owns which client unidirectional stream is which and the rules of their lives: one of each
//! critical kind (a second is H3_STREAM_CREATION_ERROR), none ever closed
//! (H3_CLOSED_CRITICAL_STREAM), no push stream from a client (H3_STREAM_CREATION_ERROR), the
//! reserved and unknown types refused with STOP_SENDING. Must not touch: what a control frame
//! or a QPACK instruction means (`control.rs`, `qpack`).

use std::collections::HashMap;

use super::stream_ids::StreamIds;
use super::{Connection, Event};
use crate::h3::control::{ControlEvent, ControlStream};
use crate::h3::error::{Error, ErrorCode};
use crate::h3::qpack::{DECODER_STREAM, ENCODER_STREAM};
use crate::h3::varint;

/// The control stream's type (§6.2.1).
pub(super) const CONTROL_STREAM: u64 = 0x00;
/// The push stream's type (§6.2.2): only a server may open one.
const PUSH_STREAM: u64 = 0x01;

#[derive(Debug)]
enum Stream {
    /// The stream type has not arrived whole: its octets so far (at most 8).
    Typing(Vec<u8>),
    Control(ControlStream),
    Encoder,
    Decoder,
}

/// The critical streams, of which the client opens at most one each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Critical {
    Control,
    Encoder,
    Decoder,
}

impl Critical {
    fn closed(self) -> Error {
        Error::connection(
            ErrorCode::ClosedCriticalStream,
            match self {
                Critical::Control => "the client closed its control stream",
                Critical::Encoder => "the client closed its QPACK encoder stream",
                Critical::Decoder => "the client closed its QPACK decoder stream",
            },
        )
    }

    fn second(self) -> Error {
        Error::connection(
            ErrorCode::StreamCreationError,
            match self {
                Critical::Control => "a second control stream",
                Critical::Encoder => "a second QPACK encoder stream",
                Critical::Decoder => "a second QPACK decoder stream",
            },
        )
    }
}

#[derive(Debug)]
pub(super) struct PeerStreams {
    /// The streams being read; the refused and those closed before their type are gone.
    streams: HashMap<u64, Stream>,
    /// The streams seen: one seen and not in `streams` is done or refused.
    ids: StreamIds,
    /// The critical kinds the client opened.
    opened: Vec<Critical>,
}

impl Default for PeerStreams {
    fn default() -> PeerStreams {
        PeerStreams {
            streams: HashMap::new(),
            ids: StreamIds::new(2),
            opened: Vec::new(),
        }
    }
}

impl PeerStreams {
    pub(super) fn open(&mut self, id: u64) {
        if self.ids.first_sight(id) {
            self.streams.insert(id, Stream::Typing(Vec::new()));
        }
    }

    /// The client reset stream `id`: a critical stream's loss ends the connection; another
    /// stream may be reset before its type arrived (§6.2).
    pub(super) fn reset(&mut self, id: u64) -> Result<(), Error> {
        if self.ids.first_sight(id) {
            // Reset before any of it came: it is done.
            return Ok(());
        }
        match self.streams.remove(&id) {
            Some(Stream::Control(_)) => Err(Critical::Control.closed()),
            Some(Stream::Encoder) => Err(Critical::Encoder.closed()),
            Some(Stream::Decoder) => Err(Critical::Decoder.closed()),
            Some(Stream::Typing(_)) | None => Ok(()),
        }
    }

    /// Reads as much of the stream type as `input` has: the type once whole, and the octets
    /// after it.
    fn read_type<'a>(typed: &mut Vec<u8>, input: &'a [u8]) -> (Option<u64>, &'a [u8]) {
        let Some(&first) = typed.first().or(input.first()) else {
            return (None, input);
        };
        let need = 1usize << (first >> 6);
        let take = (need - typed.len()).min(input.len());
        typed.extend_from_slice(&input[..take]);
        let mut at = 0;
        (varint::decode(typed, &mut at), &input[take..])
    }
}

impl Connection {
    pub(super) fn receive_unidirectional<'a>(
        &mut self,
        id: u64,
        bytes: &'a [u8],
        fin: bool,
        events: &mut Vec<Event<'a>>,
    ) -> Result<(), Error> {
        let mut input = bytes;
        let Some(stream) = self.peer.streams.get_mut(&id) else {
            // Refused, or closed before its type: its data is dropped (§6.2).
            return Ok(());
        };
        if let Stream::Typing(typed) = stream {
            let (kind, rest) = PeerStreams::read_type(typed, input);
            input = rest;
            let Some(kind) = kind else {
                if fin {
                    // §6.2: a stream may end before its type; it is then nothing.
                    self.peer.streams.remove(&id);
                }
                return Ok(());
            };
            let (critical, stream) = match kind {
                CONTROL_STREAM => (Critical::Control, Stream::Control(ControlStream::new())),
                ENCODER_STREAM => (Critical::Encoder, Stream::Encoder),
                DECODER_STREAM => (Critical::Decoder, Stream::Decoder),
                PUSH_STREAM => {
                    return Err(Error::connection(
                        ErrorCode::StreamCreationError,
                        "a push stream from a client",
                    ))
                }
                _ => {
                    // Reserved (0x1f * N + 0x21) or an extension we do not speak (§6.2, §9).
                    self.peer.streams.remove(&id);
                    events.push(Event::StopSending {
                        stream: id,
                        code: ErrorCode::StreamCreationError,
                    });
                    return Ok(());
                }
            };
            if self.peer.opened.contains(&critical) {
                return Err(critical.second());
            }
            self.peer.opened.push(critical);
            self.peer.streams.insert(id, stream);
        }
        let critical = match self.peer.streams.get_mut(&id) {
            Some(Stream::Control(control)) => {
                let mut at = 0;
                while at < input.len() {
                    let (used, event) = control.read(&input[at..])?;
                    at += used;
                    match event {
                        Some(ControlEvent::Settings(settings)) => {
                            self.peer_settings = Some(settings);
                            events.push(Event::Settings(settings));
                        }
                        Some(ControlEvent::GoAway(id)) => {
                            self.peer_goaway = Some(id);
                            events.push(Event::GoAway(id));
                        }
                        // ampd never pushes: the limit on push IDs does not matter.
                        Some(ControlEvent::MaxPushId(_)) => {}
                        None if used == 0 => break,
                        None => {}
                    }
                }
                Critical::Control
            }
            Some(Stream::Encoder) => {
                self.decoder.read_encoder_stream(input)?;
                // The decoder stops after the insertions a blocked section waited for; it goes
                // on once that section is decoded.
                while self.resume_unblocked(events)? {
                    self.decoder.read_encoder_stream(&[])?;
                }
                Critical::Encoder
            }
            Some(Stream::Decoder) => {
                self.encoder.read_decoder_stream(input)?;
                Critical::Decoder
            }
            Some(Stream::Typing(_)) | None => return Ok(()),
        };
        if fin {
            return Err(critical.closed());
        }
        Ok(())
    }
}
