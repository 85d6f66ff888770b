//! Unit tests of the response parser: well-formed framings, and every kind of broken response
//! mapped to the error it must be counted as.

use super::*;

/// Feeds `bytes` in pieces of `step` and collects the responses (and the first error).
fn parse_all(bytes: &[u8], step: usize) -> (Vec<Response>, Option<ParseError>) {
    let mut parser = ResponseParser::new();
    let mut responses = Vec::new();
    for piece in bytes.chunks(step.max(1)) {
        let mut rest = piece;
        while !rest.is_empty() {
            match parser.feed(rest) {
                Ok((used, done)) => {
                    responses.extend(done);
                    rest = &rest[used..];
                }
                Err(error) => return (responses, Some(error)),
            }
        }
    }
    match parser.finish() {
        Ok(done) => responses.extend(done),
        Err(error) => return (responses, Some(error)),
    }
    (responses, None)
}

fn one(bytes: &[u8]) -> Result<Response, ParseError> {
    for step in [1, 2, 3, 7, bytes.len()] {
        let (responses, error) = parse_all(bytes, step);
        if let Some(error) = error {
            assert!(responses.is_empty(), "step {step}");
            // Every split of the input must reach the same verdict.
            for other in [1, bytes.len()] {
                assert_eq!(parse_all(bytes, other).1, Some(error), "step {other}");
            }
            return Err(error);
        }
        assert_eq!(responses.len(), 1, "step {step}");
        if step == bytes.len() {
            return Ok(responses[0]);
        }
    }
    unreachable!()
}

#[test]
fn content_length_body_and_keep_alive() {
    let bytes = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nServer: x\r\n\r\nhello";
    let response = one(bytes).unwrap();
    assert_eq!(response.status, 200);
    assert_eq!(response.body_len, 5);
    assert_eq!(response.wire_len, bytes.len() as u64);
    assert!(response.keep_alive);
}

#[test]
fn chunked_body_with_extension_and_trailer() {
    let bytes = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\
                  5;name=value\r\nhello\r\n6\r\n world\r\n0\r\nTrailer: yes\r\n\r\n";
    let response = one(bytes).unwrap();
    assert_eq!(response.body_len, 11);
    assert_eq!(response.wire_len, bytes.len() as u64);
}

