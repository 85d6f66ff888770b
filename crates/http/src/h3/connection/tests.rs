//! `h3::Connection`: a rule a test, each error with its code, then whole exchanges.

use proptest::prelude::*;

use super::{Config, Connection, Event, LocalStream};
use crate::h3::error::{Error, ErrorCode, Scope};
use crate::h3::frame::{
    kind, write_goaway, write_header, write_headers, write_settings, Frame, FrameReader, StreamKind,
};
use crate::h3::qpack::{Decoder, Encoder, Section};
use crate::h3::request_stream::RequestError;
use crate::h3::response::{write_data, HeadError};
use crate::h3::settings::Settings;
use crate::h3::varint;
use crate::response_head::Head;

/// Client stream IDs (RFC 9000 §2.1): bidirectional 0, 4, 8…; unidirectional 2, 6, 10….
const CONTROL: u64 = 2;
const ENCODER: u64 = 6;
const DECODER: u64 = 10;

fn config() -> Config {
    Config {
        grease: 0x1234_5678_9abc_def1,
        ..Config::default()
    }
}

fn hex(text: &str) -> Vec<u8> {
    let digits: Vec<u8> = text.bytes().filter(u8::is_ascii_hexdigit).collect();
    digits
        .chunks(2)
        .map(|pair| u8::from_str_radix(std::str::from_utf8(pair).unwrap(), 16).unwrap())
        .collect()
}

/// A stream type followed by `rest`.
fn typed(stream_type: u64, rest: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    varint::encode(stream_type, &mut out);
    out.extend_from_slice(rest);
    out
}

fn settings(settings: &Settings) -> Vec<u8> {
    let mut out = Vec::new();
    write_settings(settings, &mut out);
    out
}

/// The client's control stream: its type and an empty SETTINGS, then `frames`.
fn control_stream(frames: &[u8]) -> Vec<u8> {
    let mut out = typed(0x00, &settings(&Settings::default()));
    out.extend_from_slice(frames);
    out
}

fn headers(fields: &[(&str, &str)]) -> Vec<u8> {
    let mut section = Vec::new();
    Encoder::new().encode_section(
        fields.iter().map(|&(n, v)| (n.as_bytes(), v.as_bytes())),
        &mut section,
    );
    let mut out = Vec::new();
    write_headers(&section, &mut out);
    out
}

fn get(path: &str) -> Vec<u8> {
    headers(&[
        (":method", "GET"),
        (":scheme", "https"),
        (":authority", "example.com"),
        (":path", path),
    ])
}

fn post(body: &[&str]) -> Vec<u8> {
    let length: usize = body.iter().map(|piece| piece.len()).sum();
    let mut out = headers(&[
        (":method", "POST"),
        (":scheme", "https"),
        (":authority", "example.com"),
        (":path", "/form"),
        ("content-length", &length.to_string()),
    ]);
    for piece in body {
        write_data(piece.as_bytes(), &mut out);
    }
    out
}

/// The RFC 9204 Appendix B.2 insertions (capacity 220, `:authority www.example.com`,
/// `:path /sample/path`), as encoder-stream instructions.
fn insertions() -> Vec<u8> {
    hex("3fbd01 c00f 7777 772e 6578 616d 706c 652e 636f 6d c10c 2f73 616d 706c 652f 7061 7468")
}

/// A GET whose `:authority` and `:path` are the two inserted entries (Required Insert Count
/// 2, Base 0, two post-base references), `:method GET` and `:scheme https` static.
fn dynamic_get() -> Vec<u8> {
    let mut out = Vec::new();
    write_headers(&hex("0381 10 11 d1 d7"), &mut out);
    out
}

/// What an event says, as text: bodies owned, so events of calls can be compared.
fn describe(event: &Event<'_>) -> String {
    match event {
        Event::Request { stream, head } => format!(
            "{stream} {} {} {}",
            head.method.as_str(),
            head.host().unwrap_or("-"),
            head.target
        ),
        Event::Body { stream, data } => format!("{stream} body {}", String::from_utf8_lossy(data)),
        Event::Finished { stream } => format!("{stream} finished"),
        Event::StreamError { stream, error } => {
            let error = error.error();
            assert_eq!(error.scope, Scope::Stream);
            format!("{stream} error {:?}", error.code)
        }
        Event::Settings(settings) => format!("settings {settings:?}"),
        Event::GoAway(id) => format!("goaway {id}"),
        Event::StopSending { stream, code } => format!("{stream} stop {code:?}"),
    }
}

