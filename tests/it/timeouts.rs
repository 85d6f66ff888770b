//! Slowloris defences: `--header-timeout` closes a connection stuck in a request head and
//! `--keepalive-timeout` closes an idle persistent connection, both within a bounded time.

use crate::support;

use std::time::{Duration, Instant};
use support::*;

for_each_arch!(fn half_request_line_is_closed(arch) {
    let root = TempRoot::new();
    root.file("ok.txt", "ok");
    let server = Server::start(Options::new(root.path(), arch).args(["--header-timeout", "1"]));
    let mut conn = Conn::open(server.addr());
    conn.send("GET /ok.tx");
    let started = Instant::now();
    // Either a 408 then a close, or a plain close.
    conn.set_read_timeout(Duration::from_secs(4));
    let bytes = conn.read_to_end().expect("read until close");
    let elapsed = started.elapsed();
    assert!(elapsed < Duration::from_secs(3), "closed after {elapsed:?}");
    if !bytes.is_empty() {
        let responses = support::http::parse_all(&bytes, "GET");
        assert_eq!(responses.len(), 1);
        assert_eq!(responses[0].status, 408, "{:?}", responses[0]);
    }
    // A request trickled in slowly but within the limit still works on another connection.
    let mut slow = Conn::open(server.addr());
    for piece in ["GET /ok", ".txt HTTP/1.1\r\n", "Host: t\r\n", "\r\n"] {
        slow.send(piece);
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(slow.read_response("GET").body, b"ok");
});

for_each_arch!(fn idle_keep_alive_is_closed(arch) {
    let root = TempRoot::new();
    root.file("ok.txt", "ok");
    let server = Server::start(Options::new(root.path(), arch).args(["--keepalive-timeout", "1"]));
    let mut conn = Conn::open(server.addr());
    assert_eq!(conn.get("/ok.txt", &[]).body, b"ok");
    let started = Instant::now();
    assert!(conn.closed_within(Duration::from_secs(4)), "idle connection still open after 4 s");
    assert!(started.elapsed() < Duration::from_secs(3), "closed after {:?}", started.elapsed());
    // A busy connection is not closed while requests keep coming faster than the timeout.
    let mut busy = Conn::open(server.addr());
    for _ in 0..6 {
        assert_eq!(busy.get("/ok.txt", &[]).body, b"ok");
        std::thread::sleep(Duration::from_millis(300));
    }
});
