//! Tests of the response-head parser: examples, the smuggling-minded corpus, limits, and
//! properties (never a panic; whole and byte-by-byte feeding agree).

use proptest::prelude::*;

use super::*;
use crate::token::trim_ows;

fn parse_whole(input: &[u8]) -> Result<ResponseParse, UpstreamError> {
    ResponseParser::new(Limits::default()).parse(input)
}

fn complete(input: &[u8]) -> (ResponseHead, usize) {
    match parse_whole(input) {
        Ok(ResponseParse::Complete { head, len }) => (head, len),
        other => panic!(
            "expected a complete head for {}, got {other:?}",
            input.escape_ascii()
        ),
    }
}

/// Feeds `input` one byte more per call, as a slow upstream would, into one parser.
fn parse_bytewise(input: &[u8], limits: Limits) -> Result<ResponseParse, UpstreamError> {
    let mut parser = ResponseParser::new(limits);
    for end in 1..input.len() {
        match parser.parse(&input[..end])? {
            ResponseParse::Partial => {}
            complete @ ResponseParse::Complete { .. } => return Ok(complete),
        }
    }
    parser.parse(input)
}

fn names_and_values(head: &ResponseHead) -> Vec<(&str, &[u8])> {
    head.headers
        .iter()
        .map(|header| (&*header.name, &*header.value))
        .collect()
}

#[test]
fn a_simple_response() {
    let input = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length:  5 \r\n\r\nhello";
    let (head, len) = complete(input);
    assert_eq!(len, input.len() - 5);
    assert_eq!(head.version, Version::Http11);
    assert_eq!(head.status, 200);
    assert_eq!(&*head.reason, "OK");
    assert_eq!(
        names_and_values(&head),
        vec![
            ("Content-Type", &b"text/plain"[..]),
            ("Content-Length", &b"5"[..])
        ]
    );
    assert_eq!(head.header("content-type"), Some(&b"text/plain"[..]));
    assert_eq!(head.content_length(), Some(5));
    assert!(head.keep_alive);
}

#[test]
fn partial_until_the_empty_line() {
    let mut parser = ResponseParser::new(Limits::default());
    for prefix in [
        &b""[..],
        b"HTTP/1.1 2",
        b"HTTP/1.1 204 No Content\r",
        b"HTTP/1.1 204 No Content\r\n",
        b"HTTP/1.1 204 No Content\r\nX: y\r\n\r",
    ] {
        assert_eq!(
            parser.parse(prefix),
            Ok(ResponseParse::Partial),
            "{prefix:?}"
        );
    }
    let done = parser.parse(b"HTTP/1.1 204 No Content\r\nX: y\r\n\r\n");
    assert!(
        matches!(done, Ok(ResponseParse::Complete { len: 33, .. })),
        "{done:?}"
    );
}

#[test]
fn reason_phrases() {
    let (head, _) = complete(b"HTTP/1.1 200 \r\n\r\n");
    assert_eq!(&*head.reason, "");
    // The SP before an empty reason is often missing in practice; nothing is ambiguous.
    let (head, _) = complete(b"HTTP/1.1 200\r\n\r\n");
    assert_eq!((head.status, &*head.reason), (200, ""));
    let (head, _) = complete(b"HTTP/1.0 404 Not \tFound  \r\n\r\n");
    assert_eq!(&*head.reason, "Not \tFound  ");
    // obs-text is allowed and replaced, since the reason is only informative.
    let (head, _) = complete(b"HTTP/1.1 200 D\xfcrfen\r\n\r\n");
    assert_eq!(&*head.reason, "D\u{fffd}rfen");
    let (head, _) = complete(b"HTTP/1.1 599 x\r\n\r\n");
    assert_eq!(head.status, 599);
}