/// Consecutive body pieces of a stream joined: how the body was cut does not matter.
fn merged(seen: Vec<String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for line in seen {
        if let (Some(last), Some((stream, piece))) = (out.last_mut(), line.split_once(" body ")) {
            if last.starts_with(&format!("{stream} body ")) {
                last.push_str(piece);
                continue;
            }
        }
        out.push(line);
    }
    out
}

/// Feeds `bytes` to stream `id`: what it said.
fn feed(conn: &mut Connection, id: u64, bytes: &[u8], fin: bool) -> Result<Vec<String>, Error> {
    let mut events = Vec::new();
    let result = conn.receive(id, bytes, fin, &mut events);
    let described = events.iter().map(describe).collect();
    result.map(|()| described)
}

/// Feeds the streams in order; the first connection error's code.
fn feed_all(
    conn: &mut Connection,
    input: &[(u64, Vec<u8>, bool)],
) -> Result<Vec<String>, ErrorCode> {
    let mut seen = Vec::new();
    for (id, bytes, fin) in input {
        seen.extend(feed(conn, *id, bytes, *fin).map_err(|error| {
            assert_eq!(error.scope, Scope::Connection);
            error.code
        })?);
    }
    Ok(seen)
}

fn connection_error(input: &[(u64, Vec<u8>, bool)]) -> ErrorCode {
    let mut conn = Connection::new(&config());
    let code = feed_all(&mut conn, input).unwrap_err();
    // The connection is dead: whatever comes next gets the same error.
    assert_eq!(feed(&mut conn, 0, &get("/"), true).unwrap_err().code, code);
    assert_eq!(conn.error().map(|error| error.code), Some(code));
    code
}

/// The frames of one of our streams after its type: SETTINGS and GOAWAY as frames, a
/// reserved frame type as the octets it skipped.
fn our_control_frames(bytes: &[u8]) -> Vec<String> {
    assert_eq!(bytes[0], 0x00, "the control stream's type");
    let mut reader = FrameReader::new(StreamKind::Control, 0);
    let mut at = 1;
    let mut frames = Vec::new();
    while at < bytes.len() {
        let (used, frame) = reader.read(&bytes[at..]).unwrap();
        assert!(used > 0);
        at += used;
        match frame {
            Some(Frame::Settings(settings)) => frames.push(format!("{settings:?}")),
            Some(Frame::GoAway(id)) => frames.push(format!("goaway {id}")),
            Some(other) => panic!("{other:?} on our control stream"),
            None => {}
        }
    }
    assert!(reader.at_frame_boundary());
    frames
}

#[test]
fn our_streams_open_with_their_types_and_settings_first() {
    let mut conn = Connection::new(&config());
    assert!(conn.has_output());
    let control = conn.take_output(LocalStream::Control);
    let ours = Settings {
        qpack_max_table_capacity: 4_096,
        max_field_section_size: Some(64 << 10),
        qpack_blocked_streams: 16,
        enable_connect_protocol: false,
        h3_datagram: false,
    };
    assert_eq!(our_control_frames(&control), [format!("{ours:?}")]);
    assert_eq!(conn.take_output(LocalStream::QpackEncoder), [0x02]);
    assert_eq!(conn.take_output(LocalStream::QpackDecoder), [0x03]);
    assert!(!conn.has_output());
    for stream in LocalStream::ALL {
        assert!(conn.take_output(stream).is_empty());
    }
}

#[test]
fn our_settings_and_control_stream_carry_reserved_values_that_vary_by_connection() {
    let mut seen = Vec::new();
    for grease in [0, 1, 0xffff_ffff_ffff_ffff, 0x8000_0000_0001_0003] {
        let mut conn = Connection::new(&Config {
            grease,
            ..Config::default()
        });
        let control = conn.take_output(LocalStream::Control);
        // A reserved setting: the payload is longer than our three settings, yet decodes
        // to them; a reserved frame follows, skipped.
        let mut at = 1;
        assert_eq!(varint::decode(&control, &mut at), Some(kind::SETTINGS));
        let length = varint::decode(&control, &mut at).unwrap() as usize;
        let payload = &control[at..at + length];
        let mut plain = Vec::new();
        Settings::decode(payload).unwrap().encode(&mut plain);
        assert!(payload.len() > plain.len());
        let mut after = at + length;
        let frame_type = varint::decode(&control, &mut after).unwrap();
        assert_eq!((frame_type - 0x21) % 0x1f, 0, "a reserved frame type");
        assert_eq!(our_control_frames(&control).len(), 1);
        seen.push(control);
    }
    seen.dedup();
    assert_eq!(seen.len(), 4);
}

