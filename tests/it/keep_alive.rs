//! Persistent connections (RFC 9112 §9): HTTP/1.1 default keep-alive, `Connection: close`,
//! HTTP/1.0 rules, pipelining order, request bodies on GET (discarded or 413, `Expect:
//! 100-continue`), how connections end, and clients slow to send their first request.

use crate::support;

use std::time::Duration;
use support::http::build_request;
use support::*;

for_each_arch!(fn hundred_requests_on_one_connection(arch) {
    let root = TempRoot::new();
    root.file("a.txt", "alpha");
    root.file("b.txt", "bravo!");
    let server = Server::start(Options::new(root.path(), arch));
    let mut conn = Conn::open(server.addr());
    for index in 0..100 {
        let (path, body): (&str, &[u8]) = if index % 2 == 0 { ("/a.txt", b"alpha") } else { ("/b.txt", b"bravo!") };
        let response = conn.get(path, &[]);
        assert_eq!(response.status, 200, "request {index}");
        assert_eq!(response.body, body, "request {index}");
        assert!(!response.connection_has("close"), "request {index} closed the connection");
    }
});

for_each_arch!(fn connection_close_is_honoured(arch) {
    let root = TempRoot::new();
    root.file("a.txt", "alpha");
    let server = Server::start(Options::new(root.path(), arch));
    let mut conn = Conn::open(server.addr());
    let response = conn.get("/a.txt", &[("Connection", "close")]);
    assert_eq!(response.status, 200);
    assert!(response.connection_has("close"), "{response:?}");
    assert!(conn.closed_within(Duration::from_secs(5)));
});