#[test]
fn persistence_follows_version_and_connection() {
    let cases: &[(&[u8], bool)] = &[
        (b"HTTP/1.1 200 OK\r\n\r\n", true),
        (b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n", false),
        (b"HTTP/1.1 200 OK\r\nConnection: X, CLOSE\r\n\r\n", false),
        (b"HTTP/1.0 200 OK\r\n\r\n", false),
        (b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\n\r\n", true),
        (
            b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nConnection: close\r\n\r\n",
            false,
        ),
    ];
    for (input, keep_alive) in cases {
        assert_eq!(
            complete(input).0.keep_alive,
            *keep_alive,
            "{}",
            input.escape_ascii()
        );
    }
}

#[test]
fn an_interim_response_then_the_final_one() {
    let mut buf = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </s.css>\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n".to_vec();
    let mut parser = ResponseParser::new(Limits::default());
    let mut statuses = Vec::new();
    while let Ok(ResponseParse::Complete { head, len }) = parser.parse(&buf) {
        statuses.push((head.status, head.is_interim()));
        buf.drain(..len);
        if !head.is_interim() {
            break;
        }
    }
    assert_eq!(statuses, vec![(100, true), (103, true), (201, false)]);
    assert!(buf.is_empty());
    let (head, _) = complete(b"HTTP/1.1 101 Switching Protocols\r\n\r\n");
    assert!(!head.is_interim());
}

#[test]
fn field_helpers() {
    let (head, _) = complete(
        b"HTTP/1.1 200 OK\r\nSet-Cookie: a=1\r\nConnection: Upgrade, x-hop\r\nset-cookie: b=2\r\nconnection: keep-alive\r\n\r\n",
    );
    let cookies: Vec<&[u8]> = head.headers_named("SET-COOKIE").collect();
    assert_eq!(cookies, vec![&b"a=1"[..], b"b=2"]);
    assert_eq!(head.header("x-missing"), None);
    assert!(head.connection_has("upgrade"));
    assert!(head.connection_has("X-Hop"));
    assert!(head.connection_has("keep-alive"));
    assert!(!head.connection_has("close"));
    assert!(!head.connection_has("x-ho"));
}

#[test]
fn a_switch_is_accepted_only_to_the_protocol_asked_for() {
    let cases: &[(&[u8], bool)] = &[
        (
            b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: WebSocket\r\nConnection: Upgrade\r\n\r\n",
            true,
        ),
        (
            b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket/13\r\nConnection: x, upgrade\r\n\r\n",
            true,
        ),
        // Another protocol, no Connection: upgrade, no Upgrade, or not a 101.
        (
            b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\nConnection: Upgrade\r\n\r\n",
            false,
        ),
        (
            b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n",
            false,
        ),
        (
            b"HTTP/1.1 101 Switching Protocols\r\nConnection: upgrade\r\n\r\n",
            false,
        ),
        (
            b"HTTP/1.1 200 OK\r\nUpgrade: websocket\r\nConnection: upgrade\r\n\r\n",
            false,
        ),
    ];
    for (input, accepted) in cases {
        assert_eq!(
            complete(input).0.upgrades_to("websocket"),
            *accepted,
            "{}",
            input.escape_ascii()
        );
    }
}

#[test]
fn end_to_end_headers_leave_out_hop_by_hop_and_framing() {
    let (head, _) = complete(
        b"HTTP/1.1 200 OK\r\n\
          Content-Type: text/html\r\n\
          Connection: keep-alive, X-Internal\r\n\
          Keep-Alive: timeout=5\r\n\
          X-Internal: secret\r\n\
          Transfer-Encoding: chunked\r\n\
          Trailer: X-Sum\r\n\
          Proxy-Authenticate: Basic\r\n\
          Upgrade: h2c\r\n\
          Set-Cookie: a=1\r\n\
          Cache-Control: no-store\r\n\r\n",
    );
    let kept: Vec<&str> = head.end_to_end_headers().map(|h| &*h.name).collect();
    assert_eq!(kept, vec!["Content-Type", "Set-Cookie", "Cache-Control"]);

    let (head, _) =
        complete(b"HTTP/1.1 304 Not Modified\r\nETag: \"x\"\r\nContent-Length: 10\r\n\r\n");
    let kept: Vec<&str> = head.end_to_end_headers().map(|h| &*h.name).collect();
    assert_eq!(kept, vec!["ETag"]);
    assert_eq!(head.content_length(), Some(10));
}

/// Each input is a response-splitting or desync vector, or a syntax fault: refused whole and
/// byte by byte with the same error, never passed on.
#[test]
fn smuggling_corpus() {
    let cases: &[(&[u8], UpstreamError)] = &[
        // CL.TE and TE.CL: two framings, two hops may each pick another.
        (
            b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
            UpstreamError::ContentLengthWithTransferEncoding,
        ),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n",
            UpstreamError::ContentLengthWithTransferEncoding,
        ),
        (
            b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
            UpstreamError::ConflictingContentLength,
        ),
        (
            b"HTTP/1.1 200 OK\r\nContent-Length: 5, 6\r\n\r\n",
            UpstreamError::ConflictingContentLength,
        ),
        (
            b"HTTP/1.1 200 OK\r\nContent-Length: +5\r\n\r\n",
            UpstreamError::InvalidContentLength,
        ),
        (
            b"HTTP/1.1 200 OK\r\nContent-Length: 5 5\r\n\r\n",
            UpstreamError::InvalidContentLength,
        ),
        (
            b"HTTP/1.1 200 OK\r\nContent-Length: 0x10\r\n\r\n",
            UpstreamError::InvalidContentLength,
        ),
        (
            b"HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\n",
            UpstreamError::InvalidContentLength,
        ),
        (
            b"HTTP/1.1 200 OK\r\nContent-Length:\r\n\r\n",
            UpstreamError::InvalidContentLength,
        ),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: xchunked\r\n\r\n",
            UpstreamError::TransferEncodingNotChunked,
        ),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\n",
            UpstreamError::TransferEncodingNotChunked,
        ),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: identity\r\n\r\n",
            UpstreamError::TransferEncodingNotChunked,
        ),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
            UpstreamError::TransferEncodingNotChunked,
        ),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n\r\n",
            UpstreamError::TransferEncodingNotChunked,
        ),
        (
            b"HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
            UpstreamError::TransferEncodingInHttp10,
        ),
        // Spaces: before the colon, in the name, a folded continuation, a line that starts
        // with whitespace.
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding : chunked\r\n\r\n",
            UpstreamError::SpaceBeforeColon,
        ),
        (
            b"HTTP/1.1 200 OK\r\nContent-Length\t: 5\r\n\r\n",
            UpstreamError::SpaceBeforeColon,
        ),
        (
            b"HTTP/1.1 200 OK\r\nTransfer Encoding: chunked\r\n\r\n",
            UpstreamError::BadHeaderName,
        ),
        (
            b"HTTP/1.1 200 OK\r\nX-A: 1\r\n Transfer-Encoding: chunked\r\n\r\n",
            UpstreamError::ObsFold,
        ),
        (
            b"HTTP/1.1 200 OK\r\nX-A: 1\r\n\tfolded\r\n\r\n",
            UpstreamError::ObsFold,
        ),
        (
            b"HTTP/1.1 200 OK\r\n Content-Length: 5\r\n\r\n",
            UpstreamError::ObsFold,
        ),
        // Control bytes: NUL, a bare CR (which some hops read as a line end), DEL, VT.
        (
            b"HTTP/1.1 200 OK\r\nX: a\0b\r\n\r\n",
            UpstreamError::InvalidHeaderValue,
        ),
        (
            b"HTTP/1.1 200 OK\r\nX: a\x7fb\r\n\r\n",
            UpstreamError::InvalidHeaderValue,
        ),
        (
            b"HTTP/1.1 200 OK\r\nX: a\x0bb\r\n\r\n",
            UpstreamError::InvalidHeaderValue,
        ),
        (
            b"HTTP/1.1 200 OK\r\nX: a\rContent-Length: 0\r\n\r\n",
            UpstreamError::BareCr,
        ),
        (
            b"HTTP/1.1 200 OK\rContent-Length: 0\r\n\r\n",
            UpstreamError::BareCr,
        ),
        (
            b"HTTP/1.1 200 OK\r\nX\0Y: z\r\n\r\n",
            UpstreamError::BadHeaderName,
        ),
        (
            b"HTTP/1.1 200 OK\r\n: z\r\n\r\n",
            UpstreamError::BadHeaderName,
        ),
        (
            b"HTTP/1.1 200 OK\r\nNoColon\r\n\r\n",
            UpstreamError::MissingColon,
        ),
        // Bare LF, in each place a line ends.
        (b"HTTP/1.1 200 OK\n\r\n", UpstreamError::BareLf),
        (b"HTTP/1.1 200 OK\r\nX: y\n\r\n", UpstreamError::BareLf),
        (b"HTTP/1.1 200 OK\r\nX: y\r\n\n", UpstreamError::BareLf),
        // Status lines.
        (
            b"HTTP/2.0 200 OK\r\n\r\n",
            UpstreamError::UnsupportedVersion,
        ),
        (
            b"HTTP/1.2 200 OK\r\n\r\n",
            UpstreamError::UnsupportedVersion,
        ),
        (
            b"HTTP/0.9 200 OK\r\n\r\n",
            UpstreamError::UnsupportedVersion,
        ),
        (
            b"http/1.1 200 OK\r\n\r\n",
            UpstreamError::MalformedStatusLine,
        ),
        (b"HTTP/1.1  200 OK\r\n\r\n", UpstreamError::InvalidStatus),
        (b"HTTP/1.1 20 OK\r\n\r\n", UpstreamError::InvalidStatus),
        (b"HTTP/1.1 2000 OK\r\n\r\n", UpstreamError::InvalidStatus),
        (b"HTTP/1.1 099 OK\r\n\r\n", UpstreamError::InvalidStatus),
        (b"HTTP/1.1 600 OK\r\n\r\n", UpstreamError::InvalidStatus),
        (b"HTTP/1.1 abc OK\r\n\r\n", UpstreamError::InvalidStatus),
        (
            b"HTTP/1.1 200OK\r\n\r\n",
            UpstreamError::MalformedStatusLine,
        ),
        (b"HTTP/1.1\r\n\r\n", UpstreamError::MalformedStatusLine),
        (
            b"HTTP/1.1 200 O\x01K\r\n\r\n",
            UpstreamError::InvalidReasonPhrase,
        ),
        (
            b"\r\nHTTP/1.1 200 OK\r\n\r\n",
            UpstreamError::MalformedStatusLine,
        ),
        (b"<html>hello</html>", UpstreamError::MalformedStatusLine),
        // An HTTP/2 server's first frame (SETTINGS) to an HTTP/1.1 request.
        (
            b"\x00\x00\x12\x04\x00\x00\x00\x00\x00",
            UpstreamError::MalformedStatusLine,
        ),
    ];
    for (input, expected) in cases {
        assert_eq!(
            parse_whole(input),
            Err(*expected),
            "{}",
            input.escape_ascii()
        );
        assert_eq!(
            parse_bytewise(input, Limits::default()),
            Err(*expected),
            "bytewise {}",
            input.escape_ascii()
        );
    }
}

