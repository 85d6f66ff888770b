//! The reverse proxy's exchange under every engine, against real upstreams (tests/fixtures/
//! upstream.py, ampd itself, and the raw-socket `RawUpstream` that records what arrives): bodies
//! both ways with either framing, the methods a proxy location passes, bodies-less responses,
//! `Expect: 100-continue`, the body limit, and a static ampd behind the proxy (HEAD, 304).
//! Headers, smuggling and upstream errors are in tests/it/proxy_headers.rs and
//! tests/it/proxy_errors.rs; large bodies and memory in tests/it/proxy_bulk.rs.

use crate::support;

use std::io::Write;
use std::net::TcpStream;
use std::time::Duration;
use support::bulk::{self, read_head};
use support::http::{build_request, Conn};
use support::proxy::{self, location, pool};
use support::pyupstream::PyUpstream;
use support::upstream::{RawUpstream, Reply};
use support::*;

const WAIT: Duration = Duration::from_secs(10);

for_each_arch!(fn bodies_pass_both_ways_with_either_framing(arch) {
    let root = TempRoot::new();
    let upstream = PyUpstream::start("py");
    let server = proxy::start(
        &root,
        arch,
        &pool("app", &[upstream.addr()], ""),
        &location("/api/", "app", "max_body = \"8MiB\""),
    );
    let mut conn = Conn::open(server.addr());
    let hello = conn.get("/api/hello?x=1", &[]);
    assert_eq!(hello.status, 200, "{hello:?}");
    assert_eq!(hello.body_text(), "py GET /api/hello?x=1\n");
    assert_eq!(hello.header("x-upstream"), Some("py"));

    conn.send("POST /api/echo HTTP/1.1\r\nHost: test\r\nContent-Length: 5\r\n\r\nhello");
    let echo = conn.read_proxied("POST");
    assert_eq!((echo.status, echo.body.as_slice()), (200, &b"hello"[..]), "{echo:?}");
    assert_eq!(echo.header("x-method"), Some("POST"));

    conn.send("PUT /api/echo HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;x=y\r\nde\r\n0\r\n\r\n");
    let echo = conn.read_proxied("PUT");
    assert_eq!((echo.status, echo.body.as_slice()), (200, &b"abcde"[..]), "{echo:?}");
    assert_eq!(echo.header("x-body-sha256"), Some(bulk::sha256(b"abcde").as_str()));
    assert_eq!(echo.header("x-method"), Some("PUT"));

    // Bodies larger than any buffer, both framings, on the same connection.
    let len = 3 << 20;
    let mut stream = TcpStream::connect(server.addr()).unwrap();
    stream.set_read_timeout(Some(WAIT)).unwrap();
    write!(stream, "POST /api/sha256 HTTP/1.1\r\nHost: test\r\nContent-Length: {len}\r\n\r\n").unwrap();
    bulk::write_pattern(&mut stream, len).unwrap();
    let expected = format!("{len} {}\n", bulk::pattern_sha256(len));
    assert_eq!(read_small_body(&mut stream), expected);
    write!(stream, "PUT /api/sha256 HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: chunked\r\n\r\n").unwrap();
    bulk::write_pattern_chunked(&mut stream, len, 50_000).unwrap();
    assert_eq!(read_small_body(&mut stream), expected);
});

/// Reads a response with a `Content-Length` body of at most a few KiB, as text.
fn read_small_body(stream: &mut TcpStream) -> String {
    let head = read_head(stream).expect("a response head");
    assert_eq!(head.status, 200, "{}", head.head);
    let len = head.content_length.expect("Content-Length") as usize;
    let mut body = head.early;
    let mut chunk = [0u8; 4096];
    while body.len() < len {
        let n = support::read_some(&mut *stream, &mut chunk).expect("body");
        assert!(n > 0, "body cut short");
        body.extend_from_slice(&chunk[..n]);
    }
    String::from_utf8_lossy(&body).into_owned()
}

