//! `Connection` against hand-made client frames, grouped as h2spec groups its cases (RFC 9113
//! section numbers). Header blocks use the static table only (RFC 7541 Appendix A), so each
//! block is a few literal bytes.

use std::time::{Duration, Instant};

use super::*;
use crate::h2::frame::{flags, Kind, MAX_FRAME_SIZE_LIMIT};
use crate::request::Method;

/// `:method GET`, `:path /`, `:scheme http`, `:authority localhost` (literal without
/// indexing, name index 1).
const GET: &[u8] = &[
    0x82, 0x84, 0x86, 0x01, 9, b'l', b'o', b'c', b'a', b'l', b'h', b'o', b's', b't',
];

/// A POST head with `content-length: LEN` (name index 28, literal without indexing).
fn post(length: &str) -> Vec<u8> {
    let mut block = vec![0x83, 0x84, 0x86, 0x01, 9];
    block.extend_from_slice(b"localhost");
    block.extend_from_slice(&[0x0f, 0x0d, u8::try_from(length.len()).unwrap()]);
    block.extend_from_slice(length.as_bytes());
    block
}

/// A POST head without content-length (a body of unknown length).
fn post_unsized() -> Vec<u8> {
    let mut block = vec![0x83, 0x84, 0x86, 0x01, 9];
    block.extend_from_slice(b"localhost");
    block
}

/// A field `name: value`, literal without indexing, new name (both under 127 bytes).
fn literal(name: &str, value: &str) -> Vec<u8> {
    assert!(name.len() < 127 && value.len() < 127);
    let mut block = vec![0x00, u8::try_from(name.len()).unwrap()];
    block.extend_from_slice(name.as_bytes());
    block.push(u8::try_from(value.len()).unwrap());
    block.extend_from_slice(value.as_bytes());
    block
}

fn frame(kind: Kind, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    FrameHeader {
        length: u32::try_from(payload.len()).unwrap(),
        kind,
        flags,
        stream,
    }
    .write(&mut out);
    out.extend_from_slice(payload);
    out
}

fn headers(stream: u32, block: &[u8], end_stream: bool) -> Vec<u8> {
    let end = if end_stream { flags::END_STREAM } else { 0 };
    frame(Kind::Headers, flags::END_HEADERS | end, stream, block)
}

fn data(stream: u32, payload: &[u8], end_stream: bool) -> Vec<u8> {
    let end = if end_stream { flags::END_STREAM } else { 0 };
    frame(Kind::Data, end, stream, payload)
}

fn settings(params: &[(u16, u32)]) -> Vec<u8> {
    let mut payload = Vec::new();
    for &(id, value) in params {
        payload.extend_from_slice(&id.to_be_bytes());
        payload.extend_from_slice(&value.to_be_bytes());
    }
    frame(Kind::Settings, 0, 0, &payload)
}

fn window_update(stream: u32, increment: u32) -> Vec<u8> {
    frame(Kind::WindowUpdate, 0, stream, &increment.to_be_bytes())
}

fn rst_stream(stream: u32, code: ErrorCode) -> Vec<u8> {
    frame(Kind::RstStream, 0, stream, &code.code().to_be_bytes())
}

fn ping(payload: [u8; 8]) -> Vec<u8> {
    frame(Kind::Ping, 0, 0, &payload)
}

/// A PRIORITY payload depending on `on`.
fn priority(on: u32) -> Vec<u8> {
    let mut payload = on.to_be_bytes().to_vec();
    payload.push(16);
    payload
}

/// A frame the server wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Sent {
    kind: Kind,
    flags: u8,
    stream: u32,
    payload: Vec<u8>,
}

fn parse_frames(mut bytes: &[u8]) -> Vec<Sent> {
    let mut frames = Vec::new();
    while !bytes.is_empty() {
        let header = FrameHeader::parse(bytes[..HEADER_LEN].try_into().unwrap());
        let end = HEADER_LEN + header.length as usize;
        frames.push(Sent {
            kind: header.kind,
            flags: header.flags,
            stream: header.stream,
            payload: bytes[HEADER_LEN..end].to_vec(),
        });
        bytes = &bytes[end..];
    }
    frames
}

/// What an `Event` said, owned, so tests can keep it past the input.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Seen {
    Request {
        stream: u32,
        method: Method,
        target: String,
        end_stream: bool,
    },
    Refused(u32, u16),
    Data(u32, Vec<u8>, bool),
    Reset(u32, ErrorCode),
    WindowOpened,
    GoAway(ErrorCode),
}

fn seen(event: &Event<'_>) -> Seen {
    match event {
        Event::Request {
            stream,
            head,
            end_stream,
        } => Seen::Request {
            stream: *stream,
            method: head.method.clone(),
            target: head.target.to_string(),
            end_stream: *end_stream,
        },
        Event::Refused { stream, status } => Seen::Refused(*stream, *status),
        Event::Data {
            stream,
            data,
            end_stream,
        } => Seen::Data(*stream, data.to_vec(), *end_stream),
        Event::Reset { stream, code } => Seen::Reset(*stream, *code),
        Event::WindowOpened => Seen::WindowOpened,
        Event::GoAway { code } => Seen::GoAway(*code),
    }
}

fn get(stream: u32, end_stream: bool) -> Seen {
    Seen::Request {
        stream,
        method: Method::Get,
        target: "/".into(),
        end_stream,
    }
}

/// A client talking to one `Connection`, with a clock it moves by hand.
struct Peer {
    conn: Connection,
    now: Instant,
}

impl Peer {
    /// After the preface and an empty SETTINGS, with the server's first frames drained.
    fn new() -> Peer {
        Peer::with(&Limits::default())
    }

    fn with(limits: &Limits) -> Peer {
        let mut peer = Peer::raw(limits);
        let mut hello = PREFACE.to_vec();
        hello.extend(settings(&[]));
        assert_eq!(peer.send(&hello), []);
        let frames = peer.written();
        assert_eq!(
            frames.last().map(|f| (f.kind, f.flags)),
            Some((Kind::Settings, flags::ACK))
        );
        peer
    }

    fn raw(limits: &Limits) -> Peer {
        Peer {
            conn: Connection::new(limits),
            now: Instant::now(),
        }
    }

    /// Feed `bytes` whole; every byte must be used unless the connection closed.
    fn send(&mut self, bytes: &[u8]) -> Vec<Seen> {
        let mut events = Vec::new();
        let used = self.conn.receive(bytes, self.now, &mut events);
        if !self.conn.is_closing() {
            assert_eq!(used, bytes.len(), "a complete frame was left unread");
        }
        events.iter().map(seen).collect()
    }

    fn written(&mut self) -> Vec<Sent> {
        let mut out = Vec::new();
        self.conn.write_control(&mut out);
        parse_frames(&out)
    }

    /// The GOAWAY queued: (last stream id, code).
    fn go_away(&mut self) -> Option<(u32, ErrorCode)> {
        self.written()
            .into_iter()
            .find(|f| f.kind == Kind::GoAway)
            .map(|f| {
                let parsed = frame::go_away(&f.payload).unwrap();
                (parsed.last_stream, parsed.code)
            })
    }

    /// The RST_STREAMs queued.
    fn resets(&mut self) -> Vec<(u32, ErrorCode)> {
        self.written()
            .into_iter()
            .filter(|f| f.kind == Kind::RstStream)
            .map(|f| (f.stream, frame::rst_stream(&f.payload).unwrap()))
            .collect()
    }

