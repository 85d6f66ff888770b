//! The request stream (§4.1, §4.1.2), response encoding and the control stream (§6.2.1),
//! a rule a test.

use proptest::prelude::*;

use super::control::{ControlEvent, ControlStream};
use super::error::{ErrorCode, Scope};
use super::frame::{kind, write_goaway, write_header, write_headers, write_settings};
use super::qpack::{Decoder, Encoder, Section};
use super::request_stream::{Event, RequestError, RequestStream};
use super::response::{write_data, write_response_head};
use super::settings::Settings;
use super::varint;
use crate::h2::fields::MalformedRequest;
use crate::message::{BodyFraming, Method, Version};
use crate::response_head::Head;

const LIMIT: usize = 16_384;

fn headers_frame(fields: &[(&str, &str)], out: &mut Vec<u8>) {
    let mut section = Vec::new();
    Encoder::new().encode_section(
        fields.iter().map(|&(n, v)| (n.as_bytes(), v.as_bytes())),
        &mut section,
    );
    write_headers(&section, out);
}

fn get(extra: &[(&str, &str)]) -> Vec<(&'static str, String)> {
    let mut fields: Vec<(&'static str, String)> = vec![
        (":method", "GET".into()),
        (":scheme", "https".into()),
        (":authority", "example.com".into()),
        (":path", "/".into()),
    ];
    fields.extend(extra.iter().map(|&(n, v)| (leak(n), v.to_owned())));
    fields
}

fn leak(text: &str) -> &'static str {
    Box::leak(text.to_owned().into_boxed_str())
}

fn request(fields: &[(&str, &str)]) -> Vec<u8> {
    let mut out = Vec::new();
    headers_frame(fields, &mut out);
    out
}

fn get_request(extra: &[(&str, &str)]) -> Vec<u8> {
    let fields = get(extra);
    let borrowed: Vec<(&str, &str)> = fields.iter().map(|(n, v)| (*n, v.as_str())).collect();
    request(&borrowed)
}

/// Every event of `input` read in pieces of `step`, bodies joined, then the stream's end.
fn run(input: &[u8], step: usize) -> Result<Vec<String>, RequestError> {
    let mut decoder = Decoder::new(0, 0);
    let mut stream = RequestStream::new(0, LIMIT);
    let mut seen = Vec::new();
    let (mut start, mut end) = (0, 0);
    while end < input.len() || start < end {
        end = (end + step).min(input.len());
        loop {
            let (used, event) = stream.read(&mut decoder, &input[start..end])?;
            start += used;
            match event {
                Some(event) => note(&mut seen, event),
                None if used == 0 => break,
                None => {}
            }
        }
    }
    assert!(stream.end()?);
    seen.push("end".into());
    Ok(seen)
}

fn note(seen: &mut Vec<String>, event: Event<'_>) {
    match event {
        Event::Head(head) => seen.push(format!(
            "{} {} {:?} {:?} {:?}",
            head.method.as_str(),
            head.target,
            head.version,
            head.body,
            head.headers
                .iter()
                .map(|h| format!("{}={}", h.name, String::from_utf8_lossy(&h.value)))
                .collect::<Vec<_>>()
        )),
        Event::Body(piece) => match seen.last_mut() {
            Some(last) if last.starts_with("body:") => {
                last.push_str(&String::from_utf8_lossy(piece));
            }
            _ => seen.push(format!("body:{}", String::from_utf8_lossy(piece))),
        },
        Event::Trailers(fields) => seen.push(format!(
            "trailers {:?}",
            fields
                .iter()
                .map(|h| format!("{}={}", h.name, String::from_utf8_lossy(&h.value)))
                .collect::<Vec<_>>()
        )),
    }
}

fn malformed(input: &[u8]) -> MalformedRequest {
    match run(input, input.len().max(1)) {
        Err(RequestError::Malformed(fault)) => {
            let error = RequestError::Malformed(fault.clone()).error();
            assert_eq!(
                (error.code, error.scope),
                (ErrorCode::MessageError, Scope::Stream)
            );
            fault
        }
        other => panic!("not malformed: {other:?}"),
    }
}