#[test]
fn the_clients_settings_are_reported_and_bound_our_response_heads() {
    let mut conn = Connection::new(&config());
    let mut head = Head::new(200);
    head.push("x-long", &[b'a'; 200]);
    // Before the client's SETTINGS, its limit is the default: none (§7.2.4.2).
    assert_eq!(conn.write_head(&head, &mut Vec::new()), Ok(()));
    let limited = Settings {
        max_field_section_size: Some(200),
        qpack_max_table_capacity: 100,
        ..Settings::default()
    };
    let stream = typed(0x00, &settings(&limited));
    // The type and the frame in pieces.
    assert_eq!(
        feed(&mut conn, CONTROL, &stream[..1], false).unwrap(),
        Vec::<String>::new()
    );
    assert_eq!(
        feed(&mut conn, CONTROL, &stream[1..4], false).unwrap(),
        Vec::<String>::new()
    );
    assert_eq!(
        feed(&mut conn, CONTROL, &stream[4..], false).unwrap(),
        [format!("settings {limited:?}")]
    );
    assert_eq!(conn.peer_settings(), Some(limited));
    let mut out = Vec::new();
    // `:status` 200 costs 42 octets, the field 6 + 200 + 32.
    assert_eq!(
        conn.write_head(&head, &mut out),
        Err(HeadError::TooLarge {
            size: 42 + 238,
            limit: 200
        })
    );
    assert!(out.is_empty());
    let mut small = Head::new(500);
    small.push("content-length", b"0");
    assert_eq!(conn.write_head(&small, &mut out), Ok(()));
    assert!(!out.is_empty());
}

#[test]
fn a_stream_type_may_arrive_in_pieces_and_in_a_longer_form() {
    let mut conn = Connection::new(&config());
    // The control stream's type, 0, in its 8-octet form, an octet at a time.
    let mut stream = vec![0xc0, 0, 0, 0, 0, 0, 0, 0];
    stream.extend(settings(&Settings::default()));
    let mut seen = Vec::new();
    for byte in &stream {
        seen.extend(feed(&mut conn, CONTROL, std::slice::from_ref(byte), false).unwrap());
    }
    assert_eq!(seen, [format!("settings {:?}", Settings::default())]);
}

#[test]
fn the_control_stream_must_begin_with_settings() {
    let mut goaway = Vec::new();
    write_goaway(0, &mut goaway);
    assert_eq!(
        connection_error(&[(CONTROL, typed(0x00, &goaway), false)]),
        ErrorCode::MissingSettings
    );
}

#[test]
fn request_frames_and_a_second_settings_on_the_control_stream_are_unexpected() {
    let mut data = Vec::new();
    write_data(b"x", &mut data);
    for frames in [data, get("/"), settings(&Settings::default())] {
        assert_eq!(
            connection_error(&[(CONTROL, control_stream(&frames), false)]),
            ErrorCode::FrameUnexpected
        );
    }
}

#[test]
fn http2_settings_are_settings_errors() {
    for id in 0x02..=0x05 {
        let mut payload = Vec::new();
        varint::encode(id, &mut payload);
        varint::encode(1, &mut payload);
        let mut frame = Vec::new();
        write_header(kind::SETTINGS, payload.len() as u64, &mut frame);
        frame.extend(payload);
        assert_eq!(
            connection_error(&[(CONTROL, typed(0x00, &frame), false)]),
            ErrorCode::SettingsError,
            "setting {id:#x}"
        );
    }
}

#[test]
fn max_push_id_is_accepted_and_the_clients_goaway_reported_but_never_raised() {
    let mut conn = Connection::new(&config());
    let mut frames = Vec::new();
    write_header(kind::MAX_PUSH_ID, 1, &mut frames);
    frames.push(8);
    write_goaway(4, &mut frames);
    write_goaway(0, &mut frames);
    assert_eq!(
        feed(&mut conn, CONTROL, &control_stream(&frames), false).unwrap(),
        [
            format!("settings {:?}", Settings::default()),
            "goaway 4".into(),
            "goaway 0".into()
        ]
    );
    assert_eq!(conn.peer_goaway(), Some(0));
    let mut raised = Vec::new();
    write_goaway(4, &mut raised);
    assert_eq!(
        feed(&mut conn, CONTROL, &raised, false).unwrap_err().code,
        ErrorCode::IdError
    );
}

#[test]
fn a_push_stream_from_a_client_is_a_stream_creation_error() {
    assert_eq!(
        connection_error(&[(CONTROL, typed(0x01, &[0]), false)]),
        ErrorCode::StreamCreationError
    );
}