    /// The connection ended with `code` (a connection error, §5.4.1).
    fn expect_connection_error(&mut self, code: ErrorCode) {
        assert!(self.conn.is_closing(), "no connection error");
        assert_eq!(self.go_away().map(|g| g.1), Some(code));
        let mut events = Vec::new();
        assert_eq!(
            self.conn.receive(&ping([0; 8]), self.now, &mut events),
            0,
            "read after a connection error"
        );
    }

    /// Only `stream` was reset, with `code`; the connection lives (a stream error, §5.4.2).
    fn expect_stream_error(&mut self, stream: u32, code: ErrorCode) {
        assert!(!self.conn.is_closing(), "a connection error instead");
        assert_eq!(self.resets(), [(stream, code)]);
        assert_eq!(self.send(&ping([1; 8])), []);
        assert!(self.written().iter().any(|f| f.kind == Kind::Ping));
    }

    fn response(&mut self, stream: u32, end_stream: bool) -> Vec<Sent> {
        let mut fields = ResponseFields::default();
        fields.status = 200;
        fields.push(b"content-type", b"text/plain");
        let mut out = Vec::new();
        self.conn
            .write_headers(stream, &fields, end_stream, &mut out);
        parse_frames(&out)
    }
}

// §3.5 HTTP/2 connection preface

#[test]
fn the_server_preface_is_settings_then_the_connection_window() {
    let limits = Limits {
        header_table_size: 8_192,
        ..Limits::default()
    };
    let mut peer = Peer::raw(&limits);
    assert!(peer.conn.awaiting_preface());
    let frames = peer.written();
    assert_eq!(frames[0].kind, Kind::Settings);
    let params: Vec<_> = frame::settings(&frames[0].payload).unwrap().collect();
    assert_eq!(
        params,
        [
            (setting::MAX_CONCURRENT_STREAMS, 128),
            (setting::INITIAL_WINDOW_SIZE, 65_535),
            (setting::MAX_FRAME_SIZE, 16_384),
            (setting::MAX_HEADER_LIST_SIZE, 64 << 10),
            (setting::HEADER_TABLE_SIZE, 8_192),
            (setting::ENABLE_PUSH, 0)
        ]
    );
    assert_eq!(frames[1].kind, Kind::WindowUpdate);
    assert_eq!(
        frame::window_update(&frames[1].payload),
        Ok((1 << 20) - 65_535)
    );
    assert!(!peer.conn.has_control());
}

#[test]
fn the_preface_may_arrive_in_pieces_and_is_then_acknowledged() {
    let mut peer = Peer::raw(&Limits::default());
    let _ = peer.written();
    let mut events = Vec::new();
    assert_eq!(peer.conn.receive(&PREFACE[..10], peer.now, &mut events), 0);
    assert!(peer.conn.awaiting_preface() && !peer.conn.is_closing());
    let mut rest = PREFACE.to_vec();
    rest.extend(settings(&[]));
    rest.extend(&ping([0; 8])[..4]);
    assert_eq!(peer.conn.receive(&rest, peer.now, &mut events), 24 + 9);
    assert!(!peer.conn.awaiting_preface());
    assert_eq!(peer.written()[0].flags, flags::ACK);
}

#[test]
fn an_invalid_preface_is_a_protocol_error() {
    let mut peer = Peer::raw(&Limits::default());
    let _ = peer.written();
    let mut events = Vec::new();
    assert_eq!(
        peer.conn
            .receive(b"GET / HTTP/1.1\r\n", peer.now, &mut events),
        0
    );
    peer.expect_connection_error(ErrorCode::ProtocolError);
}

#[test]
fn a_first_frame_other_than_settings_is_a_protocol_error() {
    let mut peer = Peer::raw(&Limits::default());
    let mut hello = PREFACE.to_vec();
    hello.extend(ping([0; 8]));
    peer.send(&hello);
    peer.expect_connection_error(ErrorCode::ProtocolError);
}

// §4.1 frame format, §4.2 frame size, §4.3 header compression

#[test]
fn unknown_types_unknown_flags_and_the_reserved_bit_are_ignored() {
    let mut peer = Peer::new();
    assert_eq!(
        peer.send(&frame(Kind::Unknown(0x16), 0xff, 0, b"hello")),
        []
    );
    assert_eq!(peer.send(&frame(Kind::Ping, 0x16, 0, &[3; 8])), []);
    let mut reserved = ping([4; 8]);
    reserved[5] |= 0x80;
    assert_eq!(peer.send(&reserved), []);
    let frames = peer.written();
    assert_eq!(frames.len(), 2);
    assert_eq!(frames[0].payload, [3; 8]);
    assert_eq!(frames[1].payload, [4; 8]);
    // A reserved bit on a stream id names the same stream.
    let mut request = headers(1, GET, true);
    request[5] |= 0x80;
    assert_eq!(peer.send(&request), [get(1, true)]);
}

#[test]
fn data_of_the_frame_size_is_accepted_and_past_it_is_a_frame_size_error() {
    let mut peer = Peer::new();
    peer.send(&headers(1, &post_unsized(), false));
    let full = vec![7; 16_384];
    let events = peer.send(&data(1, &full, false));
    assert_eq!(events, [Seen::Data(1, full, false)]);
    // Judged from the header: the 16,385 bytes need not arrive.
    let mut events = Vec::new();
    let oversized = data(1, &[0; 16_385], false);
    assert_eq!(
        peer.conn.receive(&oversized[..20], peer.now, &mut events),
        0
    );
    peer.expect_connection_error(ErrorCode::FrameSizeError);
}

#[test]
fn a_headers_frame_past_the_frame_size_is_a_frame_size_error() {
    let mut peer = Peer::new();
    let mut block = GET.to_vec();
    block.extend(literal("x-big", &"a".repeat(100)).repeat(170));
    peer.send(&headers(1, &block, true));
    peer.expect_connection_error(ErrorCode::FrameSizeError);
}

#[test]
fn an_undecodable_header_block_is_a_compression_error() {
    let mut peer = Peer::new();
    // Index 70 names no entry: the dynamic table is empty.
    peer.send(&headers(1, &[0x80 | 70], true));
    peer.expect_connection_error(ErrorCode::CompressionError);
}

#[test]
fn a_frame_inside_a_header_block_is_a_protocol_error() {
    for between in [
        frame(Kind::Priority, 0, 1, &priority(0)),
        headers(3, GET, true),
        data(1, b"x", false),
        frame(Kind::Unknown(0x20), 0, 0, b""),
        frame(Kind::Continuation, flags::END_HEADERS, 3, &GET[2..]),
    ] {
        let mut peer = Peer::new();
        assert_eq!(peer.send(&frame(Kind::Headers, 0, 1, &GET[..2])), []);
        peer.send(&between);
        peer.expect_connection_error(ErrorCode::ProtocolError);
    }
}

// §5.1 stream states

#[test]
fn frames_on_an_idle_stream_are_protocol_errors() {
    for idle in [
        data(1, b"x", false),
        rst_stream(1, ErrorCode::Cancel),
        window_update(1, 100),
        frame(Kind::Continuation, flags::END_HEADERS, 1, GET),
    ] {
        let mut peer = Peer::new();
        peer.send(&idle);
        peer.expect_connection_error(ErrorCode::ProtocolError);
    }
    // PRIORITY may name an idle stream (§5.1) and does not open it.
    let mut peer = Peer::new();
    assert_eq!(peer.send(&frame(Kind::Priority, 0, 5, &priority(0))), []);
    assert_eq!(peer.send(&headers(3, GET, true)), [get(3, true)]);
    assert!(peer.written().is_empty());
}

