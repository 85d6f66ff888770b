//! The reverse-proxy tests' upstreams and clients checked against each other, without ampd: the
//! raw-socket upstream records exactly what arrives and answers as scripted, the Python upstream
//! serves, echoes, streams and speaks WebSocket, and the WebSocket client agrees with it. A bug
//! here is then never mistaken for a proxy bug.

use crate::support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};
use support::bulk::{self, read_head, read_pattern_body};
use support::http::{build_request, Conn};
use support::pyupstream::PyUpstream;
use support::upstream::{RawUpstream, Reply};
use support::websocket::{self, Handshake, BINARY, PING, PONG, TEXT};
use support::TempRoot;

const WAIT: Duration = Duration::from_secs(10);

#[test]
fn raw_upstream_records_exact_bytes_and_parses_each_request() {
    let upstream = RawUpstream::answering("raw", "hi");
    let mut conn = Conn::open(upstream.addr());
    let wire = b"POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhelloPUT /b?q=1 HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3;ext=1\r\nabc\r\n2\r\nde\r\n0\r\nTrailer-A: 1\r\n\r\nGET /c HTTP/1.1\r\nHost: x\r\n\r\n";
    conn.send(wire);
    for _ in 0..3 {
        let response = conn.read_response("GET");
        assert_eq!(response.status, 200);
        assert_eq!(response.header("x-upstream"), Some("raw"));
        assert_eq!(response.body, b"hi");
    }
    let seen = upstream.wait_requests(3, WAIT);
    assert_eq!(upstream.raw(0), wire.to_vec(), "every byte, as sent");
    assert_eq!(upstream.connections(), 1, "one keep-alive connection");
    assert_eq!(
        (seen[0].method.as_str(), seen[0].target.as_str()),
        ("POST", "/a")
    );
    assert_eq!(seen[0].body, b"hello");
    assert!(!seen[0].chunked);
    assert_eq!(
        (seen[1].method.as_str(), seen[1].target.as_str()),
        ("PUT", "/b?q=1")
    );
    assert_eq!(seen[1].body, b"abcde");
    assert!(seen[1].chunked);
    assert_eq!(seen[2].target, "/c");
    assert_eq!(seen[2].header("host"), Some("x"));
    assert!(upstream.malformed().is_empty());
}

#[test]
fn raw_upstream_refuses_to_parse_ambiguous_framing() {
    let upstream = RawUpstream::answering("raw", "hi");
    let mut conn = Conn::open(upstream.addr());
    conn.send("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n");
    assert!(conn.closed_within(WAIT), "closed without an answer");
    let deadline = Instant::now() + WAIT;
    while upstream.malformed().is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(upstream.malformed().len(), 1, "{:?}", upstream.malformed());
    assert!(upstream.requests().is_empty());
}

#[test]
fn raw_upstream_scripted_replies() {
    let upstream = RawUpstream::start(|seen| match seen.target.as_str() {
        "/close" => {
            Reply::BytesThenClose(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc".to_vec())
        }
        "/reset" => {
            Reply::BytesThenReset(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc".to_vec())
        }
        "/delay" => Reply::Delay(Duration::from_millis(300), Box::new(Reply::status(204))),
        "/never" => Reply::Never,
        "/big" => Reply::Generated(3 << 20),
        "/cut" => Reply::Truncated {
            declared: 3 << 20,
            sent: 1 << 20,
        },
        _ => Reply::status(404),
    });
    let addr = upstream.addr();

    let mut conn = Conn::open(addr);
    conn.send(build_request("GET", "/close", &[]));
    let rest = conn.read_to_end().unwrap();
    assert!(rest.ends_with(b"\r\n\r\nabc"), "{rest:?}");

    let mut stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(WAIT)).unwrap();
    stream
        .write_all(&build_request("GET", "/reset", &[]))
        .unwrap();
    let mut got = Vec::new();
    let mut chunk = [0u8; 1024];
    let error = loop {
        match stream.read(&mut chunk) {
            Ok(0) => panic!("FIN instead of a reset after {got:?}"),
            Ok(n) => got.extend_from_slice(&chunk[..n]),
            Err(error) => break error,
        }
    };
    assert_eq!(error.kind(), std::io::ErrorKind::ConnectionReset, "{error}");

    let started = Instant::now();
    let mut conn = Conn::open(addr);
    conn.send(build_request("GET", "/delay", &[]));
    assert_eq!(conn.read_response("GET").status, 204);
    assert!(started.elapsed() >= Duration::from_millis(300));

    let mut conn = Conn::open(addr);
    conn.send(build_request("GET", "/never", &[]));
    assert!(
        !conn.closed_within(Duration::from_millis(300)),
        "no answer, no close"
    );

    let mut stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(WAIT)).unwrap();
    stream
        .write_all(&build_request("GET", "/big", &[]))
        .unwrap();
    let head = read_head(&mut stream).unwrap();
    assert_eq!((head.status, head.content_length), (200, Some(3 << 20)));
    let got = read_pattern_body(&mut stream, &head.early, 3 << 20, |_| true).unwrap();
    assert_eq!(got, 3 << 20);
    let mut cut = TcpStream::connect(addr).unwrap();
    cut.set_read_timeout(Some(WAIT)).unwrap();
    cut.write_all(&build_request("GET", "/cut", &[])).unwrap();
    let cut_head = read_head(&mut cut).unwrap();
    assert_eq!(cut_head.content_length, Some(3 << 20));
    assert_eq!(
        read_pattern_body(&mut cut, &cut_head.early, 3 << 20, |_| true).unwrap(),
        1 << 20
    );
    // Still keep-alive after the generated body.
    stream
        .write_all(&build_request("GET", "/other", &[]))
        .unwrap();
    assert_eq!(read_head(&mut stream).unwrap().status, 404);
    // The close, the reset and (its client gone) the unanswered one have ended.
    drop(conn);
    assert!(
        upstream.wait_closed(3, WAIT),
        "{} closed",
        upstream.connections_closed()
    );
}