#[test]
fn reserved_and_unknown_stream_types_are_refused_and_their_data_dropped() {
    let mut conn = Connection::new(&config());
    let mut events = Vec::new();
    conn.stream_opened(CONTROL, &mut events).unwrap();
    assert!(events.is_empty());
    // 0x21 + 0x1f: a reserved type (§6.2.3), in pieces; then an unknown extension's.
    let reserved = typed(0x21 + 0x1f, b"whatever");
    assert!(feed(&mut conn, CONTROL, &reserved[..1], false)
        .unwrap()
        .is_empty());
    assert_eq!(
        feed(&mut conn, CONTROL, &reserved[1..], false).unwrap(),
        ["2 stop StreamCreationError"]
    );
    assert!(feed(&mut conn, CONTROL, b"more", true).unwrap().is_empty());
    assert_eq!(
        feed(&mut conn, 6, &typed(0x54, b""), false).unwrap(),
        ["6 stop StreamCreationError"]
    );
    assert_eq!(conn.stream_reset(6), Ok(()));
    // A stream that ends or is reset before its type is nothing (§6.2).
    assert!(feed(&mut conn, 10, &[0x40], true).unwrap().is_empty());
    assert!(feed(&mut conn, 14, &[], false).unwrap().is_empty());
    assert_eq!(conn.stream_reset(14), Ok(()));
    // The critical streams may still come.
    assert_eq!(
        feed(&mut conn, 18, &control_stream(&[]), false)
            .unwrap()
            .len(),
        1
    );
}

#[test]
fn a_second_critical_stream_is_a_stream_creation_error() {
    for (stream_type, first) in [
        (0x00, control_stream(&[])),
        (0x02, typed(0x02, &[])),
        (0x03, typed(0x03, &[])),
    ] {
        assert_eq!(
            connection_error(&[
                (CONTROL, first, false),
                (ENCODER, typed(stream_type, &[]), false)
            ]),
            ErrorCode::StreamCreationError,
            "type {stream_type}"
        );
    }
}

#[test]
fn closing_or_resetting_a_critical_stream_is_a_connection_error() {
    for opened in [control_stream(&[]), typed(0x02, &[]), typed(0x03, &[])] {
        assert_eq!(
            connection_error(&[
                (CONTROL, opened.clone(), false),
                (CONTROL, Vec::new(), true)
            ]),
            ErrorCode::ClosedCriticalStream
        );
        // The type and the FIN together.
        assert_eq!(
            connection_error(&[(CONTROL, opened.clone(), true)]),
            ErrorCode::ClosedCriticalStream
        );
        let mut conn = Connection::new(&config());
        feed(&mut conn, CONTROL, &opened, false).unwrap();
        assert_eq!(
            conn.stream_reset(CONTROL).unwrap_err().code,
            ErrorCode::ClosedCriticalStream
        );
    }
}

#[test]
fn streams_only_the_server_opens_carry_nothing_from_the_client() {
    for id in [1, 3, 5, 7] {
        assert_eq!(
            connection_error(&[(id, b"x".to_vec(), false)]),
            ErrorCode::StreamCreationError
        );
    }
}

#[test]
fn a_request_in_pieces_gives_its_head_body_and_end() {
    let mut conn = Connection::new(&config());
    let input = post(&["hel", "lo"]);
    let mut seen = Vec::new();
    for piece in input.chunks(3) {
        seen.extend(feed(&mut conn, 0, piece, false).unwrap());
    }
    assert_eq!(conn.open_requests(), 1);
    seen.extend(feed(&mut conn, 0, &[], true).unwrap());
    assert_eq!(
        merged(seen),
        ["0 POST example.com /form", "0 body hello", "0 finished"]
    );
    assert_eq!(conn.open_requests(), 0);
    // Late data for a finished stream is dropped.
    assert!(feed(&mut conn, 0, b"xyz", true).unwrap().is_empty());
}

#[test]
fn a_stream_showing_up_after_a_higher_one_is_still_a_new_request() {
    // QUIC opened 0 and 4 with 8 (RFC 9000 §3.2); their data comes later.
    let mut conn = Connection::new(&config());
    let mut seen = feed(&mut conn, 8, &get("/8"), true).unwrap();
    seen.extend(feed(&mut conn, 0, &get("/0"), true).unwrap());
    seen.extend(feed(&mut conn, 4, &get("/4"), true).unwrap());
    // Seen and done: dropped.
    seen.extend(feed(&mut conn, 0, &get("/again"), true).unwrap());
    assert_eq!(
        seen,
        [
            "8 GET example.com /8",
            "8 finished",
            "0 GET example.com /0",
            "0 finished",
            "4 GET example.com /4",
            "4 finished"
        ]
    );
}

