//! One HTTP/3 connection, server side, above QUIC (RFC 9114 §3.2, §5.2, §6; RFC 9204 §2.1.2,
//! §4.2): the bytes of the client's streams in; requests, body pieces, stream and connection
//! errors out; the bytes of our control, QPACK encoder and QPACK decoder streams to write.
//!
//! Owns: which stream is which (request streams here, the client's unidirectional streams in
//! `connection/peer_streams.rs`, ours in `connection/outgoing.rs`), which request streams are
//! open and which are done, the peer's SETTINGS and GOAWAY, our GOAWAY and the refusal of
//! requests past it, request streams blocked on QPACK insertions and their resumption.
//! Must not touch: QUIC (packets, flow control, stream credit: the server's event loop runs
//! quinn and feeds this), clocks, what a request is answered with.
//!
//! Driving it, one `Connection` per QUIC connection:
//! * once the handshake is done, open three unidirectional streams, one per `LocalStream`;
//! * for each stream the client opens, in the order QUIC reports them, `stream_opened`; for
//!   its data, `receive`; for its RESET_STREAM, `stream_reset`; to stop reading a request
//!   stream early (the response was sent without the body), `stop_reading`;
//! * after each call, handle the events and write `take_output` on each `LocalStream`;
//! * an `Err` is a connection error: close the QUIC connection with its code and reason. The
//!   connection is then dead: every later call returns the same error.

mod outgoing;
mod peer_streams;
mod stream_ids;
#[cfg(test)]
mod tests;

use std::borrow::Cow;
use std::collections::HashMap;

use super::error::{Error, ErrorCode};
use super::qpack::{Decoder, Encoder};
use super::request_stream::{Event as StreamEvent, RequestError, RequestStream};
use super::response::{write_response_head, HeadError};
use super::settings::Settings;
use crate::message::RequestHead;
use crate::response_head::Head;

pub use outgoing::LocalStream;
use outgoing::Outgoing;
use peer_streams::PeerStreams;
use stream_ids::StreamIds;

/// What we advertise in SETTINGS and enforce. The defaults suit a public server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// SETTINGS_QPACK_MAX_TABLE_CAPACITY: the most the client's encoder may give our
    /// decoder's dynamic table (RFC 9204 §3.2.3); 0 keeps the client to the static table.
    pub qpack_max_table_capacity: u64,
    /// SETTINGS_QPACK_BLOCKED_STREAMS: request streams that may wait for insertions at once;
    /// one more is QPACK_DECOMPRESSION_FAILED (RFC 9204 §2.1.2).
    pub qpack_blocked_streams: u64,
    /// SETTINGS_MAX_FIELD_SECTION_SIZE: the largest request field section, encoded (a
    /// HEADERS frame past it is refused) and decoded (past it the request gets a 431).
    pub max_field_section_size: u64,
    /// A number drawn at random for each connection: picks the reserved setting and frame
    /// type we send (RFC 9114 §7.2.4.1, §7.2.8), so clients that choke on unknown ones are
    /// found rather than ossifying the protocol.
    pub grease: u64,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            // As HTTP/2's header table and header list defaults (`h2::Limits`).
            qpack_max_table_capacity: 4_096,
            qpack_blocked_streams: 16,
            max_field_section_size: 64 << 10,
            grease: 0,
        }
    }
}

/// What the client's streams mean for the server.
#[derive(Debug, PartialEq, Eq)]
pub enum Event<'a> {
    /// A request's head arrived on `stream`, valid (RFC 9114 §4.1.2).
    Request { stream: u64, head: RequestHead },
    /// A piece of the request body on `stream`: borrowed from `receive`'s input, or owned when
    /// it waited behind a blocked field section.
    Body { stream: u64, data: Cow<'a, [u8]> },
    /// The request on `stream` is complete (its FIN, the body's length checked): nothing
    /// more comes for it.
    Finished { stream: u64 },
    /// The request on `stream` ends early and nothing more comes for it: stop reading it
    /// (STOP_SENDING), then answer `FieldSectionTooLarge` with 431 and
    /// `Malformed(MalformedRequest::Connect)` with 405, and reset it with
    /// `error.error().code` otherwise (H3_MESSAGE_ERROR, H3_REQUEST_INCOMPLETE,
    /// H3_REQUEST_REJECTED after our GOAWAY, …).
    StreamError { stream: u64, error: RequestError },
    /// The client's SETTINGS (applied already: `write_head` keeps to its field section limit).
    Settings(Settings),
    /// The client is going away (§5.2): the largest push ID it accepts, which means nothing
    /// to ampd (no push). Finish the requests there are; the client opens no more.
    GoAway(u64),
    /// A unidirectional stream of a type we do not use (§6.2, §9): ask the client to stop
    /// sending on it with `code`. Its data is discarded either way.
    StopSending { stream: u64, code: ErrorCode },
}

