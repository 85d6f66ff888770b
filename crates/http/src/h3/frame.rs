//! The frame layer (RFC 9114 §7): a frame's type and length, the frames each kind of stream
//! may carry, the payloads of the frames that are buffered, and the writers of the frames a
//! server sends.
//!
//! Owns: bytes ↔ frames on one stream, resumable across reads, DATA passed through in pieces
//! (never buffered whole). Must not touch: the order of frames on a request stream
//! (`request.rs`), what a setting or a GOAWAY means to the connection.

use super::error::{Error, ErrorCode};
use super::settings::Settings;
use super::varint;

/// Frame types (§7.2, §11.2.1).
pub mod kind {
    pub const DATA: u64 = 0x00;
    pub const HEADERS: u64 = 0x01;
    pub const CANCEL_PUSH: u64 = 0x03;
    pub const SETTINGS: u64 = 0x04;
    pub const PUSH_PROMISE: u64 = 0x05;
    pub const GOAWAY: u64 = 0x07;
    pub const MAX_PUSH_ID: u64 = 0x0d;
    /// The HTTP/2 types HTTP/3 reserves (PRIORITY, PING, WINDOW_UPDATE, CONTINUATION):
    /// receiving one is a connection error (§7.2.8).
    pub const RESERVED_FROM_HTTP2: [u64; 4] = [0x02, 0x06, 0x08, 0x09];
}

/// The streams a frame reader serves (§6.2.1, §6.1): which frames are allowed where is
/// decided here, per the table of RFC 9114 Appendix A.2.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StreamKind {
    /// The peer's control stream: SETTINGS first and once, then GOAWAY, MAX_PUSH_ID,
    /// CANCEL_PUSH.
    Control,
    /// A client-initiated bidirectional stream: HEADERS and DATA.
    Request,
}

/// What one step of reading found.
#[derive(Debug, PartialEq, Eq)]
pub enum Frame<'a> {
    /// A DATA frame of `length` octets begins; its payload follows as `Data` pieces.
    DataBegins {
        length: u64,
    },
    /// A piece of a DATA frame's payload, borrowed from the input.
    Data(&'a [u8]),
    /// A HEADERS frame: an encoded field section (QPACK).
    Headers(Vec<u8>),
    Settings(Settings),
    /// From a client: the smallest push ID it will not accept (§5.2).
    GoAway(u64),
    MaxPushId(u64),
    CancelPush(u64),
}

/// Reads one stream's frames, whatever the sizes of the reads that deliver them.
#[derive(Debug)]
pub struct FrameReader {
    stream: StreamKind,
    /// The largest HEADERS payload buffered; past it the stream is refused.
    max_field_section: usize,
    state: State,
    /// A frame header that arrived in pieces (at most two 8-octet integers).
    header: Vec<u8>,
    /// The control stream's first frame has been read.
    settings_seen: bool,
}

#[derive(Debug)]
enum State {
    Header,
    /// A frame whose payload is read whole before it means anything.
    Buffered {
        kind: u64,
        left: usize,
        payload: Vec<u8>,
    },
    Data {
        left: u64,
    },
    /// An unknown or reserved type: its payload is read and dropped (§9).
    Skip {
        left: u64,
    },
}

/// The largest SETTINGS, GOAWAY, MAX_PUSH_ID or CANCEL_PUSH payload read: SETTINGS is
/// bounded by its entry limit (64 pairs of at most 16 octets), the others hold one integer.
const MAX_CONTROL_PAYLOAD: usize = 1024;

impl FrameReader {
    #[must_use]
    pub fn new(stream: StreamKind, max_field_section: usize) -> FrameReader {
        FrameReader {
            stream,
            max_field_section,
            state: State::Header,
            header: Vec::new(),
            settings_seen: false,
        }
    }