#[test]
fn body_pieces_borrow_from_the_input() {
    let mut conn = Connection::new(&config());
    let input = post(&["hello"]);
    let mut events = Vec::new();
    conn.receive(0, &input, true, &mut events).unwrap();
    let Some(Event::Body { data, .. }) = events.get(1) else {
        panic!("{events:?}");
    };
    assert!(matches!(data, std::borrow::Cow::Borrowed(b"hello")));
}

#[test]
fn trailers_are_checked_then_ignored_and_headers_after_them_unexpected() {
    let mut conn = Connection::new(&config());
    let mut input = post(&["abc"]);
    input.extend(headers(&[("x-checksum", "1")]));
    assert_eq!(
        feed(&mut conn, 0, &input, true).unwrap(),
        ["0 POST example.com /form", "0 body abc", "0 finished"]
    );
    // A pseudo-header in trailers: the request is malformed, the connection goes on.
    let mut bad = post(&["abc"]);
    bad.extend(headers(&[(":path", "/")]));
    assert_eq!(
        feed(&mut conn, 4, &bad, true).unwrap(),
        [
            "4 POST example.com /form",
            "4 body abc",
            "4 error MessageError"
        ]
    );
    let mut twice = post(&["abc"]);
    twice.extend(headers(&[("x-a", "1")]));
    twice.extend(headers(&[("x-b", "2")]));
    assert_eq!(
        feed(&mut conn, 8, &twice, false).unwrap_err().code,
        ErrorCode::FrameUnexpected
    );
}

#[test]
fn stream_errors_end_the_stream_not_the_connection() {
    let mut conn = Connection::new(&config());
    // FIN before HEADERS.
    assert_eq!(
        feed(&mut conn, 0, &[], true).unwrap(),
        ["0 error RequestIncomplete"]
    );
    // An upper-case name.
    assert_eq!(
        feed(
            &mut conn,
            4,
            &headers(&[(":method", "GET"), ("X", "1")]),
            false
        )
        .unwrap(),
        ["4 error MessageError"]
    );
    // What the client sends before it sees our STOP_SENDING is dropped.
    assert!(feed(&mut conn, 4, &post(&["x"]), true).unwrap().is_empty());
    // A field section past our limit: 431, not a reset.
    let mut small = Connection::new(&Config {
        max_field_section_size: 100,
        ..config()
    });
    let mut events = Vec::new();
    let request = get("/");
    small.receive(0, &request, true, &mut events).unwrap();
    assert_eq!(
        events,
        [Event::StreamError {
            stream: 0,
            error: RequestError::FieldSectionTooLarge
        }]
    );
    assert_eq!(
        feed(&mut conn, 8, &get("/ok"), true).unwrap(),
        ["8 GET example.com /ok", "8 finished"]
    );
}

#[test]
fn a_reset_request_is_forgotten() {
    let mut conn = Connection::new(&config());
    let input = post(&["hello"]);
    let head = post(&[""]).len();
    assert_eq!(
        feed(&mut conn, 0, &input[..head + 3], false).unwrap(),
        ["0 POST example.com /form", "0 body h"]
    );
    conn.stream_reset(0).unwrap();
    assert_eq!(conn.open_requests(), 0);
    assert!(feed(&mut conn, 0, &input[head + 3..], true)
        .unwrap()
        .is_empty());
    // Reset before anything of it came: done all the same.
    conn.stream_reset(4).unwrap();
    assert!(feed(&mut conn, 4, &get("/"), true).unwrap().is_empty());
    conn.stream_reset(6).unwrap();
    assert!(feed(&mut conn, 6, &control_stream(&[]), false)
        .unwrap()
        .is_empty());
    // Both request streams' resets told the client's encoder (RFC 9204 §4.4.2).
    assert_eq!(
        conn.take_output(LocalStream::QpackDecoder),
        [0x03, 0x40, 0x44]
    );
}

#[test]
fn the_encoder_stream_is_bounded_by_our_capacity() {
    let small = Config {
        qpack_max_table_capacity: 100,
        ..config()
    };
    // B.2's Set Dynamic Table Capacity of 220.
    let mut conn = Connection::new(&small);
    assert_eq!(
        feed(&mut conn, ENCODER, &typed(0x02, &insertions()), false)
            .unwrap_err()
            .code,
        ErrorCode::QpackEncoderStreamError
    );
    // With no capacity advertised, any insertion is an error.
    let mut none = Connection::new(&Config {
        qpack_max_table_capacity: 0,
        ..config()
    });
    assert_eq!(
        feed(&mut none, ENCODER, &typed(0x02, &hex("4178 0179")), false)
            .unwrap_err()
            .code,
        ErrorCode::QpackEncoderStreamError
    );
}