fn protocol_error(input: &[u8]) -> (ErrorCode, Scope) {
    match run(input, input.len().max(1)) {
        Err(RequestError::Protocol(error)) => (error.code, error.scope),
        other => panic!("no protocol error: {other:?}"),
    }
}

fn post_with_body() -> Vec<u8> {
    let mut input = get_request(&[("content-length", "5")]);
    input = {
        // The same head with POST.
        let fields = get(&[("content-length", "5")]);
        let mut borrowed: Vec<(&str, &str)> =
            fields.iter().map(|(n, v)| (*n, v.as_str())).collect();
        borrowed[0].1 = "POST";
        let _ = input;
        request(&borrowed)
    };
    write_data(b"hel", &mut input);
    // A reserved (greasing) frame type between DATA frames is ignored (§7.2.8, §9).
    write_header(0x21, 3, &mut input);
    input.extend_from_slice(b"xyz");
    write_data(b"lo", &mut input);
    headers_frame(&[("x-checksum", "abc")], &mut input);
    input
}

#[test]
fn a_get_becomes_an_http3_request_with_host_from_authority() {
    let seen = run(&get_request(&[("accept", "*/*")]), 1000).unwrap();
    assert_eq!(
        seen,
        [
            "GET / Http3 Chunked [\"host=example.com\", \"accept=*/*\"]",
            "end"
        ]
    );
}

#[test]
fn a_body_with_trailers_and_unknown_frames_between() {
    let seen = run(&post_with_body(), 1000).unwrap();
    assert_eq!(
        seen,
        [
            "POST / Http3 Length(5) [\"host=example.com\", \"content-length=5\"]",
            "body:hello",
            "trailers [\"x-checksum=abc\"]",
            "end"
        ]
    );
}

proptest! {
    #[test]
    fn reads_in_any_pieces_give_the_same_events(step in 1usize..64) {
        prop_assert_eq!(run(&post_with_body(), step), run(&post_with_body(), 10_000));
    }

    #[test]
    fn a_body_in_any_data_frames_is_the_body_and_matches_content_length(
        body in proptest::collection::vec(b'a'..=b'z', 0..200),
        cuts in proptest::collection::vec(0usize..200, 0..8),
        declared_off_by in -1i64..=1,
    ) {
        let declared = body.len() as i64 + declared_off_by;
        prop_assume!(declared >= 0);
        let length = declared.to_string();
        let mut input = request(&[
            (":method", "POST"),
            (":scheme", "https"),
            (":authority", "example.com"),
            (":path", "/"),
            ("content-length", length.as_str()),
        ]);
        let mut cuts: Vec<usize> = cuts.into_iter().map(|cut| cut.min(body.len())).collect();
        cuts.extend([0, body.len()]);
        cuts.sort_unstable();
        for pair in cuts.windows(2) {
            write_data(&body[pair[0]..pair[1]], &mut input);
        }
        let outcome = run(&input, 5);
        if declared_off_by == 0 {
            let seen = outcome.unwrap();
            let text = String::from_utf8(body).unwrap();
            let expected = if text.is_empty() { None } else { Some(format!("body:{text}")) };
            prop_assert_eq!(seen.get(1).filter(|event| event.starts_with("body:")).cloned(), expected);
            prop_assert_eq!(seen.last().map(String::as_str), Some("end"));
        } else {
            prop_assert_eq!(
                outcome,
                Err(RequestError::Malformed(MalformedRequest::ContentLength))
            );
        }
    }

    #[test]
    fn arbitrary_input_never_panics(input in proptest::collection::vec(any::<u8>(), 0..256)) {
        let _ = run(&input, 7);
    }
}

#[test]
fn uppercase_field_names_are_malformed() {
    assert_eq!(
        malformed(&get_request(&[("Accept", "*/*")])),
        MalformedRequest::FieldSyntax
    );
}

#[test]
fn pseudo_headers_after_regular_fields_are_malformed() {
    let input = request(&[
        (":method", "GET"),
        (":scheme", "https"),
        ("accept", "*/*"),
        (":path", "/"),
    ]);
    assert_eq!(malformed(&input), MalformedRequest::PseudoHeader(":path"));
}