#[test]
fn data_or_headers_on_a_half_closed_remote_stream_is_stream_closed() {
    let mut peer = Peer::new();
    assert_eq!(peer.send(&headers(1, GET, true)), [get(1, true)]);
    assert_eq!(
        peer.send(&data(1, b"late", false)),
        [Seen::Reset(1, ErrorCode::StreamClosed)]
    );
    peer.expect_stream_error(1, ErrorCode::StreamClosed);

    assert_eq!(peer.send(&headers(3, GET, true)), [get(3, true)]);
    let trailer = literal("x-trailer", "1");
    assert_eq!(
        peer.send(&headers(3, &trailer, true)),
        [Seen::Reset(3, ErrorCode::StreamClosed)]
    );
    peer.expect_stream_error(3, ErrorCode::StreamClosed);
    // Its block was decoded: HPACK is still in step for the next stream.
    assert_eq!(peer.send(&headers(5, GET, true)), [get(5, true)]);
}

#[test]
fn after_the_clients_reset_data_is_a_stream_error_and_headers_a_connection_error() {
    let mut peer = Peer::new();
    peer.send(&headers(1, &post_unsized(), false));
    assert_eq!(
        peer.send(&rst_stream(1, ErrorCode::Cancel)),
        [Seen::Reset(1, ErrorCode::Cancel)]
    );
    assert_eq!(peer.conn.active_streams(), 0);
    assert_eq!(peer.send(&data(1, b"x", false)), []);
    peer.expect_stream_error(1, ErrorCode::StreamClosed);
    // A late RST_STREAM or WINDOW_UPDATE is fine.
    assert_eq!(peer.send(&rst_stream(1, ErrorCode::Cancel)), []);
    assert_eq!(peer.send(&window_update(1, 10)), []);
    peer.send(&headers(1, GET, true));
    peer.expect_connection_error(ErrorCode::StreamClosed);
}

#[test]
fn after_both_sides_ended_data_and_headers_are_connection_errors() {
    for late in [data(1, b"x", true), headers(1, GET, true)] {
        let mut peer = Peer::new();
        peer.send(&headers(1, GET, true));
        peer.response(1, true);
        assert_eq!(peer.conn.active_streams(), 0);
        peer.send(&late);
        peer.expect_connection_error(ErrorCode::StreamClosed);
    }
}

#[test]
fn a_continuation_after_a_stream_closed_is_a_protocol_error() {
    let mut peer = Peer::new();
    peer.send(&headers(1, GET, true));
    peer.send(&rst_stream(1, ErrorCode::Cancel));
    peer.send(&frame(Kind::Continuation, flags::END_HEADERS, 1, GET));
    peer.expect_connection_error(ErrorCode::ProtocolError);
}

#[test]
fn frames_in_flight_on_a_stream_we_reset_are_ignored() {
    let mut peer = Peer::new();
    peer.send(&headers(1, &post_unsized(), false));
    peer.conn.reset_stream(1, ErrorCode::Cancel);
    assert_eq!(peer.resets(), [(1, ErrorCode::Cancel)]);
    assert_eq!(peer.send(&data(1, b"body", false)), []);
    assert_eq!(peer.send(&headers(1, &literal("x-t", "1"), true)), []);
    assert_eq!(peer.send(&window_update(1, 5)), []);
    assert!(!peer.conn.is_closing());
    assert!(peer.resets().is_empty());
    // Their blocks were decoded: the next stream reads right.
    assert_eq!(peer.send(&headers(3, GET, true)), [get(3, true)]);
}

// §5.1.1 stream identifiers

#[test]
fn an_even_stream_id_is_a_protocol_error() {
    let mut peer = Peer::new();
    peer.send(&headers(2, GET, true));
    peer.expect_connection_error(ErrorCode::ProtocolError);
}

#[test]
fn a_stream_id_below_an_earlier_one_is_a_protocol_error() {
    let mut peer = Peer::new();
    assert_eq!(peer.send(&headers(5, GET, true)), [get(5, true)]);
    peer.send(&headers(3, GET, true));
    assert_eq!(peer.go_away(), Some((5, ErrorCode::ProtocolError)));
    assert!(peer.conn.is_closing());
}

// §5.1.2 stream concurrency

#[test]
fn a_stream_past_max_concurrent_streams_is_refused() {
    let limits = Limits {
        max_concurrent_streams: 2,
        ..Limits::default()
    };
    let mut peer = Peer::with(&limits);
    assert_eq!(peer.send(&headers(1, GET, true)), [get(1, true)]);
    assert_eq!(peer.send(&headers(3, GET, true)), [get(3, true)]);
    assert_eq!(peer.send(&headers(5, GET, true)), []);
    peer.expect_stream_error(5, ErrorCode::RefusedStream);
    assert_eq!(peer.conn.active_streams(), 2);
    // Once one is answered, the next is served.
    peer.response(1, true);
    assert_eq!(peer.send(&headers(7, GET, true)), [get(7, true)]);
}

// §5.3 priority

#[test]
fn a_stream_depending_on_itself_is_a_stream_error() {
    let mut peer = Peer::new();
    let mut payload = priority(1);
    payload.extend_from_slice(GET);
    let self_dependent = frame(
        Kind::Headers,
        flags::END_HEADERS | flags::END_STREAM | flags::PRIORITY,
        1,
        &payload,
    );
    assert_eq!(peer.send(&self_dependent), []);
    peer.expect_stream_error(1, ErrorCode::ProtocolError);

    assert_eq!(peer.send(&headers(3, GET, true)), [get(3, true)]);
    assert_eq!(
        peer.send(&frame(Kind::Priority, 0, 3, &priority(3))),
        [Seen::Reset(3, ErrorCode::ProtocolError)]
    );
    peer.expect_stream_error(3, ErrorCode::ProtocolError);
    // On an idle stream too.
    assert_eq!(peer.send(&frame(Kind::Priority, 0, 9, &priority(9))), []);
    peer.expect_stream_error(9, ErrorCode::ProtocolError);
}

// §5.4 error handling

#[test]
fn a_connection_error_names_the_last_stream_and_stops_reading() {
    let mut peer = Peer::new();
    peer.send(&headers(1, GET, true));
    peer.send(&headers(3, GET, false));
    let mut bad = frame(Kind::Ping, 0, 0, &[0; 6]);
    bad.extend(ping([1; 8]));
    let mut events = Vec::new();
    let used = peer.conn.receive(&bad, peer.now, &mut events);
    assert_eq!(used, 15, "the frame after the error is not read");
    assert_eq!(peer.go_away(), Some((3, ErrorCode::FrameSizeError)));
    assert!(peer.conn.is_going_away() && peer.conn.is_closing());
    assert_eq!(peer.conn.receive(&ping([1; 8]), peer.now, &mut events), 0);
    assert!(peer.written().is_empty());
}

// §6.1 DATA

#[test]
fn data_on_stream_zero_is_a_protocol_error() {
    let mut peer = Peer::new();
    peer.send(&data(0, b"x", false));
    peer.expect_connection_error(ErrorCode::ProtocolError);
}