default_arch!(fn proxy_location_passes_every_method_static_still_405(arch) {
    let root = TempRoot::new();
    root.file("page.txt", "static page");
    let upstream = PyUpstream::start("py");
    let server = proxy::start(
        &root,
        arch,
        &pool("app", &[upstream.addr()], ""),
        &location("/api/", "app", ""),
    );
    let mut conn = Conn::open(server.addr());
    for method in ["POST", "PUT", "PATCH", "DELETE", "OPTIONS", "GET"] {
        conn.send(format!("{method} /api/m HTTP/1.1\r\nHost: test\r\nContent-Length: 0\r\n\r\n"));
        let response = conn.read_proxied(method);
        assert_eq!(response.status, 200, "{method}: {response:?}");
        assert_eq!(response.body_text(), format!("py {method} /api/m\n"));
    }
    for method in ["POST", "PUT", "DELETE"] {
        let response = request(server.addr(), method, "/page.txt", &[("Content-Length", "0")]);
        assert_eq!(response.status, 405, "{method} to a static file: {response:?}");
        assert!(response.header("allow").is_some_and(|allow| allow.contains("GET")));
    }
    assert_eq!(get(server.addr(), "/page.txt").body_text(), "static page");
});

default_arch!(fn head_204_and_304_carry_no_body(arch) {
    let root = TempRoot::new();
    let upstream = RawUpstream::start(|seen| match (seen.method.as_str(), seen.target.as_str()) {
        ("HEAD", _) => Reply::raw("HTTP/1.1 200 OK\r\nContent-Length: 100\r\nX-Head: yes\r\n\r\n"),
        (_, "/204") => Reply::raw("HTTP/1.1 204 No Content\r\nX-Empty: yes\r\n\r\n"),
        (_, "/304") => Reply::raw("HTTP/1.1 304 Not Modified\r\nETag: \"v1\"\r\n\r\n"),
        _ => Reply::ok("raw", "fine"),
    });
    let server = proxy::start(
        &root,
        arch,
        &pool("app", &[upstream.addr()], "max_fails = 0"),
        &location("/", "app", ""),
    );
    let mut conn = Conn::open(server.addr());
    for (method, path, status) in [("HEAD", "/x", 200), ("GET", "/204", 204), ("GET", "/304", 304)] {
        conn.send(build_request(method, path, &[]));
        let response = conn.read_proxied(method);
        assert_eq!(response.status, status, "{method} {path}: {response:?}");
        assert!(response.body.is_empty());
        // The next response on the connection starts cleanly: nothing was sent as a body.
        let next = conn.get("/ok", &[]);
        assert_eq!(next.body_text(), "fine", "after {method} {path}");
    }
    conn.send(build_request("HEAD", "/x", &[]));
    let head = conn.read_proxied("HEAD");
    assert_eq!(head.header("content-length"), Some("100"), "HEAD keeps the upstream's length");
    assert_eq!(head.header("x-head"), Some("yes"));
});

default_arch!(fn a_static_ampd_upstream_answers_head_and_304(arch) {
    let back_root = TempRoot::new();
    back_root.file("files/a.txt", "file from the ampd upstream\n");
    let backend = Server::start(Options::new(back_root.path(), "reactor"));
    let root = TempRoot::new();
    let server = proxy::start(
        &root,
        arch,
        &pool("ampd", &[backend.addr()], ""),
        &location("/files/", "ampd", ""),
    );
    let mut conn = Conn::open(server.addr());
    let file = conn.get("/files/a.txt", &[]);
    assert_eq!(file.status, 200, "{file:?}");
    assert_eq!(file.body_text(), "file from the ampd upstream\n");
    let etag = file.header("etag").expect("the upstream's ETag passes").to_string();
    conn.send(build_request("HEAD", "/files/a.txt", &[]));
    let head = conn.read_proxied("HEAD");
    assert_eq!(head.status, 200);
    assert_eq!(head.header("content-length"), Some("28"));
    let unchanged = conn.get("/files/a.txt", &[("If-None-Match", &etag)]);
    assert_eq!(unchanged.status, 304, "{unchanged:?}");
    assert!(unchanged.body.is_empty());
    assert_eq!(conn.get("/files/missing", &[]).status, 404);
    assert_eq!(conn.get("/files/a.txt", &[]).status, 200, "still in step");
});