#[test]
fn unknown_and_response_pseudo_headers_are_malformed() {
    assert_eq!(
        malformed(&get_request(&[(":protocol", "x")])),
        MalformedRequest::PseudoHeader("unknown")
    );
    let mut fields = vec![(":status", "200")];
    fields.extend([(":method", "GET"), (":scheme", "https"), (":path", "/")]);
    assert_eq!(
        malformed(&request(&fields)),
        MalformedRequest::PseudoHeader(":status")
    );
}

#[test]
fn duplicate_pseudo_headers_are_malformed() {
    let input = request(&[
        (":method", "GET"),
        (":method", "GET"),
        (":scheme", "https"),
        (":path", "/"),
    ]);
    assert_eq!(malformed(&input), MalformedRequest::PseudoHeader(":method"));
}

#[test]
fn missing_required_pseudo_headers_are_malformed() {
    for (missing, fields) in [
        (":method", [(":scheme", "https"), (":path", "/")]),
        (":scheme", [(":method", "GET"), (":path", "/")]),
        (":path", [(":method", "GET"), (":scheme", "https")]),
    ] {
        assert_eq!(
            malformed(&request(&fields)),
            MalformedRequest::PseudoHeader(missing)
        );
    }
}

#[test]
fn connection_specific_fields_and_te_other_than_trailers_are_malformed() {
    for field in [
        ("connection", "close"),
        ("keep-alive", "5"),
        ("transfer-encoding", "chunked"),
        ("upgrade", "h2c"),
        ("te", "gzip"),
    ] {
        assert_eq!(
            malformed(&get_request(&[field])),
            MalformedRequest::ConnectionSpecific,
            "{field:?}"
        );
    }
    assert!(run(&get_request(&[("te", "trailers")]), 100).is_ok());
}

#[test]
fn authority_and_host_must_agree() {
    assert_eq!(
        malformed(&get_request(&[("host", "other.example")])),
        MalformedRequest::Authority
    );
    assert!(run(&get_request(&[("host", "example.com")]), 100).is_ok());
}

#[test]
fn connect_is_answered_not_tunnelled() {
    let input = request(&[(":method", "CONNECT"), (":authority", "example.com:443")]);
    assert_eq!(malformed(&input), MalformedRequest::Connect);
}

#[test]
fn more_data_than_content_length_is_malformed_when_the_frame_announces_it() {
    let mut input = get_request(&[("content-length", "2")]);
    write_data(b"abc", &mut input);
    // The frame's header alone is enough: its payload never has to arrive.
    let header_end = input.len() - 3;
    assert_eq!(
        malformed(&input[..header_end]),
        MalformedRequest::ContentLength
    );
}

#[test]
fn less_data_than_content_length_is_malformed_at_the_end() {
    let mut input = get_request(&[("content-length", "4")]);
    write_data(b"abc", &mut input);
    assert_eq!(malformed(&input), MalformedRequest::ContentLength);
}

#[test]
fn malformed_trailers_are_malformed() {
    let mut input = get_request(&[]);
    headers_frame(&[(":path", "/")], &mut input);
    assert_eq!(
        malformed(&input),
        MalformedRequest::PseudoHeader("trailers")
    );
    let mut input = get_request(&[]);
    headers_frame(&[("X-Sum", "1")], &mut input);
    assert_eq!(malformed(&input), MalformedRequest::FieldSyntax);
}

#[test]
fn data_before_headers_is_an_unexpected_frame() {
    let mut input = Vec::new();
    write_data(b"abc", &mut input);
    assert_eq!(
        protocol_error(&input),
        (ErrorCode::FrameUnexpected, Scope::Connection)
    );
}

#[test]
fn headers_or_data_after_trailers_are_unexpected_frames() {
    let mut input = get_request(&[]);
    headers_frame(&[("x-a", "1")], &mut input);
    headers_frame(&[("x-b", "2")], &mut input);
    assert_eq!(
        protocol_error(&input),
        (ErrorCode::FrameUnexpected, Scope::Connection)
    );
    let mut input = get_request(&[]);
    headers_frame(&[("x-a", "1")], &mut input);
    write_data(b"late", &mut input);
    assert_eq!(
        protocol_error(&input),
        (ErrorCode::FrameUnexpected, Scope::Connection)
    );
}