#[test]
fn a_blocked_request_waits_for_its_insertions_with_what_follows_it() {
    let mut conn = Connection::new(&config());
    let mut input = dynamic_get();
    write_data(b"early", &mut input);
    assert!(feed(&mut conn, 0, &input, true).unwrap().is_empty());
    assert!(conn.is_blocked(0));
    // Nothing to acknowledge yet.
    assert_eq!(conn.take_output(LocalStream::QpackDecoder), [0x03]);
    let encoder = typed(0x02, &insertions());
    assert!(feed(&mut conn, ENCODER, &encoder[..10], false)
        .unwrap()
        .is_empty());
    assert!(conn.is_blocked(0));
    let mut events = Vec::new();
    conn.receive(ENCODER, &encoder[10..], false, &mut events)
        .unwrap();
    assert_eq!(
        events.iter().map(describe).collect::<Vec<_>>(),
        [
            "0 GET www.example.com /sample/path",
            "0 body early",
            "0 finished"
        ]
    );
    assert!(matches!(
        &events[1],
        Event::Body {
            data: std::borrow::Cow::Owned(_),
            ..
        }
    ));
    assert!(!conn.is_blocked(0));
    // Section Acknowledgment of stream 0 (RFC 9204 §4.4.1); it covers both insertions.
    assert_eq!(conn.take_output(LocalStream::QpackDecoder), [0x80]);
}

#[test]
fn a_blocked_stream_is_decoded_before_later_instructions_evict_its_entries() {
    // RFC 9204 §2.2.1: a blocked section is decoded once its insertions arrived, against the
    // table they made. The same read brings an insertion that evicts `:authority` (57
    // octets; 106 + 123 > 220); the section must not see the table after it.
    let mut conn = Connection::new(&config());
    assert!(feed(&mut conn, 0, &dynamic_get(), true).unwrap().is_empty());
    let mut encoder = typed(0x02, &insertions());
    encoder.extend([0x41, b'x', 90]);
    encoder.extend([b'v'; 90]);
    assert_eq!(
        feed(&mut conn, ENCODER, &encoder, false).unwrap(),
        ["0 GET www.example.com /sample/path", "0 finished"]
    );
    // The section is acknowledged; the third insertion, which no section used, is counted.
    assert_eq!(
        conn.take_output(LocalStream::QpackDecoder),
        [0x03, 0x80, 0x01]
    );
}

#[test]
fn more_blocked_streams_than_we_allow_is_decompression_failed() {
    let mut conn = Connection::new(&Config {
        qpack_blocked_streams: 1,
        ..config()
    });
    assert!(feed(&mut conn, 0, &dynamic_get(), false)
        .unwrap()
        .is_empty());
    assert_eq!(
        feed(&mut conn, 4, &dynamic_get(), false).unwrap_err().code,
        ErrorCode::QpackDecompressionFailed
    );
    // None allowed: the first is one too many.
    let mut strict = Connection::new(&Config {
        qpack_blocked_streams: 0,
        ..config()
    });
    assert_eq!(
        feed(&mut strict, 0, &dynamic_get(), false)
            .unwrap_err()
            .code,
        ErrorCode::QpackDecompressionFailed
    );
}

#[test]
fn a_reset_blocked_stream_is_cancelled_and_frees_its_slot() {
    let mut conn = Connection::new(&Config {
        qpack_blocked_streams: 1,
        ..config()
    });
    feed(&mut conn, 4, &dynamic_get(), false).unwrap();
    conn.stream_reset(4).unwrap();
    // Stream Cancellation of stream 4 (RFC 9204 §4.4.2).
    assert_eq!(conn.take_output(LocalStream::QpackDecoder), [0x03, 0x44]);
    assert!(feed(&mut conn, 8, &dynamic_get(), false)
        .unwrap()
        .is_empty());
    // When the server stops reading a stream itself, the same.
    conn.stop_reading(8);
    assert_eq!(conn.take_output(LocalStream::QpackDecoder), [0x48]);
}

#[test]
fn insertions_no_section_used_are_acknowledged_by_an_increment() {
    let mut conn = Connection::new(&config());
    for stream in LocalStream::ALL {
        conn.take_output(stream);
    }
    assert!(!conn.has_output());
    feed(&mut conn, ENCODER, &typed(0x02, &insertions()), false).unwrap();
    assert!(conn.has_output());
    // Insert Count Increment of 2 (RFC 9204 §4.4.3).
    assert_eq!(conn.take_output(LocalStream::QpackDecoder), [0x02]);
}