for_each_arch!(fn expect_continue_is_answered_before_the_body(arch) {
    let root = TempRoot::new();
    let upstream = PyUpstream::start("py");
    let server = proxy::start(
        &root,
        arch,
        &pool("app", &[upstream.addr()], ""),
        &location("/api/", "app", ""),
    );
    let mut stream = TcpStream::connect(server.addr()).unwrap();
    stream.set_read_timeout(Some(WAIT)).unwrap();
    stream
        .write_all(b"POST /api/echo HTTP/1.1\r\nHost: test\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n")
        .unwrap();
    // The client waits for the interim answer before it sends a byte of the body.
    let mut seen = Vec::new();
    let mut chunk = [0u8; 256];
    while support::http::find(&seen, b"\r\n\r\n").is_none() {
        let n = support::read_some(&mut stream, &mut chunk).expect("100 Continue before the body");
        assert!(n > 0, "closed instead of 100 Continue");
        seen.extend_from_slice(&chunk[..n]);
    }
    assert!(seen.starts_with(b"HTTP/1.1 100 "), "{:?}", String::from_utf8_lossy(&seen));
    stream.write_all(b"ping").unwrap();
    let mut conn_bytes = seen[support::http::find(&seen, b"\r\n\r\n").unwrap() + 4..].to_vec();
    let head = loop {
        if let Some(end) = support::http::find(&conn_bytes, b"\r\n\r\n") {
            break String::from_utf8_lossy(&conn_bytes[..end]).into_owned();
        }
        let n = support::read_some(&mut stream, &mut chunk).expect("the final response");
        assert!(n > 0);
        conn_bytes.extend_from_slice(&chunk[..n]);
    };
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(head.contains("X-Body-Length: 4"), "{head}");
});

default_arch!(fn body_over_max_body_is_413_and_never_forwarded(arch) {
    let root = TempRoot::new();
    let upstream = RawUpstream::answering("raw", "ok");
    let server = proxy::start(
        &root,
        arch,
        &pool("app", &[upstream.addr()], ""),
        &location("/api/", "app", "max_body = \"1KiB\""),
    );
    let big = "x".repeat(2000);
    let response = request(server.addr(), "POST", "/api/up", &[("Content-Length", "2000")]);
    assert_eq!(response.status, 413, "{response:?}");
    let mut conn = Conn::open(server.addr());
    let _ = conn.try_send(
        format!("POST /api/up HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: chunked\r\n\r\n7d0\r\n{big}\r\n0\r\n\r\n")
            .as_bytes(),
    );
    let chunked = conn.read_proxied("POST");
    assert_eq!(chunked.status, 413, "{chunked:?}");
    // Within the limit it passes.
    let mut conn = Conn::open(server.addr());
    conn.send(format!("POST /api/up HTTP/1.1\r\nHost: test\r\nContent-Length: 1000\r\n\r\n{}", &big[..1000]));
    assert_eq!(conn.read_proxied("POST").status, 200);
    let seen = upstream.wait_requests(1, WAIT);
    assert_eq!(seen.len(), 1, "only the request within the limit arrived: {seen:?}");
    assert_eq!(seen[0].body_len, 1000);
});

default_arch!(fn a_unix_socket_upstream_serves_a_prefix_replaced_target(arch) {
    let root = TempRoot::new();
    let path = root.outside_dir().join("app.sock");
    let upstream = PyUpstream::start_unix("unix", &path);
    let server = proxy::start(
        &root,
        arch,
        &format!("[upstream.local]\nservers = [\"unix:{}\"]\n", path.display()),
        "[[site.location]]\npath = \"/app/\"\nproxy_pass = \"http://local/v2/\"\n",
    );
    let mut conn = Conn::open(server.addr());
    let answer = conn.get("/app/items?id=7", &[]);
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(answer.body_text(), "unix GET /v2/items?id=7\n", "the prefix is replaced");
    assert_eq!(answer.header("x-upstream"), Some(upstream.name()));
    conn.send("POST /app/echo HTTP/1.1\r\nHost: test\r\nContent-Length: 3\r\n\r\nabc");
    assert_eq!(conn.read_proxied("POST").body, b"abc");
});