#[test]
fn control_frames_on_a_request_stream_are_unexpected() {
    let mut frames: Vec<Vec<u8>> = Vec::new();
    let mut settings = Vec::new();
    write_settings(&Settings::default(), &mut settings);
    frames.push(settings);
    let mut goaway = Vec::new();
    write_goaway(4, &mut goaway);
    frames.push(goaway);
    for frame_kind in [kind::MAX_PUSH_ID, kind::CANCEL_PUSH, kind::PUSH_PROMISE] {
        let mut frame = Vec::new();
        write_header(frame_kind, 1, &mut frame);
        frame.push(0);
        frames.push(frame);
    }
    for frame in frames {
        let mut input = get_request(&[]);
        input.extend_from_slice(&frame);
        assert_eq!(
            protocol_error(&input),
            (ErrorCode::FrameUnexpected, Scope::Connection),
            "{frame:02x?}"
        );
    }
}

#[test]
fn a_stream_that_ends_early_is_an_error() {
    // Inside a frame (§7.1).
    let input = get_request(&[]);
    assert_eq!(
        protocol_error(&input[..input.len() - 1]),
        (ErrorCode::FrameError, Scope::Connection)
    );
    // Before any HEADERS (§4.1), even after unknown frames.
    let mut input = Vec::new();
    write_header(0x21, 0, &mut input);
    assert_eq!(
        protocol_error(&input),
        (ErrorCode::RequestIncomplete, Scope::Stream)
    );
}

#[test]
fn a_field_section_past_the_limit_is_refused_with_its_own_error() {
    // `~` is longer in Huffman code than as is: the literal is sent raw.
    let long = "~".repeat(LIMIT);
    let input = get_request(&[("x-long", long.as_str())]);
    // The frame is past the limit: the reader refuses it before decoding.
    assert_eq!(
        protocol_error(&input),
        (ErrorCode::ExcessiveLoad, Scope::Stream)
    );
    // A section that fits but decodes past the limit (each field counts 32 more, §4.2.2).
    let many: Vec<(&str, &str)> = (0..LIMIT / 30).map(|_| ("x", "")).collect();
    let input = get_request(&many);
    assert!(input.len() < LIMIT);
    let error = run(&input, 1000).unwrap_err();
    assert_eq!(error, RequestError::FieldSectionTooLarge);
    assert_eq!(error.error().code, ErrorCode::ExcessiveLoad);
}

#[test]
fn a_blocked_head_waits_for_the_encoder_stream_then_resumes() {
    let mut decoder = Decoder::new(220, 1);
    let mut stream = RequestStream::new(4, LIMIT);
    // :method GET, :scheme https (static), then :authority and :path from the dynamic table
    // (RFC 9204 Appendix B.2's section, its entries not yet inserted).
    let mut input = Vec::new();
    write_headers(&hex("0381 d1 d7 10 11"), &mut input);
    write_data(b"ok", &mut input);
    let (used, event) = read_event(&mut stream, &mut decoder, &input);
    assert_eq!(event, None);
    assert!(stream.is_blocked());
    // Nothing more is read while blocked, and the stream's end waits too.
    assert_eq!(
        stream.read(&mut decoder, &input[used..]).unwrap(),
        (0, None)
    );
    decoder
        .read_encoder_stream(&hex(
            "3fbd01 c00f 7777 772e 6578 616d 706c 652e 636f 6d c10c 2f73 616d 706c 652f 7061 7468",
        ))
        .unwrap();
    assert_eq!(decoder.take_unblocked(), [4]);
    let Some(Event::Head(head)) = stream.resume(&mut decoder).unwrap() else {
        panic!("no head");
    };
    assert_eq!(
        (head.method, &*head.target, head.version, head.body),
        (
            Method::Get,
            "/sample/path",
            Version::Http3,
            BodyFraming::Chunked
        )
    );
    let mut seen = Vec::new();
    let mut at = used;
    while at < input.len() {
        let (used, event) = stream.read(&mut decoder, &input[at..]).unwrap();
        at += used;
        if let Some(Event::Body(piece)) = event {
            seen.extend_from_slice(piece);
        }
    }
    assert_eq!(seen, b"ok");
    assert_eq!(stream.end(), Ok(true));
}