#[test]
fn padded_data_is_delivered_without_its_padding_whose_credit_returns_at_once() {
    let limits = Limits {
        connection_window_size: 65_535,
        initial_window_size: 100,
        ..Limits::default()
    };
    let mut peer = Peer::with(&limits);
    peer.send(&frame(Kind::Settings, flags::ACK, 0, &[]));
    peer.send(&headers(1, &post_unsized(), false));
    let mut payload = vec![60];
    payload.extend_from_slice(b"abc");
    payload.extend_from_slice(&[0; 60]);
    let events = peer.send(&frame(Kind::Data, flags::PADDED, 1, &payload));
    assert_eq!(events, [Seen::Data(1, b"abc".to_vec(), false)]);
    // 61 bytes of padding are owed to the stream: past half its window, credited now.
    let updates: Vec<_> = peer
        .written()
        .into_iter()
        .filter(|f| f.kind == Kind::WindowUpdate && f.stream == 1)
        .map(|f| frame::window_update(&f.payload).unwrap())
        .collect();
    assert_eq!(updates, [61]);
}

#[test]
fn data_with_a_pad_length_past_the_payload_is_a_protocol_error() {
    let mut peer = Peer::new();
    peer.send(&headers(1, &post_unsized(), false));
    peer.send(&frame(Kind::Data, flags::PADDED, 1, &[5, 1, 2, 3]));
    peer.expect_connection_error(ErrorCode::ProtocolError);
}

// §6.2 HEADERS

#[test]
fn headers_on_stream_zero_or_with_bad_padding_are_protocol_errors() {
    let mut peer = Peer::new();
    peer.send(&headers(0, GET, true));
    peer.expect_connection_error(ErrorCode::ProtocolError);

    let mut peer = Peer::new();
    let mut payload = vec![u8::try_from(GET.len() + 1).unwrap()];
    payload.extend_from_slice(GET);
    peer.send(&frame(
        Kind::Headers,
        flags::END_HEADERS | flags::PADDED,
        1,
        &payload,
    ));
    peer.expect_connection_error(ErrorCode::ProtocolError);
}

#[test]
fn padded_headers_with_priority_open_a_stream() {
    let mut peer = Peer::new();
    let mut payload = vec![3];
    payload.extend(priority(0));
    payload.extend_from_slice(GET);
    payload.extend_from_slice(&[0; 3]);
    let flags = flags::END_HEADERS | flags::END_STREAM | flags::PADDED | flags::PRIORITY;
    assert_eq!(
        peer.send(&frame(Kind::Headers, flags, 1, &payload)),
        [get(1, true)]
    );
}

// §6.3 PRIORITY

#[test]
fn priority_on_stream_zero_is_a_protocol_error_and_a_bad_length_a_stream_error() {
    let mut peer = Peer::new();
    peer.send(&frame(Kind::Priority, 0, 0, &priority(1)));
    peer.expect_connection_error(ErrorCode::ProtocolError);

    let mut peer = Peer::new();
    peer.send(&headers(1, &post_unsized(), false));
    assert_eq!(
        peer.send(&frame(Kind::Priority, 0, 1, &[0, 0, 0, 3])),
        [Seen::Reset(1, ErrorCode::FrameSizeError)]
    );
    peer.expect_stream_error(1, ErrorCode::FrameSizeError);
}

// §6.4 RST_STREAM

#[test]
fn rst_stream_on_stream_zero_idle_or_of_a_bad_length_is_a_connection_error() {
    let mut peer = Peer::new();
    peer.send(&rst_stream(0, ErrorCode::Cancel));
    peer.expect_connection_error(ErrorCode::ProtocolError);

    let mut peer = Peer::new();
    peer.send(&headers(1, GET, false));
    peer.send(&rst_stream(3, ErrorCode::Cancel));
    peer.expect_connection_error(ErrorCode::ProtocolError);

    let mut peer = Peer::new();
    peer.send(&headers(1, GET, false));
    peer.send(&frame(Kind::RstStream, 0, 1, &[0, 0, 8]));
    peer.expect_connection_error(ErrorCode::FrameSizeError);
}

// §6.5 SETTINGS

#[test]
fn settings_framing_errors_are_connection_errors() {
    for (bad, code) in [
        (
            frame(Kind::Settings, flags::ACK, 0, &[0; 6]),
            ErrorCode::FrameSizeError,
        ),
        (frame(Kind::Settings, 0, 1, &[]), ErrorCode::ProtocolError),
        (
            frame(Kind::Settings, 0, 0, &[0, 4, 0, 0]),
            ErrorCode::FrameSizeError,
        ),
        (
            settings(&[(setting::ENABLE_PUSH, 2)]),
            ErrorCode::ProtocolError,
        ),
        (
            settings(&[(setting::INITIAL_WINDOW_SIZE, 1 << 31)]),
            ErrorCode::FlowControlError,
        ),
        (
            settings(&[(setting::MAX_FRAME_SIZE, 16_383)]),
            ErrorCode::ProtocolError,
        ),
        (
            settings(&[(setting::MAX_FRAME_SIZE, MAX_FRAME_SIZE_LIMIT + 1)]),
            ErrorCode::ProtocolError,
        ),
    ] {
        let mut peer = Peer::new();
        peer.send(&bad);
        peer.expect_connection_error(code);
    }
}

#[test]
fn settings_are_acknowledged_and_unknown_parameters_ignored() {
    let mut peer = Peer::new();
    assert_eq!(
        peer.send(&settings(&[(0xff, 1), (setting::ENABLE_PUSH, 0)])),
        []
    );
    let frames = peer.written();
    assert_eq!(frames.len(), 1);
    assert_eq!(
        (frames[0].kind, frames[0].flags),
        (Kind::Settings, flags::ACK)
    );
    assert!(frames[0].payload.is_empty());
    // An ACK of ours is not answered.
    assert_eq!(peer.send(&frame(Kind::Settings, flags::ACK, 0, &[])), []);
    assert!(peer.written().is_empty());
}

#[test]
fn the_clients_max_frame_size_splits_our_headers_and_bounds_data() {
    let mut peer = Peer::new();
    peer.send(&headers(1, GET, true));
    assert_eq!(peer.conn.max_data_payload(), 16_384);
    peer.send(&settings(&[(setting::MAX_FRAME_SIZE, 20_000)]));
    assert_eq!(peer.conn.max_data_payload(), 20_000);
    let mut fields = ResponseFields::default();
    fields.status = 200;
    let long = "v".repeat(30_000);
    fields.push(b"x-long", long.as_bytes());
    let mut out = Vec::new();
    peer.conn.write_headers(1, &fields, false, &mut out);
    let frames = parse_frames(&out);
    assert_eq!(frames.len(), 2);
    assert_eq!((frames[0].kind, frames[0].flags), (Kind::Headers, 0));
    assert_eq!(frames[0].payload.len(), 20_000);
    assert_eq!(
        (frames[1].kind, frames[1].flags),
        (Kind::Continuation, flags::END_HEADERS)
    );
}

// §6.7 PING

