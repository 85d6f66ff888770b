//! What the proxy forwards, as the raw-socket upstream records it byte for byte, under every
//! engine: a head re-serialised from the parsed request (never the client's bytes), hop-by-hop
//! fields and those named in `Connection` removed both ways, `X-Forwarded-For` / `Forwarded`
//! appended to a trusted chain and replaced for anyone else, one body framing, and no client
//! framing trick (CL.TE, TE.CL, differing Content-Lengths) that reaches the upstream as two
//! requests.

use crate::support;

use std::time::Duration;
use support::http::Conn;
use support::proxy::{self, location, pool};
use support::upstream::{RawUpstream, Reply, Seen};
use support::*;

const WAIT: Duration = Duration::from_secs(10);

fn start_recording(arch: &str, root: &TempRoot) -> (RawUpstream, Server) {
    let upstream = RawUpstream::start(|_| {
        Reply::raw(
            "HTTP/1.1 200 OK\r\nConnection: X-Up-Secret\r\nX-Up-Secret: 1\r\n\
             Keep-Alive: timeout=1\r\nProxy-Connection: keep-alive\r\nX-Up-Kept: 1\r\n\
             Content-Length: 2\r\n\r\nok",
        )
    });
    let server = proxy::start(
        root,
        arch,
        &pool("app", &[upstream.addr()], "max_fails = 0"),
        &format!(
            "{}{}",
            location("/api/", "app", ""),
            location("/trusted/", "app", "forwarded_trust = [\"127.0.0.1\"]")
        ),
    );
    (upstream, server)
}

const HOP_BY_HOP_REQUEST: &str = "GET /api/h?q=1 HTTP/1.1\r\nHost: test\r\n\
    Connection: keep-alive, X-Secret\r\nX-Secret: s\r\nKeep-Alive: timeout=5\r\n\
    Proxy-Connection: keep-alive\r\nTE: trailers\r\nUpgrade: h2c\r\nProxy-Authorization: Basic eDp5\r\nX-Kept: yes\r\n\
    X-Forwarded-For: 10.9.8.7\r\nForwarded: for=10.9.8.7\r\n\r\n";

default_arch!(fn hop_by_hop_fields_are_stripped_both_ways(arch) {
    let root = TempRoot::new();
    let (upstream, server) = start_recording(arch, &root);
    let mut conn = Conn::open(server.addr());
    conn.send(HOP_BY_HOP_REQUEST);
    let response = conn.read_proxied("GET");
    assert_eq!(response.status, 200, "{response:?}");
    assert_eq!(response.header("x-up-kept"), Some("1"));
    for name in ["x-up-secret", "keep-alive", "proxy-connection"] {
        assert!(!response.has_header(name), "{name} reached the client: {response:?}");
    }
    assert!(!response.connection_has("x-up-secret"));

    let seen = upstream.wait_requests(1, WAIT).remove(0);
    let raw = String::from_utf8_lossy(&upstream.raw(seen.connection)).into_owned();
    assert!(raw.starts_with("GET /api/h?q=1 HTTP/1.1\r\n"), "{raw}");
    assert_eq!(seen.header("host"), Some("test"), "{raw}");
    assert_eq!(seen.header("x-kept"), Some("yes"), "{raw}");
    for name in ["x-secret", "keep-alive", "proxy-connection", "te", "upgrade", "proxy-authorization"] {
        assert!(seen.values(name).is_empty(), "{name} was forwarded:\n{raw}");
    }
    for value in seen.values("connection") {
        assert!(!value.to_ascii_lowercase().contains("x-secret"), "{raw}");
    }
    assert!(!raw.contains("X-Secret"), "{raw}");
    assert!(upstream.malformed().is_empty(), "{:?}", upstream.malformed());
});

fn forwarded_for(seen: &Seen) -> String {
    seen.values("x-forwarded-for").join(", ")
}

default_arch!(fn forwarded_for_is_replaced_untrusted_and_appended_trusted(arch) {
    let root = TempRoot::new();
    let (upstream, server) = start_recording(arch, &root);
    let mut conn = Conn::open(server.addr());
    conn.send(HOP_BY_HOP_REQUEST);
    assert_eq!(conn.read_proxied("GET").status, 200);
    conn.send(HOP_BY_HOP_REQUEST.replace("/api/h", "/trusted/h"));
    assert_eq!(conn.read_proxied("GET").status, 200);
    let seen = upstream.wait_requests(2, WAIT);
    let (untrusted, trusted) = (&seen[0], &seen[1]);
    assert_eq!(forwarded_for(untrusted), "127.0.0.1", "{:?}", untrusted.headers);
    assert_eq!(
        forwarded_for(trusted).replace(' ', ""),
        "10.9.8.7,127.0.0.1",
        "{:?}",
        trusted.headers
    );
    let untrusted_forwarded = untrusted.values("forwarded").join(",");
    assert!(untrusted_forwarded.contains("127.0.0.1"), "{untrusted_forwarded}");
    assert!(!untrusted_forwarded.contains("10.9.8.7"), "{untrusted_forwarded}");
    let trusted_forwarded = trusted.values("forwarded").join(",");
    assert!(
        trusted_forwarded.contains("10.9.8.7") && trusted_forwarded.contains("127.0.0.1"),
        "{trusted_forwarded}"
    );
    assert_eq!(untrusted.header("x-forwarded-proto"), Some("http"));
    assert_eq!(untrusted.header("x-forwarded-host"), Some("test"));
});

