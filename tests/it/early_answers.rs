//! Requests whose answer is known before they are complete get it at once: bytes that can
//! never begin a request (binary garbage, a TLS ClientHello on the plain port), a request line
//! whose version cannot be HTTP/1.x, a chunk size past the body limit, and an
//! `Expect: 100-continue` request to a method that will be refused (RFC 9110 §10.1.1). Also
//! the authority of absolute-form targets and `Host` (RFC 9112 §3.2.2, RFC 3986 §3.2).

use crate::support;

use std::time::{Duration, Instant};
use support::*;

/// The header and body timeouts are 20 s by default: an answer within this is "at once".
const AT_ONCE: Duration = Duration::from_secs(3);

/// Sends `bytes` without closing our side, then reads one response; it must come in time.
fn answer_to(addr: std::net::SocketAddr, bytes: &[u8]) -> (Conn, Response) {
    let mut conn = Conn::open(addr);
    conn.set_read_timeout(AT_ONCE);
    let started = Instant::now();
    conn.send(bytes);
    let response = conn.try_read_response("GET").unwrap_or_else(|error| {
        panic!(
            "no answer to {:?} within {AT_ONCE:?}: {error}",
            bytes.escape_ascii().to_string()
        )
    });
    assert!(started.elapsed() < AT_ONCE, "{:?}", started.elapsed());
    (conn, response)
}

/// Reads the first response head byte by byte (so that nothing after it is consumed).
fn first_head(conn: &Conn) -> String {
    let mut stream = conn.stream();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match support::read_some(&mut stream, &mut byte) {
            Ok(1) => head.push(byte[0]),
            other => panic!(
                "no whole head ({other:?}) after {:?}",
                String::from_utf8_lossy(&head)
            ),
        }
    }
    String::from_utf8(head).unwrap()
}

for_each_arch!(fn garbage_is_answered_before_a_line_end(arch) {
    let root = TempRoot::new();
    root.file("a.txt", "alpha");
    let server = Server::start(Options::new(root.path(), arch));
    let tls_client_hello: &[u8] = b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\x5a\x8f";
    for garbage in [&b"\x8a\x81\xa0"[..], tls_client_hello, b"GET /a.txt HTTX", b"GET /\x01"] {
        let (mut conn, response) = answer_to(server.addr(), garbage);
        assert_eq!(response.status, 400, "{}: {response:?}", garbage.escape_ascii());
        assert!(response.connection_has("close"), "{response:?}");
        assert!(conn.closed_within(AT_ONCE), "{} left open", garbage.escape_ascii());
    }
    // A major version other than 1 is 505 as soon as its digit is in.
    let (_, response) = answer_to(server.addr(), b"GET /a.txt HTTP/2");
    assert_eq!(response.status, 505, "{response:?}");
    // Everyone else is still served.
    assert_eq!(get(server.addr(), "/a.txt").body, b"alpha");
});

for_each_arch!(fn a_chunk_size_past_the_body_limit_is_refused_at_once(arch) {
    let root = TempRoot::new();
    root.file("a.txt", "alpha");
    let server = Server::start(Options::new(root.path(), arch));
    let head = "GET /a.txt HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n";
    let (mut conn, response) = answer_to(server.addr(), format!("{head}7fffffffffffffff\r\n").as_bytes());
    assert_eq!(response.status, 413, "{response:?}");
    assert!(response.connection_has("close"));
    assert!(conn.closed_within(AT_ONCE));
    // As soon as the size's digits end (here with an extension, before the line end).
    let (_, response) = answer_to(server.addr(), format!("{head}100001;x").as_bytes());
    assert_eq!(response.status, 413, "{response:?}");
    // A size that overflows 64 bits is a broken body: 400.
    let (_, response) = answer_to(server.addr(), format!("{head}10000000000000000").as_bytes());
    assert_eq!(response.status, 400, "{response:?}");
    assert_eq!(get(server.addr(), "/a.txt").body, b"alpha");
});