#[test]
fn ping_is_answered_with_its_payload_and_a_ping_ack_is_not() {
    let mut peer = Peer::new();
    assert_eq!(peer.send(&frame(Kind::Ping, flags::ACK, 0, &[9; 8])), []);
    assert!(peer.written().is_empty());
    peer.send(&ping(*b"h2spec!!"));
    let frames = peer.written();
    assert_eq!(frames.len(), 1);
    assert_eq!((frames[0].kind, frames[0].flags), (Kind::Ping, flags::ACK));
    assert_eq!(frames[0].payload, b"h2spec!!");
}

#[test]
fn ping_on_a_stream_or_of_a_bad_length_is_a_connection_error() {
    let mut peer = Peer::new();
    peer.send(&frame(Kind::Ping, 0, 1, &[0; 8]));
    peer.expect_connection_error(ErrorCode::ProtocolError);
    let mut peer = Peer::new();
    peer.send(&frame(Kind::Ping, 0, 0, &[0; 6]));
    peer.expect_connection_error(ErrorCode::FrameSizeError);
}

// §6.8 GOAWAY

#[test]
fn goaway_from_the_client_is_reported_and_on_a_stream_is_an_error() {
    let mut peer = Peer::new();
    let payload = [0, 0, 0, 0, 0, 0, 0, 0, b'b', b'y', b'e'];
    assert_eq!(
        peer.send(&frame(Kind::GoAway, 0, 0, &payload)),
        [Seen::GoAway(ErrorCode::NoError)]
    );
    assert!(!peer.conn.is_closing());

    let mut peer = Peer::new();
    peer.send(&frame(Kind::GoAway, 0, 1, &[0; 8]));
    peer.expect_connection_error(ErrorCode::ProtocolError);
}

#[test]
fn after_a_graceful_goaway_open_streams_finish_and_new_ones_are_ignored() {
    let mut peer = Peer::new();
    assert_eq!(
        peer.send(&headers(1, &post("3"), false)),
        [Seen::Request {
            stream: 1,
            method: Method::Post,
            target: "/".into(),
            end_stream: false,
        }]
    );
    peer.conn.go_away(ErrorCode::NoError);
    assert_eq!(peer.go_away(), Some((1, ErrorCode::NoError)));
    assert!(peer.conn.is_going_away() && !peer.conn.is_closing());
    assert_eq!(peer.send(&headers(3, GET, true)), []);
    assert_eq!(
        peer.send(&data(1, b"abc", true)),
        [Seen::Data(1, b"abc".to_vec(), true)]
    );
    assert_eq!(peer.conn.active_streams(), 1);
    // HPACK stayed in step through the ignored block.
    assert_eq!(peer.send(&headers(5, GET, true)), []);
    assert!(!peer.conn.is_closing());
    peer.response(1, true);
    assert_eq!(peer.conn.active_streams(), 0);
}

// §6.9 WINDOW_UPDATE and flow control

#[test]
fn a_zero_window_increment_is_a_protocol_error_of_its_scope() {
    let mut peer = Peer::new();
    peer.send(&window_update(0, 0));
    peer.expect_connection_error(ErrorCode::ProtocolError);

    let mut peer = Peer::new();
    peer.send(&headers(1, GET, true));
    assert_eq!(
        peer.send(&window_update(1, 0)),
        [Seen::Reset(1, ErrorCode::ProtocolError)]
    );
    peer.expect_stream_error(1, ErrorCode::ProtocolError);

    let mut peer = Peer::new();
    peer.send(&frame(Kind::WindowUpdate, 0, 0, &[0, 0, 1]));
    peer.expect_connection_error(ErrorCode::FrameSizeError);
}

#[test]
fn a_window_past_2_31_minus_1_is_a_flow_control_error_of_its_scope() {
    let mut peer = Peer::new();
    peer.send(&window_update(0, MAX_WINDOW - 65_535));
    assert!(!peer.conn.is_closing());
    peer.send(&window_update(0, 1));
    peer.expect_connection_error(ErrorCode::FlowControlError);

    let mut peer = Peer::new();
    peer.send(&headers(1, GET, true));
    peer.send(&window_update(1, MAX_WINDOW - 65_535));
    assert_eq!(
        peer.send(&window_update(1, 1)),
        [Seen::Reset(1, ErrorCode::FlowControlError)]
    );
    peer.expect_stream_error(1, ErrorCode::FlowControlError);
}

#[test]
fn our_sends_follow_the_clients_windows() {
    let mut peer = Peer::new();
    peer.send(&settings(&[
        (setting::INITIAL_WINDOW_SIZE, 1),
        (setting::MAX_FRAME_SIZE, 100_000),
    ]));
    peer.send(&headers(1, GET, true));
    peer.response(1, false);
    assert_eq!(peer.conn.send_capacity(1), 1);
    let header = peer.conn.data_frame(1, 1, false);
    assert_eq!(
        FrameHeader::parse(&header),
        FrameHeader {
            length: 1,
            kind: Kind::Data,
            flags: 0,
            stream: 1
        }
    );
    assert_eq!(peer.conn.send_capacity(1), 0);
    assert_eq!(peer.send(&window_update(1, 100)), [Seen::WindowOpened]);
    assert_eq!(peer.conn.send_capacity(1), 100);
    // The connection window (65,535 less the byte sent) bounds it too.
    peer.send(&window_update(1, 100_000));
    assert_eq!(peer.conn.send_capacity(1), 65_534);
    peer.conn.data_frame(1, 65_534, false);
    assert_eq!(peer.conn.send_capacity(1), 0);
    peer.send(&window_update(0, 10));
    assert_eq!(peer.conn.send_capacity(1), 10);
    peer.conn.data_frame(1, 0, true);
    assert_eq!(peer.conn.send_capacity(1), 0);
    assert_eq!(peer.conn.active_streams(), 0);
}

#[test]
fn a_new_initial_window_moves_open_streams_even_below_zero() {
    let mut peer = Peer::new();
    peer.send(&headers(1, GET, true));
    peer.response(1, false);
    peer.conn.data_frame(1, 1_000, false);
    assert_eq!(peer.conn.send_capacity(1), 64_535);
    peer.send(&settings(&[(setting::INITIAL_WINDOW_SIZE, 500)]));
    // 500 - 1000: the window is negative, nothing may be sent (§6.9.2).
    assert_eq!(peer.conn.send_capacity(1), 0);
    peer.send(&window_update(1, 600));
    assert_eq!(peer.conn.send_capacity(1), 100);
    assert_eq!(
        peer.send(&settings(&[(setting::INITIAL_WINDOW_SIZE, 1_500)])),
        [Seen::WindowOpened]
    );
    assert_eq!(peer.conn.send_capacity(1), 1_100);
}

#[test]
fn an_initial_window_that_overflows_an_open_stream_is_a_flow_control_error() {
    let mut peer = Peer::new();
    peer.send(&headers(1, GET, true));
    peer.send(&window_update(1, MAX_WINDOW - 65_535));
    peer.send(&settings(&[(setting::INITIAL_WINDOW_SIZE, 65_536)]));
    peer.expect_connection_error(ErrorCode::FlowControlError);
}