for_each_arch!(fn http10_closes_unless_keep_alive(arch) {
    let root = TempRoot::new();
    root.file("a.txt", "alpha");
    let server = Server::start(Options::new(root.path(), arch));
    let mut conn = Conn::open(server.addr());
    conn.send("GET /a.txt HTTP/1.0\r\n\r\n");
    let response = conn.read_response("GET");
    assert_eq!(response.status, 200);
    assert_eq!(response.body, b"alpha");
    assert!(conn.closed_within(Duration::from_secs(5)), "HTTP/1.0 closes by default");

    let mut conn = Conn::open(server.addr());
    for _ in 0..3 {
        conn.send("GET /a.txt HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
        let response = conn.read_response("GET");
        assert_eq!(response.status, 200);
        assert!(response.connection_has("keep-alive"), "{response:?}");
        assert_eq!(response.body, b"alpha");
    }
    conn.send("GET /a.txt HTTP/1.0\r\n\r\n");
    assert_eq!(conn.read_response("GET").status, 200);
    assert!(conn.closed_within(Duration::from_secs(5)));
});

for_each_arch!(fn twenty_pipelined_requests_answer_in_order(arch) {
    let root = TempRoot::new();
    let mut batch = Vec::new();
    for index in 0..20 {
        root.file(&format!("f{index}.txt"), format!("file number {index}").repeat(index + 1));
        batch.extend(build_request(if index == 7 { "HEAD" } else { "GET" }, &format!("/f{index}.txt"), &[]));
    }
    batch.extend(build_request("GET", "/missing", &[]));
    let server = Server::start(Options::new(root.path(), arch));
    let mut conn = Conn::open(server.addr());
    conn.send(&batch);
    for index in 0..20 {
        let method = if index == 7 { "HEAD" } else { "GET" };
        let response = conn.read_response(method);
        assert_eq!(response.status, 200, "response {index}");
        let expected = format!("file number {index}").repeat(index + 1);
        if method == "GET" {
            assert_eq!(response.body_text(), expected, "response {index} out of order");
        }
        assert_eq!(response.header("content-length"), Some(expected.len().to_string().as_str()));
    }
    assert_eq!(conn.read_response("GET").status, 404);
    // The connection is still alive.
    assert_eq!(conn.get("/f3.txt", &[]).status, 200);
});

// More pipelined output than the connection queues before it stops reading (256 KiB): each
// response must still be followed by the next, whether its file went out by `sendfile` (300 KiB)
// or from memory (60 KiB, below `sendfile_threshold`), and however fast the socket took it.
for_each_arch!(fn pipelined_large_files_all_answer(arch) {
    let root = TempRoot::new();
    let large = support::root::pattern_bytes(300 << 10, 3);
    let medium = support::root::pattern_bytes(60 << 10, 5);
    root.file("large.bin", &large);
    root.file("medium.bin", &medium);
    let server = Server::start(Options::new(root.path(), arch));
    for (path, body, count) in [("/large.bin", &large, 4), ("/medium.bin", &medium, 10)] {
        let mut conn = Conn::open(server.addr());
        let mut batch = Vec::new();
        for _ in 0..count {
            batch.extend(build_request("GET", path, &[]));
        }
        conn.send(&batch);
        for index in 0..count {
            let response = conn.read_response("GET");
            assert_eq!(response.status, 200, "{path}: response {index}");
            assert!(response.body == *body, "{path}: response {index} differs");
        }
    }
});

for_each_arch!(fn pipelined_in_tiny_writes(arch) {
    let root = TempRoot::new();
    root.file("a.txt", "alpha");
    let server = Server::start(Options::new(root.path(), arch));
    let mut conn = Conn::open(server.addr());
    let mut batch = build_request("GET", "/a.txt", &[]);
    batch.extend(build_request("GET", "/a.txt", &[]));
    for byte in batch.chunks(3) {
        conn.send(byte);
    }
    assert_eq!(conn.read_response("GET").body, b"alpha");
    assert_eq!(conn.read_response("GET").body, b"alpha");
});

for_each_arch!(fn get_body_is_discarded(arch) {
    let root = TempRoot::new();
    root.file("a.txt", "alpha");
    root.file("b.txt", "bravo");
    let server = Server::start(Options::new(root.path(), arch));
    let mut conn = Conn::open(server.addr());
    conn.send("GET /a.txt HTTP/1.1\r\nHost: t\r\nContent-Length: 11\r\n\r\nGET /b.txt ");
    assert_eq!(conn.read_response("GET").body, b"alpha");
    assert_eq!(conn.get("/b.txt", &[]).body, b"bravo");
    conn.send("GET /a.txt HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n3;ext=1\r\nabc\r\n0\r\nTrailer: x\r\n\r\n");
    assert_eq!(conn.read_response("GET").body, b"alpha");
    assert_eq!(conn.get("/b.txt", &[]).body, b"bravo");
});

for_each_arch!(fn body_over_max_is_413(arch) {
    let root = TempRoot::new();
    root.file("a.txt", "alpha");
    let server = Server::start(Options::new(root.path(), arch).args(["--max-body", "1024"]));
    let mut conn = Conn::open(server.addr());
    conn.send("GET /a.txt HTTP/1.1\r\nHost: t\r\nContent-Length: 1024\r\n\r\n");
    conn.send(vec![b'x'; 1024]);
    assert_eq!(conn.read_response("GET").status, 200, "exactly --max-body is allowed");
    conn.send("GET /a.txt HTTP/1.1\r\nHost: t\r\nContent-Length: 1025\r\n\r\n");
    let response = conn.read_response("GET");
    assert_eq!(response.status, 413, "{response:?}");
    assert!(response.connection_has("close"));
    assert!(conn.closed_within(Duration::from_secs(5)));
    // Default limit is 1 MiB, also for chunked bodies.
    drop(server);
    let server = Server::start(Options::new(root.path(), arch));
    let mut conn = Conn::open(server.addr());
    conn.send("GET /a.txt HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n");
    let chunk = vec![b'y'; 64 * 1024];
    let mut refused = false;
    for _ in 0..20 {
        let mut framed = format!("{:x}\r\n", chunk.len()).into_bytes();
        framed.extend_from_slice(&chunk);
        framed.extend_from_slice(b"\r\n");
        if conn.try_send(&framed).is_err() {
            refused = true;
            break;
        }
    }
    if !refused {
        let _ = conn.try_send(b"0\r\n\r\n");
    }
    let response = conn.read_response("GET");
    assert_eq!(response.status, 413, "{response:?}");
});

/// Reads raw bytes until the first blank line: one interim or final response head.
fn read_raw_head(conn: &Conn) -> String {
    let mut stream = conn.stream();
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        assert_eq!(
            support::read_some(&mut stream, &mut byte).expect("read a head"),
            1,
            "closed mid-head"
        );
        head.push(byte[0]);
    }
    String::from_utf8(head).unwrap()
}