#[test]
fn raw_upstream_answers_expect_continue_before_the_body() {
    let upstream = RawUpstream::answering("raw", "ok");
    let mut conn = Conn::open(upstream.addr());
    conn.send("POST / HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n");
    let mut interim = [0u8; 25];
    conn.stream().set_read_timeout(Some(WAIT)).unwrap();
    conn.stream().read_exact(&mut interim).unwrap();
    assert_eq!(&interim, b"HTTP/1.1 100 Continue\r\n\r\n");
    conn.send("body");
    assert_eq!(conn.read_response("POST").body, b"ok");
    assert_eq!(upstream.wait_requests(1, WAIT)[0].body, b"body");
}

#[test]
fn stopped_raw_upstream_refuses_connections() {
    let mut upstream = RawUpstream::start(|_| Reply::Never);
    let addr = upstream.addr();
    let mut held = Conn::open(addr);
    held.send(build_request("GET", "/", &[]));
    upstream.wait_requests(1, WAIT);
    upstream.stop();
    assert!(held.closed_within(WAIT), "stop ends held connections");
    assert!(TcpStream::connect(addr).is_err(), "refused after stop");
}

#[test]
fn python_upstream_serves_echoes_and_streams() {
    let upstream = PyUpstream::start("py");
    let addr = upstream.addr();
    let mut conn = Conn::open(addr);
    let hello = conn.get("/anything?x=1", &[]);
    assert_eq!(hello.status, 200);
    assert_eq!(hello.body_text(), "py GET /anything?x=1\n");
    conn.send(build_request("HEAD", "/bytes/1000", &[]));
    let head = conn.read_response("HEAD");
    assert_eq!(head.header("content-length"), Some("1000"));
    assert!(head.body.is_empty());
    let headers = conn.get("/v1/headers", &[("X-Test", "a b")]);
    assert!(
        headers.body_text().contains("X-Test: a b"),
        "{}",
        headers.body_text()
    );
    assert!(headers
        .body_text()
        .starts_with("GET /v1/headers HTTP/1.1\n"));

    conn.send("PUT /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello");
    let echo = conn.read_response("PUT");
    assert_eq!(echo.body, b"hello");
    assert_eq!(
        echo.header("x-body-sha256"),
        Some(bulk::sha256(b"hello").as_str())
    );
    assert_eq!(echo.header("x-request-chunked"), Some("no"));
    assert_eq!(echo.header("x-method"), Some("PUT"));
    conn.send("POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n");
    let chunked = conn.read_response("POST");
    assert_eq!(chunked.body, b"abcde");
    assert_eq!(chunked.header("x-request-chunked"), Some("yes"));
    conn.send(build_request("GET", "/status/204", &[]));
    assert_eq!(conn.read_response("GET").status, 204);
    assert_eq!(conn.get("/health", &[]).body, b"ok\n");

    // A streamed upload, hashed as it arrives, agrees with the pattern's sha256.
    let len = 5 << 20;
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(WAIT)).unwrap();
    write!(
        stream,
        "POST /sha256 HTTP/1.1\r\nHost: x\r\nContent-Length: {len}\r\n\r\n"
    )
    .unwrap();
    bulk::write_pattern(&mut stream, len).unwrap();
    let head = read_head(&mut stream).unwrap();
    let length = head.content_length.unwrap() as usize;
    let mut body = head.early.clone();
    while body.len() < length {
        let mut chunk = [0u8; 256];
        let n = stream.read(&mut chunk).unwrap();
        assert!(n > 0);
        body.extend_from_slice(&chunk[..n]);
    }
    assert_eq!(
        String::from_utf8_lossy(&body),
        format!("{len} {}\n", bulk::pattern_sha256(len))
    );
    // The same, chunked.
    write!(
        stream,
        "POST /sha256 HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    .unwrap();
    bulk::write_pattern_chunked(&mut stream, 300_000, 7_000).unwrap();
    let head = read_head(&mut stream).unwrap();
    assert_eq!(head.status, 200);
    let mut body = head.early.clone();
    while body.len() < head.content_length.unwrap() as usize {
        let mut chunk = [0u8; 256];
        let n = stream.read(&mut chunk).unwrap();
        assert!(n > 0);
        body.extend_from_slice(&chunk[..n]);
    }
    assert_eq!(
        String::from_utf8_lossy(&body),
        format!("300000 {}\n", bulk::pattern_sha256(300_000))
    );

    let mut stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(WAIT)).unwrap();
    stream
        .write_all(&build_request("GET", "/x/bytes/2000000", &[]))
        .unwrap();
    let head = read_head(&mut stream).unwrap();
    assert_eq!(head.content_length, Some(2_000_000));
    assert_eq!(
        read_pattern_body(&mut stream, &head.early, 2_000_000, |_| true).unwrap(),
        2_000_000
    );
}