#[test]
fn an_abandoned_blocked_stream_is_cancelled_at_the_encoder() {
    let mut decoder = Decoder::new(220, 1);
    let mut stream = RequestStream::new(4, LIMIT);
    let mut input = Vec::new();
    write_headers(&hex("0381 d1 d7 10 11"), &mut input);
    read_event(&mut stream, &mut decoder, &input);
    assert_eq!(stream.end(), Ok(false));
    stream.abandon(&mut decoder);
    // Stream Cancellation for stream 4 (RFC 9204 §4.4.2), and the slot is free again.
    assert_eq!(decoder.take_decoder_stream(), [0x44]);
    let mut other = RequestStream::new(8, LIMIT);
    read_event(&mut other, &mut decoder, &input);
    assert!(other.is_blocked());
}

/// Reads until an event comes or nothing more is used.
fn read_event(
    stream: &mut RequestStream,
    decoder: &mut Decoder,
    input: &[u8],
) -> (usize, Option<String>) {
    let mut at = 0;
    loop {
        let (used, event) = stream.read(decoder, &input[at..]).unwrap();
        at += used;
        if let Some(event) = event {
            let mut seen = Vec::new();
            note(&mut seen, event);
            return (at, seen.pop());
        }
        if used == 0 {
            return (at, None);
        }
    }
}

fn hex(text: &str) -> Vec<u8> {
    let digits: Vec<u8> = text.bytes().filter(u8::is_ascii_hexdigit).collect();
    digits
        .chunks(2)
        .map(|pair| u8::from_str_radix(std::str::from_utf8(pair).unwrap(), 16).unwrap())
        .collect()
}

#[test]
fn a_response_is_status_first_without_connection_fields_then_data() {
    let mut head = Head::new(404);
    head.push("Content-Length", b"3");
    head.push("Connection", b"close");
    head.push("Transfer-Encoding", b"chunked");
    head.push("X-Kept", b"1");
    let mut out = Vec::new();
    write_response_head(&Encoder::new(), &head, None, &mut out).unwrap();
    write_data(b"abc", &mut out);

    let mut reader = super::frame::FrameReader::new(super::frame::StreamKind::Request, LIMIT);
    let (header, _) = reader.read(&out).unwrap();
    let (payload, frame) = reader.read(&out[header..]).unwrap();
    let used = header + payload;
    let Some(super::frame::Frame::Headers(section)) = frame else {
        panic!("no HEADERS");
    };
    let mut decoded = Vec::new();
    let result = Decoder::new(0, 0)
        .decode_section(0, &section, LIMIT, &mut |n, v| {
            decoded.push(format!(
                "{}: {}",
                String::from_utf8_lossy(n),
                String::from_utf8_lossy(v)
            ));
        })
        .unwrap();
    assert!(matches!(result, Section::Decoded { .. }));
    assert_eq!(decoded, [":status: 404", "content-length: 3", "x-kept: 1"]);
    let rest = &out[used..];
    assert_eq!(rest[0], 0x00);
    assert_eq!(&rest[2..], b"abc");
}

fn control(input: &[u8]) -> Result<Vec<ControlEvent>, (ErrorCode, Scope)> {
    let mut stream = ControlStream::new();
    let mut events = Vec::new();
    let mut at = 0;
    // One octet at a time: the rules hold across any split.
    let mut end = 0;
    while at < input.len() {
        end = (end + 1).min(input.len()).max(at);
        let (used, event) = stream
            .read(&input[at..end])
            .map_err(|error| (error.code, error.scope))?;
        at += used;
        events.extend(event);
        if used == 0 && end == input.len() {
            break;
        }
    }
    Ok(events)
}

