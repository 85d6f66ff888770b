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

// The `408` on a header timeout is followed by a lingering close under every engine (the one
// rule of `engine::core`): what the client still sends of its request is read and discarded
// rather than answered with a reset that could destroy the `408` on its way. The epoll engines
// used to close plainly here, and a client still sending got a reset.
for_each_arch!(fn timeout_answer_is_followed_by_lingering_close(arch) {
    let root = TempRoot::new();
    let server = Server::start(Options::new(root.path(), arch).args(["--header-timeout", "1"]));
    let mut conn = Conn::open(server.addr());
    conn.send("GET /slow.txt HTTP/1.1\r\nHost: t\r\n");
    conn.set_read_timeout(Duration::from_secs(4));
    let bytes = conn.read_to_end().expect("the 408, then the end of its stream");
    let responses = support::http::parse_all(&bytes, "GET");
    assert_eq!(responses.len(), 1);
    assert_eq!(responses[0].status, 408, "{:?}", responses[0]);
    // A closed socket answers the first late segment with a reset, which fails a later write
    // at once on loopback; a lingering one takes them (the linger timeout is seconds).
    let watch = Instant::now() + Duration::from_millis(300);
    while Instant::now() < watch {
        let sent = conn.try_send(b"X-Late: still sending\r\n");
        assert!(sent.is_ok(), "reset after the 408: {sent:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
});
