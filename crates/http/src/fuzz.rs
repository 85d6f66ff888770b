//! Fuzzing entry points, shared by the cargo-fuzz targets in `fuzz/` and the corpus replay
//! test in `tests/fuzz_corpus.rs`, so a crash found by libFuzzer replays under `cargo test`.
//! The reverse proxy's checks are in `fuzz/upstream.rs`, FastCGI's and CGI's in `fuzz/fastcgi.rs`,
//! the shared head reader's in `fuzz/head.rs`,
//! HPACK's and the HTTP/2 request fields' in `fuzz/hpack.rs`, the HTTP/2 connection's in
//! `fuzz/h2.rs`, HTTP/3's frames, QPACK's and request streams' in `fuzz/h3.rs`, the HTTP/3
//! connection's in `fuzz/h3_connection.rs`, the negotiation fields' (`Accept*`)
//! in `fuzz/accept.rs`.
//!
//! Owns the invariants checked on arbitrary input. Must not be used by the server; every
//! check panics on violation because a panic is what the fuzzer reports.

use crate::chunked::{ChunkedDecoder, ChunkedError};
use crate::conditional::{evaluate, if_range_allows_partial, Validators};
use crate::date::{format_http_date, parse_http_date, MAX_HTTP_DATE};
use crate::proxy_protocol::{self, ProxyHeader, V1_MAX, V2_FIXED, V2_MAX_PAYLOAD};
use crate::range::{parse_range, RangeOutcome};
use crate::request::{BodyFraming, HeadParser, Limits, Parse, RequestHead};

mod accept;
mod fastcgi;
mod h2;
mod h3;
mod h3_connection;
mod head;
mod hpack;
mod upstream;

pub use accept::accept;
pub use fastcgi::{cgi_head, fastcgi_name_value, fastcgi_response};
pub use h2::h2_connection;
pub use h3::{h3_frames, h3_request_stream, qpack_decode};
pub use h3_connection::h3_connection;
pub use head::head_reader;
pub use hpack::hpack_decode;
pub use upstream::{forward_request, upstream_response};

/// Feeds `data` to the request-head parser whole and in pieces, and checks:
///
/// * whole and piecewise parsing agree (same head and length, or the same error);
/// * a complete head consumed at most `data.len()` bytes, and re-encoding it parses back to
///   an equal head of exactly the encoded length;
/// * the helpers that read request fields (Range, HTTP-dates, preconditions, a chunked body
///   after the head) never panic and keep their own invariants;
/// * the request written for an upstream from the head is one request, framed the same
///   ([`forward_request`]).
///
/// # Panics
/// Only when an invariant is violated, which is the bug the fuzzer is looking for.
pub fn request_head(data: &[u8]) {
    let limits = Limits {
        max_request_line: 512,
        max_head_bytes: 2048,
        max_headers: 32,
    };
    let whole = HeadParser::new(limits).parse(data);
    assert_eq!(piecewise(data, limits), whole, "piecewise parse differs");

    let Ok(Parse::Complete { head, len }) = whole else {
        return;
    };
    assert!(len > 0 && len <= data.len(), "len {len} out of bounds");

    let mut encoded = Vec::new();
    head.encode(&mut encoded);
    match HeadParser::new(Limits::default()).parse(&encoded) {
        Ok(Parse::Complete {
            head: again,
            len: again_len,
        }) => {
            assert_eq!(again, head, "re-encoded head parses differently");
            assert_eq!(again_len, encoded.len());
        }
        other => panic!("re-encoded head failed to parse: {other:?}"),
    }

    check_fields(&head);
    forward_request(&head);
    if head.body == BodyFraming::Chunked {
        check_chunked(&data[len..]);
    }
}

/// Feeds growing prefixes in steps that vary with the input, like reads of different sizes.
fn piecewise(data: &[u8], limits: Limits) -> Result<Parse, crate::error::ParseError> {
    let mut parser = HeadParser::new(limits);
    let step = 1 + data.first().map_or(0, |&b| usize::from(b % 7));
    let mut end = 0;
    while end < data.len() {
        end = (end + step).min(data.len());
        match parser.parse(&data[..end])? {
            Parse::Partial => {}
            complete @ Parse::Complete { .. } => return Ok(complete),
        }
    }
    parser.parse(data)
}