#[test]
fn data_past_our_windows_is_a_flow_control_error() {
    let limits = Limits {
        initial_window_size: 16_384,
        connection_window_size: 65_535,
        ..Limits::default()
    };
    // The stream window: a stream error, once the client has our SETTINGS.
    let mut peer = Peer::with(&limits);
    peer.send(&frame(Kind::Settings, flags::ACK, 0, &[]));
    peer.send(&headers(1, &post_unsized(), false));
    assert_eq!(peer.send(&data(1, &[0; 16_384], false)).len(), 1);
    assert_eq!(
        peer.send(&data(1, b"x", false)),
        [Seen::Reset(1, ErrorCode::FlowControlError)]
    );
    peer.expect_stream_error(1, ErrorCode::FlowControlError);

    // The connection window: a connection error.
    let mut peer = Peer::with(&limits);
    peer.send(&frame(Kind::Settings, flags::ACK, 0, &[]));
    for stream in [1, 3, 5, 7] {
        peer.send(&headers(stream, &post_unsized(), false));
        let full = if stream == 7 { 16_383 } else { 16_384 };
        assert_eq!(peer.send(&data(stream, &vec![0; full], false)).len(), 1);
    }
    peer.send(&headers(9, &post_unsized(), false));
    peer.send(&data(9, b"xx", false));
    peer.expect_connection_error(ErrorCode::FlowControlError);
}

#[test]
fn before_our_settings_are_acknowledged_the_default_window_holds() {
    let limits = Limits {
        initial_window_size: 1_000,
        ..Limits::default()
    };
    let mut peer = Peer::with(&limits);
    peer.send(&headers(1, &post_unsized(), false));
    // The client may not have read our SETTINGS yet: 65,535 is its window.
    assert_eq!(peer.send(&data(1, &[0; 5_000], false)).len(), 1);
    // Its ACK shrinks the stream's window by the difference: 1,000 - 65,535 + ... < 0.
    peer.send(&frame(Kind::Settings, flags::ACK, 0, &[]));
    assert_eq!(
        peer.send(&data(1, b"x", false)),
        [Seen::Reset(1, ErrorCode::FlowControlError)]
    );
}

#[test]
fn released_body_is_credited_in_batches_of_half_a_window() {
    let limits = Limits {
        initial_window_size: 10_000,
        connection_window_size: 100_000,
        ..Limits::default()
    };
    let mut peer = Peer::with(&limits);
    peer.send(&frame(Kind::Settings, flags::ACK, 0, &[]));
    peer.send(&headers(1, &post_unsized(), false));
    for _ in 0..3 {
        assert_eq!(peer.send(&data(1, &[1; 2_000], false)).len(), 1);
        peer.conn.release_body(1, 2_000);
    }
    // 6,000 owed to the stream passed half its window at the third release; the
    // connection's 6,000 are under half of 100,000.
    let updates: Vec<_> = peer
        .written()
        .into_iter()
        .filter(|f| f.kind == Kind::WindowUpdate)
        .map(|f| (f.stream, frame::window_update(&f.payload).unwrap()))
        .collect();
    assert_eq!(updates, [(1, 6_000)]);
    // The window is whole again: 10,000 more may come.
    for _ in 0..5 {
        assert_eq!(peer.send(&data(1, &[1; 2_000], false)).len(), 1);
    }
    assert!(!peer.conn.is_closing() && peer.resets().is_empty());
}

// §6.10 CONTINUATION

#[test]
fn a_header_block_split_over_continuations_opens_one_stream() {
    let mut peer = Peer::new();
    assert_eq!(
        peer.send(&frame(Kind::Headers, flags::END_STREAM, 1, &GET[..1])),
        []
    );
    assert_eq!(peer.send(&frame(Kind::Continuation, 0, 1, &GET[1..3])), []);
    assert_eq!(peer.send(&frame(Kind::Continuation, 0, 1, &[])), []);
    assert_eq!(
        peer.send(&frame(Kind::Continuation, flags::END_HEADERS, 1, &GET[3..])),
        [get(1, true)]
    );
}

#[test]
fn a_continuation_without_an_open_block_is_a_protocol_error() {
    let mut peer = Peer::new();
    peer.send(&headers(1, &post_unsized(), false));
    peer.send(&frame(Kind::Continuation, flags::END_HEADERS, 1, GET));
    peer.expect_connection_error(ErrorCode::ProtocolError);

    let mut peer = Peer::new();
    peer.send(&frame(Kind::Headers, 0, 1, &GET[..2]));
    peer.send(&frame(Kind::Continuation, flags::END_HEADERS, 1, &GET[2..]));
    peer.send(&frame(Kind::Continuation, flags::END_HEADERS, 1, GET));
    peer.expect_connection_error(ErrorCode::ProtocolError);

    let mut peer = Peer::new();
    peer.send(&headers(1, &post_unsized(), false));
    peer.send(&data(1, b"x", false));
    peer.send(&frame(Kind::Continuation, flags::END_HEADERS, 1, GET));
    peer.expect_connection_error(ErrorCode::ProtocolError);

    let mut peer = Peer::new();
    peer.send(&frame(Kind::Headers, 0, 1, &GET[..2]));
    peer.send(&frame(Kind::Continuation, flags::END_HEADERS, 0, &GET[2..]));
    peer.expect_connection_error(ErrorCode::ProtocolError);
}

#[test]
fn a_header_block_past_max_header_block_is_enhance_your_calm() {
    let limits = Limits {
        max_header_block: 4_096,
        ..Limits::default()
    };
    let mut peer = Peer::with(&limits);
    peer.send(&frame(Kind::Headers, 0, 1, GET));
    let filler = literal("x-filler", &"f".repeat(120));
    for _ in 0..100 {
        peer.send(&frame(Kind::Continuation, 0, 1, &filler));
        if peer.conn.is_closing() {
            break;
        }
    }
    peer.expect_connection_error(ErrorCode::EnhanceYourCalm);
}

// §8.1 HTTP message framing: trailers, content-length

#[test]
fn trailers_end_the_body() {
    let mut peer = Peer::new();
    peer.send(&headers(1, &post_unsized(), false));
    assert_eq!(
        peer.send(&data(1, b"body", false)),
        [Seen::Data(1, b"body".to_vec(), false)]
    );
    assert_eq!(
        peer.send(&headers(1, &literal("x-checksum", "abc"), true)),
        [Seen::Data(1, Vec::new(), true)]
    );
    peer.response(1, true);
    assert_eq!(peer.conn.active_streams(), 0);
}

#[test]
fn a_second_headers_without_end_stream_is_a_stream_error() {
    let mut peer = Peer::new();
    peer.send(&headers(1, &post_unsized(), false));
    assert_eq!(
        peer.send(&headers(1, &literal("x-t", "1"), false)),
        [Seen::Reset(1, ErrorCode::ProtocolError)]
    );
    peer.expect_stream_error(1, ErrorCode::ProtocolError);
}

#[test]
fn trailers_with_a_pseudo_header_or_upper_case_are_a_stream_error() {
    for trailer in [
        vec![0x84],
        literal("X-Upper", "1"),
        literal("connection", "close"),
    ] {
        let mut peer = Peer::new();
        peer.send(&headers(1, &post_unsized(), false));
        assert_eq!(
            peer.send(&headers(1, &trailer, true)),
            [Seen::Reset(1, ErrorCode::ProtocolError)]
        );
        peer.expect_stream_error(1, ErrorCode::ProtocolError);
    }
}