default_arch!(fn the_head_is_reserialised_with_one_framing(arch) {
    let root = TempRoot::new();
    let (upstream, server) = start_recording(arch, &root);
    let mut conn = Conn::open(server.addr());
    // Odd spacing and case: the upstream gets the parsed fields written out again.
    conn.send("POST /api/b HTTP/1.1\r\nhOST:   test  \r\nx-odd:\tv \r\ncontent-length: 3\r\n\r\nabc");
    assert_eq!(conn.read_proxied("POST").status, 200);
    conn.send("POST /api/c HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nab\r\n1\r\nc\r\n0\r\n\r\n");
    assert_eq!(conn.read_proxied("POST").status, 200);
    let seen = upstream.wait_requests(2, WAIT);
    for request in &seen {
        let lengths = request.values("content-length").len();
        let encodings = request.values("transfer-encoding").len();
        assert_eq!(lengths + encodings, 1, "one framing: {:?}", request.headers);
        assert_eq!(request.body, b"abc");
    }
    let raw = String::from_utf8_lossy(&upstream.all_raw()).into_owned();
    assert!(!raw.contains("hOST:   test"), "the client's bytes were passed: {raw}");
    assert_eq!(seen[0].header("host"), Some("test"));
    assert_eq!(seen[0].header("x-odd"), Some("v"));
    assert!(upstream.malformed().is_empty(), "{:?}", upstream.malformed());
});

const SMUGGLING: &[(&str, &str)] = &[
    (
        "CL.TE",
        "POST /api/a HTTP/1.1\r\nHost: test\r\nContent-Length: 47\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /api/smuggled HTTP/1.1\r\nHost: test\r\n\r\n",
    ),
    (
        "TE.CL",
        "POST /api/a HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: chunked\r\nContent-Length: 4\r\n\r\n2a\r\nGET /api/smuggled HTTP/1.1\r\nHost: test\r\n\r\n\r\n0\r\n\r\n",
    ),
    (
        "differing Content-Lengths",
        "POST /api/a HTTP/1.1\r\nHost: test\r\nContent-Length: 0\r\nContent-Length: 42\r\n\r\nGET /api/smuggled HTTP/1.1\r\nHost: test\r\n\r\n",
    ),
    (
        "TE obfuscated",
        "POST /api/a HTTP/1.1\r\nHost: test\r\nContent-Length: 47\r\nTransfer-Encoding: xchunked\r\n\r\n0\r\n\r\nGET /api/smuggled HTTP/1.1\r\nHost: test\r\n\r\n",
    ),
];

default_arch!(fn framing_tricks_never_reach_the_upstream_as_two_requests(arch) {
    let root = TempRoot::new();
    let (upstream, server) = start_recording(arch, &root);
    for (name, bytes) in SMUGGLING {
        let answer = String::from_utf8_lossy(&send_raw(server.addr(), bytes)).into_owned();
        assert!(answer.starts_with("HTTP/1.1 400"), "{name}: {answer}");
    }
    // An ordinary request after them: it is what the upstream sees, alone.
    let mut conn = Conn::open(server.addr());
    assert_eq!(conn.get("/api/after", &[]).status, 200);
    let seen = upstream.wait_requests(1, WAIT);
    let targets: Vec<&str> = seen.iter().map(|request| request.target.as_str()).collect();
    assert_eq!(targets, ["/api/after"], "what reached the upstream");
    assert!(upstream.malformed().is_empty(), "{:?}", upstream.malformed());
});

default_arch!(fn identical_duplicate_content_lengths_reach_the_upstream_once_or_not_at_all(arch) {
    // RFC 9112 §6.3 lets a recipient take `3, 3` as one length, or refuse it (nginx: 400).
    // Either way the upstream must never see the field twice, nor a second request.
    let root = TempRoot::new();
    let (upstream, server) = start_recording(arch, &root);
    let mut conn = Conn::open(server.addr());
    conn.send("POST /api/d HTTP/1.1\r\nHost: test\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc");
    let response = conn.read_proxied("POST");
    match response.status {
        200 => {
            let seen = upstream.wait_requests(1, WAIT).remove(0);
            assert_eq!(seen.values("content-length"), ["3"], "{:?}", seen.headers);
            assert_eq!(seen.body, b"abc");
        }
        400 => {}
        other => panic!("{arch}: {other}: {response:?}"),
    }
    assert_eq!(get(server.addr(), "/api/after").status, 200);
    let targets: Vec<String> = upstream.requests().into_iter().map(|seen| seen.target).collect();
    assert!(targets.len() <= 2 && targets.last().map(String::as_str) == Some("/api/after"), "{targets:?}");
});