/// Feeds `data` to the PROXY protocol parser and checks:
///
/// * a complete header is at most `data.len()` bytes and within its version's bound;
/// * parsing is prefix-consistent, as a connection's reads deliver it: every strict prefix of a
///   complete header is `Partial`, the header alone parses to the same result, and a prefix
///   refused means the whole input is refused (an error is final, never undone by more bytes).
///
/// # Panics
/// Only when an invariant is violated.
pub fn proxy_header(data: &[u8]) {
    let whole = proxy_protocol::parse(data);
    let step = 1 + data.first().map_or(0, |&b| usize::from(b % 5));
    let mut end = 0;
    while end < data.len() {
        end = (end + step).min(data.len());
        if proxy_protocol::parse(&data[..end]).is_err() {
            assert!(
                whole.is_err(),
                "a refused prefix of {end} bytes, then {whole:?}"
            );
        }
    }
    let Ok(proxy_protocol::Parse::Complete { header, len }) = whole else {
        return;
    };
    assert!(len <= data.len(), "len {len} out of bounds");
    let bound = match header {
        ProxyHeader { version: 1, .. } => V1_MAX,
        _ => V2_FIXED + V2_MAX_PAYLOAD,
    };
    assert!(len <= bound, "a v{} header of {len} bytes", header.version);
    assert_eq!(proxy_protocol::parse(&data[..len]), whole);
    for prefix in 0..len {
        assert_eq!(
            proxy_protocol::parse(&data[..prefix]),
            Ok(proxy_protocol::Parse::Partial),
            "prefix of {prefix} bytes"
        );
    }
}

fn check_fields(head: &RequestHead) {
    const LEN: u64 = 10_000;
    if let Some(value) = head.header("range") {
        if let RangeOutcome::Partial(ranges) = parse_range(value, LEN, 8) {
            assert!(!ranges.is_empty());
            for pair in ranges.windows(2) {
                assert!(
                    pair[0].end + 1 < pair[1].start,
                    "ranges overlap: {ranges:?}"
                );
            }
            assert!(ranges.iter().all(|r| r.start <= r.end && r.end < LEN));
        }
    }
    for name in ["if-modified-since", "if-unmodified-since", "date"] {
        if let Some(secs) = head.header(name).and_then(parse_http_date) {
            if secs <= MAX_HTTP_DATE {
                let formatted = format_http_date(secs);
                assert_eq!(parse_http_date(&formatted), Some(secs));
            }
        }
    }
    let validators = Validators {
        etag: Some(b"\"fuzz\""),
        last_modified: Some(784_111_777),
    };
    let _ = evaluate(head, &validators);
    let _ = if_range_allows_partial(head, &validators);
    let _ = head.host();
}

fn check_chunked(body: &[u8]) {
    let mut decoder = ChunkedDecoder::with_limits(64, 256);
    let mut decoded = 0u64;
    let unlimited = decoder.feed(body, &mut |data| decoded += data.len() as u64);
    if let Ok(progress) = unlimited {
        assert!(progress.consumed <= body.len());
        assert_eq!(decoded, decoder.body_bytes());
        assert!(decoded <= progress.consumed as u64);
    }
    // A body limit only ever turns an outcome into `BodyTooLarge`, and holds.
    const MAX_BODY: u64 = 100;
    let mut limited = ChunkedDecoder::with_limits(64, 256).with_max_body(MAX_BODY);
    match limited.feed(body, &mut |_| {}) {
        Err(ChunkedError::BodyTooLarge) => {}
        outcome => {
            assert_eq!(outcome, unlimited, "the limit changed the outcome");
            assert!(limited.body_bytes() <= MAX_BODY);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{proxy_header, request_head};

    #[test]
    fn proxy_header_accepts_valid_and_invalid_input() {
        proxy_header(b"PROXY TCP4 1.2.3.4 5.6.7.8 1 2\r\nGET / HTTP/1.1\r\n\r\n");
        proxy_header(
            b"\r\n\r\n\0\r\nQUIT\n\x21\x11\x00\x0c\x0a\x01\x02\x03\x7f\x00\x00\x01\x9c\x40\x00\x50",
        );
        proxy_header(b"");
        proxy_header(&[0xff; 300]);
    }

    #[test]
    fn accepts_valid_and_invalid_input() {
        request_head(b"POST /x HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nRange: bytes=0-1,-5\r\nIf-Modified-Since: Sun, 06 Nov 1994 08:49:37 GMT\r\n\r\n3\r\nabc\r\n0\r\n\r\n");
        request_head(b"GET / HTTP/1.1\r\nHost: h\r\nHost: h\r\n\r\n");
        request_head(b"");
        request_head(&[0xff; 600]);
    }
}
