//! Tests of the CGI head parser: every kind, every error, line ends, limits, splits.

use super::*;

const LIMITS: Limits = Limits {
    max_head_bytes: 256,
    max_headers: 4,
};

/// Parses `bytes` whole, then byte by byte; both must agree.
fn parse(bytes: &[u8]) -> Result<CgiParse, CgiError> {
    let whole = CgiParser::new(LIMITS).parse(bytes);
    let mut parser = CgiParser::new(LIMITS);
    let mut piecewise = Ok(CgiParse::Partial);
    for end in 1..=bytes.len() {
        piecewise = parser.parse(&bytes[..end]);
        if !matches!(piecewise, Ok(CgiParse::Partial)) {
            break;
        }
    }
    assert_eq!(piecewise, whole, "byte by byte differs");
    whole
}

fn complete(bytes: &[u8]) -> (CgiHead, usize) {
    match parse(bytes) {
        Ok(CgiParse::Complete { head, len }) => (head, len),
        other => panic!("{}: {other:?}", bytes.escape_ascii()),
    }
}

fn error(bytes: &[u8]) -> CgiError {
    match parse(bytes) {
        Err(error) => error,
        other => panic!("{}: {other:?}", bytes.escape_ascii()),
    }
}

fn names(head: &CgiHead) -> Vec<&str> {
    head.headers.iter().map(|header| &*header.name).collect()
}

#[test]
fn a_document() {
    let bytes = b"Content-Type: text/html\r\nX-Powered-By: test\r\n\r\n<html>";
    let (head, len) = complete(bytes);
    assert_eq!(len, bytes.len() - 6);
    assert_eq!(head.status, 200);
    assert_eq!(&*head.reason, "OK");
    assert_eq!(head.kind, CgiKind::Document);
    assert_eq!(names(&head), ["Content-Type", "X-Powered-By"]);
    assert_eq!(head.header("content-type"), Some(&b"text/html"[..]));
}

#[test]
fn lf_only_and_mixed_line_ends() {
    let (head, len) = complete(b"Content-Type: text/plain\nX-A:  1 \t\r\n\nbody");
    assert_eq!(len, 37);
    assert_eq!(head.header("x-a"), Some(&b"1"[..]));
    let (_, len) = complete(b"\n");
    assert_eq!(len, 1, "an empty head is a document with no fields");
}

#[test]
fn status_with_and_without_reason() {
    let (head, _) = complete(b"Status: 404 Gone Fishing\r\nContent-Type: text/plain\r\n\r\n");
    assert_eq!((head.status, &*head.reason), (404, "Gone Fishing"));
    assert_eq!(
        names(&head),
        ["Content-Type"],
        "Status is not a field of the response"
    );
    let (head, _) = complete(b"status:503\n\n");
    assert_eq!((head.status, &*head.reason), (503, "Service Unavailable"));
    let (head, _) = complete(b"Status: 299\n\n");
    assert_eq!((head.status, &*head.reason), (299, ""));
    let (head, _) = complete(b"Status: 100 \n\n");
    assert_eq!(head.status, 100);
}

#[test]
fn local_redirect() {
    let (head, _) = complete(b"Location: /other/page?x=1\r\n\r\n");
    assert_eq!(head.kind, CgiKind::LocalRedirect("/other/page?x=1".into()));
    assert_eq!(head.status, 200);
    // With a Status the script answers itself (Apache's rule): a document.
    let (head, _) = complete(b"Status: 301 Moved\nLocation: /new\n\n");
    assert_eq!(head.kind, CgiKind::Document);
    assert_eq!(head.status, 301);
    assert_eq!(head.header("location"), Some(&b"/new"[..]));
    assert_eq!(error(b"Location: /a b\n\n"), CgiError::InvalidLocalRedirect);
    assert_eq!(
        error(b"Location: /caf\xc3\xa9\n\n"),
        CgiError::InvalidLocalRedirect
    );
}

#[test]
fn client_redirect() {
    let (head, _) = complete(b"Location: https://example.com/x\r\n\r\n");
    assert_eq!(head.kind, CgiKind::ClientRedirect);
    assert_eq!((head.status, &*head.reason), (302, "Found"));
    let (head, _) =
        complete(b"Location: mailto:a@b\nStatus: 303 See Other\nContent-Type: text/html\n\n");
    assert_eq!(head.kind, CgiKind::ClientRedirect);
    assert_eq!(head.status, 303);
    // Not absolute, not local: a document carrying the field as it is.
    let (head, _) = complete(b"Location: other.html\n\n");
    assert_eq!((head.kind, head.status), (CgiKind::Document, 200));
    let (head, _) = complete(b"Location: 1http://x\n\n");
    assert_eq!(head.kind, CgiKind::Document);
}