#[test]
fn data_that_disagrees_with_content_length_is_a_stream_error() {
    // Fewer bytes than promised at END_STREAM.
    let mut peer = Peer::new();
    peer.send(&headers(1, &post("4"), false));
    assert_eq!(
        peer.send(&data(1, b"abc", true)),
        [Seen::Reset(1, ErrorCode::ProtocolError)]
    );
    peer.expect_stream_error(1, ErrorCode::ProtocolError);
    // More, across frames.
    peer.send(&headers(3, &post("4"), false));
    peer.send(&data(3, b"abc", false));
    assert_eq!(
        peer.send(&data(3, b"de", false)),
        [Seen::Reset(3, ErrorCode::ProtocolError)]
    );
    peer.expect_stream_error(3, ErrorCode::ProtocolError);
    // A promise the HEADERS ends at once.
    assert_eq!(peer.send(&headers(5, &post("4"), true)), []);
    peer.expect_stream_error(5, ErrorCode::ProtocolError);
    // Exactly right.
    peer.send(&headers(7, &post("4"), false));
    assert_eq!(
        peer.send(&data(7, b"abcd", true)),
        [Seen::Data(7, b"abcd".to_vec(), true)]
    );
}

#[test]
fn a_malformed_request_is_reset_and_never_announced() {
    let mut peer = Peer::new();
    // No :path.
    assert_eq!(peer.send(&headers(1, &[0x82, 0x86], true)), []);
    peer.expect_stream_error(1, ErrorCode::ProtocolError);
    assert_eq!(peer.conn.active_streams(), 0);
}

#[test]
fn a_header_list_past_its_limit_is_refused_with_431_and_its_body_credited() {
    let limits = Limits {
        max_header_list_size: 150,
        ..Limits::default()
    };
    let mut peer = Peer::with(&limits);
    let mut block = post_unsized();
    block.extend(literal("x-big", &"b".repeat(100)).repeat(2));
    assert_eq!(
        peer.send(&headers(1, &block, false)),
        [Seen::Refused(1, 431)]
    );
    // The body is not reported; the stream stays until the answer is sent.
    assert_eq!(peer.send(&data(1, &[0; 10_000], true)), []);
    assert_eq!(peer.conn.active_streams(), 1);
    peer.response(1, true);
    assert_eq!(peer.conn.active_streams(), 0);
    assert!(!peer.conn.is_closing());
}

#[test]
fn connect_is_refused_with_405() {
    let mut peer = Peer::new();
    // :method CONNECT (literal, name index 2), :authority.
    let mut block = vec![0x02, 7];
    block.extend_from_slice(b"CONNECT");
    block.extend_from_slice(&[0x01, 11]);
    block.extend_from_slice(b"example:443");
    assert_eq!(
        peer.send(&headers(1, &block, false)),
        [Seen::Refused(1, 405)]
    );
}

// Sending

#[test]
fn our_headers_decode_back_and_end_the_stream() {
    let mut peer = Peer::new();
    peer.send(&headers(1, GET, true));
    let frames = peer.response(1, false);
    assert_eq!(frames.len(), 1);
    assert_eq!(
        (frames[0].kind, frames[0].flags, frames[0].stream),
        (Kind::Headers, flags::END_HEADERS, 1)
    );
    let mut decoder = Decoder::new(4_096);
    let mut fields = Vec::new();
    decoder
        .decode(&frames[0].payload, 1 << 20, &mut |name, value| {
            fields.push((name.to_vec(), value.to_vec()));
        })
        .unwrap();
    assert_eq!(
        fields,
        [
            (b":status".to_vec(), b"200".to_vec()),
            (b"content-type".to_vec(), b"text/plain".to_vec())
        ]
    );
    assert_eq!(peer.conn.active_streams(), 1);
    let header = peer.conn.data_frame(1, 5, true);
    assert_eq!(FrameHeader::parse(&header).flags, flags::END_STREAM);
    assert_eq!(peer.conn.active_streams(), 0);
    // Nothing more goes out on a closed stream.
    assert!(peer.response(1, true).is_empty());
    assert_eq!(peer.conn.send_capacity(1), 0);
}

#[test]
fn a_stream_whose_response_ended_lives_until_the_client_ends_or_we_reset() {
    let mut peer = Peer::new();
    peer.send(&headers(1, &post_unsized(), false));
    peer.response(1, true);
    assert_eq!(peer.conn.active_streams(), 1);
    peer.conn.reset_stream(1, ErrorCode::NoError);
    assert_eq!(peer.resets(), [(1, ErrorCode::NoError)]);
    assert_eq!(peer.conn.active_streams(), 0);
    // A reset of a stream already gone sends nothing.
    peer.conn.reset_stream(1, ErrorCode::Cancel);
    assert!(peer.resets().is_empty());
}

#[test]
fn the_clients_header_table_size_reaches_our_encoder() {
    let mut peer = Peer::new();
    peer.send(&settings(&[(setting::HEADER_TABLE_SIZE, 0)]));
    peer.send(&headers(1, GET, true));
    let frames = peer.response(1, true);
    // A size update to 0 opens the block (RFC 7541 §6.3: 001xxxxx).
    assert_eq!(frames[0].payload[0], 0x20);
}

#[test]
fn a_server_error_goaway_closes_and_a_second_is_not_sent() {
    let mut peer = Peer::new();
    peer.send(&headers(1, GET, true));
    peer.conn.go_away(ErrorCode::InternalError);
    assert_eq!(peer.go_away(), Some((1, ErrorCode::InternalError)));
    assert!(peer.conn.is_closing());
    peer.conn.go_away(ErrorCode::NoError);
    assert!(!peer.conn.has_control());
}

// Floods (§10.5)

fn flood_limits() -> Limits {
    Limits {
        max_resets: 10,
        max_settings: 10,
        max_pings: 10,
        max_empty_frames: 10,
        budget_window: Duration::from_secs(10),
        ..Limits::default()
    }
}

/// Send `frames` one at a time until the connection closes; returns how many were read.
fn flood(peer: &mut Peer, mut next: impl FnMut(u32) -> Vec<u8>) -> u32 {
    for sent in 0..1_000 {
        peer.send(&next(sent));
        if peer.conn.is_closing() {
            return sent;
        }
    }
    panic!("a flood of 1000 frames was never cut");
}

#[test]
fn rapid_reset_is_cut_with_enhance_your_calm() {
    let mut peer = Peer::with(&flood_limits());
    let sent = flood(&mut peer, |i| {
        let id = 2 * i + 1;
        let mut bytes = headers(id, GET, false);
        bytes.extend(rst_stream(id, ErrorCode::Cancel));
        bytes
    });
    assert_eq!(sent, 10);
    peer.expect_connection_error(ErrorCode::EnhanceYourCalm);
}

#[test]
fn refused_streams_count_as_resets() {
    let limits = Limits {
        max_concurrent_streams: 1,
        ..flood_limits()
    };
    let mut peer = Peer::with(&limits);
    peer.send(&headers(1, GET, false));
    flood(&mut peer, |i| headers(2 * i + 3, GET, true));
    peer.expect_connection_error(ErrorCode::EnhanceYourCalm);
}

