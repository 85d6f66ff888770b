//! Request-smuggling defences (RFC 9112 §6.3, §11.2): every ambiguous framing is a 400 followed by
//! a close, a transfer coding ampd does not implement a 501 followed by a close (§6.1), and the
//! server keeps serving other connections.

use crate::support;

use std::time::Duration;
use support::*;

const CASES: &[(&str, &str)] = &[
    ("CL and TE", "GET /ok.txt HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"),
    ("TE and CL", "GET /ok.txt HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n"),
    ("two differing CLs", "GET /ok.txt HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!"),
    ("CL with plus", "GET /ok.txt HTTP/1.1\r\nHost: t\r\nContent-Length: +5\r\n\r\nhello"),
    ("CL list", "GET /ok.txt HTTP/1.1\r\nHost: t\r\nContent-Length: 1,2\r\n\r\nab"),
    ("CL negative", "GET /ok.txt HTTP/1.1\r\nHost: t\r\nContent-Length: -1\r\n\r\n"),
    ("CL hex", "GET /ok.txt HTTP/1.1\r\nHost: t\r\nContent-Length: 0x5\r\n\r\nhello"),
    ("CL overflow", "GET /ok.txt HTTP/1.1\r\nHost: t\r\nContent-Length: 99999999999999999999999\r\n\r\n"),
    ("obs-fold", "GET /ok.txt HTTP/1.1\r\nHost: t\r\nX-Folded: a\r\n b\r\n\r\n"),
    ("obs-fold tab", "GET /ok.txt HTTP/1.1\r\nHost: t\r\nX-Folded: a\r\n\tb\r\n\r\n"),
    ("space before colon", "GET /ok.txt HTTP/1.1\r\nHost: t\r\nContent-Length : 5\r\n\r\nhello"),
    ("tab before colon", "GET /ok.txt HTTP/1.1\r\nHost: t\r\nX-A\t: 5\r\n\r\n"),
    ("bare CR in value", "GET /ok.txt HTTP/1.1\r\nHost: t\r\nX-A: a\rb\r\n\r\n"),
    ("bare CR line end", "GET /ok.txt HTTP/1.1\rHost: t\r\n\r\n"),
    ("NUL in value", "GET /ok.txt HTTP/1.1\r\nHost: t\r\nX-A: a\0b\r\n\r\n"),
    ("control char in value", "GET /ok.txt HTTP/1.1\r\nHost: t\r\nX-A: a\x01b\r\n\r\n"),
    ("DEL in value", "GET /ok.txt HTTP/1.1\r\nHost: t\r\nX-A: a\x7fb\r\n\r\n"),
    ("invalid name char", "GET /ok.txt HTTP/1.1\r\nHost: t\r\nX(A): b\r\n\r\n"),
    ("empty name", "GET /ok.txt HTTP/1.1\r\nHost: t\r\n: b\r\n\r\n"),
    ("leading whitespace header", "GET /ok.txt HTTP/1.1\r\n Host: t\r\n\r\n"),
    ("missing Host in 1.1", "GET /ok.txt HTTP/1.1\r\nX-A: b\r\n\r\n"),
    ("two Hosts", "GET /ok.txt HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"),
    ("Host list", "GET /ok.txt HTTP/1.1\r\nHost: a, b\r\n\r\n"),
    ("TE chunked twice", "GET /ok.txt HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked, chunked\r\n\r\n0\r\n\r\n"),
    ("bad chunk size", "GET /ok.txt HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n"),
    ("chunk size overflow", "GET /ok.txt HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffffffffff\r\nx\r\n0\r\n\r\n"),
    ("chunk data without CRLF", "GET /ok.txt HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhelloXX0\r\n\r\n"),
];

/// RFC 9112 §6.1: a transfer coding ampd does not implement is 501 (as nginx and lighttpd
/// answer), also where `chunked` is not the final coding; the body cannot be framed, so the
/// connection closes after it as after a 400.
const UNKNOWN_CODINGS: &[(&str, &str)] = &[
    (
        "TE unknown coding",
        "GET /ok.txt HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: xchunked\r\n\r\n0\r\n\r\n",
    ),
    (
        "TE chunked not last",
        "GET /ok.txt HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked, identity\r\n\r\n",
    ),
    (
        "TE gzip before chunked",
        "GET /ok.txt HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
    ),
];

default_arch!(fn ambiguous_framing_is_refused_and_closed(arch) {
    let root = TempRoot::new();
    root.file("ok.txt", "ok");
    let server = Server::start(Options::new(root.path(), arch));
    let mut failures = Vec::new();
    let cases = CASES
        .iter()
        .map(|(name, raw)| (name, raw, 400))
        .chain(UNKNOWN_CODINGS.iter().map(|(name, raw)| (name, raw, 501)));
    for (name, raw, want) in cases {
        let mut conn = Conn::open(server.addr());
        let _ = conn.try_send(raw.as_bytes());
        match conn.try_read_response("GET") {
            Ok(response) => {
                if response.status != want {
                    failures.push(format!("{name}: status {} (want {want})", response.status));
                    continue;
                }
                if !response.connection_has("close") {
                    failures.push(format!("{name}: no Connection: close"));
                }
                if !conn.closed_within(Duration::from_secs(5)) {
                    failures.push(format!("{name}: connection stayed open"));
                }
            }
            Err(error) => failures.push(format!("{name}: no response ({error})")),
        }
        assert_eq!(get(server.addr(), "/ok.txt").status, 200, "server still serves after {name}");
    }
    assert!(failures.is_empty(), "smuggling defences failed:\n{}", failures.join("\n"));
});

default_arch!(fn identical_duplicate_content_length_is_not_smuggling(arch) {
    // RFC 9112 §6.3 allows a recipient to accept identical repeated lengths; ampd may also
    // reject them. Either way it must never treat the body as a second request.
    let root = TempRoot::new();
    root.file("ok.txt", "ok");
    let server = Server::start(Options::new(root.path(), arch));
    let raw = "GET /ok.txt HTTP/1.1\r\nHost: t\r\nContent-Length: 22\r\nContent-Length: 22\r\n\r\nGET /x HTTP/1.1\r\nH: t\r\n";
    let responses = support::http::parse_all(&send_raw(server.addr(), raw), "GET");
    assert_eq!(responses.len(), 1, "the body was parsed as a request: {responses:?}");
    assert!(responses[0].status == 200 || responses[0].status == 400);
});
