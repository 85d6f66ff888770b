//! The client's control stream, server side (RFC 9114 §6.2.1): SETTINGS first and once, then
//! GOAWAY, MAX_PUSH_ID, CANCEL_PUSH, and the stream may never close.
//!
//! Owns the rules between frames of the control stream (the frame reader owns which frames it
//! may carry: SETTINGS first is H3_MISSING_SETTINGS, a second SETTINGS, DATA or HEADERS is
//! H3_FRAME_UNEXPECTED): GOAWAY and MAX_PUSH_ID never go backwards, no push to cancel. Must not
//! touch: what the connection does with the settings or a GOAWAY, QUIC.

use super::error::{Error, ErrorCode};
use super::frame::{Frame, FrameReader, StreamKind};
use super::settings::Settings;

/// What the client's control stream said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ControlEvent {
    /// The client's SETTINGS (its first frame).
    Settings(Settings),
    /// The client is going away: it will accept no push ID from this one on (§5.2). The
    /// server finishes the requests it has and opens nothing new for it.
    GoAway(u64),
    /// The client allows pushes up to this ID (§7.2.7); ampd does not push, but the value
    /// must still not decrease.
    MaxPushId(u64),
}

#[derive(Debug)]
pub struct ControlStream {
    frames: FrameReader,
    goaway: Option<u64>,
    max_push_id: Option<u64>,
}

impl Default for ControlStream {
    fn default() -> ControlStream {
        ControlStream::new()
    }
}

impl ControlStream {
    #[must_use]
    pub fn new() -> ControlStream {
        ControlStream {
            // The field-section limit is not used: HEADERS is refused on a control stream.
            frames: FrameReader::new(StreamKind::Control, 0),
            goaway: None,
            max_push_id: None,
        }
    }

    /// Reads from `input`: how many octets were used and the event they completed, if any.
    /// Call again with the rest while it uses octets.
    ///
    /// # Errors
    /// A connection error: the frame reader's (H3_MISSING_SETTINGS, H3_FRAME_UNEXPECTED,
    /// H3_FRAME_ERROR, H3_EXCESSIVE_LOAD, SETTINGS errors) and H3_ID_ERROR for a GOAWAY whose
    /// ID is larger than an earlier one's (§5.2), a MAX_PUSH_ID smaller than an earlier one
    /// (§7.2.7), or any CANCEL_PUSH, since ampd never promised a push (§7.2.3).
    pub fn read(&mut self, input: &[u8]) -> Result<(usize, Option<ControlEvent>), Error> {
        let (used, frame) = self.frames.read(input)?;
        let event = match frame {
            None => None,
            Some(Frame::Settings(settings)) => Some(ControlEvent::Settings(settings)),
            Some(Frame::GoAway(id)) => {
                if self.goaway.is_some_and(|earlier| id > earlier) {
                    return Err(Error::connection(
                        ErrorCode::IdError,
                        "a GOAWAY with a larger ID than an earlier one",
                    ));
                }
                self.goaway = Some(id);
                Some(ControlEvent::GoAway(id))
            }
            Some(Frame::MaxPushId(id)) => {
                if self.max_push_id.is_some_and(|earlier| id < earlier) {
                    return Err(Error::connection(
                        ErrorCode::IdError,
                        "a MAX_PUSH_ID smaller than an earlier one",
                    ));
                }
                self.max_push_id = Some(id);
                Some(ControlEvent::MaxPushId(id))
            }
            Some(Frame::CancelPush(_)) => {
                return Err(Error::connection(
                    ErrorCode::IdError,
                    "a CANCEL_PUSH for a push never promised",
                ))
            }
            Some(Frame::DataBegins { .. } | Frame::Data(_) | Frame::Headers(_)) => {
                return Err(Error::connection(
                    ErrorCode::FrameUnexpected,
                    "a frame the control stream may not carry",
                ))
            }
        };
        Ok((used, event))
    }

    /// The client closed (FIN or reset) its control stream: the connection error the caller
    /// closes with (§6.2.1).
    #[must_use]
    pub fn closed(&self) -> Error {
        Error::connection(
            ErrorCode::ClosedCriticalStream,
            "the client closed its control stream",
        )
    }
}