#[test]
fn identical_content_lengths_fold_into_one() {
    for input in [
        &b"HTTP/1.1 200 OK\r\nContent-Length: 7\r\nContent-Length: 7\r\n\r\n"[..],
        b"HTTP/1.1 200 OK\r\nContent-Length: 7, 7\r\n\r\n",
    ] {
        assert_eq!(complete(input).0.content_length(), Some(7));
    }
}

/// Something other than HTTP is refused on its first bytes, before any line end arrives, so
/// the exchange answers 502 at once instead of at the read timeout.
#[test]
fn a_hopeless_start_is_refused_before_its_line_end() {
    let cases: &[(&[u8], UpstreamError)] = &[
        (b"SSH-2.0-OpenSSH", UpstreamError::MalformedStatusLine),
        (b"\x16\x03\x01", UpstreamError::MalformedStatusLine),
        (b"HTTP/2", UpstreamError::UnsupportedVersion),
        (b"HTTP/1.1x", UpstreamError::MalformedStatusLine),
        (b"HTTP/1.9", UpstreamError::UnsupportedVersion),
    ];
    for (input, expected) in cases {
        assert_eq!(
            parse_whole(input),
            Err(*expected),
            "{}",
            input.escape_ascii()
        );
    }
}

fn small_limits() -> Limits {
    Limits {
        max_head_bytes: 48,
        max_headers: 2,
    }
}