#[test]
fn http10_closes_unless_keep_alive_and_connection_close_is_honoured() {
    let plain = one(b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n").unwrap();
    assert!(!plain.keep_alive);
    let kept = one(b"HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 0\r\n\r\n");
    assert!(kept.unwrap().keep_alive);
    let closed = one(b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n");
    assert!(!closed.unwrap().keep_alive);
}

#[test]
fn body_until_close_completes_at_end_of_stream() {
    let response = one(b"HTTP/1.1 200 OK\r\n\r\nabcdef").unwrap();
    assert_eq!(response.body_len, 6);
    assert!(!response.keep_alive);
}

#[test]
fn no_body_for_204_and_304_and_interim_responses_are_skipped() {
    let response = one(b"HTTP/1.1 304 Not Modified\r\nContent-Length: 99\r\n\r\n").unwrap();
    assert_eq!((response.status, response.body_len), (304, 0));
    let bytes = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
    let response = one(bytes).unwrap();
    assert_eq!((response.status, response.body_len), (200, 2));
    assert_eq!(response.wire_len, bytes.len() as u64);
}

#[test]
fn pipelined_responses_are_split_exactly() {
    let bytes = b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\naHTTP/1.1 404 Not Found\r\n\
                  Content-Length: 2\r\n\r\nbbHTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\
                  1\r\nc\r\n0\r\n\r\n";
    for step in [1, 5, bytes.len()] {
        let (responses, error) = parse_all(bytes, step);
        assert_eq!(error, None);
        let summary: Vec<_> = responses.iter().map(|r| (r.status, r.body_len)).collect();
        assert_eq!(summary, [(200, 1), (404, 2), (200, 1)]);
    }
}

#[test]
fn truncated_bodies_and_heads_are_truncated() {
    assert_eq!(
        one(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort"),
        Err(ParseError::Truncated)
    );
    assert_eq!(
        one(b"HTTP/1.1 200 OK\r\nContent-Le"),
        Err(ParseError::Truncated)
    );
    assert_eq!(
        one(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel"),
        Err(ParseError::Truncated)
    );
    // A close between responses is not an error.
    assert_eq!(ResponseParser::new().finish(), Ok(None));
}

#[test]
fn malformed_status_lines() {
    for bad in [
        &b"HTTP/2.0 200 OK\r\n\r\n"[..],
        b"HTTP/1.1 200OK\r\n\r\n",
        b"HTTP/1.1 20 OK\r\n\r\n",
        b"HTTP/1.1 099 Low\r\n\r\n",
        b"HTTP/1.1 600 High\r\n\r\n",
        b"HTTP/1.1 2x0 OK\r\n\r\n",
        b"http/1.1 200 OK\r\n\r\n",
        b"garbage\r\n\r\n",
        b"HTTP/1.1 200 OK\n\n",
        b"HTTP/1.1 200 O\x01K\r\n\r\n",
        b"<html>oops</html>",
    ] {
        assert_eq!(one(bad), Err(ParseError::BadStatusLine), "{bad:?}");
    }
}

#[test]
fn garbage_is_reported_before_the_head_ends() {
    // A server that sends junk and then waits must not turn into a timeout.
    let mut parser = ResponseParser::new();
    assert_eq!(parser.feed(b"SSH-2.0"), Err(ParseError::BadStatusLine));
}

#[test]
fn malformed_headers() {
    for bad in [
        &b"HTTP/1.1 200 OK\r\n folded: x\r\n\r\n"[..],
        b"HTTP/1.1 200 OK\r\nNo colon here\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nBad Name: x\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nName : x\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nX: a\x00b\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nX: a\nY: b\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 1e3\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 5, 6\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, chunked\r\n\r\n",
        b"HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
    ] {
        assert!(
            matches!(one(bad), Err(ParseError::BadHeader(_))),
            "{:?}",
            String::from_utf8_lossy(bad)
        );
    }
    // Identical repeated lengths are one length (RFC 9110 §8.6).
    let same = one(b"HTTP/1.1 200 OK\r\nContent-Length: 2, 2\r\nContent-Length: 2\r\n\r\nok");
    assert_eq!(same.unwrap().body_len, 2);
}

#[test]
fn oversized_head_is_a_bad_header() {
    let mut parser = ResponseParser::new();
    parser.feed(b"HTTP/1.1 200 OK\r\n").unwrap();
    let filler = vec![b'a'; 1024];
    let mut error = None;
    for _ in 0..80 {
        if let Err(found) = parser.feed(&filler) {
            error = Some(found);
            break;
        }
    }
    assert!(matches!(error, Some(ParseError::BadHeader(_))));
}

#[test]
fn malformed_chunked_bodies() {
    let head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
    for body in [
        &b"zz\r\n"[..],
        b"5\r\nhello!!\r\n0\r\n\r\n",
        b"5\nhello\r\n0\r\n\r\n",
        b"11111111111111111\r\n",
        b"5\r\nhello\r\n0\r\nX: y\n\r\n",
    ] {
        let bytes = [&head[..], body].concat();
        assert!(
            matches!(one(&bytes), Err(ParseError::BadChunked(_))),
            "{:?}",
            String::from_utf8_lossy(body)
        );
    }
}

#[test]
fn state_queries_follow_the_response() {
    let mut parser = ResponseParser::new();
    assert!(parser.is_between_responses() && parser.in_head());
    parser.feed(b"HTTP/1.1 200 OK\r\n").unwrap();
    assert!(!parser.is_between_responses() && parser.in_head());
    parser.feed(b"Content-Length: 3\r\n\r\nab").unwrap();
    assert!(!parser.in_head());
    let (used, done) = parser.feed(b"cHTTP").unwrap();
    assert_eq!((used, done.map(|r| r.body_len)), (1, Some(3)));
    assert!(parser.is_between_responses());
}