    /// Reads from `input`: how many octets were used and the frame (or DATA piece) they
    /// completed, if any. Call again with the rest while it uses octets.
    ///
    /// # Errors
    /// The connection or stream error RFC 9114 names for the frame: H3_FRAME_UNEXPECTED for a
    /// frame the stream may not carry, H3_MISSING_SETTINGS for a control stream not opened by
    /// SETTINGS, H3_FRAME_ERROR for a payload that does not match its frame's layout,
    /// H3_EXCESSIVE_LOAD for a field section past the limit. After an error the stream is
    /// not read further.
    pub fn read<'a>(&mut self, input: &'a [u8]) -> Result<(usize, Option<Frame<'a>>), Error> {
        match &mut self.state {
            State::Header => self.read_header(input),
            State::Data { left } => {
                let take = usize::try_from(*left)
                    .unwrap_or(usize::MAX)
                    .min(input.len());
                if take == 0 {
                    return Ok((0, None));
                }
                *left -= take as u64;
                if *left == 0 {
                    self.state = State::Header;
                }
                Ok((take, Some(Frame::Data(&input[..take]))))
            }
            State::Skip { left } => {
                let take = usize::try_from(*left)
                    .unwrap_or(usize::MAX)
                    .min(input.len());
                *left -= take as u64;
                if *left == 0 {
                    self.state = State::Header;
                }
                Ok((take, None))
            }
            State::Buffered {
                kind,
                left,
                payload,
            } => {
                let take = (*left).min(input.len());
                payload.extend_from_slice(&input[..take]);
                *left -= take;
                if *left > 0 {
                    return Ok((take, None));
                }
                let kind = *kind;
                let payload = std::mem::take(payload);
                self.state = State::Header;
                Ok((take, Some(self.complete(kind, payload)?)))
            }
        }
    }

    /// Whether the stream may end here: at a frame boundary (§7.1: a stream that ends inside
    /// a frame is an H3_FRAME_ERROR).
    #[must_use]
    pub fn at_frame_boundary(&self) -> bool {
        matches!(self.state, State::Header) && self.header.is_empty()
    }

    fn read_header<'a>(&mut self, input: &'a [u8]) -> Result<(usize, Option<Frame<'a>>), Error> {
        // Parse from the saved partial header followed by the new input, without copying the
        // input when nothing was saved.
        let saved = self.header.len();
        let joined;
        let view: &[u8] = if saved == 0 {
            input
        } else {
            joined = [&self.header[..], &input[..input.len().min(16)]].concat();
            &joined
        };
        let mut at = 0;
        let (Some(kind), Some(length)) =
            (varint::decode(view, &mut at), varint::decode(view, &mut at))
        else {
            // Keep what there is (fewer than 16 octets) for the next read.
            let keep = input.len().min(16 - saved);
            self.header.extend_from_slice(&input[..keep]);
            return Ok((keep, None));
        };
        let used = at - saved;
        self.header.clear();
        self.begin(kind, length)?;
        if kind == kind::DATA {
            if length == 0 {
                self.state = State::Header;
            }
            return Ok((used, Some(Frame::DataBegins { length })));
        }
        if let State::Buffered { left: 0, .. } = self.state {
            // An empty payload is complete at once.
            return self
                .read(&input[used..])
                .map(|(more, frame)| (used + more, frame));
        }
        Ok((used, None))
    }

    /// Checks a frame's type against the stream and sets up reading its payload.
    fn begin(&mut self, kind: u64, length: u64) -> Result<(), Error> {
        if kind::RESERVED_FROM_HTTP2.contains(&kind) {
            return Err(Error::connection(
                ErrorCode::FrameUnexpected,
                "an HTTP/2 frame type",
            ));
        }
        let known = matches!(
            kind,
            kind::DATA
                | kind::HEADERS
                | kind::CANCEL_PUSH
                | kind::SETTINGS
                | kind::PUSH_PROMISE
                | kind::GOAWAY
                | kind::MAX_PUSH_ID
        );
        if self.stream == StreamKind::Control && !self.settings_seen {
            if kind != kind::SETTINGS {
                return Err(Error::connection(
                    ErrorCode::MissingSettings,
                    "the control stream does not begin with SETTINGS",
                ));
            }
            self.settings_seen = true;
        } else if known && !self.allowed(kind) {
            return Err(Error::connection(
                ErrorCode::FrameUnexpected,
                match self.stream {
                    StreamKind::Control => "a frame the control stream may not carry",
                    StreamKind::Request => "a frame a request stream may not carry",
                },
            ));
        }
        self.state = match kind {
            kind::DATA => State::Data { left: length },
            _ if !known && length == 0 => State::Header,
            _ if !known => State::Skip { left: length },
            kind::HEADERS => {
                let left = usize::try_from(length)
                    .ok()
                    .filter(|&left| left <= self.max_field_section)
                    .ok_or(Error::stream(
                        ErrorCode::ExcessiveLoad,
                        "a field section past the limit",
                    ))?;
                State::Buffered {
                    kind,
                    left,
                    payload: Vec::with_capacity(left.min(16_384)),
                }
            }
            _ => {
                let left = usize::try_from(length)
                    .ok()
                    .filter(|&left| left <= MAX_CONTROL_PAYLOAD)
                    .ok_or(Error::connection(
                        ErrorCode::ExcessiveLoad,
                        "a control frame past its size limit",
                    ))?;
                State::Buffered {
                    kind,
                    left,
                    payload: Vec::with_capacity(left),
                }
            }
        };
        Ok(())
    }

    /// Whether a known frame type may arrive on this stream (after SETTINGS, for control).
    fn allowed(&self, kind: u64) -> bool {
        match self.stream {
            // A second SETTINGS is unexpected (§7.2.4); PUSH_PROMISE comes only from servers.
            StreamKind::Control => {
                matches!(kind, kind::GOAWAY | kind::MAX_PUSH_ID | kind::CANCEL_PUSH)
            }
            StreamKind::Request => matches!(kind, kind::DATA | kind::HEADERS),
        }
    }

    fn complete<'a>(&mut self, kind: u64, payload: Vec<u8>) -> Result<Frame<'a>, Error> {
        Ok(match kind {
            kind::HEADERS => Frame::Headers(payload),
            kind::SETTINGS => Frame::Settings(Settings::decode(&payload)?),
            kind::GOAWAY => Frame::GoAway(single_integer(&payload)?),
            kind::MAX_PUSH_ID => Frame::MaxPushId(single_integer(&payload)?),
            _ => Frame::CancelPush(single_integer(&payload)?),
        })
    }
}