for_each_arch!(fn expect_continue_invites_the_body_and_keeps_the_connection(arch) {
    let root = TempRoot::new();
    root.file("a.txt", "alpha");
    root.file("b.txt", "bravo");
    let server = Server::start(Options::new(root.path(), arch).args(["--max-body", "1024"]));
    let mut conn = Conn::open(server.addr());
    conn.send("GET /a.txt HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n");
    // The client holds its body back until invited (RFC 9110 §10.1.1).
    assert_eq!(read_raw_head(&conn), "HTTP/1.1 100 Continue\r\n\r\n");
    conn.send("hello");
    let response = conn.read_response("GET");
    assert_eq!((response.status, response.body.as_slice()), (200, &b"alpha"[..]));
    assert!(!response.connection_has("close"), "{response:?}");
    assert_eq!(conn.get("/b.txt", &[]).body, b"bravo");

    // A body over the limit is refused before the client sends it: no invitation.
    let mut conn = Conn::open(server.addr());
    conn.send("GET /a.txt HTTP/1.1\r\nHost: t\r\nContent-Length: 2048\r\nExpect: 100-continue\r\n\r\n");
    assert!(read_raw_head(&conn).starts_with("HTTP/1.1 413 "));
});

for_each_arch!(fn requests_behind_connection_close_do_not_destroy_the_response(arch) {
    let root = TempRoot::new();
    root.file("a.txt", "alpha");
    let server = Server::start(Options::new(root.path(), arch));
    let mut conn = Conn::open(server.addr());
    // The second request arrives after the server decided to close: it is never answered, and
    // the close lingers so the first response is not lost to a reset.
    let mut bytes = build_request("GET", "/a.txt", &[("Connection", "close")]);
    bytes.extend_from_slice(&build_request("GET", "/a.txt", &[]));
    conn.send(bytes);
    let response = conn.read_response("GET");
    assert_eq!((response.status, response.body.as_slice()), (200, &b"alpha"[..]));
    assert!(conn.closed_within(Duration::from_secs(5)));
});

for_each_arch!(fn a_client_that_waits_before_its_request_is_served(arch) {
    // The listener defers accept until the request arrives (TCP_DEFER_ACCEPT, 1 s): a client
    // quiet for longer than that must still be accepted and served.
    let root = TempRoot::new();
    root.file("a.txt", "alpha");
    let server = Server::start(Options::new(root.path(), arch));
    let mut conn = Conn::open(server.addr());
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(conn.get("/a.txt", &[]).body, b"alpha");
});

for_each_arch!(fn a_request_and_the_clients_close_arriving_together_end_the_connection_at_once(arch) {
    // Edge-triggered epoll reports bytes and a FIN that arrive together once: a short read of
    // the request must not leave the end of stream unread until the keep-alive timeout.
    let root = TempRoot::new();
    root.file("a.txt", "alpha");
    let server = Server::start(Options::new(root.path(), arch));
    for round in 0..20 {
        let mut conn = Conn::open(server.addr());
        assert_eq!(conn.get("/a.txt", &[]).status, 200, "round {round}");
        conn.send(build_request("GET", "/a.txt", &[]));
        conn.shutdown_write();
        assert_eq!(conn.read_response("GET").status, 200, "round {round}");
        assert!(
            conn.closed_within(Duration::from_secs(3)),
            "{arch} round {round}: the connection stayed open after the client's FIN"
        );
    }
});