#[test]
fn the_head_limit_applies_to_partial_input() {
    let mut input = b"HTTP/1.1 200 OK\r\nX: ".to_vec();
    input.resize(48, b'a');
    let mut parser = ResponseParser::new(small_limits());
    assert_eq!(parser.parse(&input), Ok(ResponseParse::Partial));
    input.push(b'a');
    assert_eq!(parser.parse(&input), Err(UpstreamError::HeadTooLarge));

    // Exactly at the limit, final CRLF included, is fine.
    let mut input = b"HTTP/1.1 200 OK\r\nX: ".to_vec();
    input.resize(44, b'a');
    input.extend_from_slice(b"\r\n\r\n");
    assert_eq!(input.len(), 48);
    let (_, len) = match ResponseParser::new(small_limits()).parse(&input) {
        Ok(ResponseParse::Complete { head, len }) => (head, len),
        other => panic!("{other:?}"),
    };
    assert_eq!(len, 48);
    input.insert(20, b'a');
    assert_eq!(
        ResponseParser::new(small_limits()).parse(&input),
        Err(UpstreamError::HeadTooLarge)
    );
}

#[test]
fn the_field_count_is_limited() {
    let input = b"HTTP/1.1 200 OK\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n";
    assert_eq!(
        ResponseParser::new(Limits {
            max_head_bytes: 1000,
            max_headers: 2
        })
        .parse(input),
        Err(UpstreamError::TooManyHeaders)
    );
    assert!(matches!(
        ResponseParser::new(Limits {
            max_head_bytes: 1000,
            max_headers: 3
        })
        .parse(input),
        Ok(ResponseParse::Complete { .. })
    ));
}