#[test]
fn python_upstream_honours_expect_continue() {
    let upstream = PyUpstream::start("py");
    let mut conn = Conn::open(upstream.addr());
    conn.send(
        "POST /echo HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n",
    );
    let mut interim = [0u8; 25];
    conn.stream().read_exact(&mut interim).unwrap();
    assert_eq!(&interim, b"HTTP/1.1 100 Continue\r\n\r\n");
    conn.send("ok");
    assert_eq!(conn.read_response("POST").body, b"ok");
}

#[test]
fn websocket_client_and_python_echo_agree() {
    let upstream = PyUpstream::start("py");
    let Handshake::Open(mut client) = websocket::connect(upstream.addr(), "/ws") else {
        panic!("the Python upstream refused the WebSocket handshake");
    };
    client.echo(TEXT, b"hello");
    client.echo(BINARY, &[0u8, 1, 2, 255]);
    client.echo(BINARY, &vec![7u8; 300]); // 16-bit length
    client.echo(BINARY, &vec![9u8; 70_000]); // 64-bit length
    client.send(true, PING, b"p").unwrap();
    let pong = client.receive().unwrap();
    assert_eq!((pong.opcode, pong.payload.as_slice()), (PONG, &b"p"[..]));
    client.close();
    // A plain GET of the endpoint is refused with 426.
    match websocket::connect(RawUpstream::answering("raw", "no").addr(), "/ws") {
        Handshake::Refused(status, _) => assert_eq!(status, 200),
        Handshake::Open(_) => panic!("a 200 is not an upgrade"),
    }
    let mut conn = Conn::open(upstream.addr());
    assert_eq!(conn.get("/ws", &[]).status, 426);
}

#[test]
fn process_tree_memory_is_read() {
    let kib = bulk::tree_rss_kib(std::process::id());
    assert!(kib > 100, "{kib} KiB");
}

#[test]
fn python_upstream_listens_on_a_unix_socket() {
    let dir = TempRoot::new();
    let path = dir.outside_dir().join("app.sock");
    let upstream = PyUpstream::start_unix("unix", &path);
    let mut stream =
        std::os::unix::net::UnixStream::connect(upstream.unix_path().unwrap()).unwrap();
    stream.set_read_timeout(Some(WAIT)).unwrap();
    stream
        .write_all(b"GET /hi HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let head = read_head(&mut stream).unwrap();
    assert_eq!(head.status, 200, "{}", head.head);
    let mut body = head.early;
    let mut chunk = [0u8; 64];
    while body.len() < head.content_length.unwrap() as usize {
        let n = stream.read(&mut chunk).unwrap();
        assert!(n > 0);
        body.extend_from_slice(&chunk[..n]);
    }
    assert_eq!(body, b"unix GET /hi\n");
}