#[test]
fn the_clients_decoder_stream_is_read_by_our_encoder() {
    let mut conn = Connection::new(&config());
    // Stream Cancellation is fine; an acknowledgement of a section that referenced nothing
    // is not (RFC 9204 §4.4.1).
    assert!(feed(&mut conn, DECODER, &typed(0x03, &[0x44]), false)
        .unwrap()
        .is_empty());
    assert_eq!(
        feed(&mut conn, DECODER, &[0x84], false).unwrap_err().code,
        ErrorCode::QpackDecoderStreamError
    );
}

#[test]
fn our_goaway_names_the_first_stream_not_served_and_refuses_it() {
    let mut conn = Connection::new(&config());
    conn.take_output(LocalStream::Control);
    assert_eq!(feed(&mut conn, 0, &get("/a"), false).unwrap().len(), 1);
    let mut events = Vec::new();
    conn.stream_opened(4, &mut events).unwrap();
    assert_eq!(conn.goaway(), 8);
    assert_eq!(conn.goaway_id(), Some(8));
    let mut goaway = Vec::new();
    write_goaway(8, &mut goaway);
    assert_eq!(conn.take_output(LocalStream::Control), goaway);
    // Once only: the ID would never go down further.
    assert_eq!(conn.goaway(), 8);
    assert!(conn.take_output(LocalStream::Control).is_empty());
    // Streams opened before it are served; those after it refused, their data dropped.
    assert_eq!(feed(&mut conn, 0, &[], true).unwrap(), ["0 finished"]);
    assert_eq!(
        feed(&mut conn, 4, &get("/b"), true).unwrap(),
        ["4 GET example.com /b", "4 finished"]
    );
    assert_eq!(
        feed(&mut conn, 8, &get("/c"), true).unwrap(),
        ["8 error RequestRejected"]
    );
    assert!(feed(&mut conn, 8, b"more", true).unwrap().is_empty());
    conn.stream_opened(12, &mut events).unwrap();
    assert_eq!(
        events.iter().map(describe).collect::<Vec<_>>(),
        ["12 error RequestRejected"]
    );
    // Refusing a stream tells the client's encoder that none of its sections will be read.
    assert_eq!(
        conn.take_output(LocalStream::QpackDecoder),
        [0x03, 0x48, 0x4c]
    );
    assert_eq!(Connection::new(&config()).goaway(), 0);
}

#[test]
fn interim_heads_precede_the_final_one_and_101_is_refused() {
    let conn = Connection::new(&config());
    let mut out = Vec::new();
    let mut early = Head::new(103);
    early.push("Link", b"</style.css>; rel=preload");
    conn.write_head(&Head::new(100), &mut out).unwrap();
    conn.write_head(&early, &mut out).unwrap();
    let mut last = Head::new(200);
    last.push("Content-Length", b"2");
    conn.write_head(&last, &mut out).unwrap();
    write_data(b"ok", &mut out);
    assert_eq!(
        conn.write_head(&Head::new(101), &mut out),
        Err(HeadError::SwitchingProtocols)
    );

    let mut reader = FrameReader::new(StreamKind::Request, 1 << 16);
    let mut decoder = Decoder::new(0, 0);
    let mut seen = Vec::new();
    let mut at = 0;
    while at < out.len() {
        let (used, frame) = reader.read(&out[at..]).unwrap();
        at += used;
        match frame {
            Some(Frame::Headers(section)) => {
                let mut fields = Vec::new();
                let decoded = decoder
                    .decode_section(0, &section, 1 << 16, &mut |n, v| {
                        fields.push(format!(
                            "{}={}",
                            String::from_utf8_lossy(n),
                            String::from_utf8_lossy(v)
                        ));
                    })
                    .unwrap();
                assert!(matches!(decoded, Section::Decoded { .. }));
                seen.push(fields.join(" "));
            }
            Some(Frame::Data(piece)) => seen.push(String::from_utf8_lossy(piece).into_owned()),
            _ => {}
        }
    }
    assert_eq!(
        seen,
        [
            ":status=100",
            ":status=103 link=</style.css>; rel=preload",
            ":status=200 content-length=2",
            "ok"
        ]
    );
}

