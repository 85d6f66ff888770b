//! One request stream, server side (RFC 9114 §4.1): its frames in order → the request's head,
//! body pieces, trailers, and the typed error the stream or the connection ends with.
//!
//! Owns the order of frames on a request stream (HEADERS, DATA*, [trailing HEADERS]), the
//! malformed-message rules of §4.1.2 (the field rules are the HTTP/2 `RequestBuilder`'s, shared:
//! RFC 9114 §4.2 and §4.3.1 repeat RFC 9113 §8.2 and §8.3.1), and the count of DATA octets
//! against `content-length`. Must not touch: QUIC (the caller feeds the stream's octets and
//! says when it ended), the QPACK decoder's state beyond this stream's sections, what the
//! request is answered with.

use super::error::{Error, ErrorCode};
use super::frame::{Frame, FrameReader, StreamKind};
use super::qpack::{Decoder, Section};
use crate::h2::fields::{MalformedRequest, RequestBuilder};
use crate::message::{BodyFraming, Header, RequestHead, Version};
use crate::token::{is_field_value, is_tchar};

/// What reading a request stream found.
#[derive(Debug, PartialEq, Eq)]
pub enum Event<'a> {
    /// The request's head (from the first HEADERS frame).
    Head(RequestHead),
    /// A piece of the body, borrowed from the input.
    Body(&'a [u8]),
    /// The trailer section (a HEADERS frame after the body), validated and then for the
    /// caller to ignore or use.
    Trailers(Vec<Header>),
}

/// Why a request stream ends early.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RequestError {
    /// A malformed request (§4.1.2): H3_MESSAGE_ERROR on the stream, the connection goes on.
    /// `MalformedRequest::Connect` is answered 405 rather than reset, as over HTTP/2.
    Malformed(MalformedRequest),
    /// The decoded field section passed the limit we advertised
    /// (SETTINGS_MAX_FIELD_SECTION_SIZE): answered 431 (§4.2.2).
    FieldSectionTooLarge,
    /// A frame error, an invalid frame sequence, a QPACK failure, an incomplete request.
    Protocol(Error),
}

impl RequestError {
    /// The error code and scope to end the stream or the connection with.
    #[must_use]
    pub fn error(&self) -> Error {
        match self {
            RequestError::Malformed(_) => {
                Error::stream(ErrorCode::MessageError, "a malformed request")
            }
            RequestError::FieldSectionTooLarge => {
                Error::stream(ErrorCode::ExcessiveLoad, "a field section past the limit")
            }
            RequestError::Protocol(error) => *error,
        }
    }
}

impl From<Error> for RequestError {
    fn from(error: Error) -> RequestError {
        RequestError::Protocol(error)
    }
}

impl From<MalformedRequest> for RequestError {
    fn from(fault: MalformedRequest) -> RequestError {
        RequestError::Malformed(fault)
    }
}

/// Where the stream is in HEADERS DATA* [HEADERS] (§4.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Head,
    Body,
    /// Trailers were received: no frame but unknown ones may follow.
    Trailed,
}

/// A field section that waits for QPACK insertions (RFC 9204 §2.1.2).
#[derive(Debug)]
struct Blocked {
    section: Vec<u8>,
    trailers: bool,
}

#[derive(Debug)]
pub struct RequestStream {
    id: u64,
    frames: FrameReader,
    phase: Phase,
    blocked: Option<Blocked>,
    /// The request's `content-length`, once the head is known.
    content_length: Option<u64>,
    /// DATA payload octets announced so far (§4.1.2 compares their sum with content-length).
    body_length: u64,
    max_list_size: usize,
}

fn unexpected(reason: &'static str) -> RequestError {
    RequestError::Protocol(Error::connection(ErrorCode::FrameUnexpected, reason))
}

impl RequestStream {
    /// The stream `id` (client-initiated bidirectional). `max_field_section`: the
    /// SETTINGS_MAX_FIELD_SECTION_SIZE we advertised, bounding both a HEADERS frame's payload
    /// and its decoded list.
    #[must_use]
    pub fn new(id: u64, max_field_section: usize) -> RequestStream {
        RequestStream {
            id,
            frames: FrameReader::new(StreamKind::Request, max_field_section),
            phase: Phase::Head,
            blocked: None,
            content_length: None,
            body_length: 0,
            max_list_size: max_field_section,
        }
    }

    #[must_use]
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Whether a field section waits for the peer's encoder stream: nothing more is read
    /// (`read` uses no octets) until `resume`.
    #[must_use]
    pub fn is_blocked(&self) -> bool {
        self.blocked.is_some()
    }