impl Event<'_> {
    /// The event with its body copied out of the input it borrowed from.
    #[must_use]
    pub fn into_owned(self) -> Event<'static> {
        match self {
            Event::Body { stream, data } => Event::Body {
                stream,
                data: Cow::Owned(data.into_owned()),
            },
            Event::Request { stream, head } => Event::Request { stream, head },
            Event::Finished { stream } => Event::Finished { stream },
            Event::StreamError { stream, error } => Event::StreamError { stream, error },
            Event::Settings(settings) => Event::Settings(settings),
            Event::GoAway(id) => Event::GoAway(id),
            Event::StopSending { stream, code } => Event::StopSending { stream, code },
        }
    }
}

/// A request stream being read.
#[derive(Debug)]
struct Request {
    stream: RequestStream,
    /// Octets that arrived while a field section was blocked, read once it resumes.
    waiting: Vec<u8>,
    /// The client ended the stream (FIN): the request ends once nothing waits.
    fin: bool,
}

/// Who opened a stream and which way it goes (RFC 9000 §2.1: the two low bits of its ID).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StreamType {
    ClientBidirectional,
    ClientUnidirectional,
    /// Ours: the client sends nothing on these.
    Server,
}

fn stream_type(id: u64) -> StreamType {
    match id & 0x3 {
        0 => StreamType::ClientBidirectional,
        2 => StreamType::ClientUnidirectional,
        _ => StreamType::Server,
    }
}

#[derive(Debug)]
pub struct Connection {
    max_field_section: usize,
    decoder: Decoder,
    encoder: Encoder,
    /// Request streams being read.
    requests: HashMap<u64, Request>,
    /// The request streams seen: one seen and not in `requests` is done.
    request_ids: StreamIds,
    peer: PeerStreams,
    peer_settings: Option<Settings>,
    peer_goaway: Option<u64>,
    /// The ID our GOAWAY named: requests on it and above are refused.
    goaway: Option<u64>,
    outgoing: Outgoing,
    failed: Option<Error>,
}

impl Connection {
    /// A connection whose first output (on `LocalStream::Control`) is our SETTINGS.
    #[must_use]
    pub fn new(config: &Config) -> Connection {
        let settings = Settings {
            qpack_max_table_capacity: config.qpack_max_table_capacity,
            max_field_section_size: Some(config.max_field_section_size),
            qpack_blocked_streams: config.qpack_blocked_streams,
            enable_connect_protocol: false,
            h3_datagram: false,
        };
        Connection {
            max_field_section: usize::try_from(config.max_field_section_size).unwrap_or(usize::MAX),
            decoder: Decoder::new(
                config.qpack_max_table_capacity,
                config.qpack_blocked_streams,
            ),
            encoder: Encoder::new(),
            requests: HashMap::new(),
            request_ids: StreamIds::new(0),
            peer: PeerStreams::default(),
            peer_settings: None,
            peer_goaway: None,
            goaway: None,
            outgoing: Outgoing::new(&settings, config.grease),
            failed: None,
        }
    }

    /// The client opened stream `id` (`receive` on a stream not yet reported opens it too).
    ///
    /// # Errors
    /// A connection error: the one the connection failed with before, or
    /// H3_STREAM_CREATION_ERROR for an ID only the server may open.
    pub fn stream_opened(&mut self, id: u64, events: &mut Vec<Event<'_>>) -> Result<(), Error> {
        self.guard(|conn| conn.open(id, events))
    }