#[test]
fn a_replaced_buffer_restarts_instead_of_panicking() {
    let mut parser = ResponseParser::new(Limits::default());
    assert_eq!(
        parser.parse(b"HTTP/1.1 200 OK\r\nX-Long: aaaaaaaa"),
        Ok(ResponseParse::Partial)
    );
    let (head, len) = match parser.parse(b"HTTP/1.1 204 \r\n\r\n") {
        Ok(ResponseParse::Complete { head, len }) => (head, len),
        other => panic!("{other:?}"),
    };
    assert_eq!((head.status, len), (204, 17));
}

#[test]
fn encode_round_trips() {
    let (head, _) = complete(
        b"HTTP/1.0 302 Found \r\nLocation:\t/x \r\nEmpty:\r\nConnection: keep-alive\r\n\r\n",
    );
    let mut encoded = Vec::new();
    head.encode(&mut encoded);
    assert_eq!(
        encoded,
        b"HTTP/1.0 302 Found \r\nLocation: /x\r\nEmpty: \r\nConnection: keep-alive\r\n\r\n"
    );
    assert_eq!(complete(&encoded), (head, encoded.len()));
}

/// A generated valid response head and what it must parse to.
#[derive(Debug, Clone)]
struct Generated {
    bytes: Vec<u8>,
    version: Version,
    status: u16,
    reason: String,
    headers: Vec<(String, Vec<u8>)>,
    keep_alive: bool,
}

fn reserved(name: &str) -> bool {
    ["content-length", "transfer-encoding", "connection"]
        .iter()
        .any(|reserved| name.eq_ignore_ascii_case(reserved))
}

