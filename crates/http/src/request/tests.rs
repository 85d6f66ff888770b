//! Tests of the request-head parser: examples, the smuggling corpus, limits, and properties.

use proptest::prelude::*;

use super::*;
use crate::token::trim_ows;

fn parse_whole(input: &[u8]) -> Result<Parse, ParseError> {
    HeadParser::new(Limits::default()).parse(input)
}

fn complete(input: &[u8]) -> (RequestHead, usize) {
    match parse_whole(input) {
        Ok(Parse::Complete { head, len }) => (head, len),
        other => panic!("expected a complete head for {input:?}, got {other:?}"),
    }
}

/// Feeds `input` one byte more per call, as a slow client would, into one parser.
fn parse_bytewise(input: &[u8], limits: Limits) -> Result<Parse, ParseError> {
    let mut parser = HeadParser::new(limits);
    for end in 1..input.len() {
        match parser.parse(&input[..end])? {
            Parse::Partial => {}
            complete @ Parse::Complete { .. } => return Ok(complete),
        }
    }
    parser.parse(input)
}

#[test]
fn simple_get() {
    let input = b"GET /index.html?x=1 HTTP/1.1\r\nHost: example.com\r\nAccept: */*\r\n\r\nNEXT";
    let (head, len) = complete(input);
    assert_eq!(len, input.len() - 4);
    assert_eq!(head.method, Method::Get);
    assert_eq!(&*head.target, "/index.html?x=1");
    assert_eq!(head.version, Version::Http11);
    assert_eq!(head.host(), Some("example.com"));
    assert_eq!(head.header("ACCEPT"), Some(&b"*/*"[..]));
    assert_eq!(head.body, BodyFraming::None);
    assert!(head.keep_alive);
    assert!(!head.expect_continue);
}

