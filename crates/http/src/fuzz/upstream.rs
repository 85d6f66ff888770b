//! Fuzz checks of the reverse proxy's protocol side (`crate::upstream`): the upstream's
//! response head and body framing, and the request head written for the upstream.
//!
//! Owns those invariants. Must not be used by the server; every check panics on violation.

use std::net::{IpAddr, Ipv6Addr};

use crate::chunked::ChunkedDecoder;
use crate::request::{HeadParser, Limits as RequestLimits, Method, Parse, RequestHead};
use crate::upstream::{
    is_hop_by_hop, response_body, write_request, ForwardRequest, Limits, ResponseBody,
    ResponseHead, ResponseParse, ResponseParser, UpstreamError,
};

/// Feeds `data` to the response-head parser whole and in pieces, and checks:
///
/// * whole and piecewise parsing agree (same head and length, or the same error);
/// * a complete head consumed at most `data.len()` bytes, and re-encoding it parses back to an
///   equal head of exactly the encoded length;
/// * `response_body` never panics, for any request method, and refuses nothing the parser's
///   framing checks let through except a coding besides chunked; a `Length` is the head's
///   `Content-Length`; a chunked body after the head decodes within its bounds;
/// * the fields passed on to the client hold nothing hop-by-hop, no framing field and nothing
///   the upstream's `Connection` names.
///
/// # Panics
/// Only when an invariant is violated, which is the bug the fuzzer is looking for.
pub fn upstream_response(data: &[u8]) {
    let limits = Limits {
        max_head_bytes: 2048,
        max_headers: 32,
    };
    let whole = ResponseParser::new(limits).parse(data);
    assert_eq!(piecewise(data, limits), whole, "piecewise parse differs");
    let Ok(ResponseParse::Complete { head, len }) = whole else {
        return;
    };
    assert!(len > 0 && len <= data.len(), "len {len} out of bounds");

    let mut encoded = Vec::new();
    head.encode(&mut encoded);
    match ResponseParser::new(Limits::default()).parse(&encoded) {
        Ok(ResponseParse::Complete {
            head: again,
            len: again_len,
        }) => {
            assert_eq!(again, head, "re-encoded head parses differently");
            assert_eq!(again_len, encoded.len());
        }
        other => panic!("re-encoded head failed to parse: {other:?}"),
    }

    for method in [Method::Get, Method::Head, Method::Post, Method::Connect] {
        match response_body(&head, &method) {
            Ok(ResponseBody::Length(length)) => assert_eq!(head.content_length(), Some(length)),
            Ok(ResponseBody::Chunked) => check_chunked(&data[len..]),
            Ok(_) | Err(UpstreamError::UnsupportedTransferCoding) => {}
            Err(other) => panic!("the parser let through {other:?}"),
        }
    }
    check_end_to_end(&head);
}

/// Feeds growing prefixes in steps that vary with the input, like reads of different sizes.
fn piecewise(data: &[u8], limits: Limits) -> Result<ResponseParse, UpstreamError> {
    let mut parser = ResponseParser::new(limits);
    let step = 1 + data.first().map_or(0, |&b| usize::from(b % 7));
    let mut end = 0;
    while end < data.len() {
        end = (end + step).min(data.len());
        match parser.parse(&data[..end])? {
            ResponseParse::Partial => {}
            complete @ ResponseParse::Complete { .. } => return Ok(complete),
        }
    }
    parser.parse(data)
}

fn check_chunked(body: &[u8]) {
    let mut decoder = ChunkedDecoder::with_limits(64, 256);
    let mut decoded = 0u64;
    if let Ok(progress) = decoder.feed(body, &mut |data| decoded += data.len() as u64) {
        assert!(progress.consumed <= body.len());
        assert!(decoded <= progress.consumed as u64);
    }
}

fn check_end_to_end(head: &ResponseHead) {
    for header in head.end_to_end_headers() {
        let name = &*header.name;
        assert!(!is_hop_by_hop(name), "{name} passed on");
        assert!(
            !name.eq_ignore_ascii_case("content-length"),
            "{name} passed on"
        );
        assert!(!head.connection_has(name), "{name} passed on though named");
    }
}

/// Writes the upstream request for a request head the server accepted, trusted and not, and
/// checks that the upstream parses exactly one request from it: the same method, target and
/// body framing, `Host` first and once, and only ampd's own `Connection`.
///
/// # Panics
/// Only when an invariant is violated.
pub fn forward_request(head: &RequestHead) {
    for (trust_incoming, underscores) in [(false, false), (true, true)] {
        let forward = ForwardRequest {
            method: &head.method,
            target: &head.target,
            host: "upstream.example:8080",
            client_headers: &head.headers,
            body: head.body.into(),
            client: IpAddr::V6(Ipv6Addr::LOCALHOST),
            proto: "http",
            client_host: head.host(),
            trust_incoming,
            upgrade: None,
            underscores,
            keep_alive: head.keep_alive,
        };
        let mut out = Vec::new();
        write_request(&forward, &mut out);
        let limits = RequestLimits {
            max_request_line: 64 * 1024,
            max_head_bytes: 64 * 1024,
            max_headers: 1000,
        };
        let (upstream, len) = match HeadParser::new(limits).parse(&out) {
            Ok(Parse::Complete { head, len }) => (head, len),
            other => panic!(
                "the upstream cannot parse {}: {other:?}",
                out.escape_ascii()
            ),
        };
        assert_eq!(len, out.len(), "a second request in {}", out.escape_ascii());
        assert_eq!(upstream.method, head.method);
        assert_eq!(upstream.target, head.target);
        assert_eq!(upstream.body, head.body);
        assert_eq!(upstream.keep_alive, head.keep_alive);
        assert_eq!(&*upstream.headers[0].name, "Host");
        let count = |name: &str| upstream.headers_named(name).count();
        assert_eq!(count("host"), 1);
        assert_eq!(count("connection"), 1);
        assert_eq!(count("expect"), 0);
    }
}

#[cfg(test)]
mod tests {
    use super::upstream_response;

    #[test]
    fn accepts_valid_and_invalid_input() {
        upstream_response(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: x\r\nX: 1\r\n\r\n3\r\nabc\r\n0\r\n\r\n");
        upstream_response(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n");
        upstream_response(b"HTTP/1.0 304 Not Modified\r\nContent-Length: 5, 5\r\n\r\n");
        upstream_response(
            b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
        );
        upstream_response(b"");
        upstream_response(&[0xff; 600]);
    }
}