fn generated_head() -> impl Strategy<Value = Generated> {
    let version = prop_oneof![Just(Version::Http10), Just(Version::Http11)];
    let fields = prop::collection::vec(
        (
            "[A-Za-z][A-Za-z0-9!#$%&'*+.^_`|~-]{0,15}".prop_filter("reserved", |n| !reserved(n)),
            prop::collection::vec(prop_oneof![0x20u8..0x7f, Just(b'\t'), 0x80u8..=0xff], 0..30)
                .prop_map(|value| trim_ows(&value).to_vec()),
        ),
        0..8,
    );
    let framing = prop_oneof![
        Just(None),
        any::<u64>().prop_map(|n| Some(("Content-Length", n.to_string()))),
        Just(Some(("Transfer-Encoding", "chunked".to_string()))),
    ];
    let connection = prop_oneof![Just(None), Just(Some("close")), Just(Some("keep-alive"))];
    (
        version,
        100u16..600,
        "[ -~\t]{0,20}",
        fields,
        framing,
        connection,
    )
        .prop_map(
            |(version, status, reason, mut headers, framing, connection)| {
                let mut fields: Vec<(String, Vec<u8>)> = Vec::new();
                fields.append(&mut headers);
                if let Some((name, value)) = framing {
                    if !(version == Version::Http10 && name == "Transfer-Encoding") {
                        fields.push((name.to_string(), value.into_bytes()));
                    }
                }
                if let Some(option) = connection {
                    fields.push(("Connection".to_string(), option.as_bytes().to_vec()));
                }
                let keep_alive = match (version, connection) {
                    (_, Some("close")) => false,
                    (Version::Http11 | Version::Http2 | Version::Http3, _) => true,
                    (Version::Http10, option) => option == Some("keep-alive"),
                };
                let mut bytes = format!("{} {status} {reason}\r\n", version.as_str()).into_bytes();
                for (name, value) in &fields {
                    bytes.extend_from_slice(name.as_bytes());
                    bytes.extend_from_slice(b":\t ");
                    bytes.extend_from_slice(value);
                    bytes.extend_from_slice(b" \r\n");
                }
                bytes.extend_from_slice(b"\r\n");
                Generated {
                    bytes,
                    version,
                    status,
                    reason,
                    headers: fields,
                    keep_alive,
                }
            },
        )
}

proptest! {
    #[test]
    fn generated_heads_parse_to_their_parts(generated in generated_head()) {
        let (head, len) = complete(&generated.bytes);
        prop_assert_eq!(len, generated.bytes.len());
        prop_assert_eq!(head.version, generated.version);
        prop_assert_eq!(head.status, generated.status);
        prop_assert_eq!(&*head.reason, generated.reason.as_str());
        let headers: Vec<(String, Vec<u8>)> = head
            .headers
            .iter()
            .map(|h| (h.name.to_string(), h.value.to_vec()))
            .collect();
        prop_assert_eq!(&headers, &generated.headers);
        prop_assert_eq!(head.keep_alive, generated.keep_alive);

        let mut encoded = Vec::new();
        head.encode(&mut encoded);
        prop_assert_eq!(complete(&encoded), (head, encoded.len()));
    }

    #[test]
    fn split_feeding_matches_whole(generated in generated_head(), split in any::<prop::sample::Index>()) {
        let whole = parse_whole(&generated.bytes);
        prop_assert_eq!(&parse_bytewise(&generated.bytes, Limits::default()), &whole);
        let at = split.index(generated.bytes.len());
        let mut parser = ResponseParser::new(Limits::default());
        prop_assert_eq!(parser.parse(&generated.bytes[..at]), Ok(ResponseParse::Partial));
        prop_assert_eq!(parser.parse(&generated.bytes), whole);
    }

    #[test]
    fn arbitrary_bytes_agree_whole_and_bytewise(input in prop::collection::vec(any::<u8>(), 0..200)) {
        let limits = Limits { max_head_bytes: 120, max_headers: 4 };
        let whole = ResponseParser::new(limits).parse(&input);
        prop_assert_eq!(parse_bytewise(&input, limits), whole);
    }

    /// Near-valid heads (the bytes a head is made of, plus faults), so every check is met at
    /// every place a read may end, against limits of every size.
    #[test]
    fn near_valid_heads_agree_whole_and_bytewise(
        input in prop::collection::vec(
            prop::sample::select(&b"HTP/1.0 2:\r\n\t\x00\x8aCL-"[..]),
            0..80,
        ),
        head_limit in 0usize..90,
        max_headers in 0usize..4,
    ) {
        let mut bytes = b"HTTP/1.".to_vec();
        bytes.extend_from_slice(&input);
        let limits = Limits { max_head_bytes: head_limit, max_headers };
        let whole = ResponseParser::new(limits).parse(&bytes);
        prop_assert_eq!(parse_bytewise(&bytes, limits), whole.clone());
        if whole.is_ok() {
            for end in 0..bytes.len() {
                prop_assert!(ResponseParser::new(limits).parse(&bytes[..end]).is_ok());
            }
        }
    }
}
