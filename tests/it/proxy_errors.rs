//! The proxy's answers when the upstream fails, under every engine: a malformed response (bad
//! status line, CR/LF/NUL in a field, conflicting lengths, an unknown transfer coding, obs-fold,
//! bad chunking) is a `502` and never passed through; silence is a `504`; a refused connect and a
//! reset before the head are `502`; each is logged naming the upstream; the server keeps serving.

use crate::support;

use std::time::{Duration, Instant};
use support::http::{build_request, parse_all, send_raw_open, Conn};
use support::proxy::{self, location, pool, refusing_address};
use support::upstream::{RawUpstream, Reply};
use support::*;

/// Each script: a path and the upstream's whole answer to it.
const MALFORMED: &[(&str, &str)] = &[
    ("/status-line", "HTTP/1.1 2000 OK\r\nContent-Length: 2\r\n\r\nok"),
    ("/not-http", "SSH-2.0-OpenSSH_9.2\r\n\r\n"),
    ("/cr-in-value", "HTTP/1.1 200 OK\r\nX-A: a\rb\r\nContent-Length: 2\r\n\r\nok"),
    ("/lf-in-value", "HTTP/1.1 200 OK\r\nX-A: a\nSet-Cookie: planted=1\r\nContent-Length: 2\r\n\r\nok"),
    ("/nul-in-value", "HTTP/1.1 200 OK\r\nX-A: a\0b\r\nContent-Length: 2\r\n\r\nok"),
    ("/space-in-name", "HTTP/1.1 200 OK\r\nX A: b\r\nContent-Length: 2\r\n\r\nok"),
    ("/obs-fold", "HTTP/1.1 200 OK\r\nX-A: a\r\n b\r\nContent-Length: 2\r\n\r\nok"),
    ("/two-lengths", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nokx"),
    ("/bad-length", "HTTP/1.1 200 OK\r\nContent-Length: 2x\r\n\r\nok"),
    ("/te-and-cl", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 2\r\n\r\n2\r\nok\r\n0\r\n\r\n"),
    ("/te-gzip", "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nok"),
];

/// Chunked bodies that go wrong after a good head: the client must never get them as a whole
/// response (a `502`, or a response cut short by a close).
const BAD_CHUNKING: &[(&str, &str)] = &[
    ("/chunk-size", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n"),
    ("/chunk-crlf", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhelloXX0\r\n\r\n"),
    ("/chunk-overflow", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nfffffffffffffffffffff\r\nx\r\n0\r\n\r\n"),
];

fn scripted(seen: &support::upstream::Seen) -> Reply {
    let path = seen.target.as_str();
    if let Some((_, bytes)) = MALFORMED
        .iter()
        .chain(BAD_CHUNKING)
        .find(|(name, _)| *name == path)
    {
        return Reply::BytesThenClose(bytes.as_bytes().to_vec());
    }
    match path {
        "/silent" => Reply::Never,
        "/reset" => Reply::BytesThenReset(Vec::new()),
        "/chunked-good" => Reply::raw(
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4;ext=1\r\nwiki\r\n5\r\npedia\r\n0\r\nX-Trailer: t\r\n\r\n",
        ),
        _ => Reply::ok("raw", "fine"),
    }
}

fn start(arch: &str, root: &TempRoot, upstream: &RawUpstream) -> Server {
    // One try, passive health off: every answer is about this request, not an earlier one.
    proxy::start(
        root,
        arch,
        &pool(
            "app",
            &[upstream.addr()],
            "tries = 1\nmax_fails = 0\nread_timeout = \"700ms\"",
        ),
        &location("/", "app", ""),
    )
}

default_arch!(fn malformed_upstream_responses_are_502(arch) {
    let root = TempRoot::new();
    let upstream = RawUpstream::start(scripted);
    let server = start(arch, &root, &upstream);
    for (path, _) in MALFORMED {
        // With `Connection: close`, everything after the answer is visible: one 502, nothing of
        // the upstream's bytes.
        let wire = send_raw_open(server.addr(), build_request("GET", path, &[("Connection", "close")]));
        let text = String::from_utf8_lossy(&wire).into_owned();
        let responses = parse_all(&wire, "GET");
        assert_eq!(responses.len(), 1, "{path}: {text}");
        assert_eq!(responses[0].status, 502, "{path}: {text}");
        assert!(!text.contains("planted") && !text.contains("X-A"), "{path}: {text}");
    }
    assert!(
        server.wait_for_stderr(&upstream.addr().to_string(), Duration::from_secs(5)),
        "the error log names the upstream: {}",
        server.stderr()
    );
    assert_eq!(get(server.addr(), "/fine").body_text(), "fine", "still serving");
});

default_arch!(fn bad_chunking_is_never_passed_through_whole(arch) {
    let root = TempRoot::new();
    let upstream = RawUpstream::start(scripted);
    let server = start(arch, &root, &upstream);
    for (path, _) in BAD_CHUNKING {
        let mut conn = Conn::open(server.addr());
        conn.send(build_request("GET", path, &[("Connection", "close")]));
        match conn.try_read_proxied("GET") {
            Ok(response) => assert_eq!(response.status, 502, "{path}: {response:?}"),
            // The head was on its way: the body is cut short by the close, never completed.
            Err(error) => assert!(
                matches!(error.kind(), std::io::ErrorKind::UnexpectedEof | std::io::ErrorKind::ConnectionReset),
                "{path}: {error}"
            ),
        }
    }
    // Correct chunking is re-framed correctly (chunked again, or with a length).
    let mut conn = Conn::open(server.addr());
    conn.send(build_request("GET", "/chunked-good", &[]));
    let good = conn.read_proxied("GET");
    assert_eq!((good.status, good.body_text().as_str()), (200, "wikipedia"), "{good:?}");
    assert_eq!(conn.get("/fine", &[]).body_text(), "fine", "in step after it");
});

for_each_arch!(fn silence_is_504_reset_and_refused_are_502(arch) {
    let root = TempRoot::new();
    let upstream = RawUpstream::start(scripted);
    let server = start(arch, &root, &upstream);
    let started = Instant::now();
    let timed_out = request(server.addr(), "GET", "/silent", &[]);
    assert_eq!(timed_out.status, 504, "{timed_out:?}");
    assert!(
        timed_out.body_text().contains("<title>504 Gateway Timeout</title>"),
        "a titled page: {}",
        timed_out.body_text()
    );
    assert!(started.elapsed() < Duration::from_secs(8), "{:?}", started.elapsed());
    // A reset before any response byte: a POST is not retried, it is a 502.
    let reset = request(server.addr(), "POST", "/reset", &[("Content-Length", "0")]);
    assert_eq!(reset.status, 502, "{reset:?}");
    assert_eq!(get(server.addr(), "/fine").body_text(), "fine");

    let refused_root = TempRoot::new();
    let nowhere = refusing_address();
    let refused_server = proxy::start(
        &refused_root,
        arch,
        &pool("gone", &[nowhere], "tries = 1"),
        &location("/", "gone", ""),
    );
    let started = Instant::now();
    let refused = get(refused_server.addr(), "/x");
    assert_eq!(refused.status, 502, "{refused:?}");
    assert!(
        refused.body_text().contains("<title>502 Bad Gateway</title>"),
        "a titled page: {}",
        refused.body_text()
    );
    assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());
    assert!(
        refused_server.wait_for_stderr(&nowhere.to_string(), Duration::from_secs(5)),
        "the error log names the refusing upstream: {}",
        refused_server.stderr()
    );
    // Pipelined requests behind a failed one are answered too.
    let wire = send_raw(
        refused_server.addr(),
        [build_request("GET", "/a", &[]), build_request("GET", "/b", &[("Connection", "close")])].concat(),
    );
    let statuses: Vec<u16> = parse_all(&wire, "GET").iter().map(|r| r.status).collect();
    assert_eq!(statuses, [502, 502]);
});

// Issue 35, item 18, under every engine (each enforces the upstream's deadline): interim
// responses do not hold a request past `read_timeout`, which runs from the end of the request
// to the final response head (`504`), and they cannot go on for ever however fast they come
// (past a cap, `502`); each is logged.
for_each_arch!(fn endless_interim_responses_end_in_502_or_504(arch) {
    let root = TempRoot::new();
    let upstream = RawUpstream::start(|seen| {
        let every = match seen.target.as_str() {
            "/processing-fast" => Duration::from_millis(10),
            _ => Duration::from_millis(150),
        };
        Reply::Repeat { bytes: b"HTTP/1.1 102 Processing\r\n\r\n".to_vec(), every }
    });
    let server = start(arch, &root, &upstream);
    let started = Instant::now();
    let capped = request(server.addr(), "GET", "/processing-fast", &[]);
    assert_eq!(capped.status, 502, "{arch}: {capped:?}");
    assert!(started.elapsed() < Duration::from_secs(5), "{arch}: {:?}", started.elapsed());
    let started = Instant::now();
    let slow = request(server.addr(), "GET", "/processing-slow", &[]);
    assert_eq!(slow.status, 504, "{arch}: {slow:?}");
    // read_timeout is 700 ms: the 150 ms interims did not extend it.
    assert!(started.elapsed() < Duration::from_secs(3), "{arch}: {:?}", started.elapsed());
    assert!(
        server.wait_for_stderr("interim responses", Duration::from_secs(5)),
        "{arch}: the cap is logged: {}",
        server.stderr()
    );
});