    /// Reads from `input`: how many octets were used and what they completed, if anything.
    /// Call again with the rest while it uses octets.
    ///
    /// # Errors
    /// See `RequestError`. After an error the stream is not read further.
    pub fn read<'a>(
        &mut self,
        decoder: &mut Decoder,
        input: &'a [u8],
    ) -> Result<(usize, Option<Event<'a>>), RequestError> {
        if self.blocked.is_some() {
            return Ok((0, None));
        }
        let (used, frame) = self.frames.read(input)?;
        let event = match frame {
            None => None,
            Some(Frame::DataBegins { length }) => {
                match self.phase {
                    Phase::Head => return Err(unexpected("DATA before the request's HEADERS")),
                    Phase::Trailed => return Err(unexpected("DATA after the trailers")),
                    Phase::Body => {}
                }
                self.body_length = self.body_length.saturating_add(length);
                // §4.1.2: more DATA than content-length says is malformed, known as soon as
                // the frame's length is.
                if self
                    .content_length
                    .is_some_and(|declared| self.body_length > declared)
                {
                    return Err(MalformedRequest::ContentLength.into());
                }
                None
            }
            Some(Frame::Data(piece)) => Some(Event::Body(piece)),
            Some(Frame::Headers(section)) => {
                let trailers = match self.phase {
                    Phase::Head => false,
                    Phase::Body => true,
                    Phase::Trailed => return Err(unexpected("HEADERS after the trailers")),
                };
                self.decode(decoder, section, trailers)?
            }
            // The reader refuses every other frame on a request stream; should it not, the
            // sequence is still invalid (§4.1).
            Some(_) => return Err(unexpected("a frame a request stream may not carry")),
        };
        Ok((used, event))
    }

    /// Decodes the section that was blocked, once the decoder's `take_unblocked` named this
    /// stream: the head or trailers it completes.
    ///
    /// # Errors
    /// As `read`.
    pub fn resume(
        &mut self,
        decoder: &mut Decoder,
    ) -> Result<Option<Event<'static>>, RequestError> {
        match self.blocked.take() {
            Some(Blocked { section, trailers }) => self.decode(decoder, section, trailers),
            None => Ok(None),
        }
    }

    /// The client ended the stream (FIN). `Ok(true)`: the request is complete; `Ok(false)`: a
    /// section is blocked, call again after `resume`.
    ///
    /// # Errors
    /// H3_FRAME_ERROR when the stream ends inside a frame (§7.1), H3_REQUEST_INCOMPLETE when
    /// it ends before the request's HEADERS (§4.1), H3_MESSAGE_ERROR when the body is shorter
    /// than `content-length` (§4.1.2).
    pub fn end(&mut self) -> Result<bool, RequestError> {
        if !self.frames.at_frame_boundary() {
            return Err(
                Error::connection(ErrorCode::FrameError, "a stream ends inside a frame").into(),
            );
        }
        if self.blocked.is_some() {
            return Ok(false);
        }
        if self.phase == Phase::Head {
            return Err(Error::stream(
                ErrorCode::RequestIncomplete,
                "the stream ends before the request's HEADERS",
            )
            .into());
        }
        if self
            .content_length
            .is_some_and(|declared| declared != self.body_length)
        {
            return Err(MalformedRequest::ContentLength.into());
        }
        Ok(true)
    }

    /// The client reset the stream before its end, or the server stops reading it: a blocked
    /// section no longer counts against the decoder's limit, and the peer's encoder is told
    /// (RFC 9204 §4.4.2: a section not yet read, whole or in part, may reference entries the
    /// encoder must otherwise keep until an acknowledgement that never comes).
    pub fn abandon(&mut self, decoder: &mut Decoder) {
        self.blocked = None;
        decoder.cancel_stream(self.id);
    }

    fn decode<'a>(
        &mut self,
        decoder: &mut Decoder,
        section: Vec<u8>,
        trailers: bool,
    ) -> Result<Option<Event<'a>>, RequestError> {
        if trailers {
            let mut fields = TrailerFields::default();
            let decoded =
                decoder.decode_section(self.id, &section, self.max_list_size, &mut |n, v| {
                    fields.field(n, v);
                })?;
            if !self.settle(decoded, section, true)? {
                return Ok(None);
            }
            self.phase = Phase::Trailed;
            return Ok(Some(Event::Trailers(fields.finish()?)));
        }
        let mut builder = RequestBuilder::for_version(Version::Http3);
        let decoded =
            decoder.decode_section(self.id, &section, self.max_list_size, &mut |n, v| {
                builder.field(n, v);
            })?;
        if !self.settle(decoded, section, false)? {
            return Ok(None);
        }
        let head = builder.finish(false)?;
        self.content_length = match head.body {
            BodyFraming::Length(length) => Some(length),
            _ => None,
        };
        self.phase = Phase::Body;
        Ok(Some(Event::Head(head)))
    }

    /// Whether a decoded section is complete (`true`) or kept as blocked (`false`).
    fn settle(
        &mut self,
        decoded: Section,
        section: Vec<u8>,
        trailers: bool,
    ) -> Result<bool, RequestError> {
        match decoded {
            Section::Blocked => {
                self.blocked = Some(Blocked { section, trailers });
                Ok(false)
            }
            Section::Decoded {
                over_limit: true, ..
            } => Err(RequestError::FieldSectionTooLarge),
            Section::Decoded { .. } => Ok(true),
        }
    }
}

/// A trailer section's fields (§4.1.2, §4.3: no pseudo-header; names in lower case), with
/// the first fault kept.
#[derive(Default)]
struct TrailerFields {
    fields: Vec<Header>,
    fault: Option<MalformedRequest>,
}

impl TrailerFields {
    fn field(&mut self, name: &[u8], value: &[u8]) {
        if self.fault.is_some() {
            return;
        }
        if name.first() == Some(&b':') {
            self.fault = Some(MalformedRequest::PseudoHeader("trailers"));
            return;
        }
        let name_ok =
            !name.is_empty() && name.iter().all(|&b| is_tchar(b) && !b.is_ascii_uppercase());
        let padded = matches!(value.first(), Some(b' ' | b'\t'))
            || matches!(value.last(), Some(b' ' | b'\t'));
        if !name_ok || padded || !is_field_value(value) {
            self.fault = Some(MalformedRequest::FieldSyntax);
            return;
        }
        if crate::h2::fields::is_connection_specific(name) {
            self.fault = Some(MalformedRequest::ConnectionSpecific);
            return;
        }
        self.fields.push(Header {
            // A tchar name is ASCII.
            name: String::from_utf8_lossy(name).into(),
            value: value.into(),
        });
    }

    fn finish(self) -> Result<Vec<Header>, MalformedRequest> {
        match self.fault {
            Some(fault) => Err(fault),
            None => Ok(self.fields),
        }
    }
}