fn settings_frame() -> Vec<u8> {
    let mut out = Vec::new();
    write_settings(&Settings::default(), &mut out);
    out
}

fn id_frame(frame_kind: u64, id: u64, out: &mut Vec<u8>) {
    write_header(frame_kind, varint::len(id) as u64, out);
    varint::encode(id, out);
}

#[test]
fn the_control_stream_begins_with_settings() {
    let mut input = Vec::new();
    write_goaway(0, &mut input);
    assert_eq!(
        control(&input),
        Err((ErrorCode::MissingSettings, Scope::Connection))
    );
    assert_eq!(
        control(&settings_frame()),
        Ok(vec![ControlEvent::Settings(Settings::default())])
    );
}

#[test]
fn a_second_settings_or_a_request_frame_on_the_control_stream_is_unexpected() {
    let mut twice = settings_frame();
    twice.extend(settings_frame());
    assert_eq!(
        control(&twice),
        Err((ErrorCode::FrameUnexpected, Scope::Connection))
    );
    let mut data = settings_frame();
    write_data(b"x", &mut data);
    assert_eq!(
        control(&data),
        Err((ErrorCode::FrameUnexpected, Scope::Connection))
    );
    let mut headers = settings_frame();
    headers_frame(&[("x", "y")], &mut headers);
    assert_eq!(
        control(&headers),
        Err((ErrorCode::FrameUnexpected, Scope::Connection))
    );
}

#[test]
fn goaway_ids_may_not_increase() {
    let mut input = settings_frame();
    write_goaway(8, &mut input);
    write_goaway(8, &mut input);
    write_goaway(4, &mut input);
    assert_eq!(
        control(&input),
        Ok(vec![
            ControlEvent::Settings(Settings::default()),
            ControlEvent::GoAway(8),
            ControlEvent::GoAway(8),
            ControlEvent::GoAway(4),
        ])
    );
    write_goaway(5, &mut input);
    assert_eq!(
        control(&input),
        Err((ErrorCode::IdError, Scope::Connection))
    );
}

#[test]
fn max_push_id_may_not_decrease_and_no_push_can_be_cancelled() {
    let mut input = settings_frame();
    id_frame(kind::MAX_PUSH_ID, 3, &mut input);
    id_frame(kind::MAX_PUSH_ID, 3, &mut input);
    assert!(control(&input).is_ok());
    id_frame(kind::MAX_PUSH_ID, 2, &mut input);
    assert_eq!(
        control(&input),
        Err((ErrorCode::IdError, Scope::Connection))
    );

    let mut input = settings_frame();
    id_frame(kind::CANCEL_PUSH, 0, &mut input);
    assert_eq!(
        control(&input),
        Err((ErrorCode::IdError, Scope::Connection))
    );
}

#[test]
fn closing_the_control_stream_is_a_critical_error() {
    let error = ControlStream::new().closed();
    assert_eq!(
        (error.code, error.scope),
        (ErrorCode::ClosedCriticalStream, Scope::Connection)
    );
}

#[test]
fn an_https_request_needs_an_authority_or_a_host() {
    // RFC 9114 §4.3.1: http and https have a mandatory authority, so one of the two must be
    // there (HTTP/2 only says clients should send :authority).
    let bare = [(":method", "GET"), (":scheme", "https"), (":path", "/")];
    assert_eq!(malformed(&request(&bare)), MalformedRequest::Authority);
    let mut with_host = bare.to_vec();
    with_host.push(("host", "example.com"));
    assert!(run(&request(&with_host), 100).is_ok());
    // "If these fields are present, they MUST NOT be empty."
    let mut empty_host = bare.to_vec();
    empty_host.push(("host", ""));
    assert_eq!(
        malformed(&request(&empty_host)),
        MalformedRequest::Authority
    );
    assert_eq!(
        malformed(&request(&[
            (":method", "GET"),
            (":scheme", "https"),
            (":authority", ""),
            (":path", "/")
        ])),
        MalformedRequest::Authority
    );
    let mut other_scheme = bare.to_vec();
    other_scheme[1].1 = "foo";
    assert!(run(&request(&other_scheme), 100).is_ok());
}