    /// `bytes` arrived on the client's stream `id`, the last of the stream when `fin`.
    ///
    /// # Errors
    /// A connection error (see `Event` for stream errors): H3_STREAM_CREATION_ERROR,
    /// H3_CLOSED_CRITICAL_STREAM, H3_MISSING_SETTINGS, H3_FRAME_UNEXPECTED, H3_FRAME_ERROR,
    /// H3_SETTINGS_ERROR, H3_ID_ERROR, H3_EXCESSIVE_LOAD, QPACK_DECOMPRESSION_FAILED,
    /// QPACK_ENCODER_STREAM_ERROR, QPACK_DECODER_STREAM_ERROR; or the one it failed with
    /// before.
    pub fn receive<'a>(
        &mut self,
        id: u64,
        bytes: &'a [u8],
        fin: bool,
        events: &mut Vec<Event<'a>>,
    ) -> Result<(), Error> {
        self.guard(|conn| {
            conn.open(id, events)?;
            match stream_type(id) {
                StreamType::ClientBidirectional => conn.receive_request(id, bytes, fin, events),
                _ => conn.receive_unidirectional(id, bytes, fin, events),
            }
        })
    }

    /// The client reset stream `id` (RESET_STREAM; its code is for the caller's log: whatever
    /// it is, a request stream is abandoned and a critical stream is lost).
    ///
    /// # Errors
    /// H3_CLOSED_CRITICAL_STREAM for the client's control or QPACK streams (§6.2.1, RFC 9204
    /// §4.2), or the error the connection failed with before.
    pub fn stream_reset(&mut self, id: u64) -> Result<(), Error> {
        self.guard(|conn| match stream_type(id) {
            StreamType::ClientBidirectional if conn.request_ids.first_sight(id) => {
                // Reset before any of it came: it is done, and the client's encoder may have
                // sent a section for it that will never be read.
                conn.decoder.cancel_stream(id);
                Ok(())
            }
            StreamType::ClientBidirectional => {
                conn.stop_reading(id);
                Ok(())
            }
            _ => conn.peer.reset(id),
        })
    }

    /// The server reads no more of request stream `id` (it answered without the body, or
    /// refused the request): what arrives for it later is dropped, and the client's encoder
    /// is told that no section of it will be acknowledged (RFC 9204 §4.4.2).
    pub fn stop_reading(&mut self, id: u64) {
        if let Some(mut request) = self.requests.remove(&id) {
            request.stream.abandon(&mut self.decoder);
        }
    }

    /// Queues a GOAWAY on our control stream (§5.2) naming the first request stream we will
    /// not process: every stream opened so far is still served, every later one is refused
    /// with H3_REQUEST_REJECTED. Graceful stop and reload call it, then close the connection
    /// once the open requests are answered. Calling it again changes nothing: the ID may
    /// only go down, and it is already the lowest that keeps every open request.
    pub fn goaway(&mut self) -> u64 {
        if let Some(id) = self.goaway {
            return id;
        }
        let id = self.request_ids.next();
        self.goaway = Some(id);
        self.outgoing.goaway(id);
        id
    }

    /// Appends the HEADERS frame of a response head (interim 1xx or final) for any request
    /// stream, within the client's SETTINGS_MAX_FIELD_SECTION_SIZE.
    ///
    /// # Errors
    /// `HeadError` (nothing appended): too large for the client, or a 101.
    pub fn write_head(&self, head: &Head, out: &mut Vec<u8>) -> Result<(), HeadError> {
        let limit = self.peer_settings.and_then(|s| s.max_field_section_size);
        write_response_head(&self.encoder, head, limit, out)
    }

    /// Takes the bytes to write on our stream `stream` (empty when there are none); the first
    /// ones are its stream type.
    pub fn take_output(&mut self, stream: LocalStream) -> Vec<u8> {
        self.outgoing.take(stream, &mut self.decoder)
    }

    /// Whether any of our streams has bytes to write.
    #[must_use]
    pub fn has_output(&self) -> bool {
        self.outgoing.has_output(&self.decoder)
    }

    /// Whether request stream `id` waits for QPACK insertions: what arrives for it is kept
    /// until they come, so the event loop may stop reading it until then (QUIC's flow control
    /// then holds the client back rather than our memory).
    #[must_use]
    pub fn is_blocked(&self, id: u64) -> bool {
        self.requests
            .get(&id)
            .is_some_and(|request| request.stream.is_blocked())
    }

    /// Request streams still being read.
    #[must_use]
    pub fn open_requests(&self) -> usize {
        self.requests.len()
    }

    /// The client's SETTINGS, once they came.
    #[must_use]
    pub fn peer_settings(&self) -> Option<Settings> {
        self.peer_settings
    }

    /// The ID of the client's last GOAWAY.
    #[must_use]
    pub fn peer_goaway(&self) -> Option<u64> {
        self.peer_goaway
    }

    /// The ID of our GOAWAY, once sent.
    #[must_use]
    pub fn goaway_id(&self) -> Option<u64> {
        self.goaway
    }

    /// The connection error the connection failed with.
    #[must_use]
    pub fn error(&self) -> Option<Error> {
        self.failed
    }

    /// Runs `step` unless the connection failed before; an error it returns is kept.
    fn guard(
        &mut self,
        step: impl FnOnce(&mut Connection) -> Result<(), Error>,
    ) -> Result<(), Error> {
        if let Some(error) = self.failed {
            return Err(error);
        }
        step(self).inspect_err(|&error| self.failed = Some(error))
    }

    fn open(&mut self, id: u64, events: &mut Vec<Event<'_>>) -> Result<(), Error> {
        match stream_type(id) {
            StreamType::Server => Err(Error::connection(
                ErrorCode::StreamCreationError,
                "a stream ID only the server may open",
            )),
            StreamType::ClientUnidirectional => {
                self.peer.open(id);
                Ok(())
            }
            StreamType::ClientBidirectional => {
                if !self.request_ids.first_sight(id) {
                    return Ok(());
                }
                if self.goaway.is_some_and(|limit| id >= limit) {
                    // §5.2: nothing of it was processed, so the client may retry it on
                    // another connection; its encoder learns no section will be read.
                    self.decoder.cancel_stream(id);
                    events.push(Event::StreamError {
                        stream: id,
                        error: RequestError::Protocol(Error::stream(
                            ErrorCode::RequestRejected,
                            "a request after our GOAWAY",
                        )),
                    });
                    return Ok(());
                }
                let request = Request {
                    stream: RequestStream::new(id, self.max_field_section),
                    waiting: Vec::new(),
                    fin: false,
                };
                self.requests.insert(id, request);
                Ok(())
            }
        }
    }

    fn receive_request<'a>(
        &mut self,
        id: u64,
        bytes: &'a [u8],
        fin: bool,
        events: &mut Vec<Event<'a>>,
    ) -> Result<(), Error> {
        let Some(request) = self.requests.get_mut(&id) else {
            // A stream done or refused: the client had not yet seen our STOP_SENDING.
            return Ok(());
        };
        request.fin |= fin;
        if request.stream.is_blocked() {
            request.waiting.extend_from_slice(bytes);
            return Ok(());
        }
        self.read_request(id, bytes, events)
    }

    /// Reads `input` on request stream `id` until it is used or the stream blocks (the rest
    /// then waits), and ends the request after its FIN.
    fn read_request<'a>(
        &mut self,
        id: u64,
        input: &'a [u8],
        events: &mut Vec<Event<'a>>,
    ) -> Result<(), Error> {
        let Some(request) = self.requests.get_mut(&id) else {
            return Ok(());
        };
        let mut at = 0;
        let outcome = loop {
            if request.stream.is_blocked() {
                request.waiting.extend_from_slice(&input[at..]);
                return Ok(());
            }
            if at == input.len() {
                break request.fin.then(|| request.stream.end()).transpose();
            }
            match request.stream.read(&mut self.decoder, &input[at..]) {
                Ok((used, event)) => {
                    at += used;
                    if let Some(event) = event {
                        events.extend(request_event(id, event));
                    } else if used == 0 && !request.stream.is_blocked() {
                        // The reader uses every octet it is given unless blocked; should it
                        // not, waiting for more is still right.
                        request.waiting.extend_from_slice(&input[at..]);
                        return Ok(());
                    }
                }
                Err(error) => break Err(error),
            }
        };
        match outcome {
            // No FIN yet, or a section blocked at the end: more to come.
            Ok(None | Some(false)) => Ok(()),
            Ok(Some(true)) => {
                self.requests.remove(&id);
                events.push(Event::Finished { stream: id });
                Ok(())
            }
            Err(error) => self.request_failed(id, error, events),
        }
    }

    /// A request stream's error: the stream's own ends it alone, a connection-scope one
    /// (a frame or QPACK error) ends the connection.
    fn request_failed(
        &mut self,
        id: u64,
        error: RequestError,
        events: &mut Vec<Event<'_>>,
    ) -> Result<(), Error> {
        let scoped = error.error();
        if scoped.scope == super::error::Scope::Connection {
            return Err(scoped);
        }
        self.stop_reading(id);
        events.push(Event::StreamError { stream: id, error });
        Ok(())
    }

    /// Decodes the field sections the encoder stream just unblocked (RFC 9204 §2.1.2), then
    /// what waited behind each: whether there were any.
    fn resume_unblocked(&mut self, events: &mut Vec<Event<'_>>) -> Result<bool, Error> {
        let unblocked = self.decoder.take_unblocked();
        for &id in &unblocked {
            let Some(request) = self.requests.get_mut(&id) else {
                continue;
            };
            match request.stream.resume(&mut self.decoder) {
                Ok(event) => events.extend(event.and_then(|event| request_event(id, event))),
                Err(error) => {
                    self.request_failed(id, error, events)?;
                    continue;
                }
            }
            let waiting = std::mem::take(&mut request.waiting);
            let mut read = Vec::new();
            let outcome = self.read_request(id, &waiting, &mut read);
            events.extend(read.into_iter().map(|event| event.into_owned()));
            outcome?;
        }
        Ok(!unblocked.is_empty())
    }
}

/// A request stream's event as the connection's. Trailers are validated by the stream
/// (§4.1.2) and then dropped: nothing ampd serves reads request trailers (RFC 9110 §6.5.1
/// lets a recipient ignore them).
fn request_event(id: u64, event: StreamEvent<'_>) -> Option<Event<'_>> {
    match event {
        StreamEvent::Head(head) => Some(Event::Request { stream: id, head }),
        StreamEvent::Body(piece) => Some(Event::Body {
            stream: id,
            data: Cow::Borrowed(piece),
        }),
        StreamEvent::Trailers(_) => None,
    }
}