/// A client's whole connection: its control and QPACK streams, two requests interleaved,
/// the second blocked until a later encoder instruction, then our GOAWAY and a request
/// refused by it. Each entry: stream, bytes, FIN.
fn exchange() -> Vec<(u64, Vec<u8>, bool)> {
    let post = post(&["hello, ", "world"]);
    let blocked = dynamic_get();
    vec![
        (CONTROL, control_stream(&[]), false),
        (DECODER, typed(0x03, &[]), false),
        (0, post[..30].to_vec(), false),
        (4, blocked, true),
        (ENCODER, typed(0x02, &[]), false),
        (0, post[30..].to_vec(), false),
        (ENCODER, insertions(), false),
        (0, Vec::new(), true),
    ]
}

#[test]
fn a_whole_exchange() {
    let mut conn = Connection::new(&config());
    let seen = feed_all(&mut conn, &exchange()).unwrap();
    assert_eq!(
        merged(seen),
        [
            format!("settings {:?}", Settings::default()).as_str(),
            "0 POST example.com /form",
            "0 body hello, world",
            "4 GET www.example.com /sample/path",
            "4 finished",
            "0 finished"
        ]
    );
    assert_eq!(conn.take_output(LocalStream::QpackDecoder), [0x03, 0x84]);
    assert_eq!(conn.goaway(), 8);
    assert_eq!(
        feed(&mut conn, 8, &get("/late"), true).unwrap(),
        ["8 error RequestRejected"]
    );
    assert!(conn.error().is_none());
}

/// The exchange's events per stream, bodies joined, whatever the order of the streams'
/// chunks.
fn per_stream(seen: &[String]) -> Vec<String> {
    let mut streams: std::collections::BTreeMap<&str, Vec<String>> = Default::default();
    for line in seen {
        let stream = line.split(' ').next().unwrap_or_default();
        streams.entry(stream).or_default().push(line.clone());
    }
    streams.into_values().flat_map(merged).collect()
}

/// Some of a stream's bytes, and whether the stream ends after them.
type Piece = (Vec<u8>, bool);

proptest! {
    /// The exchange cut into pieces of any size and the streams interleaved in any order
    /// that keeps each stream's own order: each stream's events are the same.
    #[test]
    fn any_cut_and_interleaving_gives_each_stream_the_same_events(
        cuts in proptest::collection::vec(1usize..17, 8),
        order in proptest::collection::vec(0usize..8, 64),
    ) {
        let whole = per_stream(&feed_all(&mut Connection::new(&config()), &exchange()).unwrap());
        // Each entry in pieces; a piece goes out when `order` names its entry and every
        // earlier piece of the same stream went.
        let mut queues: Vec<(u64, Vec<Piece>)> = Vec::new();
        for (index, (id, bytes, fin)) in exchange().into_iter().enumerate() {
            let mut pieces: Vec<Piece> =
                bytes.chunks(cuts[index]).map(|piece| (piece.to_vec(), false)).collect();
            if pieces.is_empty() || fin {
                pieces.push((Vec::new(), fin));
            }
            match queues.iter_mut().find(|(queued, _)| *queued == id) {
                Some((_, queue)) => queue.extend(pieces),
                None => queues.push((id, pieces)),
            }
        }
        let mut conn = Connection::new(&config());
        let mut seen = Vec::new();
        let mut turn = 0;
        while queues.iter().any(|(_, queue)| !queue.is_empty()) {
            let pick = order[turn % order.len()] % queues.len();
            turn += 1;
            let count = queues.len();
            let Some(next) = (0..count)
                .map(|offset| (pick + offset) % count)
                .find(|&index| !queues[index].1.is_empty())
            else {
                continue;
            };
            let (id, queue) = &mut queues[next];
            let (bytes, fin) = queue.remove(0);
            seen.extend(feed(&mut conn, *id, &bytes, fin).unwrap());
        }
        // Interleaving may let stream 4's request arrive before the encoder stream: then it
        // is blocked, else decoded at once; either way its events are the same.
        prop_assert_eq!(per_stream(&seen), whole);
    }

    /// Arbitrary bytes on arbitrary streams never panic, and a failed connection stays
    /// failed with the same error.
    #[test]
    fn arbitrary_input_never_panics(
        input in proptest::collection::vec(
            (0u64..24, proptest::collection::vec(any::<u8>(), 0..40), any::<bool>()),
            0..12,
        ),
    ) {
        let mut conn = Connection::new(&config());
        let mut failed = None;
        for (id, bytes, fin) in input {
            let mut events = Vec::new();
            match conn.receive(id, &bytes, fin, &mut events) {
                Ok(()) => prop_assert!(failed.is_none()),
                Err(error) => {
                    if let Some(earlier) = failed {
                        prop_assert_eq!(error, earlier);
                    }
                    failed = Some(error);
                }
            }
            let _ = conn.take_output(LocalStream::QpackDecoder);
        }
    }
}