/// Issue 35, item 16, on the default engine (request semantics the engines share): a field
/// named with `_` would reach a WSGI application as the `-` field it aliases
/// (`X_Forwarded_For: 6.6.6.6` read as `HTTP_X_FORWARDED_FOR`, before ampd's own
/// `X-Forwarded-For`), so it stays behind unless the location says `underscores_in_headers`;
/// `X-Real-IP`, `X-Forwarded-Port` and `X-Forwarded-Prefix` from a client that is not trusted
/// stay behind as its `X-Forwarded-For` does.
#[test]
fn underscored_names_and_a_clients_forwarding_claims_stay_behind() {
    let root = TempRoot::new();
    let upstream = RawUpstream::start(|_| Reply::ok("app", "ok"));
    let server = proxy::start(
        &root,
        "reactor",
        &pool("app", &[upstream.addr()], "max_fails = 0"),
        &format!(
            "{}{}",
            location("/api/", "app", ""),
            location("/legacy/", "app", "underscores_in_headers = true")
        ),
    );
    let claims = [
        ("X_Forwarded_For", "6.6.6.6"),
        ("X-Real-IP", "6.6.6.6"),
        ("X-Forwarded-Port", "1"),
        ("X-Forwarded-Prefix", "/evil"),
        ("X_Api_Key", "k"),
        ("X-Kept", "yes"),
    ];
    assert_eq!(request(server.addr(), "GET", "/api/x", &claims).status, 200);
    assert_eq!(
        request(server.addr(), "GET", "/legacy/x", &claims).status,
        200
    );
    let seen = upstream.wait_requests(2, WAIT);
    let (api, legacy) = (&seen[0], &seen[1]);
    assert_eq!(forwarded_for(api), "127.0.0.1", "{:?}", api.headers);
    assert_eq!(api.header("x-kept"), Some("yes"));
    for name in [
        "x_forwarded_for",
        "x-real-ip",
        "x-forwarded-port",
        "x-forwarded-prefix",
        "x_api_key",
    ] {
        assert!(
            api.values(name).is_empty(),
            "{name} forwarded: {:?}",
            api.headers
        );
    }
    // With underscores_in_headers, other names with `_` pass; one that stands for a
    // forwarding field ampd writes never does.
    assert_eq!(
        legacy.header("x_api_key"),
        Some("k"),
        "{:?}",
        legacy.headers
    );
    assert!(
        legacy.values("x_forwarded_for").is_empty(),
        "{:?}",
        legacy.headers
    );
    assert_eq!(forwarded_for(legacy), "127.0.0.1", "{:?}", legacy.headers);
}

/// Issue 35, items 20 and 21, on the default engine: `X-Sendfile` (a path on the upstream's
/// disk) and `X-Accel-*` where the location does not act on them, and a 204's
/// `Content-Length` (RFC 9110 §8.6), never reach the client.
#[test]
fn server_instructions_and_a_204s_length_stay_behind() {
    let root = TempRoot::new();
    let upstream = RawUpstream::start(|seen| match seen.target.as_str() {
        "/empty" => Reply::raw("HTTP/1.1 204 No Content\r\nContent-Length: 0\r\nX-Kept: 1\r\n\r\n"),
        _ => Reply::raw(
            "HTTP/1.1 200 OK\r\nX-Sendfile: /etc/passwd\r\nX-Accel-Buffering: no\r\n\
             X-Accel-Redirect: /etc/shadow\r\nX-Kept: 1\r\nContent-Length: 2\r\n\r\nok",
        ),
    });
    let server = proxy::start(
        &root,
        "reactor",
        &pool("app", &[upstream.addr()], "max_fails = 0"),
        &location("/", "app", "x_accel_redirect = false"),
    );
    let mut conn = Conn::open(server.addr());
    let sent = conn.get("/file", &[]);
    assert_eq!(
        (sent.status, sent.body_text().as_str()),
        (200, "ok"),
        "{sent:?}"
    );
    assert_eq!(sent.header("x-kept"), Some("1"));
    for name in ["x-sendfile", "x-accel-buffering", "x-accel-redirect"] {
        assert!(
            !sent.has_header(name),
            "{name} reached the client: {sent:?}"
        );
    }
    let empty = conn.get("/empty", &[]);
    assert_eq!(empty.status, 204, "{empty:?}");
    assert_eq!(empty.header("x-kept"), Some("1"));
    assert!(!empty.has_header("content-length"), "{empty:?}");
    assert_eq!(conn.get("/file", &[]).status, 200, "in step after the 204");
}