/// The payload of GOAWAY, MAX_PUSH_ID and CANCEL_PUSH: exactly one integer (§7.1: more or
/// fewer octets than the layout is H3_FRAME_ERROR).
fn single_integer(payload: &[u8]) -> Result<u64, Error> {
    let mut at = 0;
    match varint::decode(payload, &mut at) {
        Some(value) if at == payload.len() => Ok(value),
        _ => Err(Error::connection(
            ErrorCode::FrameError,
            "a frame's payload is not one integer",
        )),
    }
}

/// Appends a frame header.
pub fn write_header(kind: u64, length: u64, out: &mut Vec<u8>) {
    varint::encode(kind, out);
    varint::encode(length, out);
}

/// Appends a SETTINGS frame.
pub fn write_settings(settings: &Settings, out: &mut Vec<u8>) {
    let mut payload = Vec::new();
    settings.encode(&mut payload);
    write_header(kind::SETTINGS, payload.len() as u64, out);
    out.extend_from_slice(&payload);
}

/// Appends a HEADERS frame carrying `field_section`.
pub fn write_headers(field_section: &[u8], out: &mut Vec<u8>) {
    write_header(kind::HEADERS, field_section.len() as u64, out);
    out.extend_from_slice(field_section);
}

/// Appends a GOAWAY frame: from a server, the first client-initiated bidirectional stream ID
/// it will not process (§5.2).
pub fn write_goaway(id: u64, out: &mut Vec<u8>) {
    write_header(kind::GOAWAY, varint::len(id) as u64, out);
    varint::encode(id, out);
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Every frame `input` holds, read in pieces of `step` octets; DATA pieces joined.
    fn read_all(reader: &mut FrameReader, input: &[u8], step: usize) -> Result<Vec<String>, Error> {
        let mut seen: Vec<String> = Vec::new();
        let mut start = 0;
        let mut end = 0;
        while end < input.len() || start < end {
            end = (end + step).min(input.len());
            loop {
                let (used, frame) = reader.read(&input[start..end])?;
                start += used;
                match frame {
                    Some(Frame::Data(piece)) => {
                        let text: String = piece.iter().map(|byte| format!("{byte:02x}")).collect();
                        match seen.last_mut() {
                            Some(last) if last.starts_with("data:") => last.push_str(&text),
                            _ => seen.push(format!("data:{text}")),
                        }
                    }
                    Some(Frame::DataBegins { length }) => seen.push(format!("begins {length}")),
                    Some(other) => seen.push(format!("{other:?}")),
                    None if used == 0 => break,
                    None => {}
                }
            }
            if end == input.len() {
                break;
            }
        }
        Ok(seen)
    }

    fn request_stream() -> Vec<u8> {
        let mut out = Vec::new();
        write_headers(b"\x00\x00\xd1", &mut out);
        // An unknown (reserved) frame type is skipped.
        write_header(0x21, 3, &mut out);
        out.extend_from_slice(b"xyz");
        write_header(kind::DATA, 5, &mut out);
        out.extend_from_slice(b"hello");
        write_header(kind::DATA, 0, &mut out);
        write_headers(b"", &mut out);
        out
    }

    #[test]
    fn a_request_stream_reads_the_same_in_any_pieces() {
        let input = request_stream();
        let whole = read_all(
            &mut FrameReader::new(StreamKind::Request, 1024),
            &input,
            input.len(),
        )
        .unwrap();
        assert_eq!(
            whole,
            [
                "Headers([0, 0, 209])",
                "begins 5",
                "data:68656c6c6f",
                "begins 0",
                "Headers([])"
            ]
        );
        for step in 1..input.len() {
            let mut reader = FrameReader::new(StreamKind::Request, 1024);
            assert_eq!(
                read_all(&mut reader, &input, step).unwrap(),
                whole,
                "step {step}"
            );
            assert!(reader.at_frame_boundary());
        }
    }

    #[test]
    fn a_stream_that_ends_inside_a_frame_is_not_at_a_boundary() {
        let input = request_stream();
        let mut reader = FrameReader::new(StreamKind::Request, 1024);
        read_all(&mut reader, &input[..input.len() - 1], 64).unwrap();
        assert!(!reader.at_frame_boundary());
    }

    #[test]
    fn the_control_stream_begins_with_settings_and_has_it_once() {
        let mut settings = Vec::new();
        write_settings(
            &Settings {
                qpack_max_table_capacity: 100,
                ..Settings::default()
            },
            &mut settings,
        );
        let mut input = settings.clone();
        write_goaway(8, &mut input);
        let mut reader = FrameReader::new(StreamKind::Control, 1024);
        let frames = read_all(&mut reader, &input, 3).unwrap();
        assert_eq!(frames.len(), 2);
        assert!(frames[0].starts_with("Settings("), "{frames:?}");
        assert_eq!(frames[1], "GoAway(8)");

        let mut twice = settings.clone();
        twice.extend_from_slice(&settings);
        let error = read_all(&mut FrameReader::new(StreamKind::Control, 1024), &twice, 64);
        assert_eq!(error.unwrap_err().code, ErrorCode::FrameUnexpected);

        let mut goaway_first = Vec::new();
        write_goaway(0, &mut goaway_first);
        let error = read_all(
            &mut FrameReader::new(StreamKind::Control, 1024),
            &goaway_first,
            64,
        );
        assert_eq!(error.unwrap_err().code, ErrorCode::MissingSettings);
    }

    #[test]
    fn frames_out_of_place_are_unexpected() {
        let mut data_on_control = Vec::new();
        write_settings(&Settings::default(), &mut data_on_control);
        write_header(kind::DATA, 0, &mut data_on_control);
        let mut reader = FrameReader::new(StreamKind::Control, 1024);
        assert_eq!(
            read_all(&mut reader, &data_on_control, 64)
                .unwrap_err()
                .code,
            ErrorCode::FrameUnexpected
        );
        for kind in [kind::SETTINGS, kind::GOAWAY, kind::PUSH_PROMISE, 0x02, 0x09] {
            let mut input = Vec::new();
            write_header(kind, 0, &mut input);
            let error = read_all(&mut FrameReader::new(StreamKind::Request, 1024), &input, 64);
            let error = error.unwrap_err();
            assert_eq!(error.code, ErrorCode::FrameUnexpected, "type {kind:#x}");
            assert_eq!(error.scope, super::super::error::Scope::Connection);
        }
    }

    #[test]
    fn payloads_that_do_not_match_their_layout_are_frame_errors() {
        let mut input = Vec::new();
        write_settings(&Settings::default(), &mut input);
        write_header(kind::GOAWAY, 2, &mut input);
        input.extend_from_slice(&[0x01, 0x02]);
        let error = read_all(&mut FrameReader::new(StreamKind::Control, 1024), &input, 64);
        assert_eq!(error.unwrap_err().code, ErrorCode::FrameError);
    }

    #[test]
    fn a_field_section_past_the_limit_refuses_the_stream_before_it_is_read() {
        let mut input = Vec::new();
        write_header(kind::HEADERS, 1 << 40, &mut input);
        let mut reader = FrameReader::new(StreamKind::Request, 16_384);
        let error = reader.read(&input).unwrap_err();
        assert_eq!(error.code, ErrorCode::ExcessiveLoad);
        assert_eq!(error.scope, super::super::error::Scope::Stream);
    }

    proptest! {
        #[test]
        fn arbitrary_input_never_panics_and_pieces_agree(
            input in proptest::collection::vec(any::<u8>(), 0..256),
            step in 1usize..32,
        ) {
            let whole = read_all(&mut FrameReader::new(StreamKind::Request, 128), &input, input.len().max(1));
            let pieces = read_all(&mut FrameReader::new(StreamKind::Request, 128), &input, step);
            prop_assert_eq!(whole, pieces);
        }
    }
}