#[test]
fn partial_until_the_empty_line() {
    let mut parser = HeadParser::new(Limits::default());
    assert_eq!(parser.parse(b""), Ok(Parse::Partial));
    assert_eq!(parser.parse(b"GET / HTTP/1.1\r\n"), Ok(Parse::Partial));
    assert_eq!(
        parser.parse(b"GET / HTTP/1.1\r\nHost: a\r\n\r"),
        Ok(Parse::Partial)
    );
    let done = parser.parse(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n");
    assert!(
        matches!(done, Ok(Parse::Complete { len: 27, .. })),
        "{done:?}"
    );
}

#[test]
fn leading_empty_lines_and_bare_lf() {
    let input = b"\r\n\nGET / HTTP/1.0\nX:  padded value \t\n\n";
    let (head, len) = complete(input);
    assert_eq!(len, input.len());
    assert_eq!(head.version, Version::Http10);
    assert_eq!(head.header("x"), Some(&b"padded value"[..]));
    assert!(!head.keep_alive);
    assert_eq!(head.host(), None);
}

#[test]
fn pipelined_requests_after_draining() {
    let mut buf = b"GET /a HTTP/1.1\r\nHost: h\r\n\r\nGET /b HTTP/1.1\r\nHost: h\r\n\r\n".to_vec();
    let mut parser = HeadParser::new(Limits::default());
    let mut targets = Vec::new();
    while let Ok(Parse::Complete { head, len }) = parser.parse(&buf) {
        targets.push(head.target);
        buf.drain(..len);
        parser.reset();
    }
    assert_eq!(targets, vec![Box::from("/a"), Box::from("/b")]);
    assert!(buf.is_empty());
}

#[test]
fn persistence_rules() {
    let cases: &[(&[u8], bool)] = &[
        (b"GET / HTTP/1.1\r\nHost: h\r\n\r\n", true),
        (
            b"GET / HTTP/1.1\r\nHost: h\r\nConnection: Close\r\n\r\n",
            false,
        ),
        (
            b"GET / HTTP/1.1\r\nHost: h\r\nConnection: keep-alive, close\r\n\r\n",
            false,
        ),
        (b"GET / HTTP/1.0\r\n\r\n", false),
        (b"GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n", true),
        (
            b"GET / HTTP/1.0\r\nConnection: keep-alive\r\nConnection: close\r\n\r\n",
            false,
        ),
        (b"GET / HTTP/1.5\r\nHost: h\r\n\r\n", true),
    ];
    for (input, keep_alive) in cases {
        assert_eq!(complete(input).0.keep_alive, *keep_alive, "{input:?}");
    }
}

#[test]
fn expect_continue_only_in_http11() {
    let (head, _) = complete(
        b"PUT /f HTTP/1.1\r\nHost: h\r\nExpect: 100-Continue\r\nContent-Length: 3\r\n\r\n",
    );
    assert!(head.expect_continue);
    assert_eq!(head.body, BodyFraming::Length(3));
    let (head, _) = complete(b"PUT /f HTTP/1.0\r\nExpect: 100-continue\r\n\r\n");
    assert!(!head.expect_continue);
}

#[test]
fn chunked_framing() {
    let (head, _) =
        complete(b"POST /cgi HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n");
    assert_eq!(head.body, BodyFraming::Chunked);
}

#[test]
fn methods_and_targets() {
    let (head, _) = complete(b"OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n");
    assert_eq!(head.method, Method::Options);
    let (head, _) = complete(b"PROPFIND /dav HTTP/1.1\r\nHost: h\r\n\r\n");
    assert_eq!(head.method, Method::Other("PROPFIND".into()));
    assert_eq!(head.method.to_string(), "PROPFIND");
    let (head, _) = complete(b"GET HTTP://Other.example:81?q HTTP/1.1\r\nHost: h\r\n\r\n");
    assert_eq!(head.host(), Some("Other.example:81"));
    assert_eq!(
        split_target(&head.target),
        Some((Some("Other.example:81"), "/", Some("q")))
    );
}

#[test]
fn split_target_forms() {
    assert_eq!(
        split_target("/a/b?c=d?e"),
        Some((None, "/a/b", Some("c=d?e")))
    );
    assert_eq!(split_target("/"), Some((None, "/", None)));
    assert_eq!(split_target("*"), Some((None, "*", None)));
    assert_eq!(split_target("https://h/x"), Some((Some("h"), "/x", None)));
    assert_eq!(split_target("http://h"), Some((Some("h"), "/", None)));
    assert_eq!(split_target("http:///x"), None);
    assert_eq!(split_target("http://u@h/"), None);
    assert_eq!(split_target("ftp://h/"), None);
    assert_eq!(split_target("example.com:443"), None);
    assert_eq!(split_target("x"), None);
    assert_eq!(split_target(""), None);
}

/// Each input is a known request-smuggling or desync vector, or a syntax fault, mapped to the
/// status ampd answers with (then closing the connection).
#[test]
fn smuggling_corpus() {
    let cases: &[(&[u8], ParseError)] = &[
        (
            b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
            ParseError::ContentLengthWithTransferEncoding,
        ),
        (
            b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n",
            ParseError::ContentLengthWithTransferEncoding,
        ),
        // RFC 9112 §6.1: a coding ampd does not implement (`identity` is no longer a
        // registered transfer coding; `gzip` is not implemented; `xchunked` is unknown) → 501,
        // whatever its place in the list: nothing can be decoded, so nothing is framed.
        (
            b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked, identity\r\n\r\n",
            ParseError::UnknownTransferCoding,
        ),
        (
            b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n\r\n",
            ParseError::UnknownTransferCoding,
        ),
        (
            b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
            ParseError::UnknownTransferCoding,
        ),
        (
            b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: xchunked\r\n\r\n",
            ParseError::UnknownTransferCoding,
        ),
        // RFC 9112 §7.1: chunked applied twice, and §6.3 item 4: the length cannot be
        // determined → 400.
        (
            b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
            ParseError::TransferEncodingNotChunked,
        ),
        (
            b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 1,2\r\n\r\n",
            ParseError::DuplicateContentLength,
        ),
        (
            b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5, 5\r\n\r\n",
            ParseError::DuplicateContentLength,
        ),
        (
            b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n",
            ParseError::DuplicateContentLength,
        ),
        (
            b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: +5\r\n\r\n",
            ParseError::InvalidContentLength,
        ),
        (
            b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 99999999999999999999\r\n\r\n",
            ParseError::InvalidContentLength,
        ),
        (
            b"GET / HTTP/1.1\r\nHost: h\r\nX-A: 1\r\n folded\r\n\r\n",
            ParseError::ObsFold,
        ),
        (
            b"GET / HTTP/1.1\r\n Host: h\r\n\r\n",
            ParseError::ObsFold,
        ),
        (b"GET / HTTP/1.1\r\nHost : h\r\n\r\n", ParseError::SpaceBeforeColon),
        (b"GET / HTTP/1.1\r\nHost\t: h\r\n\r\n", ParseError::SpaceBeforeColon),
        (b"GET / HTTP/1.1\r\nHost: h\rX: y\r\n\r\n", ParseError::BareCr),
        (b"GET / HTTP/1.1\rHost: h\r\n\r\n", ParseError::BareCr),
        (b"GET / HTTP/1.1\r\nHost: h\r\nX: a\0b\r\n\r\n", ParseError::InvalidHeaderValue),
        (b"GET / HTTP/1.1\r\nHost: h\r\nX\x0bY: z\r\n\r\n", ParseError::BadHeaderName),
        (b"GET / HTTP/1.1\r\nHost: h\r\n: z\r\n\r\n", ParseError::BadHeaderName),
        (b"GET / HTTP/1.1\r\nHost: h\r\nNoColon\r\n\r\n", ParseError::BadHeaderName),
        (
            b"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n",
            ParseError::TransferEncodingInHttp10,
        ),
        (
            b"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n",
            ParseError::TransferEncodingInHttp10,
        ),
        (b"GET / HTTP/1.1\r\n\r\n", ParseError::MissingHost),
        (b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", ParseError::MultipleHost),
        (b"GET / HTTP/1.0\r\nHost: a\r\nhost: a\r\n\r\n", ParseError::MultipleHost),
        (b"GET / HTTP/1.1\r\nHost: a/b\r\n\r\n", ParseError::BadHost),
        (b"GET / HTTP/1.1\r\nHost: a b\r\n\r\n", ParseError::BadHost),
        (b"GET / HTTP/2.0\r\nHost: h\r\n\r\n", ParseError::UnsupportedVersion),
        (b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", ParseError::UnsupportedVersion),
        (b"GET / HTTP/0.9\r\n\r\n", ParseError::UnsupportedVersion),
        (b"GET / http/1.1\r\nHost: h\r\n\r\n", ParseError::MalformedRequestLine),
        (b"GET / HTTP/1.10\r\nHost: h\r\n\r\n", ParseError::MalformedRequestLine),
        (b"GET /\r\n\r\n", ParseError::MalformedRequestLine),
        (b"GET  / HTTP/1.1\r\nHost: h\r\n\r\n", ParseError::BadTarget),
        // Read left to right, the second SP ends the target: `x HTTP/1.1` is no version.
        (b"GET / x HTTP/1.1\r\nHost: h\r\n\r\n", ParseError::MalformedRequestLine),
        (b"GET /#frag HTTP/1.1\r\nHost: h\r\n\r\n", ParseError::BadTarget),
        (b"GET /\x7f HTTP/1.1\r\nHost: h\r\n\r\n", ParseError::BadTarget),
        (b"GET * HTTP/1.1\r\nHost: h\r\n\r\n", ParseError::BadTarget),
        (b"CONNECT /x HTTP/1.1\r\nHost: h\r\n\r\n", ParseError::BadTarget),
        (b"CONNECT h HTTP/1.1\r\nHost: h\r\n\r\n", ParseError::BadTarget),
        (b"CONNECT h::443 HTTP/1.1\r\nHost: h\r\n\r\n", ParseError::BadTarget),
        (b"CONNECT 4713::abcd:8001 HTTP/1.1\r\nHost: h\r\n\r\n", ParseError::BadTarget),
        (b"CONNECT h:70000 HTTP/1.1\r\nHost: h\r\n\r\n", ParseError::BadTarget),
        (b"GET h:443 HTTP/1.1\r\nHost: h\r\n\r\n", ParseError::BadTarget),
        (b"GET http://u@h/ HTTP/1.1\r\nHost: h\r\n\r\n", ParseError::BadTarget),
        (b"G(T / HTTP/1.1\r\nHost: h\r\n\r\n", ParseError::BadMethod),
        (b" GET / HTTP/1.1\r\nHost: h\r\n\r\n", ParseError::BadMethod),
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
fn statuses_of_the_corpus_highlights() {
    let status = |input: &[u8]| parse_whole(input).map(|_| ()).unwrap_err().status();
    assert_eq!(
        status(b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: br, chunked\r\n\r\n"),
        501
    );
    assert_eq!(status(b"GET / HTTP/3.0\r\nHost: h\r\n\r\n"), 505);
    assert_eq!(
        status(b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n"),
        400
    );
}

fn small_limits() -> Limits {
    Limits {
        max_request_line: 20,
        max_head_bytes: 64,
        max_headers: 2,
    }
}

#[test]
fn request_line_limit_applies_to_partial_input() {
    let mut parser = HeadParser::new(small_limits());
    assert_eq!(parser.parse(b"GET /0123456789abcd"), Ok(Parse::Partial));
    assert_eq!(
        parser.parse(b"GET /0123456789abcdef"),
        Err(ParseError::RequestLineTooLong)
    );
    // Exactly at the limit, with the CR still waiting for its LF: not yet over.
    let mut parser = HeadParser::new(small_limits());
    assert_eq!(parser.parse(b"GET /234567 HTTP/1.1\r"), Ok(Parse::Partial));
    let mut parser = HeadParser::new(small_limits());
    assert_eq!(
        parser.parse(b"GET /2345678 HTTP/1.1\r\n"),
        Err(ParseError::RequestLineTooLong)
    );
}

#[test]
fn head_and_count_limits() {
    let mut parser = HeadParser::new(small_limits());
    let long = b"GET / HTTP/1.1\r\nHost: h\r\nX: 01234567890123456789012345678901234567890";
    assert_eq!(parser.parse(long), Err(ParseError::HeaderSectionTooLarge));

    let many = b"GET / HTTP/1.1\r\nHost: h\r\nA: 1\r\nB: 2\r\n\r\n";
    assert_eq!(
        HeadParser::new(small_limits()).parse(many),
        Err(ParseError::TooManyHeaders)
    );

    let blank_flood = vec![b'\n'; 65];
    assert_eq!(
        HeadParser::new(small_limits()).parse(&blank_flood),
        Err(ParseError::HeaderSectionTooLarge)
    );
}

#[test]
fn replaced_buffer_restarts_instead_of_panicking() {
    let mut parser = HeadParser::new(Limits::default());
    assert_eq!(
        parser.parse(b"GET / HTTP/1.1\r\nHost: a\r\n"),
        Ok(Parse::Partial)
    );
    assert_eq!(parser.parse(b"GET"), Ok(Parse::Partial));
}

#[test]
fn encode_round_trips() {
    let input = b"\nDELETE /x?y HTTP/1.1\nHost: h\nX-Odd:\t v\xff \nContent-Length: 0\n\n";
    let (head, _) = complete(input);
    let mut encoded = Vec::new();
    head.encode(&mut encoded);
    let (again, len) = complete(&encoded);
    assert_eq!(again, head);
    assert_eq!(len, encoded.len());
}

/// A valid head as parts, with what parsing it must produce.
#[derive(Debug, Clone)]
struct Generated {
    bytes: Vec<u8>,
    method: Method,
    target: String,
    version: Version,
    headers: Vec<(String, Vec<u8>)>,
    body: BodyFraming,
    keep_alive: bool,
}

fn reserved(name: &str) -> bool {
    [
        "host",
        "content-length",
        "transfer-encoding",
        "connection",
        "expect",
    ]
    .iter()
    .any(|reserved| name.eq_ignore_ascii_case(reserved))
}

fn generated_head() -> impl Strategy<Value = Generated> {
    let method = prop_oneof![
        Just(Method::Get),
        Just(Method::Head),
        Just(Method::Post),
        "[A-Z]{1,10}".prop_map(|token| Method::from_token(token.as_bytes()).unwrap()),
    ];
    let target = "/[a-zA-Z0-9._~%/!$&'()*+,;=:@-]{0,30}(\\?[a-zA-Z0-9=&/?]{0,20})?";
    let version = prop_oneof![Just(Version::Http10), Just(Version::Http11)];
    let extra = prop::collection::vec(
        (
            "[A-Za-z][A-Za-z0-9!#$%&'*+.^_`|~-]{0,15}".prop_filter("reserved", |n| !reserved(n)),
            prop::collection::vec(prop_oneof![0x20u8..0x7f, Just(b'\t'), 0x80u8..=0xff], 0..30)
                .prop_map(|value| trim_ows(&value).to_vec()),
        ),
        0..8,
    );
    let body = prop_oneof![Just(None), any::<u64>().prop_map(Some)];
    (
        method,
        target,
        version,
        extra,
        "[a-z0-9.-]{1,20}(:[0-9]{1,4})?",
        body,
        any::<bool>(),
        prop_oneof![Just(None), Just(Some("close")), Just(Some("keep-alive"))],
        any::<bool>(),
        0usize..3,
    )
        .prop_flat_map(
            |(
                method,
                target,
                version,
                extra,
                host,
                length,
                chunked,
                connection,
                lf_only,
                leading,
            )| {
                let mut fields: Vec<(String, Vec<u8>)> = extra;
                fields.push(("Host".into(), host.into_bytes()));
                let chunked = chunked && version == Version::Http11 && length.is_none();
                if let Some(length) = length {
                    fields.push(("Content-Length".into(), length.to_string().into_bytes()));
                }
                if chunked {
                    fields.push(("Transfer-Encoding".into(), b"chunked".to_vec()));
                }
                if let Some(option) = connection {
                    fields.push(("Connection".into(), option.as_bytes().to_vec()));
                }
                let body = match (length, chunked) {
                    (Some(length), _) => BodyFraming::Length(length),
                    (None, true) => BodyFraming::Chunked,
                    (None, false) => BodyFraming::None,
                };
                let keep_alive = match (version, connection) {
                    (_, Some("close")) => false,
                    (Version::Http11 | Version::Http2 | Version::Http3, _) => true,
                    (Version::Http10, option) => option == Some("keep-alive"),
                };
                (Just(fields).prop_shuffle()).prop_map(move |fields| {
                    let eol: &[u8] = if lf_only { b"\n" } else { b"\r\n" };
                    let mut bytes = eol.repeat(leading);
                    bytes.extend_from_slice(method.as_str().as_bytes());
                    bytes.push(b' ');
                    bytes.extend_from_slice(target.as_bytes());
                    bytes.push(b' ');
                    bytes.extend_from_slice(version.as_str().as_bytes());
                    bytes.extend_from_slice(eol);
                    for (name, value) in &fields {
                        bytes.extend_from_slice(name.as_bytes());
                        bytes.extend_from_slice(b":\t ");
                        bytes.extend_from_slice(value);
                        bytes.extend_from_slice(b" ");
                        bytes.extend_from_slice(eol);
                    }
                    bytes.extend_from_slice(eol);
                    Generated {
                        bytes,
                        method: method.clone(),
                        target: target.clone(),
                        version,
                        headers: fields,
                        body,
                        keep_alive,
                    }
                })
            },
        )
}

proptest! {
    #[test]
    fn generated_heads_parse_to_their_parts(generated in generated_head()) {
        let (head, len) = complete(&generated.bytes);
        prop_assert_eq!(len, generated.bytes.len());
        prop_assert_eq!(&head.method, &generated.method);
        prop_assert_eq!(&*head.target, generated.target.as_str());
        prop_assert_eq!(head.version, generated.version);
        let headers: Vec<(String, Vec<u8>)> = head
            .headers
            .iter()
            .map(|h| (h.name.to_string(), h.value.to_vec()))
            .collect();
        prop_assert_eq!(&headers, &generated.headers);
        prop_assert_eq!(head.body, generated.body);
        prop_assert_eq!(head.keep_alive, generated.keep_alive);

        let mut encoded = Vec::new();
        head.encode(&mut encoded);
        let (again, again_len) = complete(&encoded);
        prop_assert_eq!(again_len, encoded.len());
        prop_assert_eq!(again, head);
    }

    #[test]
    fn incremental_feeding_matches_whole(generated in generated_head(), split in any::<prop::sample::Index>()) {
        let whole = parse_whole(&generated.bytes);
        prop_assert_eq!(&parse_bytewise(&generated.bytes, Limits::default()), &whole);
        let at = split.index(generated.bytes.len());
        let mut parser = HeadParser::new(Limits::default());
        let first = parser.parse(&generated.bytes[..at]);
        prop_assert_eq!(first, Ok(Parse::Partial));
        prop_assert_eq!(parser.parse(&generated.bytes), whole);
    }

    #[test]
    fn arbitrary_bytes_agree_whole_and_bytewise(input in prop::collection::vec(any::<u8>(), 0..200)) {
        let limits = Limits { max_request_line: 40, max_head_bytes: 120, max_headers: 4 };
        let whole = HeadParser::new(limits).parse(&input);
        prop_assert_eq!(parse_bytewise(&input, limits), whole);
    }

    /// Near-valid request lines (the bytes a request line is made of, plus a few faults), so
    /// that the early check meets every part of the line: it must find the same first fault
    /// whole and byte by byte, and never refuse a prefix of a line the whole parse accepts.
    #[test]
    fn request_line_prefixes_agree_whole_and_bytewise(
        input in prop::collection::vec(
            prop::sample::select(&b"GET /aHTP1.2:\r\n \x00\x8a#"[..]),
            0..60,
        ),
        head_limit in 20usize..80,
    ) {
        let mut bytes = b"GET /".to_vec();
        bytes.extend_from_slice(&input);
        let limits = Limits { max_request_line: 30, max_head_bytes: head_limit, max_headers: 4 };
        let whole = HeadParser::new(limits).parse(&bytes);
        prop_assert_eq!(parse_bytewise(&bytes, limits), whole.clone());
        if whole.is_ok() {
            for end in 0..bytes.len() {
                prop_assert!(HeadParser::new(limits).parse(&bytes[..end]).is_ok());
            }
        }
    }
}

/// Bytes that can never begin a valid request are refused as they arrive, without waiting for
/// a line end (nginx answers such garbage at once): a non-token byte in the method, a byte a
/// target may not hold, a version that cannot become `HTTP/1.x`.
#[test]
fn hopeless_request_lines_are_refused_before_their_line_end() {
    let cases: &[(&[u8], ParseError)] = &[
        (b"\x8a\x81\xa0", ParseError::BadMethod),
        // A TLS ClientHello on the plain port.
        (
            b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",
            ParseError::BadMethod,
        ),
        (b"GE\x00", ParseError::BadMethod),
        (b"GET\t/", ParseError::BadMethod),
        (b" GET", ParseError::BadMethod),
        (b"GET /a\x01", ParseError::BadTarget),
        (b"GET /\xff", ParseError::BadTarget),
        (b"GET  /", ParseError::BadTarget),
        (b"GET / HTTQ", ParseError::MalformedRequestLine),
        (b"GET / http/", ParseError::MalformedRequestLine),
        (b"GET / HTTP/1,", ParseError::MalformedRequestLine),
        (b"GET / HTTP/1.1x", ParseError::MalformedRequestLine),
        (b"GET / HTTP/1.1 ", ParseError::MalformedRequestLine),
        (b"GET / HTTP/2", ParseError::UnsupportedVersion),
        (b"GET / HTTP/1.1\rX", ParseError::BareCr),
        (b"\r\nGET\r/", ParseError::BareCr),
    ];
    for (input, expected) in cases {
        let mut parser = HeadParser::new(Limits::default());
        assert_eq!(
            parser.parse(input),
            Err(*expected),
            "{}",
            input.escape_ascii()
        );
        // The same verdict for the whole line, however it arrives.
        let mut line = input.to_vec();
        line.extend_from_slice(b" HTTP/1.1\r\nHost: h\r\n\r\n");
        assert_eq!(
            parse_whole(&line),
            Err(*expected),
            "{}",
            line.escape_ascii()
        );
        assert_eq!(
            parse_bytewise(&line, Limits::default()),
            Err(*expected),
            "{}",
            line.escape_ascii()
        );
    }
    // Prefixes of valid lines wait for more.
    for partial in [
        &b"G"[..],
        b"GET",
        b"GET ",
        b"GET /a?b=c",
        b"GET / ",
        b"GET / HT",
        b"GET / HTTP/1.",
        b"GET / HTTP/1.1",
        b"GET / HTTP/1.1\r",
        b"PROPFIND http://h:1/x HTTP/1.0",
    ] {
        let mut parser = HeadParser::new(Limits::default());
        assert_eq!(parser.parse(partial), Ok(Parse::Partial), "{partial:?}");
    }
}

/// The authority of an absolute-form target and the `Host` value must be `host [":" port]`
/// (RFC 9112 §3.2.2, RFC 3986 §3.2, RFC 9110 §7.2): nginx answers `400` to the rest.
#[test]
fn authorities_are_validated() {
    for bad in [
        "http://localhost:80x/",
        "http://localhost:80:80/",
        "http://localhost::80/",
        "http://4713::abcd:8001/",
        "http://[::1/",
        "http://[::g]/",
        "http://[::1]x/",
        "http://h:65536/",
        "http://:80/",
        "http://h%zz/",
        "http://a<b/",
    ] {
        let request = format!("GET {bad} HTTP/1.0\r\n\r\n");
        assert_eq!(
            parse_whole(request.as_bytes()),
            Err(ParseError::BadTarget),
            "{bad}"
        );
    }
    for good in [
        "http://localhost/",
        "http://localhost:80/x",
        "https://Example.COM.:443",
        "http://127.0.0.1:8080/",
        "http://[::1]:80/",
        "http://[2001:db8::a]/",
        "http://h:/",
        "http://xn--bcher-kva.de/",
        "http://h%41/",
        "http://h:65535/",
    ] {
        let request = format!("GET {good} HTTP/1.0\r\n\r\n");
        assert!(
            matches!(parse_whole(request.as_bytes()), Ok(Parse::Complete { .. })),
            "{good}"
        );
    }
    for bad in [
        "localhost:80x",
        "localhost:80:80",
        "localhost::80",
        "4713::abcd:8001",
        "[::1",
        ":80",
        "h:99999",
        "u@h",
    ] {
        let request = format!("GET / HTTP/1.1\r\nHost: {bad}\r\n\r\n");
        assert_eq!(
            parse_whole(request.as_bytes()),
            Err(ParseError::BadHost),
            "{bad}"
        );
    }
    for good in ["", "h", "h:8080", "[::1]:80", "1.2.3.4", "h:"] {
        let request = format!("GET / HTTP/1.1\r\nHost: {good}\r\n\r\n");
        assert!(
            matches!(parse_whole(request.as_bytes()), Ok(Parse::Complete { .. })),
            "{good:?}"
        );
    }
}

/// Absolute-form wins over `Host` (RFC 9112 §3.2.2).
#[test]
fn absolute_form_authority_wins_over_host() {
    let (head, _) = complete(b"GET http://a.example:81/x HTTP/1.1\r\nHost: b.example\r\n\r\n");
    assert_eq!(head.host(), Some("a.example:81"));
    let (head, _) = complete(b"GET /x HTTP/1.1\r\nHost: b.example\r\n\r\n");
    assert_eq!(head.host(), Some("b.example"));
}