#[test]
fn settings_ping_and_empty_frame_floods_are_cut() {
    let mut peer = Peer::with(&flood_limits());
    // The first SETTINGS (of the preface) counted too.
    assert_eq!(flood(&mut peer, |_| settings(&[])), 9);
    peer.expect_connection_error(ErrorCode::EnhanceYourCalm);

    let mut peer = Peer::with(&flood_limits());
    assert_eq!(flood(&mut peer, |_| ping([0; 8])), 10);
    peer.expect_connection_error(ErrorCode::EnhanceYourCalm);

    let mut peer = Peer::with(&flood_limits());
    peer.send(&headers(1, &post_unsized(), false));
    assert_eq!(flood(&mut peer, |_| data(1, b"", false)), 10);
    peer.expect_connection_error(ErrorCode::EnhanceYourCalm);

    let mut peer = Peer::with(&flood_limits());
    flood(&mut peer, |_| frame(Kind::Unknown(0x40), 0, 0, b""));
    peer.expect_connection_error(ErrorCode::EnhanceYourCalm);

    let mut peer = Peer::with(&flood_limits());
    flood(&mut peer, |_| frame(Kind::Priority, 0, 1, &priority(0)));
    peer.expect_connection_error(ErrorCode::EnhanceYourCalm);
}

#[test]
fn a_normal_client_with_some_resets_and_pings_is_never_cut() {
    let mut peer = Peer::new();
    let mut stream = 1;
    // Ten minutes: every second a few requests, one cancelled, a ping, now and then a
    // SETTINGS and an empty DATA (as browsers send).
    for second in 0..600u32 {
        peer.now += Duration::from_secs(1);
        for _ in 0..4 {
            assert_eq!(peer.send(&headers(stream, GET, true)).len(), 1);
            peer.response(stream, true);
            stream += 2;
        }
        peer.send(&headers(stream, &post_unsized(), false));
        peer.send(&data(stream, b"", false));
        peer.send(&rst_stream(stream, ErrorCode::Cancel));
        stream += 2;
        peer.send(&ping(second.to_be_bytes().repeat(2).try_into().unwrap()));
        if second % 30 == 0 {
            peer.send(&settings(&[(setting::INITIAL_WINDOW_SIZE, 1 << 20)]));
        }
        assert!(!peer.conn.is_closing(), "cut at second {second}");
        let _ = peer.written();
    }
    assert_eq!(peer.conn.active_streams(), 0);
}

#[test]
fn a_budget_is_per_window() {
    let mut peer = Peer::with(&flood_limits());
    for round in 0..5 {
        for _ in 0..9 {
            peer.send(&ping([round; 8]));
        }
        assert!(!peer.conn.is_closing());
        peer.now += Duration::from_secs(10);
    }
}

#[test]
fn window_updates_far_beyond_the_data_we_send_are_cut() {
    let mut peer = Peer::new();
    peer.send(&headers(1, GET, true));
    flood(&mut peer, |_| window_update(0, 1));
    peer.expect_connection_error(ErrorCode::EnhanceYourCalm);

    // A client crediting every DATA frame we send, stream and connection, is never cut.
    let mut peer = Peer::new();
    peer.send(&headers(1, GET, true));
    peer.response(1, false);
    for _ in 0..5_000 {
        peer.conn.data_frame(1, 10, false);
        peer.send(&window_update(1, 10));
        peer.send(&window_update(0, 10));
        assert!(!peer.conn.is_closing());
    }
}

#[test]
fn a_stream_of_hpack_bombs_is_cut_like_resets() {
    let limits = Limits {
        max_header_list_size: 1_000,
        ..flood_limits()
    };
    let mut peer = Peer::with(&limits);
    // One 120-byte entry in the dynamic table (literal with incremental indexing)...
    let mut first = GET.to_vec();
    first.extend_from_slice(&[0x40, 3]);
    first.extend_from_slice(b"x-b");
    first.push(120);
    first.extend_from_slice(&[b'b'; 120]);
    assert_eq!(peer.send(&headers(1, &first, true)).len(), 1);
    peer.response(1, true);
    // ... then blocks of 1-byte references to it, each decoding past the list limit.
    let sent = flood(&mut peer, |i| {
        let mut block = GET.to_vec();
        block.extend_from_slice(&[0x80 | 62; 50]);
        headers(2 * i + 3, &block, true)
    });
    assert_eq!(sent, 10);
    peer.expect_connection_error(ErrorCode::EnhanceYourCalm);
}

#[test]
fn a_window_update_per_stream_opened_is_not_a_flood() {
    // A page of 300 resources, each stream credited as it opens, before any DATA goes out.
    let mut peer = Peer::with(&Limits {
        max_concurrent_streams: 300,
        ..Limits::default()
    });
    for i in 0..300 {
        let id = 2 * i + 1;
        peer.send(&headers(id, GET, true));
        peer.send(&window_update(id, 1 << 20));
        assert!(!peer.conn.is_closing(), "cut at stream {id}");
    }
}

#[test]
fn credit_owed_before_our_settings_took_effect_is_sent_when_they_do() {
    let limits = Limits {
        initial_window_size: 16_384,
        ..Limits::default()
    };
    let mut peer = Peer::with(&limits);
    peer.send(&headers(1, &post_unsized(), false));
    // Before it reads our SETTINGS the client may fill the default 65,535 window.
    for len in [16_384, 16_384, 16_384, 16_380] {
        assert_eq!(peer.send(&data(1, &vec![0; len], false)).len(), 1);
        peer.conn.release_body(1, len);
    }
    let credited: u32 = peer
        .written()
        .iter()
        .filter(|f| f.kind == Kind::WindowUpdate && f.stream == 1)
        .map(|f| frame::window_update(&f.payload).unwrap())
        .sum();
    // Its ACK leaves its window at 16,384 - (65,532 - credited): what is owed must go now,
    // or a client that has sent everything waits forever.
    peer.send(&frame(Kind::Settings, flags::ACK, 0, &[]));
    let now_credited: u32 = peer
        .written()
        .iter()
        .filter(|f| f.kind == Kind::WindowUpdate && f.stream == 1)
        .map(|f| frame::window_update(&f.payload).unwrap())
        .sum();
    assert_eq!(credited + now_credited, 65_532);
    // And its window is whole: 16,384 more may come.
    assert_eq!(peer.send(&data(1, &[0; 16_384], false)).len(), 1);
    assert!(peer.resets().is_empty());
}

#[test]
fn after_we_reset_a_stream_a_second_request_head_on_it_is_still_a_stream_error() {
    let mut peer = Peer::new();
    peer.send(&headers(1, GET, false));
    // Answered, and the client told to stop sending (§8.1).
    peer.response(1, true);
    peer.conn.reset_stream(1, ErrorCode::NoError);
    assert_eq!(peer.resets(), [(1, ErrorCode::NoError)]);
    // Trailers in flight are fine; a HEADERS without END_STREAM never is (§8.1).
    assert_eq!(peer.send(&headers(1, &literal("x-t", "1"), true)), []);
    assert!(peer.resets().is_empty());
    assert_eq!(peer.send(&headers(1, GET, false)), []);
    peer.expect_stream_error(1, ErrorCode::ProtocolError);
}

#[test]
fn a_stream_both_sides_reset_is_closed_by_the_clients_reset() {
    let mut peer = Peer::new();
    peer.send(&headers(1, GET, false));
    peer.response(1, true);
    peer.conn.reset_stream(1, ErrorCode::NoError);
    let _ = peer.written();
    // The client's RST_STREAM crossed ours: after it, its DATA is STREAM_CLOSED (§5.1).
    assert_eq!(peer.send(&rst_stream(1, ErrorCode::Cancel)), []);
    assert_eq!(peer.send(&data(1, b"x", true)), []);
    peer.expect_stream_error(1, ErrorCode::StreamClosed);
}