#[test]
fn into_response_head() {
    let (head, _) = complete(b"Status: 201 Created\nContent-Length: 5\nContent-Type: a/b\n\n");
    let response = head.into_response_head();
    assert_eq!(response.version, Version::Http11);
    assert_eq!(response.status, 201);
    assert_eq!(&*response.reason, "Created");
    assert!(response.keep_alive);
    assert_eq!(response.content_length(), Some(5));
    assert_eq!(response.header("status"), None);
    assert_eq!(response.headers.len(), 2);
}

#[test]
fn content_length_rules() {
    let (head, _) = complete(b"Content-Length: 7\nContent-Length: 7\n\n");
    assert_eq!(head.headers.len(), 2);
    assert_eq!(
        error(b"Content-Length: 7\nContent-Length: 8\n\n"),
        CgiError::ConflictingContentLength
    );
    assert_eq!(
        error(b"Content-Length: -1\n\n"),
        CgiError::InvalidContentLength
    );
    assert_eq!(
        error(b"Content-Length: 0x10\n\n"),
        CgiError::InvalidContentLength
    );
}

#[test]
fn every_error() {
    let cases: &[(&[u8], CgiError)] = &[
        (b"Content-Type: a\rb\n\n", CgiError::BareCr),
        (b"X: a\r\r\n\n", CgiError::BareCr),
        (b"HTTP/1.1 200 OK\r\n\r\n", CgiError::MissingColon),
        (b"no colon here\n\n", CgiError::MissingColon),
        (b": empty name\n\n", CgiError::BadHeaderName),
        (b"Content-Type : text/html\n\n", CgiError::BadHeaderName),
        (b"X\0Y: 1\n\n", CgiError::BadHeaderName),
        (b"X\x01: 1\n\n", CgiError::BadHeaderName),
        (b"X-A: a\0b\n\n", CgiError::InvalidHeaderValue),
        (b"X-A: a\x1bb\n\n", CgiError::InvalidHeaderValue),
        (b"X-A: a\x7f\n\n", CgiError::InvalidHeaderValue),
        (b"X-A: a\n b\n\n", CgiError::ObsFold),
        (b"X-A: a\n\tb\n\n", CgiError::ObsFold),
        (b"Status: 200\nStatus: 404\n\n", CgiError::DuplicateStatus),
        (
            b"Location: /a\nLocation: /b\n\n",
            CgiError::DuplicateLocation,
        ),
        (b"Status: 99 Low\n\n", CgiError::InvalidStatus),
        (b"Status: 600 High\n\n", CgiError::InvalidStatus),
        (b"Status: 2000\n\n", CgiError::InvalidStatus),
        (b"Status: 20\n\n", CgiError::InvalidStatus),
        (b"Status: abc\n\n", CgiError::InvalidStatus),
        (b"Status: 200\tOK\n\n", CgiError::InvalidStatus),
        (b"Status:\n\n", CgiError::InvalidStatus),
        (
            b"Transfer-Encoding: chunked\n\n",
            CgiError::TransferEncoding,
        ),
    ];
    for (bytes, expected) in cases {
        assert_eq!(error(bytes), *expected, "{}", bytes.escape_ascii());
        assert_eq!(expected.status(), 502);
    }
    assert_eq!(
        CgiError::Incomplete.to_string(),
        "CGI output ended before the end of its header"
    );
}

#[test]
fn values_may_hold_htab_and_obs_text() {
    let (head, _) = complete(b"X-A: a\tb \xff\n\n");
    assert_eq!(head.header("x-a"), Some(&b"a\tb \xff"[..]));
}

#[test]
fn limits() {
    let (_, len) = complete(b"A: 1\nB: 2\nC: 3\nStatus: 200\n\n");
    assert_eq!(len, 28, "four lines, Status counted, are within the limit");
    assert_eq!(
        error(b"A: 1\nB: 2\nC: 3\nD: 4\nE: 5\n\n"),
        CgiError::TooManyHeaders
    );
    let long = [b"X: ".as_slice(), &[b'x'; 260], b"\n\n"].concat();
    assert_eq!(error(&long), CgiError::HeadTooLarge);
    // Over the limit with no line end yet: refused at once, not when the line ends.
    assert_eq!(error(&[b'x'; 257]), CgiError::HeadTooLarge);
    let exact = [b"X: ".as_slice(), &[b'x'; 251], b"\n\n"].concat();
    assert_eq!(exact.len(), 256);
    assert!(matches!(
        parse(&exact),
        Ok(CgiParse::Complete { len: 256, .. })
    ));
}

#[test]
fn end_of_output() {
    let mut parser = CgiParser::new(LIMITS);
    assert_eq!(parser.parse(b"Content-Type: a/b\n"), Ok(CgiParse::Partial));
    assert_eq!(
        parser.end_of_output(b"Content-Type: a/b\n"),
        Err(CgiError::Incomplete)
    );
    assert_eq!(
        CgiParser::new(LIMITS).end_of_output(b""),
        Err(CgiError::Incomplete)
    );
    assert!(matches!(
        CgiParser::new(LIMITS).end_of_output(b"Content-Type: a/b\n\n"),
        Ok(CgiParse::Complete { len: 19, .. })
    ));
}