for_each_arch!(fn expect_continue_to_a_refused_method_gets_the_final_status_at_once(arch) {
    let root = TempRoot::new();
    root.file("a.txt", "alpha");
    let server = Server::start(Options::new(root.path(), arch));
    for (request, status) in [
        ("POST /a.txt HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n", 405),
        ("PUT /a.txt HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\nExpect: 100-continue\r\n\r\n", 405),
        ("PROPFIND /a.txt HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n", 501),
    ] {
        let mut conn = Conn::open(server.addr());
        conn.set_read_timeout(AT_ONCE);
        conn.send(request);
        // No `100 Continue`: the final status first (RFC 9110 §10.1.1).
        let head = first_head(&conn);
        assert!(head.starts_with(&format!("HTTP/1.1 {status} ")), "{request:?}: {head:?}");
        assert!(head.contains("\r\nConnection: close\r\n"), "{head:?}");
        // A client may send the body anyway: the connection still ends cleanly.
        let _ = conn.try_send(b"hello");
        conn.shutdown_write();
        let rest = conn.read_to_end().expect("read the rest");
        let length: usize = head
            .lines()
            .find_map(|line| line.strip_prefix("Content-Length: "))
            .and_then(|value| value.parse().ok())
            .expect("Content-Length");
        assert_eq!(rest.len(), length, "{request:?}: only the page follows");
    }
    // A request the location accepts is still invited.
    let mut conn = Conn::open(server.addr());
    conn.send("GET /a.txt HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n");
    assert_eq!(first_head(&conn), "HTTP/1.1 100 Continue\r\n\r\n");
    conn.send("hello");
    assert_eq!(conn.read_response("GET").body, b"alpha");
});

#[test]
fn absolute_form_and_host_authorities_are_validated() {
    let root = TempRoot::new();
    root.file("hello.txt", "main hello");
    root.file("other/hello.txt", "other hello");
    let config = write_config(
        &root,
        "reactor",
        "[[site]]\ndefault = true\nroot = \"www\"\n\n[[site]]\nserver_names = [\"other.test\"]\nroot = \"www/other\"\n",
    );
    let server = Server::start(Options::config_file(&config));
    let status = |request: String| {
        let reply = send_raw(server.addr(), request.as_bytes());
        support::http::parse_all(&reply, "GET")[0].status
    };
    for bad in [
        "http://localhost:80x/",
        "http://localhost:80:80/",
        "http://localhost::80/",
        "http://4713::abcd:8001/",
        "http://u@localhost/",
        "http://localhost:65536/",
    ] {
        assert_eq!(
            status(format!("GET {bad}hello.txt HTTP/1.0\r\n\r\n")),
            400,
            "{bad}"
        );
    }
    for bad in [
        "localhost:80x",
        "localhost:80:80",
        "localhost::80",
        "4713::abcd:8001",
    ] {
        assert_eq!(
            status(format!("GET /hello.txt HTTP/1.1\r\nHost: {bad}\r\n\r\n")),
            400,
            "{bad}"
        );
    }
    assert_eq!(
        status("GET http://localhost:80/hello.txt HTTP/1.0\r\n\r\n".into()),
        200
    );
    assert_eq!(
        status("GET http://[::1]:80/hello.txt HTTP/1.0\r\n\r\n".into()),
        200
    );
    // The target's authority wins over Host (RFC 9112 §3.2.2).
    let reply = send_raw(
        server.addr(),
        "GET http://other.test/hello.txt HTTP/1.1\r\nHost: main.test\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(
        support::http::parse_all(&reply, "GET")[0].body_text(),
        "other hello"
    );
    let reply = send_raw(
        server.addr(),
        "GET /hello.txt HTTP/1.1\r\nHost: other.test\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(
        support::http::parse_all(&reply, "GET")[0].body_text(),
        "other hello"
    );
}

#[test]
fn expect_continue_on_a_refused_connection_gets_503_at_once() {
    let root = TempRoot::new();
    root.file("a.txt", "alpha");
    let config = write_config(
        &root,
        "reactor",
        "[admission]\nmax_connections_per_address = 1\n\n[[site]]\nroot = \"www\"\n",
    );
    let server = Server::start(Options::config_file(&config));
    let mut first = Conn::open(server.addr());
    assert_eq!(first.get("/a.txt", &[]).body, b"alpha");
    // Over the cap: the answer is known from the head, so no `100 Continue`.
    let mut conn = Conn::open(server.addr());
    conn.set_read_timeout(AT_ONCE);
    conn.send(
        "GET /a.txt HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n",
    );
    let head = first_head(&conn);
    assert!(head.starts_with("HTTP/1.1 503 "), "{head:?}");
    assert!(head.contains("\r\nRetry-After: "), "{head:?}");
    assert!(head.contains("\r\nConnection: close\r\n"), "{head:?}");
}
